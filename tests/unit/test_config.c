/*
 * test_config.c - config.yaml (SPEC §3): fields, defaults, errors, and
 * where config_load looks.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spool.h"
#include "t.h"

static struct cb_err e;
static char msg[1024];

static int parse_in(const char *text, const char *dir, struct config *c)
{
	cb_err_free(&e);
	e.ex = 0;
	return config_parse(text, strlen(text), "config.yaml", dir, c, &e);
}

/* The message a bad config gets; checks EX_CONFIG_ and a zeroed C. */
static const char *bad(const char *text)
{
	struct config c;
	static const struct config zero;

	if (parse_in(text, "/etc/cb", &c) == 0) {
		config_free(&c);
		return "(parsed)";
	}
	CHECK(e.ex == EX_CONFIG_);
	CHECK(memcmp(&c, &zero, sizeof c) == 0);
	snprintf(msg, sizeof msg, "%s", e.msg ? e.msg : "(no message)");
	return msg;
}

static const char example[] =
	"spool: ./spool                          # relative to the config file\n"
	"remote_state_dir: ~/.local/state/sshgpu-queue\n"
	"ssh_command: [ssh, -F, /path/to/ssh_config]\n"
	"reserve_after_seconds: 600\n"
	"on_finish: [sh, /hooks/mail.sh, me@example.org]\n"
	"nodes:\n"
	"  lab-a:\n"
	"    ssh: lab-a                          # OpenSSH alias or user@host\n"
	"    gpus: [0, 1, 2, 3]\n"
	"    idle_mib: 128\n"
	"    public_key: ~/.ssh/id_ed25519.pub\n"
	"    on_finish: [notify, '', 5]\n"
	"  workstation:\n"
	"    local: true\n"
	"  u.host_2:\n"
	"    ssh: alice@gpu2.example.org\n"
	"    local: false\n"
	"    gpus: []\n";

static void test_example(void)
{
	struct config c;
	const struct node_conf *n;

	CHECK(parse_in(example, "/etc/cb", &c) == 0);
	CHECK(c.path == NULL);  /* config_parse does not know the file */
	CHECK_STR(c.spool, "/etc/cb/spool");
	CHECK_STR(c.remote_state_dir, "~/.local/state/sshgpu-queue");
	CHECK(c.nssh_command == 3);
	if (c.nssh_command == 3) {
		CHECK_STR(c.ssh_command[0], "ssh");
		CHECK_STR(c.ssh_command[1], "-F");
		CHECK_STR(c.ssh_command[2], "/path/to/ssh_config");
	}
	CHECK(c.reserve_after_seconds == 600);
	CHECK(c.non_finish == 3);
	if (c.non_finish == 3) {
		CHECK_STR(c.on_finish[0], "sh");
		CHECK_STR(c.on_finish[2], "me@example.org");
	}
	CHECK(c.nnodes == 3);
	CHECK((n = config_node(&c, "lab-a")) != NULL);
	if (n) {
		CHECK(n == &c.nodes[0]);
		CHECK_STR(n->ssh, "lab-a");
		CHECK(!n->local);
		CHECK(n->has_gpus && n->ngpus == 4 && n->gpus[3] == 3);
		CHECK(n->idle_mib == 128);
		CHECK_STR(n->public_key, "~/.ssh/id_ed25519.pub");
		CHECK(n->non_finish == 3);
		if (n->non_finish == 3) {
			CHECK_STR(n->on_finish[0], "notify");
			CHECK_STR(n->on_finish[1], "");
			CHECK_STR(n->on_finish[2], "5");
		}
	}
	CHECK((n = config_node(&c, "workstation")) != NULL);
	if (n) {
		CHECK(n->local && n->ssh == NULL && !n->has_gpus && n->gpus == NULL);
		CHECK(n->idle_mib == DEFAULT_IDLE_MIB);
		CHECK(n->public_key == NULL);
		CHECK(n->on_finish == NULL && n->non_finish == 0);
	}
	CHECK((n = config_node(&c, "u.host_2")) != NULL);
	if (n) {
		CHECK_STR(n->ssh, "alice@gpu2.example.org");
		CHECK(!n->local && n->has_gpus && n->ngpus == 0);
	}
	CHECK(config_node(&c, "nope") == NULL);
	CHECK(config_node(&c, "lab") == NULL);
	config_free(&c);
	CHECK(c.nodes == NULL && c.spool == NULL && c.nnodes == 0);
}

static void test_spool_paths(void)
{
	static const struct { const char *spool, *dir, *want; } t[] = {
		{ "spool: ./spool\n", "/etc/cb", "/etc/cb/spool" },
		{ "spool: spool/\n", "/etc/cb/", "/etc/cb/spool" },
		{ "spool: ../s//q/./\n", "/a/b", "/a/b/../s/q" },
		{ "spool: /var/spool/cb/\n", "/a", "/var/spool/cb" },
		{ "spool: /\n", "/a", "/" },
		{ "spool: .\n", "/a/b", "/a/b" },
		{ "spool: ~/q\n", "/a", "/home/tester/q" },
		{ "spool: '~'\n", "/a", "/home/tester" },   /* plain ~ is null */
		{ "spool: x\n", "/", "/x" },
		{ "", "/srv/cb", "/srv/cb/spool" },
	};
	char *cwd = getcwd(NULL, 0), *want;
	struct config c;

	setenv("HOME", "/home/tester", 1);
	for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
		char text[256];

		snprintf(text, sizeof text, "%snodes: {n: {local: true}}\n", t[i].spool);
		CHECK(parse_in(text, t[i].dir, &c) == 0);
		CHECK_STR(c.spool, t[i].want);
		config_free(&c);
	}
	/* DIR relative, or NULL: against the current directory. */
	CHECK(parse_in("spool: s\nnodes: {n: {local: true}}\n", "conf", &c) == 0);
	want = xasprintf("%s/conf/s", cwd);
	CHECK_STR(c.spool, want);
	free(want);
	config_free(&c);
	CHECK(parse_in("nodes: {n: {local: true}}\n", NULL, &c) == 0);
	want = xasprintf("%s/spool", cwd);
	CHECK_STR(c.spool, want);
	free(want);
	config_free(&c);
	free(cwd);
}

