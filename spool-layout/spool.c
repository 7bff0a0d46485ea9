/*
 * spool.c - the spool directory: opening it, the sequence counter,
 * submitting, finding and writing job records, control requests and
 * rejects.  LAYOUT.md §§1-7 is the specification.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "spool.h"

const char *const spool_dir_name[SD_N] = {
	"tmp", "new", "incoming", "queued", "running", "paused",
	"done", "rejected", "ctl", "nodes",
};

const char *const ctl_op_name[CTL_N] = { "cancel", "promote", "pause", "resume" };

#define RECORD_MAX (16u << 20)

enum spool_dir job_state_dir(enum job_state s)
{
	switch (s) {
	case JS_QUEUED:
		return SD_QUEUED;
	case JS_RUNNING:
	case JS_PAUSING:
		return SD_RUNNING;
	case JS_PAUSED:
		return SD_PAUSED;
	default:
		return SD_DONE;
	}
}

/* A write failure is worth retrying (full disk, read-only, quota)
 * unless it says something is wrong with the spool itself. */
int spool_errno_ex(int e)
{
	return e == ENOSPC || e == EROFS || e == EDQUOT || e == EIO ||
	       e == ENOMEM ? EX_TEMPFAIL_ : EX_OSERR_;
}

static int write_ex(void)
{
	return spool_errno_ex(errno);
}

/* NAME in the spool root (id, seq, seq.lock, lock) could not be used:
 * one line that says why in plain words for what a reader refuses
 * (read_capped, open_lockfile).  Returns -1. */
static int root_file_err(struct spool *sp, const char *name, int ex, struct cb_err *err)
{
	switch (errno) {
	case ELOOP:
		return cb_err_set(err, ex, "%s/%s: is a symbolic link (not followed)", sp->path, name);
	case EINVAL:
		return cb_err_set(err, ex, "%s/%s: is not a regular file", sp->path, name);
	case EISDIR:
		return cb_err_set(err, ex, "%s/%s: is a directory", sp->path, name);
	case EFBIG:
		return cb_err_set(err, ex, "%s/%s: is too large", sp->path, name);
	default:
		return cb_err_sys(err, ex, "%s/%s", sp->path, name);
	}
}

static int make_id(struct spool *sp, struct cb_err *err)
{
	char *buf;
	size_t len;
	unsigned char rnd[4];
	int fd;

	if (read_capped(sp->fd, "id", 64, &buf, &len) == 0) {
		int ok = len >= 8 && strspn(buf, "0123456789abcdef") >= 8;

		if (ok)
			memcpy(sp->id, buf, 8);
		free(buf);
		if (ok)
			return 0;
		return cb_err_set(err, EX_CONFIG_, "%s/id: not a spool id", sp->path);
	}
	if (errno != ENOENT)
		return root_file_err(sp, "id", EX_OSERR_, err);
	if ((fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)) < 0 ||
	    read(fd, rnd, sizeof rnd) != (ssize_t)sizeof rnd) {
		if (fd >= 0)
			close(fd);
		return cb_err_sys(err, EX_OSERR_, "/dev/urandom");
	}
	close(fd);
	snprintf(sp->id, sizeof sp->id, "%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3]);
	buf = xasprintf("%s\n", sp->id);
	if (!buf)
		return cb_err_sys(err, EX_OSERR_, "%s", sp->path);
	/* Two tools creating the spool at once: link semantics keep the first.
	 * ENOENT: another creator's rename replaced our id.new and moved it
	 * to id (or found id there and removed it): id exists either way. */
	if (atomic_write(sp->fd, sp->fd, "id.new", buf, strlen(buf), sp->fmode) < 0 ||
	    (move_noreplace(sp->fd, "id.new", sp->fd, "id") < 0 && errno != EEXIST &&
	     errno != ENOENT)) {
		free(buf);
		return cb_err_sys(err, write_ex(), "%s/id", sp->path);
	}
	free(buf);
	unlinkat(sp->fd, "id.new", 0);
	return make_id(sp, err);
}

/* Create the directory NAME in the spool with exactly sp->dmode (the
 * umask may have taken bits away); one that exists is left alone. */
