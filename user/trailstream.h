/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Reading a trail file as a stream: the timelines as sample arrays, the rest
 * as a jansson tree.
 */
#ifndef MEMTRAIL_TRAILSTREAM_H
#define MEMTRAIL_TRAILSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>

#include "trail.h"

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
 * Parse the JSON file PATH: the document without targets[].timeline arrays,
 * whose samples are in TLS instead (an array of objects each with a t_ms in
 * [0, TRAIL_T_MS_MAX], none before the previous one, and kinds' levels in
 * [-TRAIL_LEVEL_MAX, TRAIL_LEVEL_MAX]; other keys skipped). NULL and a one-line reason in
 * ERR when the file cannot be read or is malformed.
 */
json_t *trailstream__load(const char *path, struct trailstream_timelines *tls, char *err,
			  size_t errlen);
void trailstream__free(struct trailstream_timelines *tls);

#endif
