/*
 * test_cards.c - the daemon's card snapshots (spoold/cards.c): what a
 * query's answer leaves in a node's snapshot of the attempts the daemon
 * knows it runs there (issue 32: an answer read before a launch took
 * its leases showed a shared card with room, and a third sharer went
 * on a card of two).
 */
#include <stdlib.h>
#include <string.h>

#include "../../spoold/spoold.h"
#include "t.h"

static const char answer[] =
	"index 0\nuuid GPU-0\nname Fake\nmemory_used_mib 100\nmemory_total_mib 81920\n"
	"utilization 3\nprocesses 1\nlease \nend\n"
	"index 1\nuuid GPU-1\nname Fake\nmemory_used_mib 0\nmemory_total_mib 81920\n"
	"utilization 0\nprocesses 0\nlease \nend\n";

static struct node_conf conf = { .name = "local", .local = 1, .idle_mib = 64, .max_jobs_per_gpu = 2 };
static struct daemon d;
static struct node node;
static struct rent runs[3];
static int card1[] = { 1 };

/* Attempt AID of job ID on card 1, sharing (or not). */
static void running(size_t i, long long id, char *aid, int share)
{
	runs[i] = (struct rent){ .id = id, .aid = aid, .node = 0, .share = share, .mem = 20000,
				 .cards = card1, .ncards = 1 };
}

/* The node answers ANSWER to its query. */
static void answered(void)
{
	node.query = (struct acall){ 0 };
	CHECK(sbuf_add(&node.query.buf, answer, strlen(answer)) == 0);
	query_done(&d, &node, 0);
	sbuf_free(&node.query.buf);
}

static int shares(const struct gpu_info *g, const char *aid)
{
	for (size_t s = 0; s < g->nshares; s++)
		if (!strcmp(g->shares[s], aid))
			return 1;
	return 0;
}

int main(void)
{
	char a1[] = "0123abcd-1-0", a2[] = "0123abcd-2-0", a3[] = "0123abcd-3-0", part[] = "gpu";

	node.conf = &conf;
	d.nodes = &node;
	d.nnodes = 1;
	d.r = runs;

	/* Two sharers launched on card 1; the answer was read before their
	 * marks: the snapshot shows both all the same, and their memory. */
	running(0, 1, a1, 1);
	running(1, 2, a2, 1);
	d.nr = 2;
	answered();
	CHECK(node.known && node.fresh && node.ngpus == 2);
	CHECK(node.gpus[1].nshares == 2 && shares(&node.gpus[1], a1) && shares(&node.gpus[1], a2));
	CHECK(node.gpus[1].mem_used == 40000);
	CHECK(!gpu_idle(&node.gpus[1], conf.idle_mib));
	/* Shown once only, however often asked. */
	answered();
	CHECK(node.gpus[1].nshares == 2 && node.gpus[1].mem_used == 40000);
	/* Card 0: nobody of ours; the answer stands. */
	CHECK(!node.gpus[0].lease && node.gpus[0].nshares == 0 && node.gpus[0].mem_used == 100);

	/* One ended (the node said so): only the other is shown. */
	cards_freed(&d, &node, a1, 1);
	runs[0] = runs[1];
	d.nr = 1;
	answered();
	CHECK(node.gpus[1].nshares == 1 && shares(&node.gpus[1], a2));

	/* An exclusive attempt: its lease. */
	running(0, 3, a3, 0);
	d.nr = 1;
	answered();
	CHECK(node.gpus[1].lease && !strcmp(node.gpus[1].lease, a3) && node.gpus[1].nshares == 0);

	/* A staged one leases nothing yet. */
	runs[0].staged = 1;
	answered();
	CHECK(!node.gpus[1].lease && gpu_idle(&node.gpus[1], conf.idle_mib));

	/* A Slurm node's cards are Slurm's to count. */
	runs[0].staged = 0;
	conf.slurm_partition = part;
	answered();
	CHECK(!node.gpus[1].lease);
	conf.slurm_partition = NULL;

	gpus_free(node.gpus, node.ngpus);
	free(node.error);
	return T_DONE();
}
