/*
 * batch.h - many atomic writes, three syncs (batch.c, LAYOUT.md §3).
 */
#ifndef CARDBATON_BATCH_H
#define CARDBATON_BATCH_H

#include <stddef.h>
#include <sys/types.h>

#include "record.h"
#include "spooldir.h"

struct wbatch_ent {
	int dstfd;
	char *name;
	char *tmp;              /* its temp file in tmp/; NULL once renamed */
	int replaces;           /* DSTFD/NAME is there: the commit exchanges */
};

/*
 * Spare files (LAYOUT.md §3, "Spare files"): the files of records the
 * daemon replaced or moved, kept in tmp/ as .PID.sK so that the next
 * writes reuse their inodes instead of making new ones and freeing the
 * old (what a file system charges most for: a new inode, and on some
 * the discard of a freed block).  A spare is *pending* until the
 * directory it left has been fsynced -- until then a crash could give
 * it back its old name, and the new data written into it with it --
 * and only then *ready* to be written.
 */
struct spare_pending {
	char *name;                     /* in tmp/ */
	int dirfd;                      /* the directory it left */
};

struct spares {
	char **ready;                   /* names in tmp/ */
	struct spare_pending *pending;
	size_t nready, npending;        /* SPARES_MAX in all */
	int noexchange;                 /* the file system has no RENAME_EXCHANGE */
};

#define SPARES_MAX 1024                 /* a start-up batch of submissions (ACCEPT_BATCH) */

struct wbatch {
	int tmpfd;
	struct wbatch_ent *v;
	size_t n, cap;
	struct spares *spares;          /* NULL: every file new, none kept */
};

#define WBATCH_INIT { -1, NULL, 0, 0, NULL }
#define WBATCH_SYNCFS 16        /* from this many files on, one syncfs */

/* Stage DSTFD/NAME: a complete temp file in TMPFD (one TMPFD per
 * batch), mode exactly MODE, not yet synced.  0 or -1/errno. */
int wbatch_add(struct wbatch *b, int tmpfd, int dstfd, const char *name,
	       const void *buf, size_t len, mode_t mode);
/* syncfs(SYNCFD), rename every staged file into place, fsync each
 * destination directory once.  0 or -1/errno (the files not yet renamed
 * stay staged: wbatch_free takes them back).  With spares, a file staged
 * with replaces set is exchanged with the one it replaces, which
 * becomes a spare, ready once its directory is synced. */
int wbatch_commit(struct wbatch *b, int syncfd);
/* Take back the file staged last (its temp file a spare, or removed). */
void wbatch_drop_last(struct wbatch *b);
/* What is still staged taken back (a spare, or removed); B is empty
 * and reusable, its spares kept. */
void wbatch_free(struct wbatch *b);
/* DIRFD/NAME, a file no longer needed, moved into TMPFD as a spare
 * pending on DIRFD, or unlinked when P is full or NULL.  0 or -1/errno,
 * as unlinkat. */
int spares_keep(struct spares *p, int tmpfd, int dirfd, const char *name);
/* DIRFD has been fsynced: the spares that left it are ready. */
void spares_settle(struct spares *p, int dirfd);
/* Every spare unlinked from TMPFD, P emptied. */
void spares_free(struct spares *p, int tmpfd);
/* A record change's write for a batch: J's record (rev + 1) staged for its
 * state's directory.  The caller removes the old copy after the commit. */
int spool_stage(struct spool *sp, struct wbatch *b, struct job *j, struct cb_err *err);

#endif
