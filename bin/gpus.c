/*
 * cardbaton-gpus - every configured node's GPUs: memory, utilisation,
 * compute processes, lease holder, idle or busy.
 *
 * Design: nodes are asked in parallel, one child process per node,
 * each calling node_gpus (which has its own deadline) and writing the
 * answer back through a pipe in the worker's record format: a header
 * record "status ok" or "status error" + "error WHY", then one record
 * per GPU.  The parent waits for all of them with one overall deadline
 * a little beyond NODE_QUERY_MS, so one slow or partitioned node
 * delays the answer by at most that and never hides the others.  An
 * unreachable node is shown as such; the tool fails (69) only when no
 * node answered.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static const char usage[] = "cardbaton-gpus [--config PATH] [--node N] [--json]";

enum { OPT_NODE = OPT_TOOL_FIRST, OPT_JSON };

static const struct option longopts[] = {
	COMMON_LONGOPTS,
	{ "node", required_argument, NULL, OPT_NODE },
	{ "json", no_argument, NULL, OPT_JSON },
	{ NULL, 0, NULL, 0 },
};

#define PARENT_DEADLINE_MS (NODE_QUERY_MS + 2000)
#define ANSWER_MAX (16u << 20)

struct ask {
	const struct node_conf *nc;
	pid_t pid;
	int fd;
	struct sbuf buf;
	struct gpu_info *g;
	size_t n;
	char *error;            /* NULL when the node answered */
};

/* In the child: ask the node, write the answer to FD, _exit. */
static _Noreturn void child(const struct config *c, const struct node_conf *nc, int fd)
{
	struct cb_err err = { 0 };
	struct wire_rec h = { 0 };
	struct gpu_info *g;
	size_t n;
	int ok = node_gpus(c, nc, &g, &n, &err) == 0;

	if (wire_add(&h, "status", ok ? "ok" : "error") < 0 ||
	    (!ok && wire_add(&h, "error", err.msg ? err.msg : strerror(ENOMEM)) < 0) ||
	    wire_write_fd(fd, &h) < 0)
		_exit(1);
	for (size_t i = 0; ok && i < n; i++) {
		struct wire_rec r = { 0 };

		if (wire_addf(&r, "index", "%d", g[i].index) < 0 ||
		    wire_add(&r, "uuid", g[i].uuid) < 0 || wire_add(&r, "name", g[i].name) < 0 ||
		    wire_addf(&r, "memory_used_mib", "%lld", g[i].mem_used) < 0 ||
		    wire_addf(&r, "memory_total_mib", "%lld", g[i].mem_total) < 0 ||
		    wire_addf(&r, "utilization", "%lld", g[i].util) < 0 ||
		    wire_addf(&r, "processes", "%lld", g[i].procs) < 0 ||
		    wire_add(&r, "lease", g[i].lease ? g[i].lease : "") < 0 ||
		    (g[i].nshares && wire_add(&r, "shared", "1") < 0))
			_exit(1);
		for (size_t s = 0; s < g[i].nshares; s++)
			if (wire_add(&r, "lease", g[i].shares[s]) < 0)
				_exit(1);
		for (size_t s = 0; s < g[i].naccounts; s++)
			if (wire_add(&r, "lease_account", g[i].accounts[s]) < 0)
				_exit(1);
		for (size_t s = 0; s < g[i].nproc_accounts; s++)
			if (wire_add(&r, "process_account", g[i].proc_accounts[s]) < 0)
				_exit(1);
		if (wire_write_fd(fd, &r) < 0)
			_exit(1);
		wire_free(&r);
	}
	_exit(0);
}

static void start(const struct config *c, struct ask *a)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0)
		die_sys(EX_OSERR_, "pipe");
	fflush(stdout);
	if ((a->pid = fork()) < 0)
		die_sys(EX_OSERR_, "fork");
	if (a->pid == 0) {
		close(p[0]);
		child(c, a->nc, p[1]);
	}
	close(p[1]);
	a->fd = p[0];
	if (sbuf_add(&a->buf, "", 0) < 0)
		die(EX_OSERR_, "%s", strerror(ENOMEM));
}

