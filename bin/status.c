/*
 * cardbaton-status - the queue in dispatch order, then running, paused
 * and (with --all) finished jobs; or the jobs named.
 *
 * Design: status is a reader of the spool as LAYOUT.md describes it,
 * and works the same with or without the daemon.  The reader's rules
 * -- the listings in the order of the flow of jobs, queued/ from
 * SPOOL/queued.idx while its key matches, the names grouped by job ID,
 * the higher rev kept, a record that moved looked up again -- are the
 * library's (status_read, spool-layout/statusread.c); what a row shows
 * comes from status_view_of (view.c), for a record read and for the
 * line the daemon made of it alike, so both print the same bytes.
 * This tool sorts the rows (status_key_cmp: queued and not-yet-accepted
 * jobs by priority then ID, the order of queued/, then running and
 * pausing, paused, finished, each by ID) and prints them.
 *
 * Submissions dropped into new/ under a foreign name have no ID until
 * the daemon accepts them; they are not listed, and the human view
 * ends with a line counting them.
 */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

static const char usage[] = "cardbaton-status [--config PATH] [--json] [--all] [--state S[,S...]] "
			    "[--node N] [--name GLOB] [--since WHEN] [--user NAME[,NAME...]] [--mine] "
			    "[JOB_ID...]";

enum { OPT_JSON = OPT_TOOL_FIRST, OPT_ALL, OPT_STATE, OPT_NODE, OPT_NAME, OPT_SINCE, OPT_USER,
       OPT_MINE };

static const struct option longopts[] = {
	COMMON_LONGOPTS,
	{ "json", no_argument, NULL, OPT_JSON },
	{ "all", no_argument, NULL, OPT_ALL },
	{ "state", required_argument, NULL, OPT_STATE },
	{ "node", required_argument, NULL, OPT_NODE },
	{ "name", required_argument, NULL, OPT_NAME },
	{ "since", required_argument, NULL, OPT_SINCE },
	{ "user", required_argument, NULL, OPT_USER },
	{ "mine", no_argument, NULL, OPT_MINE },
	{ NULL, 0, NULL, 0 },
};

/*
 * The filters: a job is shown when it passes every one given.  --state:
 * its state is one of those listed; --node: its NODE is N (a Slurm
 * node's "N(slurm:JOBID)" too); --name: its name matches GLOB
 * (fnmatch(3); a job without a name never does); --since: it had not
 * ended before WHEN (live jobs, and finished ones that ended at or
 * after it); --user: its owner is one of the names listed (a number
 * with a passwd entry stands for its name too; a job without an owner
 * never matches); --mine: its owner is the account running status (by
 * name, or its number when it has none: lab_user_name).  A finished
 * state in --state, or --since, reads done/ as --all does.
 */
static unsigned want_states;            /* 1 << state; 0: any */
static const char *want_node, *want_name;
static long long want_since = -1;
static char **want_users;               /* --user's names; NULL: any */
static size_t nwant_users;
static char *want_me;                   /* --mine: this account's name; NULL: any */

static int user_listed(const char *owner)
{
	for (size_t i = 0; i < nwant_users; i++)
		if (!strcmp(want_users[i], owner))
			return 1;
	return 0;
}

static int wanted(const struct status_view *v)
{
	size_t n;

	if (want_states && !(want_states & 1u << v->state))
		return 0;
	if (want_node && strcmp(v->node, want_node) &&
	    !((n = strlen(want_node)) && !strncmp(v->node, want_node, n) &&
	      !strncmp(v->node + n, "(slurm:", 7)))
		return 0;
	if (want_name && (!strcmp(v->name, "-") || fnmatch(want_name, v->name, 0) != 0))
		return 0;
	if (want_since >= 0 && job_state_final(v->state) && v->since < want_since)
		return 0;
	if (want_users && (!v->owner || !user_listed(v->owner)))
		return 0;
	if (want_me && (!v->owner || strcmp(v->owner, want_me)))
		return 0;
	return 1;
}

static void add_user(const char *name)
{
	want_users = realloc(want_users, (nwant_users + 1) * sizeof *want_users);
	if (!want_users)
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	want_users[nwant_users++] = must_asprintf("%s", name);
}

/* --user's list: names (or numbers), comma-separated, none empty; a
 * number that is an account's and not a name is that account's name
 * too (owners are recorded by name). */
