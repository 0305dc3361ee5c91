// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * CUDA virtual memory management through the libcuda.so.1 stand-in, one
 * step per phase (memtrail_phase("vmm_a") ...). Physical memory counts from
 * cuMemCreate until its handle is released AND it is unmapped everywhere
 * (cuda.h), so the frees land in the phase where the last of the two
 * happens (MiB, cuda_device unless said):
 *   A create 2, map, unmap, release              +2 -2
 *   B create 4, map, release                     +4 (still mapped)
 *   C unmap B                                    -4
 *   D create 1, release                          +1 -1
 *   E create 2, map twice, release, unmap one    +2
 *   F unmap the other                            -2
 *   G create 8 on the HOST, map, unmap, release  cuda_host +8 -8
 *   H create 2, map, retain, release twice       +2 (still mapped)
 *   I unmap H                                    -2
 *   J create 2 + 2, map side by side, release    +4
 *   K one unmap over both                        -4
 *   L create 3, map, unmap                       +3 (handle held)
 *   M release L                                  -3
 * After each step cuMemGetInfo_v2 must agree with the device level.
 * Prints the ledger as JSON.
 * With --oom instead, PyTorch's expandable segments as a request fails: 2 MiB
 * handles created and mapped one after another (5 of them), the sixth
 * cuMemCreate fails (CUDA_ERROR_OUT_OF_MEMORY, injected), and every handle
 * is given back at once. Prints {"pid", "live_at_oom": {"count", "bytes"}}.
 *   vmm [--wait] [--oom]
 */
#include "common.h"
#include "ledger.h"
#include "memtrail_marker.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;

typedef struct {
	int type;
	int id;
} CUmemLocation;

typedef struct {
	int type;
	int requestedHandleTypes;
	CUmemLocation location;
	void *win32HandleMetaData;
	unsigned long long allocFlags;
} CUmemAllocationProp;

_Static_assert(sizeof(CUmemAllocationProp) == 32, "CUmemAllocationProp is 32 bytes in cuda.h");

CUresult cuInit(unsigned int Flags);
CUresult cuMemGetInfo_v2(size_t *free, size_t *total);
CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
			     unsigned long long flags);
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size);
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
		     const CUmemAllocationProp *prop, unsigned long long flags);
CUresult cuMemRelease(CUmemGenericAllocationHandle handle);
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
		  unsigned long long flags);
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size);
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr);

#define PINNED 1
#define LOC_DEVICE 1
#define LOC_HOST 2
#define VA_SIZE (32 * MiB)

static struct jbuf out;

static void phase(const char *name)
{
	memtrail_phase(name);
	ledger_phase(name);
}

static CUmemGenericAllocationHandle create(size_t size, int location)
{
	CUmemAllocationProp prop = {
		.type = PINNED,
		.location = { .type = location, .id = 0 },
	};
	CUmemGenericAllocationHandle h;

	MUST(cuMemCreate(&h, size, &prop, 0));
	ledger_add(location == LOC_HOST ? LK_CUDA_HOST : LK_CUDA_DEVICE, (long long)size);
	return h;
}

/* The stand-in's device usage must be the ledger's cuda_device level. */
static void check(void)
{
	size_t free_b, total;

	MUST(cuMemGetInfo_v2(&free_b, &total));
	if ((long long)(total - free_b) != ledger.level[LK_CUDA_DEVICE]) {
		dprintf(2, "vmm: after %s the stand-in has %zu device bytes, the ledger %lld\n",
			ledger_current(), total - free_b, ledger.level[LK_CUDA_DEVICE]);
		exit(1);
	}
}

int standin_fail_next(int n);

/* --oom: handles made for a request, a failure, all given back (see the top). */
static int oom_run(void)
{
	CUmemAllocationProp prop = { .type = PINNED, .location = { .type = LOC_DEVICE } };
	CUmemGenericAllocationHandle h[5], extra;
	CUdeviceptr va;
	int i;

	MUST(cuMemAddressReserve(&va, VA_SIZE, 2 * MiB, 0, 0));
	for (i = 0; i < 5; i++) {
		MUST(cuMemCreate(&h[i], 2 * MiB, &prop, 0));
		MUST(cuMemMap(va + i * 2 * MiB, 2 * MiB, 0, h[i], 0));
	}
	standin_fail_next(1);
	if (cuMemCreate(&extra, 2 * MiB, &prop, 0) != 2) {
		dprintf(2, "vmm: the injected cuMemCreate failure did not come\n");
		return 1;
	}
	for (i = 0; i < 5; i++) {
		MUST(cuMemUnmap(va + i * 2 * MiB, 2 * MiB));
		MUST(cuMemRelease(h[i]));
	}
	MUST(cuMemAddressFree(va, VA_SIZE));
	printf("{\"pid\": %d, \"live_at_oom\": {\"count\": 5, \"bytes\": %llu}}\n", getpid(),
	       5ULL * 2 * MiB);
	return 0;
}

