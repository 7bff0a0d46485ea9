/*
 * test_metrics.c - the daemon's metrics (spoold/metrics.c) with made-up
 * times: what each transition counts, the handoff rule (measured only
 * when the next job was already waiting), the text's series, and the
 * counters carried across a restart (written, read back, never lower).
 */
#include <stdlib.h>
#include <string.h>

#include "t.h"
#include "../../spoold/metrics.h"

#define T0 1700000000000LL

/* Job ID queued at QUEUED with one attempt on card GPU in state S. */
static void job(struct job *j, long long id, long long queued, int gpu, enum att_state s,
		long long started, long long finished)
{
	struct attempt *a;

	memset(j, 0, sizeof *j);
	j->id = id;
	j->queued_at = queued;
	j->state = s == AS_SUCCEEDED ? JS_SUCCEEDED : s == AS_FAILED ? JS_FAILED : JS_RUNNING;
	a = job_new_attempt(j);
	a->state = s;
	a->started = started;
	a->finished = finished;
	a->ngpus = 1;
	a->gpus = malloc(sizeof *a->gpus);
	a->gpus[0] = gpu;
}

/* The value of the line starting with KEY + " " in TEXT, or -1. */
static double value(const char *text, const char *key)
{
	size_t n = strlen(key);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, n) && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return -1;
}

/* The text with USERS (NUSERS of them: a lab's spool; 0: none). */
static char *text_users(struct metrics *m, const struct metrics_user *users, size_t nusers);

static char *text_of(struct metrics *m)
{
	return text_users(m, NULL, 0);
}

static char *text_users(struct metrics *m, const struct metrics_user *users, size_t nusers)
{
	struct node_card cards[2] = {
		{ 0, "GPU-0", "A100", 1024, 81920, 50, 1, 0, "0badc0de-1-0", 1, NULL, 0 },
		{ 1, "GPU-1", "A100", 0, 81920, 0, 0, 1, NULL, 0, NULL, 0 },
	};
	struct node_status ns[2] = {
		{ "n1", 1, NULL, T0, 0, cards, 2, T0 + 5500, NULL, 0, NULL, 0 },
		{ "n\"2", 0, "down", T0, 1, NULL, 0, 0, NULL, 0, NULL, 0 },
	};
	struct metrics_now now = { 3, 1, 1, 2, { 1, 2, 0 }, ns, 2, users, nusers };

	return metrics_text(m, &now);
}

