/*
 * fuzz_config.c - config.yaml (spool-layout/config.c over yamlx.c).
 *
 * Properties: a refused config gets exit code 78 and a one-line message
 * starting with the file name; an accepted one has what the rest of the
 * program relies on without checking again: an absolute spool path in
 * normal form, at least one node, each with a valid name and exactly
 * one of ssh (not starting with '-') and local, eligible GPU indices
 * distinct and in range, a non-empty ssh_command whose first word is
 * not empty, on_finish (top level and per node) absent or the same,
 * and names that config_node finds; a lab (lab:) has a group name,
 * admins and users that are user names, users named once (never
 * "default") whose limits lab_limits_of finds, and every limit in its
 * range (a named user's unset ones default's).
 */
#include "spool.h"
#include "node.h"
#include "yamlx.h"
#include "fuzz.h"

static int fuzz_init;

/* A name of lab: (config.c user_name_problem): 1 to 32 of [A-Za-z0-9._-],
 * not beginning with '-'. */
static int lab_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > 32 || s[0] == '-')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", s[i]))
			return 0;
	return 1;
}

static void lab_limits_ok(const struct lab_limits *x)
{
	FUZZ_CHECK(x->max_gpus == LAB_NONE || (x->max_gpus >= 0 && x->max_gpus <= LAB_LIMIT_MAX));
	FUZZ_CHECK(x->max_queued == LAB_NONE || (x->max_queued >= 0 && x->max_queued <= LAB_LIMIT_MAX));
	FUZZ_CHECK(x->max_priority >= PRIO_MIN && x->max_priority <= PRIO_MAX);
	FUZZ_CHECK(x->shares >= 1 && x->shares <= LAB_SHARES_MAX);
}

