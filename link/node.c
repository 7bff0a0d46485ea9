/*
 * node.c - running cardbaton-worker on a node, with a deadline.
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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "node.h"
#include "worker-id.h"

#define REPLY_MAX (16u << 20)

/* The directory of the running program (malloc'd), or NULL. */
static char *exe_dir(void)
{
	size_t cap = 256;

	for (;;) {
		char *b = malloc(cap), *slash;
		ssize_t n;

		if (!b)
			return NULL;
		n = readlink("/proc/self/exe", b, cap);
		if (n > 0 && (size_t)n < cap) {
			b[n] = '\0';
			if ((slash = strrchr(b, '/'))) {
				*slash = '\0';
				return b;
			}
		}
		free(b);
		if (n <= 0 || (size_t)n < cap || cap > (1u << 20))
			return NULL;
		cap *= 2;       /* it may have been cut short */
	}
}

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

/* DIR/REST as one word for the node's shell; a leading "~" becomes
 * "$HOME", which the node's shell expands. */
static int remote_path(struct sbuf *b, const char *dir, const char *rest)
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

static int remote_worker(struct sbuf *b, const struct config *c)
{
	return remote_path(b, c->remote_state_dir, "/bin/cardbaton-worker-" WORKER_ID);
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

/* Where connection-sharing sockets live: $XDG_RUNTIME_DIR/cardbaton or
 * /tmp/cardbaton-UID, private to the user.  NULL: no sharing. */
static char *control_dir(void)
{
	const char *rt = getenv("XDG_RUNTIME_DIR");
	char *d = rt && *rt == '/' ? xasprintf("%s/cardbaton", rt)
				   : xasprintf("/tmp/cardbaton-%ld", (long)getuid());
	struct stat st;

	if (!d)
		return NULL;
	if (mkdir(d, 0700) < 0 && errno != EEXIST)
		goto no;
	if (lstat(d, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
	    (st.st_mode & 077))
		goto no;        /* not ours, or open to others: do without */
	return d;
no:
	free(d);
	return NULL;
}

/*
 * ssh_command + our options + host + "--" + REMOTE (one shell command
 * line).  Our options add connection sharing and keep-alives unless the
 * operator's ssh_command sets them; BatchMode because nobody is there
 * to answer a prompt.
 */
static char **ssh_argv_mode(const struct config *c, const struct node_conf *nc, char *remote,
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
	char **v = calloc(c->nssh_command + 2 * nopt + 8, sizeof *v), *dir;

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
	if (!(v[n++] = strdup("-T")) || !(v[n++] = strdup(nc->ssh)) || !(v[n++] = strdup("--")))
		goto fail;
	v[n++] = remote;
	return v;
fail:
	argv_free(v);
	free(remote);
	return NULL;
}

static char **ssh_argv(const struct config *c, const struct node_conf *nc, char *remote)
{
	return ssh_argv_mode(c, nc, remote, 1);
}

char **node_argv(const struct config *c, const struct node_conf *nc,
		 const char *const *args)
{
	struct sbuf cmd = { 0 };
	size_t nargs = 0, n = 0;
	char **v;

	while (args[nargs])
		nargs++;
	if (!nc->local) {
		if (sbuf_add(&cmd, "exec ", 5) < 0 || remote_worker(&cmd, c) < 0 ||
		    sbuf_add(&cmd, " -d ", 4) < 0 || sh_quote(&cmd, c->remote_state_dir) < 0)
			goto fail;
		for (size_t i = 0; i < nargs; i++)
			if (sbuf_add(&cmd, " ", 1) < 0 || sh_quote(&cmd, args[i]) < 0)
				goto fail;
		return ssh_argv(c, nc, cmd.s);
	}
	if (!(v = calloc(nargs + 4, sizeof *v)))
		return NULL;
	if (!(v[n++] = worker_path()) || !(v[n++] = strdup("-d")) ||
	    !(v[n++] = strdup(c->remote_state_dir)))
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

/* Run ARGV (consumed), feeding INPUT, collecting its output, within
 * TIMEOUT_MS. */
static int run_argv(char **argv, const char *input, size_t inlen, int timeout_ms,
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

	if (run_argv(node_argv(c, nc, args), input, inlen, timeout_ms, r) < 0)
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
	return run_argv(node_argv(c, nc, args), input, inlen, timeout_ms, r);
}

/* The file shipped to nodes, NAME, beside the running program or in
 * ../libexec/cardbaton/ (an installed tree).  malloc'd or NULL. */
static char *ship_file(const char *name)
{
	char *self = exe_dir(), *p;

	if (!self)
		return NULL;
	if ((p = xasprintf("%s/%s", self, name)) && access(p, R_OK) == 0)
		goto out;
	free(p);
	if ((p = xasprintf("%s/../libexec/cardbaton/%s", self, name)) && access(p, R_OK) == 0)
		goto out;
	free(p);
	p = NULL;
out:
	free(self);
	return p;
}

static char *slurp(const char *path, size_t *len)
{
	char *dir = strdup(path), *slash, *buf = NULL;
	int fd;

	if (!dir)
		return NULL;
	if (!(slash = strrchr(dir, '/'))) {    /* ship_file gives absolute paths */
		free(dir);
		return NULL;
	}
	*slash = '\0';
	if ((fd = open(*dir ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		if (read_capped(fd, slash + 1, 64u << 20, &buf, len) < 0)
			buf = NULL;
		close(fd);
	}
	free(dir);
	return buf;
}

/* Run the shell command line CMD on NC, feeding INPUT. */
static int run_remote(const struct config *c, const struct node_conf *nc, struct sbuf *cmd,
		      const char *input, size_t inlen, int timeout_ms, struct node_reply *r)
{
	char **argv = ssh_argv(c, nc, cmd->s);

	cmd->s = NULL;
	sbuf_free(cmd);
	if (!argv)
		return -1;
	return run_argv(argv, input, inlen, timeout_ms, r);
}

static node_progress_fn *progress_fn;
static void *progress_arg;

void node_set_progress(node_progress_fn *fn, void *arg)
{
	progress_fn = fn;
	progress_arg = arg;
}

static void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void progress(const char *fmt, ...)
{
	va_list ap;
	char *line;

	if (!progress_fn)
		return;
	va_start(ap, fmt);
	line = vxasprintf(fmt, ap);
	va_end(ap);
	if (line)
		progress_fn(progress_arg, line);
	free(line);
}

int node_ensure_worker(const struct config *c, const struct node_conf *nc, struct cb_err *err)
{
	struct sbuf cmd = { 0 };
	struct node_reply r, r2;
	struct utsname u;
	char *arch, *file = NULL, *body = NULL, *input = NULL;
	size_t len = 0;
	int native, ret = -1;

	if (nc->local)
		return 0;
	/* One round trip: is it there, and if not, what machine is this? */
	if (sbuf_add(&cmd, "p=", 2) < 0 || remote_worker(&cmd, c) < 0 ||
	    sbuf_addf(&cmd, "; if [ -x \"$p\" ]; then echo present; else uname -m; fi") < 0 ||
	    run_remote(c, nc, &cmd, NULL, 0, NODE_QUERY_MS, &r) < 0)
		return cb_err_sys(err, EX_UNAVAILABLE_, "%s", nc->name);
	if (r.status != 0) {
		cb_err_set(err, EX_UNAVAILABLE_, "%s: %s", nc->name,
			   *r.err ? r.err : "cannot reach the node");
		node_reply_free(&r);
		return -1;
	}
	arch = r.out;
	arch[strcspn(arch, "\n")] = '\0';
	if (!strcmp(arch, "present")) {
		node_reply_free(&r);
		return 0;
	}
	native = uname(&u) == 0 && !strcmp(u.machine, arch);
	progress("%s: installing cardbaton-worker %s (%s, %s)...", nc->name, WORKER_ID, arch,
		 native ? "static build" : "compiled there");
	if (!(file = ship_file(native ? "cardbaton-worker-static" : "cardbaton-worker.shar")) ||
	    !(body = slurp(file, &len))) {
		cb_err_set(err, EX_UNAVAILABLE_, "%s: cannot find %s to install the worker", nc->name,
			   native ? "cardbaton-worker-static" : "cardbaton-worker.shar");
		goto out;
	}
	if (native) {
		/* Temp file beside the target, then rename: never half a binary. */
		if (sbuf_add(&cmd, "set -e; umask 077; d=", 21) < 0 ||
		    remote_path(&cmd, c->remote_state_dir, "/bin") < 0 ||
		    sbuf_addf(&cmd, "; mkdir -p \"$d\"; t=\"$d/.tmp.$$\"; cat > \"$t\"; "
			      "chmod 755 \"$t\"; mv -f \"$t\" \"$d/cardbaton-worker-%s\"", WORKER_ID) < 0)
			goto oom;
		input = body;
		body = NULL;
	} else {
		struct sbuf sh = { 0 };

		/* The script builds into $dest.tmp.PID and renames. */
		if (sbuf_add(&sh, "dest=", 5) < 0 || remote_worker(&sh, c) < 0 ||
		    sbuf_add(&sh, "\n", 1) < 0 || sbuf_add(&sh, body, len) < 0) {
			sbuf_free(&sh);
			goto oom;
		}
		input = sh.s;
		len = sh.len;
		if (sbuf_add(&cmd, "umask 077; sh -s", 16) < 0)
			goto oom;
	}
	if (run_remote(c, nc, &cmd, input, len, 4 * NODE_CALL_MS, &r2) < 0) {
		cb_err_sys(err, EX_UNAVAILABLE_, "%s", nc->name);
		goto out;
	}
	if (r2.status != 0) {
		cb_err_set(err, EX_UNAVAILABLE_, "%s: installing the worker failed: %s", nc->name,
			   *r2.err ? r2.err : "no reason given");
		node_reply_free(&r2);
		goto out;
	}
	node_reply_free(&r2);
	progress("%s: cardbaton-worker installed", nc->name);
	ret = 0;
	goto out;
oom:
	cb_err_sys(err, EX_OSERR_, "%s", nc->name);
out:
	sbuf_free(&cmd);
	node_reply_free(&r);
	free(file);
	free(body);
	free(input);
	return ret;
}

void node_reply_free(struct node_reply *r)
{
	free(r->out);
	free(r->err);
	memset(r, 0, sizeof *r);
}

void gpus_free(struct gpu_info *g, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(g[i].uuid);
		free(g[i].name);
		free(g[i].lease);
	}
	free(g);
}

static int gpu_from_rec(const struct wire_rec *w, struct gpu_info *g)
{
	const char *uuid = wire_get(w, "uuid"), *name = wire_get(w, "name");
	const char *lease = wire_get(w, "lease");
	long long idx;

	memset(g, 0, sizeof *g);
	if (wire_get_ll(w, "index", &idx) < 0 || idx < 0 || idx > GPU_INDEX_MAX || !uuid ||
	    wire_get_ll(w, "processes", &g->procs) < 0) {
		errno = EINVAL;
		return -1;
	}
	/* Memory or utilisation the driver does not report is empty: -1,
	 * and such a card is never idle. */
	if (wire_get_ll(w, "memory_used_mib", &g->mem_used) < 0)
		g->mem_used = -1;
	if (wire_get_ll(w, "memory_total_mib", &g->mem_total) < 0)
		g->mem_total = -1;
	if (wire_get_ll(w, "utilization", &g->util) < 0)
		g->util = -1;
	g->index = (int)idx;
	if (!(g->uuid = strdup(uuid)) || !(g->name = strdup(name ? name : "")) ||
	    (lease && *lease && !(g->lease = strdup(lease))))
		return -1;
	return 0;
}

int gpus_parse(const char *out, size_t len, struct gpu_info **gp, size_t *np)
{
	struct gpu_info *g = NULL;
	size_t n = 0, off = 0;

	*gp = NULL;
	*np = 0;
	while (off < len) {
		struct wire_rec w = { 0 };
		const char *why;
		long used = wire_parse(out + off, len - off, &w, &why);
		struct gpu_info *ng;

		if (used <= 0 || wire_get(&w, "error") || !(ng = realloc(g, (n + 1) * sizeof *g))) {
			wire_free(&w);
			gpus_free(g, n);
			errno = used < 0 && errno == ENOMEM ? ENOMEM : EINVAL;
			return -1;
		}
		g = ng;
		if (gpu_from_rec(&w, &g[n]) < 0) {
			int saved = errno;

			wire_free(&w);
			gpus_free(g, n + 1);
			errno = saved;
			return -1;
		}
		n++;
		off += (size_t)used;
		wire_free(&w);
	}
	*gp = g;
	*np = n;
	return 0;
}

int gpu_idle(const struct gpu_info *g, long long idle_mib)
{
	return g->mem_used >= 0 && g->mem_used <= idle_mib && g->procs == 0 && !g->lease;
}

int gpu_eligible(const struct node_conf *nc, int index)
{
	if (!nc->has_gpus)
		return 1;
	for (size_t i = 0; i < nc->ngpus; i++)
		if (nc->gpus[i] == index)
			return 1;
	return 0;
}

/* First line of TEXT, trimmed, as a malloc'd string. */
static char *first_line(const char *text)
{
	size_t n = strcspn(text, "\n");

	while (n && (text[n - 1] == '\r' || text[n - 1] == ' '))
		n--;
	return strndup(text, n);
}

int node_gpus(const struct config *c, const struct node_conf *nc,
	      struct gpu_info **g, size_t *n, struct cb_err *err)
{
	static const char *const args[] = { "gpus", NULL };
	struct node_reply r;
	int ret = -1;

	if (node_run(c, nc, args, NULL, 0, NODE_QUERY_MS, &r) < 0)
		return cb_err_sys(err, EX_UNAVAILABLE_, "%s", nc->name);
	if (r.status == 0 && gpus_parse(r.out, r.outlen, g, n) == 0) {
		ret = 0;
	} else {
		/* The worker's own words when it has any: an `error` record,
		 * else its stderr, else the exit status. */
		struct wire_rec w = { 0 };
		const char *why, *e = NULL;
		char *line = NULL;

		if (wire_parse(r.out, r.outlen, &w, &why) > 0)
			e = wire_get(&w, "error");
		if (!e && *r.err)
			e = line = first_line(r.err);
		if (e && *e)
			cb_err_set(err, EX_UNAVAILABLE_, "%s: %s", nc->name, e);
		else if (r.status == 0)
			cb_err_set(err, EX_UNAVAILABLE_, "%s: malformed reply from cardbaton-worker gpus", nc->name);
		else
			cb_err_set(err, EX_UNAVAILABLE_, "%s: cardbaton-worker gpus exited %d", nc->name, r.status);
		free(line);
		wire_free(&w);
	}
	node_reply_free(&r);
	return ret;
}

/*
 * The remote half of node_ensure_key: the key arrives on stdin; every
 * existing line is kept byte for byte (a missing final newline is
 * added), a key already there (the same type and blob as two fields of
 * a line that is not a comment, whatever its options or comment) is
 * not added again, and the new file -- written in full to a temporary
 * file beside it, synced -- replaces the old by rename: a crash at any
 * point leaves the old file or the new one.  A failed write removes
 * its temporary file.
 */
static const char ensure_key_sh[] =
	"set -ef; umask 077; IFS= read -r key; set -- $key; "
	"d=\"$HOME/.ssh\"; f=\"$d/authorized_keys\"; mkdir -p \"$d\"; "
	"if [ -f \"$f\" ] && awk -v t=\"$1\" -v b=\"$2\" "
	"'{ sub(/\\r$/, \"\") } $1 ~ /^#/ { next } "
	"{ for (i = 1; i < NF; i++) if ($i == t && $(i + 1) == b) { f = 1; exit } } "
	"END { exit !f }' \"$f\"; then echo present; exit 0; fi; "
	"t=\"$d/.authorized_keys.cardbaton.$$\"; trap 'rm -f \"$t\"' EXIT; "
	"{ if [ -f \"$f\" ]; then cat \"$f\"; "
	"if [ -s \"$f\" ] && [ -n \"$(tail -c 1 \"$f\")\" ]; then echo; fi; fi; "
	"printf '%s\\n' \"$key\"; } > \"$t\"; chmod 600 \"$t\"; "
	"sync \"$t\" 2>/dev/null || sync; mv -f \"$t\" \"$f\"; echo added";

int node_ensure_key(const struct config *c, const struct node_conf *nc, const char *key,
		    int interactive, struct cb_err *err)
{
	struct node_reply r;
	char **argv, *input, *cmd = strdup(ensure_key_sh);
	int ret;

	if (!cmd || !(input = xasprintf("%s\n", key))) {
		free(cmd);
		return cb_err_sys(err, EX_OSERR_, "%s", nc->name);
	}
	if (!(argv = ssh_argv_mode(c, nc, cmd, !interactive)) ||
	    run_argv(argv, input, strlen(input), interactive ? 10 * NODE_CALL_MS : NODE_CALL_MS,
		     &r) < 0) {
		free(input);
		return cb_err_sys(err, EX_UNAVAILABLE_, "%s", nc->name);
	}
	free(input);
	if (r.status == 0 && !strcmp(r.out, "present\n"))
		ret = 1;
	else if (r.status == 0 && !strcmp(r.out, "added\n"))
		ret = 0;
	else {
		size_t n = strcspn(r.err, "\n");

		ret = cb_err_set(err, EX_UNAVAILABLE_, "%s: %.*s", nc->name, (int)n,
				 n ? r.err : "could not update ~/.ssh/authorized_keys");
	}
	node_reply_free(&r);
	return ret;
}

static int has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 1;
	return 0;
}

char *pubkey_read(const char *path, struct cb_err *err)
{
	char *p = expand_home(path), *buf = NULL, *dir, *slash, *key;
	size_t len;
	int fd = -1;

	if (!p || !(dir = strdup(p))) {
		free(p);
		cb_err_sys(err, EX_OSERR_, "%s", path);
		return NULL;
	}
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	fd = open(slash ? (*dir ? dir : "/") : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || read_capped(fd, slash ? slash + 1 : p, 16384, &buf, &len) < 0) {
		cb_err_sys(err, EX_NOINPUT_, "%s", path);
		buf = NULL;
	}
	if (fd >= 0)
		close(fd);
	free(dir);
	free(p);
	if (!buf)
		return NULL;
	buf[strcspn(buf, "\r\n")] = '\0';
	key = buf;
	/* "TYPE BLOB [COMMENT]": a public key, not a private one or options. */
	{
		size_t t = strcspn(key, " "), b;

		b = key[t] ? strspn(key + t + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") : 0;
		if (!t || !key[t] || b < 16 || (key[t + 1 + b] && key[t + 1 + b] != ' ') ||
		    !(strncmp(key, "ssh-", 4) == 0 || strncmp(key, "ecdsa-", 6) == 0 ||
		      strncmp(key, "sk-", 3) == 0) || has_control(key)) {
			cb_err_set(err, EX_DATAERR_, "%s: not an OpenSSH public key", path);
			free(buf);
			return NULL;
		}
	}
	return key;
}
