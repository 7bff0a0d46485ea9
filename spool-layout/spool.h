/*
 * spool.h - libcardbaton-spool: the one library that owns the disk.
 *
 * Everything that reads or writes the spool, job files, job records or
 * config.yaml goes through here; LAYOUT.md (beside this file) is the
 * specification this code implements.  Conventions (skalibs, style(9)):
 *
 *  - functions return 0 (or a count / 1 for "found") on success and -1
 *    on failure; they never print and never exit;
 *  - a failing function that takes a `struct cb_err *` fills it with a
 *    sysexits(3) code and one line of text (no program name, no
 *    newline) that main() prints as "tool: text";
 *  - every path is built with xasprintf (no fixed-size buffers);
 *  - every spool file is opened with O_NOFOLLOW and relative to an open
 *    directory fd.
 *
 * The header is divided by source file.
 */
#ifndef CARDBATON_SPOOL_H
#define CARDBATON_SPOOL_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>
#include <cJSON.h>

#include "base.h"
#include "crash.h"
#include "wire.h"

#define CARDBATON_VERSION "0.1.0"

/* ---- util.c ---------------------------------------------------------- */

struct cb_err {
	int ex;                 /* sysexits code for main() */
	char *msg;              /* malloc'd; NULL when no error was recorded */
};

/* Record an error (replacing any earlier one).  Always returns -1 so
 * that callers can write `return cb_err_set(err, ...)`. */
