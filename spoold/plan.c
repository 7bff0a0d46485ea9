/*
 * plan.c - one scheduling pass, a pure function (the rules are at the
 * top of plan.h).
 */
#include <stdlib.h>
#include <string.h>

#include "plan.h"

enum { TAKEN = 1, HELD = 2, SHARED = 4 };   /* SHARED: a sharing job placed on it */

/* What a pass keeps as it goes: per card of every node, TAKEN and HELD. */
struct pass {
	const struct plan_in *in;
	struct plan_out *out;
	long long *running;     /* per group: running, and placed by this pass */
	long long now;
	unsigned char *victim;  /* per run: chosen by a preemption of this pass */
	unsigned char *freed;   /* per card of one node: leased by a victim */
	int *scratch;           /* cards fits() writes for a preemption */
	size_t *nsh;            /* per card: sharing jobs this pass placed there */
	long long *shmem;       /* ... and the MiB they take */
	unsigned char *card;    /* node K's cards are card[base[K]...] */
	size_t *base;
	size_t *placed;         /* per node: jobs this pass placed there */
	size_t *staged;         /* per card: 1 + the run staged to start on it, or 0 */
	unsigned char *unstage; /* per run: a staged one sent back to the queue */
	unsigned char *cand;    /* per job: 1 left waiting (the baton may stage it),
				   2 placed or not to be staged, 0 not looked at */
	size_t *holder;         /* per card: the run leasing it alone, or nruns
				   (batons(): found once a pass) */
	long long *uheld;       /* per user: cards held, and placed or staged by this pass */
	size_t ncards;          /* all cards */
	size_t cap;             /* the most cards one pass can place: each card as
				   many times as its node lets jobs share it */
};

long plan_slot(const struct gpu_info *g, size_t n, int index)
{
	for (size_t i = 0; i < n; i++)
		if (g[i].index == index)
			return (long)i;
	return -1;
}

static int usable(const struct plan_node *n)
{
	return n->known && (n->fresh || n->handoff);
}

static int may_use(const struct plan_job *j, const struct plan_node *n)
{
	if (n->conf->slurm_partition && (j->ngpus || j->mem || j->share))
		return 0;
	if (j->fs && !shared_fs_mounts(n->conf, j->fs))
		return 0;
	for (size_t i = 0; i < j->naway; i++)
		if (!strcmp(j->away[i], n->conf->name))
			return 0;
	return !j->node || !strcmp(j->node, n->conf->name);
}

/* Has node K room for one more of our jobs (a Slurm node's max_jobs)? */
static int room(const struct pass *p, size_t k)
{
	const struct plan_node *n = &p->in->nodes[k];

	return !n->max_jobs || n->njobs + (long long)p->placed[k] < n->max_jobs;
}

/* May anything of J's be placed on N now (plan.h)?  Not where its
 * owner's account does not take the lab's key (run_as: owner). */
static int barred(const struct plan_job *j, const struct plan_node *n)
{
	return j->user && n->barred && n->barred[j->user - 1];
}

static int open_node(const struct plan_job *j, const struct plan_node *n)
{
	return n->reachable && !n->drained && !barred(j, n);
}

/* The job card INDEX of node K is kept for, or 0. */
static long long kept_for(const struct pass *p, size_t k, int index)
{
	for (size_t r = 0; r < p->in->nresv; r++)
		if (p->in->resv[r].node == k && p->in->resv[r].index == index)
			return p->in->resv[r].job;
	return 0;
}

/* Is card slot I of node K free (plan.h), for any job? */
static int free_card(const struct pass *p, size_t k, size_t i)
{
	const struct plan_node *n = &p->in->nodes[k];

	return gpu_eligible(n->conf, n->gpus[i].index) && gpu_idle(&n->gpus[i], n->conf->idle_mib) &&
	       !p->card[p->base[k] + i] && !p->staged[p->base[k] + i] &&
	       !kept_for(p, k, n->gpus[i].index);
}

/* Is card G big enough for J (plan.h)? */
static int big_enough(const struct plan_job *j, const struct gpu_info *g)
{
	return !j->mem || g->mem_total >= j->mem;
}

/* Free cards of node K (that J could use: big enough, when J is given). */
static size_t free_cards(const struct pass *p, size_t k, const struct plan_job *j)
{
	const struct plan_node *n = &p->in->nodes[k];
	size_t c = 0;

	for (size_t i = 0; i < n->ngpus; i++)
		c += free_card(p, k, i) && (!j || big_enough(j, &n->gpus[i]));
	return c;
}

/* The MiB the sharing jobs on card G declare (those running, by their
 * leases). */
static long long shared_mem(const struct pass *p, const struct gpu_info *g)
{
	long long m = 0;

	for (size_t s = 0; s < g->nshares; s++)
		for (size_t r = 0; r < p->in->nruns; r++)
			if (!strcmp(p->in->runs[r].aid, g->shares[s]))
				m += p->in->runs[r].mem;
	return m;
}

/* The sharing jobs holding card slot I of node K, counting those this
 * pass placed there; -1 when no sharer may join it at all (an exclusive
 * lease, taken or held in this pass, waited for by a staged attempt). */
static long long sharers(const struct pass *p, size_t k, size_t i)
{
	const struct gpu_info *g = &p->in->nodes[k].gpus[i];
	size_t c = p->base[k] + i;

	if (g->lease || (p->card[c] & (TAKEN | HELD)) || p->staged[c])
		return -1;
	return (long long)(g->nshares + p->nsh[c]);
}

