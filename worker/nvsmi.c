/*
 * nvsmi.c - asking about the cards: NVML first (nvml.c), nvidia-smi
 * when NVML is not there or fails; and parsing nvidia-smi's answer,
 * which is also the form in which nvml.c hands over NVML's.
 *
 * nvidia-smi runs with a deadline (NVSMI_TIMEOUT_MS: a wedged driver
 * makes it hang) and a cap on its output.  The parsers take a buffer so
 * that a fuzz target can call them; they accept exactly the CSV that
 * "--format=csv,noheader,nounits" prints and name the first line they
 * cannot read.  A card whose memory reads "[N/A]" is kept with its
 * memory unknown (never idle); "[N/A]"/"[Not Supported]" utilisation
 * reads as 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "worker.h"

#define NVSMI_MAX_STDERR 4096

static const char *const q_gpus =
	"--query-gpu=index,uuid,memory.used,memory.total,utilization.gpu,name";
static const char *const q_apps = "--query-compute-apps=gpu_uuid,pid,used_memory";
static const char *const q_format = "--format=csv,noheader,nounits";

void nv_free(struct nv_info *info)
{
	size_t i;

	for (i = 0; i < info->ngpu; i++) {
		free(info->gpu[i].uuid);
		free(info->gpu[i].name);
		free(info->gpu[i].pids);
	}
	free(info->gpu);
	info->gpu = NULL;
	info->ngpu = info->napps = 0;
}

const struct nv_gpu *nv_find_index(const struct nv_info *info, long long index)
{
	size_t i;

	for (i = 0; i < info->ngpu; i++)
		if (info->gpu[i].index == index)
			return &info->gpu[i];
	return NULL;
}

/* ---- parsing --------------------------------------------------------- */

/* A field [S, S+N) with blanks around it removed. */
struct span {
	const char *s;
	size_t n;
};

static struct span trim(const char *s, size_t n)
{
	struct span f;

	while (n > 0 && (*s == ' ' || *s == '\t')) {
		s++;
		n--;
	}
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
		n--;
	f.s = s;
	f.n = n;
	return f;
}

/* Split LINE at the first MAX-1 ", " separators; the last field keeps
 * the rest of the line (a GPU name may contain ", ").  Returns the
 * number of fields. */
static size_t split(const char *l, size_t n, struct span *f, size_t max)
{
	size_t k = 0, start = 0, i;

	for (i = 0; i + 1 < n && k + 1 < max; i++) {
		if (l[i] == ',' && l[i + 1] == ' ') {
			f[k++] = trim(l + start, i - start);
			start = i + 2;
			i++;
		}
	}
	f[k++] = trim(l + start, n - start);
	return k;
}

/* A non-negative decimal that fits in 2^53.  0 or -1. */
static int num(struct span f, long long *out)
{
	long long v = 0;
	size_t i;

	if (f.n == 0 || f.n > 15)
		return -1;
	for (i = 0; i < f.n; i++) {
		if (f.s[i] < '0' || f.s[i] > '9')
			return -1;
		v = v * 10 + (f.s[i] - '0');
	}
	*out = v;
	return 0;
}

/* "[N/A]", "[Not Supported]", "N/A" and the like. */
static int not_available(struct span f)
{
	if (f.n == 3 && memcmp(f.s, "N/A", 3) == 0)
		return 1;
	return f.n >= 2 && f.s[0] == '[' && f.s[f.n - 1] == ']';
}

/* A UUID becomes a file name under leases/: no '/', no control bytes or
 * blanks, not starting with '.'. */
int nv_uuid_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > 128 || s[0] == '.')
		return 0;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c <= 0x20 || c == 0x7f || c == '/' || c == ',')
			return 0;
	}
	return 1;
}

static char *dup_span(struct span f)
{
	char *s = malloc(f.n + 1);

	if (!s)
		return NULL;
	memcpy(s, f.s, f.n);
	s[f.n] = '\0';
	return s;
}

/* "line N: "TEXT"" with TEXT cut to a readable length and made
 * printable. */
