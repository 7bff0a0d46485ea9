/*
 * statusread.c - how `status` reads the spool (statusread.h; LAYOUT.md
 * §6 and §11, the reader).  One readdir per directory, one read per
 * record shown -- except queued/, which the daemon summarises in
 * queued.idx: while the index's key matches, its lines stand for the
 * names and records of queued/, no listing, no reads.  The index is
 * queued/ at the moment of its fstat, between incoming/ and running/,
 * so it keeps the flow order's guarantee.  An index that is missing,
 * stale, malformed or a symlink is ignored: the jobs are the same, only
 * slower.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "names.h"
#include "statusread.h"
#include "store.h"

/* A name found in a spool directory, or a line of the index. */
struct ent {
	long long id;
	enum spool_dir dir;
	char *name;             /* owned unless IX */
	struct index_ent *ix;   /* queued/ as the index has it */
	int dead;
};

struct reading {
	struct spool *sp;
	struct status_read *r;
	struct ent *e;
	size_t n, cap;
	int indexed;            /* queued/ is the index's (R->ix) */
	unsigned char *shared;  /* per line of the index: it is among E */
};

static int oom(struct cb_err *err)
{
	return cb_err_set(err, EX_OSERR_, "%s", strerror(ENOMEM));
}

static int shown(const struct status_read *r, enum job_state s)
{
	return r->all || !job_state_final(s);
}

/* J to the caller, as status shows it. */
static int give(struct status_read *r, const struct job *j, struct cb_err *err)
{
	struct status_view v;

	if (!shown(r, j->state))
		return 0;
	if (status_view_of(j, r->with_json, &v) < 0)
		return oom(err);
	r->job(r->arg, &v, 0);
	status_view_free(&v);
	return 0;
}

/* A library call's error E, which does not stop the reading. */
static void warn(struct status_read *r, struct cb_err *e, int always)
{
	r->warn(r->arg, e);
	if (always || !r->ex)
		r->ex = e->ex ? e->ex : EX_OSERR_;
	cb_err_free(e);
}

/* Job ID, which moved while it was read, wherever it is now. */
static int find_moved(struct reading *g, long long id, struct cb_err *err)
{
	struct cb_err e = { 0 };
	enum spool_dir d;
	struct job j;
	char *name;
	int r = spool_find(g->sp, id, &j, &d, &name, &e), rc = 0;

	if (r < 0) {
		warn(g->r, &e, 1);
		return 0;
	}
	if (r == 1) {
		rc = give(g->r, &j, err);
		job_free(&j);
		free(name);
	}
	return rc;
}

/* Read entry E: 1 loaded, 0 gone (it moved), -1 unreadable (warned). */
static int load_ent(struct reading *g, const struct ent *e, struct job *j)
{
	struct cb_err err = { 0 };

	if (e->dir == SD_NEW || e->dir == SD_INCOMING ?
	    spool_load_pending(g->sp, e->dir, e->name, e->id, j, &err) == 0 :
	    spool_load(g->sp, e->dir, e->name, j, &err) == 0)
		return 1;
	if (err.ex == EX_NOINPUT_) {
		cb_err_free(&err);
		return 0;
	}
	warn(g->r, &err, 0);
	return -1;
}

static struct ent *new_ent(struct reading *g)
{
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 256;
		struct ent *v = realloc(g->e, cap * sizeof *v);

		if (!v)
			return NULL;
		g->e = v;
		g->cap = cap;
	}
	memset(&g->e[g->n], 0, sizeof g->e[g->n]);
	return &g->e[g->n++];
}

static int add_ent(struct reading *g, long long id, enum spool_dir d, const char *name)
{
	struct ent *e = new_ent(g);

	if (!e)
		return -1;
	e->id = id;
	e->dir = d;
	if (!(e->name = strdup(name))) {
		g->n--;
		return -1;
	}
	return 0;
}

/* A line of the index, standing for queued/NAME. */
static int add_ix_ent(struct reading *g, struct index_ent *x)
{
	struct ent *e = new_ent(g);

	if (!e)
		return -1;
	e->id = x->id;
	e->dir = SD_QUEUED;
	e->name = (char *)x->name;
	e->ix = x;
	return 0;
}

