// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * CUDA driver calls, through the libcuda.so.1 stand-in, in the automatic
 * phases memtrail finds (MiB):
 *   start         nothing
 *   runtime_init  cuInit; device +8 (d1), host +2 (h1), managed +4 (m1)
 *   model_load    cuModuleLoadData, cuLibraryLoadData; device +16 (d2),
 *                 +102400 B (d3, pitched 1000 x 100), +3 (d4), +5 (d5), -8 (d1);
 *                 host +1 (h2)
 *   execute       cuLaunchKernel, cuLaunchKernel_ptsz; device -3 (d4), +6 -6
 *                 (d6); host -2 (h1); an injected OOM of 1 GiB on device 1;
 *                 then everything left is freed
 * Prints the ledger, the OOM and the blocks live at the OOM as JSON; with
 * --hold, then stays until its standard input ends.
 *   cuda_phases [--wait] [--hold]
 */
#include "common.h"
#include "ledger.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUlib_st *CUlibrary;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef int CUjit_option;
typedef int CUlibraryOption;

CUresult cuInit(unsigned int Flags);
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
			    unsigned int ElementSizeBytes);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags);
CUresult cuMemAllocHost_v2(void **pp, size_t bytesize);
CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags);
CUresult cuMemFreeHost(void *p);
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
				      CUstream hStream);
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
CUresult cuModuleLoadData(CUmodule *module, const void *image);
CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
			   void **jitOptionsValues, unsigned int numJitOptions,
			   CUlibraryOption *libraryOptions, void **libraryOptionValues,
			   unsigned int numLibraryOptions);
CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
			unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
			unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
			void **kernelParams, void **extra);
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
			     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
			     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
			     void **kernelParams, void **extra);
int standin_fail_next(int n);
CUresult cuMemGetInfo_v2(size_t *free, size_t *total);
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);

#define DEVICE 1
#define OOM_SIZE (1UL << 30)

/* Not a real cubin: the stand-in only wants a non-NULL image. */
static const unsigned char image[64] = { 0x7f, 'E', 'L', 'F' };

static struct jbuf out, live_at_oom;

static void *vp(CUdeviceptr d)
{
	return (void *)(uintptr_t)d;
}

int main(int argc, char **argv)
{
	CUdeviceptr d1, d2, d3, d4, d5, d6, m1, x;
	void *h1, *h2, *params[1] = { NULL };
	size_t pitch;
	CUcontext ctx;
	CUmodule mod;
	CUlibrary lib;
	CUresult oom_rc;
	size_t free_b, total1, total0;
	char c;

	wait_go(argc, argv);

	ledger_phase("runtime_init");
	MUST(cuInit(0));
	MUST(cuDevicePrimaryCtxRetain(&ctx, DEVICE));
	MUST(cuCtxSetCurrent(ctx));
	/* the sizes of device 1 (current) and device 0, as the driver tells them */
	MUST(cuMemGetInfo_v2(&free_b, &total1));
	MUST(cuDeviceTotalMem_v2(&total0, 0));
	MUST(cuMemAlloc_v2(&d1, 8 * MiB));
	ledger_alloc(LK_CUDA_DEVICE, vp(d1), 8 * MiB);
	MUST(cuMemAllocHost_v2(&h1, 2 * MiB));
	ledger_alloc(LK_CUDA_HOST, h1, 2 * MiB);
	MUST(cuMemAllocManaged(&m1, 4 * MiB, 1));
	ledger_alloc(LK_CUDA_MANAGED, vp(m1), 4 * MiB);

	ledger_phase("model_load");
	MUST(cuModuleLoadData(&mod, image));
	MUST(cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
	MUST(cuMemAlloc_v2(&d2, 16 * MiB));
	ledger_alloc(LK_CUDA_DEVICE, vp(d2), 16 * MiB);
	MUST(cuMemAllocPitch_v2(&d3, &pitch, 1000, 100, 4));
	ledger_alloc(LK_CUDA_DEVICE, vp(d3), (long long)(pitch * 100));
	MUST(cuMemHostAlloc(&h2, 1 * MiB, 0));
	ledger_alloc(LK_CUDA_HOST, h2, 1 * MiB);
	MUST(cuMemAllocAsync(&d4, 3 * MiB, NULL));
	ledger_alloc(LK_CUDA_DEVICE, vp(d4), 3 * MiB);
	MUST(cuMemAllocFromPoolAsync_ptsz(&d5, 5 * MiB, NULL, NULL));
	ledger_alloc(LK_CUDA_DEVICE, vp(d5), 5 * MiB);
	MUST(cuMemFree_v2(d1));
	ledger_free(vp(d1));

	ledger_phase("execute");
	MUST(cuLaunchKernel(NULL, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
	MUST(cuLaunchKernel_ptsz(NULL, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
	MUST(cuMemFreeAsync(d4, NULL));
	ledger_free(vp(d4));
	MUST(cuMemAllocAsync_ptsz(&d6, 6 * MiB, NULL));
	ledger_alloc(LK_CUDA_DEVICE, vp(d6), 6 * MiB);
	MUST(cuMemFreeAsync_ptsz(d6, NULL));
	ledger_free(vp(d6));
	MUST(cuMemFreeHost(h1));
	ledger_free(h1);

	ledger_live_json(&live_at_oom);
	standin_fail_next(1);
	oom_rc = cuMemAlloc_v2(&x, OOM_SIZE);
	if (oom_rc != 2) {
		dprintf(2, "cuda_phases: the injected OOM returned %d\n", oom_rc);
		exit(1);
	}

	MUST(cuMemFree_v2(d2));
	ledger_free(vp(d2));
	MUST(cuMemFree_v2(d3));
	ledger_free(vp(d3));
	MUST(cuMemFreeHost(h2));
	ledger_free(h2);
	MUST(cuMemFreeAsync(d5, NULL));
	ledger_free(vp(d5));
	MUST(cuMemFree_v2(m1));
	ledger_free(vp(m1));

	jb_printf(&out, "{");
	ledger_json(&out);
	jb_printf(&out, ", \"device_totals\": [{\"device\": %d, \"bytes\": %zu}, "
		  "{\"device\": 0, \"bytes\": %zu}]", DEVICE, total1, total0);
	jb_printf(&out, ", \"oom\": {\"function\": \"cuMemAlloc_v2\", \"rc\": %d, \"size\": %lu, "
		  "\"device\": %d, \"phase\": \"%s\", \"kind\": \"cuda_device\"}, \"live_at_oom\": %.*s}\n",
		  oom_rc, OOM_SIZE, DEVICE, ledger_current(), (int)live_at_oom.len, live_at_oom.s);
	jb_write(&out);
	if (argc > 1 && !strcmp(argv[argc - 1], "--hold"))
		while (read(0, &c, 1) > 0)
			;
	return 0;
}
