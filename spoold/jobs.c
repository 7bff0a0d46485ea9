/*
 * jobs.c - every transition of a job record, in one place.
 *
 *   new/ --accept--> queued --launch--> running --attempt ends--> done
 *                      ^  |                |
 *                      |  +--cancel--> done +--cards busy at launch--> queued
 *                      +--promote (rename within queued/)
 *
 * Each transition reads the record, changes it in memory, and writes it
 * with spool_put (new copy first, old name removed second: LAYOUT.md
 * §6).  The attempt ID is written into the record before the node is
 * asked to launch it, so a crash anywhere repeats the same launch,
 * which the worker answers idempotently (LAYOUT.md §8).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spoold.h"

static void set_str(char **dst, const char *src)
{
	char *s = src ? strdup(src) : NULL;

	free(*dst);
	*dst = s;
}

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
static void cancel_running(struct daemon *d, struct rent *e);
static void attempt_over(struct daemon *d, struct rent *e);

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

static const char *read_problem(int e)
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
	if ((why = placement_problem(d, &s->j.def))) {
		reject(d, s->in, s->seq, orig, why);
		free(why);
		return 0;
	}
	s->j.id = s->seq;
	s->j.state = JS_QUEUED;
	s->j.priority = s->j.def.priority;
	s->j.submitted = s->j.queued_at = now_ms();
	set_str(&s->j.reason, "waiting to be scheduled");
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

/* ---- launching --------------------------------------------------------- */

static int spec_add_job(struct wire_rec *w, const struct job *j, const struct attempt *a,
			const struct node *n)
{
	const struct node_conf *nc = n->conf;
	size_t known = 0;
	const struct job_def *def = &j->def;
	int r = wire_add(w, "attempt", a->id);
	int resume = j->checkpoint && def->resume_command;
	/* A resume runs resume_command: a list as its argv, a string by sh -c. */
	char *const *argv = resume ? def->resume_argv : def->argv;
	size_t argc = resume ? def->resume_argc : def->argc;

	for (size_t i = 0; argv && i < argc; i++)
		r |= wire_add(w, "arg", argv[i]);
	if (!argv)
		r |= wire_add(w, "shell", resume ? def->resume_command : def->shell);
	if (resume)
		r |= wire_add(w, "checkpoint", j->checkpoint);
	if (def->cwd)
		r |= wire_add(w, "cwd", def->cwd);
	for (size_t i = 0; i < def->nenv; i++)
		r |= wire_add(w, "env", def->env[i]);
	for (size_t i = 0; i < a->ngpus; i++) {
		r |= wire_addf(w, "gpu", "%d", a->gpus[i]);
		known += card_uuid(n, a->gpus[i]) != NULL;
	}
	/* The cards' UUIDs as the snapshot has them, all or none: the
	 * worker takes their leases at once and checks them in its one
	 * query (LAYOUT.md section 8, step 3). */
	for (size_t i = 0; known == a->ngpus && i < a->ngpus; i++)
		r |= wire_add(w, "uuid", card_uuid(n, a->gpus[i]));
	r |= wire_addf(w, "idle_mib", "%lld", nc->idle_mib);
	r |= wire_addf(w, "timeout", "%lld", def->timeout_seconds);
	r |= wire_addf(w, "grace", "%lld",
		       def->set & JF_GRACE ? def->checkpoint_grace_seconds : (long long)DEFAULT_GRACE);
	r |= wire_addf(w, "resumable", "%d", def->resume_command ? 1 : 0);
	return r ? -1 : 0;
}

static int load_running(struct daemon *d, long long id, struct job *j, char **name)
{
	struct cb_err err = { 0 };

	if (!(*name = name_plain(id)))
		return -1;
	if (spool_load(&d->sp, SD_RUNNING, *name, j, &err) < 0) {
		logmsg("%s", err.msg);
		cb_err_free(&err);
		free(*name);
		*name = NULL;
		return -1;
	}
	return 0;
}

