/*
 * test_wire.c - the controller <-> worker record format (wire.h,
 * LAYOUT.md section 10).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wire.h"
#include "t.h"

static char *fmt(const struct wire_rec *r)
{
	char *s = NULL;

	if (wire_format(r, &s) < 0)
		return NULL;
	return s;
}

static void test_format(void)
{
	struct wire_rec r = { 0 };
	char *s;

	CHECK(wire_add(&r, "attempt", "3fa9c2d1-42-2") == 0);
	CHECK(wire_add(&r, "arg", "a b%c\n") == 0);
	CHECK(wire_add(&r, "arg", "") == 0);
	CHECK(wire_addf(&r, "gpu", "%d", 3) == 0);
	CHECK(wire_addn(&r, "raw", "x\0y\x7f\x01", 5) == 0);
	CHECK(wire_add(&r, "utf8", "gr\xc3\xbc\xc3\x9f dich") == 0);
	s = fmt(&r);
	CHECK_STR(s, "attempt 3fa9c2d1-42-2\n"
		     "arg a%20b%25c%0A\n"
		     "arg \n"
		     "gpu 3\n"
		     "raw x%00y%7F%01\n"
		     "utf8 gr\xc3\xbc\xc3\x9f%20dich\n"
		     "end\n");
	free(s);
	wire_free(&r);

	/* An empty record is just "end". */
	s = fmt(&r);
	CHECK_STR(s, "end\n");
	free(s);

	/* Keys are [a-z0-9_]+. */
	CHECK(wire_add(&r, "Bad", "x") == -1 && errno == EINVAL);
	CHECK(wire_add(&r, "a b", "x") == -1);
	CHECK(wire_add(&r, "", "x") == -1);
	CHECK(r.n == 0);
	wire_free(&r);
}

static void test_get_set(void)
{
	struct wire_rec r = { 0 };
	long long v;

	CHECK(wire_add(&r, "gpu", "1") == 0);
	CHECK(wire_add(&r, "gpu", "2") == 0);
	CHECK(wire_add(&r, "n", "-9223372036854775808") == 0);
	CHECK(wire_add(&r, "big", "9223372036854775808") == 0);
	CHECK(wire_add(&r, "sp", " 1") == 0);
	CHECK(wire_add(&r, "plus", "+1") == 0);
	CHECK(wire_add(&r, "empty", "") == 0);
	CHECK(wire_addn(&r, "nul", "1\0002", 3) == 0);
	CHECK_STR(wire_get(&r, "gpu"), "1");
	CHECK(wire_get(&r, "none") == NULL);
	CHECK(wire_get_ll(&r, "gpu", &v) == 0 && v == 1);
	CHECK(wire_get_ll(&r, "n", &v) == 0 && v == LLONG_MIN);
	CHECK(wire_get_ll(&r, "big", &v) == -1);
	CHECK(wire_get_ll(&r, "sp", &v) == -1);
	CHECK(wire_get_ll(&r, "plus", &v) == -1);
	CHECK(wire_get_ll(&r, "empty", &v) == -1);
	CHECK(wire_get_ll(&r, "nul", &v) == -1);
	CHECK(wire_get_ll(&r, "none", &v) == -1);

	/* wire_set replaces the first, keeps the order, or appends. */
	CHECK(wire_set(&r, "gpu", "7") == 0);
	CHECK(r.n == 8);
	CHECK_STR(r.f[0].val, "7");
	CHECK_STR(r.f[1].val, "2");
	CHECK(wire_set(&r, "state", "lost") == 0);
	CHECK(r.n == 9);
	CHECK_STR(wire_get(&r, "state"), "lost");
	wire_free(&r);
	CHECK(r.n == 0 && r.f == NULL);
}

