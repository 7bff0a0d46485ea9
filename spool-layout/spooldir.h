/*
 * spooldir.h - the spool directory (spool.c, LAYOUT.md §§1-4): opening
 * it, its subdirectories, the daemon's lock, listing, the sequence
 * counter, submitting.
 */
#ifndef CARDBATON_SPOOLDIR_H
#define CARDBATON_SPOOLDIR_H

#include <stddef.h>
#include <sys/types.h>

#include "jobfile.h"
#include "lab.h"
#include "record.h"
#include "util.h"

enum spool_dir {
	SD_TMP, SD_NEW, SD_INCOMING, SD_QUEUED, SD_RUNNING, SD_PAUSED,
	SD_DONE, SD_REJECTED, SD_CTL, SD_NODES,
	SD_N
};
extern const char *const spool_dir_name[SD_N];
enum spool_dir job_state_dir(enum job_state s);

struct spool {
	char *path;
	int fd;                 /* the spool directory */
	int dir[SD_N];          /* its subdirectories, O_DIRECTORY|O_NOFOLLOW */
	char id[9];             /* 8 hex digits, from the file "id" */
	mode_t fmode, dmode;    /* of what it creates: 0600/0700, or shared (spool_open) */
	int lab;                /* a lab's spool (lab.h, LAYOUT.md §15): spool_open_lab */
	int daemon;             /* opened by a lab's daemon (spool_open_lab) */
	int drop_tmp;           /* a lab's daemon: the members' tmp/ (DIR[SD_TMP] is then
				   its own stage/, which no member can write), else -1 */
	uid_t uid;              /* the spool's owner: the daemon's account */
	gid_t gid;              /* a lab's group */
};

/* The sysexits code of a failed spool write with errno E: EX_TEMPFAIL_
 * for a full disk, quota, read-only spool, I/O error or ENOMEM, else
 * EX_OSERR_. */
int spool_errno_ex(int e);

/* Open (CREATE: make it, mode 0700, if missing) the spool at PATH.
 * What CardBaton creates in it is private: directories 0700, files
 * 0600, whatever the umask.  A group-shared spool (LAYOUT.md §1): when
 * PATH itself has the set-group-ID bit, its group permission bits are
 * given to every directory (and, without x, file) created inside.
 * No subdirectory is followed through a symbolic link.
 * Errors: EX_CONFIG_ / EX_OSERR_ / EX_TEMPFAIL_ with the path. */
int spool_open(struct spool *sp, const char *path, int create, struct cb_err *err);
/*
 * A lab's spool (LAYOUT.md §15), owned by the daemon's account and
 * group GID: directories members drop files into (tmp/, new/, ctl/)
 * mode 3770, every other one (the spool's own too) 2750, files 0640
 * (seq 0660: submitters take numbers; lock 0600).  DAEMON: make what
 * is missing with those modes (the daemon's account owning it, GID its
 * group) and check what exists: a directory with another mode, owner or
 * group is EX_CONFIG_ "SPOOL/new: mode 2770, expected 3770".  Not
 * DAEMON (a tool): nothing is made (a missing spool: EX_CONFIG_).
 */
int spool_open_lab(struct spool *sp, const char *path, gid_t gid, int daemon, struct cb_err *err);
/* The mode a lab's spool gives its directory NAME ("": the spool). */
mode_t spool_lab_dmode(const char *name);
void spool_close(struct spool *sp);

/* A directory of the spool that only the daemon uses (hooks/, LAYOUT.md
 * §12): made as the others are when missing (so that a spool made
 * before it existed still opens for the tools), opened as they are.
 * Its fd, or -1 with the error (EX_CONFIG_ for a symbolic link). */
int spool_subdir(struct spool *sp, const char *name, struct cb_err *err);

/* The daemon's lock ("lock"); returns the held fd, or -1 with
 * EX_TEMPFAIL_ "another cardbaton-spoold holds SPOOL/lock". */
int spool_lock_daemon(struct spool *sp, struct cb_err *err);

/* The highest job ID any name in the spool holds (LAYOUT.md §2; a
 * lab's new/ but for names far past the rest, §15), or -1. */
long long spool_max_id(struct spool *sp);
/* Next sequence number (file "seq", under flock of "seq.lock"). */
int spool_next_seq(struct spool *sp, long long *seq, struct cb_err *err);
/* For a batch of files in new/: the counter made at least FLOOR (the
 * highest number the files' own names carry, 0: none, so that later
 * numbers never collide with them), then COUNT numbers handed out,
 * *FIRST .. *FIRST + COUNT - 1. */
int spool_seq_block(struct spool *sp, long long floor, long long count, long long *first,
		    struct cb_err *err);

/* Submit: the next sequence number (for an array or sweep of N jobs,
 * the next N), write the job as JSON into tmp/, rename into
 * new/<name_queued(prio, seq)> (a block's: name_block_queued(prio,
 * seq, N)).  *id = seq, *count = N (1 for one job).  Full disk or
 * read-only spool: EX_TEMPFAIL_, nothing left in new/. */
int spool_submit(struct spool *sp, const struct job_def *jd, long long *id,
		 long long *count, struct cb_err *err);

/* Write TEXT as D/NAME in the spool: atomic_write through tmp/, mode
 * sp->fmode; an error names the file (EX_TEMPFAIL_ for a full disk or a
 * read-only spool: spool_errno_ex). */
int spool_write(struct spool *sp, enum spool_dir d, const char *name, const char *text,
		struct cb_err *err);
/* The same for a view the daemon rewrites (nodes/NAME.json,
 * metrics.prom): replaced atomically through the fixed ".NAME.tmp" in
 * its own directory (D, or with SD_N the spool's), never synced: a
 * crash leaves the old or the new text, or none after a power loss,
 * and the next write puts it right.  The caller is its only writer. */
int spool_write_view(struct spool *sp, enum spool_dir d, const char *name, const char *text,
		     struct cb_err *err);
/* The most of metrics.prom that is read (by cardbaton-metrics, and by
 * a starting daemon for its counters). */
#define METRICS_FILE_MAX (16u << 20)

/* Entries of DIR that do not begin with '.', sorted with strcmp.
 * *names is a malloc'd array of malloc'd strings. */
int spool_list(struct spool *sp, enum spool_dir d, char ***names, size_t *n);
void spool_list_free(char **names, size_t n);

#endif
