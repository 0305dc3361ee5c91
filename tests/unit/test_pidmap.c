// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The PID index: against a plain array under random puts and deletes, and the trail's use of it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "pidmap.h"
#include "trail.h"

#define SPACE 5000	/* PIDs drawn from 1..SPACE: dense, as the kernel gives them */

static void against_array(void **state)
{
	static size_t want[SPACE + 1];	/* index + 1, 0: absent */
	struct pidmap m = { 0 };
	size_t n = 0, i, got;
	unsigned int seed = 1;
	int round;

	(void)state;
	memset(want, 0, sizeof(want));
	for (round = 0; round < 400000; round++) {
		uint32_t pid = 1 + rand_r(&seed) % SPACE;

		/* puts win early (growth), deletes later (long probe runs shrink) */
		if (rand_r(&seed) % 100 < (round < 200000 ? 70 : 35)) {
			assert_int_equal(pidmap__put(&m, pid, round), 0);
			n += !want[pid];
			want[pid] = round + 1;
		} else {
			pidmap__del(&m, pid);
			n -= !!want[pid];
			want[pid] = 0;
		}
		if (round % 997)
			continue;
		assert_int_equal(m.n, n);
		for (i = 1; i <= SPACE; i++) {
			bool found = pidmap__get(&m, i, &got);

			assert_int_equal(found, want[i] != 0);
			if (found)
				assert_int_equal(got, want[i] - 1);
		}
	}
	assert_false(pidmap__get(&m, 0, &got));
	pidmap__free(&m);
	assert_false(pidmap__get(&m, 1, &got));
	pidmap__del(&m, 1);	/* empty: nothing */
}

/* Removal moves the last target into the hole; every pid is still found at its target. */
static void trail_remove_keeps_index(void **state)
{
	struct trail t;
	size_t i;
	uint32_t pid;

	(void)state;
	assert_int_equal(trail__init(&t), 0);
	for (pid = 100; pid < 1100; pid++)
		assert_non_null(trail__add_target(&t, pid));
	/* a reused pid: the newest target is the one found */
	assert_non_null(trail__add_target(&t, 151));
	assert_ptr_equal(trail__find_target(&t, 151), &t.targets[t.n_targets - 1]);
	for (pid = 100; pid < 1100; pid += 3)
		trail__remove_target(&t, trail__find_target(&t, pid));
	assert_int_equal(t.n_targets, 1001 - 334);
	for (pid = 100; pid < 1100; pid++) {
		struct trail_target *tt = trail__find_target(&t, pid);

		if ((pid - 100) % 3 == 0) {
			/* 151's newest went; its older target is not found again */
			assert_null(tt);
			continue;
		}
		assert_non_null(tt);
		assert_int_equal(tt->pid, pid);
	}
	for (i = 0; i < t.n_targets; i++)
		if (t.targets[i].pid != 151)
			assert_ptr_equal(trail__find_target(&t, t.targets[i].pid), &t.targets[i]);
	trail__free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(against_array),
		cmocka_unit_test(trail_remove_keeps_index),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
