/*
 * launch.c - "cardbaton-worker launch": LAYOUT.md section 8, steps 1-7,
 * and the supervisor that stays behind with the job.
 *
 * Processes:
 *
 *   launcher (ssh's child)      reads the spec, takes the attempt lock
 *     |                         and the leases, writes "starting", forks:
 *     +- supervisor             setsid, subreaper, stdio on /dev/null and
 *          |                    the log; writes "running", tells the
 *          |                    launcher (which prints the state and
 *          |                    exits), waits; writes the final state.
 *          +- job               own process group; execvp(argv) or
 *                               sh -c SHELL
 *
 * The attempt lock and the leases are opened close-on-exec and made
 * inheritable in the job's child only, after fork: the launcher's and
 * the supervisor's copies go away with them, the job's with the job's
 * last process, so the kernel releases them however the attempt ends.
 */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "worker.h"
#include "json.h"

extern char **environ;

/* ---- the spec ---------------------------------------------------------- */

struct spec {
	struct wire_rec rec;
	const char *id;
	char **argv;            /* NULL-terminated, into rec; NULL for shell */
	size_t argc;
	const char *shell;
	const char *cwd;
	const char **env;       /* NAME=value, into rec */
	size_t nenv;
	long long *gpu;
	size_t ngpu;
	const char **uuid;      /* the controller's, into rec; 0 or ngpu */
	size_t nuuid;
	long long idle_mib, timeout, grace;
	int resumable;
	const char *checkpoint;
};

/* The record stays the caller's. */
static void spec_free(struct spec *sp)
{
	free(sp->argv);
	free(sp->env);
	free(sp->gpu);
	free(sp->uuid);
}

static int name_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      (c >= '0' && c <= '9') || c == '_'))
			return 0;
	}
	return 1;
}

/* Check the spec and index it.  0, or -1 with *why (malloc'd). */
static int spec_check(struct spec *sp, char **why)
{
	struct wire_rec *r = &sp->rec;
	static const char *const once[] = {
		"attempt", "shell", "cwd", "idle_mib", "timeout", "grace",
		"resumable", "checkpoint",
	};
	size_t i, j, na = 0, ne = 0, ng = 0, nu = 0;
	long long v;

	*why = NULL;
	for (i = 0; i < r->n; i++) {
		const struct wire_field *f = &r->f[i];

		if (strlen(f->val) != f->len) {
			*why = xasprintf("%s holds a NUL byte", f->key);
			return -1;
		}
		for (j = 0; j < sizeof once / sizeof once[0]; j++)
			if (strcmp(f->key, once[j]) == 0 && wire_get(r, f->key) != f->val) {
				*why = xasprintf("%s given twice", f->key);
				return -1;
			}
		na += strcmp(f->key, "arg") == 0;
		ne += strcmp(f->key, "env") == 0;
		ng += strcmp(f->key, "gpu") == 0;
		nu += strcmp(f->key, "uuid") == 0;
	}
	sp->id = wire_get(r, "attempt");
	if (!sp->id) {
		*why = xasprintf("no attempt");
		return -1;
	}
	if (!wk_id_ok(sp->id)) {
		*why = xasprintf("attempt must be 1 to 64 of [0-9a-f-]");
		return -1;
	}
	sp->shell = wire_get(r, "shell");
	if ((na > 0) == (sp->shell != NULL)) {
		*why = xasprintf("exactly one of arg and shell is needed");
		return -1;
	}
	sp->cwd = wire_get(r, "cwd");
	sp->checkpoint = wire_get(r, "checkpoint");
	sp->argv = calloc(na + 1, sizeof *sp->argv);
	sp->env = calloc(ne + 1, sizeof *sp->env);
	sp->gpu = calloc(ng + 1, sizeof *sp->gpu);
	sp->uuid = calloc(nu + 1, sizeof *sp->uuid);
	if (!sp->argv || !sp->env || !sp->gpu || !sp->uuid) {
		*why = xasprintf("out of memory");
		return -1;
	}
	for (i = 0; i < r->n; i++) {
		const struct wire_field *f = &r->f[i];

		if (strcmp(f->key, "arg") == 0) {
			sp->argv[sp->argc++] = f->val;
		} else if (strcmp(f->key, "env") == 0) {
			const char *eq = strchr(f->val, '=');

			if (!eq || !name_ok(f->val, (size_t)(eq - f->val))) {
				*why = xasprintf("env must be NAME=value with NAME a shell identifier");
				return -1;
			}
			sp->env[sp->nenv++] = f->val;
		} else if (strcmp(f->key, "gpu") == 0) {
			struct wire_rec one = { (struct wire_field *)f, 1, 1 };

			if (wire_get_ll(&one, "gpu", &v) < 0 || v < 0 || v > 1000000) {
				*why = xasprintf("gpu must be a non-negative index");
				return -1;
			}
			for (j = 0; j < sp->ngpu; j++)
				if (sp->gpu[j] == v) {
					*why = xasprintf("gpu %lld given twice", v);
					return -1;
				}
			sp->gpu[sp->ngpu++] = v;
		} else if (strcmp(f->key, "uuid") == 0) {
			if (!nv_uuid_ok(f->val, f->len)) {
				*why = xasprintf("uuid must be 1 to 128 bytes, no '/', ',' or blanks, "
						   "not starting with '.'");
				return -1;
			}
			sp->uuid[sp->nuuid++] = f->val;
		}
	}
	if (nu && nu != ng) {
		*why = xasprintf("uuid must be given once for each gpu, or not at all");
		return -1;
	}
	if (na == 0) {
		free(sp->argv);
		sp->argv = NULL;
	}
	{
		static const struct { const char *key; long long def, max; } nums[] = {
			{ "idle_mib", 64, 1LL << 40 },
			{ "timeout", 0, 100LL * 366 * 86400 },
			{ "grace", 60, 100LL * 366 * 86400 },
			{ "resumable", 0, 1 },
		};
		long long *dst[] = { &sp->idle_mib, &sp->timeout, &sp->grace, NULL };

		for (i = 0; i < sizeof nums / sizeof nums[0]; i++) {
			v = nums[i].def;
			if (wire_get(r, nums[i].key) &&
			    (wire_get_ll(r, nums[i].key, &v) < 0 || v < 0 || v > nums[i].max)) {
				*why = xasprintf("%s must be an integer from 0 to %lld",
						   nums[i].key, nums[i].max);
				return -1;
			}
			if (dst[i])
				*dst[i] = v;
			else
				sp->resumable = (int)v;
		}
	}
	return 0;
}

