/*
 * test_jobfile.c - job files (SPEC §4): fields, errors, JSON forms.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spool.h"
#include "t.h"

static struct cb_err e;
static char msg[1024];

/* Parse TEXT (LEN bytes, or strlen when LEN is 0) as "job.yaml". */
static int parse_n(const char *text, size_t len, struct job_def *jd)
{
	cb_err_free(&e);
	e.ex = 0;
	return jobdef_parse(text, len ? len : strlen(text), "job.yaml", jd, &e);
}

static int parse(const char *text, struct job_def *jd)
{
	return parse_n(text, 0, jd);
}

/* The message a bad job file gets ("" when it parsed, which fails the
 * CHECK_STR it is used in).  Also checks the exit code and that the
 * job_def was left zeroed. */
static const char *bad_n(const char *text, size_t len)
{
	struct job_def jd;
	static const struct job_def zero;

	if (parse_n(text, len, &jd) == 0) {
		jobdef_free(&jd);
		return "(parsed)";
	}
	CHECK(e.ex == EX_DATAERR_);
	CHECK(memcmp(&jd, &zero, sizeof jd) == 0);
	snprintf(msg, sizeof msg, "%s", e.msg ? e.msg : "(no message)");
	return msg;
}

static const char *bad(const char *text)
{
	return bad_n(text, 0);
}

static int strv_eq(char **a, size_t na, char **b, size_t nb)
{
	if (na != nb || (!a) != (!b))
		return 0;
	for (size_t i = 0; i < na; i++)
		if (strcmp(a[i], b[i]))
			return 0;
	return 1;
}

static int opt_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

static int jd_eq(const struct job_def *a, const struct job_def *b)
{
	return a->set == b->set && strv_eq(a->argv, a->argc, b->argv, b->argc) &&
	       opt_eq(a->shell, b->shell) && opt_eq(a->cwd, b->cwd) &&
	       opt_eq(a->node, b->node) && opt_eq(a->name, b->name) &&
	       opt_eq(a->resume_command, b->resume_command) &&
	       strv_eq(a->resume_argv, a->resume_argc, b->resume_argv, b->resume_argc) &&
	       a->ngpus == b->ngpus &&
	       (!a->ngpus || !memcmp(a->gpus, b->gpus, a->ngpus * sizeof *a->gpus)) &&
	       a->gpu_count == b->gpu_count && a->priority == b->priority &&
	       a->timeout_seconds == b->timeout_seconds &&
	       a->checkpoint_grace_seconds == b->checkpoint_grace_seconds &&
	       strv_eq(a->env, a->nenv, b->env, b->nenv) && a->hold == b->hold &&
	       a->begin == b->begin && a->nafter == b->nafter && a->nafter_any == b->nafter_any &&
	       (!a->nafter || !memcmp(a->after, b->after, a->nafter * sizeof *a->after)) &&
	       (!a->nafter_any ||
		!memcmp(a->after_any, b->after_any, a->nafter_any * sizeof *a->after_any));
}

static const char full_yaml[] =
	"# every field\n"
	"name: \"train r\xc3\xa9sum\xc3\xa9\"\n"
	"command: [python3, train.py, --lr, \"0.1\", 10, true, '']\n"
	"cwd: ~/work\n"
	"node: lab-a\n"
	"gpus: [0, 2]\n"
	"gpu_count: 2\n"
	"priority: -5\n"
	"timeout_seconds: 3600\n"
	"resume_command: python3 train.py --resume\n"
	"checkpoint_grace_seconds: 120\n"
	"env:\n"
	"  FOO: bar\n"
	"  N: 10\n"
	"  B: false\n"
	"  _EMPTY: \"\"\n"
	"  PATHS: a=b:c\n";

static void test_full(void)
{
	struct job_def jd;

	CHECK(parse(full_yaml, &jd) == 0);
	CHECK(jd.set == (JF_COMMAND | JF_CWD | JF_NODE | JF_GPUS | JF_GPU_COUNT | JF_PRIORITY |
			 JF_TIMEOUT | JF_RESUME | JF_GRACE | JF_ENV | JF_NAME));
	CHECK_STR(jd.name, "train r\xc3\xa9sum\xc3\xa9");
	CHECK(jd.argc == 7 && jd.shell == NULL);
	if (jd.argc == 7) {
		CHECK_STR(jd.argv[0], "python3");
		CHECK_STR(jd.argv[2], "--lr");
		CHECK_STR(jd.argv[3], "0.1");
		CHECK_STR(jd.argv[4], "10");
		CHECK_STR(jd.argv[5], "true");
		CHECK_STR(jd.argv[6], "");
	}
	CHECK_STR(jd.cwd, "~/work");
	CHECK_STR(jd.node, "lab-a");
	CHECK(jd.ngpus == 2 && jd.gpus[0] == 0 && jd.gpus[1] == 2);
	CHECK(jd.gpu_count == 2);
	CHECK(jd.priority == -5);
	CHECK(jd.timeout_seconds == 3600);
	CHECK_STR(jd.resume_command, "python3 train.py --resume");
	CHECK(jd.checkpoint_grace_seconds == 120);
	CHECK(jd.nenv == 5);
	if (jd.nenv == 5) {
		CHECK_STR(jd.env[0], "FOO=bar");
		CHECK_STR(jd.env[1], "N=10");
		CHECK_STR(jd.env[2], "B=false");
		CHECK_STR(jd.env[3], "_EMPTY=");
		CHECK_STR(jd.env[4], "PATHS=a=b:c");
	}
	CHECK(jobdef_gpu_need(&jd) == 2);
	jobdef_free(&jd);
	CHECK(jd.argv == NULL && jd.set == 0 && jd.env == NULL);
}

static void test_commands(void)
{
	struct job_def jd;

	CHECK(parse("command:\n  - sh\n  - -c\n  - 'echo \"hi\"; exit 3'\n", &jd) == 0);
	CHECK(jd.argc == 3 && !jd.shell);
	if (jd.argc == 3)
		CHECK_STR(jd.argv[2], "echo \"hi\"; exit 3");
	/* Defaults of fields not given. */
	CHECK(jd.set == JF_COMMAND);
	CHECK(jd.gpu_count == 1 && jd.priority == 0 && jd.timeout_seconds == 0);
	CHECK(jd.checkpoint_grace_seconds == DEFAULT_GRACE);
	CHECK(jobdef_gpu_need(&jd) == 1);
	jobdef_free(&jd);

	CHECK(parse("command: make -j8 && ./run | tee out\n", &jd) == 0);
	CHECK(jd.argv == NULL && jd.argc == 0);
	CHECK_STR(jd.shell, "make -j8 && ./run | tee out");
	jobdef_free(&jd);

	CHECK(parse("command: |\n  for i in 1 2; do\n    echo $i\n  done\n", &jd) == 0);
	CHECK_STR(jd.shell, "for i in 1 2; do\n  echo $i\ndone\n");
	jobdef_free(&jd);

	/* A UTF-8 byte order mark is fine; CRLF lines too. */
	CHECK(parse("\xef\xbb\xbf" "command: [a]\r\ngpu_count: 0\r\n", &jd) == 0);
	CHECK(jd.gpu_count == 0 && jobdef_gpu_need(&jd) == 0);
	jobdef_free(&jd);
	CHECK(parse("\xef\xbb\xbf" "{\"command\": [\"a\"], \"gpu_count\": 0}", &jd) == 0);
	CHECK(jd.gpu_count == 0 && jobdef_gpu_need(&jd) == 0);
	jobdef_free(&jd);
	CHECK_STR(bad("command: [a]\r\n\r\nfoo: 1\r\n"), "job.yaml:3: foo: unknown field");
	CHECK_STR(bad("\xef\xbb\xbf" "command: [a]\nfoo: 1\n"), "job.yaml:2: foo: unknown field");
	CHECK_STR(bad("command: [a]\rfoo: 1\r"), "job.yaml:2: foo: unknown field");
}

