/*
 * test_plan.c - the scheduling rule (AGENTS.md "Scheduling rule", the
 * top of spoold/plan.h) on plan(): nodes, cards and jobs are fixtures,
 * and the clock is a parameter.
 *
 * Results are compared as text: placements "JOB@NODE:CARDS" (a CPU job
 * has no cards), holds the same, one piece per job and node.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../spoold/plan.h"
#include "t.h"

#define NOW 1700000000000LL     /* wall ms */
#define RESERVE 300             /* reserve_after_seconds, the default */
#define LONG_AGO (NOW - 3600 * 1000LL)

enum { MAXN = 3, MAXC = 8, MAXJ = 16 };

static char names[MAXN][2] = { "a", "b", "c" };
static char lease[] = "0123456789-1-0";
static struct node_conf conf[MAXN];
static int eligible[MAXN][MAXC];
static struct gpu_info gpu[MAXN][MAXC];
static struct plan_node node[MAXN];
static struct plan_job job[MAXJ];
static int pins[MAXJ][MAXC];
static struct plan_in in;
static struct plan_out out;

/* NN nodes a, b, c of NC idle cards 0..NC-1 each, reachable, fresh,
 * but for the cards BUSY names ("a0 b2": card slot 0 of a, 2 of b),
 * which run a process from outside the queue; no jobs yet. */
static void setup(size_t nn, size_t nc, const char *busy)
{
	plan_free(&out);
	memset(gpu, 0, sizeof gpu);
	for (size_t k = 0; k < nn; k++) {
		conf[k] = (struct node_conf){ .name = names[k], .local = 1, .idle_mib = 64 };
		for (size_t i = 0; i < nc; i++)
			gpu[k][i] = (struct gpu_info){ .index = (int)i, .mem_total = 81920 };
		node[k] = (struct plan_node){ .conf = &conf[k], .gpus = gpu[k], .ngpus = nc,
					      .reachable = 1, .known = 1, .fresh = 1 };
	}
	for (const char *c = busy; *c; c++)
		if (*c >= 'a' && *c < 'a' + MAXN)
			gpu[*c - 'a'][c[1] - '0'].procs = 1;
	in = (struct plan_in){ .jobs = job, .nodes = node, .nnodes = nn,
			       .reserve_after_seconds = RESERVE };
}

/* Node K's `gpus:` list is the N indices that follow. */
static void only(size_t k, size_t n, ...)
{
	va_list ap;

	va_start(ap, n);
	for (size_t i = 0; i < n; i++)
		eligible[k][i] = va_arg(ap, int);
	va_end(ap);
	conf[k].gpus = eligible[k];
	conf[k].ngpus = n;
	conf[k].has_gpus = 1;
}

/* The next job in dispatch order: NEED cards, queued now. */
static struct plan_job *add(long long need)
{
	struct plan_job *j = &job[in.njobs];

	*j = (struct plan_job){ .id = (long long)in.njobs + 1, .need = need, .queued_at = NOW };
	in.njobs++;
	return j;
}

/* The next job, pinned to the N indices that follow. */
static struct plan_job *pin(size_t n, ...)
{
	struct plan_job *j = add((long long)n);
	int *g = pins[in.njobs - 1];
	va_list ap;

	va_start(ap, n);
	for (size_t i = 0; i < n; i++)
		g[i] = va_arg(ap, int);
	va_end(ap);
	j->gpus = g;
	j->ngpus = n;
	return j;
}

static int run(long long now)
{
	plan_free(&out);
	return plan(&in, now, &out);
}

/* " JOB@NODE:C,C" onto B. */
static void piece(char *b, size_t cap, size_t j, size_t k, const int *cards, size_t n)
{
	size_t len = strlen(b);

	len += (size_t)snprintf(b + len, cap - len, "%s%lld@%s", len ? " " : "", job[j].id, names[k]);
	for (size_t c = 0; c < n && len < cap; c++)
		len += (size_t)snprintf(b + len, cap - len, "%c%d", c ? ',' : ':', cards[c]);
}

/* This pass's placements, in its order. */
static const char *placed(void)
{
	static char b[512];

	b[0] = 0;
	for (size_t p = 0; p < out.nplace; p++)
		piece(b, sizeof b, out.place[p].job, out.place[p].node, out.place[p].cards,
		      out.place[p].ncards);
	return b;
}

/* This pass's holds. */
static const char *held(void)
{
	static char b[512];
	int cards[MAXN * MAXC];

	b[0] = 0;
	for (size_t h = 0, n = 0; h < out.nhold; h++) {
		const struct plan_hold *x = &out.hold[h];

		cards[n++] = x->index;
		if (h + 1 == out.nhold || out.hold[h + 1].job != x->job || out.hold[h + 1].node != x->node) {
			piece(b, sizeof b, x->job, x->node, cards, n);
			n = 0;
		}
	}
	return b;
}

/* The "never fits" reason of job ID, or "(none)". */
static const char *why(long long id)
{
	for (size_t w = 0; w < out.nwhy; w++)
		if (job[out.why[w].job].id == id)
			return out.why[w].text;
	return "(none)";
}

/* A pass at NOW places WANT_PLACED and holds WANT_HELD. */
#define PLAN(now, want_placed, want_held) do { \
	CHECK(run(now) == 0); \
	CHECK_STR(placed(), want_placed); \
	CHECK_STR(held(), want_held); \
} while (0)

/* Dispatch order (priority, then ID: the queue's order, queue.c) is
 * the order of placing: the first job gets the first card, and a card
 * two jobs want goes to the first. */
static void test_order(void)
{
	setup(1, 3, "");
	add(1);
	add(1);
	add(1);
	add(1);
	PLAN(NOW, "1@a:0 2@a:1 3@a:2", "");
	CHECK(out.waiting);
	setup(1, 2, "");
	pin(1, 1);
	pin(1, 1);
	add(1);
	PLAN(NOW, "1@a:1 3@a:0", "");
	/* Nothing is kept from one pass to the next. */
	PLAN(NOW, "1@a:1 3@a:0", "");
}

/* Pinned indices: all of them eligible, idle and not taken; a job
 * whose card is busy waits, and the jobs behind it pass it. */
static void test_pinned(void)
{
	setup(1, 4, "a1");
	pin(1, 1);
	pin(2, 2, 3);
	add(1);
	PLAN(NOW, "2@a:2,3 3@a:0", "");
	CHECK(out.waiting);
	/* One busy card of two keeps it off the other. */
	setup(1, 4, "a1");
	pin(2, 0, 1);
	add(1);
	PLAN(NOW, "2@a:0", "");
	/* A card placed earlier in the pass is taken. */
	setup(1, 2, "");
	add(1);
	pin(1, 0);
	PLAN(NOW, "1@a:0", "");
	/* The card frees: it starts, and nothing waits. */
	setup(1, 4, "a1");
	pin(1, 1);
	PLAN(NOW, "", "");
	CHECK(out.waiting);
	gpu[0][1].procs = 0;
	PLAN(NOW, "1@a:1", "");
	CHECK(!out.waiting);
}

/* gpu_count K: the K lowest-numbered free cards of one node, on the
 * first node in config order that has them. */
static void test_count(void)
{
	setup(1, 6, "a0 a3");
	add(3);
	PLAN(NOW, "1@a:1,2,4", "");
	setup(1, 4, "");
	add(1);
	add(2);
	PLAN(NOW, "1@a:0 2@a:1,2", "");
	/* The first node that fits, not the emptiest. */
	setup(2, 4, "a0 a1 a2");
	add(2);
	add(1);
	PLAN(NOW, "1@b:0,1 2@a:3", "");
	/* Never split over two nodes. */
	setup(2, 2, "a0 b0");
	add(2);
	PLAN(NOW, "", "");
	CHECK(out.waiting);
}

/* A CPU job takes the first reachable node, busy, stale or without
 * cards; one no node can take does not make the daemon poll cards. */
