/*
 * supervise.c - the supervisor that a launch leaves behind with each
 * job (LAYOUT.md section 8, step 6, and section 9): it leaves ssh's
 * session, starts the job in its own process group (job_child), writes
 * "running", enforces the time limit (with its pause and grace for a
 * resumable job) and cancel and pause requests, waits as subreaper for
 * the job and everything it started, then releases the leases and
 * writes the final state, decided in one place (final_state).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launch.h"
#include "json.h"

extern char **environ;

enum stop_why { STOP_NONE, STOP_CANCEL, STOP_TIMEOUT, STOP_SIGNAL, STOP_YIELD };

/* Who asked a resumable job to checkpoint (SPEC section 9): a user, the
 * time limit, or the controller for its cards (a preemption, a drain:
 * `pause --grace`), which re-queues it by itself. */
enum pause_why { PAUSE_NONE, PAUSE_USER, PAUSE_TIMEOUT, PAUSE_YIELD };

struct sup {
	struct launch *l;
	int notify;             /* write end to the launcher, or -1 */
	pid_t pid;              /* the job's main process */
	long long started;      /* wall clock ms */
	int main_alive, status;
	enum stop_why stop;
	int stop_sig;           /* with STOP_SIGNAL */
	const char *failure;    /* before exec: "cwd ...", "exec ..." */
	enum pause_why pause;
	int time_limit;         /* the time limit was reached */
	/* Decided when the main process exits after a pause request:
	 * either the checkpoint (paused), or why it is a failure. */
	char *ck_path;
	const char *pause_fail;
	char *pause_fail_owned;
	/* PAUSE_YIELD: the pause file's `why` and `fail`, and when its
	 * grace ends (mono ms). */
	char *yield_why, *yield_fail;
	long long yield_end;
};

static void tell_launcher(struct sup *s)
{
	if (s->notify >= 0) {
		if (write_full(s->notify, "1", 1) < 0) {
			/* The launcher is gone: nothing to tell. */
		}
		close(s->notify);
		s->notify = -1;
	}
}

/* The state record's common part: attempt, state, cards, log. */
static int base_state(struct sup *s, struct wire_rec *r, enum wire_state state)
{
	size_t i;
	struct launch *l = s->l;

	if (wire_add(r, "attempt", l->sp->id) < 0 || wire_add(r, "state", wire_state_name(state)) < 0)
		return -1;
	if (s->pid > 0 && (wk_set_ll(r, "pid", s->pid) < 0 || wk_set_ll(r, "pgid", s->pid) < 0))
		return -1;
	for (i = 0; i < l->sp->ngpu; i++)
		if (wire_addf(r, "gpu", "%lld", l->sp->gpu[i]) < 0 ||
		    wire_add(r, "uuid", l->uuid[i]) < 0)
			return -1;
	if (s->started && wk_set_ll(r, "started", s->started) < 0)
		return -1;
	if (wire_add(r, "log", l->log_path) < 0)
		return -1;
	if ((l->slurm_job && wire_add(r, "slurm_job", l->slurm_job) < 0) ||
	    (l->host && wire_add(r, "host", l->host) < 0))
		return -1;
	if (l->sp->checkpoint && wire_add(r, "checkpoint", l->sp->checkpoint) < 0)
		return -1;
	return 0;
}

/* "killed by signal N (SIGNAME)" and SUFFIX. */
static char *signal_reason(int sig, const char *suffix)
{
	const char *n = wk_signame(sig);

	return n ? xasprintf("killed by signal %d (%s)%s", sig, n, suffix)
		 : xasprintf("killed by signal %d%s", sig, suffix);
}

/* The `pausing` record: running's keys, the reason, and `timeout 1`
 * when the time limit asked, `requeue 1` for a yield. */
