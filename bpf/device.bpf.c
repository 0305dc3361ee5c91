// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Accelerator memory: uprobes and uretprobes on the CUDA driver and runtime
 * and the Neuron runtime. Two programs serve every function; the uprobe
 * cookie (MEMTRAIL_COOKIE) says what the function does with its arguments.
 *
 * Live allocations are kept by (target, address) so that a free learns its
 * size, and so that an allocation seen twice (a runtime calling its driver,
 * both probed) is counted once: the second insert finds the first. VMM
 * handles (cuMemCreate) are counted once, when created, and leave with their
 * last reference: cuMemRelease and the unmapping of every mapping.
 */
#include "memtrail.bpf.h"

#define MT_DEV_FRAMES 4		/* nested probed calls per thread */
#define MT_UNMAP_SPAN 32	/* mappings one cuMemUnmap may remove */

#if defined(__TARGET_ARCH_x86)
#define MT_RET_SP_ADJ 8		/* ret pops the return address */
#else
#define MT_RET_SP_ADJ 0		/* the return address is in a register */
#endif

/* Live allocations by (tgid, address); no prealloc: memory follows use. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 20);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct memtrail_dev_key);
	__type(value, struct memtrail_dev_alloc);
} dev_allocs SEC(".maps");

/* VMM handles by (tgid, handle). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 18);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct memtrail_dev_key);
	__type(value, struct memtrail_vmm_handle);
} vmm_handles SEC(".maps");

struct vmm_mapping {
	__u64 handle;
	__u64 size;
};

/* VMM mappings by (tgid, virtual address). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 18);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct memtrail_dev_key);
	__type(value, struct vmm_mapping);
} vmm_maps SEC(".maps");

/*
 * Targets with a device OOM snapshot pending (value: its epoch): until user
 * space has listed what was live at the failure, frees mark instead of delete.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} dev_snap SEC(".maps");

/* A probed call in progress: its arguments, kept until it returns. */
struct dev_frame {
	__u64 sp;	/* stack pointer at entry: finds the frame again at return */
	__u64 cookie;
	__u64 arg[4];
};

struct dev_calls {
	__u32 depth;
	__u32 pad;
	struct dev_frame f[MT_DEV_FRAMES];
};

/* Calls in progress per thread; threads that vanish age out. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct dev_calls);
} dev_calls SEC(".maps");

/* The device of each CUDA context seen created, by (tgid, context). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct memtrail_dev_key);
	__type(value, __s32);
} ctx_device SEC(".maps");

/* Device sizes already reported, by (tgid, kind, device): sent again only when changed. */
struct dev_total_key {
	__u32 tgid;
	__u32 kind;
	__s32 device;
	__u32 pad;
};

struct dev_total {
	__u64 bytes;
	__u64 mm;	/* the address space it was told to: a new process or program is told anew */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct dev_total_key);
	__type(value, struct dev_total);
} dev_totals SEC(".maps");

/* The current device per thread (cudaSetDevice, cuCtxSetCurrent). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __s32);
} thread_device SEC(".maps");

static const char phase_init[] = "runtime_init";
static const char phase_load[] = "model_load";
static const char phase_execute[] = "execute";

static __always_inline __u64 arg_n(struct pt_regs *ctx, __u32 n)
{
	__u64 a1 = PT_REGS_PARM2(ctx), a2 = PT_REGS_PARM3(ctx), a3 = PT_REGS_PARM4(ctx);
	__u64 a4 = PT_REGS_PARM5(ctx);

	/* each read at its fixed offset: the verifier refuses a computed one */
	barrier_var(a1);
	barrier_var(a2);
	barrier_var(a3);
	barrier_var(a4);
	switch (n) {
	case 1: return a1;
	case 2: return a2;
	case 3: return a3;
	case 4: return a4;
	default: return 0;
	}
}

/*
 * Start an automatic phase: runtime_init once, model_load unless the target
 * is already in the model_load phase this started, execute at the first
 * launch and at the first after each model_load.
 */