/* ---- the environment --------------------------------------------------- */

struct envv {
	char **v;
	size_t n, cap;
	char **owned;           /* strings made here, freed with the vector */
	size_t nowned;
};

static int env_push(struct envv *e, char *s)
{
	if (e->n + 2 > e->cap) {
		size_t nc = e->cap ? e->cap * 2 : 64;
		char **nv = realloc(e->v, nc * sizeof *nv);

		if (!nv)
			return -1;
		e->v = nv;
		e->cap = nc;
	}
	e->v[e->n++] = s;
	e->v[e->n] = NULL;
	return 0;
}

static void env_unset(struct envv *e, const char *name, size_t nl)
{
	size_t i, o = 0;

	for (i = 0; i < e->n; i++)
		if (!(strncmp(e->v[i], name, nl) == 0 && e->v[i][nl] == '='))
			e->v[o++] = e->v[i];
	e->n = o;
	if (e->v)
		e->v[o] = NULL;
}

/* Put "NAME=value" S, replacing any NAME. */
static int env_put(struct envv *e, const char *s)
{
	env_unset(e, s, strcspn(s, "="));
	return env_push(e, (char *)s);
}

static int env_set(struct envv *e, const char *name, const char *val)
{
	char *s = xasprintf("%s=%s", name, val), **no;

	if (!s)
		return -1;
	no = realloc(e->owned, (e->nowned + 1) * sizeof *no);
	if (!no) {
		free(s);
		return -1;
	}
	e->owned = no;
	e->owned[e->nowned++] = s;
	return env_put(e, s);
}

static void env_free(struct envv *e)
{
	size_t i;

	for (i = 0; i < e->nowned; i++)
		free(e->owned[i]);
	free(e->owned);
	free(e->v);
}

/* ---- what the launcher hands to the supervisor ------------------------- */

struct launch {
	struct wk_state *st;
	struct spec *sp;
	int adir;               /* attempts/ID */
	int lockfd;             /* attempts/ID/lock, held */
	int *lease;             /* leases/UUID, held; sp->ngpu of them */
	char **uuid;            /* the cards' UUIDs, in spec order */
	char *adir_path;        /* STATE/attempts/ID */
	char *log_path;
	char *cwd;              /* expanded, or NULL */
	struct envv env;
};

/* attempts/ID/{spec,lock,...} and attempts/ID itself: a launch that
 * ends before step 6 leaves no trace (the same ID may come again). */
static void remove_attempt_dir(struct launch *l)
{
	static const char *const files[] = { "spec", ".spec.tmp", "cancel", "pause", "checkpoint", "lock" };
	size_t i;

	for (i = 0; i < sizeof files / sizeof files[0]; i++)
		unlinkat(l->adir, files[i], 0);
	/* Fails (ENOTEMPTY) only when another launcher of this ID took
	 * it over meanwhile: then it is theirs. */
	unlinkat(l->st->attfd, l->sp->id, AT_REMOVEDIR);
}

static void release_leases(struct launch *l, int truncate)
{
	size_t i;

	for (i = 0; i < l->sp->ngpu; i++) {
		if (l->lease[i] < 0)
			continue;
		if (truncate && ftruncate(l->lease[i], 0) < 0) {
			/* The content only names a holder while the lock is
			 * held, so a stale name is harmless. */
		}
		close(l->lease[i]);
		l->lease[i] = -1;
	}
}

/* Step 3: every requested card exists, and its UUID (which names its
 * lease).  0, or 1 with *reason (malloc'd); -1 on out of memory. */
static int card_uuids(struct launch *l, const struct nv_info *info, char **reason)
{
	size_t i;

	*reason = NULL;
	for (i = 0; i < l->sp->ngpu; i++) {
		const struct nv_gpu *g = nv_find_index(info, l->sp->gpu[i]);

		if (!g) {
			*reason = xasprintf("GPU %lld: no such GPU on this node", l->sp->gpu[i]);
			return *reason ? 1 : -1;
		}
		if (!(l->uuid[i] = strdup(g->uuid)))
			return -1;
	}
	return 0;
}

/* Step 5: every requested card is still the one leased, and idle.  0,
 * or 1 with *reason (malloc'd); -1 on out of memory. */
static int check_cards(struct launch *l, const struct nv_info *info, char **reason)
{
	size_t i;

	*reason = NULL;
	for (i = 0; i < l->sp->ngpu; i++) {
		long long ix = l->sp->gpu[i];
		const struct nv_gpu *g = nv_find_index(info, ix);

		if (!g)
			*reason = xasprintf("GPU %lld: no such GPU on this node", ix);
		else if (l->uuid[i] && strcmp(l->uuid[i], g->uuid) != 0)
			*reason = xasprintf("GPU %lld: now %s, was %s", ix, g->uuid, l->uuid[i]);
		else if (g->mem_used < 0)
			*reason = xasprintf("GPU %lld (%s): memory use not reported", ix, g->uuid);
		else if (g->mem_used > l->sp->idle_mib)
			*reason = xasprintf("GPU %lld (%s): %lld MiB in use", ix, g->uuid, g->mem_used);
		else if (g->procs > 0)
			*reason = xasprintf("GPU %lld (%s): has %d compute process%s", ix,
					      g->uuid, g->procs, g->procs == 1 ? "" : "es");
		else if (!l->uuid[i] && !(l->uuid[i] = strdup(g->uuid)))
			return -1;
		else
			continue;
		return *reason ? 1 : -1;
	}
	return 0;
}

/* Step 4.  0, 1 with *reason, -1 with errno. */
static int take_leases(struct launch *l, char **reason)
{
	size_t i;
	size_t idlen = strlen(l->sp->id);

	*reason = NULL;
	for (i = 0; i < l->sp->ngpu; i++) {
		int fd = -1, r;
		char *holder = NULL;
		size_t hl = 0;

		/* Close-on-exec here; the job's child clears it (see top). */
		r = lock_at(l->st->leasefd, l->uuid[i], LOCK_EX, 1, &fd);
		if (r < 0)
			return -1;
		if (r == 0) {
			if (read_capped(l->st->leasefd, l->uuid[i], 4096, &holder, &hl) == 0) {
				holder[strcspn(holder, "\r\n")] = '\0';
			}
			*reason = xasprintf("GPU %lld (%s): leased by %s", l->sp->gpu[i],
					      l->uuid[i], holder && *holder ? holder : "another attempt");
			free(holder);
			return *reason ? 1 : -1;
		}
		l->lease[i] = fd;
		if (ftruncate(fd, 0) < 0 || pwrite(fd, l->sp->id, idlen, 0) != (ssize_t)idlen ||
		    pwrite(fd, "\n", 1, (off_t)idlen) != 1)
			return -1;
	}
	return 0;
}