/*
 * A spool write failed.  A temporary failure (EX_TEMPFAIL_: full disk,
 * quota, read-only spool) stalls the daemon (LAYOUT.md §9): one log
 * line for the whole episode, nothing launched, and every change waits
 * where it is -- the file in new/ or incoming/, the request in ctl/,
 * the record in running/ (the node keeps the attempt's final state) --
 * until main.c's probe finds the spool writable and catches up.
 */
void write_failed(struct daemon *d, int ex, const char *msg)
{
	if (ex != EX_TEMPFAIL_) {
		logmsg("%s", msg ? msg : "out of memory");
		return;
	}
	if (!d->stall_said)
		logmsg("cannot write the spool (%s): changes wait in place and are retried "
		       "until it can be written", msg ? msg : "?");
	d->stall_said = 1;
	d->stalled = 1;
	d->stalls++;
	d->stall_retry_at = mono_now() + STALL_RETRY_MS;
}

/* A spool write succeeded: the end of a stall, if there was one. */
void write_ok(struct daemon *d)
{
	if (d->stall_said)
		logmsg("the spool can be written again; catching up");
	d->stall_said = 0;
}

static int put(struct daemon *d, struct job *j, enum spool_dir from, const char *name)
{
	struct cb_err err = { 0 };

	if (spool_put(&d->sp, j, from, name, &err) == 0) {
		write_ok(d);
		return 0;
	}
	write_failed(d, err.ex, err.msg);
	cb_err_free(&err);
	return -1;
}

/* J, just written into queued/, joins the in-memory queue. */
static int enqueue(struct daemon *d, const struct job *j)
{
	char *qname = name_queued(j->priority, j->id);
	struct qent *q = qname ? qent_from_job(j, qname) : NULL;
	int r = q && q_insert(d, q) == 0 ? 0 : -1;

	if (r < 0) {
		logmsg("job %lld: out of memory", j->id);
		qent_free(q);
	}
	free(qname);
	d->dirty = 1;
	return r;
}

void note_waiting(struct daemon *d, struct qent *e, const char *why)
{
	struct cb_err err = { 0 };
	struct job j;
	char *r;

	if (e->never_noted)
		return;         /* once per queue entry: no read per pass */
	if (!(r = xasprintf("waiting: %s", why)))
		return;
	if (spool_load(&d->sp, SD_QUEUED, e->name, &j, &err) < 0) {
		logmsg("%s", err.msg ? err.msg : "out of memory");
		cb_err_free(&err);
		free(r);
		return;
	}
	if (!j.reason || strcmp(j.reason, r)) {
		free(j.reason);
		j.reason = r;
		r = NULL;
		if (put(d, &j, SD_QUEUED, e->name) == 0) {
			logmsg("job %lld: %s", j.id, j.reason);
			e->never_noted = 1;
		}
	} else {
		e->never_noted = 1;
	}
	free(r);
	job_free(&j);
}

/* The attempt did not start (cards busy, GPU query failed): back to
 * queued with its place kept (same priority, ID and queued_at). */
static int requeue(struct daemon *d, struct rent *e, const char *why)
{
	struct job j;
	struct attempt *a;
	char *name;
	int r = -1;

	if (load_running(d, e->id, &j, &name) < 0)
		return -1;
	a = job_last_attempt(&j);
	a->state = AS_ABORTED;
	set_str(&a->reason, why);
	j.state = JS_QUEUED;
	free(j.reason);
	j.reason = xasprintf("waiting: %s", why);
	if (put(d, &j, SD_RUNNING, name) < 0 || enqueue(d, &j) < 0)
		goto out;
	attempt_over(d, e);
	r = 0;
out:
	free(name);
	job_free(&j);
	return r;
}

/* Ask the node to launch E's current attempt (first time or again),
 * through its event stream, else by running the worker; the answer
 * comes to launch_answered.  Nothing waits for it. */
