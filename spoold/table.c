/*
 * table.c - the transitions of a job: states x events -> state, edit.
 * The design is in table.h; AGENTS.md "Queue states and transitions"
 * is the same table in words (tests/unit/test_table.c compares them).
 */
#include <stdlib.h>
#include <string.h>

#include "table.h"

static int set_str(char **dst, const char *src)
{
	char *s = NULL;

	if (src && !(s = strdup(src)))
		return -1;
	free(*dst);
	*dst = s;
	return 0;
}

/* J's reason becomes the malloc'd R (NULL: out of memory). */
static int set_reason(struct job *j, char *r)
{
	if (!r)
		return -1;
	free(j->reason);
	j->reason = r;
	return 1;
}

/* ---- the scheduler and the launch ------------------------------------ */

static int edit_place(struct job *j, const struct ev_arg *e, long long now)
{
	struct attempt *a = job_new_attempt(j);

	(void)now;
	if (!a || !(a->id = attempt_id(e->spool_id, j->id, a->n)) || !(a->node = strdup(e->node)) ||
	    (e->ngpus && !(a->gpus = malloc(e->ngpus * sizeof *a->gpus))))
		return -1;
	if (e->ngpus)
		memcpy(a->gpus, e->gpus, e->ngpus * sizeof *e->gpus);
	a->ngpus = e->ngpus;
	a->state = AS_LAUNCHING;
	if (!e->nafter)
		return set_reason(j, xasprintf("launching on %s", a->node));
	/* Staged: the node starts it when the attempts it waits for end. */
	a->state = AS_STAGED;
	if (!(a->staged_after = calloc(e->nafter, sizeof *a->staged_after)))
		return -1;
	for (; a->nstaged_after < e->nafter; a->nstaged_after++)
		if (!(a->staged_after[a->nstaged_after] = strdup(e->after[a->nstaged_after])))
			return -1;
	return set_reason(j, e->why ? strdup(e->why) : xasprintf("staged on %s", a->node));
}

/* Back to its place in the queue (same priority, ID and queued_at). */
static int edit_busy(struct job *j, const struct ev_arg *e, long long now)
{
	struct attempt *a = job_last_attempt(j);

	(void)now;
	a->state = AS_ABORTED;
	if (set_str(&a->reason, e->why) < 0)
		return -1;
	return set_reason(j, xasprintf("waiting: %s", e->why));
}

/* A staged attempt that never started: back to its place, as busy. */
static int edit_unstaged(struct job *j, const struct ev_arg *e, long long now)
{
	const char *why = e->w ? wire_get(e->w, "reason") : NULL;

	return edit_busy(j, &(struct ev_arg){ .why = why && *why ? why : "unstaged" }, now);
}

static int edit_refused(struct job *j, const struct ev_arg *e, long long now)
{
	struct attempt *a = job_last_attempt(j);
	char *msg = xasprintf("launch refused: %s", e->why && *e->why ? e->why : "bad spec");

	a->state = AS_FAILED;
	a->finished = j->finished = now;
	if (!msg || set_str(&a->reason, msg) < 0) {
		free(msg);
		return -1;
	}
	return set_reason(j, msg);
}

static int edit_wait(struct job *j, const struct ev_arg *e, long long now)
{
	char *r = xasprintf("waiting: %s", e->why);

	(void)now;
	if (r && j->reason && !strcmp(j->reason, r)) {
		free(r);
		return 0;
	}
	return set_reason(j, r);
}

/* Its checkpoint is to be copied to node E->node (checkpoint_transfer,
 * moves.c): that node is named among its copies first, so that a copy
 * begun there is removed when the job ends, whatever happens after. */