static void write_pausing(struct sup *s)
{
	struct wire_rec rec = { 0 };
	int timeout = s->pause == PAUSE_TIMEOUT, yield = s->pause == PAUSE_YIELD;

	if (base_state(s, &rec, WS_PAUSING) < 0 ||
	    wire_add(&rec, "reason", timeout ? "time limit reached: pause requested" :
				     yield ? s->yield_why : "pause requested") < 0 ||
	    (timeout && wire_add(&rec, "timeout", "1") < 0) ||
	    (yield && wire_add(&rec, "requeue", "1") < 0) ||
	    wk_state_write(s->l->st, s->l->sp->id, &rec) < 0)
		fprintf(stderr, "%s: writing the pausing state: %s\n", PROG, strerror(errno));
	wire_free(&rec);
}

/* attempts/ID/pause exists (of any kind: the job only tests for it). */
static int pause_file_there(struct launch *l)
{
	struct stat sb;

	if (fstatat(l->adir, "pause", &sb, AT_SYMLINK_NOFOLLOW) == 0)
		return 1;
	if (errno != ENOENT)
		fprintf(stderr, "%s: %s/pause: %s\n", PROG, l->adir_path, strerror(errno));
	return 0;
}

/*
 * The pause file is there: whose is it?  Empty, a user's; a record
 * with `grace SECS`, `why TEXT` and `fail TEXT` (cmd_pause --grace), a
 * yield, whose checkpoint must come within the grace.  Sets s->pause.
 */
static void take_pause(struct sup *s)
{
	struct wire_rec r = { 0 };
	const char *why, *w, *f;
	char *buf = NULL;
	size_t n = 0;
	long long grace;

	s->pause = PAUSE_USER;
	if (read_capped(s->l->adir, "pause", WIRE_MAX_RECORD, &buf, &n) < 0 || !n) {
		free(buf);
		return;
	}
	if (wire_parse(buf, n, &r, &why) > 0 && wire_get_ll(&r, "grace", &grace) == 0 &&
	    grace >= 0 && grace <= 315360000 &&
	    (w = wire_get(&r, "why")) && (f = wire_get(&r, "fail")) &&
	    (s->yield_why = strdup(w)) && (s->yield_fail = strdup(f))) {
		s->pause = PAUSE_YIELD;
		s->yield_end = mono_ms() + grace * 1000;
	}
	wire_free(&r);
	free(buf);
}

/* The supervisor's own pause request at the time limit: the file the
 * job polls, made atomically.  0, or -1 (said on the log). */
static int make_pause_file(struct launch *l)
{
	char *tmp = xasprintf(".pause.%ld.tmp", (long)getpid());
	int rc = tmp ? atomic_write_at(l->adir, tmp, "pause", "", 0, 0600, 1) : -1;

	if (rc < 0)
		fprintf(stderr, "%s: %s/pause: %s\n", PROG, l->adir_path, strerror(errno));
	free(tmp);
	return rc;
}

/*
 * Read the checkpoint marker attempts/ID/checkpoint: a regular file (no
 * symbolic link), at most CK_MARKER_MAX bytes, a JSON object with a
 * non-empty "checkpoint" string.  0 with *path (malloc'd), 1 with
 * *reason (malloc'd; NULL when out of memory).
 */
