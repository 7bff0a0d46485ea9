/*
 * test_table.c - the transition table (spoold/table.c): every row
 * walked on a record in its state, and the table compared both ways
 * with AGENTS.md "Queue states and transitions" (each row there whose
 * event is in `code` is a row of the table, and the other way round).
 */
#include <stdlib.h>
#include <string.h>

#include "t.h"
#include "../../spoold/table.h"

#define NOW 1700000000000LL

/* A job in state S, with an attempt on "n1" in the state that goes
 * with it (none when queued). */
static void job_in(struct job *j, enum job_state s)
{
	struct attempt *a;

	memset(j, 0, sizeof *j);
	j->id = 7;
	j->state = s;
	j->priority = 3;
	j->queued_at = NOW - 1000;
	j->reason = strdup("before");
	if (s == JS_QUEUED)
		return;
	a = job_new_attempt(j);
	a->id = strdup("0badc0de-7-0");
	a->node = strdup("n1");
	/* Running: just launched; pausing: asked to, while it ran. */
	a->state = s == JS_PAUSING ? AS_PAUSING : s == JS_PAUSED ? AS_PAUSED : AS_LAUNCHING;
	a->started = s == JS_PAUSING ? NOW - 500 : 0;
	if (s == JS_PAUSED) {
		j->checkpoint = strdup("/ck/7");
		j->checkpoint_node = strdup("n1");
		j->def.resume_command = strdup("resume");
	}
}

/* What each event brings in the walk. */
static struct ev_arg arg_for(enum job_event ev, struct wire_rec *w)
{
	static const int cards[] = { 1, 3 };
	struct ev_arg a = { .aid = "0badc0de-7-0" };

	memset(w, 0, sizeof *w);
	switch (ev) {
	case EV_PLACE:
		a = (struct ev_arg){ .node = "n2", .node_index = 1, .gpus = cards, .ngpus = 2,
				     .spool_id = "0badc0de" };
		break;
	case EV_BUSY:
	case EV_REFUSED:
	case EV_WAIT:
		a.why = "GPU 1: busy";
		break;
	case EV_BLOCKED:
		a.why = "waiting for job 5";
		break;
	case EV_DEPENDENCY:
		a.why = "dependency 5 ended failed";
		break;
	case EV_PROMOTE:
		a.prio = 9;
		break;
	case EV_MOVE:
		a.node = "n2";
		break;
	case EV_MOVED:
		a.node = "n2";
		a.path = "/state/checkpoints/7/0badc0de-7-0/ck";
		break;
	default:
		if (ev >= EV_STARTED && ev <= EV_LOST) {
			wire_add(w, "attempt", "0badc0de-7-0");
			wire_add(w, "started", "1700000000100");
			wire_add(w, "finished", "1700000000900");
			wire_add(w, "checkpoint", "/ck/7b");
			if (ev == EV_FAILED)
				wire_add(w, "reason", "exit status 3");
			a.w = w;
		} else if (ev == EV_UNSTAGED) {
			wire_add(w, "attempt", "0badc0de-7-0");
			wire_add(w, "state", "unstaged");
			wire_add(w, "reason", "unstaged by the controller");
			a.w = w;
		}
		break;
	}
	return a;
}

/* The reason each row leaves (a prefix). */
static const char *reason_for(enum job_state from, enum job_event ev)
{
	switch (ev) {
	case EV_PLACE: return "launching on n2";
	case EV_BUSY: return "waiting: GPU 1: busy";
	case EV_UNSTAGED: return "waiting: unstaged by the controller";
	case EV_REFUSED: return "launch refused: GPU 1: busy";
	case EV_WAIT: return "waiting: GPU 1: busy";
	case EV_STARTED: return "running on n1";
	case EV_PAUSE_ASKED: return "pause requested";
	case EV_PAUSING: return from == JS_PAUSING ? "before" : "pause requested";
	case EV_PAUSED: return "checkpoint saved on n1; cardbaton resume continues it";
	case EV_PAUSED_AT_LIMIT: return "time limit reached, checkpoint saved; resumes on n1";
	case EV_SUCCEEDED: return "exit status 0";
	case EV_FAILED: return "exit status 3";
	case EV_CANCELLED: return "cancelled by user";
	case EV_LOST: return "lost";
	case EV_CANCEL: return from == JS_QUEUED || from == JS_PAUSED ? "cancelled by user" : "before";
	case EV_RESUME: return "resuming on n1";
	case EV_HOLD: return "held";
	case EV_BLOCKED: return "waiting for job 5";
	case EV_DEPENDENCY: return "dependency 5 ended failed";
	case EV_MOVE: return "transferring checkpoint from its node to n2";
	case EV_MOVED: return "checkpoint copied from its node; resumes on n2";
	default: return "before";
	}
}

