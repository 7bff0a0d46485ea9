/*
 * util.h - errors (struct cb_err: a sysexits code and one line), growing
 * buffers, the text of times and numbers (util.c).  The libc-only part
 * under it all is base.h.
 */
#ifndef CARDBATON_UTIL_H
#define CARDBATON_UTIL_H

#include <stddef.h>

#include "base.h"

#define CARDBATON_VERSION "0.1.0"

struct cb_err {
	int ex;                 /* sysexits code for main() */
	char *msg;              /* malloc'd; NULL when no error was recorded */
};

/* Record an error (replacing any earlier one).  Always returns -1 so
 * that callers can write `return cb_err_set(err, ...)`. */
int cb_err_set(struct cb_err *err, int ex, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Same, with ": strerror(errno)" appended (errno read at entry). */
int cb_err_sys(struct cb_err *err, int ex, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void cb_err_free(struct cb_err *err);

/* RFC 3339 UTC text of a wall clock time in ms (now_ms, base.h):
 * "2026-11-29T08:13:54Z", always second precision; malloc'd. */
char *rfc3339(long long ms);
/* The same to the ms: "2026-11-29T08:13:54.250Z", or rfc3339's text
 * when MS is a whole second; rfc3339_parse reads it back exactly. */
char *rfc3339_ms(long long ms);
/* The last ms it writes in four-digit years: 9999-12-31T23:59:59.999Z. */
#define TIME_MS_MAX 253402300799999LL
/* The largest integer a JSON number (a double) holds exactly: 2^53. */
#define JSON_INT_MAX 9007199254740992.0
/* The other way: "YYYY-MM-DDTHH:MM:SS" (T or t, or one space), an
 * optional fraction of 1 to RFC3339_FRAC_MAX digits (kept to the ms,
 * a finer one rounded up to the next ms), then Z, z or +HH:MM /
 * -HH:MM; second 60 (a leap second) is the next minute's 0.  From 1970
 * to TIME_MS_MAX, in UTC.  0 with *MS, or -1. */
#define RFC3339_FRAC_MAX 9
int rfc3339_parse(const char *s, long long *ms);
/* A WHEN of the tools' --since (SPEC §5): an RFC 3339 time as above, a
 * date "YYYY-MM-DD" (its midnight UTC), or an age "N" + s, m, h, d or w
 * ("90m", "7d": that long before NOW, epoch ms), N 1 to 99999999.
 * 0 with *MS, or -1. */
int when_parse(const char *s, long long now, long long *ms);

/* Parse a decimal long long in [lo, hi]; the whole string must be
 * digits with an optional leading '-'.  0 or -1. */
int parse_ll(const char *s, long long lo, long long hi, long long *out);

/* "~" or "~/x" against $HOME; other paths copied.  malloc'd or NULL. */
char *expand_home(const char *path);

#endif
