/*
 * index.c - SPOOL/queued.idx: a cache of queued/ for `cardbaton status`
 * (LAYOUT.md §11), its format, its reader (index_read) and its writer
 * (index_write).  What a line holds is status's view of the record
 * (view.c); the daemon runs the writer in a child (indexd.c).
 *
 * Why.  `status` on 100,000 queued jobs read and parsed 100,000 JSON
 * records (1.4 s).  The daemon, the only writer of queued/, keeps a
 * summary of it in one file: per record what status shows -- the
 * table's cells as status would make them, and the exact --json
 * element -- in lines that are split, not parsed as JSON.
 *
 * Freshness without reading records.  Every entry made, renamed or
 * removed in queued/ changes the directory's ctime and mtime.  Those
 * come from the kernel's coarse clock (a tick of up to ~10 ms), so two
 * changes within one tick can leave the same times: the writer
 * indexes queued/ only once its ctime is INDEX_SETTLE_MS old, and
 * checks that it did not change while the records were read; any later
 * change then moves the times.  The reader fstat()s queued/: the same
 * device, inode, ctime and mtime as in the index, and the index is
 * queued/ as it is now; anything else, and it lists and reads queued/
 * as it always did.  (mtime alone could be put back with touch -d;
 * ctime cannot be set.)  A record rewritten in place rather than
 * replaced by rename (against LAYOUT.md §3) changes no directory: the
 * one thing the index cannot see.
 *
 * done/.  A crash between a record's two steps may leave a queued record and a
 * done/ copy of one job (LAYOUT.md §6), and readers keep the higher
 * rev.  The index notes which of its jobs have a done/ copy, for done/
 * as it was then (its key, when settled); while done/ is unchanged a
 * reader need not look there for each job.
 *
 * The writer (index_write) runs in a child of the daemon (index_tick,
 * indexd.c), so the loop never waits for it, and reuses the lines of the current
 * index for files that are unchanged (same name, inode and ctime, that
 * ctime settled when the line was made).  It is a cache: a failure to
 * write it is no failure of the daemon, and a reader that finds it
 * missing, stale, malformed or of another version reads queued/.
 *
 * Format (text; fields separated by one space; strings with bytes <=
 * 0x20, 0x7f and '%' as %XX, NULL as "%-"; never %00 or %0A, which a
 * reader refuses).  A header, a table section
 * (all `status` reads for its table) and a JSON section (read too for
 * --json):
 *
 *   cardbaton-queued-index 4 VERSION
 *   queued DEV INO CTIME_NS MTIME_NS
 *   done DEV INO CTIME_NS MTIME_NS          or "done -" (not known)
 *   sections TABLE_BYTES JSON_BYTES
 *   j NAME INO CTIME DUP REV ID PRIO STATE OWNER SINCE NATT NODE GPUS JNAME COMMAND
 *   r NAME INO CTIME DUP                    one line per entry of queued/
 *   {"id":"42",...}                          per entry: its --json element,
 *   -                                        or "-" for an "r" entry
 *   end COUNT
 *
 * OWNER NODE GPUS JNAME COMMAND are the table's cells as status_view_of
 * makes them (status prints them as they are, and filters by OWNER:
 * --user, --mine; only AGE is computed, from SINCE; OWNER is "%-" for
 * a record without one); the element is verbatim (cJSON escapes every control
 * character: it holds no LF).  "r": not summarised (a stray entry, an
 * unreadable record): the reader reads it as without the index, with
 * the same warning.  DUP is 1 when done/ held a record of the ID.
 * Entries are in name order (dispatch order).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "index.h"
#include "names.h"
#include "store.h"

/* 3: the element has "begin"; 4: the line has OWNER (an index of an
 * earlier version is read as stale; its lines are never kept). */
#define MAGIC "cardbaton-queued-index 4 " CARDBATON_VERSION
#define INDEX_CAP ((size_t)1 << 40)     /* never a limit in practice */
#define DONE_PROBE_MAX 4096             /* more jobs than this: list done/ */

int index_key_of(int dirfd, struct index_key *k)
{
	struct stat st;

	if (fstat(dirfd, &st) < 0)
		return -1;
	k->dev = (unsigned long long)st.st_dev;
	k->ino = (unsigned long long)st.st_ino;
	k->ctime = (long long)st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec;
	k->mtime = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
	return 0;
}

