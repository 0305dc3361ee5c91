// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* memtrail top's table: sizes, trends, rows per process and per pod, layout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "topview.h"

#define MiB (1024LL * 1024)
#define ANON MEMTRAIL_KIND_RSS_ANON

/* A live target with NS samples (t_ms, rss_anon) and its current level the last one. */
static void target(struct trail_target *tt, struct trail_sample *tl, uint32_t pid,
		   const char *comm, const char *phase, const int64_t (*samples)[2], size_t ns)
{
	size_t i;

	memset(tt, 0, sizeof(*tt));
	tt->pid = pid;
	snprintf(tt->comm, sizeof(tt->comm), "%s", comm);
	snprintf(tt->phase_name, sizeof(tt->phase_name), "%s", phase);
	for (i = 0; i < ns; i++) {
		memset(&tl[i], 0, sizeof(tl[i]));
		tl[i].t_ms = samples[i][0];
		tl[i].level[ANON] = samples[i][1];
		tl[i].level[MEMTRAIL_KIND_MAPPED] = samples[i][1] + MiB;
		if (samples[i][1] > tt->peak[ANON])
			tt->peak[ANON] = samples[i][1];
	}
	tt->timeline = tl;
	tt->n_samples = ns;
	if (ns)
		memcpy(tt->current, tl[ns - 1].level, sizeof(tt->current));
}

static void sizes_in_six_characters(void **state)
{
	char b[16];

	(void)state;
	assert_string_equal(topview__bytes(b, sizeof(b), 0), "0");
	assert_string_equal(topview__bytes(b, sizeof(b), 512), "512B");
	assert_string_equal(topview__bytes(b, sizeof(b), 1024), "1.00K");
	assert_string_equal(topview__bytes(b, sizeof(b), 48 * MiB), "48.0M");
	assert_string_equal(topview__bytes(b, sizeof(b), 48 * MiB + 100 * 1024), "48.1M");
	assert_string_equal(topview__bytes(b, sizeof(b), 1023 * MiB), "1023M");
	/* rounding would print 1024M: the next unit instead */
	assert_string_equal(topview__bytes(b, sizeof(b), 1023 * MiB + 700 * 1024), "1.00G");
	assert_string_equal(topview__bytes(b, sizeof(b), 3 * MiB * 512), "1.50G");
	assert_string_equal(topview__bytes(b, sizeof(b), -4096), "-4.00K");
	assert_string_equal(topview__rate_text(b, sizeof(b), 0.4), "0/s");
	assert_string_equal(topview__rate_text(b, sizeof(b), 12.0 * MiB), "+12.0M/s");
	assert_string_equal(topview__rate_text(b, sizeof(b), -512.0 * 1024), "-512K/s");
}

static void trend_over_the_window(void **state)
{
	static const int64_t grew[][2] = { { 0, 0 }, { 3000, 10 * MiB }, { 6000, 20 * MiB } };
	static const int64_t idle[][2] = { { 0, 8 * MiB } };
	static const int64_t young[][2] = { { 8000, 4 * MiB }, { 9000, 6 * MiB } };
	struct trail_sample tl[4];
	struct trail_target tt;
	double r = -1;

	(void)state;
	/* window [2000, 7000]: the level at 2000 is the sample at 0 (a step function) */
	target(&tt, tl, 1, "a", "p", grew, 3);
	assert_true(topview__rate(&tt, ANON, 7000, 5000, &r));
	assert_true(r == 20.0 * MiB / 5);
	/* window [4000, 9000]: from the sample at 3000 */
	assert_true(topview__rate(&tt, ANON, 9000, 5000, &r));
	assert_true(r == 10.0 * MiB / 5);
	/* one old sample: flat */
	target(&tt, tl, 1, "a", "p", idle, 1);
	assert_true(topview__rate(&tt, ANON, 60000, 5000, &r));
	assert_true(r == 0);
	/* younger than the window: since its first sample */
	target(&tt, tl, 1, "a", "p", young, 2);
	assert_true(topview__rate(&tt, ANON, 10000, 5000, &r));
	assert_true(r == 2.0 * MiB / 2);
	/* only a sample taken now: no trend yet */
	assert_false(topview__rate(&tt, ANON, 8000, 5000, &r));
}

static void processes_sorted_by_kind(void **state)
{
	static const int64_t a[][2] = { { 0, 8 * MiB } };
	static const int64_t b[][2] = { { 0, 32 * MiB } };
	static const int64_t c[][2] = { { 0, 8 * MiB } };
	struct trail_sample tl[3][1];
	struct trail_target tt[3];
	struct topview v;

	(void)state;
	target(&tt[0], tl[0], 30, "a", "load", a, 1);
	target(&tt[1], tl[1], 20, "b", "serve", b, 1);
	target(&tt[2], tl[2], 10, "c", "start", c, 1);
	topview__init(&v, TOPVIEW_BY_PROCESS, ANON);
	topview__begin(&v);
	for (int i = 0; i < 3; i++)
		assert_int_equal(topview__add(&v, &tt[i], NULL, 1000, 5000), 0);
	assert_int_equal(topview__end(&v, 1000), 0);
	assert_int_equal(v.n_rows, 3);
	assert_int_equal(v.n_procs, 3);
	/* largest first; equal levels by PID */
	assert_int_equal(v.rows[0].pid, 20);
	assert_int_equal(v.rows[1].pid, 10);
	assert_int_equal(v.rows[2].pid, 30);
	assert_string_equal(v.rows[0].phase, "serve");
	assert_true(v.rows[0].has_rate && v.rows[0].rate == 0);
	topview__free(&v);
}

