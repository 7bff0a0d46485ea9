/*
 * util.c - cardbaton-worker's small helpers: messages, paths, the state
 * directory, attempt state files (the libc-only base it shares with the
 * controller is in base/: I/O, the atomic write, locks, clocks).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "worker.h"

static char *last_err;

static void vmsg(const char *suffix, const char *fmt, va_list ap)
{
	char *m = vxasprintf(fmt, ap);

	free(last_err);
	if (suffix) {
		fprintf(stderr, "%s: %s: %s\n", PROG, m ? m : "(out of memory)", suffix);
		last_err = xasprintf("%s: %s", m ? m : "(out of memory)", suffix);
	} else {
		fprintf(stderr, "%s: %s\n", PROG, m ? m : "(out of memory)");
		last_err = m ? strdup(m) : NULL;
	}
	fflush(stderr);
	free(m);
}

const char *wk_last_err(void)
{
	return last_err;
}

int wk_err(int ex, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg(NULL, fmt, ap);
	va_end(ap);
	return ex;
}

int wk_errsys(int ex, const char *fmt, ...)
{
	va_list ap;
	int e = errno;

	va_start(ap, fmt);
	vmsg(strerror(e), fmt, ap);
	va_end(ap);
	errno = e;
	return ex;
}

static char *home_dir(void)
{
	const char *h = getenv("HOME");
	struct passwd *pw;

	if (h && *h)
		return strdup(h);
	pw = getpwuid(getuid());
	if (pw && pw->pw_dir && *pw->pw_dir)
		return strdup(pw->pw_dir);
	errno = ENOENT;
	return NULL;
}

static char *cwd_dup(void)
{
	size_t cap = 256;

	for (;;) {
		char *b = malloc(cap);

		if (!b)
			return NULL;
		if (getcwd(b, cap))
			return b;
		free(b);
		if (errno != ERANGE)
			return NULL;
		cap *= 2;
	}
}

char *wk_expand_path(const char *path, int abs)
{
	char *r, *base, *rel;

	if (path[0] == '~' && (path[1] == '\0' || path[1] == '/')) {
		char *h = home_dir();

		if (!h)
			return NULL;
		r = xasprintf("%s%s", h, path + 1);
		free(h);
	} else {
		r = strdup(path);
	}
	if (!r || r[0] == '/' || !abs)
		return r;
	base = cwd_dup();
	if (!base) {
		free(r);
		return NULL;
	}
	rel = r;
	r = xasprintf("%s/%s", base, rel);
	free(base);
	free(rel);
	return r;
}

char *wk_user_name(uid_t uid)
{
	struct passwd *pw = getpwuid(uid);

	return pw && pw->pw_name && *pw->pw_name ? strdup(pw->pw_name) : xasprintf("uid %ld", (long)uid);
}

/* The shared lease directory (wk_state_open): its fd, or -1 with *why. */
static int lease_dir_open(const char *dir, char **why)
{
	struct stat sb;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), e = errno;

	if (fd < 0) {
		if (lstat(dir, &sb) == 0 && S_ISLNK(sb.st_mode))
			*why = xasprintf("lease_dir %s: is a symbolic link (not followed)", dir);
		else
			*why = xasprintf("lease_dir %s: %s", dir, e == ENOTDIR ? "not a directory" : strerror(e));
		return -1;
	}
	if (fstat(fd, &sb) < 0)
		*why = xasprintf("lease_dir %s: %s", dir, strerror(errno));
	/* Its owner may remove any lease in it, sticky or not. */
	else if (sb.st_uid != 0 && sb.st_uid != geteuid()) {
		char *who = wk_user_name(sb.st_uid);

		*why = xasprintf("lease_dir %s: owned by %s, neither root nor this account", dir,
				 who ? who : "another account");
		free(who);
	}
	else if ((sb.st_mode & S_IWOTH) && !(sb.st_mode & S_ISVTX))
		*why = xasprintf("lease_dir %s: writable by others without the sticky bit", dir);
	else if ((sb.st_mode & S_IWGRP) && !(sb.st_mode & S_ISVTX))
		*why = xasprintf("lease_dir %s: writable by its group without the sticky bit", dir);
	else
		return fd;
	close(fd);
	return -1;
}