static void parse_users(const char *arg)
{
	char *copy = must_asprintf("%s", arg), *p = copy, *w;

	if (!*arg)
		usage_error(usage, "--user: no user given");
	while ((w = strsep(&p, ","))) {
		size_t n = strspn(w, "0123456789");

		if (!*w)
			usage_error(usage, "--user: '%s': an empty name", arg);
		add_user(w);
		if (n == strlen(w) && n <= 10 && !getpwnam(w)) {
			struct passwd *pw = getpwuid((uid_t)strtoull(w, NULL, 10));

			if (pw)
				add_user(pw->pw_name);
		}
	}
	free(copy);
}

/* --state's list: every word a state's name, or exit 64 naming it. */
static unsigned parse_states(const char *arg)
{
	unsigned set = 0;
	char *copy = must_asprintf("%s", arg), *save = NULL;

	for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		enum job_state s;

		if (job_state_parse(w, &s) < 0)
			usage_error(usage, "--state: '%s' is not a state (queued, running, pausing, "
				    "paused, succeeded, failed, cancelled, lost)", w);
		set |= 1u << s;
	}
	if (!set)
		usage_error(usage, "--state: no state given");
	free(copy);
	return set;
}

/* The columns (OWNER only in a lab's spool: C_OWNER is then left out
 * of the cells, which are numbered as shown). */
#define NCOL 10
enum { C_ID, C_STATE, C_OWNER, C_PRIO, C_NODE, C_GPUS, C_ATT, C_AGE, C_NAME, C_CMD };
static const char *const header[NCOL] = {
	"ID", "STATE", "OWNER", "PRIO", "NODE", "GPUS", "ATT", "AGE", "NAME", "COMMAND",
};
static int owner_col;                   /* a lab's spool: OWNER shown */

static int json_out, show_all;
static long long now;

/*
 * The jobs to print: a view each, in the order they were read (sorted
 * by sort_rows).  A view of the index's lasts until the output is
 * printed (status_read_free), and is kept as it is; any other is copied
 * into the arena, its --json element taken (its own[4]).  100,000 rows
 * are 100,000 pointers: no cell is made until it is printed.
 */
static const struct status_view **rows;
static size_t nrows, caprows;
static struct status_key last_key;     /* of the last row added */
static int unsorted;                    /* a row came before the one added before it */

static void table_note(const struct status_view *v);

/* The reading of the spool: rows point into its index until they are
 * printed. */
static struct status_read rd;

static void *xrealloc(void *p, size_t n)
{
	if (!(p = realloc(p, n)))
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	return p;
}

/*
 * The copies of the views read from records, and their strings: kept
 * in an arena, freed at the end.
 */
struct chunk {
	struct chunk *next;
	size_t used, cap;
	_Alignas(16) char s[];
};
static struct chunk *arena;

/* N bytes in the arena, aligned for any object. */
static void *aalloc(size_t n)
{
	void *p;

	n = (n + 15) & ~(size_t)15;
	if (!arena || arena->cap - arena->used < n) {
		size_t cap = n > 65536 ? n : 65536;
		struct chunk *c = xrealloc(NULL, sizeof *c + cap);

		c->next = arena;
		c->used = 0;
		c->cap = cap;
		arena = c;
	}
	p = arena->s + arena->used;
	arena->used += n;
	return p;
}

static const char *acopy(const char *s)
{
	size_t n = strlen(s) + 1;

	return memcpy(aalloc(n), s, n);
}

static void arena_free(void)
{
	while (arena) {
		struct chunk *c = arena->next;

		free(arena);
		arena = c;
	}
}

/* A row from what status shows of a job (a record, or an index line).
 * STABLE: V lasts until the output is printed (the index's). */
static void add_view(struct status_view *v, int stable)
{
	const struct status_view *r = v;
	struct status_key k;

	if (!wanted(v))
		return;
	if (nrows == caprows)
		rows = xrealloc(rows, (caprows = caprows ? caprows * 2 : 1024) * sizeof *rows);
	if (!stable) {
		struct status_view *c = aalloc(sizeof *c);

		*c = *v;
		memset(c->own, 0, sizeof c->own);
		c->node = acopy(v->node);
		c->gpus = acopy(v->gpus);
		c->name = acopy(v->name);
		c->command = acopy(v->command);
		c->owner = v->owner ? acopy(v->owner) : NULL;
		if (json_out) {
			c->own[4] = v->own[4];  /* the row owns it now */
			v->own[4] = NULL;
		}
		c->json = json_out ? c->own[4] : NULL;
		r = c;
	}
	/* What the printing needs to know of all the rows, found while
	 * each is at hand: whether they came in order, the widths. */
	status_key_of(r, &k);
	if (nrows && status_key_cmp(&last_key, &k) > 0)
		unsorted = 1;
	last_key = k;
	rows[nrows++] = r;
	if (!json_out)
		table_note(r);
}

