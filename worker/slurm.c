/*
 * slurm.c - a Slurm partition as a node (LAYOUT.md section 14).
 *
 * The worker speaks the same protocol for a Slurm node as for any
 * other (LAYOUT.md section 10); with `--slurm PARTITION` it answers
 * through Slurm's own commands, run where it runs (the controller's
 * machine, or the login node over ssh):
 *
 *   launch  writes the spec and a batch script into attempts/ID/, then
 *           sbatch --parsable --job-name cb-ID ..., holding the
 *           attempt's lock, and records "starting" with `slurm_job`;
 *           a launch that finds no state file first looks the name up
 *           (squeue --name), so a lost sbatch reply never submits twice
 *   (job)   the batch script runs "cardbaton-worker slurm-job ID" inside
 *           the allocation: it waits for the launcher's lock, reads the
 *           spec, and supervises the job as a launch on an SSH node
 *           does (supervise.c), with the cards Slurm gave it
 *           (CUDA_VISIBLE_DEVICES as Slurm set it, `gpu` from
 *           SLURM_JOB_GPUS, `host` from SLURMD_NODENAME)
 *   status  an attempt whose lock is free (another machine's lock
 *           cannot be seen) is alive while squeue lists its job
 *   pause   the pause file, then SIGUSR1 to the batch step
 *   cancel  the cancel file, then SIGUSR2 to the batch step; a job
 *           still pending is scancel'led and recorded cancelled
 *   gpus    one record per GPU of the partition's nodes from sinfo,
 *           busy when Slurm has it allocated (to anyone)
 *
 * The state directory must be on a file system that the login node
 * and the compute nodes share (the spec, the log, the state files, the
 * worker itself).  libc only, like the rest of the worker.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "launch.h"

#define SLURM_CMD_MS 20000
#define SLURM_MAX_OUTPUT (4u << 20)
/* How long the job in the allocation waits for the launcher that
 * submitted it to let go of the attempt's lock. */
#define SLURM_LOCK_WAIT_MS 60000

