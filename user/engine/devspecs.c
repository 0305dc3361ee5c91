// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The runtime functions memtrail probes (CUDA, Neuron, the dynamic
 * linker's hook), what each call means to the BPF side (its cookie), and
 * what their return codes are called. A leaf: the tracer fills the BPF
 * side's cookies from it, devices probes files by it, the session names
 * calls and errors by it.
 */
#include <string.h>

#include "devspecs.h"

enum { CUDA = MEMTRAIL_RT_CUDA, NEURON = MEMTRAIL_RT_NEURON, LOADER = MEMTRAIL_RT_LOADER };
enum { DEV = MEMTRAIL_KIND_CUDA_DEVICE, HOST = MEMTRAIL_KIND_CUDA_HOST,
       MANAGED = MEMTRAIL_KIND_CUDA_MANAGED, NDEV = MEMTRAIL_KIND_NEURON_DEVICE };

/*
 * Every function probed, by exported or .symtab name; the index is the name
 * in cookies and events. Where two names share an address the first wins.
 */
const struct dev_spec devspecs[] = {
	/* CUDA driver, libcuda.so.1: the layer of truth */
	{ "cuInit", MEMTRAIL_OP_INIT, 0, CUDA, 0, false, false },
	{ "cuMemAlloc_v2", MEMTRAIL_OP_ALLOC, DEV, CUDA, 0, true, false },
	{ "cuMemAllocPitch_v2", MEMTRAIL_OP_ALLOC_PITCH, DEV, CUDA, 3, true, false },
	{ "cuMemAllocManaged", MEMTRAIL_OP_ALLOC, MANAGED, CUDA, 0, true, false },
	{ "cuMemAllocHost_v2", MEMTRAIL_OP_ALLOC, HOST, CUDA, 0, true, false },
	{ "cuMemHostAlloc", MEMTRAIL_OP_ALLOC, HOST, CUDA, 0, true, false },
	{ "cuMemAllocAsync", MEMTRAIL_OP_ALLOC, DEV, CUDA, 0, true, false },
	{ "cuMemAllocAsync_ptsz", MEMTRAIL_OP_ALLOC, DEV, CUDA, 0, true, false },
	{ "cuMemAllocFromPoolAsync", MEMTRAIL_OP_ALLOC, DEV, CUDA, 0, true, false },
	{ "cuMemAllocFromPoolAsync_ptsz", MEMTRAIL_OP_ALLOC, DEV, CUDA, 0, true, false },
	{ "cuMemFree_v2", MEMTRAIL_OP_FREE, 0, CUDA, 0, true, false },
	{ "cuMemFreeAsync", MEMTRAIL_OP_FREE, 0, CUDA, 0, true, false },
	{ "cuMemFreeAsync_ptsz", MEMTRAIL_OP_FREE, 0, CUDA, 0, true, false },
	{ "cuMemFreeHost", MEMTRAIL_OP_FREE, 0, CUDA, 0, true, false },
	{ "cuMemCreate", MEMTRAIL_OP_VMM_CREATE, DEV, CUDA, 0, true, false },
	{ "cuMemRelease", MEMTRAIL_OP_VMM_RELEASE, 0, CUDA, 0, false, false },
	{ "cuMemMap", MEMTRAIL_OP_VMM_MAP, 0, CUDA, 3, true, false },
	{ "cuMemUnmap", MEMTRAIL_OP_VMM_UNMAP, 0, CUDA, 0, false, false },
	{ "cuMemRetainAllocationHandle", MEMTRAIL_OP_VMM_RETAIN, 0, CUDA, 0, true, false },
	{ "cuModuleLoad", MEMTRAIL_OP_LOAD, DEV, CUDA, 0, true, false },
	{ "cuModuleLoadData", MEMTRAIL_OP_LOAD, DEV, CUDA, 0, true, false },
	{ "cuModuleLoadDataEx", MEMTRAIL_OP_LOAD, DEV, CUDA, 0, true, false },
	{ "cuModuleLoadFatBinary", MEMTRAIL_OP_LOAD, DEV, CUDA, 0, true, false },
	{ "cuLibraryLoadData", MEMTRAIL_OP_LOAD, DEV, CUDA, 0, true, false },
	{ "cuLibraryLoadFromFile", MEMTRAIL_OP_LOAD, DEV, CUDA, 0, true, false },
	{ "cuDevicePrimaryCtxRetain", MEMTRAIL_OP_CTX, 0, CUDA, 1, true, false },
	{ "cuCtxCreate_v2", MEMTRAIL_OP_CTX, 0, CUDA, 2, true, false },
	{ "cuCtxCreate_v3", MEMTRAIL_OP_CTX, 0, CUDA, 4, true, false },
	{ "cuCtxCreate_v4", MEMTRAIL_OP_CTX, 0, CUDA, 3, true, false },
	{ "cuCtxSetCurrent", MEMTRAIL_OP_CTX_SET, 0, CUDA, 0, false, false },
	{ "cuCtxPushCurrent_v2", MEMTRAIL_OP_CTX_SET, 0, CUDA, 0, false, false },
	{ "cuMemGetInfo_v2", MEMTRAIL_OP_MEM_INFO, DEV, CUDA, 0, true, false },
	{ "cuDeviceTotalMem_v2", MEMTRAIL_OP_DEV_TOTAL, DEV, CUDA, 0, true, false },
	{ "cuLaunchKernel", MEMTRAIL_OP_LAUNCH, 0, CUDA, 0, false, true },
	{ "cuLaunchKernel_ptsz", MEMTRAIL_OP_LAUNCH, 0, CUDA, 0, false, true },
	{ "cuLaunchKernelEx", MEMTRAIL_OP_LAUNCH, 0, CUDA, 0, false, true },
	{ "cuLaunchKernelEx_ptsz", MEMTRAIL_OP_LAUNCH, 0, CUDA, 0, false, true },
	{ "cuLaunchCooperativeKernel", MEMTRAIL_OP_LAUNCH, 0, CUDA, 0, false, true },
	{ "cuLaunchCooperativeKernel_ptsz", MEMTRAIL_OP_LAUNCH, 0, CUDA, 0, false, true },
	/* CUDA runtime, libcudart.so.* or linked in: names, and cover for an unprobed driver */
	{ "cudaMalloc", MEMTRAIL_OP_ALLOC, DEV, CUDA, 0, true, false },
	{ "cudaMallocManaged", MEMTRAIL_OP_ALLOC, MANAGED, CUDA, 0, true, false },
	{ "cudaMallocHost", MEMTRAIL_OP_ALLOC, HOST, CUDA, 0, true, false },
	{ "cudaHostAlloc", MEMTRAIL_OP_ALLOC, HOST, CUDA, 0, true, false },
	{ "cudaMallocAsync", MEMTRAIL_OP_ALLOC, DEV, CUDA, 0, true, false },
	{ "cudaMallocAsync_ptsz", MEMTRAIL_OP_ALLOC, DEV, CUDA, 0, true, false },
	{ "cudaMallocFromPoolAsync", MEMTRAIL_OP_ALLOC, DEV, CUDA, 0, true, false },
	{ "cudaMallocFromPoolAsync_ptsz", MEMTRAIL_OP_ALLOC, DEV, CUDA, 0, true, false },
	{ "cudaMallocPitch", MEMTRAIL_OP_ALLOC_PITCH, DEV, CUDA, 3, true, false },
	{ "cudaFree", MEMTRAIL_OP_FREE, 0, CUDA, 0, true, false },
	{ "cudaFreeAsync", MEMTRAIL_OP_FREE, 0, CUDA, 0, true, false },
	{ "cudaFreeAsync_ptsz", MEMTRAIL_OP_FREE, 0, CUDA, 0, true, false },
	{ "cudaFreeHost", MEMTRAIL_OP_FREE, 0, CUDA, 0, true, false },
	{ "cudaSetDevice", MEMTRAIL_OP_SET_DEVICE, 0, CUDA, 0, false, false },
	{ "cudaMemGetInfo", MEMTRAIL_OP_MEM_INFO, DEV, CUDA, 0, true, false },
	{ "cudaLaunchKernel", MEMTRAIL_OP_LAUNCH, 0, CUDA, 0, false, true },
	{ "cudaLaunchKernel_ptsz", MEMTRAIL_OP_LAUNCH, 0, CUDA, 0, false, true },
	/* Neuron runtime, libnrt.so.1 */
	{ "nrt_init", MEMTRAIL_OP_INIT, 0, NEURON, 0, false, false },
	{ "nrt_tensor_allocate", MEMTRAIL_OP_NRT_ALLOC, NDEV, NEURON, 4, true, false },
	{ "nrt_tensor_free", MEMTRAIL_OP_NRT_FREE, 0, NEURON, 0, false, false },
	{ "nrt_load", MEMTRAIL_OP_LOAD, NDEV, NEURON, 0, true, false },
	{ "nrt_load_collectives", MEMTRAIL_OP_LOAD, NDEV, NEURON, 0, true, false },
	{ "nrt_get_vnc_memory_stats", MEMTRAIL_OP_NRT_MEM_STATS, NDEV, NEURON, 0, true, false },
	{ "nrt_execute", MEMTRAIL_OP_LAUNCH, 0, NEURON, 0, false, false },
	{ "nrt_execute_repeat", MEMTRAIL_OP_LAUNCH, 0, NEURON, 0, false, false },
	/* the dynamic linker's debugger hook: a library came or went */
	{ "_dl_debug_state", MEMTRAIL_OP_LIBS, 0, LOADER, 0, false, false },
};

