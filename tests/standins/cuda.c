// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * A stand-in for the CUDA driver (libcuda.so.1) for memtrail's tests, on
 * machines without a GPU. memtrail attaches uprobes to these exports by
 * name, so names, prototypes and return codes are those of CUDA 13.0's
 * cuda.h. "Device" memory is host memory from malloc, never touched, so
 * it adds to the process's virtual size but not to its RSS.
 *
 * Each export does its own work with static helpers and never calls
 * another export: one API call enters exactly one probed function.
 *
 * Failure control for the tests:
 *   standin_fail_next(n)       the next n allocation calls return 2 (OOM)
 *   STANDIN_FAIL_ABOVE=bytes   any allocation larger than that returns 2
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUlib_st *CUlibrary;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef int CUjit_option;
typedef int CUlibraryOption;

typedef struct {
	int type;
	int id;
} CUmemLocation;

typedef struct {
	int type;			/* 1 = PINNED */
	int requestedHandleTypes;
	CUmemLocation location;		/* type 1 = DEVICE, 2..4 = HOST variants */
	void *win32HandleMetaData;
	unsigned long long allocFlags;
} CUmemAllocationProp;

_Static_assert(sizeof(CUmemAllocationProp) == 32, "CUmemAllocationProp is 32 bytes in cuda.h");
_Static_assert(offsetof(CUmemAllocationProp, location) == 8, "memtrail reads prop->location at offset 8");

#define CUDA_SUCCESS			0
#define CUDA_ERROR_INVALID_VALUE	1
#define CUDA_ERROR_OUT_OF_MEMORY	2
#define CUDA_ERROR_NOT_INITIALIZED	3
#define CUDA_ERROR_INVALID_DEVICE	101
#define CUDA_ERROR_INVALID_CONTEXT	201
#define CUDA_ERROR_FILE_NOT_FOUND	301

#define CU_MEM_ALLOCATION_TYPE_PINNED	1
#define CU_MEM_LOCATION_TYPE_DEVICE	1
#define CU_MEM_LOCATION_TYPE_HOST	2
#define CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT 4

#define NDEVICES	2
#define DEVICE_MEMORY	(80ULL << 30)	/* what cuMemGetInfo_v2 reports as total */
#define PITCH_ALIGN	512
#define PAGE_SIZE_	4096UL

/* Marks the exports: the probed API. Everything else in this file is static. */
#define CUAPI __attribute__((visibility("default")))

/* ---- state ---- */

static int initialized;
static int fail_pending;		/* standin_fail_next() */
static size_t fail_above = SIZE_MAX;	/* STANDIN_FAIL_ABOVE */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long device_bytes;	/* device-resident bytes now allocated */

enum kind { K_DEVICE, K_MANAGED, K_HOST };

struct CUctx_st {
	int dev;
	int refs;			/* primary contexts: retain count */
	struct CUctx_st *next;		/* created contexts only */
};

static struct CUctx_st primary[NDEVICES] = { { .dev = 0 }, { .dev = 1 } };
static struct CUctx_st *created;
static __thread CUcontext current;

struct CUmod_st {
	struct CUmod_st *next;
};

struct CUlib_st {
	struct CUlib_st *next;
};

static struct CUmod_st *modules;
static struct CUlib_st *libraries;

/* cuMemAlloc* and cuMemHostAlloc blocks: open addressing keyed on the address. */
struct block {
	uintptr_t addr;			/* 0: empty slot */
	size_t size;
	int kind;
	int dev;
};

static struct block *blocks;
static unsigned int blocks_bits;
static size_t blocks_used;

/* VMM: physical allocations (the handle is the struct's address) ... */
struct phys {
	size_t size;
	int handle_refs;		/* 1 from cuMemCreate, +1 per cuMemRetainAllocationHandle */
	int maps;			/* live cuMemMap mappings */
	int host;
	void *storage;
	struct phys *next;
};

/* ... address ranges from cuMemAddressReserve ... */
struct reservation {
	uintptr_t base;
	size_t size;
	struct reservation *next;
};

