/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * BPF-only shared state and helpers: the maps every source writes, the
 * filter that decides who is a target, and account(), the one accounting
 * path every source ends in. Maps are __weak so that each object linked into
 * the skeleton may include this header; the linker keeps one copy.
 */
#ifndef MEMTRAIL_BPF_H
#define MEMTRAIL_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "memtrail.h"

#define MT_PF_KTHREAD		0x00200000	/* include/linux/sched.h */
#define MT_PF_EXITING		0x00000004	/* include/linux/sched.h: in do_exit */
#define MT_SIGNAL_GROUP_EXIT	0x00000004	/* include/linux/sched/signal.h */
#define MT_PEAK_CAS_TRIES	64

/*
 * Atomic operations. The object built with MEMTRAIL_COMPAT is the one for
 * kernels without BPF atomic fetch operations (before 5.12: Debian 11's
 * 5.10), which have only a plain atomic add (the old XADD: the result of
 * __sync_fetch_and_add unused). There a read-modify-write is two steps, and
 * what that costs is said where each is used.
 */
#define MT_READ(x) (*(volatile typeof(x) *)&(x))
#ifdef MEMTRAIL_COMPAT
#define mt_add_fetch(p, v) ({ __sync_fetch_and_add((p), (v)); MT_READ(*(p)); })
#define mt_cmpxchg(p, o, n) ({ typeof(*(p)) __c = MT_READ(*(p)); if (__c == (o)) *(p) = (n); __c; })
#define mt_xchg(p, v) ({ typeof(*(p)) __c = MT_READ(*(p)); *(p) = (v); __c; })
#define mt_or(p, v) ({ typeof(*(p)) __c = MT_READ(*(p)); *(p) = __c | (v); __c; })
#define mt_and(p, v) ({ typeof(*(p)) __c = MT_READ(*(p)); *(p) = __c & (v); __c; })
/* no bpf_get_current_task_btf (5.11): a plain pointer, read with BPF_CORE_READ */
#define mt_current_task() ((struct task_struct *)bpf_get_current_task())
#else
#define mt_add_fetch(p, v) __sync_add_and_fetch((p), (v))
#define mt_cmpxchg(p, o, n) __sync_val_compare_and_swap((p), (o), (n))
#define mt_xchg(p, v) __sync_lock_test_and_set((p), (v))
#define mt_or(p, v) __sync_fetch_and_or((p), (v))
#define mt_and(p, v) __sync_fetch_and_and((p), (v))
#define mt_current_task() bpf_get_current_task_btf()
#endif

/* Read-only configuration, set by user space before load (lifecycle.bpf.c). */
extern const volatile __u32 filter_mode;
extern const volatile char filter_comm[MEMTRAIL_COMM_LEN];
extern const volatile __s32 filter_cgroup_subsys;	/* -1: cgroup v2 */
extern const volatile __u32 self_tgid;
extern const volatile __u32 nr_cpus;
/* bpf_task_pt_regs (5.15), bpf_find_vma (5.17): code that calls them is dead to the verifier without */
extern const volatile __u32 has_task_regs;
extern const volatile __u32 has_find_vma;
/* by number: headers of a 5.10 build kernel do not name it (5.11), CO-RE objects use it from 5.11 */
#define MT_MAP_TYPE_TASK_STORAGE 29
extern const volatile __u32 has_scopes;	/* --scope rules: scope_stacks in use */
/* Allocation sites (sites.bpf.c) */
extern const volatile __u32 sites_mapping;	/* mapping sites on */
/* files mapped executable are tracked: one new to user space is told at once */
extern const volatile __u32 track_libs;
/* sites' stacks are named, BPF does not tell maps: user space reads them once code is mapped */
extern const volatile __u32 libs_urgent;
/* BPF tells a target's code mappings after it maps code (maps.bpf.c): marked here */
extern const volatile __u32 maps_tell_on;
/* files mapped are seen in the mmap lock's sections (mm.bpf.c) */
extern const volatile __u32 lib_map_lock;
/* user space's samples so far (0: it reads every target's levels, none is named in dirty) */
extern volatile __u32 sample_gen;
/* set when a target could not be named in dirty: user space's next sample reads every one */
extern volatile __u32 dirty_full;

