/*
 * nodestat.h - SPOOL/nodes/: what the daemon last saw of each node
 * (nodestat.c).
 */
#ifndef CARDBATON_NODESTAT_H
#define CARDBATON_NODESTAT_H

#include <stddef.h>

#include <cJSON.h>

#include "spooldir.h"

/* A card as the daemon last saw it (nodes/NAME.json "gpus"). */
struct node_card {
	int index;
	char *uuid, *name;
	long long mem_used, mem_total, util, procs;    /* MiB, %, count; -1: not reported */
	int idle;               /* idle by the daemon's rule (SPEC §7) */
	char *lease;            /* the attempt holding its lease, or NULL */
	long long job;          /* ... its job, or 0 */
	long long *shares;      /* jobs sharing it (share: true) */
	size_t nshares;
};

/* What the daemon last saw of a node (nodes/NAME.json), for status,
 * top and metrics. */
struct node_status {
	char *name;
	int reachable;
	char *error;            /* NULL when reachable */
	long long since;        /* epoch ms of the last change of reachable */
	int drained;            /* drain/NAME exists (drain.h; not in nodes/) */
	/* Its cards at the last GPU query that answered (none before
	 * one has), and when that was (epoch ms, 0: never). */
	struct node_card *cards;
	size_t ncards;
	long long cards_at;
	/* run_as: owner: the accounts that refuse the lab's key there,
	 * each its reason ("alice: not authorized on lab-a (...)") */
	char **refused;
	size_t nrefused;
	/* Checkpoints being copied here (checkpoint_transfer), each job's
	 * with its source node and the bytes done of its total (-1: not
	 * known yet) */
	struct node_transfer {
		long long job;
		char *from;
		long long done, total;
	} *transfers;
	size_t ntransfers;
};
/* The text of nodes/NAME.json for NS (malloc'd; NULL: out of memory),
 * and the file written (atomically, not synced: it is a view). */
char *node_status_text(const struct node_status *ns);
int spool_node_put(struct spool *sp, const char *name, const char *text, struct cb_err *err);
/* Every nodes/ file, sorted by name, with whether it is drained;
 * unreadable ones are skipped. */
int spool_node_list(struct spool *sp, struct node_status **v, size_t *n);
void node_status_free(struct node_status *v, size_t n);
void node_status_clear(struct node_status *ns);     /* one, zeroed */

/* A card's reading as JSON: KEY: V, or null when the driver did not
 * report it (-1); what cJSON_Add* returns.  (nodes/, gpus --json.) */
cJSON *json_add_reading(cJSON *o, const char *key, long long v);

/* The most of a nodes/ file that is read (a Slurm partition's
 * thousands of cards fit). */
#define NODE_FILE_MAX (4u << 20)

#endif
