/*
 * spoold.h - cardbaton-spoold's shared state.  See main.c for the
 * design and AGENTS.md for the state table.
 */
#ifndef CARDBATON_SPOOLD_H
#define CARDBATON_SPOOLD_H

#include <poll.h>
#include <sys/types.h>

#include "spool.h"
#include "metrics.h"
#include "node.h"
#include "table.h"
#include "depidx.h"

/* Timers (ms).  Documented in AGENTS.md and cardbaton-spoold(1). */
#define RECONCILE_MS 5000       /* ask each node about its running attempts */
#define GPU_POLL_MS 2000        /* re-read GPUs while jobs wait for cards */
#define RESV_MARGIN_S 30        /* preemption: cards kept past the victims' grace */
#define MOVE_KEEP_S (24 * 3600) /* a checkpoint transfer: its cards kept at most this long */
#define BACKOFF_MIN_MS 1000     /* unreachable node: first retry */
#define BACKOFF_MAX_MS 60000
#define STALL_RETRY_MS 1000     /* spool not writable (full, read-only): probe again */

/* Stream timers (ms), stream.c. */
#define INSTALL_MS (NODE_QUERY_MS + 4 * NODE_CALL_MS)  /* node_ensure_worker, at most */
#define STREAM_CONNECT_MS (INSTALL_MS + NODE_QUERY_MS)  /* install + start */
#define STREAM_BACKOFF_MIN_MS 1000
#define STREAM_STABLE_MS 10000  /* ready this long: its back-off starts over */
#define STREAM_WAIT_MS RECONCILE_MS     /* a launch waits this long for a stream's `ready` */

/* on_finish hooks (hooks.c).  Documented in AGENTS.md and cardbaton-spoold(1). */
#define HOOK_MAX 4              /* hooks running at once; the others wait their turn */
#ifndef HOOK_DEADLINE_MS
#define HOOK_DEADLINE_MS 30000  /* then its process group is killed */
#endif
#define HOOK_SAY_MAX 4096       /* of its output, the first line within this is logged */
#define HOOK_REAP_MS 100        /* without a pidfd, how often its exit is looked for */

struct hook_run {
	long long id;                   /* the job; 0: the slot is free */
	pid_t pid;
	int pidfd;                      /* readable once it has exited; -1: none */
	int in, out;                    /* its standard input; its output and error */
	int efd;                        /* why it could not be started (exec's error) */
	struct sbuf wbuf;               /* its input, the job's status --json element */
	size_t woff;
	struct sbuf said;               /* the start of its output */
	char *what;                     /* its command's first word, printable */
	long long deadline;             /* mono ms */
	int killed;                     /* at the deadline */
};

struct acall {
	pid_t pid;                      /* 0: none in flight */
	int fd;                         /* its standard output */
	int in;                         /* its standard input while not all written, or -1 */
	int efd;                        /* its standard error */
	struct sbuf buf;                /* what it said */
	struct sbuf ebuf;               /* ... on its standard error */
	struct sbuf wbuf;               /* what it is given */
	size_t woff;
	long long started, deadline;    /* mono ms */
};

/* An event stream (cardbaton-worker watch), stream.c: the node's own,
 * or one account's. */
struct wstream {
	pid_t pid;                      /* 0: down */
	int in, out;                    /* non-blocking */
	struct sbuf buf;                /* read, not yet whole records */
	struct sbuf wq;                 /* requests not yet written */
	size_t woff;
	int ready;                      /* its `ready` came */
	int launch;                     /* ... saying it takes launch requests */
	int stage;                      /* ... and staged attempts (`stage 1`: the baton) */
	int failed;                     /* an `error` came before `ready` */
	long long since;                /* mono ms of `ready` */
	long long started;              /* mono ms */
	long long deadline;             /* for `ready` */
	long long retry_at;             /* down: start again then (0: not) */
	long long backoff;
};

