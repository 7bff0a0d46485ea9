/*
 * util.c - the daemon's helpers that every other file of it uses: the
 * log line, the monotonic clock, a stray entry and a read's failure in
 * words, a node by name and its reachability, a write's failure (the
 * stall).  They call nothing of the daemon's, so no
 * file reaches up into main.c or jobs.c for them (main.c is the loop:
 * it calls down, nothing calls it).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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

/* nodes/NAME.json (LAYOUT.md §1), for status, top and metrics: due
 * when the node's reachability or its card snapshot changed, written
 * at the end of the loop turn by node_views_flush (jobs.c). */
void node_view_due(struct node *n)
{
	n->view_due = 1;
}

long long backoff_next(long long *backoff, long long min)
{
	*backoff = *backoff ? *backoff * 2 : min;
	if (*backoff > BACKOFF_MAX_MS)
		*backoff = BACKOFF_MAX_MS;
	return *backoff;
}

void node_failed(struct daemon *d, size_t node, const char *why)
{
	struct node *n = &d->nodes[node];
	size_t len = strcspn(why, "\n");

	int changed = n->reachable || !n->error || strncmp(n->error, why, len) || n->error[len];

	if (changed)
		logmsg("node %s unreachable: %.*s", n->conf->name, (int)len, why);
	n->reachable = 0;
	free(n->error);
	n->error = strndup(why, len);
	if (changed) {
		n->since = now_ms();
		node_view_due(n);
	}
	n->retry_at = mono_now() + backoff_next(&n->backoff, BACKOFF_MIN_MS);
	n->fresh = n->handoff = 0;
}

void node_ok(struct daemon *d, size_t node)
{
	struct node *n = &d->nodes[node];

	int changed = !n->reachable || !n->recorded;

	if (!n->reachable) {
		logmsg("node %s reachable", n->conf->name);
		n->since = now_ms();
	}
	n->reachable = 1;
	n->worker_seen = 1;     /* whatever answered was the worker */
	free(n->error);
	n->error = NULL;
	n->backoff = 0;
	n->retry_at = 0;
	if (changed) {
		if (!n->since)
			n->since = now_ms();
		node_view_due(n);
	}
}

/* Why a spool file could not be read (read_capped's errno), in words. */
const char *read_problem(int e)
{
	switch (e) {
	case ELOOP:
		return "is a symbolic link";
	case EISDIR:
		return "is a directory";
	case EINVAL:
	case ENXIO:     /* a socket */
		return "is not a regular file";
	case EFBIG:
		return "is larger than 1 MiB";
	default:
		return strerror(e);
	}
}

/*
 * A spool write failed.  A temporary failure (EX_TEMPFAIL_: full disk,
 * quota, read-only spool) stalls the daemon (LAYOUT.md §9): one log
 * line for the whole episode, nothing launched, and every change waits
 * where it is -- the file in new/ or incoming/, the request in ctl/,
 * the record in running/ (the node keeps the attempt's final state) --
 * until main.c's probe finds the spool writable and catches up.
 */
void write_failed(struct daemon *d, int ex, const char *msg)
{
	if (ex != EX_TEMPFAIL_) {
		logmsg("%s", msg ? msg : "out of memory");
		return;
	}
	if (!d->stall_said)
		logmsg("cannot write the spool (%s): changes wait in place and are retried "
		       "until it can be written", msg ? msg : "?");
	d->stall_said = 1;
	d->stalled = 1;
	d->stalls++;
	d->stall_retry_at = mono_now() + STALL_RETRY_MS;
}

/* A spool write succeeded: the end of a stall, if there was one and
 * the probe has passed (stall_retry).  A write into a spare file
 * (batch.c) can succeed on a full disk and ends nothing. */
void write_ok(struct daemon *d)
{
	if (d->stalled)
		return;
	if (d->stall_said)
		logmsg("the spool can be written again; catching up");
	d->stall_said = 0;
}
