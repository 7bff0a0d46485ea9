/*
 * gpus.c - a node's cards as `cardbaton-worker gpus` reports them
 * (gpus_parse, fuzzed by tests/fuzz/fuzz_wire.c), the scheduling
 * rule's idle and eligible (SPEC section 7), and the query itself
 * (node_gpus).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "link.h"

void gpus_free(struct gpu_info *g, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(g[i].uuid);
		free(g[i].name);
		free(g[i].lease);
		for (size_t s = 0; s < g[i].nshares; s++)
			free(g[i].shares[s]);
		free(g[i].shares);
		for (size_t s = 0; s < g[i].naccounts; s++)
			free(g[i].accounts[s]);
		free(g[i].accounts);
		for (size_t s = 0; s < g[i].nproc_accounts; s++)
			free(g[i].proc_accounts[s]);
		free(g[i].proc_accounts);
	}
	free(g);
}

/* Every value of KEY in W (but empty ones when SKIP_EMPTY) appended to
 * *V[0..*N).  0, or -1 (out of memory). */
static int append_all(const struct wire_rec *w, const char *key, int skip_empty, char ***v, size_t *n)
{
	for (size_t i = 0; i < w->n; i++) {
		char **nv;

		if (strcmp(w->f[i].key, key) || (skip_empty && !*w->f[i].val))
			continue;
		if (!(nv = realloc(*v, (*n + 1) * sizeof *nv)))
			return -1;
		*v = nv;
		if (!(nv[*n] = strdup(w->f[i].val)))
			return -1;
		(*n)++;
	}
	return 0;
}

static int gpu_from_rec(const struct wire_rec *w, struct gpu_info *g)
{
	const char *uuid = wire_get(w, "uuid"), *name = wire_get(w, "name");
	const char *lease = wire_get(w, "lease");
	long long idx;

	memset(g, 0, sizeof *g);
	if (wire_get_ll(w, "index", &idx) < 0 || idx < 0 || idx > GPU_INDEX_MAX || !uuid ||
	    wire_get_ll(w, "processes", &g->procs) < 0) {
		errno = EINVAL;
		return -1;
	}
	/* Memory or utilisation the driver does not report is empty: -1,
	 * and such a card is never idle. */
	if (wire_get_ll(w, "memory_used_mib", &g->mem_used) < 0)
		g->mem_used = -1;
	if (wire_get_ll(w, "memory_total_mib", &g->mem_total) < 0)
		g->mem_total = -1;
	if (wire_get_ll(w, "utilization", &g->util) < 0)
		g->util = -1;
	g->index = (int)idx;
	if (!(g->uuid = strdup(uuid)) || !(g->name = strdup(name ? name : "")) ||
	    append_all(w, "lease_account", 0, &g->accounts, &g->naccounts) < 0 ||
	    append_all(w, "process_account", 1, &g->proc_accounts, &g->nproc_accounts) < 0)
		return -1;
	if (!(wire_get(w, "shared") && !strcmp(wire_get(w, "shared"), "1")))
		return lease && *lease && !(g->lease = strdup(lease)) ? -1 : 0;
	/* Held shared: every `lease` is a sharer. */
	return append_all(w, "lease", 1, &g->shares, &g->nshares);
}

int gpus_parse(const char *out, size_t len, struct gpu_info **gp, size_t *np)
{
	struct gpu_info *g = NULL;
	size_t n = 0, off = 0;

	*gp = NULL;
	*np = 0;
	while (off < len) {
		struct wire_rec w = { 0 };
		const char *why;
		long used = wire_parse(out + off, len - off, &w, &why);
		struct gpu_info *ng;

		if (used <= 0 || wire_get(&w, "error") || !(ng = realloc(g, (n + 1) * sizeof *g))) {
			wire_free(&w);
			gpus_free(g, n);
			errno = used < 0 && errno == ENOMEM ? ENOMEM : EINVAL;
			return -1;
		}
		g = ng;
		if (gpu_from_rec(&w, &g[n]) < 0) {
			int saved = errno;

			wire_free(&w);
			gpus_free(g, n + 1);
			errno = saved;
			return -1;
		}
		n++;
		off += (size_t)used;
		wire_free(&w);
	}
	*gp = g;
	*np = n;
	return 0;
}

int gpu_idle(const struct gpu_info *g, long long idle_mib)
{
	return g->mem_used >= 0 && g->mem_used <= idle_mib && g->procs == 0 && !g->lease &&
	       !g->nshares;
}

int gpu_eligible(const struct node_conf *nc, int index)
{
	if (!nc->has_gpus)
		return 1;
	for (size_t i = 0; i < nc->ngpus; i++)
		if (nc->gpus[i] == index)
			return 1;
	return 0;
}

/* First line of TEXT, trimmed, as a malloc'd string. */
static char *first_line(const char *text)
{
	size_t n = strcspn(text, "\n");

	while (n && (text[n - 1] == '\r' || text[n - 1] == ' '))
		n--;
	return strndup(text, n);
}

int node_gpus(const struct config *c, const struct node_conf *nc,
	      struct gpu_info **g, size_t *n, struct cb_err *err)
{
	static const char *const args[] = { "gpus", NULL };
	struct node_reply r;
	int ret = -1;

	if (node_run(c, nc, args, NULL, 0, NODE_QUERY_MS, &r) < 0)
		return cb_err_sys(err, EX_UNAVAILABLE_, "%s", nc->name);
	if (r.status == 0 && gpus_parse(r.out, r.outlen, g, n) == 0) {
		ret = 0;
	} else {
		/* The worker's own words when it has any: an `error` record,
		 * else its stderr, else the exit status. */
		struct wire_rec w = { 0 };
		const char *why, *e = NULL;
		char *line = NULL;

		if (wire_parse(r.out, r.outlen, &w, &why) > 0)
			e = wire_get(&w, "error");
		if (!e && *r.err)
			e = line = first_line(r.err);
		if (e && *e)
			cb_err_set(err, EX_UNAVAILABLE_, "%s: %s", nc->name, e);
		else if (r.status == 0)
			cb_err_set(err, EX_UNAVAILABLE_, "%s: malformed reply from cardbaton-worker gpus", nc->name);
		else
			cb_err_set(err, EX_UNAVAILABLE_, "%s: cardbaton-worker gpus exited %d", nc->name, r.status);
		free(line);
		wire_free(&w);
	}
	node_reply_free(&r);
	return ret;
}
