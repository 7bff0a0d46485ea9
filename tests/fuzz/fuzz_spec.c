/*
 * fuzz_spec.c - the launch spec as the worker reads it
 * (worker/spec.c spec_check, after wire_read of its stdin; LAYOUT.md
 * section 10, "Spec keys").
 *
 * Properties: a refused spec gets a one-line reason; an accepted one
 * has a valid attempt ID (so it can never name a path outside
 * attempts/), exactly one of an argv and a shell command, every env
 * entry NAME=value with NAME a shell identifier, distinct GPU indices,
 * no UUIDs or one per index, each fit to name a lease file, every
 * `after` a valid attempt ID other than its own, every number in its
 * range, and a checkpoint_on only with an absolute checkpoint.
 */
#include "fuzz.h"
#include "../../worker/launch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct spec sp;
	const char *whyw;
	char *why = NULL;
	long used;

	memset(&sp, 0, sizeof sp);
	used = wire_parse((const char *)data, size, &sp.rec, &whyw);
	if (used <= 0)
		return 0;
	if (spec_check(&sp, &why) < 0) {
		FUZZ_CHECK(why && fuzz_one_line(why));
		free(why);
		spec_free(&sp);
		wire_free(&sp.rec);
		return 0;
	}
	FUZZ_CHECK(why == NULL);
	FUZZ_CHECK(sp.id && wk_id_ok(sp.id) && !strchr(sp.id, '/') && sp.id[0] != '.');
	FUZZ_CHECK(!sp.argv != !sp.shell);
	if (sp.argv) {
		FUZZ_CHECK(sp.argc > 0 && sp.argv[sp.argc] == NULL);
		for (size_t i = 0; i < sp.argc; i++)
			FUZZ_CHECK(sp.argv[i] != NULL);
	}
	for (size_t i = 0; i < sp.nenv; i++) {
		const char *eq = strchr(sp.env[i], '=');

		FUZZ_CHECK(eq && eq > sp.env[i] && !(sp.env[i][0] >= '0' && sp.env[i][0] <= '9'));
		FUZZ_CHECK(strspn(sp.env[i], "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				  "0123456789_") == (size_t)(eq - sp.env[i]));
	}
	FUZZ_CHECK(sp.env[sp.nenv] == NULL);
	for (size_t i = 0; i < sp.ngpu; i++) {
		FUZZ_CHECK(sp.gpu[i] >= 0);
		for (size_t k = 0; k < i; k++)
			FUZZ_CHECK(sp.gpu[k] != sp.gpu[i]);
	}
	FUZZ_CHECK(sp.nuuid == 0 || sp.nuuid == sp.ngpu);
	for (size_t i = 0; i < sp.nuuid; i++)
		FUZZ_CHECK(nv_uuid_ok(sp.uuid[i], strlen(sp.uuid[i])) && !strchr(sp.uuid[i], '/') &&
			   sp.uuid[i][0] != '.');
	/* A staged launch's afters name files in attempts/ too. */
	for (size_t i = 0; i < sp.nafter; i++)
		FUZZ_CHECK(wk_id_ok(sp.after[i]) && !strchr(sp.after[i], '/') && sp.after[i][0] != '.' &&
			   strcmp(sp.after[i], sp.id) != 0);
	FUZZ_CHECK(sp.after[sp.nafter] == NULL);
	FUZZ_CHECK(sp.idle_mib >= 0 && sp.timeout >= 0 && sp.grace >= 0);
	FUZZ_CHECK(sp.resumable == 0 || sp.resumable == 1);
	/* A moved checkpoint (shared_fs) is an absolute path to check. */
	FUZZ_CHECK(!sp.checkpoint_on || (sp.checkpoint && sp.checkpoint[0] == '/'));
	spec_free(&sp);
	wire_free(&sp.rec);
	return 0;
}
