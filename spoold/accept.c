/*
 * accept.c - submissions: new/ -> incoming/ -> queued/ (LAYOUT.md §5),
 * in batches: every file of one inotify read claimed under its job ID
 * (one update of the sequence counter), its record prepared (or the
 * file rejected with its reason), and the records committed together
 * (batch.c: the syncs of one atomic write for all).  This makes a
 * record; every change after that is a row of the transition table
 * (table.c), applied by jobs.c job_step.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spoold.h"

/* Is there a file for job ID in one of DIRS (plain names)? */
static int plain_exists(struct daemon *d, long long id, const enum spool_dir *dirs, size_t n)
{
	char *pn = name_plain(id);
	int found = 0;

	if (!pn)
		return 1;       /* out of range: treat as taken */
	for (size_t i = 0; i < n && !found; i++)
		found = faccessat(d->sp.dir[dirs[i]], pn, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
	free(pn);
	return found;
}

/* A record of job ID exists (queued ones are all in memory). */
static int record_exists(struct daemon *d, long long id)
{
	static const enum spool_dir dirs[] = { SD_RUNNING, SD_PAUSED, SD_DONE };

	return q_find(d, id) || r_find(d, id) || plain_exists(d, id, dirs, 3);
}

/* ... or the job is being accepted. */
static int job_exists(struct daemon *d, long long id)
{
	static const enum spool_dir dirs[] = { SD_INCOMING };

	return record_exists(d, id) || plain_exists(d, id, dirs, 1);
}

/* One submission on its way from new/ (or incoming/) to queued/. */
struct sub {
	const char *orig;       /* the name it was dropped under */
	long long seq;          /* its job ID; 0 while it needs a fresh one */
	char *in;               /* its name in incoming/, once there */
	struct job j;           /* its record, once staged */
	int staged;             /* index in the batch + 1, or 0 */
};

static int queue_incoming(struct daemon *d, struct sub *v, size_t n);

/* Move S from new/ to incoming/ under its ID -- a fresh one when its
 * name's own is taken there: 0, or -1 with errno (ENOENT: it is gone;
 * EAGAIN: no fresh ID, write_failed said why). */
static int claim(struct daemon *d, struct sub *s)
{
	struct cb_err err = { 0 };

	for (;;) {
		if (!s->seq && spool_next_seq(&d->sp, &s->seq, &err) < 0) {
			write_failed(d, err.ex, err.msg);
			cb_err_free(&err);
			errno = EAGAIN;
			return -1;
		}
		if (!(s->in = name_plain(s->seq)))
			return -1;
		if (move_noreplace(d->sp.dir[SD_NEW], s->orig, d->sp.dir[SD_INCOMING], s->in) == 0)
			return 0;
		free(s->in);
		s->in = NULL;
		if (errno != EEXIST)
			return -1;
		s->seq = 0;     /* the name's own number is taken: a fresh one */
	}
}

/*
 * LAYOUT.md §5 for the files NAMES of new/: steps 1-3 for each (one
 * update of the sequence counter for all of them, one sync of each
 * directory), then steps 4-5 for all together (queue_incoming).
 */
int accept_new(struct daemon *d, char *const *names, size_t n)
{
	struct cb_err err = { 0 };
	struct sub *v = n ? calloc(n, sizeof *v) : NULL;
	long long floor = 0, fresh = 0, first, prio, seq;
	size_t nv = 0, moved = 0;
	int r = -1;

	if (!n)
		return 0;
	if (!v)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int cls = name_classify_new(names[i], &prio, &seq);

		if (cls < 0 || faccessat(d->sp.dir[SD_NEW], names[i], F_OK, AT_SYMLINK_NOFOLLOW) < 0)
			continue;       /* not ours, or already taken */
		if (cls == 1 && job_exists(d, seq))
			cls = 0;        /* a forged or copied name: a fresh ID */
		v[nv].orig = names[i];
		v[nv].seq = cls == 1 ? seq : 0;
		if (cls == 1 && seq > floor)
			floor = seq;
		fresh += cls == 0;
		nv++;
	}
	if (nv && spool_seq_block(&d->sp, floor, fresh, &first, &err) < 0) {
		write_failed(d, err.ex, err.msg);
		cb_err_free(&err);
		goto out;
	}
	for (size_t i = 0; i < nv; i++) {
		if (!v[i].seq)
			v[i].seq = first++;
		if (claim(d, &v[i]) == 0) {
			moved++;
			continue;
		}
		if (errno == ENOENT)
			continue;
		if (errno != EAGAIN) {
			cb_err_sys(&err, spool_errno_ex(errno), "%s/new/%s", d->sp.path, v[i].orig);
			write_failed(d, err.ex, err.msg);
			cb_err_free(&err);
		}
		nv = i;         /* the rest wait in new/ */
		break;
	}
	CRASH_POINT("accept: in incoming", NULL);
	if (moved && (fsync_dir(d->sp.dir[SD_INCOMING]) < 0 || fsync_dir(d->sp.dir[SD_NEW]) < 0))
		logmsg("fsync: %s", strerror(errno));
	r = queue_incoming(d, v, nv);
out:
	for (size_t i = 0; i < nv; i++)
		free(v[i].in);
	free(v);
	return r;
}

