/*
 * metrics.c - the daemon's Prometheus metrics: counted as transitions
 * happen, carried across restarts, written out as text (metrics.h).
 *
 * Every counter and histogram series is named in one place, walk():
 * metrics_text prints what it visits, metrics_restore assigns what it
 * visits from the old file's line of the same series.  So a series
 * added there is both written and carried, and the two can never
 * disagree on its name or labels.
 *
 * Handoff latency is measured on one node's clock (its worker's
 * records: an attempt's finished, the next one's started) and only when
 * the next job was already queued when the card was let go of: a card
 * that sat idle because nothing waited is not a slow handoff.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

static const double handoff_le[] = HANDOFF_LE;
static const double wait_le[] = WAIT_LE;

int metrics_init(struct metrics *m, const char *const *nodes, size_t nnodes, long long started)
{
	memset(m, 0, sizeof *m);
	if (nnodes && !(m->node = calloc(nnodes, sizeof *m->node)))
		return -1;
	for (size_t k = 0; k < nnodes; k++)
		m->node[k].name = nodes[k];
	m->nnodes = nnodes;
	m->started = started;
	return 0;
}

void metrics_free(struct metrics *m)
{
	for (size_t k = 0; k < m->nnodes; k++)
		free(m->node[k].ends);
	free(m->node);
	memset(m, 0, sizeof *m);
}

static void observe(struct hist *h, const double *le, size_t nb, double v)
{
	size_t b = 0;

	while (b < nb && v > le[b])
		b++;
	h->n[b]++;
	h->sum += v;
}

/* ---- the transitions ----------------------------------------------------- */

static struct card_end *card_end(struct metrics_node *n, int index, int make)
{
	struct card_end *v;

	for (size_t i = 0; i < n->nends; i++)
		if (n->ends[i].index == index)
			return &n->ends[i];
	if (!make || !(v = realloc(n->ends, (n->nends + 1) * sizeof *v)))
		return NULL;    /* out of memory: this handoff is not measured */
	n->ends = v;
	v[n->nends] = (struct card_end){ index, 0 };
	return &v[n->nends++];
}

static int att_over(enum att_state s)
{
	return s != AS_LAUNCHING && s != AS_STAGED && s != AS_RUNNING && s != AS_PAUSING;
}

void metrics_step(struct metrics *m, const struct job *j, enum job_state from,
		  enum att_state afrom, size_t node)
{
	const struct attempt *a = job_last_attempt(j);
	struct metrics_node *n = node < m->nnodes ? &m->node[node] : NULL;

	if (job_state_final(j->state) && !job_state_final(from))
		m->finished[j->state]++;
	if (!a || a->state == afrom)
		return;
	if ((afrom == AS_LAUNCHING || afrom == AS_STAGED || afrom == AS_N) && a->started &&
	    a->state != AS_LAUNCHING && a->state != AS_STAGED && a->state != AS_ABORTED) {
		/* An attempt started (it may have ended too, in one step): how
		 * long its job waited, and per card how long after the last
		 * holder let go, when the job was waiting then. */
		if (j->queued_at && a->started >= j->queued_at)
			observe(&m->wait, wait_le, WAIT_NB, (double)(a->started - j->queued_at) / 1000);
		for (size_t c = 0; n && c < a->ngpus; c++) {
			struct card_end *e = card_end(n, a->gpus[c], 0);

			if (!e || !e->at)
				continue;
			if (j->queued_at && j->queued_at <= e->at && a->started >= e->at)
				observe(&n->handoff, handoff_le, HANDOFF_NB,
					(double)(a->started - e->at) / 1000);
			e->at = 0;
		}
	}
	if (afrom != AS_N && !att_over(afrom) && att_over(a->state)) {
		/* An attempt ended: its outcome, and when its cards were let go. */
		m->attempts[a->state]++;
		for (size_t c = 0; n && a->started && c < a->ngpus; c++) {
			struct card_end *e = card_end(n, a->gpus[c], 1);

			if (e)
				e->at = a->finished ? a->finished : a->started;
		}
	}
}

void metrics_preempted(struct metrics *m)
{
	m->preemptions++;
}

void metrics_paused(struct metrics *m)
{
	m->pauses++;
}

void metrics_refused(struct metrics *m)
{
	m->refused++;
}

/* ---- the series ---------------------------------------------------------- */