/* ... and mappings of a physical allocation into a reservation. */
struct mapping {
	uintptr_t va;
	size_t size;
	struct phys *phys;
	struct mapping *next;
};

static struct phys *physes;
static struct reservation *reservations;
static struct mapping *mappings;

__attribute__((constructor)) static void standin_setup(void)
{
	const char *s = getenv("STANDIN_FAIL_ABOVE");
	unsigned long long v;
	char *end;

	if (!s || !*s)
		return;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (!errno && !*end)
		fail_above = (size_t)v;
}

CUAPI int standin_fail_next(int n)
{
	return __atomic_exchange_n(&fail_pending, n > 0 ? n : 0, __ATOMIC_SEQ_CST);
}

static int is_init(void)
{
	return __atomic_load_n(&initialized, __ATOMIC_ACQUIRE);
}

/* Whether this allocation is to fail: the size limit first, then one of the counted failures. */
static int should_fail(size_t size)
{
	int n = __atomic_load_n(&fail_pending, __ATOMIC_SEQ_CST);

	if (size > fail_above)
		return 1;
	while (n > 0)
		if (__atomic_compare_exchange_n(&fail_pending, &n, n - 1, 0,
						__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			return 1;
	return 0;
}

static int current_device(void)
{
	return current ? current->dev : 0;
}

/* ---- the block table (callers hold the lock) ---- */

static size_t block_home(uintptr_t addr)
{
	return (size_t)(((uint64_t)addr * 0x9e3779b97f4a7c15ULL) >> (64 - blocks_bits));
}

static int blocks_grow(void)
{
	unsigned int bits = blocks_bits ? blocks_bits + 1 : 10;
	struct block *old = blocks, *tab = calloc(1UL << bits, sizeof(*tab));
	size_t i, n = blocks_bits ? 1UL << blocks_bits : 0, mask = (1UL << bits) - 1, j;

	if (!tab)
		return -1;
	blocks = tab;
	blocks_bits = bits;
	for (i = 0; i < n; i++) {
		if (!old[i].addr)
			continue;
		for (j = block_home(old[i].addr); tab[j].addr; j = (j + 1) & mask)
			;
		tab[j] = old[i];
	}
	free(old);
	return 0;
}

static int block_add(void *p, size_t size, int kind)
{
	size_t mask, j;

	/* keep the load under one half, so that probes stay short */
	if ((blocks_used + 1) * 2 > (blocks_bits ? 1UL << blocks_bits : 0) && blocks_grow())
		return -1;
	mask = (1UL << blocks_bits) - 1;
	for (j = block_home((uintptr_t)p); blocks[j].addr; j = (j + 1) & mask)
		;
	blocks[j] = (struct block){ (uintptr_t)p, size, kind, current_device() };
	blocks_used++;
	if (kind != K_HOST)
		device_bytes += size;
	return 0;
}

static struct block *block_find(uintptr_t addr)
{
	size_t mask, j;

	if (!blocks_bits || !addr)
		return NULL;
	mask = (1UL << blocks_bits) - 1;
	for (j = block_home(addr); blocks[j].addr; j = (j + 1) & mask)
		if (blocks[j].addr == addr)
			return &blocks[j];
	return NULL;
}

/* Remove a slot, shifting later entries of its probe chain back (no tombstones). */
static void block_remove(struct block *b)
{
	size_t mask = (1UL << blocks_bits) - 1, i = (size_t)(b - blocks), j = i, k;

	if (b->kind != K_HOST)
		device_bytes -= b->size;
	blocks[i].addr = 0;
	blocks_used--;
	for (;;) {
		j = (j + 1) & mask;
		if (!blocks[j].addr)
			return;
		k = block_home(blocks[j].addr);
		/* leave it when its home lies cyclically in (i, j] */
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		blocks[i] = blocks[j];
		blocks[j].addr = 0;
		i = j;
	}
}

/* ---- allocation and free, shared by the exports ---- */

static CUresult do_alloc(void **out, size_t size, int kind)
{
	void *p;

	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!out || !size)
		return CUDA_ERROR_INVALID_VALUE;
	if (should_fail(size))
		return CUDA_ERROR_OUT_OF_MEMORY;
	/* not touched: the tests want virtual size, not RSS */
	p = malloc(size);
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&lock);
	if (block_add(p, size, kind)) {
		pthread_mutex_unlock(&lock);
		free(p);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_unlock(&lock);
	*out = p;
	return CUDA_SUCCESS;
}

static CUresult do_alloc_dev(CUdeviceptr *dptr, size_t size, int kind)
{
	void *p;
	CUresult rc;

	if (!dptr && is_init())
		return CUDA_ERROR_INVALID_VALUE;
	rc = do_alloc(&p, size, kind);
	if (rc == CUDA_SUCCESS)
		*dptr = (CUdeviceptr)(uintptr_t)p;
	return rc;
}

static CUresult do_free(uintptr_t addr, int host)
{
	struct block *b;
	void *p;

	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	/* as in CUDA, freeing NULL is allowed and does nothing */
	if (!addr)
		return CUDA_SUCCESS;
	pthread_mutex_lock(&lock);
	b = block_find(addr);
	if (!b || (b->kind == K_HOST) != host) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	p = (void *)b->addr;
	block_remove(b);
	pthread_mutex_unlock(&lock);
	free(p);
	return CUDA_SUCCESS;
}

/* ---- initialisation, devices, contexts ---- */

CUAPI CUresult cuInit(unsigned int Flags)
{
	if (Flags)
		return CUDA_ERROR_INVALID_VALUE;
	__atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
	return CUDA_SUCCESS;
}

CUAPI CUresult cuDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = 13000;
	return CUDA_SUCCESS;
}