int index_key_eq(const struct index_key *a, const struct index_key *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->ctime == b->ctime && a->mtime == b->mtime;
}

static long long real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A change at CTIME_NS is far enough in the past that any later one
 * gets another time. */
static int settled(long long ctime_ns, long long now_ns)
{
	return now_ns - ctime_ns >= INDEX_SETTLE_MS * 1000000LL;
}

long long index_settle_left(long long ctime_ns)
{
	long long left = ctime_ns + INDEX_SETTLE_MS * 1000000LL - real_ns();

	return left > 0 ? left / 1000000 + 1 : 0;
}

/* ---- writing lines ------------------------------------------------------- */

static int needs_escape(unsigned char c)
{
	return c <= 0x20 || c == 0x7f || c == '%';
}

/* " " then S escaped (NULL as "%-"). */
static int put_str(struct sbuf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *p = (const unsigned char *)s, *run;

	if (sbuf_add(b, " ", 1) < 0)
		return -1;
	if (!s)
		return sbuf_add(b, "%-", 2);
	for (run = p; *p; p++) {
		char e[3];

		if (!needs_escape(*p))
			continue;
		e[0] = '%';
		e[1] = hex[*p >> 4];
		e[2] = hex[*p & 15];
		if (sbuf_add(b, run, (size_t)(p - run)) < 0 || sbuf_add(b, e, 3) < 0)
			return -1;
		run = p + 1;
	}
	return sbuf_add(b, run, (size_t)(p - run));
}

static int put_ll(struct sbuf *b, long long v)
{
	return sbuf_addf(b, " %lld", v);
}

/* "K NAME INO CTIME DUP" of a line. */
static int put_head(struct sbuf *b, int raw, const char *name, long long ino, long long ctime,
		    int dup)
{
	return sbuf_add(b, raw ? "r" : "j", 1) < 0 || put_str(b, name) < 0 || put_ll(b, ino) < 0 ||
	       put_ll(b, ctime) < 0 || put_ll(b, dup) < 0 ? -1 : 0;
}

/* A record: its table line into T, its --json element into J. */
static int put_job(struct sbuf *t, struct sbuf *j, const char *name, long long ino,
		   long long ctime, const struct status_view *v)
{
	if (put_head(t, 0, name, ino, ctime, 0) < 0 || put_ll(t, v->rev) < 0 ||
	    put_ll(t, v->id) < 0 || put_ll(t, v->priority) < 0 ||
	    put_str(t, job_state_name(v->state)) < 0 || put_str(t, v->owner) < 0 ||
	    put_ll(t, v->since) < 0 ||
	    put_ll(t, v->natt) < 0 || put_str(t, v->node) < 0 || put_str(t, v->gpus) < 0 ||
	    put_str(t, v->name) < 0 || put_str(t, v->command) < 0 || sbuf_add(t, "\n", 1) < 0)
		return -1;
	return sbuf_add(j, v->json, strlen(v->json)) < 0 || sbuf_add(j, "\n", 1) < 0 ? -1 : 0;
}

/* What is not summarised: read by the reader as without the index. */
static int put_raw(struct sbuf *t, struct sbuf *j, const char *name, long long ino,
		   long long ctime)
{
	return put_head(t, 1, name, ino, ctime, 0) < 0 || sbuf_add(t, "\n", 1) < 0 ||
	       sbuf_add(j, "-\n", 2) < 0 ? -1 : 0;
}

static int put_key(struct sbuf *b, const char *what, const struct index_key *k)
{
	return sbuf_addf(b, "%s %llu %llu %lld %lld\n", what, k->dev, k->ino, k->ctime, k->mtime);
}

/* ---- parsing --------------------------------------------------------------- */

/* A line being split: P the next field (NULL after the last), END its LF. */
struct cur {
	char *p, *end;
};

