// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Holds memory in a named phase until stdin closes, for the live views:
 *   holder PHASE MIB
 * waits for a first byte on stdin (so that a tracer attaches first), enters
 * PHASE (the C marker), maps and touches MIB MiB, then prints its ledger as
 * one JSON line (the bytes it holds, and VmData, RssAnon and VmRSS from
 * /proc/self/status once they are held) and waits for EOF on stdin.
 */
#include "common.h"
#include "memtrail_marker.h"

int main(int argc, char **argv)
{
	long mib;
	char c;

	if (argc != 3 || (mib = atol(argv[2])) <= 0)
		return 2;
	if (read(0, &c, 1) != 1)
		return 2;
	memtrail_phase(argv[1]);
	map_touch((size_t)mib * MiB);
	report("{\"pid\": %d, \"held\": %ld, \"vm_data\": %ld, \"rss_anon\": %ld, \"vm_rss\": %ld}\n",
	       (int)getpid(), mib * (long)MiB, status_bytes("VmData"), status_bytes("RssAnon"),
	       status_bytes("VmRSS"));
	while (read(0, &c, 1) > 0)
		;
	return 0;
}
