/*
 * baton.c - staged attempts (LAYOUT.md section 8, "Staged attempts
 * (the baton)"): the controller stages the next attempt for cards that
 * running attempts hold (a spec with `after`), and the node starts it
 * itself the moment they end, with no round trip to the controller,
 * which may be gone meanwhile.
 *
 *   stage_launch  `launch` of a spec with `after`: STATE/staged/ID
 *                 written (durably), then baton_try, the answer, and
 *                 the deck when it is still staged
 *   baton_try     the one way a staged attempt starts or gives up
 *   cmd_deck      the staged attempt on deck: a process that has loaded
 *                 what a start needs and sleeps on the lock of each
 *                 attempt it is after; the moment those are let go,
 *                 baton_try (no exec on that path)
 *   cmd_baton     baton_try for every staged attempt (the supervisor
 *                 of an attempt that ended execs it: where no deck
 *                 started it first, and for chains; watch runs it at
 *                 its start for orphans)
 *   staged_end    unstage, and cancel or pause of a staged attempt
 *
 * Exactly once: every decision about staged/ID is taken under its
 * flock (LOCK_EX), and a state file attempts/ID.state of any kind
 * means the attempt is never started again (step 7): whoever finds
 * staged/ID beside it only removes it.  staged/ID is made with link(),
 * never replaced, so its lock is one lock for its whole life.  The
 * attempt directory is made only when it starts, by the launch steps
 * themselves.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launch.h"

/* Does attempts/ID.state exist?  1, 0, or -1 (errno). */
static int state_exists(const struct wk_state *st, const char *id)
{
	char *name = xasprintf("%s.state", id);
	int r;

	if (!name)
		return -1;
	r = faccessat(st->attfd, name, F_OK, AT_SYMLINK_NOFOLLOW);
	free(name);
	if (r == 0)
		return 1;
	return errno == ENOENT ? 0 : -1;
}

