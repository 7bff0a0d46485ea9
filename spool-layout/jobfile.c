/*
 * jobfile.c - job files (job.yaml, or the same fields in JSON; SPEC §4)
 * and their JSON form inside job records.
 *
 * One table lists the fields; both readers (YAML through yamlx.c, and
 * the cJSON records the daemon wrote) check each value against the
 * same rules, so a record can never hold what a job file could not.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "expand.h"
#include "spool.h"
#include "yamlx.h"

#define MAX_ARGS JOB_MAX_ARGS   /* command arguments */
#define MAX_ENV JOB_MAX_ENV     /* env entries */
#define NAME_MAX_LEN JOB_NAME_MAX       /* the `name` field, in bytes */

enum kind { K_COMMAND, K_STR, K_INT, K_GPUS, K_ENV, K_BOOL, K_TIME, K_IDS, K_PARAMS };   /* K_COMMAND: see cmd_at */

struct field {
	const char *key;
	unsigned bit;
	enum kind kind;
	size_t off;                     /* K_STR: char *; K_INT, K_TIME: long long; K_BOOL: int */
	long long lo, hi;               /* K_INT */
	const char *(*check)(const char *);     /* K_STR: problem or NULL */
};

static const char *check_nonempty(const char *s);
static const char *check_node(const char *s);
static const char *check_name(const char *s);
static const char *check_array(const char *s);
static int env_name_ok(const char *s, size_t len);

#define OFF(m) offsetof(struct job_def, m)
static const struct field fields[] = {     /* in the order JSON shows them */
	{ "name", JF_NAME, K_STR, OFF(name), 0, 0, check_name },
	{ "command", JF_COMMAND, K_COMMAND, 0, 0, 0, NULL },
	{ "cwd", JF_CWD, K_STR, OFF(cwd), 0, 0, check_nonempty },
	{ "node", JF_NODE, K_STR, OFF(node), 0, 0, check_node },
	{ "gpus", JF_GPUS, K_GPUS, 0, 0, 0, NULL },
	{ "gpu_count", JF_GPU_COUNT, K_INT, OFF(gpu_count), 0, GPU_COUNT_MAX, NULL },
	{ "gpu_memory_mib", JF_GPU_MEMORY, K_INT, OFF(gpu_memory_mib), 1, GPU_MEMORY_MAX, NULL },
	{ "share", JF_SHARE, K_BOOL, OFF(share), 0, 0, NULL },
	{ "priority", JF_PRIORITY, K_INT, OFF(priority), PRIO_MIN, PRIO_MAX, NULL },
	{ "hold", JF_HOLD, K_BOOL, OFF(hold), 0, 0, NULL },
	{ "begin", JF_BEGIN, K_TIME, OFF(begin), 0, 0, NULL },
	{ "after", JF_AFTER, K_IDS, 0, 0, 0, NULL },
	{ "after_any", JF_AFTER_ANY, K_IDS, 0, 0, 0, NULL },
	{ "array", JF_ARRAY, K_STR, OFF(array), 0, 0, check_array },
	{ "params", JF_PARAMS, K_PARAMS, 0, 0, 0, NULL },
	{ "max_running", JF_MAX_RUNNING, K_INT, OFF(max_running), 1, JOB_MAX_MEMBERS, NULL },
	{ "timeout_seconds", JF_TIMEOUT, K_INT, OFF(timeout_seconds), 0, TIMEOUT_MAX, NULL },
	{ "resume_command", JF_RESUME, K_COMMAND, 0, 0, 0, NULL },
	{ "checkpoint_grace_seconds", JF_GRACE, K_INT, OFF(checkpoint_grace_seconds),
	  0, TIMEOUT_MAX, NULL },
	{ "checkpoint_transfer", JF_CK_TRANSFER, K_BOOL, OFF(checkpoint_transfer), 0, 0, NULL },
	{ "env", JF_ENV, K_ENV, 0, 0, 0, NULL },
};
#define NFIELDS (sizeof fields / sizeof *fields)

static char **str_at(struct job_def *jd, const struct field *f)
{
	return (char **)(void *)((char *)jd + f->off);
}

static long long *ll_at(struct job_def *jd, const struct field *f)
{
	return (long long *)(void *)((char *)jd + f->off);
}

static int *int_at(struct job_def *jd, const struct field *f)
{
	return (int *)(void *)((char *)jd + f->off);
}

/* A list of job IDs: after or after_any. */
struct ids_ref {
	long long **v;
	size_t *n;
};

