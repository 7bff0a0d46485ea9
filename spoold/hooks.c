/*
 * hooks.c - on_finish: a command run for every job that ends
 * (succeeded, failed, cancelled, lost), at least once, never waited for.
 *
 * The config's on_finish (a node's own for the jobs that ran there,
 * else the top level's: hook_argv) is run with the job's `status
 * --json` element on its standard input and CARDBATON_JOB_ID,
 * CARDBATON_JOB_STATE and CARDBATON_JOB_NAME in its environment.
 *
 * At least once, across crashes (LAYOUT.md §12): the job's final record
 * is staged (turn.c turn_stage) together with a file hooks/S.hook, put
 * before the record in the turn's batch, so that its rename comes first
 * and it is never less durable than the record.  Once the turn is
 * committed the hook is due (hook_due); it runs, and whatever its
 * outcome the file is removed.  A daemon that dies in between finds the
 * file at its next start (hooks_recover) and runs the hook again if the
 * job's record is final; a file whose job has not ended (a crash between
 * the turn's renames) waits for that end, which writes it again.
 *
 * Never waited for: a hook is a child (acall.c child_start: its own
 * process group, non-blocking pipes) whose input, output and exit (a
 * pidfd) the main loop polls.  HOOK_MAX run at once, the rest wait in
 * order; one still running at HOOK_DEADLINE_MS has its process group
 * killed.  A failure (an exit status other than 0, a signal, the
 * deadline, a command that could not be started) is one log line, with
 * the first line of what the hook said.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spoold.h"

int hooks_open(struct daemon *d, struct cb_err *err)
{
	for (size_t i = 0; i < HOOK_MAX; i++)
		d->hook[i] = (struct hook_run){ .in = -1, .out = -1, .efd = -1, .pidfd = -1 };
	return (d->hooks_fd = spool_subdir(&d->sp, "hooks", err)) < 0 ? -1 : 0;
}

/* The hook of job J: the on_finish of the node it last ran on (an
 * attempt that started), else the top level's; NULL when none. */
static char *const *hook_argv(const struct config *c, const struct job *j, size_t *n)
{
	const struct node_conf *nc = NULL;

	for (size_t i = j->natt; i-- > 0;)
		if (j->att[i].state != AS_ABORTED) {
			nc = config_node(c, j->att[i].node);
			break;
		}
	if (nc && nc->on_finish) {
		*n = nc->non_finish;
		return nc->on_finish;
	}
	*n = c->non_finish;
	return c->on_finish;
}

int hook_stage(struct daemon *d, const struct job *j, struct cb_err *err)
{
	struct status_view v;
	char *name = NULL, *text = NULL;
	size_t n;
	int r = 1;

	if (!hook_argv(&d->cfg, j, &n))
		return 0;
	/* What the hook is given, for whoever looks (cat hooks/S.hook). */
	if (status_view_of(j, 1, &v) < 0)
		return cb_err_sys(err, EX_OSERR_, "job %lld: its on_finish hook", j->id);
	if (!(name = name_hook(j->id)) || !(text = xasprintf("%s\n", v.json)))
		r = cb_err_sys(err, EX_OSERR_, "job %lld: its on_finish hook", j->id);
	else if (wbatch_add(&d->turn, d->sp.dir[SD_TMP], d->hooks_fd, name, text, strlen(text),
			    d->sp.fmode) < 0)
		r = cb_err_sys(err, spool_errno_ex(errno), "%s/tmp: job %lld: its on_finish hook",
			       d->sp.path, j->id);
	status_view_free(&v);
	free(name);
	free(text);
	return r;
}

void hook_due(struct daemon *d, long long id)
{
	if (d->hookq_head == d->hookq_n)
		d->hookq_head = d->hookq_n = 0;
	if (d->hookq_n == d->hookq_cap) {
		size_t cap = d->hookq_cap ? 2 * d->hookq_cap : 64;
		long long *q;

		/* Taken back to the start first: the queue is a window of it. */
		if (d->hookq_head) {
			memmove(d->hookq, d->hookq + d->hookq_head,
				(d->hookq_n - d->hookq_head) * sizeof *d->hookq);
			d->hookq_n -= d->hookq_head;
			d->hookq_head = 0;
		} else if (!(q = realloc(d->hookq, cap * sizeof *q))) {
			logmsg("job %lld: out of memory; its on_finish hook runs at the next start", id);
			return;
		} else {
			d->hookq = q;
			d->hookq_cap = cap;
		}
	}
	d->hookq[d->hookq_n++] = id;
}

