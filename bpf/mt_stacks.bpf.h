/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * User stacks of allocation sites: taken, checked, and added to a
 * (target, phase, kind, stack) site.
 */
#ifndef MT_STACKS_BPF_H
#define MT_STACKS_BPF_H

#include "mt_account.bpf.h"

static const struct memtrail_site zero_site;

/*
 * Whether RET can be a return address: the code just before it is a call,
 * as user space checks it (sites.c after_call), read from the process.
 */
static __always_inline bool after_call(__u64 ret)
{
	__u8 b[8];

	if (ret < 8 || bpf_probe_read_user(b, sizeof(b), (const void *)(ret - 8)))
		return false;
#if defined(__TARGET_ARCH_x86)
	/* call rel32 (e8 at ret - 5), or call r/m64 (ff /2 at ret - 2 .. ret - 7) */
	return b[3] == 0xe8 ||
	       (b[6] == 0xff && ((b[7] >> 3) & 7) == 2) || (b[5] == 0xff && ((b[6] >> 3) & 7) == 2) ||
	       (b[4] == 0xff && ((b[5] >> 3) & 7) == 2) || (b[3] == 0xff && ((b[4] >> 3) & 7) == 2) ||
	       (b[2] == 0xff && ((b[3] >> 3) & 7) == 2) || (b[1] == 0xff && ((b[2] >> 3) & 7) == 2);
#elif defined(__TARGET_ARCH_arm64)
	{
		__u32 insn = b[4] | (__u32)b[5] << 8 | (__u32)b[6] << 16 | (__u32)b[7] << 24;

		return (insn & 0xfc000000) == 0x94000000 ||	/* bl */
		       (insn & 0xfffffc1f) == 0xd63f0000;	/* blr */
	}
#else
	return true;
#endif
}

/* The current user stack of the calling thread as a site_stacks id, or MEMTRAIL_STACK_NONE. */
static __always_inline __s32 site_stack(void *ctx)
{
	struct memtrail_stack st;
	__u32 zero = 0, cpu, id, *given;
	bool cut = false;
	__s32 *known;
	int i;

	/* the helper zeroes the buffer past the last frame: equal stacks, equal keys */
	if (bpf_get_stack(ctx, &st, sizeof(st), BPF_F_USER_STACK) <= 0)
		goto lost;
	/*
	 * The kernel walks frame pointers; through code built without them
	 * (most distribution libraries, libtorch, Python) it reads whatever
	 * the register held, and each call would make a stack of its own and
	 * fill the tables. The stack ends at the first caller's frame that is
	 * not just after a call, marked MEMTRAIL_FRAME_CUT (user space ends it
	 * there too, and says the frames were cut).
	 */
	for (i = 1; i < MEMTRAIL_SITE_DEPTH; i++) {
		if (!cut && st.ips[i] && !after_call(st.ips[i])) {
			cut = true;
			st.ips[i] = MEMTRAIL_FRAME_CUT;
		} else if (cut) {
			st.ips[i] = 0;
		}
	}
	known = bpf_map_lookup_elem(&stack_ids, &st);
	if (known)
		return *known;
	given = bpf_map_lookup_elem(&stack_given, &zero);
	cpu = bpf_get_smp_processor_id();
	if (!given || !nr_cpus || cpu >= nr_cpus || *given > (0x7fffffffU - cpu) / nr_cpus)
		goto lost;
	id = *given * nr_cpus + cpu;
	*given += 1;
	if (bpf_map_update_elem(&site_stacks, &id, &st, BPF_NOEXIST))
		goto lost;	/* full, or the id taken by a program this one preempted */
	if (!bpf_map_update_elem(&stack_ids, &st, &id, BPF_NOEXIST))
		return id;
	/* another thread added this stack first (its id stands), or full */
	bpf_map_delete_elem(&site_stacks, &id);
	known = bpf_map_lookup_elem(&stack_ids, &st);
	if (known)
		return *known;
lost:
	count_lost(MEMTRAIL_LOST_STACKS);
	return MEMTRAIL_STACK_NONE;
}

/*
 * The return address of the innermost user function, if it keeps it on the
 * stack top (a leaf without a frame pointer); user space checks it.
 */
