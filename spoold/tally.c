/*
 * tally.c - a lab's users as the daemon counts them (SPEC §12; lab.h):
 * per owner, the jobs not ended (max_queued), and the usage of the
 * attempts that are over -- decayed for fair share, plain for the
 * metrics.  Made from the records at start-up (tally_load: the one
 * read of every record, so that usage is the same after a restart or a
 * kill -9 as before), then kept by the step function (jobs.c
 * count_step: tally_step) and the acceptance (accept.c).  What the
 * running attempts hold and have used so far is read off the running
 * table when it is asked for (tally_now), never kept.
 *
 * Users are never removed: an index (tally_of's + 1, as qent.user and
 * rent.user keep it) stays good while the daemon runs.
 */
#include <pwd.h>
#include <stdlib.h>
#include <string.h>

#include "spoold.h"

/* The user of UID (the name NAME, when it is made here), or NULL (out of
 * memory). */
struct tally *tally_of(struct daemon *d, long long uid, const char *name)
{
	struct tally *v;

	for (size_t i = 0; i < d->ntally; i++)
		if (d->tally[i].uid == uid)
			return &d->tally[i];
	if (!(v = realloc(d->tally, (d->ntally + 1) * sizeof *v)))
		return NULL;
	d->tally = v;
	v = &d->tally[d->ntally];
	memset(v, 0, sizeof *v);
	v->uid = uid;
	if (!(v->name = name ? strdup(name) : uid < 0 ? strdup("-") : lab_user_name((uid_t)uid)))
		return NULL;
	v->lim = lab_limits_of(d->cfg.lab, uid < 0 ? NULL : v->name);
	v->usage_at = now_ms();
	d->ntally++;
	return v;
}

/* Job J's owner's (the jobs without an owner's: uid -1), or NULL. */
static struct tally *tally_of_job(struct daemon *d, const struct job *j)
{
	return tally_of(d, j->owner ? j->owner_uid : -1, j->owner);
}

/* Job J's owner's index + 1 (qent.user, rent.user); 0 without a lab, or
 * out of memory. */
size_t tally_index(struct daemon *d, const struct job *j)
{
	struct tally *t;

	if (!d->cfg.lab || !(t = tally_of_job(d, j)))
		return 0;
	return (size_t)(t - d->tally) + 1;
}

/* Attempt A (over) of T's: its cards x seconds, from its start to its
 * end, join T's usage. */
static void attempt_used(struct daemon *d, struct tally *t, const struct attempt *a, long long now)
{
	long long half = lab_half_life_ms(d->cfg.lab->half_life_hours);

	t->usage = lab_decay(t->usage, t->usage_at, now, half) + lab_attempt_usage(a, now, half);
	t->usage_at = now;
	t->gpu_seconds += lab_attempt_usage(a, now, 0);
}

void tally_step(struct daemon *d, const struct job *j, enum job_state from, int attempt_ended)
{
	struct tally *t;
	const struct attempt *a = job_last_attempt(j);

	if (!d->cfg.lab || !(t = tally_of_job(d, j)))
		return;
	if (job_state_final(j->state) && !job_state_final(from))
		t->jobs--;
	if (attempt_ended && a)
		attempt_used(d, t, a, now_ms());
}

/* Every record of DIR into the tallies: its job counted when not ended,
 * its attempts that are over used (a running one's last attempt is the
 * running table's, tally_now). */
static void load_dir(struct daemon *d, enum spool_dir dir, long long now)
{
	char **names;
	size_t n;

	if (spool_list(&d->sp, dir, &names, &n) < 0) {
		logmsg("%s/%s: cannot list it; its usage is not counted", d->sp.path,
		       spool_dir_name[dir]);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct cb_err err = { 0 };
		struct tally *t;
		struct job j;

		long long prio, id;

		if (dir == SD_QUEUED ? name_parse_queued(names[i], &prio, &id) < 0 :
		    name_parse_plain(names[i], &id) < 0)
			continue;
		if (spool_load(&d->sp, dir, names[i], &j, &err) < 0) {
			cb_err_free(&err);      /* load_records and dedupe say so */
			continue;
		}
		if (!(t = tally_of_job(d, &j))) {
			logmsg("users: out of memory");
			job_free(&j);
			break;
		}
		t->jobs += !job_state_final(j.state);
		for (size_t k = 0; k < j.natt; k++)
			if (dir != SD_RUNNING || k + 1 < j.natt)
				attempt_used(d, t, &j.att[k], now);
		job_free(&j);
	}
	spool_list_free(names, n);
}

void tally_load(struct daemon *d)
{
	static const enum spool_dir dirs[] = { SD_QUEUED, SD_RUNNING, SD_PAUSED, SD_DONE };
	long long now = now_ms();

	if (!d->cfg.lab)
		return;
	/* Every named user is shown (users, metrics) from the start. */
	for (size_t u = 0; u < d->cfg.lab->nusers; u++) {
		struct passwd *pw = getpwnam(d->cfg.lab->users[u].name);

		if (pw && !tally_of(d, (long long)pw->pw_uid, pw->pw_name))
			logmsg("users: out of memory");
	}
	for (size_t k = 0; k < sizeof dirs / sizeof *dirs; k++)
		load_dir(d, dirs[k], now);
}

void tally_now(const struct daemon *d, long long now, double *eff, long long *held,
	       double *gpu_seconds)
{
	long long half = lab_half_life_ms(d->cfg.lab->half_life_hours);

	for (size_t u = 0; u < d->ntally; u++) {
		const struct tally *t = &d->tally[u];

		eff[u] = lab_decay(t->usage, t->usage_at, now, half);
		held[u] = 0;
		if (gpu_seconds)
			gpu_seconds[u] = t->gpu_seconds;
	}
	for (size_t i = 0; i < d->nr; i++) {
		const struct rent *e = &d->r[i];
		size_t u = e->user;

		if (!u--)
			continue;
		held[u] += (long long)e->ncards;
		if (e->started && !e->staged && !e->launching && e->started < now) {
			eff[u] += lab_span((long long)e->ncards, e->started, now, now, half);
			if (gpu_seconds)
				gpu_seconds[u] += lab_span((long long)e->ncards, e->started, now, now, 0);
		}
	}
	for (size_t u = 0; u < d->ntally; u++)
		eff[u] /= (double)d->tally[u].lim->shares;
}
