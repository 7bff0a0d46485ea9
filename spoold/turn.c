/*
 * turn.c - one loop turn's record writes, made durable together, and
 * what waits for them.
 *
 * Every transition of a turn (job_step) stages its job's new record in
 * one batch (batch.c: the whole file in tmp/, not yet synced) and its
 * old name to be removed; the daemon's memory follows at once.  What a
 * node is to be told of a record (launch, cancel, pause), and the
 * removal of a control request applied to it, waits as an effect.  At
 * the end of the turn, before the loop sleeps, turn_commit makes the
 * records durable -- the temp files' data synced, every rename, one
 * fsync of each directory renamed into; then the old names removed
 * (kept in tmp/ as spares for the next writes, batch.c), one fsync of
 * each of their directories -- and only then runs the
 * effects, in the order they were asked.  So, as with one atomic write
 * per record (LAYOUT.md §6), a node never hears of a record the spool
 * could still lose, and a crash anywhere leaves each record old or new
 * (two copies between the rename and the removal: the higher rev wins).
 * Under load a turn carries many transitions, and their syncs are paid
 * once (group commit).
 *
 * A record that goes into done/ (the job ended) takes its pending
 * on_finish hook with it (hooks.c): hooks/S.hook is staged just before
 * the record, so that its rename comes first -- a crash can leave the
 * hook without the final record (it waits for the job's end, which
 * writes it again), never the final record without its hook -- and the
 * hook is due once the commit is done.
 *
 * A record staged this turn cannot be read back from the spool before
 * the commit: whoever reads it (job_step, send_launch, the look in
 * paused/) commits first (turn_settle).  The effects never step a job,
 * so a commit from within a step is safe.  Staging fails the way a
 * write does (a full disk: write_failed, nothing changed); a commit that
 * fails after staging (fsync or rename: an I/O error, the file system
 * gone read-only under us) leaves the daemon's memory ahead of the
 * spool, and the daemon exits 74 -- its restart takes up from the spool,
 * as after a crash (cardbaton-spoold(1)).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spoold.h"

struct staged {
	long long id;
	enum spool_dir from;            /* the old copy's directory ... */
	char *from_name;                /* ... and name; NULL: none to remove */
	int hook;                       /* hooks/ID.hook: the hook is due once committed */
};

static int grow(void **v, size_t *cap, size_t n, size_t size)
{
	void *nv;
	size_t ncap = *cap ? 2 * *cap : 16;

	if (n < *cap)
		return 0;
	if (!(nv = realloc(*v, ncap * size)))
		return -1;
	*v = nv;
	*cap = ncap;
	return 0;
}

int turn_stage(struct daemon *d, struct job *j, enum spool_dir from, const char *from_name)
{
	struct cb_err err = { 0 };
	struct staged *s;
	struct wbatch_ent *e;
	int hook;
#ifdef CB_CRASH_POINTS
	char trans[64];

	snprintf(trans, sizeof trans, "%s->%s", spool_dir_name[from], spool_dir_name[job_state_dir(j->state)]);
#else
	const char *trans = NULL;
#endif

	/* Room for two: the hook's file and the record. */
	if (grow((void **)&d->staged, &d->capstaged, d->turn.n + 1, sizeof *d->staged) < 0 ||
	    (hook = from != SD_DONE && job_state_final(j->state) ? hook_stage(d, j, &err) : 0) < 0)
		goto fail;
	if (hook)
		d->staged[d->turn.n - 1] = (struct staged){ j->id, SD_N, NULL, 1 };
	if (spool_stage(&d->sp, &d->turn, j, &err) < 0) {
		if (hook)
			wbatch_drop_last(&d->turn);
		goto fail;
	}
	CRASH_POINT("stage", trans);
	e = &d->turn.v[d->turn.n - 1];
	s = &d->staged[d->turn.n - 1];
	s->id = j->id;
	s->from = from;
	s->from_name = NULL;
	s->hook = 0;
	/* The commit exchanges it with a copy of the same name in the same
	 * place (that copy a spare, batch.c); an old copy elsewhere is
	 * removed after the commit, and one left for want of memory loses
	 * to the higher rev. */
	if (from_name && d->sp.dir[from] == e->dstfd && !strcmp(from_name, e->name))
		e->replaces = 1;
	else if (from_name && !(s->from_name = strdup(from_name)))
		logmsg("job %lld: out of memory; its old copy stays", j->id);
	return 0;
fail:
	if (!err.msg)
		cb_err_sys(&err, EX_OSERR_, "job %lld", j->id);
	write_failed(d, err.ex, err.msg);
	cb_err_free(&err);
	return -1;
}

