/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The loop record, watch and top share: the kernel's events read as they
 * come, every target sampled each interval, the session's periodic work,
 * targets that moved into a watched cgroup found, and each command's own
 * work at its hooks.
 */
#ifndef MEMTRAIL_LOOP_H
#define MEMTRAIL_LOOP_H

#include <stdbool.h>
#include <stdint.h>

#include "session.h"

#define LOOP_POLL_MS 50		/* the longest a turn waits for events */

/*
 * A command's part. Each hook returns 0 to go on, 1 to stop, or a negative
 * errno to stop on an error; a NULL hook does nothing.
 */
struct loop_hooks {
	uint32_t interval_ms;	/* every target sampled this often */
	uint32_t scan_ms;	/* a scan for new targets this often (cgroups); 0: none */
	bool status;		/* the status line (statusline.h) kept */
	bool until_signal;	/* the first stop signal ends it (else TURN decides) */
	int (*sampled)(void *ctx, uint64_t now_ms);	/* after each sample */
	int (*turn)(void *ctx, uint64_t now_ms);	/* each turn, after the session's work */
};

/*
 * Run S's loop until a hook stops it (or, with until_signal, a stop
 * signal): 0, or the first hook's error; a failure to read the kernel's
 * events is said, and -EIO.
 */
int loop__run(struct session *s, const struct loop_hooks *h, void *ctx);

#endif
