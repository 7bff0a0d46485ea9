#!/usr/bin/env python3
"""tests/lib/png.py - a small PNG reader (stdlib only: zlib, struct) for
the suites that check a screenshot (tests/e2e/report.bats).

It decodes what a browser's screenshot is: 8-bit truecolour (RGB) or
truecolour with alpha (RGBA), greyscale (with or without alpha), not
interlaced, with the five scanline filters of the PNG specification
(None, Sub, Up, Average, Paeth).  Anything else is refused with a
clear error, never misread.

As a program:

    png.py FILE                  size, distinct colours, the most common one
    png.py FILE count RRGGBB [TOL]
                                 pixels within TOL (default 6) of the colour
                                 in every channel, printed as a number

The library part: decode(bytes) -> (width, height, rows), each row a
list of (r, g, b) tuples.
"""
import struct
import sys
import zlib
from collections import Counter

SIGNATURE = b"\x89PNG\r\n\x1a\n"
# colour type -> channels
CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}


def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def decode(data):
    if data[:8] != SIGNATURE:
        raise ValueError("not a PNG file")
    pos, idat, ihdr = 8, [], None
    while pos + 8 <= len(data):
        length, ctype = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if len(body) != length:
            raise ValueError("truncated chunk %r" % ctype)
        pos += 12 + length
        if ctype == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif ctype == b"IDAT":
            idat.append(body)
        elif ctype == b"IEND":
            break
    if ihdr is None:
        raise ValueError("no IHDR chunk")
    width, height, depth, colour, _comp, _filt, interlace = ihdr
    if depth != 8 or colour not in CHANNELS or interlace != 0:
        raise ValueError("unsupported PNG: depth %d, colour type %d, interlace %d"
                         % (depth, colour, interlace))
    bpp = CHANNELS[colour]
    stride = width * bpp
    raw = zlib.decompress(b"".join(idat))
    if len(raw) < height * (stride + 1):
        raise ValueError("image data too short")
    rows, prev = [], bytearray(stride)
    for y in range(height):
        off = y * (stride + 1)
        ftype = raw[off]
        line = bytearray(raw[off + 1:off + 1 + stride])
        if ftype == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif ftype == 2:
            for i in range(stride):
                line[i] = (line[i] + prev[i]) & 0xFF
        elif ftype == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif ftype == 4:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                upleft = prev[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + _paeth(left, prev[i], upleft)) & 0xFF
        elif ftype != 0:
            raise ValueError("bad filter type %d in row %d" % (ftype, y))
        if colour in (0, 4):
            px = [(v, v, v) for v in line[::bpp]]
        else:
            px = [tuple(line[i:i + 3]) for i in range(0, stride, bpp)]
        rows.append(px)
        prev = line
    return width, height, rows


def count(rows, rgb, tol=6):
    r0, g0, b0 = rgb
    return sum(1 for row in rows for (r, g, b) in row
               if abs(r - r0) <= tol and abs(g - g0) <= tol and abs(b - b0) <= tol)


def main(argv):
    if len(argv) < 2:
        sys.exit("usage: png.py FILE [count RRGGBB [TOL]]")
    with open(argv[1], "rb") as f:
        width, height, rows = decode(f.read())
    if len(argv) >= 4 and argv[2] == "count":
        h = argv[3].lstrip("#")
        rgb = (int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16))
        print(count(rows, rgb, int(argv[4]) if len(argv) > 4 else 6))
        return
    colours = Counter(p for row in rows for p in row)
    top = colours.most_common(1)[0]
    print("%dx%d colours %d most %02x%02x%02x %d"
          % (width, height, len(colours), top[0][0], top[0][1], top[0][2], top[1]))


if __name__ == "__main__":
    main(sys.argv)
