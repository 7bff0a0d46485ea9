/*
 * store.c - job records in the spool's state directories (LAYOUT.md
 * §§5-7): loading one, a submission not yet accepted seen as a queued
 * job, finding a job wherever it is (the higher rev wins), and moving a
 * bad submission into rejected/.  The daemon writes records in batches
 * (batch.c spool_stage, spoold/turn.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crash.h"
#include "expand.h"
#include "lab.h"
#include "names.h"
#include "store.h"

/* The text of the record DIR/NAME, unparsed (malloc'd, NUL-terminated;
 * *len excludes the NUL), with spool_load's errors. */
static int read_record(struct spool *sp, enum spool_dir d, const char *name,
		       char **buf, size_t *len, struct cb_err *err)
{
	if (read_named(sp->dir[d], name, RECORD_MAX, buf, len) < 0) {
		/* Something that is no record (a stray symlink, directory,
		 * FIFO, or a huge file) is bad data, named as such. */
		const char *what = errno == ELOOP ? "is a symbolic link (not followed)" :
				   errno == EISDIR ? "is a directory" :
				   errno == EINVAL || errno == ENXIO ? "is not a regular file" :
				   errno == EFBIG ? "is larger than 16 MiB" : NULL;

		if (what)
			return cb_err_set(err, EX_DATAERR_, "%s/%s/%s: %s", sp->path,
					  spool_dir_name[d], name, what);
		return cb_err_sys(err, errno == ENOENT ? EX_NOINPUT_ : EX_OSERR_, "%s/%s/%s",
				  sp->path, spool_dir_name[d], name);
	}
	return 0;
}

int spool_load(struct spool *sp, enum spool_dir d, const char *name,
	       struct job *j, struct cb_err *err)
{
	char *buf;
	size_t len;
	int r;

	if (read_record(sp, d, name, &buf, &len, err) < 0)
		return -1;
	r = job_from_json(buf, len, j, NULL);
	free(buf);
	if (r < 0)
		return cb_err_set(err, EX_DATAERR_, "%s/%s/%s: not a valid job record",
				  sp->path, spool_dir_name[d], name);
	return 0;
}

int spool_pending_ids(enum spool_dir d, const char *name, long long *first, long long *count)
{
	long long prio;
	int c;

	*count = 1;
	if (d == SD_NEW)
		return (c = name_classify_new(name, &prio, first, count)) > 0 ? c - 1 : -1;
	if (name_parse_plain(name, first) == 0)
		return 0;
	return name_parse_block(name, first, count) == 0 ? 1 : -1;
}

/* J's definition, a block's, replaced by that of its member J->id
 * (the block's first job FIRST); left as it is when it is no block's. */
static int pending_member(struct job *j, long long first)
{
	struct expander x;
	struct job_def m;
	const char *why;
	long long idx;

	if (!jobdef_is_many(&j->def) || expander_init(&x, &j->def, &why) < 0)
		return 0;
	if ((size_t)(j->id - first) >= x.n) {
		expander_free(&x);
		return 0;
	}
	switch (expander_member(&x, (size_t)(j->id - first), first, &m, &idx, &why)) {
	case 1:
		expander_free(&x);
		return 0;       /* the daemon will reject it */
	case -1:
		expander_free(&x);
		return -1;
	}
	j->array_id = first;
	j->array_index = idx;
	j->max_running = x.limit;
	expander_free(&x);
	jobdef_free(&j->def);
	j->def = m;
	return 0;
}

