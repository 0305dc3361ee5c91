// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Benchmark: a tight malloc/free loop; prints {"ns": elapsed}. */
#include <stdint.h>
#include <time.h>

#include "common.h"

#define ITERATIONS 30000000L

int main(void)
{
	struct timespec a, b;
	void *volatile p;
	long i;

	clock_gettime(CLOCK_MONOTONIC, &a);
	for (i = 0; i < ITERATIONS; i++) {
		p = malloc(64 + (i & 63));
		free(p);
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	report("{\"ns\": %lld}\n",
	       (long long)((b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec)));
	return 0;
}
