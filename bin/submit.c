/*
 * cardbaton-submit - queue a job and print its ID.
 *
 * Design: the job is built the way the daemon will read it.  A --job
 * file is parsed with the library's job-file parser; the flags make a
 * second job_def that is merged over it; the result is checked, then
 * written once more as the JSON the spool will hold and parsed back
 * with the same parser the daemon uses on new/, so that a job this
 * tool accepts is never rejected later.  The job file lands in new/
 * under the queued/ name grammar (LAYOUT.md §4), so the ID printed is
 * final whether or not the daemon is running.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "yamlx.h"

static const char usage[] =
	"cardbaton-submit [--config PATH] [--job FILE] [--node N] [--gpus 0,2] "
	"[--gpu-count K] [--gpu-memory M] [--share] [--priority P] [--timeout SECS] [--cwd DIR] [--name NAME] "
	"[--resume-command CMD] [--checkpoint-transfer] [--env K=V]... [--hold] [--begin WHEN] [--after ID[,ID...]] [--after-any ID[,ID...]] "
	"[--array SPEC | --param KEY=V1,V2,...]... [--max-running K] [-- CMD ARGS...]";

enum {
	OPT_JOB = OPT_TOOL_FIRST, OPT_NODE, OPT_GPUS, OPT_GPU_COUNT, OPT_PRIORITY,
	OPT_TIMEOUT, OPT_CWD, OPT_NAME, OPT_RESUME, OPT_ENV, OPT_HOLD, OPT_BEGIN,
	OPT_AFTER, OPT_AFTER_ANY, OPT_ARRAY, OPT_PARAM, OPT_MAX_RUNNING, OPT_GPU_MEMORY, OPT_SHARE,
	OPT_CK_TRANSFER,
};

static const struct option longopts[] = {
	COMMON_LONGOPTS,
	{ "job", required_argument, NULL, OPT_JOB },
	{ "node", required_argument, NULL, OPT_NODE },
	{ "gpus", required_argument, NULL, OPT_GPUS },
	{ "gpu-count", required_argument, NULL, OPT_GPU_COUNT },
	{ "gpu-memory", required_argument, NULL, OPT_GPU_MEMORY },
	{ "share", no_argument, NULL, OPT_SHARE },
	{ "priority", required_argument, NULL, OPT_PRIORITY },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "cwd", required_argument, NULL, OPT_CWD },
	{ "name", required_argument, NULL, OPT_NAME },
	{ "resume-command", required_argument, NULL, OPT_RESUME },
	{ "checkpoint-transfer", no_argument, NULL, OPT_CK_TRANSFER },
	{ "env", required_argument, NULL, OPT_ENV },
	{ "hold", no_argument, NULL, OPT_HOLD },
	{ "begin", required_argument, NULL, OPT_BEGIN },
	{ "after", required_argument, NULL, OPT_AFTER },
	{ "after-any", required_argument, NULL, OPT_AFTER_ANY },
	{ "array", required_argument, NULL, OPT_ARRAY },
	{ "param", required_argument, NULL, OPT_PARAM },
	{ "max-running", required_argument, NULL, OPT_MAX_RUNNING },
	{ NULL, 0, NULL, 0 },
};

static void *xrealloc(void *p, size_t n)
{
	if (!(p = realloc(p, n)))
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	return p;
}

static char *xstrdup(const char *s)
{
	char *d = strdup(s);

	if (!d)
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	return d;
}

/* "0,2" -> distinct indices, or exit 64 naming --gpus. */
/*
 * FLAG's value VAL, a list of distinct integers in [LO, HI] separated
 * by commas, at most MAX of them, into *V[0..*N) (malloc'd); a usage
 * error names WHAT ("a list of WHAT") and ITEM ("ITEM N is given
 * twice") otherwise.
 */
