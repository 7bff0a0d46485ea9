/*
 * cardbaton-status - the queue in dispatch order, then running, paused
 * and (with --all) finished jobs; or the jobs named.
 *
 * Design: status is a reader of the spool as LAYOUT.md describes it,
 * and works the same with or without the daemon.  One readdir per
 * directory, one read per record shown -- except queued/, which the
 * daemon summarises in SPOOL/queued.idx (LAYOUT.md §11, index.c):
 *
 *  1. list new/ incoming/; then queued/: when queued.idx describes
 *     queued/ as it is now (the directory's device, inode, ctime and
 *     mtime are those the index was made for; fstat()ed after the
 *     index is read and before running/ is listed), its lines stand for
 *     the names and the records of queued/ -- no listing, no reads;
 *     otherwise queued/ is listed as below.  Then running/ paused/ (and
 *     done/ for --all; otherwise done/ is only looked up for the IDs
 *     listed, or, while done/ is as it was when the index was made, for
 *     the IDs the index says have a copy there);
 *  2. group the names by job ID: where two records of one ID exist (a
 *     crash between the two steps of spool_put, or a listing taken
 *     while a job moved) both are read and the higher rev is kept (an
 *     index line carries its record's rev); a submission in new/ or
 *     incoming/ whose ID already has a record is stale (incoming/) or
 *     will get a fresh ID (new/);
 *  3. read what is shown; a record that vanished between the listing
 *     and the read has moved, and is looked up again with spool_find;
 *     what a row shows comes from status_view_of (index.c), for a
 *     record read here and for the line the daemon made of it alike,
 *     so both print the same bytes;
 *  4. sort: queued and not-yet-accepted jobs by priority then ID
 *     (dispatch order, the order of names in queued/), then running
 *     and pausing, paused, finished, each by ID.
 *
 * The order of the listings follows the flow of jobs (new/ incoming/
 * queued/ running/ paused/): a job that moves while status reads is
 * seen once or twice (and deduplicated by rev), never not at all.  The
 * index is queued/ at the moment of its fstat, between incoming/ and
 * running/, so it keeps that guarantee.  An index that is missing,
 * stale, malformed or a symlink is ignored: the output is the same,
 * only slower.
 *
 * Submissions dropped into new/ under a foreign name have no ID until
 * the daemon accepts them; they are not listed, and the human view
 * ends with a line counting them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

static const char usage[] = "cardbaton-status [--config PATH] [--json] [--all] [JOB_ID...]";

enum { OPT_JSON = OPT_TOOL_FIRST, OPT_ALL };

static const struct option longopts[] = {
	COMMON_LONGOPTS,
	{ "json", no_argument, NULL, OPT_JSON },
	{ "all", no_argument, NULL, OPT_ALL },
	{ NULL, 0, NULL, 0 },
};

#define NCOL 9
enum { C_ID, C_STATE, C_PRIO, C_NODE, C_GPUS, C_ATT, C_AGE, C_NAME, C_CMD };
static const char *const header[NCOL] = {
	"ID", "STATE", "PRIO", "NODE", "GPUS", "ATT", "AGE", "NAME", "COMMAND",
};

static int json_out, show_all;
static long long now;
static int exit_code;

/* A name found in a spool directory, or a line of the index. */
struct ent {
	long long id;
	enum spool_dir dir;
	char *name;             /* owned unless IX */
	const struct index_ent *ix;     /* queued/ as the index has it */
	int dead;
};

/* A job ready to print, with its sort key. */
struct row {
	int section;            /* 0 queued, 1 running, 2 paused, 3 finished */
	long long prio, id;
	const char *json;       /* --json: the element (in the index, or JSON_OWN) */
	char *json_own;
	const char *cell[NCOL]; /* otherwise: the columns (in the arena, the index, or static) */
};

/* queued.idx, when it is used: rows point into it until they are printed. */
static struct spool_index qindex;

static struct row *rows;
static size_t nrows, caprows;

static void *xrealloc(void *p, size_t n)
{
	if (!(p = realloc(p, n)))
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	return p;
}