/* run_as: owner (accts.c): the node as one lab user's account. */
enum acct_state {
	ACCT_UNKNOWN,                   /* nothing answered through it yet */
	ACCT_OK,                        /* a call through it reached the worker */
	ACCT_REFUSED,                   /* ssh or the gate refused the lab's key */
};
struct acct {
	int used;                       /* made (acct_get): CONF is filled */
	struct node_conf conf;          /* the node's, as_user and as_key set */
	enum acct_state state;
	char *why;                      /* refused: "alice: not authorized on lab-a (...)" */
	long long retry_at, backoff;    /* refused: tried again from then on (mono ms) */
	int worker_seen;                /* the worker has answered through it */
	struct acall check;             /* cardbaton-worker status of its attempts */
	int probing;                    /* ... or `version`: does it take the key? */
	struct wstream watch;           /* the event stream of its attempts (stream.c) */
};

struct node {
	const struct node_conf *conf;
	/* run_as: owner: by user (d->tally's order, acct[user - 1]), as
	 * many as d->tally had when one was last made; BARRED, as many:
	 * the plan's (plan.h); QUERY_USER: whose account the GPU query in
	 * flight went through (0: the node's own conf) */
	struct acct *acct;
	size_t nacct;
	unsigned char *barred;
	size_t query_user;
	struct gpu_info *gpus;          /* last snapshot */
	size_t ngpus;
	int fresh;                      /* snapshot still valid (is_fresh) */
	long long fresh_at;             /* mono ms of the query that made it */
	int handoff;                    /* an attempt just ended: usable this pass */
	int stale_query;                /* its answer is old: ask again */
	char **ended;                   /* attempts that ended while it was asked */
	size_t nended;
	int reachable;
	int worker_seen;                /* it has run here (a stream, a call): installed */
	int recorded;                   /* nodes/NAME.json written since start */
	long long since;                /* wall ms reachable last changed */
	int view_due;                   /* nodes/NAME.json to be written this turn */
	char *view;                     /* ... its text as last written */
	int view_said;                  /* ... its write failed: said once */
	long long view_at;              /* wall ms of the snapshot it shows */
	char *error;                    /* why it is unreachable */
	long long retry_at;             /* mono ms; back-off while unreachable */
	long long backoff;
	/* calls in flight, read by the main loop (acall.c) */
	struct acall query;             /* cardbaton-worker gpus */
	struct acall check;             /* cardbaton-worker status ID... */
	struct wstream watch;           /* its event stream (not run_as: owner), stream.c */
	int known;                      /* a GPU query has answered: gpus is its picture */
	int drained, drain_ck;          /* SPOOL/drain/NAME (drain.h): nothing new here;
					   its resumable jobs yield */
	int drain_said;                 /* drain/NAME is no drain file: logged */
	/* Checkpoint copies to remove here, the jobs over (moves.c), the
	 * first one's call in DROP */
	struct drop {
		long long id;
		size_t user;            /* the account it goes through (0: the node's) */
		long long at;           /* mono ms: not tried before (after a failure) */
		int said;               /* its failure logged */
	} *drops;
	size_t ndrops;
	struct acall drop;
};

/* A queued job, as much as scheduling needs. */
struct qent {
	long long id, prio, queued_at;
	char *name;                     /* its file in queued/ */
	long long need;                 /* cards */
	long long mem;                  /* MiB each card must have, or 0 */
	int share;                      /* may share its cards (with `mem`: what it takes) */
	int *gpus;                      /* pinned indices, or NULL */
	size_t ngpus;
	char *node;                     /* pinned (or checkpoint) node, or NULL */
	/* its checkpoint on a shared filesystem (shared_fs, the config's
	 * strings): any node mounting FS may resume it, PREFER first; AWAY,
	 * the nodes that could not see it (left out, this daemon's run) */
	const char *fs, *prefer;
	char **away;
	size_t naway;
	int never_noted;                /* its "can never fit" reason is on disk */
	int full_noted;                 /* ... or that the card it could share is full */
	int held;                       /* `hold` */
	long long begin;                /* wall ms, or 0 */
	long long *after, *after_any;   /* its dependencies (deps.c) */
	size_t nafter, nafter_any;
	int blocked;                    /* one has not ended as it must */
	long long waits_for;            /* the job its reason names, or 0 */
	unsigned long dep_gen;          /* d->dep_gen when last looked at */
	struct dep_link *links;         /* in d->waiters, one per job listed (deps.c) */
	int dep_due;                    /* in d->dep_due (or the pass's): a look is due */
	int dep_unsure;                 /* in d->unsure: looked at again at every end */
	long long group, group_max;     /* its array's first ID and limit, when it has one */
	size_t user;                    /* a lab's: its owner, d->tally[user - 1]; 0: none */
	int limit_noted;                /* its "user limit" reason is on disk */
	int acct_noted;                 /* ... or that its owner is not authorized (accts.c) */
	/* checkpoint_transfer: when no node that sees its checkpoint takes
	 * it, another may, by a copy (moves.c; cleared when the checkpoint
	 * itself cannot be copied) */
	int travel;
	long long travel_at, travel_backoff;   /* mono ms: not moved before (a copy cut short) */
};