/* ---- the supervisor ----------------------------------------------------- */

enum stop_why { STOP_NONE, STOP_CANCEL, STOP_TIMEOUT, STOP_SIGNAL };

/* Who asked a resumable job to checkpoint (SPEC section 9). */
enum pause_why { PAUSE_NONE, PAUSE_USER, PAUSE_TIMEOUT };

struct sup {
	struct launch *l;
	int notify;             /* write end to the launcher, or -1 */
	pid_t pid;              /* the job's main process */
	long long started;      /* wall clock ms */
	int main_alive, status;
	enum stop_why stop;
	int stop_sig;           /* with STOP_SIGNAL */
	const char *failure;    /* before exec: "cwd ...", "exec ..." */
	enum pause_why pause;
	int time_limit;         /* the time limit was reached */
	/* Decided when the main process exits after a pause request:
	 * either the checkpoint (paused), or why it is a failure. */
	char *ck_path;
	const char *pause_fail;
	char *pause_fail_owned;
};

static void tell_launcher(struct sup *s)
{
	if (s->notify >= 0) {
		if (write_full(s->notify, "1", 1) < 0) {
			/* The launcher is gone: nothing to tell. */
		}
		close(s->notify);
		s->notify = -1;
	}
}

/* The state record's common part: attempt, state, cards, log. */
static int base_state(struct sup *s, struct wire_rec *r, const char *state)
{
	size_t i;
	struct launch *l = s->l;

	if (wire_add(r, "attempt", l->sp->id) < 0 || wire_add(r, "state", state) < 0)
		return -1;
	if (s->pid > 0 && (wk_set_ll(r, "pid", s->pid) < 0 || wk_set_ll(r, "pgid", s->pid) < 0))
		return -1;
	for (i = 0; i < l->sp->ngpu; i++)
		if (wire_addf(r, "gpu", "%lld", l->sp->gpu[i]) < 0 ||
		    wire_add(r, "uuid", l->uuid[i]) < 0)
			return -1;
	if (s->started && wk_set_ll(r, "started", s->started) < 0)
		return -1;
	if (wire_add(r, "log", l->log_path) < 0)
		return -1;
	if (l->sp->checkpoint && wire_add(r, "checkpoint", l->sp->checkpoint) < 0)
		return -1;
	return 0;
}

/* "killed by signal N (SIGNAME)" and SUFFIX. */
static char *signal_reason(int sig, const char *suffix)
{
	const char *n = wk_signame(sig);

	return n ? xasprintf("killed by signal %d (%s)%s", sig, n, suffix)
		 : xasprintf("killed by signal %d%s", sig, suffix);
}

/* The `pausing` record: running's keys, the reason, and `timeout 1`
 * when the time limit asked. */
static void write_pausing(struct sup *s)
{
	struct wire_rec rec = { 0 };
	int timeout = s->pause == PAUSE_TIMEOUT;

	if (base_state(s, &rec, "pausing") < 0 ||
	    wire_add(&rec, "reason", timeout ? "time limit reached: pause requested"
						: "pause requested") < 0 ||
	    (timeout && wire_add(&rec, "timeout", "1") < 0) ||
	    wk_state_write(s->l->st, s->l->sp->id, &rec) < 0)
		fprintf(stderr, "%s: writing the pausing state: %s\n", PROG, strerror(errno));
	wire_free(&rec);
}

/* attempts/ID/pause exists (of any kind: the job only tests for it). */
static int pause_file_there(struct launch *l)
{
	struct stat sb;

	if (fstatat(l->adir, "pause", &sb, AT_SYMLINK_NOFOLLOW) == 0)
		return 1;
	if (errno != ENOENT)
		fprintf(stderr, "%s: %s/pause: %s\n", PROG, l->adir_path, strerror(errno));
	return 0;
}

/* The supervisor's own pause request at the time limit: the file the
 * job polls, made atomically.  0, or -1 (said on the log). */
static int make_pause_file(struct launch *l)
{
	char *tmp = xasprintf(".pause.%ld.tmp", (long)getpid());
	int rc = tmp ? atomic_write_at(l->adir, tmp, "pause", "", 0, 0600, 1) : -1;

	if (rc < 0)
		fprintf(stderr, "%s: %s/pause: %s\n", PROG, l->adir_path, strerror(errno));
	free(tmp);
	return rc;
}

/*
 * Read the checkpoint marker attempts/ID/checkpoint: a regular file (no
 * symbolic link), at most CK_MARKER_MAX bytes, a JSON object with a
 * non-empty "checkpoint" string.  0 with *path (malloc'd), 1 with
 * *reason (malloc'd; NULL when out of memory).
 */