int cb_err_set(struct cb_err *err, int ex, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Same, with ": strerror(errno)" appended (errno read at entry). */
int cb_err_sys(struct cb_err *err, int ex, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void cb_err_free(struct cb_err *err);

/* A growing byte buffer, always NUL-terminated when s != NULL. */
struct sbuf {
	char *s;
	size_t len, cap;
};
int sbuf_add(struct sbuf *b, const void *p, size_t n);
int sbuf_addf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sbuf_free(struct sbuf *b);

/* RFC 3339 UTC text of a wall clock time in ms (now_ms, base.h):
 * "2026-11-29T08:13:54Z", always second precision; malloc'd. */
char *rfc3339(long long ms);

/* Parse a decimal long long in [lo, hi]; the whole string must be
 * digits with an optional leading '-'.  0 or -1. */
int parse_ll(const char *s, long long lo, long long hi, long long *out);

/* "~" or "~/x" against $HOME; other paths copied.  malloc'd or NULL. */
char *expand_home(const char *path);

/* ---- atomic.c (atomic_write, read_capped: base.h) ------------------- */

/* rename that never replaces (renameat2 RENAME_NOREPLACE, falling
 * back to link+unlink).  0 or -1/errno (EEXIST when the target is
 * there). */
int move_noreplace(int fromfd, const char *from, int tofd, const char *to);

/* Job files dropped into new/ larger than this are rejected. */
#define JOBFILE_MAX (1u << 20)

/* ---- names.c: the file-name grammar (LAYOUT.md "Names") ------------- */

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

/* 0 and outputs set when NAME is exactly of that grammar, else -1. */
int name_parse_queued(const char *name, long long *prio, long long *seq);
int name_parse_plain(const char *name, long long *seq);

/* For a directory entry of new/: -1 ignore it (begins with '.', or
 * does not end in ".job"); 1 it is of the queued grammar (prio and seq
 * set); 0 any other accepted name (gets the next sequence number). */
int name_classify_new(const char *name, long long *prio, long long *seq);

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

/* ---- jobfile.c: job.yaml / JSON job files (libyaml) ----------------- */

/* Which fields of a job_def were given. */
enum {
	JF_COMMAND = 1 << 0,
	JF_CWD = 1 << 1,
	JF_NODE = 1 << 2,
	JF_GPUS = 1 << 3,
	JF_GPU_COUNT = 1 << 4,
	JF_PRIORITY = 1 << 5,
	JF_TIMEOUT = 1 << 6,
	JF_RESUME = 1 << 7,
	JF_GRACE = 1 << 8,
	JF_ENV = 1 << 9,
	JF_NAME = 1 << 10,
};

#define GPU_INDEX_MAX 1023
/* Limits of a job (cardbaton(5)): command words, env entries, bytes of
 * `name`; every value is at most YX_MAX_SCALAR bytes, the file at most
 * JOBFILE_MAX. */
#define JOB_MAX_ARGS 4096
#define JOB_MAX_ENV 4096
#define JOB_NAME_MAX 256
#define GPU_COUNT_MAX 1024
#define TIMEOUT_MAX 315360000LL         /* ten years, in seconds */
#define DEFAULT_GRACE 60

struct job_def {
	unsigned set;           /* JF_* bits of the fields present */
	char **argv;            /* list command (argc >= 1), or NULL */
	size_t argc;
	char *shell;            /* string command for sh -c, or NULL */
	char *cwd, *node, *name, *resume_command;
	int *gpus;              /* pinned physical indices, distinct */
	size_t ngpus;
	long long gpu_count;    /* 0 = CPU job; default 1 (see jobdef_gpu_need) */
	long long priority;     /* PRIO_MIN..PRIO_MAX, default 0 */
	long long timeout_seconds;              /* 0 = no limit */
	long long checkpoint_grace_seconds;     /* default DEFAULT_GRACE */
	char **env;             /* "NAME=value", NAME a shell identifier */
	size_t nenv;
};

/*
 * Parse a job file (YAML, or JSON, which is read as YAML) into JD.
 * FNAME is used in messages only.  Errors: EX_DATAERR_ with
 * "FNAME:LINE: KEY: problem" (or "FNAME: problem" when there is no
 * line: empty file, not UTF-8, ...).  Unknown keys, wrong types, out
 * of range numbers, duplicate keys, anchors/aliases, several
 * documents, and a job with no command are errors.  JD is zeroed first
 * and gets the defaults (gpu_count 1, checkpoint_grace_seconds 60) for
 * fields not given (their JF_ bits stay clear); on failure it is freed
 * and zeroed.
 */
int jobdef_parse(const char *buf, size_t len, const char *fname,
		 struct job_def *jd, struct cb_err *err);

/* Checks that need no file: a command given, gpus and gpu_count
 * consistent (gpu_count, when both are set, must equal ngpus), env
 * names valid.  Same error form with FNAME and no line. */
int jobdef_check(const struct job_def *jd, const char *fname, struct cb_err *err);

/* Number of cards the job needs: ngpus when pinned, else gpu_count
 * when given, else 1. */
long long jobdef_gpu_need(const struct job_def *jd);

/* Copy every field set in SRC over DST (used for flag overrides). */
int jobdef_merge(struct job_def *dst, const struct job_def *src);

/* JSON form (the fields of job.yaml, only those set; "command" is an
 * array or a string).  jobdef_from_json accepts what jobdef_to_json
 * made; -1 with errno EINVAL on anything else. */
cJSON *jobdef_to_json(const struct job_def *jd);
int jobdef_from_json(const cJSON *obj, struct job_def *jd);

void jobdef_free(struct job_def *jd);

/* ---- config.c: config.yaml (libyaml) --------------------------------- */

#define DEFAULT_IDLE_MIB 64
#define DEFAULT_RESERVE_AFTER 300
#define DEFAULT_REMOTE_STATE_DIR "~/.local/state/sshgpu-queue"

struct node_conf {
	char *name;
	char *ssh;              /* alias or user@host; NULL when local */
	int local;
	int *gpus;              /* eligible indices, or NULL = all */
	size_t ngpus;
	int has_gpus;
	long long idle_mib;
	char *public_key;       /* as written (may start with ~) */
};

struct config {
	char *path;             /* file it came from; NULL = embedded default */
	char *spool;            /* absolute path */
	char *remote_state_dir; /* as written; "~" expands on the node */
	char **ssh_command;     /* argv prefix; default {"ssh"} */
	size_t nssh_command;
	long long reserve_after_seconds;
	struct node_conf *nodes;
	size_t nnodes;
};

/*
 * Load the config: PATH when given; else ./config.yaml when present;
 * else $XDG_CONFIG_HOME/cardbaton/config.yaml (XDG_CONFIG_HOME
 * defaulting to ~/.config) when present; else the embedded default
 * (one node "local" with local: true, spool
 * $XDG_STATE_HOME/cardbaton/spool, XDG_STATE_HOME defaulting to
 * ~/.local/state).  `spool:` is relative to the config file's
 * directory; default "./spool".  Errors: EX_CONFIG_ with
 * "FILE:LINE: KEY: problem", or "PATH: strerror" when PATH cannot be
 * read (also EX_CONFIG_).
 */
int config_load(const char *path, struct config *c, struct cb_err *err);
/* Parse config text; DIR is the directory `spool:` is relative to. */
int config_parse(const char *buf, size_t len, const char *fname,
		 const char *dir, struct config *c, struct cb_err *err);
const struct node_conf *config_node(const struct config *c, const char *name);
void config_free(struct config *c);

/* ---- record.c: job records, the JSON files in queued/ running/ ... -- */

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
	AS_ABORTED,     /* never started: cards busy at launch, refused */
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
};

/* The record as JSON text (pretty, LF-terminated) / back.  The JSON
 * has every field of `status --json` except that "attempts" is the
 * full list; see LAYOUT.md "Job records". */
char *job_to_json(const struct job *j);
int job_from_json(const char *buf, size_t len, struct job *j, struct cb_err *err);
/* One element of `status --json` "jobs" (LAYOUT.md, SPEC §2). */
cJSON *job_status_json(const struct job *j);
/* Last attempt, or NULL. */
struct attempt *job_last_attempt(const struct job *j);
struct attempt *job_new_attempt(struct job *j);    /* appended, zeroed, n set */
void job_free(struct job *j);

/* ---- spool.c: the spool directory ------------------------------------ */

enum spool_dir {
	SD_TMP, SD_NEW, SD_INCOMING, SD_QUEUED, SD_RUNNING, SD_PAUSED,
	SD_DONE, SD_REJECTED, SD_CTL, SD_NODES,
	SD_N
};
extern const char *const spool_dir_name[SD_N];
enum spool_dir job_state_dir(enum job_state s);

struct spool {
	char *path;
	int fd;                 /* the spool directory */
	int dir[SD_N];          /* its subdirectories, O_DIRECTORY|O_NOFOLLOW */
	char id[9];             /* 8 hex digits, from the file "id" */
	mode_t fmode, dmode;    /* of what it creates: 0600/0700, or shared (spool_open) */
};

/* The sysexits code of a failed spool write with errno E: EX_TEMPFAIL_
 * for a full disk, quota, read-only spool, I/O error or ENOMEM, else
 * EX_OSERR_. */
int spool_errno_ex(int e);

/* Open (CREATE: make it, mode 0700, if missing) the spool at PATH.
 * What CardBaton creates in it is private: directories 0700, files
 * 0600, whatever the umask.  A group-shared spool (LAYOUT.md §1): when
 * PATH itself has the set-group-ID bit, its group permission bits are
 * given to every directory (and, without x, file) created inside.
 * No subdirectory is followed through a symbolic link.
 * Errors: EX_CONFIG_ / EX_OSERR_ / EX_TEMPFAIL_ with the path. */
int spool_open(struct spool *sp, const char *path, int create, struct cb_err *err);
void spool_close(struct spool *sp);

/* The daemon's lock ("lock"); returns the held fd, or -1 with
 * EX_TEMPFAIL_ "another cardbaton-spoold holds SPOOL/lock". */
int spool_lock_daemon(struct spool *sp, struct cb_err *err);

/* Next sequence number (file "seq", under flock of "seq.lock"). */
int spool_next_seq(struct spool *sp, long long *seq, struct cb_err *err);
/* For a batch of files in new/: the counter made at least FLOOR (the
 * highest number the files' own names carry, 0: none, so that later
 * numbers never collide with them), then COUNT numbers handed out,
 * *FIRST .. *FIRST + COUNT - 1. */
int spool_seq_block(struct spool *sp, long long floor, long long count, long long *first,
		    struct cb_err *err);

/* Submit: next seq, write the job as JSON into tmp/, rename into
 * new/<name_queued(prio, seq)>.  *id = seq.  Full disk or read-only
 * spool: EX_TEMPFAIL_, nothing left in new/. */
int spool_submit(struct spool *sp, const struct job_def *jd, long long *id,
		 struct cb_err *err);

/* Entries of DIR that do not begin with '.', sorted with strcmp.
 * *names is a malloc'd array of malloc'd strings. */
int spool_list(struct spool *sp, enum spool_dir d, char ***names, size_t *n);
void spool_list_free(char **names, size_t n);

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

/* Control requests (ctl/): "<id>.<op>.<unique>", content "priority N"
 * for promote --priority.  The daemon applies and removes them. */
enum ctl_op { CTL_CANCEL, CTL_PROMOTE, CTL_PAUSE, CTL_RESUME, CTL_N };
extern const char *const ctl_op_name[CTL_N];
#define CTL_NO_ARG LLONG_MIN
int spool_ctl(struct spool *sp, long long id, enum ctl_op op, long long arg,
	      struct cb_err *err);
int ctl_parse_name(const char *name, long long *id, enum ctl_op *op);

/* What the daemon last saw of a node (nodes/NAME.json), for status. */
struct node_status {
	char *name;
	int reachable;
	char *error;            /* NULL when reachable */
	long long since;        /* epoch ms of the last change */
};
int spool_node_put(struct spool *sp, const struct node_status *ns, struct cb_err *err);
/* Every nodes/ file, sorted by name; unreadable ones are skipped. */
int spool_node_list(struct spool *sp, struct node_status **v, size_t *n);
void node_status_free(struct node_status *v, size_t n);

/* Reject FROM/NAME (a submission first dropped as ORIG): move it into
 * rejected/ as "<seq>.job" beside "<seq>.reason" holding "original
 * name: ORIG\n" and "reason: WHY\n".  Works for symlinks, directories
 * and FIFOs (it only renames). */
int spool_reject(struct spool *sp, enum spool_dir from, const char *name,
		 const char *orig, long long seq, const char *why, struct cb_err *err);

/* ---- index.c: SPOOL/queued.idx, a cache of queued/ for status -------- */

/*
 * queued.idx (LAYOUT.md §11) holds, for each record in queued/, what
 * `status` shows of it.  It is a cache, never the truth: a reader uses
 * it only while queued/ has exactly the device, inode, ctime and mtime
 * it was made for, and the writer records those only once they are
 * INDEX_SETTLE_MS old (file times come from a coarse clock: a later
 * change must move them).  Only the daemon writes it.
 */
#define INDEX_NAME "queued.idx"
#define INDEX_SETTLE_MS 50      /* queued/ unchanged this long before it is indexed */
#define INDEX_GAP_MS 500        /* at least this between two writes */

/*
 * Display text (the tools' views of a job's strings).  All malloc'd,
 * NULL on ENOMEM.  shell_join: ARGV as one line a POSIX shell reads
 * back as the same words: a word of only safe characters is left bare,
 * others are put in '...', and a word holding control characters in
 * bash's $'...' so that the line never carries a raw newline or
 * escape.  command_display: the command of a job, its argv joined or
 * the sh -c string with control characters shown as '?'.  printable: S
 * with every control character (C0, DEL, a UTF-8 C1) shown as '?'.
 */
char *shell_join(char *const *argv, size_t argc);
char *command_display(const struct job_def *d);
char *printable(const char *s);

/* What `status` shows of a job, from its record: the table's cells
 * (but AGE, which is `now - since`) and the --json element. */
struct status_view {
	long long id, rev, priority;
	enum job_state state;
	long long since;        /* epoch ms the AGE column counts from; 0 none */
	long long natt;         /* attempts (aborted ones not counted) */
	const char *node;       /* NODE: the last attempt's node, else the pinned one, or "-" */
	const char *gpus;       /* GPUS: "0,1", "any:2" or "none" */
	const char *name;       /* NAME, or "-" */
	const char *command;    /* COMMAND: command_display */
	const char *json;       /* the `status --json` element, or NULL */
	char *own[5];           /* status_view_of's allocations */
};
/* V from J; the --json element too when WITH_JSON.  0, or -1 with
 * errno ENOMEM. */
int status_view_of(const struct job *j, int with_json, struct status_view *v);
void status_view_free(struct status_view *v);

/* A directory as the index knows it: any entry made, renamed or
 * removed in it changes ctime and mtime. */
struct index_key {
	unsigned long long dev, ino;
	long long ctime, mtime;         /* ns since the epoch */
};
int index_key_of(int dirfd, struct index_key *k);

struct index_ent {
	long long id;           /* the ID of its queued/ name */
	const char *name;       /* its queued/ name */
	long long ino, ctime;   /* of that file when it was read; ctime 0: unsettled */
	int raw;                /* not summarised (not a regular file, not a valid
				 * record): read queued/NAME as without the index */
	int in_done;            /* done/ held a record of the same ID too */
	struct status_view v;   /* unless raw */
};

struct spool_index {
	char *buf;              /* the file (or its part read); entries point into it */
	size_t len, mapped;
	struct index_ent *e;    /* in the order of their queued/ names */
	size_t n;
	struct index_key queued, done;  /* what it was made for */
	int has_done;           /* done is known (in_done exact while done/ is as then) */
	int done_fresh;         /* index_read: done/ is as it was then */
};

/* Parse queued.idx text BUF[0..LEN) (NUL-terminated at LEN; decoded in
 * place) into IX: the header and the table section, and WITH_JSON the
 * rest (the elements; BUF is then exactly the file).  0, or -1 with
 * errno EINVAL (malformed, or of another version) or ENOMEM.  IX's
 * entries point into BUF, which it does not own. */
int index_parse(char *buf, size_t len, int with_json, struct spool_index *ix);
/* Read SPOOL/queued.idx for a reader (the --json elements only
 * WITH_JSON): 1 when it describes queued/ as it is now (IX filled;
 * done_fresh set), else 0 (missing, stale, malformed, a symlink, too
 * large for memory: IX empty; read queued/ instead). */
int index_read(struct spool *sp, int with_json, struct spool_index *ix);
void index_free(struct spool_index *ix);

/* Write SPOOL/queued.idx from queued/ (atomic_write), reusing the
 * current index's lines whose files are unchanged.  1 written or
 * already current, 0 not now (queued/ changed less than
 * INDEX_SETTLE_MS ago, or while it was read), -1 with errno. */
int index_write(struct spool *sp);

/* The daemon's writer: index_write in a child process (the loop never
 * waits for it), when queued/ or done/ changed and queued/ settled, at
 * most every INDEX_GAP_MS (more when it takes long). */
struct index_writer {
	pid_t pid;              /* the child in flight, or 0 */
	long long started, next_at, backoff;    /* monotonic ms */
	int have;               /* made: an index for queued and done */
	struct index_key queued, done, fq, fd;  /* made for / at the fork */
};
/* Call on every turn of the loop, TIMEOUT the loop's poll timeout (ms,
 * -1 none): returns the timeout to use.  Never fails (a cache). */
int index_tick(struct index_writer *w, struct spool *sp, int timeout);
/* Wait for the child in flight (at most a few seconds; then kill it). */
void index_stop(struct index_writer *w);

/* ---- batch.c: many atomic writes, three syncs --------------------------- */

struct wbatch_ent {
	int dstfd;
	char *name;
	char *tmp;              /* its temp file in tmp/; NULL once renamed */
};

struct wbatch {
	int tmpfd;
	struct wbatch_ent *v;
	size_t n, cap;
};

#define WBATCH_INIT { -1, NULL, 0, 0 }
#define WBATCH_SYNCFS 16        /* from this many files on, one syncfs */

/* Stage DSTFD/NAME: a complete temp file in TMPFD (one TMPFD per
 * batch), mode exactly MODE, not yet synced.  0 or -1/errno. */
int wbatch_add(struct wbatch *b, int tmpfd, int dstfd, const char *name,
	       const void *buf, size_t len, mode_t mode);
/* syncfs(SYNCFD), rename every staged file into place, fsync each
 * destination directory once.  0 or -1/errno (the files not yet renamed
 * stay staged: wbatch_free removes them). */
int wbatch_commit(struct wbatch *b, int syncfd);
/* Remove what is still staged; B is empty and reusable. */
void wbatch_free(struct wbatch *b);
/* spool_put's write for a batch: J's record (rev + 1) staged for its
 * state's directory.  The caller removes the old copy after the commit. */
int spool_stage(struct spool *sp, struct wbatch *b, struct job *j, struct cb_err *err);

#endif