CUAPI CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if (ordinal < 0 || ordinal >= NDEVICES)
		return CUDA_ERROR_INVALID_DEVICE;
	*device = ordinal;
	return CUDA_SUCCESS;
}

CUAPI CUresult cuDeviceGetCount(int *count)
{
	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = NDEVICES;
	return CUDA_SUCCESS;
}

CUAPI CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= NDEVICES)
		return CUDA_ERROR_INVALID_DEVICE;
	__atomic_add_fetch(&primary[dev].refs, 1, __ATOMIC_SEQ_CST);
	*pctx = &primary[dev];
	return CUDA_SUCCESS;
}

CUAPI CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	int refs;

	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dev < 0 || dev >= NDEVICES)
		return CUDA_ERROR_INVALID_DEVICE;
	refs = __atomic_load_n(&primary[dev].refs, __ATOMIC_SEQ_CST);
	do {
		if (refs <= 0)
			return CUDA_ERROR_INVALID_CONTEXT;
	} while (!__atomic_compare_exchange_n(&primary[dev].refs, &refs, refs - 1, 0,
					      __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
	return CUDA_SUCCESS;
}

CUAPI CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	struct CUctx_st *c;

	(void)flags;
	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= NDEVICES)
		return CUDA_ERROR_INVALID_DEVICE;
	c = calloc(1, sizeof(*c));
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	c->dev = dev;
	pthread_mutex_lock(&lock);
	c->next = created;
	created = c;
	pthread_mutex_unlock(&lock);
	/* a new context becomes the calling thread's current one */
	current = c;
	*pctx = c;
	return CUDA_SUCCESS;
}

/* A context from cuDevicePrimaryCtxRetain or cuCtxCreate_v2 (callers hold the lock). */
static int ctx_valid(CUcontext ctx)
{
	struct CUctx_st *c;

	if (ctx >= &primary[0] && ctx < &primary[NDEVICES])
		return 1;
	for (c = created; c; c = c->next)
		if (c == ctx)
			return 1;
	return 0;
}

CUAPI CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	struct CUctx_st **pc;

	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&lock);
	for (pc = &created; *pc && *pc != ctx; pc = &(*pc)->next)
		;
	if (!ctx || !*pc) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	*pc = ctx->next;
	pthread_mutex_unlock(&lock);
	if (current == ctx)
		current = NULL;
	free(ctx);
	return CUDA_SUCCESS;
}

