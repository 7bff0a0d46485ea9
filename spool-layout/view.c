/*
 * view.c - what the tools show of a job: its strings made fit for a
 * terminal (shell_join, command_display, printable) and status's view
 * of a record (status_view_of), the one place that makes both the
 * index's lines (index.c) and status's own rows.  A change to what
 * `status` shows goes here (AGENTS.md, invariant 10).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "view.h"

/* ---- display text (what the tools show of a job's strings) ---------------- */

/* A C0 control, DEL, or the start of a UTF-8 C1 control (U+0080..9F). */
static size_t control_len(const unsigned char *p)
{
	if (*p < 0x20 || *p == 0x7f)
		return 1;
	if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
		return 2;
	return 0;
}

static int word_safe(const char *w, int first)
{
	const unsigned char *p = (const unsigned char *)w;

	if (!*p)
		return 0;
	for (; *p; p++) {
		if (*p >= 0x80) {
			if (control_len(p))
				return 0;
			continue;
		}
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr("_@%+:,./-", *p) ||
		      (*p == '=' && !first)))
			return 0;
	}
	return 1;
}

static int has_control(const char *w)
{
	for (const unsigned char *p = (const unsigned char *)w; *p; p++)
		if (control_len(p))
			return 1;
	return 0;
}

static int quote_word(struct sbuf *b, const char *w, int first)
{
	const unsigned char *p;

	if (word_safe(w, first))
		return sbuf_add(b, w, strlen(w));
	if (!has_control(w)) {
		if (sbuf_add(b, "'", 1) < 0)
			return -1;
		for (p = (const unsigned char *)w; *p; p++)
			if (*p == '\'' ? sbuf_add(b, "'\\''", 4) < 0 : sbuf_add(b, p, 1) < 0)
				return -1;
		return sbuf_add(b, "'", 1);
	}
	if (sbuf_add(b, "$'", 2) < 0)
		return -1;
	for (p = (const unsigned char *)w; *p; p++) {
		int r;

		switch (*p) {
		case '\n':
			r = sbuf_add(b, "\\n", 2);
			break;
		case '\t':
			r = sbuf_add(b, "\\t", 2);
			break;
		case '\r':
			r = sbuf_add(b, "\\r", 2);
			break;
		case '\\':
			r = sbuf_add(b, "\\\\", 2);
			break;
		case '\'':
			r = sbuf_add(b, "\\'", 2);
			break;
		default:
			if (control_len(p) == 2) {      /* a C1 control: both bytes */
				r = sbuf_addf(b, "\\x%02x\\x%02x", p[0], p[1]);
				p++;
			} else if (control_len(p)) {
				r = sbuf_addf(b, "\\x%02x", *p);
			} else {
				r = sbuf_add(b, p, 1);
			}
		}
		if (r < 0)
			return -1;
	}
	return sbuf_add(b, "'", 1);
}

char *shell_join(char *const *argv, size_t argc)
{
	struct sbuf b = { 0 };

	if (sbuf_add(&b, "", 0) < 0)
		return NULL;
	for (size_t i = 0; i < argc; i++)
		if ((i && sbuf_add(&b, " ", 1) < 0) || quote_word(&b, argv[i], i == 0) < 0) {
			sbuf_free(&b);
			return NULL;
		}
	return b.s;
}

char *printable(const char *s)
{
	struct sbuf b = { 0 };
	const unsigned char *p = (const unsigned char *)s, *run = p;

	if (sbuf_add(&b, "", 0) < 0)
		return NULL;
	for (; *p; ) {
		size_t n = control_len(p);

		if (!n) {
			p++;
			continue;
		}
		if (sbuf_add(&b, run, (size_t)(p - run)) < 0 || sbuf_add(&b, "?", 1) < 0) {
			sbuf_free(&b);
			return NULL;
		}
		p += n;
		run = p;
	}
	if (sbuf_add(&b, run, (size_t)(p - run)) < 0) {
		sbuf_free(&b);
		return NULL;
	}
	return b.s;
}

