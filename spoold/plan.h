/*
 * plan.h - one scheduling pass as a pure function: which queued job
 * goes where now (SPEC §7; the rule is in AGENTS.md, "Scheduling
 * rule").  sched.c builds the input from the daemon, calls plan() and
 * acts on what comes out; tests/unit/test_plan.c checks the rules.
 *
 * In: the queued jobs in dispatch order (priority, then ID); the nodes
 * in config order, each with its last card snapshot and how good that
 * is; reserve_after_seconds; NOW, on the clock of queued_at (wall ms).
 * Out: the placements (job, node, cards), the reasons of the jobs no
 * node can ever take, the cards held for starving jobs, and whether
 * GPU jobs are left waiting.  plan() does no I/O and reads no clock or
 * global; what it allocates is OUT's, freed by plan_free(), or freed
 * before it returns.
 *
 * The rules, job by job in dispatch order:
 *
 *   - A held job (`hold`) is not placed, holds nothing and is not
 *     waiting for cards; nor is a job waiting for its dependencies
 *     (`blocked`: plan_deps below), nor a job whose `begin` is later
 *     than NOW (the earliest such begin is WAKE_AT, when a pass is
 *     due), nor a job of an array whose limit is reached: as many of
 *     its jobs run as its `max_running`, counting those this pass
 *     places.
 *   - A job whose checkpoint is on a shared filesystem (`fs`) may use
 *     only the nodes that mount it and none of `away`, and goes to
 *     `prefer` (the node that wrote it) when that takes it now, before
 *     the others in config order.
 *   - A job that may travel (`travel`: checkpoint_transfer) and that no
 *     node it may use takes now goes, by the rules of a placement, to
 *     the first node in config order that cannot see its checkpoint,
 *     has not left it out (`away`) and is not a Slurm node (`moved`:
 *     its checkpoint is copied there first, moves.c).  Only placed
 *     so: never staged, held for, nor preempting anywhere else; a card
 *     free for it there in a snapshot not trusted yet keeps it from
 *     being staged on its own node (it is moved once that is read),
 *     and one free there now un-staged it (a better placement).
 *   - A job may use every node, or only the one it names (`node`);
 *     never a drained one (nothing is placed there, nothing held), nor
 *     one that bars its owner (`barred`: as if it were unreachable to
 *     the job).
 *   - A Slurm node (slurm.c in the worker) takes no job with pinned
 *     cards, `mem` or `share` (Slurm picks the cards and says nothing
 *     of their memory), and no job once MAX_JOBS of ours are there
 *     (counting those this pass places).
 *   - A node is usable for GPU jobs when its snapshot is known and
 *     fresh, or in the pass right after a handoff (fresh or not).
 *   - A free card is eligible (the node's `gpus:` list, gpu_eligible),
 *     idle (gpu_idle: memory in use at most idle_mib, no compute
 *     process, no lease), and neither taken by an earlier placement of
 *     this pass nor held.  A job with `mem` uses (and holds) only cards
 *     whose total memory is known and at least that: "big enough".
 *   - A CPU job (need 0) goes to the first reachable node it may use.
 *     It never holds anything, and held cards do not stop it.
 *   - A GPU job goes to the first node it may use, in config order,
 *     that is reachable, usable, and has its cards free: all of its
 *     pinned indices, or the `need` lowest-numbered free cards (in
 *     snapshot order).  Those cards are taken for the rest of the pass.
 *   - A GPU job that is not placed does not stop the pass (no
 *     head-of-line blocking), and sets `waiting`.  If its reason is
 *     already on disk (never_noted), nothing more.  Else, if every node
 *     it may use is reachable and known, and none has all its pinned
 *     indices, or `need` eligible big enough cards, it gets a reason
 *     ("no node has GPU 7 (local has 0-3)"; "no card has M MiB" when
 *     no eligible card it may use is big enough) and holds nothing.
 *     Else, once it has
 *     waited reserve_after_seconds since queued_at (0: at once), it
 *     holds what it waits for: its pinned indices on every usable node
 *     it may use, or every card of the usable node it may use with the
 *     most free cards (the first such); later jobs are not placed on
 *     held cards, so they collect until it fits (no starvation).
 *   - A sharing job may join a card other sharing jobs hold (share_ok):
 *     fewer than the node's max_jobs_per_gpu hold it, counting those
 *     running (the snapshot's sharers) and those this pass placed
 *     there, their declared memory and its own within the card's total,
 *     and the card's free memory (less what this pass placed) at least
 *     its own.  One that is not placed, on a node it may use that has
 *     such a card but for the count, says so (FULL: "GPU 1 of NODE:
 *     shared by N jobs, max_jobs_per_gpu N", the first such card).
 *   - A card kept for a job (`resv`) is free for that job only.
 *   - Preemption (`preempt`): a GPU job that is not placed, keeps no
 *     card yet, and is not held back as above, may preempt jobs running
 *     on one node it may use: resumable, of strictly lower priority,
 *     running for min_runtime_seconds at least, not yielding already,
 *     not chosen by an earlier job of this pass.  Only when the job
 *     then fits there (its cards free but for the victims' leases,
 *     everything else counted as for a placement): the fewest victims
 *     that make it fit, on the node where they are fewest (config
 *     order among equals); among sets of one size, the first in the
 *     order lowest priority, then latest started (least work lost).
 *     Its cards are then held for it in the pass (and kept by the
 *     daemon: `resv`).  Otherwise nobody is preempted.
 *   - The baton (LAYOUT.md section 8, "Staged attempts"): a GPU job left
 *     waiting by the rules above -- eligible, not sharing, not preempting,
 *     no card kept for it, no reason that it never fits, no free card
 *     for it in any known snapshot (fresh or not) -- may be
 *     staged on the first node in config order that it may use, that is
 *     open, known (fresh or not: the worker checks the cards when it
 *     starts the job) and takes staged attempts (`stage`), and has its cards
 *     "about to free": each eligible and big enough, leased by one
 *     running attempt (started, not staged, not yielding, not chosen as
 *     a victim, not sharing; with preemption on, not one it may preempt:
 *     resumable, of lower priority) and waited for by no staged attempt earlier
 *     in dispatch order.  Its pinned indices, or the `need`
 *     lowest-numbered such cards.  The node starts it when those
 *     attempts end.  A staged attempt's cards are taken for everyone
 *     else (the snapshot may show them free once their holder ended).
 *   - A staged attempt is un-staged (sent back to the queue at its place)
 *     when its node is drained; when a job earlier in dispatch order,
 *     waiting as above, would be staged on one of its cards (that job is
 *     staged in a later pass, once the cards are given back), or would
 *     be but for their holder yielding (that job is placed there once
 *     the holder lets them go); when a
 *     preemption chooses the attempt it waits for; and when it could be
 *     placed now on free cards (a better placement).
 *   - A lab's user limit: a GPU job whose owner's attempts hold (running,
 *     pausing, staged: in->users[].held) and this pass placed or staged
 *     cards that with its own NEED would pass the owner's max_gpus is
 *     not placed, not staged, holds nothing, preempts nobody and is not
 *     waiting for cards: it is told so (LIMIT), and the jobs behind it
 *     go on.
 *   - When no free card is left (counted at the start on the reachable
 *     usable nodes, less the cards placed; held cards still count) and
 *     no CPU job is left to consider, the pass stops: `waiting`.
 *
 * The order (plan_fair_order, before the pass, in a lab's spool): jobs of
 * equal priority are taken by their owners' effective usage, the least
 * first (ties: the earlier job), FIFO within an owner; priority stays
 * first.  The pass then takes IN->JOBS in that order as "dispatch order".
 */
