/*
 * moves.c - a job's checkpoint copied to another node (checkpoint_transfer,
 * SPEC §9, LAYOUT.md §10), and the copies removed when the job ends.
 *
 * The plan places a travelling job on a node that cannot see its
 * checkpoint only when no node that can takes it now (plan.h `moved`).
 * sched.c then keeps those cards for it (resv) and steps it `move`: its
 * record names the node among its `checkpoint_copies` before any byte
 * is sent (so a copy begun there, whole or not, is removed when the job
 * ends, whatever happens between).  Once that record is durable (the
 * effect EF_MOVE), move_start forks the mover:
 *
 *   the mover (a child of the daemon's, killed with it: PDEATHSIG)
 *   runs `send-checkpoint --max BYTES PATH` on the source node and
 *   `receive-checkpoint JOB ATTEMPT` on the destination, each through
 *   its own ssh (as the job's owner on a run_as: owner node), and
 *   copies the one's output into the other's input itself: the stream
 *   passes through the controller, never through the spool.  It says
 *   on its standard output, as wire records, `done`/`total` every
 *   PROGRESS_MS, and at the end either the receiver's answer (`path`,
 *   `bytes`, `sha256`) or `error` (one line, the failing side's) with
 *   its exit `code` and the `side` ("from" or "to").
 *
 * The receiver writes into ATTEMPT.part, checks the size and the
 * SHA-256 the sender computed, and only then renames it into place; a
 * cut stream (the sender stopped, the mover or the daemon killed, a
 * link cut) makes it remove the partial copy.  So the daemon steps the
 * job `moved` (its checkpoint the copy's, pinned to that node, where
 * its cards are kept) only on a whole, checked copy.  Anything else
 * leaves it queued with its checkpoint where it was and the reason
 * said (move_failed: the destination left out for the job, or the job
 * no longer travelling, or moving again after a back-off, by what
 * failed).  A daemon killed mid-copy has
 * no move after its restart: the job is queued as recorded, and the
 * plan may move it again (the receiver replaces what an earlier copy
 * left).
 *
 * At a job's end (follow: final), every node in its checkpoint_copies
 * gets `drop-checkpoints JOB` (as its owner), one call at a time per
 * node, tried again every DROP_RETRY_MS while it fails; pending drops
 * live in memory only (a restart forgets them: LAYOUT.md §10 says
 * where a leftover copy lives).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spoold.h"

#define RELAY_BUF (256u << 10)
#define PROGRESS_MS 500         /* the mover says how far it is at most this often */
#define STALL_MS 120000         /* no byte for this long: the copy is given up */
#define MOVE_MAX_MS (7LL * 24 * 3600 * 1000)    /* the mover's deadline */
#define DROP_RETRY_MS 30000
#define SAID_MAX 4096           /* of each side's standard error */

struct move *move_find(const struct daemon *d, long long id)
{
	for (size_t i = 0; i < d->nmoves; i++)
		if (d->moves[i].id == id)
			return &d->moves[i];
	return NULL;
}

int move_add(struct daemon *d, const struct job *j, size_t to, size_t user)
{
	const struct attempt *a = job_last_attempt(j);
	size_t from = j->checkpoint_node ? node_index(d, j->checkpoint_node) : d->nnodes;
	struct move *v, *m;

	if (move_find(d, j->id) || from >= d->nnodes || !a || !j->checkpoint)
		return 0;
	if (!(v = realloc(d->moves, (d->nmoves + 1) * sizeof *v)))
		return -1;
	d->moves = v;
	m = &v[d->nmoves];
	*m = (struct move){ .id = j->id, .from = from, .to = to, .user = user, .total = -1 };
	m->a.in = m->a.fd = m->a.efd = -1;
	if (!(m->path = strdup(j->checkpoint)) || !(m->aid = strdup(a->id))) {
		free(m->path);
		free(m->aid);
		return -1;
	}
	d->nmoves++;
	return 0;
}

static void move_remove(struct daemon *d, struct move *m)
{
	node_view_due(&d->nodes[m->to]);
	acall_free(&m->a);
	free(m->path);
	free(m->aid);
	*m = d->moves[--d->nmoves];
}

/* ---- the mover (a child of the daemon's) ------------------------------- */

struct mover {
	struct daemon *d;
	const struct node_conf *from, *to;
	int ensure_from, ensure_to;
	const char *path, *aid;
	char id[24], max[24];
	pid_t daemon;
};

