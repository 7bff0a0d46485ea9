/*
 * expand.c - arrays and sweeps (expand.h): the spec's grammar, and the
 * members one definition stands for.  Pure: no I/O.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expand.h"
#include "spool.h"
#include "yamlx.h"

_Static_assert(BLOCK_MAX == JOB_MAX_MEMBERS, "a block's names hold every member");

void array_spec_free(struct array_spec *a)
{
	free(a->idx);
	memset(a, 0, sizeof *a);
}

/* A decimal in [0, MAX] at *P (digits only), advancing *P; -1 if none. */
static long long number(const char **p, long long max)
{
	long long v = 0;

	if (**p < '0' || **p > '9')
		return -1;
	for (; **p >= '0' && **p <= '9'; (*p)++) {
		v = v * 10 + (**p - '0');
		if (v > max)
			return -1;
	}
	return v;
}

static int ll_cmp(const void *pa, const void *pb)
{
	long long a = *(const long long *)pa, b = *(const long long *)pb;

	return (a > b) - (a < b);
}

#define SPEC_FORM "not an array spec (A-B, A-B:STEP or I,J,K, then %K if wanted)"

const char *array_spec_parse(const char *s, struct array_spec *a)
{
	const char *p = s, *why = SPEC_FORM;
	long long *v = NULL;
	size_t n = 0;

	memset(a, 0, sizeof *a);
	for (;;) {
		long long lo = number(&p, ARRAY_INDEX_MAX), hi = lo, step = 1;

		if (lo < 0)
			goto bad;
		if (*p == '-') {
			p++;
			if ((hi = number(&p, ARRAY_INDEX_MAX)) < lo)
				goto bad;
			if (*p == ':') {
				p++;
				if ((step = number(&p, ARRAY_INDEX_MAX)) < 1)
					goto bad;
			}
		}
		/* Counted before anything is made of it. */
		if ((hi - lo) / step + 1 > JOB_MAX_MEMBERS - (long long)n) {
			why = "more than 10000 jobs";
			goto bad;
		}
		for (long long i = lo; i <= hi; i += step) {
			long long *w = realloc(v, (n + 1) * sizeof *v);

			if (!w) {
				why = NULL;
				goto bad;
			}
			v = w;
			v[n++] = i;
		}
		if (*p != ',')
			break;
		p++;
	}
	if (*p == '%') {
		p++;
		if ((a->limit = number(&p, JOB_MAX_MEMBERS)) < 1)
			goto bad;
	}
	if (*p)
		goto bad;
	if (!n)
		goto bad;
	qsort(v, n, sizeof *v, ll_cmp);
	for (size_t i = 1; i < n; i++)
		if (v[i] == v[i - 1]) {
			why = "an index is given twice";
			goto bad;
		}
	a->idx = v;
	a->n = n;
	return NULL;
bad:
	free(v);
	memset(a, 0, sizeof *a);
	errno = why ? EINVAL : ENOMEM;
	return why ? why : "out of memory";
}

int jobdef_is_many(const struct job_def *jd)
{
	return (jd->set & (JF_ARRAY | JF_PARAMS)) != 0;
}

int expander_init(struct expander *x, const struct job_def *jd, const char **why)
{
	size_t extra;

	memset(x, 0, sizeof *x);
	x->jd = jd;
	*why = NULL;
	if (!jobdef_is_many(jd)) {
		if (jd->set & JF_MAX_RUNNING) {
			*why = "max_running: only for an array or params";
			return -1;
		}
		x->n = 1;
		return 0;
	}
	if ((jd->set & JF_ARRAY) && (jd->set & JF_PARAMS)) {
		*why = "params: cannot be combined with array";
		return -1;
	}
	if (jd->set & JF_ARRAY) {
		const char *bad = array_spec_parse(jd->array ? jd->array : "", &x->a);

		if (bad) {
			/* The field's own check says what is wrong with it. */
			*why = errno == ENOMEM ? NULL : "array: not a valid array spec";
			return -1;
		}
		x->n = x->a.n;
		x->limit = x->a.limit;
		if (x->limit && (jd->set & JF_MAX_RUNNING)) {
			*why = "max_running: the array's %K gives it already";
			expander_free(x);
			return -1;
		}
		extra = 2;
	} else {
		x->n = 1;
		for (size_t k = 0; k < jd->nparams; k++) {
			if (jd->params[k].nvals > JOB_MAX_MEMBERS / x->n) {
				*why = "params: more than 10000 jobs";
				return -1;
			}
			x->n *= jd->params[k].nvals;
		}
		extra = 2 + jd->nparams;
	}
	if (jd->set & JF_MAX_RUNNING)
		x->limit = jd->max_running;
	if (jd->nenv + extra > JOB_MAX_ENV) {
		*why = "env: too many variables with CARDBATON_ARRAY_* and CARDBATON_PARAM_*";
		expander_free(x);
		return -1;
	}
	return 0;
}

void expander_free(struct expander *x)
{
	array_spec_free(&x->a);
	x->n = 0;
}

/* The values member M takes, one per key, into VAL (nparams slots). */
static void member_values(const struct job_def *jd, size_t m, const char **val)
{
	for (size_t k = jd->nparams; k-- > 0;) {
		const struct job_param *p = &jd->params[k];

		val[k] = p->vals[m % p->nvals];
		m /= p->nvals;
	}
}

/* What one member's "{NAME}" words stand for. */
struct subst {
	const struct job_def *jd;
	const char *index;
	const char **val;
};

