/*
 * cmds.c - the worker's read-mostly commands: gpus, status, watch,
 * cancel, pause, log (LAYOUT.md section 10); a staged attempt's are in
 * baton.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "worker.h"

/* ---- gpus -------------------------------------------------------------- */

/* The attempt holding card UUID's lease, "" when free, and in *UID its
 * account where a lease_dir says ((uid_t)-1 else).  A held lease whose
 * holder is named nowhere yet (between flock and its name) reads as
 * "?": held all the same.  Held shared (sharing jobs: LOCK_SH), NULL
 * with *SHARED set: card_holders names them.  NULL otherwise: out of
 * memory, or a lease not to be used (*WHY says why). */
static char *lease_holder(const struct wk_state *st, const char *uuid, int *shared, uid_t *uid,
			  char **why)
{
	int fd = -1, r = lease_lock(st, uuid, LOCK_EX, 0, &fd, why);

	*shared = 0;
	*uid = (uid_t)-1;
	if (fd >= 0)
		close(fd);
	if (r == 1 || (r < 0 && errno == ENOENT))
		return strdup("");
	if (r < 0)
		return NULL;
	fd = -1;
	r = lease_lock(st, uuid, LOCK_SH, 0, &fd, why);
	if (fd >= 0)
		close(fd);
	if (r == 1) {
		*shared = 1;
		return NULL;
	}
	if (r < 0 && errno != ENOENT)
		return NULL;
	return exclusive_holder(st, uuid, uid);
}

/* The accounts of G's compute processes (their /proc entries' owners,
 * each once; a process gone or hidden is left out) as its
 * `process_account`s: a card no lease holds is busy outside the queue,
 * and a lab sees whose.  0, or -1 (out of memory). */
static int process_accounts(const struct nv_gpu *g, struct wire_rec *r)
{
	uid_t seen[NV_PIDS_MAX];
	size_t nseen = 0;

	for (size_t i = 0; i < g->npids; i++) {
		char path[32];
		struct stat sb;
		size_t k;
		char *name;

		snprintf(path, sizeof path, "/proc/%lld", g->pids[i]);
		if (g->pids[i] <= 0 || stat(path, &sb) < 0)
			continue;
		for (k = 0; k < nseen && seen[k] != sb.st_uid; k++)
			;
		if (k < nseen)
			continue;
		seen[nseen++] = sb.st_uid;
		if (!(name = wk_user_name(sb.st_uid)) || wire_add(r, "process_account", name) < 0) {
			free(name);
			return -1;
		}
		free(name);
	}
	return 0;
}

/* GPU G's record for `gpus`: a lease (and with a lease_dir its
 * lease_account) per holder, `shared 1` when held shared; on a card no
 * one leases, its processes' accounts.  0, or -1 with *WHY (malloc'd)
 * or errno. */
static int gpu_rec(const struct wk_state *st, const struct nv_gpu *g, struct wire_rec *r, char **why)
{
	struct holder *v = NULL, one;
	size_t nh = 0;
	int shared, rc = -1;
	char *lease = lease_holder(st, g->uuid, &shared, &one.uid, why);

	if (!lease && !shared)
		return -1;
	if (lease) {
		one.id = lease;
		v = &one;
		nh = *lease != '\0';
	} else if (card_holders(st, g->uuid, 0, NULL, &v, &nh) < 0) {
		return -1;
	}
	/* Memory that nvidia-smi does not report is an empty value: never
	 * read as a number (and so never as idle). */
	if (wk_set_ll(r, "index", g->index) < 0 || wire_add(r, "uuid", g->uuid) < 0 ||
	    wire_add(r, "name", g->name) < 0 ||
	    (g->mem_used >= 0 ? wk_set_ll(r, "memory_used_mib", g->mem_used)
			      : wire_add(r, "memory_used_mib", "")) < 0 ||
	    (g->mem_total >= 0 ? wk_set_ll(r, "memory_total_mib", g->mem_total)
			       : wire_add(r, "memory_total_mib", "")) < 0 ||
	    wk_set_ll(r, "utilization", g->util) < 0 || wk_set_ll(r, "processes", g->procs) < 0 ||
	    (shared && wire_add(r, "shared", "1") < 0))
		goto out;
	/* Free: one empty lease.  Shared and named by no mark yet: "?". */
	if (!nh && (wire_add(r, "lease", shared ? "?" : "") < 0 ||
		    (!shared && process_accounts(g, r) < 0)))
		goto out;
	for (size_t h = 0; h < nh; h++) {
		char *acct = st->lease_path && v[h].uid != (uid_t)-1 ? wk_user_name(v[h].uid) : NULL;

		if (wire_add(r, "lease", v[h].id) < 0 ||
		    (st->lease_path && wire_add(r, "lease_account", acct ? acct : "") < 0)) {
			free(acct);
			goto out;
		}
		free(acct);
	}
	rc = 0;
out:
	if (lease)
		free(lease);
	else
		holders_free(v, nh);
	return rc;
}