static void test_parse(void)
{
	struct wire_rec r = { 0 };
	const char *why = NULL;
	const char *in = "attempt x-1\narg a%20b%0a\narg \nunknown_key whatever\nend\nnext 1\nend\n";
	long n;

	n = wire_parse(in, strlen(in), &r, &why);
	CHECK(n == (long)(strstr(in, "end\n") - in) + 4);
	CHECK(r.n == 4);
	CHECK_STR(r.f[0].key, "attempt");
	CHECK_STR(r.f[1].val, "a b\n");        /* lower-case hex is read too */
	CHECK(r.f[1].len == 4);
	CHECK_STR(r.f[2].val, "");
	CHECK(r.f[2].len == 0);
	wire_free(&r);

	/* Incomplete: 0, nothing kept. */
	CHECK(wire_parse("a 1\nb 2\n", 8, &r, &why) == 0 && r.n == 0);
	CHECK(wire_parse("a 1\nen", 6, &r, &why) == 0 && r.n == 0);
	CHECK(wire_parse("", 0, &r, &why) == 0);
	/* "end" needs its LF. */
	CHECK(wire_parse("end", 3, &r, &why) == 0);
	CHECK(wire_parse("end\n", 4, &r, &why) == 4 && r.n == 0);

	/* Malformed: -1, EINVAL, a reason, nothing kept. */
	{
		static const char *const bad[] = {
			"novalue\nend\n",
			"Key x\nend\n",
			" x\nend\n",
			"a b c\nend\n",
			"a x\ty\nend\n",
			"a x\ry\nend\n",
			"a %4\nend\n",
			"a %zz\nend\n",
			"a %\nend\n",
			"a \x7f\nend\n",
			"\nend\n",
			"end \n",   /* a key "end" without its value is fine... */
		};
		size_t i;

		for (i = 0; i + 1 < sizeof bad / sizeof bad[0]; i++) {
			why = NULL;
			errno = 0;
			n = wire_parse(bad[i], strlen(bad[i]), &r, &why);
			CHECK(n == -1);
			CHECK(errno == EINVAL);
			CHECK(why != NULL);
			CHECK(r.n == 0);
		}
		/* ...but it is not the end of the record. */
		n = wire_parse(bad[i], strlen(bad[i]), &r, &why);
		CHECK(n == 0);
	}

	/* A malformed line is an error even before the record is whole. */
	CHECK(wire_parse("a b c\n", 6, &r, &why) == -1);

	/* %00 is refused, not taken cut short at the NUL: every reader
	 * uses values as C strings. */
	{
		static const char *const nul[] = {
			"a x%00y\nend\n", "a %00\nend\n", "state succeeded%00x\nend\n",
			"ok 1\nreason a%00\nend\n", "a %0041\nend\n", "a 1\nb %00\n", /* no end yet */
		};

		for (size_t i = 0; i < sizeof nul / sizeof nul[0]; i++) {
			why = NULL;
			errno = 0;
			CHECK(wire_parse(nul[i], strlen(nul[i]), &r, &why) == -1);
			CHECK(errno == EINVAL && r.n == 0 && r.f == NULL);
			CHECK_STR(why, "%00 (a NUL byte) in a value");
		}
		/* Other escapes of low bytes are fine. */
		CHECK(wire_parse("a %01%10%0a\nend\n", 16, &r, &why) == 16);
		CHECK(r.n == 1 && r.f[0].len == 3 && !memcmp(r.f[0].val, "\x01\x10\n", 3));
		wire_free(&r);
	}
}

static void test_roundtrip(void)
{
	struct wire_rec a = { 0 }, b = { 0 };
	char all[256];
	char *s;
	long n;
	size_t i;
	const char *why;

	/* Every byte but NUL, which no reader takes (below). */
	for (i = 0; i < 255; i++)
		all[i] = (char)(i + 1);
	all[255] = 1;
	CHECK(wire_addn(&a, "bytes", all, sizeof all) == 0);
	CHECK(wire_add(&a, "k_9", "%%41") == 0);
	n = wire_format(&a, &s);
	CHECK(n > 0);
	/* Nothing below 0x21, no 0x7f and no bare '%' other than escapes. */
	for (i = 0; i < (size_t)n; i++) {
		unsigned char c = (unsigned char)s[i];

		CHECK(c == '\n' || c == ' ' || (c >= 0x21 && c != 0x7f));
		if (c == '%')
			CHECK(i + 2 < (size_t)n && s[i + 1] != '\n' && s[i + 2] != '\n');
	}
	CHECK(wire_parse(s, (size_t)n, &b, &why) == n);
	CHECK(b.n == 2);
	CHECK(b.f[0].len == 256 && memcmp(b.f[0].val, all, 256) == 0);
	CHECK(b.f[0].val[256] == '\0');
	CHECK_STR(wire_get(&b, "k_9"), "%%41");
	free(s);
	wire_free(&a);
	wire_free(&b);

	/* A value with a NUL is written (as %00), and refused when read. */
	CHECK(wire_addn(&a, "raw", "x\0y", 3) == 0);
	n = wire_format(&a, &s);
	CHECK(n > 0);
	CHECK_STR(s, "raw x%00y\nend\n");
	why = NULL;
	CHECK(wire_parse(s, (size_t)n, &b, &why) == -1 && b.n == 0);
	CHECK_STR(why, "%00 (a NUL byte) in a value");
	free(s);
	wire_free(&a);
}

