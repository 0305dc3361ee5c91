// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Host memory sources: resident memory from kmem:rss_stat and mapped memory
 * from the mmap lock's write sections. Both end in account().
 */
#include "memtrail.bpf.h"

/* A write-locked section of a target's mm in progress, by thread. */
struct mm_window {
	__u64 mm;
	__s64 before;	/* mapped bytes when the lock was taken */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct mm_window);
} mm_windows SEC(".maps");

/*
 * The live target that owns MM, or NULL. An owner that has not adopted the
 * mm yet is a child inside fork (it still wears its parent's tgid) or a task
 * inside exec or exit; their changes are picked up by the fork/exec sync, or
 * are exit's teardown.
 */
static __always_inline struct memtrail_target *mm_target(struct mm_struct *mm, __u32 *tgid)
{
	struct task_struct *owner = BPF_CORE_READ(mm, owner);

	if (!owner || BPF_CORE_READ(owner, mm) != mm)
		return NULL;
	*tgid = BPF_CORE_READ(owner, tgid);
	return live_target(*tgid);
}

SEC("tp_btf/rss_stat")
int BPF_PROG(mt_rss_stat, struct mm_struct *mm, int member)
{
	int kind = rss_member_kind(member);
	struct memtrail_target *t;
	__u32 tgid;

	if (kind < 0)
		return 0;
	/* the mm's owner, not current: reclaim, fork and exit touch other mms */
	t = mm_target(mm, &tgid);
	if (t)
		mm_sync_kind(t, (__u64)mm, tgid, kind, rss_bytes(mm, member));
	return 0;
}

/*
 * Mapped memory changes only under the mmap write lock (munmap finishes its
 * accounting under the read lock it downgrades to, still excluding writers).
 * The released tracepoint runs before the lock is dropped, so data_vm after
 * minus data_vm when the lock was taken is exactly that section's change,
 * and deltas are applied in lock order: no concurrent thread can hide an
 * allocation, a free or a peak.
 */
SEC("tp_btf/mmap_lock_acquire_returned")
int BPF_PROG(mt_mmap_lock, struct mm_struct *mm, bool write, bool success)
{
	struct mm_window w;
	__u32 tid, tgid;

	if (!write || !success || !mm_target(mm, &tgid))
		return 0;
	tid = (__u32)bpf_get_current_pid_tgid();
	w.mm = (__u64)mm;
	w.before = mapped_bytes(mm);
	if (bpf_map_update_elem(&mm_windows, &tid, &w, BPF_ANY))
		count_lost(MEMTRAIL_LOST_MM);
	return 0;
}

SEC("tp_btf/mmap_lock_released")
int BPF_PROG(mt_mmap_unlock, struct mm_struct *mm, bool write)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), tgid;
	struct mm_window *w = bpf_map_lookup_elem(&mm_windows, &tid);
	struct memtrail_target *t;
	__s64 delta;

	if (!w || w->mm != (__u64)mm)
		return 0;
	delta = mapped_bytes(mm) - w->before;
	bpf_map_delete_elem(&mm_windows, &tid);
	t = mm_target(mm, &tgid);
	if (delta && t)
		mm_add_kind(t, (__u64)mm, tgid, MEMTRAIL_KIND_MAPPED, delta);
	return 0;
}
