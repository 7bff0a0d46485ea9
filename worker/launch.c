/*
 * launch.c - "cardbaton-worker launch": the steps of LAYOUT.md section
 * 8 in order, each failure before the state file exists taking the one
 * way back (no trace: the same attempt ID may come again), and the
 * answers: the attempt's state, "busy", or the state of an attempt that
 * exists already (step 7).  launch.h says which file does what.
 *
 *   1  the spec is checked (spec.c)
 *   2  attempts/ID is made and its lock taken; an existing one with a
 *      state file is answered, one without is taken over once its lock
 *      is free
 *   3-5  the cards: UUIDs, leases, the check under them (lease.c)
 *   6  "starting" is written, the supervisor forked (supervise.c), and
 *      its "running" (or final) state answered
 *
 * The answer is a record left for the caller (launch_spec's ANS):
 * `launch` prints it, the baton (baton.c) reads the busy reason from
 * it and prints nothing.  A spec with `after` goes to baton.c first.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launch.h"

/* attempts/ID/{spec,lock,...} and attempts/ID itself: a launch that
 * ends before step 6 leaves no trace (the same ID may come again). */
static void remove_attempt_dir(struct launch *l)
{
	static const char *const files[] = { "spec", ".spec.tmp", "cancel", "pause", "checkpoint",
					      "batch", ".batch.tmp", "lock" };
	size_t i;

	for (i = 0; i < sizeof files / sizeof files[0]; i++)
		unlinkat(l->adir, files[i], 0);
	/* Fails (ENOTEMPTY) only when another launcher of this ID took
	 * it over meanwhile: then it is theirs. */
	unlinkat(l->st->attfd, l->sp->id, AT_REMOVEDIR);
}

/* The state record of an attempt that exists (step 7) into *ANS: wait
 * for another launcher to finish, up to LAUNCH_WAIT_MS.  Returns the
 * exit code, or -1 to start over (the attempt directory went away or
 * its launcher died before step 6). */
