// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Maps 64 MiB, writes one byte of it and exits at once: a process whose
 * whole life after its dynamic linker is microseconds. Reports its own
 * arithmetic as one JSON line on stdout:
 *   blink
 */
#include "common.h"

#define BLINK_BYTES (64 * MiB)

int main(void)
{
	char *p = mmap(NULL, BLINK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	if (p == MAP_FAILED)
		return 3;
	p[0] = 1;
	report("{\"pid\": %d, \"mapped\": %zu}\n", (int)getpid(), (size_t)BLINK_BYTES);
	return 0;
}