#ifndef CARDBATON_PLAN_H
#define CARDBATON_PLAN_H

#include <stddef.h>

#include "spool.h"
#include "node.h"

struct plan_node {
	const struct node_conf *conf;   /* name, gpus: list, idle_mib */
	const struct gpu_info *gpus;    /* its last snapshot */
	size_t ngpus;
	int reachable;
	int known;              /* a snapshot has been read: GPUS is one */
	int fresh;              /* trusted (cards.c is_fresh): a query answered
				   less than GPU_POLL_MS ago, nothing doubtful since */
	int handoff;            /* an attempt there has just ended: its cards
				   are marked free in GPUS (cards.c cards_freed) */
	int drained;            /* nothing new is placed here (drain.h) */
	int stage;              /* takes staged attempts (its stream said `stage 1`) */
	/* run_as: owner: per user (in->users' order), 1 where that user's
	 * account there has not been seen to take the lab's key (spoold
	 * accts.c): nothing of the user's is placed, staged, held or
	 * preempted for there, and it says no "never fits" for them; NULL:
	 * every user may */
	const unsigned char *barred;
	/* A Slurm node (conf->slurm_partition): at most MAX_JOBS of our
	 * jobs there at once (0: no limit), NJOBS there now. */
	long long max_jobs, njobs;
};

