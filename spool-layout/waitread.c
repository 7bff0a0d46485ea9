/*
 * waitread.c - how `wait` reads the spool (waitread.h).  One readdir
 * per directory but done/ (looked up per job: it is the history), and
 * one read per record of a job asked about.  A queued job is held when
 * its record's job says "hold": true.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "names.h"
#include "store.h"
#include "waitread.h"

static int oom(struct cb_err *err)
{
	return cb_err_set(err, EX_OSERR_, "%s", strerror(ENOMEM));
}

static int cmp_ll(const void *pa, const void *pb)
{
	long long a = *(const long long *)pa, b = *(const long long *)pb;

	return (a > b) - (a < b);
}

static int cmp_queued(const void *pa, const void *pb)
{
	const struct wait_queued *a = pa, *b = pb;

	if (a->id != b->id)
		return a->id < b->id ? -1 : 1;
	return strcmp(a->name, b->name);
}

static int has(const long long *v, size_t n, long long id)
{
	return n && bsearch(&id, v, n, sizeof *v, cmp_ll) != NULL;
}

/* Append ID to *V (of *N, room for CAP). */
static int push(long long **v, size_t *n, size_t *cap, long long id)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		long long *nv = realloc(*v, c * sizeof *nv);

		if (!nv)
			return -1;
		*v = nv;
		*cap = c;
	}
	(*v)[(*n)++] = id;
	return 0;
}

int wait_read(struct spool *sp, struct wait_read *r, struct cb_err *err)
{
	static const enum spool_dir dirs[] = { SD_NEW, SD_INCOMING, SD_QUEUED, SD_RUNNING, SD_PAUSED };

	memset(r, 0, sizeof *r);
	for (size_t k = 0; k < sizeof dirs / sizeof dirs[0]; k++) {
		enum spool_dir d = dirs[k];
		char **names;
		size_t n, cap = 0, qcap = 0;
		/* Where this directory's IDs go (queued/ keeps its names). */
		long long **v = d == SD_NEW ? &r->newid : d == SD_INCOMING ? &r->incoming :
				d == SD_RUNNING ? &r->running : d == SD_PAUSED ? &r->paused : NULL;
		size_t *nv = d == SD_NEW ? &r->nnew : d == SD_INCOMING ? &r->nincoming :
			     d == SD_RUNNING ? &r->nrunning : d == SD_PAUSED ? &r->npaused : NULL;
		int bad = 0;

		if (spool_list(sp, d, &names, &n) < 0) {
			cb_err_sys(err, EX_OSERR_, "%s/%s", sp->path, spool_dir_name[d]);
			wait_read_free(r);
			return -1;
		}
		for (size_t i = 0; i < n && !bad; i++) {
			long long id, prio, count;
			int c;

			switch (d) {
			case SD_NEW:
			case SD_INCOMING:
				/* Everything the daemon will take (LAYOUT.md §2):
				 * what it ignores is waited for by nobody.  A
				 * block's name holds all of its IDs. */
				c = spool_pending_ids(d, names[i], &id, &count);
				for (long long m = 0; c >= 0 && m < count && !bad; m++)
					bad = push(v, nv, &cap, id + m) < 0;
				if (d == SD_NEW && (c >= 0 || name_classify_new(names[i], &prio, &id, &count) == 0))
					r->new_jobs++;
				break;
			case SD_QUEUED:
				if (name_parse_queued(names[i], &prio, &id) < 0)
					break;
				if (r->nqueued == qcap) {
					size_t c2 = qcap ? qcap * 2 : 64;
					struct wait_queued *q = realloc(r->queued, c2 * sizeof *q);

					if (!q) {
						bad = 1;
						break;
					}
					r->queued = q;
					qcap = c2;
				}
				r->queued[r->nqueued].id = id;
				r->queued[r->nqueued++].name = names[i];
				names[i] = NULL;        /* the reading owns it now */
				break;
			default:
				if (name_parse_plain(names[i], &id) == 0)
					bad = push(v, nv, &cap, id) < 0;
			}
		}
		spool_list_free(names, n);
		if (bad) {
			wait_read_free(r);
			return oom(err);
		}
	}
	/* Plain names list in ID order already; the others are sorted. */
	if (r->nnew)
		qsort(r->newid, r->nnew, sizeof *r->newid, cmp_ll);
	if (r->nincoming)
		qsort(r->incoming, r->nincoming, sizeof *r->incoming, cmp_ll);
	if (r->nqueued)
		qsort(r->queued, r->nqueued, sizeof *r->queued, cmp_queued);
	return 0;
}

void wait_read_free(struct wait_read *r)
{
	for (size_t i = 0; i < r->nqueued; i++)
		free(r->queued[i].name);
	free(r->queued);
	free(r->newid);
	free(r->incoming);
	free(r->running);
	free(r->paused);
	memset(r, 0, sizeof *r);
}

