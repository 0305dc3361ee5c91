// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Enters phase_a and phase_b N times each (default 100000): phase_a maps,
 * touches and unmaps 8 KiB, phase_b 4 KiB. Phases start by --phase rules.
 * With --marker it only names phases "a" and "b" in turn, N times each, by
 * memtrail_phase() and as fast as it can: a burst of phase events. With
 * --wait FIFO it opens FIFO and reads a byte from it before its loop.
 *   phase_loop [N] [--marker | --wait FIFO]
 */
#include "common.h"
#include "memtrail_marker.h"

__attribute__((noinline)) void phase_a(void)
{
	munmap(map_touch(2 * PAGE), 2 * PAGE);
}

__attribute__((noinline)) void phase_b(void)
{
	munmap(map_touch(PAGE), PAGE);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000, i;

	if (argc > 2 && !strcmp(argv[2], "--marker")) {
		for (i = 0; i < n; i++) {
			memtrail_phase("a");
			memtrail_phase("b");
		}
		report("{\"n\": %ld}\n", n);
		return 0;
	}
	if (argc > 3 && !strcmp(argv[2], "--wait")) {
		char c;
		int fd = open(argv[3], O_RDONLY);

		if (fd < 0 || read(fd, &c, 1) != 1)
			_exit(2);
		close(fd);
	}
	for (i = 0; i < n; i++) {
		phase_a();
		phase_b();
	}
	report("{\"n\": %ld}\n", n);
	return 0;
}
