/*
 * lock.c - flock, never blocking (base.h).  Liveness in CardBaton is a
 * held lock, never a pid: attempts/ID/lock and leases/UUID on a node,
 * SPOOL/lock for the daemon.  The one use of a pid is pid_gone, for
 * the temporary files named after their writer.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"

int lock_try(int fd, int how)
{
	while (flock(fd, how | LOCK_NB) < 0) {
		if (errno == EINTR)
			continue;
		return errno == EWOULDBLOCK ? 0 : -1;
	}
	return 1;
}

int lock_at(int dirfd, const char *name, int how, int create, int *fdp)
{
	int fd, r = 0, e, flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC;

	*fdp = -1;
	if (create)
		flags = O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC;
	fd = openat(dirfd, name, flags, 0600);
	if (fd < 0)
		return -1;
	/* What is locked is ours alone: 0600, whatever the umask. */
	if ((create && fchmod(fd, 0600) < 0) || (r = lock_try(fd, how)) < 0) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	if (r == 0) {
		close(fd);
		return 0;
	}
	*fdp = fd;
	return 1;
}

int pid_gone(long pid)
{
	return kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}
