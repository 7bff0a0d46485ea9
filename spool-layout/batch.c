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

void wbatch_free(struct wbatch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		if (b->v[i].tmp) {
			unlinkat(b->tmpfd, b->v[i].tmp, 0);
			free(b->v[i].tmp);
		}
		free(b->v[i].name);
	}
	free(b->v);
	memset(b, 0, sizeof *b);
	b->tmpfd = -1;
}

void wbatch_drop_last(struct wbatch *b)
{
	struct wbatch_ent *e;

	if (!b->n)
		return;
	e = &b->v[--b->n];
	if (e->tmp) {
		unlinkat(b->tmpfd, e->tmp, 0);
		free(e->tmp);
	}
	free(e->name);
}

int wbatch_add(struct wbatch *b, int tmpfd, int dstfd, const char *name,
	       const void *buf, size_t len, mode_t mode)
{
	struct wbatch_ent *e;
	int fd, saved;

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
	e->name = strdup(name);
	e->tmp = xasprintf(".%ld.b%lu.%s", (long)getpid(), ++batch_counter, name);
	if (!e->name || !e->tmp)
		goto fail_nofile;
	fd = openat(tmpfd, e->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		goto fail_nofile;
	if (fchmod(fd, mode) < 0 || write_full(fd, buf, len) < 0) {
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
	unlinkat(tmpfd, e->tmp, 0);
	errno = saved;
fail_nofile:
	saved = errno;
	free(e->tmp);
	free(e->name);
	errno = saved;
	return -1;
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

		if (renameat(b->tmpfd, e->tmp, e->dstfd, e->name) < 0)
			return -1;      /* wbatch_free removes what is left */
		free(e->tmp);
		e->tmp = NULL;
		if (i == 0 && b->n > 1)
			CRASH_POINT("batch: renamed one", NULL);        /* a part in place */
	}
	for (size_t i = 0; i < b->n; i++) {
		size_t k;

		for (k = 0; k < i && b->v[k].dstfd != b->v[i].dstfd; k++)
			;
		if (k == i && fsync_dir(b->v[i].dstfd) < 0)
			return -1;
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
