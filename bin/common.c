/*
 * common.c - the shared part of the cardbaton-* tools (see common.h).
 *
 * Design: every tool is a short main() over the spool library; what
 * they must all do the same way lives here, so that "every failure
 * prints exactly one line, PROG: text, and exits with a sysexits(3)
 * code" is true by construction rather than by care in six places.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

const char *progname = "cardbaton";
const char *opt_config;

/* Shipping the worker to a node takes a while: say so on a terminal. */
static void tty_progress(void *arg, const char *line)
{
	(void)arg;
	if (isatty(2))
		fprintf(stderr, "cardbaton: %s\n", line);
}

void prog_init(int argc, char **argv)
{
	const char *s;

	node_set_progress(tty_progress, NULL);
	if (argc < 1 || !argv[0] || !*argv[0])
		return;
	s = strrchr(argv[0], '/');
	progname = s && s[1] ? s + 1 : argv[0];
}

/* ---- dying ---------------------------------------------------------------- */

static void vline(const char *fmt, va_list ap, const char *suffix)
{
	/* One fprintf-free write so that concurrent tools never interleave
	 * half lines on a shared terminal or log. */
	struct sbuf b = { 0 };
	char *msg = vxasprintf(fmt, ap);

	if (sbuf_addf(&b, "%s: %s%s%s\n", progname, msg ? msg : strerror(ENOMEM),
		      suffix ? ": " : "", suffix ? suffix : "") == 0) {
		if (write_full(2, b.s, b.len) < 0) {
			/* stderr is gone: nobody to tell */
		}
	} else {
		fputs(progname, stderr);
		fputs(": out of memory\n", stderr);
	}
	sbuf_free(&b);
	free(msg);
}

void die(int ex, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	va_start(ap, fmt);
	vline(fmt, ap, NULL);
	va_end(ap);
	exit(ex);
}

void die_sys(int ex, const char *fmt, ...)
{
	va_list ap;
	const char *e = strerror(errno);

	fflush(stdout);
	va_start(ap, fmt);
	vline(fmt, ap, e);
	va_end(ap);
	exit(ex);
}

void die_err(const struct cb_err *err)
{
	int ex = err->ex ? err->ex : EX_SOFTWARE_;

	if (err->msg)
		die(ex, "%s", err->msg);
	die(ex == EX_SOFTWARE_ ? EX_OSERR_ : ex, "%s", strerror(ENOMEM));
}

void warn_line(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	va_start(ap, fmt);
	vline(fmt, ap, NULL);
	va_end(ap);
}

char *must_asprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = vxasprintf(fmt, ap);
	va_end(ap);
	if (!s)
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	return s;
}

/* ---- options -------------------------------------------------------------- */

void usage_error(const char *usage, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	msg = vxasprintf(fmt, ap);
	va_end(ap);
	die(EX_USAGE_, "%s (usage: %s)", msg ? msg : strerror(ENOMEM), usage);
}

/* The option the last getopt_long error was about, as the user wrote
 * it: "-x" or "--name" (without any "=value"). */
static char *bad_option(char **argv, int argc)
{
	const char *w = optind >= 1 && optind - 1 < argc ? argv[optind - 1] : "";

	if (strncmp(w, "--", 2) == 0)
		return must_asprintf("%.*s", (int)strcspn(w, "="), w);
	if (optopt > ' ' && optopt < 0x7f)
		return must_asprintf("-%c", optopt);
	return must_asprintf("%s", w);
}

int tool_getopt(int argc, char **argv, const char *shortopts,
		const struct option *longopts, int stop_at_operand, const char *usage)
{
	static char *sopts;
	int ch;

	if (!sopts)
		sopts = must_asprintf("%s:h%s", stop_at_operand ? "+" : "", shortopts);
	opterr = 0;
	for (;;) {
		ch = getopt_long(argc, argv, sopts, longopts, NULL);
		switch (ch) {
		case OPT_CONFIG:
			if (!*optarg)
				die(EX_USAGE_, "--config: empty path");
			opt_config = optarg;
			continue;
		case 'h':
			printf("usage: %s\n", usage);
			finish_stdout();
			exit(0);
		case '?':
			usage_error(usage, "unknown option '%s'", bad_option(argv, argc));
		case ':':
			usage_error(usage, "option '%s' needs an argument", bad_option(argv, argc));
		default:
			return ch;
		}
	}
}

