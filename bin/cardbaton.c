/*
 * cardbaton - the dispatcher: `cardbaton [--config PATH] COMMAND ARGS...`
 * executes `cardbaton-COMMAND [--config PATH] ARGS...`.
 *
 * Design: like git(1) it only finds and execs (no fork, so signals,
 * exit status and the terminal belong to the tool itself); it links
 * no library.  The tool is looked up beside the real executable first
 * (readlink /proc/self/exe: an installed or build-tree cardbaton runs
 * its own siblings, never older ones from PATH), then on PATH.
 * `sshgpu` is a symbolic link to this program; messages use the name
 * it was called by.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"       /* CARDBATON_VERSION and the exit codes only */

static const char *prog = "cardbaton";

static const struct {
	const char *name, *what;
} commands[] = {
	{ "run", "run the daemon in the foreground (--once: one pass)" },
	{ "submit", "queue a job; prints its ID" },
	{ "status", "the queue, running, paused (--all: finished) jobs" },
	{ "logs", "a job's output, fetched from its node (-f follows)" },
	{ "promote", "move a queued job to the front, or set its priority" },
	{ "pause", "ask a running resumable job to checkpoint and stop" },
	{ "resume", "re-queue a paused job" },
	{ "cancel", "stop a job or remove it from the queue" },
	{ "hold", "keep queued jobs from being placed until released" },
	{ "release", "let held jobs be placed again" },
	{ "wait", "block until jobs have ended (none named: the queue is idle)" },
	{ "drain", "place nothing new on a node (--checkpoint: its resumable jobs wait)" },
	{ "undrain", "put a drained node back in service" },
	{ "gpus", "every node's GPUs, leases and idle state" },
	{ "top", "a live full-screen view of the queue and the cards" },
	{ "metrics", "the daemon's Prometheus metrics (SPOOL/metrics.prom)" },
	{ "report", "who used which card: hours busy, jobs, idle while jobs waited" },
	{ "users", "a lab's users: shares, GPU-hours, fair-share order, limits" },
	{ "mcp", "a Model Context Protocol server on stdio, for assistants" },
	{ "bootstrap", "install a public key on a node" },
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *fp)
{
	fprintf(fp, "usage: %s [--config PATH] [-h|--help] [--version] COMMAND [ARGS...]\n\n"
		"commands:\n", prog);
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(fp, "  %-10s %s\n", commands[i].name, commands[i].what);
	fprintf(fp, "\n'%s COMMAND --help' shows a command's options; "
		"man cardbaton-COMMAND documents it.\n", prog);
}

__attribute__((format(printf, 2, 3)))
static _Noreturn void die(int ex, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(ex);
}

static void flush_stdout(void)
{
	if (fflush(stdout) == EOF || ferror(stdout))
		die(EX_IOERR_, "standard output: %s", strerror(errno ? errno : EIO));
}

int main(int argc, char **argv)
{
	const char *config = NULL, *cmd;
	char *tool, *dir, **nargv;
	int i, n, found = 0;

	if (argc >= 1 && argv[0] && *argv[0]) {
		const char *s = strrchr(argv[0], '/');

		prog = s && s[1] ? s + 1 : argv[0];
	}
	/* Our own options come before COMMAND; everything after it is
	 * the tool's. */
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--")) {
			i++;
			break;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			flush_stdout();
			return 0;
		} else if (!strcmp(a, "--version")) {
			printf("%s %s\n", prog, CARDBATON_VERSION);
			flush_stdout();
			return 0;
		} else if (!strcmp(a, "--config")) {
			if (i + 1 >= argc)
				die(EX_USAGE_, "option '--config' needs an argument (see %s --help)", prog);
			config = argv[++i];
		} else if (!strncmp(a, "--config=", 9)) {
			config = a + 9;
		} else {
			die(EX_USAGE_, "unknown option '%.*s' (see %s --help)",
			    (int)strcspn(a, "="), a, prog);
		}
		if (config && !*config)
			die(EX_USAGE_, "--config: empty path");
	}
	if (i >= argc) {
		fprintf(stderr, "usage: %s [--config PATH] [-h|--help] [--version] COMMAND [ARGS...]\n",
			prog);
		return EX_USAGE_;
	}
	cmd = argv[i++];
	for (size_t k = 0; k < NCOMMANDS; k++)
		if (!strcmp(cmd, commands[k].name))
			found = 1;
	if (!found)
		die(EX_USAGE_, "unknown command '%s' (see %s --help)", cmd, prog);

	/* cardbaton-CMD [--config PATH] ARGS... NULL */
	if (!(nargv = calloc((size_t)(argc - i) + 4, sizeof *nargv)) ||
	    asprintf(&tool, "cardbaton-%s", cmd) < 0)
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	n = 0;
	nargv[n++] = tool;
	if (config) {
		nargv[n++] = "--config";
		nargv[n++] = (char *)config;
	}
	for (; i < argc; i++)
		nargv[n++] = argv[i];
	nargv[n] = NULL;

	if ((dir = exe_dir())) {
		char *path;

		if (asprintf(&path, "%s/%s", dir, tool) < 0)
			die(EX_OSERR_, "%s", strerror(ENOMEM));
		if (access(path, X_OK) == 0) {
			execv(path, nargv);
			die(EX_OSERR_, "%s: %s", path, strerror(errno));
		}
		free(path);
	}
	execvp(tool, nargv);
	if (errno == ENOENT)
		die(EX_UNAVAILABLE_, "'%s' is not available: no %s in %s or on PATH",
		    cmd, tool, dir ? dir : "this program's directory");
	die(EX_OSERR_, "%s: %s", tool, strerror(errno));
}
