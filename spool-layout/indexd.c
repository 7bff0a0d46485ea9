/*
 * indexd.c - the daemon's writer of SPOOL/queued.idx (index_tick,
 * index_stop): index_write (index.c) in a child process, so that the
 * loop never waits for it, when queued/ or done/ changed and queued/
 * has settled, at most every INDEX_GAP_MS and busy at most a third of
 * the time; a failure is tried again later, never the daemon's.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "index.h"

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* In the child: every descriptor above 2 but the spool's closed (the
 * daemon's lock above all: a daemon started after this one died must
 * get it at once). */
static void close_others(const struct spool *sp)
{
	int keep[SD_N + 1], n = 0;
	unsigned lo = 3;

	keep[n++] = sp->fd;
	for (int i = 0; i < SD_N; i++)
		keep[n++] = sp->dir[i];
	qsort(keep, (size_t)n, sizeof *keep, cmp_int);
	for (int i = 0; i < n; i++) {
		if (keep[i] < 0 || (unsigned)keep[i] < lo)
			continue;
		if ((unsigned)keep[i] > lo && close_range(lo, (unsigned)keep[i] - 1, 0) < 0) {
			/* ENOSYS (Linux < 5.9): they stay open until the child ends */
		}
		lo = (unsigned)keep[i] + 1;
	}
	if (close_range(lo, ~0U, 0) < 0) {
		/* as above */
	}
}

static void keys_now(struct spool *sp, struct index_key *q, struct index_key *d)
{
	if (index_key_of(sp->dir[SD_QUEUED], q) < 0)
		memset(q, 0, sizeof *q);
	if (index_key_of(sp->dir[SD_DONE], d) < 0)
		memset(d, 0, sizeof *d);
}

/* The smaller of two poll timeouts (-1: none); B capped at a minute. */
static int min_timeout(int a, long long b)
{
	if (b < 0)
		return a;
	if (b > 60000)
		b = 60000;
	return a < 0 || b < a ? (int)b : a;
}

/* The child that index_tick started has ended with ST (or P < 0). */
static void child_done(struct index_writer *w, pid_t p, int st, long long now)
{
	long long took = now - w->started;

	w->pid = 0;
	if (p > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		w->have = 1;
		w->queued = w->fq;
		w->done = w->fd;
		w->backoff = 0;
		/* At most every INDEX_GAP_MS, and busy at most a third of the time. */
		w->next_at = now + (2 * took > INDEX_GAP_MS ? 2 * took : INDEX_GAP_MS);
	} else if (p > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 1) {
		w->next_at = now + INDEX_SETTLE_MS;     /* queued/ changed meanwhile */
	} else {
		/* Cannot be written (a read-only or full spool...): later. */
		w->backoff = w->backoff ? (w->backoff * 2 > 60000 ? 60000 : w->backoff * 2) : 1000;
		w->next_at = now + w->backoff;
	}
}

int index_tick(struct index_writer *w, struct spool *sp, int timeout)
{
	struct index_key q, d;
	long long now = mono_ms(), left;
	int qsame;

	if (w->pid > 0) {
		int st = 0;
		pid_t p = waitpid(w->pid, &st, WNOHANG);

		if (p == 0 || (p < 0 && errno == EINTR))
			return min_timeout(timeout, 20);
		child_done(w, p, st, now);
	}
	keys_now(sp, &q, &d);
	qsame = w->have && index_key_eq(&q, &w->queued);
	if (qsame && index_key_eq(&d, &w->done))
		return min_timeout(timeout, 10000);     /* a look now and then (hand edits) */
	if (now < w->next_at)
		return min_timeout(timeout, w->next_at - now);
	/* Wait until queued/ (or, when only done/ changed, done/) has settled. */
	if ((left = index_settle_left(qsame ? d.ctime : q.ctime)) > 0)
		return min_timeout(timeout, left);
	w->fq = q;
	w->fd = d;
	if (index_settle_left(d.ctime) > 0)
		memset(&w->fd, 0, sizeof w->fd);        /* indexed without done/: again later */
	w->started = now;
	w->pid = fork();
	if (w->pid == 0) {
		int r;

		close_others(sp);
		/* Background work: the daemon and the jobs come first. */
		errno = 0;
		if (nice(10) == -1 && errno) {
			/* not allowed: at the daemon's priority then */
		}
		r = index_write(sp);
		_exit(r == 1 ? 0 : r == 0 ? 1 : 2);
	}
	if (w->pid < 0) {
		w->pid = 0;
		w->backoff = 1000;
		w->next_at = now + w->backoff;
		return min_timeout(timeout, w->backoff);
	}
	return min_timeout(timeout, 20);
}

void index_stop(struct index_writer *w)
{
	long long until = mono_ms() + 5000;

	while (w->pid > 0) {
		pid_t p = waitpid(w->pid, NULL, WNOHANG);

		if (p > 0 || (p < 0 && errno != EINTR)) {
			w->pid = 0;
			break;
		}
		if (mono_ms() >= until) {
			kill(w->pid, SIGKILL);
			while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
				;
			w->pid = 0;
			break;
		}
		sleep_ms(10);
	}
}