static void exec_argv(const void *arg)
{
	char *const *argv = arg;

	execvp(argv[0], argv);
	dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* Run ARGV (a Slurm command) to its end: 0 with its standard output in
 * *OUT (malloc'd); -1 with *WHY (malloc'd, one line naming the
 * command and what it said). */
static int run_cmd(char *const *argv, char **out, char **why)
{
	struct wk_child c;
	char *err = NULL;

	*out = NULL;
	if (wk_run_child(exec_argv, argv, mono_ms() + SLURM_CMD_MS, SLURM_MAX_OUTPUT, &c, &err) < 0) {
		*why = xasprintf("%s: %s", argv[0], err ? err : "cannot run it");
		free(err);
		return -1;
	}
	if (c.timed_out || c.overflow || c.broken || !WIFEXITED(c.status) ||
	    WEXITSTATUS(c.status) != 0) {
		char *line = nv_first_line(c.err ? c.err : "");

		*why = c.timed_out ? xasprintf("%s: no answer within %d s", argv[0], SLURM_CMD_MS / 1000)
		       : line && *line ? xasprintf("%s: %s", argv[0], line)
		       : xasprintf("%s failed (status %d)", argv[0],
				   WIFEXITED(c.status) ? WEXITSTATUS(c.status) : -1);
		free(line);
		wk_child_free(&c);
		return -1;
	}
	*out = c.out;
	free(c.err);
	return 0;
}

/* A job ID as Slurm prints it: digits, maybe "_N" of an array. */
static int jobid_ok(const char *s, size_t n)
{
	if (n == 0 || n > 32)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return 0;
	return 1;
}

/* Slurm's states that still hold (or will hold) an allocation. */
static int slurm_state_alive(const char *s)
{
	static const char *const live[] = {
		"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED",
		"REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED",
	};

	for (size_t i = 0; i < sizeof live / sizeof live[0]; i++)
		if (!strcmp(s, live[i]))
			return 1;
	return 0;
}

/* squeue's lines "NAME JOBID STATE" (worker.h): the launch asks for one
 * name (find_job), status for all our jobs at once (list_fetch); both
 * are read here. */
int slurm_squeue_find(const char *buf, size_t len, const char *name, char **jobid, char **state)
{
	size_t nlen = strlen(name), i = 0;

	*jobid = *state = NULL;
	while (buf && i < len) {
		const char *p = buf + i, *nl = memchr(p, '\n', len - i);
		size_t n = nl ? (size_t)(nl - p) : len - i, j, k;

		i += nl ? n + 1 : n;
		/* NAME ' ' JOBID ' ' STATE, then nothing or more fields. */
		if (memchr(p, '\0', n) || n <= nlen || memcmp(p, name, nlen) || p[nlen] != ' ')
			continue;
		for (j = nlen + 1; j < n && p[j] != ' '; j++)
			;
		if (j == n || !jobid_ok(p + nlen + 1, j - nlen - 1))
			continue;
		for (k = j + 1; k < n && p[k] != ' '; k++)
			;
		/* The last such line: a requeued name is listed again. */
		free(*jobid);
		free(*state);
		*jobid = strndup(p + nlen + 1, j - nlen - 1);
		*state = strndup(p + j + 1, k - j - 1);
		if (!*jobid || !*state) {
			free(*jobid);
			free(*state);
			*jobid = *state = NULL;
			return -1;
		}
	}
	return *jobid != NULL;
}

/*
 * Our Slurm job for attempt ID, looked up by its name cb-ID: 1 with
 * *JOBID and *STATE (malloc'd; STATE the last one squeue lists), 0
 * when squeue lists none, -1 with *WHY.
 */
static int find_job(const char *id, char **jobid, char **state, char **why)
{
	char *name = xasprintf("cb-%s", id), *out = NULL;
	char *argv[] = { "squeue", "-h", "-t", "all", "-o", "%j %i %T", "--name", name, NULL };
	int found;

	*jobid = *state = NULL;
	if (!name) {
		*why = xasprintf("out of memory");
		return -1;
	}
	if (run_cmd(argv, &out, why) < 0) {
		free(name);
		return -1;
	}
	found = slurm_squeue_find(out, out ? strlen(out) : 0, name, jobid, state);
	free(name);
	free(out);
	if (found < 0)
		*why = xasprintf("out of memory");
	return found;
}

/* ---- launch ------------------------------------------------------------- */

static int add(char ***v, size_t *n, char *s)
{
	char **nv = realloc(*v, (*n + 2) * sizeof **v);

	if (!nv || !s) {
		free(s);
		if (nv)
			*v = nv;
		return -1;
	}
	*v = nv;
	nv[(*n)++] = s;
	nv[*n] = NULL;
	return 0;
}

/* The path of this worker, which the batch script runs on the compute
 * node (the state directory, where an SSH login node's worker lives,
 * is shared with it). */
static char *self_path(void)
{
	char buf[4096];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);

	if (n <= 0 || (size_t)n >= sizeof buf - 1)
		return NULL;
	buf[n] = '\0';
	return strdup(buf);
}

/* 'x' quoting for the batch script. */
static char *sh_quoted(const char *s)
{
	size_t n = 2;
	char *q, *p;

	for (const char *c = s; *c; c++)
		n += *c == '\'' ? 4 : 1;
	if (!(q = malloc(n + 1)))
		return NULL;
	p = q;
	*p++ = '\'';
	for (; *s; s++) {
		if (*s == '\'') {
			memcpy(p, "'\\''", 4);
			p += 4;
		} else {
			*p++ = *s;
		}
	}
	*p++ = '\'';
	*p = '\0';
	return q;
}

/* sbatch for L's attempt: 0 with *JOBID; EX_TEMPFAIL_ with *WHY when
 * Slurm refused or could not be asked (nothing was submitted). */
