/*
 * names.h - the file-name grammar (names.c, LAYOUT.md "Names"): queued/ and
 * plain names, job IDs, attempt IDs.
 */
#ifndef CARDBATON_NAMES_H
#define CARDBATON_NAMES_H

#define PRIO_MIN (-99999999LL)
#define PRIO_MAX 99999999LL
#define SEQ_MAX 9999999999LL    /* job IDs are 1..SEQ_MAX */

/*
 * queued/ and the names `cardbaton submit` writes into new/:
 *     KKKKKKKKK-SSSSSSSSSS.job
 * K = 100000000 - priority (9 digits), S = sequence = job ID (10
 * digits).  Plain `ls` (C locale) is dispatch order: higher priority
 * first, then FIFO.  running/ paused/ done/ incoming/: SSSSSSSSSS.job.
 * All malloc'd; NULL on ENOMEM or out-of-range input (errno ERANGE).
 */
char *name_queued(long long prio, long long seq);
char *name_plain(long long seq);

/*
 * The N jobs of one array or sweep (BLOCK_MAX at most), S .. S+N-1,
 * before they are accepted: KKKKKKKKK-SSSSSSSSSS+NNNNN.job in new/
 * (what `cardbaton submit` writes), SSSSSSSSSS+NNNNN.job in incoming/.
 */
#define BLOCK_MAX 10000
char *name_block_queued(long long prio, long long seq, long long count);
char *name_block(long long seq, long long count);
int name_parse_block(const char *name, long long *seq, long long *count);

/* hooks/: SSSSSSSSSS.hook, the pending on_finish hook of job S. */
char *name_hook(long long seq);

/* 0 and outputs set when NAME is exactly of that grammar, else -1. */
int name_parse_queued(const char *name, long long *prio, long long *seq);
int name_parse_plain(const char *name, long long *seq);
int name_parse_hook(const char *name, long long *seq);

/* For a directory entry of new/: -1 ignore it (begins with '.', or
 * does not end in ".job"); 1 it is of the queued grammar, 2 a block's
 * (prio, seq set, and count: 1, or the block's N); 0 any other
 * accepted name (gets the next sequence number). */
int name_classify_new(const char *name, long long *prio, long long *seq, long long *count);

/* A job ID as a user types it: decimal, leading zeros allowed, in
 * 1..SEQ_MAX.  0 or -1. */
int jobid_parse(const char *s, long long *id);

/* Attempt IDs: "<spool id>-<job id>-<attempt number>", e.g.
 * "3fa9c2d1-42-0".  Only [0-9a-f-], so they can never escape a
 * directory.  attempt_id_parse: 0 and job/n set, or -1. */
char *attempt_id(const char *spool_id, long long job, int n);
int attempt_id_parse(const char *aid, char spool_id[9], long long *job, int *n);
/* The job ID of an attempt ID from this spool, or 0. */
long long attempt_job(const char *spool_id, const char *aid);

#endif
