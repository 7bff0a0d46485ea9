/*
 * yamlx.c - strict YAML loading for job files and config.yaml (libyaml).
 *
 * libyaml's event parser is driven by hand rather than through
 * yaml_parser_load: the loader would accept anchors and aliases (and
 * hand back a graph an alias bomb can make huge), tags and any nesting.
 * Here every event is checked as it arrives, so a hostile file is
 * refused at its first offending node, with its line, before anything
 * large is built.  The tree that results is small and plain; the two
 * parsers walk it with the getters at the end of this file.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "spool.h"
#include "yamlx.h"

struct loader {
	const struct yx_ctx *c;
	yaml_parser_t parser;
	size_t nodes;
	const unsigned char *in;        /* the input libyaml reads */
	size_t inlen;
};

static int oom(const struct yx_ctx *c)
{
	return cb_err_set(c->err, EX_OSERR_, "%s: %s", c->fname, strerror(ENOMEM));
}

/* ---- JSON surrogate pairs ----------------------------------------------- */

static int hex4(const char *p, const char *end, unsigned *v)
{
	unsigned x = 0;

	if (end - p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		char ch = p[i];

		x <<= 4;
		if (ch >= '0' && ch <= '9')
			x |= (unsigned)(ch - '0');
		else if (ch >= 'a' && ch <= 'f')
			x |= (unsigned)(ch - 'a' + 10);
		else if (ch >= 'A' && ch <= 'F')
			x |= (unsigned)(ch - 'A' + 10);
		else
			return -1;
	}
	*v = x;
	return 0;
}

/* At P (a backslash inside a string): 1 and *cp set when P..P+12 is a
 * JSON surrogate pair escape "\uD83D\uDE00". */
static int surrogate_pair(const char *p, const char *end, unsigned long *cp)
{
	unsigned hi, lo;

	if (end - p < 12 || p[1] != 'u' || hex4(p + 2, end, &hi) ||
	    hi < 0xD800 || hi > 0xDBFF || p[6] != '\\' || p[7] != 'u' ||
	    hex4(p + 8, end, &lo) || lo < 0xDC00 || lo > 0xDFFF)
		return 0;
	*cp = 0x10000UL + ((unsigned long)(hi - 0xD800) << 10) + (lo - 0xDC00);
	return 1;
}

/* At P inside a JSON string: the length of a raw character there that
 * JSON allows but YAML refuses (DEL, C1 controls, U+FFFE, U+FFFF) or
 * reads as a line break (NEL, U+2028, U+2029), with its YAML escape put
 * in ESC; 0 for any other character. */
static size_t json_raw_char(const char *p, const char *end, char esc[7])
{
	static const char hx[] = "0123456789ABCDEF";
	const unsigned char *u = (const unsigned char *)p;
	unsigned long cp;
	size_t n;

	if (u[0] == 0x7f) {
		cp = 0x7f;
		n = 1;
	} else if (end - p >= 2 && u[0] == 0xc2 && u[1] >= 0x80 && u[1] <= 0x9f) {
		cp = u[1];
		n = 2;
	} else if (end - p >= 3 &&
		   ((u[0] == 0xe2 && u[1] == 0x80 && (u[2] == 0xa8 || u[2] == 0xa9)) ||
		    (u[0] == 0xef && u[1] == 0xbf && (u[2] == 0xbe || u[2] == 0xbf)))) {
		cp = ((unsigned long)(u[0] & 0x0f) << 12) | ((unsigned long)(u[1] & 0x3f) << 6) |
		     (u[2] & 0x3f);
		n = 3;
	} else {
		return 0;
	}
	esc[0] = '\\';
	if (cp < 0x100) {
		esc[1] = 'x';
		esc[2] = hx[cp >> 4];
		esc[3] = hx[cp & 15];
		esc[4] = '\0';
	} else {
		esc[1] = 'u';
		for (int i = 0; i < 4; i++)
			esc[2 + i] = hx[(cp >> (12 - 4 * i)) & 15];
		esc[6] = '\0';
	}
	return n;
}

