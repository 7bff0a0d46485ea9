/*
 * cardbaton-top - a live full-screen view of the queue and of every
 * node's cards.
 *
 * Design: top is a reader of the spool, like status, and asks no node
 * anything: the jobs come from status_read (statusread.c, the rules
 * status reads by), the cards from the daemon's snapshot of each node
 * in SPOOL/nodes/ (spool_node_list, nodestat.h).  inotify on the
 * directories a job moves through, nodes/, drain/ and the spool itself
 * (for queued.idx) is a doorbell: any event marks the view stale, and
 * the spool is read again at most every REREAD_MS, so that a burst of
 * renames costs one reading.  Between readings the frame is drawn
 * again each second for the clocks (ELAPSED, AGE), from what was read.
 *
 * The frame is a pure function (compose: what was read, the clock, the
 * terminal's size in; the text out), written whole with one write: the
 * alternate screen, the cursor hidden, every line cut to the width
 * (never wrapped) and the panels shortened to fit the height.  Every
 * string from a job or a node goes through printable()/command_display
 * (view.h), and the frame writer turns any control byte that is left
 * into '?' as well, so that nothing a user wrote reaches the terminal
 * raw.
 *
 * One poll() waits on the keys (stdin), the inotify fd and a signalfd
 * (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH, SIGTSTP, SIGCONT).  The
 * terminal is restored on every way out: 'q', end of input, a signal
 * (restored, then the signal is raised again with its default action,
 * so the shell sees what ended it), an error (atexit), and a stop
 * (^Z: restored, stopped, set up again when continued).  On anything
 * but a terminal (or with --once) one frame is printed, without
 * escapes, and top exits.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static const char usage[] = "cardbaton-top [--config PATH] [--once]";

enum { OPT_ONCE = OPT_TOOL_FIRST };

static const struct option longopts[] = {
	COMMON_LONGOPTS,
	{ "once", no_argument, NULL, OPT_ONCE },
	{ NULL, 0, NULL, 0 },
};

#define REREAD_MS 100           /* the spool read again at most this often */
#define BAR_CELLS 10

/* ---- what was read ---------------------------------------------------- */

/* A job as the view shows it. */
struct jrow {
	struct status_key key;
	long long id, prio, since;
	enum job_state state;
	int staged;             /* its attempt waits on its node (the baton) */
	const char *node, *gpus, *name, *cmd, *json;    /* the view's (printable) */
	char *own[4];           /* node, gpus, name, cmd when copied */
	char *json_own;         /* the --json element when it is ours (cJSON_free) */
	long long limit_s;      /* running/pausing: timeout_seconds, 0 none, -1 unknown */
};

/* A configured node and what the daemon last saw of it. */
struct nrow {
	const char *name;       /* the config's */
	const struct node_status *ns;   /* NULL: no nodes/ file */
	int drained;
};

struct top_state {
	long long now;          /* epoch ms */
	long long stale_ms;     /* cards read longer ago than this are stale (cards_stale_ms) */
	const char *spool;
	int have_spool;
	struct jrow *rows;      /* sorted by status_key_cmp */
	size_t nrows, caprows;
	size_t foreign;         /* submissions in new/ without an ID */
	size_t nwarn;           /* records that could not be read */
	char *warn;             /* the last one's line (printable) */
	struct nrow *nodes;
	size_t nnodes;
	/* The reading the rows point into. */
	struct status_read rd;
	struct node_status *ns;
	size_t nns;
};

static _Noreturn void oom(void);

static void *xrealloc(void *p, size_t n)
{
	if (!(p = realloc(p, n)))
		oom();
	return p;
}

static char *xstrdup(const char *s)
{
	char *p = strdup(s);

	if (!p)
		oom();
	return p;
}

static void state_free(struct top_state *st)
{
	for (size_t i = 0; i < st->nrows; i++) {
		for (int k = 0; k < 4; k++)
			free(st->rows[i].own[k]);
		cJSON_free(st->rows[i].json_own);
	}
	free(st->rows);
	st->rows = NULL;
	st->nrows = st->caprows = 0;
	free(st->warn);
	st->warn = NULL;
	st->nwarn = 0;
	free(st->nodes);
	st->nodes = NULL;
	st->nnodes = 0;
	status_read_free(&st->rd);
	memset(&st->rd, 0, sizeof st->rd);
	node_status_free(st->ns, st->nns);
	st->ns = NULL;
	st->nns = 0;
}

