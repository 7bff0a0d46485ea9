/*
 * wire.c - the controller <-> worker record format (see wire.h and
 * LAYOUT.md section 10).
 *
 * libc only, C11 + POSIX: this file is compiled into cardbaton-worker,
 * which is shipped as source to nodes and built there with nothing but
 * "cc -std=c11 -D_GNU_SOURCE".
 *
 * Writing escapes every byte below 0x21, 0x7f and '%' as %XX (upper
 * case); everything else, UTF-8 included, is written as it is.  Reading
 * is strict about the grammar (a key of [a-z0-9_]+, one space, a value
 * without raw control bytes or spaces, LF) so that what one side writes
 * is exactly what the other reads, and it accepts %xx in either case.
 * A value never holds a NUL: %00 is refused.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wire.h"

static int key_ok(const char *k, size_t n)
{
	size_t i;

	if (n == 0)
		return 0;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)k[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
			return 0;
	}
	return 1;
}

static int needs_escape(unsigned char c)
{
	return c < 0x21 || c == 0x7f || c == '%';
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Append a field that owns KEY and VAL (already allocated). */
static int add_owned(struct wire_rec *r, char *key, char *val, size_t len)
{
	if (r->n == r->cap) {
		size_t ncap = r->cap ? r->cap * 2 : 16;
		struct wire_field *nf;

		if (ncap > SIZE_MAX / sizeof *nf) {
			errno = ENOMEM;
			return -1;
		}
		nf = realloc(r->f, ncap * sizeof *nf);
		if (!nf) {
			errno = ENOMEM;
			return -1;
		}
		r->f = nf;
		r->cap = ncap;
	}
	r->f[r->n].key = key;
	r->f[r->n].val = val;
	r->f[r->n].len = len;
	r->n++;
	return 0;
}

