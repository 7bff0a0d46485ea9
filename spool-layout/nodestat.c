/*
 * nodestat.c - SPOOL/nodes/NAME.json: what the daemon last saw of each
 * node (reachable or not, why, since when, its cards at the last GPU
 * query), which status, top and metrics show.  A view, not a record:
 * replaced atomically, never synced (LAYOUT.md §1).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "drain.h"
#include "nodestat.h"

cJSON *json_add_reading(cJSON *o, const char *key, long long v)
{
	return v < 0 ? cJSON_AddNullToObject(o, key) : cJSON_AddNumberToObject(o, key, (double)v);
}

static cJSON *card_json(const struct node_card *c)
{
	cJSON *o = cJSON_CreateObject(), *sh = NULL;
	int ok = o && cJSON_AddNumberToObject(o, "index", c->index) &&
		 cJSON_AddStringToObject(o, "uuid", c->uuid ? c->uuid : "") &&
		 cJSON_AddStringToObject(o, "name", c->name ? c->name : "") &&
		 json_add_reading(o, "memory_used_mib", c->mem_used) &&
		 json_add_reading(o, "memory_total_mib", c->mem_total) &&
		 json_add_reading(o, "utilization", c->util) && json_add_reading(o, "processes", c->procs) &&
		 cJSON_AddBoolToObject(o, "idle", c->idle) &&
		 (c->lease ? cJSON_AddStringToObject(o, "lease", c->lease)
			   : cJSON_AddNullToObject(o, "lease")) &&
		 (c->job ? cJSON_AddNumberToObject(o, "job", (double)c->job)
			 : cJSON_AddNullToObject(o, "job")) &&
		 (sh = cJSON_AddArrayToObject(o, "shares"));

	for (size_t i = 0; ok && i < c->nshares; i++) {
		cJSON *n = cJSON_CreateNumber((double)c->shares[i]);

		ok = n && cJSON_AddItemToArray(sh, n);
	}
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

char *node_status_text(const struct node_status *ns)
{
	cJSON *o = cJSON_CreateObject(), *cards = NULL;
	char *text = NULL, *since = rfc3339(ns->since), *at = ns->cards_at ? rfc3339(ns->cards_at) : NULL;
	int ok = o && since && (!ns->cards_at || at) && cJSON_AddStringToObject(o, "name", ns->name) &&
		 cJSON_AddBoolToObject(o, "reachable", ns->reachable) &&
		 (ns->error ? cJSON_AddStringToObject(o, "error", ns->error)
			    : cJSON_AddNullToObject(o, "error")) &&
		 cJSON_AddStringToObject(o, "since", since) &&
		 cJSON_AddNumberToObject(o, "since_ms", (double)ns->since) &&
		 (at ? cJSON_AddStringToObject(o, "gpus_at", at) : cJSON_AddNullToObject(o, "gpus_at")) &&
		 cJSON_AddNumberToObject(o, "gpus_at_ms", (double)ns->cards_at) &&
		 (cards = cJSON_AddArrayToObject(o, "gpus"));
	cJSON *refused = ok ? cJSON_AddArrayToObject(o, "refused") : NULL;

	ok = ok && refused;
	for (size_t i = 0; ok && i < ns->nrefused; i++) {
		cJSON *r = cJSON_CreateString(ns->refused[i]);

		ok = r && cJSON_AddItemToArray(refused, r);
	}

	cJSON *tr = ok ? cJSON_AddArrayToObject(o, "transfers") : NULL;

	ok = ok && tr;
	for (size_t i = 0; ok && i < ns->ntransfers; i++) {
		const struct node_transfer *t = &ns->transfers[i];
		cJSON *x = cJSON_CreateObject();

		ok = x && cJSON_AddItemToArray(tr, x) && cJSON_AddNumberToObject(x, "job", (double)t->job) &&
		     cJSON_AddStringToObject(x, "from", t->from) &&
		     cJSON_AddNumberToObject(x, "bytes_done", (double)t->done) &&
		     (t->total < 0 ? cJSON_AddNullToObject(x, "bytes_total") != NULL
				   : cJSON_AddNumberToObject(x, "bytes_total", (double)t->total) != NULL);
	}
	for (size_t i = 0; ok && i < ns->ncards; i++) {
		cJSON *c = card_json(&ns->cards[i]);

		ok = c && cJSON_AddItemToArray(cards, c);
	}
	if (ok)
		text = cJSON_Print(o);
	cJSON_Delete(o);
	free(since);
	free(at);
	return text;
}

int spool_node_put(struct spool *sp, const char *node, const char *text, struct cb_err *err)
{
	char *name = xasprintf("%s.json", node);
	int r;

	if (!name)
		return cb_err_sys(err, EX_OSERR_, "node %s", node);
	r = spool_write_view(sp, SD_NODES, name, text, err);
	free(name);
	return r;
}

/* A number that fits a long long (and is whole), else DEF. */
static long long num(const cJSON *o, const char *key, long long def)
{
	const cJSON *x = cJSON_GetObjectItem(o, key);

	if (!cJSON_IsNumber(x) || !(x->valuedouble >= -1 && x->valuedouble < 9.2e18) ||
	    x->valuedouble != (double)(long long)x->valuedouble)
		return def;
	return (long long)x->valuedouble;
}

static char *str(const cJSON *o, const char *key)
{
	const cJSON *x = cJSON_GetObjectItem(o, key);

	return cJSON_IsString(x) ? strdup(x->valuestring) : NULL;
}

