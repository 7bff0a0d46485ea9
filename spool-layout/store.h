/*
 * store.h - job records in the spool (store.c, LAYOUT.md §§5-7): load, find,
 * put (the only way a record is written), reject.
 */
#ifndef CARDBATON_STORE_H
#define CARDBATON_STORE_H

#include "record.h"
#include "spooldir.h"

/* The largest record a reader reads (larger: bad data). */
#define RECORD_MAX (16u << 20)

/* Load the record DIR/NAME.  Errors EX_DATAERR_ naming the file. */
int spool_load(struct spool *sp, enum spool_dir d, const char *name,
	       struct job *j, struct cb_err *err);

/* A submission in D (SD_NEW or SD_INCOMING) named NAME with ID, not yet
 * accepted, as a queued job with reason "waiting for the daemon to
 * accept it" (its definition left empty when the file does not parse).
 * -1 with EX_NOINPUT_ when the file is gone (the daemon took it). */
int spool_load_pending(struct spool *sp, enum spool_dir d, const char *name,
		       long long id, struct job *j, struct cb_err *err);

/*
 * Find job ID wherever it is.  1 found (J loaded, *d and *name set,
 * name malloc'd), 0 not found, -1 error.  A job still in new/ or
 * incoming/ (not yet accepted by the daemon) is returned as a queued
 * job with reason "waiting for the daemon to accept it" and *d set to
 * SD_NEW / SD_INCOMING.  When two records of one ID exist (a crash
 * between the two steps of spool_put), the higher rev wins.
 */
int spool_find(struct spool *sp, long long id, struct job *j,
	       enum spool_dir *d, char **name, struct cb_err *err);

/*
 * Write J (rev bumped) into the directory of J->state under its name
 * for that state; then, when FROM_NAME is not NULL and differs
 * (directory or name), remove FROM_DIR/FROM_NAME and fsync that
 * directory.  The order (new copy first, old removed second) means a
 * crash leaves at most two copies, and readers keep the higher rev.
 */
int spool_put(struct spool *sp, struct job *j, enum spool_dir from_dir,
	      const char *from_name, struct cb_err *err);

/* Reject FROM/NAME (a submission first dropped as ORIG): move it into
 * rejected/ as "<seq>.job" beside "<seq>.reason" holding "original
 * name: ORIG\n" and "reason: WHY\n".  Works for symlinks, directories
 * and FIFOs (it only renames). */
int spool_reject(struct spool *sp, enum spool_dir from, const char *name,
		 const char *orig, long long seq, const char *why, struct cb_err *err);

#endif