static void test_defaults(void)
{
	struct config c;

	CHECK(parse_in("nodes:\n  w:\n    local: true\n", "/d", &c) == 0);
	CHECK_STR(c.spool, "/d/spool");
	CHECK_STR(c.remote_state_dir, DEFAULT_REMOTE_STATE_DIR);
	CHECK(c.nssh_command == 1);
	if (c.nssh_command == 1)
		CHECK_STR(c.ssh_command[0], "ssh");
	CHECK(c.reserve_after_seconds == DEFAULT_RESERVE_AFTER);
	CHECK(c.gpu_refresh_seconds == DEFAULT_GPU_REFRESH && DEFAULT_GPU_REFRESH == 30);
	CHECK(!c.preempt && c.preempt_min_runtime == DEFAULT_MIN_RUNTIME);
	CHECK(c.on_finish == NULL && c.non_finish == 0);
	CHECK(c.nnodes == 1 && c.nodes[0].local && c.nodes[0].idle_mib == DEFAULT_IDLE_MIB);
	CHECK(!c.nodes[0].has_gpus);
	config_free(&c);

	CHECK(parse_in("reserve_after_seconds: 0\nnodes: {w: {local: TRUE, idle_mib: 0}}\n", "/d", &c) == 0);
	CHECK(c.reserve_after_seconds == 0 && c.nodes[0].idle_mib == 0 && c.nodes[0].local == 1);
	config_free(&c);
	CHECK(parse_in("gpu_refresh_seconds: 0\nnodes: {w: {local: true}}\n", "/d", &c) == 0);
	CHECK(c.gpu_refresh_seconds == 0);
	config_free(&c);
	CHECK(parse_in("gpu_refresh_seconds: 86400\nnodes: {w: {local: true}}\n", "/d", &c) == 0);
	CHECK(c.gpu_refresh_seconds == 86400);
	config_free(&c);
	CHECK(parse_in("preemption: {enabled: true, min_runtime_seconds: 0}\nnodes: {w: {local: true}}\n",
		       "/d", &c) == 0);
	CHECK(c.preempt == 1 && c.preempt_min_runtime == 0);
	config_free(&c);
	CHECK(parse_in("preemption: {enabled: true}\nnodes: {w: {local: true}}\n", "/d", &c) == 0);
	CHECK(c.preempt == 1 && c.preempt_min_runtime == DEFAULT_MIN_RUNTIME);
	config_free(&c);
}

static void test_errors(void)
{
	/* ssh / local: exactly one. */
	CHECK_STR(bad("nodes:\n  lab-a:\n    ssh: lab-a\n    local: true\n"),
		  "config.yaml:2: nodes.lab-a: ssh and local: true are exclusive");
	CHECK_STR(bad("nodes:\n  lab-a:\n    gpus: [0]\n"),
		  "config.yaml:2: nodes.lab-a: needs ssh or local: true");
	CHECK_STR(bad("nodes:\n  lab-a:\n    local: false\n"),
		  "config.yaml:2: nodes.lab-a: needs ssh or local: true");
	CHECK_STR(bad("nodes:\n  lab-a: {}\n"), "config.yaml:2: nodes.lab-a: needs ssh or local: true");
	CHECK_STR(bad("nodes:\n  lab-a:\n"), "config.yaml:2: nodes.lab-a: must be a mapping");

	/* Unknown keys, with the dotted path and the line. */
	CHECK_STR(bad("nodes:\n  w:\n    local: true\n  lab-a:\n    ssh: x\n    idle: 5\n"),
		  "config.yaml:6: nodes.lab-a.idle: unknown key");
	CHECK_STR(bad("nodes: {w: {local: true}}\nspoll: /x\n"), "config.yaml:2: spoll: unknown key");

	/* Types and ranges. */
	CHECK_STR(bad("nodes:\n  lab-a:\n    ssh: x\n    idle_mib: -1\n"),
		  "config.yaml:4: nodes.lab-a.idle_mib: must be between 0 and 1048576");
	CHECK_STR(bad("nodes:\n  lab-a:\n    ssh: x\n    idle_mib: 64MiB\n"),
		  "config.yaml:4: nodes.lab-a.idle_mib: must be an integer");
	CHECK_STR(bad("nodes:\n  lab-a:\n    ssh: x\n    gpus: [0, 0]\n"),
		  "config.yaml:4: nodes.lab-a.gpus[1]: 0 is listed twice");
	CHECK_STR(bad("nodes:\n  lab-a:\n    ssh: x\n    gpus: [0, 1024]\n"),
		  "config.yaml:4: nodes.lab-a.gpus[1]: must be between 0 and 1023");
	CHECK_STR(bad("nodes:\n  w:\n    local: yes\n"),
		  "config.yaml:3: nodes.w.local: must be true or false");
	CHECK_STR(bad("nodes:\n  w:\n    local: \"true\"\n"),
		  "config.yaml:3: nodes.w.local: must be true or false");
	CHECK_STR(bad("nodes:\n  w:\n    ssh: -oProxyCommand=touch /tmp/x\n"),
		  "config.yaml:3: nodes.w.ssh: must not begin with '-'");
	CHECK_STR(bad("nodes:\n  w:\n    ssh: ''\n"), "config.yaml:3: nodes.w.ssh: must not be empty");
	CHECK_STR(bad("nodes:\n  w:\n    ssh: [a]\n"), "config.yaml:3: nodes.w.ssh: must be a string");
	CHECK_STR(bad("nodes:\n  bad name:\n    local: true\n"),
		  "config.yaml:2: nodes.bad name: must be a node name (1 to 64 of A-Z a-z 0-9 . _ -)");
	CHECK_STR(bad("nodes:\n  w:\n    local: true\n  w:\n    ssh: x\n"),
		  "config.yaml:4: nodes.w: duplicate key");
	CHECK_STR(bad("reserve_after_seconds: -5\nnodes: {w: {local: true}}\n"),
		  "config.yaml:1: reserve_after_seconds: must be between 0 and 315360000");
	CHECK_STR(bad("nodes: {w: {local: true}}\ngpu_refresh_seconds: -1\n"),
		  "config.yaml:2: gpu_refresh_seconds: must be between 0 and 86400");
	CHECK_STR(bad("gpu_refresh_seconds: 86401\nnodes: {w: {local: true}}\n"),
		  "config.yaml:1: gpu_refresh_seconds: must be between 0 and 86400");
	CHECK_STR(bad("gpu_refresh_seconds: 30s\nnodes: {w: {local: true}}\n"),
		  "config.yaml:1: gpu_refresh_seconds: must be an integer");
	CHECK_STR(bad("gpu_refresh_seconds: [30]\nnodes: {w: {local: true}}\n"),
		  "config.yaml:1: gpu_refresh_seconds: must be an integer");
	CHECK_STR(bad("nodes: {w: {local: true, max_jobs_per_gpu: 0}}\n"),
		  "config.yaml:1: nodes.w.max_jobs_per_gpu: must be between 1 and 64");
	CHECK_STR(bad("preemption: yes\nnodes: {w: {local: true}}\n"),
		  "config.yaml:1: preemption: must be a mapping");
	CHECK_STR(bad("preemption: {enabled: 1}\nnodes: {w: {local: true}}\n"),
		  "config.yaml:1: preemption.enabled: must be true or false");
	CHECK_STR(bad("preemption: {min_runtime_seconds: -1}\nnodes: {w: {local: true}}\n"),
		  "config.yaml:1: preemption.min_runtime_seconds: must be between 0 and 315360000");
	CHECK_STR(bad("preemption: {enable: true}\nnodes: {w: {local: true}}\n"),
		  "config.yaml:1: preemption.enable: unknown key");
	CHECK_STR(bad("ssh_command: ssh -F x\nnodes: {w: {local: true}}\n"),
		  "config.yaml:1: ssh_command: must be a list");
	CHECK_STR(bad("ssh_command: []\nnodes: {w: {local: true}}\n"),
		  "config.yaml:1: ssh_command: must not be empty");
	CHECK_STR(bad("ssh_command: ['', x]\nnodes: {w: {local: true}}\n"),
		  "config.yaml:1: ssh_command[0]: must not be empty");
	/* on_finish: a non-empty list of strings, the first not empty. */
	CHECK_STR(bad("on_finish: notify\nnodes: {w: {local: true}}\n"),
		  "config.yaml:1: on_finish: must be a list");
	CHECK_STR(bad("on_finish: ~\nnodes: {w: {local: true}}\n"),
		  "config.yaml:1: on_finish: must be a list");
	CHECK_STR(bad("on_finish: []\nnodes: {w: {local: true}}\n"),
		  "config.yaml:1: on_finish: must not be empty");
	CHECK_STR(bad("on_finish: ['', x]\nnodes: {w: {local: true}}\n"),
		  "config.yaml:1: on_finish[0]: must not be empty");
	CHECK_STR(bad("on_finish: [a, [b]]\nnodes: {w: {local: true}}\n"),
		  "config.yaml:1: on_finish[1]: must be a string");
	CHECK_STR(bad("on_finish: [a, null]\nnodes: {w: {local: true}}\n"),
		  "config.yaml:1: on_finish[1]: must be a string");
	CHECK_STR(bad("nodes:\n  w:\n    local: true\n    on_finish: {a: b}\n"),
		  "config.yaml:4: nodes.w.on_finish: must be a list");
	CHECK_STR(bad("spool:\nnodes: {w: {local: true}}\n"), "config.yaml:1: spool: must be a string");
	CHECK_STR(bad("spool: ~\nnodes: {w: {local: true}}\n"), "config.yaml:1: spool: must be a string");
	CHECK_STR(bad("spool: ''\nnodes: {w: {local: true}}\n"), "config.yaml:1: spool: must not be empty");
	CHECK_STR(bad("remote_state_dir: 7\nremote_state_dir: 8\nnodes: {w: {local: true}}\n"),
		  "config.yaml:2: remote_state_dir: duplicate key");

	/* Nodes required. */
	CHECK_STR(bad("spool: /x\n"), "config.yaml: nodes: missing");
	CHECK_STR(bad("nodes: {}\n"), "config.yaml:1: nodes: must name at least one node");
	CHECK_STR(bad("nodes: [a, b]\n"), "config.yaml:1: nodes: must be a mapping");
	CHECK_STR(bad(""), "config.yaml: empty config file");

	/* The same YAML strictness as job files. */
	CHECK_STR(bad("nodes: &n {w: {local: true}}\n"), "config.yaml:1: anchors and aliases are not allowed");
	CHECK_STR(bad("nodes: {w: {local: !!bool true}}\n"), "config.yaml:1: tags are not allowed");
	CHECK_STR(bad("nodes: {w: {local: true}}\n---\nnodes: {}\n"), "config.yaml:2: more than one document");
	CHECK(strncmp(bad("nodes:\n  w: {local: true\n"), "config.yaml:3: ", 15) == 0);
}

