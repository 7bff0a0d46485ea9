/*
 * node.c - running cardbaton-worker on a node, with a deadline: its
 * argv (the local binary, or ssh with a shared connection), the child
 * with its standard streams, and the call that ships the worker when
 * an SSH node lacks it and asks again.
 *
 * A node is reached by an argv: the local worker binary itself for a
 * `local: true` node, or ssh_command + our options + the host + one
 * remote command line for an SSH node.  Everything else (launch,
 * status, watch, cancel, logs, gpus) is the worker protocol of
 * LAYOUT.md §10 spoken over the child's standard streams, so local and
 * remote nodes share every line of code above this file.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "link.h"
#include "worker-id.h"

#define REPLY_MAX (16u << 20)

char *worker_path(void)
{
	const char *env = getenv("CARDBATON_WORKER");
	char *dir, *p;

	if (env && *env)
		return strdup(env);
	if ((dir = exe_dir())) {
		p = xasprintf("%s/cardbaton-worker", dir);
		free(dir);
		if (!p)
			return NULL;
		if (access(p, X_OK) == 0)
			return p;
		free(p);
	}
	return strdup("cardbaton-worker");
}

void argv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

/* 'x' quoting for a POSIX shell on the node. */
static int sh_quote(struct sbuf *b, const char *s)
{
	if (sbuf_add(b, "'", 1) < 0)
		return -1;
	for (; *s; s++) {
		if (*s == '\'' ? sbuf_add(b, "'\\''", 4) < 0 : sbuf_add(b, s, 1) < 0)
			return -1;
	}
	return sbuf_add(b, "'", 1);
}

int link_remote_path(struct sbuf *b, const char *dir, const char *rest)
{
	char *p;
	int r;

	if (dir[0] == '~' && (dir[1] == '/' || !dir[1])) {
		if (sbuf_add(b, "\"$HOME\"", 7) < 0)
			return -1;
		dir++;
	}
	/* A relative path (from the node's home) beginning with '-' must
	 * not read as an option to exec, mkdir or mv there. */
	if (!(p = xasprintf("%s%s%s", dir[0] == '-' ? "./" : "", dir, rest)))
		return -1;
	r = sh_quote(b, p);
	free(p);
	return r;
}

int link_remote_worker(struct sbuf *b, const struct config *c)
{
	return link_remote_path(b, c->remote_state_dir, "/bin/cardbaton-worker-" WORKER_ID);
}

/* Is OPT (e.g. "ControlPath") already set by the operator's ssh_command? */
static int ssh_has(const struct config *c, const char *opt)
{
	size_t n = strlen(opt);

	for (size_t i = 0; i < c->nssh_command; i++) {
		const char *a = c->ssh_command[i];

		if (!strncmp(a, "-o", 2))
			a += 2;
		while (*a == ' ')
			a++;
		if (!strncasecmp(a, opt, n) && (a[n] == '=' || a[n] == ' ' || !a[n]))
			return 1;
		if (!strcmp(opt, "ControlPath") && !strcmp(c->ssh_command[i], "-S"))
			return 1;
	}
	return 0;
}

/* ssh's socket for a master: DIR/%C (40 hex digits), and while it
 * starts, that name plus ".XXXXXXXXXXXXXXXX"; all in a sun_path. */
#define CONTROL_NAME_MAX (1 + 40 + 17)

/* Is DIR private to us (ours, a directory, closed to others), made if
 * missing? */
