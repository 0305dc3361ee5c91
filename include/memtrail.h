/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Types shared by the BPF programs and user space: kinds, targets, the
 * (target, phase, kind) cells and the ring-buffer records. Fixed-width types
 * only, so both sides agree on every layout.
 */
#ifndef MEMTRAIL_H
#define MEMTRAIL_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define MEMTRAIL_TRAIL_VERSION 1

#define MEMTRAIL_COMM_LEN 16
#define MEMTRAIL_ARGS_LEN 256
/* deepest cgroup nesting the in-kernel cgroup filter walks */
#define MEMTRAIL_CGROUP_DEPTH_MAX 32
/* most CPUs whose per-cpu rss deltas are summed */
#define MEMTRAIL_CPUS_MAX 1024
/* phase names: printable ASCII, 1 to 63 bytes */
#define MEMTRAIL_PHASE_NAME_LEN 64
/* prctl option of the in-program marker (include/memtrail_marker.h): 'MTPH' */
#define MEMTRAIL_PRCTL_PHASE 0x4d545048
/* most --phase rules */
#define MEMTRAIL_RULES_MAX 64
/* rules on kernels without bpf_cookie (before 5.15): a program each (phases.bpf.c) */
#define MEMTRAIL_RULE_PROGS 8
/* scopes (--scope) one thread may be inside at once, each remembering the phase it interrupted */
#define MEMTRAIL_SCOPE_DEPTH 16

/* rule_names: a rule's phase, and whether it ends at the function's return (--scope) */
struct memtrail_rule {
	char name[MEMTRAIL_PHASE_NAME_LEN];
	__u32 scoped;
	__u32 pad;
};

/* scope_stacks, by thread: the phases its scopes interrupted, innermost last */
struct memtrail_scope_stack {
	__u32 depth;	/* scopes entered and not returned; beyond MEMTRAIL_SCOPE_DEPTH, not kept */
	__u32 seq[MEMTRAIL_SCOPE_DEPTH];	/* the phase each entry interrupted */
	__u64 sp[MEMTRAIL_SCOPE_DEPTH];		/* the user stack pointer at each entry */
};
/* device functions probed on kernels without bpf_cookie: an entry program each (device.bpf.c) */
#define MEMTRAIL_DEV_SPECS 72
/* most cgroups one filter names (watch --cgroup, repeatable) */
#define MEMTRAIL_FILTER_CGROUPS_MAX 16
/* least time between two pressure events of one target, in the kernel */
#define MEMTRAIL_PRESSURE_GAP_NS 1000000000ULL

/* Kinds of memory. The names (memtrail_kind_name()) are stable: trails use them. */
enum memtrail_kind {
	MEMTRAIL_KIND_HEAP = 0,
	MEMTRAIL_KIND_MAPPED,
	MEMTRAIL_KIND_RSS_ANON,
	MEMTRAIL_KIND_RSS_FILE,
	MEMTRAIL_KIND_RSS_SHMEM,
	MEMTRAIL_KIND_CUDA_DEVICE,
	MEMTRAIL_KIND_CUDA_HOST,
	MEMTRAIL_KIND_CUDA_MANAGED,
	MEMTRAIL_KIND_NEURON_DEVICE,
	MEMTRAIL_KIND_NEURON_HOST,
	MEMTRAIL_KIND_MAX,
};

/* How the kernel decides which processes are targets. */
enum memtrail_filter {
	MEMTRAIL_FILTER_PID = 0,	/* listed PIDs and their descendants */
	MEMTRAIL_FILTER_COMM,		/* processes whose comm matches */
	MEMTRAIL_FILTER_CGROUP,		/* processes in a cgroup or below it */
	MEMTRAIL_FILTER_ALL,		/* every user process but memtrail */
};

