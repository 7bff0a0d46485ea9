/*
 * cardbaton-resume - put a paused job back in the queue.
 *
 * Design: a request in ctl/ (LAYOUT.md §7); the daemon moves the job
 * from paused/ to queued/, pinned to the node that holds its
 * checkpoint, where it runs resume_command with SSHGPU_CHECKPOINT set
 * to the saved path, as a new attempt.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

static const char usage[] = "cardbaton-resume [--config PATH] JOB_ID";

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
	tool_may_act(&c, &sp, &j, "resume");
	if (j.state != JS_PAUSED)
		die(EX_REFUSED, "job %lld is %s, not paused", id, job_state_name(j.state));
	if (spool_ctl(&sp, id, CTL_RESUME, CTL_NO_ARG, &err) < 0)
		die_err(&err);
	job_free(&j);
	spool_close(&sp);
	config_free(&c);
	return 0;
}
