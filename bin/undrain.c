/*
 * cardbaton-undrain - put a drained node back in service: removes
 * SPOOL/drain/NODE (LAYOUT.md §13); its jobs waiting for it are placed
 * there again.  A node that is not drained: nothing to do.
 */
#include "common.h"

int main(int argc, char **argv)
{
	return tool_drain(argc, argv, "cardbaton-undrain [--config PATH] NODE", 0);
}
