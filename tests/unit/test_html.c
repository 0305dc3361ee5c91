// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The HTML report's data: decimation keeps every peak and trough, strings stay data. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "html.h"
#include "kinds.h"
#include "trail.h"

#define HOSTILE "</script><b>\"'&"
#define N 10000

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, n + 1);
	assert_int_equal(fread(buf, 1, n, f), n);
	fclose(f);
	return buf;
}

/* The JSON the page draws from, parsed back. */
static json_t *page_data(const char *page)
{
	const char *open = "id=\"memtrail-data\">", *a = strstr(page, open), *b;
	json_error_t jerr;
	json_t *root;

	assert_non_null(a);
	a += strlen(open);
	b = strstr(a, "</script>");
	assert_non_null(b);
	root = json_loadb(a, b - a, 0, &jerr);
	if (!root)
		fail_msg("page data: %s", jerr.text);
	return root;
}

static void make_trail(struct trail *t, size_t n)
{
	int64_t level[MEMTRAIL_KIND_MAX] = { 0 };
	struct trail_phase p = { .start_ms = 0, .end_ms = n * 100 };
	struct trail_target *tt;
	size_t i;

	assert_int_equal(trail__init(t), 0);
	t->kinds = kind__sourced();
	t->interval_ms = 100;
	t->duration_ms = n * 100;
	tt = trail__add_target(t, 77);
	assert_non_null(tt);
	snprintf(tt->comm, sizeof(tt->comm), "%s", HOSTILE);
	snprintf(p.name, sizeof(p.name), "%s<!--", HOSTILE);
	assert_int_equal(phase_log__push(&tt->phases, &p), 0);
	for (i = 0; i < n; i++) {
		/*
		 * a saw tooth, one spike of one sample and one dip of one sample;
		 * mapped (a line of its own) spikes where rss_anon does not
		 */
		level[MEMTRAIL_KIND_MAPPED] = i == 1234 ? 1LL << 32 : (1 << 20) + (i % 97) * 4096;
		level[MEMTRAIL_KIND_RSS_ANON] = i == 4321 ? 1LL << 33 : i == 777 ? 0 : 1 << 20;
		assert_int_equal(trail__add_sample(tt, i * 100, level), 0);
	}
}

static void write_page(struct trail *t, bool *decimated, char **page, json_t **data)
{
	char path[] = "/tmp/memtrail-unit-XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(html__write(t, path, decimated), 0);
	*page = slurp(path);
	*data = page_data(*page);
	unlink(path);
}

static void decimation_keeps_extremes(void **state)
{
	json_t *data, *tgt, *ts, *anon, *mapped;
	struct trail t;
	bool decimated;
	char *page;
	size_t i, n;
	int64_t max = 0, min = INT64_MAX, mapped_max = 0;

	(void)state;
	make_trail(&t, N);
	write_page(&t, &decimated, &page, &data);
	assert_true(decimated);
	assert_true(json_is_true(json_object_get(data, "decimated")));
	tgt = json_array_get(json_object_get(data, "targets"), 0);
	ts = json_object_get(tgt, "t");
	anon = json_object_get(json_object_get(tgt, "v"), "rss_anon");
	mapped = json_object_get(json_object_get(tgt, "v"), "mapped");
	n = json_array_size(ts);
	/* per bucket the extremes of the resident sum and of the mapped line */
	assert_true(n <= 2 * 2 * HTML_BUCKETS + 1);
	assert_true(n < N);
	assert_int_equal(json_array_size(anon), n);
	assert_int_equal(json_integer_value(json_object_get(data, "drawn")), n);
	assert_int_equal(json_integer_value(json_object_get(data, "samples")), N);
	for (i = 0; i < n; i++) {
		int64_t v = json_integer_value(json_array_get(anon, i));

		max = v > max ? v : max;
		min = v < min ? v : min;
		v = json_integer_value(json_array_get(mapped, i));
		mapped_max = v > mapped_max ? v : mapped_max;
		/* in time order */
		if (i)
			assert_true(json_integer_value(json_array_get(ts, i)) >
				    json_integer_value(json_array_get(ts, i - 1)));
	}
	assert_int_equal(max, 1LL << 33);
	assert_int_equal(min, 0);
	assert_int_equal(mapped_max, 1LL << 32);
	/* the last sample is drawn */
	assert_int_equal(json_integer_value(json_array_get(ts, n - 1)), (N - 1) * 100);
	json_decref(data);
	free(page);
	trail__free(&t);
}

