/*
 * cardbaton-users - a lab's users and where each stands (like Slurm's
 * sshare): shares, decayed GPU-hours, effective usage and the fair-share
 * order it gives, GPUs held against max_gpus, jobs against max_queued,
 * max_priority.
 *
 * Design.  A reader of the spool like report (the records of queued/
 * running/ paused/ done/, each job once: spool_history), and pure
 * arithmetic over them with lab.c's functions, so that it says what the
 * daemon's planner works from (spoold/tally.c, the same rules) whether
 * or not the daemon runs, and writes nothing.
 *
 *  - The users: every one the config's lab.users names (an account that
 *    does not exist now has the uid its records give, if any), then every
 *    owner a record names, one row per account (by owner_uid; its name the
 *    config's, else the first record's); the jobs recorded before owners,
 *    under "-".
 *  - usage: lab_job_usage of each of the user's jobs as of now (every
 *    started attempt's cards x seconds, decayed with the lab's half-life,
 *    a running one's up to now); GPU-hours = usage / 3600; effective
 *    usage = GPU-hours / shares.
 *  - order: the place the user's jobs take among queued jobs of one
 *    priority, 1 first: the least effective usage first; users of equal
 *    effective usage share a place (their jobs go by job ID), the next
 *    place counting them all (1, 1, 3).
 *  - GPUs held: the cards of the user's records in running/ (running,
 *    pausing, and staged attempts, which keep theirs: what max_gpus
 *    counts); jobs: those not ended (queued, running, pausing, paused:
 *    what max_queued counts).
 *
 * Not a lab's spool (no lab: in the config): one line, exit 78.
 */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const char usage[] = "cardbaton-users [--config PATH] [--json]";

enum { OPT_JSON = OPT_TOOL_FIRST };

static const struct option longopts[] = {
	COMMON_LONGOPTS,
	{ "json", no_argument, NULL, OPT_JSON },
	{ NULL, 0, NULL, 0 },
};

static _Noreturn void oom(void)
{
	die(EX_OSERR_, "%s", strerror(ENOMEM));
}

struct user {
	char *name;             /* NULL: the jobs without an owner */
	long long uid;          /* -1: none known */
	const struct lab_limits *lim;
	double usage;           /* card-seconds, decayed, as of now */
	double eff;             /* GPU-hours / shares */
	long long held, jobs, order;
};

static struct user *users;
static size_t nusers;

static struct user *add_user(const char *name, long long uid, const struct lab_conf *lab)
{
	struct user *u;

	if (!(users = reallocarray(users, nusers + 1, sizeof *users)))
		oom();
	u = &users[nusers++];
	memset(u, 0, sizeof *u);
	if (name && !(u->name = strdup(name)))
		oom();
	u->uid = uid;
	u->lim = lab_limits_of(lab, name);
	return u;
}

/* The row of job J's owner (made when it is the first of its jobs). */
static struct user *user_of(const struct job *j, const struct lab_conf *lab)
{
	for (size_t i = 0; i < nusers; i++) {
		struct user *u = &users[i];

		if (!j->owner ? !u->name : u->name && (u->uid >= 0 ? u->uid == j->owner_uid
								   : !strcmp(u->name, j->owner))) {
			/* A named user with no account now: the records' uid. */
			if (j->owner && u->uid < 0)
				u->uid = j->owner_uid;
			return u;
		}
	}
	return add_user(j->owner, j->owner ? j->owner_uid : -1, lab);
}

/* The cards job J holds now: its last attempt's, while the record is
 * running (running, pausing, staged). */
static long long held_by(const struct job *j)
{
	const struct attempt *a = job_last_attempt(j);

	if ((j->state != JS_RUNNING && j->state != JS_PAUSING) || !a)
		return 0;
	switch (a->state) {
	case AS_LAUNCHING: case AS_RUNNING: case AS_PAUSING: case AS_STAGED:
		return (long long)a->ngpus;
	default:
		return 0;
	}
}

static int eff_cmp(const void *pa, const void *pb)
{
	const struct user *a = pa, *b = pb;

	if (a->eff != b->eff)
		return a->eff < b->eff ? -1 : 1;
	/* Then by name, the jobs without an owner last. */
	if (!a->name || !b->name)
		return !a->name - !b->name;
	return strcmp(a->name, b->name);
}

static void compute(const struct lab_conf *lab, const struct job *jobs, size_t njobs, long long now)
{
	long long half = lab_half_life_ms(lab->half_life_hours);

	for (size_t i = 0; i < lab->nusers; i++) {
		struct passwd *pw = getpwnam(lab->users[i].name);

		add_user(lab->users[i].name, pw ? (long long)pw->pw_uid : -1, lab);
	}
	for (size_t i = 0; i < njobs; i++) {
		struct user *u = user_of(&jobs[i], lab);

		u->usage += lab_job_usage(&jobs[i], now, half);
		u->held += held_by(&jobs[i]);
		u->jobs += !job_state_final(jobs[i].state);
	}
	for (size_t i = 0; i < nusers; i++)
		users[i].eff = users[i].usage / 3600 / (double)users[i].lim->shares;
	if (nusers > 1)
		qsort(users, nusers, sizeof *users, eff_cmp);
	for (size_t i = 0; i < nusers; i++)
		users[i].order = i && users[i].eff == users[i - 1].eff ? users[i - 1].order
								       : (long long)i + 1;
}

