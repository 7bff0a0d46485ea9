/*
 * file.c - whole-buffer I/O, careful reads, the atomic write (base.h;
 * LAYOUT.md §3 is the protocol atomic_write implements), mkdir -p, and
 * where the running program lives.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"

int write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int read_fd(int fd, size_t max, char **out, size_t *len)
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

/* ST (taken before the read) still what DIRFD/NAME and FD are: the same
 * file under NAME, not changed since.  0 when so; -1 otherwise. */
static int still_named(int dirfd, const char *name, int fd, const struct stat *st)
{
	struct stat now, named;

	if (fstat(fd, &now) < 0 || fstatat(dirfd, name, &named, AT_SYMLINK_NOFOLLOW) < 0)
		return -1;
	if (named.st_dev != st->st_dev || named.st_ino != st->st_ino || now.st_size != st->st_size ||
	    now.st_ctim.tv_sec != st->st_ctim.tv_sec || now.st_ctim.tv_nsec != st->st_ctim.tv_nsec)
		return -1;
	return 0;
}

static int read_whole(int dirfd, const char *name, size_t cap, char **bufp, size_t *lenp,
		      int named, struct stat *out)
{
	struct stat st;
	char *buf;
	size_t len = 0;
	int fd, saved;

	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -1;     /* ELOOP for a symlink, courtesy of O_NOFOLLOW */
	if (fstat(fd, &st) < 0) {
		saved = errno;
		goto fail;
	}
	if (S_ISDIR(st.st_mode)) {
		saved = EISDIR;
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		saved = EINVAL;
		goto fail;
	}
	if ((unsigned long long)st.st_size > cap) {
		saved = EFBIG;
		goto fail;
	}
	if (!(buf = malloc((size_t)st.st_size + 1))) {
		saved = errno;
		goto fail;
	}
	for (;;) {
		ssize_t r;

		if (len == (size_t)st.st_size) {
			/* Grown since fstat?  One byte more tells. */
			char c;

			r = read(fd, &c, 1);
			if (r == 0)
				break;
			if (r > 0) {
				free(buf);
				saved = named && still_named(dirfd, name, fd, &st) < 0 ? ENOENT : EFBIG;
				goto fail;
			}
		} else {
			r = read(fd, buf + len, (size_t)st.st_size - len);
			if (r == 0)
				break;
			if (r > 0) {
				len += (size_t)r;
				continue;
			}
		}
		if (errno == EINTR)
			continue;
		saved = errno;
		free(buf);
		goto fail;
	}
	if (named && still_named(dirfd, name, fd, &st) < 0) {
		free(buf);
		saved = ENOENT;
		goto fail;
	}
	close(fd);
	buf[len] = '\0';
	*bufp = buf;
	*lenp = len;
	if (out)
		*out = st;
	return 0;
fail:
	close(fd);
	errno = saved;
	return -1;
}

int read_capped(int dirfd, const char *name, size_t cap, char **bufp, size_t *lenp)
{
	return read_whole(dirfd, name, cap, bufp, lenp, 0, NULL);
}

int read_capped_stat(int dirfd, const char *name, size_t cap, char **bufp, size_t *lenp,
		     struct stat *st)
{
	return read_whole(dirfd, name, cap, bufp, lenp, 0, st);
}

int read_named(int dirfd, const char *name, size_t cap, char **bufp, size_t *lenp)
{
	return read_whole(dirfd, name, cap, bufp, lenp, 1, NULL);
}

int fsync_dir(int dirfd)
{
	if (fsync(dirfd) < 0 && errno != EINVAL)
		return -1;
	return 0;
}

int exchange_at(int fromfd, const char *from, int tofd, const char *to)
{
	if (renameat2(fromfd, from, tofd, to, RENAME_EXCHANGE) == 0)
		return 0;
	return errno == ENOENT || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP ? 1 : -1;
}

/* TMPFD/TMP put in DSTFD/NAME's place, the file there left under TMP
 * (KEEP) or freed. */
static int put(int tmpfd, const char *tmp, int dstfd, const char *name, int keep)
{
	int r;

	if (keep && (r = exchange_at(tmpfd, tmp, dstfd, name)) <= 0)
		return r;
	return renameat(tmpfd, tmp, dstfd, name);
}

/* The atomic write's steps, TMPFD/TMP to DSTFD/NAME. */
static int write_rename(int tmpfd, const char *tmp, int dstfd, const char *name,
			const void *buf, size_t len, mode_t mode, int how)
{
	int durable = how & ~AW_KEEP_OLD, fd, saved;

	fd = openat(tmpfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return -1;
	/* Exactly MODE: the umask may have taken bits away. */
	if (fchmod(fd, mode) < 0 || write_full(fd, buf, len) < 0 || (durable && fsync(fd) < 0)) {
		saved = errno;
		close(fd);
		goto fail;
	}
	if (close(fd) < 0 || put(tmpfd, tmp, dstfd, name, how & AW_KEEP_OLD) < 0) {
		saved = errno;
		goto fail;
	}
	return durable == AW_DURABLE ? fsync_dir(dstfd) : 0;
fail:
	unlinkat(tmpfd, tmp, 0);
	errno = saved;
	return -1;
}

static unsigned long tmp_counter;

int atomic_write(int tmpfd, int dstfd, const char *name,
		 const void *buf, size_t len, mode_t mode)
{
	char *tmp = xasprintf(".%ld.%lu.%s", (long)getpid(), ++tmp_counter, name);
	int r, saved;

	if (!tmp)
		return -1;
	r = write_rename(tmpfd, tmp, dstfd, name, buf, len, mode, 1);
	saved = errno;
	free(tmp);
	errno = saved;
	return r;
}

int atomic_write_at(int dirfd, const char *tmpname, const char *name,
		    const void *buf, size_t len, mode_t mode, int durable)
{
	/* A stale temporary file is a writer that died: ours now. */
	if (unlinkat(dirfd, tmpname, 0) < 0 && errno != ENOENT)
		return -1;
	return write_rename(dirfd, tmpname, dirfd, name, buf, len, mode, durable);
}

int mkdir_p(const char *path)
{
	char *p = strdup(path), *s;
	int r = 0;

	if (!p)
		return -1;
	for (s = p + (*p != '\0'); ; s++) {
		if (*s == '/' || !*s) {
			char c = *s;

			*s = '\0';
			/* Made here: exactly 0700, whatever the umask. */
			if (mkdir(p, 0700) == 0 ? chmod(p, 0700) < 0 : errno != EEXIST) {
				r = -1;
				break;
			}
			*s = c;
			if (!c)
				break;
		}
	}
	free(p);
	return r;
}

char *exe_dir(void)
{
	size_t size = 256;

	for (;;) {
		char *buf = malloc(size), *slash;
		ssize_t n;

		if (!buf)
			return NULL;
		n = readlink("/proc/self/exe", buf, size);
		if (n < 0) {
			free(buf);
			return NULL;
		}
		if ((size_t)n < size) {
			buf[n] = '\0';
			if (!(slash = strrchr(buf, '/'))) {
				free(buf);
				return NULL;
			}
			*slash = '\0';
			return buf;
		}
		free(buf);
		if (size > (1u << 20))
			return NULL;
		size *= 2;
	}
}
