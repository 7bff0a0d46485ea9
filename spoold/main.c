/*
 * cardbaton-spoold - the CardBaton daemon (also `cardbaton run`).
 *
 * Design.  The spool is the interface and the truth; this process is a
 * cache of it plus a loop that moves jobs along:
 *
 *   - one daemon per spool, by flock on SPOOL/lock;
 *   - inotify on new/ and ctl/ is only a doorbell: each event names a
 *     file that is then looked at afresh, and a queue overflow means
 *     "re-read both directories";
 *   - at start-up everything is re-read (LAYOUT.md §9 recovery), and
 *     every attempt the records say is running is asked about before
 *     anything new is launched;
 *   - each node runs one `cardbaton-worker watch`, whose output tells
 *     the moment an attempt ends; the freed cards go to the next job
 *     in the same loop iteration (no polling interval in that path);
 *   - a reconcile every RECONCILE_MS asks each node about its running
 *     attempts: the safety net that finds lost workers and missed
 *     events;
 *   - while GPU jobs wait, cards are re-read every GPU_POLL_MS, because
 *     processes outside the queue come and go without telling anyone.
 *
 * Everything blocks for at most one node call, and every node call
 * has its own deadline (spool-layout/node.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spoold.h"

#define TMP_MAX_AGE (36 * 3600)

static const char *prog = "cardbaton-spoold";

void logmsg(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

long long mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void usage(FILE *fp)
{
	fprintf(fp, "usage: %s [--config PATH] [--once] [--public-key PUB]\n", prog);
}

static void die_err(struct cb_err *err)
{
	fprintf(stderr, "%s: %s\n", prog, err->msg ? err->msg : strerror(ENOMEM));
	exit(err->ex ? err->ex : EX_SOFTWARE_);
}

/* ---- start-up recovery (LAYOUT.md §9) -------------------------------- */

static const char *stray_kind(const struct stat *st)
{
	return S_ISLNK(st->st_mode) ? "is a symbolic link (not followed)" :
	       S_ISDIR(st->st_mode) ? "is a directory" : "is not a regular file";
}

/* Does the temp file NAME (".PID.…", atomic_write and batch.c) belong
 * to a process that is gone?  A writer that crashed left it; one still
 * running (a tool in the middle of a write) keeps it. */
