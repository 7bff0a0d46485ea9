/*
 * stream.c - each node's event stream: one `cardbaton-worker watch`
 * per node, which the daemon never waits for.
 *
 *   down --start--> connecting --`ready`--> ready --end / bad record /
 *    ^                  |                     |    a request unanswered
 *    |                  +--end, `error`-------+----> down (back-off)
 *
 * connecting: a child of ours makes sure the worker is installed on the
 *   node (node_ensure_worker: one probe, and the shipping if needed, each
 *   with its own deadline), then execs `cardbaton-worker watch` there,
 *   locally or through ssh.  Its standard streams are two non-blocking
 *   pipes from the start, so nothing of this holds up the loop: a node
 *   that does not answer delays only itself.  A failure comes back as
 *   one `error` record and the end of the stream.
 * ready: the `ready` record says that events are seen from now on (a
 *   reconcile catches up on what came before).  State records of
 *   attempts arrive at any time and are applied (jobs.c apply_attempt);
 *   requests (`request launch` + a spec, LAYOUT.md section 10) go out
 *   through a write buffer as the pipe takes them, and each one's
 *   `reply` record is applied as an event (jobs.c launch_answered).
 * down: the stream is stopped; launches that got no reply stay
 *   `launching` and are sent again after the reconcile that the next
 *   `ready` brings (the worker answers a repeated launch with what is
 *   there, LAYOUT.md section 8).  It is started again after a back-off
 *   that doubles from STREAM_BACKOFF_MIN_MS to BACKOFF_MAX_MS, reset
 *   once a stream has stayed ready STREAM_STABLE_MS: a node whose state
 *   directory is broken is not asked every second.
 *
 * A node has one stream, as its own conf; a run_as: owner node one per
 * account (accts.c) instead, each watching that account's attempts:
 * started while the account takes the lab's key and its user has jobs,
 * stopped when she has none left.  A stream is named by its node K and
 * USER (0: the node's own; stream_of).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spoold.h"

struct wstream *stream_of(struct node *n, size_t user)
{
	return user ? &n->acct[user - 1].watch : &n->watch;
}

void stream_start(struct daemon *d, size_t k, size_t user)
{
	static const char *const args[] = { "watch", NULL };
	struct node *n = &d->nodes[k];
	int *seen;
	const struct node_conf *nc = acct_conf(d, n, user, &seen);    /* before stream_of */
	struct wstream *ws = stream_of(n, user);
	pid_t pid = nc ? worker_start(d, nc, args, 1, &ws->in, &ws->out, NULL) : -1;

	ws->retry_at = 0;
	if (pid < 0) {
		logmsg("node %s: watch: %s", n->conf->name, nc ? strerror(errno) : "out of memory");
		ws->retry_at = mono_now() + BACKOFF_MIN_MS;
		return;
	}
	ws->pid = pid;
	ws->buf.len = ws->wq.len = ws->woff = 0;
	ws->ready = ws->launch = ws->stage = ws->failed = 0;
	ws->started = mono_now();
	ws->deadline = ws->started + STREAM_CONNECT_MS;
}

/* Stop stream (K, USER); it is started again after its back-off
 * (WHY: it failed) or at once.  Launches it was asked for and did not
 * answer stay `launching`: the reconcile its next `ready` brings sends
 * them again. */
