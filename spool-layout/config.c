/*
 * config.c - config.yaml (SPEC §3): where it is found, what it may say.
 *
 * The same strict YAML subset as job files (yamlx.c).  Booleans are
 * true/false only (also True/TRUE/False/FALSE, the YAML 1.2 core
 * schema): YAML 1.1's yes/no/on/off are refused, so that a node called
 * "no" or a value "on" can never mean something unexpected.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "names.h"
#include "yamlx.h"

#define CONFIG_MAX (1u << 20)
#define MAX_NODES 4096
#define MAX_SSH_ARGS 256
#define IDLE_MIB_MAX 1048576

static int oom(struct cb_err *err, const char *fname)
{
	return cb_err_set(err, EX_OSERR_, "%s: %s", fname ? fname : "config", strerror(ENOMEM));
}

/* ---- paths ---------------------------------------------------------------- */

/*
 * BASE (absolute, or NULL) joined with P, made absolute against the
 * current directory when still relative, with "//", "/./" and a
 * trailing "/" taken out.  ".." is kept: taking it out by text would
 * be wrong across a symbolic link.  malloc'd, or NULL with errno.
 */
static char *path_abs(const char *base, const char *p)
{
	struct sbuf b = { 0 };
	char *cwd = NULL, *out = NULL;
	const char *s;

	if (p[0] != '/') {
		if (!base || base[0] != '/') {
			if (!(cwd = getcwd(NULL, 0)))
				return NULL;
			if (sbuf_addf(&b, "%s/", cwd))
				goto out;
		}
		if (base && sbuf_addf(&b, "%s/", base))
			goto out;
	}
	if (sbuf_addf(&b, "%s", p))
		goto out;
	/* Normalise in place: the result is never longer. */
	{
		char *r = b.s, *w = b.s;

		for (s = r; *s; ) {
			if (*s == '/') {
				while (*s == '/')
					s++;
				if (s[0] == '.' && (s[1] == '/' || s[1] == '\0')) {
					s++;
					continue;       /* "/." component */
				}
				*w++ = '/';
				continue;
			}
			*w++ = *s++;
		}
		while (w > b.s + 1 && w[-1] == '/')
			w--;
		if (w == b.s)
			*w++ = '/';
		*w = '\0';
	}
	out = b.s;
	b.s = NULL;
out:
	free(cwd);
	sbuf_free(&b);
	return out;
}

/* The directory part of the absolute path P (malloc'd). */
static char *dir_of(const char *p)
{
	const char *sl = strrchr(p, '/');

	if (!sl || sl == p)
		return strdup("/");
	return strndup(p, (size_t)(sl - p));
}

/* $HOME, or the password file's home; NULL when neither is usable. */
static const char *home_dir(void)
{
	const char *h = getenv("HOME");
	struct passwd *pw;

	if (h && h[0] == '/')
		return h;
	if ((pw = getpwuid(getuid())) && pw->pw_dir && pw->pw_dir[0] == '/')
		return pw->pw_dir;
	return NULL;
}

/* $VAR when it is an absolute path (the XDG rule: relative values are
 * ignored), else HOME/FALLBACK.  malloc'd, NULL (errno ENOENT when
 * there is no home, ENOMEM). */
static char *xdg_dir(const char *var, const char *fallback)
{
	const char *v = getenv(var), *h;
	char *p, *r;

	if (v && v[0] == '/')
		return path_abs(NULL, v);
	if (!(h = home_dir())) {
		errno = ENOENT;
		return NULL;
	}
	if (!(p = xasprintf("%s/%s", h, fallback)))
		return NULL;
	r = path_abs(NULL, p);
	free(p);
	return r;
}

/* ---- parsing -------------------------------------------------------------- */

static int set_str(const struct yx_ctx *c, const struct yx_node *v,
		   const struct yx_path *p, char **out)
{
	const char *s;

	if (yx_str(c, v, p, &s))
		return -1;
	if (!*s)
		return yx_fail(c, v, p, "must not be empty");
	free(*out);
	if (!(*out = strdup(s)))
		return oom(c->err, c->fname);
	return 0;
}

/* An argv: a list of 1..MAX strings, the first not empty (ssh_command,
 * on_finish).  *OUT replaced. */
static int set_argv(const struct yx_ctx *c, const struct yx_node *v, const struct yx_path *p,
		    size_t max, char ***out, size_t *nout)
{
	char **argv;
	size_t n;

	if (yx_str_list(c, v, p, max, &argv, &n))
		return -1;
	yx_strv_free(*out, *nout);
	*out = argv;
	*nout = n;
	if (!argv[0][0]) {
		struct yx_path ip = { p, NULL, 0 };

		return yx_fail(c, &v->kids[0], &ip, "must not be empty");
	}
	return 0;
}

