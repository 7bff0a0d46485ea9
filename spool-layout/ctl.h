/*
 * ctl.h - control requests in SPOOL/ctl/ (ctl.c).
 */
#ifndef CARDBATON_CTL_H
#define CARDBATON_CTL_H

#include <limits.h>

#include "spooldir.h"

/* Control requests (ctl/): "<id>.<op>.<unique>", content "priority N"
 * for promote --priority.  The daemon applies and removes them. */
enum ctl_op { CTL_CANCEL, CTL_PROMOTE, CTL_PAUSE, CTL_RESUME, CTL_HOLD, CTL_RELEASE, CTL_N };
extern const char *const ctl_op_name[CTL_N];
#define CTL_NO_ARG LLONG_MIN
int spool_ctl(struct spool *sp, long long id, enum ctl_op op, long long arg,
	      struct cb_err *err);
int ctl_parse_name(const char *name, long long *id, enum ctl_op *op);

#endif