#define N_SPECS (sizeof(devspecs) / sizeof(devspecs[0]))
_Static_assert(N_SPECS <= MEMTRAIL_DEV_SPECS, "device.bpf.c has an entry copy per function");
const size_t devspecs_n = N_SPECS;

uint64_t devspecs__cookie(uint32_t i)
{
	const struct dev_spec *s = &devspecs[i];

	return MEMTRAIL_COOKIE(s->op, s->kind, s->rt, s->arg, i);
}

size_t devspecs__cookies(uint64_t *cookie, size_t max)
{
	size_t i;

	for (i = 0; i < N_SPECS && i < max; i++)
		cookie[i] = devspecs__cookie(i);
	return i;
}

bool devspecs__loader(uint32_t idx)
{
	return idx < N_SPECS && devspecs[idx].rt == LOADER;
}

const char *devspecs__fn_name(uint32_t idx)
{
	return idx < N_SPECS ? devspecs[idx].name : "?";
}

const char *devspecs__runtime_name(uint32_t runtime)
{
	return runtime == NEURON ? "neuron" : "cuda";
}

bool devspecs__is_oom(uint32_t runtime, int rc)
{
	return rc == (runtime == NEURON ? MEMTRAIL_NRT_OOM : MEMTRAIL_CUDA_OOM);
}