/* The first entry of queued/ for ID in R, or R->nqueued. */
static size_t queued_first(const struct wait_read *r, long long id)
{
	size_t lo = 0, hi = r->nqueued;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r->queued[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* A record of the job asked about: where it is, and what it says. */
struct copy {
	enum spool_dir d;
	const char *name;
};

/* Load copy C: 1 read (*rev, *state, *held set), 0 gone (it moved),
 * -1 with ERR. */
static int load_copy(struct spool *sp, const struct copy *c, long long *rev,
		     enum job_state *state, int *held, struct cb_err *err)
{
	struct cb_err e = { 0 };
	struct job j;

	if (spool_load(sp, c->d, c->name, &j, &e) < 0) {
		if (e.ex == EX_NOINPUT_) {
			cb_err_free(&e);
			return 0;
		}
		cb_err_free(err);
		*err = e;
		return -1;
	}
	*rev = j.rev;
	*state = j.state;
	*held = c->d == SD_QUEUED && j.def.hold;
	job_free(&j);
	return 1;
}

int wait_stand_of(struct spool *sp, const struct wait_read *r, long long id,
		  enum wait_stand *w, enum job_state *state, struct cb_err *err)
{
	struct copy *c = NULL;
	size_t nc = 0, q = queued_first(r, id), nq = 0, best = SIZE_MAX;
	long long best_rev = 0;
	int best_held = 0, rc = -1;
	enum job_state best_state = JS_QUEUED;
	char *pn = name_plain(id);

	*w = WAIT_NONE;
	*state = JS_QUEUED;
	if (!pn)
		return oom(err);
	while (q + nq < r->nqueued && r->queued[q + nq].id == id)
		nq++;
	/* Its records, in the order of the flow of jobs: queued/ (every
	 * name with its ID: a crash in a promote may leave two), running/,
	 * paused/, done/. */
	if (!(c = calloc(nq + 3, sizeof *c))) {
		oom(err);
		goto out;
	}
	for (size_t i = 0; i < nq; i++)
		c[nc++] = (struct copy){ SD_QUEUED, r->queued[q + i].name };
	if (has(r->running, r->nrunning, id))
		c[nc++] = (struct copy){ SD_RUNNING, pn };
	if (has(r->paused, r->npaused, id))
		c[nc++] = (struct copy){ SD_PAUSED, pn };
	if (faccessat(sp->dir[SD_DONE], pn, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		c[nc++] = (struct copy){ SD_DONE, pn };
	else if (errno != ENOENT) {
		cb_err_sys(err, EX_OSERR_, "%s/done/%s", sp->path, pn);
		goto out;
	}
	/* Two records of one job (a crash between a record's two steps,
	 * LAYOUT.md §6): the higher rev is the job. */
	for (size_t i = 0; i < nc; i++) {
		long long rev;
		enum job_state st;
		int held, k = load_copy(sp, &c[i], &rev, &st, &held, err);

		if (k < 0)
			goto out;
		if (k == 1 && (best == SIZE_MAX || rev > best_rev)) {
			best = i;
			best_rev = rev;
			best_state = st;
			best_held = held;
		}
	}
	rc = 0;
	if (best != SIZE_MAX) {
		switch (c[best].d) {
		case SD_QUEUED:
			*w = best_held ? WAIT_HELD : WAIT_QUEUED;
			break;
		case SD_RUNNING:
			*w = WAIT_RUNNING;
			break;
		case SD_PAUSED:
			*w = WAIT_PAUSED;
			break;
		default:
			*w = WAIT_ENDED;
			*state = best_state;
		}
	} else if (nc) {
		*w = WAIT_MOVED;          /* every record gone since the listing */
	} else if (has(r->incoming, r->nincoming, id) || has(r->newid, r->nnew, id)) {
		*w = WAIT_PENDING;
	} else if (faccessat(sp->dir[SD_REJECTED], pn, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		*w = WAIT_REJECTED;
	} else if (errno != ENOENT) {
		rc = cb_err_sys(err, EX_OSERR_, "%s/rejected/%s", sp->path, pn);
	}
out:
	free(c);
	free(pn);
	return rc;
}

/* 1 when job ID is to be waited for, 0 not, -1 with ERR. */
static int busy_id(struct spool *sp, const struct wait_read *r, long long id, struct cb_err *err)
{
	enum wait_stand w;
	enum job_state st;

	if (wait_stand_of(sp, r, id, &w, &st, err) < 0)
		return -1;
	return w == WAIT_PENDING || w == WAIT_QUEUED || w == WAIT_RUNNING || w == WAIT_MOVED;
}

int wait_busy(struct spool *sp, const struct wait_read *r, struct cb_err *err)
{
	int k;

	/* Cheapest first: a submission in new/ is a job to wait for,
	 * whatever its name says (one whose ID is taken gets another). */
	if (r->new_jobs)
		return 1;
	for (size_t i = 0; i < r->nincoming; i++)
		if ((k = busy_id(sp, r, r->incoming[i], err)) != 0)
			return k;
	for (size_t i = 0; i < r->nrunning; i++)
		if ((k = busy_id(sp, r, r->running[i], err)) != 0)
			return k;
	for (size_t i = 0; i < r->nqueued; i++) {
		if (i && r->queued[i].id == r->queued[i - 1].id)
			continue;
		if ((k = busy_id(sp, r, r->queued[i].id, err)) != 0)
			return k;
	}
	return 0;
}
