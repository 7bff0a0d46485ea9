/*
 * fuzz_ckstream.c - the checkpoint stream as receive-checkpoint reads
 * it (worker/ckpt.c ck_feed; worker.h "ckpt.c"), with no I/O.
 *
 * Properties, for any bytes:
 *  - the parser gives the same events (names, modes, sizes, the data's
 *    bytes) and the same end whether the input comes at once or in
 *    small pieces of random sizes;
 *  - every name it gives is one the receiver may create under its
 *    .part directory: 1 to CK_NAME_MAX bytes, no NUL, not absolute, no
 *    empty, "." or ".." component, at most CK_DEPTH_MAX deep; the first
 *    is one component (the root), every later one has a parent
 *    directory given before it, and no name comes twice;
 *  - a file's data is never more than its declared size, each file is
 *    whole before the next entry, and the sizes never pass TOTAL;
 *  - "end" is accepted at most once, only when the entries and bytes
 *    are the header's and its hex is the SHA-256 of every byte before
 *    the end line (computed here again), and only EOF may follow it;
 *  - a refusal has a one-line reason.
 * An input refused only for its checksum is tried again with the right
 * one written in (libFuzzer cannot find a SHA-256), so the paths past
 * "end" are reached too.
 */
#include "fuzz.h"
#include "../../worker/worker.h"

struct seen {
	char **dirs;            /* names of the directories given */
	size_t ndirs;
	char **all;
	size_t nall;
	uint64_t total, entries, nentries, bytes, fsize, fgot;
	int header, in_file, ended, nend;
	struct sha256 log;      /* of the events as given: chunking must not change it */
};

static int listed(char **v, size_t n, const char *s, size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (strlen(v[i]) == len && !memcmp(v[i], s, len))
			return 1;
	return 0;
}

static void name_ok(struct seen *w, const struct ck_event *ev)
{
	const char *s = ev->name, *slash;
	size_t n = ev->namelen, start = 0, depth = 0;

	FUZZ_CHECK(n >= 1 && n <= CK_NAME_MAX && strlen(s) == n);
	FUZZ_CHECK(s[0] != '/');
	for (size_t i = 0; i <= n; i++) {
		if (i < n && s[i] != '/')
			continue;
		FUZZ_CHECK(i > start);
		FUZZ_CHECK(!(i - start == 1 && s[start] == '.'));
		FUZZ_CHECK(!(i - start == 2 && s[start] == '.' && s[start + 1] == '.'));
		depth++;
		start = i + 1;
	}
	FUZZ_CHECK(depth <= CK_DEPTH_MAX);
	slash = memrchr(s, '/', n);
	if (w->nentries == 0)
		FUZZ_CHECK(!slash);
	else
		FUZZ_CHECK(slash && listed(w->dirs, w->ndirs, s, (size_t)(slash - s)));
	FUZZ_CHECK(!listed(w->all, w->nall, s, n));
	FUZZ_CHECK(ev->mode <= 0777);
}

static void push(char ***v, size_t *n, const char *s)
{
	char **nv = realloc(*v, (*n + 1) * sizeof *nv);

	FUZZ_CHECK(nv != NULL);
	*v = nv;
	FUZZ_CHECK((nv[*n] = strdup(s)) != NULL);
	(*n)++;
}

static void event(struct seen *w, const struct ck_parser *p, const struct ck_event *ev,
		  const uint8_t *data)
{
	unsigned char k = (unsigned char)ev->kind;
	uint64_t nums[3] = { ev->mode, ev->size, ev->entries };

	if (ev->kind == CK_NONE)
		return;
	FUZZ_CHECK(!w->ended);
	if (ev->kind != CK_DATA) {
		sha256_update(&w->log, &k, 1);
		sha256_update(&w->log, nums, sizeof nums);
	}
	switch (ev->kind) {
	case CK_NONE:
		break;
	case CK_HEADER:
		FUZZ_CHECK(!w->header && ev->entries >= 1 && ev->entries <= CK_ENTRIES_MAX);
		w->header = 1;
		w->total = ev->size;
		w->entries = ev->entries;
		break;
	case CK_DIR:
	case CK_FILE:
		FUZZ_CHECK(w->header && !w->in_file && w->nentries < w->entries);
		name_ok(w, ev);
		sha256_update(&w->log, ev->name, ev->namelen);
		push(&w->all, &w->nall, ev->name);
		if (ev->kind == CK_DIR) {
			push(&w->dirs, &w->ndirs, ev->name);
		} else {
			FUZZ_CHECK(ev->size <= w->total - w->bytes);
			w->bytes += ev->size;
			w->fsize = ev->size;
			w->fgot = 0;
			w->in_file = ev->size > 0;
		}
		w->nentries++;
		break;
	case CK_DATA:
		FUZZ_CHECK(w->in_file && ev->len > 0 && ev->len <= w->fsize - w->fgot);
		sha256_update(&w->log, ev->data, ev->len);
		w->fgot += ev->len;
		w->in_file = w->fgot < w->fsize;
		break;
	case CK_END: {
		unsigned char d[32];
		char hex[65];
		struct sha256 s;

		FUZZ_CHECK(w->header && !w->in_file && w->nentries == w->entries && w->bytes == w->total);
		FUZZ_CHECK(p->end_off >= 1);
		sha256_init(&s);
		sha256_update(&s, data, (size_t)p->end_off);
		sha256_final(&s, d);
		sha256_hex(d, hex);
		FUZZ_CHECK(!strcmp(hex, p->sum));
		FUZZ_CHECK(!memcmp(data + p->end_off, "end ", 4) && !memcmp(data + p->end_off + 4, hex, 64) &&
			   data[p->end_off + 68] == '\n');
		w->ended = 1;
		w->nend++;
		break;
	}
	}
}

