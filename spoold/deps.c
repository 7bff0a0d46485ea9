/*
 * deps.c - the queued jobs' dependencies (`after`, `after_any`).
 *
 * Before each scheduling pass that is due to (a job with dependencies
 * was queued, or some job ended since), every queued job with
 * dependencies is looked at: each job it lists is found where the
 * daemon keeps it (the queue, the running table, paused/, or the final
 * states seen, here; a done/ record is read once), and plan_deps
 * (plan.c, pure) says what follows: it waits (blocked, reason "waiting
 * for job ID"), it may be placed (its reason back to what it asks), or
 * it ends cancelled, "dependency ID ended STATE" -- an end that in turn
 * makes the pass due again for the jobs that depend on it.  A job's
 * dependencies are earlier jobs (accept.c), so there are no cycles.
 * Jobs are looked at again only when some job has ended since
 * (dep_gen): nothing else changes a verdict.
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

void deps_ended(struct daemon *d, long long id, enum job_state s)
{
	e_put(d, id, s);
	d->dep_gen++;
	d->deps_due = 1;
}

/* The state job ID is in, as far as a dependency cares; JS_N when it
 * has no record (a record removed by hand). */
static enum job_state dep_state(struct daemon *d, long long id)
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
		return JS_QUEUED;       /* not known now: waited for */
	}
	if (r == 0)
		return JS_N;
	s = j.state;
	job_free(&j);
	if (job_state_final(s))
		e_put(d, id, s);
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

	if (!v)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int any = i >= e->nafter;

		v[i].id = any ? e->after_any[i - e->nafter] : e->after[i];
		v[i].any = any;
		v[i].state = dep_state(d, v[i].id);
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
	long long *ids;
	size_t n = 0;

	if (!d->deps_due)
		return;
	d->deps_due = 0;
	/* The IDs first: a cancel changes the queue. */
	if (!(ids = malloc((d->nq ? d->nq : 1) * sizeof *ids))) {
		d->deps_due = 1;
		return;
	}
	for (size_t i = 0; i < d->nq; i++)
		if ((d->q[i]->nafter || d->q[i]->nafter_any) && d->q[i]->dep_gen != d->dep_gen + 1)
			ids[n++] = d->q[i]->id;
	for (size_t i = 0; i < n; i++) {
		struct qent *e = q_find(d, ids[i]);

		if (e && look_at(d, e) < 0) {
			logmsg("job %lld: dependencies: out of memory", ids[i]);
			d->deps_due = 1;
		}
	}
	free(ids);
}

void deps_free(struct daemon *d)
{
	free(d->ended);
}
