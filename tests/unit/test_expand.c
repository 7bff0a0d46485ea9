/*
 * test_expand.c - arrays and sweeps (spool-layout/expand.h): the array
 * spec's grammar, the members of a definition in their order, the
 * substitutions and environment each gets, and the limits; the job
 * fields array, params and max_running (jobfile.c).
 */
#include <stdlib.h>
#include <string.h>

#include "spool.h"
#include "t.h"

static const char *spec(const char *s, char *buf, size_t cap)
{
	struct array_spec a;
	const char *why = array_spec_parse(s, &a);
	size_t len = 0;

	if (why)
		return why;
	buf[0] = 0;
	for (size_t i = 0; i < a.n && len < cap; i++)
		len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? "," : "", a.idx[i]);
	if (a.limit && len < cap)
		snprintf(buf + len, cap - len, "%%%lld", a.limit);
	array_spec_free(&a);
	return buf;
}

static void test_spec(void)
{
	char b[256];

	CHECK_STR(spec("0-9", b, sizeof b), "0,1,2,3,4,5,6,7,8,9");
	CHECK_STR(spec("0-9%2", b, sizeof b), "0,1,2,3,4,5,6,7,8,9%2");
	CHECK_STR(spec("1-10:3", b, sizeof b), "1,4,7,10");
	CHECK_STR(spec("7,3,5", b, sizeof b), "3,5,7");
	CHECK_STR(spec("1,3-5,10-14:2%1", b, sizeof b), "1,3,4,5,10,12,14%1");
	CHECK_STR(spec("5", b, sizeof b), "5");
	CHECK_STR(spec("0-9999", b, sizeof b), spec("0-9999", b, sizeof b));
	{
		struct array_spec a;

		CHECK(array_spec_parse("0-9999", &a) == NULL && a.n == 10000);
		array_spec_free(&a);
		CHECK(array_spec_parse("0-19999:2", &a) == NULL && a.n == 10000);
		array_spec_free(&a);
	}
	CHECK_STR(spec("0-10000", b, sizeof b), "more than 10000 jobs");
	CHECK_STR(spec("0-5000,6000-11000", b, sizeof b), "more than 10000 jobs");
	CHECK_STR(spec("1,1", b, sizeof b), "an index is given twice");
	CHECK_STR(spec("1-3,2", b, sizeof b), "an index is given twice");
	static const char *const bad[] = {
		"", "-1", "3-1", "1-5:0", "a", "1-", "1-2-3", "1,", ",1", "1%", "1%0", "1%2%3",
		"1 ", " 1", "+1", "0x10", "1-3:", "99999999", "0-99999999", "1%10001", "1-2:-1",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		struct array_spec a;
		const char *why = array_spec_parse(bad[i], &a);

		CHECK(why != NULL);
		if (!why)
			fprintf(stderr, "accepted: '%s'\n", bad[i]);
		CHECK(a.idx == NULL && a.n == 0);
	}
}

static int parse(const char *text, struct job_def *jd, struct cb_err *err)
{
	return jobdef_parse(text, strlen(text), "t.yaml", jd, err);
}

static const char *env_of(const struct job_def *jd, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < jd->nenv; i++)
		if (!strncmp(jd->env[i], name, n) && jd->env[i][n] == '=')
			return jd->env[i] + n + 1;
	return NULL;
}

static void test_array_members(void)
{
	struct cb_err err = { 0 };
	struct job_def jd, m;
	struct expander x;
	const char *why;
	long long idx;

	CHECK(parse("command: [train, --shard, '{index}', '{nope}', '{ind', '{{index}}']\n"
		    "name: 'part {index}'\ncwd: /runs/{index}\n"
		    "resume_command: [train, --resume, '{index}']\n"
		    "env: {CARDBATON_ARRAY_INDEX: mine, KEEP: '{index}'}\n"
		    "array: \"2-6:2%2\"\n", &jd, &err) == 0);
	CHECK(jobdef_is_many(&jd));
	CHECK(expander_init(&x, &jd, &why) == 0 && x.n == 3 && x.limit == 2);
	CHECK(expander_member(&x, 1, 40, &m, &idx, &why) == 0 && idx == 4);
	CHECK(m.argc == 6);
	CHECK_STR(m.argv[2], "4");
	CHECK_STR(m.argv[3], "{nope}");
	CHECK_STR(m.argv[4], "{ind");
	CHECK_STR(m.argv[5], "{4}");
	CHECK_STR(m.name, "part 4");
	CHECK_STR(m.cwd, "/runs/4");
	CHECK(m.resume_argc == 3);
	CHECK_STR(m.resume_argv[2], "4");
	CHECK_STR(m.resume_command, "train --resume 4");
	CHECK_STR(env_of(&m, "CARDBATON_ARRAY_INDEX"), "4");
	CHECK_STR(env_of(&m, "CARDBATON_ARRAY_ID"), "40");
	CHECK_STR(env_of(&m, "KEEP"), "{index}");      /* env values are the user's */
	CHECK(!jobdef_is_many(&m) && !m.array && !(m.set & (JF_ARRAY | JF_MAX_RUNNING)));
	jobdef_free(&m);
	expander_free(&x);
	jobdef_free(&jd);

	/* A string command and resume_command. */
	CHECK(parse("command: 'echo {index}'\nresume_command: 'go {index}'\narray: '7'\n", &jd, &err) == 0);
	CHECK(expander_init(&x, &jd, &why) == 0 && x.n == 1 && x.limit == 0);
	CHECK(expander_member(&x, 0, 9, &m, &idx, &why) == 0 && idx == 7);
	CHECK_STR(m.shell, "echo 7");
	CHECK_STR(m.resume_command, "go 7");
	jobdef_free(&m);
	expander_free(&x);
	jobdef_free(&jd);
}