static char *bad_line(const char *what, size_t lineno, const char *l, size_t n)
{
	size_t i, shown = n > 120 ? 120 : n;
	char *t = malloc(shown + 1), *m;

	if (!t)
		return NULL;
	for (i = 0; i < shown; i++) {
		unsigned char c = (unsigned char)l[i];

		t[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	t[shown] = '\0';
	m = xasprintf("nvidia-smi %s: cannot parse line %zu: \"%s%s\"",
			what, lineno, t, n > shown ? "..." : "");
	free(t);
	return m;
}

typedef int (*line_fn)(const char *l, size_t n, struct nv_info *info);

/* Call FN on every non-blank line of BUF; 0, or -1 and *err. */
static int each_line(const char *what, const char *buf, size_t len,
		     struct nv_info *info, line_fn fn, char **err)
{
	size_t pos = 0, lineno = 0;

	*err = NULL;
	while (pos < len) {
		const char *nl = memchr(buf + pos, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - (buf + pos)) : len - pos;
		struct span t = trim(buf + pos, n);
		int r;

		lineno++;
		if (t.n > 0) {
			r = fn(buf + pos, n, info);
			if (r < 0) {
				*err = r == -2 ? xasprintf("out of memory")
					       : bad_line(what, lineno, buf + pos, n);
				return -1;
			}
		}
		pos += n + (nl ? 1 : 0);
	}
	return 0;
}

/* index, uuid, memory.used, memory.total, utilization.gpu, name
 * -1: unparsable; -2: out of memory. */
static int gpu_line(const char *l, size_t n, struct nv_info *info)
{
	struct span f[6];
	struct nv_gpu g;
	struct nv_gpu *ng;
	size_t i;

	if (split(l, n, f, 6) != 6)
		return -1;
	memset(&g, 0, sizeof g);
	if (num(f[0], &g.index) < 0 || !nv_uuid_ok(f[1].s, f[1].n) || f[5].n == 0)
		return -1;
	if (num(f[2], &g.mem_used) < 0) {
		if (!not_available(f[2]))
			return -1;
		g.mem_used = -1;
	}
	if (num(f[3], &g.mem_total) < 0) {
		if (!not_available(f[3]))
			return -1;
		g.mem_total = -1;
	}
	if (num(f[4], &g.util) < 0) {
		if (!not_available(f[4]))
			return -1;
		g.util = 0;
	}
	for (i = 0; i < info->ngpu; i++)
		if (info->gpu[i].index == g.index)
			return -1;      /* the same index twice */
	ng = realloc(info->gpu, (info->ngpu + 1) * sizeof *ng);
	if (!ng)
		return -2;
	info->gpu = ng;
	g.uuid = dup_span(f[1]);
	g.name = dup_span(f[5]);
	if (!g.uuid || !g.name) {
		free(g.uuid);
		free(g.name);
		return -2;
	}
	info->gpu[info->ngpu++] = g;
	return 0;
}

/* gpu_uuid, pid, used_memory */
static int app_line(const char *l, size_t n, struct nv_info *info)
{
	struct span f[3];
	long long pid, mem;
	size_t i;

	if (split(l, n, f, 3) != 3)
		return -1;
	if (!nv_uuid_ok(f[0].s, f[0].n) || num(f[1], &pid) < 0)
		return -1;
	if (num(f[2], &mem) < 0 && !not_available(f[2]))
		return -1;
	info->napps++;
	for (i = 0; i < info->ngpu; i++)
		if (strlen(info->gpu[i].uuid) == f[0].n &&
		    memcmp(info->gpu[i].uuid, f[0].s, f[0].n) == 0) {
			info->gpu[i].procs++;
			if (nv_add_pid(&info->gpu[i], pid) < 0)
				return -2;
		}
	return 0;
}

int nv_add_pid(struct nv_gpu *g, long long pid)
{
	if (g->npids >= NV_PIDS_MAX)
		return 0;
	if (!g->pids && !(g->pids = calloc(NV_PIDS_MAX, sizeof *g->pids)))
		return -1;
	g->pids[g->npids++] = pid;
	return 0;
}

int nv_parse_gpus(const char *buf, size_t len, struct nv_info *info, char **err)
{
	return each_line("--query-gpu", buf, len, info, gpu_line, err);
}

int nv_parse_apps(const char *buf, size_t len, struct nv_info *info, char **err)
{
	return each_line("--query-compute-apps", buf, len, info, app_line, err);
}

/* ---- running a child with a deadline ----------------------------------- */

char *nv_first_line(const char *s)
{
	size_t n;

	while (*s == '\n' || *s == '\r' || *s == ' ' || *s == '\t')
		s++;
	n = strcspn(s, "\r\n");
	if (n > 200)
		n = 200;
	return xasprintf("%.*s", (int)n, s);
}

/* Append what FD has to *B (at most CAP bytes kept; *over set when more
 * came).  Returns 1 at EOF, 0 otherwise, -1 on error. */
static int drain(int fd, char **b, size_t *n, size_t cap, int *over)
{
	char tmp[8192];
	ssize_t r = read(fd, tmp, sizeof tmp);

	if (r < 0)
		return errno == EINTR || errno == EAGAIN ? 0 : -1;
	if (r == 0)
		return 1;
	if (*n + (size_t)r > cap) {
		*over = 1;
		r = (ssize_t)(cap - *n);
	}
	if (r > 0) {
		char *nb = realloc(*b, *n + (size_t)r + 1);

		if (!nb)
			return -1;
		*b = nb;
		memcpy(*b + *n, tmp, (size_t)r);
		*n += (size_t)r;
		(*b)[*n] = '\0';
	}
	return 0;
}

void wk_child_free(struct wk_child *c)
{
	free(c->out);
	free(c->err);
	c->out = c->err = NULL;
	c->outlen = c->errlen = 0;
}

int wk_run_child(void (*fn)(const void *), const void *arg, long long deadline, size_t max,
		 struct wk_child *c, char **err)
{
	int op[2] = { -1, -1 }, ep[2] = { -1, -1 };
	pid_t pid;
	int odone = 0, edone = 0, eover = 0, st = 0;

	memset(c, 0, sizeof *c);
	*err = NULL;
	if (pipe2(op, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0) {
		*err = xasprintf("pipe: %s", strerror(errno));
		goto fail_fds;
	}
	pid = fork();
	if (pid < 0) {
		*err = xasprintf("fork: %s", strerror(errno));
		goto fail_fds;
	}
	if (pid == 0) {
		int nul = open("/dev/null", O_RDONLY);

		/* Its own process group: a hung nvidia-smi (or a script
		 * standing in for it) is killed with all its children. */
		setpgid(0, 0);
		if (nul < 0 || dup2(nul, 0) < 0 || dup2(op[1], 1) < 0 || dup2(ep[1], 2) < 0)
			_exit(126);
		fn(arg);
		_exit(127);
	}
	setpgid(pid, pid);      /* also here: no race with the kill below */
	close(op[1]);
	close(ep[1]);
	op[1] = ep[1] = -1;
	while (!odone || !edone) {
		struct pollfd p[2];
		long long left = deadline - mono_ms();
		int r;

		if (left <= 0 || c->overflow) {
			c->timed_out = left <= 0;
			break;
		}
		p[0].fd = odone ? -1 : op[0];
		p[0].events = POLLIN;
		p[1].fd = edone ? -1 : ep[0];
		p[1].events = POLLIN;
		r = poll(p, 2, (int)left);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			c->errnum = errno;
			break;
		}
		if (!odone && p[0].revents) {
			r = drain(op[0], &c->out, &c->outlen, max, &c->overflow);
			if (r != 0)
				odone = 1;
			if (r < 0)
				c->errnum = errno;
		}
		if (!edone && p[1].revents) {
			r = drain(ep[0], &c->err, &c->errlen, NVSMI_MAX_STDERR, &eover);
			if (r != 0)
				edone = 1;
			if (r < 0)
				c->errnum = errno;
		}
	}
	if (!odone || !edone) {
		kill(-pid, SIGKILL);
		kill(pid, SIGKILL);
	}
	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR) {
			c->errnum = errno;
			st = -1;
			break;
		}
	}
	close(op[0]);
	close(ep[0]);
	c->status = st;
	c->broken = !c->timed_out && !c->overflow && (!odone || !edone || st == -1 || c->errnum);
	if ((!c->out && !(c->out = strdup(""))) || (!c->err && !(c->err = strdup("")))) {
		wk_child_free(c);
		*err = xasprintf("out of memory");
		return -1;
	}
	return 0;

fail_fds:
	{
		int i, e = errno;

		for (i = 0; i < 2; i++) {
			if (op[i] >= 0)
				close(op[i]);
			if (ep[i] >= 0)
				close(ep[i]);
		}
		errno = e;
	}
	if (!*err)
		*err = xasprintf("out of memory");
	return -1;
}

