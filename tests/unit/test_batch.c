/* Unit tests: spool-layout/batch.c, the batch of atomic writes and its
 * spare files (LAYOUT.md §3). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "batch.h"
#include "t.h"

static int tmpfd, afd, bfd;     /* tmp/, a/, b/ of a fresh directory */

static ino_t ino_of(int dfd, const char *name)
{
	struct stat st;

	return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st.st_ino : 0;
}

static int has(int dfd, const char *name, const char *text)
{
	char *buf = NULL;
	size_t len;
	int ok = read_capped(dfd, name, 1 << 20, &buf, &len) == 0 && len == strlen(text) &&
		 !memcmp(buf, text, len);

	free(buf);
	return ok;
}

/* Files in tmp/ (all of them: the temp files and the spares). */
static int tmp_count(void)
{
	int n = 0, fd = openat(tmpfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

static int write1(struct wbatch *b, int dstfd, const char *name, const char *text, int replaces)
{
	if (wbatch_add(b, tmpfd, dstfd, name, text, strlen(text), 0640) < 0)
		return -1;
	b->v[b->n - 1].replaces = replaces;
	if (wbatch_commit(b, tmpfd) < 0)
		return -1;
	wbatch_free(b);
	return 0;
}

/* Without spares: every write a new inode, nothing kept in tmp/. */
static void plain(void)
{
	struct wbatch b = WBATCH_INIT;

	CHECK(write1(&b, afd, "p.job", "one", 0) == 0 && has(afd, "p.job", "one"));
	CHECK(write1(&b, afd, "p.job", "two", 1) == 0 && has(afd, "p.job", "two"));
	CHECK(tmp_count() == 0);
}

static void spares(void)
{
	struct spares p = { 0 };
	struct wbatch b = WBATCH_INIT;
	ino_t one, two, moved;
	struct stat st;

	b.spares = &p;
	/* A rewrite in place exchanges: the old file becomes a spare ... */
	CHECK(write1(&b, afd, "1.job", "first, a longer text", 0) == 0);
	one = ino_of(afd, "1.job");
	CHECK(write1(&b, afd, "1.job", "second", 1) == 0 && has(afd, "1.job", "second"));
	two = ino_of(afd, "1.job");
	CHECK(two != one && p.nready == 1 && p.npending == 0 && tmp_count() == 1);
	/* ... and the next write is that inode, written over and cut to
	 * its length, its mode set. */
	CHECK(write1(&b, bfd, "2.job", "third", 0) == 0 && has(bfd, "2.job", "third"));
	CHECK(ino_of(bfd, "2.job") == one && p.nready == 0 && tmp_count() == 0);
	CHECK(fstatat(bfd, "2.job", &st, 0) == 0 && (st.st_mode & 07777) == 0640 && st.st_size == 5);

	/* A removed copy is pending until its own directory is synced: a
	 * commit into another does not make it ready, ... */
	CHECK(spares_keep(&p, tmpfd, afd, "1.job") == 0);
	CHECK(faccessat(afd, "1.job", F_OK, 0) < 0 && errno == ENOENT);
	CHECK(p.npending == 1 && p.nready == 0);
	CHECK(write1(&b, bfd, "3.job", "fourth", 0) == 0 && ino_of(bfd, "3.job") != two);
	/* ... while the file a rewrite of b/ exchanged is ready after it. */
	CHECK(write1(&b, bfd, "3.job", "fourth again", 1) == 0 && p.npending == 1 && p.nready == 1);
	CHECK(write1(&b, bfd, "3b.job", "reuses the exchanged", 0) == 0 && p.npending == 1 && p.nready == 0);
	CHECK(has(bfd, "3.job", "fourth again") && has(bfd, "3b.job", "reuses the exchanged"));
	spares_settle(&p, bfd);
	CHECK(p.npending == 1 && p.nready == 0);
	spares_settle(&p, afd);
	CHECK(p.nready == 1 && p.npending == 0);
	CHECK(write1(&b, bfd, "4.job", "fifth", 0) == 0 && ino_of(bfd, "4.job") == two);
	CHECK(has(bfd, "4.job", "fifth"));

	/* A spare someone linked elsewhere is removed, never written over:
	 * the other name keeps its text. */
	moved = ino_of(bfd, "4.job");
	CHECK(linkat(bfd, "4.job", afd, "keep", 0) == 0);
	CHECK(spares_keep(&p, tmpfd, bfd, "4.job") == 0);
	spares_settle(&p, bfd);
	CHECK(write1(&b, bfd, "5.job", "sixth", 0) == 0 && ino_of(bfd, "5.job") != moved);
	CHECK(has(afd, "keep", "fifth") && p.nready == 0 && tmp_count() == 0);

	/* A spare someone replaced with a symbolic link or a FIFO: removed,
	 * never followed or blocked on. */
	for (int k = 0; k < 2; k++) {
		char *name;

		CHECK(write1(&b, bfd, "7.job", "x", 0) == 0 && spares_keep(&p, tmpfd, bfd, "7.job") == 0);
		spares_settle(&p, bfd);
		CHECK(p.nready == 1);
		name = p.ready[0];
		CHECK(unlinkat(tmpfd, name, 0) == 0);
		CHECK(k ? mkfifoat(tmpfd, name, 0600) == 0 : symlinkat("../a/keep", tmpfd, name) == 0);
		CHECK(write1(&b, bfd, "8.job", "not through it", 0) == 0 && has(bfd, "8.job", "not through it"));
		CHECK(has(afd, "keep", "fifth") && p.nready == 0 && tmp_count() == 0);
	}

	/* A missing file to replace: a plain rename; a missing one to keep:
	 * ENOENT, as unlinkat. */
	CHECK(write1(&b, bfd, "6.job", "seventh", 1) == 0 && has(bfd, "6.job", "seventh"));
	CHECK(p.nready == 0 && tmp_count() == 0);
	CHECK(spares_keep(&p, tmpfd, bfd, "none.job") < 0 && errno == ENOENT);

	/* Full: removed copies are unlinked. */
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < SPARES_MAX + 3; i++) {
			char name[32];

			snprintf(name, sizeof name, "f%d.job", i);
			CHECK(pass ? spares_keep(&p, tmpfd, bfd, name) == 0 : write1(&b, bfd, name, "x", 0) == 0);
		}
	CHECK(p.npending == SPARES_MAX && faccessat(bfd, "f0.job", F_OK, 0) < 0);
	spares_settle(&p, bfd);
	CHECK(p.nready == SPARES_MAX && tmp_count() == SPARES_MAX);
	/* A rewrite takes one and gives one back: the pool stays full. */
	CHECK(write1(&b, bfd, "6.job", "eighth", 1) == 0 && has(bfd, "6.job", "eighth"));
	CHECK(p.nready == SPARES_MAX && tmp_count() == SPARES_MAX);
	spares_free(&p, tmpfd);
	CHECK(p.nready == 0 && tmp_count() == 0);
}

int main(void)
{
	char tmpl[] = "/tmp/test_batch.XXXXXX";
	char *dir = mkdtemp(tmpl);
	int dfd;

	CHECK(dir != NULL);
	if (!dir)
		return T_DONE();
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	CHECK(mkdirat(dfd, "tmp", 0700) == 0 && mkdirat(dfd, "a", 0700) == 0 && mkdirat(dfd, "b", 0700) == 0);
	tmpfd = openat(dfd, "tmp", O_RDONLY | O_DIRECTORY);
	afd = openat(dfd, "a", O_RDONLY | O_DIRECTORY);
	bfd = openat(dfd, "b", O_RDONLY | O_DIRECTORY);
	plain();
	spares();
	{
		char *cmd = xasprintf("rm -rf '%s'", dir);

		if (cmd && system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
		free(cmd);
	}
	return T_DONE();
}