long long flag_ll(const char *flag, const char *val, long long lo, long long hi)
{
	long long v;

	if (parse_ll(val, lo, hi, &v) < 0)
		die(EX_USAGE_, "%s: '%s' is not an integer from %lld to %lld", flag, val, lo, hi);
	return v;
}

long long arg_jobid(const char *s)
{
	long long id;

	if (jobid_parse(s, &id) < 0)
		die(EX_USAGE_, "'%s' is not a job ID (1 to %lld)", s, SEQ_MAX);
	return id;
}

/* ---- config and spool ----------------------------------------------------- */

void tool_config(struct config *c)
{
	struct cb_err err = { 0 };

	if (config_load(opt_config, c, &err) < 0)
		die_err(&err);
}

int tool_spool(const struct config *c, struct spool *sp, int create)
{
	struct cb_err err = { 0 };
	struct stat st;

	if ((!create || c->lab) && stat(c->spool, &st) < 0 && errno == ENOENT) {
		if (c->lab && create)   /* a lab's spool is the daemon's to make */
			die(EX_CONFIG_, "%s: no spool here (the lab's daemon, cardbaton run, makes it)",
			    c->spool);
		return 0;
	}
	if (c->lab) {
		gid_t gid;
		char *why;

		if (lab_resolve(c->lab, &gid, &why) < 0)
			die(EX_CONFIG_, "%s: %s", c->path ? c->path : "config", why ? why : "out of memory");
		if (spool_open_lab(sp, c->spool, gid, 0, &err) < 0)
			die_err(&err);
		return 1;
	}
	if (spool_open(sp, c->spool, create, &err) < 0)
		die_err(&err);
	return 1;
}

/* ---- output --------------------------------------------------------------- */

void finish_stdout(void)
{
	errno = 0;
	if (fflush(stdout) == EOF || ferror(stdout)) {
		if (errno)
			die_sys(EX_IOERR_, "standard output");
		die(EX_IOERR_, "standard output: write error");
	}
}

int term_width(void)
{
	struct winsize ws;

	if (!isatty(1) || ioctl(1, TIOCGWINSZ, &ws) < 0 || ws.ws_col == 0)
		return 0;
	return ws.ws_col;
}

void fmt_age(char *buf, size_t size, long long ms)
{
	long long s = ms > 0 ? ms / 1000 : 0;

	if (s < 60)
		snprintf(buf, size, "%llds", s);
	else if (s < 3600)
		snprintf(buf, size, "%lldm%02llds", s / 60, s % 60);
	else if (s < 86400)
		snprintf(buf, size, "%lldh%02lldm", s / 3600, s / 60 % 60);
	else
		snprintf(buf, size, "%lldd%02lldh", s / 86400, s / 3600 % 24);
}

char *fmt_time(long long ms)
{
	return ms ? rfc3339(ms) : strdup("-");
}

/* ---- tables --------------------------------------------------------------- */

/* Characters (not bytes) in the N bytes of UTF-8 text at S. */
static size_t u8_chars(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t c = 0;

	for (size_t i = 0; i < n; i++)
		c += (p[i] & 0xc0) != 0x80;
	return c;
}

/* Characters in the UTF-8 string S, and its length in *LEN. */
static size_t u8_scan(const char *s, size_t *len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t c = 0;

	for (; *p; p++)
		c += (*p & 0xc0) != 0x80;
	*len = (size_t)(p - (const unsigned char *)s);
	return c;
}

void table_cols_init(struct table_cols *c, size_t ncol, unsigned right)
{
	if (ncol > TABLE_MAXCOL)
		die(EX_SOFTWARE_, "a table of %zu columns (at most %d)", ncol, TABLE_MAXCOL);
	memset(c, 0, sizeof *c);
	c->ncol = ncol;
	c->right = right;
}