/* A user of a lab's spool, as the daemon counts (tally.c). */
struct tally {
	long long uid;                  /* owner_uid; -1: the jobs without an owner */
	char *name;                     /* owner ("-": none) */
	const struct lab_limits *lim;   /* the config's */
	long long jobs;                 /* not ended (max_queued) */
	long long pending;              /* being accepted (accept.c), not yet committed */
	double usage;                   /* the attempts over: decayed, as of USAGE_AT */
	long long usage_at;             /* wall ms */
	double gpu_seconds;             /* the attempts over: plain cards x seconds */
};

/* A running or pausing job. */
struct rent {
	long long id;
	long long group;                /* its array's first ID, when the array has a limit */
	int resumable;                  /* it has a resume_command */
	long long prio, started;        /* its priority; wall ms it started (0: not yet) */
	int share;                      /* it shares its cards, taking MEM MiB of each */
	long long mem;
	long long grace;                /* its checkpoint_grace_seconds */
	char *yield_why;                /* asked to yield its cards (a drain, a preemption):
					   the reason, or NULL */
	char *aid;                      /* its current attempt */
	size_t node;                    /* index into d->nodes */
	int launching;                  /* launch not yet confirmed */
	long long heard_at;             /* mono ms: the node last said something of it */
	int asked;                      /* a launch request on the stream, unanswered */
	long long asked_at;             /* mono ms */
	struct acall call;              /* the launch, when no stream takes it */
	struct acall pause;             /* cardbaton-worker pause AID (or, unstaging,
					   unstage AID) */
	char *cancel;                   /* its cancel request in ctl/, kept (and
					   sent again) until the attempt ends */
	/* CARDS: the cards its attempt leases (its record's), which every
	 * snapshot of its node shows leased by it until it ends (cards.c
	 * leases_taken); a staged one's, those it waits for.  Staged (the
	 * baton): the attempt waits on its node for CARDS' holders to end;
	 * ASK is what the job asks, as the queue has it (the plan's look
	 * for a better placement); UNSTAGING: the node was asked to give
	 * it back (through PAUSE); REDO: requests (hold, promote) applied
	 * once it is back in the queue. */
	int staged;
	int *cards;
	size_t ncards;
	struct qent *ask;
	size_t user;                    /* a lab's: its owner, d->tally[user - 1]; 0: none */
	int unstaging;
	char **redo;
	size_t nredo;
};