static int read_marker(struct launch *l, char **path, char **reason)
{
	char *where = xasprintf("%s/checkpoint", l->adir_path), *buf = NULL, *why = NULL;
	struct stat sb;
	size_t n, plen;
	int fd, e;
	enum ck_status cs;

	*path = *reason = NULL;
	if (!where)
		return 1;
	/* O_NONBLOCK: a FIFO under that name must not hang us. */
	fd = openat(l->adir, "checkpoint", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		if (e == ENOENT)
			*reason = xasprintf("exit status 75 but no checkpoint marker at %s", where);
		else if (e == ELOOP)
			*reason = xasprintf("checkpoint marker at %s is a symbolic link", where);
		else
			*reason = xasprintf("checkpoint marker at %s: %s", where, strerror(e));
		free(where);
		return 1;
	}
	if (fstat(fd, &sb) < 0) {
		*reason = xasprintf("checkpoint marker at %s: %s", where, strerror(errno));
	} else if (!S_ISREG(sb.st_mode)) {
		*reason = xasprintf("checkpoint marker at %s is not a regular file", where);
	} else if (sb.st_size > CK_MARKER_MAX) {
		*reason = xasprintf("checkpoint marker at %s is larger than %d KiB", where,
				      CK_MARKER_MAX / 1024);
	} else if (read_fd(fd, CK_MARKER_MAX, &buf, &n) < 0) {
		*reason = errno == EFBIG ?
			  xasprintf("checkpoint marker at %s is larger than %d KiB", where,
				      CK_MARKER_MAX / 1024) :
			  xasprintf("checkpoint marker at %s: %s", where, strerror(errno));
	}
	close(fd);
	free(where);
	if (*reason || !buf)
		return 1;
	cs = ck_marker_parse(buf, n, path, &plen, &why);
	free(buf);
	switch (cs) {
	case CK_OK:
		return 0;
	case CK_INVALID:
		*reason = xasprintf("checkpoint marker is not valid JSON: %s",
				      why ? why : "out of memory");
		break;
	case CK_NOT_OBJECT:
		*reason = strdup("checkpoint marker is not a JSON object");
		break;
	case CK_NO_PATH:
		*reason = strdup("checkpoint marker has no non-empty \"checkpoint\" string");
		break;
	case CK_DUP:
		*reason = strdup("checkpoint marker has \"checkpoint\" more than once");
		break;
	case CK_NUL:
		*reason = strdup("checkpoint marker's \"checkpoint\" holds a NUL byte");
		break;
	case CK_NOMEM:
		break;
	}
	free(why);
	return 1;
}

/*
 * The main process has exited (s->status): was it a pause?  Only for a
 * resumable attempt that nothing stopped.  A pause file that the loop
 * has not heard of yet (the job was quicker than the inotify event)
 * counts as the request it is: stale ones were removed before the job
 * started.  Sets s->ck_path, or s->pause_fail, or nothing (no pause).
 */
static void pause_outcome(struct sup *s)
{
	struct launch *l = s->l;
	int st = s->status;
	char *r = NULL;

	if (!l->sp->resumable || s->stop != STOP_NONE || s->failure || s->pid <= 0)
		return;
	if (s->pause == PAUSE_NONE) {
		if (!pause_file_there(l))
			return;
		s->pause = PAUSE_USER;
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return;         /* done before it could pause: it succeeded */
	if (WIFEXITED(st) && WEXITSTATUS(st) == EX_TEMPFAIL_) {
		if (read_marker(l, &s->ck_path, &r) == 0)
			return;
	} else if (WIFEXITED(st)) {
		r = xasprintf("paused but exited with status %d (expected %d)", WEXITSTATUS(st),
				EX_TEMPFAIL_);
	} else {
		r = signal_reason(WTERMSIG(st), " after a pause request");
	}
	s->pause_fail_owned = r;
	s->pause_fail = r ? r : "the pause did not end in a checkpoint";
}

/*
 * The one place where the end of an attempt is decided.  A stop
 * (cancel, the time limit and its grace, a signal to the worker) wins;
 * then the pause outcome of pause_outcome(); then the exit status.
 */
static int final_state(struct sup *s, struct wire_rec *r)
{
	int st = s->status;
	const char *state;
	char *reason = NULL;
	int rc;

	if (s->failure) {
		state = "failed";
		reason = strdup(s->failure);
	} else if (s->stop == STOP_CANCEL) {
		state = "cancelled";
		reason = strdup("cancelled");
	} else if (s->stop == STOP_SIGNAL) {
		state = "cancelled";
		reason = xasprintf("cancelled: the worker got %s", wk_signame(s->stop_sig));
	} else if (s->stop == STOP_TIMEOUT) {
		state = "failed";
		reason = strdup("timeout");
	} else if (s->ck_path) {
		state = "paused";
		reason = strdup(s->pause == PAUSE_TIMEOUT ? "time limit reached: checkpoint saved"
							  : "checkpoint saved");
	} else if (s->pause_fail) {
		state = "failed";
		reason = strdup(s->pause_fail);
	} else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		state = "succeeded";
	} else if (WIFEXITED(st)) {
		state = "failed";
		reason = xasprintf("exit status %d", WEXITSTATUS(st));
	} else {
		state = "failed";
		reason = signal_reason(WTERMSIG(st), "");
	}
	rc = base_state(s, r, state);
	if (rc == 0 && s->ck_path && strcmp(state, "paused") == 0)
		rc = wire_set(r, "checkpoint", s->ck_path);
	if (rc == 0 && !s->failure && s->pid > 0) {
		if (WIFEXITED(st))
			rc = wk_set_ll(r, "exit_code", WEXITSTATUS(st));
		else if (WIFSIGNALED(st))
			rc = wk_set_ll(r, "signal", WTERMSIG(st));
	}
	if (rc == 0)
		rc = wk_set_ll(r, "finished", now_ms());
	if (rc == 0 && reason)
		rc = wire_add(r, "reason", reason);
	/* timeout 1: the time limit decided this end (the kill, or the
	 * pause it asked for). */
	if (rc == 0 && !s->failure &&
	    (s->stop == STOP_TIMEOUT || (s->stop == STOP_NONE && s->pause == PAUSE_TIMEOUT)))
		rc = wire_add(r, "timeout", "1");
	if (rc == 0 && !reason && strcmp(state, "succeeded") != 0) {
		errno = ENOMEM;
		rc = -1;
	}
	free(reason);
	return rc;
}

/* PATH (a /proc file: its size says nothing) read to its end. */
static int read_path(const char *path, size_t max, char **buf, size_t *n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), r, e;

	if (fd < 0)
		return -1;
	r = read_fd(fd, max, buf, n);
	e = errno;
	close(fd);
	errno = e;
	return r;
}

/* Signal our direct children (descendants orphaned onto us as
 * subreaper: they may have left the job's process group).  The kernel
 * lists them in /proc/self/task/PID/children (we have one thread);
 * without CONFIG_PROC_CHILDREN, every /proc/N/stat is read instead. */
static void signal_children(int sig)
{
	pid_t self = getpid();
	char *path = xasprintf("/proc/self/task/%ld/children", (long)self);
	char *buf, *p, *end;
	size_t n;
	DIR *d;
	struct dirent *e;

	if (path && read_path(path, 1u << 20, &buf, &n) == 0) {
		for (p = buf; *p; p = end) {
			long pid = strtol(p, &end, 10);

			if (end == p)
				break;
			if (pid > 0)
				kill((pid_t)pid, sig);
		}
		free(buf);
		free(path);
		return;
	}
	free(path);
	d = opendir("/proc");
	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		int ppid;
		char state;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		path = xasprintf("/proc/%s/stat", e->d_name);
		if (path && read_path(path, 65536, &buf, &n) == 0) {
			p = strrchr(buf, ')');
			if (p && sscanf(p + 1, " %c %d", &state, &ppid) == 2 && ppid == self)
				kill((pid_t)atoi(e->d_name), sig);
			free(buf);
		}
		free(path);
	}
	closedir(d);
}