static int sbatch(struct launch *l, char **jobid, char **why)
{
	const struct wk_slurm *sl = l->st->slurm;
	struct spec *sp = l->sp;
	char *self = self_path(), *qself = self ? sh_quoted(self) : NULL;
	char *qdir = sh_quoted(l->st->path), *qid = sh_quoted(sp->id), *script = NULL, *out = NULL;
	char **argv = NULL;
	size_t n = 0, len;
	int rc = EX_OSERR_;

	*jobid = NULL;
	if (!self || !qself || !qdir || !qid) {
		*why = xasprintf(self ? "out of memory" : "cannot find this worker's path");
		goto out;
	}
	/* The job in the allocation: this worker, in the shared state
	 * directory, supervising the attempt. */
	script = xasprintf("#!/bin/sh\n# CardBaton attempt %s\nexec %s -d %s slurm-job %s\n", sp->id,
			   qself, qdir, qid);
	if (!script || atomic_write_at(l->adir, ".batch.tmp", "batch", script, strlen(script), 0700,
				       0) < 0) {
		*why = xasprintf("attempts/%s/batch: %s", sp->id, strerror(errno));
		goto out;
	}
	if (add(&argv, &n, strdup("sbatch")) < 0 || add(&argv, &n, strdup("--parsable")) < 0 ||
	    add(&argv, &n, xasprintf("--partition=%s", sl->partition)) < 0 ||
	    add(&argv, &n, xasprintf("--job-name=cb-%s", sp->id)) < 0 ||
	    add(&argv, &n, strdup("--nodes=1")) < 0 ||
	    add(&argv, &n, xasprintf("--output=%s/slurm.out", l->adir_path)) < 0 ||
	    (sp->ngpu && add(&argv, &n, xasprintf("--gres=gpu:%zu", sp->ngpu)) < 0) ||
	    (l->cwd && add(&argv, &n, xasprintf("--chdir=%s", l->cwd)) < 0) ||
	    (sp->nodelist && add(&argv, &n, xasprintf("--nodelist=%s", sp->nodelist)) < 0))
		goto oom;
	/* Slurm's limit is the backstop: the supervisor's own comes first,
	 * with the grace after it and a minute to write the final state. */
	if (sp->timeout > 0 &&
	    add(&argv, &n, xasprintf("--time=%lld", (sp->timeout + sp->grace + 60 + 59) / 60)) < 0)
		goto oom;
	for (size_t i = 0; i < sl->nargs; i++)
		if (add(&argv, &n, strdup(sl->args[i])) < 0)
			goto oom;
	if (add(&argv, &n, xasprintf("%s/batch", l->adir_path)) < 0)
		goto oom;
	if (run_cmd(argv, &out, why) < 0) {
		rc = EX_TEMPFAIL_;
		goto out;
	}
	/* "JOBID" or "JOBID;CLUSTER". */
	len = strcspn(out, ";\n");
	if (!jobid_ok(out, len)) {
		char *line = nv_first_line(out);

		*why = xasprintf("sbatch: unexpected answer \"%s\"", line ? line : "");
		free(line);
		rc = EX_TEMPFAIL_;
		goto out;
	}
	*jobid = strndup(out, len);
	rc = *jobid ? 0 : EX_OSERR_;
	goto out;
oom:
	*why = xasprintf("out of memory");
out:
	for (size_t i = 0; i < n; i++)
		free(argv[i]);
	free(argv);
	free(out);
	free(script);
	free(self);
	free(qself);
	free(qdir);
	free(qid);
	return rc;
}

