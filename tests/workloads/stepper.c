// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * One mapping step per byte read from stdin, "ok" on stdout after each:
 *   stepper +8 -8 +4     (MiB: + maps and touches, - unmaps the newest of that size)
 * Lets a test act between steps (memtrail mark). Exits 0 after the last step.
 */
#include "common.h"

int main(int argc, char **argv)
{
	char *live[64];
	size_t sizes[64], n = 0, j;
	int i;
	char c;

	for (i = 1; i < argc && n < 64; i++) {
		long mib = atol(argv[i]);
		size_t size = (size_t)(mib < 0 ? -mib : mib) * MiB;

		if (read(0, &c, 1) != 1)
			return 2;
		if (mib > 0) {
			live[n] = map_touch(size);
			sizes[n++] = size;
		} else {
			for (j = n; j-- > 0;)
				if (sizes[j] == size)
					break;
			munmap(live[j], size);
			live[j] = live[--n];
			sizes[j] = sizes[n];
		}
		report("ok\n");
	}
	return 0;
}
