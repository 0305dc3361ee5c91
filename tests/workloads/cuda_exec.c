// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * A CUDA program that execs another without freeing: cuInit, 8 MiB of
 * device memory, 2 MiB of pinned host memory and one VMM handle of 4 MiB
 * (created and mapped), then exec of PROGRAM (default /bin/true). The old
 * address space, and the driver's hold on that memory with it, ends there.
 * Prints {"pid", "device", "host", "vmm"} (bytes held at the exec) first.
 *   cuda_exec [PROGRAM]
 */
#include <errno.h>

#include "common.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct {
	int type;
	int requestedHandleTypes;
	struct {
		int type;
		int id;
	} location;
	void *win32HandleMetaData;
	unsigned long long allocFlags;
} CUmemAllocationProp;

_Static_assert(sizeof(CUmemAllocationProp) == 32, "CUmemAllocationProp is 32 bytes in cuda.h");

CUresult cuInit(unsigned int flags);
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemAllocHost_v2(void **pp, size_t bytesize);
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
		     const CUmemAllocationProp *prop, unsigned long long flags);
CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
			     unsigned long long flags);
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
		  unsigned long long flags);

int main(int argc, char **argv)
{
	CUmemAllocationProp prop = { .type = 1, .location = { .type = 1, .id = 0 } };
	CUmemGenericAllocationHandle h;
	CUdeviceptr d, va;
	CUcontext ctx;
	void *p;
	char *prog = argc > 1 ? argv[1] : "/bin/true";

	MUST(cuInit(0));
	MUST(cuDevicePrimaryCtxRetain(&ctx, 0));
	MUST(cuCtxSetCurrent(ctx));
	MUST(cuMemAlloc_v2(&d, 8 * MiB));
	MUST(cuMemAllocHost_v2(&p, 2 * MiB));
	MUST(cuMemCreate(&h, 4 * MiB, &prop, 0));
	MUST(cuMemAddressReserve(&va, 4 * MiB, 0, 0, 0));
	MUST(cuMemMap(va, 4 * MiB, 0, h, 0));
	dprintf(1, "{\"pid\": %d, \"device\": %lu, \"host\": %lu, \"vmm\": %lu}\n", getpid(),
		8 * MiB, 2 * MiB, 4 * MiB);
	execl(prog, prog, (char *)NULL);
	dprintf(2, "cuda_exec: exec %s: %s\n", prog, strerror(errno));
	return 1;
}
