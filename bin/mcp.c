/*
 * cardbaton-mcp - a Model Context Protocol server on stdio, so that an
 * assistant can drive the queue: the tools submit, status, logs, gpus,
 * pause, resume, cancel, promote and wait.
 *
 * Design: the server is a front for the other tools, never a second
 * implementation of them.  Each tools/call becomes an argument vector
 * for the sibling cardbaton-X (found beside /proc/self/exe, as the
 * dispatcher finds it, then on PATH), built from the call's arguments
 * by one table (tools[] below, which also yields each tool's
 * inputSchema, so the two cannot disagree) and run as a child, never
 * through a shell; its output is the result.  What the CLI accepts,
 * refuses and prints is therefore what the assistant gets, exit codes
 * and one-line messages included.
 *
 * The transport is MCP's stdio one: one JSON-RPC 2.0 message per line
 * on standard input and output (cJSON reads and writes them; nothing
 * else ever goes to standard output), diagnostics on standard error.
 * What a message means is decided by pure functions -- mcp_line (one
 * line in: a reply, a tool to run, or a request to cancel out) and
 * mcp_done (a child's exit status and output in: the reply, or the
 * status query that follows the action) -- that run no process, so
 * tests/fuzz/fuzz_mcp.c drives them directly.  The loop below them
 * does the effects: poll(2) over standard input, a signalfd for
 * SIGCHLD and the children's pipes, so that calls run side by side (a
 * `wait` that takes an hour delays nothing) and each is answered when
 * its child ends, in the order they end.
 *
 * Results: content is one text block with the tool's standard output;
 * where that is a --json document (status, gpus, and the `status
 * --json ID...` run after submit, pause, resume, cancel, promote and
 * wait, of the jobs they acted on) it is also structuredContent.  A
 * tool that fails is a result with isError true, its one-line message
 * as the text and {"exit_code", "error"} as structuredContent (wait's
 * exit 1, "a job did not succeed", is an answer, not a failure: its
 * result is the jobs' status).  An argument of the wrong type is
 * refused the same way, exit code 64, as the CLI refuses a bad flag
 * (MCP 2025-11-25: input errors are tool errors, so the model can
 * correct itself); a malformed tools/call (no tool name, arguments not
 * an object, an unknown tool) is JSON-RPC error -32602.
 *
 * Bounds: a message over MSG_MAX (16 MiB) is answered with -32600 and
 * skipped; a tool's output keeps its last OUT_MAX (8 MiB) bytes (a
 * log says how much was left out; a JSON document cut short is an
 * error), its standard error the first ERR_MAX; at most CALLS_MAX
 * calls run at once (more are refused as tool errors).  Text that is
 * not UTF-8 (a job's log may be anything) has each bad byte replaced
 * by U+FFFD, so every line written is valid JSON.  JSON-RPC batches
 * (arrays) are refused: MCP 2025-06-18 removed them and no client of
 * ours sends one.  Writes to standard output block: a client that does
 * not read its answers stops the server, as with any stdio server.
 *
 * notifications/cancelled stops the child of that request (SIGTERM to
 * its process group) and no answer is sent.  At the end of standard
 * input the calls still running are answered as they end, then the
 * server exits 0 (so `echo '{...}' | cardbaton mcp` works; MCP's
 * shutdown is that end, then SIGTERM if the server lingers).  SIGTERM,
 * SIGINT and SIGHUP stop every child the same way first; the children
 * also get SIGTERM if the server dies (PR_SET_PDEATHSIG).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cJSON.h>

#include "common.h"     /* base.h, util.h: struct sbuf, CARDBATON_VERSION */

#define MSG_MAX (16u << 20)     /* one JSON-RPC message, bytes */
#define OUT_MAX (8u << 20)      /* a tool's standard output kept, bytes */
#define ERR_MAX (64u << 10)     /* a tool's standard error kept, bytes */
#define CALLS_MAX 32            /* tool calls running at once */

/* JSON-RPC 2.0 error codes. */
enum {
	RPC_PARSE = -32700, RPC_INVALID = -32600, RPC_METHOD = -32601,
	RPC_PARAMS = -32602, RPC_INTERNAL = -32603,
};

/* Protocol versions we speak, newest first: an initialize naming one
 * of them gets it back, any other the first. */
static const char *const versions[] = { "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05" };
#define NVERSIONS (sizeof versions / sizeof versions[0])

/* ---- the tools --------------------------------------------------------- */

/* How an argument becomes words of the tool's argv. */
enum akind {
	A_STR,          /* string: FLAG VALUE */
	A_STRS,         /* string, or array of strings: FLAG V or FLAG V1,V2 */
	A_INT,          /* integer: FLAG N */
	A_BOOL,         /* boolean: FLAG when true */
	A_SIZE,         /* string (or integer MiB): FLAG M, e.g. 60G */
	A_INTS,         /* array of integers: FLAG 0,2 */
	A_IDS,          /* array of job IDs: FLAG 1,2 */
	A_ENV,          /* object of strings: FLAG K=V for each member */
	A_PARAM,        /* object of arrays of strings: FLAG KEY=V1,V2 for each */
	A_TEXT,         /* string: FLAG - and the text on standard input */
	A_ID,           /* a job ID: the operand */
	A_IDLIST,       /* array of job IDs: the operands */
	A_ARGV,         /* array of strings: -- and the words */
};

struct arg {
	const char *name, *flag;
	enum akind kind;
	int required;
	const char *desc;
};

/* What the result of a tool is made of. */
enum after {
	AFTER_TEXT,     /* its standard output, as text (logs) */
	AFTER_JSON,     /* its standard output, a --json document */
	AFTER_NEW_IDS,  /* status --json of the job IDs it printed (submit) */
	AFTER_ARG_IDS,  /* status --json of the job IDs it was given */
};

struct tool {
	const char *name, *title, *desc;
	const char *fixed;      /* a flag always given (--json), or NULL */
	enum after after;
	unsigned ok;            /* exit codes that are not failures (bit N: N) */
	int read_only, destructive;
	const struct arg *args;
};


static const struct arg submit_args[] = {
	{ "command", NULL, A_ARGV, 0, "The command, an exact argument vector run on the node "
	  "without a shell (give [\"sh\", \"-c\", \"...\"] for one); needed unless the job file has one." },
	{ "job", "--job", A_STR, 0, "Path of a job file (YAML or JSON, the fields of job.yaml; "
	  "see cardbaton(5)); the other arguments override its fields." },
	{ "job_text", "--job", A_TEXT, 0, "The job definition itself, YAML or JSON (at most 1 MiB), "
	  "instead of a job file." },
	{ "node", "--node", A_STR, 0, "Run only on this node of the configuration." },
	{ "gpus", "--gpus", A_INTS, 0, "Pin the job to these physical GPU indices (distinct)." },
	{ "gpu_count", "--gpu-count", A_INT, 0, "Let the queue choose this many idle cards on one node; "
	  "0 makes a CPU job (default 1)." },
	{ "gpu_memory", "--gpu-memory", A_SIZE, 0, "Only cards with at least this much memory: "
	  "MiB, or with M or G, e.g. \"60000\", \"60G\"." },
	{ "share", "--share", A_BOOL, 0, "The job may share its cards with other sharing jobs "
	  "(needs gpu_memory)." },
	{ "priority", "--priority", A_INT, 0, "Higher runs first (-99999999 to 99999999, default 0)." },
	{ "timeout", "--timeout", A_INT, 0, "Wall-clock limit of each attempt in seconds; 0 is none." },
	{ "cwd", "--cwd", A_STR, 0, "Working directory on the node (~ expands there)." },
	{ "name", "--name", A_STR, 0, "Free text shown by status (at most 256 bytes)." },
	{ "resume_command", "--resume-command", A_STR, 0, "Makes the job resumable: after a "
	  "checkpoint pause this runs (sh -c) with SSHGPU_CHECKPOINT set." },
	{ "env", "--env", A_ENV, 0, "Environment variables of the job, {\"NAME\": \"value\"}." },
	{ "hold", "--hold", A_BOOL, 0, "Queue it held: never placed until released." },
	{ "begin", "--begin", A_STR, 0, "Not placed before this time: RFC 3339, or +N[s|m|h|d] from now." },
	{ "after", "--after", A_IDS, 0, "Place it only once all these jobs have succeeded." },
	{ "after_any", "--after-any", A_IDS, 0, "Place it once all these jobs have ended, however." },
	{ "array", "--array", A_STR, 0, "One job per index: A-B, A-B:STEP, I,J,K, optionally %K "
	  "(at most K at once); {index} in the command is replaced." },
	{ "param", "--param", A_PARAM, 0, "A parameter sweep: {\"KEY\": [\"v1\", \"v2\"]}, one job per "
	  "combination; {KEY} in the command is replaced. Not with array." },
	{ "max_running", "--max-running", A_INT, 0, "At most this many of the array's or sweep's jobs "
	  "running at once." },
	{ NULL, NULL, 0, 0, NULL },
};

