/*
 * expand.h - one job definition that stands for many (expand.c;
 * cardbaton(5) "Arrays and sweeps"): an array (`array: "0-9%2"`, one
 * job per index) or a parameter sweep (`params:`, one job per
 * combination of the values, the first key varying slowest).
 *
 * Member M (0 .. n-1) of the definition is job FIRST + M: a plain job
 * (no array, params nor max_running) whose command words, shell
 * string, resume_command, name and cwd have "{index}" replaced by its
 * index and "{KEY}" by its value of KEY, and whose env has
 * CARDBATON_ARRAY_ID (FIRST), CARDBATON_ARRAY_INDEX and
 * CARDBATON_PARAM_KEY (these replace the user's own of those names).
 * An array's index is its index in the spec; a sweep's is M.
 */
#ifndef CARDBATON_EXPAND_H
#define CARDBATON_EXPAND_H

#include <stddef.h>

#include "jobfile.h"

#define ARRAY_INDEX_MAX 9999999LL

/*
 * An array spec: comma-separated elements N, A-B or A-B:STEP (A <= B,
 * STEP >= 1), then optionally %K (K >= 1): the indices, distinct, in
 * ascending order, and K (0: none).  NULL, or the problem (static
 * text; errno EINVAL, or ENOMEM) with A zeroed.
 */
struct array_spec {
	long long *idx;
	size_t n;
	long long limit;
};
const char *array_spec_parse(const char *s, struct array_spec *a);
void array_spec_free(struct array_spec *a);

/* Does JD stand for many jobs (array or params given)? */
int jobdef_is_many(const struct job_def *jd);

struct expander {
	const struct job_def *jd;
	struct array_spec a;    /* an array's; none for a sweep */
	size_t n;               /* members, 1..JOB_MAX_MEMBERS */
	long long limit;        /* %K or max_running; 0: none */
};

/* X for JD, which must stay as it is while X is used: 0, or -1 with
 * *WHY ("FIELD: problem", static text; X zeroed) when JD's many-job
 * fields do not go together (array with params, max_running alone,
 * more than JOB_MAX_MEMBERS jobs, ...) or, for ENOMEM, NULL. */
int expander_init(struct expander *x, const struct job_def *jd, const char **why);
/* Member M of X, the group's first job ID FIRST, into OUT (a job_def of
 * its own); *INDEX its index.  0; 1 with *WHY (static text) when the
 * member would break a limit of a job (its name longer than
 * JOB_NAME_MAX, a value longer than YX_MAX_SCALAR, or more than
 * JOBFILE_MAX bytes in all, once replaced), -1 (ENOMEM); OUT is
 * zeroed unless 0. */
int expander_member(const struct expander *x, size_t m, long long first,
		    struct job_def *out, long long *index, const char **why);
void expander_free(struct expander *x);

#endif
