/*
 * cardbaton-promote - move a queued job to the front, or set its
 * priority.
 *
 * Design: tools never modify job records (LAYOUT.md §7); this one
 * checks that the job is queued (or still waiting in new/ or
 * incoming/ for the daemon) and drops a promote request into ctl/.
 * The daemon applies it, now or when it next starts: without
 * --priority the job gets one more than the highest priority of the
 * other queued jobs at that moment.  In a lab's spool (SPEC §12) a
 * member's promote of an own job counts only the member's other queued
 * jobs and stops at the member's max_priority (lab.h
 * lab_promote_prio; the daemon applies the same rule by the owner of
 * the request's file), and a member's --priority above max_priority is
 * refused here, 77.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

static const char usage[] = "cardbaton-promote [--config PATH] [--priority N] JOB_ID";

enum { OPT_PRIORITY = OPT_TOOL_FIRST };

static const struct option longopts[] = {
	COMMON_LONGOPTS,
	{ "priority", required_argument, NULL, OPT_PRIORITY },
	{ NULL, 0, NULL, 0 },
};

int main(int argc, char **argv)
{
	struct config c;
	struct spool sp;
	struct cb_err err = { 0 };
	struct job j;
	long long id, prio = CTL_NO_ARG;
	int ch;

	prog_init(argc, argv);
	while ((ch = tool_getopt(argc, argv, "", longopts, 0, usage)) != -1) {
		switch (ch) {
		case OPT_PRIORITY:
			prio = flag_ll("--priority", optarg, PRIO_MIN, PRIO_MAX);
			break;
		default:
			usage_error(usage, "unknown option");
		}
	}
	if (argc - optind != 1)
		usage_error(usage, argc == optind ? "no JOB_ID given" : "more than one JOB_ID");
	id = arg_jobid(argv[optind]);
	tool_find_job(&c, &sp, id, &j);
	tool_may_act(&c, &sp, &j, "promote");
	if (job_view_state(&j) != JS_QUEUED)
		die(EX_REFUSED, "job %lld is %s, not queued", id, job_state_name(j.state));
	if (c.lab && prio != CTL_NO_ARG && !tool_admin(&c, &sp) &&
	    prio > lab_limits_of(c.lab, j.owner)->max_priority)
		die(EX_NOPERM_, "--priority %lld: above %s's max_priority %lld (only an admin may)",
		    prio, j.owner, lab_limits_of(c.lab, j.owner)->max_priority);
	if (spool_ctl(&sp, id, CTL_PROMOTE, prio, &err) < 0)
		die_err(&err);
	job_free(&j);
	spool_close(&sp);
	config_free(&c);
	return 0;
}