static CUresult set_current(CUcontext ctx)
{
	int ok;

	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&lock);
	ok = !ctx || ctx_valid(ctx);
	pthread_mutex_unlock(&lock);
	if (!ok)
		return CUDA_ERROR_INVALID_CONTEXT;
	current = ctx;
	return CUDA_SUCCESS;
}

CUAPI CUresult cuCtxSetCurrent(CUcontext ctx)
{
	return set_current(ctx);
}

/* No context stack here (nothing pops): pushing makes the context current. */
CUAPI CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	if (!ctx && is_init())
		return CUDA_ERROR_INVALID_VALUE;
	return set_current(ctx);
}

CUAPI CUresult cuCtxGetDevice(CUdevice *device)
{
	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	*device = current_device();
	return CUDA_SUCCESS;
}

/* ---- memory ---- */

CUAPI CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	return do_alloc_dev(dptr, bytesize, K_DEVICE);
}

CUAPI CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
				  size_t Height, unsigned int ElementSizeBytes)
{
	size_t pitch;
	CUresult rc;

	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!dptr || !pPitch || !WidthInBytes || !Height ||
	    (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
		return CUDA_ERROR_INVALID_VALUE;
	pitch = (WidthInBytes + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN;
	if (Height > SIZE_MAX / pitch)
		return CUDA_ERROR_OUT_OF_MEMORY;
	rc = do_alloc_dev(dptr, pitch * Height, K_DEVICE);
	if (rc == CUDA_SUCCESS)
		*pPitch = pitch;
	return rc;
}

CUAPI CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	return do_free((uintptr_t)dptr, 0);
}

CUAPI CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	/* CU_MEM_ATTACH_GLOBAL = 1 or CU_MEM_ATTACH_HOST = 2, exactly one */
	if (flags != 1 && flags != 2 && is_init())
		return CUDA_ERROR_INVALID_VALUE;
	return do_alloc_dev(dptr, bytesize, K_MANAGED);
}

CUAPI CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	return do_alloc(pp, bytesize, K_HOST);
}

CUAPI CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	/* PORTABLE 1, DEVICEMAP 2, WRITECOMBINED 4 */
	if ((Flags & ~7U) && is_init())
		return CUDA_ERROR_INVALID_VALUE;
	return do_alloc(pp, bytesize, K_HOST);
}

CUAPI CUresult cuMemFreeHost(void *p)
{
	return do_free((uintptr_t)p, 1);
}

/* Stream-ordered allocations: no streams here, so they complete at once. */
CUAPI CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	(void)hStream;
	return do_alloc_dev(dptr, bytesize, K_DEVICE);
}

CUAPI CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	(void)hStream;
	return do_alloc_dev(dptr, bytesize, K_DEVICE);
}

/* No cuMemPoolCreate here: any pool, NULL included, is the device's default pool. */
CUAPI CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
				       CUstream hStream)
{
	(void)pool;
	(void)hStream;
	return do_alloc_dev(dptr, bytesize, K_DEVICE);
}

CUAPI CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
					    CUstream hStream)
{
	(void)pool;
	(void)hStream;
	return do_alloc_dev(dptr, bytesize, K_DEVICE);
}

CUAPI CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	(void)hStream;
	return do_free((uintptr_t)dptr, 0);
}

CUAPI CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
	(void)hStream;
	return do_free((uintptr_t)dptr, 0);
}

/* Every device of the stand-in has DEVICE_MEMORY bytes. */
CUAPI CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!bytes || dev < 0)
		return CUDA_ERROR_INVALID_VALUE;
	*bytes = DEVICE_MEMORY;
	return CUDA_SUCCESS;
}

CUAPI CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
	unsigned long long used;

	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!free_bytes || !total)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	used = device_bytes;
	pthread_mutex_unlock(&lock);
	*free_bytes = used < DEVICE_MEMORY ? DEVICE_MEMORY - used : 0;
	*total = DEVICE_MEMORY;
	return CUDA_SUCCESS;
}

/* ---- virtual memory management ---- */