static int control_dir_ok(const char *d)
{
	struct stat st;

	if (mkdir(d, 0700) < 0 && errno != EEXIST)
		return 0;
	return lstat(d, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid() &&
	       !(st.st_mode & 077);
}

/* Where connection-sharing sockets live: $XDG_RUNTIME_DIR/cardbaton, or
 * /tmp/cardbaton-UID when there is none, or it is not private to the
 * user, or it is too long for a socket's path (ssh would refuse every
 * connection).  NULL: neither will do, no sharing. */
static char *control_dir(void)
{
	struct sockaddr_un un;
	const char *rt = getenv("XDG_RUNTIME_DIR");
	char *d[2] = { NULL, xasprintf("/tmp/cardbaton-%ld", (long)getuid()) };

	if (rt && *rt == '/')
		d[0] = xasprintf("%s/cardbaton", rt);
	for (int i = 0; i < 2; i++) {
		if (d[i] && strlen(d[i]) + CONTROL_NAME_MAX < sizeof un.sun_path &&
		    control_dir_ok(d[i])) {
			free(d[1 - i]);
			return d[i];
		}
		free(d[i]);
		d[i] = NULL;
	}
	return NULL;
}

/* Our options add connection sharing and keep-alives unless the
 * operator's ssh_command sets them; BatchMode because nobody is there
 * to answer a prompt. */
char **link_ssh_argv(const struct config *c, const struct node_conf *nc, char *remote,
		     int batch)
{
	static const char *const opts[][2] = {
		{ "ControlMaster", "auto" },
		{ "ControlPersist", "300" },
		{ "ServerAliveInterval", "5" },
		{ "ServerAliveCountMax", "3" },
		{ "ConnectTimeout", "10" },
		{ "BatchMode", "yes" },
	};
	size_t nopt = sizeof opts / sizeof opts[0], n = 0;
	char **v = calloc(c->nssh_command + 2 * nopt + 14, sizeof *v), *dir;

	if (!v)
		goto fail;
	for (size_t i = 0; i < c->nssh_command; i++)
		if (!(v[n++] = strdup(c->ssh_command[i])))
			goto fail;
	if (!ssh_has(c, "ControlPath") && (dir = control_dir())) {
		v[n++] = strdup("-o");
		v[n++] = xasprintf("ControlPath=%s/%%C", dir);
		free(dir);
		if (!v[n - 1] || !v[n - 2])
			goto fail;
	}
	for (size_t i = 0; i < nopt; i++) {
		if (ssh_has(c, opts[i][0]) || (!batch && !strcmp(opts[i][0], "BatchMode")))
			continue;
		if (!(v[n++] = strdup("-o")) || !(v[n++] = xasprintf("%s=%s", opts[i][0], opts[i][1])))
			goto fail;
	}
	/* As one account (a run_as: owner node's job owner), with the
	 * lab's key only when given (the daemon's; `logs` uses the
	 * operator's own): the host without a user@ of its own. */
	if (nc->as_user) {
		const char *at = strrchr(nc->ssh, '@');

		if (nc->as_key && (!(v[n++] = strdup("-i")) || !(v[n++] = strdup(nc->as_key)) ||
				   !(v[n++] = strdup("-o")) || !(v[n++] = strdup("IdentitiesOnly=yes"))))
			goto fail;
		if (!(v[n++] = strdup("-l")) || !(v[n++] = strdup(nc->as_user)) ||
		    !(v[n++] = strdup("-T")) || !(v[n++] = strdup(at ? at + 1 : nc->ssh)))
			goto fail;
	} else if (!(v[n++] = strdup("-T")) || !(v[n++] = strdup(nc->ssh))) {
		goto fail;
	}
	if (!(v[n++] = strdup("--")))
		goto fail;
	v[n++] = remote;
	return v;
fail:
	argv_free(v);
	free(remote);
	return NULL;
}

static char **worker_argv(const struct config *c, const struct node_conf *nc,
			  const char *const *args);

/* A Slurm node's worker is told its partition and sbatch's arguments
 * before the command (worker/slurm.c). */
char **node_argv(const struct config *c, const struct node_conf *nc,
		 const char *const *args)
{
	const char **all;
	size_t nargs = 0, k = 0;
	char **v;

	if (!nc->slurm_partition)
		return worker_argv(c, nc, args);
	while (args[nargs])
		nargs++;
	if (!(all = calloc(nargs + 2 * nc->nsbatch_args + 3, sizeof *all)))
		return NULL;
	all[k++] = "--slurm";
	all[k++] = nc->slurm_partition;
	for (size_t i = 0; i < nc->nsbatch_args; i++) {
		all[k++] = "--sbatch-arg";
		all[k++] = nc->sbatch_args[i];
	}
	for (size_t i = 0; i < nargs; i++)
		all[k++] = args[i];
	v = worker_argv(c, nc, all);
	free(all);
	return v;
}

static char **worker_argv(const struct config *c, const struct node_conf *nc,
			  const char *const *args)
{
	struct sbuf cmd = { 0 };
	size_t nargs = 0, n = 0;
	char **v;

	while (args[nargs])
		nargs++;
	if (!nc->local) {
		if (sbuf_add(&cmd, "exec ", 5) < 0 || link_remote_worker(&cmd, c) < 0 ||
		    sbuf_add(&cmd, " -d ", 4) < 0 || sh_quote(&cmd, c->remote_state_dir) < 0 ||
		    (nc->lease_dir && (sbuf_add(&cmd, " --lease-dir ", 13) < 0 ||
				       sh_quote(&cmd, nc->lease_dir) < 0)))
			goto fail;
		for (size_t i = 0; i < nargs; i++)
			if (sbuf_add(&cmd, " ", 1) < 0 || sh_quote(&cmd, args[i]) < 0)
				goto fail;
		return link_ssh_argv(c, nc, cmd.s, 1);
	}
	if (!(v = calloc(nargs + 6, sizeof *v)))
		return NULL;
	if (!(v[n++] = worker_path()) || !(v[n++] = strdup("-d")) ||
	    !(v[n++] = strdup(c->remote_state_dir)))
		goto vfail;
	if (nc->lease_dir && (!(v[n++] = strdup("--lease-dir")) || !(v[n++] = strdup(nc->lease_dir))))
		goto vfail;
	for (size_t i = 0; i < nargs; i++)
		if (!(v[n++] = strdup(args[i])))
			goto vfail;
	return v;
vfail:
	argv_free(v);
	return NULL;
fail:
	sbuf_free(&cmd);
	return NULL;
}

static int cloexec_pipe(int p[2])
{
	return pipe2(p, O_CLOEXEC);
}

/* fork + exec ARGV with the given pipe ends as its standard streams
 * (-1: /dev/null).  The child gets its own process group so that a
 * deadline can kill all of it. */
static pid_t spawn(char **argv, int in, int out, int errfd)
{
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	int null = open("/dev/null", O_RDWR);
	sigset_t none;

	/* The daemon blocks signals for its signalfd: nothing of that
	 * may reach the worker, the job or ssh. */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	setpgid(0, 0);
	signal(SIGPIPE, SIG_DFL);
	if (null < 0 || dup2(in >= 0 ? in : null, 0) < 0 || dup2(out >= 0 ? out : null, 1) < 0 ||
	    dup2(errfd >= 0 ? errfd : null, 2) < 0)
		_exit(127);
	execvp(argv[0], argv);
	dprintf(2, "%s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

pid_t node_spawn(const struct config *c, const struct node_conf *nc,
		 const char *const *args, int *in, int *out)
{
	char **argv = node_argv(c, nc, args);
	int pi[2] = { -1, -1 }, po[2] = { -1, -1 }, saved;
	pid_t pid = -1;

	if (!argv)
		return -1;
	if ((in && cloexec_pipe(pi) < 0) || cloexec_pipe(po) < 0)
		goto out;
	pid = spawn(argv, pi[0], po[1], 2);
out:
	saved = errno;
	argv_free(argv);
	if (pi[0] >= 0)
		close(pi[0]);
	if (po[1] >= 0)
		close(po[1]);
	if (pid < 0) {
		if (pi[1] >= 0)
			close(pi[1]);
		if (po[0] >= 0)
			close(po[0]);
		errno = saved;
		return -1;
	}
	if (in)
		*in = pi[1];
	*out = po[0];
	return pid;
}

/* Read what is available on FD into B (up to REPLY_MAX); 0 at EOF. */
static int drain(int fd, struct sbuf *b)
{
	char buf[65536];
	ssize_t r = read(fd, buf, sizeof buf);

	if (r < 0)
		return errno == EINTR || errno == EAGAIN ? 1 : -1;
	if (r == 0)
		return 0;
	if (b->len + (size_t)r <= REPLY_MAX && sbuf_add(b, buf, (size_t)r) < 0)
		return -1;
	return 1;
}

int link_run(char **argv, const char *input, size_t inlen, int timeout_ms,
	     struct node_reply *r)
{
	int pi[2] = { -1, -1 }, po[2] = { -1, -1 }, pe[2] = { -1, -1 };
	struct sbuf out = { 0 }, err = { 0 };
	long long deadline = mono_ms() + timeout_ms;
	size_t written = 0;
	int status, timed_out = 0;
	pid_t pid;

	memset(r, 0, sizeof *r);
	r->status = -1;
	if (!argv)
		return -1;
	/* From here on ARGV is ours to free. */
	if (cloexec_pipe(pi) < 0 || cloexec_pipe(po) < 0 || cloexec_pipe(pe) < 0 ||
	    (pid = spawn(argv, pi[0], po[1], pe[1])) < 0) {
		int saved = errno;

		for (int i = 0; i < 2; i++) {
			if (pi[i] >= 0)
				close(pi[i]);
			if (po[i] >= 0)
				close(po[i]);
			if (pe[i] >= 0)
				close(pe[i]);
		}
		argv_free(argv);
		errno = saved;
		return -1;
	}
	argv_free(argv);
	close(pi[0]);
	close(po[1]);
	close(pe[1]);
	fcntl(pi[1], F_SETFL, O_NONBLOCK);
	if (!input || !inlen) {
		close(pi[1]);
		pi[1] = -1;
	}
	while (po[0] >= 0 || pe[0] >= 0) {
		struct pollfd p[3] = {
			{ .fd = po[0], .events = POLLIN },
			{ .fd = pe[0], .events = POLLIN },
			{ .fd = pi[1], .events = POLLOUT },
		};
		long long left = deadline - mono_ms();
		int n;

		if (left <= 0) {
			timed_out = 1;
			break;
		}
		n = poll(p, 3, (int)(left > INT_MAX ? INT_MAX : left));
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0)
			continue;
		for (int i = 0; i < 2; i++) {
			int *fd = i ? &pe[0] : &po[0];

			if (*fd >= 0 && (p[i].revents & (POLLIN | POLLHUP | POLLERR)) &&
			    drain(*fd, i ? &err : &out) <= 0) {
				close(*fd);
				*fd = -1;
			}
		}
		if (pi[1] >= 0 && (p[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t w = write(pi[1], input + written, inlen - written);

			if (w > 0)
				written += (size_t)w;
			if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == inlen) {
				close(pi[1]);
				pi[1] = -1;
			}
		}
	}
	if (pi[1] >= 0)
		close(pi[1]);
	if (po[0] >= 0)
		close(po[0]);
	if (pe[0] >= 0)
		close(pe[0]);
	if (timed_out)
		kill(-pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			status = -1;
			break;
		}
	if (timed_out) {
		sbuf_free(&err);
		sbuf_addf(&err, "no answer within %d s", timeout_ms / 1000);
	} else if (status != -1 && WIFEXITED(status)) {
		r->status = WEXITSTATUS(status);
	} else if (status != -1 && WIFSIGNALED(status)) {
		sbuf_addf(&err, "%skilled by signal %d", err.len ? "; " : "", WTERMSIG(status));
	}
	if ((!out.s && sbuf_add(&out, "", 0) < 0) || (!err.s && sbuf_add(&err, "", 0) < 0)) {
		sbuf_free(&out);
		sbuf_free(&err);
		return -1;
	}
	r->out = out.s;
	r->outlen = out.len;
	r->err = err.s;
	return 0;
}

int node_run(const struct config *c, const struct node_conf *nc,
	     const char *const *args, const char *input, size_t inlen,
	     int timeout_ms, struct node_reply *r)
{
	struct cb_err err = { 0 };

	if (link_run(node_argv(c, nc, args), input, inlen, timeout_ms, r) < 0)
		return -1;
	/* 127 from the node's shell: this worker version is not there yet.
	 * Ship it and ask again (nothing ran, so asking again is safe). */
	if (nc->local || r->status != 127)
		return 0;
	if (node_ensure_worker(c, nc, &err) < 0) {
		free(r->err);
		r->err = err.msg ? err.msg : strdup("cannot install the worker");
		r->status = -1;
		return 0;
	}
	node_reply_free(r);
	return link_run(node_argv(c, nc, args), input, inlen, timeout_ms, r);
}

void node_reply_free(struct node_reply *r)
{
	free(r->out);
	free(r->err);
	memset(r, 0, sizeof *r);
}

