/*
 * links.c - every link to the nodes, for the main loop: the event
 * streams' and the calls' descriptors into its poll set, what poll
 * found handed to each one's handler (a query's answer to query_done,
 * a launch's to launch_answered, ...), and their deadlines.  The one
 * place that knows which answer goes where: acall.c and stream.c below
 * it only run the children and read them.
 */
#include <poll.h>

#include "spoold.h"

size_t links_pollfds(struct daemon *d, struct pollset *ps)
{
	size_t calls = 0, n;

	for (size_t k = 0; k < d->nnodes; k++) {
		struct node *nd = &d->nodes[k];

		if (pollset_room(ps, 11) < 0)
			return calls;
		n = stream_pollfd(&nd->watch, ps->p + ps->n);
		pollset_who(ps, n, PW_STREAM, k, 0);
		n = acall_pollfd(&nd->drop, ps->p + ps->n);
		pollset_who(ps, n, PW_DROP, k, 0);
		calls += n > 0;
		n = acall_pollfd(&nd->query, ps->p + ps->n);
		pollset_who(ps, n, PW_QUERY, k, 0);
		calls += n > 0;
		for (size_t u = 0; u <= nd->nacct; u++) {
			if (u && pollset_room(ps, 5) < 0)
				return calls;
			n = acall_pollfd(check_of(nd, u), ps->p + ps->n);
			pollset_who(ps, n, PW_CHECK, k, (long long)u);
			calls += n > 0;
			if (u) {
				n = stream_pollfd(&nd->acct[u - 1].watch, ps->p + ps->n);
				pollset_who(ps, n, PW_STREAM, k, (long long)u);
			}
		}
	}
	for (size_t i = 0; i < d->nmoves; i++) {
		if (pollset_room(ps, 3) < 0)
			return calls;
		n = acall_pollfd(&d->moves[i].a, ps->p + ps->n);
		pollset_who(ps, n, PW_MOVE, d->moves[i].to, d->moves[i].id);
		calls += n > 0;
	}
	for (size_t i = 0; i < d->nr; i++) {
		struct rent *e = &d->r[i];

		if (e->call.pid <= 0 && e->pause.pid <= 0)
			continue;
		if (pollset_room(ps, 6) < 0)
			return calls;
		n = acall_pollfd(&e->call, ps->p + ps->n);
		pollset_who(ps, n, PW_LAUNCH, e->node, e->id);
		calls += n > 0;
		n = acall_pollfd(&e->pause, ps->p + ps->n);
		pollset_who(ps, n, PW_PAUSE, e->node, e->id);
		calls += n > 0;
	}
	return calls;
}

/* The node's answer to a launch run as the worker (acall_read said it ended). */
static void launch_call_done(struct daemon *d, struct rent *e, int status)
{
	struct node_reply rep = { status, e->call.buf.s, e->call.buf.len, e->call.ebuf.s };

	e->call.buf = (struct sbuf){ 0 };
	e->call.ebuf = (struct sbuf){ 0 };
	launch_answered(d, e, &rep);
	node_reply_free(&rep);
}

void links_events(struct daemon *d, const struct pollset *ps, size_t from)
{
	for (size_t i = from; i < ps->n; i++) {
		const struct pollwho *w = &ps->who[i];
		struct node *n = &d->nodes[w->node];
		struct rent *e;
		int status;

		if (!ps->p[i].revents)
			continue;
		switch (w->kind) {
		case PW_STREAM:
			if ((size_t)w->job <= n->nacct)
				stream_events(d, w->node, (size_t)w->job);
			break;
		case PW_QUERY:
			if (acall_read(&n->query, &status))
				query_done(d, n, status);
			break;
		case PW_CHECK:
			if ((size_t)w->job <= n->nacct && acall_read(check_of(n, (size_t)w->job), &status))
				reconcile_done(d, w->node, (size_t)w->job, status);
			break;
		case PW_LAUNCH:
			if ((e = r_find(d, w->job)) && acall_read(&e->call, &status))
				launch_call_done(d, e, status);
			break;
		case PW_MOVE:
			move_read(d, w->job);
			break;
		case PW_DROP:
			drop_read(d, w->node);
			break;
		case PW_PAUSE:
			if ((e = r_find(d, w->job)) && acall_read(&e->pause, &status)) {
				if (e->unstaging)
					unstage_answered(d, e, status);
				else
					pause_answered(d, e, status);
			}
			break;
		}
	}
}

static void due(const struct acall *a, long long *next)
{
	if (a->pid > 0 && a->deadline < *next)
		*next = a->deadline;
}

void links_timers(struct daemon *d, long long now, long long *next)
{
	for (size_t k = 0; k < d->nnodes; k++) {
		struct node *n = &d->nodes[k];

		if (acall_expired(&n->query))
			node_failed(d, k, "no answer to a GPU query within the deadline");
		for (size_t u = 0; u <= n->nacct; u++) {
			if (acall_expired(check_of(n, u)))
				node_failed(d, k, "no answer to a status query within the deadline");
			due(check_of(n, u), next);
		}
		due(&n->query, next);
	}
	acct_timers(d, now, next);
	moves_timers(d, now, next);
	for (size_t i = 0; i < d->nr; i++) {
		struct rent *e = &d->r[i];

		/* Launching still: the reconcile sends it again. */
		if (acall_expired(&e->call))
			node_failed(d, e->node, "no answer to a launch within the deadline");
		if (acall_expired(&e->pause)) {
			logmsg("job %lld: %s: no answer from node %s within the deadline", e->id,
			       e->unstaging ? "unstage" : "pause", d->nodes[e->node].conf->name);
			e->unstaging = 0;       /* asked again by a later pass */
		}
		due(&e->call, next);
		due(&e->pause, next);
	}
	if (!d->once)
		stream_timers(d, now, next);
}