static void add_row(const struct job *j)
{
	struct status_view v;

	if (status_view_of(j, json_out, &v) < 0)
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	add_view(&v, 0);
	status_view_free(&v);
}

static int view_cmp(const struct status_view *a, const struct status_view *b)
{
	struct status_key ka, kb;

	status_key_of(a, &ka);
	status_key_of(b, &kb);
	return status_key_cmp(&ka, &kb);
}

static int row_cmp(const void *pa, const void *pb)
{
	return view_cmp(*(const struct status_view *const *)pa, *(const struct status_view *const *)pb);
}

/*
 * The rows in status_key_cmp's order.  They come mostly sorted: the
 * index gives queued/ in dispatch order, and what follows (running/,
 * paused/, by ID) comes after it.  The sorted run they start with is
 * kept as it is, the rest sorted (qsort) and merged into it.
 */
static void sort_rows(void)
{
	const struct status_view **tmp;
	size_t p = 1, m, i, j, k;

	if (!unsorted)
		return;
	while (p < nrows && view_cmp(rows[p - 1], rows[p]) <= 0)
		p++;
	if (p >= nrows)
		return;
	m = nrows - p;
	if (m > 1)
		qsort(rows + p, m, sizeof *rows, row_cmp);
	if (view_cmp(rows[p - 1], rows[p]) <= 0)
		return;
	/* Merged from the end: the tail in TMP, the run moved up. */
	tmp = xrealloc(NULL, m * sizeof *tmp);
	memcpy(tmp, rows + p, m * sizeof *tmp);
	for (i = p, j = m, k = nrows; j > 0; )
		rows[--k] = i > 0 && view_cmp(rows[i - 1], tmp[j - 1]) > 0 ? rows[--i] : tmp[--j];
	free(tmp);
}

/* ---- output ---------------------------------------------------------------- */

/*
 * What is printed is made in one buffer and written with fwrite in
 * large pieces (stdio's own buffer is 4 KiB: 100,000 rows were 10,000
 * writes).  OUT_KEEP: the whole text stays in it (the coloured table
 * is made from it).
 */
static struct sbuf out;
static int out_keep;

#define OUT_CHUNK ((size_t)1 << 20)

static void out_flush(void)
{
	if (out.len && !out_keep) {
		fwrite(out.s, 1, out.len, stdout);
		out.len = 0;
	}
}

/* Room for N more bytes at out.s + out.len. */
static void out_room(size_t n)
{
	if (out.cap - out.len >= n)
		return;
	out_flush();
	if (out.cap - out.len < n) {
		size_t cap = out.cap ? out.cap : OUT_CHUNK;

		while (cap - out.len < n)
			cap *= 2;
		out.s = xrealloc(out.s, cap);
		out.cap = cap;
	}
}

static void out_add(const char *s, size_t n)
{
	out_room(n);
	memcpy(out.s + out.len, s, n);
	out.len += n;
	if (out.len >= OUT_CHUNK)
		out_flush();
}

static void out_free(void)
{
	sbuf_free(&out);
}

/* status_read's callbacks: a job to show, a record it cannot read. */
static void read_job(void *arg, struct status_view *v, int stable)
{
	(void)arg;
	add_view(v, stable);
}

static void read_warn(void *arg, const struct cb_err *e)
{
	(void)arg;
	warn_line("%s", e->msg ? e->msg : strerror(ENOMEM));
}

/* ---- reading the spool ---------------------------------------------------- */

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
	/* The nodes configured (with --node, that one alone). */
	for (size_t i = 0; i < nnodes; i++) {
		if (config_node(c, nodes[i].name) && (!want_node || !strcmp(nodes[i].name, want_node))) {
			struct node_status t = nodes[k];

			nodes[k++] = nodes[i];
			nodes[i] = t;
		}
	}
	for (size_t i = k; i < nnodes; i++)
		node_status_clear(&nodes[i]);
	nnodes = k;
}

/* The checkpoint transfer to job ID's node under way (nodes/: the
 * destination's view), and that node's name; NULL: none. */
