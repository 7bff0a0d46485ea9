/* Unit tests: base/ (base.h), the libc-only base under the worker, the
 * library and the tools. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "t.h"

static char *dir;       /* a fresh directory for the test */

static mode_t mode_of(int dfd, const char *name)
{
	struct stat st;

	return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st.st_mode & 07777 : (mode_t)-1;
}

static void strings_and_clocks(void)
{
	char *s = xasprintf("%d-%s", 7, "x");
	long long a = mono_ms(), b;

	CHECK_STR(s, "7-x");
	free(s);
	CHECK(now_ms() > 1600000000000LL);
	sleep_ms(5);
	b = mono_ms();
	CHECK(b - a >= 5);
	s = exe_dir();
	CHECK(s && s[0] == '/' && access(s, X_OK) == 0);
	free(s);
}

static void reads(int dfd)
{
	char *buf = NULL, big[10000];
	size_t len = 0;
	int p[2];

	/* A pipe, to its end; more than MAX is EFBIG. */
	CHECK(pipe(p) == 0);
	CHECK(write_full(p[1], "hello", 5) == 0);
	close(p[1]);
	CHECK(read_fd(p[0], 5, &buf, &len) == 0 && len == 5 && strcmp(buf, "hello") == 0);
	close(p[0]);
	free(buf);
	memset(big, 'x', sizeof big);
	CHECK(pipe(p) == 0);
	CHECK(write_full(p[1], big, 5000) == 0);
	close(p[1]);
	CHECK(read_fd(p[0], 4999, &buf, &len) < 0 && errno == EFBIG);
	close(p[0]);

	/* read_capped refuses what it must not follow or swallow. */
	CHECK(atomic_write(dfd, dfd, "f", "abc", 3, 0600) == 0);
	CHECK(read_capped(dfd, "f", 3, &buf, &len) == 0 && len == 3 && strcmp(buf, "abc") == 0);
	free(buf);
	CHECK(read_capped(dfd, "f", 2, &buf, &len) < 0 && errno == EFBIG);
	CHECK(symlinkat("f", dfd, "link") == 0);
	CHECK(read_capped(dfd, "link", 100, &buf, &len) < 0 && errno == ELOOP);
	CHECK(mkdirat(dfd, "d", 0700) == 0);
	CHECK(read_capped(dfd, "d", 100, &buf, &len) < 0 && errno == EISDIR);
	CHECK(mkfifoat(dfd, "fifo", 0600) == 0);
	CHECK(read_capped(dfd, "fifo", 100, &buf, &len) < 0 && errno == EINVAL);
	CHECK(read_capped(dfd, "none", 100, &buf, &len) < 0 && errno == ENOENT);
}