/* ---- lab: (SPEC §12, lab.h) ------------------------------------------------ */

#define W "nodes: {w: {local: true}}\n"

static void test_lab(void)
{
	struct config c;
	const struct lab_conf *l;
	const struct lab_limits *x;

	/* No lab: nothing of it. */
	CHECK(parse_in(W, "/d", &c) == 0);
	CHECK(c.lab == NULL);
	config_free(&c);

	/* The least: a group; the defaults for the rest. */
	CHECK(parse_in(W "lab:\n  group: gpuq\n", "/d", &c) == 0);
	CHECK((l = c.lab) != NULL);
	if (l) {
		CHECK_STR(l->group, "gpuq");
		CHECK(l->nadmins == 0 && l->admins == NULL);
		CHECK(l->half_life_hours == LAB_DEFAULT_HALF_LIFE && LAB_DEFAULT_HALF_LIFE == 168);
		CHECK(l->def.max_gpus == LAB_NONE && l->def.max_queued == LAB_NONE);
		CHECK(l->def.max_priority == PRIO_MAX && l->def.shares == 1);
		CHECK(l->nusers == 0);
		CHECK(lab_limits_of(l, "alice") == &l->def && lab_limits_of(l, NULL) == &l->def);
	}
	config_free(&c);
	CHECK(c.lab == NULL);

	/* The example: a named user inherits what default gives
	 * and it leaves out. */
	CHECK(parse_in(W "lab:\n"
		       "  group: gpuq                 # the members' Unix group (required)\n"
		       "  admins: [carol]\n"
		       "  fair_share: {half_life_hours: 168}\n"
		       "  users:\n"
		       "    default: {max_gpus: 8, max_queued: 1000, max_priority: 10, shares: 1}\n"
		       "    alice: {max_gpus: 2, shares: 2}\n", "/d", &c) == 0);
	CHECK((l = c.lab) != NULL);
	if (l) {
		CHECK(l->nadmins == 1 && l->admins && !strcmp(l->admins[0], "carol"));
		CHECK(l->half_life_hours == 168);
		CHECK(l->def.max_gpus == 8 && l->def.max_queued == 1000);
		CHECK(l->def.max_priority == 10 && l->def.shares == 1);
		CHECK(l->nusers == 1);
		x = lab_limits_of(l, "alice");
		CHECK(x != &l->def);
		CHECK(x->max_gpus == 2 && x->shares == 2);
		CHECK(x->max_queued == 1000 && x->max_priority == 10);
		CHECK(lab_limits_of(l, "bob") == &l->def);
		CHECK(lab_limits_of(l, "alic") == &l->def && lab_limits_of(l, "alicee") == &l->def);
	}
	config_free(&c);

	/* default written after the users, or not at all: the same rule
	 * (the built-in defaults where there is no default). */
	CHECK(parse_in(W "lab:\n  users:\n    bob: {max_queued: 5}\n    alice: {}\n"
		       "    default: {max_gpus: 3, max_priority: -2}\n  group: g\n", "/d", &c) == 0);
	if ((l = c.lab)) {
		CHECK(l->nusers == 2);
		x = lab_limits_of(l, "bob");
		CHECK(x->max_queued == 5 && x->max_gpus == 3 && x->max_priority == -2 && x->shares == 1);
		x = lab_limits_of(l, "alice");
		CHECK(x != &l->def && x->max_queued == LAB_NONE && x->max_gpus == 3 && x->max_priority == -2);
	}
	config_free(&c);
	CHECK(parse_in(W "lab:\n  group: g\n  users:\n    alice: {max_gpus: 0}\n", "/d", &c) == 0);
	if ((l = c.lab)) {
		x = lab_limits_of(l, "alice");
		CHECK(x->max_gpus == 0 && x->max_queued == LAB_NONE && x->max_priority == PRIO_MAX && x->shares == 1);
	}
	config_free(&c);
	/* Every key given: none of default's. */
	CHECK(parse_in(W "lab:\n  group: g\n  users:\n    default: {max_gpus: 1, max_queued: 1, max_priority: 1, shares: 1}\n"
		       "    a.b_c-d: {max_gpus: 1000000000, max_queued: 0, max_priority: -99999999, shares: 1000000}\n",
		       "/d", &c) == 0);
	if ((l = c.lab)) {
		x = lab_limits_of(l, "a.b_c-d");
		CHECK(x->max_gpus == LAB_LIMIT_MAX && x->max_queued == 0);
		CHECK(x->max_priority == -99999999 && x->shares == LAB_SHARES_MAX);
	}
	config_free(&c);

	/* fair_share.half_life_hours: 0 (no decay) to 1000000. */
	CHECK(parse_in(W "lab: {group: g, fair_share: {half_life_hours: 0}}\n", "/d", &c) == 0);
	CHECK(c.lab && c.lab->half_life_hours == 0);
	config_free(&c);
	CHECK(parse_in(W "lab: {group: g, fair_share: {half_life_hours: 1000000}}\n", "/d", &c) == 0);
	CHECK(c.lab && c.lab->half_life_hours == LAB_HALF_LIFE_MAX);
	config_free(&c);
	CHECK(parse_in(W "lab: {group: g, fair_share: {}}\n", "/d", &c) == 0);
	CHECK(c.lab && c.lab->half_life_hours == 168);
	config_free(&c);

	/* admins: several; none (null). */
	CHECK(parse_in(W "lab: {group: g, admins: [carol, root, a1]}\n", "/d", &c) == 0);
	CHECK(c.lab && c.lab->nadmins == 3 && !strcmp(c.lab->admins[2], "a1"));
	config_free(&c);
	CHECK(parse_in(W "lab: {group: g, admins: ~}\n", "/d", &c) == 0);
	CHECK(c.lab && c.lab->nadmins == 0);
	config_free(&c);
	/* A name of 32 characters, the most. */
	CHECK(parse_in(W "lab:\n  group: g\n  users: {abcdefghijabcdefghijabcdefghij12: {shares: 3}}\n", "/d", &c) == 0);
	CHECK(c.lab && c.lab->nusers == 1 &&
	      lab_limits_of(c.lab, "abcdefghijabcdefghijabcdefghij12")->shares == 3);
	config_free(&c);
}