static struct ids_ref ids_at(struct job_def *jd, const struct field *f)
{
	if (f->bit == JF_AFTER)
		return (struct ids_ref){ &jd->after, &jd->nafter };
	return (struct ids_ref){ &jd->after_any, &jd->nafter_any };
}

/* X at index I of the list V[0..I): not a repeat.  1 when new. */
static int id_new(const long long *v, size_t i, long long x)
{
	for (size_t k = 0; k < i; k++)
		if (v[k] == x)
			return 0;
	return 1;
}

#define TIME_PROBLEM "not an RFC 3339 time (like 2026-12-01T18:00:00Z)"

/* A command field, a list (argv) or a string (for sh -c): command, or
 * resume_command, whose string is, for a list, the list joined for
 * display (spool.h). */
struct cmd_ref {
	char ***argv;
	size_t *argc;
	char **shell;
};

static struct cmd_ref cmd_at(struct job_def *jd, const struct field *f)
{
	if (f->bit == JF_RESUME)
		return (struct cmd_ref){ &jd->resume_argv, &jd->resume_argc, &jd->resume_command };
	return (struct cmd_ref){ &jd->argv, &jd->argc, &jd->shell };
}

/* A list just read into F: resume_command gets its display string.
 * 0, or -1 (ENOMEM). */
static int cmd_list_done(struct job_def *jd, const struct field *f)
{
	if (f->bit != JF_RESUME || (jd->resume_command = shell_join(jd->resume_argv, jd->resume_argc)))
		return 0;
	errno = ENOMEM;
	return -1;
}

static const struct field *field_find(const char *key)
{
	for (size_t i = 0; i < NFIELDS; i++)
		if (strcmp(fields[i].key, key) == 0)
			return &fields[i];
	return NULL;
}

/* ---- value rules ---------------------------------------------------------- */

static const char *check_nonempty(const char *s)
{
	return *s ? NULL : "must not be empty";
}

static const char *check_node(const char *s)
{
	return yx_node_name_problem(s);
}

static const char *check_control(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		/* C0, DEL, and C1 (U+0080..U+009F) */
		if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
			return "must not contain control characters";
	return NULL;
}

static const char *check_name(const char *s)
{
	if (strlen(s) > NAME_MAX_LEN)
		return "longer than 256 bytes";
	return check_control(s);
}

static const char *check_array(const char *s)
{
	struct array_spec a;
	const char *why = array_spec_parse(s, &a);

	array_spec_free(&a);
	return why;
}

/* A parameter value: what a name may hold, and not empty. */
static const char *check_value(const char *s)
{
	const char *why = check_nonempty(s);

	return why ? why : check_control(s);
}

/* A key of `params`: a variable name's characters, not "index". */
static const char *check_param_key(const char *s)
{
	if (!env_name_ok(s, strlen(s)))
		return "not a valid parameter name ([A-Za-z_][A-Za-z0-9_]*)";
	if (!strcmp(s, "index"))
		return "is the array index, not a parameter name";
	return NULL;
}

static const char *check_shell(const char *s)
{
	return *s ? NULL : "must not be empty";
}

