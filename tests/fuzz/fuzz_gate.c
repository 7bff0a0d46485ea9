/*
 * fuzz_gate.c - what a lab key's forced command reads: worker/gate.c
 * gate_split of $SSH_ORIGINAL_COMMAND (SPEC §12, LAYOUT.md §16).
 *
 * Properties: an accepted command holds no character a shell would
 * take as syntax outside quotes (no ; | & $ ` ( ) < > * ? newline but
 * in '...' or the one "$HOME"); its words, quoted again the way the
 * controller quotes them (link/node.c: '...' with '\''), split back
 * into the same words; "$HOME" becomes HOME exactly; a refusal leaves
 * nothing allocated (ASan's leak check).
 */
#include <errno.h>

#include "fuzz.h"
#include "../../worker/worker.h"

#define HOME "/home/al ice"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *cmd = fuzz_cstr(data, size), **v = NULL, **v2 = NULL, *re = NULL;
	size_t n = 0, n2 = 0, len = 0, cap = 0;
	int in_q = 0;

	if (!cmd)
		return 0;
	if (gate_split(cmd, HOME, &v, &n) < 0) {
		FUZZ_CHECK(errno == EINVAL || errno == ENOMEM);
		FUZZ_CHECK(v == NULL && n == 0);
		free(cmd);
		return 0;
	}
	/* Outside quotes: nothing a shell would read as syntax. */
	for (const char *p = cmd; *p; p++) {
		if (*p == '\'') {
			in_q = !in_q;
		} else if (!in_q && *p == '\\' && p[1]) {
			p++;
		} else if (!in_q && !strncmp(p, "\"$HOME\"", 7)) {
			p += 6;
		} else if (!in_q) {
			FUZZ_CHECK(!strchr(";|&$`()<>*?!#~{}[]\"\t\n", *p));
		}
	}
	FUZZ_CHECK(!in_q);
	FUZZ_CHECK(n == 0 || v[n] == NULL);
	/* Quoted again, word by word, it splits into the same words. */
	for (size_t i = 0; i < n; i++) {
		size_t wl = strlen(v[i]);

		if (len + 4 * wl + 4 > cap) {
			cap = len + 4 * wl + 4;
			re = realloc(re, cap);
			FUZZ_CHECK(re);
		}
		if (i)
			re[len++] = ' ';
		re[len++] = '\'';
		for (size_t k = 0; k < wl; k++) {
			if (v[i][k] == '\'') {
				memcpy(re + len, "'\\''", 4);
				len += 4;
			} else {
				re[len++] = v[i][k];
			}
		}
		re[len++] = '\'';
	}
	if (re)
		re[len] = '\0';
	FUZZ_CHECK(gate_split(re ? re : "", HOME, &v2, &n2) == 0);
	FUZZ_CHECK(n2 == n);
	for (size_t i = 0; i < n; i++)
		FUZZ_CHECK(!strcmp(v[i], v2[i]));
	gate_words_free(v, n);
	gate_words_free(v2, n2);
	free(re);
	free(cmd);
	return 0;
}