static int edit_move(struct job *j, const struct ev_arg *e, long long now)
{
	char **v;
	size_t i;

	(void)now;
	for (i = 0; i < j->nck_copies && strcmp(j->ck_copies[i], e->node); i++)
		;
	if (i == j->nck_copies) {
		if (!(v = realloc(j->ck_copies, (j->nck_copies + 1) * sizeof *v)))
			return -1;
		j->ck_copies = v;
		if (!(v[j->nck_copies] = strdup(e->node)))
			return -1;
		j->nck_copies++;
	}
	return set_reason(j, xasprintf("transferring checkpoint from %s to %s",
				       j->checkpoint_node ? j->checkpoint_node : "its node", e->node));
}

/* The copy on E->node is whole and checked (E->path): the job resumes
 * from it there.  The checkpoint it came from stays where it was. */
static int edit_moved(struct job *j, const struct ev_arg *e, long long now)
{
	char *from = j->checkpoint_node ? strdup(j->checkpoint_node) : strdup("its node");
	int r;

	(void)now;
	if (!from || set_str(&j->checkpoint, e->path) < 0 || set_str(&j->checkpoint_node, e->node) < 0) {
		free(from);
		return -1;
	}
	r = set_reason(j, xasprintf("checkpoint copied from %s; resumes on %s", from, e->node));
	free(from);
	return r;
}

/* Its reason, if not that already: E's, or what the job asks. */
static int edit_blocked(struct job *j, const struct ev_arg *e, long long now)
{
	char *r = e->why ? strdup(e->why) : queued_reason(j, now);

	if (r && j->reason && !strcmp(j->reason, r)) {
		free(r);
		return 0;
	}
	return set_reason(j, r);
}

static int edit_dependency(struct job *j, const struct ev_arg *e, long long now)
{
	j->finished = now;
	return set_reason(j, strdup(e->why));
}

/* ---- what the node says of the attempt ------------------------------- */

static int set_uuids(struct attempt *a, const struct wire_rec *w)
{
	size_t n = 0;

	for (size_t i = 0; i < w->n; i++)
		n += !strcmp(w->f[i].key, "uuid");
	if (!n)
		return 0;
	for (size_t i = 0; i < a->nuuids; i++)
		free(a->uuids[i]);
	free(a->uuids);
	a->nuuids = 0;
	if (!(a->uuids = calloc(n, sizeof *a->uuids)))
		return -1;
	for (size_t i = 0; i < w->n; i++)
		if (!strcmp(w->f[i].key, "uuid") && !(a->uuids[a->nuuids++] = strdup(w->f[i].val)))
			return -1;
	return 0;
}

/* A Slurm node's word (W has `host`): the cards are those Slurm gave
 * the job on that host, as the job saw them (worker/slurm.c). */
static int set_slurm(struct attempt *a, const struct wire_rec *w)
{
	size_t n = 0;
	int *g;

	if (wire_get(w, "slurm_job") && set_str(&a->slurm_job, wire_get(w, "slurm_job")) < 0)
		return -1;
	if (!wire_get(w, "host"))
		return 0;
	if (set_str(&a->host, wire_get(w, "host")) < 0)
		return -1;
	for (size_t i = 0; i < w->n; i++)
		n += !strcmp(w->f[i].key, "gpu");
	if (!(g = calloc(n + 1, sizeof *g)))
		return -1;
	n = 0;
	for (size_t i = 0; i < w->n; i++) {
		struct wire_rec one = { (struct wire_field *)&w->f[i], 1, 1 };
		long long v;

		if (!strcmp(w->f[i].key, "gpu") && wire_get_ll(&one, "gpu", &v) == 0 && v >= 0 &&
		    v <= GPU_INDEX_MAX)
			g[n++] = (int)v;
	}
	free(a->gpus);
	a->gpus = g;
	a->ngpus = n;
	return 0;
}

