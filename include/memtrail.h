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
#define MEMTRAIL_PAGE_SHIFT 12
/* phase names: printable ASCII, 1 to 63 bytes */
#define MEMTRAIL_PHASE_NAME_LEN 64
/* prctl option of the in-program marker (include/memtrail_marker.h): 'MTPH' */
#define MEMTRAIL_PRCTL_PHASE 0x4d545048
/* most --phase rules */
#define MEMTRAIL_RULES_MAX 64
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
	MEMTRAIL_LOST_TARGETS,		/* targets map full: a process went untraced */
	MEMTRAIL_LOST_CELLS,		/* cells map full: a delta was dropped */
	MEMTRAIL_LOST_MM,		/* mm_state map full: a delta was dropped */
	MEMTRAIL_LOST_PHASE_NAMES,	/* a marker call with an invalid phase name */
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

/* A traced process, keyed by tgid. */
struct memtrail_target {
	__u32 ppid;
	__u32 flags;		/* MEMTRAIL_TARGET_* */
	__u32 phase;		/* sequence number of the current phase */
	__u32 pad;
	__u64 mm;		/* address of its mm_struct, 0 until known */
	__u64 pressure_ns;	/* when its last pressure event was sent */
};

/*
 * Last absolute value seen per kind for one address space. Sources that
 * report absolute counters (rss_stat, data_vm) become signed deltas against
 * it, so every source feeds the same accounting helper.
 */
struct memtrail_mm_state {
	__u32 tgid;
	__u32 pad;
	__s64 last[MEMTRAIL_KIND_MAX];
};

enum memtrail_event_type {
	MEMTRAIL_EV_TARGET = 1,	/* a process became a target */
	MEMTRAIL_EV_EXEC,	/* a target called exec */
	MEMTRAIL_EV_EXIT,	/* a target's last thread exited */
	MEMTRAIL_EV_PHASE,	/* a target entered a phase */
	MEMTRAIL_EV_OOM,	/* the OOM killer chose a target (before the kill lands) */
	MEMTRAIL_EV_SIGNAL,	/* SIGKILL or SIGTERM generated for a target */
	MEMTRAIL_EV_PRESSURE,	/* a target's memory cgroup started reclaim */
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
	char comm[MEMTRAIL_COMM_LEN];
	char args[MEMTRAIL_ARGS_LEN];
};

struct memtrail_event_exit {
	struct memtrail_event_hdr hdr;
	__u32 code;	/* exit status, 0-255, when exited normally */
	__u32 signal;	/* terminating signal, 0 when exited normally */
	__u32 core_dumped;
	__u32 pad;
};

struct memtrail_event_phase {
	struct memtrail_event_hdr hdr;
	__u32 seq;	/* the phase's sequence number in its target */
	__u32 pad;
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

/* Context of the mt_mark program, which 'memtrail mark' runs. */
struct memtrail_mark_args {
	__u32 tgid;
	__u32 pad;
	char name[MEMTRAIL_PHASE_NAME_LEN];
};

#endif /* MEMTRAIL_H */
