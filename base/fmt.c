/*
 * fmt.c - formatted strings (base.h).  vsnprintf only, no vasprintf:
 * the worker is compiled with whatever libc a node has.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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