static char *xstr(char *s)
{
	if (!s)
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	return s;
}

static int section_of(enum job_state s)
{
	switch (s) {
	case JS_QUEUED:
		return 0;
	case JS_RUNNING:
	case JS_PAUSING:
		return 1;
	case JS_PAUSED:
		return 2;
	default:
		return 3;
	}
}

/*
 * The strings of the table's cells: 100,000 rows would be a million
 * mallocs and frees.  They are kept in an arena, freed at the end, or
 * point into the index (which lives as long) or to static text.
 */
struct chunk {
	struct chunk *next;
	size_t used, cap;
	char s[];
};
static struct chunk *arena;

static char *acopy(const char *s, size_t n)
{
	char *p;

	if (!arena || arena->cap - arena->used < n + 1) {
		size_t cap = n + 1 > 65536 ? n + 1 : 65536;
		struct chunk *c = xrealloc(NULL, sizeof *c + cap);

		c->next = arena;
		c->used = 0;
		c->cap = cap;
		arena = c;
	}
	p = arena->s + arena->used;
	memcpy(p, s, n);
	p[n] = '\0';
	arena->used += n + 1;
	return p;
}

static void arena_free(void)
{
	while (arena) {
		struct chunk *c = arena->next;

		free(arena);
		arena = c;
	}
}

/* S itself when it lasts until the output is printed (STABLE), else
 * a copy in the arena. */
static const char *keep(const char *s, int stable)
{
	return stable ? s : acopy(s, strlen(s));
}

/* "%lld" of V (no printf: it is called 300,000 times). */
static const char *lld(long long v)
{
	char buf[24], *p = buf + sizeof buf;
	unsigned long long u = v < 0 ? 0 - (unsigned long long)v : (unsigned long long)v;

	do
		*--p = (char)('0' + u % 10);
	while (u /= 10);
	if (v < 0)
		*--p = '-';
	return acopy(p, (size_t)(buf + sizeof buf - p));
}

/* A row from what status shows of a job (a record, or an index line).
 * STABLE: V's strings last until the output is printed (the index). */
static void add_view(struct status_view *v, int stable)
{
	struct row *r;

	if (nrows == caprows)
		rows = xrealloc(rows, (caprows = caprows ? caprows * 2 : 256) * sizeof *rows);
	r = &rows[nrows++];
	memset(r, 0, sizeof *r);
	r->section = section_of(v->state);
	r->prio = v->priority;
	r->id = v->id;
	if (json_out) {
		r->json = v->json;
		r->json_own = v->own[4];        /* the row owns it now */
		v->own[4] = NULL;
		return;
	}

	char age[32];

	r->cell[C_ID] = lld(v->id);
	r->cell[C_STATE] = job_state_name(v->state);
	r->cell[C_PRIO] = lld(v->priority);
	r->cell[C_NODE] = keep(v->node, stable);
	r->cell[C_GPUS] = keep(v->gpus, stable);
	r->cell[C_ATT] = lld(v->natt);
	if (v->since)
		fmt_age(age, sizeof age, now - v->since);
	else
		snprintf(age, sizeof age, "-");
	r->cell[C_AGE] = acopy(age, strlen(age));
	r->cell[C_NAME] = keep(v->name, stable);
	r->cell[C_CMD] = keep(v->command, stable);
}

static void add_row(const struct job *j)
{
	struct status_view v;

	if (status_view_of(j, json_out, &v) < 0)
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	add_view(&v, 0);
	status_view_free(&v);
}

static int row_cmp(const void *pa, const void *pb)
{
	const struct row *a = pa, *b = pb;

	if (a->section != b->section)
		return a->section < b->section ? -1 : 1;
	if (a->section == 0 && a->prio != b->prio)
		return a->prio > b->prio ? -1 : 1;
	return (a->id > b->id) - (a->id < b->id);
}

/* ---- reading the spool ---------------------------------------------------- */

static int shown(enum job_state s)
{
	return show_all || !job_state_final(s);
}

