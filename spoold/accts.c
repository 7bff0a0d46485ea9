/*
 * accts.c - run_as: owner (SPEC §12, LAYOUT.md §16): a node reached as
 * the account of each job's owner, with the lab's key.
 *
 * For every lab user with jobs, a run_as: owner node keeps an account
 * (struct acct, n->acct[user - 1]): the node's conf as that account
 * (ssh -l ACCOUNT -i LABKEY -o IdentitiesOnly=yes, link/node.c; ACCOUNT
 * is lab.accounts' name for the user, else the user's own), through
 * which every call about the user's attempts goes -- launch, status,
 * pause, unstage, cancel -- and what is known of it:
 *
 *   UNKNOWN   nothing asked through it yet: the user's jobs are not
 *             placed there (plan.h `barred`) until a probe (the
 *             worker's `version`, acct_probes, at the first pass that
 *             has the user's jobs) or any other call has answered;
 *   OK        a call through it reached the worker (or the gate): the
 *             user's jobs are placed there as anyone's;
 *   REFUSED   ssh said "Permission denied" (the key is not in the
 *             account's authorized_keys, or the account does not
 *             exist), or the gate refused the command: nothing ran
 *             there.  WHY is "alice: not authorized on lab-a (cardbaton
 *             bootstrap --node lab-a --lab)"; the user's jobs stay
 *             barred, and wait with that reason where no other node
 *             may take them (sched.c); other users are not touched.  A
 *             probe asks again after a back-off (BACKOFF_MIN_MS
 *             doubling to BACKOFF_MAX_MS, acct_timers), so her jobs
 *             start soon after she runs bootstrap --lab.  A launch
 *             refused (the key taken away since) goes back to the
 *             queue (launch_answered): nothing ran.
 *
 * A probe uses the account's status-check slot (CHECK, PROBING): one
 * call at a time per account.  The node's GPU query goes through one
 * account (acct_query_user): an OK one, else an UNKNOWN one of a user
 * with jobs.  With lease_dir (which run_as: owner needs) every
 * account's worker sees every lease.
 *
 * Each account has an event stream of its own (stream.c), while it
 * takes the key and its user has jobs: the ends of her attempts, and
 * her launches.  Such a node takes no staged attempt (the baton): an
 * attempt waiting there for another account's to end would not hear of
 * it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spoold.h"

/* Accounts (and BARRED) for every user: a user with an owner is barred
 * until her account is seen to take the key. */
int acct_grow(struct daemon *d, struct node *n)
{
	struct acct *v;
	unsigned char *b;

	if (n->nacct >= d->ntally)
		return 0;
	if (!(v = realloc(n->acct, d->ntally * sizeof *v)))
		return -1;
	n->acct = v;
	if (!(b = realloc(n->barred, d->ntally)))
		return -1;
	n->barred = b;
	memset(v + n->nacct, 0, (d->ntally - n->nacct) * sizeof *v);
	for (size_t u = n->nacct; u < d->ntally; u++)
		b[u] = d->tally[u].uid >= 0;
	n->nacct = d->ntally;
	return 0;
}

size_t link_user(const struct daemon *d, size_t k, size_t user)
{
	return d->nodes[k].conf->run_as_owner && user && d->tally[user - 1].uid >= 0 ? user : 0;
}

size_t rent_link(const struct daemon *d, const struct rent *e)
{
	return link_user(d, e->node, e->user);
}

struct acct *acct_get(struct daemon *d, struct node *n, size_t user)
{
	struct acct *a;

	errno = 0;
	if (!n->conf->run_as_owner || !user || d->tally[user - 1].uid < 0)
		return NULL;
	/* Grown only for a user it has no room for: a pointer into
	 * n->acct (a check, a stream) held by a caller stays good. */
	if (!d->labkey || (user > n->nacct && acct_grow(d, n) < 0))
		return errno = ENOMEM, NULL;
	a = &n->acct[user - 1];
	if (!a->used) {
		a->conf = *n->conf;
		a->conf.as_user = lab_account_of(d->cfg.lab, d->tally[user - 1].name);
		a->conf.as_key = d->labkey;
		a->used = 1;
	}
	return a;
}

const struct node_conf *acct_conf(struct daemon *d, struct node *n, size_t user, int **seen)
{
	struct acct *a = acct_get(d, n, user);

	if (!a && errno)
		return NULL;
	*seen = a ? &a->worker_seen : &n->worker_seen;
	return a ? &a->conf : n->conf;
}