struct daemon {
	struct config cfg;
	struct spool sp;
	gid_t lab_gid;                  /* a lab's spool (cfg.lab): its group */
	struct tally *tally;            /* ... its users (tally.c) */
	size_t ntally;
	char *labkey;                   /* a lab's: its private key (labkey_path) */
	size_t nrefused;                /* accounts refused now, on every node (accts.c) */
	int seq_busy;                   /* a lab's seq.lock was held: said (accept.c) */
	long long max_id;               /* a lab's: the highest job ID known (accept.c) */
	long long accept_retry_at;      /* mono ms: new/ read again then (seq_busy) */
	char *owner_name;               /* accept.c: the last owner's name, of OWNER_UID */
	uid_t owner_uid;
	struct node *nodes;
	size_t nnodes;
	struct qent **q;                /* dispatch order */
	size_t nq, capq;
	struct qent **qhash;            /* open addressing by id */
	size_t hcap, hused;
	struct rent *r;
	size_t nr, capr;
	int once;
	int lockfd;                     /* SPOOL/lock, held */
	int dirty;                      /* a scheduling pass is due */
	long long next_reconcile, next_poll;    /* mono ms, 0 = none */
	long long next_begin;           /* mono ms: a queued job's begin comes, or 0 */
	/* Dependencies (deps.c): the final states seen, by job ID; a
	 * count bumped by every job's end; a look at the queue due.  The
	 * queued jobs by the jobs they list; those due for a look, and
	 * the pass's own while one runs (at CURSOR, begun at PASS_GEN);
	 * those whose dependencies only a record can tell of; SCAN: memory
	 * ran out for these once, so from then on each pass also looks at
	 * every queued job not looked at since the last end, as before. */
	struct ended *ended;
	size_t ecap, eused;
	unsigned long dep_gen;
	int deps_due;
	struct depidx waiters;
	struct dep_heap dep_due, *dep_pass;
	struct dep_key dep_cursor;
	unsigned long dep_pass_gen;
	long long *unsure;
	size_t nunsure, capunsure;
	int dep_scan;
	/* The spool could not be written for a temporary reason (full
	 * disk, read-only): every change waits in place (jobs.c
	 * write_failed) and is retried from stall_retry_at on. */
	int stalled;
	int stall_said;                 /* its one log line is out */
	unsigned long stalls;           /* such failures so far */
	long long stall_retry_at;       /* mono ms */
	/* This turn's records, staged, and what waits for their commit
	 * (turn.c). */
	struct wbatch turn;
	struct spares spares;           /* the files it replaced, for reuse (batch.c) */
	struct staged *staged;          /* parallel to turn.v */
	size_t capstaged;
	struct effect *after;
	size_t nafter, capafter;
	/* Cards a preemption is freeing, kept for the job that made it
	 * (sched.c): until it is placed, leaves the queue, or UNTIL. */
	struct resv {
		size_t node;
		int index;
		long long job, until;   /* until: mono ms */
	} *resv;
	size_t nresv;
	/* checkpoint transfers under way (moves.c), one per job at most */
	struct move *moves;
	size_t nmoves;
	/* on_finish hooks (hooks.c): SPOOL/hooks, the ones running, and
	 * the job IDs of those due, in order (hookq[hookq_head..hookq_n)). */
	/* Metrics (metrics.h), written to SPOOL/metrics.prom at most once
	 * a second when they changed (metrics_flush). */
	struct metrics metrics;
	long long npaused;              /* records in paused/ */
	long long metrics_at;           /* mono ms of the last look */
	char *metrics_text;             /* as last written */
	int metrics_said;               /* its write failed: said once */
	int hooks_fd;
	struct hook_run hook[HOOK_MAX];
	long long *hookq;
	size_t hookq_head, hookq_n, hookq_cap;
};

/* A checkpoint being copied to another node (moves.c): job ID's, from
 * node FROM (PATH there, the checkpoint of attempt AID) to node TO, as
 * its owner USER; the mover in A (pid 0: not started yet: its record
 * is not durable yet); what it has said of its progress. */
struct move {
	long long id;
	size_t from, to, user;
	char *path, *aid;
	struct acall a;
	long long started;              /* wall ms */
	long long done, total;          /* bytes; total -1: not known yet */
};

/* What is done once a turn's records are durable (turn.c, jobs.c). */
enum effect_kind {
	EF_LAUNCH,                      /* send job ID's attempt AID to its node */
	EF_CANCEL,                      /* ask the node to stop job ID's attempt */
	EF_PAUSE,                       /* ask the node to pause job ID's attempt AID */
	EF_CTL_DONE,                    /* remove ctl/NAME, applied */
	EF_MOVE,                        /* start job ID's checkpoint transfer (moves.c) */
};
struct effect {
	enum effect_kind kind;
	long long id;
	char *aid, *name;
};

/* util.c: used by every file; calls nothing of the daemon's */
#define DAEMON_PROG "cardbaton-spoold"
/* "cardbaton-spoold: " + the line, on stderr. */
void logmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
long long mono_now(void);
struct stat;
/* What a stray entry of the spool is, in words ("is a directory"). */
const char *stray_kind(const struct stat *st);
/* The index in d->nodes of the node called NAME, or d->nnodes. */
size_t node_index(const struct daemon *d, const char *name);
/* The node did not answer (WHY: its line, logged when it changes; the
 * retry backs off), or it did. */
void node_failed(struct daemon *d, size_t node, const char *why);
/* A retry's back-off after one more failure: *BACKOFF doubled (MIN the
 * first time), at most BACKOFF_MAX_MS; its new value. */
