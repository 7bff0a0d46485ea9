/*
 * cardbaton-release - let held jobs be placed again.
 *
 * Design: as cardbaton-hold (bin/hold.c), with a release request: the
 * job keeps its place in the queue, and its reason goes back to what it
 * waits for ("waiting to be scheduled", "begins at TIME", "waiting for
 * job ID").  A queued job that is not held is left as it is.
 */
#include "common.h"

int main(int argc, char **argv)
{
	return tool_queued_op(argc, argv, "cardbaton-release [--config PATH] JOB_ID...", CTL_RELEASE);
}
