/*
 * base.h - the libc-only base under all of CardBaton: the worker
 * (built static, and compiled on nodes from its shell archive), the
 * library (spool-layout/, link/), the tools and the daemon.
 *
 * What every part needs the same way lives here once: sysexits(3)
 * codes, formatted strings, the clocks, whole-buffer I/O, careful
 * reads, the atomic write, and locks.  Nothing here includes anything
 * but libc (no cJSON, no libyaml), prints, or exits; functions return
 * 0 (or a count) on success and -1 with errno on failure.
 *
 * Files: fmt.c (xasprintf), clock.c (the clocks), file.c (writes,
 * reads, the atomic write, mkdir -p, the program's directory), lock.c
 * (flock), sha256.c (SHA-256).
 */
#ifndef CARDBATON_BASE_H
#define CARDBATON_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* sysexits(3) codes, spelt out (no <sysexits.h> on some libcs), and
 * the tools' 1; every program of CardBaton exits with these. */
enum {
	EX_OK_ = 0,
	EX_REFUSED = 1,         /* request refused in the job's current state */
	EX_USAGE_ = 64,
	EX_DATAERR_ = 65,       /* bad job or config data; a bad launch spec */
	EX_NOINPUT_ = 66,       /* no such job (or attempt) */
	EX_UNAVAILABLE_ = 69,   /* node unavailable; nvidia-smi failed or absent */
	EX_SOFTWARE_ = 70,      /* internal error */
	EX_OSERR_ = 71,         /* system error */
	EX_IOERR_ = 74,
	EX_TEMPFAIL_ = 75,      /* temporary failure, worth retrying; cards busy */
	EX_NOPERM_ = 77,        /* a lab's spool: not this user's to do (lab.h) */
	EX_CONFIG_ = 78,        /* configuration error */
};

/* ---- fmt.c ------------------------------------------------------------ */

/* malloc'd formatted string, or NULL with errno = ENOMEM. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *vxasprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* A growing byte buffer, always NUL-terminated when s != NULL. */
struct sbuf {
	char *s;
	size_t len, cap;
};
int sbuf_add(struct sbuf *b, const void *p, size_t n);
int sbuf_addf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sbuf_free(struct sbuf *b);

/* ---- clock.c ---------------------------------------------------------- */

long long now_ms(void);         /* wall clock, ms since the epoch */
long long mono_ms(void);        /* CLOCK_MONOTONIC, ms */
void sleep_ms(long ms);         /* the whole of it, whatever signals come */

/* ---- file.c ----------------------------------------------------------- */

/* write(2) until all of BUF is written (EINTR retried).  0 or -1/errno. */
int write_full(int fd, const void *buf, size_t len);

/* Read FD to its end (a pipe, a /proc file) into a malloc'd
 * NUL-terminated buffer (*len excludes the NUL); -1 with errno EFBIG
 * when it holds more than MAX bytes. */
int read_fd(int fd, size_t max, char **buf, size_t *len);

/*
 * Read DIRFD/NAME whole, refusing what a careful reader must never
 * follow or swallow: -1 with errno ELOOP (a symbolic link), EISDIR (a
 * directory), EINVAL (a FIFO, socket or device), EFBIG (larger than
 * CAP bytes), or the open/read error.  The buffer is malloc'd and
 * NUL-terminated (*len excludes the NUL).  Never blocks on a FIFO.
 */
int read_capped(int dirfd, const char *name, size_t cap, char **buf, size_t *len);
/* The same, and *ST what fstat said of the file read (its owner, links
 * and mode, as opened: a lab's drop, lab.h). */
struct stat;
int read_capped_stat(int dirfd, const char *name, size_t cap, char **buf, size_t *len,
		     struct stat *st);

/*
 * read_capped, and then what was read is what NAME holds: -1 with errno
 * ENOENT also when NAME no longer names the file read, or that file
 * changed while it was read (size or ctime).  For the spool's records,
 * whose old files the daemon writes over once it has moved them away
 * (its spare files, LAYOUT.md §3): a reader that opened one just before
 * takes it as moved on, never another record's bytes or a mix.
 */
int read_named(int dirfd, const char *name, size_t cap, char **buf, size_t *len);

