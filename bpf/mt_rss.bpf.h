/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Resident memory of an address space: the kernel's rss counters read
 * (atomic, or per CPU from 6.2, summed or walked), and each change sent on.
 */
#ifndef MT_RSS_BPF_H
#define MT_RSS_BPF_H

#include "mt_mm.bpf.h"

/*
 * A pointer as a plain number. The verifier forbids arithmetic on map
 * pointers; a copy through the stack, which privileged programs may read,
 * gives the number.
 */
static __always_inline __u64 ptr_value(const void *p)
{
	volatile __u64 slot = (__u64)p;
	__u64 v = 0;

	bpf_probe_read_kernel(&v, sizeof(v), (const void *)&slot);
	return v;
}

struct rss_sum_ctx {
	__u64 counters;	/* s32 __percpu * */
	__s64 sum;
};

#ifndef MEMTRAIL_COMPAT
/*
 * This kernel's per-cpu offset of CPU (__per_cpu_offset[cpu], which is not
 * reachable from BPF without kallsyms of data): the address of CPU's copy of
 * a per-cpu map value minus the map's per-cpu pointer to it.
 */
static __always_inline __u64 cpu_offset(__u32 cpu)
{
	__u64 *cached = bpf_map_lookup_elem(&cpu_offsets, &cpu);
	__u32 zero = 0;
	__u64 pptr = 0;
	void *copy;

	if (!cached)
		return 0;
	if (*cached)
		return *cached;
	copy = bpf_map_lookup_percpu_elem(&percpu_probe, &zero, cpu);
	if (!copy)
		return 0;
	bpf_probe_read_kernel(&pptr, sizeof(pptr),
			      (const void *)(ptr_value(&percpu_probe) +
					     bpf_core_field_offset(struct bpf_array, pptrs)));
	*cached = ptr_value(copy) - pptr;
	return *cached;
}

static long rss_sum_cpu(__u32 cpu, void *data)
{
	struct rss_sum_ctx *ctx = data;
	__u64 off = cpu_offset(cpu);
	__s32 v = 0;

	if (!off)
		return 1;
	bpf_probe_read_kernel(&v, sizeof(v), (const void *)(ctx->counters + off));
	ctx->sum += v;
	return 0;
}

#endif /* !MEMTRAIL_COMPAT */

/* mm->rss_stat before Linux 6.2: one atomic per counter, no per-cpu part */
struct mm_rss_stat___atomic {
	atomic_long_t count[4];
};

struct mm_struct___atomic {
	struct mm_rss_stat___atomic rss_stat;
};

/* One of the pre-6.2 counters, in pages (constant indices keep CO-RE exact). */
static __always_inline __s64 rss_pages_atomic(struct mm_struct *mm, int member)
{
	struct mm_struct___atomic *m = (void *)mm;

	switch (member) {
	case 0: return BPF_CORE_READ(m, rss_stat.count[0].counter);
	case 1: return BPF_CORE_READ(m, rss_stat.count[1].counter);
	case 3: return BPF_CORE_READ(m, rss_stat.count[3].counter);
	default: return 0;
	}
}

/*
 * mm->rss_stat from Linux 6.2: a percpu_counter per counter. Named as a
 * flavour so that headers of an older build kernel (struct mm_rss_stat)
 * build the same object: its layout comes from the running kernel's BTF.
 */
struct mm_struct___percpu {
	struct percpu_counter rss_stat[4];
} __attribute__((preserve_access_index));

/* Whether mm->rss_stat[] are percpu_counters (Linux 6.2) rather than atomics. */
static __always_inline bool rss_is_percpu(void)
{
	return !bpf_core_field_exists(((struct mm_struct___atomic *)0)->rss_stat.count);
}

/*
 * Exact value of one of mm->rss_stat[], in bytes. From Linux 6.2 a counter is
 * a percpu_counter: the shared count plus each CPU's unfolded delta, as
 * percpu_counter_sum() computes it (the kmem:rss_stat tracepoint passes only
 * the mm and the counter index to BPF). Before, it is one atomic, which is
 * what /proc reads too; each thread may hold up to TASK_RSS_EVENTS_THRESH
 * (64) page events of its own that the kernel has not added to it yet
 * (SPLIT_RSS_COUNTING), a bound the kernel's own figures share.
 */
static __always_inline __s64 rss_bytes(struct mm_struct *mm, int member)
{
	struct rss_sum_ctx ctx = {};
	struct percpu_counter *pc;

	if (member < 0 || member > 3)
		return 0;
	if (!rss_is_percpu()) {
		ctx.sum = rss_pages_atomic(mm, member);
	} else {
#ifdef MEMTRAIL_COMPAT
		(void)pc;	/* kernels without atomic fetch have atomic rss counters */
#else
		pc = &((struct mm_struct___percpu *)mm)->rss_stat[member];
		ctx.sum = BPF_CORE_READ(pc, count);
		ctx.counters = (__u64)BPF_CORE_READ(pc, counters);
		if (ctx.counters)
			bpf_loop(nr_cpus < MEMTRAIL_CPUS_MAX ? nr_cpus : MEMTRAIL_CPUS_MAX,
				 rss_sum_cpu, &ctx, 0);
#endif
	}
	if (ctx.sum < 0)
		return 0;
	return ctx.sum << page_shift;
}