static void test_json(void)
{
	struct job_def jd;
	/* As cJSON writes it (\uXXXX for control characters, UTF-8 kept),
	 * unformatted (no space after ':'), plus escapes other writers
	 * use: \/ and a surrogate pair. */
	const char *j =
		"{\"command\":[\"echo\",\"tab\\there\",\"caf\xc3\xa9 \\u00e9\\u4e2d\","
		"\"q\\\"uote\\\\ \\/\",\"\\u0001x\",\"\\ud83d\\ude00\"],"
		"\"env\":{\"A\":\"line\\nbreak\",\"B\":\"\"},\"gpu_count\":0,"
		"\"priority\":7,\"name\":\"\\u00e9t\\u00e9 \\uD83D\\uDE00\"}";

	CHECK(parse(j, &jd) == 0);
	CHECK(jd.argc == 6);
	if (jd.argc == 6) {
		CHECK_STR(jd.argv[1], "tab\there");
		CHECK_STR(jd.argv[2], "caf\xc3\xa9 \xc3\xa9\xe4\xb8\xad");
		CHECK_STR(jd.argv[3], "q\"uote\\ /");
		CHECK_STR(jd.argv[4], "\x01x");
		CHECK_STR(jd.argv[5], "\xf0\x9f\x98\x80");
	}
	CHECK(jd.nenv == 2);
	if (jd.nenv == 2) {
		CHECK_STR(jd.env[0], "A=line\nbreak");
		CHECK_STR(jd.env[1], "B=");
	}
	CHECK(jd.gpu_count == 0 && jd.priority == 7);
	CHECK_STR(jd.name, "\xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80");
	jobdef_free(&jd);

	/* Raw characters JSON allows in strings and YAML does not (DEL, C1,
	 * U+FFFE/FFFF) or reads as line breaks (NEL, U+2028/9), as cJSON
	 * writes them for `submit` (found by tests/fuzz/fuzz_jobfile). */
	CHECK(parse("{\"command\": [\"a\x7f" "b\xc2\x80\xc2\x85\xc2\x9f \xe2\x80\xa8\xe2\x80\xa9"
		    "\xef\xbf\xbe\xef\xbf\xbf\"], \"cwd\": \"\x7f\"}", &jd) == 0);
	CHECK(jd.argc == 1);
	if (jd.argc == 1)
		CHECK_STR(jd.argv[0], "a\x7f" "b\xc2\x80\xc2\x85\xc2\x9f \xe2\x80\xa8\xe2\x80\xa9"
			  "\xef\xbf\xbe\xef\xbf\xbf");
	CHECK_STR(jd.cwd, "\x7f");
	jobdef_free(&jd);

	/* Pretty JSON; errors get JSON lines right too. */
	CHECK(parse("{\n  \"command\": \"true\",\n  \"gpus\": [3]\n}\n", &jd) == 0);
	CHECK_STR(jd.shell, "true");
	CHECK(jd.ngpus == 1 && jd.gpus[0] == 3 && jobdef_gpu_need(&jd) == 1);
	jobdef_free(&jd);
	CHECK_STR(bad("{\n  \"command\": \"true\",\n  \"gpus\": [1.5]\n}\n"),
		  "job.yaml:3: gpus[0]: must be an integer");
	CHECK_STR(bad("{\n  \"command\": \"true\",\n  \"priority\": \"5\"\n}\n"),
		  "job.yaml:3: priority: must be an integer");
	/* A backslash sequence that only looks like a pair in YAML stays. */
	CHECK(parse("command: ['\\ud83d\\ude00']\n", &jd) == 0);
	CHECK(jd.argc == 1);
	if (jd.argc == 1)
		CHECK_STR(jd.argv[0], "\\ud83d\\ude00");
	jobdef_free(&jd);
	/* An escaped backslash before "u..." is no escape. */
	CHECK(parse("{\"command\": [\"\\\\ud83d\\\\ude00\", \"\\\\\\ud83d\\ude00\"]}", &jd) == 0);
	CHECK(jd.argc == 2);
	if (jd.argc == 2) {
		CHECK_STR(jd.argv[0], "\\ud83d\\ude00");
		CHECK_STR(jd.argv[1], "\\\xf0\x9f\x98\x80");
	}
	jobdef_free(&jd);
	/* A lone surrogate is still refused (libyaml's message). */
	CHECK(strstr(bad("{\"command\": [\"\\ud83d\"]}"), "job.yaml:1: ") == msg);
}

/* "HEAD: [a0,a1,...]": a list of 4096 words is taken, one of 4097
 * refused with the message WANT. */
static void word_limit(const char *head, const char *want)
{
	for (int n = 4096; n <= 4097; n++) {
		struct sbuf b = { 0 };
		struct job_def jd;

		sbuf_addf(&b, "%s: [", head);
		for (int i = 0; i < n; i++)
			sbuf_addf(&b, "%sa%d", i ? "," : "", i);
		sbuf_addf(&b, "]\n");
		if (n == 4096) {
			CHECK(parse(b.s, &jd) == 0 && (jd.argc == 4096 || jd.resume_argc == 4096));
			jobdef_free(&jd);
		} else {
			CHECK_STR(bad(b.s), want);
		}
		sbuf_free(&b);
	}
}