static void pods_folded_with_their_peak(void **state)
{
	static const int64_t big[][2] = { { 0, 0 }, { 1000, 30 * MiB } };
	static const int64_t small[][2] = { { 0, 0 }, { 1000, 10 * MiB } };
	static const int64_t other[][2] = { { 0, 0 }, { 1000, 50 * MiB } };
	struct trail_sample tl[3][2];
	struct trail_target tt[3];
	struct topview v;

	(void)state;
	target(&tt[0], tl[0], 1, "server", "load", big, 2);
	target(&tt[1], tl[1], 2, "sidecar", "idle", small, 2);
	target(&tt[2], tl[2], 3, "bash", "start", other, 2);
	topview__init(&v, TOPVIEW_BY_POD, ANON);
	topview__begin(&v);
	assert_int_equal(topview__add(&v, &tt[1], "ns/pod", 1000, 5000), 0);
	assert_int_equal(topview__add(&v, &tt[0], "ns/pod", 1000, 5000), 0);
	assert_int_equal(topview__add(&v, &tt[2], NULL, 1000, 5000), 0);
	assert_int_equal(topview__end(&v, 1000), 0);
	assert_int_equal(v.n_rows, 2);
	assert_string_equal(v.rows[0].key, "-");
	assert_string_equal(v.rows[1].key, "ns/pod");
	assert_int_equal(v.rows[1].procs, 2);
	assert_int_equal(v.rows[1].level[ANON], 40 * MiB);
	assert_int_equal(v.rows[1].level[MEMTRAIL_KIND_MAPPED], 42 * MiB);
	/* the phase and comm of its largest process */
	assert_string_equal(v.rows[1].phase, "load");
	assert_string_equal(v.rows[1].comm, "server");
	assert_int_equal(v.rows[1].peak, 40 * MiB);
	assert_true(v.rows[1].rate == 40.0 * MiB);

	/* the sidecar freed its memory: the pod's total fell, its peak stays */
	tl[1][1].level[ANON] = 0;
	tt[1].current[ANON] = 0;
	topview__begin(&v);
	assert_int_equal(topview__add(&v, &tt[0], "ns/pod", 2000, 5000), 0);
	assert_int_equal(topview__add(&v, &tt[1], "ns/pod", 2000, 5000), 0);
	assert_int_equal(topview__add(&v, &tt[2], NULL, 2000, 5000), 0);
	assert_int_equal(topview__end(&v, 2000), 0);
	assert_int_equal(v.rows[0].level[ANON], 50 * MiB);
	assert_int_equal(v.rows[1].level[ANON], 30 * MiB);
	assert_int_equal(v.rows[1].peak, 40 * MiB);
	/* a pod gone long enough is forgotten */
	topview__begin(&v);
	assert_int_equal(topview__end(&v, 2000 + TOPVIEW_PEAK_TTL_MS + 1), 0);
	assert_int_equal(v.n_peaks, 0);
	topview__free(&v);
}

static void layout_fits_the_width(void **state)
{
	static const int64_t a[][2] = { { 0, 48 * MiB } };
	struct trail_sample tl[1];
	struct trail_target tt;
	struct topview_layout l;
	struct topview v;
	char buf[512];

	(void)state;
	target(&tt, tl, 4242, "bad\033[2Jcomm", "a_rather_long_phase_name", a, 1);
	topview__init(&v, TOPVIEW_BY_PROCESS, ANON);
	topview__begin(&v);
	assert_int_equal(topview__add(&v, &tt, NULL, 0, 5000), 0);
	assert_int_equal(topview__end(&v, 0), 0);

	topview__layout(&v, 80, &l);
	topview__header(&v, &l, buf, sizeof(buf));
	assert_string_equal(buf, "    PID COMM            PHASE       RSS_ANON RSS_FILE   MAPPED"
				 "     PEAK    TREND");
	topview__line(&v, &l, 0, buf, sizeof(buf));
	assert_true(strlen(buf) <= 80);
	/* no terminal control gets through (shown as \xNN), the phase is cut to its column */
	assert_string_equal(buf, "   4242 bad\\x1b[2Jcomm  a_rather_lo    48.0M        0    49.0M"
				 "    48.0M        -");

	/* 60 columns: only the sort kind's column is left */
	topview__layout(&v, 60, &l);
	topview__header(&v, &l, buf, sizeof(buf));
	assert_string_equal(buf, "    PID COMM            PHASE     RSS_ANON     PEAK    TREND");
	/* narrower still: cut at the edge */
	topview__layout(&v, 40, &l);
	topview__line(&v, &l, 0, buf, sizeof(buf));
	assert_int_equal(strlen(buf), 40);

	/* device memory gets a column; at 80 RSS_FILE makes room for it */
	tt.current[MEMTRAIL_KIND_CUDA_DEVICE] = 1LL << 30;
	topview__begin(&v);
	assert_int_equal(topview__add(&v, &tt, NULL, 0, 5000), 0);
	assert_int_equal(topview__end(&v, 0), 0);
	topview__layout(&v, 80, &l);
	topview__header(&v, &l, buf, sizeof(buf));
	assert_string_equal(buf, "    PID COMM            PHASE       RSS_ANON   MAPPED CUDA_DEV"
				 "     PEAK    TREND");
	/* not a terminal: nothing cut */
	topview__layout(&v, 0, &l);
	topview__line(&v, &l, 0, buf, sizeof(buf));
	assert_non_null(strstr(buf, " a_rather_long_phase_name "));
	assert_non_null(strstr(buf, "1.00G"));
	topview__free(&v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sizes_in_six_characters),
		cmocka_unit_test(trend_over_the_window),
		cmocka_unit_test(processes_sorted_by_kind),
		cmocka_unit_test(pods_folded_with_their_peak),
		cmocka_unit_test(layout_fits_the_width),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
