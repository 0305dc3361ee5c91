// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Units for people, number parsing, kind names, argv joining, cgroup lines. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cgroup.h"
#include "format.h"
#include "kinds.h"
#include "proc.h"

static void bytes_human(void **state)
{
	char b[32];

	(void)state;
	assert_string_equal(format__bytes(b, sizeof(b), 0), "0 B");
	assert_string_equal(format__bytes(b, sizeof(b), 1023), "1023 B");
	assert_string_equal(format__bytes(b, sizeof(b), 1024), "1.00 KiB");
	assert_string_equal(format__bytes(b, sizeof(b), 1536), "1.50 KiB");
	assert_string_equal(format__bytes(b, sizeof(b), 100 * 1024 * 1024), "100.0 MiB");
	assert_string_equal(format__bytes(b, sizeof(b), 3LL << 30), "3.00 GiB");
	assert_string_equal(format__bytes(b, sizeof(b), -4096), "-4.00 KiB");
}

static void parse_u64_bounds(void **state)
{
	uint64_t v = 0;

	(void)state;
	assert_int_equal(format__parse_u64("100", 10, 60000, &v), 0);
	assert_int_equal(v, 100);
	assert_int_equal(format__parse_u64("5", 10, 60000, &v), -ERANGE);
	assert_int_equal(format__parse_u64("99999999999999999999999", 0, UINT64_MAX, &v), -ERANGE);
	assert_int_equal(format__parse_u64("12x", 0, 100, &v), -EINVAL);
	assert_int_equal(format__parse_u64("", 0, 100, &v), -EINVAL);
	assert_int_equal(format__parse_u64("-1", 0, 100, &v), -EINVAL);
	assert_int_equal(format__parse_u64(" 1", 0, 100, &v), -EINVAL);
	assert_int_equal(format__parse_u64(NULL, 0, 100, &v), -EINVAL);
}

/* A UTF-8 character that snprintf cut short at the end goes; whole ones stay. */
static void utf8_whole_characters(void **state)
{
	static const char *const cases[][2] = {
		{ "", "" }, { "abc", "abc" }, { "a\xc3", "a" }, { "a\xc3\xa9", "a\xc3\xa9" },
		{ "a\xe2\x82", "a" }, { "a\xe2\x82\xac", "a\xe2\x82\xac" }, { "\xf0\x9f\x98", "" },
		{ "a\xf0\x9f\x98\x80", "a\xf0\x9f\x98\x80" },
	};
	char buf[16];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(buf, sizeof(buf), "%s", cases[i][0]);
		assert_string_equal(format__utf8_whole(buf), cases[i][1]);
	}
}

static void kind_names_stable(void **state)
{
	static const char *const want[] = {
		"heap", "mapped", "rss_anon", "rss_file", "rss_shmem", "cuda_device",
		"cuda_host", "cuda_managed", "neuron_device", "neuron_host",
	};
	int k;

	(void)state;
	assert_int_equal(MEMTRAIL_KIND_MAX, 10);
	for (k = 0; k < MEMTRAIL_KIND_MAX; k++) {
		assert_string_equal(kind__name(k), want[k]);
		assert_int_equal(kind__from_name(want[k]), k);
	}
	assert_null(kind__name(-1));
	assert_null(kind__name(MEMTRAIL_KIND_MAX));
	assert_int_equal(kind__from_name("rss"), -1);
}

static void join_args(void **state)
{
	char *s;

	(void)state;
	s = proc__join_args("python3\0-m\0server\0", 18);
	assert_string_equal(s, "python3 -m server");
	free(s);
	s = proc__join_args("a", 1);	/* cut off by the 256-byte limit: no NUL */
	assert_string_equal(s, "a");
	free(s);
}

static void cgroup_lines(void **state)
{
	char *s;

	(void)state;
	s = cgroup__parse_proc("0::/kubepods.slice/pod1/cri-containerd-abc.scope\n");
	assert_string_equal(s, "/kubepods.slice/pod1/cri-containerd-abc.scope");
	free(s);
	s = cgroup__parse_proc("12:cpu,cpuacct:/x\n4:memory:/kubepods/burstable/pod9/c1\n0::/\n");
	assert_string_equal(s, "/kubepods/burstable/pod9/c1");
	free(s);
	s = cgroup__parse_proc("3:blkio,memory:/a b\n");
	assert_string_equal(s, "/a b");
	free(s);
	assert_null(cgroup__parse_proc(""));
	assert_null(cgroup__parse_proc("garbage"));
}

/* Byte-count options: 0 to 2^shift, the whole string, the value untouched when refused. */
static void option_bytes(void **state)
{
	const char *bad[] = { "", "abc", "-1", "1099511627777", "12k", " 5", "1e3" };
	uint64_t v = 7;
	size_t i;

	(void)state;
	assert_int_equal(format__option_bytes("--x", "0", 40, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(format__option_bytes("--x", "1099511627776", 40, &v), 0);
	assert_int_equal(v, 1ULL << 40);
	assert_int_equal(format__option_bytes("--x", "1125899906842624", 50, &v), 0);
	assert_int_equal(v, 1ULL << 50);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 7;
		assert_int_equal(format__option_bytes("--x", bad[i], 40, &v), -EINVAL);
		assert_int_equal(v, 7);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bytes_human),
		cmocka_unit_test(parse_u64_bounds),
		cmocka_unit_test(utf8_whole_characters),
		cmocka_unit_test(kind_names_stable),
		cmocka_unit_test(join_args),
		cmocka_unit_test(cgroup_lines),
		cmocka_unit_test(option_bytes),
	};

	return cmocka_run_group_tests_name("format", tests, NULL, NULL);
}