/* An entry whose record the index holds (no read needed). */
static int summarised(const struct ent *e)
{
	return e->ix && !e->ix->raw;
}

static int is_record_dir(enum spool_dir d)
{
	return d == SD_QUEUED || d == SD_RUNNING || d == SD_PAUSED || d == SD_DONE;
}

static int ent_cmp(const void *pa, const void *pb)
{
	const struct ent *a = pa, *b = pb;

	if (a->id != b->id)
		return a->id < b->id ? -1 : 1;
	return (a->dir > b->dir) - (a->dir < b->dir);
}

static int id_cmp(const void *pa, const void *pb)
{
	long long a = *(const long long *)pa, b = *(const long long *)pb;

	return (a > b) - (a < b);
}

/* A job ID in the sorted S[0..N)? */
static int id_in(const long long *s, size_t n, long long id)
{
	return n && bsearch(&id, s, n, sizeof *s, id_cmp) != NULL;
}

/* The IDs given by two or more lines of the index (two names of one
 * job in queued/, to be grouped as any other two), sorted, into *DUPS
 * (malloc'd, or NULL when none).  An index whose IDs ascend has none
 * (in name order they do within a priority: one priority, the usual
 * case); otherwise a table of the IDs finds them.  0, or -1 (ENOMEM). */
static int index_dups(const struct spool_index *ix, long long **dups, size_t *ndups)
{
	size_t cap = 16, mask, n = 0;
	long long *t, *d = NULL;

	*dups = NULL;
	*ndups = 0;
	if (ix->ascending)
		return 0;
	while (cap < 2 * ix->n)
		cap *= 2;
	mask = cap - 1;
	if (!(t = calloc(cap, sizeof *t)))      /* 0: free (an ID is >= 1) */
		return -1;
	for (size_t i = 0; i < ix->n; i++) {
		long long id = ix->e[i].id;
		size_t h = (size_t)(((unsigned long long)id * 0x9e3779b97f4a7c15ull) >> 32) & mask;

		while (t[h] && t[h] != id)
			h = (h + 1) & mask;
		if (!t[h]) {
			t[h] = id;
			continue;
		}
		/* A second line of ID (a third too adds it again: harmless). */
		if (n % 16 == 0) {
			long long *v = realloc(d, (n + 16) * sizeof *v);

			if (!v) {
				free(t);
				free(d);
				return -1;
			}
			d = v;
		}
		d[n++] = id;
	}
	free(t);
	if (n)
		qsort(d, n, sizeof *d, id_cmp);
	*dups = d;
	*ndups = n;
	return 0;
}

/*
 * Step 1: the listings, in the order of the flow of jobs.  The lines
 * of the index are not copied into G's entries: only those whose job
 * ID has another name too (another directory, a done/ copy, a second
 * line) are, to be grouped; the others are alone in their group and
 * are shown as they are, in the index's order (G->SHARED marks which
 * are not).
 */