static int send_launch(struct daemon *d, struct rent *e)
{
	static const char *const args[] = { "launch", NULL };
	struct node *n = &d->nodes[e->node];
	struct wire_rec spec = { 0 };
	struct job j;
	char *name, *text = NULL;
	long len;
	int r = -1;

	if (e->asked || e->call.pid > 0)
		return 0;       /* asked already: its answer will come */
	if (load_running(d, e->id, &j, &name) < 0)
		return -1;
	if (spec_add_job(&spec, &j, job_last_attempt(&j), n) < 0 ||
	    (len = wire_format(&spec, &text)) < 0) {
		logmsg("job %lld: out of memory", e->id);
	} else if (stream_send(d, n, "launch", text, (size_t)len) == 0) {
		e->asked = 1;
		e->asked_at = mono_now();
		r = 0;
	} else {
		r = acall_start_input(d, n, &e->call, args, text, (size_t)len, NODE_CALL_MS);
	}
	CRASH_POINT("launch: sent", NULL);
	wire_free(&spec);
	free(text);
	free(name);
	job_free(&j);
	return r;
}

/* E's launch has failed for good (the worker refused its spec). */
static int launch_refused(struct daemon *d, struct rent *e, const char *err)
{
	struct job j;
	struct attempt *a;
	char *name, *msg = xasprintf("launch refused: %s", *err ? err : "bad spec");
	int r = -1;

	if (!msg || load_running(d, e->id, &j, &name) < 0) {
		free(msg);
		return -1;
	}
	a = job_last_attempt(&j);
	a->state = AS_FAILED;
	set_str(&a->reason, msg);
	a->finished = now_ms();
	j.state = JS_FAILED;
	set_str(&j.reason, msg);
	j.finished = a->finished;
	if ((r = put(d, &j, SD_RUNNING, name)) == 0)
		attempt_over(d, e);
	free(msg);
	free(name);
	job_free(&j);
	return r;
}

int launch_answered(struct daemon *d, struct rent *e, struct node_reply *rep)
{
	struct node *n = &d->nodes[e->node];
	struct wire_rec w = { 0 };
	const char *why;
	int r = 0;

	CRASH_POINT("launch: node answered", NULL);
	if (rep->status == 0 || rep->status == EX_TEMPFAIL_ || rep->status == EX_UNAVAILABLE_)
		wire_parse(rep->out, rep->outlen, &w, &why);
	if (rep->status != 0)
		n->fresh = n->handoff = 0;      /* our picture of its cards was wrong */
	switch (rep->status) {
	case 0:
		node_ok(d, e->node);
		r = apply_attempt(d, e, &w);
		break;
	case EX_TEMPFAIL_:      /* busy: nothing was started, no trace left */
	case EX_UNAVAILABLE_:   /* nvidia-smi failed on the node: the same */
		node_ok(d, e->node);
		why = wire_get(&w, "reason");
		if (!why || !*why)
			why = *rep->err ? rep->err : "cards busy at launch";
		logmsg("job %lld: not started on %s: %s", e->id, n->conf->name, why);
		r = requeue(d, e, why);
		break;
	case EX_DATAERR_:       /* the worker refused the spec: final */
		node_ok(d, e->node);
		r = launch_refused(d, e, rep->err);
		break;
	default:
		/* Transport failure, lost reply, timeout: the attempt stays
		 * "launching" and the same launch is sent again later. */
		node_failed(d, e->node, *rep->err ? rep->err : "launch failed");
		break;
	}
	wire_free(&w);
	return r;
}