/* slurm: {partition: P, sbatch_args: [..], max_jobs: N}. */
static int parse_slurm(const struct yx_ctx *c, const struct yx_node *v,
		       const struct yx_path *p, struct node_conf *nc)
{
	if (yx_map(c, v, p))
		return -1;
	for (size_t i = 0; i < v->n; i += 2) {
		const struct yx_node *k = &v->kids[i], *x = &v->kids[i + 1];
		struct yx_path kp = { p, k->s, -1 };
		int r;

		if (!strcmp(k->s, "partition")) {
			r = set_str(c, x, &kp, &nc->slurm_partition);
			if (r == 0 && (nc->slurm_partition[0] == '-' ||
				       strpbrk(nc->slurm_partition, " \t\n/,'\"\\")))
				r = yx_fail(c, x, &kp, "must be a partition name (no blanks, '/', ',' or "
					    "quotes, not beginning with '-')");
		} else if (!strcmp(k->s, "sbatch_args")) {
			yx_strv_free(nc->sbatch_args, nc->nsbatch_args);
			nc->sbatch_args = NULL;
			nc->nsbatch_args = 0;
			r = yx_str_list(c, x, &kp, MAX_HOOK_ARGS, &nc->sbatch_args, &nc->nsbatch_args);
		} else if (!strcmp(k->s, "max_jobs")) {
			r = yx_int(c, x, &kp, 1, MAX_SLURM_JOBS, &nc->max_jobs);
		} else {
			r = yx_fail(c, k, &kp, "unknown key");
		}
		if (r)
			return -1;
	}
	if (!nc->slurm_partition)
		return yx_fail(c, v, p, "needs partition");
	return 0;
}

/* A shared_fs PATH: absolute, of plain parts (no "." or "..", no empty
 * one, no control character), no trailing '/' but for "/" itself. */
static const char *fs_path_problem(const char *s)
{
	if (s[0] != '/')
		return "must be an absolute path";
	for (const char *q = s; *q; q++)
		if ((unsigned char)*q < 0x20 || *q == 0x7f)
			return "must not hold control characters";
	for (const char *q = s + 1; *q;) {
		size_t n = strcspn(q, "/");

		if (n == 0 || (n == 1 && q[0] == '.') || (n == 2 && q[0] == '.' && q[1] == '.'))
			return "must have no empty, \".\" or \"..\" part, nor a trailing '/'";
		q += n + (q[n] == '/');
		if (q[-1] == '/' && !*q)
			return "must have no empty, \".\" or \"..\" part, nor a trailing '/'";
	}
	return NULL;
}

/* shared_fs: {NAME: PATH, ...}, NAME as a node's name. */
static int parse_shared_fs(const struct yx_ctx *c, const struct yx_node *v,
			   const struct yx_path *p, struct node_conf *nc)
{
	const char *why;

	if (yx_map(c, v, p))
		return -1;
	if (!(nc->shared_fs = calloc(v->n / 2 + 1, sizeof *nc->shared_fs)))
		return oom(c->err, c->fname);
	for (size_t i = 0; i < v->n; i += 2) {
		const struct yx_node *k = &v->kids[i];
		struct yx_path kp = { p, k->s, -1 };
		struct shared_fs *f = &nc->shared_fs[nc->nshared_fs];

		if ((why = yx_node_name_problem(k->s)))
			return yx_fail(c, k, &kp, "%s", !strncmp(why, "must be a node name", 19) ?
				       "must be a filesystem name (1 to 64 of A-Z a-z 0-9 . _ -)" : why);
		if (!(f->name = strdup(k->s)))
			return oom(c->err, c->fname);
		nc->nshared_fs++;
		if (set_str(c, &v->kids[i + 1], &kp, &f->path))
			return -1;
		if ((why = fs_path_problem(f->path)))
			return yx_fail(c, &v->kids[i + 1], &kp, "%s", why);
	}
	return 0;
}

static int parse_node(const struct yx_ctx *c, const struct yx_node *k,
		      const struct yx_node *v, const struct yx_path *np,
		      struct node_conf *nc)
{
	const char *bad;

