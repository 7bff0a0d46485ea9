/*
 * record.c - job records: the JSON files in queued/ running/ paused/
 * done/ (LAYOUT.md §6), and the `status --json` view of a job.
 *
 * Times are kept in memory as epoch milliseconds and written as RFC
 * 3339 text with a parallel "_ms" field, so that `cat` reads well and
 * nothing is lost on the way back.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "expand.h"
#include "names.h"
#include "record.h"

char *queued_reason(const struct job *j, long long now)
{
	const struct job_def *d = &j->def;
	char *t, *r;

	if (d->hold)
		return strdup("held");
	if (d->begin <= now && j->max_running)
		return xasprintf("waiting to be scheduled (at most %lld of array %lld at once)",
				 j->max_running, j->array_id);
	if (d->begin <= now)
		return strdup("waiting to be scheduled");
	if (!(t = rfc3339_ms(d->begin)))
		return NULL;
	r = xasprintf("begins at %s", t);
	free(t);
	return r;
}

static const char *const js_names[JS_N] = {
	"queued", "running", "pausing", "paused",
	"succeeded", "failed", "cancelled", "lost",
};

static const char *const as_names[AS_N] = {
	"launching", "running", "pausing", "paused",
	"succeeded", "failed", "cancelled", "lost", "aborted", "staged",
};

const char *job_state_name(enum job_state s)
{
	return (unsigned)s < JS_N ? js_names[s] : "?";
}

int job_state_parse(const char *s, enum job_state *out)
{
	for (int i = 0; i < JS_N; i++)
		if (!strcmp(s, js_names[i])) {
			*out = (enum job_state)i;
			return 0;
		}
	return -1;
}

int job_state_final(enum job_state s)
{
	return s == JS_SUCCEEDED || s == JS_FAILED || s == JS_CANCELLED || s == JS_LOST;
}

const char *att_state_name(enum att_state s)
{
	return (unsigned)s < AS_N ? as_names[s] : "?";
}

int att_state_parse(const char *s, enum att_state *out)
{
	for (int i = 0; i < AS_N; i++)
		if (!strcmp(s, as_names[i])) {
			*out = (enum att_state)i;
			return 0;
		}
	return -1;
}

/* ---- building JSON ---------------------------------------------------- */

/* Add KEY: string or null.  0 or -1. */
static int add_str(cJSON *o, const char *key, const char *s)
{
	return (s ? cJSON_AddStringToObject(o, key, s) : cJSON_AddNullToObject(o, key)) ? 0 : -1;
}

static int add_num(cJSON *o, const char *key, long long v)
{
	return cJSON_AddNumberToObject(o, key, (double)v) ? 0 : -1;
}

/* KEY: the RFC 3339 text of MS (to the second; to the ms when EXACT)
 * or null, and KEY_ms beside it WITH_MS. */
static int add_time_as(cJSON *o, const char *key, long long ms, int with_ms, int exact)
{
	char *t = NULL;
	int r;

	if (ms && !(t = exact ? rfc3339_ms(ms) : rfc3339(ms)))
		return -1;
	r = add_str(o, key, t);
	free(t);
	if (r == 0 && with_ms) {
		char *k = xasprintf("%s_ms", key);

		if (!k)
			return -1;
		r = ms ? add_num(o, k, ms) : (cJSON_AddNullToObject(o, k) ? 0 : -1);
		free(k);
	}
	return r;
}

static int add_time(cJSON *o, const char *key, long long ms, int with_ms)
{
	return add_time_as(o, key, ms, with_ms, 0);
}

static int add_ints(cJSON *o, const char *key, const int *v, size_t n)
{
	cJSON *a = cJSON_AddArrayToObject(o, key);

	if (!a)
		return -1;
	for (size_t i = 0; i < n; i++) {
		cJSON *x = cJSON_CreateNumber(v[i]);

		if (!x || !cJSON_AddItemToArray(a, x))
			return -1;
	}
	return 0;
}

static int add_lls(cJSON *o, const char *key, const long long *v, size_t n)
{
	cJSON *a = cJSON_AddArrayToObject(o, key);

	if (!a)
		return -1;
	for (size_t i = 0; i < n; i++) {
		cJSON *x = cJSON_CreateNumber((double)v[i]);

		if (!x || !cJSON_AddItemToArray(a, x))
			return -1;
	}
	return 0;
}

