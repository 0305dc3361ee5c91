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

SEC("tp_btf/mark_victim")
int BPF_PROG(mt_oom_victim, struct task_struct *victim, uid_t uid)
{
	struct cgroup_subsys_state *css =
		task_css(victim, bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id));
	__u32 tgid = BPF_CORE_READ(victim, tgid);
	struct task_struct *cur = bpf_get_current_task_btf();
	struct memtrail_event_oom *e;
	int level;

	if (!live_target(tgid))
		return 0;
	e = event_reserve(sizeof(*e), MEMTRAIL_EV_OOM, tgid);
	if (!e)
		return 0;
	e->trigger_tgid = BPF_CORE_READ(cur, tgid);
	BPF_CORE_READ_INTO(&e->trigger_comm, cur, comm);
	e->memcg_level = -1;
	e->usage = 0;
	e->limit = 0;
	e->memcg_id = 0;
	/* the nearest memory cgroup at its limit (the root has none) */
	for (level = 0; level < MT_MEMCG_DEPTH_MAX && css; level++) {
		struct mem_cgroup *memcg = (void *)css - bpf_core_field_offset(struct mem_cgroup, css);
		__u64 usage = BPF_CORE_READ(memcg, memory.usage.counter);
		__u64 max = BPF_CORE_READ(memcg, memory.max);

		if (!BPF_CORE_READ(css, parent))
			break;	/* the root memory cgroup: no limit */
		if (usage + MT_LIMIT_SLACK_PAGES >= max) {
			e->memcg_level = level;
			e->usage = usage << MEMTRAIL_PAGE_SHIFT;
			e->limit = max << MEMTRAIL_PAGE_SHIFT;
			e->memcg_id = BPF_CORE_READ(css, cgroup, kn, id);
			break;
		}
		css = BPF_CORE_READ(css, parent);
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("tp_btf/signal_generate")
int BPF_PROG(mt_signal, int sig, struct kernel_siginfo *info, struct task_struct *task,
	     int group, int result)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	__u32 tgid = BPF_CORE_READ(task, tgid);
	struct memtrail_event_signal *e;

	if ((sig != MT_SIGKILL && sig != MT_SIGTERM) || !live_target(tgid))
		return 0;
	e = event_reserve(sizeof(*e), MEMTRAIL_EV_SIGNAL, tgid);
	if (!e)
		return 0;
	e->sig = sig;
	e->sender_tgid = BPF_CORE_READ(cur, tgid);
	e->sender_ppid = BPF_CORE_READ(cur, real_parent, tgid);
	e->result = result;
	BPF_CORE_READ_INTO(&e->sender_comm, cur, comm);
	bpf_ringbuf_submit(e, 0);
	return 0;
}