/* Traced processes by tgid; sized from user space. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct memtrail_target);
} targets SEC(".maps") __weak;

/*
 * Per (target, phase): every kind's level; sized from user space. A phase's
 * cell lives until user space reads its end, so a program switching phases
 * fast has many at once: no prealloc, memory follows use.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct memtrail_cell_key);
	__type(value, struct memtrail_cell);
} cells SEC(".maps") __weak;

/*
 * The targets whose levels changed since user space's last sample, by tgid
 * (mark_dirty): an idle target costs a sample nothing. Sized from user space.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, __u32);
} dirty SEC(".maps") __weak;

/* Per address space of a target: last absolute counter values. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct memtrail_mm_state);
} mm_state SEC(".maps") __weak;

/*
 * Each CPU's part of an mm's rss counters as last accounted (pages), by mm
 * (percpu_counter kernels, 6.2 on): an rss_stat event reads only its own
 * CPU's part. Deleted with the mm's mm_state entry.
 */
struct rss_local {
	__s32 v[4];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct rss_local);
} rss_local SEC(".maps") __weak;

/* Discrete events for user space (struct memtrail_event_*). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps") __weak;

/* Drop counters, indexed by enum memtrail_lost. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MEMTRAIL_LOST_MAX);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps") __weak;

/*
 * A one-slot per-cpu array whose copies reveal each CPU's per-cpu offset
 * (see cpu_offset()); the offsets are cached in cpu_offsets.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} percpu_probe SEC(".maps") __weak;

/* Per-cpu offset by CPU number, 0 until computed. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MEMTRAIL_CPUS_MAX);
	__type(key, __u32);
	__type(value, __u64);
} cpu_offsets SEC(".maps") __weak;

/*
 * User stacks of allocation sites. Exact: a stack is keyed by all its
 * frames, so two stacks never share a slot, and one is lost only when the
 * table is full (the kernel's stack map keys by a hash and drops a stack
 * whose bucket another holds: thousands lost well before it is full).
 * Stack -> id here, id -> stack in site_stacks (read by user space); sized
 * from user space, no prealloc: memory follows the stacks seen.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct memtrail_stack);
	__type(value, __s32);
} stack_ids SEC(".maps") __weak;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __s32);
	__type(value, struct memtrail_stack);
} site_stacks SEC(".maps") __weak;

/*
 * Per CPU: how many stack ids this CPU gave out. Ids are given * nr_cpus +
 * cpu: unique without an atomic fetch (5.10 has none). Programs may be
 * preempted (uprobes from 6.1 run with migration, not preemption, off), so
 * two on one CPU can read the same count: site_stacks refuses the second
 * id rather than sharing it. The stack itself is taken on the BPF stack,
 * never in a per-CPU buffer another program on the CPU could overwrite.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} stack_given SEC(".maps") __weak;

/* Bytes per (target, phase, kind, stack); no prealloc: memory follows use. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 16);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct memtrail_site_key);
	__type(value, struct memtrail_site);
} sites SEC(".maps") __weak;

/*
 * Files mapped executable by targets, by the kernel's (s_dev, ino) of the
 * file mapped: MEMTRAIL_LIB_*. An entry evicted or absent only costs a
 * hold and a scan that finds nothing new.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct memtrail_lib_key);
	__type(value, __u32);
} lib_files SEC(".maps") __weak;

/*
 * By thread: the phases its scopes (--scope) interrupted; a scope's function
 * returns on the thread that entered it, and a thread's entry goes when it
 * exits (mt_exit). A plain hash, not an LRU one: on a node of many CPUs an
 * LRU evicts long before it is full, and an evicted stack would never let
 * its phase go. Sized at load: 1 entry without scopes.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct memtrail_scope_stack);
} scope_stacks SEC(".maps") __weak;

static __always_inline void count_lost(__u32 why)
{
	__u64 *n = bpf_map_lookup_elem(&lost, &why);

	if (n)
		*n += 1;
}

/* A ring-buffer record of SIZE bytes with its header filled, or NULL (counted). */
static __always_inline void *event_reserve(__u64 size, __u32 type, __u32 tgid)
{
	struct memtrail_event_hdr *h = bpf_ringbuf_reserve(&events, size, 0);

	if (!h) {
		count_lost(MEMTRAIL_LOST_RINGBUF);
		return NULL;
	}
	h->type = type;
	h->tgid = tgid;
	h->ts_ns = bpf_ktime_get_ns();
	return h;
}

/*
 * Hand a reserved record to user space. User space drains the ring buffer at
 * least every 50 ms (POLL_MS) whether woken or not, so most records need not
 * wake it: a wakeup costs an interrupt here (irq_work) and a context switch
 * there, and a storm of short processes would pay both several times a
 * process. Records user space must act on at once (an OOM kill, memory
 * pressure, a kill signal, a device failure, a spent budget, a file new to
 * memtrail) wake it, as does any record once the buffer holds MT_WAKE_BYTES
 * unread.
 * (Forced: the default wakes only when the reader has read everything before
 * the record, which unwoken records ahead of it prevent.)
 */
#define MT_WAKE_BYTES (128 << 10)	/* an eighth of the buffer */