long long backoff_next(long long *backoff, long long min);
void node_ok(struct daemon *d, size_t node);
/* nodes/NAME.json: N's view is due (its reachability or cards changed);
 * every due one written at the end of the turn (jobs.c
 * node_views_flush). */
void node_view_due(struct node *n);
/* Why a spool file could not be read (read_capped's errno), in words. */
const char *read_problem(int e);
/* A spool write failed (EX_TEMPFAIL_: the stall, LAYOUT.md section 9),
 * or succeeded. */
void write_failed(struct daemon *d, int ex, const char *msg);
void write_ok(struct daemon *d);

/* queue.c: the in-memory queue */
int q_insert(struct daemon *d, struct qent *e);
void q_remove(struct daemon *d, struct qent *e);
struct qent *q_find(const struct daemon *d, long long id);
int q_reposition(struct daemon *d, struct qent *e);
struct qent *qent_from_job(struct daemon *d, const struct job *j, const char *name);
/* NODE is left out for E (its checkpoint not visible there).  0, or -1. */
int qent_away(struct qent *e, const char *node);
void qent_free(struct qent *e);
struct rent *r_find(struct daemon *d, long long id);
struct rent *r_find_aid(struct daemon *d, const char *aid);
int r_add(struct daemon *d, const struct job *j, const char *aid, size_t node, int launching);
void r_remove(struct daemon *d, struct rent *e);
/* What E holds (not its calls: acall_free them first). */
void rent_free(struct rent *e);
/* cards.c: E's CARDS show leased by its attempt in N's snapshot (it
 * was just launched there, a staged one started, or a query answered
 * without them). */
void leases_taken(struct node *n, const struct rent *e);
/* E has started (or is over): what it kept as a staged attempt goes
 * (its CARDS stay: those it leases). */
void r_unstaged(struct rent *e);

/* accts.c: run_as: owner, a node as each owner's account (design at its top) */
#define ACCT_NONE ((size_t)-1)  /* acct_query_user: no account to ask through */
/* USER's account on N (made when missing), or NULL: N is not run_as:
 * owner, USER is 0 or owns nothing (errno 0), or out of memory (errno
 * ENOMEM).  n->acct is moved (acct_grow) only for a USER past its end. */
struct acct *acct_get(struct daemon *d, struct node *n, size_t user);
/* N's accounts (and BARRED) as many as d->tally's users: 0, or -1. */
int acct_grow(struct daemon *d, struct node *n);
/* Whose stream and account a call for USER's job on node K goes
 * through: USER on a run_as: owner node (an owner of the lab's), else
 * 0: the node's own.  rent_link: that of E's calls. */
size_t link_user(const struct daemon *d, size_t k, size_t user);
size_t rent_link(const struct daemon *d, const struct rent *e);
/* The conf a call about USER's attempts on N goes by, and *SEEN, its
 * flag that the worker has answered through it; NULL: out of memory. */
const struct node_conf *acct_conf(struct daemon *d, struct node *n, size_t user, int **seen);
/* A call through USER's account on N ended with STATUS, ERR its
 * standard error: 1 when it was the account's refusal (nothing ran:
 * the account is REFUSED, its reason logged), else 0 (an answer past
 * ssh makes it OK). */
int acct_answer(struct daemon *d, struct node *n, size_t user, int status, const struct sbuf *err);
/* Whose account N's GPU query goes through: 0 the node's own conf (not
 * run_as: owner), a user, or ACCT_NONE: none may be asked. */
size_t acct_query_user(struct daemon *d, struct node *n);
/* A pass's start: every run_as: owner node asks the accounts it knows
 * nothing of yet, of the users with jobs, whether they take the key. */
void acct_probes(struct daemon *d);
/* Refused accounts whose back-off is over are asked again; *NEXT. */
void acct_timers(struct daemon *d, long long now, long long *next);
void acct_free(struct node *n);

/* tally.c: a lab's users (jobs not ended, usage); nothing without a lab */
struct tally *tally_of(struct daemon *d, long long uid, const char *name);
size_t tally_index(struct daemon *d, const struct job *j);
/* J went from FROM to its state (its last attempt just ended: ATTEMPT_ENDED). */
void tally_step(struct daemon *d, const struct job *j, enum job_state from, int attempt_ended);
void tally_load(struct daemon *d);      /* start-up: every record */
/* Per user (d->tally's order) at NOW: EFF the effective usage (decayed
 * usage, the running attempts' included, / shares), HELD the cards of
 * its running, pausing and staged attempts, GPU_SECONDS (or NULL) its
 * plain cards x seconds, ended and running. */
