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

void stream_start(struct daemon *d, struct node *n)
{
	static const char *const args[] = { "watch", NULL };
	pid_t pid = worker_start(d, n->conf, args, 1, &n->watch_in, &n->watch_out, NULL);

	n->watch_retry_at = 0;
	if (pid < 0) {
		logmsg("node %s: watch: %s", n->conf->name, strerror(errno));
		n->watch_retry_at = mono_now() + BACKOFF_MIN_MS;
		return;
	}
	n->watch_pid = pid;
	n->watch_buf.len = n->watch_wq.len = n->watch_woff = 0;
	n->watch_ready = n->watch_launch = n->watch_stage = n->watch_failed = 0;
	n->watch_started = mono_now();
	n->watch_deadline = n->watch_started + STREAM_CONNECT_MS;
}

/* Stop N's stream; it is started again after its back-off (FAILED) or
 * at once.  Launches it was asked for and did not answer stay
 * `launching`: the reconcile its next `ready` brings sends them again. */
static void stream_down(struct daemon *d, struct node *n, const char *why)
{
	int failed = why != NULL;
	long long now = mono_now();
	size_t k = (size_t)(n - d->nodes);

	if (n->watch_pid > 0) {
		close(n->watch_in);
		close(n->watch_out);
		kill(-n->watch_pid, SIGTERM);
		while (waitpid(n->watch_pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	n->watch_pid = 0;
	n->watch_buf.len = n->watch_wq.len = n->watch_woff = 0;
	if (n->watch_ready && now - n->watch_since >= STREAM_STABLE_MS)
		n->watch_backoff = 0;   /* it worked for a while: a new episode */
	if (failed)
		n->watch_backoff = n->watch_backoff ? n->watch_backoff * 2 : STREAM_BACKOFF_MIN_MS;
	if (n->watch_backoff > BACKOFF_MAX_MS)
		n->watch_backoff = BACKOFF_MAX_MS;
	n->watch_retry_at = now + (failed ? n->watch_backoff : 0);
	if (failed)
		logmsg("node %s: %s; restarting the event stream in %lld s", n->conf->name, why,
		       (n->watch_backoff + 999) / 1000);
	n->watch_ready = n->watch_launch = n->watch_stage = 0;
	for (size_t i = 0; i < d->nr; i++)
		if (d->r[i].node == k)
			d->r[i].asked = 0;
	d->next_reconcile = now;
}

void stream_stop(struct daemon *d, struct node *n)
{
	stream_down(d, n, NULL);
	n->watch_retry_at = 0;
	sbuf_free(&n->watch_buf);
	sbuf_free(&n->watch_wq);
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
 * one asked of N (the worker answers in order). */
static struct rent *asked_of(struct daemon *d, size_t k, const struct wire_rec *w)
{
	const char *aid = wire_get(w, "attempt");
	struct rent *best = NULL;

	if (aid) {
		struct rent *e = r_find_aid(d, aid);

		return e && e->asked ? e : NULL;
	}
	for (size_t i = 0; i < d->nr; i++)
		if (d->r[i].node == k && d->r[i].asked && (!best || d->r[i].asked_at < best->asked_at))
			best = &d->r[i];
	return best;
}

static void on_reply(struct daemon *d, size_t k, const struct wire_rec *w)
{
	struct rent *e = asked_of(d, k, w);
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

/* Apply the whole records in N's buffer. */
static void stream_process(struct daemon *d, size_t k)
{
	struct node *n = &d->nodes[k];
	size_t off = 0;

	for (;;) {
		struct wire_rec w = { 0 };
		const char *why, *aid, *rq;
		long used = wire_parse(n->watch_buf.s + off, n->watch_buf.len - off, &w, &why);
		struct rent *e;

		if (used == 0) {
			wire_free(&w);
			break;
		}
		if (used < 0) {
			char *msg = xasprintf("event stream: %s", why);

			wire_free(&w);
			stream_down(d, n, msg ? msg : "event stream: not records");
			free(msg);
			return;
		}
		off += (size_t)used;
		if (wire_get(&w, "reply")) {
			on_reply(d, k, &w);
		} else if (!n->watch_ready && wire_get(&w, "error")) {
			/* The connecting child could not: the end follows. */
			n->watch_failed = 1;
			node_failed(d, k, wire_get(&w, "error"));
		} else if (wire_get(&w, "ready") || wire_get(&w, "overflow")) {
			/* Events from now on are seen (or some were lost): catch
			 * up by asking about every attempt. */
			if (wire_get(&w, "ready")) {
				n->watch_ready = n->worker_seen = 1;
				n->watch_since = mono_now();
				n->watch_launch = (rq = wire_get(&w, "requests")) && !strcmp(rq, "launch");
				n->watch_stage = n->watch_launch && (rq = wire_get(&w, "stage")) &&
						 !strcmp(rq, "1");
				node_ok(d, k);
			}
			reconcile_node(d, k);
		} else if ((aid = wire_get(&w, "attempt")) && (e = r_find_aid(d, aid))) {
			apply_attempt(d, e, &w);
		}
		wire_free(&w);
		if (n->watch_pid <= 0)
			return;         /* stopped by what was applied */
	}
	memmove(n->watch_buf.s, n->watch_buf.s + off, n->watch_buf.len - off);
	n->watch_buf.len -= off;
}

static void stream_write(struct daemon *d, struct node *n)
{
	while (n->watch_woff < n->watch_wq.len) {
		ssize_t w = write(n->watch_in, n->watch_wq.s + n->watch_woff,
				  n->watch_wq.len - n->watch_woff);

		if (w > 0) {
			n->watch_woff += (size_t)w;
		} else if (w < 0 && errno == EINTR) {
			continue;
		} else if (w < 0 && errno == EAGAIN) {
			return;
		} else {
			stream_down(d, n, "cannot write to the event stream");
			return;
		}
	}
	n->watch_wq.len = n->watch_woff = 0;
}

int stream_send(struct daemon *d, struct node *n, const char *op, const char *rec, size_t len)
{
	if (n->watch_pid <= 0 || !n->watch_launch)
		return -1;
	if (sbuf_addf(&n->watch_wq, "request %s\n", op) < 0 || sbuf_add(&n->watch_wq, rec, len) < 0)
		return -1;
	stream_write(d, n);
	return n->watch_pid > 0 ? 0 : -1;
}

size_t stream_pollfd(const struct node *n, struct pollfd *p)
{
	if (n->watch_pid <= 0)
		return 0;
	p[0] = (struct pollfd){ n->watch_out, POLLIN, 0 };
	if (n->watch_woff >= n->watch_wq.len)
		return 1;
	p[1] = (struct pollfd){ n->watch_in, POLLOUT, 0 };
	return 2;
}

void stream_events(struct daemon *d, size_t k)
{
	struct node *n = &d->nodes[k];
	char buf[65536];
	ssize_t r;

	if (n->watch_pid <= 0)
		return;
	if (n->watch_woff < n->watch_wq.len)
		stream_write(d, n);
	if (n->watch_pid <= 0)
		return;
	r = read(n->watch_out, buf, sizeof buf);
	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (r > 0) {
		if (sbuf_add(&n->watch_buf, buf, (size_t)r) == 0)
			stream_process(d, k);
		return;
	}
	stream_down(d, n, n->watch_ready ? "event stream ended" :
		    n->watch_failed ? "cannot start the event stream" :
		    "event stream ended before it was ready");
}

void stream_timers(struct daemon *d, long long now, long long *next)
{
	for (size_t k = 0; k < d->nnodes; k++) {
		struct node *n = &d->nodes[k];

		if (n->watch_pid <= 0) {
			if (n->watch_retry_at && now >= n->watch_retry_at)
				stream_start(d, n);
			else if (n->watch_retry_at && n->watch_retry_at < *next)
				*next = n->watch_retry_at;
			continue;
		}
		if (!n->watch_ready && now >= n->watch_deadline) {
			node_failed(d, k, "the event stream was not ready within the deadline");
			stream_down(d, n, "not ready within the deadline");
		} else if (!n->watch_ready && n->watch_deadline < *next) {
			*next = n->watch_deadline;
		}
	}
	for (size_t i = 0; i < d->nr; i++) {
		struct rent *e = &d->r[i];
		struct node *n = &d->nodes[e->node];

		if (!e->asked)
			continue;
		if (now - e->asked_at >= NODE_CALL_MS) {
			node_failed(d, e->node, "launch: no answer on the event stream");
			stream_down(d, n, "a launch got no answer on the event stream");
		} else if (e->asked_at + NODE_CALL_MS < *next) {
			*next = e->asked_at + NODE_CALL_MS;
		}
	}
}
