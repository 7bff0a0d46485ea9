/*
 * cardbaton-wait - block until the jobs named have ended, or, without
 * job IDs, until nothing is queued, running or pausing.
 *
 * Design: wait is a reader of the spool, like status (the reading's
 * rules are the library's: waitread.c), and works the same with or
 * without the daemon -- without it, it waits for it: a submission in
 * new/ has not ended.  It reacts to the spool through inotify, never a
 * polling interval: the directories a job moves through (new/
 * incoming/ queued/ running/ paused/ done/) are watched before the
 * first reading, so that no move falls between the two, and every
 * wakeup drains the events and reads the spool again (an IN_Q_OVERFLOW
 * therefore needs nothing of its own).
 *
 * A reading is not a snapshot: a job may move while it is read.  What
 * it says of an ended job is for good (nothing leaves done/ or
 * rejected/).  What rests on something not being there -- "no such
 * job", "nothing left to wait for", a job gone -- is believed only of
 * a reading during which no event came; otherwise the spool is read
 * again.  The time limit is counted on CLOCK_MONOTONIC.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "common.h"

static const char usage[] = "cardbaton-wait [--config PATH] [--timeout SECS] [JOB_ID...]";

enum { OPT_TIMEOUT = OPT_TOOL_FIRST };

static const struct option longopts[] = {
	COMMON_LONGOPTS,
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ NULL, 0, NULL, 0 },
};

/* A job named, and how it ended. */
enum ended { NOT_ENDED, ENDED_STATE, ENDED_REJECTED, ENDED_GONE };
struct want {
	long long id;
	int seen;               /* found in some reading */
	int absent;             /* not found in this one */
	enum ended ended;
	enum job_state state;   /* ENDED_STATE: the record's */
};

static const enum spool_dir watched[] = {
	SD_NEW, SD_INCOMING, SD_QUEUED, SD_RUNNING, SD_PAUSED, SD_DONE,
};
#define NWATCHED (sizeof watched / sizeof watched[0])
static int wds[NWATCHED];

static struct spool sp;
static long long timeout_s = -1, deadline = -1;

/* ---- inotify ------------------------------------------------------------ */

static int ino_setup(void)
{
	int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);

	if (fd < 0)
		die_sys(EX_OSERR_, "inotify");
	for (size_t i = 0; i < NWATCHED; i++) {
		char *path = must_asprintf("%s/%s", sp.path, spool_dir_name[watched[i]]);

		wds[i] = inotify_add_watch(fd, path, IN_CREATE | IN_DELETE | IN_MOVED_FROM |
					   IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF |
					   IN_ONLYDIR | IN_DONT_FOLLOW);
		if (wds[i] < 0)
			die_sys(EX_OSERR_, "inotify on %s", path);
		free(path);
	}
	return fd;
}

/* Read every event queued.  Which ones came does not matter (the spool
 * is read again whatever they were), but a watched directory removed
 * or moved away would never wake us again: that is an error. */
static void drain(int fd)
{
	char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t len;

	for (;;) {
		if ((len = read(fd, buf, sizeof buf)) < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return;
			die_sys(EX_OSERR_, "inotify");
		}
		for (char *p = buf; p < buf + len;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;

			p += sizeof *ev + ev->len;
			if (!(ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)))
				continue;
			for (size_t i = 0; i < NWATCHED; i++)
				if (wds[i] == ev->wd)
					die(EX_OSERR_, "%s/%s: removed or moved away while waiting",
					    sp.path, spool_dir_name[watched[i]]);
		}
	}
}

/* 1 when an event came since the last drain (the spool changed). */
static int changed(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int r;

	while ((r = poll(&p, 1, 0)) < 0)
		if (errno != EINTR)
			die_sys(EX_OSERR_, "poll");
	return r > 0;
}

/* Until an event comes, or the time limit. */
static void sleep_on(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int ms = -1;

	if (deadline >= 0) {
		long long left = deadline - mono_ms();

		ms = left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
	}
	if (poll(&p, 1, ms) < 0 && errno != EINTR)
		die_sys(EX_OSERR_, "poll");
}

static int expired(void)
{
	return deadline >= 0 && mono_ms() >= deadline;
}

/* ---- the jobs named ------------------------------------------------------- */

/* " 5 7" of the jobs W[0..N) for which PICK holds (malloc'd). */
static char *id_list(const struct want *w, size_t n, int (*pick)(const struct want *))
{
	struct sbuf b = { 0 };

	for (size_t i = 0; i < n; i++)
		if (pick(&w[i]) && sbuf_addf(&b, " %lld", w[i].id) < 0)
			die(EX_OSERR_, "%s", strerror(ENOMEM));
	return b.s ? b.s : must_asprintf("%s", "");
}

static int is_unknown(const struct want *w)
{
	return w->absent && !w->seen;
}

static int is_left(const struct want *w)
{
	return w->ended == NOT_ENDED;
}

