/*
 * spec.c - the launch spec and the job's environment: spec_check, the
 * one place that decides what a spec may say (LAYOUT.md section 10,
 * "Spec keys"; fuzzed by tests/fuzz/fuzz_spec.c), and job_env, which
 * builds what the job's process gets (step 6).
 */
#include <stdlib.h>
#include <string.h>

#include "launch.h"

extern char **environ;

/* ---- the spec ---------------------------------------------------------- */

void spec_free(struct spec *sp)
{
	free(sp->argv);
	free(sp->env);
	free(sp->gpu);
	free(sp->uuid);
	free(sp->after);
}

static int name_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      (c >= '0' && c <= '9') || c == '_'))
			return 0;
	}
	return 1;
}

int spec_check(struct spec *sp, char **why)
{
	struct wire_rec *r = &sp->rec;
	static const char *const once[] = {
		"attempt", "shell", "cwd", "idle_mib", "timeout", "grace",
		"resumable", "checkpoint", "checkpoint_on", "nodelist",
	};
	size_t i, j, na = 0, ne = 0, ng = 0, nu = 0, nw = 0;
	long long v;

	*why = NULL;
	for (i = 0; i < r->n; i++) {
		const struct wire_field *f = &r->f[i];

		if (strlen(f->val) != f->len) {
			*why = xasprintf("%s holds a NUL byte", f->key);
			return -1;
		}
		for (j = 0; j < sizeof once / sizeof once[0]; j++)
			if (strcmp(f->key, once[j]) == 0 && wire_get(r, f->key) != f->val) {
				*why = xasprintf("%s given twice", f->key);
				return -1;
			}
		na += strcmp(f->key, "arg") == 0;
		ne += strcmp(f->key, "env") == 0;
		ng += strcmp(f->key, "gpu") == 0;
		nu += strcmp(f->key, "uuid") == 0;
		nw += strcmp(f->key, "after") == 0;
	}
	sp->id = wire_get(r, "attempt");
	if (!sp->id) {
		*why = xasprintf("no attempt");
		return -1;
	}
	if (!wk_id_ok(sp->id)) {
		*why = xasprintf("attempt must be 1 to 64 of [0-9a-f-]");
		return -1;
	}
	sp->shell = wire_get(r, "shell");
	if ((na > 0) == (sp->shell != NULL)) {
		*why = xasprintf("exactly one of arg and shell is needed");
		return -1;
	}
	sp->cwd = wire_get(r, "cwd");
	sp->checkpoint = wire_get(r, "checkpoint");
	sp->checkpoint_on = wire_get(r, "checkpoint_on");
	if (sp->checkpoint_on && (!sp->checkpoint || sp->checkpoint[0] != '/')) {
		*why = xasprintf("checkpoint_on needs an absolute checkpoint");
		return -1;
	}
	sp->nodelist = wire_get(r, "nodelist");
	if (sp->nodelist && !wk_host_ok(sp->nodelist, strlen(sp->nodelist))) {
		*why = xasprintf("nodelist must be a host name ([A-Za-z0-9._-], not starting with "
				   "'-' or '.')");
		return -1;
	}
	sp->argv = calloc(na + 1, sizeof *sp->argv);
	sp->env = calloc(ne + 1, sizeof *sp->env);
	sp->gpu = calloc(ng + 1, sizeof *sp->gpu);
	sp->uuid = calloc(nu + 1, sizeof *sp->uuid);
	sp->after = calloc(nw + 1, sizeof *sp->after);
	if (!sp->argv || !sp->env || !sp->gpu || !sp->uuid || !sp->after) {
		*why = xasprintf("out of memory");
		return -1;
	}
	for (i = 0; i < r->n; i++) {
		const struct wire_field *f = &r->f[i];

		if (strcmp(f->key, "arg") == 0) {
			sp->argv[sp->argc++] = f->val;
		} else if (strcmp(f->key, "env") == 0) {
			const char *eq = strchr(f->val, '=');

			if (!eq || !name_ok(f->val, (size_t)(eq - f->val))) {
				*why = xasprintf("env must be NAME=value with NAME a shell identifier");
				return -1;
			}
			sp->env[sp->nenv++] = f->val;
		} else if (strcmp(f->key, "gpu") == 0) {
			struct wire_rec one = { (struct wire_field *)f, 1, 1 };

			if (wire_get_ll(&one, "gpu", &v) < 0 || v < 0 || v > 1000000) {
				*why = xasprintf("gpu must be a non-negative index");
				return -1;
			}
			for (j = 0; j < sp->ngpu; j++)
				if (sp->gpu[j] == v) {
					*why = xasprintf("gpu %lld given twice", v);
					return -1;
				}
			sp->gpu[sp->ngpu++] = v;
		} else if (strcmp(f->key, "uuid") == 0) {
			if (!nv_uuid_ok(f->val, f->len)) {
				*why = xasprintf("uuid must be 1 to 128 bytes, no '/', ',' or blanks, "
						   "not starting with '.'");
				return -1;
			}
			sp->uuid[sp->nuuid++] = f->val;
		} else if (strcmp(f->key, "after") == 0) {
			/* An attempt ID like `attempt`'s: it names a file in
			 * attempts/ (LAYOUT.md section 8, the baton). */
			if (!wk_id_ok(f->val)) {
				*why = xasprintf("after must be 1 to 64 of [0-9a-f-]");
				return -1;
			}
			if (strcmp(f->val, sp->id) == 0) {
				*why = xasprintf("after names the attempt itself");
				return -1;
			}
			sp->after[sp->nafter++] = f->val;
		}
	}
	if (nu && nu != ng) {
		*why = xasprintf("uuid must be given once for each gpu, or not at all");
		return -1;
	}
	if (na == 0) {
		free(sp->argv);
		sp->argv = NULL;
	}
	{
		static const struct { const char *key; long long def, min, max; } nums[] = {
			{ "idle_mib", 64, 0, 1LL << 40 },
			{ "timeout", 0, 0, 100LL * 366 * 86400 },
			{ "grace", 60, 0, 100LL * 366 * 86400 },
			{ "resumable", 0, 0, 1 },
			{ "share", 0, 0, 1 },
			{ "memory", 0, 0, 1LL << 40 },
			{ "max_jobs_per_gpu", 1, 1, 1LL << 20 },
		};
		long long share = 0;
		long long *dst[] = { &sp->idle_mib, &sp->timeout, &sp->grace, NULL, &share,
				     &sp->memory, &sp->max_share };

		for (i = 0; i < sizeof nums / sizeof nums[0]; i++) {
			v = nums[i].def;
			if (wire_get(r, nums[i].key) &&
			    (wire_get_ll(r, nums[i].key, &v) < 0 || v < nums[i].min || v > nums[i].max)) {
				*why = xasprintf("%s must be an integer from %lld to %lld", nums[i].key,
						 nums[i].min, nums[i].max);
				return -1;
			}
			if (dst[i])
				*dst[i] = v;
			else
				sp->resumable = (int)v;
		}
		sp->share = (int)share;
		if (sp->share && !sp->memory) {
			*why = xasprintf("share needs memory");
			return -1;
		}
	}
	return 0;
}

