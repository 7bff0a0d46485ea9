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

/* Load the record DIR/NAME.  Errors: EX_DATAERR_ naming the file
 * (what is not a regular file, is larger than RECORD_MAX, or is not a
 * valid job record); EX_NOINPUT_ for a file that is gone. */
int spool_load(struct spool *sp, enum spool_dir d, const char *name,
	       struct job *j, struct cb_err *err);

/* A submission in D (SD_NEW or SD_INCOMING) named NAME with ID, not yet
 * accepted, as a queued job with reason "waiting for the daemon to
 * accept it" (its definition left empty when the file does not parse;
 * a block's, that of its member ID).  -1 with EX_NOINPUT_ when the
 * file is gone (the daemon took it). */
int spool_load_pending(struct spool *sp, enum spool_dir d, const char *name,
		       long long id, struct job *j, struct cb_err *err);

/* The IDs a file NAME of D (SD_NEW or SD_INCOMING) holds, by its name:
 * *FIRST and *COUNT, with 0 for one job's name (COUNT 1), 1 for a
 * block's; -1 for a name of new/ that gets its ID when accepted, or
 * none of ours. */
int spool_pending_ids(enum spool_dir d, const char *name, long long *first, long long *count);

/*
 * Find job ID wherever it is.  1 found (J loaded, *d and *name set,
 * name malloc'd), 0 not found, -1 error.  A job still in new/ or
 * incoming/ (not yet accepted by the daemon) is returned as a queued
 * job with reason "waiting for the daemon to accept it" and *d set to
 * SD_NEW / SD_INCOMING.  When two records of one ID exist (a crash
 * between a record's two steps: LAYOUT.md §6), the higher rev wins.
 * A job that moves while it is looked for is looked for again (up to
 * five passes) before it is "not found".
 */
int spool_find(struct spool *sp, long long id, struct job *j,
	       enum spool_dir *d, char **name, struct cb_err *err);

/*
 * The jobs JD follows (`after`, then `after_any`): each must be lower
 * than BELOW (the job's own ID; LLONG_MAX when it has none yet) and
 * found by spool_find.  0 when all are; else the problem with the
 * first that is not, in words ("after: no such job 5", "after_any: job
 * 9 is not an earlier job") into *WHY (malloc'd): 1 for one with no
 * record, 2 for one not earlier.  -1 with ERR.
 */
int spool_deps_problem(struct spool *sp, const struct job_def *jd, long long below,
		       char **why, struct cb_err *err);

/* Reject FROM/NAME (a submission first dropped as ORIG): move it into
 * rejected/ as "<seq>.job" beside "<seq>.reason" holding "original
 * name: ORIG\n" and "reason: WHY\n".  Works for symlinks, directories
 * and FIFOs (it only renames). */
int spool_reject(struct spool *sp, enum spool_dir from, const char *name,
		 const char *orig, long long seq, const char *why, struct cb_err *err);

#endif
