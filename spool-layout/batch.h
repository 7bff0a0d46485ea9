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
};

struct wbatch {
	int tmpfd;
	struct wbatch_ent *v;
	size_t n, cap;
};

#define WBATCH_INIT { -1, NULL, 0, 0 }
#define WBATCH_SYNCFS 16        /* from this many files on, one syncfs */

/* Stage DSTFD/NAME: a complete temp file in TMPFD (one TMPFD per
 * batch), mode exactly MODE, not yet synced.  0 or -1/errno. */
int wbatch_add(struct wbatch *b, int tmpfd, int dstfd, const char *name,
	       const void *buf, size_t len, mode_t mode);
/* syncfs(SYNCFD), rename every staged file into place, fsync each
 * destination directory once.  0 or -1/errno (the files not yet renamed
 * stay staged: wbatch_free removes them). */
int wbatch_commit(struct wbatch *b, int syncfd);
/* Take back the file staged last (its temp file removed). */
void wbatch_drop_last(struct wbatch *b);
/* Remove what is still staged; B is empty and reusable. */
void wbatch_free(struct wbatch *b);
/* A record change's write for a batch: J's record (rev + 1) staged for its
 * state's directory.  The caller removes the old copy after the commit. */
int spool_stage(struct spool *sp, struct wbatch *b, struct job *j, struct cb_err *err);

#endif