/* Close every descriptor the launcher inherited and we do not need:
 * one held by a controller's pipe would keep it waiting. */
static void close_other_fds(const int *keep, size_t nkeep)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int *fds = NULL;
	size_t n = 0, i, k;

	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		int fd = atoi(e->d_name), *nf;

		if (e->d_name[0] < '0' || e->d_name[0] > '9' || fd <= 2 || fd == dirfd(d))
			continue;
		for (k = 0; k < nkeep && keep[k] != fd; k++)
			;
		if (k < nkeep)
			continue;
		nf = realloc(fds, (n + 1) * sizeof *nf);
		if (!nf)
			break;
		fds = nf;
		fds[n++] = fd;
	}
	closedir(d);
	for (i = 0; i < n; i++)
		close(fds[i]);
	free(fds);
}

/* In the job's child: never returns.  Failures before exec go to the
 * supervisor through EP as one line. */
static void job_child(struct launch *l, int ep) __attribute__((noreturn));
static void job_child(struct launch *l, int ep)
{
	sigset_t none;
	size_t i;
	char *msg;
	int e, fail = 0;

	/* Its own process group (the supervisor signals the group), the
	 * signal state of a fresh process, and the attempt's locks. */
	sigemptyset(&none);
	if (setpgid(0, 0) < 0 || signal(SIGPIPE, SIG_DFL) == SIG_ERR ||
	    sigprocmask(SIG_SETMASK, &none, NULL) < 0)
		fail = 1;
	for (i = 0; i < l->sp->ngpu && !fail; i++)
		fail = fcntl(l->lease[i], F_SETFD, 0) < 0;
	if (fail || fcntl(l->lockfd, F_SETFD, 0) < 0) {
		e = errno;
		msg = xasprintf("worker: preparing the job: %s", strerror(e));
		goto out;
	}
	if (l->cwd && chdir(l->cwd) < 0) {
		e = errno;
		msg = xasprintf("cwd %s: %s", l->cwd, strerror(e));
		goto out;
	}
	environ = l->env.v;
	if (l->sp->shell) {
		execl("/bin/sh", "sh", "-c", l->sp->shell, (char *)NULL);
		e = errno;
		msg = xasprintf("exec /bin/sh: %s", strerror(e));
	} else {
		execvp(l->sp->argv[0], l->sp->argv);
		e = errno;
		msg = xasprintf("exec %s: %s", l->sp->argv[0], strerror(e));
	}
out:
	/* No message (out of memory) still reads as a failure: the
	 * supervisor sees the pipe close with the process exited 127. */
	if (write_full(ep, msg ? msg : "exec: out of memory", msg ? strlen(msg) : 19) < 0)
		_exit(126);
	_exit(127);
}

/* Read the pre-exec failure message (EOF right away: exec worked). */
static char *read_failure(int fd)
{
	char *b;
	size_t n;

	if (read_fd(fd, 65536, &b, &n) < 0)
		return xasprintf("exec: cannot read the job's status: %s", strerror(errno));
	if (n == 0) {
		free(b);
		return NULL;
	}
	return b;
}

static void reap(struct sup *s, int *none_left)
{
	int st;
	pid_t p;

	*none_left = 0;
	for (;;) {
		p = waitpid(-1, &st, WNOHANG);
		if (p > 0) {
			if (p == s->pid) {
				s->main_alive = 0;
				s->status = st;
			}
			continue;
		}
		if (p < 0 && errno == EINTR)
			continue;
		if (p < 0 && errno == ECHILD)
			*none_left = 1;
		return;
	}
}

/* Wait for the job and everything it started; enforce the time limit
 * (with its pause and grace for a resumable job), cancel and pause
 * requests.  Returns when no descendant is left. */
