/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The maps every program shares: targets, cells, phases, stacks, sites,
 * the ring buffer. Each __weak, so every object may include them: the
 * linker keeps one copy.
 */
#ifndef MT_MAPS_BPF_H
#define MT_MAPS_BPF_H

#include "memtrail_base.bpf.h"

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

/*
 * Processes whose /proc/PID/maps user space should read now (a __u32 tgid
 * each), where BPF does not tell code mappings itself (libs_urgent): a
 * thread of its own reads them, so that a short process's maps are read
 * while it lives even when the event loop is busy (maps_reader.c).
 */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 << 10);
} maps_wanted SEC(".maps") __weak;

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

/* CPython interpreters of targets, by tgid (user space writes them as it finds them). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct memtrail_py_proc);
} py_procs SEC(".maps") __weak;

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

#endif /* MT_MAPS_BPF_H */