int wk_state_open(struct wk_state *st, const char *dir, const char *lease_dir, char **why)
{
	static const char *const sub[] = { "attempts", "leases", "staged" };
	int *dst[] = { &st->attfd, &st->leasefd, &st->stagedfd };
	size_t i;

	st->fd = st->attfd = st->leasefd = st->stagedfd = -1;
	st->lease_path = NULL;
	*why = NULL;
	if (lease_dir) {
		if (lease_dir[0] != '/') {
			*why = xasprintf("lease_dir %s: not an absolute path", lease_dir);
			return -1;
		}
		if (!(st->lease_path = strdup(lease_dir)) ||
		    (st->leasefd = lease_dir_open(lease_dir, why)) < 0)
			return -1;
	}
	st->path = wk_expand_path(dir, 1);
	if (!st->path) {
		*why = xasprintf("state directory %s: %s", dir, strerror(errno));
		return -1;
	}
	if (mkdir_p(st->path) < 0) {
		*why = xasprintf("mkdir %s: %s", st->path, strerror(errno));
		return -1;
	}
	st->fd = open(st->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st->fd < 0) {
		*why = xasprintf("%s: %s", st->path, strerror(errno));
		return -1;
	}
	for (i = 0; i < sizeof sub / sizeof sub[0]; i++) {
		int fd, made;

		if (*dst[i] >= 0)
			continue;       /* the lease_dir */
		made = mkdirat(st->fd, sub[i], 0700) == 0;

		if (!made && errno != EEXIST) {
			*why = xasprintf("mkdir %s/%s: %s", st->path, sub[i], strerror(errno));
			return -1;
		}
		fd = openat(st->fd, sub[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 && made && fchmod(fd, 0700) < 0) {
			close(fd);
			fd = -1;
		}
		if (fd < 0) {
			struct stat ls;
			int e = errno;

			if (fstatat(st->fd, sub[i], &ls, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(ls.st_mode))
				*why = xasprintf("%s/%s: is a symbolic link (not followed)", st->path, sub[i]);
			else
				*why = xasprintf("%s/%s: %s", st->path, sub[i], strerror(e));
			return -1;
		}
		*dst[i] = fd;
	}
	return 0;
}

void wk_state_close(struct wk_state *st)
{
	if (st->stagedfd >= 0)
		close(st->stagedfd);
	if (st->leasefd >= 0)
		close(st->leasefd);
	if (st->attfd >= 0)
		close(st->attfd);
	if (st->fd >= 0)
		close(st->fd);
	free(st->path);
	free(st->lease_path);
	st->path = st->lease_path = NULL;
	st->fd = st->attfd = st->leasefd = st->stagedfd = -1;
}

int wk_id_ok(const char *id)
{
	size_t n = 0;

	for (; id[n]; n++) {
		char c = id[n];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == '-'))
			return 0;
	}
	return n >= 1 && n <= 64;
}

int wk_state_read(const struct wk_state *st, const char *id, struct wire_rec *r)
{
	char *name = xasprintf("%s.state", id), *buf;
	size_t len;
	long got;
	const char *why;

	if (!name)
		return -1;
	if (read_capped(st->attfd, name, WIRE_MAX_RECORD, &buf, &len) < 0) {
		free(name);
		return errno == ENOENT ? 0 : -1;
	}
	free(name);
	got = wire_parse(buf, len, r, &why);
	free(buf);
	if (got <= 0) {
		wire_free(r);
		/* Said here, where the file and the reason are known. */
		wk_err(0, "attempts/%s.state: %s", id, why ? why : got ? strerror(errno) : "no \"end\" line");
		errno = EINVAL;
		return -1;
	}
	return 1;
}