int launch(struct daemon *d, struct qent *e, size_t node, const int *gpus, size_t ngpus)
{
	struct job j;
	struct attempt *a;
	struct cb_err err = { 0 };
	struct rent *re;
	char *qname = e->name;
	int r = -1;

	if (spool_load(&d->sp, SD_QUEUED, qname, &j, &err) < 0) {
		logmsg("%s", err.msg);
		cb_err_free(&err);
		return -1;
	}
	if (!(a = job_new_attempt(&j)) || !(a->id = attempt_id(d->sp.id, j.id, a->n)) ||
	    !(a->node = strdup(d->nodes[node].conf->name)) ||
	    (ngpus && !(a->gpus = malloc(ngpus * sizeof *gpus))))
		goto out;
	if (ngpus)
		memcpy(a->gpus, gpus, ngpus * sizeof *gpus);
	a->ngpus = ngpus;
	a->state = AS_LAUNCHING;
	j.state = JS_RUNNING;
	free(j.reason);
	j.reason = xasprintf("launching on %s", a->node);
	/* The attempt ID is on disk before the node hears of it. */
	if (put(d, &j, SD_QUEUED, qname) < 0)
		goto out;
	if (r_add(d, j.id, a->id, node, 1) < 0)
		goto out;
	q_remove(d, e);
	qent_free(e);
	re = &d->r[d->nr - 1];
	logmsg("job %lld: attempt %s on %s", j.id, a->id, a->node);
	CRASH_POINT("launch: attempt recorded", NULL);
	r = send_launch(d, re);
out:
	job_free(&j);
	return r;
}

/* ---- attempt state from the node ---------------------------------------- */

static int set_uuids(struct attempt *a, const struct wire_rec *w)
{
	size_t n = 0;

	for (size_t i = 0; i < w->n; i++)
		if (!strcmp(w->f[i].key, "uuid"))
			n++;
	if (!n)
		return 0;
	for (size_t i = 0; i < a->nuuids; i++)
		free(a->uuids[i]);
	free(a->uuids);
	a->nuuids = 0;
	if (!(a->uuids = calloc(n, sizeof *a->uuids)))
		return -1;
	for (size_t i = 0; i < w->n; i++)
		if (!strcmp(w->f[i].key, "uuid") && !(a->uuids[a->nuuids++] = strdup(w->f[i].val)))
			return -1;
	return 0;
}

/* The job state an attempt state leads to (AGENTS.md, the state table). */
static enum job_state job_state_of(enum att_state as, int at_time_limit)
{
	switch (as) {
	case AS_LAUNCHING:
	case AS_RUNNING:
		return JS_RUNNING;
	case AS_PAUSING:
		return JS_PAUSING;
	case AS_PAUSED:
		return at_time_limit ? JS_QUEUED : JS_PAUSED;
	case AS_SUCCEEDED:
		return JS_SUCCEEDED;
	case AS_CANCELLED:
		return JS_CANCELLED;
	case AS_LOST:
		return JS_LOST;
	default:
		return JS_FAILED;
	}
}

/*
 * The node's word on E's attempt (a state record from launch, status
 * or watch).  Writes the record only when something changed.
 */