static void acct_set(struct daemon *d, struct node *n, struct acct *a, enum acct_state st)
{
	size_t user = (size_t)(a - n->acct) + 1;

	/* No longer refused: its jobs' reason may be said again. */
	for (size_t i = 0; a->state == ACCT_REFUSED && st != ACCT_REFUSED && i < d->nq; i++)
		d->q[i]->acct_noted &= d->q[i]->user != user;
	d->nrefused += (st == ACCT_REFUSED) - (a->state == ACCT_REFUSED);
	n->barred[user - 1] = st != ACCT_OK;
	d->dirty |= (st == ACCT_OK) != (a->state == ACCT_OK);
	a->state = st;
}

int acct_answer(struct daemon *d, struct node *n, size_t user, int status, const struct sbuf *err)
{
	struct acct *a = acct_get(d, n, user);
	const char *e = err->len ? err->s : "";        /* a call's last, not one before */
	const char *gate = status == 77 || status == 255 ? strstr(e, "cardbaton-gate: refused") : NULL;
	const char *name, *node = n->conf->name;
	char *why;

	if (!a)
		return 0;
	name = d->tally[user - 1].name;
	if (!(status == 255 && strstr(e, "Permission denied")) && !gate) {
		/* Whatever answered past ssh was the worker (or its gate). */
		if (status != 255 && status >= 0) {
			if (a->why) {   /* refused before */
				logmsg("node %s: %s: the lab's key is taken", node, name);
				free(a->why);
				a->why = NULL;
			}
			acct_set(d, n, a, ACCT_OK);
			a->backoff = 0;
			a->worker_seen = 1;
		}
		return 0;
	}
	why = gate ? xasprintf("%s: the lab's key is refused on %s: %.*s", name, node,
			       (int)strcspn(gate, "\n"), gate)
		   : xasprintf("%s: not authorized on %s (cardbaton bootstrap --node %s --lab)", name,
			       node, node);
	if (why && (a->state != ACCT_REFUSED || !a->why || strcmp(a->why, why)))
		logmsg("node %s: %s", node, why);
	if (why) {
		free(a->why);
		a->why = why;
	}
	acct_set(d, n, a, ACCT_REFUSED);
	a->retry_at = mono_now() + backoff_next(&a->backoff, BACKOFF_MIN_MS);
	node_view_due(n);
	d->dirty = 1;
	return 1;
}

size_t acct_query_user(struct daemon *d, struct node *n)
{
	size_t unknown = 0;

	if (!n->conf->run_as_owner)
		return 0;
	for (size_t u = 1; u <= d->ntally; u++) {
		struct acct *a = u <= n->nacct && n->acct[u - 1].used ? &n->acct[u - 1] : NULL;

		if (a && a->state == ACCT_OK)
			return u;
		if (!unknown && d->tally[u - 1].jobs > 0 && (!a || a->state == ACCT_UNKNOWN) &&
		    acct_get(d, n, u))
			unknown = u;
	}
	return unknown ? unknown : ACCT_NONE;
}

/* Ask USER's account on N whether it takes the key (its check slot
 * free): the answer comes to reconcile_done. */
static void acct_probe(struct daemon *d, struct node *n, size_t user, struct acct *a)
{
	static const char *const args[] = { "version", NULL };

	if (a->check.pid > 0)
		return;
	if (acall_start(d, n, user, &a->check, args, NODE_QUERY_MS) == 0 && a->check.pid > 0)
		a->probing = 1;
}

void acct_probes(struct daemon *d)
{
	for (size_t k = 0; k < d->nnodes; k++) {
		struct node *n = &d->nodes[k];

		if (!n->conf->run_as_owner || (!n->reachable && mono_now() < n->retry_at))
			continue;
		for (size_t u = 1; u <= d->ntally; u++) {
			struct acct *a;

			if (d->tally[u - 1].jobs > 0 && (a = acct_get(d, n, u)) && a->state == ACCT_UNKNOWN)
				acct_probe(d, n, u, a);
		}
	}
}

void acct_timers(struct daemon *d, long long now, long long *next)
{
	for (size_t k = 0; d->nrefused && k < d->nnodes; k++) {
		struct node *n = &d->nodes[k];

		for (size_t u = 0; u < n->nacct; u++) {
			struct acct *a = &n->acct[u];

			if (a->state != ACCT_REFUSED || a->check.pid > 0)
				continue;
			if (now < a->retry_at) {
				if (a->retry_at < *next)
					*next = a->retry_at;
				continue;
			}
			/* Asked again; meanwhile the next back-off counts. */
			a->retry_at = now + (a->backoff ? a->backoff : BACKOFF_MIN_MS);
			acct_probe(d, n, u + 1, a);
		}
	}
}

void acct_free(struct node *n)
{
	for (size_t u = 0; u < n->nacct; u++) {
		acall_free(&n->acct[u].check);
		free(n->acct[u].why);
		sbuf_free(&n->acct[u].watch.buf);
		sbuf_free(&n->acct[u].watch.wq);
	}
	free(n->acct);
	free(n->barred);
}