static void test_lab_errors(void)
{
	/* group: required, a name. */
	CHECK_STR(bad(W "lab:\n  admins: [carol]\n"),
		  "config.yaml:3: lab: group: missing (the members' Unix group)");
	CHECK_STR(bad(W "lab: {}\n"), "config.yaml:2: lab: group: missing (the members' Unix group)");
	CHECK_STR(bad(W "lab:\n"), "config.yaml:2: lab: must be a mapping");
	CHECK_STR(bad(W "lab: gpuq\n"), "config.yaml:2: lab: must be a mapping");
	CHECK_STR(bad(W "lab: [gpuq]\n"), "config.yaml:2: lab: must be a mapping");
	CHECK_STR(bad(W "lab:\n  group: ''\n"), "config.yaml:3: lab.group: must not be empty");
	CHECK_STR(bad(W "lab:\n  group: ~\n"), "config.yaml:3: lab.group: must be a string");
	CHECK_STR(bad(W "lab:\n  group: [gpuq]\n"), "config.yaml:3: lab.group: must be a string");
	CHECK_STR(bad(W "lab:\n  group: -gpuq\n"),
		  "config.yaml:3: lab.group: a group name is 1 to 32 letters, digits, '.', '_' and '-', not beginning with '-'");
	CHECK_STR(bad(W "lab:\n  group: gpu q\n"),
		  "config.yaml:3: lab.group: a group name is 1 to 32 letters, digits, '.', '_' and '-', not beginning with '-'");
	CHECK_STR(bad(W "lab:\n  group: g/../x\n"),
		  "config.yaml:3: lab.group: a group name is 1 to 32 letters, digits, '.', '_' and '-', not beginning with '-'");
	CHECK_STR(bad(W "lab:\n  group: abcdefghijabcdefghijabcdefghij123\n"),
		  "config.yaml:3: lab.group: a group name is 1 to 32 letters, digits, '.', '_' and '-', not beginning with '-'");
	CHECK_STR(bad(W "lab:\n  group: \"g\\u00e9\"\n"),
		  "config.yaml:3: lab.group: a group name is 1 to 32 letters, digits, '.', '_' and '-', not beginning with '-'");
	CHECK_STR(bad(W "lab:\n  group: a\n  group: b\n"), "config.yaml:4: lab.group: duplicate key");
	CHECK_STR(bad(W "lab: {group: a}\nlab: {group: b}\n"), "config.yaml:3: lab: duplicate key");

	/* Unknown keys, at every level. */
	CHECK_STR(bad(W "lab:\n  group: g\n  grup: h\n"), "config.yaml:4: lab.grup: unknown key");
	CHECK_STR(bad(W "lab:\n  group: g\n  fair_share: {half_life: 1}\n"),
		  "config.yaml:4: lab.fair_share.half_life: unknown key");
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    default: {max_gpu: 1}\n"),
		  "config.yaml:5: lab.users.default.max_gpu: unknown key");
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    alice:\n      shares: 1\n      max_jobs: 2\n"),
		  "config.yaml:7: lab.users.alice.max_jobs: unknown key");

	/* admins: a list of user names. */
	CHECK_STR(bad(W "lab:\n  group: g\n  admins: carol\n"), "config.yaml:4: lab.admins: must be a list");
	CHECK_STR(bad(W "lab:\n  group: g\n  admins: [carol, [x]]\n"), "config.yaml:4: lab.admins[1]: must be a string");
	CHECK_STR(bad(W "lab:\n  group: g\n  admins: [carol, 'bad name']\n"),
		  "config.yaml:4: lab.admins[1]: a user name is letters, digits, '.', '_' and '-'");
	CHECK_STR(bad(W "lab:\n  group: g\n  admins: [-carol]\n"),
		  "config.yaml:4: lab.admins[0]: a user name must not begin with '-'");
	CHECK_STR(bad(W "lab:\n  group: g\n  admins: ['']\n"),
		  "config.yaml:4: lab.admins[0]: a user name is 1 to 32 characters");
	/* The element's own line; the name never echoed (fuzz_config found
	 * a newline in one making the message two lines). */
	CHECK_STR(bad(W "lab:\n  group: g\n  admins:\n    - carol\n    - \"ca\\nrol\"\n"),
		  "config.yaml:6: lab.admins[1]: a user name is letters, digits, '.', '_' and '-'");
	CHECK_STR(bad(W "lab: {group: g, admins: [\"ca\n\n\n\nrol\"]}\n"),
		  "config.yaml:2: lab.admins[0]: a user name is letters, digits, '.', '_' and '-'");

	/* fair_share. */
	CHECK_STR(bad(W "lab:\n  group: g\n  fair_share: 168\n"), "config.yaml:4: lab.fair_share: must be a mapping");
	CHECK_STR(bad(W "lab:\n  group: g\n  fair_share: {half_life_hours: -1}\n"),
		  "config.yaml:4: lab.fair_share.half_life_hours: must be between 0 and 1000000");
	CHECK_STR(bad(W "lab:\n  group: g\n  fair_share: {half_life_hours: 1000001}\n"),
		  "config.yaml:4: lab.fair_share.half_life_hours: must be between 0 and 1000000");
	CHECK_STR(bad(W "lab:\n  group: g\n  fair_share: {half_life_hours: 1.5}\n"),
		  "config.yaml:4: lab.fair_share.half_life_hours: must be an integer");
	CHECK_STR(bad(W "lab:\n  group: g\n  fair_share: {half_life_hours: '168'}\n"),
		  "config.yaml:4: lab.fair_share.half_life_hours: must be an integer");
	CHECK_STR(bad(W "lab:\n  group: g\n  fair_share: {half_life_hours: 99999999999999999999}\n"),
		  "config.yaml:4: lab.fair_share.half_life_hours: must be between 0 and 1000000");

	/* users: a mapping of names to limits. */
	CHECK_STR(bad(W "lab:\n  group: g\n  users: [alice]\n"), "config.yaml:4: lab.users: must be a mapping");
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    alice: 2\n"), "config.yaml:5: lab.users.alice: must be a mapping");
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    alice:\n"), "config.yaml:5: lab.users.alice: must be a mapping");
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    'bad name': {shares: 1}\n"),
		  "config.yaml:5: lab.users.bad name: a user name is letters, digits, '.', '_' and '-'");
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    -alice: {shares: 1}\n"),
		  "config.yaml:5: lab.users.-alice: a user name must not begin with '-'");
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    abcdefghijabcdefghijabcdefghij123: {}\n"),
		  "config.yaml:5: lab.users.abcdefghijabcdefghijabcdefghij123: a user name is 1 to 32 characters");
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    '': {}\n"),
		  "config.yaml:5: lab.users.: a user name is 1 to 32 characters");
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    ../x: {}\n"),
		  "config.yaml:5: lab.users.../x: a user name is letters, digits, '.', '_' and '-'");
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    alice: {}\n    alice: {shares: 2}\n"),
		  "config.yaml:6: lab.users.alice: duplicate key");
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    default: {}\n    default: {shares: 2}\n"),
		  "config.yaml:6: lab.users.default: duplicate key");

	/* The limits' ranges: shares 1 to 1000000 (0 refused); max_gpus
	 * and max_queued 0 to 1000000000 (negative refused); max_priority
	 * a priority. */
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    default: {shares: 0}\n"),
		  "config.yaml:5: lab.users.default.shares: must be between 1 and 1000000");
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    alice: {shares: 0}\n"),
		  "config.yaml:5: lab.users.alice.shares: must be between 1 and 1000000");
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    alice: {shares: 1000001}\n"),
		  "config.yaml:5: lab.users.alice.shares: must be between 1 and 1000000");
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    alice: {max_gpus: -1}\n"),
		  "config.yaml:5: lab.users.alice.max_gpus: must be between 0 and 1000000000");
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    default: {max_gpus: -1}\n"),
		  "config.yaml:5: lab.users.default.max_gpus: must be between 0 and 1000000000");
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    alice: {max_queued: -5}\n"),
		  "config.yaml:5: lab.users.alice.max_queued: must be between 0 and 1000000000");
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    alice: {max_queued: 1000000001}\n"),
		  "config.yaml:5: lab.users.alice.max_queued: must be between 0 and 1000000000");
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    alice: {max_priority: 100000000}\n"),
		  "config.yaml:5: lab.users.alice.max_priority: must be between -99999999 and 99999999");
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    alice: {max_gpus: two}\n"),
		  "config.yaml:5: lab.users.alice.max_gpus: must be an integer");
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    alice: {max_gpus: ~}\n"),
		  "config.yaml:5: lab.users.alice.max_gpus: must be an integer");
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    alice: {max_gpus: 1, max_gpus: 2}\n"),
		  "config.yaml:5: lab.users.alice.max_gpus: duplicate key");
	/* An error after a named user was taken: nothing kept (under the
	 * sanitizers, nothing leaked either). */
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    bob: {}\n    alice: {shares: 0}\n"),
		  "config.yaml:6: lab.users.alice.shares: must be between 1 and 1000000");
	CHECK_STR(bad(W "lab:\n  group: g\n  users:\n    bob: {}\n  fair_share: {half_life_hours: -1}\n"),
		  "config.yaml:6: lab.fair_share.half_life_hours: must be between 0 and 1000000");
	CHECK_STR(bad(W "lab:\n  admins: [a, b]\n  users:\n    bob: {}\n"),
		  "config.yaml:3: lab: group: missing (the members' Unix group)");
}