static void test_cpu(void)
{
	setup(2, 2, "a0 a1");
	add(0);
	PLAN(NOW, "1@a", "");
	CHECK(!out.waiting);
	node[0].fresh = 0;
	node[0].known = 0;
	PLAN(NOW, "1@a", "");
	node[0].reachable = 0;
	PLAN(NOW, "1@b", "");
	setup(1, 0, "");
	add(0);
	PLAN(NOW, "1@a", "");
	/* It holds nothing, however long it waits. */
	setup(1, 2, "");
	in.reserve_after_seconds = 0;
	add(0);
	node[0].reachable = 0;
	PLAN(NOW, "", "");
	CHECK(!out.waiting);
	CHECK_STR(held(), "");
}

/* No head-of-line blocking: a job that cannot be placed is passed. */
static void test_no_hol(void)
{
	setup(1, 2, "a0");
	add(2);
	pin(1, 0);
	add(1);
	PLAN(NOW, "3@a:1", "");
	CHECK(out.waiting);
}

/* No starvation: from reserve_after_seconds after queued_at on, a job
 * holds what it waits for, and later jobs do not get it. */
static void test_starvation(void)
{
	setup(1, 2, "a0");
	add(2)->queued_at = NOW - RESERVE * 1000 + 1;
	add(1);
	PLAN(NOW, "2@a:1", "");
	/* A millisecond later it has waited long enough. */
	PLAN(NOW + 1, "", "1@a:0,1");
	CHECK(out.waiting);
	/* The cards collect until it fits. */
	gpu[0][0].procs = 0;
	PLAN(NOW + 2, "1@a:0,1", "");
	/* reserve_after_seconds: 0 is strict priority order; CPU jobs are
	 * not held back. */
	setup(1, 2, "a0");
	in.reserve_after_seconds = 0;
	add(2);
	add(1);
	add(0);
	PLAN(NOW, "3@a", "1@a:0,1");
	/* A count holds all of the node with the most free cards; the
	 * other node serves on. */
	setup(2, 4, "a0 a1 b0");
	add(4)->queued_at = LONG_AGO;
	add(1);
	add(3);
	add(0);
	PLAN(NOW, "2@a:2 4@a", "1@b:0,1,2,3");
	/* Equal: the first; held cards are not free for the next. */
	setup(2, 4, "a0 b0");
	in.reserve_after_seconds = 0;
	add(4);
	add(4);
	PLAN(NOW, "", "1@a:0,1,2,3 2@b:0,1,2,3");
	/* Only nodes it may use, and usable ones. */
	setup(2, 4, "a0 b0");
	in.reserve_after_seconds = 0;
	add(5)->node = "b";
	PLAN(NOW, "", "");      /* never fits on b: a reason instead */
	job[0].need = 4;
	PLAN(NOW, "", "1@b:0,1,2,3");
	job[0].node = NULL;
	node[0].fresh = 0;
	PLAN(NOW, "", "1@b:0,1,2,3");
	node[0].handoff = 1;
	PLAN(NOW, "", "1@a:0,1,2,3");
	/* Pinned: its cards on every usable node it may use. */
	setup(2, 3, "a1 b1");
	pin(1, 1)->queued_at = LONG_AGO;
	pin(1, 1);
	add(3);
	add(2);
	PLAN(NOW, "4@a:0,2", "1@a:1 1@b:1");
}

/* Eligible: in the node's `gpus:` list (all cards without one). */
static void test_eligible(void)
{
	setup(1, 4, "");
	only(0, 2, 2, 3);
	pin(1, 0);
	add(1);
	add(1);
	add(1);
	PLAN(NOW, "2@a:2 3@a:3", "");
	setup(1, 4, "");
	only(0, 2, 3, 1);
	add(2);
	PLAN(NOW, "1@a:1,3", "");
	conf[0].has_gpus = 0;
	PLAN(NOW, "1@a:0,1", "");
}

/* Idle: memory in use at most idle_mib, no compute process, no lease. */
static void test_idle(void)
{
	setup(1, 6, "");
	gpu[0][0].mem_used = 64;
	gpu[0][1].mem_used = 65;
	gpu[0][2].procs = 1;
	gpu[0][3].lease = lease;
	gpu[0][4].mem_used = -1;        /* not reported */
	for (int i = 0; i < 6; i++)
		pin(1, i);
	PLAN(NOW, "1@a:0 6@a:5", "");
	conf[0].idle_mib = 65;
	PLAN(NOW, "1@a:0 2@a:1 6@a:5", "");
	gpu[0][3].lease = NULL;
	PLAN(NOW, "1@a:0 2@a:1 4@a:3 6@a:5", "");
}

/* GPU jobs pass over a node that is unreachable, or whose snapshot is
 * stale or was never read; right after a handoff a stale one is used. */
static void test_nodes(void)
{
	setup(2, 1, "");
	add(1);
	node[0].reachable = 0;
	PLAN(NOW, "1@b:0", "");
	node[0].reachable = 1;
	node[0].fresh = 0;
	PLAN(NOW, "1@b:0", "");
	node[0].handoff = 1;
	PLAN(NOW, "1@a:0", "");
	node[0].known = 0;
	PLAN(NOW, "1@b:0", "");
	/* A stale node's cards are not counted: nothing is free, the
	 * pass stops before the job that would say why it never fits. */
	setup(1, 1, "");
	node[0].fresh = 0;
	add(1);
	pin(1, 7);
	PLAN(NOW, "", "");
	CHECK(out.nwhy == 0);
	CHECK(out.waiting);
}

/* A job with `node` (pinned, or its checkpoint's) uses that one only. */
static void test_node_pin(void)
{
	setup(2, 2, "");
	add(1)->node = "b";
	add(1);
	PLAN(NOW, "1@b:0 2@a:0", "");
	gpu[1][0].procs = gpu[1][1].procs = 1;
	PLAN(NOW, "2@a:0", "");
	CHECK(out.waiting);
}

/* A job no node it may use can ever take says why, and holds nothing;
 * while such a node is unreachable or unread, it may fit some day. */
static void test_never_fits(void)
{
	setup(2, 4, "");
	gpu[1][3].index = 6;
	in.reserve_after_seconds = 0;
	pin(1, 7);
	add(5);
	pin(2, 6, 7);
	add(4);
	PLAN(NOW, "4@a:0,1,2,3", "");
	CHECK_STR(why(1), "no node has GPU 7 (a has 0-3; b has 0-2,6)");
	CHECK_STR(why(2), "no node has 5 eligible GPUs (a has 0-3; b has 0-2,6)");
	CHECK_STR(why(3), "no node has GPU 7 (a has 0-3; b has 0-2,6)");
	CHECK(out.waiting);
	job[0].node = "a";
	pins[0][0] = 6;
	PLAN(NOW, "4@a:0,1,2,3", "");
	CHECK_STR(why(1), "no node has GPU 6 (a has 0-3)");
	/* Eligible cards are what counts; a node without cards. */
	setup(2, 4, "");
	only(0, 2, 0, 1);
	node[1].ngpus = 0;
	add(3);
	PLAN(NOW, "", "");
	CHECK_STR(why(1), "no node has 3 eligible GPUs (a has 0-3; b has none)");
	/* It may fit some day: no reason, it holds like any other. */
	setup(2, 4, "");
	node[1].reachable = 0;
	node[1].fresh = 0;
	in.reserve_after_seconds = 0;
	add(5);
	PLAN(NOW, "", "1@a:0,1,2,3");
	CHECK(out.nwhy == 0);
	node[1].reachable = 1;
	node[1].known = 0;
	PLAN(NOW, "", "1@a:0,1,2,3");
	CHECK(out.nwhy == 0);
	/* Only the nodes it may use count. */
	job[0].node = "a";
	PLAN(NOW, "", "");
	CHECK_STR(why(1), "no node has 5 eligible GPUs (a has 0-3)");
	setup(2, 6, "");
	node[0].ngpus = 4;
	add(5)->node = "a";
	pin(1, 5)->node = "a";
	PLAN(NOW, "", "");
	CHECK_STR(why(1), "no node has 5 eligible GPUs (a has 0-3)");
	CHECK_STR(why(2), "no node has GPU 5 (a has 0-3)");
	/* A pinned index that is there but busy: it waits. */
	setup(1, 4, "a2");
	pin(1, 2);
	add(1);
	PLAN(NOW, "2@a:0", "");
	CHECK(out.nwhy == 0);
}

