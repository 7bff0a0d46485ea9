/*
 * batch.c - many atomic writes for the price of a few syncs.
 *
 * atomic_write costs two syncs per file (the file, then its
 * directory).  A batch makes the same promise for N files with N + 1,
 * or, from WBATCH_SYNCFS files on, with three:
 *
 *   wbatch_add      each file complete in a temp file of tmp/ (no sync);
 *   wbatch_commit   an fsync of each temp file -- or, for a large batch,
 *                   one syncfs(2) of the spool's file system, every temp
 *                   file's data at once -- then every rename, then one
 *                   fsync of each directory renamed into.
 *
 * syncfs also waits for whatever else is dirty on that file system (a
 * checkpoint being written, say), which is why small batches, the
 * usual case, do not use it: it pays only for a flood of submissions.
 *
 * A crash leaves each file either absent (its temp file in tmp/, removed
 * at start-up when old) or complete under its name, exactly as N
 * atomic_writes would: no name is ever given to data not yet synced.
 * LAYOUT.md §3.
 *
 * Spare files (the daemon's batches): a temp file is a ready spare
 * written over -- its old data is no record's any more -- rather than a
 * new inode, and the file a rewrite replaces is exchanged into tmp/
 * (RENAME_EXCHANGE) rather than freed by the rename, to be the next
 * spare.  Before a spare is written, the directory it left has been
 * fsynced (pending until then), so no crash can put its old name back
 * on the new data.  A spare that is not a regular file of ours with one
 * link (someone linked a record elsewhere) is removed, never written.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"
#include "crash.h"
#include "names.h"

static unsigned long batch_counter;

static int spares_alloc(struct spares *p)
{
	if (p->ready)
		return 0;
	p->ready = calloc(SPARES_MAX, sizeof *p->ready);
	p->pending = calloc(SPARES_MAX, sizeof *p->pending);
	if (p->ready && p->pending)
		return 0;
	free(p->ready);
	free(p->pending);
	p->ready = NULL;
	p->pending = NULL;
	return -1;
}

static int spares_room(struct spares *p)
{
	return p && p->nready + p->npending < SPARES_MAX && spares_alloc(p) == 0;
}

int spares_keep(struct spares *p, int tmpfd, int dirfd, const char *name)
{
	char *spare;

	if (!spares_room(p) || !(spare = xasprintf(".%ld.s%lu", (long)getpid(), ++batch_counter)))
		return unlinkat(dirfd, name, 0);
	if (renameat(dirfd, name, tmpfd, spare) < 0) {
		int saved = errno;

		free(spare);
		errno = saved;
		return -1;
	}
	p->pending[p->npending++] = (struct spare_pending){ spare, dirfd };
	return 0;
}

void spares_settle(struct spares *p, int dirfd)
{
	for (size_t i = 0; p && i < p->npending;)
		if (p->pending[i].dirfd == dirfd) {
			p->ready[p->nready++] = p->pending[i].name;
			p->pending[i] = p->pending[--p->npending];
		} else {
			i++;
		}
}

void spares_free(struct spares *p, int tmpfd)
{
	while (p->npending) {
		unlinkat(tmpfd, p->pending[--p->npending].name, 0);
		free(p->pending[p->npending].name);
	}
	while (p->nready) {
		unlinkat(tmpfd, p->ready[--p->nready], 0);
		free(p->ready[p->nready]);
	}
	free(p->ready);
	free(p->pending);
	memset(p, 0, sizeof *p);
}

/* A ready spare of P in TMPFD, open for writing, its name in *NAME; -1
 * when none is left, or none can be opened now (a read-only file
 * system: it stays for later).  Those not fit to be written over are
 * removed. */
static int spare_open(struct spares *p, int tmpfd, char **name)
{
	struct stat st;

	while (p && p->nready) {
		char *spare = p->ready[--p->nready];
		int fd = openat(tmpfd, spare, O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);

		if (fd < 0 && errno != ENOENT && errno != ELOOP && errno != EISDIR && errno != ENXIO) {
			p->ready[p->nready++] = spare;
			return -1;
		}
		if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 &&
		    st.st_uid == geteuid()) {
			*name = spare;
			return fd;
		}
		if (fd >= 0)
			close(fd);
		unlinkat(tmpfd, spare, 0);
		free(spare);
	}
	return -1;
}

/* TMP, a temp file of B never given its name (a write or commit that
 * failed, a dropped entry): a ready spare -- it is ours, in tmp/, and
 * never had another name -- or, with no room, removed.  Not freeing
 * it keeps a full disk full: nothing fails its way into room for
 * the next try. */
static void untemp(struct wbatch *b, char *tmp)
{
	if (spares_room(b->spares)) {
		b->spares->ready[b->spares->nready++] = tmp;
		return;
	}
	unlinkat(b->tmpfd, tmp, 0);
	free(tmp);
}

void wbatch_free(struct wbatch *b)
{
	struct spares *p = b->spares;

	for (size_t i = 0; i < b->n; i++) {
		if (b->v[i].tmp)
			untemp(b, b->v[i].tmp);
		free(b->v[i].name);
	}
	free(b->v);
	memset(b, 0, sizeof *b);
	b->tmpfd = -1;
	b->spares = p;
}