CUAPI CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
				   CUdeviceptr addr, unsigned long long flags)
{
	struct reservation *r;
	size_t len, head;
	uintptr_t base, start;
	void *p;

	(void)flags;
	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!ptr || !size || (alignment & (alignment - 1)))
		return CUDA_ERROR_INVALID_VALUE;
	size = (size + PAGE_SIZE_ - 1) & ~(PAGE_SIZE_ - 1);
	if (alignment < PAGE_SIZE_)
		alignment = PAGE_SIZE_;
	if (size > SIZE_MAX - alignment)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = malloc(sizeof(*r));
	if (!r)
		return CUDA_ERROR_OUT_OF_MEMORY;
	/* address space only: PROT_NONE, over-sized then trimmed to the alignment */
	len = size + alignment - PAGE_SIZE_;
	p = mmap((void *)(uintptr_t)addr, len, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		free(r);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	base = (uintptr_t)p;
	start = (base + alignment - 1) & ~(uintptr_t)(alignment - 1);
	head = start - base;
	if (head)
		munmap(p, head);
	if (len - head > size)
		munmap((void *)(start + size), len - head - size);
	r->base = start;
	r->size = size;
	pthread_mutex_lock(&lock);
	r->next = reservations;
	reservations = r;
	pthread_mutex_unlock(&lock);
	*ptr = (CUdeviceptr)start;
	return CUDA_SUCCESS;
}

CUAPI CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	struct reservation **pr, *r;
	struct mapping *m;

	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	size = (size + PAGE_SIZE_ - 1) & ~(PAGE_SIZE_ - 1);
	pthread_mutex_lock(&lock);
	for (pr = &reservations; *pr; pr = &(*pr)->next)
		if ((*pr)->base == ptr && (*pr)->size == size)
			break;
	r = *pr;
	/* refuse to drop a range that still has mappings in it */
	for (m = mappings; r && m; m = m->next)
		if (m->va >= r->base && m->va < r->base + r->size)
			r = NULL;
	if (!r) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	*pr = r->next;
	pthread_mutex_unlock(&lock);
	munmap((void *)r->base, r->size);
	free(r);
	return CUDA_SUCCESS;
}

/* A live physical allocation whose handle is this value (callers hold the lock). */
static struct phys *phys_find(CUmemGenericAllocationHandle handle)
{
	struct phys *ph;

	for (ph = physes; ph; ph = ph->next)
		if ((uintptr_t)ph == handle)
			return ph;
	return NULL;
}

/* Drop a physical allocation once nothing refers to it (callers hold the lock). */
static void *phys_put(struct phys *ph)
{
	struct phys **pp;
	void *storage;

	if (ph->handle_refs || ph->maps)
		return NULL;
	for (pp = &physes; *pp != ph; pp = &(*pp)->next)
		;
	*pp = ph->next;
	if (!ph->host)
		device_bytes -= ph->size;
	storage = ph->storage;
	free(ph);
	return storage;
}

CUAPI CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
			   const CUmemAllocationProp *prop, unsigned long long flags)
{
	struct phys *ph;
	int ltype;

	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!handle || !prop || !size || flags || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	ltype = prop->location.type;
	if (ltype < CU_MEM_LOCATION_TYPE_DEVICE || ltype > CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT)
		return CUDA_ERROR_INVALID_VALUE;
	if (ltype == CU_MEM_LOCATION_TYPE_DEVICE &&
	    (prop->location.id < 0 || prop->location.id >= NDEVICES))
		return CUDA_ERROR_INVALID_DEVICE;
	if (should_fail(size))
		return CUDA_ERROR_OUT_OF_MEMORY;
	ph = calloc(1, sizeof(*ph));
	if (!ph)
		return CUDA_ERROR_OUT_OF_MEMORY;
	ph->storage = malloc(size);
	if (!ph->storage) {
		free(ph);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	ph->size = size;
	ph->handle_refs = 1;
	ph->host = ltype != CU_MEM_LOCATION_TYPE_DEVICE;
	pthread_mutex_lock(&lock);
	ph->next = physes;
	physes = ph;
	if (!ph->host)
		device_bytes += size;
	pthread_mutex_unlock(&lock);
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)ph;
	return CUDA_SUCCESS;
}