static __always_inline void event_submit(void *e, bool urgent)
{
	__u64 flags = BPF_RB_NO_WAKEUP;

	if (urgent || bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= MT_WAKE_BYTES)
		flags = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(e, flags);
}

/* The task's css of controller IDX (enum cgroup_subsys_id), or NULL. */
static __always_inline struct cgroup_subsys_state *task_css(struct task_struct *task, __u32 idx)
{
	struct cgroup_subsys_state *css = NULL;
	struct css_set *cset = BPF_CORE_READ(task, cgroups);

	if (idx >= 64)
		return NULL;
	bpf_probe_read_kernel(&css, sizeof(css),
			      (void *)cset + bpf_core_field_offset(struct css_set, subsys) +
			      idx * sizeof(css));
	return css;
}

/* A target whose memory is being accounted, or NULL. */
static __always_inline struct memtrail_target *live_target(__u32 tgid)
{
	struct memtrail_target *t = bpf_map_lookup_elem(&targets, &tgid);

	if (!t || (t->flags & (MEMTRAIL_TARGET_EXITED | MEMTRAIL_TARGET_AWAIT_EXEC)))
		return NULL;
	return t;
}

/*
 * Where the code of files mapped since the last scan is about to run (the
 * dynamic linker's hook, an exec): user space is told. No process is ever
 * stopped for it: a file known before it is mapped has its probes in place
 * (uprobes are registered per inode and inserted as the file is mapped);
 * one new to memtrail is scanned at once, and the calls made into it before
 * its probes were live are counted as late by user space, never stopped for.
 */
static __always_inline void lib_event(struct memtrail_target *t, __u32 tgid)
{
	/*
	 * User space reads it at once where files new to it were mapped, or
	 * where it cannot know (no tracking): a short process may call them and
	 * end before the next poll, and its call sites need its mappings read
	 * while it lives. So too where sites' stacks are named (libs_urgent):
	 * the files are known, but where this process mapped them is read from
	 * its maps. Otherwise (a program of known libraries) within a poll.
	 */
	bool fresh = track_libs && t->lib_fresh;
	bool urgent = !track_libs || fresh || libs_urgent;
	struct memtrail_event_libs *e;

	e = event_reserve(sizeof(*e), MEMTRAIL_EV_LIBS, tgid);
	if (!e)
		return;
	t->lib_fresh = 0;
	e->fresh = fresh;
	e->pad = 0;
	event_submit(e, urgent);
}

#define MT_PROT_EXEC 0x4

/*
 * A file mapped executable by a target (the dynamic linker mapping a
 * library, exec mapping a program and its interpreter): unless scanned
 * already, the target's next lib_event() tells user space at once. Each
 * mapper of a file not yet scanned tells user space its key; the first
 * mapper's scan marks it scanned.
 */
static __always_inline void lib_mapped(struct file *file, unsigned long prot)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u32 pending = MEMTRAIL_LIB_PENDING, *state;
	struct memtrail_event_lib_new *e;
	struct memtrail_lib_key key;
	struct memtrail_target *t;
	struct inode *inode;
	bool first;

	if (!track_libs || !file || !(prot & MT_PROT_EXEC))
		return;
	/* a command memtrail started is told at its exec too */
	t = bpf_map_lookup_elem(&targets, &tgid);
	if (!t || (t->flags & MEMTRAIL_TARGET_EXITED))
		return;
	if (maps_tell_on)
		t->maps_new = 1;
	inode = BPF_CORE_READ(file, f_inode);
	key.dev = BPF_CORE_READ(inode, i_sb, s_dev);
	key.ino = BPF_CORE_READ(inode, i_ino);
	key.gen = BPF_CORE_READ(inode, i_generation);
	key.pad = 0;
	state = bpf_map_lookup_elem(&lib_files, &key);
	if (state && *state == MEMTRAIL_LIB_SCANNED)
		return;
	first = !state && !bpf_map_update_elem(&lib_files, &key, &pending, BPF_NOEXIST);
	/* every mapper tells it: one that ends before its scan is said too */
	e = event_reserve(sizeof(*e), MEMTRAIL_EV_LIB_NEW, tgid);
	if (e) {
		e->key = key;
		if (bpf_probe_read_kernel_str(e->name, sizeof(e->name),
					      BPF_CORE_READ(file, f_path.dentry, d_name.name)) < 0)
			e->name[0] = '\0';
		e->again = !first;
		e->pad = 0;
		event_submit(e, false);
	}
	t->lib_fresh = 1;
}

static const struct memtrail_cell zero_cell;

/*
 * The value of KEY in MAP, inserted as INIT when absent; NULL (counted under
 * LOST) when the map is full. Two callers may race to insert: both get the
 * one value that won.
 */
