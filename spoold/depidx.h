/*
 * depidx.h - what deps.c keeps to look only at the queued jobs an end
 * concerns (pure: memory only, no daemon; tests/unit/test_depidx.c).
 *
 * The index: for each job ID that a queued job lists in `after` or
 * `after_any`, the queued jobs that list it.  A hash by the ID waited
 * for, each slot the head of a list threaded through the waiters'
 * links (one per ID listed, the waiter's own), so that a link is added
 * and removed in O(1) and a job's end walks its own dependants only.
 *
 * The heap: jobs due for a look, popped in dispatch order (priority
 * descending, then ID ascending), the order in which the queue is
 * looked at.
 */
#ifndef CARDBATON_DEPIDX_H
#define CARDBATON_DEPIDX_H

#include <stddef.h>

struct dep_link {
	long long on;                   /* the job waited for */
	long long id;                   /* the queued job that lists it */
	struct dep_link *prev, *next;   /* among those that list ON */
};

struct depidx {
	struct dep_link **head;         /* open addressing by ON; NULL: empty */
	size_t cap, used;
};

/* L (its `on` and `id` set, in no list) joins ON's list: 0, or -1 out
 * of memory (nothing changed). */
int depidx_add(struct depidx *x, struct dep_link *l);
/* L, added before, leaves its list (a list left empty leaves the
 * table). */
void depidx_del(struct depidx *x, struct dep_link *l);
/* The first of those that list ON (the rest through ->next), or NULL. */
const struct dep_link *depidx_first(const struct depidx *x, long long on);
/* The table (the links are their owners'). */
void depidx_free(struct depidx *x);

struct dep_key {
	long long prio, id;
};

struct dep_heap {
	struct dep_key *v;
	size_t n, cap;
};

/* A before B in dispatch order. */
int dep_key_before(struct dep_key a, struct dep_key b);
/* 0, or -1 out of memory (nothing changed). */
int dep_heap_push(struct dep_heap *h, struct dep_key k);
/* The first in dispatch order into *K: 1, or 0 when H is empty. */
int dep_heap_pop(struct dep_heap *h, struct dep_key *k);
void dep_heap_free(struct dep_heap *h);

#endif