/* The next field [*s, *s + *n): -1 when the line has ended. */
static int field(struct cur *c, char **s, size_t *n)
{
	char *q;

	if (!c->p)
		return -1;
	q = memchr(c->p, ' ', (size_t)(c->end - c->p));
	if (!q)
		q = c->end;
	*s = c->p;
	*n = (size_t)(q - c->p);
	c->p = q == c->end ? NULL : q + 1;
	return 0;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 :
	       c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/*
 * The next field, a decimal ('-' or not, then 1 to 19 digits) in [LO,
 * HI], into *OUT.  0 or -1.  Found and decoded in one pass, as the
 * strings below: an index of 100,000 lines is 1.5 million fields.
 */
static int fld_ll(struct cur *c, long long lo, long long hi, long long *out)
{
	const char *q = c->p, *d, *end = c->end;
	unsigned long long v = 0;
	long long x;
	int neg;

	if (!q)
		return -1;
	neg = q < end && *q == '-';
	q += neg;
	for (d = q; q < end && (unsigned char)(*q - '0') < 10; q++)
		v = v * 10 + (unsigned long long)(*q - '0');
	/* 19 digits never overflow an unsigned long long. */
	if (q == d || q - d > 19 || (q < end && *q != ' '))
		return -1;
	c->p = q == end ? NULL : (char *)q + 1;
	if (neg) {
		if (v > (unsigned long long)LLONG_MAX + 1)
			return -1;
		x = v == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)v;
	} else {
		if (v > (unsigned long long)LLONG_MAX)
			return -1;
		x = (long long)v;
	}
	if (x < lo || x > hi)
		return -1;
	*out = x;
	return 0;
}

/* The next field as a string: "%-" is NULL; %XX decoded (not %00, nor
 * %0A: no cell the writer makes holds a line end, as the views show
 * control characters as '?' or $'...'; found by fuzz_index); any
 * other byte <= 0x20, 0x7f or '%' makes it malformed.  WRITE: decoded
 * in place and NUL-terminated (the separator after it is overwritten),
 * *OUT set; otherwise only checked.  0 or -1. */
static int fld_str(struct cur *c, int write, const char **out)
{
	char *s = c->p, *q = s, *w = s, *end = c->end;

	if (!s)
		return -1;
	if (end - s >= 2 && s[0] == '%' && s[1] == '-' && (end - s == 2 || s[2] == ' ')) {
		c->p = end - s == 2 ? NULL : s + 3;
		if (write)
			*out = NULL;
		return 0;
	}
	for (; q < end && *q != ' '; q++) {
		unsigned char ch = (unsigned char)*q;

		if (ch == '%') {
			int hi, lo;

			/* Two hex digits, in the field (neither is a space). */
			if (end - q < 3)
				return -1;
			hi = hexval(q[1]);
			lo = hexval(q[2]);
			if (hi < 0 || lo < 0 || (hi == 0 && (lo == 0 || lo == 10)))
				return -1;
			ch = (unsigned char)(hi << 4 | lo);
			q += 2;
		} else if (needs_escape(ch)) {
			return -1;
		}
		if (write)
			*w++ = (char)ch;
	}
	c->p = q == end ? NULL : q + 1;
	if (write) {
		*w = '\0';
		*out = s;
	}
	return 0;
}

static int fld_key(struct cur *c, struct index_key *k)
{
	long long dev, ino;

	if (fld_ll(c, 0, LLONG_MAX, &dev) < 0 || fld_ll(c, 0, LLONG_MAX, &ino) < 0 ||
	    fld_ll(c, LLONG_MIN, LLONG_MAX, &k->ctime) < 0 ||
	    fld_ll(c, LLONG_MIN, LLONG_MAX, &k->mtime) < 0 || c->p)
		return -1;
	k->dev = (unsigned long long)dev;
	k->ino = (unsigned long long)ino;
	return 0;
}

/* A job state word as the next field (not written to). */
static int fld_state(struct cur *c, enum job_state *out)
{
	char *s;
	size_t n;

	if (field(c, &s, &n) < 0)
		return -1;
	for (int i = 0; i < JS_N; i++) {
		const char *w = job_state_name((enum job_state)i);

		if (w[0] == s[0] && strlen(w) == n && !memcmp(w, s, n)) {
			*out = (enum job_state)i;
			return 0;
		}
	}
	return -1;
}

/* The word W as the next field. */
static int fld_is(struct cur *c, const char *w)
{
	char *s;
	size_t n;

	return field(c, &s, &n) == 0 && n == strlen(w) && !memcmp(s, w, n) ? 0 : -1;
}

/* The header (four lines) at BUF[0..LEN): IX's keys; *HLEN its length,
 * *TLEN and *JLEN those of the two sections after it. */
