/*
 * sched.c - one scheduling pass (SPEC §7; the rule is in AGENTS.md),
 * and the card snapshots it is made on.
 *
 * What goes where is plan() (plan.c), a pure function of the queue,
 * the snapshots and the clock; schedule() builds its input from the
 * daemon and acts on its answer: launches, reasons, the next re-read
 * of the cards.
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
void query_start(struct daemon *d, struct node *n)
{
	static const char *const args[] = { "gpus", NULL };

	if (is_fresh(n) || n->query.pid > 0)
		return;
	if (!n->reachable && n->retry_at && mono_now() < n->retry_at)
		return;
	acall_start(d, n, &n->query, args, NODE_QUERY_MS);
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
	static const char *const args[] = { "gpus", NULL };

	if (n->query.pid > 0)
		return 1;
	if (!n->reachable && n->retry_at && mono_now() < n->retry_at)
		return 0;
	acall_start(d, n, &n->query, args, NODE_QUERY_MS);
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
static int wants_query(const struct daemon *d, const struct node *n)
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

static int ll_cmp(const void *pa, const void *pb)
{
	long long a = *(const long long *)pa, b = *(const long long *)pb;

	return (a > b) - (a < b);
}

/* Slot of group ID in IDS[0..N) (sorted), +1; 0 when absent. */
static size_t group_slot(const long long *ids, size_t n, long long id)
{
	const long long *p = id ? bsearch(&id, ids, n, sizeof *ids, ll_cmp) : NULL;

	return p ? (size_t)(p - ids) + 1 : 0;
}

/*
 * The arrays with a limit that have queued jobs, into GROUPS (their
 * first IDs in IDS, sorted; room for d->nq of each), with their
 * running jobs counted; each queued job of one points at it.  Their
 * number.
 */
static size_t plan_groups(const struct daemon *d, struct plan_job *jobs, long long *ids,
			  struct plan_group *groups)
{
	size_t n = 0, u = 0;

	for (size_t i = 0; i < d->nq; i++)
		if (d->q[i]->group)
			ids[n++] = d->q[i]->group;
	if (!n)
		return 0;
	qsort(ids, n, sizeof *ids, ll_cmp);
	for (size_t i = 0; i < n; i++)
		if (!u || ids[i] != ids[u - 1])
			ids[u++] = ids[i];
	memset(groups, 0, u * sizeof *groups);
	for (size_t i = 0; i < d->nq; i++)
		if ((jobs[i].group = group_slot(ids, u, d->q[i]->group)))
			groups[jobs[i].group - 1].max = d->q[i]->group_max;
	for (size_t i = 0; i < d->nr; i++) {
		size_t g = group_slot(ids, u, d->r[i].group);

		if (g)
			groups[g - 1].running++;
	}
	return u;
}

/*
 * The cards kept for preempting jobs (d->resv): those of a job no
 * longer queued, or kept past their time, are let go.  Then into
 * V[0..d->nresv) for the plan.
 */
static size_t plan_resv(struct daemon *d, struct plan_resv *v)
{
	size_t n = 0;
	long long now = mono_now();

	for (size_t i = 0; i < d->nresv; i++) {
		const struct resv *r = &d->resv[i];

		if (now >= r->until || !q_find(d, r->job))
			continue;
		d->resv[n] = *r;
		v[n++] = (struct plan_resv){ .node = r->node, .index = r->index, .job = r->job };
	}
	return d->nresv = n;
}

/* The plan's look at what queued job E asks. */
static struct plan_job plan_job_of(const struct qent *e)
{
	return (struct plan_job){ .id = e->id, .prio = e->prio, .need = e->need, .mem = e->mem,
				  .share = e->share, .queued_at = e->queued_at, .gpus = e->gpus,
				  .ngpus = e->ngpus, .node = e->node, .never_noted = e->never_noted,
				  .held = e->held, .blocked = e->blocked, .begin = e->begin };
}

/* The running jobs (preemption, the baton) into V[0..d->nr); a staged
 * one's ask into ASKS[i]. */
static void plan_runs(const struct daemon *d, struct plan_run *v, struct plan_job *asks)
{
	for (size_t i = 0; i < d->nr; i++) {
		const struct rent *e = &d->r[i];

		v[i] = (struct plan_run){ .id = e->id, .node = e->node, .aid = e->aid, .prio = e->prio,
					  .started = e->launching ? 0 : e->started,
					  .resumable = e->resumable, .yielding = e->yield_why != NULL,
					  .share = e->share, .mem = e->mem, .staged = e->staged,
					  .cards = e->cards, .ncards = e->ncards };
		if (e->staged && e->ask) {
			asks[i] = plan_job_of(e->ask);
			v[i].job = &asks[i];
		}
	}
}