void tally_now(const struct daemon *d, long long now, double *eff, long long *held,
	       double *gpu_seconds);

/* accept.c: submissions into the queue */
/* Accept the files NAMES[0..N) of new/ (of incoming/: the recovery),
 * all together (ACCEPT_BATCH at most is a good N). */
#define ACCEPT_BATCH 1024
#define ACCEPT_RETRY_MS 200     /* new/ again after a lab's seq.lock was held */
int accept_new(struct daemon *d, char *const *names, size_t n);
int accept_incoming(struct daemon *d, char *const *names, size_t n);

/* jobs.c: the transitions (job_step applies table.c's rows) */
/* EV happens to job ID: 1 a row applied, 0 none (or not found), -1 the
 * record could not be read or staged. */
int job_step(struct daemon *d, long long id, enum job_event ev, const struct ev_arg *a);
int apply_ctl(struct daemon *d, const char *name);
void cancel_after_attempt(struct daemon *d, long long id, const char *req);
/* E cannot be placed for a reason worth showing: its record's reason
 * becomes "waiting: WHY" (written only when it changes). */
enum wait_kind { WAIT_NEVER, WAIT_FULL, WAIT_LIMIT, WAIT_ACCT };
void note_waiting(struct daemon *d, struct qent *e, const char *why, enum wait_kind kind);

/* moves.c: checkpoint transfers (the design at its top) */
struct move *move_find(const struct daemon *d, long long id);
/* A move of job J's checkpoint to node TO, for its owner USER, to be
 * started by EF_MOVE (move_start).  0 (nothing: one is there, or the
 * record says no checkpoint), or -1 (out of memory). */
int move_add(struct daemon *d, const struct job *j, size_t to, size_t user);
void move_start(struct daemon *d, long long id);
void move_read(struct daemon *d, long long id);            /* PW_MOVE */
/* M did not give a whole copy: WHY, which SIDE failed ("from", "to",
 * NULL: the mover itself) with what exit CODE; M is gone after it. */
void move_failed(struct daemon *d, struct move *m, const char *why, const char *side, int code);
void move_stop(struct daemon *d, long long id);            /* the job left the queue */
/* Job J (its owner USER) has ended: its copies are removed. */
void drops_add(struct daemon *d, const struct job *j, size_t user);
void drop_read(struct daemon *d, size_t k);               /* PW_DROP */
void moves_timers(struct daemon *d, long long now, long long *next);
void moves_free(struct daemon *d);
/* sched.c: the cards kept for job ID are its no more. */
void resv_drop(struct daemon *d, long long id);
/* Launch E on NODE's cards GPUS, or, with NAFTER attempts AFTER (the
 * baton), stage it there to start when they end (WHY: its reason). */
int launch(struct daemon *d, struct qent *e, size_t node, const int *gpus, size_t ngpus,
	   const char *const *after, size_t nafter, const char *why);
/* Ask the node to give staged job E back (it returns to the queue at
 * its place, or the answer says it has started): once at a time. */
int unstage_ask(struct daemon *d, struct rent *e, const char *why);
/* The node's answer to E's launch (a stream reply, or the worker's exit). */
int launch_answered(struct daemon *d, struct rent *e, struct node_reply *rep);
void pause_answered(struct daemon *d, struct rent *e, int status);
void unstage_answered(struct daemon *d, struct rent *e, int status);
/* Ask running job E to give its cards back (a drain, a preemption: a
 * yield): the worker's pause --grace, so that it checkpoints within its
 * checkpoint_grace_seconds and is re-queued on its node, or ends failed
 * "WORD: no checkpoint within N s".  WHY is its reason meanwhile.
 * Once per attempt (and daemon run; the worker keeps the first
 * request); not for a job that is not resumable, or still launching.
 * 1 asked, 0 not, -1 out of memory. */