/* Every place the BPF side can drop data; user space prints each counter. */
enum memtrail_lost {
	MEMTRAIL_LOST_RINGBUF = 0,	/* ring buffer full: an event was dropped */
	MEMTRAIL_LOST_TARGETS,		/* targets map full, or its pid's last target unread: untraced */
	MEMTRAIL_LOST_CELLS,		/* cells map full: a delta was dropped */
	MEMTRAIL_LOST_MM,		/* mm_state map full: a delta was dropped */
	MEMTRAIL_LOST_PHASE_NAMES,	/* a marker call with an invalid phase name */
	MEMTRAIL_LOST_DEVICE,		/* device map full: an allocation went uncounted */
	MEMTRAIL_LOST_SITES,		/* sites map full: an allocation site went unrecorded */
	MEMTRAIL_LOST_STACKS,		/* a user stack could not be taken (map full or unwind) */
	MEMTRAIL_LOST_HEAP,		/* heap map full: an allocation went uncounted */
	MEMTRAIL_LOST_SCOPES,		/* scope_stacks full, or a thread deeper than MEMTRAIL_SCOPE_DEPTH */
	MEMTRAIL_LOST_MAPS,		/* a code-mappings read by BPF refused (mmap lock busy): retried */
	MEMTRAIL_LOST_DEEP,		/* a deep sample found no room: walked by frame pointers instead */
	/* runs of memtrail's programs the kernel skipped (recursion_misses): user space counts these */
	MEMTRAIL_LOST_SKIPPED,
	MEMTRAIL_LOST_MAX,
};

/* One kind's accounting in one (target, phase) cell; bytes. */
struct memtrail_level {
	__s64 current;		/* level now */
	__s64 peak;		/* highest level ever reached */
	__u64 allocated;	/* sum of positive deltas */
	__u64 freed;		/* sum of negative deltas, as a positive number */
};

/*
 * Levels of one phase of one target: what happened during its Nth phase
 * (0 is "start"), relative to the level when the phase began. The whole
 * life follows from the chain of phases (user space folds closed phases):
 * current = sum of segment changes, peak = max over phases of the level at
 * the phase's start plus its segment peak. One cell per event keeps the
 * accounting path to one set of atomic operations.
 */
struct memtrail_cell_key {
	__u32 tgid;
	__u32 phase;
};

struct memtrail_cell {
	struct memtrail_level kinds[MEMTRAIL_KIND_MAX];
};

#define MEMTRAIL_TARGET_EXITED	(1U << 0)
/* a command memtrail started: accounting begins at its exec */
#define MEMTRAIL_TARGET_AWAIT_EXEC	(1U << 1)
/* memtrail's own helper (ldconfig, ld.so --list) or its child, traced with every process */
#define MEMTRAIL_TARGET_OURS		(1U << 2)
/* its first address space was synced: what it held then is its baseline; later ones (exec) allocate */
#define MEMTRAIL_TARGET_BASED		(1U << 3)
/* the heap probes' timing child: its allocations are not deep samples (--unwind dwarf) */
#define MEMTRAIL_TARGET_CALIBRATION	(1U << 4)

/* device_flags of a target: what its accelerator runtime has done so far */
#define MEMTRAIL_DEV_INIT	(1U << 0)	/* called into a runtime */
#define MEMTRAIL_DEV_EXECUTED	(1U << 1)	/* launched a kernel or executed a model */

/* The automatic phases the accelerator runtimes start. */
enum memtrail_auto_phase {
	MEMTRAIL_AUTO_NONE = 0,
	MEMTRAIL_AUTO_INIT,	/* "runtime_init": first call into a runtime */
	MEMTRAIL_AUTO_LOAD,	/* "model_load": nrt_load*, cuModuleLoad*, cuLibraryLoad* */
	MEMTRAIL_AUTO_EXECUTE,	/* "execute": first launch or execution after a load */
};

/* A traced process, keyed by tgid. */
struct memtrail_target {
	__u32 ppid;
	__u32 flags;		/* MEMTRAIL_TARGET_* */
	__u32 phase;		/* sequence number of the current phase */
	__u32 device_flags;	/* MEMTRAIL_DEV_* */
	__u64 mm;		/* address of its mm_struct, 0 until known */
	__u64 pressure_ns;	/* when its last pressure event was sent */
	__u32 auto_phase;	/* enum memtrail_auto_phase of the last automatic phase */
	__u32 auto_seq;		/* and its sequence number */
	__u32 dev_epoch;	/* device OOMs so far: allocations are dated by it */
	__u32 dev_used;		/* it made device allocations: its exec gives them back */
	__u32 lib_fresh;	/* mapped a file not yet scanned: told at its next lib_event */
	__u32 dirty_gen;	/* the sample_gen it was last named in the dirty map at */
	__u64 heap_hits;	/* heap probe hits (entries and returns), for the overhead budget */
	__u32 maps_new;		/* mapped code since its maps were last told (MEMTRAIL_EV_MAP) */
	__u32 pad;
};

