/*
 * nodestat.c - SPOOL/nodes/NAME.json: what the daemon last saw of each
 * node (reachable or not, why, since when), which status shows.
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

int spool_node_put(struct spool *sp, const struct node_status *ns, struct cb_err *err)
{
	cJSON *o = cJSON_CreateObject();
	char *text = NULL, *name = xasprintf("%s.json", ns->name), *since = rfc3339(ns->since);
	int r = -1;

	if (!o || !name || !since || !cJSON_AddStringToObject(o, "name", ns->name) ||
	    !cJSON_AddBoolToObject(o, "reachable", ns->reachable) ||
	    !(ns->error ? cJSON_AddStringToObject(o, "error", ns->error)
			: cJSON_AddNullToObject(o, "error")) ||
	    !cJSON_AddStringToObject(o, "since", since) ||
	    !cJSON_AddNumberToObject(o, "since_ms", (double)ns->since) ||
	    !(text = cJSON_Print(o))) {
		cb_err_sys(err, EX_OSERR_, "node %s", ns->name);
		goto out;
	}
	r = spool_write(sp, SD_NODES, name, text, err);
out:
	cJSON_Delete(o);
	cJSON_free(text);
	free(name);
	free(since);
	return r;
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

		if (read_capped(sp->dir[SD_NODES], names[i], 65536, &buf, &len) < 0)
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
			if (cJSON_IsNumber(x = cJSON_GetObjectItem(o, "since_ms")))
				v[k].since = (long long)x->valuedouble;
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

void node_status_free(struct node_status *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].error);
	}
	free(v);
}