static const struct arg status_args[] = {
	{ "job_ids", NULL, A_IDLIST, 0, "Only these jobs, in any state (default: the queue, "
	  "then running and paused jobs)." },
	{ "all", "--all", A_BOOL, 0, "Include finished jobs." },
	{ "state", "--state", A_STR, 0, "Only jobs in these states, comma-separated: queued, "
	  "running, pausing, paused, succeeded, failed, cancelled, lost (a finished one includes "
	  "finished jobs)." },
	{ "node", "--node", A_STR, 0, "Only jobs on this node of the configuration." },
	{ "name", "--name", A_STR, 0, "Only jobs whose name matches this shell pattern, e.g. "
	  "\"train-*\"." },
	{ "since", "--since", A_STR, 0, "Only jobs that had not ended before this time: RFC 3339, "
	  "YYYY-MM-DD, or an age such as \"90m\", \"12h\", \"7d\" (includes finished jobs)." },
	{ "user", "--user", A_STRS, 0, "Only jobs owned by this user, or by one of these users "
	  "(user names, e.g. \"alice\" or [\"alice\", \"bob\"]; each job's owner is in its "
	  "\"owner\")." },
	{ "mine", "--mine", A_BOOL, 0, "Only the jobs of the account this server runs as." },
	{ NULL, NULL, 0, 0, NULL },
};

static const struct arg logs_args[] = {
	{ "job_id", NULL, A_ID, 1, "The job, e.g. \"42\"." },
	{ "attempt", "--attempt", A_INT, 0, "The attempt, from 0 (default: the latest that started)." },
	{ "follow", "--follow", A_BOOL, 0, "Answer only once the attempt has ended, with all of its output." },
	{ NULL, NULL, 0, 0, NULL },
};

static const struct arg gpus_args[] = {
	{ "node", "--node", A_STR, 0, "Only this node." },
	{ NULL, NULL, 0, 0, NULL },
};

static const struct arg one_job_args[] = {
	{ "job_id", NULL, A_ID, 1, "The job, e.g. \"42\"." },
	{ NULL, NULL, 0, 0, NULL },
};

static const struct arg promote_args[] = {
	{ "job_id", NULL, A_ID, 1, "The queued job, e.g. \"42\"." },
	{ "priority", "--priority", A_INT, 0, "Set this priority instead of moving it above "
	  "every queued job." },
	{ NULL, NULL, 0, 0, NULL },
};

static const struct arg wait_args[] = {
	{ "job_ids", NULL, A_IDLIST, 0, "The jobs to wait for (default: until nothing is queued, "
	  "running or pausing)." },
	{ "timeout", "--timeout", A_INT, 0, "Give up after this many seconds (an error, exit code 75)." },
	{ NULL, NULL, 0, 0, NULL },
};

#define OK0 1u
static const struct tool tools[] = {
	{ "submit", "Queue a job", "Queue a job on the GPU queue. The result is the new job's "
	  "status (status's JSON document: jobs[0].id is its ID; an array or sweep: one per job).",
	  NULL, AFTER_NEW_IDS, OK0, 0, 0, submit_args },
	{ "status", "Show jobs", "The queue in dispatch order, then running and paused jobs "
	  "(all: finished ones too), or the jobs named: {\"jobs\": [...], \"nodes\": [...]} "
	  "with each job's state, owner, reason, node, GPUs, exit_code and times.",
	  "--json", AFTER_JSON, OK0, 1, 0, status_args },
	{ "logs", "Read a job's output", "The standard output and error of one attempt of a job "
	  "(fetched from its node), as text; the last 8 MiB when longer.",
	  NULL, AFTER_TEXT, OK0, 1, 0, logs_args },
	{ "gpus", "Show the GPUs", "Every node's cards: index, UUID, name, memory used and total, "
	  "utilization, processes, lease holder, idle: {\"nodes\": [...]}.",
	  "--json", AFTER_JSON, OK0, 1, 0, gpus_args },
	{ "pause", "Pause a job", "Ask a running resumable job (one with a resume_command) to "
	  "checkpoint and stop; the result is its status.",
	  NULL, AFTER_ARG_IDS, OK0, 0, 0, one_job_args },
	{ "resume", "Resume a job", "Queue a paused job again, on the node of its checkpoint; "
	  "the result is its status.",
	  NULL, AFTER_ARG_IDS, OK0, 0, 0, one_job_args },
	{ "cancel", "Cancel a job", "Remove a queued or paused job, or stop a running one "
	  "(its process group gets SIGTERM, then SIGKILL); the result is its status.",
	  NULL, AFTER_ARG_IDS, OK0, 0, 1, one_job_args },
	{ "promote", "Promote a job", "Move a queued job above every queued job, or give it a "
	  "priority; the result is its status.",
	  NULL, AFTER_ARG_IDS, OK0, 0, 0, promote_args },
	{ "wait", "Wait for jobs", "Block until the jobs named have ended (none named: until "
	  "nothing is queued, running or pausing); the result is their status, "
	  "whether they succeeded or not.",
	  NULL, AFTER_ARG_IDS, OK0 | 2u, 1, 0, wait_args },
};
#define NTOOLS (sizeof tools / sizeof tools[0])

static const char instructions[] =
	"CardBaton is a GPU job spooler. submit queues a job (a command run on a node with "
	"the GPUs it asks for) and returns its status; status shows the queue and the jobs' "
	"states; wait blocks until jobs have ended; logs returns a job's output; gpus shows "
	"every node's cards. Job IDs are strings of digits. A failing tool returns isError "
	"with the command-line tool's one-line message and its exit code.";

/* ---- the pure part: messages in, replies and calls out ------------------- */

/* The server's state between messages. */
struct mcp {
	const char *config;     /* --config PATH for the tools, or NULL */
	int initialized;        /* notifications/initialized came */
};

/* A tool call: what the loop runs, and what it collects. */
struct mcp_call {
	const struct tool *tool;
	cJSON *id;              /* the request's id */
	char **argv;            /* "cardbaton-X", its words, NULL */
	char *input;            /* its standard input (job_text), or NULL */
	char **ids;             /* AFTER_ARG_IDS: the jobs whose status follows */
	size_t nids;
	int stage;              /* 0: the tool; 1: the status --json after it */
	/* The loop's. */
	struct mcp_call *next;
	pid_t pid;
	int out, err;           /* the read ends of its stdout, stderr; -1 at EOF */
	struct sbuf obuf, ebuf;
	size_t ocut;            /* bytes of standard output left out */
	int wstatus, reaped, cancelled;
	long long reaped_at;    /* mono_ms */
};