static int parse_header(char *buf, size_t len, struct spool_index *ix, size_t *hlen,
			size_t *tlen, size_t *jlen)
{
	char *p = buf, *end = buf + len;
	long long t, j;

	for (int line = 0; line < 4; line++) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		struct cur c = { p, nl };

		if (!nl)
			return -1;
		switch (line) {
		case 0:
			if ((size_t)(nl - p) != strlen(MAGIC) || memcmp(p, MAGIC, strlen(MAGIC)))
				return -1;
			break;
		case 1:
			if (fld_is(&c, "queued") < 0 || fld_key(&c, &ix->queued) < 0)
				return -1;
			break;
		case 2:
			if (fld_is(&c, "done") < 0)
				return -1;
			if (c.p && c.p + 1 == nl && *c.p == '-')
				ix->has_done = 0;
			else if (fld_key(&c, &ix->done) == 0)
				ix->has_done = 1;
			else
				return -1;
			break;
		default:
			if (fld_is(&c, "sections") < 0 || fld_ll(&c, 0, LLONG_MAX / 4, &t) < 0 ||
			    fld_ll(&c, 0, LLONG_MAX / 4, &j) < 0 || c.p)
				return -1;
		}
		p = nl + 1;
	}
	*hlen = (size_t)(p - buf);
	*tlen = (size_t)t;
	*jlen = (size_t)j;
	return 0;
}

/* One table line into E.  WRITE: strings decoded in place and
 * NUL-terminated; otherwise only checked (the writer copies the line
 * from *AFTER_DUP on, when that is not NULL). */
static int parse_ent(struct cur *c, int write, struct index_ent *e, char **after_dup)
{
	char *kind;
	size_t kn;
	long long prio, dup;

	memset(e, 0, sizeof *e);
	if (field(c, &kind, &kn) < 0 || kn != 1 || (*kind != 'j' && *kind != 'r'))
		return -1;
	/* The name is decoded even when !WRITE: it comes before DUP. */
	if (fld_str(c, 1, &e->name) < 0 || !e->name ||
	    name_parse_queued(e->name, &prio, &e->id) < 0)
		return -1;
	if (fld_ll(c, 0, LLONG_MAX, &e->ino) < 0 || fld_ll(c, 0, LLONG_MAX, &e->ctime) < 0 ||
	    fld_ll(c, 0, 1, &dup) < 0)
		return -1;
	e->in_done = (int)dup;
	if (after_dup)
		*after_dup = c->p;
	if (*kind == 'r') {
		e->raw = 1;
		return c->p ? -1 : 0;
	}
	if (fld_ll(c, 0, LLONG_MAX, &e->v.rev) < 0 || fld_ll(c, 1, SEQ_MAX, &e->v.id) < 0 ||
	    fld_ll(c, LLONG_MIN, LLONG_MAX, &e->v.priority) < 0 ||
	    fld_state(c, &e->v.state) < 0 || fld_str(c, write, &e->v.owner) < 0 ||
	    fld_ll(c, LLONG_MIN, LLONG_MAX, &e->v.since) < 0 ||
	    fld_ll(c, 0, LLONG_MAX, &e->v.natt) < 0 ||
	    fld_str(c, write, &e->v.node) < 0 || fld_str(c, write, &e->v.gpus) < 0 ||
	    fld_str(c, write, &e->v.name) < 0 || fld_str(c, write, &e->v.command) < 0 || c->p)
		return -1;
	if (write && (!e->v.node || !e->v.gpus || !e->v.name || !e->v.command))
		return -1;
	return 0;
}

/*
 * A large buffer (the index read, its entries): mapped on 2 MiB
 * boundaries, with huge pages where the system gives them on request
 * (MADV_HUGEPAGE).  Reading a 40 MB index into small pages is 10,000
 * page faults; its 100,000 entries are 17 MB more.  *MAPPED: the
 * mapping's size (buf_free), 0 when it is malloc'd.
 */
#define HUGE_PAGE ((size_t)2 << 20)

static char *buf_alloc(size_t n, size_t *mapped)
{
	*mapped = 0;
	if (n >= 2 * HUGE_PAGE && n <= SIZE_MAX / 2) {
		size_t m = (n + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1), len = m + HUGE_PAGE;
		char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p != MAP_FAILED) {
			char *a = (char *)(((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));

			if (a > p)
				munmap(p, (size_t)(a - p));
			if (p + len > a + m)
				munmap(a + m, (size_t)(p + len - (a + m)));
			if (madvise(a, m, MADV_HUGEPAGE) < 0) {
				/* no transparent huge pages: small ones then */
			}
			*mapped = m;
			return a;
		}
	}
	return malloc(n);
}

