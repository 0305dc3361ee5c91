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
	__u64 brk;	/* the heap's end then */
	__u64 area;	/* the address the kernel chose for a new mapping, 0: none */
	__u64 area_len;	/* the length it searched for (padded for alignment) */
	__s64 nr;	/* the system call of the thread taking the lock, -1: none */
	__u64 arg[3];
	__s64 fd;	/* an mmap's file descriptor */
};

#if defined(__TARGET_ARCH_x86)
#define MT_NR_MMAP 9
#define MT_NR_MPROTECT 10
#define MT_NR_MUNMAP 11
#define MT_NR_BRK 12
#define MT_NR_MREMAP 25
#define MT_NR_SHMAT 30
#define MT_NR_SHMDT 67
#define MT_SYSCALL_NR(r) BPF_CORE_READ((r), orig_ax)
#elif defined(__TARGET_ARCH_arm64)
#define MT_NR_MMAP 222
#define MT_NR_MPROTECT 226
#define MT_NR_MUNMAP 215
#define MT_NR_BRK 214
#define MT_NR_MREMAP 216
#define MT_NR_SHMAT 196
#define MT_NR_SHMDT 197
#define MT_SYSCALL_NR(r) BPF_CORE_READ((r), syscallno)
#endif

/* Mapped memory by (tgid, start) as it was mapped: a munmap finds its site. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 18);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct memtrail_addr_key);
	__type(value, struct memtrail_map_range);
} map_ranges SEC(".maps");

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
	/*
	 * MM is a tracepoint's argument (tp_btf): its fields and the owner's
	 * load directly (CO-RE offsets, faults read as 0), not by a helper
	 * call each: this runs at every page fault.
	 */
	struct task_struct *owner = mm->owner;

	if (!owner || owner->mm != mm)
		return NULL;
	*tgid = owner->tgid;
	return live_target(*tgid);
}

/* mapped_bytes() of a tracepoint's MM argument: a direct load, not a helper call. */
static __always_inline __s64 mapped_now(struct mm_struct *mm)
{
	return (__s64)mm->data_vm << page_shift;
}

/*
 * Kernels without mmap_lock tracepoints (5.10): mapped memory is synced to
 * data_vm as each system call that maps or unmaps returns. Levels are exact
 * after every such call; a peak that lived only inside one call (an mremap
 * that maps the new range before it unmaps the old) is not seen, and threads
 * mapping at once are seen in the order their calls return.
 */
SEC("tp_btf/sys_exit")
int BPF_PROG(mt_mapped_sys, struct pt_regs *regs, long ret)
{
	struct task_struct *task = mt_current_task();
	struct memtrail_target *t;
	struct mm_struct *mm;
	__u32 tgid;

	switch (MT_SYSCALL_NR(regs)) {
	case MT_NR_MMAP: case MT_NR_MPROTECT: case MT_NR_MUNMAP: case MT_NR_BRK:
	case MT_NR_MREMAP: case MT_NR_SHMAT: case MT_NR_SHMDT:
		break;
	default:
		return 0;
	}
	tgid = bpf_get_current_pid_tgid() >> 32;
	t = live_target(tgid);
	if (!t)
		return 0;
	mm = BPF_CORE_READ(task, mm);
	if (mm && t->mm == (__u64)mm)
		mm_sync_kind(t, (__u64)mm, tgid, MEMTRAIL_KIND_MAPPED, mapped_bytes(mm));
	return 0;
}

/* The open file FD of the current process, or NULL. */
static __always_inline struct file *fd_file(int fd)
{
	struct task_struct *task = mt_current_task();
	struct file *file = NULL;
	struct fdtable *fdt;
	struct file **fds;

	if (fd < 0)
		return NULL;
	fdt = BPF_CORE_READ(task, files, fdt);
	if ((unsigned int)fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	fds = BPF_CORE_READ(fdt, fd);
	if (bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]))
		return NULL;
	return file;
}