static void csv_lls(const char *flag, const char *val, long long lo, long long hi, size_t max,
		    const char *what, const char *item, long long **v, size_t *n)
{
	const char *p = val;

	*v = NULL;
	*n = 0;
	for (;;) {
		size_t len = strcspn(p, ",");
		char *x = strndup(p, len);
		long long y;

		if (!x)
			die(EX_OSERR_, "%s", strerror(ENOMEM));
		if (parse_ll(x, lo, hi, &y) < 0)
			die(EX_USAGE_, "%s: '%s' is not a list of %s, separated by commas", flag, val, what);
		free(x);
		for (size_t i = 0; i < *n; i++)
			if ((*v)[i] == y)
				die(EX_USAGE_, "%s: %s %lld is given twice", flag, item, y);
		if (*n == max)
			die(EX_USAGE_, "%s: more than %zu %s", flag, max, what);
		*v = xrealloc(*v, (*n + 1) * sizeof **v);
		(*v)[(*n)++] = y;
		if (!p[len])
			break;
		p += len + 1;
	}
}

static void parse_gpus(const char *val, struct job_def *f)
{
	long long *v;
	size_t n;

	csv_lls("--gpus", val, 0, GPU_INDEX_MAX, GPU_INDEX_MAX + 1, "GPU indices (0 to 1023)",
		"index", &v, &n);
	free(f->gpus);
	f->gpus = xrealloc(NULL, n * sizeof *f->gpus);
	for (size_t i = 0; i < n; i++)
		f->gpus[i] = (int)v[i];
	f->ngpus = n;
	free(v);
}

/* --after, --after-any: ID[,ID...] into *V[0..*N) (replacing them). */
static void parse_ids(const char *flag, const char *val, long long **v, size_t *n)
{
	free(*v);
	csv_lls(flag, val, 1, SEQ_MAX, JOB_MAX_DEPS, "job IDs", "job", v, n);
}

/* Every job JD waits for exists (found anywhere in SP, as status
 * would find it), or submit ends with 66 naming the first that does not. */
static void check_deps(struct spool *sp, const struct job_def *jd)
{
	struct cb_err err = { 0 };
	char *why;
	int r = spool_deps_problem(sp, jd, LLONG_MAX, &why, &err);

	if (r < 0)
		die_err(&err);
	if (r > 0)
		die(EX_NOINPUT_, "%s", why);
}

/* A text flag that must not be empty, longer than MAX bytes, nor hold
 * control characters (what the job-file parser would refuse when the
 * daemon reads it). */
static char *text_flag(const char *flag, const char *val, int allow_control, size_t max)
{
	if (!*val)
		die(EX_USAGE_, "%s: must not be empty", flag);
	if (strlen(val) > max)
		die(EX_USAGE_, "%s: longer than %zu bytes", flag, max);
	if (!allow_control) {
		char *p = printable(val);

		if (!p)
			die(EX_OSERR_, "%s", strerror(ENOMEM));
		if (strcmp(p, val))
			die(EX_USAGE_, "%s: must not contain control characters", flag);
		free(p);
	}
	return xstrdup(val);
}

static int env_name_ok(const char *s, size_t n)
{
	if (!n || (*s >= '0' && *s <= '9'))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9')))
			return 0;
	return 1;
}

static size_t env_name_len(const char *kv)
{
	return strcspn(kv, "=");
}

static int env_same(const char *a, const char *b)
{
	size_t n = env_name_len(a);

	return n == env_name_len(b) && !strncmp(a, b, n);
}

/*
 * --env adds to (or replaces single variables of) the job file's env
 * rather than replacing all of it: the flags' list becomes the file's
 * entries not named by a flag, then the flags' entries (the last of
 * several with one name wins).
 */
static void env_combine(const struct job_def *file, struct job_def *flags)
{
	char **v = NULL;
	size_t n = 0;

	for (size_t i = 0; i < file->nenv; i++) {
		int over = 0;

		for (size_t k = 0; k < flags->nenv; k++)
			over |= env_same(file->env[i], flags->env[k]);
		if (!over) {
			v = xrealloc(v, (n + 1) * sizeof *v);
			v[n++] = xstrdup(file->env[i]);
		}
	}
	for (size_t k = 0; k < flags->nenv; k++) {
		int later = 0;

		for (size_t m = k + 1; m < flags->nenv; m++)
			later |= env_same(flags->env[k], flags->env[m]);
		if (later) {
			free(flags->env[k]);
			continue;
		}
		v = xrealloc(v, (n + 1) * sizeof *v);
		v[n++] = flags->env[k];
	}
	free(flags->env);
	flags->env = v;
	flags->nenv = n;
}