/*
 * Last absolute value seen per kind for one address space. Sources that
 * report absolute counters (rss_stat, data_vm) become signed deltas against
 * it, so every source feeds the same accounting helper.
 */
struct memtrail_mm_state {
	__u32 tgid;
	__u32 flags;			/* MEMTRAIL_MM_* */
	__s64 last[MEMTRAIL_KIND_MAX];
	__s64 central[4];		/* rss counters' shared counts as last accounted (pages) */
	__u32 synced;			/* bit per kind: first sync done (the baseline taken) */
	__u32 pad;
};

/* the mm's per-CPU rss parts are in step with last[] and central[] (Linux 6.2 on) */
#define MEMTRAIL_MM_RSS_READY 1

enum memtrail_event_type {
	MEMTRAIL_EV_TARGET = 1,	/* a process became a target */
	MEMTRAIL_EV_EXEC,	/* a target called exec */
	MEMTRAIL_EV_EXIT,	/* a target's last thread exited */
	MEMTRAIL_EV_PHASE,	/* a target entered a phase */
	MEMTRAIL_EV_OOM,	/* the OOM killer chose a target (before the kill lands) */
	MEMTRAIL_EV_SIGNAL,	/* SIGKILL or SIGTERM generated for a target */
	MEMTRAIL_EV_PRESSURE,	/* a target's memory cgroup started reclaim */
	MEMTRAIL_EV_DEVICE_FAIL, /* a device runtime call of a target failed */
	MEMTRAIL_EV_LIBS,	/* a target's dynamic linker changed its libraries */
	MEMTRAIL_EV_HEAP_BUDGET,/* a target's heap probes spent this cycle's budget */
	MEMTRAIL_EV_DEVICE_TOTAL,/* a runtime told a target a device's memory size */
	MEMTRAIL_EV_LIB_NEW,	/* a target mapped executable a file not seen before */
	MEMTRAIL_EV_MAP,	/* one of a target's executable file mappings, read in BPF */
	MEMTRAIL_EV_DEEP,	/* a sampled allocation with its registers and stack top */
	MEMTRAIL_EV_DEEP_FREE,	/* the free of an allocation told by MEMTRAIL_EV_DEEP */
	MEMTRAIL_EV_FILE,	/* the path of a file MEMTRAIL_EV_MAP names first */
};

enum memtrail_target_reason {
	MEMTRAIL_REASON_FORK = 1,	/* forked by a target */
	MEMTRAIL_REASON_EXEC,		/* matched the filter at exec */
	MEMTRAIL_REASON_SCAN,		/* matched the filter in a scan of all tasks */
};