static int read_marker(struct launch *l, char **path, char **reason)
{
	char *where = xasprintf("%s/checkpoint", l->adir_path), *buf = NULL, *why = NULL;
	struct stat sb;
	size_t n, plen;
	int fd, e;
	enum ck_status cs;

	*path = *reason = NULL;
	if (!where)
		return 1;
	/* O_NONBLOCK: a FIFO under that name must not hang us. */
	fd = openat(l->adir, "checkpoint", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		if (e == ENOENT)
			*reason = xasprintf("exit status 75 but no checkpoint marker at %s", where);
		else if (e == ELOOP)
			*reason = xasprintf("checkpoint marker at %s is a symbolic link", where);
		else
			*reason = xasprintf("checkpoint marker at %s: %s", where, strerror(e));
		free(where);
		return 1;
	}
	if (fstat(fd, &sb) < 0) {
		*reason = xasprintf("checkpoint marker at %s: %s", where, strerror(errno));
	} else if (!S_ISREG(sb.st_mode)) {
		*reason = xasprintf("checkpoint marker at %s is not a regular file", where);
	} else if (sb.st_size > CK_MARKER_MAX) {
		*reason = xasprintf("checkpoint marker at %s is larger than %d KiB", where,
				      CK_MARKER_MAX / 1024);
	} else if (read_fd(fd, CK_MARKER_MAX, &buf, &n) < 0) {
		*reason = errno == EFBIG ?
			  xasprintf("checkpoint marker at %s is larger than %d KiB", where,
				      CK_MARKER_MAX / 1024) :
			  xasprintf("checkpoint marker at %s: %s", where, strerror(errno));
	}
	close(fd);
	free(where);
	if (*reason || !buf)
		return 1;
	cs = ck_marker_parse(buf, n, path, &plen, &why);
	free(buf);
	switch (cs) {
	case CK_OK:
		return 0;
	case CK_INVALID:
		*reason = xasprintf("checkpoint marker is not valid JSON: %s",
				      why ? why : "out of memory");
		break;
	case CK_NOT_OBJECT:
		*reason = strdup("checkpoint marker is not a JSON object");
		break;
	case CK_NO_PATH:
		*reason = strdup("checkpoint marker has no non-empty \"checkpoint\" string");
		break;
	case CK_DUP:
		*reason = strdup("checkpoint marker has \"checkpoint\" more than once");
		break;
	case CK_NUL:
		*reason = strdup("checkpoint marker's \"checkpoint\" holds a NUL byte");
		break;
	case CK_NOMEM:
		break;
	}
	free(why);
	return 1;
}

/*
 * The main process has exited (s->status): was it a pause?  Only for a
 * resumable attempt that nothing stopped.  A pause file that the loop
 * has not heard of yet (the job was quicker than the inotify event)
 * counts as the request it is: stale ones were removed before the job
 * started.  Sets s->ck_path, or s->pause_fail, or nothing (no pause).
 */