int slurm_submit(struct launch *l, char **reason)
{
	struct wire_rec r = { 0 };
	char *jobid = NULL, *state = NULL, *why = NULL;
	int rc, found;

	*reason = NULL;
	/* Submitted before, by a launcher that died before it wrote the
	 * state (or whose answer was lost): that job, never another. */
	found = find_job(l->sp->id, &jobid, &state, &why);
	free(state);
	if (found < 0) {
		*reason = why;
		return EX_TEMPFAIL_;
	}
	if (!found) {
		rc = sbatch(l, &jobid, &why);
		if (rc) {
			if (rc == EX_TEMPFAIL_) {
				*reason = why;
				return rc;
			}
			rc = wk_err(rc, "%s", why ? why : "out of memory");
			free(why);
			return rc;
		}
		CRASH_POINT("worker slurm: submitted", NULL);
	}
	rc = wire_add(&r, "attempt", l->sp->id) < 0 || wire_add(&r, "state", wire_state_name(WS_STARTING)) < 0 ||
	     wire_add(&r, "slurm_job", jobid) < 0 || wire_add(&r, "reason", "pending in Slurm") < 0 ||
	     wire_add(&r, "log", l->log_path) < 0 || wk_state_write(l->st, l->sp->id, &r) < 0;
	free(jobid);
	if (rc) {
		wire_free(&r);
		/* The job is in Slurm: the next launch finds it by name. */
		return wk_errsys(EX_OSERR_, "attempts/%s.state", l->sp->id);
	}
	rc = wk_print(&r) < 0 ? wk_errsys(EX_OSERR_, "stdout") : 0;
	wire_free(&r);
	return rc;
}

/* ---- the job in the allocation ------------------------------------------- */

/* The cards Slurm gave us: SLURM_JOB_GPUS (the node's indices), else
 * CUDA_VISIBLE_DEVICES; their UUIDs from nvidia-smi, as the job sees
 * them (an index it cannot find keeps the index as its name). */
static int allocation_cards(struct launch *l, long long **gpu, size_t *ngpu)
{
	const char *s = getenv("SLURM_JOB_GPUS");
	const char *vis = getenv("CUDA_VISIBLE_DEVICES");
	struct nv_info info;
	char *err = NULL;
	int asked;
	size_t n = 0, i;

	if (!s || !*s)
		s = vis;
	*gpu = NULL;
	*ngpu = 0;
	if (!s || !*s)
		return 0;
	for (const char *p = s; *p; p++)
		n += *p == ',';
	if (!(*gpu = calloc(n + 1, sizeof **gpu)) || !(l->uuid = calloc(n + 2, sizeof *l->uuid)))
		return -1;
	for (const char *p = s; *p;) {
		char *end;
		long long v = strtoll(p, &end, 10);

		if (end == p || v < 0)
			break;          /* not indices (UUIDs, MIG): none known */
		(*gpu)[(*ngpu)++] = v;
		p = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			break;
	}
	asked = nv_query(&info, NV_CARDS, &err) == 0;
	free(err);
	for (i = 0; i < *ngpu; i++) {
		const struct nv_gpu *g = asked ? nv_find_index(&info, (*gpu)[i]) : NULL;

		l->uuid[i] = g ? strdup(g->uuid) : xasprintf("index-%lld", (*gpu)[i]);
		if (!l->uuid[i]) {
			if (asked)
				nv_free(&info);
			return -1;
		}
	}
	if (asked)
		nv_free(&info);
	return 0;
}

/* The job cannot be run (the lock held): its final state says why,
 * and so does stderr (the attempt's slurm.out).  Returns EX. */
static int job_failed(struct wk_state *st, const char *id, int ex, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int job_failed(struct wk_state *st, const char *id, int ex, const char *fmt, ...)
{
	struct wire_rec r = { 0 };
	char *why;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&why, fmt, ap) < 0)
		why = NULL;
	va_end(ap);
	if (wire_add(&r, "attempt", id) < 0 || wire_add(&r, "state", wire_state_name(WS_FAILED)) < 0 ||
	    wire_add(&r, "reason", why ? why : "worker: out of memory") < 0 ||
	    wk_set_ll(&r, "finished", now_ms()) < 0 || wk_state_write(st, id, &r) < 0)
		fprintf(stderr, "%s: attempts/%s.state: %s\n", PROG, id, strerror(errno));
	wire_free(&r);
	ex = wk_err(ex, "%s", why ? why : "out of memory");
	free(why);
	return ex;
}

static int job_lock(int adir, int *fd)
{
	long long until = mono_ms() + SLURM_LOCK_WAIT_MS;
	int got;

	while ((got = lock_at(adir, "lock", LOCK_EX, 1, fd)) == 0 && mono_ms() < until)
		sleep_ms(50);
	return got;
}

