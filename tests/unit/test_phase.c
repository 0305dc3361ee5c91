// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The phase log: derived fields, bounded history, aggregates, name rules. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "phase.h"

static struct memtrail_cell seg(int64_t alloc, int64_t freed, int64_t peak)
{
	struct memtrail_cell c;

	memset(&c, 0, sizeof(c));
	c.kinds[MEMTRAIL_KIND_MAPPED].allocated = alloc;
	c.kinds[MEMTRAIL_KIND_MAPPED].freed = freed;
	c.kinds[MEMTRAIL_KIND_MAPPED].current = alloc - freed;
	c.kinds[MEMTRAIL_KIND_MAPPED].peak = peak;
	return c;
}

static void derived_fields(void **state)
{
	struct phase_log l;
	struct memtrail_cell c;
	const int64_t *f;

	(void)state;
	phase_log__init(&l, 0);
	c = seg(100, 0, 100);
	assert_int_equal(phase_log__close(&l, "load", 0, 10, &c), 0);
	c = seg(50, 120, 40);	/* a transient 40 above the start, then a net fall of 70 */
	assert_int_equal(phase_log__close(&l, "run", 10, 20, &c), 0);
	c = seg(10, 0, 10);
	assert_int_equal(phase_log__close(&l, "end", 20, 30, &c), 0);

	f = phase_log__at(&l, 1)->f[MEMTRAIL_KIND_MAPPED];
	assert_int_equal(f[PF_SEGMENT_CHANGE], -70);
	assert_int_equal(f[PF_CUMULATIVE_CURRENT], 30);
	assert_int_equal(f[PF_CUMULATIVE_PEAK], 140);	/* 100 + 40 */
	f = phase_log__at(&l, 2)->f[MEMTRAIL_KIND_MAPPED];
	assert_int_equal(f[PF_CUMULATIVE_CURRENT], 40);
	assert_int_equal(f[PF_CUMULATIVE_PEAK], 140);	/* max(140, 30 + 10) */
	phase_log__free(&l);
}

/* 300 held when first seen (attach): a level the segment fields leave out */
static void baseline_is_a_level_not_allocations(void **state)
{
	struct phase_log l;
	struct memtrail_cell c = seg(50, 20, 60);
	const int64_t *f;

	(void)state;
	phase_log__init(&l, 0);
	/* the kernel: +300 to the level only, then +50 allocated, -20 freed */
	c.kinds[MEMTRAIL_KIND_MAPPED].current += 300;
	c.kinds[MEMTRAIL_KIND_MAPPED].peak = 360;
	assert_int_equal(phase__cell_baseline(&c.kinds[MEMTRAIL_KIND_MAPPED]), 300);
	assert_int_equal(phase_log__close(&l, "start", 0, 10, &c), 0);
	f = phase_log__at(&l, 0)->f[MEMTRAIL_KIND_MAPPED];
	assert_int_equal(f[PF_ALLOCATIONS], 50);
	assert_int_equal(f[PF_DEALLOCATIONS], 20);
	assert_int_equal(f[PF_SEGMENT_CHANGE], 30);
	assert_int_equal(f[PF_SEGMENT_PEAK], 60);
	assert_int_equal(f[PF_CUMULATIVE_CURRENT], 330);
	assert_int_equal(f[PF_CUMULATIVE_PEAK], 360);
	c = seg(10, 40, 10);
	assert_int_equal(phase_log__close(&l, "run", 10, 20, &c), 0);
	f = phase_log__at(&l, 1)->f[MEMTRAIL_KIND_MAPPED];
	assert_int_equal(f[PF_SEGMENT_CHANGE], -30);
	assert_int_equal(f[PF_CUMULATIVE_CURRENT], 300);
	assert_int_equal(l.baseline[MEMTRAIL_KIND_MAPPED], 300);
	/* a segment that fell below its baseline's level: no rise, its peak 0 */
	phase_log__free(&l);
	phase_log__init(&l, 0);
	c = seg(0, 100, 0);
	c.kinds[MEMTRAIL_KIND_MAPPED].current += 300;
	c.kinds[MEMTRAIL_KIND_MAPPED].peak = 300;
	assert_int_equal(phase_log__close(&l, "start", 0, 10, &c), 0);
	f = phase_log__at(&l, 0)->f[MEMTRAIL_KIND_MAPPED];
	assert_int_equal(f[PF_SEGMENT_CHANGE], -100);
	assert_int_equal(f[PF_SEGMENT_PEAK], 0);
	assert_int_equal(f[PF_CUMULATIVE_CURRENT], 200);
	assert_int_equal(f[PF_CUMULATIVE_PEAK], 300);
	phase_log__free(&l);
}

