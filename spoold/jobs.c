/*
 * jobs.c - the daemon's side of every transition of a job.
 *
 * Accepting (new/ -> incoming/ -> queued/, batched) makes a record;
 * from then on a record changes in one place, job_step: the event's
 * row of the table (table.c, AGENTS.md) is applied to the record,
 * which is loaded once and staged once for the turn's commit (turn.c:
 * new copy first, old name removed second, LAYOUT.md §6), and followed:
 * the queue and the running table mirror the record's state, and the
 * node is asked what the new state asks of it (launch, cancel, pause)
 * once the record is durable (an effect, run after the commit).
 * The attempt ID is written into the record before the node is asked
 * to launch it, so a crash anywhere repeats the same launch, which the
 * worker answers idempotently (LAYOUT.md §8).  Nothing here waits for
 * a node: its answers come back as events (stream.c, acall.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spoold.h"
#include "table.h"

static void cancel_running(struct daemon *d, struct rent *e);
static void attempt_over(struct daemon *d, struct rent *e);
static int send_launch(struct daemon *d, struct rent *e);

/* ---- launching --------------------------------------------------------- */

static int spec_add_job(const struct config *cfg, struct wire_rec *w, const struct job *j,
			const struct attempt *a, const struct node *n)
{
	const struct node_conf *nc = n->conf;
	size_t known = 0;
	const struct job_def *def = &j->def;
	int r = wire_add(w, "attempt", a->id);
	int resume = j->checkpoint && def->resume_command;
	/* A resume runs resume_command: a list as its argv, a string by sh -c. */
	char *const *argv = resume ? def->resume_argv : def->argv;
	size_t argc = resume ? def->resume_argc : def->argc;

	for (size_t i = 0; argv && i < argc; i++)
		r |= wire_add(w, "arg", argv[i]);
	if (!argv)
		r |= wire_add(w, "shell", resume ? def->resume_command : def->shell);
	/* A checkpoint of another node's, on a filesystem both mount: its
	 * path as this node sees it, checked there (checkpoint_on). */
	if (resume) {
		const struct node_conf *from = j->checkpoint_node ? config_node(cfg, j->checkpoint_node) : NULL;
		const char *fs = NULL;
		char *path = NULL;

		if (from && shared_fs_path(from, nc, j->checkpoint, &path, &fs) < 0)
			return -1;
		r |= wire_add(w, "checkpoint", path ? path : j->checkpoint);
		if (fs)
			r |= wire_add(w, "checkpoint_on", nc->name);
		free(path);
	}
	/* On a Slurm node the checkpoint is on the host the job last ran
	 * on: the resume goes there (sbatch --nodelist). */
	for (size_t i = j->natt; resume && nc->slurm_partition && i-- > 0;)
		if (&j->att[i] != a && j->att[i].host) {
			r |= wire_add(w, "nodelist", j->att[i].host);
			break;
		}
	if (def->cwd)
		r |= wire_add(w, "cwd", def->cwd);
	for (size_t i = 0; i < def->nenv; i++)
		r |= wire_add(w, "env", def->env[i]);
	for (size_t i = 0; i < a->ngpus; i++) {
		r |= wire_addf(w, "gpu", "%d", a->gpus[i]);
		known += card_uuid(n, a->gpus[i]) != NULL;
	}
	/* The cards' UUIDs as the snapshot has them, all or none: the
	 * worker takes their leases at once and checks them in its one
	 * query (LAYOUT.md section 8, step 3). */
	for (size_t i = 0; known == a->ngpus && i < a->ngpus; i++)
		r |= wire_add(w, "uuid", card_uuid(n, a->gpus[i]));
	r |= wire_addf(w, "idle_mib", "%lld", nc->idle_mib);
	r |= wire_addf(w, "timeout", "%lld", def->timeout_seconds);
	r |= wire_addf(w, "grace", "%lld",
		       def->set & JF_GRACE ? def->checkpoint_grace_seconds : (long long)DEFAULT_GRACE);
	r |= wire_addf(w, "resumable", "%d", def->resume_command ? 1 : 0);
	if (def->share)
		r |= wire_add(w, "share", "1") | wire_addf(w, "memory", "%lld", def->gpu_memory_mib) |
		     wire_addf(w, "max_jobs_per_gpu", "%lld", nc->max_jobs_per_gpu);
	/* Staged: the node starts it when these attempts end (the baton). */
	for (size_t i = 0; a->state == AS_STAGED && i < a->nstaged_after; i++)
		r |= wire_add(w, "after", a->staged_after[i]);
	return r ? -1 : 0;
}

static int load_running(struct daemon *d, long long id, struct job *j, char **name)
{
	struct cb_err err = { 0 };

	turn_settle(d, id);
	if (!(*name = name_plain(id)))
		return -1;
	if (spool_load(&d->sp, SD_RUNNING, *name, j, &err) < 0) {
		logmsg("%s", err.msg);
		cb_err_free(&err);
		free(*name);
		*name = NULL;
		return -1;
	}
	return 0;
}

/* J, just written into queued/, joins the in-memory queue. */
static int enqueue(struct daemon *d, const struct job *j)
{
	char *qname = name_queued(j->priority, j->id);
	struct qent *q = qname ? qent_from_job(d, j, qname) : NULL;
	int r = q && q_insert(d, q) == 0 ? 0 : -1;

	if (r < 0) {
		logmsg("job %lld: out of memory", j->id);
		qent_free(q);
	}
	free(qname);
	d->dirty = 1;
	return r;
}

/* ---- the one step of every transition (table.h) ----------------------- */

/* Where job ID's record is: its directory and name (malloc'd), or -1
 * when it is in none of queued/ running/ paused/. */
