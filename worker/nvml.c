/*
 * nvml.c - asking the driver's NVML library about the cards, before
 * nvidia-smi is asked (nvsmi.c).
 *
 * nvidia-smi is itself an NVML client: each run loads the library,
 * initialises it and prints CSV, and a query takes two runs.  The worker
 * asks NVML directly instead when it can:
 *
 *  - libnvidia-ml.so.1 (shipped with every NVIDIA driver) is loaded with
 *    dlopen on the first query.  $CARDBATON_NVML names another file to
 *    load, or is "off" to use nvidia-smi alone.  A worker built with
 *    -DCARDBATON_NO_NVML (the static one shipped to SSH nodes: dlopen
 *    from a static glibc binary would load a second libc) never loads
 *    it.  No nvml.h is needed: the few types used are declared below.
 *  - Each query runs in a forked child with a deadline (the first half
 *    of nvidia-smi's, NVML_TIMEOUT_MS), as nvidia-smi does: a wedged
 *    driver hangs that child, and a library that crashes kills it, not
 *    the worker.  The child prints what
 *    "nvidia-smi --query-gpu=index,uuid,memory.used,memory.total,
 *    utilization.gpu,name --format=csv,noheader,nounits" would print,
 *    then (NV_ALL) a NUL byte and each card's number of compute
 *    processes, one per line; the parent reads the cards with
 *    nv_parse_gpus, so both ways end in the same checks and records.
 *  - Fallback: when the default library is not there, silently (a node
 *    without a driver); on any other failure (a file named by
 *    $CARDBATON_NVML that does not load, a missing entry point, an
 *    NVML error, a child that crashed or did not answer in time, an
 *    answer nvidia-smi's format cannot carry), nv_query says why once
 *    and asks nvidia-smi, and this process does not use NVML again.
 *
 * Entry points and their versions:
 *
 *  - nvmlInit_v2, nvmlShutdown, nvmlDeviceGetCount_v2,
 *    nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetUUID, nvmlDeviceGetName,
 *    nvmlDeviceGetUtilizationRates, nvmlErrorString: required.
 *  - Memory: nvmlDeviceGetMemoryInfo_v2 (R510 and later), whose `used`
 *    leaves out the memory the driver reserves, as nvidia-smi's
 *    memory.used does (an idle card reads a few MiB, not hundreds);
 *    nvmlDeviceGetMemoryInfo (v1: used = total - free) on older drivers,
 *    whose nvidia-smi reported the same.
 *  - Compute processes: nvmlDeviceGetComputeRunningProcesses_v3, else
 *    _v2, else the unversioned one.  Their entries have been 16 (v1), 24
 *    (v2, v3) and, in R535's nvml.h, 32 bytes under the same _v3 name
 *    (usedGpuCcProtectedMemory was added without a new version).  Only
 *    the number of entries is used of those, never their fields, and the
 *    buffer gives each entry PROC_ENTRY_MAX bytes, so no layout can make
 *    the library write past it.  The process IDs (whose accounts `gpus`
 *    names on a card the queue does not hold) come from the unversioned
 *    call, whose entries are v1's whatever the driver ({pid, used
 *    memory}: 16 bytes), asked only of a card that has processes;
 *    without it they are not known.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "worker.h"

#ifdef CARDBATON_NO_NVML

int nvml_query(struct nv_info *info, enum nv_what what, long long deadline, char **why)
{
	(void)info;
	(void)what;
	(void)deadline;
	*why = NULL;
	return 1;
}

void nvml_preload(void)
{
}

#else

#include <dlfcn.h>

#define NVML_LIB "libnvidia-ml.so.1"

/* ---- the part of nvml.h that is used --------------------------------- */

typedef int nvml_ret;           /* nvmlReturn_t */
typedef struct nvml_dev *nvml_dev;      /* nvmlDevice_t: opaque */

enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_NOT_SUPPORTED = 3,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
};

/* NVML_DEVICE_UUID_V2_BUFFER_SIZE and NVML_DEVICE_NAME_V2_BUFFER_SIZE:
 * the sizes NVML guarantees to be enough.  A longer value is an error
 * (NVML_ERROR_INSUFFICIENT_SIZE), never cut short. */
#define NVML_UUID_SIZE 96
#define NVML_NAME_SIZE 96