/* One side of the copy: a worker's child, its error kept. */
struct side {
	pid_t pid;
	int in, out, err;
	struct sbuf said, answer;
	int status;
};

static void say(const struct wire_rec *w)
{
	char *text = NULL;
	long len = wire_format(w, &text);

	if (len > 0)
		write_full(1, text, (size_t)len);
	free(text);
}

static void say_progress(long long done, long long total)
{
	struct wire_rec w = { 0 };

	if (wire_addf(&w, "done", "%lld", done) == 0 && wire_addf(&w, "total", "%lld", total) == 0)
		say(&w);
	wire_free(&w);
}

/* The first line of what SIDE said on its standard error, without the
 * worker's "cardbaton-worker: ", or FALLBACK. */
static char *first_line(const struct side *s, const char *fallback)
{
	static const char pre[] = "cardbaton-worker: ";
	const char *t = s->said.len ? s->said.s : fallback;
	size_t n;

	if (!strncmp(t, pre, sizeof pre - 1))
		t += sizeof pre - 1;
	n = strcspn(t, "\n");
	return n ? xasprintf("%.*s", (int)n, t) : strdup(fallback);
}

static void side_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void side_wait(struct side *s)
{
	int st;

	side_close(&s->in);
	while (waitpid(s->pid, &st, 0) < 0 && errno == EINTR)
		;
	s->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The total the stream's first line declares ("cardbaton-checkpoint 1
 * TOTAL ENTRIES"), once HDR holds it; else -1. */
static long long header_total(const struct sbuf *hdr)
{
	const char *nl = hdr->len ? memchr(hdr->s, '\n', hdr->len) : NULL;
	long long total;

	if (!nl || sscanf(hdr->s, "cardbaton-checkpoint 1 %lld ", &total) != 1 || total < 0)
		return -1;
	return total;
}

/*
 * Copy S's output into R's input until S ends (or R stops taking it, or
 * nothing moves for STALL_MS): the relay.  Both error outputs and R's
 * answer are collected meanwhile.  0, or -1 when the copy stalled.
 */
static int relay(struct side *s, struct side *r)
{
	char *buf = malloc(RELAY_BUF);
	size_t len = 0, off = 0;
	long long done = 0, total = -1, said_at = 0, moved_at = mono_now(), said_done = -1;
	struct sbuf hdr = { 0 };
	int rc = 0;

	if (!buf)
		return -1;
	while (s->out >= 0 || (len > off && r->in >= 0)) {
		struct pollfd p[5];
		int np = 0, iout = -1, iin = -1;
		long long now;

		if (s->out >= 0 && off == len) {
			iout = np;
			p[np++] = (struct pollfd){ s->out, POLLIN, 0 };
		}
		if (r->in >= 0 && off < len) {
			iin = np;
			p[np++] = (struct pollfd){ r->in, POLLOUT, 0 };
		}
		p[np++] = (struct pollfd){ s->err, s->err >= 0 ? POLLIN : 0, 0 };
		p[np++] = (struct pollfd){ r->err, r->err >= 0 ? POLLIN : 0, 0 };
		p[np++] = (struct pollfd){ r->out, r->out >= 0 ? POLLIN : 0, 0 };
		if (poll(p, (nfds_t)np, PROGRESS_MS) < 0 && errno != EINTR)
			break;
		if (iout >= 0 && p[iout].revents) {
			ssize_t n = read(s->out, buf, RELAY_BUF);

			if (n > 0) {
				if (total < 0 && hdr.len < 256 && sbuf_add(&hdr, buf, (size_t)n) == 0)
					total = header_total(&hdr);
				off = 0;
				len = (size_t)n;
			} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
				side_close(&s->out);
			}
		}
		if (iin >= 0 && p[iin].revents) {
			ssize_t n = write(r->in, buf + off, len - off);

			if (n > 0) {
				off += (size_t)n;
				done += n;
				moved_at = mono_now();
			} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
				side_close(&r->in);     /* it stopped taking it: its error says why */
				break;
			}
		}
		if (r->in < 0)
			break;
		if (s->err >= 0 && fd_drain(s->err, &s->said, SAID_MAX))
			side_close(&s->err);
		if (r->err >= 0 && fd_drain(r->err, &r->said, SAID_MAX))
			side_close(&r->err);
		if (r->out >= 0 && fd_drain(r->out, &r->answer, SAID_MAX))
			side_close(&r->out);
		now = mono_now();
		if (now - moved_at >= STALL_MS) {
			rc = -1;
			break;
		}
		if (total >= 0 && done != said_done && now - said_at >= PROGRESS_MS) {
			say_progress(done < total ? done : total, total);
			said_done = done;
			said_at = now;
		}
	}
	sbuf_free(&hdr);
	free(buf);
	return rc;
}

