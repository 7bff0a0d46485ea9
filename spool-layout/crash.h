/*
 * crash.h - crash points: the test-only build's way to die, as kill -9
 * would, at a named step of a state transition (AGENTS.md "Crash
 * points").  Built in only with -DCB_CRASH_POINTS (the ASan+UBSan test
 * build); elsewhere CRASH_POINT evaluates its detail and does nothing.
 *
 *   CRASH_POINT("put", "queued->running")   point "put/queued->running"
 *   CRASH_POINT("launch: node answered", NULL)
 *
 * Environment of the process passing the point:
 *   CARDBATON_CRASH_LOG=FILE    append "POINT" to FILE at every pass
 *   CARDBATON_CRASH_AT=POINT    SIGKILL ourselves on passing POINT ...
 *   CARDBATON_CRASH_ONCE=FILE   ... unless FILE exists (it is created
 *                               first, holding POINT: one death per run
 *                               however many processes pass the point)
 *
 * libc only: the worker includes it too.
 */
#ifndef CARDBATON_CRASH_H
#define CARDBATON_CRASH_H

#ifdef CB_CRASH_POINTS
void crash_point(const char *name, const char *detail);
#define CRASH_POINT(name, detail) crash_point(name, detail)
#else
#define CRASH_POINT(name, detail) ((void)(name), (void)(detail))
#endif

#endif