/* enum mm counters (include/linux/mm_types_task.h), stable since v4.5 */
static __always_inline int rss_member_kind(int member)
{
	switch (member) {
	case 0: return MEMTRAIL_KIND_RSS_FILE;	/* MM_FILEPAGES */
	case 1: return MEMTRAIL_KIND_RSS_ANON;	/* MM_ANONPAGES */
	case 3: return MEMTRAIL_KIND_RSS_SHMEM;	/* MM_SHMEMPAGES */
	default: return -1;			/* MM_SWAPENTS: not resident */
	}
}

/*
 * Mapped memory: the kernel's data_vm, private writable mappings that are
 * not stack (VmData in /proc/PID/status).
 */
static __always_inline __s64 mapped_bytes(struct mm_struct *mm)
{
	return (__s64)BPF_CORE_READ(mm, data_vm) << page_shift;
}

/* The counters' absolute values: before 6.2, or where an mm's per-CPU parts have no room. */
static __always_inline void mm_sync_rss_sum(struct memtrail_target *t, struct mm_struct *mm,
					    __u32 tgid)
{
	__u64 key = (__u64)mm;

	mm_sync_kind(t, key, tgid, MEMTRAIL_KIND_RSS_FILE, rss_bytes(mm, 0));
	mm_sync_kind(t, key, tgid, MEMTRAIL_KIND_RSS_ANON, rss_bytes(mm, 1));
	mm_sync_kind(t, key, tgid, MEMTRAIL_KIND_RSS_SHMEM, rss_bytes(mm, 3));
}

#ifndef MEMTRAIL_COMPAT
/*
 * Resident memory at O(1) per event (Linux 6.2 on). A counter's exact value
 * is its shared count plus every CPU's unfolded part; an rss_stat event
 * changes only the part of the CPU it runs on, and the shared count when that
 * part folds into it. So memtrail keeps, per mm, the shared count
 * (mm_state.central) and each CPU's part (rss_local) as last accounted, and
 * an event adds what changed in those two: exchanges make the additions
 * telescope, so the level is the sum of the parts as last read, whatever the
 * interleaving. Bound: a thread that migrates between the kernel's add and
 * its tracepoint leaves that add (less than one percpu_counter batch) to the
 * next event on the CPU it left, or to the next full walk (fork, exec, exit,
 * OOM kill, which walk every CPU); a fold seen from another CPU before its own
 * event may show it early, for the microseconds between.
 */
struct rss_walk {
	__u64 mm;
	__u64 counters[4];	/* each counter's s32 __percpu *, 0: none */
	__s64 pages[4];		/* pages added (or, absolute, the parts' sum) */
	__u32 absolute;		/* set the parts to the counters, ignoring what they held */
};

static long rss_walk_cpu(__u32 cpu, void *data)
{
	struct rss_walk *w = data;
	__u64 off = cpu_offset(cpu);
	struct rss_local *m;
	__s32 v;
	int i;

	if (!off)
		return 1;
	m = bpf_map_lookup_percpu_elem(&rss_local, &w->mm, cpu);
	if (!m)
		return 1;
	for (i = 0; i < 4; i++) {
		if (i == 2)
			continue;	/* MM_SWAPENTS: not resident */
		v = 0;
		if (w->counters[i])
			bpf_probe_read_kernel(&v, sizeof(v), (const void *)(w->counters[i] + off));
		if (w->absolute) {
			m->v[i] = v;
			w->pages[i] += v;
		} else {
			w->pages[i] += v - __sync_lock_test_and_set(&m->v[i], v);
		}
	}
	return 0;
}

/*
 * Walk every CPU's part of MM's counters: ABSOLUTE sets the level to the
 * counters (an mm seen first: its parts hold nothing yet), else adds what
 * changed since the parts were last read (exact among concurrent events).
 */
static __always_inline void rss_walk(struct memtrail_target *t, struct mm_struct *mm,
				     __u32 tgid, struct memtrail_mm_state *s, bool absolute)
{
	struct rss_walk w = { .mm = (__u64)mm, .absolute = absolute };
	__s64 count[4] = {};
	struct percpu_counter *pc;
	int i, kind;

	for (i = 0; i < 4; i++) {
		if (i == 2)
			continue;
		pc = &((struct mm_struct___percpu *)mm)->rss_stat[i];
		count[i] = BPF_CORE_READ(pc, count);
		w.counters[i] = (__u64)BPF_CORE_READ(pc, counters);
	}
	bpf_loop(nr_cpus < MEMTRAIL_CPUS_MAX ? nr_cpus : MEMTRAIL_CPUS_MAX, rss_walk_cpu, &w, 0);
	for (i = 0; i < 4; i++) {
		if (i == 2)
			continue;
		kind = rss_member_kind(i);
		if (kind < 0)
			continue;
		if (absolute) {
			s->central[i] = count[i];
			mm_sync_kind(t, (__u64)mm, tgid, kind,
				     (count[i] + w.pages[i]) << page_shift);
		} else {
			w.pages[i] += count[i] - __sync_lock_test_and_set(&s->central[i], count[i]);
			mm_state_add(t, s, tgid, kind, w.pages[i] << page_shift);
		}
	}
}

