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

/* D's hex digest of BUF[0..LEN) fed in pieces of STEP bytes (STEP 0:
 * at once). */
static void sha_of(const void *buf, size_t len, size_t step, char hex[65])
{
	struct sha256 s;
	unsigned char d[32];
	const unsigned char *p = buf;

	sha256_init(&s);
	if (!step)
		sha256_update(&s, p, len);
	for (size_t off = 0; step && off < len; off += step)
		sha256_update(&s, p + off, len - off < step ? len - off : step);
	sha256_final(&s, d);
	sha256_hex(d, hex);
}

/* FIPS 180-4's examples (the NIST CSRC "SHA256.pdf" vectors). */
static void sha256_both_ways(void)
{
	static unsigned char buf[4099];
	unsigned char d1[32], d2[32];
	struct sha256 s;
	unsigned x = 12345;

	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (unsigned char)((x = x * 1103515245 + 12345) >> 16);
	for (size_t len = 0; len < sizeof buf; len += len < 130 ? 1 : 257) {
		sha256_init(&s);
		sha256_update(&s, buf, len);
		sha256_final(&s, d1);
		sha256_portable = 1;
		sha256_init(&s);
		sha256_update(&s, buf, len);
		sha256_final(&s, d2);
		sha256_portable = 0;
		CHECK(!memcmp(d1, d2, 32));
	}
}

static void sha256_vectors(void)
{
	static const char two[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	char hex[65];
	char *mil = malloc(1000000);
	struct sha256 s;
	unsigned char d[32];
	/* Odd sizes, so that every piece meets the block boundaries at a
	 * different offset, and pieces smaller and larger than a block. */
	static const size_t odd[] = { 1, 3, 63, 65, 127, 4093 };

	sha_of("", 0, 0, hex);
	CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	sha_of("abc", 3, 0, hex);
	CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	sha_of(two, strlen(two), 0, hex);
	CHECK_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	sha_of(two, strlen(two), 5, hex);
	CHECK_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	CHECK(mil != NULL);
	if (!mil)
		return;
	memset(mil, 'a', 1000000);
	sha_of(mil, 1000000, 0, hex);
	CHECK_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
		sha_of(mil, 1000000, odd[i], hex);
		CHECK_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	}
	/* Lengths 55, 56 and 64: the padding's one-block and two-block
	 * cases (the 448-bit message above is the 56-byte one). */
	sha_of(mil, 55, 0, hex);
	CHECK_STR(hex, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
	sha_of(mil, 64, 7, hex);
	CHECK_STR(hex, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
	/* A context is reusable after init. */
	sha256_init(&s);
	sha256_update(&s, "x", 1);
	sha256_final(&s, d);
	sha_of("abc", 3, 1, hex);
	CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	free(mil);
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
	sha256_vectors();
	/* Where the CPU has the SHA extensions, the above went through
	 * them: the portable code too, and both alike on odd sizes. */
	sha256_portable = 1;
	sha256_vectors();
	sha256_portable = 0;
	sha256_both_ways();
	close(dfd);
	{
		char *cmd = xasprintf("rm -rf '%s'", dir);

		if (cmd && system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
		free(cmd);
	}
	return T_DONE();
}
