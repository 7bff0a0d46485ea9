/*
 * fuzz_jobfile.c - job files (spool-layout/jobfile.c over yamlx.c and
 * libyaml): YAML, and JSON read as YAML.
 *
 * Properties, beyond "no crash, no leak, no undefined behaviour":
 *  - a refused file gets exit code 65 and a one-line message that
 *    starts with the file name, and the job_def is left zeroed;
 *  - an accepted job survives the trips it takes in real use, each
 *    giving back the same job_def: jobdef_to_json -> jobdef_from_json
 *    (the job record), and the JSON text `cardbaton submit` writes into
 *    new/ -> jobdef_parse (the daemon reading it back);
 *    (begin to the ms: its text, a fraction when it has one, reads back
 *    the same ms);
 *  - jobdef_merge onto an empty job_def copies it exactly;
 *  - resume_command is set exactly when the field is given; a list
 *    (resume_argv, at least one word, the first not empty) comes with
 *    its display string, shell_join of the list;
 *  - an array or sweep has 1 to JOB_MAX_MEMBERS members; each member
 *    made is a plain job (no array, params, max_running) that takes the
 *    record's trip too, or is refused with one line.
 */
#include <cJSON.h>

#include "spool.h"
#include "fuzz.h"

static int opt_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

static int strv_eq(char **a, size_t na, char **b, size_t nb)
{
	if (na != nb)
		return 0;
	for (size_t i = 0; i < na; i++)
		if (strcmp(a[i], b[i]))
			return 0;
	return 1;
}

static int params_eq(const struct job_def *a, const struct job_def *b)
{
	if (a->nparams != b->nparams)
		return 0;
	for (size_t i = 0; i < a->nparams; i++)
		if (strcmp(a->params[i].key, b->params[i].key) ||
		    !strv_eq(a->params[i].vals, a->params[i].nvals, b->params[i].vals, b->params[i].nvals))
			return 0;
	return 1;
}

static int jd_eq(const struct job_def *a, const struct job_def *b);

/* A few members of JD (the first, the last): plain jobs whose record
 * form reads back the same. */
static void members(const struct job_def *jd)
{
	struct expander x;
	const char *why;

	FUZZ_CHECK(expander_init(&x, jd, &why) == 0);
	FUZZ_CHECK(x.n >= 1 && x.n <= JOB_MAX_MEMBERS);
	FUZZ_CHECK(jobdef_is_many(jd) || x.n == 1);
	for (size_t k = 0; jobdef_is_many(jd) && k < 2; k++) {
		struct job_def m, back;
		long long idx;
		cJSON *o;
		int r = expander_member(&x, k ? x.n - 1 : 0, 1, &m, &idx, &why);

		FUZZ_CHECK(r == 0 || r == 1);
		if (r == 1) {
			FUZZ_CHECK(why && fuzz_one_line(why));
			continue;
		}
		FUZZ_CHECK(!jobdef_is_many(&m) && !(m.set & JF_MAX_RUNNING) && idx >= 0);
		o = jobdef_to_json(&m);
		FUZZ_CHECK(o && jobdef_from_json(o, &back) == 0);
		FUZZ_CHECK(jd_eq(&m, &back));
		jobdef_free(&back);
		cJSON_Delete(o);
		jobdef_free(&m);
	}
	expander_free(&x);
}

static int jd_eq(const struct job_def *a, const struct job_def *b)
{
	return a->set == b->set && strv_eq(a->argv, a->argc, b->argv, b->argc) &&
	       opt_eq(a->shell, b->shell) && opt_eq(a->cwd, b->cwd) &&
	       opt_eq(a->node, b->node) && opt_eq(a->name, b->name) &&
	       opt_eq(a->resume_command, b->resume_command) &&
	       strv_eq(a->resume_argv, a->resume_argc, b->resume_argv, b->resume_argc) &&
	       a->ngpus == b->ngpus &&
	       (!a->ngpus || !memcmp(a->gpus, b->gpus, a->ngpus * sizeof *a->gpus)) &&
	       a->gpu_count == b->gpu_count && a->gpu_memory_mib == b->gpu_memory_mib &&
	       a->share == b->share &&
	       a->priority == b->priority && a->begin == b->begin &&
	       a->timeout_seconds == b->timeout_seconds &&
	       a->checkpoint_grace_seconds == b->checkpoint_grace_seconds &&
	       strv_eq(a->env, a->nenv, b->env, b->nenv) && opt_eq(a->array, b->array) &&
	       a->max_running == b->max_running && params_eq(a, b);
}

