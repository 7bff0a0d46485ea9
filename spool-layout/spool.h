/*
 * spool.h - libcardbaton-spool: the one library that owns the disk.
 *
 * Everything that reads or writes the spool, job files, job records or
 * config.yaml goes through here; LAYOUT.md (beside this file) is the
 * specification this code implements.  Conventions (skalibs, style(9)):
 *
 *  - functions return 0 (or a count / 1 for "found") on success and -1
 *    on failure; they never print and never exit;
 *  - a failing function that takes a `struct cb_err *` fills it with a
 *    sysexits(3) code and one line of text (no program name, no
 *    newline) that main() prints as "tool: text";
 *  - every path is built with xasprintf (no fixed-size buffers);
 *  - every spool file is opened with O_NOFOLLOW and relative to an open
 *    directory fd.
 *
 * This header includes every module's own, so that a program needs
 * only this one:
 *
 *   base.h      (base/) libc only: exit codes, xasprintf, clocks,
 *               write_full, read_capped, atomic_write, locks
 *   util.h      errors, growing buffers, text of times and numbers
 *   atomic.h    the rename that never replaces
 *   names.h     the file-name grammar, job and attempt IDs
 *   jobfile.h   job files (YAML or JSON)
 *   expand.h    arrays and sweeps: one definition, many jobs
 *   config.h    config.yaml
 *   record.h    job records
 *   spooldir.h  the spool directory: open, lock, list, seq, submit
 *               (spool.c)
 *   store.h     records in the spool: load, find, put, reject
 *   ctl.h       control requests
 *   nodestat.h  nodes/: what the daemon last saw of each node
 *   drain.h     drain/: the nodes taken out of service
 *   batch.h     many atomic writes at once
 *   view.h      what status shows of a job
 *   index.h     queued.idx, status's cache of queued/
 *   statusread.h  how status reads the spool
 *   history.h   every job with a record, once (report, users)
 *   waitread.h  how wait reads the spool
 *   crash.h, wire.h  (libc only, shared with the worker)
 *
 * The node link (running the worker on a node) is not here: link/node.h.
 */
#ifndef CARDBATON_SPOOL_H
#define CARDBATON_SPOOL_H

#include "base.h"
#include "crash.h"
#include "wire.h"

#include "util.h"
#include "atomic.h"
#include "names.h"
#include "jobfile.h"
#include "expand.h"
#include "config.h"
#include "record.h"
#include "spooldir.h"
#include "store.h"
#include "ctl.h"
#include "nodestat.h"
#include "drain.h"
#include "batch.h"
#include "view.h"
#include "index.h"
#include "statusread.h"
#include "history.h"
#include "waitread.h"

#endif