struct run {
	int complete, bad, sum_bad;
	uint64_t end_off, off;
	unsigned char log[32];
	char *why;
};

/* Feed DATA in pieces: all at once (STEP 0) or of 1 to STEP bytes
 * chosen by a little PRNG seeded from the size. */
static void feed(const uint8_t *data, size_t size, size_t step, struct run *out)
{
	struct ck_parser p;
	struct seen w = { 0 };
	uint32_t rng = (uint32_t)size * 2654435761u + 1;
	size_t off = 0;

	ck_init(&p);
	sha256_init(&w.log);
	while (off < size) {
		size_t len = size - off, k;

		if (step) {
			rng = rng * 1103515245u + 12345u;
			k = 1 + (rng >> 16) % step;
			len = k < len ? k : len;
		}
		while (len) {
			struct ck_event ev;
			long n = ck_feed(&p, data + off, len, &ev);

			if (n < 0)
				goto done;
			FUZZ_CHECK(n > 0 && (size_t)n <= len);
			event(&w, &p, &ev, data);
			off += (size_t)n;
			len -= (size_t)n;
		}
	}
done:
	FUZZ_CHECK(!p.bad || (p.why && fuzz_one_line(p.why)));
	FUZZ_CHECK(p.bad || off == size);
	/* Whole exactly when the end came, nothing refused after it. */
	FUZZ_CHECK(ck_complete(&p) == (w.nend == 1 && !p.bad));
	FUZZ_CHECK(w.nend <= 1);
	if (p.sum_bad)
		FUZZ_CHECK(p.bad && w.header && w.nentries == w.entries && w.bytes == w.total);
	out->complete = ck_complete(&p);
	out->bad = p.bad;
	out->sum_bad = p.sum_bad;
	out->end_off = p.end_off;
	out->off = p.off;
	out->why = p.why ? strdup(p.why) : NULL;
	sha256_final(&w.log, out->log);
	for (size_t i = 0; i < w.ndirs; i++)
		free(w.dirs[i]);
	for (size_t i = 0; i < w.nall; i++)
		free(w.all[i]);
	free(w.dirs);
	free(w.all);
	ck_free(&p);
}

static void same(const struct run *a, const struct run *b)
{
	FUZZ_CHECK(a->complete == b->complete && a->bad == b->bad && a->sum_bad == b->sum_bad);
	FUZZ_CHECK(a->off == b->off);
	FUZZ_CHECK(!memcmp(a->log, b->log, 32));
	FUZZ_CHECK((!a->why && !b->why) || (a->why && b->why && !strcmp(a->why, b->why)));
}

static void check(const uint8_t *data, size_t size)
{
	struct run a, b;

	feed(data, size, 0, &a);
	feed(data, size, 7, &b);
	same(&a, &b);
	/* Refused only for its checksum: once more with the right one. */
	if (a.sum_bad && a.end_off + 68 <= size) {
		uint8_t *fixed = malloc(size);
		struct sha256 s;
		unsigned char d[32];
		char hex[65];
		struct run c;

		FUZZ_CHECK(fixed != NULL);
		memcpy(fixed, data, size);
		sha256_init(&s);
		sha256_update(&s, data, (size_t)a.end_off);
		sha256_final(&s, d);
		sha256_hex(d, hex);
		memcpy(fixed + a.end_off + 4, hex, 64);
		feed(fixed, size, 0, &c);
		FUZZ_CHECK(!c.sum_bad);
		FUZZ_CHECK(c.end_off == a.end_off);
		/* Whole iff nothing follows the end line. */
		FUZZ_CHECK(c.complete == (size == a.end_off + 69));
		free(c.why);
		free(fixed);
	}
	free(a.why);
	free(b.why);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check(data, size);
	return 0;
}