static void test_errors(void)
{
	char *big;
	size_t n;

	/* Syntax errors: libyaml's problem, with its line. */
	CHECK_STR(bad("command: [a, b\nname: x\n"),
		  "job.yaml:2: did not find expected ',' or ']' (while parsing a flow sequence on line 1)");
	CHECK(strncmp(bad("command: [a]\nname: x\n  cwd: y\n"), "job.yaml:3: ", 12) == 0);
	CHECK(strncmp(bad("command: [a]\nname: x\n\n- y\n"), "job.yaml:4: ", 12) == 0);
	CHECK(strncmp(bad("command: \"abc\n"), "job.yaml:2: ", 12) == 0);

	CHECK_STR(bad("command: [a]\nfoo: 1\n"), "job.yaml:2: foo: unknown field");
	CHECK_STR(bad("command: [a]\ngpu_count: two\n"), "job.yaml:2: gpu_count: must be an integer");
	CHECK_STR(bad("command: [a]\ngpu_count: -1\n"),
		  "job.yaml:2: gpu_count: must be between 0 and 1024");
	CHECK_STR(bad("command: [a]\ngpu_count: 1025\n"),
		  "job.yaml:2: gpu_count: must be between 0 and 1024");
	CHECK_STR(bad("command: [a]\ngpus: [0, 1, 1]\n"), "job.yaml:2: gpus[2]: 1 is listed twice");
	CHECK_STR(bad("command: [a]\ngpus:\n  - 0\n  - 1024\n"),
		  "job.yaml:4: gpus[1]: must be between 0 and 1023");
	CHECK_STR(bad("command: [a]\ngpus: []\n"), "job.yaml:2: gpus: must not be empty");
	CHECK_STR(bad("command: [a]\ngpus: 1\n"), "job.yaml:2: gpus: must be a list");
	CHECK_STR(bad("command: [a]\npriority: 100000000\n"),
		  "job.yaml:2: priority: must be between -99999999 and 99999999");
	CHECK_STR(bad("command: [a]\npriority: -100000000\n"),
		  "job.yaml:2: priority: must be between -99999999 and 99999999");
	CHECK_STR(bad("command: [a]\npriority: 99999999999999999999999\n"),
		  "job.yaml:2: priority: must be between -99999999 and 99999999");
	CHECK_STR(bad("command: [a]\ntimeout_seconds: 1e3\n"),
		  "job.yaml:2: timeout_seconds: must be an integer");
	CHECK_STR(bad("command: [a]\ntimeout_seconds: 0x10\n"),
		  "job.yaml:2: timeout_seconds: must be an integer");
	CHECK_STR(bad("command: [a]\ntimeout_seconds: 1.0\n"),
		  "job.yaml:2: timeout_seconds: must be an integer");
	CHECK_STR(bad("command: [a]\ntimeout_seconds: true\n"),
		  "job.yaml:2: timeout_seconds: must be an integer");
	CHECK_STR(bad("command: [a]\ntimeout_seconds: \"60\"\n"),
		  "job.yaml:2: timeout_seconds: must be an integer");
	CHECK_STR(bad("command: [a]\ntimeout_seconds: +60\n"),
		  "job.yaml:2: timeout_seconds: must be an integer");
	CHECK_STR(bad("command: [a]\ntimeout_seconds: 010\n"),
		  "job.yaml:2: timeout_seconds: must be an integer without leading zeros");
	CHECK_STR(bad("command: [a]\ntimeout_seconds: \n"),
		  "job.yaml:2: timeout_seconds: must be an integer");
	CHECK_STR(bad("command: [a]\ncheckpoint_grace_seconds: -1\n"),
		  "job.yaml:2: checkpoint_grace_seconds: must be between 0 and 315360000");
	CHECK_STR(bad("command: [a]\ncommand: [b]\n"), "job.yaml:2: command: duplicate key");
	CHECK_STR(bad("command: [a]\nenv: {A: 1, B: 2, A: 3}\n"), "job.yaml:2: env.A: duplicate key");

	/* Empty files and documents. */
	CHECK_STR(bad(""), "job.yaml: empty job file");
	CHECK_STR(bad("# nothing here\n\n"), "job.yaml: empty job file");
	CHECK_STR(bad("---\n"), "job.yaml: empty job file");
	CHECK_STR(bad("--- ~\n...\n"), "job.yaml: empty job file");
	CHECK_STR(bad("- a\n- b\n"), "job.yaml:1: top level must be a mapping");
	CHECK_STR(bad("hello\n"), "job.yaml:1: top level must be a mapping");

	/* Bytes that are not text. */
	CHECK_STR(bad("command: [\xff\xfe]\n"),
		  "job.yaml: not valid UTF-8: invalid leading UTF-8 octet (byte 0xff at offset 10)");
	CHECK(strncmp(bad("command: [caf\xc3]\n"), "job.yaml: not valid UTF-8: ", 27) == 0);
	/* The byte named is the input's, not libyaml's problem value. */
	CHECK_STR(bad("command: [\xc0\xaf]\n"),
		  "job.yaml: not valid UTF-8: invalid length of a UTF-8 sequence (byte 0xc0 at offset 10)");
	CHECK_STR(bad("command: [\xed\xa0\x80]\n"),
		  "job.yaml: not valid UTF-8: invalid Unicode character U+D800 (byte 0xed at offset 10)");
	CHECK(strncmp(bad("\xff\xd8\xff\xe0" "JFIF"), "job.yaml: not valid UTF-8: ", 27) == 0);
	CHECK_STR(bad("\x7f" "ELF\x02\x01\x01"),
		  "job.yaml: control characters are not allowed (U+007F at offset 0)");
	CHECK_STR(bad("\xff\xfe" "c\x04o\x04"), "job.yaml: not valid UTF-8: UTF-16 byte order mark");
	CHECK_STR(bad("command: [a\x01]\n"),
		  "job.yaml: control characters are not allowed (U+0001 at offset 11)");
	CHECK_STR(bad_n("command: [a]\n\0\n", 15), "job.yaml: contains a NUL byte (offset 13)");
	/* Real UTF-16 (NULs and all) is named by its byte order mark. */
	CHECK_STR(bad_n("\xff\xfe" "c\0o\0", 6), "job.yaml: not valid UTF-8: UTF-16 byte order mark");
	CHECK_STR(bad("command: [\"a\\0b\"]\n"), "job.yaml:1: command[0]: must not contain a NUL character");
	CHECK_STR(bad("{\"command\": [\"a\\u0000b\"]}"),
		  "job.yaml:1: command[0]: must not contain a NUL character");

	/* Anchors, aliases, tags, several documents, nesting. */
	CHECK_STR(bad("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
		      "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
		      "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
		      "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
		      "command: [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"),
		  "job.yaml:1: anchors and aliases are not allowed");
	CHECK_STR(bad("command: [a]\nname: &n x\n"), "job.yaml:2: anchors and aliases are not allowed");
	CHECK_STR(bad("command: [a]\nname: *n\n"), "job.yaml:2: anchors and aliases are not allowed");
	CHECK_STR(bad("command: [a]\npriority: !!int 5\n"), "job.yaml:2: tags are not allowed");
	CHECK_STR(bad("!job\ncommand: [a]\n"), "job.yaml:1: tags are not allowed");
	CHECK_STR(bad("command: [a]\n---\ncommand: [b]\n"), "job.yaml:2: more than one document");
	CHECK_STR(bad("command: [a]\n---\n"), "job.yaml:2: more than one document");
	/* 16 levels (the top mapping and 15 lists) are allowed... */
	CHECK_STR(bad("command: [[[[[[[[[[[[[[[]]]]]]]]]]]]]]]\n"),
		  "job.yaml:1: command[0]: must be a string");
	/* ...17 are not. */
	CHECK_STR(bad("command: [[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]\n"),
		  "job.yaml:1: nesting deeper than 16 levels");
	n = 100000;
	big = malloc(n * 2 + 32);
	strcpy(big, "command: ");
	memset(big + 9, '[', n);
	strcpy(big + 9 + n, "\n");
	CHECK_STR(bad(big), "job.yaml:1: nesting deeper than 16 levels");

	/* Sizes. */
	n = 65536;
	strcpy(big, "command: [");
	memset(big + 10, 'x', n);
	strcpy(big + 10 + n, "]\n");
	{
		struct job_def jd;

		CHECK(parse(big, &jd) == 0 && jd.argc == 1 && strlen(jd.argv[0]) == n);
		jobdef_free(&jd);
	}
	strcpy(big, "command: [");
	memset(big + 10, 'x', n + 1);
	strcpy(big + 11 + n, "]\n");
	CHECK_STR(bad(big), "job.yaml:1: value longer than 65536 bytes");
	free(big);
	{
		struct sbuf b = { 0 };

		word_limit("command", "job.yaml:1: command: more than 4096 items");

		sbuf_addf(&b, "command: [a]\nenv:\n");
		for (int i = 0; i < 4097; i++)
			sbuf_addf(&b, "  V%d: x\n", i);
		CHECK_STR(bad(b.s), "job.yaml:3: env: more than 4096 entries");
		sbuf_free(&b);
	}
	big = malloc(JOBFILE_MAX + 2);
	memset(big, ' ', JOBFILE_MAX + 1);
	big[JOBFILE_MAX + 1] = '\0';
	CHECK_STR(bad(big), "job.yaml: larger than 1048576 bytes");
	free(big);

	/* Field rules. */
	CHECK_STR(bad("command: []\n"), "job.yaml:1: command: must not be empty");
	CHECK_STR(bad("command: ''\n"), "job.yaml:1: command: must not be empty");
	CHECK_STR(bad("command:\n"), "job.yaml:1: command: must be a list of strings or a string");
	CHECK_STR(bad("command: {a: b}\n"), "job.yaml:1: command: must be a list of strings or a string");
	CHECK_STR(bad("command: [a, b, c, ~]\n"), "job.yaml:1: command[3]: must be a string");
	CHECK_STR(bad("command:\n  - a\n  - [b]\n"), "job.yaml:3: command[1]: must be a string");
	CHECK_STR(bad("command: ['', b]\n"), "job.yaml:1: command[0]: must not be empty");
	CHECK_STR(bad("command: [a]\ncwd: null\n"), "job.yaml:2: cwd: must be a string");
	CHECK_STR(bad("command: [a]\ncwd: ''\n"), "job.yaml:2: cwd: must not be empty");
	CHECK_STR(bad("command: [a]\nnode: lab a\n"),
		  "job.yaml:2: node: must be a node name (1 to 64 of A-Z a-z 0-9 . _ -)");
	CHECK_STR(bad("command: [a]\nnode: -oProxyCommand=x\n"),
		  "job.yaml:2: node: must be a node name (1 to 64 of A-Z a-z 0-9 . _ -)");
	CHECK_STR(bad("command: [a]\nnode: -lab\n"), "job.yaml:2: node: must not begin with '-'");
	CHECK_STR(bad("command: [a]\nname: \"a\\tb\"\n"), "job.yaml:2: name: must not contain control characters");
	CHECK_STR(bad("command: [a]\nname: \"a\\x85b\"\n"), "job.yaml:2: name: must not contain control characters");
	{
		char nm[300 + 40];
		struct job_def jd;

		strcpy(nm, "command: [a]\nname: ");
		memset(nm + 19, 'n', 256);
		strcpy(nm + 19 + 256, "\n");
		CHECK(parse(nm, &jd) == 0 && strlen(jd.name) == 256);
		jobdef_free(&jd);
		strcpy(nm + 19 + 256, "n\n");
		CHECK_STR(bad(nm), "job.yaml:2: name: longer than 256 bytes");
	}
	CHECK_STR(bad("command: [a]\nenv:\n  OK: 1\n  1BAD: x\n"), "job.yaml:4: env.1BAD: not a valid variable name");
	CHECK_STR(bad("command: [a]\nenv:\n  A-B: x\n"), "job.yaml:3: env.A-B: not a valid variable name");
	CHECK_STR(bad("command: [a]\nenv:\n  A: [x]\n"), "job.yaml:3: env.A: must be a string");
	CHECK_STR(bad("command: [a]\nenv:\n  A:\n"), "job.yaml:3: env.A: must be a string");
	CHECK_STR(bad("command: [a]\nenv: [A=1]\n"), "job.yaml:2: env: must be a mapping");
	CHECK_STR(bad("command: [a]\nenv: {[x]: 1}\n"), "job.yaml:2: env: keys must be strings");
	CHECK_STR(bad("command: [a]\n\"a\\nb\": 1\n"), "job.yaml:2: a?b: unknown field");

	/* Whole-job checks. */
	/* A file of defaults parses; queuing it needs a command. */
	{
		struct job_def jd;
		struct cb_err ce = { 0 };

		CHECK(parse("name: x\n", &jd) == 0);
		CHECK(jobdef_check(&jd, "job.yaml", &ce) == -1);
		CHECK_STR(ce.msg, "job.yaml: command: missing");
		cb_err_free(&ce);
		jobdef_free(&jd);
	}
	CHECK_STR(bad("command: [a]\ngpus: [0, 1]\ngpu_count: 1\n"),
		  "job.yaml: gpu_count: must equal the number of gpus (2)");
	{
		struct job_def jd;

		CHECK(parse("command: [a]\ngpus: [4, 5]\ngpu_count: 2\n", &jd) == 0);
		CHECK(jobdef_gpu_need(&jd) == 2);
		jobdef_free(&jd);
	}
}