/* A job whose reason is already on disk is passed without a new one:
 * it holds nothing, still waits, and is placed when it fits. */
static void test_never_noted(void)
{
	setup(1, 4, "");
	in.reserve_after_seconds = 0;
	pin(1, 7)->never_noted = 1;
	add(5)->never_noted = 1;
	add(1)->never_noted = 1;
	add(3);
	PLAN(NOW, "3@a:0 4@a:1,2,3", "");
	CHECK(out.nwhy == 0);
	CHECK(out.waiting);
}

/* No free card and no CPU job left: the pass stops there, and what is
 * behind is not looked at (no reason, no hold).  Held cards still
 * count as free. */
static void test_stop(void)
{
	setup(1, 2, "a0 a1");
	in.reserve_after_seconds = 0;
	add(1);
	pin(1, 7);
	PLAN(NOW, "", "");
	CHECK(out.nwhy == 0);
	CHECK(out.waiting);
	add(0);
	PLAN(NOW, "3@a", "1@a:0,1");
	CHECK_STR(why(2), "no node has GPU 7 (a has 0-1)");
	setup(1, 1, "");
	add(1);
	pin(1, 7);
	PLAN(NOW, "1@a:0", "");
	CHECK(out.nwhy == 0);
	CHECK(out.waiting);
	setup(1, 2, "a0");
	in.reserve_after_seconds = 0;
	add(2);
	pin(1, 7);
	PLAN(NOW, "", "1@a:0,1");
	CHECK_STR(why(2), "no node has GPU 7 (a has 0-1)");
}

/* Held, blocked and not-yet-begun jobs: not placed, holding nothing,
 * not waiting for cards, not in the way; the earliest begin to come is
 * when a pass is due. */
static void test_not_yet(void)
{
	struct plan_job *j;

	setup(1, 2, "");
	in.reserve_after_seconds = 0;
	add(2)->held = 1;
	add(1)->blocked = 1;
	add(1)->begin = NOW + 5000;
	add(1)->begin = NOW + 2000;
	PLAN(NOW, "", "");
	CHECK(!out.waiting && out.nwhy == 0);
	CHECK(out.wake_at == NOW + 2000);
	PLAN(NOW + 1999, "", "");               /* a ms early: not yet */
	CHECK(out.wake_at == NOW + 2000);
	PLAN(NOW + 2000, "4@a:0", "");
	CHECK(out.wake_at == NOW + 5000);
	PLAN(NOW + 5000, "3@a:0 4@a:1", "");
	CHECK(out.wake_at == 0);
	/* Released, it is an ordinary job again: first in line. */
	job[0].held = 0;
	PLAN(NOW + 5000, "1@a:0,1", "");
	/* A CPU job that is held does not keep a pass going, nor run. */
	setup(1, 1, "a0");
	j = add(0);
	j->held = 1;
	add(1);
	PLAN(NOW, "", "");
	CHECK(out.waiting);
	/* A begin time in the past is no obstacle. */
	setup(1, 1, "");
	add(1)->begin = NOW - 1;
	PLAN(NOW, "1@a:0", "");
	CHECK(out.wake_at == 0);
}

/* This pass's preemptions: "JOB@NODE<VICTIM,VICTIM:CARD,CARD" each. */
static struct plan_run runs[MAXJ];
static char aids[MAXJ][16];

static const char *preempted(void)
{
	static char b[512];
	size_t len = 0;

	b[0] = 0;
	for (size_t i = 0; i < out.npreempt && len < sizeof b; i++) {
		const struct plan_preempt *x = &out.preempt[i];

		len += (size_t)snprintf(b + len, sizeof b - len, "%s%lld@%s<", i ? " " : "",
					job[x->job].id, names[x->node]);
		for (size_t v = 0; v < x->nvictims && len < sizeof b; v++)
			len += (size_t)snprintf(b + len, sizeof b - len, "%s%lld", v ? "," : "",
						runs[x->victims[v]].id);
		for (size_t c = 0; c < x->ncards && len < sizeof b; c++)
			len += (size_t)snprintf(b + len, sizeof b - len, "%c%d", c ? ',' : ':', x->cards[c]);
	}
	return b;
}

/* Run ID on node K (priority PRIO, started STARTED, resumable) holds
 * the card slots that follow (N of them). */
static struct plan_run *running(long long id, size_t k, long long prio, long long started,
				size_t n, ...)
{
	struct plan_run *r = &runs[in.nruns];
	va_list ap;

	snprintf(aids[in.nruns], sizeof aids[0], "0123abcd-%lld-0", id);
	*r = (struct plan_run){ .id = id, .node = k, .aid = aids[in.nruns], .prio = prio,
				.started = started, .resumable = 1 };
	va_start(ap, n);
	for (size_t i = 0; i < n; i++) {
		int c = va_arg(ap, int);

		gpu[k][c].lease = aids[in.nruns];
		gpu[k][c].procs = 1;
		gpu[k][c].mem_used = 1000;
	}
	va_end(ap);
	in.runs = runs;
	in.nruns++;
	return r;
}

static void preempting(size_t nn, size_t nc)
{
	setup(nn, nc, "");
	in.preempt = 1;
	in.min_runtime_seconds = 300;
}

/* Preemption: only resumable jobs of lower priority that ran long
 * enough, only when the job then fits, the fewest victims, the node
 * where they are fewest, lowest priority and latest started first. */
static void test_preempt(void)
{
	struct plan_job *j;
	struct plan_resv kept[2];

	preempting(1, 1);
	running(50, 0, 0, LONG_AGO, 1, 0);
	add(1)->prio = 10;
	PLAN(NOW, "", "1@a:0");
	CHECK_STR(preempted(), "1@a<50:0");
	CHECK(out.waiting);
	/* Off: nobody. */
	in.preempt = 0;
	PLAN(NOW, "", "");
	CHECK_STR(preempted(), "");
	/* Not resumable, not lower, too recent, yielding already: nobody. */
	in.preempt = 1;
	runs[0].resumable = 0;
	PLAN(NOW, "", "");
	CHECK_STR(preempted(), "");
	runs[0].resumable = 1;
	runs[0].prio = 10;
	PLAN(NOW, "", "");
	CHECK_STR(preempted(), "");
	runs[0].prio = 0;
	runs[0].started = NOW - 299 * 1000;
	PLAN(NOW, "", "");
	CHECK_STR(preempted(), "");
	runs[0].started = NOW - 300 * 1000;
	PLAN(NOW, "", "1@a:0");
	CHECK_STR(preempted(), "1@a<50:0");
	runs[0].yielding = 1;
	PLAN(NOW, "", "");
	CHECK_STR(preempted(), "");

	/* It would still not fit (a process from outside on the other
	 * card): nobody. */
	preempting(1, 2);
	running(50, 0, 0, LONG_AGO, 1, 0);
	gpu[0][1].procs = 1;
	j = add(2);
	j->prio = 10;
	PLAN(NOW, "", "");
	CHECK_STR(preempted(), "");

	/* The fewest victims: one of two cards rather than two of one. */
	preempting(1, 3);
	running(50, 0, 0, LONG_AGO, 1, 0);
	running(51, 0, 1, LONG_AGO, 2, 1, 2);
	add(2)->prio = 10;
	PLAN(NOW, "", "1@a:1,2");
	CHECK_STR(preempted(), "1@a<51:1,2");
	/* Among as few: the lowest priority, then the latest started. */
	preempting(1, 3);
	running(50, 0, 1, LONG_AGO, 1, 0);
	running(51, 0, 0, LONG_AGO, 1, 1);
	running(52, 0, 0, LONG_AGO + 1000, 1, 2);
	add(1)->prio = 10;
	PLAN(NOW, "", "1@a:2");
	CHECK_STR(preempted(), "1@a<52:2");
	/* ... and a card free already is used before any victim's. */
	preempting(1, 3);
	running(50, 0, 0, LONG_AGO, 2, 0, 1);
	add(3)->prio = 10;
	PLAN(NOW, "", "1@a:0,1,2");
	CHECK_STR(preempted(), "1@a<50:0,1,2");

	/* The node where the fewest make room: b (one) rather than a (two). */
	preempting(2, 2);
	running(50, 0, 0, LONG_AGO, 1, 0);
	running(51, 0, 0, LONG_AGO, 1, 1);
	running(52, 1, 0, LONG_AGO, 2, 0, 1);
	add(2)->prio = 10;
	PLAN(NOW, "", "1@b:0,1");
	CHECK_STR(preempted(), "1@b<52:0,1");

	/* Two urgent jobs never share a victim; a pinned one waits for its
	 * own card. */
	preempting(1, 2);
	running(50, 0, 0, LONG_AGO, 1, 0);
	running(51, 0, 0, LONG_AGO, 1, 1);
	add(1)->prio = 10;
	pin(1, 0)->prio = 9;
	add(1)->prio = 8;
	PLAN(NOW, "", "1@a:0 3@a:1");
	CHECK_STR(preempted(), "1@a<50:0 3@a<51:1");

	/* Kept cards: free for their job only, which preempts no more. */
	preempting(1, 2);
	running(50, 0, 0, LONG_AGO, 1, 1);
	kept[0] = (struct plan_resv){ .node = 0, .index = 0, .job = 2 };
	in.resv = kept;
	in.nresv = 1;
	add(1)->prio = 10;
	add(1)->prio = 5;
	PLAN(NOW, "2@a:0", "1@a:1");
	CHECK_STR(preempted(), "1@a<50:1");
	job[1].need = 2;
	PLAN(NOW, "", "1@a:1");
	CHECK_STR(preempted(), "1@a<50:1");
	kept[1] = (struct plan_resv){ .node = 0, .index = 1, .job = 1 };
	in.nresv = 2;
	job[1].need = 1;
	PLAN(NOW, "2@a:0", "");
	CHECK_STR(preempted(), "");
	in.resv = NULL;
	in.nresv = 0;
	/* A held job, or a CPU job, preempts nobody. */
	preempting(1, 1);
	running(50, 0, 0, LONG_AGO, 1, 0);
	add(1)->prio = 10;
	job[0].held = 1;
	add(0)->prio = 10;
	PLAN(NOW, "2@a", "");
	CHECK_STR(preempted(), "");
}

