/*
 * fuzz_mcp.c - cardbaton-mcp's message handling (bin/mcp.c): any line a
 * client may send, through mcp_line (the JSON-RPC request to a reply, a
 * tool call to run, or a cancellation), and for a call, its end through
 * mcp_done with the same bytes as the tool's output.  bin/mcp.c is
 * included whole with CB_MCP_PURE, which leaves out its loop (no
 * process is run).
 *
 * Properties:
 *  - every reply is one line (no newline byte: the stdio framing), a
 *    JSON object with "jsonrpc": "2.0", an "id", and exactly one of
 *    "result" and "error" (an error with an integer code and a string
 *    message); a line cJSON cannot parse is -32700;
 *  - a message gives at most one of a reply and a call, and a
 *    well-formed notification (no id) neither;
 *  - a call's argv is "cardbaton-TOOL", its flags, then "--" and only
 *    then operands, NULL-terminated, every word without a NUL;
 *  - its end is a reply of the same shape, or (the action succeeded)
 *    the status --json query of its jobs;
 *  - utf8_clean's output is valid UTF-8: cleaning it again changes
 *    nothing.
 */
#define CB_MCP_PURE
#include "../../bin/mcp.c"

#include "fuzz.h"

static void check_reply(const char *s)
{
	cJSON *o, *e, *code, *msg;

	FUZZ_CHECK(s && !strchr(s, '\n'));
	o = cJSON_Parse(s);
	FUZZ_CHECK(cJSON_IsObject(o));
	FUZZ_CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "jsonrpc")));
	FUZZ_CHECK(cJSON_GetObjectItemCaseSensitive(o, "id") != NULL);
	e = cJSON_GetObjectItemCaseSensitive(o, "error");
	FUZZ_CHECK(!e != !cJSON_GetObjectItemCaseSensitive(o, "result"));
	if (e) {
		code = cJSON_GetObjectItemCaseSensitive(e, "code");
		msg = cJSON_GetObjectItemCaseSensitive(e, "message");
		FUZZ_CHECK(cJSON_IsNumber(code) && code->valuedouble <= -32600 && cJSON_IsString(msg));
	}
	cJSON_Delete(o);
}

static void check_argv(const struct mcp_call *c)
{
	size_t i, dashes = 0;

	FUZZ_CHECK(c->argv && c->argv[0] && !strncmp(c->argv[0], "cardbaton-", 10));
	for (i = 1; c->argv[i]; i++)
		if (!strcmp(c->argv[i], "--") && !dashes)
			dashes = i;
	FUZZ_CHECK(dashes > 0);
	/* Before the "--": flags, each but a value after one begins "--". */
	for (i = 1; i < dashes; i++) {
		FUZZ_CHECK(!strncmp(c->argv[i], "--", 2));
		if (!strcmp(c->argv[i], "--json") || !strcmp(c->argv[i], "--all") ||
		    !strcmp(c->argv[i], "--share") || !strcmp(c->argv[i], "--hold") ||
		    !strcmp(c->argv[i], "--follow"))
			continue;
		i++;    /* its value, whatever it is */
	}
	FUZZ_CHECK(i == dashes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mcp m = { .config = size & 1 ? "cfg.yaml" : NULL };
	struct mcp_step st;
	cJSON *parsed;
	const char *end = NULL;
	char *clean, *again;
	static const int statuses[] = { 0, 1 << 8, 66 << 8, 9 /* SIGKILL */ };

	/* utf8_clean is idempotent, so its output is clean. */
	clean = utf8_clean((const char *)data, size);
	if (clean) {
		again = utf8_clean(clean, strlen(clean));
		FUZZ_CHECK(!again || !strcmp(clean, again));
		free(again);
		free(clean);
	}

	if (mcp_line(&m, (const char *)data, size, &st) < 0)
		return 0;       /* out of memory: nothing to check */
	FUZZ_CHECK(!(st.reply && st.call));
	if (st.reply)
		check_reply(st.reply);
	/* One JSON value and blanks, as cJSON reads it. */
	parsed = cJSON_ParseWithLengthOpts((const char *)data, size, &end, 0);
	for (; parsed && end < (const char *)data + size && *end && strchr(" \t\r\n", *end); end++)
		;
	if (parsed && end != (const char *)data + size) {
		cJSON_Delete(parsed);
		parsed = NULL;
	}
	if (!parsed) {
		size_t i;

		for (i = 0; i < size && strchr(" \t\r\n", data[i]) && data[i]; i++)
			;
		FUZZ_CHECK(i == size || (st.reply && strstr(st.reply, "-32700")));
	} else if (cJSON_IsObject(parsed) && !cJSON_GetObjectItemCaseSensitive(parsed, "id") &&
		   cJSON_IsString(cJSON_GetObjectItemCaseSensitive(parsed, "method")) &&
		   cJSON_IsString(cJSON_GetObjectItemCaseSensitive(parsed, "jsonrpc")) &&
		   !strcmp(cJSON_GetObjectItemCaseSensitive(parsed, "jsonrpc")->valuestring, "2.0") &&
		   (!cJSON_GetObjectItemCaseSensitive(parsed, "params") ||
		    cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(parsed, "params")) ||
		    cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(parsed, "params")))) {
		FUZZ_CHECK(!st.reply && !st.call);
	}
	cJSON_Delete(parsed);
	if (st.cancel)
		FUZZ_CHECK(same_id(st.cancel, st.cancel));
	cJSON_Delete(st.cancel);
	free(st.reply);

	if (st.call) {
		struct mcp_call *c = st.call;
		char *reply = NULL;
		int r;

		check_argv(c);
		FUZZ_CHECK(c->id && id_ok(c->id));
		r = mcp_done(&m, c, statuses[size % 4], (const char *)data, size, size & 2, "err\n", 4, &reply);
		if (r == 1) {
			FUZZ_CHECK(!reply && !strcmp(c->argv[0], "cardbaton-status") && c->stage == 1);
			check_argv(c);
			r = mcp_done(&m, c, 0, (const char *)data, size, 0, "", 0, &reply);
			FUZZ_CHECK(r != 1);
		}
		if (r == 0)
			check_reply(reply);
		free(reply);
		call_free(c);
	}
	return 0;
}