/* status_read's callbacks. */
static void read_job(void *arg, struct status_view *v, int stable)
{
	struct top_state *st = arg;
	struct jrow *r;

	if (st->nrows == st->caprows)
		st->rows = xrealloc(st->rows,
				    (st->caprows = st->caprows ? st->caprows * 2 : 64) * sizeof *r);
	r = &st->rows[st->nrows++];
	memset(r, 0, sizeof *r);
	status_key_of(v, &r->key);
	r->id = v->id;
	r->prio = v->priority;
	r->since = v->since;
	r->state = v->state;
	r->staged = v->staged;
	r->limit_s = -1;
	if (stable) {
		r->node = v->node;
		r->gpus = v->gpus;
		r->name = v->name;
		r->cmd = v->command;
		r->json = v->json;
	} else {
		r->node = r->own[0] = xstrdup(v->node);
		r->gpus = r->own[1] = xstrdup(v->gpus);
		r->name = r->own[2] = xstrdup(v->name);
		r->cmd = r->own[3] = xstrdup(v->command);
		r->json = r->json_own = v->own[4];      /* the row's now */
		v->own[4] = NULL;
	}
}

static void read_warn(void *arg, const struct cb_err *e)
{
	struct top_state *st = arg;

	st->nwarn++;
	free(st->warn);
	if (!(st->warn = printable(e->msg ? e->msg : strerror(ENOMEM))))
		oom();
}

static int row_cmp(const void *a, const void *b)
{
	return status_key_cmp(&((const struct jrow *)a)->key, &((const struct jrow *)b)->key);
}

/* Read the spool into ST (what it held before is freed).  0, or -1
 * with ERR. */
/*
 * How old a node's cards may be before the view calls them stale: the
 * daemon reads them at least every gpu_refresh_seconds (the default
 * when that is 0: it then reads them only while jobs wait), and a query
 * may take its deadline (NODE_QUERY_MS) to answer.  Older, the daemon is
 * not refreshing them (stopped, or the node does not answer).
 */
static long long cards_stale_ms(const struct config *c)
{
	long long every = c->gpu_refresh_seconds ? c->gpu_refresh_seconds : DEFAULT_GPU_REFRESH;

	return every * 1000 + NODE_QUERY_MS;
}

static int state_read(struct top_state *st, struct spool *sp, const struct config *c,
		      struct cb_err *err)
{
	state_free(st);
	st->now = now_ms();
	st->stale_ms = cards_stale_ms(c);
	st->spool = c->spool;
	st->foreign = 0;
	st->nodes = xrealloc(NULL, (c->nnodes + 1) * sizeof *st->nodes);
	st->nnodes = c->nnodes;
	for (size_t i = 0; i < c->nnodes; i++)
		st->nodes[i] = (struct nrow){ .name = c->nodes[i].name };
	if (!st->have_spool)
		return 0;
	st->rd.with_json = 1;
	st->rd.job = read_job;
	st->rd.warn = read_warn;
	st->rd.arg = st;
	if (status_read(sp, &st->rd, err) < 0)
		return -1;
	st->foreign = st->rd.foreign;
	if (st->nrows > 1)
		qsort(st->rows, st->nrows, sizeof *st->rows, row_cmp);
	/* The time limit is in the definition, which the view leaves out:
	 * the records of the running jobs (as many as there are cards). */
	for (size_t i = 0; i < st->nrows; i++) {
		struct jrow *r = &st->rows[i];
		struct cb_err e = { 0 };
		enum spool_dir d;
		char *name = NULL;
		struct job j;

		if (r->state != JS_RUNNING && r->state != JS_PAUSING)
			continue;
		if (spool_find(sp, r->id, &j, &d, &name, &e) == 1) {
			r->limit_s = j.def.timeout_seconds;
			job_free(&j);
			free(name);
		}
		cb_err_free(&e);
	}
	if (spool_node_list(sp, &st->ns, &st->nns) < 0) {
		st->ns = NULL;
		st->nns = 0;
	}
	for (size_t i = 0; i < st->nnodes; i++) {
		struct nrow *n = &st->nodes[i];
		struct cb_err e = { 0 };
		int ck;

		for (size_t k = 0; k < st->nns; k++)
			if (!strcmp(st->ns[k].name, n->name))
				n->ns = &st->ns[k];
		n->drained = n->ns ? n->ns->drained : spool_drain_get(sp, n->name, &ck, &e) == 1;
		cb_err_free(&e);
	}
	return 0;
}

/* ---- the frame (pure) ------------------------------------------------- */

struct frame {
	struct sbuf b;
	int width;              /* columns each line is cut to */
	int height;             /* lines at most; 0: no limit */
	int nlines;
	int colour, tty;        /* SGR colours; a terminal's line ends (EL, CR LF) */
};

#define SGR_RESET "\033[0m"
#define SGR_TITLE "\033[7m"
#define SGR_HEAD "\033[1m"
#define SGR_COLS "\033[4m"
#define SGR_RED "\033[31m"
#define SGR_GREEN "\033[32m"
#define SGR_YELLOW "\033[33m"
#define SGR_CYAN "\033[36m"