	if ((bad = yx_node_name_problem(k->s)))
		return yx_fail(c, k, np, "%s", bad);
	if (!(nc->name = strdup(k->s)))
		return oom(c->err, c->fname);
	nc->idle_mib = DEFAULT_IDLE_MIB;
	nc->max_jobs_per_gpu = 1;
	if (yx_map(c, v, np))
		return -1;
	for (size_t i = 0; i < v->n; i += 2) {
		const struct yx_node *kk = &v->kids[i], *vv = &v->kids[i + 1];
		struct yx_path p = { np, kk->s, -1 };
		const char *key = kk->s;
		int r;

		if (!strcmp(key, "ssh")) {
			if ((r = set_str(c, vv, &p, &nc->ssh)) == 0 && nc->ssh[0] == '-')
				r = yx_fail(c, vv, &p, "must not begin with '-'");
		} else if (!strcmp(key, "local")) {
			r = yx_bool(c, vv, &p, &nc->local);
		} else if (!strcmp(key, "gpus")) {
			r = yx_int_set(c, vv, &p, 0, GPU_INDEX_MAX, 0, &nc->gpus, &nc->ngpus);
			nc->has_gpus = r == 0;
		} else if (!strcmp(key, "idle_mib")) {
			r = yx_int(c, vv, &p, 0, IDLE_MIB_MAX, &nc->idle_mib);
		} else if (!strcmp(key, "max_jobs_per_gpu")) {
			r = yx_int(c, vv, &p, 1, MAX_JOBS_PER_GPU, &nc->max_jobs_per_gpu);
		} else if (!strcmp(key, "public_key")) {
			r = set_str(c, vv, &p, &nc->public_key);
		} else if (!strcmp(key, "lease_dir")) {
			if ((r = set_str(c, vv, &p, &nc->lease_dir)) == 0 && nc->lease_dir[0] != '/')
				r = yx_fail(c, vv, &p, "must be an absolute path on the node");
			for (const char *s = nc->lease_dir; r == 0 && s && *s; s++)
				if ((unsigned char)*s < 0x20 || *s == 0x7f)
					r = yx_fail(c, vv, &p, "must not hold control characters");
		} else if (!strcmp(key, "shared_fs")) {
			r = parse_shared_fs(c, vv, &p, nc);
		} else if (!strcmp(key, "run_as")) {
			const char *how;

			if ((r = yx_str(c, vv, &p, &how)) == 0 && strcmp(how, "owner") && strcmp(how, "daemon"))
				r = yx_fail(c, vv, &p, "is owner or daemon");
			nc->run_as_owner = r == 0 && !strcmp(how, "owner");
		} else if (!strcmp(key, "on_finish")) {
			r = set_argv(c, vv, &p, MAX_HOOK_ARGS, &nc->on_finish, &nc->non_finish);
		} else if (!strcmp(key, "slurm")) {
			r = parse_slurm(c, vv, &p, nc);
		} else {
			r = yx_fail(c, kk, &p, "unknown key");
		}
		if (r)
			return -1;
	}
	if (nc->ssh && nc->local)
		return yx_fail(c, k, np, "ssh and local: true are exclusive");
	if (nc->slurm_partition) {
		/* Slurm picks the cards and never shares them. */
		if (nc->has_gpus)
			return yx_fail(c, k, np, "a Slurm node takes no gpus: list (Slurm picks the cards)");
		if (nc->max_jobs_per_gpu != 1)
			return yx_fail(c, k, np, "a Slurm node takes no max_jobs_per_gpu (Slurm does "
				       "not share cards)");
		if (nc->lease_dir)
			return yx_fail(c, k, np, "a Slurm node takes no lease_dir (Slurm leases "
				       "its cards)");
		if (!nc->ssh && !nc->run_as_owner)
			nc->local = 1;  /* Slurm's commands run here */
	}
	if (!nc->ssh && !nc->local)
		return yx_fail(c, k, np, nc->run_as_owner ? "run_as: owner needs ssh (a local node runs "
			       "its jobs as the daemon's account)" : "needs ssh or local: true");
	if (nc->run_as_owner && nc->local)
		return yx_fail(c, k, np, "run_as: owner on a local: true node (a local node runs its jobs "
			       "as the daemon's account)");
	if (nc->run_as_owner && !nc->slurm_partition && !nc->lease_dir)
		return yx_fail(c, k, np, "run_as: owner needs lease_dir (one lease per card across the "
			       "owners' accounts)");
	return 0;
}

/* run_as: owner needs lab: (checked once the whole file is read: lab:
 * may come after nodes:). */
static int run_as_needs_lab(const struct yx_ctx *c, const struct yx_node *root,
			    const struct config *cf)
{
	for (size_t i = 0; !cf->lab && i < root->n; i += 2) {
		const struct yx_node *nodes = &root->kids[i + 1];

		if (strcmp(root->kids[i].s, "nodes"))
			continue;
		for (size_t k = 0; k < cf->nnodes && 2 * k + 1 < nodes->n; k++) {
			const struct yx_node *v = &nodes->kids[2 * k + 1];
			struct yx_path np = { NULL, "nodes", -1 }, kp = { &np, nodes->kids[2 * k].s, -1 };

			for (size_t f = 0; cf->nodes[k].run_as_owner && f < v->n; f += 2)
				if (!strcmp(v->kids[f].s, "run_as")) {
					struct yx_path fp = { &kp, "run_as", -1 };

					return yx_fail(c, &v->kids[f + 1], &fp,
						       "owner needs lab: (the members' accounts)");
				}
		}
	}
	return 0;
}

