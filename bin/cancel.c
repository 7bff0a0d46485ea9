/*
 * cardbaton-cancel - stop a job, or take it out of the queue.
 *
 * Design: the request always goes into ctl/ (LAYOUT.md §7) so that the
 * daemon records the job as cancelled, now or when it next starts.  A
 * running job is also stopped at once through its node's worker
 * (`cardbaton-worker cancel`, which signals the job's process group and
 * waits for the end): a job must stop when asked even while the daemon
 * is down.  When the node cannot be reached the request stays in ctl/
 * for the daemon and the tool says so (exit 69).
 */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

static const char usage[] = "cardbaton-cancel [--config PATH] JOB_ID";

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
	tool_may_act(&c, &sp, &j, "cancel");
	if (job_state_final(j.state))
		die(EX_REFUSED, "job %lld already %s", id, job_state_name(j.state));
	if (spool_ctl(&sp, id, CTL_CANCEL, CTL_NO_ARG, &err) < 0)
		die_err(&err);
	if (j.state == JS_RUNNING || j.state == JS_PAUSING)
		ask_worker(&c, &j, "cancel");
	job_free(&j);
	spool_close(&sp);
	config_free(&c);
	return 0;
}