/* May sharing job J join card slot I of node K (plan.h): shared by
 * fewer than the node's max_jobs_per_gpu queue jobs, all sharing; their
 * declared memory and J's within the card's total; its free memory at
 * least J's.  A card with no holder must be idle. */
static int share_ok(const struct pass *p, const struct plan_job *j, size_t k, size_t i)
{
	const struct plan_node *n = &p->in->nodes[k];
	const struct gpu_info *g = &n->gpus[i];
	size_t c = p->base[k] + i;
	long long holders = sharers(p, k, i);

	if (holders <= 0)
		return !holders && gpu_idle(g, n->conf->idle_mib);
	return holders < n->conf->max_jobs_per_gpu && g->mem_total >= 0 && g->mem_used >= 0 &&
	       shared_mem(p, g) + p->shmem[c] + j->mem <= g->mem_total &&
	       g->mem_total - g->mem_used - p->shmem[c] >= j->mem;
}

/* May J have card INDEX: it pins none, or that one among them? */
static int pinned_to(const struct plan_job *j, int index)
{
	for (size_t x = 0; x < j->ngpus; x++)
		if (j->gpus[x] == index)
			return 1;
	return !j->ngpus;
}

/* The sharers of card slot I of node K when it is full of them (as
 * many as the node's max_jobs_per_gpu, counting this pass's), else 0. */
static long long share_full(const struct pass *p, size_t k, size_t i)
{
	long long holders = sharers(p, k, i);

	return holders > 0 && holders >= p->in->nodes[k].conf->max_jobs_per_gpu ? holders : 0;
}

/* Sharing job J, not placed: "GPU I of NODE: shared by N jobs,
 * max_jobs_per_gpu M" for the first card it might have joined but for
 * the count of its sharers (plan.h), into *WHY; NULL when none.  -1 on
 * out of memory. */
static int full_card(const struct pass *p, const struct plan_job *j, char **why)
{
	*why = NULL;
	for (size_t k = 0; k < p->in->nnodes; k++) {
		const struct plan_node *n = &p->in->nodes[k];

		if (!may_use(j, n) || !open_node(j, n) || !usable(n))
			continue;
		for (size_t i = 0; i < n->ngpus; i++) {
			const struct gpu_info *g = &n->gpus[i];
			long long kept = kept_for(p, k, g->index), h;

			if (!pinned_to(j, g->index) || !gpu_eligible(n->conf, g->index) || !big_enough(j, g) ||
			    (kept && kept != j->id) || !(h = share_full(p, k, i)))
				continue;
			*why = xasprintf("GPU %d of %s: shared by %lld job%s, max_jobs_per_gpu %lld", g->index,
					 n->conf->name, h, h == 1 ? "" : "s", n->conf->max_jobs_per_gpu);
			return *why ? 0 : -1;
		}
	}
	return 0;
}

/* Does run R come after job J in dispatch order (priority, then ID)? */
static int later(const struct pass *p, size_t r, const struct plan_job *j)
{
	const struct plan_run *v = &p->in->runs[r];

	return v->prio < j->prio || (v->prio == j->prio && v->id > j->id);
}

/* May J have card slot I of node K: eligible, big enough, neither
 * taken nor held in this pass, kept for nobody else, and idle -- or,
 * with FREED (a preemption's look), leased by one of its victims; for
 * a sharing job, share_ok?  A card a staged attempt waits for is
 * nobody else's, but for a preemption's look by a job before it. */
static int free_for(const struct pass *p, const struct plan_job *j, size_t k, size_t i,
		    const unsigned char *freed)
{
	const struct plan_node *n = &p->in->nodes[k];
	const struct gpu_info *g = &n->gpus[i];
	long long kept = kept_for(p, k, g->index);

	size_t st = p->staged[p->base[k] + i];

	if (!gpu_eligible(n->conf, g->index) || !big_enough(j, g) || (kept && kept != j->id))
		return 0;
	if (st && !(freed && freed[i] && later(p, st - 1, j)))
		return 0;
	if (j->share && share_ok(p, j, k, i))
		return 1;
	return !p->card[p->base[k] + i] && (gpu_idle(g, n->conf->idle_mib) || (freed && freed[i]));
}

/* J's cards on node K, written to OUT (indices); 1 when they are free
 * (FREED: as free_for). */
static int fits(const struct pass *p, const struct plan_job *j, size_t k, int *out,
		const unsigned char *freed)
{
	const struct plan_node *n = &p->in->nodes[k];
	size_t got = 0;

	/* OUT has room for the cards not placed yet, all a job can get
	 * (only a pinned index given twice could ask for more). */
	if ((size_t)j->need > p->cap - p->out->ncards)
		return 0;
	if (j->ngpus) {
		for (size_t i = 0; i < j->ngpus; i++) {
			long s = plan_slot(n->gpus, n->ngpus, j->gpus[i]);

			if (s < 0 || !free_for(p, j, k, (size_t)s, freed))
				return 0;
			out[i] = j->gpus[i];
		}
		return 1;
	}
	for (size_t i = 0; i < n->ngpus && got < (size_t)j->need; i++)
		if (free_for(p, j, k, i, freed))
			out[got++] = n->gpus[i].index;
	return got == (size_t)j->need;
}

/* Job J goes to node K with the cards fits() wrote.  How many of them
 * were free (counted in the pass's free cards). */