char *command_display(const struct job_def *d)
{
	if (d->argv)
		return shell_join(d->argv, d->argc);
	return printable(d->shell ? d->shell : "");
}

/* ---- the view ------------------------------------------------------------ */

/* When the age column counts from: entered the queue, started, paused,
 * finished. */
static long long age_since(const struct job *j)
{
	const struct attempt *a = job_last_attempt(j);
	long long t = 0;

	switch (j->state) {
	case JS_QUEUED:
		t = j->queued_at;
		break;
	case JS_RUNNING:
	case JS_PAUSING:
		t = a && a->started ? a->started : j->started;
		break;
	case JS_PAUSED:
		t = a ? a->finished : 0;
		break;
	default:
		t = j->finished;
	}
	return t ? t : j->submitted;
}

static int int_list(struct sbuf *b, const int *v, size_t n)
{
	if (sbuf_add(b, "", 0) < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (sbuf_addf(b, "%s%d", i ? "," : "", v[i]) < 0)
			return -1;
	return 0;
}

/* S as it is when no control character needs replacing, else printable. */
static int view_str(struct status_view *v, int k, const char *s, const char **out)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (control_len(p)) {
			if (!(v->own[k] = printable(s)))
				return -1;
			*out = v->own[k];
			return 0;
		}
	*out = s;
	return 0;
}

int status_view_of(const struct job *j, int with_json, struct status_view *v)
{
	const struct attempt *a = job_last_attempt(j);
	struct sbuf b = { 0 };
	const char *node;
	int r;

	memset(v, 0, sizeof *v);
	v->id = j->id;
	v->rev = j->rev;
	v->priority = j->priority;
	/* A staged job has not started: it is queued, its seat kept on
	 * its node (its record is in running/, so that its attempt is
	 * recorded before the node has it: LAYOUT.md section 8). */
	v->staged = job_staged(j);
	v->state = job_view_state(j);
	v->since = age_since(j);
	for (size_t i = 0; i < j->natt; i++)
		v->natt += j->att[i].state != AS_ABORTED && j->att[i].state != AS_STAGED;
	/* Node and cards as status --json reports them: the last attempt's
	 * placement, else what the job pins. */
	if (a && a->state != AS_ABORTED) {
		/* A Slurm node's job: its Slurm job ID beside the node (the
		 * text the view's own[5], made fit to show below). */
		node = a->node;
		if (a->slurm_job && a->node &&
		    !(node = v->own[5] = xasprintf("%s(slurm:%s)", a->node, a->slurm_job)))
			goto fail;
		r = a->ngpus ? int_list(&b, a->gpus, a->ngpus) : sbuf_add(&b, "none", 4);
	} else {
		long long need = jobdef_gpu_need(&j->def);

		node = j->def.node;
		if (j->def.ngpus)
			r = int_list(&b, j->def.gpus, j->def.ngpus);
		else
			r = need ? sbuf_addf(&b, "any:%lld", need) : sbuf_add(&b, "none", 4);
	}
	v->gpus = v->own[0] = b.s;
	if (r < 0 || view_str(v, 1, node ? node : "-", &v->node) < 0 ||
	    view_str(v, 2, j->def.name ? j->def.name : "-", &v->name) < 0 ||
	    !(v->command = v->own[3] = command_display(&j->def)) ||
	    (j->owner && view_str(v, 6, j->owner, &v->owner) < 0))
		goto fail;
	if (with_json) {
		cJSON *o = job_status_json(j);

		v->json = v->own[4] = o ? cJSON_PrintUnformatted(o) : NULL;
		cJSON_Delete(o);
		if (!v->json)
			goto fail;
	}
	return 0;
fail:
	status_view_free(v);
	errno = ENOMEM;
	return -1;
}

void status_view_free(struct status_view *v)
{
	for (int k = 0; k < (int)(sizeof v->own / sizeof v->own[0]); k++)
		if (k != 4)
			free(v->own[k]);
	cJSON_free(v->own[4]);
	memset(v, 0, sizeof *v);
}
