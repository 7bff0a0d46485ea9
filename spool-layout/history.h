/*
 * history.h - every job the spool has a record of (history.c): what
 * `report` and `users` read, the records of queued/ running/ paused/
 * done/, each job once.
 */
#ifndef CARDBATON_HISTORY_H
#define CARDBATON_HISTORY_H

#include <stddef.h>

#include "record.h"
#include "spooldir.h"
#include "util.h"

/*
 * Every job of SP that has a record, once, sorted by ID, into *JOBS
 * (malloc'd, *N of them; spool_history_free), by the readers' rules
 * (LAYOUT.md §6): the directories listed in the order of the flow of
 * jobs (queued/ running/ paused/ done/: a record that moves while they
 * are listed is listed twice rather than not at all); of two records of
 * one ID the higher rev; a record that vanished between the listing and
 * the read has moved, and is looked up again (spool_find; one found
 * back in new/ or incoming/ has no history and is left out).  Names of
 * no record's grammar are ignored, as status ignores them.  A record
 * that cannot be read is left out and given to SKIP (the error, for the
 * call only: freed after it), when SKIP is not NULL.  Submissions not
 * yet accepted have no record: they are not read.  0, or -1 with ERR (a
 * directory that cannot be listed, out of memory): nothing in *JOBS.
 */
int spool_history(struct spool *sp, struct job **jobs, size_t *n,
		  void (*skip)(void *arg, const struct cb_err *e), void *arg, struct cb_err *err);
void spool_history_free(struct job *jobs, size_t n);

#endif
