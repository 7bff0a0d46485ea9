/*
 * spool.c - the spool directory: opening it (its subdirectories, its
 * id, the daemon's lock), listing a directory, the sequence counter,
 * and submitting.  LAYOUT.md §§1-4 is the specification; the records in
 * it are store.c's, control requests ctl.c's, nodes/ nodestat.c's.
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

#include "atomic.h"
#include "crash.h"
#include "expand.h"
#include "names.h"
#include "spooldir.h"

const char *const spool_dir_name[SD_N] = {
	"tmp", "new", "incoming", "queued", "running", "paused",
	"done", "rejected", "ctl", "nodes",
};

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
	if (sp->lab && !sp->daemon)     /* the daemon makes a lab's spool */
		return cb_err_set(err, EX_TEMPFAIL_, "%s: being made by the lab's daemon (no id yet); "
				  "try again", sp->path);
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

mode_t spool_lab_dmode(const char *name)
{
	return !strcmp(name, "tmp") || !strcmp(name, "new") || !strcmp(name, "ctl") ?
	       LAB_DROP_DMODE : LAB_DMODE;
}

/* The mode of the directory NAME made in the spool. */
static mode_t dmode_of(const struct spool *sp, const char *name)
{
	return sp->lab ? spool_lab_dmode(name) : sp->dmode;
}

/* Create the directory NAME in the spool with exactly its mode (the
 * umask may have taken bits away); one that exists is left alone. */