static void test_sweep_members(void)
{
	static const char *const want[] = { "0.1 1", "0.1 2", "0.1 3", "0.01 1", "0.01 2", "0.01 3" };
	struct cb_err err = { 0 };
	struct job_def jd, m;
	struct expander x;
	const char *why;
	long long idx;

	CHECK(parse("command: [run, '{lr} {seed}']\nname: 'lr{lr}-s{seed}-{index}'\n"
		    "params:\n  lr: [0.1, '0.01']\n  seed: [1, 2, 3]\nmax_running: 4\n", &jd, &err) == 0);
	CHECK(jd.nparams == 2 && jd.params[0].nvals == 2 && jd.params[1].nvals == 3);
	CHECK(expander_init(&x, &jd, &why) == 0 && x.n == 6 && x.limit == 4);
	for (size_t k = 0; k < 6; k++) {
		char ks[2] = { (char)('0' + k), 0 };

		CHECK(expander_member(&x, k, 100, &m, &idx, &why) == 0 && idx == (long long)k);
		CHECK_STR(m.argv[1], want[k]);
		CHECK_STR(env_of(&m, "CARDBATON_ARRAY_INDEX"), ks);
		CHECK(env_of(&m, "CARDBATON_PARAM_lr") && !strncmp(m.argv[1], env_of(&m, "CARDBATON_PARAM_lr"),
								     strlen(env_of(&m, "CARDBATON_PARAM_lr"))));
		jobdef_free(&m);
	}
	CHECK(expander_member(&x, 5, 100, &m, &idx, &why) == 0);
	CHECK_STR(m.name, "lr0.01-s3-5");
	CHECK_STR(env_of(&m, "CARDBATON_PARAM_seed"), "3");
	jobdef_free(&m);
	expander_free(&x);

	/* The JSON form (in new/, and a record's) reads back the same. */
	{
		cJSON *o = jobdef_to_json(&jd);
		char *text = cJSON_PrintUnformatted(o);
		struct job_def back;

		CHECK(strstr(text, "\"params\":{\"lr\":[\"0.1\",\"0.01\"],\"seed\":[\"1\",\"2\",\"3\"]}") != NULL);
		CHECK(strstr(text, "\"max_running\":4") != NULL);
		CHECK(jobdef_from_json(o, &back) == 0 && back.nparams == 2 && back.max_running == 4);
		CHECK_STR(back.params[1].vals[2], "3");
		jobdef_free(&back);
		CHECK(parse(text, &back, &err) == 0 && back.nparams == 2);
		jobdef_free(&back);
		cJSON_free(text);
		cJSON_Delete(o);
	}
	jobdef_free(&jd);

	/* A value that makes the name too long, once replaced. */
	{
		char buf[600];

		snprintf(buf, sizeof buf, "command: [x]\nname: 'n-{v}'\nparams: {v: [a, %0300d]}\n", 0);
		CHECK(parse(buf, &jd, &err) == 0);
		CHECK(expander_init(&x, &jd, &why) == 0);
		CHECK(expander_member(&x, 0, 1, &m, &idx, &why) == 0);
		jobdef_free(&m);
		CHECK(expander_member(&x, 1, 1, &m, &idx, &why) == 1 && strstr(why, "name:"));
		expander_free(&x);
		jobdef_free(&jd);
	}
}

/* What jobdef_parse refuses, and says. */
static void test_fields(void)
{
	static const struct { const char *text, *says; } bad[] = {
		{ "command: [x]\narray: '0-3'\nparams: {a: [1]}\n", "cannot be combined" },
		{ "command: [x]\nmax_running: 2\n", "max_running: only for an array or params" },
		{ "command: [x]\narray: '0-3%2'\nmax_running: 2\n", "gives it already" },
		{ "command: [x]\narray: '0-10000'\n", "more than 10000 jobs" },
		{ "command: [x]\narray: '3-1'\n", "array" },
		{ "command: [x]\narray: [1, 2]\n", "array" },
		{ "command: [x]\nparams: {}\n", "at least one parameter" },
		{ "command: [x]\nparams: {a: []}\n", "at least one value" },
		{ "command: [x]\nparams: {a: [1, 1]}\n", "listed twice" },
		{ "command: [x]\nparams: {a: ['']}\n", "must not be empty" },
		{ "command: [x]\nparams: {a: [\"x\\ty\"]}\n", "control characters" },
		{ "command: [x]\nparams: {index: [1]}\n", "array index" },
		{ "command: [x]\nparams: {1a: [1]}\n", "not a valid parameter name" },
		{ "command: [x]\nparams: {a: 1}\n", "params.a" },
		{ "command: [x]\nparams: [a]\n", "params" },
		{ "command: [x]\nparams: {a: [[1]]}\n", "params.a" },
		{ "command: [x]\nparams: {a: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], b: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "
		  "c: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], d: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]}\n", "more than 10000 jobs" },
		{ "command: [x]\narray: '0-1'\nmax_running: 0\n", "max_running" },
		{ "command: [x]\narray: '0-1'\nmax_running: 10001\n", "max_running" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		struct cb_err err = { 0 };
		struct job_def jd;

		CHECK(parse(bad[i].text, &jd, &err) < 0 && err.ex == EX_DATAERR_);
		CHECK(err.msg && strstr(err.msg, bad[i].says));
		if (!err.msg || !strstr(err.msg, bad[i].says))
			fprintf(stderr, "case %zu: %s\n", i, err.msg ? err.msg : "(accepted)");
		cb_err_free(&err);
	}
}

int main(void)
{
	test_spec();
	test_array_members();
	test_sweep_members();
	test_fields();
	return T_DONE();
}