static void find_moved(struct spool *sp, long long id)
{
	struct cb_err err = { 0 };
	enum spool_dir d;
	struct job j;
	char *name;
	int r = spool_find(sp, id, &j, &d, &name, &err);

	if (r < 0) {
		warn_line("%s", err.msg ? err.msg : strerror(ENOMEM));
		exit_code = err.ex ? err.ex : EX_OSERR_;
		cb_err_free(&err);
		return;
	}
	if (r == 1) {
		if (shown(j.state))
			add_row(&j);
		job_free(&j);
		free(name);
	}
}

/* Read entry E: 1 loaded, 0 gone (it moved), -1 unreadable (warned). */
static int load_ent(struct spool *sp, const struct ent *e, struct job *j)
{
	struct cb_err err = { 0 };

	if (e->dir == SD_NEW || e->dir == SD_INCOMING ?
	    spool_load_pending(sp, e->dir, e->name, e->id, j, &err) == 0 :
	    spool_load(sp, e->dir, e->name, j, &err) == 0)
		return 1;
	if (err.ex == EX_NOINPUT_) {
		cb_err_free(&err);
		return 0;
	}
	warn_line("%s", err.msg ? err.msg : strerror(ENOMEM));
	if (!exit_code)
		exit_code = err.ex ? err.ex : EX_OSERR_;
	cb_err_free(&err);
	return -1;
}

static struct ent *ents;
static size_t nents, capents;
static size_t foreign;

static void add_ent(long long id, enum spool_dir d, const char *name)
{
	if (nents == capents)
		ents = xrealloc(ents, (capents = capents ? capents * 2 : 256) * sizeof *ents);
	ents[nents].id = id;
	ents[nents].dir = d;
	ents[nents].name = xstr(strdup(name));
	ents[nents].ix = NULL;
	ents[nents].dead = 0;
	nents++;
}

/* A line of the index, standing for queued/NAME. */
static void add_ix_ent(const struct index_ent *e)
{
	if (nents == capents)
		ents = xrealloc(ents, (capents = capents ? capents * 2 : 256) * sizeof *ents);
	ents[nents].id = e->id;
	ents[nents].dir = SD_QUEUED;
	ents[nents].name = (char *)e->name;
	ents[nents].ix = e;
	ents[nents].dead = 0;
	nents++;
}

/* An entry whose record the index holds (no read needed). */
static int summarised(const struct ent *e)
{
	return e->ix && !e->ix->raw;
}

static int is_record_dir(enum spool_dir d)
{
	return d == SD_QUEUED || d == SD_RUNNING || d == SD_PAUSED || d == SD_DONE;
}

static int ent_cmp(const void *pa, const void *pb)
{
	const struct ent *a = pa, *b = pb;

	if (a->id != b->id)
		return a->id < b->id ? -1 : 1;
	return (a->dir > b->dir) - (a->dir < b->dir);
}