#undef W

/* ---- config_load ---------------------------------------------------------- */

static void put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	CHECK(fd >= 0);
	if (fd >= 0) {
		CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
		close(fd);
	}
}

static char *cat(const char *a, const char *b)
{
	return xasprintf("%s%s", a, b);
}

/* slurm: {partition, sbatch_args, max_jobs}: a Slurm node, local
 * without ssh; what a Slurm node cannot take is refused. */
static void test_slurm(void)
{
	struct config c;

	CHECK(parse_in("nodes:\n  cluster:\n    slurm:\n      partition: gpu\n"
		       "      sbatch_args: [--account, lab]\n      max_jobs: 64\n"
		       "    ssh: login\n  box: {local: true}\n", "/etc/cb", &c) == 0);
	CHECK_STR(c.nodes[0].slurm_partition, "gpu");
	CHECK(c.nodes[0].nsbatch_args == 2);
	CHECK_STR(c.nodes[0].sbatch_args[1], "lab");
	CHECK(c.nodes[0].max_jobs == 64);
	CHECK_STR(c.nodes[0].ssh, "login");
	CHECK(!c.nodes[0].local);
	CHECK(!c.nodes[1].slurm_partition && c.nodes[1].max_jobs == 0);
	config_free(&c);
	CHECK(parse_in("nodes: {cluster: {slurm: {partition: gpu}}}\n", "/etc/cb", &c) == 0);
	CHECK(c.nodes[0].local && !c.nodes[0].ssh && c.nodes[0].max_jobs == 0);
	config_free(&c);
	CHECK_STR(bad("nodes: {cluster: {slurm: {max_jobs: 2}}}\n"),
		  "config.yaml:1: nodes.cluster.slurm: needs partition");
	CHECK_STR(bad("nodes: {cluster: {slurm: {partition: -x}}}\n"),
		  "config.yaml:1: nodes.cluster.slurm.partition: must be a partition name (no blanks, "
		  "'/', ',' or quotes, not beginning with '-')");
	CHECK_STR(bad("nodes: {cluster: {slurm: {partition: gpu, max_jobs: 0}}}\n"),
		  "config.yaml:1: nodes.cluster.slurm.max_jobs: must be between 1 and 1000000");
	CHECK_STR(bad("nodes: {cluster: {slurm: {partition: gpu, sbatch_args: --x}}}\n"),
		  "config.yaml:1: nodes.cluster.slurm.sbatch_args: must be a list");
	CHECK_STR(bad("nodes: {cluster: {slurm: {partition: gpu, qos: x}}}\n"),
		  "config.yaml:1: nodes.cluster.slurm.qos: unknown key");
	CHECK_STR(bad("nodes: {cluster: {slurm: {partition: gpu}, gpus: [0]}}\n"),
		  "config.yaml:1: nodes.cluster: a Slurm node takes no gpus: list (Slurm picks the cards)");
	CHECK_STR(bad("nodes: {cluster: {slurm: {partition: gpu}, max_jobs_per_gpu: 2}}\n"),
		  "config.yaml:1: nodes.cluster: a Slurm node takes no max_jobs_per_gpu (Slurm does "
		  "not share cards)");
	CHECK_STR(bad("nodes: {cluster: {slurm: [gpu]}}\n"),
		  "config.yaml:1: nodes.cluster.slurm: must be a mapping");
}