/* [A-Za-z_][A-Za-z0-9_]*, LEN bytes of S. */
static int env_name_ok(const char *s, size_t len)
{
	if (len == 0 || (s[0] >= '0' && s[0] <= '9'))
		return 0;
	for (size_t i = 0; i < len; i++) {
		char ch = s[i];

		if (!(ch == '_' || (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		      (ch >= '0' && ch <= '9')))
			return 0;
	}
	return 1;
}

/* ---- YAML ----------------------------------------------------------------- */

static int yaml_command(const struct yx_ctx *c, const struct field *f, const struct yx_node *v,
			const struct yx_path *p, struct job_def *jd)
{
	struct cmd_ref cr = cmd_at(jd, f);
	const char *s, *bad;

	if (v->type == YX_SEQ) {
		if (yx_str_list(c, v, p, MAX_ARGS, cr.argv, cr.argc))
			return -1;
		if (!(*cr.argv)[0][0]) {
			struct yx_path ip = { p, NULL, 0 };

			return yx_fail(c, &v->kids[0], &ip, "must not be empty");
		}
		if (cmd_list_done(jd, f) < 0)
			return cb_err_set(c->err, EX_OSERR_, "%s: %s", c->fname, strerror(ENOMEM));
		return 0;
	}
	if (v->type != YX_SCALAR || yx_is_null(v))
		return yx_fail(c, v, p, "must be a list of strings or a string");
	if (yx_str(c, v, p, &s))
		return -1;
	if ((bad = check_shell(s)))
		return yx_fail(c, v, p, "%s", bad);
	if (!(*cr.shell = strdup(s)))
		return cb_err_set(c->err, EX_OSERR_, "%s: %s", c->fname, strerror(ENOMEM));
	return 0;
}

static int yaml_env(const struct yx_ctx *c, const struct yx_node *v,
		    const struct yx_path *p, struct job_def *jd)
{
	size_t n;

	if (yx_map(c, v, p))
		return -1;
	if ((n = v->n / 2) > MAX_ENV)
		return yx_fail(c, v, p, "more than %d entries", MAX_ENV);
	if (n && !(jd->env = calloc(n, sizeof *jd->env)))
		return cb_err_set(c->err, EX_OSERR_, "%s: %s", c->fname, strerror(ENOMEM));
	for (size_t i = 0; i < n; i++) {
		const struct yx_node *k = &v->kids[2 * i], *val = &v->kids[2 * i + 1];
		struct yx_path kp = { p, k->s, -1 };
		const char *s;

		if (!env_name_ok(k->s, k->len))
			return yx_fail(c, k, &kp, "not a valid variable name");
		if (yx_str(c, val, &kp, &s))
			return -1;
		if (!(jd->env[i] = xasprintf("%s=%s", k->s, s)))
			return cb_err_set(c->err, EX_OSERR_, "%s: %s", c->fname, strerror(ENOMEM));
		jd->nenv = i + 1;
	}
	return 0;
}

static int yaml_params(const struct yx_ctx *c, const struct yx_node *v,
		       const struct yx_path *p, struct job_def *jd)
{
	size_t n;

	if (yx_map(c, v, p))
		return -1;
	if (!(n = v->n / 2))
		return yx_fail(c, v, p, "must name at least one parameter");
	if (n > JOB_MAX_PARAMS)
		return yx_fail(c, v, p, "more than %d parameters", JOB_MAX_PARAMS);
	if (!(jd->params = calloc(n, sizeof *jd->params)))
		return cb_err_set(c->err, EX_OSERR_, "%s: %s", c->fname, strerror(ENOMEM));
	for (size_t i = 0; i < n; i++) {
		const struct yx_node *k = &v->kids[2 * i], *val = &v->kids[2 * i + 1];
		struct yx_path kp = { p, k->s, -1 };
		struct job_param *jp = &jd->params[i];
		const char *bad;

		if ((bad = check_param_key(k->s)))
			return yx_fail(c, k, &kp, "%s", bad);
		jd->nparams = i + 1;
		if (!(jp->key = strdup(k->s)))
			return cb_err_set(c->err, EX_OSERR_, "%s: %s", c->fname, strerror(ENOMEM));
		if (yx_seq(c, val, &kp, JOB_MAX_MEMBERS))
			return -1;
		if (!val->n)
			return yx_fail(c, val, &kp, "must list at least one value");
		if (!(jp->vals = calloc(val->n, sizeof *jp->vals)))
			return cb_err_set(c->err, EX_OSERR_, "%s: %s", c->fname, strerror(ENOMEM));
		for (size_t j = 0; j < val->n; j++) {
			struct yx_path ip = { &kp, NULL, (long long)j };
			const char *s;

			if (yx_str(c, &val->kids[j], &ip, &s))
				return -1;
			if ((bad = check_value(s)))
				return yx_fail(c, &val->kids[j], &ip, "%s", bad);
			for (size_t q = 0; q < j; q++)
				if (!strcmp(jp->vals[q], s))
					return yx_fail(c, &val->kids[j], &ip, "'%s' is listed twice", s);
			if (!(jp->vals[j] = strdup(s)))
				return cb_err_set(c->err, EX_OSERR_, "%s: %s", c->fname, strerror(ENOMEM));
			jp->nvals = j + 1;
		}
	}
	return 0;
}

static int yaml_field(const struct yx_ctx *c, const struct field *f,
		      const struct yx_node *v, struct job_def *jd)
{
	struct yx_path p = { NULL, f->key, -1 };
	const char *s, *bad;

	switch (f->kind) {
	case K_COMMAND:
		return yaml_command(c, f, v, &p, jd);
	case K_STR:
		if (yx_str(c, v, &p, &s))
			return -1;
		if (f->check && (bad = f->check(s)))
			return yx_fail(c, v, &p, "%s", bad);
		if (!(*str_at(jd, f) = strdup(s)))
			return cb_err_set(c->err, EX_OSERR_, "%s: %s", c->fname, strerror(ENOMEM));
		return 0;
	case K_INT:
		return yx_int(c, v, &p, f->lo, f->hi, ll_at(jd, f));
	case K_GPUS:
		return yx_int_set(c, v, &p, 0, GPU_INDEX_MAX, 1, &jd->gpus, &jd->ngpus);
	case K_ENV:
		return yaml_env(c, v, &p, jd);
	case K_PARAMS:
		return yaml_params(c, v, &p, jd);
	case K_BOOL:
		return yx_bool(c, v, &p, int_at(jd, f));
	case K_TIME:
		if (yx_str(c, v, &p, &s))
			return -1;
		if (rfc3339_parse(s, ll_at(jd, f)) < 0)
			return yx_fail(c, v, &p, TIME_PROBLEM);
		return 0;
	case K_IDS: {
		struct ids_ref r = ids_at(jd, f);

		if (yx_seq(c, v, &p, JOB_MAX_DEPS))
			return -1;
		if (!v->n)
			return yx_fail(c, v, &p, "must list at least one job ID");
		if (!(*r.v = calloc(v->n, sizeof **r.v)))
			return cb_err_set(c->err, EX_OSERR_, "%s: %s", c->fname, strerror(ENOMEM));
		for (size_t i = 0; i < v->n; i++) {
			struct yx_path ip = { &p, NULL, (long long)i };
			long long x;

			if (yx_int(c, &v->kids[i], &ip, 1, SEQ_MAX, &x))
				return -1;
			if (!id_new(*r.v, i, x))
				return yx_fail(c, &v->kids[i], &ip, "%lld is listed twice", x);
			(*r.v)[(*r.n)++] = x;
		}
		return 0;
	}
	}
	return -1;
}

static int check_fields(const struct job_def *jd, const char *fname, struct cb_err *err);

int jobdef_parse(const char *buf, size_t len, const char *fname,
		 struct job_def *jd, struct cb_err *err)
{
	struct yx_ctx c = { fname, EX_DATAERR_, err };
	struct yx_node *root = NULL;

	memset(jd, 0, sizeof *jd);
	jd->checkpoint_grace_seconds = DEFAULT_GRACE;
	jd->gpu_count = 1;
	if (yx_load(&c, buf, len, &root))
		goto bad;
	if (!root) {
		cb_err_set(err, EX_DATAERR_, "%s: empty job file", fname);
		goto bad;
	}
	if (root->type != YX_MAP) {
		yx_fail(&c, root, NULL, "top level must be a mapping");
		goto bad;
	}
	if (yx_map(&c, root, NULL))
		goto bad;
	for (size_t i = 0; i < root->n; i += 2) {
		const struct yx_node *k = &root->kids[i];
		const struct field *f = field_find(k->s);

		if (!f) {
			struct yx_path kp = { NULL, k->s, -1 };

			/* The owner is the account that owns the file (lab.h). */
			yx_fail(&c, k, &kp, "%s", strcmp(k->s, "owner") ? "unknown field" :
				"not a job field: a job's owner is the account that owns its file");
			goto bad;
		}
		if (yaml_field(&c, f, &root->kids[i + 1], jd))
			goto bad;
		jd->set |= f->bit;
	}
	yx_free(root);
	root = NULL;
	if (check_fields(jd, fname, err))
		goto bad;
	return 0;
bad:
	yx_free(root);
	jobdef_free(jd);
	return -1;
}

/* The checks between fields; a command may still be missing (a job
 * file of defaults, completed by `submit -- CMD`). */
static int check_fields(const struct job_def *jd, const char *fname, struct cb_err *err)
{
	struct expander x;
	const char *why;

	if (expander_init(&x, jd, &why) < 0)
		return why ? cb_err_set(err, EX_DATAERR_, "%s: %s", fname, why) :
			     cb_err_set(err, EX_OSERR_, "%s: %s", fname, strerror(ENOMEM));
	expander_free(&x);
	if ((jd->set & JF_GPUS) && (jd->set & JF_GPU_COUNT) &&
	    jd->gpu_count != (long long)jd->ngpus)
		return cb_err_set(err, EX_DATAERR_,
				  "%s: gpu_count: must equal the number of gpus (%zu)",
				  fname, jd->ngpus);
	for (size_t i = 0; i < jd->nenv; i++) {
		const char *eq = strchr(jd->env[i], '=');

		if (!eq || !env_name_ok(jd->env[i], (size_t)(eq - jd->env[i])))
			return cb_err_set(err, EX_DATAERR_, "%s: env.%.*s: not a valid variable name",
					  fname, (int)(eq ? eq - jd->env[i] : 64), jd->env[i]);
	}
	return 0;
}

int jobdef_check(const struct job_def *jd, const char *fname, struct cb_err *err)
{
	if (!(jd->set & JF_COMMAND) || (!jd->argv && !jd->shell))
		return cb_err_set(err, EX_DATAERR_, "%s: command: missing", fname);
	if (jd->share && !(jd->set & JF_GPU_MEMORY))
		return cb_err_set(err, EX_DATAERR_, "%s: share: needs gpu_memory_mib (what the job "
				  "takes of each card)", fname);
	if (jd->checkpoint_transfer && !(jd->set & JF_RESUME))
		return cb_err_set(err, EX_DATAERR_, "%s: checkpoint_transfer: needs resume_command "
				  "(only a resumable job has a checkpoint)", fname);
	return check_fields(jd, fname, err);
}

long long jobdef_gpu_need(const struct job_def *jd)
{
	if (jd->set & JF_GPUS)
		return (long long)jd->ngpus;
	if (jd->set & JF_GPU_COUNT)
		return jd->gpu_count;
	return 1;
}

/* ---- copying -------------------------------------------------------------- */

static char **strv_dup(char *const *v, size_t n)
{
	char **d;

	if (!n)
		return NULL;
	if (!(d = calloc(n, sizeof *d)))
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!(d[i] = strdup(v[i]))) {
			yx_strv_free(d, i);
			return NULL;
		}
	return d;
}