CUAPI CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	struct phys *ph;
	void *storage;

	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&lock);
	ph = phys_find(handle);
	if (!ph || ph->handle_refs <= 0) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	ph->handle_refs--;
	storage = phys_put(ph);
	pthread_mutex_unlock(&lock);
	free(storage);
	return CUDA_SUCCESS;
}

CUAPI CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
			CUmemGenericAllocationHandle handle, unsigned long long flags)
{
	struct reservation *r;
	struct mapping *m, *nm;
	struct phys *ph;

	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!ptr || !size || flags)
		return CUDA_ERROR_INVALID_VALUE;
	nm = malloc(sizeof(*nm));
	if (!nm)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&lock);
	ph = phys_find(handle);
	/* a handle can be mapped only while someone still holds it */
	if (!ph || ph->handle_refs <= 0 || offset > ph->size || size > ph->size - offset)
		goto invalid;
	for (r = reservations; r; r = r->next)
		if (ptr >= r->base && ptr - r->base < r->size && size <= r->size - (ptr - r->base))
			break;
	if (!r)
		goto invalid;
	for (m = mappings; m; m = m->next)
		if (ptr < m->va + m->size && m->va < ptr + size)
			goto invalid;
	*nm = (struct mapping){ (uintptr_t)ptr, size, ph, mappings };
	mappings = nm;
	ph->maps++;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
invalid:
	pthread_mutex_unlock(&lock);
	free(nm);
	return CUDA_ERROR_INVALID_VALUE;
}

/* Unmaps every mapping inside [ptr, ptr + size); one cut in half is an error. */
CUAPI CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	struct mapping **pm, *m, *gone = NULL;
	uintptr_t end = (uintptr_t)ptr + size;
	void *storage;

	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!ptr || !size)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	for (m = mappings; m; m = m->next)
		if (m->va < end && ptr < m->va + m->size && (m->va < ptr || m->va + m->size > end))
			break;
	if (m) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	for (pm = &mappings; (m = *pm);) {
		if (m->va >= ptr && m->va + m->size <= end) {
			*pm = m->next;
			m->next = gone;
			gone = m;
		} else {
			pm = &m->next;
		}
	}
	if (!gone) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	while ((m = gone)) {
		gone = m->next;
		m->phys->maps--;
		storage = phys_put(m->phys);
		free(m);
		free(storage);
	}
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

CUAPI CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
	uintptr_t a = (uintptr_t)addr;
	struct mapping *m;

	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	for (m = mappings; m; m = m->next)
		if (a >= m->va && a - m->va < m->size)
			break;
	if (!m) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	m->phys->handle_refs++;
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)m->phys;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

/* ---- modules, libraries, launches ---- */

static CUresult module_new(CUmodule *module)
{
	struct CUmod_st *m = calloc(1, sizeof(*m));

	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&lock);
	m->next = modules;
	modules = m;
	pthread_mutex_unlock(&lock);
	*module = m;
	return CUDA_SUCCESS;
}

static int readable(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

CUAPI CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!module || !fname)
		return CUDA_ERROR_INVALID_VALUE;
	if (!readable(fname))
		return CUDA_ERROR_FILE_NOT_FOUND;
	return module_new(module);
}

CUAPI CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!module || !image)
		return CUDA_ERROR_INVALID_VALUE;
	return module_new(module);
}

CUAPI CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
				  CUjit_option *options, void **optionValues)
{
	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!module || !image || (numOptions && (!options || !optionValues)))
		return CUDA_ERROR_INVALID_VALUE;
	return module_new(module);
}

CUAPI CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!module || !fatCubin)
		return CUDA_ERROR_INVALID_VALUE;
	return module_new(module);
}

CUAPI CUresult cuModuleUnload(CUmodule hmod)
{
	struct CUmod_st **pm;

	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&lock);
	for (pm = &modules; *pm && *pm != hmod; pm = &(*pm)->next)
		;
	if (!hmod || !*pm) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	*pm = hmod->next;
	pthread_mutex_unlock(&lock);
	free(hmod);
	return CUDA_SUCCESS;
}

