/*
 * cardbaton-logs - a job attempt's output, fetched from its node.
 *
 * Design: the log lives on the node (LAYOUT.md §8, attempts/ID/log);
 * this tool finds the attempt in the job's record and runs the
 * worker's `log` command there, copying its standard output straight
 * to ours as it arrives (no size cap, no buffering of the whole log)
 * while keeping its standard error for the one-line message a failure
 * deserves.  Without -f a node that stays silent for NODE_CALL_MS is
 * given up on; with -f the worker follows until the attempt ends and
 * the user decides how long to wait.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static const char usage[] = "cardbaton-logs [--config PATH] [--attempt N] [-f] JOB_ID";

enum { OPT_ATTEMPT = OPT_TOOL_FIRST };

static const struct option longopts[] = {
	COMMON_LONGOPTS,
	{ "attempt", required_argument, NULL, OPT_ATTEMPT },
	{ "follow", no_argument, NULL, 'f' },
	{ NULL, 0, NULL, 0 },
};

#define ERR_KEEP 4096   /* bytes of the worker's stderr kept for the message */

static void write_all(const char *p, size_t n)
{
	if (write_full(1, p, n) < 0)
		die_sys(EX_IOERR_, "standard output");
}

/*
 * Run ARGS on the node with stdout copied to ours.  Returns the
 * worker's exit status, or -1 when it could not be run, was killed,
 * or fell silent for IDLE_MS (0: wait forever); *why gets its first
 * stderr line or what went wrong (malloc'd).
 */