static void pause_outcome(struct sup *s)
{
	struct launch *l = s->l;
	int st = s->status;
	char *r = NULL;

	if (!l->sp->resumable || s->stop != STOP_NONE || s->failure || s->pid <= 0)
		return;
	if (s->pause == PAUSE_NONE) {
		if (!pause_file_there(l))
			return;
		take_pause(s);
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return;         /* done before it could pause: it succeeded */
	if (WIFEXITED(st) && WEXITSTATUS(st) == EX_TEMPFAIL_) {
		if (read_marker(l, &s->ck_path, &r) == 0)
			return;
	} else if (WIFEXITED(st)) {
		r = xasprintf("paused but exited with status %d (expected %d)", WEXITSTATUS(st),
				EX_TEMPFAIL_);
	} else {
		r = signal_reason(WTERMSIG(st), " after a pause request");
	}
	s->pause_fail_owned = r;
	s->pause_fail = r ? r : "the pause did not end in a checkpoint";
}

/*
 * The one place where the end of an attempt is decided.  A stop
 * (cancel, the time limit and its grace, a signal to the worker) wins;
 * then the pause outcome of pause_outcome(); then the exit status.
 */
static int final_state(struct sup *s, struct wire_rec *r)
{
	int st = s->status;
	enum wire_state state;
	char *reason = NULL;
	int rc;

	if (s->failure) {
		state = WS_FAILED;
		reason = strdup(s->failure);
	} else if (s->stop == STOP_CANCEL) {
		state = WS_CANCELLED;
		reason = strdup("cancelled");
	} else if (s->stop == STOP_SIGNAL) {
		state = WS_CANCELLED;
		reason = xasprintf("cancelled: the worker got %s%s", wk_signame(s->stop_sig),
				   s->l->in_slurm ? " from Slurm (scancel, its time limit, or the node "
						    "going down)" : "");
	} else if (s->stop == STOP_TIMEOUT) {
		state = WS_FAILED;
		reason = strdup("timeout");
	} else if (s->stop == STOP_YIELD) {
		state = WS_FAILED;
		reason = strdup(s->yield_fail);
	} else if (s->ck_path) {
		state = WS_PAUSED;
		reason = s->pause == PAUSE_YIELD ? xasprintf("%s: checkpoint saved", s->yield_why) :
			 strdup(s->pause == PAUSE_TIMEOUT ? "time limit reached: checkpoint saved"
							  : "checkpoint saved");
	} else if (s->pause_fail) {
		state = WS_FAILED;
		reason = strdup(s->pause_fail);
	} else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		state = WS_SUCCEEDED;
	} else if (WIFEXITED(st)) {
		state = WS_FAILED;
		reason = xasprintf("exit status %d", WEXITSTATUS(st));
	} else {
		state = WS_FAILED;
		reason = signal_reason(WTERMSIG(st), "");
	}
	rc = base_state(s, r, state);
	if (rc == 0 && s->ck_path && state == WS_PAUSED)
		rc = wire_set(r, "checkpoint", s->ck_path);
	if (rc == 0 && !s->failure && s->pid > 0) {
		if (WIFEXITED(st))
			rc = wk_set_ll(r, "exit_code", WEXITSTATUS(st));
		else if (WIFSIGNALED(st))
			rc = wk_set_ll(r, "signal", WTERMSIG(st));
	}
	if (rc == 0)
		rc = wk_set_ll(r, "finished", now_ms());
	if (rc == 0 && reason)
		rc = wire_add(r, "reason", reason);
	/* timeout 1: the time limit decided this end (the kill, or the
	 * pause it asked for). */
	if (rc == 0 && !s->failure &&
	    (s->stop == STOP_TIMEOUT || (s->stop == STOP_NONE && s->pause == PAUSE_TIMEOUT)))
		rc = wire_add(r, "timeout", "1");
	/* requeue 1: checkpointed for a yield, the job resumes by itself. */
	if (rc == 0 && state == WS_PAUSED && s->pause == PAUSE_YIELD)
		rc = wire_add(r, "requeue", "1");
	if (rc == 0 && !reason && state != WS_SUCCEEDED) {
		errno = ENOMEM;
		rc = -1;
	}
	free(reason);
	return rc;
}

/* PATH (a /proc file: its size says nothing) read to its end. */
static int read_path(const char *path, size_t max, char **buf, size_t *n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), r, e;

	if (fd < 0)
		return -1;
	r = read_fd(fd, max, buf, n);
	e = errno;
	close(fd);
	errno = e;
	return r;
}

/* Signal our direct children (descendants orphaned onto us as
 * subreaper: they may have left the job's process group).  The kernel
 * lists them in /proc/self/task/PID/children (we have one thread);
 * without CONFIG_PROC_CHILDREN, every /proc/N/stat is read instead. */
static void signal_children(int sig)
{
	pid_t self = getpid();
	char *path = xasprintf("/proc/self/task/%ld/children", (long)self);
	char *buf, *p, *end;
	size_t n;
	DIR *d;
	struct dirent *e;

	if (path && read_path(path, 1u << 20, &buf, &n) == 0) {
		for (p = buf; *p; p = end) {
			long pid = strtol(p, &end, 10);

			if (end == p)
				break;
			if (pid > 0)
				kill((pid_t)pid, sig);
		}
		free(buf);
		free(path);
		return;
	}
	free(path);
	d = opendir("/proc");
	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		int ppid;
		char state;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		path = xasprintf("/proc/%s/stat", e->d_name);
		if (path && read_path(path, 65536, &buf, &n) == 0) {
			p = strrchr(buf, ')');
			if (p && sscanf(p + 1, " %c %d", &state, &ppid) == 2 && ppid == self)
				kill((pid_t)atoi(e->d_name), sig);
			free(buf);
		}
		free(path);
	}
	closedir(d);
}

/* In the job's child: never returns.  Failures before exec go to the
 * supervisor through EP as one line. */
