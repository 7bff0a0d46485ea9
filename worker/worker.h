/*
 * worker.h - the parts of cardbaton-worker shared between its source
 * files.  libc only (see main.c for the design).
 */
#ifndef CARDBATON_WORKER_H
#define CARDBATON_WORKER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Built inside the repository with -Ibase -Ispool-layout, from a flat
 * copy of the worker's sources with base's, wire's and crash's (make
 * install, the shell archive), or from the repository root with
 * nothing but
 *     cc -std=c11 -D_GNU_SOURCE worker/[a-z]*.c base/[a-z]*.c \
 *         spool-layout/wire.c spool-layout/crash.c
 * (-ldl on glibc older than 2.34, for NVML's dlopen, or
 * -DCARDBATON_NO_NVML for a worker without NVML). */
#if defined(__has_include)
#if __has_include("wire.h")
#include "crash.h"
#include "wire.h"
#else
#include "../spool-layout/crash.h"
#include "../spool-layout/wire.h"
#endif
#if __has_include("base.h")
#include "base.h"
#else
#include "../base/base.h"
#endif
#else
#include "base.h"
#include "crash.h"
#include "wire.h"
#endif

#define WORKER_VERSION "0.1.0"
#define PROG "cardbaton-worker"
#define DEFAULT_STATE_DIR "~/.local/state/sshgpu-queue"

/* Seconds between SIGTERM and SIGKILL when the supervisor stops a job's
 * processes (cancel, timeout, and leftovers after the main process
 * exited).  A job that exits on SIGTERM is never made to wait for it. */
#define KILL_DELAY 10

/* nvidia-smi gets this long to answer both questions of a query (cards,
 * then compute apps), and this much output. */
#define NVSMI_TIMEOUT_MS 10000
#define NVSMI_MAX_OUTPUT (1u << 20)
/* NVML (nvml.c), asked first, gets the first half of that time. */
#define NVML_TIMEOUT_MS (NVSMI_TIMEOUT_MS / 2)

/* How long launch waits for another launcher of the same attempt to
 * write its state file (LAYOUT.md section 8, step 7). */
#define LAUNCH_WAIT_MS 5000

/* How long the baton (baton.c) keeps trying a staged attempt whose
 * cards are busy when its turn comes, and how often: a real GPU frees
 * its memory a moment after the process that held it exits. */
#define BATON_SETTLE_MS 3000
#define BATON_RETRY_MS 50
#define DECK_TRIES 40           /* a deck's looks, BATON_RETRY_MS apart, once its locks are free */
#define DECK_LOOK_S 60          /* a deck waiting looks this often whether it is still staged */

/* ---- util.c ---------------------------------------------------------- */

/* Print "cardbaton-worker: MSG" (wk_errsys: ": strerror(errno)" added)
 * on stderr and return EX, so that commands can `return wk_err(...)`. */
