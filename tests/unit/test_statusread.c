/*
 * test_statusread.c - status's fast path over SPOOL/queued.idx
 * (index.c's reader, statusread.c): the fields of a line are decoded
 * in one pass, and accepted or refused exactly as the format says;
 * index_parse notes whether the IDs ascend and how many lines have a
 * done/ copy; status_read gives the lines that share no job ID as the
 * index's own views (they last), in its order, and groups the others
 * (two lines of one ID, a line and a done/ copy) as it always did:
 * each job once, the higher rev.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spool.h"
#include "t.h"

#define MAGIC "cardbaton-queued-index 4 " CARDBATON_VERSION

static char *xstrdup(const char *s)
{
	char *p = strdup(s);

	if (!p)
		abort();
	return p;
}

/* The index of TABLE's lines (JSON: their elements, or NULL for none),
 * for queued/ and done/ keys Q and D (D NULL: "done -"). */
static char *index_text(const char *table, const char *json, const struct index_key *q,
			const struct index_key *d)
{
	size_t n = 0;

	for (const char *p = table; *p; p++)
		n += *p == '\n';
	if (!json)
		json = "";
	if (d)
		return xasprintf("%s\nqueued %llu %llu %lld %lld\ndone %llu %llu %lld %lld\n"
				 "sections %zu %zu\n%s%send %zu\n", MAGIC, q->dev, q->ino, q->ctime,
				 q->mtime, d->dev, d->ino, d->ctime, d->mtime, strlen(table),
				 strlen(json), table, json, n);
	return xasprintf("%s\nqueued %llu %llu %lld %lld\ndone -\nsections %zu %zu\n%s%send %zu\n",
			 MAGIC, q->dev, q->ino, q->ctime, q->mtime, strlen(table), strlen(json),
			 table, json, n);
}

/* index_parse of one table line (no JSON section): 0 or -1; *IX kept
 * (index_free) when 0. */
static int parse_line(const char *line, struct spool_index *ix, char **buf)
{
	struct index_key k = { 1, 2, 3, 4 };
	char *t = xasprintf("%s\n", line);
	int r;

	*buf = index_text(t, NULL, &k, NULL);
	free(t);
	r = index_parse(*buf, strlen(*buf), 0, ix);
	if (r < 0) {
		free(*buf);
		*buf = NULL;
	}
	return r;
}

/* A table line of job ID at PRIO, with SINCE and NODE as given, owned
 * by alice. */
static char *line_of(long long prio, long long id, long long rev, int dup, const char *since,
		     const char *node)
{
	char *name = name_queued(prio, id), *l;

	l = xasprintf("j %s 7 8 %d %lld %lld %lld queued alice %s 0 %s 0 - true", name, dup, rev,
		      id, prio, since, node);
	free(name);
	return l;
}

/* status_read's callbacks: what it gave, in order. */
struct seen {
	long long id[16], prio[16];
	enum job_state state[16];
	struct status_view *v[16];
	int stable[16];
	int n, warnings;
};

static void seen_job(void *arg, struct status_view *v, int stable)
{
	struct seen *s = arg;

	if (s->n < 16) {
		s->id[s->n] = v->id;
		s->prio[s->n] = v->priority;
		s->state[s->n] = v->state;
		s->v[s->n] = v;
		s->stable[s->n++] = stable;
	}
}

static void seen_warn(void *arg, const struct cb_err *e)
{
	struct seen *s = arg;

	s->warnings += e->msg != NULL;
}

/* status_read of SP (ALL: --all) into S; R kept for the views. */
static void read_all(struct spool *sp, int all, struct status_read *r, struct seen *s)
{
	struct cb_err err = { 0 };

	memset(r, 0, sizeof *r);
	memset(s, 0, sizeof *s);
	r->all = all;
	r->job = seen_job;
	r->warn = seen_warn;
	r->arg = s;
	CHECK(status_read(sp, r, &err) == 0);
	cb_err_free(&err);
}