static int str_dup(const char *s, char **out)
{
	*out = NULL;
	if (s && !(*out = strdup(s)))
		return -1;
	return 0;
}

void jobdef_params_free(struct job_def *jd)
{
	for (size_t i = 0; i < jd->nparams; i++) {
		free(jd->params[i].key);
		yx_strv_free(jd->params[i].vals, jd->params[i].nvals);
	}
	free(jd->params);
	jd->params = NULL;
	jd->nparams = 0;
}

/* SRC's params into OUT's (empty before): 0, or -1 (ENOMEM) with
 * OUT's empty. */
static int params_dup(const struct job_def *src, struct job_def *out)
{
	if (!src->nparams)
		return 0;
	if (!(out->params = calloc(src->nparams, sizeof *out->params)))
		return -1;
	for (size_t i = 0; i < src->nparams; i++) {
		struct job_param *d = &out->params[i];

		out->nparams = i + 1;
		if (!(d->key = strdup(src->params[i].key)) ||
		    !(d->vals = strv_dup(src->params[i].vals, src->params[i].nvals))) {
			jobdef_params_free(out);
			return -1;
		}
		d->nvals = src->params[i].nvals;
	}
	return 0;
}

/*
 * Each field is copied completely before what it replaces is freed,
 * so on ENOMEM DST holds, field by field, either its old value or the
 * new one; it is always valid and freeable.
 */
