/*
 * cardbaton-report - who used which card: from the spool's history, a
 * table per node and per card (time busy, jobs, attempts, the share of
 * the window a card stood idle while jobs waited for cards), the same
 * as JSON, and with --html one self-contained HTML file with a
 * timeline per card.
 *
 * Design.  The report is a reader of the spool like status: it reads
 * every record of queued/, running/, paused/ and done/ (submissions not
 * yet accepted have no history), one per job ID, the higher rev winning
 * (LAYOUT.md §6), a record that moved while it was read looked up again
 * (spool_find; the library's spool_history, spool-layout/history.c, which
 * `users` reads with too); a record it cannot read is named in one warning line and
 * left out, and the exit status is then 65.  It never writes the spool
 * and works the same with or without the daemon.
 *
 * The window is [SINCE, NOW]: SINCE from --since (when_parse), else the
 * earliest time a record holds (a submission, an entry into the queue, an
 * attempt's start).  Every interval is clipped to it.  From the records
 * the report derives two kinds of interval, each by a pure function:
 *
 *  - card time (att_span): an attempt that started holds each of its
 *    cards (attempt node + gpus) from `started` to `finished`; one that
 *    runs now, to NOW; an aborted attempt, or one that never started,
 *    holds none.  A card's busy time is the union of its attempts'
 *    intervals (sharing jobs overlap and are not counted twice); its jobs
 *    and attempts are counted each.
 *  - waits (job_waits): a GPU job waits for cards from its submission
 *    (or its `begin`, or the end of the last job it names in `after` /
 *    `after_any`, whichever is latest) until its first attempt starts;
 *    after an attempt that paused, from that attempt's end until the next
 *    attempt starts -- except after a pause the user asked for (attempt
 *    reason "checkpoint saved"), when it waited for `cardbaton resume`,
 *    not for a card, and its wait begins when it entered the queue again
 *    (queued_at, known only for the last such entry).  A job queued now
 *    (not held) waits until NOW; one that ended without starting, until
 *    its end.  A wait counts for the cards the job could take: those of
 *    its pinned node (a resumed or requeued job: the node of its
 *    checkpoint) and pinned indices, else every card.  A CPU job never
 *    waits for cards.
 *
 * A card's "idle while jobs waited" is the time in the window during
 * which at least one wait that counts for it was open and the card was
 * not busy: |W \ B| for the union W of those waits and the union B of its
 * card time (iv_merge, iv_common).  Its share is that time over the
 * window's length; a node's, the sum over its cards over (cards x
 * window).  The cards listed are those some attempt of the history
 * used: one idle all the window shows zeros.
 *
 * Output: the table (H:MM:SS and percentages, one decimal) or --json;
 * with --html FILE the timeline is written atomically (atomic_write
 * beside FILE: a temporary file, fsync, rename), mode 0666 less the
 * umask like a file a shell redirection creates (an existing file keeps
 * its mode), before anything is printed, so that a failure leaves
 * neither a file nor output.  The HTML loads nothing: inline CSS and
 * SVG, no script, a Content-Security-Policy of default-src 'none', and
 * every string from a record (names, commands, reasons) escaped, with
 * ':' as "&#58;" too so that no text of a job can form a URL.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static const char usage[] =
	"cardbaton-report [--config PATH] [--since WHEN] [--html FILE] [--json]";

enum { OPT_SINCE = OPT_TOOL_FIRST, OPT_HTML, OPT_JSON };

static const struct option longopts[] = {
	COMMON_LONGOPTS,
	{ "since", required_argument, NULL, OPT_SINCE },
	{ "html", required_argument, NULL, OPT_HTML },
	{ "json", no_argument, NULL, OPT_JSON },
	{ NULL, 0, NULL, 0 },
};

/* sysexits(3): a user's output file that cannot be created. */
#define EX_CANTCREAT_ 73

static _Noreturn void oom(void)
{
	die(EX_OSERR_, "%s", strerror(ENOMEM));
}

static void *xreallocarray(void *p, size_t n, size_t size)
{
	if (!(p = reallocarray(p, n ? n : 1, size)))
		oom();
	return p;
}

/* Room for one more element in V (N used, CAP allocated). */
#define GROW(v, n, cap) do { \
	if ((n) == (cap)) { \
		(cap) = (cap) ? (cap) * 2 : 16; \
		(v) = xreallocarray((v), (cap), sizeof *(v)); \
	} \
} while (0)

static char *xstrdup(const char *s)
{
	char *p = strdup(s);

	if (!p)
		oom();
	return p;
}

/* ---- intervals (pure) ----------------------------------------------------- */

/* [s, e), epoch ms. */
struct iv {
	long long s, e;
};

static int iv_cmp(const void *pa, const void *pb)
{
	const struct iv *a = pa, *b = pb;

	if (a->s != b->s)
		return a->s < b->s ? -1 : 1;
	return (a->e > b->e) - (a->e < b->e);
}

/* Sort V and merge what overlaps or touches, in place: the new count.
 * Empty intervals are dropped. */
static size_t iv_merge(struct iv *v, size_t n)
{
	size_t k = 0;

	if (n > 1)
		qsort(v, n, sizeof *v, iv_cmp);
	for (size_t i = 0; i < n; i++) {
		if (v[i].e <= v[i].s)
			continue;
		if (k && v[i].s <= v[k - 1].e) {
			if (v[i].e > v[k - 1].e)
				v[k - 1].e = v[i].e;
		} else {
			v[k++] = v[i];
		}
	}
	return k;
}

static long long iv_total(const struct iv *v, size_t n)
{
	long long t = 0;

	for (size_t i = 0; i < n; i++)
		t += v[i].e - v[i].s;
	return t;
}

/* The length of the intersection of two merged lists. */
static long long iv_common(const struct iv *a, size_t na, const struct iv *b, size_t nb)
{
	long long t = 0;
	size_t i = 0, k = 0;

	while (i < na && k < nb) {
		long long s = a[i].s > b[k].s ? a[i].s : b[k].s;
		long long e = a[i].e < b[k].e ? a[i].e : b[k].e;

		if (e > s)
			t += e - s;
		if (a[i].e < b[k].e)
			i++;
		else
			k++;
	}
	return t;
}

