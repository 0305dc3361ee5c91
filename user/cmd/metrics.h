/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Prometheus metrics for memtrail watch: the text exposition format
 * (version 0.0.4) served on GET /metrics by libmicrohttpd's own thread.
 * The watch loop renders the whole page once an interval and swaps it in
 * under a mutex, so a scrape never touches the tracer's structures.
 */
#ifndef MEMTRAIL_METRICS_H
#define MEMTRAIL_METRICS_H

#include <stdint.h>

#include "trail.h"

struct metrics;

#define DEFAULT_METRICS_EXPIRE_S 300
#define METRICS_GONE_MAX 1024	/* ended targets whose series are kept, at most */

struct metrics_config {
	const char *listen;	/* "[ADDR:]PORT"; ADDR defaults to 127.0.0.1 */
	const char *pods_dir;	/* the kubelet's pod log directory, for pod names */
	uint32_t expire_s;	/* an ended target's series stay this long */
};

/* Listen and serve; 0, or -errno with the reason logged on one line. */
int metrics__open(struct metrics **out, const struct metrics_config *cfg);
void metrics__destroy(struct metrics *m);

/* Counters of what watch did. */
void metrics__verdict(struct metrics *m, const char *cause);
void metrics__snapshot(struct metrics *m, const char *trigger);
/* TT ended at NOW_MS: its series stay until expire_s later. */
void metrics__ended(struct metrics *m, const struct trail_target *tt, uint64_t now_ms);
/* Render the page from the live targets of T and the lost counters; serve it. */
void metrics__update(struct metrics *m, const struct trail *t, const uint64_t *lost,
		     uint64_t now_ms);

#endif
