/*
 * test_ckjson.c - the checkpoint marker reader (worker/json.c, SPEC
 * section 9): what counts as {"checkpoint": "/path"} and what does not.
 * The worker's file is included whole: the unit tests link against the
 * library only.
 */
#include <stdlib.h>
#include <string.h>

#include "t.h"
#include "../../worker/json.c"

static enum ck_status parse_n(const char *buf, size_t len, char **path, char **why)
{
	size_t plen = 0;
	enum ck_status st = ck_marker_parse(buf, len, path, &plen, why);

	if (st == CK_OK && *path && strlen(*path) != plen)
		return CK_NOMEM;        /* a length that lies: fail the CHECK */
	return st;
}

/* Valid: the decoded path is WANT. */
static void ok(const char *json, const char *want)
{
	char *path = NULL, *why = NULL;
	enum ck_status st = parse_n(json, strlen(json), &path, &why);

	CHECK(st == CK_OK);
	if (st != CK_OK)
		fprintf(stderr, "  input: %s -> %d %s\n", json, (int)st, why ? why : "");
	CHECK_STR(path, want);
	CHECK(why == NULL);
	free(path);
	free(why);
}

/* Refused with status WANT (and, for CK_INVALID, a why that contains
 * WHY_PART when that is given). */
static void bad_n(const char *json, size_t len, enum ck_status want, const char *why_part)
{
	char *path = NULL, *why = NULL;
	enum ck_status st = parse_n(json, len, &path, &why);

	CHECK(st == want);
	CHECK(path == NULL);
	if (st != want)
		fprintf(stderr, "  input: %.*s -> %d (wanted %d) %s\n", (int)len, json, (int)st,
			(int)want, why ? why : "");
	if (want == CK_INVALID) {
		CHECK(why != NULL);
		if (why_part) {
			CHECK(why && strstr(why, why_part) != NULL);
			if (why && !strstr(why, why_part))
				fprintf(stderr, "  why: %s (wanted %s)\n", why, why_part);
		}
	} else {
		CHECK(why == NULL);
	}
	free(path);
	free(why);
}

static void bad(const char *json, enum ck_status want, const char *why_part)
{
	bad_n(json, strlen(json), want, why_part);
}