static CUresult library_new(CUlibrary *library, unsigned int numJitOptions, CUjit_option *jitOptions,
			    void **jitOptionsValues, unsigned int numLibraryOptions,
			    CUlibraryOption *libraryOptions, void **libraryOptionValues)
{
	struct CUlib_st *l;

	if ((numJitOptions && (!jitOptions || !jitOptionsValues)) ||
	    (numLibraryOptions && (!libraryOptions || !libraryOptionValues)))
		return CUDA_ERROR_INVALID_VALUE;
	l = calloc(1, sizeof(*l));
	if (!l)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&lock);
	l->next = libraries;
	libraries = l;
	pthread_mutex_unlock(&lock);
	*library = l;
	return CUDA_SUCCESS;
}

CUAPI CUresult cuLibraryLoadData(CUlibrary *library, const void *code,
				 CUjit_option *jitOptions, void **jitOptionsValues,
				 unsigned int numJitOptions, CUlibraryOption *libraryOptions,
				 void **libraryOptionValues, unsigned int numLibraryOptions)
{
	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!library || !code)
		return CUDA_ERROR_INVALID_VALUE;
	return library_new(library, numJitOptions, jitOptions, jitOptionsValues,
			   numLibraryOptions, libraryOptions, libraryOptionValues);
}

CUAPI CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
				     CUjit_option *jitOptions, void **jitOptionsValues,
				     unsigned int numJitOptions, CUlibraryOption *libraryOptions,
				     void **libraryOptionValues, unsigned int numLibraryOptions)
{
	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!library || !fileName)
		return CUDA_ERROR_INVALID_VALUE;
	if (!readable(fileName))
		return CUDA_ERROR_FILE_NOT_FOUND;
	return library_new(library, numJitOptions, jitOptions, jitOptionsValues,
			   numLibraryOptions, libraryOptions, libraryOptionValues);
}

CUAPI CUresult cuLibraryUnload(CUlibrary library)
{
	struct CUlib_st **pl;

	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&lock);
	for (pl = &libraries; *pl && *pl != library; pl = &(*pl)->next)
		;
	if (!library || !*pl) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	*pl = library->next;
	pthread_mutex_unlock(&lock);
	free(library);
	return CUDA_SUCCESS;
}

/* No kernels run here (and no cuModuleGetFunction): any function handle is accepted. */
static CUresult launch(unsigned int gx, unsigned int gy, unsigned int gz,
		       unsigned int bx, unsigned int by, unsigned int bz)
{
	if (!is_init())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!gx || !gy || !gz || !bx || !by || !bz)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

CUAPI CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
			      unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
			      unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
			      void **kernelParams, void **extra)
{
	(void)f;
	(void)sharedMemBytes;
	(void)hStream;
	(void)kernelParams;
	(void)extra;
	return launch(gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ);
}

CUAPI CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				   unsigned int gridDimZ, unsigned int blockDimX,
				   unsigned int blockDimY, unsigned int blockDimZ,
				   unsigned int sharedMemBytes, CUstream hStream,
				   void **kernelParams, void **extra)
{
	(void)f;
	(void)sharedMemBytes;
	(void)hStream;
	(void)kernelParams;
	(void)extra;
	return launch(gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ);
}

/* ---- errors ---- */

CUAPI CUresult cuGetErrorString(CUresult error, const char **pStr)
{
	static const struct {
		CUresult rc;
		const char *text;
	} texts[] = {
		{ 0, "no error" },
		{ 1, "invalid argument" },
		{ 2, "out of memory" },
		{ 3, "initialization error" },
		{ 4, "driver shutting down" },
		{ 34, "CUDA driver is a stub library" },
		{ 100, "no CUDA-capable device is detected" },
		{ 101, "invalid device ordinal" },
		{ 201, "invalid device context" },
		{ 301, "file not found" },
		{ 400, "invalid resource handle" },
		{ 801, "operation not supported" },
	};
	size_t i;

	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		if (texts[i].rc == error) {
			*pStr = texts[i].text;
			return CUDA_SUCCESS;
		}
	}
	*pStr = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}