/* ---- running nvidia-smi ----------------------------------------------- */

static void exec_nvsmi(const void *query)
{
	execlp("nvidia-smi", "nvidia-smi", (const char *)query, q_format, (char *)NULL);
	dprintf(2, "cannot run nvidia-smi: %s\n", strerror(errno));
	_exit(127);
}

/* Run "nvidia-smi QUERY --format=..." and capture its standard output,
 * killing it at DEADLINE (wk_mono_ms).  0 with *out (malloc'd,
 * NUL-terminated), or -1 with *err. */
static int run_nvsmi(const char *query, long long deadline, char **out, size_t *outlen,
		     char **err)
{
	struct wk_child c;
	int st;

	*out = NULL;
	if (wk_run_child(exec_nvsmi, query, deadline, NVSMI_MAX_OUTPUT, &c, err) < 0)
		return -1;
	st = c.status;
	if (c.timed_out) {
		*err = xasprintf("nvidia-smi did not answer within %d s", NVSMI_TIMEOUT_MS / 1000);
	} else if (c.overflow) {
		*err = xasprintf("nvidia-smi printed more than %u bytes", NVSMI_MAX_OUTPUT);
	} else if (c.broken) {
		*err = xasprintf("reading nvidia-smi's output: %s", strerror(c.errnum));
	} else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		*out = c.out;
		*outlen = c.outlen;
		c.out = NULL;
		wk_child_free(&c);
		return 0;
	} else {
		/* A driver failure is printed on stdout; exec failures on
		 * stderr. */
		char *line = nv_first_line(c.outlen ? c.out : c.err);

		if (WIFEXITED(st) && WEXITSTATUS(st) == 127 && c.errlen)
			*err = xasprintf("%s", line ? line : "cannot run nvidia-smi");
		else if (WIFEXITED(st))
			*err = xasprintf("nvidia-smi failed (exit %d)%s%s", WEXITSTATUS(st),
					   line && *line ? ": " : "", line ? line : "");
		else
			*err = xasprintf("nvidia-smi killed by signal %d", WTERMSIG(st));
		free(line);
	}
	wk_child_free(&c);
	if (!*err)
		*err = xasprintf("out of memory");
	return -1;
}

