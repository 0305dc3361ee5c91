// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The REAL CUDA runtime on a machine with no driver: dlopen libcudart,
 * cudaMalloc 1 MiB at once, and print the error it returns (not 0: there
 * is no libcuda.so.1 to reach). Tests memtrail's cudart probes and its
 * report of a failed call that is not an OOM.
 *   cudart_real [--wait] [LIBCUDART]   (the CUDA 13 toolkit's)
 * Prints {"pid", "rc", "error", "size"}, or {"skip": why} and exits 3
 * when the library cannot be opened.
 */
#include <dlfcn.h>

#include "common.h"

#define DEFAULT_CUDART "/usr/local/cuda/lib64/libcudart.so.13"
#define SIZE 1048576

typedef int (*malloc_fn)(void **, size_t);
typedef int (*free_fn)(void *);
typedef const char *(*name_fn)(int);

/*
 * cudart finds the driver by dlopen("libcuda.so.1"). When LD_LIBRARY_PATH
 * leads to one (memtrail's stand-in, say), run again without it: the
 * dynamic loader reads it only at start-up.
 */
static void hide_driver(char **argv)
{
	const char *path = getenv("LD_LIBRARY_PATH");
	char dir[4096], lib[4200];
	const char *p, *end;
	size_t n;

	if (!path || getenv("CUDART_REAL_REEXEC"))
		return;
	for (p = path; *p; p = *end ? end + 1 : end) {
		end = strchrnul(p, ':');
		n = (size_t)(end - p);
		if (n >= sizeof(dir))
			continue;
		memcpy(dir, p, n);
		dir[n] = '\0';
		snprintf(lib, sizeof(lib), "%s/libcuda.so.1", n ? dir : ".");
		if (!access(lib, F_OK)) {
			unsetenv("LD_LIBRARY_PATH");
			setenv("CUDART_REAL_REEXEC", "1", 1);
			execv("/proc/self/exe", argv);
			return;		/* no /proc: go on, and say so below */
		}
	}
}

int main(int argc, char **argv)
{
	const char *path = DEFAULT_CUDART, *name;
	int waiting = argc > 1 && !strcmp(argv[1], "--wait");
	void *h, *p = NULL;
	malloc_fn cuda_malloc;
	free_fn cuda_free;
	name_fn error_name;
	int rc;

	hide_driver(argv);
	wait_go(argc, argv);
	if (argc > 1 + waiting)
		path = argv[1 + waiting];

	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		report("{\"skip\": \"cannot open %s\"}\n", path);
		return 3;
	}
	cuda_malloc = (malloc_fn)dlsym(h, "cudaMalloc");
	cuda_free = (free_fn)dlsym(h, "cudaFree");
	error_name = (name_fn)dlsym(h, "cudaGetErrorName");
	if (!cuda_malloc || !cuda_free || !error_name) {
		report("{\"skip\": \"%s lacks cudaMalloc, cudaFree or cudaGetErrorName\"}\n", path);
		return 3;
	}

	rc = cuda_malloc(&p, SIZE);
	if (!rc)
		cuda_free(p);
	name = error_name(rc);
	report("{\"pid\": %d, \"rc\": %d, \"error\": \"%s\", \"size\": %d, \"driver_loaded\": %s}\n",
	       (int)getpid(), rc, name ? name : "", SIZE,
	       dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) ? "true" : "false");
	return 0;
}