static void buf_free(void *p, size_t mapped)
{
	if (mapped)
		munmap(p, mapped);
	else
		free(p);
}

/* Where the writer finds the lines of the current index. */
struct lines {
	char **after_dup;       /* table line i, after its DUP */
	char **json;            /* JSON line i */
};

/*
 * BUF[0..LEN): the header and the table section, and WITH_JSON the
 * JSON section and the end line too (then exactly the whole file).
 * L, when not NULL, gets where each line is (and nothing is written).
 */
static int parse(char *buf, size_t len, int write, int with_json, struct spool_index *ix,
		 struct lines *l)
{
	size_t hlen, tlen, jlen, cap = 0;
	char *p, *end;
	int saved = EINVAL;

	memset(ix, 0, sizeof *ix);
	if (l)
		memset(l, 0, sizeof *l);
	if (parse_header(buf, len, ix, &hlen, &tlen, &jlen) < 0 || tlen > len - hlen ||
	    (with_json && jlen > len - hlen - tlen))
		goto fail;
	/* The table section: one line per entry of queued/ (counted first:
	 * the entries in one allocation). */
	for (p = buf + hlen, end = p + tlen; p < end && (p = memchr(p, '\n', (size_t)(end - p))); p++)
		cap++;
	if (cap > SIZE_MAX / sizeof *ix->e ||
	    !(ix->e = l ? malloc((cap ? cap : 1) * sizeof *ix->e)
			: (void *)buf_alloc((cap ? cap : 1) * sizeof *ix->e, &ix->e_mapped)) ||
	    (l && !(l->after_dup = malloc((cap ? cap : 1) * sizeof *l->after_dup)))) {
		saved = ENOMEM;
		goto fail;
	}
	ix->ascending = 1;
	for (p = buf + hlen; p < end; ) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		struct cur c = { p, nl };
		struct index_ent *e = &ix->e[ix->n];
		char *ad;

		if (!nl || parse_ent(&c, write, e, &ad) < 0)
			goto fail;
		if (l)
			l->after_dup[ix->n] = ad;
		if (ix->n && e[-1].id >= e->id)
			ix->ascending = 0;
		ix->n_in_done += (size_t)e->in_done;
		ix->n++;
		p = nl + 1;
	}
	if (!with_json)
		return 0;
	/* The JSON section: the element of each entry, "-" for a raw one. */
	if (l && !(l->json = malloc((ix->n ? ix->n : 1) * sizeof *l->json))) {
		saved = ENOMEM;
		goto fail;
	}
	end = p + jlen;
	for (size_t i = 0; i < ix->n; i++) {
		char *nl = p < end ? memchr(p, '\n', (size_t)(end - p)) : NULL;
		size_t n = nl ? (size_t)(nl - p) : 0;

		if (!nl || (ix->e[i].raw ? n != 1 || *p != '-' :
			    n < 2 || *p != '{' || nl[-1] != '}' || memchr(p, '\0', n)))
			goto fail;
		if (l)
			l->json[i] = p;
		if (write && !ix->e[i].raw) {
			*nl = '\0';
			ix->e[i].v.json = p;
		}
		p = nl + 1;
	}
	{
		char *nl = memchr(p, '\n', (size_t)(buf + len - p));
		struct cur c = { p, nl };
		long long count;

		if (p != end || !nl || nl + 1 != buf + len || fld_is(&c, "end") < 0 ||
		    fld_ll(&c, 0, LLONG_MAX, &count) < 0 || c.p || (size_t)count != ix->n)
			goto fail;
	}
	return 0;
fail:
	if (ix->e)
		buf_free(ix->e, ix->e_mapped);
	if (l) {
		free(l->after_dup);
		free(l->json);
		memset(l, 0, sizeof *l);
	}
	memset(ix, 0, sizeof *ix);
	errno = saved;
	return -1;
}

int index_parse(char *buf, size_t len, int with_json, struct spool_index *ix)
{
	return parse(buf, len, 1, with_json, ix, NULL);
}

void index_free(struct spool_index *ix)
{
	if (ix->e)
		buf_free(ix->e, ix->e_mapped);
	if (ix->buf)
		buf_free(ix->buf, ix->mapped);
	memset(ix, 0, sizeof *ix);
}