/* preemption: {enabled: BOOL, min_runtime_seconds: S}. */
static int parse_preemption(const struct yx_ctx *c, const struct yx_node *v,
			    const struct yx_path *p, struct config *cf)
{
	if (yx_map(c, v, p))
		return -1;
	for (size_t i = 0; i < v->n; i += 2) {
		const struct yx_node *k = &v->kids[i], *x = &v->kids[i + 1];
		struct yx_path kp = { p, k->s, -1 };
		int r;

		if (!strcmp(k->s, "enabled"))
			r = yx_bool(c, x, &kp, &cf->preempt);
		else if (!strcmp(k->s, "min_runtime_seconds"))
			r = yx_int(c, x, &kp, 0, TIMEOUT_MAX, &cf->preempt_min_runtime);
		else
			r = yx_fail(c, k, &kp, "unknown key");
		if (r)
			return -1;
	}
	return 0;
}

static int parse_nodes(const struct yx_ctx *c, const struct yx_node *v,
		       const struct yx_path *p, struct config *cf)
{
	size_t n;

	if (yx_map(c, v, p))
		return -1;
	if ((n = v->n / 2) == 0)
		return yx_fail(c, v, p, "must name at least one node");
	if (n > MAX_NODES)
		return yx_fail(c, v, p, "more than %d nodes", MAX_NODES);
	if (!(cf->nodes = calloc(n, sizeof *cf->nodes)))
		return oom(c->err, c->fname);
	for (size_t i = 0; i < n; i++) {
		const struct yx_node *k = &v->kids[2 * i];
		struct yx_path np = { p, k->s, -1 };

		cf->nnodes = i + 1;
		if (parse_node(c, k, &v->kids[2 * i + 1], &np, &cf->nodes[i]))
			return -1;
	}
	return 0;
}

/* A user's name in lab: (admins, users): a portable login name,
 * [A-Za-z0-9._][A-Za-z0-9._-]{0,31} (useradd's own rule, less '$'). */
static const char *user_name_problem(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > 32)
		return "a user name is 1 to 32 characters";
	if (s[0] == '-')
		return "a user name must not begin with '-'";
	for (size_t i = 0; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '.' || s[i] == '_' || s[i] == '-'))
			return "a user name is letters, digits, '.', '_' and '-'";
	return NULL;
}

/* One user's limits in lab.users: what is given of {max_gpus,
 * max_queued, max_priority, shares} into *L (SET: a bit per key). */
static int parse_limits(const struct yx_ctx *c, const struct yx_node *v,
			const struct yx_path *p, struct lab_limits *l, unsigned *set)
{
	static const char *const keys[] = { "max_gpus", "max_queued", "max_priority", "shares" };
	long long *at[] = { &l->max_gpus, &l->max_queued, &l->max_priority, &l->shares };
	const long long lo[] = { 0, 0, PRIO_MIN, 1 };
	const long long hi[] = { LAB_LIMIT_MAX, LAB_LIMIT_MAX, PRIO_MAX, LAB_SHARES_MAX };

	*set = 0;
	if (yx_map(c, v, p))
		return -1;
	for (size_t i = 0; i < v->n; i += 2) {
		const struct yx_node *k = &v->kids[i];
		struct yx_path kp = { p, k->s, -1 };
		size_t f = 0;

		while (f < 4 && strcmp(k->s, keys[f]))
			f++;
		if (f == 4)
			return yx_fail(c, k, &kp, "unknown key");
		if (yx_int(c, &v->kids[i + 1], &kp, lo[f], hi[f], at[f]))
			return -1;
		*set |= 1u << f;
	}
	return 0;
}

/* lab.users: {default: LIMITS, NAME: LIMITS, ...}; a named user's
 * missing keys are default's, wherever default is written. */