/* [*S, *E) clipped to [LO, HI]: 1 when something of it is left. */
static int iv_clip(long long *s, long long *e, long long lo, long long hi)
{
	if (*s < lo)
		*s = lo;
	if (*e > hi)
		*e = hi;
	return *e > *s;
}

/* ---- what the records say (pure) ------------------------------------------ */

/* The interval attempt A of job J held its cards, before clipping:
 * [*S, *E) with *E > *S, and 1; 0 when it is no card time (aborted,
 * never started, no end known).  NOW ends one that runs now. */
static int att_span(const struct job *j, const struct attempt *a, long long now,
		    long long *s, long long *e)
{
	if (a->state == AS_ABORTED || a->started <= 0)
		return 0;
	*s = a->started;
	if (a->finished > 0)
		*e = a->finished;
	else if (!job_state_final(j->state) &&
		 (a->state == AS_LAUNCHING || a->state == AS_RUNNING || a->state == AS_PAUSING))
		*e = now;
	else if (j->finished > 0)
		*e = j->finished;
	else
		return 0;
	if (*e > now)
		*e = now;
	return *e > *s;
}

/* A pause the user asked for (cardbaton pause): the job then waited for
 * cardbaton resume, not for a card.  A yield (preemption, drain) or a
 * time limit says why in its reason (worker/supervise.c). */
static int user_pause(const struct attempt *a)
{
	return a->state == AS_PAUSED && a->reason && strcmp(a->reason, "checkpoint saved") == 0;
}

enum mark { MARK_NONE, MARK_PAUSE, MARK_PREEMPT };

/* How the timeline marks the end of A: a pause, or a preemption (a
 * yield to another job, a drain, a time limit: the job went back to the
 * queue, or failed for want of a checkpoint). */
static enum mark att_mark(const struct attempt *a)
{
	if (a->state == AS_PAUSED)
		return user_pause(a) ? MARK_PAUSE : MARK_PREEMPT;
	if (a->state == AS_FAILED && a->reason &&
	    (strncmp(a->reason, "preempted", 9) == 0 || strncmp(a->reason, "drained", 7) == 0))
		return MARK_PREEMPT;
	return MARK_NONE;
}

/* A time a job waited for cards, and the cards it waited for: NODE
 * NULL any node; NGPUS 0 any index.  STARTED: it ended when an attempt
 * started (at E; such a wait may be empty, the attempt starting at
 * once), rather than at the job's end or now. */
struct wait {
	long long s, e;
	const char *node;
	const int *gpus;
	size_t ngpus;
	int started;
};