static int pread_all(int fd, char *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = pread(fd, buf + got, n - got, (off_t)got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

/* SPOOL/queued.idx read: its header and table section, and WITH_JSON
 * all of it, into IX->buf.  0, or -1: not usable. */
static int read_index(struct spool *sp, int with_json, struct spool_index *ix)
{
	struct spool_index h;
	struct stat st;
	char head[1024];
	size_t hlen, tlen, jlen, need, mapped;
	char *buf;
	int fd, saved;

	fd = openat(sp->fd, INDEX_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    pread_all(fd, head, (size_t)st.st_size < sizeof head ? (size_t)st.st_size : sizeof head) < 0 ||
	    parse_header(head, (size_t)st.st_size < sizeof head ? (size_t)st.st_size : sizeof head,
			 &h, &hlen, &tlen, &jlen) < 0 ||
	    (unsigned long long)st.st_size < (unsigned long long)hlen + tlen + jlen) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	need = with_json ? (size_t)st.st_size : hlen + tlen;
	if (!(buf = buf_alloc(need + 1, &mapped))) {
		close(fd);
		errno = ENOMEM;
		return -1;
	}
	if (pread_all(fd, buf, need) < 0) {
		saved = errno;
		buf_free(buf, mapped);
		close(fd);
		errno = saved == ENOMEM ? ENOMEM : EINVAL;
		return -1;
	}
	close(fd);
	buf[need] = '\0';
	if (index_parse(buf, need, with_json, ix) < 0) {
		saved = errno;
		buf_free(buf, mapped);
		errno = saved;
		return -1;
	}
	ix->buf = buf;
	ix->len = need;
	ix->mapped = mapped;
	return 0;
}

int index_read(struct spool *sp, int with_json, struct spool_index *ix)
{
	struct index_key q, d;

	/* Whatever the failure (a hostile size too), the reader reads
	 * queued/ instead, as without an index. */
	memset(ix, 0, sizeof *ix);
	if (read_index(sp, with_json, ix) < 0)
		return 0;
	/* The moment that counts: queued/ is now what the index says. */
	if (index_key_of(sp->dir[SD_QUEUED], &q) < 0 || !index_key_eq(&q, &ix->queued)) {
		index_free(ix);
		return 0;
	}
	ix->done_fresh = ix->has_done && index_key_of(sp->dir[SD_DONE], &d) == 0 &&
			 index_key_eq(&d, &ix->done);
	return 1;
}

/* ---- the writer ------------------------------------------------------------ */

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

static long long ctime_of(const struct stat *st)
{
	return (long long)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec;
}

/* queued/ names of the grammar, sorted; strays included (not '.'). */
static int list_queued(struct spool *sp, char ***names, size_t *n)
{
	char **v;
	size_t k = 0;

	if (spool_list(sp, SD_QUEUED, &v, n) < 0)
		return -1;
	for (size_t i = 0; i < *n; i++) {
		long long prio, id;

		if (name_parse_queued(v[i], &prio, &id) == 0)
			v[k++] = v[i];
		else
			free(v[i]);
	}
	*n = k;
	*names = v;
	return 0;
}

/* For each of the N IDs, DUP[i] = 1 when done/ holds a record of it. */
static int find_done(struct spool *sp, const long long *ids, size_t n, int *dup)
{
	char **names;
	size_t nn, k = 0;
	long long *done;

	if (n <= DONE_PROBE_MAX) {
		for (size_t i = 0; i < n; i++) {
			char *pn = name_plain(ids[i]);

			if (!pn)
				return -1;
			dup[i] = faccessat(sp->dir[SD_DONE], pn, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
			if (!dup[i] && errno != ENOENT) {
				free(pn);
				return -1;
			}
			free(pn);
		}
		return 0;
	}
	/* Many jobs: one listing of done/ beats a lookup each. */
	if (spool_list(sp, SD_DONE, &names, &nn) < 0)
		return -1;
	if (!(done = malloc((nn ? nn : 1) * sizeof *done))) {
		spool_list_free(names, nn);
		return -1;
	}
	for (size_t i = 0; i < nn; i++)
		if (name_parse_plain(names[i], &done[k]) == 0)
			k++;
	spool_list_free(names, nn);
	if (k)
		qsort(done, k, sizeof *done, cmp_ll);
	for (size_t i = 0; i < n; i++)
		dup[i] = k && bsearch(&ids[i], done, k, sizeof *done, cmp_ll) != NULL;
	free(done);
	return 0;
}

/* The current index (parsed, not decoded), for its lines. */
struct old {
	char *buf;
	struct spool_index ix;
	struct lines l;
	int ok;
};

static void old_load(struct spool *sp, struct old *o)
{
	size_t len;

	memset(o, 0, sizeof *o);
	if (read_capped(sp->fd, INDEX_NAME, INDEX_CAP, &o->buf, &len) < 0)
		return;
	o->ok = parse(o->buf, len, 0, 1, &o->ix, &o->l) == 0;
}

static void old_free(struct old *o)
{
	free(o->ix.e);
	free(o->l.after_dup);
	free(o->l.json);
	free(o->buf);
}

/* Old entry I again (DUP 0: set_dup fills it in) into T and J. */
static int old_line(const struct old *o, size_t i, struct sbuf *t, struct sbuf *j)
{
	const struct index_ent *e = &o->ix.e[i];
	const char *je = strchr(o->l.json[i], '\n') + 1;

	if (put_head(t, e->raw, e->name, e->ino, e->ctime, 0) < 0)
		return -1;
	if (!e->raw) {
		const char *te = strchr(o->l.after_dup[i], '\n');

		if (sbuf_add(t, " ", 1) < 0 ||
		    sbuf_add(t, o->l.after_dup[i], (size_t)(te - o->l.after_dup[i])) < 0)
			return -1;
	}
	return sbuf_add(t, "\n", 1) < 0 ||
	       sbuf_add(j, o->l.json[i], (size_t)(je - o->l.json[i])) < 0 ? -1 : 0;
}

/*
 * The lines of one entry of queued/ into T and J.  1 done, 0 queued/
 * changed under us, -1 error.
 */
static int index_one(struct spool *sp, const char *name, const struct old *o, size_t *oi,
		     long long now, struct sbuf *t, struct sbuf *jb)
{
	struct stat st, st2;
	struct status_view v;
	struct job j;
	char *buf;
	size_t len;
	long long ct;
	int qfd = sp->dir[SD_QUEUED], c = 1, r;

	if (fstatat(qfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -1;
	ct = ctime_of(&st);
	/* The current index's line, when the file is the one it was made
	 * of: the same inode and ctime (settled when the line was made; a
	 * new file, even on a reused inode, has a later ctime). */
	while (o->ok && *oi < o->ix.n && (c = strcmp(o->ix.e[*oi].name, name)) < 0)
		(*oi)++;
	if (o->ok && *oi < o->ix.n && c == 0) {
		const struct index_ent *e = &o->ix.e[*oi];

		if (e->ctime && e->ctime == ct && (unsigned long long)e->ino == (unsigned long long)st.st_ino)
			return old_line(o, *oi, t, jb) < 0 ? -1 : 1;
	}
	if (!settled(ct, now))
		ct = 0;         /* not to be reused: it may change within the tick */
	if (!S_ISREG(st.st_mode))
		return put_raw(t, jb, name, (long long)st.st_ino, ct) < 0 ? -1 : 1;
	if (read_capped(qfd, name, RECORD_MAX, &buf, &len) < 0) {
		if (errno == ENOENT)
			return 0;
		if (errno == ENOMEM)
			return -1;
		return put_raw(t, jb, name, (long long)st.st_ino, ct) < 0 ? -1 : 1;
	}
	r = job_from_json(buf, len, &j, NULL);
	free(buf);
	/* What was read is the file at (inode, ctime)? */
	if (fstatat(qfd, name, &st2, AT_SYMLINK_NOFOLLOW) < 0 || st2.st_ino != st.st_ino ||
	    ctime_of(&st2) != ctime_of(&st)) {
		if (r == 0)
			job_free(&j);
		return 0;
	}
	if (r < 0)
		return put_raw(t, jb, name, (long long)st.st_ino, ct) < 0 ? -1 : 1;
	r = status_view_of(&j, 1, &v);
	/* cJSON escapes control characters: never an LF, but check. */
	if (r == 0)
		r = strchr(v.json, '\n') ? put_raw(t, jb, name, (long long)st.st_ino, ct)
					 : put_job(t, jb, name, (long long)st.st_ino, ct, &v);
	status_view_free(&v);
	job_free(&j);
	return r < 0 ? -1 : 1;
}

/* DUP (the fifth field) of each line of T. */
static void set_dup(struct sbuf *t, const size_t *line, size_t n, const int *dup)
{
	for (size_t i = 0; i < n; i++) {
		char *p = t->s + line[i];

		for (int k = 0; k < 4; k++)
			p = strchr(p, ' ') + 1;
		*p = dup[i] ? '1' : '0';
	}
}

int index_write(struct spool *sp)
{
	struct index_key q0, q1, d0, d1;
	struct sbuf t = { 0 }, jb = { 0 }, out = { 0 };
	struct old o;
	char **names = NULL;
	size_t nnames = 0, oi = 0, n = 0, *line = NULL;
	long long now = real_ns(), *ids = NULL;
	int *dup = NULL, r = -1, saved = 0, done_known;

	if (index_key_of(sp->dir[SD_QUEUED], &q0) < 0 || index_key_of(sp->dir[SD_DONE], &d0) < 0)
		return -1;
	if (!settled(q0.ctime, now))
		return 0;
	done_known = settled(d0.ctime, now);
	old_load(sp, &o);
	if (o.ok && index_key_eq(&o.ix.queued, &q0) && o.ix.has_done == done_known &&
	    (!done_known || index_key_eq(&o.ix.done, &d0))) {
		old_free(&o);
		return 1;       /* already current */
	}
	if (sbuf_add(&t, "", 0) < 0 || sbuf_add(&jb, "", 0) < 0)
		goto fail;
	if (o.ok && index_key_eq(&o.ix.queued, &q0)) {
		/* queued/ is as the current index says: its lines as they are. */
		if (!(line = malloc((o.ix.n ? o.ix.n : 1) * sizeof *line)))
			goto fail;
		for (size_t i = 0; i < o.ix.n; i++) {
			line[n++] = t.len;
			if (old_line(&o, i, &t, &jb) < 0)
				goto fail;
		}
	} else {
		if (list_queued(sp, &names, &nnames) < 0)
			goto fail;
		if (!(line = malloc((nnames ? nnames : 1) * sizeof *line)))
			goto fail;
		for (size_t i = 0; i < nnames; i++) {
			int k;

			line[n] = t.len;
			if ((k = index_one(sp, names[i], &o, &oi, now, &t, &jb)) < 0)
				goto fail;
			if (k == 0) {
				r = 0;          /* changed while it was read */
				goto out;
			}
			n++;
		}
	}
	if (!(ids = malloc((n ? n : 1) * sizeof *ids)) || !(dup = calloc(n ? n : 1, sizeof *dup)))
		goto fail;
	for (size_t i = 0; i < n; i++) {
		char *nm = t.s + line[i] + 2, *sp2 = strchr(nm, ' ');   /* "K NAME ..." */
		long long prio;

		*sp2 = '\0';
		if (name_parse_queued(nm, &prio, &ids[i]) < 0)
			ids[i] = 0;
		*sp2 = ' ';
	}
	if (done_known && find_done(sp, ids, n, dup) < 0)
		goto fail;
	set_dup(&t, line, n, dup);
	/* Nothing moved while it was read? */
	if (index_key_of(sp->dir[SD_QUEUED], &q1) < 0 || index_key_of(sp->dir[SD_DONE], &d1) < 0)
		goto fail;
	if (!index_key_eq(&q0, &q1)) {
		r = 0;
		goto out;
	}
	if (done_known && !index_key_eq(&d0, &d1))
		done_known = 0;         /* the DUP marks may be out of date */
	if (sbuf_add(&out, MAGIC "\n", strlen(MAGIC) + 1) < 0 || put_key(&out, "queued", &q0) < 0 ||
	    (done_known ? put_key(&out, "done", &d0) : sbuf_add(&out, "done -\n", 7)) < 0 ||
	    sbuf_addf(&out, "sections %zu %zu\n", t.len, jb.len) < 0 ||
	    sbuf_add(&out, t.s, t.len) < 0 || sbuf_add(&out, jb.s, jb.len) < 0 ||
	    sbuf_addf(&out, "end %zu\n", n) < 0)
		goto fail;
	if (atomic_write(sp->dir[SD_TMP], sp->fd, INDEX_NAME, out.s, out.len, sp->fmode) < 0)
		goto fail;
	r = 1;
	goto out;
fail:
	saved = errno ? errno : ENOMEM;
	r = -1;
out:
	if (names)
		spool_list_free(names, nnames);
	free(line);
	free(ids);
	free(dup);
	sbuf_free(&t);
	sbuf_free(&jb);
	sbuf_free(&out);
	old_free(&o);
	if (r < 0)
		errno = saved;
	return r;
}

