/*
 * json.h - the worker's one JSON reader: the checkpoint marker that a
 * pausing job publishes at SSHGPU_CHECKPOINT_READY (SPEC section 9,
 * LAYOUT.md section 8).  libc only, no I/O, any bytes in: this is a
 * fuzz target (tests/unit/test_ckjson.c includes json.c).
 */
#ifndef CARDBATON_WORKER_JSON_H
#define CARDBATON_WORKER_JSON_H

#include <stddef.h>

/* The marker's largest size, in bytes; a bigger file is refused. */
#define CK_MARKER_MAX 65536

enum ck_status {
	CK_OK = 0,
	CK_INVALID,     /* not JSON (RFC 8259, strictly): *why says where */
	CK_NOT_OBJECT,  /* JSON, but not an object */
	CK_NO_PATH,     /* no "checkpoint" key, or its value is not a
			 * string, or the string is empty */
	CK_DUP,         /* "checkpoint" given more than once */
	CK_NUL,         /* the path holds a NUL byte (\u0000) */
	CK_NOMEM,
};

/*
 * Parse BUF[0..LEN) (not NUL-terminated, any bytes) as a checkpoint
 * marker: one JSON object, surrounded by nothing but JSON whitespace,
 * with a key "checkpoint" whose value is a non-empty string; other keys
 * are allowed and ignored.  The text must be UTF-8 (no overlong forms,
 * no surrogates, nothing above U+10FFFF); strings decode the escapes
 * \" \\ \/ \b \f \n \r \t and \uXXXX (surrogate pairs joined) to UTF-8.
 *
 * CK_OK: *path is the decoded value (malloc'd, NUL-terminated, holds no
 * NUL), *plen its length.  CK_INVALID: *why (malloc'd, or NULL when out
 * of memory) says what is wrong and at which byte offset.  Otherwise
 * *path and *why are NULL.
 */
enum ck_status ck_marker_parse(const char *buf, size_t len, char **path, size_t *plen,
			       char **why);

#endif