static __always_inline void *map_get_or_init(void *map, const void *key, const void *init,
					     __u32 lost_why)
{
	void *v = bpf_map_lookup_elem(map, key);

	if (v)
		return v;
	if (bpf_map_update_elem(map, key, init, BPF_NOEXIST) && !bpf_map_lookup_elem(map, key)) {
		count_lost(lost_why);
		return NULL;
	}
	return bpf_map_lookup_elem(map, key);
}

static __always_inline struct memtrail_cell *cell_get(__u32 tgid, __u32 phase)
{
	struct memtrail_cell_key key = { .tgid = tgid, .phase = phase };

	return map_get_or_init(&cells, &key, &zero_cell, MEMTRAIL_LOST_CELLS);
}

/*
 * Each delta is applied with one atomic add, so every intermediate level is
 * seen by exactly one caller; the peak is then raised to that level with
 * compare-and-swap. Peaks stay exact when many threads account at once.
 */
static __always_inline void level_add(struct memtrail_level *l, __s64 delta, bool base)
{
	__s64 now, peak, seen;
	int i;

	now = mt_add_fetch(&l->current, delta);
	if (base)
		;	/* held when first seen: a level, neither allocated nor freed here */
	else if (delta > 0)
		__sync_fetch_and_add(&l->allocated, delta);
	else
		__sync_fetch_and_add(&l->freed, -delta);
#ifdef MEMTRAIL_COMPAT
	/*
	 * The level is exact (one atomic add) and so are the sums; the peak is
	 * the highest level this caller read back, raised without a
	 * compare-and-swap: with updates from several CPUs at once it can miss
	 * or overshoot by the deltas in flight. One thread at a time: exact.
	 */
	(void)seen;
	(void)i;
	peak = MT_READ(l->peak);
	if (now > peak)
		l->peak = now;
#else
	peak = l->peak;
	for (i = 0; i < MT_PEAK_CAS_TRIES && now > peak; i++) {
		seen = __sync_val_compare_and_swap(&l->peak, peak, now);
		if (seen == peak)
			break;
		peak = seen;
	}
#endif
}

/*
 * The one accounting path: add a signed delta to (target, kind) in the cell
 * of the target's current phase. T is the live target of TGID.
 */
/*
 * KIND, bounded in the register that indexes with it. Before 5.11 the
 * verifier does not carry a bound learned on one copy of a register to the
 * others, and the compiler may test one copy and index with another.
 */
static __always_inline __u32 kind_index(__u32 kind)
{
	asm volatile("if %[k] < %[max] goto +1\n\t%[k] = 0"
		     : [k] "+r"(kind) : [max] "i"(MEMTRAIL_KIND_MAX));
	return kind;
}

/*
 * Name TGID in dirty, once per user space sample: its levels changed. Called
 * after the change, whose atomic add is a full barrier; user space bumps
 * sample_gen, with a barrier, after it took the names and before it reads
 * the levels. So a change either precedes the bump (the read sees it: the
 * target was named in this generation, before or after the names were
 * taken, and is read now or next time) or follows it and names the target
 * again. Where the map is full, dirty_full makes the next sample read all.
 */
static __always_inline void mark_dirty(struct memtrail_target *t, __u32 tgid)
{
	__u32 gen = sample_gen;

	if (!gen || MT_READ(t->dirty_gen) == gen)
		return;
	if (bpf_map_update_elem(&dirty, &tgid, &gen, BPF_ANY))
		dirty_full = 1;
	t->dirty_gen = gen;
}

static __always_inline void account_level(struct memtrail_target *t, __u32 tgid, __u32 kind,
					  __s64 delta, bool base)
{
	struct memtrail_cell *c;

	if (!delta || kind >= MEMTRAIL_KIND_MAX)
		return;
	c = cell_get(tgid, t->phase);
	if (!c)
		return;
	level_add(&c->kinds[kind_index(kind)], delta, base);
	mark_dirty(t, tgid);
}

static __always_inline void account(struct memtrail_target *t, __u32 tgid, __u32 kind,
				    __s64 delta)
{
	account_level(t, tgid, kind, delta, false);
}

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

static __always_inline void site_add(__u32 tgid, __u32 phase, __u32 kind, __s32 stack,
				     __s64 bytes, __u64 objects, bool sampled)
{
	site_add_at(tgid, phase, kind, stack, 0, bytes, objects, sampled);
}

/*
 * Start a new phase of a target: one atomic increment, so a switch costs one
 * program run whatever triggers it (exec, a rule's uprobe, the marker, mark).
 * NAME is kernel memory (stack or map). False when tgid is not traced.
 */
