/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * memtrail's one clock: CLOCK_MONOTONIC, which BPF's bpf_ktime_get_ns()
 * reads too, so user space and event times compare. Async-signal-safe.
 */
#ifndef MEMTRAIL_CLOCK_H
#define MEMTRAIL_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Now, in ns of CLOCK_MONOTONIC. */
static inline uint64_t clock__mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Now, in ms of CLOCK_MONOTONIC. */
static inline uint64_t clock__mono_ms(void)
{
	return clock__mono_ns() / 1000000;
}

#endif