static void fadd(struct frame *f, const char *s, size_t n)
{
	if (sbuf_add(&f->b, s, n) < 0)
		oom();
}

/* The length of the control character at P (C0, DEL, a UTF-8 C1), or 0. */
static size_t ctl_len(const unsigned char *p)
{
	if (*p < 0x20 || *p == 0x7f)
		return 1;
	if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
		return 2;
	return 0;
}

/* One line: TEXT in colour SGR (NULL: none), cut to the width; a
 * control character that reached here is shown as '?'.  Nothing past
 * the height. */
static void fline(struct frame *f, const char *sgr, const char *text)
{
	const unsigned char *p = (const unsigned char *)text;
	int chars = 0;

	if (f->height && f->nlines >= f->height)
		return;
	if (f->nlines)
		fadd(f, f->tty ? "\r\n" : "\n", f->tty ? 2 : 1);
	f->nlines++;
	if (f->colour && sgr)
		fadd(f, sgr, strlen(sgr));
	while (*p) {
		size_t n = ctl_len(p), k;

		if ((*p & 0xc0) != 0x80 && ++chars > f->width) {
			chars--;
			break;
		}
		if (n) {
			fadd(f, "?", 1);
			p += n;
			continue;
		}
		for (k = 1; p[k] && (p[k] & 0xc0) == 0x80; k++)
			;
		fadd(f, (const char *)p, k);
		p += k;
	}
	if (f->colour && sgr)
		fadd(f, SGR_RESET, strlen(SGR_RESET));
	/* Erase the rest of the old line; not after a full line, where the
	 * cursor sits on the last column and the erase would take it. */
	if (f->tty && chars < f->width)
		fadd(f, "\033[K", 3);
}

/* A section's lines before they are cut to what fits. */
struct lines {
	char **s;
	const char **sgr;
	size_t n, cap;
	size_t items;           /* jobs or nodes it shows */
};

static void lines_add(struct lines *l, const char *sgr, char *s)
{
	if (!s)
		oom();
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 16;
		l->s = xrealloc(l->s, l->cap * sizeof *l->s);
		l->sgr = xrealloc(l->sgr, l->cap * sizeof *l->sgr);
	}
	l->s[l->n] = s;
	l->sgr[l->n++] = sgr;
}

static void lines_free(struct lines *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->s[i]);
	free(l->s);
	free(l->sgr);
	memset(l, 0, sizeof *l);
}

/* The lines T prints at WIDTH, each indented by two spaces, into L. */
static void lines_table(struct lines *l, const struct table *t, int width, const char *head_sgr)
{
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	const char *p, *end;
	int first = 1;

	if (!mem)
		oom();
	table_print(t, mem, width > 2 ? width - 2 : 1);
	if (fclose(mem) != 0)
		oom();
	for (p = text, end = text + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

		lines_add(l, first ? head_sgr : NULL, xasprintf("  %.*s", (int)n, p));
		first = 0;
		p += n + 1;
	}
	free(text);
}

static char *age_text(long long ms)
{
	char buf[32];

	fmt_age(buf, sizeof buf, ms);
	return xstrdup(buf);
}

/* The reason in a job's --json element, printable (malloc'd); "-". */
static char *reason_of(const struct jrow *r)
{
	cJSON *o = r->json ? cJSON_Parse(r->json) : NULL, *x = cJSON_GetObjectItem(o, "reason");
	char *s = printable(cJSON_IsString(x) ? x->valuestring : "-");

	cJSON_Delete(o);
	if (!s)
		oom();
	return s;
}

static int is_running(const struct jrow *r)
{
	return r->state == JS_RUNNING || r->state == JS_PAUSING;
}

/* Running and pausing jobs; at most MAX rows (0: all). */
static void sec_running(struct lines *l, const struct top_state *st, size_t max, int width)
{
	static const char *const head[] = {
		"ID", "STATE", "NODE", "GPUS", "ELAPSED", "LIMIT", "NAME", "COMMAND",
	};
	struct table t;
	size_t n = 0;

	for (size_t i = 0; i < st->nrows; i++)
		l->items += is_running(&st->rows[i]);
	lines_add(l, SGR_HEAD, xasprintf("RUNNING  %zu job%s", l->items, l->items == 1 ? "" : "s"));
	if (!l->items)
		return;
	table_init(&t, 8, 1u << 0);
	table_row(&t, head);
	for (size_t i = 0; i < st->nrows && (!max || n < max); i++) {
		const struct jrow *r = &st->rows[i];
		char id[24], lim[32], *el;

		if (!is_running(r))
			continue;
		snprintf(id, sizeof id, "%lld", r->id);
		if (r->limit_s > 0)
			fmt_age(lim, sizeof lim, r->limit_s * 1000);
		else
			snprintf(lim, sizeof lim, "-");
		el = r->since ? age_text(st->now - r->since) : xstrdup("-");
		table_row(&t, (const char *const[]){ id, r->staged ? "staged" : job_state_name(r->state),
						     r->node, r->gpus,
						     el, lim, r->name, r->cmd });
		free(el);
		n++;
	}
	lines_table(l, &t, width, SGR_COLS);
	table_free(&t);
}