static int rows_walked;

static void walk(void)
{
	for (int s = 0; s < JS_N; s++) {
		for (int ev = 0; ev < EV_N; ev++) {
			const struct transition *t = transition(s, ev);
			struct wire_rec w;
			struct ev_arg a;
			struct job j;
			int r;

			if (!t)
				continue;
			rows_walked++;
			job_in(&j, s);
			a = arg_for(ev, &w);
			r = transition_apply(t, &j, &a, NOW);
			CHECK(r >= 0);
			CHECK(j.state == t->to);
			/* A row that changes the state changes the record. */
			CHECK(t->to == (enum job_state)s || r == 1);
			CHECK(j.reason && !strncmp(j.reason, reason_for(s, ev), strlen(reason_for(s, ev))));
			if (!j.reason || strncmp(j.reason, reason_for(s, ev), strlen(reason_for(s, ev))))
				fprintf(stderr, "  %s + %s: reason \"%s\"\n", job_state_name(s),
					job_event_name(ev), j.reason ? j.reason : "(null)");
			if (job_state_final(j.state))
				CHECK(j.finished == (ev == EV_CANCEL || ev == EV_REFUSED || ev == EV_DEPENDENCY ?
						     NOW : 1700000000900LL));
			if (ev == EV_PLACE) {
				struct attempt *at = job_last_attempt(&j);

				CHECK(j.natt == 1 && at->state == AS_LAUNCHING);
				CHECK_STR(at->id, "0badc0de-7-0");
				CHECK(at->ngpus == 2 && at->gpus[0] == 1 && at->gpus[1] == 3);
			}
			if (ev == EV_BUSY || ev == EV_UNSTAGED)
				CHECK(job_last_attempt(&j)->state == AS_ABORTED && j.queued_at == NOW - 1000);
			if (ev == EV_PAUSED || ev == EV_PAUSED_AT_LIMIT) {
				CHECK_STR(j.checkpoint, "/ck/7b");
				CHECK_STR(j.checkpoint_node, "n1");
			}
			if (ev == EV_PROMOTE)
				CHECK(j.priority == 9);
			if (ev == EV_HOLD)
				CHECK(j.def.hold == 1);
			if (ev == EV_RESUME)
				CHECK(j.queued_at == NOW);
			wire_free(&w);
			job_free(&j);
		}
	}
}

/* A move names its node among the copies once, before the copy; the
 * copy done, the checkpoint is the copy's, and both survive JSON. */
static void moved(void)
{
	struct ev_arg a = { .node = "n2" };
	struct cb_err err = { 0 };
	struct job j, back;
	char *text;

	job_in(&j, JS_QUEUED);
	j.checkpoint = strdup("/ck/7");
	j.checkpoint_node = strdup("n1");
	CHECK(transition_apply(transition(JS_QUEUED, EV_MOVE), &j, &a, NOW) == 1);
	CHECK(transition_apply(transition(JS_QUEUED, EV_MOVE), &j, &a, NOW) == 1);
	CHECK(j.nck_copies == 1 && !strcmp(j.ck_copies[0], "n2"));
	CHECK_STR(j.reason, "transferring checkpoint from n1 to n2");
	CHECK_STR(j.checkpoint, "/ck/7");
	a.path = "/s/checkpoints/7/a/ck";
	CHECK(transition_apply(transition(JS_QUEUED, EV_MOVED), &j, &a, NOW) == 1);
	CHECK_STR(j.checkpoint, "/s/checkpoints/7/a/ck");
	CHECK_STR(j.checkpoint_node, "n2");
	CHECK_STR(j.reason, "checkpoint copied from n1; resumes on n2");
	a.node = "n3";
	CHECK(transition_apply(transition(JS_QUEUED, EV_MOVE), &j, &a, NOW) == 1);
	CHECK_STR(j.reason, "transferring checkpoint from n2 to n3");
	text = job_to_json(&j);
	CHECK(text && job_from_json(text, strlen(text), &back, &err) == 0);
	if (text && !err.msg) {
		CHECK(back.nck_copies == 2 && !strcmp(back.ck_copies[1], "n3"));
		job_free(&back);
	}
	free(text);
	job_free(&j);
	CHECK(!transition(JS_PAUSED, EV_MOVE) && !transition(JS_RUNNING, EV_MOVED));
}

