/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Heap sites: the malloc family of every allocator a target maps (glibc,
 * jemalloc with or without a prefix, tcmalloc, mimalloc, their C++
 * operators), found by symbol in each file, probed per target process with
 * one uprobe_multi link per file and direction. With an overhead budget the
 * links come and go in cycles so that the probes' cost, measured at start,
 * stays within a share of each target's CPU time.
 */
#ifndef MEMTRAIL_HEAP_H
#define MEMTRAIL_HEAP_H

#include <stdbool.h>
#include <stdint.h>

#include "tracer.h"
#include "trail_sites.h"

struct heap;

/* Under a node budget a window lasts this long at most: then the next process's. */
#define HEAP_NODE_WINDOW_S 2

struct heap_config {
	double budget_pct;	/* 0: probes stay on (full coverage) */
	uint64_t sample_bytes;	/* 0: every allocation */
	/*
	 * budget_pct is of one CPU, for the node: one window at a time, opened
	 * on the processes heap__node_offer names (watch --heap-budget)
	 */
	bool node;
};

/* 0 or -errno (logged). Measures the probes' cost per hit when a budget is set. */
int heap__open(struct heap **out, struct tracer *t, const struct heap_config *cfg);
void heap__destroy(struct heap *h);

/* Probe the allocators a held command PID will load (its DT_NEEDED closure). */
void heap__prepare_command(struct heap *h, uint32_t pid, const char *path);
/* Probe the allocators PID maps now. */
void heap__scan(struct heap *h, uint32_t pid);
/* PID ended: its links go. */
void heap__forget(struct heap *h, uint32_t pid);
/*
 * Node budget: the processes to open windows on next, most wanted first
 * (those whose anonymous memory grows fastest); replaces the last offer.
 */
void heap__node_offer(struct heap *h, const uint32_t *pids, size_t n);
/* The budget's cycles (NOW_MS: the session's clock, windows are said in it). */
void heap__tick(struct heap *h, uint64_t now_ms);
/* PID's probes spent this cycle's budget. */
void heap__budget_spent(struct heap *h, uint32_t pid, uint64_t now_ms);
/*
 * How heap sites of PID were taken, into OUT: mode, sampling rate, cost per
 * hit, hits, coverage, and whether in-use figures are sound.
 */
void heap__sampling(struct heap *h, uint32_t pid, struct trail_heap *out);

#endif
