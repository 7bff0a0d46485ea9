/*
 * sha256.c - SHA-256 (FIPS 180-4), streaming (base.h).
 *
 * Written for the checkpoint stream (worker/ckpt.c), which hashes
 * every byte it sends or receives: whole 64-byte blocks are compressed
 * straight from the caller's buffer, and only a partial block at
 * either end of an update is copied into the context.  Portable C:
 * big-endian loads and stores are done byte by byte (no alignment or
 * byte-order assumption), and the compiler keeps the rounds in
 * registers at -O2.  On x86-64 with the SHA extensions (cpuid, asked
 * once) the blocks go through them instead (blocks_ni): some five
 * times faster, the same digests (tests/unit/test_base.c checks both
 * ways).
 */
#include <string.h>

#include "base.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(CB_SHA256_PORTABLE)
#define SHA_NI 1
#include <cpuid.h>
#include <immintrin.h>
#endif

int sha256_portable;

/* The first 32 bits of the fractional parts of the cube roots of the
 * first 64 primes (FIPS 180-4 section 4.2.2). */
static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))
#define CH(x, y, z) (((x) & (y)) ^ (~(x) & (z)))
#define MAJ(x, y, z) (((x) & (y)) ^ ((x) & (z)) ^ ((y) & (z)))
#define S0(x) (ROR(x, 2) ^ ROR(x, 13) ^ ROR(x, 22))
#define S1(x) (ROR(x, 6) ^ ROR(x, 11) ^ ROR(x, 25))
#define s0(x) (ROR(x, 7) ^ ROR(x, 18) ^ ((x) >> 3))
#define s1(x) (ROR(x, 17) ^ ROR(x, 19) ^ ((x) >> 10))

static uint32_t load_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void store_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

#ifdef SHA_NI
/*
 * The same with the SHA extensions (Intel's "SHA extensions" paper's
 * arrangement): the state as ABEF and CDGH, two rounds per
 * sha256rnds2, the schedule W[i] (four words) from W[i-4..i-1] by
 * sha256msg1, the words t-7, and sha256msg2.
 */
__attribute__((target("sha,sse4.1,ssse3")))
static void blocks_ni(uint32_t h[8], const unsigned char *p, size_t n)
{
	const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
	__m128i t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)(const void *)&h[0]), 0xb1);
	__m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)(const void *)&h[4]), 0x1b);
	__m128i s0 = _mm_alignr_epi8(t, s1, 8);         /* ABEF */

	s1 = _mm_blend_epi16(s1, t, 0xf0);               /* CDGH */
	for (; n; n--, p += 64) {
		__m128i w[4], m, abef = s0, cdgh = s1;

		for (int i = 0; i < 16; i++) {
			if (i < 4) {
				w[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)(p + 16 * i)),
							bswap);
			} else {
				m = _mm_sha256msg1_epu32(w[i & 3], w[(i - 3) & 3]);
				m = _mm_add_epi32(m, _mm_alignr_epi8(w[(i - 1) & 3], w[(i - 2) & 3], 4));
				w[i & 3] = _mm_sha256msg2_epu32(m, w[(i - 1) & 3]);
			}
			m = _mm_add_epi32(w[i & 3], _mm_loadu_si128((const __m128i *)(const void *)&K[4 * i]));
			s1 = _mm_sha256rnds2_epu32(s1, s0, m);
			s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(m, 0x0e));
		}
		s0 = _mm_add_epi32(s0, abef);
		s1 = _mm_add_epi32(s1, cdgh);
	}
	t = _mm_shuffle_epi32(s0, 0x1b);                /* FEBA */
	s1 = _mm_shuffle_epi32(s1, 0xb1);               /* DCHG */
	_mm_storeu_si128((__m128i *)(void *)&h[0], _mm_blend_epi16(t, s1, 0xf0));     /* DCBA */
	_mm_storeu_si128((__m128i *)(void *)&h[4], _mm_alignr_epi8(s1, t, 8));        /* HGFE */
}