/* resume_command: a list (exact argv) or a string (sh -c), with the
 * rules of command. */
static void test_resume_command(void)
{
	static const char *const refused[][2] = {
		{ "[]", "job.yaml:2: resume_command: must not be empty" },
		{ "''", "job.yaml:2: resume_command: must not be empty" },
		{ "", "job.yaml:2: resume_command: must be a list of strings or a string" },
		{ "{a: b}", "job.yaml:2: resume_command: must be a list of strings or a string" },
		{ "['', b]", "job.yaml:2: resume_command[0]: must not be empty" },
		{ "[a, ~]", "job.yaml:2: resume_command[1]: must be a string" },
		{ "\n  - a\n  - [b]", "job.yaml:4: resume_command[1]: must be a string" },
		{ "\n  - a\n  - {b: c}", "job.yaml:4: resume_command[1]: must be a string" },
		{ "[\"a\\0b\"]", "job.yaml:2: resume_command[0]: must not contain a NUL character" },
		{ "[a]\nresume_command: b", "job.yaml:3: resume_command: duplicate key" },
	};
	struct job_def jd;
	char *doc;

	CHECK(parse("command: [a]\nresume_command: [python3, train.py, --resume, \"a b\", '$X', \"it's\"]\n",
		    &jd) == 0);
	CHECK(jd.set == (JF_COMMAND | JF_RESUME));
	CHECK(strv_eq(jd.resume_argv, jd.resume_argc,
		      (char *[]){ "python3", "train.py", "--resume", "a b", "$X", "it's" }, 6));
	/* resume_command is set (the job is resumable): the list shown. */
	CHECK_STR(jd.resume_command, "python3 train.py --resume 'a b' '$X' 'it'\\''s'");
	jobdef_free(&jd);
	CHECK(jd.resume_argv == NULL && jd.resume_command == NULL);
	/* Scalars in the list are their text, as in command; JSON too. */
	CHECK(parse("command: [a]\nresume_command:\n  - r\n  - 10\n  - true\n  - ''\n", &jd) == 0);
	CHECK(strv_eq(jd.resume_argv, jd.resume_argc, (char *[]){ "r", "10", "true", "" }, 4));
	jobdef_free(&jd);
	CHECK(parse("{\"command\": \"a\", \"resume_command\": [\"r\", \"--from\", \"x y\"]}", &jd) == 0);
	CHECK(jd.resume_argc == 3 && jd.argv == NULL);
	CHECK_STR(jd.resume_command, "r --from 'x y'");
	jobdef_free(&jd);
	/* A string is still run by sh -c, and has no list. */
	CHECK(parse("command: [a]\nresume_command: r --resume\n", &jd) == 0);
	CHECK(jd.resume_argv == NULL && jd.resume_argc == 0);
	CHECK_STR(jd.resume_command, "r --resume");
	jobdef_free(&jd);

	/* The rules of command. */
	for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
		doc = xasprintf("command: [a]\nresume_command: %s\n", refused[i][0]);
		CHECK(doc != NULL);
		CHECK_STR(bad(doc), refused[i][1]);
		free(doc);
	}
	/* At most 4096 words, as command. */
	word_limit("command: [a]\nresume_command", "job.yaml:2: resume_command: more than 4096 items");

	/* Merging: a list over a string, a string (--resume-command) over a list. */
	{
		struct job_def dst, src;

		CHECK(parse("command: [a]\nresume_command: old string\n", &dst) == 0);
		CHECK(parse("resume_command: [new, list]\n", &src) == 0);
		CHECK(jobdef_merge(&dst, &src) == 0);
		jobdef_free(&src);
		CHECK(dst.resume_argc == 2 && dst.resume_argv && !strcmp(dst.resume_argv[1], "list"));
		CHECK_STR(dst.resume_command, "new list");
		CHECK(parse("resume_command: a string again\n", &src) == 0);
		CHECK(jobdef_merge(&dst, &src) == 0);
		jobdef_free(&src);
		CHECK(dst.resume_argv == NULL && dst.resume_argc == 0);
		CHECK_STR(dst.resume_command, "a string again");
		CHECK(dst.argc == 1);
		jobdef_free(&dst);
	}
}