/*
 * Read the job file: "-" is standard input.  User files are opened the
 * ordinary way (symbolic links and pipes are fine here; the no-follow
 * rule is for files inside the spool), capped at JOBFILE_MAX like
 * anything the daemon accepts.
 */
static char *read_job_file(const char *path, size_t *lenp)
{
	int fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY) : 0;
	struct sbuf b = { 0 };
	struct stat st;
	char buf[65536];

	if (fd < 0)
		die_sys(EX_NOINPUT_, "%s", path);
	if (fstat(fd, &st) < 0)
		die_sys(EX_NOINPUT_, "%s", path);
	if (S_ISDIR(st.st_mode))
		die(EX_NOINPUT_, "%s: is a directory", path);
	if (sbuf_add(&b, "", 0) < 0)
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	for (;;) {
		ssize_t r = read(fd, buf, sizeof buf);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die_sys(EX_NOINPUT_, "%s", path);
		if (r == 0)
			break;
		if (b.len + (size_t)r > JOBFILE_MAX)
			die(EX_DATAERR_, "%s: larger than %u bytes", path, JOBFILE_MAX);
		if (sbuf_add(&b, buf, (size_t)r) < 0)
			die(EX_OSERR_, "%s", strerror(ENOMEM));
	}
	if (fd != 0)
		close(fd);
	*lenp = b.len;
	return b.s;
}

static int listed(const int *v, size_t n, int x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return 1;
	return 0;
}

/* Can node NC ever run JD (its `gpus:` list allows the pinned indices
 * or enough cards)?  NULL, or the reason why not (static text). */
static const char *node_fits(const struct node_conf *nc, const struct job_def *jd)
{
	if (nc->slurm_partition && (jd->set & JF_GPUS))
		return "a Slurm node takes no pinned GPUs (Slurm picks the cards)";
	if (nc->slurm_partition && jd->gpu_memory_mib)
		return "a Slurm node takes no gpu_memory_mib (Slurm does not say how much a card has)";
	if (!nc->has_gpus)
		return NULL;
	if (jd->set & JF_GPUS) {
		for (size_t i = 0; i < jd->ngpus; i++)
			if (!listed(nc->gpus, nc->ngpus, jd->gpus[i]))
				return "pinned GPUs are not in its gpus: list";
		return NULL;
	}
	if (jobdef_gpu_need(jd) > (long long)nc->ngpus)
		return "fewer eligible GPUs than the job asks for";
	return NULL;
}

static void check_placement(const struct config *c, const struct job_def *jd)
{
	const char *cfg = c->path ? c->path : "the default config";

	if (jd->node) {
		const struct node_conf *nc = config_node(c, jd->node);
		const char *why;
		char *p;

		if (!nc) {
			if (!(p = printable(jd->node)))
				die(EX_OSERR_, "%s", strerror(ENOMEM));
			die(EX_DATAERR_, "unknown node '%s' (not in %s)", p, cfg);
		}
		if ((why = node_fits(nc, jd)))
			die(EX_DATAERR_, "node '%s': %s", nc->name, why);
		return;
	}
	for (size_t i = 0; i < c->nnodes; i++)
		if (!node_fits(&c->nodes[i], jd))
			return;
	if (jd->set & JF_GPUS)
		die(EX_DATAERR_, "no node in %s may use the pinned GPUs", cfg);
	if (jd->gpu_memory_mib)
		die(EX_DATAERR_, "no node in %s may take gpu_memory_mib", cfg);
	die(EX_DATAERR_, "no node in %s has %lld eligible GPUs", cfg, jobdef_gpu_need(jd));
}