/* What one message asks of the loop. */
struct mcp_step {
	char *reply;            /* a message to write now (no newline), or NULL */
	struct mcp_call *call;  /* a tool to start, or NULL */
	cJSON *cancel;          /* the id of a request to cancel, or NULL */
};

/* Set when an allocation failed while a reply was built; mcp_line and
 * mcp_done then fail with ENOMEM (the caller gives up). */
static int oom;

static cJSON *chk(cJSON *v)
{
	if (!v)
		oom = 1;
	return v;
}

/* Add V (NULL: allocation failed) to object O as K. */
static void put(cJSON *o, const char *k, cJSON *v)
{
	if (!v || !o || !cJSON_AddItemToObject(o, k, v)) {
		cJSON_Delete(v);
		oom = 1;
	}
}

static void push(cJSON *a, cJSON *v)
{
	if (!v || !a || !cJSON_AddItemToArray(a, v)) {
		cJSON_Delete(v);
		oom = 1;
	}
}

static char *xdup(const char *s)
{
	char *d = strdup(s);

	if (!d)
		oom = 1;
	return d;
}

static void free_words(char **w)
{
	if (w)
		for (char **p = w; *p; p++)
			free(*p);
	free(w);
}

static void call_free(struct mcp_call *c)
{
	if (!c)
		return;
	cJSON_Delete(c->id);
	free_words(c->argv);
	free(c->input);
	for (size_t i = 0; i < c->nids; i++)
		free(c->ids[i]);
	free(c->ids);
	sbuf_free(&c->obuf);
	sbuf_free(&c->ebuf);
	free(c);
}

/*
 * TEXT[0..LEN) as valid UTF-8 (malloc'd, NUL-terminated): every byte
 * that does not begin a well-formed sequence (overlong forms,
 * surrogates and code points over U+10FFFF are not), and every NUL,
 * becomes U+FFFD.  NULL on ENOMEM.
 */
static char *utf8_clean(const char *text, size_t len)
{
	const unsigned char *s = (const unsigned char *)text;
	char *d, *p;
	size_t i = 0;

	if (len > (SIZE_MAX - 1) / 3 || !(d = malloc(len * 3 + 1)))
		return NULL;
	p = d;
	while (i < len) {
		unsigned c = s[i];
		size_t n = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 :
			   c >= 0xf0 && c <= 0xf4 ? 4 : 0;
		int ok = n > 0 && c != 0 && i + n <= len;

		for (size_t k = 1; ok && k < n; k++)
			ok = (s[i + k] & 0xc0) == 0x80;
		if (ok && n == 3)       /* overlong, or a surrogate */
			ok = !(c == 0xe0 && s[i + 1] < 0xa0) && !(c == 0xed && s[i + 1] >= 0xa0);
		if (ok && n == 4)       /* overlong, or over U+10FFFF */
			ok = !(c == 0xf0 && s[i + 1] < 0x90) && !(c == 0xf4 && s[i + 1] >= 0x90);
		if (ok) {
			memcpy(p, s + i, n);
			p += n;
			i += n;
		} else {
			memcpy(p, "\xef\xbf\xbd", 3);
			p += 3;
			i++;
		}
	}
	*p = '\0';
	return d;
}

/* A JSON string of TEXT[0..LEN), made valid UTF-8 first. */
static cJSON *text_string(const char *text, size_t len)
{
	char *s = utf8_clean(text, len);
	cJSON *v;

	if (!s) {
		oom = 1;
		return NULL;
	}
	v = chk(cJSON_CreateString(s));
	free(s);
	return v;
}

/* A message text of its own (NULL on ENOMEM). */
__attribute__((format(printf, 1, 2)))
static char *msgf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = vxasprintf(fmt, ap);
	va_end(ap);
	if (!s)
		oom = 1;
	return s;
}

/* {"jsonrpc": "2.0", "id": ID, KEY: V} as one line (V is consumed);
 * NULL on ENOMEM. */
static char *envelope(const cJSON *id, const char *key, cJSON *v)
{
	cJSON *o = chk(cJSON_CreateObject());
	char *s = NULL;

	put(o, "jsonrpc", chk(cJSON_CreateString("2.0")));
	put(o, "id", id ? chk(cJSON_Duplicate(id, 1)) : chk(cJSON_CreateNull()));
	put(o, key, v);
	if (!oom && !(s = cJSON_PrintUnformatted(o)))
		oom = 1;
	cJSON_Delete(o);
	return s;
}

static char *rpc_error(const cJSON *id, int code, const char *msg)
{
	cJSON *e = chk(cJSON_CreateObject());

	put(e, "code", chk(cJSON_CreateNumber(code)));
	put(e, "message", text_string(msg ? msg : "out of memory", msg ? strlen(msg) : 13));
	return envelope(id, "error", e);
}

/* A tools/call result: TEXT[0..LEN) as its one text block, STRUCT
 * (consumed, may be NULL) as structuredContent. */
static char *tool_result(const cJSON *id, const char *text, size_t len, cJSON *st, int is_error)
{
	cJSON *r = chk(cJSON_CreateObject()), *content = chk(cJSON_CreateArray()),
	      *block = chk(cJSON_CreateObject());

	put(block, "type", chk(cJSON_CreateString("text")));
	put(block, "text", text_string(text, len));
	push(content, block);
	put(r, "content", content);
	if (st)
		put(r, "structuredContent", st);
	put(r, "isError", chk(cJSON_CreateBool(is_error)));
	return envelope(id, "result", r);
}

/* A failed call: MSG as the text, {"exit_code": CODE (null when CODE
 * is -1: killed by a signal, or output too long), "error": MSG} as
 * structuredContent. */
static char *tool_error(const cJSON *id, int code, const char *msg)
{
	cJSON *st = chk(cJSON_CreateObject());

	if (!msg)
		return NULL;
	put(st, "exit_code", code >= 0 ? chk(cJSON_CreateNumber(code)) : chk(cJSON_CreateNull()));
	put(st, "error", text_string(msg, strlen(msg)));
	return tool_result(id, msg, strlen(msg), st, 1);
}

/* ---- tools/list ----------------------------------------------------------- */

static cJSON *schema_of(const struct arg *a)
{
	cJSON *p = chk(cJSON_CreateObject()), *items = NULL;
	const char *type = "string";

	switch (a->kind) {
	case A_STR: case A_SIZE: case A_TEXT: case A_ID:
		break;
	case A_INT:
		type = "integer";
		break;
	case A_BOOL:
		type = "boolean";
		break;
	case A_INTS:
		type = "array";
		items = chk(cJSON_CreateObject());
		put(items, "type", chk(cJSON_CreateString("integer")));
		put(items, "minimum", chk(cJSON_CreateNumber(0)));
		break;
	case A_IDS: case A_IDLIST: case A_ARGV:
		type = "array";
		items = chk(cJSON_CreateObject());
		put(items, "type", chk(cJSON_CreateString("string")));
		break;
	case A_STRS: {
		/* A string, or a non-empty array of strings. */
		cJSON *any = chk(cJSON_CreateArray()), *one = chk(cJSON_CreateObject()),
		      *many = chk(cJSON_CreateObject()), *it = chk(cJSON_CreateObject());

		put(one, "type", chk(cJSON_CreateString("string")));
		put(it, "type", chk(cJSON_CreateString("string")));
		put(many, "type", chk(cJSON_CreateString("array")));
		put(many, "items", it);
		put(many, "minItems", chk(cJSON_CreateNumber(1)));
		push(any, one);
		push(any, many);
		put(p, "anyOf", any);
		put(p, "description", chk(cJSON_CreateString(a->desc)));
		return p;
	}
	case A_ENV: case A_PARAM:
		type = "object";
		items = chk(cJSON_CreateObject());
		if (a->kind == A_PARAM) {
			cJSON *s = chk(cJSON_CreateObject());

			put(s, "type", chk(cJSON_CreateString("string")));
			put(items, "type", chk(cJSON_CreateString("array")));
			put(items, "items", s);
		} else {
			put(items, "type", chk(cJSON_CreateString("string")));
		}
		break;
	}
	put(p, "type", chk(cJSON_CreateString(type)));
	put(p, "description", chk(cJSON_CreateString(a->desc)));
	if (items)
		put(p, a->kind == A_ENV || a->kind == A_PARAM ? "additionalProperties" : "items", items);
	if (a->kind == A_ARGV || a->kind == A_INTS || a->kind == A_IDS)
		put(p, "minItems", chk(cJSON_CreateNumber(1)));
	return p;
}