/* attempts/ID.state's temporary name, malloc'd or NULL. */
static char *state_tmp(const char *id)
{
	return xasprintf(".%s.state.tmp", id);
}

static int state_write(const struct wk_state *st, const char *id, const struct wire_rec *r,
		       int durable)
{
	char *name = xasprintf("%s.state", id);
	char *tmp = state_tmp(id);
	char *buf = NULL;
	long n;
	int rc = -1, e;

	if (name && tmp && (n = wire_format(r, &buf)) >= 0)
		rc = atomic_write_at(st->attfd, tmp, name, buf, (size_t)n, 0600, durable);
	e = errno;
	free(buf);
	free(name);
	free(tmp);
	errno = e;
	return rc;
}

int wk_state_write(const struct wk_state *st, const char *id, const struct wire_rec *r)
{
	return state_write(st, id, r, AW_DURABLE);
}

int wk_state_write_data(const struct wk_state *st, const char *id, const struct wire_rec *r)
{
	return state_write(st, id, r, AW_DATA | AW_KEEP_OLD);
}

void wk_state_drop_old(const struct wk_state *st, const char *id)
{
	char *tmp = state_tmp(id);

	if (tmp)
		unlinkat(st->attfd, tmp, 0);
	free(tmp);
}

int wk_state_final(const char *s)
{
	enum wire_state ws;

	return wire_state_parse(s, &ws) == 0 && wire_state_final(ws);
}

int wk_state_is(const struct wire_rec *r, enum wire_state ws)
{
	const char *s = wire_get(r, "state");

	return s && !strcmp(s, wire_state_name(ws));
}

int wk_host_ok(const char *s, size_t n)
{
	if (n == 0 || n > 255 || s[0] == '-' || s[0] == '.')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!s[i] || !strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", s[i]))
			return 0;
	return 1;
}

int wk_attempt_status(const struct wk_state *st, const char *id,
		      struct wire_rec *r, int *alive)
{
	int adir, lockfd = -1, got = -1, rc;

