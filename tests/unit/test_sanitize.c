// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Names for terminals and logs: controls and bad UTF-8 as \xNN, the rest as it is. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sanitize.h"

static void expect(const char *in, const char *want)
{
	char buf[256];

	assert_string_equal(sanitize__str(buf, sizeof(buf), in), want);
}

static void controls_escaped(void **state)
{
	(void)state;
	expect("server", "server");
	expect("", "");
	expect(NULL, "?");
	expect("a b~!\"'{}", "a b~!\"'{}");
	expect("\x1b]0;pwned\x07\x1b[2J", "\\x1b]0;pwned\\x07\\x1b[2J");
	expect("two\nlines\r\t", "two\\x0alines\\x0d\\x09");
	expect("del\x7f", "del\\x7f");
	/* the backslash itself, so that \x1b in a name reads back as what it was */
	expect("a\\x1b", "a\\\\x1b");
	/* C1 controls as UTF-8 (CSI is U+009B): both bytes */
	expect("\xc2\x9b" "31m", "\\xc2\\x9b" "31m");
	expect("\xc2\x80\xc2\x9f", "\\xc2\\x80\\xc2\\x9f");
}

static void utf8_kept_or_escaped(void **state)
{
	(void)state;
	/* valid UTF-8 as it is: two, three and four bytes, NBSP just past C1 */
	expect("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\xa7 \xc2\xa0",
	       "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\xa7 \xc2\xa0");
	/* invalid: a stray byte, a cut sequence, overlong, surrogate, past U+10FFFF */
	expect("a\xff" "b", "a\\xff" "b");
	expect("ab\xc3", "ab\\xc3");
	expect("\xe2\x82" "x", "\\xe2\\x82" "x");
	expect("\xc0\xaf", "\\xc0\\xaf");
	expect("\xe0\x80\xaf", "\\xe0\\x80\\xaf");
	expect("\xed\xa0\x80", "\\xed\\xa0\\x80");
	expect("\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80");
	expect("\x80", "\\x80");
}

static void cut_at_whole_characters(void **state)
{
	char buf[8];

	(void)state;
	/* 7 bytes of room: "ab" and one \xNN fit, a second does not start */
	assert_string_equal(sanitize__str(buf, sizeof(buf), "ab\x1b\x1b"), "ab\\x1b");
	assert_string_equal(sanitize__str(buf, 6, "ab\x1b"), "ab");
	assert_string_equal(sanitize__str(buf, 4, "\xe2\x82\xac\xe2\x82\xac"), "\xe2\x82\xac");
	assert_string_equal(sanitize__str(buf, 3, "\xe2\x82\xac"), "");
	assert_string_equal(sanitize__str(buf, 2, "\\"), "");
	assert_string_equal(sanitize__str(buf, 1, "abc"), "");
}

static void json_expect(const char *in, const char *want)
{
	json_t *j = sanitize__json(in);

	assert_non_null(j);
	assert_true(json_is_string(j));
	assert_string_equal(json_string_value(j), want);
	json_decref(j);
}

/* JSON holds only UTF-8: other bytes as \xNN, everything valid as it is */
static void json_strings(void **state)
{
	json_t *j;

	(void)state;
	json_expect("plain", "plain");
	json_expect("tab\tnl\n\x1b[2J\\", "tab\tnl\n\x1b[2J\\");
	json_expect("caf\xc3\xa9\xc2\x85", "caf\xc3\xa9\xc2\x85");
	json_expect("a\xff" "b\xc3", "a\\xffb\\xc3");
	json_expect("\xe2\x82\xac\xe2\x82", "\xe2\x82\xac\\xe2\\x82");
	json_expect("\xed\xa0\x80", "\\xed\\xa0\\x80");	/* a surrogate */
	json_expect("\xc0\xaf", "\\xc0\\xaf");		/* overlong '/' */
	j = sanitize__json(NULL);
	assert_true(json_is_null(j));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(controls_escaped),
		cmocka_unit_test(utf8_kept_or_escaped),
		cmocka_unit_test(cut_at_whole_characters),
		cmocka_unit_test(json_strings),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