static __always_inline void auto_phase(struct memtrail_target *t, __u32 tgid, __u32 which)
{
	bool in_load = t->auto_phase == MEMTRAIL_AUTO_LOAD && t->auto_seq == t->phase;
	const char *name;
	__u32 old;

	old = mt_or(&t->device_flags, MEMTRAIL_DEV_INIT);
	switch (which) {
	case MEMTRAIL_AUTO_INIT:
		if (old & MEMTRAIL_DEV_INIT)
			return;
		name = phase_init;
		break;
	case MEMTRAIL_AUTO_LOAD:
		if (in_load)
			return;
		name = phase_load;
		break;
	default:
		old = mt_or(&t->device_flags, MEMTRAIL_DEV_EXECUTED);
		if ((old & MEMTRAIL_DEV_EXECUTED) && !in_load)
			return;
		name = phase_execute;
		break;
	}
	if (phase_switch(tgid, name)) {
		t->auto_phase = which;
		t->auto_seq = t->phase;
	}
}

/* The calling thread's device: set by cudaSetDevice or its current context. */
static __always_inline __s32 current_device(__u32 tid)
{
	__s32 *d = bpf_map_lookup_elem(&thread_device, &tid);

	return d ? *d : -1;
}

/*
 * An allocation or handle of MAP at KEY (its DEAD field) is gone: true for
 * the one caller that is to take its bytes off. While a device OOM listing
 * is pending it stays, dated (live at the failure user space is about to
 * list: an allocator may give back at once what it made for a request that
 * failed); else it is deleted, and of two racing frees the one that deletes
 * accounts.
 */
static __always_inline bool dev_gone(void *map, struct memtrail_dev_key *key, __u32 *dead)
{
	__u32 *pending = bpf_map_lookup_elem(&dev_snap, &key->tgid);

	if (pending)
		return !mt_cmpxchg(dead, 0, *pending);
	return !bpf_map_delete_elem(map, key);
}

static __always_inline void account_free(struct memtrail_target *t, __u32 tgid, __u64 addr)
{
	struct memtrail_dev_key key = { .tgid = tgid, .addr = addr };
	struct memtrail_dev_alloc *a = bpf_map_lookup_elem(&dev_allocs, &key);
	__u32 kind, phase;
	__u64 size;
	__s32 stack;

	if (!a || a->dead)
		return;
	size = a->size;
	kind = a->kind;
	phase = a->phase;
	stack = a->stack;
	if (!dev_gone(&dev_allocs, &key, &a->dead))
		return;
	account(t, tgid, kind, -(__s64)size);
	if (sites_device)
		site_add_at(tgid, phase, kind, stack, 0, -(__s64)size, MEMTRAIL_OBJ_ONE, false);
}

/*
 * A live allocation, and (device sites on) its site: the stack of the call
 * that made it, at its return. A runtime's call into its driver, both
 * probed, is seen twice, the inner call first: counted once, at the
 * outermost call's site (NESTED: this call is inside another probed one).
 */
static __always_inline void account_alloc(void *ctx, struct memtrail_target *t, __u32 tgid,
					  __u64 cookie, __u64 addr, __u64 size, __u32 kind,
					  __s32 device, bool nested)
{
	struct memtrail_dev_key key = { .tgid = tgid, .addr = addr };
	struct memtrail_dev_alloc a = {
		.size = size, .kind = kind, .device = device, .phase = t->phase,
		.name = MEMTRAIL_COOKIE_NAME(cookie), .born = t->dev_epoch,
		.stack = MEMTRAIL_STACK_NONE,
	};
	struct memtrail_dev_alloc *old;
	long err;

	if (!addr || !size)
		return;
	if (sites_device)
		a.stack = site_stack(ctx);
	err = bpf_map_update_elem(&dev_allocs, &key, &a, BPF_NOEXIST);
	if ((int)err == -17 /* EEXIST; int: older kernels give it zero-extended */) {
		old = bpf_map_lookup_elem(&dev_allocs, &key);
		if (!old)
			return;
		if (!old->dead) {
			/* the same allocation, seen by an outer or inner layer */
			if (sites_device && !nested && old->stack != a.stack &&
			    old->kind == kind && old->size == size) {
				site_unadd(tgid, old->phase, kind, old->stack, size);
				old->stack = a.stack;
				site_add_at(tgid, old->phase, kind, a.stack, 0, size,
					    MEMTRAIL_OBJ_ONE, true);
			}
			return;
		}
		/* the address of one freed since the failure: made anew */
		err = bpf_map_update_elem(&dev_allocs, &key, &a, BPF_EXIST);
	}
	if (err) {
		count_lost(MEMTRAIL_LOST_DEVICE);
		return;
	}
	t->dev_used = 1;
	account(t, tgid, kind, size);
	if (sites_device)
		site_add_at(tgid, a.phase, kind, a.stack, 0, size, MEMTRAIL_OBJ_ONE, true);
}

