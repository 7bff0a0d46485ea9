/*
 * fuzz_sinfo.c - sinfo's answer as a Slurm node's worker reads it
 * (worker/slurm.c slurm_parse_sinfo): lines of
 * NodeHost|Gres|GresUsed|StateLong| from
 *     sinfo -h -N -O 'NodeHost:|,Gres:|,GresUsed:|,StateLong:|'.
 *
 * Properties: every card's host is a safe name ([A-Za-z0-9._-], not
 * starting with '-' or '.'), its index is below its node's count and
 * the node's cards come in index order from 0, a type has no '|' or
 * newline, and no line gives more than SLURM_NODE_GPUS_MAX cards.
 */
#include "../../worker/worker.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct slurm_card *v;
	size_t n;

	if (slurm_parse_sinfo((const char *)data, size, &v, &n) < 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		FUZZ_CHECK(v[i].host && wk_host_ok(v[i].host, strlen(v[i].host)));
		FUZZ_CHECK(v[i].index >= 0 && v[i].index < SLURM_NODE_GPUS_MAX);
		FUZZ_CHECK(v[i].index == 0 || (i > 0 && v[i - 1].index == v[i].index - 1 &&
						!strcmp(v[i - 1].host, v[i].host)));
		FUZZ_CHECK(!v[i].type || !strpbrk(v[i].type, "|\n"));
		FUZZ_CHECK(v[i].busy == 0 || v[i].busy == 1);
	}
	slurm_cards_free(v, n);
	return 0;
}
