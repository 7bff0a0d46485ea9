/*
 * fuzz_wire.c - the worker protocol's records (spool-layout/wire.c,
 * LAYOUT.md section 10): "KEY SP VALUE" lines with %XX escapes, ended
 * by "end"; and gpus_parse (link/), the daemon's and `gpus`'s reading
 * of the worker's gpus answer.
 *
 * Properties:
 *  - wire_parse consumes a whole record ending in the line "end", or
 *    asks for more (0), or refuses it with a reason; every value is
 *    NUL-terminated at its length and holds no other NUL: a record
 *    with %00 is refused, never read cut short;
 *  - what wire_format writes, wire_parse reads back to the same fields,
 *    and formatting that again gives the same bytes (one canonical
 *    text per record);
 *  - wire_read (a FILE, as the worker reads its spec on stdin) agrees
 *    with wire_parse on the same bytes;
 *  - wire_get_ll agrees with strtoll on the canonical integers;
 *  - gpus_parse gives cards with a UUID and an index in range.
 */
#include <errno.h>
#include <limits.h>

#include "spool.h"
#include "node.h"
#include "fuzz.h"

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

static void check_ll(const struct wire_rec *r)
{
	for (size_t i = 0; i < r->n; i++) {
		const struct wire_field *f = &r->f[i];
		long long v;
		char *end;
		int got;

		if (wire_get(r, f->key) != f->val)
			continue;       /* wire_get_ll reads the first one only */
		got = wire_get_ll(r, f->key, &v) == 0;
		if (got) {
			errno = 0;
			FUZZ_CHECK(f->len > 0 && strlen(f->val) == f->len);
			FUZZ_CHECK(f->val[0] == '-' || (f->val[0] >= '0' && f->val[0] <= '9'));
			FUZZ_CHECK(strtoll(f->val, &end, 10) == v && !errno && !*end);
		} else if (f->len && strlen(f->val) == f->len &&
			   strspn(f->val + (f->val[0] == '-'), "0123456789") == f->len - (f->val[0] == '-') &&
			   f->len > (size_t)(f->val[0] == '-')) {
			errno = 0;
			(void)strtoll(f->val, &end, 10);
			FUZZ_CHECK(errno == ERANGE);    /* digits refused only when too big */
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data, *why = NULL;
	struct wire_rec r = { 0 }, back = { 0 }, rd = { 0 };
	struct gpu_info *g;
	char *text, *text2;
	long used, tl, tl2;
	size_t ng;
	FILE *fp;
	int got;

	used = wire_parse(buf, size, &r, &why);
	FUZZ_CHECK(used >= -1 && used <= (long)size);
	if (used < 0) {
		FUZZ_CHECK(r.n == 0 && r.f == NULL);
		FUZZ_CHECK(errno == ENOMEM || (why && fuzz_one_line(why)));
	} else if (used == 0) {
		FUZZ_CHECK(r.n == 0 && r.f == NULL);
	} else {
		FUZZ_CHECK(used >= 4 && !memcmp(buf + used - 4, "end\n", 4));
		FUZZ_CHECK(used == 4 || buf[used - 5] == '\n');
		/* Every '%' of an accepted record starts an escape. */
		FUZZ_CHECK(!memmem(buf, (size_t)used, "%00", 3));
		for (size_t i = 0; i < r.n; i++) {
			FUZZ_CHECK(r.f[i].key[0] && strspn(r.f[i].key, "abcdefghijklmnopqrstuvwxyz0123456789_") ==
				   strlen(r.f[i].key));
			FUZZ_CHECK(r.f[i].val[r.f[i].len] == '\0');
			FUZZ_CHECK(strlen(r.f[i].val) == r.f[i].len);
		}
		check_ll(&r);

		tl = wire_format(&r, &text);
		FUZZ_CHECK(tl > 0 && (size_t)tl == strlen(text));
		FUZZ_CHECK(wire_parse(text, (size_t)tl, &back, &why) == tl);
		FUZZ_CHECK(rec_eq(&r, &back));
		tl2 = wire_format(&back, &text2);
		FUZZ_CHECK(tl2 == tl && !memcmp(text, text2, (size_t)tl));
		/* A record cut short anywhere is incomplete, never another record. */
		for (long cut = tl - 1; cut >= 0 && cut > tl - 4; cut--) {
			struct wire_rec part = { 0 };

			FUZZ_CHECK(wire_parse(text, (size_t)cut, &part, &why) == 0);
		}
		free(text);
		free(text2);
		wire_free(&back);
	}

	/* wire_read on the same bytes. */
	if (size && (fp = fmemopen((void *)data, size, "r"))) {
		got = wire_read(fp, &rd, &why);
		if (used > 0) {
			FUZZ_CHECK(got == 1 && rec_eq(&r, &rd));
			FUZZ_CHECK(ftell(fp) == used);
		} else if (used < 0) {
			FUZZ_CHECK(got == -1);
		} else {
			FUZZ_CHECK(got == -1);  /* truncated: no "end" line */
		}
		wire_free(&rd);
		fclose(fp);
	}
	wire_free(&r);

	/* The gpus answer: a sequence of records. */
	if (gpus_parse(buf, size, &g, &ng) == 0) {
		for (size_t i = 0; i < ng; i++) {
			FUZZ_CHECK(g[i].uuid && g[i].name);
			FUZZ_CHECK(g[i].index >= 0 && g[i].index <= GPU_INDEX_MAX);
			FUZZ_CHECK(!g[i].lease || g[i].lease[0]);
			(void)gpu_idle(&g[i], 64);
		}
		gpus_free(g, ng);
	} else {
		FUZZ_CHECK(errno == EINVAL || errno == ENOMEM);
	}
	return 0;
}
