/*
 * ship.c - putting this worker on an SSH node (node_ensure_worker):
 * one round trip to ask whether it is there and what machine the node
 * is; then the static build when the architecture is ours, or the
 * sources (cardbaton-worker.shar) compiled there, installed by a temp
 * file and a rename.  Progress goes to the program's callback.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "link.h"
#include "worker-id.h"

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
	char **argv = link_ssh_argv(c, nc, cmd->s, 1);

	cmd->s = NULL;
	sbuf_free(cmd);
	if (!argv)
		return -1;
	return link_run(argv, input, inlen, timeout_ms, r);
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
	if (sbuf_add(&cmd, "p=", 2) < 0 || link_remote_worker(&cmd, c) < 0 ||
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
		    link_remote_path(&cmd, c->remote_state_dir, "/bin") < 0 ||
		    sbuf_addf(&cmd, "; mkdir -p \"$d\"; t=\"$d/.tmp.$$\"; cat > \"$t\"; "
			      "chmod 755 \"$t\"; mv -f \"$t\" \"$d/cardbaton-worker-%s\"", WORKER_ID) < 0)
			goto oom;
		input = body;
		body = NULL;
	} else {
		struct sbuf sh = { 0 };

		/* The script builds into $dest.tmp.PID and renames. */
		if (sbuf_add(&sh, "dest=", 5) < 0 || link_remote_worker(&sh, c) < 0 ||
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
