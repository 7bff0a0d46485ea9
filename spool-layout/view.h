/*
 * view.h - what the tools show of a job (view.c): display text, and status's
 * view of a record, which the index's lines and status's rows share.
 */
#ifndef CARDBATON_VIEW_H
#define CARDBATON_VIEW_H

#include <stddef.h>

#include "record.h"

/*
 * Display text (the tools' views of a job's strings).  All malloc'd,
 * NULL on ENOMEM.  shell_join: ARGV as one line a POSIX shell reads
 * back as the same words: a word of only safe characters is left bare,
 * others are put in '...', and a word holding control characters in
 * bash's $'...' so that the line never carries a raw newline or
 * escape.  command_display: the command of a job, its argv joined or
 * the sh -c string with control characters shown as '?'.  printable: S
 * with every control character (C0, DEL, a UTF-8 C1) shown as '?'.
 */
char *shell_join(char *const *argv, size_t argc);
char *command_display(const struct job_def *d);
char *printable(const char *s);

/* What `status` shows of a job, from its record: the table's cells
 * (but AGE, which is `now - since`) and the --json element. */
struct status_view {
	long long id, rev, priority;
	enum job_state state;
	int staged;             /* its attempt staged on its node (the baton): the record
				   is running, the job shown queued (STATE "queued") */
	long long since;        /* epoch ms the AGE column counts from; 0 none */
	long long natt;         /* attempts (aborted ones not counted) */
	const char *node;       /* NODE: the last attempt's node, else the pinned one, or "-" */
	const char *gpus;       /* GPUS: "0,1", "any:2" or "none" */
	const char *name;       /* NAME, or "-" */
	const char *command;    /* COMMAND: command_display */
	const char *owner;      /* OWNER (a lab's spool): the owner's name, made printable;
				   NULL: not known (a record from before owners) */
	const char *json;       /* the `status --json` element, or NULL */
	char *own[7];           /* status_view_of's allocations, freed by status_view_free
				   alone: gpus, node and name when made printable, command,
				   json (cJSON's), a Slurm node's "NODE(slurm:N)", the owner
				   when made printable */
};
/* V from J; the --json element too when WITH_JSON.  0, or -1 with
 * errno ENOMEM. */
int status_view_of(const struct job *j, int with_json, struct status_view *v);
void status_view_free(struct status_view *v);

#endif