/* The compute processes' question, asked by a child process while the
 * caller asks for the cards (each nvidia-smi run costs tens of ms on a
 * real driver): its answer comes back on a pipe, "0" and the output or
 * "1" and the error, to its end, which the deadline bounds. */
struct apps_ask {
	pid_t pid;
	int fd;
};

static int apps_start(struct apps_ask *a, long long deadline)
{
	int p[2];

	a->pid = -1;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	fflush(NULL);
	if ((a->pid = fork()) < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (a->pid == 0) {
		char *out = NULL, *err = NULL;
		size_t len = 0;
		int ok;

		close(p[0]);
		ok = run_nvsmi(q_apps, deadline, &out, &len, &err) == 0;
		if (!ok)
			len = strlen(err ? err : "out of memory");
		_exit(write_full(p[1], ok ? "0" : "1", 1) < 0 ||
		      write_full(p[1], ok ? out : err ? err : "out of memory", len) < 0);
	}
	close(p[1]);
	a->fd = p[0];
	return 0;
}

/* The child's answer: 0 with *OUT, or -1 with *ERR. */
static int apps_finish(struct apps_ask *a, char **out, size_t *len, char **err)
{
	char *b = NULL, tmp[4096];
	size_t n = 0;
	ssize_t got;
	int st, bad = 0;

	*out = NULL;
	while ((got = read(a->fd, tmp, sizeof tmp)) != 0) {
		char *nb;

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 || n > NVSMI_MAX_OUTPUT + 1 || !(nb = realloc(b, n + (size_t)got + 1))) {
			bad = 1;
			break;
		}
		b = nb;
		memcpy(b + n, tmp, (size_t)got);
		n += (size_t)got;
	}
	close(a->fd);
	while (waitpid(a->pid, &st, 0) < 0 && errno == EINTR)
		;
	if (bad || !n || (b[0] != '0' && b[0] != '1')) {
		free(b);
		*err = xasprintf("nvidia-smi: the compute processes' answer was lost");
		return -1;
	}
	b[n] = '\0';
	if (b[0] == '1') {
		*err = strdup(b + 1);
		free(b);
		return -1;
	}
	memmove(b, b + 1, n);   /* with its NUL */
	*out = b;
	*len = n - 1;
	return 0;
}

