// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Many distinct allocation stacks, as a large program's start has:
 *   stacks N
 * allocates SIZE bytes (kept) from each of N distinct call paths, N at most
 * 2^DEPTH: path i goes down DEPTH calls of left() or right() chosen by the
 * bits of i, so that no two share their return addresses. Built with frame
 * pointers. Prints {"stacks": N, "leaf_bytes": N * SIZE, "heap_bytes": all it
 * allocated from the heap} (its own arithmetic).
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define DEPTH 14
#define SIZE 1000

static void **keep;
static int kept;

void left(unsigned int path, int depth);
void right(unsigned int path, int depth);

__attribute__((noinline)) static void leaf(void)
{
	keep[kept] = malloc(SIZE);
	memset(keep[kept++], 1, SIZE);
}

__attribute__((noinline)) void left(unsigned int path, int depth)
{
	if (!depth)
		leaf();
	else if (path & 1)
		left(path >> 1, depth - 1);
	else
		right(path >> 1, depth - 1);
	__asm__ volatile("" ::: "memory");	/* no tail call: each frame stays */
}

__attribute__((noinline)) void right(unsigned int path, int depth)
{
	if (!depth)
		leaf();
	else if (path & 1)
		left(path >> 1, depth - 1);
	else
		right(path >> 1, depth - 1);
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1024;

	if (n < 1 || n > 1 << DEPTH)
		return 2;
	keep = calloc(n, sizeof(*keep));
	if (!keep)
		return 3;
	for (int i = 0; i < n; i++)
		left((unsigned int)i, DEPTH);
	report("{\"stacks\": %d, \"leaf_bytes\": %d, \"heap_bytes\": %zu}\n", n, n * SIZE,
	       (size_t)n * SIZE + n * sizeof(*keep));
	return 0;
}