int wk_err(int ex, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int wk_errsys(int ex, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The last message wk_err or wk_errsys said (without "cardbaton-worker:
 * "), or NULL: why a launch the baton ran failed. */
const char *wk_last_err(void);

/* "~" and "~/x" against $HOME (or the password file); other paths
 * copied.  Relative results are made absolute when ABS is set. */
char *wk_expand_path(const char *path, int abs);

/* The node state directory (LAYOUT.md section 8), created 0700 when
 * missing, opened as directory fds. */
struct wk_state {
	char *path;     /* absolute */
	/* --lease-dir: the cards' leases there, shared with other accounts
	 * (leasefd is it), or NULL: STATE/leases, private */
	char *lease_path;
	int fd, attfd, leasefd, stagedfd;
	const struct wk_slurm *slurm;   /* a Slurm node (slurm.c), or NULL */
};

/* `--slurm PARTITION` and each `--sbatch-arg ARG`: the node is a Slurm
 * partition (slurm.c, LAYOUT.md section 14). */
struct wk_slurm {
	const char *partition;
	const char **args;
	size_t nargs;
};
/* gate.c: `gate STATE` (sshd's forced command for a lab's key): what
 * $SSH_ORIGINAL_COMMAND asks, if it is the worker or its install. */
int cmd_gate(int argc, char **argv);
/* gate.c: CMD split into words as a POSIX shell would, for the few
 * forms the controller writes: unquoted words of [A-Za-z0-9_./=:,+@%-],
 * '...' (anything but a quote), \C, and "$HOME" (HOME, expanded).  0
 * with *V[0..*N) (NULL-terminated; NULL when no word; gate_words_free), -1 with
 * errno EINVAL (not of that grammar) or ENOMEM. */
int gate_split(const char *cmd, const char *home, char ***v, size_t *n);
void gate_words_free(char **v, size_t n);
/* This worker was started by the gate (CARDBATON_GATED, which it
 * takes out of its environment). */
extern int wk_gated;

/* UID's account name, or "uid N" (malloc'd; NULL: out of memory). */
char *wk_user_name(uid_t uid);

/* LEASE_DIR (--lease-dir, or NULL) must exist, be a directory (not a
 * link), belong to root or to us, and be writable by nobody else
 * without the sticky bit: -1 with *why otherwise, never a fall-back to
 * STATE/leases. */
int wk_state_open(struct wk_state *st, const char *dir, const char *lease_dir, char **why);
void wk_state_close(struct wk_state *st);

/* An attempt ID: [0-9a-f-]{1,64}. */
int wk_id_ok(const char *id);
/* A host name as Slurm has it (S[0..N)): 1 to 255 of [A-Za-z0-9._-],
 * not starting with '-' or '.'. */
int wk_host_ok(const char *s, size_t n);

/* attempts/ID.state: 1 and R filled, 0 when there is none, -1 with
 * errno (EINVAL: the file is malformed, said on stderr with the
 * reason, e.g. a %00). */
int wk_state_read(const struct wk_state *st, const char *id, struct wire_rec *r);
/* Replace attempts/ID.state atomically (through .ID.state.tmp) and
 * durably. */
int wk_state_write(const struct wk_state *st, const char *id, const struct wire_rec *r);
/* The same with the file's data synced but not attempts/: the new
 * state is whole when it is there, and is on disk at the next fsync
 * of attempts/ (a supervisor's final state before the baton: LAYOUT.md
 * section 8).  The state it replaced stays in .ID.state.tmp (not freed
 * on the way to the next job) until wk_state_drop_old. */
int wk_state_write_data(const struct wk_state *st, const char *id, const struct wire_rec *r);
void wk_state_drop_old(const struct wk_state *st, const char *id);
/* The final states: succeeded failed cancelled lost paused unstaged. */
int wk_state_final(const char *state);
/* Does state record R say state WS? */
int wk_state_is(const struct wire_rec *r, enum wire_state ws);

/*
 * The state of attempt ID as status reports it (LAYOUT.md section 8):
 * *alive is set from attempts/ID/lock.  A state file that says starting,
 * running or pausing while the lock is free is rewritten, under that
 * lock, as lost.  A directory with a held lock and no state file yet
 * reads as starting.  An attempt with neither but STATE/staged/ID reads
 * as staged (wk_staged_rec), alive 0, never lost.  1: R filled; 0:
 * unknown attempt; -1: error (errno).
 */
int wk_attempt_status(const struct wk_state *st, const char *id,
		      struct wire_rec *r, int *alive);

/* wire_set of a decimal number. */
int wk_set_ll(struct wire_rec *r, const char *key, long long v);

/* Print R on stdout and flush.  0 or -1 (errno). */
int wk_print(const struct wire_rec *r);

/* "SIGKILL" etc., or NULL. */
const char *wk_signame(int sig);

/* Every descriptor above 2 but the NKEEP in KEEP closed, or with
 * CLOEXEC set (kept open here, never passed on by an exec). */
void wk_other_fds(const int *keep, size_t nkeep, int cloexec);

/* ---- nvsmi.c --------------------------------------------------------- */

struct nv_gpu {
	long long index;
	char *uuid;
	char *name;
	long long mem_used, mem_total;  /* MiB; -1 when not reported */
	long long util;                 /* percent; 0 when not reported */
	int procs;                      /* compute apps on this card */
	/* ... the process IDs of the first NV_PIDS_MAX of them, where the
	 * driver said (nvidia-smi; NVML's unversioned call) */
	long long *pids;
	size_t npids;
};
#define NV_PIDS_MAX 64
/* PID onto G's list (past NV_PIDS_MAX: counted only).  0, or -1. */
int nv_add_pid(struct nv_gpu *g, long long pid);

struct nv_info {
	struct nv_gpu *gpu;
	size_t ngpu;
	size_t napps;                   /* compute apps seen in all */
};

/*
 * Parse the output of --query-gpu=index,uuid,memory.used,memory.total,
 * utilization.gpu,name --format=csv,noheader,nounits (BUF[0..LEN), not
 * NUL-terminated) and add the cards to INFO; then the output of
 * --query-compute-apps=gpu_uuid,pid,used_memory and count each card's
 * processes.  0, or -1 with *err (malloc'd) naming the bad line.
 * These are the fuzz targets: no I/O, any bytes in.
 */
int nv_parse_gpus(const char *buf, size_t len, struct nv_info *info, char **err);
int nv_parse_apps(const char *buf, size_t len, struct nv_info *info, char **err);

/* What a query asks for: the cards alone (index, UUID, name, memory,
 * utilisation; procs left 0), or the cards and their compute
 * processes. */
enum nv_what { NV_CARDS, NV_ALL };

/* Ask NVML (nvml.c), or when it is not in use or fails, nvidia-smi
 * (once for NV_CARDS, twice for NV_ALL); NVSMI_TIMEOUT_MS in all.  0,
 * or -1 with *err (malloc'd, one line: nvidia-smi's failure).  Why
 * NVML failed, when it did and nvidia-smi answered, is said once on
 * stderr. */
int nv_query(struct nv_info *info, enum nv_what what, char **err);
void nv_free(struct nv_info *info);
const struct nv_gpu *nv_find_index(const struct nv_info *info, long long index);
/* A UUID fit to name a lease file. */
int nv_uuid_ok(const char *s, size_t n);
/* The first non-blank line of S, at most 200 bytes (malloc'd). */
char *nv_first_line(const char *s);

/* A child process run to its end or a deadline (nvidia-smi, NVML). */
struct wk_child {
	char *out, *err;        /* its stdout and stderr, NUL-terminated */
	size_t outlen, errlen;
	int status;             /* waitpid status */
	int timed_out;          /* the deadline passed: killed */
	int overflow;           /* more stdout than allowed: killed */
	int broken;             /* poll, read or waitpid failed: errnum */
	int errnum;
};

/*
 * Fork; the child, in its own process group with stdin on /dev/null
 * and stdout and stderr on pipes, runs FN(ARG), which never returns (it
 * execs or _exits).  What it prints is kept (at most MAX bytes of
 * stdout) until it ends, or until DEADLINE (mono_ms) when its
 * process group is killed.  0 with C filled (wk_child_free it), or -1
 * with *err (malloc'd) when no child could be run.
 */
int wk_run_child(void (*fn)(const void *), const void *arg, long long deadline, size_t max,
		 struct wk_child *c, char **err);
void wk_child_free(struct wk_child *c);

/* ---- nvml.c ---------------------------------------------------------- */

/*
 * The cards through NVML (libnvidia-ml.so.1, loaded with dlopen; see
 * nvml.c), in a child process that must answer by DEADLINE.  0 with
 * INFO filled; 1 when NVML is not in use (CARDBATON_NVML=off, no
 * library, a worker built with -DCARDBATON_NO_NVML, or an earlier
 * failure in this process); -1 when it failed, with *why (malloc'd)
 * saying how: NVML is then not used again by this process.
 */
int nvml_query(struct nv_info *info, enum nv_what what, long long deadline, char **why);
/* The library loaded (dlopen only: nothing asks the driver) ahead of a
 * query, by a process that will need it soon (a deck).  Quiet: a
 * failure is said by the query that meets it. */
void nvml_preload(void);

/* ---- ckpt.c: a checkpoint copied between nodes (issue 35) ---------------- */

/*
 * The stream `send-checkpoint` writes and `receive-checkpoint` reads
 * (man cardbaton-worker(8), LAYOUT.md section 10): ASCII header lines,
 * fields separated by one space, numbers in decimal without sign or
 * leading zero (MODE in octal, at most 777):
 *     cardbaton-checkpoint 1 TOTAL ENTRIES\n
 *     d MODE NAMELEN\n NAME                 (ENTRIES of these two)
 *     f MODE SIZE NAMELEN\n NAME DATA
 *     end SHA256HEX\n                       (of every byte before it)
 * NAME (1 to CK_NAME_MAX bytes, no NUL) follows its line's '\n' at
 * once.  The first entry is the root, one component; every other one
 * is ROOT/.../NAME, of non-empty components other than "." and "..",
 * whose parent is a directory sent before it.
 */
#define CK_MAGIC "cardbaton-checkpoint"
#define CK_VERSION 1
#define CK_NAME_MAX 4096                /* bytes of an entry's whole name */
/* Components of a name, at most: the receiver and drop-checkpoints
 * remove a tree with one descriptor per level. */
#define CK_DEPTH_MAX 256
#define CK_ENTRIES_MAX (1u << 22)
#define CK_NAMES_MAX ((uint64_t)1 << 28)  /* bytes of all the names together */
#define CK_SIZE_MAX ((uint64_t)INT64_MAX) /* a file's size, and TOTAL */
#define CK_LINE_MAX 128                 /* a header line, '\n' included: longer is refused */
#define CK_CHUNK (256u << 10)           /* the sender's writes and the receiver's reads */
/* sysexits' EX_CANTCREAT: the receiver's disk (or quota) is full. */
#define CK_EX_NOSPACE 73

/* What one ck_feed step found. */
enum ck_kind {
	CK_NONE,        /* nothing yet: the bytes were taken, feed more */
	CK_HEADER,      /* size: TOTAL, entries: ENTRIES */
	CK_DIR,         /* name, namelen, mode */
	CK_FILE,        /* name, namelen, mode, size; its DATA follows as CK_DATA */
	CK_DATA,        /* data[0..len) of the file last begun (in the caller's buffer) */
	CK_END,         /* the end line, checked: sum (the hex); only EOF may follow */
};

struct ck_event {
	enum ck_kind kind;
	const char *name;       /* NUL-terminated; valid until the next ck_feed */
	size_t namelen;
	unsigned mode;          /* permission bits, <= 0777 */
	uint64_t size, entries;
	const unsigned char *data;
	size_t len;
};

/* A name received (the parser's set: duplicates, parents). */
struct ck_name {
	char *s;
	size_t len;
	uint64_t hash;
	int dir;
};

/* The stream's incremental parser: no I/O, any bytes in, in chunks of
 * any size (the receiver's side, and tests/fuzz/fuzz_ckstream.c). */
struct ck_parser {
	int state;
	int bad;                /* refused: why says why */
	int sum_bad;            /* ... because the checksum did not match */
	char *why;              /* malloc'd, one line */
	char line[CK_LINE_MAX];
	size_t linelen;
	char *name;             /* CK_NAME_MAX + 1 */
	size_t namelen, namegot;
	int ftype;              /* the entry being read: 'd' or 'f' */
	unsigned fmode;
	uint64_t fsize;
	uint64_t total, entries, seen, bytes, remaining, namebytes;
	uint64_t off;           /* bytes taken so far */
	uint64_t end_off;       /* where the end line began, once it has */
	size_t rootlen;
	struct sha256 sha;      /* of every byte before the end line */
	char sum[65];           /* the end line's hex, once checked */
	struct ck_name *set;    /* open addressing, cap a power of two */
	size_t nset, capset;
};
void ck_init(struct ck_parser *p);
/* Take bytes of BUF[0..LEN) up to the next event (*EV; CK_NONE when
 * they were all taken without one): how many were taken (0 only for
 * LEN 0), or -1 when the stream is refused (p->why; every later call
 * -1 too) or out of memory (errno ENOMEM, p->why NULL). */
long ck_feed(struct ck_parser *p, const void *buf, size_t len, struct ck_event *ev);
/* At EOF: 1 when the stream was whole (CK_END given), 0 when it was
 * cut (ended before its end line). */
int ck_complete(const struct ck_parser *p);
void ck_free(struct ck_parser *p);

/* ---- the commands ----------------------------------------------------- */

int cmd_gpus(struct wk_state *st, int argc, char **argv);
int cmd_launch(struct wk_state *st, int argc, char **argv);
int cmd_status(struct wk_state *st, int argc, char **argv);
int cmd_watch(struct wk_state *st, int argc, char **argv);
int cmd_cancel(struct wk_state *st, int argc, char **argv);
int cmd_pause(struct wk_state *st, int argc, char **argv);
int cmd_log(struct wk_state *st, int argc, char **argv);
/* baton.c: staged attempts (LAYOUT.md section 8, the baton). */
int cmd_baton(struct wk_state *st, int argc, char **argv);
int cmd_deck(struct wk_state *st, int argc, char **argv);
int cmd_unstage(struct wk_state *st, int argc, char **argv);
/* slurm.c: the batch script's command, inside the allocation. */
int cmd_slurm_job(struct wk_state *st, int argc, char **argv);
/* ckpt.c: a checkpoint copied between nodes (the daemon relays the
 * sender's stdout into the receiver's stdin). */
int cmd_send_checkpoint(struct wk_state *st, int argc, char **argv);
int cmd_receive_checkpoint(struct wk_state *st, int argc, char **argv);
int cmd_drop_checkpoints(struct wk_state *st, int argc, char **argv);

/* ---- slurm.c: the other commands' Slurm side ---------------------------- */

/* `gpus` of a Slurm partition (sinfo).  The exit status. */
int slurm_gpus(struct wk_state *st);

/* One GPU of the partition, as sinfo says (its host's INDEX-th). */
struct slurm_card {
	char *host;
	long long index;
	char *type;             /* gres type ("a100"), or NULL */
	int busy;               /* allocated (GresUsed IDX:), or its node takes no jobs */
};
#define SLURM_NODE_GPUS_MAX 4096        /* a node with more is skipped */
/* The answer to sinfo -h -N -O 'NodeHost:|,Gres:|,GresUsed:|,StateLong:|'
 * (BUF[0..LEN), any bytes): the cards of every well-formed line (a
 * host of [A-Za-z0-9._-], gres naming gpu:...:COUNT), others skipped.
 * 0 with *CARDS (slurm_cards_free), -1 out of memory.  The fuzz
 * target: no I/O. */
int slurm_parse_sinfo(const char *buf, size_t len, struct slurm_card **cards, size_t *ncards);
void slurm_cards_free(struct slurm_card *v, size_t n);
/* The answer to squeue -h -t all -o '%j %i %T' (BUF[0..LEN), any bytes;
 * BUF may be NULL when LEN is 0), lines "NAME JOBID STATE": the last
 * well-formed line named NAME (a requeued job is listed again), JOBID
 * digits and '_' (an array's), STATE up to the next blank or the end of
 * the line, others skipped.  1 with *JOBID and *STATE (malloc'd), 0
 * when there is none, -1 out of memory.  The launch's look-up by name
 * and status's list of all our jobs both read it; the fuzz target: no
 * I/O. */
int slurm_squeue_find(const char *buf, size_t len, const char *name, char **jobid, char **state);
/* Attempt state R (not final, its lock free here): 1 while Slurm
 * still lists its job, 0 when it does not (*WHY malloc'd: the reason
 * it is lost), -1 when Slurm could not be asked. */
int slurm_alive(const struct wire_rec *r, char **why);
/* Send SIG ("USR1": look at the pause file; "USR2": the cancel file)
 * to the batch step of R's Slurm job.  0, or -1 with *WHY (malloc'd). */
int slurm_signal(const struct wire_rec *r, const char *sig, char **why);
/* Attempt ID (state R) still pending in Slurm: recorded cancelled
 * under its lock, then scancel'led; R then holds that record.  0
 * (also when it runs: nothing done), or -1 with errno. */
int slurm_cancel_pending(struct wk_state *st, const char *id, struct wire_rec *r);

/* ---- baton.c: staged attempts ------------------------------------------- */

/* STATE/staged/ID as status reports it: `attempt ID`, `state staged`,
 * its spec's `gpu`, `uuid` and `after`.  1: R filled; 0: not staged;
 * -1: error (errno). */
int wk_staged_rec(const struct wk_state *st, const char *id, struct wire_rec *r);
/* Whether STATE/staged/ holds any staged attempt: 1, 0, or -1 (errno). */
int staged_any(const struct wk_state *st);
/* The one way a staged attempt starts or gives up (LAYOUT.md section 8,
 * "Staged attempts"): started when every attempt it is after is over,
 * or `unstaged` when its cards stay busy.  Quiet (errors on stderr);
 * 0, or -1 when something could not be read or written (said). */
int baton_try(struct wk_state *st, const char *id);
/* End attempt ID while it is only staged, as WS (unstaged, cancelled)
 * with REASON: under staged/ID's lock (waited for up to
 * LAUNCH_WAIT_MS), attempts/ID.state written, then staged/ID removed.
 * 1: done, *R the record written; 0: it is not staged (any more: it
 * started, ended or never was), nothing done; 2: staged/ID's lock is
 * still held (a baton starting it), nothing done; -1: error (said),
 * the exit status in *EX. */
int staged_end(struct wk_state *st, const char *id, enum wire_state ws, const char *reason,
	       struct wire_rec *r, int *ex);
/* In a process that is done (a supervisor at its end, watch's child):
 * become `cardbaton-worker -d PATH baton`, with signals as a new
 * process has them and /dev/null on fds 0-2.  CARRY (or -1), an
 * inotify descriptor, goes with it: its last close waits for the
 * kernel's SRCU grace period (1 to 15 ms here), which the baton's exit
 * pays after its start rather than the exec before it.  Returns only
 * when the exec failed. */
void baton_exec(const struct wk_state *st, int carry);

/* Steps 1-7 of a launch for the spec REC (still the caller's): what
 * `launch` prints and its exit status.  `launch` and `watch` use it. */
int launch_rec(struct wk_state *st, const struct wire_rec *rec);
/* How long `watch` lets a launch it runs take (the launcher itself
 * waits at most 30 s for the job to start). */
#define WATCH_LAUNCH_MS 60000

/* lease.c: card UUID's lease NAME (a card's UUID, or a mark) opened
 * and flock()ed HOW without waiting: 1 held (*FDP, close-on-exec), 0
 * held by another; -1 with errno (ENOENT: missing and not CREATE), and
 * with *WHY (malloc'd) when it is not a regular file of one link (a
 * link, a FIFO: never followed nor waited on).  Made when CREATE and
 * missing: in STATE/leases 0600 and opened read-write (it names its
 * holder); in a lease_dir 0644, and opened read-only there always (it
 * may be another account's). */
int lease_lock(const struct wk_state *st, const char *name, int how, int create, int *fdp,
	       char **why);

/* A holder of a card, as its mark in the lease directory says: the
 * attempt ID it holds and the account that made the mark. */
struct holder {
	char *id;
	uid_t uid;
};
void holders_free(struct holder *v, size_t n);
/* lease.c: card UUID's live holders other than attempt ID (NULL: any),
 * by their marks (UUID+ATTEMPT locked: the sharers; with EXCLUSIVE,
 * UUID=ATTEMPT: the exclusive holder's in a lease_dir): their count,
 * and them in *V[0..*N) when V (malloc'd); -1 with errno.  A mark that
 * is not a regular file is nobody's. */
int card_holders(const struct wk_state *st, const char *uuid, int exclusive, const char *id,
		 struct holder **v, size_t *n);
/* lease.c: the attempt ID holding card UUID exclusive (the lease's
 * content, or its mark in a lease_dir; "?" when it names none yet) and
 * in *UID its account where a lease_dir says, else (uid_t)-1; NULL: out
 * of memory. */
char *exclusive_holder(const struct wk_state *st, const char *uuid, uid_t *uid);

#endif