/* Whether column K's width is used: all but the last, and the last
 * when right-aligned. */
static int col_counts(const struct table_cols *c, size_t k)
{
	return k + 1 < c->ncol || ((c->right >> k) & 1);
}

void table_cols_widen(struct table_cols *c, const char *const *cells, const size_t *lens)
{
	for (size_t k = 0; k < c->ncol && col_counts(c, k); k++) {
		size_t n, w;

		if (!lens)
			w = u8_scan(cells[k], &n);
		else if ((n = lens[k]) > c->w[k])      /* no wider in characters than in bytes */
			w = u8_chars(cells[k], n);
		else
			continue;
		if (w > c->w[k])
			c->w[k] = w;
	}
}

/* N spaces at P; the end of them. */
static char *pad(char *p, size_t n)
{
	static const char sp[] = "                                                                ";

	while (n) {
		size_t k = n < sizeof sp - 1 ? n : sizeof sp - 1;

		memcpy(p, sp, k);
		p += k;
		n -= k;
	}
	return p;
}

int table_cols_line(const struct table_cols *c, const char *const *cells, const size_t *lens,
		    int width, struct sbuf *b)
{
	size_t len[TABLE_MAXCOL], fill[TABLE_MAXCOL], need = 2, n; /* the newline, a NUL */
	char *line, *p;

	/* What each cell takes: its bytes, and the spaces that pad it. */
	for (size_t k = 0; k < c->ncol; k++) {
		size_t w = 0;

		if (!col_counts(c, k))
			len[k] = lens ? lens[k] : strlen(cells[k]);
		else if (lens)
			w = u8_chars(cells[k], len[k] = lens[k]);
		else
			w = u8_scan(cells[k], &len[k]);
		fill[k] = c->w[k] > w ? c->w[k] - w : 0;
		need += 2 + fill[k] + len[k];
	}
	if (b->cap - b->len < need) {
		size_t cap = b->cap ? b->cap : 256;

		while (cap - b->len < need)
			if ((cap *= 2) > SIZE_MAX / 4) {
				errno = ENOMEM;
				return -1;
			}
		if (!(p = realloc(b->s, cap)))
			return -1;
		b->s = p;
		b->cap = cap;
	}
	p = line = b->s + b->len;
	for (size_t k = 0; k < c->ncol; k++) {
		int right = (c->right >> k) & 1;

		if (k) {
			*p++ = ' ';
			*p++ = ' ';
		}
		if (right)
			p = pad(p, fill[k]);
		memcpy(p, cells[k], len[k]);
		p += len[k];
		if (!right && k + 1 < c->ncol)
			p = pad(p, fill[k]);
	}
	n = (size_t)(p - line);
	/* Cut to WIDTH characters (none to cut when the bytes fit). */
	if (width > 0 && n > (size_t)width) {
		size_t chars = 0, i;

		for (i = 0; i < n; i++)
			if (((unsigned char)line[i] & 0xc0) != 0x80 && ++chars > (size_t)width)
				break;
		n = i;
	}
	while (n && line[n - 1] == ' ')
		n--;
	line[n++] = '\n';
	line[n] = '\0';
	b->len += n;
	return 0;
}

void table_init(struct table *t, size_t ncol, unsigned right)
{
	memset(t, 0, sizeof *t);
	table_cols_init(&t->cols, ncol, right);
}

void table_row_own(struct table *t, char **cells)
{
	size_t ncol = t->cols.ncol;

	if (t->nrow == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		char **c;

		if (cap > SIZE_MAX / ncol / sizeof *c || !(c = realloc(t->cell, cap * ncol * sizeof *c)))
			die(EX_OSERR_, "%s", strerror(ENOMEM));
		t->cell = c;
		t->cap = cap;
	}
	memcpy(t->cell + t->nrow * ncol, cells, ncol * sizeof *cells);
	table_cols_widen(&t->cols, (const char *const *)cells, NULL);
	t->nrow++;
}