int jobdef_merge(struct job_def *dst, const struct job_def *src)
{
	for (size_t i = 0; i < NFIELDS; i++) {
		const struct field *f = &fields[i];

		if (!(src->set & f->bit))
			continue;
		switch (f->kind) {
		case K_COMMAND: {
			struct cmd_ref s = cmd_at((struct job_def *)src, f), d = cmd_at(dst, f);
			char **argv = NULL, *shell = NULL;

			if ((*s.argc && !(argv = strv_dup(*s.argv, *s.argc))) || str_dup(*s.shell, &shell)) {
				yx_strv_free(argv, *s.argc);
				return -1;
			}
			yx_strv_free(*d.argv, *d.argc);
			free(*d.shell);
			*d.argv = argv;
			*d.argc = argv ? *s.argc : 0;
			*d.shell = shell;
			break;
		}
		case K_STR: {
			char *s;

			if (str_dup(*str_at((struct job_def *)src, f), &s))
				return -1;
			free(*str_at(dst, f));
			*str_at(dst, f) = s;
			break;
		}
		case K_INT:
		case K_TIME:
			*ll_at(dst, f) = *ll_at((struct job_def *)src, f);
			break;
		case K_BOOL:
			*int_at(dst, f) = *int_at((struct job_def *)src, f);
			break;
		case K_IDS: {
			struct ids_ref s = ids_at((struct job_def *)src, f), d = ids_at(dst, f);
			long long *v = NULL;

			if (*s.n) {
				if (!(v = malloc(*s.n * sizeof *v)))
					return -1;
				memcpy(v, *s.v, *s.n * sizeof *v);
			}
			free(*d.v);
			*d.v = v;
			*d.n = *s.n;
			break;
		}
		case K_GPUS: {
			int *g = NULL;

			if (src->ngpus) {
				if (!(g = malloc(src->ngpus * sizeof *g)))
					return -1;
				memcpy(g, src->gpus, src->ngpus * sizeof *g);
			}
			free(dst->gpus);
			dst->gpus = g;
			dst->ngpus = src->ngpus;
			break;
		}
		case K_PARAMS: {
			struct job_def t = { 0 };

			if (params_dup(src, &t) < 0)
				return -1;
			jobdef_params_free(dst);
			dst->params = t.params;
			dst->nparams = t.nparams;
			break;
		}
		case K_ENV: {
			char **e = NULL;

			if (src->nenv && !(e = strv_dup(src->env, src->nenv)))
				return -1;
			yx_strv_free(dst->env, dst->nenv);
			dst->env = e;
			dst->nenv = src->nenv;
			break;
		}
		}
		dst->set |= f->bit;
	}
	return 0;
}