/* Where job ID is among the N jobs of JOBS (sorted by ID), or NULL. */
static const struct job *job_lookup(const struct job *jobs, size_t n, long long id)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (jobs[mid].id == id)
			return &jobs[mid];
		if (jobs[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* When J's first wait began: its submission (else its entry into the
 * queue), its `begin`, the end of each job it names in after/after_any
 * that the history holds, whichever is latest; LLONG_MAX when one has
 * not ended (J does not wait for cards yet) or the record has no time. */
static long long wait_from(const struct job *j, const struct job *jobs, size_t n)
{
	long long t = j->submitted > 0 ? j->submitted : j->queued_at;

	if (t <= 0)
		return LLONG_MAX;       /* the record does not say */
	if (j->def.begin > t)
		t = j->def.begin;
	for (size_t k = 0; k < j->def.nafter + j->def.nafter_any; k++) {
		long long id = k < j->def.nafter ? j->def.after[k] : j->def.after_any[k - j->def.nafter];
		const struct job *d = job_lookup(jobs, n, id);

		if (!d)
			continue;
		if (!job_state_final(d->state))
			return LLONG_MAX;
		if (d->finished > t)
			t = d->finished;
	}
	return t;
}

/* Where J's wait after attempt P began, or LLONG_MAX for none. */
static long long gap_from(const struct job *j, const struct attempt *p)
{
	if (p->finished <= 0)
		return LLONG_MAX;
	if (user_pause(p))
		return j->queued_at >= p->finished ? j->queued_at : LLONG_MAX;
	return p->finished;
}

/*
 * The times job J waited for cards (the rules at the top of this file),
 * each to ADD, unclipped; one that ended when an attempt started is
 * given even when it is empty (STARTED: the per-user mean wait counts
 * it).  FROM: wait_from.  NOW ends a wait that is open.
 */
static void job_waits(const struct job *j, long long from, long long now,
		      void (*add)(void *arg, const struct wait *w), void *arg)
{
	const struct attempt *prev = NULL;
	struct wait w = { 0, 0, j->def.node, j->def.gpus, j->def.ngpus, 1 };
	long long tail = 0;

	if (jobdef_gpu_need(&j->def) == 0)
		return;
	if (j->state == JS_QUEUED)
		tail = j->def.hold ? 0 : now;
	else if (j->state == JS_RUNNING || j->state == JS_PAUSING)
		tail = now;     /* placed, its attempt not started yet */
	else if (job_state_final(j->state))
		tail = j->finished;
	for (size_t i = 0; i < j->natt; i++) {
		const struct attempt *a = &j->att[i];

		if (a->state == AS_ABORTED || a->started <= 0)
			continue;
		if (prev) {
			w.node = prev->node;
			w.s = gap_from(j, prev);
		} else {
			w.s = from;
		}
		w.e = a->started;
		if (w.e >= w.s)
			add(arg, &w);
		prev = a;
	}
	if (!prev) {
		w.s = from;
	} else if (!job_state_final(j->state) && j->state != JS_PAUSED) {
		/* Queued again (requeued, resumed), or placed anew and not
		 * started yet; an attempt running now has no end (no gap). */
		w.node = prev->node;
		w.s = gap_from(j, prev);
	} else {
		return;
	}
	w.e = tail;
	w.started = 0;
	if (w.e > w.s)
		add(arg, &w);
}

/* ---- reading the spool ------------------------------------------------------ */

static struct job *jobs;
static size_t njobs;
static int read_ex;             /* 65 (or the first warning's code) when a record was skipped */
static size_t nskipped;

static void skip_record(void *arg, const struct cb_err *e)
{
	(void)arg;
	warn_line("%s", e->msg ? e->msg : strerror(ENOMEM));
	if (!read_ex)
		read_ex = e->ex ? e->ex : EX_OSERR_;
	nskipped++;
}

/* Every job of SP with a record, once, into JOBS (sorted by ID). */
static void read_spool(struct spool *sp)
{
	struct cb_err err = { 0 };

	if (spool_history(sp, &jobs, &njobs, skip_record, NULL, &err) < 0)
		die_err(&err);
}

/* ---- the figures ------------------------------------------------------------ */

/* An attempt on a card, clipped to the window. */
struct bar {
	const struct job *j;
	const struct attempt *a;
	long long s, e;
};

struct card {
	size_t node;            /* in nodes[] */
	int index;
	const char *uuid;       /* the last attempt's word for it, or NULL */
	struct bar *bars;       /* in job ID order */
	size_t nbars, capbars;
	/* The figures: */
	long long busy, idle_wait;      /* ms */
	size_t jobs;
};

struct node {
	char *name;
	size_t *cards;          /* in cards[], by index */
	size_t ncards, capcards;
	size_t attempts, jobs;
	long long last_job;
	long long busy, idle_wait;
};

static struct card *cards;
static size_t ncards, capcards;
static struct node *nodes;
static size_t nnodes, capnodes;
static struct wait *waits;
static size_t nwaits, capwaits;

static long long since, now;    /* the window */

static size_t node_of(const char *name)
{
	for (size_t i = 0; i < nnodes; i++)
		if (strcmp(nodes[i].name, name) == 0)
			return i;
	GROW(nodes, nnodes, capnodes);
	memset(&nodes[nnodes], 0, sizeof nodes[nnodes]);
	nodes[nnodes].name = xstrdup(name);
	return nnodes++;
}

static size_t card_of(size_t node, int index)
{
	struct node *n = &nodes[node];

	for (size_t i = 0; i < n->ncards; i++)
		if (cards[n->cards[i]].index == index)
			return n->cards[i];
	GROW(cards, ncards, capcards);
	memset(&cards[ncards], 0, sizeof cards[ncards]);
	cards[ncards].node = node;
	cards[ncards].index = index;
	GROW(n->cards, n->ncards, n->capcards);
	n->cards[n->ncards++] = ncards;
	return ncards++;
}

static void add_wait(void *arg, const struct wait *w)
{
	struct wait c = *w;

	(void)arg;
	if (!iv_clip(&c.s, &c.e, since, now))
		return;
	GROW(waits, nwaits, capwaits);
	waits[nwaits++] = c;
}

static int wait_counts_for(const struct wait *w, const struct card *c)
{
	if (w->node && strcmp(w->node, nodes[c->node].name) != 0)
		return 0;
	if (!w->ngpus)
		return 1;
	for (size_t i = 0; i < w->ngpus; i++)
		if (w->gpus[i] == c->index)
			return 1;
	return 0;
}

/* The earliest time the history holds: the window's start without
 * --since. */
static long long earliest(void)
{
	long long t = now;

	for (size_t i = 0; i < njobs; i++) {
		const struct job *j = &jobs[i];
		long long s, e;

		if (j->submitted > 0 && j->submitted < t)
			t = j->submitted;
		if (j->queued_at > 0 && j->queued_at < t)
			t = j->queued_at;
		for (size_t k = 0; k < j->natt; k++)
			if (att_span(j, &j->att[k], now, &s, &e) && s < t)
				t = s;
	}
	return t;
}

static int idx_cmp(const void *pa, const void *pb)
{
	int a = cards[*(const size_t *)pa].index, b = cards[*(const size_t *)pb].index;

	return (a > b) - (a < b);
}

static const struct config *conf;

/* Nodes in the configuration's order, then the others by name. */
static int node_cmp(const void *pa, const void *pb)
{
	const struct node *a = pa, *b = pb;
	size_t ia = conf->nnodes, ib = conf->nnodes;

	for (size_t i = 0; i < conf->nnodes; i++) {
		if (strcmp(conf->nodes[i].name, a->name) == 0)
			ia = i;
		if (strcmp(conf->nodes[i].name, b->name) == 0)
			ib = i;
	}
	if (ia != ib)
		return ia < ib ? -1 : 1;
	return strcmp(a->name, b->name);
}

static void compute(void)
{
	struct iv *busy = NULL, *w = NULL;
	size_t capbusy = 0, capw = 0;

	/* Card time: an attempt's bar on each of its cards. */
	for (size_t i = 0; i < njobs; i++) {
		const struct job *j = &jobs[i];

		for (size_t k = 0; k < j->natt; k++) {
			const struct attempt *a = &j->att[k];
			long long s, e;
			size_t nd;

			if (!a->node || !a->ngpus || !att_span(j, a, now, &s, &e))
				continue;
			/* A card the history knows is listed, busy in the
			 * window or not. */
			nd = node_of(a->node);
			for (size_t g = 0; g < a->ngpus; g++) {
				size_t ci = card_of(nd, a->gpus[g]);
				struct card *c = &cards[ci];

				if (g < a->nuuids && a->uuids[g][0])
					c->uuid = a->uuids[g];
			}
			if (!iv_clip(&s, &e, since, now))
				continue;
			nodes[nd].attempts++;
			if (nodes[nd].jobs == 0 || nodes[nd].last_job != j->id) {
				nodes[nd].jobs++;
				nodes[nd].last_job = j->id;
			}
			for (size_t g = 0; g < a->ngpus; g++) {
				size_t ci = card_of(nd, a->gpus[g]);
				struct card *c = &cards[ci];

				GROW(c->bars, c->nbars, c->capbars);
				c->bars[c->nbars++] = (struct bar){ j, a, s, e };
			}
		}
	}
	for (size_t i = 0; i < njobs; i++)
		job_waits(&jobs[i], wait_from(&jobs[i], jobs, njobs), now, add_wait, NULL);

	for (size_t ci = 0; ci < ncards; ci++) {
		struct card *c = &cards[ci];
		size_t nb = 0, nw = 0;

		for (size_t b = 0; b < c->nbars; b++) {
			GROW(busy, nb, capbusy);
			busy[nb++] = (struct iv){ c->bars[b].s, c->bars[b].e };
			if (b == 0 || c->bars[b].j != c->bars[b - 1].j)
				c->jobs++;
		}
		nb = iv_merge(busy, nb);
		c->busy = iv_total(busy, nb);
		for (size_t k = 0; k < nwaits; k++) {
			if (!wait_counts_for(&waits[k], c))
				continue;
			GROW(w, nw, capw);
			w[nw++] = (struct iv){ waits[k].s, waits[k].e };
		}
		nw = iv_merge(w, nw);
		c->idle_wait = iv_total(w, nw) - iv_common(w, nw, busy, nb);
		nodes[c->node].busy += c->busy;
		nodes[c->node].idle_wait += c->idle_wait;
	}
	free(busy);
	free(w);
	/* The order shown: nodes as configured, cards by index.  Sorting
	 * nodes[] moves what cards[].node points at: fix it up after. */
	if (nnodes > 1)
		qsort(nodes, nnodes, sizeof *nodes, node_cmp);
	for (size_t i = 0; i < nnodes; i++) {
		for (size_t k = 0; k < nodes[i].ncards; k++)
			cards[nodes[i].cards[k]].node = i;
		if (nodes[i].ncards > 1)
			qsort(nodes[i].cards, nodes[i].ncards, sizeof *nodes[i].cards, idx_cmp);
	}
}

/* ---- per user ------------------------------------------------------------------ */

/*
 * Each owner's figures in the window (the jobs recorded without an
 * owner under NAME NULL): GPU time, the cards x time of the user's
 * attempts (sharers each counted: it is the user's use, not a card's);
 * jobs, those alive in the window (submitted before its end, not ended
 * before its start); attempts, those that held their cards (or ran, a
 * CPU job's) in it; the mean wait, over the waits for cards that ended
 * in it with an attempt starting (job_waits: an attempt that started at
 * once waited 0), unclipped.
 */
struct ufig {
	const char *name;       /* the records' (not owned); NULL: none */
	long long card_ms;
	size_t jobs, attempts, nwait;
	long long wait_ms;
};

static struct ufig *ufigs;
static size_t nufigs, capufigs;

static struct ufig *ufig_of(const char *name)
{
	for (size_t i = 0; i < nufigs; i++)
		if (!name ? !ufigs[i].name : ufigs[i].name && !strcmp(ufigs[i].name, name))
			return &ufigs[i];
	GROW(ufigs, nufigs, capufigs);
	memset(&ufigs[nufigs], 0, sizeof ufigs[nufigs]);
	ufigs[nufigs].name = name;
	return &ufigs[nufigs++];
}

static void add_user_wait(void *arg, const struct wait *w)
{
	struct ufig *u = arg;

	if (w->started && w->e >= since && w->e <= now) {
		u->wait_ms += w->e - w->s;
		u->nwait++;
	}
}

/* Most GPU time first, then by name, the jobs without an owner last. */
static int ufig_cmp(const void *pa, const void *pb)
{
	const struct ufig *a = pa, *b = pb;

	if (a->card_ms != b->card_ms)
		return a->card_ms > b->card_ms ? -1 : 1;
	if (!a->name || !b->name)
		return !a->name - !b->name;
	return strcmp(a->name, b->name);
}

static void compute_users(void)
{
	size_t k = 0;

	for (size_t i = 0; i < njobs; i++) {
		const struct job *j = &jobs[i];
		struct ufig *u = ufig_of(j->owner);
		long long born = j->submitted > 0 ? j->submitted : j->queued_at;
		long long died = job_state_final(j->state) ? (j->finished > 0 ? j->finished : born) : now;

		if (born <= now && died >= since)
			u->jobs++;
		for (size_t n = 0; n < j->natt; n++) {
			const struct attempt *a = &j->att[n];
			long long s, e;

			if (!att_span(j, a, now, &s, &e) || !iv_clip(&s, &e, since, now))
				continue;
			u->attempts++;
			u->card_ms += (long long)a->ngpus * (e - s);
		}
		job_waits(j, wait_from(j, jobs, njobs), now, add_user_wait, u);
	}
	/* Only the users the window saw. */
	for (size_t i = 0; i < nufigs; i++)
		if (ufigs[i].jobs || ufigs[i].attempts || ufigs[i].nwait)
			ufigs[k++] = ufigs[i];
	nufigs = k;
	if (nufigs > 1)
		qsort(ufigs, nufigs, sizeof *ufigs, ufig_cmp);
}

static char *hms(long long ms);

#define UNCOL 5
static const char *const uheader[UNCOL] = { "USER", "GPU-HOURS", "JOBS", "ATT", "MEAN-WAIT" };

/* The cells of user U's row (malloc'd; the name made printable). */
static void user_cells(const struct ufig *u, char **cell)
{
	if (!(cell[0] = printable(u->name ? u->name : "-")))
		oom();
	cell[1] = must_asprintf("%.2f", (double)u->card_ms / 3600000.0);
	cell[2] = must_asprintf("%zu", u->jobs);
	cell[3] = must_asprintf("%zu", u->attempts);
	cell[4] = u->nwait ? hms(u->wait_ms / (long long)u->nwait) : xstrdup("-");
}

/* ---- text ---------------------------------------------------------------------- */

static double share(long long part, long long whole)
{
	return whole > 0 ? (double)part / (double)whole : 0.0;
}

/* MS as H:MM:SS (hours as many as it takes), malloc'd. */
static char *hms(long long ms)
{
	long long s = ms / 1000;

	return must_asprintf("%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
}

static char *pct(double f)
{
	return must_asprintf("%.1f%%", f * 100.0);
}

static char *must_time(long long ms)
{
	char *t = rfc3339(ms);

	if (!t)
		oom();
	return t;
}

#define NCOL 8
static const char *const header[NCOL] = {
	"NODE", "GPU", "BUSY", "BUSY%", "JOBS", "ATT", "IDLE-WAIT%", "UUID",
};

/* The cells of a card's row (CARD), or of a node's sum (NODE, CARD NULL). */
static void row_cells(const struct node *n, const struct card *c, char **cell)
{
	long long span = now - since;
	size_t k = n->ncards ? n->ncards : 1;

	cell[0] = xstrdup(n->name);
	cell[1] = c ? must_asprintf("%d", c->index) : xstrdup("all");
	cell[2] = hms(c ? c->busy : n->busy);
	cell[3] = pct(c ? share(c->busy, span) : share(n->busy, span * (long long)k));
	cell[4] = must_asprintf("%zu", c ? c->jobs : n->jobs);
	cell[5] = must_asprintf("%zu", c ? c->nbars : n->attempts);
	cell[6] = pct(c ? share(c->idle_wait, span) : share(n->idle_wait, span * (long long)k));
	cell[7] = c ? xstrdup(c->uuid ? c->uuid : "-") : must_asprintf("(%zu card%s)", n->ncards,
									n->ncards == 1 ? "" : "s");
}

static void print_table(void)
{
	struct table t;
	char *from = must_time(since), *to = must_time(now), *len = hms(now - since);

	printf("window %s to %s (%s), %zu job%s\n", from, to, len, njobs, njobs == 1 ? "" : "s");
	free(from);
	free(to);
	free(len);
	/* Every figure right-aligned. */
	table_init(&t, NCOL, 0x7eu);
	table_row(&t, header);
	for (size_t i = 0; i < nnodes; i++) {
		char *cell[NCOL];

		for (size_t k = 0; k < nodes[i].ncards; k++) {
			row_cells(&nodes[i], &cards[nodes[i].cards[k]], cell);
			table_row_own(&t, cell);
		}
		row_cells(&nodes[i], NULL, cell);
		table_row_own(&t, cell);
	}
	table_print(&t, stdout, term_width());
	table_free(&t);
	if (!nufigs)
		return;
	/* The users, after a blank line; every figure right-aligned. */
	putchar('\n');
	table_init(&t, UNCOL, 0x1eu);
	table_row(&t, uheader);
	for (size_t i = 0; i < nufigs; i++) {
		char *cell[UNCOL];

		user_cells(&ufigs[i], cell);
		table_row_own(&t, cell);
	}
	table_print(&t, stdout, term_width());
	table_free(&t);
}

/* ---- JSON ---------------------------------------------------------------------- */

static void add_figures(cJSON *o, long long busy, long long idle, long long whole,
			size_t njob, size_t natt)
{
	if (!cJSON_AddNumberToObject(o, "busy_seconds", (double)busy / 1000.0) ||
	    !cJSON_AddNumberToObject(o, "busy_share", share(busy, whole)) ||
	    !cJSON_AddNumberToObject(o, "jobs", (double)njob) ||
	    !cJSON_AddNumberToObject(o, "attempts", (double)natt) ||
	    !cJSON_AddNumberToObject(o, "idle_waiting_seconds", (double)idle / 1000.0) ||
	    !cJSON_AddNumberToObject(o, "idle_waiting_share", share(idle, whole)))
		oom();
}

static void print_json(void)
{
	cJSON *o = cJSON_CreateObject(), *arr;
	char *from = must_time(since), *to = must_time(now), *text;
	long long span = now - since;

	if (!o || !cJSON_AddStringToObject(o, "since", from) ||
	    !cJSON_AddStringToObject(o, "until", to) ||
	    !cJSON_AddNumberToObject(o, "since_ms", (double)since) ||
	    !cJSON_AddNumberToObject(o, "until_ms", (double)now) ||
	    !cJSON_AddNumberToObject(o, "window_seconds", (double)span / 1000.0) ||
	    !cJSON_AddNumberToObject(o, "jobs", (double)njobs) ||
	    !cJSON_AddNumberToObject(o, "unreadable", (double)nskipped) ||
	    !(arr = cJSON_AddArrayToObject(o, "nodes")))
		oom();
	for (size_t i = 0; i < nnodes; i++) {
		const struct node *n = &nodes[i];
		cJSON *no = cJSON_CreateObject(), *ga;

		if (!no || !cJSON_AddItemToArray(arr, no) ||
		    !cJSON_AddStringToObject(no, "name", n->name) ||
		    !cJSON_AddNumberToObject(no, "cards", (double)n->ncards))
			oom();
		add_figures(no, n->busy, n->idle_wait, span * (long long)(n->ncards ? n->ncards : 1),
			    n->jobs, n->attempts);
		if (!(ga = cJSON_AddArrayToObject(no, "gpus")))
			oom();
		for (size_t k = 0; k < n->ncards; k++) {
			const struct card *c = &cards[n->cards[k]];
			cJSON *co = cJSON_CreateObject();

			if (!co || !cJSON_AddItemToArray(ga, co) ||
			    !cJSON_AddNumberToObject(co, "index", c->index) ||
			    !(c->uuid ? cJSON_AddStringToObject(co, "uuid", c->uuid)
				      : cJSON_AddNullToObject(co, "uuid")))
				oom();
			add_figures(co, c->busy, c->idle_wait, span, c->jobs, c->nbars);
		}
	}
	if (!(arr = cJSON_AddArrayToObject(o, "users")))
		oom();
	for (size_t i = 0; i < nufigs; i++) {
		const struct ufig *u = &ufigs[i];
		cJSON *uo = cJSON_CreateObject();

		if (!uo || !cJSON_AddItemToArray(arr, uo) ||
		    !(u->name ? cJSON_AddStringToObject(uo, "user", u->name)
			      : cJSON_AddNullToObject(uo, "user")) ||
		    !cJSON_AddNumberToObject(uo, "gpu_hours", (double)u->card_ms / 3600000.0) ||
		    !cJSON_AddNumberToObject(uo, "jobs", (double)u->jobs) ||
		    !cJSON_AddNumberToObject(uo, "attempts", (double)u->attempts) ||
		    !(u->nwait ? cJSON_AddNumberToObject(uo, "mean_wait_seconds",
							 (double)u->wait_ms / (double)u->nwait / 1000.0)
			       : cJSON_AddNullToObject(uo, "mean_wait_seconds")))
			oom();
	}
	if (!(text = cJSON_Print(o)))
		oom();
	puts(text);
	cJSON_free(text);
	cJSON_Delete(o);
	free(from);
	free(to);
}

/* ---- HTML ---------------------------------------------------------------------- */

static struct sbuf html;

static void ap(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void ap(const char *fmt, ...)
{
	va_list va;
	char *s;
	int n;

	va_start(va, fmt);
	n = vasprintf(&s, fmt, va);
	va_end(va);
	if (n < 0)
		oom();
	if (sbuf_add(&html, s, (size_t)n) < 0)
		oom();
	free(s);
}

/* S escaped for HTML text and attribute values alike; ':' too, so that
 * no text from a record can form a URL in the file. */
static void esc(const char *s)
{
	struct sbuf *b = &html;

	for (; *s; s++) {
		const char *r = NULL;

		switch (*s) {
		case '&': r = "&amp;"; break;
		case '<': r = "&lt;"; break;
		case '>': r = "&gt;"; break;
		case '"': r = "&quot;"; break;
		case '\'': r = "&#39;"; break;
		case ':': r = "&#58;"; break;
		}
		if (r ? sbuf_add(b, r, strlen(r)) < 0 : sbuf_add(b, s, 1) < 0)
			oom();
	}
}

/* esc of printable(S): a record's text with its control characters as '?'. */
static void esc_text(const char *s)
{
	char *p = printable(s);

	if (!p)
		oom();
	esc(p);
	free(p);
}

static const struct { const char *name, *fill, *ink; } colour[] = {
	{ "succeeded", "#2e9e44", "#ffffff" },
	{ "failed", "#d62828", "#ffffff" },
	{ "cancelled", "#9e9e9e", "#000000" },
	{ "lost", "#7b1113", "#ffffff" },
	{ "paused", "#17becf", "#000000" },
	{ "running", "#3b73d9", "#ffffff" },    /* launching, running, pausing: now */
};
enum { COL_OK, COL_FAILED, COL_CANCELLED, COL_LOST, COL_PAUSED, COL_RUNNING, NCOLOUR };

static int colour_of(enum att_state s)
{
	switch (s) {
	case AS_SUCCEEDED: return COL_OK;
	case AS_FAILED: return COL_FAILED;
	case AS_CANCELLED: return COL_CANCELLED;
	case AS_LOST: return COL_LOST;
	case AS_PAUSED: return COL_PAUSED;
	default: return COL_RUNNING;
	}
}

/* The timeline's geometry (px). */
#define SVG_W 1360
#define LEFT 290
#define RIGHT 20
#define TOP 40
#define ROW 34
#define BAR_H 22
#define PLOT_W (SVG_W - LEFT - RIGHT)

static double xpos(long long t)
{
	long long span = now - since;

	if (span <= 0)
		return LEFT;
	return LEFT + (double)(t - since) * PLOT_W / (double)span;
}

/* The mark at the end of a bar that ends at X, in row top Y. */
static void mark_svg(enum mark m, double x, double y)
{
	if (m == MARK_PAUSE)
		ap("<rect x=\"%.2f\" y=\"%.2f\" width=\"2\" height=\"%d\" fill=\"#063c42\"/>"
		   "<rect x=\"%.2f\" y=\"%.2f\" width=\"2\" height=\"%d\" fill=\"#063c42\"/>",
		   x - 6, y + 5, BAR_H - 10, x - 3, y + 5, BAR_H - 10);
	else if (m == MARK_PREEMPT)
		ap("<polygon points=\"%.2f,%.2f %.2f,%.2f %.2f,%.2f\" fill=\"#111111\"/>",
		   x - 9, y, x, y, x, y + 9);
}

/* The first N UTF-8 characters of S: their length in bytes. */
static size_t utf8_prefix(const char *s, size_t n)
{
	size_t i = 0;

	while (s[i] && n) {
		i++;
		while ((s[i] & 0xc0) == 0x80)
			i++;
		n--;
	}
	return i;
}

static size_t utf8_len(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += (*s & 0xc0) != 0x80;
	return n;
}

static void bar_svg(const struct card *c, const struct bar *b, double y)
{
	const struct job *j = b->j;
	const struct attempt *a = b->a;
	int col = colour_of(a->state);
	double x0 = xpos(b->s), x1 = xpos(b->e), w = x1 - x0;
	char *cmd = command_display(&j->def), *st = must_time(a->started), *label;
	char *en = a->finished > 0 ? must_time(a->finished) : xstrdup("now (running)");
	long long s_, e_;
	char *len = att_span(j, a, now, &s_, &e_) ? hms(e_ - s_) : xstrdup("-");
	size_t fit, idlen;

	if (!cmd)
		oom();
	if (w < 1)
		w = 1;
	ap("<g><title>");
	ap("job %lld", j->id);
	if (j->def.name) {
		ap(" ");
		esc_text(j->def.name);
	}
	ap("&#10;attempt %d&#58; %s", a->n, att_state_name(a->state));
	if (a->has_exit)
		ap(" (exit status %lld)", a->exit_code);
	ap("&#10;");
	esc(nodes[c->node].name);
	ap(" GPU");
	for (size_t g = 0; g < a->ngpus; g++)
		ap("%s%d", g ? "," : " ", a->gpus[g]);
	ap("&#10;");
	esc(st);
	ap(" to ");
	esc(en);
	ap(" (");
	esc(len);
	ap(")");
	if (a->reason) {
		ap("&#10;reason&#58; ");
		esc_text(a->reason);
	}
	ap("&#10;command&#58; ");
	esc(cmd);
	ap("</title><rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%d\" fill=\"%s\"/>",
	   x0, y, w, BAR_H, colour[col].fill);
	mark_svg(att_mark(a), x0 + w, y);
	/* The label when the bar has room for it (7 px a character): the
	 * ID and name, the name cut with an ellipsis, or the ID alone. */
	label = j->def.name ? must_asprintf("%lld %s", j->id, j->def.name)
			    : must_asprintf("%lld", j->id);
	fit = w > 10 ? (size_t)((w - 10) / 7) : 0;
	idlen = (size_t)snprintf(NULL, 0, "%lld", j->id);
	if (fit >= idlen) {
		char *p = printable(label), *q;

		if (!p)
			oom();
		if (utf8_len(p) > fit) {
			if (fit >= idlen + 3)
				q = must_asprintf("%.*s\xe2\x80\xa6", (int)utf8_prefix(p, fit - 1), p);
			else
				q = must_asprintf("%lld", j->id);
			free(p);
			p = q;
		}
		ap("<text x=\"%.2f\" y=\"%.2f\" fill=\"%s\">", x0 + 4, y + 15, colour[col].ink);
		esc(p);
		ap("</text>");
		free(p);
	}
	free(label);
	free(cmd);
	free(st);
	free(en);
	free(len);
	ap("</g>\n");
}

/* The axis: a tick every STEP ms, the first STEP of these that gives
 * at most 10, labelled in UTC. */
static void axis_svg(double bottom)
{
	static const long long steps[] = {
		1000, 2000, 5000, 10000, 15000, 30000, 60000, 120000, 300000, 600000,
		900000, 1800000, 3600000, 7200000, 10800000, 21600000, 43200000,
		86400000, 172800000, 604800000, 1209600000, 2592000000LL,
	};
	long long span = now - since, step = 0, day = 86400000, prev_day = -1;

	if (span <= 0)
		return;
	for (size_t i = 0; i < sizeof steps / sizeof steps[0] && !step; i++)
		if (span / steps[i] <= 10)
			step = steps[i];
	if (!step)
		step = (span / 10 / day + 1) * day;
	for (long long t = (since + step - 1) / step * step; t <= now; t += step) {
		time_t secs = (time_t)(t / 1000);
		struct tm tm;
		char buf[64];
		const char *fmt;
		double x = xpos(t);

		if (!gmtime_r(&secs, &tm))
			continue;
		if (step >= day)
			fmt = "%Y-%m-%d";
		else if (t / day != prev_day)
			fmt = step < 60000 ? "%m-%d %H:%M:%S" : "%m-%d %H:%M";
		else
			fmt = step < 60000 ? "%H:%M:%S" : "%H:%M";
		prev_day = t / day;
		if (strftime(buf, sizeof buf, fmt, &tm) == 0)
			snprintf(buf, sizeof buf, "?");
		ap("<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#d0d0d0\"/>"
		   "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\" fill=\"#444444\">%s</text>\n",
		   x, TOP - 8, x, bottom, x, TOP - 14, buf);
	}
}

/* One item of the legend at X: a bar of colour COL with mark M, and TEXT. */
static void legend_item(double x, int col, enum mark m, const char *text)
{
	ap("<rect x=\"%.2f\" y=\"4\" width=\"30\" height=\"%d\" fill=\"%s\"/>", x, BAR_H,
	   colour[col].fill);
	mark_svg(m, x + 30, 4);
	ap("<text x=\"%.2f\" y=\"19\" fill=\"#222222\">%s</text>\n", x + 36, text);
}

static void legend_svg(void)
{
	ap("<svg class=\"legend\" width=\"%d\" height=\"%d\" shape-rendering=\"crispEdges\">\n",
	   SVG_W, BAR_H + 8);
	legend_item(0, COL_OK, MARK_NONE, "succeeded");
	legend_item(120, COL_FAILED, MARK_NONE, "failed");
	legend_item(220, COL_CANCELLED, MARK_NONE, "cancelled");
	legend_item(340, COL_LOST, MARK_NONE, "lost");
	legend_item(430, COL_RUNNING, MARK_NONE, "running now");
	legend_item(570, COL_PAUSED, MARK_PAUSE, "paused (cardbaton pause)");
	legend_item(810, COL_PAUSED, MARK_PREEMPT,
		    "preempted, drained or at its time limit (back in the queue; red: no checkpoint)");
	ap("</svg>\n");
}

static void timeline_svg(void)
{
	double bottom = TOP + (double)ncards * ROW;
	size_t r = 0;

	ap("<svg class=\"timeline\" width=\"%d\" height=\"%.0f\" viewBox=\"0 0 %d %.0f\" "
	   "shape-rendering=\"crispEdges\">\n", SVG_W, bottom + 10, SVG_W, bottom + 10);
	ap("<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%.0f\" fill=\"#ffffff\"/>\n", SVG_W,
	   bottom + 10);
	for (size_t i = 0; i < nnodes; i++) {
		for (size_t k = 0; k < nodes[i].ncards; k++, r++) {
			const struct card *c = &cards[nodes[i].cards[k]];
			double y = TOP + (double)r * ROW;

			if (r % 2)
				ap("<rect x=\"0\" y=\"%.0f\" width=\"%d\" height=\"%d\" fill=\"#f3f3f3\"/>\n",
				   y, SVG_W, ROW);
			ap("<text x=\"6\" y=\"%.0f\" font-weight=\"bold\" fill=\"#222222\">", y + 14);
			esc(nodes[i].name);
			ap("&#58;%d</text><text x=\"6\" y=\"%.0f\" font-size=\"9\" fill=\"#555555\">",
			   c->index, y + 28);
			esc_text(c->uuid ? c->uuid : "");
			ap("</text>\n");
		}
	}
	axis_svg(bottom);
	r = 0;
	for (size_t i = 0; i < nnodes; i++)
		for (size_t k = 0; k < nodes[i].ncards; k++, r++) {
			const struct card *c = &cards[nodes[i].cards[k]];

			for (size_t b = 0; b < c->nbars; b++)
				bar_svg(c, &c->bars[b], TOP + (double)r * ROW + (ROW - BAR_H) / 2.0);
		}
	ap("</svg>\n");
}

static void table_html(void)
{
	ap("<table>\n<thead><tr>");
	for (size_t k = 0; k < NCOL; k++) {
		ap("<th>");
		esc(header[k]);
		ap("</th>");
	}
	ap("</tr></thead>\n<tbody>\n");
	for (size_t i = 0; i < nnodes; i++) {
		for (size_t k = 0; k <= nodes[i].ncards; k++) {
			char *cell[NCOL];
			int sum = k == nodes[i].ncards;

			row_cells(&nodes[i], sum ? NULL : &cards[nodes[i].cards[k]], cell);
			ap(sum ? "<tr class=\"node\">" : "<tr>");
			for (size_t m = 0; m < NCOL; m++) {
				ap("<td>");
				esc_text(cell[m]);
				ap("</td>");
				free(cell[m]);
			}
			ap("</tr>\n");
		}
	}
	ap("</tbody>\n</table>\n");
	if (!nufigs)
		return;
	ap("<table class=\"users\">\n<thead><tr>");
	for (size_t k = 0; k < UNCOL; k++) {
		ap("<th>");
		esc(uheader[k]);
		ap("</th>");
	}
	ap("</tr></thead>\n<tbody>\n");
	for (size_t i = 0; i < nufigs; i++) {
		char *cell[UNCOL];

		user_cells(&ufigs[i], cell);
		ap("<tr>");
		for (size_t m = 0; m < UNCOL; m++) {
			ap("<td>");
			esc(cell[m]);   /* the name is printable() already */
			ap("</td>");
			free(cell[m]);
		}
		ap("</tr>\n");
	}
	ap("</tbody>\n</table>\n");
}

static void build_html(const char *spool_path)
{
	char *from = must_time(since), *to = must_time(now), *len = hms(now - since);

	ap("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
	   "<meta http-equiv=\"Content-Security-Policy\" "
	   "content=\"default-src 'none'; style-src 'unsafe-inline'\">\n<title>cardbaton report ");
	esc(from);
	ap(" to ");
	esc(to);
	ap("</title>\n<style>\n"
	   "body{font-family:\"DejaVu Sans\",sans-serif;margin:16px;color:#222;background:#fff}\n"
	   "h1{font-size:18px;margin:0 0 6px}\n"
	   "p{margin:4px 0;font-size:13px;max-width:1360px}\n"
	   "svg{display:block;font-family:\"DejaVu Sans\",sans-serif;font-size:11px}\n"
	   "svg.timeline{margin-top:8px;border:1px solid #cccccc}\n"
	   "table{border-collapse:collapse;font-size:12px;margin-top:14px}\n"
	   "th,td{padding:2px 10px;text-align:right;border-bottom:1px solid #dddddd}\n"
	   "th:first-child,td:first-child,th:last-child,td:last-child{text-align:left}\n"
	   "tr.node td{font-weight:bold}\n"
	   "table.users td:last-child,table.users th:last-child{text-align:right}\n"
	   "</style>\n</head>\n<body>\n<h1>cardbaton report</h1>\n<p>Spool ");
	esc(spool_path);
	ap(", from ");
	esc(from);
	ap(" to ");
	esc(to);
	ap(" (");
	esc(len);
	ap("), %zu job%s; times in UTC. Hover over a bar for its job, times and command.</p>\n",
	   njobs, njobs == 1 ? "" : "s");
	legend_svg();
	if (ncards)
		timeline_svg();
	else
		ap("<p>No attempt held a card in this window.</p>\n");
	table_html();
	ap("<p>BUSY: the time some attempt held the card (the union: sharing jobs are not "
	   "counted twice). JOBS, ATT: the jobs and attempts that used it. IDLE-WAIT%%: the share "
	   "of the window during which the card was not busy while a job waited in the queue for "
	   "cards it could take (cardbaton-report(1)). A node's row: the sum of its cards. "
	   "Per user: GPU-HOURS, the cards x time of the user's attempts in the window; JOBS, "
	   "the user's jobs alive in it; ATT, its attempts that ran in it; MEAN-WAIT, the mean "
	   "wait for cards of those that started in it; the user - stands for the jobs recorded "
	   "without an owner.</p>\n"
	   "</body>\n</html>\n");
	free(from);
	free(to);
	free(len);
}

/* The HTML to PATH ("-": standard output), atomically: a temporary file
 * beside it, synced, renamed over it.  Mode 0666 less the umask (as a
 * shell's redirection makes it); a file there keeps its mode. */
static void write_html(const char *path)
{
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
	char *dir = slash ? must_asprintf("%.*s", (int)(slash - path), path) : xstrdup(".");
	mode_t mask = umask(0), mode = 0666 & ~mask;
	struct stat st;
	int dfd;

	umask(mask);
	if (strcmp(path, "-") == 0) {
		free(dir);
		if (fwrite(html.s, 1, html.len, stdout) != html.len)
			die_sys(EX_IOERR_, "standard output");
		return;
	}
	if (!*dir) {            /* "/name" */
		free(dir);
		dir = xstrdup("/");
	}
	if (!*base)
		die(EX_CANTCREAT_, "%s: is a directory", path);
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		die_sys(EX_CANTCREAT_, "%s: cannot write into %s", path, dir);
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISDIR(st.st_mode))
			die(EX_CANTCREAT_, "%s: is a directory", path);
		if (S_ISREG(st.st_mode))
			mode = st.st_mode & 07777;
	} else if (errno != ENOENT) {
		die_sys(EX_CANTCREAT_, "%s", path);
	}
	if (atomic_write(dfd, dfd, base, html.s, html.len, mode) < 0)
		die_sys(errno == ENOSPC || errno == EDQUOT ? EX_TEMPFAIL_ :
			errno == EIO ? EX_IOERR_ : EX_CANTCREAT_, "%s", path);
	if (close(dfd) < 0)
		die_sys(EX_IOERR_, "%s", dir);
	free(dir);
}

/* ---- main ---------------------------------------------------------------------- */

static void free_all(void)
{
	for (size_t i = 0; i < ncards; i++)
		free(cards[i].bars);
	free(cards);
	for (size_t i = 0; i < nnodes; i++) {
		free(nodes[i].name);
		free(nodes[i].cards);
	}
	free(nodes);
	free(waits);
	free(ufigs);
	spool_history_free(jobs, njobs);
	sbuf_free(&html);
}

int main(int argc, char **argv)
{
	struct config c;
	struct spool sp;
	const char *since_arg = NULL, *html_path = NULL;
	int ch, json_out = 0, have_spool;

	prog_init(argc, argv);
	while ((ch = tool_getopt(argc, argv, "", longopts, 0, usage)) != -1) {
		switch (ch) {
		case OPT_SINCE:
			since_arg = optarg;
			break;
		case OPT_HTML:
			html_path = optarg;
			break;
		case OPT_JSON:
			json_out = 1;
			break;
		default:
			usage_error(usage, "unknown option");
		}
	}
	if (optind < argc)
		usage_error(usage, "unexpected operand '%s'", argv[optind]);
	if (html_path && !*html_path)
		usage_error(usage, "--html: an empty file name");
	if (html_path && strcmp(html_path, "-") == 0 && json_out)
		usage_error(usage, "--html - and --json would both write standard output");
	now = now_ms();
	if (since_arg) {
		if (when_parse(since_arg, now, &since) < 0)
			die(EX_USAGE_, "--since '%s': not a time (an RFC 3339 time, YYYY-MM-DD, "
			    "or an age such as 90m, 2h, 7d, 1w)", since_arg);
		if (since > now)
			die(EX_USAGE_, "--since '%s': that is in the future", since_arg);
	}
	tool_config(&c);
	conf = &c;
	have_spool = tool_spool(&c, &sp, 0);
	if (have_spool)
		read_spool(&sp);
	if (!since_arg)
		since = earliest();
	compute();
	compute_users();
	if (html_path) {
		build_html(c.spool);
		write_html(html_path);
	}
	if (!html_path || strcmp(html_path, "-") != 0) {
		if (json_out)
			print_json();
		else
			print_table();
	}
	finish_stdout();
	free_all();
	if (have_spool)
		spool_close(&sp);
	config_free(&c);
	return read_ex;
}
