/*
 * fake-nvml.c - a stand-in for the driver's libnvidia-ml.so.1 on
 * machines without GPUs.  It serves the fixtures that
 * tests/fake-nvidia-smi serves, from $FAKE_GPU_DIR, so that a test can
 * switch cardbaton-worker between NVML and nvidia-smi
 * (CARDBATON_NVML=path/to/this/libnvidia-ml.so.1 or off) and compare.
 *
 *   gpus.csv, apps.csv  as for tests/fake-nvidia-smi; read by
 *              nvmlInit_v2 (a snapshot, as the driver's state at the
 *              moment it is asked)
 *   delay      nvmlInit_v2 sleeps this many seconds first
 *   fail       nvmlInit_v2 fails: NVML_ERROR_DRIVER_NOT_LOADED, what the
 *              real library says when the driver is gone
 *   nvml-fail  "FUNCTION [CODE]": that entry point returns CODE (an
 *              nvmlReturn_t, default 999 NVML_ERROR_UNKNOWN); with CODE
 *              "crash" the process dies of SIGSEGV there, with "hang" it
 *              never returns (a wedged driver)
 *   nvml.log   when it exists, each entry point called appends its name
 *
 * Line k of gpus.csv (comments, blank lines and lines of fewer than six
 * fields skipped, as the fake nvidia-smi skips them) is device k.  A
 * fixture that NVML cannot express exactly -- an index that is not k, a
 * value that is neither a number nor "[...]" or "N/A", memory half
 * known, a process on no listed card, a number too large for NVML's
 * types -- makes nvmlInit_v2 fail with NVML_ERROR_UNKNOWN: the worker
 * then asks nvidia-smi, which answers as it always did, so the two ways
 * answer the same on every fixture.
 *
 * Built twice (Makefile): as a current driver's library
 * (nvmlDeviceGetMemoryInfo_v2; nvmlDeviceGetComputeRunningProcesses,
 * _v2 and _v3, the last writing 32-byte entries, the widest layout seen,
 * R535's), and with -DFAKE_NVML_OLD as a pre-R510 driver's
 * (nvmlDeviceGetMemoryInfo and the unversioned process query with
 * 16-byte entries only).  Every entry point checks its arguments as the
 * real one does, so that a worker passing a wrong version, a short
 * buffer or a bad handle is told so.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef struct fake_dev *nvmlDevice_t;

enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_UNINITIALIZED = 1,
	NVML_ERROR_INVALID_ARGUMENT = 2,
	NVML_ERROR_NOT_SUPPORTED = 3,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
	NVML_ERROR_DRIVER_NOT_LOADED = 9,
	NVML_ERROR_MEMORY = 20,
	NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
	NVML_ERROR_UNKNOWN = 999,
};

typedef struct {
	unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
	unsigned int version;
	unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

typedef struct {
	unsigned int gpu, memory;
} nvmlUtilization_t;

/* The three layouts of nvmlProcessInfo_t. */
struct proc_v1 {
	unsigned int pid;
	unsigned long long usedGpuMemory;
};

struct proc_v2 {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId, computeInstanceId;
};

struct proc_r535 {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId, computeInstanceId;
	unsigned long long usedGpuCcProtectedMemory;
};

#define NVML_VALUE_NOT_AVAILABLE (~0ULL)
#define MIB (1ULL << 20)

/* The entry points (prototypes for -Wmissing-prototypes). */
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t r);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *buf, unsigned int len);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *buf, unsigned int len);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *n, void *infos);
#ifndef FAKE_NVML_OLD
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *n, void *infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *n, void *infos);
#endif

/* ---- the snapshot ------------------------------------------------------- */

struct proc {
	unsigned int pid;
	unsigned long long mem;         /* bytes, or NVML_VALUE_NOT_AVAILABLE */
};

struct fake_dev {
	char *uuid, *name;
	int mem_known, util_known;
	unsigned long long used, total; /* bytes */
	unsigned int util;
	struct proc *proc;
	unsigned int nproc;
};

static struct fake_dev *dev;
static unsigned int ndev;
static int inits;               /* nvmlInit_v2 minus nvmlShutdown */

static const char *dir(void)
{
	return getenv("FAKE_GPU_DIR");
}

/* $FAKE_GPU_DIR/NAME, malloc'd, or NULL. */
static char *path(const char *name)
{
	const char *d = dir();
	char *p;
	size_t n;

	if (!d)
		return NULL;
	n = strlen(d) + strlen(name) + 2;
	p = malloc(n);
	if (p && snprintf(p, n, "%s/%s", d, name) != (int)(n - 1)) {
		free(p);
		p = NULL;
	}
	return p;
}