/* The queue in dispatch order with each job's reason; at most MAX
 * rows (0: all). */
static void sec_queued(struct lines *l, const struct top_state *st, size_t max, int width)
{
	static const char *const head[] = {
		"ID", "PRIO", "GPUS", "NODE", "AGE", "NAME", "REASON",
	};
	struct table t;
	size_t n = 0;

	for (size_t i = 0; i < st->nrows; i++)
		l->items += st->rows[i].state == JS_QUEUED;
	lines_add(l, SGR_HEAD,
		  st->foreign ? xasprintf("QUEUED  %zu job%s (and %zu submission%s without an ID yet)",
					  l->items, l->items == 1 ? "" : "s", st->foreign,
					  st->foreign == 1 ? "" : "s")
			      : xasprintf("QUEUED  %zu job%s", l->items, l->items == 1 ? "" : "s"));
	if (!l->items)
		return;
	table_init(&t, 7, 1u << 0 | 1u << 1);
	table_row(&t, head);
	for (size_t i = 0; i < st->nrows && (!max || n < max); i++) {
		const struct jrow *r = &st->rows[i];
		char id[24], prio[24], *age, *why;

		if (r->state != JS_QUEUED)
			continue;
		snprintf(id, sizeof id, "%lld", r->id);
		snprintf(prio, sizeof prio, "%lld", r->prio);
		age = r->since ? age_text(st->now - r->since) : xstrdup("-");
		why = reason_of(r);
		table_row(&t, (const char *const[]){ id, prio, r->gpus, r->node, age, r->name, why });
		free(age);
		free(why);
		n++;
	}
	lines_table(l, &t, width, SGR_COLS);
	table_free(&t);
}

/* "[####......]" for V of TOTAL (any use at all shows one '#'), or
 * "[??????????]" when not reported. */
static void bar(char *out, long long v, long long total)
{
	long long k;

	out[0] = '[';
	if (v < 0 || total <= 0) {
		memset(out + 1, '?', BAR_CELLS);
	} else {
		if (v > total)
			v = total;
		k = (v * BAR_CELLS + total - 1) / total;
		memset(out + 1, '#', (size_t)k);
		memset(out + 1 + k, '.', (size_t)(BAR_CELLS - k));
	}
	out[BAR_CELLS + 1] = ']';
	out[BAR_CELLS + 2] = '\0';
}

/* Who holds card G: "job 7", "jobs 7,8" (shared), "attempt X" (not
 * one of this spool's jobs), "idle" or "busy". */
static char *holder_text(const struct node_card *g)
{
	struct sbuf b = { 0 };
	int r;

	if (g->nshares) {
		r = sbuf_addf(&b, "job%s ", g->nshares > 1 ? "s" : "");
		for (size_t s = 0; r == 0 && s < g->nshares; s++)
			r = sbuf_addf(&b, "%s%lld", s ? "," : "", g->shares[s]);
	} else if (g->job > 0) {
		r = sbuf_addf(&b, "job %lld", g->job);
	} else if (g->lease) {
		char *p = printable(g->lease);

		r = p ? sbuf_addf(&b, "attempt %s", p) : -1;
		free(p);
	} else {
		r = sbuf_addf(&b, "%s", g->idle ? "idle" : "busy");
	}
	if (r < 0)
		oom();
	return b.s;
}

/* The wall clock time MS as "14:02:11" (local time), with the date
 * first when it is not NOW's day (malloc'd). */
static char *clock_text(long long ms, long long now)
{
	time_t t = (time_t)(ms / 1000), n = (time_t)(now / 1000);
	struct tm tm, tn;
	char buf[64];
	int today;

	if (!localtime_r(&t, &tm) || !localtime_r(&n, &tn)) {
		char *rfc = fmt_time(ms);       /* beyond what struct tm holds */

		if (!rfc)
			oom();
		return rfc;
	}
	today = tm.tm_year == tn.tm_year && tm.tm_yday == tn.tm_yday;
	if (!strftime(buf, sizeof buf, today ? "%H:%M:%S" : "%Y-%m-%d %H:%M:%S", &tm))
		return xstrdup("?");
	return xstrdup(buf);
}

static char *num_text(long long v)
{
	return v < 0 ? xstrdup("?") : xasprintf("%lld", v);
}

