/*
 * lease.c - steps 3-5 of a launch (LAYOUT.md section 8): the cards'
 * UUIDs, which name their leases, the leases (leases/UUID, flocked and
 * naming their holder), and the check under them that each card is
 * still the one named and idle.  Only that check says whether a card
 * is free: no other attempt can take it meanwhile.
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "launch.h"

/* A sharing attempt's mark beside the lease of card UUID: "UUID+ID". */
static char *mark_name(const char *uuid, const char *id)
{
	return xasprintf("%s+%s", uuid, id);
}

void unmark_leases(struct launch *l)
{
	for (size_t i = 0; i < l->sp->ngpu; i++) {
		char *m = l->mark[i] >= 0 ? mark_name(l->uuid[i], l->sp->id) : NULL;

		/* A stale mark (this failing) is skipped by readers: its
		 * lock is free. */
		if (m)
			unlinkat(l->st->leasefd, m, 0);
		free(m);
	}
}

void release_leases(struct launch *l, int truncate)
{
	size_t i;

	for (i = 0; i < l->sp->ngpu; i++) {
		if (l->mark[i] >= 0) {
			close(l->mark[i]);
			l->mark[i] = -1;
		}
		if (l->lease[i] < 0)
			continue;
		if (truncate && !l->sp->share && ftruncate(l->lease[i], 0) < 0) {
			/* The content only names a holder while the lock is
			 * held, so a stale name is harmless. */
		}
		close(l->lease[i]);
		l->lease[i] = -1;
	}
}

/* Is card UUID held, shared, by an attempt other than ID (its mark
 * locked)?  The live sharers' attempt IDs into *V (malloc'd, *N) when V. */
int shared_holders(const struct wk_state *st, const char *uuid, const char *id, char ***v, size_t *n)
{
	size_t len = strlen(uuid);
	int dfd = dup(st->leasefd), found = 0;
	DIR *d;
	struct dirent *e;

	if (v) {
		*v = NULL;
		*n = 0;
	}
	if (dfd < 0 || !(d = fdopendir(dfd))) {
		if (dfd >= 0)
			close(dfd);
		return -1;
	}
	rewinddir(d);
	while ((e = readdir(d))) {
		int fd = -1, r;

		if (strncmp(e->d_name, uuid, len) || e->d_name[len] != '+' ||
		    (id && !strcmp(e->d_name + len + 1, id)))
			continue;
		r = lock_at(st->leasefd, e->d_name, LOCK_EX, 0, &fd);
		if (fd >= 0)
			close(fd);
		if (r != 0)
			continue;       /* free (stale) or gone */
		found++;
		if (v) {
			char **w = realloc(*v, (*n + 1) * sizeof *w);

			if (!w || !(w[*n] = strdup(e->d_name + len + 1))) {
				free(w ? w : *v);
				closedir(d);
				return -1;
			}
			*v = w;
			(*n)++;
		}
	}
	closedir(d);
	return found;
}

/*
 * Sharing card I: the attempt's mark, leases/UUID+ID, locked, and then
 * the sharers counted under the (shared) lease -- this one with them at
 * most the spec's max_jobs_per_gpu, or the attempt is busy.  The mark is
 * made locked under a name no reader looks at (.UUID+ID) and renamed
 * into place, so a reader's probe (shared_holders) never finds it
 * unlocked, nor makes its lock fail.  Whoever locks its mark last
 * counts all the others' (issue 32: two controllers on one node never
 * put more than N sharers on a card); two at once may both give way.
 * 0, 1 with *reason, -1 with errno.
 */
static int take_mark(struct launch *l, size_t i, char **reason)
{
	char *tmp = xasprintf(".%s+%s", l->uuid[i], l->sp->id), *m = mark_name(l->uuid[i], l->sp->id);
	size_t idlen = strlen(l->sp->id);
	int r = -1, others;

	if (tmp && m && lock_at(l->st->leasefd, tmp, LOCK_EX, 1, &l->mark[i]) == 1) {
		if (pwrite(l->mark[i], l->sp->id, idlen, 0) == (ssize_t)idlen &&
		    renameat(l->st->leasefd, tmp, l->st->leasefd, m) == 0)
			r = 0;
		else {
			unlinkat(l->st->leasefd, tmp, 0);
			close(l->mark[i]);
			l->mark[i] = -1;
		}
	}
	free(tmp);
	free(m);
	if (r < 0)
		return -1;
	if ((others = shared_holders(l->st, l->uuid[i], l->sp->id, NULL, NULL)) < 0)
		return -1;
	if (others + 1 <= l->sp->max_share)
		return 0;
	*reason = xasprintf("GPU %lld (%s): shared by %d job%s, max_jobs_per_gpu %lld", l->sp->gpu[i],
			    l->uuid[i], others, others == 1 ? "" : "s", l->sp->max_share);
	return *reason ? 1 : -1;
}

/* Step 3: every requested card exists, and its UUID (which names its
 * lease).  0, or 1 with *reason (malloc'd); -1 on out of memory. */
static int card_uuids(struct launch *l, const struct nv_info *info, char **reason)
{
	size_t i;

	*reason = NULL;
	for (i = 0; i < l->sp->ngpu; i++) {
		const struct nv_gpu *g = nv_find_index(info, l->sp->gpu[i]);

		if (!g) {
			*reason = xasprintf("GPU %lld: no such GPU on this node", l->sp->gpu[i]);
			return *reason ? 1 : -1;
		}
		if (!(l->uuid[i] = strdup(g->uuid)))
			return -1;
	}
	return 0;
}

