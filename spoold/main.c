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
 *   - and at least every gpu_refresh_seconds (config, default 30) jobs
 *     waiting or not, so that what the daemon shows of the cards
 *     (nodes/, metrics.prom, so top) does not go stale (refresh_cards).
 *
 * Everything blocks for at most one node call, and every node call
 * has its own deadline (link/node.c).
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

static const char *prog = DAEMON_PROG;

/* Shipping the worker to a node takes a while: say so on a terminal
 * (the tools say it the same way). */
static void tty_progress(void *arg, const char *line)
{
	(void)arg;
	if (isatty(2))
		fprintf(stderr, "cardbaton: %s\n", line);
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
	return pid_gone(pid);
}

/* Start-up: temp files of writers that died (a crash mid-write), and
 * any older than TMP_MAX_AGE, are removed; tmp/ holds nothing else. */
static void clean_dir(struct daemon *d, int fd, const char *name)
{
	struct stat st;
	time_t now = time(NULL);
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
			logmsg("%s/%s/%s: %s; ignored", d->sp.path, name, e->d_name, stray_kind(&st));
		else if (now - st.st_mtime > TMP_MAX_AGE || writer_gone(e->d_name))
			unlinkat(dirfd(dir), e->d_name, 0);
	}
	closedir(dir);
}

/* The temp files of writers gone: in tmp/ (a lab's: its members' tmp/
 * and the daemon's own stage/, LAYOUT.md §15). */
static void clean_tmp(struct daemon *d)
{
	clean_dir(d, d->sp.dir[SD_TMP], d->sp.drop_tmp >= 0 ? "stage" : "tmp");
	if (d->sp.drop_tmp >= 0)
		clean_dir(d, d->sp.drop_tmp, "tmp");
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
			if (!(e = qent_from_job(d, &j, names[i])) || q_insert(d, e) < 0) {
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
			else if (r_add(d, &j, a->id, k, a->state == AS_LAUNCHING || a->state == AS_STAGED) < 0)
				logmsg("job %lld: out of memory", j.id);
			job_free(&j);
		}
		spool_list_free(names, n);
	}
}

/* The metrics (metrics.h): the counters the last daemon wrote carried
 * on, the paused jobs counted. */
static void metrics_start(struct daemon *d)
{
	const char **names = calloc(d->nnodes + 1, sizeof *names);
	char **paused, *buf;
	size_t n, len;

	for (size_t k = 0; names && k < d->nnodes; k++)
		names[k] = d->nodes[k].conf->name;
	if (!names || metrics_init(&d->metrics, names, d->nnodes, now_ms()) < 0) {
		free(names);
		logmsg("metrics: out of memory");
		exit(EX_OSERR_);
	}
	free(names);
	if (read_capped(d->sp.fd, "metrics.prom", METRICS_FILE_MAX, &buf, &len) == 0) {
		metrics_restore(&d->metrics, buf, len);
		free(buf);
	} else if (errno != ENOENT) {
		logmsg("%s/metrics.prom: %s; the counters start from 0", d->sp.path, strerror(errno));
	}
	if (spool_list(&d->sp, SD_PAUSED, &paused, &n) == 0) {
		d->npaused = (long long)n;
		spool_list_free(paused, n);
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
	write_ok(d);
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

/* ---- inotify ----------------------------------------------------------- */

/* The watches of new/, ctl/ and drain/ (made when missing). */
static int ino_setup(struct daemon *d, int *wd_new, int *wd_ctl, int *wd_drain)
{
	struct cb_err err = { 0 };
	int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC), dfd = spool_subdir(&d->sp, "drain", &err);
	char *pn, *pc, *pd;

	if (dfd >= 0)
		close(dfd);
	cb_err_free(&err);
	if (fd < 0)
		return -1;
	pn = xasprintf("%s/new", d->sp.path);
	pc = xasprintf("%s/ctl", d->sp.path);
	pd = xasprintf("%s/drain", d->sp.path);
	if (!pn || !pc || !pd ||
	    (*wd_new = inotify_add_watch(fd, pn, IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE |
					 IN_ONLYDIR | IN_DONT_FOLLOW)) < 0 ||
	    (*wd_ctl = inotify_add_watch(fd, pc, IN_MOVED_TO | IN_CLOSE_WRITE | IN_ONLYDIR | IN_DONT_FOLLOW)) < 0 ||
	    (*wd_drain = inotify_add_watch(fd, pd, IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE |
					   IN_CREATE | IN_DELETE | IN_ONLYDIR | IN_DONT_FOLLOW)) < 0) {
		int saved = errno;

		close(fd);
		free(pn);
		free(pc);
		free(pd);
		errno = saved;
		return -1;
	}
	free(pn);
	free(pc);
	free(pd);
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
static void ino_read(struct daemon *d, int fd, int wd_new, int wd_ctl, int wd_drain)
{
	char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
	char *pend[ACCEPT_BATCH];
	size_t np = 0;
	ssize_t len;
	int rescan = 0, drain = 0;

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
			} else if (ev->wd == wd_drain) {
				drain = 1;
			}
		}
		accept_new(d, pend, np);        /* before buf is read over */
		np = 0;
	}
	if (rescan) {
		logmsg("inotify queue overflowed; re-reading new/, ctl/ and drain/");
		scan_dir(d, SD_NEW);
		scan_dir(d, SD_CTL);
	}
	if (drain || rescan)
		drain_read(d);
}

