// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Maps and touches 4 MiB at a time, in phase "grow" (the marker), until the
 * kernel stops it: inside a memory cgroup with a limit, the OOM killer.
 */
#include "common.h"
#include "memtrail_marker.h"

int main(void)
{
	memtrail_phase("grow");
	for (;;)
		map_touch(4 * MiB);
}