/* The attempt takes what the node's record W says, in state AS. */
static int take_record(struct attempt *a, enum att_state as, const struct ev_arg *e)
{
	const struct wire_rec *w = e->w;
	const char *reason = e->why ? e->why : w ? wire_get(w, "reason") : NULL;
	long long v;

	a->state = as;
	if (!w)
		return reason ? set_str(&a->reason, reason) : 0;
	if (set_uuids(a, w) < 0 || set_slurm(a, w) < 0)
		return -1;
	if (wire_get_ll(w, "started", &v) == 0)
		a->started = v;
	if (wire_get_ll(w, "finished", &v) == 0)
		a->finished = v;
	if (wire_get_ll(w, "exit_code", &v) == 0) {
		a->exit_code = v;
		a->has_exit = 1;
	}
	if ((reason && set_str(&a->reason, reason) < 0) ||
	    (wire_get(w, "log") && set_str(&a->log, wire_get(w, "log")) < 0) ||
	    (wire_get(w, "checkpoint") && set_str(&a->checkpoint, wire_get(w, "checkpoint")) < 0))
		return -1;
	return 0;
}

/* Running or pausing, as the node says: written once, when it is new. */
static int edit_alive(struct job *j, const struct ev_arg *e, enum att_state as)
{
	struct attempt *a = job_last_attempt(j);

	if (a->state == as && a->started && j->state == (as == AS_RUNNING ? JS_RUNNING : JS_PAUSING))
		return 0;
	if (take_record(a, as, e) < 0)
		return -1;
	return 1;
}

static int edit_started(struct job *j, const struct ev_arg *e, long long now)
{
	int r = edit_alive(j, e, AS_RUNNING);

	if (r < 1)
		return r;
	j->started = job_last_attempt(j)->started ? job_last_attempt(j)->started : now;
	return set_reason(j, xasprintf("running on %s", job_last_attempt(j)->node));
}

static int edit_pausing(struct job *j, const struct ev_arg *e, long long now)
{
	int r = edit_alive(j, e, AS_PAUSING);
	const char *why = job_last_attempt(j)->reason;

	(void)now;
	if (r < 1)
		return r;
	return set_reason(j, strdup(why ? why : "pause requested"));
}

/* The attempt is over: its end time, and the job's when it is final. */
static int ended(struct job *j, enum att_state as, const struct ev_arg *e, long long now,
		 int final)
{
	struct attempt *a = job_last_attempt(j);

	if (take_record(a, as, e) < 0)
		return -1;
	if (!a->finished)
		a->finished = now;
	if (final)
		j->finished = a->finished;
	return 0;
}

/* The attempt saved a checkpoint on its node: the job resumes from it
 * there; WHY_FMT, with the node's name, says what comes next. */
static int checkpointed(struct job *j, const struct ev_arg *e, long long now,
			const char *why_fmt)
{
	struct attempt *a = job_last_attempt(j);

	if (ended(j, AS_PAUSED, e, now, 0) < 0 || set_str(&j->checkpoint, a->checkpoint) < 0 ||
	    set_str(&j->checkpoint_node, a->node) < 0)
		return -1;
	return set_reason(j, xasprintf(why_fmt, a->node));
}

static int edit_paused(struct job *j, const struct ev_arg *e, long long now)
{
	return checkpointed(j, e, now, "checkpoint saved on %s; cardbaton resume continues it");
}

/* At its time limit, or for a yield (a preemption, a drain: the node's
 * reason says which). */
static int edit_paused_at_limit(struct job *j, const struct ev_arg *e, long long now)
{
	const char *why = e->w ? wire_get(e->w, "requeue") : NULL;

	if (why) {
		const struct attempt *a = job_last_attempt(j);

		if (checkpointed(j, e, now, "%s") < 0)
			return -1;
		return set_reason(j, xasprintf("%s; resumes on %s", a->reason ? a->reason :
					       "checkpoint saved", a->node));
	}
	return checkpointed(j, e, now, "time limit reached, checkpoint saved; resumes on %s");
}