/* A job record (record.c) keeps a list resume_command through a write
 * and a read; an older record with a string one still loads. */
static void test_record_resume(void)
{
	static const char head[] =
		"{\"id\": \"7\", \"rev\": 3, \"state\": \"paused\", \"reason\": \"checkpoint saved\", "
		"\"priority\": 0, \"checkpoint\": \"/ck/1\", \"checkpoint_node\": \"local\", "
		"\"job\": {\"command\": [\"train\"], \"resume_command\": ";
	static const char *const forms[] = {
		"[\"train\", \"--from\", \"a b $X\"]", "\"train --resume\"",
	};

	for (size_t i = 0; i < sizeof forms / sizeof *forms; i++) {
		struct job j, k;
		struct cb_err ce = { 0 };
		char *rec = xasprintf("%s%s}, \"attempts\": []}\n", head, forms[i]), *t1 = NULL, *t2 = NULL;

		CHECK(rec && job_from_json(rec, strlen(rec), &j, &ce) == 0);
		CHECK(ce.msg == NULL);
		if (i == 0) {
			CHECK(j.def.resume_argc == 3 && j.def.resume_argv &&
			      !strcmp(j.def.resume_argv[2], "a b $X"));
			CHECK_STR(j.def.resume_command, "train --from 'a b $X'");
		} else {
			CHECK(j.def.resume_argv == NULL);
			CHECK_STR(j.def.resume_command, "train --resume");
		}
		CHECK((t1 = job_to_json(&j)) != NULL);
		CHECK(t1 && strstr(t1, i == 0 ? "\"resume_command\":\t[\"train\", \"--from\", \"a b $X\"]" :
					   "\"resume_command\":\t\"train --resume\"") != NULL);
		CHECK(t1 && job_from_json(t1, strlen(t1), &k, &ce) == 0);
		CHECK(jd_eq(&j.def, &k.def));
		CHECK((t2 = job_to_json(&k)) != NULL);
		CHECK_STR(t2, t1);
		free(rec);
		free(t1);
		free(t2);
		job_free(&j);
		job_free(&k);
		cb_err_free(&ce);
	}
}

static void test_check(void)
{
	char *argv[] = { "x" }, *env[] = { "GOOD=1", "1A=b" };
	struct job_def jd = { 0 };

	CHECK(jobdef_check(&jd, "f", &e) == -1);
	CHECK_STR(e.msg, "f: command: missing");
	CHECK(e.ex == EX_DATAERR_);
	jd.set = JF_COMMAND | JF_ENV;
	jd.argv = argv;
	jd.argc = 1;
	jd.env = env;
	jd.nenv = 1;
	CHECK(jobdef_check(&jd, "f", &e) == 0);
	jd.nenv = 2;
	CHECK(jobdef_check(&jd, "f", &e) == -1);
	CHECK_STR(e.msg, "f: env.1A: not a valid variable name");
	jd.nenv = 0;
	jd.set |= JF_GPUS | JF_GPU_COUNT;
	jd.gpus = (int[]){ 1 };
	jd.ngpus = 1;
	jd.gpu_count = 1;
	CHECK(jobdef_check(&jd, "f", &e) == 0);
	jd.gpu_count = 0;
	CHECK(jobdef_check(&jd, "f", &e) == -1);
	CHECK_STR(e.msg, "f: gpu_count: must equal the number of gpus (1)");

	/* jobdef_gpu_need. */
	jd = (struct job_def){ 0 };
	CHECK(jobdef_gpu_need(&jd) == 1);
	jd.set = JF_GPU_COUNT;
	jd.gpu_count = 4;
	CHECK(jobdef_gpu_need(&jd) == 4);
	jd.gpu_count = 0;
	CHECK(jobdef_gpu_need(&jd) == 0);
	jd.set = JF_GPUS | JF_GPU_COUNT;
	jd.gpus = (int[]){ 1, 2, 3 };
	jd.ngpus = 3;
	CHECK(jobdef_gpu_need(&jd) == 3);
}

