/*
 * test_index.c - SPOOL/queued.idx (spool-layout/index.c) and status's
 * reading of the spool (statusread.c): what the index says of each
 * record is what status makes of the record itself; it is used only
 * while queued/ is as it was made for; anything malformed is refused;
 * the writer reuses lines of unchanged files and notes done/ copies;
 * status_read gives each job once, the higher rev, index or not.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "spool.h"
#include "t.h"

static char *xstrdup(const char *s)
{
	char *p = strdup(s);

	if (!p)
		abort();
	return p;
}

/* A queued job; ARGV NULL-terminated, or SHELL. */
static void mkjob(struct job *j, long long id, long long prio, const char *name,
		  const char *const *argv, const char *shell, const char *node)
{
	memset(j, 0, sizeof *j);
	j->id = id;
	j->state = JS_QUEUED;
	j->priority = j->def.priority = prio;
	j->def.set = JF_COMMAND | JF_PRIORITY;
	j->reason = xstrdup("waiting to be scheduled");
	j->submitted = j->queued_at = 1795952114816LL + id;
	if (name) {
		j->def.name = xstrdup(name);
		j->def.set |= JF_NAME;
	}
	if (node) {
		j->def.node = xstrdup(node);
		j->def.set |= JF_NODE;
	}
	if (argv) {
		size_t n = 0;

		while (argv[n])
			n++;
		if (!(j->def.argv = calloc(n + 1, sizeof *j->def.argv)))
			abort();
		for (size_t i = 0; i < n; i++)
			j->def.argv[i] = xstrdup(argv[i]);
		j->def.argc = n;
	} else {
		j->def.shell = xstrdup(shell);
	}
}

static void put(struct spool *sp, struct job *j)
{
	struct cb_err err = { 0 };
	struct wbatch b = WBATCH_INIT;

	CHECK(spool_stage(sp, &b, j, &err) == 0 && wbatch_commit(&b, sp->fd) == 0);
	wbatch_free(&b);
	cb_err_free(&err);
}

/* index_write until queued/ has settled (a state, not a time: it
 * returns 0 until then). */
static int write_settled(struct spool *sp)
{
	struct timespec ts = { 0, 10 * 1000000L };
	struct spool_index ix;
	int r = 0;

	/* ... and done/ too, for its marks (the daemon writes again when
	 * done/ has settled). */
	for (int i = 0; i < 1000; i++) {
		if ((r = index_write(sp)) != 0 && index_read(sp, 0, &ix) == 1) {
			int known = ix.has_done;

			index_free(&ix);
			if (known)
				return r;
		}
		if (r < 0)
			return r;
		nanosleep(&ts, NULL);
	}
	return 0;
}

static int same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

/* The index's entry for queued/NAME says what status_view_of says of
 * the record. */
static int entry_matches(struct spool *sp, const struct index_ent *e, int with_json)
{
	struct cb_err err = { 0 };
	struct status_view v;
	struct job j;
	int ok;

	if (e->raw || spool_load(sp, SD_QUEUED, e->name, &j, &err) < 0) {
		cb_err_free(&err);
		return 0;
	}
	if (status_view_of(&j, 1, &v) < 0) {
		job_free(&j);
		return 0;
	}
	ok = e->id == j.id && v.id == e->v.id && v.rev == e->v.rev &&
	     v.priority == e->v.priority && v.state == e->v.state && v.since == e->v.since &&
	     v.natt == e->v.natt && same_str(v.node, e->v.node) && same_str(v.gpus, e->v.gpus) &&
	     same_str(v.name, e->v.name) && same_str(v.command, e->v.command) &&
	     same_str(v.owner, e->v.owner) &&
	     (with_json ? same_str(v.json, e->v.json) : e->v.json == NULL);
	status_view_free(&v);
	job_free(&j);
	return ok;
}

static char *slurp(int dirfd, const char *name, size_t *len)
{
	char *buf;

	if (read_capped(dirfd, name, (size_t)1 << 30, &buf, len) < 0)
		return NULL;
	return buf;
}

static const struct index_ent *find(const struct spool_index *ix, long long id)
{
	for (size_t i = 0; i < ix->n; i++)
		if (ix->e[i].id == id)
			return &ix->e[i];
	return NULL;
}

/* status_read's callbacks: the IDs given, in order; the warnings. */
struct seen {
	long long id[32];
	enum job_state state[32];
	int n, stable, warnings;
};

static void seen_job(void *arg, struct status_view *v, int stable)
{
	struct seen *s = arg;

	if (s->n < 32) {
		s->state[s->n] = v->state;
		s->id[s->n++] = v->id;
	}
	s->stable += stable;
}

