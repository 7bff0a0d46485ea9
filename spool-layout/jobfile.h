/*
 * jobfile.h - job files, job.yaml or JSON (jobfile.c over yamlx.c, libyaml):
 * what a job asks for, and its JSON form.
 */
#ifndef CARDBATON_JOBFILE_H
#define CARDBATON_JOBFILE_H

#include <stddef.h>
#include <cJSON.h>

#include "util.h"

/* Job files dropped into new/ larger than this are rejected. */
#define JOBFILE_MAX (1u << 20)

/* Which fields of a job_def were given. */
enum {
	JF_COMMAND = 1 << 0,
	JF_CWD = 1 << 1,
	JF_NODE = 1 << 2,
	JF_GPUS = 1 << 3,
	JF_GPU_COUNT = 1 << 4,
	JF_PRIORITY = 1 << 5,
	JF_TIMEOUT = 1 << 6,
	JF_RESUME = 1 << 7,
	JF_GRACE = 1 << 8,
	JF_ENV = 1 << 9,
	JF_NAME = 1 << 10,
	JF_HOLD = 1 << 11,
	JF_BEGIN = 1 << 12,
	JF_AFTER = 1 << 13,
	JF_AFTER_ANY = 1 << 14,
	JF_ARRAY = 1 << 15,
	JF_PARAMS = 1 << 16,
	JF_MAX_RUNNING = 1 << 17,
	JF_GPU_MEMORY = 1 << 18,
	JF_SHARE = 1 << 19,
	JF_CK_TRANSFER = 1 << 20,
};

#define GPU_INDEX_MAX 1023
/* Limits of a job (cardbaton(5)): command words, env entries, bytes of
 * `name`; every value is at most YX_MAX_SCALAR bytes, the file at most
 * JOBFILE_MAX. */
#define JOB_MAX_ARGS 4096
#define JOB_MAX_ENV 4096
#define JOB_NAME_MAX 256
#define GPU_COUNT_MAX 1024
#define GPU_MEMORY_MAX (1LL << 24)      /* MiB: 16 TiB per card */
#define TIMEOUT_MAX 315360000LL         /* ten years, in seconds */
#define DEFAULT_GRACE 60
#define JOB_MAX_DEPS 1024       /* IDs in `after` and in `after_any` */
#define JOB_MAX_MEMBERS 10000   /* jobs one array or sweep makes */
#define JOB_MAX_PARAMS 64       /* keys of `params` */

/* A key of a parameter sweep and its values (distinct, non-empty). */
struct job_param {
	char *key;              /* [A-Za-z_][A-Za-z0-9_]*, not "index" */
	char **vals;
	size_t nvals;
};

struct job_def {
	unsigned set;           /* JF_* bits of the fields present */
	char **argv;            /* list command (argc >= 1), or NULL */
	size_t argc;
	char *shell;            /* string command for sh -c, or NULL */
	char *cwd, *node, *name, *resume_command;
	/* resume_command (set: resumable) is a string for sh -c, or, when
	 * resume_argv is set (a list, run as it is), that list joined for
	 * display (shell_join). */
	char **resume_argv;
	size_t resume_argc;
	int *gpus;              /* pinned physical indices, distinct */
	size_t ngpus;
	long long gpu_count;    /* 0 = CPU job; default 1 (see jobdef_gpu_need) */
	long long gpu_memory_mib;       /* each card's total memory at least this; 0: any */
	int checkpoint_transfer;        /* its checkpoint may be copied to another node
					   to resume there (needs resume_command) */
	int share;              /* may share its cards with other sharing jobs (needs
				   gpu_memory_mib: what it takes of each) */
	long long priority;     /* PRIO_MIN..PRIO_MAX, default 0 */
	long long timeout_seconds;              /* 0 = no limit */
	long long checkpoint_grace_seconds;     /* default DEFAULT_GRACE */
	char **env;             /* "NAME=value", NAME a shell identifier */
	size_t nenv;
	int hold;               /* not placed until released */
	long long begin;        /* epoch ms (to the ms, rfc3339_parse): not placed before; 0 = none */
	/* Job IDs (distinct, each lower than the job's own): placed once
	 * every `after` job has succeeded, and every `after_any` job has
	 * ended. */
	long long *after, *after_any;
	size_t nafter, nafter_any;
	/* Many jobs from one (expand.h): an array spec ("0-9%2"), or the
	 * keys of a sweep, in order; at most max_running of them run at
	 * once (0: no limit). */
	char *array;
	struct job_param *params;
	size_t nparams;
	long long max_running;
};

/*
 * Parse a job file (YAML, or JSON, which is read as YAML) into JD.
 * FNAME is used in messages only.  Errors: EX_DATAERR_ with
 * "FNAME:LINE: KEY: problem" (or "FNAME: problem" when there is no
 * line: empty file, not UTF-8, ...).  Unknown keys, wrong types, out
 * of range numbers, duplicate keys, anchors/aliases, several
 * documents, and a job with no command are errors.  JD is zeroed first
 * and gets the defaults (gpu_count 1, checkpoint_grace_seconds 60) for
 * fields not given (their JF_ bits stay clear); on failure it is freed
 * and zeroed.
 */
int jobdef_parse(const char *buf, size_t len, const char *fname,
		 struct job_def *jd, struct cb_err *err);

/* Checks that need no file: a command given, share with
 * gpu_memory_mib, gpus and gpu_count consistent (gpu_count, when both are set, must equal ngpus), env
 * names valid.  Same error form with FNAME and no line. */
int jobdef_check(const struct job_def *jd, const char *fname, struct cb_err *err);

/* Number of cards the job needs: ngpus when pinned, else gpu_count
 * when given, else 1. */
long long jobdef_gpu_need(const struct job_def *jd);

/* Copy every field set in SRC over DST (used for flag overrides). */
int jobdef_merge(struct job_def *dst, const struct job_def *src);

/* JSON form (the fields of job.yaml, only those set; "command" is an
 * array or a string).  jobdef_from_json accepts what jobdef_to_json
 * made; -1 with errno EINVAL on anything else. */
cJSON *jobdef_to_json(const struct job_def *jd);
int jobdef_from_json(const cJSON *obj, struct job_def *jd);

void jobdef_free(struct job_def *jd);
void jobdef_params_free(struct job_def *jd);    /* params only */

#endif