static int parse_users(const struct yx_ctx *c, const struct yx_node *v,
		       const struct yx_path *p, struct lab_conf *l)
{
	unsigned *sets;
	size_t n;

	if (yx_map(c, v, p))
		return -1;
	if ((n = v->n / 2) > LAB_USERS_MAX)
		return yx_fail(c, v, p, "more than %d users", LAB_USERS_MAX);
	if (!(l->users = calloc(n ? n : 1, sizeof *l->users)) ||
	    !(sets = calloc(n ? n : 1, sizeof *sets)))
		return oom(c->err, c->fname);
	for (size_t i = 0; i < n; i++) {
		const struct yx_node *k = &v->kids[2 * i];
		struct yx_path kp = { p, k->s, -1 };
		const char *why;
		unsigned dset;

		if (!strcmp(k->s, "default")) {
			if (parse_limits(c, &v->kids[2 * i + 1], &kp, &l->def, &dset))
				goto bad;
			continue;
		}
		if ((why = user_name_problem(k->s))) {
			yx_fail(c, k, &kp, "%s", why);
			goto bad;
		}
		for (size_t u = 0; u < l->nusers; u++)
			if (!strcmp(l->users[u].name, k->s)) {
				yx_fail(c, k, &kp, "named twice");
				goto bad;
			}
		if (!(l->users[l->nusers].name = strdup(k->s))) {
			oom(c->err, c->fname);
			goto bad;
		}
		/* Counted at once: lab_conf_free frees its name if its
		 * limits are bad. */
		l->nusers++;
		if (parse_limits(c, &v->kids[2 * i + 1], &kp, &l->users[l->nusers - 1].lim,
				 &sets[l->nusers - 1]))
			goto bad;
	}
	for (size_t u = 0; u < l->nusers; u++) {
		struct lab_limits *x = &l->users[u].lim;

		if (!(sets[u] & 1))
			x->max_gpus = l->def.max_gpus;
		if (!(sets[u] & 2))
			x->max_queued = l->def.max_queued;
		if (!(sets[u] & 4))
			x->max_priority = l->def.max_priority;
		if (!(sets[u] & 8))
			x->shares = l->def.shares;
	}
	free(sets);
	return 0;
bad:
	free(sets);
	return -1;
}

/* lab.accounts: {MEMBER: ACCOUNT, ...}, both user names. */
static int parse_accounts(const struct yx_ctx *c, const struct yx_node *v,
			  const struct yx_path *p, struct lab_conf *l)
{
	const char *why;

	if (yx_map(c, v, p))
		return -1;
	if (v->n / 2 > LAB_USERS_MAX)
		return yx_fail(c, v, p, "more than %d accounts", LAB_USERS_MAX);
	if (!(l->accounts = calloc(v->n / 2 + 1, sizeof *l->accounts)))
		return oom(c->err, c->fname);
	for (size_t i = 0; i < v->n; i += 2) {
		const struct yx_node *k = &v->kids[i];
		struct yx_path kp = { p, k->s, -1 };
		struct lab_account *a = &l->accounts[l->naccounts];

		if ((why = user_name_problem(k->s)))
			return yx_fail(c, k, &kp, "%s", why);
		if (!(a->member = strdup(k->s)))
			return oom(c->err, c->fname);
		l->naccounts++;
		if (set_str(c, &v->kids[i + 1], &kp, &a->account))
			return -1;
		if ((why = user_name_problem(a->account)))
			return yx_fail(c, &v->kids[i + 1], &kp, "%s", why);
	}
	return 0;
}

/* lab: {group, admins, fair_share: {half_life_hours}, users, accounts} (lab.h). */
static int parse_lab(const struct yx_ctx *c, const struct yx_node *v,
		     const struct yx_path *p, struct config *cf)
{
	struct lab_conf *l;

	if (yx_map(c, v, p))
		return -1;
	if (!(l = cf->lab = calloc(1, sizeof *l)))
		return oom(c->err, c->fname);
	l->half_life_hours = LAB_DEFAULT_HALF_LIFE;
	l->def = (struct lab_limits){ LAB_NONE, LAB_NONE, PRIO_MAX, 1 };
	for (size_t i = 0; i < v->n; i += 2) {
		const struct yx_node *k = &v->kids[i], *x = &v->kids[i + 1];
		struct yx_path kp = { p, k->s, -1 };
		const char *why;
		int r;

		if (!strcmp(k->s, "group")) {
			r = set_str(c, x, &kp, &l->group);
			if (!r && (why = user_name_problem(l->group)))
				r = yx_fail(c, x, &kp, "%s", !strncmp(why, "a user", 6) ?
					    "a group name is 1 to 32 letters, digits, '.', '_' and '-', not beginning with '-'" : why);
		} else if (!strcmp(k->s, "admins")) {
			r = yx_is_null(x) ? 0 : yx_str_list(c, x, &kp, LAB_ADMINS_MAX, &l->admins, &l->nadmins);
			/* Named by its place, never echoed: it may hold a
			 * newline (the message is one line). */
			for (size_t a = 0; !r && a < l->nadmins; a++)
				if ((why = user_name_problem(l->admins[a]))) {
					struct yx_path ap = { &kp, NULL, (long long)a };

					r = yx_fail(c, &x->kids[a], &ap, "%s", why);
				}
		} else if (!strcmp(k->s, "fair_share")) {
			r = yx_map(c, x, &kp);
			for (size_t f = 0; !r && f < x->n; f += 2) {
				struct yx_path fp = { &kp, x->kids[f].s, -1 };

				r = strcmp(x->kids[f].s, "half_life_hours") ?
				    yx_fail(c, &x->kids[f], &fp, "unknown key") :
				    yx_int(c, &x->kids[f + 1], &fp, 0, LAB_HALF_LIFE_MAX, &l->half_life_hours);
			}
		} else if (!strcmp(k->s, "users")) {
			r = parse_users(c, x, &kp, l);
		} else if (!strcmp(k->s, "accounts")) {
			r = parse_accounts(c, x, &kp, l);
		} else {
			r = yx_fail(c, k, &kp, "unknown key");
		}
		if (r)
			return -1;
	}
	if (!l->group)
		return yx_fail(c, v, p, "group: missing (the members' Unix group)");
	return 0;
}