/* Parse the job as the daemon will (LAYOUT.md §5 step 4). */
static void check_roundtrip(const struct job_def *jd, const char *fname)
{
	struct cb_err err = { 0 };
	struct job_def back;
	cJSON *o = jobdef_to_json(jd);
	char *text = o ? cJSON_PrintUnformatted(o) : NULL;

	if (!text)
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	if (jobdef_parse(text, strlen(text), fname, &back, &err) < 0)
		die_err(&err);
	jobdef_free(&back);
	cJSON_free(text);
	cJSON_Delete(o);
}

/* --gpu-memory M: MiB, or with a suffix M (MiB) or G (GiB). */
static long long memory_flag(const char *s)
{
	size_t len = strlen(s);
	long long mul = 1, v;
	char *num;

	if (len > 1 && strchr("MmGg", s[len - 1])) {
		mul = strchr("Gg", s[len - 1]) ? 1024 : 1;
		len--;
	}
	num = xstrdup(s);
	num[len] = '\0';
	if (parse_ll(num, 1, GPU_MEMORY_MAX, &v) < 0 || *num == '+' || v > GPU_MEMORY_MAX / mul)
		die(EX_USAGE_, "--gpu-memory: '%s' is not MiB (or N followed by M or G) from 1 MiB "
		    "to 16 TiB", s);
	free(num);
	return v * mul;
}

/* --begin WHEN: an RFC 3339 time, or +N with s, m, h or d (seconds
 * when none) from now; epoch ms, to the ms (a fraction of WHEN's is
 * kept, rfc3339_parse; +N is N from this moment's ms, not from its
 * second, so that the job never starts before N is up). */
static long long begin_flag(const char *s)
{
	static const struct { char c; long long mul; } units[] = {
		{ 's', 1 }, { 'm', 60 }, { 'h', 3600 }, { 'd', 86400 },
	};
	long long n, ms, mul = 1;
	size_t len = strlen(s);
	char *num;

	if (*s != '+') {
		if (rfc3339_parse(s, &ms) < 0)
			die(EX_USAGE_, "--begin: '%s' is neither an RFC 3339 time "
			    "(2026-12-01T18:00:00Z) nor +N[smhd]", s);
		return ms;
	}
	for (size_t i = 0; len > 1 && i < sizeof units / sizeof *units; i++)
		if (s[len - 1] == units[i].c) {
			mul = units[i].mul;
			len--;
			break;
		}
	num = xstrdup(s + 1);
	num[len - 1] = '\0';
	if (parse_ll(num, 0, TIMEOUT_MAX, &n) < 0 || *num == '-' || n > TIMEOUT_MAX / mul)
		die(EX_USAGE_, "--begin: '%s' is not +N[smhd] with N from 0 to ten years", s);
	free(num);
	return now_ms() + n * mul * 1000;
}

/* --param KEY=V1,V2,...: one more key of the sweep in F. */
static void parse_param(const char *val, struct job_def *f)
{
	size_t n = env_name_len(val);
	struct job_param *p;
	const char *v;

	if (!val[n] || !env_name_ok(val, n))
		die(EX_USAGE_, "--param: '%s' is not KEY=V1,V2,... with KEY a name "
		    "([A-Za-z_][A-Za-z0-9_]*)", val);
	if (n == 5 && !strncmp(val, "index", 5))
		die(EX_USAGE_, "--param: index is the array index, not a parameter name");
	for (size_t k = 0; k < f->nparams; k++)
		if (strlen(f->params[k].key) == n && !strncmp(f->params[k].key, val, n))
			die(EX_USAGE_, "--param: %.*s is given twice", (int)n, val);
	if (f->nparams == JOB_MAX_PARAMS)
		die(EX_USAGE_, "--param: more than %d parameters", JOB_MAX_PARAMS);
	f->params = xrealloc(f->params, (f->nparams + 1) * sizeof *f->params);
	p = &f->params[f->nparams++];
	memset(p, 0, sizeof *p);
	p->key = strndup(val, n);
	if (!p->key)
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	for (v = val + n + 1;; v += strcspn(v, ",") + 1) {
		char *x = strndup(v, strcspn(v, ","));

		if (!x)
			die(EX_OSERR_, "%s", strerror(ENOMEM));
		if (!*x)
			die(EX_USAGE_, "--param %s: an empty value", p->key);
		if (strlen(x) > YX_MAX_SCALAR)
			die(EX_USAGE_, "--param %s: a value is longer than %u bytes", p->key, YX_MAX_SCALAR);
		for (size_t i = 0; i < p->nvals; i++)
			if (!strcmp(p->vals[i], x))
				die(EX_USAGE_, "--param %s: '%s' is given twice", p->key, x);
		if (p->nvals == JOB_MAX_MEMBERS)
			die(EX_USAGE_, "--param %s: more than %d values", p->key, JOB_MAX_MEMBERS);
		p->vals = xrealloc(p->vals, (p->nvals + 1) * sizeof *p->vals);
		p->vals[p->nvals++] = x;
		if (!v[strcspn(v, ",")])
			break;
	}
	free(text_flag("--param", val + n + 1, 0, strlen(val)));
}

