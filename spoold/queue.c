/*
 * queue.c - the daemon's in-memory view of queued/ and running/.
 *
 * queued jobs: an array in dispatch order (priority descending, then
 * ID ascending: the byte order of their queued/ names) plus a hash by
 * ID.  Insertion is a binary search and a memmove, so accepting 100,000
 * jobs costs memory moves, not rescans.  Running jobs: a small array.
 * Queued jobs with dependencies are also indexed by the jobs they list
 * (deps.c deps_queued, deps_unqueued).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spoold.h"

static int before(const struct qent *a, const struct qent *b)
{
	return a->prio != b->prio ? a->prio > b->prio : a->id < b->id;
}

static size_t slot(const struct daemon *d, long long id)
{
	return (size_t)((unsigned long long)id * 0x9E3779B97F4A7C15ULL >> 7) & (d->hcap - 1);
}

static void h_put(struct daemon *d, struct qent *e)
{
	size_t i = slot(d, e->id);

	while (d->qhash[i])
		i = (i + 1) & (d->hcap - 1);
	d->qhash[i] = e;
	d->hused++;
}

static int h_grow(struct daemon *d)
{
	struct qent **old = d->qhash;
	size_t ocap = d->hcap;

	d->hcap = ocap ? ocap * 2 : 1024;
	if (!(d->qhash = calloc(d->hcap, sizeof *d->qhash))) {
		d->qhash = old;
		d->hcap = ocap;
		return -1;
	}
	d->hused = 0;
	for (size_t i = 0; i < ocap; i++)
		if (old[i])
			h_put(d, old[i]);
	free(old);
	return 0;
}

struct qent *q_find(const struct daemon *d, long long id)
{
	if (!d->hcap)
		return NULL;
	for (size_t i = slot(d, id); d->qhash[i]; i = (i + 1) & (d->hcap - 1))
		if (d->qhash[i]->id == id)
			return d->qhash[i];
	return NULL;
}

static void h_del(struct daemon *d, const struct qent *e)
{
	size_t i = slot(d, e->id), j;

	while (d->qhash[i] != e)
		i = (i + 1) & (d->hcap - 1);
	d->qhash[i] = NULL;
	d->hused--;
	/* Re-place the rest of the cluster (linear probing deletion). */
	for (j = (i + 1) & (d->hcap - 1); d->qhash[j]; j = (j + 1) & (d->hcap - 1)) {
		struct qent *x = d->qhash[j];

		d->qhash[j] = NULL;
		d->hused--;
		h_put(d, x);
	}
}