/*
 * JSON writers that escape everything outside ASCII write a character
 * beyond U+FFFF as a UTF-16 surrogate pair, which YAML has no escape
 * for (libyaml: "found invalid Unicode character escape code").  When
 * the text is JSON (it opens with '{' or '[' and, outside its double
 * quoted strings, has no quote, comment or backslash of YAML's), each
 * pair is rewritten as YAML's "\UXXXXXXXX".  Lines are unchanged.
 * So is every raw character inside a string that JSON allows and YAML
 * does not (json_raw_char): cJSON, as `cardbaton submit` uses it, and
 * Python's json write DEL as it is (found by tests/fuzz/fuzz_jobfile).
 * 1 and *out (malloc'd) when something was rewritten, 0 when not, -1
 * on ENOMEM.
 */
static int json_fix_surrogates(const char *buf, size_t len, char **out, size_t *outlen)
{
	const char *p = buf, *end = buf + len;
	size_t pairs = 0, grow = 0;     /* pairs: 12 bytes each become 10 */
	int pass, in;
	char *o = NULL, *q = NULL;

	if (len >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0)
		p += 3;
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
		p++;
	if (p == end || (*p != '{' && *p != '['))
		return 0;
	for (pass = 0; pass < 2; pass++) {
		if (pass == 1) {
			if (!pairs && !grow)
				return 0;
			if (!(o = q = malloc(len - pairs * 2 + grow + 1)))
				return -1;
		}
		in = 0;
		for (p = buf; p < end; ) {
			unsigned long cp;
			char esc[7];
			size_t k;

			if (!in) {
				if (*p == '\'' || *p == '#' || *p == '\\') {
					free(o);        /* (only ever in pass 0) */
					return 0;       /* YAML, not JSON: leave it */
				}
				if (*p == '"')
					in = 1;
			} else if (*p == '"') {
				in = 0;
			} else if ((k = json_raw_char(p, end, esc)) > 0) {
				if (pass == 0) {
					grow += strlen(esc) - k;
				} else {
					memcpy(q, esc, strlen(esc));
					q += strlen(esc);
				}
				p += k;
				continue;
			} else if (*p == '\\') {
				if (surrogate_pair(p, end, &cp)) {
					if (pass == 0) {
						pairs++;
					} else {
						static const char hx[] = "0123456789ABCDEF";

						*q++ = '\\';
						*q++ = 'U';
						for (int s = 28; s >= 0; s -= 4)
							*q++ = hx[(cp >> s) & 15];
					}
					p += 12;
					continue;
				}
				if (pass == 1)
					*q++ = *p;
				p++;
				if (p == end)
					break;
			}
			if (pass == 1)
				*q++ = *p;
			p++;
		}
	}
	*q = '\0';
	*out = o;
	*outlen = (size_t)(q - o);
	return 1;
}

/* ---- loading ------------------------------------------------------------ */

static unsigned long line_of(const yaml_mark_t *m)
{
	return (unsigned long)m->line + 1;
}

static int parse_error(struct loader *L)
{
	const struct yx_ctx *c = L->c;
	yaml_parser_t *p = &L->parser;
	const char *problem = p->problem ? p->problem : "syntax error";

	switch (p->error) {
	case YAML_MEMORY_ERROR:
		return oom(c);
	case YAML_READER_ERROR:
		/* problem_value is the bad octet, a code point (U+D800) or
		 * -1: the byte shown is the input's own, at the offset. */
		if (strstr(problem, "UTF-8") || strstr(problem, "Unicode")) {
			unsigned byte = p->problem_offset < L->inlen ? L->in[p->problem_offset] :
					(unsigned)p->problem_value & 0xff;

			if (p->problem_value > 0xff)
				return cb_err_set(c->err, c->ex, "%s: not valid UTF-8: %s U+%04X (byte 0x%02x at offset %zu)",
						  c->fname, problem, (unsigned)p->problem_value, byte,
						  p->problem_offset);
			return cb_err_set(c->err, c->ex, "%s: not valid UTF-8: %s (byte 0x%02x at offset %zu)",
					  c->fname, problem, byte, p->problem_offset);
		}
		if (p->problem_value >= 0)
			return cb_err_set(c->err, c->ex, "%s: %s (U+%04X at offset %zu)",
					  c->fname, problem, (unsigned)p->problem_value,
					  p->problem_offset);
		return cb_err_set(c->err, c->ex, "%s: %s", c->fname, problem);
	default:
		if (p->context)
			return cb_err_set(c->err, c->ex, "%s:%lu: %s (%s on line %lu)", c->fname,
					  line_of(&p->problem_mark), problem, p->context,
					  line_of(&p->context_mark));
		return cb_err_set(c->err, c->ex, "%s:%lu: %s", c->fname,
				  line_of(&p->problem_mark), problem);
	}
}

