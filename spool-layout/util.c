/*
 * util.c - errors, growing buffers, and the text of times and numbers
 * for the library and the tools (the libc-only part is in base/).
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

static int err_setv(struct cb_err *err, int ex, const char *suffix,
		    const char *fmt, va_list ap)
{
	char *m;

	if (!err)
		return -1;
	m = vxasprintf(fmt, ap);
	if (m && suffix) {
		char *t = xasprintf("%s: %s", m, suffix);
		free(m);
		m = t;
	}
	free(err->msg);
	err->msg = m;   /* NULL on ENOMEM: main() prints strerror(ENOMEM) */
	err->ex = ex;
	return -1;
}

int cb_err_set(struct cb_err *err, int ex, const char *fmt, ...)
{
	va_list ap;
	int saved = errno;

	va_start(ap, fmt);
	err_setv(err, ex, NULL, fmt, ap);
	va_end(ap);
	errno = saved;
	return -1;
}

int cb_err_sys(struct cb_err *err, int ex, const char *fmt, ...)
{
	va_list ap;
	int saved = errno;

	va_start(ap, fmt);
	err_setv(err, ex, strerror(saved), fmt, ap);
	va_end(ap);
	errno = saved;
	return -1;
}

void cb_err_free(struct cb_err *err)
{
	free(err->msg);
	err->msg = NULL;
}

char *rfc3339(long long ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char buf[64];

	if (!gmtime_r(&t, &tm) || !strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm)) {
		errno = ERANGE;
		return NULL;
	}
	return strdup(buf);
}

char *rfc3339_ms(long long ms)
{
	char *t = rfc3339(ms), *r;

	if (!t || ms % 1000 == 0)
		return t;
	r = xasprintf("%.*s.%03lldZ", (int)strlen(t) - 1, t, ms % 1000);
	free(t);
	return r;
}

/* N digits at *P, in [lo, hi]; *P moved past them. */
static int digits(const char **p, int n, int lo, int hi, int *out)
{
	int v = 0;

	for (int i = 0; i < n; i++, (*p)++) {
		if (**p < '0' || **p > '9')
			return -1;
		v = v * 10 + (**p - '0');
	}
	if (v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

int rfc3339_parse(const char *s, long long *ms)
{
	static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	int y, mo, d, h, mi, sec, oh = 0, om = 0, sign = 0, frac = 0, n = 0, up = 0;
	long long days;

	if (digits(&s, 4, 1970, 9999, &y) || *s++ != '-' || digits(&s, 2, 1, 12, &mo) ||
	    *s++ != '-' || digits(&s, 2, 1, mdays[mo - 1], &d) ||
	    (*s != 'T' && *s != 't' && *s != ' ') || !*s++ || digits(&s, 2, 0, 23, &h) ||
	    *s++ != ':' || digits(&s, 2, 0, 59, &mi) || *s++ != ':' ||
	    digits(&s, 2, 0, 60, &sec))
		return -1;
	if (mo == 2 && d == 29 && (y % 4 || (y % 100 == 0 && y % 400)))
		return -1;
	/* A fraction: its ms, and one more when a digit after the third is
	 * not 0 (rounded up: a time is never taken as earlier than it is). */
	if (*s == '.') {
		if (*++s < '0' || *s > '9')
			return -1;
		for (; *s >= '0' && *s <= '9'; s++, n++) {
			if (n == RFC3339_FRAC_MAX)
				return -1;
			if (n < 3)
				frac = frac * 10 + (*s - '0');
			else
				up |= *s != '0';
		}
		for (; n < 3; n++)
			frac *= 10;
		frac += up;
	}
	/* A leap second (second 60): where the next minute begins, the
	 * first POSIX time no moment of it comes after; its fraction is
	 * dropped (counted from 59 it would be a second early). */
	if (sec == 60)
		frac = 0;
	if (*s == 'Z' || *s == 'z') {
		s++;
	} else if (*s == '+' || *s == '-') {
		sign = *s++ == '+' ? 1 : -1;
		if (digits(&s, 2, 0, 23, &oh) || *s++ != ':' || digits(&s, 2, 0, 59, &om))
			return -1;
	} else {
		return -1;
	}
	if (*s)
		return -1;
	/* Days since 1970-01-01 of the civil date (Howard Hinnant's). */
	{
		int yy = mo <= 2 ? y - 1 : y;
		int era = yy / 400, yoe = yy - era * 400;
		int doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
		int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

		days = (long long)era * 146097 + doe - 719468;
	}
	*ms = ((days * 86400 + h * 3600 + mi * 60 + sec) - sign * (oh * 3600 + om * 60)) * 1000 +
	      frac;
	return *ms < 0 || *ms > TIME_MS_MAX ? -1 : 0;
}

int when_parse(const char *s, long long now, long long *ms)
{
	static const struct { char unit; long long ms; } units[] = {
		{ 's', 1000LL }, { 'm', 60000LL }, { 'h', 3600000LL },
		{ 'd', 86400000LL }, { 'w', 604800000LL },
	};
	size_t n = strlen(s);

	if (rfc3339_parse(s, ms) == 0)
		return 0;
	if (n == 10 && s[4] == '-' && s[7] == '-') {    /* YYYY-MM-DD: its midnight UTC */
		char t[32];

		snprintf(t, sizeof t, "%sT00:00:00Z", s);
		return rfc3339_parse(t, ms);
	}
	if (n < 2 || n > 9)
		return -1;
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
		long long v = 0;

		if (s[n - 1] != units[i].unit)
			continue;
		for (size_t k = 0; k + 1 < n; k++) {
			if (s[k] < '0' || s[k] > '9')
				return -1;
			v = v * 10 + (s[k] - '0');
		}
		if (v < 1)
			return -1;
		*ms = now - v * units[i].ms;
		return 0;
	}
	return -1;
}

int parse_ll(const char *s, long long lo, long long hi, long long *out)
{
	const char *p = s;
	long long v;
	char *end;

	if (*p == '-')
		p++;
	if (*p < '0' || *p > '9')
		return -1;
	for (; *p; p++)
		if (*p < '0' || *p > '9')
			return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

char *expand_home(const char *path)
{
	const char *home;

	if (path[0] != '~' || (path[1] && path[1] != '/'))
		return strdup(path);
	home = getenv("HOME");
	if (!home || !*home)
		home = "/";
	return xasprintf("%s%s", home, path + 1);
}
