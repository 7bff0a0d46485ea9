/*
 * sched.c - one scheduling pass (SPEC §7; the rule is in AGENTS.md).
 *
 * Jobs are taken in dispatch order (priority, then FIFO).  Each is
 * placed on the first node, in config order, that can take it now:
 *
 *   - pinned indices: all of them eligible, idle and not taken;
 *   - gpu_count K: the K lowest-numbered eligible idle cards;
 *   - a CPU job (K = 0): any reachable node.
 *
 * A job that cannot be placed does not stop the pass: later jobs may
 * use cards it cannot (no head-of-line blocking).  But once it has
 * waited reserve_after_seconds since it was queued, it *holds* what it
 * waits for: its pinned cards, or, for a count, the node with the most
 * free cards among those it may use; no later job is placed on held
 * cards, so they accumulate until it fits (no starvation).
 */
#include <stdlib.h>
#include <string.h>

#include "spoold.h"

/*
 * GPU snapshots are asked for without waiting (acall.c): query_start
 * asks, the main loop hands the answer to query_done, and the pass
 * that follows sees the node fresh.
 */
void query_start(struct daemon *d, struct node *n)
{
	static const char *const args[] = { "gpus", NULL };

	if (n->fresh || n->query.pid > 0)
		return;
	if (!n->reachable && n->retry_at && mono_now() < n->retry_at)
		return;
	acall_start(d, n, &n->query, args, NODE_QUERY_MS);
}

static long slot_of(const struct node *n, int index)
{
	for (size_t i = 0; i < n->ngpus; i++)
		if (n->gpus[i].index == index)
			return (long)i;
	return -1;
}

const char *card_uuid(const struct node *n, int index)
{
	long s = slot_of(n, index);

	return s < 0 ? NULL : n->gpus[s].uuid;
}

/*
 * The snapshot of a card whose lease holder has ended: the card is
 * free, the memory and processes the job had there gone with it.  A
 * guess the worker checks: it re-reads the cards under their leases
 * before it starts anything, and a card still busy sends the job back
 * to the queue and the node to a fresh query.  So the next job starts
 * without a round trip to the node (the handoff).
 */
static void lease_ended(struct node *n, size_t i)
{
	struct gpu_info *g = &n->gpus[i];

	free(g->lease);
	g->lease = NULL;
	g->procs = 0;
	g->mem_used = 0;
	if (n->taken)
		n->taken[i] = 0;
}

/* Every card of N's snapshot that AID held is free. */
static void leases_ended(struct node *n, const char *aid)
{
	for (size_t i = 0; i < n->ngpus; i++)
		if (n->gpus[i].lease && !strcmp(n->gpus[i].lease, aid))
			lease_ended(n, i);
}

/*
 * Attempt AID on node N has ended: the node has just said so, and its
 * worker let go of the leases before it wrote the final state.  The
 * cards go to the next job in the pass that follows (n->handoff), on
 * the snapshot as the daemon knows it, without waiting for a query.  A
 * query in flight may still show the leases: its answer is patched the
 * same way.
 */
void cards_freed(struct daemon *d, struct node *n, const char *aid)
{
	leases_ended(n, aid);
	if (n->query.pid > 0) {
		char **v = realloc(n->ended, (n->nended + 1) * sizeof *v);

		if (v)
			n->ended = v;
		if (!v || !(v[n->nended] = strdup(aid)))
			n->stale_query = 1;     /* no memory to patch: ask again */
		else
			n->nended++;
	}
	n->handoff = 1;
	d->dirty = 1;
}

static void ended_clear(struct node *n)
{
	for (size_t e = 0; e < n->nended; e++)
		free(n->ended[e]);
	n->nended = 0;
}

void query_done(struct daemon *d, struct node *n, int status)
{
	struct gpu_info *g;
	size_t k, slot = (size_t)(n - d->nodes);
	struct sbuf *b = &n->query.buf;
	int stale = n->stale_query;

	n->stale_query = 0;
	if (status != 0 || gpus_parse(b->s, b->len, &g, &k) < 0) {
		struct wire_rec w = { 0 };
		const char *why, *e = NULL;

		if (b->len && wire_parse(b->s, b->len, &w, &why) > 0)
			e = wire_get(&w, "error");
		node_failed(d, slot, e ? e : status == 255 ? "cannot reach the node over ssh" :
			    "GPU query failed");
		wire_free(&w);
		return;
	}
	node_ok(d, slot);
	if (stale) {
		/* Asked before a launch it cannot show (or an end it
		 * could not be patched for): the snapshot the daemon kept
		 * is better; ask again. */
		gpus_free(g, k);
		ended_clear(n);
		query_start(d, n);
		return;
	}
	gpus_free(n->gpus, n->ngpus);
	free(n->taken);
	free(n->held);
	n->gpus = g;
	n->ngpus = k;
	n->taken = calloc(k + 1, 1);
	n->held = calloc(k + 1, 1);
	if (!n->taken || !n->held)
		return;
	/* Attempts that ended while it was asked: their cards are free. */
	for (size_t e = 0; e < n->nended; e++)
		leases_ended(n, n->ended[e]);
	ended_clear(n);
	n->fresh = 1;
	d->dirty = 1;
}