static void test_load(void)
{
	char tmpl[] = "/tmp/cb-test-config.XXXXXX", *top, *p, *q, *old_cwd;
	const char *dirs[] = { "/work", "/work/sub", "/xdg", "/xdg/cardbaton", "/state",
			       "/home", "/home/.config", "/home/.config/cardbaton" };
	struct config c;

	old_cwd = getcwd(NULL, 0);
	CHECK(mkdtemp(tmpl) != NULL);
	top = realpath(tmpl, NULL);     /* getcwd's spelling of it */
	CHECK(top != NULL);
	if (!top)
		return;
	for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
		p = cat(top, dirs[i]);
		CHECK(mkdir(p, 0700) == 0);
		free(p);
	}
	p = cat(top, "/work");
	CHECK(chdir(p) == 0);
	free(p);
	p = cat(top, "/xdg");
	setenv("XDG_CONFIG_HOME", p, 1);
	free(p);
	p = cat(top, "/state");
	setenv("XDG_STATE_HOME", p, 1);
	free(p);
	p = cat(top, "/home");
	setenv("HOME", p, 1);
	free(p);

	unsetenv("CARDBATON_CONFIG");

	/* 1. Nothing anywhere (but perhaps /etc/cardbaton/config.yaml, the
	 * machine's: not on a test machine): the embedded default. */
	CHECK(config_load(NULL, &c, &e) == 0);
	CHECK(c.path == NULL);
	p = cat(top, "/state/cardbaton/spool");
	CHECK_STR(c.spool, p);
	free(p);
	CHECK_STR(c.remote_state_dir, DEFAULT_REMOTE_STATE_DIR);
	CHECK(c.nssh_command == 1 && !strcmp(c.ssh_command[0], "ssh"));
	CHECK(c.reserve_after_seconds == DEFAULT_RESERVE_AFTER);
	CHECK(c.nnodes == 1 && config_node(&c, "local") != NULL);
	if (c.nnodes == 1) {
		CHECK(c.nodes[0].local && !c.nodes[0].ssh && !c.nodes[0].has_gpus);
		CHECK(c.nodes[0].idle_mib == DEFAULT_IDLE_MIB);
	}
	config_free(&c);

	/* XDG_STATE_HOME unset, or relative (ignored): ~/.local/state. */
	unsetenv("XDG_STATE_HOME");
	CHECK(config_load(NULL, &c, &e) == 0);
	p = cat(top, "/home/.local/state/cardbaton/spool");
	CHECK_STR(c.spool, p);
	config_free(&c);
	setenv("XDG_STATE_HOME", "rel/state", 1);
	CHECK(config_load(NULL, &c, &e) == 0);
	CHECK_STR(c.spool, p);
	free(p);
	config_free(&c);

	/* 2. $HOME/.config/cardbaton/config.yaml when XDG_CONFIG_HOME is unset. */
	p = cat(top, "/home/.config/cardbaton/config.yaml");
	put(p, "nodes: {home-node: {local: true}}\n");
	unsetenv("XDG_CONFIG_HOME");
	CHECK(config_load(NULL, &c, &e) == 0);
	CHECK_STR(c.path, p);
	CHECK(config_node(&c, "home-node") != NULL);
	q = cat(top, "/home/.config/cardbaton/spool");
	CHECK_STR(c.spool, q);
	free(q);
	config_free(&c);
	free(p);

	/* 3. $XDG_CONFIG_HOME/cardbaton/config.yaml wins over that. */
	p = cat(top, "/xdg");
	setenv("XDG_CONFIG_HOME", p, 1);
	free(p);
	p = cat(top, "/xdg/cardbaton/config.yaml");
	put(p, "spool: q\nnodes: {xdg-node: {local: true}}\n");
	CHECK(config_load(NULL, &c, &e) == 0);
	CHECK_STR(c.path, p);
	CHECK(config_node(&c, "xdg-node") != NULL);
	q = cat(top, "/xdg/cardbaton/q");
	CHECK_STR(c.spool, q);
	free(q);
	config_free(&c);

	/* A bad one is an error, not skipped. */
	put(p, "nodes: {xdg-node: {locale: true}}\n");
	CHECK(config_load(NULL, &c, &e) == -1);
	CHECK(e.ex == EX_CONFIG_);
	q = xasprintf("%s:1: nodes.xdg-node.locale: unknown key", p);
	CHECK_STR(e.msg, q);
	free(q);
	free(p);

	/* 3b. $CARDBATON_CONFIG wins over XDG's; a file it names must be
	 * there (never the next one); empty, it is not set. */
	q = cat(top, "/state/env.yaml");
	put(q, "nodes: {env-node: {local: true}}\n");
	setenv("CARDBATON_CONFIG", q, 1);
	CHECK(config_load(NULL, &c, &e) == 0);
	CHECK_STR(c.path, q);
	CHECK(config_node(&c, "env-node") != NULL && config_node(&c, "xdg-node") == NULL);
	config_free(&c);
	unlink(q);
	CHECK(config_load(NULL, &c, &e) == -1);
	CHECK(e.ex == EX_CONFIG_);
	p = xasprintf("%s: No such file or directory", q);
	CHECK_STR(e.msg, p);
	free(p);
	setenv("CARDBATON_CONFIG", "", 1);
	CHECK(config_load(NULL, &c, &e) == -1);   /* XDG's, still the bad one */
	CHECK(e.ex == EX_CONFIG_ && strstr(e.msg, "locale: unknown key") != NULL);
	put(q, "nodes: {env-node: {local: true}}\n");
	setenv("CARDBATON_CONFIG", q, 1);

	/* 4. ./config.yaml wins over all of them. */
	put("config.yaml", "nodes: {cwd-node: {ssh: h}}\n");
	CHECK(config_load(NULL, &c, &e) == 0);
	p = cat(top, "/work/config.yaml");
	CHECK_STR(c.path, p);
	free(p);
	CHECK(config_node(&c, "cwd-node") != NULL && config_node(&c, "xdg-node") == NULL);
	p = cat(top, "/work/spool");
	CHECK_STR(c.spool, p);
	free(p);
	config_free(&c);
	put("config.yaml", "nodes: {cwd-node: {ssh: h, gpus: x}}\n");
	CHECK(config_load(NULL, &c, &e) == -1);
	CHECK_STR(e.msg, "config.yaml:1: nodes.cwd-node.gpus: must be a list");

	unsetenv("CARDBATON_CONFIG");
	unlink(q);
	free(q);

	/* 5. PATH given wins over everything; spool is relative to it. */
	put("sub/c.yaml", "spool: data\nnodes: {path-node: {local: true}}\n");
	CHECK(config_load("sub/c.yaml", &c, &e) == 0);
	p = cat(top, "/work/sub/c.yaml");
	CHECK_STR(c.path, p);
	free(p);
	p = cat(top, "/work/sub/data");
	CHECK_STR(c.spool, p);
	free(p);
	CHECK(config_node(&c, "path-node") != NULL);
	config_free(&c);

	/* ...and must exist. */
	CHECK(config_load("missing.yaml", &c, &e) == -1);
	CHECK(e.ex == EX_CONFIG_);
	CHECK_STR(e.msg, "missing.yaml: No such file or directory");
	CHECK(config_load("sub", &c, &e) == -1);
	CHECK(e.ex == EX_CONFIG_);
	CHECK_STR(e.msg, "sub: Is a directory");
	CHECK(mkfifo("fifo.yaml", 0600) == 0);
	CHECK(config_load("fifo.yaml", &c, &e) == -1);
	CHECK_STR(e.msg, "fifo.yaml: not a regular file");
	{
		char *big = malloc((1u << 20) + 2);

		memset(big, '#', (1u << 20) + 1);
		big[(1u << 20) + 1] = '\0';
		put("big.yaml", big);
		free(big);
		CHECK(config_load("big.yaml", &c, &e) == -1);
		CHECK_STR(e.msg, "big.yaml: larger than 1048576 bytes");
	}

	/* Clean up. */
	unlink("config.yaml");
	unlink("sub/c.yaml");
	unlink("fifo.yaml");
	unlink("big.yaml");
	p = cat(top, "/xdg/cardbaton/config.yaml");
	unlink(p);
	free(p);
	p = cat(top, "/home/.config/cardbaton/config.yaml");
	unlink(p);
	free(p);
	CHECK(chdir(old_cwd) == 0);
	for (size_t i = sizeof dirs / sizeof *dirs; i-- > 0; ) {
		p = cat(top, dirs[i]);
		CHECK(rmdir(p) == 0);
		free(p);
	}
	CHECK(rmdir(top) == 0);
	free(top);
	free(old_cwd);
}