static int add_strs(cJSON *o, const char *key, char *const *v, size_t n)
{
	cJSON *a = cJSON_AddArrayToObject(o, key);

	if (!a)
		return -1;
	for (size_t i = 0; i < n; i++) {
		cJSON *x = cJSON_CreateString(v[i]);

		if (!x || !cJSON_AddItemToArray(a, x))
			return -1;
	}
	return 0;
}

static int add_exit(cJSON *o, int has, long long code)
{
	return has ? add_num(o, "exit_code", code) : (cJSON_AddNullToObject(o, "exit_code") ? 0 : -1);
}

static cJSON *attempt_json(const struct attempt *a)
{
	cJSON *o = cJSON_CreateObject();

	if (!o || add_num(o, "n", a->n) || add_str(o, "id", a->id) ||
	    add_str(o, "node", a->node) || add_ints(o, "gpus", a->gpus, a->ngpus) ||
	    add_strs(o, "gpu_uuids", a->uuids, a->nuuids) ||
	    add_str(o, "state", att_state_name(a->state)) ||
	    add_exit(o, a->has_exit, a->exit_code) || add_str(o, "reason", a->reason) ||
	    add_time(o, "started", a->started, 1) || add_time(o, "finished", a->finished, 1) ||
	    add_str(o, "log", a->log) || add_str(o, "checkpoint", a->checkpoint) ||
	    (a->slurm_job && add_str(o, "slurm_job", a->slurm_job)) ||
	    (a->host && add_str(o, "host", a->host)) ||
	    (a->nstaged_after && add_strs(o, "staged_after", a->staged_after, a->nstaged_after))) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* The command as an array: argv, or the string command as one element
 * after "sh", "-c" so that status always has an argv to show. */
static int add_command(cJSON *o, const struct job_def *d)
{
	if (d->argv)
		return add_strs(o, "command", d->argv, d->argc);
	if (d->shell) {
		char *v[3] = { "sh", "-c", d->shell };

		return add_strs(o, "command", v, 3);
	}
	return add_strs(o, "command", NULL, 0);
}

/* "array": {"id": FIRST, "index": I}, or null. */
static int add_array(cJSON *o, const struct job *j)
{
	cJSON *a;

	if (!j->array_id)
		return cJSON_AddNullToObject(o, "array") ? 0 : -1;
	if (!(a = cJSON_AddObjectToObject(o, "array")))
		return -1;
	return add_num(a, "id", j->array_id) || add_num(a, "index", j->array_index) ? -1 : 0;
}

/* Fields shared by the record and the status view. */
static int add_common(cJSON *o, const struct job *j)
{
	const struct attempt *a = job_last_attempt(j);
	char *id = xasprintf("%lld", j->id);
	int r;

	if (!id)
		return -1;
	r = add_str(o, "id", id);
	free(id);
	if (r || add_str(o, "name", j->def.name) || add_str(o, "state", job_state_name(j->state)) ||
	    add_str(o, "owner", j->owner) || add_num(o, "priority", j->priority))
		return -1;
	if (a && a->state != AS_ABORTED) {
		if (add_str(o, "node", a->node) || add_ints(o, "gpus", a->gpus, a->ngpus) ||
		    add_strs(o, "gpu_uuids", a->uuids, a->nuuids) ||
		    add_str(o, "slurm_job", a->slurm_job))
			return -1;
	} else if (add_str(o, "node", j->def.node) ||
		   add_ints(o, "gpus", j->def.gpus, j->def.ngpus) ||
		   add_strs(o, "gpu_uuids", NULL, 0) || add_str(o, "slurm_job", NULL)) {
		return -1;
	}
	return add_lls(o, "after", j->def.after, j->def.nafter) ||
	       add_lls(o, "after_any", j->def.after_any, j->def.nafter_any) ||
	       add_array(o, j) ? -1 : 0;
}

static int add_tail(cJSON *o, const struct job *j, int with_ms)
{
	const struct attempt *a = job_last_attempt(j);

	if (add_exit(o, a && a->has_exit, a ? a->exit_code : 0) ||
	    add_str(o, "reason", j->reason) || add_command(o, &j->def) ||
	    add_time(o, "submitted", j->submitted, with_ms) ||
	    add_time(o, "started", j->started, with_ms) ||
	    add_time(o, "finished", j->finished, with_ms) ||
	    /* To the ms: the job is not placed before it (its job file's). */
	    add_time_as(o, "begin", j->def.begin, with_ms, 1))
		return -1;
	return 0;
}

int job_staged(const struct job *j)
{
	const struct attempt *a = job_last_attempt(j);

	return j->state == JS_RUNNING && a && a->state == AS_STAGED;
}

enum job_state job_view_state(const struct job *j)
{
	return job_staged(j) ? JS_QUEUED : j->state;
}

cJSON *job_status_json(const struct job *j)
{
	cJSON *o = cJSON_CreateObject();
	size_t n = 0;

	for (size_t i = 0; i < j->natt; i++)
		if (j->att[i].state != AS_ABORTED && j->att[i].state != AS_STAGED)
			n++;
	int staged = job_staged(j);

	/* staged: its attempt waits on its node for its cards to free; it
	 * has not started, so it is shown queued (status_view_of). */
	/* transfer: null here, the last field; status fills it in while
	 * the job's checkpoint is being copied (nodes/: not the record's). */
	if (!o || add_common(o, j) || add_num(o, "attempts", (long long)n) || add_tail(o, j, 0) ||
	    !cJSON_AddBoolToObject(o, "staged", staged) || !cJSON_AddNullToObject(o, "transfer") ||
	    (staged && !cJSON_ReplaceItemInObject(o, "state", cJSON_CreateString("queued")))) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

char *job_to_json(const struct job *j)
{
	cJSON *o = cJSON_CreateObject(), *atts, *def;
	char *text = NULL, *out;

	if (!o)
		return NULL;
	if (add_common(o, j) || add_num(o, "rev", j->rev) || add_tail(o, j, 1) ||
	    add_time(o, "queued_at", j->queued_at, 1) ||
	    add_str(o, "checkpoint", j->checkpoint) ||
	    add_str(o, "checkpoint_node", j->checkpoint_node) ||
	    (j->nck_copies && add_strs(o, "checkpoint_copies", j->ck_copies, j->nck_copies)) ||
	    (j->max_running && add_num(o, "max_running", j->max_running)) ||
	    (j->owner && add_num(o, "owner_uid", j->owner_uid)))
		goto out;
	if (!(def = jobdef_to_json(&j->def)) || !cJSON_AddItemToObject(o, "job", def)) {
		cJSON_Delete(def);
		goto out;
	}
	if (!(atts = cJSON_AddArrayToObject(o, "attempts")))
		goto out;
	for (size_t i = 0; i < j->natt; i++) {
		cJSON *a = attempt_json(&j->att[i]);

		if (!a || !cJSON_AddItemToArray(atts, a)) {
			cJSON_Delete(a);
			goto out;
		}
	}
	text = cJSON_Print(o);
out:
	cJSON_Delete(o);
	if (!text) {
		errno = ENOMEM;
		return NULL;
	}
	out = xasprintf("%s\n", text);
	cJSON_free(text);
	return out;
}

/* ---- reading JSON ----------------------------------------------------- */

/* Strict getters: -1 when present with the wrong type. */
static int get_str(const cJSON *o, const char *key, char **out)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);

	*out = NULL;
	if (!x || cJSON_IsNull(x))
		return 0;
	if (!cJSON_IsString(x))
		return -1;
	return (*out = strdup(x->valuestring)) ? 0 : -1;
}