static size_t take(struct pass *p, size_t j, size_t k)
{
	size_t was_free = 0;
	const struct plan_node *n = &p->in->nodes[k];
	struct plan_out *o = p->out;
	size_t need = (size_t)p->in->jobs[j].need;
	int *cards = o->cards + o->ncards;

	for (size_t c = 0; c < need; c++) {
		long s = plan_slot(n->gpus, n->ngpus, cards[c]);
		size_t at = p->base[k] + (size_t)s;

		if (s < 0)
			continue;
		was_free += free_card(p, k, (size_t)s);
		if (!p->in->jobs[j].share) {
			p->card[at] |= TAKEN;
			continue;
		}
		p->card[at] |= SHARED;
		p->nsh[at]++;
		p->shmem[at] += p->in->jobs[j].mem;
	}
	o->place[o->nplace++] = (struct plan_place){ .job = j, .node = k, .cards = cards, .ncards = need };
	o->ncards += need;
	return was_free;
}

static void hold_card(struct pass *p, size_t j, size_t k, size_t i)
{
	unsigned char *c = &p->card[p->base[k] + i];

	if (*c & HELD)
		return;
	*c |= HELD;
	p->out->hold[p->out->nhold++] =
		(struct plan_hold){ .job = j, .node = k, .index = p->in->nodes[k].gpus[i].index };
}

/* Job J waits too long: it holds what it waits for (plan.h). */
static void hold(struct pass *p, size_t j)
{
	const struct plan_job *job = &p->in->jobs[j];
	size_t best = p->in->nnodes, best_free = 0;

	for (size_t k = 0; k < p->in->nnodes; k++) {
		const struct plan_node *n = &p->in->nodes[k];
		size_t nfree;

		if (!may_use(job, n) || !usable(n) || !open_node(job, n))
			continue;
		if (job->ngpus) {
			for (size_t i = 0; i < job->ngpus; i++) {
				long s = plan_slot(n->gpus, n->ngpus, job->gpus[i]);

				if (s >= 0)
					hold_card(p, j, k, (size_t)s);
			}
			continue;
		}
		nfree = free_cards(p, k, job);
		if (best == p->in->nnodes || nfree > best_free) {
			best = k;
			best_free = nfree;
		}
	}
	for (size_t i = 0; best < p->in->nnodes && i < p->in->nodes[best].ngpus; i++)
		if (big_enough(job, &p->in->nodes[best].gpus[i]))
			hold_card(p, j, best, i);
}

/* "0-3,6" for the indices of N's cards (in N's order) onto B. */
static int add_indices(struct sbuf *b, const struct plan_node *n)
{
	for (size_t i = 0; i < n->ngpus; i++) {
		size_t j = i;

		while (j + 1 < n->ngpus && n->gpus[j + 1].index == n->gpus[j].index + 1)
			j++;
		if (sbuf_addf(b, i ? ",%d" : "%d", n->gpus[i].index) < 0 ||
		    (j > i && sbuf_addf(b, "-%d", n->gpus[j].index) < 0))
			return -1;
		i = j;
	}
	return n->ngpus ? 0 : sbuf_addf(b, "none");
}

/* Has a node J may use an eligible card (one of its pinned ones, when
 * it pins) big enough for it? */
static int any_big_enough(const struct plan_in *in, const struct plan_job *j)
{
	for (size_t k = 0; k < in->nnodes; k++) {
		const struct plan_node *n = &in->nodes[k];

		for (size_t i = 0; may_use(j, n) && i < n->ngpus; i++) {
			int pinned = !j->ngpus;

			for (size_t g = 0; g < j->ngpus; g++)
				pinned |= j->gpus[g] == n->gpus[i].index;
			if (pinned && gpu_eligible(n->conf, n->gpus[i].index) && big_enough(j, &n->gpus[i]))
				return 1;
		}
	}
	return 0;
}

/*
 * Why J can never be placed on the cards that the nodes it may use
 * have (hostile or mistaken input: a pinned index, or more cards,
 * than any of them has), e.g. "no node has GPU 7 (local has 0-3)",
 * into *WHY (malloc'd); NULL when it may fit some day, or while a node
 * it may use is unreachable or has not answered a GPU query yet.
 * -1 when out of memory.
 */
