/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Reading a trail file as a stream: the timelines as sample arrays, the rest
 * as a jansson tree.
 */
#ifndef MEMTRAIL_TRAILSTREAM_H
#define MEMTRAIL_TRAILSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "memtrail.h"

/* The limits of a trail read back (trail.h says why): pids, times in ms, levels in bytes. */
#define TRAIL_PID_MAX 4194304
#define TRAIL_T_MS_MAX (INT64_MAX / 1000000)
#define TRAIL_LEVEL_MAX (1LL << 59)

struct trail_sample {
	uint64_t t_ms;				/* since the trail started */
	int64_t level[MEMTRAIL_KIND_MAX];	/* current bytes per kind */
};

/*
 * The checks of each target and each event as it ends (I: its index),
 * before millions more are read: 0, or -1 and a one-line reason in ERR.
 */
struct trailstream_checks {
	int (*target)(json_t *o, size_t i, char *err, size_t errlen);
	int (*event)(json_t *ev, size_t i, char *err, size_t errlen);
};

struct trailstream_timeline {
	struct trail_sample *s;
	size_t n, cap;
	bool present;		/* the target had a "timeline" array */
};

/* Timelines by the target's index in "targets". */
struct trailstream_timelines {
	struct trailstream_timeline *tl;
	size_t n, cap;
};

/*
 * Whether timelines are read by the fast path (the default) or by yajl
 * alone: for the tests, which read every input both ways.
 */
void trailstream__set_fast(bool on);
/*
 * Parse the JSON file PATH: the document without targets[].timeline arrays,
 * whose samples are in TLS instead (an array of objects each with a t_ms in
 * [0, TRAIL_T_MS_MAX], none before the previous one, and kinds' levels in
 * [-TRAIL_LEVEL_MAX, TRAIL_LEVEL_MAX]; other keys skipped). NULL and a one-line reason in
 * ERR when the file cannot be read or is malformed, or one of CHECKS fails.
 * Without KEEP_SAMPLES the samples are checked as they come and not kept
 * (TLS's timelines empty): what renderers that draw no timeline need, in
 * the memory of one sample instead of all of them.
 */
json_t *trailstream__load(const char *path, struct trailstream_timelines *tls,
			  const struct trailstream_checks *checks, bool keep_samples, char *err,
			  size_t errlen);
void trailstream__free(struct trailstream_timelines *tls);

#endif
