/*
 * acall.c - node calls the daemon does not wait for.
 *
 * Each node has two slots: `query` (cardbaton-worker gpus, for its card
 * snapshot) and `check` (cardbaton-worker status ID..., the reconcile).
 * A call is a child process whose stdout the main loop polls; when it
 * ends, its output goes to the slot's handler.  A slow or partitioned
 * node therefore delays nobody else, and every call is killed at its
 * deadline.  Launches stay synchronous (they are short, and their
 * answer decides the job's next state before anything else may).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spoold.h"

int acall_start(struct daemon *d, struct node *n, struct acall *a,
		const char *const *args, int timeout_ms)
{
	int out;

	if (a->pid > 0)
		return 0;
	a->pid = node_spawn(&d->cfg, n->conf, args, NULL, &out);
	if (a->pid < 0) {
		a->pid = 0;
		node_failed(d, (size_t)(n - d->nodes), strerror(errno));
		return -1;
	}
	a->fd = out;
	a->buf.len = 0;
	a->deadline = mono_now() + timeout_ms;
	return 0;
}

void acall_stop(struct acall *a)
{
	if (a->pid <= 0)
		return;
	close(a->fd);
	kill(-a->pid, SIGKILL);
	while (waitpid(a->pid, NULL, 0) < 0 && errno == EINTR)
		;
	a->pid = 0;
}

int acall_read(struct acall *a, int *status)
{
	char buf[65536];
	ssize_t r = read(a->fd, buf, sizeof buf);

	if (r > 0) {
		if (sbuf_add(&a->buf, buf, (size_t)r) < 0) {
			acall_stop(a);
			*status = -1;
			return 1;
		}
		return 0;
	}
	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	close(a->fd);
	*status = -1;
	while (waitpid(a->pid, status, 0) < 0 && errno == EINTR)
		;
	a->pid = 0;
	if (!a->buf.s && sbuf_add(&a->buf, "", 0) < 0)
		*status = -1;
	else if (*status != -1)
		*status = WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
	return 1;
}

int acall_expired(struct acall *a)
{
	if (a->pid <= 0 || mono_now() < a->deadline)
		return 0;
	acall_stop(a);
	return 1;
}

void acall_free(struct acall *a)
{
	acall_stop(a);
	sbuf_free(&a->buf);
}
