/*
 * drain.c - SPOOL/drain/NODE (drain.h, LAYOUT.md §13): a file per
 * drained node, "drain\n" or "drain checkpoint\n".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomic.h"
#include "drain.h"

#define DRAIN_DIR "drain"

int spool_drain_set(struct spool *sp, const char *node, int drained, int checkpoint,
		    struct cb_err *err)
{
	const char *text = checkpoint ? "drain checkpoint\n" : "drain\n";
	int fd = spool_subdir(sp, DRAIN_DIR, err), r = 0;

	if (fd < 0)
		return -1;
	if (drained) {
		if (atomic_write(sp->dir[SD_TMP], fd, node, text, strlen(text), sp->fmode) < 0)
			r = cb_err_sys(err, spool_errno_ex(errno), "%s/%s/%s", sp->path, DRAIN_DIR, node);
	} else if ((unlinkat(fd, node, 0) < 0 && errno != ENOENT) || fsync_dir(fd) < 0) {
		r = cb_err_sys(err, spool_errno_ex(errno), "%s/%s/%s", sp->path, DRAIN_DIR, node);
	}
	close(fd);
	return r;
}

int spool_drain_get(struct spool *sp, const char *node, int *checkpoint, struct cb_err *err)
{
	/* Readers write nothing: no drain/ yet is no node drained. */
	int fd = openat(sp->fd, DRAIN_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), r;
	char *buf = NULL;
	size_t len;

	*checkpoint = 0;
	if (fd < 0)
		return errno == ENOENT ? 0 : cb_err_sys(err, EX_OSERR_, "%s/%s", sp->path, DRAIN_DIR);
	if (read_capped(fd, node, 4096, &buf, &len) < 0) {
		r = errno == ENOENT ? 0 : cb_err_sys(err, EX_OSERR_, "%s/%s/%s", sp->path, DRAIN_DIR, node);
	} else {
		*checkpoint = strstr(buf, "checkpoint") != NULL;
		r = 1;
	}
	free(buf);
	close(fd);
	return r;
}
