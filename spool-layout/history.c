/*
 * history.c - every job the spool has a record of (history.h): the
 * reader of `report` and `users`.  One listing per state directory, one
 * read per record; it never writes the spool.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "history.h"
#include "names.h"
#include "store.h"

struct ent {
	long long id;
	enum spool_dir dir;
	char *name;
};

static int ent_cmp(const void *pa, const void *pb)
{
	const struct ent *a = pa, *b = pb;

	if (a->id != b->id)
		return a->id < b->id ? -1 : 1;
	return (a->dir > b->dir) - (a->dir < b->dir);
}

static void skipped(void (*skip)(void *, const struct cb_err *), void *arg, struct cb_err *e)
{
	if (skip)
		skip(arg, e);
	cb_err_free(e);
}

/* Room for one more in *V (N used, *CAP allocated) of SIZE each. */
static int grow(void **v, size_t n, size_t *cap, size_t size)
{
	void *p;

	if (n < *cap)
		return 0;
	if (!(p = reallocarray(*v, *cap ? *cap * 2 : 64, size)))
		return -1;
	*v = p;
	*cap = *cap ? *cap * 2 : 64;
	return 0;
}

int spool_history(struct spool *sp, struct job **jobs, size_t *n,
		  void (*skip)(void *arg, const struct cb_err *e), void *arg, struct cb_err *err)
{
	static const enum spool_dir dirs[] = { SD_QUEUED, SD_RUNNING, SD_PAUSED, SD_DONE };
	struct ent *e = NULL;
	struct job *out = NULL;
	size_t ne = 0, cape = 0, nout = 0, capout = 0;
	int rc = -1;

	*jobs = NULL;
	*n = 0;
	for (size_t k = 0; k < sizeof dirs / sizeof dirs[0]; k++) {
		char **names;
		size_t nn;
		int bad = 0;

		if (spool_list(sp, dirs[k], &names, &nn) < 0) {
			cb_err_sys(err, EX_OSERR_, "%s/%s", sp->path, spool_dir_name[dirs[k]]);
			goto out;
		}
		for (size_t i = 0; i < nn && !bad; i++) {
			long long id, prio;

			if (dirs[k] == SD_QUEUED ? name_parse_queued(names[i], &prio, &id) < 0
						 : name_parse_plain(names[i], &id) < 0)
				continue;
			if ((bad = grow((void **)&e, ne, &cape, sizeof *e) < 0))
				break;
			e[ne].id = id;
			e[ne].dir = dirs[k];
			e[ne++].name = names[i];
			names[i] = NULL;
		}
		spool_list_free(names, nn);
		if (bad)
			goto oom;
	}
	if (ne > 1)
		qsort(e, ne, sizeof *e, ent_cmp);
	for (size_t b = 0, end; b < ne; b = end) {
		struct job best;
		int have = 0, moved = 0;

		for (end = b; end < ne && e[end].id == e[b].id; end++)
			;
		for (size_t i = b; i < end; i++) {
			struct cb_err le = { 0 };
			struct job j;

			if (spool_load(sp, e[i].dir, e[i].name, &j, &le) < 0) {
				if (le.ex == EX_NOINPUT_) {
					moved = 1;
					cb_err_free(&le);
				} else {
					skipped(skip, arg, &le);
				}
				continue;
			}
			if (have && j.rev <= best.rev) {
				job_free(&j);
				continue;
			}
			if (have)
				job_free(&best);
			best = j;
			have = 1;
		}
		if (!have && moved) {
			struct cb_err le = { 0 };
			enum spool_dir d;
			char *name = NULL;
			int r = spool_find(sp, e[b].id, &best, &d, &name, &le);

			if (r < 0)
				skipped(skip, arg, &le);
			free(name);
			/* Found back in new/ or incoming/: it has no history. */
			have = r == 1 && d != SD_NEW && d != SD_INCOMING;
			if (r == 1 && !have)
				job_free(&best);
		}
		if (have) {
			if (grow((void **)&out, nout, &capout, sizeof *out) < 0) {
				job_free(&best);
				goto oom;
			}
			out[nout++] = best;
		}
	}
	*jobs = out;
	*n = nout;
	out = NULL;
	nout = 0;
	rc = 0;
	goto out;
oom:
	cb_err_set(err, EX_OSERR_, "%s", strerror(ENOMEM));
out:
	for (size_t i = 0; i < ne; i++)
		free(e[i].name);
	free(e);
	spool_history_free(out, nout);
	return rc;
}

void spool_history_free(struct job *jobs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		job_free(&jobs[i]);
	free(jobs);
}
