/*
 * fuzz_events.c - the worker's event stream as the daemon reads it:
 * the output of `cardbaton-worker watch` (and of `status ID...`), a
 * sequence of wire records that arrives in pieces of any size through
 * a pipe (spoold/main.c watch_read, spoold/jobs.c reconcile_done).
 *
 * The first byte of the input seeds the piece sizes; the rest is the
 * stream.  Properties: reading it piece by piece as watch_read does
 * (append to a buffer, take every complete record, keep the rest) gives
 * exactly the records, in order, and the same verdict (clean end,
 * incomplete tail, or malformed record) as reading it whole; and every
 * record's fields read as apply_attempt reads them (state names, the
 * numbers, repeated uuid keys) without trouble.
 */
#include <errno.h>

#include "spool.h"
#include "fuzz.h"

#define MAX_RECS 4096

struct recs {
	struct wire_rec r[MAX_RECS];
	size_t n;
	int bad;                /* a malformed record ended the stream */
	size_t left;            /* bytes of an incomplete record at the end */
};

static struct recs whole, pieces;

static void recs_free(struct recs *s)
{
	for (size_t i = 0; i < s->n; i++)
		wire_free(&s->r[i]);
	s->n = 0;
	s->bad = 0;
	s->left = 0;
}

static int rec_eq(const struct wire_rec *a, const struct wire_rec *b)
{
	if (a->n != b->n)
		return 0;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->f[i].key, b->f[i].key) || a->f[i].len != b->f[i].len ||
		    memcmp(a->f[i].val, b->f[i].val, a->f[i].len))
			return 0;
	return 1;
}

/* What apply_attempt and set_uuids take from a record. */
static void look_at(const struct wire_rec *w)
{
	const char *st = wire_get(w, "state");
	enum att_state as;
	long long v;
	size_t nu = 0;

	if (st)
		(void)att_state_parse(st, &as);
	(void)wire_get(w, "attempt");
	(void)wire_get(w, "reason");
	(void)wire_get_ll(w, "started", &v);
	(void)wire_get_ll(w, "finished", &v);
	(void)wire_get_ll(w, "exit_code", &v);
	(void)wire_get_ll(w, "timeout", &v);
	for (size_t i = 0; i < w->n; i++)
		if (!strcmp(w->f[i].key, "uuid")) {
			FUZZ_CHECK(w->f[i].val != NULL);
			nu++;
		}
	(void)nu;
}

/* Take every complete record of B[0..*LEN) into S; keep the rest at
 * the front of B.  -1 once a record is malformed. */
static int take(struct recs *s, struct sbuf *b)
{
	size_t off = 0;

	for (;;) {
		struct wire_rec w = { 0 };
		const char *why;
		long used = wire_parse(b->s + off, b->len - off, &w, &why);

		if (used == 0)
			break;
		if (used < 0) {
			FUZZ_CHECK(w.n == 0);
			s->bad = 1;
			return -1;
		}
		FUZZ_CHECK((size_t)used <= b->len - off);
		off += (size_t)used;
		if (s->n == MAX_RECS) {
			wire_free(&w);
			continue;
		}
		look_at(&w);
		s->r[s->n++] = w;
	}
	memmove(b->s, b->s + off, b->len - off);
	b->len -= off;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sbuf b = { 0 };
	unsigned seed;
	size_t pos;

	if (size < 1)
		return 0;
	seed = data[0] * 2654435761u + 1;
	data++;
	size--;

	/* Whole. */
	FUZZ_CHECK(sbuf_add(&b, data, size) == 0);
	if (take(&whole, &b) == 0)
		whole.left = b.len;
	sbuf_free(&b);

	/* In pieces of 1 to 64 bytes. */
	FUZZ_CHECK(sbuf_add(&b, "", 0) == 0);
	for (pos = 0; pos < size; ) {
		size_t n;

		seed = seed * 1103515245u + 12345u;
		n = 1 + (seed >> 16) % 64;
		if (n > size - pos)
			n = size - pos;
		FUZZ_CHECK(sbuf_add(&b, data + pos, n) == 0);
		pos += n;
		if (take(&pieces, &b) < 0)
			break;
	}
	if (!pieces.bad)
		pieces.left = b.len;
	sbuf_free(&b);

	FUZZ_CHECK(whole.bad == pieces.bad);
	FUZZ_CHECK(whole.n == pieces.n);
	for (size_t i = 0; i < whole.n; i++)
		FUZZ_CHECK(rec_eq(&whole.r[i], &pieces.r[i]));
	FUZZ_CHECK(whole.left == pieces.left);
	recs_free(&whole);
	recs_free(&pieces);
	return 0;
}