static void test_round_trip(void)
{
	static const char *const docs[] = {
		full_yaml,
		"command: 'echo \"$HOME\" | tr a-z A-Z'\ngpu_count: 0\n",
		"command: [\"\\u0001\\u001f\\t\\n\", \"\\\\\", \"\\\"\", \"\xe2\x82\xac\", \"\xf0\x9f\x98\x80\"]\n"
		"name: \"\xe4\xb8\xad\\\\\"\nenv: {X: \"\\r\\n\", Y: '\\u00e9'}\n",
		"command: [a]\npriority: -99999999\ntimeout_seconds: 315360000\n"
		"checkpoint_grace_seconds: 0\ngpus: [1023, 0]\n",
		"command: [a]\nresume_command: [r, \"x y\", '$Z', \"\\t\", \"\xc3\xa9\"]\n",
		"command: [a]\nhold: true\nbegin: 2026-12-01T18:00:00+01:30\n"
		"after: [3, 1, 9999999999]\nafter_any: [2]\n",
		"command: [a]\nhold: false\nbegin: \"1970-01-01T00:00:01.5Z\"\n",
	};

	for (size_t i = 0; i < sizeof docs / sizeof *docs; i++) {
		struct job_def a, b, c;
		cJSON *o, *o2;
		char *text, *flat;

		CHECK(parse(docs[i], &a) == 0);
		o = jobdef_to_json(&a);
		CHECK(o != NULL);
		text = cJSON_Print(o);
		flat = cJSON_PrintUnformatted(o);
		CHECK(text && flat);
		/* text -> jobdef_parse */
		CHECK(parse(text, &b) == 0);
		CHECK(jd_eq(&a, &b));
		jobdef_free(&b);
		CHECK(parse(flat, &b) == 0);
		CHECK(jd_eq(&a, &b));
		/* jobdef_from_json(jobdef_to_json(x)) */
		CHECK(jobdef_from_json(o, &c) == 0);
		CHECK(jd_eq(&a, &c));
		o2 = jobdef_to_json(&c);
		{
			char *t2 = cJSON_Print(o2);

			CHECK_STR(t2, text);
			free(t2);
		}
		cJSON_Delete(o2);
		free(text);
		free(flat);
		cJSON_Delete(o);
		jobdef_free(&a);
		jobdef_free(&b);
		jobdef_free(&c);
	}

	/* What the JSON looks like: only the fields given, job.yaml names. */
	{
		struct job_def a;
		cJSON *o;
		char *t;

		CHECK(parse("command: [a, b]\nenv: {K: v}\npriority: 3\n", &a) == 0);
		o = jobdef_to_json(&a);
		t = cJSON_PrintUnformatted(o);
		CHECK_STR(t, "{\"command\":[\"a\",\"b\"],\"priority\":3,\"env\":{\"K\":\"v\"}}");
		free(t);
		cJSON_Delete(o);
		jobdef_free(&a);
		CHECK(parse("command: x y\n", &a) == 0);
		o = jobdef_to_json(&a);
		t = cJSON_PrintUnformatted(o);
		CHECK_STR(t, "{\"command\":\"x y\"}");
		free(t);
		cJSON_Delete(o);
		jobdef_free(&a);
	}
}

static int from(const char *json)
{
	struct job_def jd, zero = { 0 };
	cJSON *o = cJSON_Parse(json);
	int r;

	errno = 0;
	r = jobdef_from_json(o, &jd);
	if (r < 0) {
		CHECK(errno == EINVAL);
		CHECK(memcmp(&jd, &zero, sizeof jd) == 0);
	}
	jobdef_free(&jd);
	cJSON_Delete(o);
	return r;
}

static void test_from_json(void)
{
	struct job_def jd;

	CHECK(from("{}") == 0);
	CHECK(from("{\"command\":[\"a\"],\"gpus\":[0,1],\"env\":{\"A\":\"1\"}}") == 0);
	CHECK(from("[]") == -1);
	CHECK(from("\"x\"") == -1);
	CHECK(from("{\"command\":[\"a\"],\"bogus\":1}") == -1);
	CHECK(from("{\"command\":[\"a\"],\"command\":[\"b\"]}") == -1);
	CHECK(from("{\"priority\":1.5}") == -1);
	CHECK(from("{\"priority\":\"1\"}") == -1);
	CHECK(from("{\"priority\":1e300}") == -1);
	CHECK(from("{\"priority\":100000000}") == -1);
	CHECK(from("{\"priority\":-99999999}") == 0);
	CHECK(from("{\"gpu_count\":-1}") == -1);
	CHECK(from("{\"gpus\":[]}") == -1);
	CHECK(from("{\"gpus\":[1,1]}") == -1);
	CHECK(from("{\"gpus\":[\"1\"]}") == -1);
	CHECK(from("{\"gpus\":[1024]}") == -1);
	CHECK(from("{\"gpus\":3}") == -1);
	CHECK(from("{\"env\":[]}") == -1);
	CHECK(from("{\"env\":{\"1A\":\"x\"}}") == -1);
	CHECK(from("{\"env\":{\"A\":1}}") == -1);
	CHECK(from("{\"env\":{\"A\":\"x\",\"B\":\"y\",\"A\":\"z\"}}") == -1);
	CHECK(from("{\"name\":null}") == -1);
	CHECK(from("{\"node\":\"a b\"}") == -1);
	CHECK(from("{\"cwd\":true}") == -1);
	/* command and resume_command: the same rules (an old record's
	 * resume_command is a string). */
	for (size_t k = 0; k < 2; k++) {
		static const char *const keys[] = { "command", "resume_command" };
		static const char *const refused[] = {
			"5", "[]", "[\"\"]", "\"\"", "[\"a\",1]", "[\"a\",null]", "[[\"a\"]]", "{\"a\":1}", "null",
		};
		char *j;

		for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
			CHECK((j = xasprintf("{\"%s\":%s}", keys[k], refused[i])) != NULL);
			CHECK(from(j) == -1);
			free(j);
		}
		CHECK((j = xasprintf("{\"%s\":\"r\"}", keys[k])) && from(j) == 0);
		free(j);
		CHECK((j = xasprintf("{\"%s\":[\"r\",\"\"]}", keys[k])) && from(j) == 0);
		free(j);
	}
	errno = 0;
	CHECK(jobdef_from_json(NULL, &jd) == -1 && errno == EINVAL);
	jobdef_free(&jd);
}