/* Job ID keeps CARDS of node K until its victims have yielded (their
 * grace, and a margin). */
static void keep_cards(struct daemon *d, long long id, size_t k, const int *cards, size_t n,
		       long long grace)
{
	struct resv *v = realloc(d->resv, (d->nresv + n + 1) * sizeof *v);

	if (!v) {
		logmsg("job %lld: preemption: out of memory; its cards are not kept", id);
		return;
	}
	d->resv = v;
	for (size_t c = 0; c < n; c++)
		d->resv[d->nresv++] = (struct resv){ .node = k, .index = cards[c], .job = id,
						    .until = mono_now() + (grace + RESV_MARGIN_S) * 1000 };
}

/* What the plan preempts: each victim asked to yield, one log line. */
static void preempt_all(struct daemon *d, const struct plan_in *in, const struct plan_out *out)
{
	for (size_t p = 0; p < out->npreempt; p++) {
		const struct plan_preempt *x = &out->preempt[p];
		long long id = in->jobs[x->job].id, grace = 0;
		struct sbuf b = { 0 };
		char *why = xasprintf("preempted by job %lld", id);

		for (size_t v = 0; v < x->nvictims; v++) {
			struct rent *e = r_find(d, in->runs[x->victims[v]].id);

			if (!e || !why || yield_ask(d, e, why, "preempted") < 0)
				logmsg("job %lld: preemption of job %lld: not asked", id,
				       in->runs[x->victims[v]].id);
			if (e && e->grace > grace)
				grace = e->grace;
			sbuf_addf(&b, "%s%lld", v ? ", " : "", in->runs[x->victims[v]].id);
		}
		logmsg("job %lld: preempting job%s %s on %s", id, x->nvictims == 1 ? "" : "s",
		       b.s ? b.s : "?", in->nodes[x->node].conf->name);
		keep_cards(d, id, x->node, x->cards, x->ncards, grace);
		sbuf_free(&b);
		free(why);
	}
}

/* Job ID has been placed: what was kept for it is its no more. */
static void cards_taken(struct daemon *d, long long id)
{
	size_t n = 0;

	for (size_t i = 0; i < d->nresv; i++)
		if (d->resv[i].job != id)
			d->resv[n++] = d->resv[i];
	d->nresv = n;
}

/* The plan's input: the queue in dispatch order and the nodes as they
 * are now, in JOBS[d->nq] and NODES[d->nnodes]; the limited arrays in
 * IDS and GROUPS (plan_groups); for preemption the running jobs in RUNS
 * and the kept cards in RESV. */
static struct plan_in plan_input(struct daemon *d, struct plan_job *jobs,
				 struct plan_node *nodes, long long *ids, struct plan_group *groups,
				 struct plan_run *runs, struct plan_job *asks, struct plan_resv *resv)
{
	size_t ngroups, nresv = plan_resv(d, resv);