/* The switch itself: the new phase's sequence number (the one before it was current). */
static __always_inline __u32 phase_switch_to(struct memtrail_target *t, __u32 tgid,
					     const char *name, __u32 resumes)
{
	struct memtrail_event_phase *e;
	__u32 seq;

	seq = mt_add_fetch(&t->phase, 1);
	e = event_reserve(sizeof(*e), MEMTRAIL_EV_PHASE, tgid);
	if (e) {
		e->seq = seq;
		e->resumes = resumes;
		if (name)
			bpf_probe_read_kernel_str(e->name, sizeof(e->name), name);
		else
			e->name[0] = '\0';
		event_submit(e, false);
	}
	return seq;
}

static __always_inline bool phase_switch(__u32 tgid, const char *name)
{
	struct memtrail_target *t = live_target(tgid);

	if (!t)
		return false;
	phase_switch_to(t, tgid, name, 0);
	return true;
}

/*
 * The state of address space MM, owned by TGID. An entry another process
 * left is stale: its mm was freed without an end memtrail saw (a target
 * forgotten by user space while it lived, as --heap's timing child is) and
 * the kernel gave the address to this one. It starts again from nothing,
 * and so do its per-CPU rss parts.
 */
static __always_inline struct memtrail_mm_state *mm_state_get(__u64 mm, __u32 tgid)
{
	struct memtrail_mm_state fresh = { .tgid = tgid }, *s;

	s = bpf_map_lookup_elem(&mm_state, &mm);
	if (s && MT_READ(s->tgid) == tgid)
		return s;
	if (s) {
		bpf_map_delete_elem(&rss_local, &mm);
		if (bpf_map_update_elem(&mm_state, &mm, &fresh, BPF_ANY)) {
			count_lost(MEMTRAIL_LOST_MM);
			return NULL;
		}
		return bpf_map_lookup_elem(&mm_state, &mm);
	}
	return map_get_or_init(&mm_state, &mm, &fresh, MEMTRAIL_LOST_MM);
}

/*
 * Turn an absolute counter of one address space into a delta for its
 * owner. The exchange makes deltas telescope: however events interleave,
 * the sum of deltas equals the last value stored, and an event missed
 * before the mm was known is recovered by the next one.
 */
static __always_inline void mm_sync_kind(struct memtrail_target *t, __u64 mm, __u32 tgid,
					 __u32 kind, __s64 value)
{
	struct memtrail_mm_state *s;
	bool first;
	__s64 old;

	if (kind >= MEMTRAIL_KIND_MAX)
		return;
	s = mm_state_get(mm, tgid);
	if (!s)
		return;
	/*
	 * The first sync of a kind finds what the address space held before
	 * memtrail saw it: for a target's first one (attach, a command's exec,
	 * fork) that is its baseline, not allocations; an exec's new image
	 * later is allocated in its phase. (5.10: two first syncs racing may
	 * take a second's delta as baseline.)
	 */
	first = !(MT_READ(s->synced) & (1U << kind));
	if (first)
		mt_or(&s->synced, 1U << kind);
	first = first && !(MT_READ(t->flags) & MEMTRAIL_TARGET_BASED);
#ifdef MEMTRAIL_COMPAT
	/*
	 * Without an exchange: last stays the sum of the deltas accounted (each
	 * added atomically), so two events racing may leave the level off for a
	 * moment, and the next event of the mm brings it back to the counter.
	 */
	old = MT_READ(s->last[kind]);
	__sync_fetch_and_add(&s->last[kind], value - old);
#else
	old = __sync_lock_test_and_set(&s->last[kind], value);
#endif
	account_level(t, tgid, kind, value - old, first);
}

/*
 * Add a known delta of one address space to its owner, keeping the mm's last
 * value in step so that a later absolute sync adds only what was missed.
 */
static __always_inline void mm_state_add(struct memtrail_target *t, struct memtrail_mm_state *s,
					 __u32 tgid, __u32 kind, __s64 delta)
{
	if (kind >= MEMTRAIL_KIND_MAX)
		return;
	__sync_fetch_and_add(&s->last[kind], delta);
	account(t, tgid, kind, delta);
}

/*
 * A pointer as a plain number. The verifier forbids arithmetic on map
 * pointers; a copy through the stack, which privileged programs may read,
 * gives the number.
 */
static __always_inline __u64 ptr_value(const void *p)
{
	volatile __u64 slot = (__u64)p;
	__u64 v = 0;

	bpf_probe_read_kernel(&v, sizeof(v), (const void *)&slot);
	return v;
}

struct rss_sum_ctx {
	__u64 counters;	/* s32 __percpu * */
	__s64 sum;
};

