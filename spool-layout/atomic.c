/*
 * atomic.c - the write protocol of LAYOUT.md §3, and careful reads.
 *
 * Every spool file is written by atomic_write: unique temp file,
 * complete write, fsync, checked close, rename, fsync of the directory.
 * Nothing else in CardBaton writes spool files.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spool.h"

static unsigned long tmp_counter;

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

int fsync_dir(int dirfd)
{
	if (fsync(dirfd) < 0 && errno != EINVAL)
		return -1;
	return 0;
}

int atomic_write(int tmpfd, int dstfd, const char *name,
		 const void *buf, size_t len, mode_t mode)
{
	char *tmp;
	int fd, saved;

	tmp = xasprintf(".%ld.%lu.%s", (long)getpid(), ++tmp_counter, name);
	if (!tmp)
		return -1;
	fd = openat(tmpfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0) {
		saved = errno;
		free(tmp);
		errno = saved;
		return -1;
	}
	/* Exactly MODE: the umask may have taken bits away. */
	if (fchmod(fd, mode) < 0 || write_full(fd, buf, len) < 0 || fsync(fd) < 0) {
		saved = errno;
		close(fd);
		goto fail;
	}
	if (close(fd) < 0) {
		saved = errno;
		goto fail;
	}
	if (renameat(tmpfd, tmp, dstfd, name) < 0) {
		saved = errno;
		goto fail;
	}
	free(tmp);
	return fsync_dir(dstfd);
fail:
	unlinkat(tmpfd, tmp, 0);
	free(tmp);
	errno = saved;
	return -1;
}

int move_noreplace(int fromfd, const char *from, int tofd, const char *to)
{
	if (renameat2(fromfd, from, tofd, to, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
	/* A file system without RENAME_NOREPLACE: link refuses to replace. */
	if (linkat(fromfd, from, tofd, to, 0) < 0)
		return -1;
	if (unlinkat(fromfd, from, 0) < 0)
		return -1;
	return 0;
}

int read_capped(int dirfd, const char *name, size_t cap, char **bufp, size_t *lenp)
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
				saved = EFBIG;
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
	close(fd);
	buf[len] = '\0';
	*bufp = buf;
	*lenp = len;
	return 0;
fail:
	close(fd);
	errno = saved;
	return -1;
}

int lock_try(int fd)
{
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return 1;
	if (errno == EWOULDBLOCK)
		return 0;
	return -1;
}
