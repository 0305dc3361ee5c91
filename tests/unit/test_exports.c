// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The Perfetto and pprof exports of trails as anyone may write them: a time
 * their format cannot hold is refused (ERANGE), a label cut to fit is cut
 * between characters.
 */
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

#include "kinds.h"
#include "perfetto.h"
#include "pprof.h"
#include "trail.h"

static void make_trail(struct trail *t)
{
	int64_t level[MEMTRAIL_KIND_MAX] = { 0 };
	struct trail_target *tt;

	assert_int_equal(trail__init(t), 0);
	t->kinds = 1U << MEMTRAIL_KIND_MAPPED;
	t->duration_ms = 1000;
	tt = trail__add_target(t, 42);
	assert_non_null(tt);
	snprintf(tt->comm, sizeof(tt->comm), "svc");
	level[MEMTRAIL_KIND_MAPPED] = 4096;
	assert_int_equal(trail__add_sample(tt, 100, level), 0);
}

/* perfetto__write to a new file: its error, and the file removed. */
static int perfetto(const struct trail *t, size_t *n)
{
	char path[] = "/tmp/memtrail-unit-XXXXXX";
	int fd = mkstemp(path), err;

	assert_true(fd >= 0);
	close(fd);
	err = perfetto__write(t, path, n);
	unlink(path);
	return err;
}

/*
 * Microseconds of a time in milliseconds past INT64_MAX / 1000 overflow
 * (found by reading the code, then by the fuzzer's harness): refused.
 */
static void perfetto_refuses_times_beyond_microseconds(void **state)
{
	struct trail t;
	size_t n = 0;

	(void)state;
	make_trail(&t);
	assert_int_equal(perfetto(&t, &n), 0);
	assert_int_equal(n, 3);		/* two names, one counter */
	t.targets[0].timeline[0].t_ms = INT64_MAX / 1000;
	assert_int_equal(perfetto(&t, &n), 0);
	t.targets[0].timeline[0].t_ms = INT64_MAX / 1000 + 1;
	assert_int_equal(perfetto(&t, &n), -ERANGE);
	t.targets[0].timeline[0].t_ms = 100;
	assert_int_equal(trail__add_event(&t, json_pack("{s:s, s:i, s:I}", "type", "oom", "pid", 42,
							"t_ms", (json_int_t)-1)), 0);
	assert_int_equal(perfetto(&t, &n), -ERANGE);
	trail__free(&t);
}

/* A verdict is an instant of its own, its fields the instant's args. */
static void perfetto_has_the_verdict(void **state)
{
	struct trail t;
	size_t n, with;

	(void)state;
	make_trail(&t);
	assert_int_equal(perfetto(&t, &n), 0);
	t.targets[0].verdict = calloc(1, sizeof(struct verdict));
	assert_non_null(t.targets[0].verdict);
	t.targets[0].verdict->cause = VERDICT_SIGNAL;
	t.targets[0].verdict->sender.pid = 1;
	assert_int_equal(perfetto(&t, &with), 0);
	assert_int_equal(with, n + 1);
	trail__free(&t);
}

/* A duration in nanoseconds past INT64_MAX (found by reading, then by the harness): refused. */
static void pprof_refuses_duration_beyond_nanoseconds(void **state)
{
	char path[] = "/tmp/memtrail-unit-XXXXXX";
	struct trail t;
	size_t n;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	make_trail(&t);
	t.duration_ms = INT64_MAX / 1000000;
	assert_int_equal(pprof__write(&t, path, &n), 0);
	t.duration_ms = INT64_MAX / 1000000 + 1;
	assert_int_equal(pprof__write(&t, path, &n), -ERANGE);
	unlink(path);
	trail__free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(perfetto_refuses_times_beyond_microseconds),
		cmocka_unit_test(perfetto_has_the_verdict),
		cmocka_unit_test(pprof_refuses_duration_beyond_nanoseconds),
	};

	return cmocka_run_group_tests_name("exports", tests, NULL, NULL);
}