static int never_fits(const struct plan_in *in, const struct plan_job *j, char **why)
{
	struct sbuf b = { 0 };
	int missing = -1, first = 1;
	long long most = 0;

	size_t usable_nodes = 0;

	*why = NULL;
	for (size_t k = 0; k < in->nnodes; k++) {
		if (may_use(j, &in->nodes[k]) &&
		    (!in->nodes[k].reachable || barred(j, &in->nodes[k]) || !in->nodes[k].known))
			return 0;
		usable_nodes += may_use(j, &in->nodes[k]);
	}
	/* Only Slurm nodes, which take no pinned, memory or sharing job. */
	if (!usable_nodes && (j->ngpus || j->mem || j->share))
		return (*why = xasprintf("a Slurm node takes no job with %s",
					 j->ngpus ? "pinned GPUs" : j->mem ? "gpu_memory_mib" : "share"))
			       ? 0 : -1;
	if (j->mem && !any_big_enough(in, j))
		return (*why = xasprintf("no card has %lld MiB", j->mem)) ? 0 : -1;
	if (j->ngpus) {
		for (size_t i = 0; i < j->ngpus && missing < 0; i++) {
			size_t k;

			for (k = 0; k < in->nnodes; k++) {
				const struct plan_node *n = &in->nodes[k];
				long s = plan_slot(n->gpus, n->ngpus, j->gpus[i]);

				if (may_use(j, n) && s >= 0 && big_enough(j, &n->gpus[s]))
					break;
			}
			if (k == in->nnodes)
				missing = j->gpus[i];
		}
		if (missing < 0)
			return 0;
		if (sbuf_addf(&b, "no node has GPU %d", missing) < 0 ||
		    (j->mem && sbuf_addf(&b, " with %lld MiB", j->mem) < 0) || sbuf_add(&b, " (", 2) < 0)
			goto oom;
	} else {
		for (size_t k = 0; k < in->nnodes; k++) {
			const struct plan_node *n = &in->nodes[k];
			long long c = 0;

			for (size_t i = 0; may_use(j, n) && i < n->ngpus; i++)
				c += gpu_eligible(n->conf, n->gpus[i].index) && big_enough(j, &n->gpus[i]);
			if (c > most)
				most = c;
		}
		if (most >= j->need)
			return 0;
		if (sbuf_addf(&b, "no node has %lld eligible GPUs", j->need) < 0 ||
		    (j->mem && sbuf_addf(&b, " with %lld MiB", j->mem) < 0) || sbuf_add(&b, " (", 2) < 0)
			goto oom;
	}
	for (size_t k = 0; k < in->nnodes; k++) {
		const struct plan_node *n = &in->nodes[k];

		if (!may_use(j, n))
			continue;
		if (sbuf_addf(&b, "%s%s has ", first ? "" : "; ", n->conf->name) < 0 ||
		    add_indices(&b, n) < 0)
			goto oom;
		first = 0;
	}
	if (sbuf_add(&b, ")", 1) < 0)
		goto oom;
	*why = b.s;
	return 0;
oom:
	sbuf_free(&b);
	return -1;
}

/* May job J's checkpoint be copied to node N, which cannot see it, to
 * resume there (checkpoint_transfer)?  Never onto a Slurm node (Slurm
 * picks the host), one that left it out, or one that sees it. */
static int may_move(const struct plan_job *j, const struct plan_node *n)
{
	if (!j->travel || n->conf->slurm_partition || may_use(j, n))
		return 0;
	for (size_t i = 0; i < j->naway; i++)
		if (!strcmp(j->away[i], n->conf->name))
			return 0;
	return 1;
}

/* Does node K take job J now (its cards written by fits())?  MOVED:
 * by a copy of its checkpoint (may_move), else where it may be. */
static int takes(const struct pass *p, const struct plan_job *j, size_t k, int moved)
{
	const struct plan_node *n = &p->in->nodes[k];

	if (!(moved ? may_move(j, n) : may_use(j, n)) || !open_node(j, n) || !room(p, k))
		return 0;
	return j->need == 0 || (usable(n) && fits(p, j, k, p->out->cards + p->out->ncards, NULL));
}

/* The node that takes job J now, or in->nnodes: its checkpoint's own
 * node first (shared_fs), then the others it may use in config order,
 * then (checkpoint_transfer) one its checkpoint would be copied to
 * (*MOVED set). */
static size_t node_for(const struct pass *p, const struct plan_job *j, int *moved)
{
	size_t k;

	*moved = 0;
	for (k = 0; j->prefer && k < p->in->nnodes; k++)
		if (!strcmp(p->in->nodes[k].conf->name, j->prefer) && takes(p, j, k, 0))
			return k;
	for (k = 0; k < p->in->nnodes; k++)
		if (takes(p, j, k, 0))
			return k;
	for (k = 0; j->travel && k < p->in->nnodes; k++)
		if (takes(p, j, k, 1)) {
			*moved = 1;
			return k;
		}
	return p->in->nnodes;
}

/* ---- preemption ------------------------------------------------------------ */

#define VICTIMS_MAX 16          /* candidates weighed per node (the first, in order) */

/* Victims in the order they are given up: lowest priority, then the
 * latest started.  ARG: the runs. */
static int victim_cmp(const void *pa, const void *pb, void *arg)
{
	const struct plan_run *runs = arg;
	const struct plan_run *a = &runs[*(const size_t *)pa], *b = &runs[*(const size_t *)pb];

	if (a->prio != b->prio)
		return a->prio < b->prio ? -1 : 1;
	return (a->started < b->started) - (a->started > b->started);
}

/* Does J fit on node K once the runs SET[0..M) have yielded?  Its
 * cards then into p->scratch. */
static int fits_without(struct pass *p, const struct plan_job *j, size_t k, const size_t *set,
			size_t m)
{
	const struct plan_node *n = &p->in->nodes[k];

	for (size_t i = 0; i < n->ngpus; i++) {
		p->freed[i] = 0;
		for (size_t v = 0; v < m && n->gpus[i].lease; v++)
			p->freed[i] |= !strcmp(n->gpus[i].lease, p->in->runs[set[v]].aid);
	}
	return fits(p, j, k, p->scratch, p->freed);
}

/* The first M-subset of CAND[0..NC), in order, that makes J fit on K,
 * into PICK; 1 when there is one. */
static int first_subset(struct pass *p, const struct plan_job *j, size_t k, const size_t *cand,
			size_t nc, size_t m, size_t *pick)
{
	size_t at[VICTIMS_MAX];

	for (size_t i = 0; i < m; i++)
		at[i] = i;
	for (;;) {
		size_t i;

		for (i = 0; i < m; i++)
			pick[i] = cand[at[i]];
		if (fits_without(p, j, k, pick, m))
			return 1;
		/* The next combination, in lexicographic order. */
		i = m;
		while (i > 0 && at[i - 1] == nc - m + i - 1)
			i--;
		if (i == 0)
			return 0;
		at[i - 1]++;
		for (size_t q = i; q < m; q++)
			at[q] = at[q - 1] + 1;
	}
}

