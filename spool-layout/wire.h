/*
 * wire.h - the record format spoken between the controller and
 * cardbaton-worker, and used for the worker's files on a node.
 *
 * libc only: this file and wire.c are compiled into the worker, which
 * must build anywhere with nothing but a C compiler (it is shipped as
 * source to nodes of another architecture).
 *
 * A record is a sequence of lines "KEY SP VALUE LF" ended by the line
 * "end".  KEY is [a-z0-9_]+.  VALUE is any byte string, escaped so that
 * it holds no byte below 0x21, no 0x7f and no '%': each such byte is
 * written as '%' and two upper-case hex digits.  An empty value is
 * written as nothing after the space.  A reader refuses %00: a value
 * never holds a NUL.  Keys may repeat (arg, env, gpu);
 * order is kept.  Unknown keys are ignored by readers, so either side
 * can add keys without breaking the other.  See spool-layout/LAYOUT.md,
 * "The worker protocol".
 */
#ifndef CARDBATON_WIRE_H
#define CARDBATON_WIRE_H

#include <stddef.h>
#include <stdio.h>

/* Longest record a reader accepts, in bytes: a cap on input from
 * another program (the launch spec holds argv and env). */
#define WIRE_MAX_RECORD (4u << 20)

struct wire_field {
	char *key;
	char *val;      /* decoded; NUL-terminated; parsed: holds no NUL */
	size_t len;     /* length of val in bytes */
};

struct wire_rec {
	struct wire_field *f;
	size_t n, cap;
};

/* Appending to a record; the value is copied.  Return 0, or -1 with
 * errno (ENOMEM). */
int wire_add(struct wire_rec *r, const char *key, const char *val);
int wire_addn(struct wire_rec *r, const char *key, const char *val, size_t len);
int wire_addf(struct wire_rec *r, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Replace the first field KEY (or append it). */
int wire_set(struct wire_rec *r, const char *key, const char *val);

/* First value of KEY, or NULL.  wire_get_ll: 0 and *out set, or -1
 * when absent or not a decimal integer that fits. */
const char *wire_get(const struct wire_rec *r, const char *key);
int wire_get_ll(const struct wire_rec *r, const char *key, long long *out);

void wire_free(struct wire_rec *r);

/* Serialise R (with the final "end" line) into a malloc'd buffer.
 * Return its length, or -1 with errno. */
long wire_format(const struct wire_rec *r, char **out);

/*
 * Parse one record from BUF[0..LEN) into R (which must be empty).
 * Return the number of bytes consumed (through the "end" line), 0 if
 * BUF holds no complete record yet, or -1 on malformed input (a %00
 * included) with errno = EINVAL (or ENOMEM) and *why pointing to a
 * static message.
 */
long wire_parse(const char *buf, size_t len, struct wire_rec *r, const char **why);

/* Read one record from FP.  Return 1 on a record, 0 on clean EOF
 * before any byte, -1 on error or malformed/oversized input (errno
 * set, *why static text when the input was at fault). */
int wire_read(FILE *fp, struct wire_rec *r, const char **why);

/* Write R to FD completely.  Return 0 or -1 with errno. */
int wire_write_fd(int fd, const struct wire_rec *r);

/*
 * The states of an attempt on a node, as the worker writes them in
 * attempts/ID.state and says them (status, watch, launch): the one
 * list the worker and the controller share.  starting: leases taken,
 * job not yet started; busy: a card was busy, nothing started (never
 * on disk); unknown: status has no record of the attempt; staged: the
 * attempt waits on the node for the attempts its spec names `after` to
 * end, holding nothing (STATE/staged/ID, LAYOUT.md section 8: the
 * baton); unstaged: final, a staged attempt that never started (asked
 * back, or its cards were busy when its turn came).  The final ones:
 * paused succeeded failed cancelled lost unstaged.
 */
enum wire_state {
	WS_STARTING, WS_BUSY, WS_RUNNING, WS_PAUSING, WS_PAUSED,
	WS_SUCCEEDED, WS_FAILED, WS_CANCELLED, WS_LOST, WS_UNKNOWN,
	WS_STAGED, WS_UNSTAGED,
	WS_N
};
const char *wire_state_name(enum wire_state s);
/* 0 and *OUT, or -1 for a name that is none of them (or NULL). */
int wire_state_parse(const char *s, enum wire_state *out);
int wire_state_final(enum wire_state s);

#endif
