/*
 * ckpt.c - a job's checkpoint copied from one node to another (issue
 * 35): send-checkpoint, receive-checkpoint, drop-checkpoints
 * (cardbaton-worker(8); LAYOUT.md section 10, STATE/checkpoints/).
 *
 * Design:
 *
 *  - The daemon runs the sender on node A and the receiver on node B
 *    and relays A's stdout into B's stdin itself, so the two never
 *    talk: the stream (worker.h, "ckpt.c") says everything, and a
 *    stream cut anywhere is told from a whole one by its last line,
 *    "end" and the SHA-256 of every byte before it.
 *  - The sender scans the whole tree first (only regular files and
 *    directories, reached through no symbolic link), so that the
 *    header can give the sizes and a tree that cannot be sent is
 *    refused before a byte is written.  It checks every file against
 *    the scan as it reads it, and the tree again at the end: a
 *    checkpoint the job changed meanwhile is never ended with "end",
 *    so the receiver throws its copy away.
 *  - The receiver writes into STATE/checkpoints/JOB/ATTEMPT.part/ and
 *    renames it to ATTEMPT only when the stream was whole, checked and
 *    synced: ATTEMPT is always a whole copy; a .part is always garbage
 *    (removed on every failure, and by the next receive of the same
 *    attempt, or drop-checkpoints, after a kill -9).
 *  - The stream's parser (ck_init, ck_feed) is apart from the file
 *    system: it takes chunks of any size and gives one event at a time,
 *    and checks everything (numbers, names, parents, duplicates,
 *    counts, the checksum), so that the receiver's file system side
 *    only ever sees names that are safe to create under its .part, and
 *    the fuzz target (tests/fuzz/fuzz_ckstream.c) can feed it anything.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "worker.h"

#define GIB(x) ((double)(x) / (double)(1u << 30))

/* NAME[0..LEN) fit for a one-line message: control bytes as \xNN
 * (UTF-8 and other bytes kept).  malloc'd, or NULL. */
static char *esc(const char *s, size_t len)
{
	struct sbuf b = { 0 };

	if (sbuf_add(&b, "", 0) < 0)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		int r = c < 0x20 || c == 0x7f ? sbuf_addf(&b, "\\x%02x", c) : sbuf_add(&b, s + i, 1);

		if (r < 0) {
			sbuf_free(&b);
			return NULL;
		}
	}
	return b.s;
}

/* ---- the parser --------------------------------------------------------- */

enum { P_LINE, P_NAME, P_DATA, P_TAIL, P_BAD };

void ck_init(struct ck_parser *p)
{
	memset(p, 0, sizeof *p);
	p->state = P_LINE;
	sha256_init(&p->sha);
}

void ck_free(struct ck_parser *p)
{
	for (size_t i = 0; i < p->capset; i++)
		free(p->set[i].s);
	free(p->set);
	free(p->name);
	free(p->why);
	p->set = NULL;
	p->name = p->why = NULL;
	p->nset = p->capset = 0;
}

int ck_complete(const struct ck_parser *p)
{
	return p->state == P_TAIL;
}

/* Refuse the stream: -1, P->why "at byte N: ..." (errno ENOMEM when
 * even that cannot be said). */
