/*
 * index.h - SPOOL/queued.idx, a cache of queued/ for status (LAYOUT.md §11):
 * its format, reader and writer (index.c) and the daemon's writer
 * child (indexd.c).
 */
#ifndef CARDBATON_INDEX_H
#define CARDBATON_INDEX_H

#include <sys/types.h>

#include "spooldir.h"
#include "view.h"

/*
 * queued.idx (LAYOUT.md §11) holds, for each record in queued/, what
 * `status` shows of it.  It is a cache, never the truth: a reader uses
 * it only while queued/ has exactly the device, inode, ctime and mtime
 * it was made for, and the writer records those only once they are
 * INDEX_SETTLE_MS old (file times come from a coarse clock: a later
 * change must move them).  Only the daemon writes it.
 */
#define INDEX_NAME "queued.idx"
#define INDEX_SETTLE_MS 50      /* queued/ unchanged this long before it is indexed */
#define INDEX_GAP_MS 500        /* at least this between two writes */

/* A directory as the index knows it: any entry made, renamed or
 * removed in it changes ctime and mtime. */
struct index_key {
	unsigned long long dev, ino;
	long long ctime, mtime;         /* ns since the epoch */
};
int index_key_of(int dirfd, struct index_key *k);
int index_key_eq(const struct index_key *a, const struct index_key *b);
/* ms until a change made at CTIME_NS (ns since the epoch) has settled,
 * INDEX_SETTLE_MS after it; <= 0 once it has. */
long long index_settle_left(long long ctime_ns);

struct index_ent {
	long long id;           /* the ID of its queued/ name */
	const char *name;       /* its queued/ name */
	long long ino, ctime;   /* of that file when it was read; ctime 0: unsettled */
	int raw;                /* not summarised (not a regular file, not a valid
				 * record): read queued/NAME as without the index */
	int in_done;            /* done/ held a record of the same ID too */
	struct status_view v;   /* unless raw */
};

struct spool_index {
	char *buf;              /* the file (or its part read); entries point into it */
	size_t len, mapped;
	struct index_ent *e;    /* in the order of their queued/ names */
	size_t n, e_mapped;     /* e_mapped: E's mapping's size (0: malloc'd) */
	struct index_key queued, done;  /* what it was made for */
	int has_done;           /* done is known (in_done exact while done/ is as then) */
	int done_fresh;         /* index_read: done/ is as it was then */
	int ascending;          /* the IDs ascend from line to line (none twice) */
	size_t n_in_done;       /* lines with in_done */
};

/* Parse queued.idx text BUF[0..LEN) (NUL-terminated at LEN; decoded in
 * place) into IX: the header and the table section, and WITH_JSON the
 * rest (the elements; BUF is then exactly the file).  0, or -1 with
 * errno EINVAL (malformed, or of another version) or ENOMEM.  IX's
 * entries point into BUF, which it does not own. */
int index_parse(char *buf, size_t len, int with_json, struct spool_index *ix);
/* Read SPOOL/queued.idx for a reader (the --json elements only
 * WITH_JSON): 1 when it describes queued/ as it is now (IX filled;
 * done_fresh set), else 0 (missing, stale, malformed, a symlink, too
 * large for memory: IX empty; read queued/ instead). */
int index_read(struct spool *sp, int with_json, struct spool_index *ix);
void index_free(struct spool_index *ix);

/* Write SPOOL/queued.idx from queued/ (atomic_write), reusing the
 * current index's lines whose files are unchanged.  1 written or
 * already current, 0 not now (queued/ changed less than
 * INDEX_SETTLE_MS ago, or while it was read), -1 with errno. */
int index_write(struct spool *sp);

/* The daemon's writer (indexd.c): index_write in a child process (the loop never
 * waits for it), when queued/ or done/ changed and queued/ settled, at
 * most every INDEX_GAP_MS (more when it takes long). */
struct index_writer {
	pid_t pid;              /* the child in flight, or 0 */
	long long started, next_at, backoff;    /* monotonic ms */
	int have;               /* made: an index for queued and done */
	struct index_key queued, done, fq, fd;  /* made for / at the fork */
};
/* Call on every turn of the loop, TIMEOUT the loop's poll timeout (ms,
 * -1 none): returns the timeout to use.  Never fails (a cache). */
int index_tick(struct index_writer *w, struct spool *sp, int timeout);
/* Wait for the child in flight (at most a few seconds; then kill it). */
void index_stop(struct index_writer *w);

#endif