static int next(struct loader *L, yaml_event_t *ev)
{
	if (!yaml_parser_parse(&L->parser, ev))
		return parse_error(L);
	return 0;
}

static int fail_at(struct loader *L, const yaml_event_t *ev, const char *problem)
{
	return cb_err_set(L->c->err, L->c->ex, "%s:%lu: %s", L->c->fname,
			  line_of(&ev->start_mark), problem);
}

static int add_kid(struct loader *L, struct yx_node *n, struct yx_node **kid)
{
	/* Capacity doubles at 4, 8, 16, ...; n is bounded by YX_MAX_NODES. */
	if (n->n == 0 || (n->n >= 4 && (n->n & (n->n - 1)) == 0)) {
		size_t cap = n->n ? n->n * 2 : 4;
		struct yx_node *k;

		if (!(k = realloc(n->kids, cap * sizeof *k)))
			return oom(L->c);
		n->kids = k;
	}
	*kid = &n->kids[n->n];
	memset(*kid, 0, sizeof **kid);
	n->n++;
	return 0;
}

/* Build N from EV, the node's first event (consumed here).  DEPTH is
 * the number of collections N is inside. */
static int build(struct loader *L, struct yx_node *n, yaml_event_t *ev, int depth)
{
	yaml_char_t *anchor = NULL, *tag = NULL;
	yaml_event_type_t end;
	int r = -1;

	n->line = line_of(&ev->start_mark);
	if (++L->nodes > YX_MAX_NODES) {
		cb_err_set(L->c->err, L->c->ex, "%s:%lu: too many values (more than %d)",
			   L->c->fname, n->line, YX_MAX_NODES);
		goto out;
	}
	switch (ev->type) {
	case YAML_ALIAS_EVENT:
		fail_at(L, ev, "anchors and aliases are not allowed");
		goto out;
	case YAML_SCALAR_EVENT:
		anchor = ev->data.scalar.anchor;
		tag = ev->data.scalar.tag;
		break;
	case YAML_SEQUENCE_START_EVENT:
		anchor = ev->data.sequence_start.anchor;
		tag = ev->data.sequence_start.tag;
		break;
	case YAML_MAPPING_START_EVENT:
		anchor = ev->data.mapping_start.anchor;
		tag = ev->data.mapping_start.tag;
		break;
	default:
		fail_at(L, ev, "unexpected YAML event");
		goto out;
	}
	if (anchor) {
		fail_at(L, ev, "anchors and aliases are not allowed");
		goto out;
	}
	if (tag) {
		fail_at(L, ev, "tags are not allowed");
		goto out;
	}
	if (ev->type == YAML_SCALAR_EVENT) {
		size_t len = ev->data.scalar.length;

		if (len > YX_MAX_SCALAR) {
			fail_at(L, ev, "value longer than 65536 bytes");
			goto out;
		}
		n->type = YX_SCALAR;
		n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
		if (!(n->s = malloc(len + 1))) {
			oom(L->c);
			goto out;
		}
		memcpy(n->s, ev->data.scalar.value, len);
		n->s[len] = '\0';
		n->len = len;
		r = 0;
		goto out;
	}
	if (depth >= YX_MAX_DEPTH) {
		fail_at(L, ev, "nesting deeper than 16 levels");
		goto out;
	}
	if (ev->type == YAML_SEQUENCE_START_EVENT) {
		n->type = YX_SEQ;
		end = YAML_SEQUENCE_END_EVENT;
	} else {
		n->type = YX_MAP;
		end = YAML_MAPPING_END_EVENT;
	}
	yaml_event_delete(ev);
	for (;;) {
		struct yx_node *kid = NULL;

		if (next(L, ev))
			return -1;
		if (ev->type == end)
			break;
		if (add_kid(L, n, &kid))
			goto out;
		if (build(L, kid, ev, depth + 1))
			return -1;
	}
	r = 0;
out:
	yaml_event_delete(ev);
	return r;
}

