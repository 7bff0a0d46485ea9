/*
 * cardbaton-metrics - the daemon's Prometheus metrics, as it last wrote
 * them to SPOOL/metrics.prom.
 *
 * Design: the daemon writes the file (at most once a second, when a
 * figure changed; spoold/metrics.c), atomically, in the text format of
 * node_exporter's textfile collector; this tool only copies it to
 * standard output, so that `cardbaton metrics | promtool check metrics`
 * checks what a scraper reads.  It works without the daemon (the file
 * is then what it said last; cardbaton_daemon_start_time_seconds tells
 * which daemon wrote it) and asks no node.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const char usage[] = "cardbaton-metrics [--config PATH]";

static const struct option longopts[] = {
	COMMON_LONGOPTS,
	{ NULL, 0, NULL, 0 },
};

int main(int argc, char **argv)
{
	struct config c;
	struct spool sp;
	char *buf;
	size_t len;
	int ch;

	prog_init(argc, argv);
	while ((ch = tool_getopt(argc, argv, "", longopts, 0, usage)) != -1)
		usage_error(usage, "unknown option");
	if (optind < argc)
		usage_error(usage, "no operand is taken");
	tool_config(&c);
	if (!tool_spool(&c, &sp, 0))
		die(EX_NOINPUT_, "%s: no spool yet, so no metrics (the daemon writes "
		    "metrics.prom there: cardbaton run)", c.spool);
	if (read_capped(sp.fd, "metrics.prom", METRICS_FILE_MAX, &buf, &len) < 0) {
		if (errno == ENOENT)
			die(EX_NOINPUT_, "%s/metrics.prom: no metrics yet (the daemon writes them "
			    "once it runs: cardbaton run)", sp.path);
		if (errno == ELOOP)
			die(EX_DATAERR_, "%s/metrics.prom: is a symbolic link (not followed)", sp.path);
		die_sys(errno == EFBIG ? EX_DATAERR_ : EX_NOINPUT_, "%s/metrics.prom", sp.path);
	}
	if (fwrite(buf, 1, len, stdout) != len)
		die_sys(EX_IOERR_, "standard output");
	finish_stdout();
	free(buf);
	spool_close(&sp);
	config_free(&c);
	return 0;
}
