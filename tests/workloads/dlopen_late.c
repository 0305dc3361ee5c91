// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * A CUDA driver that appears after the tracer started: no CUDA library at
 * first, then dlopen(LIBPATH) (a libcuda.so.1 stand-in, maybe a copy
 * elsewhere) and at once, with no pause, as real programs do:
 *   runtime_init  cuInit; device +4 +12 -4, host +1 (MiB)
 * and exit without freeing the 12 MiB and the 1 MiB. Paths come only from
 * the arguments and output goes out with write(), so that it runs inside
 * a chroot too. Prints the ledger as JSON.
 *   dlopen_late [--wait] LIBPATH
 * With --open-first it opens LIBPATH first, says "opened" on stdout, waits
 * for a byte on stdin, then maps the file it opened executable (as the
 * dynamic linker does, only later) before the dlopen: an open and its
 * mapping as far apart as the caller wants.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>

#include "common.h"
#include "ledger.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

static struct jbuf out;

static void *must_sym(void *h, const char *name)
{
	void *f = dlsym(h, name);

	if (!f) {
		dprintf(2, "dlopen_late: no %s\n", name);
		exit(1);
	}
	return f;
}

int main(int argc, char **argv)
{
	bool open_first = argc > 1 && !strcmp(argv[1], "--open-first");
	int first = argc > 1 && (!strcmp(argv[1], "--wait") || open_first) ? 2 : 1;
	CUresult (*cu_init)(unsigned int);
	CUresult (*cu_mem_alloc)(CUdeviceptr *, size_t);
	CUresult (*cu_mem_free)(CUdeviceptr);
	CUresult (*cu_mem_alloc_host)(void **, size_t);
	CUdeviceptr a, b;
	void *h, *host;

	if (argc <= first) {
		dprintf(2, "usage: dlopen_late [--wait | --open-first] LIBPATH\n");
		return 2;
	}
	wait_go(argc, argv);
	if (open_first) {
		int fd = open(argv[first], O_RDONLY | O_CLOEXEC);
		char c;

		if (fd < 0 || write(1, "opened\n", 7) != 7 || read(0, &c, 1) != 1 ||
		    mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED) {
			dprintf(2, "dlopen_late: %s: %s\n", argv[first], strerror(errno));
			return 1;
		}
	}

	h = dlopen(argv[first], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		dprintf(2, "dlopen_late: %s\n", dlerror());
		return 1;
	}

	cu_init = must_sym(h, "cuInit");
	cu_mem_alloc = must_sym(h, "cuMemAlloc_v2");
	cu_mem_free = must_sym(h, "cuMemFree_v2");
	cu_mem_alloc_host = must_sym(h, "cuMemAllocHost_v2");

	ledger_phase("runtime_init");
	MUST(cu_init(0));
	MUST(cu_mem_alloc(&a, 4 * MiB));
	ledger_alloc(LK_CUDA_DEVICE, (void *)(uintptr_t)a, 4 * MiB);
	MUST(cu_mem_alloc(&b, 12 * MiB));
	ledger_alloc(LK_CUDA_DEVICE, (void *)(uintptr_t)b, 12 * MiB);
	MUST(cu_mem_free(a));
	ledger_free((void *)(uintptr_t)a);
	MUST(cu_mem_alloc_host(&host, 1 * MiB));
	ledger_alloc(LK_CUDA_HOST, host, 1 * MiB);

	/* b and host stay allocated: the final levels are 12 MiB device, 1 MiB host */
	jb_printf(&out, "{");
	ledger_json(&out);
	jb_printf(&out, "}\n");
	jb_write(&out);
	return 0;
}