static void test_steps(void)
{
	const char *nodes[] = { "n1", "n\"2" };
	struct metrics m;
	struct job j;
	char *t;

	CHECK(metrics_init(&m, nodes, 2, T0) == 0);
	/* Job 1 waited 2.5 s, ran on card 0 and succeeded. */
	job(&j, 1, T0, 0, AS_RUNNING, T0 + 2500, 0);
	metrics_step(&m, &j, JS_RUNNING, AS_LAUNCHING, 0);
	j.att[0].state = AS_SUCCEEDED;
	j.att[0].finished = T0 + 10000;
	j.state = JS_SUCCEEDED;
	metrics_step(&m, &j, JS_RUNNING, AS_RUNNING, 0);
	job_free(&j);
	CHECK(m.attempts[AS_SUCCEEDED] == 1 && m.finished[JS_SUCCEEDED] == 1);
	CHECK(m.wait.n[1] == 1 && m.wait.sum == 2.5);
	/* Job 2 was waiting when card 0 freed: a 40 ms handoff. */
	job(&j, 2, T0 + 5000, 0, AS_RUNNING, T0 + 10040, 0);
	metrics_step(&m, &j, JS_RUNNING, AS_LAUNCHING, 0);
	job_free(&j);
	CHECK(m.node[0].handoff.n[3] == 1);     /* le 0.05 */
	CHECK(m.node[0].handoff.sum > 0.0399 && m.node[0].handoff.sum < 0.0401);
	/* It fails; job 3, queued after that, starts there later: no handoff. */
	job(&j, 2, T0 + 5000, 0, AS_FAILED, T0 + 10040, T0 + 20000);
	metrics_step(&m, &j, JS_RUNNING, AS_RUNNING, 0);
	job_free(&j);
	job(&j, 3, T0 + 30000, 0, AS_RUNNING, T0 + 30010, 0);
	metrics_step(&m, &j, JS_RUNNING, AS_LAUNCHING, 0);
	job_free(&j);
	unsigned long long handoffs = 0;
	for (size_t b = 0; b < HIST_MAX; b++)
		handoffs += m.node[0].handoff.n[b];
	CHECK(handoffs == 1);
	CHECK(m.attempts[AS_FAILED] == 1 && m.finished[JS_FAILED] == 1);
	/* A step that changes no attempt's state counts nothing. */
	job(&j, 3, T0 + 30000, 0, AS_RUNNING, T0 + 30010, 0);
	metrics_step(&m, &j, JS_RUNNING, AS_RUNNING, 0);
	job_free(&j);
	CHECK(m.attempts[AS_RUNNING] == 0);
	metrics_preempted(&m);
	metrics_paused(&m);
	metrics_refused(&m);
	metrics_refused(&m);

	CHECK((t = text_of(&m)) != NULL);
	CHECK(value(t, "cardbaton_attempts_total{outcome=\"succeeded\"}") == 1);
	CHECK(value(t, "cardbaton_attempts_total{outcome=\"aborted\"}") == 0);
	CHECK(value(t, "cardbaton_jobs_finished_total{state=\"failed\"}") == 1);
	CHECK(value(t, "cardbaton_preemptions_total") == 1);
	CHECK(value(t, "cardbaton_pauses_total") == 1);
	CHECK(value(t, "cardbaton_requests_refused_total") == 2);
	CHECK(value(t, "cardbaton_queue_wait_seconds_bucket{le=\"1\"}") == 1);     /* job 3: 10 ms */
	CHECK(value(t, "cardbaton_queue_wait_seconds_bucket{le=\"10\"}") == 3);
	CHECK(value(t, "cardbaton_queue_wait_seconds_bucket{le=\"+Inf\"}") == 3);
	CHECK(value(t, "cardbaton_queue_wait_seconds_count") == 3);
	CHECK(value(t, "cardbaton_handoff_seconds_bucket{node=\"n1\",le=\"0.025\"}") == 0);
	CHECK(value(t, "cardbaton_handoff_seconds_bucket{node=\"n1\",le=\"0.05\"}") == 1);
	CHECK(value(t, "cardbaton_handoff_seconds_count{node=\"n1\"}") == 1);
	CHECK(value(t, "cardbaton_handoff_seconds_count{node=\"n\\\"2\"}") == 0);
	CHECK(value(t, "cardbaton_jobs{state=\"queued\"}") == 3);
	CHECK(value(t, "cardbaton_jobs_held") == 1);
	CHECK(value(t, "cardbaton_queue_length{band=\"normal\"}") == 2);
	CHECK(value(t, "cardbaton_node_up{node=\"n\\\"2\"}") == 0);
	CHECK(value(t, "cardbaton_node_drained{node=\"n\\\"2\"}") == 1);
	CHECK(value(t, "cardbaton_gpu_state{node=\"n1\",gpu=\"0\",uuid=\"GPU-0\",state=\"leased\"}") == 1);
	CHECK(value(t, "cardbaton_gpu_state{node=\"n1\",gpu=\"0\",uuid=\"GPU-0\",state=\"idle\"}") == 0);
	CHECK(value(t, "cardbaton_gpu_state{node=\"n1\",gpu=\"1\",uuid=\"GPU-1\",state=\"idle\"}") == 1);
	CHECK(value(t, "cardbaton_gpu_memory_used_bytes{node=\"n1\",gpu=\"0\",uuid=\"GPU-0\"}") ==
	      1024.0 * 1048576);
	CHECK(value(t, "cardbaton_gpu_utilization_ratio{node=\"n1\",gpu=\"0\",uuid=\"GPU-0\"}") == 0.5);
	CHECK(value(t, "cardbaton_daemon_start_time_seconds") == T0 / 1000);
	/* When the cards were read (whole seconds); a node never read: none. */
	CHECK(value(t, "cardbaton_node_gpus_timestamp_seconds{node=\"n1\"}") == T0 / 1000 + 5);
	CHECK(value(t, "cardbaton_node_gpus_timestamp_seconds{node=\"n\\\"2\"}") == -1);
	/* Not a lab's spool: no user families. */
	CHECK(!strstr(t, "cardbaton_user_"));

	/* A restart: a new daemon reads the file back; one more success. */
	{
		const char *one[] = { "n1" };
		struct metrics m2;
		char *t2;

		CHECK(metrics_init(&m2, one, 1, T0 + 60000) == 0);
		CHECK(metrics_restore(&m2, t, strlen(t)) > 10);
		m2.attempts[AS_SUCCEEDED]++;
		CHECK((t2 = text_of(&m2)) != NULL);
		CHECK(value(t2, "cardbaton_attempts_total{outcome=\"succeeded\"}") == 2);
		CHECK(value(t2, "cardbaton_queue_wait_seconds_bucket{le=\"10\"}") == 3);
		CHECK(value(t2, "cardbaton_queue_wait_seconds_sum") == value(t, "cardbaton_queue_wait_seconds_sum"));
		CHECK(value(t2, "cardbaton_handoff_seconds_bucket{node=\"n1\",le=\"0.05\"}") == 1);
		CHECK(value(t2, "cardbaton_handoff_seconds_bucket{node=\"n1\",le=\"+Inf\"}") == 1);
		CHECK(value(t2, "cardbaton_handoff_seconds_count{node=\"n1\"}") == 1);
		CHECK(value(t2, "cardbaton_preemptions_total") == 1);
		CHECK(value(t2, "cardbaton_requests_refused_total") == 2);    /* read back */
		CHECK(m2.node[0].handoff.n[3] == 1 && m2.node[0].handoff.n[4] == 0);
		free(t2);
		metrics_free(&m2);
	}
	free(t);
	metrics_free(&m);
}