static void job_child(struct launch *l, int ep) __attribute__((noreturn));
static void job_child(struct launch *l, int ep)
{
	sigset_t none;
	size_t i;
	char *msg;
	int e, fail = 0;

	/* Its own process group (the supervisor signals the group), the
	 * signal state of a fresh process, and the attempt's locks. */
	sigemptyset(&none);
	if (setpgid(0, 0) < 0 || signal(SIGPIPE, SIG_DFL) == SIG_ERR ||
	    sigprocmask(SIG_SETMASK, &none, NULL) < 0)
		fail = 1;
	for (i = 0; i < l->sp->ngpu && !fail; i++)
		fail = (l->lease[i] >= 0 && fcntl(l->lease[i], F_SETFD, 0) < 0) ||
		       (l->mark[i] >= 0 && fcntl(l->mark[i], F_SETFD, 0) < 0);
	if (fail || fcntl(l->lockfd, F_SETFD, 0) < 0) {
		e = errno;
		msg = xasprintf("worker: preparing the job: %s", strerror(e));
		goto out;
	}
	if (l->cwd && chdir(l->cwd) < 0) {
		e = errno;
		msg = xasprintf("cwd %s: %s", l->cwd, strerror(e));
		goto out;
	}
	environ = l->env.v;
	if (l->sp->shell) {
		execl("/bin/sh", "sh", "-c", l->sp->shell, (char *)NULL);
		e = errno;
		msg = xasprintf("exec /bin/sh: %s", strerror(e));
	} else {
		execvp(l->sp->argv[0], l->sp->argv);
		e = errno;
		msg = xasprintf("exec %s: %s", l->sp->argv[0], strerror(e));
	}
out:
	/* No message (out of memory) still reads as a failure: the
	 * supervisor sees the pipe close with the process exited 127. */
	if (write_full(ep, msg ? msg : "exec: out of memory", msg ? strlen(msg) : 19) < 0)
		_exit(126);
	_exit(127);
}

/* Read the pre-exec failure message (EOF right away: exec worked). */
static char *read_failure(int fd)
{
	char *b;
	size_t n;

	if (read_fd(fd, 65536, &b, &n) < 0)
		return xasprintf("exec: cannot read the job's status: %s", strerror(errno));
	if (n == 0) {
		free(b);
		return NULL;
	}
	return b;
}

static void reap(struct sup *s, int *none_left)
{
	int st;
	pid_t p;

	*none_left = 0;
	for (;;) {
		p = waitpid(-1, &st, WNOHANG);
		if (p > 0) {
			if (p == s->pid) {
				s->main_alive = 0;
				s->status = st;
			}
			continue;
		}
		if (p < 0 && errno == EINTR)
			continue;
		if (p < 0 && errno == ECHILD)
			*none_left = 1;
		return;
	}
}

/* Wait for the job and everything it started; enforce the time limit
 * (with its pause and grace for a resumable job), cancel and pause
 * requests.  Returns when no descendant is left. */