int cmd_slurm_job(struct wk_state *st, int argc, char **argv)
{
	struct wire_rec rec = { 0 }, now = { 0 };
	const char *why = NULL;
	struct launch l;
	struct spec sp;
	char *bad = NULL, *buf = NULL;
	size_t len, ngpu = 0;
	long long *gpu = NULL;
	int got;

	sigset_t usr;

	/* SIGUSR1 and SIGUSR2 (scancel --signal, a pause or a cancel)
	 * wait for the supervisor's signalfd: their default would kill
	 * us before it is there. */
	sigemptyset(&usr);
	sigaddset(&usr, SIGUSR1);
	sigaddset(&usr, SIGUSR2);
	if (sigprocmask(SIG_BLOCK, &usr, NULL) < 0)
		return wk_errsys(EX_OSERR_, "sigprocmask");
	if (argc != 1 || !wk_id_ok(argv[0]))
		return wk_err(EX_USAGE_, "usage: %s [-d STATE_DIR] slurm-job ID", PROG);
	memset(&l, 0, sizeof l);
	memset(&sp, 0, sizeof sp);
	l.st = st;
	l.sp = &sp;
	l.lockfd = -1;
	l.adir = openat(st->attfd, argv[0], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (l.adir < 0)
		return wk_errsys(EX_NOINPUT_, "%s/attempts/%s", st->path, argv[0]);
	got = job_lock(l.adir, &l.lockfd);
	if (got != 1)
		return got == 0 ? wk_err(EX_TEMPFAIL_, "attempts/%s/lock: still held after %d s",
					 argv[0], SLURM_LOCK_WAIT_MS / 1000)
				: wk_errsys(EX_OSERR_, "attempts/%s/lock", argv[0]);
	/* Ended while it waited in Slurm (cancelled): nothing to run. */
	got = wk_state_read(st, argv[0], &now);
	if (got == 1 && wk_state_final(wire_get(&now, "state"))) {
		wire_free(&now);
		return 0;
	}
	wire_free(&now);
	if (read_capped(l.adir, "spec", WIRE_MAX_RECORD, &buf, &len) < 0)
		return job_failed(st, argv[0], EX_OSERR_, "attempts/%s/spec: %s", argv[0],
				  strerror(errno));
	got = wire_parse(buf, len, &rec, &why) > 0;
	free(buf);
	sp.rec = rec;
	if (!got || spec_check(&sp, &bad) < 0)
		return job_failed(st, argv[0], EX_DATAERR_, "attempts/%s/spec: %s", argv[0],
				  bad ? bad : why ? why : "no record");
	if (allocation_cards(&l, &gpu, &ngpu) < 0)
		return job_failed(st, argv[0], EX_OSERR_, "worker: out of memory");
	/* The cards are Slurm's allocation: no leases to take. */
	free(sp.gpu);
	sp.gpu = gpu;
	sp.ngpu = ngpu;
	l.lease = calloc(ngpu + 1, sizeof *l.lease);
	l.mark = calloc(ngpu + 1, sizeof *l.mark);
	for (size_t i = 0; l.lease && l.mark && i < ngpu; i++)
		l.lease[i] = l.mark[i] = -1;
	l.adir_path = xasprintf("%s/attempts/%s", st->path, sp.id);
	l.log_path = xasprintf("%s/attempts/%s/log", st->path, sp.id);
	l.slurm_job = getenv("SLURM_JOB_ID");
	l.host = getenv("SLURMD_NODENAME");
	l.in_slurm = 1;
	if (sp.cwd)
		l.cwd = wk_expand_path(sp.cwd, 0);
	if (!l.lease || !l.mark || !l.adir_path || !l.log_path || (sp.cwd && !l.cwd) ||
	    job_env(&l) < 0)
		return job_failed(st, argv[0], EX_OSERR_, "worker: out of memory");
	/* In the batch step's own process: Slurm sees the job's end as
	 * the end of this process. */
	supervise(&l, -1);
}

/* ---- status, pause, cancel ------------------------------------------------ */

/*
 * What squeue says of all our jobs (`squeue --me -t all`, lines "NAME
 * ID STATE"), kept for a second in this process: `status` asks about
 * every attempt of a node at once, `cancel` and `log -f` again and
 * again while they wait, and slurmctld is everybody's.
 */
#define LIST_KEEP_MS 1000

static char *list;
static long long list_at;

static int list_fetch(void)
{
	char *argv[] = { "squeue", "-h", "-t", "all", "--me", "-o", "%j %i %T", NULL };
	char *out = NULL, *why = NULL;

	if (run_cmd(argv, &out, &why) < 0) {
		free(why);
		return -1;
	}
	free(list);
	list = out;
	list_at = mono_ms();
	return 0;
}

int slurm_alive(const struct wire_rec *r, char **why)
{
	const char *id = wire_get(r, "attempt"), *want = wire_get(r, "slurm_job");
	long long asked = mono_ms();
	char *name, *jobid = NULL, *state = NULL;
	int found = 0, alive = 0;

	*why = NULL;
	if (!id)
		return 0;
	if (!(name = xasprintf("cb-%s", id)))
		return -1;
	/* A job not alive in a list older than this question is looked
	 * for in a new one: it may have been submitted since. */
	for (int fresh = 0; fresh < 2 && !alive; fresh++) {
		if (fresh && list_at >= asked)
			break;
		free(jobid);
		free(state);
		jobid = state = NULL;
		if ((!list || fresh || mono_ms() - list_at >= LIST_KEEP_MS) && list_fetch() < 0)
			found = -1;     /* Slurm cannot be asked: nothing is decided */
		else
			found = slurm_squeue_find(list, strlen(list), name, &jobid, &state);
		if (found < 0) {
			free(name);
			return -1;
		}
		alive = found && (!want || !strcmp(want, jobid)) && slurm_state_alive(state);
	}
	if (!alive)
		*why = found ? xasprintf("Slurm job %s ended %s without a final status", jobid, state)
			     : xasprintf("Slurm job %s is gone without a final status",
					 want ? want : "(none)");
	free(name);
	free(jobid);
	free(state);
	return alive;
}

int slurm_signal(const struct wire_rec *r, const char *sig, char **why)
{
	const char *job = wire_get(r, "slurm_job");
	char *s = xasprintf("--signal=%s", sig), *out = NULL;
	char *argv[] = { "scancel", "--batch", s, (char *)job, NULL };
	int rc;

	*why = NULL;
	if (!job || !s) {
		free(s);
		return 0;
	}
	rc = run_cmd(argv, &out, why);
	free(out);
	free(s);
	return rc;
}

int slurm_cancel_pending(struct wk_state *st, const char *id, struct wire_rec *r)
{
	char *job = wire_get(r, "slurm_job") ? strdup(wire_get(r, "slurm_job")) : NULL;
	char *out = NULL, *why = NULL;
	char *argv[] = { "scancel", job, NULL };
	int adir, fd = -1, got, rc = 0;

	/* Only a job that never started: one that runs stops itself
	 * (SIGUSR2), and a lock on another machine may not be seen. */
	if (!job || !wk_state_is(r, WS_STARTING)) {
		free(job);
		return 0;
	}
	adir = openat(st->attfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	got = adir < 0 ? -1 : lock_at(adir, "lock", LOCK_EX, 0, &fd);
	if (adir >= 0)
		close(adir);
	if (got != 1) {
		free(job);
		return got < 0 ? -1 : 0;        /* it is starting: SIGUSR2 stops it */
	}
	/* Pending in Slurm, and the job cannot start while we hold its
	 * lock: recorded cancelled first (a job that starts after this
	 * finds it final and runs nothing), then taken out of Slurm. */
	wire_free(r);
	got = wk_state_read(st, id, r);
	if (got == 1 && wk_state_is(r, WS_STARTING)) {
		if (wire_set(r, "state", wire_state_name(WS_CANCELLED)) < 0 ||
		    wire_set(r, "reason", "cancelled") < 0 || wk_set_ll(r, "finished", now_ms()) < 0 ||
		    wk_state_write(st, id, r) < 0)
			rc = -1;
		else if (run_cmd(argv, &out, &why) < 0)
			fprintf(stderr, "%s: %s\n", PROG, why ? why : "scancel failed");
	}
	close(fd);
	free(out);
	free(why);
	free(job);
	return got < 0 ? -1 : rc;
}

/* ---- gpus --------------------------------------------------------------- */

/* "gpu:4", "gpu:a100:4(S:0-1)", "gpu:2(IDX:0-1)", "gpu:a100:1(IDX:3)",
 * several of them separated by commas (also inside the parentheses):
 * the GPU entries' total count, their type (the first one's, or NULL),
 * and, when USED is set, the indices in IDX:... marked in MARK[0..cap). */
static long long gres_gpus(const char *s, char **type, unsigned char *mark, size_t cap)
{
	long long total = 0;

	if (type)
		*type = NULL;
	while (s && *s) {
		const char *end = s;
		int depth = 0;

		for (; *end && (depth || *end != ','); end++)
			depth += *end == '(' ? 1 : *end == ')' ? -1 : 0;
		if (!strncmp(s, "gpu", 3) && (s[3] == ':' || s[3] == '(' || s == end - 3)) {
			const char *paren = memchr(s, '(', (size_t)(end - s)), *stop = paren ? paren : end;
			const char *colon = NULL;
			long long k = 0;

			for (const char *p = s; p < stop; p++)
				if (*p == ':')
					colon = p;
			if (colon && colon > s + 3 && type && !*type)
				*type = strndup(s + 4, (size_t)(colon - s - 4));
			if (colon) {
				k = strtoll(colon + 1, NULL, 10);
				if (k > SLURM_NODE_GPUS_MAX)
					k = SLURM_NODE_GPUS_MAX + 1;
			}
			/* Capped: a node with more is skipped, and no sum overflows. */
			if (k > 0)
				total = total + k > SLURM_NODE_GPUS_MAX ? SLURM_NODE_GPUS_MAX + 1 : total + k;
			if (mark && paren && !strncmp(paren, "(IDX:", 5)) {
				for (const char *p = paren + 5; p < end && *p >= '0' && *p <= '9';) {
					char *e;
					long long a = strtoll(p, &e, 10), b = a;

					if (*e == '-')
						b = strtoll(e + 1, &e, 10);
					for (long long i = a; i <= b && i >= 0 && (size_t)i < cap; i++)
						mark[i] = 1;
					p = *e == ',' ? e + 1 : e;
				}
			}
		}
		s = *end ? end + 1 : end;
	}
	return total;
}

/* A node state that takes no jobs. */
static int node_closed(const char *state)
{
	static const char *const closed[] = { "down", "drain", "fail", "maint", "reboot",
					      "unknown", "power", "future", "inval", "no_respond",
					      "not_responding" };

	for (size_t i = 0; i < sizeof closed / sizeof closed[0]; i++)
		if (strstr(state, closed[i]))
			return 1;
	return 0;
}

/* A field of a sinfo line, blanks trimmed: [S, S+N). */
static void trim(const char **s, size_t *n)
{
	while (*n && **s == ' ') {
		(*s)++;
		(*n)--;
	}
	while (*n && (*s)[*n - 1] == ' ')
		(*n)--;
}

void slurm_cards_free(struct slurm_card *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].host);
		free(v[i].type);
	}
	free(v);
}