/* Every configured node: reachable or not, drained, and its cards. */
static void sec_nodes(struct lines *l, const struct top_state *st, int width)
{
	static const char *const head[] = {
		"GPU", "HOLDER", "MEMORY", "UTIL", "PROCS", "NAME",
	};

	l->items = st->nnodes;
	lines_add(l, SGR_HEAD, xasprintf("NODES  %zu", st->nnodes));
	for (size_t i = 0; i < st->nnodes; i++) {
		const struct nrow *n = &st->nodes[i];
		const struct node_status *ns = n->ns;
		char *name = printable(n->name), *what, *age;
		const char *sgr;
		struct table t;

		if (!name)
			oom();
		if (!ns) {
			what = xstrdup("no word from the daemon yet");
			sgr = NULL;
		} else if (!ns->reachable) {
			const char *why = ns->error ? ns->error : "no reason recorded";
			size_t nl = strlen(n->name);
			char *e;

			/* Without the "NODE: " the link puts in front. */
			if (!strncmp(why, n->name, nl) && !strncmp(why + nl, ": ", 2))
				why += nl + 2;
			e = printable(why);

			if (!e)
				oom();
			if (ns->since) {
				age = age_text(st->now - ns->since);
				what = xasprintf("unreachable for %s: %s", age, e);
				free(age);
			} else {
				what = xasprintf("unreachable: %s", e);
			}
			free(e);
			sgr = SGR_RED;
		} else if (ns->cards_at) {
			/* The cards' figures are the daemon's last reading: when
			 * that was, and whether it is older than it should be. */
			int stale = st->now - ns->cards_at > st->stale_ms;
			char *at = clock_text(ns->cards_at, st->now);

			age = age_text(st->now - ns->cards_at);
			what = xasprintf("up, %zu card%s as of %s (%s ago%s)", ns->ncards,
					 ns->ncards == 1 ? "" : "s", at, age, stale ? ", stale" : "");
			free(at);
			free(age);
			sgr = stale ? SGR_YELLOW : NULL;
		} else {
			what = xstrdup("up, its cards not read yet");
			sgr = NULL;
		}
		if (!what)
			oom();
		if (n->drained)
			sgr = sgr ? sgr : SGR_YELLOW;
		lines_add(l, sgr, xasprintf("%s  %s%s", name, n->drained ? "DRAINED, " : "", what));
		free(name);
		free(what);
		if (!ns || !ns->ncards)
			continue;
		table_init(&t, 6, 1u << 0 | 1u << 4);
		table_row(&t, head);
		for (size_t k = 0; k < ns->ncards; k++) {
			const struct node_card *g = &ns->cards[k];
			char idx[16], mbar[BAR_CELLS + 3], ubar[BAR_CELLS + 3];
			char *gname = printable(g->name ? g->name : "?"), *used = num_text(g->mem_used),
			     *total = num_text(g->mem_total), *mem, *util, *procs = num_text(g->procs),
			     *who = holder_text(g);

			if (!gname || !used || !total || !procs)
				oom();
			snprintf(idx, sizeof idx, "%d", g->index);
			bar(mbar, g->mem_used, g->mem_total);
			bar(ubar, g->util, 100);
			mem = xasprintf("%s %s/%s MiB", mbar, used, total);
			util = g->util < 0 ? xasprintf("%s    ?", ubar) : xasprintf("%s %4lld%%", ubar, g->util);
			if (!mem || !util)
				oom();
			table_row(&t, (const char *const[]){ idx, who, mem, util, procs, gname });
			free(gname);
			free(used);
			free(total);
			free(mem);
			free(util);
			free(procs);
			free(who);
		}
		lines_table(l, &t, width, SGR_COLS);
		table_free(&t);
	}
}

/* Emit L's first A lines (all when A is SIZE_MAX); a section cut short
 * ends with a line counting what it leaves out. */
static void emit(struct frame *f, const struct lines *l, size_t a)
{
	if (a >= l->n) {
		for (size_t i = 0; i < l->n; i++)
			fline(f, l->sgr[i], l->s[i]);
		return;
	}
	for (size_t i = 0; i + 1 < a; i++)
		fline(f, l->sgr[i], l->s[i]);
	if (a) {
		char *more = xasprintf("  ... %zu more line%s", l->n - (a - 1),
				       l->n - (a - 1) == 1 ? "" : "s");

		if (!more)
			oom();
		fline(f, NULL, more);
		free(more);
	}
}

/*
 * The frame of ST at WIDTH x HEIGHT (HEIGHT 0: every line) as text
 * (malloc'd): a title line, then the running jobs, the queue and the
 * nodes.  When they do not all fit, each section gets an equal share of
 * the lines and what one does not need goes to the others.  COLOUR:
 * SGR colours; TTY: a terminal's line ends (erase to the end of line,
 * CR LF, no line end after the last), else LF after every line.
 */