static int set_defaults(struct config *c)
{
	memset(c, 0, sizeof *c);
	c->reserve_after_seconds = DEFAULT_RESERVE_AFTER;
	c->gpu_refresh_seconds = DEFAULT_GPU_REFRESH;
	c->checkpoint_transfer_max_gib = DEFAULT_CK_TRANSFER_GIB;
	c->preempt_min_runtime = DEFAULT_MIN_RUNTIME;
	if (!(c->remote_state_dir = strdup(DEFAULT_REMOTE_STATE_DIR)) ||
	    !(c->ssh_command = calloc(1, sizeof *c->ssh_command)) ||
	    !(c->ssh_command[0] = strdup("ssh")))
		return -1;
	c->nssh_command = 1;
	return 0;
}

int config_parse(const char *buf, size_t len, const char *fname,
		 const char *dir, struct config *cf, struct cb_err *err)
{
	struct yx_ctx c = { fname, EX_CONFIG_, err };
	struct yx_node *root = NULL;
	const char *s = "./spool";
	char *home = NULL;
	int have_nodes = 0;

	if (set_defaults(cf)) {
		oom(err, fname);
		goto bad;
	}
	if (yx_load(&c, buf, len, &root))
		goto bad;
	if (!root) {
		cb_err_set(err, EX_CONFIG_, "%s: empty config file", fname);
		goto bad;
	}
	if (root->type != YX_MAP) {
		yx_fail(&c, root, NULL, "top level must be a mapping");
		goto bad;
	}
	if (yx_map(&c, root, NULL))
		goto bad;
	for (size_t i = 0; i < root->n; i += 2) {
		const struct yx_node *k = &root->kids[i], *v = &root->kids[i + 1];
		struct yx_path p = { NULL, k->s, -1 };
		int r;

		if (!strcmp(k->s, "spool")) {
			r = yx_str(&c, v, &p, &s);
			if (!r && !*s)
				r = yx_fail(&c, v, &p, "must not be empty");
		} else if (!strcmp(k->s, "remote_state_dir")) {
			r = set_str(&c, v, &p, &cf->remote_state_dir);
		} else if (!strcmp(k->s, "ssh_command")) {
			r = set_argv(&c, v, &p, MAX_SSH_ARGS, &cf->ssh_command, &cf->nssh_command);
		} else if (!strcmp(k->s, "on_finish")) {
			r = set_argv(&c, v, &p, MAX_HOOK_ARGS, &cf->on_finish, &cf->non_finish);
		} else if (!strcmp(k->s, "reserve_after_seconds")) {
			r = yx_int(&c, v, &p, 0, TIMEOUT_MAX, &cf->reserve_after_seconds);
		} else if (!strcmp(k->s, "gpu_refresh_seconds")) {
			r = yx_int(&c, v, &p, 0, GPU_REFRESH_MAX, &cf->gpu_refresh_seconds);
		} else if (!strcmp(k->s, "checkpoint_transfer_max_gib")) {
			r = yx_int(&c, v, &p, 0, CK_TRANSFER_GIB_MAX, &cf->checkpoint_transfer_max_gib);
		} else if (!strcmp(k->s, "preemption")) {
			r = parse_preemption(&c, v, &p, cf);
		} else if (!strcmp(k->s, "lab")) {
			r = parse_lab(&c, v, &p, cf);
		} else if (!strcmp(k->s, "nodes")) {
			r = parse_nodes(&c, v, &p, cf);
			have_nodes = 1;
		} else {
			r = yx_fail(&c, k, &p, "unknown key");
		}
		if (r)
			goto bad;
	}
	if (!have_nodes) {
		cb_err_set(err, EX_CONFIG_, "%s: nodes: missing", fname);
		goto bad;
	}
	if (run_as_needs_lab(&c, root, cf) < 0)
		goto bad;
	/* "~" and "~/x" are the operator's home; anything else relative is
	 * relative to the config file's directory. */
	if (!(home = expand_home(s)) || !(cf->spool = path_abs(dir, home))) {
		if (errno == ENOMEM)
			oom(err, fname);
		else    /* getcwd failed: the current directory is gone */
			cb_err_sys(err, EX_CONFIG_, "%s: spool: cannot make %s absolute", fname, s);
		goto bad;
	}
	free(home);
	yx_free(root);
	return 0;
bad:
	free(home);
	yx_free(root);
	config_free(cf);
	return -1;
}

