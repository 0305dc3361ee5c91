// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Heap and fault sites. Two programs serve every function of the malloc
 * family (glibc, jemalloc, tcmalloc, mimalloc, C++ operators in allocator
 * libraries); the uprobe cookie says which arguments mean what. Links are
 * per target process, so processes that are not targets never trap.
 *
 * Allocators call each other (realloc jumps to malloc, mimalloc's wrappers
 * call mi_*, operator new may call malloc): a per-thread depth counter lets
 * only the outermost call count. Sampling is byte-weighted and decided
 * here: an allocation of SIZE below the rate R is kept with probability
 * SIZE/R and then stands for R bytes, so every estimate is unbiased.
 */
#include "memtrail.bpf.h"

const volatile __u32 sites_mapping = 1;
/* device sites: each live device allocation keeps the stack of the call that made it */
const volatile __u32 sites_device = 0;
/* mapping sites: each section that grows mapped memory is a deep sample (needs task regs) */
const volatile __u32 map_deep = 0;
/* mapping sites: only sections that grow it by this many bytes or more are deep */
const volatile __u64 map_deep_min = 0;
/* mapping sites: a process's sections have stacks once its mapped memory reaches this */
const volatile __u64 sites_from = 0;
/* deep samples: taken only while the ring buffer holds at most this many unread bytes */
const volatile __u64 deep_room = 0;
/* heap: keep every live allocation (exact heap levels and in-use figures) */
const volatile __u32 heap_track = 1;
/* heap: sampling rate in bytes, 0: every allocation has its stack taken */
const volatile __u64 heap_sample = 0;
/* heap: an overhead budget's windows, watched per hit (else one lookup a hit saved) */
const volatile __u32 heap_budget = 0;
/* heap: sampled allocations are deep samples, unwound in user space (--unwind dwarf) */
const volatile __u32 heap_deep = 0;
/* faults: one user fault in this many has its stack taken */
const volatile __u32 fault_sample = 1;

/* Live heap allocations by (tgid, address); no prealloc. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 20);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct memtrail_addr_key);
	__type(value, struct memtrail_heap_alloc);
} heap_allocs SEC(".maps");

/* The outermost allocator call in progress per thread. */
struct heap_call {
	__u32 depth;
	__u32 op;
	__u64 sp;	/* at the outermost entry: a deeper one is nested */
	__u64 arg[3];
};

#ifdef MEMTRAIL_COMPAT
/* kernels before 5.11 have no task storage: by thread id, the oldest dropped when full */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct heap_call);
} heap_calls SEC(".maps");

static const struct heap_call zero_call;

static __always_inline struct heap_call *heap_call_get(bool create)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	if (create)
		return map_get_or_init(&heap_calls, &tid, &zero_call, MEMTRAIL_LOST_HEAP);
	return bpf_map_lookup_elem(&heap_calls, &tid);
}
#else
struct {
	__uint(type, MT_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct heap_call);
} heap_calls SEC(".maps");