static const struct node_transfer *transfer_of(long long id, const char **to)
{
	for (size_t i = 0; i < nnodes; i++)
		for (size_t t = 0; t < nodes[i].ntransfers; t++)
			if (nodes[i].transfers[t].job == id) {
				*to = nodes[i].name;
				return &nodes[i].transfers[t];
			}
	return NULL;
}

/* T's "transfer": {"from", "to", "bytes_done", "bytes_total"} (cJSON's
 * text, malloc'd). */
static char *transfer_json(const struct node_transfer *t, const char *to)
{
	cJSON *o = cJSON_CreateObject();
	char *text;

	if (!o || !cJSON_AddStringToObject(o, "from", t->from) ||
	    !cJSON_AddStringToObject(o, "to", to) ||
	    !cJSON_AddNumberToObject(o, "bytes_done", (double)t->done) ||
	    !(t->total < 0 ? cJSON_AddNullToObject(o, "bytes_total")
			   : cJSON_AddNumberToObject(o, "bytes_total", (double)t->total)) ||
	    !(text = cJSON_PrintUnformatted(o)))
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	cJSON_Delete(o);
	return text;
}

/* Job ID's element JS, its LEN bytes up to its closing brace, with its
 * "transfer" as nodes/ says it is now (not the record's).  The element
 * ends in "transfer": null (job_status_json), which stays as it is for
 * a job whose checkpoint is not being copied, nearly every one; an
 * index line of a daemon from before it has none: added. */
static void print_element(const char *js, size_t len, long long id)
{
	static const char tail[] = "\"transfer\":null}";
	const size_t n = sizeof tail - 1;
	const char *to = NULL;
	const struct node_transfer *t = transfer_of(id, &to);
	int has = len >= n && !memcmp(js + len - n, tail, n);
	char *tr;

	if (has && !t) {
		out_add(js, len);
		return;
	}
	if (has) {
		out_add(js, len - (sizeof "null}" - 1));
	} else {
		out_add(js, len ? len - 1 : 0);
		out_add(",\"transfer\":", 12);
	}
	if (t) {
		tr = transfer_json(t, to);
		out_add(tr, strlen(tr));
		cJSON_free(tr);
	} else {
		out_add("null", 4);
	}
	out_add("}", 1);
}

static void print_json(void)
{
	out_add("{\"jobs\": [", 10);
	for (size_t i = 0; i < nrows; i++) {
		const char *js = rows[i]->json;
		size_t len = strlen(js);

		out_add(i ? ",\n" : "\n", i ? 2 : 1);
		while (len && js[len - 1] != '}')
			len--;
		print_element(js, len, rows[i]->id);
	}
	out_flush();
	fputs(nrows ? "\n],\n\"nodes\": [" : "],\n\"nodes\": [", stdout);
	for (size_t i = 0; i < nnodes; i++) {
		cJSON *o = cJSON_CreateObject(), *refused, *tr;
		char *since = rfc3339(nodes[i].since), *text = NULL;

		if (!o || !cJSON_AddStringToObject(o, "name", nodes[i].name) ||
		    !cJSON_AddBoolToObject(o, "reachable", nodes[i].reachable) ||
		    !(nodes[i].error ? cJSON_AddStringToObject(o, "error", nodes[i].error)
				     : cJSON_AddNullToObject(o, "error")) ||
		    !(since ? cJSON_AddStringToObject(o, "since", since)
			    : cJSON_AddNullToObject(o, "since")) ||
		    !cJSON_AddBoolToObject(o, "drained", nodes[i].drained) ||
		    !(refused = cJSON_AddArrayToObject(o, "refused")))
			die(EX_OSERR_, "%s", strerror(ENOMEM));
		for (size_t r = 0; r < nodes[i].nrefused; r++)
			if (!cJSON_AddItemToArray(refused, cJSON_CreateString(nodes[i].refused[r])))
				die(EX_OSERR_, "%s", strerror(ENOMEM));
		/* The checkpoints on their way here: job IDs (strings, as in
		 * "jobs"). */
		if (!(tr = cJSON_AddArrayToObject(o, "transfers")))
			die(EX_OSERR_, "%s", strerror(ENOMEM));
		for (size_t t = 0; t < nodes[i].ntransfers; t++) {
			char id[24];

			snprintf(id, sizeof id, "%lld", nodes[i].transfers[t].job);
			if (!cJSON_AddItemToArray(tr, cJSON_CreateString(id)))
				die(EX_OSERR_, "%s", strerror(ENOMEM));
		}
		if (!(text = cJSON_PrintUnformatted(o)))
			die(EX_OSERR_, "%s", strerror(ENOMEM));
		printf("%s\n%s", i ? "," : "", text);
		cJSON_free(text);
		cJSON_Delete(o);
		free(since);
	}
	fputs("]}\n", stdout);
}