/* ---- main ---------------------------------------------------------------- */

/* A signal came: SIGHUP re-reads new/ and ctl/; 1 for SIGTERM or SIGINT. */
static int on_signal(struct daemon *d, int sigfd)
{
	struct signalfd_siginfo si;
	int quit = 0;

	while (read(sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
		if (si.ssi_signo == SIGHUP) {
			scan_dir(d, SD_NEW);
			scan_dir(d, SD_CTL);
			drain_read(d);
			d->next_reconcile = mono_now();
		} else {
			quit = 1;
		}
	}
	return quit;
}

/* Until no node call is in flight (each ends by its deadline), the
 * streams aside: start-up's reconcile, and --once.  1 when a SIGTERM
 * came meanwhile. */
static int calls_wait(struct daemon *d, int sigfd)
{
	struct pollset ps = { 0 };
	int quit = 0;

	for (;;) {
		long long next = LLONG_MAX;

		turn_commit(d);         /* what the answers changed, then the launches */
		links_timers(d, mono_now(), &next);
		ps.n = 0;
		if (pollset_add(&ps, sigfd, PW_SIGNAL) < 0 || !links_pollfds(d, &ps))
			break;
		if (poll(ps.p, ps.n, 100) > 0) {
			if (ps.p[0].revents && on_signal(d, sigfd)) {
				quit = 1;
				break;
			}
			links_events(d, &ps, 1);
		}
	}
	free(ps.p);
	free(ps.who);
	return quit;
}

/* The poll timeout TIMEOUT (ms, -1 none), made no later than the mono
 * time AT (LLONG_MAX: none). */
static int no_later(int timeout, long long at)
{
	long long now = mono_now();
	int t;

	if (at == LLONG_MAX)
		return timeout;
	t = at <= now ? 0 : at - now > INT_MAX ? INT_MAX : (int)(at - now);
	return timeout < 0 || t < timeout ? t : timeout;
}

/* --once: until every hook due has run (each ends by its deadline).
 * A SIGTERM meanwhile stops it (the hooks then run at the next start). */
static void hooks_wait(struct daemon *d, int sigfd)
{
	struct pollset ps = { 0 };

	for (;;) {
		long long next = LLONG_MAX;

		turn_commit(d);
		hooks_start(d);
		hooks_timers(d, mono_now(), &next);
		ps.n = 0;
		if (pollset_add(&ps, sigfd, PW_SIGNAL) < 0 || !hooks_pollfds(d, &ps))
			break;
		if (poll(ps.p, ps.n, no_later(-1, next)) > 0) {
			if (ps.p[0].revents && on_signal(d, sigfd))
				break;
			hooks_events(d, &ps, 1);
		}
	}
	free(ps.p);
	free(ps.who);
}

/* --once: reconcile, ask every node for its cards, wait for the
 * answers, make one pass, wait for its launches' answers. */
static void once(struct daemon *d, int sigfd)
{
	if (calls_wait(d, sigfd))
		return;
	if (d->nq) {
		for (size_t k = 0; k < d->nnodes; k++)
			query_start(d, &d->nodes[k]);
		if (calls_wait(d, sigfd))
			return;
		schedule(d);
		if (calls_wait(d, sigfd))
			return;
	}
	hooks_wait(d, sigfd);
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

/*
 * gpu_refresh_seconds (cardbaton(5)): each node's cards are asked for
 * at least this often, counted from the last query asked, whether jobs
 * wait or not, so that the views (nodes/NAME.json, metrics.prom) and
 * what top shows of the cards are not older than that while the queue
 * is idle.  While GPU jobs wait the passes ask every GPU_POLL_MS and
 * this adds nothing, but for a node they leave alone (every card leased
 * by this spool's attempts, cards.c wants_query): its running jobs'
 * memory and utilisation are read too, the leases as they are.  A node
 * never asked yet is asked at once; an unreachable one no sooner than
 * its back-off allows.  The query is query_refresh's, answered as
 * events like any other: nothing here waits on a node.  NEXT: made no
 * later than the next one due.
 */
static void refresh_cards(struct daemon *d, long long now, long long *next)
{
	long long every = d->cfg.gpu_refresh_seconds * 1000;

	if (!every)
		return;
	for (size_t k = 0; k < d->nnodes; k++) {
		struct node *n = &d->nodes[k];
		long long due = n->query.started ? n->query.started + every : now;

		if (n->query.pid > 0)
			continue;       /* its answer or its deadline comes first */
		if (!n->reachable && n->retry_at > due)
			due = n->retry_at;
		if (due <= now && query_refresh(d, n))
			continue;
		if (due <= now)         /* it could not be started: after the back-off */
			due = n->retry_at > now ? n->retry_at : now + every;
		if (due < *next)
			*next = due;
	}
}

/* What is due now; the poll timeout until the next thing that is. */
static int timers(struct daemon *d)
{
	long long now = mono_now(), next = LLONG_MAX;

	links_timers(d, now, &next);
	hooks_timers(d, now, &next);
	if (d->stalled && now >= d->stall_retry_at)
		stall_retry(d);
	if (d->accept_retry_at && now >= d->accept_retry_at) {
		d->accept_retry_at = 0;
		scan_dir(d, SD_NEW);
	}
	if (d->accept_retry_at && d->accept_retry_at < next)
		next = d->accept_retry_at;
	if (d->next_reconcile && now >= d->next_reconcile)
		reconcile_all(d);
	if (d->next_begin && now >= d->next_begin) {
		d->next_begin = 0;
		d->dirty = 1;
	}
	if (d->next_begin && d->next_begin < next)
		next = d->next_begin;
	if (d->next_poll && now >= d->next_poll) {
		for (size_t k = 0; k < d->nnodes; k++)
			d->nodes[k].fresh = 0;
		d->next_poll = 0;
		d->dirty = 1;
	}
	for (size_t k = 0; k < d->nnodes; k++) {
		struct node *n = &d->nodes[k];

		if (!n->reachable && n->retry_at && d->nq) {
			if (now >= n->retry_at)
				d->dirty = 1;
			else if (n->retry_at < next)
				next = n->retry_at;
		}
	}
	if (d->nr && !d->next_reconcile)
		d->next_reconcile = now + RECONCILE_MS;
	if (d->next_reconcile && d->next_reconcile < next)
		next = d->next_reconcile;
	if (d->stalled && d->stall_retry_at < next)
		next = d->stall_retry_at;
	if (d->next_poll && d->next_poll < next)
		next = d->next_poll;
	refresh_cards(d, now, &next);
	if (d->dirty && !d->stalled)
		return 0;
	if (next == LLONG_MAX)
		return -1;
	now = mono_now();
	return next <= now ? 0 : (int)(next - now > INT_MAX ? INT_MAX : next - now);
}

static void free_daemon(struct daemon *d)
{
	moves_free(d);          /* before the nodes: it reads them */
	for (size_t k = 0; k < d->nnodes; k++) {
		struct node *n = &d->nodes[k];

		stream_stop(d, k, 0);
		for (size_t u = 1; u <= n->nacct; u++)
			stream_stop(d, k, u);
		acall_free(&n->query);
		acall_free(&n->check);
		acct_free(n);
		gpus_free(n->gpus, n->ngpus);
		free(n->error);
		free(n->view);
		for (size_t e = 0; e < n->nended; e++)
			free(n->ended[e]);
		free(n->ended);
	}
	free(d->nodes);
	free(d->labkey);
	metrics_free(&d->metrics);
	free(d->metrics_text);
	for (size_t i = 0; i < d->nq; i++)
		qent_free(d->q[i]);
	free(d->q);
	free(d->qhash);
	for (size_t i = 0; i < d->nr; i++) {
		acall_free(&d->r[i].call);
		acall_free(&d->r[i].pause);
		rent_free(&d->r[i]);
	}
	free(d->r);
	turn_free(d);
	deps_free(d);
	hooks_stop(d);
	for (size_t u = 0; u < d->ntally; u++)
		free(d->tally[u].name);
	free(d->tally);
	free(d->owner_name);
	spool_close(&d->sp);
	config_free(&d->cfg);
}

/* The spool, made when missing: a lab's with its modes, checked
 * (LAYOUT.md §15), its group resolved into D->LAB_GID. */
static int open_the_spool(struct daemon *d, struct cb_err *err)
{
	char *why;

	if (!d->cfg.lab)
		return spool_open(&d->sp, d->cfg.spool, 1, err);
	if (lab_resolve(d->cfg.lab, &d->lab_gid, &why) < 0) {
		cb_err_set(err, EX_CONFIG_, "%s: %s", d->cfg.path ? d->cfg.path : "config",
			   why ? why : "out of memory");
		free(why);
		return -1;
	}
	return spool_open_lab(&d->sp, d->cfg.spool, d->lab_gid, 1, err);
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
	struct pollset ps = { 0 };
	struct cb_err err = { 0 };
	const char *config = NULL, *pubkey = NULL;
	sigset_t mask;
	int c, ino, sigfd, wd_new = -1, wd_ctl = -1, wd_drain = -1, quit = 0;

	/* Signals first: a SIGTERM at any instant from now on is a clean
	 * stop (exit 0), never the default action. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 ||
	    (sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
		logmsg("signalfd: %s", strerror(errno));
		return EX_OSERR_;
	}
	signal(SIGPIPE, SIG_IGN);
	node_set_progress(tty_progress, NULL);
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
	if (config_load(config, &d.cfg, &err) < 0 || open_the_spool(&d, &err) < 0)
		die_err(&err);
	if ((d.lockfd = spool_lock_daemon(&d.sp, &err)) < 0 || hooks_open(&d, &err) < 0)
		die_err(&err);
	d.turn.spares = &d.spares;
	if (setup_nodes(&d) < 0) {
		logmsg("%s", strerror(errno));
		return EX_OSERR_;
	}
	/* Watch before scanning, so that nothing falls between the two. */
	if ((ino = ino_setup(&d, &wd_new, &wd_ctl, &wd_drain)) < 0) {
		logmsg("inotify on %s: %s", d.sp.path, strerror(errno));
		return EX_OSERR_;
	}
	logmsg("serving %s (%zu node%s)", d.sp.path, d.nnodes, d.nnodes == 1 ? "" : "s");
	ensure_keys(&d, pubkey);
	/* A lab's key (SPEC §12): a failure is said, and the queue serves
	 * on (bootstrap --lab then finds no controller.pub). */
	if (d.cfg.lab && labkey_ensure(&d.sp, &err) < 0) {
		logmsg("lab key: %s", err.msg ? err.msg : "out of memory");
		cb_err_free(&err);
	}
	/* run_as: owner's calls name it, made or not (a key that is not
	 * there is refused: accts.c). */
	if (d.cfg.lab && !(d.labkey = labkey_path(d.sp.id))) {
		logmsg("lab key: out of memory");
		return EX_OSERR_;
	}
	clean_tmp(&d);
	warn_strays(&d);
	dedupe(&d);
	load_records(&d);
	tally_load(&d);
	if (d.cfg.lab && (d.max_id = spool_max_id(&d.sp)) < 0) {
		logmsg("%s: listing the job IDs: %s", d.sp.path, strerror(errno));
		return EX_OSERR_;
	}
	metrics_start(&d);
	hooks_recover(&d);
	scan_dir(&d, SD_INCOMING);
	scan_dir(&d, SD_NEW);
	scan_dir(&d, SD_CTL);
	drain_read(&d);
	reconcile_all(&d);
	/* Hear every node about its running attempts before launching. */
	if (calls_wait(&d, sigfd) || on_signal(&d, sigfd))
		goto out;       /* stopped during start-up: nothing started */
	if (d.once) {
		once(&d, sigfd);
		goto out;
	}
	/* A run_as: owner node's are its accounts' (accts.c), as needed. */
	for (size_t k = 0; k < d.nnodes; k++)
		if (!d.nodes[k].conf->run_as_owner)
			stream_start(&d, k, 0);
	d.dirty = 1;
	while (!quit) {
		int n, timeout, mt;

		/* Nothing is launched while the spool cannot record it; the
		 * pass is made when the stall ends.  What the timers find due
		 * makes a pass due at once (a timeout of 0). */
		if (d.dirty && !d.stalled)
			schedule(&d);
		timeout = timers(&d);
		/* The turn's records are made durable, then the nodes told
		 * (turn.c) -- before the loop sleeps. */
		if (turn_commit(&d) && d.dirty && !d.stalled)
			timeout = 0;
		/* The views (nodes/, metrics.prom): what the turn changed. */
		node_views_flush(&d);
		if ((mt = metrics_flush(&d, 0)) >= 0 && (timeout < 0 || mt < timeout))
			timeout = mt;
		/* The hooks due (this turn's committed), with their deadlines. */
		if (d.hookq_head < d.hookq_n) {
			long long next = LLONG_MAX;

			hooks_start(&d);
			hooks_timers(&d, mono_now(), &next);
			timeout = no_later(timeout, next);
		}
		ps.n = 0;
		if (pollset_add(&ps, ino, PW_INOTIFY) < 0 || pollset_add(&ps, sigfd, PW_SIGNAL) < 0) {
			logmsg("%s", strerror(errno));
			break;
		}
		links_pollfds(&d, &ps);
		hooks_pollfds(&d, &ps);
		n = poll(ps.p, ps.n, index_tick(&iw, &d.sp, timeout));
		if (n < 0 && errno != EINTR) {
			logmsg("poll: %s", strerror(errno));
			break;
		}
		if (n <= 0)
			continue;
		if (ps.p[1].revents)
			quit = on_signal(&d, sigfd);
		if (ps.p[0].revents)
			ino_read(&d, ino, wd_new, wd_ctl, wd_drain);
		links_events(&d, &ps, 2);
		hooks_events(&d, &ps, 2);
	}
out:
	turn_commit(&d);
	node_views_flush(&d);
	metrics_flush(&d, 1);
	index_stop(&iw);
	logmsg("stopping; running jobs keep running");
	free(ps.p);
	free(ps.who);
	close(d.lockfd);
	free_daemon(&d);
	close(ino);
	close(sigfd);
	return 0;
}
