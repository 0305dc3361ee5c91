// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Four phases in functions named after them, with known mappings:
 *   phase_load    +32 +16                    alloc 48  free 0   peak 48  change +48
 *   phase_warmup  +64 -64 (transient) +8     alloc 72  free 64  peak 64  change +8
 *   phase_serve   3 x (+4 -4)                alloc 12  free 12  peak 4   change 0
 *   phase_shrink  -32 -16 +2                 alloc 2   free 48  peak 0   change -46
 * (MiB; every mapped page is touched). Phases start by --phase rules on the
 * functions, or with --marker by memtrail_phase() at their entry. Prints
 * the arithmetic and VmData at each phase's entry and at the end as JSON.
 *   phases [--wait] [--marker]
 */
#include "common.h"
#include "memtrail_marker.h"

static int use_marker;
static long entry_data[4];
static char *a, *b, *c;

#define ENTER(i, name) do {			\
	if (use_marker)				\
		memtrail_phase(name);		\
	entry_data[i] = status_bytes("VmData");	\
} while (0)

__attribute__((noinline)) void phase_load(void)
{
	ENTER(0, "load");
	a = map_touch(32 * MiB);
	b = map_touch(16 * MiB);
}

__attribute__((noinline)) void phase_warmup(void)
{
	ENTER(1, "warmup");
	munmap(map_touch(64 * MiB), 64 * MiB);
	c = map_touch(8 * MiB);
}

__attribute__((noinline)) void phase_serve(void)
{
	int i;

	ENTER(2, "serve");
	for (i = 0; i < 3; i++)
		munmap(map_touch(4 * MiB), 4 * MiB);
}

__attribute__((noinline)) void phase_shrink(void)
{
	ENTER(3, "shrink");
	munmap(a, 32 * MiB);
	munmap(b, 16 * MiB);
	map_touch(2 * MiB);
}

int main(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++)
		use_marker |= !strcmp(argv[i], "--marker");
	wait_go(argc, argv);
	phase_load();
	phase_warmup();
	phase_serve();
	phase_shrink();
	(void)c;
	report("{\"entry\": [%ld, %ld, %ld, %ld], \"final\": %ld, \"mib\": %lu}\n",
	       entry_data[0], entry_data[1], entry_data[2], entry_data[3],
	       status_bytes("VmData"), MiB);
	return 0;
}
