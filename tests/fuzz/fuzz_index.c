/*
 * fuzz_index.c - SPOOL/queued.idx as status reads it (index_parse,
 * spool-layout/index.c, LAYOUT.md section 11): a header, a table
 * section, a JSON section.
 *
 * Properties:
 *  - a refused file is EINVAL (or ENOMEM), with nothing kept;
 *  - every entry it accepts names a queued/ file of the grammar, with
 *    its ID; a summarised one has every cell, decoded, as text without
 *    a line end, and (with the elements) an element that is one line
 *    from '{' to '}';
 *  - the table view (without the elements) accepts whatever the whole
 *    view accepts, with the same entries: status reads the first part
 *    of the file alone for its table.
 */
#include <errno.h>

#include "spool.h"
#include "fuzz.h"

static int one_line(const char *s)
{
	return s && !strchr(s, '\n');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct spool_index a, b;
	char *x = malloc(size + 1), *y = malloc(size + 1);
	int ra, rb;

	if (!x || !y) {
		free(x);
		free(y);
		return 0;
	}
	memcpy(x, data, size);
	memcpy(y, data, size);
	x[size] = y[size] = '\0';
	ra = index_parse(x, size, 1, &a);
	if (ra < 0) {
		FUZZ_CHECK(errno == EINVAL || errno == ENOMEM);
		FUZZ_CHECK(a.n == 0 && a.e == NULL);
	} else {
		for (size_t i = 0; i < a.n; i++) {
			const struct index_ent *e = &a.e[i];
			long long prio, id;

			FUZZ_CHECK(e->name && name_parse_queued(e->name, &prio, &id) == 0 && id == e->id);
			if (e->raw) {
				FUZZ_CHECK(e->v.json == NULL);
				continue;
			}
			FUZZ_CHECK(one_line(e->v.node) && one_line(e->v.gpus) && one_line(e->v.name) &&
				   one_line(e->v.command) && (!e->v.owner || one_line(e->v.owner)));
			FUZZ_CHECK(e->v.id >= 1 && e->v.id <= SEQ_MAX && e->v.state < JS_N);
			FUZZ_CHECK(one_line(e->v.json) && e->v.json[0] == '{' &&
				   e->v.json[strlen(e->v.json) - 1] == '}');
		}
		rb = index_parse(y, size, 0, &b);
		FUZZ_CHECK(rb == 0 && b.n == a.n);
		for (size_t i = 0; rb == 0 && i < a.n; i++) {
			FUZZ_CHECK(!strcmp(a.e[i].name, b.e[i].name) && a.e[i].raw == b.e[i].raw);
			FUZZ_CHECK(a.e[i].v.rev == b.e[i].v.rev && b.e[i].v.json == NULL);
			FUZZ_CHECK(a.e[i].raw || !strcmp(a.e[i].v.command, b.e[i].v.command));
		}
		if (rb == 0)
			index_free(&b);
		index_free(&a);
	}
	free(x);
	free(y);
	return 0;
}