/* lease_dir: a node's leases in one directory that other accounts and
 * controllers share (issue 34): absolute, and not for a Slurm node. */
static void test_lease_dir(void)
{
	struct config c;

	CHECK(parse_in("nodes:\n  a: {ssh: a, lease_dir: /var/lib/cardbaton/leases}\n  b: {local: true}\n",
		       "/etc/cb", &c) == 0);
	CHECK_STR(c.nodes[0].lease_dir, "/var/lib/cardbaton/leases");
	CHECK(c.nodes[1].lease_dir == NULL);
	config_free(&c);
	CHECK_STR(bad("nodes: {a: {local: true, lease_dir: leases}}\n"),
		  "config.yaml:1: nodes.a.lease_dir: must be an absolute path on the node");
	CHECK_STR(bad("nodes: {a: {local: true, lease_dir: ~/leases}}\n"),
		  "config.yaml:1: nodes.a.lease_dir: must be an absolute path on the node");
	CHECK_STR(bad("nodes: {a: {local: true, lease_dir: \"/x\\ny\"}}\n"),
		  "config.yaml:1: nodes.a.lease_dir: must not hold control characters");
	CHECK_STR(bad("nodes: {a: {local: true, lease_dir: [/x]}}\n"),
		  "config.yaml:1: nodes.a.lease_dir: must be a string");
	CHECK_STR(bad("nodes: {cluster: {slurm: {partition: gpu}, lease_dir: /x}}\n"),
		  "config.yaml:1: nodes.cluster: a Slurm node takes no lease_dir (Slurm leases its cards)");
}

/* run_as: owner (issue 34) and lab.accounts. */
static void test_run_as(void)
{
	static const char lab[] = "lab: {group: gpuq, accounts: {alice: asmith, bob: bob2}}\n";
	char text[512];
	struct config c;

	snprintf(text, sizeof text, "nodes:\n  a: {ssh: u@a, run_as: owner, lease_dir: /l}\n"
		 "  b: {ssh: b, run_as: daemon}\n  c: {ssh: c}\n"
		 "  s: {ssh: login, run_as: owner, slurm: {partition: gpu}}\n%s", lab);
	CHECK(parse_in(text, "/etc/cb", &c) == 0);
	CHECK(c.nodes[0].run_as_owner == 1);
	CHECK(c.nodes[1].run_as_owner == 0);
	CHECK(c.nodes[2].run_as_owner == 0);
	CHECK(c.nodes[3].run_as_owner == 1 && !c.nodes[3].local);
	CHECK(c.nodes[0].as_user == NULL && c.nodes[0].as_key == NULL);
	CHECK(c.lab->naccounts == 2);
	CHECK_STR(lab_account_of(c.lab, "alice"), "asmith");
	CHECK_STR(lab_account_of(c.lab, "bob"), "bob2");
	CHECK_STR(lab_account_of(c.lab, "carol"), "carol");
	config_free(&c);
	/* lab: may come after or before nodes: */
	CHECK(parse_in("lab: {group: g}\nnodes: {a: {ssh: a, run_as: owner, lease_dir: /l}}\n",
		       "/etc/cb", &c) == 0);
	config_free(&c);
	CHECK_STR(bad("nodes: {a: {ssh: a, run_as: owner, lease_dir: /l}}\n"),
		  "config.yaml:1: nodes.a.run_as: owner needs lab: (the members' accounts)");
	CHECK_STR(bad("nodes:\n  x: {ssh: x}\n  a:\n    ssh: a\n    lease_dir: /l\n    run_as: owner\n"),
		  "config.yaml:6: nodes.a.run_as: owner needs lab: (the members' accounts)");
	CHECK_STR(bad("lab: {group: g}\nnodes: {a: {ssh: a, run_as: owner}}\n"),
		  "config.yaml:2: nodes.a: run_as: owner needs lease_dir (one lease per card across the "
		  "owners' accounts)");
	CHECK_STR(bad("lab: {group: g}\nnodes: {a: {local: true, run_as: owner, lease_dir: /l}}\n"),
		  "config.yaml:2: nodes.a: run_as: owner on a local: true node (a local node runs its jobs "
		  "as the daemon's account)");
	CHECK_STR(bad("lab: {group: g}\nnodes: {s: {run_as: owner, slurm: {partition: gpu}}}\n"),
		  "config.yaml:2: nodes.s: run_as: owner needs ssh (a local node runs its jobs as the "
		  "daemon's account)");
	CHECK_STR(bad("lab: {group: g}\nnodes: {a: {ssh: a, run_as: root, lease_dir: /l}}\n"),
		  "config.yaml:2: nodes.a.run_as: is owner or daemon");
	CHECK_STR(bad("lab: {group: g}\nnodes: {a: {ssh: a, run_as: [owner], lease_dir: /l}}\n"),
		  "config.yaml:2: nodes.a.run_as: must be a string");
	CHECK_STR(bad("lab: {group: g, accounts: {alice: \"-x\"}}\nnodes: {a: {local: true}}\n"),
		  "config.yaml:1: lab.accounts.alice: a user name must not begin with '-'");
	CHECK_STR(bad("lab: {group: g, accounts: {\"a b\": x}}\nnodes: {a: {local: true}}\n"),
		  "config.yaml:1: lab.accounts.a b: a user name is letters, digits, '.', '_' and '-'");
	CHECK_STR(bad("lab: {group: g, accounts: {alice: x, alice: y}}\nnodes: {a: {local: true}}\n"),
		  "config.yaml:1: lab.accounts.alice: duplicate key");
	CHECK_STR(bad("lab: {group: g, accounts: {alice: \"\"}}\nnodes: {a: {local: true}}\n"),
		  "config.yaml:1: lab.accounts.alice: must not be empty");
	CHECK_STR(bad("lab: {group: g, accounts: [alice]}\nnodes: {a: {local: true}}\n"),
		  "config.yaml:1: lab.accounts: must be a mapping");
}