static void list_all(struct spool *sp)
{
	/* queued/ before running/: a job moving queued -> running between
	 * the two listings is seen twice (and deduplicated) rather than
	 * not at all. */
	static const enum spool_dir dirs[] = {
		SD_NEW, SD_INCOMING, SD_QUEUED, SD_RUNNING, SD_PAUSED, SD_DONE,
	};
	size_t nlisted;

	for (size_t k = 0; k < sizeof dirs / sizeof dirs[0]; k++) {
		enum spool_dir d = dirs[k];
		char **names;
		size_t n;

		/* done/ holds the history: list it only for --all. */
		if (d == SD_DONE && !show_all)
			continue;
		if (d == SD_QUEUED) {
			if (index_read(sp, json_out, &qindex) == 1) {
				for (size_t i = 0; i < qindex.n; i++)
					add_ix_ent(&qindex.e[i]);
				continue;
			}
		}
		if (spool_list(sp, d, &names, &n) < 0)
			die_sys(EX_OSERR_, "%s/%s", sp->path, spool_dir_name[d]);
		for (size_t i = 0; i < n; i++) {
			long long id, prio;
			int c;

			switch (d) {
			case SD_NEW:
				c = name_classify_new(names[i], &prio, &id);
				if (c == 0)
					foreign++;
				if (c == 1)
					add_ent(id, d, names[i]);
				break;
			case SD_QUEUED:
				if (name_parse_queued(names[i], &prio, &id) == 0)
					add_ent(id, d, names[i]);
				break;
			default:
				if (name_parse_plain(names[i], &id) == 0)
					add_ent(id, d, names[i]);
			}
		}
		spool_list_free(names, n);
	}
	/* Without --all, a finished copy matters only beside a record of
	 * the same job elsewhere (a crash inside spool_put): one lookup per
	 * job shown, rather than a listing of the whole history. */
	nlisted = nents;
	for (size_t i = 0; !show_all && i < nlisted; i++) {
		/* done/ as it was when the index was made: it says which
		 * of its jobs have a copy there. */
		int fresh = ents[i].ix && qindex.done_fresh;
		char *pn;

		if (fresh && !ents[i].ix->in_done)
			continue;
		if (!(pn = name_plain(ents[i].id)))
			die(EX_OSERR_, "%s", strerror(ENOMEM));
		if (fresh || faccessat(sp->dir[SD_DONE], pn, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
			add_ent(ents[i].id, SD_DONE, pn);
		free(pn);
	}
	if (nents)
		qsort(ents, nents, sizeof *ents, ent_cmp);

	for (size_t g = 0; g < nents; ) {
		size_t end = g, nrec = 0, best = SIZE_MAX;
		long long best_rev = -1;
		struct job j;
		int moved = 0, r;

		while (end < nents && ents[end].id == ents[g].id)
			end++;
		for (size_t i = g; i < end; i++)
			nrec += is_record_dir(ents[i].dir);
		if (nrec == 0) {
			/* Not accepted yet: incoming/ holds the ID; a file in
			 * new/ with the same number gets another ID. */
			size_t keep = end - 1;  /* incoming sorts after new */

			for (size_t i = g; i < end; i++)
				if (i != keep) {
					ents[i].dead = 1;
					foreign++;
				}
		} else {
			for (size_t i = g; i < end; i++)
				if (!is_record_dir(ents[i].dir)) {
					ents[i].dead = 1;
					if (ents[i].dir == SD_NEW)
						foreign++;
				}
		}
		if (nrec > 1) {
			/* Two records: the higher rev is the job (LAYOUT.md §6). */
			for (size_t i = g; i < end; i++) {
				long long rev;

				if (ents[i].dead)
					continue;
				if (summarised(&ents[i])) {
					rev = ents[i].ix->v.rev;
				} else if ((r = load_ent(sp, &ents[i], &j)) <= 0) {
					moved |= r == 0;        /* -1: unreadable, said */
					ents[i].dead = 1;
					continue;
				} else {
					rev = j.rev;
					job_free(&j);
				}
				if (rev > best_rev) {
					best_rev = rev;
					best = i;
				}
			}
			for (size_t i = g; i < end; i++)
				if (i != best)
					ents[i].dead = 1;
			if (best == SIZE_MAX && moved)
				find_moved(sp, ents[g].id);
		}
		g = end;
	}

	for (size_t i = 0; i < nents; i++) {
		struct ent *e = &ents[i];
		struct job j;
		int r;

		if (e->dead || (e->dir == SD_DONE && !show_all))
			continue;
		if (summarised(e)) {
			struct status_view v = e->ix->v;

			if (shown(v.state))
				add_view(&v, 1);
			continue;
		}
		r = load_ent(sp, e, &j);
		if (r == 0)
			find_moved(sp, e->id);
		if (r <= 0)
			continue;
		if (shown(j.state))
			add_row(&j);
		job_free(&j);
	}
	for (size_t i = 0; i < nents; i++)
		if (!ents[i].ix)
			free(ents[i].name);
	free(ents);
}

/* The jobs named, in the order given; the IDs not found are returned
 * as " 5 7" (malloc'd) or NULL. */
static char *list_ids(struct spool *sp, int have_spool, char **ids, int n, size_t *nmissing)
{
	struct sbuf missing = { 0 };

	*nmissing = 0;
	for (int i = 0; i < n; i++) {
		long long id = arg_jobid(ids[i]);
		struct cb_err err = { 0 };
		enum spool_dir d;
		struct job j;
		char *name = NULL;
		int r = have_spool ? spool_find(sp, id, &j, &d, &name, &err) : 0;

		if (r < 0)
			die_err(&err);
		if (r == 0) {
			if (sbuf_addf(&missing, " %lld", id) < 0)
				die(EX_OSERR_, "%s", strerror(ENOMEM));
			(*nmissing)++;
			continue;
		}
		add_row(&j);
		job_free(&j);
		free(name);
	}
	return missing.s;
}

/* What the daemon last saw of each configured node (nodes/). */
static struct node_status *nodes;
static size_t nnodes;

static void load_nodes(struct spool *sp, const struct config *c)
{
	size_t k = 0;

	if (spool_node_list(sp, &nodes, &nnodes) < 0)
		return;
	for (size_t i = 0; i < nnodes; i++) {
		if (config_node(c, nodes[i].name)) {
			struct node_status t = nodes[k];

			nodes[k++] = nodes[i];
			nodes[i] = t;
		}
	}
	for (size_t i = k; i < nnodes; i++) {   /* nodes no longer configured */
		free(nodes[i].name);
		free(nodes[i].error);
	}
	nnodes = k;
}

static void print_json(void)
{
	fputs("{\"jobs\": [", stdout);
	for (size_t i = 0; i < nrows; i++) {
		fputs(i ? ",\n" : "\n", stdout);
		fputs(rows[i].json, stdout);
		cJSON_free(rows[i].json_own);
	}
	fputs(nrows ? "\n],\n\"nodes\": [" : "],\n\"nodes\": [", stdout);
	for (size_t i = 0; i < nnodes; i++) {
		cJSON *o = cJSON_CreateObject();
		char *since = rfc3339(nodes[i].since), *text = NULL;

		if (!o || !cJSON_AddStringToObject(o, "name", nodes[i].name) ||
		    !cJSON_AddBoolToObject(o, "reachable", nodes[i].reachable) ||
		    !(nodes[i].error ? cJSON_AddStringToObject(o, "error", nodes[i].error)
				     : cJSON_AddNullToObject(o, "error")) ||
		    !(since ? cJSON_AddStringToObject(o, "since", since)
			    : cJSON_AddNullToObject(o, "since")) ||
		    !(text = cJSON_PrintUnformatted(o)))
			die(EX_OSERR_, "%s", strerror(ENOMEM));
		printf("%s\n%s", i ? "," : "", text);
		cJSON_free(text);
		cJSON_Delete(o);
		free(since);
	}
	fputs("]}\n", stdout);
}

/* One line per node the daemon could not reach when it last tried. */
static void print_nodes(void)
{
	for (size_t i = 0; i < nnodes; i++) {
		char *since;

		if (nodes[i].reachable)
			continue;
		since = rfc3339(nodes[i].since);
		printf("node %s unreachable since %s: %s\n", nodes[i].name, since ? since : "?",
		       nodes[i].error ? nodes[i].error : "no reason recorded");
		free(since);
	}
}

/* Colour only on a terminal, and never when NO_COLOR is set and not
 * empty (https://no-color.org). */
static int use_colour(void)
{
	const char *nc = getenv("NO_COLOR");

	return isatty(STDOUT_FILENO) && !(nc && *nc);
}

/* The colour of a state word, or NULL for the terminal's default. */
static const char *state_colour(const char *w, size_t n)
{
	static const struct { const char *state, *sgr; } map[] = {
		{ "running", "\033[32m" }, { "succeeded", "\033[32m" },
		{ "failed", "\033[31m" }, { "lost", "\033[31m" },
		{ "pausing", "\033[36m" }, { "paused", "\033[36m" },
	};

	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
		if (strlen(map[i].state) == n && !memcmp(map[i].state, w, n))
			return map[i].sgr;
	return NULL;
}

/* Copy the table in TEXT to stdout with each row's STATE (the word after
 * the ID) in colour; the header row is left as it is. */
static void print_coloured(const char *text, size_t len)
{
	const char *p = text, *end = text + len;
	int first = 1;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		size_t a = 0, b;
		const char *sgr = NULL;

		while (a < n && p[a] == ' ')
			a++;
		while (a < n && p[a] >= '0' && p[a] <= '9')
			a++;
		while (a < n && p[a] == ' ')
			a++;
		for (b = a; b < n && p[b] != ' '; b++)
			;
		if (!first)
			sgr = state_colour(p + a, b - a);
		if (sgr)
			printf("%.*s%s%.*s\033[0m%.*s", (int)a, p, sgr, (int)(b - a), p + a,
			       (int)(n - b), p + b);
		else
			fwrite(p, 1, n, stdout);
		if (nl)
			putchar('\n');
		p += n + (nl ? 1 : 0);
		first = 0;
	}
}

static void print_table(void)
{
	struct table t;
	int named = 0;
	size_t ncol = NCOL;

	/* The NAME column only when some job shown has a name. */
	for (size_t i = 0; i < nrows; i++)
		named |= strcmp(rows[i].cell[C_NAME], "-") != 0;
	if (!named)
		ncol--;
	/* ID, PRIO and ATT right-aligned. */
	table_init(&t, ncol, 1u << C_ID | 1u << C_PRIO | 1u << C_ATT);
	for (size_t i = 0; i <= nrows; i++) {
		const char *cells[NCOL];
		const char *const *src = i ? (const char *const *)rows[i - 1].cell : header;

		for (size_t k = 0, m = 0; k < NCOL; k++)
			if (named || k != C_NAME)
				cells[m++] = src[k];
		table_row_ref(&t, cells);
	}
	if (use_colour()) {
		char *text = NULL;
		size_t len = 0;
		FILE *mem = open_memstream(&text, &len);

		if (!mem)
			die(EX_OSERR_, "%s", strerror(errno));
		table_print(&t, mem, term_width());
		if (fclose(mem) != 0)
			die(EX_OSERR_, "%s", strerror(errno));
		print_coloured(text, len);
		free(text);
	} else {
		table_print(&t, stdout, term_width());
	}
	table_free(&t);
	arena_free();
}

int main(int argc, char **argv)
{
	struct config c;
	struct spool sp;
	char *missing = NULL;
	size_t nmissing = 0;
	int ch, have_spool;

	prog_init(argc, argv);
	while ((ch = tool_getopt(argc, argv, "", longopts, 0, usage)) != -1) {
		switch (ch) {
		case OPT_JSON:
			json_out = 1;
			break;
		case OPT_ALL:
			show_all = 1;
			break;
		default:
			usage_error(usage, "unknown option");
		}
	}
	for (int i = optind; i < argc; i++)
		(void)arg_jobid(argv[i]);       /* usage errors before any output */
	tool_config(&c);
	now = now_ms();
	have_spool = tool_spool(&c, &sp, 0);
	if (optind < argc)
		missing = list_ids(&sp, have_spool, argv + optind, argc - optind, &nmissing);
	else if (have_spool)
		list_all(&sp);
	if (optind == argc && nrows > 1)
		qsort(rows, nrows, sizeof *rows, row_cmp);
	if (have_spool)
		load_nodes(&sp, &c);

	if (json_out) {
		print_json();
	} else {
		print_table();
		print_nodes();
	}
	if (!json_out && foreign)
		printf("%zu more submission%s in %s/new wait%s for the daemon to give %s a job ID\n",
		       foreign, foreign == 1 ? "" : "s", sp.path, foreign == 1 ? "s" : "",
		       foreign == 1 ? "it" : "them");
	finish_stdout();
	free(rows);
	index_free(&qindex);
	node_status_free(nodes, nnodes);
	if (have_spool)
		spool_close(&sp);
	config_free(&c);
	if (nmissing)
		die(EX_NOINPUT_, "no such job%s%s", nmissing > 1 ? "s" : "", missing);
	free(missing);
	return exit_code;
}