static int get_ll(const cJSON *o, const char *key, long long *out, int required)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);

	double d;

	*out = 0;
	if (!x || cJSON_IsNull(x))
		return required ? -1 : 0;
	if (!cJSON_IsNumber(x))
		return -1;
	/* An integer a double holds exactly, so that what is read is what
	 * was written, and is written back the same: cJSON prints a
	 * larger one to 15 digits when that is within a rounding error
	 * (found by tests/fuzz/fuzz_record).  In range before the cast,
	 * which is undefined outside it; NaN fails the first test. */
	d = x->valuedouble;
	if (d != d || d < -JSON_INT_MAX || d > JSON_INT_MAX || d != (double)(long long)d)
		return -1;
	*out = (long long)d;
	return 0;
}

/* A time in ms: 0 (none), or one rfc3339() writes and rfc3339_parse
 * reads back, 1970 to 9999.  A time outside it made the text beside
 * the number ("submitted" beside "submitted_ms") change on rewriting
 * (tests/fuzz/fuzz_record). */
static int get_time(const cJSON *o, const char *key, long long *out)
{
	return get_ll(o, key, out, 0) || *out < 0 || *out > TIME_MS_MAX ? -1 : 0;
}

static int get_ints(const cJSON *o, const char *key, int **v, size_t *n)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key), *x;
	size_t i = 0;

	*v = NULL;
	*n = 0;
	if (!a || cJSON_IsNull(a))
		return 0;
	if (!cJSON_IsArray(a))
		return -1;
	if (!(*v = calloc((size_t)cJSON_GetArraySize(a) + 1, sizeof **v)))
		return -1;
	cJSON_ArrayForEach(x, a) {
		if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble > GPU_INDEX_MAX ||
		    x->valuedouble != (double)x->valueint)
			return -1;
		(*v)[i++] = x->valueint;
		*n = i;
	}
	return 0;
}