static int answer_existing(struct wk_state *st, const char *id, struct wire_rec *ans)
{
	long long until = mono_ms() + LAUNCH_WAIT_MS;
	struct wire_rec r = { 0 };
	int got, adir, lockfd, held;

	for (;;) {
		got = wk_state_read(st, id, &r);
		wire_free(&r);
		if (got < 0)
			return wk_errsys(EX_OSERR_, "attempts/%s.state", id);
		if (got == 1) {
			/* Seen as status sees it: a dead attempt is lost. */
			int alive;

			got = wk_attempt_status(st, id, &r, &alive);
			if (got < 0) {
				wire_free(&r);
				return wk_errsys(EX_OSERR_, "attempts/%s.state", id);
			}
			*ans = r;
			return 0;
		}
		adir = openat(st->attfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (adir < 0)
			return errno == ENOENT ? -1 : wk_errsys(EX_OSERR_, "attempts/%s", id);
		held = lock_at(adir, "lock", LOCK_EX, 0, &lockfd);
		close(adir);
		if (held == 1)
			close(lockfd);
		if (held == 1 || (held < 0 && errno == ENOENT))
			return -1;      /* nobody launching: take it over */
		if (held < 0)
			return wk_errsys(EX_OSERR_, "attempts/%s/lock", id);
		if (mono_ms() >= until)
			break;
		sleep_ms(20);
	}
	if (wire_add(&r, "attempt", id) < 0 || wire_add(&r, "state", wire_state_name(WS_STARTING)) < 0) {
		wire_free(&r);
		return wk_errsys(EX_OSERR_, "out of memory");
	}
	*ans = r;
	return 0;
}

static int answer_busy(const char *id, char *reason, struct wire_rec *ans)
{
	int rc = EX_TEMPFAIL_;

	if (wire_add(ans, "attempt", id) < 0 || wire_add(ans, "state", wire_state_name(WS_BUSY)) < 0 ||
	    wire_add(ans, "reason", reason) < 0) {
		wire_free(ans);
		rc = wk_errsys(EX_OSERR_, "out of memory");
	}
	free(reason);
	return rc;
}

/*
 * attempts/ID is there but is no directory: a symbolic link (never
 * followed) or another file put there.  No attempt can be made of it,
 * and waiting changes nothing: the attempt ends failed, saying why, in
 * its state file (a launch of the ID again answers that, step 7), and
 * that final state is the answer.
 */
static int answer_not_dir(struct wk_state *st, const char *id, struct wire_rec *ans)
{
	struct wire_rec r = { 0 };
	struct stat sb;
	const char *what = fstatat(st->attfd, id, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
			   S_ISLNK(sb.st_mode) ? "is a symbolic link (not followed)"
					       : "is not a directory";
	int rc = 0;

	if (wire_add(&r, "attempt", id) < 0 || wire_add(&r, "state", wire_state_name(WS_FAILED)) < 0 ||
	    wire_addf(&r, "reason", "attempts/%s: %s", id, what) < 0 ||
	    wk_set_ll(&r, "finished", now_ms()) < 0 || wk_state_write(st, id, &r) < 0) {
		rc = wk_errsys(EX_OSERR_, "attempts/%s.state", id);
		wire_free(&r);
	} else {
		*ans = r;
	}
	return rc;
}

/* Step 6's end: the supervisor takes over.  The launcher waits for its
 * "running" (or the final state when the job could not start), at most
 * 30 s, lets go of the leases and the lock, and answers what is
 * there. */
static int hand_over(struct launch *l, struct wire_rec *ans)
{
	struct pollfd p;
	long long until;
	int rp[2], rc;
	pid_t pid;

	if (pipe2(rp, O_CLOEXEC) < 0)
		return wk_errsys(EX_OSERR_, "pipe");
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return wk_errsys(EX_OSERR_, "fork");
	if (pid == 0) {
		close(rp[0]);
		supervise(l, rp[1]);
	}
	close(rp[1]);
	p.fd = rp[0];
	p.events = POLLIN;
	for (until = mono_ms() + 30000;;) {
		long long left = until - mono_ms();

		if (left <= 0 || poll(&p, 1, (int)left) >= 0 || errno != EINTR)
			break;
	}
	close(rp[0]);
	release_leases(l, 0);
	close(l->lockfd);
	l->lockfd = -1;
	rc = wk_state_read(l->st, l->sp->id, ans);
	if (rc <= 0) {
		if (rc == 0)
			errno = ENOENT;
		return wk_errsys(EX_OSERR_, "attempts/%s.state", l->sp->id);
	}
	return 0;
}

/* A checkpoint moved here (checkpoint_on: another node's on a shared
 * filesystem, its path as this node mounts it) must be there, and be
 * what that path names, through no symbolic link: else *BUSY (malloc'd)
 * says why, and nothing runs from a wrong checkpoint.  0, or -1 (out
 * of memory). */
static int checkpoint_unseen(const struct spec *sp, char **busy)
{
	struct stat st;
	char *real = NULL;
	const char *why = NULL;

	if (!sp->checkpoint_on)
		return 0;
	if (lstat(sp->checkpoint, &st) < 0 || !(real = realpath(sp->checkpoint, NULL)))
		why = strerror(errno);
	else if (strcmp(real, sp->checkpoint))
		why = "reached through a symbolic link";
	free(real);
	if (why && !(*busy = xasprintf("checkpoint not visible on %s: %s (%s)", sp->checkpoint_on,
				       sp->checkpoint, why)))
		return -1;
	return 0;
}

/* Steps 2 (the lock is held) to 6. */
static int start(struct launch *l, struct wire_rec *ans)
{
	struct spec *sp = l->sp;
	struct wire_rec r = { 0 };
	char *buf = NULL, *busy = NULL;
	size_t i;
	long n;
	int rc;

	/* A taken-over directory may hold a pause request or a marker from
	 * before: neither may count for this job.  Removed before the spec
	 * is written, because `pause` reads the spec first. */
	if ((unlinkat(l->adir, "pause", 0) < 0 && errno != ENOENT) ||
	    (unlinkat(l->adir, "checkpoint", 0) < 0 && errno != ENOENT)) {
		rc = wk_errsys(EX_OSERR_, "%s: removing a stale pause or checkpoint file", l->adir_path);
		goto undo;
	}
	/* Not synced: only `pause` reads it, while the job runs; after a
	 * crash of the machine the job is gone, and a launch without a
	 * state file is taken over and writes it again (step 7). */
	n = wire_format(&sp->rec, &buf);
	rc = n < 0 || atomic_write_at(l->adir, ".spec.tmp", "spec", buf, (size_t)n, 0600, 0) < 0;
	free(buf);
	if (rc) {
		rc = wk_errsys(EX_OSERR_, "attempts/%s/spec", sp->id);
		goto undo;
	}
	CRASH_POINT("worker launch: spec written", NULL);
	if (l->st->slurm) {
		rc = slurm_submit(l, &busy);
		if (busy) {
			/* Slurm refused or could not be asked: no trace, and
			 * the node's failure (not busy cards), so that the
			 * controller retries with its back-off, not at once. */
			remove_attempt_dir(l);
			rc = wk_err(EX_OSERR_, "%s", busy);
			free(busy);
		}
		return rc;
	}

	/* A moved checkpoint first (busy, no trace, when not seen); then
	 * steps 3-5: the cards' UUIDs, their leases, the check. */
	if (checkpoint_unseen(sp, &busy) < 0) {
		rc = wk_errsys(EX_OSERR_, "out of memory");
		goto undo;
	}
	if (busy) {
		rc = EX_TEMPFAIL_;
		goto undo;
	}
	if ((rc = lease_cards(l, &busy)) != 0)
		goto undo;
	if (sp->ngpu)
		CRASH_POINT("worker launch: cards leased", NULL);

	/* Step 6. */
	if (job_env(l) < 0) {
		rc = wk_errsys(EX_OSERR_, "out of memory");
		goto undo;
	}
	rc = wire_add(&r, "attempt", sp->id) < 0 || wire_add(&r, "state", wire_state_name(WS_STARTING)) < 0;
	for (i = 0; i < sp->ngpu && !rc; i++)
		rc = wire_addf(&r, "gpu", "%lld", sp->gpu[i]) < 0 || wire_add(&r, "uuid", l->uuid[i]) < 0;
	if (rc || wire_add(&r, "log", l->log_path) < 0 || wk_state_write(l->st, sp->id, &r) < 0) {
		wire_free(&r);
		rc = wk_errsys(EX_OSERR_, "attempts/%s.state", sp->id);
		goto undo;
	}
	wire_free(&r);
	CRASH_POINT("worker launch: state written", NULL);
	/* From here on the state file exists: the attempt may have
	 * started, and is never removed or started again. */
	return hand_over(l, ans);

undo:
	/* The one way back before the state file: no trace. */
	unmark_leases(l);
	release_leases(l, 1);
	remove_attempt_dir(l);
	return busy ? answer_busy(sp->id, busy, ans) : rc;
}

int launch_spec(struct wk_state *st, struct spec *sp, struct wire_rec *ans)
{
	struct launch l;
	int tries, rc = EX_OSERR_, got;
	size_t i;

	memset(&l, 0, sizeof l);
	l.st = st;
	l.sp = sp;
	l.adir = l.lockfd = -1;
	l.lease = malloc((sp->ngpu + 1) * sizeof *l.lease);
	l.mark = malloc((sp->ngpu + 1) * sizeof *l.mark);
	l.uuid = calloc(sp->ngpu + 1, sizeof *l.uuid);
	l.adir_path = xasprintf("%s/attempts/%s", st->path, sp->id);
	l.log_path = xasprintf("%s/attempts/%s/log", st->path, sp->id);
	if (sp->cwd)
		l.cwd = wk_expand_path(sp->cwd, 0);
	if (!l.lease || !l.mark || !l.uuid || !l.adir_path || !l.log_path || (sp->cwd && !l.cwd)) {
		rc = wk_errsys(EX_OSERR_, "out of memory");
		goto out;
	}
	for (i = 0; i < sp->ngpu; i++) {
		l.lease[i] = l.mark[i] = -1;
		if (i < sp->nuuid && !(l.uuid[i] = strdup(sp->uuid[i]))) {
			rc = wk_errsys(EX_OSERR_, "out of memory");
			goto out;
		}
	}

	for (tries = 0; tries < 20; tries++) {
		int fresh = mkdirat(st->attfd, sp->id, 0700) == 0;

		if (!fresh && errno != EEXIST) {
			rc = wk_errsys(EX_OSERR_, "mkdir %s", l.adir_path);
			goto out;
		}
		if (!fresh) {
			/* Step 7: a state file of any kind is the answer. */
			struct wire_rec r = { 0 };

			got = wk_state_read(st, sp->id, &r);
			if (got != 0) {
				wire_free(&r);
				rc = answer_existing(st, sp->id, ans);
				if (rc >= 0)
					goto out;
				continue;
			}
		}
		l.adir = openat(st->attfd, sp->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		/* Made here: exactly 0700, whatever the umask. */
		if (l.adir < 0 || (fresh && fchmod(l.adir, 0700) < 0)) {
			if (l.adir < 0 && errno == ENOENT)
				continue;
			if (l.adir < 0 && (errno == ELOOP || errno == ENOTDIR)) {
				rc = answer_not_dir(st, sp->id, ans);
				goto out;
			}
			rc = wk_errsys(EX_OSERR_, "%s", l.adir_path);
			goto out;
		}
		got = lock_at(l.adir, "lock", LOCK_EX, 1, &l.lockfd);
		if (got == 1) {
			/* Ours.  A taken-over directory may have got its
			 * state file just before we locked it. */
			struct wire_rec r = { 0 };

			got = wk_state_read(st, sp->id, &r);
			wire_free(&r);
			if (got == 0) {
				rc = start(&l, ans);
				goto out;
			}
			close(l.lockfd);
			l.lockfd = -1;
		} else if (got < 0 && errno != ENOENT) {
			rc = wk_errsys(EX_OSERR_, "%s/lock", l.adir_path);
			goto out;
		}
		close(l.adir);
		l.adir = -1;
		/* Another launcher of this ID is at work: its answer. */
		rc = answer_existing(st, sp->id, ans);
		if (rc >= 0)
			goto out;
	}
	rc = wk_err(EX_OSERR_, "%s: the attempt directory keeps changing", l.adir_path);
out:
	if (l.lockfd >= 0)
		close(l.lockfd);
	if (l.adir >= 0)
		close(l.adir);
	if (l.lease && l.mark)
		release_leases(&l, 0);
	for (i = 0; l.uuid && i < sp->ngpu; i++)
		free(l.uuid[i]);
	free(l.uuid);
	free(l.lease);
	free(l.mark);
	free(l.adir_path);
	free(l.log_path);
	free(l.cwd);
	env_free(&l.env);
	return rc;
}

int launch_rec(struct wk_state *st, const struct wire_rec *rec)
{
	struct wire_rec ans = { 0 };
	struct spec sp;
	char *bad = NULL;
	int r;

	memset(&sp, 0, sizeof sp);
	sp.rec = *rec;
	if (spec_check(&sp, &bad) < 0) {
		r = wk_err(EX_DATAERR_, "bad spec: %s", bad ? bad : "out of memory");
	} else if (sp.nafter && st->slurm) {
		/* Slurm starts its jobs itself: nothing here could. */
		r = wk_err(EX_DATAERR_, "bad spec: after: a Slurm node takes no staged attempt");
	} else if (sp.nafter) {
		r = stage_launch(st, &sp);
	} else {
		r = launch_spec(st, &sp, &ans);
		if (ans.n && wk_print(&ans) < 0)
			r = wk_errsys(EX_OSERR_, "stdout");
		wire_free(&ans);
	}
	free(bad);
	spec_free(&sp);
	return r;
}

int cmd_launch(struct wk_state *st, int argc, char **argv)
{
	struct wire_rec rec = { 0 };
	const char *why = NULL;
	int r;

	(void)argv;
	if (argc != 0)
		return wk_err(EX_USAGE_, "usage: %s [-d STATE_DIR] launch < SPEC", PROG);
	r = wire_read(stdin, &rec, &why);
	if (r == 0)
		return wk_err(EX_DATAERR_, "bad spec: no record on standard input");
	if (r < 0) {
		if (!why)
			return wk_errsys(EX_OSERR_, "reading the spec");
		return wk_err(EX_DATAERR_, "bad spec: %s", why);
	}
	r = launch_rec(st, &rec);
	wire_free(&rec);
	return r;
}

