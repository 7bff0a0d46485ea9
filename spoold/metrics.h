/*
 * metrics.h - the daemon's Prometheus metrics (metrics.c): what it
 * counts, and SPOOL/metrics.prom's text, for node_exporter's textfile
 * collector and `cardbaton metrics` (cardbaton-metrics(1) lists every
 * family).
 *
 * Two kinds of figures.  Counters and histograms (attempts by outcome,
 * jobs finished, preemptions, pauses, queue wait, handoff latency) are
 * kept here, fed by the daemon's one step function as transitions
 * happen (jobs.c), and carried across a restart by reading them back
 * from the file the last daemon wrote (metrics_restore): they never go
 * down while the file is there.  Gauges (jobs by state, the queue by
 * priority band, every card and node) are what the daemon holds at the
 * moment the text is made, given by the caller.
 *
 * This file does no I/O and reads no clock: tests/unit/test_metrics.c
 * drives it with made-up times.
 */
#ifndef CARDBATON_METRICS_H
#define CARDBATON_METRICS_H

#include <stddef.h>

#include "nodestat.h"
#include "record.h"

/* Upper bounds (seconds) of the histograms' buckets, +Inf implied. */
#define HANDOFF_LE { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60 }
#define HANDOFF_NB 13
#define WAIT_LE { 1, 10, 60, 300, 900, 3600, 14400, 86400, 604800 }
#define WAIT_NB 9

#define HIST_MAX 14                     /* the most buckets, +Inf's included */

struct hist {
	unsigned long long n[HIST_MAX];         /* per bucket, not cumulative; last: +Inf */
	double sum;
};

/* When a card was last let go of (its end, epoch ms on its node's clock). */
struct card_end {
	int index;
	long long at;
};

struct metrics_node {
	const char *name;               /* the config's (not owned) */
	struct hist handoff;
	struct card_end *ends;
	size_t nends;
};

struct metrics {
	unsigned long long attempts[AS_N];      /* attempts that ended, by outcome */
	unsigned long long finished[JS_N];      /* jobs that ended, by final state */
	unsigned long long preemptions;         /* running jobs asked to yield to another */
	unsigned long long pauses;              /* `pause` requests applied */
	unsigned long long refused;             /* a lab's ctl/ requests refused (who may) */
	struct hist wait;                       /* queued_at to an attempt's start */
	struct metrics_node *node;
	size_t nnodes;
	long long started;                      /* the daemon's start, epoch ms */
};

/* M for NODES (names owned by the caller), zeroed; 0 or -1 (ENOMEM). */
int metrics_init(struct metrics *m, const char *const *nodes, size_t nnodes, long long started);
void metrics_free(struct metrics *m);

/* The counters and histograms of TEXT (a metrics.prom an earlier daemon
 * wrote) added to M's: its lines for M's series are taken, every other
 * line (another family, a node no longer configured, a value that is
 * not a count) left out.  The number of values taken. */
size_t metrics_restore(struct metrics *m, const char *text, size_t len);

/* What the step function saw (jobs.c): job J after event EV took it from
 * state FROM, its last attempt from state AFROM (AS_N: it is new).  NODE
 * is the attempt's node's index in M, or M->nnodes when unknown. */
void metrics_step(struct metrics *m, const struct job *j, enum job_state from,
		  enum att_state afrom, size_t node);
void metrics_preempted(struct metrics *m);      /* a preemption asked a job to yield */
void metrics_paused(struct metrics *m);         /* a `pause` request applied */
void metrics_refused(struct metrics *m);        /* a ctl/ request refused: not the caller's */

/* A user of a lab's spool as the daemon counts (tally.c): the plain
 * cards x seconds of the user's attempts, ended and running (a counter:
 * made from the records, so it never goes down across a restart), and
 * the cards the user's running, pausing and staged attempts hold. */
struct metrics_user {
	const char *user;                       /* the owner's name ("-": none) */
	double gpu_seconds;
	long long gpus_held;
};

/* What the daemon holds now, for the gauges. */
struct metrics_now {
	long long queued, held, running, paused;
	long long band[3];                      /* queued by priority: < 0, 0, > 0 */
	const struct node_status *nodes;        /* in M's node order */
	size_t nnodes;
	/* A lab's spool: its users (none: cardbaton_user_* left out). */
	const struct metrics_user *users;
	size_t nusers;
};

/* The text of metrics.prom (malloc'd; NULL: out of memory). */
char *metrics_text(const struct metrics *m, const struct metrics_now *now);

#endif