/* Sharing: sharing jobs together on a card while fewer than the node's
 * max_jobs_per_gpu hold it, their declared memory within its total and
 * its free memory enough; an exclusive job never beside them; no
 * sharer on a card a process from outside uses. */
static char share_aid[2][16] = { "0123abcd-60-0", "0123abcd-61-0" };
static char *shares0[2] = { share_aid[0], share_aid[1] };

static struct plan_job *sharer(long long mem)
{
	struct plan_job *j = add(1);

	j->share = 1;
	j->mem = mem;
	return j;
}

static void test_share(void)
{
	setup(1, 2, "");
	conf[0].max_jobs_per_gpu = 2;
	sharer(20000);
	sharer(20000);
	sharer(20000);
	add(1);         /* exclusive: never beside a sharer */
	PLAN(NOW, "1@a:0 2@a:0 3@a:1", "");
	CHECK(out.waiting);
	/* The default, 1 per card: sharing jobs get a card each. */
	conf[0].max_jobs_per_gpu = 1;
	PLAN(NOW, "1@a:0 2@a:1", "");

	/* Running sharers: their declared memory counts, and the card's
	 * free memory. */
	setup(1, 1, "");
	conf[0].max_jobs_per_gpu = 4;
	gpu[0][0].shares = shares0;
	gpu[0][0].nshares = 1;
	gpu[0][0].mem_used = 20000;
	gpu[0][0].procs = 1;
	runs[0] = (struct plan_run){ .id = 60, .aid = share_aid[0], .share = 1, .mem = 20000,
				     .started = LONG_AGO };
	in.runs = runs;
	in.nruns = 1;
	sharer(60000);
	PLAN(NOW, "1@a:0", "");
	job[0].mem = 61921;
	PLAN(NOW, "", "");
	/* Declared 20000, but it uses 70000: 11920 free. */
	gpu[0][0].mem_used = 70000;
	job[0].mem = 20000;
	PLAN(NOW, "", "");
	job[0].mem = 11920;
	PLAN(NOW, "1@a:0", "");
	/* Full: as many holders as max_jobs_per_gpu. */
	gpu[0][0].mem_used = 20000;
	gpu[0][0].nshares = 2;
	runs[1] = (struct plan_run){ .id = 61, .aid = share_aid[1], .share = 1, .mem = 1000 };
	in.nruns = 2;
	conf[0].max_jobs_per_gpu = 2;
	PLAN(NOW, "", "");
	conf[0].max_jobs_per_gpu = 3;
	PLAN(NOW, "1@a:0", "");
	/* An exclusive job does not land there. */
	job[0].share = 0;
	PLAN(NOW, "", "");
	gpu[0][0].shares = NULL;
	gpu[0][0].nshares = 0;

	/* A process from outside on a card nobody leases: no sharer;
	 * an exclusive lease: no sharer. */
	setup(1, 2, "a0");
	conf[0].max_jobs_per_gpu = 2;
	gpu[0][1].lease = share_aid[0];
	sharer(100);
	PLAN(NOW, "", "");
	gpu[0][1].lease = NULL;
	PLAN(NOW, "1@a:1", "");
}

/* Issue 32: K sharing jobs, one pass, one card that may take sharers
 * (the other runs a process from outside), N = max_jobs_per_gpu: at
 * most N are placed there, their declared memory within the card's,
 * with room for J already running on it; the others wait, each with a
 * reason that names the card's limit. */
static void test_share_cap(void)
{
	for (long long n = 1; n <= 4; n++)
		for (size_t k = 1; k <= 6; k++)
			for (size_t r = 0; r < 2 && (long long)r < n; r++) {
				size_t on = 0, want = (size_t)n - r < k ? (size_t)n - r : k;
				long long mem = 0;

				setup(1, 2, "a0");
				conf[0].max_jobs_per_gpu = n;
				gpu[0][1].shares = shares0;
				gpu[0][1].nshares = r;
				gpu[0][1].procs = (int)r;
				runs[0] = (struct plan_run){ .id = 60, .aid = share_aid[0], .share = 1,
							     .mem = 10000, .started = LONG_AGO };
				gpu[0][1].mem_used = 10000 * (long long)r;
				in.runs = runs;
				in.nruns = r;
				for (size_t i = 0; i < k; i++)
					sharer(10000);
				CHECK(run(NOW) == 0);
				for (size_t p = 0; p < out.nplace; p++) {
					CHECK(out.place[p].ncards == 1 && out.place[p].cards[0] == 1);
					on++;
					mem += job[out.place[p].job].mem;
				}
				CHECK(on == want);
				CHECK(mem + 10000 * (long long)r <= gpu[0][1].mem_total);
				CHECK(out.waiting == (k > want));
				/* Each job left waiting says why: the card is full. */
				CHECK(out.nfull == k - want);
				for (size_t w = 0; w < out.nfull; w++) {
					char b[128];

					snprintf(b, sizeof b, "GPU 1 of a: shared by %lld job%s, max_jobs_per_gpu %lld",
						 n, n == 1 ? "" : "s", n);
					CHECK(out.full[w].job >= want);
					CHECK_STR(out.full[w].text, b);
				}
			}
	/* The memory sum: four of 30,000 MiB on an 80 GiB card, N = 4:
	 * two fit; the others wait for memory, not the count (no reason). */
	setup(1, 1, "");
	conf[0].max_jobs_per_gpu = 4;
	for (int i = 0; i < 4; i++)
		sharer(30000);
	PLAN(NOW, "1@a:0 2@a:0", "");
	CHECK(out.nfull == 0);
}

