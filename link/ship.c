/*
 * ship.c - putting this worker on an SSH node (node_ensure_worker).
 *
 * Which build a node gets.  The worker asks the driver's NVML library
 * (worker/nvml.c, through dlopen) before it runs nvidia-smi, and that
 * takes a dynamically linked worker: dlopen from a static glibc binary
 * would load a second libc, so the static build (-DCARDBATON_NO_NVML)
 * runs nvidia-smi alone, twice per handoff.  So, in order:
 *
 *  0. The node is of our architecture and its glibc (getconf
 *     GNU_LIBC_VERSION) is at least ours: our own dynamically linked
 *     build (cardbaton-worker-dynamic: no sanitizers, libc only, NVML by
 *     dlopen), checked to run there (`version`) before its rename;
 *     nothing to compile.  One that does not run there falls through.
 *  1. The node has a C compiler (${CC:-cc} there): its sources
 *     (cardbaton-worker.shar, worker/mkshar.sh) are compiled there,
 *     dynamically linked against the node's own libc, whatever its
 *     architecture: NVML where the driver has it.
 *  2. No compiler, or the compile fails (the shar exits SHAR_CANNOT:
 *     cc failed, the binary does not run, no temporary directory), and
 *     the node's `uname -m` is ours: the static build (nvidia-smi
 *     only).  A compile that failed says why in one progress line.
 *  3. Neither: the install fails, saying why.
 *
 * Round trips: one to ask whether this worker is there, and if not,
 * the node's machine, its glibc and whether it has a compiler; one to
 * install (our dynamic build, the shar, or the static build); more only
 * when one of them could not be used there (the next way then).  Both ways install by a temporary
 * file in bin/ and a rename, so a node never has half a worker under
 * its name (LAYOUT.md section 8), and both end under the same name,
 * bin/cardbaton-worker-WORKER_ID: a node that got the static build
 * keeps it for this version (remove the file to have it compiled once
 * the node has a compiler).  Any other failure of the compile (ssh cut,
 * the state directory not writable, no answer in time) fails the
 * install, which the caller tries again later, rather than leave a
 * node that could have NVML with the static build.  On the node, one
 * compile runs at a time (flock on bin/; a daemon's stream and its
 * first query come together), each file of it in parallel; and both
 * ways read their whole input before anything can fail, so that we
 * are never left writing into a closed pipe (a tool would die of
 * SIGPIPE).
 *
 * Progress goes to the program's callback (node_set_progress).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <gnu/libc-version.h>
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

/* The shar's exit status for "this node cannot build the worker"
 * (worker/mkshar.sh): the static build is shipped instead. */
#define SHAR_CANNOT 86

/* All of the install's round trips but the probe, together: the
 * callers' deadline (spoold.h INSTALL_MS) counts on it. */
#define INSTALL_CALLS_MS (4 * NODE_CALL_MS)
/* Of which the compile may take this much. */
#define COMPILE_MS (3 * NODE_CALL_MS)

/* The last non-empty line of ERR, without the worker's "cardbaton-
 * worker: " prefix, made printable (one line for a progress message or
 * an error).  malloc'd, or NULL when out of memory. */