int apply_attempt(struct daemon *d, struct rent *e, const struct wire_rec *w)
{
	const char *st = wire_get(w, "state"), *reason = wire_get(w, "reason");
	enum att_state as;
	enum job_state js;
	struct attempt *a;
	struct job j;
	char *name;
	long long v;
	int r = 0;

	if (!st)
		return 0;
	if (!strcmp(st, "unknown")) {
		if (e->launching)
			return send_launch(d, e);   /* never reached the node: again */
		st = "lost";
		reason = "the node has no record of this attempt";
	}
	/* "starting" does not confirm a launch: without a state file it is
	 * a launcher still checking the cards (status and a second launch
	 * say so while it holds the lock), which may yet answer busy or
	 * "nvidia-smi failed" and remove the attempt.  Taken as running,
	 * that attempt would then be "unknown" and wrongly lost; kept
	 * launching, it is launched again (LAYOUT.md §8 step 7). */
	if (!strcmp(st, "starting"))
		return 0;
	if (!strcmp(st, "running"))
		as = AS_RUNNING;
	else if (!strcmp(st, "pausing"))
		as = AS_PAUSING;
	else if (att_state_parse(st, &as) < 0 || as == AS_LAUNCHING || as == AS_ABORTED)
		return 0;       /* "busy" and the like never reach here */
	if (load_running(d, e->id, &j, &name) < 0)
		return -1;
	a = job_last_attempt(&j);
	if (!a || strcmp(a->id, e->aid)) {
		free(name);
		job_free(&j);
		return 0;
	}
	if (a->state == as && (as == AS_RUNNING || as == AS_PAUSING) && a->started) {
		e->launching = 0;
		free(name);
		job_free(&j);
		return 0;       /* nothing new */
	}
	a->state = as;
	e->launching = 0;
	if (set_uuids(a, w) < 0)
		r = -1;
	if (wire_get_ll(w, "started", &v) == 0)
		a->started = v;
	if (wire_get_ll(w, "finished", &v) == 0)
		a->finished = v;
	if (wire_get_ll(w, "exit_code", &v) == 0) {
		a->exit_code = v;
		a->has_exit = 1;
	}
	if (reason)
		set_str(&a->reason, reason);
	if (wire_get(w, "log"))
		set_str(&a->log, wire_get(w, "log"));
	if (wire_get(w, "checkpoint"))
		set_str(&a->checkpoint, wire_get(w, "checkpoint"));
	js = job_state_of(as, wire_get_ll(w, "timeout", &v) == 0 && v == 1);
	j.state = js;
	free(j.reason);
	j.reason = NULL;
	switch (js) {
	case JS_RUNNING:
		j.started = a->started ? a->started : now_ms();
		j.reason = xasprintf("running on %s", a->node);
		break;
	case JS_PAUSING:
		j.reason = strdup(a->reason ? a->reason : "pause requested");
		break;
	case JS_PAUSED:
	case JS_QUEUED:         /* paused at its time limit: resumes by itself */
		set_str(&j.checkpoint, a->checkpoint);
		set_str(&j.checkpoint_node, a->node);
		j.reason = js == JS_PAUSED ?
			   xasprintf("checkpoint saved on %s; cardbaton resume continues it", a->node) :
			   xasprintf("time limit reached, checkpoint saved; resumes on %s", a->node);
		break;
	default:
		j.reason = js == JS_CANCELLED ? strdup("cancelled by user") :
			   a->reason ? strdup(a->reason) :
			   js == JS_SUCCEEDED ? strdup("exit status 0") : strdup(st);
		break;
	}
	if (js != JS_RUNNING && js != JS_PAUSING) {
		if (!a->finished)
			a->finished = now_ms();
		if (job_state_final(js))
			j.finished = a->finished;
		cards_freed(d, &d->nodes[e->node], a->id);
		d->dirty = 1;
	}
	if (put(d, &j, SD_RUNNING, name) < 0) {
		r = -1;
	} else {
		logmsg("job %lld: %s%s%s", j.id, job_state_name(js), j.reason ? ": " : "",
		       j.reason ? j.reason : "");
		/* Queued again before the attempt is let go: a cancel kept
		 * for it then finds the job in the queue. */
		if (js == JS_QUEUED && enqueue(d, &j) < 0)
			r = -1;
		if (js != JS_RUNNING && js != JS_PAUSING)
			attempt_over(d, e);
	}
	free(name);
	job_free(&j);
	return r;
}

/* Ask NODE about every attempt the daemon believes runs there; the
 * answer comes to reconcile_done. */
int reconcile_node(struct daemon *d, size_t node)
{
	struct node *n = &d->nodes[node];
	const char **args;
	size_t k = 0;
	int r;

	if (n->check.pid > 0)
		return 0;
	for (size_t i = 0; i < d->nr; i++)
		if (d->r[i].node == node && d->r[i].cancel)
			cancel_running(d, &d->r[i]);    /* kept: not yet heard */
	if (!(args = calloc(d->nr + 2, sizeof *args)))
		return -1;
	args[k++] = "status";
	for (size_t i = 0; i < d->nr; i++)
		if (d->r[i].node == node)
			args[k++] = d->r[i].aid;
	r = k == 1 ? 0 : acall_start(d, n, &n->check, args, NODE_QUERY_MS);
	free(args);
	return r;
}

