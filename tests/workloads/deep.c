// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Allocation chains without frame pointers, for --unwind dwarf:
 *   deep LIBDIR
 * built -O2 -fomit-frame-pointer. Five allocations, each of its own size at
 * the end of a chain 12 calls deep: in the main thread, in a second
 * thread, in a signal handler (raised synchronously inside a chain),
 * through a dlopen()ed library (LIBDIR/libdeeplib.so), and one freed at
 * once ("freed"); the others are kept. deep_alloc mallocs
 * and then asks glibc's backtrace() (which unwinds by .eh_frame) for its
 * own chain. Prints, once the allocations are made and kept:
 *   {"allocs": [{"where": W, "size": N, "frames": ["0x...", ...]}, ...],
 *    "uprobes": ["0xSTART", "0xEND"]}
 * where frames are backtrace()'s return addresses above deep_alloc itself,
 * the callers' chain its malloc call has too, and "uprobes" the kernel's
 * uretprobe trampoline mapping where it has one. Then waits for a line (or the
 * end) of its input, as a server goes on running, and exits.
 */
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define KEEP() __asm__ volatile("" ::: "memory")	/* no tail call: each frame stays */
#define MAX_FRAMES 64

struct seen {
	const char *where;
	size_t size;
	void *frames[MAX_FRAMES];
	int n;
	void *block;
};

static struct seen seen[5];
static int n_seen;

NOINLINE void deep_alloc(size_t size, const char *where)
{
	struct seen *s = &seen[n_seen++];

	s->block = malloc(size);
	memset(s->block, 1, size);
	s->where = where;
	s->size = size;
	s->n = backtrace(s->frames, MAX_FRAMES);
	KEEP();
}

/* a chain DEPTH calls deep, then the allocation */
NOINLINE static void chain(int depth, size_t size, const char *where)
{
	if (depth > 1)
		chain(depth - 1, size, where);
	else if (!strcmp(where, "signal"))
		raise(SIGUSR1);
	else
		deep_alloc(size, where);
	KEEP();
}

NOINLINE static void on_signal(int sig)
{
	(void)sig;
	chain(3, 300000, "in_handler");
	KEEP();
}

NOINLINE static void *thread_main(void *arg)
{
	(void)arg;
	chain(12, 200000, "thread");
	KEEP();
	return NULL;
}

int main(int argc, char **argv)
{
	void (*entry)(void (*)(size_t, const char *), size_t);
	char path[4096], line[512];
	unsigned long lo, hi;
	pthread_t th;
	FILE *f;
	void *lib;
	int i, j;

	if (argc < 2)
		return 2;
	snprintf(path, sizeof(path), "%s/libdeeplib.so", argv[1]);
	signal(SIGUSR1, on_signal);
	chain(12, 100000, "main");
	if (pthread_create(&th, NULL, thread_main, NULL) || pthread_join(th, NULL))
		return 1;
	chain(12, 0, "signal");
	lib = dlopen(path, RTLD_NOW);
	entry = lib ? (void (*)(void (*)(size_t, const char *), size_t))dlsym(lib, "deeplib_entry") :
		NULL;
	if (!entry) {
		fprintf(stderr, "deep: %s\n", dlerror());
		return 1;
	}
	entry(deep_alloc, 400000);
	/* one more, freed at once: its site holds nothing in use */
	chain(12, 500000, "freed");
	free(seen[n_seen - 1].block);
	printf("{\"allocs\": [");
	for (i = 0; i < n_seen; i++) {
		printf("%s{\"where\": \"%s\", \"size\": %zu, \"frames\": [", i ? ", " : "",
		       seen[i].where, seen[i].size);
		for (j = 1; j < seen[i].n; j++)
			printf("%s\"%p\"", j > 1 ? ", " : "", seen[i].frames[j]);
		printf("]}");
	}
	printf("]");
	/*
	 * where the kernel's uretprobe trampoline is ([uprobes]): backtrace()
	 * reads it as the return address of a function probed at its return
	 */
	f = fopen("/proc/self/maps", "r");
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "[uprobes]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
			printf(", \"uprobes\": [\"0x%lx\", \"0x%lx\"]", lo, hi);
	if (f)
		fclose(f);
	printf("}\n");
	fflush(stdout);
	while ((i = getchar()) != EOF && i != '\n')
		;
	return 0;
}
