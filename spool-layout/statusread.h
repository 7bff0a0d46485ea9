/*
 * statusread.h - how `status` reads the spool (statusread.c): the
 * reader's rules of LAYOUT.md §6 and §11 -- the listings in the order
 * of the flow of jobs, queued/ from the index while its key matches,
 * the names grouped by job ID, the higher rev kept -- so that the tool
 * only prints.
 */
#ifndef CARDBATON_STATUSREAD_H
#define CARDBATON_STATUSREAD_H

#include <stddef.h>

#include "index.h"
#include "spooldir.h"
#include "util.h"
#include "view.h"

struct status_read {
	/* Set by the caller: */
	int all;                /* --all: done/ listed, finished jobs shown */
	int with_json;          /* views with their --json element */
	/* Each job to show, as it is read: V is the callee's to take from
	 * (what it moves out of V->own is then its own), for the call
	 * only unless STABLE (V is the index's, its strings too: it lasts
	 * until status_read_free, and owns nothing). */
	void (*job)(void *arg, struct status_view *v, int stable);
	/* A record that cannot be read, which is not shown (the others
	 * are): E's line (NULL: out of memory). */
	void (*warn)(void *arg, const struct cb_err *e);
	void *arg;
	/* Set by status_read: */
	size_t foreign;         /* submissions in new/ that have no job ID yet */
	int ex;                 /* the exit code the warnings call for; 0: none */
	struct spool_index ix;  /* queued.idx, when it stood for queued/ */
};

/*
 * Every job of SP that status shows (without --all: not the finished
 * ones) to R->job, each once:
 *
 *  1. new/ and incoming/ are listed; then queued/: when queued.idx
 *     describes it as it is now (index_read's key check), its lines
 *     stand for its names and records, else it is listed; then
 *     running/ paused/ (done/ with ALL; otherwise done/ is looked up
 *     only for the IDs listed, or, while done/ is as it was when the
 *     index was made, for those the index says have a copy there);
 *  2. the names are grouped by job ID: of two records of one ID the
 *     higher rev is the job (an index line carries its record's rev);
 *     a submission whose ID already has a record is stale (incoming/)
 *     or will get another ID (new/, counted in R->foreign);
 *  3. what is shown is read; a record that vanished between the
 *     listing and the read has moved, and is looked up again
 *     (spool_find).
 *
 * The order of the listings follows the flow of jobs, so that a job
 * that moves while it is read is seen once or twice (and deduplicated),
 * never not at all.  The jobs are given in no order the caller can
 * count on (status_key_cmp is status's): in practice the index's lines
 * first, in its order (dispatch order), then the rest by ID.  0, or -1 with ERR (a directory that cannot be
 * listed, out of memory); what R->job got stands.
 */
int status_read(struct spool *sp, struct status_read *r, struct cb_err *err);
void status_read_free(struct status_read *r);

/* The order status shows jobs in: queued and not-yet-accepted ones by
 * priority then ID (dispatch order), then running and pausing, paused,
 * finished, each by ID. */
struct status_key {
	int section;
	long long prio, id;
};
void status_key_of(const struct status_view *v, struct status_key *k);
int status_key_cmp(const struct status_key *a, const struct status_key *b);

#endif
