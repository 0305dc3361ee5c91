// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Benchmark: map 64 MiB, write every page, unmap, 40 times: a page fault
 * and an rss_stat event per page. Prints {"ns": elapsed}. An argument sets
 * the number of rounds.
 */
#include <stdlib.h>
#include <time.h>

#include "common.h"

#define ROUNDS 40

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : ROUNDS;
	struct timespec a, b;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &a);
	for (r = 0; r < rounds; r++)
		munmap(map_touch(64 * MiB), 64 * MiB);
	clock_gettime(CLOCK_MONOTONIC, &b);
	report("{\"ns\": %lld}\n",
	       (long long)((b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec)));
	return 0;
}