static int locate(struct daemon *d, long long id, enum spool_dir *dir, char **name)
{
	struct qent *qe = q_find(d, id);

	if (qe) {
		*dir = SD_QUEUED;
		return (*name = strdup(qe->name)) ? 0 : -1;
	}
	if (!(*name = name_plain(id)))
		return -1;
	if (r_find(d, id)) {
		*dir = SD_RUNNING;
		return 0;
	}
	if (faccessat(d->sp.dir[SD_PAUSED], *name, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		*dir = SD_PAUSED;
		return 0;
	}
	free(*name);
	*name = NULL;
	return -1;
}

static int running_state(enum job_state s)
{
	return s == JS_RUNNING || s == JS_PAUSING;
}

static int node_ev(enum job_event ev)
{
	return ev >= EV_STARTED && ev <= EV_LOST;
}

/* After J (job ID) went from FROM to its state through EV: the
 * daemon's memory follows the record, and the node is asked what the
 * new state asks of it. */
static void follow(struct daemon *d, struct job *j, enum job_state from, enum job_event ev,
		   const struct ev_arg *a, int written)
{
	struct qent *qe = q_find(d, j->id);
	struct rent *re = r_find(d, j->id);
	const struct attempt *at = job_last_attempt(j);
	/* A queued job whose place or eligibility changed is queued anew. */
	int requeue = ev == EV_PROMOTE || ev == EV_HOLD || ev == EV_RELEASE || ev == EV_MOVED;

	if (re && node_ev(ev)) {
		/* Launched onto a node drained meanwhile with --checkpoint:
		 * a pass asks it to yield. */
		d->dirty |= re->launching && d->nodes[re->node].drain_ck && re->resumable;
		re->launching = 0;
		re->heard_at = mono_now();
		re->started = j->started;
		/* A staged attempt that started holds its cards: the snapshot
		 * (which may show them free since their holder ended) says
		 * so, as for a launch. */
		if (re->staged) {
			r_unstaged(re);         /* it started, or is over */
			if (ev == EV_STARTED)
				leases_taken(&d->nodes[re->node], re);
		}
		/* A job that runs now is one a waiting job may be staged after. */
		d->dirty |= ev == EV_STARTED && d->nq;
	}
	if (ev == EV_PROMOTE && qe)
		logmsg("job %lld: priority %lld -> %lld", j->id, qe->prio, j->priority);
	else if (written && from == j->state)
		logmsg("job %lld: %s", j->id, j->reason ? j->reason : job_state_name(j->state));
	else if (written)
		logmsg("job %lld: %s%s%s", j->id, job_state_name(j->state), j->reason ? ": " : "",
		       j->reason ? j->reason : "");
	/* Its owner, for the calls about its checkpoint copies. */
	size_t user = qe ? qe->user : re ? re->user : 0;

	if (qe && (j->state != JS_QUEUED || requeue)) {
		/* Out of the queue (placed, cancelled): its copy, if one is
		 * on its way, is no longer wanted. */
		if (j->state != JS_QUEUED)
			move_stop(d, j->id);
		q_remove(d, qe);
		qent_free(qe);
		d->dirty = 1;
	}
	/* Queued again before the attempt is let go: a cancel kept for it
	 * then finds the job in the queue. */
	if (j->state == JS_QUEUED && (from != JS_QUEUED || requeue))
		enqueue(d, j);
	if (written && job_state_final(j->state) && !job_state_final(from) && j->nck_copies)
		drops_add(d, j, user);
	if (written && job_state_final(j->state) && !job_state_final(from))
		deps_ended(d, j->id, j->state);
	else if (written && j->state == JS_PAUSED && from != JS_PAUSED)
		deps_paused(d, j->id);
	if (re && running_state(from) && !running_state(j->state)) {
		/* The node's word that it ended hands its cards over; a
		 * launch that found them busy takes its leases back. */
		cards_freed(d, &d->nodes[re->node], re->aid, node_ev(ev));
		d->dirty = 1;
		attempt_over(d, re);
		re = NULL;
	}
	switch (ev) {
	case EV_PLACE:
		if (r_add(d, j, at->id, a->node_index, 1) < 0) {
			logmsg("job %lld: out of memory", j->id);
			return;
		}
		logmsg("job %lld: %sattempt %s on %s", j->id, at->state == AS_STAGED ? "staged " : "",
		       at->id, at->node);
		turn_after(d, &(struct effect){ EF_LAUNCH, j->id, at->id, NULL });
		break;
	case EV_CANCEL:
		if (re)
			turn_after(d, &(struct effect){ EF_CANCEL, j->id, re->aid, NULL });
		break;
	case EV_MOVE:
		if (qe && move_add(d, j, a->node_index, qe->user) < 0)
			logmsg("job %lld: out of memory: its checkpoint is not transferred", j->id);
		else if (qe)
			turn_after(d, &(struct effect){ EF_MOVE, j->id, NULL, NULL });
		break;
	case EV_PAUSE:
		if (!j->def.resume_command)
			logmsg("job %lld: pause: not resumable (no resume_command)", j->id);
		else if (re && re->staged && unstage_ask(d, re, "pause: it has not started") != 1)
			logmsg("job %lld: pause: staged, not started, and its node has not confirmed "
			       "it yet: ask again", j->id);
		else if (re)
			turn_after(d, &(struct effect){ EF_PAUSE, j->id, re->aid, NULL });
		break;
	default:
		break;
	}
}

/* What follow() asked for, once the record that asks it is durable
 * (turn.c): of the attempt named, if it is still the job's. */
void effect_run(struct daemon *d, const struct effect *ef)
{
	struct rent *re = ef->kind == EF_CTL_DONE ? NULL : r_find(d, ef->id);

	if (ef->kind == EF_MOVE) {
		move_start(d, ef->id);
		return;
	}
	if (ef->kind == EF_CTL_DONE) {
		if (unlinkat(d->sp.dir[SD_CTL], ef->name, 0) < 0 && errno != ENOENT)
			logmsg("ctl/%s: %s", ef->name, strerror(errno));
		return;
	}
	if (!re || strcmp(re->aid, ef->aid))
		return;
	switch (ef->kind) {
	case EF_LAUNCH:
		CRASH_POINT("launch: attempt recorded", NULL);
		send_launch(d, re);
		break;
	case EF_CANCEL:
		cancel_running(d, re);
		break;
	case EF_PAUSE:
		if (re->pause.pid > 0)
			logmsg("job %lld: pause: asked already", re->id);
		else if (acall_start(d, &d->nodes[re->node], re->user, &re->pause,
				     (const char *const[]){ "pause", re->aid, NULL }, NODE_QUERY_MS) == 0)
			CRASH_POINT("pause: node asked", NULL);
		break;
	default:
		break;
	}
}

/* The metrics of a step that changed J (from FROM, its last attempt
 * from AFROM; AS_N: a new one), and the count of paused jobs. */
static void count_step(struct daemon *d, const struct job *j, enum job_state from,
		       enum att_state afrom)
{
	const struct attempt *a = job_last_attempt(j);

	int live = afrom == AS_LAUNCHING || afrom == AS_STAGED || afrom == AS_RUNNING ||
		   afrom == AS_PAUSING;

	metrics_step(&d->metrics, j, from, afrom, a && a->node ? node_index(d, a->node) : d->nnodes);
	d->npaused += (j->state == JS_PAUSED) - (from == JS_PAUSED);
	tally_step(d, j, from, a && live && a->state != afrom && a->state >= AS_PAUSED &&
		   a->state <= AS_ABORTED);
}

/*
 * The one way a job's record changes: EV happens to job ID.  Its record
 * is loaded once, the table's row for its state applied (a node's word
 * about an attempt other than its last one is not), written once
 * for the turn's commit (turn.c), and then followed (above).  1: a row applied; 0:
 * no row (the job is in no state that takes EV), or not found; -1: the
 * record could not be read or written (said; write_failed stalls).
 */
int job_step(struct daemon *d, long long id, enum job_event ev, const struct ev_arg *a)
{
	const struct transition *t;
	struct cb_err err = { 0 };
	enum spool_dir dir;
	enum job_state from;
	const struct attempt *at;
	enum att_state afrom;
	struct job j;
	size_t natt;
	char *name;
	int r;

	turn_settle(d, id);     /* its record as the spool has it */
	if (locate(d, id, &dir, &name) < 0)
		return 0;
	if (spool_load(&d->sp, dir, name, &j, &err) < 0) {
		logmsg("%s", err.msg ? err.msg : "out of memory");
		cb_err_free(&err);
		free(name);
		return -1;
	}
	from = j.state;
	at = job_last_attempt(&j);
	if (!(t = transition(from, ev)) || (a->aid && ev != EV_PLACE && (!at || strcmp(at->id, a->aid)))) {
		r = 0;
		goto out;
	}
	natt = j.natt;
	afrom = at ? at->state : AS_N;
	if ((r = transition_apply(t, &j, a, now_ms())) < 0) {
		logmsg("job %lld: %s: out of memory", id, job_event_name(ev));
		goto out;
	}
	if (r && turn_stage(d, &j, dir, name) < 0) {
		r = -1;
		goto out;
	}
	if (r)
		count_step(d, &j, from, j.natt == natt ? afrom : AS_N);
	if (ev == EV_PAUSE)
		metrics_paused(&d->metrics);
	follow(d, &j, from, ev, a, r);
	r = 1;
out:
	free(name);
	job_free(&j);
	return r;
}

/* The flag of E that says its reason of KIND is on disk. */
static int *noted(struct qent *e, enum wait_kind kind)
{
	return kind == WAIT_LIMIT ? &e->limit_noted : kind == WAIT_FULL ? &e->full_noted :
	       kind == WAIT_ACCT ? &e->acct_noted : &e->never_noted;
}

/* E waits, and its record says WHY: it never fits, the card it could
 * share is full, or its owner is at max_gpus (plan.h).  Once per queue
 * entry: no read per pass. */
void note_waiting(struct daemon *d, struct qent *e, const char *why, enum wait_kind kind)
{
	struct ev_arg a = { .why = why };
	long long id = e->id;

	if (*noted(e, kind) || job_step(d, id, EV_WAIT, &a) != 1 || !(e = q_find(d, id)))
		return;
	*noted(e, kind) = 1;
}

/* Ask the node to launch E's current attempt (first time or again),
 * through its event stream, else by running the worker; the answer
 * comes to launch_answered.  Nothing waits for it. */
static int send_launch(struct daemon *d, struct rent *e)
{
	static const char *const args[] = { "launch", NULL };
	struct node *n = &d->nodes[e->node];
	size_t user = rent_link(d, e);
	struct wstream *ws = user && user > n->nacct ? NULL : stream_of(n, user);
	struct wire_rec spec = { 0 };
	struct job j;
	char *name, *text = NULL;
	long len;
	int r = -1;

	if (e->asked || e->call.pid > 0)
		return 0;       /* asked already: its answer will come */
	/* A stream on its way (for STREAM_WAIT_MS at most): its `ready`
	 * brings a reconcile, whose "unknown" sends this launch again, on
	 * the stream; a stream slower than that, the reconcile after it
	 * finds, and the worker is run instead. */
	if (ws && ws->pid > 0 && !ws->ready && mono_now() - ws->started < STREAM_WAIT_MS)
		return 0;
	if (load_running(d, e->id, &j, &name) < 0)
		return -1;
	if (spec_add_job(&d->cfg, &spec, &j, job_last_attempt(&j), n) < 0 ||
	    (len = wire_format(&spec, &text)) < 0) {
		logmsg("job %lld: out of memory", e->id);
	} else if (ws && stream_send(d, e->node, user, "launch", text, (size_t)len) == 0) {
		e->asked = 1;
		e->asked_at = mono_now();
		r = 0;
	} else {
		r = acall_start_input(d, n, e->user, &e->call, args, text, (size_t)len, NODE_CALL_MS);
	}
	CRASH_POINT("launch: sent", NULL);
	wire_free(&spec);
	free(text);
	free(name);
	job_free(&j);
	return r;
}

int launch_answered(struct daemon *d, struct rent *e, struct node_reply *rep)
{
	static const char CK_UNSEEN[] = "checkpoint not visible on ";
	struct node *n = &d->nodes[e->node];
	struct wire_rec w = { 0 };
	struct qent *q;
	const char *why;
	long long id;
	int r = 0, moved;

	CRASH_POINT("launch: node answered", NULL);
	/* Its owner's account refused the lab's key (run_as: owner): ssh
	 * ran nothing there, so the job goes back to the queue, and the
	 * plan places it where the account is not refused, or it waits. */
	if (acct_answer(d, n, e->user, rep->status,
			&(struct sbuf){ .s = rep->err, .len = rep->err ? strlen(rep->err) : 0 })) {
		const struct acct *a = acct_get(d, n, e->user);

		n->fresh = n->handoff = 0;
		return job_step(d, e->id, EV_BUSY,
				&(struct ev_arg){ .why = a && a->why ? a->why : "not authorized",
						  .aid = e->aid });
	}
	if (rep->status == 0 || rep->status == EX_TEMPFAIL_ || rep->status == EX_UNAVAILABLE_)
		wire_parse(rep->out, rep->outlen, &w, &why);
	if (rep->status != 0)
		n->fresh = n->handoff = 0;      /* our picture of its cards was wrong */
	switch (rep->status) {
	case 0:
		node_ok(d, e->node);
		r = apply_attempt(d, e, &w);
		break;
	case EX_TEMPFAIL_:      /* busy: nothing was started, no trace left */
	case EX_UNAVAILABLE_:   /* nvidia-smi failed on the node: the same */
		node_ok(d, e->node);
		why = wire_get(&w, "reason");
		if (!why || !*why) {
			/* The worker's own words: their first line. */
			rep->err[strcspn(rep->err, "\n")] = '\0';
			why = *rep->err ? rep->err : "cards busy at launch";
		}
		logmsg("job %lld: not started on %s: %s", e->id, n->conf->name, why);
		id = e->id;
		moved = !strncmp(why, CK_UNSEEN, sizeof CK_UNSEEN - 1);
		r = job_step(d, id, EV_BUSY, &(struct ev_arg){ .why = why, .aid = e->aid });
		/* Its checkpoint is not where that node mounts it: the
		 * node is left out for this job (shared_fs, SPEC §9). */
		if (moved && (q = q_find(d, id)) && qent_away(q, n->conf->name) < 0)
			logmsg("job %lld: out of memory", id);
		break;
	case EX_DATAERR_:       /* the worker refused the spec: final */
		node_ok(d, e->node);
		r = job_step(d, e->id, EV_REFUSED, &(struct ev_arg){ .why = rep->err, .aid = e->aid });
		break;
	default:
		/* Transport failure, lost reply, timeout: the attempt stays
		 * "launching" and the same launch is sent again later. */
		node_failed(d, e->node, *rep->err ? rep->err : "launch failed");
		break;
	}
	wire_free(&w);
	return r;
}

int launch(struct daemon *d, struct qent *e, size_t node, const int *gpus, size_t ngpus,
	   const char *const *after, size_t nafter, const char *why)
{
	struct ev_arg a = { .node = d->nodes[node].conf->name, .gpus = gpus, .ngpus = ngpus,
			    .node_index = node, .spool_id = d->sp.id, .after = after,
			    .nafter = nafter, .why = why };

	return job_step(d, e->id, EV_PLACE, &a) == 1 ? 0 : -1;
}

/*
 * The node's word on E's attempt (a state record from a launch, status
 * or watch): the event of the attempt state it names.  "unknown" for an
 * attempt still launching means the launch never reached the node: it
 * is sent again.  "starting" does not confirm a launch: without a state
 * file it is a launcher still checking the cards (status and a second
 * launch say so while it holds the lock), which may yet answer busy and
 * remove the attempt; taken as running, that attempt would then be
 * "unknown" and wrongly lost; kept launching, it is launched again
 * (LAYOUT.md section 8, step 7).
 */
int apply_attempt(struct daemon *d, struct rent *e, const struct wire_rec *w)
{
	struct ev_arg a = { .w = w, .aid = e->aid };
	enum wire_state ws;
	long long v;

	if (wire_state_parse(wire_get(w, "state"), &ws) < 0)
		return 0;
	if (ws == WS_STAGED) {
		/* The node has it: it starts there when its cards free.  A
		 * hold or promote that came while its stage was on its way
		 * asks for it back now (and at every reconcile, until the
		 * node answers).  A pass that would have sent it back while
		 * the stage was unconfirmed (unstage_ask waits for this)
		 * decides again, before its holder ends and the node starts
		 * it. */
		d->dirty |= e->launching;
		e->launching = 0;
		e->heard_at = mono_now();
		if (e->nredo)
			unstage_ask(d, e, "a request waits for it");
		return 0;
	}
	if (ws == WS_UNKNOWN) {
		if (e->launching)
			return send_launch(d, e);
		a.why = "the node has no record of this attempt";
	}
	if (node_event(ws, 0) == EV_N)
		return 0;       /* starting, busy */
	return job_step(d, e->id, node_event(ws, (wire_get_ll(w, "timeout", &v) == 0 && v == 1) ||
					      (wire_get_ll(w, "requeue", &v) == 0 && v == 1)),
			&a) < 0 ? -1 : 0;
}

/* The status check of USER's attempts on N: its account's (run_as:
 * owner), else the node's own (USER 0). */
struct acall *check_of(struct node *n, size_t user)
{
	return user ? &n->acct[user - 1].check : &n->check;
}

/* Ask NODE about every attempt the daemon believes runs there (run_as:
 * owner: each account about its own); the answers come to
 * reconcile_done. */
int reconcile_node(struct daemon *d, size_t node)
{
	struct node *n = &d->nodes[node];
	const char **args;
	int r = 0;

	for (size_t i = 0; i < d->nr; i++)
		if (d->r[i].node == node && d->r[i].cancel)
			cancel_running(d, &d->r[i]);    /* kept: not yet heard */
	if (!(args = calloc(d->nr + 2, sizeof *args)))
		return -1;
	for (size_t i = 0; i < d->nr; i++)
		if (d->r[i].node == node)
			acct_get(d, n, rent_link(d, &d->r[i]));        /* its account made */
	for (size_t u = 0; u <= n->nacct && r == 0; u++) {
		size_t k = 0;

		if (check_of(n, u)->pid > 0 || (u && !n->acct[u - 1].used))
			continue;
		args[k++] = "status";
		for (size_t i = 0; i < d->nr; i++)
			if (d->r[i].node == node && rent_link(d, &d->r[i]) == u)
				args[k++] = d->r[i].aid;
		args[k] = NULL;
		r = k == 1 ? 0 : acall_start(d, n, u, check_of(n, u), args, NODE_QUERY_MS);
	}
	free(args);
	return r;
}

void reconcile_done(struct daemon *d, size_t node, size_t user, int status)
{
	struct node *n = &d->nodes[node];
	struct acall *ck = check_of(n, user);
	struct sbuf *b = &ck->buf;
	size_t off = 0;

	int probe = user && n->acct[user - 1].probing;

	if (probe)
		n->acct[user - 1].probing = 0;
	if (acct_answer(d, n, user, status, &ck->ebuf))
		return;         /* asked again when its back-off is over */
	if (probe) {
		if (status != 0)
			node_failed(d, node, status == 255 ? "cannot reach the node over ssh" :
				    "cardbaton-worker version failed");
		return;
	}
	if (status != 0) {
		node_failed(d, node, status == 255 ? "cannot reach the node over ssh" :
			    "cardbaton-worker status failed");
		return;
	}
	node_ok(d, node);
	while (off < b->len) {
		struct wire_rec w = { 0 };
		const char *why, *aid;
		long used = wire_parse(b->s + off, b->len - off, &w, &why);
		struct rent *e;

		if (used <= 0) {
			wire_free(&w);
			break;
		}
		off += (size_t)used;
		/* An answer asked for before the node last said something
		 * of the attempt (its launch's reply, an event) is older than
		 * what the daemon knows: an "unknown" from before the launch
		 * reached the node would make a running job lost. */
		if ((aid = wire_get(&w, "attempt")) && (e = r_find_aid(d, aid)) &&
		    e->heard_at < ck->started)
			apply_attempt(d, e, &w);
		wire_free(&w);
	}
}

int node_status_of(struct daemon *d, const struct node *n, struct node_status *ns)
{
	*ns = (struct node_status){ .name = (char *)n->conf->name, .reachable = n->reachable,
				    .error = n->error, .since = n->since, .drained = n->drained,
				    .cards_at = n->known ? n->view_at : 0 };
	if (n->known && n->ngpus && !(ns->cards = calloc(n->ngpus, sizeof *ns->cards)))
		return -1;
	/* Its accounts' refusals: the strings are theirs. */
	if (n->nacct && !(ns->refused = calloc(n->nacct, sizeof *ns->refused))) {
		node_status_of_free(ns);
		return -1;
	}
	for (size_t u = 0; u < n->nacct; u++)
		if (n->acct[u].state == ACCT_REFUSED && n->acct[u].why)
			ns->refused[ns->nrefused++] = n->acct[u].why;
	/* The checkpoints on their way here (moves.c): the names are the
	 * config's. */
	for (size_t i = 0; i < d->nmoves; i++) {
		const struct move *m = &d->moves[i];
		struct node_transfer *t;

		if (&d->nodes[m->to] != n || m->a.pid <= 0)
			continue;
		if (!(t = realloc(ns->transfers, (ns->ntransfers + 1) * sizeof *t))) {
			node_status_of_free(ns);
			return -1;
		}
		ns->transfers = t;
		t[ns->ntransfers++] = (struct node_transfer){ m->id, (char *)d->nodes[m->from].conf->name,
							      m->done, m->total };
	}
	for (size_t i = 0; n->known && i < n->ngpus; i++) {
		const struct gpu_info *g = &n->gpus[i];
		struct node_card *c = &ns->cards[ns->ncards++];
		const struct rent *e = g->lease ? r_find_aid(d, g->lease) : NULL;

		*c = (struct node_card){ g->index, g->uuid, g->name, g->mem_used, g->mem_total,
					 g->util, g->procs, gpu_idle(g, n->conf->idle_mib), g->lease,
					 e ? e->id : 0, NULL, 0 };
		if (g->nshares && !(c->shares = calloc(g->nshares, sizeof *c->shares))) {
			node_status_of_free(ns);
			return -1;
		}
		for (size_t s = 0; s < g->nshares; s++)
			if ((e = r_find_aid(d, g->shares[s])))
				c->shares[c->nshares++] = e->id;
	}
	return 0;
}

void node_status_of_free(struct node_status *ns)
{
	for (size_t i = 0; i < ns->ncards; i++)
		free(ns->cards[i].shares);
	free(ns->cards);
	ns->cards = NULL;
	ns->ncards = 0;
	free(ns->refused);
	ns->refused = NULL;
	ns->nrefused = 0;
	free(ns->transfers);
	ns->transfers = NULL;
	ns->ntransfers = 0;
}

/* N's view, or NULL (out of memory).  Drained is not in it: drain/
 * says that (LAYOUT.md §13). */
static char *node_view(struct daemon *d, const struct node *n)
{
	struct node_status ns;
	char *text;

	if (node_status_of(d, n, &ns) < 0)
		return NULL;
	text = node_status_text(&ns);
	node_status_of_free(&ns);
	return text;
}

void node_views_flush(struct daemon *d)
{
	for (size_t k = 0; k < d->nnodes; k++) {
		struct node *n = &d->nodes[k];
		struct cb_err err = { 0 };
		char *text;

		if (!n->view_due)
			continue;
		if (!(text = node_view(d, n))) {
			logmsg("node %s: nodes/%s.json: out of memory", n->conf->name, n->conf->name);
			continue;       /* due still: the next turn tries again */
		}
		if (n->view && !strcmp(n->view, text)) {
			free(text);
			n->view_due = 0;
			continue;
		}
		if (spool_node_put(&d->sp, n->conf->name, text, &err) < 0) {
			free(text);
			/* A full disk: due still, written once the stall ends.
			 * Anything else (a stray directory in its place) is said
			 * once, and tried again at the node's next change (a card
			 * snapshot is one: every query). */
			if (err.ex == EX_TEMPFAIL_)
				write_failed(d, err.ex, err.msg);
			else if (!n->view_said)
				logmsg("%s", err.msg ? err.msg : "out of memory");
			n->view_said |= err.ex != EX_TEMPFAIL_;
			n->view_due = err.ex == EX_TEMPFAIL_;
			cb_err_free(&err);
			continue;
		}
		write_ok(d);
		n->view_said = 0;
		free(n->view);
		n->view = text;
		n->view_due = 0;
		n->recorded = 1;
	}
}

/* ---- control requests ------------------------------------------------ */

static void cancel_running(struct daemon *d, struct rent *e)
{
	const char *args[] = { "cancel", e->aid, NULL };
	int out, status, *seen;
	const struct node_conf *nc = acct_conf(d, &d->nodes[e->node], e->user, &seen);
	pid_t pid = nc ? fork() : -1;

	/* The worker stops the process group and waits for its end, which
	 * arrives here as an event: nobody waits for its reply.  A child
	 * starts it and exits at once, so init reaps it, not us. */
	if (pid == 0) {
		if (node_spawn(&d->cfg, nc, args, NULL, &out) < 0)
			_exit(1);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
		logmsg("job %lld: cancel: could not ask the node", e->id);
	CRASH_POINT("cancel: node asked", NULL);
}

/*
 * E's attempt is over (its record says how): the calls about it stop,
 * and a cancel request kept for it is done with, or applied to what
 * the job is now.  E is gone after this.
 */
static void attempt_over(struct daemon *d, struct rent *e)
{
	long long id = e->id;
	char *cancel = e->cancel, **redo = e->redo;
	size_t nredo = e->nredo;

	acall_free(&e->call);
	acall_free(&e->pause);
	e->cancel = NULL;
	e->redo = NULL;
	e->nredo = 0;
	r_remove(d, e);
	if (cancel)
		cancel_after_attempt(d, id, cancel);
	free(cancel);
	/* Requests that waited for a staged attempt to be given back. */
	for (size_t i = 0; i < nredo; i++) {
		cancel_after_attempt(d, id, redo[i]);
		free(redo[i]);
	}
	free(redo);
}

int unstage_ask(struct daemon *d, struct rent *e, const char *why)
{
	/* Not while its stage may still be on its way (unconfirmed): an
	 * unstage that overtook it would answer "unknown", and the stage,
	 * arriving after, would start a job the queue has again. */
	if (!e->staged || e->unstaging || e->pause.pid > 0 || e->launching || e->asked ||
	    e->call.pid > 0)
		return 0;
	if (acall_start(d, &d->nodes[e->node], e->user, &e->pause,
			(const char *const[]){ "unstage", e->aid, NULL },
			NODE_QUERY_MS) < 0)
		return -1;
	e->unstaging = 1;
	logmsg("job %lld: un-staging it on %s: %s", e->id, d->nodes[e->node].conf->name, why);
	CRASH_POINT("unstage: node asked", NULL);
	return 1;
}

/* The node's answer to unstage: the attempt's record (unstaged, or
 * what it became: it may have started meanwhile). */
void unstage_answered(struct daemon *d, struct rent *e, int status)
{
	struct sbuf *out = &e->pause.buf;
	struct wire_rec w = { 0 };
	const char *why;

	e->unstaging = 0;
	if (status != 0 || wire_parse(out->s ? out->s : "", out->len, &w, &why) <= 0) {
		logmsg("job %lld: unstage: the worker said %d (asked again by a later pass)", e->id,
		       status);
		wire_free(&w);
		return;
	}
	e->heard_at = mono_now();
	apply_attempt(d, e, &w);
	wire_free(&w);
}

void pause_answered(struct daemon *d, struct rent *e, int status)
{
	struct sbuf *err = &e->pause.ebuf;

	if (status != 0) {
		logmsg("job %lld: pause: the worker said %d: %.*s", e->id, status,
		       (int)strcspn(err->s ? err->s : "", "\n"), err->s ? err->s : "");
		free(e->yield_why);     /* a yield is asked again */
		e->yield_why = NULL;
		return;
	}
	job_step(d, e->id, EV_PAUSE_ASKED, &(struct ev_arg){ .aid = e->aid, .why = e->yield_why });
}

int yield_ask(struct daemon *d, struct rent *e, const char *why, const char *word)
{
	char grace[24], *fail;
	int r;

	if (e->yield_why || e->pause.pid > 0 || !e->resumable || e->launching || e->staged)
		return 0;
	snprintf(grace, sizeof grace, "%lld", e->grace);
	if (!(fail = xasprintf("%s: no checkpoint within %lld s", word, e->grace)) ||
	    !(e->yield_why = strdup(why))) {
		free(fail);
		return -1;
	}
	r = acall_start(d, &d->nodes[e->node], e->user, &e->pause,
			(const char *const[]){ "pause", "--grace", grace, "--why", why, "--fail", fail,
					       e->aid, NULL }, NODE_QUERY_MS);
	free(fail);
	if (r < 0) {
		free(e->yield_why);
		e->yield_why = NULL;
		return -1;
	}
	logmsg("job %lld: %s: asked to checkpoint within %lld s", e->id, why, e->grace);
	if (!strcmp(word, "preempted"))
		metrics_preempted(&d->metrics);
	CRASH_POINT("yield: node asked", NULL);
	return 1;
}

/* promote's priority: ARG, or above everything else queued (staged
 * jobs too: they are queued, their seat kept on a node).  A lab
 * member's (MINE: the owner's limits): above the owner's other queued
 * jobs only, at most max_priority (lab.h lab_promote_prio). */
static long long promoted(const struct daemon *d, const struct qent *e, long long arg,
			  const struct lab_limits *mine)
{
	long long top = PRIO_MIN - 1;

	if (arg != CTL_NO_ARG)
		return arg;
	for (size_t i = 0; i < d->nq; i++)
		if (d->q[i] != e && d->q[i]->prio > top && (!mine || d->q[i]->user == e->user))
			top = d->q[i]->prio;
	for (size_t i = 0; i < d->nr; i++)
		if (d->r[i].staged && d->r[i].id != e->id && d->r[i].prio > top &&
		    (!mine || d->r[i].user == e->user))
			top = d->r[i].prio;
	return lab_promote_prio(e->prio, top, mine ? mine->max_priority : PRIO_MAX);
}

/*
 * Who may do what (SPEC §12): in a lab's spool, request NAME about job
 * ID, by the owner of its file (ST, as read), is the job's owner's or an
 * admin's (a node's: an admin's); a member's promote --priority at most
 * max_priority.  1: it may go on (*MINE: the owner's limits when the
 * promote is a member's, else NULL); 0: refused (said, counted: the
 * caller removes it).  A job that is not queued, running or paused is
 * left to the step function to refuse.
 */
static int may_request(struct daemon *d, const char *name, long long id, enum ctl_op op,
		       long long arg, const struct stat *st, const struct lab_limits **mine)
{
	struct cb_err err = { 0 };
	enum spool_dir dir;
	char *who = NULL, *rec = NULL, *why = NULL;
	struct job j;
	int ok = 1;

	*mine = NULL;
	if (!d->cfg.lab)
		return 1;
	/* A link to a file of another's is no request of theirs. */
	if (st->st_nlink != 1) {
		why = xasprintf("may not make a request of %ju links", (uintmax_t)st->st_nlink);
		goto refuse;
	}
	if (lab_is_admin(d->cfg.lab, st->st_uid, d->sp.uid))
		return 1;
	if (CTL_NODE_OP(op)) {
		why = xasprintf("may not %s a node (admins only)", ctl_op_name[op]);
		goto refuse;
	}
	turn_settle(d, id);
	if (locate(d, id, &dir, &rec) < 0)
		return 1;
	if (spool_load(&d->sp, dir, rec, &j, &err) < 0) {
		cb_err_free(&err);
		free(rec);
		return 1;       /* the step function says so */
	}
	free(rec);
	if (!j.owner || (uid_t)j.owner_uid != st->st_uid) {
		why = xasprintf("may not %s job %lld (%s%s)", ctl_op_name[op], id,
				j.owner ? j.owner : "it has no owner", j.owner ? "'s" : "");
		ok = 0;
	} else if (op == CTL_PROMOTE) {
		*mine = lab_limits_of(d->cfg.lab, j.owner);
		if (arg != CTL_NO_ARG && arg > (*mine)->max_priority) {
			why = xasprintf("may not promote job %lld to priority %lld (max_priority %lld)",
					id, arg, (*mine)->max_priority);
			ok = 0;
		}
	}
	job_free(&j);
	if (ok)
		return 1;
refuse:
	who = lab_user_name(st->st_uid);
	logmsg("ctl/%s: %s %s: refused", name, who ? who : "?", why ? why : "out of memory");
	metrics_refused(&d->metrics);
	free(who);
	free(why);
	return 0;
}

/* A node's request NAME, BODY (LEN bytes): drain/NODE written or removed
 * (spool_drain_set, as the tools do without a lab), then read as any
 * change of drain/ is. */
static void apply_drain(struct daemon *d, const char *name, enum ctl_op op, const char *body,
			size_t len)
{
	struct cb_err err = { 0 };
	const struct node_conf *nc;
	char *node;
	int ck;

	if (ctl_parse_drain(body, len, &node, &ck) < 0) {
		logmsg("ctl/%s: bad content; removed", name);
		return;
	}
	if (!(nc = config_node(&d->cfg, node))) {
		logmsg("ctl/%s: no node '%s' in the config; removed", name, node);
	} else if (spool_drain_set(&d->sp, nc->name, op == CTL_DRAIN, ck, &err) < 0) {
		write_failed(d, err.ex, err.msg);
		cb_err_free(&err);
	} else {
		drain_read(d);
	}
	free(node);
}

/* Job ID's attempt is over, and REQ, a cancel request kept for it
 * (apply_ctl), is still in ctl/: done with, or -- the job is back in
 * the queue or paused -- applied to what the job is now. */
void cancel_after_attempt(struct daemon *d, long long id, const char *req)
{
	char *pn = name_plain(id);

	turn_settle(d, id);     /* paused/ as the record is */
	if (q_find(d, id) || (pn && faccessat(d->sp.dir[SD_PAUSED], pn, F_OK, AT_SYMLINK_NOFOLLOW) == 0))
		apply_ctl(d, req);
	else
		turn_after(d, &(struct effect){ EF_CTL_DONE, id, NULL, (char *)req });
	free(pn);
}

int apply_ctl(struct daemon *d, const char *name)
{
	long long id, arg = CTL_NO_ARG;
	enum ctl_op op;
	char *buf = NULL;
	size_t len;
	struct rent *re;
	unsigned long stalls = d->stalls;
	const struct lab_limits *mine = NULL;
	struct stat st;
	int keep = 0;

	if (name[0] == '.')
		return 0;
	/* Not a request, and not removable by unlink: left, said once a scan. */
	if (fstatat(d->sp.dir[SD_CTL], name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
		logmsg("ctl/%s: is a directory; ignored", name);
		return 0;
	}
	if (ctl_parse_name(name, &id, &op) < 0) {
		logmsg("ctl/%s: not a control request; removed", name);
		goto done;
	}
	/* Opened O_NOFOLLOW | O_NONBLOCK; what is not a regular file is
	 * not read. */
	if (read_capped_stat(d->sp.dir[SD_CTL], name, 4096, &buf, &len, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		logmsg("ctl/%s: %s; removed", name, read_problem(errno));
		goto done;
	}
	if (op == CTL_PROMOTE && len) {
		if (buf[len - 1] == '\n')
			buf[len - 1] = '\0';
		if (strncmp(buf, "priority ", 9) || parse_ll(buf + 9, PRIO_MIN, PRIO_MAX, &arg) < 0) {
			logmsg("ctl/%s: bad content; removed", name);
			goto done;
		}
	}
	if (!may_request(d, name, id, op, arg, &st, &mine))
		goto done;
	if (CTL_NODE_OP(op)) {
		apply_drain(d, name, op, buf, len);
		goto done;
	}
	{
		static const enum job_event ev_of[] = {
			[CTL_CANCEL] = EV_CANCEL, [CTL_PROMOTE] = EV_PROMOTE,
			[CTL_PAUSE] = EV_PAUSE, [CTL_RESUME] = EV_RESUME,
			[CTL_HOLD] = EV_HOLD, [CTL_RELEASE] = EV_RELEASE,
		};
		static const char *const refused[] = {
			[CTL_CANCEL] = "not queued, running or paused", [CTL_PROMOTE] = "not queued",
			[CTL_PAUSE] = "not running", [CTL_RESUME] = "not paused",
			[CTL_HOLD] = "not queued", [CTL_RELEASE] = "not queued",
		};
		struct qent *qe = q_find(d, id);
		struct ev_arg a = { .prio = qe ? promoted(d, qe, arg, mine) : arg };
		char **v;

		/* A hold or a promote of a staged job: it is asked back from
		 * its node first, and the request applied once it is queued
		 * again (kept in ctl/ until then). */
		re = r_find(d, id);
		if ((op == CTL_HOLD || op == CTL_PROMOTE) && re && re->staged) {
			keep = 1;
			for (size_t i = 0; i < re->nredo; i++)
				if (!strcmp(re->redo[i], name))
					goto done;      /* kept already */
			if (!(v = realloc(re->redo, (re->nredo + 1) * sizeof *v)) ||
			    !(v[re->nredo] = strdup(name))) {
				if (v)
					re->redo = v;
				logmsg("job %lld: %s: out of memory", id, ctl_op_name[op]);
				keep = 0;
				goto done;
			}
			re->redo = v;
			re->nredo++;
			unstage_ask(d, re, ctl_op_name[op]);
			goto done;
		}
		if (job_step(d, id, ev_of[op], &a) == 0)
			logmsg("job %lld: %s: %s", id, ctl_op_name[op], refused[op]);
		/* A cancel of a running job is kept until its attempt ends,
		 * and sent again with every reconcile: a node cut off now
		 * hears it later. */
		if (op == CTL_CANCEL && (re = r_find(d, id))) {
			if (!re->cancel)
				re->cancel = strdup(name);
			keep = re->cancel && !strcmp(re->cancel, name);
		}
	}
	CRASH_POINT("ctl: applied", ctl_op_name[op]);
done:
	free(buf);
	if (d->stalls != stalls)
		return 0;       /* the spool could not be written: kept, retried */
	/* Removed once what it changed is durable. */
	if (!keep)
		turn_after(d, &(struct effect){ EF_CTL_DONE, 0, NULL, (char *)name });
	return 0;
}

/* ---- metrics.prom --------------------------------------------------------- */

#define METRICS_EVERY_MS 1000

static char *metrics_now_text(struct daemon *d)
{
	struct metrics_now now = { (long long)d->nq, 0, (long long)d->nr, d->npaused, { 0 },
				   NULL, 0, NULL, 0 };
	struct node_status *ns = calloc(d->nnodes + 1, sizeof *ns);
	struct metrics_user *mu = NULL;
	double *eff = NULL, *gs = NULL;
	long long *held = NULL;
	char *text = NULL;

	if (!ns)
		return NULL;
	for (size_t i = 0; i < d->nq; i++) {
		now.held += d->q[i]->held;
		now.band[d->q[i]->prio < 0 ? 0 : d->q[i]->prio == 0 ? 1 : 2]++;
	}
	/* A staged job is queued, as status shows it. */
	for (size_t i = 0; i < d->nr; i++)
		if (d->r[i].staged) {
			now.queued++;
			now.running--;
			now.band[d->r[i].prio < 0 ? 0 : d->r[i].prio == 0 ? 1 : 2]++;
		}
	for (; now.nnodes < d->nnodes; now.nnodes++)
		if (node_status_of(d, &d->nodes[now.nnodes], &ns[now.nnodes]) < 0)
			goto out;
	now.nodes = ns;
	/* A lab's users (tally.c): the GPU time of each one's attempts, ended
	 * and running, and the cards each holds now. */
	if (d->cfg.lab && d->ntally) {
		if (!(mu = calloc(d->ntally, sizeof *mu)) || !(eff = calloc(d->ntally, sizeof *eff)) ||
		    !(gs = calloc(d->ntally, sizeof *gs)) || !(held = calloc(d->ntally, sizeof *held)))
			goto out;
		tally_now(d, now_ms(), eff, held, gs);
		for (size_t u = 0; u < d->ntally; u++)
			mu[u] = (struct metrics_user){ d->tally[u].name, gs[u], held[u] };
		now.users = mu;
		now.nusers = d->ntally;
	}
	text = metrics_text(&d->metrics, &now);
out:
	for (size_t k = 0; k < now.nnodes; k++)
		node_status_of_free(&ns[k]);
	free(ns);
	free(mu);
	free(eff);
	free(gs);
	free(held);
	return text;
}

int metrics_flush(struct daemon *d, int force)
{
	struct cb_err err = { 0 };
	long long now = mono_now();
	char *text;

	if (!force && d->metrics_at && now - d->metrics_at < METRICS_EVERY_MS)
		return (int)(d->metrics_at + METRICS_EVERY_MS - now);
	d->metrics_at = now;
	if (!(text = metrics_now_text(d))) {
		logmsg("metrics.prom: out of memory");
		return METRICS_EVERY_MS;
	}
	if (d->metrics_text && !strcmp(d->metrics_text, text)) {
		free(text);
		return -1;      /* nothing changed: nothing due until something happens */
	}
	/* A view: its failure stops nothing (said once until it works). */
	if (spool_write_view(&d->sp, SD_N, "metrics.prom", text, &err) < 0) {
		if (!d->metrics_said)
			logmsg("%s (the metrics are written again in a second)", err.msg);
		d->metrics_said = 1;
		cb_err_free(&err);
		free(text);
		return METRICS_EVERY_MS;
	}
	d->metrics_said = 0;
	free(d->metrics_text);
	d->metrics_text = text;
	return -1;
}