/* A placement with `after` is staged: the attempt says whose end
 * starts it, and the record keeps that through JSON. */
static void staged(void)
{
	static const int cards[] = { 2 };
	static const char *const after[] = { "0badc0de-5-0", "0badc0de-6-1" };
	struct ev_arg a = { .node = "n2", .node_index = 1, .gpus = cards, .ngpus = 1,
			    .spool_id = "0badc0de", .after = after, .nafter = 2,
			    .why = "staged on n2: starts when jobs 5, 6 end" };
	struct cb_err err = { 0 };
	struct job j, back;
	char *text;

	job_in(&j, JS_QUEUED);
	CHECK(transition_apply(transition(JS_QUEUED, EV_PLACE), &j, &a, NOW) == 1);
	CHECK(j.state == JS_RUNNING && job_last_attempt(&j)->state == AS_STAGED);
	CHECK_STR(j.reason, "staged on n2: starts when jobs 5, 6 end");
	CHECK(job_last_attempt(&j)->nstaged_after == 2);
	text = job_to_json(&j);
	CHECK(text && job_from_json(text, strlen(text), &back, &err) == 0);
	if (text && !err.msg) {
		const struct attempt *b = job_last_attempt(&back);

		CHECK(b->state == AS_STAGED && b->nstaged_after == 2);
		CHECK_STR(b->staged_after[1], "0badc0de-6-1");
		job_free(&back);
	}
	free(text);
	job_free(&j);
}

/* Nothing new from the node: no write. */
static void unchanged(void)
{
	struct wire_rec w;
	struct ev_arg a = arg_for(EV_STARTED, &w);
	struct job j;

	job_in(&j, JS_RUNNING);
	CHECK(transition_apply(transition(JS_RUNNING, EV_STARTED), &j, &a, NOW) == 1);
	CHECK(transition_apply(transition(JS_RUNNING, EV_STARTED), &j, &a, NOW) == 0);
	CHECK(j.state == JS_RUNNING);
	job_free(&j);
	wire_free(&w);
	job_in(&j, JS_QUEUED);
	a = arg_for(EV_PROMOTE, &w);
	a.prio = 3;
	CHECK(transition_apply(transition(JS_QUEUED, EV_PROMOTE), &j, &a, NOW) == 0);
	job_free(&j);
	wire_free(&w);
	/* Hold, release: once each; a release says what the job waits for. */
	job_in(&j, JS_QUEUED);
	a = (struct ev_arg){ 0 };
	CHECK(transition_apply(transition(JS_QUEUED, EV_RELEASE), &j, &a, NOW) == 0);
	CHECK(transition_apply(transition(JS_QUEUED, EV_HOLD), &j, &a, NOW) == 1);
	CHECK(transition_apply(transition(JS_QUEUED, EV_HOLD), &j, &a, NOW) == 0);
	j.def.begin = NOW + 60000;
	CHECK(transition_apply(transition(JS_QUEUED, EV_RELEASE), &j, &a, NOW) == 1);
	CHECK(!j.def.hold && j.reason && !strncmp(j.reason, "begins at ", 10));
	CHECK(transition_apply(transition(JS_QUEUED, EV_RELEASE), &j, &a, NOW) == 0);
	/* blocked: written only when the reason changes; NULL: what it asks. */
	a.why = "waiting for job 5";
	CHECK(transition_apply(transition(JS_QUEUED, EV_BLOCKED), &j, &a, NOW) == 1);
	CHECK(transition_apply(transition(JS_QUEUED, EV_BLOCKED), &j, &a, NOW) == 0);
	a.why = NULL;
	j.def.begin = 0;
	CHECK(transition_apply(transition(JS_QUEUED, EV_BLOCKED), &j, &a, NOW) == 1);
	CHECK_STR(j.reason, "waiting to be scheduled");
	job_free(&j);
	CHECK(!transition(JS_RUNNING, EV_HOLD) && !transition(JS_PAUSED, EV_RELEASE));
	CHECK(!transition(JS_RUNNING, EV_DEPENDENCY));
	/* Requests a state has no row for are refused. */
	CHECK(!transition(JS_QUEUED, EV_PAUSE));
	CHECK(!transition(JS_PAUSING, EV_PAUSE));
	CHECK(!transition(JS_RUNNING, EV_RESUME));
	CHECK(!transition(JS_RUNNING, EV_PROMOTE));
	for (int ev = 0; ev < EV_N; ev++)
		CHECK(!transition(JS_SUCCEEDED, ev) && !transition(JS_LOST, ev));
	/* The node's states and their events. */
	CHECK(node_event(WS_STARTING, 0) == EV_N && node_event(WS_BUSY, 0) == EV_N);
	CHECK(node_event(WS_PAUSED, 1) == EV_PAUSED_AT_LIMIT && node_event(WS_UNKNOWN, 0) == EV_LOST);
}