static char *compose(const struct top_state *st, int width, int height, int colour, int tty,
		     int interactive)
{
	struct frame f = { .width = width > 0 ? width : 80, .height = height, .colour = colour,
			   .tty = tty };
	struct lines sec[3] = { { 0 } };
	size_t want[3], got[3] = { 0 }, budget;
	size_t cap = height > 0 ? (size_t)height : 0;
	char clock[16] = "", *title, *warn = NULL;
	time_t secs = (time_t)(st->now / 1000);
	struct tm tm;
	size_t nrun = 0, nq = 0, npausing = 0, npaused = 0;

	if (localtime_r(&secs, &tm))
		strftime(clock, sizeof clock, "%H:%M:%S", &tm);
	for (size_t i = 0; i < st->nrows; i++) {
		nrun += st->rows[i].state == JS_RUNNING;
		npausing += st->rows[i].state == JS_PAUSING;
		npaused += st->rows[i].state == JS_PAUSED;
		nq += st->rows[i].state == JS_QUEUED;
	}
	{
		char *sp = printable(st->spool);

		if (!sp)
			oom();
		title = xasprintf("cardbaton top  %s  queued %zu  running %zu  pausing %zu  "
				  "paused %zu%s  %s", clock, nq, nrun, npausing, npaused,
				  interactive ? "  (q: quit)" : "", sp);
		free(sp);
	}
	if (!title)
		oom();
	fline(&f, SGR_TITLE, title);
	free(title);
	if (!st->have_spool) {
		char *sp = printable(st->spool), *s;

		if (!sp || !(s = xasprintf("no spool at %s yet", sp)))
			oom();
		fline(&f, NULL, s);
		free(s);
		free(sp);
	}
	if (st->nwarn && (warn = xasprintf("%zu record%s not read: %s", st->nwarn,
					   st->nwarn == 1 ? "" : "s", st->warn ? st->warn : "?"))) {
		fline(&f, SGR_RED, warn);
		free(warn);
	}
	sec_running(&sec[0], st, cap, f.width);
	sec_queued(&sec[1], st, cap, f.width);
	sec_nodes(&sec[2], st, f.width);
	for (int i = 0; i < 3; i++)
		want[i] = sec[i].n;
	if (!height) {
		for (int i = 0; i < 3; i++)
			emit(&f, &sec[i], SIZE_MAX);
	} else {
		budget = f.height > f.nlines ? (size_t)(f.height - f.nlines) : 0;
		/* Water-filling: a line at a time to each section that wants more. */
		for (int more = 1; budget && more;) {
			more = 0;
			for (int i = 0; i < 3 && budget; i++)
				if (got[i] < want[i]) {
					got[i]++;
					budget--;
					more = 1;
				}
		}
		for (int i = 0; i < 3; i++)
			emit(&f, &sec[i], got[i]);
	}
	for (int i = 0; i < 3; i++)
		lines_free(&sec[i]);
	if (!tty)
		fadd(&f, "\n", 1);
	return f.b.s;
}

/* ---- the terminal ------------------------------------------------------ */

static struct termios saved_tio;
static int tio_saved, screen_on;

/* Leave the full screen: colours off, the cursor shown, the main
 * screen back, the terminal's modes as they were.  Safe to call twice,
 * and from atexit. */
static void term_leave(void)
{
	static const char seq[] = "\033[0m\033[?25h\033[?1049l";

	if (screen_on) {
		screen_on = 0;
		if (write_full(STDOUT_FILENO, seq, sizeof seq - 1) < 0) {
			/* the terminal is gone: nothing to restore */
		}
	}
	if (tio_saved) {
		tio_saved = 0;
		while (tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_tio) < 0 && errno == EINTR)
			;
	}
}

static _Noreturn void oom(void)
{
	term_leave();
	die(EX_OSERR_, "%s", strerror(ENOMEM));
}

/* Keys one at a time, not echoed (signals from ^C, ^Z kept); the
 * alternate screen, cursor hidden. */
static void term_enter(int keys)
{
	static const char seq[] = "\033[?1049h\033[?25l\033[H\033[2J";
	struct termios t;

	if (keys) {
		if (tcgetattr(STDIN_FILENO, &saved_tio) < 0)
			die_sys(EX_OSERR_, "tcgetattr");
		t = saved_tio;
		t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		t.c_cc[VMIN] = 1;
		t.c_cc[VTIME] = 0;
		tio_saved = 1;
		if (tcsetattr(STDIN_FILENO, TCSANOW, &t) < 0) {
			term_leave();
			die_sys(EX_OSERR_, "tcsetattr");
		}
	}
	screen_on = 1;
	if (write_full(STDOUT_FILENO, seq, sizeof seq - 1) < 0) {
		term_leave();
		die_sys(EX_IOERR_, "stdout");
	}
}

