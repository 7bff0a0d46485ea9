/*
 * ctl.h - control requests in SPOOL/ctl/ (ctl.c).
 */
#ifndef CARDBATON_CTL_H
#define CARDBATON_CTL_H

#include <limits.h>

#include "spooldir.h"

/* Control requests (ctl/, LAYOUT.md §7): "<id>.<op>.<unique>", content
 * "priority N" for promote --priority.  The daemon applies and removes
 * them.  DRAIN and UNDRAIN are a lab's (drain/ is the daemon's there):
 * "0.drain.<unique>", ID 0 (never a job's), content "node NAME" and,
 * for drain --checkpoint, "checkpoint", a line each. */
enum ctl_op { CTL_CANCEL, CTL_PROMOTE, CTL_PAUSE, CTL_RESUME, CTL_HOLD, CTL_RELEASE,
	      CTL_DRAIN, CTL_UNDRAIN, CTL_N };
extern const char *const ctl_op_name[CTL_N];
#define CTL_NO_ARG LLONG_MIN
#define CTL_NODE_OP(op) ((op) == CTL_DRAIN || (op) == CTL_UNDRAIN)
int spool_ctl(struct spool *sp, long long id, enum ctl_op op, long long arg,
	      struct cb_err *err);
/* A drain (ON) or undrain request of NODE, CHECKPOINT for --checkpoint. */
int spool_ctl_drain(struct spool *sp, const char *node, int on, int checkpoint,
		    struct cb_err *err);
/* NAME's job ID and operation: a job's (ID 1 to SEQ_MAX), or a node's
 * (DRAIN, UNDRAIN: ID 0, written "0").  -1: not a request's name. */
int ctl_parse_name(const char *name, long long *id, enum ctl_op *op);
/* A drain request's content, LEN bytes at BODY: its node (malloc'd into
 * *NODE) and whether it says checkpoint.  -1: not one (nothing set). */
int ctl_parse_drain(const char *body, size_t len, char **node, int *checkpoint);

#endif