int slurm_parse_sinfo(const char *buf, size_t len, struct slurm_card **cards, size_t *ncards)
{
	const char *end = buf + len;
	struct slurm_card *v = NULL;
	size_t n = 0, cap = 0;

	*cards = NULL;
	*ncards = 0;
	while (buf < end) {
		const char *eol = memchr(buf, '\n', (size_t)(end - buf)), *p = buf;
		const char *f[4];
		size_t fl[4], nf = 0;
		char *gres = NULL, *used = NULL, *state = NULL, *type = NULL;
		unsigned char *mark = NULL;
		long long total;

		if (!eol)
			eol = end;
		/* HOST|GRES|GRESUSED|STATE|: each field ended by '|'. */
		while (nf < 4 && p < eol) {
			const char *bar = memchr(p, '|', (size_t)(eol - p));

			if (!bar)
				break;
			f[nf] = p;
			fl[nf] = (size_t)(bar - p);
			trim(&f[nf], &fl[nf]);
			nf++;
			p = bar + 1;
		}
		buf = eol < end ? eol + 1 : end;
		if (nf < 4 || !wk_host_ok(f[0], fl[0]) || memchr(f[1], '\0', fl[1]) ||
		    memchr(f[2], '\0', fl[2]) || memchr(f[3], '\0', fl[3]))
			continue;
		if (!(gres = strndup(f[1], fl[1])) || !(used = strndup(f[2], fl[2])) ||
		    !(state = strndup(f[3], fl[3])))
			goto oom;
		total = gres_gpus(gres, &type, NULL, 0);
		if (total > 0 && total <= SLURM_NODE_GPUS_MAX && (mark = calloc((size_t)total, 1))) {
			gres_gpus(used, NULL, mark, (size_t)total);
			for (long long i = 0; i < total; i++) {
				if (n == cap) {
					size_t nc = cap ? cap * 2 : 16;
					struct slurm_card *nv = realloc(v, nc * sizeof *nv);

					if (!nv)
						goto oom;
					v = nv;
					cap = nc;
				}
				v[n] = (struct slurm_card){ .index = i, .busy = mark[i] || node_closed(state) };
				if (!(v[n].host = strndup(f[0], fl[0])) || (type && !(v[n].type = strdup(type)))) {
					n++;
					goto oom;
				}
				n++;
			}
		} else if (total > 0 && total <= SLURM_NODE_GPUS_MAX) {
			goto oom;
		}
		free(mark);
		free(type);
		free(gres);
		free(used);
		free(state);
		continue;
oom:
		free(mark);
		free(type);
		free(gres);
		free(used);
		free(state);
		slurm_cards_free(v, n);
		return -1;
	}
	*cards = v;
	*ncards = n;
	return 0;
}