int main(int argc, char **argv)
{
	CUmemGenericAllocationHandle h1, h2, h3, h4, h5, h6, h6b, h7, h8, h9;
	CUdeviceptr va, va1, va2, va4a, va4b, va5, va6, va9, vj;
	int i;

	wait_go(argc, argv);
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--oom")) {
			MUST(cuInit(0));
			return oom_run();
		}
	}

	ledger_phase("runtime_init");
	MUST(cuInit(0));
	/* one address range for every step but J; address space is not memory */
	MUST(cuMemAddressReserve(&va, VA_SIZE, 2 * MiB, 0, 0));
	va1 = va;
	va2 = va + 2 * MiB;
	va4a = va + 6 * MiB;
	va4b = va + 8 * MiB;
	va5 = va + 10 * MiB;
	va6 = va + 18 * MiB;
	va9 = va + 20 * MiB;
	check();

	phase("vmm_a");
	h1 = create(2 * MiB, LOC_DEVICE);
	MUST(cuMemMap(va1, 2 * MiB, 0, h1, 0));
	MUST(cuMemUnmap(va1, 2 * MiB));
	MUST(cuMemRelease(h1));
	ledger_add(LK_CUDA_DEVICE, -2 * (long long)MiB);
	check();

	phase("vmm_b");
	h2 = create(4 * MiB, LOC_DEVICE);
	MUST(cuMemMap(va2, 4 * MiB, 0, h2, 0));
	MUST(cuMemRelease(h2));
	check();

	phase("vmm_c");
	MUST(cuMemUnmap(va2, 4 * MiB));
	ledger_add(LK_CUDA_DEVICE, -4 * (long long)MiB);
	check();

	phase("vmm_d");
	h3 = create(1 * MiB, LOC_DEVICE);
	MUST(cuMemRelease(h3));
	ledger_add(LK_CUDA_DEVICE, -1 * (long long)MiB);
	check();

	phase("vmm_e");
	h4 = create(2 * MiB, LOC_DEVICE);
	MUST(cuMemMap(va4a, 2 * MiB, 0, h4, 0));
	MUST(cuMemMap(va4b, 2 * MiB, 0, h4, 0));
	MUST(cuMemRelease(h4));
	MUST(cuMemUnmap(va4a, 2 * MiB));
	check();

	phase("vmm_f");
	MUST(cuMemUnmap(va4b, 2 * MiB));
	ledger_add(LK_CUDA_DEVICE, -2 * (long long)MiB);
	check();

	phase("vmm_g");
	h5 = create(8 * MiB, LOC_HOST);
	MUST(cuMemMap(va5, 8 * MiB, 0, h5, 0));
	MUST(cuMemUnmap(va5, 8 * MiB));
	MUST(cuMemRelease(h5));
	ledger_add(LK_CUDA_HOST, -8 * (long long)MiB);
	check();

	phase("vmm_h");
	h6 = create(2 * MiB, LOC_DEVICE);
	MUST(cuMemMap(va6, 2 * MiB, 0, h6, 0));
	MUST(cuMemRetainAllocationHandle(&h6b, (void *)(uintptr_t)(va6 + 4096)));
	if (h6b != h6) {
		dprintf(2, "vmm: cuMemRetainAllocationHandle gave another handle\n");
		exit(1);
	}
	MUST(cuMemRelease(h6));
	MUST(cuMemRelease(h6b));
	check();

	phase("vmm_i");
	MUST(cuMemUnmap(va6, 2 * MiB));
	ledger_add(LK_CUDA_DEVICE, -2 * (long long)MiB);
	check();

	phase("vmm_j");
	MUST(cuMemAddressReserve(&vj, 4 * MiB, 2 * MiB, 0, 0));
	h7 = create(2 * MiB, LOC_DEVICE);
	h8 = create(2 * MiB, LOC_DEVICE);
	MUST(cuMemMap(vj, 2 * MiB, 0, h7, 0));
	MUST(cuMemMap(vj + 2 * MiB, 2 * MiB, 0, h8, 0));
	MUST(cuMemRelease(h7));
	MUST(cuMemRelease(h8));
	check();

	phase("vmm_k");
	MUST(cuMemUnmap(vj, 4 * MiB));
	ledger_add(LK_CUDA_DEVICE, -4 * (long long)MiB);
	check();

	phase("vmm_l");
	h9 = create(3 * MiB, LOC_DEVICE);
	MUST(cuMemMap(va9, 3 * MiB, 0, h9, 0));
	MUST(cuMemUnmap(va9, 3 * MiB));
	check();

	phase("vmm_m");
	MUST(cuMemRelease(h9));
	ledger_add(LK_CUDA_DEVICE, -3 * (long long)MiB);
	check();
	MUST(cuMemAddressFree(vj, 4 * MiB));
	MUST(cuMemAddressFree(va, VA_SIZE));

	jb_printf(&out, "{");
	ledger_json(&out);
	jb_printf(&out, "}\n");
	jb_write(&out);
	return 0;
}
