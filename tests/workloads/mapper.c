// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Maps and touches exact sizes in steps, unmapping some on the way, and
 * reports its own arithmetic and what /proc said at the peak and at the end
 * as one JSON line on stdout:
 *   mapper [--wait]
 * Steps (MiB, + maps and touches, - unmaps the newest such mapping):
 *   +16 +32 -16 +64 +8 (peak: 104 above baseline) -64 -32 +4 (final: 12)
 */
#include "common.h"

static const int steps[] = { 16, 32, -16, 64, 8, -64, -32, 4 };
#define NSTEPS (sizeof(steps) / sizeof(steps[0]))

int main(int argc, char **argv)
{
	struct mappings m = { .n = 0 };
	size_t i;
	long base_data, base_anon, level = 0, peak = 0, final_data, anon_at_peak = 0, hwm;
	long peak_touched = 0;

	wait_go(argc, argv);
	base_data = status_bytes("VmData");
	base_anon = status_bytes("RssAnon");
	for (i = 0; i < NSTEPS; i++) {
		step(&m, steps[i]);
		level += (long)steps[i] * (long)MiB;
		if (level > peak) {
			peak = level;
			anon_at_peak = status_bytes("RssAnon");
			peak_touched = level;
		}
		usleep(20000);
	}
	final_data = status_bytes("VmData");
	hwm = status_bytes("VmHWM");
	report("{\"base_data\": %ld, \"base_anon\": %ld, \"peak_steps\": %ld, \"final_steps\": %ld, "
	       "\"final_data\": %ld, \"anon_at_peak\": %ld, \"peak_touched\": %ld, \"vmhwm\": %ld}\n",
	       base_data, base_anon, peak, level, final_data, anon_at_peak, peak_touched, hwm);
	return 0;
}