static void supervise_loop(struct sup *s, int sfd, int ifd, const char *cancel_path)
{
	const struct spec *sp = s->l->sp;
	long long now, deadline = 0, grace_end = 0, kill_at = 0, next_kill = 0;
	int term_sent = 0, none_left, decided = 0, grace_on = 0;

	if (sp->timeout > 0)
		deadline = mono_ms() + sp->timeout * 1000;
	for (;;) {
		struct pollfd p[2];
		long long wait = -1;
		int r;

		reap(s, &none_left);
		/* The main process is gone: decide the pause outcome now,
		 * before its leftovers are stopped (they could touch the
		 * marker). */
		if (!s->main_alive && !decided) {
			decided = 1;
			pause_outcome(s);
		}
		if (none_left && !s->main_alive)
			return;
		now = mono_ms();
		/* The time limit: a resumable job is asked to checkpoint and
		 * gets the grace; any other is stopped. */
		if (s->main_alive && s->stop == STOP_NONE && deadline && !s->time_limit &&
		    now >= deadline) {
			s->time_limit = 1;
			if (!sp->resumable) {
				s->stop = STOP_TIMEOUT;
			} else {
				grace_on = 1;
				grace_end = now + sp->grace * 1000;
				/* Already pausing at the user's request: that
				 * request stands, the grace bounds it. */
				if (s->pause == PAUSE_NONE) {
					if (make_pause_file(s->l) < 0) {
						s->stop = STOP_TIMEOUT;
					} else {
						s->pause = PAUSE_TIMEOUT;
						write_pausing(s);
					}
				}
			}
		}
		if (s->main_alive && s->stop == STOP_NONE && grace_on && now >= grace_end)
			s->stop = STOP_TIMEOUT;
		/* Cancel, time limit, or the main process is gone: the rest
		 * of the attempt gets SIGTERM, and SIGKILL KILL_DELAY later. */
		if (!term_sent && (s->stop != STOP_NONE || !s->main_alive)) {
			term_sent = 1;
			kill(-s->pid, SIGTERM);
			signal_children(SIGTERM);
			kill_at = now + KILL_DELAY * 1000LL;
		}
		if (kill_at && now >= kill_at && now >= next_kill) {
			kill(-s->pid, SIGKILL);
			signal_children(SIGKILL);
			next_kill = now + 100;  /* again for new orphans */
		}
		/* Sleep until the next thing to do, or a signal or inotify
		 * event; with no time limit and nothing stopping, forever. */
		if (kill_at)
			wait = (now >= kill_at ? next_kill : kill_at) - now;
		else if (grace_on && s->stop == STOP_NONE)
			wait = grace_end - now;
		else if (deadline && !s->time_limit && s->stop == STOP_NONE)
			wait = deadline - now;
		if (wait != -1 && wait < 1)
			wait = 1;
		if (wait > 60000)
			wait = 60000;
		p[0].fd = sfd;
		p[0].events = POLLIN;
		p[1].fd = ifd;
		p[1].events = POLLIN;
		r = poll(p, 2, (int)wait);
		if (r < 0 && errno != EINTR) {
			fprintf(stderr, "%s: poll: %s\n", PROG, strerror(errno));
			sleep_ms(100);
		}
		if (r > 0 && p[0].revents) {
			struct signalfd_siginfo si;

			while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
				if (si.ssi_signo != SIGCHLD && s->main_alive && s->stop == STOP_NONE) {
					s->stop = STOP_SIGNAL;
					s->stop_sig = (int)si.ssi_signo;
				}
			}
		}
		if (r > 0 && p[1].revents) {
			char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
			ssize_t n;
			int seen_cancel = 0, seen_pause = 0;

			while ((n = read(ifd, buf, sizeof buf)) > 0) {
				char *q = buf;

				while (q < buf + n) {
					struct inotify_event *ev = (struct inotify_event *)q;

					if ((ev->mask & IN_Q_OVERFLOW) ||
					    (ev->len && strcmp(ev->name, "cancel") == 0))
						seen_cancel = 1;
					if ((ev->mask & IN_Q_OVERFLOW) ||
					    (ev->len && strcmp(ev->name, "pause") == 0))
						seen_pause = 1;
					q += sizeof *ev + ev->len;
				}
			}
			/* Cancel first: it wins over a pause. */
			if (seen_cancel && access(cancel_path, F_OK) == 0 && s->main_alive &&
			    s->stop == STOP_NONE)
				s->stop = STOP_CANCEL;
			if (seen_pause && sp->resumable && s->main_alive && s->stop == STOP_NONE &&
			    s->pause == PAUSE_NONE && pause_file_there(s->l)) {
				s->pause = PAUSE_USER;
				write_pausing(s);
			}
		}
	}
}