static char *memdup0(const char *p, size_t n)
{
	char *s;

	if (n == SIZE_MAX) {
		errno = ENOMEM;
		return NULL;
	}
	s = malloc(n + 1);
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	if (n)
		memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

int wire_addn(struct wire_rec *r, const char *key, const char *val, size_t len)
{
	char *k, *v;

	if (!key || !key_ok(key, strlen(key)) || (!val && len)) {
		errno = EINVAL;
		return -1;
	}
	k = memdup0(key, strlen(key));
	v = memdup0(val ? val : "", len);
	if (!k || !v || add_owned(r, k, v, len) < 0) {
		free(k);
		free(v);
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

int wire_add(struct wire_rec *r, const char *key, const char *val)
{
	return wire_addn(r, key, val ? val : "", val ? strlen(val) : 0);
}

int wire_addf(struct wire_rec *r, const char *key, const char *fmt, ...)
{
	va_list ap, ap2;
	int n;
	char *s;

	va_start(ap, fmt);
	va_copy(ap2, ap);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		va_end(ap2);
		errno = EINVAL;
		return -1;
	}
	s = malloc((size_t)n + 1);
	if (!s) {
		va_end(ap2);
		errno = ENOMEM;
		return -1;
	}
	if (vsnprintf(s, (size_t)n + 1, fmt, ap2) != n) {
		va_end(ap2);
		free(s);
		errno = EINVAL;
		return -1;
	}
	va_end(ap2);
	n = wire_addn(r, key, s, (size_t)n);
	free(s);
	return n;
}

int wire_set(struct wire_rec *r, const char *key, const char *val)
{
	size_t i, len = val ? strlen(val) : 0;
	char *v;

	if (!key || !key_ok(key, strlen(key))) {
		errno = EINVAL;
		return -1;
	}
	for (i = 0; i < r->n; i++) {
		if (strcmp(r->f[i].key, key) == 0) {
			v = memdup0(val ? val : "", len);
			if (!v)
				return -1;
			free(r->f[i].val);
			r->f[i].val = v;
			r->f[i].len = len;
			return 0;
		}
	}
	return wire_add(r, key, val);
}

const char *wire_get(const struct wire_rec *r, const char *key)
{
	size_t i;

	for (i = 0; i < r->n; i++)
		if (strcmp(r->f[i].key, key) == 0)
			return r->f[i].val;
	return NULL;
}

int wire_get_ll(const struct wire_rec *r, const char *key, long long *out)
{
	size_t i;
	const char *s = NULL, *p;
	size_t len = 0;
	long long v = 0;
	int neg;

	for (i = 0; i < r->n; i++) {
		if (strcmp(r->f[i].key, key) == 0) {
			s = r->f[i].val;
			len = r->f[i].len;
			break;
		}
	}
	if (!s || len == 0 || strlen(s) != len)
		return -1;
	p = s;
	neg = *p == '-';
	if (neg)
		p++;
	if (*p == '\0')
		return -1;
	/* By hand rather than strtoll: no leading spaces or '+', and
	 * LLONG_MIN still fits. */
	for (; *p; p++) {
		int d;

		if (*p < '0' || *p > '9')
			return -1;
		d = *p - '0';
		if (neg) {
			if (v < (LLONG_MIN + d) / 10)
				return -1;
			v = v * 10 - d;
		} else {
			if (v > (LLONG_MAX - d) / 10)
				return -1;
			v = v * 10 + d;
		}
	}
	*out = v;
	return 0;
}

void wire_free(struct wire_rec *r)
{
	size_t i;

	if (!r)
		return;
	for (i = 0; i < r->n; i++) {
		free(r->f[i].key);
		free(r->f[i].val);
	}
	free(r->f);
	r->f = NULL;
	r->n = r->cap = 0;
}

long wire_format(const struct wire_rec *r, char **out)
{
	size_t need = 4, i, j, o = 0;     /* "end\n" */
	char *b;
	static const char hex[] = "0123456789ABCDEF";

	for (i = 0; i < r->n; i++) {
		size_t fl = strlen(r->f[i].key) + 2;

		for (j = 0; j < r->f[i].len; j++)
			fl += needs_escape((unsigned char)r->f[i].val[j]) ? 3 : 1;
		if (need > (size_t)LONG_MAX - fl) {
			errno = EOVERFLOW;
			return -1;
		}
		need += fl;
	}
	b = malloc(need + 1);
	if (!b) {
		errno = ENOMEM;
		return -1;
	}
	for (i = 0; i < r->n; i++) {
		size_t kl = strlen(r->f[i].key);

		memcpy(b + o, r->f[i].key, kl);
		o += kl;
		b[o++] = ' ';
		for (j = 0; j < r->f[i].len; j++) {
			unsigned char c = (unsigned char)r->f[i].val[j];

			if (needs_escape(c)) {
				b[o++] = '%';
				b[o++] = hex[c >> 4];
				b[o++] = hex[c & 15];
			} else {
				b[o++] = (char)c;
			}
		}
		b[o++] = '\n';
	}
	memcpy(b + o, "end\n", 4);
	o += 4;
	b[o] = '\0';
	*out = b;
	return (long)o;
}

/* Decode one line (without its LF) into R.  0, or -1 with *why. */
static int parse_line(const char *l, size_t n, struct wire_rec *r, const char **why)
{
	const char *sp = memchr(l, ' ', n);
	size_t kl, i, vl = 0;
	char *k, *v;

	if (!sp) {
		*why = "line without a space after the key";
		errno = EINVAL;
		return -1;
	}
	kl = (size_t)(sp - l);
	if (!key_ok(l, kl)) {
		*why = "bad key (not [a-z0-9_]+)";
		errno = EINVAL;
		return -1;
	}
	v = malloc(n - kl);     /* the value is at most n - kl - 1 bytes */
	if (!v) {
		errno = ENOMEM;
		return -1;
	}
	for (i = kl + 1; i < n; i++) {
		unsigned char c = (unsigned char)l[i];

		if (c == '%') {
			int hi, lo;

			if (i + 2 >= n) {
				free(v);
				*why = "truncated %XX escape";
				errno = EINVAL;
				return -1;
			}
			hi = hexval((unsigned char)l[i + 1]);
			lo = hexval((unsigned char)l[i + 2]);
			if (hi < 0 || lo < 0) {
				free(v);
				*why = "bad %XX escape";
				errno = EINVAL;
				return -1;
			}
			if (!(hi | lo)) {
				/* Every reader takes values as C strings: one
				 * cut short at a NUL would mean something else. */
				free(v);
				*why = "%00 (a NUL byte) in a value";
				errno = EINVAL;
				return -1;
			}
			v[vl++] = (char)(hi << 4 | lo);
			i += 2;
		} else if (c < 0x21 || c == 0x7f) {
			free(v);
			*why = "unescaped control byte or space in a value";
			errno = EINVAL;
			return -1;
		} else {
			v[vl++] = (char)c;
		}
	}
	v[vl] = '\0';
	k = memdup0(l, kl);
	if (!k || add_owned(r, k, v, vl) < 0) {
		free(k);
		free(v);
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

long wire_parse(const char *buf, size_t len, struct wire_rec *r, const char **why)
{
	size_t pos = 0;
	static const char *dummy;

	if (!why)
		why = &dummy;
	*why = NULL;
	while (pos < len) {
		const char *nl = memchr(buf + pos, '\n', len - pos);
		size_t ll;

		if (!nl)
			break;
		ll = (size_t)(nl - (buf + pos));
		if (pos + ll + 1 > WIRE_MAX_RECORD) {
			wire_free(r);
			*why = "record too long";
			errno = EINVAL;
			return -1;
		}
		if (ll == 3 && memcmp(buf + pos, "end", 3) == 0)
			return (long)(pos + 4);
		if (parse_line(buf + pos, ll, r, why) < 0) {
			int e = errno;

			wire_free(r);
			errno = e;
			return -1;
		}
		pos += ll + 1;
	}
	/* No complete record yet. */
	wire_free(r);
	if (len > WIRE_MAX_RECORD) {
		*why = "record too long";
		errno = EINVAL;
		return -1;
	}
	return 0;
}

int wire_read(FILE *fp, struct wire_rec *r, const char **why)
{
	char *b = NULL;
	size_t n = 0, cap = 0, line_start = 0;
	int c;
	long got;
	static const char *dummy;

	if (!why)
		why = &dummy;
	*why = NULL;
	errno = 0;
	for (;;) {
		c = getc(fp);
		if (c == EOF) {
			int err = ferror(fp);

			free(b);
			if (err) {
				if (!errno)
					errno = EIO;
				return -1;
			}
			if (n == 0)
				return 0;
			*why = "record truncated (no \"end\" line)";
			errno = EINVAL;
			return -1;
		}
		if (n >= WIRE_MAX_RECORD) {
			free(b);
			*why = "record too long";
			errno = EMSGSIZE;
			return -1;
		}
		if (n + 1 >= cap) {
			size_t ncap = cap ? cap * 2 : 256;
			char *nb;

			nb = realloc(b, ncap);
			if (!nb) {
				free(b);
				errno = ENOMEM;
				return -1;
			}
			b = nb;
			cap = ncap;
		}
		b[n++] = (char)c;
		if (c != '\n')
			continue;
		if (n - line_start == 4 && memcmp(b + line_start, "end\n", 4) == 0)
			break;
		line_start = n;
	}
	got = wire_parse(b, n, r, why);
	free(b);
	if (got <= 0) {
		if (got == 0) {         /* cannot happen: we stopped at "end" */
			*why = "record truncated";
			errno = EINVAL;
		}
		return -1;
	}
	return 1;
}

int wire_write_fd(int fd, const struct wire_rec *r)
{
	char *b;
	long n = wire_format(r, &b);
	size_t off = 0;

	if (n < 0)
		return -1;
	while (off < (size_t)n) {
		ssize_t w = write(fd, b + off, (size_t)n - off);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			free(b);
			return -1;
		}
		off += (size_t)w;
	}
	free(b);
	return 0;
}

static const char *const wire_state_names[WS_N] = {
	[WS_STARTING] = "starting", [WS_BUSY] = "busy", [WS_RUNNING] = "running",
	[WS_PAUSING] = "pausing", [WS_PAUSED] = "paused", [WS_SUCCEEDED] = "succeeded",
	[WS_FAILED] = "failed", [WS_CANCELLED] = "cancelled", [WS_LOST] = "lost",
	[WS_UNKNOWN] = "unknown", [WS_STAGED] = "staged", [WS_UNSTAGED] = "unstaged",
};

const char *wire_state_name(enum wire_state s)
{
	return (unsigned)s < WS_N ? wire_state_names[s] : "?";
}

int wire_state_parse(const char *s, enum wire_state *out)
{
	for (int i = 0; s && i < WS_N; i++)
		if (!strcmp(s, wire_state_names[i])) {
			*out = (enum wire_state)i;
			return 0;
		}
	return -1;
}

int wire_state_final(enum wire_state s)
{
	return s == WS_PAUSED || s == WS_SUCCEEDED || s == WS_FAILED || s == WS_CANCELLED ||
	       s == WS_LOST || s == WS_UNSTAGED;
}
