/*
 * lease.c - steps 3-5 of a launch (LAYOUT.md section 8): the cards'
 * UUIDs, which name their leases, the leases (leases/UUID, flocked and
 * naming their holder), and the check under them that each card is
 * still the one named and idle.  Only that check says whether a card
 * is free: no other attempt can take it meanwhile.
 *
 * The leases live in STATE/leases, private, or in a node's lease_dir
 * (--lease-dir), shared by every account and controller naming it: a
 * lease there is made by whoever needs it first (0644) and opened
 * read-only by everyone, so its holder cannot be written in it; an
 * exclusive holder leaves a mark UUID=ID instead, as a sharer leaves
 * UUID+ID, and the mark's owner is the holder's account.  A lease or a
 * mark is opened without following a link or waiting on a FIFO, and is
 * used only when it is a regular file of one link.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launch.h"

/* The sharing marks' separator, and the exclusive holder's (a lease_dir). */
#define MARK_SHARED '+'
#define MARK_EXCLUSIVE '='

/* Attempt ID's mark beside the lease of card UUID: "UUID+ID" or "UUID=ID". */
static char *mark_name(const char *uuid, char sep, const char *id)
{
	return xasprintf("%s%c%s", uuid, sep, id);
}

/* The separator of the mark attempt L leaves on its cards, or 0: none
 * (an exclusive one in STATE/leases names itself in the lease). */
static char mark_sep(const struct launch *l)
{
	return l->sp->share ? MARK_SHARED : l->st->lease_path ? MARK_EXCLUSIVE : 0;
}

int lease_lock(const struct wk_state *st, const char *name, int how, int create, int *fdp,
	       char **why)
{
	int shared = st->lease_path != NULL, mode = shared ? 0644 : 0600;
	int flags = (shared || !create ? O_RDONLY : O_RDWR) | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	int fd = openat(st->leasefd, name, flags), r, e;
	const char *dir = shared ? st->lease_path : "leases";
	struct stat sb;

	*fdp = -1;
	*why = NULL;
	if (fd < 0 && errno == ENOENT && create) {
		/* O_EXCL: never another's file, made just now, as ours. */
		fd = openat(st->leasefd, name, flags | O_CREAT | O_EXCL, mode);
		if (fd >= 0 && fchmod(fd, (mode_t)mode) < 0) {
			e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		if (fd < 0 && errno == EEXIST)
			fd = openat(st->leasefd, name, flags);
	}
	if (fd < 0) {
		if (errno == ELOOP)
			*why = xasprintf("%s/%s: is a symbolic link (not followed)", dir, name);
		return -1;
	}
	if (fstat(fd, &sb) < 0) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	if (!(S_ISREG(sb.st_mode) && sb.st_nlink == 1)) {
		*why = S_ISREG(sb.st_mode) ? xasprintf("%s/%s: has %ld links", dir, name, (long)sb.st_nlink)
					   : xasprintf("%s/%s: not a regular file", dir, name);
		close(fd);
		errno = EINVAL;
		return -1;
	}
	if ((r = lock_try(fd, how)) <= 0) {
		e = errno;
		close(fd);
		errno = e;
		return r;
	}
	*fdp = fd;
	return 1;
}

void unmark_leases(struct launch *l)
{
	char sep = mark_sep(l);

	for (size_t i = 0; i < l->sp->ngpu; i++) {
		char *m = l->mark[i] >= 0 ? mark_name(l->uuid[i], sep, l->sp->id) : NULL;

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
		if (truncate && !mark_sep(l) && ftruncate(l->lease[i], 0) < 0) {
			/* The content only names a holder while the lock is
			 * held, so a stale name is harmless. */
		}
		close(l->lease[i]);
		l->lease[i] = -1;
	}
}

void holders_free(struct holder *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].id);
	free(v);
}

int card_holders(const struct wk_state *st, const char *uuid, int exclusive, const char *id,
		 struct holder **v, size_t *n)
{
	size_t len = strlen(uuid);
	char sep = exclusive ? MARK_EXCLUSIVE : MARK_SHARED;
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
		char *why = NULL;
		struct stat sb;

		if (strncmp(e->d_name, uuid, len) || e->d_name[len] != sep ||
		    (id && !strcmp(e->d_name + len + 1, id)))
			continue;
		r = lease_lock(st, e->d_name, LOCK_EX, 0, &fd, &why);
		free(why);
		if (fd >= 0)
			close(fd);
		/* Held: a live mark.  Free (stale), gone, or not a mark: none. */
		if (r != 0 || (v && fstatat(st->leasefd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0))
			continue;
		found++;
		if (v) {
			struct holder *w = realloc(*v, (*n + 1) * sizeof *w);

			if (w)
				*v = w;
			if (!w || !(w[*n].id = strdup(e->d_name + len + 1))) {
				holders_free(*v, *n);
				*v = NULL;
				*n = 0;
				closedir(d);
				return -1;
			}
			w[*n].uid = sb.st_uid;
			(*n)++;
		}
	}
	closedir(d);
	return found;
}

/*
 * Attempt L's mark on card I (mark_sep: UUID+ID sharing, UUID=ID the
 * exclusive holder in a lease_dir), locked in l->mark[I].  It is made
 * locked under a name no reader looks at (.UUID+ID, O_EXCL: a stale one
 * of ours is removed first, anyone else's is an error) and renamed into
 * place, so a reader's probe (card_holders) never finds it unlocked, nor
 * makes its lock fail.  Readable by all in a lease_dir: another
 * account's probe must open it.  0, or -1 with errno and, when a name
 * of the mark could not be had (another account's file there: the
 * sticky bit keeps ours from replacing it), *WHY naming it.
 */
