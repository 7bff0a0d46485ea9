/*
 * util.c - cardbaton-worker's small helpers: messages, time, whole-file
 * I/O, the state directory, attempt state files and locks.
 */
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

static char *vasprintf_(const char *fmt, va_list ap)
{
	va_list ap2;
	int n;
	char *s;

	va_copy(ap2, ap);
	n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0)
		return NULL;
	s = malloc((size_t)n + 1);
	if (!s)
		return NULL;
	if (vsnprintf(s, (size_t)n + 1, fmt, ap) != n) {
		free(s);
		return NULL;
	}
	return s;
}

char *wk_asprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = vasprintf_(fmt, ap);
	va_end(ap);
	if (!s)
		errno = ENOMEM;
	return s;
}

static void vmsg(const char *suffix, const char *fmt, va_list ap)
{
	char *m = vasprintf_(fmt, ap);

	if (suffix)
		fprintf(stderr, "%s: %s: %s\n", PROG, m ? m : "(out of memory)", suffix);
	else
		fprintf(stderr, "%s: %s\n", PROG, m ? m : "(out of memory)");
	fflush(stderr);
	free(m);
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

long long wk_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long wk_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void wk_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int wk_write_all(int fd, const void *p, size_t n)
{
	const char *b = p;

	while (n > 0) {
		ssize_t w = write(fd, b, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

int wk_read_fd(int fd, size_t max, char **out, size_t *len)
{
	size_t n = 0, cap = 4096;
	char *b = malloc(cap);

	if (!b)
		return -1;
	for (;;) {
		ssize_t r;

		if (n + 1 >= cap) {
			char *nb;

			if (cap > max + 1) {
				free(b);
				errno = EFBIG;
				return -1;
			}
			nb = realloc(b, cap * 2);
			if (!nb) {
				free(b);
				return -1;
			}
			b = nb;
			cap *= 2;
		}
		r = read(fd, b + n, cap - n - 1);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			free(b);
			return -1;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > max) {
			free(b);
			errno = EFBIG;
			return -1;
		}
	}
	b[n] = '\0';
	*out = b;
	*len = n;
	return 0;
}

int wk_read_at(int dirfd, const char *name, size_t max, char **out, size_t *len)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	int r, e;

	if (fd < 0)
		return -1;
	r = wk_read_fd(fd, max, out, len);
	e = errno;
	close(fd);
	errno = e;
	return r;
}

int wk_atomic_write(int dirfd, const char *tmpname, const char *name,
		    const void *buf, size_t len, int durable)
{
	int fd, e;

	/* A stale temporary file is a writer that died: ours now. */
	if (unlinkat(dirfd, tmpname, 0) < 0 && errno != ENOENT)
		return -1;
	fd = openat(dirfd, tmpname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	/* Exactly 0600, whatever the umask. */
	if (fchmod(fd, 0600) < 0 || wk_write_all(fd, buf, len) < 0 || (durable && fsync(fd) < 0)) {
		e = errno;
		close(fd);
		unlinkat(dirfd, tmpname, 0);
		errno = e;
		return -1;
	}
	if (close(fd) < 0 || renameat(dirfd, tmpname, dirfd, name) < 0) {
		e = errno;
		unlinkat(dirfd, tmpname, 0);
		errno = e;
		return -1;
	}
	return durable ? fsync(dirfd) : 0;
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
		r = wk_asprintf("%s%s", h, path + 1);
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
	r = wk_asprintf("%s/%s", base, rel);
	free(base);
	free(rel);
	return r;
}

/* mkdir -p PATH with mode 0700 (whatever the umask) for what is made;
 * existing ones are left as they are. */
static int mkdir_p(const char *path)
{
	char *p = strdup(path), *s;
	int rc = 0;

	if (!p)
		return -1;
	for (s = p + 1; ; s++) {
		if (*s == '/' || *s == '\0') {
			char c = *s;

			*s = '\0';
			if (mkdir(p, 0700) == 0 ? chmod(p, 0700) < 0 : errno != EEXIST) {
				rc = -1;
				break;
			}
			*s = c;
			if (c == '\0')
				break;
		}
	}
	free(p);
	return rc;
}

int wk_state_open(struct wk_state *st, const char *dir, char **why)
{
	static const char *const sub[] = { "attempts", "leases" };
	size_t i;

	st->fd = st->attfd = st->leasefd = -1;
	*why = NULL;
	st->path = wk_expand_path(dir, 1);
	if (!st->path) {
		*why = wk_asprintf("state directory %s: %s", dir, strerror(errno));
		return -1;
	}
	if (mkdir_p(st->path) < 0) {
		*why = wk_asprintf("mkdir %s: %s", st->path, strerror(errno));
		return -1;
	}
	st->fd = open(st->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st->fd < 0) {
		*why = wk_asprintf("%s: %s", st->path, strerror(errno));
		return -1;
	}
	for (i = 0; i < 2; i++) {
		int fd, made = mkdirat(st->fd, sub[i], 0700) == 0;

		if (!made && errno != EEXIST) {
			*why = wk_asprintf("mkdir %s/%s: %s", st->path, sub[i], strerror(errno));
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
				*why = wk_asprintf("%s/%s: is a symbolic link (not followed)", st->path, sub[i]);
			else
				*why = wk_asprintf("%s/%s: %s", st->path, sub[i], strerror(e));
			return -1;
		}
		if (i == 0)
			st->attfd = fd;
		else
			st->leasefd = fd;
	}
	return 0;
}

void wk_state_close(struct wk_state *st)
{
	if (st->leasefd >= 0)
		close(st->leasefd);
	if (st->attfd >= 0)
		close(st->attfd);
	if (st->fd >= 0)
		close(st->fd);
	free(st->path);
	st->path = NULL;
	st->fd = st->attfd = st->leasefd = -1;
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
	char *name = wk_asprintf("%s.state", id), *buf;
	size_t len;
	long got;
	const char *why;

	if (!name)
		return -1;
	if (wk_read_at(st->attfd, name, WIRE_MAX_RECORD, &buf, &len) < 0) {
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

int wk_state_write(const struct wk_state *st, const char *id, const struct wire_rec *r)
{
	char *name = wk_asprintf("%s.state", id);
	char *tmp = wk_asprintf(".%s.state.tmp", id);
	char *buf = NULL;
	long n;
	int rc = -1, e;

	if (name && tmp && (n = wire_format(r, &buf)) >= 0)
		rc = wk_atomic_write(st->attfd, tmp, name, buf, (size_t)n, 1);
	e = errno;
	free(buf);
	free(name);
	free(tmp);
	errno = e;
	return rc;
}

int wk_state_final(const char *s)
{
	return s && (strcmp(s, "succeeded") == 0 || strcmp(s, "failed") == 0 ||
		     strcmp(s, "cancelled") == 0 || strcmp(s, "lost") == 0 ||
		     strcmp(s, "paused") == 0);
}

int wk_lock_try(int dirfd, const char *name, int how, int create, int *fdp)
{
	int fd, flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC;

	*fdp = -1;
	if (create)
		flags = O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC;
	fd = openat(dirfd, name, flags, 0600);
	if (fd < 0)
		return -1;
	/* Leases and attempt locks are ours alone: 0600, whatever the umask. */
	if (create && fchmod(fd, 0600) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	while (flock(fd, how | LOCK_NB) < 0) {
		int e = errno;

		if (e == EINTR)
			continue;
		close(fd);
		if (e == EWOULDBLOCK)
			return 0;
		errno = e;
		return -1;
	}
	*fdp = fd;
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
		got = wk_lock_try(adir, "lock", LOCK_EX, 0, &lockfd);
		close(adir);
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
		if (!*alive)
			return 0;
		/* Being launched: the launcher holds the lock (step 2-6). */
		if (wire_add(r, "attempt", id) < 0 || wire_add(r, "state", "starting") < 0)
			return -1;
		return 1;
	}
	if (!*alive) {
		const char *s = wire_get(r, "state");

		if (s && (strcmp(s, "starting") == 0 || strcmp(s, "running") == 0 ||
			  strcmp(s, "pausing") == 0)) {
			if (wire_set(r, "state", "lost") < 0 ||
			    wire_set(r, "reason", "worker vanished without a final status") < 0 ||
			    wk_set_ll(r, "finished", wk_now_ms()) < 0 ||
			    wk_state_write(st, id, r) < 0) {
				int e = errno;

				if (lockfd >= 0)
					close(lockfd);
				errno = e;
				return -1;
			}
		}
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