static int stream(const struct config *c, const struct node_conf *nc,
		  const char *const *args, int idle_ms, char **why)
{
	char **argv = node_argv(c, nc, args);
	int po[2], pe[2], status, timed_out = 0;
	struct sbuf err = { 0 };
	long long last = mono_ms();
	pid_t pid;

	*why = NULL;
	if (!argv)
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0)
		die_sys(EX_OSERR_, "pipe");
	if ((pid = fork()) < 0)
		die_sys(EX_OSERR_, "fork");
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		if (null < 0 || dup2(null, 0) < 0 || dup2(po[1], 1) < 0 || dup2(pe[1], 2) < 0)
			_exit(127);
		signal(SIGPIPE, SIG_DFL);
		execvp(argv[0], argv);
		dprintf(2, "%s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	argv_free(argv);
	close(po[1]);
	close(pe[1]);
	while (po[0] >= 0 || pe[0] >= 0) {
		struct pollfd p[2] = { { po[0], POLLIN, 0 }, { pe[0], POLLIN, 0 } };
		long long left = idle_ms ? last + idle_ms - mono_ms() : -1;
		char buf[65536];
		int n;

		if (idle_ms && left <= 0) {
			timed_out = 1;
			break;
		}
		n = poll(p, 2, left < 0 ? -1 : (int)(left > INT_MAX ? INT_MAX : left));
		if (n < 0 && errno != EINTR)
			die_sys(EX_OSERR_, "poll");
		if (n <= 0)
			continue;
		for (int i = 0; i < 2; i++) {
			int *fd = i ? &pe[0] : &po[0];
			ssize_t r;

			if (*fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			r = read(*fd, buf, sizeof buf);
			if (r < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (r <= 0) {
				close(*fd);
				*fd = -1;
				continue;
			}
			last = mono_ms();
			if (!i)
				write_all(buf, (size_t)r);
			else if (err.len < ERR_KEEP && sbuf_add(&err, buf, (size_t)r) < 0)
				die(EX_OSERR_, "%s", strerror(ENOMEM));
		}
	}
	if (po[0] >= 0)
		close(po[0]);
	if (pe[0] >= 0)
		close(pe[0]);
	if (timed_out)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			die_sys(EX_OSERR_, "waitpid");
	if (timed_out) {
		*why = must_asprintf("no answer within %d s", idle_ms / 1000);
		status = -1;
	} else if (WIFEXITED(status)) {
		status = WEXITSTATUS(status);
	} else {
		*why = must_asprintf("killed by signal %d", WTERMSIG(status));
		status = -1;
	}
	if (!*why && err.len) {
		size_t n = strcspn(err.s, "\n");

		while (n && (err.s[n - 1] == '\r' || err.s[n - 1] == ' '))
			n--;
		err.s[n] = '\0';
		if (n && !(*why = printable(err.s)))
			die(EX_OSERR_, "%s", strerror(ENOMEM));
	}
	sbuf_free(&err);
	return status;
}

int main(int argc, char **argv)
{
	struct config c;
	struct spool sp;
	struct cb_err err = { 0 };
	const struct node_conf *nc;
	struct node_conf as;
	const struct attempt *a = NULL;
	enum spool_dir d;
	struct job j;
	char *name, *why;
	long long id, want = -1;
	int ch, follow = 0, rc;

	prog_init(argc, argv);
	while ((ch = tool_getopt(argc, argv, "f", longopts, 0, usage)) != -1) {
		switch (ch) {
		case OPT_ATTEMPT:
			want = flag_ll("--attempt", optarg, 0, INT_MAX);
			break;
		case 'f':
			follow = 1;
			break;
		default:
			usage_error(usage, "unknown option");
		}
	}
	if (argc - optind != 1)
		usage_error(usage, argc == optind ? "no JOB_ID given" : "more than one JOB_ID");
	id = arg_jobid(argv[optind]);
	tool_config(&c);
	if (!tool_spool(&c, &sp, 0))
		die(EX_NOINPUT_, "no such job %lld", id);
	rc = spool_find(&sp, id, &j, &d, &name, &err);
	if (rc < 0)
		die_err(&err);
	if (rc == 0)
		die(EX_NOINPUT_, "no such job %lld", id);

	/* Attempts are numbered from 0; by default the latest that ran
	 * (an `aborted` attempt never started: its cards were taken). */
	for (size_t i = j.natt; i-- > 0; ) {
		if (want >= 0 ? j.att[i].n == want : j.att[i].state != AS_ABORTED) {
			a = &j.att[i];
			break;
		}
	}
	if (!a && (!j.natt || want < 0))
		die(EX_REFUSED, "job %lld has not started", id);
	if (!a)
		die(EX_NOINPUT_, "job %lld has no attempt %lld (attempts 0 to %d)", id, want,
		    j.att[j.natt - 1].n);
	if (a->state == AS_ABORTED)
		die(EX_REFUSED, "job %lld attempt %d never started%s%s", id, a->n,
		    a->reason ? ": " : "", a->reason ? a->reason : "");
	if (!a->node || !(nc = config_node(&c, a->node)))
		die(EX_UNAVAILABLE_, "job %lld attempt %d ran on node '%s', which is not in %s", id,
		    a->n, a->node ? a->node : "?", c.path ? c.path : "the default config");

	/* Its owner's log, on a run_as: owner node: read as that account,
	 * through the invoker's own ssh (never the lab's key). */
	if (nc->run_as_owner && j.owner && c.lab) {
		as = *nc;
		as.as_user = lab_account_of(c.lab, j.owner);
		nc = &as;
	}
	{
		const char *args[] = { "log", a->id, follow ? "-f" : NULL, NULL };

		rc = stream(&c, nc, args, follow ? 0 : NODE_CALL_MS, &why);
	}
	if (nc->as_user && rc == 255 && why && strstr(why, "Permission denied"))
		die(EX_NOPERM_, "%s: job %lld ran as %s there, and you have no SSH access as %s (%s)",
		    nc->name, id, nc->as_user, nc->as_user, why);
	if (rc == 0) {
		free(why);
		job_free(&j);
		free(name);
		spool_close(&sp);
		config_free(&c);
		return 0;
	}
	if (rc == EX_NOINPUT_)
		die(EX_NOINPUT_, "%s: no log of job %lld attempt %d (%s)", nc->name, id, a->n,
		    why ? why : "unknown attempt");
	if (why)
		die(EX_UNAVAILABLE_, "%s: %s", nc->name, why);
	die(EX_UNAVAILABLE_, "%s: cardbaton-worker log exited %d", nc->name, rc);
}