#ifndef MEMTRAIL_COMPAT
/*
 * This kernel's per-cpu offset of CPU (__per_cpu_offset[cpu], which is not
 * reachable from BPF without kallsyms of data): the address of CPU's copy of
 * a per-cpu map value minus the map's per-cpu pointer to it.
 */
static __always_inline __u64 cpu_offset(__u32 cpu)
{
	__u64 *cached = bpf_map_lookup_elem(&cpu_offsets, &cpu);
	__u32 zero = 0;
	__u64 pptr = 0;
	void *copy;

	if (!cached)
		return 0;
	if (*cached)
		return *cached;
	copy = bpf_map_lookup_percpu_elem(&percpu_probe, &zero, cpu);
	if (!copy)
		return 0;
	bpf_probe_read_kernel(&pptr, sizeof(pptr),
			      (const void *)(ptr_value(&percpu_probe) +
					     bpf_core_field_offset(struct bpf_array, pptrs)));
	*cached = ptr_value(copy) - pptr;
	return *cached;
}

static long rss_sum_cpu(__u32 cpu, void *data)
{
	struct rss_sum_ctx *ctx = data;
	__u64 off = cpu_offset(cpu);
	__s32 v = 0;

	if (!off)
		return 1;
	bpf_probe_read_kernel(&v, sizeof(v), (const void *)(ctx->counters + off));
	ctx->sum += v;
	return 0;
}

#endif /* !MEMTRAIL_COMPAT */

/* mm->rss_stat before Linux 6.2: one atomic per counter, no per-cpu part */
struct mm_rss_stat___atomic {
	atomic_long_t count[4];
};

struct mm_struct___atomic {
	struct mm_rss_stat___atomic rss_stat;
};

/* One of the pre-6.2 counters, in pages (constant indices keep CO-RE exact). */
static __always_inline __s64 rss_pages_atomic(struct mm_struct *mm, int member)
{
	struct mm_struct___atomic *m = (void *)mm;

	switch (member) {
	case 0: return BPF_CORE_READ(m, rss_stat.count[0].counter);
	case 1: return BPF_CORE_READ(m, rss_stat.count[1].counter);
	case 3: return BPF_CORE_READ(m, rss_stat.count[3].counter);
	default: return 0;
	}
}

/*
 * mm->rss_stat from Linux 6.2: a percpu_counter per counter. Named as a
 * flavour so that headers of an older build kernel (struct mm_rss_stat)
 * build the same object: its layout comes from the running kernel's BTF.
 */
struct mm_struct___percpu {
	struct percpu_counter rss_stat[4];
} __attribute__((preserve_access_index));

/* Whether mm->rss_stat[] are percpu_counters (Linux 6.2) rather than atomics. */
static __always_inline bool rss_is_percpu(void)
{
	return !bpf_core_field_exists(((struct mm_struct___atomic *)0)->rss_stat.count);
}

/*
 * Exact value of one of mm->rss_stat[], in bytes. From Linux 6.2 a counter is
 * a percpu_counter: the shared count plus each CPU's unfolded delta, as
 * percpu_counter_sum() computes it (the kmem:rss_stat tracepoint passes only
 * the mm and the counter index to BPF). Before, it is one atomic, which is
 * what /proc reads too; each thread may hold up to TASK_RSS_EVENTS_THRESH
 * (64) page events of its own that the kernel has not added to it yet
 * (SPLIT_RSS_COUNTING), a bound the kernel's own figures share.
 */
static __always_inline __s64 rss_bytes(struct mm_struct *mm, int member)
{
	struct rss_sum_ctx ctx = {};
	struct percpu_counter *pc;

	if (member < 0 || member > 3)
		return 0;
	if (!rss_is_percpu()) {
		ctx.sum = rss_pages_atomic(mm, member);
	} else {
#ifdef MEMTRAIL_COMPAT
		(void)pc;	/* kernels without atomic fetch have atomic rss counters */
#else
		pc = &((struct mm_struct___percpu *)mm)->rss_stat[member];
		ctx.sum = BPF_CORE_READ(pc, count);
		ctx.counters = (__u64)BPF_CORE_READ(pc, counters);
		if (ctx.counters)
			bpf_loop(nr_cpus < MEMTRAIL_CPUS_MAX ? nr_cpus : MEMTRAIL_CPUS_MAX,
				 rss_sum_cpu, &ctx, 0);
#endif
	}
	if (ctx.sum < 0)
		return 0;
	return ctx.sum << MEMTRAIL_PAGE_SHIFT;
}