static int writer_gone(const char *name)
{
	char *end;
	long pid;

	if (name[0] != '.')
		return 0;
	errno = 0;
	pid = strtol(name + 1, &end, 10);
	if (errno || end == name + 1 || *end != '.' || pid <= 0 || pid == (long)getpid())
		return 0;
	return kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

/* Start-up: temp files of writers that died (a crash mid-write), and
 * any older than TMP_MAX_AGE, are removed; tmp/ holds nothing else. */
static void clean_tmp(struct daemon *d)
{
	struct stat st;
	time_t now = time(NULL);
	int fd = d->sp.dir[SD_TMP];
	DIR *dir;
	struct dirent *e;

	/* Temp files start with '.', which spool_list skips: read raw. */
	if ((fd = dup(fd)) < 0 || !(dir = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(dir))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (!S_ISREG(st.st_mode))       /* no writer makes these */
			logmsg("%s/tmp/%s: %s; ignored", d->sp.path, e->d_name, stray_kind(&st));
		else if (now - st.st_mtime > TMP_MAX_AGE || writer_gone(e->d_name))
			unlinkat(dirfd(dir), e->d_name, 0);
	}
	closedir(dir);
}

/* rejected/NAME is a submission the daemon refused (it may be anything
 * that was dropped into new/): its NAME.reason is beside it. */
static int has_reason(struct daemon *d, const char *name)
{
	size_t n = strlen(name);
	char *r;
	int found;

	if (n < 4 || strcmp(name + n - 4, ".job") || !(r = xasprintf("%.*s.reason", (int)(n - 4), name)))
		return 0;
	found = faccessat(d->sp.dir[SD_REJECTED], r, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
	free(r);
	return found;
}

/*
 * Symbolic links, directories, FIFOs... where only the daemon's
 * regular files belong (paused/ done/ nodes/, and rejected/ but for
 * refused submissions; queued/ and running/ are read, and said, by
 * load_records): one line each at start-up, and they are left alone --
 * never followed, never opened.
 */
static void warn_strays(struct daemon *d)
{
	static const enum spool_dir dirs[] = { SD_PAUSED, SD_DONE, SD_REJECTED, SD_NODES };

	for (size_t k = 0; k < sizeof dirs / sizeof dirs[0]; k++) {
		int fd = dup(d->sp.dir[dirs[k]]);
		DIR *dir;
		struct dirent *e;

		/* Raw readdir: d_type spares a stat per record of the history. */
		if (fd < 0 || !(dir = fdopendir(fd))) {
			logmsg("%s/%s: %s", d->sp.path, spool_dir_name[dirs[k]], strerror(errno));
			if (fd >= 0)
				close(fd);
			continue;
		}
		rewinddir(dir);
		while ((e = readdir(dir))) {
			struct stat st;

			if (e->d_name[0] == '.' || e->d_type == DT_REG)
				continue;
			if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    !S_ISREG(st.st_mode) && !(dirs[k] == SD_REJECTED && has_reason(d, e->d_name)))
				logmsg("%s/%s/%s: %s; ignored", d->sp.path, spool_dir_name[dirs[k]],
				       e->d_name, stray_kind(&st));
		}
		closedir(dir);
	}
}

struct rec_name {
	long long id;
	enum spool_dir dir;
	char *name;
};

static int cmp_rec(const void *a, const void *b)
{
	const struct rec_name *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

static int is_regular(struct daemon *d, const struct rec_name *r)
{
	struct stat st;

	return fstatat(d->sp.dir[r->dir], r->name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       S_ISREG(st.st_mode);
}

/* Two records of one ID: keep the higher rev (LAYOUT.md §6). */
static void dedupe(struct daemon *d)
{
	static const enum spool_dir dirs[] = { SD_QUEUED, SD_RUNNING, SD_PAUSED, SD_DONE };
	struct rec_name *v = NULL;
	size_t nv = 0, cap = 0;

	for (size_t k = 0; k < 4; k++) {
		char **names;
		size_t n;

		if (spool_list(&d->sp, dirs[k], &names, &n) < 0) {
			logmsg("%s/%s: %s", d->sp.path, spool_dir_name[dirs[k]], strerror(errno));
			continue;
		}
		for (size_t i = 0; i < n; i++) {
			long long prio, id;

			if ((dirs[k] == SD_QUEUED ? name_parse_queued(names[i], &prio, &id)
						  : name_parse_plain(names[i], &id)) < 0)
				continue;
			if (nv == cap) {
				struct rec_name *nvp = realloc(v, (cap = cap ? cap * 2 : 1024) * sizeof *v);

				if (!nvp)
					break;
				v = nvp;
			}
			v[nv].id = id;
			v[nv].dir = dirs[k];
			v[nv].name = names[i];
			names[i] = NULL;
			nv++;
		}
		spool_list_free(names, n);
	}
	if (nv)
		qsort(v, nv, sizeof *v, cmp_rec);
	for (size_t i = 0; i + 1 < nv; i++) {
		struct job a, b;
		struct cb_err err = { 0 };
		struct rec_name *x = &v[i], *y = &v[i + 1];

		if (x->id != y->id)
			continue;
		/* A stray (a symlink, directory...) is no record, and is said
		 * elsewhere (warn_strays, load_records): the other copy goes
		 * on to i + 1, to meet a third, if any. */
		if (!is_regular(d, y)) {
			struct rec_name t = *x;

			*x = *y;
			*y = t;
			continue;
		}
		if (!is_regular(d, x))
			continue;
		if (spool_load(&d->sp, x->dir, x->name, &a, &err) < 0) {
			logmsg("%s", err.msg);
			cb_err_free(&err);
			continue;
		}
		if (spool_load(&d->sp, y->dir, y->name, &b, &err) < 0) {
			logmsg("%s", err.msg);
			cb_err_free(&err);
			job_free(&a);
			continue;
		}
		{
			struct rec_name *loser = a.rev >= b.rev ? y : x;

			logmsg("job %lld: two records after a crash; keeping %s/%s", x->id,
			       spool_dir_name[loser == y ? x->dir : y->dir],
			       loser == y ? x->name : y->name);
			if (unlinkat(d->sp.dir[loser->dir], loser->name, 0) < 0)
				logmsg("%s: %s", loser->name, strerror(errno));
			else
				fsync_dir(d->sp.dir[loser->dir]);
			/* The survivor moves to i + 1 to meet a third copy, if any. */
			if (loser == y) {
				struct rec_name t = *x;

				*x = *y;
				*y = t;
			}
		}
		job_free(&a);
		job_free(&b);
	}
	for (size_t i = 0; i < nv; i++)
		free(v[i].name);
	free(v);
}

static size_t node_index(struct daemon *d, const char *name)
{
	for (size_t k = 0; k < d->nnodes; k++)
		if (!strcmp(d->nodes[k].conf->name, name))
			return k;
	return d->nnodes;
}

static void load_records(struct daemon *d)
{
	char **names;
	size_t n;

	if (spool_list(&d->sp, SD_QUEUED, &names, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			struct cb_err err = { 0 };
			struct job j;
			struct qent *e;

			if (spool_load(&d->sp, SD_QUEUED, names[i], &j, &err) < 0) {
				logmsg("%s; left in place", err.msg);
				cb_err_free(&err);
				continue;
			}
			if (!(e = qent_from_job(&j, names[i])) || q_insert(d, e) < 0) {
				logmsg("job %lld: out of memory", j.id);
				qent_free(e);
			}
			job_free(&j);
		}
		spool_list_free(names, n);
	}
	if (spool_list(&d->sp, SD_RUNNING, &names, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			struct cb_err err = { 0 };
			struct job j;
			struct attempt *a;
			size_t k;

			if (spool_load(&d->sp, SD_RUNNING, names[i], &j, &err) < 0) {
				logmsg("%s; left in place", err.msg);
				cb_err_free(&err);
				continue;
			}
			a = job_last_attempt(&j);
			if (!a || !a->node || (k = node_index(d, a->node)) == d->nnodes)
				logmsg("job %lld: runs on node %s, which is not in the config", j.id,
				       a && a->node ? a->node : "?");
			else if (r_add(d, j.id, a->id, k, a->state == AS_LAUNCHING) < 0)
				logmsg("job %lld: out of memory", j.id);
			job_free(&j);
		}
		spool_list_free(names, n);
	}
}

static void scan_dir(struct daemon *d, enum spool_dir which)
{
	char **names;
	size_t n;

	if (spool_list(&d->sp, which, &names, &n) < 0) {
		logmsg("%s/%s: %s", d->sp.path, spool_dir_name[which], strerror(errno));
		return;
	}
	for (size_t i = 0, k; i < n; i += k) {
		k = which == SD_CTL ? 1 : n - i < ACCEPT_BATCH ? n - i : ACCEPT_BATCH;
		if (which == SD_NEW)
			accept_new(d, names + i, k);
		else if (which == SD_INCOMING)
			accept_incoming(d, names + i, k);
		else
			apply_ctl(d, names[i]);
	}
	spool_list_free(names, n);
}

/* Can the spool take a write again?  A probe of the size of a large
 * record through the atomic write, removed again (tmp/, dot name). */
static int spool_writable(struct daemon *d)
{
	static const char probe[16384];

	if (atomic_write(d->sp.dir[SD_TMP], d->sp.dir[SD_TMP], ".writable", probe,
			 sizeof probe, 0600) < 0)
		return 0;
	unlinkat(d->sp.dir[SD_TMP], ".writable", 0);
	return 1;
}

static void reconcile_all(struct daemon *d);

/* A stalled spool (jobs.c write_failed): once the probe succeeds,
 * every change that waited is made again -- submissions in incoming/
 * and new/, requests in ctl/, and (through a reconcile) the states of
 * attempts that ended meanwhile -- and scheduling resumes. */
static void stall_retry(struct daemon *d)
{
	if (!spool_writable(d)) {
		d->stall_retry_at = mono_now() + STALL_RETRY_MS;
		return;
	}
	d->stalled = 0;
	scan_dir(d, SD_INCOMING);
	scan_dir(d, SD_NEW);
	scan_dir(d, SD_CTL);
	reconcile_all(d);
	d->dirty = 1;
}

static void reconcile_all(struct daemon *d)
{
	for (size_t k = 0; k < d->nnodes; k++) {
		struct node *n = &d->nodes[k];

		if (n->reachable || !n->retry_at || mono_now() >= n->retry_at)
			reconcile_node(d, k);
	}
	d->next_reconcile = d->nr ? mono_now() + RECONCILE_MS : 0;
}

/* --public-key, and each SSH node's public_key: in its authorized_keys. */
static void ensure_keys(struct daemon *d, const char *all)
{
	for (size_t k = 0; k < d->nnodes; k++) {
		const struct node_conf *nc = d->nodes[k].conf;
		const char *path = nc->public_key ? nc->public_key : all;
		struct cb_err err = { 0 };
		char *key;
		int r;

		if (nc->local || !path)
			continue;
		if (!(key = pubkey_read(path, &err)) ||
		    (r = node_ensure_key(&d->cfg, nc, key, isatty(0), &err)) < 0) {
			logmsg("node %s: public key: %s", nc->name, err.msg ? err.msg : "out of memory");
			cb_err_free(&err);
		} else {
			logmsg("node %s: public key %s", nc->name, r ? "already present" : "added");
		}
		free(key);
	}
}

/* ---- the live event streams ------------------------------------------ */

static void watch_stop(struct node *n)
{
	if (n->watch_pid <= 0)
		return;
	close(n->watch_in);
	close(n->watch_out);
	kill(-n->watch_pid, SIGTERM);
	waitpid(n->watch_pid, NULL, 0);
	n->watch_pid = 0;
	n->watch_buf.len = 0;
	n->watch_launch = n->watch_pending = 0;
}

static void watch_start(struct daemon *d, struct node *n)
{
	static const char *const args[] = { "watch", NULL };
	struct cb_err err = { 0 };
	int in, out;
	pid_t pid;

	/* The stream cannot ship the worker itself: make sure it is there. */
	if (node_ensure_worker(&d->cfg, n->conf, &err) < 0) {
		node_failed(d, (size_t)(n - d->nodes), err.msg ? err.msg : "cannot install the worker");
		cb_err_free(&err);
		n->watch_retry_at = n->retry_at;
		return;
	}
	pid = node_spawn(&d->cfg, n->conf, args, &in, &out);
	if (pid < 0) {
		logmsg("node %s: watch: %s", n->conf->name, strerror(errno));
		n->watch_retry_at = mono_now() + BACKOFF_MIN_MS;
		return;
	}
	/* Non-blocking both ways: watch_call waits with a deadline. */
	if (fcntl(in, F_SETFL, O_NONBLOCK) < 0 || fcntl(out, F_SETFL, O_NONBLOCK) < 0)
		logmsg("node %s: watch: %s", n->conf->name, strerror(errno));
	n->watch_pid = pid;
	n->watch_in = in;
	n->watch_out = out;
	n->watch_buf.len = 0;
	n->watch_retry_at = 0;
}

/* Apply the records waiting in N's buffer. */
static void watch_process(struct daemon *d, size_t k)
{
	struct node *n = &d->nodes[k];
	size_t off = 0;

	n->watch_pending = 0;
	n->watch_busy = 1;      /* watch_call stays off this buffer */
	for (;;) {
		struct wire_rec w = { 0 };
		const char *why, *aid, *rq;
		long used = wire_parse(n->watch_buf.s + off, n->watch_buf.len - off, &w, &why);
		struct rent *e;

		if (used == 0) {
			wire_free(&w);
			break;
		}
		if (used < 0) {
			logmsg("node %s: event stream: %s; restarting it", n->conf->name, why);
			wire_free(&w);
			n->watch_busy = 0;
			watch_stop(n);
			n->watch_retry_at = mono_now();
			return;
		}
		off += (size_t)used;
		if (wire_get(&w, "reply")) {
			/* The answer to a call that gave up waiting. */
		} else if (wire_get(&w, "ready") || wire_get(&w, "overflow")) {
			/* Events from now on are seen (or some were lost): catch
			 * up by asking about every attempt. */
			if (wire_get(&w, "ready"))
				n->watch_launch = (rq = wire_get(&w, "requests")) && !strcmp(rq, "launch");
			reconcile_node(d, k);
		} else if ((aid = wire_get(&w, "attempt")) && (e = r_find_aid(d, aid))) {
			apply_attempt(d, e, &w);
		}
		wire_free(&w);
	}
	n->watch_busy = 0;
	memmove(n->watch_buf.s, n->watch_buf.s + off, n->watch_buf.len - off);
	n->watch_buf.len -= off;
}

/* Read what N's stream has into its buffer.  1 when something came,
 * 0 when nothing did, -1 at its end. */
static int watch_fill(struct node *n)
{
	char buf[65536];
	ssize_t r = read(n->watch_out, buf, sizeof buf);

	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (r <= 0)
		return -1;
	return sbuf_add(&n->watch_buf, buf, (size_t)r) < 0 ? 0 : 1;
}

static void watch_read(struct daemon *d, size_t k)
{
	struct node *n = &d->nodes[k];
	int r = watch_fill(n);

	if (r < 0) {
		logmsg("node %s: event stream ended; restarting it", n->conf->name);
		watch_stop(n);
		n->watch_retry_at = mono_now() + BACKOFF_MIN_MS;
		d->next_reconcile = mono_now();
		return;
	}
	if (r > 0)
		watch_process(d, k);
}

/* Take the first `reply` record out of N's buffer into REP.  1 when
 * there was one, 0 when not (yet), -1 when the buffer is not records. */
static int watch_reply(struct node *n, struct node_reply *rep)
{
	size_t off = 0;

	for (;;) {
		struct wire_rec w = { 0 };
		const char *why;
		long used = wire_parse(n->watch_buf.s + off, n->watch_buf.len - off, &w, &why);
		long long v;

		if (used <= 0) {
			wire_free(&w);
			return used < 0 ? -1 : 0;
		}
		if (!wire_get(&w, "reply")) {
			off += (size_t)used;
			wire_free(&w);
			continue;
		}
		rep->status = wire_get_ll(&w, "exit", &v) == 0 && v >= 0 && v < 256 ? (int)v : -1;
		for (size_t i = 0; i < w.n; i++) {
			char **dst = !strcmp(w.f[i].key, "out") ? &rep->out :
				     !strcmp(w.f[i].key, "error") ? &rep->err : NULL;

			if (dst && !*dst && (*dst = strndup(w.f[i].val, w.f[i].len)) && dst == &rep->out)
				rep->outlen = strlen(rep->out);
		}
		if (rep->status < 0 && !rep->err && wire_get(&w, "failed"))
			rep->err = xasprintf("launch on the node: %s", wire_get(&w, "failed"));
		wire_free(&w);
		memmove(n->watch_buf.s + off, n->watch_buf.s + off + (size_t)used,
			n->watch_buf.len - off - (size_t)used);
		n->watch_buf.len -= (size_t)used;
		return 1;
	}
}

static int wait_fd(int fd, short events, long long until)
{
	for (;;) {
		struct pollfd p = { fd, events, 0 };
		long long left = until - mono_now();
		int r;

		if (left <= 0)
			return 0;
		r = poll(&p, 1, (int)(left > INT_MAX ? INT_MAX : left));
		if (r < 0 && errno == EINTR)
			continue;
		return r;
	}
}

/*
 * A launch through the node's event stream (LAYOUT.md section 10): the
 * request goes to its `cardbaton-worker watch`, which runs the launch
 * in a child and answers with one `reply` record, so a launch costs no
 * ssh session and no exec.  Records that come before the reply stay in
 * the buffer; the main loop applies them next (watch_pending).
 */
int watch_call(struct daemon *d, struct node *n, const char *spec, size_t len,
	       struct node_reply *rep)
{
	static const char head[] = "request launch\n";
	long long until = mono_now() + NODE_CALL_MS;
	size_t hl = sizeof head - 1, sent = 0;
	const char *why = "the event stream ended";
	char *req;
	int r;

	if (n->watch_pid <= 0 || !n->watch_launch || n->watch_busy || !(req = malloc(hl + len)))
		return 0;
	memcpy(req, head, hl);
	memcpy(req + hl, spec, len);
	while (sent < hl + len) {
		ssize_t w = write(n->watch_in, req + sent, hl + len - sent);

		if (w > 0)
			sent += (size_t)w;
		else if (w < 0 && errno == EAGAIN && wait_fd(n->watch_in, POLLOUT, until) > 0)
			continue;
		else if (!(w < 0 && errno == EINTR))
			break;
	}
	free(req);
	if (sent == 0)
		return 0;       /* nothing went out: the worker can do it */
	memset(rep, 0, sizeof *rep);
	if (sent < hl + len) {
		why = "cannot write to the event stream";
		goto fail;
	}
	while ((r = watch_reply(n, rep)) == 0) {
		if (wait_fd(n->watch_out, POLLIN, until) <= 0) {
			why = "no answer on the event stream";
			goto fail;
		}
		if (watch_fill(n) < 0)
			goto fail;
	}
	if (r < 0) {
		why = "event stream: not records";
		goto fail;
	}
	if ((!rep->out && !(rep->out = strdup(""))) || (!rep->err && !(rep->err = strdup("")))) {
		why = strerror(ENOMEM);
		goto fail;
	}
	n->watch_pending = n->watch_buf.len > 0;
	return 1;
fail:
	logmsg("node %s: launch: %s; restarting the event stream", n->conf->name, why);
	node_reply_free(rep);
	watch_stop(n);
	n->watch_retry_at = mono_now();
	d->next_reconcile = mono_now();
	return -1;
}

/* ---- inotify ----------------------------------------------------------- */

static int ino_setup(struct daemon *d, int *wd_new, int *wd_ctl)
{
	int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	char *pn, *pc;

	if (fd < 0)
		return -1;
	pn = xasprintf("%s/new", d->sp.path);
	pc = xasprintf("%s/ctl", d->sp.path);
	if (!pn || !pc ||
	    (*wd_new = inotify_add_watch(fd, pn, IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE |
					 IN_ONLYDIR | IN_DONT_FOLLOW)) < 0 ||
	    (*wd_ctl = inotify_add_watch(fd, pc, IN_MOVED_TO | IN_CLOSE_WRITE | IN_ONLYDIR | IN_DONT_FOLLOW)) < 0) {
		int saved = errno;

		close(fd);
		free(pn);
		free(pc);
		errno = saved;
		return -1;
	}
	free(pn);
	free(pc);
	return fd;
}

/* A regular file just created in new/ is still being written (by a
 * writer that skipped tmp/): wait for its close or rename. */
static int created_regular(struct daemon *d, const char *name)
{
	struct stat st;

	return fstatat(d->sp.dir[SD_NEW], name, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISREG(st.st_mode);
}

/*
 * The events of new/ and ctl/.  Files in new/ are accepted together,
 * as many as one read brings (accept_new shares the syncs among them),
 * but never after a request that came later: a `cancel` right after a
 * `submit` finds its job.
 */
static void ino_read(struct daemon *d, int fd, int wd_new, int wd_ctl)
{
	char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
	char *pend[ACCEPT_BATCH];
	size_t np = 0;
	ssize_t len;
	int rescan = 0;

	while ((len = read(fd, buf, sizeof buf)) > 0) {
		for (char *p = buf; p < buf + len;) {
			struct inotify_event *ev = (struct inotify_event *)p;

			p += sizeof *ev + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				rescan = 1;
			} else if (ev->len && ev->wd == wd_new &&
				   (!(ev->mask & IN_CREATE) || !created_regular(d, ev->name))) {
				/* A regular file is taken when complete (closed or
				 * renamed in); a symlink, directory or FIFO at once,
				 * to be rejected. */
				pend[np++] = ev->name;
				if (np == ACCEPT_BATCH) {
					accept_new(d, pend, np);
					np = 0;
				}
			} else if (ev->len && ev->wd == wd_ctl) {
				accept_new(d, pend, np);
				np = 0;
				apply_ctl(d, ev->name);
			}
		}
		accept_new(d, pend, np);        /* before buf is read over */
		np = 0;
	}
	if (rescan) {
		logmsg("inotify queue overflowed; re-reading new/ and ctl/");
		scan_dir(d, SD_NEW);
		scan_dir(d, SD_CTL);
	}
}

/* ---- main ---------------------------------------------------------------- */

/* The node calls in flight that have something to read, in P (2 per
 * node, from index BASE); returns how many are in flight. */
static size_t call_fds(struct daemon *d, struct pollfd *p)
{
	size_t busy = 0;

	for (size_t k = 0; k < d->nnodes; k++) {
		struct node *n = &d->nodes[k];

		p[2 * k].fd = n->query.pid > 0 ? n->query.fd : -1;
		p[2 * k].events = POLLIN;
		p[2 * k + 1].fd = n->check.pid > 0 ? n->check.fd : -1;
		p[2 * k + 1].events = POLLIN;
		busy += (n->query.pid > 0) + (n->check.pid > 0);
	}
	return busy;
}

/* Hand what P says is readable to the calls' handlers. */
static void call_events(struct daemon *d, const struct pollfd *p)
{
	for (size_t k = 0; k < d->nnodes; k++) {
		struct node *n = &d->nodes[k];
		int status;

		if (p[2 * k].revents && n->query.pid > 0 && acall_read(&n->query, &status))
			query_done(d, n, status);
		if (p[2 * k + 1].revents && n->check.pid > 0 && acall_read(&n->check, &status))
			reconcile_done(d, k, status);
	}
}

static void call_deadlines(struct daemon *d)
{
	for (size_t k = 0; k < d->nnodes; k++) {
		if (acall_expired(&d->nodes[k].query))
			node_failed(d, k, "no answer to a GPU query within the deadline");
		if (acall_expired(&d->nodes[k].check))
			node_failed(d, k, "no answer to a status query within the deadline");
	}
}

/* Wait until no node call is in flight (each ends by its deadline). */
static void calls_wait(struct daemon *d)
{
	struct pollfd *p = calloc(2 * d->nnodes + 1, sizeof *p);

	if (!p)
		return;
	for (;;) {
		call_deadlines(d);
		if (!call_fds(d, p))
			break;
		if (poll(p, 2 * d->nnodes, 100) > 0)
			call_events(d, p);
	}
	free(p);
}

/* --once: reconcile, ask every node for its cards, wait for the
 * answers, make one pass. */
static void once(struct daemon *d)
{
	calls_wait(d);
	if (!d->nq)
		return;
	for (size_t k = 0; k < d->nnodes; k++)
		query_start(d, &d->nodes[k]);
	calls_wait(d);
	schedule(d);
}

static int setup_nodes(struct daemon *d)
{
	if (!(d->nodes = calloc(d->cfg.nnodes, sizeof *d->nodes)))
		return -1;
	d->nnodes = d->cfg.nnodes;
	for (size_t k = 0; k < d->nnodes; k++) {
		d->nodes[k].conf = &d->cfg.nodes[k];
		d->nodes[k].reachable = 1;
	}
	return 0;
}

static int min_timeout(struct daemon *d)
{
	long long now = mono_now(), next = LLONG_MAX;

	if (d->dirty && !d->stalled)
		return 0;
	if (d->next_reconcile)
		next = d->next_reconcile;
	if (d->stalled && d->stall_retry_at < next)
		next = d->stall_retry_at;
	if (d->next_poll && d->next_poll < next)
		next = d->next_poll;
	for (size_t k = 0; k < d->nnodes; k++) {
		struct node *n = &d->nodes[k];

		if (n->watch_pending)
			return 0;
		if (!d->once && n->watch_pid <= 0 && n->watch_retry_at && n->watch_retry_at < next)
			next = n->watch_retry_at;
		if (!n->reachable && n->retry_at && d->nq && n->retry_at < next)
			next = n->retry_at;
		if (n->query.pid > 0 && n->query.deadline < next)
			next = n->query.deadline;
		if (n->check.pid > 0 && n->check.deadline < next)
			next = n->check.deadline;
	}
	if (next == LLONG_MAX)
		return -1;
	return next <= now ? 0 : (int)(next - now > INT_MAX ? INT_MAX : next - now);
}

static void timers(struct daemon *d)
{
	long long now = mono_now();

	call_deadlines(d);
	if (d->stalled && now >= d->stall_retry_at)
		stall_retry(d);
	if (d->next_reconcile && now >= d->next_reconcile)
		reconcile_all(d);
	if (d->next_poll && now >= d->next_poll) {
		for (size_t k = 0; k < d->nnodes; k++)
			d->nodes[k].fresh = 0;
		d->next_poll = 0;
		d->dirty = 1;
	}
	for (size_t k = 0; k < d->nnodes; k++) {
		struct node *n = &d->nodes[k];

		if (!d->once && n->watch_pid <= 0 && n->watch_retry_at && now >= n->watch_retry_at)
			watch_start(d, n);
		if (!n->reachable && n->retry_at && now >= n->retry_at && d->nq)
			d->dirty = 1;
	}
	if (d->nr && !d->next_reconcile)
		d->next_reconcile = now + RECONCILE_MS;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "once", no_argument, NULL, 'o' },
		{ "public-key", required_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct daemon d = { 0 };
	struct index_writer iw = { 0 };        /* SPOOL/queued.idx, for status */
	struct cb_err err = { 0 };
	const char *config = NULL, *pubkey = NULL;
	sigset_t mask;
	int c, lockfd, ino, sigfd, wd_new = -1, wd_ctl = -1;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 'o':
			d.once = 1;
			break;
		case 'k':
			pubkey = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EX_USAGE_;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return EX_USAGE_;
	}
	if (config_load(config, &d.cfg, &err) < 0 || spool_open(&d.sp, d.cfg.spool, 1, &err) < 0)
		die_err(&err);
	if ((lockfd = spool_lock_daemon(&d.sp, &err)) < 0)
		die_err(&err);
	if (setup_nodes(&d) < 0) {
		logmsg("%s", strerror(errno));
		return EX_OSERR_;
	}
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 ||
	    (sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
		logmsg("signalfd: %s", strerror(errno));
		return EX_OSERR_;
	}
	/* Watch before scanning, so that nothing falls between the two. */
	if ((ino = ino_setup(&d, &wd_new, &wd_ctl)) < 0) {
		logmsg("inotify on %s: %s", d.sp.path, strerror(errno));
		return EX_OSERR_;
	}
	logmsg("serving %s (%zu node%s)", d.sp.path, d.nnodes, d.nnodes == 1 ? "" : "s");
	ensure_keys(&d, pubkey);
	clean_tmp(&d);
	warn_strays(&d);
	dedupe(&d);
	load_records(&d);
	scan_dir(&d, SD_INCOMING);
	scan_dir(&d, SD_NEW);
	scan_dir(&d, SD_CTL);
	reconcile_all(&d);
	/* Hear every node about its running attempts before launching. */
	calls_wait(&d);
	if (d.once) {
		once(&d);
		goto out;
	}
	for (size_t k = 0; k < d.nnodes; k++)
		watch_start(&d, &d.nodes[k]);
	d.dirty = 1;
	for (;;) {
		struct pollfd *p;
		size_t np = 2;
		int n, quit = 0;

		for (size_t k = 0; k < d.nnodes; k++)
			if (d.nodes[k].watch_pending)
				watch_process(&d, k);
		timers(&d);
		/* Nothing is launched while the spool cannot record it; the
		 * pass is made when the stall ends. */
		if (d.dirty && !d.stalled)
			schedule(&d);
		if (!(p = calloc(3 * d.nnodes + 2, sizeof *p))) {
			logmsg("%s", strerror(errno));
			break;
		}
		p[0].fd = ino;
		p[0].events = POLLIN;
		p[1].fd = sigfd;
		p[1].events = POLLIN;
		for (size_t k = 0; k < d.nnodes; k++) {
			p[np].fd = d.nodes[k].watch_pid > 0 ? d.nodes[k].watch_out : -1;
			p[np++].events = POLLIN;
		}
		call_fds(&d, p + np);
		np += 2 * d.nnodes;
		n = poll(p, np, index_tick(&iw, &d.sp, min_timeout(&d)));
		if (n < 0 && errno != EINTR) {
			logmsg("poll: %s", strerror(errno));
			free(p);
			break;
		}
		if (n > 0) {
			if (p[1].revents) {
				struct signalfd_siginfo si;

				while (read(sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
					if (si.ssi_signo == SIGHUP) {
						scan_dir(&d, SD_NEW);
						scan_dir(&d, SD_CTL);
						d.next_reconcile = mono_now();
					} else {
						quit = 1;
					}
				}
			}
			if (p[0].revents)
				ino_read(&d, ino, wd_new, wd_ctl);
			for (size_t k = 0; k < d.nnodes; k++)
				if (p[k + 2].revents && d.nodes[k].watch_pid > 0)
					watch_read(&d, k);
			call_events(&d, p + 2 + d.nnodes);
		}
		free(p);
		if (quit)
			break;
	}
out:
	index_stop(&iw);
	logmsg("stopping; running jobs keep running");
	for (size_t k = 0; k < d.nnodes; k++) {
		watch_stop(&d.nodes[k]);
		acall_free(&d.nodes[k].query);
		acall_free(&d.nodes[k].check);
		gpus_free(d.nodes[k].gpus, d.nodes[k].ngpus);
		free(d.nodes[k].taken);
		free(d.nodes[k].held);
		free(d.nodes[k].error);
		sbuf_free(&d.nodes[k].watch_buf);
		for (size_t e = 0; e < d.nodes[k].nended; e++)
			free(d.nodes[k].ended[e]);
		free(d.nodes[k].ended);
	}
	free(d.nodes);
	for (size_t i = 0; i < d.nq; i++)
		qent_free(d.q[i]);
	free(d.q);
	free(d.qhash);
	for (size_t i = 0; i < d.nr; i++)
		free(d.r[i].aid);
	free(d.r);
	close(ino);
	close(sigfd);
	close(lockfd);
	spool_close(&d.sp);
	config_free(&d.cfg);
	return 0;
}