static char *ids_of(const struct seen *s)
{
	char *out = xstrdup("");

	for (int i = 0; i < s->n; i++) {
		char *t = xasprintf("%s%s%lld", out, i ? " " : "", s->id[i]);

		free(out);
		out = t;
	}
	return out;
}

/* V is one of IX's own views. */
static int in_index(const struct spool_index *ix, const struct status_view *v)
{
	for (size_t i = 0; i < ix->n; i++)
		if (&ix->e[i].v == v)
			return 1;
	return 0;
}

/* The record of job ID in STATE, running `true`, named with PAD bytes
 * (0: no name); malloc'd. */
static char *record_text(long long id, enum job_state state, size_t pad)
{
	static const char *const argv[] = { "true", NULL };
	struct job j;
	char *text;

	memset(&j, 0, sizeof j);
	j.id = id;
	j.rev = 1;
	j.state = state;
	j.def.set = JF_COMMAND;
	j.def.argv = calloc(2, sizeof *j.def.argv);
	j.def.argv[0] = xstrdup(argv[0]);
	j.def.argc = 1;
	if (pad) {
		j.def.set |= JF_NAME;
		j.def.name = malloc(pad + 1);
		memset(j.def.name, 'n', pad);
		j.def.name[pad] = '\0';
	}
	text = job_to_json(&j);
	job_free(&j);
	return text;
}

/* TMPFD/.spare written over with TEXT and cut to its length, as the
 * daemon writes a spare file (batch.c). */
static int spare_write(int tmpfd, const char *text)
{
	int fd = openat(tmpfd, ".spare", O_WRONLY | O_CLOEXEC);
	size_t n = strlen(text);
	int r;

	if (fd < 0)
		return -1;
	r = pwrite(fd, text, n, 0) == (ssize_t)n && ftruncate(fd, (off_t)n) == 0 ? 0 : -1;
	close(fd);
	return r;
}

/* 2,000 spool_find of job ID while PID (a child moving its record;
 * killed after, when > 0) races them: *ERRORS lookups that failed (the
 * first said), *FOUND that found it, *WRONG that found another job's
 * record, or it elsewhere than WANT (-1: anywhere). */
