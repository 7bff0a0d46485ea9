/*
 * fuzz.h - what the libFuzzer targets in tests/fuzz/ share.  Each
 * target is one fuzz_NAME.c with LLVMFuzzerTestOneInput; tests/fuzz/run
 * builds and runs them.  A target checks more than "no crash": each
 * states properties of its parser (round trips, consistency between two
 * readers, the shape of error messages) with FUZZ_CHECK, which aborts,
 * so that libFuzzer saves the input.
 */
#ifndef CARDBATON_FUZZ_H
#define CARDBATON_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond) do { \
	if (!(cond)) { \
		fprintf(stderr, "FUZZ FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
		abort(); \
	} \
} while (0)

/* DATA as a NUL-terminated string (cut at its first NUL), malloc'd;
 * NULL when out of memory. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
	size_t n = strnlen((const char *)data, size);
	char *s = malloc(n + 1);

	if (s) {
		memcpy(s, data, n);
		s[n] = '\0';
	}
	return s;
}

/* A message for the user is one line: no control characters at all. */
static inline int fuzz_one_line(const char *s)
{
	for (; s && *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 0;
	return s != NULL;
}

#endif