/* enum mm counters (include/linux/mm_types_task.h), stable since v4.5 */
static __always_inline int rss_member_kind(int member)
{
	switch (member) {
	case 0: return MEMTRAIL_KIND_RSS_FILE;	/* MM_FILEPAGES */
	case 1: return MEMTRAIL_KIND_RSS_ANON;	/* MM_ANONPAGES */
	case 3: return MEMTRAIL_KIND_RSS_SHMEM;	/* MM_SHMEMPAGES */
	default: return -1;			/* MM_SWAPENTS: not resident */
	}
}

/*
 * Mapped memory: the kernel's data_vm, private writable mappings that are
 * not stack (VmData in /proc/PID/status).
 */
static __always_inline __s64 mapped_bytes(struct mm_struct *mm)
{
	return (__s64)BPF_CORE_READ(mm, data_vm) << MEMTRAIL_PAGE_SHIFT;
}

/* The counters' absolute values: before 6.2, or where an mm's per-CPU parts have no room. */
static __always_inline void mm_sync_rss_sum(struct memtrail_target *t, struct mm_struct *mm,
					    __u32 tgid)
{
	__u64 key = (__u64)mm;

	mm_sync_kind(t, key, tgid, MEMTRAIL_KIND_RSS_FILE, rss_bytes(mm, 0));
	mm_sync_kind(t, key, tgid, MEMTRAIL_KIND_RSS_ANON, rss_bytes(mm, 1));
	mm_sync_kind(t, key, tgid, MEMTRAIL_KIND_RSS_SHMEM, rss_bytes(mm, 3));
}

#ifndef MEMTRAIL_COMPAT
/*
 * Resident memory at O(1) per event (Linux 6.2 on). A counter's exact value
 * is its shared count plus every CPU's unfolded part; an rss_stat event
 * changes only the part of the CPU it runs on, and the shared count when that
 * part folds into it. So memtrail keeps, per mm, the shared count
 * (mm_state.central) and each CPU's part (rss_local) as last accounted, and
 * an event adds what changed in those two: exchanges make the additions
 * telescope, so the level is the sum of the parts as last read, whatever the
 * interleaving. Bound: a thread that migrates between the kernel's add and
 * its tracepoint leaves that add (less than one percpu_counter batch) to the
 * next event on the CPU it left, or to the next full walk (fork, exec, exit,
 * OOM kill, which walk every CPU); a fold seen from another CPU before its own
 * event may show it early, for the microseconds between.
 */
struct rss_walk {
	__u64 mm;
	__u64 counters[4];	/* each counter's s32 __percpu *, 0: none */
	__s64 pages[4];		/* pages added (or, absolute, the parts' sum) */
	__u32 absolute;		/* set the parts to the counters, ignoring what they held */
};

static long rss_walk_cpu(__u32 cpu, void *data)
{
	struct rss_walk *w = data;
	__u64 off = cpu_offset(cpu);
	struct rss_local *m;
	__s32 v;
	int i;

	if (!off)
		return 1;
	m = bpf_map_lookup_percpu_elem(&rss_local, &w->mm, cpu);
	if (!m)
		return 1;
	for (i = 0; i < 4; i++) {
		if (i == 2)
			continue;	/* MM_SWAPENTS: not resident */
		v = 0;
		if (w->counters[i])
			bpf_probe_read_kernel(&v, sizeof(v), (const void *)(w->counters[i] + off));
		if (w->absolute) {
			m->v[i] = v;
			w->pages[i] += v;
		} else {
			w->pages[i] += v - __sync_lock_test_and_set(&m->v[i], v);
		}
	}
	return 0;
}

/*
 * Walk every CPU's part of MM's counters: ABSOLUTE sets the level to the
 * counters (an mm seen first: its parts hold nothing yet), else adds what
 * changed since the parts were last read (exact among concurrent events).
 */
static __always_inline void rss_walk(struct memtrail_target *t, struct mm_struct *mm,
				     __u32 tgid, struct memtrail_mm_state *s, bool absolute)
{
	struct rss_walk w = { .mm = (__u64)mm, .absolute = absolute };
	__s64 count[4] = {};
	struct percpu_counter *pc;
	int i, kind;

	for (i = 0; i < 4; i++) {
		if (i == 2)
			continue;
		pc = &((struct mm_struct___percpu *)mm)->rss_stat[i];
		count[i] = BPF_CORE_READ(pc, count);
		w.counters[i] = (__u64)BPF_CORE_READ(pc, counters);
	}
	bpf_loop(nr_cpus < MEMTRAIL_CPUS_MAX ? nr_cpus : MEMTRAIL_CPUS_MAX, rss_walk_cpu, &w, 0);
	for (i = 0; i < 4; i++) {
		if (i == 2)
			continue;
		kind = rss_member_kind(i);
		if (kind < 0)
			continue;
		if (absolute) {
			s->central[i] = count[i];
			mm_sync_kind(t, (__u64)mm, tgid, kind,
				     (count[i] + w.pages[i]) << MEMTRAIL_PAGE_SHIFT);
		} else {
			w.pages[i] += count[i] - __sync_lock_test_and_set(&s->central[i], count[i]);
			mm_state_add(t, s, tgid, kind, w.pages[i] << MEMTRAIL_PAGE_SHIFT);
		}
	}
}

