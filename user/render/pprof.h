/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Allocation sites of a trail as a pprof profile (gzip-compressed protobuf). */
#ifndef MEMTRAIL_PPROF_H
#define MEMTRAIL_PPROF_H

#include <stddef.h>

#include "trail.h"

/* Write PATH atomically; the number of samples into N_SAMPLES. 0 or -errno. */
int pprof__write(const struct trail *t, const char *path, size_t *n_samples);
/*
 * What changed from BASE to NEW as one profile: NEW's sites and BASE's with
 * their values negated (what go tool pprof -diff_base BASE NEW reads), with
 * NEW's duration. As pprof__write.
 */
int pprof__write_diff(const struct trail *base, const struct trail *new, const char *path,
		      size_t *n_samples);

#endif
