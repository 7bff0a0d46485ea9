/*
 * record.h - job records, the JSON files in queued/ running/ paused/ done/
 * (record.c, LAYOUT.md "Job records"): a job, its attempts, their
 * states.
 */
#ifndef CARDBATON_RECORD_H
#define CARDBATON_RECORD_H

#include <stddef.h>
#include <cJSON.h>

#include "jobfile.h"
#include "util.h"

enum job_state {
	JS_QUEUED, JS_RUNNING, JS_PAUSING, JS_PAUSED,
	JS_SUCCEEDED, JS_FAILED, JS_CANCELLED, JS_LOST,
	JS_N
};
const char *job_state_name(enum job_state s);
int job_state_parse(const char *s, enum job_state *out);
int job_state_final(enum job_state s);

/* Attempt states as the controller records them.  "launching": the ID
 * is chosen and recorded, the node may or may not have it. */
enum att_state {
	AS_LAUNCHING, AS_RUNNING, AS_PAUSING, AS_PAUSED,
	AS_SUCCEEDED, AS_FAILED, AS_CANCELLED, AS_LOST,
	AS_ABORTED,     /* never started: cards busy at launch, refused, unstaged */
	AS_STAGED,      /* recorded to start on its node when the attempts
			   STAGED_AFTER end (the baton, LAYOUT.md section 8) */
	AS_N
};
const char *att_state_name(enum att_state s);
int att_state_parse(const char *s, enum att_state *out);

struct attempt {
	int n;                  /* 0, 1, ... (`logs --attempt N`) */
	char *id;               /* attempt ID on the node */
	char *node;
	int *gpus;
	size_t ngpus;
	char **uuids;
	size_t nuuids;
	enum att_state state;
	int has_exit;
	long long exit_code;    /* the job's own exit status */
	char *reason;           /* NULL or why it ended / is in its state */
	long long started, finished;    /* epoch ms, 0 = not yet */
	char *log;              /* log path on the node */
	char *checkpoint;       /* checkpoint path it published, or NULL */
	char *slurm_job;        /* on a Slurm node: its Slurm job ID, or NULL */
	char *host;             /* on a Slurm node: the host it ran on, or NULL */
	char **staged_after;    /* staged: the attempt IDs whose end starts it */
	size_t nstaged_after;
};

struct job {
	long long id;
	long long rev;          /* bumped by every write; highest wins */
	enum job_state state;
	char *reason;           /* why it is in this state, or NULL */
	long long priority;
	struct job_def def;
	long long submitted, queued_at, started, finished;  /* epoch ms or 0 */
	struct attempt *att;
	size_t natt;
	char *checkpoint;       /* saved state to resume from, or NULL */
	char *checkpoint_node;  /* node that holds it */
	/* The nodes a copy of its checkpoint was sent to (checkpoint_transfer,
	 * SPEC §9), each named before its copy began: their copies are
	 * removed when the job ends */
	char **ck_copies;
	size_t nck_copies;
	/* A member of an array or sweep (expand.h): the group's first job
	 * ID (0: none), its index, and the group's limit (0: none). */
	long long array_id, array_index, max_running;
	/* Its owner (a lab's spool, lab.h; every spool records it): the
	 * account owning the file the daemon accepted, by name (its number
	 * when it has no passwd entry) and number.  NULL: unknown (a record
	 * from before owners), and OWNER_UID means nothing. */
	char *owner;
	long long owner_uid;
};

#define UID_RECORD_MAX 4294967294LL   /* owner_uid at most: (uid_t)-1 is no uid */

/* The state a job is shown in (status, the tools' checks): its
 * record's, but queued for a job whose attempt is staged on its node
 * and has not started (the baton: the record is in running/ so that the
 * attempt is recorded before the node has it, LAYOUT.md section 8). */
enum job_state job_view_state(const struct job *j);
int job_staged(const struct job *j);

/* The record as JSON text (pretty, LF-terminated) / back.  The JSON
 * has every field of `status --json` except that "attempts" is the
 * full list; see LAYOUT.md "Job records". */
char *job_to_json(const struct job *j);
int job_from_json(const char *buf, size_t len, struct job *j, struct cb_err *err);
/* One element of `status --json` "jobs" (LAYOUT.md, SPEC §2). */
cJSON *job_status_json(const struct job *j);
/* The reason of a job queued now (NOW, epoch ms) by what it asks:
 * "held", "begins at TIME", or "waiting to be scheduled" (with "(at
 * most K of array ID at once)" for a member of a limited group);
 * malloc'd. */
char *queued_reason(const struct job *j, long long now);
/* Last attempt, or NULL. */
struct attempt *job_last_attempt(const struct job *j);
struct attempt *job_new_attempt(struct job *j);    /* appended, zeroed, n set */
void job_free(struct job *j);

#endif
