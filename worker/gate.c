/*
 * gate.c - the forced command of a lab's key (SPEC section 12, LAYOUT.md
 * section 16): `cardbaton-worker gate STATE`, which sshd runs for every
 * connection made with that key (`restrict,command="..."` in the
 * member's authorized_keys, written by `cardbaton bootstrap --lab`).
 *
 * What the client asked for is in $SSH_ORIGINAL_COMMAND, as the
 * controller writes it (link/node.c): `exec PATH ARG...`, each word
 * quoted for a POSIX shell ('...', '\'', "$HOME").  The gate parses
 * exactly that and nothing more -- no shell ever reads the command --
 * and then either
 *
 *   runs the worker: PATH is STATE/bin/cardbaton-worker-ID (an ID of
 *     [A-Za-z0-9._-], a regular file of ours in our own bin/), exec'd
 *     with the words after it as its arguments; or
 *   installs one: `install ID`, the binary on stdin, written to
 *     STATE/bin/.gate.PID, checked to run (`version`), then linked into
 *     place as cardbaton-worker-ID -- never over a worker there already.
 *
 * Anything else (no command: a shell; a word the grammar does not
 * have: ; | & $ ` > < newline; another program) is refused with one
 * line on stderr and exit 77, and nothing runs.  Port forwarding, a pty
 * and the agent are `restrict`'s to refuse (sshd's).  A worker the gate
 * started does not start the gate again (CARDBATON_GATED).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "worker.h"

#define GATE "cardbaton-gate"
#define GATE_INSTALL_MAX (256u << 20)   /* a worker binary at most */
#define GATE_WORKER "/bin/cardbaton-worker-"

int wk_gated;

/* One line on stderr, "cardbaton-gate: refused: WHY" (control
 * characters shown as '?'), and 77. */
__attribute__((format(printf, 1, 0))) static int refuse(const char *fmt, const char *arg)
{
	char *m = xasprintf(fmt, arg);

	for (char *p = m; p && *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	fprintf(stderr, GATE ": refused: %s (this key runs cardbaton-worker's commands only)\n",
		m ? m : "out of memory");
	free(m);
	return EX_NOPERM_;
}

/* Is C a character a word may hold unquoted? */
static int bare(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       strchr("_./=:,+@%-", c) != NULL;
}

void gate_words_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

int gate_split(const char *cmd, const char *home, char ***v, size_t *n)
{
	struct sbuf w = { 0 };
	int in_word = 0;

	*v = NULL;
	*n = 0;
	for (const char *p = cmd;; p++) {
		if (*p == ' ' || *p == '\0') {
			if (in_word) {
				char **nv = realloc(*v, (*n + 2) * sizeof *nv);

				if (!nv)
					goto fail;
				*v = nv;
				nv[(*n)++] = w.s;
				nv[*n] = NULL;
				w = (struct sbuf){ 0 };
				in_word = 0;
			}
			if (*p == '\0')
				return 0;
			continue;
		}
		/* Every word is a string, even '' (an empty one). */
		if (!in_word && sbuf_add(&w, "", 0) < 0)
			goto fail;
		in_word = 1;
		if (*p == '\'') {
			const char *q = strchr(p + 1, '\'');

			if (!q)
				goto bad;
			if (sbuf_add(&w, p + 1, (size_t)(q - p - 1)) < 0)
				goto fail;
			p = q;
		} else if (*p == '\\' && p[1] && p[1] != '\n') {
			if (sbuf_add(&w, ++p, 1) < 0)
				goto fail;
		} else if (!strncmp(p, "\"$HOME\"", 7)) {
			if (sbuf_add(&w, home, strlen(home)) < 0)
				goto fail;
			p += 6;
		} else if (bare(*p)) {
			if (sbuf_add(&w, p, 1) < 0)
				goto fail;
		} else {
			goto bad;
		}
	}
bad:
	errno = EINVAL;
fail:
	sbuf_free(&w);
	gate_words_free(*v, *n);
	*v = NULL;
	*n = 0;
	return -1;
}

/* A worker ID as a file name: 1 to 64 of [A-Za-z0-9._-], not "." first. */
static int id_ok(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n > 64 || id[0] == '.')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!bare(id[i]) || strchr("/=:,+@%", id[i]))
			return 0;
	return 1;
}

/* STATE/bin is ours and closed to others' writes: what the gate runs
 * from there is only ever what we put there.  NULL, or why. */
static const char *bin_problem(const char *bin, int must_exist)
{
	struct stat sb;

	if (lstat(bin, &sb) < 0)
		return must_exist || errno != ENOENT ? strerror(errno) : NULL;
	if (!S_ISDIR(sb.st_mode))
		return "not a directory";
	if (sb.st_uid != geteuid())
		return "not this account's";
	if (sb.st_mode & 022)
		return "writable by others";
	return NULL;
}

static void exec_version(const void *path)
{
	execl((const char *)path, "cardbaton-worker", "version", (char *)NULL);
	_exit(127);
}

/* The .gate.PID files in BIN whose install died before its unlink. */
static void clear_stale(const char *bin)
{
	DIR *d = opendir(bin);
	struct dirent *e;

	while (d && (e = readdir(d))) {
		char *end;
		long pid;

		if (strncmp(e->d_name, ".gate.", 6))
			continue;
		pid = strtol(e->d_name + 6, &end, 10);
		if (*end == '\0' && end != e->d_name + 6 && pid > 0 && pid != (long)getpid() && pid_gone(pid))
			unlinkat(dirfd(d), e->d_name, 0);
	}
	if (d)
		closedir(d);
}

