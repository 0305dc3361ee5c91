// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * A plugin a workload loads and unloads: plugin_map(n) maps and touches n
 * bytes of anonymous memory that outlive the plugin. The mapping is made
 * one call down, so that plugin_map's return address is on the stack that
 * a frame-pointer walk from inside mmap finds.
 */
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>

__attribute__((noinline)) static void *plugin_pages(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	asm volatile("" ::: "memory");	/* no tail call: this frame stays */
	return p;
}

__attribute__((noinline)) void *plugin_map(size_t n)
{
	void *p = plugin_pages(n);

	if (p == MAP_FAILED)
		return NULL;
	memset(p, 1, n);
	return p;
}
