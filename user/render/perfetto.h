/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A trail as a Chrome Trace Event file (the JSON that ui.perfetto.dev and
 * chrome://tracing open): a process per target, a counter track per target
 * and kind, phases as slices, events and verdicts as instants.
 */
#ifndef MEMTRAIL_PERFETTO_H
#define MEMTRAIL_PERFETTO_H

#include <stddef.h>

#include "trail.h"

/* Write PATH atomically; the number of trace events into N_EVENTS. 0 or -errno. */
int perfetto__write(const struct trail *t, const char *path, size_t *n_events);

#endif
