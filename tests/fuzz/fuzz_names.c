/*
 * fuzz_names.c - the file-name grammar (spool-layout/names.c, LAYOUT.md
 * section 2), the ctl/ request names and a node request's content
 * (ctl.c) and parse_ll (util.c).
 *
 * Properties: what a parser accepts is exactly the canonical form its
 * writer makes (name_queued, name_plain, attempt_id), so one job or
 * attempt never has two names; a file name that parses can never
 * leave its directory; values are in their documented ranges;
 * name_classify_new agrees with name_parse_queued and the block
 * grammar, and a block's IDs are all IDs; parse_ll and jobid_parse
 * agree with strtoll.
 */
#include <errno.h>
#include <limits.h>

#include "spool.h"
#include "yamlx.h"
#include "fuzz.h"

static int safe_name(const char *s)
{
	return *s && *s != '.' && !strchr(s, '/');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_cstr(data, size), *w, sid[9];
	long long prio, seq, id, v, lo, hi, count;
	enum ctl_op op;
	int n, r, all_digits;
	size_t len;

	if (!s)
		return 0;
	len = strlen(s);

	if (name_parse_queued(s, &prio, &seq) == 0) {
		FUZZ_CHECK(prio >= PRIO_MIN && prio <= PRIO_MAX && seq >= 1 && seq <= SEQ_MAX);
		FUZZ_CHECK(safe_name(s));
		w = name_queued(prio, seq);
		FUZZ_CHECK(w && !strcmp(w, s));
		free(w);
	}
	if (name_parse_plain(s, &seq) == 0) {
		FUZZ_CHECK(seq >= 1 && seq <= SEQ_MAX);
		FUZZ_CHECK(safe_name(s));
		w = name_plain(seq);
		FUZZ_CHECK(w && !strcmp(w, s));
		free(w);
	}
	if (name_parse_block(s, &seq, &count) == 0) {
		FUZZ_CHECK(seq >= 1 && count >= 1 && count <= BLOCK_MAX && seq + count - 1 <= SEQ_MAX);
		FUZZ_CHECK(safe_name(s));
		w = name_block(seq, count);
		FUZZ_CHECK(w && !strcmp(w, s));
		free(w);
	}
	r = name_classify_new(s, &prio, &seq, &count);
	if (s[0] == '.' || len < 4 || strcmp(s + len - 4, ".job")) {
		FUZZ_CHECK(r == -1);
	} else if (r == 2) {
		w = name_block_queued(prio, seq, count);
		FUZZ_CHECK(w && !strcmp(w, s));
		free(w);
	} else {
		FUZZ_CHECK(r == (name_parse_queued(s, &prio, &seq) == 0 ? 1 : 0));
		FUZZ_CHECK(r == 0 || count == 1);
	}

	if (jobid_parse(s, &id) == 0) {
		FUZZ_CHECK(id >= 1 && id <= SEQ_MAX);
		FUZZ_CHECK(strspn(s, "0123456789") == len);
		FUZZ_CHECK(strtoll(s, NULL, 10) == id);
	} else {
		/* Refused: not all digits, too long, or out of range. */
		all_digits = len > 0 && strspn(s, "0123456789") == len;
		if (all_digits && len <= 32) {
			errno = 0;
			v = strtoll(s, NULL, 10);
			FUZZ_CHECK(errno == ERANGE || v < 1 || v > SEQ_MAX);
		}
	}

	if (attempt_id_parse(s, sid, &id, &n) == 0) {
		FUZZ_CHECK(strlen(sid) == 8 && strspn(sid, "0123456789abcdef") == 8);
		FUZZ_CHECK(id >= 1 && id <= SEQ_MAX && n >= 0);
		FUZZ_CHECK(strspn(s, "0123456789abcdef-") == len);
		w = attempt_id(sid, id, n);
		FUZZ_CHECK(w && !strcmp(w, s));
		free(w);
		FUZZ_CHECK(attempt_job(sid, s) == id);
	}

	if (ctl_parse_name(s, &id, &op) == 0) {
		FUZZ_CHECK(id >= 0 && id <= SEQ_MAX && (unsigned)op < CTL_N);
		FUZZ_CHECK((id == 0) == CTL_NODE_OP(op));   /* a node's request: ID 0 */
		FUZZ_CHECK(s[0] >= '0' && s[0] <= '9');
	}
	/* A node request's content (the bytes as given, NULs and all): a
	 * node's name as one of its lines says it, of the config's grammar. */
	{
		char *node = NULL, *line;
		int ck = -1;

		if (ctl_parse_drain((const char *)data, size, &node, &ck) == 0) {
			FUZZ_CHECK(node && !yx_node_name_problem(node) && (ck == 0 || ck == 1));
			line = xasprintf("node %s", node);
			FUZZ_CHECK(line && memmem(data, size, line, strlen(line)));
			free(line);
		}
		free(node);
	}

	/* parse_ll against strtoll, over a range from the input's length. */
	lo = (long long)(len % 7) - 3;
	hi = len % 2 ? LLONG_MAX : 1000;
	if (parse_ll(s, lo, hi, &v) == 0) {
		char *end;

		FUZZ_CHECK(v >= lo && v <= hi);
		errno = 0;
		FUZZ_CHECK(strtoll(s, &end, 10) == v && !errno && !*end);
		FUZZ_CHECK(s[0] == '-' || (s[0] >= '0' && s[0] <= '9'));
	}
	free(s);
	return 0;
}