/* What walk() visits: a series' name with its labels, as it is printed
 * ("cardbaton_attempts_total{outcome=\"failed\"}"), and its value. */
struct visit {
	void (*family)(struct visit *v, const char *name, const char *type, const char *help);
	void (*count)(struct visit *v, const char *key, unsigned long long *n);
	void (*sum)(struct visit *v, const char *key, double *x);
	struct sbuf key;
	int fail;
};

/* A label value as the text format has it: \ " and LF escaped. */
static int add_label(struct sbuf *b, const char *name, const char *val, int first)
{
	if (sbuf_addf(b, "%s%s=\"", first ? "{" : ",", name) < 0)
		return -1;
	for (const char *p = val; *p; p++)
		if ((*p == '\\' || *p == '"') ? sbuf_addf(b, "\\%c", *p) < 0 :
		    *p == '\n' ? sbuf_add(b, "\\n", 2) < 0 : sbuf_add(b, p, 1) < 0)
			return -1;
	return sbuf_add(b, "\"", 1);
}

/* V's key: NAME, then the labels (pairs, NULL-ended), then "}" if any. */
static const char *key(struct visit *v, const char *name, const char *const *labels)
{
	v->key.len = 0;
	if (sbuf_add(&v->key, name, strlen(name)) < 0)
		goto fail;
	for (size_t i = 0; labels && labels[i]; i += 2)
		if (add_label(&v->key, labels[i], labels[i + 1], i == 0) < 0)
			goto fail;
	if (labels && labels[0] && sbuf_add(&v->key, "}", 1) < 0)
		goto fail;
	if (sbuf_add(&v->key, "", 0) < 0)
		goto fail;
	v->key.len--;
	return v->key.s;
fail:
	v->fail = 1;
	return NULL;
}

static void count(struct visit *v, const char *name, const char *const *labels,
		  unsigned long long *n)
{
	const char *k = key(v, name, labels);

	if (k)
		v->count(v, k, n);
}

/* Histogram H of NAME with one optional label pair (L, LV).  The text's
 * buckets are cumulative, H's are not: what a restore reads is turned
 * back into per-bucket counts (a file whose buckets go down is not
 * ours: those buckets add nothing). */
static void hist(struct visit *v, const char *name, const char *l, const char *lv,
		 struct hist *h, const double *le, size_t nb)
{
	char *bucket = xasprintf("%s_bucket", name), *sum = xasprintf("%s_sum", name),
	     *cnt = xasprintf("%s_count", name);
	unsigned long long cum = 0, t, old[HIST_MAX] = { 0 }, prev = 0;
	int restored = 0;
	const char *k;

	if (!bucket || !sum || !cnt) {
		v->fail = 1;
		goto out;
	}
	for (size_t b = 0; b <= nb; b++) {
		char bound[32];

		if (b < nb)
			snprintf(bound, sizeof bound, "%g", le[b]);
		else
			snprintf(bound, sizeof bound, "+Inf");
		k = l ? key(v, bucket, (const char *const[]){ l, lv, "le", bound, NULL })
		      : key(v, bucket, (const char *const[]){ "le", bound, NULL });
		if (!k)
			goto out;
		cum += h->n[b];
		t = cum;
		v->count(v, k, &t);
		old[b] = t - cum;
		restored |= t != cum;
	}
	for (size_t b = 0; restored && b <= nb; b++) {
		h->n[b] += old[b] >= prev ? old[b] - prev : 0;
		prev = old[b] > prev ? old[b] : prev;
	}
	if ((k = key(v, sum, (const char *const[]){ l, lv, NULL })))
		v->sum(v, k, &h->sum);
	t = cum;        /* the count is the +Inf bucket's: printed, never read back */
	if ((k = key(v, cnt, (const char *const[]){ l, lv, NULL })) && !restored)
		v->count(v, k, &t);
out:
	free(bucket);
	free(sum);
	free(cnt);
}