static __always_inline __u64 leaf_caller(void)
{
	__u64 ret = 0;
#ifdef MEMTRAIL_COMPAT
	return ret;	/* no bpf_task_pt_regs (5.15): the frame walk alone */
#else
	struct pt_regs *regs;

	if (!has_task_regs)
		return ret;
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
#if defined(__TARGET_ARCH_x86)
	bpf_probe_read_user(&ret, sizeof(ret), (void *)PT_REGS_SP_CORE(regs));
#elif defined(__TARGET_ARCH_arm64)
	ret = BPF_CORE_READ(regs, regs[30]);
#endif
	return ret;
#endif
}

/*
 * A deep sample's user registers (DWARF numbering) and the top of its stack,
 * from REGS (a uprobe's context, or the task's saved user registers) into E.
 * The stack is read from its pointer up to MEMTRAIL_DEEP_STACK_BYTES, or to
 * the last page that can be read (a shallow stack ends below that).
 */
static __always_inline void deep_fill(struct memtrail_event_deep *e, struct pt_regs *regs)
{
	__u64 sp, first;
	__u32 len;
	int i;

#if defined(__TARGET_ARCH_x86)
	e->regs[0] = BPF_CORE_READ(regs, ax);
	e->regs[1] = BPF_CORE_READ(regs, dx);
	e->regs[2] = BPF_CORE_READ(regs, cx);
	e->regs[3] = BPF_CORE_READ(regs, bx);
	e->regs[4] = BPF_CORE_READ(regs, si);
	e->regs[5] = BPF_CORE_READ(regs, di);
	e->regs[6] = BPF_CORE_READ(regs, bp);
	e->regs[7] = BPF_CORE_READ(regs, sp);
	e->regs[8] = BPF_CORE_READ(regs, r8);
	e->regs[9] = BPF_CORE_READ(regs, r9);
	e->regs[10] = BPF_CORE_READ(regs, r10);
	e->regs[11] = BPF_CORE_READ(regs, r11);
	e->regs[12] = BPF_CORE_READ(regs, r12);
	e->regs[13] = BPF_CORE_READ(regs, r13);
	e->regs[14] = BPF_CORE_READ(regs, r14);
	e->regs[15] = BPF_CORE_READ(regs, r15);
	e->regs[16] = BPF_CORE_READ(regs, ip);
	sp = e->regs[7];
#elif defined(__TARGET_ARCH_arm64)
	bpf_probe_read_kernel(e->regs, 31 * sizeof(__u64), &regs->regs[0]);
	e->regs[31] = BPF_CORE_READ(regs, sp);
	e->regs[32] = BPF_CORE_READ(regs, pc);
	sp = e->regs[31];
#else
	sp = 0;
#endif
	e->stack_len = 0;
	if (!sp)
		return;
	/* the whole window, else to the end of its first page and whole pages after it */
	first = 4096 - (sp & 4095);
	for (i = 4; i > 0; i--) {
		len = first + (__u32)(i - 1) * 4096;
		if (len > MEMTRAIL_DEEP_STACK_BYTES)
			len = MEMTRAIL_DEEP_STACK_BYTES;
		if (!bpf_probe_read_user(e->stack, len, (const void *)sp)) {
			e->stack_len = len;
			return;
		}
	}
}

/*
 * A deep sample's record, or NULL (counted as a lost deep sample). Deep
 * samples are bulky (16 KiB of stack each) and come in bursts that user
 * space unwinds one by one; the records user space counts exactly (phase
 * boundaries, exits, OOM kills, the frees of deep samples) share the ring
 * buffer with them. So a deep sample is taken only while the buffer holds
 * at most deep_room unread bytes: what stays above that is the exact
 * records' alone. The test and the reservation are two steps: samples that
 * pass the test at once (on other CPUs, or in a program preempted between
 * the two) can take more, so user space keeps a sample per CPU to spare
 * besides the exact records' TRACER_RING_EXACT.
 */
static __always_inline struct memtrail_event_deep *deep_reserve(void)
{
	struct memtrail_event_deep *e = NULL;

	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) <= deep_room)
		e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		count_lost(MEMTRAIL_LOST_DEEP);
	return e;
}

