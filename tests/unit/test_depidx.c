/*
 * test_depidx.c - the index deps.c keeps of the queued jobs by the jobs
 * they wait for, and the heap it looks at them in (spoold/depidx.c,
 * pure; linked beside the library, Makefile): each ID's list holds
 * exactly the links added for it and not removed, through growth and
 * removals (a random run against a plain model); the heap pops in
 * dispatch order (priority descending, then ID ascending).
 */
#include <stdlib.h>
#include <string.h>

#include "t.h"
#include "../../spoold/depidx.h"

/* ID's list as "id id ..." in the order it holds them. */
static const char *list(const struct depidx *x, long long on)
{
	static char b[4096];
	size_t len = 0;

	b[0] = '\0';
	for (const struct dep_link *l = depidx_first(x, on); l && len < sizeof b; l = l->next)
		len += (size_t)snprintf(b + len, sizeof b - len, "%s%lld", len ? " " : "", l->id);
	return b;
}

/* Every list of X as the model says (LIVE[i]: link i is in), each
 * link's neighbours linked back. */
static int agrees(const struct depidx *x, const struct dep_link *v, const int *live, size_t n,
		  long long nkeys)
{
	size_t seen = 0, want = 0;

	for (size_t i = 0; i < n; i++)
		want += live[i] != 0;
	for (long long on = 1; on <= nkeys; on++) {
		const struct dep_link *prev = NULL;

		for (const struct dep_link *l = depidx_first(x, on); l; prev = l, l = l->next) {
			size_t i = (size_t)(l - v);

			if (i >= n || !live[i] || l->on != on || l->prev != prev)
				return 0;
			seen++;
		}
	}
	return seen == want;
}

static int cmp_key(const void *a, const void *b)
{
	const struct dep_key *p = a, *q = b;

	return dep_key_before(*p, *q) ? -1 : dep_key_before(*q, *p) ? 1 : 0;
}

int main(void)
{
	struct depidx x = { 0 };
	struct dep_link a = { .on = 7, .id = 10 }, b = { .on = 7, .id = 11 }, c = { .on = 7, .id = 12 };
	struct dep_link o = { .on = 8, .id = 12 };

	CHECK(depidx_first(&x, 7) == NULL);
	CHECK(depidx_add(&x, &a) == 0 && depidx_add(&x, &b) == 0 && depidx_add(&x, &c) == 0 &&
	      depidx_add(&x, &o) == 0);
	CHECK_STR(list(&x, 7), "12 11 10");
	CHECK_STR(list(&x, 8), "12");
	CHECK_STR(list(&x, 9), "");
	/* The middle, the head, the last: the list goes, the other stays. */
	depidx_del(&x, &b);
	CHECK_STR(list(&x, 7), "12 10");
	depidx_del(&x, &c);
	CHECK_STR(list(&x, 7), "10");
	depidx_del(&x, &a);
	CHECK(depidx_first(&x, 7) == NULL);
	CHECK_STR(list(&x, 8), "12");
	CHECK(x.used == 1);
	/* Added again after it was removed. */
	CHECK(depidx_add(&x, &a) == 0);
	CHECK_STR(list(&x, 7), "10");
	depidx_del(&x, &a);
	depidx_del(&x, &o);
	CHECK(x.used == 0);
	depidx_free(&x);

	/* A random run: 20,000 links over 3,000 IDs (the table grows and
	 * its clusters are re-placed), against the model. */
	enum { N = 20000, KEYS = 3000 };
	struct dep_link *v = calloc(N, sizeof *v);
	int *live = calloc(N, sizeof *live), ok = 1;

	if (!v || !live)
		return 1;
	srand(1);
	for (size_t i = 0; i < N; i++) {
		v[i].on = 1 + rand() % KEYS;
		v[i].id = (long long)i + 100000;
	}
	for (int step = 0; step < 200000; step++) {
		size_t i = (size_t)rand() % N;

		if (live[i]) {
			depidx_del(&x, &v[i]);
			live[i] = 0;
		} else if (depidx_add(&x, &v[i]) == 0) {
			live[i] = 1;
		} else {
			ok = 0;
		}
		if (step % 20000 == 0)
			ok &= agrees(&x, v, live, N, KEYS);
	}
	CHECK(ok);
	CHECK(agrees(&x, v, live, N, KEYS));
	for (size_t i = 0; i < N; i++)
		if (live[i])
			depidx_del(&x, &v[i]);
	memset(live, 0, N * sizeof *live);
	CHECK(agrees(&x, v, live, N, KEYS) && x.used == 0);
	depidx_free(&x);
	free(v);
	free(live);

	/* The heap: dispatch order, duplicates kept. */
	struct dep_heap h = { 0 };
	struct dep_key k, want[5000], got[5000];
	size_t n = 0;

	CHECK(dep_heap_pop(&h, &k) == 0);
	for (size_t i = 0; i < 5000; i++) {
		want[i] = (struct dep_key){ rand() % 7 - 3, 1 + rand() % 2000 };
		ok &= dep_heap_push(&h, want[i]) == 0;
	}
	CHECK(ok);
	while (n < 5000 && dep_heap_pop(&h, &got[n]))
		n++;
	CHECK(n == 5000 && h.n == 0);
	qsort(want, 5000, sizeof *want, cmp_key);
	CHECK(memcmp(want, got, sizeof want) == 0);
	CHECK(dep_key_before((struct dep_key){ 5, 9 }, (struct dep_key){ 0, 1 }));
	CHECK(dep_key_before((struct dep_key){ 0, 1 }, (struct dep_key){ 0, 2 }));
	CHECK(!dep_key_before((struct dep_key){ 0, 2 }, (struct dep_key){ 0, 2 }));
	dep_heap_free(&h);
	return T_DONE();
}