int yx_load(const struct yx_ctx *c, const char *buf, size_t len, struct yx_node **root)
{
	struct loader L = { .c = c };
	yaml_event_t ev;
	struct yx_node *n = NULL;
	const char *nul;
	char *fixed = NULL;
	size_t flen;
	int r = -1, have_doc = 0;

	*root = NULL;
	if (len > YX_MAX_INPUT)
		return cb_err_set(c->err, c->ex, "%s: larger than %u bytes", c->fname, YX_MAX_INPUT);
	/* UTF-8 only.  The encoding is not forced on libyaml (with it
	 * forced, 0.2.5 counts a UTF-8 byte order mark as a column and
	 * then misreads the indentation); UTF-16 text is refused here by
	 * its byte order mark, or below by its NUL bytes. */
	if (len >= 2 && ((unsigned char)buf[0] == 0xff || (unsigned char)buf[0] == 0xfe) &&
	    ((unsigned char)buf[1] ^ (unsigned char)buf[0]) == 0x01)
		return cb_err_set(c->err, c->ex, "%s: not valid UTF-8: UTF-16 byte order mark",
				  c->fname);
	if ((nul = memchr(buf, '\0', len)))
		return cb_err_set(c->err, c->ex, "%s: contains a NUL byte (offset %zu)",
				  c->fname, (size_t)(nul - buf));
	switch (json_fix_surrogates(buf, len, &fixed, &flen)) {
	case -1:
		return oom(c);
	case 1:
		buf = fixed;
		len = flen;
		break;
	}
	if (!yaml_parser_initialize(&L.parser)) {
		free(fixed);
		return oom(c);
	}
	yaml_parser_set_input_string(&L.parser, (const unsigned char *)buf, len);
	L.in = (const unsigned char *)buf;
	L.inlen = len;

	if (next(&L, &ev))
		goto out;
	yaml_event_delete(&ev);         /* STREAM-START */
	for (;;) {
		if (next(&L, &ev))
			goto out;
		if (ev.type == YAML_STREAM_END_EVENT) {
			yaml_event_delete(&ev);
			break;
		}
		if (have_doc) {         /* DOCUMENT-START of a second one */
			fail_at(&L, &ev, "more than one document");
			yaml_event_delete(&ev);
			goto out;
		}
		have_doc = 1;
		yaml_event_delete(&ev);
		if (next(&L, &ev))
			goto out;
		if (!(n = calloc(1, sizeof *n))) {
			yaml_event_delete(&ev);
			oom(c);
			goto out;
		}
		if (build(&L, n, &ev, 0))
			goto out;
		if (next(&L, &ev))      /* DOCUMENT-END */
			goto out;
		yaml_event_delete(&ev);
	}
	if (n && yx_is_null(n)) {       /* "---" alone, or "--- ~" */
		yx_free(n);
		n = NULL;
	}
	*root = n;
	n = NULL;
	r = 0;
out:
	yx_free(n);
	yaml_parser_delete(&L.parser);
	free(fixed);
	return r;
}

static void free_kids(struct yx_node *n)
{
	for (size_t i = 0; i < n->n; i++)
		free_kids(&n->kids[i]);
	free(n->kids);
	free(n->s);
}

void yx_free(struct yx_node *root)
{
	if (!root)
		return;
	free_kids(root);
	free(root);
}

/* ---- messages ----------------------------------------------------------- */

/* Key text for a message: control characters shown as '?', long keys
 * cut (on a UTF-8 boundary) with "...". */