static void walk(struct metrics *m, struct visit *v)
{
	static const enum att_state outcomes[] = {
		AS_SUCCEEDED, AS_FAILED, AS_CANCELLED, AS_LOST, AS_PAUSED, AS_ABORTED,
	};
	static const enum job_state finals[] = { JS_SUCCEEDED, JS_FAILED, JS_CANCELLED, JS_LOST };

	v->family(v, "cardbaton_attempts_total", "counter",
		  "Attempts that ended, by outcome (aborted: never started, its cards were busy "
		  "or the node refused it; paused: stopped at a checkpoint).");
	for (size_t i = 0; i < sizeof outcomes / sizeof outcomes[0]; i++)
		count(v, "cardbaton_attempts_total",
		      (const char *const[]){ "outcome", att_state_name(outcomes[i]), NULL },
		      &m->attempts[outcomes[i]]);
	v->family(v, "cardbaton_jobs_finished_total", "counter", "Jobs that ended, by final state.");
	for (size_t i = 0; i < sizeof finals / sizeof finals[0]; i++)
		count(v, "cardbaton_jobs_finished_total",
		      (const char *const[]){ "state", job_state_name(finals[i]), NULL },
		      &m->finished[finals[i]]);
	v->family(v, "cardbaton_preemptions_total", "counter",
		  "Running resumable jobs asked to checkpoint and yield their cards to a "
		  "higher-priority job.");
	count(v, "cardbaton_preemptions_total", NULL, &m->preemptions);
	v->family(v, "cardbaton_pauses_total", "counter", "Pause requests (cardbaton pause) applied.");
	count(v, "cardbaton_pauses_total", NULL, &m->pauses);
	v->family(v, "cardbaton_requests_refused_total", "counter",
		  "Control requests in ctl/ refused in a lab's spool: by someone who may not "
		  "(not the job's owner or an admin; a drain: not an admin), or a link.");
	count(v, "cardbaton_requests_refused_total", NULL, &m->refused);
	v->family(v, "cardbaton_queue_wait_seconds", "histogram",
		  "From a job entering the queue to its attempt's start.");
	hist(v, "cardbaton_queue_wait_seconds", NULL, NULL, &m->wait, wait_le, WAIT_NB);
	v->family(v, "cardbaton_handoff_seconds", "histogram",
		  "From an attempt's end to the next start on the same card, when that job was "
		  "already waiting (the node's clock).");
	for (size_t k = 0; k < m->nnodes; k++)
		hist(v, "cardbaton_handoff_seconds", "node", m->node[k].name, &m->node[k].handoff,
		     handoff_le, HANDOFF_NB);
}

/* ---- the text ------------------------------------------------------------ */

struct printer {
	struct visit v;
	struct sbuf out;
};

static void p_family(struct visit *v, const char *name, const char *type, const char *help)
{
	struct printer *p = (struct printer *)v;

	if (sbuf_addf(&p->out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type) < 0)
		v->fail = 1;
}

static void p_count(struct visit *v, const char *k, unsigned long long *n)
{
	if (sbuf_addf(&((struct printer *)v)->out, "%s %llu\n", k, *n) < 0)
		v->fail = 1;
}

static void p_sum(struct visit *v, const char *k, double *x)
{
	if (sbuf_addf(&((struct printer *)v)->out, "%s %.3f\n", k, *x) < 0)
		v->fail = 1;
}

/* A gauge's line: NAME{LABELS} VALUE. */
static void gauge(struct printer *p, const char *name, const char *const *labels, double val)
{
	const char *k = key(&p->v, name, labels);

	if (k && sbuf_addf(&p->out, "%s %.17g\n", k, val) < 0)
		p->v.fail = 1;
}