/* The cards (and with NV_ALL their compute processes) from nvidia-smi:
 * one run for NV_CARDS; for NV_ALL two at once (the second in
 * apps_start's child; one after the other when it cannot be forked),
 * both by DEADLINE.  The cards' error is the answer when both fail. */
static int nvsmi_query(struct nv_info *info, enum nv_what what, long long deadline, char **err)
{
	struct apps_ask a = { -1, -1 };
	char *out, *aerr = NULL;
	size_t len;
	int r, apps = what == NV_ALL && apps_start(&a, deadline) == 0;

	memset(info, 0, sizeof *info);
	r = run_nvsmi(q_gpus, deadline, &out, &len, err);
	if (r == 0) {
		r = nv_parse_gpus(out, len, info, err);
		free(out);
	}
	/* Never left behind: the child ends by the deadline.  The cards'
	 * error, when there is one, is the answer. */
	if (apps && apps_finish(&a, &out, &len, &aerr) < 0) {
		if (r == 0) {
			*err = aerr ? aerr : xasprintf("out of memory");
			aerr = NULL;
			r = -1;
		}
	} else if (apps && r < 0) {
		free(out);
	}
	free(aerr);
	if (r < 0)
		goto fail;
	if (what == NV_CARDS)
		return 0;
	if (!apps && run_nvsmi(q_apps, deadline, &out, &len, err) < 0)
		goto fail;
	r = nv_parse_apps(out, len, info, err);
	free(out);
	if (r < 0)
		goto fail;
	return 0;
fail:
	nv_free(info);
	if (!*err)
		*err = xasprintf("out of memory");
	return -1;
}

int nv_query(struct nv_info *info, enum nv_what what, char **err)
{
	/* One deadline for the whole query: NVML gets the first half of
	 * it, nvidia-smi what is left (all of it when NVML is not in
	 * use), so that a wedged driver costs NVSMI_TIMEOUT_MS at most. */
	long long start = mono_ms(), deadline = start + NVSMI_TIMEOUT_MS;
	char *why = NULL;
	int r;

	*err = NULL;
	r = nvml_query(info, what, start + NVML_TIMEOUT_MS, &why);
	if (r == 0)
		return 0;
	r = nvsmi_query(info, what, deadline, err);
	/* Why NVML did not answer, once (it is not asked again by this
	 * process); when nvidia-smi failed too, its error is the answer,
	 * the same as on a node without NVML. */
	if (r == 0 && why) {
		fprintf(stderr, "%s: NVML: %s; asked nvidia-smi instead\n", PROG, why);
		fflush(stderr);
	}
	free(why);
	return r;
}