static void supervise_loop(struct sup *s, int sfd, int ifd, const char *cancel_path)
{
	const struct spec *sp = s->l->sp;
	long long now, deadline = 0, grace_end = 0, kill_at = 0, next_kill = 0;
	int term_sent = 0, none_left, decided = 0, grace_on = 0;

	if (sp->timeout > 0)
		deadline = mono_ms() + sp->timeout * 1000;
	for (;;) {
		struct pollfd p[2];
		long long wait = -1;
		int r, seen_cancel, seen_pause;

		reap(s, &none_left);
		/* The main process is gone: decide the pause outcome now,
		 * before its leftovers are stopped (they could touch the
		 * marker). */
		if (!s->main_alive && !decided) {
			decided = 1;
			pause_outcome(s);
		}
		if (none_left && !s->main_alive)
			return;
		now = mono_ms();
		/* The time limit: a resumable job is asked to checkpoint and
		 * gets the grace; any other is stopped. */
		if (s->main_alive && s->stop == STOP_NONE && deadline && !s->time_limit &&
		    now >= deadline) {
			s->time_limit = 1;
			if (!sp->resumable) {
				s->stop = STOP_TIMEOUT;
			} else {
				grace_on = 1;
				grace_end = now + sp->grace * 1000;
				/* Already pausing at the user's request: that
				 * request stands, the grace bounds it. */
				if (s->pause == PAUSE_NONE) {
					if (make_pause_file(s->l) < 0) {
						s->stop = STOP_TIMEOUT;
					} else {
						s->pause = PAUSE_TIMEOUT;
						write_pausing(s);
					}
				}
			}
		}
		if (s->main_alive && s->stop == STOP_NONE && grace_on && now >= grace_end)
			s->stop = STOP_TIMEOUT;
		if (s->main_alive && s->stop == STOP_NONE && s->pause == PAUSE_YIELD &&
		    now >= s->yield_end)
			s->stop = STOP_YIELD;
		/* Cancel, time limit, or the main process is gone: the rest
		 * of the attempt gets SIGTERM, and SIGKILL KILL_DELAY later. */
		if (!term_sent && (s->stop != STOP_NONE || !s->main_alive)) {
			term_sent = 1;
			kill(-s->pid, SIGTERM);
			signal_children(SIGTERM);
			kill_at = now + KILL_DELAY * 1000LL;
		}
		if (kill_at && now >= kill_at && now >= next_kill) {
			kill(-s->pid, SIGKILL);
			signal_children(SIGKILL);
			next_kill = now + 100;  /* again for new orphans */
		}
		/* Sleep until the next thing to do, or a signal or inotify
		 * event; with no time limit and nothing stopping, forever. */
		if (kill_at)
			wait = (now >= kill_at ? next_kill : kill_at) - now;
		else if (grace_on && s->stop == STOP_NONE)
			wait = grace_end - now;
		else if (s->pause == PAUSE_YIELD && s->stop == STOP_NONE)
			wait = s->yield_end - now;
		else if (deadline && !s->time_limit && s->stop == STOP_NONE)
			wait = deadline - now;
		if (wait != -1 && wait < 1)
			wait = 1;
		if (wait > 60000)
			wait = 60000;
		p[0].fd = sfd;
		p[0].events = POLLIN;
		p[1].fd = ifd;
		p[1].events = POLLIN;
		r = poll(p, 2, (int)wait);
		if (r < 0 && errno != EINTR) {
			fprintf(stderr, "%s: poll: %s\n", PROG, strerror(errno));
			sleep_ms(100);
		}
		seen_cancel = seen_pause = 0;
		if (r > 0 && p[0].revents) {
			struct signalfd_siginfo si;

			while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
				if (si.ssi_signo == SIGUSR1)
					seen_pause = 1;
				else if (si.ssi_signo == SIGUSR2)
					seen_cancel = 1;
				else if (si.ssi_signo != SIGCHLD && s->main_alive && s->stop == STOP_NONE) {
					s->stop = STOP_SIGNAL;
					s->stop_sig = (int)si.ssi_signo;
				}
			}
		}
		if (r > 0 && p[1].revents) {
			char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
			ssize_t n;

			while ((n = read(ifd, buf, sizeof buf)) > 0) {
				char *q = buf;

				while (q < buf + n) {
					struct inotify_event *ev = (struct inotify_event *)q;

					if ((ev->mask & IN_Q_OVERFLOW) ||
					    (ev->len && strcmp(ev->name, "cancel") == 0))
						seen_cancel = 1;
					if ((ev->mask & IN_Q_OVERFLOW) ||
					    (ev->len && strcmp(ev->name, "pause") == 0))
						seen_pause = 1;
					q += sizeof *ev + ev->len;
				}
			}
		}
		/* Cancel first: it wins over a pause. */
		if (seen_cancel && access(cancel_path, F_OK) == 0 && s->main_alive &&
		    s->stop == STOP_NONE)
			s->stop = STOP_CANCEL;
		if (seen_pause && sp->resumable && s->main_alive && s->stop == STOP_NONE &&
		    s->pause == PAUSE_NONE && pause_file_there(s->l)) {
			take_pause(s);
			write_pausing(s);
		}
	}
}