/* ---- AGENTS.md ---------------------------------------------------------- */

static int state_of(const char *w, size_t n, enum job_state *s)
{
	for (int i = 0; i < JS_N; i++)
		if (strlen(job_state_name(i)) == n && !strncmp(w, job_state_name(i), n)) {
			*s = i;
			return 0;
		}
	return -1;
}

/* The first `word` of CELL that is a state (or "unchanged": -1 in *S). */
static int first_state(const char *cell, enum job_state *s)
{
	const char *p = cell;

	while ((p = strchr(p, '`'))) {
		const char *q = strchr(p + 1, '`');

		if (!q)
			break;
		if (state_of(p + 1, (size_t)(q - p - 1), s) == 0)
			return 0;
		p = q + 1;
	}
	return strstr(cell, "unchanged") ? (*s = JS_N, 0) : -1;
}

static int seen[JS_N][EV_N];

static void agents(void)
{
	const char *top = getenv("CB_TOP");
	char *path, *buf = NULL, *line, *end;
	size_t len = 0;
	FILE *fp;
	int in = 0, rows = 0;

	if (!top)
		top = ".";
	path = xasprintf("%s/AGENTS.md", top);
	CHECK((fp = fopen(path, "r")) != NULL);
	free(path);
	if (!fp)
		return;
	buf = malloc(1 << 20);
	len = fread(buf, 1, (1 << 20) - 1, fp);
	buf[len] = '\0';
	fclose(fp);
	for (line = buf; line && *line; line = end ? end + 1 : NULL) {
		char *cell[5] = { 0 }, *p;
		int nc = 0;
		enum job_state to;

		if ((end = strchr(line, '\n')))
			*end = '\0';
		if (!strncmp(line, "## ", 3))
			in = !strcmp(line, "## Queue states and transitions");
		if (!in || line[0] != '|')
			continue;
		for (p = line; nc < 5 && (p = strchr(p, '|')); p++)
			cell[nc++] = p + 1;
		if (nc < 4)
			continue;
		for (int i = 0; i < 4; i++)
			cell[i][strcspn(cell[i], "|")] = '\0';
		if (first_state(cell[2], &to) < 0)
			continue;
		for (int ev = 0; ev < EV_N; ev++) {
			char tok[32];

			snprintf(tok, sizeof tok, "`%s`", job_event_name(ev));
			if (strncmp(cell[1] + strspn(cell[1], " "), tok, strlen(tok)))
				continue;
			/* Every `state` of the from cell. */
			for (p = cell[0]; (p = strchr(p, '`'));) {
				char *q = strchr(p + 1, '`');
				enum job_state from;
				const struct transition *t;

				if (!q)
					break;
				if (state_of(p + 1, (size_t)(q - p - 1), &from) == 0) {
					t = transition(from, ev);
					CHECK(t != NULL);
					CHECK(t && t->to == (to == JS_N ? from : to));
					if (!t || t->to != (to == JS_N ? from : to))
						fprintf(stderr, "  AGENTS.md: %s + %s -> %s: not so in table.c\n",
							job_state_name(from), job_event_name(ev),
							to == JS_N ? "unchanged" : job_state_name(to));
					seen[from][ev] = 1;
					rows++;
				}
				p = q + 1;
			}
		}
	}
	free(buf);
	CHECK(rows > 0);
	for (int s = 0; s < JS_N; s++)
		for (int ev = 0; ev < EV_N; ev++)
			if (transition(s, ev) && !seen[s][ev]) {
				CHECK(!"a row of table.c is not in AGENTS.md");
				fprintf(stderr, "  table.c: %s + %s: not in AGENTS.md\n", job_state_name(s),
					job_event_name(ev));
			}
}

int main(void)
{
	walk();
	CHECK(rows_walked == 36);
	unchanged();
	staged();
	moved();
	agents();
	return T_DONE();
}