/* ---- running one ------------------------------------------------------- */

struct hook_body {
	char **argv;
	const char *id, *state, *name;
};

/* In the child: its standard error is its output too; exec's failure
 * goes to the third pipe (close-on-exec: silent when exec works). */
static void hook_child(void *arg)
{
	const struct hook_body *b = arg;
	int say = fcntl(2, F_DUPFD_CLOEXEC, 3);

	if (say < 0 || dup2(1, 2) < 0 || setenv("CARDBATON_JOB_ID", b->id, 1) < 0 ||
	    setenv("CARDBATON_JOB_STATE", b->state, 1) < 0 ||
	    setenv("CARDBATON_JOB_NAME", b->name, 1) < 0) {
		dprintf(say < 0 ? 1 : say, "%s", strerror(errno));
		_exit(EX_OSERR_);
	}
	execvp(b->argv[0], b->argv);
	dprintf(say, "%s", strerror(errno));
	_exit(127);
}

static int pidfd_of(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);    /* close-on-exec */
#else
	(void)pid;
	errno = ENOSYS;
	return -1;
#endif
}

static void hook_write(struct hook_run *h);

/* Job ID's pending file is gone: its hook is done with. */
static void hook_remove(struct daemon *d, long long id)
{
	char *name = name_hook(id);

	if (!name || (unlinkat(d->hooks_fd, name, 0) < 0 && errno != ENOENT))
		logmsg("%s/hooks/%s: %s; its hook runs again at the next start", d->sp.path,
		       name ? name : "?", strerror(errno));
	free(name);
}

static void slot_close(struct hook_run *h)
{
	int *fds[] = { &h->in, &h->out, &h->efd, &h->pidfd };

	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
	sbuf_free(&h->wbuf);
	sbuf_free(&h->said);
	free(h->what);
	*h = (struct hook_run){ .in = -1, .out = -1, .efd = -1, .pidfd = -1 };
}

/* Start job ID's hook in slot H.  Nothing to run (its file gone: it ran
 * already; no hook in the config now): nothing started, H left free. */