/*
 * An mm without per-CPU parts yet: make them, set from the counters, then
 * mark the mm ready; events before that leave their CPU's change to the next
 * event there. Where the map has no room the counters are summed instead.
 */
static __always_inline void rss_first(struct memtrail_target *t, struct mm_struct *mm,
				      __u32 tgid, struct memtrail_mm_state *s)
{
	struct rss_local zero = {};
	__u64 key = (__u64)mm;
	long err;

	err = bpf_map_update_elem(&rss_local, &key, &zero, BPF_NOEXIST);
	if (!err) {
		__sync_fetch_and_and(&s->flags, ~MEMTRAIL_MM_RSS_READY);
		rss_walk(t, mm, tgid, s, true);
		__sync_fetch_and_or(&s->flags, MEMTRAIL_MM_RSS_READY);
	} else if ((int)err != -17 /* -EEXIST (int: older kernels zero-extend it) */) {
		mm_sync_rss_sum(t, mm, tgid);	/* no room: O(CPUs) per event */
	}
	/* -EEXIST: another CPU is setting them up */
}

/* The rss parts of MM in step with its per-CPU parts, or NULL: not yet. */
static __always_inline struct rss_local *rss_ready(struct memtrail_mm_state *s, __u64 *key)
{
	if (!(MT_READ(s->flags) & MEMTRAIL_MM_RSS_READY))
		return NULL;
	return bpf_map_lookup_elem(&rss_local, key);
}

/* One rss_stat event, at O(1): this CPU's part and the shared count. */
static __always_inline void rss_event(struct memtrail_target *t, struct mm_struct *mm,
				      __u32 tgid, int member, int kind)
{
	struct memtrail_mm_state *s;
	struct percpu_counter *pc;
	__u64 key = (__u64)mm, counters, off;
	struct rss_local *m;
	__s64 count, pages;
	__s32 v = 0;
	int i = member & 3;

	s = mm_state_get(key, tgid);
	if (!s)
		return;
	m = rss_ready(s, &key);
	if (!m) {
		rss_first(t, mm, tgid, s);
		return;
	}
	pc = &((struct mm_struct___percpu *)mm)->rss_stat[i];
	count = pc->count;	/* a direct load: MM is a tracepoint's argument */
	counters = (__u64)BPF_CORE_READ(pc, counters);
	off = cpu_offset(bpf_get_smp_processor_id());
	if (counters && off)
		bpf_probe_read_kernel(&v, sizeof(v), (const void *)(counters + off));
	pages = count - __sync_lock_test_and_set(&s->central[i], count);
	pages += v - __sync_lock_test_and_set(&m->v[i], v);
	if (pages)
		mm_state_add(t, s, tgid, kind, pages << page_shift);
}
#endif /* !MEMTRAIL_COMPAT */

/* Every rss kind of MM exact now (fork, exec, exit, OOM kill, first sight): O(CPUs). */
static __always_inline void mm_sync_rss(struct memtrail_target *t, struct mm_struct *mm,
				       __u32 tgid)
{
#ifndef MEMTRAIL_COMPAT
	struct memtrail_mm_state *s;
	__u64 key = (__u64)mm;

	if (rss_is_percpu()) {
		s = mm_state_get(key, tgid);
		if (!s)
			return;
		if (rss_ready(s, &key))
			rss_walk(t, mm, tgid, s, false);
		else
			rss_first(t, mm, tgid, s);
		return;
	}
#endif
	mm_sync_rss_sum(t, mm, tgid);
}

/*
 * Bring every mm-derived kind of a target up to date from the absolute
 * counters. For mapped memory this is only safe while no other thread of the
 * target can be inside a write section (fork, exec, exit, first sight): the
 * write sections apply exact deltas everywhere else.
 */
static __always_inline void mm_sync_all(struct memtrail_target *t, struct mm_struct *mm,
				       __u32 tgid)
{
	if (!mm)
		return;
	mm_sync_rss(t, mm, tgid);
	mm_sync_kind(t, (__u64)mm, tgid, MEMTRAIL_KIND_MAPPED, mapped_bytes(mm));
	if (!(MT_READ(t->flags) & MEMTRAIL_TARGET_BASED))
		mt_or(&t->flags, MEMTRAIL_TARGET_BASED);
}

#endif /* MT_RSS_BPF_H */