/*
 * JD, an array or sweep: the number of its jobs, each of them checked
 * as the daemon will read it (more than JOB_MAX_MEMBERS, or a member
 * that breaks a limit once its {...} are replaced: a usage error).
 */
/* A lab's count of one user's jobs not ended: status_read's views (a
 * submission not accepted yet shows its file's owner). */
struct mine {
	const char *me;
	long long n;
};

static void count_mine(void *arg, struct status_view *v, int stable)
{
	struct mine *m = arg;

	(void)stable;
	m->n += v->owner && !strcmp(v->owner, m->me);
}

/*
 * A lab's limits (SPEC §12) on the N jobs of JD, as the daemon will
 * check them: a priority above the user's max_priority is 77; more jobs
 * not ended than max_queued (these N counted: an array or sweep all or
 * none) is 75, worth retrying once some have ended.
 */
static void check_limits(const struct config *c, struct spool *sp, const struct job_def *jd,
			 long long n)
{
	char *me = lab_user_name(getuid());
	const struct lab_limits *lim;
	struct mine m = { me, 0 };
	struct status_read r = { .job = count_mine, .arg = &m };
	struct cb_err err = { 0 };

	if (!me)
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	lim = lab_limits_of(c->lab, me);
	if (jd->priority > lim->max_priority)
		die(EX_NOPERM_, "priority %lld is above %s's max_priority %lld", jd->priority, me,
		    lim->max_priority);
	if (lim->max_queued != LAB_NONE) {
		if (status_read(sp, &r, &err) < 0)
			die_err(&err);
		status_read_free(&r);
		if (m.n + n > lim->max_queued)
			die(EX_TEMPFAIL_, "user limit: %s has %lld job%s not ended (max_queued %lld)", me,
			    m.n, m.n == 1 ? "" : "s", lim->max_queued);
	}
	free(me);
}

static long long check_members(const struct job_def *jd, const char *fname)
{
	struct expander x;
	const char *why;
	long long n;

	if (expander_init(&x, jd, &why) < 0) {
		if (!why)
			die(EX_OSERR_, "%s", strerror(ENOMEM));
		die(EX_USAGE_, "%s", why);
	}
	for (size_t m = 0; jobdef_is_many(jd) && m < x.n; m++) {
		struct job_def md;
		long long idx;

		switch (expander_member(&x, m, 1, &md, &idx, &why)) {
		case -1:
			die(EX_OSERR_, "%s", strerror(ENOMEM));
		case 1:
			die(EX_USAGE_, "job %zu of %zu: %s", m + 1, x.n, why);
		}
		check_roundtrip(&md, fname);
		jobdef_free(&md);
	}
	n = (long long)x.n;
	expander_free(&x);      /* (which zeroes X) */
	return n;
}