/* A deep sample's head: what it stands for. */
static __always_inline void deep_head(struct memtrail_event_deep *e, __u32 tgid, __u32 kind,
				      __u32 phase, __u32 objects, __u64 addr, __u64 weight)
{
	e->hdr.type = MEMTRAIL_EV_DEEP;
	e->hdr.tgid = tgid;
	e->hdr.ts_ns = bpf_ktime_get_ns();
	e->tid = (__u32)bpf_get_current_pid_tgid();
	e->kind = kind;
	e->phase = phase;
	e->objects = objects;
	e->addr = addr;
	e->weight = weight;
}

/* The kernel's own structures a deep sample reads its pending uretprobe returns from. */
struct return_instance___mt {
	unsigned long stack;
	unsigned long orig_ret_vaddr;
	struct return_instance___mt *next;
} __attribute__((preserve_access_index));

struct uprobe_task___mt {
	struct return_instance___mt *return_instances;
} __attribute__((preserve_access_index));

struct xol_area___mt {
	unsigned long vaddr;
} __attribute__((preserve_access_index));

struct uprobes_state___mt {
	struct xol_area___mt *xol_area;
} __attribute__((preserve_access_index));

struct mm_struct___mt {
	struct uprobes_state___mt uprobes_state;
} __attribute__((preserve_access_index));

struct task_struct___mt {
	struct uprobe_task___mt *utask;
	struct mm_struct___mt *mm;
} __attribute__((preserve_access_index));

/*
 * The thread's pending uretprobe returns into E: a frame whose function is
 * probed at its return reads the trampoline's address as its return
 * address, and user space puts the real one in its place. The one
 * returning now may still be listed first (before 6.14): user space keeps
 * those whose slot is on the stack above the stack pointer.
 */
static __always_inline void deep_uret(struct memtrail_event_deep *e)
{
	struct task_struct___mt *task = (void *)bpf_get_current_task();
	struct return_instance___mt *ri = NULL;
	struct uprobe_task___mt *ut;
	int i;

	e->n_uret = 0;
	e->uret_tramp = 0;
	if (!bpf_core_field_exists(task->utask) || !bpf_core_field_exists(ri->orig_ret_vaddr))
		return;
	ut = BPF_CORE_READ(task, utask);
	if (!ut)
		return;
	ri = BPF_CORE_READ(ut, return_instances);
	if (!ri)
		return;
	e->uret_tramp = BPF_CORE_READ(task, mm, uprobes_state.xol_area, vaddr);
#pragma clang loop unroll(disable)
	for (i = 0; i < MEMTRAIL_DEEP_URET; i++) {
		if (!ri)
			break;
		e->uret[i].stack = BPF_CORE_READ(ri, stack);
		e->uret[i].ret = BPF_CORE_READ(ri, orig_ret_vaddr);
		ri = BPF_CORE_READ(ri, next);
	}
	e->n_uret = i;
}

static __always_inline __u64 read_ptr(__u64 addr)
{
	__u64 v = 0;

	if (bpf_probe_read_user(&v, sizeof(v), (const void *)addr))
		return 0;
	return v;
}

/*
 * The calling thread's id as its own pid namespace numbers it: what the
 * interpreter's thread states hold (gettid() in a container is the
 * container's), the kernel's where the process is in the first namespace.
 */
static __always_inline __u32 ns_tid(void)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct pid *pid = BPF_CORE_READ(task, thread_pid);
	unsigned int level = BPF_CORE_READ(pid, level);

	return (__u32)BPF_CORE_READ(pid, numbers[level].nr);
}

/*
 * The Python frames the calling thread of TGID runs, innermost first, into
 * E: its thread state found among the interpreter's by the thread's id as
 * its pid namespace numbers it (3.10's states hold pthread_self(): the id
 * is read from the C library's descriptor of the thread), so a thread that
 * let the GIL go, as libtorch's calls do, keeps its frames; then its frame
 * chain. Each frame's code object, last instruction and own address are
 * sent; user space reads the code object's names and line table.
 */