static void hook_begin(struct daemon *d, struct hook_run *h, long long id)
{
	struct cb_err err = { 0 };
	struct status_view v = { 0 };
	struct hook_body b = { 0 };
	struct job j;
	char *hname = name_hook(id), *rname = name_plain(id), *idtext = NULL;
	char *const *argv;
	size_t n;
	int loaded = 0;

	if (!hname || !rname || !(idtext = xasprintf("%lld", id))) {
		logmsg("job %lld: out of memory; its on_finish hook runs at the next start", id);
		goto out;
	}
	for (size_t i = 0; i < HOOK_MAX; i++)
		if (d->hook[i].id == id)
			goto out;       /* running: never twice at once */
	if (faccessat(d->hooks_fd, hname, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
		goto out;       /* done with already */
	if (spool_load(&d->sp, SD_DONE, rname, &j, &err) < 0) {
		logmsg("job %lld: on_finish: %s; hooks/%s is left for the next start", id,
		       err.msg ? err.msg : strerror(ENOMEM), hname);
		cb_err_free(&err);
		goto out;
	}
	loaded = 1;
	if (!(argv = hook_argv(&d->cfg, &j, &n))) {
		logmsg("job %lld: no on_finish in the config now; hooks/%s removed", id, hname);
		hook_remove(d, id);
		goto out;
	}
	if (status_view_of(&j, 1, &v) < 0 || sbuf_addf(&h->wbuf, "%s\n", v.json) < 0 ||
	    !(b.argv = calloc(n + 1, sizeof *b.argv)) || !(h->what = printable(argv[0]))) {
		logmsg("job %lld: out of memory; its on_finish hook runs at the next start", id);
		sbuf_free(&h->wbuf);
		free(h->what);
		h->what = NULL;
		goto out;
	}
	memcpy(b.argv, argv, n * sizeof *argv);
	b.id = idtext;
	b.state = job_state_name(j.state);
	b.name = j.def.name ? j.def.name : "";
	CRASH_POINT("hook: starting", NULL);
	h->pid = child_start(&h->in, &h->out, &h->efd, hook_child, &b);
	if (h->pid < 0) {
		logmsg("job %lld: on_finish %s could not start: %s", id, h->what, strerror(errno));
		slot_close(h);
		hook_remove(d, id);
		goto out;
	}
	h->id = id;
	h->pidfd = pidfd_of(h->pid);
	h->deadline = mono_now() + HOOK_DEADLINE_MS;
	hook_write(h);          /* the pipe takes it whole, as a rule */
	CRASH_POINT("hook: started", NULL);
out:
	if (loaded)
		job_free(&j);
	status_view_free(&v);
	free(b.argv);
	free(hname);
	free(rname);
	free(idtext);
}

void hooks_start(struct daemon *d)
{
	for (size_t i = 0; i < HOOK_MAX && d->hookq_head < d->hookq_n; i++)
		if (!d->hook[i].id)
			hook_begin(d, &d->hook[i], d->hookq[d->hookq_head++]);
}

/* What the pipe takes of H's input; at its end (or the hook's), closed. */
static void hook_write(struct hook_run *h)
{
	while (h->in >= 0 && h->woff < h->wbuf.len) {
		ssize_t w = write(h->in, h->wbuf.s + h->woff, h->wbuf.len - h->woff);

		if (w > 0)
			h->woff += (size_t)w;
		else if (w < 0 && errno == EINTR)
			continue;
		else if (w < 0 && errno == EAGAIN)
			return;
		else
			break;  /* it does not read it (EPIPE): its business */
	}
	if (h->in >= 0)
		close(h->in);
	h->in = -1;
}

/* The first line of what B holds, made printable (malloc'd, or NULL). */
static char *first_line(const struct sbuf *b)
{
	size_t n = b->s ? strcspn(b->s, "\n") : 0;
	char *line, *p;

	if (!b->s || !n || !(line = strndup(b->s, n)))
		return NULL;
	p = printable(line);
	free(line);
	return p;
}

/* H's hook has exited with STATUS (waitpid's): said when it failed,
 * its file removed, the slot free. */
static void hook_end(struct daemon *d, struct hook_run *h, int status)
{
	struct sbuf why = { 0 };
	char *line, *start;
	long long id = h->id;

	if (h->out >= 0)
		fd_drain(h->out, &h->said, HOOK_SAY_MAX);
	if (h->efd >= 0)
		fd_drain(h->efd, &why, HOOK_SAY_MAX);
	line = first_line(&h->said);
	start = first_line(&why);
	if (start)
		logmsg("job %lld: on_finish %s could not start: %s", id, h->what, start);
	else if (h->killed)
		logmsg("job %lld: on_finish %s killed after %d s (its deadline)%s%s", id, h->what,
		       HOOK_DEADLINE_MS / 1000, line ? ": " : "", line ? line : "");
	else if (WIFEXITED(status) && WEXITSTATUS(status))
		logmsg("job %lld: on_finish %s exited with status %d%s%s", id, h->what,
		       WEXITSTATUS(status), line ? ": " : "", line ? line : "");
	else if (WIFSIGNALED(status))
		logmsg("job %lld: on_finish %s killed by signal %d%s%s", id, h->what,
		       WTERMSIG(status), line ? ": " : "", line ? line : "");
	free(line);
	free(start);
	sbuf_free(&why);
	slot_close(h);
	CRASH_POINT("hook: ended", NULL);
	hook_remove(d, id);
}

/* Whatever H's descriptors have for us; its end, if it came. */
static void hook_poll(struct daemon *d, struct hook_run *h)
{
	int status;
	pid_t p;

	if (!h->id)
		return;
	hook_write(h);
	if (h->out >= 0 && fd_drain(h->out, &h->said, HOOK_SAY_MAX)) {
		close(h->out);
		h->out = -1;
	}
	while ((p = waitpid(h->pid, &status, WNOHANG)) < 0 && errno == EINTR)
		;
	if (p == h->pid)
		hook_end(d, h, status);
	else if (p < 0)         /* never: it is our child, reaped only here */
		hook_end(d, h, W_EXITCODE(EX_SOFTWARE_, 0));
}

size_t hooks_pollfds(struct daemon *d, struct pollset *ps)
{
	size_t running = 0;

	for (size_t i = 0; i < HOOK_MAX; i++) {
		struct hook_run *h = &d->hook[i];
		int fds[3] = { h->pidfd, h->out, h->in };

		if (!h->id)
			continue;
		running++;
		for (int k = 0; k < 3; k++) {
			if (fds[k] < 0 || pollset_add(ps, fds[k], PW_HOOK) < 0)
				continue;
			ps->p[ps->n - 1].events = k == 2 ? POLLOUT : POLLIN;
			ps->who[ps->n - 1].node = i;
		}
	}
	return running;
}

void hooks_events(struct daemon *d, const struct pollset *ps, size_t from)
{
	for (size_t i = from; i < ps->n; i++)
		if (ps->who[i].kind == PW_HOOK && ps->p[i].revents)
			hook_poll(d, &d->hook[ps->who[i].node]);
}

void hooks_timers(struct daemon *d, long long now, long long *next)
{
	for (size_t i = 0; i < HOOK_MAX; i++) {
		struct hook_run *h = &d->hook[i];

		if (!h->id)
			continue;
		if (!h->killed && now >= h->deadline) {
			/* The group (child_start made it), and the hook itself
			 * should it have left it. */
			kill(-h->pid, SIGKILL);
			kill(h->pid, SIGKILL);
			h->killed = 1;
		}
		if (h->pidfd < 0) {     /* no pidfd: its exit is looked for */
			hook_poll(d, h);
			if (h->id && now + HOOK_REAP_MS < *next)
				*next = now + HOOK_REAP_MS;
		} else if (!h->killed && h->deadline < *next) {
			*next = h->deadline;
		}
	}
}

size_t hooks_running(const struct daemon *d)
{
	size_t n = 0;

	for (size_t i = 0; i < HOOK_MAX; i++)
		n += d->hook[i].id != 0;
	return n;
}

void hooks_stop(struct daemon *d)
{
	for (size_t i = 0; i < HOOK_MAX; i++) {
		struct hook_run *h = &d->hook[i];

		if (h->id) {
			logmsg("job %lld: on_finish %s stopped with the daemon; it runs again at the next start",
			       h->id, h->what);
			kill(-h->pid, SIGKILL);
			kill(h->pid, SIGKILL);
			while (waitpid(h->pid, NULL, 0) < 0 && errno == EINTR)
				;
		}
		slot_close(h);
	}
	free(d->hookq);
	d->hookq = NULL;
	d->hookq_head = d->hookq_n = d->hookq_cap = 0;
	if (d->hooks_fd >= 0)
		close(d->hooks_fd);
	d->hooks_fd = -1;
}

/* ---- start-up (LAYOUT.md §12) ------------------------------------------ */

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

/* Every pending hook whose job has ended is due, in job order; one whose
 * job has not (a crash between its turn's renames) waits for that end;
 * one whose job is gone is removed. */
void hooks_recover(struct daemon *d)
{
	int fd = dup(d->hooks_fd);
	DIR *dir;
	struct dirent *e;
	long long *ids = NULL;
	size_t n = 0, cap = 0;

	if (fd < 0 || !(dir = fdopendir(fd))) {
		logmsg("%s/hooks: %s", d->sp.path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	rewinddir(dir);
	while ((e = readdir(dir))) {
		struct stat st;
		long long id;

		if (e->d_name[0] == '.')
			continue;
		if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				logmsg("%s/hooks/%s: %s", d->sp.path, e->d_name, strerror(errno));
			continue;
		}
		if (!S_ISREG(st.st_mode)) {
			logmsg("%s/hooks/%s: %s; ignored", d->sp.path, e->d_name, stray_kind(&st));
			continue;
		}
		if (name_parse_hook(e->d_name, &id) < 0) {
			logmsg("%s/hooks/%s: not a pending hook (SSSSSSSSSS.hook); ignored", d->sp.path,
			       e->d_name);
			continue;
		}
		if (n == cap) {
			long long *v = realloc(ids, (cap = cap ? 2 * cap : 64) * sizeof *v);

			if (!v) {
				logmsg("%s/hooks: out of memory; some hooks run at the next start",
				       d->sp.path);
				break;
			}
			ids = v;
		}
		ids[n++] = id;
	}
	closedir(dir);
	if (n)
		qsort(ids, n, sizeof *ids, cmp_ll);
	for (size_t i = 0; i < n; i++) {
		struct cb_err err = { 0 };
		enum spool_dir where;
		char *name = NULL;
		struct job j;
		int r = spool_find(&d->sp, ids[i], &j, &where, &name, &err);

		if (r < 0) {
			logmsg("job %lld: on_finish: %s; its hook waits", ids[i],
			       err.msg ? err.msg : strerror(ENOMEM));
			cb_err_free(&err);
		} else if (r == 0) {
			logmsg("job %lld: no such job; its pending hook is removed", ids[i]);
			hook_remove(d, ids[i]);
		} else {
			if (job_state_final(j.state))
				hook_due(d, ids[i]);
			else
				logmsg("job %lld: %s, not ended: its pending hook waits for its end",
				       ids[i], job_state_name(j.state));
			job_free(&j);
			free(name);
		}
	}
	free(ids);
}