int cmd_gpus(struct wk_state *st, int argc, char **argv)
{
	struct nv_info info;
	char *err = NULL;
	size_t i;
	int rc = 0;

	(void)argv;
	if (argc != 0)
		return wk_err(EX_USAGE_, "usage: %s [-d STATE_DIR] gpus", PROG);
	if (st->slurm)
		return slurm_gpus(st);
	if (nv_query(&info, NV_ALL, &err) < 0) {
		struct wire_rec r = { 0 };

		if (wire_add(&r, "error", err ? err : "nvidia-smi failed") == 0)
			wk_print(&r);
		wire_free(&r);
		rc = wk_err(EX_UNAVAILABLE_, "%s", err ? err : "nvidia-smi failed");
		free(err);
		return rc;
	}
	for (i = 0; i < info.ngpu && rc == 0; i++) {
		struct wire_rec r = { 0 };
		char *why = NULL;

		if (gpu_rec(st, &info.gpu[i], &r, &why) < 0)
			rc = why ? wk_err(EX_OSERR_, "%s", why)
				 : wk_errsys(EX_OSERR_, "%s/%s", st->lease_path ? st->lease_path : "leases",
					     info.gpu[i].uuid);
		else if (wk_print(&r) < 0)
			rc = wk_errsys(EX_OSERR_, "stdout");
		free(why);
		wire_free(&r);
	}
	nv_free(&info);
	return rc;
}

/* ---- status ------------------------------------------------------------ */

static int unknown_rec(struct wire_rec *r, const char *id)
{
	return wire_add(r, "attempt", id) < 0 || wire_add(r, "state", wire_state_name(WS_UNKNOWN)) < 0 ? -1 : 0;
}

int cmd_status(struct wk_state *st, int argc, char **argv)
{
	int i, alive, got;

	if (argc < 1)
		return wk_err(EX_USAGE_, "usage: %s [-d STATE_DIR] status ID...", PROG);
	for (i = 0; i < argc; i++) {
		struct wire_rec r = { 0 };

		got = wk_attempt_status(st, argv[i], &r, &alive);
		if (got < 0) {
			wire_free(&r);
			return wk_errsys(EX_OSERR_, "attempt %s", argv[i]);
		}
		if ((got == 0 && unknown_rec(&r, argv[i]) < 0) ||
		    wire_set(&r, "alive", alive ? "1" : "0") < 0 || wk_print(&r) < 0) {
			wire_free(&r);
			return wk_errsys(EX_OSERR_, "stdout");
		}
		wire_free(&r);
	}
	return 0;
}

/* ---- watch ------------------------------------------------------------- */

/* Print attempts/NAME (an ID.state) if it is there. */
static int print_state_file(const struct wk_state *st, const char *name)
{
	size_t n = strlen(name);
	char *id;
	struct wire_rec r = { 0 };
	int got, rc = 0;

	if (name[0] == '.' || n <= 6 || strcmp(name + n - 6, ".state") != 0)
		return 0;
	id = strndup(name, n - 6);
	if (!id)
		return -1;
	if (wk_id_ok(id)) {
		got = wk_state_read(st, id, &r);
		/* Gone again (replaced, or removed): its next event will
		 * say.  A malformed file is skipped, not fatal. */
		if (got == 1)
			rc = wk_print(&r);
	}
	wire_free(&r);
	free(id);
	return rc;
}

/*
 * Requests on watch's standard input (LAYOUT.md section 10): a record
 * whose first field is `request launch`, the rest being a launch spec.
 * The launch runs in a child of ours exactly as `launch` would run it,
 * without a new ssh session or exec, and its exit status, standard
 * output and error come back as one `reply launch` record on the
 * stream.  One at a time: state events wait in the inotify queue.
 */
struct watch_launch {
	struct wk_state *st;
	struct wire_rec spec;   /* a view into the request */
	int ifd;
};