static int make_subdir(struct spool *sp, const char *name)
{
	int fd, r;

	if (mkdirat(sp->fd, name, sp->dmode & 0777) < 0)
		return errno == EEXIST ? 0 : -1;
	if ((fd = openat(sp->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -1;
	r = fchmod(fd, sp->dmode);
	close(fd);
	return r;
}

int spool_open(struct spool *sp, const char *path, int create, struct cb_err *err)
{
	struct stat st;

	memset(sp, 0, sizeof *sp);
	sp->fd = -1;
	for (int i = 0; i < SD_N; i++)
		sp->dir[i] = -1;
	if (!(sp->path = strdup(path)))
		return cb_err_sys(err, EX_OSERR_, "%s", path);
	if (create && mkdir_p(path) < 0)
		goto sys;
	sp->fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sp->fd < 0) {
		if (errno == ENOENT)
			cb_err_set(err, EX_CONFIG_, "%s: no spool here (start cardbaton run, or submit a job, to create it)", path);
		else
			cb_err_sys(err, EX_CONFIG_, "%s", path);
		goto fail;
	}
	if (fstat(sp->fd, &st) < 0) {
		cb_err_sys(err, EX_OSERR_, "%s", path);
		goto fail;
	}
	/* Private unless SPOOL is set-group-ID: then shared with its group
	 * as far as its group bits say (LAYOUT.md §1). */
	sp->fmode = 0600;
	sp->dmode = 0700;
	if (st.st_mode & S_ISGID) {
		sp->fmode |= st.st_mode & (S_IRGRP | S_IWGRP);
		sp->dmode |= S_ISGID | (st.st_mode & S_IRWXG);
	}
	for (int i = 0; i < SD_N; i++) {
		struct stat ls;

		if (create && make_subdir(sp, spool_dir_name[i]) < 0)
			goto sys;
		sp->dir[i] = openat(sp->fd, spool_dir_name[i],
				    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sp->dir[i] < 0) {
			if (fstatat(sp->fd, spool_dir_name[i], &ls, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISLNK(ls.st_mode))
				cb_err_set(err, EX_CONFIG_, "%s/%s: is a symbolic link (not followed)",
					   path, spool_dir_name[i]);
			else
				cb_err_sys(err, EX_CONFIG_, "%s/%s", path, spool_dir_name[i]);
			goto fail;
		}
	}
	if (make_id(sp, err) < 0)
		goto fail;
	return 0;
sys:
	cb_err_sys(err, write_ex() == EX_TEMPFAIL_ ? EX_TEMPFAIL_ : EX_CONFIG_, "%s", path);
fail:
	spool_close(sp);
	return -1;
}

void spool_close(struct spool *sp)
{
	for (int i = 0; i < SD_N; i++)
		if (sp->dir[i] >= 0)
			close(sp->dir[i]);
	if (sp->fd >= 0)
		close(sp->fd);
	free(sp->path);
	memset(sp, 0, sizeof *sp);
	sp->fd = -1;
	for (int i = 0; i < SD_N; i++)
		sp->dir[i] = -1;
}

/*
 * A lock file of the spool root (lock, seq.lock), opened read-only:
 * flock needs no more, a read-only spool can then be remounted and
 * locked, and in a shared spool any member may lock a file another
 * made.  Created with exactly sp->fmode; never through a symlink.
 */
static int open_lockfile(struct spool *sp, const char *name)
{
	int fd = openat(sp->fd, name, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			sp->fmode);

	if (fd >= 0) {
		if (fchmod(fd, sp->fmode) < 0) {
			int saved = errno;

			close(fd);
			errno = saved;
			return -1;
		}
		return fd;
	}
	if (errno != EEXIST)
		return -1;
	/* Non-blocking: a FIFO planted here must not hang us. */
	if ((fd = openat(sp->fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) >= 0) {
		struct stat st;
		int e = fstat(fd, &st) < 0 ? errno : !S_ISREG(st.st_mode) ? EINVAL : 0;

		if (e) {
			close(fd);
			errno = e;
			return -1;
		}
	}
	return fd;
}

int spool_lock_daemon(struct spool *sp, struct cb_err *err)
{
	int fd = open_lockfile(sp, "lock");
	int r;

	if (fd < 0)     /* a read-only spool: EX_TEMPFAIL_ */
		return root_file_err(sp, "lock", write_ex(), err);
	if ((r = lock_try(fd, LOCK_EX)) != 1) {
		if (r == 0)
			cb_err_set(err, EX_TEMPFAIL_, "another cardbaton-spoold holds %s/lock", sp->path);
		else
			cb_err_sys(err, EX_OSERR_, "%s/lock", sp->path);
		close(fd);
		return -1;
	}
	return fd;
}

/* Under seq.lock: the counter becomes at least FLOOR (a name that
 * carried its own number), then COUNT more numbers are handed out, the
 * first in *FIRST. */
static int seq_update(struct spool *sp, long long floor, long long count, long long *first,
		      struct cb_err *err)
{
	int lk = open_lockfile(sp, "seq.lock");
	char *buf = NULL, *out = NULL;
	size_t len;
	long long v = 0, v0;
	int r = -1;

	if (lk < 0)
		return root_file_err(sp, "seq.lock", write_ex(), err);
	while (flock(lk, LOCK_EX) < 0)
		if (errno != EINTR) {
			cb_err_sys(err, EX_OSERR_, "%s/seq.lock", sp->path);
			goto out;
		}
	if (read_capped(sp->fd, "seq", 64, &buf, &len) == 0) {
		if (len && buf[len - 1] == '\n')
			buf[len - 1] = '\0';
		if (parse_ll(buf, 0, SEQ_MAX, &v) < 0) {
			cb_err_set(err, EX_CONFIG_, "%s/seq: not a sequence number", sp->path);
			goto out;
		}
	} else if (errno != ENOENT) {
		root_file_err(sp, "seq", EX_OSERR_, err);
		goto out;
	}
	v0 = floor > v ? floor : v;
	if (count > SEQ_MAX - v0) {
		cb_err_set(err, EX_CONFIG_, "%s/seq: all %lld job IDs are used", sp->path, SEQ_MAX);
		goto out;
	}
	*first = v0 + 1;
	if (v0 + count > v && (!(out = xasprintf("%lld\n", v0 + count)) ||
			 atomic_write(sp->dir[SD_TMP], sp->fd, "seq", out, strlen(out), sp->fmode) < 0)) {
		cb_err_sys(err, write_ex(), "%s/seq", sp->path);
		goto out;
	}
	CRASH_POINT("seq: written", NULL);
	r = 0;
out:
	free(buf);
	free(out);
	close(lk);     /* releases the flock */
	return r;
}

int spool_next_seq(struct spool *sp, long long *seq, struct cb_err *err)
{
	return seq_update(sp, 0, 1, seq, err);
}

int spool_seq_block(struct spool *sp, long long floor, long long count, long long *first,
		    struct cb_err *err)
{
	return seq_update(sp, floor, count, first, err);
}

int spool_submit(struct spool *sp, const struct job_def *jd, long long *id,
		 struct cb_err *err)
{
	cJSON *o;
	char *text = NULL, *name = NULL;
	long long seq;
	int r = -1;

	if (spool_next_seq(sp, &seq, err) < 0)
		return -1;
	if (!(o = jobdef_to_json(jd)) || !(text = cJSON_PrintUnformatted(o)) ||
	    !(name = name_queued(jd->priority, seq))) {
		cb_err_sys(err, EX_OSERR_, "submit");
		goto out;
	}
	/* Staged in tmp/ under the final name, renamed into new/. */
	if (atomic_write(sp->dir[SD_TMP], sp->dir[SD_NEW], name, text, strlen(text), sp->fmode) < 0) {
		cb_err_sys(err, write_ex(), "%s/new/%s", sp->path, name);
		goto out;
	}
	*id = seq;
	r = 0;
out:
	cJSON_Delete(o);
	cJSON_free(text);
	free(name);
	return r;
}

void spool_list_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int spool_list(struct spool *sp, enum spool_dir d, char ***names, size_t *n)
{
	int fd = dup(sp->dir[d]);
	DIR *dir;
	struct dirent *e;
	char **v = NULL;
	size_t len = 0, cap = 0;
	int saved;

	*names = NULL;
	*n = 0;
	if (fd < 0)
		return -1;
	if (!(dir = fdopendir(fd))) {
		saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	rewinddir(dir);
	errno = 0;
	while ((e = readdir(dir))) {
		if (e->d_name[0] == '.')
			continue;
		if (len == cap) {
			char **nv = realloc(v, (cap = cap ? cap * 2 : 64) * sizeof *v);

			if (!nv)
				goto fail;
			v = nv;
		}
		if (!(v[len] = strdup(e->d_name)))
			goto fail;
		len++;
		errno = 0;
	}
	if (errno)
		goto fail;
	closedir(dir);
	if (len)
		qsort(v, len, sizeof *v, cmp_str);
	*names = v;
	*n = len;
	return 0;
fail:
	saved = errno;
	closedir(dir);
	spool_list_free(v, len);
	errno = saved;
	return -1;
}

int spool_load(struct spool *sp, enum spool_dir d, const char *name,
	       struct job *j, struct cb_err *err)
{
	char *buf;
	size_t len;
	int r;

	if (read_capped(sp->dir[d], name, RECORD_MAX, &buf, &len) < 0) {
		/* Something that is no record (a stray symlink, directory,
		 * FIFO, or a huge file) is bad data, named as such. */
		const char *what = errno == ELOOP ? "is a symbolic link (not followed)" :
				   errno == EISDIR ? "is a directory" :
				   errno == EINVAL || errno == ENXIO ? "is not a regular file" :
				   errno == EFBIG ? "is larger than 16 MiB" : NULL;

		if (what)
			return cb_err_set(err, EX_DATAERR_, "%s/%s/%s: %s", sp->path,
					  spool_dir_name[d], name, what);
		return cb_err_sys(err, errno == ENOENT ? EX_NOINPUT_ : EX_OSERR_, "%s/%s/%s",
				  sp->path, spool_dir_name[d], name);
	}
	r = job_from_json(buf, len, j, NULL);
	free(buf);
	if (r < 0)
		return cb_err_set(err, EX_DATAERR_, "%s/%s/%s: not a valid job record",
				  sp->path, spool_dir_name[d], name);
	return 0;
}

int spool_load_pending(struct spool *sp, enum spool_dir d, const char *name,
		       long long id, struct job *j, struct cb_err *err)
{
	char *buf = NULL;
	size_t len;
	long long prio, seq;
	struct stat st;

	memset(j, 0, sizeof *j);
	if (read_capped(sp->dir[d], name, JOBFILE_MAX, &buf, &len) < 0) {
		if (errno == ENOENT)
			return cb_err_sys(err, EX_NOINPUT_, "%s/%s/%s", sp->path,
					  spool_dir_name[d], name);
		buf = NULL;     /* unreadable: the daemon will reject it */
	}
	j->id = id;
	j->state = JS_QUEUED;
	if (fstatat(sp->dir[d], name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		j->submitted = j->queued_at = (long long)st.st_mtim.tv_sec * 1000 +
					      st.st_mtim.tv_nsec / 1000000;
	if (buf) {
		struct cb_err e = { 0 };

		if (jobdef_parse(buf, len, name, &j->def, &e) < 0)
			jobdef_free(&j->def);
		cb_err_free(&e);
		free(buf);
	}
	j->priority = j->def.priority;
	if (name_parse_queued(name, &prio, &seq) == 0)
		j->priority = prio;
	if (!(j->reason = strdup("waiting for the daemon to accept it")))
		return cb_err_sys(err, EX_OSERR_, "find");
	return 0;
}

int spool_find(struct spool *sp, long long id, struct job *j,
	       enum spool_dir *d, char **name, struct cb_err *err)
{
	static const enum spool_dir plain[] = { SD_RUNNING, SD_PAUSED, SD_DONE };
	char *pn = name_plain(id), **names = NULL;
	size_t n = 0;
	int found = 0;
	struct job cand;

	*name = NULL;
	if (!pn)
		return cb_err_sys(err, EX_OSERR_, "find");
	memset(j, 0, sizeof *j);
	/* Records: the plain-named directories, then queued/ by suffix. */
	for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
		if (faccessat(sp->dir[plain[i]], pn, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (spool_load(sp, plain[i], pn, &cand, err) < 0)
			goto fail;
		if (!found || cand.rev > j->rev) {
			job_free(j);
			*j = cand;
			*d = plain[i];
			free(*name);
			if (!(*name = strdup(pn)))
				goto sysfail;
			found = 1;
		} else {
			job_free(&cand);
		}
	}
	if (spool_list(sp, SD_QUEUED, &names, &n) < 0)
		goto sysfail;
	for (size_t i = 0; i < n; i++) {
		long long prio, seq;

		if (name_parse_queued(names[i], &prio, &seq) < 0 || seq != id)
			continue;
		if (spool_load(sp, SD_QUEUED, names[i], &cand, err) < 0)
			goto fail;
		if (!found || cand.rev > j->rev) {
			job_free(j);
			*j = cand;
			*d = SD_QUEUED;
			free(*name);
			if (!(*name = strdup(names[i])))
				goto sysfail;
			found = 1;
		} else {
			job_free(&cand);
		}
	}
	spool_list_free(names, n);
	names = NULL;
	if (found)
		goto done;
	/* Not accepted yet: incoming/, or new/ under the submit grammar. */
	if (faccessat(sp->dir[SD_INCOMING], pn, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		if (spool_load_pending(sp, SD_INCOMING, pn, id, j, err) == 0) {
			*d = SD_INCOMING;
			*name = pn;
			return 1;
		}
		if (err->ex != EX_NOINPUT_)     /* gone meanwhile: look on */
			goto fail;
		cb_err_free(err);
		job_free(j);
	}
	if (spool_list(sp, SD_NEW, &names, &n) < 0)
		goto sysfail;
	for (size_t i = 0; i < n; i++) {
		long long prio, seq;

		if (name_classify_new(names[i], &prio, &seq) != 1 || seq != id)
			continue;
		if (spool_load_pending(sp, SD_NEW, names[i], id, j, err) < 0) {
			if (err->ex != EX_NOINPUT_)
				goto fail;
			cb_err_free(err);
			job_free(j);
			continue;       /* taken by the daemon meanwhile */
		}
		*d = SD_NEW;
		*name = strdup(names[i]);
		found = 1;
		break;
	}
	spool_list_free(names, n);
	free(pn);
	return found && !*name ? cb_err_sys(err, EX_OSERR_, "find") : found;
done:
	free(pn);
	return 1;
sysfail:
	cb_err_sys(err, EX_OSERR_, "%s", sp->path);
fail:
	spool_list_free(names, n);
	job_free(j);
	free(*name);
	*name = NULL;
	free(pn);
	return -1;
}

int spool_put(struct spool *sp, struct job *j, enum spool_dir from_dir,
	      const char *from_name, struct cb_err *err)
{
	enum spool_dir to = job_state_dir(j->state);
	char *name, *text;
	int r = -1;
#ifdef CB_CRASH_POINTS
	char trans[64];

	snprintf(trans, sizeof trans, "%s->%s", spool_dir_name[from_dir], spool_dir_name[to]);
#else
	const char *trans = NULL;
#endif

	j->rev++;
	name = to == SD_QUEUED ? name_queued(j->priority, j->id) : name_plain(j->id);
	if (!name || !(text = job_to_json(j))) {
		free(name);
		return cb_err_sys(err, EX_OSERR_, "job %lld", j->id);
	}
	CRASH_POINT("put: before", trans);
	if (atomic_write(sp->dir[SD_TMP], sp->dir[to], name, text, strlen(text), sp->fmode) < 0) {
		cb_err_sys(err, write_ex(), "%s/%s/%s", sp->path, spool_dir_name[to], name);
		goto out;
	}
	CRASH_POINT("put: written", trans);
	if (from_name && (from_dir != to || strcmp(from_name, name))) {
		if (unlinkat(sp->dir[from_dir], from_name, 0) < 0 && errno != ENOENT) {
			cb_err_sys(err, EX_OSERR_, "%s/%s/%s", sp->path,
				   spool_dir_name[from_dir], from_name);
			goto out;
		}
		if (fsync_dir(sp->dir[from_dir]) < 0) {
			cb_err_sys(err, write_ex(), "%s/%s", sp->path, spool_dir_name[from_dir]);
			goto out;
		}
	}
	r = 0;
out:
	free(name);
	free(text);
	return r;
}

int spool_ctl(struct spool *sp, long long id, enum ctl_op op, long long arg,
	      struct cb_err *err)
{
	struct timespec ts;
	char *name, *body;
	int r = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	name = xasprintf("%lld.%s.%lld.%09ld.%ld", id, ctl_op_name[op],
			 (long long)ts.tv_sec, ts.tv_nsec, (long)getpid());
	body = arg == CTL_NO_ARG ? strdup("") : xasprintf("priority %lld\n", arg);
	if (!name || !body)
		r = cb_err_sys(err, EX_OSERR_, "request");
	else if (atomic_write(sp->dir[SD_TMP], sp->dir[SD_CTL], name, body, strlen(body), sp->fmode) < 0)
		r = cb_err_sys(err, write_ex(), "%s/ctl/%s", sp->path, name);
	free(name);
	free(body);
	return r;
}

int ctl_parse_name(const char *name, long long *id, enum ctl_op *op)
{
	const char *dot = strchr(name, '.'), *dot2;
	char *num;
	int r;

	if (!dot || !(dot2 = strchr(dot + 1, '.')))
		return -1;
	if (!(num = strndup(name, (size_t)(dot - name))))
		return -1;
	r = jobid_parse(num, id);
	free(num);
	if (r < 0)
		return -1;
	for (int i = 0; i < CTL_N; i++)
		if (strlen(ctl_op_name[i]) == (size_t)(dot2 - dot - 1) &&
		    !strncmp(dot + 1, ctl_op_name[i], (size_t)(dot2 - dot - 1))) {
			*op = (enum ctl_op)i;
			return 0;
		}
	return -1;
}

int spool_reject(struct spool *sp, enum spool_dir from, const char *name,
		 const char *orig, long long seq, const char *why, struct cb_err *err)
{
	char *pn = name_plain(seq), *rn = xasprintf("%010lld.reason", seq);
	char *body = xasprintf("original name: %s\nreason: %s\n", orig, why);
	int r = -1;

	if (!pn || !rn || !body) {
		cb_err_sys(err, EX_OSERR_, "reject");
		goto out;
	}
	/* Reason first: a crash then leaves the job in place to be retried. */
	if (atomic_write(sp->dir[SD_TMP], sp->dir[SD_REJECTED], rn, body, strlen(body), sp->fmode) < 0 ||
	    (CRASH_POINT("reject: reason written", NULL), 0) ||
	    renameat(sp->dir[from], name, sp->dir[SD_REJECTED], pn) < 0 ||
	    fsync_dir(sp->dir[SD_REJECTED]) < 0 || fsync_dir(sp->dir[from]) < 0) {
		cb_err_sys(err, write_ex(), "%s/rejected/%s", sp->path, pn);
		goto out;
	}
	r = 0;
out:
	free(pn);
	free(rn);
	free(body);
	return r;
}

int spool_node_put(struct spool *sp, const struct node_status *ns, struct cb_err *err)
{
	cJSON *o = cJSON_CreateObject();
	char *text = NULL, *name = xasprintf("%s.json", ns->name), *since = rfc3339(ns->since);
	int r = -1;

	if (!o || !name || !since || !cJSON_AddStringToObject(o, "name", ns->name) ||
	    !cJSON_AddBoolToObject(o, "reachable", ns->reachable) ||
	    !(ns->error ? cJSON_AddStringToObject(o, "error", ns->error)
			: cJSON_AddNullToObject(o, "error")) ||
	    !cJSON_AddStringToObject(o, "since", since) ||
	    !cJSON_AddNumberToObject(o, "since_ms", (double)ns->since) ||
	    !(text = cJSON_Print(o))) {
		cb_err_sys(err, EX_OSERR_, "node %s", ns->name);
		goto out;
	}
	if (atomic_write(sp->dir[SD_TMP], sp->dir[SD_NODES], name, text, strlen(text), sp->fmode) < 0) {
		cb_err_sys(err, write_ex(), "%s/nodes/%s", sp->path, name);
		goto out;
	}
	r = 0;
out:
	cJSON_Delete(o);
	cJSON_free(text);
	free(name);
	free(since);
	return r;
}

int spool_node_list(struct spool *sp, struct node_status **vp, size_t *np)
{
	char **names;
	size_t n, k = 0;
	struct node_status *v;

	*vp = NULL;
	*np = 0;
	if (spool_list(sp, SD_NODES, &names, &n) < 0)
		return -1;
	if (!(v = calloc(n + 1, sizeof *v))) {
		spool_list_free(names, n);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		char *buf;
		size_t len;
		cJSON *o, *x;

		if (read_capped(sp->dir[SD_NODES], names[i], 65536, &buf, &len) < 0)
			continue;
		o = cJSON_ParseWithLength(buf, len);
		free(buf);
		if (!o)
			continue;
		if (cJSON_IsString(x = cJSON_GetObjectItem(o, "name")) &&
		    (v[k].name = strdup(x->valuestring))) {
			v[k].reachable = cJSON_IsTrue(cJSON_GetObjectItem(o, "reachable"));
			if (cJSON_IsString(x = cJSON_GetObjectItem(o, "error")))
				v[k].error = strdup(x->valuestring);
			if (cJSON_IsNumber(x = cJSON_GetObjectItem(o, "since_ms")))
				v[k].since = (long long)x->valuedouble;
			k++;
		}
		cJSON_Delete(o);
	}
	spool_list_free(names, n);
	*vp = v;
	*np = k;
	return 0;
}

void node_status_free(struct node_status *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].error);
	}
	free(v);
}