struct nvml_memory {            /* nvmlMemory_t (v1) */
	unsigned long long total, free, used;
};

struct nvml_memory_v2 {         /* nvmlMemory_v2_t */
	unsigned int version;
	unsigned long long total, reserved, free, used;
};

/* nvmlMemory_v2: NVML_STRUCT_VERSION(Memory, 2), the struct's size with
 * the version in the top byte (0x02000028 on LP64). */
#define NVML_MEMORY_V2 ((unsigned int)(sizeof(struct nvml_memory_v2) | (2u << 24)))

struct nvml_utilization {       /* nvmlUtilization_t */
	unsigned int gpu, memory;
};

/* Room per nvmlProcessInfo_t entry: twice the widest layout seen. */
#define PROC_ENTRY_MAX 64
/* The buffer's first size, in entries; it grows when a card has more. */
#define PROC_FIRST 16

/* ---- loading ------------------------------------------------------------ */

static struct {
	int state;              /* 0: not tried; 1: loaded; -1: not in use */
	void *lib;
	nvml_ret (*init)(void);
	nvml_ret (*shutdown)(void);
	nvml_ret (*count)(unsigned int *);
	nvml_ret (*handle)(unsigned int, nvml_dev *);
	nvml_ret (*uuid)(nvml_dev, char *, unsigned int);
	nvml_ret (*name)(nvml_dev, char *, unsigned int);
	nvml_ret (*mem_v2)(nvml_dev, struct nvml_memory_v2 *);  /* or NULL */
	nvml_ret (*mem_v1)(nvml_dev, struct nvml_memory *);
	nvml_ret (*util)(nvml_dev, struct nvml_utilization *);
	nvml_ret (*procs)(nvml_dev, unsigned int *, void *);
	const char *procs_name;
	nvml_ret (*procs_v1)(nvml_dev, unsigned int *, void *);  /* or NULL */
	const char *(*error)(nvml_ret);
} nv;

static void *sym(const char *name)
{
	return dlsym(nv.lib, name);
}

/* The first of NAMES that the library has, or NULL; *found names it. */
static void *sym_any(const char *const *names, const char **found)
{
	void *p;

	for (; *names; names++)
		if ((p = sym(*names))) {
			*found = *names;
			return p;
		}
	return NULL;
}

/* A function pointer from dlsym's object pointer (POSIX makes them the
 * same size; ISO C has no conversion between them). */
#define SET_FN(field, ptr) \
	do { \
		void *p_ = (ptr); \
		_Static_assert(sizeof p_ == sizeof nv.field, "function pointer size"); \
		memcpy(&nv.field, &p_, sizeof p_); \
	} while (0)

/* Load the library and resolve what is used.  1: loaded; 0: not in use
 * (said nothing); -1 with *why. */
static int load(char **why)
{
	const char *env = getenv("CARDBATON_NVML"), *file = NVML_LIB, *missing = NULL;
	static const char *const procs[] = {
		"nvmlDeviceGetComputeRunningProcesses_v3",
		"nvmlDeviceGetComputeRunningProcesses_v2",
		"nvmlDeviceGetComputeRunningProcesses", NULL,
	};
	static const struct {
		const char *name;
		size_t off;
	} need[] = {
		{ "nvmlInit_v2", 0 }, { "nvmlShutdown", 1 }, { "nvmlDeviceGetCount_v2", 2 },
		{ "nvmlDeviceGetHandleByIndex_v2", 3 }, { "nvmlDeviceGetUUID", 4 },
		{ "nvmlDeviceGetName", 5 }, { "nvmlDeviceGetUtilizationRates", 6 },
		{ "nvmlErrorString", 7 },
	};
	void *p[sizeof need / sizeof need[0]];
	size_t i;

	*why = NULL;
	if (nv.state != 0)
		return nv.state;
	nv.state = -1;
	if (env && strcmp(env, "off") == 0)
		return 0;
	if (env && *env)
		file = env;
	nv.lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
	if (!nv.lib) {
		const char *e = dlerror();

		/* The driver's library missing: a node without a driver, or
		 * one where only nvidia-smi is installed.  Nothing to say. */
		if (!(env && *env))
			return 0;
		*why = xasprintf("cannot load %s", e ? e : file);
		return -1;
	}
	for (i = 0; i < sizeof need / sizeof need[0] && !missing; i++)
		if (!(p[need[i].off] = sym(need[i].name)))
			missing = need[i].name;
	if (!missing) {
		SET_FN(init, p[0]);
		SET_FN(shutdown, p[1]);
		SET_FN(count, p[2]);
		SET_FN(handle, p[3]);
		SET_FN(uuid, p[4]);
		SET_FN(name, p[5]);
		SET_FN(util, p[6]);
		SET_FN(error, p[7]);
		SET_FN(mem_v2, sym("nvmlDeviceGetMemoryInfo_v2"));
		SET_FN(mem_v1, sym("nvmlDeviceGetMemoryInfo"));
		SET_FN(procs, sym_any(procs, &nv.procs_name));
		SET_FN(procs_v1, sym("nvmlDeviceGetComputeRunningProcesses"));
		if (!nv.mem_v2 && !nv.mem_v1)
			missing = "nvmlDeviceGetMemoryInfo";
		else if (!nv.procs)
			missing = "nvmlDeviceGetComputeRunningProcesses";
	}
	if (missing) {
		*why = xasprintf("%s has no %s", file, missing);
		return -1;
	}
	nv.state = 1;
	return 1;
}

