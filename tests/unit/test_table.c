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

#define SITE_LIVE(kind, fn, inuse) "{\"kind\": \"" kind "\", \"phase\": \"p\", " \
	"\"phase_seq\": 1, \"alloc_bytes\": 1000, \"inuse_bytes\": " inuse ", " \
	"\"frames\": [{\"function\": \"" fn "\"}]}"

/*
 * The top site: the line (label and kind, summed over chains and phases)
 * holding the most live bytes, of a kind or any but faults; none holding any.
 */
static void top_site_sums_lines(void **state)
{
	struct trail t;
	uint64_t bytes = 0;
	char label[64];

	(void)state;
	trail_with_sites(&t, "["
		SITE_LIVE("mapped", "big", "500") "," SITE_LIVE("mapped", "two", "300") ","
		SITE_LIVE("mapped", "two", "300") "," SITE_LIVE("cuda_device", "dev", "400") ","
		SITE_LIVE("faults", "touch", "900") "]");
	assert_int_equal(table__top_site(t.targets[0].sites, -1, label, sizeof(label), &bytes),
			 MEMTRAIL_KIND_MAPPED);
	assert_string_equal(label, "two");
	assert_int_equal(bytes, 600);
	assert_int_equal(table__top_site(t.targets[0].sites, MEMTRAIL_KIND_CUDA_DEVICE, label,
					 sizeof(label), &bytes), MEMTRAIL_KIND_CUDA_DEVICE);
	assert_string_equal(label, "dev");
	assert_int_equal(bytes, 400);
	assert_int_equal(table__top_site(t.targets[0].sites, MEMTRAIL_KIND_HEAP, label,
					 sizeof(label), &bytes), -1);
	trail__free(&t);
	trail_with_sites(&t, "[" SITE_LIVE("mapped", "gone", "0") "]");
	assert_int_equal(table__top_site(t.targets[0].sites, -1, label, sizeof(label), &bytes),
			 -1);
	assert_int_equal(table__top_site(NULL, -1, label, sizeof(label), &bytes), -1);
	trail__free(&t);
}

/* keep_live: the MAX holding the most, most first; those holding none go uncounted. */
static void keep_live_cuts_and_counts(void **state)
{
	struct trail t;
	struct trail_sites *ts;

	(void)state;
	trail_with_sites(&t, "["
		SITE_LIVE("mapped", "a", "1") "," SITE_LIVE("mapped", "b", "0") ","
		SITE_LIVE("mapped", "c", "30") "," SITE_LIVE("mapped", "d", "20") "]");
	ts = t.targets[0].sites;
	assert_int_equal(trail_sites__keep_live(ts, 2), 1);
	assert_int_equal(ts->n, 2);
	assert_string_equal(ts->list[0].frames[0].function, "c");
	assert_string_equal(ts->list[1].frames[0].function, "d");
	assert_int_equal(trail_sites__keep_live(ts, 0), 2);
	assert_int_equal(ts->n, 0);
	trail__free(&t);
}

/*
 * keep_live_and: heap sites (windows: frees unseen) count what was allocated,
 * their in-use zeroed, the MAX_KIND most first, after the live ones.
 */
static void keep_live_and_ranks_heap_by_alloc(void **state)
{
	struct trail t;
	struct trail_sites *ts;

	(void)state;
	trail_with_sites(&t, "["
		SITE_LIVE("heap", "h1", "5") "," SITE_LIVE("mapped", "m1", "7") ","
		SITE_LIVE("heap", "h2", "9") "," SITE_LIVE("mapped", "m2", "0") ","
		SITE_LIVE("mapped", "m3", "8") "," SITE_LIVE("heap", "h3", "1") "]");
	ts = t.targets[0].sites;
	ts->list[0].alloc_bytes = 300;
	ts->list[2].alloc_bytes = 100;
	ts->list[5].alloc_bytes = 200;
	assert_int_equal(trail_sites__keep_live_and(ts, 1, MEMTRAIL_KIND_HEAP, 2), 1);
	assert_int_equal(ts->n, 3);
	assert_string_equal(ts->list[0].frames[0].function, "m3");
	assert_string_equal(ts->list[1].frames[0].function, "h1");
	assert_string_equal(ts->list[2].frames[0].function, "h3");
	assert_int_equal(ts->list[1].inuse_bytes, 0);
	assert_int_equal(ts->list[2].inuse_bytes, 0);
	trail__free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sites_without_phase_print),
		cmocka_unit_test(sites_grouped_in_time),
		cmocka_unit_test(top_site_sums_lines),
		cmocka_unit_test(keep_live_cuts_and_counts),
		cmocka_unit_test(keep_live_and_ranks_heap_by_alloc),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