static int list(struct reading *g, struct cb_err *err)
{
	/* queued/ before running/: a job moving queued -> running between
	 * the two listings is seen twice (and deduplicated) rather than
	 * not at all. */
	static const enum spool_dir dirs[] = {
		SD_NEW, SD_INCOMING, SD_QUEUED, SD_RUNNING, SD_PAUSED, SD_DONE,
	};
	struct status_read *r = g->r;
	struct spool *sp = g->sp;
	size_t nlisted;
	long long *ids = NULL, *dups = NULL;
	size_t nids = 0, ndups = 0;
	int rc = -1;

	for (size_t k = 0; k < sizeof dirs / sizeof dirs[0]; k++) {
		enum spool_dir d = dirs[k];
		char **names;
		size_t n;
		int bad = 0;

		/* done/ holds the history: list it only for --all. */
		if (d == SD_DONE && !r->all)
			continue;
		if (d == SD_QUEUED && index_read(sp, r->with_json, &r->ix) == 1) {
			g->indexed = 1;
			continue;
		}
		if (spool_list(sp, d, &names, &n) < 0)
			return cb_err_sys(err, EX_OSERR_, "%s/%s", sp->path, spool_dir_name[d]);
		for (size_t i = 0; i < n && !bad; i++) {
			long long id, prio, count;
			int c;

			switch (d) {
			case SD_NEW:
			case SD_INCOMING:
				/* A block of an array or sweep: each of its IDs.
				 * A name of new/ that holds none is a foreign one,
				 * or one the daemon ignores. */
				c = spool_pending_ids(d, names[i], &id, &count);
				for (long long m = 0; c >= 0 && m < count && !bad; m++)
					bad = add_ent(g, id + m, d, names[i]) < 0;
				if (c < 0 && d == SD_NEW && name_classify_new(names[i], &prio, &id, &count) == 0)
					r->foreign++;
				break;
			case SD_QUEUED:
				if (name_parse_queued(names[i], &prio, &id) == 0)
					bad = add_ent(g, id, d, names[i]) < 0;
				break;
			default:
				if (name_parse_plain(names[i], &id) == 0)
					bad = add_ent(g, id, d, names[i]) < 0;
			}
		}
		spool_list_free(names, n);
		if (bad)
			return oom(err);
	}
	/* Without --all, a finished copy matters only beside a record of
	 * the same job elsewhere (a crash between a record's two steps): one lookup per
	 * job shown, rather than a listing of the whole history. */
	nlisted = g->n;
	for (size_t i = 0; !r->all && i < nlisted; i++) {
		char *pn;
		int bad;

		if (!(pn = name_plain(g->e[i].id)))
			return oom(err);
		bad = faccessat(sp->dir[SD_DONE], pn, F_OK, AT_SYMLINK_NOFOLLOW) == 0 &&
		      add_ent(g, g->e[i].id, SD_DONE, pn) < 0;
		free(pn);
		if (bad)
			return oom(err);
	}
	/* The index's lines: which share their job ID with another name.
	 * None, when nothing else was listed, no ID is there twice and
	 * done/ is as it was, with no copy of any. */
	if (!g->indexed || (g->n == 0 && r->ix.ascending &&
			    (r->all || (r->ix.done_fresh && r->ix.n_in_done == 0))))
		return 0;
	if (!(g->shared = calloc(r->ix.n ? r->ix.n : 1, 1)) ||
	    !(ids = malloc((g->n ? g->n : 1) * sizeof *ids)) || index_dups(&r->ix, &dups, &ndups) < 0)
		goto out;
	for (size_t i = 0; i < g->n; i++)
		ids[nids++] = g->e[i].id;
	if (nids > 1)
		qsort(ids, nids, sizeof *ids, id_cmp);
	nlisted = r->ix.n;
	for (size_t i = 0; i < nlisted; i++) {
		struct index_ent *x = &r->ix.e[i];
		/* done/ as it was when the index was made: it says which
		 * of its jobs have a copy there. */
		int done = r->all ? 0 : r->ix.done_fresh ? x->in_done : -1, bad;
		char *pn = NULL;

		if (done < 0) {
			if (!(pn = name_plain(x->id)))
				goto out;
			done = faccessat(sp->dir[SD_DONE], pn, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
		}
		if (!done && !id_in(ids, nids, x->id) && !id_in(dups, ndups, x->id)) {
			free(pn);
			continue;
		}
		g->shared[i] = 1;
		bad = add_ix_ent(g, x) < 0;
		if (!bad && done && !pn)
			bad = !(pn = name_plain(x->id));
		bad = bad || (done && add_ent(g, x->id, SD_DONE, pn) < 0);
		free(pn);
		if (bad)
			goto out;
	}
	rc = 0;
out:
	free(ids);
	free(dups);
	return rc < 0 ? oom(err) : 0;
}

/* Step 2 for the entries [B, END) of one job ID. */
static int group(struct reading *g, size_t b, size_t end, struct cb_err *err)
{
	struct status_read *r = g->r;
	size_t nrec = 0, best = SIZE_MAX;
	long long best_rev = -1;
	struct job j;
	int moved = 0, k;

	for (size_t i = b; i < end; i++)
		nrec += is_record_dir(g->e[i].dir);
	if (nrec == 0) {
		/* Not accepted yet: incoming/ holds the ID; a file in new/
		 * with the same number gets another ID. */
		size_t keep = end - 1;  /* incoming sorts after new */

		for (size_t i = b; i < end; i++)
			if (i != keep) {
				g->e[i].dead = 1;
				r->foreign++;
			}
	} else {
		for (size_t i = b; i < end; i++)
			if (!is_record_dir(g->e[i].dir)) {
				g->e[i].dead = 1;
				if (g->e[i].dir == SD_NEW)
					r->foreign++;
			}
	}
	if (nrec <= 1)
		return 0;
	/* Two records: the higher rev is the job (LAYOUT.md §6). */
	for (size_t i = b; i < end; i++) {
		long long rev;

		if (g->e[i].dead)
			continue;
		if (summarised(&g->e[i])) {
			rev = g->e[i].ix->v.rev;
		} else if ((k = load_ent(g, &g->e[i], &j)) <= 0) {
			moved |= k == 0;        /* -1: unreadable, said */
			g->e[i].dead = 1;
			continue;
		} else {
			rev = j.rev;
			job_free(&j);
		}
		if (rev > best_rev) {
			best_rev = rev;
			best = i;
		}
	}
	for (size_t i = b; i < end; i++)
		if (i != best)
			g->e[i].dead = 1;
	return best == SIZE_MAX && moved ? find_moved(g, g->e[b].id, err) : 0;
}

/* Step 3: what is shown, read. */
static int show(struct reading *g, const struct ent *e, struct cb_err *err)
{
	struct status_read *r = g->r;
	struct job j;
	int k;

	if (e->dead || (e->dir == SD_DONE && !r->all))
		return 0;
	if (summarised(e)) {
		if (shown(r, e->ix->v.state))
			r->job(r->arg, &e->ix->v, 1);
		return 0;
	}
	k = load_ent(g, e, &j);
	if (k == 0)
		return find_moved(g, e->id, err);
	if (k < 0)
		return 0;
	k = give(r, &j, err);
	job_free(&j);
	return k;
}

int status_read(struct spool *sp, struct status_read *r, struct cb_err *err)
{
	struct reading g = { sp, r, NULL, 0, 0, 0, NULL };
	int rc = list(&g, err);

	/* The index's lines alone in their group, in its order (dispatch
	 * order), as they are: the view itself is given (it lasts). */
	for (size_t i = 0; rc == 0 && g.indexed && i < r->ix.n; i++) {
		struct index_ent *x = &r->ix.e[i];
		struct ent e = { x->id, SD_QUEUED, (char *)x->name, x, 0 };

		if (g.shared && g.shared[i])
			continue;
		if (!x->raw) {
			if (shown(r, x->v.state))
				r->job(r->arg, &x->v, 1);
		} else {
			rc = show(&g, &e, err);
		}
	}
	if (rc == 0 && g.n > 1)
		qsort(g.e, g.n, sizeof *g.e, ent_cmp);
	for (size_t b = 0, end; rc == 0 && b < g.n; b = end) {
		for (end = b; end < g.n && g.e[end].id == g.e[b].id; end++)
			;
		rc = group(&g, b, end, err);
	}
	for (size_t i = 0; rc == 0 && i < g.n; i++)
		rc = show(&g, &g.e[i], err);
	for (size_t i = 0; i < g.n; i++)
		if (!g.e[i].ix)
			free(g.e[i].name);
	free(g.e);
	free(g.shared);
	return rc;
}

void status_read_free(struct status_read *r)
{
	index_free(&r->ix);
}

void status_key_of(const struct status_view *v, struct status_key *k)
{
	switch (v->state) {
	case JS_QUEUED:
		k->section = 0;
		break;
	case JS_RUNNING:
	case JS_PAUSING:
		k->section = 1;
		break;
	case JS_PAUSED:
		k->section = 2;
		break;
	default:
		k->section = 3;
	}
	k->prio = v->priority;
	k->id = v->id;
}

int status_key_cmp(const struct status_key *a, const struct status_key *b)
{
	if (a->section != b->section)
		return a->section < b->section ? -1 : 1;
	if (a->section == 0 && a->prio != b->prio)
		return a->prio > b->prio ? -1 : 1;
	return (a->id > b->id) - (a->id < b->id);
}
