/*
 * json.c - a small strict JSON reader (RFC 8259) for the checkpoint
 * marker; see json.h.  Recursive descent over a byte buffer with a
 * nesting limit, so that no input can run the stack out; strings are
 * decoded only where the answer needs them (the top-level keys and the
 * "checkpoint" value), and only validated elsewhere.  Self-contained
 * (libc only, nothing from the rest of the worker), so that a unit test
 * or a fuzzer can include it alone.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

/* Deeper nesting (in values of keys we ignore) is refused. */
#define CK_MAX_DEPTH 512

struct ck_buf {
	char *b;
	size_t n, cap;
};

struct ck_parser {
	const unsigned char *start, *p, *end;
	int depth;
	int nomem;
	char *why;              /* the first error, malloc'd */
};

/* What the top-level object said about "checkpoint". */
struct ck_top {
	size_t count;           /* times the key was seen */
	int is_string;          /* its (last) value was a string */
	struct ck_buf path;
};

/* Record the first error as "WHAT at offset N" (AT: the byte meant). */
static int ck_fail(struct ck_parser *j, const unsigned char *at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int ck_fail(struct ck_parser *j, const unsigned char *at, const char *fmt, ...)
{
	va_list ap;
	char what[128];         /* fixed messages and one byte: never a path */
	int n;
	size_t off = (size_t)(at - j->start);

	if (j->why || j->nomem)
		return -1;
	va_start(ap, fmt);
	n = vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	if (n < 0)
		what[0] = '\0';
	n = snprintf(NULL, 0, "%s at offset %zu", what, off);
	if (n >= 0 && (j->why = malloc((size_t)n + 1)) != NULL)
		snprintf(j->why, (size_t)n + 1, "%s at offset %zu", what, off);
	else
		j->nomem = 1;
	return -1;
}

/* "unexpected end of input", or the byte at P, shown readably. */
static int ck_unexpected(struct ck_parser *j, const char *wanted)
{
	unsigned char c;

	if (j->p >= j->end)
		return ck_fail(j, j->p, "unexpected end of input (expected %s)", wanted);
	c = *j->p;
	if (c > 0x20 && c < 0x7f && c != '\'')
		return ck_fail(j, j->p, "unexpected character '%c' (expected %s)", c, wanted);
	return ck_fail(j, j->p, "unexpected byte 0x%02x (expected %s)", c, wanted);
}

static int ck_put(struct ck_parser *j, struct ck_buf *b, const void *s, size_t n)
{
	if (!b)
		return 0;
	if (b->n + n + 1 > b->cap) {
		size_t nc = b->cap ? b->cap : 64;
		char *nb;

		while (nc < b->n + n + 1)
			nc *= 2;
		nb = realloc(b->b, nc);
		if (!nb) {
			j->nomem = 1;
			return -1;
		}
		b->b = nb;
		b->cap = nc;
	}
	memcpy(b->b + b->n, s, n);
	b->n += n;
	b->b[b->n] = '\0';
	return 0;
}

static void ck_ws(struct ck_parser *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

/* Length of the well-formed UTF-8 sequence of 2 to 4 bytes at S (N
 * bytes there), or 0 (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF). */
static size_t ck_utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	size_t len, i;

	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0;
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

/* Four hex digits at S (N bytes there): their value, or -1. */
static long ck_hex4(const unsigned char *s, size_t n)
{
	long v = 0;
	size_t i;

	if (n < 4)
		return -1;
	for (i = 0; i < 4; i++) {
		unsigned char c = s[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

static int ck_put_cp(struct ck_parser *j, struct ck_buf *b, unsigned long cp)
{
	unsigned char u[4];
	size_t n;

	if (cp < 0x80) {
		u[0] = (unsigned char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (unsigned char)(0xc0 | (cp >> 6));
		u[1] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (unsigned char)(0xe0 | (cp >> 12));
		u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		u[0] = (unsigned char)(0xf0 | (cp >> 18));
		u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		u[3] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	return ck_put(j, b, u, n);
}

/* A string at P (which is '"'), decoded into OUT when OUT is given. */
static int ck_string(struct ck_parser *j, struct ck_buf *out)
{
	const unsigned char *open = j->p;

	j->p++;
	for (;;) {
		const unsigned char *at = j->p;
		unsigned char c;

		if (j->p >= j->end)
			return ck_fail(j, open, "unterminated string");
		c = *j->p;
		if (c == '"') {
			j->p++;
			return 0;
		}
		if (c < 0x20)
			return ck_fail(j, at, "control character 0x%02x in a string", c);
		if (c >= 0x80) {
			size_t n = ck_utf8_len(j->p, (size_t)(j->end - j->p));

			if (n == 0)
				return ck_fail(j, at, "invalid UTF-8 in a string");
			if (ck_put(j, out, j->p, n) < 0)
				return -1;
			j->p += n;
			continue;
		}
		if (c != '\\') {
			if (ck_put(j, out, &c, 1) < 0)
				return -1;
			j->p++;
			continue;
		}
		/* An escape. */
		if (++j->p >= j->end)
			return ck_fail(j, open, "unterminated string");
		c = *j->p++;
		switch (c) {
		case '"': case '\\': case '/':
			break;
		case 'b': c = '\b'; break;
		case 'f': c = '\f'; break;
		case 'n': c = '\n'; break;
		case 'r': c = '\r'; break;
		case 't': c = '\t'; break;
		case 'u': {
			long cp = ck_hex4(j->p, (size_t)(j->end - j->p)), lo;

			if (cp < 0)
				return ck_fail(j, at, "invalid \\u escape (4 hex digits needed)");
			j->p += 4;
			if (cp >= 0xdc00 && cp <= 0xdfff)
				return ck_fail(j, at, "unpaired surrogate \\u%04lX", cp);
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (j->end - j->p < 2 || j->p[0] != '\\' || j->p[1] != 'u' ||
				    (lo = ck_hex4(j->p + 2, (size_t)(j->end - j->p - 2))) < 0xdc00 ||
				    lo > 0xdfff)
					return ck_fail(j, at, "unpaired surrogate \\u%04lX", cp);
				j->p += 6;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			}
			if (ck_put_cp(j, out, (unsigned long)cp) < 0)
				return -1;
			continue;
		}
		default:
			if (c > 0x20 && c < 0x7f)
				return ck_fail(j, at, "invalid escape \\%c", c);
			return ck_fail(j, at, "invalid escape (backslash and byte 0x%02x)", c);
		}
		if (ck_put(j, out, &c, 1) < 0)
			return -1;
	}
}

static int ck_digits(struct ck_parser *j)
{
	if (j->p >= j->end || *j->p < '0' || *j->p > '9')
		return -1;
	while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
		j->p++;
	return 0;
}

/* -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? */
static int ck_number(struct ck_parser *j)
{
	const unsigned char *at = j->p;

	if (*j->p == '-')
		j->p++;
	if (j->p < j->end && *j->p == '0')
		j->p++;
	else if (ck_digits(j) < 0)
		return ck_fail(j, at, "invalid number");
	if (j->p < j->end && *j->p == '.') {
		j->p++;
		if (ck_digits(j) < 0)
			return ck_fail(j, at, "invalid number");
	}
	if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
		j->p++;
		if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
			j->p++;
		if (ck_digits(j) < 0)
			return ck_fail(j, at, "invalid number");
	}
	return 0;
}

static int ck_literal(struct ck_parser *j, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0)
		return ck_unexpected(j, "a value");
	j->p += n;
	return 0;
}

static int ck_value(struct ck_parser *j);

/* An object at P (which is '{'); TOP is given for the outermost one. */
static int ck_object(struct ck_parser *j, struct ck_top *top)
{
	struct ck_buf key = { 0 };
	int rc = -1;

	if (++j->depth > CK_MAX_DEPTH)
		return ck_fail(j, j->p, "nested deeper than %d levels", CK_MAX_DEPTH);
	j->p++;
	ck_ws(j);
	if (j->p < j->end && *j->p == '}') {
		j->p++;
		j->depth--;
		return 0;
	}
	for (;;) {
		int is_ck;

		ck_ws(j);
		if (j->p >= j->end || *j->p != '"') {
			ck_unexpected(j, "a string key");
			goto out;
		}
		key.n = 0;
		if (ck_string(j, top ? &key : NULL) < 0)
			goto out;
		is_ck = top && key.n == 10 && memcmp(key.b, "checkpoint", 10) == 0;
		ck_ws(j);
		if (j->p >= j->end || *j->p != ':') {
			ck_unexpected(j, "':'");
			goto out;
		}
		j->p++;
		ck_ws(j);
		if (is_ck) {
			top->count++;
			top->is_string = j->p < j->end && *j->p == '"';
			top->path.n = 0;
			if (top->path.b)
				top->path.b[0] = '\0';
			if (top->is_string ? ck_string(j, &top->path) < 0 : ck_value(j) < 0)
				goto out;
		} else if (ck_value(j) < 0) {
			goto out;
		}
		ck_ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			continue;
		}
		if (j->p < j->end && *j->p == '}') {
			j->p++;
			break;
		}
		ck_unexpected(j, "',' or '}'");
		goto out;
	}
	j->depth--;
	rc = 0;
out:
	free(key.b);
	return rc;
}

static int ck_array(struct ck_parser *j)
{
	if (++j->depth > CK_MAX_DEPTH)
		return ck_fail(j, j->p, "nested deeper than %d levels", CK_MAX_DEPTH);
	j->p++;
	ck_ws(j);
	if (j->p < j->end && *j->p == ']') {
		j->p++;
		j->depth--;
		return 0;
	}
	for (;;) {
		ck_ws(j);
		if (ck_value(j) < 0)
			return -1;
		ck_ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			continue;
		}
		if (j->p < j->end && *j->p == ']') {
			j->p++;
			break;
		}
		return ck_unexpected(j, "',' or ']'");
	}
	j->depth--;
	return 0;
}

/* Any value at P (whitespace before it already skipped). */
static int ck_value(struct ck_parser *j)
{
	if (j->p >= j->end)
		return ck_unexpected(j, "a value");
	switch (*j->p) {
	case '{':
		return ck_object(j, NULL);
	case '[':
		return ck_array(j);
	case '"':
		return ck_string(j, NULL);
	case 't':
		return ck_literal(j, "true");
	case 'f':
		return ck_literal(j, "false");
	case 'n':
		return ck_literal(j, "null");
	case '-': case '0': case '1': case '2': case '3': case '4':
	case '5': case '6': case '7': case '8': case '9':
		return ck_number(j);
	default:
		return ck_unexpected(j, "a value");
	}
}

enum ck_status ck_marker_parse(const char *buf, size_t len, char **path, size_t *plen,
			       char **why)
{
	struct ck_parser j;
	struct ck_top top;
	int object, rc;

	*path = NULL;
	*plen = 0;
	*why = NULL;
	memset(&j, 0, sizeof j);
	memset(&top, 0, sizeof top);
	j.start = j.p = (const unsigned char *)buf;
	j.end = j.start + len;
	ck_ws(&j);
	if (j.p >= j.end) {
		ck_fail(&j, j.p, "no JSON value (empty input)");
		rc = -1;
		object = 0;
	} else {
		object = *j.p == '{';
		rc = object ? ck_object(&j, &top) : ck_value(&j);
		if (rc == 0) {
			ck_ws(&j);
			if (j.p < j.end)
				rc = ck_fail(&j, j.p, "trailing characters after the JSON value");
		}
	}
	if (rc < 0) {
		free(top.path.b);
		if (j.nomem) {
			free(j.why);
			return CK_NOMEM;
		}
		*why = j.why;
		return CK_INVALID;
	}
	if (!object || top.count != 1 || !top.is_string || top.path.n == 0 ||
	    memchr(top.path.b, '\0', top.path.n)) {
		free(top.path.b);
		return !object ? CK_NOT_OBJECT : top.count > 1 ? CK_DUP :
		       !top.is_string || top.path.n == 0 ? CK_NO_PATH : CK_NUL;
	}
	*path = top.path.b;
	*plen = top.path.n;
	return CK_OK;
}