static void test_merge(void)
{
	struct job_def dst, src;

	CHECK(parse("command: [a, b]\npriority: 1\nname: base\nenv: {A: '1'}\ngpus: [0]\n", &dst) == 0);
	CHECK(parse("command: echo over\npriority: 9\nenv: {B: '2', C: '3'}\n"
		    "timeout_seconds: 60\ngpus: [2, 3]\ncwd: /tmp\n", &src) == 0);
	CHECK(jobdef_merge(&dst, &src) == 0);
	CHECK(dst.argv == NULL && dst.argc == 0);
	CHECK_STR(dst.shell, "echo over");
	CHECK(dst.priority == 9 && dst.timeout_seconds == 60);
	CHECK_STR(dst.name, "base");
	CHECK_STR(dst.cwd, "/tmp");
	CHECK(dst.nenv == 2);
	if (dst.nenv == 2) {
		CHECK_STR(dst.env[0], "B=2");
		CHECK_STR(dst.env[1], "C=3");
	}
	CHECK(dst.ngpus == 2 && dst.gpus[0] == 2 && dst.gpus[1] == 3);
	CHECK(dst.set == (JF_COMMAND | JF_PRIORITY | JF_NAME | JF_ENV | JF_GPUS | JF_TIMEOUT | JF_CWD));
	/* Deep copies: SRC can go. */
	jobdef_free(&src);
	CHECK_STR(dst.shell, "echo over");
	CHECK_STR(dst.cwd, "/tmp");

	/* A list command replaces a string one; unset fields are kept. */
	CHECK(parse("command: [x, y, z]\n", &src) == 0);
	CHECK(jobdef_merge(&dst, &src) == 0);
	CHECK(dst.shell == NULL && dst.argc == 3);
	if (dst.argc == 3)
		CHECK_STR(dst.argv[2], "z");
	CHECK(dst.priority == 9);
	jobdef_free(&src);

	/* Merging into an empty job_def makes a copy. */
	{
		struct job_def cp = { .gpu_count = 1, .checkpoint_grace_seconds = DEFAULT_GRACE };

		CHECK(jobdef_merge(&cp, &dst) == 0);
		CHECK(jd_eq(&cp, &dst));
		jobdef_free(&cp);
	}
	jobdef_free(&dst);
}

/* hold, begin, after, after_any: values, and what is refused. */
static void test_workflow_fields(void)
{
	struct job_def jd;

	CHECK(parse("command: [a]\nhold: true\nbegin: 2026-12-01t17:00:00.999z\n"
		    "after: [4, 2]\nafter_any: [3]\n", &jd) == 0);
	CHECK(jd.set == (JF_COMMAND | JF_HOLD | JF_BEGIN | JF_AFTER | JF_AFTER_ANY));
	CHECK(jd.hold == 1 && jd.begin == 1796144400999LL);
	CHECK(jd.nafter == 2 && jd.after[0] == 4 && jd.after[1] == 2);
	CHECK(jd.nafter_any == 1 && jd.after_any[0] == 3);
	jobdef_free(&jd);
	/* A leap second is over where the next minute begins. */
	CHECK(parse("command: [a]\nbegin: 2024-02-29 23:59:60-00:30\n", &jd) == 0);
	CHECK(jd.begin == 1709253000000LL);
	jobdef_free(&jd);
	CHECK_STR(bad("command: [a]\nhold: yes\n"), "job.yaml:2: hold: must be true or false");
	CHECK_STR(bad("command: [a]\nbegin: tomorrow\n"),
		  "job.yaml:2: begin: not an RFC 3339 time (like 2026-12-01T18:00:00Z)");
	for (const char *const *t = (const char *const[]){
		     "+3s", "2026-12-01T18:00:00", "2026-02-29T00:00:00Z", "2026-12-01T24:00:00Z",
		     "1969-12-31T23:59:59Z", "2026-12-01T18:00:00+24:00", "2026-12-01T18:00:00Zx",
		     "2026-12-01T18:00:00.Z", "2026-1-01T18:00:00Z", "", NULL }; *t; t++) {
		long long ms;

		CHECK(rfc3339_parse(*t, &ms) == -1);
	}
	/* --since's WHEN: a time, a date, an age before now. */
	{
		long long ms, now = 1796144400000LL;

		CHECK(when_parse("2026-12-01T17:00:00Z", now, &ms) == 0 && ms == now);
		CHECK(when_parse("2026-12-01", now, &ms) == 0 && ms == now - 17 * 3600000LL);
		CHECK(when_parse("90m", now, &ms) == 0 && ms == now - 90 * 60000LL);
		CHECK(when_parse("2h", now, &ms) == 0 && ms == now - 2 * 3600000LL);
		CHECK(when_parse("7d", now, &ms) == 0 && ms == now - 7 * 86400000LL);
		CHECK(when_parse("1w", now, &ms) == 0 && ms == now - 604800000LL);
		CHECK(when_parse("30s", now, &ms) == 0 && ms == now - 30000);
		for (const char *const *t = (const char *const[]){
			     "", "d", "0d", "-1d", "1.5h", "7 d", "7D", "1y", "1234567890d",
			     "2026-13-01", "2026-02-30", "2026/12/01", "yesterday", NULL }; *t; t++)
			CHECK(when_parse(*t, now, &ms) == -1);
	}
	CHECK_STR(bad("command: [a]\nafter: []\n"), "job.yaml:2: after: must list at least one job ID");
	CHECK_STR(bad("command: [a]\nafter: [1, 1]\n"), "job.yaml:2: after[1]: 1 is listed twice");
	CHECK_STR(bad("command: [a]\nafter: [0]\n"),
		  "job.yaml:2: after[0]: must be between 1 and 9999999999");
	CHECK_STR(bad("command: [a]\nafter_any: 3\n"), "job.yaml:2: after_any: must be a list");
	CHECK_STR(bad("command: [a]\nafter_any: [x]\n"),
		  "job.yaml:2: after_any[0]: must be an integer");
}

/* begin to the ms (issue 32): a fraction is kept, a finer one rounded
 * up, a zone's offset applied; the text written back (job file, record)
 * says the same ms, and the record keeps it through a read and a write. */