static cJSON *tool_of(const struct tool *t)
{
	cJSON *o = chk(cJSON_CreateObject()), *s = chk(cJSON_CreateObject()),
	      *props = chk(cJSON_CreateObject()), *req = chk(cJSON_CreateArray()),
	      *ann = chk(cJSON_CreateObject());

	put(o, "name", chk(cJSON_CreateString(t->name)));
	put(o, "title", chk(cJSON_CreateString(t->title)));
	put(o, "description", chk(cJSON_CreateString(t->desc)));
	put(s, "type", chk(cJSON_CreateString("object")));
	for (const struct arg *a = t->args; a->name; a++) {
		put(props, a->name, schema_of(a));
		if (a->required)
			push(req, chk(cJSON_CreateString(a->name)));
	}
	put(s, "properties", props);
	if (cJSON_GetArraySize(req) > 0)
		put(s, "required", req);
	else
		cJSON_Delete(req);
	put(s, "additionalProperties", chk(cJSON_CreateFalse()));
	put(o, "inputSchema", s);
	put(ann, "title", chk(cJSON_CreateString(t->title)));
	put(ann, "readOnlyHint", chk(cJSON_CreateBool(t->read_only)));
	put(ann, "destructiveHint", chk(cJSON_CreateBool(t->destructive)));
	put(ann, "openWorldHint", chk(cJSON_CreateFalse()));
	put(o, "annotations", ann);
	return o;
}

static cJSON *tools_list(void)
{
	cJSON *r = chk(cJSON_CreateObject()), *a = chk(cJSON_CreateArray());

	for (size_t i = 0; i < NTOOLS; i++)
		push(a, tool_of(&tools[i]));
	put(r, "tools", a);
	return r;
}

/* ---- tools/call: arguments to an argv ----------------------------------- */

/* A growing NULL-terminated vector of words. */
struct words {
	char **w;
	size_t n, cap;
};

static void word(struct words *v, char *s)     /* takes S */
{
	if (!s) {
		oom = 1;
		return;
	}
	if (v->n + 2 > v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 16;
		char **w = realloc(v->w, cap * sizeof *w);

		if (!w) {
			free(s);
			oom = 1;
			return;
		}
		v->w = w;
		v->cap = cap;
	}
	v->w[v->n++] = s;
	v->w[v->n] = NULL;
}

/* An integer argument's text: a JSON number that is a whole number
 * within +-2^53 (a string is passed as it is, for the tool to judge). */
static char *int_text(const cJSON *v)
{
	if (cJSON_IsString(v))
		return xdup(v->valuestring);
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble) ||
	    fabs(v->valuedouble) > 9007199254740992.0)
		return NULL;
	return msgf("%lld", (long long)v->valuedouble);
}

/* A job ID: a string (the tool judges it) or a whole number >= 0. */
static char *id_text(const cJSON *v)
{
	if (cJSON_IsNumber(v) && v->valuedouble < 0)
		return NULL;
	return int_text(v);
}

/* The elements of array V as text by CONV, joined with commas; NULL
 * with *WHY when one is not of the type (or contains a comma). */
static char *join(const cJSON *v, char *(*conv)(const cJSON *), const char **why)
{
	struct sbuf b = { 0 };
	const cJSON *e;

	*why = "must be a non-empty array";
	if (!cJSON_IsArray(v) || !v->child)
		return NULL;
	cJSON_ArrayForEach(e, v) {
		char *s = conv(e);

		if (!s || strchr(s, ',')) {
			*why = s || !oom ? "has an element of the wrong type" : NULL;
			free(s);
			sbuf_free(&b);
			return NULL;
		}
		if ((b.len && sbuf_add(&b, ",", 1) < 0) || sbuf_add(&b, s, strlen(s)) < 0)
			oom = 1;
		free(s);
	}
	if (oom) {
		sbuf_free(&b);
		*why = NULL;
		return NULL;
	}
	return b.s;
}

static char *str_text(const cJSON *v)
{
	return cJSON_IsString(v) ? xdup(v->valuestring) : NULL;
}

static const char *kind_name(enum akind k)
{
	switch (k) {
	case A_INT: return "an integer";
	case A_BOOL: return "a boolean";
	case A_SIZE: return "a string such as \"60G\"";
	case A_STRS: return "a string or a non-empty array of strings without commas";
	case A_INTS: return "a non-empty array of integers";
	case A_IDS: case A_IDLIST: return "an array of job IDs (strings of digits)";
	case A_ENV: return "an object of strings";
	case A_PARAM: return "an object of non-empty arrays of strings without commas";
	case A_ID: return "a job ID (a string of digits)";
	case A_ARGV: return "a non-empty array of strings";
	default: return "a string";
	}
}

/*
 * The argv of tool T for ARGS (an object, or NULL) into C; 0, or -1
 * with *WHY (malloc'd; NULL: out of memory) saying what is wrong with
 * an argument.
 */
static int build_argv(const struct mcp *m, const struct tool *t, const cJSON *args,
		      struct mcp_call *c, char **why)
{
	struct words v = { 0 }, ops = { 0 };
	const struct arg *a;
	const cJSON *x;
	int job_given = 0;

