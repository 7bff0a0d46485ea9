/*
 * cards.c - the daemon's picture of each node's cards (the snapshot a
 * pass is made on): asked for without waiting (query_start, answered by
 * query_done), trusted while fresh, and kept true between queries by
 * what the daemon knows itself -- a launch's leases (leases_taken), an
 * attempt's end (cards_freed, the handoff).  It calls nothing of the
 * daemon's but the node calls (acall.c), the helpers (util.c) and
 * plan.c's plan_slot.
 */
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "spoold.h"

/* May N's snapshot be trusted without asking the node?  When it has
 * answered a query less than GPU_POLL_MS ago and nothing since made the
 * picture doubtful: a node that went away is found by a query, not by a
 * launch sent into the void. */
int is_fresh(const struct node *n)
{
	return n->fresh && mono_now() - n->fresh_at < GPU_POLL_MS;
}

/*
 * GPU snapshots are asked for without waiting (acall.c): query_start
 * asks, the main loop hands the answer to query_done, and the pass
 * that follows sees the node fresh.
 */
/* N's GPU query, through the account acct_query_user picks (run_as:
 * owner), else the node's own conf. */
static void query_ask(struct daemon *d, struct node *n)
{
	static const char *const args[] = { "gpus", NULL };
	size_t user = acct_query_user(d, n);

	if (user == ACCT_NONE)
		return;
	n->query_user = user;
	acall_start(d, n, user, &n->query, args, NODE_QUERY_MS);
}

void query_start(struct daemon *d, struct node *n)
{
	if (is_fresh(n) || n->query.pid > 0)
		return;
	if (!n->reachable && n->retry_at && mono_now() < n->retry_at)
		return;
	query_ask(d, n);
}

/*
 * The idle refresh (main.c refresh_cards, gpu_refresh_seconds): N's
 * cards asked for though no pass needs them, so that nodes/NAME.json
 * and metrics.prom do not go stale while nothing waits.  The same query
 * as query_start's, answered by query_done like any other (a launch
 * after it was asked makes it stale, an end is patched into it), so it
 * changes nothing the passes rely on: the answer makes the node fresh
 * as any answer does, and wants_query still decides what a pass asks.
 * Only is_fresh is not consulted (a refresh every second is allowed).
 * 1 when a query is in flight.
 */
int query_refresh(struct daemon *d, struct node *n)
{
	if (n->query.pid > 0)
		return 1;
	if (!n->reachable && n->retry_at && mono_now() < n->retry_at)
		return 0;
	query_ask(d, n);
	return n->query.pid > 0;
}

/*
 * Is a query of N of any use to the next pass?  Not while every card
 * the queue may use there is leased by an attempt of this spool's
 * (names.c attempt_id: SPOOLID-JOB-N): those come free through the
 * node's own word (cards_freed, the handoff), and a query would only
 * read the leases back.  A node not known yet, or not reachable, is
 * asked (the retry finds it back); so is one with a card free, busy
 * outside the queue, or leased by someone else.  With preemption on,
 * every node is asked: a preemption is decided on a fresh snapshot.
 */
int wants_query(const struct daemon *d, const struct node *n)
{
	size_t len = strlen(d->sp.id);

	if (!n->known || !n->reachable || d->cfg.preempt)
		return 1;
	for (size_t i = 0; i < n->ngpus; i++) {
		const struct gpu_info *g = &n->gpus[i];
		int ours = g->lease || g->nshares;

		if (g->lease)
			ours = !strncmp(g->lease, d->sp.id, len) && g->lease[len] == '-';
		for (size_t s = 0; s < g->nshares; s++)
			ours &= !strncmp(g->shares[s], d->sp.id, len) && g->shares[s][len] == '-';
		/* A card shared with room for more: asked, for its memory. */
		if (gpu_eligible(n->conf, g->index) &&
		    (!ours || (g->nshares && (long long)g->nshares < n->conf->max_jobs_per_gpu)))
			return 1;
	}
	return 0;
}

const char *card_uuid(const struct node *n, int index)
{
	long s = plan_slot(n->gpus, n->ngpus, index);

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
}

/* Every card of N's snapshot that AID held is free (of it: a card
 * shared with others is free once the last has gone; till the next
 * query the memory they use is a guess). */
static void leases_ended(struct node *n, const char *aid)
{
	node_view_due(n);
	for (size_t i = 0; i < n->ngpus; i++) {
		struct gpu_info *g = &n->gpus[i];

		if (g->lease && !strcmp(g->lease, aid))
			lease_ended(n, i);
		for (size_t s = 0; s < g->nshares; s++)
			if (!strcmp(g->shares[s], aid)) {
				free(g->shares[s]);
				g->shares[s] = g->shares[--g->nshares];
				if (!g->nshares)
					lease_ended(n, i);
				break;
			}
	}
}

