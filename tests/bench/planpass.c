/*
 * planpass.c - the cost of one scheduling pass (spoold/plan.c) with a
 * big queue: plan_fair_order and plan() as sched.c calls them, on N
 * queued jobs of U users (U 0: no lab, today's pass, no order made),
 * 8 nodes of 8 cards of which 2 are free, the rest leased by running
 * attempts; jobs of 10 priorities, one card each, each user with its
 * own usage.  Built and run by tests/bench/run (bench "plan"), linked
 * with the build's plan.o and library.
 *
 * usage: planpass N U PASSES  -> the median ms of a pass, on stdout
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan.h"

#define NODES 8
#define CARDS 8

static double now_ms_f(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int dcmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	static struct node_conf conf[NODES];
	static struct gpu_info gpu[NODES][CARDS];
	static struct plan_node node[NODES];
	static char names[NODES][8], aids[NODES * CARDS][16];
	static struct plan_run runs[NODES * CARDS];
	size_t n, u, passes, nruns = 0;
	struct plan_job *jobs, *ordered;
	struct plan_user *users;
	double *eff, *ms;
	size_t *order;
	long long now = 1800000000000LL;

	if (argc != 4)
		return fprintf(stderr, "usage: planpass N USERS PASSES\n"), 64;
	n = strtoul(argv[1], NULL, 10);
	u = strtoul(argv[2], NULL, 10);
	passes = strtoul(argv[3], NULL, 10);
	jobs = calloc(n + 1, sizeof *jobs);
	ordered = calloc(n + 1, sizeof *ordered);
	order = calloc(n + 1, sizeof *order);
	users = calloc(u + 1, sizeof *users);
	eff = calloc(u + 1, sizeof *eff);
	ms = calloc(passes + 1, sizeof *ms);
	if (!jobs || !ordered || !order || !users || !eff || !ms)
		return 71;
	for (size_t k = 0; k < NODES; k++) {
		snprintf(names[k], sizeof names[k], "n%zu", k);
		conf[k] = (struct node_conf){ .name = names[k], .local = 1, .idle_mib = 64,
					      .max_jobs_per_gpu = 1 };
		for (size_t i = 0; i < CARDS; i++) {
			gpu[k][i] = (struct gpu_info){ .index = (int)i, .mem_total = 81920 };
			if (k == 0 && i < 2)
				continue;       /* the free ones */
			snprintf(aids[nruns], sizeof aids[nruns], "%zu-%zu", k, i);
			gpu[k][i].lease = aids[nruns];
			runs[nruns] = (struct plan_run){ .id = 1000000000 + (long long)nruns, .node = k,
							 .aid = aids[nruns], .started = now - 60000 };
			nruns++;
		}
		node[k] = (struct plan_node){ .conf = &conf[k], .gpus = gpu[k], .ngpus = CARDS,
					      .reachable = 1, .known = 1, .fresh = 1 };
	}
	for (size_t j = 0; j < n; j++)
		jobs[j] = (struct plan_job){ .id = (long long)j + 1, .prio = 9 - (long long)(j * 10 / n),
					     .need = 1, .queued_at = now, .user = u ? j % u + 1 : 0 };
	for (size_t i = 0; i < u; i++) {
		users[i] = (struct plan_user){ .max_gpus = -1, .held = (long long)(i % 3) };
		eff[i] = (double)((i * 7919) % 1000) * 3600;
	}
	for (size_t p = 0; p < passes; p++) {
		struct plan_in in = { .jobs = jobs, .njobs = n, .nodes = node,
				      .nnodes = NODES, .runs = runs, .nruns = nruns,
				      .users = users, .nusers = u, .reserve_after_seconds = 300 };
		struct plan_out out;
		double t0 = now_ms_f();

		in.jobs = jobs;
		if (u && plan_fair_order(jobs, n, eff, u, order) > 0) {
			for (size_t j = 0; j < n; j++)
				ordered[j] = jobs[order[j]];
			in.jobs = ordered;
		}
		if (plan(&in, now, &out) < 0)
			return 71;
		ms[p] = now_ms_f() - t0;
		plan_free(&out);
	}
	qsort(ms, passes, sizeof *ms, dcmp);
	printf("%.3f\n", ms[passes / 2]);
	return 0;
}
