/*
 * drain.h - SPOOL/drain/NODE: the nodes taken out of service (drain.c,
 * LAYOUT.md §13).  `cardbaton drain` writes the file, `undrain`
 * removes it; the daemon places nothing new on a drained node, and
 * with `checkpoint` asks its resumable running jobs to give their
 * cards back (they wait, queued, pinned to it).
 */
#ifndef CARDBATON_DRAIN_H
#define CARDBATON_DRAIN_H

#include "spooldir.h"

/* Drain NODE (CHECKPOINT: its resumable jobs checkpoint and wait), or
 * undrain it (DRAINED 0; not drained already: nothing).  The write is
 * atomic; errors name the file (EX_TEMPFAIL_ for a full or read-only
 * spool). */
int spool_drain_set(struct spool *sp, const char *node, int drained, int checkpoint,
		    struct cb_err *err);
/* 1 NODE is drained (*CHECKPOINT set), 0 it is not, -1 error.  Writes
 * nothing (no drain/: none is). */
int spool_drain_get(struct spool *sp, const char *node, int *checkpoint, struct cb_err *err);

#endif
