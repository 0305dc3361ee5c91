// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Maps and touches 4 MiB at a time (KIB KiB with an argument), in phase
 * "grow" (the marker), until the kernel stops it: inside a memory cgroup
 * with a limit, the OOM killer.
 *   hog [KIB]
 */
#include "common.h"
#include "memtrail_marker.h"

int main(int argc, char **argv)
{
	size_t size = argc > 1 ? (size_t)atol(argv[1]) * 1024 : 4 * MiB;

	if (!size)
		return 2;
	memtrail_phase("grow");
	for (;;)
		map_touch(size);
}