/* Has this CPU the SHA extensions (and SSSE3, SSE4.1)?  Asked once. */
static int have_ni(void)
{
	static int known = -1;
	unsigned a, b, c, d;

	if (known < 0) {
		known = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSSE3) && (c & bit_SSE4_1) &&
			__get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_SHA);
	}
	return known;
}
#endif

static void blocks_c(uint32_t h[8], const unsigned char *p, size_t n);

/* Compress N consecutive 64-byte blocks at P into H. */
static void blocks(uint32_t h[8], const unsigned char *p, size_t n)
{
#ifdef SHA_NI
	if (!sha256_portable && have_ni()) {
		blocks_ni(h, p, n);
		return;
	}
#endif
	blocks_c(h, p, n);
}

static void blocks_c(uint32_t h[8], const unsigned char *p, size_t n)
{
	for (; n; n--, p += 64) {
		uint32_t w[64], a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6],
			 hh = h[7];
		int i;

		for (i = 0; i < 16; i++)
			w[i] = load_be32(p + 4 * i);
		for (; i < 64; i++)
			w[i] = s1(w[i - 2]) + w[i - 7] + s0(w[i - 15]) + w[i - 16];
		for (i = 0; i < 64; i++) {
			uint32_t t1 = hh + S1(e) + CH(e, f, g) + K[i] + w[i], t2 = S0(a) + MAJ(a, b, c);

			hh = g;
			g = f;
			f = e;
			e = d + t1;
			d = c;
			c = b;
			b = a;
			a = t1 + t2;
		}
		h[0] += a;
		h[1] += b;
		h[2] += c;
		h[3] += d;
		h[4] += e;
		h[5] += f;
		h[6] += g;
		h[7] += hh;
	}
}

void sha256_init(struct sha256 *s)
{
	/* The first 32 bits of the fractional parts of the square roots
	 * of the first 8 primes (section 5.3.3). */
	static const uint32_t h0[8] = {
		0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
		0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
	};

	memcpy(s->h, h0, sizeof h0);
	s->len = 0;
	s->nbuf = 0;
}

void sha256_update(struct sha256 *s, const void *data, size_t len)
{
	const unsigned char *p = data;

	s->len += len;
	/* Top up a partial block first. */
	if (s->nbuf) {
		size_t take = 64 - s->nbuf < len ? 64 - s->nbuf : len;

		memcpy(s->buf + s->nbuf, p, take);
		s->nbuf += take;
		p += take;
		len -= take;
		if (s->nbuf < 64)
			return;
		blocks(s->h, s->buf, 1);
		s->nbuf = 0;
	}
	/* Whole blocks from the caller's buffer, no copy. */
	if (len >= 64) {
		blocks(s->h, p, len / 64);
		p += len / 64 * 64;
		len %= 64;
	}
	if (len) {
		memcpy(s->buf, p, len);
		s->nbuf = len;
	}
}

void sha256_final(struct sha256 *s, unsigned char out[32])
{
	/* Padding (section 5.1.1): 0x80, zeros up to 56 mod 64, then the
	 * message length in bits, big-endian, 64 bits. */
	uint64_t bits = s->len * 8;
	size_t n = s->nbuf;
	int i;

	s->buf[n++] = 0x80;
	if (n > 56) {
		memset(s->buf + n, 0, 64 - n);
		blocks(s->h, s->buf, 1);
		n = 0;
	}
	memset(s->buf + n, 0, 56 - n);
	store_be32(s->buf + 56, (uint32_t)(bits >> 32));
	store_be32(s->buf + 60, (uint32_t)bits);
	blocks(s->h, s->buf, 1);
	for (i = 0; i < 8; i++)
		store_be32(out + 4 * i, s->h[i]);
	/* Nothing of the message stays behind in the context. */
	memset(s, 0, sizeof *s);
}

void sha256_hex(const unsigned char d[32], char out[65])
{
	static const char hex[] = "0123456789abcdef";
	int i;

	for (i = 0; i < 32; i++) {
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 15];
	}
	out[64] = '\0';
}