/*
 * Files mapped executable, where neither the BPF LSM nor fentry can see
 * security_mmap_file, nor the mmap lock's sections (lib_map_lock): each mmap
 * system call as it returns (this program runs at the end of every system
 * call). Exec maps its files inside the kernel: mt_exec looks at the
 * program's file itself.
 */
SEC("tp_btf/sys_exit")
int BPF_PROG(mt_lib_map_sys, struct pt_regs *regs, long ret)
{
	unsigned long prot;

	if (MT_SYSCALL_NR(regs) != MT_NR_MMAP || (ret < 0 && ret > -4096))
		return 0;
	prot = PT_REGS_PARM3_CORE_SYSCALL(regs);
	if (prot & MT_PROT_EXEC)
		lib_mapped(fd_file((int)PT_REGS_PARM5_CORE_SYSCALL(regs)), prot);
	return 0;
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
	if (!t)
		return 0;
#ifndef MEMTRAIL_COMPAT
	if (rss_is_percpu()) {
		rss_event(t, mm, tgid, member, kind);
		return 0;
	}
#endif
	mm_sync_kind(t, (__u64)mm, tgid, kind, rss_bytes(mm, member));
	return 0;
}

/*
 * Mapped memory changes only under the mmap write lock (munmap finishes its
 * accounting under the read lock it downgrades to, still excluding writers).
 * Both tracepoints run while the lock is held, so data_vm read there is the
 * level at that point of the lock's order, and each is synced to it: the
 * sections are applied in lock order, no concurrent thread can hide an
 * allocation, a free or a peak. Syncing at both ends, not adding each
 * section's change, also covers a section whose program the kernel skipped:
 * on newer kernels (7.3) tracepoint programs run preemptible, and one that finds
 * itself already running on its CPU (its task preempted inside it) is not
 * run (bpftool's recursion_misses; memtrail reports them as lost 'skipped').
 * The level a skipped section left is then seen when the next section
 * begins; only a section skipped at both ends, next to another skipped at
 * its start, can hide a level.
 */
static __always_inline int lock_taken(struct mm_struct *mm, bool write, bool success)
{
	struct memtrail_target *t;
	struct mm_window w;
	__u32 tid, tgid;
	__s64 before;

	if (!write || !success)
		return 0;
	t = mm_target(mm, &tgid);
	if (!t)
		return 0;
	before = mapped_now(mm);
	mm_sync_kind(t, (__u64)mm, tgid, MEMTRAIL_KIND_MAPPED, before);
	tid = (__u32)bpf_get_current_pid_tgid();
	__builtin_memset(&w, 0, sizeof(w));
	w.mm = (__u64)mm;
	w.before = before;
	w.nr = -1;
	/* (the compat object is for kernels without these tracepoints: no sites there) */
#if defined(MT_NR_MMAP) && !defined(MEMTRAIL_COMPAT)
	if (sites_mapping || lib_map_lock) {
		struct task_struct *task = bpf_get_current_task_btf();
		struct pt_regs *regs;

		/* the section is a system call of the mm's own thread: its arguments say what */
		if (task->mm == mm && !(task->flags & MT_PF_KTHREAD)) {
			regs = (struct pt_regs *)bpf_task_pt_regs(task);
			w.nr = MT_SYSCALL_NR(regs);
			w.arg[0] = PT_REGS_PARM1_CORE_SYSCALL(regs);
			w.arg[1] = PT_REGS_PARM2_CORE_SYSCALL(regs);
			w.arg[2] = PT_REGS_PARM3_CORE_SYSCALL(regs);
			w.fd = (int)PT_REGS_PARM5_CORE_SYSCALL(regs);
			w.brk = BPF_CORE_READ(mm, brk);
		}
	}
#endif
	if (bpf_map_update_elem(&mm_windows, &tid, &w, BPF_ANY))
		count_lost(MEMTRAIL_LOST_MM);
	return 0;
}

