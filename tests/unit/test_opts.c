// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The option layer (opts.c): a table's rows parsed by their long and short
 * names, numbers checked against their range, values to functions, the
 * first argument that is not an option, and --help written from the same
 * rows (ranges and defaults as they were before the line was parsed).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "opts.h"

struct t_opts {
	bool flag;
	const char *out;
	uint32_t n;
	uint64_t big;
	int calls;
	const char *last;
};

static int count_call(void *base, const char *arg)
{
	struct t_opts *o = base;

	o->calls++;
	o->last = arg;
	return strcmp(arg, "bad") ? 0 : -EINVAL;
}

static const struct opt rows[] = {
	OPT_ROW_FLAG("flag", 'f', struct t_opts, flag, "a flag"),
	OPT_ROW_STR("output", 'o', "FILE", struct t_opts, out, "where it goes"),
	OPT_ROW_U32("number", 'n', "N", struct t_opts, n, 2, 40, "a number of things", 0),
	{ .type = OPT_U64, .name = "big", .arg = "B", .off = offsetof(struct t_opts, big),
	  .min = 0, .max = 1ULL << 40, .help = "bytes: {range} at most" },
	OPT_ROW_FN("call", 'c', "X", count_call, "repeatable"),
	OPT_ROW_DOC("-- CMD", "a command"),
	OPT_ROW_HELP,
	OPT_ROW_END,
};

static struct t_opts o;
static char help_out[8192];

static void usage(FILE *f, const struct opts_cmd *c)
{
	opts__help(f, c);
}

static int parse(bool stop_at_arg, int *first, ...)
{
	const struct opt_group groups[] = { { "options", rows, &o } };
	const struct opts_cmd cmd = { .name = "t", .groups = groups, .n_groups = 1,
				      .usage = usage, .stop_at_arg = stop_at_arg };
	char *argv[32] = { "t" };
	int argc = 1;
	va_list ap;

	va_start(ap, first);
	while ((argv[argc] = va_arg(ap, char *)))
		argc++;
	va_end(ap);
	return opts__parse(&cmd, argc, argv, first);
}

static void reset(void)
{
	memset(&o, 0, sizeof(o));
	o.n = 7;
}

static void long_and_short_names(void **state)
{
	int first;

	(void)state;
	reset();
	assert_int_equal(parse(false, &first, "--flag", "-o", "x.json", "--number=40",
			       "--big", "1099511627776", "-c", "a", "--call", "b", NULL), 0);
	assert_true(o.flag);
	assert_string_equal(o.out, "x.json");
	assert_int_equal(o.n, 40);
	assert_int_equal(o.big, 1ULL << 40);
	assert_int_equal(o.calls, 2);
	assert_string_equal(o.last, "b");
	assert_int_equal(first, 11);
}

static void numbers_out_of_range_refused(void **state)
{
	int first;

	(void)state;
	reset();
	assert_int_equal(parse(false, &first, "-n", "1", NULL), -EINVAL);
	assert_int_equal(o.n, 7);
	assert_int_equal(parse(false, &first, "-n", "41", NULL), -EINVAL);
	assert_int_equal(parse(false, &first, "-n", "2x", NULL), -EINVAL);
	assert_int_equal(parse(false, &first, "--big", "1099511627777", NULL), -EINVAL);
	assert_int_equal(parse(false, &first, "-c", "bad", NULL), -EINVAL);
}

static void unknown_and_missing_values(void **state)
{
	int first;

	(void)state;
	reset();
	assert_int_equal(parse(false, &first, "--nope", NULL), -EINVAL);
	assert_int_equal(parse(false, &first, "-x", NULL), -EINVAL);
	assert_int_equal(parse(false, &first, "-o", NULL), -EINVAL);
	/* a DOC row is no option */
	assert_int_equal(parse(false, &first, "--", "CMD", NULL), 0);
	assert_int_equal(parse(false, &first, "--\n", NULL), -EINVAL);
}

static void stop_at_the_command(void **state)
{
	int first;

	(void)state;
	reset();
	/* record's -- CMD: the command's own options are its own */
	assert_int_equal(parse(true, &first, "-f", "ls", "-n", "1", NULL), 0);
	assert_int_equal(first, 2);
	assert_int_equal(o.n, 7);
	/* otherwise getopt takes options after arguments too */
	reset();
	assert_int_equal(parse(false, &first, "file", "-n", "3", NULL), 0);
	assert_int_equal(o.n, 3);
}

static void help_from_the_rows(void **state)
{
	const struct opt_group groups[] = { { "options", rows, &o } };
	const struct opts_cmd cmd = { .name = "t", .groups = groups, .n_groups = 1,
				      .usage = usage };
	FILE *f = fmemopen(help_out, sizeof(help_out), "w");
	char *line;

	(void)state;
	reset();
	assert_non_null(f);
	opts__help(f, &cmd);
	fclose(f);
	assert_non_null(strstr(help_out, "options:\n"));
	assert_non_null(strstr(help_out, "  -f, --flag            a flag\n"));
	assert_non_null(strstr(help_out, "  -o, --output FILE     where it goes\n"));
	assert_non_null(strstr(help_out, "  -n, --number N        a number of things, 2..40 (default 7)\n"));
	assert_non_null(strstr(help_out, "      --big B           bytes: 0..1099511627776 (default 0) at most\n"));
	assert_non_null(strstr(help_out, "  -- CMD                a command\n"));
	assert_non_null(strstr(help_out, "  -h, --help            this help\n"));
	for (line = help_out; *line; line = strchr(line, '\n') + 1)
		assert_true(strcspn(line, "\n") <= 79);
}

static void wrapped_at_79(void **state)
{
	char buf[1024];
	FILE *f = fmemopen(buf, sizeof(buf), "w");

	(void)state;
	assert_non_null(f);
	opts__wrap(f, "aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii jjjj kkkk llll mmmm "
		   "nnnn oooo pppp\nnext", 24);
	fclose(f);
	assert_string_equal(buf, "aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii jjjj kkkk\n"
			    "                        llll mmmm nnnn oooo pppp\n"
			    "                        next\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(long_and_short_names),
		cmocka_unit_test(numbers_out_of_range_refused),
		cmocka_unit_test(unknown_and_missing_values),
		cmocka_unit_test(stop_at_the_command),
		cmocka_unit_test(help_from_the_rows),
		cmocka_unit_test(wrapped_at_79),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