struct memtrail_event_hdr {
	__u32 type;	/* enum memtrail_event_type, first in every record */
	__u32 tgid;
	__u64 ts_ns;	/* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
};

/*
 * MEMTRAIL_EV_LIBS: the dynamic linker changed a target's libraries (or it
 * execed). FRESH: it mapped a file not yet scanned since the last one: user
 * space scans it at once and probes what is new (the process runs on).
 */
struct memtrail_event_libs {
	struct memtrail_event_hdr hdr;
	__u32 fresh;
	__u32 pad;
};

/*
 * A file by the kernel's (super_block s_dev, i_ino, i_generation) of the
 * file mapped: a file made on a deleted one's inode number (ext4 gives it to
 * the next file) has another generation, so it is not taken as scanned.
 */
struct memtrail_lib_key {
	__u64 dev;
	__u64 ino;
	__u32 gen;
	__u32 pad;
};

/* lib_files: a key absent or PENDING holds the process that maps it */
#define MEMTRAIL_LIB_PENDING 1	/* mapped; its scan has not finished */
#define MEMTRAIL_LIB_SCANNED 2	/* scanned, and probed where it has something to probe */

#define MEMTRAIL_LIB_NAME_LEN 32

/*
 * MEMTRAIL_EV_LIB_NEW: hdr.tgid mapped a file not yet scanned. The first
 * to map it (AGAIN 0) has it marked SCANNED after its scan; each mapper
 * tells it, so that NAME, the file's own name (its last path component,
 * cut), says what it was where the process ends before its scan.
 */
struct memtrail_event_lib_new {
	struct memtrail_event_hdr hdr;
	struct memtrail_lib_key key;
	char name[MEMTRAIL_LIB_NAME_LEN];
	__u32 again;	/* another process mapped it first; its scan is pending */
	__u32 pad;
};

/*
 * MEMTRAIL_EV_MAP: an executable mapping of a file by hdr.tgid, read by BPF
 * (Linux 6.7: a task's VMAs) after its exec and when its dynamic linker
 * says it mapped libraries, so that its stacks are named even if it exits
 * before user space reads its maps. The file as the kernel's (s_dev, i_ino)
 * of the file mapped (on overlayfs, the layer's file).
 */
struct memtrail_event_map {
	struct memtrail_event_hdr hdr;
	__u64 start, end;
	__u64 pgoff;	/* in pages */
	__u64 ino;
	__u64 dev;	/* the kernel's dev_t: major << 20 | minor */
};

#define MEMTRAIL_FILE_NAMES 1024	/* bytes of a file's path components */

/*
 * MEMTRAIL_EV_FILE: before the first MEMTRAIL_EV_MAP of a file (the first
 * since its key left the BPF table of files told), where that file is: its
 * path from its filesystem's root, as the names of its directories, the
 * file's own first, each ended by a NUL (LEN bytes in all). WHOLE: the walk
 * reached the root (else the path was too deep or too long, and is cut).
 * With it user space opens the file of a process that ended before its maps
 * could be read.
 */
struct memtrail_event_file {
	struct memtrail_event_hdr hdr;
	struct memtrail_lib_key key;
	__u32 len;
	__u32 whole;
	char names[MEMTRAIL_FILE_NAMES];
};

struct memtrail_event_target {
	struct memtrail_event_hdr hdr;
	__u32 ppid;
	__u32 reason;	/* enum memtrail_target_reason */
	char comm[MEMTRAIL_COMM_LEN];
};

struct memtrail_event_exec {
	struct memtrail_event_hdr hdr;
	__u32 args_len;	/* bytes of args used; NUL-separated argv */
	__u32 pad;
	__u64 cgroup_id;	/* its cgroup's kernfs id: v1 memory hierarchy where mounted, else v2 */
	char comm[MEMTRAIL_COMM_LEN];
	char args[MEMTRAIL_ARGS_LEN];
};

struct memtrail_event_exit {
	struct memtrail_event_hdr hdr;
	__u32 code;	/* exit status, 0-255, when exited normally */
	__u32 signal;	/* terminating signal, 0 when exited normally */
	__u32 core_dumped;
	__u32 phase;	/* its last phase's sequence number: no lookup after it */
};

struct memtrail_event_phase {
	struct memtrail_event_hdr hdr;
	__u32 seq;	/* the phase's sequence number in its target */
	__u32 resumes;	/* a scope returned: 1 + the seq of the phase it interrupted (name empty) */
	char name[MEMTRAIL_PHASE_NAME_LEN];
};

struct memtrail_event_oom {
	struct memtrail_event_hdr hdr;
	__u32 trigger_tgid;	/* the task whose allocation invoked the OOM killer */
	__s32 memcg_level;	/* hops from the victim's memory cgroup up to the one at
				 * its limit; -1 when none was: a global OOM */
	__u64 usage;		/* that cgroup's usage and limit, bytes */
	__u64 limit;
	__u64 memcg_id;		/* its kernfs id (the directory's inode number) */
	char trigger_comm[MEMTRAIL_COMM_LEN];
	/* the victim's resident memory when chosen, bytes (exact per-cpu sums) */
	__u64 rss_anon, rss_file, rss_shmem;
};

/*
 * Reclaim started in a target's memory cgroup because a charge hit its limit
 * (or memory.high): the last moment before an OOM kill to look.
 */
struct memtrail_event_pressure {
	struct memtrail_event_hdr hdr;	/* tgid: the target whose charge reclaims */
	__u64 memcg_id;		/* the nearest memory cgroup near its limit, 0: none */
	__u64 usage;		/* its usage and limit, bytes */
	__u64 limit;
};

struct memtrail_event_signal {
	struct memtrail_event_hdr hdr;	/* tgid: the target */
	__u32 sig;
	__u32 sender_tgid;
	__u32 sender_ppid;
	__s32 result;			/* TRACE_SIGNAL_*: 0 delivered */
	char sender_comm[MEMTRAIL_COMM_LEN];
};

/*
 * Device runtimes. Every probed function's uprobe cookie says what it does
 * (MEMTRAIL_COOKIE_*): an operation, the kind it allocates, the runtime, an
 * argument index, and the index of its name in user space's table.
 */
enum memtrail_runtime {
	MEMTRAIL_RT_CUDA = 0,
	MEMTRAIL_RT_NEURON,
	MEMTRAIL_RT_LOADER,	/* the dynamic linker's debugger hook */
};

enum memtrail_dev_op {
	MEMTRAIL_OP_INIT = 1,	/* entry: first call into the runtime */
	MEMTRAIL_OP_ALLOC,	/* (T **out, size_t size, ...): *out at return */
	MEMTRAIL_OP_ALLOC_PITCH,/* (T **out, size_t *pitch, width, height, ...) */
	MEMTRAIL_OP_FREE,	/* entry: (T *ptr, ...); return: a failure is reported */
	MEMTRAIL_OP_VMM_CREATE,	/* cuMemCreate(handle *out, size, prop *, flags) */
	MEMTRAIL_OP_VMM_RELEASE,/* entry: cuMemRelease(handle) */
	MEMTRAIL_OP_VMM_MAP,	/* cuMemMap(va, size, offset, handle, flags) */
	MEMTRAIL_OP_VMM_UNMAP,	/* entry: cuMemUnmap(va, size) */
	MEMTRAIL_OP_VMM_RETAIN,	/* cuMemRetainAllocationHandle(handle *out, va) */
	MEMTRAIL_OP_LOAD,	/* entry: model_load phase; return: failure */
	MEMTRAIL_OP_LAUNCH,	/* entry: execute phase */
	MEMTRAIL_OP_CTX,	/* (CUcontext *out, ..., device in argument ARG) */
	MEMTRAIL_OP_CTX_SET,	/* entry: (CUcontext) current for the thread */
	MEMTRAIL_OP_SET_DEVICE,	/* entry: cudaSetDevice(int) */
	MEMTRAIL_OP_NRT_ALLOC,	/* nrt_tensor_allocate(placement, vnc, size, name, out) */
	MEMTRAIL_OP_NRT_FREE,	/* entry: nrt_tensor_free(nrt_tensor_t **) */
	MEMTRAIL_OP_LIBS,	/* entry: _dl_debug_state() */
	MEMTRAIL_OP_MEM_INFO,	/* (size_t *free, size_t *total): current device */
	MEMTRAIL_OP_DEV_TOTAL,	/* cuDeviceTotalMem_v2(size_t *bytes, CUdevice) */
	MEMTRAIL_OP_NRT_MEM_STATS,/* nrt_get_vnc_memory_stats(vnc, {used, limit} *, ...) */
};

#define MEMTRAIL_COOKIE(op, kind, rt, arg, name) \
	((__u64)(op) | (__u64)(kind) << 8 | (__u64)(rt) << 16 | (__u64)(arg) << 20 | \
	 (__u64)(name) << 32)
#define MEMTRAIL_COOKIE_OP(c)	((__u32)(c) & 0xff)
#define MEMTRAIL_COOKIE_KIND(c)	((__u32)((c) >> 8) & 0xff)
#define MEMTRAIL_COOKIE_RT(c)	((__u32)((c) >> 16) & 0xf)
#define MEMTRAIL_COOKIE_ARG(c)	((__u32)((c) >> 20) & 0xf)
#define MEMTRAIL_COOKIE_NAME(c)	((__u32)((c) >> 32))

/* out-of-memory return codes: CUDA_ERROR_OUT_OF_MEMORY, cudaErrorMemoryAllocation; NRT_RESOURCE */
#define MEMTRAIL_CUDA_OOM 2
#define MEMTRAIL_NRT_OOM 4

/* A live device allocation of a target, keyed by its address (or tensor). */
struct memtrail_dev_key {
	__u32 tgid;
	__u32 pad;
	__u64 addr;
};

struct memtrail_dev_alloc {
	__u64 size;
	__u32 kind;
	__s32 device;	/* -1: unknown */
	__u32 phase;	/* sequence number of the phase it was made in */
	__u32 name;	/* the function that made it, an index in user space's table */
	__u32 born;	/* the target's dev_epoch when it was made */
	__u32 dead;	/* freed while a device OOM snapshot was pending: that epoch */
	__s32 stack;	/* its site's stack (device sites on), else MEMTRAIL_STACK_NONE */
	__u32 pad;
};

/* A cuMemCreate handle: physical memory, counted once, freed with its last reference. */
struct memtrail_vmm_handle {
	__u64 size;
	__u32 kind;
	__s32 device;
	__u32 phase;
	__u32 refs;	/* 1 until cuMemRelease, plus one per live mapping or retain */
	__u32 born;	/* as in struct memtrail_dev_alloc */
	__u32 dead;
};

#define MEMTRAIL_STACK_DEPTH 16

/* A device's memory size as its runtime reported it to a target (sent when new or changed). */
struct memtrail_event_device_total {
	struct memtrail_event_hdr hdr;
	__u32 kind;	/* cuda_device or neuron_device */
	__s32 device;	/* -1: unknown */
	__u64 bytes;
};

/*
 * The file behind a user address, as the kernel had it mapped at the event:
 * names a call site after the process is gone (and /proc with it).
 */
#define MEMTRAIL_FRAME_FILES 8		/* first frames of a stack with their file */
#define MEMTRAIL_FRAME_NAME_LEN 48

struct memtrail_frame_file {
	__u64 off;	/* offset in the file */
	__u64 ino;	/* 0: anonymous memory, or not found */
	__u32 dev;	/* the kernel's dev_t: major << 20 | minor */
	__u32 pad;
	char name[MEMTRAIL_FRAME_NAME_LEN];	/* the file's own name, no directory */
};

struct memtrail_event_device {
	struct memtrail_event_hdr hdr;
	__u32 name;	/* function, an index in user space's table */
	__u32 runtime;	/* enum memtrail_runtime */
	__s32 rc;	/* what it returned */
	__s32 device;	/* -1: unknown */
	__u64 size;	/* bytes asked for; 0 when the call names none */
	__u32 kind;
	__u32 phase;	/* sequence number of the target's phase */
	__u32 n_frames;
	__u32 epoch;	/* out of memory: the target's dev_epoch it opened, else 0 */
	__u64 frames[MEMTRAIL_STACK_DEPTH];	/* the caller's user stack, call site first */
	struct memtrail_frame_file files[MEMTRAIL_FRAME_FILES];	/* of frames[0..] */
};

/*
 * Allocation sites: bytes per (target, phase the memory was allocated in,
 * kind, user stack). Sources: mapping syscalls (kind mapped), the malloc
 * family (kind heap) and page faults (MEMTRAIL_SITE_FAULTS).
 */
#define MEMTRAIL_SITE_DEPTH 32		/* frames kept per stack */
#define MEMTRAIL_SITE_FAULTS MEMTRAIL_KIND_MAX	/* the "kind" of fault sites */
#define MEMTRAIL_STACK_NONE (-1)	/* no stack: not sampled, or none taken */
/* a mapping site's: its process had less mapped memory than sites_from (watch) */
#define MEMTRAIL_STACK_SMALL (-3)
#define MEMTRAIL_OBJ_ONE 1024		/* objects are kept in 1/1024ths (sampling weights) */

/* In a stack: the walk went on past here through garbage (no call before it), cut */
#define MEMTRAIL_FRAME_CUT 1
/* A user stack: return addresses, innermost first, zero after the last. */
struct memtrail_stack {
	__u64 ips[MEMTRAIL_SITE_DEPTH];
};

struct memtrail_site_key {
	__u32 tgid;
	__u32 phase;	/* sequence number of the phase the bytes were allocated in */
	__u32 kind;	/* enum memtrail_kind, or MEMTRAIL_SITE_FAULTS */
	__s32 stack;	/* id in the site_stacks map, MEMTRAIL_STACK_NONE: unknown */
	/*
	 * Stacks taken inside a function without a frame pointer (a system
	 * call wrapper, memset) skip its caller: the return address it would
	 * return to (x86: the word at the stack pointer), for user space to
	 * insert after checking it follows a call. 0: none.
	 */
	__u64 caller;
};

struct memtrail_site {
	__u64 alloc_bytes;	/* allocated here; under sampling, what the samples stand for */
	__u64 alloc_objects;	/* allocations, in 1/MEMTRAIL_OBJ_ONE */
	__u64 free_bytes;	/* of those, freed since */
	__u64 free_objects;
	__u64 samples;		/* allocations actually seen */
};

/* A tracked heap allocation or mapping of a target, by (tgid, address). */
struct memtrail_addr_key {
	__u32 tgid;
	__u32 pad;
	__u64 addr;
};

struct memtrail_heap_alloc {
	__u64 size;	/* bytes asked for */
	__u64 weight;	/* bytes it stands for at its site (0: not sampled) */
	__u32 objects;	/* allocations it stands for, 1/MEMTRAIL_OBJ_ONE */
	__u32 phase;
	__s32 stack;
	__u32 pad;
};

struct memtrail_map_range {
	__u64 len;
	__u32 phase;
	__s32 stack;
	__u64 caller;
};

/*
 * Deep stacks (--unwind dwarf): BPF copies a sampled allocation's user
 * registers and the top of its thread's stack; user space unwinds them by
 * the binaries' call-frame information, through code built without frame
 * pointers, and keeps the allocation's site itself (its free is told too).
 */
#define MEMTRAIL_STACK_DEEP (-2)	/* heap_allocs, map_ranges: the site is user space's */
#define MEMTRAIL_DEEP_STACK_BYTES 16384	/* of the user stack, from its pointer up */
#define MEMTRAIL_DEEP_REGS 33		/* DWARF numbering (x86-64: 0-16, rip 16; arm64: x0-x30, sp, pc) */

/*
 * A CPython interpreter a target runs (user space finds it by its
 * _PyRuntime and Py_Version symbols): where BPF finds the calling thread's
 * Python frames, as byte offsets of the interpreter's own structures.
 */
#define MEMTRAIL_PY_FRAMES 48		/* Python frames read per deep sample */
#define MEMTRAIL_DEEP_URET 32		/* pending uretprobe returns read per deep sample */
#define MEMTRAIL_PY_THREADS 64		/* thread states searched for the caller's */

struct memtrail_py_proc {
	__u64 runtime;		/* _PyRuntime's address in the target */
	__u32 runtime_main;	/* _PyRuntimeState: interpreters.main */
	__u32 interp_threads;	/* PyInterpreterState: threads.head */
	__u32 tstate_next;	/* PyThreadState: next */
	__u32 tstate_tid;	/* PyThreadState: native_thread_id (3.10: thread_id, see pthread_tid) */
	__u32 tstate_cframe;	/* PyThreadState: cframe (3.11, 3.12); MEMTRAIL_PY_NO_CFRAME */
	__u32 cframe_current;	/* _PyCFrame (or, without one, PyThreadState): current_frame */
	__u32 frame_code;	/* _PyInterpreterFrame: f_code (3.13 on: f_executable); 3.10: PyFrameObject's */
	__u32 frame_previous;	/* _PyInterpreterFrame: previous (3.10: f_back) */
	__u32 frame_instr;	/* _PyInterpreterFrame: prev_instr (3.13 on: instr_ptr; 3.10: f_lasti) */
	__u32 frame_entry;	/* _PyInterpreterFrame: is_entry (3.11; 3.12 on: owner), a byte */
	/*
	 * MEMTRAIL_PY_TID_NATIVE: tstate_tid holds the kernel's thread id;
	 * else (3.10, whose thread state has none) it holds pthread_self(),
	 * the C library's thread descriptor, with the kernel's id (a 32-bit
	 * pid_t) at this offset in it
	 */
	__u32 pthread_tid;
};

#define MEMTRAIL_PY_TID_NATIVE 0xffffffffu

/* tstate_cframe of an interpreter whose thread state holds current_frame itself (3.13) */
#define MEMTRAIL_PY_NO_CFRAME 0xffffffffu

/* Python frames of a deep sample, as BPF found them (py_status). */
enum memtrail_py_status {
	MEMTRAIL_PY_NONE = 0,		/* the target runs no interpreter memtrail knows */
	MEMTRAIL_PY_OK,			/* the thread's frames, innermost first */
	MEMTRAIL_PY_NO_THREAD,		/* no thread state of this thread (not a Python thread) */
	MEMTRAIL_PY_UNREADABLE,		/* a pointer could not be read: the frames up to it */
	MEMTRAIL_PY_TOO_DEEP,		/* more than MEMTRAIL_PY_FRAMES: the innermost ones */
};

struct memtrail_py_frame {
	__u64 code;	/* PyCodeObject * */
	__u64 instr;	/* its last instruction's address (prev_instr, instr_ptr) */
	/*
	 * the frame's own address: the shim each eval loop call puts below
	 * its frames (3.12 on) is a local of that call, so its address tells
	 * the call's native frame by the stack
	 */
	__u64 addr;
	__u32 entry;	/* frame_entry's byte: is_entry, or the frame's owner */
	__u32 pad;
};

struct memtrail_event_deep {
	struct memtrail_event_hdr hdr;
	__u32 tid;
	__u32 kind;	/* enum memtrail_kind */
	__u32 phase;
	__u32 objects;	/* allocations it stands for, 1/MEMTRAIL_OBJ_ONE */
	__u64 addr;	/* the allocation, the key of its free */
	__u64 weight;	/* bytes it stands for */
	__u64 regs[MEMTRAIL_DEEP_REGS];
	__u32 stack_len;	/* bytes of stack[] read, from regs' stack pointer */
	__u32 tracked;	/* its free will be told (live allocations are kept) */
	__u32 py_status;	/* enum memtrail_py_status */
	__u32 n_py;
	/*
	 * The thread's pending uretprobe returns, newest first: a function
	 * probed at its return (a --scope rule's, a device call, an allocator
	 * around this one) returns to the trampoline at URET_TRAMP until it
	 * does; each gives the stack slot (x86-64; arm64: the stack pointer)
	 * at its entry and its real return address
	 */
	/*
	 * A mapping's frame-pointer stack too (a site_stacks id, or
	 * MEMTRAIL_STACK_NONE, and the leaf's caller): where the process is
	 * gone before its mappings are read, its chain cannot be unwound
	 */
	__s32 fp_stack;
	__u32 fp_pad;
	__u64 fp_caller;
	__u64 uret_tramp;	/* 0: none known */
	__u32 n_uret;
	__u32 uret_pad;
	struct {
		__u64 stack, ret;
	} uret[MEMTRAIL_DEEP_URET];
	struct memtrail_py_frame py[MEMTRAIL_PY_FRAMES];
	__u8 stack[MEMTRAIL_DEEP_STACK_BYTES];
};

struct memtrail_event_deep_free {
	struct memtrail_event_hdr hdr;
	__u64 addr;
	__u32 kind;	/* the sample's: heap, or mapped (a range, freed in parts) */
	__u32 pad;
	__u64 bytes;	/* freed; 0: all of it */
	__u64 rest;	/* where what stays of a range starts now; 0: nothing stays */
};

/* The malloc family: what each probed function does with its arguments (cookie op). */
enum memtrail_heap_op {
	MEMTRAIL_HEAP_MALLOC = 1,	/* (size): malloc, valloc, pvalloc, mallocx, new */
	MEMTRAIL_HEAP_CALLOC,		/* (n, size) */
	MEMTRAIL_HEAP_REALLOC,		/* (ptr, size): realloc, rallocx */
	MEMTRAIL_HEAP_REALLOCARRAY,	/* (ptr, n, size) */
	MEMTRAIL_HEAP_MEMALIGN,		/* (align, size): memalign, aligned_alloc */
	MEMTRAIL_HEAP_POSIX_MEMALIGN,	/* (void **out, align, size) -> 0 */
	MEMTRAIL_HEAP_FREE,		/* entry: (ptr, ...) */
};
/* operations are 1 to this; before 5.15 each has an entry program (sites.bpf.c) */
#define MEMTRAIL_HEAP_OPS MEMTRAIL_HEAP_FREE

struct memtrail_event_heap_budget {
	struct memtrail_event_hdr hdr;
	__u64 hits;
};

/* Context of the mt_mark program, which 'memtrail mark' runs. */
struct memtrail_mark_args {
	__u32 tgid;
	__u32 pad;
	char name[MEMTRAIL_PHASE_NAME_LEN];
};

#endif /* MEMTRAIL_H */