static int edit_final(struct job *j, const struct ev_arg *e, long long now, enum att_state as,
		      const char *dflt)
{
	struct attempt *a = job_last_attempt(j);

	if (ended(j, as, e, now, 1) < 0)
		return -1;
	/* Cancelled: by the user, unless the node says who else it was
	 * (a signal to the worker: "cancelled: the worker got SIGTERM from
	 * Slurm ..."). */
	if (as == AS_CANCELLED)
		return set_reason(j, strdup(a->reason && !strncmp(a->reason, "cancelled: ", 11)
					    ? a->reason : "cancelled by user"));
	return set_reason(j, strdup(a->reason ? a->reason : dflt));
}

static int edit_succeeded(struct job *j, const struct ev_arg *e, long long now)
{
	return edit_final(j, e, now, AS_SUCCEEDED, "exit status 0");
}

static int edit_failed(struct job *j, const struct ev_arg *e, long long now)
{
	return edit_final(j, e, now, AS_FAILED, "failed");
}

static int edit_cancelled(struct job *j, const struct ev_arg *e, long long now)
{
	return edit_final(j, e, now, AS_CANCELLED, "cancelled by user");
}

static int edit_lost(struct job *j, const struct ev_arg *e, long long now)
{
	return edit_final(j, e, now, AS_LOST, "lost");
}

/* ---- requests --------------------------------------------------------- */

static int edit_pause_asked(struct job *j, const struct ev_arg *e, long long now)
{
	(void)now;
	job_last_attempt(j)->state = AS_PAUSING;
	return set_reason(j, strdup(e->why ? e->why : "pause requested"));
}

/* A job that never ran (queued) or no longer runs (paused). */
static int edit_cancel_idle(struct job *j, const struct ev_arg *e, long long now)
{
	(void)e;
	j->finished = now;
	return set_reason(j, strdup("cancelled by user"));
}

static int edit_resume(struct job *j, const struct ev_arg *e, long long now)
{
	(void)e;
	j->queued_at = now;
	return set_reason(j, xasprintf("resuming on %s",
				       j->checkpoint_node ? j->checkpoint_node : "its node"));
}

static int edit_promote(struct job *j, const struct ev_arg *e, long long now)
{
	(void)now;
	if (j->priority == e->prio)
		return 0;
	j->priority = e->prio;
	return 1;
}

static int edit_hold(struct job *j, const struct ev_arg *e, long long now)
{
	(void)e;
	(void)now;
	if (j->def.hold)
		return 0;
	j->def.hold = 1;
	j->def.set |= JF_HOLD;
	return set_reason(j, strdup("held"));
}

static int edit_release(struct job *j, const struct ev_arg *e, long long now)
{
	(void)e;
	if (!j->def.hold)
		return 0;
	j->def.hold = 0;
	j->def.set &= ~(unsigned)JF_HOLD;
	return set_reason(j, queued_reason(j, now));
}

/* ---- the table ---------------------------------------------------------- */

#define ROW(ev, state, fn) [ev] = { state, fn, 1 }

/* What the node says of an attempt, alike for a job running or pausing. */
#define NODE_SAYS \
	ROW(EV_STARTED, JS_RUNNING, edit_started), \
	ROW(EV_PAUSING, JS_PAUSING, edit_pausing), \
	ROW(EV_PAUSED, JS_PAUSED, edit_paused), \
	ROW(EV_PAUSED_AT_LIMIT, JS_QUEUED, edit_paused_at_limit), \
	ROW(EV_SUCCEEDED, JS_SUCCEEDED, edit_succeeded), \
	ROW(EV_FAILED, JS_FAILED, edit_failed), \
	ROW(EV_CANCELLED, JS_CANCELLED, edit_cancelled), \
	ROW(EV_LOST, JS_LOST, edit_lost), \
	ROW(EV_UNSTAGED, JS_QUEUED, edit_unstaged)

