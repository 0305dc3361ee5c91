// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * How targets die: the OOM killer's choice (oom:mark_victim, which fires
 * before the SIGKILL is delivered) with the memory cgroup that was at its
 * limit, and every SIGKILL/SIGTERM generated for a target with its sender.
 * User space correlates them into a verdict when a target dies by SIGKILL:
 * the OOM killer sends its SIGKILL from the allocating task, so a naive
 * sender would be the wrong answer.
 */
#include "memtrail.bpf.h"

#define MT_SIGKILL 9
#define MT_SIGTERM 15
/* pages of slack under a limit that still count as at it: a failed charge */
#define MT_LIMIT_SLACK_PAGES 1024
#define MT_MEMCG_DEPTH_MAX 16
/* page counters above this are "max", no limit (PAGE_COUNTER_MAX is LONG_MAX
 * over the page size: ~2^51 pages of 4 KiB, ~2^49 of 16 KiB, ~2^47 of 64 KiB) */
#define MT_UNLIMITED_PAGES (1ULL << (62 - page_shift))

/*
 * The nearest memory cgroup at (or, with SLACK pages, near) its limit, from
 * CSS up; the root has none. Its level above CSS, or -1 when none is.
 */
static __always_inline int memcg_at_limit(struct cgroup_subsys_state *css, __u64 slack,
					  __u64 *usage, __u64 *limit, __u64 *id)
{
	int level;

	for (level = 0; level < MT_MEMCG_DEPTH_MAX && css; level++) {
		struct mem_cgroup *memcg = (void *)css - bpf_core_field_offset(struct mem_cgroup, css);
		__u64 use = BPF_CORE_READ(memcg, memory.usage.counter);
		__u64 max = BPF_CORE_READ(memcg, memory.max);

		if (!BPF_CORE_READ(css, parent))
			break;	/* the root memory cgroup: no limit */
		if (max < MT_UNLIMITED_PAGES && use + slack >= max) {
			*usage = use << page_shift;
			*limit = max << page_shift;
			*id = BPF_CORE_READ(css, cgroup, kn, id);
			return level;
		}
		css = BPF_CORE_READ(css, parent);
	}
	return -1;
}

static __always_inline struct cgroup_subsys_state *memory_css(struct task_struct *task)
{
	return task_css(task, bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id));
}

/* The OOM killer chose VICTIM, the current task triggered it: tell user space. */
static __always_inline int oom_victim(struct task_struct *victim)
{
	__u32 tgid = BPF_CORE_READ(victim, tgid);
	struct task_struct *cur = mt_current_task();
	struct memtrail_event_oom *e;
	struct memtrail_target *t;
	struct mm_struct *mm;

	t = live_target(tgid);
	if (!t)
		return 0;
	/* its levels as the killer saw them: the kill and the exit come after */
	mm = BPF_CORE_READ(victim, mm);
	if (mm && t->mm == (__u64)mm)
		mm_sync_rss(t, mm, tgid);
	e = event_reserve(sizeof(*e), MEMTRAIL_EV_OOM, tgid);
	if (!e)
		return 0;
	e->trigger_tgid = BPF_CORE_READ(cur, tgid);
	BPF_CORE_READ_INTO(&e->trigger_comm, cur, comm);
	e->usage = 0;
	e->limit = 0;
	e->memcg_id = 0;
	e->memcg_level = memcg_at_limit(memory_css(victim), MT_LIMIT_SLACK_PAGES,
					&e->usage, &e->limit, &e->memcg_id);
	e->rss_file = mm ? rss_bytes(mm, 0) : 0;
	e->rss_anon = mm ? rss_bytes(mm, 1) : 0;
	e->rss_shmem = mm ? rss_bytes(mm, 3) : 0;
	event_submit(e, true);
	return 0;
}

SEC("tp_btf/mark_victim")
int BPF_PROG(mt_oom_victim, struct task_struct *victim, uid_t uid)
{
	return oom_victim(victim);
}

/*
 * Kernels whose mark_victim passes only the victim's pid (5.10): there the
 * OOM killer sends its SIGKILL first (signal_generate, mt_signal keeps the
 * task by pid while oom_by_pid is set), then marks the victim, in the same
 * call of the same task; the kept task is the victim.
 */
const volatile __u32 oom_by_pid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 256);
	__type(key, __s32);
	__type(value, __u64);	/* the task the current one sent SIGKILL */
} oom_pending SEC(".maps");

SEC("tp_btf/mark_victim")
int BPF_PROG(mt_oom_victim_pid, int pid)
{
	__u64 *task = bpf_map_lookup_elem(&oom_pending, &pid);

	if (task) {
		oom_victim((struct task_struct *)*task);
		bpf_map_delete_elem(&oom_pending, &pid);
	}
	return 0;
}

/*
 * A charge over a memory cgroup's limit (or memory.high) reclaims before it
 * fails: the first sign of an OOM kill to come. Runs in the charging task;
 * at most one event per target per MEMTRAIL_PRESSURE_GAP_NS.
 */
SEC("tp_btf/mm_vmscan_memcg_reclaim_begin")
int BPF_PROG(mt_reclaim, int order, gfp_t gfp_flags)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct memtrail_event_pressure *e;
	struct memtrail_target *t;
	__u64 now = bpf_ktime_get_ns(), last;

	t = live_target(tgid);
	if (!t)
		return 0;
	last = t->pressure_ns;
	if (last && now - last < MEMTRAIL_PRESSURE_GAP_NS)
		return 0;
	if (mt_cmpxchg(&t->pressure_ns, last, now) != last)
		return 0;	/* another thread of it sends this one */
	e = event_reserve(sizeof(*e), MEMTRAIL_EV_PRESSURE, tgid);
	if (!e)
		return 0;
	e->usage = 0;
	e->limit = 0;
	e->memcg_id = 0;
	/* any margin: reclaim means a limit was reached; take the nearest limited */
	memcg_at_limit(memory_css(mt_current_task()), MT_UNLIMITED_PAGES,
		       &e->usage, &e->limit, &e->memcg_id);
	event_submit(e, true);
	return 0;
}

SEC("tp_btf/signal_generate")
int BPF_PROG(mt_signal, int sig, struct kernel_siginfo *info, struct task_struct *task,
	     int group, int result)
{
	struct task_struct *cur = mt_current_task();
	__u32 tgid = BPF_CORE_READ(task, tgid);
	struct memtrail_event_signal *e;

	if ((sig != MT_SIGKILL && sig != MT_SIGTERM) || !live_target(tgid))
		return 0;
	if (oom_by_pid && sig == MT_SIGKILL) {
		__s32 pid = BPF_CORE_READ(task, pid);
		__u64 ptr = (__u64)task;

		bpf_map_update_elem(&oom_pending, &pid, &ptr, BPF_ANY);
	}
	e = event_reserve(sizeof(*e), MEMTRAIL_EV_SIGNAL, tgid);
	if (!e)
		return 0;
	e->sig = sig;
	e->sender_tgid = BPF_CORE_READ(cur, tgid);
	e->sender_ppid = BPF_CORE_READ(cur, real_parent, tgid);
	e->result = result;
	BPF_CORE_READ_INTO(&e->sender_comm, cur, comm);
	event_submit(e, true);
	return 0;
}
