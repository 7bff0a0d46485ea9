/*
 * test_slurm.c - what a Slurm node's worker reads of sinfo
 * (worker/slurm.c slurm_parse_sinfo, LAYOUT.md section 14): one card
 * per GPU of each node, busy when Slurm has it allocated (GresUsed's
 * IDX: ranges and lists) or the node takes no jobs; and of squeue
 * (slurm_squeue_find): an attempt's job by its name, the last line
 * listing it.  The worker's objects are linked (Makefile), all but its
 * main.
 */
#include <stdlib.h>
#include <string.h>

#include "t.h"
#include "../../worker/worker.h"

/* The cards of sinfo output TEXT as "HOST:I[*][:TYPE] ..." (* busy). */
static const char *cards(const char *text)
{
	static char b[1024];
	struct slurm_card *v;
	size_t n, len = 0;

	b[0] = '\0';
	if (slurm_parse_sinfo(text, strlen(text), &v, &n) < 0)
		return "(out of memory)";
	for (size_t i = 0; i < n && len < sizeof b; i++)
		len += (size_t)snprintf(b + len, sizeof b - len, "%s%s:%lld%s%s%s", i ? " " : "",
					v[i].host, v[i].index, v[i].busy ? "*" : "",
					v[i].type ? ":" : "", v[i].type ? v[i].type : "");
	slurm_cards_free(v, n);
	return b;
}

/* The job named NAME in squeue output TEXT as "JOBID STATE", or "-"
 * when there is none. */
static const char *job(const char *text, size_t len, const char *name)
{
	static char b[256];
	char *jobid, *state;
	int got = slurm_squeue_find(text, len, name, &jobid, &state);

	if (got < 0)
		return "(out of memory)";
	if (!got)
		return (jobid || state) ? "(0 but set)" : "-";
	snprintf(b, sizeof b, "%s %s", jobid, state);
	free(jobid);
	free(state);
	return b;
}
#define JOB(text, name) job(text, strlen(text), name)

int main(void)
{
	/* As Slurm 22.05 prints them (tests/lib/slurm.bash's cluster). */
	CHECK_STR(cards("vm|gpu:a100:4|gpu:a100:0(IDX:N/A)|idle|\n"),
		  "vm:0:a100 vm:1:a100 vm:2:a100 vm:3:a100");
	CHECK_STR(cards("vm|gpu:a100:4|gpu:a100:2(IDX:0-1)|mixed|\n"),
		  "vm:0*:a100 vm:1*:a100 vm:2:a100 vm:3:a100");
	/* No type; a list of indices and ranges; sockets in the total. */
	CHECK_STR(cards("n1|gpu:6(S:0-1)|gpu:3(IDX:0,2-3)|mixed|\nn2|gpu:1|gpu:0|idle|\n"),
		  "n1:0* n1:1 n1:2* n1:3* n1:4 n1:5 n2:0");
	/* Other gres beside; two types on a node: the first type named. */
	CHECK_STR(cards("n|mps:100,gpu:h100:1,gpu:l4:1|gpu:h100:0(IDX:N/A),gpu:l4:1(IDX:1),mps:0|mixed|\n"),
		  "n:0:h100 n:1*:h100");
	/* A node that takes no jobs: every card busy. */
	CHECK_STR(cards("d|gpu:2|gpu:0(IDX:N/A)|drained|\nx|gpu:1|gpu:0|down*|\n"), "d:0* d:1* x:0*");
	/* Skipped: no GPUs, a bad host, too few fields, too many cards. */
	CHECK_STR(cards("c|(null)|(null)|idle|\n-h|gpu:1|gpu:0|idle|\nh/x|gpu:1|gpu:0|idle|\n"
			"short|gpu:1|\nbig|gpu:99999999999|gpu:0|idle|\nok|gpu:1|gpu:0|idle|"), "ok:0");
	CHECK_STR(cards(""), "");
	/* Blanks around the fields are Slurm's padding. */
	CHECK_STR(cards("  vm |gpu:2 | gpu:1(IDX:1) |mixed |\n"), "vm:0 vm:1*");

	/* squeue -h -t all -o '%j %i %T', as Slurm 22.05 prints it: the
	 * launch's look-up (--name) and status's list (--me) alike. */
	CHECK_STR(JOB("cb-1a-2 17 RUNNING\n", "cb-1a-2"), "17 RUNNING");
	CHECK_STR(JOB("cb-1a-1 16 COMPLETED\ncb-1a-2 17 PENDING\ncb-1a-3 18 RUNNING\n", "cb-1a-2"),
		  "17 PENDING");
	CHECK_STR(JOB("cb-1a-1 16 COMPLETED\n", "cb-1a-2"), "-");
	CHECK_STR(JOB("", "cb-1a-2"), "-");
	CHECK_STR(job(NULL, 0, "cb-1a-2"), "-");
	/* Requeued, or submitted again: the last line naming it. */
	CHECK_STR(JOB("cb-x 20 FAILED\ncb-x 21 RUNNING", "cb-x"), "21 RUNNING");
	/* An array's job ID; the name only whole (cb-x is no cb-xy, and
	 * the other way round). */
	CHECK_STR(JOB("cb-xy 30 RUNNING\ncb-x 31_2 PENDING\n", "cb-x"), "31_2 PENDING");
	CHECK_STR(JOB("cb-x 30 RUNNING\n", "cb-xy"), "-");
	/* A state is one word; what follows it is not read. */
	CHECK_STR(JOB("cb-x 40 RUNNING extra\n", "cb-x"), "40 RUNNING");
	CHECK_STR(JOB("cb-x 41 \n", "cb-x"), "41 ");
	/* Skipped: no job ID, a job ID that is not one, no state field, a
	 * NUL in the line; an earlier well-formed line stands. */
	CHECK_STR(JOB("cb-x 50 RUNNING\ncb-x  RUNNING\ncb-x 5a RUNNING\ncb-x 51\ncb-x\ncb-x \n",
		      "cb-x"), "50 RUNNING");
	CHECK_STR(job("cb-x 60 RUNNING\ncb-x 6\0 RUNNING\n", 32, "cb-x"), "60 RUNNING");
	CHECK_STR(JOB("cb-x 123456789012345678901234567890123 RUNNING\n", "cb-x"), "-");
	/* Only LEN bytes are read. */
	CHECK_STR(job("cb-x 70 RUNNING\ncb-x 71 PENDING\n", 16, "cb-x"), "70 RUNNING");
	return T_DONE();
}