/* A handle loses one reference; its memory leaves with the last. */
static __always_inline void vmm_unref(struct memtrail_target *t, __u32 tgid, __u64 handle)
{
	struct memtrail_dev_key key = { .tgid = tgid, .addr = handle };
	struct memtrail_vmm_handle *h = bpf_map_lookup_elem(&vmm_handles, &key);
	__u64 size;
	__u32 kind;

	if (!h || h->dead)
		return;		/* imported, created before memtrail looked, or gone */
	if (mt_add_fetch(&h->refs, -1))
		return;
	size = h->size;
	kind = h->kind;
	if (dev_gone(&vmm_handles, &key, &h->dead))
		account(t, tgid, kind, -(__s64)size);
}

/* A live handle of TGID, or NULL. */
static __always_inline struct memtrail_vmm_handle *vmm_handle(__u32 tgid, __u64 handle)
{
	struct memtrail_dev_key key = { .tgid = tgid, .addr = handle };
	struct memtrail_vmm_handle *h = bpf_map_lookup_elem(&vmm_handles, &key);

	return h && !h->dead ? h : NULL;
}

static __always_inline void vmm_ref(__u32 tgid, __u64 handle)
{
	struct memtrail_vmm_handle *h = vmm_handle(tgid, handle);

	if (h)
		__sync_fetch_and_add(&h->refs, 1);
}

/* cuMemUnmap(va, size): every mapping inside the range goes. */
static __always_inline void vmm_unmap(struct memtrail_target *t, __u32 tgid, __u64 va, __u64 len)
{
	struct memtrail_dev_key key = { .tgid = tgid };
	struct vmm_mapping *m;
	__u64 end = va + len, handle, size;
	int i;

	for (i = 0; i < MT_UNMAP_SPAN && va < end; i++) {
		key.addr = va;
		m = bpf_map_lookup_elem(&vmm_maps, &key);
		if (!m)
			return;
		handle = m->handle;
		size = m->size;
		if (!bpf_map_delete_elem(&vmm_maps, &key))
			vmm_unref(t, tgid, handle);
		if (!size)
			return;
		va += size;
	}
}

/* What an entry does at once; true when the call needs its return seen. */
static __always_inline bool entry_action(struct pt_regs *ctx, struct memtrail_target *t,
					 __u64 id, __u64 cookie)
{
	__u32 tgid = id >> 32, tid = (__u32)id;
	__u64 v = 0;
	__s32 dev, *d;

	switch (MEMTRAIL_COOKIE_OP(cookie)) {
	case MEMTRAIL_OP_INIT:
		return false;
	case MEMTRAIL_OP_FREE:
		/* counted now: once it returns, the address may be another thread's new allocation */
		account_free(t, tgid, PT_REGS_PARM1(ctx));
		return true;	/* its failure is reported */
	case MEMTRAIL_OP_NRT_FREE:
		/* nrt_tensor_free(nrt_tensor_t **): NULL once it returns */
		if (!bpf_probe_read_user(&v, sizeof(v), (void *)PT_REGS_PARM1(ctx)))
			account_free(t, tgid, v);
		return false;
	case MEMTRAIL_OP_VMM_RELEASE:
		vmm_unref(t, tgid, PT_REGS_PARM1(ctx));
		return false;
	case MEMTRAIL_OP_VMM_UNMAP:
		vmm_unmap(t, tgid, PT_REGS_PARM1(ctx), PT_REGS_PARM2(ctx));
		return false;
	case MEMTRAIL_OP_LOAD:
		auto_phase(t, tgid, MEMTRAIL_AUTO_LOAD);
		return true;
	case MEMTRAIL_OP_LAUNCH:
		auto_phase(t, tgid, MEMTRAIL_AUTO_EXECUTE);
		return false;
	case MEMTRAIL_OP_SET_DEVICE:
		dev = (__s32)PT_REGS_PARM1(ctx);
		bpf_map_update_elem(&thread_device, &tid, &dev, BPF_ANY);
		return false;
	case MEMTRAIL_OP_CTX_SET: {
		struct memtrail_dev_key key = { .tgid = tgid, .addr = PT_REGS_PARM1(ctx) };

		d = bpf_map_lookup_elem(&ctx_device, &key);
		if (d) {
			dev = *d;
			bpf_map_update_elem(&thread_device, &tid, &dev, BPF_ANY);
		}
		return false;
	}
	default:
		return true;
	}
}

