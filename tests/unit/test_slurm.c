/*
 * test_slurm.c - what a Slurm node's worker reads of sinfo
 * (worker/slurm.c slurm_parse_sinfo, LAYOUT.md section 14): one card
 * per GPU of each node, busy when Slurm has it allocated (GresUsed's
 * IDX: ranges and lists) or the node takes no jobs.  The worker's
 * objects are linked (Makefile), all but its main.
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
	return T_DONE();
}