static void watch_launch_child(const void *arg)
{
	const struct watch_launch *w = arg;

	close(w->ifd);
	signal(SIGPIPE, SIG_DFL);       /* as a launcher run by ssh has it */
	_exit(launch_rec(w->st, &w->spec));
}

static int watch_request(struct wk_state *st, int ifd, struct wire_rec *req)
{
	struct watch_launch w = { st, { NULL, 0, 0 }, ifd };
	struct wire_rec out = { 0 };
	struct wk_child c;
	char *err = NULL;
	int rc;

	if (req->n == 0 || strcmp(req->f[0].key, "request") != 0 ||
	    strcmp(req->f[0].val, "launch") != 0) {
		rc = wire_add(&out, "reply", req->n ? req->f[0].val : "") < 0 ||
		     wire_add(&out, "exit", "64") < 0 ||
		     wire_add(&out, "error", PROG ": watch: unknown request\n") < 0 || wk_print(&out) < 0;
		wire_free(&out);
		return rc ? -1 : 0;
	}
	w.spec.f = req->f + 1;
	w.spec.n = w.spec.cap = req->n - 1;
	/* The reply names the attempt it answers (the spec's own field). */
	if (wire_add(&out, "reply", "launch") < 0 ||
	    (wire_get(&w.spec, "attempt") && wire_add(&out, "attempt", wire_get(&w.spec, "attempt")) < 0)) {
		wire_free(&out);
		return -1;
	}
	fflush(NULL);
	if (wk_run_child(watch_launch_child, &w, mono_ms() + WATCH_LAUNCH_MS, 1u << 20, &c, &err) < 0) {
		rc = wire_add(&out, "exit", "71") < 0 ||
		     wire_add(&out, "error", err ? err : "out of memory") < 0 || wk_print(&out) < 0;
		free(err);
		wire_free(&out);
		return rc ? -1 : 0;
	}
	rc = (WIFEXITED(c.status) && !c.timed_out && !c.overflow && !c.broken ?
	      wk_set_ll(&out, "exit", WEXITSTATUS(c.status)) :
	      wire_add(&out, "failed", c.timed_out ? "timed out" : c.overflow ? "too much output" :
			   WIFSIGNALED(c.status) ? wk_signame(WTERMSIG(c.status)) : "broken")) < 0 ||
	     wire_addn(&out, "out", c.out, c.outlen) < 0 || wire_addn(&out, "error", c.err, c.errlen) < 0 ||
	     wk_print(&out) < 0;
	wk_child_free(&c);
	wire_free(&out);
	return rc ? -1 : 0;
}

/* Read what the controller sent into *IN; run every whole request.
 * 1 when it went away, 0 to go on, -1 on an error (said). */
static int watch_input(struct wk_state *st, int ifd, char **in, size_t *len)
{
	char tmp[65536];
	ssize_t n = read(0, tmp, sizeof tmp);
	size_t off = 0;
	int rc;

	if (n == 0)
		return 1;
	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 0 : 1;
	{
		char *nb = realloc(*in, *len + (size_t)n);

		if (!nb) {
			wk_errsys(EX_OSERR_, "out of memory");
			return -1;
		}
		*in = nb;
		memcpy(*in + *len, tmp, (size_t)n);
		*len += (size_t)n;
	}
	for (;;) {
		struct wire_rec req = { 0 };
		const char *why = NULL;
		long used = wire_parse(*in + off, *len - off, &req, &why);

		if (used == 0)
			break;
		if (used < 0) {
			wk_err(EX_USAGE_, "watch: bad request: %s", why ? why : strerror(errno));
			return -1;
		}
		off += (size_t)used;
		rc = watch_request(st, ifd, &req);
		wire_free(&req);
		if (rc < 0)
			return 1;       /* the controller went away (EPIPE) */
	}
	memmove(*in, *in + off, *len - off);
	*len -= off;
	return 0;
}

/*
 * Staged attempts whose afters ended without their supervisor's baton
 * (it was killed, the machine rebooted): `baton` for them, in a
 * grandchild of its own session with nothing of the stream, so that
 * the stream is not held up and no zombie is left.
 */
