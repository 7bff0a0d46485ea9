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
#include "yamlx.h"

const char *const ctl_op_name[CTL_N] = { "cancel", "promote", "pause", "resume", "hold", "release",
					 "drain", "undrain" };

/* Request ID.OP.UNIQUE with content BODY (malloc'd; NULL: out of
 * memory), freed. */
static int ctl_write(struct spool *sp, long long id, enum ctl_op op, char *body,
		     struct cb_err *err)
{
	struct timespec ts;
	char *name;
	int r = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	name = xasprintf("%lld.%s.%lld.%09ld.%ld", id, ctl_op_name[op],
			 (long long)ts.tv_sec, ts.tv_nsec, (long)getpid());
	if (!name || !body)
		r = cb_err_sys(err, EX_OSERR_, "request");
	else
		r = spool_write(sp, SD_CTL, name, body, err);
	free(name);
	free(body);
	return r;
}

int spool_ctl(struct spool *sp, long long id, enum ctl_op op, long long arg,
	      struct cb_err *err)
{
	return ctl_write(sp, id, op, arg == CTL_NO_ARG ? strdup("") :
			 xasprintf("priority %lld\n", arg), err);
}

int spool_ctl_drain(struct spool *sp, const char *node, int on, int checkpoint,
		    struct cb_err *err)
{
	return ctl_write(sp, 0, on ? CTL_DRAIN : CTL_UNDRAIN,
			 xasprintf("node %s\n%s", node, on && checkpoint ? "checkpoint\n" : ""), err);
}

int ctl_parse_drain(const char *body, size_t len, char **node, int *checkpoint)
{
	const char *p = body, *end = body + len;
	char *name = NULL;
	int ck = 0;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (n == 10 && !memcmp(p, "checkpoint", 10) && !ck) {
			ck = 1;
		} else if (n > 5 && !memcmp(p, "node ", 5) && !name) {
			/* A node's name as the config has it. */
			if (memchr(p + 5, '\0', n - 5) || !(name = strndup(p + 5, n - 5)) ||
			    yx_node_name_problem(name))
				goto bad;
		} else {
			goto bad;
		}
		p += n + (nl != NULL);
	}
	if (!name)
		return -1;
	*node = name;
	*checkpoint = ck;
	return 0;
bad:
	free(name);
	return -1;
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
	/* ID 0, a node's request, written "0" alone. */
	r = strcmp(num, "0") ? jobid_parse(num, id) : (*id = 0);
	free(num);
	if (r < 0)
		return -1;
	for (int i = 0; i < CTL_N; i++)
		if (strlen(ctl_op_name[i]) == (size_t)(dot2 - dot - 1) &&
		    !strncmp(dot + 1, ctl_op_name[i], (size_t)(dot2 - dot - 1))) {
			if (!CTL_NODE_OP(i) != (*id != 0))
				return -1;
			*op = (enum ctl_op)i;
			return 0;
		}
	return -1;
}
