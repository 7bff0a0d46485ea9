/*
 * fuzz_metrics.c - a metrics.prom read back by a starting daemon
 * (spoold/metrics.c metrics_restore): any text at all.
 *
 * Properties: it never fails or reads past the input; what it takes is
 * written out again as a valid set of counters (each histogram's
 * buckets cumulative, its count its +Inf bucket), and that text read
 * into a fresh daemon gives the same text: nothing a restart carries is
 * lost or doubled on the way.
 */
#include "../../spoold/metrics.c"
#include "fuzz.h"

static char *text_of(struct metrics *m)
{
	struct metrics_now now = { 0 };

	return metrics_text(m, &now);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *nodes[] = { "n1", "a\"b\\c" };
	struct metrics a, b;
	char *ta, *tb;

	if (metrics_init(&a, nodes, 2, 1700000000000LL) < 0)
		return 0;
	metrics_restore(&a, (const char *)data, size);
	for (size_t k = 0; k < a.nnodes; k++) {
		unsigned long long below = 0;

		for (size_t i = 0; i <= HANDOFF_NB; i++)
			below += a.node[k].handoff.n[i];
		FUZZ_CHECK(below >= a.node[k].handoff.n[HANDOFF_NB]);
	}
	if (!(ta = text_of(&a))) {
		metrics_free(&a);
		return 0;
	}
	FUZZ_CHECK(metrics_init(&b, nodes, 2, 1700000000000LL) == 0);
	metrics_restore(&b, ta, strlen(ta));
	if ((tb = text_of(&b)) && strcmp(ta, tb)) {
		fprintf(stderr, "first:\n%s\nsecond:\n%s", ta, tb);
		FUZZ_CHECK(!"what a restart reads back is written out the same");
	}
	free(ta);
	free(tb);
	metrics_free(&a);
	metrics_free(&b);
	return 0;
}