static long refuse(struct ck_parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static long refuse(struct ck_parser *p, const char *fmt, ...)
{
	va_list ap;
	char *m;

	va_start(ap, fmt);
	m = vxasprintf(fmt, ap);
	va_end(ap);
	p->state = P_BAD;
	p->bad = 1;
	free(p->why);
	p->why = m ? xasprintf("at byte %" PRIu64 ": %s", p->off, m) : NULL;
	free(m);
	errno = ENOMEM;
	return -1;
}

/* FNV-1a: the name set's hash. */
static uint64_t name_hash(const char *s, size_t n)
{
	uint64_t h = 14695981039346656037ULL;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	return h;
}

/* The slot of S[0..N) in the set: its entry, or the empty slot where
 * it would go. */
static struct ck_name *name_slot(const struct ck_parser *p, const char *s, size_t n, uint64_t h)
{
	size_t i = (size_t)h & (p->capset - 1);

	while (p->set[i].s && !(p->set[i].hash == h && p->set[i].len == n && !memcmp(p->set[i].s, s, n)))
		i = (i + 1) & (p->capset - 1);
	return &p->set[i];
}

static const struct ck_name *name_find(const struct ck_parser *p, const char *s, size_t n)
{
	struct ck_name *e;

	if (!p->capset)
		return NULL;
	e = name_slot(p, s, n, name_hash(s, n));
	return e->s ? e : NULL;
}

/* S[0..N) into the set (not there yet).  0, or -1 (ENOMEM). */
static int name_add(struct ck_parser *p, const char *s, size_t n, int dir)
{
	struct ck_name *e;

	if ((p->nset + 1) * 2 > p->capset) {
		size_t cap = p->capset ? p->capset * 2 : 64;
		struct ck_name *old = p->set, *nv = calloc(cap, sizeof *nv);
		size_t oldcap = p->capset;

		if (!nv)
			return -1;
		p->set = nv;
		p->capset = cap;
		for (size_t i = 0; i < oldcap; i++)
			if (old[i].s)
				*name_slot(p, old[i].s, old[i].len, old[i].hash) = old[i];
		free(old);
	}
	e = name_slot(p, s, n, name_hash(s, n));
	if (!(e->s = malloc(n + 1)))
		return -1;
	memcpy(e->s, s, n);
	e->s[n] = '\0';
	e->len = n;
	e->hash = name_hash(s, n);
	e->dir = dir;
	p->nset++;
	return 0;
}

/* A decimal number of S[0..N): digits, no sign, no leading zero but
 * "0" itself, at most MAX.  0, or -1. */
static int num(const char *s, size_t n, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (n == 0 || (s[0] == '0' && n > 1))
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || v > (max - (uint64_t)(s[i] - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*out = v;
	return 0;
}

/* MODE: 1 to 3 octal digits, no leading zero but "0". */
static int octal(const char *s, size_t n, unsigned *out)
{
	unsigned v = 0;

	if (n == 0 || n > 3 || (s[0] == '0' && n > 1))
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '7')
			return -1;
		v = v * 8 + (unsigned)(s[i] - '0');
	}
	*out = v;
	return 0;
}

/* LINE (without its '\n') split at single spaces into at most MAX
 * fields: their count, or -1 (an empty field: two spaces, or one at
 * either end; or more than MAX). */
static int fields(char *line, size_t len, const char **f, size_t *fl, int max)
{
	int n = 0;
	size_t start = 0;

	for (size_t i = 0; i <= len; i++) {
		if (i < len && line[i] != ' ')
			continue;
		if (i == start || n == max)
			return -1;
		f[n] = line + start;
		fl[n++] = i - start;
		start = i + 1;
	}
	return n;
}

static int is(const char *f, size_t n, const char *word)
{
	return n == strlen(word) && !memcmp(f, word, n);
}

/* The header, an entry's or the end line, whole in p->line (its '\n'
 * dropped). */
static long line_done(struct ck_parser *p, struct ck_event *ev)
{
	const char *f[5];
	size_t fl[5];
	int n = fields(p->line, p->linelen, f, fl, 5);
	uint64_t namelen;

	if (p->off == p->linelen + 1) {         /* the first line */
		if (n != 4 || !is(f[0], fl[0], CK_MAGIC))
			return refuse(p, "not a checkpoint stream (no \"" CK_MAGIC "\" header)");
		if (!is(f[1], fl[1], "1"))
			return refuse(p, "stream version %.*s, not " "1", (int)fl[1], f[1]);
		if (num(f[2], fl[2], CK_SIZE_MAX, &p->total) < 0 ||
		    num(f[3], fl[3], CK_ENTRIES_MAX, &p->entries) < 0)
			return refuse(p, "bad header (TOTAL, ENTRIES)");
		if (p->entries == 0)
			return refuse(p, "no entries (a checkpoint has at least its root)");
		ev->kind = CK_HEADER;
		ev->size = p->total;
		ev->entries = p->entries;
		return 0;
	}
	if (p->seen == p->entries) {            /* the end line */
		unsigned char d[32];
		char hex[65];

		if (n != 2 || !is(f[0], fl[0], "end"))
			return refuse(p, "more entries than the header's %" PRIu64, p->entries);
		if (fl[1] != 64 || strspn(f[1], "0123456789abcdef") < 64)
			return refuse(p, "bad end line (not 64 lower-case hex digits)");
		if (p->bytes != p->total)
			return refuse(p, "the files hold %" PRIu64 " bytes, the header said %" PRIu64,
				      p->bytes, p->total);
		sha256_final(&p->sha, d);
		sha256_hex(d, hex);
		if (memcmp(hex, f[1], 64)) {
			/* Said as it is: where does not matter. */
			char *m = xasprintf("checksum mismatch (sent %.64s, received %s)", f[1], hex);

			refuse(p, "checksum mismatch");
			free(p->why);
			p->why = m;
			p->sum_bad = 1;
			return -1;
		}
		memcpy(p->sum, hex, 65);
		p->state = P_TAIL;
		ev->kind = CK_END;
		return 0;
	}
	if (n >= 1 && is(f[0], fl[0], "end"))
		return refuse(p, "end after %" PRIu64 " of %" PRIu64 " entries", p->seen, p->entries);
	if (n == 3 && is(f[0], fl[0], "d")) {
		p->ftype = 'd';
		p->fsize = 0;
	} else if (n == 4 && is(f[0], fl[0], "f")) {
		p->ftype = 'f';
		if (num(f[2], fl[2], CK_SIZE_MAX, &p->fsize) < 0)
			return refuse(p, "entry %" PRIu64 ": bad size", p->seen + 1);
		if (p->fsize > p->total - p->bytes)
			return refuse(p, "entry %" PRIu64 ": %" PRIu64 " bytes, beyond the header's total of %" PRIu64,
				      p->seen + 1, p->fsize, p->total);
	} else {
		return refuse(p, "entry %" PRIu64 ": bad entry line", p->seen + 1);
	}
	if (octal(f[1], fl[1], &p->fmode) < 0)
		return refuse(p, "entry %" PRIu64 ": bad mode", p->seen + 1);
	if (num(f[n - 1], fl[n - 1], CK_NAME_MAX, &namelen) < 0 || namelen == 0)
		return refuse(p, "entry %" PRIu64 ": bad name length (1 to %d)", p->seen + 1, CK_NAME_MAX);
	if (p->namebytes + namelen > CK_NAMES_MAX)
		return refuse(p, "entry %" PRIu64 ": names of more than %" PRIu64 " bytes in all", p->seen + 1,
			      CK_NAMES_MAX);
	if (!p->name && !(p->name = malloc(CK_NAME_MAX + 1)))
		return -1;
	p->namelen = (size_t)namelen;
	p->namegot = 0;
	p->state = P_NAME;
	return 0;
}

/* The name of the entry being read, whole in p->name: checked, put in
 * the set, and given. */
static long name_done(struct ck_parser *p, struct ck_event *ev)
{
	char *s = p->name, *quoted;
	size_t n = p->namelen, start = 0, depth = 0, slash = 0;
	const char *why = NULL;
	const struct ck_name *par;

	s[n] = '\0';
	if (memchr(s, '\0', n))
		why = "a NUL in the name";
	for (size_t i = 0; !why && i <= n; i++) {
		if (i < n && s[i] != '/')
			continue;
		if (i == start)
			why = s[0] == '/' ? "an absolute name" : "an empty component";
		else if ((i - start == 1 && s[start] == '.') ||
			 (i - start == 2 && s[start] == '.' && s[start + 1] == '.'))
			why = "a \".\" or \"..\" component";
		else if (++depth > CK_DEPTH_MAX)
			why = "deeper than " "256" " components";
		if (i < n)
			slash = i;
		start = i + 1;
	}
	if (!why && p->seen == 0 && depth != 1)
		why = "the first entry (the root) is not one component";
	if (!why && p->seen > 0 && depth == 1)
		why = "a second root";
	if (!why && p->seen > 0 && (!(par = name_find(p, s, slash)) || !par->dir))
		why = "its parent is no directory received before it";
	if (!why && name_find(p, s, n))
		why = "a duplicate name";
	if (why) {
		quoted = esc(s, n);
		refuse(p, "entry %" PRIu64 " (%s): %s", p->seen + 1, quoted ? quoted : "?", why);
		free(quoted);
		return -1;
	}
	if (name_add(p, s, n, p->ftype == 'd') < 0)
		return -1;
	if (p->seen == 0)
		p->rootlen = n;
	p->seen++;
	p->namebytes += n;
	ev->kind = p->ftype == 'd' ? CK_DIR : CK_FILE;
	ev->name = s;
	ev->namelen = n;
	ev->mode = p->fmode;
	ev->size = p->fsize;
	p->remaining = p->fsize;
	p->bytes += p->fsize;
	p->state = p->remaining ? P_DATA : P_LINE;
	return 0;
}

long ck_feed(struct ck_parser *p, const void *buf, size_t len, struct ck_event *ev)
{
	const unsigned char *b = buf;
	size_t took = 0;
	long r = 0;

	memset(ev, 0, sizeof *ev);
	if (p->state == P_BAD) {
		errno = ENOMEM;
		return -1;
	}
	if (len == 0)
		return 0;
	switch (p->state) {
	case P_LINE: {
		const unsigned char *nl = memchr(b, '\n', len);
		size_t want = nl ? (size_t)(nl - b) + 1 : len;
		int header = p->off == 0 && p->linelen == 0;

		/* The end line is not hashed: it holds the hash. */
		if (p->linelen == 0 && !header && p->seen == p->entries)
			p->end_off = p->off;
		/* Refused at the same byte however the stream was cut into
		 * chunks: the first bad byte, or the first past the limit. */
		size_t room = CK_LINE_MAX - p->linelen, upto = want < room ? want : room;

		for (size_t i = 0; i < upto; i++)
			if ((b[i] < 0x20 || b[i] > 0x7e) && !(nl && i == want - 1)) {
				p->off += i;
				return refuse(p, "a byte 0x%02x in a header line", b[i]);
			}
		if (want > room) {
			p->off += room;
			return refuse(p, "a header line longer than %d bytes", CK_LINE_MAX);
		}
		memcpy(p->line + p->linelen, b, want);
		p->linelen += want;
		took = want;
		if (!p->end_off)
			sha256_update(&p->sha, b, want);
		p->off += took;
		if (!nl)
			return (long)took;
		p->linelen--;
		r = line_done(p, ev);
		p->linelen = 0;
		return r < 0 ? -1 : (long)took;
	}
	case P_NAME:
		took = p->namelen - p->namegot < len ? p->namelen - p->namegot : len;
		memcpy(p->name + p->namegot, b, took);
		p->namegot += took;
		sha256_update(&p->sha, b, took);
		p->off += took;
		if (p->namegot == p->namelen && name_done(p, ev) < 0)
			return -1;
		return (long)took;
	case P_DATA:
		took = p->remaining < len ? (size_t)p->remaining : len;
		sha256_update(&p->sha, b, took);
		p->remaining -= took;
		p->off += took;
		ev->kind = CK_DATA;
		ev->data = b;
		ev->len = took;
		if (!p->remaining)
			p->state = P_LINE;
		return (long)took;
	case P_TAIL:
		return refuse(p, "bytes after the end line");
	}
	errno = EINVAL;
	return -1;
}

/* ---- the file system side, shared ---------------------------------------- */

/* Remove DIRFD/NAME, whatever it is, never following a symbolic link
 * (a directory is opened with O_NOFOLLOW, its entries removed the same
 * way, one descriptor per level).  A missing NAME is no error.  0, or
 * -1 with errno. */
static int rm_tree(int at, const char *name)
{
	struct stat sb;
	DIR *d;
	struct dirent *de;
	int fd, rc = 0, e = 0;

	if (fstatat(at, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISDIR(sb.st_mode))
		return unlinkat(at, name, 0) < 0 && errno != ENOENT ? -1 : 0;
	fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	/* Our own copy may hold directories made without write permission
	 * for us (a mode from the stream): give it back first. */
	if ((sb.st_mode & 0700) != 0700 && fchmod(fd, sb.st_mode | 0700) < 0) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	if (!(d = fdopendir(fd))) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	for (;;) {
		errno = 0;
		if (!(de = readdir(d))) {
			if (errno) {
				e = errno;
				rc = -1;
			}
			break;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (rm_tree(dirfd(d), de->d_name) < 0) {
			e = errno;
			rc = -1;
			break;
		}
	}
	closedir(d);
	if (rc == 0 && unlinkat(at, name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
		e = errno;
		rc = -1;
	}
	errno = e;
	return rc;
}

/* AT/REL[0..LEN) (components separated by '/', none of them "." or
 * "..", checked by the caller or the parser) opened as a directory,
 * each component with O_NOFOLLOW: never through a symbolic link.  The
 * fd, or -1 with errno. */
static int open_rel(int at, const char *rel, size_t len)
{
	char comp[CK_NAME_MAX + 1];
	int fd = at, nfd;
	size_t i = 0;

	if (len > CK_NAME_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	while (i < len) {
		size_t j = i;

		while (j < len && rel[j] != '/')
			j++;
		memcpy(comp, rel + i, j - i);
		comp[j - i] = '\0';
		nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd != at) {
			int e = errno;

			close(fd);
			errno = e;
		}
		if (nfd < 0)
			return -1;
		fd = nfd;
		i = j + 1;
	}
	return fd == at ? dup(at) : fd;
}

/* AT/NAME, a directory, made 0700 when CREATE and missing (*MADE set),
 * opened with O_NOFOLLOW.  The fd, or -1 with errno (ELOOP or ENOTDIR
 * for a symbolic link). */
static int subdir(int at, const char *name, int create, int *made)
{
	int fd;

	*made = 0;
	if (create) {
		if (mkdirat(at, name, 0700) == 0)
			*made = 1;
		else if (errno != EEXIST)
			return -1;
	}
	fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && *made && (fchmod(fd, 0700) < 0 || fsync_dir(at) < 0)) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* A job ID: a positive decimal number, as the spool numbers jobs. */
static int job_id_ok(const char *s)
{
	size_t n = strspn(s, "0123456789");

	return n >= 1 && n <= 18 && s[n] == '\0' && s[0] != '0';
}

/* What a file that is neither a regular file nor a directory is. */
static const char *kind_of(mode_t m)
{
	return S_ISLNK(m) ? "a symbolic link" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket"
	     : S_ISCHR(m) || S_ISBLK(m) ? "a device" : "not a regular file or directory";
}

/* ---- send-checkpoint ------------------------------------------------------ */

/* One entry of a scan. */
struct ent {
	char *rel;              /* ROOT/..., as sent */
	size_t base;            /* where its last component begins in rel */
	size_t parent;          /* its directory's index (the root: itself) */
	int dir;
	unsigned mode;
	uint64_t size;
	dev_t dev;
	ino_t ino;
	struct timespec mtime, ctime;
};

struct tree {
	struct ent *v;
	size_t n, cap;
	uint64_t total, namebytes;
};

struct snd {
	const char *path;       /* PATH as given */
	const char *up;         /* PATH's directory for messages: "" for "/" */
	int upfd;               /* PATH's directory (O_PATH where there is one) */
	unsigned char *buf;     /* CK_CHUNK */
	size_t used;
	struct sha256 sha;
	size_t pidx;            /* the directory pfd is (cache for the files' opens) */
	int pfd;
};

static void tree_free(struct tree *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i].rel);
	free(t->v);
	memset(t, 0, sizeof *t);
}

/* "PATH/REL" of entry E for a message (one line), malloc'd or NULL. */
static char *shown(const struct snd *s, const char *rel)
{
	char *full = xasprintf("%s/%s", s->up, rel), *e = full ? esc(full, strlen(full)) : NULL;

	free(full);
	return e;
}

/* The exit status of a refusal or failure about REL, said on stderr.
 * AGAIN: the scan at the end, where anything found is a change. */
static int snd_err(const struct snd *s, int again, int ex, const char *rel, const char *what)
{
	char *p = shown(s, rel);
	int rc;

	if (again)
		rc = wk_err(EX_TEMPFAIL_, "send-checkpoint: checkpoint changed during the copy: %s",
			    p ? p : "?");
	else
		rc = wk_err(ex, "send-checkpoint: %s: %s", p ? p : "?", what);
	free(p);
	return rc;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Entry NAME of directory DFD (entry PARENT of T, or the root when T is
 * empty), as lstat sees it, onto T.  0, or the exit status (said). */
static int add_ent(const struct snd *s, struct tree *t, int again, int dfd, size_t parent,
		   const char *name)
{
	struct stat sb;
	struct ent e = { 0 };
	size_t plen = t->n ? strlen(t->v[parent].rel) : 0, nlen = strlen(name);
	int rc;

	if (t->n && !(e.rel = xasprintf("%s/%s", t->v[parent].rel, name)))
		return wk_errsys(EX_OSERR_, "out of memory");
	if (!t->n && !(e.rel = strdup(name)))
		return wk_errsys(EX_OSERR_, "out of memory");
	e.base = t->n ? plen + 1 : 0;
	e.parent = t->n ? parent : 0;
	if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
		int en = errno;

		rc = snd_err(s, again || (t->n && en == ENOENT), en == ENOENT || en == ENOTDIR ? EX_NOINPUT_
			     : EX_IOERR_, e.rel, strerror(en));
		free(e.rel);
		return rc;
	}
	if (!S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) {
		char *what = xasprintf("%s: not copied (a checkpoint is regular files and directories)",
				       kind_of(sb.st_mode));

		rc = snd_err(s, again, EX_DATAERR_, e.rel, what ? what : kind_of(sb.st_mode));
		free(what);
		free(e.rel);
		return rc;
	}
	e.dir = S_ISDIR(sb.st_mode);
	e.mode = (unsigned)sb.st_mode & 0777;
	e.size = e.dir ? 0 : (uint64_t)sb.st_size;
	e.dev = sb.st_dev;
	e.ino = sb.st_ino;
	e.mtime = sb.st_mtim;
	e.ctime = sb.st_ctim;
	/* The limits the receiver holds the stream to, said here, before
	 * a byte is sent. */
	{
		const char *why = NULL;
		size_t depth = 1;

		for (const char *c = e.rel; (c = strchr(c, '/')); c++)
			depth++;
		if (plen + 1 + nlen > CK_NAME_MAX)
			why = "a name longer than 4096 bytes: not copied";
		else if (depth > CK_DEPTH_MAX)
			why = "deeper than 256 directories: not copied";
		else if (t->n >= CK_ENTRIES_MAX)
			why = "more than 4194304 entries: not copied";
		else if (t->namebytes + strlen(e.rel) > CK_NAMES_MAX)
			why = "names of more than 256 MiB in all: not copied";
		else if (e.size > CK_SIZE_MAX - t->total)
			why = "larger than the stream can say";
		if (why) {
			rc = snd_err(s, again, EX_DATAERR_, e.rel, why);
			free(e.rel);
			return rc;
		}
	}
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		struct ent *nv = realloc(t->v, cap * sizeof *nv);

		if (!nv) {
			free(e.rel);
			return wk_errsys(EX_OSERR_, "out of memory");
		}
		t->v = nv;
		t->cap = cap;
	}
	t->total += e.size;
	t->namebytes += strlen(e.rel);
	t->v[t->n++] = e;
	return 0;
}

/* Directory I of T: its entries, sorted by name (strcmp: bytes), onto T,
 * then each subdirectory's the same way.  Parents always come before
 * their children.  0, or the exit status (said). */
static int scan_dir(const struct snd *s, struct tree *t, int again, size_t i)
{
	int fd = open_rel(s->upfd, t->v[i].rel, strlen(t->v[i].rel)), rc = 0;
	struct stat sb;
	DIR *d;
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0, first;

	if (fd < 0)
		return snd_err(s, again || errno == ENOENT || errno == ELOOP || errno == ENOTDIR, EX_IOERR_,
			       t->v[i].rel, strerror(errno));
	if (fstat(fd, &sb) < 0 || sb.st_dev != t->v[i].dev || sb.st_ino != t->v[i].ino) {
		close(fd);
		return snd_err(s, 1, EX_IOERR_, t->v[i].rel, "");
	}
	if (!(d = fdopendir(fd))) {
		rc = snd_err(s, again, EX_IOERR_, t->v[i].rel, strerror(errno));
		close(fd);
		return rc;
	}
	for (;;) {
		errno = 0;
		if (!(de = readdir(d))) {
			if (errno)
				rc = snd_err(s, again, EX_IOERR_, t->v[i].rel, strerror(errno));
			break;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == cap) {
			char **nv = realloc(names, (cap = cap ? cap * 2 : 16) * sizeof *nv);

			if (!nv) {
				rc = wk_errsys(EX_OSERR_, "out of memory");
				break;
			}
			names = nv;
		}
		if (!(names[n] = strdup(de->d_name))) {
			rc = wk_errsys(EX_OSERR_, "out of memory");
			break;
		}
		n++;
	}
	if (names)
		qsort(names, n, sizeof *names, by_name);
	first = t->n;
	for (size_t k = 0; k < n && !rc; k++)
		rc = add_ent(s, t, again, dirfd(d), i, names[k]);
	closedir(d);
	for (size_t k = 0; k < n; k++)
		free(names[k]);
	free(names);
	for (size_t k = first, last = t->n; k < last && !rc; k++)
		if (t->v[k].dir)
			rc = scan_dir(s, t, again, k);
	return rc;
}

/* The whole tree under PATH's last component BASE. */
static int scan(const struct snd *s, struct tree *t, int again, const char *base)
{
	int rc = add_ent(s, t, again, s->upfd, 0, base);

	if (!rc && t->v[0].dir)
		rc = scan_dir(s, t, again, 0);
	return rc;
}

/* S's buffer out: hashed, then written.  0, or the exit status. */
static int flush(struct snd *s)
{
	sha256_update(&s->sha, s->buf, s->used);
	if (write_full(STDOUT_FILENO, s->buf, s->used) < 0)
		return wk_errsys(EX_IOERR_, "send-checkpoint: writing the stream%s",
				 errno == EPIPE ? " (the receiver went away)" : "");
	s->used = 0;
	return 0;
}

static int emit(struct snd *s, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		size_t k = CK_CHUNK - s->used < n ? CK_CHUNK - s->used : n;
		int rc;

		memcpy(s->buf + s->used, c, k);
		s->used += k;
		c += k;
		n -= k;
		if (s->used == CK_CHUNK && (rc = flush(s)))
			return rc;
	}
	return 0;
}