void supervise(struct launch *l, int notify)
{
	struct sup s;
	struct wire_rec rec = { 0 };
	sigset_t mask;
	int sfd = -1, ifd = -1, ep[2], nul, logfd, *keep, ex = 0;
	size_t nkeep = 0, i;
	char *cancel_path = NULL;

	memset(&s, 0, sizeof s);
	s.l = l;
	s.notify = notify;
	s.main_alive = 0;

	/* Leave ssh's session and its descriptors: ssh waits for every
	 * holder of the session's stdout/stderr to go. */
	if (setsid() < 0)
		fprintf(stderr, "%s: setsid: %s\n", PROG, strerror(errno));
	nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	logfd = openat(l->adir, "log", O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (nul < 0 || logfd < 0 || fchmod(logfd, 0600) < 0 || dup2(nul, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0) {
		/* Without a log there is no job: say why in the state, and
		 * let go of the launcher's streams all the same. */
		int fd;

		s.failure = "cannot open the attempt's log";
		for (fd = 0; fd <= 2; fd++)
			if (nul < 0 || dup2(nul, fd) < 0)
				close(fd);
	}
	if (nul >= 0)
		close(nul);
	if (logfd >= 0)
		close(logfd);
	keep = calloc(2 * l->sp->ngpu + 7, sizeof *keep);
	if (keep) {
		keep[nkeep++] = notify;
		keep[nkeep++] = l->adir;
		keep[nkeep++] = l->lockfd;
		keep[nkeep++] = l->st->fd;
		keep[nkeep++] = l->st->attfd;
		keep[nkeep++] = l->st->leasefd;
		keep[nkeep++] = l->st->stagedfd;
		for (i = 0; i < l->sp->ngpu; i++) {
			keep[nkeep++] = l->lease[i];
			if (l->mark[i] >= 0)
				keep[nkeep++] = l->mark[i];
		}
		/* One held by a controller's pipe would keep it waiting. */
		wk_other_fds(keep, nkeep, 0);
		free(keep);
	}
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		fprintf(stderr, "%s: PR_SET_CHILD_SUBREAPER: %s\n", PROG, strerror(errno));
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		fprintf(stderr, "%s: signal: %s\n", PROG, strerror(errno));
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	/* Slurm's way to the batch step (slurm.c): look at the pause
	 * file, the cancel file. */
	if (l->in_slurm) {
		sigaddset(&mask, SIGUSR1);
		sigaddset(&mask, SIGUSR2);
	}
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 ||
	    (sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
		fprintf(stderr, "%s: signalfd: %s\n", PROG, strerror(errno));
		if (!s.failure)
			s.failure = "worker: cannot watch for signals";
	}
	/* The watch first, then the look: a cancel made in between is
	 * seen either way. */
	cancel_path = xasprintf("%s/cancel", l->adir_path);
	ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (ifd < 0 || !cancel_path ||
	    inotify_add_watch(ifd, l->adir_path, IN_CREATE | IN_MOVED_TO | IN_ONLYDIR) < 0) {
		fprintf(stderr, "%s: inotify %s: %s\n", PROG, l->adir_path, strerror(errno));
		if (!s.failure)
			s.failure = "worker: cannot watch the attempt directory";
	}
	if (!s.failure && cancel_path && access(cancel_path, F_OK) == 0)
		s.stop = STOP_CANCEL;   /* cancelled before it started */
	/* Paused before it started (launch removed any stale pause file
	 * before it wrote the spec, so this one is a request): the job
	 * will see the file at once.  The marker must come from this job:
	 * none may be there before it starts. */
	if (!s.failure && s.stop == STOP_NONE && l->sp->resumable && pause_file_there(l))
		s.pause = PAUSE_USER;
	if (!s.failure && unlinkat(l->adir, "checkpoint", 0) < 0 && errno != ENOENT)
		s.failure = "worker: cannot remove a stale checkpoint marker";

	if (!s.failure && s.stop == STOP_NONE) {
		if (pipe2(ep, O_CLOEXEC) < 0) {
			s.failure = "worker: pipe failed";
		} else {
			s.started = now_ms();
			s.pid = fork();
			if (s.pid == 0)
				job_child(l, ep[1]);
			close(ep[1]);
			if (s.pid < 0) {
				s.failure = "worker: fork failed";
				s.pid = 0;
			} else {
				char *f;

				/* Also here, so that no signal to the group can
				 * come before it exists; EACCES once the child
				 * has exec'd (it did it itself then). */
				if (setpgid(s.pid, s.pid) < 0 && errno != EACCES && errno != ESRCH)
					fprintf(stderr, "%s: setpgid: %s\n", PROG, strerror(errno));
				s.main_alive = 1;
				f = read_failure(ep[0]);
				if (f) {
					/* Not exec'd: collect it, and say why. */
					while (waitpid(s.pid, &s.status, 0) < 0 && errno == EINTR)
						;
					s.main_alive = 0;
					s.failure = f;
				}
			}
			close(ep[0]);
		}
	}

	if (!s.failure && s.stop == STOP_NONE) {
		CRASH_POINT("worker supervise: job started", NULL);
		if (base_state(&s, &rec, WS_RUNNING) < 0 ||
		    wk_state_write(l->st, l->sp->id, &rec) < 0)
			fprintf(stderr, "%s: writing the running state: %s\n", PROG, strerror(errno));
		wire_free(&rec);
		if (s.pause != PAUSE_NONE)
			write_pausing(&s);
		tell_launcher(&s);
	}
	if (s.pid > 0)
		supervise_loop(&s, sfd, ifd, cancel_path);

	/* Leases first: the controller gives the cards to the next job
	 * the moment it reads the final state. */
	CRASH_POINT("worker supervise: job ended", NULL);
	unmark_leases(l);
	release_leases(l, 0);
	/* Its data synced, its name not yet: the next fsync of attempts/
	 * makes it durable -- the baton's, which comes first (the staged
	 * attempt's "starting" is written durably in attempts/ before its
	 * job is forked, so no start is on disk before this end), or ours
	 * below. */
	if (final_state(&s, &rec) < 0 || wk_state_write_data(l->st, l->sp->id, &rec) < 0) {
		fprintf(stderr, "%s: writing the final state: %s\n", PROG, strerror(errno));
		ex = EX_OSERR_;
	}
	CRASH_POINT("worker supervise: final state written", NULL);
	/* The attempt lock, let go now: a deck waits on it (the staged
	 * attempt's, baton.c), and nothing of the attempt lives on. */
	close(l->lockfd);
	l->lockfd = -1;
	CRASH_POINT("worker supervise: lock let go", NULL);
	wk_state_drop_old(l->st, l->sp->id);    /* freed now, beside the deck's start */
	wire_free(&rec);
	tell_launcher(&s);
	free(cancel_path);
	free(s.ck_path);
	free(s.pause_fail_owned);
	free(s.yield_why);
	free(s.yield_fail);
	/* The baton (LAYOUT.md section 8): an attempt staged on this node
	 * may have waited for this one.  The job and its leftovers are
	 * gone and the final state is written: its deck, woken by the
	 * lock let go above, starts it; become `baton` all the same, for
	 * one without a deck (a chain, a deck killed), which starts it
	 * at once; the leases go with the exec.  Not inside Slurm: Slurm
	 * starts its jobs. */
	if (!l->in_slurm && !l->st->slurm && staged_any(l->st) > 0)
		baton_exec(l->st, ifd);
	if (fsync_dir(l->st->attfd) < 0) {
		fprintf(stderr, "%s: attempts/: fsync: %s\n", PROG, strerror(errno));
		ex = EX_OSERR_;
	}
	_exit(ex);
}