static int add_key(struct sbuf *b, const char *k)
{
	size_t len = strlen(k), cut = len > 64 ? 64 : len;

	while (cut < len && cut > 0 && ((unsigned char)k[cut] & 0xc0) == 0x80)
		cut--;
	for (size_t i = 0; i < cut; i++) {
		char ch = ((unsigned char)k[i] < 0x20 || k[i] == 0x7f) ? '?' : k[i];

		if (sbuf_add(b, &ch, 1))
			return -1;
	}
	return cut < len ? sbuf_add(b, "...", 3) : 0;
}

static int add_path(struct sbuf *b, const struct yx_path *p)
{
	if (!p)
		return 0;
	if (add_path(b, p->up))
		return -1;
	if (p->key) {
		if (p->up && sbuf_add(b, ".", 1))
			return -1;
		return add_key(b, p->key);
	}
	return sbuf_addf(b, "[%lld]", p->idx);
}

int yx_fail(const struct yx_ctx *c, const struct yx_node *n, const struct yx_path *p,
	    const char *fmt, ...)
{
	struct sbuf b = { 0 };
	char *problem;
	va_list ap;
	int bad;

	va_start(ap, fmt);
	bad = vasprintf(&problem, fmt, ap) < 0;
	va_end(ap);
	if (bad)
		return oom(c);
	bad = sbuf_addf(&b, "%s", c->fname) ||
	      (n && sbuf_addf(&b, ":%lu", n->line)) ||
	      sbuf_add(&b, ": ", 2) ||
	      (p && (add_path(&b, p) || sbuf_add(&b, ": ", 2))) ||
	      sbuf_addf(&b, "%s", problem);
	free(problem);
	if (bad) {
		sbuf_free(&b);
		return oom(c);
	}
	cb_err_set(c->err, c->ex, "%s", b.s);
	sbuf_free(&b);
	return -1;
}

/* ---- getters ------------------------------------------------------------ */

int yx_is_null(const struct yx_node *n)
{
	static const char *const nulls[] = { "", "~", "null", "Null", "NULL" };

	if (n->type != YX_SCALAR || !n->plain)
		return 0;
	for (size_t i = 0; i < sizeof nulls / sizeof *nulls; i++)
		if (strcmp(n->s, nulls[i]) == 0)
			return 1;
	return 0;
}

static int key_cmp(const void *a, const void *b, void *base)
{
	const struct yx_node *k = base;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	int d = strcmp(k[i].s, k[j].s);

	return d ? d : (i > j) - (i < j);
}

int yx_map(const struct yx_ctx *c, const struct yx_node *n, const struct yx_path *p)
{
	size_t np, *ix, dup = SIZE_MAX;

	if (n->type != YX_MAP)
		return yx_fail(c, n, p, "must be a mapping");
	for (size_t i = 0; i < n->n; i += 2) {
		const struct yx_node *k = &n->kids[i];

		if (k->type != YX_SCALAR || yx_is_null(k) || strlen(k->s) != k->len)
			return yx_fail(c, k, p, "keys must be strings");
	}
	/* Duplicate keys: sort key indices (stable by position) and take
	 * the earliest second occurrence, so the message names the line a
	 * reader meets first. */
	if ((np = n->n / 2) < 2)
		return 0;
	if (!(ix = malloc(np * sizeof *ix)))
		return oom(c);
	for (size_t i = 0; i < np; i++)
		ix[i] = i * 2;
	qsort_r(ix, np, sizeof *ix, key_cmp, n->kids);
	for (size_t i = 1; i < np; i++)
		if (strcmp(n->kids[ix[i]].s, n->kids[ix[i - 1]].s) == 0 && ix[i] < dup)
			dup = ix[i];
	free(ix);
	if (dup != SIZE_MAX) {
		struct yx_path kp = { p, n->kids[dup].s, -1 };

		return yx_fail(c, &n->kids[dup], &kp, "duplicate key");
	}
	return 0;
}

int yx_seq(const struct yx_ctx *c, const struct yx_node *n, const struct yx_path *p,
	   size_t max)
{
	if (n->type != YX_SEQ)
		return yx_fail(c, n, p, "must be a list");
	if (n->n > max)
		return yx_fail(c, n, p, "more than %zu items", max);
	return 0;
}

