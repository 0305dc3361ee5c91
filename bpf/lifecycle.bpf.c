// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Process lifecycle: which processes are targets (the in-kernel filter),
 * fork, exec and exit, and a scan of all tasks that picks up processes that
 * existed before memtrail started or moved into a traced cgroup.
 */
#include "memtrail.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u32 filter_mode = MEMTRAIL_FILTER_PID;
const volatile char filter_comm[MEMTRAIL_COMM_LEN] = {};
const volatile __u64 filter_cgroup_ids[MEMTRAIL_FILTER_CGROUPS_MAX] = {};
const volatile __u32 filter_n_cgroups = 0;
const volatile __s32 filter_cgroup_subsys = -1;
/* the hierarchy whose path user space reads for a target (v1 memory, or -1: v2) */
const volatile __s32 paths_cgroup_subsys = -1;
const volatile __u32 self_tgid = 0;
const volatile __u32 nr_cpus = 1;
const volatile __u32 page_shift = 12;
const volatile __u32 has_task_regs = 1;
const volatile __u32 has_find_vma = 1;
const volatile __u32 has_scopes = 0;
const volatile __u32 track_libs = 0;
const volatile __u32 libs_urgent = 0;
const volatile __u32 maps_tell_on = 0;
const volatile __u32 lib_map_lock = 0;
volatile __u32 sample_gen = 0;
volatile __u32 dirty_full = 0;

static __always_inline bool comm_matches(struct task_struct *task)
{
	char comm[MEMTRAIL_COMM_LEN];
	int i;

	BPF_CORE_READ_INTO(&comm, task, comm);
	for (i = 0; i < MEMTRAIL_COMM_LEN; i++) {
		if (comm[i] != filter_comm[i])
			return false;
		if (!comm[i])
			break;
	}
	return true;
}

/* The task's cgroup in the filtered hierarchy (v2, or one v1 controller). */
static __always_inline struct cgroup *task_cgroup(struct task_struct *task)
{
	if (filter_cgroup_subsys < 0)
		return BPF_CORE_READ(task, cgroups, dfl_cgrp);
	return BPF_CORE_READ(task_css(task, filter_cgroup_subsys), cgroup);
}

/* In a filtered cgroup or any cgroup below one (ids are kernfs inode numbers). */
static __always_inline bool cgroup_matches(struct task_struct *task)
{
	struct cgroup *cg = task_cgroup(task);
	int i, j;

	for (i = 0; i < MEMTRAIL_CGROUP_DEPTH_MAX && cg; i++) {
		__u64 id = BPF_CORE_READ(cg, kn, id);

		for (j = 0; j < MEMTRAIL_FILTER_CGROUPS_MAX && j < filter_n_cgroups; j++)
			if (id == filter_cgroup_ids[j])
				return true;
		cg = BPF_CORE_READ(cg, self.parent, cgroup);
	}
	return false;
}

static __always_inline bool task_wanted(struct task_struct *task)
{
	if (BPF_CORE_READ(task, tgid) == self_tgid)
		return false;
	if (BPF_CORE_READ(task, flags) & MT_PF_KTHREAD)
		return false;
	switch (filter_mode) {
	case MEMTRAIL_FILTER_ALL:
		return true;
	case MEMTRAIL_FILTER_COMM:
		return comm_matches(task);
	case MEMTRAIL_FILTER_CGROUP:
		return cgroup_matches(task);
	default:
		return false;	/* PID mode: only listed PIDs and their children */
	}
}

static __always_inline struct memtrail_target *
target_add(struct task_struct *task, __u32 tgid, __u32 ppid, __u32 reason)
{
	struct memtrail_target fresh = { .ppid = ppid };
	struct memtrail_event_target *e;
	struct memtrail_target *t;

	if (bpf_map_update_elem(&targets, &tgid, &fresh, BPF_NOEXIST)) {
		t = bpf_map_lookup_elem(&targets, &tgid);
		/*
		 * full, or the pid is reused while user space has not yet read
		 * the end of the process that had it: counted, and the ended
		 * target's figures are left alone
		 */
		if (!t || (t->flags & MEMTRAIL_TARGET_EXITED)) {
			count_lost(MEMTRAIL_LOST_TARGETS);
			return NULL;
		}
		return t;
	}
	e = event_reserve(sizeof(*e), MEMTRAIL_EV_TARGET, tgid);
	if (e) {
		e->ppid = ppid;
		e->reason = reason;
		BPF_CORE_READ_INTO(&e->comm, task, comm);
		event_submit(e, false);
	}
	return bpf_map_lookup_elem(&targets, &tgid);
}