/* `install ID`: the worker on stdin into STATE/bin. */
static int gate_install(const char *state, const char *id)
{
	char *bin = xasprintf("%s/bin", state), *tmp = xasprintf("%s/bin/.gate.%ld", state, (long)getpid());
	char *dst = xasprintf("%s" GATE_WORKER "%s", state, id), *body = NULL, *err = NULL;
	const char *why;
	size_t len = 0;
	struct wk_child c = { 0 };
	int fd = -1, rc = EX_OSERR_;

	if (!bin || !tmp || !dst)
		goto out;
	if (mkdir_p(bin) < 0) {
		rc = wk_errsys(EX_OSERR_, "%s", bin);
		goto out;
	}
	if ((why = bin_problem(bin, 1))) {
		rc = wk_err(EX_OSERR_, "%s: %s", bin, why);
		goto out;
	}
	clear_stale(bin);
	if (read_fd(0, GATE_INSTALL_MAX, &body, &len) < 0) {
		rc = wk_errsys(EX_DATAERR_, "install: standard input");
		goto out;
	}
	if (len == 0) {
		rc = wk_err(EX_DATAERR_, "install: no worker on standard input");
		goto out;
	}
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0700)) < 0 ||
	    write_full(fd, body, len) < 0 || fsync(fd) < 0 || close(fd) < 0) {
		rc = wk_errsys(EX_OSERR_, "%s", tmp);
		if (fd >= 0)
			unlink(tmp);
		fd = -1;
		goto out;
	}
	fd = -1;
	if (wk_run_child(exec_version, tmp, mono_ms() + 30000, 4096, &c, &err) < 0 ||
	    !WIFEXITED(c.status) || WEXITSTATUS(c.status) != 0) {
		unlink(tmp);
		rc = wk_err(EX_UNAVAILABLE_, "install: the worker does not run here%s%s",
			    err ? ": " : "", err ? err : "");
		goto out;
	}
	/* Never over one there: a watch may be running it. */
	if (link(tmp, dst) < 0 && errno != EEXIST) {
		rc = wk_errsys(EX_OSERR_, "%s", dst);
		unlink(tmp);
		goto out;
	}
	unlink(tmp);
	rc = puts("installed") == EOF || fflush(stdout) == EOF ? wk_errsys(EX_OSERR_, "stdout") : 0;
out:
	if (rc == EX_OSERR_ && (!bin || !tmp || !dst))
		rc = wk_errsys(EX_OSERR_, "out of memory");
	wk_child_free(&c);
	free(err);
	free(body);
	free(bin);
	free(tmp);
	free(dst);
	return rc;
}

int cmd_gate(int argc, char **argv)
{
	const char *cmd = getenv("SSH_ORIGINAL_COMMAND"), *home = getenv("HOME");
	const char *state = argc == 1 ? argv[0] : NULL, *why;
	char **w = NULL, *bin = NULL, *path;
	size_t n = 0, k = 0, sl;
	struct stat sb;
	int rc;

	if (!state || state[0] != '/')
		return wk_err(EX_USAGE_, "usage: %s gate STATE_DIR (an absolute path; sshd's forced command)",
			      PROG);
	if (wk_gated)
		return refuse("%s", "the gate inside the gate");
	if (!cmd)
		return refuse("%s", "no command (a shell)");
	if (!home || home[0] != '/')
		return wk_err(EX_OSERR_, "gate: HOME is not an absolute path");
	if (gate_split(cmd, home, &w, &n) < 0) {
		if (errno != EINVAL)
			return wk_errsys(EX_OSERR_, "gate");
		return refuse("not a worker command: %.200s", cmd);
	}
	if (n > 0 && !strcmp(w[0], "exec"))
		k = 1;
	if (n == k) {
		rc = refuse("%s", "no command (a shell)");
		goto out;
	}
	if (n == k + 2 && !strcmp(w[k], "install")) {
		rc = id_ok(w[k + 1]) ? gate_install(state, w[k + 1])
				     : refuse("not a worker ID: %.200s", w[k + 1]);
		goto out;
	}
	/* The worker, by its path from our home (a relative state dir) or
	 * absolute. */
	path = w[k][0] == '/' ? strdup(w[k]) : xasprintf("%s/%s", home, w[k]);
	sl = strlen(state);
	if (!path || !(bin = xasprintf("%s/bin", state))) {
		free(path);
		rc = wk_errsys(EX_OSERR_, "gate");
		goto out;
	}
	if (strncmp(path, state, sl) || strncmp(path + sl, GATE_WORKER, strlen(GATE_WORKER)) ||
	    !id_ok(path + sl + strlen(GATE_WORKER))) {
		rc = refuse("not a worker command: %.200s", cmd);
		free(path);
		goto out;
	}
	/* No bin/ yet is no worker yet: 127 below. */
	if ((why = bin_problem(bin, 0))) {
		rc = wk_err(EX_OSERR_, "gate: %s: %s", bin, why);
		free(path);
		goto out;
	}
	if (lstat(path, &sb) == 0 && (!S_ISREG(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & 022))) {
		rc = wk_err(EX_OSERR_, "gate: %s: not a regular file of this account's, closed to others' writes",
			    path);
		free(path);
		goto out;
	}
	if (setenv("CARDBATON_GATED", "1", 1) < 0) {
		rc = wk_errsys(EX_OSERR_, "gate: setenv");
		free(path);
		goto out;
	}
	free(w[k]);
	w[k] = strdup("cardbaton-worker");
	if (w[k]) {
		fflush(NULL);
		execv(path, w + k);
	}
	/* Not there (not installed yet): 127, as a shell says it. */
	rc = errno == ENOENT ? (fprintf(stderr, GATE ": %s: not installed\n", path), 127)
			     : wk_errsys(EX_OSERR_, "gate: %s", path);
	free(path);
out:
	gate_words_free(w, n);
	free(bin);
	return rc;
}
