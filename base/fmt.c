/*
 * fmt.c - formatted strings and growing buffers (base.h).  vsnprintf
 * only, no vasprintf: the worker is compiled with whatever libc a node
 * has.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

char *vxasprintf(const char *fmt, va_list ap)
{
	va_list ap2;
	int n;
	char *s;

	va_copy(ap2, ap);
	n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0 || !(s = malloc((size_t)n + 1))) {
		errno = ENOMEM;
		return NULL;
	}
	if (vsnprintf(s, (size_t)n + 1, fmt, ap) != n) {
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	return s;
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = vxasprintf(fmt, ap);
	va_end(ap);
	return s;
}

int sbuf_add(struct sbuf *b, const void *p, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		char *s;

		while (cap < b->len + n + 1) {
			if (cap > SIZE_MAX / 2) {
				errno = ENOMEM;
				return -1;
			}
			cap *= 2;
		}
		if (!(s = realloc(b->s, cap)))
			return -1;
		b->s = s;
		b->cap = cap;
	}
	if (n)
		memcpy(b->s + b->len, p, n);
	b->len += n;
	b->s[b->len] = '\0';
	return 0;
}

int sbuf_addf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int r;

	va_start(ap, fmt);
	s = vxasprintf(fmt, ap);
	va_end(ap);
	if (!s)
		return -1;
	r = sbuf_add(b, s, strlen(s));
	free(s);
	return r;
}

void sbuf_free(struct sbuf *b)
{
	free(b->s);
	b->s = NULL;
	b->len = b->cap = 0;
}
