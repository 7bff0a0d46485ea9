/*
 * names.c - the file-name grammar of LAYOUT.md §2.
 *
 *   queued/   KKKKKKKKK-SSSSSSSSSS.job   K = 100000000 - priority
 *   others    SSSSSSSSSS.job             S = job ID, 10 digits
 *   hooks/    SSSSSSSSSS.hook
 *   new/      KKKKKKKKK-SSSSSSSSSS+NNNNN.job   the N jobs S .. S+N-1 of
 *   incoming/ SSSSSSSSSS+NNNNN.job             one array or sweep
 *
 * Fixed widths make byte order equal numeric order, so `ls queued/`
 * is dispatch order.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"
#include "util.h"

#define PRIO_BIAS 100000000LL

static int digits(const char *s, size_t n, long long *out)
{
	long long v = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

char *name_queued(long long prio, long long seq)
{
	if (prio < PRIO_MIN || prio > PRIO_MAX || seq < 1 || seq > SEQ_MAX) {
		errno = ERANGE;
		return NULL;
	}
	return xasprintf("%09lld-%010lld.job", PRIO_BIAS - prio, seq);
}

char *name_plain(long long seq)
{
	if (seq < 1 || seq > SEQ_MAX) {
		errno = ERANGE;
		return NULL;
	}
	return xasprintf("%010lld.job", seq);
}

char *name_hook(long long seq)
{
	if (seq < 1 || seq > SEQ_MAX) {
		errno = ERANGE;
		return NULL;
	}
	return xasprintf("%010lld.hook", seq);
}

/* A block of COUNT IDs from SEQ, all of them IDs. */
static int block_ok(long long seq, long long count)
{
	return seq >= 1 && count >= 1 && count <= BLOCK_MAX && seq <= SEQ_MAX - count + 1;
}

char *name_block_queued(long long prio, long long seq, long long count)
{
	if (prio < PRIO_MIN || prio > PRIO_MAX || !block_ok(seq, count)) {
		errno = ERANGE;
		return NULL;
	}
	return xasprintf("%09lld-%010lld+%05lld.job", PRIO_BIAS - prio, seq, count);
}

char *name_block(long long seq, long long count)
{
	if (!block_ok(seq, count)) {
		errno = ERANGE;
		return NULL;
	}
	return xasprintf("%010lld+%05lld.job", seq, count);
}

int name_parse_block(const char *name, long long *seq, long long *count)
{
	long long s, c;

	if (strlen(name) != 10 + 1 + 5 + 4 || name[10] != '+' || strcmp(name + 16, ".job"))
		return -1;
	if (digits(name, 10, &s) < 0 || digits(name + 11, 5, &c) < 0 || !block_ok(s, c))
		return -1;
	*seq = s;
	*count = c;
	return 0;
}

int name_parse_queued(const char *name, long long *prio, long long *seq)
{
	long long k, s;

	if (strlen(name) != 9 + 1 + 10 + 4 || name[9] != '-' || strcmp(name + 20, ".job"))
		return -1;
	if (digits(name, 9, &k) < 0 || digits(name + 10, 10, &s) < 0)
		return -1;
	if (PRIO_BIAS - k < PRIO_MIN || PRIO_BIAS - k > PRIO_MAX || s < 1)
		return -1;
	*prio = PRIO_BIAS - k;
	*seq = s;
	return 0;
}

int name_parse_plain(const char *name, long long *seq)
{
	long long s;

	if (strlen(name) != 10 + 4 || strcmp(name + 10, ".job"))
		return -1;
	if (digits(name, 10, &s) < 0 || s < 1)
		return -1;
	*seq = s;
	return 0;
}

int name_parse_hook(const char *name, long long *seq)
{
	long long s;

	if (strlen(name) != 10 + 5 || strcmp(name + 10, ".hook"))
		return -1;
	if (digits(name, 10, &s) < 0 || s < 1)
		return -1;
	*seq = s;
	return 0;
}

int name_classify_new(const char *name, long long *prio, long long *seq, long long *count)
{
	size_t n = strlen(name);
	long long k;

	if (name[0] == '.' || n < 4 || strcmp(name + n - 4, ".job"))
		return -1;
	*count = 1;
	if (name_parse_queued(name, prio, seq) == 0)
		return 1;
	/* KKKKKKKKK-SSSSSSSSSS+NNNNN.job */
	if (n == 9 + 1 + 20 && name[9] == '-' && digits(name, 9, &k) == 0 &&
	    PRIO_BIAS - k >= PRIO_MIN && PRIO_BIAS - k <= PRIO_MAX &&
	    name_parse_block(name + 10, seq, count) == 0) {
		*prio = PRIO_BIAS - k;
		return 2;
	}
	return 0;
}

int jobid_parse(const char *s, long long *id)
{
	long long v;

	if (!*s || *s == '-' || strlen(s) > 32)
		return -1;
	while (*s == '0' && s[1])
		s++;
	if (parse_ll(s, 1, SEQ_MAX, &v) < 0)
		return -1;
	*id = v;
	return 0;
}

char *attempt_id(const char *spool_id, long long job, int n)
{
	return xasprintf("%s-%lld-%d", spool_id, job, n);
}

int attempt_id_parse(const char *aid, char spool_id[9], long long *job, int *n)
{
	const char *d1, *d2;
	long long j, k;
	char *num;
	int r;

	if (strlen(aid) < 12 || aid[8] != '-')
		return -1;
	for (int i = 0; i < 8; i++)
		if (!((aid[i] >= '0' && aid[i] <= '9') || (aid[i] >= 'a' && aid[i] <= 'f')))
			return -1;
	d1 = aid + 8;
	if (!(d2 = strchr(d1 + 1, '-')))
		return -1;
	if (!(num = strndup(d1 + 1, (size_t)(d2 - d1 - 1))))
		return -1;
	r = parse_ll(num, 1, SEQ_MAX, &j);
	free(num);
	if (r < 0 || parse_ll(d2 + 1, 0, 1000000000, &k) < 0)
		return -1;
	/* Only the form attempt_id writes (no sign, no leading zeros), so
	 * that one attempt has one ID. */
	if (d1[1] == '0' || d2[1] == '-' || (d2[1] == '0' && d2[2]))
		return -1;
	memcpy(spool_id, aid, 8);
	spool_id[8] = '\0';
	*job = j;
	*n = (int)k;
	return 0;
}

long long attempt_job(const char *spool_id, const char *aid)
{
	char sid[9];
	long long job;
	int n;

	if (!aid || attempt_id_parse(aid, sid, &job, &n) < 0 || strcmp(sid, spool_id))
		return 0;
	return job;
}
