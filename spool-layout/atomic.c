/*
 * atomic.c - the rename that never replaces, the spool's other step
 * besides the atomic write (LAYOUT.md §3).
 *
 * Every spool file is written by atomic_write (base/file.c): unique
 * temp file, complete write, fsync, checked close, rename, fsync of the
 * directory.  Nothing else in CardBaton writes spool files.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "atomic.h"

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