static void writes(int dfd)
{
	char *buf = NULL, *p;
	size_t len;
	int fd;

	/* The mode is exactly the one asked for, whatever the umask; no
	 * temporary file stays. */
	umask(077);
	CHECK(atomic_write(dfd, dfd, "m", "1", 1, 0640) == 0);
	CHECK(mode_of(dfd, "m") == 0640);
	CHECK(atomic_write(dfd, dfd, "m", "22", 2, 0640) == 0);
	CHECK(read_capped(dfd, "m", 10, &buf, &len) == 0 && strcmp(buf, "22") == 0);
	free(buf);
	/* Through a fixed temporary name: a stale one is a writer that
	 * died, removed first. */
	fd = openat(dfd, ".s.tmp", O_WRONLY | O_CREAT | O_EXCL, 0644);
	CHECK(fd >= 0 && write_full(fd, "stale", 5) == 0);
	close(fd);
	CHECK(atomic_write_at(dfd, ".s.tmp", "s", "new", 3, 0600, 1) == 0);
	CHECK(read_capped(dfd, "s", 10, &buf, &len) == 0 && strcmp(buf, "new") == 0);
	free(buf);
	CHECK(mode_of(dfd, "s") == 0600);
	CHECK(mode_of(dfd, ".s.tmp") == (mode_t)-1);
	CHECK(atomic_write_at(dfd, ".s.tmp", "s", "", 0, 0600, 0) == 0);
	CHECK(read_capped(dfd, "s", 10, &buf, &len) == 0 && len == 0);
	free(buf);
	/* AW_KEEP_OLD: the file replaced is not freed but left under the
	 * temporary name; where there was none, a plain rename. */
	CHECK(atomic_write_at(dfd, ".k.tmp", "k", "first", 5, 0600, AW_DATA | AW_KEEP_OLD) == 0);
	CHECK(mode_of(dfd, ".k.tmp") == (mode_t)-1);
	{
		struct stat a, b;

		CHECK(fstatat(dfd, "k", &a, 0) == 0);
		CHECK(atomic_write_at(dfd, ".k.tmp", "k", "second", 6, 0600, AW_DATA | AW_KEEP_OLD) == 0);
		CHECK(read_capped(dfd, "k", 10, &buf, &len) == 0 && strcmp(buf, "second") == 0);
		free(buf);
		CHECK(read_capped(dfd, ".k.tmp", 10, &buf, &len) == 0 && strcmp(buf, "first") == 0);
		free(buf);
		CHECK(fstatat(dfd, ".k.tmp", &b, 0) == 0 && a.st_ino == b.st_ino);
	}
	/* The next write takes the kept file for a stale one. */
	CHECK(atomic_write_at(dfd, ".k.tmp", "k", "third", 5, 0600, AW_DURABLE) == 0);
	CHECK(mode_of(dfd, ".k.tmp") == (mode_t)-1);
	CHECK(read_capped(dfd, "k", 10, &buf, &len) == 0 && strcmp(buf, "third") == 0);
	free(buf);
	/* A symbolic link as the temporary name is removed, not followed. */
	CHECK(symlinkat("m", dfd, ".l.tmp") == 0);
	CHECK(atomic_write_at(dfd, ".l.tmp", "l", "x", 1, 0600, 1) == 0);
	CHECK(read_capped(dfd, "m", 10, &buf, &len) == 0 && strcmp(buf, "22") == 0);
	free(buf);

	/* mkdir -p: what is made 0700 whatever the umask, what is there kept. */
	umask(0);
	p = xasprintf("%s/a/b/c", dir);
	CHECK(p && mkdir_p(p) == 0);
	CHECK(mode_of(dfd, "a") == 0700 && mode_of(dfd, "a/b/c") == 0700);
	CHECK(fchmodat(dfd, "a", 0755, 0) == 0);
	CHECK(mkdir_p(p) == 0 && mode_of(dfd, "a") == 0755);
	free(p);
	CHECK(mkdir_p("") < 0);
	umask(022);
}

static void locks(int dfd)
{
	int a = -1, b = -1;

	CHECK(lock_at(dfd, "lk", LOCK_EX, 0, &a) < 0 && errno == ENOENT && a == -1);
	CHECK(lock_at(dfd, "lk", LOCK_EX, 1, &a) == 1 && a >= 0);
	CHECK(mode_of(dfd, "lk") == 0600);
	/* Another open file description: held. */
	CHECK(lock_at(dfd, "lk", LOCK_SH, 0, &b) == 0 && b == -1);
	b = openat(dfd, "lk", O_RDONLY);
	CHECK(b >= 0 && lock_try(b, LOCK_EX) == 0);
	close(a);
	CHECK(lock_try(b, LOCK_EX) == 1);
	close(b);
	CHECK(symlinkat("lk", dfd, "lk2") == 0);
	CHECK(lock_at(dfd, "lk2", LOCK_EX, 1, &a) < 0 && errno == ELOOP);
}

int main(void)
{
	char tmpl[] = "/tmp/test_base.XXXXXX";
	int dfd;

	dir = mkdtemp(tmpl);
	CHECK(dir != NULL);
	if (!dir)
		return T_DONE();
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	strings_and_clocks();
	reads(dfd);
	writes(dfd);
	locks(dfd);
	close(dfd);
	{
		char *cmd = xasprintf("rm -rf '%s'", dir);

		if (cmd && system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
		free(cmd);
	}
	return T_DONE();
}