int turn_staged(const struct daemon *d, long long id)
{
	for (size_t i = 0; i < d->turn.n; i++)
		if (d->staged[i].id == id)
			return 1;
	return 0;
}

void turn_settle(struct daemon *d, long long id)
{
	if (turn_staged(d, id))
		turn_commit(d);
}

void turn_after(struct daemon *d, const struct effect *ef)
{
	struct effect *e;

	if (!d->turn.n) {
		effect_run(d, ef);      /* nothing to wait for */
		return;
	}
	if (grow((void **)&d->after, &d->capafter, d->nafter, sizeof *d->after) < 0) {
		turn_commit(d);         /* no room to wait: commit, then run it */
		effect_run(d, ef);
		return;
	}
	e = &d->after[d->nafter++];
	*e = *ef;
	e->name = ef->name ? strdup(ef->name) : NULL;
	e->aid = ef->aid ? strdup(ef->aid) : NULL;
	if ((ef->name && !e->name) || (ef->aid && !e->aid)) {
		d->nafter--;
		free(e->name);
		free(e->aid);
		turn_commit(d);
		effect_run(d, ef);
	}
}

static void fatal(struct daemon *d, const char *dir)
{
	logmsg("cannot make this turn's records durable (%s/%s: %s); stopping: a restart takes "
	       "up from the spool", d->sp.path, dir, strerror(errno));
	exit(EX_IOERR_);
}

static void commit_records(struct daemon *d)
{
	unsigned char removed[SD_N] = { 0 };

	if (wbatch_commit(&d->turn, d->sp.fd) < 0)
		fatal(d, "tmp");
	CRASH_POINT("turn: renamed", NULL);
	for (size_t i = 0; i < d->turn.n; i++) {
		struct staged *s = &d->staged[i];

		if (!s->from_name)
			continue;
		if (spares_keep(&d->spares, d->sp.dir[SD_TMP], d->sp.dir[s->from], s->from_name) == 0 ||
		    errno == ENOENT)
			removed[s->from] = 1;
		else    /* the higher rev wins */
			logmsg("job %lld: its old copy %s/%s stays: %s", s->id,
			       spool_dir_name[s->from], s->from_name, strerror(errno));
		free(s->from_name);
	}
	for (int k = 0; k < SD_N; k++)
		if (removed[k]) {
			if (fsync_dir(d->sp.dir[k]) < 0)
				fatal(d, spool_dir_name[k]);
			spares_settle(&d->spares, d->sp.dir[k]);
		}
	CRASH_POINT("turn: committed", NULL);
	for (size_t i = 0; i < d->turn.n; i++)
		if (d->staged[i].hook)
			hook_due(d, d->staged[i].id);
	wbatch_free(&d->turn);
	write_ok(d);
}

int turn_commit(struct daemon *d)
{
	int did = 0;

	while (d->turn.n || d->nafter) {
		struct effect *v = d->after;
		size_t n = d->nafter;

		did = 1;
		if (d->turn.n)
			commit_records(d);
		d->after = NULL;
		d->nafter = d->capafter = 0;
		for (size_t i = 0; i < n; i++) {
			effect_run(d, &v[i]);
			free(v[i].name);
			free(v[i].aid);
		}
		free(v);
	}
	return did;
}

void turn_free(struct daemon *d)
{
	for (size_t i = 0; i < d->turn.n; i++)
		free(d->staged[i].from_name);
	wbatch_free(&d->turn);
	spares_free(&d->spares, d->sp.dir[SD_TMP]);
	free(d->staged);
	for (size_t i = 0; i < d->nafter; i++) {
		free(d->after[i].name);
		free(d->after[i].aid);
	}
	free(d->after);
	free(d->resv);
}
