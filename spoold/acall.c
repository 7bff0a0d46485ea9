/*
 * acall.c - node calls the daemon does not wait for.
 *
 * A call is a child process (the worker, locally or through ssh) with
 * two non-blocking pipes: what it is given on its standard input goes
 * out through a write buffer as the pipe takes it, and its standard
 * output is collected until it ends.  The main loop polls both
 * (acall_pollfd), and links.c hands the end to the slot's handler: this
 * file calls nothing of the daemon's but the helpers (util.c).  Every call
 * has a deadline at which it is killed.  The slots: per node `query`
 * (cardbaton-worker gpus: the card snapshot) and `check` (status ID...:
 * the reconcile); per running job `call` (a launch when the node's
 * event stream cannot take it) and `pause`.  A slow or partitioned
 * node therefore delays nobody else.  Its standard error is kept too
 * (the first ACALL_ERR_MAX bytes): the worker says there why it failed.  A slot is zero when idle (its
 * pipes are only looked at while its pid is set).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spoold.h"

static void close_in(struct acall *a)
{
	if (a->in >= 0)
		close(a->in);
	a->in = -1;
	sbuf_free(&a->wbuf);
	a->woff = 0;
}

/* Write what the pipe takes of A's input; at its end, close it. */
static void acall_write(struct acall *a)
{
	while (a->in >= 0 && a->woff < a->wbuf.len) {
		ssize_t w = write(a->in, a->wbuf.s + a->woff, a->wbuf.len - a->woff);

		if (w > 0)
			a->woff += (size_t)w;
		else if (w < 0 && errno == EINTR)
			continue;
		else if (w < 0 && errno == EAGAIN)
			return;
		else
			break;  /* it stopped reading: its answer says why */
	}
	close_in(a);
}

/*
 * fork a child with non-blocking pipes as its standard streams: FDS[0]
 * writes to its input, FDS[1] reads its output, FDS[2] its error (NULL
 * ERRFD: it shares ours).  The child gets its own process group (a
 * deadline kills all of it), no blocked signals (the daemon blocks its
 * signalfd's), and no other descriptor of ours -- not the spool's lock,
 * not another node's pipes -- before BODY(ARG) runs; BODY never returns.
 */
pid_t child_start(int *in, int *out, int *errfd, void (*body)(void *), void *arg)
{
	int p[3][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 } }, saved;
	pid_t pid = -1;
	sigset_t none;

	for (int i = 0; i < 3; i++)
		if ((i < 2 || errfd) && pipe2(p[i], O_CLOEXEC) < 0)
			goto out;
	fflush(NULL);
	if ((pid = fork()) == 0) {
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		setpgid(0, 0);
		signal(SIGPIPE, SIG_DFL);
		if (dup2(p[0][0], 0) < 0 || dup2(p[1][1], 1) < 0 || (errfd && dup2(p[2][1], 2) < 0))
			_exit(EX_OSERR_);
		close_range(3, ~0U, 0);
		body(arg);
		_exit(EX_SOFTWARE_);
	}
out:
	saved = errno;
	for (int i = 0; i < 3; i++) {
		int mine = i == 0 ? 1 : 0;      /* the end the daemon keeps */

		if (p[i][!mine] >= 0)
			close(p[i][!mine]);
		if (pid < 0 && p[i][mine] >= 0)
			close(p[i][mine]);
		else if (p[i][mine] >= 0 && fcntl(p[i][mine], F_SETFL, O_NONBLOCK) < 0)
			saved = errno;
	}
	if (pid < 0) {
		errno = saved;
		return -1;
	}
	*in = p[0][1];
	*out = p[1][0];
	if (errfd)
		*errfd = p[2][0];
	return pid;
}

/* One error record on standard output: a child's last word when it
 * could not install the worker or start it (query_done and the stream
 * read it there). */
static void say_error(const char *msg)
{
	struct wire_rec w = { 0 };
	char *text = NULL;
	long len;

	if (wire_add(&w, "error", msg) == 0 && (len = wire_format(&w, &text)) > 0)
		write_full(1, text, (size_t)len);
}

/* What a worker's child runs: ARGV (the node's argv for the worker),
 * first making sure the worker is installed there when ENSURE. */
struct worker_body {
	const struct config *cfg;
	const struct node_conf *nc;
	char **argv;
	int ensure;
};

static void worker_child(void *arg)
{
	const struct worker_body *b = arg;
	struct cb_err err = { 0 };

	if (b->ensure && node_ensure_worker(b->cfg, b->nc, &err) < 0) {
		say_error(err.msg ? err.msg : "cannot install the worker");
		/* An account's refusal of the lab's key reads as ssh's own
		 * (255, its words on stderr): accts.c acct_answer. */
		if (err.ex != EX_NOPERM_)
			_exit(EX_UNAVAILABLE_);
		dprintf(2, "%s\n", err.msg);
		_exit(255);
	}
	execvp(b->argv[0], b->argv);
	say_error(strerror(errno));
	_exit(127);
}

pid_t worker_start(struct daemon *d, const struct node_conf *nc, const char *const *args,
		   int ensure, int *in, int *out, int *errfd)
{
	struct worker_body b = { &d->cfg, nc, node_argv(&d->cfg, nc, args), ensure };
	pid_t pid = b.argv ? child_start(in, out, errfd, worker_child, &b) : -1;
	int saved = errno;

	argv_free(b.argv);
	errno = saved;
	return pid;
}