int yield_ask(struct daemon *d, struct rent *e, const char *why, const char *word);
/* sched.c: SPOOL/drain/ read again (drain.h): which nodes are drained. */
void drain_read(struct daemon *d);
int apply_attempt(struct daemon *d, struct rent *e, const struct wire_rec *w);
int reconcile_node(struct daemon *d, size_t node);
void reconcile_done(struct daemon *d, size_t node, size_t user, int status);
/* The status check of USER's attempts on N (0: the node's own). */
struct acall *check_of(struct node *n, size_t user);
void node_views_flush(struct daemon *d);
/* N as nodes/NAME.json shows it (NS's strings are N's; its cards
 * malloc'd: node_status_of_free).  0, or -1: out of memory. */
int node_status_of(struct daemon *d, const struct node *n, struct node_status *ns);
void node_status_of_free(struct node_status *ns);
/* metrics.prom, when a second has passed since the last look and
 * something changed (FORCE: now); the ms until the next look may be
 * due, for the loop's timeout (-1: none). */
int metrics_flush(struct daemon *d, int force);

/* turn.c: a turn's record writes, committed together (design at its top) */
/* job_step's write: J's new record staged, FROM/FROM_NAME to be removed
 * after the commit; -1 when it could not be staged (write_failed said). */
int turn_stage(struct daemon *d, struct job *j, enum spool_dir from, const char *from_name);
int turn_staged(const struct daemon *d, long long id);
/* Before job ID's record is read from the spool: committed if staged. */
void turn_settle(struct daemon *d, long long id);
/* EF once this turn's records are durable (now, if none is staged). */
void turn_after(struct daemon *d, const struct effect *ef);
/* Commit, then run the effects; 1 if there was anything to do.  Exits
 * 74 when staged records cannot be made durable. */
int turn_commit(struct daemon *d);
void turn_free(struct daemon *d);
/* jobs.c: an effect, run */
void effect_run(struct daemon *d, const struct effect *ef);

/* deps.c: the queued jobs' dependencies, before each scheduling pass */
void deps_pass(struct daemon *d);
/* Job ID has reached final state S (jobs.c follow). */
void deps_ended(struct daemon *d, long long id, enum job_state s);
/* Job ID went to paused/ (jobs.c follow): out of the daemon's memory. */
void deps_paused(struct daemon *d, long long id);
/* E joins the queue (q_insert): indexed by the jobs it lists, a look
 * due.  0, or -1 out of memory (nothing changed). */
int deps_queued(struct daemon *d, struct qent *e);
/* E, queued, leaves the queue (q_remove). */
void deps_unqueued(struct daemon *d, struct qent *e);
void deps_free(struct daemon *d);

/* sched.c: one pass */
int schedule(struct daemon *d);

/* cards.c: the nodes' card snapshots */
void query_start(struct daemon *d, struct node *n);
/* Is a query of N of any use to the next pass (a card not ours alone)? */
int wants_query(const struct daemon *d, const struct node *n);
/* Ask N for its cards now, fresh or not (the idle refresh); 1 when a
 * query is in flight. */
int query_refresh(struct daemon *d, struct node *n);
void query_done(struct daemon *d, struct node *n, int status);
int is_fresh(const struct node *n);
void cards_freed(struct daemon *d, struct node *n, const char *aid, int handoff);
/* The UUID of card INDEX in N's snapshot, or NULL. */
const char *card_uuid(const struct node *n, int index);

/* stream.c: the nodes' event streams (the design is at its top) */
/* The stream (K, USER) of node N: its own (USER 0), or the account's. */
struct wstream *stream_of(struct node *n, size_t user);
void stream_start(struct daemon *d, size_t k, size_t user);
void stream_stop(struct daemon *d, size_t k, size_t user);
/* Send `request OP` + the record REC; -1 when the stream cannot take
 * it now (then run the worker instead). */
int stream_send(struct daemon *d, size_t k, size_t user, const char *op, const char *rec,
		size_t len);
/* WS's pipes to poll into P (at most 2); then stream_events for it. */
size_t stream_pollfd(const struct wstream *ws, struct pollfd *p);
void stream_events(struct daemon *d, size_t k, size_t user);
/* Start streams due, stop those past a deadline or no longer wanted;
 * *NEXT: the next due. */
void stream_timers(struct daemon *d, long long now, long long *next);

/* acall.c: node calls in flight, and every link's descriptors for the
 * main loop's poll (a pollwho says whose each one is). */
