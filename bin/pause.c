/*
 * cardbaton-pause - ask a running resumable job to checkpoint and exit.
 *
 * Design: like cancel, the request goes into ctl/ (the daemon records
 * the job as pausing) and straight to the node's worker, which creates
 * the file named by SSHGPU_PAUSE_FILE; the job then saves its state,
 * publishes the marker at SSHGPU_CHECKPOINT_READY and exits 75.  The
 * job is `pausing` until then, `paused` after (SPEC §9).
 */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

static const char usage[] = "cardbaton-pause [--config PATH] JOB_ID";

int main(int argc, char **argv)
{
	struct config c;
	struct spool sp;
	struct cb_err err = { 0 };
	struct job j;
	long long id;

	prog_init(argc, argv);
	id = tool_one_job(argc, argv, usage);
	tool_find_job(&c, &sp, id, &j);
	tool_may_act(&c, &sp, &j, "pause");
	if (!j.def.resume_command)
		die(EX_REFUSED, "job %lld is not resumable (it has no resume_command)", id);
	if (job_view_state(&j) != JS_RUNNING && j.state != JS_PAUSING)
		die(EX_REFUSED, "job %lld is %s, not running", id, job_state_name(job_view_state(&j)));
	if (spool_ctl(&sp, id, CTL_PAUSE, CTL_NO_ARG, &err) < 0)
		die_err(&err);
	ask_worker(&c, &j, "pause");
	job_free(&j);
	spool_close(&sp);
	config_free(&c);
	return 0;
}
