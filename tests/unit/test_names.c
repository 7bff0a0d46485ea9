/* Unit tests: the name grammar (LAYOUT.md §2) and job records (§6). */
#include <stdlib.h>
#include <string.h>

#include "spool.h"
#include "t.h"

static void names(void)
{
	long long p, s, cnt;
	char *a = name_queued(10, 42), *b = name_queued(10, 43), *c = name_queued(-5, 1);
	char *e = name_queued(PRIO_MAX, SEQ_MAX), *f = name_queued(PRIO_MIN, 1);
	char sid[9];
	int n;

	CHECK_STR(a, "099999990-0000000042.job");
	/* Byte order is dispatch order: priority first, then FIFO. */
	CHECK(strcmp(a, b) < 0);
	CHECK(strcmp(b, c) < 0);
	CHECK(strcmp(e, a) < 0);
	CHECK(strcmp(c, f) < 0);
	CHECK(name_parse_queued(a, &p, &s) == 0 && p == 10 && s == 42);
	CHECK(name_parse_queued(f, &p, &s) == 0 && p == PRIO_MIN && s == 1);
	CHECK(name_queued(PRIO_MAX + 1, 1) == NULL);
	CHECK(name_queued(0, 0) == NULL);
	CHECK(name_queued(0, SEQ_MAX + 1) == NULL);
	CHECK(name_parse_queued("099999990-0000000042.jo", &p, &s) < 0);
	CHECK(name_parse_queued("09999999a-0000000042.job", &p, &s) < 0);
	CHECK(name_parse_queued("099999990-0000000000.job", &p, &s) < 0);
	CHECK(name_parse_queued("../99990-0000000042.job", &p, &s) < 0);
	free(a);
	free(b);
	free(c);
	free(e);
	free(f);

	a = name_plain(7);
	CHECK_STR(a, "0000000007.job");
	CHECK(name_parse_plain(a, &s) == 0 && s == 7);
	CHECK(name_parse_plain("000000007.job", &s) < 0);
	CHECK(name_parse_plain("0000000007.jobx", &s) < 0);
	free(a);

	a = name_hook(42);
	CHECK_STR(a, "0000000042.hook");
	CHECK(name_parse_hook(a, &s) == 0 && s == 42);
	CHECK(name_parse_hook("0000000042.job", &s) < 0);
	CHECK(name_parse_hook("000000042.hook", &s) < 0);
	CHECK(name_parse_hook("0000000000.hook", &s) < 0);
	CHECK(name_parse_hook("../0000042.hook", &s) < 0);
	CHECK(name_hook(0) == NULL && name_hook(SEQ_MAX + 1) == NULL);
	free(a);

	CHECK(name_classify_new(".hidden.job", &p, &s, &cnt) == -1);
	CHECK(name_classify_new("notes.txt", &p, &s, &cnt) == -1);
	CHECK(name_classify_new("x.job", &p, &s, &cnt) == 0);
	CHECK(name_classify_new("099999990-0000000042.job", &p, &s, &cnt) == 1 && s == 42 && cnt == 1);

	/* Blocks: the N jobs of an array or sweep, before acceptance. */
	a = name_block_queued(10, 42, 6);
	CHECK_STR(a, "099999990-0000000042+00006.job");
	CHECK(name_classify_new(a, &p, &s, &cnt) == 2 && p == 10 && s == 42 && cnt == 6);
	free(a);
	a = name_block(42, 10000);
	CHECK_STR(a, "0000000042+10000.job");
	CHECK(name_parse_block(a, &s, &cnt) == 0 && s == 42 && cnt == 10000);
	CHECK(name_parse_plain(a, &s) < 0);
	free(a);
	CHECK(name_block(42, 0) == NULL && name_block(42, 10001) == NULL);
	CHECK(name_block(SEQ_MAX, 2) == NULL);
	a = name_block(SEQ_MAX - 1, 2);
	CHECK_STR(a, "9999999998+00002.job");
	free(a);
	CHECK(name_parse_block("0000000042+00000.job", &s, &cnt) < 0);
	CHECK(name_parse_block("0000000042+10001.job", &s, &cnt) < 0);
	CHECK(name_parse_block("9999999999+00002.job", &s, &cnt) < 0);
	CHECK(name_parse_block("0000000042-00002.job", &s, &cnt) < 0);
	CHECK(name_classify_new("099999990-0000000042+0006.job", &p, &s, &cnt) == 0);
	CHECK(name_classify_new("x99999990-0000000042+00006.job", &p, &s, &cnt) == 0);

	CHECK(jobid_parse("42", &s) == 0 && s == 42);
	CHECK(jobid_parse("0000000042", &s) == 0 && s == 42);
	CHECK(jobid_parse("0", &s) < 0);
	CHECK(jobid_parse("-1", &s) < 0);
	CHECK(jobid_parse("42x", &s) < 0);
	CHECK(jobid_parse("", &s) < 0);
	CHECK(jobid_parse("99999999999", &s) < 0);
	CHECK(jobid_parse("../1", &s) < 0);

	a = attempt_id("3fa9c2d1", 42, 0);
	CHECK_STR(a, "3fa9c2d1-42-0");
	CHECK(attempt_id_parse(a, sid, &s, &n) == 0 && s == 42 && n == 0 && !strcmp(sid, "3fa9c2d1"));
	CHECK(attempt_job("3fa9c2d1", a) == 42);
	CHECK(attempt_job("00000000", a) == 0);
	CHECK(attempt_id_parse("3fa9c2d1-42", sid, &s, &n) < 0);
	CHECK(attempt_id_parse("3fa9c2dX-42-1", sid, &s, &n) < 0);
	CHECK(attempt_id_parse("3fa9c2d1-/-1", sid, &s, &n) < 0);
	/* Only the canonical form (found by tests/fuzz/fuzz_names). */
	CHECK(attempt_id_parse("3fa9c2d1-42-00", sid, &s, &n) < 0);
	CHECK(attempt_id_parse("3fa9c2d1-042-0", sid, &s, &n) < 0);
	CHECK(attempt_id_parse("3fa9c2d1-42--0", sid, &s, &n) < 0);
	CHECK(attempt_id_parse("3fa9c2d1-42-10", sid, &s, &n) == 0 && s == 42 && n == 10);
	free(a);
}

