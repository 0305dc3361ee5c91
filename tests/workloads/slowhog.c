// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Grows slowly towards whatever limit it runs under: in phase "grow",
 * maps and touches 1 MiB every DELAY_MS milliseconds (default 40) until the
 * kernel stops it.
 */
#include <stdlib.h>
#include <time.h>

#include "common.h"
#include "memtrail_marker.h"

int main(int argc, char **argv)
{
	long delay_ms = argc > 1 ? atol(argv[1]) : 40;
	struct timespec ts = { .tv_sec = delay_ms / 1000, .tv_nsec = (delay_ms % 1000) * 1000000L };

	memtrail_phase("grow");
	for (;;) {
		map_touch(MiB);
		nanosleep(&ts, NULL);
	}
}
