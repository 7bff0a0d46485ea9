/*
 * test_lab.c - a lab's fair share on a fake clock (spool-layout/lab.c):
 * usage decays with the half-life (two half-lives: a quarter), an
 * attempt's usage is its cards x seconds decayed over its run, a
 * running one's grows to now, shares divide it; and the limits of a
 * user not named are default's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "spool.h"
#include "t.h"

#define H (3600 * 1000LL)               /* an hour, ms */
#define T0 1800000000000LL              /* wall ms */
static int near(double a, double b)
{
	return fabs(a - b) <= 1e-9 * (fabs(b) + 1);
}
#define NEAR(a, b) near((double)(a), (double)(b))

static void test_decay(void)
{
	long long half = lab_half_life_ms(168);
	double u = 10 * 3600.0;         /* alice: 10 GPU-hours, as of T0 */

	CHECK(half == 168 * H);
	CHECK(NEAR(lab_decay(u, T0, T0, half), u));
	CHECK(NEAR(lab_decay(u, T0, T0 + half, half), u / 2));
	CHECK(NEAR(lab_decay(u, T0, T0 + 2 * half, half), u / 4));
	/* No half-life: never decays; a clock gone back: as it was. */
	CHECK(NEAR(lab_decay(u, T0, T0 + 100 * half, 0), u));
	CHECK(NEAR(lab_decay(u, T0, T0 - H, half), u));
}

static void test_span(void)
{
	long long half = lab_half_life_ms(1);

	/* Plain: cards x seconds. */
	CHECK(NEAR(lab_span(2, T0, T0 + H, T0 + H, 0), 7200));
	CHECK(lab_span(0, T0, T0 + H, T0 + H, half) == 0);
	CHECK(lab_span(2, T0, T0, T0, half) == 0);
	/* One card for one half-life, read at its end: the integral of
	 * 2^-(t/h) over [0, h] = h / ln 2 x (1 - 1/2). */
	CHECK(NEAR(lab_span(1, T0, T0 + H, T0 + H, half), 3600 / M_LN2 / 2));
	/* Read one half-life later: half of that. */
	CHECK(NEAR(lab_span(1, T0, T0 + H, T0 + 2 * H, half), 3600 / M_LN2 / 4));
	/* A short span loses nothing to rounding: 1 ms of 8 cards. */
	CHECK(NEAR(lab_span(8, T0, T0 + 1, T0 + 1, lab_half_life_ms(168)), 0.008));
	/* Additive: [0, 2h] = [0, h] + [h, 2h], all read at 2h. */
	CHECK(NEAR(lab_span(3, T0, T0 + 2 * H, T0 + 2 * H, half),
		   lab_span(3, T0, T0 + H, T0 + 2 * H, half) + lab_span(3, T0 + H, T0 + 2 * H, T0 + 2 * H, half)));
}

static void test_job_usage(void)
{
	struct job j;
	struct attempt *a;

	memset(&j, 0, sizeof j);
	a = job_new_attempt(&j);
	a->ngpus = 2;
	a->started = T0;
	a->finished = T0 + 5 * H;
	a->state = AS_SUCCEEDED;
	a = job_new_attempt(&j);        /* running: to now */
	a->ngpus = 1;
	a->started = T0 + 6 * H;
	a->state = AS_RUNNING;
	a = job_new_attempt(&j);        /* never started (staged, aborted) */
	a->ngpus = 4;
	a->state = AS_ABORTED;
	CHECK(NEAR(lab_job_usage(&j, T0 + 8 * H, 0), (2 * 5 + 1 * 2) * 3600.0));
	/* Over but no end recorded (lost): nothing past its start. */
	j.att[1].state = AS_LOST;
	CHECK(NEAR(lab_job_usage(&j, T0 + 8 * H, 0), 2 * 5 * 3600.0));
	/* Decayed: two half-lives after the first attempt's end, a
	 * quarter of what it was then. */
	j.natt = 1;
	CHECK(NEAR(lab_job_usage(&j, T0 + 5 * H + 2 * 168 * H, lab_half_life_ms(168)),
		   lab_job_usage(&j, T0 + 5 * H, lab_half_life_ms(168)) / 4));
	j.natt = 3;
	job_free(&j);
}

static void test_limits(void)
{
	struct config c;
	struct cb_err err = { 0 };
	static const char text[] =
		"nodes: {n: {local: true}}\n"
		"lab:\n"
		"  group: gpuq\n"
		"  users:\n"
		"    alice: {max_gpus: 2, shares: 2}\n"
		"    default: {max_gpus: 8, max_queued: 1000, max_priority: 10, shares: 1}\n";
	const struct lab_limits *l;

	CHECK(config_parse(text, sizeof text - 1, "c.yaml", "/", &c, &err) == 0);
	if (!c.lab)
		return;
	l = lab_limits_of(c.lab, "alice");
	CHECK(l->max_gpus == 2 && l->shares == 2 && l->max_queued == 1000 && l->max_priority == 10);
	l = lab_limits_of(c.lab, "bob");
	CHECK(l->max_gpus == 8 && l->shares == 1 && l->max_queued == 1000 && l->max_priority == 10);
	CHECK(c.lab->half_life_hours == LAB_DEFAULT_HALF_LIFE);
	/* Effective usage is usage / shares: alice's 10 GPU-hours count 5. */
	CHECK(NEAR(36000.0 / (double)lab_limits_of(c.lab, "alice")->shares, 18000));
	config_free(&c);
}

int main(void)
{
	test_decay();
	test_span();
	test_job_usage();
	test_limits();
	return T_DONE();
}