static __always_inline void push_frame(struct pt_regs *ctx, __u32 tid, __u64 cookie)
{
	struct dev_calls *c, fresh = {};
	__u64 sp = PT_REGS_SP(ctx);
	__u32 i;
	int n;

	c = map_get_or_init(&dev_calls, &tid, &fresh, MEMTRAIL_LOST_DEVICE);
	if (!c)
		return;
	/* frames at or below this one are stale: their returns were never seen */
	for (n = 0; n < MT_DEV_FRAMES && c->depth; n++) {
		i = (c->depth - 1) & (MT_DEV_FRAMES - 1);
		if (c->f[i].sp > sp)
			break;
		c->depth--;
	}
	if (c->depth >= MT_DEV_FRAMES)
		return;
	i = c->depth & (MT_DEV_FRAMES - 1);
	c->f[i].sp = sp;
	c->f[i].cookie = cookie;
	c->f[i].arg[0] = PT_REGS_PARM1(ctx);
	c->f[i].arg[1] = PT_REGS_PARM2(ctx);
	c->f[i].arg[2] = PT_REGS_PARM3(ctx);
	c->f[i].arg[3] = arg_n(ctx, MEMTRAIL_COOKIE_ARG(cookie));
	c->depth++;
}

static __always_inline int dev_entry(struct pt_regs *ctx, __u64 cookie)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct memtrail_target *t = live_target(tgid);

	if (!t)
		return 0;
	if (MEMTRAIL_COOKIE_OP(cookie) == MEMTRAIL_OP_LIBS) {
		lib_event(t, tgid);
		return 0;
	}
	if (!(t->device_flags & MEMTRAIL_DEV_INIT))
		auto_phase(t, tgid, MEMTRAIL_AUTO_INIT);
	if (entry_action(ctx, t, id, cookie))
		push_frame(ctx, (__u32)id, cookie);
	return 0;
}

#define MT_VM_EXEC 0x4

/* Where the kernel has BPF LSM (CONFIG_BPF_LSM, "bpf" in lsm=): allows every mapping, as before */
SEC("lsm/mmap_file")
int BPF_PROG(mt_lib_map_lsm, struct file *file, unsigned long reqprot, unsigned long prot,
	     unsigned long flags, int ret)
{
	lib_mapped(file, prot);
	return ret;
}

/* Elsewhere, the same hook by fentry (needs the function tracer) */
SEC("fentry/security_mmap_file")
int BPF_PROG(mt_lib_map, struct file *file, unsigned long prot, unsigned long flags)
{
	lib_mapped(file, prot);
	return 0;
}

#ifndef MEMTRAIL_COMPAT
static long frame_vma(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct memtrail_frame_file *f = data;
	struct file *file = vma->vm_file;
	struct inode *inode;

	/* a frame outside code (a frame pointer walk gone astray) is named by nothing */
	if (!file || !(vma->vm_flags & MT_VM_EXEC))
		return 0;
	inode = BPF_CORE_READ(file, f_inode);
	/* vm_pgoff counts pages */
	f->off = f->off - BPF_CORE_READ(vma, vm_start) + (BPF_CORE_READ(vma, vm_pgoff) << page_shift);
	f->ino = BPF_CORE_READ(inode, i_ino);
	f->dev = BPF_CORE_READ(inode, i_sb, s_dev);
	bpf_probe_read_kernel_str(f->name, sizeof(f->name),
				  BPF_CORE_READ(file, f_path.dentry, d_name.name));
	return 0;
}

