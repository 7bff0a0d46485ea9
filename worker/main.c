/*
 * cardbaton-worker - runs on each GPU machine; the controller calls it
 * (through ssh, or directly for a local node) to list cards, launch,
 * watch and stop attempts.  spool-layout/LAYOUT.md sections 8-10 are
 * its specification.
 *
 * Design rationale:
 *
 *  - libc only, one small program, so that the controller can ship it
 *    as source and build it anywhere with "cc -std=c11 -D_GNU_SOURCE".
 *    It speaks the line records of wire.h, not JSON.
 *  - Every command is one short-lived process except the supervisor
 *    that launch leaves behind with each job.  It leaves ssh's session
 *    (setsid, all three standard streams redirected), so the job
 *    outlives the connection and the controller.
 *  - Liveness is a lock, never a pid (nq, s6): attempts/ID/lock and
 *    every leases/UUID are flock()ed by the launcher, inherited by the
 *    supervisor and by the job, and released by the kernel when the
 *    last process of the attempt is gone, however it went.  "alive" is
 *    "the lock is held"; a starting/running/pausing state with a free
 *    lock is a lost attempt.
 *  - Every state change is one atomic rename of attempts/ID.state
 *    (write .ID.state.tmp, fsync, rename, fsync the directory), so a
 *    reader sees a whole record or the previous one, and "watch" is an
 *    inotify IN_MOVED_TO on attempts/.
 *  - Launch is idempotent (LAYOUT.md section 8 step 7): mkdir of the
 *    attempt directory decides who launches; a second launch of the
 *    same ID answers the existing attempt.  A busy answer leaves no
 *    trace, so the same ID can be tried again.
 *  - The supervisor is a subreaper and waits for every descendant
 *    before it releases the leases and writes the final state: when
 *    the controller sees the final state, the cards are free.
 *
 * Files: main.c (arguments), launch.c (the launch steps; launch.h
 * says how spec.c, lease.c and supervise.c share them),
 * cmds.c (gpus, status, watch, cancel, pause, log), baton.c (staged
 * attempts: the baton, unstage), nvml.c (NVML,
 * through dlopen), nvsmi.c (nvidia-smi), json.c (the checkpoint
 * marker), ckpt.c (a checkpoint copied between nodes: send,
 * receive, drop), util.c (messages, paths, state records); ../base/ (I/O, the
 * atomic write, locks, clocks, exit codes), shared with the controller.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker.h"

static const char help[] =
	"usage: " PROG " [-d STATE_DIR] version\n"
	"       " PROG " [-d STATE_DIR] gpus\n"
	"       " PROG " [-d STATE_DIR] launch < SPEC\n"
	"       " PROG " [-d STATE_DIR] status ID...\n"
	"       " PROG " [-d STATE_DIR] watch\n"
	"       " PROG " [-d STATE_DIR] cancel ID\n"
	"       " PROG " [-d STATE_DIR] pause ID\n"
	"       " PROG " [-d STATE_DIR] log ID [-f]\n"
	"       " PROG " [-d STATE_DIR] unstage ID\n"
	"       " PROG " [-d STATE_DIR] baton\n"
	"       " PROG " [-d STATE_DIR] deck ID   (a staged attempt's wait, left by launch)\n"
	"       " PROG " [-d STATE_DIR] slurm-job ID   (a Slurm batch script's command)\n"
	"       " PROG " [-d STATE_DIR] send-checkpoint [--max BYTES] PATH   (the stream on stdout)\n"
	"       " PROG " [-d STATE_DIR] receive-checkpoint JOB_ID ATTEMPT_ID   (the stream on stdin)\n"
	"       " PROG " [-d STATE_DIR] drop-checkpoints JOB_ID...\n"
	"       " PROG " gate STATE_DIR   (a lab key's forced command: $SSH_ORIGINAL_COMMAND)\n"
	"STATE_DIR defaults to " DEFAULT_STATE_DIR "; see LAYOUT.md section 10.\n"
	"--slurm PARTITION [--sbatch-arg ARG]...: the node is that Slurm partition\n"
	"(LAYOUT.md section 14).\n"
	"--lease-dir DIR: the cards' leases in DIR, shared with other accounts\n"
	"(LAYOUT.md section 8), instead of STATE_DIR/leases.\n";

/* Errors are one line on stderr; -h prints the whole usage. */
static int usage(void)
{
	return wk_err(EX_USAGE_, "usage: %s [-d STATE_DIR] version|gpus|launch|status ID...|"
		      "watch|cancel ID|pause ID|log ID [-f]|unstage ID|baton|deck ID|"
		      "send-checkpoint [--max BYTES] PATH|receive-checkpoint JOB_ID ATTEMPT_ID|"
		      "drop-checkpoints JOB_ID...", PROG);
}

