/*
 * fsreplay.c - the file system alone, for the ingest benchmark: the
 * file operations the daemon makes to accept each job file dropped
 * into SPOOL/new/ (LAYOUT.md section 5), and nothing else -- no
 * parsing, no queue, no scheduling -- while the writer drops them, as
 * in the benchmark itself.  What this takes is the floor under the
 * daemon's ingest on that file system.
 *
 *   fsreplay SPOOL N WRITER [ARG...]
 *
 * Makes SPOOL and its new/, incoming/, queued/ and tmp/ where missing,
 * watches new/, starts WRITER, and takes the names each inotify read
 * brings, in one batch:
 *
 *   claim    faccessat new/NAME; renameat2 NOREPLACE to incoming/ID;
 *            fsync incoming/ and new/
 *   record   fstatat and read incoming/ID; write the record (fchmod;
 *            the file's bytes as the record) into a spare file of
 *            tmp/ (opened without O_CREAT, written over, ftruncate),
 *            or a new tmp/.ID.tmp when none is left; syncfs; rename
 *            each to queued/PRIO-ID.job; fsync queued/
 *   done     rename incoming/ID into tmp/ as a spare (unlink it when
 *            1,024 are kept); fsync incoming/
 *
 * (the daemon's spare files, LAYOUT.md section 3).
 * until N files are moved.  After a queue overflow, as the daemon does,
 * new/ is read whole and taken in batches of as many.  Prints the seconds from WRITER's start to
 * the last move.  Exit 1 on a failed call (named on stderr) or a writer
 * that failed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what, const char *name)
{
	fprintf(stderr, "fsreplay: %s %s: %s\n", what, name ? name : "", strerror(errno));
	exit(1);
}

static int subdir(int spool, const char *name)
{
	int fd;

	if (mkdirat(spool, name, 0755) < 0 && errno != EEXIST)
		die("mkdir", name);
	if ((fd = openat(spool, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		die("open", name);
	return fd;
}

static void dsync(int fd, const char *name)
{
	if (fsync(fd) < 0)
		die("fsync", name);
}

static double since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* The spare files in tmp/ (.sK), as the daemon keeps them. */
#define SPARES_MAX 1024
static long long spare[SPARES_MAX], nspare, spare_seq;

