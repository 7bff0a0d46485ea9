/*
 * test_ctl.c - who may do what in a lab's spool (SPEC §12), the pure
 * parts: the control requests' names and a drain request's content
 * (ctl.c, LAYOUT.md §7), and promote's priority rule (lab.c
 * lab_promote_prio), an admin's and a member's.
 */
#include <stdlib.h>

#include "spool.h"
#include "t.h"

static int parses(const char *name, long long id, enum ctl_op op)
{
	long long i = -1;
	enum ctl_op o = CTL_N;

	return ctl_parse_name(name, &i, &o) == 0 && i == id && o == op;
}

static int refused(const char *name)
{
	long long i;
	enum ctl_op o;

	return ctl_parse_name(name, &i, &o) < 0;
}

static void test_names(void)
{
	CHECK(parses("12.cancel.1700000000.000000001.42", 12, CTL_CANCEL));
	CHECK(parses("7.promote.1.1", 7, CTL_PROMOTE));
	CHECK(parses("0.drain.1700000000.000000001.42", 0, CTL_DRAIN));
	CHECK(parses("0.undrain.1.1", 0, CTL_UNDRAIN));
	/* ID 0 is a node's request only, and a node's request is ID 0's. */
	CHECK(refused("0.cancel.1.1"));
	CHECK(refused("5.drain.1.1"));
	CHECK(refused("5.undrain.1.1"));
	CHECK(refused("00.drain.1.1"));
	CHECK(refused("-0.drain.1.1"));
	CHECK(refused("0.drain"));
	CHECK(refused("0.drainx.1.1"));
	CHECK(!strcmp(ctl_op_name[CTL_DRAIN], "drain") && !strcmp(ctl_op_name[CTL_UNDRAIN], "undrain"));
	CHECK(CTL_NODE_OP(CTL_DRAIN) && CTL_NODE_OP(CTL_UNDRAIN) && !CTL_NODE_OP(CTL_CANCEL) &&
	      !CTL_NODE_OP(CTL_RELEASE));
}

static int drain_body(const char *body, const char *node, int ck)
{
	char *n = NULL;
	int c = -1, r = ctl_parse_drain(body, strlen(body), &n, &c) == 0 && n && !strcmp(n, node) &&
			c == ck;

	free(n);
	return r;
}

static int bad_body(const char *body)
{
	char *n = NULL;
	int c, r = ctl_parse_drain(body, strlen(body), &n, &c);

	free(n);
	return r < 0 && !n;
}

static void test_drain_body(void)
{
	CHECK(drain_body("node lab-b\n", "lab-b", 0));
	CHECK(drain_body("node lab-b\ncheckpoint\n", "lab-b", 1));
	CHECK(drain_body("checkpoint\nnode x", "x", 1));
	CHECK(bad_body(""));
	CHECK(bad_body("checkpoint\n"));
	CHECK(bad_body("node \n"));
	CHECK(bad_body("node a\nnode b\n"));
	CHECK(bad_body("node a\ncheckpoint\ncheckpoint\n"));
	CHECK(bad_body("node a b\n"));
	CHECK(bad_body("node ../x\n"));
	CHECK(bad_body("node a\n\n"));
	CHECK(bad_body("node a\nfoo\n"));
	CHECK(bad_body("node a\r\n"));
	CHECK(bad_body("node -a\n"));          /* the config's grammar for a node's name */
	CHECK(bad_body("node a:b\n"));
	CHECK(drain_body("node aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
			 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0));
	CHECK(bad_body("node aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n"));
	{
		char body[] = "node a\0b\n";
		char *n = NULL;
		int c;

		CHECK(ctl_parse_drain(body, sizeof body - 1, &n, &c) < 0 && !n);
	}
}

static void test_promote_rule(void)
{
	/* An admin's: above every other queued job, at most PRIO_MAX. */
	CHECK(lab_promote_prio(0, 5, PRIO_MAX) == 6);
	CHECK(lab_promote_prio(0, 0, PRIO_MAX) == 1);          /* equal: one above */
	CHECK(lab_promote_prio(9, 5, PRIO_MAX) == 9);          /* highest already */
	CHECK(lab_promote_prio(3, PRIO_MIN - 1, PRIO_MAX) == 3); /* alone */
	CHECK(lab_promote_prio(0, PRIO_MAX, PRIO_MAX) == PRIO_MAX);
	/* A member's: above the member's own jobs (TOP is theirs: bob's
	 * job of 50 does not count), at most max_priority. */
	CHECK(lab_promote_prio(0, 2, 10) == 3);
	CHECK(lab_promote_prio(0, 10, 10) == 10);              /* the cap: equal, FIFO */
	CHECK(lab_promote_prio(0, 20, 10) == 10);
	CHECK(lab_promote_prio(12, 20, 10) == 12);             /* above the cap: never lowered */
	CHECK(lab_promote_prio(12, 3, 10) == 12);
	CHECK(lab_promote_prio(-5, -7, 10) == -5);
	CHECK(lab_promote_prio(-5, -5, 10) == -4);
	CHECK(lab_promote_prio(-5, PRIO_MIN - 1, 0) == -5);
}

int main(void)
{
	test_names();
	test_drain_body();
	test_promote_rule();
	return T_DONE();
}
