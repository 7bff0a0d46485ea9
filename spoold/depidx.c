/*
 * depidx.c - the queued jobs by the jobs they wait for, and the order
 * in which they are looked at (depidx.h).  Pure.
 */
#include <stdlib.h>

#include "depidx.h"

static size_t slot(const struct depidx *x, long long on)
{
	return (size_t)((unsigned long long)on * 0x9E3779B97F4A7C15ULL >> 11) & (x->cap - 1);
}

/* The slot of ON's list, or of the empty slot where it would go. */
static size_t find(const struct depidx *x, long long on)
{
	size_t i = slot(x, on);

	while (x->head[i] && x->head[i]->on != on)
		i = (i + 1) & (x->cap - 1);
	return i;
}

static int grow(struct depidx *x)
{
	struct dep_link **old = x->head;
	size_t ocap = x->cap, ncap = ocap ? ocap * 2 : 256;
	struct dep_link **nv = calloc(ncap, sizeof *nv);

	if (!nv)
		return -1;
	x->head = nv;
	x->cap = ncap;
	for (size_t k = 0; k < ocap; k++)
		if (old[k])
			x->head[find(x, old[k]->on)] = old[k];
	free(old);
	return 0;
}

int depidx_add(struct depidx *x, struct dep_link *l)
{
	size_t i;

	l->prev = NULL;
	if (x->cap && x->head[i = find(x, l->on)]) {
		l->next = x->head[i];
		l->next->prev = l;
		x->head[i] = l;
		return 0;
	}
	/* A new list, in a slot of its own. */
	if ((x->used + 1) * 2 > x->cap && grow(x) < 0)
		return -1;
	l->next = NULL;
	x->head[find(x, l->on)] = l;
	x->used++;
	return 0;
}

void depidx_del(struct depidx *x, struct dep_link *l)
{
	size_t i, j;

	if (l->next)
		l->next->prev = l->prev;
	if (l->prev) {
		l->prev->next = l->next;
		l->prev = l->next = NULL;
		return;
	}
	i = find(x, l->on);
	x->head[i] = l->next;
	l->next = NULL;
	if (x->head[i])
		return;
	/* The list is empty: its slot too, and the rest of the cluster
	 * placed again (linear probing deletion). */
	x->used--;
	for (j = (i + 1) & (x->cap - 1); x->head[j]; j = (j + 1) & (x->cap - 1)) {
		struct dep_link *h = x->head[j];

		x->head[j] = NULL;
		x->head[find(x, h->on)] = h;
	}
}

const struct dep_link *depidx_first(const struct depidx *x, long long on)
{
	return x->cap ? x->head[find(x, on)] : NULL;
}

void depidx_free(struct depidx *x)
{
	free(x->head);
	x->head = NULL;
	x->cap = x->used = 0;
}

int dep_key_before(struct dep_key a, struct dep_key b)
{
	return a.prio != b.prio ? a.prio > b.prio : a.id < b.id;
}

int dep_heap_push(struct dep_heap *h, struct dep_key k)
{
	size_t i;

	if (h->n == h->cap) {
		size_t ncap = h->cap ? h->cap * 2 : 64;
		struct dep_key *nv = realloc(h->v, ncap * sizeof *nv);

		if (!nv)
			return -1;
		h->v = nv;
		h->cap = ncap;
	}
	for (i = h->n++; i > 0 && dep_key_before(k, h->v[(i - 1) / 2]); i = (i - 1) / 2)
		h->v[i] = h->v[(i - 1) / 2];
	h->v[i] = k;
	return 0;
}

int dep_heap_pop(struct dep_heap *h, struct dep_key *k)
{
	struct dep_key last;
	size_t i = 0;

	if (!h->n)
		return 0;
	*k = h->v[0];
	last = h->v[--h->n];
	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && dep_key_before(h->v[c + 1], h->v[c]))
			c++;
		if (!dep_key_before(h->v[c], last))
			break;
		h->v[i] = h->v[c];
		i = c;
	}
	if (h->n)
		h->v[i] = last;
	return 1;
}

void dep_heap_free(struct dep_heap *h)
{
	free(h->v);
	h->v = NULL;
	h->n = h->cap = 0;
}