int slurm_gpus(struct wk_state *st)
{
	char *part = xasprintf("--partition=%s", st->slurm->partition), *out = NULL, *why = NULL;
	char *argv[] = { "sinfo", "-h", "-N", part, "-O", "NodeHost:|,Gres:|,GresUsed:|,StateLong:|",
			 NULL };
	struct slurm_card *v;
	size_t n;
	int rc = 0;

	if (!part || run_cmd(argv, &out, &why) < 0) {
		struct wire_rec r = { 0 };

		if (wire_add(&r, "error", why ? why : "out of memory") == 0)
			wk_print(&r);
		wire_free(&r);
		rc = wk_err(EX_UNAVAILABLE_, "%s", why ? why : "out of memory");
		free(why);
		free(part);
		return rc;
	}
	free(part);
	if (slurm_parse_sinfo(out, strlen(out), &v, &n) < 0) {
		free(out);
		return wk_errsys(EX_OSERR_, "out of memory");
	}
	free(out);
	/* Numbered through the partition, in sinfo's order. */
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct wire_rec r = { 0 };

		if (wk_set_ll(&r, "index", (long long)i) < 0 ||
		    wire_addf(&r, "uuid", "slurm-%s-%lld", v[i].host, v[i].index) < 0 ||
		    wire_addf(&r, "name", "%s gpu %lld%s%s", v[i].host, v[i].index, v[i].type ? " " : "",
			      v[i].type ? v[i].type : "") < 0 ||
		    wire_add(&r, "memory_used_mib", "0") < 0 || wire_add(&r, "memory_total_mib", "") < 0 ||
		    wire_add(&r, "utilization", "0") < 0 || wk_set_ll(&r, "processes", v[i].busy) < 0 ||
		    wire_add(&r, "lease", "") < 0 || wire_add(&r, "host", v[i].host) < 0 ||
		    wk_print(&r) < 0)
			rc = wk_errsys(EX_OSERR_, "stdout");
		wire_free(&r);
	}
	slurm_cards_free(v, n);
	(void)st;
	return rc;
}
