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
 * and names that config_node finds.
 */
#include "spool.h"
#include "node.h"
#include "yamlx.h"
#include "fuzz.h"

static int fuzz_init;

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
		FUZZ_CHECK(c.nodes == NULL && c.spool == NULL && c.ssh_command == NULL);
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
	config_free(&c);
	return 0;
}