	*alive = 0;
	if (!wk_id_ok(id))
		return 0;
	/* Take (or test) the lock first: whoever writes the state file
	 * holds it, so with it in hand the state cannot change under us. */
	adir = openat(st->attfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (adir >= 0) {
		got = lock_at(adir, "lock", LOCK_EX, 0, &lockfd);
		close(adir);
	} else if (errno == ELOOP || errno == ENOTDIR) {
		errno = ENOENT;         /* no directory (a link is not followed): no lock */
	}
	if (got < 0 && errno != ENOENT)
		return -1;
	*alive = got == 0;
	rc = wk_state_read(st, id, r);
	if (rc < 0) {
		int e = errno;

		if (lockfd >= 0)
			close(lockfd);
		errno = e;
		return -1;
	}
	if (rc == 0) {
		if (lockfd >= 0)
			close(lockfd);
		/* Staged (the baton): no directory until it starts. */
		if (!*alive)
			return wk_staged_rec(st, id, r);
		/* Being launched: the launcher holds the lock (step 2-6). */
		if (wire_add(r, "attempt", id) < 0 || wire_add(r, "state", wire_state_name(WS_STARTING)) < 0)
			return -1;
		return 1;
	}
	if (!*alive) {
		enum wire_state ws;
		char *why = NULL;

		if (wire_state_parse(wire_get(r, "state"), &ws) == 0 &&
		    (ws == WS_STARTING || ws == WS_RUNNING || ws == WS_PAUSING) && st->slurm) {
			/* A lock on a compute node may not be seen from here,
			 * and a job pending in Slurm holds none: Slurm says
			 * whether it lives (not asked: nothing decided). */
			int live = slurm_alive(r, &why);

			*alive = live != 0;
			/* It may have ended in between: its last word counts. */
			if (!*alive) {
				wire_free(r);
				if (wk_state_read(st, id, r) != 1) {
					free(why);
					if (lockfd >= 0)
						close(lockfd);
					errno = errno ? errno : EIO;
					return -1;
				}
			}
		}
		if (!*alive && wire_state_parse(wire_get(r, "state"), &ws) == 0 &&
		    (ws == WS_STARTING || ws == WS_RUNNING || ws == WS_PAUSING)) {
			if (wire_set(r, "state", wire_state_name(WS_LOST)) < 0 ||
			    wire_set(r, "reason", why ? why : "worker vanished without a final status") < 0 ||
			    wk_set_ll(r, "finished", now_ms()) < 0 ||
			    wk_state_write(st, id, r) < 0) {
				int e = errno;

				free(why);
				if (lockfd >= 0)
					close(lockfd);
				errno = e;
				return -1;
			}
		}
		free(why);
	}
	if (lockfd >= 0)
		close(lockfd);
	return 1;
}

int wk_set_ll(struct wire_rec *r, const char *key, long long v)
{
	char num[32];

	snprintf(num, sizeof num, "%lld", v);
	return wire_set(r, key, num);
}

int wk_print(const struct wire_rec *r)
{
	char *b;
	long n = wire_format(r, &b);
	int rc = 0;

	if (n < 0)
		return -1;
	if (fwrite(b, 1, (size_t)n, stdout) != (size_t)n || fflush(stdout) == EOF)
		rc = -1;
	free(b);
	return rc;
}

const char *wk_signame(int sig)
{
	static const struct { int n; const char *s; } t[] = {
		{ SIGHUP, "SIGHUP" }, { SIGINT, "SIGINT" }, { SIGQUIT, "SIGQUIT" },
		{ SIGILL, "SIGILL" }, { SIGTRAP, "SIGTRAP" }, { SIGABRT, "SIGABRT" },
		{ SIGBUS, "SIGBUS" }, { SIGFPE, "SIGFPE" }, { SIGKILL, "SIGKILL" },
		{ SIGUSR1, "SIGUSR1" }, { SIGSEGV, "SIGSEGV" }, { SIGUSR2, "SIGUSR2" },
		{ SIGPIPE, "SIGPIPE" }, { SIGALRM, "SIGALRM" }, { SIGTERM, "SIGTERM" },
		{ SIGCHLD, "SIGCHLD" }, { SIGCONT, "SIGCONT" }, { SIGSTOP, "SIGSTOP" },
		{ SIGTSTP, "SIGTSTP" }, { SIGTTIN, "SIGTTIN" }, { SIGTTOU, "SIGTTOU" },
		{ SIGURG, "SIGURG" }, { SIGXCPU, "SIGXCPU" }, { SIGXFSZ, "SIGXFSZ" },
		{ SIGVTALRM, "SIGVTALRM" }, { SIGPROF, "SIGPROF" }, { SIGSYS, "SIGSYS" },
	};
	size_t i;

	for (i = 0; i < sizeof t / sizeof t[0]; i++)
		if (t[i].n == sig)
			return t[i].s;
	return NULL;
}

void wk_other_fds(const int *keep, size_t nkeep, int cloexec)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int *fds = NULL;
	size_t n = 0, i, k;

	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		int fd = atoi(e->d_name), *nf;

		if (e->d_name[0] < '0' || e->d_name[0] > '9' || fd <= 2 || fd == dirfd(d))
			continue;
		for (k = 0; k < nkeep && keep[k] != fd; k++)
			;
		if (k < nkeep)
			continue;
		nf = realloc(fds, (n + 1) * sizeof *nf);
		if (!nf)
			break;
		fds = nf;
		fds[n++] = fd;
	}
	closedir(d);
	/* Results unchecked: the one failure is a descriptor already gone. */
	for (i = 0; i < n; i++)
		if (cloexec)
			(void)fcntl(fds[i], F_SETFD, FD_CLOEXEC);
		else
			(void)close(fds[i]);
	free(fds);
}