	for (size_t i = 0; i < d->nq; i++)
		jobs[i] = plan_job_of(d->q[i]);
	ngroups = plan_groups(d, jobs, ids, groups);
	for (size_t k = 0; k < d->nnodes; k++) {
		const struct node *n = &d->nodes[k];

		nodes[k] = (struct plan_node){ .conf = n->conf, .gpus = n->gpus, .ngpus = n->ngpus,
					       .reachable = n->reachable, .known = n->known,
					       .fresh = is_fresh(n), .handoff = n->handoff,
					       .drained = n->drained, .max_jobs = n->conf->max_jobs,
					       .stage = n->watch_ready && n->watch_stage &&
							!n->conf->slurm_partition };
	}
	for (size_t i = 0; i < d->nr; i++)
		nodes[d->r[i].node].njobs++;
	plan_runs(d, runs, asks);
	return (struct plan_in){ .jobs = jobs, .njobs = d->nq, .nodes = nodes, .nnodes = d->nnodes,
				 .groups = groups, .ngroups = ngroups,
				 .runs = runs, .nruns = d->nr, .resv = resv, .nresv = nresv,
				 .preempt = d->cfg.preempt,
				 .min_runtime_seconds = d->cfg.preempt_min_runtime,
				 .reserve_after_seconds = d->cfg.reserve_after_seconds };
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

/* Launch what the plan placed, in its order. */

static void launch_all(struct daemon *d, const struct plan_in *in, const struct plan_out *out,
		       unsigned char *launched)
{
	for (size_t p = 0; p < out->nplace; p++) {
		const struct plan_place *pl = &out->place[p];
		struct node *n = &d->nodes[pl->node];
		struct qent *e = q_find(d, in->jobs[pl->job].id);

		if (!e)
			continue;
		/* A launch before this one found the node gone, or its cards
		 * not as the snapshot showed (neither fresh nor handed off
		 * now): the next pass, right away, places this job on what
		 * the nodes say then. */
		if (!n->reachable || (pl->ncards && !is_fresh(n) && !n->handoff)) {
			d->dirty = 1;
			continue;
		}
		if (launch(d, e, pl->node, pl->cards, pl->ncards, NULL, 0, NULL) == 0) {
			leases_taken(n, r_find(d, in->jobs[pl->job].id));
			cards_taken(d, in->jobs[pl->job].id);
		}
		launched[pl->node] = 1;
	}
}

/*
 * What the plan stages (the baton): each job recorded as staged on its
 * node after the attempts that lease its cards now, and sent there
 * (jobs.c launch: the record first); then the staged jobs it sends back,
 * and those with a hold or promote waiting, asked back from their nodes.
 */
static void stage_all(struct daemon *d, const struct plan_in *in, const struct plan_out *out)
{
	for (size_t p = 0; p < out->nstage; p++) {
		const struct plan_place *pl = &out->stage[p];
		struct node *n = &d->nodes[pl->node];
		struct qent *e = q_find(d, in->jobs[pl->job].id);
		const char **after = calloc(pl->ncards + 1, sizeof *after);
		struct sbuf why = { 0 };
		size_t na = 0;

		for (size_t c = 0; e && after && c < pl->ncards; c++) {
			long s = plan_slot(n->gpus, n->ngpus, pl->cards[c]);
			const char *aid = s >= 0 ? n->gpus[s].lease : NULL;
			const struct rent *h = aid ? r_find_aid(d, aid) : NULL;
			size_t i;

			for (i = 0; aid && i < na && strcmp(after[i], aid); i++)
				;
			if (!aid || i < na)
				continue;
			after[na++] = aid;
			sbuf_addf(&why, "%s%lld", na > 1 ? ", " : "", h ? h->id : 0LL);
		}
		if (e && after && na) {
			char *text = why.s ? xasprintf("staged on %s: starts when job%s %s end%s",
						       n->conf->name, na > 1 ? "s" : "", why.s,
						       na > 1 ? "" : "s") : NULL;

			if (text)
				launch(d, e, pl->node, pl->cards, pl->ncards, after, na, text);
			free(text);
		}
		sbuf_free(&why);
		free(after);
	}
	for (size_t u = 0; u < out->nunstage; u++) {
		struct rent *e = r_find(d, in->runs[out->unstage[u]].id);

		if (e && e->staged)
			unstage_ask(d, e, d->nodes[e->node].drained ? "its node is drained"
				    : "its place is better taken");
	}
	for (size_t i = 0; i < d->nr; i++)
		if (d->r[i].staged && d->r[i].nredo)
			unstage_ask(d, &d->r[i], "a request waits for it");
}

void drain_read(struct daemon *d)
{
	for (size_t k = 0; k < d->nnodes; k++) {
		struct node *n = &d->nodes[k];
		struct cb_err err = { 0 };
		int ck, r = spool_drain_get(&d->sp, n->conf->name, &ck, &err);

		/* What is not a drain file (a symlink, a directory, ...)
		 * drains nothing; said once, until it is gone. */
		if (r < 0 && !n->drain_said)
			logmsg("%s; not a drain", err.msg ? err.msg : "drain: out of memory");
		n->drain_said = r < 0;
		cb_err_free(&err);
		if (r < 0)
			r = ck = 0;
		if (r == n->drained && (!r || ck == n->drain_ck))
			continue;
		logmsg(r ? "node %s drained%s" : "node %s undrained", n->conf->name,
		       ck ? " (its resumable jobs checkpoint)" : "");
		n->drained = r;
		n->drain_ck = r && ck;
		d->dirty = 1;
	}
}

/* The resumable jobs running on a node drained with --checkpoint are
 * asked to yield (once each). */
static void drain_yields(struct daemon *d)
{
	for (size_t i = 0; i < d->nr; i++) {
		struct rent *e = &d->r[i];
		const struct node *n = &d->nodes[e->node];
		char *why;

		if (!n->drain_ck || e->yield_why || !e->resumable)
			continue;
		if (!(why = xasprintf("node %s drained", n->conf->name)) ||
		    yield_ask(d, e, why, "drained") < 0)
			logmsg("job %lld: drain: out of memory", e->id);
		free(why);
	}
}

int schedule(struct daemon *d)
{
	struct plan_job *jobs = NULL;
	struct plan_node *nodes = NULL;
	struct plan_group *groups = NULL;
	struct plan_run *runs = NULL;
	struct plan_job *asks = NULL;
	struct plan_resv *resv = NULL;
	long long *ids = NULL;
	unsigned char *launched = NULL;
	struct plan_in in;
	struct plan_out out;
	long long now = now_ms();
	int r = -1, staged = 0;

	d->dirty = 0;
	d->next_begin = 0;
	drain_yields(d);
	/* Before the queue is read: it may cancel jobs (and make another
	 * pass due for their dependants). */
	deps_pass(d);
	for (size_t i = 0; i < d->nr && !staged; i++)
		staged = d->r[i].staged;
	/* Staged jobs are queued too: a pass may send them back. */
	if (!d->nq && !staged) {
		for (size_t k = 0; k < d->nnodes; k++)
			d->nodes[k].handoff = 0;        /* nobody to hand to */
		return 0;
	}
	jobs = malloc((d->nq + 1) * sizeof *jobs);
	nodes = malloc(d->nnodes * sizeof *nodes);
	launched = calloc(d->nnodes, 1);
	ids = malloc((d->nq + 1) * sizeof *ids);
	groups = malloc((d->nq + 1) * sizeof *groups);
	runs = malloc((d->nr + 1) * sizeof *runs);
	asks = malloc((d->nr + 1) * sizeof *asks);
	resv = malloc((d->nresv + 1) * sizeof *resv);
	if (!jobs || !nodes || !launched || !ids || !groups || !runs || !asks || !resv)
		goto out;
	in = plan_input(d, jobs, nodes, ids, groups, runs, asks, resv);
	if (plan(&in, now, &out) < 0)
		goto out;
	/* Before any launch: d->q is still the plan's list of jobs. */
	for (size_t w = 0; w < out.nwhy; w++)
		note_waiting(d, d->q[out.why[w].job], out.why[w].text, 0);
	for (size_t w = 0; w < out.nfull; w++)
		note_waiting(d, d->q[out.full[w].job], out.full[w].text, 1);
	launch_all(d, &in, &out, launched);
	preempt_all(d, &in, &out);
	stage_all(d, &in, &out);
	/* What was launched changes what the nodes report: they are asked
	 * again (by the next pass with jobs to place) before anything more
	 * is placed there, so a node gone since is found by a query, and a
	 * job placed there waits for it queued, not launching.  The handoff
	 * is the exception.  A query in flight was asked before these
	 * leases: it is asked again.  While GPU jobs wait, the cards are
	 * read again every GPU_POLL_MS (processes outside the queue come
	 * and go), counted from the first pass that left one waiting.
	 * Asked after the launches, and only while jobs are left queued:
	 * a card just handed over is leased again, and a node all of
	 * whose cards are is not asked. */
	for (size_t k = 0; k < d->nnodes; k++) {
		struct node *n = &d->nodes[k];

		n->handoff = 0;
		if (launched[k]) {
			n->fresh = 0;
			if (n->query.pid > 0)
				n->stale_query = 1;
		}
		if (d->nq && wants_query(d, n))
			query_start(d, n);
	}
	/* A begin to come: a pass then (the clocks differ: wall to mono). */
	d->next_begin = out.wake_at ? mono_now() + (out.wake_at - now) : 0;
	if (!out.waiting)
		d->next_poll = 0;
	else if (!d->next_poll)
		d->next_poll = mono_now() + GPU_POLL_MS;
	plan_free(&out);
	r = 0;
out:
	free(launched);
	free(jobs);
	free(nodes);
	free(ids);
	free(groups);
	free(runs);
	free(asks);
	free(resv);
	return r;
}