/* Job J is not placed: may it preempt (plan.h)?  Its preemption into
 * OUT, its cards held for it. */
static void preempt(struct pass *p, size_t j)
{
	const struct plan_in *in = p->in;
	const struct plan_job *job = &in->jobs[j];
	struct plan_out *o = p->out;
	size_t best_k = in->nnodes, best_m = VICTIMS_MAX + 1, best[VICTIMS_MAX], pick[VICTIMS_MAX];

	for (size_t r = 0; r < in->nresv; r++)
		if (in->resv[r].job == job->id)
			return;         /* it has cards coming: no more victims */
	for (size_t k = 0; k < in->nnodes; k++) {
		const struct plan_node *n = &in->nodes[k];
		size_t cand[VICTIMS_MAX], nc = 0;

		if (!may_use(job, n) || !open_node(job, n) || !usable(n))
			continue;
		for (size_t r = 0; r < in->nruns && nc < VICTIMS_MAX; r++) {
			const struct plan_run *v = &in->runs[r];

			if (v->node == k && v->resumable && !v->yielding && !p->victim[r] &&
			    v->prio < job->prio && v->started &&
			    p->now - v->started >= in->min_runtime_seconds * 1000)
				cand[nc++] = r;
		}
		qsort_r(cand, nc, sizeof *cand, victim_cmp, (void *)in->runs);
		for (size_t m = 1; m <= nc && m < best_m; m++)
			if (first_subset(p, job, k, cand, nc, m, pick)) {
				best_k = k;
				best_m = m;
				memcpy(best, pick, m * sizeof *pick);
				break;
			}
	}
	if (best_k == in->nnodes)
		return;
	fits_without(p, job, best_k, best, best_m);
	o->preempt[o->npreempt++] = (struct plan_preempt){
		.job = j, .node = best_k, .victims = o->victims + o->nvictims, .nvictims = best_m,
		.cards = o->pcards + o->npcards, .ncards = (size_t)job->need,
	};
	for (size_t v = 0; v < best_m; v++) {
		p->victim[best[v]] = 1;
		o->victims[o->nvictims++] = best[v];
	}
	for (size_t c = 0; c < (size_t)job->need; c++) {
		long s = plan_slot(in->nodes[best_k].gpus, in->nodes[best_k].ngpus, p->scratch[c]);

		o->pcards[o->npcards++] = p->scratch[c];
		if (s < 0)
			continue;
		hold_card(p, j, best_k, (size_t)s);
		if (p->staged[p->base[best_k] + (size_t)s])
			p->unstage[p->staged[p->base[best_k] + (size_t)s] - 1] = 1;
	}
}

/* May J be placed at NOW: not held, its begin come, its array below
 * its limit?  A begin still to come is noted in OUT's wake_at. */
static int eligible(const struct pass *p, const struct plan_job *j, long long now,
		    struct plan_out *out)
{
	if (j->held || j->blocked)
		return 0;
	if (j->group && p->running[j->group - 1] >= p->in->groups[j->group - 1].max)
		return 0;
	if (j->begin > now) {
		if (!out->wake_at || j->begin < out->wake_at)
			out->wake_at = j->begin;
		return 0;
	}
	return 1;
}

/* Would J pass its owner's max_gpus (a lab's spool)? */
static int over_limit(const struct pass *p, const struct plan_job *j)
{
	const struct plan_user *u = j->user ? &p->in->users[j->user - 1] : NULL;

	return u && j->need && u->max_gpus != LAB_NONE && p->uheld[j->user - 1] + j->need > u->max_gpus;
}

/* J's cards are its owner's now. */
static void user_takes(struct pass *p, const struct plan_job *j)
{
	if (j->user)
		p->uheld[j->user - 1] += j->need;
}

/* ---- the baton ------------------------------------------------------------- */

/* The run leasing card G alone, or in->nruns. */
static size_t holder(const struct plan_in *in, const struct gpu_info *g)
{
	if (!g->lease || g->nshares)
		return in->nruns;
	for (size_t r = 0; r < in->nruns; r++)
		if (!strcmp(in->runs[r].aid, g->lease))
			return r;
	return in->nruns;
}

/* May J be staged on card slot I of node K (plan.h)?  0 no, 1 yes, 2
 * yes once the staged run after J that waits for it is un-staged; 3
 * no (its holder is yielding), but that staged run is un-staged all
 * the same: the card frees soon, and is J's to be placed on. */
static int stage_ok(const struct pass *p, const struct plan_job *j, size_t k, size_t i)
{
	const struct plan_node *n = &p->in->nodes[k];
	const struct gpu_info *g = &n->gpus[i];
	size_t c = p->base[k] + i, r = p->holder[c], st = p->staged[c];
	long long kept = kept_for(p, k, g->index);
	const struct plan_run *v = &p->in->runs[r];
	int before = st && later(p, st - 1, j) && !p->unstage[st - 1];

	if (!gpu_eligible(n->conf, g->index) || !big_enough(j, g) || (kept && kept != j->id) ||
	    p->card[c] || r == p->in->nruns || v->staged || p->victim[r] || !v->started || v->share)
		return 0;
	if (v->yielding)
		return before ? 3 : 0;
	/* Never behind a job it may preempt: it takes the cards sooner
	 * (once the node's snapshot is fresh, preempt() decides). */
	if (p->in->preempt && v->resumable && v->prio < j->prio)
		return 0;
	if (!st)
		return 1;
	return before ? 2 : 0;
}

