/*
 * launch.h - what the parts of `cardbaton-worker launch` share
 * (LAYOUT.md section 8, steps 1-7, and the supervisor):
 *
 *   spec.c       the spec's checks, and the job's environment
 *   lease.c      steps 3-5: the cards' UUIDs, their leases, the check
 *                under them
 *   supervise.c  the supervisor that stays behind with the job, and
 *                the job's child
 *   launch.c     the launch steps in order, with one failure path, and
 *                the answers (step 7)
 *
 * Processes:
 *
 *   launcher (ssh's child)      reads the spec, takes the attempt lock
 *     |                         and the leases, writes "starting", forks:
 *     +- supervisor             setsid, subreaper, stdio on /dev/null and
 *          |                    the log; writes "running", tells the
 *          |                    launcher (which prints the state and
 *          |                    exits), waits; writes the final state.
 *          +- job               own process group; execvp(argv) or
 *                               sh -c SHELL
 *
 * The attempt lock and the leases are opened close-on-exec and made
 * inheritable in the job's child only, after fork: the launcher's and
 * the supervisor's copies go away with them, the job's with the job's
 * last process, so the kernel releases them however the attempt ends.
 */
#ifndef CARDBATON_WORKER_LAUNCH_H
#define CARDBATON_WORKER_LAUNCH_H

#include "worker.h"

/* ---- spec.c ----------------------------------------------------------- */

/* The launch spec (LAYOUT.md section 10, "Spec keys"), indexed: every
 * string points into REC. */
struct spec {
	struct wire_rec rec;
	const char *id;
	char **argv;            /* NULL-terminated, into rec; NULL for shell */
	size_t argc;
	const char *shell;
	const char *cwd;
	const char **env;       /* NAME=value, into rec */
	size_t nenv;
	long long *gpu;
	size_t ngpu;
	const char **uuid;      /* the controller's, into rec; 0 or ngpu */
	size_t nuuid;
	long long idle_mib, timeout, grace;
	int resumable;
	int share;              /* its cards shared with other sharing jobs (LOCK_SH) */
	long long memory;       /* MiB it declares per card (sharing: must be free) */
	long long max_share;    /* sharing: at most this many sharers on a card
				   (the node's max_jobs_per_gpu; default 1) */
	const char *checkpoint;
	/* A checkpoint moved here (another node's, on a shared_fs as this
	 * node mounts it): this node's name, for the reason when it cannot
	 * be seen here; NULL: its own node's */
	const char *checkpoint_on;
	const char *nodelist;   /* Slurm: the host to run on (a resume), or NULL */
	const char **after;     /* a staged launch: the attempts whose end starts
				   it (LAYOUT.md section 8, the baton), into rec */
	size_t nafter;
};

/* Check the spec in SP->rec and index it.  0, or -1 with *why
 * (malloc'd; NULL when out of memory).  spec_free frees the index;
 * the record stays the caller's. */
int spec_check(struct spec *sp, char **why);
void spec_free(struct spec *sp);

/* An environment being built: a NULL-terminated vector. */
struct envv {
	char **v;
	size_t n, cap;
	char **owned;           /* strings made here, freed with the vector */
	size_t nowned;
};

void env_free(struct envv *e);

/* ---- what the launcher hands to the supervisor ------------------------- */

struct launch {
	struct wk_state *st;
	struct spec *sp;
	int adir;               /* attempts/ID */
	int lockfd;             /* attempts/ID/lock, held */
	int *lease;             /* leases/UUID, held; sp->ngpu of them */
	int *mark;              /* sharing: leases/UUID+ATTEMPT, held; -1 otherwise */
	char **uuid;            /* the cards' UUIDs, in spec order */
	char *adir_path;        /* STATE/attempts/ID */
	char *log_path;
	char *cwd;              /* expanded, or NULL */
	struct envv env;
	/* Inside a Slurm allocation (slurm.c): the cards are Slurm's (no
	 * leases; CUDA_VISIBLE_DEVICES as Slurm set it), and every state
	 * record says `slurm_job` and `host`. */
	int in_slurm;
	const char *slurm_job, *host;
};

/* spec.c, step 6: L->env for the job, the worker's environment, then the
 * spec's, then the contract's variables (AGENTS.md): CUDA_VISIBLE_DEVICES
 * (the leased cards' UUIDs), the pause and checkpoint paths, the
 * attempt ID, and the checkpoint only on a resumed attempt.  0, or -1
 * (out of memory). */
int job_env(struct launch *l);

/* ---- lease.c ----------------------------------------------------------- */

/* Steps 3-5 for L's cards.  0: every card leased and idle, L->uuid
 * filled; EX_TEMPFAIL_ with *reason (malloc'd): a card is busy, leased
 * by another attempt, gone or not the one named; or the exit code of
 * a failure already said on stderr (EX_UNAVAILABLE_: nvidia-smi,
 * EX_OSERR_).  What was leased stays in L->lease for the caller. */
int lease_cards(struct launch *l, char **reason);
/* Close the leases held (TRUNCATE: the holder's name removed first). */
void release_leases(struct launch *l, int truncate);
/* A sharing attempt that is over (or never started): its marks removed.
 * Before release_leases. */
void unmark_leases(struct launch *l);


/* ---- launch.c ----------------------------------------------------------- */

/* Steps 1-7 for the checked spec SP: the answer (the state record,
 * `busy` with its reason, or an existing attempt's record) left in
 * *ANS for the caller to print or read (empty when there is none: an
 * error said on stderr, or a Slurm submission, which prints its own),
 * and the exit status.  `launch` prints it; the baton (baton.c) reads
 * it, quietly. */
int launch_spec(struct wk_state *st, struct spec *sp, struct wire_rec *ans);

/* ---- baton.c ------------------------------------------------------------ */

/* `launch` of a spec with `after` (LAYOUT.md section 8, "Staged
 * attempts"): STATE/staged/ID written unless the attempt exists or is
 * staged already, baton_try, and the answer printed (the attempt's
 * state record, or `staged`).  The exit status. */
int stage_launch(struct wk_state *st, struct spec *sp);

/* ---- slurm.c ------------------------------------------------------------ */

/* Step 3-6 on a Slurm node: L's job submitted (or found, by its name,
 * when an earlier launcher submitted it), "starting" with `slurm_job`
 * written and printed; the lock is the caller's.  0, the exit code of
 * a failure said on stderr, or EX_TEMPFAIL_ with *REASON (malloc'd):
 * nothing was submitted. */
int slurm_submit(struct launch *l, char **reason);

/* ---- supervise.c -------------------------------------------------------- */

/* The supervisor, in the launcher's child once the state file says
 * "starting": runs the job, writes "running" and tells the launcher
 * through NOTIFY, waits for it and everything it started, writes the
 * final state.  Never returns. */
void supervise(struct launch *l, int notify) __attribute__((noreturn));

#endif