void table_row(struct table *t, const char *const *cells)
{
	char *v[TABLE_MAXCOL];

	for (size_t i = 0; i < t->cols.ncol; i++)
		if (!(v[i] = strdup(cells[i] ? cells[i] : "")))
			die(EX_OSERR_, "%s", strerror(ENOMEM));
	table_row_own(t, v);
}

void table_print(const struct table *t, FILE *fp, int width)
{
	struct sbuf line = { 0 };

	for (size_t r = 0; r < t->nrow; r++) {
		line.len = 0;
		if (table_cols_line(&t->cols, (const char *const *)t->cell + r * t->cols.ncol, NULL, width,
				    &line) < 0)
			die(EX_OSERR_, "%s", strerror(ENOMEM));
		fwrite(line.s, 1, line.len, fp);
	}
	sbuf_free(&line);
}

void table_row_ref(struct table *t, const char *const *cells)
{
	t->borrowed = 1;
	table_row_own(t, (char **)cells);
}

void table_free(struct table *t)
{
	for (size_t i = 0; !t->borrowed && i < t->nrow * t->cols.ncol; i++)
		free(t->cell[i]);
	free(t->cell);
	memset(t, 0, sizeof *t);
}

/* First line of TEXT (malloc'd, control characters shown as '?'). */
static char *first_line(const char *text)
{
	size_t n = strcspn(text, "\n");
	char *s, *p;

	while (n && (text[n - 1] == '\r' || text[n - 1] == ' '))
		n--;
	if (!(s = strndup(text, n)) || !(p = printable(s)))
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	free(s);
	return p;
}

void ask_worker(const struct config *c, const struct job *j, const char *op)
{
	const struct attempt *a = job_last_attempt(j);
	const char *args[] = { op, a ? a->id : NULL, NULL };
	const struct node_conf *nc;
	struct node_reply r;
	char *why;

	if (!a || !a->id)
		return;
	if (!a->node || !(nc = config_node(c, a->node)))
		die(EX_UNAVAILABLE_, "job %lld runs on node '%s', which is not in %s; "
		    "the %s request waits for the daemon", j->id, a->node ? a->node : "?",
		    c->path ? c->path : "the default config", op);
	if (node_run(c, nc, args, NULL, 0, NODE_CALL_MS, &r) < 0)
		die_sys(EX_UNAVAILABLE_, "%s: cannot run cardbaton-worker; "
			"the %s request waits for the daemon", nc->name, op);
	/* 66: the node never heard of the attempt (a launch that had not
	 * reached it): nothing runs there, the daemon does the rest. */
	if (r.status == 0 || r.status == EX_NOINPUT_) {
		node_reply_free(&r);
		return;
	}
	why = *r.err ? first_line(r.err) : r.status >= 0 ?
		must_asprintf("cardbaton-worker %s exited %d", op, r.status) :
		must_asprintf("cardbaton-worker %s failed", op);
	die(EX_UNAVAILABLE_, "%s: %s; the %s request waits for the daemon", nc->name, why, op);
}

void tool_find_job(struct config *c, struct spool *sp, long long id, struct job *j)
{
	struct cb_err err = { 0 };
	enum spool_dir d;
	char *name;
	int r;

	tool_config(c);
	if (!tool_spool(c, sp, 0))
		die(EX_NOINPUT_, "no such job %lld", id);
	if ((r = spool_find(sp, id, j, &d, &name, &err)) < 0)
		die_err(&err);
	if (r == 0)
		die(EX_NOINPUT_, "no such job %lld", id);
	free(name);
}

/* ---- who may do what (a lab's spool, SPEC §12) ----------------------------- */

int tool_admin(const struct config *c, const struct spool *sp)
{
	return !c->lab || lab_is_admin(c->lab, getuid(), sp->uid);
}

void tool_may_act(const struct config *c, const struct spool *sp, const struct job *j,
		  const char *op)
{
	if (!c->lab || tool_admin(c, sp) || (j->owner && (uid_t)j->owner_uid == getuid()))
		return;
	if (!j->owner)
		die(EX_NOPERM_, "job %lld has no owner: only an admin may %s it", j->id, op);
	die(EX_NOPERM_, "job %lld is %s's: only %s or an admin may %s it", j->id, j->owner,
	    j->owner, op);
}