/*
 * Attempt AID on node N is over.  When the node has just said it ended
 * (HANDOFF), its worker let go of the leases before it wrote the final
 * state: the cards go to the next job in the pass that follows
 * (n->handoff), on the snapshot as the daemon knows it, without waiting
 * for a query.  Otherwise (a launch answered busy) the snapshot only
 * forgets the leases it was given at the launch.  A query in flight
 * may still show the leases: its answer is patched the same way.
 */
void cards_freed(struct daemon *d, struct node *n, const char *aid, int handoff)
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
	n->handoff |= handoff;
	d->dirty = 1;
}

static void ended_clear(struct node *n)
{
	for (size_t e = 0; e < n->nended; e++)
		free(n->ended[e]);
	n->nended = 0;
}

/* The worker's own last line of ERR without "cardbaton-worker: " (a
 * lease_dir that is not to be used, say), or NULL; ERR's text is cut
 * there. */
static const char *worker_said(struct sbuf *err)
{
	static const char pre[] = "cardbaton-worker: ";
	char *s = err->s, *line = NULL;

	for (char *p = s; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p))
		if (!strncmp(p, pre, sizeof pre - 1))
			line = p;
	if (!line)
		return NULL;
	line[strcspn(line, "\n")] = '\0';
	return line + sizeof pre - 1;
}

void query_done(struct daemon *d, struct node *n, int status)
{
	struct gpu_info *g;
	size_t k, slot = (size_t)(n - d->nodes);
	struct sbuf *b = &n->query.buf;
	int stale = n->stale_query;

	n->stale_query = 0;
	if (acct_answer(d, n, n->query_user, status, &n->query.ebuf)) {
		/* That account was refused: another one may be asked. */
		query_ask(d, n);
		return;
	}
	if (status != 0 || gpus_parse(b->s, b->len, &g, &k) < 0) {
		struct wire_rec w = { 0 };
		const char *why, *e = NULL;

		if (b->len && wire_parse(b->s, b->len, &w, &why) > 0)
			e = wire_get(&w, "error");
		if (!e && status != 255)
			e = worker_said(&n->query.ebuf);
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
		if (wants_query(d, n))
			query_start(d, n);
		return;
	}
	gpus_free(n->gpus, n->ngpus);
	n->gpus = g;
	n->ngpus = k;
	n->known = 1;
	/* Attempts that ended while it was asked: their cards are free. */
	for (size_t e = 0; e < n->nended; e++)
		leases_ended(n, n->ended[e]);
	ended_clear(n);
	n->fresh = 1;
	n->fresh_at = mono_now();
	/* ... and the leases of ours it may have been read before (a
	 * Slurm node's cards are Slurm's to count: sinfo). */
	for (size_t r = 0; !n->conf->slurm_partition && r < d->nr; r++)
		if (d->r[r].node == slot)
			leases_taken(n, &d->r[r]);
	n->view_at = now_ms();
	node_view_due(n);
	d->dirty = 1;
}

/* Does card G show AID among its sharers? */
static int shared_by(const struct gpu_info *g, const char *aid)
{
	for (size_t s = 0; s < g->nshares; s++)
		if (!strcmp(g->shares[s], aid))
			return 1;
	return 0;
}

/*
 * The cards E's attempt leases show leased by it in N's snapshot, as
 * the node will show them: a handoff pass before the next query
 * (another attempt there ends) places nothing on them.  So does a
 * query's answer (query_done): the worker runs a launch and a query
 * each in a child of its own, and one read before the launch took its
 * leases would show a card free, or a shared card with room, that is
 * not -- a third sharer on a card of two (issue 32).  Until the node
 * says the attempt ended (cards_freed), its cards are its.  A card
 * that shows another holder keeps it: the launch will find it busy.
 * The worker's check under the leases is the truth: a card that was
 * not free after all answers busy, and the node gets a fresh query
 * (launch_answered).
 */
void leases_taken(struct node *n, const struct rent *e)
{
	node_view_due(n);
	for (size_t c = 0; e && !e->staged && c < e->ncards; c++) {
		long s = plan_slot(n->gpus, n->ngpus, e->cards[c]);
		struct gpu_info *g = s >= 0 ? &n->gpus[s] : NULL;
		char *aid = NULL, **v = NULL;

		if (g && (e->share ? shared_by(g, e->aid) : g->lease != NULL))
			continue;
		if (!g || !(aid = strdup(e->aid)) ||
		    (e->share && !(v = realloc(g->shares, (g->nshares + 1) * sizeof *v)))) {
			free(aid);
			n->fresh = 0;   /* cannot be shown: ask the node */
			continue;
		}
		if (!e->share) {
			g->lease = aid;
			continue;
		}
		/* A sharer: one more holder, and what it takes. */
		g->shares = v;
		g->shares[g->nshares++] = aid;
		g->mem_used += e->mem;
	}
}
