/*
 * t.h - the smallest unit-test harness: CHECK records a failure and
 * carries on; T_DONE prints "N passed, M failed" and sets the exit code.
 */
#ifndef CARDBATON_T_H
#define CARDBATON_T_H

#include <stdio.h>
#include <string.h>

static int t_pass, t_fail;

#define CHECK(cond) do { \
	if (cond) t_pass++; \
	else { t_fail++; fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); } \
} while (0)

#define CHECK_STR(a, b) do { \
	const char *t_a = (a), *t_b = (b); \
	if (t_a && t_b && strcmp(t_a, t_b) == 0) t_pass++; \
	else { t_fail++; fprintf(stderr, "%s:%d: \"%s\" != \"%s\"\n", __FILE__, __LINE__, \
		t_a ? t_a : "(null)", t_b ? t_b : "(null)"); } \
} while (0)

#define T_DONE() (printf("%s: %d passed, %d failed\n", __FILE__, t_pass, t_fail), t_fail != 0)

#endif