/* Job J, left waiting: staged on the first node that has its cards
 * about to free (written to OUT at SCARDS' end), or the staged runs
 * after it that wait for them un-staged.  How many cards no staged job
 * waited for it took out of play (batons' count of those left). */
static size_t stage(struct pass *p, size_t j)
{
	const struct plan_job *job = &p->in->jobs[j];
	struct plan_out *o = p->out;
	int *cards = o->scards + o->nscards;
	size_t fresh = 0;

	/* Cards free for it that a node's snapshot shows, not trusted yet
	 * (a query is on its way): it is placed there, not staged -- on
	 * a node its checkpoint could be copied to too (travel). */
	for (size_t k = 0; k < p->in->nnodes; k++)
		if ((may_use(job, &p->in->nodes[k]) || may_move(job, &p->in->nodes[k])) &&
		    open_node(job, &p->in->nodes[k]) && p->in->nodes[k].known &&
		    fits(p, job, k, p->scratch, NULL))
			return 0;
	for (size_t k = 0; k < p->in->nnodes; k++) {
		const struct plan_node *n = &p->in->nodes[k];
		size_t got = 0, at[GPU_INDEX_MAX + 1];   /* a node's slots: distinct indices */
		int conflict = 0;

		/* Known is enough: the snapshot says who leases each card (a
		 * launch marks its own), and the worker checks the cards when
		 * it starts the job; a guess gone wrong is un-staged. */
		if (!n->stage || !may_use(job, n) || !open_node(job, n) || !n->known || !room(p, k))
			continue;
		for (size_t i = 0; i < n->ngpus && got < (size_t)job->need; i++) {
			int ok;

			if (!pinned_to(job, n->gpus[i].index) || !(ok = stage_ok(p, job, k, i)))
				continue;
			conflict |= ok >= 2;
			at[got++] = i;
		}
		if (got != (size_t)job->need)
			continue;
		for (size_t c = 0; c < got; c++) {
			size_t slot = p->base[k] + at[c];

			if (p->staged[slot])
				p->unstage[p->staged[slot] - 1] = 1;
			else
				fresh++;
			p->card[slot] |= TAKEN;
			cards[c] = n->gpus[at[c]].index;
		}
		if (!conflict) {
			o->stage[o->nstage++] = (struct plan_place){ .job = j, .node = k, .cards = cards,
								    .ncards = got };
			o->nscards += got;
			p->placed[k]++;
			user_takes(p, job);
			if (job->group)
				p->running[job->group - 1]++;
		}
		return fresh;
	}
	return 0;
}

/* The baton's part of a pass, after the placements: staged runs that
 * may now be placed, or whose node is drained, are un-staged; the jobs
 * left waiting are staged in dispatch order while cards about to free
 * are left. */
static void batons(struct pass *p, long long now)
{
	const struct plan_in *in = p->in;
	size_t left = 0, last = in->nruns;

	for (size_t r = 0; r < in->nruns; r++) {
		const struct plan_run *v = &in->runs[r];

		if (!v->staged || p->unstage[r])
			continue;
		if (in->nodes[v->node].drained) {
			p->unstage[r] = 1;
			continue;
		}
		for (size_t k = 0; v->job && k < in->nnodes; k++)
			if ((may_use(v->job, &in->nodes[k]) || may_move(v->job, &in->nodes[k])) &&
			    open_node(v->job, &in->nodes[k]) &&
			    usable(&in->nodes[k]) && room(p, k) && fits(p, v->job, k, p->scratch, NULL)) {
				p->unstage[r] = 1;      /* a better placement: free cards now */
				break;
			}
	}
	/* Who leases each card, once; and how many cards may yet take a
	 * staged job (the walk ends when none is left). */
	for (size_t k = 0; k < in->nnodes; k++)
		for (size_t i = 0; i < in->nodes[k].ngpus; i++) {
			size_t c = p->base[k] + i;

			p->holder[c] = in->nodes[k].stage ? holder(in, &in->nodes[k].gpus[i]) : in->nruns;
			left += p->holder[c] < in->nruns && !p->staged[c] && !p->card[c] &&
				!in->runs[p->holder[c]].yielding;
		}
	/* A staged job's cards may still go to a job before it: the walk
	 * goes on while jobs before the last staged one come. */
	for (size_t r = 0; r < in->nruns; r++)
		if (in->runs[r].staged && !p->unstage[r] &&
		    (last == in->nruns || in->runs[r].prio < in->runs[last].prio ||
		     (in->runs[r].prio == in->runs[last].prio && in->runs[r].id > in->runs[last].id)))
			last = r;
	for (size_t j = 0; j < in->njobs && (left || (last < in->nruns && later(p, last, &in->jobs[j])));
	     j++) {
		const struct plan_job *job = &in->jobs[j];
		size_t used;

		if (p->cand[j] == 0)    /* past where the pass stopped */
			p->cand[j] = eligible(p, job, now, p->out) && job->need && !job->never_noted &&
				     !over_limit(p, job) ? 1 : 2;
		if (p->cand[j] != 1 || job->share)
			continue;
		for (size_t r = 0; r < in->nresv; r++)
			if (in->resv[r].job == job->id)
				goto next;      /* cards are kept for it */
		used = stage(p, j);
		left -= used < left ? used : left;
next:;
	}
}