enum { PW_INOTIFY, PW_SIGNAL, PW_STREAM, PW_QUERY, PW_CHECK, PW_LAUNCH, PW_PAUSE, PW_HOOK,
       PW_MOVE, PW_DROP };
struct pollwho {
	int kind;
	size_t node;
	long long job;                  /* PW_LAUNCH, PW_PAUSE, PW_MOVE: looked up again;
					   PW_CHECK, PW_STREAM: the account
					   (check_of, stream_of; 0: the node's) */
					/* PW_HOOK: node is the slot */
};
struct pollset {
	struct pollfd *p;
	struct pollwho *who;
	size_t n, cap;
};
int pollset_add(struct pollset *ps, int fd, int kind);
/* Room for WANT more descriptors (0, or -1: out of memory); then the N
 * written at ps->p + ps->n, all KIND's (NODE's, JOB's). */
int pollset_room(struct pollset *ps, size_t want);
void pollset_who(struct pollset *ps, size_t n, int kind, size_t node, long long job);
/* links.c.  Append every link's descriptors; returns how many calls are in
 * flight (the event streams not counted). */
size_t links_pollfds(struct daemon *d, struct pollset *ps);
/* Hand what poll found in PS (from index FROM on) to the handlers. */
void links_events(struct daemon *d, const struct pollset *ps, size_t from);
/* Kill the calls past their deadline, start and stop streams that are
 * due; *NEXT: the earliest deadline left. */
void links_timers(struct daemon *d, long long now, long long *next);
#define ACALL_ERR_MAX 65536
/* Read what there is of non-blocking FD: the first MAX bytes onto B,
 * the rest dropped.  1 at its end (or an error), 0 when it may say more. */
int fd_drain(int fd, struct sbuf *b, size_t max);
pid_t child_start(int *in, int *out, int *errfd, void (*body)(void *), void *arg);
/* The worker with ARGS on NC in such a child, installed there first when
 * ENSURE (a failure then is one `error` record on its output). */
pid_t worker_start(struct daemon *d, const struct node_conf *nc, const char *const *args,
		   int ensure, int *in, int *out, int *errfd);
/* ARGS run on N as USER's account (accts.c acct_conf: a run_as: owner
 * node's; else, or USER 0, the node's own conf), its output into A. */
int acall_start(struct daemon *d, struct node *n, size_t user, struct acall *a,
		const char *const *args, int timeout_ms);
/* The same, given INPUT[0..LEN) on its standard input. */
int acall_start_input(struct daemon *d, struct node *n, size_t user, struct acall *a,
		      const char *const *args, const char *input, size_t len, int timeout_ms);
/* A's pipes to poll into P (at most 3). */
size_t acall_pollfd(const struct acall *a, struct pollfd *p);
int acall_read(struct acall *a, int *status);   /* 1 when it has ended */
int acall_expired(struct acall *a);             /* 1: killed at its deadline */
void acall_stop(struct acall *a);
void acall_free(struct acall *a);

/* hooks.c: on_finish (the design is at its top) */
/* Open SPOOL/hooks (made when missing); -1 with ERR. */
int hooks_open(struct daemon *d, struct cb_err *err);
/* Job J's final record is being staged: its pending hook file first
 * (turn.c).  1 staged, 0 no hook applies, -1 with ERR. */
int hook_stage(struct daemon *d, const struct job *j, struct cb_err *err);
/* Job ID's hook file is durable: the hook is due. */
void hook_due(struct daemon *d, long long id);
/* At start-up: the pending hooks of jobs that have ended are due. */
void hooks_recover(struct daemon *d);
/* Start the hooks due, HOOK_MAX at once. */
void hooks_start(struct daemon *d);
/* The running hooks' descriptors (PW_HOOK) into PS; how many run. */
size_t hooks_pollfds(struct daemon *d, struct pollset *ps);
void hooks_events(struct daemon *d, const struct pollset *ps, size_t from);
/* Kill those past their deadline; *NEXT: the earliest deadline left. */
void hooks_timers(struct daemon *d, long long now, long long *next);
size_t hooks_running(const struct daemon *d);
/* The daemon stops: the running hooks are killed (their files stay, so
 * they run again at the next start). */
void hooks_stop(struct daemon *d);

#endif
