/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * memtrail's phase marker for C and C++ programs: header only, no library.
 *
 *   #include "memtrail_marker.h"
 *   memtrail_phase("model_load");
 *
 * starts phase "model_load" in the calling process when memtrail traces it.
 * When nothing traces it, the call is one prctl() with an option the kernel
 * does not know, which fails with EINVAL and does nothing else.
 * Names: printable ASCII, 1 to 63 bytes; others are ignored and counted by
 * memtrail as lost "phase_names" (as is a name it could not read).
 */
#ifndef MEMTRAIL_MARKER_H
#define MEMTRAIL_MARKER_H

#include <sys/prctl.h>

#define MEMTRAIL_PRCTL_PHASE 0x4d545048	/* 'MTPH' */

static inline void memtrail_phase(const char *name)
{
	const volatile char *p = name;
	unsigned long n = 0;

	/*
	 * Read the name here: memtrail's BPF program cannot fault pages in, and
	 * a string literal's page may not be resident yet (right after exec).
	 */
	while (n < 64 && p[n])
		n++;
	prctl(MEMTRAIL_PRCTL_PHASE, (unsigned long)name, n, 0UL, 0UL);
}

#endif