static void seen_warn(void *arg, const struct cb_err *e)
{
	struct seen *s = arg;

	s->warnings += e->msg != NULL;
}

/* status_read of SP (ALL: --all): the IDs it gave, sorted, as "1 2 3". */
static char *read_ids(struct spool *sp, int all, struct seen *s, int *ex)
{
	struct status_read r = { 0 };
	struct cb_err err = { 0 };
	char *out = xstrdup("");

	memset(s, 0, sizeof *s);
	r.all = all;
	r.with_json = 1;
	r.job = seen_job;
	r.warn = seen_warn;
	r.arg = s;
	CHECK(status_read(sp, &r, &err) == 0);
	cb_err_free(&err);
	*ex = r.ex;
	status_read_free(&r);
	for (int i = 0; i < s->n; i++)
		for (int k = i + 1; k < s->n; k++)
			if (s->id[k] < s->id[i]) {
				long long t = s->id[i];
				enum job_state ts = s->state[i];

				s->id[i] = s->id[k];
				s->id[k] = t;
				s->state[i] = s->state[k];
				s->state[k] = ts;
			}
	for (int i = 0; i < s->n; i++) {
		char *t = xasprintf("%s%s%lld", out, i ? " " : "", s->id[i]);

		free(out);
		out = t;
	}
	return out;
}

/* NODE of a Slurm node's job: "NODE(slurm:N)", its control characters
 * shown as '?' like any node's; the view owns what it made (ASan: no
 * leak, no double free), and a node without a Slurm job is itself. */
static void test_slurm_node_view(void)
{
	static const struct { const char *node, *slurm, *want; } c[] = {
		{ "cluster", "4711", "cluster(slurm:4711)" },
		{ "clu\x01ster", "4711", "clu?ster(slurm:4711)" },
		{ "cluster", "47\n11", "cluster(slurm:47?11)" },
		{ "cluster", NULL, "cluster" },
		{ "clu\x7fster", NULL, "clu?ster" },
	};

	for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
		struct status_view v;
		struct job j = { .id = 9, .state = JS_RUNNING };
		struct attempt *a = job_new_attempt(&j);

		if (!a)
			abort();
		a->state = AS_RUNNING;
		a->id = xstrdup("a-9-0");
		a->node = xstrdup(c[i].node);
		a->slurm_job = c[i].slurm ? xstrdup(c[i].slurm) : NULL;
		CHECK(status_view_of(&j, 1, &v) == 0);
		CHECK_STR(v.node, c[i].want);
		CHECK(v.json && strstr(v.json, "\"slurm_job\":") != NULL);
		status_view_free(&v);
		job_free(&j);
	}
}