#endif /* !MEMTRAIL_COMPAT */

/* The files of the first frames: the process may be gone before user space reads its maps. */
static __always_inline void frame_files(struct memtrail_event_device *e)
{
#ifdef MEMTRAIL_COMPAT
	/* kernels before 5.13 know no callbacks, let alone bpf_find_vma (5.17) */
	(void)e;
#else
	struct task_struct *task = bpf_get_current_task_btf();
	struct memtrail_frame_file f;
	__u32 i;

	if (!has_find_vma)
		return;	/* before 5.17: user space reads the maps while the process lives */
	for (i = 0; i < MEMTRAIL_FRAME_FILES; i++) {
		if (i >= e->n_frames)
			break;
		__builtin_memset(&f, 0, sizeof(f));
		f.off = e->frames[i];	/* the address in, the offset in the file out */
		if (bpf_find_vma(task, e->frames[i], frame_vma, &f, 0) || !f.ino)
			f.off = 0;
		e->files[i] = f;
	}
#endif
}

static __always_inline void send_failure(struct pt_regs *ctx, struct memtrail_target *t,
					 __u32 tgid, __u64 cookie, __s32 rc, __u64 size,
					 __u32 kind, __s32 device)
{
	struct memtrail_event_device *e;
	long n;

	e = event_reserve(sizeof(*e), MEMTRAIL_EV_DEVICE_FAIL, tgid);
	if (!e)
		return;
	e->name = MEMTRAIL_COOKIE_NAME(cookie);
	e->runtime = MEMTRAIL_COOKIE_RT(cookie);
	e->rc = rc;
	e->device = device;
	e->size = size;
	e->kind = kind;
	e->phase = t->phase;
	e->epoch = 0;
	if (rc == (MEMTRAIL_COOKIE_RT(cookie) == MEMTRAIL_RT_NEURON ? MEMTRAIL_NRT_OOM
								   : MEMTRAIL_CUDA_OOM)) {
		/* what is live now stays listable until user space has read it */
		__u32 epoch = mt_add_fetch(&t->dev_epoch, 1);

		/* through the stack: before 6.2 ring-buffer memory is no map value */
		e->epoch = epoch;
		bpf_map_update_elem(&dev_snap, &tgid, &epoch, BPF_ANY);
	}
	/* at a return the registers are the caller's: the call site comes first */
	n = bpf_get_stack(ctx, e->frames, sizeof(e->frames), BPF_F_USER_STACK);
	e->n_frames = n > 0 ? n / sizeof(__u64) : 0;
	frame_files(e);
	event_submit(e, true);
}

/* A device's size, told to the target: to user space when it is new or changed. */
static __always_inline void send_total(struct memtrail_target *t, __u32 tgid, __u32 kind,
				       __s32 device, __u64 bytes)
{
	struct dev_total_key key = { .tgid = tgid, .kind = kind, .device = device };
	struct dev_total now = { .bytes = bytes, .mm = t->mm }, *last;
	struct memtrail_event_device_total *e;

	last = bpf_map_lookup_elem(&dev_totals, &key);
	if (!bytes || (last && last->bytes == bytes && last->mm == now.mm))
		return;
	bpf_map_update_elem(&dev_totals, &key, &now, BPF_ANY);
	e = event_reserve(sizeof(*e), MEMTRAIL_EV_DEVICE_TOTAL, tgid);
	if (!e)
		return;
	e->kind = kind;
	e->device = device;
	e->bytes = bytes;
	event_submit(e, false);
}