/* What is left of FD (a side's error, the answer) until its end. */
static void drain_all(int *fd, struct sbuf *b)
{
	while (*fd >= 0) {
		struct pollfd p = { *fd, POLLIN, 0 };

		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			break;
		if (fd_drain(*fd, b, SAID_MAX))
			side_close(fd);
	}
}

static void mover_child(void *arg)
{
	const struct mover *m = arg;
	const char *const sargs[] = { "send-checkpoint", "--max", m->max, m->path, NULL };
	const char *const rargs[] = { "receive-checkpoint", m->id, m->aid, NULL };
	struct side s = { .in = -1, .out = -1, .err = -1 }, r = { .in = -1, .out = -1, .err = -1 };
	struct wire_rec w = { 0 };
	const char *why = NULL;
	char *line = NULL;
	int stalled, killed;

	/* Never outlives the daemon: a copy nobody waits for is stopped
	 * (the receiver then removes what it wrote). */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != m->daemon)
		_exit(EX_OSERR_);
	signal(SIGPIPE, SIG_IGN);
	if ((s.pid = worker_start(m->d, m->from, sargs, m->ensure_from, &s.in, &s.out, &s.err)) < 0 ||
	    (r.pid = worker_start(m->d, m->to, rargs, m->ensure_to, &r.in, &r.out, &r.err)) < 0) {
		wire_add(&w, "error", strerror(errno));
		wire_add(&w, "side", "to");
		say(&w);
		_exit(EX_OSERR_);
	}
	side_close(&s.in);
	stalled = relay(&s, &r) < 0;
	/* The sender is done (or stalled, or the receiver quit: then it is
	 * stopped, and what it says is not the failure); its end reaches
	 * the receiver as the end of its input. */
	if ((killed = stalled || s.out >= 0))
		kill(-s.pid, SIGKILL);
	side_close(&s.out);
	side_close(&r.in);
	drain_all(&s.err, &s.said);
	drain_all(&r.err, &r.said);
	drain_all(&r.out, &r.answer);
	side_wait(&s);
	side_wait(&r);
	if (stalled) {
		wire_addf(&w, "error", "no data for %d s: given up", STALL_MS / 1000);
		wire_add(&w, "side", "from");
	} else if (!killed && s.status != 0) {
		line = first_line(&s, "the sender stopped");
		wire_addf(&w, "error", "%s: %s", m->from->name, line);
		wire_addf(&w, "code", "%d", s.status);
		wire_add(&w, "side", "from");
	} else if (r.status != 0) {
		line = first_line(&r, "the receiver stopped");
		wire_addf(&w, "error", "%s: %s", m->to->name, line);
		wire_addf(&w, "code", "%d", r.status);
		wire_add(&w, "side", "to");
	} else if (killed || !r.answer.len || wire_parse(r.answer.s, r.answer.len, &w, &why) <= 0 ||
		   !wire_get(&w, "path")) {
		wire_free(&w);
		wire_addf(&w, "error", "%s: receive-checkpoint: no answer", m->to->name);
		wire_add(&w, "side", "to");
	}
	say(&w);
	free(line);
	_exit(wire_get(&w, "error") ? 1 : 0);
}

/* ---- in the daemon ------------------------------------------------------ */