/* A lab's users: cardbaton_user_gpu_seconds_total (a counter) and
 * cardbaton_user_gpus_held (a gauge) per user, labels escaped; no user
 * (not a lab's spool): neither family, not even its HELP. */
static void test_users(void)
{
	const char *nodes[] = { "n1" };
	const struct metrics_user users[] = {
		{ "alice", 36000.5, 2 }, { "bob\"x", 0, 0 }, { "-", 12, 1 },
	};
	struct metrics m;
	char *t;

	CHECK(metrics_init(&m, nodes, 1, T0) == 0);
	CHECK((t = text_users(&m, users, 3)) != NULL);
	CHECK(value(t, "cardbaton_user_gpu_seconds_total{user=\"alice\"}") == 36000.5);
	CHECK(value(t, "cardbaton_user_gpu_seconds_total{user=\"bob\\\"x\"}") == 0);
	CHECK(value(t, "cardbaton_user_gpu_seconds_total{user=\"-\"}") == 12);
	CHECK(value(t, "cardbaton_user_gpus_held{user=\"alice\"}") == 2);
	CHECK(value(t, "cardbaton_user_gpus_held{user=\"bob\\\"x\"}") == 0);
	CHECK(value(t, "cardbaton_user_gpus_held{user=\"-\"}") == 1);
	CHECK(t && strstr(t, "# TYPE cardbaton_user_gpu_seconds_total counter\n") != NULL);
	CHECK(t && strstr(t, "# TYPE cardbaton_user_gpus_held gauge\n") != NULL);
	/* Not read back at a restart: made from the records each time. */
	{
		struct metrics m2;

		CHECK(metrics_init(&m2, nodes, 1, T0) == 0);
		metrics_restore(&m2, t, strlen(t));
		free(t);
		CHECK((t = text_of(&m2)) != NULL);
		CHECK(t && !strstr(t, "cardbaton_user_"));
		metrics_free(&m2);
	}
	free(t);
	metrics_free(&m);
}

/* What is not ours, or not a count, is left out. */
static void test_restore_hostile(void)
{
	const char *nodes[] = { "n1" };
	static const char bad[] =
		"# HELP cardbaton_pauses_total x\n"
		"cardbaton_pauses_total -3\n"
		"cardbaton_preemptions_total 1.5\n"
		"cardbaton_attempts_total{outcome=\"failed\"} NaN\n"
		"cardbaton_attempts_total{outcome=\"lost\"} 1e300\n"
		"cardbaton_attempts_total{outcome=\"succeeded\"}  \n"
		"cardbaton_attempts_total{outcome=\"cancelled\"} 4\n"
		"cardbaton_handoff_seconds_bucket{node=\"gone\",le=\"+Inf\"} 9\n"
		"cardbaton_handoff_seconds_bucket{node=\"n1\",le=\"0.005\"} 5\n"
		"cardbaton_handoff_seconds_bucket{node=\"n1\",le=\"0.01\"} 2\n"
		"cardbaton_handoff_seconds_bucket{node=\"n1\",le=\"+Inf\"} 7\n"
		"cardbaton_queue_wait_seconds_sum inf\n"
		"no blank\n"
		"\n \n";
	struct metrics m;

	CHECK(metrics_init(&m, nodes, 1, T0) == 0);
	metrics_restore(&m, bad, sizeof bad - 1);
	CHECK(m.pauses == 0 && m.preemptions == 0);
	CHECK(m.attempts[AS_FAILED] == 0 && m.attempts[AS_LOST] == 0 && m.attempts[AS_SUCCEEDED] == 0);
	CHECK(m.attempts[AS_CANCELLED] == 4);
	CHECK(m.wait.sum == 0);
	/* Buckets that go down: none taken below; +Inf's 7 over 5. */
	CHECK(m.node[0].handoff.n[0] == 5 && m.node[0].handoff.n[1] == 0);
	CHECK(m.node[0].handoff.n[HANDOFF_NB] == 2);
	metrics_restore(&m, "", 0);
	/* A sum past 10^15 s: its "%.3f" would be too long to read back
	 * (1e308: 313 digits; fuzz_metrics).  10^15 itself is taken. */
	metrics_restore(&m, "cardbaton_queue_wait_seconds_sum 1e308\n", 39);
	CHECK(m.wait.sum == 0);
	metrics_restore(&m, "cardbaton_queue_wait_seconds_sum 1000000000000001\n", 50);
	CHECK(m.wait.sum == 0);
	metrics_restore(&m, "cardbaton_queue_wait_seconds_sum 1e15\n", 38);
	CHECK(m.wait.sum == 1e15);
	metrics_free(&m);
}

int main(void)
{
	test_steps();
	test_restore_hostile();
	test_users();
	return T_DONE();
}