/* What the call did, now that it returned RC. */
static __always_inline void return_action(struct pt_regs *ctx, struct memtrail_target *t,
					  __u64 id, const struct dev_frame *f, __s32 rc,
					  bool nested)
{
	__u32 tgid = id >> 32, tid = (__u32)id;
	__u64 cookie = f->cookie, out = 0, size = f->arg[1], pitch = 0;
	__u32 op = MEMTRAIL_COOKIE_OP(cookie), kind = MEMTRAIL_COOKIE_KIND(cookie);
	__s32 device = current_device(tid), prop[2] = {};

	switch (op) {
	case MEMTRAIL_OP_ALLOC_PITCH:
		/* rows of *pitch bytes, as the driver rounded them */
		if (!rc && !bpf_probe_read_user(&pitch, sizeof(pitch), (void *)f->arg[1]))
			size = pitch * f->arg[3];
		else
			size = f->arg[2] * f->arg[3];
		break;
	case MEMTRAIL_OP_NRT_ALLOC:
		/* placement 0 is device memory; host (1) and virtual (2) are host */
		kind = f->arg[0] ? MEMTRAIL_KIND_NEURON_HOST : MEMTRAIL_KIND_NEURON_DEVICE;
		device = (__s32)f->arg[1];
		size = f->arg[2];
		break;
	case MEMTRAIL_OP_VMM_CREATE:
		/* prop->location {type, id} at offset 8: type 1 is a device */
		if (!bpf_probe_read_user(prop, sizeof(prop), (void *)(f->arg[2] + 8))) {
			device = prop[1];
			if (prop[0] != 1)
				kind = MEMTRAIL_KIND_CUDA_HOST;
		}
		break;
	case MEMTRAIL_OP_DEV_TOTAL:
		device = (__s32)f->arg[1];
		size = 0;
		break;
	case MEMTRAIL_OP_NRT_MEM_STATS:
		device = (__s32)f->arg[0];
		size = 0;
		break;
	case MEMTRAIL_OP_FREE:
	case MEMTRAIL_OP_LOAD:
	case MEMTRAIL_OP_VMM_MAP:
	case MEMTRAIL_OP_VMM_RETAIN:
	case MEMTRAIL_OP_CTX:
	case MEMTRAIL_OP_MEM_INFO:
		size = 0;
		break;
	}

	if (rc) {
		/* the outermost probed call reports; an inner one's failure is its too */
		if (!nested)
			send_failure(ctx, t, tgid, cookie, rc, size, kind, device);
		return;
	}
	switch (op) {
	case MEMTRAIL_OP_ALLOC:
	case MEMTRAIL_OP_ALLOC_PITCH:
		if (!bpf_probe_read_user(&out, sizeof(out), (void *)f->arg[0]))
			account_alloc(ctx, t, tgid, cookie, out, size, kind, device, nested);
		break;
	case MEMTRAIL_OP_NRT_ALLOC:
		if (!bpf_probe_read_user(&out, sizeof(out), (void *)f->arg[3]))
			account_alloc(ctx, t, tgid, cookie, out, size, kind, device, nested);
		break;
	case MEMTRAIL_OP_VMM_CREATE: {
		struct memtrail_vmm_handle h = {
			.size = size, .kind = kind, .device = device, .phase = t->phase, .refs = 1,
			.born = t->dev_epoch,
		};
		struct memtrail_dev_key key = { .tgid = tgid };
		long err;

		if (bpf_probe_read_user(&key.addr, sizeof(key.addr), (void *)f->arg[0]) || !size)
			break;
		err = bpf_map_update_elem(&vmm_handles, &key, &h, BPF_NOEXIST);
		/* the value of a handle released since a failure, kept for its listing: made anew */
		if ((int)err == -17 /* EEXIST */ && !vmm_handle(tgid, key.addr))
			err = bpf_map_update_elem(&vmm_handles, &key, &h, BPF_EXIST);
		if (err) {
			count_lost(MEMTRAIL_LOST_DEVICE);
		} else {
			t->dev_used = 1;
			account(t, tgid, kind, size);
		}
		break;
	}
	case MEMTRAIL_OP_VMM_MAP: {
		/* cuMemMap(va, size, offset, handle, flags): arg[3] holds the handle */
		struct memtrail_dev_key key = { .tgid = tgid, .addr = f->arg[0] };
		struct vmm_mapping m = { .handle = f->arg[3], .size = f->arg[1] };

		if (!vmm_handle(tgid, m.handle))
			break;
		if (!bpf_map_update_elem(&vmm_maps, &key, &m, BPF_NOEXIST))
			vmm_ref(tgid, m.handle);
		else
			count_lost(MEMTRAIL_LOST_DEVICE);
		break;
	}
	case MEMTRAIL_OP_VMM_RETAIN:
		if (!bpf_probe_read_user(&out, sizeof(out), (void *)f->arg[0]))
			vmm_ref(tgid, out);
		break;
	case MEMTRAIL_OP_MEM_INFO:		/* (size_t *free, size_t *total) */
		if (!bpf_probe_read_user(&out, sizeof(out), (void *)f->arg[1]))
			send_total(t, tgid, kind, device, out);
		break;
	case MEMTRAIL_OP_DEV_TOTAL:		/* (size_t *bytes, CUdevice) */
		if (!bpf_probe_read_user(&out, sizeof(out), (void *)f->arg[0]))
			send_total(t, tgid, kind, device, out);
		break;
	case MEMTRAIL_OP_NRT_MEM_STATS:		/* (vnc, {bytes_used, bytes_limit} *, ...) */
		if (!bpf_probe_read_user(&out, sizeof(out), (void *)(f->arg[1] + 8)))
			send_total(t, tgid, kind, device, out);
		break;
	case MEMTRAIL_OP_CTX: {
		/* (CUcontext *out, ..., CUdevice in argument ARG) */
		struct memtrail_dev_key key = { .tgid = tgid };
		__s32 dev = (__s32)f->arg[3];

		if (bpf_probe_read_user(&key.addr, sizeof(key.addr), (void *)f->arg[0]))
			break;
		bpf_map_update_elem(&ctx_device, &key, &dev, BPF_ANY);
		/* a context created by cuCtxCreate is current in its thread */
		bpf_map_update_elem(&thread_device, &tid, &dev, BPF_ANY);
		break;
	}
	}
}