/* NS's refusals from the "refused" array of O (strings only). */
static void refused_read(const cJSON *o, struct node_status *ns)
{
	const cJSON *v = cJSON_GetObjectItem(o, "refused"), *x;
	int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;

	if (n <= 0 || !(ns->refused = calloc((size_t)n, sizeof *ns->refused)))
		return;
	cJSON_ArrayForEach(x, v)
		if (cJSON_IsString(x) && (ns->refused[ns->nrefused] = strdup(x->valuestring)))
			ns->nrefused++;
}

/* NS's transfers from the "transfers" array of O; what is not one is
 * left out. */
static void transfers_read(const cJSON *o, struct node_status *ns)
{
	const cJSON *v = cJSON_GetObjectItem(o, "transfers"), *x;
	int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;

	if (n <= 0 || !(ns->transfers = calloc((size_t)n, sizeof *ns->transfers)))
		return;
	cJSON_ArrayForEach(x, v) {
		struct node_transfer *t = &ns->transfers[ns->ntransfers];

		if (!cJSON_IsObject(x) || (t->job = num(x, "job", 0)) < 1 ||
		    (t->done = num(x, "bytes_done", -1)) < 0 || !(t->from = str(x, "from")))
			continue;
		t->total = num(x, "bytes_total", -1);
		ns->ntransfers++;
	}
}

/* NS's cards from the "gpus" array of O; what is not a card is left out. */
static void cards_read(const cJSON *o, struct node_status *ns)
{
	const cJSON *v = cJSON_GetObjectItem(o, "gpus"), *x;
	int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;

	ns->cards_at = num(o, "gpus_at_ms", 0);
	if (n <= 0 || !(ns->cards = calloc((size_t)n, sizeof *ns->cards)))
		return;
	cJSON_ArrayForEach(x, v) {
		struct node_card *c = &ns->cards[ns->ncards];
		const cJSON *sh = cJSON_GetObjectItem(x, "shares"), *y;
		int nsh = cJSON_IsArray(sh) ? cJSON_GetArraySize(sh) : 0;

		if (!cJSON_IsObject(x) || (c->index = (int)num(x, "index", -1)) < 0 ||
		    num(x, "index", -1) > 1000000)
			continue;
		c->uuid = str(x, "uuid");
		c->name = str(x, "name");
		c->mem_used = num(x, "memory_used_mib", -1);
		c->mem_total = num(x, "memory_total_mib", -1);
		c->util = num(x, "utilization", -1);
		c->procs = num(x, "processes", -1);
		c->idle = cJSON_IsTrue(cJSON_GetObjectItem(x, "idle"));
		c->lease = str(x, "lease");
		c->job = num(x, "job", 0);
		if (nsh > 0 && (c->shares = calloc((size_t)nsh, sizeof *c->shares)))
			cJSON_ArrayForEach(y, sh)
				if (cJSON_IsNumber(y) && y->valuedouble >= 1 && y->valuedouble < 1e10)
					c->shares[c->nshares++] = (long long)y->valuedouble;
		ns->ncards++;
	}
}

int spool_node_list(struct spool *sp, struct node_status **vp, size_t *np)
{
	char **names;
	size_t n, k = 0;
	struct node_status *v;

	*vp = NULL;
	*np = 0;
	if (spool_list(sp, SD_NODES, &names, &n) < 0)
		return -1;
	if (!(v = calloc(n + 1, sizeof *v))) {
		spool_list_free(names, n);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct cb_err err = { 0 };
		char *buf;
		size_t len;
		cJSON *o, *x;
		int ck;

		if (read_capped(sp->dir[SD_NODES], names[i], NODE_FILE_MAX, &buf, &len) < 0)
			continue;
		o = cJSON_ParseWithLength(buf, len);
		free(buf);
		if (!o)
			continue;
		if (cJSON_IsString(x = cJSON_GetObjectItem(o, "name")) &&
		    (v[k].name = strdup(x->valuestring))) {
			v[k].reachable = cJSON_IsTrue(cJSON_GetObjectItem(o, "reachable"));
			if (cJSON_IsString(x = cJSON_GetObjectItem(o, "error")))
				v[k].error = strdup(x->valuestring);
			v[k].since = num(o, "since_ms", 0);
			cards_read(o, &v[k]);
			refused_read(o, &v[k]);
			transfers_read(o, &v[k]);
			v[k].drained = spool_drain_get(sp, v[k].name, &ck, &err) == 1;
			cb_err_free(&err);
			k++;
		}
		cJSON_Delete(o);
	}
	spool_list_free(names, n);
	*vp = v;
	*np = k;
	return 0;
}

void node_status_clear(struct node_status *ns)
{
	free(ns->name);
	free(ns->error);
	for (size_t c = 0; c < ns->ncards; c++) {
		free(ns->cards[c].uuid);
		free(ns->cards[c].name);
		free(ns->cards[c].lease);
		free(ns->cards[c].shares);
	}
	free(ns->cards);
	for (size_t r = 0; r < ns->nrefused; r++)
		free(ns->refused[r]);
	free(ns->refused);
	for (size_t t = 0; t < ns->ntransfers; t++)
		free(ns->transfers[t].from);
	free(ns->transfers);
	memset(ns, 0, sizeof *ns);
}

void node_status_free(struct node_status *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		node_status_clear(&v[i]);
	free(v);
}