/* Is staged/ID there?  1, 0, or -1 (errno). */
static int is_staged(const struct wk_state *st, const char *id)
{
	if (faccessat(st->stagedfd, id, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return 1;
	return errno == ENOENT ? 0 : -1;
}

/* staged/ID removed (it may be gone already). */
static void unstage_file(const struct wk_state *st, const char *id)
{
	if (unlinkat(st->stagedfd, id, 0) < 0 && errno != ENOENT)
		wk_errsys(0, "%s/staged/%s", st->path, id);
}

/* The record of a staged attempt from its spec SPEC: `attempt ID`,
 * `state WS`, then the spec's `gpu` and `uuid` (in its order) and, for
 * `staged`, its `after`.  0 or -1 (out of memory). */
static int rec_of_spec(const struct wire_rec *spec, const char *id, enum wire_state ws,
		       struct wire_rec *r)
{
	size_t i;

	if (wire_add(r, "attempt", id) < 0 || wire_add(r, "state", wire_state_name(ws)) < 0)
		return -1;
	for (i = 0; spec && i < spec->n; i++) {
		const struct wire_field *f = &spec->f[i];

		if ((!strcmp(f->key, "gpu") || !strcmp(f->key, "uuid")) &&
		    wire_addn(r, f->key, f->val, f->len) < 0)
			return -1;
	}
	for (i = 0; spec && ws == WS_STAGED && i < spec->n; i++) {
		const struct wire_field *f = &spec->f[i];

		if (!strcmp(f->key, "after") && wire_addn(r, f->key, f->val, f->len) < 0)
			return -1;
	}
	return 0;
}

int wk_staged_rec(const struct wk_state *st, const char *id, struct wire_rec *r)
{
	struct wire_rec spec = { 0 };
	const char *why;
	char *buf;
	size_t n;
	long got;
	int rc;

	if (!wk_id_ok(id))
		return 0;
	if (read_capped(st->stagedfd, id, WIRE_MAX_RECORD, &buf, &n) < 0) {
		/* A link, a directory, a FIFO there is no staged attempt
		 * (the baton says so when it meets it). */
		if (errno == ENOENT || errno == ELOOP || errno == EISDIR || errno == EINVAL)
			return 0;
		return -1;
	}
	got = wire_parse(buf, n, &spec, &why);
	free(buf);
	/* A spec that cannot be read is still a staged attempt (the
	 * baton ends it, saying why): its ID and state alone. */
	rc = rec_of_spec(got > 0 ? &spec : NULL, id, WS_STAGED, r);
	wire_free(&spec);
	if (rc < 0) {
		errno = ENOMEM;
		return -1;
	}
	return 1;
}

/* Each name in staged/ that may be a staged attempt (TEMPS 0), or each
 * dot name, a temporary ".ID.PID.tmp" perhaps (TEMPS 1), through FN(ST,
 * NAME, ARG) until it returns non-zero. */
static int staged_each(const struct wk_state *st, int temps,
		       int (*fn)(const struct wk_state *, const char *, void *), void *arg)
{
	int dfd = dup(st->stagedfd), r = 0;
	DIR *d;
	struct dirent *e;

	if (dfd < 0)
		return -1;
	d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -1;
	}
	rewinddir(d);
	errno = 0;
	while (r == 0 && (e = readdir(d)) != NULL) {
		if ((e->d_name[0] == '.') != temps || !strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		r = fn(st, e->d_name, arg);
		errno = 0;
	}
	if (r == 0 && errno != 0)
		r = -1;
	closedir(d);
	return r;
}

static int one_found(const struct wk_state *st, const char *name, void *arg)
{
	(void)st;
	(void)name;
	(void)arg;
	return 1;
}

int staged_any(const struct wk_state *st)
{
	return staged_each(st, 0, one_found, NULL);
}

/*
 * Is attempt AID, one that a staged attempt is after, over?  Over: the
 * node has no record of it, or its state is final (a state that says
 * it runs with its lock free is lost, and so final:
 * wk_attempt_status).  A final state whose lock is still held is over
 * too: the supervisor writes it after the job and its leftovers are
 * gone and the leases released, and lets the lock go right after it
 * (a deck waits on it) -- counting it alive would let the baton of the
 * other attempt a staged one is after find nothing to do.  A staged
 * one is not over (a chain).  1 over, 0 not, -1 error (said).
 */
static int after_over(struct wk_state *st, const char *aid)
{
	struct wire_rec r = { 0 };
	int alive, got = wk_attempt_status(st, aid, &r, &alive), over;

	if (got < 0) {
		int e = errno;

		wire_free(&r);
		/* A malformed state file (said; *alive is from the lock):
		 * over when nothing of it lives. */
		if (e == EINVAL)
			return !alive;
		errno = e;
		wk_errsys(0, "attempt %s", aid);
		return -1;
	}
	over = got == 0 || wk_state_final(wire_get(&r, "state"));
	wire_free(&r);
	return over;
}

/* Write attempts/ID.state = WS (unstaged, cancelled), REASON, finished,
 * the spec's cards; only the state file, no attempt directory (as for
 * an attempts/ID that is no directory).  0 with *R the record, or -1
 * (errno). */
static int write_end(struct wk_state *st, const char *id, const struct wire_rec *spec,
		     enum wire_state ws, const char *reason, struct wire_rec *r)
{
	if (rec_of_spec(spec, id, ws, r) < 0 || wire_add(r, "reason", reason) < 0 ||
	    wk_set_ll(r, "finished", now_ms()) < 0)
		return -1;
	return wk_state_write(st, id, r);
}

/* Read the spec of the open staged/ID (FD) into *REC.  0, or -1 with
 * *WHY (malloc'd). */
static int read_staged(int fd, struct wire_rec *rec, char **why)
{
	const char *w = NULL;
	char *buf;
	size_t n;
	long got;

	if (lseek(fd, 0, SEEK_SET) < 0 || read_fd(fd, WIRE_MAX_RECORD, &buf, &n) < 0) {
		*why = xasprintf("cannot read its spec: %s", strerror(errno));
		return -1;
	}
	got = wire_parse(buf, n, rec, &w);
	free(buf);
	if (got <= 0) {
		wire_free(rec);
		*why = xasprintf("its spec is not a record: %s", w ? w : "no \"end\" line");
		return -1;
	}
	return 0;
}

/* Open staged/ID (never following a link, never blocking on a FIFO)
 * and take its lock, waiting up to WAIT_MS.  1: *FDP holds it; 0: held
 * by another; -1: errno (ENOENT: not staged). */
static int staged_lock(const struct wk_state *st, const char *id, long long wait_ms, int *fdp)
{
	long long until = mono_ms() + wait_ms;
	struct stat sb;
	int fd, r;

	*fdp = -1;
	fd = openat(st->stagedfd, id, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		int e = errno;

		close(fd);
		errno = e;
		if (e == 0 || S_ISREG(sb.st_mode) == 0)
			errno = EINVAL;
		return -1;
	}
	while ((r = lock_try(fd, LOCK_EX)) == 0 && mono_ms() < until)
		sleep_ms(20);
	if (r <= 0) {
		int e = errno;

		close(fd);
		errno = e;
		return r;
	}
	/* Removed by whoever held it before us: gone. */
	if (fstat(fd, &sb) < 0 || sb.st_nlink == 0) {
		close(fd);
		errno = ENOENT;
		return -1;
	}
	*fdp = fd;
	return 1;
}

/* What staged_lock's -1 means, said on stderr for anything but "not
 * staged" (a link, a directory, a FIFO planted in staged/ is never
 * followed or read). */
static void say_staged_error(const struct wk_state *st, const char *id)
{
	if (errno == ELOOP)
		wk_err(0, "%s/staged/%s: is a symbolic link (not followed)", st->path, id);
	else if (errno == EINVAL)
		wk_err(0, "%s/staged/%s: is not a regular file (skipped)", st->path, id);
	else if (errno != ENOENT)
		wk_errsys(0, "%s/staged/%s", st->path, id);
}

/* baton_try under staged/ID's lock (FD): 1 done (started, gave up, or
 * found it over), 0 an attempt it is after still lives (AFTER_LIVE),
 * -1 error (said). */
static int baton_locked(struct wk_state *st, const char *id, int fd, const char **after_live,
			struct wire_rec *rec, struct spec *sp)
{
	struct wire_rec ans = { 0 }, end = { 0 };
	char *why = NULL, *reason;
	long long until;
	size_t i;
	int rc, got;

	/* 4: its state file exists: it started (or ended) already. */
	got = state_exists(st, id);
	if (got < 0) {
		wk_errsys(0, "%s/attempts/%s.state", st->path, id);
		return -1;
	}
	if (got) {
		unstage_file(st, id);
		return 1;
	}
	/* 5: its spec (what launch checked; a file that says otherwise
	 * now can never start), and the attempts it is after. */
	got = read_staged(fd, rec, &why);
	if (got == 0) {
		sp->rec = *rec;
		got = spec_check(sp, &why);
	}
	if (got < 0) {
		reason = xasprintf("launch failed: bad spec: %s", why ? why : "out of memory");
		free(why);
		goto give_up;
	}
	for (i = 0; i < sp->nafter; i++) {
		got = after_over(st, sp->after[i]);
		if (got < 0)
			return -1;
		if (got == 0) {
			*after_live = sp->after[i];
			return 0;
		}
	}
	/* 6: the launch steps, quietly; busy cards are tried again for a
	 * moment (a card frees its memory a little after its process). */
	until = mono_ms() + BATON_SETTLE_MS;
	for (;;) {
		wire_free(&ans);
		rc = launch_spec(st, sp, &ans);
		if (rc != EX_TEMPFAIL_ || mono_ms() >= until)
			break;
		sleep_ms(BATON_RETRY_MS);
	}
	got = state_exists(st, id);
	if (got < 0) {
		wire_free(&ans);
		wk_errsys(0, "%s/attempts/%s.state", st->path, id);
		return -1;
	}
	if (got) {
		/* Started (its state file says how it goes on). */
		wire_free(&ans);
		CRASH_POINT("worker baton: started", NULL);
		unstage_file(st, id);
		return 1;
	}
	if (rc == 0) {
		/* Answered as being launched by someone else and still no
		 * state file: staged/ID stays for the next baton. */
		wire_free(&ans);
		return 1;
	}
	if (rc == EX_TEMPFAIL_)
		reason = xasprintf("cards busy when its turn came: %s",
				   wire_get(&ans, "reason") ? wire_get(&ans, "reason") : "busy");
	else
		reason = xasprintf("launch failed: %s", wk_last_err() ? wk_last_err() : "unknown error");
	wire_free(&ans);
give_up:
	/* 7-8: it never started: unstaged, then staged/ID removed (after
	 * the state file exists, so that nothing starts it again). */
	if (!reason || write_end(st, id, rec->n ? rec : NULL, WS_UNSTAGED, reason, &end) < 0) {
		free(reason);
		wire_free(&end);
		wk_errsys(0, "%s/attempts/%s.state", st->path, id);
		return -1;
	}
	free(reason);
	wire_free(&end);
	CRASH_POINT("worker baton: gave up", NULL);
	unstage_file(st, id);
	return 1;
}

int baton_try(struct wk_state *st, const char *id)
{
	if (!wk_id_ok(id)) {
		wk_err(0, "%s/staged/%s: not an attempt ID (skipped)", st->path, id);
		return -1;
	}
	for (;;) {
		struct wire_rec rec = { 0 };
		struct spec sp;
		const char *live = NULL;
		char *live_id = NULL;
		int fd, r;

		memset(&sp, 0, sizeof sp);
		/* 1-3: open, lock (not waiting: its holder deals with it),
		 * still there. */
		r = staged_lock(st, id, 0, &fd);
		if (r <= 0) {
			if (r < 0 && errno != ENOENT) {
				say_staged_error(st, id);
				return -1;
			}
			return 0;
		}
		r = baton_locked(st, id, fd, &live, &rec, &sp);
		if (r == 0 && !(live_id = strdup(live)))
			r = -1;
		spec_free(&sp);
		wire_free(&rec);
		close(fd);
		if (r != 0)
			return r < 0 ? -1 : 0;
		/*
		 * An attempt it is after lives: its end brings us back.
		 * Unless it ended while we held the lock, and its baton,
		 * finding the lock held, left it to us: looked at again
		 * now that the lock is free, and if over, once more.
		 */
		r = after_over(st, live_id);
		free(live_id);
		if (r <= 0)
			return r < 0 ? -1 : 0;
	}
}

/* ---- the deck ------------------------------------------------------------ */

/* Signals as a new process has them (nothing blocked, nothing
 * ignored), no subreaper (a baton's children are its launches'), and
 * /dev/null on fds 0-2, before the exec of a baton or a deck.  0, or
 * -1 when /dev/null cannot be had. */
static int fresh_process(void)
{
	sigset_t none;
	int sig, nul;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	prctl(PR_SET_CHILD_SUBREAPER, 0);
	nul = open("/dev/null", O_RDWR);
	if (nul < 0)
		return -1;
	if (dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(nul, 2) < 0) {
		close(nul);
		return -1;
	}
	if (nul > 2)
		close(nul);
	return 0;
}

/*
 * Staged attempt ID waits on deck (LAYOUT.md section 8): the launch
 * that staged it leaves `cardbaton-worker -d PATH deck ID` behind, a
 * process of its own (double fork: nobody's child to wait for; setsid;
 * the exec gives it a clean image and its own name).  Without a deck
 * (fork failed), the baton of the attempt it is after starts it, as
 * before; nothing waits for this.
 */
/* The worker's argv for command CMD (and ARG) on ST: "-d PATH", and
 * "--lease-dir DIR" when ST has one, for the exec of a baton or deck. */
static void self_argv(char *argv[8], const struct wk_state *st, const char *cmd, const char *arg)
{
	int n = 0;

	argv[n++] = PROG;
	argv[n++] = "-d";
	argv[n++] = st->path;
	if (st->lease_path) {
		argv[n++] = "--lease-dir";
		argv[n++] = st->lease_path;
	}
	argv[n++] = (char *)cmd;
	argv[n++] = (char *)arg;
	argv[n] = NULL;
}

static void deck_spawn(const struct wk_state *st, const char *id)
{
	char *argv[8];
	pid_t pid;
	int status;

	self_argv(argv, st, "deck", id);
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return;
	if (pid == 0) {
		if (setsid() < 0 || fork() != 0)
			_exit(0);
		if (fresh_process() == 0) {
			wk_other_fds(NULL, 0, 0);
			execv("/proc/self/exe", argv);
		}
		_exit(EX_OSERR_);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
}

static void on_alarm(int sig)
{
	(void)sig;      /* only to cut a wait short (EINTR) */
}

/* Wait until attempts/AID/lock is free (its supervisor wrote the final
 * state and let it go, or it and its job are gone), looking every
 * DECK_LOOK_S whether staged/ID is still there.  0; 1: ID is not
 * staged any more; -1 when AID cannot be waited for (no attempt
 * directory: one that is staged itself; errno). */
static int lock_free_wait(const struct wk_state *st, const char *aid, const char *id)
{
	char *name = xasprintf("%s/lock", aid);
	struct sigaction sa, old;
	int fd, r;

	if (!name)
		return -1;
	fd = openat(st->attfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	free(name);
	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;       /* no SA_RESTART: the wait ends */
	if (sigaction(SIGALRM, &sa, &old) < 0) {
		close(fd);
		return -1;
	}
	for (;;) {
		alarm(DECK_LOOK_S);
		r = flock(fd, LOCK_SH);
		alarm(0);
		if (r == 0 || errno != EINTR)
			break;
		if (is_staged(st, id) == 0) {
			r = 1;  /* unstaged meanwhile: nothing to wait for */
			break;
		}
	}
	sigaction(SIGALRM, &old, NULL);
	close(fd);      /* taken for a moment only: `status` reads it as alive */
	return r;
}

int cmd_deck(struct wk_state *st, int argc, char **argv)
{
	struct wire_rec rec = { 0 };
	struct spec sp;
	char *why = NULL;
	int fd, r, tries;
	size_t i;

	if (argc != 1)
		return wk_err(EX_USAGE_, "usage: %s [-d STATE_DIR] deck ID", PROG);
	if (!wk_id_ok(argv[0]))
		return wk_err(EX_USAGE_, "deck: not an attempt ID: %s", argv[0]);
	if (st->slurm)
		return 0;
	wk_other_fds(NULL, 0, 1);
	/* On deck: the library a card check loads, before the wait. */
	nvml_preload();
	memset(&sp, 0, sizeof sp);
	fd = openat(st->stagedfd, argv[0], O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 0;       /* not staged (any more) */
	r = read_staged(fd, &rec, &why);
	close(fd);
	if (r == 0) {
		sp.rec = rec;
		r = spec_check(&sp, &why);
	}
	free(why);
	/* A spec the deck cannot read: the baton says why, later. */
	for (tries = 0; r == 0 && tries < DECK_TRIES; tries++) {
		for (i = 0; i < sp.nafter && r == 0; i++)
			r = lock_free_wait(st, sp.after[i], argv[0]);
		if (r != 0)
			break;
		baton_try(st, argv[0]);
		if (is_staged(st, argv[0]) != 1)
			break;  /* started, or given up, or unreadable */
		/* Still staged: an attempt it is after lives on (its lock
		 * was free: between its launch's steps), or another baton
		 * holds staged/ID this moment.  Soon again, a few times. */
		sleep_ms(BATON_RETRY_MS);
	}
	spec_free(&sp);
	wire_free(&rec);
	return 0;
}

/* ---- stage ------------------------------------------------------------ */

/* NAME, a dot name in staged/: a ".ID.PID.tmp" whose writer PID is
 * dead (a stage_write cut off between its open and its unlink, by a
 * crash or a kill) is removed.  One whose writer lives, or a name of
 * another shape, is left.  Always 0: a leftover that stays is only
 * clutter, found again at the next stage. */
static int tmp_sweep_one(const struct wk_state *st, const char *name, void *arg)
{
	const char *end = name + strlen(name), *p;
	long pid = 0;

	(void)arg;
	if (end - name < 7 || strcmp(end - 4, ".tmp"))
		return 0;
	for (p = end - 4; p > name + 2 && p[-1] >= '0' && p[-1] <= '9'; p--)
		if (end - 4 - p >= 9)
			return 0;       /* no PID is that long */
	if (p == end - 4 || p[-1] != '.' || *p == '0')
		return 0;
	for (; p < end - 4; p++)
		pid = pid * 10 + (*p - '0');
	if (pid_gone(pid))
		unlinkat(st->stagedfd, name, 0);
	return 0;
}

/* Write staged/ID durably, never replacing one that is there: a
 * temporary .ID.PID.tmp in staged/, synced, linked as ID (EEXIST:
 * staged by another launcher already, the same spec), removed, the
 * directory synced.  0 or -1 (errno). */
static int stage_write(const struct wk_state *st, const struct spec *sp)
{
	char *tmp = xasprintf(".%s.%ld.tmp", sp->id, (long)getpid()), *buf = NULL;
	long n = wire_format(&sp->rec, &buf);
	int fd = -1, rc = -1, e;

	if (!tmp || n < 0)
		goto out;
	staged_each(st, 1, tmp_sweep_one, NULL);     /* the leftovers of others */
	if (unlinkat(st->stagedfd, tmp, 0) < 0 && errno != ENOENT)
		goto out;
	fd = openat(st->stagedfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		goto out;
	if (fchmod(fd, 0600) < 0 || write_full(fd, buf, (size_t)n) < 0 || fsync(fd) < 0) {
		e = errno;
		close(fd);
		errno = e;
		goto unlink_tmp;
	}
	if (close(fd) < 0)
		goto unlink_tmp;
	if (linkat(st->stagedfd, tmp, st->stagedfd, sp->id, 0) < 0 && errno != EEXIST)
		goto unlink_tmp;
	if (unlinkat(st->stagedfd, tmp, 0) < 0 || fsync_dir(st->stagedfd) < 0)
		goto out;
	rc = 0;
	goto out;
unlink_tmp:
	e = errno;
	unlinkat(st->stagedfd, tmp, 0);
	errno = e;
out:
	e = errno;
	free(tmp);
	free(buf);
	errno = e;
	return rc;
}

int stage_launch(struct wk_state *st, struct spec *sp)
{
	struct wire_rec ans = { 0 };
	struct stat sb;
	int got, alive, rc = 0, dir, staged;

	/* a: an attempt that exists is answered (or, a directory without
	 * a state file, taken over) exactly as launch does; staged/ID
	 * beside its state file is only removed.  A directory beside
	 * staged/ID is a baton's launch (at work, or dead before its state
	 * file): for baton_try, under staged/ID's lock. */
	got = state_exists(st, sp->id);
	if (got < 0)
		return wk_errsys(EX_OSERR_, "%s/attempts/%s.state", st->path, sp->id);
	dir = fstatat(st->attfd, sp->id, &sb, AT_SYMLINK_NOFOLLOW) == 0;
	if (!dir && errno != ENOENT)
		return wk_errsys(EX_OSERR_, "%s/attempts/%s", st->path, sp->id);
	staged = is_staged(st, sp->id) == 1;
	if (!staged && errno != ENOENT)
		return wk_errsys(EX_OSERR_, "%s/staged/%s", st->path, sp->id);
	if (got || (dir && !staged)) {
		rc = launch_spec(st, sp, &ans);
		if (state_exists(st, sp->id) == 1)
			unstage_file(st, sp->id);
		if (ans.n && wk_print(&ans) < 0)
			rc = wk_errsys(EX_OSERR_, "stdout");
		wire_free(&ans);
		return rc;
	}
	/* b: staged, durably, before anyone hears of it. */
	if (!staged && !dir) {
		if (stage_write(st, sp) < 0)
			return wk_errsys(EX_OSERR_, "%s/staged/%s", st->path, sp->id);
		CRASH_POINT("worker stage: staged", NULL);
	}
	/* c: every attempt it is after over already: it starts now. */
	baton_try(st, sp->id);
	/* d: the answer: its state record if it has one now, else staged. */
	got = wk_attempt_status(st, sp->id, &ans, &alive);
	if (got < 0) {
		wire_free(&ans);
		return wk_errsys(EX_OSERR_, "attempt %s", sp->id);
	}
	/* Neither (a state file that went away meanwhile: never): what it
	 * was asked. */
	if (got == 0)
		rc = rec_of_spec(&sp->rec, sp->id, WS_STAGED, &ans) < 0;
	if (rc || wk_print(&ans) < 0)
		rc = wk_errsys(EX_OSERR_, "stdout");
	/* e: still staged: on deck until its turn (after the answer, which
	 * nothing here holds up). */
	if (!st->slurm && wk_state_is(&ans, WS_STAGED))
		deck_spawn(st, sp->id);
	wire_free(&ans);
	return rc;
}

/* ---- baton -------------------------------------------------------------- */

struct pass {
	struct wk_state *st;
	int moved;              /* a staged attempt started or ended this pass */
};

static int try_one(const struct wk_state *cst, const char *name, void *arg)
{
	struct pass *p = arg;

	(void)cst;
	baton_try(p->st, name);
	if (faccessat(p->st->stagedfd, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
		p->moved = 1;
	return 0;
}

int cmd_baton(struct wk_state *st, int argc, char **argv)
{
	struct pass p = { st, 1 };
	int passes;

	(void)argv;
	if (argc != 0)
		return wk_err(EX_USAGE_, "usage: %s [-d STATE_DIR] baton", PROG);
	if (st->slurm)
		return 0;
	/* What the exec carried here (baton_exec) stays open until we
	 * exit, and goes to nothing we exec (nvidia-smi). */
	wk_other_fds(NULL, 0, 1);
	/* Again while a pass moved something: an attempt staged after a
	 * staged one that gave up comes after it in no particular order. */
	for (passes = 0; p.moved && passes < 64; passes++) {
		p.moved = 0;
		if (staged_each(st, 0, try_one, &p) < 0)
			return wk_errsys(EX_OSERR_, "%s/staged", st->path);
	}
	/* The final state of the supervisor that became this baton was
	 * written with its data synced and its name not (supervise.c): a
	 * start above made it durable; this does when none did. */
	if (fsync_dir(st->attfd) < 0)
		return wk_errsys(EX_OSERR_, "%s/attempts: fsync", st->path);
	return 0;
}

void baton_exec(const struct wk_state *st, int carry)
{
	char *argv[8];

	self_argv(argv, st, "baton", NULL);
	if (fresh_process() < 0)
		return;
	/* The lease fds and the attempt lock are close-on-exec: released
	 * here, before the baton takes the leases.  CARRY is not
	 * (cmd_baton sets it again); should that fail, the exec closes
	 * it, only slower. */
	if (carry >= 0)
		(void)fcntl(carry, F_SETFD, 0);
	execv("/proc/self/exe", argv);
}

/* ---- unstage, and cancel or pause of a staged attempt --------------------- */

int staged_end(struct wk_state *st, const char *id, enum wire_state ws, const char *reason,
	       struct wire_rec *r, int *ex)
{
	struct wire_rec rec = { 0 };
	char *why = NULL;
	int fd, got;

	*ex = 0;
	if (!wk_id_ok(id))
		return 0;
	/* A baton may hold it while it launches: waited for. */
	got = staged_lock(st, id, LAUNCH_WAIT_MS, &fd);
	if (got < 0) {
		if (errno == ENOENT)
			return 0;
		*ex = wk_errsys(EX_OSERR_, "%s/staged/%s", st->path, id);
		return -1;
	}
	if (got == 0)
		return 2;
	got = state_exists(st, id);
	if (got != 0) {
		close(fd);
		if (got < 0) {
			*ex = wk_errsys(EX_OSERR_, "%s/attempts/%s.state", st->path, id);
			return -1;
		}
		unstage_file(st, id);
		return 0;
	}
	/* A spec that cannot be read ends all the same, without cards. */
	if (read_staged(fd, &rec, &why) < 0)
		free(why);
	if (write_end(st, id, rec.n ? &rec : NULL, ws, reason, r) < 0) {
		*ex = wk_errsys(EX_OSERR_, "%s/attempts/%s.state", st->path, id);
		wire_free(&rec);
		close(fd);
		return -1;
	}
	wire_free(&rec);
	unstage_file(st, id);
	close(fd);
	return 1;
}

int cmd_unstage(struct wk_state *st, int argc, char **argv)
{
	struct wire_rec r = { 0 };
	int got, alive, ex, rc = 0;

	if (argc != 1)
		return wk_err(EX_USAGE_, "usage: %s [-d STATE_DIR] unstage ID", PROG);
	got = staged_end(st, argv[0], WS_UNSTAGED, "unstaged by the controller", &r, &ex);
	if (got < 0)
		return ex;
	if (got == 1) {
		rc = wire_set(&r, "alive", "0") < 0 || wk_print(&r) < 0 ? wk_errsys(EX_OSERR_, "stdout") : 0;
		wire_free(&r);
		return rc;
	}
	/* Not staged (any more): as status says it.  Its lock still held
	 * after LAUNCH_WAIT_MS (a baton starting it): the same, and 75. */
	wire_free(&r);
	ex = got == 2;
	got = wk_attempt_status(st, argv[0], &r, &alive);
	if (got < 0) {
		wire_free(&r);
		return wk_errsys(EX_OSERR_, "attempt %s", argv[0]);
	}
	if (got == 0) {
		wire_free(&r);
		return wk_err(EX_NOINPUT_, "unknown attempt %s", argv[0]);
	}
	if (wire_set(&r, "alive", alive ? "1" : "0") < 0 || wk_print(&r) < 0)
		rc = wk_errsys(EX_OSERR_, "stdout");
	else if (ex)
		rc = wk_err(EX_TEMPFAIL_, "attempt %s is being started: ask again", argv[0]);
	wire_free(&r);
	return rc;
}