static int make_subdir(struct spool *sp, const char *name)
{
	mode_t mode = dmode_of(sp, name);
	int fd, r;

	if (mkdirat(sp->fd, name, mode & 0777) < 0)
		return errno == EEXIST ? 0 : -1;
	if ((fd = openat(sp->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -1;
	r = fchmod(fd, mode);
	close(fd);
	return r;
}

/* The directory NAME of the spool, never through a symbolic link. */
static int open_subdir(struct spool *sp, const char *name, struct cb_err *err)
{
	struct stat ls;
	int fd = openat(sp->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd >= 0)
		return fd;
	if (fstatat(sp->fd, name, &ls, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(ls.st_mode))
		cb_err_set(err, EX_CONFIG_, "%s/%s: is a symbolic link (not followed)", sp->path, name);
	else
		cb_err_sys(err, EX_CONFIG_, "%s/%s", sp->path, name);
	return -1;
}

static int lab_check(struct spool *sp, int fd, const char *name, gid_t gid, struct cb_err *err);

int spool_subdir(struct spool *sp, const char *name, struct cb_err *err)
{
	int fd;

	if (make_subdir(sp, name) < 0)
		return cb_err_sys(err, write_ex() == EX_TEMPFAIL_ ? EX_TEMPFAIL_ : EX_CONFIG_, "%s/%s",
				  sp->path, name);
	if ((fd = open_subdir(sp, name, err)) >= 0 && sp->daemon &&
	    lab_check(sp, fd, name, sp->gid, err) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* A lab's spool: NAME ("": the spool) is what LAYOUT.md §15 says, as
 * FD shows it, or the error names the difference. */
static int lab_check(struct spool *sp, int fd, const char *name, gid_t gid, struct cb_err *err)
{
	mode_t want = *name ? spool_lab_dmode(name) : LAB_DMODE;
	const char *sep = *name ? "/" : "";
	struct stat st;

	if (fstat(fd, &st) < 0)
		return cb_err_sys(err, EX_OSERR_, "%s%s%s", sp->path, sep, name);
	if (st.st_uid != geteuid())
		return cb_err_set(err, EX_CONFIG_, "%s%s%s: owned by uid %lu, expected the daemon's "
				  "account (uid %lu)", sp->path, sep, name, (unsigned long)st.st_uid,
				  (unsigned long)geteuid());
	if (st.st_gid != gid)
		return cb_err_set(err, EX_CONFIG_, "%s%s%s: group gid %lu, expected the lab's group "
				  "(gid %lu)", sp->path, sep, name, (unsigned long)st.st_gid,
				  (unsigned long)gid);
	if ((st.st_mode & 07777) != want)
		return cb_err_set(err, EX_CONFIG_, "%s%s%s: mode %04o, expected %04o", sp->path, sep,
				  name, (unsigned)(st.st_mode & 07777), (unsigned)want);
	return 0;
}

static int open_lockfile(struct spool *sp, const char *name);

/* A lab's file NAME of the spool root, when it is there, is what LAYOUT.md
 * §15 says (a regular file of mode WANT, the daemon's account's and the
 * group's), or the error names the difference. */
static int lab_check_file(struct spool *sp, const char *name, mode_t want, gid_t gid,
			  struct cb_err *err)
{
	struct stat st;

	if (fstatat(sp->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : cb_err_sys(err, EX_CONFIG_, "%s/%s", sp->path, name);
	if (!S_ISREG(st.st_mode))
		return cb_err_set(err, EX_CONFIG_, "%s/%s: not a regular file", sp->path, name);
	if (st.st_uid != geteuid() || st.st_gid != gid)
		return cb_err_set(err, EX_CONFIG_, "%s/%s: owned by uid %lu gid %lu, expected the "
				  "daemon's account and the lab's group (uid %lu gid %lu)", sp->path, name,
				  (unsigned long)st.st_uid, (unsigned long)st.st_gid,
				  (unsigned long)geteuid(), (unsigned long)gid);
	if ((st.st_mode & 07777) != want)
		return cb_err_set(err, EX_CONFIG_, "%s/%s: mode %04o, expected %04o", sp->path, name,
				  (unsigned)(st.st_mode & 07777), (unsigned)want);
	return 0;
}

/* The lab daemon's files of the spool root that members use: seq (they
 * take numbers: 0660, written in place only, as the spool is not
 * theirs to rename into) and seq.lock, made when missing. */
static int lab_seq_files(struct spool *sp, struct cb_err *err)
{
	static const char rec[] = "0000000000 -\n";
	int fd = openat(sp->fd, "seq", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0660);

	if (fd >= 0) {
		if (fchmod(fd, 0660) < 0 || write_full(fd, rec, sizeof rec - 1) < 0 || fsync(fd) < 0) {
			close(fd);
			return cb_err_sys(err, write_ex(), "%s/seq", sp->path);
		}
		close(fd);
	} else if (errno != EEXIST) {
		return cb_err_sys(err, write_ex(), "%s/seq", sp->path);
	}
	if ((fd = open_lockfile(sp, "seq.lock")) < 0)
		return root_file_err(sp, "seq.lock", write_ex(), err);
	close(fd);
	return 0;
}

/* spool_open, and spool_open_lab with LAB (GID its group; DAEMON: make
 * and check). */
static int open_spool(struct spool *sp, const char *path, int create, int lab, gid_t gid,
		      int daemon, struct cb_err *err)
{
	struct stat st;
	int made = 0;

	memset(sp, 0, sizeof *sp);
	sp->fd = sp->drop_tmp = -1;
	for (int i = 0; i < SD_N; i++)
		sp->dir[i] = -1;
	if (!(sp->path = strdup(path)))
		return cb_err_sys(err, EX_OSERR_, "%s", path);
	/* What is there is opened; only what is missing is made (a
	 * submit's mkdirs would be ten failed calls each time). */
	sp->fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sp->fd < 0 && errno == ENOENT && create) {
		if (mkdir_p(path) < 0)
			goto sys;
		sp->fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		made = 1;
	}
	if (sp->fd < 0) {
		if (errno == ENOENT)
			cb_err_set(err, EX_CONFIG_, "%s: no spool here (start cardbaton run, or submit a job, to create it)", path);
		else
			cb_err_sys(err, EX_CONFIG_, "%s", path);
		goto fail;
	}
	if (made && lab && (fchown(sp->fd, (uid_t)-1, gid) < 0 || fchmod(sp->fd, LAB_DMODE) < 0))
		goto sys;
	if (fstat(sp->fd, &st) < 0) {
		cb_err_sys(err, EX_OSERR_, "%s", path);
		goto fail;
	}
	sp->uid = st.st_uid;
	sp->lab = lab;
	sp->gid = gid;
	/* Private unless SPOOL is set-group-ID: then shared with its group
	 * as far as its group bits say (LAYOUT.md §1).  A lab's: §15. */
	sp->fmode = lab ? LAB_FMODE : 0600;
	sp->dmode = lab ? LAB_DMODE : 0700;
	if (!lab && (st.st_mode & S_ISGID)) {
		sp->fmode |= st.st_mode & (S_IRGRP | S_IWGRP);
		sp->dmode |= S_ISGID | (st.st_mode & S_IRWXG);
	}
	if (daemon && lab_check(sp, sp->fd, "", gid, err) < 0)
		goto fail;
	for (int i = 0; i < SD_N; i++) {
		sp->dir[i] = openat(sp->fd, spool_dir_name[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sp->dir[i] < 0) {
			if (errno == ENOENT && create && make_subdir(sp, spool_dir_name[i]) < 0)
				goto sys;
			if ((sp->dir[i] = open_subdir(sp, spool_dir_name[i], err)) < 0)
				goto fail;
		}
		if (daemon && lab && lab_check(sp, sp->dir[i], spool_dir_name[i], gid, err) < 0)
			goto fail;
	}
	if (lab && daemon && (lab_seq_files(sp, err) < 0 ||
			      lab_check_file(sp, "seq", 0660, gid, err) < 0 ||
			      lab_check_file(sp, "seq.lock", LAB_FMODE, gid, err) < 0 ||
			      lab_check_file(sp, "lock", 0600, gid, err) < 0 ||
			      lab_check_file(sp, "id", LAB_FMODE, gid, err) < 0 ||
			      lab_check_file(sp, LAB_PUB, LAB_FMODE, gid, err) < 0))
		goto fail;
	/* A lab's daemon stages its own writes where no member can put a
	 * file in the way of its temp names (tmp/ is theirs). */
	if (lab && daemon) {
		int fd;

		if ((make_subdir(sp, "stage") < 0 && errno != EEXIST) ||
		    (fd = open_subdir(sp, "stage", err)) < 0)
			goto sys;
		sp->drop_tmp = sp->dir[SD_TMP];
		sp->dir[SD_TMP] = fd;
		sp->daemon = 1;
		if (lab_check(sp, fd, "stage", gid, err) < 0)
			goto fail;
		/* The daemon's own directories made later (spool_subdir),
		 * checked at every start too. */
		for (size_t k = 0; k < 2; k++) {
			const char *name = k ? "drain" : "hooks";

			if ((fd = spool_subdir(sp, name, err)) < 0)
				goto fail;
			close(fd);
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

int spool_open(struct spool *sp, const char *path, int create, struct cb_err *err)
{
	return open_spool(sp, path, create, 0, 0, 0, err);
}

int spool_open_lab(struct spool *sp, const char *path, gid_t gid, int daemon, struct cb_err *err)
{
	return open_spool(sp, path, daemon, 1, gid, daemon, err);
}

void spool_close(struct spool *sp)
{
	for (int i = 0; i < SD_N; i++)
		if (sp->dir[i] >= 0)
			close(sp->dir[i]);
	if (sp->fd >= 0)
		close(sp->fd);
	if (sp->drop_tmp >= 0)
		close(sp->drop_tmp);
	free(sp->path);
	memset(sp, 0, sizeof *sp);
	sp->fd = sp->drop_tmp = -1;
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
	/* A lab's daemon lock is its own: a member who could read it could
	 * flock it and keep the daemon from starting. */
	mode_t mode = sp->lab && !strcmp(name, "lock") ? 0600 : sp->fmode;
	int fd = openat(sp->fd, name, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);

	if (fd >= 0) {
		if (fchmod(fd, mode) < 0) {
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

/*
 * The highest job ID the spool's names hold (0: none): the names of
 * every directory a job's ID is in, before and after it is accepted,
 * an array's or sweep's block counting its last member.  A directory
 * that cannot be listed: -1.
 */
static long long max_id_on_disk(struct spool *sp)
{
	static const enum spool_dir dirs[] = {
		SD_INCOMING, SD_QUEUED, SD_RUNNING, SD_PAUSED, SD_DONE, SD_REJECTED, SD_NEW,
	};
	long long max = 0;

	for (size_t k = 0; k < sizeof dirs / sizeof dirs[0]; k++) {
		/* A lab's new/ holds names any member chose: one far above
		 * every ID the daemon gave (LAB_ID_SLACK) is no taken ID. */
		long long cap = sp->lab && dirs[k] == SD_NEW ? max + LAB_ID_SLACK : SEQ_MAX;

		char **names;
		size_t n;

		if (spool_list(sp, dirs[k], &names, &n) < 0)
			return -1;
		for (size_t i = 0; i < n; i++) {
			long long prio, seq, count = 1;

			if (name_classify_new(names[i], &prio, &seq, &count) <= 0 &&
			    name_parse_block(names[i], &seq, &count) < 0) {
				count = 1;
				if (name_parse_plain(names[i], &seq) < 0)
					continue;
			}
			if (seq + count - 1 > max && seq + count - 1 <= cap)
				max = seq + count - 1;
		}
		spool_list_free(names, n);
	}
	return max;
}

long long spool_max_id(struct spool *sp)
{
	return max_id_on_disk(sp);
}

/* This boot of the machine (the kernel's boot_id), or "" when unknown. */
static void boot_id(char id[40])
{
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, id, 39);    /* a procfs file: no size to trust */

	if (fd >= 0)
		close(fd);
	/* 36 characters and LF, else unknown. */
	id[n == 37 && id[36] == '\n' ? 36 : 0] = '\0';
}

/* seq's record: 10 digits, a blank, the boot ID or "-", LF. */
#define SEQ_REC_LEN (10 + 1 + 36 + 1)

/* Read seq through FD: *V the number, BOOTW its writer's boot ("-": it
 * was synced; "": an older CardBaton's "N\n", which was synced too).
 * *FIXED: the file is a record of SEQ_REC_LEN bytes that can be
 * rewritten in place.  0, or -1 with ERR. */
static int seq_read(struct spool *sp, int fd, long long *v, char bootw[40], int *fixed,
		    struct cb_err *err)
{
	char buf[SEQ_REC_LEN + 2], *at;
	struct stat st;
	ssize_t n;

	bootw[0] = '\0';
	*fixed = 0;
	if (fstat(fd, &st) < 0)
		return root_file_err(sp, "seq", EX_OSERR_, err);
	if (!S_ISREG(st.st_mode)) {
		errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
		return root_file_err(sp, "seq", EX_OSERR_, err);
	}
	if ((n = pread(fd, buf, sizeof buf - 1, 0)) < 0)
		return cb_err_sys(err, EX_OSERR_, "%s/seq", sp->path);
	buf[n] = '\0';
	if (n == (ssize_t)sizeof buf - 1 || !n || buf[n - 1] != '\n')
		return cb_err_set(err, EX_CONFIG_, "%s/seq: not a sequence number", sp->path);
	buf[n - 1] = '\0';
	if ((at = strchr(buf, ' '))) {
		*at++ = '\0';
		if (strlen(at) > 36 || strchr(at, ' '))
			return cb_err_set(err, EX_CONFIG_, "%s/seq: not a sequence number", sp->path);
		strcpy(bootw, at);
	}
	if (parse_ll(buf, 0, SEQ_MAX, v) < 0)
		return cb_err_set(err, EX_CONFIG_, "%s/seq: not a sequence number", sp->path);
	*fixed = n == SEQ_REC_LEN && strlen(buf) == 10 && strlen(bootw) == 36;
	return 0;
}

/* Who holds the flock of FD's file, from /proc/locks: "pid 1234
 * (bob)", or NULL (not found, no /proc, out of memory). */
static char *lock_holder(int fd)
{
	struct stat st;
	char line[256], *who = NULL;
	FILE *f;

	if (fstat(fd, &st) < 0 || !(f = fopen("/proc/locks", "re")))
		return NULL;
	while (!who && fgets(line, sizeof line, f)) {
		unsigned long long ino;
		long pid;
		unsigned maj, min;

		if (!strstr(line, "FLOCK") ||
		    sscanf(line, "%*s %*s %*s %*s %ld %x:%x:%llu", &pid, &maj, &min, &ino) != 4 ||
		    ino != (unsigned long long)st.st_ino)
			continue;
		{
			char path[64], sl[256], *name = NULL;
			FILE *s;
			unsigned long uid;

			snprintf(path, sizeof path, "/proc/%ld/status", pid);
			if ((s = fopen(path, "re"))) {
				while (!name && fgets(sl, sizeof sl, s))
					if (sscanf(sl, "Uid: %lu", &uid) == 1)
						name = lab_user_name((uid_t)uid);
				fclose(s);
			}
			who = name ? xasprintf("pid %ld (%s)", pid, name) : xasprintf("pid %ld", pid);
			free(name);
		}
	}
	fclose(f);
	return who;
}

/* Take seq.lock (LK).  A lab's (LAYOUT.md §15): any member may hold it
 * -- a flock needs no more than the read access they have -- so it is
 * never waited for without a bound: the daemon tries for
 * SEQ_LOCK_DAEMON_MS (it then leaves new/ for a later try, LAYOUT.md
 * §15), a tool for SEQ_LOCK_TOOL_MS; then EX_TEMPFAIL_ naming who holds
 * it, errno EWOULDBLOCK. */
#define SEQ_LOCK_DAEMON_MS 20
#define SEQ_LOCK_TOOL_MS 10000
static int seq_lock(struct spool *sp, int lk, struct cb_err *err)
{
	long long give_up = mono_ms() + (sp->daemon ? SEQ_LOCK_DAEMON_MS : SEQ_LOCK_TOOL_MS);
	char *who;
	int r;

	if (!sp->lab) {
		while (flock(lk, LOCK_EX) < 0)
			if (errno != EINTR)
				return cb_err_sys(err, EX_OSERR_, "%s/seq.lock", sp->path);
		return 0;
	}
	while ((r = lock_try(lk, LOCK_EX)) == 0 && mono_ms() < give_up)
		usleep(1000);
	if (r > 0)
		return 0;
	if (r < 0)
		return cb_err_sys(err, EX_OSERR_, "%s/seq.lock", sp->path);
	who = lock_holder(lk);
	cb_err_set(err, EX_TEMPFAIL_, "%s/seq.lock: held by %s; no job ID can be taken until it "
		   "lets go", sp->path, who ? who : "another process");
	free(who);
	errno = EWOULDBLOCK;
	return -1;
}

/*
 * Under seq.lock: the counter becomes at least FLOOR (a name that
 * carried its own number), then COUNT more numbers are handed out, the
 * first in *FIRST.
 *
 * seq is one record, "NNNNNNNNNN BOOT_ID\n" (LAYOUT.md §2): the last
 * number handed out, and the boot of the machine that wrote it.  In the
 * same boot it is rewritten in place, without a sync and without a new
 * inode (one pwrite of a record that never changes size, in the first
 * sector of the file): every process reads it back from the page cache,
 * and only a crash of the machine (a new boot) can lose the write.  So
 * a seq of another boot may be behind: the number taken is then also
 * above every job ID on disk, and seq is written anew with the atomic
 * write (synced).  A number whose job was submitted (its file synced
 * into new/) is on disk; one whose submission never finished was never
 * printed.  A seq that says it was synced ("-", or an older CardBaton's
 * bare number) is trusted; where the boot cannot be known, every write
 * is synced and says "-".
 */
static int seq_update(struct spool *sp, long long floor, long long count, long long *first,
		      struct cb_err *err)
{
	int lk = open_lockfile(sp, "seq.lock"), fd = -1, fixed = 0, trusted = 0;
	char *out = NULL, boot[40], bootw[40] = "";
	long long v = 0, v0;
	int r = -1;

	if (lk < 0)
		return root_file_err(sp, "seq.lock", write_ex(), err);
	if (seq_lock(sp, lk, err) < 0) {
		int e = errno;

		close(lk);
		errno = e;
		return -1;
	}
	boot_id(boot);
	if ((fd = openat(sp->fd, "seq", O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)) >= 0) {
		if (seq_read(sp, fd, &v, bootw, &fixed, err) < 0) {
			/* A lab's seq is its members' to write: nothing is
			 * taken from one that is not a record (nor, by the
			 * daemon, from one far past every ID it gave, FLOOR):
			 * the IDs on disk are counted (LAYOUT.md §15). */
			if (!sp->lab)
				goto out;
			cb_err_free(err);
			v = 0;
		}
		trusted = !bootw[0] || !strcmp(bootw, "-") || (boot[0] && !strcmp(bootw, boot));
		if (sp->lab && sp->daemon && v > floor + LAB_ID_SLACK)
			v = 0;
	} else if (errno == ENOENT) {
		trusted = 1;    /* a new spool (its directories are listed below if not) */
	} else {
		/* A read-only or full spool is a temporary failure. */
		root_file_err(sp, "seq", write_ex(), err);
		goto out;
	}
	if (!trusted || v == 0) {
		/* Written in another boot, before a crash of the machine
		 * perhaps, or none: the IDs on disk count too. */
		long long m = max_id_on_disk(sp);

		if (m < 0) {
			cb_err_sys(err, EX_OSERR_, "%s: listing the job IDs", sp->path);
			goto out;
		}
		if (m > v)
			v = m;
		trusted = 0;    /* what is written is synced */
	}
	v0 = floor > v ? floor : v;
	if (count > SEQ_MAX - v0) {
		cb_err_set(err, EX_CONFIG_, "%s/seq: all %lld job IDs are used", sp->path, SEQ_MAX);
		goto out;
	}
	*first = v0 + 1;
	if (trusted && v0 + count == v) {
		r = 0;          /* nothing handed out (a floor below it): as it was */
		goto out;
	}
	if (!(out = xasprintf("%010lld %s\n", v0 + count, boot[0] ? boot : "-")))
		goto fail;
	if (trusted && fixed && boot[0] && !strcmp(bootw, boot)) {
		/* This boot's: in place, not synced. */
		if (pwrite(fd, out, SEQ_REC_LEN, 0) != SEQ_REC_LEN)
			goto fail;
	} else if (sp->lab) {
		/* A lab's: always in place (the spool is not the members' to
		 * rename into, LAYOUT.md §15), synced when it must be. */
		size_t n = strlen(out);

		if (fd < 0) {
			errno = ENOENT;
			goto fail;
		}
		if (pwrite(fd, out, n, 0) != (ssize_t)n || ftruncate(fd, (off_t)n) < 0 ||
		    fdatasync(fd) < 0)
			goto fail;
	} else if (atomic_write(sp->dir[SD_TMP], sp->fd, "seq", out, strlen(out), sp->fmode) < 0) {
		goto fail;
	}
	CRASH_POINT("seq: written", NULL);
	r = 0;
	goto out;
fail:
	cb_err_sys(err, write_ex(), "%s/seq", sp->path);
out:
	free(out);
	if (fd >= 0)
		close(fd);
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
		 long long *count, struct cb_err *err)
{
	struct expander x;
	cJSON *o = NULL;
	char *text = NULL, *name = NULL;
	const char *why;
	long long seq;
	int r = -1;

	if (expander_init(&x, jd, &why) < 0)
		return why ? cb_err_set(err, EX_DATAERR_, "%s", why) : cb_err_sys(err, EX_OSERR_, "submit");
	*count = (long long)x.n;
	expander_free(&x);
	if (spool_seq_block(sp, 0, *count, &seq, err) < 0)
		return -1;
	if (!(o = jobdef_to_json(jd)) || !(text = cJSON_PrintUnformatted(o)) ||
	    !(name = jobdef_is_many(jd) ? name_block_queued(jd->priority, seq, *count) :
				  name_queued(jd->priority, seq))) {
		cb_err_sys(err, EX_OSERR_, "submit");
		goto out;
	}
	/* Staged in tmp/ under the final name, renamed into new/: one
	 * rename for all of an array's or sweep's jobs. */
	if ((r = spool_write(sp, SD_NEW, name, text, err)) == 0)
		*id = seq;
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

int spool_write(struct spool *sp, enum spool_dir d, const char *name, const char *text,
		struct cb_err *err)
{
	if (atomic_write(sp->dir[SD_TMP], sp->dir[d], name, text, strlen(text), sp->fmode) < 0)
		return cb_err_sys(err, write_ex(), "%s/%s/%s", sp->path, spool_dir_name[d], name);
	return 0;
}

int spool_write_view(struct spool *sp, enum spool_dir d, const char *name, const char *text,
		     struct cb_err *err)
{
	char *tmp = xasprintf(".%s.tmp", name);
	int r = tmp ? atomic_write_at(d == SD_N ? sp->fd : sp->dir[d], tmp, name, text,
				      strlen(text), sp->fmode, 0) : -1;

	free(tmp);
	if (r < 0)
		return cb_err_sys(err, write_ex(), "%s/%s%s%s", sp->path,
				  d == SD_N ? "" : spool_dir_name[d], d == SD_N ? "" : "/", name);
	return 0;
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