static __always_inline struct heap_call *heap_call_get(bool create)
{
	return bpf_task_storage_get(&heap_calls, bpf_get_current_task_btf(), 0,
				    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}
#endif

/* Faults until the next one sampled, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} fault_countdown SEC(".maps");

/* The hit that spends a target's budget for this cycle: user space is told. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u64);
} heap_allow SEC(".maps");

/* Count a probe hit; tell user space once the hit that spends the budget comes. */
static __always_inline void heap_hit(struct memtrail_target *t, __u32 tgid)
{
	struct memtrail_event_heap_budget *e;
	__u64 n, *allow;

	n = mt_add_fetch(&t->heap_hits, 1);
	if (!heap_budget)
		return;
	allow = bpf_map_lookup_elem(&heap_allow, &tgid);
	if (!allow || n != *allow)
		return;
	e = event_reserve(sizeof(*e), MEMTRAIL_EV_HEAP_BUDGET, tgid);
	if (e) {
		e->hits = n;
		event_submit(e, true);
	}
}

/*
 * A sampled allocation A at KEY as a deep sample: reserved before the
 * allocation is kept, so that the record of its free, reserved later, is
 * read after it. False when the ring buffer has no room for it (counted):
 * it gets the frame-pointer stack instead. Every use of the record is
 * inside one test of it, as 5.10's verifier follows a reference no further.
 */
static __always_inline bool heap_alloc_deep(void *ctx, struct memtrail_target *t, __u32 tgid,
					    const struct memtrail_addr_key *key,
					    struct memtrail_heap_alloc *a)
{
	struct memtrail_event_deep *e = deep_reserve();

	if (!e)
		return false;
	deep_head(e, tgid, MEMTRAIL_KIND_HEAP, a->phase, a->objects, key->addr, a->weight);
	e->tracked = heap_track;
	e->fp_stack = MEMTRAIL_STACK_NONE;
	e->fp_caller = 0;
	deep_fill(e, ctx);
	deep_uret(e);
	py_walk(e, tgid);
	a->stack = MEMTRAIL_STACK_DEEP;
	if (heap_track) {
		if (bpf_map_update_elem(&heap_allocs, key, a, BPF_ANY)) {
			bpf_ringbuf_discard(e, BPF_RB_NO_WAKEUP);
			count_lost(MEMTRAIL_LOST_HEAP);
			return true;
		}
		account(t, tgid, MEMTRAIL_KIND_HEAP, a->size);
	}
	/*
	 * User space reads what names a deep sample from the process (its
	 * mappings, its Python code objects): at once, before it can end, so
	 * each sample wakes it (bounded by the sampling rate)
	 */
	event_submit(e, true);
	return true;
}

static __always_inline void heap_alloc(void *ctx, struct memtrail_target *t, __u32 tgid,
				       __u64 ptr, __u64 size)
{
	struct memtrail_addr_key key = { .tgid = tgid, .addr = ptr };
	struct memtrail_heap_alloc a = { .size = size, .phase = t->phase,
					 .stack = MEMTRAIL_STACK_NONE };
	bool sampled = false;

	if (!ptr)
		return;
	if (!heap_sample || size >= heap_sample) {
		sampled = true;
		a.weight = size;
		a.objects = MEMTRAIL_OBJ_ONE;
	} else if (bpf_get_prandom_u32() % heap_sample < size) {
		sampled = true;
		a.weight = heap_sample;
		a.objects = size ? MEMTRAIL_OBJ_ONE * heap_sample / size : MEMTRAIL_OBJ_ONE;
	}
	if (sampled && heap_deep && !(MT_READ(t->flags) & MEMTRAIL_TARGET_CALIBRATION) &&
	    heap_alloc_deep(ctx, t, tgid, &key, &a))
		return;
	if (sampled)
		a.stack = site_stack(ctx);
	if (heap_track) {
		if (bpf_map_update_elem(&heap_allocs, &key, &a, BPF_ANY)) {
			count_lost(MEMTRAIL_LOST_HEAP);
			return;
		}
		account(t, tgid, MEMTRAIL_KIND_HEAP, size);
	}
	if (sampled)
		site_add(tgid, a.phase, MEMTRAIL_KIND_HEAP, a.stack, a.weight, a.objects, true);
}

static __always_inline void heap_free(struct memtrail_target *t, __u32 tgid, __u64 ptr)
{
	struct memtrail_addr_key key = { .tgid = tgid, .addr = ptr };
	struct memtrail_heap_alloc *found, a;

	if (!ptr || !heap_track)
		return;
	found = bpf_map_lookup_elem(&heap_allocs, &key);
	if (!found)
		return;
	a = *found;
	/* two threads freeing one pointer (a double free): the one that deletes counts */
	if (bpf_map_delete_elem(&heap_allocs, &key))
		return;
	account(t, tgid, MEMTRAIL_KIND_HEAP, -(__s64)a.size);
	if (a.stack == MEMTRAIL_STACK_DEEP) {
		struct memtrail_event_deep_free *e;

		e = event_reserve(sizeof(*e), MEMTRAIL_EV_DEEP_FREE, tgid);
		if (e) {
			e->addr = ptr;
			e->kind = MEMTRAIL_KIND_HEAP;
			e->bytes = 0;
			e->rest = 0;
			event_submit(e, false);
		}
	} else if (a.weight) {
		site_add(tgid, a.phase, MEMTRAIL_KIND_HEAP, a.stack, -(__s64)a.weight, a.objects,
			 false);
	}
}

static __always_inline int heap_entry(struct pt_regs *ctx, __u32 op)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct memtrail_target *t = live_target(tgid);
	struct heap_call *c;
	__u64 sp = PT_REGS_SP(ctx);

	if (!t)
		return 0;
	heap_hit(t, tgid);
	c = heap_call_get(false);
	/* a frame deeper than the outermost call's is nested in it; one above it is stale */
	if (c && c->depth && sp >= c->sp)
		c->depth = 0;
	if (op == MEMTRAIL_HEAP_FREE) {
		if (!c || !c->depth)
			heap_free(t, tgid, PT_REGS_PARM1(ctx));
		return 0;
	}
	if (!c) {
		c = heap_call_get(true);
		if (!c)
			return 0;
	}
	if (c->depth++)
		return 0;
	c->op = op;
	c->sp = sp;
	c->arg[0] = PT_REGS_PARM1(ctx);
	c->arg[1] = PT_REGS_PARM2(ctx);
	c->arg[2] = PT_REGS_PARM3(ctx);
	return 0;
}