static void lab_ok(const struct lab_conf *l)
{
	FUZZ_CHECK(l->group && lab_name_ok(l->group));
	FUZZ_CHECK(!l->nadmins || l->admins);
	for (size_t i = 0; i < l->nadmins; i++)
		FUZZ_CHECK(l->admins[i] && lab_name_ok(l->admins[i]));
	FUZZ_CHECK(l->half_life_hours >= 0 && l->half_life_hours <= LAB_HALF_LIFE_MAX);
	lab_limits_ok(&l->def);
	FUZZ_CHECK(lab_limits_of(l, NULL) == &l->def);
	FUZZ_CHECK(lab_limits_of(l, "default") == &l->def);
	for (size_t i = 0; i < l->nusers; i++) {
		const struct lab_user *u = &l->users[i];

		FUZZ_CHECK(u->name && lab_name_ok(u->name) && strcmp(u->name, "default"));
		lab_limits_ok(&u->lim);
		FUZZ_CHECK(lab_limits_of(l, u->name) == &u->lim);
	}
	/* accounts: both names valid, each member once, the first found */
	for (size_t i = 0; i < l->naccounts; i++) {
		const struct lab_account *a = &l->accounts[i];

		FUZZ_CHECK(a->member && lab_name_ok(a->member) && a->account && lab_name_ok(a->account));
		FUZZ_CHECK(lab_account_of(l, a->member) == a->account);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config c;
	struct cb_err err = { 0 };

	if (!fuzz_init) {
		/* "~/x" in spool: expands against this, never the real home. */
		setenv("HOME", "/home/fuzz", 1);
		fuzz_init = 1;
	}
	if (config_parse((const char *)data, size, "config.yaml", "/etc/cardbaton", &c, &err) < 0) {
		FUZZ_CHECK(err.msg != NULL);
		FUZZ_CHECK(err.ex == EX_CONFIG_ || err.ex == EX_OSERR_);
		FUZZ_CHECK(!strncmp(err.msg, "config.yaml:", 12));
		FUZZ_CHECK(fuzz_one_line(err.msg));
		FUZZ_CHECK(c.nodes == NULL && c.spool == NULL && c.ssh_command == NULL && c.lab == NULL);
		cb_err_free(&err);
		return 0;
	}
	FUZZ_CHECK(err.msg == NULL);
	FUZZ_CHECK(c.spool && c.spool[0] == '/');
	FUZZ_CHECK(!strstr(c.spool, "//") && !strstr(c.spool, "/./"));
	FUZZ_CHECK(strcmp(c.spool, "/") == 0 || c.spool[strlen(c.spool) - 1] != '/');
	{
		size_t l = strlen(c.spool);

		FUZZ_CHECK(!(l >= 2 && !strcmp(c.spool + l - 2, "/.")));
	}
	FUZZ_CHECK(c.remote_state_dir && c.remote_state_dir[0]);
	FUZZ_CHECK(c.nssh_command >= 1 && c.ssh_command && c.ssh_command[0][0]);
	FUZZ_CHECK(c.reserve_after_seconds >= 0);
	FUZZ_CHECK(!c.on_finish == !c.non_finish);
	FUZZ_CHECK(!c.on_finish || c.on_finish[0][0]);
	FUZZ_CHECK(c.nnodes >= 1);
	for (size_t i = 0; i < c.nnodes; i++) {
		const struct node_conf *n = &c.nodes[i];

		FUZZ_CHECK(n->name && yx_node_name_problem(n->name) == NULL);
		FUZZ_CHECK(!n->ssh != !n->local);
		FUZZ_CHECK(!n->ssh || (n->ssh[0] && n->ssh[0] != '-'));
		FUZZ_CHECK(n->idle_mib >= 0);
		FUZZ_CHECK(!n->public_key || n->public_key[0]);
		/* lease_dir: absolute, no control character, no Slurm node */
		FUZZ_CHECK(!n->lease_dir || (n->lease_dir[0] == '/' && !n->slurm_partition));
		for (const char *p = n->lease_dir; p && *p; p++)
			FUZZ_CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
		/* run_as: owner: a lab, never local, a lease_dir unless Slurm;
		 * never an account of its own in the config */
		FUZZ_CHECK(!n->run_as_owner || (c.lab && !n->local && (n->lease_dir || n->slurm_partition)));
		FUZZ_CHECK(!n->as_user && !n->as_key);
		/* shared_fs: named as nodes, absolute paths of plain parts
		 * (each its own mount: shared_fs_of finds a file under it) */
		for (size_t f = 0; f < n->nshared_fs; f++) {
			const struct shared_fs *s = &n->shared_fs[f];
			char *in = s->path ? xasprintf("%s%s", s->path, strcmp(s->path, "/") ? "/x" : "x") : NULL;

			FUZZ_CHECK(s->name && yx_node_name_problem(s->name) == NULL);
			FUZZ_CHECK(s->path && s->path[0] == '/' && !strstr(s->path, "//") &&
				   !strstr(s->path, "/./") && !strstr(s->path, "/../"));
			FUZZ_CHECK(shared_fs_mounts(n, s->name));
			FUZZ_CHECK(!in || shared_fs_of(n, in) != NULL);
			free(in);
		}
		FUZZ_CHECK(n->has_gpus || n->ngpus == 0);
		FUZZ_CHECK(!n->on_finish == !n->non_finish);
		FUZZ_CHECK(!n->on_finish || n->on_finish[0][0]);
		for (size_t k = 0; k < n->ngpus; k++) {
			FUZZ_CHECK(n->gpus[k] >= 0 && n->gpus[k] <= GPU_INDEX_MAX);
			FUZZ_CHECK(gpu_eligible(n, n->gpus[k]));
			for (size_t m = 0; m < k; m++)
				FUZZ_CHECK(n->gpus[m] != n->gpus[k]);
		}
		FUZZ_CHECK(config_node(&c, n->name) == n);
	}
	if (c.lab)
		lab_ok(c.lab);
	config_free(&c);
	return 0;
}