int main(int argc, char **argv)
{
	struct job_def flags, jd;
	struct config c;
	struct spool sp;
	struct cb_err err = { 0 };
	const char *job_path = NULL, *fname, *why;
	long long id, nmembers;
	int ch;

	prog_init(argc, argv);
	memset(&flags, 0, sizeof flags);
	while ((ch = tool_getopt(argc, argv, "", longopts, 1, usage)) != -1) {
		switch (ch) {
		case OPT_JOB:
			if (!*optarg)
				die(EX_USAGE_, "--job: empty path");
			job_path = optarg;
			break;
		case OPT_NODE:
			free(flags.node);
			flags.node = text_flag("--node", optarg, 0, YX_MAX_SCALAR);
			if ((why = yx_node_name_problem(optarg)))
				die(EX_USAGE_, "--node: '%s' %s", optarg, why);
			flags.set |= JF_NODE;
			break;
		case OPT_GPUS:
			parse_gpus(optarg, &flags);
			flags.set |= JF_GPUS;
			break;
		case OPT_GPU_COUNT:
			flags.gpu_count = flag_ll("--gpu-count", optarg, 0, GPU_COUNT_MAX);
			flags.set |= JF_GPU_COUNT;
			break;
		case OPT_GPU_MEMORY:
			flags.gpu_memory_mib = memory_flag(optarg);
			flags.set |= JF_GPU_MEMORY;
			break;
		case OPT_SHARE:
			flags.share = 1;
			flags.set |= JF_SHARE;
			break;
		case OPT_PRIORITY:
			flags.priority = flag_ll("--priority", optarg, PRIO_MIN, PRIO_MAX);
			flags.set |= JF_PRIORITY;
			break;
		case OPT_TIMEOUT:
			flags.timeout_seconds = flag_ll("--timeout", optarg, 0, TIMEOUT_MAX);
			flags.set |= JF_TIMEOUT;
			break;
		case OPT_CWD:
			free(flags.cwd);
			flags.cwd = text_flag("--cwd", optarg, 1, YX_MAX_SCALAR);
			flags.set |= JF_CWD;
			break;
		case OPT_NAME:
			free(flags.name);
			flags.name = text_flag("--name", optarg, 0, JOB_NAME_MAX);
			flags.set |= JF_NAME;
			break;
		case OPT_RESUME:
			free(flags.resume_command);
			flags.resume_command = text_flag("--resume-command", optarg, 1, YX_MAX_SCALAR);
			flags.set |= JF_RESUME;
			break;
		case OPT_ENV: {
			size_t n = env_name_len(optarg);

			if (!optarg[n] || !env_name_ok(optarg, n))
				die(EX_USAGE_, "--env: '%s' is not NAME=VALUE with NAME a "
				    "variable name", optarg);
			/* Bounded before env_combine, which is quadratic. */
			if (flags.nenv >= JOB_MAX_ENV)
				die(EX_USAGE_, "--env: more than %d variables", JOB_MAX_ENV);
			if (strlen(optarg + n + 1) > YX_MAX_SCALAR)
				die(EX_USAGE_, "--env: the value of %.*s is longer than %u bytes",
				    (int)n, optarg, YX_MAX_SCALAR);
			flags.env = xrealloc(flags.env, (flags.nenv + 1) * sizeof *flags.env);
			flags.env[flags.nenv++] = xstrdup(optarg);
			flags.set |= JF_ENV;
			break;
		}
		case OPT_CK_TRANSFER:
			flags.checkpoint_transfer = 1;
			flags.set |= JF_CK_TRANSFER;
			break;
		case OPT_HOLD:
			flags.hold = 1;
			flags.set |= JF_HOLD;
			break;
		case OPT_AFTER:
			parse_ids("--after", optarg, &flags.after, &flags.nafter);
			flags.set |= JF_AFTER;
			break;
		case OPT_AFTER_ANY:
			parse_ids("--after-any", optarg, &flags.after_any, &flags.nafter_any);
			flags.set |= JF_AFTER_ANY;
			break;
		case OPT_BEGIN:
			flags.begin = begin_flag(optarg);
			flags.set |= JF_BEGIN;
			break;
		case OPT_ARRAY: {
			struct array_spec a;

			if ((why = array_spec_parse(optarg, &a)))
				die(errno == ENOMEM ? EX_OSERR_ : EX_USAGE_, "--array: '%s': %s", optarg, why);
			array_spec_free(&a);
			free(flags.array);
			flags.array = xstrdup(optarg);
			flags.set |= JF_ARRAY;
			break;
		}
		case OPT_PARAM:
			parse_param(optarg, &flags);
			flags.set |= JF_PARAMS;
			break;
		case OPT_MAX_RUNNING:
			flags.max_running = flag_ll("--max-running", optarg, 1, JOB_MAX_MEMBERS);
			flags.set |= JF_MAX_RUNNING;
			break;
		default:
			usage_error(usage, "unknown option");
		}
	}
	if (optind < argc) {
		flags.argc = (size_t)(argc - optind);
		if (flags.argc > JOB_MAX_ARGS)
			die(EX_USAGE_, "the command has more than %d words", JOB_MAX_ARGS);
		for (int i = optind; i < argc; i++)
			if (strlen(argv[i]) > YX_MAX_SCALAR)
				die(EX_USAGE_, "the command's word %d is longer than %u bytes",
				    i - optind + 1, YX_MAX_SCALAR);
		flags.argv = xrealloc(NULL, flags.argc * sizeof *flags.argv);
		for (size_t i = 0; i < flags.argc; i++)
			flags.argv[i] = xstrdup(argv[optind + (int)i]);
		if (!*flags.argv[0])
			die(EX_USAGE_, "the command's first word is empty");
		flags.set |= JF_COMMAND;
	}
	if (!job_path && !(flags.set & JF_COMMAND))
		usage_error(usage, "no command (give -- CMD ARGS... or --job FILE)");

	tool_config(&c);

	/* The job file, or the defaults jobdef_parse would give. */
	fname = job_path ? job_path : "command line";
	if (job_path) {
		size_t len;
		char *buf = read_job_file(job_path, &len);

		if (jobdef_parse(buf, len, job_path, &jd, &err) < 0)
			die_err(&err);
		free(buf);
	} else {
		memset(&jd, 0, sizeof jd);
		jd.gpu_count = 1;
		jd.checkpoint_grace_seconds = DEFAULT_GRACE;
	}
	/* Placement flags replace the file's placement as a whole:
	 * --gpus pins exactly those cards, --gpu-count asks for any K. */
	if ((flags.set & JF_GPUS) && !(flags.set & JF_GPU_COUNT)) {
		jd.set &= ~(unsigned)JF_GPU_COUNT;
		jd.gpu_count = 1;
	}
	if ((flags.set & JF_GPU_COUNT) && !(flags.set & JF_GPUS)) {
		free(jd.gpus);
		jd.gpus = NULL;
		jd.ngpus = 0;
		jd.set &= ~(unsigned)JF_GPUS;
	}
	/* So do --array and --param the file's array or sweep. */
	if ((flags.set & JF_ARRAY) && (flags.set & JF_PARAMS))
		usage_error(usage, "--array and --param cannot be combined");
	if (flags.set & (JF_ARRAY | JF_PARAMS)) {
		free(jd.array);
		jd.array = NULL;
		jobdef_params_free(&jd);
		jd.set &= ~(unsigned)(JF_ARRAY | JF_PARAMS);
	}
	if (flags.set & JF_ENV)
		env_combine(&jd, &flags);
	if (jobdef_merge(&jd, &flags) < 0)
		die(EX_OSERR_, "%s", strerror(ENOMEM));
	jobdef_free(&flags);
	nmembers = check_members(&jd, fname);
	if (jobdef_check(&jd, fname, &err) < 0)
		die_err(&err);
	check_roundtrip(&jd, fname);
	check_placement(&c, &jd);

	/* The ID is the only handle on the job: with nowhere to print it,
	 * do not queue a job the caller could not find again. */
	if (fcntl(1, F_GETFL) < 0)
		die_sys(EX_IOERR_, "standard output");
	tool_spool(&c, &sp, 1);
	check_deps(&sp, &jd);
	if (c.lab)
		check_limits(&c, &sp, &jd, nmembers);
	if (spool_submit(&sp, &jd, &id, &nmembers, &err) < 0)
		die_err(&err);
	for (long long m = 0; m < nmembers; m++)
		printf("%lld\n", id + m);
	finish_stdout();
	spool_close(&sp);
	jobdef_free(&jd);
	config_free(&c);
	return 0;
}