struct plan_job {
	long long id;
	long long prio;         /* its priority (preemption: only of lower ones) */
	long long need;         /* cards; 0: a CPU job */
	long long mem;          /* MiB: only cards with this much memory in all (0: any) */
	int share;              /* may share a card with other sharing jobs, taking MEM of it */
	long long queued_at;    /* wall ms */
	const int *gpus;        /* pinned indices (distinct; NGPUS = NEED), or NULL */
	size_t ngpus;
	const char *node;       /* the only node it may use, or NULL */
	/* Its checkpoint on the shared filesystem FS (shared_fs): only the
	 * nodes that mount it, PREFER (its own node) first, none of AWAY
	 * (they could not see it); FS NULL: none of this */
	const char *fs, *prefer;
	const char *const *away;
	size_t naway;
	/* checkpoint_transfer: when no node it may use (NODE, or FS's)
	 * takes it now, one its checkpoint could be copied to may */
	int travel;
	int never_noted;        /* its "can never fit" reason is on disk */
	int held;               /* `hold`: not placed until released */
	int blocked;            /* a dependency has not ended as it must */
	long long begin;        /* wall ms: not placed before (0: none) */
	size_t group;           /* its array's limit: in->groups[group - 1]; 0: none */
	size_t user;            /* its owner in a lab's spool: in->users[user - 1]; 0: none */
};

/* A user of a lab's spool (SPEC §12): at most MAX_GPUS cards (LAB_NONE:
 * no limit) held at once by the user's attempts, HELD of them now
 * (running, pausing, staged). */
struct plan_user {
	long long max_gpus, held;
};

/* An array (or sweep) with a limit: at most MAX of its jobs running at
 * once; RUNNING of them are (launching, running or pausing) now. */
struct plan_group {
	long long max, running;
};

/* A job running (launching, running, pausing) on a node, as preemption
 * sees it: its cards are those of the node's snapshot leased by AID. */
struct plan_run {
	long long id;
	size_t node;
	const char *aid;
	long long prio;
	long long started;      /* wall ms (0: not yet) */
	int resumable;          /* it has a resume_command */
	int yielding;           /* asked to give its cards back already */
	int share;              /* it shares its cards, taking MEM MiB of each */
	long long mem;
	/* Staged (not started): it waits for CARDS of its node to free, and
	 * JOB is what it asks, as for a queued job (a better placement). */
	int staged;
	const int *cards;
	size_t ncards;
	const struct plan_job *job;
};

/* Card INDEX of NODE is kept for job JOB (a preemption freed it). */
struct plan_resv {
	size_t node;
	int index;
	long long job;
};

struct plan_in {
	const struct plan_job *jobs;    /* dispatch order */
	size_t njobs;
	const struct plan_run *runs;
	size_t nruns;
	const struct plan_resv *resv;
	size_t nresv;
	int preempt;                    /* config preemption.enabled */
	long long min_runtime_seconds;  /* ... min_runtime_seconds */
	const struct plan_node *nodes;  /* config order */
	size_t nnodes;
	const struct plan_group *groups;
	size_t ngroups;
	const struct plan_user *users;
	size_t nusers;
	long long reserve_after_seconds;
};