/* A lab's max_gpus: a job that would pass its owner's limit (cards
 * held by running, pausing and staged attempts, and placed this pass)
 * is not placed, holds nothing, and says so; the jobs behind it, of
 * other users, take the cards.  No limit (LAB_NONE): as before. */
static void test_user_limit(void)
{
	struct plan_user users[2];

	/* alice (1) may hold 1, holds none; her two jobs and bob's (2). */
	setup(1, 2, "");
	in.reserve_after_seconds = 0;
	users[0] = (struct plan_user){ .max_gpus = 1, .held = 0 };
	users[1] = (struct plan_user){ .max_gpus = LAB_NONE, .held = 5 };
	in.users = users;
	in.nusers = 2;
	add(1)->user = 1;
	add(1)->user = 1;
	add(1)->user = 2;
	PLAN(NOW, "1@a:0 3@a:1", "");
	CHECK(out.nlimit == 1 && out.limit[0].job == 1 && out.limit[0].user == 1 &&
	      out.limit[0].held == 1);
	/* Held already by her running attempts: none of hers; nothing held
	 * for her (reserve_after 0 would hold at once), not waiting for her. */
	setup(1, 2, "");
	in.reserve_after_seconds = 0;
	users[0].held = 1;
	in.users = users;
	in.nusers = 2;
	add(1)->user = 1;
	PLAN(NOW, "", "");
	CHECK(out.nlimit == 1 && out.limit[0].held == 1 && !out.waiting);
	/* A job of 2 with a limit of 2 and 1 held: over; one of 1 behind it
	 * of hers fits. */
	setup(1, 4, "");
	users[0] = (struct plan_user){ .max_gpus = 2, .held = 1 };
	in.users = users;
	in.nusers = 2;
	add(2)->user = 1;
	add(1)->user = 1;
	PLAN(NOW, "2@a:0", "");
	CHECK(out.nlimit == 1 && out.limit[0].job == 0);
	/* A CPU job is never held back by max_gpus. */
	setup(1, 1, "");
	users[0] = (struct plan_user){ .max_gpus = 0, .held = 0 };
	in.users = users;
	in.nusers = 1;
	add(0)->user = 1;
	PLAN(NOW, "1@a", "");
	CHECK(out.nlimit == 0);
	/* Nor staged past it: the card about to free goes to bob's job. */
	setup(1, 1, "");
	node[0].stage = 1;
	gpu[0][0].lease = lease;
	runs[0] = (struct plan_run){ .id = 50, .aid = lease, .started = LONG_AGO };
	in.runs = runs;
	in.nruns = 1;
	users[0] = (struct plan_user){ .max_gpus = 1, .held = 1 };
	users[1] = (struct plan_user){ .max_gpus = LAB_NONE, .held = 0 };
	in.users = users;
	in.nusers = 2;
	add(1)->user = 1;
	add(1)->user = 2;
	CHECK(run(NOW) == 0);
	CHECK(out.nstage == 1 && job[out.stage[0].job].id == 2);
	CHECK(out.nplace == 0);
}

/* run_as: owner (accts.c): a node that bars a user (her account there
 * refuses the lab's key) is, to her jobs, as if unreachable: nothing of
 * hers is placed, held or staged there, and no "never fits" reason is
 * given for her; other users' jobs use it as before. */
static void test_barred(void)
{
	struct plan_user users[2] = { { LAB_NONE, 0 }, { LAB_NONE, 0 } };
	unsigned char bar_alice[2] = { 1, 0 };

	/* alice's (1) job goes to b, bob's (2) to a. */
	setup(2, 1, "");
	in.users = users;
	in.nusers = 2;
	node[0].barred = bar_alice;
	add(1)->user = 1;
	add(1)->user = 2;
	PLAN(NOW, "1@b:0 2@a:0", "");
	/* Pinned to a, queued long ago: not placed, nothing held, no reason
	 * (GPU 7 is not there: unbarred, that would be "no node has GPU 7"),
	 * and bob's job behind hers takes the card. */
	setup(1, 2, "");
	in.users = users;
	in.nusers = 2;
	node[0].barred = bar_alice;
	add(1)->user = 1;
	job[0].queued_at = LONG_AGO;
	job[0].node = "a";
	pin(1, 7)->user = 1;
	add(1)->user = 2;
	PLAN(NOW, "3@a:0", "");
	CHECK(out.nwhy == 0);
	node[0].barred = NULL;
	CHECK(run(NOW) == 0);
	CHECK_STR(placed(), "1@a:0 3@a:1");
	CHECK_STR(why(2), "no node has GPU 7 (a has 0-1)");
	/* A CPU job of hers: not placed either. */
	setup(1, 1, "");
	in.users = users;
	in.nusers = 2;
	node[0].barred = bar_alice;
	add(0)->user = 1;
	add(0)->user = 2;
	PLAN(NOW, "2@a", "");
	/* The baton: not staged there for her; for bob, as before. */
	setup(1, 1, "");
	node[0].stage = 1;
	node[0].barred = bar_alice;
	gpu[0][0].lease = lease;
	runs[0] = (struct plan_run){ .id = 50, .aid = lease, .started = LONG_AGO };
	in.runs = runs;
	in.nruns = 1;
	in.users = users;
	in.nusers = 2;
	add(1)->user = 1;
	CHECK(run(NOW) == 0);
	CHECK(out.nstage == 0 && out.nplace == 0);
	job[0].user = 2;
	CHECK(run(NOW) == 0);
	CHECK(out.nstage == 1);
	gpu[0][0].lease = NULL;
}

/* A checkpoint on a shared filesystem (shared_fs, issue 35): its own
 * node first when it takes the job, else another node mounting the
 * filesystem, never one that does not, nor one that could not see it. */
static void test_shared_fs(void)
{
	struct shared_fs lab_a = { "lab", "/mnt/lab" }, lab_c = { "lab", "/nfs/lab" };
	const char *away_c[] = { "c" };

	/* a and c mount lab, b does not; the checkpoint is c's. */
	setup(3, 1, "");
	conf[0].shared_fs = &lab_a;
	conf[0].nshared_fs = 1;
	conf[2].shared_fs = &lab_c;
	conf[2].nshared_fs = 1;
	add(1);
	job[0].fs = "lab";
	job[0].prefer = "c";
	PLAN(NOW, "1@c:0", "");
	/* c busy: a, not b (config order would give b after a anyway: a is
	 * first; with a busy too it waits, never b). */
	gpu[2][0].procs = 1;
	PLAN(NOW, "1@a:0", "");
	gpu[0][0].procs = 1;
	PLAN(NOW, "", "");
	/* c could not see it: left out, even when free. */
	gpu[0][0].procs = gpu[2][0].procs = 0;
	job[0].away = away_c;
	job[0].naway = 1;
	PLAN(NOW, "1@a:0", "");
	conf[0].shared_fs = conf[2].shared_fs = NULL;
	conf[0].nshared_fs = conf[2].nshared_fs = 0;
}

/* A job that may travel (checkpoint_transfer): its own node when it
 * takes it now, then a node of its shared filesystem, and only then,
 * by a copy (moved), the first other node that takes it (never a Slurm
 * node, never one left out); a job that may not travel waits. */