/* May jobs be placed on N's snapshot now?  When it was just read, or
 * in the pass right after the node said that an attempt ended (if it
 * has been read at all). */
static int usable(const struct node *n)
{
	return n->taken && n->held && (n->fresh || n->handoff);
}

static int free_slot(const struct node *n, size_t i)
{
	return gpu_eligible(n->conf, n->gpus[i].index) && gpu_idle(&n->gpus[i], n->conf->idle_mib) &&
	       !n->taken[i] && !n->held[i];
}

/* Cards for E on N, written to OUT (indices); 1 when it fits. */
static int fits(const struct node *n, const struct qent *e, int *out)
{
	size_t got = 0;

	if (e->ngpus) {
		for (size_t i = 0; i < e->ngpus; i++) {
			long s = slot_of(n, e->gpus[i]);

			if (s < 0 || !free_slot(n, (size_t)s))
				return 0;
			out[i] = e->gpus[i];
		}
		return 1;
	}
	for (size_t i = 0; i < n->ngpus && got < (size_t)e->need; i++)
		if (free_slot(n, i))
			out[got++] = n->gpus[i].index;
	return got == (size_t)e->need;
}

static int may_use(const struct qent *e, const struct node *n)
{
	return !e->node || !strcmp(e->node, n->conf->name);
}

/* E waits too long: hold what it waits for (see the top of the file). */
static void hold(struct daemon *d, const struct qent *e)
{
	struct node *best = NULL;
	size_t best_free = 0;

	for (size_t k = 0; k < d->nnodes; k++) {
		struct node *n = &d->nodes[k];
		size_t nfree = 0;

		if (!may_use(e, n) || !usable(n))
			continue;
		if (e->ngpus) {
			for (size_t i = 0; i < e->ngpus; i++) {
				long s = slot_of(n, e->gpus[i]);

				if (s >= 0)
					n->held[s] = 1;
			}
			continue;
		}
		for (size_t i = 0; i < n->ngpus; i++)
			nfree += free_slot(n, i);
		if (!best || nfree > best_free) {
			best = n;
			best_free = nfree;
		}
	}
	if (best)
		memset(best->held, 1, best->ngpus);
}

/* "0-3,6" for the indices of N's cards (in N's order) onto B. */
static int add_indices(struct sbuf *b, const struct node *n)
{
	for (size_t i = 0; i < n->ngpus; i++) {
		size_t j = i;

		while (j + 1 < n->ngpus && n->gpus[j + 1].index == n->gpus[j].index + 1)
			j++;
		if (sbuf_addf(b, i ? ",%d" : "%d", n->gpus[i].index) < 0 ||
		    (j > i && sbuf_addf(b, "-%d", n->gpus[j].index) < 0))
			return -1;
		i = j;
	}
	return n->ngpus ? 0 : sbuf_addf(b, "none");
}

/*
 * Why E can never be placed on the cards that the nodes it may use
 * have (hostile or mistaken input: a pinned index, or more cards,
 * than any of them has), e.g. "no node has GPU 7 (local has 0-3)";
 * NULL when it may fit some day, or while a node it may use has not
 * answered a GPU query yet.  malloc'd.
 */
