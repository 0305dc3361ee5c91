// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * One mapping step per byte read from stdin, "ok" on stdout after each:
 *   stepper +8 -8 +4     (MiB: + maps and touches, - unmaps the newest of that size)
 * Lets a test act between steps (memtrail mark). Exits 0 after the last step.
 */
#include "common.h"

int main(int argc, char **argv)
{
	struct mappings m = { .n = 0 };
	int i;
	char c;

	for (i = 1; i < argc; i++) {
		if (read(0, &c, 1) != 1)
			return 2;
		step(&m, atol(argv[i]));
		report("ok\n");
	}
	return 0;
}