void jobdef_free(struct job_def *jd)
{
	if (!jd)
		return;
	yx_strv_free(jd->argv, jd->argc);
	free(jd->shell);
	free(jd->cwd);
	free(jd->node);
	free(jd->name);
	free(jd->resume_command);
	yx_strv_free(jd->resume_argv, jd->resume_argc);
	free(jd->gpus);
	yx_strv_free(jd->env, jd->nenv);
	free(jd->after);
	free(jd->after_any);
	free(jd->array);
	jobdef_params_free(jd);
	memset(jd, 0, sizeof *jd);
}

/* ---- JSON ----------------------------------------------------------------- */

static cJSON *json_field(const struct job_def *jd, const struct field *f)
{
	cJSON *a;

	switch (f->kind) {
	case K_COMMAND: {
		struct cmd_ref cr = cmd_at((struct job_def *)jd, f);

		if (*cr.argv)
			return cJSON_CreateStringArray((const char *const *)*cr.argv, (int)*cr.argc);
		return *cr.shell ? cJSON_CreateString(*cr.shell) : NULL;
	}
	case K_STR: {
		const char *s = *str_at((struct job_def *)jd, f);

		return s ? cJSON_CreateString(s) : NULL;
	}
	case K_INT:
		return cJSON_CreateNumber((double)*ll_at((struct job_def *)jd, f));
	case K_BOOL:
		return cJSON_CreateBool(*int_at((struct job_def *)jd, f));
	case K_TIME: {
		char *t = rfc3339_ms(*ll_at((struct job_def *)jd, f));

		a = t ? cJSON_CreateString(t) : NULL;
		free(t);
		return a;
	}
	case K_IDS: {
		struct ids_ref r = ids_at((struct job_def *)jd, f);

		if (!(a = cJSON_CreateArray()))
			return NULL;
		for (size_t i = 0; i < *r.n; i++) {
			cJSON *x = cJSON_CreateNumber((double)(*r.v)[i]);

			if (!x || !cJSON_AddItemToArray(a, x)) {
				cJSON_Delete(x);
				cJSON_Delete(a);
				return NULL;
			}
		}
		return a;
	}
	case K_GPUS:
		if (!(a = cJSON_CreateArray()))
			return NULL;
		for (size_t i = 0; i < jd->ngpus; i++) {
			cJSON *x = cJSON_CreateNumber(jd->gpus[i]);

			if (!x || !cJSON_AddItemToArray(a, x)) {
				cJSON_Delete(x);
				cJSON_Delete(a);
				return NULL;
			}
		}
		return a;
	case K_PARAMS:
		if (!(a = cJSON_CreateObject()))
			return NULL;
		for (size_t i = 0; i < jd->nparams; i++) {
			const struct job_param *p = &jd->params[i];
			cJSON *x = cJSON_CreateStringArray((const char *const *)p->vals, (int)p->nvals);

			if (!x || !cJSON_AddItemToObject(a, p->key, x)) {
				cJSON_Delete(x);
				cJSON_Delete(a);
				return NULL;
			}
		}
		return a;
	case K_ENV:
		if (!(a = cJSON_CreateObject()))
			return NULL;
		for (size_t i = 0; i < jd->nenv; i++) {
			const char *eq = strchr(jd->env[i], '=');
			char *k;
			cJSON *x;

			if (!eq)
				continue;       /* jobdef_check refuses these */
			if (!(k = strndup(jd->env[i], (size_t)(eq - jd->env[i])))) {
				cJSON_Delete(a);
				return NULL;
			}
			x = cJSON_CreateString(eq + 1);
			if (!x || !cJSON_AddItemToObject(a, k, x)) {
				cJSON_Delete(x);
				free(k);
				cJSON_Delete(a);
				return NULL;
			}
			free(k);
		}
		return a;
	}
	return NULL;
}

