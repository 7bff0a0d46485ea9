/*
 * sched.c - one scheduling pass (SPEC §7; the rule is in AGENTS.md), on
 * the card snapshots cards.c keeps.
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
				  .held = e->held, .blocked = e->blocked, .begin = e->begin,
				  .fs = e->fs, .prefer = e->prefer,
				  .away = (const char *const *)e->away, .naway = e->naway,
				  .travel = e->travel && mono_now() >= e->travel_at };
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

/* Job ID has been placed (or its move failed): what was kept for it
 * is its no more. */
void resv_drop(struct daemon *d, long long id)
{
	size_t n = 0;

	for (size_t i = 0; i < d->nresv; i++)
		if (d->resv[i].job != id)
			d->resv[n++] = d->resv[i];
	d->nresv = n;
}

/*
 * A lab's spool: its users' limits and the cards they hold into USERS
 * (room for d->ntally), and the queue in the fair share's order
 * (plan_fair_order): JOBS and QV (the queue entries, in step) permuted.
 * The number of users; 0 without a lab (or out of memory: the queue's
 * own order then).
 */
static size_t plan_users(struct daemon *d, long long now, struct plan_job *jobs,
			 struct qent **qv, struct plan_user *users)
{
	size_t nu = d->ntally;
	double *eff = malloc((nu + 1) * sizeof *eff);
	long long *held = malloc((nu + 1) * sizeof *held);
	size_t *order = malloc((d->nq + 1) * sizeof *order);
	struct plan_job *pj = malloc((d->nq + 1) * sizeof *pj);

	if (!d->cfg.lab || !eff || !held || !order || !pj) {
		if (d->cfg.lab)
			logmsg("users: out of memory; the queue's order, no user limits, this pass");
		nu = 0;
		goto out;
	}
	tally_now(d, now, eff, held, NULL);
	for (size_t u = 0; u < nu; u++)
		users[u] = (struct plan_user){ .max_gpus = d->tally[u].lim->max_gpus, .held = held[u] };
	for (size_t i = 0; i < d->nq; i++)
		jobs[i].user = d->q[i]->user;
	if (plan_fair_order(jobs, d->nq, eff, nu, order) < 1)
		goto out;       /* the queue's own order (or out of memory: the same) */
	memcpy(pj, jobs, d->nq * sizeof *pj);
	for (size_t i = 0; i < d->nq; i++) {
		jobs[i] = pj[order[i]];
		qv[i] = d->q[order[i]];
	}
out:
	free(eff);
	free(held);
	free(order);
	free(pj);
	return nu;
}

/* The plan's input: the queue in dispatch order (a lab's: the fair
 * share's, plan_users) and the nodes as they are now, in JOBS[d->nq]
 * (their queue entries in QV) and NODES[d->nnodes]; the limited arrays
 * in IDS and GROUPS (plan_groups); a lab's users in USERS; for
 * preemption the running jobs in RUNS and the kept cards in RESV. */
static struct plan_in plan_input(struct daemon *d, long long now, struct plan_job *jobs,
				 struct qent **qv, struct plan_node *nodes, long long *ids,
				 struct plan_group *groups, struct plan_user *users,
				 struct plan_run *runs, struct plan_job *asks, struct plan_resv *resv)
{
	size_t ngroups, nusers, nresv = plan_resv(d, resv);

	for (size_t i = 0; i < d->nq; i++) {
		jobs[i] = plan_job_of(d->q[i]);
		/* Its checkpoint on its way to a node: placed once it is there. */
		jobs[i].held |= move_find(d, d->q[i]->id) != NULL;
		qv[i] = d->q[i];
	}
	ngroups = plan_groups(d, jobs, ids, groups);
	nusers = plan_users(d, now, jobs, qv, users);
	for (size_t k = 0; k < d->nnodes; k++) {
		struct node *n = &d->nodes[k];

		if (n->conf->run_as_owner && acct_grow(d, n) < 0)
			logmsg("node %s: out of memory: its accounts' refusals not known this pass",
			       n->conf->name);
		nodes[k] = (struct plan_node){ .conf = n->conf, .gpus = n->gpus, .ngpus = n->ngpus,
					       .reachable = n->reachable, .known = n->known,
					       .fresh = is_fresh(n), .handoff = n->handoff,
					       .drained = n->drained, .max_jobs = n->conf->max_jobs,
					       .stage = n->watch.ready && n->watch.stage &&
							!n->conf->slurm_partition &&
							!n->conf->run_as_owner,
					       .barred = n->nacct >= nusers ? n->barred : NULL };
	}
	for (size_t i = 0; i < d->nr; i++)
		nodes[d->r[i].node].njobs++;
	plan_runs(d, runs, asks);
	return (struct plan_in){ .jobs = jobs, .njobs = d->nq, .nodes = nodes, .nnodes = d->nnodes,
				 .groups = groups, .ngroups = ngroups, .users = users, .nusers = nusers,
				 .runs = runs, .nruns = d->nr, .resv = resv, .nresv = nresv,
				 .preempt = d->cfg.preempt,
				 .min_runtime_seconds = d->cfg.preempt_min_runtime,
				 .reserve_after_seconds = d->cfg.reserve_after_seconds };
}