static void collect(struct ask *asks, size_t n)
{
	long long deadline = mono_ms() + PARENT_DEADLINE_MS;
	struct pollfd *p = calloc(n, sizeof *p);
	size_t open_fds = n;

	if (!p)
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	while (open_fds) {
		long long left = deadline - mono_ms();
		int r;

		if (left <= 0)
			break;
		for (size_t i = 0; i < n; i++) {
			p[i].fd = asks[i].fd;
			p[i].events = POLLIN;
			p[i].revents = 0;
		}
		r = poll(p, n, (int)(left > INT_MAX ? INT_MAX : left));
		if (r < 0 && errno != EINTR)
			die_sys(EX_OSERR_, "poll");
		for (size_t i = 0; r > 0 && i < n; i++) {
			char buf[65536];
			ssize_t got;

			if (asks[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			got = read(asks[i].fd, buf, sizeof buf);
			if (got < 0 && errno == EINTR)
				continue;
			if (got > 0 && asks[i].buf.len + (size_t)got <= ANSWER_MAX) {
				if (sbuf_add(&asks[i].buf, buf, (size_t)got) < 0)
					die(EX_OSERR_, "%s", strerror(ENOMEM));
				continue;
			}
			close(asks[i].fd);
			asks[i].fd = -1;
			open_fds--;
		}
	}
	free(p);
	for (size_t i = 0; i < n; i++) {
		int status;

		if (asks[i].fd >= 0) {
			close(asks[i].fd);
			asks[i].fd = -1;
			kill(asks[i].pid, SIGKILL);
			asks[i].error = must_asprintf("%s: no answer within %d s", asks[i].nc->name,
						      PARENT_DEADLINE_MS / 1000);
		}
		while (waitpid(asks[i].pid, &status, 0) < 0)
			if (errno != EINTR)
				die_sys(EX_OSERR_, "waitpid");
	}
}

/* Turn the child's bytes into A->g or A->error. */
static void parse_answer(struct ask *a)
{
	struct wire_rec h = { 0 };
	const char *why, *st;
	long used;

	if (a->error)
		return;
	used = wire_parse(a->buf.s, a->buf.len, &h, &why);
	st = used > 0 ? wire_get(&h, "status") : NULL;
	if (!st) {
		a->error = must_asprintf("%s: no answer", a->nc->name);
	} else if (strcmp(st, "ok")) {
		const char *e = wire_get(&h, "error");
		char *p = printable(e ? e : "error");

		if (!p)
			die(EX_OSERR_, "%s", strerror(ENOMEM));
		a->error = p;
	} else if (gpus_parse(a->buf.s + used, a->buf.len - (size_t)used, &a->g, &a->n) < 0) {
		a->error = must_asprintf("%s: malformed answer", a->nc->name);
	}
	wire_free(&h);
	sbuf_free(&a->buf);
}

/* The error without the "NODE: " that node_gpus puts in front. */
static const char *bare_error(const struct ask *a)
{
	size_t n = strlen(a->nc->name);

	if (!strncmp(a->error, a->nc->name, n) && !strncmp(a->error + n, ": ", 2))
		return a->error + n + 2;
	return a->error;
}

/* The lease holder as shown: the job ID when the attempt is from this
 * spool, else the attempt ID (another controller's job). */
static char *lease_text(const struct spool *sp, int have_spool, const char *lease)
{
	long long job = have_spool ? attempt_job(sp->id, lease) : 0;
	char *s;

	if (job)
		return must_asprintf("%lld", job);
	if (!(s = printable(lease)))
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	return s;
}

/* Card G's holders: the exclusive one, or every sharer. */
static size_t nholders(const struct gpu_info *g)
{
	return g->lease ? 1 : g->nshares;
}

/* Card G's holder S's account (a node with a lease_dir), or NULL. */
static const char *holder_account(const struct gpu_info *g, size_t s)
{
	return s < g->naccounts && *g->accounts[s] ? g->accounts[s] : NULL;
}

/* Card G's holders, as lease_text shows them (a cJSON array), or with
 * ACCOUNTS their accounts (null where unknown). */
static cJSON *leases_json(const struct spool *sp, int have_spool, const struct gpu_info *g,
			  int accounts)
{
	cJSON *a = cJSON_CreateArray();

	for (size_t s = 0; a && s < nholders(g); s++) {
		char *t = accounts ? NULL : lease_text(sp, have_spool, g->lease ? g->lease : g->shares[s]);
		const char *acct = holder_account(g, s);
		cJSON *x = !accounts ? cJSON_CreateString(t) : acct ? cJSON_CreateString(acct) : cJSON_CreateNull();

		free(t);
		if (!x || !cJSON_AddItemToArray(a, x)) {
			cJSON_Delete(x);
			cJSON_Delete(a);
			return NULL;
		}
	}
	return a;
}

/* Card G's processes for the table: "1", and on a card no one leases
 * the accounts the node named: "2 (carol,dave)". */
static char *procs_text(const struct gpu_info *g)
{
	struct sbuf b = { 0 };

	if (sbuf_addf(&b, "%lld", g->procs) < 0)
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	for (size_t s = 0; s < g->nproc_accounts; s++) {
		char *pa = printable(g->proc_accounts[s]);

		if (!pa || sbuf_addf(&b, "%s%s", s ? "," : " (", pa) < 0)
			die(EX_OSERR_, "%s", strerror(ENOMEM));
		free(pa);
	}
	if (g->nproc_accounts && sbuf_add(&b, ")", 1) < 0)
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	return b.s;
}

/* Card G's holders for the table: "7", "7,8" (shared), and each one's
 * account beside it where the node says: "7 (alice)". */
static char *holders_text(const struct spool *sp, int have_spool, const struct gpu_info *g)
{
	struct sbuf b = { 0 };

	for (size_t s = 0; s < nholders(g); s++) {
		char *t = lease_text(sp, have_spool, g->lease ? g->lease : g->shares[s]);
		const char *acct = holder_account(g, s);
		char *pa = acct ? printable(acct) : NULL;

		if ((acct && !pa) || sbuf_addf(&b, "%s%s%s%s%s", s ? "," : "", t, pa ? " (" : "",
					       pa ? pa : "", pa ? ")" : "") < 0)
			die(EX_OSERR_, "%s", strerror(ENOMEM));
		free(pa);
		free(t);
	}
	return b.s;
}

/* The first holder of card G, or NULL. */
static const char *first_holder(const struct gpu_info *g)
{
	return g->lease ? g->lease : g->nshares ? g->shares[0] : NULL;
}

/* What the daemon last wrote of each node (nodes/NAME.json): the
 * accounts that refuse the lab's key there (run_as: owner). */
static struct node_status *views;
static size_t nviews;

static const struct node_status *view_of(const char *name)
{
	for (size_t i = 0; i < nviews; i++)
		if (!strcmp(views[i].name, name))
			return &views[i];
	return NULL;
}

/* NAME's refusals as a JSON array (none: empty). */
static cJSON *refused_json(const char *name)
{
	const struct node_status *v = view_of(name);
	cJSON *a = cJSON_CreateArray();

	for (size_t r = 0; a && v && r < v->nrefused; r++)
		if (!cJSON_AddItemToArray(a, cJSON_CreateString(v->refused[r])))
			die(EX_OSERR_, "%s", strerror(ENOMEM));
	return a;
}

/* ... one line each, after the node's. */
static void print_refused(const char *name)
{
	const struct node_status *v = view_of(name);

	for (size_t r = 0; v && r < v->nrefused; r++) {
		char *why = printable(v->refused[r]);

		if (!why)
			die(EX_OSERR_, "%s", strerror(ENOMEM));
		printf("  %s\n", why);
		free(why);
	}
}

/* Is node NAME drained (drain.h)?  Not when there is no spool yet. */
static int drained(const struct spool *sp, int have_spool, const char *name)
{
	struct cb_err err = { 0 };
	int ck, r = have_spool ? spool_drain_get((struct spool *)sp, name, &ck, &err) : 0;

	cb_err_free(&err);
	return r == 1;
}

static void print_json(const struct ask *asks, size_t n, const struct spool *sp, int have_spool)
{
	cJSON *root = cJSON_CreateObject(), *nodes;
	char *text;

	if (!root || !(nodes = cJSON_AddArrayToObject(root, "nodes")))
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	for (size_t i = 0; i < n; i++) {
		const struct ask *a = &asks[i];
		cJSON *o = cJSON_CreateObject(), *gs;

		if (!o || !cJSON_AddItemToArray(nodes, o) ||
		    !cJSON_AddStringToObject(o, "name", a->nc->name) ||
		    !cJSON_AddBoolToObject(o, "reachable", !a->error) ||
		    !(a->error ? cJSON_AddStringToObject(o, "error", bare_error(a))
			       : cJSON_AddNullToObject(o, "error")) ||
		    !cJSON_AddBoolToObject(o, "drained", drained(sp, have_spool, a->nc->name)) ||
		    !cJSON_AddItemToObject(o, "refused", refused_json(a->nc->name)) ||
		    !(gs = cJSON_AddArrayToObject(o, "gpus")))
			die(EX_OSERR_, "%s", strerror(ENOMEM));
		for (size_t k = 0; k < a->n; k++) {
			const struct gpu_info *g = &a->g[k];
			cJSON *x = cJSON_CreateObject(), *ls = leases_json(sp, have_spool, g, 0), *la, *pa;
			char *lease = first_holder(g) ? lease_text(sp, have_spool, first_holder(g)) : NULL;

			if (!x || !cJSON_AddItemToArray(gs, x) ||
			    !cJSON_AddNumberToObject(x, "index", g->index) ||
			    !cJSON_AddStringToObject(x, "uuid", g->uuid) ||
			    !cJSON_AddStringToObject(x, "name", g->name) ||
			    !json_add_reading(x, "memory_used_mib", g->mem_used) ||
			    !json_add_reading(x, "memory_total_mib", g->mem_total) ||
			    !json_add_reading(x, "utilization", g->util) ||
			    !cJSON_AddNumberToObject(x, "processes", (double)g->procs) ||
			    !(pa = cJSON_AddArrayToObject(x, "process_accounts")) ||
			    !(lease ? cJSON_AddStringToObject(x, "lease", lease)
				    : cJSON_AddNullToObject(x, "lease")) ||
			    !ls || !cJSON_AddItemToObject(x, "leases", ls) ||
			    (g->naccounts && (!(la = leases_json(sp, have_spool, g, 1)) ||
					      !cJSON_AddItemToObject(x, "lease_accounts", la))) ||
			    !cJSON_AddBoolToObject(x, "eligible", gpu_eligible(a->nc, g->index)) ||
			    !cJSON_AddBoolToObject(x, "idle", gpu_idle(g, a->nc->idle_mib) &&
							       gpu_eligible(a->nc, g->index)))
				die(EX_OSERR_, "%s", strerror(ENOMEM));
			for (size_t s = 0; s < g->nproc_accounts; s++)
				if (!cJSON_AddItemToArray(pa, cJSON_CreateString(g->proc_accounts[s])))
					die(EX_OSERR_, "%s", strerror(ENOMEM));
			free(lease);
		}
	}
	if (!(text = cJSON_PrintUnformatted(root)))
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	puts(text);
	cJSON_free(text);
	cJSON_Delete(root);
}

/* Colour only on a terminal, and never when NO_COLOR is set and not
 * empty (https://no-color.org). */
static int use_colour(void)
{
	const char *nc = getenv("NO_COLOR");

	return isatty(STDOUT_FILENO) && !(nc && *nc);
}

#define SGR_RED "\033[31m"
#define SGR_GREEN "\033[32m"
#define SGR_YELLOW "\033[33m"
#define SGR_RESET "\033[0m"

/* A bar of BAR_CELLS '#' and '.' for V of TOTAL (plain ASCII): any use at
 * all shows one '#', so only an unused card has an empty bar. */
#define BAR_CELLS 8
static void bar(char *out, long long v, long long total)
{
	long long k;

	if (v < 0 || total <= 0) {
		memset(out, '?', BAR_CELLS);
	} else {
		if (v > total)
			v = total;
		k = (v * BAR_CELLS + total - 1) / total;
		memset(out, '#', (size_t)k);
		memset(out + k, '.', (size_t)(BAR_CELLS - k));
	}
	out[BAR_CELLS] = 0;
}

/* Copy the table in TEXT to stdout, the STATE word that ends a row in
 * colour: idle green, busy yellow. */
static void print_coloured(const char *text, size_t len)
{
	const char *p = text, *end = text + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		const char *colour = NULL;
		size_t w = 0;

		if (n >= 6 && !memcmp(p + n - 6, "  idle", 6))
			colour = SGR_GREEN, w = 4;
		else if (n >= 6 && !memcmp(p + n - 6, "  busy", 6))
			colour = SGR_YELLOW, w = 4;
		if (colour)
			printf("%.*s%s%.*s%s", (int)(n - w), p, colour, (int)w, p + n - w, SGR_RESET);
		else
			fwrite(p, 1, n, stdout);
		if (nl)
			putchar('\n');
		p += n + (nl ? 1 : 0);
	}
}

static void print_human(const struct ask *asks, size_t n, const struct spool *sp, int have_spool)
{
	static const char *const head[] = {
		"IDX", "UUID", "NAME", "MEM USE  GPU USE", "MEMORY", "UTIL", "PROCS", "LEASE", "STATE",
	};
	int width = term_width();
	int colour = use_colour();

	for (size_t i = 0; i < n; i++) {
		const struct ask *a = &asks[i];
		struct table t;
		size_t idle = 0;

		if (i)
			putchar('\n');
		if (a->error) {
			printf("%s: %sunreachable%s: %s\n", a->nc->name, colour ? SGR_RED : "",
			       colour ? SGR_RESET : "", bare_error(a));
			print_refused(a->nc->name);
			continue;
		}
		for (size_t k = 0; k < a->n; k++)
			idle += gpu_idle(&a->g[k], a->nc->idle_mib) && gpu_eligible(a->nc, a->g[k].index);
		printf("%s: %zu GPU%s, %zu idle%s\n", a->nc->name, a->n, a->n == 1 ? "" : "s", idle,
		       drained(sp, have_spool, a->nc->name) ? "; drained" : "");
		print_refused(a->nc->name);
		if (!a->n)
			continue;
		/* IDX, MEMORY, UTIL, PROCS right-aligned. */
		table_init(&t, 9, 1u << 0 | 1u << 4 | 1u << 5 | 1u << 6);
		table_row(&t, head);
		for (size_t k = 0; k < a->n; k++) {
			const struct gpu_info *g = &a->g[k];
			char *cells[9], mbar[BAR_CELLS + 1], ubar[BAR_CELLS + 1];

			bar(mbar, g->mem_used, g->mem_total);
			bar(ubar, g->util, 100);
			cells[0] = must_asprintf("%d", g->index);
			cells[1] = printable(g->uuid);
			cells[2] = printable(g->name);
			cells[3] = must_asprintf("%s %s", mbar, ubar);
			cells[4] = g->mem_used < 0 || g->mem_total < 0 ? strdup("? MiB") :
				   must_asprintf("%lld/%lld MiB", g->mem_used, g->mem_total);
			cells[5] = g->util < 0 ? strdup("?") : must_asprintf("%lld%%", g->util);
			cells[6] = procs_text(g);
			cells[7] = first_holder(g) ? holders_text(sp, have_spool, g) : strdup("-");
			cells[8] = strdup(!gpu_eligible(a->nc, g->index) ? "excluded" :
					  gpu_idle(g, a->nc->idle_mib) ? "idle" : "busy");
			for (int m = 0; m < 9; m++)
				if (!cells[m])
					die(EX_OSERR_, "%s", strerror(ENOMEM));
			table_row(&t, (const char *const *)cells);
			for (int m = 0; m < 9; m++)
				free(cells[m]);
		}
		if (colour) {
			char *text = NULL;
			size_t len = 0;
			FILE *mem = open_memstream(&text, &len);

			if (!mem)
				die(EX_OSERR_, "%s", strerror(errno));
			table_print(&t, mem, width);
			if (fclose(mem) != 0)
				die(EX_OSERR_, "%s", strerror(errno));
			print_coloured(text, len);
			free(text);
		} else {
			table_print(&t, stdout, width);
		}
		table_free(&t);
	}
}

int main(int argc, char **argv)
{
	struct config c;
	struct spool sp;
	struct ask *asks;
	const char *only = NULL;
	size_t n = 0, failed = 0;
	int ch, json = 0, have_spool;

	prog_init(argc, argv);
	while ((ch = tool_getopt(argc, argv, "", longopts, 0, usage)) != -1) {
		switch (ch) {
		case OPT_NODE:
			only = optarg;
			break;
		case OPT_JSON:
			json = 1;
			break;
		default:
			usage_error(usage, "unknown option");
		}
	}
	if (optind < argc)
		usage_error(usage, "unexpected argument '%s'", argv[optind]);
	tool_config(&c);
	if (only && !config_node(&c, only)) {
		char *p = printable(only);

		die(EX_DATAERR_, "unknown node '%s' (not in %s)", p ? p : "?",
		    c.path ? c.path : "the default config");
	}
	have_spool = tool_spool(&c, &sp, 0);
	if (have_spool && spool_node_list(&sp, &views, &nviews) < 0)
		views = NULL, nviews = 0;       /* none to show */
	if (!(asks = calloc(c.nnodes ? c.nnodes : 1, sizeof *asks)))
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	for (size_t i = 0; i < c.nnodes; i++) {
		if (only && strcmp(c.nodes[i].name, only))
			continue;
		asks[n].nc = &c.nodes[i];
		asks[n].fd = -1;
		start(&c, &asks[n]);
		n++;
	}
	collect(asks, n);
	for (size_t i = 0; i < n; i++) {
		parse_answer(&asks[i]);
		failed += asks[i].error != NULL;
	}
	if (json)
		print_json(asks, n, &sp, have_spool);
	else
		print_human(asks, n, &sp, have_spool);
	finish_stdout();
	if (n && failed == n) {
		if (n == 1)
			die(EX_UNAVAILABLE_, "%s: %s", asks[0].nc->name, bare_error(&asks[0]));
		die(EX_UNAVAILABLE_, "no node answered (%zu nodes)", n);
	}
	for (size_t i = 0; i < n; i++) {
		gpus_free(asks[i].g, asks[i].n);
		free(asks[i].error);
	}
	free(asks);
	node_status_free(views, nviews);
	if (have_spool)
		spool_close(&sp);
	config_free(&c);
	return 0;
}
