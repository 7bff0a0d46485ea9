#!/usr/bin/env python3
"""tests/device/lib.py - the parts of tests/device/run that are easier in
Python (standard library only; no torch):

  nvml LIB OUT            the cards as NVML sees them, through ctypes on LIB
                          (libnvidia-ml.so.1, or the fake one): a JSON list of
                          {index, uuid, name, memory_used_mib, memory_total_mib}
  smi CSV OUT             nvidia-smi's --query-gpu=index,uuid,name,memory.used,
                          memory.total --format=csv,noheader,nounits as the
                          same JSON list
  cmp WHAT GPUS_JSON REF_JSON TOL
                          `cardbaton gpus --json` (the local node) against a
                          reference list: same indices, UUIDs, names, totals,
                          used memory within TOL MiB.  Prints one line (the
                          figure, or what differs); exit 0 when they agree
  card GPUS_JSON INDEX|first-idle FIELD
                          one field of a card (first-idle: the lowest idle one)
  job STATUS_JSON FIELD   a field of the one job in `status --json ID`
  handoff START END       median and p90 of next-start minus previous-end (ms),
                          as tests/bench/handoff.sh measures it: "MEDIAN P90 N"
"""
import ctypes
import json
import statistics
import sys


def nvml(lib, out):
    try:
        nv = ctypes.CDLL(lib)
    except OSError as e:
        print("cannot load %s: %s" % (lib, e))
        return 3
    def call(fn, *args):
        r = getattr(nv, fn)(*args)
        if r != 0:
            try:
                es = nv.nvmlErrorString
                es.restype = ctypes.c_char_p
                msg = es(r).decode()
            except Exception:
                msg = "?"
            raise RuntimeError("%s returned %d (%s)" % (fn, r, msg))

    class Mem(ctypes.Structure):
        _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                    ("used", ctypes.c_ulonglong)]

    class Mem2(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong),
                    ("reserved", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                    ("used", ctypes.c_ulonglong)]

    cards = []
    try:
        call("nvmlInit_v2")
        n = ctypes.c_uint()
        call("nvmlDeviceGetCount_v2", ctypes.byref(n))
        has_v2 = hasattr(nv, "nvmlDeviceGetMemoryInfo_v2")
        for i in range(n.value):
            h = ctypes.c_void_p()
            call("nvmlDeviceGetHandleByIndex_v2", ctypes.c_uint(i), ctypes.byref(h))
            buf = ctypes.create_string_buffer(96)
            call("nvmlDeviceGetUUID", h, buf, ctypes.c_uint(96))
            uuid = buf.value.decode()
            call("nvmlDeviceGetName", h, buf, ctypes.c_uint(96))
            name = buf.value.decode()
            m = Mem()
            call("nvmlDeviceGetMemoryInfo", h, ctypes.byref(m))
            total, used = m.total, m.used
            if has_v2:
                # R510 and later: `used` without the driver's reserve, as
                # nvidia-smi's memory.used (and the worker) report it.
                m2 = Mem2()
                m2.version = ctypes.sizeof(Mem2) | (2 << 24)
                call("nvmlDeviceGetMemoryInfo_v2", h, ctypes.byref(m2))
                total, used = m2.total, m2.used
            cards.append({"index": i, "uuid": uuid, "name": name,
                          "memory_used_mib": used >> 20, "memory_total_mib": total >> 20})
        nv.nvmlShutdown()
    except (RuntimeError, AttributeError) as e:
        print(str(e))
        return 1
    with open(out, "w") as f:
        json.dump(cards, f)
    return 0


def smi(csv, out):
    cards = []
    for line in open(csv):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        f = line.split(", ")
        if len(f) < 5:
            print("nvidia-smi line not understood: %r" % line)
            return 1
        # The name may contain ", ": it is what lies between the first two
        # and the last two fields.
        def num(s):
            try:
                return int(s)
            except ValueError:
                return None
        cards.append({"index": num(f[0]), "uuid": f[1], "name": ", ".join(f[2:-2]),
                      "memory_used_mib": num(f[-2]), "memory_total_mib": num(f[-1])})
    with open(out, "w") as f:
        json.dump(cards, f)
    return 0


def local_gpus(path):
    d = json.load(open(path))
    nodes = d["nodes"]
    if len(nodes) != 1:
        raise ValueError("%d nodes in gpus --json, expected 1" % len(nodes))
    if not nodes[0].get("reachable", True):
        raise ValueError("node %s unreachable: %s" % (nodes[0]["name"], nodes[0].get("error")))
    return nodes[0]["gpus"]


def cmp(what, gpus_json, ref_json, tol):
    try:
        g = local_gpus(gpus_json)
    except (ValueError, KeyError, OSError) as e:
        print("gpus --json: %s" % e)
        return 1
    ref = json.load(open(ref_json))
    bad = []
    if len(g) != len(ref):
        bad.append("%d cards in gpus --json, %d in %s" % (len(g), len(ref), what))
    drift = 0
    for a, b in zip(sorted(g, key=lambda c: c["index"]), sorted(ref, key=lambda c: c["index"])):
        for k in ("index", "uuid", "name", "memory_total_mib"):
            if a.get(k) != b.get(k):
                bad.append("card %s %s: gpus %r, %s %r" % (a.get("index"), k, a.get(k), what, b.get(k)))
        ua, ub = a.get("memory_used_mib"), b.get("memory_used_mib")
        if ua is None or ub is None:
            if ua != ub:
                bad.append("card %s memory_used_mib: gpus %r, %s %r" % (a.get("index"), ua, what, ub))
        else:
            drift = max(drift, abs(ua - ub))
            if abs(ua - ub) > tol:
                bad.append("card %s memory_used_mib: gpus %d, %s %d (more than %d apart)"
                           % (a.get("index"), ua, what, ub, tol))
    if bad:
        print("; ".join(bad))
        return 1
    print("%d cards agree (used memory within %d MiB)" % (len(g), drift))
    return 0


def card(gpus_json, which, field):
    g = sorted(local_gpus(gpus_json), key=lambda c: c["index"])
    if which == "first-idle":
        g = [c for c in g if c.get("idle")]
        if not g:
            return 1
        c = g[0]
    else:
        c = [c for c in g if c["index"] == int(which)]
        if not c:
            return 1
        c = c[0]
    v = c.get(field)
    print(json.dumps(v) if isinstance(v, (list, dict, bool)) or v is None else v)
    return 0


def job(status_json, field):
    j = json.load(open(status_json))["jobs"][0]
    v = j.get(field)
    print(json.dumps(v) if isinstance(v, (list, dict, bool)) or v is None else v)
    return 0


def handoff(start, end):
    s = [int(x) for x in open(start)]
    e = [int(x) for x in open(end)]
    gaps = sorted((s[i + 1] - e[i]) / 1e6 for i in range(min(len(s), len(e)) - 1))
    if not gaps:
        print("0 0 0")
        return 1
    p90 = gaps[int(0.9 * (len(gaps) - 1))]
    print("%.1f %.1f %d" % (statistics.median(gaps), p90, len(gaps)))
    return 0


def main(a):
    cmd = a[0]
    if cmd == "nvml":
        return nvml(a[1], a[2])
    if cmd == "smi":
        return smi(a[1], a[2])
    if cmd == "cmp":
        return cmp(a[1], a[2], a[3], int(a[4]))
    if cmd == "card":
        return card(a[1], a[2], a[3])
    if cmd == "job":
        return job(a[1], a[2])
    if cmd == "handoff":
        return handoff(a[1], a[2])
    print("lib.py: unknown command %s" % cmd, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
