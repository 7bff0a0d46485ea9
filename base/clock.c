/*
 * clock.c - the clocks (base.h): the wall clock for what is recorded,
 * the monotonic one for deadlines.
 */
#include <errno.h>
#include <time.h>

#include "base.h"

static long long ms_of(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long now_ms(void)
{
	return ms_of(CLOCK_REALTIME);
}

long long mono_ms(void)
{
	return ms_of(CLOCK_MONOTONIC);
}

void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}