	*why = NULL;
	/* Every argument must be one of the tool's. */
	cJSON_ArrayForEach(x, args) {
		for (a = t->args; a->name && (!x->string || strcmp(a->name, x->string)); a++)
			;
		if (!a->name) {
			struct sbuf b = { 0 };

			for (a = t->args; a->name; a++)
				if (sbuf_addf(&b, "%s%s", a == t->args ? "" : ", ", a->name) < 0)
					oom = 1;
			*why = msgf("unknown argument '%s' (%s takes: %s)", x->string ? x->string : "",
				    t->name, b.s ? b.s : "");
			sbuf_free(&b);
			return -1;
		}
	}
	word(&v, msgf("cardbaton-%s", t->name));
	if (m->config) {
		word(&v, xdup("--config"));
		word(&v, xdup(m->config));
	}
	if (t->fixed)
		word(&v, xdup(t->fixed));
	for (a = t->args; a->name; a++) {
		const char *jwhy = NULL;
		const cJSON *e;
		char *s = NULL;
		int bad = 0;

		x = cJSON_GetObjectItemCaseSensitive(args, a->name);
		if (!x || cJSON_IsNull(x)) {
			if (a->required) {
				*why = msgf("argument '%s' is required", a->name);
				goto fail;
			}
			continue;
		}
		switch (a->kind) {
		case A_STR: case A_TEXT:
			if (!cJSON_IsString(x))
				bad = 1;
			else if (a->kind == A_TEXT) {
				if (!(c->input = xdup(x->valuestring)))
					break;
				word(&v, xdup(a->flag));
				word(&v, xdup("-"));
				job_given++;
			} else {
				word(&v, xdup(a->flag));
				word(&v, xdup(x->valuestring));
				job_given += !strcmp(a->flag, "--job");
			}
			break;
		case A_STRS:
			if (cJSON_IsString(x))
				s = xdup(x->valuestring);
			else if (!(s = join(x, str_text, &jwhy)))
				bad = jwhy != NULL;
			if (s) {
				word(&v, xdup(a->flag));
				word(&v, s);
			}
			break;
		case A_INT: case A_SIZE:
			if (!(s = int_text(x)))
				bad = !oom;
			else {
				word(&v, xdup(a->flag));
				word(&v, s);
			}
			break;
		case A_BOOL:
			if (!cJSON_IsBool(x))
				bad = 1;
			else if (cJSON_IsTrue(x))
				word(&v, xdup(a->flag));
			break;
		case A_INTS: case A_IDS:
			if (!(s = join(x, a->kind == A_INTS ? int_text : id_text, &jwhy)))
				bad = jwhy != NULL;
			else {
				word(&v, xdup(a->flag));
				word(&v, s);
			}
			break;
		case A_ENV: case A_PARAM:
			if (!cJSON_IsObject(x)) {
				bad = 1;
				break;
			}
			cJSON_ArrayForEach(e, x) {
				char *val = a->kind == A_ENV ? str_text(e) : join(e, str_text, &jwhy);

				if (!val || !e->string || !*e->string || strchr(e->string, '=')) {
					free(val);
					bad = !oom;
					break;
				}
				word(&v, xdup(a->flag));
				word(&v, msgf("%s=%s", e->string, val));
				free(val);
			}
			break;
		case A_ID:
			if (!(s = id_text(x)))
				bad = !oom;
			else
				word(&ops, s);
			break;
		case A_IDLIST:
			if (!cJSON_IsArray(x)) {
				bad = 1;
				break;
			}
			cJSON_ArrayForEach(e, x) {
				if (!(s = id_text(e))) {
					bad = !oom;
					break;
				}
				word(&ops, s);
			}
			break;
		case A_ARGV:
			if (!cJSON_IsArray(x) || !x->child) {
				bad = 1;
				break;
			}
			cJSON_ArrayForEach(e, x) {
				if (!cJSON_IsString(e)) {
					bad = 1;
					break;
				}
				word(&ops, xdup(e->valuestring));
			}
			break;
		}
		if (bad) {
			*why = msgf("argument '%s' must be %s", a->name, kind_name(a->kind));
			goto fail;
		}
		if (oom)
			goto fail;
	}
	if (job_given > 1) {
		*why = msgf("give 'job' or 'job_text', not both");
		goto fail;
	}
	/* Options end here: an operand can never be taken for a flag. */
	word(&v, xdup("--"));
	for (size_t i = 0; i < ops.n; i++) {
		word(&v, ops.w[i]);
		ops.w[i] = NULL;
	}
	if (oom)
		goto fail;
	if (t->after == AFTER_ARG_IDS && ops.n) {
		/* The operands are the job IDs whose status follows. */
		for (size_t i = 0; i < ops.n; i++)
			if (!(ops.w[i] = xdup(v.w[v.n - ops.n + i])))
				goto fail;
		c->ids = ops.w;
		c->nids = ops.n;
		ops.w = NULL;
	}
	free_words(ops.w);
	c->argv = v.w;
	return 0;
fail:
	free_words(ops.w);
	free_words(v.w);
	return -1;
}

/* ---- one message ----------------------------------------------------------- */

/* A JSON-RPC id must be a string or an integer (MCP: not null). */
static int id_ok(const cJSON *id)
{
	return cJSON_IsString(id) || (cJSON_IsNumber(id) && isfinite(id->valuedouble) &&
				      id->valuedouble == floor(id->valuedouble));
}

static int same_id(const cJSON *a, const cJSON *b)
{
	if (cJSON_IsString(a) && cJSON_IsString(b))
		return !strcmp(a->valuestring, b->valuestring);
	return cJSON_IsNumber(a) && cJSON_IsNumber(b) && a->valuedouble == b->valuedouble;
}

static cJSON *initialize(const cJSON *params)
{
	const cJSON *pv = cJSON_GetObjectItemCaseSensitive(params, "protocolVersion");
	const char *v = versions[0];
	cJSON *r = chk(cJSON_CreateObject()), *caps = chk(cJSON_CreateObject()),
	      *tl = chk(cJSON_CreateObject()), *info = chk(cJSON_CreateObject());

	for (size_t i = 0; i < NVERSIONS; i++)
		if (cJSON_IsString(pv) && !strcmp(pv->valuestring, versions[i]))
			v = versions[i];
	put(r, "protocolVersion", chk(cJSON_CreateString(v)));
	put(tl, "listChanged", chk(cJSON_CreateFalse()));
	put(caps, "tools", tl);
	put(r, "capabilities", caps);
	put(info, "name", chk(cJSON_CreateString("cardbaton")));
	put(info, "title", chk(cJSON_CreateString("CardBaton GPU job queue")));
	put(info, "version", chk(cJSON_CreateString(CARDBATON_VERSION)));
	put(r, "serverInfo", info);
	put(r, "instructions", chk(cJSON_CreateString(instructions)));
	return r;
}

/* tools/call with PARAMS: a call to start into ST->call, or a reply. */
static void tools_call(const struct mcp *m, const cJSON *id, const cJSON *params, struct mcp_step *st)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name"),
		    *args = cJSON_GetObjectItemCaseSensitive(params, "arguments");
	const struct tool *t = NULL;
	struct mcp_call *c;
	char *why = NULL, *msg;

	if (!cJSON_IsObject(params) || !cJSON_IsString(name)) {
		st->reply = rpc_error(id, RPC_PARAMS, "tools/call: params must be an object with a string 'name'");
		return;
	}
	for (size_t i = 0; i < NTOOLS; i++)
		if (!strcmp(tools[i].name, name->valuestring))
			t = &tools[i];
	if (!t) {
		msg = msgf("tools/call: unknown tool '%s'", name->valuestring);
		st->reply = msg ? rpc_error(id, RPC_PARAMS, msg) : NULL;
		free(msg);
		return;
	}
	if (args && !cJSON_IsNull(args) && !cJSON_IsObject(args)) {
		st->reply = rpc_error(id, RPC_PARAMS, "tools/call: 'arguments' must be an object");
		return;
	}
	if (!(c = calloc(1, sizeof *c))) {
		oom = 1;
		return;
	}
	c->tool = t;
	c->out = c->err = -1;
	c->id = chk(cJSON_Duplicate(id, 1));
	if (oom || build_argv(m, t, cJSON_IsObject(args) ? args : NULL, c, &why) < 0) {
		if (!oom && why && (msg = msgf("cardbaton-mcp: %s: %s", t->name, why))) {
			st->reply = tool_error(id, EX_USAGE_, msg);
			free(msg);
		}
		free(why);
		call_free(c);
		return;
	}
	st->call = c;
}

/*
 * One message, LINE[0..LEN) without its newline, into ST (zeroed
 * here): a reply to write, a call to start, a request to cancel, or
 * nothing (a notification, a response, an empty line).  0, or -1 with
 * errno ENOMEM (ST holds nothing then).
 */