/* fsync a directory (EINVAL, a file system that cannot, is no error). */
int fsync_dir(int dirfd);

/* FROMFD/FROM and TOFD/TO exchanged (renameat2 RENAME_EXCHANGE): 0; 1
 * when that cannot be done here -- TO does not exist (ENOENT) or the
 * file system has no exchange (EINVAL, ENOSYS, EOPNOTSUPP), errno
 * saying which: a plain rename is the caller's way on; -1 on any other
 * error (errno). */
int exchange_at(int fromfd, const char *from, int tofd, const char *to);

/*
 * Write BUF[0..LEN) as DSTFD/NAME atomically: create a unique file in
 * TMPFD (".PID.COUNTER.NAME") with O_EXCL|O_NOFOLLOW and exactly MODE
 * (fchmod: whatever the umask), write it completely, fsync, close
 * (checked), rename into DSTFD/NAME (replacing it), fsync DSTFD.
 * TMPFD and DSTFD must be on one file system; they may be the same
 * directory.  On failure the temporary file is removed.  0 or -1/errno.
 */
int atomic_write(int tmpfd, int dstfd, const char *name,
		 const void *buf, size_t len, mode_t mode);

/* The same in one directory through the fixed temporary name TMPNAME
 * (a stale one, left by a writer that died, is removed first: the
 * caller's lock makes it the only writer of NAME).  DURABLE: AW_VIEW
 * no sync; AW_DURABLE the file and the directory; AW_DATA the file
 * alone, before the rename: the new name is whole when it is there,
 * and is made durable by the caller's next fsync of DIRFD (or any
 * writer's in that directory).  | AW_KEEP_OLD: the file NAME held is
 * not freed by the rename but exchanged into TMPNAME
 * (RENAME_EXCHANGE), for the caller to remove when it is off its
 * critical path (freeing a file can wait for the disk's discard); a
 * plain rename where NAME is new or the file system has no exchange. */
enum { AW_VIEW = 0, AW_DURABLE = 1, AW_DATA = 2, AW_KEEP_OLD = 4 };
int atomic_write_at(int dirfd, const char *tmpname, const char *name,
		    const void *buf, size_t len, mode_t mode, int durable);

/* mkdir -p PATH: what is made gets exactly 0700, whatever the umask;
 * what exists is left as it is.  0 or -1/errno. */
int mkdir_p(const char *path);

/* The directory of the running program (/proc/self/exe), malloc'd, or
 * NULL. */
char *exe_dir(void);

/* ---- lock.c ----------------------------------------------------------- */

/* flock(FD, HOW | LOCK_NB), HOW LOCK_EX or LOCK_SH: 1 taken, 0 held by
 * another open file description, -1 error. */
int lock_try(int fd, int how);

/* Try to take DIRFD/NAME with lock_try on a fresh open (O_NOFOLLOW,
 * close-on-exec; created with exactly 0600 when CREATE).  1: taken,
 * *fdp holds it; 0: held by another; -1: error (ENOENT: no such file,
 * without CREATE). */
int lock_at(int dirfd, const char *name, int how, int create, int *fdp);

/* Is process PID (> 0) gone (kill(PID, 0) says ESRCH)?  Only for the
 * temporary files named after their writer: a writer that is gone
 * left garbage; a reused PID only keeps the garbage a while longer. */
int pid_gone(long pid);

/* ---- sha256.c --------------------------------------------------------- */

/* SHA-256 (FIPS 180-4), fed in pieces of any size: sha256_init, then
 * sha256_update as often as needed, then sha256_final writes the
 * 32-byte digest (and wipes the context; init it again to reuse it).
 * The checkpoint stream's checksum (worker/ckpt.c). */
struct sha256 {
	uint32_t h[8];
	uint64_t len;                   /* bytes hashed so far */
	unsigned char buf[64];          /* a partial block */
	size_t nbuf;
};
void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
void sha256_final(struct sha256 *s, unsigned char out[32]);
/* D as 64 lower-case hex digits and a NUL. */
void sha256_hex(const unsigned char d[32], char out[65]);
/* Set: the portable code even where the CPU has the SHA extensions
 * (the unit tests check both). */
extern int sha256_portable;

#endif