/* "N/LIMIT", "-" for no limit. */
static char *of_limit(long long n, long long limit)
{
	return limit == LAB_NONE ? must_asprintf("%lld/-", n) : must_asprintf("%lld/%lld", n, limit);
}

static void print_table(const struct lab_conf *lab, long long now)
{
	static const char *const header[] = {
		"USER", "UID", "SHARES", "GPU-HOURS", "EFFECTIVE", "ORDER", "GPUS", "JOBS", "MAX-PRIO",
	};
	struct table t;
	char *at = rfc3339(now);

	if (!at)
		oom();
	if (lab->half_life_hours)
		printf("usage as of %s, decayed by half every %lld hour%s\n", at,
		       lab->half_life_hours, lab->half_life_hours == 1 ? "" : "s");
	else
		printf("usage as of %s, never decayed (half_life_hours 0)\n", at);
	free(at);
	/* Every column but USER right-aligned. */
	table_init(&t, 9, 0x1feu);
	table_row(&t, header);
	for (size_t i = 0; i < nusers; i++) {
		const struct user *u = &users[i];
		char *name = printable(u->name ? u->name : "-"), *cell[9];

		if (!name)
			oom();
		cell[0] = name;
		cell[1] = u->uid >= 0 ? must_asprintf("%lld", u->uid) : must_asprintf("-");
		cell[2] = must_asprintf("%lld", u->lim->shares);
		cell[3] = must_asprintf("%.2f", u->usage / 3600);
		cell[4] = must_asprintf("%.2f", u->eff);
		cell[5] = must_asprintf("%lld", u->order);
		cell[6] = of_limit(u->held, u->lim->max_gpus);
		cell[7] = of_limit(u->jobs, u->lim->max_queued);
		cell[8] = must_asprintf("%lld", u->lim->max_priority);
		table_row_own(&t, cell);
	}
	table_print(&t, stdout, term_width());
	table_free(&t);
}

static cJSON *limit_json(long long v)
{
	return v == LAB_NONE ? cJSON_CreateNull() : cJSON_CreateNumber((double)v);
}

static void print_json(const struct lab_conf *lab)
{
	cJSON *o = cJSON_CreateObject(), *arr;
	char *text;

	if (!o || !(arr = cJSON_AddArrayToObject(o, "users")))
		oom();
	for (size_t i = 0; i < nusers; i++) {
		const struct user *u = &users[i];
		cJSON *e = cJSON_CreateObject();

		if (!e || !cJSON_AddItemToArray(arr, e) ||
		    !(u->name ? cJSON_AddStringToObject(e, "user", u->name)
			      : cJSON_AddNullToObject(e, "user")) ||
		    !(u->uid >= 0 ? cJSON_AddNumberToObject(e, "uid", (double)u->uid)
				  : cJSON_AddNullToObject(e, "uid")) ||
		    !cJSON_AddNumberToObject(e, "shares", (double)u->lim->shares) ||
		    !cJSON_AddNumberToObject(e, "gpu_hours", u->usage / 3600) ||
		    !cJSON_AddNumberToObject(e, "effective_usage", u->eff) ||
		    !cJSON_AddNumberToObject(e, "order", (double)u->order) ||
		    !cJSON_AddNumberToObject(e, "gpus_held", (double)u->held) ||
		    !cJSON_AddItemToObject(e, "max_gpus", limit_json(u->lim->max_gpus)) ||
		    !cJSON_AddNumberToObject(e, "jobs", (double)u->jobs) ||
		    !cJSON_AddItemToObject(e, "max_queued", limit_json(u->lim->max_queued)) ||
		    !cJSON_AddNumberToObject(e, "max_priority", (double)u->lim->max_priority))
			oom();
	}
	if (!cJSON_AddNumberToObject(o, "half_life_hours", (double)lab->half_life_hours) ||
	    !(text = cJSON_Print(o)))
		oom();
	puts(text);
	cJSON_free(text);
	cJSON_Delete(o);
}

static int read_ex;

static void skip_record(void *arg, const struct cb_err *e)
{
	(void)arg;
	warn_line("%s", e->msg ? e->msg : strerror(ENOMEM));
	if (!read_ex)
		read_ex = e->ex ? e->ex : EX_OSERR_;
}

int main(int argc, char **argv)
{
	struct cb_err err = { 0 };
	struct config c;
	struct spool sp;
	struct job *jobs = NULL;
	size_t njobs = 0;
	long long now;
	int ch, json_out = 0, have_spool;

	prog_init(argc, argv);
	while ((ch = tool_getopt(argc, argv, "", longopts, 0, usage)) != -1) {
		switch (ch) {
		case OPT_JSON:
			json_out = 1;
			break;
		default:
			usage_error(usage, "unknown option");
		}
	}
	if (optind < argc)
		usage_error(usage, "unexpected operand '%s'", argv[optind]);
	tool_config(&c);
	if (!c.lab)
		die(EX_CONFIG_, "not a lab's spool: the config has no lab:");
	have_spool = tool_spool(&c, &sp, 0);
	if (have_spool && spool_history(&sp, &jobs, &njobs, skip_record, NULL, &err) < 0)
		die_err(&err);
	now = now_ms();
	compute(c.lab, jobs, njobs, now);
	if (json_out)
		print_json(c.lab);
	else
		print_table(c.lab, now);
	finish_stdout();
	for (size_t i = 0; i < nusers; i++)
		free(users[i].name);
	free(users);
	spool_history_free(jobs, njobs);
	if (have_spool)
		spool_close(&sp);
	config_free(&c);
	return read_ex;
}