void move_start(struct daemon *d, long long id)
{
	struct move *m = move_find(d, id);
	struct mover mv;
	int *seen_from, *seen_to;
	struct node *from, *to;

	if (!m || m->a.pid > 0)
		return;
	from = &d->nodes[m->from];
	to = &d->nodes[m->to];
	mv = (struct mover){ .d = d, .path = m->path, .aid = m->aid, .daemon = getpid() };
	if (!(mv.from = acct_conf(d, from, link_user(d, m->from, m->user), &seen_from)) ||
	    !(mv.to = acct_conf(d, to, link_user(d, m->to, m->user), &seen_to))) {
		move_failed(d, m, "out of memory", NULL, 0);
		return;
	}
	mv.ensure_from = !*seen_from;
	mv.ensure_to = !*seen_to;
	snprintf(mv.id, sizeof mv.id, "%lld", id);
	snprintf(mv.max, sizeof mv.max, "%lld", d->cfg.checkpoint_transfer_max_gib << 30);
	if ((m->a.pid = child_start(&m->a.in, &m->a.fd, &m->a.efd, mover_child, &mv)) < 0) {
		m->a.pid = 0;
		move_failed(d, m, strerror(errno), NULL, 0);
		return;
	}
	close(m->a.in);         /* it reads nothing of ours */
	m->a.in = -1;
	m->a.started = mono_now();
	m->a.deadline = m->a.started + MOVE_MAX_MS;
	m->started = now_ms();
	CRASH_POINT("move: started", NULL);
	logmsg("job %lld: transferring checkpoint %s from %s to %s", id, m->path, from->conf->name,
	       to->conf->name);
}

/* The mover's records so far: how far it is (the destination's view
 * says it, nodes/NAME.json); at its end (LAST) its last word into
 * *LAST, left in its buffer till then. */
static void move_heard(struct daemon *d, struct move *m, struct wire_rec *last)
{
	struct sbuf *b = &m->a.buf;
	size_t off = 0;
	const char *why;
	long used;

	for (; b->s;) {
		struct wire_rec w = { 0 };
		long long done, total;

		if ((used = wire_parse(b->s + off, b->len - off, &w, &why)) <= 0) {
			wire_free(&w);
			break;
		}
		if (wire_get_ll(&w, "done", &done) == 0 && wire_get_ll(&w, "total", &total) == 0) {
			m->done = done;
			m->total = total;
			node_view_due(&d->nodes[m->to]);
			wire_free(&w);
		} else if (last) {
			wire_free(last);
			*last = w;
		} else {
			wire_free(&w);
			break;          /* its last word: read at its end */
		}
		off += (size_t)used;
	}
	if (off) {
		/* What is left: a record not whole yet. */
		memmove(b->s, b->s + off, b->len - off);
		b->len -= off;
	}
}

void move_failed(struct daemon *d, struct move *m, const char *why, const char *side, int code)
{
	long long id = m->id;
	struct node *from = &d->nodes[m->from], *to = &d->nodes[m->to];
	struct qent *q = q_find(d, id);
	char *text = xasprintf("checkpoint transfer from %s to %s failed: %s; its checkpoint stays on %s",
			       from->conf->name, to->conf->name, why, from->conf->name);
	int r = 0;

	logmsg("job %lld: %s", id, text ? text : why);
	move_remove(d, m);
	resv_drop(d, id);
	d->dirty = 1;
	if (!q) {
		free(text);
		return;
	}
	/* The sender refused the checkpoint itself (not absolute, too big,
	 * a link or a special file in it, gone): nowhere else would take
	 * it either.  The receiver could not keep it (a bad stream, no
	 * room, an I/O error): that node is left out for the job.  Anything
	 * else (a link cut, ssh, the checkpoint changing, a mover killed)
	 * may pass: the job may move again after a back-off. */
	side = side ? side : "";
	if (!strcmp(side, "from") && code >= EX_USAGE_ && code <= EX_NOINPUT_)
		q->travel = 0;
	else if (!strcmp(side, "to") && (code == EX_DATAERR_ || code == 73 /* EX_CANTCREAT: no room */ || code == EX_IOERR_))
		r = qent_away(q, to->conf->name);
	else
		q->travel_at = mono_now() + backoff_next(&q->travel_backoff, BACKOFF_MIN_MS);
	if (r < 0)
		logmsg("job %lld: out of memory", id);
	if (text)
		job_step(d, id, EV_WAIT, &(struct ev_arg){ .why = text });
	free(text);
}

