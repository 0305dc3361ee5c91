// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * memtrail's cost per driver call and per live allocation, on the
 * libcuda.so.1 stand-in:
 *   device_bench [--wait] pairs N   cuInit, then N x (cuMemAlloc_v2 256 B +
 *                                   cuMemFree_v2), only the loop timed;
 *                                   prints {"pairs": N, "ns_per_pair": X}
 *   device_bench [--wait] live N    cuInit, N x cuMemAlloc_v2 16 B kept live;
 *                                   prints {"live": N, "ready": true}, waits
 *                                   for a byte on stdin, frees them all and
 *                                   prints {"freed": N}
 */
#include <time.h>

#include "common.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

CUresult cuInit(unsigned int Flags);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemFree_v2(CUdeviceptr dptr);

static void fail(const char *what, long i, CUresult rc)
{
	dprintf(2, "device_bench: %s #%ld: %d\n", what, i, rc);
	exit(1);
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int pairs(long n)
{
	CUdeviceptr d;
	CUresult rc;
	double t0, t1;
	long i;

	t0 = now_ns();
	for (i = 0; i < n; i++) {
		rc = cuMemAlloc_v2(&d, 256);
		if (rc)
			fail("cuMemAlloc_v2", i, rc);
		rc = cuMemFree_v2(d);
		if (rc)
			fail("cuMemFree_v2", i, rc);
	}
	t1 = now_ns();
	report("{\"pairs\": %ld, \"ns_per_pair\": %.1f}\n", n, n ? (t1 - t0) / n : 0.0);
	return 0;
}

static int live(long n)
{
	size_t len = (size_t)n * sizeof(CUdeviceptr);
	CUdeviceptr *ptrs;
	CUresult rc;
	char c;
	long i;

	/* from mmap, not malloc: the stand-in's malloc heap holds only the blocks */
	ptrs = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ptrs == MAP_FAILED)
		_exit(3);
	for (i = 0; i < n; i++) {
		rc = cuMemAlloc_v2(&ptrs[i], 16);
		if (rc)
			fail("cuMemAlloc_v2", i, rc);
	}
	report("{\"live\": %ld, \"ready\": true}\n", n);
	if (read(0, &c, 1) != 1)
		_exit(2);
	for (i = 0; i < n; i++) {
		rc = cuMemFree_v2(ptrs[i]);
		if (rc)
			fail("cuMemFree_v2", i, rc);
	}
	munmap(ptrs, len ? len : 1);
	report("{\"freed\": %ld}\n", n);
	return 0;
}

int main(int argc, char **argv)
{
	int first = argc > 1 && !strcmp(argv[1], "--wait") ? 2 : 1;
	CUresult rc;
	long n;

	if (argc != first + 2 || (strcmp(argv[first], "pairs") && strcmp(argv[first], "live"))) {
		dprintf(2, "usage: device_bench [--wait] pairs|live N\n");
		return 2;
	}
	n = strtol(argv[first + 1], NULL, 10);
	if (n < 0) {
		dprintf(2, "device_bench: N must be >= 0\n");
		return 2;
	}
	wait_go(argc, argv);
	rc = cuInit(0);
	if (rc)
		fail("cuInit", 0, rc);
	return !strcmp(argv[first], "pairs") ? pairs(n) : live(n);
}