int acall_start_input(struct daemon *d, struct node *n, size_t user, struct acall *a,
		      const char *const *args, const char *input, size_t len, int timeout_ms)
{
	int *seen, ensure;
	const struct node_conf *nc;

	if (a->pid > 0)
		return 0;
	if (!(nc = acct_conf(d, n, user, &seen))) {
		node_failed(d, (size_t)(n - d->nodes), "out of memory");
		return -1;
	}
	/* Where the worker has not been seen running yet (`run --once`, a
	 * call before the node's stream was ready, an account's first), it
	 * is installed first. */
	ensure = !*seen;
	if ((a->pid = worker_start(d, nc, args, ensure, &a->in, &a->fd, &a->efd)) < 0) {
		a->pid = 0;
		node_failed(d, (size_t)(n - d->nodes), strerror(errno));
		return -1;
	}
	a->buf.len = a->ebuf.len = a->woff = a->wbuf.len = 0;
	a->started = mono_now();
	a->deadline = a->started + timeout_ms + (ensure ? INSTALL_MS : 0);
	if (sbuf_add(&a->wbuf, input, len) < 0)
		close_in(a);    /* no memory: it sees no input, and says so */
	acall_write(a);
	return 0;
}

int acall_start(struct daemon *d, struct node *n, size_t user, struct acall *a,
		const char *const *args, int timeout_ms)
{
	return acall_start_input(d, n, user, a, args, "", 0, timeout_ms);
}

void acall_stop(struct acall *a)
{
	if (a->pid <= 0)
		return;
	close(a->fd);
	close(a->efd);
	close_in(a);
	kill(-a->pid, SIGKILL);
	while (waitpid(a->pid, NULL, 0) < 0 && errno == EINTR)
		;
	a->pid = 0;
}

size_t acall_pollfd(const struct acall *a, struct pollfd *p)
{
	if (a->pid <= 0)
		return 0;
	p[0] = (struct pollfd){ a->fd, POLLIN, 0 };
	p[1] = (struct pollfd){ a->efd, POLLIN, 0 };
	if (a->in < 0)
		return 2;
	p[2] = (struct pollfd){ a->in, POLLOUT, 0 };
	return 3;
}

int fd_drain(int fd, struct sbuf *b, size_t max)
{
	char buf[65536];

	for (;;) {
		ssize_t r = read(fd, buf, sizeof buf);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return 0;
		if (r <= 0)
			return 1;
		if (b->len < max && sbuf_add(b, buf, (size_t)r < max - b->len ? (size_t)r : max - b->len) < 0)
			return 1;
	}
}

int acall_read(struct acall *a, int *status)
{
	char buf[65536];
	ssize_t r;

	if (a->pid <= 0)
		return 0;
	acall_write(a);
	fd_drain(a->efd, &a->ebuf, ACALL_ERR_MAX);
	r = read(a->fd, buf, sizeof buf);
	if (r > 0) {
		if (sbuf_add(&a->buf, buf, (size_t)r) < 0) {
			acall_stop(a);
			*status = -1;
			return 1;
		}
		return 0;
	}
	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	close(a->fd);
	close_in(a);
	*status = -1;
	while (waitpid(a->pid, status, 0) < 0 && errno == EINTR)
		;
	a->pid = 0;
	fd_drain(a->efd, &a->ebuf, ACALL_ERR_MAX);
	close(a->efd);
	if ((!a->buf.s && sbuf_add(&a->buf, "", 0) < 0) || (!a->ebuf.s && sbuf_add(&a->ebuf, "", 0) < 0))
		*status = -1;
	else if (*status != -1)
		*status = WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
	return 1;
}

int acall_expired(struct acall *a)
{
	if (a->pid <= 0 || mono_now() < a->deadline)
		return 0;
	acall_stop(a);
	return 1;
}

void acall_free(struct acall *a)
{
	acall_stop(a);
	sbuf_free(&a->buf);
	sbuf_free(&a->ebuf);
	sbuf_free(&a->wbuf);
}

/* ---- the main loop's poll set (links.c, hooks.c, main.c) -------------- */

int pollset_room(struct pollset *ps, size_t want)
{
	if (ps->n + want > ps->cap) {
		size_t cap = (ps->n + want) * 2;
		struct pollfd *p = realloc(ps->p, cap * sizeof *p);
		struct pollwho *w;

		if (!p)
			return -1;
		ps->p = p;
		if (!(w = realloc(ps->who, cap * sizeof *w)))
			return -1;
		ps->who = w;
		ps->cap = cap;
	}
	return 0;
}

void pollset_who(struct pollset *ps, size_t n, int kind, size_t node, long long job)
{
	for (size_t i = 0; i < n; i++)
		ps->who[ps->n++] = (struct pollwho){ kind, node, job };
}

int pollset_add(struct pollset *ps, int fd, int kind)
{
	if (pollset_room(ps, 1) < 0)
		return -1;
	ps->p[ps->n] = (struct pollfd){ fd, POLLIN, 0 };
	pollset_who(ps, 1, kind, 0, 0);
	return 0;
}