/* ---- the child ------------------------------------------------------------ */

/* Say what failed on stderr (the parent's *why) and end the child. */
static void child_say(const char *call, long long gpu, const char *msg) __attribute__((noreturn));
static void child_say(const char *call, long long gpu, const char *msg)
{
	if (gpu >= 0)
		dprintf(2, "%s (GPU %lld): %s\n", call, gpu, msg ? msg : "error");
	else
		dprintf(2, "%s: %s\n", call, msg ? msg : "error");
	_exit(1);
}

static void child_fail(const char *call, long long gpu, nvml_ret r) __attribute__((noreturn));
static void child_fail(const char *call, long long gpu, nvml_ret r)
{
	child_say(call, gpu, nv.error(r));
}

/* A NUL-terminated string of printable bytes (one CSV line can carry
 * it). */
static int text_ok(const char *s, size_t size)
{
	const char *end = memchr(s, '\0', size);

	if (!end)
		return 0;
	for (; s < end; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 0;
	return 1;
}

/* The number of compute processes on D (see the top: only counted).
 * NVML's result, or -1 when out of memory. */
static nvml_ret count_procs(nvml_dev d, unsigned int *n)
{
	unsigned int cap = PROC_FIRST, got;
	void *buf = NULL;
	nvml_ret r = NVML_ERROR_INSUFFICIENT_SIZE;
	int tries;

	for (tries = 0; tries < 5 && r == NVML_ERROR_INSUFFICIENT_SIZE; tries++) {
		free(buf);
		buf = calloc(cap, PROC_ENTRY_MAX);
		if (!buf)
			return -1;
		got = cap;
		r = nv.procs(d, &got, buf);
		if (r == NVML_SUCCESS) {
			*n = got;
		} else if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
			/* More than there was room for: GOT says how many
			 * now; some room for those starting meanwhile. */
			if (got > 1000000)
				break;
			cap = got + PROC_FIRST;
		}
	}
	free(buf);
	return r;
}

/* nvmlProcessInfo_v1_t: the unversioned call's entries. */
struct nvml_proc_v1 {
	unsigned int pid;
	unsigned long long used;
};

/* The first NV_PIDS_MAX process IDs of D's COUNT (just counted) into
 * PIDS, *N of them (0 when the library has no unversioned call, or it
 * fails: not known). */
static void card_pids(nvml_dev d, unsigned int count, unsigned int *pids, unsigned int *n)
{
	unsigned int got = count + PROC_FIRST;
	struct nvml_proc_v1 *buf = nv.procs_v1 ? calloc(got, sizeof *buf) : NULL;

	*n = 0;
	if (buf && nv.procs_v1(d, &got, buf) == NVML_SUCCESS)
		for (unsigned int i = 0; i < got && i < NV_PIDS_MAX; i++)
			pids[(*n)++] = buf[i].pid;
	free(buf);
}

/* Card I: "I, UUID, USED, TOTAL, UTIL, NAME" as nvidia-smi prints it
 * (MiB, percent, "[N/A]" for what is not supported), and with NV_ALL
 * its process count in *PROCS. */
