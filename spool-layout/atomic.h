/*
 * atomic.h - the rename that never replaces (atomic.c).  The atomic write
 * itself (atomic_write, LAYOUT.md §3) and careful reads (read_capped)
 * are in base.h.
 */
#ifndef CARDBATON_ATOMIC_H
#define CARDBATON_ATOMIC_H

/* rename that never replaces (renameat2 RENAME_NOREPLACE, falling
 * back to link+unlink).  0 or -1/errno (EEXIST when the target is
 * there). */
int move_noreplace(int fromfd, const char *from, int tofd, const char *to);

#endif