/* ---- finding and reading -------------------------------------------------- */

/* Read PATH whole (regular file, at most CONFIG_MAX bytes).  0, 1 when
 * it does not exist and MISSING_OK, -1 with ERR set. */
static int read_config(const char *path, int missing_ok, char **buf, size_t *len,
		       struct cb_err *err)
{
	struct sbuf b = { 0 };
	struct stat st;
	int fd;

	/* O_NONBLOCK: a FIFO put where the config should be must not hang
	 * us; it is refused below as not a regular file. */
	if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) < 0) {
		if (errno == ENOENT && missing_ok)
			return 1;
		return cb_err_sys(err, EX_CONFIG_, "%s", path);
	}
	if (fstat(fd, &st) < 0) {
		cb_err_sys(err, EX_CONFIG_, "%s", path);
		goto bad;
	}
	if (!S_ISREG(st.st_mode)) {
		errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
		if (errno == EISDIR)
			cb_err_sys(err, EX_CONFIG_, "%s", path);
		else
			cb_err_set(err, EX_CONFIG_, "%s: not a regular file", path);
		goto bad;
	}
	if (sbuf_add(&b, "", 0)) {
		oom(err, path);
		goto bad;
	}
	for (;;) {
		char chunk[8192];
		ssize_t n = read(fd, chunk, sizeof chunk);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			cb_err_sys(err, EX_CONFIG_, "%s", path);
			goto bad;
		}
		if (n == 0)
			break;
		if (b.len + (size_t)n > CONFIG_MAX) {
			cb_err_set(err, EX_CONFIG_, "%s: larger than %u bytes", path, CONFIG_MAX);
			goto bad;
		}
		if (sbuf_add(&b, chunk, (size_t)n)) {
			oom(err, path);
			goto bad;
		}
	}
	close(fd);
	*buf = b.s;
	*len = b.len;
	return 0;
bad:
	close(fd);
	sbuf_free(&b);
	return -1;
}

/* Load the file PATH (as the user named it, for messages). */
static int load_file(const char *path, int missing_ok, struct config *c, struct cb_err *err)
{
	char *buf = NULL, *abs = NULL, *dir = NULL;
	size_t len = 0;
	int r;

	memset(c, 0, sizeof *c);
	if ((r = read_config(path, missing_ok, &buf, &len, err)) != 0)
		return r;
	if (!(abs = path_abs(NULL, path)) || !(dir = dir_of(abs))) {
		r = errno == ENOMEM ? oom(err, path) : cb_err_sys(err, EX_CONFIG_, "%s", path);
		goto out;
	}
	if ((r = config_parse(buf, len, path, dir, c, err)) == 0) {
		c->path = abs;
		abs = NULL;
	}
out:
	free(buf);
	free(abs);
	free(dir);
	return r;
}

/* The embedded default: one local node, the spool under XDG_STATE_HOME. */
static int config_default(struct config *c, struct cb_err *err)
{
	char *state;

	if (set_defaults(c))
		goto nomem;
	if (!(state = xdg_dir("XDG_STATE_HOME", ".local/state"))) {
		if (errno == ENOMEM)
			goto nomem;
		config_free(c);
		return cb_err_set(err, EX_CONFIG_,
				  "no config file, and no home directory for the default spool");
	}
	c->spool = xasprintf("%s/cardbaton/spool", state);
	free(state);
	if (!c->spool || !(c->nodes = calloc(1, sizeof *c->nodes)))
		goto nomem;
	c->nnodes = 1;
	if (!(c->nodes[0].name = strdup("local")))
		goto nomem;
	c->nodes[0].local = 1;
	c->nodes[0].idle_mib = DEFAULT_IDLE_MIB;
	c->nodes[0].max_jobs_per_gpu = 1;
	return 0;
nomem:
	config_free(c);
	return oom(err, NULL);
}