const char *read_problem(int e)
{
	switch (e) {
	case ELOOP:
		return "is a symbolic link";
	case EISDIR:
		return "is a directory";
	case EINVAL:
	case ENXIO:     /* a socket */
		return "is not a regular file";
	case EFBIG:
		return "is larger than 1 MiB";
	default:
		return strerror(e);
	}
}

static void reject(struct daemon *d, const char *in, long long seq, const char *orig,
		   const char *why)
{
	struct cb_err err = { 0 };

	/* Logged once it is done: a stalled spool retries it. */
	if (spool_reject(&d->sp, SD_INCOMING, in, orig, seq, why, &err) < 0) {
		write_failed(d, err.ex, err.msg);
		cb_err_free(&err);
		return;
	}
	write_ok(d);
	logmsg("rejected %s: %s", orig, why);
}

/* Can node NC ever take JD, by its gpus: list (cardbaton-submit makes
 * the same check)?  A node without a list may have any card. */
static int node_fits(const struct node_conf *nc, const struct job_def *jd)
{
	if (!nc->has_gpus)
		return 1;
	for (size_t i = 0; i < jd->ngpus; i++)
		if (!gpu_eligible(nc, jd->gpus[i]))
			return 0;
	return jd->ngpus || jobdef_gpu_need(jd) <= (long long)nc->ngpus;
}

static int node_fits_any(const struct config *c, const struct job_def *jd)
{
	for (size_t k = 0; k < c->nnodes; k++)
		if (node_fits(&c->nodes[k], jd))
			return 1;
	return 0;
}

/* A check the job file cannot express: its node and cards exist here. */
static char *placement_problem(const struct daemon *d, const struct job_def *jd)
{
	const struct node_conf *nc = NULL;

	if (jd->node && !(nc = config_node(&d->cfg, jd->node)))
		return xasprintf("node: unknown node '%s'", jd->node);
	if (nc && jd->ngpus)
		for (size_t i = 0; i < jd->ngpus; i++)
			if (!gpu_eligible(nc, jd->gpus[i]))
				return xasprintf("gpus: GPU %d is not in node %s's gpus list",
						 jd->gpus[i], nc->name);
	if (nc && !jd->ngpus && nc->has_gpus && jobdef_gpu_need(jd) > (long long)nc->ngpus)
		return xasprintf("gpu_count: node %s has only %zu eligible GPUs", nc->name,
				 nc->ngpus);
	if (!nc && !node_fits_any(&d->cfg, jd)) {
		/* Name a pinned index no node may use, when there is one. */
		for (size_t i = 0; i < jd->ngpus; i++) {
			size_t k = 0;

			while (k < d->cfg.nnodes && !gpu_eligible(&d->cfg.nodes[k], jd->gpus[i]))
				k++;
			if (k == d->cfg.nnodes)
				return xasprintf("gpus: no node may use GPU %d", jd->gpus[i]);
		}
		if (jd->ngpus)
			return strdup("gpus: no node may use all of the pinned GPUs");
		return xasprintf("gpu_count: no node has %lld eligible GPUs", jobdef_gpu_need(jd));
	}
	return NULL;
}

/* Job ID's dependencies are earlier jobs, each found in the spool
 * (one of the same batch is in incoming/ by now); a failure to look
 * is not held against the job. */
static char *dep_problem(struct daemon *d, const struct job_def *jd, long long id)
{
	struct cb_err err = { 0 };
	char *why;

	if (spool_deps_problem(&d->sp, jd, id, &why, &err) < 0)
		cb_err_free(&err);
	return why;
}

/*
 * Step 4 for S, in incoming/: its record, or the reason it is refused.
 * 1: S->j is the record to queue; 0: S is dealt with (rejected, or a
 * leftover of a crash removed).
 */