static void records(void)
{
	struct job j = { 0 }, k;
	struct attempt *a;
	struct cb_err err = { 0 };
	char *text, *text2;
	cJSON *st;
	char *argv[] = { "python3", "train.py", "--seed", "0", "a b\"c\n" };

	j.id = 42;
	j.rev = 3;
	j.state = JS_FAILED;
	j.reason = strdup("exit status 3");
	j.priority = -7;
	j.def.set = JF_COMMAND | JF_GPU_COUNT | JF_NAME;
	j.def.argv = calloc(5, sizeof *j.def.argv);
	for (int i = 0; i < 5; i++)
		j.def.argv[i] = strdup(argv[i]);
	j.def.argc = 5;
	j.def.gpu_count = 2;
	j.def.name = strdup("sweep");
	j.submitted = 1764400000123LL;
	j.queued_at = 1764400000123LL;
	a = job_new_attempt(&j);
	CHECK(a->n == 0);
	a->id = strdup("3fa9c2d1-42-0");
	a->node = strdup("local");
	a->gpus = calloc(2, sizeof *a->gpus);
	a->gpus[0] = 1;
	a->gpus[1] = 3;
	a->ngpus = 2;
	a->uuids = calloc(2, sizeof *a->uuids);
	a->uuids[0] = strdup("GPU-1");
	a->uuids[1] = strdup("GPU-3");
	a->nuuids = 2;
	a->state = AS_FAILED;
	a->has_exit = 1;
	a->exit_code = 3;
	a->started = 1764400001000LL;
	a->finished = 1764400002500LL;
	a->reason = strdup("exit status 3");
	j.finished = a->finished;

	text = job_to_json(&j);
	CHECK(text != NULL);
	CHECK(job_from_json(text, strlen(text), &k, &err) == 0);
	CHECK(k.id == 42 && k.rev == 3 && k.state == JS_FAILED && k.priority == -7);
	CHECK(k.natt == 1 && k.att[0].ngpus == 2 && k.att[0].gpus[1] == 3);
	CHECK_STR(k.att[0].uuids[1], "GPU-3");
	CHECK(k.att[0].has_exit && k.att[0].exit_code == 3);
	CHECK(k.att[0].finished == 1764400002500LL && k.submitted == 1764400000123LL);
	CHECK(k.def.argc == 5);
	CHECK_STR(k.def.argv[4], "a b\"c\n");
	text2 = job_to_json(&k);
	CHECK_STR(text, text2);

	st = job_status_json(&j);
	CHECK(cJSON_GetObjectItem(st, "attempts")->valueint == 1);
	CHECK_STR(cJSON_GetObjectItem(st, "id")->valuestring, "42");
	CHECK_STR(cJSON_GetObjectItem(st, "state")->valuestring, "failed");
	CHECK(cJSON_GetObjectItem(st, "exit_code")->valueint == 3);
	CHECK_STR(cJSON_GetObjectItem(st, "node")->valuestring, "local");
	CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(st, "gpu_uuids")) == 2);
	CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(st, "command")) == 5);
	CHECK_STR(cJSON_GetObjectItem(st, "finished")->valuestring, "2025-11-29T07:06:42Z");
	cJSON_Delete(st);

	free(text);
	free(text2);
	job_free(&k);
	job_free(&j);

	CHECK(job_from_json("{\"id\": \"../1\"}", 14, &k, &err) < 0);
	CHECK(job_from_json("not json", 8, &k, &err) < 0);
	/* Numbers out of range or not integers (found by tests/fuzz/fuzz_record:
	 * the cast of 1e300 was undefined). */
	{
		static const char *const bad[] = {
			"{\"id\":\"5\",\"rev\":1e300,\"state\":\"queued\",\"priority\":0,\"job\":{},\"attempts\":[]}",
			"{\"id\":\"5\",\"rev\":9223372036854775808,\"state\":\"queued\",\"priority\":0,\"job\":{},\"attempts\":[]}",
			"{\"id\":\"5\",\"rev\":1,\"state\":\"queued\",\"priority\":0,\"submitted_ms\":-1e19,\"job\":{},\"attempts\":[]}",
			"{\"id\":\"5\",\"rev\":1.5,\"state\":\"queued\",\"priority\":0,\"job\":{},\"attempts\":[]}",
			"{\"id\":\"5\",\"rev\":1,\"state\":\"queued\",\"priority\":0,\"job\":{},\"attempts\":"
			"[{\"n\":0,\"id\":\"a\",\"state\":\"running\",\"gpus\":[1.5]}]}",
			/* Past 2^53, and times past 9999 or before 1970: cJSON
			 * wrote 99999999999999990 back as 1e+17, and the
			 * "submitted" beside it changed (fuzz_record). */
			"{\"id\":\"5\",\"rev\":9007199254740994,\"state\":\"queued\",\"priority\":0,\"job\":{},\"attempts\":[]}",
			"{\"id\":\"5\",\"rev\":1,\"state\":\"queued\",\"priority\":0,\"submitted_ms\":99999999999999990,\"job\":{},\"attempts\":[]}",
			"{\"id\":\"5\",\"rev\":1,\"state\":\"queued\",\"priority\":0,\"finished_ms\":253402300800000,\"job\":{},\"attempts\":[]}",
			"{\"id\":\"5\",\"rev\":1,\"state\":\"queued\",\"priority\":0,\"started_ms\":-1,\"job\":{},\"attempts\":[]}",
			"{\"id\":\"5\",\"rev\":1,\"state\":\"queued\",\"priority\":0,\"job\":{},\"attempts\":"
			"[{\"n\":0,\"id\":\"a\",\"state\":\"running\",\"started_ms\":1e17}]}",
		};

		for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
			CHECK(job_from_json(bad[i], strlen(bad[i]), &k, &err) < 0);
		CHECK(job_from_json("{\"id\":\"5\",\"rev\":9007199254740992,\"state\":\"queued\","
				    "\"priority\":0,\"job\":{},\"attempts\":[]}", 86, &k, &err) == 0 &&
		      k.rev == 9007199254740992LL);
		job_free(&k);
		/* The last time four digits of year write, and back. */
		{
			const char *last = "{\"id\":\"5\",\"rev\":1,\"state\":\"queued\",\"priority\":0,"
					   "\"finished_ms\":253402300799999,\"job\":{},\"attempts\":[]}";

			CHECK(job_from_json(last, strlen(last), &k, &err) == 0 &&
			      k.finished == TIME_MS_MAX);
		}
		text = job_to_json(&k);
		CHECK(text && strstr(text, "\"9999-12-31T23:59:59Z\""));
		free(text);
		job_free(&k);
	}
	cb_err_free(&err);
}

int main(void)
{
	names();
	records();
	return T_DONE();
}
