// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Host memory sources: resident memory from kmem:rss_stat and mapped memory
 * from the exits of the syscalls that change a process's mappings. Both end
 * in mm_sync_kind() and so in account().
 */
#include "memtrail.bpf.h"

/* Syscalls after which data_vm may have changed. */
static __always_inline bool changes_mappings(long nr)
{
#if defined(__TARGET_ARCH_x86)
	return nr == 9 || nr == 10 || nr == 11 || nr == 12 || nr == 25 ||
	       nr == 30 || nr == 67 || nr == 216 || nr == 329;
	/* mmap mprotect munmap brk mremap shmat shmdt remap_file_pages pkey_mprotect */
#elif defined(__TARGET_ARCH_arm64)
	return nr == 222 || nr == 226 || nr == 215 || nr == 214 || nr == 216 ||
	       nr == 196 || nr == 197 || nr == 234 || nr == 288;
#else
#error "memtrail: add this architecture's mapping syscall numbers"
#endif
}

static __always_inline long syscall_nr(struct pt_regs *regs)
{
#if defined(__TARGET_ARCH_x86)
	return BPF_CORE_READ(regs, orig_ax);
#else
	return BPF_CORE_READ((struct user_pt_regs *)regs, regs[8]);
#endif
}

SEC("tp_btf/rss_stat")
int BPF_PROG(mt_rss_stat, struct mm_struct *mm, int member)
{
	int kind = rss_member_kind(member);
	struct task_struct *owner;
	__u32 tgid;

	if (kind < 0)
		return 0;
	/*
	 * Charge the mm's owner, not current: reclaim, fork and exit touch other
	 * mms. An owner that has not adopted the mm yet is a child inside fork
	 * (it still wears its parent's tgid) or a task inside exec or exit; its
	 * changes are picked up by the fork/exec sync, or are exit's teardown.
	 */
	owner = BPF_CORE_READ(mm, owner);
	if (!owner || BPF_CORE_READ(owner, mm) != mm)
		return 0;
	tgid = BPF_CORE_READ(owner, tgid);
	if (!live_target(tgid))
		return 0;
	mm_sync_kind((__u64)mm, tgid, kind, rss_bytes(mm, member));
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(mt_sys_exit, struct pt_regs *regs, long ret)
{
	struct task_struct *task;
	struct mm_struct *mm;
	__u32 tgid;

	if (!changes_mappings(syscall_nr(regs)))
		return 0;
	task = bpf_get_current_task_btf();
	mm = BPF_CORE_READ(task, mm);
	if (!mm)
		return 0;
	tgid = BPF_CORE_READ(mm, owner, tgid);
	if (!tgid || !live_target(tgid))
		return 0;
	mm_sync_kind((__u64)mm, tgid, MEMTRAIL_KIND_MAPPED, mapped_bytes(mm));
	return 0;
}
