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

/* The blocks in incoming/ (a stalled spool leaves them there): the
 * IDs they hold, as [first, first + count). */
struct ranges {
	long long (*v)[2];
	size_t n;
};

static void incoming_blocks(struct daemon *d, struct ranges *rg)
{
	char **names;
	size_t n;

	memset(rg, 0, sizeof *rg);
	if (spool_list(&d->sp, SD_INCOMING, &names, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		long long first, count, (*v)[2];

		if (name_parse_block(names[i], &first, &count) < 0 ||
		    !(v = realloc(rg->v, (rg->n + 1) * sizeof *v)))
			continue;
		rg->v = v;
		rg->v[rg->n][0] = first;
		rg->v[rg->n++][1] = count;
	}
	spool_list_free(names, n);
}

/* Is there a record, or a job being accepted, for any of the COUNT
 * IDs from SEQ? */
static int block_exists(struct daemon *d, const struct ranges *rg, long long seq, long long count)
{
	for (size_t i = 0; i < rg->n; i++)
		if (seq < rg->v[i][0] + rg->v[i][1] && rg->v[i][0] < seq + count)
			return 1;
	for (long long m = 0; m < count; m++)
		if (job_exists(d, seq + m))
			return 1;
	return 0;
}

/*
 * One submission on its way from new/ (or incoming/) to queued/: one
 * job, or the block of an array or sweep (LAYOUT.md §2), whose COUNT
 * IDs from SEQ are its members'.
 */
struct sub {
	const char *orig;       /* the name it was dropped under */
	long long seq;          /* its (first) job ID; 0 while it needs fresh ones */
	long long count;        /* 1, or the block's members */
	int block;              /* a block's name (in incoming/: name_block) */
	int fresh;              /* claimed from new/ by this pass: none of its IDs
				   has a record (block_exists saw to a name's
				   own; seq's are above every ID handed out) */
	char *in;               /* its name in incoming/, once there */
	struct job *jobs;       /* its records, once made (NJOBS; those of a
				   block's members not queued yet) */
	size_t user;            /* a lab's: its owner, d->tally[user - 1], once read */
	size_t njobs;
	size_t staged;          /* index in the batch of the first + 1, or 0 */
};

static void sub_free_jobs(struct sub *s)
{
	for (size_t m = 0; m < s->njobs; m++)
		job_free(&s->jobs[m]);
	free(s->jobs);
	s->jobs = NULL;
	s->njobs = 0;
}

/* S's name in incoming/ under its ID(s). */
static char *incoming_name(const struct sub *s)
{
	return s->block ? name_block(s->seq, s->count) : name_plain(s->seq);
}

static int queue_incoming(struct daemon *d, struct sub *v, size_t n);

/* COUNT job IDs from seq, the first in *FIRST, the counter made at
 * least FLOOR first -- and, in a lab's spool, at least the highest ID
 * the daemon knows: a member may have written seq back (LAYOUT.md §15),
 * and a number it gives is above every record all the same. */
static int ids_block(struct daemon *d, long long floor, long long count, long long *first,
		     struct cb_err *err)
{
	if (d->cfg.lab && d->max_id > floor)
		floor = d->max_id;
	if (spool_seq_block(&d->sp, floor, count, first, err) < 0)
		return -1;
	if (*first + count - 1 > d->max_id)
		d->max_id = *first + count - 1;
	if (floor > d->max_id)
		d->max_id = floor;
	return 0;
}

/* No job ID could be taken (ERR).  A lab's seq.lock held by someone
 * (errno EWOULDBLOCK: any member can hold it, LAYOUT.md §15) is not a
 * stall: what needs IDs waits in new/ and is tried again shortly
 * (main.c), said once until it works; anything else is write_failed's. */
static void seq_failed(struct daemon *d, struct cb_err *err)
{
	if (errno == EWOULDBLOCK && d->cfg.lab) {
		if (!d->seq_busy)
			logmsg("%s; new/ waits", err->msg ? err->msg : "seq.lock: held");
		d->seq_busy = 1;
		d->accept_retry_at = mono_now() + ACCEPT_RETRY_MS;
	} else {
		write_failed(d, err->ex, err->msg);
	}
	cb_err_free(err);
}

/* Move S from new/ to incoming/ under its ID(s) -- fresh ones when its
 * name's own are taken there: 0, or -1 with errno (ENOENT: it is gone;
 * EAGAIN: no fresh ID, write_failed said why). */
static int claim(struct daemon *d, struct sub *s)
{
	struct cb_err err = { 0 };

	for (;;) {
		if (!s->seq && ids_block(d, 0, s->count, &s->seq, &err) < 0) {
			seq_failed(d, &err);
			errno = EAGAIN;
			return -1;
		}
		if (!(s->in = incoming_name(s)))
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
	struct ranges rg;
	int r = -1;

	if (!n)
		return 0;
	if (!v)
		return -1;
	incoming_blocks(d, &rg);
	for (size_t i = 0; i < n; i++) {
		long long count;
		int cls = name_classify_new(names[i], &prio, &seq, &count);

		if (cls < 0 || faccessat(d->sp.dir[SD_NEW], names[i], F_OK, AT_SYMLINK_NOFOLLOW) < 0)
			continue;       /* not ours, or already taken */
		v[nv].block = cls == 2;
		v[nv].count = count;
		if (cls > 0 && block_exists(d, &rg, seq, count))
			cls = 0;        /* a forged or copied name: fresh IDs */
		/* A lab member's name far past every ID given is no ID taken
		 * from seq: it would use up the IDs (LAYOUT.md §15). */
		if (cls > 0 && d->cfg.lab && seq + count - 1 > d->max_id + LAB_ID_SLACK)
			cls = 0;
		v[nv].orig = names[i];
		v[nv].fresh = 1;
		v[nv].seq = cls > 0 ? seq : 0;
		if (cls > 0 && seq + count - 1 > floor)
			floor = seq + count - 1;
		if (cls == 0)
			fresh += count;
		nv++;
	}
	if (nv && ids_block(d, floor, fresh, &first, &err) < 0) {
		seq_failed(d, &err);
		goto out;
	}
	d->seq_busy = 0;
	for (size_t i = 0; i < nv; i++) {
		if (!v[i].seq) {
			v[i].seq = first;
			first += v[i].count;
		}
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
	free(rg.v);
	return r;
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

/* How many of S's jobs have a record already (after a crash between
 * writing them and the unlink). */
static long long recorded(struct daemon *d, const struct sub *s)
{
	long long n = 0;

	for (long long m = 0; m < s->count; m++)
		n += record_exists(d, s->seq + m);
	return n;
}

/* S is dealt with already (every one of its jobs is recorded): the
 * file is removed. */
static void leftover(struct daemon *d, const struct sub *s)
{
	if (unlinkat(d->sp.dir[SD_INCOMING], s->in, 0) < 0 && errno != ENOENT)
		logmsg("incoming/%s: %s; left in place", s->in, strerror(errno));
	else
		logmsg("incoming/%s: job %lld has a record already; removed", s->in, s->seq);
}

/*
 * A file dropped under a name of its own whose job is an array or
 * sweep of N: it gets the block name of N fresh IDs (its own one
 * when N is 1), and its first name's ID is not used.  0, or -1 (left
 * as it was: taken again later).
 */
static int name_as_block(struct daemon *d, struct sub *s, long long n)
{
	struct cb_err err = { 0 };
	long long first = s->seq;
	char *bn;

	if (n > 1 && ids_block(d, 0, n, &first, &err) < 0) {
		seq_failed(d, &err);
		return -1;
	}
	if (!(bn = name_block(first, n)))
		return -1;
	if (move_noreplace(d->sp.dir[SD_INCOMING], s->in, d->sp.dir[SD_INCOMING], bn) < 0) {
		logmsg("incoming/%s: %s", s->in, strerror(errno));
		free(bn);
		return -1;
	}
	if (fsync_dir(d->sp.dir[SD_INCOMING]) < 0)
		logmsg("incoming: %s", strerror(errno));
	CRASH_POINT("accept: block named", NULL);
	free(s->in);
	s->in = bn;
	s->seq = first;
	s->count = n;
	s->block = 1;
	return 0;
}

/* The record of job ID queued now, defined by *DEF (taken over), owned
 * by OWNER (its name) and UID. */
static int new_record(struct job *j, long long id, struct job_def *def, const char *owner,
		      uid_t uid)
{
	long long now = now_ms();

	memset(j, 0, sizeof *j);
	j->def = *def;
	memset(def, 0, sizeof *def);
	j->id = id;
	j->state = JS_QUEUED;
	j->priority = j->def.priority;
	j->submitted = j->queued_at = now;
	j->owner_uid = (long long)uid;
	return -!((j->owner = strdup(owner)) && (j->reason = queued_reason(j, now)));
}

/* The name of account UID (the last one asked is remembered: a batch is
 * mostly one person's), or NULL. */
static const char *owner_name(struct daemon *d, uid_t uid)
{
	if (!d->owner_name || d->owner_uid != uid) {
		free(d->owner_name);
		d->owner_name = lab_user_name(uid);
		d->owner_uid = uid;
	}
	return d->owner_name;
}

/*
 * A lab's spool (LAYOUT.md §15): what makes a drop, as opened (ST),
 * unsafe to take as its owner's -- a hard link (another's file could be
 * made to look like yours), a file others could have written, an owner
 * who may not submit -- or NULL.  malloc'd.
 */
static char *drop_problem(struct daemon *d, const struct stat *st)
{
	const struct lab_conf *l = d->cfg.lab;

	if (st->st_nlink != 1)
		return xasprintf("a hard link (%lu links): refused in a lab's spool",
				 (unsigned long)st->st_nlink);
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return xasprintf("writable by group or others (mode %04o): refused in a lab's spool",
				 (unsigned)(st->st_mode & 07777));
	if (!lab_may_submit(l, d->lab_gid, st->st_uid, d->sp.uid))
		return xasprintf("owned by %s (uid %lu), who is not a member of group %s",
				 owner_name(d, st->st_uid), (unsigned long)st->st_uid, l->group);
	return NULL;
}

/* A lab's limits on S, a submission of COUNT jobs of priority PRIO by
 * S->user: NULL, or why it is refused (malloc'd).  Its jobs count as
 * its owner's from here (pending until they are queued). */
static char *limit_problem(const struct daemon *d, const struct sub *s, long long count,
			   long long prio)
{
	const struct tally *t = &d->tally[s->user - 1];
	const struct lab_limits *lim = t->lim;

	if (prio > lim->max_priority)
		return xasprintf("priority %lld is above %s's max_priority %lld", prio, t->name,
				 lim->max_priority);
	if (lim->max_queued != LAB_NONE && t->jobs + t->pending + count > lim->max_queued)
		return xasprintf("user limit: %s has %lld job%s not ended (max_queued %lld)", t->name,
				 t->jobs + t->pending, t->jobs + t->pending == 1 ? "" : "s",
				 lim->max_queued);
	return NULL;
}

/*
 * S's records, from JD (its file's definition) into S->jobs: one, or
 * those of the block's members that have none yet.  0; 1 with *WHY
 * (static text) when a member cannot be made; -1 out of memory.
 */
static int make_records(struct daemon *d, struct sub *s, struct job_def *jd, const char *owner,
			uid_t uid, const char **why)
{
	struct expander x;
	int r = -1;

	*why = NULL;
	if (!s->block) {
		if (!(s->jobs = calloc(1, sizeof *s->jobs)))
			return -1;
		s->njobs = 1;
		return new_record(&s->jobs[0], s->seq, jd, owner, uid);
	}
	if (expander_init(&x, jd, why) < 0)
		return *why ? 1 : -1;
	if ((long long)x.n != s->count) {
		*why = "its name holds another number of jobs than it makes";
		expander_free(&x);
		return 1;
	}
	if (!(s->jobs = calloc(x.n, sizeof *s->jobs)))
		goto out;
	for (size_t m = 0; m < x.n; m++) {
		struct job *j = &s->jobs[s->njobs];
		struct job_def md;
		long long idx;
		int k;

		if (!s->fresh && record_exists(d, s->seq + (long long)m))
			continue;       /* queued before a crash (recovery) */
		if ((k = expander_member(&x, m, s->seq, &md, &idx, why)) != 0) {
			r = k;
			goto out;
		}
		s->njobs++;
		if (new_record(j, s->seq + (long long)m, &md, owner, uid) < 0)
			goto out;
		j->array_id = s->seq;
		j->array_index = idx;
		j->max_running = x.limit;
		free(j->reason);
		if (!(j->reason = queued_reason(j, j->queued_at)))
			goto out;
	}
	r = 0;
out:
	expander_free(&x);
	return r;
}

/*
 * Step 4 for S, in incoming/: its records, or the reason it is
 * refused.  1: S->jobs are the records to queue; 0: S is dealt with
 * (rejected, a leftover of a crash removed) or waits.
 */
static int prepare(struct daemon *d, struct sub *s)
{
	struct cb_err err = { 0 };
	struct job_def jd;
	char *buf = NULL, *why = NULL;
	const char *orig = s->orig ? s->orig : s->in, *mwhy, *owner;
	size_t len;
	long long done = s->fresh ? 0 : recorded(d, s);
	/* A block some of whose members were queued before a crash is
	 * accepted already: the rest follow, whatever has changed. */
	int bad = 0, some = done > 0, k;
	struct tally *t = NULL;
	struct stat st;

	if (done == s->count) {
		leftover(d, s);
		return 0;
	}
	/* What is not a regular file is refused unopened (LAYOUT.md §1):
	 * opening a device may do something; read_capped checks again. */
	if (fstatat(d->sp.dir[SD_INCOMING], s->in, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode))
		bad = S_ISLNK(st.st_mode) ? ELOOP : S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
	else if (read_capped_stat(d->sp.dir[SD_INCOMING], s->in, JOBFILE_MAX, &buf, &len, &st) < 0)
		bad = errno;
	if (bad || (!some && d->cfg.lab && (why = drop_problem(d, &st)))) {
		if (bad)
			why = xasprintf("%s", read_problem(bad));
		reject(d, s->in, s->seq, orig, why ? why : "unreadable");
		free(why);
		free(buf);
		return 0;
	}
	if (!(owner = owner_name(d, st.st_uid)) ||
	    (d->cfg.lab && !(t = tally_of(d, (long long)st.st_uid, owner)))) {
		logmsg("incoming/%s: out of memory", s->in);
		free(buf);
		return 0;
	}
	s->user = t ? (size_t)(t - d->tally) + 1 : 0;
	if (jobdef_parse(buf, len, orig, &jd, &err) < 0 || jobdef_check(&jd, orig, &err) < 0) {
		/* The message names the file already; keep the rest of it. */
		reject(d, s->in, s->seq, orig, err.msg ? err.msg : "not a job file");
		cb_err_free(&err);
		free(buf);
		jobdef_free(&jd);       /* zeroed already when it did not parse */
		return 0;
	}
	free(buf);
	if (s->block != jobdef_is_many(&jd)) {
		struct expander x;

		if (s->block) {
			reject(d, s->in, s->seq, orig, "a block's name, but neither array nor params");
			goto dealt;
		}
		/* Checked by jobdef_check: only memory can fail. */
		if (expander_init(&x, &jd, &mwhy) < 0 || name_as_block(d, s, (long long)x.n) < 0) {
			expander_free(&x);
			goto dealt;
		}
		expander_free(&x);
	}
	if (!some && ((why = placement_problem(d, &jd)) || (why = dep_problem(d, &jd, s->seq)) ||
		      (s->user && (why = limit_problem(d, s, s->count, jd.priority))))) {
		reject(d, s->in, s->seq, orig, why);
		free(why);
		goto dealt;
	}
	if ((k = make_records(d, s, &jd, owner, st.st_uid, &mwhy)) != 0) {
		if (k > 0 && !some) {
			why = xasprintf("%s: %s", orig, mwhy);
			reject(d, s->in, s->seq, orig, why ? why : mwhy);
			free(why);
		} else {
			logmsg("incoming/%s: %s", s->in, k > 0 ? mwhy : strerror(ENOMEM));
		}
		sub_free_jobs(s);
		goto dealt;
	}
	jobdef_free(&jd);
	if (s->user)
		d->tally[s->user - 1].pending += (long long)s->njobs;
	return 1;
dealt:
	jobdef_free(&jd);
	return 0;
}

/*
 * LAYOUT.md §5 steps 4-5 for the submissions V[0..N) in incoming/:
 * every record staged (a block's members all in one batch), then
 * committed together (batch.c: the syncs of one atomic_write for
 * all), then the incoming/ files whose records are all in queued/
 * removed and the jobs queued.  What could not be written stays in
 * incoming/ (a full disk: write_failed) and is taken again later,
 * without the members queued already.
 */
static int queue_incoming(struct daemon *d, struct sub *v, size_t n)
{
	struct cb_err err = { 0 };
	struct wbatch b = WBATCH_INIT;
	size_t done = 0;
	int r = 0;

	b.spares = &d->spares;

	for (size_t i = 0; i < n && r == 0; i++) {
		if (!v[i].in || prepare(d, &v[i]) < 1)
			continue;
		v[i].staged = b.n + 1;
		for (size_t m = 0; m < v[i].njobs && r == 0; m++)
			if (spool_stage(&d->sp, &b, &v[i].jobs[m], &err) < 0) {
				write_failed(d, err.ex, err.msg);
				cb_err_free(&err);
				r = -1;
			}
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
		size_t in_queue = 0;

		for (size_t m = 0; v[i].staged && m < v[i].njobs; m++) {
			size_t at = v[i].staged - 1 + m;
			struct job *j = &v[i].jobs[m];
			struct qent *e = NULL;
			char *qname = NULL;

			if (at >= b.n || b.v[at].tmp)
				continue;
			in_queue++;
			if (!(qname = name_queued(j->priority, j->id)) ||
			    !(e = qent_from_job(d, j, qname)) || q_insert(d, e) < 0) {
				logmsg("job %lld: out of memory", j->id);
				qent_free(e);
				r = -1;
			}
			free(qname);
		}
		if (v[i].user)
			d->tally[v[i].user - 1].jobs += (long long)in_queue;
		/* Its inode a spare for the next records (batch.c). */
		if (v[i].staged && in_queue == v[i].njobs) {
			if (spares_keep(&d->spares, d->sp.dir[SD_TMP], d->sp.dir[SD_INCOMING], v[i].in) < 0)
				logmsg("incoming/%s: %s", v[i].in, strerror(errno));
			done++;
		}
		sub_free_jobs(&v[i]);
	}
	for (size_t u = 0; u < d->ntally; u++)
		d->tally[u].pending = 0;        /* queued (counted above), or not at all */
	if (done && fsync_dir(d->sp.dir[SD_INCOMING]) < 0)
		logmsg("incoming: %s", strerror(errno));
	else if (done)
		spares_settle(&d->spares, d->sp.dir[SD_INCOMING]);
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
	int r, c;

	if (!v)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if ((c = spool_pending_ids(SD_INCOMING, names[i], &v[nv].seq, &v[nv].count)) < 0)
			continue;
		v[nv].block = c;
		if (!(v[nv].in = strdup(names[i])))
			break;
		nv++;
	}
	r = queue_incoming(d, v, nv);
	for (size_t i = 0; i < nv; i++)
		free(v[i].in);
	free(v);
	return r;
}