int yx_str(const struct yx_ctx *c, const struct yx_node *n, const struct yx_path *p,
	   const char **out)
{
	if (n->type != YX_SCALAR || yx_is_null(n))
		return yx_fail(c, n, p, "must be a string");
	if (strlen(n->s) != n->len)
		return yx_fail(c, n, p, "must not contain a NUL character");
	*out = n->s;
	return 0;
}

int yx_int(const struct yx_ctx *c, const struct yx_node *n, const struct yx_path *p,
	   long long lo, long long hi, long long *out)
{
	const char *s = n->s, *d;
	long long v;
	char *end;

	if (n->type != YX_SCALAR || !n->plain)
		return yx_fail(c, n, p, "must be an integer");
	d = s + (*s == '-');
	if (!*d || strspn(d, "0123456789") != strlen(d))
		return yx_fail(c, n, p, "must be an integer");
	if (d[0] == '0' && d[1])
		return yx_fail(c, n, p, "must be an integer without leading zeros");
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || v < lo || v > hi)
		return yx_fail(c, n, p, "must be between %lld and %lld", lo, hi);
	*out = v;
	return 0;
}

int yx_bool(const struct yx_ctx *c, const struct yx_node *n, const struct yx_path *p,
	    int *out)
{
	if (n->type == YX_SCALAR && n->plain) {
		if (!strcmp(n->s, "true") || !strcmp(n->s, "True") || !strcmp(n->s, "TRUE")) {
			*out = 1;
			return 0;
		}
		if (!strcmp(n->s, "false") || !strcmp(n->s, "False") || !strcmp(n->s, "FALSE")) {
			*out = 0;
			return 0;
		}
	}
	return yx_fail(c, n, p, "must be true or false");
}

void yx_strv_free(char **v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

int yx_str_list(const struct yx_ctx *c, const struct yx_node *n, const struct yx_path *p,
		size_t max, char ***out, size_t *nout)
{
	char **v;

	if (yx_seq(c, n, p, max))
		return -1;
	if (!n->n)
		return yx_fail(c, n, p, "must not be empty");
	for (size_t i = 0; i < n->n; i++) {
		struct yx_path ip = { p, NULL, (long long)i };
		const char *s;

		if (yx_str(c, &n->kids[i], &ip, &s))
			return -1;
	}
	if (!(v = calloc(n->n, sizeof *v)))
		return oom(c);
	for (size_t i = 0; i < n->n; i++)
		if (!(v[i] = strdup(n->kids[i].s))) {
			yx_strv_free(v, i);
			return oom(c);
		}
	*out = v;
	*nout = n->n;
	return 0;
}

int yx_int_set(const struct yx_ctx *c, const struct yx_node *n, const struct yx_path *p,
	       long long lo, long long hi, int nonempty, int **out, size_t *nout)
{
	int *v = NULL;

	if (yx_seq(c, n, p, SIZE_MAX))
		return -1;
	if (!n->n) {
		if (nonempty)
			return yx_fail(c, n, p, "must not be empty");
		*out = NULL;
		*nout = 0;
		return 0;
	}
	if (!(v = calloc(n->n, sizeof *v)))
		return oom(c);
	/* Quadratic, but bounded: a list of distinct values in [lo, hi]
	 * fails at item hi - lo + 2 at the latest. */
	for (size_t i = 0; i < n->n; i++) {
		struct yx_path ip = { p, NULL, (long long)i };
		long long x = 0;

		if (yx_int(c, &n->kids[i], &ip, lo, hi, &x))
			goto bad;
		for (size_t j = 0; j < i; j++)
			if (v[j] == x) {
				yx_fail(c, &n->kids[i], &ip, "%lld is listed twice", x);
				goto bad;
			}
		v[i] = (int)x;
	}
	*out = v;
	*nout = n->n;
	return 0;
bad:
	free(v);
	return -1;
}

const char *yx_node_name_problem(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 64 ||
	    strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != n)
		return "must be a node name (1 to 64 of A-Z a-z 0-9 . _ -)";
	if (s[0] == '-')
		return "must not begin with '-'";
	return NULL;
}
