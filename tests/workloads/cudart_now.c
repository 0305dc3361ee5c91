// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The REAL CUDA runtime, called the instant it is loaded, as frameworks do:
 * dlopen(LIBCUDART) and at once, with no pause,
 *   cudaMalloc 1 MiB, cudaMallocManaged 2 MiB, cudaMallocHost 3 MiB,
 *   cudaMallocAsync 4 MiB (where the runtime has it), cudaFree(a bad pointer)
 * On a machine without a GPU each fails (the runtime dlopen()s the driver,
 * libcuda.so.1, and calls cuInit first): their return codes are the ground
 * truth a tracer must report. Prints
 *   {"pid", "calls": [{"function", "size", "rc", "error"}, ...], "code": [PATH, ...]}
 * where "code" are the files it has mapped executable at the end.
 * or exits 3 with {"skip": why} when the library cannot be opened.
 *   cudart_now [--wait] LIBCUDART
 */
#include <dlfcn.h>
#include <stdint.h>

#include "common.h"

typedef int (*malloc_fn)(void **, size_t);
typedef int (*managed_fn)(void **, size_t, unsigned int);
typedef int (*async_fn)(void **, size_t, void *);
typedef int (*free_fn)(void *);
typedef const char *(*name_fn)(int);

static struct {
	const char *fn;
	size_t size;
	int rc;
} calls[5];
static int n_calls;

static void note(const char *fn, size_t size, int rc)
{
	calls[n_calls].fn = fn;
	calls[n_calls].size = size;
	calls[n_calls++].rc = rc;
}

int main(int argc, char **argv)
{
	int waiting = argc > 1 && !strcmp(argv[1], "--wait");
	malloc_fn cuda_malloc, cuda_malloc_host;
	managed_fn cuda_malloc_managed;
	async_fn cuda_malloc_async;
	free_fn cuda_free;
	name_fn error_name;
	void *h, *p = NULL;
	char out[8192], line[4352], path[4096];
	FILE *maps;
	size_t len;
	int i;

	if (argc < 2 + waiting) {
		dprintf(2, "usage: cudart_now [--wait] LIBCUDART\n");
		return 2;
	}
	wait_go(argc, argv);
	h = dlopen(argv[1 + waiting], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		report("{\"skip\": \"cannot open %s\"}\n", argv[1 + waiting]);
		return 3;
	}
	cuda_malloc = (malloc_fn)dlsym(h, "cudaMalloc");
	cuda_malloc_managed = (managed_fn)dlsym(h, "cudaMallocManaged");
	cuda_malloc_host = (malloc_fn)dlsym(h, "cudaMallocHost");
	cuda_malloc_async = (async_fn)dlsym(h, "cudaMallocAsync");
	cuda_free = (free_fn)dlsym(h, "cudaFree");
	error_name = (name_fn)dlsym(h, "cudaGetErrorName");
	if (!cuda_malloc || !cuda_malloc_managed || !cuda_malloc_host || !cuda_free ||
	    !error_name) {
		report("{\"skip\": \"%s lacks the runtime API\"}\n", argv[1 + waiting]);
		return 3;
	}

	note("cudaMalloc", 1 * MiB, cuda_malloc(&p, 1 * MiB));
	note("cudaMallocManaged", 2 * MiB, cuda_malloc_managed(&p, 2 * MiB, 1));
	note("cudaMallocHost", 3 * MiB, cuda_malloc_host(&p, 3 * MiB));
	if (cuda_malloc_async)
		note("cudaMallocAsync", 4 * MiB, cuda_malloc_async(&p, 4 * MiB, NULL));
	note("cudaFree", 0, cuda_free((void *)(uintptr_t)0x1000));

	len = (size_t)snprintf(out, sizeof(out), "{\"pid\": %d, \"calls\": [", getpid());
	for (i = 0; i < n_calls && len < sizeof(out); i++)
		len += (size_t)snprintf(out + len, sizeof(out) - len,
					"%s{\"function\": \"%s\", \"size\": %zu, \"rc\": %d, "
					"\"error\": \"%s\"}", i ? ", " : "", calls[i].fn,
					calls[i].size, calls[i].rc, error_name(calls[i].rc));
	len += (size_t)snprintf(out + len, len < sizeof(out) ? sizeof(out) - len : 0,
				"], \"code\": [");
	maps = fopen("/proc/self/maps", "re");
	for (i = 0; maps && fgets(line, sizeof(line), maps) && len < sizeof(out);) {
		char perms[8];

		if (sscanf(line, "%*x-%*x %7s %*x %*x:%*x %*u %4095s", perms, path) == 2 &&
		    perms[2] == 'x' && path[0] == '/')
			len += (size_t)snprintf(out + len, sizeof(out) - len, "%s\"%s\"",
						i++ ? ", " : "", path);
	}
	if (maps)
		fclose(maps);
	len += (size_t)snprintf(out + len, len < sizeof(out) ? sizeof(out) - len : 0, "]}\n");
	if (len >= sizeof(out) || write(1, out, len) != (ssize_t)len)
		return 9;
	return 0;
}