static void test_begin_ms(void)
{
	static const struct { const char *s; long long ms; } ok[] = {
		{ "2026-12-01T17:00:00Z", 1796144400000LL },
		{ "2026-12-01T17:00:00.5Z", 1796144400500LL },
		{ "2026-12-01T17:00:00.050Z", 1796144400050LL },
		{ "2026-12-01T17:00:00.999z", 1796144400999LL },
		{ "2026-12-01T17:00:00.000Z", 1796144400000LL },
		{ "2026-12-01T17:00:00.1230Z", 1796144400123LL },
		{ "2026-12-01T17:00:00.1231Z", 1796144400124LL },      /* finer: up */
		{ "2026-12-01T17:00:00.000000001Z", 1796144400001LL },
		{ "2026-12-01T17:00:00.9995Z", 1796144401000LL },      /* up into the next second */
		{ "2026-12-01T18:30:00.25+01:30", 1796144400250LL },
		{ "2026-12-01T16:59:59.75-00:00", 1796144399750LL },
		{ "2026-12-01T16:00:00.001-01:00", 1796144400001LL },
		{ "2026-12-01T16:59:60.5Z", 1796144400000LL },         /* leap second: its end */
		{ "9999-12-31T23:59:59.999Z", TIME_MS_MAX },
		{ "9999-12-31T23:59:59.9989Z", TIME_MS_MAX },
		{ "1970-01-01T01:00:00.001+01:00", 1 },
	};
	static const char *const no[] = {
		"2026-12-01T17:00:00.1234567890Z",      /* more than 9 digits */
		"2026-12-01T17:00:00.Z", "2026-12-01T17:00:00.5", "2026-12-01T17:00:00,5Z",
		"2026-12-01T17:00:00.5.5Z", "2026-12-01T17:00:00.-5Z", "2026-12-01T17:00:00.5 Z",
		"9999-12-31T23:59:59.9991Z",            /* rounds up past 9999 */
		"9999-12-31T23:59:60Z", "9999-12-31T23:30:00-00:30", "1970-01-01T00:59:59.999+01:00",
		"2026-12-01T17:00:00+24:00", "2026-12-01T17:00:00+01:60", "2026-12-01T17:00:00+0100",
		"2026-12-01T17:00:00+01", "2026-12-01T17:00:00 +01:00", "2026-12-01T17:00:00EST",
		"2026-12-01T17:00:00UTC", "2026-12-01T17:00:00+1:00",
	};
	long long ms;

	for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
		CHECK(rfc3339_parse(ok[i].s, &ms) == 0 && ms == ok[i].ms);
		if (ms != ok[i].ms)
			fprintf(stderr, "  %s: %lld, not %lld\n", ok[i].s, ms, ok[i].ms);
	}
	for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
		char *doc = xasprintf("command: [a]\nbegin: '%s'\n", no[i]);

		CHECK(rfc3339_parse(no[i], &ms) == -1);
		CHECK_STR(bad(doc), "job.yaml:2: begin: not an RFC 3339 time (like 2026-12-01T18:00:00Z)");
		free(doc);
	}
	/* The text, to the ms when not a whole second; read back exactly. */
	{
		static const long long v[] = { 1796144400000LL, 1796144400250LL, 1796144400001LL,
					       1796144400999LL, 1, TIME_MS_MAX };
		char *t;

		CHECK_STR(t = rfc3339_ms(1796144400250LL), "2026-12-01T17:00:00.250Z");
		free(t);
		CHECK_STR(t = rfc3339_ms(1796144400001LL), "2026-12-01T17:00:00.001Z");
		free(t);
		CHECK_STR(t = rfc3339_ms(1796144400000LL), "2026-12-01T17:00:00Z");
		free(t);
		CHECK_STR(t = rfc3339_ms(TIME_MS_MAX), "9999-12-31T23:59:59.999Z");
		free(t);
		for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
			t = rfc3339_ms(v[i]);
			CHECK(t && rfc3339_parse(t, &ms) == 0 && ms == v[i]);
			free(t);
		}
	}
	/* A job file's begin, as the record holds it: to the ms, at the
	 * top ("begin", "begin_ms") and in "job"; read back, written
	 * again, the same; the reason and status --json say the same ms. */
	{
		static const char rec[] =
			"{\"id\": \"7\", \"rev\": 1, \"state\": \"queued\", \"reason\": null, "
			"\"priority\": 0, \"submitted_ms\": 1796144390000, "
			"\"job\": {\"command\": [\"a\"], \"begin\": \"2026-12-01T18:30:00.25+01:30\"}, "
			"\"attempts\": []}\n";
		struct job j, k;
		struct cb_err ce = { 0 };
		char *t1 = NULL, *t2 = NULL, *r, *st;
		cJSON *o;

		CHECK(job_from_json(rec, strlen(rec), &j, &ce) == 0);
		CHECK(j.def.begin == 1796144400250LL);
		CHECK((t1 = job_to_json(&j)) != NULL);
		CHECK(t1 && strstr(t1, "\"begin\":\t\"2026-12-01T17:00:00.250Z\",\n\t\"begin_ms\":\t"
				   "1796144400250,") != NULL);
		CHECK(t1 && strstr(t1, "\t\t\"begin\":\t\"2026-12-01T17:00:00.250Z\"") != NULL);
		CHECK(t1 && job_from_json(t1, strlen(t1), &k, &ce) == 0);
		CHECK(k.def.begin == 1796144400250LL);
		CHECK((t2 = job_to_json(&k)) != NULL);
		CHECK_STR(t2, t1);
		CHECK_STR(r = queued_reason(&k, 1796144400249LL), "begins at 2026-12-01T17:00:00.250Z");
		free(r);
		CHECK_STR(r = queued_reason(&k, 1796144400250LL), "waiting to be scheduled");
		free(r);
		o = job_status_json(&k);
		st = o ? cJSON_PrintUnformatted(o) : NULL;
		CHECK(st && strstr(st, ",\"begin\":\"2026-12-01T17:00:00.250Z\",") != NULL);
		CHECK(st && !strstr(st, "begin_ms"));
		cJSON_free(st);
		cJSON_Delete(o);
		/* No begin: null, in the record and in status --json. */
		k.def.begin = 0;
		o = job_status_json(&k);
		st = o ? cJSON_PrintUnformatted(o) : NULL;
		CHECK(st && strstr(st, ",\"begin\":null,") != NULL);
		cJSON_free(st);
		cJSON_Delete(o);
		free(t2);
		CHECK((t2 = job_to_json(&k)) != NULL);
		CHECK(t2 && strstr(t2, "\"begin\":\tnull,\n\t\"begin_ms\":\tnull,") != NULL);
		free(t1);
		free(t2);
		job_free(&j);
		job_free(&k);
		cb_err_free(&ce);
	}
}

int main(void)
{
	test_full();
	test_commands();
	test_json();
	test_errors();
	test_resume_command();
	test_record_resume();
	test_check();
	test_round_trip();
	test_from_json();
	test_merge();
	test_workflow_fields();
	test_begin_ms();
	cb_err_free(&e);
	return T_DONE();
}