/* Launch JOB on NODE (indices into the input) with CARDS (indices of
 * the node's cards; none for a CPU job). */
struct plan_place {
	size_t job, node;
	const int *cards;
	size_t ncards;
	int moved;              /* by a copy of its checkpoint (travel) */
};

/* JOB can never fit, and says why: "waiting: " + TEXT in its record. */
struct plan_why {
	size_t job;
	char *text;
};

/* JOB waits for its owner, USER (in->users), who holds HELD cards, to
 * let some go: "waiting: user limit: alice holds 2 GPUs (max_gpus 2)". */
struct plan_limit {
	size_t job, user;
	long long held;
};

/* Card INDEX of NODE is held for JOB (the job that held it first). */
struct plan_hold {
	size_t job, node;
	int index;
};

/* JOB preempts RUNS[VICTIMS[0..NVICTIMS)] on NODE: once they have
 * yielded, CARDS (NCARDS indices) are its. */
struct plan_preempt {
	size_t job, node;
	const size_t *victims;
	size_t nvictims;
	const int *cards;
	size_t ncards;
};

struct plan_out {
	struct plan_place *place;       /* in dispatch order */
	size_t nplace;
	struct plan_place *stage;       /* staged: to start when CARDS' holders end */
	size_t nstage;
	int *scards;                    /* ... their CARDS point here */
	size_t nscards;
	size_t *unstage;                /* runs (staged ones) to send back to the queue */
	size_t nunstage;
	struct plan_preempt *preempt;
	size_t npreempt;
	size_t *victims;                /* the preemptions' VICTIMS point here */
	size_t nvictims;
	int *pcards;                    /* ... and their CARDS here */
	size_t npcards;
	struct plan_why *why;
	size_t nwhy;
	struct plan_why *full;          /* sharing jobs left waiting for a card whose
					   sharers are at max_jobs_per_gpu: which */
	size_t nfull;
	struct plan_limit *limit;       /* jobs over their owner's max_gpus */
	size_t nlimit;
	struct plan_hold *hold;
	size_t nhold;
	int waiting;                    /* GPU jobs wait: read the cards again soon */
	long long wake_at;              /* wall ms of the earliest begin still to come, or 0 */
	int *cards;                     /* the placements' CARDS point here */
	size_t ncards;
};

/*
 * What a queued job's dependencies say, in the order the job lists them
 * (`after`, then `after_any`), each with the state its job is in
 * (JS_N: it has no record any more):
 *   DEP_CANCEL  an `after` job ended other than succeeded (or has no
 *               record): the job is cancelled, "dependency ID ended
 *               STATE"; *WHICH is the first such;
 *   DEP_WAIT    else a job listed has not ended: *WHICH, the first;
 *   DEP_READY   else: it may be placed.
 * An `after_any` job with no record counts as ended.
 */
struct plan_dep {
	long long id;
	int any;                /* listed in after_any */
	enum job_state state;
};
enum dep_verdict { DEP_READY, DEP_WAIT, DEP_CANCEL };
enum dep_verdict plan_deps(const struct plan_dep *v, size_t n, size_t *which);

/* One pass over IN at NOW: 0 with OUT, or -1 (out of memory) with OUT
 * empty. */
int plan(const struct plan_in *in, long long now, struct plan_out *out);
void plan_free(struct plan_out *out);

/* The fair share's order of JOBS[0..N) (given in dispatch order:
 * priority, then ID) into ORDER, a permutation of 0..N-1: priority
 * first, then the owner's effective usage, EFF[user - 1] of NUSERS (a
 * job without a user counts 0), the least first, then the ID; in
 * O(N + NUSERS log NUSERS).  1: ORDER is another order; 0: the order
 * given (every owner's usage the same); -1: out of memory (the order
 * given). */
int plan_fair_order(const struct plan_job *jobs, size_t n, const double *eff, size_t nusers,
		    size_t *order);
/* The slot of card INDEX in the snapshot G[0..N), or -1. */
long plan_slot(const struct gpu_info *g, size_t n, int index);

#endif