/* Step 5: every requested card is still the one leased, and idle.  0,
 * or 1 with *reason (malloc'd); -1 on out of memory. */
static int check_cards(struct launch *l, const struct nv_info *info, char **reason)
{
	size_t i;

	*reason = NULL;
	for (i = 0; i < l->sp->ngpu; i++) {
		long long ix = l->sp->gpu[i];
		const struct nv_gpu *g = nv_find_index(info, ix);

		if (!g)
			*reason = xasprintf("GPU %lld: no such GPU on this node", ix);
		else if (l->uuid[i] && strcmp(l->uuid[i], g->uuid) != 0)
			*reason = xasprintf("GPU %lld: now %s, was %s", ix, g->uuid, l->uuid[i]);
		else if (g->mem_used < 0)
			*reason = xasprintf("GPU %lld (%s): memory use not reported", ix, g->uuid);
		else if (l->sp->share && g->mem_total >= 0 && g->mem_total - g->mem_used < l->sp->memory)
			*reason = xasprintf("GPU %lld (%s): %lld MiB free, %lld wanted", ix, g->uuid,
					      g->mem_total - g->mem_used, l->sp->memory);
		else if (l->sp->share && g->procs > 0 &&
			 shared_holders(l->st, g->uuid, l->sp->id, NULL, NULL) <= 0)
			*reason = xasprintf("GPU %lld (%s): has compute processes of no sharing job",
					      ix, g->uuid);
		else if (!l->sp->share && g->mem_used > l->sp->idle_mib)
			*reason = xasprintf("GPU %lld (%s): %lld MiB in use", ix, g->uuid, g->mem_used);
		else if (!l->sp->share && g->procs > 0)
			*reason = xasprintf("GPU %lld (%s): has %d compute process%s", ix,
					      g->uuid, g->procs, g->procs == 1 ? "" : "es");
		else if (!l->uuid[i] && !(l->uuid[i] = strdup(g->uuid)))
			return -1;
		else
			continue;
		return *reason ? 1 : -1;
	}
	return 0;
}

/* Step 4.  0, 1 with *reason, -1 with errno. */
static int take_leases(struct launch *l, char **reason)
{
	size_t i;
	size_t idlen = strlen(l->sp->id);

	*reason = NULL;
	for (i = 0; i < l->sp->ngpu; i++) {
		int fd = -1, r;
		char *holder = NULL;
		size_t hl = 0;

		/* Close-on-exec here; the job's child clears it (see top).
		 * A sharing job takes it shared, with a mark of its own. */
		r = lock_at(l->st->leasefd, l->uuid[i], l->sp->share ? LOCK_SH : LOCK_EX, 1, &fd);
		if (r < 0)
			return -1;
		if (r == 0 && l->sp->share) {
			*reason = xasprintf("GPU %lld (%s): leased by a job that does not share",
					      l->sp->gpu[i], l->uuid[i]);
			return *reason ? 1 : -1;
		}
		if (r == 0) {
			if (read_capped(l->st->leasefd, l->uuid[i], 4096, &holder, &hl) == 0) {
				holder[strcspn(holder, "\r\n")] = '\0';
			}
			*reason = xasprintf("GPU %lld (%s): leased by %s", l->sp->gpu[i],
					      l->uuid[i], holder && *holder ? holder : "another attempt");
			free(holder);
			return *reason ? 1 : -1;
		}
		l->lease[i] = fd;
		if (l->sp->share) {
			if ((r = take_mark(l, i, reason)) != 0)
				return r;
			continue;
		}
		if (ftruncate(fd, 0) < 0 || pwrite(fd, l->sp->id, idlen, 0) != (ssize_t)idlen ||
		    pwrite(fd, "\n", 1, (off_t)idlen) != 1)
			return -1;
	}
	return 0;
}

int lease_cards(struct launch *l, char **reason)
{
	const struct spec *sp = l->sp;
	char *err = NULL;
	int pass, rc;

	*reason = NULL;
	/* Step 3 asks for no more than the UUIDs: NV_CARDS, one nvidia-smi
	 * run instead of two, or no process query through NVML.  A spec
	 * with the cards' UUIDs (the controller's snapshot) skips it: one
	 * query, under the leases, which also checks that each index still
	 * has that UUID. */
	for (pass = sp->nuuid > 0; sp->ngpu > 0 && pass < 2; pass++) {
		struct nv_info info;

		rc = pass == 1 ? take_leases(l, reason) : 0;
		if (rc == 0) {
			if (nv_query(&info, pass == 0 ? NV_CARDS : NV_ALL, &err) < 0) {
				rc = wk_err(EX_UNAVAILABLE_, "%s", err ? err : "nvidia-smi failed");
				free(err);
				return rc;
			}
			rc = pass == 0 ? card_uuids(l, &info, reason) : check_cards(l, &info, reason);
			nv_free(&info);
		}
		if (rc < 0)
			return wk_errsys(EX_OSERR_, "leases");
		if (rc > 0)
			return EX_TEMPFAIL_;
	}
	return 0;
}