static void child_card(FILE *f, unsigned int i, enum nv_what what, unsigned int *procs,
		       unsigned int *pids, unsigned int *npids)
{
	nvml_dev d;
	char uuid[NVML_UUID_SIZE], name[NVML_NAME_SIZE];
	struct nvml_utilization u;
	unsigned long long used = 0, total = 0;
	nvml_ret r, ru;

	if ((r = nv.handle(i, &d)) != NVML_SUCCESS)
		child_fail("nvmlDeviceGetHandleByIndex_v2", i, r);
	if ((r = nv.uuid(d, uuid, sizeof uuid)) != NVML_SUCCESS)
		child_fail("nvmlDeviceGetUUID", i, r);
	if (!text_ok(uuid, sizeof uuid))
		child_say("nvmlDeviceGetUUID", i, "not a line of text");
	if ((r = nv.name(d, name, sizeof name)) != NVML_SUCCESS)
		child_fail("nvmlDeviceGetName", i, r);
	if (!text_ok(name, sizeof name))
		child_say("nvmlDeviceGetName", i, "not a line of text");
	if (nv.mem_v2) {
		struct nvml_memory_v2 m;

		memset(&m, 0, sizeof m);
		m.version = NVML_MEMORY_V2;
		r = nv.mem_v2(d, &m);
		used = m.used;
		total = m.total;
	} else {
		struct nvml_memory m;

		memset(&m, 0, sizeof m);
		r = nv.mem_v1(d, &m);
		used = m.used;
		total = m.total;
	}
	if (r != NVML_SUCCESS && r != NVML_ERROR_NOT_SUPPORTED)
		child_fail(nv.mem_v2 ? "nvmlDeviceGetMemoryInfo_v2" : "nvmlDeviceGetMemoryInfo", i, r);
	memset(&u, 0, sizeof u);
	ru = nv.util(d, &u);
	if (ru != NVML_SUCCESS && ru != NVML_ERROR_NOT_SUPPORTED)
		child_fail("nvmlDeviceGetUtilizationRates", i, ru);
	if (what == NV_ALL) {
		nvml_ret rp = count_procs(d, procs);

		if (rp < 0)
			child_say(nv.procs_name, i, "out of memory");
		if (rp != NVML_SUCCESS)
			child_fail(nv.procs_name, i, rp);
		if (*procs)
			card_pids(d, *procs, pids, npids);
	}
	if (fprintf(f, "%u, %s, ", i, uuid) < 0 ||
	    (r == NVML_SUCCESS ? fprintf(f, "%llu, %llu, ", used >> 20, total >> 20)
			       : fprintf(f, "[N/A], [N/A], ")) < 0 ||
	    (ru == NVML_SUCCESS ? fprintf(f, "%u, ", u.gpu) : fprintf(f, "[N/A], ")) < 0 ||
	    fprintf(f, "%s\n", name) < 0)
		child_say("fprintf", -1, strerror(errno));
}

/* The query, in the child: print the cards (and their process counts)
 * on stdout and _exit(0), or say what failed on stderr and _exit(1). */
static void child(const void *arg)
{
	enum nv_what what = *(const enum nv_what *)arg;
	char *buf = NULL;
	size_t len = 0;
	unsigned int n = 0, i, *procs = NULL, *pids = NULL, *npids = NULL;
	FILE *f = open_memstream(&buf, &len);
	nvml_ret r;

	if (!f)
		child_say("open_memstream", -1, strerror(errno));
	if ((r = nv.init()) != NVML_SUCCESS)
		child_fail("nvmlInit_v2", -1, r);
	if ((r = nv.count(&n)) != NVML_SUCCESS)
		child_fail("nvmlDeviceGetCount_v2", -1, r);
	if (n > 0 && (!(procs = calloc(n, sizeof *procs)) || !(npids = calloc(n, sizeof *npids)) ||
		      !(pids = calloc((size_t)n * NV_PIDS_MAX, sizeof *pids))))
		child_say("calloc", -1, "out of memory");
	for (i = 0; i < n; i++)
		child_card(f, i, what, &procs[i], &pids[(size_t)i * NV_PIDS_MAX], &npids[i]);
	/* After a NUL, one line per card: "COUNT[ PID]...". */
	if (what == NV_ALL) {
		if (fputc('\0', f) == EOF)
			child_say("fputc", -1, strerror(errno));
		for (i = 0; i < n; i++) {
			if (fprintf(f, "%u", procs[i]) < 0)
				child_say("fprintf", -1, strerror(errno));
			for (unsigned int k = 0; k < npids[i]; k++)
				if (fprintf(f, " %u", pids[(size_t)i * NV_PIDS_MAX + k]) < 0)
					child_say("fprintf", -1, strerror(errno));
			if (fputc('\n', f) == EOF)
				child_say("fputc", -1, strerror(errno));
		}
	}
	if (fclose(f) != 0)
		child_say("fclose", -1, strerror(errno));
	/* The answer is complete: what shutting down says changes
	 * nothing, and the process ends next. */
	(void)nv.shutdown();
	if (write_full(1, buf, len) < 0)
		_exit(1);
	_exit(0);
}

