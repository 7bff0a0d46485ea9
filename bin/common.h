/*
 * common.h - what every cardbaton-* tool shares: its name, dying with
 * one line and a sysexits(3) code, the --config/-h/--help options,
 * loading the config and opening the spool, and the bits of output
 * formatting (shell quoting, ages, aligned tables) that the human
 * views have in common.
 *
 * Library code (base/, spool-layout/, link/) returns errors in a struct
 * cb_err; only these helpers print them, always as the single line
 * "PROG: text".
 */
#ifndef CARDBATON_BIN_COMMON_H
#define CARDBATON_BIN_COMMON_H

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

#include "spool.h"
#include "node.h"

/* ---- program name and dying ------------------------------------------- */

/* basename(argv[0]); "cardbaton" until prog_init runs, which also
 * shows the link's progress lines (node_set_progress) on a terminal as
 * "cardbaton: LINE". */
extern const char *progname;
void prog_init(int argc, char **argv);

/* "PROG: text" on stderr, then exit(EX). */
_Noreturn void die(int ex, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Same with ": strerror(errno)" appended. */
_Noreturn void die_sys(int ex, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The error a library call recorded (a NULL message means it ran out
 * of memory); exits with its code, or EX_SOFTWARE_ when none was set. */
_Noreturn void die_err(const struct cb_err *err);
/* "PROG: text" on stderr without exiting (for a tool that goes on). */
void warn_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- options ------------------------------------------------------------ */

/* Long options every tool takes; put COMMON_LONGOPTS first in the
 * tool's table and drive the loop with tool_getopt. */
enum { OPT_CONFIG = 0x100, OPT_TOOL_FIRST = 0x200 };
#define COMMON_LONGOPTS \
	{ "config", required_argument, NULL, OPT_CONFIG }, \
	{ "help", no_argument, NULL, 'h' }

/* Set by --config; NULL means "look for it" (config_load). */
extern const char *opt_config;

/*
 * getopt_long over ARGV that handles the common options itself:
 * --config (stored in opt_config), -h/--help (USAGE on stdout, exit 0),
 * an unknown option or a missing argument (one line naming the option,
 * with USAGE, exit 64).  SHORTOPTS must not begin with ':' or '+'; it
 * is used in POSIX mode ("+": options end at the first operand) when
 * STOP_AT_OPERAND, else operands and options may mix.  Returns the
 * next tool option, or -1 at the end (optind is the first operand).
 */
int tool_getopt(int argc, char **argv, const char *shortopts,
		const struct option *longopts, int stop_at_operand, const char *usage);

/* "PROG: text; usage: USAGE" on stderr, exit 64. */
_Noreturn void usage_error(const char *usage, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Flag values: parse or exit 64 with a line naming FLAG. */
long long flag_ll(const char *flag, const char *val, long long lo, long long hi);
/* A job ID operand; exit 64 "'x' is not a job ID" otherwise. */
long long arg_jobid(const char *s);

/* ---- config and spool ---------------------------------------------------- */

/* config_load(opt_config) or die with its error. */
void tool_config(struct config *c);

/*
 * Open the spool of C.  CREATE: make it when missing (submit).
 * Without CREATE a spool that does not exist yet returns 0 (nothing
 * opened: an empty queue, or "no such job"); 1 when opened; any other
 * failure exits with the library's line.
 */
int tool_spool(const struct config *c, struct spool *sp, int create);

/*
 * Ask the worker on J's node to OP ("cancel", "pause") J's current
 * attempt, so that the request acts even while the daemon is down.  An
 * attempt the node never heard of is fine (the daemon does the rest);
 * any other failure exits 69 saying that the request in ctl/ waits for
 * the daemon.
 */
void ask_worker(const struct config *c, const struct job *j, const char *op);

/* The options and operand of a tool that takes only --config and one
 * JOB_ID (usage errors exit 64): the job ID. */
long long tool_one_job(int argc, char **argv, const char *usage);
/* hold, release: OP for every JOB_ID given (at least one), each a queued
 * job (66 for one that does not exist, 1 for one not queued: nothing
 * asked then); the tool's whole main. */
int tool_queued_op(int argc, char **argv, const char *usage, enum ctl_op op);
/* drain (ON 1) or undrain (ON 0) NODE: cardbaton-drain, -undrain
 * (drain.h).  An unknown node is 66. */
int tool_drain(int argc, char **argv, const char *usage, int on);

/* Load the config into C, open its spool SP and find job ID (wherever it
 * is) into J; exit 66 "no such job ID" when there is none. */
void tool_find_job(struct config *c, struct spool *sp, long long id, struct job *j);

/* Who may do what (SPEC §12): 1 when the caller (getuid) is an admin of
 * C's lab, or C has no lab. */
int tool_admin(const struct config *c, const struct spool *sp);
/* In a lab's spool, exit 77 with one line unless the caller may OP
 * ("cancel") job J: its owner, or an admin (a job without an owner:
 * admins only).  Without a lab: nothing. */
void tool_may_act(const struct config *c, const struct spool *sp, const struct job *j,
		  const char *op);

/* ---- output ------------------------------------------------------------- */

/* Flush stdout and exit 74 with a line when writing it failed. */
void finish_stdout(void);

/* Columns of the terminal on stdout, or 0 when stdout is not one. */
int term_width(void);

/* shell_join, command_display and printable are in view.h (view.c):
 * the daemon renders status's cells into SPOOL/queued.idx with them. */

/* A duration in ms as "45s", "12m", "3h07m", "2d05h" into BUF. */
void fmt_age(char *buf, size_t size, long long ms);
/* RFC 3339 text of MS, or "-" for 0 (malloc'd, NULL on ENOMEM). */
char *fmt_time(long long ms);

/*
 * Aligned columns for the human views: a header row, then rows of
 * strings; every column but the last is padded to its widest cell
 * (counted in UTF-8 characters) and separated by two spaces; columns
 * flagged in RIGHT (bit i = column i) are right-aligned (a right-aligned
 * last column is padded too).  With WIDTH > 0 each line is cut to WIDTH
 * characters (the last column is the one that loses); trailing spaces
 * are dropped.
 *
 * The rules are table_cols's alone.  A table whose rows are at hand
 * twice -- once to widen the columns, once to print -- uses it without
 * keeping them (status's 100,000 rows: table_cols_widen as each row is
 * read, table_cols_line into its own buffer when all are); struct table
 * keeps its rows and does both (table_print).
 */
#define TABLE_MAXCOL 32
struct table_cols {
	size_t ncol;
	unsigned right;
	size_t w[TABLE_MAXCOL];     /* widest cell of each column, in characters */
};
/* NCOL columns (at most TABLE_MAXCOL), none wide yet. */
void table_cols_init(struct table_cols *c, size_t ncol, unsigned right);
/* Widen the columns to a row's cells: NCOL strings, LENS[i] bytes each
 * (NULL: strlen).  The last column counts only when right-aligned; when
 * not, its cell (and its LENS) is never read.  NCOL may be lowered
 * between rows and lines: the columns past it are not shown, and the
 * new last one's width is not used unless it is right-aligned. */
void table_cols_widen(struct table_cols *c, const char *const *cells, const size_t *lens);
/* One line of the table, its newline included, added to B (grown as
 * needed, and NUL-terminated as sbuf_add leaves it); -1 on ENOMEM.
 * CELLS and LENS as for table_cols_widen, the columns widened with them
 * (a cell wider than its column is not padded). */
int table_cols_line(const struct table_cols *c, const char *const *cells, const size_t *lens,
		    int width, struct sbuf *b);

/* A table that keeps its rows until table_print. */
struct table {
	struct table_cols cols;
	size_t nrow, cap;
	char **cell;            /* nrow * cols.ncol */
	int borrowed;           /* cells are the caller's (table_row_ref) */
};
/* Exits 70 when NCOL is over TABLE_MAXCOL. */
void table_init(struct table *t, size_t ncol, unsigned right);
/* NCOL strings (NULL: ""), copied; exits 71 on ENOMEM. */
void table_row(struct table *t, const char *const *cells);
/* NCOL malloc'd strings, which the table now owns. */
void table_row_own(struct table *t, char **cells);
/* NCOL strings the caller keeps until table_free (which frees none of
 * them): for a table of many rows.  Not mixed with the two above. */
void table_row_ref(struct table *t, const char *const *cells);
void table_print(const struct table *t, FILE *fp, int width);
void table_free(struct table *t);

/* xasprintf that exits 71 on ENOMEM. */
char *must_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
