/*
 * waitread.h - how `wait` reads the spool (waitread.c): where a job
 * stands, and whether anything is left to wait for.  The reader's
 * rules are status's (LAYOUT.md §6): the directories listed in the
 * order of the flow of jobs, the records of one job ID compared, the
 * higher rev kept; a job has ended only once that record is in done/.
 *
 * One reading is not a snapshot: a job may move while it is read.
 * What a reading says of an ended job is for good (no transition leaves
 * done/, and rejected/ only grows); "no such job" and "nothing to wait
 * for" are true only of a reading during which none of the directories
 * listed changed, which the caller learns from inotify (bin/wait.c).
 */
#ifndef CARDBATON_WAITREAD_H
#define CARDBATON_WAITREAD_H

#include <stddef.h>

#include "record.h"
#include "spooldir.h"
#include "util.h"

/* Where a job stands. */
enum wait_stand {
	WAIT_NONE,        /* no record, no submission, not rejected */
	WAIT_MOVED,       /* it moved while it was read: read again */
	WAIT_PENDING,     /* in new/ or incoming/, waiting for the daemon */
	WAIT_QUEUED,
	WAIT_HELD,        /* queued, its record saying "hold": true */
	WAIT_RUNNING,     /* running or pausing */
	WAIT_PAUSED,
	WAIT_ENDED,       /* its record in done/ (the state with it) */
	WAIT_REJECTED,    /* refused by the daemon: rejected/S.job */
};

/* The names of new/ incoming/ queued/ running/ paused/ at one reading
 * (done/ is looked up per job, never listed: it is the history). */
struct wait_read {
	size_t new_jobs;        /* entries of new/ the daemon will take */
	long long *newid;       /* of those, the IDs of the submit grammar */
	size_t nnew;
	long long *incoming, *running, *paused;
	size_t nincoming, nrunning, npaused;
	struct wait_queued {
		long long id;
		char *name;
	} *queued;
	size_t nqueued;
};

/* Read the names, in the order of the flow of jobs (new/ incoming/
 * queued/ running/ paused/).  0, or -1 with ERR. */
int wait_read(struct spool *sp, struct wait_read *r, struct cb_err *err);
void wait_read_free(struct wait_read *r);

/*
 * Where job ID stands in the reading R: its records (queued/ running/
 * paused/ as R lists them, done/ looked up now), the higher rev the
 * job; without a record, a submission in R, or rejected/.  For
 * WAIT_ENDED, *STATE is the record's state.  0, or -1 with ERR: a record
 * that cannot be read (a stray symlink, directory or FIFO, not a
 * record: EX_DATAERR_ naming it).
 */
int wait_stand_of(struct spool *sp, const struct wait_read *r, long long id,
		  enum wait_stand *w, enum job_state *state, struct cb_err *err);

/* 1 when R holds something to wait for: a submission, a queued job not
 * held, a running or pausing one, or one that moved while it was read;
 * 0 nothing (what is held, paused, ended or rejected is aside); -1
 * with ERR (as wait_stand_of). */
int wait_busy(struct spool *sp, const struct wait_read *r, struct cb_err *err);

#endif
