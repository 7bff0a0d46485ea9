/*
 * fuzz_nvsmi.c - nvidia-smi's CSV output as the worker reads it
 * (worker/nvsmi.c nv_parse_gpus and nv_parse_apps): the answers to
 * --query-gpu=index,uuid,memory.used,memory.total,utilization.gpu,name
 * and --query-compute-apps=gpu_uuid,pid,used_memory, both with
 * --format=csv,noheader,nounits.
 *
 * The input is the cards' answer, then a NUL byte, then the apps'
 * answer (without a NUL: the cards' answer only).  Properties: a
 * refused answer gets a one-line message; the cards read have distinct
 * indices and UUIDs that are safe as file names under leases/ (no '/',
 * no control bytes or blanks, not starting with '.'); memory is -1 or
 * a real number; no card has more processes than were counted in all.
 */
#include "../../worker/worker.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data, *nul = memchr(buf, '\0', size);
	size_t glen = nul ? (size_t)(nul - buf) : size;
	struct nv_info info;
	char *err = NULL;
	int r;

	memset(&info, 0, sizeof info);
	r = nv_parse_gpus(buf, glen, &info, &err);
	if (r == 0 && nul)
		r = nv_parse_apps(nul + 1, size - glen - 1, &info, &err);
	if (r < 0) {
		FUZZ_CHECK(err && fuzz_one_line(err));
		FUZZ_CHECK(!strncmp(err, "nvidia-smi ", 11) || !strcmp(err, "out of memory"));
		free(err);
	} else {
		FUZZ_CHECK(err == NULL);
	}
	for (size_t i = 0; i < info.ngpu; i++) {
		const struct nv_gpu *g = &info.gpu[i];
		size_t ul = strlen(g->uuid);

		FUZZ_CHECK(g->index >= 0 && g->name && g->name[0]);
		FUZZ_CHECK(ul > 0 && g->uuid[0] != '.' && !strchr(g->uuid, '/'));
		for (size_t k = 0; k < ul; k++)
			FUZZ_CHECK((unsigned char)g->uuid[k] > 0x20 && g->uuid[k] != 0x7f);
		FUZZ_CHECK(g->mem_used >= -1 && g->mem_total >= -1 && g->util >= 0);
		FUZZ_CHECK(g->procs >= 0 && (size_t)g->procs <= info.napps);
		/* a pid kept for each process counted, the first NV_PIDS_MAX */
		FUZZ_CHECK(g->npids == ((size_t)g->procs < NV_PIDS_MAX ? (size_t)g->procs : NV_PIDS_MAX));
		FUZZ_CHECK(nv_find_index(&info, g->index) == g);
	}
	nv_free(&info);
	return 0;
}
