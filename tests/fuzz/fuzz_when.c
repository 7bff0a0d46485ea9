/*
 * fuzz_when.c - a --since WHEN (spool-layout/util.c when_parse), as
 * status and report read it from the command line: any bytes.
 *
 * Properties: a WHEN is taken only when it is a whole RFC 3339 time, a
 * date, or an age of digits and one unit; an age lies before NOW, and
 * no further back than 99999999 weeks; a date is a midnight; a time is
 * from 1970 to TIME_MS_MAX, and rfc3339_ms's text of it reads back the
 * same ms.
 */
#include "util.h"
#include "fuzz.h"

#define NOW 1796144400000LL

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	long long ms;
	size_t n;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	n = strlen(s);
	if (when_parse(s, NOW, &ms) == 0) {
		long long t;

		if (rfc3339_parse(s, &t) == 0) {
			char *back = rfc3339_ms(t);
			long long u;

			FUZZ_CHECK(t == ms && t >= 0 && t <= TIME_MS_MAX);
			/* To the ms, both ways (a job's begin, a record). */
			FUZZ_CHECK(back && rfc3339_parse(back, &u) == 0 && u == t);
			free(back);
		} else if (n == 10) {
			FUZZ_CHECK(ms >= 0 && ms % 86400000LL == 0);
		} else {
			FUZZ_CHECK(n >= 2 && n <= 9 && strchr("smhdw", s[n - 1]));
			FUZZ_CHECK(ms < NOW && ms >= NOW - 99999999LL * 604800000LL);
			for (size_t i = 0; i + 1 < n; i++)
				FUZZ_CHECK(s[i] >= '0' && s[i] <= '9');
		}
	}
	free(s);
	return 0;
}