static void bounded_history_keeps_first_and_latest(void **state)
{
	struct memtrail_cell c = seg(4096, 4096, 4096);
	struct phase_log l;
	int i;

	(void)state;
	phase_log__init(&l, 6);	/* the first 3 and the latest 3 */
	for (i = 0; i < 1000; i++) {
		assert_int_equal(phase_log__close(&l, i % 2 ? "b" : "a", i, i + 1, &c), 0);
	}
	assert_int_equal(phase_log__count(&l), 6);
	assert_int_equal(l.folded, 994);
	assert_int_equal(phase_log__at(&l, 0)->start_ms, 0);
	assert_int_equal(phase_log__at(&l, 2)->start_ms, 2);
	assert_int_equal(phase_log__at(&l, 3)->start_ms, 997);
	assert_int_equal(phase_log__at(&l, 5)->start_ms, 999);
	assert_null(phase_log__at(&l, 6));
	/* every closed phase keeps its name by sequence number, listed or folded */
	assert_string_equal(phase_log__name(&l, 0), "a");
	assert_string_equal(phase_log__name(&l, 501), "b");
	assert_string_equal(phase_log__name(&l, 999), "b");
	assert_null(phase_log__name(&l, 1000));
	assert_int_equal(l.n_aggs, 2);
	assert_int_equal(l.aggs[0].count, 500);
	assert_int_equal(l.aggs[0].total[MEMTRAIL_KIND_MAPPED][PF_ALLOCATIONS], 500 * 4096);
	assert_int_equal(l.aggs[0].max[MEMTRAIL_KIND_MAPPED][PF_SEGMENT_PEAK], 4096);
	phase_log__free(&l);
}

static void distinct_names_bounded(void **state)
{
	struct memtrail_cell c = seg(1, 1, 1);
	struct phase_log l;
	char name[32];
	int i;

	(void)state;
	phase_log__init(&l, 10);
	for (i = 0; i < PHASE_NAMES_MAX + 50; i++) {
		snprintf(name, sizeof(name), "request-%d", i);
		assert_int_equal(phase_log__close(&l, name, i, i + 1, &c), 0);
	}
	assert_int_equal(l.n_aggs, PHASE_NAMES_MAX + 1);
	assert_string_equal(l.aggs[PHASE_NAMES_MAX].name, "(other)");
	assert_int_equal(l.aggs[PHASE_NAMES_MAX].count, 50);
	assert_string_equal(phase_log__name(&l, 3), "request-3");
	assert_string_equal(phase_log__name(&l, PHASE_NAMES_MAX + 3), "(other)");
	phase_log__free(&l);
}

static void name_rules(void **state)
{
	char why[128], long_name[70];

	(void)state;
	assert_int_equal(phase__check_name("model_load", why, sizeof(why)), 0);
	assert_int_equal(phase__check_name("step 12: forward", why, sizeof(why)), 0);
	assert_int_equal(phase__check_name("", why, sizeof(why)), -EINVAL);
	assert_int_equal(phase__check_name("a\tb", why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "0x09"));
	assert_int_equal(phase__check_name("caf\xc3\xa9", why, sizeof(why)), -EINVAL);
	memset(long_name, 'x', 63);
	long_name[63] = '\0';
	assert_int_equal(phase__check_name(long_name, why, sizeof(why)), 0);
	long_name[63] = 'x';
	long_name[64] = '\0';
	assert_int_equal(phase__check_name(long_name, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "64 bytes"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(derived_fields),
		cmocka_unit_test(baseline_is_a_level_not_allocations),
		cmocka_unit_test(bounded_history_keeps_first_and_latest),
		cmocka_unit_test(distinct_names_bounded),
		cmocka_unit_test(name_rules),
	};

	return cmocka_run_group_tests_name("phase", tests, NULL, NULL);
}