static void pass_free(struct pass *p)
{
	free(p->card);
	free(p->base);
	free(p->placed);
	free(p->running);
	free(p->victim);
	free(p->freed);
	free(p->scratch);
	free(p->nsh);
	free(p->shmem);
	free(p->staged);
	free(p->unstage);
	free(p->cand);
	free(p->holder);
	free(p->uheld);
}

int plan(const struct plan_in *in, long long now, struct plan_out *out)
{
	struct pass p = { .in = in, .out = out, .now = now };
	size_t maxg = 0;
	long long starve = in->reserve_after_seconds * 1000;
	size_t nfree = 0, ncpu = 0, nshare = 0;
	int moved;

	memset(out, 0, sizeof *out);
	for (size_t k = 0; k < in->nnodes; k++) {
		p.ncards += in->nodes[k].ngpus;
		p.cap += in->nodes[k].ngpus * (size_t)(in->nodes[k].conf->max_jobs_per_gpu > 1 ?
						       in->nodes[k].conf->max_jobs_per_gpu : 1);
		if (in->nodes[k].ngpus > maxg)
			maxg = in->nodes[k].ngpus;
	}
	for (size_t j = 0; j < in->njobs; j++) {
		ncpu += in->jobs[j].need == 0 && !in->jobs[j].held && !in->jobs[j].blocked &&
			in->jobs[j].begin <= now;
		nshare += in->jobs[j].share;
	}
	p.card = calloc(p.ncards + 1, 1);
	p.base = malloc((in->nnodes + 1) * sizeof *p.base);
	p.placed = calloc(in->nnodes + 1, sizeof *p.placed);
	p.running = malloc((in->ngroups + 1) * sizeof *p.running);
	p.victim = calloc(in->nruns + 1, 1);
	p.freed = malloc(maxg + 1);
	p.scratch = malloc((p.ncards + 1) * sizeof *p.scratch);
	p.nsh = calloc(p.ncards + 1, sizeof *p.nsh);
	p.shmem = calloc(p.ncards + 1, sizeof *p.shmem);
	p.staged = calloc(p.ncards + 1, sizeof *p.staged);
	p.unstage = calloc(in->nruns + 1, 1);
	p.cand = calloc(in->njobs + 1, 1);
	p.holder = malloc((p.ncards + 1) * sizeof *p.holder);
	p.uheld = malloc((in->nusers + 1) * sizeof *p.uheld);
	out->limit = malloc((in->njobs + 1) * sizeof *out->limit);
	out->stage = malloc((in->njobs + 1) * sizeof *out->stage);
	out->scards = malloc((p.ncards + 1) * sizeof *out->scards);
	out->unstage = malloc((in->nruns + 1) * sizeof *out->unstage);
	out->preempt = malloc((in->njobs + 1) * sizeof *out->preempt);
	out->victims = malloc((in->nruns + 1) * sizeof *out->victims);
	out->pcards = malloc((p.ncards + 1) * sizeof *out->pcards);
	out->cards = malloc((p.cap + 1) * sizeof *out->cards);
	out->hold = malloc((p.ncards + 1) * sizeof *out->hold);
	out->place = malloc((in->njobs + 1) * sizeof *out->place);
	out->why = malloc((in->njobs + 1) * sizeof *out->why);
	out->full = malloc((in->njobs + 1) * sizeof *out->full);
	if (!p.card || !p.base || !p.placed || !p.running || !p.victim || !p.freed || !p.scratch || !p.nsh ||
	    !p.shmem || !p.staged || !p.unstage || !p.cand || !p.holder || !out->stage || !out->scards ||
	    !out->unstage || !out->cards ||
	    !out->hold || !out->place || !out->why || !out->full || !out->preempt || !out->victims || !out->pcards ||
	    !p.uheld || !out->limit)
		goto oom;
	for (size_t u = 0; u < in->nusers; u++)
		p.uheld[u] = in->users[u].held;
	for (size_t g = 0; g < in->ngroups; g++)
		p.running[g] = in->groups[g].running;
	for (size_t k = 0, b = 0; k < in->nnodes; b += in->nodes[k++].ngpus)
		p.base[k] = b;
	/* The cards staged attempts wait for (before anything counts them). */
	for (size_t r = 0; r < in->nruns; r++) {
		const struct plan_node *n = &in->nodes[in->runs[r].node];

		for (size_t c = 0; in->runs[r].staged && c < in->runs[r].ncards; c++) {
			long s = plan_slot(n->gpus, n->ngpus, in->runs[r].cards[c]);

			if (s >= 0)
				p.staged[p.base[in->runs[r].node] + (size_t)s] = r + 1;
		}
	}
	for (size_t k = 0; k < in->nnodes; k++)
		if (in->nodes[k].reachable && !in->nodes[k].drained && usable(&in->nodes[k]))
			nfree += free_cards(&p, k, NULL);
	for (size_t j = 0; j < in->njobs; j++) {
		const struct plan_job *job = &in->jobs[j];
		size_t k;
		char *why;

		if (!eligible(&p, job, now, out)) {
			p.cand[j] = 2;
			continue;
		}
		/* No free card and no CPU job left: nothing more can be
		 * placed, and the pass costs the work, not the queue.  (A
		 * kept card is free for its job alone: not counted.) */
		if (!nfree && !ncpu && !in->preempt && !nshare && !in->nresv) {
			out->waiting = 1;
			break;
		}
		p.cand[j] = 2;
		if (over_limit(&p, job)) {
			out->limit[out->nlimit++] = (struct plan_limit){ .job = j, .user = job->user,
								       .held = p.uheld[job->user - 1] };
			continue;
		}
		if (job->need == 0)
			ncpu--;
		if ((k = node_for(&p, job, &moved)) < in->nnodes) {
			nfree -= take(&p, j, k);
			out->place[out->nplace - 1].moved = moved;
			user_takes(&p, job);
			p.placed[k]++;
			if (job->group)
				p.running[job->group - 1]++;
			continue;
		}
		if (job->need == 0)
			continue;       /* no reachable node: nothing to hold */
		out->waiting = 1;
		if (job->never_noted)
			continue;       /* known never to fit (below) */
		p.cand[j] = 1;
		if (never_fits(in, job, &why) < 0)
			goto oom;
		/* A job no node can ever take holds nothing: it says why. */
		if (why) {
			out->why[out->nwhy++] = (struct plan_why){ .job = j, .text = why };
			p.cand[j] = 2;
			continue;
		}
		if (job->share) {
			if (full_card(&p, job, &why) < 0)
				goto oom;
			if (why)
				out->full[out->nfull++] = (struct plan_why){ .job = j, .text = why };
		}
		if (in->preempt) {
			size_t before = out->npreempt;

			preempt(&p, j);
			if (out->npreempt > before) {
				p.cand[j] = 2;
				continue;
			}
		}
		if (now - job->queued_at >= starve)
			hold(&p, j);
	}
	batons(&p, now);
	for (size_t r = 0; r < in->nruns; r++)
		if (p.unstage[r])
			out->unstage[out->nunstage++] = r;
	pass_free(&p);
	return 0;
oom:
	pass_free(&p);
	plan_free(out);
	return -1;
}