static int get_strs(const cJSON *o, const char *key, char ***v, size_t *n)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key), *x;
	size_t i = 0;

	*v = NULL;
	*n = 0;
	if (!a || cJSON_IsNull(a))
		return 0;
	if (!cJSON_IsArray(a))
		return -1;
	if (!(*v = calloc((size_t)cJSON_GetArraySize(a) + 1, sizeof **v)))
		return -1;
	cJSON_ArrayForEach(x, a) {
		if (!cJSON_IsString(x) || !((*v)[i] = strdup(x->valuestring)))
			return -1;
		*n = ++i;
	}
	return 0;
}

/* An attempt ID names files on the node: only [0-9a-f-], 1 to 64 of
 * them (LAYOUT.md §2), whoever wrote the record. */
static int attempt_id_ok(const char *id)
{
	return id[0] && strlen(id) <= 64 && strspn(id, "0123456789abcdef-") == strlen(id);
}

static int attempt_from_json(const cJSON *o, struct attempt *a)
{
	const cJSON *ec = cJSON_GetObjectItemCaseSensitive(o, "exit_code");
	long long n;
	char *st = NULL;
	int r;

	if (!cJSON_IsObject(o) || get_ll(o, "n", &n, 1) || n < 0 || n > 1000000000)
		return -1;
	a->n = (int)n;
	if (get_str(o, "id", &a->id) || !a->id || !attempt_id_ok(a->id) || get_str(o, "node", &a->node) ||
	    get_ints(o, "gpus", &a->gpus, &a->ngpus) ||
	    get_strs(o, "gpu_uuids", &a->uuids, &a->nuuids) ||
	    get_str(o, "reason", &a->reason) || get_time(o, "started_ms", &a->started) ||
	    get_time(o, "finished_ms", &a->finished) || get_str(o, "log", &a->log) ||
	    get_str(o, "checkpoint", &a->checkpoint) || get_str(o, "slurm_job", &a->slurm_job) ||
	    get_str(o, "host", &a->host) || get_strs(o, "staged_after", &a->staged_after,
							  &a->nstaged_after) ||
	    get_str(o, "state", &st) || !st)
		return -1;
	r = att_state_parse(st, &a->state);
	free(st);
	if (r < 0)
		return -1;
	for (size_t i = 0; i < a->nstaged_after; i++)
		if (!attempt_id_ok(a->staged_after[i]))
			return -1;
	if (ec && !cJSON_IsNull(ec)) {
		if (get_ll(o, "exit_code", &a->exit_code, 1))
			return -1;
		a->has_exit = 1;
	}
	return 0;
}

/* "array", as add_array writes it (the index an array's, or a sweep's
 * member number). */