/* shared_fs (issue 35): parsed, and a checkpoint's path as another
 * node sees it. */
static void test_shared_fs(void)
{
	struct config c;
	char *out;
	const char *fs;

	CHECK(parse_in("nodes:\n  a: {ssh: a, shared_fs: {lab: /mnt/lab, scratch: /scratch}}\n"
		       "  b: {ssh: b, shared_fs: {lab: /nfs/lab-data}}\n  c: {ssh: c}\n"
		       "  r: {ssh: r, shared_fs: {lab: /}}\n", "/etc/cb", &c) == 0);
	CHECK(c.nodes[0].nshared_fs == 2 && c.nodes[2].nshared_fs == 0);
	CHECK_STR(c.nodes[0].shared_fs[0].name, "lab");
	CHECK_STR(c.nodes[0].shared_fs[0].path, "/mnt/lab");
	CHECK_STR(shared_fs_of(&c.nodes[0], "/mnt/lab/run1/ck.pt"), "lab");
	CHECK(shared_fs_of(&c.nodes[0], "/mnt/labx/ck.pt") == NULL);
	CHECK(shared_fs_of(&c.nodes[0], "/mnt/lab/../etc/ck") == NULL);
	CHECK(shared_fs_of(&c.nodes[0], "/mnt/lab/./ck") == NULL);
	CHECK(shared_fs_of(&c.nodes[0], "mnt/lab/ck") == NULL);
	CHECK(shared_fs_mounts(&c.nodes[1], "lab") && !shared_fs_mounts(&c.nodes[1], "scratch"));
	CHECK(shared_fs_path(&c.nodes[0], &c.nodes[1], "/mnt/lab/run1/ck.pt", &out, &fs) == 0);
	CHECK_STR(out, "/nfs/lab-data/run1/ck.pt");
	CHECK_STR(fs, "lab");
	free(out);
	CHECK(shared_fs_path(&c.nodes[0], &c.nodes[1], "/mnt/lab", &out, &fs) == 0);
	CHECK_STR(out, "/nfs/lab-data");
	free(out);
	CHECK(shared_fs_path(&c.nodes[0], &c.nodes[3], "/mnt/lab/x", &out, &fs) == 0);
	CHECK_STR(out, "/x");
	free(out);
	CHECK(shared_fs_path(&c.nodes[3], &c.nodes[0], "/x/y", &out, &fs) == 0);
	CHECK_STR(out, "/mnt/lab/x/y");
	free(out);
	/* Not shared with b, not under a mount, or b has no such one. */
	CHECK(shared_fs_path(&c.nodes[0], &c.nodes[1], "/scratch/ck", &out, &fs) == 1 && !out);
	CHECK(shared_fs_path(&c.nodes[0], &c.nodes[1], "/home/u/ck", &out, &fs) == 1);
	CHECK(shared_fs_path(&c.nodes[0], &c.nodes[2], "/mnt/lab/ck", &out, &fs) == 1);
	/* Its own node: the path itself. */
	CHECK(shared_fs_path(&c.nodes[2], &c.nodes[2], "/home/u/ck", &out, &fs) == 0 && !fs);
	CHECK_STR(out, "/home/u/ck");
	free(out);
	config_free(&c);
	CHECK_STR(bad("nodes: {a: {ssh: a, shared_fs: {lab: mnt}}}\n"),
		  "config.yaml:1: nodes.a.shared_fs.lab: must be an absolute path");
	CHECK_STR(bad("nodes: {a: {ssh: a, shared_fs: {lab: /mnt/}}}\n"),
		  "config.yaml:1: nodes.a.shared_fs.lab: must have no empty, \".\" or \"..\" part, nor a trailing '/'");
	CHECK_STR(bad("nodes: {a: {ssh: a, shared_fs: {lab: /mnt/../x}}}\n"),
		  "config.yaml:1: nodes.a.shared_fs.lab: must have no empty, \".\" or \"..\" part, nor a trailing '/'");
	CHECK_STR(bad("nodes: {a: {ssh: a, shared_fs: {lab: \"/m\\tx\"}}}\n"),
		  "config.yaml:1: nodes.a.shared_fs.lab: must not hold control characters");
	CHECK_STR(bad("nodes: {a: {ssh: a, shared_fs: {\"l b\": /m}}}\n"),
		  "config.yaml:1: nodes.a.shared_fs.l b: must be a filesystem name (1 to 64 of A-Z a-z 0-9 . _ -)");
	CHECK_STR(bad("nodes: {a: {ssh: a, shared_fs: [/m]}}\n"),
		  "config.yaml:1: nodes.a.shared_fs: must be a mapping");
}

int main(void)
{
	test_example();
	test_spool_paths();
	test_defaults();
	test_errors();
	test_lab();
	test_lab_errors();
	test_load();
	test_slurm();
	test_lease_dir();
	test_run_as();
	test_shared_fs();
	cb_err_free(&e);
	return T_DONE();
}