/* The whole of $FAKE_GPU_DIR/NAME, NUL-terminated, or NULL (missing or
 * unreadable; *err set when it exists but could not be read). */
static char *slurp(const char *name, int *err)
{
	char *p = path(name), *b = NULL, *nb;
	size_t n = 0, cap = 0;
	FILE *f;

	*err = 0;
	if (!p) {
		*err = 1;
		return NULL;
	}
	f = fopen(p, "r");
	free(p);
	if (!f) {
		*err = errno != ENOENT;
		return NULL;
	}
	for (;;) {
		size_t r;

		if (n + 4096 + 1 > cap) {
			cap = (n + 4096 + 1) * 2;
			nb = realloc(b, cap);
			if (!nb) {
				*err = 1;
				break;
			}
			b = nb;
		}
		r = fread(b + n, 1, 4096, f);
		n += r;
		if (r < 4096) {
			if (ferror(f))
				*err = 1;
			break;
		}
	}
	if (fclose(f) != 0)
		*err = 1;
	if (*err) {
		free(b);
		return NULL;
	}
	b[n] = '\0';
	return b;
}

static int exists(const char *name)
{
	char *p = path(name);
	int r = p && access(p, F_OK) == 0;

	free(p);
	return r;
}

/* Append NAME to nvml.log when that file exists. */
static void log_call(const char *name)
{
	char *p = path("nvml.log");
	int fd = p ? open(p, O_WRONLY | O_APPEND | O_CLOEXEC) : -1;

	free(p);
	if (fd < 0)
		return;
	if (write(fd, name, strlen(name)) < 0 || write(fd, "\n", 1) < 0) {
		/* A test that cannot count calls sees a short log. */
	}
	close(fd);
}

/* nvml-fail names NAME: its code (-1 for "crash", -2 for "hang"); 0
 * otherwise. */
static int injected(const char *name)
{
	int err;
	char *b = slurp("nvml-fail", &err), *s, *end;
	size_t n = strlen(name);
	long code = NVML_ERROR_UNKNOWN;

	if (!b)
		return 0;
	s = b + strspn(b, " \t");
	if (strncmp(s, name, n) != 0 || (s[n] && !strchr(" \t\r\n", s[n]))) {
		free(b);
		return 0;
	}
	s += n + strspn(s + n, " \t");
	if (strncmp(s, "crash", 5) == 0) {
		code = -1;
	} else if (strncmp(s, "hang", 4) == 0) {
		code = -2;
	} else if (*s >= '0' && *s <= '9') {
		errno = 0;
		code = strtol(s, &end, 10);
		if (errno || code <= 0 || code > INT_MAX)
			code = NVML_ERROR_UNKNOWN;
	}
	free(b);
	return (int)code;
}

/* The start of every entry point: log it, and fail as nvml-fail says. */
#define ENTER(name) \
	do { \
		int inj_; \
		log_call(name); \
		inj_ = injected(name); \
		if (inj_ == -1) \
			raise(SIGSEGV); \
		while (inj_ == -2) \
			pause(); \
		if (inj_ > 0) \
			return inj_; \
	} while (0)

/* The fake nvidia-smi's split: at each ", " from the left.  Fields
 * point into LINE (modified).  Returns their number (at most MAX). */
static size_t cut(char *line, char **f, size_t max)
{
	size_t n = 0;
	char *c;

	while (n + 1 < max && (c = strstr(line, ", "))) {
		*c = '\0';
		f[n++] = line;
		line = c + 2;
	}
	f[n++] = line;
	return n;
}