static int get_array(const cJSON *o, struct job *j)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "array");

	if (!a || cJSON_IsNull(a))
		return 0;
	if (!cJSON_IsObject(a) || get_ll(a, "id", &j->array_id, 1) ||
	    get_ll(a, "index", &j->array_index, 1) || j->array_id < 1 || j->array_id > SEQ_MAX ||
	    j->array_index < 0 || j->array_index > ARRAY_INDEX_MAX) {
		j->array_id = 0;
		return -1;
	}
	return 0;
}

int job_from_json(const char *buf, size_t len, struct job *j, struct cb_err *err)
{
	cJSON *o = cJSON_ParseWithLength(buf, len);
	const cJSON *atts, *x;
	char *id = NULL, *st = NULL;
	int ok = 0;

	memset(j, 0, sizeof *j);
	if (!o || !cJSON_IsObject(o))
		goto out;
	if (get_str(o, "id", &id) || !id || jobid_parse(id, &j->id) ||
	    get_ll(o, "rev", &j->rev, 1) || get_str(o, "state", &st) || !st ||
	    job_state_parse(st, &j->state) || get_str(o, "reason", &j->reason) ||
	    get_ll(o, "priority", &j->priority, 1) || j->priority < PRIO_MIN || j->priority > PRIO_MAX ||
	    get_time(o, "submitted_ms", &j->submitted) ||
	    get_time(o, "queued_at_ms", &j->queued_at) ||
	    get_time(o, "started_ms", &j->started) || get_time(o, "finished_ms", &j->finished) ||
	    get_str(o, "checkpoint", &j->checkpoint) ||
	    get_str(o, "checkpoint_node", &j->checkpoint_node) ||
	    get_strs(o, "checkpoint_copies", &j->ck_copies, &j->nck_copies) ||
	    get_array(o, j) || get_ll(o, "max_running", &j->max_running, 0) ||
	    j->max_running < 0 || j->max_running > JOB_MAX_MEMBERS ||
	    (j->max_running && !j->array_id) ||
	    get_str(o, "owner", &j->owner) || get_ll(o, "owner_uid", &j->owner_uid, !!j->owner) ||
	    j->owner_uid < 0 || j->owner_uid > UID_RECORD_MAX || (j->owner && !*j->owner))
		goto out;
	if (jobdef_from_json(cJSON_GetObjectItemCaseSensitive(o, "job"), &j->def) < 0)
		goto out;
	atts = cJSON_GetObjectItemCaseSensitive(o, "attempts");
	if (!cJSON_IsArray(atts))
		goto out;
	cJSON_ArrayForEach(x, atts) {
		struct attempt *a = job_new_attempt(j);

		if (!a || attempt_from_json(x, a) < 0)
			goto out;
	}
	ok = 1;
out:
	free(id);
	free(st);
	cJSON_Delete(o);
	if (!ok) {
		job_free(j);
		return cb_err_set(err, EX_DATAERR_, "not a valid job record");
	}
	return 0;
}

struct attempt *job_last_attempt(const struct job *j)
{
	return j->natt ? &j->att[j->natt - 1] : NULL;
}

struct attempt *job_new_attempt(struct job *j)
{
	struct attempt *a = realloc(j->att, (j->natt + 1) * sizeof *a);

	if (!a)
		return NULL;
	j->att = a;
	a = &j->att[j->natt];
	memset(a, 0, sizeof *a);
	a->n = (int)j->natt++;
	return a;
}

static void strv_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void job_free(struct job *j)
{
	for (size_t i = 0; i < j->natt; i++) {
		struct attempt *a = &j->att[i];

		free(a->id);
		free(a->node);
		free(a->gpus);
		strv_free(a->uuids, a->nuuids);
		free(a->reason);
		free(a->log);
		free(a->checkpoint);
		free(a->slurm_job);
		free(a->host);
		strv_free(a->staged_after, a->nstaged_after);
	}
	free(j->att);
	free(j->reason);
	free(j->checkpoint);
	free(j->checkpoint_node);
	strv_free(j->ck_copies, j->nck_copies);
	free(j->owner);
	jobdef_free(&j->def);
	memset(j, 0, sizeof *j);
}
