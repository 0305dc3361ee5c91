// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Allocation sites with known bytes: each named function below allocates a
 * fixed amount in a named phase, and the program prints, as one JSON line,
 * what each function allocated and left in use (its own arithmetic). No
 * stdio before the end, so nothing else of note allocates in its phases.
 *
 *   load:  load_weights   malloc   1000 x 4000 B, kept
 *          map_cache      mmap     3 x 8 MiB, one unmapped
 *   serve: serve_requests calloc   2000 x (10 x 100 B), each freed
 *          grow_buffer    realloc  1000, 2000, ... 10000 B, the last kept
 *          aligned_blocks posix_memalign 10 x 5000 B, kept
 *   hold:  (holds a moment, like a server, then exits)
 *
 * "stripped" as argv[1] does the same; the tests run a stripped copy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "memtrail_marker.h"

#define WEIGHTS 1000
#define WEIGHT_SIZE 4000
#define CACHE_SIZE (8UL << 20)
#define REQUESTS 2000
#define BLOCKS 10
#define BLOCK_SIZE 5000

static void *keep[WEIGHTS + BLOCKS + 1];
/* where each request's buffer goes: the compiler may not drop the pair */
void *volatile sink;

__attribute__((noinline)) void load_weights(void)
{
	for (int i = 0; i < WEIGHTS; i++) {
		keep[i] = malloc(WEIGHT_SIZE);
		memset(keep[i], 1, WEIGHT_SIZE);
	}
}

__attribute__((noinline)) void map_cache(void)
{
	void *c[3];

	for (int i = 0; i < 3; i++) {
		c[i] = mmap(NULL, CACHE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			    -1, 0);
		if (c[i] == MAP_FAILED)
			_exit(3);
	}
	munmap(c[2], CACHE_SIZE);
}

__attribute__((noinline)) void serve_requests(void)
{
	for (int i = 0; i < REQUESTS; i++) {
		char *p = calloc(10, 100);

		sink = p;
		free(sink);
	}
}

__attribute__((noinline)) void grow_buffer(void)
{
	void *p = NULL;

	for (int i = 1; i <= 10; i++)
		p = realloc(p, i * 1000);
	keep[WEIGHTS] = p;
}

__attribute__((noinline)) void aligned_blocks(void)
{
	for (int i = 0; i < BLOCKS; i++)
		if (posix_memalign(&keep[WEIGHTS + 1 + i], 64, BLOCK_SIZE))
			_exit(4);
}

int main(void)
{
	struct timespec hold = { 0, 700 * 1000 * 1000 };
	static char out[2048];
	int n;

	memtrail_phase("load");
	load_weights();
	map_cache();
	memtrail_phase("serve");
	serve_requests();
	grow_buffer();
	aligned_blocks();
	memtrail_phase("hold");
	nanosleep(&hold, NULL);
	n = snprintf(out, sizeof(out),
		"{\"load_weights\": {\"kind\": \"heap\", \"phase\": \"load\", \"alloc_bytes\": %d, "
		"\"alloc_objects\": %d, \"inuse_bytes\": %d},"
		" \"map_cache\": {\"kind\": \"mapped\", \"phase\": \"load\", \"alloc_bytes\": %lu, "
		"\"alloc_objects\": 3, \"inuse_bytes\": %lu},"
		" \"serve_requests\": {\"kind\": \"heap\", \"phase\": \"serve\", \"alloc_bytes\": %d, "
		"\"alloc_objects\": %d, \"inuse_bytes\": 0},"
		" \"grow_buffer\": {\"kind\": \"heap\", \"phase\": \"serve\", \"alloc_bytes\": %d, "
		"\"alloc_objects\": 10, \"inuse_bytes\": 10000},"
		" \"aligned_blocks\": {\"kind\": \"heap\", \"phase\": \"serve\", \"alloc_bytes\": %d, "
		"\"alloc_objects\": %d, \"inuse_bytes\": %d}}\n",
		WEIGHTS * WEIGHT_SIZE, WEIGHTS, WEIGHTS * WEIGHT_SIZE,
		3 * CACHE_SIZE, 2 * CACHE_SIZE,
		REQUESTS * 1000, REQUESTS,
		55 * 1000,
		BLOCKS * BLOCK_SIZE, BLOCKS, BLOCKS * BLOCK_SIZE);
	if (write(1, out, n) != n)
		return 1;
	return 0;
}