int spool_load_pending(struct spool *sp, enum spool_dir d, const char *name,
		       long long id, struct job *j, struct cb_err *err)
{
	char *buf = NULL;
	size_t len;
	long long prio, seq, count;
	struct stat st;
	int seen;

	memset(j, 0, sizeof *j);
	if (read_named(sp->dir[d], name, JOBFILE_MAX, &buf, &len) < 0) {
		if (errno == ENOENT)
			return cb_err_sys(err, EX_NOINPUT_, "%s/%s/%s", sp->path,
					  spool_dir_name[d], name);
		buf = NULL;     /* unreadable: the daemon will reject it */
	}
	j->id = id;
	j->state = JS_QUEUED;
	if ((seen = fstatat(sp->dir[d], name, &st, AT_SYMLINK_NOFOLLOW) == 0))
		j->submitted = j->queued_at = (long long)st.st_mtim.tv_sec * 1000 +
					      st.st_mtim.tv_nsec / 1000000;
	if (buf) {
		struct cb_err e = { 0 };

		if (jobdef_parse(buf, len, name, &j->def, &e) < 0)
			jobdef_free(&j->def);
		cb_err_free(&e);
		free(buf);
	}
	j->priority = j->def.priority;
	if (d == SD_NEW && name_classify_new(name, &prio, &seq, &count) > 0)
		j->priority = prio;
	/* Its owner as the daemon will record it, the file's (lab.h):
	 * status --user and --mine see it before it is accepted. */
	if (seen) {
		j->owner = lab_user_name(st.st_uid);
		j->owner_uid = (long long)st.st_uid;
	}
	if ((spool_pending_ids(d, name, &seq, &count) == 1 && pending_member(j, seq) < 0) ||
	    !(j->reason = strdup("waiting for the daemon to accept it")) || (seen && !j->owner))
		return cb_err_sys(err, EX_OSERR_, "find");
	return 0;
}

/* spool_load of a record that may have moved on since it was seen:
 * 1 loaded, 0 gone meanwhile (ENOENT: found where it went, later in
 * this pass or by the next), -1 any other error. */
static int load_seen(struct spool *sp, enum spool_dir d, const char *name, struct job *j,
		     struct cb_err *err)
{
	if (spool_load(sp, d, name, j, err) == 0)
		return 1;
	if (err->ex != EX_NOINPUT_)
		return -1;
	cb_err_free(err);
	return 0;
}

/* CAND (CD/CNAME) kept in J, *D and *NAME when it is the first found
 * or of a higher rev (two records of one ID: LAYOUT.md §6), else
 * freed.  0, or -1 out of memory. */
static int keep_newer(struct job *j, struct job *cand, int *found, enum spool_dir *d,
		      enum spool_dir cd, char **name, const char *cname)
{
	if (*found && cand->rev <= j->rev) {
		job_free(cand);
		return 0;
	}
	job_free(j);
	*j = *cand;
	*d = cd;
	*found = 1;
	free(*name);
	return (*name = strdup(cname)) ? 0 : -1;
}

/* One pass of spool_find over the directories. */
static int find_once(struct spool *sp, long long id, struct job *j,
		     enum spool_dir *d, char **name, struct cb_err *err)
{
	static const enum spool_dir plain[] = { SD_RUNNING, SD_PAUSED, SD_DONE };
	char *pn = name_plain(id), **names = NULL;
	size_t n = 0;
	int found = 0, r;
	struct job cand;

	*name = NULL;
	if (!pn)
		return cb_err_sys(err, EX_OSERR_, "find");
	memset(j, 0, sizeof *j);
	/* Records: queued/ by suffix, then the plain-named directories,
	 * in the order a job goes through them, so that a pass misses no
	 * job that moves on while it looks (it is found where it went);
	 * one moved back (requeued, resumed) is found by the next pass. */
	if (spool_list(sp, SD_QUEUED, &names, &n) < 0)
		goto sysfail;
	for (size_t i = 0; i < n; i++) {
		long long prio, seq;

		if (name_parse_queued(names[i], &prio, &seq) < 0 || seq != id)
			continue;
		/* Gone on to running/ since the listing (found there
		 * below): the error that failed a submit --after. */
		if ((r = load_seen(sp, SD_QUEUED, names[i], &cand, err)) < 0)
			goto fail;
		if (r == 0)
			continue;
		if (keep_newer(j, &cand, &found, d, SD_QUEUED, name, names[i]) < 0)
			goto sysfail;
	}
	spool_list_free(names, n);
	names = NULL;
	n = 0;
	for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
		/* Not there (load_seen's 0): the usual case. */
		if ((r = load_seen(sp, plain[i], pn, &cand, err)) < 0)
			goto fail;
		if (r == 0)
			continue;
		if (keep_newer(j, &cand, &found, d, plain[i], name, pn) < 0)
			goto sysfail;
	}
	if (found)
		goto done;
	/* Not accepted yet: incoming/, or new/ under the submit grammar
	 * (a block's name holds its IDs). */
	for (int k = 0; k < 2 && !found; k++) {
		enum spool_dir pd = k ? SD_NEW : SD_INCOMING;

		if (spool_list(sp, pd, &names, &n) < 0)
			goto sysfail;
		for (size_t i = 0; i < n; i++) {
			long long first, count;

			if (spool_pending_ids(pd, names[i], &first, &count) < 0 ||
			    id < first || id - first >= count)
				continue;
			if (spool_load_pending(sp, pd, names[i], id, j, err) < 0) {
				if (err->ex != EX_NOINPUT_)
					goto fail;
				cb_err_free(err);
				job_free(j);
				continue;       /* taken by the daemon meanwhile */
			}
			*d = pd;
			*name = strdup(names[i]);
			found = 1;
			break;
		}
		spool_list_free(names, n);
		names = NULL;
		n = 0;
	}
	free(pn);
	return found && !*name ? cb_err_sys(err, EX_OSERR_, "find") : found;