static int mcp_line(struct mcp *m, const char *line, size_t len, struct mcp_step *st)
{
	const char *end = NULL;
	const cJSON *id, *method, *params, *jv;
	cJSON *msg;
	size_t i;

	memset(st, 0, sizeof *st);
	oom = 0;
	for (i = 0; i < len && line[i] && strchr(" \t\r\n", line[i]); i++)
		;
	if (i == len)
		return 0;
	msg = cJSON_ParseWithLengthOpts(line, len, &end, 0);
	if (msg)        /* nothing but blanks may follow the value */
		for (; end && end < line + len && *end && strchr(" \t\r\n", *end); end++)
			;
	if (!msg || !end || end != line + len) {
		cJSON_Delete(msg);
		st->reply = rpc_error(NULL, RPC_PARSE, "parse error: not one JSON value");
		goto out;
	}
	if (cJSON_IsArray(msg)) {
		st->reply = rpc_error(NULL, RPC_INVALID, "JSON-RPC batches are not supported");
		goto done;
	}
	id = cJSON_GetObjectItemCaseSensitive(msg, "id");
	method = cJSON_GetObjectItemCaseSensitive(msg, "method");
	params = cJSON_GetObjectItemCaseSensitive(msg, "params");
	jv = cJSON_GetObjectItemCaseSensitive(msg, "jsonrpc");
	if (!cJSON_IsObject(msg) || !cJSON_IsString(jv) || strcmp(jv->valuestring, "2.0") ||
	    (id && !id_ok(id)) || (method && !cJSON_IsString(method)) ||
	    (params && !cJSON_IsObject(params) && !cJSON_IsArray(params))) {
		st->reply = rpc_error(id_ok(id) ? id : NULL, RPC_INVALID,
				      "invalid request: not a JSON-RPC 2.0 message");
		goto done;
	}
	if (!method) {
		/* A response (we send no requests) or junk without an id. */
		if (!id && !cJSON_GetObjectItemCaseSensitive(msg, "result") &&
		    !cJSON_GetObjectItemCaseSensitive(msg, "error"))
			st->reply = rpc_error(NULL, RPC_INVALID, "invalid request: no method");
		goto done;
	}
	if (!id) {              /* a notification: never answered */
		if (!strcmp(method->valuestring, "notifications/initialized")) {
			m->initialized = 1;
		} else if (!strcmp(method->valuestring, "notifications/cancelled")) {
			const cJSON *rid = cJSON_GetObjectItemCaseSensitive(params, "requestId");

			if (id_ok(rid))
				st->cancel = chk(cJSON_Duplicate(rid, 1));
		}
		goto done;
	}
	if (!strcmp(method->valuestring, "initialize")) {
		if (!cJSON_IsObject(params))
			st->reply = rpc_error(id, RPC_PARAMS, "initialize: params must be an object");
		else
			st->reply = envelope(id, "result", initialize(params));
	} else if (!strcmp(method->valuestring, "ping")) {
		st->reply = envelope(id, "result", chk(cJSON_CreateObject()));
	} else if (!strcmp(method->valuestring, "tools/list")) {
		st->reply = envelope(id, "result", tools_list());
	} else if (!strcmp(method->valuestring, "tools/call")) {
		tools_call(m, id, params, st);
	} else {
		char *text = msgf("method not found: %s", method->valuestring);

		st->reply = text ? rpc_error(id, RPC_METHOD, text) : NULL;
		free(text);
	}
done:
	cJSON_Delete(msg);
out:
	if (oom) {
		free(st->reply);
		call_free(st->call);
		cJSON_Delete(st->cancel);
		memset(st, 0, sizeof *st);
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

/* ---- a child's end ----------------------------------------------------- */

/* The job IDs on their own lines in OUT (what submit prints), as the
 * words of the status query; 0 when OUT is anything else. */
static size_t new_ids(const char *out, size_t len, char ***ids)
{
	struct words v = { 0 };
	size_t i = 0;

	*ids = NULL;
	while (i < len) {
		size_t n = 0;

		while (i + n < len && out[i + n] >= '0' && out[i + n] <= '9')
			n++;
		if (n == 0 || n > 19 || (i + n < len && out[i + n] != '\n')) {
			free_words(v.w);
			return 0;
		}
		word(&v, strndup(out + i, n));
		i += n + 1;
	}
	if (oom) {
		free_words(v.w);
		return 0;
	}
	*ids = v.w;
	return v.n;
}

/* Make C the status --json query of its jobs (IDS, NIDS: taken). */
static void to_status(const struct mcp *m, struct mcp_call *c, char **ids, size_t nids)
{
	struct words v = { 0 };

	word(&v, xdup("cardbaton-status"));
	if (m->config) {
		word(&v, xdup("--config"));
		word(&v, xdup(m->config));
	}
	word(&v, xdup("--json"));
	word(&v, xdup("--"));
	for (size_t i = 0; i < nids; i++)
		word(&v, xdup(ids[i]));
	free_words(c->argv);
	c->argv = v.w;
	free(c->input);
	c->input = NULL;
	c->stage = 1;
}

/*
 * Call C's child ended with WSTATUS (waitpid's), having written
 * OUT[0..OLEN) (the last of it: CUT bytes before were left out) and
 * ERR[0..ELEN).  Returns 1 when C is now the status query to run next
 * (the action succeeded), 0 with *REPLY the answer, -1 with errno
 * ENOMEM.
 */
static int mcp_done(const struct mcp *m, struct mcp_call *c, int wstatus, const char *out, size_t olen,
		    size_t cut, const char *err, size_t elen, char **reply)
{
	const char *prog = c->argv && c->argv[0] ? c->argv[0] : "cardbaton";
	int code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
	int ok = code >= 0 && code < 32 && (c->stage ? code == 0 : (c->tool->ok >> code) & 1);
	enum after after = c->stage ? AFTER_JSON : c->tool->after;
	char *msg = NULL;

	*reply = NULL;
	oom = 0;
	if (!ok) {
		char *e = utf8_clean(err, elen);
		size_t n;

		if (!e) {
			errno = ENOMEM;
			return -1;
		}
		for (n = strlen(e); n > 0 && strchr(" \t\r\n", e[n - 1]); n--)
			e[n - 1] = '\0';
		if (code < 0)
			msg = msgf("%s%s%s: killed by signal %d", e, *e ? "\n" : "", prog,
				   WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0);
		else if (!*e)
			msg = msgf("%s: exit status %d", prog, code);
		else
			msg = xdup(e);
		free(e);
		*reply = msg ? tool_error(c->id, code, msg) : NULL;
		free(msg);
		goto out;
	}
	if (after == AFTER_NEW_IDS || after == AFTER_ARG_IDS) {
		char **ids = c->ids;
		size_t n = c->nids;

		if (after == AFTER_NEW_IDS && !(n = new_ids(out, olen, &ids)) && !oom) {
			*reply = tool_result(c->id, out, olen, NULL, 0);
			goto out;
		}
		if (oom)
			goto out;
		to_status(m, c, ids, n);
		if (ids != c->ids) {
			free_words(ids);
		}
		if (oom)
			goto out;
		return 1;
	}
	if (cut) {
		if (after == AFTER_JSON) {
			msg = msgf("cardbaton-mcp: %s: the output is over %u MiB", c->tool->name, OUT_MAX >> 20);
			*reply = msg ? tool_error(c->id, -1, msg) : NULL;
			free(msg);
		} else {
			struct sbuf b = { 0 };

			if (sbuf_addf(&b, "[cardbaton-mcp: %zu bytes left out; the last %zu follow]\n",
				      cut, olen) < 0 || sbuf_add(&b, out, olen) < 0)
				oom = 1;
			else
				*reply = tool_result(c->id, b.s, b.len, NULL, 0);
			sbuf_free(&b);
		}
		goto out;
	}
	if (after == AFTER_JSON) {
		char *text = utf8_clean(out, olen);
		cJSON *doc;

		if (!text) {
			errno = ENOMEM;
			return -1;
		}
		doc = cJSON_Parse(text);
		*reply = tool_result(c->id, text, strlen(text), cJSON_IsObject(doc) ? doc : NULL, 0);
		if (!cJSON_IsObject(doc))
			cJSON_Delete(doc);
		free(text);
	} else {
		*reply = tool_result(c->id, out, olen, NULL, 0);
	}
out:
	if (oom) {
		free(*reply);
		*reply = NULL;
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

/* ---- the loop: children, pipes and standard input ------------------------- */

#ifndef CB_MCP_PURE     /* tests/fuzz/fuzz_mcp.c takes the part above */

static const char usage[] = "cardbaton-mcp [--config PATH]";

static const struct option longopts[] = {
	COMMON_LONGOPTS,
	{ NULL, 0, NULL, 0 },
};

#define REAP_GRACE_MS 2000      /* a tool that ended, its pipes held open by another */
#define STOP_GRACE_MS 5000      /* SIGTERM, then SIGKILL */

static struct mcp srv;
static struct mcp_call *calls;  /* running, newest first */
static size_t ncalls;
static char *tool_dir;          /* exe_dir(), or NULL */
static int devnull = -1;
static sigset_t oldmask;        /* the children's */

/* Every child's process group SIGTERMed, then SIGKILLed if it has not
 * ended within STOP_GRACE_MS; all reaped. */
static void stop_all(void)
{
	long long deadline = mono_ms() + STOP_GRACE_MS;
	int killed = 0;

	for (struct mcp_call *c = calls; c; c = c->next)
		if (!c->reaped && kill(-c->pid, SIGTERM) < 0 && errno != ESRCH)
			warn_line("kill %ld: %s", (long)c->pid, strerror(errno));
	for (;;) {
		int left = 0;

		for (struct mcp_call *c = calls; c; c = c->next) {
			pid_t r;

			if (c->reaped)
				continue;
			r = waitpid(c->pid, &c->wstatus, killed ? 0 : WNOHANG);
			if (r == c->pid || (r < 0 && errno != EINTR))
				c->reaped = 1;
			else
				left++;
		}
		if (!left)
			return;
		if (!killed && mono_ms() >= deadline) {
			for (struct mcp_call *c = calls; c; c = c->next)
				if (!c->reaped)
					kill(-c->pid, SIGKILL);
			killed = 1;
		}
		if (!killed)
			sleep_ms(20);
	}
}

__attribute__((format(printf, 2, 3)))
static _Noreturn void fatal(int ex, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	msg = vxasprintf(fmt, ap);
	va_end(ap);
	stop_all();
	die(ex, "%s", msg ? msg : strerror(ENOMEM));
}

/* Write MSG and a newline to standard output; frees MSG. */
static void send_msg(char *msg)
{
	int r;

	if (!msg)
		fatal(EX_OSERR_, "%s", strerror(ENOMEM));
	r = write_full(1, msg, strlen(msg));
	free(msg);
	if (r < 0 || write_full(1, "\n", 1) < 0)
		fatal(EX_IOERR_, "standard output: %s", strerror(errno));
}

/* "cardbaton-mcp: TOOL: WHAT: strerror(errno)" for call C, as its
 * (failed) answer. */
static void send_sys_error(struct mcp_call *c, const char *what)
{
	char *msg = msgf("cardbaton-mcp: %s: %s: %s", c->tool->name, what, strerror(errno));

	send_msg(msg ? tool_error(c->id, EX_OSERR_, msg) : NULL);
	free(msg);
}

/* Start C's child: its argv, never a shell; standard input /dev/null
 * or C->input, its stdout and stderr pipes to us.  0, or -1 with errno
 * and *WHAT the step that failed. */
static int start(struct mcp_call *c, const char **what)
{
	int op[2] = { -1, -1 }, ep[2] = { -1, -1 }, in = devnull, e;
	pid_t parent = getpid();
	char *path = NULL;

	if (c->input) {
		*what = "memfd_create";
		if ((in = memfd_create("job_text", MFD_CLOEXEC)) < 0)
			return -1;
		*what = "job_text";
		if (write_full(in, c->input, strlen(c->input)) < 0 || lseek(in, 0, SEEK_SET) < 0)
			goto fail;
	}
	/* The sibling first (as bin/cardbaton.c finds it), then PATH. */
	if (tool_dir) {
		*what = "malloc";
		if (!(path = xasprintf("%s/%s", tool_dir, c->argv[0])))
			goto fail;
		if (access(path, X_OK) < 0) {
			free(path);
			path = NULL;
		}
	}
	*what = "pipe";
	if (pipe2(op, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0)
		goto fail;
	*what = "fork";
	if ((c->pid = fork()) < 0)
		goto fail;
	if (c->pid == 0) {
		/* Its own process group, so that a cancel stops what it
		 * runs too; and it ends with us. */
		if (setpgid(0, 0) < 0 || prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent ||
		    dup2(in, 0) < 0 || dup2(op[1], 1) < 0 || dup2(ep[1], 2) < 0 ||
		    signal(SIGPIPE, SIG_DFL) == SIG_ERR || sigprocmask(SIG_SETMASK, &oldmask, NULL) < 0)
			_exit(EX_OSERR_);
		if (path)
			execv(path, c->argv);
		else
			execvp(c->argv[0], c->argv);
		e = errno;
		dprintf(2, "cardbaton-mcp: cannot run %s: %s\n", path ? path : c->argv[0], strerror(e));
		_exit(e == ENOENT ? EX_UNAVAILABLE_ : EX_OSERR_);
	}
	/* Both sides set the group: whichever runs first, a kill(-pid)
	 * after this finds it. */
	if (setpgid(c->pid, c->pid) < 0 && errno != EACCES && errno != ESRCH)
		warn_line("setpgid %ld: %s", (long)c->pid, strerror(errno));
	close(op[1]);
	close(ep[1]);
	if (in != devnull)
		close(in);
	free(path);
	c->out = op[0];
	c->err = ep[0];
	c->reaped = 0;
	c->ocut = 0;
	sbuf_free(&c->obuf);
	sbuf_free(&c->ebuf);
	c->next = calls;
	calls = c;
	ncalls++;
	return 0;
fail:
	e = errno;
	for (int i = 0; i < 2; i++) {
		if (op[i] >= 0)
			close(op[i]);
		if (ep[i] >= 0)
			close(ep[i]);
	}
	if (in != devnull)
		close(in);
	free(path);
	errno = e;
	return -1;
}

/* Start C or answer that it could not be; C is the loop's either way. */
static void run_call(struct mcp_call *c)
{
	const char *what = NULL;

	if (start(c, &what) < 0) {
		send_sys_error(c, what);
		call_free(c);
	}
}

static void unlink_call(struct mcp_call *c)
{
	for (struct mcp_call **p = &calls; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			ncalls--;
			return;
		}
}

/* C's child has ended and its pipes are closed: answer, or run its
 * status query. */
static void finish(struct mcp_call *c)
{
	char *reply;
	int r;

	unlink_call(c);
	if (c->cancelled) {
		call_free(c);
		return;
	}
	r = mcp_done(&srv, c, c->wstatus, c->obuf.s ? c->obuf.s : "", c->obuf.len, c->ocut,
		     c->ebuf.s ? c->ebuf.s : "", c->ebuf.len, &reply);
	if (r < 0)
		fatal(EX_OSERR_, "%s", strerror(errno));
	if (r == 1) {
		run_call(c);
		return;
	}
	send_msg(reply);
	call_free(c);
}

/* Read what C's pipe FD has; -1 at its end (closed then). */
static void drain(struct mcp_call *c, int *fd)
{
	char buf[65536];
	ssize_t n = read(*fd, buf, sizeof buf);

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		if (n < 0)
			warn_line("%s: read: %s", c->argv[0], strerror(errno));
		close(*fd);
		*fd = -1;
		return;
	}
	if (fd == &c->out) {
		if (sbuf_add(&c->obuf, buf, (size_t)n) < 0)
			fatal(EX_OSERR_, "%s", strerror(ENOMEM));
		if (c->obuf.len > 2 * (size_t)OUT_MAX) {       /* keep the last OUT_MAX */
			size_t drop = c->obuf.len - OUT_MAX;

			memmove(c->obuf.s, c->obuf.s + drop, OUT_MAX + 1);
			c->obuf.len = OUT_MAX;
			c->ocut += drop;
		}
	} else if (c->ebuf.len < ERR_MAX) {
		size_t k = (size_t)n < ERR_MAX - c->ebuf.len ? (size_t)n : ERR_MAX - c->ebuf.len;

		if (sbuf_add(&c->ebuf, buf, k) < 0)
			fatal(EX_OSERR_, "%s", strerror(ENOMEM));
	}
}

/* notifications/cancelled: stop the child of request ID (it is not
 * answered). */
static void cancel(const cJSON *id)
{
	for (struct mcp_call *c = calls; c; c = c->next)
		if (!c->cancelled && same_id(c->id, id)) {
			c->cancelled = 1;
			if (!c->reaped && kill(-c->pid, SIGTERM) < 0 && errno != ESRCH)
				warn_line("kill %ld: %s", (long)c->pid, strerror(errno));
			return;
		}
}

/* One message from standard input. */
static void message(const char *line, size_t len)
{
	struct mcp_step st;

	if (mcp_line(&srv, line, len, &st) < 0)
		fatal(EX_OSERR_, "%s", strerror(errno));
	if (st.reply)
		send_msg(st.reply);
	if (st.cancel) {
		cancel(st.cancel);
		cJSON_Delete(st.cancel);
	}
	if (st.call) {
		if (ncalls >= CALLS_MAX) {
			char *msg = msgf("cardbaton-mcp: %s: %d calls are running already; "
					 "try again once one has ended", st.call->tool->name, CALLS_MAX);

			send_msg(msg ? tool_error(st.call->id, EX_TEMPFAIL_, msg) : NULL);
			free(msg);
			call_free(st.call);
		} else {
			run_call(st.call);
		}
	}
}

/* Standard input into messages: a line at a time, at most MSG_MAX
 * bytes each (a longer one is answered and skipped to its newline).
 * 0 at its end. */
static int read_input(void)
{
	static struct sbuf line;
	static int skipping;
	char buf[65536];
	ssize_t n = read(0, buf, sizeof buf);
	const char *p = buf, *end, *nl;

	if (n < 0) {
		if (errno == EINTR || errno == EAGAIN)
			return 1;
		fatal(EX_IOERR_, "standard input: %s", strerror(errno));
	}
	if (n == 0) {
		/* A last message without its newline still counts. */
		if (line.len && !skipping)
			message(line.s, line.len);
		sbuf_free(&line);
		return 0;
	}
	end = buf + n;
	while (p < end) {
		size_t k;

		nl = memchr(p, '\n', (size_t)(end - p));
		k = (size_t)((nl ? nl : end) - p);
		if (!skipping) {
			if (line.len + k > MSG_MAX) {
				char *msg = msgf("message longer than %u bytes (16 MiB): skipped", MSG_MAX);

				send_msg(msg ? rpc_error(NULL, RPC_INVALID, msg) : NULL);
				free(msg);
				sbuf_free(&line);
				skipping = 1;
			} else if (sbuf_add(&line, p, k) < 0) {
				fatal(EX_OSERR_, "%s", strerror(ENOMEM));
			}
		}
		if (!nl)
			break;
		if (!skipping && line.len)
			message(line.s, line.len);
		line.len = 0;
		skipping = 0;
		p = nl + 1;
	}
	return 1;
}

/* Reap every child that has ended. */
static void reap(void)
{
	int ws;
	pid_t pid;

	while ((pid = waitpid(-1, &ws, WNOHANG)) > 0)
		for (struct mcp_call *c = calls; c; c = c->next)
			if (c->pid == pid && !c->reaped) {
				c->reaped = 1;
				c->wstatus = ws;
				c->reaped_at = mono_ms();
			}
	if (pid < 0 && errno != ECHILD && errno != EINTR)
		fatal(EX_OSERR_, "waitpid: %s", strerror(errno));
}

int main(int argc, char **argv)
{
	struct pollfd *pfd = NULL;
	size_t npfd = 0;
	sigset_t set;
	int sigfd, in_open = 1;

	prog_init(argc, argv);
	while (tool_getopt(argc, argv, "", longopts, 0, usage) != -1)
		;
	if (optind < argc)
		usage_error(usage, "unexpected operand '%s'", argv[optind]);
	srv.config = opt_config;

	/* Descriptors 0-2 exist (a pipe must never become one), children
	 * read /dev/null, SIGCHLD and the ends of us come through a
	 * signalfd, a client gone is EPIPE. */
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
			die_sys(EX_OSERR_, "/dev/null");
	if ((devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
		die_sys(EX_OSERR_, "/dev/null");
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &set, &oldmask) < 0)
		die_sys(EX_OSERR_, "sigprocmask");
	if ((sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK)) < 0)
		die_sys(EX_OSERR_, "signalfd");
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		die_sys(EX_OSERR_, "signal");
	tool_dir = exe_dir();

	for (;;) {
		long long now = mono_ms();
		int timeout = -1;
		size_t n = 0;
		struct mcp_call *c, *next;

		/* The calls that are over; a child that ended while another
		 * holds its pipes gets REAP_GRACE_MS. */
		for (c = calls; c; c = next) {
			next = c->next;
			if (c->reaped && (c->out >= 0 || c->err >= 0)) {
				long long left = c->reaped_at + REAP_GRACE_MS - now;

				if (left > 0) {
					timeout = timeout < 0 || left < timeout ? (int)left : timeout;
					continue;
				}
				for (int *fd = &c->out; fd; fd = fd == &c->out ? &c->err : NULL)
					if (*fd >= 0) {
						close(*fd);
						*fd = -1;
					}
			}
			if (c->reaped)
				finish(c);
		}
		if (!in_open && !calls) {
			free(pfd);
			return 0;
		}
		if (npfd < 2 + 2 * ncalls) {
			npfd = 2 + 2 * ncalls;
			if (!(pfd = realloc(pfd, npfd * sizeof *pfd)))
				fatal(EX_OSERR_, "%s", strerror(ENOMEM));
		}
		pfd[n++] = (struct pollfd){ .fd = sigfd, .events = POLLIN };
		pfd[n++] = (struct pollfd){ .fd = in_open ? 0 : -1, .events = POLLIN };
		for (c = calls; c; c = c->next) {
			pfd[n++] = (struct pollfd){ .fd = c->out, .events = POLLIN };
			pfd[n++] = (struct pollfd){ .fd = c->err, .events = POLLIN };
		}
		if (poll(pfd, n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			fatal(EX_OSERR_, "poll: %s", strerror(errno));
		}
		if (pfd[0].revents) {
			struct signalfd_siginfo si;
			ssize_t r;

			while ((r = read(sigfd, &si, sizeof si)) == (ssize_t)sizeof si) {
				if (si.ssi_signo != SIGCHLD) {
					/* Stopped: the children first, then as the
					 * signal would have. */
					stop_all();
					signal((int)si.ssi_signo, SIG_DFL);
					sigprocmask(SIG_SETMASK, &oldmask, NULL);
					raise((int)si.ssi_signo);
					return 128 + (int)si.ssi_signo;
				}
			}
			if (r < 0 && errno != EAGAIN && errno != EINTR)
				fatal(EX_OSERR_, "signalfd: %s", strerror(errno));
			reap();
		}
		/* The pipes before standard input: a call whose answer has
		 * come is not cancelled by a later message. */
		n = 2;
		for (c = calls; c; c = c->next) {
			if (pfd[n].fd >= 0 && pfd[n].revents)
				drain(c, &c->out);
			n++;
			if (pfd[n].fd >= 0 && pfd[n].revents)
				drain(c, &c->err);
			n++;
		}
		if (pfd[1].revents && !read_input())
			in_open = 0;
	}
}

#endif