static void watch_orphans(struct wk_state *st)
{
	pid_t pid;
	int status;

	if (staged_any(st) <= 0)
		return;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		wk_errsys(0, "fork");
		return;
	}
	if (pid == 0) {
		pid = fork();
		if (pid == 0) {
			if (setsid() < 0) {
				/* A process group leader already: it runs all
				 * the same. */
			}
			baton_exec(st, -1);
		}
		_exit(0);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
}

int cmd_watch(struct wk_state *st, int argc, char **argv)
{
	int ifd, rc = 0;
	struct wire_rec r = { 0 };
	char *att = xasprintf("%s/attempts", st->path), *in = NULL;
	size_t inlen = 0;

	(void)argv;
	if (argc != 0) {
		free(att);
		return wk_err(EX_USAGE_, "usage: %s [-d STATE_DIR] watch", PROG);
	}
	signal(SIGPIPE, SIG_IGN);
	ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (ifd < 0 || !att || inotify_add_watch(ifd, att, IN_MOVED_TO | IN_ONLYDIR) < 0) {
		rc = wk_errsys(EX_OSERR_, "inotify %s", att ? att : "attempts");
		free(att);
		if (ifd >= 0)
			close(ifd);
		return rc;
	}
	free(att);
	/* `stage 1`: launch requests may carry `after` (the baton). */
	if (wire_add(&r, "ready", "1") < 0 || wire_add(&r, "requests", "launch") < 0 ||
	    (!st->slurm && wire_add(&r, "stage", "1") < 0) || wk_print(&r) < 0) {
		wire_free(&r);
		close(ifd);
		return wk_errsys(EX_OSERR_, "stdout");
	}
	wire_free(&r);
	if (!st->slurm)
		watch_orphans(st);
	for (;;) {
		struct pollfd p[2] = { { 0, POLLIN, 0 }, { ifd, POLLIN, 0 } };
		int pr = poll(p, 2, -1);

		if (pr < 0) {
			if (errno == EINTR)
				continue;
			rc = wk_errsys(EX_OSERR_, "poll");
			break;
		}
		if (p[0].revents & POLLIN) {
			pr = watch_input(st, ifd, &in, &inlen);
			if (pr != 0) {
				rc = pr < 0 ? EX_OSERR_ : 0;
				break;  /* the controller went away, or is confused */
			}
		} else if (p[0].revents & (POLLHUP | POLLERR | POLLNVAL)) {
			break;
		}
		if (p[1].revents & POLLIN) {
			char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
			ssize_t n;

			while ((n = read(ifd, buf, sizeof buf)) > 0) {
				char *q = buf;

				while (q < buf + n && rc == 0) {
					struct inotify_event *ev = (struct inotify_event *)q;

					if (ev->mask & IN_Q_OVERFLOW) {
						/* Events were lost: say so, the
						 * reader asks status for what
						 * it follows. */
						struct wire_rec o = { 0 };

						if (wire_add(&o, "overflow", "1") < 0 || wk_print(&o) < 0)
							rc = -1;
						wire_free(&o);
					} else if (ev->len && print_state_file(st, ev->name) < 0) {
						rc = -1;
					}
					q += sizeof *ev + ev->len;
				}
			}
			if (rc < 0) {
				rc = errno == EPIPE ? 0 : wk_errsys(EX_OSERR_, "stdout");
				break;
			}
		}
	}
	close(ifd);
	free(in);
	return rc;
}

/* ---- cancel -------------------------------------------------------------- */

/*
 * cancel and pause of an attempt R says is only staged (the baton,
 * LAYOUT.md section 8): ended as WS with REASON before it starts
 * (baton.c staged_end, unstage's way), and that record answered.  1:
 * answered, *RC the exit status (75 when a baton is starting it just
 * now: its record as it is, and a line); 0: not staged (any more), *R
 * read again (*GOT): go on as for any attempt.
 */
static int end_staged(struct wk_state *st, const char *id, enum wire_state ws, const char *reason,
		      struct wire_rec *r, int *got, int *rc)
{
	int ex, alive, e;

	wire_free(r);
	e = staged_end(st, id, ws, reason, r, &ex);
	if (e < 0) {
		*rc = ex;
		return 1;
	}
	if (e == 1) {
		*rc = wk_print(r) < 0 ? wk_errsys(EX_OSERR_, "stdout") : 0;
		return 1;
	}
	wire_free(r);
	*got = wk_attempt_status(st, id, r, &alive);
	if (*got < 0) {
		*rc = wk_errsys(EX_OSERR_, "attempt %s", id);
		return 1;
	}
	if (e == 2) {
		if (*got == 0 && unknown_rec(r, id) < 0)
			*rc = wk_errsys(EX_OSERR_, "out of memory");
		else if (wk_print(r) < 0)
			*rc = wk_errsys(EX_OSERR_, "stdout");
		else
			*rc = wk_err(EX_TEMPFAIL_, "attempt %s is being started: ask again", id);
		return 1;
	}
	return 0;
}