void reconcile_done(struct daemon *d, size_t node, int status)
{
	struct sbuf *b = &d->nodes[node].check.buf;
	size_t off = 0;

	if (status != 0) {
		node_failed(d, node, status == 255 ? "cannot reach the node over ssh" :
			    "cardbaton-worker status failed");
		return;
	}
	node_ok(d, node);
	while (off < b->len) {
		struct wire_rec w = { 0 };
		const char *why, *aid;
		long used = wire_parse(b->s + off, b->len - off, &w, &why);
		struct rent *e;

		if (used <= 0) {
			wire_free(&w);
			break;
		}
		off += (size_t)used;
		if ((aid = wire_get(&w, "attempt")) && (e = r_find_aid(d, aid)))
			apply_attempt(d, e, &w);
		wire_free(&w);
	}
}

/* nodes/NAME.json, for `status` (LAYOUT.md §1). */
static void node_record(struct daemon *d, struct node *n)
{
	struct node_status ns = { (char *)n->conf->name, n->reachable, n->error, now_ms() };
	struct cb_err err = { 0 };

	if (spool_node_put(&d->sp, &ns, &err) < 0) {
		write_failed(d, err.ex, err.msg);
		/* A full disk: node_ok writes it again.  Anything else (a
		 * stray directory in its place) is said once, and tried
		 * again at the node's next change. */
		n->recorded = err.ex != EX_TEMPFAIL_;
		cb_err_free(&err);
		return;
	}
	write_ok(d);
	n->recorded = 1;
}

void node_failed(struct daemon *d, size_t node, const char *why)
{
	struct node *n = &d->nodes[node];
	size_t len = strcspn(why, "\n");

	int changed = n->reachable || !n->error || strncmp(n->error, why, len) || n->error[len];

	if (changed)
		logmsg("node %s unreachable: %.*s", n->conf->name, (int)len, why);
	n->reachable = 0;
	free(n->error);
	n->error = strndup(why, len);
	if (changed)
		node_record(d, n);
	n->backoff = n->backoff ? n->backoff * 2 : BACKOFF_MIN_MS;
	if (n->backoff > BACKOFF_MAX_MS)
		n->backoff = BACKOFF_MAX_MS;
	n->retry_at = mono_now() + n->backoff;
	n->fresh = n->handoff = 0;
}

void node_ok(struct daemon *d, size_t node)
{
	struct node *n = &d->nodes[node];

	int changed = !n->reachable || !n->recorded;

	if (!n->reachable)
		logmsg("node %s reachable", n->conf->name);
	n->reachable = 1;
	n->worker_seen = 1;     /* whatever answered was the worker */
	free(n->error);
	n->error = NULL;
	n->backoff = 0;
	n->retry_at = 0;
	if (changed)
		node_record(d, n);
}

/* ---- control requests ------------------------------------------------ */