/*
 * An mm without per-CPU parts yet: make them, set from the counters, then
 * mark the mm ready; events before that leave their CPU's change to the next
 * event there. Where the map has no room the counters are summed instead.
 */
static __always_inline void rss_first(struct memtrail_target *t, struct mm_struct *mm,
				      __u32 tgid, struct memtrail_mm_state *s)
{
	struct rss_local zero = {};
	__u64 key = (__u64)mm;
	long err;

	err = bpf_map_update_elem(&rss_local, &key, &zero, BPF_NOEXIST);
	if (!err) {
		__sync_fetch_and_and(&s->flags, ~MEMTRAIL_MM_RSS_READY);
		rss_walk(t, mm, tgid, s, true);
		__sync_fetch_and_or(&s->flags, MEMTRAIL_MM_RSS_READY);
	} else if (err != -17 /* -EEXIST */) {
		mm_sync_rss_sum(t, mm, tgid);	/* no room: O(CPUs) per event */
	}
	/* -EEXIST: another CPU is setting them up */
}

/* The rss parts of MM in step with its per-CPU parts, or NULL: not yet. */
static __always_inline struct rss_local *rss_ready(struct memtrail_mm_state *s, __u64 *key)
{
	if (!(MT_READ(s->flags) & MEMTRAIL_MM_RSS_READY))
		return NULL;
	return bpf_map_lookup_elem(&rss_local, key);
}

/* One rss_stat event, at O(1): this CPU's part and the shared count. */
static __always_inline void rss_event(struct memtrail_target *t, struct mm_struct *mm,
				      __u32 tgid, int member, int kind)
{
	struct memtrail_mm_state *s;
	struct percpu_counter *pc;
	__u64 key = (__u64)mm, counters, off;
	struct rss_local *m;
	__s64 count, pages;
	__s32 v = 0;
	int i = member & 3;

	s = mm_state_get(key, tgid);
	if (!s)
		return;
	m = rss_ready(s, &key);
	if (!m) {
		rss_first(t, mm, tgid, s);
		return;
	}
	pc = &((struct mm_struct___percpu *)mm)->rss_stat[i];
	count = pc->count;	/* a direct load: MM is a tracepoint's argument */
	counters = (__u64)BPF_CORE_READ(pc, counters);
	off = cpu_offset(bpf_get_smp_processor_id());
	if (counters && off)
		bpf_probe_read_kernel(&v, sizeof(v), (const void *)(counters + off));
	pages = count - __sync_lock_test_and_set(&s->central[i], count);
	pages += v - __sync_lock_test_and_set(&m->v[i], v);
	if (pages)
		mm_state_add(t, s, tgid, kind, pages << MEMTRAIL_PAGE_SHIFT);
}
#endif /* !MEMTRAIL_COMPAT */

/* Every rss kind of MM exact now (fork, exec, exit, OOM kill, first sight): O(CPUs). */
static __always_inline void mm_sync_rss(struct memtrail_target *t, struct mm_struct *mm,
				       __u32 tgid)
{
#ifndef MEMTRAIL_COMPAT
	struct memtrail_mm_state *s;
	__u64 key = (__u64)mm;

	if (rss_is_percpu()) {
		s = mm_state_get(key, tgid);
		if (!s)
			return;
		if (rss_ready(s, &key))
			rss_walk(t, mm, tgid, s, false);
		else
			rss_first(t, mm, tgid, s);
		return;
	}
#endif
	mm_sync_rss_sum(t, mm, tgid);
}

/*
 * Bring every mm-derived kind of a target up to date from the absolute
 * counters. For mapped memory this is only safe while no other thread of the
 * target can be inside a write section (fork, exec, exit, first sight): the
 * write sections apply exact deltas everywhere else.
 */
static __always_inline void mm_sync_all(struct memtrail_target *t, struct mm_struct *mm,
				       __u32 tgid)
{
	if (!mm)
		return;
	mm_sync_rss(t, mm, tgid);
	mm_sync_kind(t, (__u64)mm, tgid, MEMTRAIL_KIND_MAPPED, mapped_bytes(mm));
	if (!(MT_READ(t->flags) & MEMTRAIL_TARGET_BASED))
		mt_or(&t->flags, MEMTRAIL_TARGET_BASED);
}

#endif /* MEMTRAIL_BPF_H */