static void test_travel(void)
{
	struct shared_fs lab_b = { "lab", "/mnt/lab" }, lab_c = { "lab", "/nfs/lab" };
	const char *away_a[] = { "a" };

	setup(3, 1, "");
	add(1);
	job[0].node = "c";
	job[0].travel = 1;
	PLAN(NOW, "1@c:0", "");
	CHECK(!out.place[0].moved);
	gpu[2][0].procs = 1;
	PLAN(NOW, "1@a:0", "");
	CHECK(out.place[0].moved);
	/* It stays waiting, holding nothing elsewhere, when it may not. */
	job[0].travel = 0;
	PLAN(NOW, "", "");
	job[0].travel = 1;
	/* A node left out, and a Slurm node, are passed over. */
	job[0].away = away_a;
	job[0].naway = 1;
	PLAN(NOW, "1@b:0", "");
	CHECK(out.place[0].moved);
	conf[1].slurm_partition = "gpu";
	PLAN(NOW, "", "");
	conf[1].slurm_partition = NULL;
	job[0].away = NULL;
	job[0].naway = 0;
	/* On a shared filesystem: b mounts it too, and is taken (no copy)
	 * before a, first in config order but a copy away. */
	conf[1].shared_fs = &lab_b;
	conf[1].nshared_fs = 1;
	conf[2].shared_fs = &lab_c;
	conf[2].nshared_fs = 1;
	job[0].node = NULL;
	job[0].fs = "lab";
	job[0].prefer = "c";
	PLAN(NOW, "1@b:0", "");
	CHECK(!out.place[0].moved);
	gpu[1][0].procs = 1;
	PLAN(NOW, "1@a:0", "");
	CHECK(out.place[0].moved);
	conf[1].shared_fs = conf[2].shared_fs = NULL;
	conf[1].nshared_fs = conf[2].nshared_fs = 0;

	/* Moved: pinned to b now, where its card is kept for it (its copy
	 * came there), the only card not busy: placed there. */
	{
		struct plan_resv kept = { .node = 1, .index = 0, .job = 1 };

		setup(2, 1, "a0");
		add(1);
		job[0].node = "b";
		job[0].travel = 1;
		in.resv = &kept;
		in.nresv = 1;
		PLAN(NOW, "1@b:0", "");
		in.resv = NULL;
		in.nresv = 0;
	}
}


/* The fair share's order: priority first; among equal priorities the
 * owner with the least effective usage, then the earlier job; FIFO
 * within an owner; one user (or all equal): the order given. */
static void test_fair_order(void)
{
	size_t order[MAXJ];
	double eff[3] = { 36000, 0, 18000 };   /* alice 10 GPU-hours, bob none, carol 5 */
	const char *want;
	char b[128];

	setup(1, 1, "");
	add(1)->user = 1;               /* 1 alice */
	add(1)->user = 1;               /* 2 alice */
	add(1)->user = 2;               /* 3 bob */
	add(1)->user = 3;               /* 4 carol */
	add(1)->user = 2;               /* 5 bob */
	job[4].prio = 0;
	plan_fair_order(job, in.njobs, eff, 3, order);
	want = "3 5 4 1 2";
	b[0] = 0;
	for (size_t i = 0; i < in.njobs; i++)
		snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", i ? " " : "", job[order[i]].id);
	CHECK_STR(b, want);
	/* Priority stays first: alice's first job, of priority 5 (first in
	 * dispatch order), before all; then bob's. */
	job[0].prio = 5;
	plan_fair_order(job, in.njobs, eff, 3, order);
	CHECK(job[order[0]].id == 1 && job[order[1]].id == 3);
	/* Equal usage: the order given, untouched. */
	job[0].prio = 0;
	eff[0] = eff[1] = eff[2] = 7;
	plan_fair_order(job, in.njobs, eff, 3, order);
	for (size_t i = 0; i < in.njobs; i++)
		CHECK(order[i] == i);
	/* shares 2 halves alice's: 36000 / 2 = 18000, as carol's: then the
	 * earlier job first among them (1, 2 before 4). */
	eff[0] = 18000;
	eff[1] = 0;
	eff[2] = 18000;
	plan_fair_order(job, in.njobs, eff, 3, order);
	b[0] = 0;
	for (size_t i = 0; i < in.njobs; i++)
		snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", i ? " " : "", job[order[i]].id);
	CHECK_STR(b, "3 5 1 2 4");
}

/* The fair order against the rule written out: random queues (in
 * dispatch order) of users with random usages, ties among them. */
static const struct plan_job *ref_jobs;
static const double *ref_eff;

static double ref_eff_of(const struct plan_job *j)
{
	return j->user ? ref_eff[j->user - 1] : 0;
}