static char *never_fits(const struct daemon *d, const struct qent *e)
{
	struct sbuf b = { 0 };
	int missing = -1, first = 1;
	long long most = 0;

	for (size_t k = 0; k < d->nnodes; k++) {
		const struct node *n = &d->nodes[k];

		if (may_use(e, n) && (!n->reachable || !n->taken))
			return NULL;
	}
	if (e->ngpus) {
		for (size_t i = 0; i < e->ngpus && missing < 0; i++) {
			size_t k;

			for (k = 0; k < d->nnodes; k++)
				if (may_use(e, &d->nodes[k]) && slot_of(&d->nodes[k], e->gpus[i]) >= 0)
					break;
			if (k == d->nnodes)
				missing = e->gpus[i];
		}
		if (missing < 0)
			return NULL;
		if (sbuf_addf(&b, "no node has GPU %d (", missing) < 0)
			goto oom;
	} else {
		for (size_t k = 0; k < d->nnodes; k++) {
			const struct node *n = &d->nodes[k];
			long long c = 0;

			for (size_t i = 0; may_use(e, n) && i < n->ngpus; i++)
				c += gpu_eligible(n->conf, n->gpus[i].index);
			if (c > most)
				most = c;
		}
		if (most >= e->need)
			return NULL;
		if (sbuf_addf(&b, "no node has %lld eligible GPUs (", e->need) < 0)
			goto oom;
	}
	for (size_t k = 0; k < d->nnodes; k++) {
		const struct node *n = &d->nodes[k];

		if (!may_use(e, n))
			continue;
		if (sbuf_addf(&b, "%s%s has ", first ? "" : "; ", n->conf->name) < 0 ||
		    add_indices(&b, n) < 0)
			goto oom;
		first = 0;
	}
	if (sbuf_add(&b, ")", 1) < 0)
		goto oom;
	return b.s;
oom:
	sbuf_free(&b);
	return NULL;
}

int schedule(struct daemon *d)
{
	long long now = now_ms(), starve = d->cfg.reserve_after_seconds * 1000;
	int *cards = NULL, waiting = 0;
	unsigned char *launched = NULL;
	size_t maxneed = 1, nfree = 0, ncpu = 0;

	d->dirty = 0;
	if (!d->nq) {
		for (size_t k = 0; k < d->nnodes; k++)
			d->nodes[k].handoff = 0;        /* nobody to hand to */
		return 0;
	}
	for (size_t k = 0; k < d->nnodes; k++) {
		struct node *n = &d->nodes[k];

		query_start(d, n);
		if (usable(n)) {
			memset(n->taken, 0, n->ngpus);
			memset(n->held, 0, n->ngpus);
			for (size_t i = 0; n->reachable && i < n->ngpus; i++)
				nfree += free_slot(n, i);
		}
	}
	for (size_t i = 0; i < d->nq; i++) {
		if ((size_t)d->q[i]->need > maxneed)
			maxneed = (size_t)d->q[i]->need;
		ncpu += d->q[i]->need == 0;
	}
	if (!(cards = calloc(maxneed, sizeof *cards)) || !(launched = calloc(d->nnodes, 1))) {
		free(cards);
		return -1;
	}
	for (size_t i = 0; i < d->nq;) {
		struct qent *e = d->q[i];
		long long id;
		size_t k;

		/* No free card and no CPU job left: nothing more can be
		 * placed, and the pass costs the work, not the queue. */
		if (!nfree && !ncpu) {
			waiting = 1;
			break;
		}
		if (e->need == 0)
			ncpu--;

		for (k = 0; k < d->nnodes; k++) {
			struct node *n = &d->nodes[k];

			if (!may_use(e, n) || !n->reachable)
				continue;
			if (e->need == 0 || (usable(n) && fits(n, e, cards)))
				break;
		}
		if (k == d->nnodes) {
			char *never;

			if (e->need)
				waiting = 1;
			if (e->never_noted) {   /* known never to fit (below) */
				i++;
				continue;
			}
			never = e->need ? never_fits(d, e) : NULL;
			/* A job no node can ever take holds nothing: it says why. */
			if (never)
				note_waiting(d, e, never);
			else if (now - e->queued_at >= starve)
				hold(d, e);
			free(never);
			i++;
			continue;
		}
		for (size_t c = 0; c < (size_t)e->need; c++) {
			long s = slot_of(&d->nodes[k], cards[c]);

			if (s >= 0)
				d->nodes[k].taken[s] = 1;
		}
		nfree -= (size_t)e->need;
		/* launch() removes E from the queue: i now names the next.
		 * (A job sent back by a busy node lands at i again, but that
		 * node's snapshot is no longer fresh, so it is passed over.) */
		id = e->id;
		if (launch(d, e, k, cards, (size_t)e->need) < 0 && q_find(d, id) == e)
			i++;
		launched[k] = 1;
	}
	/* What was launched changes what the nodes report: they are asked
	 * again (by the next pass with jobs to place) before anything more
	 * is placed there, so a node gone since is found by a query, not by
	 * a launch that waits for it.  The handoff is the exception. */
	for (size_t k = 0; k < d->nnodes; k++) {
		struct node *n = &d->nodes[k];

		n->handoff = 0;
		if (!launched[k])
			continue;
		n->fresh = 0;
		if (n->query.pid > 0)
			n->stale_query = 1;     /* asked before these leases */
	}
	free(launched);
	free(cards);
	d->next_poll = waiting ? mono_now() + GPU_POLL_MS : 0;
	return 0;
}