static size_t q_pos(const struct daemon *d, const struct qent *e)
{
	size_t lo = 0, hi = d->nq;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (before(d->q[mid], e))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int q_insert(struct daemon *d, struct qent *e)
{
	size_t pos;

	if ((d->hused + 1) * 2 > d->hcap && h_grow(d) < 0)
		return -1;
	if (d->nq == d->capq) {
		size_t cap = d->capq ? d->capq * 2 : 256;
		struct qent **q = realloc(d->q, cap * sizeof *q);

		if (!q)
			return -1;
		d->q = q;
		d->capq = cap;
	}
	/* Indexed by the jobs it waits for; deps.c looks at it before the
	 * next pass. */
	if (deps_queued(d, e) < 0)
		return -1;
	pos = q_pos(d, e);
	memmove(d->q + pos + 1, d->q + pos, (d->nq - pos) * sizeof *d->q);
	d->q[pos] = e;
	d->nq++;
	h_put(d, e);
	return 0;
}

void q_remove(struct daemon *d, struct qent *e)
{
	size_t pos = q_pos(d, e);

	/* q_pos finds the first entry not before E, which is E itself. */
	while (pos < d->nq && d->q[pos] != e)
		pos++;
	if (pos == d->nq)
		return;
	memmove(d->q + pos, d->q + pos + 1, (d->nq - pos - 1) * sizeof *d->q);
	d->nq--;
	h_del(d, e);
	deps_unqueued(d, e);
}

int q_reposition(struct daemon *d, struct qent *e)
{
	size_t pos;

	for (pos = 0; pos < d->nq && d->q[pos] != e; pos++)
		;
	if (pos < d->nq) {
		memmove(d->q + pos, d->q + pos + 1, (d->nq - pos - 1) * sizeof *d->q);
		d->nq--;
	}
	pos = q_pos(d, e);
	memmove(d->q + pos + 1, d->q + pos, (d->nq - pos) * sizeof *d->q);
	d->q[pos] = e;
	d->nq++;
	return 0;
}

struct qent *qent_from_job(struct daemon *d, const struct job *j, const char *name)
{
	struct qent *e = calloc(1, sizeof *e);
	const struct node_conf *ck = j->checkpoint && j->checkpoint_node ?
				     config_node(&d->cfg, j->checkpoint_node) : NULL;
	/* A checkpoint on a filesystem other nodes mount too (shared_fs):
	 * any of them, its own node first; else its own node alone. */
	const char *fs = ck && !j->def.node && !ck->slurm_partition ? shared_fs_of(ck, j->checkpoint) : NULL;
	const char *node = fs ? NULL : j->checkpoint_node ? j->checkpoint_node : j->def.node;

	if (!e)
		return NULL;
	e->fs = fs;
	e->prefer = fs ? ck->name : NULL;
	/* checkpoint_transfer: its checkpoint may be copied where it runs
	 * (moves.c); a job pinned with `node`, or one of a Slurm node's,
	 * resumes where it is. */
	e->travel = ck && j->def.checkpoint_transfer && !j->def.node && !ck->slurm_partition &&
		    d->cfg.checkpoint_transfer_max_gib > 0;
	e->id = j->id;
	e->prio = j->priority;
	e->queued_at = j->queued_at;
	e->need = jobdef_gpu_need(&j->def);
	e->mem = j->def.gpu_memory_mib;
	e->share = j->def.share;
	e->held = j->def.hold;
	e->begin = j->def.begin;
	e->group = j->max_running ? j->array_id : 0;
	e->group_max = j->max_running;
	e->user = tally_index(d, j);
	if ((j->def.nafter && !(e->after = malloc(j->def.nafter * sizeof *e->after))) ||
	    (j->def.nafter_any && !(e->after_any = malloc(j->def.nafter_any * sizeof *e->after_any))))
		goto fail;
	if (j->def.nafter)
		memcpy(e->after, j->def.after, j->def.nafter * sizeof *e->after);
	if (j->def.nafter_any)
		memcpy(e->after_any, j->def.after_any, j->def.nafter_any * sizeof *e->after_any);
	e->nafter = j->def.nafter;
	e->nafter_any = j->def.nafter_any;
	e->blocked = e->nafter || e->nafter_any;        /* until deps.c has looked */
	if (!(e->name = strdup(name)) || (node && !(e->node = strdup(node))))
		goto fail;
	if (j->def.ngpus) {
		if (!(e->gpus = malloc(j->def.ngpus * sizeof *e->gpus)))
			goto fail;
		memcpy(e->gpus, j->def.gpus, j->def.ngpus * sizeof *e->gpus);
		e->ngpus = j->def.ngpus;
	}
	return e;
fail:
	qent_free(e);
	return NULL;
}

void qent_free(struct qent *e)
{
	if (!e)
		return;
	free(e->name);
	free(e->gpus);
	free(e->node);
	free(e->after);
	free(e->after_any);
	free(e->links);
	for (size_t i = 0; i < e->naway; i++)
		free(e->away[i]);
	free(e->away);
	free(e);
}

int qent_away(struct qent *e, const char *node)
{
	char **v;

	for (size_t i = 0; i < e->naway; i++)
		if (!strcmp(e->away[i], node))
			return 0;
	if (!(v = realloc(e->away, (e->naway + 1) * sizeof *v)))
		return -1;
	e->away = v;
	if (!(v[e->naway] = strdup(node)))
		return -1;
	e->naway++;
	return 0;
}

struct rent *r_find(struct daemon *d, long long id)
{
	for (size_t i = 0; i < d->nr; i++)
		if (d->r[i].id == id)
			return &d->r[i];
	return NULL;
}

struct rent *r_find_aid(struct daemon *d, const char *aid)
{
	for (size_t i = 0; i < d->nr; i++)
		if (!strcmp(d->r[i].aid, aid))
			return &d->r[i];
	return NULL;
}

int r_add(struct daemon *d, const struct job *j, const char *aid, size_t node, int launching)
{
	struct rent *e;

	if (d->nr == d->capr) {
		size_t cap = d->capr ? d->capr * 2 : 64;
		struct rent *r = realloc(d->r, cap * sizeof *r);

		if (!r)
			return -1;
		d->r = r;
		d->capr = cap;
	}
	const struct attempt *a = job_last_attempt(j);

	e = &d->r[d->nr];
	if (!(e->aid = strdup(aid)))
		return -1;
	e->id = j->id;
	e->group = j->max_running ? j->array_id : 0;
	e->resumable = j->def.resume_command != NULL;
	e->prio = j->priority;
	e->share = j->def.share;
	e->mem = j->def.gpu_memory_mib;
	e->started = launching ? 0 : j->started;
	e->grace = j->def.checkpoint_grace_seconds;
	e->yield_why = NULL;
	e->node = node;
	e->launching = launching;
	e->asked = 0;
	e->asked_at = e->heard_at = 0;
	memset(&e->call, 0, sizeof e->call);
	memset(&e->pause, 0, sizeof e->pause);
	e->cancel = NULL;
	e->staged = e->unstaging = 0;
	e->cards = NULL;
	e->ncards = 0;
	e->ask = NULL;
	e->redo = NULL;
	e->nredo = 0;
	if ((a && a->ngpus && !(e->cards = malloc(a->ngpus * sizeof *e->cards))) ||
	    (a && a->state == AS_STAGED && !(e->ask = qent_from_job(d, j, "staged")))) {
		rent_free(e);
		return -1;
	}
	if (a && a->ngpus) {
		memcpy(e->cards, a->gpus, a->ngpus * sizeof *e->cards);
		e->ncards = a->ngpus;
	}
	e->staged = a && a->state == AS_STAGED;
	e->user = tally_index(d, j);
	d->nr++;
	return 0;
}

/* A staged attempt started (its CARDS are now those it leases), or is
 * over. */
void r_unstaged(struct rent *e)
{
	qent_free(e->ask);
	e->ask = NULL;
	e->staged = 0;
}

/* E leaves the table (its calls are the caller's: jobs.c attempt_over). */
void rent_free(struct rent *e)
{
	r_unstaged(e);
	free(e->cards);
	for (size_t i = 0; i < e->nredo; i++)
		free(e->redo[i]);
	free(e->redo);
	free(e->cancel);
	free(e->yield_why);
	free(e->aid);
}

void r_remove(struct daemon *d, struct rent *e)
{
	rent_free(e);
	*e = d->r[--d->nr];
}