int cmd_cancel(struct wk_state *st, int argc, char **argv)
{
	const char *id;
	struct wire_rec r = { 0 };
	int alive, got, adir, fd, rc;
	long long until;

	if (argc != 1)
		return wk_err(EX_USAGE_, "usage: %s [-d STATE_DIR] cancel ID", PROG);
	id = argv[0];
	got = wk_attempt_status(st, id, &r, &alive);
	if (got < 0)
		return wk_errsys(EX_OSERR_, "attempt %s", id);
	if (got == 1 && wk_state_is(&r, WS_STAGED) &&
	    end_staged(st, id, WS_CANCELLED, "cancelled before it started", &r, &got, &rc)) {
		wire_free(&r);
		return rc;
	}
	if (got == 0) {
		wire_free(&r);
		return wk_err(EX_NOINPUT_, "unknown attempt %s", id);
	}
	if (!wk_state_final(wire_get(&r, "state"))) {
		/* Ask the supervisor (it watches for this file). */
		adir = openat(st->attfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (adir < 0) {
			wire_free(&r);
			return wk_errsys(EX_OSERR_, "%s/attempts/%s", st->path, id);
		}
		fd = openat(adir, "cancel", O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 || close(fd) < 0) {
			rc = wk_errsys(EX_OSERR_, "%s/attempts/%s/cancel", st->path, id);
			close(adir);
			wire_free(&r);
			return rc;
		}
		close(adir);
		/* A Slurm job: taken out of Slurm while it is pending, its
		 * batch step told (SIGUSR2) once it runs. */
		if (st->slurm && slurm_cancel_pending(st, id, &r) < 0) {
			rc = wk_errsys(EX_OSERR_, "%s/attempts/%s", st->path, id);
			wire_free(&r);
			return rc;
		}
		/* Not heard (Slurm busy, the step not there yet): the cancel
		 * file stands, and the controller asks again until the
		 * attempt ends. */
		if (st->slurm && !wk_state_final(wire_get(&r, "state"))) {
			char *why = NULL;

			slurm_signal(&r, "USR2", &why);
			free(why);
		}
		/* Wait for the end: SIGTERM, then SIGKILL KILL_DELAY later. */
		until = mono_ms() + (KILL_DELAY + 5) * 1000LL;
		while (!wk_state_final(wire_get(&r, "state")) && mono_ms() < until) {
			sleep_ms(20);
			wire_free(&r);
			got = wk_attempt_status(st, id, &r, &alive);
			if (got < 0)
				return wk_errsys(EX_OSERR_, "attempt %s", id);
			if (got == 0 && unknown_rec(&r, id) < 0)
				return wk_errsys(EX_OSERR_, "out of memory");
		}
	}
	rc = wk_print(&r) < 0 ? wk_errsys(EX_OSERR_, "stdout") : 0;
	wire_free(&r);
	return rc;
}

/* ---- pause --------------------------------------------------------------- */

/* Whether the attempt in ADIR was launched resumable (its spec says
 * resumable 1): 1 or 0, or -1 with errno (ENOENT: no spec yet). */
static int spec_resumable(int adir)
{
	struct wire_rec r = { 0 };
	const char *why;
	char *buf;
	size_t n;
	long got;
	long long v = 0;

	if (read_capped(adir, "spec", WIRE_MAX_RECORD, &buf, &n) < 0)
		return -1;
	got = wire_parse(buf, n, &r, &why);
	free(buf);
	if (got <= 0) {
		wire_free(&r);
		errno = EINVAL;
		return -1;
	}
	got = wire_get_ll(&r, "resumable", &v) == 0 && v == 1;
	wire_free(&r);
	return (int)got;
}

/*
 * Ask a resumable attempt to checkpoint: create attempts/ID/pause (the
 * job's SSHGPU_PAUSE_FILE) atomically and answer the state record at
 * once.  The supervisor hears of the file (inotify) and records
 * `pausing`; how the pause ends is for `status` and `watch` to tell.
 */
int cmd_pause(struct wk_state *st, int argc, char **argv)
{
	const char *id;
	struct wire_rec r = { 0 }, req = { 0 };
	int alive, got, adir = -1, res, rc;
	long long until, grace;
	char *tmp, *body = NULL;
	long blen = 0;

	/* pause --grace SECS --why TEXT --fail TEXT ID: a yield (the
	 * controller wants the cards back; the job re-queues by itself). */
	if (argc == 7 && !strcmp(argv[0], "--grace") && !strcmp(argv[2], "--why") &&
	    !strcmp(argv[4], "--fail")) {
		if (wire_add(&req, "grace", argv[1]) < 0 || wire_add(&req, "why", argv[3]) < 0 ||
		    wire_add(&req, "fail", argv[5]) < 0)
			return wk_errsys(EX_OSERR_, "out of memory");
		if (wire_get_ll(&req, "grace", &grace) < 0 || grace < 0 || grace > 315360000) {
			wire_free(&req);
			return wk_err(EX_USAGE_, "pause: --grace: '%s' is not a number of seconds",
				      argv[1]);
		}
		blen = wire_format(&req, &body);
		wire_free(&req);
		if (blen < 0)
			return wk_errsys(EX_OSERR_, "out of memory");
		argv += 6;
		argc -= 6;
	}
	if (argc != 1) {
		free(body);
		return wk_err(EX_USAGE_, "usage: %s [-d STATE_DIR] pause "
			      "[--grace SECS --why TEXT --fail TEXT] ID", PROG);
	}
	id = argv[0];
	got = wk_attempt_status(st, id, &r, &alive);
	if (got < 0) {
		rc = wk_errsys(EX_OSERR_, "attempt %s", id);
		goto out;
	}
	/* Only staged: it goes back to the queue before it starts,
	 * resumable or not (a yield the same). */
	if (got == 1 && wk_state_is(&r, WS_STAGED) &&
	    end_staged(st, id, WS_UNSTAGED, "paused before it started: back in the queue", &r, &got,
		       &rc))
		goto out;
	if (got == 0) {
		rc = wk_err(EX_NOINPUT_, "unknown attempt %s", id);
		goto out;
	}
	adir = openat(st->attfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (adir < 0) {
		rc = wk_errsys(EX_OSERR_, "%s/attempts/%s", st->path, id);
		goto out;
	}
	/* The launcher writes the spec right after it takes the lock;
	 * an attempt that reads as starting may not have it yet. */
	until = mono_ms() + LAUNCH_WAIT_MS;
	while ((res = spec_resumable(adir)) < 0 && errno == ENOENT && mono_ms() < until)
		sleep_ms(20);
	if (res < 0) {
		rc = wk_errsys(EX_OSERR_, "%s/attempts/%s/spec", st->path, id);
		goto out;
	}
	if (res == 0) {
		rc = wk_err(1, "attempt %s is not resumable", id);
		goto out;
	}
	if (!wk_state_final(wire_get(&r, "state"))) {
		/* A pause asked already stands (the supervisor has taken it
		 * as it was): the first request is the one that counts. */
		tmp = xasprintf(".pause.%ld.tmp", (long)getpid());
		if (faccessat(adir, "pause", F_OK, AT_SYMLINK_NOFOLLOW) < 0 &&
		    (!tmp || atomic_write_at(adir, tmp, "pause", body ? body : "", (size_t)blen,
					     0600, 1) < 0)) {
			rc = wk_errsys(EX_OSERR_, "%s/attempts/%s/pause", st->path, id);
			free(tmp);
			goto out;
		}
		free(tmp);
		/* A Slurm job that runs: its batch step looks (SIGUSR1);
		 * one still pending sees the file when it starts. */
		if (st->slurm && !wk_state_is(&r, WS_STARTING)) {
			char *why = NULL;

			if (slurm_signal(&r, "USR1", &why) < 0) {
				rc = wk_err(EX_UNAVAILABLE_, "%s", why ? why : "scancel failed");
				free(why);
				goto out;
			}
		}
		/* The record as it is now (pausing, when the supervisor
		 * was quick); no waiting for the outcome. */
		wire_free(&r);
		got = wk_attempt_status(st, id, &r, &alive);
		if (got < 0) {
			rc = wk_errsys(EX_OSERR_, "attempt %s", id);
			goto out;
		}
		if (got == 0 && unknown_rec(&r, id) < 0) {
			rc = wk_errsys(EX_OSERR_, "out of memory");
			goto out;
		}
	}
	rc = wk_print(&r) < 0 ? wk_errsys(EX_OSERR_, "stdout") : 0;
out:
	if (adir >= 0)
		close(adir);
	wire_free(&r);
	free(body);
	return rc;
}

/* ---- log ----------------------------------------------------------------- */

/* Copy what FD has now to stdout.  0, or -1 (errno). */
static int copy_out(int fd)
{
	char buf[65536];

	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0)
			return 0;
		if (write_full(1, buf, (size_t)n) < 0)
			return -1;
	}
}