SEC("tp_btf/mmap_lock_acquire_returned")
int BPF_PROG(mt_mmap_lock, struct mm_struct *mm, bool write, bool success)
{
	return lock_taken(mm, write, success);
}

/* Older kernels (6.1 and 6.12 among them) pass a memcg path too. */
SEC("tp_btf/mmap_lock_acquire_returned")
int BPF_PROG(mt_mmap_lock_path, struct mm_struct *mm, const char *memcg_path, bool write,
	     bool success)
{
	return lock_taken(mm, write, success);
}

/* The address a new mapping gets (mmap, a moving mremap), inside the section. */
SEC("tp_btf/vm_unmapped_area")
int BPF_PROG(mt_unmapped_area, unsigned long addr, struct vm_unmapped_area_info *info)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct mm_window *w = bpf_map_lookup_elem(&mm_windows, &tid);

	if (w && !(addr & 0xfff)) {	/* an error is a small negative number */
		w->area = addr;
		w->area_len = BPF_CORE_READ(info, length);
	}
	return 0;
}

/*
 * Where a new mapping of LEN bytes went: the area the kernel found, or, when
 * it padded the search for alignment (transparent huge pages align anonymous
 * mappings of whole huge pages: __thp_get_unmapped_area), that area moved up
 * to the alignment, or by one pad when it was aligned already (the top-down
 * layout leaves the gap below).
 */
static __always_inline __u64 area_start(struct mm_window *w, __u64 len)
{
	__u64 pad;

	len = (len + 0xfff) & ~0xfffULL;
	if (!w->area || w->area_len <= len)
		return w->area;
	pad = w->area_len - len;
	if (pad & (pad - 1))
		return w->area;
	if (!(w->area & (pad - 1)))
		return w->area + pad;
	return (w->area + pad - 1) & ~(pad - 1);
}

static __always_inline void range_add(__u32 tgid, __u32 phase, __u64 start, __u64 len,
				      __s32 stack, __u64 caller)
{
	struct memtrail_addr_key key = { .tgid = tgid, .addr = start };
	struct memtrail_map_range r = { .len = len, .phase = phase, .stack = stack,
					.caller = caller };

	bpf_map_update_elem(&map_ranges, &key, &r, BPF_ANY);
}

/*
 * Free LEN bytes of the range mapped at START (its front, when LEN is less),
 * from the site that mapped them. The rest stays, keyed by its new start.
 * Returns the bytes credited.
 */
static __always_inline __u64 range_free(__u32 tgid, __u64 start, __u64 len)
{
	struct memtrail_addr_key key = { .tgid = tgid, .addr = start };
	struct memtrail_map_range *r = bpf_map_lookup_elem(&map_ranges, &key), rest;
	__u64 n;

	if (!r)
		return 0;
	rest = *r;
	bpf_map_delete_elem(&map_ranges, &key);
	n = len < rest.len ? len : rest.len;
	if (rest.stack == MEMTRAIL_STACK_DEEP) {
		struct memtrail_event_deep_free *e;

		/* the site is user space's: told, with where what stays starts */
		e = event_reserve(sizeof(*e), MEMTRAIL_EV_DEEP_FREE, tgid);
		if (e) {
			e->addr = start;
			e->kind = MEMTRAIL_KIND_MAPPED;
			e->bytes = n;
			e->rest = n < rest.len ? start + n : 0;
			event_submit(e, false);
		}
	} else {
		site_add_at(tgid, rest.phase, MEMTRAIL_KIND_MAPPED, rest.stack, rest.caller,
			    -(__s64)n, n == rest.len ? MEMTRAIL_OBJ_ONE : 0, false);
	}
	if (n < rest.len) {
		key.addr = start + n;
		rest.len -= n;
		bpf_map_update_elem(&map_ranges, &key, &rest, BPF_ANY);
	}
	return n;
}

