/*
 * nodestat.h - SPOOL/nodes/: what the daemon last saw of each node
 * (nodestat.c).
 */
#ifndef CARDBATON_NODESTAT_H
#define CARDBATON_NODESTAT_H

#include <stddef.h>

#include "spooldir.h"

/* What the daemon last saw of a node (nodes/NAME.json), for status. */
struct node_status {
	char *name;
	int reachable;
	char *error;            /* NULL when reachable */
	long long since;        /* epoch ms of the last change */
	int drained;            /* drain/NAME exists (drain.h; not in nodes/) */
};
int spool_node_put(struct spool *sp, const struct node_status *ns, struct cb_err *err);
/* Every nodes/ file, sorted by name, with whether it is drained;
 * unreadable ones are skipped. */
int spool_node_list(struct spool *sp, struct node_status **v, size_t *n);
void node_status_free(struct node_status *v, size_t n);

#endif