static void cancel_running(struct daemon *d, struct rent *e)
{
	const char *args[] = { "cancel", e->aid, NULL };
	pid_t pid = fork();
	int out, status;

	/* The worker stops the process group and waits for its end, which
	 * arrives here as an event: nobody waits for its reply.  A child
	 * starts it and exits at once, so init reaps it, not us. */
	if (pid == 0) {
		if (node_spawn(&d->cfg, d->nodes[e->node].conf, args, NULL, &out) < 0)
			_exit(1);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
		logmsg("job %lld: cancel: could not ask the node", e->id);
	CRASH_POINT("cancel: node asked", NULL);
}

/*
 * E's attempt is over (its record says how): the calls about it stop,
 * and a cancel request kept for it is done with, or applied to what
 * the job is now.  E is gone after this.
 */
static void attempt_over(struct daemon *d, struct rent *e)
{
	long long id = e->id;
	char *cancel = e->cancel;

	acall_free(&e->call);
	acall_free(&e->pause);
	e->cancel = NULL;
	r_remove(d, e);
	if (cancel)
		cancel_after_attempt(d, id, cancel);
	free(cancel);
}

/* Ask the node to have E's job checkpoint; pause_answered makes it
 * `pausing` when the worker has created the pause file. */
static void pause_running(struct daemon *d, struct rent *e)
{
	const char *args[] = { "pause", e->aid, NULL };
	struct job j;
	char *name;

	if (load_running(d, e->id, &j, &name) < 0)
		return;
	if (!j.def.resume_command)
		logmsg("job %lld: pause: not resumable (no resume_command)", e->id);
	else if (e->pause.pid > 0)
		logmsg("job %lld: pause: asked already", e->id);
	else
		acall_start(d, &d->nodes[e->node], &e->pause, args, NODE_QUERY_MS);
	free(name);
	job_free(&j);
}

void pause_answered(struct daemon *d, struct rent *e, int status)
{
	struct sbuf *err = &e->pause.ebuf;
	struct job j;
	char *name;

	if (status != 0) {
		logmsg("job %lld: pause: the worker said %d: %.*s", e->id, status,
		       (int)strcspn(err->s ? err->s : "", "\n"), err->s ? err->s : "");
		return;
	}
	CRASH_POINT("pause: node asked", NULL);
	if (load_running(d, e->id, &j, &name) < 0)
		return;
	if (j.state == JS_RUNNING) {
		j.state = JS_PAUSING;
		job_last_attempt(&j)->state = AS_PAUSING;
		set_str(&j.reason, "pause requested");
		if (put(d, &j, SD_RUNNING, name) == 0)
			logmsg("job %lld: pausing", e->id);
	}
	free(name);
	job_free(&j);
}

/* A paused job goes back to the queue, to resume on the node that
 * holds its checkpoint (qent_from_job pins it there). */
static void resume_paused(struct daemon *d, const char *name)
{
	struct cb_err err = { 0 };
	struct job j;

	if (spool_load(&d->sp, SD_PAUSED, name, &j, &err) < 0) {
		logmsg("%s", err.msg);
		cb_err_free(&err);
		return;
	}
	j.state = JS_QUEUED;
	j.queued_at = now_ms();
	free(j.reason);
	j.reason = xasprintf("resuming on %s", j.checkpoint_node ? j.checkpoint_node : "its node");
	if (put(d, &j, SD_PAUSED, name) == 0 && enqueue(d, &j) == 0)
		logmsg("job %lld: resumed: queued for %s", j.id,
		       j.checkpoint_node ? j.checkpoint_node : "its node");
	job_free(&j);
}

static int finish_unstarted(struct daemon *d, enum spool_dir dir, const char *name,
			    const char *why)
{
	struct cb_err err = { 0 };
	struct job j;
	int r;

	if (spool_load(&d->sp, dir, name, &j, &err) < 0) {
		logmsg("%s", err.msg);
		cb_err_free(&err);
		return -1;
	}
	j.state = JS_CANCELLED;
	set_str(&j.reason, why);
	j.finished = now_ms();
	r = put(d, &j, dir, name);
	if (r == 0)
		logmsg("job %lld: cancelled", j.id);
	job_free(&j);
	return r;
}

static int promote(struct daemon *d, struct qent *e, long long arg)
{
	struct cb_err err = { 0 };
	struct job j;
	long long prio = arg;
	char *old = e->name, *qname;

	if (arg == CTL_NO_ARG) {
		long long top = PRIO_MIN - 1;

		for (size_t i = 0; i < d->nq; i++)
			if (d->q[i] != e && d->q[i]->prio > top)
				top = d->q[i]->prio;
		prio = top >= e->prio ? top + 1 : e->prio;
		if (prio > PRIO_MAX)
			prio = PRIO_MAX;
	}
	if (prio == e->prio)
		return 0;
	if (spool_load(&d->sp, SD_QUEUED, old, &j, &err) < 0) {
		logmsg("%s", err.msg);
		cb_err_free(&err);
		return -1;
	}
	j.priority = prio;
	if (put(d, &j, SD_QUEUED, old) < 0 || !(qname = name_queued(prio, j.id))) {
		job_free(&j);
		return -1;
	}
	logmsg("job %lld: priority %lld -> %lld", j.id, e->prio, prio);
	e->prio = prio;
	e->name = qname;
	free(old);
	q_reposition(d, e);
	d->dirty = 1;
	job_free(&j);
	return 0;
}

/* Job ID's attempt is over, and REQ, a cancel request kept for it
 * (apply_ctl), is still in ctl/: done with, or -- the job is back in
 * the queue or paused -- applied to what the job is now. */
void cancel_after_attempt(struct daemon *d, long long id, const char *req)
{
	char *pn = name_plain(id);

	if (q_find(d, id) || (pn && faccessat(d->sp.dir[SD_PAUSED], pn, F_OK, AT_SYMLINK_NOFOLLOW) == 0))
		apply_ctl(d, req);
	else if (unlinkat(d->sp.dir[SD_CTL], req, 0) < 0 && errno != ENOENT)
		logmsg("ctl/%s: %s", req, strerror(errno));
	free(pn);
}

int apply_ctl(struct daemon *d, const char *name)
{
	long long id, arg = CTL_NO_ARG;
	enum ctl_op op;
	char *buf = NULL, *pn;
	size_t len;
	struct qent *qe;
	struct rent *re;
	unsigned long stalls = d->stalls;
	struct stat st;
	int keep = 0;

	if (name[0] == '.')
		return 0;
	/* Not a request, and not removable by unlink: left, said once a scan. */
	if (fstatat(d->sp.dir[SD_CTL], name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
		logmsg("ctl/%s: is a directory; ignored", name);
		return 0;
	}
	if (ctl_parse_name(name, &id, &op) < 0) {
		logmsg("ctl/%s: not a control request; removed", name);
		goto done;
	}
	if (read_capped(d->sp.dir[SD_CTL], name, 4096, &buf, &len) < 0) {
		if (errno == ENOENT)
			return 0;
		logmsg("ctl/%s: %s; removed", name, read_problem(errno));
		goto done;
	}
	if (op == CTL_PROMOTE && len) {
		if (buf[len - 1] == '\n')
			buf[len - 1] = '\0';
		if (strncmp(buf, "priority ", 9) || parse_ll(buf + 9, PRIO_MIN, PRIO_MAX, &arg) < 0) {
			logmsg("ctl/%s: bad content; removed", name);
			goto done;
		}
	}
	qe = q_find(d, id);
	re = r_find(d, id);
	pn = name_plain(id);
	switch (op) {
	case CTL_CANCEL:
		if (qe) {
			if (finish_unstarted(d, SD_QUEUED, qe->name, "cancelled by user") == 0) {
				q_remove(d, qe);
				qent_free(qe);
			}
		} else if (re) {
			/* Kept until the attempt ends, and sent again with
			 * every reconcile: a node cut off now hears it later. */
			cancel_running(d, re);
			if (!re->cancel)
				re->cancel = strdup(name);
			keep = re->cancel && !strcmp(re->cancel, name);
		} else if (pn && faccessat(d->sp.dir[SD_PAUSED], pn, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
			finish_unstarted(d, SD_PAUSED, pn, "cancelled by user");
		} else {
			logmsg("job %lld: cancel: not queued, running or paused", id);
		}
		break;
	case CTL_PROMOTE:
		if (qe)
			promote(d, qe, arg);
		else
			logmsg("job %lld: promote: not queued", id);
		break;
	case CTL_PAUSE:
		if (re)
			pause_running(d, re);
		else
			logmsg("job %lld: pause: not running", id);
		break;
	case CTL_RESUME:
		if (pn && faccessat(d->sp.dir[SD_PAUSED], pn, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
			resume_paused(d, pn);
		else
			logmsg("job %lld: resume: not paused", id);
		break;
	default:
		break;
	}
	free(pn);
	CRASH_POINT("ctl: applied", ctl_op_name[op]);
done:
	free(buf);
	if (d->stalls != stalls)
		return 0;       /* the spool could not be written: kept, retried */
	if (!keep && unlinkat(d->sp.dir[SD_CTL], name, 0) < 0 && errno != ENOENT)
		logmsg("ctl/%s: %s", name, strerror(errno));
	return 0;
}