int main(void)
{
	/* The contract's own example, and whitespace around it. */
	ok("{\"checkpoint\": \"/path/to/saved/state\"}", "/path/to/saved/state");
	ok(" \t\r\n{\"checkpoint\":\"/x\"} \n\t\r ", "/x");
	ok("{\"checkpoint\": \"relative/ok\"}\n", "relative/ok");
	/* Other keys, of every type, are allowed and ignored. */
	ok("{\"step\": 1200, \"loss\": -0.5e-3, \"tags\": [\"a\", {\"b\": [true, false, null]}],"
	   " \"checkpoint\": \"/ck/1200\", \"more\": {}, \"x\": [], \"n\": 0, \"e\": 1E+2}", "/ck/1200");
	/* Escapes. */
	ok("{\"checkpoint\": \"/a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"}", "/a\"b\\c/d\b\f\n\r\t");
	ok("{\"checkpoint\": \"/caf\\u00e9\"}", "/caf\xc3\xa9");
	ok("{\"checkpoint\": \"/\\u20AC\"}", "/\xe2\x82\xac");
	ok("{\"checkpoint\": \"/\\ud83d\\ude00\"}", "/\xf0\x9f\x98\x80");      /* surrogate pair */
	ok("{\"checkpoint\": \"/\\uDBFF\\uDFFF\"}", "/\xf4\x8f\xbf\xbf");      /* U+10FFFF */
	ok("{\"checkpoint\": \"\\u0041\"}", "A");
	/* Raw UTF-8, and the key itself escaped. */
	ok("{\"checkpoint\": \"/gr\xc3\xbc\xc3\x9f""e \xe2\x9c\x93 \xf0\x9f\x98\x80\"}",
	   "/gr\xc3\xbc\xc3\x9f""e \xe2\x9c\x93 \xf0\x9f\x98\x80");
	ok("{\"\\u0063heckpoint\": \"/k\"}", "/k");
	ok("{\"checkpoint\": \"/\x7f\"}", "/\x7f");                          /* DEL is allowed */
	/* A checkpoint key nested deeper does not count, nor near-miss keys. */
	bad("{\"a\": {\"checkpoint\": \"/x\"}}", CK_NO_PATH, NULL);
	bad("{\"Checkpoint\": \"/x\"}", CK_NO_PATH, NULL);
	bad("{\"checkpoint \": \"/x\"}", CK_NO_PATH, NULL);
	bad("{\"checkpoin\": \"/x\"}", CK_NO_PATH, NULL);
	bad("{\"checkpoint\\u0000\": \"/x\"}", CK_NO_PATH, NULL);

	/* Not an object. */
	bad("[\"/x\"]", CK_NOT_OBJECT, NULL);
	bad("\"/x\"", CK_NOT_OBJECT, NULL);
	bad("42", CK_NOT_OBJECT, NULL);
	bad("null", CK_NOT_OBJECT, NULL);
	bad("true", CK_NOT_OBJECT, NULL);

	/* No non-empty string. */
	bad("{}", CK_NO_PATH, NULL);
	bad("{\"checkpoint\": \"\"}", CK_NO_PATH, NULL);
	bad("{\"checkpoint\": null}", CK_NO_PATH, NULL);
	bad("{\"checkpoint\": 5}", CK_NO_PATH, NULL);
	bad("{\"checkpoint\": [\"/x\"]}", CK_NO_PATH, NULL);
	bad("{\"checkpoint\": {\"path\": \"/x\"}}", CK_NO_PATH, NULL);
	bad("{\"checkpoint\": true}", CK_NO_PATH, NULL);
	bad("{\"path\": \"/x\"}", CK_NO_PATH, NULL);
	/* Twice is ambiguous; a NUL cannot be in a path. */
	bad("{\"checkpoint\": \"/x\", \"checkpoint\": \"/y\"}", CK_DUP, NULL);
	bad("{\"checkpoint\": \"/x\", \"checkpoint\": null}", CK_DUP, NULL);
	bad("{\"checkpoint\": \"/x\\u0000y\"}", CK_NUL, NULL);

	/* Not JSON. */
	bad("", CK_INVALID, "empty input");
	bad("   \n", CK_INVALID, "empty input");
	bad("{", CK_INVALID, "unexpected end of input");
	bad("{\"checkpoint\": \"/x\"", CK_INVALID, "unexpected end of input");
	bad("{\"checkpoint\": \"/x}", CK_INVALID, "unterminated string at offset 15");
	bad("{\"checkpoint\" \"/x\"}", CK_INVALID, "expected ':'");
	bad("{\"checkpoint\": \"/x\",}", CK_INVALID, "expected a string key");
	bad("{\"checkpoint\": \"/x\" \"y\": 1}", CK_INVALID, "expected ',' or '}'");
	bad("{checkpoint: \"/x\"}", CK_INVALID, "unexpected character 'c'");
	bad("{'checkpoint': '/x'}", CK_INVALID, "unexpected byte 0x27");
	bad("{\"checkpoint\": \"/x\"} x", CK_INVALID, "trailing characters after the JSON value at offset 21");
	bad("{\"checkpoint\": \"/x\"}{}", CK_INVALID, "trailing characters");
	bad_n("{\"checkpoint\": \"/x\"}\n\0", 22, CK_INVALID, "trailing characters");
	bad_n("{\"checkpoint\": \"/\0x\"}", 20, CK_INVALID, "control character 0x00");
	bad("{\"checkpoint\": \"/a\tb\"}", CK_INVALID, "control character 0x09 in a string at offset 18");
	bad("{\"checkpoint\": \"/a\nb\"}", CK_INVALID, "control character 0x0a");
	bad("{\"checkpoint\": \"/a\\qb\"}", CK_INVALID, "invalid escape \\q at offset 18");
	bad("{\"checkpoint\": \"/a\\x41\"}", CK_INVALID, "invalid escape \\x");
	bad("{\"checkpoint\": \"/a\\u12\"}", CK_INVALID, "invalid \\u escape");
	bad("{\"checkpoint\": \"/a\\u12G4\"}", CK_INVALID, "invalid \\u escape");
	bad("{\"checkpoint\": \"/\\ud83d\"}", CK_INVALID, "unpaired surrogate \\uD83D");
	bad("{\"checkpoint\": \"/\\ud83dx\"}", CK_INVALID, "unpaired surrogate");
	bad("{\"checkpoint\": \"/\\ud83d\\u0041\"}", CK_INVALID, "unpaired surrogate");
	bad("{\"checkpoint\": \"/\\ude00\"}", CK_INVALID, "unpaired surrogate \\uDE00");
	bad("{\"checkpoint\": \"/\\ud83d\\ud83d\"}", CK_INVALID, "unpaired surrogate");
	/* Bad UTF-8: a lone continuation, overlong forms, an encoded
	 * surrogate, beyond U+10FFFF, truncated sequences, 0xff. */
	bad("{\"checkpoint\": \"/\x80\"}", CK_INVALID, "invalid UTF-8 in a string at offset 17");
	bad("{\"checkpoint\": \"/\xc0\xaf\"}", CK_INVALID, "invalid UTF-8");
	bad("{\"checkpoint\": \"/\xc1\xbf\"}", CK_INVALID, "invalid UTF-8");
	bad("{\"checkpoint\": \"/\xe0\x80\xaf\"}", CK_INVALID, "invalid UTF-8");
	bad("{\"checkpoint\": \"/\xed\xa0\x80\"}", CK_INVALID, "invalid UTF-8");
	bad("{\"checkpoint\": \"/\xf0\x80\x80\xaf\"}", CK_INVALID, "invalid UTF-8");
	bad("{\"checkpoint\": \"/\xf4\x90\x80\x80\"}", CK_INVALID, "invalid UTF-8");
	bad("{\"checkpoint\": \"/\xf5\x80\x80\x80\"}", CK_INVALID, "invalid UTF-8");
	bad("{\"checkpoint\": \"/\xe2\x82\"}", CK_INVALID, "invalid UTF-8");
	bad("{\"checkpoint\": \"/\xff\"}", CK_INVALID, "invalid UTF-8");
	bad_n("{\"checkpoint\": \"/\xe2\x82", 19, CK_INVALID, "invalid UTF-8");
	bad("\xef\xbb\xbf{\"checkpoint\": \"/x\"}", CK_INVALID, "unexpected byte 0xef");  /* BOM */
	/* Bad values elsewhere make the whole marker invalid. */
	bad("{\"n\": 01, \"checkpoint\": \"/x\"}", CK_INVALID, "expected ',' or '}'");
	bad("{\"n\": 1., \"checkpoint\": \"/x\"}", CK_INVALID, "invalid number at offset 6");
	bad("{\"n\": .5, \"checkpoint\": \"/x\"}", CK_INVALID, "unexpected character '.'");
	bad("{\"n\": -, \"checkpoint\": \"/x\"}", CK_INVALID, "invalid number");
	bad("{\"n\": 1e, \"checkpoint\": \"/x\"}", CK_INVALID, "invalid number");
	bad("{\"n\": +1, \"checkpoint\": \"/x\"}", CK_INVALID, "unexpected character '+'");
	bad("{\"n\": NaN, \"checkpoint\": \"/x\"}", CK_INVALID, "unexpected character 'N'");
	bad("{\"n\": tru, \"checkpoint\": \"/x\"}", CK_INVALID, "unexpected character 't'");
	bad("{\"n\": nul", CK_INVALID, "unexpected character 'n'");
	bad("{\"n\": [1, 2,], \"checkpoint\": \"/x\"}", CK_INVALID, "expected a value");
	bad("{\"n\": [1 2], \"checkpoint\": \"/x\"}", CK_INVALID, "expected ',' or ']'");
	bad("{\"n\": \"\x01\", \"checkpoint\": \"/x\"}", CK_INVALID, "control character 0x01");
	bad("{\"n\": \"\xc3\", \"checkpoint\": \"/x\"}", CK_INVALID, "invalid UTF-8");
	bad("{\"checkpoint\": \"/x\", \"n\": [}", CK_INVALID, "unexpected character '}'");

	/* Deep nesting is refused, not a stack overflow: 100000 levels. */
	{
		size_t depth = 100000, i, len = 0;
		char *deep = malloc(2 * depth + 64);

		CHECK(deep != NULL);
		if (deep) {
			len += (size_t)sprintf(deep, "{\"checkpoint\": \"/x\", \"d\": ");
			for (i = 0; i < depth; i++)
				deep[len++] = '[';
			for (i = 0; i < depth; i++)
				deep[len++] = ']';
			deep[len++] = '}';
			bad_n(deep, len, CK_INVALID, "nested deeper than 512 levels");
			/* 500 levels are fine. */
			len = (size_t)sprintf(deep, "{\"checkpoint\": \"/x\", \"d\": ");
			for (i = 0; i < 500; i++)
				deep[len++] = '[';
			for (i = 0; i < 500; i++)
				deep[len++] = ']';
			deep[len++] = '}';
			deep[len] = '\0';
			ok(deep, "/x");
			free(deep);
		}
	}
	/* A long path (no fixed buffer): 60000 bytes, and escaped. */
	{
		size_t n = 60000, i, len;
		char *json = malloc(2 * n + 64), *want = malloc(n + 1);

		CHECK(json && want);
		if (json && want) {
			len = (size_t)sprintf(json, "{\"checkpoint\": \"");
			for (i = 0; i < n; i++) {
				want[i] = (char)('a' + i % 26);
				if (i % 1000 == 0) {
					want[i] = '/';
					json[len++] = '\\';
				}
				json[len++] = want[i];
			}
			want[n] = '\0';
			strcpy(json + len, "\"}");
			ok(json, want);
		}
		free(json);
		free(want);
	}
	/* Every prefix of a valid marker is refused, none crashes. */
	{
		const char *m = "{\"a\": [1, -2.5e3, true, null, {\"b\": \"\\u00e9\\ud83d\\ude00\"}], "
				"\"checkpoint\": \"/p\\tq\"}";
		size_t i, n = strlen(m);
		int all = 1;

		for (i = 0; i < n; i++) {
			char *path = NULL, *why = NULL;
			size_t plen;
			enum ck_status st = ck_marker_parse(m, i, &path, &plen, &why);

			if (st != CK_INVALID || path || !why)
				all = 0;
			free(path);
			free(why);
		}
		CHECK(all);
		ok(m, "/p\tq");
	}
	return T_DONE();
}