static char *last_line(const char *err)
{
	const char *end = err + strlen(err), *b;
	static const char prefix[] = "cardbaton-worker: ";
	char *line;

	while (end > err && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
		end--;
	for (b = end; b > err && b[-1] != '\n'; b--)
		;
	if ((size_t)(end - b) >= sizeof prefix - 1 && !strncmp(b, prefix, sizeof prefix - 1))
		b += sizeof prefix - 1;
	if (b == end)
		return strdup("no reason given");
	if (!(line = strndup(b, (size_t)(end - b))))
		return NULL;
	for (char *p = line; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return line;
}

/* Send the build NAME (cardbaton-worker-static, -dynamic): a temporary
 * file beside the target, checked to run (`version`), then linked into
 * place -- never over a worker there already (another install at the
 * same time, a stream's and a query's, got there first: replacing it
 * would leave the watch it started running a deleted file), and renamed
 * where the file system has no hard links.
 * 0; 1: it does not run there (-dynamic only: the caller tries the next
 * way); -1 with ERR set. */
static int ship_build(const struct config *c, const struct node_conf *nc, const char *name,
		      int timeout_ms, struct cb_err *err)
{
	struct sbuf cmd = { 0 };
	struct node_reply r;
	char *file, *body = NULL;
	size_t len = 0;
	int ret = -1, cannot;

	if (!(file = ship_file(name)) || !(body = slurp(file, &len))) {
		cb_err_set(err, EX_UNAVAILABLE_, "%s: cannot find %s to install the worker", nc->name, name);
		goto out;
	}
	/* Through a lab's gate (run_as: owner), its own `install ID`
	 * (worker/gate.c), which answers EX_UNAVAILABLE_ for a worker that
	 * does not run there.  Else the input is read to its end whatever
	 * fails, so that the node never leaves us writing into a closed
	 * pipe. */
	if (nc->as_user ? sbuf_add(&cmd, "install " WORKER_ID, 8 + strlen(WORKER_ID)) < 0 :
	    sbuf_add(&cmd, "umask 077; d=", 13) < 0 ||
	    link_remote_path(&cmd, c->remote_state_dir, "/bin") < 0 ||
	    sbuf_addf(&cmd, "; t=\"$d/.tmp.$$\"; trap 'rm -f \"$t\"' EXIT; trap 'exit 1' HUP INT TERM PIPE; "
		      "mkdir -p \"$d\" && cat > \"$t\" || { cat > /dev/null; exit 1; }; "
		      "chmod 755 \"$t\" && { \"$t\" version > /dev/null 2>&1 || exit %d; } && "
		      "f=\"$d/cardbaton-worker-%s\"; ln \"$t\" \"$f\" 2>/dev/null || [ -x \"$f\" ] || "
		      "mv -f \"$t\" \"$f\"", SHAR_CANNOT, WORKER_ID) < 0) {
		cb_err_sys(err, EX_OSERR_, "%s", nc->name);
		goto out;
	}
	if (run_remote(c, nc, &cmd, body, len, timeout_ms, &r) < 0) {
		cb_err_sys(err, EX_UNAVAILABLE_, "%s", nc->name);
		goto out;
	}
	cannot = nc->as_user ? EX_UNAVAILABLE_ : SHAR_CANNOT;
	if (r.status == cannot && strcmp(name, "cardbaton-worker-static"))
		ret = 1;
	else if (r.status != 0)
		cb_err_set(err, EX_UNAVAILABLE_, "%s: installing the worker failed: %s", nc->name,
			   r.status == cannot && !nc->as_user ? "it does not run there" :
			   *r.err ? r.err : "no reason given");
	else
		ret = 0;
	node_reply_free(&r);
out:
	sbuf_free(&cmd);
	free(file);
	free(body);
	return ret;
}

/* Compile the shar there.  0: installed; 1: the node cannot build it,
 * *WHY (malloc'd) says why; -1 with ERR set: the install failed. */
static int ship_compiled(const struct config *c, const struct node_conf *nc, char **why,
			 struct cb_err *err)
{
	struct sbuf cmd = { 0 }, sh = { 0 };
	struct node_reply r;
	char *file, *body = NULL;
	size_t len = 0;
	int ret = -1;

	*why = NULL;
	if (!(file = ship_file("cardbaton-worker.shar")) || !(body = slurp(file, &len))) {
		cb_err_set(err, EX_UNAVAILABLE_, "%s: cannot find cardbaton-worker.shar to install the worker",
			   nc->name);
		goto out;
	}
	/* The script builds, checks and renames into $dest. */
	if (sbuf_add(&sh, "dest=", 5) < 0 || link_remote_worker(&sh, c) < 0 ||
	    sbuf_add(&sh, "\n", 1) < 0 || sbuf_add(&sh, body, len) < 0 ||
	    sbuf_add(&cmd, "umask 077; exec sh -s", 21) < 0) {
		cb_err_sys(err, EX_OSERR_, "%s", nc->name);
		goto out;
	}
	if (run_remote(c, nc, &cmd, sh.s, sh.len, COMPILE_MS, &r) < 0) {
		cb_err_sys(err, EX_UNAVAILABLE_, "%s", nc->name);
		goto out;
	}
	if (r.status == 0) {
		ret = 0;
	} else if (r.status == SHAR_CANNOT) {
		if ((*why = last_line(r.err)))
			ret = 1;
		else
			cb_err_sys(err, EX_OSERR_, "%s", nc->name);
	} else {
		cb_err_set(err, EX_UNAVAILABLE_, "%s: installing the worker failed: %s", nc->name,
			   *r.err ? r.err : "no reason given");
	}
	node_reply_free(&r);
out:
	sbuf_free(&cmd);
	sbuf_free(&sh);
	free(file);
	free(body);
	return ret;
}

/* Whether glibc version THEIRS ("2.36\n...") is at least OURS ("2.36"):
 * the dynamically linked worker built here needs no newer symbol. */
static int libc_at_least(const char *theirs, const char *ours)
{
	unsigned long a[2] = { 0, 0 }, b[2] = { 0, 0 };
	char *end;

	for (int i = 0; i < 2; i++) {
		if (*theirs < '0' || *theirs > '9' || *ours < '0' || *ours > '9')
			return 0;
		a[i] = strtoul(theirs, &end, 10);
		theirs = end + (*end == '.');
		b[i] = strtoul(ours, &end, 10);
		ours = end + (*end == '.');
	}
	return a[0] > b[0] || (a[0] == b[0] && a[1] >= b[1]);
}

/*
 * Through a lab's gate (run_as: owner, SPEC §12) no shell runs: the
 * worker is asked its `version` (127: not there), and installed by the
 * gate's `install ID` -- our dynamically linked build, or, where that
 * does not run, the static one.  Nothing is compiled there.
 */
static int ensure_gated(const struct config *c, const struct node_conf *nc, struct cb_err *err)
{
	char **argv = node_argv(c, nc, (const char *const[]){ "version", NULL });
	struct node_reply r;
	int ret;

	if (!argv || link_run(argv, NULL, 0, NODE_QUERY_MS, &r) < 0)
		return cb_err_sys(err, EX_UNAVAILABLE_, "%s", nc->name);
	ret = r.status;
	/* The account's refusal of the key (ssh's, or the gate's) is
	 * EX_NOPERM_: the caller tells the account, not the node. */
	if (ret != 0 && ret != 127)
		cb_err_set(err, (ret == 255 && strstr(r.err, "Permission denied")) ||
				(ret == 77 && strstr(r.err, "cardbaton-gate: refused")) ? EX_NOPERM_
											: EX_UNAVAILABLE_,
			   "%s: %s", nc->name, *r.err ? r.err : "cannot reach the node");
	node_reply_free(&r);
	if (ret != 127)
		return ret ? -1 : 0;
	progress("%s: installing cardbaton-worker %s as %s, through the lab's gate...", nc->name,
		 WORKER_ID, nc->as_user);
	if ((ret = ship_build(c, nc, "cardbaton-worker-dynamic", INSTALL_CALLS_MS / 2, err)) == 1)
		ret = ship_build(c, nc, "cardbaton-worker-static", INSTALL_CALLS_MS / 2, err);
	if (ret == 0)
		progress("%s: cardbaton-worker installed", nc->name);
	return ret;
}

int node_ensure_worker(const struct config *c, const struct node_conf *nc, struct cb_err *err)
{
	struct sbuf cmd = { 0 };
	struct node_reply r;
	struct utsname u;
	const char *mine;
	char *arch, *nl, *why = NULL;
	long long t0;
	int native, has_cc, libc_new, left, ret = -1;

	if (nc->local)
		return 0;
	if (nc->as_user)
		return ensure_gated(c, nc, err);
	/* One round trip: is it there, and if not, what machine is this,
	 * which glibc has it, and has it a compiler?  (`command -v` of CC's
	 * first word; set -f: no glob in it.) */
	if (sbuf_add(&cmd, "p=", 2) < 0 || link_remote_worker(&cmd, c) < 0 ||
	    sbuf_addf(&cmd, "; if [ -x \"$p\" ]; then echo present; else uname -m; "
		      "getconf GNU_LIBC_VERSION 2>/dev/null; set -f; "
		      "set -- ${CC:-cc}; if command -v \"$1\" >/dev/null 2>&1; then echo cc; fi; fi") < 0 ||
	    run_remote(c, nc, &cmd, NULL, 0, NODE_QUERY_MS, &r) < 0) {
		cb_err_sys(err, EX_UNAVAILABLE_, "%s", nc->name);
		sbuf_free(&cmd);
		return -1;
	}
	if (r.status != 0) {
		cb_err_set(err, EX_UNAVAILABLE_, "%s: %s", nc->name,
			   *r.err ? r.err : "cannot reach the node");
		node_reply_free(&r);
		return -1;
	}
	arch = r.out;
	nl = arch + strcspn(arch, "\n");
	has_cc = libc_new = 0;
	for (char *l = *nl ? nl + 1 : nl; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != 0)) {
		has_cc |= !strncmp(l, "cc\n", 3);
		libc_new |= !strncmp(l, "glibc ", 6) && libc_at_least(l + 6, gnu_get_libc_version());
	}
	*nl = '\0';
	if (!strcmp(arch, "present")) {
		node_reply_free(&r);
		return 0;
	}
	mine = uname(&u) == 0 ? u.machine : "another machine";
	native = !strcmp(mine, arch);
	t0 = mono_ms();
	if (native && libc_new) {
		/* Ours, dynamically linked: NVML, and nothing to compile. */
		progress("%s: installing cardbaton-worker %s (%s, glibc %s)...", nc->name, WORKER_ID,
			 arch, gnu_get_libc_version());
		switch (ship_build(c, nc, "cardbaton-worker-dynamic", INSTALL_CALLS_MS / 2, err)) {
		case 0:
			goto installed;
		case 1:
			progress("%s: the dynamically linked worker does not run there", nc->name);
			break;
		default:
			goto out;
		}
	}
	if (has_cc) {
		progress("%s: installing cardbaton-worker %s (%s, compiled there)...", nc->name, WORKER_ID,
			 arch);
		switch (ship_compiled(c, nc, &why, err)) {
		case 0:
			goto installed;
		case 1:
			break;
		default:
			goto out;
		}
		if (!native) {
			cb_err_set(err, EX_UNAVAILABLE_,
				   "%s: cannot install the worker: %s (and the static build is for %s, not %s)",
				   nc->name, why, mine, arch);
			goto out;
		}
		progress("%s: cannot compile the worker there (%s); installing the static build "
			 "(nvidia-smi only)...", nc->name, why);
	} else if (!native) {
		cb_err_set(err, EX_UNAVAILABLE_,
			   "%s: cannot install the worker: no C compiler there to build it for %s, "
			   "and the static build is for %s", nc->name, arch, mine);
		goto out;
	} else {
		progress("%s: installing cardbaton-worker %s (%s, static build)...", nc->name, WORKER_ID,
			 arch);
	}
	/* What is left of the install's time (at least one call's: the
	 * compile may take COMPILE_MS of it). */
	left = (int)(INSTALL_CALLS_MS - (mono_ms() - t0));
	if (ship_build(c, nc, "cardbaton-worker-static", left > NODE_CALL_MS ? left : NODE_CALL_MS,
		       err) < 0)
		goto out;
installed:
	progress("%s: cardbaton-worker installed", nc->name);
	ret = 0;
out:
	free(why);
	node_reply_free(&r);
	return ret;
}
