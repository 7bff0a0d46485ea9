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
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const char usage[] = "cardbaton-cancel [--config PATH] JOB_ID";

static const struct option longopts[] = {
	COMMON_LONGOPTS,
	{ NULL, 0, NULL, 0 },
};

/* First line of TEXT (malloc'd, control characters shown as '?'). */
static char *first_line(const char *text)
{
	size_t n = strcspn(text, "\n");
	char *s;

	while (n && (text[n - 1] == '\r' || text[n - 1] == ' '))
		n--;
	if (!(s = strndup(text, n)))
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	{
		char *p = printable(s);

		free(s);
		if (!p)
			die(EX_OSERR_, "%s", strerror(ENOMEM));
		return p;
	}
}

static void cancel_on_node(const struct config *c, const struct job *j)
{
	const struct attempt *a = job_last_attempt(j);
	const struct node_conf *nc;
	struct node_reply r;
	char *why;

	if (!a || !a->id)
		return;
	if (!a->node || !(nc = config_node(c, a->node)))
		die(EX_UNAVAILABLE_, "job %lld runs on node '%s', which is not in %s; "
		    "the cancel request waits for the daemon", j->id, a->node ? a->node : "?",
		    c->path ? c->path : "the default config");
	{
		const char *args[] = { "cancel", a->id, NULL };

		if (node_run(c, nc, args, NULL, 0, NODE_CALL_MS, &r) < 0)
			die_sys(EX_UNAVAILABLE_, "%s: cannot run cardbaton-worker; "
				"the cancel request waits for the daemon", nc->name);
	}
	/* 66: the node never heard of the attempt (a launch that had not
	 * reached it): nothing runs there, the daemon does the rest. */
	if (r.status == 0 || r.status == EX_NOINPUT_) {
		node_reply_free(&r);
		return;
	}
	why = *r.err ? first_line(r.err) : r.status >= 0 ?
		must_asprintf("cardbaton-worker cancel exited %d", r.status) :
		must_asprintf("cardbaton-worker cancel failed");
	die(EX_UNAVAILABLE_, "%s: %s; the cancel request waits for the daemon", nc->name, why);
}

int main(int argc, char **argv)
{
	struct config c;
	struct spool sp;
	struct cb_err err = { 0 };
	enum spool_dir d;
	struct job j;
	char *name;
	long long id;
	int ch, r;

	prog_init(argc, argv);
	while ((ch = tool_getopt(argc, argv, "", longopts, 0, usage)) != -1)
		usage_error(usage, "unknown option");
	if (argc - optind != 1)
		usage_error(usage, argc == optind ? "no JOB_ID given" : "more than one JOB_ID");
	id = arg_jobid(argv[optind]);
	tool_config(&c);
	if (!tool_spool(&c, &sp, 0))
		die(EX_NOINPUT_, "no such job %lld", id);
	if ((r = spool_find(&sp, id, &j, &d, &name, &err)) < 0)
		die_err(&err);
	if (r == 0)
		die(EX_NOINPUT_, "no such job %lld", id);
	if (job_state_final(j.state))
		die(EX_REFUSED, "job %lld already %s", id, job_state_name(j.state));
	if (spool_ctl(&sp, id, CTL_CANCEL, CTL_NO_ARG, &err) < 0)
		die_err(&err);
	if (j.state == JS_RUNNING || j.state == JS_PAUSING)
		cancel_on_node(&c, &j);
	job_free(&j);
	free(name);
	spool_close(&sp);
	config_free(&c);
	return 0;
}