static void few_samples_kept_and_strings_escaped(void **state)
{
	json_t *data, *tgt;
	struct trail t;
	bool decimated;
	char *page, *p;
	int closes = 0;

	(void)state;
	make_trail(&t, 50);
	write_page(&t, &decimated, &page, &data);
	assert_false(decimated);
	tgt = json_array_get(json_object_get(data, "targets"), 0);
	assert_int_equal(json_array_size(json_object_get(tgt, "t")), 50);
	/* the strings come back whole from the data ... */
	assert_string_equal(json_string_value(json_object_get(tgt, "comm")), HOSTILE);
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(json_object_get(tgt, "phases"), 0), "name")), HOSTILE "<!--");
	/* ... and never appear raw in the page: its two script elements end once each */
	for (p = page; (p = strstr(p, "</script>")); p++)
		closes++;
	assert_int_equal(closes, 2);
	assert_null(strstr(page, "<b>"));
	assert_null(strstr(page, "<!--"));
	/* only the kinds with a non-zero level are drawn */
	assert_int_equal(json_array_size(json_object_get(tgt, "kinds")), 2);
	json_decref(data);
	free(page);
	trail__free(&t);
}

/*
 * A file's timeline out of time order, its levels adding up beyond 64 bits
 * (found by the fuzzer's harness: a division by zero when the last sample
 * is 1 ms before the first): decimated all the same, the last sample drawn.
 */
static void decimates_disorderly_timeline(void **state)
{
	int64_t level[MEMTRAIL_KIND_MAX] = { 0 };
	json_t *data, *tgt, *ts;
	struct trail t;
	bool decimated;
	char *page;
	size_t i;

	(void)state;
	make_trail(&t, 0);
	for (i = 0; i < 3 * HTML_BUCKETS; i++) {
		level[MEMTRAIL_KIND_MAPPED] = INT64_MAX - i;
		level[MEMTRAIL_KIND_RSS_ANON] = INT64_MAX;
		assert_int_equal(trail__add_sample(&t.targets[0], i ? 1000 + i : 5, level), 0);
	}
	t.targets[0].timeline[3 * HTML_BUCKETS - 1].t_ms = 4;
	write_page(&t, &decimated, &page, &data);
	assert_true(decimated);
	tgt = json_array_get(json_object_get(data, "targets"), 0);
	ts = json_object_get(tgt, "t");
	assert_true(json_array_size(ts) <= 3 * HTML_BUCKETS);
	assert_int_equal(json_integer_value(json_array_get(ts, json_array_size(ts) - 1)), 4);
	json_decref(data);
	free(page);
	trail__free(&t);
}

/* The title, cut to fit, is cut between characters: JSON takes it (found reading the code). */
static void title_cut_between_characters(void **state)
{
	json_t *data;
	struct trail t;
	bool decimated;
	char *page;
	const char *title;
	size_t i;

	(void)state;
	make_trail(&t, 10);
	t.command = malloc(2 * 300 + 2);
	assert_non_null(t.command);
	t.command[0] = 'x';	/* "trail: x" and then two-byte characters: 255 is inside one */
	for (i = 0; i < 300; i++)
		memcpy(t.command + 1 + 2 * i, "\u00e9", 2);
	t.command[1 + 2 * 300] = '\0';
	write_page(&t, &decimated, &page, &data);
	title = json_string_value(json_object_get(data, "title"));
	assert_non_null(title);
	assert_int_equal(strlen(title), 254);
	json_decref(data);
	free(page);
	trail__free(&t);
}

static void write_fails_cleanly(void **state)
{
	struct trail t;
	bool decimated;

	(void)state;
	make_trail(&t, 10);
	assert_int_equal(html__write(&t, "/nonexistent/dir/r.html", &decimated), -ENOENT);
	trail__free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(decimation_keeps_extremes),
		cmocka_unit_test(few_samples_kept_and_strings_escaped),
		cmocka_unit_test(decimates_disorderly_timeline),
		cmocka_unit_test(title_cut_between_characters),
		cmocka_unit_test(write_fails_cleanly),
	};

	return cmocka_run_group_tests_name("html", tests, NULL, NULL);
}