static void term_size(int *w, int *h)
{
	struct winsize ws;

	*w = 80;
	*h = 24;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
		*w = ws.ws_col;
		*h = ws.ws_row;
	}
}

/* ---- watching the spool ---------------------------------------------- */

static const char *const watched[] = {
	"new", "incoming", "queued", "running", "paused", "done", "nodes", "drain", "",
};
#define NWATCHED (sizeof watched / sizeof watched[0])
static int wds[NWATCHED] = { -1, -1, -1, -1, -1, -1, -1, -1, -1 };

/* Watch what is not watched yet (drain/ appears with the first drain;
 * a directory may be made again).  A directory that is not there is
 * left for the next reading. */
static void watch_add(int ino, const char *spool)
{
	for (size_t i = 0; i < NWATCHED; i++) {
		char *path;

		if (wds[i] >= 0)
			continue;
		if (!(path = *watched[i] ? xasprintf("%s/%s", spool, watched[i]) : xstrdup(spool)))
			oom();
		wds[i] = inotify_add_watch(ino, path, IN_CREATE | IN_DELETE | IN_MOVED_FROM |
					   IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF |
					   IN_ONLYDIR | IN_DONT_FOLLOW);
		if (wds[i] < 0 && errno != ENOENT && errno != ENOTDIR) {
			term_leave();
			die_sys(EX_OSERR_, "inotify on %s", path);
		}
		free(path);
	}
}

/* Read every event queued: 1 when one concerns the view.  In the spool
 * itself only queued.idx and drain/ do (seq and the rest do not). */
static int watch_read(int ino)
{
	char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
	int changed = 0;
	ssize_t len;

	for (;;) {
		if ((len = read(ino, buf, sizeof buf)) < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return changed;
			term_leave();
			die_sys(EX_OSERR_, "inotify");
		}
		for (char *p = buf; p < buf + len;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			size_t i;

			p += sizeof *ev + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				changed = 1;
				continue;
			}
			for (i = 0; i < NWATCHED && wds[i] != ev->wd; i++)
				;
			if (i == NWATCHED)
				continue;
			if (ev->mask & IN_IGNORED)
				wds[i] = -1;
			if (*watched[i] || (ev->len && (!strcmp(ev->name, "queued.idx") ||
							!strcmp(ev->name, "drain"))))
				changed = 1;
		}
	}
}

/* ---- main --------------------------------------------------------------- */

static struct config cfg;
static struct spool sp;
static struct top_state st;

static void read_or_die(void)
{
	struct cb_err err = { 0 };

	if (!st.have_spool)
		st.have_spool = tool_spool(&cfg, &sp, 0);
	if (state_read(&st, &sp, &cfg, &err) < 0) {
		term_leave();
		die_err(&err);
	}
}

static void cleanup(void)
{
	state_free(&st);
	if (st.have_spool)
		spool_close(&sp);
	config_free(&cfg);
}

/* Colour only on a terminal, and never when NO_COLOR is set and not
 * empty (https://no-color.org). */
static int use_colour(void)
{
	const char *nc = getenv("NO_COLOR");

	return isatty(STDOUT_FILENO) && !(nc && *nc);
}

/* One frame on stdout: not a terminal (width $COLUMNS or 80), or --once. */
static int once(void)
{
	int width = term_width();
	char *text;
	int ex;

	if (!width) {
		const char *cols = getenv("COLUMNS");
		long long v;

		width = cols && parse_ll(cols, 1, 100000, &v) == 0 ? (int)v : 80;
	}
	read_or_die();
	if (st.nwarn)
		warn_line("%zu record%s not read: %s", st.nwarn, st.nwarn == 1 ? "" : "s",
			  st.warn ? st.warn : "?");
	text = compose(&st, width, 0, use_colour(), 0, 0);
	fputs(text, stdout);
	free(text);
	finish_stdout();
	ex = st.rd.ex;
	cleanup();
	return ex;
}

static void draw(int full)
{
	int w, h;
	char *text;
	struct sbuf b = { 0 };

	term_size(&w, &h);
	st.now = now_ms();
	text = compose(&st, w, h, use_colour(), 1, 1);
	if (sbuf_addf(&b, "%s\033[H%s\033[J", full ? "\033[2J" : "", text) < 0)
		oom();
	free(text);
	if (write_full(STDOUT_FILENO, b.s, b.len) < 0) {
		int e = errno;

		sbuf_free(&b);
		term_leave();
		errno = e;
		die_sys(EX_IOERR_, "stdout");
	}
	sbuf_free(&b);
}

/* Read the spool again, its watches first (the spool itself once it
 * exists), so that no change falls between the reading and them. */
