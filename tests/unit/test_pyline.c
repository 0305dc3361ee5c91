// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * co_linetable decoded as the interpreter decodes it: every code object of
 * a few standard-library modules and of a source made to stress the table
 * (long line jumps both ways, multi-line expressions, lines with no
 * location), compiled by the machine's python3 (3.11 on) and by pyenv's
 * 3.10 (its own table format), and each instruction's line compared with
 * what code.co_lines() says.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "pyline.h"

#define PY310 "/root/.pyenv/versions/3.10.13/bin/python3.10"

static const char script[] =
"import sys, types, importlib\n"
"src = 'def stress(a):\\n' + ''.join(\n"
"    '    x%d = (a +\\n        %d)\\n    if x%d > 3:\\n        pass\\n' % (i, i, i) for i in range(300))\n"
"src += '    return [y for y in range(3)\\n            if y]\\n' + '\\n' * 5000 + 'def far(): return 1\\n'\n"
"codes = [compile(src, 'stress.py', 'exec')]\n"
"for name in ('json.decoder', 'argparse', 'asyncio.base_events', 'email.message'):\n"
"    m = importlib.import_module(name)\n"
"    codes.append(compile(open(m.__file__).read(), m.__file__, 'exec'))\n"
"seen = 0\n"
"def walk(c):\n"
"    global seen\n"
"    print('C', c.co_firstlineno, c.co_linetable.hex() or '-')\n"
"    for s, e, l in c.co_lines():\n"
"        print('R', s, e, l or 0)\n"
"    for k in c.co_consts:\n"
"        if isinstance(k, types.CodeType): walk(k)\n"
"for c in codes: walk(c)\n";

static int hexval(char c)
{
	return c >= 'a' ? c - 'a' + 10 : c - '0';
}

static void against(const char *python,
		    int (*decode)(const unsigned char *, size_t, int, uint64_t))
{
	static char line[1 << 22];
	static unsigned char lt[1 << 21];
	size_t lt_len = 0, ranges = 0, codes = 0, i;
	int first = 0, rc;
	FILE *f;
	char path[] = "/tmp/memtrail-pyline-XXXXXX";
	char cmd[128];
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, script, strlen(script)), (ssize_t)strlen(script));
	close(fd);
	snprintf(cmd, sizeof(cmd), "%s %s", python, path);
	f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long s, e;
		int want;

		if (line[0] == 'C') {
			char *hex = strchr(line + 2, ' ');

			assert_non_null(hex);
			first = atoi(line + 2);
			hex++;
			hex[strcspn(hex, "\n")] = '\0';
			lt_len = 0;
			for (i = 0; hex[0] != '-' && hex[2 * i] && hex[2 * i + 1]; i++)
				lt[lt_len++] = (unsigned char)(hexval(hex[2 * i]) << 4 |
							       hexval(hex[2 * i + 1]));
			codes++;
			continue;
		}
		assert_int_equal(sscanf(line, "R %llu %llu %d", &s, &e, &want), 3);
		for (; s < e; s += 2)
			assert_int_equal(decode(lt, lt_len, first, s), want);
		ranges++;
	}
	rc = pclose(f);
	unlink(path);
	assert_int_equal(rc, 0);
	assert_true(codes > 300);
	assert_true(ranges > 3000);
	/* past the end, and a table that is none */
	assert_int_equal(decode(lt, lt_len, first, 1u << 30), 0);
}

static void against_co_lines(void **state)
{
	unsigned char none[1] = { 0x01 };

	(void)state;
	against("python3", pyline__line);
	/* a table that is none */
	assert_int_equal(pyline__line(none, 1, 1, 0), 0);
}

/* 3.10's pairs (pyenv's build: the tests need it, as the Python lines' do) */
static void against_co_lines_310(void **state)
{
	(void)state;
	if (access(PY310, X_OK)) {
		fprintf(stderr, "%s is missing: the tests need pyenv's CPython 3.10\n", PY310);
		fail();
	}
	against(PY310, pyline__line310);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(against_co_lines),
		cmocka_unit_test(against_co_lines_310),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
