// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * A target's executable file mappings, told to user space from BPF (Linux
 * 6.7: the task_vma iterator) after its exec and whenever its dynamic linker
 * says it mapped libraries: a process that maps memory and exits before
 * user space reads /proc/PID/maps still has its stacks named. Loaded only
 * where the kernel has the iterator and sites are named; the compat object
 * has the same programs, empty.
 */
#include "memtrail.bpf.h"

/* the build kernel's headers may predate the iterator: its layout (one opaque word) */
#ifndef MT_HAVE_ITER_TASK_VMA
struct bpf_iter_task_vma {
	__u64 __opaque[1];
} __attribute__((aligned(8)));
#endif

extern int bpf_iter_task_vma_new(struct bpf_iter_task_vma *it, struct task_struct *task,
				 __u64 addr) __ksym __weak;
extern struct vm_area_struct *bpf_iter_task_vma_next(struct bpf_iter_task_vma *it) __ksym __weak;
extern void bpf_iter_task_vma_destroy(struct bpf_iter_task_vma *it) __ksym __weak;

#define MT_VMA_EXEC 0x4

/*
 * Files whose path was told (MEMTRAIL_EV_FILE), by the kernel's (s_dev, ino,
 * generation) of the file mapped. An entry evicted costs a path told again.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct memtrail_lib_key);
	__type(value, __u32);
} files_told SEC(".maps");

#define MT_FILE_DEPTH 32	/* directories walked up from a file, at most */
#define MT_NAME_MAX 256		/* a path component's bytes with its NUL (NAME_MAX + 1) */

#ifndef MEMTRAIL_COMPAT
/*
 * Tell user space where VMA's file (INODE) is, unless told
 * already: the names from the file up to its filesystem's root, which user
 * space finds among the mounts. No bpf_d_path here (tracepoints and uprobes
 * may not call it), so the path is relative to the filesystem, not a mount.
 */
static __always_inline void file_tell(__u32 tgid, struct vm_area_struct *vma, struct inode *inode)
{
	struct memtrail_event_file *e;
	struct memtrail_lib_key key;
	struct dentry *d, *up;
	__u32 told = 1, off = 0;
	long n;
	int i;

	key.dev = BPF_CORE_READ(inode, i_sb, s_dev);
	key.ino = BPF_CORE_READ(inode, i_ino);
	key.gen = BPF_CORE_READ(inode, i_generation);
	key.pad = 0;
	if (bpf_map_lookup_elem(&files_told, &key))
		return;
	e = event_reserve(sizeof(*e), MEMTRAIL_EV_FILE, tgid);
	if (!e)
		return;
	e->key = key;
	e->whole = 0;
	/* read, not walked as a trusted pointer: vm_file may be NULL to the verifier */
	d = BPF_CORE_READ(vma, vm_file, f_path.dentry);
	for (i = 0; i < MT_FILE_DEPTH; i++) {
		up = BPF_CORE_READ(d, d_parent);
		if (!up || up == d) {
			e->whole = 1;
			break;
		}
		if (off > MEMTRAIL_FILE_NAMES - MT_NAME_MAX)
			break;
		n = bpf_probe_read_kernel_str(&e->names[off], MT_NAME_MAX,
					      BPF_CORE_READ(d, d_name.name));
		if (n <= 0)
			break;
		off += n;
		d = up;
	}
	e->len = off;
	event_submit(e, false);
	bpf_map_update_elem(&files_told, &key, &told, BPF_ANY);
}
#endif

/* Tell user space every executable file mapping of the current process, if it mapped code since. */
static __always_inline void maps_tell(__u32 tgid)
{
#ifdef MEMTRAIL_COMPAT
	(void)tgid;	/* no kfuncs before 5.13, no such iterator before 6.7 */
#else
	struct memtrail_target *t = bpf_map_lookup_elem(&targets, &tgid);
	struct bpf_iter_task_vma it;
	struct vm_area_struct *vma;

	if (!t || (t->flags & MEMTRAIL_TARGET_EXITED) || !t->maps_new)
		return;
	t->maps_new = 0;
	/* -EBUSY where the mmap lock is contended: counted, and read at the next hook */
	if (bpf_iter_task_vma_new(&it, bpf_get_current_task_btf(), 0)) {
		t->maps_new = 1;
		count_lost(MEMTRAIL_LOST_MAPS);
	}
	while ((vma = bpf_iter_task_vma_next(&it))) {
		struct memtrail_event_map *e;
		struct inode *inode;

		/* no count: the verifier would walk each value of it (the iterator ends) */
		if (!(vma->vm_flags & MT_VMA_EXEC) || !vma->vm_file)
			continue;
		inode = BPF_CORE_READ(vma, vm_file, f_inode);
		file_tell(tgid, vma, inode);
		e = event_reserve(sizeof(*e), MEMTRAIL_EV_MAP, tgid);
		if (!e)
			break;
		e->start = vma->vm_start;
		e->end = vma->vm_end;
		e->pgoff = vma->vm_pgoff;
		e->ino = BPF_CORE_READ(inode, i_ino);
		e->dev = BPF_CORE_READ(inode, i_sb, s_dev);
		event_submit(e, false);
	}
	bpf_iter_task_vma_destroy(&it);
#endif
}

/* After mt_exec (tracer.c attaches this one after it): the program and its interpreter. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(mt_exec_maps, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	maps_tell(bpf_get_current_pid_tgid() >> 32);
	return 0;
}

/* The dynamic linker's _dl_debug_state, beside the device programs' entry there. */
SEC("uprobe")
int mt_maps_hook(struct pt_regs *ctx)
{
	maps_tell(bpf_get_current_pid_tgid() >> 32);
	return 0;
}
