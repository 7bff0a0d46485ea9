/*
 * util.c - the daemon's helpers that every other file of it uses: the
 * log line, the monotonic clock, a stray entry in words, a node by
 * name.  They call nothing of the daemon's, so no file reaches up into
 * main.c for them (main.c is the loop: it calls down, nothing calls it).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "spoold.h"

void logmsg(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", DAEMON_PROG);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

long long mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *stray_kind(const struct stat *st)
{
	return S_ISLNK(st->st_mode) ? "is a symbolic link (not followed)" :
	       S_ISDIR(st->st_mode) ? "is a directory" : "is not a regular file";
}

size_t node_index(const struct daemon *d, const char *name)
{
	for (size_t k = 0; k < d->nnodes; k++)
		if (!strcmp(d->nodes[k].conf->name, name))
			return k;
	return d->nnodes;
}
