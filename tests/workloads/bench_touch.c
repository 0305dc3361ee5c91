// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Benchmark: map 64 MiB, write every page, unmap, 40 times: a page fault
 * and an rss_stat event per page. Prints {"ns": elapsed}. An argument sets
 * the number of rounds.
 */
#include <stdlib.h>
#include <time.h>

#include "common.h"

/* SIZE bytes mapped and written page by page, in small pages (no THP: an event per page). */
static char *touch_small_pages(size_t size)
{
	char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	size_t i;

	if (p == MAP_FAILED)
		_exit(3);
	madvise(p, size, MADV_NOHUGEPAGE);
	for (i = 0; i < size; i += PAGE)
		p[i] = 1;
	return p;
}

#define ROUNDS 40

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : ROUNDS;
	struct timespec a, b;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &a);
	for (r = 0; r < rounds; r++)
		munmap(touch_small_pages(64 * MiB), 64 * MiB);
	clock_gettime(CLOCK_MONOTONIC, &b);
	report("{\"ns\": %lld}\n",
	       (long long)((b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec)));
	return 0;
}
