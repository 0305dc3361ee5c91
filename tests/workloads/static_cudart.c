// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * A program with its own CUDA runtime layer as LOCAL symbols, as nvcc's
 * default --cudart static leaves cudaMalloc and friends: 't' in .symtab,
 * absent from .dynsym. cudaMalloc and cudaFree reach the driver stand-in
 * (cuMemAlloc_v2, cuMemFree_v2); cudaMallocHost and cudaFreeHost do not
 * (plain malloc), so memtrail sees that host memory only through the
 * runtime's symbols. Device memory must be counted once, not per layer.
 *   runtime_init  cuInit; device +10 +6 -6 -10, host +3 -3 (MiB)
 * Prints the ledger as JSON.
 *   static_cudart [--wait]
 */
#include "common.h"
#include "ledger.h"

typedef int CUresult;
typedef int cudaError_t;
typedef unsigned long long CUdeviceptr;

CUresult cuInit(unsigned int Flags);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemFree_v2(CUdeviceptr dptr);

/*
 * noinline and noclone keep each a function of its own under its exact
 * name (no inlining, no .constprop/.isra copies); used keeps it at all.
 */
#define RUNTIME static __attribute__((noinline, noclone, used))

/* The driver's codes 0..3 are the runtime's too: 2 is cudaErrorMemoryAllocation. */
RUNTIME cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	CUdeviceptr d;
	CUresult rc;

	if (!devPtr)
		return 1;
	rc = cuMemAlloc_v2(&d, size);
	if (!rc)
		*devPtr = (void *)(uintptr_t)d;
	return rc;
}

RUNTIME cudaError_t cudaFree(void *devPtr)
{
	return cuMemFree_v2((CUdeviceptr)(uintptr_t)devPtr);
}

RUNTIME cudaError_t cudaMallocHost(void **ptr, size_t size)
{
	if (!ptr)
		return 1;
	/* not touched: virtual size, no RSS */
	*ptr = malloc(size);
	return *ptr ? 0 : 2;
}

RUNTIME cudaError_t cudaFreeHost(void *ptr)
{
	free(ptr);
	return 0;
}

static struct jbuf out;

int main(int argc, char **argv)
{
	void *a, *b, *h;

	wait_go(argc, argv);

	ledger_phase("runtime_init");
	MUST(cuInit(0));
	MUST(cudaMalloc(&a, 10 * MiB));
	ledger_alloc(LK_CUDA_DEVICE, a, 10 * MiB);
	MUST(cudaMalloc(&b, 6 * MiB));
	ledger_alloc(LK_CUDA_DEVICE, b, 6 * MiB);
	MUST(cudaMallocHost(&h, 3 * MiB));
	ledger_alloc(LK_CUDA_HOST, h, 3 * MiB);
	MUST(cudaFree(b));
	ledger_free(b);
	MUST(cudaFreeHost(h));
	ledger_free(h);
	MUST(cudaFree(a));
	ledger_free(a);

	jb_printf(&out, "{");
	ledger_json(&out);
	jb_printf(&out, "}\n");
	jb_write(&out);
	return 0;
}