static __always_inline int dev_return(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, i;
	__u64 sp = PT_REGS_SP(ctx) - MT_RET_SP_ADJ;
	struct memtrail_target *t;
	struct dev_calls *c;
	int n;

	c = bpf_map_lookup_elem(&dev_calls, &tid);
	if (!c || !c->depth)
		return 0;
	/* frames deeper than this call's returned unseen */
	for (n = 0; n < MT_DEV_FRAMES && c->depth; n++) {
		i = (c->depth - 1) & (MT_DEV_FRAMES - 1);
		if (c->f[i].sp >= sp)
			break;
		c->depth--;
	}
	if (!c->depth)
		return 0;
	i = (c->depth - 1) & (MT_DEV_FRAMES - 1);
	if (c->f[i].sp != sp)
		return 0;
	c->depth--;
	t = live_target(id >> 32);
	if (!t)
		return 0;
	/* the popped frame stays intact: only this thread pushes frames here */
	return_action(ctx, t, id, &c->f[i], (__s32)PT_REGS_RC(ctx), c->depth > 0);
	return 0;
}

/*
 * Each body twice: attached one link per function (perf-event uprobes, any
 * kernel), or one uprobe_multi link per file and direction (Linux 6.6: one
 * grace period to remove them all, not one per function).
 */
SEC("uprobe")
int mt_dev_entry(struct pt_regs *ctx)
{
	return dev_entry(ctx, bpf_get_attach_cookie(ctx));
}

SEC("uretprobe")
int mt_dev_return(struct pt_regs *ctx)
{
	return dev_return(ctx);
}

SEC("uprobe")
int mt_dev_entry_multi(struct pt_regs *ctx)
{
	return dev_entry(ctx, bpf_get_attach_cookie(ctx));
}

/*
 * Kernels without bpf_cookie (before 5.15): an entry program per function of
 * user space's table, its cookie in rodata (the return reads it from the
 * frame its entry pushed). The body is one subprogram: the copies are small.
 */
const volatile __u64 dev_cookie[MEMTRAIL_DEV_SPECS];

static __noinline int dev_entry_of(struct pt_regs *ctx, __u64 cookie)
{
	return dev_entry(ctx, cookie);
}