static void stream_down(struct daemon *d, size_t k, size_t user, const char *why)
{
	struct node *n = &d->nodes[k];
	struct wstream *ws = stream_of(n, user);
	int failed = why != NULL;
	long long now = mono_now();

	if (ws->pid > 0) {
		close(ws->in);
		close(ws->out);
		kill(-ws->pid, SIGTERM);
		while (waitpid(ws->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	ws->pid = 0;
	ws->buf.len = ws->wq.len = ws->woff = 0;
	if (ws->ready && now - ws->since >= STREAM_STABLE_MS)
		ws->backoff = 0;        /* it worked for a while: a new episode */
	ws->retry_at = now + (failed ? backoff_next(&ws->backoff, STREAM_BACKOFF_MIN_MS) : 0);
	if (failed)
		logmsg("node %s%s%s: %s; restarting the event stream in %lld s", n->conf->name,
		       user ? " as " : "", user ? n->acct[user - 1].conf.as_user : "", why,
		       (ws->backoff + 999) / 1000);
	ws->ready = ws->launch = ws->stage = 0;
	for (size_t i = 0; i < d->nr; i++)
		if (d->r[i].node == k && rent_link(d, &d->r[i]) == user)
			d->r[i].asked = 0;
	d->next_reconcile = now;
}

void stream_stop(struct daemon *d, size_t k, size_t user)
{
	struct wstream *ws = stream_of(&d->nodes[k], user);

	stream_down(d, k, user, NULL);
	ws->retry_at = 0;
	sbuf_free(&ws->buf);
	sbuf_free(&ws->wq);
}

/* A `reply` record W as a node_reply (what the worker run as a process
 * would have given: exit status, standard output and error). */
static void reply_of(const struct wire_rec *w, struct node_reply *rep)
{
	long long v;

	memset(rep, 0, sizeof *rep);
	rep->status = wire_get_ll(w, "exit", &v) == 0 && v >= 0 && v < 256 ? (int)v : -1;
	for (size_t i = 0; i < w->n; i++) {
		char **dst = !strcmp(w->f[i].key, "out") ? &rep->out :
			     !strcmp(w->f[i].key, "error") ? &rep->err : NULL;

		if (dst && !*dst)
			*dst = strndup(w->f[i].val, w->f[i].len);
	}
	if (rep->status < 0 && !rep->err && wire_get(w, "failed"))
		rep->err = xasprintf("launch on the node: %s", wire_get(w, "failed"));
	if (!rep->out)
		rep->out = strdup("");
	if (!rep->err)
		rep->err = strdup("");
	rep->outlen = rep->out ? strlen(rep->out) : 0;
}

/* The launch a reply answers: the attempt it names, else the oldest
 * one asked of stream (K, USER) (the worker answers in order). */
static struct rent *asked_of(struct daemon *d, size_t k, size_t user, const struct wire_rec *w)
{
	const char *aid = wire_get(w, "attempt");
	struct rent *best = NULL;

	if (aid) {
		struct rent *e = r_find_aid(d, aid);

		return e && e->asked ? e : NULL;
	}
	for (size_t i = 0; i < d->nr; i++)
		if (d->r[i].node == k && d->r[i].asked && rent_link(d, &d->r[i]) == user &&
		    (!best || d->r[i].asked_at < best->asked_at))
			best = &d->r[i];
	return best;
}

static void on_reply(struct daemon *d, size_t k, size_t user, const struct wire_rec *w)
{
	struct rent *e = asked_of(d, k, user, w);
	struct node_reply rep;

	if (!e)
		return;         /* for an attempt that has ended meanwhile */
	e->asked = 0;
	reply_of(w, &rep);
	if (!rep.out || !rep.err)
		logmsg("job %lld: launch reply: %s", e->id, strerror(ENOMEM));
	else
		launch_answered(d, e, &rep);
	node_reply_free(&rep);
}

/* The connecting child of stream (K, USER) could not (WHY): an
 * account's refusal of the key is the account's (accts.c), anything
 * else the node's. */
static void stream_failed(struct daemon *d, size_t k, size_t user, const char *why)
{
	struct sbuf err = { .s = (char *)why, .len = strlen(why) };

	if (!acct_answer(d, &d->nodes[k], user, 255, &err))
		node_failed(d, k, why);
}

/* Apply the whole records in stream (K, USER)'s buffer. */
static void stream_process(struct daemon *d, size_t k, size_t user)
{
	struct node *n = &d->nodes[k];
	struct wstream *ws;
	size_t off = 0;

	for (;;) {
		struct wire_rec w = { 0 };
		const char *why, *aid, *rq;
		long used;
		struct rent *e;

		/* Again each time: what a record brings may move n->acct. */
		ws = stream_of(n, user);
		used = wire_parse(ws->buf.s + off, ws->buf.len - off, &w, &why);

		if (used == 0) {
			wire_free(&w);
			break;
		}
		if (used < 0) {
			char *msg = xasprintf("event stream: %s", why);

			wire_free(&w);
			stream_down(d, k, user, msg ? msg : "event stream: not records");
			free(msg);
			return;
		}
		off += (size_t)used;
		if (wire_get(&w, "reply")) {
			on_reply(d, k, user, &w);
		} else if (!ws->ready && wire_get(&w, "error")) {
			/* The connecting child could not: the end follows. */
			ws->failed = 1;
			stream_failed(d, k, user, wire_get(&w, "error"));
		} else if (wire_get(&w, "ready") || wire_get(&w, "overflow")) {
			/* Events from now on are seen (or some were lost): catch
			 * up by asking about every attempt. */
			if (wire_get(&w, "ready")) {
				ws->ready = 1;
				*(user ? &n->acct[user - 1].worker_seen : &n->worker_seen) = 1;
				ws->since = mono_now();
				ws->launch = (rq = wire_get(&w, "requests")) && !strcmp(rq, "launch");
				ws->stage = ws->launch && (rq = wire_get(&w, "stage")) && !strcmp(rq, "1");
				node_ok(d, k);
			}
			reconcile_node(d, k);
		} else if ((aid = wire_get(&w, "attempt")) && (e = r_find_aid(d, aid))) {
			apply_attempt(d, e, &w);
		}
		wire_free(&w);
		if ((ws = stream_of(n, user))->pid <= 0)
			return;         /* stopped by what was applied */
	}
	memmove(ws->buf.s, ws->buf.s + off, ws->buf.len - off);
	ws->buf.len -= off;
}

static void stream_write(struct daemon *d, size_t k, size_t user)
{
	struct wstream *ws = stream_of(&d->nodes[k], user);

	while (ws->woff < ws->wq.len) {
		ssize_t w = write(ws->in, ws->wq.s + ws->woff, ws->wq.len - ws->woff);

		if (w > 0) {
			ws->woff += (size_t)w;
		} else if (w < 0 && errno == EINTR) {
			continue;
		} else if (w < 0 && errno == EAGAIN) {
			return;
		} else {
			stream_down(d, k, user, "cannot write to the event stream");
			return;
		}
	}
	ws->wq.len = ws->woff = 0;
}

int stream_send(struct daemon *d, size_t k, size_t user, const char *op, const char *rec, size_t len)
{
	struct wstream *ws = stream_of(&d->nodes[k], user);

	if (ws->pid <= 0 || !ws->launch)
		return -1;
	if (sbuf_addf(&ws->wq, "request %s\n", op) < 0 || sbuf_add(&ws->wq, rec, len) < 0)
		return -1;
	stream_write(d, k, user);
	return ws->pid > 0 ? 0 : -1;
}

size_t stream_pollfd(const struct wstream *ws, struct pollfd *p)
{
	if (ws->pid <= 0)
		return 0;
	p[0] = (struct pollfd){ ws->out, POLLIN, 0 };
	if (ws->woff >= ws->wq.len)
		return 1;
	p[1] = (struct pollfd){ ws->in, POLLOUT, 0 };
	return 2;
}

void stream_events(struct daemon *d, size_t k, size_t user)
{
	struct wstream *ws = stream_of(&d->nodes[k], user);
	char buf[65536];
	ssize_t r;

	if (ws->pid <= 0)
		return;
	if (ws->woff < ws->wq.len)
		stream_write(d, k, user);
	if (ws->pid <= 0)
		return;
	r = read(ws->out, buf, sizeof buf);
	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (r > 0) {
		if (sbuf_add(&ws->buf, buf, (size_t)r) == 0)
			stream_process(d, k, user);
		return;
	}
	stream_down(d, k, user, ws->ready ? "event stream ended" :
		    ws->failed ? "cannot start the event stream" :
		    "event stream ended before it was ready");
}

/* Is stream (K, USER) to run?  The node's own, always (it is started
 * once, then after its back-offs); an account's while the account takes
 * the key and its user has jobs. */
static int stream_wanted(const struct daemon *d, const struct node *n, size_t user)
{
	return !user || (n->acct[user - 1].state == ACCT_OK && d->tally[user - 1].jobs > 0);
}

/* One stream's timers: started when due, stopped when no longer
 * wanted, failed past its deadline for `ready`. */
static void stream_timer(struct daemon *d, size_t k, size_t user, long long now, long long *next)
{
	struct node *n = &d->nodes[k];
	struct wstream *ws = stream_of(n, user);

	if (ws->pid <= 0) {
		if (user && stream_wanted(d, n, user) && now >= ws->retry_at)
			stream_start(d, k, user);
		else if (!user && ws->retry_at && now >= ws->retry_at)
			stream_start(d, k, user);
		else if (ws->retry_at && ws->retry_at < *next && (!user || stream_wanted(d, n, user)))
			*next = ws->retry_at;
		return;
	}
	if (!stream_wanted(d, n, user)) {
		stream_stop(d, k, user);
	} else if (!ws->ready && now >= ws->deadline) {
		node_failed(d, k, "the event stream was not ready within the deadline");
		stream_down(d, k, user, "not ready within the deadline");
	} else if (!ws->ready && ws->deadline < *next) {
		*next = ws->deadline;
	}
}

void stream_timers(struct daemon *d, long long now, long long *next)
{
	for (size_t k = 0; k < d->nnodes; k++) {
		struct node *n = &d->nodes[k];

		if (!n->conf->run_as_owner)
			stream_timer(d, k, 0, now, next);
		for (size_t u = 1; u <= n->nacct; u++)
			if (n->acct[u - 1].used)
				stream_timer(d, k, u, now, next);
	}
	for (size_t i = 0; i < d->nr; i++) {
		struct rent *e = &d->r[i];

		if (!e->asked)
			continue;
		if (now - e->asked_at >= NODE_CALL_MS) {
			node_failed(d, e->node, "launch: no answer on the event stream");
			stream_down(d, e->node, rent_link(d, e), "a launch got no answer on the event stream");
		} else if (e->asked_at + NODE_CALL_MS < *next) {
			*next = e->asked_at + NODE_CALL_MS;
		}
	}
}
