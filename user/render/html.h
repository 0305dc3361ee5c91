/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A trail (or a watch snapshot or verdict file) as one self-contained HTML
 * page that opens offline: per target a stacked timeline of its kinds with
 * phase bands and event markers, a per-phase bar chart of segment and
 * cumulative peaks against the cgroup limit, the verdict and top sites.
 */
#ifndef MEMTRAIL_HTML_H
#define MEMTRAIL_HTML_H

#include <stdbool.h>

#include "trail.h"

/* Timeline samples drawn per target at most: min and max of each bucket. */
#define HTML_BUCKETS 600

/* Write PATH atomically; whether a timeline was decimated into DECIMATED. 0 or -errno. */
int html__write(const struct trail *t, const char *path, bool *decimated);

/*
 * The page of report --diff: DIFF (diff__json's, with its page frames)
 * from the trails BASE_NAME and NEW_NAME, written to PATH atomically: per
 * target its peaks and phases before and after, a flame graph of what
 * changed and the sites that did. 0 or -errno.
 */
int html__write_diff(json_t *diff, const char *base_name, const char *new_name, const char *path);

#endif