void move_read(struct daemon *d, long long id)
{
	struct move *m = move_find(d, id);
	struct wire_rec last = { 0 };
	const char *path, *err, *side;
	long long code = 0;
	int status;

	if (!m)
		return;
	if (!acall_read(&m->a, &status)) {
		move_heard(d, m, NULL);
		return;
	}
	move_heard(d, m, &last);
	path = wire_get(&last, "path");
	err = wire_get(&last, "error");
	side = wire_get(&last, "side");
	wire_get_ll(&last, "code", &code);
	if (status != 0 || !path) {
		char *why = err ? NULL : xasprintf("the mover ended with status %d%s%.200s", status,
						   m->a.ebuf.len ? ": " : "", m->a.ebuf.len ? m->a.ebuf.s : "");

		move_failed(d, m, err ? err : why ? why : "out of memory", side, (int)code);
		free(why);
	} else {
		struct ev_arg a = { .node = d->nodes[m->to].conf->name, .path = path };

		CRASH_POINT("move: copy checked", NULL);
		logmsg("job %lld: checkpoint copied to %s: %s (%s bytes, sha256 %s)", id,
		       d->nodes[m->to].conf->name, path, wire_get(&last, "bytes") ? wire_get(&last, "bytes") : "?",
		       wire_get(&last, "sha256") ? wire_get(&last, "sha256") : "?");
		move_remove(d, m);
		job_step(d, id, EV_MOVED, &a);
		d->dirty = 1;
	}
	wire_free(&last);
}

void move_stop(struct daemon *d, long long id)
{
	struct move *m = move_find(d, id);

	if (!m)
		return;
	if (m->a.pid > 0)
		logmsg("job %lld: checkpoint transfer to %s stopped", id, d->nodes[m->to].conf->name);
	move_remove(d, m);
}

/* ---- removing the copies -------------------------------------------------- */

void drops_add(struct daemon *d, const struct job *j, size_t user)
{
	for (size_t c = 0; c < j->nck_copies; c++) {
		size_t k = node_index(d, j->ck_copies[c]);
		struct node *n;
		struct drop *v;

		if (k >= d->nnodes)
			continue;       /* a node no longer in the config */
		n = &d->nodes[k];
		if (!(v = realloc(n->drops, (n->ndrops + 1) * sizeof *v))) {
			logmsg("job %lld: out of memory: its checkpoint copy on %s is left there", j->id,
			       n->conf->name);
			continue;
		}
		n->drops = v;
		v[n->ndrops++] = (struct drop){ .id = j->id, .user = link_user(d, k, user) };
	}
}

/* Node N's first pending drop is answered (STATUS). */
static void drop_done(struct node *n, int status)
{
	struct drop *x = &n->drops[0];

	if (status == 0) {
		memmove(n->drops, n->drops + 1, --n->ndrops * sizeof *n->drops);
		return;
	}
	if (!x->said)
		logmsg("job %lld: removing its checkpoint copy on %s: %s%.200s; tried again", x->id,
		       n->conf->name, status < 0 ? "no answer" : "failed: ",
		       status < 0 ? "" : n->drop.ebuf.len ? n->drop.ebuf.s : "?");
	x->said = 1;
	x->at = mono_now() + DROP_RETRY_MS;
}

void drop_read(struct daemon *d, size_t k)
{
	struct node *n = &d->nodes[k];
	int status;

	if (acall_read(&n->drop, &status))
		drop_done(n, status);
}

void moves_timers(struct daemon *d, long long now, long long *next)
{
	for (size_t i = 0; i < d->nmoves; i++) {
		struct move *m = &d->moves[i];

		if (acall_expired(&m->a)) {
			move_failed(d, m, "not done within its deadline", NULL, 0);
			i--;
			continue;
		}
		if (m->a.pid > 0 && m->a.deadline < *next)
			*next = m->a.deadline;
	}
	for (size_t k = 0; k < d->nnodes; k++) {
		struct node *n = &d->nodes[k];
		char id[24];

		if (acall_expired(&n->drop))
			drop_done(n, -1);
		if (n->drop.pid > 0 || !n->ndrops || !n->reachable)
			continue;
		if (n->drops[0].at > now) {
			if (n->drops[0].at < *next)
				*next = n->drops[0].at;
			continue;
		}
		snprintf(id, sizeof id, "%lld", n->drops[0].id);
		acall_start(d, n, n->drops[0].user, &n->drop,
			    (const char *const[]){ "drop-checkpoints", id, NULL }, NODE_QUERY_MS);
		if (n->drop.pid > 0 && n->drop.deadline < *next)
			*next = n->drop.deadline;
	}
}

void moves_free(struct daemon *d)
{
	while (d->nmoves)
		move_remove(d, &d->moves[d->nmoves - 1]);
	free(d->moves);
	d->moves = NULL;
	for (size_t k = 0; k < d->nnodes; k++) {
		acall_free(&d->nodes[k].drop);
		free(d->nodes[k].drops);
		d->nodes[k].drops = NULL;
		d->nodes[k].ndrops = 0;
	}
}
