/*
 * ctl.c - control requests, SPOOL/ctl/ID.OP.UNIQUE (LAYOUT.md §2): the
 * tools write them, the daemon applies and removes them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "names.h"

const char *const ctl_op_name[CTL_N] = { "cancel", "promote", "pause", "resume", "hold", "release" };

int spool_ctl(struct spool *sp, long long id, enum ctl_op op, long long arg,
	      struct cb_err *err)
{
	struct timespec ts;
	char *name, *body;
	int r = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	name = xasprintf("%lld.%s.%lld.%09ld.%ld", id, ctl_op_name[op],
			 (long long)ts.tv_sec, ts.tv_nsec, (long)getpid());
	body = arg == CTL_NO_ARG ? strdup("") : xasprintf("priority %lld\n", arg);
	if (!name || !body)
		r = cb_err_sys(err, EX_OSERR_, "request");
	else
		r = spool_write(sp, SD_CTL, name, body, err);
	free(name);
	free(body);
	return r;
}

int ctl_parse_name(const char *name, long long *id, enum ctl_op *op)
{
	const char *dot = strchr(name, '.'), *dot2;
	char *num;
	int r;

	if (!dot || !(dot2 = strchr(dot + 1, '.')))
		return -1;
	if (!(num = strndup(name, (size_t)(dot - name))))
		return -1;
	r = jobid_parse(num, id);
	free(num);
	if (r < 0)
		return -1;
	for (int i = 0; i < CTL_N; i++)
		if (strlen(ctl_op_name[i]) == (size_t)(dot2 - dot - 1) &&
		    !strncmp(dot + 1, ctl_op_name[i], (size_t)(dot2 - dot - 1))) {
			*op = (enum ctl_op)i;
			return 0;
		}
	return -1;
}
