/*
 * fuzz_squeue.c - squeue's answer as a Slurm node's worker reads it
 * (worker/slurm.c slurm_squeue_find): lines "NAME JOBID STATE" from
 *     squeue -h -t all -o '%j %i %T' [--name NAME | --me].
 * The input's first line is the NAME looked for (when it is 1 to 64
 * bytes without a blank or a NUL; else "cb-1a2b-3"), the rest squeue's
 * output.
 *
 * Properties: a job found has a job ID of 1 to 32 digits and '_', a
 * state with no blank, newline or NUL, and the output has the line
 * "NAME JOBID STATE" (then a blank, a newline or its end); and the
 * launch's look-up (squeue --name: only the lines of that name) finds
 * what status's list of all jobs does (--me: every line).
 */
#include "../../worker/worker.h"
#include "fuzz.h"

static int same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data, *nl = memchr(buf, '\n', size);
	char name[80] = "cb-1a2b-3", *jobid, *state, *jobid2, *state2, *only, *line;
	size_t len = size, nlen, n = 0;
	int got, got2;

	if (nl && nl > buf && nl - buf <= 64 && !memchr(buf, ' ', (size_t)(nl - buf)) &&
	    !memchr(buf, '\0', (size_t)(nl - buf))) {
		memcpy(name, buf, (size_t)(nl - buf));
		name[nl - buf] = '\0';
		len = size - (size_t)(nl - buf) - 1;
		buf = nl + 1;
	}
	nlen = strlen(name);
	got = slurm_squeue_find(buf, len, name, &jobid, &state);
	if (got < 0)
		return 0;
	FUZZ_CHECK(got == 0 || got == 1);
	FUZZ_CHECK(got ? jobid && state : !jobid && !state);
	if (got) {
		size_t jl = strlen(jobid), sl = strlen(state);
		int seen = 0;

		FUZZ_CHECK(jl >= 1 && jl <= 32 && strspn(jobid, "0123456789_") == jl);
		FUZZ_CHECK(!strpbrk(state, " \n"));
		if ((line = malloc(nlen + jl + sl + 3))) {
			size_t ll = (size_t)sprintf(line, "%s %s %s", name, jobid, state);

			for (size_t i = 0; i + ll <= len && !seen; i++)
				seen = (i == 0 || buf[i - 1] == '\n') && !memcmp(buf + i, line, ll) &&
				       (i + ll == len || buf[i + ll] == ' ' || buf[i + ll] == '\n');
			FUZZ_CHECK(seen);
			free(line);
		}
	}
	/* The lines of that name alone, as squeue --name gives them. */
	if ((only = malloc(len + 1))) {
		for (size_t i = 0; i < len;) {
			const char *p = buf + i, *e = memchr(p, '\n', len - i);
			size_t ln = e ? (size_t)(e - p) + 1 : len - i;

			if (ln > nlen && !memcmp(p, name, nlen) && p[nlen] == ' ') {
				memcpy(only + n, p, ln);
				n += ln;
			}
			i += ln;
		}
		got2 = slurm_squeue_find(only, n, name, &jobid2, &state2);
		if (got2 >= 0) {
			FUZZ_CHECK(got2 == got && same(jobid, jobid2) && same(state, state2));
			free(jobid2);
			free(state2);
		}
		free(only);
	}
	free(jobid);
	free(state);
	return 0;
}