/*
 * A section that grew mapped memory by BYTES, its range at START (0: none
 * known), as a deep sample: the user registers and stack of the thread (a
 * tracepoint's context holds the kernel's; the task's saved ones are the
 * user's, 5.15), and its frame-pointer stack for a process gone before
 * user space reads it. Sent before its range is kept, so that the range's
 * free, told later, is read after it. False: take the frame-pointer stack
 * alone (no task registers, or no room for it in the ring buffer: counted).
 */
static __always_inline bool mapping_deep(void *ctx, struct memtrail_target *t, __u32 tgid,
					 __u32 phase, __u64 start, __u64 bytes)
{
#ifdef MEMTRAIL_COMPAT
	return false;
#else
	struct memtrail_event_deep *e;
	struct pt_regs *regs;

	if (!has_task_regs || (MT_READ(t->flags) & MEMTRAIL_TARGET_CALIBRATION))
		return false;
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	e = deep_reserve();
	if (!e)
		return false;
	deep_head(e, tgid, MEMTRAIL_KIND_MAPPED, phase, MEMTRAIL_OBJ_ONE, start, bytes);
	e->tracked = start != 0;
	e->fp_stack = site_stack(ctx);
	e->fp_caller = leaf_caller();
	deep_fill(e, regs);
	deep_uret(e);
	py_walk(e, tgid);
	event_submit(e, true);
	return true;
#endif
}

/*
 * Whether a section that grew mapped memory by BYTES is a deep sample: one
 * of map_deep_min bytes or more; or a brk that leaves the heap that large.
 * malloc grows the brk heap by 128 KiB or so at a time, from code without
 * frame pointers: a heap grown by many small allocations would otherwise be
 * named "brk < __sbrk" and nothing above. A small process's first brk heap
 * keeps the cheap stacks.
 */
static __always_inline bool deep_enough(const struct mm_window *w, struct mm_struct *mm,
					__u64 bytes)
{
	if (bytes >= map_deep_min)
		return true;
#ifdef MT_NR_MMAP
	if (w->nr == MT_NR_BRK)
		return w->brk + bytes - BPF_CORE_READ(mm, start_brk) >= map_deep_min;
#endif
	return false;
}

/*
 * Mapping sites: the user stack of each section that grew mapped memory, and
 * the range it mapped, so that the munmap of that range (or the brk that
 * gives it back) credits the site that made it. Frees that match no range
 * (a partial unmap from the middle, an mprotect) go to the unknown site (the
 * small processes' under sites_from).
 */