static void refresh(int ino)
{
	if (!st.have_spool)
		st.have_spool = tool_spool(&cfg, &sp, 0);
	if (st.have_spool)
		watch_add(ino, cfg.spool);
	read_or_die();
}

/* The signals that came: 1 when the frame is to be drawn anew (a
 * resize, continued after a stop).  One that ends top restores the
 * terminal and is raised again with its default action. */
static int on_signals(int sfd, int keys)
{
	struct signalfd_siginfo si;
	sigset_t set;
	ssize_t n;
	int full = 0;

	while ((n = read(sfd, &si, sizeof si)) == (ssize_t)sizeof si) {
		int sig = (int)si.ssi_signo;

		switch (sig) {
		case SIGWINCH:
		case SIGCONT:
			full = 1;
			break;
		case SIGTSTP:
			/* Stopped with the terminal as it was; set up again
			 * when continued. */
			term_leave();
			if (kill(getpid(), SIGSTOP) < 0)
				die_sys(EX_OSERR_, "kill");
			term_enter(keys);
			full = 1;
			break;
		default:
			term_leave();
			cleanup();
			signal(sig, SIG_DFL);
			sigemptyset(&set);
			sigaddset(&set, sig);
			raise(sig);
			sigprocmask(SIG_UNBLOCK, &set, NULL);
			_exit(128 + sig);
		}
	}
	if (n < 0 && errno != EAGAIN && errno != EINTR) {
		term_leave();
		die_sys(EX_OSERR_, "signalfd");
	}
	return full;
}

int main(int argc, char **argv)
{
	int ch, only_once = 0, keys, ino, sfd, full = 1, redraw = 0, dirty = 0;
	long long last_read, last_sec;
	sigset_t set;

	prog_init(argc, argv);
	while ((ch = tool_getopt(argc, argv, "", longopts, 0, usage)) != -1) {
		switch (ch) {
		case OPT_ONCE:
			only_once = 1;
			break;
		default:
			usage_error(usage, "unknown option");
		}
	}
	if (optind < argc)
		usage_error(usage, "unexpected operand '%s'", argv[optind]);
	tool_config(&cfg);
	if (only_once || !isatty(STDOUT_FILENO))
		return once();

	keys = isatty(STDIN_FILENO);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	sigaddset(&set, SIGWINCH);
	sigaddset(&set, SIGTSTP);
	sigaddset(&set, SIGCONT);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		die_sys(EX_OSERR_, "sigprocmask");
	if ((sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) < 0)
		die_sys(EX_OSERR_, "signalfd");
	if ((ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0)
		die_sys(EX_OSERR_, "inotify");
	if (atexit(term_leave) != 0)
		die(EX_OSERR_, "atexit");
	term_enter(keys);
	/* The watches before each reading, so that no change falls between. */
	refresh(ino);
	last_read = mono_ms();
	last_sec = now_ms() / 1000;
	for (int quit = 0; !quit;) {
		struct pollfd p[3] = {
			{ .fd = sfd, .events = POLLIN },
			{ .fd = ino, .events = POLLIN },
			{ .fd = keys ? STDIN_FILENO : -1, .events = POLLIN },
		};
		long long wall, mono, wait;

		if (redraw || full)
			draw(full);
		redraw = full = 0;
		wall = now_ms();
		mono = mono_ms();
		wait = 1000 - wall % 1000;
		if (dirty && last_read + REREAD_MS - mono < wait)
			wait = last_read + REREAD_MS - mono;
		if (poll(p, 3, (int)(wait < 0 ? 0 : wait)) < 0) {
			if (errno == EINTR)
				continue;
			term_leave();
			die_sys(EX_OSERR_, "poll");
		}
		if (p[0].revents & POLLIN)
			full |= on_signals(sfd, keys);
		if (p[2].revents & (POLLIN | POLLHUP | POLLERR)) {
			char buf[64];
			ssize_t n = read(STDIN_FILENO, buf, sizeof buf);

			if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
				quit = 1;       /* the terminal is gone */
			for (ssize_t i = 0; i < n; i++) {
				if (buf[i] == 'q' || buf[i] == 'Q')
					quit = 1;
				else if (buf[i] == '\f')       /* ^L: draw it all again */
					full = 1;
			}
		}
		if (p[1].revents & POLLIN)
			dirty |= watch_read(ino);
		if (!st.have_spool && now_ms() / 1000 != last_sec)
			dirty = 1;              /* look for the spool each second */
		if (!quit && dirty && mono_ms() - last_read >= REREAD_MS) {
			refresh(ino);
			last_read = mono_ms();
			dirty = 0;
			redraw = 1;
		}
		if (now_ms() / 1000 != last_sec) {
			last_sec = now_ms() / 1000;
			redraw = 1;     /* the clocks */
		}
	}
	term_leave();
	cleanup();
	close(ino);
	close(sfd);
	return 0;
}
