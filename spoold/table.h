/*
 * table.h - every transition of a job, as one table (table.c).
 *
 * A job is in one of the record states (queued running pausing paused
 * succeeded failed cancelled lost).  Something happens to it: an event
 * (below).  The table says, for each state and event, the state it goes
 * to and how the record changes (its `edit`); a pair with no row is an
 * event the job ignores (or a request refused) in that state.  The
 * daemon's one step function (jobs.c job_step) looks the row up, loads
 * the record once, applies the edit, stages it once (turn.c),
 * and then does what the new state asks of the daemon's memory (the
 * queue, the running table) and of the node (launch, cancel, pause).
 * This file does no I/O: tests/unit/test_table.c walks every row, and
 * checks that AGENTS.md's table says the same.
 *
 * Accepting a submission (new/ -> queued/) is not a row: it makes the
 * record, batched (jobs.c accept_new), before there is a state.
 */
#ifndef CARDBATON_TABLE_H
#define CARDBATON_TABLE_H

#include "spool.h"

enum job_event {
	EV_PLACE,               /* the scheduler placed it: a new attempt */
	EV_BUSY,                /* the launch found its cards busy */
	EV_REFUSED,             /* the worker refused the launch spec */
	EV_STARTED,             /* node: the attempt is running */
	EV_PAUSE_ASKED,         /* node: the pause file was created for `pause` */
	EV_PAUSING,             /* node: the attempt is pausing (a time limit) */
	EV_PAUSED,              /* node: exit 75 with a valid checkpoint marker */
	EV_PAUSED_AT_LIMIT,     /* ... after its time limit, or to yield its cards (a
				   preemption, a drain): it resumes by itself */
	EV_SUCCEEDED,           /* node: exit status 0 */
	EV_FAILED,              /* node: any other end */
	EV_CANCELLED,           /* node: stopped by a cancel */
	EV_LOST,                /* node: the worker vanished, or has no record */
	EV_UNSTAGED,            /* node: a staged attempt that never started (asked
				   back, or its cards busy when its turn came) */
	EV_CANCEL,              /* request: cancel */
	EV_PAUSE,               /* request: pause */
	EV_RESUME,              /* request: resume */
	EV_PROMOTE,             /* request: promote */
	EV_HOLD,                /* request: hold */
	EV_RELEASE,             /* request: release */
	EV_WAIT,                /* the scheduler: why it cannot be placed */
	EV_BLOCKED,             /* deps.c: what it waits for (a job), or no longer */
	EV_DEPENDENCY,          /* deps.c: a job it must follow ended otherwise */
	EV_MOVE,                /* moves.c: its checkpoint is to be copied to NODE */
	EV_MOVED,               /* moves.c: ... the copy there is whole: PATH */
	EV_N
};

/* What an event brings. */
struct ev_arg {
	const char *why;        /* EV_BUSY, EV_REFUSED, EV_WAIT, EV_BLOCKED (NULL: what
				   it asks, queued_reason), EV_DEPENDENCY; a node's reason */
	const char *node;       /* EV_PLACE, EV_MOVE, EV_MOVED: the node's name */
	const char *path;       /* EV_MOVED: the checkpoint's copy there */
	size_t node_index;      /* ... its index in the config */
	const int *gpus;        /* ... the cards */
	size_t ngpus;
	const char *spool_id;   /* ... for the new attempt's ID */
	const char *const *after;       /* ... staged: it starts on the node when these
					   attempts end (the baton); NULL: a launch */
	size_t nafter;
	const char *aid;        /* the attempt an event of the node is about */
	long long prio;         /* EV_PROMOTE */
	const struct wire_rec *w;       /* node events: the attempt's state record */
};

/* The record is changed (1), is as the event would make it already (0:
 * nothing to write), or could not be changed (-1: out of memory). */
typedef int (*edit_fn)(struct job *j, const struct ev_arg *a, long long now);

struct transition {
	enum job_state to;
	edit_fn edit;           /* NULL: the record does not change here (the
				   request goes to the node, the state waits
				   for its answer) */
	unsigned char row;      /* 1: a row (the table's empty cells are 0) */
};

/* The row for a job in state S meeting event EV, or NULL. */
const struct transition *transition(enum job_state s, enum job_event ev);
/* Its name in AGENTS.md and the log ("place", "busy", ...). */
const char *job_event_name(enum job_event ev);
/* The event of an attempt state a node reports, or EV_N when it is none
 * (starting, busy: not a transition).  AT_LIMIT: paused at a time limit. */
enum job_event node_event(enum wire_state s, int at_limit);

/*
 * Apply row T to J: its edit, then its state.  1: J
 * changed (write it), 0: nothing changed, -1: out of memory.
 */
int transition_apply(const struct transition *t, struct job *j, const struct ev_arg *a,
		     long long now);

#endif
