/*
 * deps.c - the queued jobs' dependencies (`after`, `after_any`).
 *
 * Before each scheduling pass, the queued jobs due for a look are
 * looked at, in dispatch order: each job it lists is found where the
 * daemon keeps it (the queue, the running table, paused/, or the final
 * states seen, here; a done/ record is read once), and plan_deps
 * (plan.c, pure) says what follows: it waits (blocked, reason "waiting
 * for job ID"), it may be placed (its reason back to what it asks), or
 * it ends cancelled, "dependency ID ended STATE" -- an end that in turn
 * makes a look due for the jobs that depend on it.  A job's
 * dependencies are earlier jobs (accept.c), so there are no cycles.
 *
 * Only an end changes a verdict, so a look is due for a job when it
 * joins the queue (a daemon's start queues them all), and when a job
 * it lists ends: the queue is indexed by the jobs each lists
 * (d->waiters, depidx.h, kept by q_insert and q_remove), and an end
 * walks its own dependants, not the queue.  But a job the daemon does
 * not hold (paused/, or a record that could not be read) is known by
 * its record only, which may change unseen (removed by hand: "ended
 * without a record"): the jobs that list one are looked at again at
 * every end (d->unsure), as every job with dependencies once was.
 * Within a pass, one made due by an end there is looked at in that
 * pass when it comes after the job being looked at and had not been
 * looked at since the last end before the pass (as a pass over the
 * whole queue in dispatch order would have reached it); else in the
 * next (dep_gen: the count of ends).
 */
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "spoold.h"
#include "table.h"

struct ended {
	long long id;           /* 0: empty slot */
	enum job_state state;
};

static size_t eslot(const struct daemon *d, long long id)
{
	return (size_t)((unsigned long long)id * 0x9E3779B97F4A7C15ULL >> 9) & (d->ecap - 1);
}

static void e_put(struct daemon *d, long long id, enum job_state s)
{
	size_t i;

	if ((d->eused + 1) * 2 > d->ecap) {
		struct ended *old = d->ended;
		size_t ocap = d->ecap, ncap = ocap ? ocap * 2 : 256;
		struct ended *nv = calloc(ncap, sizeof *nv);

		if (!nv)
			return;         /* not remembered: read again when needed */
		d->ended = nv;
		d->ecap = ncap;
		d->eused = 0;
		for (size_t k = 0; k < ocap; k++)
			if (old[k].id)
				e_put(d, old[k].id, old[k].state);
		free(old);
	}
	for (i = eslot(d, id); d->ended[i].id && d->ended[i].id != id; i = (i + 1) & (d->ecap - 1))
		;
	d->eused += !d->ended[i].id;
	d->ended[i] = (struct ended){ id, s };
}

static int e_get(const struct daemon *d, long long id, enum job_state *s)
{
	if (!d->ecap)
		return 0;
	for (size_t i = eslot(d, id); d->ended[i].id; i = (i + 1) & (d->ecap - 1))
		if (d->ended[i].id == id) {
			*s = d->ended[i].state;
			return 1;
		}
	return 0;
}

/* Queued job E is due for a look: in this pass (see the top), or
 * before the next. */
static void due(struct daemon *d, struct qent *e)
{
	struct dep_key k = { e->prio, e->id };
	int now = d->dep_pass && dep_key_before(d->dep_cursor, k) && e->dep_gen != d->dep_pass_gen + 1;

	if (e->dep_due)
		return;
	if (dep_heap_push(now ? d->dep_pass : &d->dep_due, k) < 0) {
		d->dep_scan = 1;        /* found by looking at the whole queue */
		d->deps_due = 1;
		return;
	}
	e->dep_due = 1;
	d->deps_due |= !now;
}

/* Queued job E lists a job only a record tells of: looked at again at
 * every end. */
static void unsure(struct daemon *d, struct qent *e)
{
	if (e->dep_unsure)
		return;
	if (d->nunsure == d->capunsure) {
		size_t ncap = d->capunsure ? d->capunsure * 2 : 64;
		long long *nv = realloc(d->unsure, ncap * sizeof *nv);

		if (!nv) {
			d->dep_scan = 1;
			return;
		}
		d->unsure = nv;
		d->capunsure = ncap;
	}
	d->unsure[d->nunsure++] = e->id;
	e->dep_unsure = 1;
}

void deps_ended(struct daemon *d, long long id, enum job_state s)
{
	struct qent *e;

	e_put(d, id, s);
	d->dep_gen++;
	for (const struct dep_link *l = depidx_first(&d->waiters, id); l; l = l->next)
		if ((e = q_find(d, l->id)))
			due(d, e);
	for (size_t i = 0; i < d->nunsure; i++)
		if ((e = q_find(d, d->unsure[i])) && e->dep_unsure) {
			e->dep_unsure = 0;
			due(d, e);
		}
	d->nunsure = 0;
	d->deps_due |= d->dep_scan;
}

void deps_paused(struct daemon *d, long long id)
{
	struct qent *e;

	for (const struct dep_link *l = depidx_first(&d->waiters, id); l; l = l->next)
		if ((e = q_find(d, l->id)))
			unsure(d, e);
}

