/*
 * cardbaton-bootstrap - install a public key in a node account's
 * ~/.ssh/authorized_keys.
 *
 * Design: one ssh call (node_ensure_key) runs a short sh script on the
 * node that keeps every existing entry, skips a key that is already
 * there (same type and blob, whatever its options or comment), and
 * replaces the file atomically with mode 600, under a lock (flock(1),
 * else mkdir) so that runs at once each add their key.  When standard
 * input is a terminal, ssh may prompt (password, unknown host key):
 * this is the first-time set-up the README describes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"

static const char usage[] = "cardbaton-bootstrap [--config PATH] --node N --public-key PUB";

enum { OPT_NODE = OPT_TOOL_FIRST, OPT_KEY };

static const struct option longopts[] = {
	COMMON_LONGOPTS,
	{ "node", required_argument, NULL, OPT_NODE },
	{ "public-key", required_argument, NULL, OPT_KEY },
	{ NULL, 0, NULL, 0 },
};

int main(int argc, char **argv)
{
	const struct node_conf *nc;
	const char *node = NULL, *pub = NULL;
	struct cb_err err = { 0 };
	struct config c;
	char *key;
	int ch, r;

	prog_init(argc, argv);
	while ((ch = tool_getopt(argc, argv, "", longopts, 0, usage)) != -1) {
		switch (ch) {
		case OPT_NODE:
			node = optarg;
			break;
		case OPT_KEY:
			pub = optarg;
			break;
		default:
			usage_error(usage, "unknown option");
		}
	}
	if (optind != argc)
		usage_error(usage, "unexpected argument '%s'", argv[optind]);
	if (!node || !pub)
		usage_error(usage, "%s is required", node ? "--public-key" : "--node");
	tool_config(&c);
	if (!(nc = config_node(&c, node)))
		die(EX_DATAERR_, "unknown node '%s'", node);
	if (nc->local)
		die(EX_USAGE_, "node %s is local: there is no SSH account to bootstrap", node);
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
