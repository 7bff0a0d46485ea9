/*
 * crash.c - crash points (crash.h).  Compiled to nothing useful unless
 * CB_CRASH_POINTS is defined; never in a release build.
 */
#include "crash.h"

#ifdef CB_CRASH_POINTS
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Append a line with one write(2): O_APPEND keeps lines whole among
 * the processes sharing FILE. */
static void put_line(const char *file, int flags, const char *name, const char *detail)
{
	int fd = open(file, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | flags, 0600);

	if (fd < 0)
		return;
	if (dprintf(fd, "%s%s%s\n", name, detail ? "/" : "", detail ? detail : "") < 0)
		fprintf(stderr, "crash point %s: %s: %s\n", name, file, strerror(errno));
	close(fd);
}

void crash_point(const char *name, const char *detail)
{
	const char *log = getenv("CARDBATON_CRASH_LOG"), *at = getenv("CARDBATON_CRASH_AT");
	const char *once = getenv("CARDBATON_CRASH_ONCE");
	size_t nl = strlen(name);

	if (log && *log)
		put_line(log, O_CREAT | O_APPEND, name, detail);
	if (!at || strncmp(at, name, nl) ||
	    (detail ? at[nl] != '/' || strcmp(at + nl + 1, detail) : at[nl] != '\0'))
		return;
	if (once && *once) {
		int fd = open(once, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);

		if (fd < 0)
			return;         /* somebody died here already */
		close(fd);
		put_line(once, 0, name, detail);
	}
	raise(SIGKILL);
}
#else
/* ISO C wants a translation unit to declare something. */
typedef int crash_points_are_off;
#endif