static int make_mark(struct launch *l, size_t i, char **why)
{
	char sep = mark_sep(l);
	char *tmp = xasprintf(".%s%c%s", l->uuid[i], sep, l->sp->id), *m = mark_name(l->uuid[i], sep, l->sp->id);
	const char *at = tmp;
	mode_t mode = l->st->lease_path ? 0644 : 0600;
	int dfd = l->st->leasefd, fd = -1, r = -1, e;
	size_t idlen = strlen(l->sp->id);

	if (tmp && m) {
		for (int tries = 0; fd < 0 && tries < 2; tries++)
			if ((fd = openat(dfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)) < 0 &&
			    (errno != EEXIST || unlinkat(dfd, tmp, 0) < 0))
				break;
		if (fd >= 0 && fchmod(fd, mode) == 0 && lock_try(fd, LOCK_EX) == 1 &&
		    pwrite(fd, l->sp->id, idlen, 0) == (ssize_t)idlen) {
			at = m;
			r = renameat(dfd, tmp, dfd, m);
		}
	}
	e = errno;
	if (r < 0 && fd >= 0)
		unlinkat(dfd, tmp, 0);
	if (r == 0)
		l->mark[i] = fd;
	else if (fd >= 0)
		close(fd);
	if (r < 0 && at && (e == EPERM || e == EACCES || e == EEXIST))
		*why = xasprintf("%s/%s: %s", l->st->lease_path ? l->st->lease_path : "leases", at, strerror(e));
	free(tmp);
	free(m);
	errno = e;
	return r;
}

/*
 * Sharing card I: the attempt's mark (make_mark), and then the sharers
 * counted under the (shared) lease -- this one with them at most the
 * spec's max_jobs_per_gpu, or the attempt is busy.  Whoever locks its
 * mark last counts all the others' (issue 32: two controllers on one
 * node never put more than N sharers on a card); two at once may both
 * give way.  0, 1 with *reason, -1 with errno.
 */
static int take_share(struct launch *l, size_t i, char **reason)
{
	int others;

	if (make_mark(l, i, reason) < 0 || (others = card_holders(l->st, l->uuid[i], 0, l->sp->id, NULL, NULL)) < 0)
		return -1;
	if (others + 1 <= l->sp->max_share)
		return 0;
	*reason = xasprintf("GPU %lld (%s): shared by %d job%s, max_jobs_per_gpu %lld", l->sp->gpu[i],
			    l->uuid[i], others, others == 1 ? "" : "s", l->sp->max_share);
	return *reason ? 1 : -1;
}

char *exclusive_holder(const struct wk_state *st, const char *uuid, uid_t *uid)
{
	struct holder *v;
	size_t n;
	char *b;

	*uid = (uid_t)-1;
	if (st->lease_path) {
		if (card_holders(st, uuid, 1, NULL, &v, &n) < 0)
			return NULL;
		b = strdup(n ? v[0].id : "?");
		if (n)
			*uid = v[0].uid;
		holders_free(v, n);
		return b;
	}
	if (read_capped(st->leasefd, uuid, 4096, &b, &n) < 0)
		return strdup("?");
	b[strcspn(b, "\r\n")] = '\0';
	if (!*b) {
		free(b);
		return strdup("?");
	}
	return b;
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
			 card_holders(l->st, g->uuid, 0, l->sp->id, NULL, NULL) <= 0)
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

/* Step 4.  0, 1 with *reason, -1 with errno (*reason: a lease that is
 * not a regular file). */
static int take_leases(struct launch *l, char **reason)
{
	size_t i;
	size_t idlen = strlen(l->sp->id);

	*reason = NULL;
	for (i = 0; i < l->sp->ngpu; i++) {
		int fd = -1, r;
		char *holder;
		uid_t uid;

		/* Close-on-exec here; the job's child clears it (see top).
		 * A sharing job takes it shared, with a mark of its own. */
		r = lease_lock(l->st, l->uuid[i], l->sp->share ? LOCK_SH : LOCK_EX, 1, &fd, reason);
		if (r < 0)
			return -1;
		if (r == 0 && l->sp->share) {
			*reason = xasprintf("GPU %lld (%s): leased by a job that does not share",
					      l->sp->gpu[i], l->uuid[i]);
			return *reason ? 1 : -1;
		}
		if (r == 0) {
			holder = exclusive_holder(l->st, l->uuid[i], &uid);
			*reason = xasprintf("GPU %lld (%s): leased by %s", l->sp->gpu[i], l->uuid[i],
					      holder && strcmp(holder, "?") ? holder : "another attempt");
			free(holder);
			return *reason ? 1 : -1;
		}
		l->lease[i] = fd;
		if (l->sp->share) {
			if ((r = take_share(l, i, reason)) != 0)
				return r;
			continue;
		}
		/* The holder: a mark in a lease_dir, else the lease's content. */
		if (mark_sep(l) ? make_mark(l, i, reason) < 0
				: ftruncate(fd, 0) < 0 || pwrite(fd, l->sp->id, idlen, 0) != (ssize_t)idlen ||
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
		if (rc < 0 && *reason) {
			rc = wk_err(EX_OSERR_, "%s", *reason);
			free(*reason);
			*reason = NULL;
			return rc;
		}
		if (rc < 0)
			return wk_errsys(EX_OSERR_, "leases");
		if (rc > 0)
			return EX_TEMPFAIL_;
	}
	return 0;
}
