/*
 * link.h - what the files of link/ share among themselves (the daemon
 * and the tools use node.h):
 *
 *   node.c   the argv for a node (ssh_command and our options, or the
 *            local worker), the child with a deadline, node_run,
 *            node_spawn
 *   ship.c   shipping the worker to an SSH node (node_ensure_worker),
 *            and its progress callback
 *   keys.c   a public key into a node's authorized_keys
 *   gpus.c   the cards as the worker reports them (gpus_parse, idle,
 *            eligible, node_gpus)
 */
#ifndef CARDBATON_LINK_H
#define CARDBATON_LINK_H

#include "jobfile.h"
#include "node.h"
#include "wire.h"

/* DIR/REST as one word for the node's shell; a leading "~" becomes
 * "$HOME", which the node's shell expands.  link_remote_worker: this
 * worker's path there, REMOTE_STATE_DIR/bin/cardbaton-worker-WORKER_ID. */
int link_remote_path(struct sbuf *b, const char *dir, const char *rest);
int link_remote_worker(struct sbuf *b, const struct config *c);

/* ssh_command + our options + NC's host + "--" + REMOTE (one shell
 * command line, consumed), NULL-terminated and malloc'd (argv_free);
 * BATCH: no prompts (BatchMode=yes). */
char **link_ssh_argv(const struct config *c, const struct node_conf *nc, char *remote,
		     int batch);

/* Run ARGV (consumed), feeding INPUT, collecting its output, within
 * TIMEOUT_MS (then its process group is killed).  0 with R filled, or
 * -1 with errno when it could not be started. */
int link_run(char **argv, const char *input, size_t inlen, int timeout_ms,
	     struct node_reply *r);

#endif