/* One line per node the daemon could not reach when it last tried,
 * per drained node, and per account that refuses the lab's key on one
 * (run_as: owner). */
static void print_nodes(void)
{
	for (size_t i = 0; i < nnodes; i++) {
		char *since, *why;

		if (nodes[i].drained)
			printf("node %s drained: nothing new is placed there\n", nodes[i].name);
		for (size_t t = 0; t < nodes[i].ntransfers; t++) {
			const struct node_transfer *x = &nodes[i].transfers[t];

			if (x->total < 0)
				printf("job %lld on %s: transferring checkpoint from %s: starting\n", x->job,
				       nodes[i].name, x->from);
			else
				printf("job %lld on %s: transferring checkpoint from %s: %.1f of %.1f GiB\n",
				       x->job, nodes[i].name, x->from, (double)x->done / (1 << 30),
				       (double)x->total / (1 << 30));
		}
		for (size_t r = 0; r < nodes[i].nrefused; r++) {
			if (!(why = printable(nodes[i].refused[r])))
				die(EX_OSERR_, "%s", strerror(ENOMEM));
			printf("node %s: %s\n", nodes[i].name, why);
			free(why);
		}
		if (nodes[i].reachable)
			continue;
		/* The error is the node's (ssh's words end in a CR): shown
		 * printable, never raw. */
		since = rfc3339(nodes[i].since);
		why = printable(nodes[i].error ? nodes[i].error : "no reason recorded");
		if (!why)
			die(EX_OSERR_, "%s", strerror(ENOMEM));
		printf("node %s unreachable since %s: %s\n", nodes[i].name, since ? since : "?", why);
		free(since);
		free(why);
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

/* The table: common.c's (table_cols), its columns widened as each row
 * is added (table_note) and its lines made into the output buffer, with
 * no cell kept (a table of 100,000 rows was 900,000 cells). */

/* "%lld" of V into BUF[25], at the end: its start. */
static char *fmt_ll(char buf[25], long long v)
{
	char *p = buf + 24;
	unsigned long long u = v < 0 ? 0 - (unsigned long long)v : (unsigned long long)v;

	do
		*--p = (char)('0' + u % 10);
	while (u /= 10);
	if (v < 0)
		*--p = '-';
	buf[24] = '\0';
	return p;
}

/* AGE of a job: fmt_age of its age, made once for each second (rows
 * of one second in a row share it). */
static const char *age_of(const struct status_view *v)
{
	static char age[32];
	static long long last = -1;
	long long ms = now - v->since, s;

	if (!v->since)
		return "-";
	s = ms > 0 ? ms / 1000 : 0;
	if (s != last) {
		fmt_age(age, sizeof age, ms);
		last = s;
	}
	return age;
}

struct cells {
	const char *s[NCOL];
	char num[3][25];
};

/* The cells of a row (header: V NULL), as shown: OWNER's left out
 * unless owner_col (the columns after it one to the left); when
 * !NAMED, COMMAND in NAME's place (the last but one shown). */
static void cells_of(const struct status_view *v, int named, struct cells *c)
{
	const char *s[NCOL];
	size_t k = 0;

	if (!v) {
		memcpy(s, header, sizeof s);
	} else {
		s[C_ID] = fmt_ll(c->num[0], v->id);
		s[C_STATE] = v->staged ? "staged" : job_state_name(v->state);
		s[C_OWNER] = v->owner ? v->owner : "-";
		s[C_PRIO] = fmt_ll(c->num[1], v->priority);
		s[C_NODE] = v->node;
		s[C_GPUS] = v->gpus;
		s[C_ATT] = fmt_ll(c->num[2], v->natt);
		s[C_AGE] = age_of(v);
		s[C_NAME] = v->name;
		s[C_CMD] = v->command;
	}
	if (!named)
		s[C_NAME] = s[C_CMD];
	for (size_t i = 0; i < NCOL; i++)
		if (i != C_OWNER || owner_col)
			c->s[k++] = s[i];
}

/* The columns: all those shown while rows are added (COMMAND, the
 * last, does not count), the NAME column dropped at the end when no
 * job shown has a name.  ID, PRIO and ATT right-aligned (cols_init). */
static struct table_cols cols;
static int named;

static void cols_init(void)
{
	int o = owner_col ? 0 : 1;      /* the columns after OWNER move left */

	cols.ncol = NCOL - (size_t)o;
	cols.right = 1u << C_ID | 1u << (C_PRIO - o) | 1u << (C_ATT - o);
}

static void table_note(const struct status_view *v)
{
	struct cells c;

	named |= strcmp(v->name, "-") != 0;
	cells_of(v, 1, &c);
	table_cols_widen(&cols, c.s, NULL);
}

static void print_table(void)
{
	int width = term_width(), colour = use_colour();
	struct cells c;

	cols.ncol = named ? cols.ncol : cols.ncol - 1;
	cells_of(NULL, named, &c);
	table_cols_widen(&cols, c.s, NULL);
	out_keep = colour;
	/* Room for a chunk and the line that ends it: flushed as they
	 * come, the lines never grow the buffer (but one over OUT_CHUNK). */
	out_room(2 * OUT_CHUNK);
	for (size_t i = 0; i <= nrows; i++) {
		if (i)
			cells_of(rows[i - 1], named, &c);
		if (table_cols_line(&cols, c.s, NULL, width, &out) < 0)
			die(EX_OSERR_, "%s", strerror(ENOMEM));
		if (out.len >= OUT_CHUNK)
			out_flush();
	}
	if (colour) {
		print_coloured(out.s, out.len);
		out.len = 0;
		out_keep = 0;
	}
	out_flush();
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
		case OPT_STATE:
			want_states = parse_states(optarg);
			break;
		case OPT_NODE:
			want_node = optarg;
			break;
		case OPT_NAME:
			want_name = optarg;
			break;
		case OPT_SINCE:
			if (when_parse(optarg, now_ms(), &want_since) < 0)
				usage_error(usage, "--since: '%s' is not a time (2026-12-01T18:00:00Z, "
					    "2026-12-01, or an age: 90m, 12h, 7d)", optarg);
			break;
		case OPT_USER:
			parse_users(optarg);
			break;
		case OPT_MINE:
			if (!want_me && !(want_me = lab_user_name(getuid())))
				die(EX_OSERR_, "%s", strerror(ENOMEM));
			break;
		default:
			usage_error(usage, "unknown option");
		}
	}
	for (int i = optind; i < argc; i++)
		(void)arg_jobid(argv[i]);       /* usage errors before any output */
	tool_config(&c);
	owner_col = c.lab != NULL;
	cols_init();
	if (want_node && !config_node(&c, want_node))
		die(EX_DATAERR_, "unknown node '%s' (not in %s)", want_node,
		    c.path ? c.path : "the default config");
	/* A finished state asked for, or --since: done/ is read. */
	if ((want_states & ~(1u << JS_QUEUED | 1u << JS_RUNNING | 1u << JS_PAUSING | 1u << JS_PAUSED)) ||
	    want_since >= 0)
		show_all = 1;
	now = now_ms();
	have_spool = tool_spool(&c, &sp, 0);
	if (optind < argc) {
		missing = list_ids(&sp, have_spool, argv + optind, argc - optind, &nmissing);
	} else if (have_spool) {
		struct cb_err err = { 0 };

		rd.all = show_all;
		rd.with_json = json_out;
		rd.job = read_job;
		rd.warn = read_warn;
		if (status_read(&sp, &rd, &err) < 0)
			die_err(&err);
	}
	if (optind == argc && nrows > 1)
		sort_rows();
	if (have_spool)
		load_nodes(&sp, &c);

	if (json_out) {
		print_json();
	} else {
		print_table();
		print_nodes();
	}
	if (!json_out && rd.foreign)
		printf("%zu more submission%s in %s/new wait%s for the daemon to give %s a job ID\n",
		       rd.foreign, rd.foreign == 1 ? "" : "s", sp.path, rd.foreign == 1 ? "s" : "",
		       rd.foreign == 1 ? "it" : "them");
	finish_stdout();
	for (size_t i = 0; i < nrows; i++)
		cJSON_free(rows[i]->own[4]);
	free(rows);
	out_free();
	arena_free();
	status_read_free(&rd);
	node_status_free(nodes, nnodes);
	for (size_t i = 0; i < nwant_users; i++)
		free(want_users[i]);
	free(want_users);
	free(want_me);
	if (have_spool)
		spool_close(&sp);
	config_free(&c);
	if (nmissing)
		die(EX_NOINPUT_, "no such job%s%s", nmissing > 1 ? "s" : "", missing);
	free(missing);
	return rd.ex;
}