static void race_lookups(struct spool *sp, long long id, int want, pid_t pid, int *errors,
			 int *found, int *wrong)
{
	struct cb_err err = { 0 };

	for (int i = 0; i < 2000 && pid > 0; i++) {
		enum spool_dir d;
		struct job j;
		char *name = NULL;
		int r = spool_find(sp, id, &j, &d, &name, &err);

		if (r < 0 && (*errors)++ == 0)
			fprintf(stderr, "spool_find: %s\n", err.msg);
		if (r == 1) {
			(*found)++;
			*wrong += j.id != id || (want >= 0 && (int)d != want);
			job_free(&j);
		}
		cb_err_free(&err);
		free(name);
	}
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

int main(void)
{
	char dir[] = "/tmp/test_statusread.XXXXXX", *path, *buf;
	struct cb_err err = { 0 };
	struct spool sp;
	struct spool_index ix;

	/* Numbers: '-' or not, then 1 to 19 digits, in range; nothing
	 * else (SINCE takes any long long). */
	{
		static const struct { const char *f; int ok; long long v; } nums[] = {
			{ "0", 1, 0 }, { "-0", 1, 0 }, { "42", 1, 42 }, { "-42", 1, -42 },
			{ "0000000000000000042", 1, 42 },
			{ "9223372036854775807", 1, 9223372036854775807LL },
			{ "-9223372036854775808", 1, -9223372036854775807LL - 1 },
			{ "9223372036854775808", 0, 0 }, { "-9223372036854775809", 0, 0 },
			{ "00000000000000000042", 0, 0 }, { "99999999999999999999", 0, 0 },
			{ "", 0, 0 }, { "-", 0, 0 }, { "--1", 0, 0 }, { "+1", 0, 0 }, { "1a", 0, 0 },
			{ "1-", 0, 0 }, { "1%20", 0, 0 }, { "1\t", 0, 0 },
		};

		for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
			char *l = line_of(0, 1, 1, 0, nums[i].f, "-");
			int r = parse_line(l, &ix, &buf);

			CHECK(r == (nums[i].ok ? 0 : -1));
			if (r == 0) {
				CHECK(ix.n == 1 && ix.e[0].v.since == nums[i].v);
				CHECK_STR(ix.e[0].v.owner, "alice");
				index_free(&ix);
				free(buf);
			}
			if (r != (nums[i].ok ? 0 : -1))
				fprintf(stderr, "number field '%s'\n", nums[i].f);
			free(l);
		}
	}
	/* Strings: %XX decoded (not %00, nor %0A: a cell never holds a
	 * line end, fuzz_index), "%-" is NULL (refused where a cell must
	 * be a string); a raw byte <= 0x20, 0x7f or '%' refused. */
	{
		static const struct { const char *f, *v; } strs[] = {
			{ "h", "h" }, { "a%20b", "a b" }, { "%41%42", "AB" }, { "%25", "%" },
			{ "%c3%a9", "\xc3\xa9" }, { "\xc3\xa9", "\xc3\xa9" }, { "x%0A", NULL }, { "x%0a", NULL }, { "x%09", "x\t" },
			{ "%00", NULL }, { "%4", NULL }, { "%4g", NULL }, { "x%", NULL },
			{ "%-", NULL }, { "a\x7f" "b", NULL }, { "a\x01", NULL }, { "a%", NULL },
		};

		for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
			char *l = line_of(0, 1, 1, 0, "5", strs[i].f);
			int r = parse_line(l, &ix, &buf);

			CHECK(r == (strs[i].v ? 0 : -1));
			if (r == 0) {
				CHECK(ix.n == 1);
				CHECK_STR(ix.e[0].v.node, strs[i].v);
				/* the cells after it are intact */
				CHECK_STR(ix.e[0].v.gpus, "0");
				CHECK_STR(ix.e[0].v.command, "true");
				index_free(&ix);
				free(buf);
			}
			free(l);
		}
		/* The last field at the end of its line, and an empty one. */
		{
			char *name = name_queued(0, 1);
			char *l = xasprintf("j %s 7 8 0 1 1 0 queued %%- 5 0 - 0 - %%-", name);

			CHECK(parse_line(l, &ix, &buf) < 0);        /* COMMAND NULL */
			free(l);
			l = xasprintf("j %s 7 8 0 1 1 0 queued %%- 5 0 - 0 - ", name);
			CHECK(parse_line(l, &ix, &buf) == 0);       /* COMMAND "", no OWNER */
			if (buf) {
				CHECK_STR(ix.e[0].v.command, "");
				CHECK(ix.e[0].v.owner == NULL);
				index_free(&ix);
				free(buf);
			}
			free(l);
			/* OWNER: a string (escaped as any cell), or "%-" for none;
			 * a line of version 3 (no OWNER) is a field short. */
			l = xasprintf("j %s 7 8 0 1 1 0 queued a%%20b 5 0 - 0 - true", name);
			CHECK(parse_line(l, &ix, &buf) == 0);
			if (buf) {
				CHECK_STR(ix.e[0].v.owner, "a b");
				CHECK(ix.e[0].v.since == 5);
				index_free(&ix);
				free(buf);
			}
			free(l);
			l = xasprintf("j %s 7 8 0 1 1 0 queued 5 0 - 0 - true", name);
			CHECK(parse_line(l, &ix, &buf) < 0);
			free(l);
			l = xasprintf("j %s 7 8 0 1 1 0 queued %%- 5 0 - 0 - true ", name);
			CHECK(parse_line(l, &ix, &buf) < 0);        /* a field too many */
			free(l);
			free(name);
		}
	}
	/* What index_parse notes: IDs ascending, lines with a done/ copy. */
	{
		struct index_key k = { 1, 2, 3, 4 };
		char *a = line_of(0, 1, 1, 0, "5", "-"), *b = line_of(0, 2, 1, 1, "5", "-"),
		     *c = line_of(-1, 2, 1, 1, "5", "-");
		char *t = xasprintf("%s\n%s\n", a, b);

		buf = index_text(t, NULL, &k, NULL);
		CHECK(index_parse(buf, strlen(buf), 0, &ix) == 0);
		CHECK(ix.n == 2 && ix.ascending == 1 && ix.n_in_done == 1);
		index_free(&ix);
		free(buf);
		free(t);
		t = xasprintf("%s\n%s\n%s\n", a, b, c);   /* ID 2 twice */
		buf = index_text(t, NULL, &k, NULL);
		CHECK(index_parse(buf, strlen(buf), 0, &ix) == 0);
		CHECK(ix.n == 3 && ix.ascending == 0 && ix.n_in_done == 2);
		index_free(&ix);
		free(buf);
		free(t);
		free(a);
		free(b);
		free(c);
	}

	if (!mkdtemp(dir) || !(path = xasprintf("%s/spool", dir)) ||
	    spool_open(&sp, path, 1, &err) < 0) {
		fprintf(stderr, "cannot make a spool: %s\n", err.msg ? err.msg : strerror(errno));
		return 1;
	}

	/*
	 * status_read over an index made by hand: job 3 under two
	 * priorities (the line of rev 4 wins), job 1 with a done/ copy of
	 * a higher rev (cancelled: shown only with --all), jobs 9 and 2
	 * alone, and a line the reader must read itself (an invalid
	 * record: one warning).
	 */
	{
		static const char *const argv[] = { "true", NULL };
		struct index_key q, d;
		struct wbatch b = WBATCH_INIT;
		struct status_read r;
		struct seen s;
		struct job j;
		char *l[5], *raw = name_queued(0, 5), *t, *ids;

		memset(&j, 0, sizeof j);
		j.id = 1;
		j.state = JS_CANCELLED;
		j.rev = 9;
		j.priority = j.def.priority = -1;
		j.def.set = JF_COMMAND | JF_PRIORITY;
		j.reason = xstrdup("cancelled by user");
		j.submitted = j.finished = 1795952114816LL;
		j.def.argv = calloc(2, sizeof *j.def.argv);
		j.def.argv[0] = xstrdup(argv[0]);
		j.def.argc = 1;
		CHECK(spool_stage(&sp, &b, &j, &err) == 0 && wbatch_commit(&b, sp.fd) == 0);
		wbatch_free(&b);
		job_free(&j);
		CHECK(atomic_write(sp.dir[SD_TMP], sp.dir[SD_QUEUED], raw, "{ not json", 10, 0600) == 0);
		CHECK(index_key_of(sp.dir[SD_QUEUED], &q) == 0 && index_key_of(sp.dir[SD_DONE], &d) == 0);

		l[0] = line_of(5, 3, 1, 0, "5", "-");
		l[1] = line_of(5, 9, 1, 0, "5", "n9");
		l[2] = line_of(0, 2, 1, 0, "5", "n2");
		l[3] = line_of(0, 3, 4, 0, "5", "-");
		l[4] = line_of(-1, 1, 1, 1, "5", "-");
		t = xasprintf("%s\n%s\n%s\n%s\nr %s 7 8 0\n%s\n", l[0], l[1], l[2], l[3], raw, l[4]);
		/* done/ known (the copy of 1 noted), then not known. */
		for (int known = 1; known >= 0; known--) {
			buf = index_text(t, NULL, &q, known ? &d : NULL);
			CHECK(atomic_write(sp.dir[SD_TMP], sp.fd, INDEX_NAME, buf, strlen(buf), 0600) == 0);
			free(buf);
			CHECK(index_read(&sp, 0, &ix) == 1 && ix.n == 6 && ix.done_fresh == known);
			index_free(&ix);

			read_all(&sp, 0, &r, &s);
			ids = ids_of(&s);
			/* 9 and 2 first, in the index's order, as its views. */
			CHECK_STR(ids, "9 2 3");
			CHECK(s.warnings == 1 && r.ex == EX_DATAERR_);
			for (int i = 0; i < s.n; i++) {
				CHECK(s.stable[i] && in_index(&r.ix, s.v[i]));
				if (s.id[i] == 3)
					CHECK(s.prio[i] == 0);      /* rev 4 */
				if (s.id[i] == 9)
					CHECK_STR(s.v[i]->node, "n9");
			}
			free(ids);
			status_read_free(&r);

			read_all(&sp, 1, &r, &s);
			ids = ids_of(&s);
			CHECK_STR(ids, "9 2 1 3");
			for (int i = 0; i < s.n; i++)
				if (s.id[i] == 1)
					CHECK(s.state[i] == JS_CANCELLED && !s.stable[i]);
			free(ids);
			status_read_free(&r);
		}
		for (int i = 0; i < 5; i++)
			free(l[i]);
		free(t);
		free(raw);
	}

	/*
	 * spool_find of a job the daemon moves between queued/ and
	 * running/ while it looks (the race that failed `submit --after`
	 * in CI: "queued/...: No such file or directory", exit 66): a
	 * child moves it to and fro as fast as it can while 2,000 lookups
	 * run; none is an error.  (Moved on every pass, it can be missed:
	 * only passes that find it nowhere five times say so.)
	 */
	{
		char *qn = name_queued(0, 77), *pn = name_plain(77), *text = record_text(77, JS_QUEUED, 0);
		int errors = 0, found = 0, wrong = 0;
		pid_t pid;

		CHECK(text && atomic_write(sp.dir[SD_TMP], sp.dir[SD_QUEUED], qn, text,
					   strlen(text), 0600) == 0);
		pid = fork();
		if (pid == 0)
			for (;;)
				if (renameat(sp.dir[SD_QUEUED], qn, sp.dir[SD_RUNNING], pn) < 0 ||
				    renameat(sp.dir[SD_RUNNING], pn, sp.dir[SD_QUEUED], qn) < 0)
					_exit(1);
		CHECK(pid > 0);
		race_lookups(&sp, 77, -1, pid, &errors, &found, &wrong);
		CHECK(errors == 0);
		CHECK(wrong == 0);
		CHECK(found > 0);
		free(text);
		free(qn);
		free(pn);
	}

	/*
	 * spool_find of a job whose record the daemon rewrites in place
	 * with its spare files (LAYOUT.md §3) while it looks: the old file
	 * goes into tmp/ by an exchange and is then written over with
	 * another job's record, longer.  A reader that opened the old file
	 * just before must take it as moved on, never read job 79's bytes
	 * (or a mix) as job 78's record, nor call it "larger than 16 MiB"
	 * (the CI failure of `submit --after`).  2,000 lookups against a
	 * child doing that as fast as it can: no error, always job 78.
	 */
	{
		char *pn = name_plain(78), *t78 = record_text(78, JS_RUNNING, 1),
		     *t79 = record_text(79, JS_RUNNING, 300);
		int errors = 0, found = 0, wrong = 0, sfd;
		pid_t pid;

		CHECK(t78 && t79 && atomic_write(sp.dir[SD_TMP], sp.dir[SD_RUNNING], pn, t78,
						 strlen(t78), 0600) == 0);
		sfd = openat(sp.dir[SD_TMP], ".spare", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		CHECK(sfd >= 0);
		close(sfd);
		pid = fork();
		if (pid == 0)
			for (;;) {
				/* The record rewritten through the spare, then the
				 * old file (now the spare) reused for job 79. */
				if (spare_write(sp.dir[SD_TMP], t78) < 0 ||
				    exchange_at(sp.dir[SD_TMP], ".spare", sp.dir[SD_RUNNING], pn) != 0 ||
				    spare_write(sp.dir[SD_TMP], t79) < 0)
					_exit(1);
			}
		CHECK(pid > 0);
		race_lookups(&sp, 78, SD_RUNNING, pid, &errors, &found, &wrong);
		CHECK(errors == 0);
		CHECK(wrong == 0);
		CHECK(found > 0);
		free(t78);
		free(t79);
		free(pn);
	}

	spool_close(&sp);
	{
		char *cmd = xasprintf("rm -rf '%s'", dir);

		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
		free(cmd);
	}
	free(path);
	return T_DONE();
}
