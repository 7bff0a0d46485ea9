/*
 * cardbaton-drain - take a node out of service.
 *
 * Design: the drained state is a file, SPOOL/drain/NODE (LAYOUT.md
 * §13), written atomically; the daemon hears of it through inotify,
 * now or when it next starts.  Nothing new is placed on the node; with
 * --checkpoint its resumable running jobs are asked to checkpoint (as
 * at a time limit, within their grace) and wait, queued, pinned to it;
 * other jobs run to their end.  `cardbaton undrain NODE` ends it.
 */
#include "common.h"

int main(int argc, char **argv)
{
	return tool_drain(argc, argv, "cardbaton-drain [--config PATH] [--checkpoint] NODE", 1);
}