int deps_queued(struct daemon *d, struct qent *e)
{
	size_t n = e->nafter + e->nafter_any;

	if (!n)
		return 0;
	if (!e->links && !(e->links = calloc(n, sizeof *e->links)))
		return -1;
	for (size_t i = 0; i < n; i++) {
		e->links[i].on = i < e->nafter ? e->after[i] : e->after_any[i - e->nafter];
		e->links[i].id = e->id;
		if (depidx_add(&d->waiters, &e->links[i]) < 0) {
			while (i--)
				depidx_del(&d->waiters, &e->links[i]);
			return -1;
		}
	}
	due(d, e);
	return 0;
}

void deps_unqueued(struct daemon *d, struct qent *e)
{
	for (size_t i = 0; e->links && i < e->nafter + e->nafter_any; i++)
		depidx_del(&d->waiters, &e->links[i]);
}

/* The state job ID is in, as far as a dependency cares; JS_N when it
 * has no record (a record removed by hand).  *MAYBE set when only its
 * record can tell (paused/, or not read). */
static enum job_state dep_state(struct daemon *d, long long id, int *maybe)
{
	struct cb_err err = { 0 };
	enum spool_dir dir;
	enum job_state s;
	struct job j;
	char *name = NULL;
	int r;

	if (q_find(d, id))
		return JS_QUEUED;
	if (r_find(d, id))
		return JS_RUNNING;
	if (e_get(d, id, &s))
		return s;
	turn_settle(d, id);
	r = spool_find(&d->sp, id, &j, &dir, &name, &err);
	free(name);
	if (r < 0) {
		logmsg("%s", err.msg ? err.msg : "out of memory");
		cb_err_free(&err);
		*maybe = 1;
		return JS_QUEUED;       /* not known now: waited for */
	}
	if (r == 0)
		return JS_N;
	s = j.state;
	job_free(&j);
	if (job_state_final(s))
		e_put(d, id, s);
	else
		*maybe = 1;
	return s;
}

/* Queued job ID (E) looked at: 0, or -1 out of memory. */
static int look_at(struct daemon *d, struct qent *e)
{
	size_t n = e->nafter + e->nafter_any, which = 0;
	struct plan_dep *v = malloc((n ? n : 1) * sizeof *v);
	long long id = e->id, other;
	enum dep_verdict verdict;
	char *why = NULL;
	int maybe = 0;

	if (!v)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int any = i >= e->nafter;

		v[i].id = any ? e->after_any[i - e->nafter] : e->after[i];
		v[i].any = any;
		v[i].state = dep_state(d, v[i].id, &maybe);
	}
	verdict = plan_deps(v, n, &which);
	other = v[which].id;
	if (verdict == DEP_CANCEL)
		why = xasprintf("dependency %lld ended %s", other,
				v[which].state == JS_N ? "without a record" : job_state_name(v[which].state));
	else if (verdict == DEP_WAIT)
		why = xasprintf("waiting for job %lld", other);
	free(v);
	if (verdict != DEP_READY && !why)
		return -1;
	e->dep_gen = d->dep_gen + 1;    /* 0: never looked at */
	e->blocked = verdict != DEP_READY;
	if (maybe && verdict != DEP_CANCEL)
		unsure(d, e);
	if (verdict == DEP_CANCEL) {
		job_step(d, id, EV_DEPENDENCY, &(struct ev_arg){ .why = why });
	} else if (!e->held && e->waits_for != (verdict == DEP_WAIT ? other : 0)) {
		/* Its reason says what it waits for, and no more once it
		 * does not (a held job's says "held"). */
		e->waits_for = verdict == DEP_WAIT ? other : 0;
		job_step(d, id, EV_BLOCKED, &(struct ev_arg){ .why = why });
	}
	free(why);
	return 0;
}

void deps_pass(struct daemon *d)
{
	struct dep_heap pass;
	struct dep_key k;

	if (!d->deps_due)
		return;
	d->deps_due = 0;
	/* Memory ran out for the lists above: every queued job with
	 * dependencies not looked at since the last end, as before them. */
	if (d->dep_scan)
		for (size_t i = 0; i < d->nq; i++)
			if ((d->q[i]->nafter || d->q[i]->nafter_any) && d->q[i]->dep_gen != d->dep_gen + 1)
				due(d, d->q[i]);
	/* By ID, in dispatch order: a cancel changes the queue. */
	pass = d->dep_due;
	d->dep_due = (struct dep_heap){ 0 };
	d->dep_pass = &pass;
	d->dep_pass_gen = d->dep_gen;
	while (dep_heap_pop(&pass, &k)) {
		struct qent *e = q_find(d, k.id);

		if (!e || e->prio != k.prio || !e->dep_due)
			continue;       /* gone, or due again at its new place */
		d->dep_cursor = k;
		e->dep_due = 0;
		if (look_at(d, e) < 0) {
			logmsg("job %lld: dependencies: out of memory", k.id);
			due(d, e);      /* the next pass */
		}
	}
	d->dep_pass = NULL;
	dep_heap_free(&pass);
}

void deps_free(struct daemon *d)
{
	free(d->ended);
	depidx_free(&d->waiters);
	dep_heap_free(&d->dep_due);
	free(d->unsure);
}