/* Remove what an address space still contributes to its owner, then forget it. */
static __always_inline void mm_forget(struct memtrail_target *t, __u64 mm, __u32 tgid)
{
	struct memtrail_mm_state *s = bpf_map_lookup_elem(&mm_state, &mm);
	int k;

	if (!s || s->tgid != tgid)
		return;
	for (k = MEMTRAIL_KIND_MAPPED; k <= MEMTRAIL_KIND_RSS_SHMEM; k++)
		account(t, tgid, k, -mt_xchg(&s->last[k], 0));
	bpf_map_delete_elem(&mm_state, &mm);
	bpf_map_delete_elem(&rss_local, &mm);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(mt_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 tgid = BPF_CORE_READ(child, tgid);
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	struct memtrail_target *t, *pt;
	struct mm_struct *mm;

	if (BPF_CORE_READ(child, pid) != tgid)
		return 0;	/* a new thread, not a new process */
	if (!live_target(ptgid) && !task_wanted(child))
		return 0;
	t = target_add(child, tgid, ptgid, MEMTRAIL_REASON_FORK);
	if (!t)
		return 0;
	pt = bpf_map_lookup_elem(&targets, &ptgid);
	if (ptgid == self_tgid || (pt && (pt->flags & MEMTRAIL_TARGET_OURS)))
		mt_or(&t->flags, MEMTRAIL_TARGET_OURS);
	mm = BPF_CORE_READ(child, mm);
	/* a vfork/CLONE_VM child runs in its parent's mm, which stays the parent's */
	if (mm && mm != BPF_CORE_READ(parent, mm)) {
		t->mm = (__u64)mm;
		mm_sync_all(t, mm, tgid);
	}
	return 0;
}

/*
 * A thread that exits inside a scope: its stack goes (its tid may come back);
 * so does an exec's (the scopes' functions never return in the new program).
 */
static __always_inline void scopes_forget(__u32 tid)
{
	if (has_scopes)
		bpf_map_delete_elem(&scope_stacks, &tid);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(mt_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	char phase[MEMTRAIL_PHASE_NAME_LEN] = "exec:";
	struct memtrail_event_exec *e;
	struct memtrail_target *t;
	struct mm_struct *mm;
	__u64 start, end, len;

	/* a thread other than the leader that execs takes the leader's id */
	scopes_forget(tgid);
	scopes_forget((__u32)old_pid);
	t = bpf_map_lookup_elem(&targets, &tgid);
	if (t && (t->flags & MEMTRAIL_TARGET_EXITED))
		return 0;
	if (t && (t->flags & MEMTRAIL_TARGET_AWAIT_EXEC)) {
		/* memtrail's own fork before the exec is not the command: its life starts here */
		t->mm = 0;
		mt_and(&t->flags, ~MEMTRAIL_TARGET_AWAIT_EXEC);
	} else if (!t) {
		if (!task_wanted(p))
			return 0;
		t = target_add(p, tgid, BPF_CORE_READ(p, real_parent, tgid),
			       MEMTRAIL_REASON_EXEC);
		if (!t)
			return 0;
	} else {
		/* a new program: a new phase, before its address space is counted */
		bpf_probe_read_kernel_str(&phase[5], MEMTRAIL_COMM_LEN, &p->comm);
		phase_switch(tgid, phase);
	}
	/* a new program has not called any accelerator runtime yet */
	t->device_flags = 0;
	t->auto_phase = MEMTRAIL_AUTO_NONE;
	/* the old address space is gone: take back all it still contributes */
	if (t->mm)
		mm_forget(t, t->mm, tgid);
	mm = BPF_CORE_READ(p, mm);
	t->mm = (__u64)mm;
	mm_sync_all(t, mm, tgid);

	e = event_reserve(sizeof(*e), MEMTRAIL_EV_EXEC, tgid);
	if (!e)
		return 0;
	BPF_CORE_READ_INTO(&e->comm, p, comm);
	/* user space reads the cgroup's path only when this changed: not per exec */
	if (paths_cgroup_subsys < 0)
		e->cgroup_id = BPF_CORE_READ(p, cgroups, dfl_cgrp, kn, id);
	else
		e->cgroup_id = BPF_CORE_READ(task_css(p, paths_cgroup_subsys), cgroup, kn, id);
	start = BPF_CORE_READ(mm, arg_start);
	end = BPF_CORE_READ(mm, arg_end);
	len = end > start ? end - start : 0;
	if (len > MEMTRAIL_ARGS_LEN)
		len = MEMTRAIL_ARGS_LEN;
	if (len && bpf_probe_read_user(e->args, len, (void *)start))
		len = 0;
	e->args_len = len;
	event_submit(e, false);
	/* the program, its interpreter or a file they map unscanned: told before the first instruction */
	lib_mapped(BPF_CORE_READ(bprm, file), MT_PROT_EXEC);
	if (t->lib_fresh)
		lib_event(t, tgid);
	else
		maps_want(tgid);	/* a static program's code is all mapped now */
	return 0;
}

/*
 * The end of a process: its last thread leaves. On newer kernels (6.17 has
 * it, 6.12 not) the tracepoint says so (group_dead) and runs before
 * exit_mm(), so the levels are synced one last time here. On older ones it
 * runs after exit_mm(): the mm is gone from the task, and its last values
 * are those of the last events before (exit_mm syncs the split rss counters
 * while the task still owns the mm; the teardown after it is not the
 * owner's and is not counted).
 */
static __always_inline int exit_common(struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	struct memtrail_event_exit *e;
	struct memtrail_target *t;
	struct mm_struct *mm;
	__u64 key;
	__u32 code;

	/* a command that dies before its exec (a Ctrl-C on a slow start) still has an exit */
	t = bpf_map_lookup_elem(&targets, &tgid);
	if (!t || (t->flags & MEMTRAIL_TARGET_EXITED))
		return 0;
	mm = BPF_CORE_READ(p, mm);
	if (mm && !(t->flags & MEMTRAIL_TARGET_AWAIT_EXEC))
		mm_sync_all(t, mm, tgid);
	mt_or(&t->flags, MEMTRAIL_TARGET_EXITED);
	key = mm ? (__u64)mm : t->mm;
	if (key) {
		bpf_map_delete_elem(&mm_state, &key);
		bpf_map_delete_elem(&rss_local, &key);
	}

	code = BPF_CORE_READ(p, exit_code);
	if (BPF_CORE_READ(p, signal, flags) & MT_SIGNAL_GROUP_EXIT)
		code = BPF_CORE_READ(p, signal, group_exit_code);
	e = event_reserve(sizeof(*e), MEMTRAIL_EV_EXIT, tgid);
	if (!e)
		return 0;
	e->signal = code & 0x7f;
	e->code = e->signal ? 0 : (code >> 8) & 0xff;
	e->core_dumped = !!(code & 0x80);
	e->phase = t->phase;
	event_submit(e, false);
	return 0;
}

/* Newer kernels: (task, group_dead), before exit_mm(). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(mt_exit, struct task_struct *p, bool group_dead)
{
	scopes_forget(BPF_CORE_READ(p, pid));
	return group_dead ? exit_common(p) : 0;
}

/*
 * Older kernels: (task) alone, after exit_mm(). The group is dead when no
 * thread of it is live: do_exit() counted this one out of signal->live.
 */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(mt_exit_task, struct task_struct *p)
{
	scopes_forget(BPF_CORE_READ(p, pid));
	if (BPF_CORE_READ(p, signal, live.counter))
		return 0;
	return exit_common(p);
}

SEC("iter/task")
int mt_scan(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct memtrail_target *t;
	struct mm_struct *mm;
	__u32 tgid, ppid;

	if (!task)
		return 0;
	tgid = BPF_CORE_READ(task, tgid);
	if (BPF_CORE_READ(task, pid) != tgid)
		return 0;
	ppid = BPF_CORE_READ(task, real_parent, tgid);
	t = bpf_map_lookup_elem(&targets, &tgid);
	if (t && (t->flags & (MEMTRAIL_TARGET_EXITED | MEMTRAIL_TARGET_AWAIT_EXEC)))
		return 0;
	if (!t) {
		if (!(filter_mode == MEMTRAIL_FILTER_PID && live_target(ppid)) &&
		    !task_wanted(task))
			return 0;
		/*
		 * Exiting (from the start of do_exit, before its exit event, until
		 * it is reaped): its exit is seen or about to be, and user space may
		 * already have forgotten it; a new target would be a ghost.
		 */
		if (BPF_CORE_READ(task, flags) & (MT_PF_KTHREAD | MT_PF_EXITING))
			return 0;
		if (BPF_CORE_READ(task, exit_state) && !BPF_CORE_READ(task, signal, live.counter))
			return 0;
		t = target_add(task, tgid, ppid, MEMTRAIL_REASON_SCAN);
		if (!t)
			return 0;
	}
	if (!t->ppid)
		t->ppid = ppid;
	mm = BPF_CORE_READ(task, mm);
	if (!mm)
		return 0;	/* a zombie leader; its threads still run the mm */
	/* a vfork child before its exec runs in its parent's mm, which stays the parent's */
	if (mm == BPF_CORE_READ(task, real_parent, mm))
		return 0;
	if (t->mm == (__u64)mm) {
		mm_sync_rss(t, mm, tgid);
		return 0;
	}
	/* first sight of this mm: a write section racing this read is the one risk */
	t->mm = (__u64)mm;
	mm_sync_all(t, mm, tgid);
	return 0;
}
