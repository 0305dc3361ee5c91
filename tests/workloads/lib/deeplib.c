// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The dlopen()ed part of the deep workload: a chain of its own, built
 * -O2 -fomit-frame-pointer like the program, ending in the program's
 * deep_alloc (passed in).
 */
#include <stddef.h>

typedef void (*deep_alloc_fn)(size_t size, const char *where);

#define NOINLINE __attribute__((noinline))
#define KEEP() __asm__ volatile("" ::: "memory")	/* no tail call: each frame stays */

NOINLINE static void lib3(deep_alloc_fn f, size_t size) { f(size, "dlopen"); KEEP(); }
NOINLINE static void lib2(deep_alloc_fn f, size_t size) { lib3(f, size); KEEP(); }
NOINLINE static void lib1(deep_alloc_fn f, size_t size) { lib2(f, size); KEEP(); }

NOINLINE void deeplib_entry(deep_alloc_fn f, size_t size)
{
	lib1(f, size);
	KEEP();
}