cJSON *jobdef_to_json(const struct job_def *jd)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	for (size_t i = 0; i < NFIELDS; i++) {
		const struct field *f = &fields[i];
		struct cmd_ref cr = cmd_at((struct job_def *)jd, f);
		cJSON *v;

		if (!(jd->set & f->bit))
			continue;
		/* A set bit with no value (a command, string or gpus list
		 * never filled in) is left out rather than written as null
		 * or as something jobdef_from_json refuses. */
		if ((f->kind == K_COMMAND && !*cr.shell && !*cr.argv) ||
		    (f->kind == K_STR && !*str_at((struct job_def *)jd, f)) ||
		    (f->kind == K_GPUS && !jd->ngpus) || (f->kind == K_PARAMS && !jd->nparams) ||
		    (f->kind == K_IDS && !*ids_at((struct job_def *)jd, f).n))
			continue;
		if (!(v = json_field(jd, f)) || !cJSON_AddItemToObject(o, f->key, v)) {
			cJSON_Delete(v);
			cJSON_Delete(o);
			errno = ENOMEM;
			return NULL;
		}
	}
	return o;
}

/* An integral JSON number in [lo, hi]. */
static int json_ll(const cJSON *x, long long lo, long long hi, long long *out)
{
	double d;

	if (!cJSON_IsNumber(x))
		return -1;
	d = x->valuedouble;
	/* NaN fails the first test, infinities the range; inside the
	 * range the cast is defined. */
	if (d != d || d < (double)lo || d > (double)hi || d != (double)(long long)d)
		return -1;
	*out = (long long)d;
	return 0;
}

static int json_str(const cJSON *x, const char **out)
{
	if (!cJSON_IsString(x) || !x->valuestring)
		return -1;
	*out = x->valuestring;
	return 0;
}

static int env_cmp(const void *a, const void *b)
{
	const char *x = *(char *const *)a, *y = *(char *const *)b;
	size_t nx = strcspn(x, "="), ny = strcspn(y, "=");
	int d = memcmp(x, y, nx < ny ? nx : ny);

	return d ? d : (nx > ny) - (nx < ny);
}