const char *devspecs__error_name(uint32_t runtime, const char *fn, int rc)
{
	static const struct { int rc; const char *driver, *runtime; } cuda[] = {
		{ 1, "CUDA_ERROR_INVALID_VALUE", "cudaErrorInvalidValue" },
		{ 2, "CUDA_ERROR_OUT_OF_MEMORY", "cudaErrorMemoryAllocation" },
		{ 3, "CUDA_ERROR_NOT_INITIALIZED", "cudaErrorInitializationError" },
		{ 4, "CUDA_ERROR_DEINITIALIZED", "cudaErrorCudartUnloading" },
		{ 34, "CUDA_ERROR_STUB_LIBRARY", "cudaErrorStubLibrary" },
		{ 35, NULL, "cudaErrorInsufficientDriver" },
		{ 100, "CUDA_ERROR_NO_DEVICE", "cudaErrorNoDevice" },
		{ 101, "CUDA_ERROR_INVALID_DEVICE", "cudaErrorInvalidDevice" },
		{ 201, "CUDA_ERROR_INVALID_CONTEXT", "cudaErrorDeviceUninitialized" },
		/* PyTorch's expandable segments ask cuMemCreate for a fabric handle first */
		{ 800, "CUDA_ERROR_NOT_PERMITTED", "cudaErrorNotPermitted" },
		{ 801, "CUDA_ERROR_NOT_SUPPORTED", "cudaErrorNotSupported" },
		{ 999, "CUDA_ERROR_UNKNOWN", "cudaErrorUnknown" },
	};
	static const struct { int rc; const char *name; } nrt[] = {
		{ 1, "NRT_FAILURE" }, { 2, "NRT_INVALID" }, { 3, "NRT_INVALID_HANDLE" },
		{ 4, "NRT_RESOURCE" }, { 5, "NRT_TIMEOUT" }, { 6, "NRT_HW_ERROR" },
		{ 9, "NRT_LOAD_NOT_ENOUGH_NC" }, { 10, "NRT_UNSUPPORTED_NEFF_VERSION" },
		{ 13, "NRT_UNINITIALIZED" }, { 14, "NRT_CLOSED" },
	};
	bool rt = !strncmp(fn, "cuda", 4);
	size_t i;

	if (runtime == NEURON) {
		for (i = 0; i < sizeof(nrt) / sizeof(nrt[0]); i++)
			if (nrt[i].rc == rc)
				return nrt[i].name;
		return NULL;
	}
	for (i = 0; i < sizeof(cuda) / sizeof(cuda[0]); i++)
		if (cuda[i].rc == rc)
			return rt ? cuda[i].runtime : cuda[i].driver;
	return NULL;
}
