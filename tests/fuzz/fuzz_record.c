/*
 * fuzz_record.c - job records (spool-layout/record.c, LAYOUT.md
 * section 6): the JSON files in queued/ running/ paused/ done/, read
 * with cJSON.
 *
 * Properties: a refused record gets exit code 65 and a message; an
 * accepted one has its fields in range, can always be written back
 * (job_to_json) and shown (job_status_json), and what is written back
 * reads back to the same text: a record never changes by being read
 * and rewritten.
 */
#include <cJSON.h>

#include "spool.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct job j, k;
	struct cb_err err = { 0 };
	char *t1, *t2;
	cJSON *st;

	if (job_from_json((const char *)data, size, &j, &err) < 0) {
		FUZZ_CHECK(err.msg != NULL && err.ex == EX_DATAERR_);
		FUZZ_CHECK(j.att == NULL && j.reason == NULL && j.def.argv == NULL);
		cb_err_free(&err);
		return 0;
	}
	FUZZ_CHECK(j.id >= 1 && j.id <= SEQ_MAX);
	FUZZ_CHECK((unsigned)j.state < JS_N);
	FUZZ_CHECK(j.priority >= PRIO_MIN && j.priority <= PRIO_MAX);
	for (size_t i = 0; i < j.natt; i++) {
		const struct attempt *a = &j.att[i];

		FUZZ_CHECK(a->id != NULL && (unsigned)a->state < AS_N && a->n >= 0);
		for (size_t g = 0; g < a->ngpus; g++)
			FUZZ_CHECK(a->gpus[g] >= 0 && a->gpus[g] <= GPU_INDEX_MAX);
		for (size_t u = 0; u < a->nuuids; u++)
			FUZZ_CHECK(a->uuids[u] != NULL);
	}
	(void)job_last_attempt(&j);

	st = job_status_json(&j);
	FUZZ_CHECK(st != NULL);
	cJSON_Delete(st);

	t1 = job_to_json(&j);
	FUZZ_CHECK(t1 != NULL);
	if (job_from_json(t1, strlen(t1), &k, &err) < 0) {
		fprintf(stderr, "rewritten record refused: %s\n%s", err.msg, t1);
		FUZZ_CHECK(!"a record written back reads back");
	}
	t2 = job_to_json(&k);
	FUZZ_CHECK(t2 != NULL);
	if (strcmp(t1, t2)) {
		fprintf(stderr, "first:\n%s\nsecond:\n%s", t1, t2);
		FUZZ_CHECK(!"a record read and written again is unchanged");
	}
	free(t1);
	free(t2);
	job_free(&k);
	job_free(&j);
	return 0;
}