static int same_time(struct timespec a, struct timespec b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/* File I of T: its DATA, checked against the scan before and after it
 * is read.  0, or the exit status (said). */
static int send_file(struct snd *s, const struct tree *t, size_t i)
{
	const struct ent *e = &t->v[i];
	struct stat sb;
	uint64_t left = e->size;
	int fd, rc;

	if (i == 0) {
		fd = openat(s->upfd, e->rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	} else {
		if (s->pfd < 0 || s->pidx != e->parent) {
			if (s->pfd >= 0)
				close(s->pfd);
			s->pidx = e->parent;
			s->pfd = open_rel(s->upfd, t->v[e->parent].rel, strlen(t->v[e->parent].rel));
			if (s->pfd < 0)
				return snd_err(s, 1, 0, e->rel, "");
		}
		fd = openat(s->pfd, e->rel + e->base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	}
	/* Gone, or a link or a FIFO now: changed.  Unreadable: an error. */
	if (fd < 0)
		return snd_err(s, errno == ENOENT || errno == ELOOP || errno == ENXIO, EX_IOERR_, e->rel,
			       strerror(errno));
	if (fstat(fd, &sb) < 0) {
		rc = snd_err(s, 0, EX_IOERR_, e->rel, strerror(errno));
		goto out;
	}
	if (!S_ISREG(sb.st_mode) || sb.st_dev != e->dev || sb.st_ino != e->ino ||
	    (uint64_t)sb.st_size != e->size) {
		rc = snd_err(s, 1, 0, e->rel, "");
		goto out;
	}
	/* Read straight into the stream's buffer. */
	while (left) {
		size_t room = CK_CHUNK - s->used;
		ssize_t n;

		if (!room) {
			if ((rc = flush(s)))
				goto out;
			room = CK_CHUNK;
		}
		n = read(fd, s->buf + s->used, left < room ? (size_t)left : room);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = snd_err(s, 0, EX_IOERR_, e->rel, strerror(errno));
			goto out;
		}
		if (n == 0) {           /* it shrank */
			rc = snd_err(s, 1, 0, e->rel, "");
			goto out;
		}
		s->used += (size_t)n;
		left -= (uint64_t)n;
	}
	if (fstat(fd, &sb) < 0) {
		rc = snd_err(s, 0, EX_IOERR_, e->rel, strerror(errno));
		goto out;
	}
	rc = (uint64_t)sb.st_size != e->size || !same_time(sb.st_mtim, e->mtime) ||
	     !same_time(sb.st_ctim, e->ctime) ? snd_err(s, 1, 0, e->rel, "") : 0;
out:
	close(fd);
	return rc;
}

/* The tree scanned again at the end (B) against the first scan (A):
 * names, types, sizes, mtimes.  0, or the exit status (said). */
static int compare(const struct snd *s, const struct tree *a, const struct tree *b)
{
	for (size_t i = 0; i < a->n || i < b->n; i++) {
		const struct ent *x = i < a->n ? &a->v[i] : NULL, *y = i < b->n ? &b->v[i] : NULL;

		if (!x || !y || strcmp(x->rel, y->rel) || x->dir != y->dir || x->size != y->size ||
		    !same_time(x->mtime, y->mtime))
			return snd_err(s, 1, 0, x && y && strcmp(x->rel, y->rel) > 0 ? y->rel
						: x ? x->rel : y->rel, "");
	}
	return 0;
}

/* PATH's directory, walked from "/" one plain component at a time with
 * O_NOFOLLOW: its fd, *BASE its last component; or -1 with the exit
 * status in *EX (said). */
static int open_up(const char *path, char **base, int *ex)
{
	const char *p = path + 1, *slash;
	int fd, nfd;
#ifdef O_PATH
	const int how = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
#else
	const int how = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
#endif

	*base = NULL;
	if ((fd = open("/", how & ~O_NOFOLLOW)) < 0) {
		*ex = wk_errsys(EX_IOERR_, "send-checkpoint: /");
		return -1;
	}
	while ((slash = strchr(p, '/'))) {
		char *comp = strndup(p, (size_t)(slash - p)), *prefix = strndup(path, (size_t)(slash - path));
		struct stat sb;

		if (!comp || !prefix) {
			free(comp);
			free(prefix);
			close(fd);
			*ex = wk_errsys(EX_OSERR_, "out of memory");
			return -1;
		}
		nfd = openat(fd, comp, how);
		if (nfd < 0) {
			int e = errno;

			if (fstatat(fd, comp, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode))
				*ex = wk_err(EX_DATAERR_, "send-checkpoint: %s: reached through a symbolic "
					     "link (%s): not copied", path, prefix);
			else
				*ex = wk_err(e == ENOENT || e == ENOTDIR ? EX_NOINPUT_ : EX_IOERR_,
					     "send-checkpoint: %s: %s", path, strerror(e));
		}
		free(comp);
		free(prefix);
		close(fd);
		if (nfd < 0)
			return -1;
		fd = nfd;
		p = slash + 1;
	}
	if (!(*base = strdup(p))) {
		close(fd);
		*ex = wk_errsys(EX_OSERR_, "out of memory");
		return -1;
	}
	return fd;
}

/* PATH: absolute, of plain components (no "", ".", ".."), not "/". */
static int plain_path(const char *path)
{
	const char *c = path;

	if (path[0] != '/' || !path[1])
		return 0;
	while (*c == '/') {
		const char *end = strchr(c + 1, '/');
		size_t n = end ? (size_t)(end - c - 1) : strlen(c + 1);

		if (n == 0 || (n == 1 && c[1] == '.') || (n == 2 && c[1] == '.' && c[2] == '.'))
			return 0;
		c += n + 1;
	}
	return 1;
}

int cmd_send_checkpoint(struct wk_state *st, int argc, char **argv)
{
	struct snd s = { .upfd = -1, .pfd = -1 };
	struct tree t = { 0 }, again = { 0 };
	uint64_t max = CK_SIZE_MAX;
	const char *path;
	char *base = NULL, *up = NULL, line[CK_LINE_MAX];
	unsigned char d[32];
	char hex[65];
	int rc = 0, n;

	(void)st;
	if (argc >= 2 && !strcmp(argv[0], "--max")) {
		if (num(argv[1], strlen(argv[1]), CK_SIZE_MAX, &max) < 0)
			return wk_err(EX_USAGE_, "send-checkpoint: --max %s: not a number of bytes", argv[1]);
		argc -= 2;
		argv += 2;
	}
	if (argc != 1 || argv[0][0] == '-')
		return wk_err(EX_USAGE_, "usage: %s [-d STATE_DIR] send-checkpoint [--max BYTES] PATH", PROG);
	path = argv[0];
	if (!plain_path(path))
		return wk_err(EX_USAGE_, "send-checkpoint: %s: not an absolute path of plain components "
			      "(no \".\", \"..\" or empty one)", path);
	/* A receiver gone is a failed write (EPIPE), said, not a death. */
	signal(SIGPIPE, SIG_IGN);
	if ((s.upfd = open_up(path, &base, &rc)) < 0)
		return rc;
	s.path = path;
	if (!(up = strndup(path, (size_t)(strrchr(path, '/') - path)))) {
		rc = wk_errsys(EX_OSERR_, "out of memory");
		goto out;
	}
	s.up = up;
	/* First the whole tree, into memory. */
	if ((rc = scan(&s, &t, 0, base)))
		goto out;
	if (t.total > max) {
		rc = wk_err(EX_DATAERR_, "send-checkpoint: %s: checkpoint is %.1f GiB, more than the "
			    "limit of %.1f GiB", path, GIB(t.total), GIB(max));
		goto out;
	}
	if (!(s.buf = malloc(CK_CHUNK))) {
		rc = wk_errsys(EX_OSERR_, "out of memory");
		goto out;
	}
	sha256_init(&s.sha);
	n = snprintf(line, sizeof line, CK_MAGIC " %d %" PRIu64 " %zu\n", CK_VERSION, t.total, t.n);
	if ((rc = emit(&s, line, (size_t)n)))
		goto out;
	for (size_t i = 0; i < t.n; i++) {
		const struct ent *e = &t.v[i];
		size_t len = strlen(e->rel);

		if (e->dir)
			n = snprintf(line, sizeof line, "d %o %zu\n", e->mode, len);
		else
			n = snprintf(line, sizeof line, "f %o %" PRIu64 " %zu\n", e->mode, e->size, len);
		if ((rc = emit(&s, line, (size_t)n)) || (rc = emit(&s, e->rel, len)) ||
		    (!e->dir && (rc = send_file(&s, &t, i))))
			goto out;
	}
	/* Anything changed, added or removed meanwhile: no end line, and
	 * what is still in the buffer is never written. */
	if ((rc = scan(&s, &again, 1, base)) || (rc = compare(&s, &t, &again)) || (rc = flush(&s)))
		goto out;
	sha256_final(&s.sha, d);
	sha256_hex(d, hex);
	n = snprintf(line, sizeof line, "end %s\n", hex);
	if (write_full(STDOUT_FILENO, line, (size_t)n) < 0)
		rc = wk_errsys(EX_IOERR_, "send-checkpoint: writing the stream%s",
			       errno == EPIPE ? " (the receiver went away)" : "");
out:
	if (s.pfd >= 0)
		close(s.pfd);
	close(s.upfd);
	free(s.buf);
	free(base);
	free(up);
	tree_free(&t);
	tree_free(&again);
	return rc;
}

/* ---- receive-checkpoint --------------------------------------------------- */

/* SIGTERM or SIGINT while receiving: set here (the handler does
 * nothing else, and is installed without SA_RESTART so that a blocked
 * read returns EINTR), so that the copy is removed before we exit. */
static volatile sig_atomic_t stop_sig;

static void on_stop(int sig)
{
	stop_sig = sig;
}

/* A directory received: made 0700, given its mode at the end. */
struct rdir {
	char *name;
	unsigned mode;
};

struct rcv {
	const struct wk_state *st;
	const char *job, *att;
	char *part;             /* "ATTEMPT.part" */
	char *where;            /* STATE/checkpoints/JOB, for messages */
	int jobfd, partfd;
	struct ck_parser p;
	int fd;                 /* the file being written, or -1 */
	uint64_t fleft;         /* its bytes still to come */
	char *fname;            /* its name (messages) */
	char *root;             /* the first entry's name */
	struct rdir *dirs;
	size_t ndirs, capdirs;
	char *pname;            /* the directory pfd is (ROOT/...), or NULL */
	int pfd;
};

/* Give up: the file being written closed, ATTEMPT.part removed whole,
 * then one line (what went wrong, and if the copy could not be
 * removed, that too).  The exit status EX. */
static int rcv_fail(struct rcv *r, int ex, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int rcv_fail(struct rcv *r, int ex, const char *fmt, ...)
{
	va_list ap;
	char *m;
	int rm = 0, e = 0;

	va_start(ap, fmt);
	m = vxasprintf(fmt, ap);
	va_end(ap);
	if (r->fd >= 0)
		close(r->fd);
	if (r->pfd >= 0)
		close(r->pfd);
	r->fd = r->pfd = -1;
	if (r->partfd >= 0) {
		close(r->partfd);
		r->partfd = -1;
		if ((rm = rm_tree(r->jobfd, r->part)) < 0)
			e = errno;
		else
			fsync_dir(r->jobfd);
	}
	if (rm < 0)
		wk_err(ex, "receive-checkpoint: %s; and %s/%s could not be removed: %s", m ? m : "out of memory",
		       r->where, r->part, strerror(e));
	else
		wk_err(ex, "receive-checkpoint: %s", m ? m : "out of memory");
	free(m);
	return ex;
}

/* The exit status of a failed write or make: the disk full, or I/O. */
static int fs_ex(int e)
{
	return e == ENOSPC || e == EDQUOT ? CK_EX_NOSPACE : EX_IOERR_;
}

/* The directory NAME[0..LEN) of the copy (ROOT/..., received before)
 * as an fd, kept for the next entry in the same one.  -1 with errno. */
static int parent_fd(struct rcv *r, const char *name, size_t len)
{
	if (r->pname && strlen(r->pname) == len && !memcmp(r->pname, name, len))
		return r->pfd;
	if (r->pfd >= 0)
		close(r->pfd);
	free(r->pname);
	r->pname = NULL;
	if ((r->pfd = open_rel(r->partfd, name, len)) < 0)
		return -1;
	if (!(r->pname = strndup(name, len))) {
		close(r->pfd);
		r->pfd = -1;
		errno = ENOMEM;
		return -1;
	}
	return r->pfd;
}

/* The file being written is whole: synced and closed.  0, or the exit
 * status. */
static int file_done(struct rcv *r)
{
	int fd = r->fd;

	r->fd = -1;
	if (fsync(fd) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return close(fd);
}

/* One event of the parser, done on the file system.  0, or the exit
 * status (said, the copy removed). */
static int rcv_event(struct rcv *r, const struct ck_event *ev)
{
	const char *slash, *base;
	char *q;
	int pfd, rc;

	switch (ev->kind) {
	case CK_NONE:
	case CK_END:
		return 0;
	case CK_HEADER: {
		struct statvfs vfs;
		uint64_t avail;

		if (fstatvfs(r->partfd, &vfs) < 0)
			return rcv_fail(r, EX_IOERR_, "%s: %s", r->where, strerror(errno));
		avail = (uint64_t)vfs.f_bavail * (uint64_t)vfs.f_frsize;
		if (ev->size > avail)
			return rcv_fail(r, CK_EX_NOSPACE, "not enough space in %s: the checkpoint needs %.1f GiB, "
					"%.1f GiB free", r->where, GIB(ev->size), GIB(avail));
		return 0;
	}
	case CK_DATA:
		if (write_full(r->fd, ev->data, ev->len) < 0)
			goto fail;
		r->fleft -= ev->len;
		if (!r->fleft && file_done(r) < 0)
			goto fail;
		return 0;
	case CK_DIR:
	case CK_FILE:
		break;
	}
	/* The parser checked the name: components under the root, the
	 * parent a directory received, not a duplicate. */
	slash = memrchr(ev->name, '/', ev->namelen);
	base = slash ? slash + 1 : ev->name;
	if (!slash && !(r->root = strdup(ev->name)))
		return rcv_fail(r, EX_OSERR_, "out of memory");
	if ((pfd = slash ? parent_fd(r, ev->name, (size_t)(slash - ev->name)) : r->partfd) < 0)
		goto fail;
	if (ev->kind == CK_DIR) {
		if (r->ndirs == r->capdirs) {
			size_t cap = r->capdirs ? r->capdirs * 2 : 16;
			struct rdir *nv = realloc(r->dirs, cap * sizeof *nv);

			if (!nv)
				return rcv_fail(r, EX_OSERR_, "out of memory");
			r->dirs = nv;
			r->capdirs = cap;
		}
		if (!(r->dirs[r->ndirs].name = strdup(ev->name)))
			return rcv_fail(r, EX_OSERR_, "out of memory");
		r->dirs[r->ndirs++].mode = ev->mode;
		if (mkdirat(pfd, base, 0700) < 0)
			goto fail;
		return 0;
	}
	free(r->fname);
	if (!(r->fname = strdup(ev->name)))
		return rcv_fail(r, EX_OSERR_, "out of memory");
	/* Exactly MODE and the owner's read and write, whatever the umask. */
	r->fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (r->fd < 0 || fchmod(r->fd, (mode_t)(ev->mode | 0600)) < 0)
		goto fail;
	r->fleft = ev->size;
	if (!r->fleft && file_done(r) < 0)
		goto fail;
	return 0;
fail:
	rc = errno;
	q = esc(ev->name ? ev->name : r->fname ? r->fname : "?",
		ev->name ? ev->namelen : strlen(r->fname ? r->fname : "?"));
	rc = rcv_fail(r, fs_ex(rc), "%s/%s/%s: %s", r->where, r->part, q ? q : "?", strerror(rc));
	free(q);
	return rc;
}

/* The copy whole and checked: every directory given its mode and
 * synced (its files were as each ended), ATTEMPT.part renamed to
 * ATTEMPT, and JOB synced.  0, or the exit status (said). */
static int rcv_commit(struct rcv *r)
{
	for (size_t i = 0; i < r->ndirs; i++) {
		int fd = open_rel(r->partfd, r->dirs[i].name, strlen(r->dirs[i].name));

		if (fd < 0 || fchmod(fd, (mode_t)(r->dirs[i].mode | 0700)) < 0 || fsync_dir(fd) < 0) {
			int e = errno;
			char *q = esc(r->dirs[i].name, strlen(r->dirs[i].name));

			if (fd >= 0)
				close(fd);
			rcv_fail(r, fs_ex(e), "%s/%s/%s: %s", r->where, r->part, q ? q : "?", strerror(e));
			free(q);
			return fs_ex(e);
		}
		close(fd);
	}
	if (fsync_dir(r->partfd) < 0)
		return rcv_fail(r, fs_ex(errno), "%s/%s: %s", r->where, r->part, strerror(errno));
	if (stop_sig)
		return rcv_fail(r, EX_TEMPFAIL_, "stopped by %s before the copy was put in place",
				wk_signame(stop_sig) ? wk_signame(stop_sig) : "a signal");
	CRASH_POINT("worker receive: copy complete", NULL);
	if (renameat(r->jobfd, r->part, r->jobfd, r->att) < 0)
		return rcv_fail(r, EX_IOERR_, "%s: renaming %s to %s: %s", r->where, r->part, r->att,
				strerror(errno));
	CRASH_POINT("worker receive: renamed", NULL);
	if (fsync_dir(r->jobfd) < 0) {
		int e = errno;

		/* Not known to be on disk: not answered as done either. */
		close(r->partfd);
		r->partfd = -1;
		rm_tree(r->jobfd, r->att);
		return rcv_fail(r, EX_IOERR_, "%s: %s", r->where, strerror(e));
	}
	return 0;
}

/* STATE/checkpoints/JOB (made 0700 when missing), locked against
 * another receive or a drop of the same job: its fd, or -1 with the
 * exit status in *EX (said). */
static int open_job(const struct wk_state *st, const char *job, int create, int *ex)
{
	int ckfd, fd = -1, made;

	for (int tries = 0; tries < 3; tries++) {
		struct stat sb;

		if ((ckfd = subdir(st->fd, "checkpoints", create, &made)) < 0) {
			if (!create && errno == ENOENT) {
				*ex = 0;
				return -1;
			}
			*ex = wk_err(EX_IOERR_, "%s/checkpoints: %s", st->path,
				     errno == ELOOP || errno == ENOTDIR ? "a symbolic link or not a directory "
				     "(not followed)" : strerror(errno));
			return -1;
		}
		fd = subdir(ckfd, job, create, &made);
		close(ckfd);
		if (fd < 0) {
			if (!create && errno == ENOENT) {
				*ex = 0;
				return -1;
			}
			*ex = wk_err(EX_IOERR_, "%s/checkpoints/%s: %s", st->path, job,
				     errno == ELOOP || errno == ENOTDIR ? "a symbolic link or not a directory "
				     "(not followed)" : strerror(errno));
			return -1;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			int e = errno;

			close(fd);
			*ex = e == EWOULDBLOCK
			      ? wk_err(EX_TEMPFAIL_, "%s/checkpoints/%s: another copy into it is under way",
				       st->path, job)
			      : wk_err(EX_IOERR_, "%s/checkpoints/%s: flock: %s", st->path, job, strerror(e));
			return -1;
		}
		/* A drop that removed it while we opened it: again. */
		if (fstat(fd, &sb) == 0 && sb.st_nlink > 0)
			return fd;
		close(fd);
		fd = -1;
	}
	*ex = wk_err(EX_TEMPFAIL_, "%s/checkpoints/%s: removed as it was opened", st->path, job);
	return -1;
}

int cmd_receive_checkpoint(struct wk_state *st, int argc, char **argv)
{
	struct rcv r = { .st = st, .jobfd = -1, .partfd = -1, .fd = -1, .pfd = -1 };
	struct sigaction sa;
	unsigned char *buf = NULL;
	struct wire_rec out = { 0 };
	char *path = NULL;
	int rc = 0, made, done = 0;

	if (argc != 2)
		return wk_err(EX_USAGE_, "usage: %s [-d STATE_DIR] receive-checkpoint JOB_ID ATTEMPT_ID", PROG);
	if (!job_id_ok(argv[0]))
		return wk_err(EX_USAGE_, "receive-checkpoint: %s: not a job ID", argv[0]);
	if (!wk_id_ok(argv[1]))
		return wk_err(EX_USAGE_, "receive-checkpoint: %s: not an attempt ID", argv[1]);
	r.job = argv[0];
	r.att = argv[1];
	/* ssh's connection cut, or the daemon gone: the stream ends (EOF
	 * or EINTR), never the process in the middle of a write. */
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0;
	if (sigaction(SIGTERM, &sa, NULL) < 0 || sigaction(SIGINT, &sa, NULL) < 0)
		return wk_errsys(EX_OSERR_, "sigaction");
	ck_init(&r.p);
	if (!(r.part = xasprintf("%s.part", r.att)) ||
	    !(r.where = xasprintf("%s/checkpoints/%s", st->path, r.job)) || !(buf = malloc(CK_CHUNK))) {
		rc = wk_errsys(EX_OSERR_, "out of memory");
		goto out;
	}
	if ((r.jobfd = open_job(st, r.job, 1, &rc)) < 0)
		goto out;
	/* An older copy of this attempt, or an interrupted one. */
	if (rm_tree(r.jobfd, r.att) < 0 || rm_tree(r.jobfd, r.part) < 0) {
		rc = wk_errsys(EX_IOERR_, "receive-checkpoint: removing the old copy in %s", r.where);
		goto out;
	}
	if ((r.partfd = subdir(r.jobfd, r.part, 1, &made)) < 0) {
		rc = wk_err(fs_ex(errno), "receive-checkpoint: %s/%s: %s", r.where, r.part, strerror(errno));
		goto out;
	}
	while (!done) {
		ssize_t n;

		if (stop_sig) {
			rc = rcv_fail(&r, EX_TEMPFAIL_, "stopped by %s after %" PRIu64 " of %" PRIu64 " bytes",
				      wk_signame(stop_sig) ? wk_signame(stop_sig) : "a signal",
				      r.p.bytes - r.p.remaining, r.p.total);
			goto out;
		}
		n = read(STDIN_FILENO, buf, CK_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = rcv_fail(&r, EX_IOERR_, "reading the stream: %s", strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		for (size_t off = 0; off < (size_t)n;) {
			struct ck_event ev;
			long k = ck_feed(&r.p, buf + off, (size_t)n - off, &ev);

			if (k < 0) {
				rc = r.p.why ? rcv_fail(&r, EX_DATAERR_, "%s%s", r.p.sum_bad ? "" : "bad stream ",
							r.p.why)
					     : rcv_fail(&r, EX_OSERR_, "out of memory");
				goto out;
			}
			off += (size_t)k;
			if ((rc = rcv_event(&r, &ev)))
				goto out;
		}
	}
	if (!ck_complete(&r.p)) {
		rc = r.p.off == 0 || r.p.entries == 0
		     ? rcv_fail(&r, EX_TEMPFAIL_, "the stream ended before its header (the sender stopped)")
		     : rcv_fail(&r, EX_TEMPFAIL_, "the stream ended after %" PRIu64 " of %" PRIu64
				" bytes (the sender stopped)", r.p.bytes - r.p.remaining, r.p.total);
		goto out;
	}
	if ((rc = rcv_commit(&r)))
		goto out;
	/* The answer: where the copy's root is, its size and checksum. */
	if (!(path = xasprintf("%s/%s/%s", r.where, r.att, r.root)) || wire_add(&out, "path", path) < 0 ||
	    wk_set_ll(&out, "bytes", (long long)r.p.total) < 0 || wire_add(&out, "sha256", r.p.sum) < 0 ||
	    wk_print(&out) < 0)
		rc = wk_errsys(EX_OSERR_, "stdout");
out:
	free(path);
	wire_free(&out);
	if (r.fd >= 0)
		close(r.fd);
	if (r.pfd >= 0)
		close(r.pfd);
	if (r.partfd >= 0)
		close(r.partfd);
	if (r.jobfd >= 0)
		close(r.jobfd);
	for (size_t i = 0; i < r.ndirs; i++)
		free(r.dirs[i].name);
	free(r.dirs);
	free(r.pname);
	free(r.fname);
	free(r.root);
	free(r.part);
	free(r.where);
	free(buf);
	ck_free(&r.p);
	return rc;
}

/* ---- drop-checkpoints ----------------------------------------------------- */

int cmd_drop_checkpoints(struct wk_state *st, int argc, char **argv)
{
	int ckfd, made, rc = 0;

	if (argc < 1)
		return wk_err(EX_USAGE_, "usage: %s [-d STATE_DIR] drop-checkpoints JOB_ID...", PROG);
	/* Every ID checked before anything is removed. */
	for (int i = 0; i < argc; i++)
		if (!job_id_ok(argv[i]))
			return wk_err(EX_USAGE_, "drop-checkpoints: %s: not a job ID", argv[i]);
	if ((ckfd = subdir(st->fd, "checkpoints", 0, &made)) < 0)
		return errno == ENOENT ? 0 : wk_err(EX_IOERR_, "%s/checkpoints: %s", st->path,
						     errno == ELOOP || errno == ENOTDIR
						     ? "a symbolic link or not a directory (not followed)"
						     : strerror(errno));
	for (int i = 0; i < argc && !rc; i++) {
		struct stat sb;
		int fd;

		/* A link or a file in its place is removed, not followed. */
		if (fstatat(ckfd, argv[i], &sb, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(sb.st_mode)) {
			if (unlinkat(ckfd, argv[i], 0) < 0 && errno != ENOENT)
				rc = wk_errsys(EX_IOERR_, "drop-checkpoints: %s/checkpoints/%s", st->path, argv[i]);
			continue;
		}
		/* Held by a receive under way: its lock (open_job) kept. */
		if ((fd = open_job(st, argv[i], 0, &rc)) < 0)
			continue;
		if (rm_tree(ckfd, argv[i]) < 0)
			rc = wk_errsys(EX_IOERR_, "drop-checkpoints: %s/checkpoints/%s", st->path, argv[i]);
		close(fd);
	}
	if (!rc && fsync_dir(ckfd) < 0)
		rc = wk_errsys(EX_IOERR_, "drop-checkpoints: %s/checkpoints", st->path);
	close(ckfd);
	return rc;
}