int config_load(const char *path, struct config *c, struct cb_err *err)
{
	const char *env = getenv("CARDBATON_CONFIG");
	char *xdg, *p;
	int r;

	memset(c, 0, sizeof *c);
	if (path)
		return load_file(path, 0, c, err);
	if ((r = load_file("config.yaml", 1, c, err)) <= 0)
		return r;
	/* Named by the environment: it must be there. */
	if (env && *env)
		return load_file(env, 0, c, err);
	if ((xdg = xdg_dir("XDG_CONFIG_HOME", ".config"))) {
		p = xasprintf("%s/cardbaton/config.yaml", xdg);
		free(xdg);
		if (!p)
			return oom(err, NULL);
		r = load_file(p, 1, c, err);
		free(p);
		if (r <= 0)
			return r;
	} else if (errno == ENOMEM) {
		return oom(err, NULL);
	}
	/* The machine's queue, as /etc/printcap is lpd's. */
	if ((r = load_file(CONFIG_SYSTEM, 1, c, err)) <= 0)
		return r;
	return config_default(c, err);
}

const struct node_conf *config_node(const struct config *c, const char *name)
{
	if (!c || !name)
		return NULL;
	for (size_t i = 0; i < c->nnodes; i++)
		if (c->nodes[i].name && strcmp(c->nodes[i].name, name) == 0)
			return &c->nodes[i];
	return NULL;
}

void config_free(struct config *c)
{
	if (!c)
		return;
	free(c->path);
	free(c->spool);
	free(c->remote_state_dir);
	yx_strv_free(c->ssh_command, c->nssh_command);
	yx_strv_free(c->on_finish, c->non_finish);
	for (size_t i = 0; i < c->nnodes; i++) {
		struct node_conf *n = &c->nodes[i];

		yx_strv_free(n->on_finish, n->non_finish);
		free(n->name);
		free(n->ssh);
		free(n->gpus);
		free(n->public_key);
		free(n->lease_dir);
		for (size_t f = 0; f < n->nshared_fs; f++) {
			free(n->shared_fs[f].name);
			free(n->shared_fs[f].path);
		}
		free(n->shared_fs);
		free(n->slurm_partition);
		yx_strv_free(n->sbatch_args, n->nsbatch_args);
	}
	free(c->nodes);
	lab_conf_free(c->lab);
	memset(c, 0, sizeof *c);
}

/* ---- shared filesystems (shared_fs) -------------------------------------- */

/* The length of MOUNT's prefix of PATH ending at a '/' (or PATH's end),
 * or 0 when it is none. */
static size_t under(const char *mount, const char *path)
{
	size_t n = strlen(mount);

	if (!strcmp(mount, "/"))
		return 1;
	return !strncmp(mount, path, n) && (path[n] == '/' || !path[n]) ? n : 0;
}

const char *shared_fs_of(const struct node_conf *from, const char *path)
{
	const struct shared_fs *best = NULL;
	size_t most = 0;

	if (!path || fs_path_problem(path))
		return NULL;
	for (size_t i = 0; i < from->nshared_fs; i++) {
		size_t n = under(from->shared_fs[i].path, path);

		if (n > most) {
			most = n;
			best = &from->shared_fs[i];
		}
	}
	return best ? best->name : NULL;
}

int shared_fs_mounts(const struct node_conf *nc, const char *name)
{
	for (size_t i = 0; name && i < nc->nshared_fs; i++)
		if (!strcmp(nc->shared_fs[i].name, name))
			return 1;
	return 0;
}

int shared_fs_path(const struct node_conf *from, const struct node_conf *to, const char *path,
		   char **out, const char **fs)
{
	const char *name, *rel = NULL, *mount = NULL;

	*out = NULL;
	*fs = NULL;
	if (from == to || !strcmp(from->name, to->name))
		return (*out = strdup(path)) ? 0 : -1;
	if (!(name = shared_fs_of(from, path)))
		return 1;
	for (size_t i = 0; i < from->nshared_fs; i++)
		if (!strcmp(from->shared_fs[i].name, name))
			rel = path + under(from->shared_fs[i].path, path);
	for (size_t i = 0; i < to->nshared_fs; i++)
		if (!strcmp(to->shared_fs[i].name, name))
			mount = to->shared_fs[i].path;
	if (!mount || !rel)
		return 1;
	/* REL is what follows the mount, without its '/'. */
	rel += *rel == '/';
	if (!(*out = xasprintf("%s%s%s", mount, *rel && strcmp(mount, "/") ? "/" : "", rel)))
		return -1;
	*fs = name;
	return 0;
}