done:
	free(pn);
	return 1;
sysfail:
	cb_err_sys(err, EX_OSERR_, "%s", sp->path);
fail:
	spool_list_free(names, n);
	job_free(j);
	free(*name);
	*name = NULL;
	free(pn);
	return -1;
}

/*
 * A job moves while a pass looks for it.  A pass looks in the order
 * jobs go (queued/, running/, paused/, done/), so one moved on is found
 * where it went, and one gone from under its listing is skipped, not an
 * error.  It can miss one moved back (running/ or paused/ to queued/)
 * or just accepted (new/ -> incoming/ -> queued/ while the pass goes
 * from the records to new/): a job that exists is only "not found"
 * when passes find it nowhere.  A move is one rename, so a job is not
 * missed by passes again and again unless it moves as often: five
 * passes, then not found.
 */
int spool_find(struct spool *sp, long long id, struct job *j,
	       enum spool_dir *d, char **name, struct cb_err *err)
{
	int r = 0;

	for (int pass = 0; pass < 5 && r == 0; pass++)
		r = find_once(sp, id, j, d, name, err);
	return r;
}

int spool_deps_problem(struct spool *sp, const struct job_def *jd, long long below,
		       char **why, struct cb_err *err)
{
	const long long *lists[] = { jd->after, jd->after_any };
	const size_t n[] = { jd->nafter, jd->nafter_any };

	*why = NULL;
	for (int l = 0; l < 2; l++)
		for (size_t i = 0; i < n[l]; i++) {
			const char *key = l ? "after_any" : "after";
			enum spool_dir dir;
			struct job j;
			char *name = NULL;
			int r;

			if (lists[l][i] >= below) {
				*why = xasprintf("%s: job %lld is not an earlier job", key, lists[l][i]);
				return *why ? 2 : cb_err_sys(err, EX_OSERR_, "deps");
			}
			if ((r = spool_find(sp, lists[l][i], &j, &dir, &name, err)) < 0)
				return -1;
			free(name);
			if (r > 0) {
				job_free(&j);
				continue;
			}
			*why = xasprintf("%s: no such job %lld", key, lists[l][i]);
			return *why ? 1 : cb_err_sys(err, EX_OSERR_, "deps");
		}
	return 0;
}

int spool_reject(struct spool *sp, enum spool_dir from, const char *name,
		 const char *orig, long long seq, const char *why, struct cb_err *err)
{
	char *pn = name_plain(seq), *rn = xasprintf("%010lld.reason", seq);
	char *body = xasprintf("original name: %s\nreason: %s\n", orig, why);
	int r = -1;

	if (!pn || !rn || !body) {
		cb_err_sys(err, EX_OSERR_, "reject");
		goto out;
	}
	/* Reason first: a crash then leaves the job in place to be retried. */
	if (atomic_write(sp->dir[SD_TMP], sp->dir[SD_REJECTED], rn, body, strlen(body), sp->fmode) < 0 ||
	    (CRASH_POINT("reject: reason written", NULL), 0) ||
	    renameat(sp->dir[from], name, sp->dir[SD_REJECTED], pn) < 0 ||
	    fsync_dir(sp->dir[SD_REJECTED]) < 0 || fsync_dir(sp->dir[from]) < 0) {
		cb_err_sys(err, spool_errno_ex(errno), "%s/rejected/%s", sp->path, pn);
		goto out;
	}
	r = 0;
out:
	free(pn);
	free(rn);
	free(body);
	return r;
}