static int prepare(struct daemon *d, struct sub *s)
{
	struct cb_err err = { 0 };
	char *buf = NULL, *why;
	const char *orig = s->orig ? s->orig : s->in;
	size_t len;
	int bad = 0;
	struct stat st;

	if (record_exists(d, s->seq)) {
		/* The crash fell between writing the record and the unlink. */
		if (unlinkat(d->sp.dir[SD_INCOMING], s->in, 0) < 0 && errno != ENOENT)
			logmsg("incoming/%s: %s; left in place", s->in, strerror(errno));
		else
			logmsg("incoming/%s: job %lld has a record already; removed", s->in, s->seq);
		return 0;
	}
	/* What is not a regular file is refused unopened (LAYOUT.md §1):
	 * opening a device may do something; read_capped checks again. */
	if (fstatat(d->sp.dir[SD_INCOMING], s->in, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode))
		bad = S_ISLNK(st.st_mode) ? ELOOP : S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
	else if (read_capped(d->sp.dir[SD_INCOMING], s->in, JOBFILE_MAX, &buf, &len) < 0)
		bad = errno;
	if (bad) {
		why = xasprintf("%s", read_problem(bad));
		reject(d, s->in, s->seq, orig, why ? why : "unreadable");
		free(why);
		return 0;
	}
	if (jobdef_parse(buf, len, orig, &s->j.def, &err) < 0 ||
	    jobdef_check(&s->j.def, orig, &err) < 0) {
		/* The message names the file already; keep the rest of it. */
		reject(d, s->in, s->seq, orig, err.msg ? err.msg : "not a job file");
		cb_err_free(&err);
		free(buf);
		return 0;
	}
	free(buf);
	if ((why = placement_problem(d, &s->j.def)) || (why = dep_problem(d, &s->j.def, s->seq))) {
		reject(d, s->in, s->seq, orig, why);
		free(why);
		return 0;
	}
	s->j.id = s->seq;
	s->j.state = JS_QUEUED;
	s->j.priority = s->j.def.priority;
	s->j.submitted = s->j.queued_at = now_ms();
	s->j.reason = queued_reason(&s->j.def, now_ms());
	return s->j.reason ? 1 : 0;
}

/*
 * LAYOUT.md §5 steps 4-5 for the submissions V[0..N) in incoming/:
 * every record staged, then committed together (batch.c: the syncs of
 * one atomic_write for all), then the incoming/ files removed and the
 * jobs queued.  What could not be written stays in incoming/ (a full
 * disk: write_failed) and is taken again later.
 */
static int queue_incoming(struct daemon *d, struct sub *v, size_t n)
{
	struct cb_err err = { 0 };
	struct wbatch b = WBATCH_INIT;
	size_t done = 0;
	int r = 0;

	for (size_t i = 0; i < n; i++) {
		if (!v[i].in || prepare(d, &v[i]) < 1)
			continue;
		if (spool_stage(&d->sp, &b, &v[i].j, &err) < 0) {
			write_failed(d, err.ex, err.msg);
			cb_err_free(&err);
			r = -1;
			break;
		}
		v[i].staged = (int)b.n;
	}
	if (wbatch_commit(&b, d->sp.fd) < 0) {
		cb_err_sys(&err, spool_errno_ex(errno), "%s/queued", d->sp.path);
		write_failed(d, err.ex, err.msg);
		cb_err_free(&err);
		r = -1;
	} else if (b.n) {
		write_ok(d);
	}
	CRASH_POINT("accept: queued", NULL);
	/* Those renamed into queued/ (all, unless the commit failed). */
	for (size_t i = 0; i < n; i++) {
		struct qent *e = NULL;
		char *qname = NULL;

		if (v[i].staged && !b.v[v[i].staged - 1].tmp) {
			if (unlinkat(d->sp.dir[SD_INCOMING], v[i].in, 0) < 0)
				logmsg("incoming/%s: %s", v[i].in, strerror(errno));
			if (!(qname = name_queued(v[i].j.priority, v[i].j.id)) ||
			    !(e = qent_from_job(&v[i].j, qname)) || q_insert(d, e) < 0) {
				logmsg("job %lld: out of memory", v[i].j.id);
				qent_free(e);
				r = -1;
			}
			free(qname);
			done++;
		}
		job_free(&v[i].j);
	}
	if (done && fsync_dir(d->sp.dir[SD_INCOMING]) < 0)
		logmsg("incoming: %s", strerror(errno));
	if (done)
		d->dirty = 1;
	wbatch_free(&b);
	return r;
}

/* The recovery of incoming/ (start-up, a stalled spool): NAMES there. */
int accept_incoming(struct daemon *d, char *const *names, size_t n)
{
	struct sub *v = calloc(n ? n : 1, sizeof *v);
	size_t nv = 0;
	int r;

	if (!v)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (name_parse_plain(names[i], &v[nv].seq) == 0)
			v[nv++].in = names[i];
	r = queue_incoming(d, v, nv);
	free(v);
	return r;
}

