/*
 * yamlx.h - the strict YAML subset that job files and config.yaml share.
 *
 * yx_load reads one document into a small tree (scalars, sequences,
 * mappings, each with its 1-based line) and refuses, before any field
 * is looked at, what neither file may contain: anchors and aliases (no
 * alias bombs), tags, several documents, nesting deeper than
 * YX_MAX_DEPTH, scalars longer than YX_MAX_SCALAR, NUL bytes, input
 * that is not UTF-8, input larger than YX_MAX_INPUT.  JSON is read as
 * YAML; surrogate-pair escapes ("\ud83d\ude00"), which libyaml does not
 * take, and raw characters in strings that YAML refuses or reads as line
 * breaks (DEL, C1 controls, U+2028, U+2029, U+FFFE, U+FFFF) are
 * rewritten first, as YAML escapes, when the document is JSON.
 *
 * The getters below check one value's type and range and, on failure,
 * record "FILE:LINE: KEY: problem" where KEY is built from a yx_path
 * chain only when an error is reported ("nodes.lab-a.gpus[2]").
 */
#ifndef CARDBATON_YAMLX_H
#define CARDBATON_YAMLX_H

#include <stddef.h>

#include "spool.h"

#define YX_MAX_INPUT (1u << 20)
#define YX_MAX_DEPTH 16
#define YX_MAX_SCALAR (64u << 10)
#define YX_MAX_NODES 65536      /* bounds the tree (a job file needs ~12300) */

enum yx_type { YX_SCALAR, YX_SEQ, YX_MAP };

struct yx_node {
	enum yx_type type;
	unsigned long line;     /* 1-based, from libyaml's start mark */
	int plain;              /* scalar written without quotes */
	char *s;                /* scalar text, NUL-terminated */
	size_t len;             /* its length (it may contain NUL) */
	struct yx_node *kids;   /* sequence: n items; mapping: 2n, key, value, ... */
	size_t n;
};

/* A key path for messages: {up, key, -1} is "UP.key", {up, NULL, i}
 * is "UP[i]". */
struct yx_path {
	const struct yx_path *up;
	const char *key;
	long long idx;
};

/* Where errors go: file name for messages, sysexits code, the error. */
struct yx_ctx {
	const char *fname;
	int ex;
	struct cb_err *err;
};

/* Parse BUF[0..LEN).  0 with *ROOT the document (NULL when the input
 * holds no document or one that is empty), or -1 with the error set:
 * "FILE:LINE: problem" or "FILE: problem". */
int yx_load(const struct yx_ctx *c, const char *buf, size_t len, struct yx_node **root);
void yx_free(struct yx_node *root);

/* Record "FILE:LINE: PATH: problem" (N NULL: no line; P NULL: no key).
 * Returns -1. */
int yx_fail(const struct yx_ctx *c, const struct yx_node *n, const struct yx_path *p,
	    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* A plain scalar YAML reads as null: "", "~", "null", "Null", "NULL". */
int yx_is_null(const struct yx_node *n);

/* Type checks; each records its error and returns -1. */
int yx_map(const struct yx_ctx *c, const struct yx_node *n, const struct yx_path *p);
int yx_seq(const struct yx_ctx *c, const struct yx_node *n, const struct yx_path *p,
	   size_t max);
/* A string: any scalar but a plain null, without NUL characters.  *out
 * points into the tree. */
int yx_str(const struct yx_ctx *c, const struct yx_node *n, const struct yx_path *p,
	   const char **out);
/* A plain decimal integer in [lo, hi] (no sign but '-', no leading
 * zeros, no exponent, not quoted). */
int yx_int(const struct yx_ctx *c, const struct yx_node *n, const struct yx_path *p,
	   long long lo, long long hi, long long *out);
/* A plain true or false (also True/TRUE/False/FALSE, as YAML 1.2's core
 * schema reads them; yes/no/on/off are refused as ambiguous). */
int yx_bool(const struct yx_ctx *c, const struct yx_node *n, const struct yx_path *p,
	    int *out);
/* A sequence of 1..MAX strings, copied (free with yx_strv_free). */
int yx_str_list(const struct yx_ctx *c, const struct yx_node *n, const struct yx_path *p,
		size_t max, char ***out, size_t *nout);
/* A sequence of distinct integers in [lo, hi] (at least one when
 * NONEMPTY), copied; *out is NULL for an empty list. */
int yx_int_set(const struct yx_ctx *c, const struct yx_node *n, const struct yx_path *p,
	       long long lo, long long hi, int nonempty, int **out, size_t *nout);

void yx_strv_free(char **v, size_t n);

/* Node names, as config.yaml defines them and job files pin them:
 * [A-Za-z0-9._-]{1,64}, not beginning with '-' (a name may reach a
 * command line).  NULL when S is one, else the problem. */
const char *yx_node_name_problem(const char *s);

#endif