SEC("uprobe")
int mt_heap_entry(struct pt_regs *ctx)
{
	return heap_entry(ctx, MEMTRAIL_COOKIE_OP(bpf_get_attach_cookie(ctx)));
}

/* Kernels without bpf_cookie (before 5.15): an entry program per operation. */
#define MT_HEAP_ENTRY(op)					\
	SEC("uprobe")						\
	int mt_heap_entry_##op(struct pt_regs *ctx)		\
	{							\
		return heap_entry(ctx, op);			\
	}
MT_HEAP_ENTRY(1)
MT_HEAP_ENTRY(2)
MT_HEAP_ENTRY(3)
MT_HEAP_ENTRY(4)
MT_HEAP_ENTRY(5)
MT_HEAP_ENTRY(6)
MT_HEAP_ENTRY(7)

SEC("uretprobe")
int mt_heap_return(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), rc = PT_REGS_RC(ctx), ptr = 0;
	__u32 tgid = id >> 32;
	struct memtrail_target *t = live_target(tgid);
	struct heap_call *c;
	__u64 old = 0, size = 0;

	if (!t)
		return 0;
	heap_hit(t, tgid);
	c = heap_call_get(false);
	if (!c || !c->depth || --c->depth)
		return 0;
	switch (c->op) {
	case MEMTRAIL_HEAP_MALLOC:
		ptr = rc;
		size = c->arg[0];
		break;
	case MEMTRAIL_HEAP_CALLOC:
		ptr = rc;
		size = c->arg[0] * c->arg[1];
		break;
	case MEMTRAIL_HEAP_MEMALIGN:
		ptr = rc;
		size = c->arg[1];
		break;
	case MEMTRAIL_HEAP_POSIX_MEMALIGN:
		if ((int)rc != 0 || bpf_probe_read_user(&ptr, sizeof(ptr), (void *)c->arg[0]))
			return 0;
		size = c->arg[2];
		break;
	case MEMTRAIL_HEAP_REALLOC:
	case MEMTRAIL_HEAP_REALLOCARRAY:
		old = c->arg[0];
		size = c->op == MEMTRAIL_HEAP_REALLOC ? c->arg[1] : c->arg[1] * c->arg[2];
		ptr = rc;
		/* moved or shrunk to nothing: the old block is gone; failed: it stays */
		if (old && (rc || !size))
			heap_free(t, tgid, old);
		break;
	default:
		return 0;
	}
	heap_alloc(ctx, t, tgid, ptr, size);
	return 0;
}

/* Fault sites: which code made resident memory grow, one fault in fault_sample. */
SEC("tp_btf/page_fault_user")
int BPF_PROG(mt_fault, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, zero = 0;
	struct memtrail_target *t = live_target(tgid);
	__u32 *left;

	if (!t)
		return 0;
	left = bpf_map_lookup_elem(&fault_countdown, &zero);
	if (!left)
		return 0;
	if (*left > 1) {
		*left -= 1;
		return 0;
	}
	*left = fault_sample;
	site_add_at(tgid, t->phase, MEMTRAIL_SITE_FAULTS, site_stack(ctx), leaf_caller(),
		    (__s64)fault_sample << page_shift,
		    (__u64)fault_sample * MEMTRAIL_OBJ_ONE, true);
	return 0;
}