/* wire_read from a FILE: records one after the other, EOF, errors. */
static void test_read(void)
{
	FILE *fp = tmpfile();
	struct wire_rec r = { 0 };
	const char *why;

	if (!fp) {
		CHECK(fp != NULL);
		return;
	}
	fputs("ready 1\nend\nattempt a\nstate running\nend\n", fp);
	rewind(fp);
	CHECK(wire_read(fp, &r, &why) == 1);
	CHECK_STR(wire_get(&r, "ready"), "1");
	wire_free(&r);
	CHECK(wire_read(fp, &r, &why) == 1);
	CHECK_STR(wire_get(&r, "state"), "running");
	wire_free(&r);
	CHECK(wire_read(fp, &r, &why) == 0);
	fclose(fp);

	fp = tmpfile();
	fputs("attempt a\nstate run", fp);
	rewind(fp);
	why = NULL;
	CHECK(wire_read(fp, &r, &why) == -1 && why != NULL && r.n == 0);
	fclose(fp);

	fp = tmpfile();
	fputs("attempt\nend\n", fp);
	rewind(fp);
	why = NULL;
	CHECK(wire_read(fp, &r, &why) == -1 && errno == EINVAL && why != NULL);
	fclose(fp);

	/* A %00 read from a file (a state file, the spec on stdin). */
	fp = tmpfile();
	fputs("attempt a\narg x%00y\nend\n", fp);
	rewind(fp);
	why = NULL;
	CHECK(wire_read(fp, &r, &why) == -1 && errno == EINVAL && r.n == 0);
	CHECK_STR(why, "%00 (a NUL byte) in a value");
	fclose(fp);

	/* Longer than WIRE_MAX_RECORD: refused, not read to the end. */
	fp = tmpfile();
	{
		size_t i;
		static char line[1 << 16];

		memset(line, 'x', sizeof line - 1);
		line[0] = 'a';
		line[1] = ' ';
		line[sizeof line - 2] = '\n';
		for (i = 0; i < (WIRE_MAX_RECORD / (sizeof line - 1)) + 2; i++)
			fputs(line, fp);
		fputs("end\n", fp);
	}
	rewind(fp);
	why = NULL;
	CHECK(wire_read(fp, &r, &why) == -1 && why != NULL && r.n == 0);
	fclose(fp);
}

static void test_write_fd(void)
{
	struct wire_rec r = { 0 }, back = { 0 };
	int p[2];
	char buf[256];
	ssize_t n;
	const char *why;

	CHECK(pipe(p) == 0);
	CHECK(wire_add(&r, "version", "0.1.0") == 0);
	CHECK(wire_write_fd(p[1], &r) == 0);
	close(p[1]);
	n = read(p[0], buf, sizeof buf - 1);
	close(p[0]);
	CHECK(n == 18);
	buf[n > 0 ? n : 0] = '\0';
	CHECK_STR(buf, "version 0.1.0\nend\n");
	CHECK(wire_parse(buf, (size_t)n, &back, &why) == n);
	CHECK_STR(wire_get(&back, "version"), "0.1.0");
	wire_free(&r);
	wire_free(&back);
	CHECK(wire_write_fd(-1, &r) == -1 && errno == EBADF);
}

int main(void)
{
	test_format();
	test_get_set();
	test_parse();
	test_roundtrip();
	test_read();
	test_write_fd();
	return T_DONE();
}