#define MT_DEV_COPY(n)					\
	SEC("uprobe")					\
	int mt_dev_entry_##n(struct pt_regs *ctx)	\
	{						\
		return dev_entry_of(ctx, dev_cookie[n]);\
	}
#define MT_DEV_COPY10(d)						\
	MT_DEV_COPY(d##0) MT_DEV_COPY(d##1) MT_DEV_COPY(d##2) MT_DEV_COPY(d##3)	\
	MT_DEV_COPY(d##4) MT_DEV_COPY(d##5) MT_DEV_COPY(d##6) MT_DEV_COPY(d##7)	\
	MT_DEV_COPY(d##8) MT_DEV_COPY(d##9)
MT_DEV_COPY(0) MT_DEV_COPY(1) MT_DEV_COPY(2) MT_DEV_COPY(3) MT_DEV_COPY(4)
MT_DEV_COPY(5) MT_DEV_COPY(6) MT_DEV_COPY(7) MT_DEV_COPY(8) MT_DEV_COPY(9)
MT_DEV_COPY10(1) MT_DEV_COPY10(2) MT_DEV_COPY10(3) MT_DEV_COPY10(4) MT_DEV_COPY10(5)
MT_DEV_COPY10(6) MT_DEV_COPY(70) MT_DEV_COPY(71)
_Static_assert(MEMTRAIL_DEV_SPECS == 72, "a copy per device function");

SEC("uretprobe")
int mt_dev_return_multi(struct pt_regs *ctx)
{
	return dev_return(ctx);
}

/* ---- exec: the old program's device memory goes with its address space ---- */

struct exec_forget {
	__u32 tgid;
	__u32 pad;
	__s64 bytes[MEMTRAIL_KIND_MAX];	/* live device bytes per kind, given back */
};

static long forget_alloc(struct bpf_map *map, struct memtrail_dev_key *key,
			 struct memtrail_dev_alloc *a, struct exec_forget *c)
{
	__u32 kind = a->kind;

	if (key->tgid != c->tgid)
		return 0;
	if (!a->dead && kind < MEMTRAIL_KIND_MAX) {
		c->bytes[kind] += a->size;
		if (sites_device)
			site_add_at(c->tgid, a->phase, kind, a->stack, 0, -(__s64)a->size,
				    MEMTRAIL_OBJ_ONE, false);
	}
	bpf_map_delete_elem(map, key);
	return 0;
}

static long forget_handle(struct bpf_map *map, struct memtrail_dev_key *key,
			  struct memtrail_vmm_handle *h, struct exec_forget *c)
{
	__u32 kind = h->kind;

	if (key->tgid != c->tgid)
		return 0;
	if (!h->dead && kind < MEMTRAIL_KIND_MAX)
		c->bytes[kind] += h->size;
	bpf_map_delete_elem(map, key);
	return 0;
}

static long forget_key(struct bpf_map *map, struct memtrail_dev_key *key, void *v,
		       struct exec_forget *c)
{
	if (key->tgid == c->tgid)
		bpf_map_delete_elem(map, key);
	return 0;
}

/*
 * A target that made device allocations calls exec: the driver lets go of
 * its memory with the old address space (its contexts die with it), so the
 * bytes still live leave its levels, in the new program's first phase, as
 * its host kinds do: mt_exec, attached first (tracer.c attaches this one
 * after it), has switched the phase by then.
 */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(mt_dev_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct exec_forget c = { .tgid = BPF_CORE_READ(p, tgid) };
	struct memtrail_target *t = live_target(c.tgid);
	int k;

	if (!t || !t->dev_used)
		return 0;
	t->dev_used = 0;
	bpf_for_each_map_elem(&dev_allocs, forget_alloc, &c, 0);
	bpf_for_each_map_elem(&vmm_handles, forget_handle, &c, 0);
	bpf_for_each_map_elem(&vmm_maps, forget_key, &c, 0);
	bpf_for_each_map_elem(&ctx_device, forget_key, &c, 0);
	bpf_map_delete_elem(&dev_snap, &c.tgid);
	for (k = 0; k < MEMTRAIL_KIND_MAX; k++)
		account(t, c.tgid, k, -c.bytes[k]);
	return 0;
}