/* 0 when every job succeeded; else 1 with one line saying which did not. */
static int outcome(const struct want *w, size_t n)
{
	struct sbuf b = { 0 };

	for (size_t i = 0; i < n; i++) {
		const char *what = w[i].ended == ENDED_REJECTED ? "was rejected" :
				   w[i].ended == ENDED_GONE ? "is gone (its submission was removed)" :
				   w[i].state == JS_SUCCEEDED ? NULL : job_state_name(w[i].state);

		if (what && sbuf_addf(&b, "%sjob %lld %s", b.len ? ", " : "", w[i].id, what) < 0)
			die(EX_OSERR_, "%s", strerror(ENOMEM));
	}
	if (b.len)
		die(EX_REFUSED, "%s", b.s);
	return 0;
}

static int wait_jobs(int fd, struct want *w, size_t n)
{
	for (int round = 0;; round++) {
		struct wait_read r;
		struct cb_err err = { 0 };
		size_t left = 0, absent = 0;

		if (round && expired()) {
			char *ids = id_list(w, n, is_left);

			die(EX_TEMPFAIL_, "timed out after %lld s; not ended:%s", timeout_s, ids);
		}
		drain(fd);
		if (wait_read(&sp, &r, &err) < 0)
			die_err(&err);
		for (size_t i = 0; i < n; i++) {
			enum wait_stand s;
			enum job_state st;

			if (w[i].ended)
				continue;
			if (wait_stand_of(&sp, &r, w[i].id, &s, &st, &err) < 0)
				die_err(&err);
			w[i].absent = s == WAIT_NONE;
			absent += w[i].absent;
			w[i].seen |= !w[i].absent;
			if (s == WAIT_ENDED) {
				w[i].ended = ENDED_STATE;
				w[i].state = st;
			} else if (s == WAIT_REJECTED) {
				w[i].ended = ENDED_REJECTED;
			} else {
				left++;
			}
		}
		wait_read_free(&r);
		/* Not found in a reading nothing moved through: not there.
		 * Never seen: no such job, and nothing else is done. */
		if (absent && !changed(fd)) {
			char *ids = id_list(w, n, is_unknown);

			if (*ids)
				die(EX_NOINPUT_, "no such job%s%s", strchr(ids + 1, ' ') ? "s" : "", ids);
			free(ids);
			for (size_t i = 0; i < n; i++)
				if (!w[i].ended && w[i].absent) {
					w[i].ended = ENDED_GONE;
					left--;
				}
		}
		if (!left)
			return outcome(w, n);
		sleep_on(fd);
	}
}

/* ---- everything ------------------------------------------------------------ */

static int wait_idle(int fd)
{
	for (int round = 0;; round++) {
		struct wait_read r;
		struct cb_err err = { 0 };
		int busy;

		if (round && expired())
			die(EX_TEMPFAIL_, "timed out after %lld s; jobs are still queued, running or pausing",
			    timeout_s);
		drain(fd);
		if (wait_read(&sp, &r, &err) < 0 || (busy = wait_busy(&sp, &r, &err)) < 0)
			die_err(&err);
		wait_read_free(&r);
		if (!busy && !changed(fd))
			return 0;
		sleep_on(fd);
	}
}

int main(int argc, char **argv)
{
	struct config c;
	struct want *w;
	size_t n = 0;
	int ch, fd, ex;

	prog_init(argc, argv);
	while ((ch = tool_getopt(argc, argv, "", longopts, 0, usage)) != -1) {
		switch (ch) {
		case OPT_TIMEOUT:
			/* Ten years at most, as a job's time limit. */
			timeout_s = flag_ll("--timeout", optarg, 0, TIMEOUT_MAX);
			break;
		default:
			usage_error(usage, "unknown option");
		}
	}
	if (!(w = calloc((size_t)(argc - optind) + 1, sizeof *w)))
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	for (int i = optind; i < argc; i++) {
		long long id = arg_jobid(argv[i]);
		size_t k = 0;

		while (k < n && w[k].id != id)
			k++;
		if (k == n)             /* the same job named twice is waited for once */
			w[n++].id = id;
	}
	if (timeout_s >= 0)
		deadline = mono_ms() + timeout_s * 1000;
	tool_config(&c);
	if (!tool_spool(&c, &sp, 0)) {
		/* No spool yet: no job, and nothing to wait for. */
		config_free(&c);
		for (size_t i = 0; i < n; i++)
			w[i].absent = 1;
		if (n) {
			char *ids = id_list(w, n, is_unknown);

			die(EX_NOINPUT_, "no such job%s%s", n > 1 ? "s" : "", ids);
		}
		free(w);
		return 0;
	}
	fd = ino_setup();
	ex = n ? wait_jobs(fd, w, n) : wait_idle(fd);
	close(fd);
	free(w);
	spool_close(&sp);
	config_free(&c);
	return ex;
}
