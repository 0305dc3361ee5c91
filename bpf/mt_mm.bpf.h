/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Per address space state: its owner, what it has mapped, synced into its
 * target's levels.
 */
#ifndef MT_MM_BPF_H
#define MT_MM_BPF_H

#include "mt_phase.bpf.h"

/*
 * The state of address space MM, owned by TGID. An entry another process
 * left is stale: its mm was freed without an end memtrail saw (a target
 * forgotten by user space while it lived, as --heap's timing child is) and
 * the kernel gave the address to this one. It starts again from nothing,
 * and so do its per-CPU rss parts.
 */
static __always_inline struct memtrail_mm_state *mm_state_get(__u64 mm, __u32 tgid)
{
	struct memtrail_mm_state fresh = { .tgid = tgid }, *s;

	s = bpf_map_lookup_elem(&mm_state, &mm);
	if (s && MT_READ(s->tgid) == tgid)
		return s;
	if (s) {
		bpf_map_delete_elem(&rss_local, &mm);
		if (bpf_map_update_elem(&mm_state, &mm, &fresh, BPF_ANY)) {
			count_lost(MEMTRAIL_LOST_MM);
			return NULL;
		}
		return bpf_map_lookup_elem(&mm_state, &mm);
	}
	return map_get_or_init(&mm_state, &mm, &fresh, MEMTRAIL_LOST_MM);
}

/*
 * Turn an absolute counter of one address space into a delta for its
 * owner. The exchange makes deltas telescope: however events interleave,
 * the sum of deltas equals the last value stored, and an event missed
 * before the mm was known is recovered by the next one.
 */
static __always_inline void mm_sync_kind(struct memtrail_target *t, __u64 mm, __u32 tgid,
					 __u32 kind, __s64 value)
{
	struct memtrail_mm_state *s;
	bool first;
	__s64 old;

	if (kind >= MEMTRAIL_KIND_MAX)
		return;
	s = mm_state_get(mm, tgid);
	if (!s)
		return;
	/*
	 * The first sync of a kind finds what the address space held before
	 * memtrail saw it: for a target's first one (attach, a command's exec,
	 * fork) that is its baseline, not allocations; an exec's new image
	 * later is allocated in its phase. (5.10: two first syncs racing may
	 * take a second's delta as baseline.)
	 */
	first = !(MT_READ(s->synced) & (1U << kind));
	if (first)
		mt_or(&s->synced, 1U << kind);
	first = first && !(MT_READ(t->flags) & MEMTRAIL_TARGET_BASED);
#ifdef MEMTRAIL_COMPAT
	/*
	 * Without an exchange: last stays the sum of the deltas accounted (each
	 * added atomically), so two events racing may leave the level off for a
	 * moment, and the next event of the mm brings it back to the counter.
	 */
	old = MT_READ(s->last[kind]);
	__sync_fetch_and_add(&s->last[kind], value - old);
#else
	old = __sync_lock_test_and_set(&s->last[kind], value);
#endif
	account_level(t, tgid, kind, value - old, first);
}

/*
 * Add a known delta of one address space to its owner, keeping the mm's last
 * value in step so that a later absolute sync adds only what was missed.
 */
static __always_inline void mm_state_add(struct memtrail_target *t, struct memtrail_mm_state *s,
					 __u32 tgid, __u32 kind, __s64 delta)
{
	if (kind >= MEMTRAIL_KIND_MAX)
		return;
	__sync_fetch_and_add(&s->last[kind], delta);
	account(t, tgid, kind, delta);
}

#endif /* MT_MM_BPF_H */
