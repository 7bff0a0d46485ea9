/*
 * lab.h - a lab's spool (config `lab:`, SPEC §12, LAYOUT.md §15): one
 * spool for the members of a Unix group.  What is decided here (lab.c):
 *
 *   - who a job's owner is: the account owning the file the daemon
 *     found (st_uid of the open file, never anything the file says),
 *     and whether that account may submit (a member of `group`, an
 *     admin, the daemon's account or root);
 *   - who may act on a job (its owner, an admin) and on a node (admins);
 *   - each user's limits (`users:`, `default` for everyone not named);
 *   - fair share's usage: cards x seconds of every attempt, decayed with
 *     the half-life (continuously: an attempt's usage at time T is the
 *     integral over its run of cards x 2^-((T - t) / half-life) dt), so
 *     that it is a pure function of the records and the clock, the same
 *     after a restart or kill -9 as before.
 *
 * Nothing here prints or exits; the account look-ups are getpwuid,
 * getpwnam, getgrnam and getgrouplist.
 */
#ifndef CARDBATON_LAB_H
#define CARDBATON_LAB_H

#include <stddef.h>
#include <sys/types.h>

#define LAB_NONE (-1LL)                 /* max_gpus / max_queued: no limit */
#define LAB_LIMIT_MAX 1000000000LL      /* max_gpus, max_queued at most */
#define LAB_ID_SLACK 1000000LL         /* a lab's seq or new/ name further past the daemon's
					   highest ID than this is a member's doing (LAYOUT.md §15) */
#define LAB_SHARES_MAX 1000000LL
#define LAB_HALF_LIFE_MAX 1000000LL     /* hours */
#define LAB_DEFAULT_HALF_LIFE 168       /* hours: a week, as Slurm's PriorityDecayHalfLife */
#define LAB_USERS_MAX 100000            /* users: at most this many named */
#define LAB_ADMINS_MAX 1000

/* Modes of a lab spool (LAYOUT.md §15). */
#define LAB_DROP_DMODE 03770            /* tmp/ new/ ctl/: set-group-ID, sticky */
#define LAB_DMODE 02750                 /* every other directory, the spool's own */
#define LAB_FMODE 0640                  /* every file the daemon writes */
#define LAB_PUB "controller.pub"        /* the lab key's public half, in the spool */

struct lab_limits {
	long long max_gpus;     /* cards held at once; LAB_NONE: no limit */
	long long max_queued;   /* jobs not ended; LAB_NONE: no limit */
	long long max_priority; /* a submit's --priority at most */
	long long shares;       /* weight in fair share, >= 1 */
};

struct lab_user {
	char *name;
	struct lab_limits lim;  /* what the config leaves out is default's */
};

/* lab.accounts: a member's account name on the nodes (run_as: owner),
 * where it is not the member's own. */
struct lab_account {
	char *member, *account;
};

struct lab_conf {
	char *group;
	struct lab_account *accounts;
	size_t naccounts;
	char **admins;
	size_t nadmins;
	long long half_life_hours;      /* 0: usage never decays */
	struct lab_limits def;          /* users: default */
	struct lab_user *users;
	size_t nusers;
};

void lab_conf_free(struct lab_conf *l);

/* The limits of the account named USER (NULL: one with no name). */
const struct lab_limits *lab_limits_of(const struct lab_conf *l, const char *user);

/* The account MEMBER's jobs run as on a run_as: owner node: lab.accounts'
 * name for it, else MEMBER itself. */
const char *lab_account_of(const struct lab_conf *l, const char *member);

/* The name an account is shown by: its passwd name, or its number when
 * it has none.  malloc'd (NULL: out of memory). */
char *lab_user_name(uid_t uid);

/* What the accounts are: the lab's group and every admin exist.  0, or
 * -1 with *WHY (malloc'd) "lab: group: no group 'gpuq'". */
int lab_resolve(const struct lab_conf *l, gid_t *gid, char **why);

/* UID is an admin of the lab: named in admins, the daemon's account
 * (DAEMON_UID: the spool's owner) or root. */
int lab_is_admin(const struct lab_conf *l, uid_t uid, uid_t daemon_uid);
/* UID may submit: a member of GID (primary or supplementary), or an
 * admin. */
int lab_may_submit(const struct lab_conf *l, gid_t gid, uid_t uid, uid_t daemon_uid);

/*
 * promote's new priority (SPEC §12, "Who may do what"; pure): a job of
 * priority OWN goes one above TOP, the highest priority of the queued
 * jobs it is to go ahead of (an admin's promote: every other queued job;
 * a member's: the owner's other queued jobs; PRIO_MIN - 1 when there is
 * none), or stays at OWN when it is above TOP already; never above CAP
 * (an admin's: PRIO_MAX; a member's: the owner's max_priority), and
 * never lowered by it: a job above CAP already keeps OWN.
 */
long long lab_promote_prio(long long own, long long top, long long cap);

/* ---- fair share (pure) ---- */

/* Half-life HOURS in ms; 0: no decay. */
long long lab_half_life_ms(long long hours);
/* USAGE (card-seconds) as of AT_MS, decayed to NOW_MS. */
double lab_decay(double usage, long long at_ms, long long now_ms, long long half_ms);
/* The usage, as of NOW_MS, of CARDS cards held from START_MS to END_MS
 * (END_MS <= NOW_MS; a running attempt: END_MS = NOW_MS). */
double lab_span(long long cards, long long start_ms, long long end_ms, long long now_ms,
		long long half_ms);

/* Job J's usage as of NOW_MS: every attempt that started, its cards
 * from its start to its end (NOW_MS while it runs); HALF_MS 0: the
 * plain cards x seconds. */
struct job;
double lab_job_usage(const struct job *j, long long now_ms, long long half_ms);
/* The same for one attempt A (over: from its start to its end; one
 * that is over without an end, nothing; still running: to NOW_MS). */
struct attempt;
double lab_attempt_usage(const struct attempt *a, long long now_ms, long long half_ms);

#endif
