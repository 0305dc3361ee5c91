/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * What every BPF source starts from: the kernel's types, libbpf's helpers,
 * memtrail.h, the atomics (or their stand-ins in the compat object) and the
 * settings user space writes before load.
 */
#ifndef MEMTRAIL_BASE_BPF_H
#define MEMTRAIL_BASE_BPF_H

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
/* the running kernel's page size: 4, 16 or 64 KiB (arm64), as a shift */
extern const volatile __u32 page_shift;
/* bpf_task_pt_regs (5.15), bpf_find_vma (5.17): code that calls them is dead to the verifier without */
extern const volatile __u32 has_task_regs;
extern const volatile __u32 has_find_vma;
/* by number: headers of a 5.10 build kernel do not name it (5.11), CO-RE objects use it from 5.11 */
#define MT_MAP_TYPE_TASK_STORAGE 29
extern const volatile __u32 has_scopes;	/* --scope rules: scope_stacks in use */
/* Allocation sites (sites.bpf.c) */
extern const volatile __u32 sites_mapping;	/* mapping sites on */
extern const volatile __u32 sites_device;	/* device allocations' sites */
extern const volatile __u32 map_deep;		/* mapping sites as deep samples */
extern const volatile __u64 map_deep_min;	/* of sections growing it this much or more */
extern const volatile __u64 sites_from;	/* mapped bytes from which sections have stacks */
extern const volatile __u64 deep_room;	/* unread bytes past which no deep sample is taken */
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

#endif /* MEMTRAIL_BASE_BPF_H */
