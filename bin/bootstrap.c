/*
 * cardbaton-bootstrap - install a public key in a node account's
 * ~/.ssh/authorized_keys; with --lab, the lab's key (SPOOL/controller.pub)
 * in the invoking member's own account there, restricted to the
 * worker's commands (node_lab_key, worker/gate.c), or with --remove out
 * of it again.
 *
 * Design: one ssh call (node_ensure_key) runs a short sh script on the
 * node that keeps every existing entry, skips a key that is already
 * there (same type and blob, whatever its options or comment), and
 * replaces the file atomically with mode 600, under a lock (flock(1),
 * else mkdir) so that runs at once each add their key.  When standard
 * input is a terminal, ssh may prompt (password, unknown host key):
 * this is the first-time set-up the README describes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"

static const char usage[] =
	"cardbaton-bootstrap [--config PATH] --node N (--public-key PUB | --lab [--remove])";

enum { OPT_NODE = OPT_TOOL_FIRST, OPT_KEY, OPT_LAB, OPT_REMOVE };

static const struct option longopts[] = {
	COMMON_LONGOPTS,
	{ "node", required_argument, NULL, OPT_NODE },
	{ "public-key", required_argument, NULL, OPT_KEY },
	{ "lab", no_argument, NULL, OPT_LAB },
	{ "remove", no_argument, NULL, OPT_REMOVE },
	{ NULL, 0, NULL, 0 },
};

/* --lab [--remove]: the lab's key in this account on NC. */
static void lab_key(const struct config *c, const struct node_conf *nc, int remove)
{
	struct cb_err err = { 0 };
	char *path = xasprintf("%s/%s", c->spool, LAB_PUB), *key;
	int r;

	if (!path)
		die(EX_OSERR_, "out of memory");
	if (access(path, F_OK) < 0 && errno == ENOENT)
		die(EX_NOINPUT_, "%s: no such file (the lab's daemon makes it when it starts)", path);
	if (!(key = pubkey_read(path, &err)))
		die_err(&err);
	if (!remove && node_ensure_worker(c, nc, &err) < 0)
		die_err(&err);
	if ((r = node_lab_key(c, nc, key, remove, isatty(0), &err)) < 0)
		die_err(&err);
	if (isatty(2))
		fprintf(stderr, "%s: %s: %s\n", progname, nc->name,
			remove ? (r ? "the lab's key was not there" : "the lab's key removed")
			       : r ? "the lab's key already there, restricted to the worker"
				   : "the lab's key added, restricted to the worker's commands");
	free(key);
	free(path);
}

int main(int argc, char **argv)
{
	const struct node_conf *nc;
	const char *node = NULL, *pub = NULL;
	struct cb_err err = { 0 };
	struct config c;
	char *key;
	int ch, r, lab = 0, remove = 0;

	prog_init(argc, argv);
	while ((ch = tool_getopt(argc, argv, "", longopts, 0, usage)) != -1) {
		switch (ch) {
		case OPT_NODE:
			node = optarg;
			break;
		case OPT_KEY:
			pub = optarg;
			break;
		case OPT_LAB:
			lab = 1;
			break;
		case OPT_REMOVE:
			remove = 1;
			break;
		default:
			usage_error(usage, "unknown option");
		}
	}
	if (optind != argc)
		usage_error(usage, "unexpected argument '%s'", argv[optind]);
	if (!node)
		usage_error(usage, "--node is required");
	if (lab == !!pub)
		usage_error(usage, lab ? "--lab and --public-key are exclusive" : "--public-key or --lab is required");
	if (remove && !lab)
		usage_error(usage, "--remove goes with --lab");
	tool_config(&c);
	if (!(nc = config_node(&c, node)))
		die(EX_DATAERR_, "unknown node '%s'", node);
	if (nc->local)
		die(EX_USAGE_, "node %s is local: there is no SSH account to bootstrap", node);
	if (lab && !c.lab)
		die(EX_CONFIG_, "%s: --lab needs a lab's config (lab:)", c.path ? c.path : "the embedded config");
	if (lab) {
		lab_key(&c, nc, remove);
		config_free(&c);
		return 0;
	}
	if (!(key = pubkey_read(pub, &err)))
		die_err(&err);
	if (isatty(2))
		fprintf(stderr, "%s: %s: ensuring the key in ~/.ssh/authorized_keys...\n", progname, node);
	if ((r = node_ensure_key(&c, nc, key, isatty(0), &err)) < 0)
		die_err(&err);
	if (isatty(2))
		fprintf(stderr, "%s: %s: %s\n", progname, node, r ? "key already present" : "key added");
	free(key);
	config_free(&c);
	return 0;
}
