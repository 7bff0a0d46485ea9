/*
 * cardbaton-hold - keep queued jobs from being placed until released.
 *
 * Design: tools never modify job records (LAYOUT.md §7); this one checks
 * that every job named is queued (or still waiting in new/ or incoming/
 * for the daemon) and drops a hold request for each into ctl/.  The
 * daemon applies it, now or when it next starts: the job stays in its
 * place in the queue, reason "held", and is not placed until
 * `cardbaton release`.  A job held already stays held.
 */
#include "common.h"

int main(int argc, char **argv)
{
	return tool_queued_op(argc, argv, "cardbaton-hold [--config PATH] JOB_ID...", CTL_HOLD);
}