/* The value of the NAME of LEN bytes, or NULL (left as written). */
static const char *lookup(const struct subst *su, const char *name, size_t len)
{
	if (len == 5 && !memcmp(name, "index", 5))
		return su->index;
	for (size_t k = 0; k < su->jd->nparams; k++)
		if (strlen(su->jd->params[k].key) == len && !memcmp(su->jd->params[k].key, name, len))
			return su->val[k];
	return NULL;
}

/* *S with its "{NAME}"s replaced (in place of the old string). */
static int substitute(const struct subst *su, char **s)
{
	struct sbuf b = { 0 };
	const char *p, *q;

	if (!*s || !strchr(*s, '{'))
		return 0;
	if (sbuf_add(&b, "", 0) < 0)
		return -1;
	for (p = *s; *p; p = q) {
		const char *open = strchr(p, '{'), *close, *v = NULL;

		if (!open)
			open = p + strlen(p);
		if (sbuf_add(&b, p, (size_t)(open - p)) < 0)
			goto oom;
		q = open;
		if (!*q)
			break;
		close = strchr(q + 1, '}');
		if (close)
			v = lookup(su, q + 1, (size_t)(close - q - 1));
		if (v) {
			if (sbuf_addf(&b, "%s", v) < 0)
				goto oom;
			q = close + 1;
		} else {
			if (sbuf_add(&b, "{", 1) < 0)
				goto oom;
			q++;
		}
	}
	free(*s);
	*s = b.s;
	return 0;
oom:
	sbuf_free(&b);
	return -1;
}

static int substitute_all(const struct subst *su, char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (substitute(su, &v[i]) < 0)
			return -1;
	return 0;
}

/* NAME=VALUE into OUT's env, replacing the user's NAME. */
static int env_put(struct job_def *out, char *kv)
{
	size_t len;
	char **v;

	if (!kv)
		return -1;
	len = strcspn(kv, "=");
	for (size_t i = 0; i < out->nenv; i++)
		if (!strncmp(out->env[i], kv, len) && out->env[i][len] == '=') {
			free(out->env[i]);
			out->env[i] = kv;
			return 0;
		}
	if (!(v = realloc(out->env, (out->nenv + 1) * sizeof *v))) {
		free(kv);
		return -1;
	}
	out->env = v;
	out->env[out->nenv++] = kv;
	out->set |= JF_ENV;
	return 0;
}

/* The bytes of what the substitutions touch in OUT (its size, near
 * enough), and whether each value is within its limit. */
static const char *member_problem(const struct job_def *out)
{
	size_t total = 0;
	const char *strs[] = { out->shell, out->name, out->cwd, out->resume_command };

	for (size_t i = 0; i < sizeof strs / sizeof *strs; i++)
		if (strs[i]) {
			if (strlen(strs[i]) > YX_MAX_SCALAR)
				return "a value is longer than 64 KiB once {...} is replaced";
			total += strlen(strs[i]);
		}
	if (out->name && strlen(out->name) > JOB_NAME_MAX)
		return "name: longer than 256 bytes once {...} is replaced";
	for (size_t i = 0; i < out->argc; i++) {
		if (strlen(out->argv[i]) > YX_MAX_SCALAR)
			return "command: a word is longer than 64 KiB once {...} is replaced";
		total += strlen(out->argv[i]);
	}
	for (size_t i = 0; i < out->resume_argc; i++)
		total += strlen(out->resume_argv[i]);
	return total > JOBFILE_MAX ? "a job is larger than 1 MiB once {...} is replaced" : NULL;
}

int expander_member(const struct expander *x, size_t m, long long first,
		    struct job_def *out, long long *index, const char **why)
{
	const struct job_def *jd = x->jd;
	const char **val = calloc(jd->nparams + 1, sizeof *val);
	char idx[24];
	struct subst su = { jd, idx, val };

	*why = NULL;
	memset(out, 0, sizeof *out);
	out->gpu_count = 1;
	out->checkpoint_grace_seconds = DEFAULT_GRACE;
	if (!val || jobdef_merge(out, jd) < 0)
		goto oom;
	*index = x->a.n ? x->a.idx[m] : (long long)m;
	snprintf(idx, sizeof idx, "%lld", *index);
	member_values(jd, m, val);
	/* The member is a plain job. */
	free(out->array);
	out->array = NULL;
	jobdef_params_free(out);
	out->max_running = 0;
	out->set &= ~(unsigned)(JF_ARRAY | JF_PARAMS | JF_MAX_RUNNING);
	if (substitute_all(&su, out->argv, out->argc) < 0 || substitute(&su, &out->shell) < 0 ||
	    substitute(&su, &out->name) < 0 || substitute(&su, &out->cwd) < 0)
		goto oom;
	if (out->resume_argv) {
		if (substitute_all(&su, out->resume_argv, out->resume_argc) < 0)
			goto oom;
		free(out->resume_command);
		if (!(out->resume_command = shell_join(out->resume_argv, out->resume_argc)))
			goto oom;
	} else if (substitute(&su, &out->resume_command) < 0) {
		goto oom;
	}
	if (env_put(out, xasprintf("CARDBATON_ARRAY_ID=%lld", first)) < 0 ||
	    env_put(out, xasprintf("CARDBATON_ARRAY_INDEX=%s", idx)) < 0)
		goto oom;
	for (size_t k = 0; k < jd->nparams; k++)
		if (env_put(out, xasprintf("CARDBATON_PARAM_%s=%s", jd->params[k].key, val[k])) < 0)
			goto oom;
	free(val);
	if ((*why = member_problem(out))) {
		jobdef_free(out);
		return 1;
	}
	return 0;
oom:
	free(val);
	jobdef_free(out);
	errno = ENOMEM;
	return -1;
}
