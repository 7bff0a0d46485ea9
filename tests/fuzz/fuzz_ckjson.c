/*
 * fuzz_ckjson.c - the checkpoint marker reader (worker/json.c
 * ck_marker_parse; SPEC section 9): any bytes a job may leave at
 * SSHGPU_CHECKPOINT_READY.
 *
 * Properties:
 *  - CK_OK gives a non-empty path without NUL bytes, of the length
 *    said; CK_INVALID a one-line reason naming an offset inside the
 *    input; every other status neither;
 *  - whatever ck_marker_parse takes for JSON, cJSON takes too (the
 *    reader is never laxer than a common JSON parser), and for CK_OK
 *    cJSON finds the same "checkpoint" string;
 *  - the path, written back as a JSON string (escaped as cJSON does),
 *    parses to the same path.
 */
#include <cJSON.h>

#include "../../worker/json.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *path = NULL, *why = NULL, *text, *path2 = NULL, *why2 = NULL;
	size_t plen = 99, plen2;
	enum ck_status st = ck_marker_parse((const char *)data, size, &path, &plen, &why);
	cJSON *o, *ck;

	switch (st) {
	case CK_OK:
		FUZZ_CHECK(path && why == NULL && plen > 0 && strlen(path) == plen);
		break;
	case CK_INVALID: {
		const char *at;
		unsigned long long off;

		FUZZ_CHECK(path == NULL && plen == 0 && why && fuzz_one_line(why));
		at = strstr(why, " at offset ");
		FUZZ_CHECK(at && sscanf(at, " at offset %llu", &off) == 1 && off <= size);
		break;
	}
	case CK_NOT_OBJECT:
	case CK_NO_PATH:
	case CK_DUP:
	case CK_NUL:
		FUZZ_CHECK(path == NULL && plen == 0 && why == NULL);
		break;
	default:
		FUZZ_CHECK(st == CK_NOMEM && path == NULL && why == NULL);
		break;
	}
	free(why);
	if (st == CK_INVALID || st == CK_NOMEM)
		return 0;

	o = cJSON_ParseWithLength((const char *)data, size);
	if (!o) {
		fprintf(stderr, "ck_marker_parse took it (status %d), cJSON did not\n", (int)st);
		FUZZ_CHECK(!"valid JSON for cJSON too");
	}
	FUZZ_CHECK(cJSON_IsObject(o) == (st != CK_NOT_OBJECT));
	if (st == CK_OK) {
		/* cJSON cuts a key at a \u0000: "checkpoint\u0000" is another
		 * key for ck_marker_parse (rightly), the same for cJSON. */
		ck = cJSON_GetObjectItemCaseSensitive(o, "checkpoint");
		FUZZ_CHECK((cJSON_IsString(ck) && !strcmp(ck->valuestring, path)) ||
			   memmem(data, size, "\\u0000", 6));

		/* Written back by cJSON, read again. */
		cJSON_Delete(o);
		FUZZ_CHECK((o = cJSON_CreateObject()) != NULL);
		FUZZ_CHECK(cJSON_AddStringToObject(o, "checkpoint", path) != NULL);
		FUZZ_CHECK((text = cJSON_PrintUnformatted(o)) != NULL);
		st = ck_marker_parse(text, strlen(text), &path2, &plen2, &why2);
		if (st != CK_OK)
			fprintf(stderr, "%s: %d %s\n", text, (int)st, why2 ? why2 : "");
		FUZZ_CHECK(st == CK_OK && plen2 == plen && !memcmp(path, path2, plen));
		free(path2);
		cJSON_free(text);
	}
	cJSON_Delete(o);
	free(path);
	return 0;
}
