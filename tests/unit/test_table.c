// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* report's tables from trails that are anyone's files: what they print, never a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "table.h"

/* A trail of one target whose sites are the JSON list TEXT, as the reader takes it. */
static void trail_with_sites(struct trail *t, const char *text)
{
	struct trail_target *tt;
	struct schema s;
	json_error_t jerr;
	json_t *v;
	char err[256];

	assert_int_equal(trail__init(t), 0);
	tt = trail__add_target(t, 42);
	assert_non_null(tt);
	snprintf(tt->comm, sizeof(tt->comm), "app");
	v = json_pack("{s:o}", "list", json_loads(text, 0, &jerr));
	assert_non_null(v);
	schema__init(&s, err, sizeof(err));
	if (trail_sites__from_json(&s, v, &tt->sites))
		fail_msg("sites not read: %s", err);
	json_decref(v);
}

/* What table__print_sites prints for T, malloc'd. */
static char *sites_text(const struct trail *t, size_t top)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	table__print_sites(f, t, top);
	assert_int_equal(fclose(f), 0);
	return buf;
}

static void expect_line(const char *text, const char *line)
{
	const char *p = text;
	size_t n = strlen(line);

	while ((p = strstr(p, line)))
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return;
		else
			p++;
	fail_msg("line '%s' not in:\n%s", line, text);
}

#define SITE_FN(kind, phase, fn, rest) "{\"kind\": " kind ", " phase "\"alloc_bytes\": 100, " \
	"\"inuse_bytes\": 10, \"frames\": [{\"function\": \"" fn "\"}]" rest "}"
#define SITE(kind, phase, rest) SITE_FN(kind, phase, "f", rest)

/* Folded sites without a phase name (the writer leaves out what is not UTF-8): one group, '?' */
static void sites_without_phase_print(void **state)
{
	struct trail t;
	char *text;

	(void)state;
	trail_with_sites(&t, "["
		SITE("\"mapped\"", "\"phase\": \"load\", \"phase_seq\": 1, ", "") ","
		SITE("\"heap\"", "", ", \"folded\": true, \"phase_seq\": null") ","
		SITE("\"faults\"", "", ", \"folded\": true") ","
		SITE("\"faults\"", "\"phase\": \"x\", ", ", \"folded\": true") "]");
	text = sites_text(&t, 5);
	expect_line(text, "allocation sites of 42 (app)");
	expect_line(text, "  load");
	expect_line(text, "    mapped          100 B         10 B  f");
	expect_line(text, "  ? (folded: phases beyond the listed ones)");
	expect_line(text, "    heap            100 B         10 B  f");
	expect_line(text, "    faults          100 B               f");
	expect_line(text, "  x (folded: phases beyond the listed ones)");
	free(text);
	trail__free(&t);
}

/*
 * Listed phases by sequence, then folded names as they first appear; TOP
 * lines per group, sites that read the same one line.
 */
static void sites_grouped_in_time(void **state)
{
	struct trail t;
	char *text;

	(void)state;
	trail_with_sites(&t, "["
		SITE_FN("\"heap\"", "\"phase\": \"b\", ", "h", ", \"folded\": true") ","
		SITE("\"heap\"", "\"phase\": \"late\", ", ", \"phase_seq\": 3") ","
		SITE("\"heap\"", "\"phase\": \"a\", ", ", \"folded\": true") ","
		SITE("\"heap\"", "\"phase\": \"early\", ", ", \"phase_seq\": 1") ","
		SITE("\"heap\"", "\"phase\": \"early\", ", ", \"phase_seq\": 1") ","
		SITE_FN("\"heap\"", "\"phase\": \"b\", ", "g", ", \"folded\": true") ","
		SITE("\"heap\"", "\"phase\": \"b\", ", ", \"folded\": true") "]");
	text = sites_text(&t, 1);
	assert_string_equal(text, "\nallocation sites of 42 (app)\n"
		"  early\n    KIND            ALLOC       IN_USE  SITE\n"
		"    heap            200 B         20 B  f [2 chains]\n"
		"  late\n    KIND            ALLOC       IN_USE  SITE\n"
		"    heap            100 B         10 B  f\n"
		"  b (folded: phases beyond the listed ones)\n    KIND            ALLOC       IN_USE  SITE\n"
		"    heap            100 B         10 B  f\n"
		"    (2 more)\n"
		"  a (folded: phases beyond the listed ones)\n    KIND            ALLOC       IN_USE  SITE\n"
		"    heap            100 B         10 B  f\n");
	free(text);
	trail__free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sites_without_phase_print),
		cmocka_unit_test(sites_grouped_in_time),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