static void gauges(struct printer *p, const struct metrics *m, const struct metrics_now *now)
{
	static const char *const bands[] = { "low", "normal", "high" };
	char gpu[16];

	p_family(&p->v, "cardbaton_jobs", "gauge",
		 "Jobs the daemon holds, by state (running counts launching and pausing ones).");
	gauge(p, "cardbaton_jobs", (const char *const[]){ "state", "queued", NULL }, (double)now->queued);
	gauge(p, "cardbaton_jobs", (const char *const[]){ "state", "running", NULL }, (double)now->running);
	gauge(p, "cardbaton_jobs", (const char *const[]){ "state", "paused", NULL }, (double)now->paused);
	p_family(&p->v, "cardbaton_jobs_held", "gauge", "Queued jobs on hold (cardbaton hold).");
	gauge(p, "cardbaton_jobs_held", NULL, (double)now->held);
	p_family(&p->v, "cardbaton_queue_length", "gauge",
		 "Queued jobs by priority band: low (< 0), normal (0), high (> 0).");
	for (size_t b = 0; b < 3; b++)
		gauge(p, "cardbaton_queue_length", (const char *const[]){ "band", bands[b], NULL },
		      (double)now->band[b]);
	p_family(&p->v, "cardbaton_node_up", "gauge", "1 when the node answered when last asked.");
	for (size_t k = 0; k < now->nnodes; k++)
		gauge(p, "cardbaton_node_up", (const char *const[]){ "node", now->nodes[k].name, NULL },
		      now->nodes[k].reachable);
	p_family(&p->v, "cardbaton_node_drained", "gauge", "1 when the node is drained.");
	for (size_t k = 0; k < now->nnodes; k++)
		gauge(p, "cardbaton_node_drained",
		      (const char *const[]){ "node", now->nodes[k].name, NULL }, now->nodes[k].drained);
	p_family(&p->v, "cardbaton_gpu_state", "gauge",
		 "Each card at the daemon's last look: 1 for its state (leased: a CardBaton job "
		 "holds it; busy: in use outside the queue; idle).");
	for (size_t k = 0; k < now->nnodes; k++)
		for (size_t c = 0; c < now->nodes[k].ncards; c++) {
			const struct node_card *g = &now->nodes[k].cards[c];
			int leased = g->lease || g->nshares;
			static const char *const st[] = { "idle", "busy", "leased" };
			int is = leased ? 2 : g->idle ? 0 : 1;

			snprintf(gpu, sizeof gpu, "%d", g->index);
			for (int s = 0; s < 3; s++)
				gauge(p, "cardbaton_gpu_state",
				      (const char *const[]){ "node", now->nodes[k].name, "gpu", gpu, "uuid",
							     g->uuid ? g->uuid : "", "state", st[s], NULL },
				      s == is);
		}
	static const struct { const char *name, *help; int what; } readings[] = {
		{ "cardbaton_gpu_memory_used_bytes", "Memory in use on the card.", 0 },
		{ "cardbaton_gpu_memory_total_bytes", "The card's memory.", 1 },
		{ "cardbaton_gpu_utilization_ratio", "The card's utilisation, 0 to 1.", 2 },
	};
	for (size_t r = 0; r < 3; r++) {
		p_family(&p->v, readings[r].name, "gauge", readings[r].help);
		for (size_t k = 0; k < now->nnodes; k++)
			for (size_t c = 0; c < now->nodes[k].ncards; c++) {
				const struct node_card *g = &now->nodes[k].cards[c];
				long long v = readings[r].what == 0 ? g->mem_used :
					      readings[r].what == 1 ? g->mem_total : g->util;

				if (v < 0)
					continue;       /* the driver did not say */
				snprintf(gpu, sizeof gpu, "%d", g->index);
				gauge(p, readings[r].name,
				      (const char *const[]){ "node", now->nodes[k].name, "gpu", gpu,
							     "uuid", g->uuid ? g->uuid : "", NULL },
				      readings[r].what == 2 ? (double)v / 100 : (double)v * 1048576);
			}
	}
	/* The card figures above are a snapshot: when it was read, so that
	 * a stale one says so (gpu_refresh_seconds, cardbaton(5)). */
	p_family(&p->v, "cardbaton_node_gpus_timestamp_seconds", "gauge",
		 "When the daemon last read the node's cards (Unix time): the card figures are "
		 "of then.");
	for (size_t k = 0; k < now->nnodes; k++)
		if (now->nodes[k].cards_at > 0)
			gauge(p, "cardbaton_node_gpus_timestamp_seconds",
			      (const char *const[]){ "node", now->nodes[k].name, NULL },
			      (double)(now->nodes[k].cards_at / 1000));
	/* A lab's users (none elsewhere: the families are left out). */
	if (now->nusers) {
		p_family(&p->v, "cardbaton_user_gpu_seconds_total", "counter",
			 "GPU time of the user's attempts, ended and running: cards x seconds "
			 "(a lab's spool).");
		for (size_t u = 0; u < now->nusers; u++)
			gauge(p, "cardbaton_user_gpu_seconds_total",
			      (const char *const[]){ "user", now->users[u].user, NULL },
			      now->users[u].gpu_seconds);
		p_family(&p->v, "cardbaton_user_gpus_held", "gauge",
			 "Cards the user's running, pausing and staged attempts hold (a lab's spool).");
		for (size_t u = 0; u < now->nusers; u++)
			gauge(p, "cardbaton_user_gpus_held",
			      (const char *const[]){ "user", now->users[u].user, NULL },
			      (double)now->users[u].gpus_held);
	}
	p_family(&p->v, "cardbaton_daemon_start_time_seconds", "gauge",
		 "When the daemon that wrote this started (Unix time).");
	gauge(p, "cardbaton_daemon_start_time_seconds", NULL, (double)(m->started / 1000));
}