static char *trim(char *s)
{
	char *e;

	s += strspn(s, " \t");
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

/* A decimal (what the worker reads as a number) at most MAX: 1; "N/A"
 * or "[...]": 0; anything else: -1. */
static int value(char *s, unsigned long long max, unsigned long long *v)
{
	size_t n;

	s = trim(s);
	n = strlen(s);
	if (n > 0 && n <= 15 && strspn(s, "0123456789") == n) {
		*v = strtoull(s, NULL, 10);
		return *v <= max ? 1 : -1;
	}
	if (strcmp(s, "N/A") == 0 || (n >= 2 && s[0] == '[' && s[n - 1] == ']'))
		return 0;
	return -1;
}

/* Each fixture line that the fake nvidia-smi would print, with its
 * fields: FN(fields, n, arg); a nonzero return stops and is returned. */
static int each_line(char *buf, size_t max, int (*fn)(char **, size_t, void *), void *arg)
{
	char *line = buf, *nl, *f[64];
	size_t n;
	int r;

	for (; line && *line; line = nl) {
		nl = strchr(line, '\n');
		if (nl)
			*nl++ = '\0';
		if (line[strspn(line, " \t")] == '#' || line[strspn(line, " \t")] == '\0')
			continue;
		n = strlen(line);
		if (n > 0 && line[n - 1] == '\r')
			line[n - 1] = '\0';
		n = cut(line, f, max);
		if ((r = fn(f, n, arg)) != 0)
			return r;
	}
	return 0;
}

static void drop(void)
{
	unsigned int i;

	for (i = 0; i < ndev; i++) {
		free(dev[i].uuid);
		free(dev[i].name);
		free(dev[i].proc);
	}
	free(dev);
	dev = NULL;
	ndev = 0;
}

/* index, uuid, name..., memory.used, memory.total, utilization.gpu */
static int gpu_line(char **f, size_t n, void *arg)
{
	struct fake_dev *d, *nd;
	unsigned long long ix, used = 0, total = 0, util = 0;
	int ku, kt, kp;
	size_t len = 0, j;

	(void)arg;
	if (n < 6)
		return 0;
	if (value(f[0], UINT_MAX, &ix) != 1 || ix != ndev)
		return -1;
	ku = value(f[n - 3], ULLONG_MAX / MIB, &used);
	kt = value(f[n - 2], ULLONG_MAX / MIB, &total);
	kp = value(f[n - 1], UINT_MAX, &util);
	if (ku < 0 || kt < 0 || kp < 0 || ku != kt)
		return -1;
	nd = realloc(dev, (ndev + 1) * sizeof *dev);
	if (!nd)
		return -1;
	dev = nd;
	d = &dev[ndev++];
	memset(d, 0, sizeof *d);
	d->mem_known = ku;
	d->used = used * MIB;
	d->total = total * MIB;
	d->util_known = kp;
	d->util = (unsigned int)util;
	for (j = 2; j < n - 3; j++)
		len += strlen(f[j]) + 2;
	d->uuid = strdup(trim(f[1]));
	d->name = malloc(len + 1);
	if (!d->uuid || !d->name)
		return -1;
	d->name[0] = '\0';
	for (j = 2; j < n - 3; j++) {
		if (j > 2)
			strcat(d->name, ", ");
		strcat(d->name, f[j]);
	}
	return 0;
}

/* gpu_uuid, pid, used_memory[, process_name] */
static int app_line(char **f, size_t n, void *arg)
{
	unsigned long long pid, mem;
	int km, found = 0;
	unsigned int i;
	char *uuid;

	(void)arg;
	if (n < 3)
		return 0;
	uuid = trim(f[0]);
	km = value(f[2], ULLONG_MAX / MIB, &mem);
	if (value(f[1], UINT_MAX, &pid) != 1 || km < 0)
		return -1;
	for (i = 0; i < ndev; i++) {
		struct fake_dev *d = &dev[i];
		struct proc *np;

		if (strcmp(d->uuid, uuid) != 0)
			continue;
		np = realloc(d->proc, (d->nproc + 1) * sizeof *np);
		if (!np)
			return -1;
		d->proc = np;
		d->proc[d->nproc].pid = (unsigned int)pid;
		d->proc[d->nproc].mem = km ? mem * MIB : NVML_VALUE_NOT_AVAILABLE;
		d->nproc++;
		found = 1;
	}
	return found ? 0 : -1;
}

static int load(void)
{
	int err;
	char *g = slurp("gpus.csv", &err), *a;

	if (err)
		return -1;
	drop();
	if (g && each_line(g, 64, gpu_line, NULL) != 0) {
		free(g);
		drop();
		return -1;
	}
	free(g);
	a = slurp("apps.csv", &err);
	if (err || (a && each_line(a, 64, app_line, NULL) != 0)) {
		free(a);
		drop();
		return -1;
	}
	free(a);
	return 0;
}

/* ---- the entry points ---------------------------------------------------- */

nvmlReturn_t nvmlInit_v2(void)
{
	int err;
	char *d;

	ENTER("nvmlInit_v2");
	if (!dir())
		return NVML_ERROR_DRIVER_NOT_LOADED;
	d = slurp("delay", &err);
	if (d) {
		double s = strtod(d, NULL);
		struct timespec ts;

		free(d);
		if (s > 0) {
			ts.tv_sec = (time_t)s;
			ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
			while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
				;
		}
	}
	if (exists("fail"))
		return NVML_ERROR_DRIVER_NOT_LOADED;
	if (inits == 0 && load() < 0)
		return NVML_ERROR_UNKNOWN;
	inits++;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void)
{
	ENTER("nvmlShutdown");
	if (inits == 0)
		return NVML_ERROR_UNINITIALIZED;
	if (--inits == 0)
		drop();
	return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t r)
{
	switch (r) {
	case NVML_SUCCESS: return "Success";
	case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
	case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
	case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
	case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
	case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
	case NVML_ERROR_MEMORY: return "Insufficient Memory";
	case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument Version Mismatch";
	case NVML_ERROR_UNKNOWN: return "Unknown Error";
	default: return "Unknown Error";
	}
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
	ENTER("nvmlDeviceGetCount_v2");
	if (!inits)
		return NVML_ERROR_UNINITIALIZED;
	if (!n)
		return NVML_ERROR_INVALID_ARGUMENT;
	*n = ndev;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
	ENTER("nvmlDeviceGetHandleByIndex_v2");
	if (!inits)
		return NVML_ERROR_UNINITIALIZED;
	if (!d || i >= ndev)
		return NVML_ERROR_INVALID_ARGUMENT;
	*d = &dev[i];
	return NVML_SUCCESS;
}

/* A handle this library gave out. */
static int handle_ok(nvmlDevice_t d)
{
	unsigned int i;

	for (i = 0; i < ndev; i++)
		if (d == &dev[i])
			return 1;
	return 0;
}

#define DEVICE(name, d) \
	do { \
		ENTER(name); \
		if (!inits) \
			return NVML_ERROR_UNINITIALIZED; \
		if (!handle_ok(d)) \
			return NVML_ERROR_INVALID_ARGUMENT; \
	} while (0)

static nvmlReturn_t copy_out(const char *s, char *buf, unsigned int len)
{
	size_t n = strlen(s);

	if (!buf)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (len < n + 1)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(buf, s, n + 1);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *buf, unsigned int len)
{
	DEVICE("nvmlDeviceGetUUID", d);
	return copy_out(d->uuid, buf, len);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *buf, unsigned int len)
{
	DEVICE("nvmlDeviceGetName", d);
	return copy_out(d->name, buf, len);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
	DEVICE("nvmlDeviceGetMemoryInfo", d);
	if (!m)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (!d->mem_known)
		return NVML_ERROR_NOT_SUPPORTED;
	m->total = d->total;
	m->used = d->used;
	m->free = d->used < d->total ? d->total - d->used : 0;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
	DEVICE("nvmlDeviceGetUtilizationRates", d);
	if (!u)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (!d->util_known)
		return NVML_ERROR_NOT_SUPPORTED;
	u->gpu = d->util;
	u->memory = 0;
	return NVML_SUCCESS;
}

/* Through a pointer, so that the compiler cannot inline it: a real
 * call to memcpy, which ASan intercepts in the (instrumented) worker
 * that loads this library, catches a write past the caller's buffer. */
static void *(*volatile copy)(void *, const void *, size_t) = memcpy;

/* The process list in entries of SIZE bytes (one of the layouts above). */
static nvmlReturn_t procs(nvmlDevice_t d, unsigned int *n, void *infos, size_t size)
{
	unsigned int i;

	if (!n)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (*n < d->nproc) {
		*n = d->nproc;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	if (d->nproc && !infos)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (i = 0; i < d->nproc; i++) {
		struct proc_r535 e;

		memset(&e, 0, sizeof e);
		e.pid = d->proc[i].pid;
		e.usedGpuMemory = d->proc[i].mem;
		e.gpuInstanceId = e.computeInstanceId = 0xFFFFFFFFu;
		if (size == sizeof(struct proc_v1)) {
			struct proc_v1 v = { e.pid, e.usedGpuMemory };

			copy((char *)infos + i * size, &v, size);
		} else {
			copy((char *)infos + i * size, &e, size);
		}
	}
	*n = d->nproc;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *n, void *infos)
{
	DEVICE("nvmlDeviceGetComputeRunningProcesses", d);
	return procs(d, n, infos, sizeof(struct proc_v1));
}

#ifndef FAKE_NVML_OLD

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m)
{
	DEVICE("nvmlDeviceGetMemoryInfo_v2", d);
	if (!m)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (m->version != (unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	if (!d->mem_known)
		return NVML_ERROR_NOT_SUPPORTED;
	m->total = d->total;
	m->reserved = 0;
	m->used = d->used;
	m->free = d->used < d->total ? d->total - d->used : 0;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *n, void *infos)
{
	DEVICE("nvmlDeviceGetComputeRunningProcesses_v2", d);
	return procs(d, n, infos, sizeof(struct proc_v2));
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *n, void *infos)
{
	DEVICE("nvmlDeviceGetComputeRunningProcesses_v3", d);
	return procs(d, n, infos, sizeof(struct proc_r535));
}

#endif
