/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * What every BPF source includes: the shared state and helpers, by concern,
 * each header including the ones before it: memtrail_base (types, atomics,
 * settings), mt_maps, mt_events, mt_account, mt_stacks, mt_phase, mt_mm and
 * mt_rss. Maps are __weak so that each object linked into the skeleton may
 * include them; the linker keeps one copy.
 */
#ifndef MEMTRAIL_BPF_H
#define MEMTRAIL_BPF_H

#include "mt_rss.bpf.h"

#endif /* MEMTRAIL_BPF_H */