static const struct {
	const char *name;
	int (*fn)(struct wk_state *, int, char **);
} commands[] = {
	{ "gpus", cmd_gpus },
	{ "launch", cmd_launch },
	{ "status", cmd_status },
	{ "watch", cmd_watch },
	{ "cancel", cmd_cancel },
	{ "pause", cmd_pause },
	{ "log", cmd_log },
	{ "unstage", cmd_unstage },
	{ "baton", cmd_baton },
	{ "deck", cmd_deck },
	{ "slurm-job", cmd_slurm_job },
	{ "send-checkpoint", cmd_send_checkpoint },
	{ "receive-checkpoint", cmd_receive_checkpoint },
	{ "drop-checkpoints", cmd_drop_checkpoints },
};

int main(int argc, char **argv)
{
	const char *dir = DEFAULT_STATE_DIR, *lease_dir = NULL, *cmd = NULL;
	char **args;
	int nargs = 0, i, rc;
	size_t c;
	struct wk_state st;
	struct wk_slurm slurm = { 0 };
	char *why = NULL;

	/* "-d DIR" may come before or after the command (the controller
	 * writes "gpus -d STATE"); everything else goes to the command,
	 * and everything after "--" too (an attempt ID may begin with
	 * '-'). */
	/* Started by the gate (gate.c): said once, and never to a job. */
	wk_gated = getenv("CARDBATON_GATED") != NULL;
	unsetenv("CARDBATON_GATED");
	args = calloc((size_t)argc + 1, sizeof *args);
	slurm.args = calloc((size_t)argc + 1, sizeof *slurm.args);
	if (!args || !slurm.args)
		return wk_errsys(EX_OSERR_, "out of memory");
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			for (i++; i < argc; i++) {
				if (!cmd)
					cmd = argv[i];
				else
					args[nargs++] = argv[i];
			}
			break;
		}
		if (!strcmp(argv[i], "-d") || !strcmp(argv[i], "--slurm") ||
		    !strcmp(argv[i], "--sbatch-arg") || !strcmp(argv[i], "--lease-dir")) {
			if (i + 1 >= argc || (strcmp(argv[i], "--sbatch-arg") && argv[i + 1][0] == '\0')) {
				free(args);
				free(slurm.args);
				return usage();
			}
			if (!strcmp(argv[i], "-d"))
				dir = argv[++i];
			else if (!strcmp(argv[i], "--lease-dir"))
				lease_dir = argv[++i];
			else if (!strcmp(argv[i], "--slurm"))
				slurm.partition = argv[++i];
			else
				slurm.args[slurm.nargs++] = argv[++i];
		} else if (!cmd && (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)) {
			free(args);
			free(slurm.args);
			fputs(help, stdout);
			return 0;
		} else if (!cmd && argv[i][0] == '-') {
			free(args);
			free(slurm.args);
			return usage();
		} else if (!cmd) {
			cmd = argv[i];
		} else {
			args[nargs++] = argv[i];
		}
	}
	if (!cmd) {
		free(args);
		free(slurm.args);
		return usage();
	}
	if (strcmp(cmd, "gate") == 0) {
		rc = cmd_gate(nargs, args);
		free(args);
		free(slurm.args);
		return rc;
	}
	if (strcmp(cmd, "version") == 0) {
		struct wire_rec r = { 0 };

		rc = nargs ? usage() : 0;
		if (rc == 0 && (wire_add(&r, "version", WORKER_VERSION) < 0 || wk_print(&r) < 0))
			rc = wk_errsys(EX_OSERR_, "stdout");
		wire_free(&r);
		free(args);
		free(slurm.args);
		return rc;
	}
	for (c = 0; c < sizeof commands / sizeof commands[0]; c++)
		if (strcmp(cmd, commands[c].name) == 0)
			break;
	if (c == sizeof commands / sizeof commands[0]) {
		free(args);
		free(slurm.args);
		return wk_err(EX_USAGE_, "unknown command %s (try -h)", cmd);
	}
	if (wk_state_open(&st, dir, lease_dir, &why) < 0) {
		rc = wk_err(EX_OSERR_, "%s", why ? why : strerror(errno));
		free(why);
		wk_state_close(&st);
		free(args);
		free(slurm.args);
		return rc;
	}
	st.slurm = slurm.partition ? &slurm : NULL;
	rc = commands[c].fn(&st, nargs, args);
	wk_state_close(&st);
	free(args);
	free(slurm.args);
	return rc;
}