static int ref_cmp(const void *pa, const void *pb)
{
	const struct plan_job *x = &ref_jobs[*(const size_t *)pa], *y = &ref_jobs[*(const size_t *)pb];

	if (x->prio != y->prio)
		return x->prio > y->prio ? -1 : 1;
	if (ref_eff_of(x) != ref_eff_of(y))
		return ref_eff_of(x) < ref_eff_of(y) ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

static void test_fair_order_random(void)
{
	enum { N = 300, U = 7 };
	static struct plan_job jobs[N];
	size_t got[N], want[N];
	double eff[U];

	srand(33);
	for (int round = 0; round < 200; round++) {
		size_t n = (size_t)(rand() % N) + 1, nu = (size_t)(rand() % U) + 1;
		long long prio = 5;

		for (size_t u = 0; u < nu; u++)
			eff[u] = (double)(rand() % 4) * 1800;   /* ties, and zeros */
		for (size_t j = 0; j < n; j++) {
			if (rand() % 40 == 0)
				prio -= rand() % 3 + 1;
			jobs[j] = (struct plan_job){ .id = (long long)j + 1, .prio = prio,
						     .user = (size_t)(rand() % ((int)nu + 1)) };
			want[j] = j;
		}
		ref_jobs = jobs;
		ref_eff = eff;
		qsort(want, n, sizeof *want, ref_cmp);
		CHECK(plan_fair_order(jobs, n, eff, nu, got) >= 0);
		CHECK(memcmp(got, want, n * sizeof *got) == 0);
	}
}

/* Memory: a job with `mem` only on cards with that much in all (an
 * unknown total is not enough); one no card can hold says so and holds
 * nothing; a starving one holds only cards big enough. */
static void test_memory(void)
{
	struct plan_job *j;

	setup(2, 2, "");
	in.reserve_after_seconds = 0;
	gpu[0][0].mem_total = gpu[0][1].mem_total = 24576;
	add(1)->mem = 60000;
	add(1)->mem = 20000;
	PLAN(NOW, "1@b:0 2@a:0", "");
	/* Too big for every card: a reason, no hold, however long it waits. */
	setup(2, 2, "");
	gpu[0][0].mem_total = gpu[0][1].mem_total = 24576;
	j = add(1);
	j->mem = 100000;
	j->queued_at = LONG_AGO;
	add(1);
	PLAN(NOW, "2@a:0", "");
	CHECK_STR(why(1), "no card has 100000 MiB");
	/* Big cards, but not enough of them on one node. */
	gpu[1][1].mem_total = 24576;
	job[0].mem = 60000;
	job[0].need = 2;
	PLAN(NOW, "2@a:0", "");
	CHECK_STR(why(1), "no node has 2 eligible GPUs with 60000 MiB (a has 0-1; b has 0-1)");
	/* Pinned to a card too small. */
	setup(1, 2, "");
	gpu[0][1].mem_total = 24576;
	pin(1, 1)->mem = 60000;
	pin(2, 0, 1)->mem = 60000;
	PLAN(NOW, "", "");
	CHECK_STR(why(1), "no card has 60000 MiB");
	CHECK_STR(why(2), "no node has GPU 1 with 60000 MiB (a has 0-1)");
	/* An unknown total is not enough. */
	setup(1, 1, "");
	gpu[0][0].mem_total = -1;
	add(1)->mem = 1;
	PLAN(NOW, "", "");
	CHECK_STR(why(1), "no card has 1 MiB");
	/* Starving, it holds the big cards only: a small job still runs. */
	setup(1, 3, "a0");
	in.reserve_after_seconds = 0;
	gpu[0][2].mem_total = 24576;
	j = add(2);
	j->mem = 60000;
	add(1);
	PLAN(NOW, "2@a:2", "1@a:0,1");
}

/* An array's limit: with as many of its jobs running as its
 * max_running, the rest wait (holding nothing, not "waiting" for
 * cards); the jobs one pass places count; other arrays and jobs are
 * not held up. */
static void test_groups(void)
{
	struct plan_group g[2];

	setup(1, 4, "");
	in.reserve_after_seconds = 0;
	g[0] = (struct plan_group){ .max = 2, .running = 0 };
	g[1] = (struct plan_group){ .max = 1, .running = 1 };
	in.groups = g;
	in.ngroups = 2;
	for (int i = 0; i < 3; i++)
		add(1)->group = 1;
	add(1)->group = 2;
	add(1);
	PLAN(NOW, "1@a:0 2@a:1 5@a:2", "");
	CHECK(!out.waiting);
	/* One of the first array is running already: one more now. */
	g[0].running = 1;
	PLAN(NOW, "1@a:0 5@a:1", "");
	/* The second array's one running job ends: its next may go. */
	g[0].running = 2;
	g[1].running = 0;
	PLAN(NOW, "4@a:0 5@a:1", "");
	/* A CPU job of a full array waits too. */
	setup(1, 1, "");
	g[0] = (struct plan_group){ .max = 1, .running = 1 };
	in.groups = g;
	in.ngroups = 1;
	add(0)->group = 1;
	add(0);
	PLAN(NOW, "2@a", "");
	in.groups = NULL;
	in.ngroups = 0;
}

/* plan_deps: a failed `after` cancels, before anything waits; an
 * unfinished one waits (the first named); after_any only waits. */
static void test_deps(void)
{
	struct plan_dep v[4];
	size_t w = 99;

	v[0] = (struct plan_dep){ 5, 0, JS_SUCCEEDED };
	v[1] = (struct plan_dep){ 6, 0, JS_RUNNING };
	v[2] = (struct plan_dep){ 7, 1, JS_FAILED };
	v[3] = (struct plan_dep){ 8, 1, JS_QUEUED };
	CHECK(plan_deps(v, 4, &w) == DEP_WAIT && w == 1);
	v[1].state = JS_PAUSED;
	CHECK(plan_deps(v, 4, &w) == DEP_WAIT && w == 1);
	v[1].state = JS_SUCCEEDED;
	CHECK(plan_deps(v, 4, &w) == DEP_WAIT && w == 3);
	v[3].state = JS_LOST;
	CHECK(plan_deps(v, 4, &w) == DEP_READY);
	v[3].state = JS_N;      /* an after_any job without a record: ended */
	CHECK(plan_deps(v, 4, &w) == DEP_READY);
	v[0].state = JS_QUEUED;
	v[1].state = JS_CANCELLED;
	CHECK(plan_deps(v, 4, &w) == DEP_CANCEL && w == 1);
	v[1].state = JS_N;      /* an after job without a record */
	CHECK(plan_deps(v, 4, &w) == DEP_CANCEL && w == 1);
	for (int s = JS_FAILED; s <= JS_LOST; s++) {
		v[1].state = (enum job_state)s;
		CHECK(plan_deps(v + 1, 1, &w) == DEP_CANCEL && w == 0);
	}
	CHECK(plan_deps(v, 0, &w) == DEP_READY);
}

/* A Slurm node (node a here): at most max_jobs of our jobs there,
 * counting those running and those this pass places; never a job with
 * pinned cards, memory or sharing, which go elsewhere or wait. */
static char partition[] = "gpu";

static void test_slurm(void)
{
	setup(2, 4, "");
	conf[0].slurm_partition = partition;
	node[0].max_jobs = 2;
	node[0].njobs = 1;
	add(1);
	add(1);
	add(1);
	PLAN(NOW, "1@a:0 2@b:0 3@b:1", "");
	/* No limit: all there, in order. */
	node[0].max_jobs = 0;
	PLAN(NOW, "1@a:0 2@a:1 3@a:2", "");
	/* Pinned, memory, share: node b only. */
	setup(2, 4, "");
	conf[0].slurm_partition = partition;
	pin(1, 0);
	add(1)->mem = 1000;
	add(1)->share = 1;
	job[2].mem = 1000;
	add(1);
	PLAN(NOW, "1@b:0 2@b:1 3@b:2 4@a:0", "");
	/* A Slurm node alone: a pinned job waits with its reason. */
	setup(1, 2, "");
	conf[0].slurm_partition = partition;
	pin(1, 0);
	add(1)->mem = 1000;
	PLAN(NOW, "", "");
	CHECK_STR(why(1), "a Slurm node takes no job with pinned GPUs");
	CHECK_STR(why(2), "a Slurm node takes no job with gpu_memory_mib");
	conf[0].slurm_partition = NULL;
}

/* This pass's stagings, as placed() shows placements. */
static const char *staged(void)
{
	static char b[512];

	b[0] = 0;
	for (size_t p = 0; p < out.nstage; p++)
		piece(b, sizeof b, out.stage[p].job, out.stage[p].node, out.stage[p].cards,
		      out.stage[p].ncards);
	return b;
}

/* The staged runs this pass sends back: their IDs. */
static const char *unstaged(void)
{
	static char b[256];
	size_t len = 0;

	b[0] = 0;
	for (size_t u = 0; u < out.nunstage && len < sizeof b; u++)
		len += (size_t)snprintf(b + len, sizeof b - len, "%s%lld", u ? " " : "",
					runs[out.unstage[u]].id);
	return b;
}

/* Run ID is staged on node K to start on the N cards that follow, and
 * asks for them (NEED cards, anywhere) as ASK says. */
static struct plan_job asks[MAXJ];
static int scards[MAXJ][MAXC];

static struct plan_run *staging(long long id, size_t k, long long prio, size_t n, ...)
{
	struct plan_run *r = &runs[in.nruns];
	struct plan_job *a = &asks[in.nruns];
	va_list ap;

	snprintf(aids[in.nruns], sizeof aids[0], "0123abcd-%lld-0", id);
	va_start(ap, n);
	for (size_t i = 0; i < n; i++)
		scards[in.nruns][i] = va_arg(ap, int);
	va_end(ap);
	*a = (struct plan_job){ .id = id, .prio = prio, .need = (long long)n, .queued_at = LONG_AGO };
	*r = (struct plan_run){ .id = id, .node = k, .aid = aids[in.nruns], .prio = prio,
				.resumable = 1, .staged = 1, .cards = scards[in.nruns], .ncards = n,
				.job = a };
	in.runs = runs;
	in.nruns++;
	return r;
}

/* The baton: waiting jobs are staged on cards about to free (leased by
 * one running attempt), in dispatch order, on nodes that take it; a
 * staged attempt's cards are nobody else's; it is sent back for a job
 * before it, a better placement, a drain, a preemption. */
static void test_baton(void)
{
	/* Two cards, both leased: the waiting job waits on the first. */
	setup(1, 2, "");
	node[0].stage = 1;
	running(50, 0, 0, LONG_AGO, 1, 0);
	running(51, 0, 0, LONG_AGO, 1, 1);
	add(1);
	PLAN(NOW, "", "");
	CHECK_STR(staged(), "1@a:0");
	CHECK(out.waiting);
	/* A node that does not take it: nothing staged. */
	node[0].stage = 0;
	PLAN(NOW, "", "");
	CHECK_STR(staged(), "");
	node[0].stage = 1;
	/* Two waiting jobs: one card each, in order; a third gets none. */
	add(1);
	add(1);
	PLAN(NOW, "", "");
	CHECK_STR(staged(), "1@a:0 2@a:1");
	/* A 2-card job: both cards, after both holders. */
	setup(1, 2, "");
	node[0].stage = 1;
	running(50, 0, 0, LONG_AGO, 1, 0);
	running(51, 0, 0, LONG_AGO, 1, 1);
	add(2);
	PLAN(NOW, "", "");
	CHECK_STR(staged(), "1@a:0,1");
	/* A card free in a snapshot not trusted yet (after a launch): not
	 * placed, and not staged either: it goes there once read. */
	setup(1, 2, "");
	node[0].stage = 1;
	running(50, 0, 0, LONG_AGO, 1, 0);
	node[0].fresh = 0;
	add(1);
	PLAN(NOW, "", "");
	CHECK_STR(staged(), "");
	/* Known is enough for the baton: all cards leased. */
	running(51, 0, 0, LONG_AGO, 1, 1);
	PLAN(NOW, "", "");
	CHECK_STR(staged(), "1@a:0");
	/* Pinned: that card only. */
	setup(1, 2, "");
	node[0].stage = 1;
	running(50, 0, 0, LONG_AGO, 1, 0);
	running(51, 0, 0, LONG_AGO, 1, 1);
	pin(1, 1);
	PLAN(NOW, "", "");
	CHECK_STR(staged(), "1@a:1");
	/* Not after a yielding holder, one still launching, a sharing
	 * one, nor on a card busy from outside the queue. */
	setup(1, 4, "a3");
	node[0].stage = 1;
	running(50, 0, 0, LONG_AGO, 1, 0)->yielding = 1;
	running(51, 0, 0, 0, 1, 1);
	running(52, 0, 0, LONG_AGO, 1, 2)->share = 1;
	add(1);
	PLAN(NOW, "", "");
	CHECK_STR(staged(), "");
	/* Held, blocked, later than its begin, sharing: not staged. */
	setup(1, 1, "");
	node[0].stage = 1;
	running(50, 0, 0, LONG_AGO, 1, 0);
	add(1)->held = 1;
	add(1)->blocked = 1;
	add(1)->begin = NOW + 1000;
	add(1)->share = 1;
	PLAN(NOW, "", "");
	CHECK_STR(staged(), "");
	/* A drained or unreachable node: nothing staged there. */
	setup(1, 1, "");
	node[0].stage = 1;
	running(50, 0, 0, LONG_AGO, 1, 0);
	add(1);
	node[0].drained = 1;
	PLAN(NOW, "", "");
	CHECK_STR(staged(), "");
	node[0].drained = 0;
	node[0].reachable = 0;
	PLAN(NOW, "", "");
	CHECK_STR(staged(), "");

	/* A staged attempt's card is taken: no second staging on it, and
	 * once its holder ended (the handoff: free in the snapshot), no
	 * placement on it either. */
	setup(1, 1, "");
	node[0].stage = 1;
	running(50, 0, 0, LONG_AGO, 1, 0);
	staging(60, 0, 5, 1, 0);
	add(1);
	PLAN(NOW, "", "");
	CHECK_STR(staged(), "");
	CHECK_STR(unstaged(), "");
	gpu[0][0] = (struct gpu_info){ .index = 0, .mem_total = 81920 };
	node[0].handoff = 1;
	PLAN(NOW, "", "");
	CHECK_STR(staged(), "");
	CHECK_STR(unstaged(), "");

	/* A job before it in dispatch order (a promote) takes its card: it
	 * is sent back, and the job staged in a later pass. */
	setup(1, 1, "");
	node[0].stage = 1;
	running(50, 0, 0, LONG_AGO, 1, 0);
	staging(60, 0, 0, 1, 0);
	add(1)->prio = 10;
	PLAN(NOW, "", "");
	CHECK_STR(staged(), "");
	CHECK_STR(unstaged(), "60");
	/* Same priority: the lower ID is first. */
	job[0].prio = 0;
	PLAN(NOW, "", "");
	CHECK_STR(unstaged(), "60");
	/* After it: left alone. */
	job[0].id = 61;
	PLAN(NOW, "", "");
	CHECK_STR(unstaged(), "");
	CHECK_STR(staged(), "");
	/* The holder it waits for was asked to yield after the stage (a
	 * preemption or a drain, while the unstage could not be sent): a
	 * job before it still takes the card, which frees soon.  It is
	 * sent back, and that job is not staged (nobody is staged behind a
	 * yielding holder): it is placed once the card frees. */
	setup(1, 1, "");
	node[0].stage = 1;
	running(50, 0, 0, LONG_AGO, 1, 0)->yielding = 1;
	staging(60, 0, 0, 1, 0);
	add(1)->prio = 10;
	PLAN(NOW, "", "");
	CHECK_STR(unstaged(), "60");
	CHECK_STR(staged(), "");
	/* Nobody before it: it stays, and starts when the holder is paused. */
	job[0].prio = 0;
	job[0].id = 61;
	PLAN(NOW, "", "");
	CHECK_STR(unstaged(), "");

	/* A better placement: a card is free now. */
	setup(1, 2, "");
	node[0].stage = 1;
	running(50, 0, 0, LONG_AGO, 1, 0);
	staging(60, 0, 0, 1, 0);
	PLAN(NOW, "", "");
	CHECK_STR(unstaged(), "60");
	/* ... unless a queued job takes that card first. */
	add(1);
	PLAN(NOW, "1@a:1", "");
	CHECK_STR(unstaged(), "");
	/* Its node drained: sent back. */
	setup(1, 1, "");
	node[0].stage = 1;
	running(50, 0, 0, LONG_AGO, 1, 0);
	staging(60, 0, 0, 1, 0);
	node[0].drained = 1;
	PLAN(NOW, "", "");
	CHECK_STR(unstaged(), "60");

	/* A preemption of the attempt it waits for, by a job before it:
	 * sent back, and the preemptor holds the card. */
	preempting(1, 1);
	node[0].stage = 1;
	running(50, 0, 0, LONG_AGO, 1, 0);
	staging(60, 0, 0, 1, 0);
	add(1)->prio = 10;
	PLAN(NOW, "", "1@a:0");
	CHECK_STR(preempted(), "1@a<50:0");
	CHECK_STR(unstaged(), "60");
	/* With preemption on, a job is never staged behind one it may
	 * preempt (resumable, lower priority): the node's snapshot not
	 * fresh yet, it waits for preempt() to decide. */
	preempting(1, 1);
	node[0].stage = 1;
	running(50, 0, 0, LONG_AGO, 1, 0);
	node[0].fresh = 0;
	add(1)->prio = 10;
	PLAN(NOW, "", "");
	CHECK_STR(preempted(), "");
	CHECK_STR(staged(), "");
	runs[0].resumable = 0;
	PLAN(NOW, "", "");
	CHECK_STR(staged(), "1@a:0");
	/* ... but a staged job before the preemptor keeps it. */
	preempting(1, 1);
	node[0].stage = 1;
	running(50, 0, 0, LONG_AGO, 1, 0);
	staging(60, 0, 0, 1, 0);
	add(1)->prio = 10;
	runs[1].prio = 20;
	asks[1].prio = 20;
	PLAN(NOW, "", "");
	CHECK_STR(preempted(), "");
	CHECK_STR(unstaged(), "");
}

/* A travelling job whose own node's card is about to free, and a card
 * free on another node in a snapshot not trusted yet: not staged on its
 * own node (it goes to the other once read); one that may not travel
 * is staged. */
static void test_travel_baton(void)
{
	setup(2, 1, "");
	node[0].stage = 1;
	running(50, 0, 0, LONG_AGO, 1, 0);
	node[1].fresh = 0;
	add(1);
	job[0].node = "a";
	job[0].travel = 1;
	PLAN(NOW, "", "");
	CHECK_STR(staged(), "");
	job[0].travel = 0;
	PLAN(NOW, "", "");
	CHECK_STR(staged(), "1@a:0");
	/* Read since, free: moved there. */
	job[0].travel = 1;
	node[1].fresh = 1;
	PLAN(NOW, "1@b:0", "");
	CHECK(out.place[0].moved);
	/* Staged on a already (b looked busy then), b free now: un-staged. */
	setup(2, 1, "");
	node[0].stage = 1;
	running(50, 0, 0, LONG_AGO, 1, 0);
	{
		struct plan_job *a = (struct plan_job *)(void *)staging(1, 0, 0, 1, 0)->job;

		a->node = "a";
		a->travel = 1;
		PLAN(NOW, "", "");
		CHECK(out.nunstage == 1);
		a->travel = 0;
		PLAN(NOW, "", "");
		CHECK(out.nunstage == 0);
	}
}

int main(void)
{
	test_order();
	test_pinned();
	test_count();
	test_cpu();
	test_no_hol();
	test_starvation();
	test_eligible();
	test_idle();
	test_nodes();
	test_node_pin();
	test_never_fits();
	test_never_noted();
	test_stop();
	test_not_yet();
	test_deps();
	test_groups();
	test_memory();
	test_preempt();
	test_share();
	test_share_cap();
	test_user_limit();
	test_barred();
	test_shared_fs();
	test_travel();
	test_fair_order();
	test_fair_order_random();
	test_slurm();
	test_baton();
	test_travel_baton();
	plan_free(&out);
	return T_DONE();
}