static __always_inline void mapping_site(void *ctx, struct mm_window *w, struct mm_struct *mm,
					 struct memtrail_target *t, __u32 tgid, __s64 delta,
					 __s64 after)
{
	__u32 phase = t->phase;
	__u64 start = 0, freed, n = 0, caller;
	__s32 stack;

	if (w->nr < 0)
		return;
	if (delta > 0) {
		freed = 0;
#ifdef MT_NR_MMAP
		switch (w->nr) {
		case MT_NR_MMAP:
			start = w->area ? area_start(w, w->arg[1]) : w->arg[0];
			break;
		case MT_NR_BRK:
			start = w->brk;
			break;
		case MT_NR_MREMAP:
			/* the old range is freed at its site, the new one is this call's */
			freed = range_free(tgid, w->arg[0], w->arg[1]);
			start = w->area ? area_start(w, w->arg[2]) : w->arg[0];
			break;
		case MT_NR_MPROTECT:
			start = w->arg[0];
			break;
		}
#endif
		caller = 0;
		if (after < (__s64)sites_from && !deep_enough(w, mm, delta + freed)) {
			/*
			 * a small section of a process that cannot matter yet (watch
			 * --sites-from): no stack walk, no range kept; its unnamed
			 * site has the bytes, and the frees that match no range. The
			 * section that takes it past sites_from has its stack, as
			 * has a large one (map_deep_min or more, or a brk heap that
			 * large) whatever the process holds.
			 */
			site_add(tgid, phase, MEMTRAIL_KIND_MAPPED, MEMTRAIL_STACK_SMALL,
				 delta + freed, MEMTRAIL_OBJ_ONE, true);
			return;
		}
		if (map_deep && deep_enough(w, mm, delta + freed) &&
		    mapping_deep(ctx, t, tgid, phase, start, delta + freed)) {
			stack = MEMTRAIL_STACK_DEEP;
		} else {
			stack = site_stack(ctx);
			caller = leaf_caller();
			site_add_at(tgid, phase, MEMTRAIL_KIND_MAPPED, stack, caller, delta,
				    MEMTRAIL_OBJ_ONE, true);
			if (freed)
				site_add_at(tgid, phase, MEMTRAIL_KIND_MAPPED, stack, caller, freed,
					    0, false);
		}
		if (start)
			range_add(tgid, phase, start, delta + freed, stack, caller);
		return;
	}
	freed = -delta;
#ifdef MT_NR_MMAP
	switch (w->nr) {
	case MT_NR_MUNMAP:
		n = range_free(tgid, w->arg[0], freed);
		break;
	case MT_NR_BRK:
		n = range_free(tgid, BPF_CORE_READ(mm, brk), freed);
		break;
	case MT_NR_MREMAP:
		n = range_free(tgid, w->arg[0], w->arg[1]);
		if (n > freed) {
			/* what stays is the mremap's own, at its new address */
			stack = site_stack(ctx);
			caller = leaf_caller();
			site_add_at(tgid, phase, MEMTRAIL_KIND_MAPPED, stack, caller, n - freed,
				    MEMTRAIL_OBJ_ONE, true);
			range_add(tgid, phase, w->area ? w->area : w->arg[0], n - freed, stack,
				  caller);
			return;
		}
		break;
	}
#endif
	/* no range: the small processes' site where they have one (most are theirs) */
	if (n < freed)
		site_add(tgid, phase, MEMTRAIL_KIND_MAPPED,
			 sites_from ? MEMTRAIL_STACK_SMALL : MEMTRAIL_STACK_NONE,
			 -(__s64)(freed - n), 0, false);
}

static __always_inline int lock_released(void *ctx, struct mm_struct *mm, bool write)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), tgid;
	struct mm_window *w = NULL;
	struct memtrail_target *t;
	__s64 after, delta;

	/*
	 * a read section's end, where no write section began: nothing changed
	 * (a munmap downgrades its write lock to a read lock and gives back its
	 * memory under that: its window makes the read section's end a write
	 * section's end)
	 */
	w = bpf_map_lookup_elem(&mm_windows, &tid);
	if (w && w->mm != (__u64)mm)
		w = NULL;
	if (!w && !write)
		return 0;
	t = mm_target(mm, &tgid);
	if (!t)
		goto out;
	after = mapped_now(mm);
	mm_sync_kind(t, (__u64)mm, tgid, MEMTRAIL_KIND_MAPPED, after);
	if (!w)
		return 0;	/* no window (none kept, or its start skipped): the level is right */
	delta = after - w->before;
	if (delta && sites_mapping)
		mapping_site(ctx, w, mm, t, tgid, delta, after);
#ifdef MT_NR_MMAP
	/* a file mapped executable (where no cheaper hook sees it): the mapping is in place now */
	if (lib_map_lock && t && w->nr == MT_NR_MMAP && (w->arg[2] & MT_PROT_EXEC))
		lib_mapped(fd_file((int)w->fd), w->arg[2]);
#endif
out:
	if (w)
		bpf_map_delete_elem(&mm_windows, &tid);
	return 0;
}

SEC("tp_btf/mmap_lock_released")
int BPF_PROG(mt_mmap_unlock, struct mm_struct *mm, bool write)
{
	return lock_released(ctx, mm, write);
}

SEC("tp_btf/mmap_lock_released")
int BPF_PROG(mt_mmap_unlock_path, struct mm_struct *mm, const char *memcg_path, bool write)
{
	return lock_released(ctx, mm, write);
}
