/*
 * lab.c - a lab's spool: owners, admins, limits and fair share's usage
 * (lab.h).  The config's `lab:` is parsed by config.c.
 */
#include <grp.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lab.h"
#include "record.h"
#include "util.h"

void lab_conf_free(struct lab_conf *l)
{
	if (!l)
		return;
	free(l->group);
	for (size_t i = 0; i < l->nadmins; i++)
		free(l->admins[i]);
	free(l->admins);
	for (size_t i = 0; i < l->nusers; i++)
		free(l->users[i].name);
	free(l->users);
	for (size_t i = 0; i < l->naccounts; i++) {
		free(l->accounts[i].member);
		free(l->accounts[i].account);
	}
	free(l->accounts);
	free(l);
}

const char *lab_account_of(const struct lab_conf *l, const char *member)
{
	for (size_t i = 0; i < l->naccounts; i++)
		if (!strcmp(l->accounts[i].member, member))
			return l->accounts[i].account;
	return member;
}

const struct lab_limits *lab_limits_of(const struct lab_conf *l, const char *user)
{
	for (size_t i = 0; user && i < l->nusers; i++)
		if (!strcmp(l->users[i].name, user))
			return &l->users[i].lim;
	return &l->def;
}

char *lab_user_name(uid_t uid)
{
	struct passwd *pw = getpwuid(uid);

	return pw ? strdup(pw->pw_name) : xasprintf("%lu", (unsigned long)uid);
}

int lab_resolve(const struct lab_conf *l, gid_t *gid, char **why)
{
	struct group *gr = getgrnam(l->group);

	*why = NULL;
	if (!gr) {
		*why = xasprintf("lab: group: no group '%s'", l->group);
		return -1;
	}
	*gid = gr->gr_gid;
	for (size_t i = 0; i < l->nadmins; i++)
		if (!getpwnam(l->admins[i])) {
			*why = xasprintf("lab: admins: no user '%s'", l->admins[i]);
			return -1;
		}
	return 0;
}

int lab_is_admin(const struct lab_conf *l, uid_t uid, uid_t daemon_uid)
{
	struct passwd *pw;

	if (uid == 0 || uid == daemon_uid)
		return 1;
	if (!l->nadmins || !(pw = getpwuid(uid)))
		return 0;
	for (size_t i = 0; i < l->nadmins; i++)
		if (!strcmp(l->admins[i], pw->pw_name))
			return 1;
	return 0;
}

int lab_may_submit(const struct lab_conf *l, gid_t gid, uid_t uid, uid_t daemon_uid)
{
	struct passwd *pw;
	gid_t *groups;
	int n = 64, member = 0;

	if (lab_is_admin(l, uid, daemon_uid))
		return 1;
	if (!(pw = getpwuid(uid)))
		return 0;
	if (pw->pw_gid == gid)
		return 1;
	for (;;) {
		int want = n;

		if (!(groups = malloc((size_t)n * sizeof *groups)))
			return 0;
		if (getgrouplist(pw->pw_name, pw->pw_gid, groups, &n) >= 0)
			break;
		free(groups);
		if (n <= want)
			n = want * 2;
	}
	for (int i = 0; i < n && !member; i++)
		member = groups[i] == gid;
	free(groups);
	return member;
}

long long lab_promote_prio(long long own, long long top, long long cap)
{
	long long p = top >= own ? top + 1 : own;

	return p > cap ? (cap > own ? cap : own) : p;
}

/* ---- fair share ---------------------------------------------------------- */

long long lab_half_life_ms(long long hours)
{
	return hours * 3600000LL;
}

double lab_decay(double usage, long long at_ms, long long now_ms, long long half_ms)
{
	if (half_ms <= 0 || now_ms <= at_ms)
		return usage;
	return usage * exp2(-(double)(now_ms - at_ms) / (double)half_ms);
}

/*
 * The integral of CARDS x 2^-((now - t) / h) over [start, end], in
 * seconds: CARDS x h / ln 2 x (2^-((now - end) / h) - 2^-((now - start) / h)),
 * written with expm1 so that a short span loses no precision.
 */
double lab_span(long long cards, long long start_ms, long long end_ms, long long now_ms,
		long long half_ms)
{
	double len, k;

	if (cards <= 0 || end_ms <= start_ms)
		return 0;
	len = (double)(end_ms - start_ms) / 1000;
	if (half_ms <= 0)
		return (double)cards * len;
	k = M_LN2 / ((double)half_ms / 1000);
	/* 2^-((now-end)/h) x (1 - 2^-(len/h)) = e^-(k(now-end)) x -expm1(-k len) */
	return (double)cards * exp(-k * (double)(now_ms > end_ms ? now_ms - end_ms : 0) / 1000) *
	       -expm1(-k * len) / k;
}

double lab_attempt_usage(const struct attempt *a, long long now_ms, long long half_ms)
{
	/* One that is over without an end time held its cards no longer
	 * than it is known to have run: nothing. */
	int over = a->state >= AS_PAUSED && a->state <= AS_ABORTED;
	long long end = a->finished ? a->finished : over ? a->started : now_ms;

	if (!a->started)
		return 0;
	return lab_span((long long)a->ngpus, a->started, end < now_ms ? end : now_ms, now_ms, half_ms);
}

double lab_job_usage(const struct job *j, long long now_ms, long long half_ms)
{
	double u = 0;

	for (size_t i = 0; i < j->natt; i++)
		u += lab_attempt_usage(&j->att[i], now_ms, half_ms);
	return u;
}
