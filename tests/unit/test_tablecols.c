/*
 * test_tablecols.c - the human views' aligned columns (bin/common.c
 * table_cols_*): padding counted in UTF-8 characters, right-aligned
 * columns, the last column unpadded and never read for width unless
 * right-aligned, cutting to a width, trailing spaces, lengths given or
 * counted, NCOL lowered between rows, and a buffer that grows.
 */
#include <stdlib.h>
#include <string.h>

#include "t.h"
#include "../../bin/common.h"

/* The table's lines for ROWS (NROW rows of NCOL cells), widened with
 * every row first; WITH_LENS: the lengths given, not counted.  A
 * malloc'd string. */
static char *lines(size_t ncol, unsigned right, const char *const *rows, size_t nrow, int width,
		   int with_lens)
{
	struct table_cols c;
	struct sbuf b = { 0 };
	size_t lens[TABLE_MAXCOL];

	table_cols_init(&c, ncol, right);
	for (int pass = 0; pass < 2; pass++)
		for (size_t r = 0; r < nrow; r++) {
			const char *const *cells = rows + r * ncol;

			for (size_t k = 0; k < ncol; k++)
				lens[k] = strlen(cells[k]);
			if (!pass)
				table_cols_widen(&c, cells, with_lens ? lens : NULL);
			else if (table_cols_line(&c, cells, with_lens ? lens : NULL, width, &b) < 0)
				return NULL;
		}
	return b.s ? b.s : strdup("");
}

static void check_lines(size_t ncol, unsigned right, const char *const *rows, size_t nrow, int width,
			const char *want)
{
	for (int with_lens = 0; with_lens < 2; with_lens++) {
		char *got = lines(ncol, right, rows, nrow, width, with_lens);

		CHECK_STR(got, want);
		free(got);
	}
}

int main(void)
{
	/* Padded to the widest cell, two spaces apart; the last column
	 * unpadded, and a long last cell widens nothing. */
	static const char *const plain[] = {
		"ID", "STATE", "COMMAND",
		"7", "running", "sleep 1",
		"1234", "queued", "a much longer command than any other",
	};
	check_lines(3, 0, plain, 3, 0,
		    "ID    STATE    COMMAND\n"
		    "7     running  sleep 1\n"
		    "1234  queued   a much longer command than any other\n");

	/* Right-aligned columns (bit i: column i), the last one padded too. */
	static const char *const right[] = {
		"ID", "NAME", "ATT",
		"7", "x", "1",
		"1234", "longer", "12",
	};
	check_lines(3, 1u | 4u, right, 3, 0,
		    "  ID  NAME    ATT\n"
		    "   7  x         1\n"
		    "1234  longer   12\n");

	/* Widths in characters, not bytes: "é" and "→" are one each. */
	static const char *const u8[] = {
		"NAME", "X",
		"café", "1",
		"a→b", "2",
	};
	check_lines(2, 0, u8, 3, 0,
		    "NAME  X\n"
		    "café  1\n"
		    "a→b   2\n");

	/* Cut to WIDTH characters (the last column loses, a character is
	 * never split), and the spaces that end a line dropped. */
	static const char *const cut[] = {
		"ID", "NAME", "COMMAND",
		"7", "é→é", "abcdefghij",
		"8", "x", "",
	};
	check_lines(3, 0, cut, 3, 12,
		    "ID  NAME  CO\n"
		    "7   é→é   ab\n"
		    "8   x\n");
	check_lines(3, 0, cut, 3, 9,
		    "ID  NAME\n"
		    "7   é→é\n"
		    "8   x\n");
	/* A width the lines fit in changes nothing. */
	check_lines(3, 0, plain, 3, 1000,
		    "ID    STATE    COMMAND\n"
		    "7     running  sleep 1\n"
		    "1234  queued   a much longer command than any other\n");

	/* A cell wider than its column (widened with other rows) is not
	 * padded; the columns after it move. */
	{
		struct table_cols c;
		struct sbuf b = { 0 };
		static const char *const narrow[] = { "ab", "x", "y" };
		static const char *const wide[] = { "abcdef", "x", "y" };

		table_cols_init(&c, 3, 0);
		table_cols_widen(&c, narrow, NULL);
		CHECK(c.w[0] == 2 && c.w[1] == 1 && c.w[2] == 0);
		CHECK(table_cols_line(&c, wide, NULL, 0, &b) == 0);
		CHECK_STR(b.s, "abcdef  x  y\n");
		free(b.s);
	}

	/* The last column's cell is never read for its width unless it is
	 * right-aligned (a NULL there would crash). */
	{
		struct table_cols c;
		const char *cells[] = { "abc", NULL };
		size_t lens[] = { 3, 0 };

		table_cols_init(&c, 2, 0);
		table_cols_widen(&c, cells, NULL);
		table_cols_widen(&c, cells, lens);
		CHECK(c.w[0] == 3 && c.w[1] == 0);
	}

	/* NCOL lowered between rows and lines: the columns past it are not
	 * shown, and the new last one is not padded. */
	{
		struct table_cols c;
		struct sbuf b = { 0 };
		static const char *const row[] = { "a", "bbbb", "c" };

		table_cols_init(&c, 3, 0);
		table_cols_widen(&c, row, NULL);
		c.ncol = 2;
		CHECK(table_cols_line(&c, row, NULL, 0, &b) == 0);
		CHECK_STR(b.s, "a  bbbb\n");
		free(b.s);
	}

	/* Many lines into one buffer: it grows, each line whole and
	 * NUL-terminated after the last. */
	{
		struct table_cols c;
		struct sbuf b = { 0 };
		static const char *const row[] = { "12345", "a cell of some length to fill the buffer" };
		int ok = 1;

		table_cols_init(&c, 2, 0);
		table_cols_widen(&c, row, NULL);
		for (int i = 0; i < 1000 && ok; i++)
			ok = table_cols_line(&c, row, NULL, 0, &b) == 0;
		CHECK(ok);
		CHECK(b.len == 1000 * strlen("12345  a cell of some length to fill the buffer\n"));
		CHECK(b.s[b.len] == '\0');
		CHECK(!strncmp(b.s + b.len - 48, "12345  a cell of some length to fill the buffer\n", 48));
		free(b.s);
	}

	return T_DONE();
}