/* The supervisor: never returns. */
static void supervise(struct launch *l, int notify) __attribute__((noreturn));
static void supervise(struct launch *l, int notify)
{
	struct sup s;
	struct wire_rec rec = { 0 };
	sigset_t mask;
	int sfd = -1, ifd = -1, ep[2], nul, logfd, *keep, ex = 0;
	size_t nkeep = 0, i;
	char *cancel_path = NULL;

	memset(&s, 0, sizeof s);
	s.l = l;
	s.notify = notify;
	s.main_alive = 0;

	/* Leave ssh's session and its descriptors: ssh waits for every
	 * holder of the session's stdout/stderr to go. */
	if (setsid() < 0)
		fprintf(stderr, "%s: setsid: %s\n", PROG, strerror(errno));
	nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	logfd = openat(l->adir, "log", O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (nul < 0 || logfd < 0 || fchmod(logfd, 0600) < 0 || dup2(nul, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0) {
		/* Without a log there is no job: say why in the state, and
		 * let go of the launcher's streams all the same. */
		int fd;

		s.failure = "cannot open the attempt's log";
		for (fd = 0; fd <= 2; fd++)
			if (nul < 0 || dup2(nul, fd) < 0)
				close(fd);
	}
	if (nul >= 0)
		close(nul);
	if (logfd >= 0)
		close(logfd);
	keep = calloc(l->sp->ngpu + 6, sizeof *keep);
	if (keep) {
		keep[nkeep++] = notify;
		keep[nkeep++] = l->adir;
		keep[nkeep++] = l->lockfd;
		keep[nkeep++] = l->st->fd;
		keep[nkeep++] = l->st->attfd;
		keep[nkeep++] = l->st->leasefd;
		for (i = 0; i < l->sp->ngpu; i++)
			keep[nkeep++] = l->lease[i];
		close_other_fds(keep, nkeep);
		free(keep);
	}
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		fprintf(stderr, "%s: PR_SET_CHILD_SUBREAPER: %s\n", PROG, strerror(errno));
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		fprintf(stderr, "%s: signal: %s\n", PROG, strerror(errno));
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 ||
	    (sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
		fprintf(stderr, "%s: signalfd: %s\n", PROG, strerror(errno));
		if (!s.failure)
			s.failure = "worker: cannot watch for signals";
	}
	/* The watch first, then the look: a cancel made in between is
	 * seen either way. */
	cancel_path = xasprintf("%s/cancel", l->adir_path);
	ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (ifd < 0 || !cancel_path ||
	    inotify_add_watch(ifd, l->adir_path, IN_CREATE | IN_MOVED_TO | IN_ONLYDIR) < 0) {
		fprintf(stderr, "%s: inotify %s: %s\n", PROG, l->adir_path, strerror(errno));
		if (!s.failure)
			s.failure = "worker: cannot watch the attempt directory";
	}
	if (!s.failure && cancel_path && access(cancel_path, F_OK) == 0)
		s.stop = STOP_CANCEL;   /* cancelled before it started */
	/* Paused before it started (launch removed any stale pause file
	 * before it wrote the spec, so this one is a request): the job
	 * will see the file at once.  The marker must come from this job:
	 * none may be there before it starts. */
	if (!s.failure && s.stop == STOP_NONE && l->sp->resumable && pause_file_there(l))
		s.pause = PAUSE_USER;
	if (!s.failure && unlinkat(l->adir, "checkpoint", 0) < 0 && errno != ENOENT)
		s.failure = "worker: cannot remove a stale checkpoint marker";

	if (!s.failure && s.stop == STOP_NONE) {
		if (pipe2(ep, O_CLOEXEC) < 0) {
			s.failure = "worker: pipe failed";
		} else {
			s.started = now_ms();
			s.pid = fork();
			if (s.pid == 0)
				job_child(l, ep[1]);
			close(ep[1]);
			if (s.pid < 0) {
				s.failure = "worker: fork failed";
				s.pid = 0;
			} else {
				char *f;

				/* Also here, so that no signal to the group can
				 * come before it exists; EACCES once the child
				 * has exec'd (it did it itself then). */
				if (setpgid(s.pid, s.pid) < 0 && errno != EACCES && errno != ESRCH)
					fprintf(stderr, "%s: setpgid: %s\n", PROG, strerror(errno));
				s.main_alive = 1;
				f = read_failure(ep[0]);
				if (f) {
					/* Not exec'd: collect it, and say why. */
					while (waitpid(s.pid, &s.status, 0) < 0 && errno == EINTR)
						;
					s.main_alive = 0;
					s.failure = f;
				}
			}
			close(ep[0]);
		}
	}

	if (!s.failure && s.stop == STOP_NONE) {
		CRASH_POINT("worker supervise: job started", NULL);
		if (base_state(&s, &rec, "running") < 0 ||
		    wk_state_write(l->st, l->sp->id, &rec) < 0)
			fprintf(stderr, "%s: writing the running state: %s\n", PROG, strerror(errno));
		wire_free(&rec);
		if (s.pause != PAUSE_NONE)
			write_pausing(&s);
		tell_launcher(&s);
	}
	if (s.pid > 0)
		supervise_loop(&s, sfd, ifd, cancel_path);

	/* Leases first: the controller gives the cards to the next job
	 * the moment it reads the final state. */
	CRASH_POINT("worker supervise: job ended", NULL);
	release_leases(l, 0);
	if (final_state(&s, &rec) < 0 || wk_state_write(l->st, l->sp->id, &rec) < 0) {
		fprintf(stderr, "%s: writing the final state: %s\n", PROG, strerror(errno));
		ex = EX_OSERR_;
	}
	CRASH_POINT("worker supervise: final state written", NULL);
	wire_free(&rec);
	tell_launcher(&s);
	free(cancel_path);
	free(s.ck_path);
	free(s.pause_fail_owned);
	/* The lock goes with us (_exit): the attempt is over. */
	_exit(ex);
}

/* ---- the launcher -------------------------------------------------------- */

/* Print the state record of an attempt that exists (step 7): wait for
 * another launcher to finish, up to LAUNCH_WAIT_MS.  Returns the exit
 * code, or -1 to start over (the attempt directory went away or its
 * launcher died before step 6). */
static int answer_existing(struct wk_state *st, const char *id)
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
			if (got < 0)
				return wk_errsys(EX_OSERR_, "attempts/%s.state", id);
			got = wk_print(&r);
			wire_free(&r);
			return got < 0 ? wk_errsys(EX_OSERR_, "stdout") : 0;
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
	if (wire_add(&r, "attempt", id) < 0 || wire_add(&r, "state", "starting") < 0 ||
	    wk_print(&r) < 0) {
		wire_free(&r);
		return wk_errsys(EX_OSERR_, "stdout");
	}
	wire_free(&r);
	return 0;
}

static int answer_busy(struct launch *l, char *reason)
{
	struct wire_rec r = { 0 };
	int rc = EX_TEMPFAIL_;

	release_leases(l, 1);
	remove_attempt_dir(l);
	if (wire_add(&r, "attempt", l->sp->id) < 0 || wire_add(&r, "state", "busy") < 0 ||
	    wire_add(&r, "reason", reason) < 0 || wk_print(&r) < 0)
		rc = wk_errsys(EX_OSERR_, "stdout");
	wire_free(&r);
	free(reason);
	return rc;
}

/* Steps 2 (the lock is held) to 6. */
static int start(struct launch *l)
{
	struct spec *sp = l->sp;
	struct wk_state *st = l->st;
	struct wire_rec r = { 0 };
	char *buf = NULL, *err = NULL, *reason = NULL;
	long n;
	int rp[2], rc, pass;
	size_t i;
	char *vis = NULL, *pause_path = NULL, *ck_path = NULL;
	pid_t pid;

	/* A taken-over directory may hold a pause request or a marker from
	 * before: neither may count for this job.  Removed before the spec
	 * is written, because `pause` reads the spec first. */
	if ((unlinkat(l->adir, "pause", 0) < 0 && errno != ENOENT) ||
	    (unlinkat(l->adir, "checkpoint", 0) < 0 && errno != ENOENT)) {
		rc = wk_errsys(EX_OSERR_, "%s: removing a stale pause or checkpoint file", l->adir_path);
		remove_attempt_dir(l);
		return rc;
	}
	/* Not synced: only `pause` reads it, while the job runs; after a
	 * crash of the machine the job is gone, and a launch without a
	 * state file is taken over and writes it again (step 7). */
	n = wire_format(&sp->rec, &buf);
	if (n < 0 || atomic_write_at(l->adir, ".spec.tmp", "spec", buf, (size_t)n, 0600, 0) < 0) {
		free(buf);
		rc = wk_errsys(EX_OSERR_, "attempts/%s/spec", sp->id);
		remove_attempt_dir(l);
		return rc;
	}
	free(buf);
	CRASH_POINT("worker launch: spec written", NULL);

	/* Steps 3-5: the cards' UUIDs, their leases, then the check.  Only
	 * the check under the leases says whether a card is idle (no other
	 * attempt can take it meanwhile), so step 3 asks for no more than
	 * the UUIDs: NV_CARDS, one nvidia-smi run instead of two, or no
	 * process query through NVML.  A spec with the cards' UUIDs (the
	 * controller's snapshot) skips step 3: one query, under the leases,
	 * which also checks that each index still has that UUID. */
	for (pass = sp->nuuid > 0; sp->ngpu > 0 && pass < 2; pass++) {
		struct nv_info info;

		rc = pass == 1 ? take_leases(l, &reason) : 0;
		if (rc == 0) {
			if (nv_query(&info, pass == 0 ? NV_CARDS : NV_ALL, &err) < 0) {
				release_leases(l, 1);
				remove_attempt_dir(l);
				rc = wk_err(EX_UNAVAILABLE_, "%s", err ? err : "nvidia-smi failed");
				free(err);
				return rc;
			}
			rc = pass == 0 ? card_uuids(l, &info, &reason) : check_cards(l, &info, &reason);
			nv_free(&info);
		}
		if (rc < 0) {
			rc = wk_errsys(EX_OSERR_, "leases");
			release_leases(l, 1);
			remove_attempt_dir(l);
			return rc;
		}
		if (rc > 0)
			return answer_busy(l, reason);
	}

	if (sp->ngpu)
		CRASH_POINT("worker launch: cards leased", NULL);

	/* Step 6. */
	for (i = 0; i < sp->ngpu; i++) {
		char *v = xasprintf("%s%s%s", vis ? vis : "", vis ? "," : "", l->uuid[i]);

		free(vis);
		vis = v;
		if (!v)
			break;
	}
	pause_path = xasprintf("%s/pause", l->adir_path);
	ck_path = xasprintf("%s/checkpoint", l->adir_path);
	rc = (sp->ngpu && !vis) || !pause_path || !ck_path;
	if (!rc) {
		/* The worker's environment, the spec's, then ours. */
		char **e;
		static const char *const drop[] = { "SSHGPU_CHECKPOINT", "CARDBATON_CHECKPOINT" };

		for (e = environ; *e && !rc; e++)
			rc = env_push(&l->env, *e) < 0;
		for (i = 0; i < sp->nenv && !rc; i++)
			rc = env_put(&l->env, sp->env[i]) < 0;
		/* The contract's variables are the worker's alone: the
		 * checkpoint only on a resumed attempt, whatever the
		 * worker's or the spec's environment says. */
		for (i = 0; i < 2 && !rc; i++)
			env_unset(&l->env, drop[i], strlen(drop[i]));
		rc = rc || env_set(&l->env, "CUDA_VISIBLE_DEVICES", vis ? vis : "") < 0 ||
		     env_set(&l->env, "SSHGPU_PAUSE_FILE", pause_path) < 0 ||
		     env_set(&l->env, "CARDBATON_PAUSE_FILE", pause_path) < 0 ||
		     env_set(&l->env, "SSHGPU_CHECKPOINT_READY", ck_path) < 0 ||
		     env_set(&l->env, "CARDBATON_CHECKPOINT_READY", ck_path) < 0 ||
		     env_set(&l->env, "CARDBATON_ATTEMPT_ID", sp->id) < 0 ||
		     (sp->checkpoint &&
		      (env_set(&l->env, "SSHGPU_CHECKPOINT", sp->checkpoint) < 0 ||
		       env_set(&l->env, "CARDBATON_CHECKPOINT", sp->checkpoint) < 0));
	}
	free(vis);
	free(pause_path);
	free(ck_path);
	if (rc) {
		release_leases(l, 1);
		remove_attempt_dir(l);
		return wk_errsys(EX_OSERR_, "out of memory");
	}

	if (wire_add(&r, "attempt", sp->id) < 0 || wire_add(&r, "state", "starting") < 0)
		rc = 1;
	for (i = 0; i < sp->ngpu && !rc; i++)
		rc = wire_addf(&r, "gpu", "%lld", sp->gpu[i]) < 0 || wire_add(&r, "uuid", l->uuid[i]) < 0;
	if (rc || wire_add(&r, "log", l->log_path) < 0 || wk_state_write(st, sp->id, &r) < 0) {
		wire_free(&r);
		rc = wk_errsys(EX_OSERR_, "attempts/%s.state", sp->id);
		release_leases(l, 1);
		remove_attempt_dir(l);
		return rc;
	}
	wire_free(&r);
	CRASH_POINT("worker launch: state written", NULL);

	/* From here on the state file exists: the attempt may have
	 * started, and is never removed or started again. */
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
	/* Wait for "running" (or the final state when the job could not
	 * start); at most 30 s, then answer what is there. */
	{
		struct pollfd p = { rp[0], POLLIN, 0 };
		long long until = mono_ms() + 30000;

		for (;;) {
			long long left = until - mono_ms();
			int pr;

			if (left <= 0)
				break;
			pr = poll(&p, 1, (int)left);
			if (pr < 0 && errno == EINTR)
				continue;
			break;
		}
		close(rp[0]);
	}
	release_leases(l, 0);
	close(l->lockfd);
	l->lockfd = -1;
	rc = wk_state_read(st, sp->id, &r);
	if (rc <= 0)
		return wk_errsys(EX_OSERR_, "attempts/%s.state", sp->id);
	rc = wk_print(&r);
	wire_free(&r);
	return rc < 0 ? wk_errsys(EX_OSERR_, "stdout") : 0;
}

static int launch(struct wk_state *st, struct spec *sp)
{
	struct launch l;
	int tries, rc = EX_OSERR_, got;
	size_t i;

	memset(&l, 0, sizeof l);
	l.st = st;
	l.sp = sp;
	l.adir = l.lockfd = -1;
	l.lease = malloc((sp->ngpu + 1) * sizeof *l.lease);
	l.uuid = calloc(sp->ngpu + 1, sizeof *l.uuid);
	l.adir_path = xasprintf("%s/attempts/%s", st->path, sp->id);
	l.log_path = xasprintf("%s/attempts/%s/log", st->path, sp->id);
	if (sp->cwd)
		l.cwd = wk_expand_path(sp->cwd, 0);
	if (!l.lease || !l.uuid || !l.adir_path || !l.log_path || (sp->cwd && !l.cwd)) {
		rc = wk_errsys(EX_OSERR_, "out of memory");
		goto out;
	}
	for (i = 0; i < sp->ngpu; i++) {
		l.lease[i] = -1;
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
				rc = answer_existing(st, sp->id);
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
				rc = start(&l);
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
		rc = answer_existing(st, sp->id);
		if (rc >= 0)
			goto out;
	}
	rc = wk_err(EX_OSERR_, "%s: the attempt directory keeps changing", l.adir_path);
out:
	if (l.lockfd >= 0)
		close(l.lockfd);
	if (l.adir >= 0)
		close(l.adir);
	if (l.lease) {
		for (i = 0; i < sp->ngpu; i++)
			if (l.lease[i] >= 0)
				close(l.lease[i]);
	}
	for (i = 0; l.uuid && i < sp->ngpu; i++)
		free(l.uuid[i]);
	free(l.uuid);
	free(l.lease);
	free(l.adir_path);
	free(l.log_path);
	free(l.cwd);
	env_free(&l.env);
	return rc;
}

int launch_rec(struct wk_state *st, const struct wire_rec *rec)
{
	struct spec sp;
	char *bad = NULL;
	int r;

	memset(&sp, 0, sizeof sp);
	sp.rec = *rec;
	if (spec_check(&sp, &bad) < 0)
		r = wk_err(EX_DATAERR_, "bad spec: %s", bad ? bad : "out of memory");
	else
		r = launch(st, &sp);
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