/* ---- the parent ------------------------------------------------------------- */

/* A number of at most 10 digits at S[*POS], into *V.  0 or -1. */
static int read_num(const char *s, size_t n, size_t *pos, long long *v)
{
	size_t start = *pos;

	*v = 0;
	while (*pos < n && s[*pos] >= '0' && s[*pos] <= '9' && *pos - start < 10)
		*v = *v * 10 + (s[(*pos)++] - '0');
	return *pos == start ? -1 : 0;
}

/* The process counts after the NUL, one line per card, each count
 * followed by the process IDs known.  0 or -1. */
static int read_counts(const char *s, size_t n, struct nv_info *info)
{
	size_t i, pos = 0;

	for (i = 0; i < info->ngpu; i++) {
		long long v, pid;

		if (read_num(s, n, &pos, &v) < 0 || v > INT_MAX)
			return -1;
		info->gpu[i].procs = (int)v;
		info->napps += (size_t)v;
		while (pos < n && s[pos] == ' ') {
			pos++;
			if (read_num(s, n, &pos, &pid) < 0 || nv_add_pid(&info->gpu[i], pid) < 0)
				return -1;
		}
		if (pos >= n || s[pos] != '\n')
			return -1;
		pos++;
	}
	return pos == n ? 0 : -1;
}

void nvml_preload(void)
{
	char *why;

	if (load(&why) < 0) {
		/* Not said now: said by the first query, as without it. */
		nv.state = 0;
		free(why);
	}
}

int nvml_query(struct nv_info *info, enum nv_what what, long long deadline, char **why)
{
	struct wk_child c;
	char *e = NULL;
	int r = load(why), st;

	memset(info, 0, sizeof *info);
	if (r <= 0)
		return r < 0 ? -1 : 1;
	if (wk_run_child(child, &what, deadline, NVSMI_MAX_OUTPUT, &c, &e) < 0) {
		*why = e;
		nv.state = -1;
		return -1;
	}
	st = c.status;
	if (c.timed_out) {
		*why = xasprintf("no answer within %d s", NVML_TIMEOUT_MS / 1000);
	} else if (c.overflow) {
		*why = xasprintf("more than %u bytes of answer", NVSMI_MAX_OUTPUT);
	} else if (c.broken) {
		*why = xasprintf("reading the answer: %s", strerror(c.errnum));
	} else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		const char *nul = memchr(c.out, '\0', c.outlen);
		size_t glen = nul ? (size_t)(nul - c.out) : c.outlen;

		if (nv_parse_gpus(c.out, glen, info, &e) < 0) {
			*why = xasprintf("an answer nvidia-smi's format cannot carry (%s)",
					   e ? e : "out of memory");
		} else if (what == NV_ALL &&
			   (!nul || read_counts(nul + 1, c.outlen - glen - 1, info) < 0)) {
			*why = xasprintf("malformed process counts");
		} else {
			wk_child_free(&c);
			return 0;
		}
		free(e);
		nv_free(info);
	} else if (WIFEXITED(st)) {
		char *line = nv_first_line(c.err);

		*why = line && *line ? line : xasprintf("the query exited %d", WEXITSTATUS(st));
		if (*why != line)
			free(line);
	} else {
		*why = xasprintf("the query was killed by signal %d", WTERMSIG(st));
	}
	wk_child_free(&c);
	nv.state = -1;
	if (!*why)
		*why = xasprintf("out of memory");
	return -1;
}

#endif
