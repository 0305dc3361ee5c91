/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Accounting: cells per (target, phase), levels with their peaks, and
 * account(), the one path every source of bytes ends in.
 */
#ifndef MT_ACCOUNT_BPF_H
#define MT_ACCOUNT_BPF_H

#include "mt_events.bpf.h"

static const struct memtrail_cell zero_cell;

/*
 * The value of KEY in MAP, inserted as INIT when absent; NULL (counted under
 * LOST) when the map is full. Two callers may race to insert: both get the
 * one value that won.
 */
static __always_inline void *map_get_or_init(void *map, const void *key, const void *init,
					     __u32 lost_why)
{
	void *v = bpf_map_lookup_elem(map, key);

	if (v)
		return v;
	if (bpf_map_update_elem(map, key, init, BPF_NOEXIST) && !bpf_map_lookup_elem(map, key)) {
		count_lost(lost_why);
		return NULL;
	}
	return bpf_map_lookup_elem(map, key);
}

static __always_inline struct memtrail_cell *cell_get(__u32 tgid, __u32 phase)
{
	struct memtrail_cell_key key = { .tgid = tgid, .phase = phase };

	return map_get_or_init(&cells, &key, &zero_cell, MEMTRAIL_LOST_CELLS);
}

/*
 * Each delta is applied with one atomic add, so every intermediate level is
 * seen by exactly one caller; the peak is then raised to that level with
 * compare-and-swap. Peaks stay exact when many threads account at once.
 */
static __always_inline void level_add(struct memtrail_level *l, __s64 delta, bool base)
{
	__s64 now, peak, seen;
	int i;

	now = mt_add_fetch(&l->current, delta);
	if (base)
		;	/* held when first seen: a level, neither allocated nor freed here */
	else if (delta > 0)
		__sync_fetch_and_add(&l->allocated, delta);
	else
		__sync_fetch_and_add(&l->freed, -delta);
#ifdef MEMTRAIL_COMPAT
	/*
	 * The level is exact (one atomic add) and so are the sums; the peak is
	 * the highest level this caller read back, raised without a
	 * compare-and-swap: with updates from several CPUs at once it can miss
	 * or overshoot by the deltas in flight. One thread at a time: exact.
	 */
	(void)seen;
	(void)i;
	peak = MT_READ(l->peak);
	if (now > peak)
		l->peak = now;
#else
	peak = l->peak;
	for (i = 0; i < MT_PEAK_CAS_TRIES && now > peak; i++) {
		seen = __sync_val_compare_and_swap(&l->peak, peak, now);
		if (seen == peak)
			break;
		peak = seen;
	}
#endif
}

/*
 * The one accounting path: add a signed delta to (target, kind) in the cell
 * of the target's current phase. T is the live target of TGID.
 */
/*
 * KIND, bounded in the register that indexes with it. Before 5.11 the
 * verifier does not carry a bound learned on one copy of a register to the
 * others, and the compiler may test one copy and index with another.
 */
static __always_inline __u32 kind_index(__u32 kind)
{
	asm volatile("if %[k] < %[max] goto +1\n\t%[k] = 0"
		     : [k] "+r"(kind) : [max] "i"(MEMTRAIL_KIND_MAX));
	return kind;
}

/*
 * Name TGID in dirty, once per user space sample: its levels changed. Called
 * after the change, whose atomic add is a full barrier; user space bumps
 * sample_gen, with a barrier, after it took the names and before it reads
 * the levels. So a change either precedes the bump (the read sees it: the
 * target was named in this generation, before or after the names were
 * taken, and is read now or next time) or follows it and names the target
 * again. Where the map is full, dirty_full makes the next sample read all.
 */
static __always_inline void mark_dirty(struct memtrail_target *t, __u32 tgid)
{
	__u32 gen = sample_gen;

	if (!gen || MT_READ(t->dirty_gen) == gen)
		return;
	if (bpf_map_update_elem(&dirty, &tgid, &gen, BPF_ANY))
		dirty_full = 1;
	t->dirty_gen = gen;
}

static __always_inline void account_level(struct memtrail_target *t, __u32 tgid, __u32 kind,
					  __s64 delta, bool base)
{
	struct memtrail_cell *c;

	if (!delta || kind >= MEMTRAIL_KIND_MAX)
		return;
	c = cell_get(tgid, t->phase);
	if (!c)
		return;
	level_add(&c->kinds[kind_index(kind)], delta, base);
	mark_dirty(t, tgid);
}

static __always_inline void account(struct memtrail_target *t, __u32 tgid, __u32 kind,
				    __s64 delta)
{
	account_level(t, tgid, kind, delta, false);
}

#endif /* MT_ACCOUNT_BPF_H */