int main(void)
{
	char dir[] = "/tmp/test_index.XXXXXX", *path, *buf;
	struct cb_err err = { 0 };
	struct spool sp;
	struct spool_index ix;
	struct job j;
	size_t len;
	int fails_at = -1;

	if (!mkdtemp(dir) || !(path = xasprintf("%s/spool", dir)) ||
	    spool_open(&sp, path, 1, &err) < 0) {
		fprintf(stderr, "cannot make a spool: %s\n", err.msg ? err.msg : strerror(errno));
		return 1;
	}
	test_slurm_node_view();

	/* Records with everything the format must carry through: spaces,
	 * '%', and in command words tabs, newlines, control characters (C0,
	 * DEL, a UTF-8 C1); UTF-8, empty words, a string command, pinned
	 * nodes and cards, no name and an empty one. */
	{
		static const char *const a1[] = { "python3", "train.py", "--seed", "1", NULL };
		static const char *const a2[] = { "echo", "a b", "50%", "%20", "", "tab\there",
						   "nl\nx", "del\x7f", "c1\xc2\x85", "é ü", NULL };

		mkjob(&j, 1, 0, NULL, a1, NULL, NULL);
		put(&sp, &j);
		job_free(&j);
		mkjob(&j, 2, 5, "name with  spaces %41 %-\xc3\xa9", a2, NULL, "node-1");
		j.owner = xstrdup("alice");     /* an owner (a lab's spool) */
		j.owner_uid = 1001;
		put(&sp, &j);
		job_free(&j);
		mkjob(&j, 3, -7, "", NULL, "while :; do echo %s\n; done", NULL);
		j.owner = xstrdup("bob smith%\x01");     /* escaped; shown printable */
		j.owner_uid = 1002;
		put(&sp, &j);
		job_free(&j);
		mkjob(&j, 4, 0, "-", NULL, "echo 50%; exit", "n1");
		j.def.gpus = calloc(2, sizeof *j.def.gpus);
		j.def.gpus[0] = 3;
		j.def.gpus[1] = 1;
		j.def.ngpus = 2;
		j.def.set |= JF_GPUS;
		put(&sp, &j);
		job_free(&j);
	}
	/* Not records: an invalid one and a symbolic link (status reads
	 * and warns about them itself), a name of no grammar (ignored). */
	CHECK(atomic_write(sp.dir[SD_TMP], sp.dir[SD_QUEUED], "100000000-0000000005.job",
			   "{ not json", 10, 0600) == 0);
	CHECK(symlinkat("/etc/passwd", sp.dir[SD_QUEUED], "100000000-0000000006.job") == 0);
	CHECK(atomic_write(sp.dir[SD_TMP], sp.dir[SD_QUEUED], "stray.job", "x", 1, 0600) == 0);

	CHECK(write_settled(&sp) == 1);
	CHECK(index_write(&sp) == 1);   /* already current */

	/* What the index says is what the records say. */
	for (int with_json = 0; with_json < 2; with_json++) {
		CHECK(index_read(&sp, with_json, &ix) == 1);
		CHECK(ix.n == 6);
		CHECK(ix.done_fresh == 1);
		for (long long id = 1; id <= 4; id++) {
			const struct index_ent *e = find(&ix, id);

			CHECK(e && !e->raw && !e->in_done && entry_matches(&sp, e, with_json));
		}
		CHECK(find(&ix, 5) && find(&ix, 5)->raw);
		CHECK(find(&ix, 6) && find(&ix, 6)->raw);
		/* The owners: as the view shows them (printable), none for
		 * a record without. */
		CHECK(find(&ix, 2) && find(&ix, 2)->v.owner && !strcmp(find(&ix, 2)->v.owner, "alice"));
		CHECK(find(&ix, 3) && find(&ix, 3)->v.owner &&
		      !strcmp(find(&ix, 3)->v.owner, "bob smith%?"));
		CHECK(find(&ix, 1) && find(&ix, 1)->v.owner == NULL);
		/* Dispatch order. */
		CHECK(ix.n == 6 && ix.e[0].id == 2 && ix.e[5].id == 3);
		index_free(&ix);
	}

	/* Every truncation and a bad byte anywhere are refused. */
	CHECK((buf = slurp(sp.fd, INDEX_NAME, &len)) != NULL);
	for (size_t k = 0; buf && k < len; k++) {
		char *c = malloc(k + 1);

		memcpy(c, buf, k);
		c[k] = '\0';
		if (index_parse(c, k, 1, &ix) == 0) {
			index_free(&ix);
			fails_at = (int)k;
		}
		free(c);
	}
	CHECK(fails_at == -1);
	/* A line split or two joined anywhere, a digit of the header
	 * made a letter: never the same index. */
	for (size_t k = 0; buf && k < len; k++) {
		size_t hdr = (size_t)(strstr(buf, "\nsections ") - buf);
		char *c;

		hdr += strcspn(buf + hdr + 1, "\n") + 1;
		if (!(buf[k] == ' ' || buf[k] == '\n' || (k < hdr && buf[k] >= '0' && buf[k] <= '9')))
			continue;
		if (!(c = malloc(len + 1)))
			abort();
		memcpy(c, buf, len + 1);
		c[k] = buf[k] == '\n' ? ' ' : buf[k] == ' ' ? '\n' : 'x';
		if (index_parse(c, len, 1, &ix) == 0) {
			index_free(&ix);
			if (fails_at == -1)
				fails_at = (int)k;
		}
		free(c);
	}
	CHECK(fails_at == -1);
	if (fails_at != -1)
		fprintf(stderr, "accepted with byte %d changed\n", fails_at);
	free(buf);

	/* Another version's index is not used. */
	CHECK((buf = slurp(sp.fd, INDEX_NAME, &len)) != NULL);
	if (buf) {
		buf[strlen("cardbaton-queued-index ")] = '9';
		CHECK(index_parse(buf, len, 1, &ix) < 0);
		free(buf);
	}

	/* A change in queued/ makes it stale at once, even with the mtime
	 * put back (ctime moves all the same). */
	{
		struct stat st;
		struct timespec t[2];

		CHECK(fstat(sp.dir[SD_QUEUED], &st) == 0);
		mkjob(&j, 7, 0, NULL, NULL, "true", NULL);
		put(&sp, &j);
		job_free(&j);
		t[0] = st.st_atim;
		t[1] = st.st_mtim;
		CHECK(futimens(sp.dir[SD_QUEUED], t) == 0);
		CHECK(index_read(&sp, 1, &ix) == 0 && ix.n == 0);
	}

	/* Rewritten: the new record is there, a changed one is new, the
	 * others are as before; a done/ copy is noted. */
	mkjob(&j, 1, 0, "renamed", NULL, "true", NULL);
	j.rev = 5;
	put(&sp, &j);
	job_free(&j);
	mkjob(&j, 3, -7, NULL, NULL, "true", NULL);
	j.state = JS_CANCELLED;
	j.rev = 9;
	put(&sp, &j);                   /* done/0000000003.job beside its queued record */
	job_free(&j);
	CHECK(write_settled(&sp) == 1);
	CHECK(index_read(&sp, 1, &ix) == 1);
	CHECK(ix.n == 7);
	for (size_t i = 0; i < ix.n; i++)
		if (!ix.e[i].raw)
			CHECK(entry_matches(&sp, &ix.e[i], 1));
	CHECK(find(&ix, 1) && !strcmp(find(&ix, 1)->v.name, "renamed") && find(&ix, 1)->v.rev == 6);
	CHECK(find(&ix, 7) != NULL);
	CHECK(find(&ix, 3) && find(&ix, 3)->in_done && !find(&ix, 2)->in_done);
	CHECK(ix.done_fresh == 1);
	index_free(&ix);

	/* done/ changed since: the marks are no longer exact. */
	mkjob(&j, 8, 0, NULL, NULL, "true", NULL);
	j.state = JS_SUCCEEDED;
	put(&sp, &j);
	job_free(&j);
	CHECK(index_read(&sp, 0, &ix) == 1 && ix.done_fresh == 0);
	index_free(&ix);

	/* A symbolic link, or a directory, in its place: not used. */
	CHECK(unlinkat(sp.fd, INDEX_NAME, 0) == 0);
	CHECK(symlinkat("queued", sp.fd, INDEX_NAME) == 0);
	CHECK(index_read(&sp, 1, &ix) == 0);
	CHECK(unlinkat(sp.fd, INDEX_NAME, 0) == 0);
	CHECK(mkdirat(sp.fd, INDEX_NAME, 0700) == 0);
	CHECK(index_read(&sp, 1, &ix) == 0);
	CHECK(index_write(&sp) < 0);    /* cannot replace a directory: the caller backs off */
	CHECK(unlinkat(sp.fd, INDEX_NAME, AT_REMOVEDIR) == 0);

	/* printable and shell_join, as the tools show text. */
	{
		char *p = printable("a\tb\x7f" "c\xc2\x85" "d\xc3\xa9");
		static char *const words[] = { "ls", "a b", "it's", "x\ny", "" };
		char *q = shell_join((char **)words, 5);

		CHECK_STR(p, "a?b?c?d\xc3\xa9");
		CHECK_STR(q, "ls 'a b' 'it'\\''s' $'x\\ny' ''");
		free(p);
		free(q);
	}

	/* status_read: each job once, the higher rev of two records
	 * kept (3's done/ copy: cancelled, shown only with --all), the
	 * records it cannot read said once each (65); the same with the
	 * index, whose lines it gives as they are. */
	for (int with_index = 0; with_index < 2; with_index++) {
		struct seen seen;
		char *ids;
		int ex;

		if (with_index)
			CHECK(write_settled(&sp) == 1);
		ids = read_ids(&sp, 0, &seen, &ex);
		CHECK_STR(ids, "1 2 4 7");
		CHECK(seen.warnings == 2 && ex == EX_DATAERR_);
		CHECK(with_index ? seen.stable == 4 : seen.stable == 0);
		free(ids);
		ids = read_ids(&sp, 1, &seen, &ex);
		CHECK_STR(ids, "1 2 3 4 7 8");
		CHECK(seen.warnings == 2 && ex == EX_DATAERR_);
		for (int i = 0; i < seen.n; i++)
			if (seen.id[i] == 3)
				CHECK(seen.state[i] == JS_CANCELLED);
		free(ids);
	}
	{
		struct status_view a = { 0 }, b = { 0 };
		struct status_key ka, kb;

		a.state = b.state = JS_QUEUED;
		a.priority = 5;
		a.id = 9;
		b.id = 1;
		status_key_of(&a, &ka);
		status_key_of(&b, &kb);
		CHECK(status_key_cmp(&ka, &kb) < 0);    /* priority first */
		b.state = JS_RUNNING;
		b.priority = 99;
		status_key_of(&b, &kb);
		CHECK(status_key_cmp(&ka, &kb) < 0);    /* queued before running */
	}

	spool_close(&sp);
	{
		char *rm = xasprintf("rm -rf '%s'", dir);

		if (!rm || system(rm) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
		free(rm);
	}
	free(path);
	return T_DONE();
}
