// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Benchmark: a tight malloc/free loop of N pairs (default 30 million);
 * prints {"ns": elapsed, "pairs": N}.
 */
#include <stdint.h>
#include <time.h>

#include "common.h"

#define ITERATIONS 30000000L

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : ITERATIONS;
	struct timespec a, b;
	void *volatile p;
	long i;

	clock_gettime(CLOCK_MONOTONIC, &a);
	for (i = 0; i < n; i++) {
		p = malloc(64 + (i & 63));
		free(p);
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	report("{\"ns\": %lld, \"pairs\": %ld}\n",
	       (long long)((b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec)), n);
	return 0;
}