void wbatch_drop_last(struct wbatch *b)
{
	struct wbatch_ent *e;

	if (!b->n)
		return;
	e = &b->v[--b->n];
	if (e->tmp)
		untemp(b, e->tmp);
	free(e->name);
}

int wbatch_add(struct wbatch *b, int tmpfd, int dstfd, const char *name,
	       const void *buf, size_t len, mode_t mode)
{
	struct wbatch_ent *e;
	int fd, saved, reused = 0;

	if (b->n && tmpfd != b->tmpfd) {
		errno = EINVAL;
		return -1;
	}
	b->tmpfd = tmpfd;
	if (b->n == b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 64;
		struct wbatch_ent *v = realloc(b->v, cap * sizeof *v);

		if (!v)
			return -1;
		b->v = v;
		b->cap = cap;
	}
	e = &b->v[b->n];
	e->dstfd = dstfd;
	e->replaces = 0;
	e->tmp = NULL;
	if (!(e->name = strdup(name)))
		goto fail_nofile;
	if ((fd = spare_open(b->spares, tmpfd, &e->tmp)) >= 0) {
		reused = 1;
	} else {
		if (!(e->tmp = xasprintf(".%ld.b%lu.%s", (long)getpid(), ++batch_counter, name)))
			goto fail_nofile;
		fd = openat(tmpfd, e->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (fd < 0)
			goto fail_nofile;
	}
	/* A spare is written over, not truncated first: its block stays. */
	if (fchmod(fd, mode) < 0 || write_full(fd, buf, len) < 0 ||
	    (reused && ftruncate(fd, (off_t)len) < 0)) {
		saved = errno;
		close(fd);
		errno = saved;
		goto fail;
	}
	if (close(fd) < 0)
		goto fail;
	b->n++;
	return 0;
fail:
	saved = errno;
	untemp(b, e->tmp);
	e->tmp = NULL;
	errno = saved;
fail_nofile:
	saved = errno;
	free(e->tmp);
	free(e->name);
	errno = saved;
	return -1;
}

/* E's temp file exchanged with the file it replaces, which stays in
 * tmp/ under the temp name as a pending spare: 1.  0: not done (no
 * room, no such file, no RENAME_EXCHANGE here), rename instead. */
static int exchange(struct wbatch *b, struct wbatch_ent *e)
{
	struct spares *p = b->spares;

	if (!spares_room(p) || p->noexchange)
		return 0;
	switch (exchange_at(b->tmpfd, e->tmp, e->dstfd, e->name)) {
	case 0:
		p->pending[p->npending++] = (struct spare_pending){ e->tmp, e->dstfd };
		return 1;
	case 1:
		p->noexchange = errno != ENOENT;
		return 0;
	default:
		return 0;       /* the rename says what is wrong */
	}
}

int wbatch_commit(struct wbatch *b, int syncfd)
{
	if (!b->n)
		return 0;
	if (b->n >= WBATCH_SYNCFS) {
		if (syncfs(syncfd) < 0)
			return -1;
	} else {
		for (size_t i = 0; i < b->n; i++) {
			int fd = openat(b->tmpfd, b->v[i].tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

			if (fd < 0)
				return -1;
			if (fsync(fd) < 0) {
				int saved = errno;

				close(fd);
				errno = saved;
				return -1;
			}
			close(fd);
		}
	}
	CRASH_POINT("batch: synced", NULL);
	for (size_t i = 0; i < b->n; i++) {
		struct wbatch_ent *e = &b->v[i];

		if (e->replaces && exchange(b, e))
			;               /* e->tmp now names the old file, a spare */
		else if (renameat(b->tmpfd, e->tmp, e->dstfd, e->name) < 0)
			return -1;      /* wbatch_free takes back what is left */
		else
			free(e->tmp);
		e->tmp = NULL;
		if (i == 0 && b->n > 1)
			CRASH_POINT("batch: renamed one", NULL);        /* a part in place */
	}
	for (size_t i = 0; i < b->n; i++) {
		size_t k;

		for (k = 0; k < i && b->v[k].dstfd != b->v[i].dstfd; k++)
			;
		if (k < i)
			continue;
		if (fsync_dir(b->v[i].dstfd) < 0)
			return -1;
		spares_settle(b->spares, b->v[i].dstfd);
	}
	return 0;
}

int spool_stage(struct spool *sp, struct wbatch *b, struct job *j, struct cb_err *err)
{
	enum spool_dir to = job_state_dir(j->state);
	char *name, *text = NULL;
	int r = 0;

	j->rev++;
	name = to == SD_QUEUED ? name_queued(j->priority, j->id) : name_plain(j->id);
	if (!name || !(text = job_to_json(j)))
		r = cb_err_sys(err, EX_OSERR_, "job %lld", j->id);
	else if (wbatch_add(b, sp->dir[SD_TMP], sp->dir[to], name, text, strlen(text), sp->fmode) < 0)
		r = cb_err_sys(err, spool_errno_ex(errno), "%s/tmp: job %lld", sp->path, j->id);
	free(name);
	free(text);
	return r;
}