/* 0, or -1 with errno EINVAL (bad value) or ENOMEM. */
static int json_field_in(const cJSON *v, const struct field *f, struct job_def *jd)
{
	const cJSON *x;
	const char *s;
	long long ll;
	size_t n, i;

	errno = EINVAL;
	switch (f->kind) {
	case K_COMMAND: {
		struct cmd_ref cr = cmd_at(jd, f);

		if (cJSON_IsString(v)) {
			if (json_str(v, &s) || check_shell(s))
				return -1;
			if (!(*cr.shell = strdup(s)))
				return -1;
			return 0;
		}
		if (!cJSON_IsArray(v) || (n = (size_t)cJSON_GetArraySize(v)) == 0 || n > MAX_ARGS)
			return -1;
		if (!(*cr.argv = calloc(n, sizeof **cr.argv)))
			return -1;
		i = 0;
		cJSON_ArrayForEach(x, v) {
			if (json_str(x, &s) || (i == 0 && !*s))
				return -1;
			if (!((*cr.argv)[i] = strdup(s)))
				return -1;
			*cr.argc = ++i;
		}
		return cmd_list_done(jd, f);
	}
	case K_STR:
		if (json_str(v, &s) || (f->check && f->check(s)))
			return -1;
		if (!(*str_at(jd, f) = strdup(s)))
			return -1;
		return 0;
	case K_INT:
		return json_ll(v, f->lo, f->hi, ll_at(jd, f));
	case K_BOOL:
		if (!cJSON_IsBool(v))
			return -1;
		*int_at(jd, f) = cJSON_IsTrue(v);
		return 0;
	case K_TIME:
		return json_str(v, &s) || rfc3339_parse(s, ll_at(jd, f)) < 0 ? -1 : 0;
	case K_IDS: {
		struct ids_ref r = ids_at(jd, f);

		if (!cJSON_IsArray(v) || (n = (size_t)cJSON_GetArraySize(v)) == 0 || n > JOB_MAX_DEPS)
			return -1;
		if (!(*r.v = calloc(n, sizeof **r.v)))
			return -1;
		cJSON_ArrayForEach(x, v) {
			if (json_ll(x, 1, SEQ_MAX, &ll) || !id_new(*r.v, *r.n, ll)) {
				errno = EINVAL;
				return -1;
			}
			(*r.v)[(*r.n)++] = ll;
		}
		return 0;
	}
	case K_GPUS:
		if (!cJSON_IsArray(v) || (n = (size_t)cJSON_GetArraySize(v)) == 0 ||
		    n > GPU_INDEX_MAX + 1)
			return -1;
		if (!(jd->gpus = calloc(n, sizeof *jd->gpus)))
			return -1;
		cJSON_ArrayForEach(x, v) {
			if (json_ll(x, 0, GPU_INDEX_MAX, &ll))
				return -1;
			for (i = 0; i < jd->ngpus; i++)
				if (jd->gpus[i] == (int)ll)
					return -1;
			jd->gpus[jd->ngpus++] = (int)ll;
		}
		return 0;
	case K_PARAMS:
		if (!cJSON_IsObject(v) || (n = (size_t)cJSON_GetArraySize(v)) == 0 ||
		    n > JOB_MAX_PARAMS)
			return -1;
		if (!(jd->params = calloc(n, sizeof *jd->params)))
			return -1;
		cJSON_ArrayForEach(x, v) {
			struct job_param *p = &jd->params[jd->nparams];
			const cJSON *y;
			size_t nv = (size_t)cJSON_GetArraySize(x);

			if (!x->string || check_param_key(x->string) || !cJSON_IsArray(x) || !nv ||
			    nv > JOB_MAX_MEMBERS)
				return -1;
			for (i = 0; i < jd->nparams; i++)
				if (!strcmp(jd->params[i].key, x->string))
					return -1;
			jd->nparams++;
			if (!(p->key = strdup(x->string)) || !(p->vals = calloc(nv, sizeof *p->vals))) {
				errno = ENOMEM;
				return -1;
			}
			cJSON_ArrayForEach(y, x) {
				if (json_str(y, &s) || check_value(s))
					return -1;
				for (i = 0; i < p->nvals; i++)
					if (!strcmp(p->vals[i], s))
						return -1;
				if (!(p->vals[p->nvals] = strdup(s))) {
					errno = ENOMEM;
					return -1;
				}
				p->nvals++;
			}
		}
		return 0;
	case K_ENV:
		if (!cJSON_IsObject(v) || (n = (size_t)cJSON_GetArraySize(v)) > MAX_ENV)
			return -1;
		if (n && !(jd->env = calloc(n, sizeof *jd->env)))
			return -1;
		cJSON_ArrayForEach(x, v) {
			if (!x->string || !env_name_ok(x->string, strlen(x->string)) ||
			    json_str(x, &s))
				return -1;
			if (!(jd->env[jd->nenv] = xasprintf("%s=%s", x->string, s)))
				return -1;
			jd->nenv++;
		}
		if (jd->nenv > 1) {     /* duplicate names */
			char **t = malloc(jd->nenv * sizeof *t);
			int dup = 0;

			if (!t)
				return -1;
			memcpy(t, jd->env, jd->nenv * sizeof *t);
			qsort(t, jd->nenv, sizeof *t, env_cmp);
			for (i = 1; i < jd->nenv; i++)
				if (env_cmp(&t[i - 1], &t[i]) == 0)
					dup = 1;
			free(t);
			if (dup) {
				errno = EINVAL;
				return -1;
			}
		}
		return 0;
	}
	return -1;
}

int jobdef_from_json(const cJSON *obj, struct job_def *jd)
{
	const cJSON *x;

	memset(jd, 0, sizeof *jd);
	if (!cJSON_IsObject(obj)) {
		errno = EINVAL;
		return -1;
	}
	jd->checkpoint_grace_seconds = DEFAULT_GRACE;
	jd->gpu_count = 1;
	cJSON_ArrayForEach(x, obj) {
		const struct field *f = x->string ? field_find(x->string) : NULL;

		if (!f || (jd->set & f->bit)) {         /* unknown or repeated */
			errno = EINVAL;
			goto bad;
		}
		if (json_field_in(x, f, jd))
			goto bad;
		jd->set |= f->bit;
	}
	return 0;
bad: {
		int e = errno;

		jobdef_free(jd);
		errno = e;
		return -1;
	}
}