static const struct transition rows[JS_N][EV_N] = {
	[JS_QUEUED] = {
		ROW(EV_PLACE, JS_RUNNING, edit_place),
		ROW(EV_CANCEL, JS_CANCELLED, edit_cancel_idle),
		ROW(EV_PROMOTE, JS_QUEUED, edit_promote),
		ROW(EV_HOLD, JS_QUEUED, edit_hold),
		ROW(EV_RELEASE, JS_QUEUED, edit_release),
		ROW(EV_WAIT, JS_QUEUED, edit_wait),
		ROW(EV_MOVE, JS_QUEUED, edit_move),
		ROW(EV_MOVED, JS_QUEUED, edit_moved),
		ROW(EV_BLOCKED, JS_QUEUED, edit_blocked),
		ROW(EV_DEPENDENCY, JS_CANCELLED, edit_dependency),
	},
	[JS_RUNNING] = {
		ROW(EV_BUSY, JS_QUEUED, edit_busy),
		ROW(EV_REFUSED, JS_FAILED, edit_refused),
		ROW(EV_PAUSE_ASKED, JS_PAUSING, edit_pause_asked),
		ROW(EV_CANCEL, JS_RUNNING, NULL),
		ROW(EV_PAUSE, JS_RUNNING, NULL),
		NODE_SAYS,
	},
	[JS_PAUSING] = {
		ROW(EV_CANCEL, JS_PAUSING, NULL),
		NODE_SAYS,
	},
	[JS_PAUSED] = {
		ROW(EV_CANCEL, JS_CANCELLED, edit_cancel_idle),
		ROW(EV_RESUME, JS_QUEUED, edit_resume),
	},
};

static const char *const event_names[EV_N] = {
	[EV_PLACE] = "place", [EV_BUSY] = "busy", [EV_REFUSED] = "refused",
	[EV_STARTED] = "started", [EV_PAUSE_ASKED] = "pause-asked", [EV_PAUSING] = "pausing",
	[EV_PAUSED] = "paused", [EV_PAUSED_AT_LIMIT] = "paused-at-limit",
	[EV_SUCCEEDED] = "succeeded", [EV_FAILED] = "failed", [EV_CANCELLED] = "cancelled",
	[EV_LOST] = "lost", [EV_CANCEL] = "cancel", [EV_PAUSE] = "pause",
	[EV_RESUME] = "resume", [EV_PROMOTE] = "promote", [EV_HOLD] = "hold",
	[EV_RELEASE] = "release", [EV_WAIT] = "wait", [EV_BLOCKED] = "blocked",
	[EV_DEPENDENCY] = "dependency", [EV_UNSTAGED] = "unstaged", [EV_MOVE] = "move",
	[EV_MOVED] = "moved",
};

const struct transition *transition(enum job_state s, enum job_event ev)
{
	if ((unsigned)s >= JS_N || (unsigned)ev >= EV_N || !rows[s][ev].row)
		return NULL;
	return &rows[s][ev];
}

const char *job_event_name(enum job_event ev)
{
	return (unsigned)ev < EV_N ? event_names[ev] : "?";
}

enum job_event node_event(enum wire_state s, int at_limit)
{
	switch (s) {
	case WS_RUNNING:
		return EV_STARTED;
	case WS_PAUSING:
		return EV_PAUSING;
	case WS_PAUSED:
		return at_limit ? EV_PAUSED_AT_LIMIT : EV_PAUSED;
	case WS_SUCCEEDED:
		return EV_SUCCEEDED;
	case WS_FAILED:
		return EV_FAILED;
	case WS_CANCELLED:
		return EV_CANCELLED;
	case WS_LOST:
	case WS_UNKNOWN:
		return EV_LOST;
	case WS_UNSTAGED:
		return EV_UNSTAGED;
	default:
		return EV_N;    /* starting, busy, staged: nothing decided yet */
	}
}

int transition_apply(const struct transition *t, struct job *j, const struct ev_arg *a,
		     long long now)
{
	int r = t->edit ? t->edit(j, a, now) : 0;

	if (r < 0)
		return -1;
	if (r == 0 && t->to == j->state)
		return 0;
	j->state = t->to;
	return 1;
}