static __always_inline void py_walk(struct memtrail_event_deep *e, __u32 tgid)
{
	struct memtrail_py_proc *p = bpf_map_lookup_elem(&py_procs, &tgid);
	__u64 interp, ts, frame, tsid;
	__u32 tid;
	__u8 entry;
	int i;

	e->n_py = 0;
	e->py_status = MEMTRAIL_PY_NONE;
	if (!p)
		return;
	e->py_status = MEMTRAIL_PY_NO_THREAD;
	tid = ns_tid();
	interp = read_ptr(p->runtime + p->runtime_main);
	ts = interp ? read_ptr(interp + p->interp_threads) : 0;
	for (i = 0; i < MEMTRAIL_PY_THREADS && ts; i++) {
		tsid = 0;
		if (bpf_probe_read_user(&tsid, sizeof(tsid), (const void *)(ts + p->tstate_tid)))
			return;
		if (p->pthread_tid != MEMTRAIL_PY_TID_NATIVE) {
			/* 3.10: the thread's pthread_t; a thread gone may have freed it */
			__u32 ktid = 0;

			if (!tsid || bpf_probe_read_user(&ktid, sizeof(ktid),
							 (const void *)(tsid + p->pthread_tid)))
				ktid = 0;
			tsid = ktid;
		}
		if (tsid == tid)
			break;
		ts = read_ptr(ts + p->tstate_next);
	}
	if (!ts || i == MEMTRAIL_PY_THREADS)
		return;
	if (p->tstate_cframe == MEMTRAIL_PY_NO_CFRAME)
		frame = read_ptr(ts + p->cframe_current);
	else
		frame = read_ptr(read_ptr(ts + p->tstate_cframe) + p->cframe_current);
	e->py_status = MEMTRAIL_PY_OK;
	for (i = 0; i < MEMTRAIL_PY_FRAMES && frame; i++) {
		struct memtrail_py_frame *f = &e->py[i];

		entry = 0;
		f->code = read_ptr(frame + p->frame_code);
		f->instr = read_ptr(frame + p->frame_instr);
		if (!f->code ||
		    bpf_probe_read_user(&entry, sizeof(entry), (const void *)(frame + p->frame_entry))) {
			e->py_status = MEMTRAIL_PY_UNREADABLE;
			break;
		}
		f->entry = entry;
		f->addr = frame;
		e->n_py = i + 1;
		frame = read_ptr(frame + p->frame_previous);
	}
	if (i == MEMTRAIL_PY_FRAMES && frame)
		e->py_status = MEMTRAIL_PY_TOO_DEEP;
}

/* Add an allocation (BYTES > 0) or the free of one (BYTES < 0) to a site. */
static __always_inline void site_add_at(__u32 tgid, __u32 phase, __u32 kind, __s32 stack,
					__u64 caller, __s64 bytes, __u64 objects, bool sampled)
{
	struct memtrail_site_key key = { .tgid = tgid, .phase = phase, .kind = kind,
					 .stack = stack, .caller = caller };
	struct memtrail_site *s = map_get_or_init(&sites, &key, &zero_site, MEMTRAIL_LOST_SITES);

	if (!s)
		return;
	if (bytes >= 0) {
		__sync_fetch_and_add(&s->alloc_bytes, bytes);
		__sync_fetch_and_add(&s->alloc_objects, objects);
		if (sampled)
			__sync_fetch_and_add(&s->samples, 1);
	} else {
		__sync_fetch_and_add(&s->free_bytes, -bytes);
		__sync_fetch_and_add(&s->free_objects, objects);
	}
}

/*
 * An allocation made (BYTES) at site STACK is the outer call's: taken out
 * of STACK's figures as if never counted there.
 */
static __always_inline void site_unadd(__u32 tgid, __u32 phase, __u32 kind, __s32 stack,
				       __u64 bytes)
{
	struct memtrail_site_key key = { .tgid = tgid, .phase = phase, .kind = kind,
					 .stack = stack };
	struct memtrail_site *s = bpf_map_lookup_elem(&sites, &key);

	if (!s)
		return;
	__sync_fetch_and_add(&s->alloc_bytes, -bytes);
	__sync_fetch_and_add(&s->alloc_objects, -(__u64)MEMTRAIL_OBJ_ONE);
	__sync_fetch_and_add(&s->samples, -1ULL);
}

static __always_inline void site_add(__u32 tgid, __u32 phase, __u32 kind, __s32 stack,
				     __s64 bytes, __u64 objects, bool sampled)
{
	site_add_at(tgid, phase, kind, stack, 0, bytes, objects, sampled);
}

#endif /* MT_STACKS_BPF_H */