static int is_zero(const struct job_def *jd)
{
	static const struct job_def zero;

	return memcmp(jd, &zero, sizeof zero) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct job_def jd, back, merged;
	struct cb_err err = { 0 };
	cJSON *o, *p;
	char *text;

	if (jobdef_parse((const char *)data, size, "new/x.job", &jd, &err) < 0) {
		FUZZ_CHECK(err.msg != NULL);
		FUZZ_CHECK(err.ex == EX_DATAERR_ || err.ex == EX_OSERR_);
		FUZZ_CHECK(!strncmp(err.msg, "new/x.job:", 10));
		FUZZ_CHECK(fuzz_one_line(err.msg));
		FUZZ_CHECK(is_zero(&jd));
		cb_err_free(&err);
		return 0;
	}
	FUZZ_CHECK(err.msg == NULL);
	FUZZ_CHECK(!(jd.argv && jd.shell));
	FUZZ_CHECK(!!(jd.set & JF_COMMAND) == (jd.argv || jd.shell));
	FUZZ_CHECK(!jd.argv || jd.argc > 0);
	FUZZ_CHECK(jd.priority >= PRIO_MIN && jd.priority <= PRIO_MAX);
	FUZZ_CHECK(jd.gpu_count >= 0 && jd.gpu_count <= GPU_COUNT_MAX);
	FUZZ_CHECK(!(jd.set & JF_GPUS) || jd.ngpus > 0);
	FUZZ_CHECK(!!(jd.set & JF_RESUME) == !!jd.resume_command);
	FUZZ_CHECK(!jd.resume_argv == !jd.resume_argc);
	if (jd.resume_argv) {
		char *shown = shell_join(jd.resume_argv, jd.resume_argc);

		FUZZ_CHECK(jd.resume_argc <= JOB_MAX_ARGS && jd.resume_argv[0][0]);
		FUZZ_CHECK(shown && !strcmp(shown, jd.resume_command));
		free(shown);
	}
	if (jobdef_check(&jd, "new/x.job", &err) < 0) {
		FUZZ_CHECK(err.msg && fuzz_one_line(err.msg));
		cb_err_free(&err);
	}
	(void)jobdef_gpu_need(&jd);
	members(&jd);

	/* The record's copy. */
	o = jobdef_to_json(&jd);
	FUZZ_CHECK(o != NULL);
	FUZZ_CHECK(jobdef_from_json(o, &back) == 0);
	FUZZ_CHECK(jd_eq(&jd, &back));
	jobdef_free(&back);

	/* What submit writes into new/, as the daemon reads it. */
	text = cJSON_PrintUnformatted(o);
	FUZZ_CHECK(text != NULL);
	if (jobdef_parse(text, strlen(text), "new/y.job", &back, &err) < 0) {
		fprintf(stderr, "submit's JSON refused: %s\n%s\n", err.msg, text);
		FUZZ_CHECK(!"the JSON form of an accepted job file parses");
	}
	FUZZ_CHECK(jd_eq(&jd, &back));
	jobdef_free(&back);
	/* And through cJSON's parser (a record being read). */
	p = cJSON_Parse(text);
	FUZZ_CHECK(p != NULL);
	FUZZ_CHECK(jobdef_from_json(p, &back) == 0);
	FUZZ_CHECK(jd_eq(&jd, &back));
	jobdef_free(&back);
	cJSON_Delete(p);
	cJSON_free(text);
	cJSON_Delete(o);

	memset(&merged, 0, sizeof merged);
	FUZZ_CHECK(jobdef_merge(&merged, &jd) == 0);
	merged.gpu_count = (merged.set & JF_GPU_COUNT) ? merged.gpu_count : jd.gpu_count;
	merged.checkpoint_grace_seconds = (merged.set & JF_GRACE) ?
		merged.checkpoint_grace_seconds : jd.checkpoint_grace_seconds;
	FUZZ_CHECK(jd_eq(&jd, &merged));
	jobdef_free(&merged);
	jobdef_free(&jd);
	return 0;
}