int tool_drain(int argc, char **argv, const char *usage, int on)
{
	static const struct option longopts[] = {
		COMMON_LONGOPTS,
		{ "checkpoint", no_argument, NULL, OPT_TOOL_FIRST },
		{ NULL, 0, NULL, 0 },
	};
	struct cb_err err = { 0 };
	struct config c;
	struct spool sp;
	int ch, ck = 0;
	char *p;

	prog_init(argc, argv);
	while ((ch = tool_getopt(argc, argv, "", longopts, 0, usage)) != -1) {
		if (ch != OPT_TOOL_FIRST || !on)
			usage_error(usage, "unknown option");
		ck = 1;
	}
	if (argc - optind != 1)
		usage_error(usage, argc - optind ? "more than one NODE" : "no NODE given");
	tool_config(&c);
	if (!config_node(&c, argv[optind])) {
		if (!(p = printable(argv[optind])))
			die(EX_OSERR_, "%s", strerror(ENOMEM));
		die(EX_NOINPUT_, "unknown node '%s' (not in %s)", p, c.path ? c.path : "the default config");
	}
	tool_spool(&c, &sp, 1);
	/* A lab's drain/ is the daemon's: an admin's request goes to ctl/. */
	if (c.lab && !tool_admin(&c, &sp))
		die(EX_NOPERM_, "only an admin may %s node %s", on ? "drain" : "undrain",
		    config_node(&c, argv[optind])->name);
	if (c.lab ? spool_ctl_drain(&sp, config_node(&c, argv[optind])->name, on, ck, &err) < 0 :
	    spool_drain_set(&sp, config_node(&c, argv[optind])->name, on, ck, &err) < 0)
		die_err(&err);
	spool_close(&sp);
	config_free(&c);
	return 0;
}

int tool_queued_op(int argc, char **argv, const char *usage, enum ctl_op op)
{
	static const struct option longopts[] = {
		COMMON_LONGOPTS,
		{ NULL, 0, NULL, 0 },
	};
	struct cb_err err = { 0 };
	struct config c;
	struct spool sp;
	long long *ids;
	int n;

	prog_init(argc, argv);
	while (tool_getopt(argc, argv, "", longopts, 0, usage) != -1)
		usage_error(usage, "unknown option");
	if ((n = argc - optind) < 1)
		usage_error(usage, "no JOB_ID given");
	if (!(ids = calloc((size_t)n, sizeof *ids)))
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	for (int i = 0; i < n; i++)
		ids[i] = arg_jobid(argv[optind + i]);
	/* All of them checked before any is asked for. */
	for (int i = 0; i < n; i++) {
		struct job j;

		tool_find_job(&c, &sp, ids[i], &j);
		tool_may_act(&c, &sp, &j, ctl_op_name[op]);
		if (job_view_state(&j) != JS_QUEUED)
			die(EX_REFUSED, "job %lld is %s, not queued", ids[i], job_state_name(j.state));
		job_free(&j);
		spool_close(&sp);
		config_free(&c);
	}
	tool_config(&c);
	tool_spool(&c, &sp, 1);
	for (int i = 0; i < n; i++)
		if (spool_ctl(&sp, ids[i], op, CTL_NO_ARG, &err) < 0)
			die_err(&err);
	free(ids);
	spool_close(&sp);
	config_free(&c);
	return 0;
}

long long tool_one_job(int argc, char **argv, const char *usage)
{
	static const struct option longopts[] = {
		COMMON_LONGOPTS,
		{ NULL, 0, NULL, 0 },
	};

	while (tool_getopt(argc, argv, "", longopts, 0, usage) != -1)
		usage_error(usage, "unknown option");
	if (argc - optind != 1)
		usage_error(usage, argc == optind ? "no JOB_ID given" : "more than one JOB_ID");
	return arg_jobid(argv[optind]);
}