/* The batch NAMES[0..N): claimed, recorded, done (above). */
static void accept_batch(int spool, int nd, int in, int qd, int td, char **names, size_t n,
			 long long *id)
{
	char name[64], tmp[64], q[64], buf[65536];
	long long first = *id + 1;
	static char **tmps;
	static size_t ntmps;

	for (size_t i = 0; i < n; i++) {
		if (faccessat(nd, names[i], F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;       /* taken already (after an overflow) */
			die("faccessat", names[i]);
		}
		snprintf(name, sizeof name, "%010lld.job", ++*id);
		if (renameat2(nd, names[i], in, name, RENAME_NOREPLACE) < 0)
			die("rename", names[i]);
	}
	dsync(in, "incoming");
	dsync(nd, "new");
	for (long long k = first; k <= *id; k++) {
		struct stat st;
		ssize_t len;
		int fd;

		snprintf(name, sizeof name, "%010lld.job", k);
		snprintf(tmp, sizeof tmp, ".%010lld.tmp", k);
		if (fstatat(in, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			die("fstatat", name);
		if ((fd = openat(in, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
		    (len = read(fd, buf, sizeof buf)) < 0 || close(fd) < 0)
			die("read", name);
		if (nspare) {
			snprintf(tmp, sizeof tmp, ".s%lld", spare[--nspare]);
			if ((fd = openat(td, tmp, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
			    fchmod(fd, 0644) < 0 || write(fd, buf, (size_t)len) != len ||
			    ftruncate(fd, len) < 0 || close(fd) < 0)
				die("write", tmp);
		} else {
			snprintf(tmp, sizeof tmp, ".%010lld.tmp", k);
			if ((fd = openat(td, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0 ||
			    fchmod(fd, 0644) < 0 || write(fd, buf, (size_t)len) != len || close(fd) < 0)
				die("write", tmp);
		}
		if (!(tmps = realloc(tmps, (ntmps + 1) * sizeof *tmps)) || !(tmps[ntmps++] = strdup(tmp)))
			die("realloc", NULL);
	}
	if (syncfs(spool) < 0)
		die("syncfs", NULL);
	for (long long k = first; k <= *id; k++) {
		snprintf(q, sizeof q, "000000000-%010lld.job", k);
		if (renameat(td, tmps[k - first], qd, q) < 0)
			die("rename", tmps[k - first]);
		free(tmps[k - first]);
	}
	ntmps = 0;
	dsync(qd, "queued");
	for (long long k = first; k <= *id; k++) {
		snprintf(name, sizeof name, "%010lld.job", k);
		snprintf(tmp, sizeof tmp, ".s%lld", ++spare_seq);
		if (nspare < SPARES_MAX ? renameat(in, name, td, tmp) < 0 : unlinkat(in, name, 0) < 0)
			die("remove", name);
		if (nspare < SPARES_MAX)
			spare[nspare++] = spare_seq;
	}
	dsync(in, "incoming");
}

static void free_names(char **names, size_t *n)
{
	while (*n)
		free(names[--*n]);
}

int main(int argc, char **argv)
{
	char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
	char *names[sizeof buf / sizeof(struct inotify_event)];
	struct timespec t0;
	char *pn;
	long long id = 0, want;
	int spool, nd, in, qd, td, ifd, status, overflow = 0;
	struct dirent *e;
	DIR *dir;
	pid_t pid;

	if (argc < 4 || (want = strtoll(argv[2], NULL, 10)) <= 0) {
		fprintf(stderr, "usage: fsreplay SPOOL N WRITER [ARG...]\n");
		return 2;
	}
	if (mkdir(argv[1], 0755) < 0 && errno != EEXIST)
		die("mkdir", argv[1]);
	if ((spool = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		die("open", argv[1]);
	nd = subdir(spool, "new");
	in = subdir(spool, "incoming");
	qd = subdir(spool, "queued");
	td = subdir(spool, "tmp");
	if (asprintf(&pn, "%s/new", argv[1]) < 0)
		die("asprintf", NULL);
	if ((ifd = inotify_init1(IN_CLOEXEC)) < 0 || inotify_add_watch(ifd, pn, IN_MOVED_TO | IN_ONLYDIR) < 0)
		die("inotify", pn);
	free(pn);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if ((pid = fork()) < 0)
		die("fork", NULL);
	if (pid == 0) {
		execvp(argv[3], argv + 3);
		die("exec", argv[3]);
	}
	while (id < want) {
		ssize_t got = read(ifd, buf, sizeof buf);
		size_t n = 0;

		if (got < 0)
			die("read", "inotify");
		for (char *p = buf; p < buf + got; ) {
			struct inotify_event *ev = (struct inotify_event *)p;

			if (ev->mask & IN_Q_OVERFLOW)
				overflow = 1;
			else if (ev->len && (ev->mask & IN_MOVED_TO))
				names[n++] = ev->name;
			p += sizeof *ev + ev->len;
		}
		if (!overflow) {
			accept_batch(spool, nd, in, qd, td, names, n, &id);
			continue;
		}
		overflow = 0;
		if (!(dir = fdopendir(dup(nd))))
			die("opendir", "new");
		rewinddir(dir);         /* the dup shares nd's offset */
		for (n = 0; (e = readdir(dir)); ) {
			if (e->d_name[0] == '.')
				continue;
			if (!(names[n++] = strdup(e->d_name)))
				die("strdup", NULL);
			if (n == sizeof names / sizeof *names) {
				accept_batch(spool, nd, in, qd, td, names, n, &id);
				free_names(names, &n);
			}
		}
		accept_batch(spool, nd, in, qd, td, names, n, &id);
		free_names(names, &n);
		closedir(dir);
	}
	printf("%.3f\n", since(&t0));
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "fsreplay: %s failed\n", argv[3]);
		return 1;
	}
	return 0;
}