/* Why E's owner cannot have it placed anywhere it may go, when that is
 * its account's refusal on every such node (the first one's), or NULL. */
static const char *refused_why(const struct daemon *d, const struct qent *e)
{
	const char *why = NULL;

	for (size_t k = 0; k < d->nnodes; k++) {
		const struct node *n = &d->nodes[k];
		const struct acct *a = e->user <= n->nacct && n->acct[e->user - 1].used ?
				       &n->acct[e->user - 1] : NULL;

		if (e->node && strcmp(e->node, n->conf->name))
			continue;
		if (!a || a->state != ACCT_REFUSED)
			return NULL;
		if (!why)
			why = a->why;
	}
	return why;
}

/* The queued jobs QV[0..NQ) that no node may take for their owner's
 * account's refusal there (accts.c) are told so: "waiting: alice: not
 * authorized on lab-a (...)". */
static void note_refused(struct daemon *d, struct qent *const *qv, size_t nq)
{
	for (size_t i = 0; d->nrefused && i < nq; i++) {
		const char *why = qv[i]->user && !qv[i]->acct_noted ? refused_why(d, qv[i]) : NULL;

		if (why)
			note_waiting(d, qv[i], why, WAIT_ACCT);
	}
}

/* E waits for its owner to let cards go (plan.h LIMIT). */
static void note_limit(struct daemon *d, struct qent *e, const struct plan_limit *l)
{
	const struct tally *t = &d->tally[l->user - 1];
	char *why;

	if (e->limit_noted)
		return;
	if (!(why = xasprintf("user limit: %s holds %lld GPU%s (max_gpus %lld)", t->name, l->held,
			      l->held == 1 ? "" : "s", t->lim->max_gpus))) {
		logmsg("job %lld: out of memory", e->id);
		return;
	}
	note_waiting(d, e, why, WAIT_LIMIT);
	free(why);
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
		/* Its checkpoint is copied there first (moves.c): the cards
		 * are kept for it meanwhile. */
		if (pl->moved) {
			keep_cards(d, e->id, pl->node, pl->cards, pl->ncards, MOVE_KEEP_S);
			job_step(d, e->id, EV_MOVE, &(struct ev_arg){ .node = n->conf->name,
								     .node_index = pl->node });
			continue;
		}
		if (launch(d, e, pl->node, pl->cards, pl->ncards, NULL, 0, NULL) == 0) {
			leases_taken(n, r_find(d, in->jobs[pl->job].id));
			resv_drop(d, in->jobs[pl->job].id);
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
	struct plan_user *users = NULL;
	struct qent **qv = NULL;
	long long *ids = NULL;
	unsigned char *launched = NULL;
	struct plan_in in;
	struct plan_out out;
	long long now = now_ms();
	int r = -1, staged = 0;

	d->dirty = 0;
	d->next_begin = 0;
	drain_yields(d);
	acct_probes(d);
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
	users = malloc((d->ntally + 1) * sizeof *users);
	qv = malloc((d->nq + 1) * sizeof *qv);
	if (!jobs || !nodes || !launched || !ids || !groups || !runs || !asks || !resv || !users || !qv)
		goto out;
	in = plan_input(d, now, jobs, qv, nodes, ids, groups, users, runs, asks, resv);
	if (plan(&in, now, &out) < 0)
		goto out;
	/* Before any launch: QV is still the plan's list of jobs. */
	for (size_t w = 0; w < out.nwhy; w++)
		note_waiting(d, qv[out.why[w].job], out.why[w].text, WAIT_NEVER);
	for (size_t w = 0; w < out.nfull; w++)
		note_waiting(d, qv[out.full[w].job], out.full[w].text, WAIT_FULL);
	for (size_t w = 0; w < out.nlimit; w++)
		note_limit(d, qv[out.limit[w].job], &out.limit[w]);
	note_refused(d, qv, in.njobs);
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
	free(users);
	free(qv);
	return r;
}