enum dep_verdict plan_deps(const struct plan_dep *v, size_t n, size_t *which)
{
	for (size_t i = 0; i < n; i++)
		if (!v[i].any && (v[i].state == JS_N ||
				  (job_state_final(v[i].state) && v[i].state != JS_SUCCEEDED))) {
			*which = i;
			return DEP_CANCEL;
		}
	for (size_t i = 0; i < n; i++)
		if (v[i].state != JS_N && !job_state_final(v[i].state)) {
			*which = i;
			return DEP_WAIT;
		}
	return DEP_READY;
}

/* ---- the fair share's order ----------------------------------------------- */

struct ranked {
	double eff;
	size_t user;            /* 0: no user; else the user's index + 1 */
};

static int ranked_cmp(const void *pa, const void *pb)
{
	const struct ranked *a = pa, *b = pb;

	return (a->eff > b->eff) - (a->eff < b->eff);
}

/*
 * Two stable counting sorts, O(N + users): the jobs come in (priority,
 * ID) order, so sorting them stably by their owner's rank (the order of
 * usage; equal usage, equal rank) and then stably by their priority's
 * run gives (priority, usage, ID).  The second sort costs one pass: each
 * job goes to the next free place of its priority's run, where the runs
 * already are.
 */
int plan_fair_order(const struct plan_job *jobs, size_t n, const double *eff, size_t nusers,
		    size_t *order)
{
	struct ranked *r = malloc((nusers + 1) * sizeof *r);
	size_t *rank = malloc((nusers + 1) * sizeof *rank);
	size_t *count = calloc(nusers + 2, sizeof *count);
	size_t *by_rank = malloc((n + 1) * sizeof *by_rank), *run = malloc((n + 1) * sizeof *run);
	size_t *cur = malloc((n + 1) * sizeof *cur);
	size_t nrank = 0, at = 0;
	int ok = r && rank && count && by_rank && run && cur, same = 1;

	for (size_t j = 0; j < n; j++)
		order[j] = j;
	if (!ok || !n)
		goto out;
	r[0] = (struct ranked){ 0, 0 };
	for (size_t u = 0; u < nusers; u++)
		r[u + 1] = (struct ranked){ eff[u], u + 1 };
	qsort(r, nusers + 1, sizeof *r, ranked_cmp);
	for (size_t k = 0; k <= nusers; k++) {
		nrank += k && r[k].eff != r[k - 1].eff;
		rank[r[k].user] = nrank;
	}
	for (size_t j = 0; j < n; j++) {
		count[rank[jobs[j].user] + 1]++;
		same &= rank[jobs[j].user] == rank[jobs[0].user];
	}
	if (same)
		goto out;
	for (size_t k = 1; k <= nrank; k++)
		count[k] += count[k - 1];
	for (size_t j = 0; j < n; j++)
		by_rank[count[rank[jobs[j].user]]++] = j;
	/* RUN[j]: where job j's priority's run starts; CUR[that]: the run's
	 * next free place. */
	for (size_t j = 0; j < n; j++) {
		if (j && jobs[j].prio != jobs[j - 1].prio)
			at = j;
		run[j] = at;
		cur[j] = j;
	}
	for (size_t k = 0; k < n; k++)
		order[cur[run[by_rank[k]]]++] = by_rank[k];
out:
	free(r);
	free(rank);
	free(count);
	free(by_rank);
	free(run);
	free(cur);
	return ok ? !same : -1;
}

void plan_free(struct plan_out *out)
{
	for (size_t i = 0; i < out->nwhy; i++)
		free(out->why[i].text);
	for (size_t i = 0; i < out->nfull; i++)
		free(out->full[i].text);
	free(out->full);
	free(out->limit);
	free(out->place);
	free(out->stage);
	free(out->scards);
	free(out->unstage);
	free(out->preempt);
	free(out->victims);
	free(out->pcards);
	free(out->why);
	free(out->hold);
	free(out->cards);
	memset(out, 0, sizeof *out);
}