/* ---- the environment --------------------------------------------------- */

static int env_push(struct envv *e, char *s)
{
	if (e->n + 2 > e->cap) {
		size_t nc = e->cap ? e->cap * 2 : 64;
		char **nv = realloc(e->v, nc * sizeof *nv);

		if (!nv)
			return -1;
		e->v = nv;
		e->cap = nc;
	}
	e->v[e->n++] = s;
	e->v[e->n] = NULL;
	return 0;
}

static void env_unset(struct envv *e, const char *name, size_t nl)
{
	size_t i, o = 0;

	for (i = 0; i < e->n; i++)
		if (!(strncmp(e->v[i], name, nl) == 0 && e->v[i][nl] == '='))
			e->v[o++] = e->v[i];
	e->n = o;
	if (e->v)
		e->v[o] = NULL;
}

/* Put "NAME=value" S, replacing any NAME. */
static int env_put(struct envv *e, const char *s)
{
	env_unset(e, s, strcspn(s, "="));
	return env_push(e, (char *)s);
}

static int env_set(struct envv *e, const char *name, const char *val)
{
	char *s = xasprintf("%s=%s", name, val), **no;

	if (!s)
		return -1;
	no = realloc(e->owned, (e->nowned + 1) * sizeof *no);
	if (!no) {
		free(s);
		return -1;
	}
	e->owned = no;
	e->owned[e->nowned++] = s;
	return env_put(e, s);
}

void env_free(struct envv *e)
{
	size_t i;

	for (i = 0; i < e->nowned; i++)
		free(e->owned[i]);
	free(e->owned);
	free(e->v);
}

int job_env(struct launch *l)
{
	static const char *const drop[] = { "SSHGPU_CHECKPOINT", "CARDBATON_CHECKPOINT" };
	const struct spec *sp = l->sp;
	struct envv *e = &l->env;
	char *vis = NULL, *pause_path, *ck_path, **p;
	size_t i;
	int rc;

	for (i = 0; i < sp->ngpu; i++) {
		char *v = xasprintf("%s%s%s", vis ? vis : "", vis ? "," : "", l->uuid[i]);

		free(vis);
		vis = v;
		if (!v)
			break;
	}
	pause_path = xasprintf("%s/pause", l->adir_path);
	ck_path = xasprintf("%s/checkpoint", l->adir_path);
	rc = (sp->ngpu && !vis) || !pause_path || !ck_path;
	/* The worker's environment, the spec's, then ours. */
	for (p = environ; !rc && *p; p++)
		rc = env_push(e, *p) < 0;
	for (i = 0; i < sp->nenv && !rc; i++)
		rc = env_put(e, sp->env[i]) < 0;
	/* The contract's variables are the worker's alone: the checkpoint
	 * only on a resumed attempt, whatever the worker's or the spec's
	 * environment says. */
	for (i = 0; i < 2 && !rc; i++)
		env_unset(e, drop[i], strlen(drop[i]));
	/* In a Slurm allocation, CUDA_VISIBLE_DEVICES is Slurm's. */
	rc = rc || (!l->in_slurm && env_set(e, "CUDA_VISIBLE_DEVICES", vis ? vis : "") < 0) ||
	     env_set(e, "SSHGPU_PAUSE_FILE", pause_path) < 0 ||
	     env_set(e, "CARDBATON_PAUSE_FILE", pause_path) < 0 ||
	     env_set(e, "SSHGPU_CHECKPOINT_READY", ck_path) < 0 ||
	     env_set(e, "CARDBATON_CHECKPOINT_READY", ck_path) < 0 ||
	     env_set(e, "CARDBATON_ATTEMPT_ID", sp->id) < 0 ||
	     (sp->checkpoint && (env_set(e, "SSHGPU_CHECKPOINT", sp->checkpoint) < 0 ||
				 env_set(e, "CARDBATON_CHECKPOINT", sp->checkpoint) < 0));
	free(vis);
	free(pause_path);
	free(ck_path);
	return rc ? -1 : 0;
}