char *metrics_text(const struct metrics *m, const struct metrics_now *now)
{
	struct printer p = { { p_family, p_count, p_sum, { 0 }, 0 }, { 0 } };

	/* walk() only reads when it prints (hist() writes back only what a
	 * restore changed). */
	walk((struct metrics *)m, &p.v);
	gauges(&p, m, now);
	sbuf_free(&p.v.key);
	if (p.v.fail || sbuf_add(&p.out, "", 0) < 0) {
		sbuf_free(&p.out);
		return NULL;
	}
	return p.out.s;
}

/* ---- carried across a restart ------------------------------------------- */

struct line {
	const char *key;
	size_t klen;
	double val;
};

struct restorer {
	struct visit v;
	struct line *lines;
	size_t n;
	size_t taken;
};

static int line_cmp(const void *pa, const void *pb)
{
	const struct line *a = pa, *b = pb;
	size_t n = a->klen < b->klen ? a->klen : b->klen;
	int c = memcmp(a->key, b->key, n);

	return c ? c : (a->klen > b->klen) - (a->klen < b->klen);
}

static const struct line *find(struct restorer *r, const char *k)
{
	struct line want = { k, strlen(k), 0 };

	return r->n ? bsearch(&want, r->lines, r->n, sizeof *r->lines, line_cmp) : NULL;
}

static void r_family(struct visit *v, const char *name, const char *type, const char *help)
{
	(void)v, (void)name, (void)type, (void)help;
}

/* A count: a whole number, 0 to 2^53 (beyond, a double is not exact). */
static void r_count(struct visit *v, const char *k, unsigned long long *n)
{
	struct restorer *r = (struct restorer *)v;
	const struct line *l = find(r, k);

	if (l && l->val >= 0 && l->val <= 9007199254740992.0 && l->val == floor(l->val)) {
		*n += (unsigned long long)l->val;
		r->taken++;
	}
}

/* A sum: seconds, 0 to 10^15 (31 million years), so that its "%.3f"
 * (at most 20 characters) is read back whole: 1e308 was written out
 * as 313 digits, which a restart could not read (tests/fuzz/fuzz_metrics). */
#define SUM_MAX 1e15

static void r_sum(struct visit *v, const char *k, double *x)
{
	struct restorer *r = (struct restorer *)v;
	const struct line *l = find(r, k);

	if (l && isfinite(l->val) && l->val >= 0 && l->val <= SUM_MAX) {
		*x += l->val;
		r->taken++;
	}
}

size_t metrics_restore(struct metrics *m, const char *text, size_t len)
{
	struct restorer r = { { r_family, r_count, r_sum, { 0 }, 0 }, NULL, 0, 0 };
	const char *p = text, *end = text + len;
	size_t cap = 0;

	/* Its lines "KEY VALUE": the key up to the last blank, which a
	 * label value may hold too; comments and the rest left out. */
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *e = nl ? nl : end, *sp;
		char num[64], *stop;
		size_t vlen;

		for (sp = e; sp > p && sp[-1] != ' '; sp--)
			;
		vlen = (size_t)(e - sp);
		if (*p != '#' && sp > p + 1 && vlen && vlen < sizeof num) {
			memcpy(num, sp, vlen);
			num[vlen] = '\0';
			double val = strtod(num, &stop);

			if (!*stop && stop != num) {
				if (r.n == cap) {
					struct line *v = realloc(r.lines, (cap = cap ? 2 * cap : 64) * sizeof *v);

					if (!v)
						break;  /* out of memory: what was read is taken */
					r.lines = v;
				}
				r.lines[r.n++] = (struct line){ p, (size_t)(sp - 1 - p), val };
			}
		}
		p = e + (nl != NULL);
	}
	if (r.n)
		qsort(r.lines, r.n, sizeof *r.lines, line_cmp);
	/* Two lines of one series: the file is not ours; bsearch takes one. */
	walk(m, &r.v);
	sbuf_free(&r.v.key);
	free(r.lines);
	return r.taken;
}