int cmd_log(struct wk_state *st, int argc, char **argv)
{
	const char *id = NULL;
	int follow = 0, i, alive, got, adir = -1, fd = -1, ifd = -1, rc = 0, final;
	struct wire_rec r = { 0 };
	char *adir_path = NULL, *att = NULL;

	for (i = 0; i < argc; i++) {
		if (strcmp(argv[i], "-f") == 0)
			follow = 1;
		else if (!id)
			id = argv[i];
		else
			break;
	}
	if (!id || i < argc)
		return wk_err(EX_USAGE_, "usage: %s [-d STATE_DIR] log ID [-f]", PROG);
	got = wk_attempt_status(st, id, &r, &alive);
	if (got < 0)
		return wk_errsys(EX_OSERR_, "attempt %s", id);
	if (got == 0)
		return wk_err(EX_NOINPUT_, "unknown attempt %s", id);
	if (wk_state_is(&r, WS_STAGED)) {
		/* No log before it starts (LAYOUT.md section 10). */
		wire_free(&r);
		return wk_err(EX_NOINPUT_, "attempt %s is staged: no log yet", id);
	}
	final = wk_state_final(wire_get(&r, "state"));
	wire_free(&r);
	signal(SIGPIPE, SIG_IGN);
	adir = openat(st->attfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (adir < 0 && errno != ENOENT)
		return wk_errsys(EX_OSERR_, "%s/attempts/%s", st->path, id);
	if (follow && !final) {
		/* The doorbell: the log grows, or a state file is renamed
		 * into attempts/.  A 1 s poll covers anything missed. */
		adir_path = xasprintf("%s/attempts/%s", st->path, id);
		att = xasprintf("%s/attempts", st->path);
		ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
		if (ifd < 0 || !adir_path || !att ||
		    inotify_add_watch(ifd, att, IN_MOVED_TO | IN_ONLYDIR) < 0 ||
		    (adir >= 0 && inotify_add_watch(ifd, adir_path, IN_MODIFY | IN_CREATE | IN_ONLYDIR) < 0)) {
			rc = wk_errsys(EX_OSERR_, "inotify %s", adir_path ? adir_path : id);
			goto out;
		}
	}
	for (;;) {
		if (fd < 0 && adir >= 0) {
			fd = openat(adir, "log", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
			if (fd < 0 && errno != ENOENT) {
				rc = wk_errsys(EX_OSERR_, "%s/attempts/%s/log", st->path, id);
				goto out;
			}
		}
		if (fd >= 0 && copy_out(fd) < 0) {
			rc = errno == EPIPE ? 0 : wk_errsys(EX_OSERR_, "copying the log");
			goto out;
		}
		if (!follow || final)
			break;
		{
			struct pollfd p[2] = { { ifd, POLLIN, 0 }, { 1, 0, 0 } };
			int pr = poll(p, 2, 1000);
			char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

			if (pr < 0 && errno != EINTR) {
				rc = wk_errsys(EX_OSERR_, "poll");
				goto out;
			}
			if (pr > 0 && (p[1].revents & (POLLERR | POLLHUP)))
				goto out;       /* the reader went away */
			while (read(ifd, buf, sizeof buf) > 0)
				;
		}
		/* Final (or lost) now?  Then one more copy takes the rest:
		 * the job's processes are all gone by then. */
		got = wk_attempt_status(st, id, &r, &alive);
		if (got < 0) {
			rc = wk_errsys(EX_OSERR_, "attempt %s", id);
			goto out;
		}
		final = got == 0 || wk_state_final(wire_get(&r, "state"));
		wire_free(&r);
	}
out:
	if (fd >= 0)
		close(fd);
	if (adir >= 0)
		close(adir);
	if (ifd >= 0)
		close(ifd);
	free(adir_path);
	free(att);
	return rc;
}
