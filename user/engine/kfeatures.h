/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * What the running kernel offers memtrail, probed once at start from its BTF
 * and with tiny BPF loads: which variant of each program loads, and what
 * cannot work here and why. One binary for every kernel from 5.10 on.
 */
#ifndef MEMTRAIL_KFEATURES_H
#define MEMTRAIL_KFEATURES_H

#include <stdbool.h>
#include <jansson.h>

/* How a source works on this kernel. */
enum feature_state {
	FEATURE_YES = 0,	/* as designed */
	FEATURE_FALLBACK,	/* another way, as exact (the note says how) */
	FEATURE_DEGRADED,	/* works with a stated bound or less (the note says what) */
	FEATURE_NO,		/* cannot work here (the note says why) */
};

enum feature_id {
	FEAT_BTF = 0,		/* kernel BTF: CO-RE, tp_btf */
	FEAT_ATOMICS,		/* BPF atomic fetch operations (5.12) */
	FEAT_RSS,		/* resident memory from rss_stat */
	FEAT_MAPPED,		/* mapped memory exact from mmap_lock sections */
	FEAT_MAP_SITES,		/* call sites of mapped memory (mmap_lock sections) */
	FEAT_EXIT,		/* levels and codes at exit */
	FEAT_MARKER,		/* the in-program phase marker */
	FEAT_MARK,		/* memtrail mark (syscall programs, 5.14) */
	FEAT_RULES,		/* --phase rules (bpf_cookie, 5.15) */
	FEAT_OOM,		/* oom:mark_victim */
	FEAT_HEAP,		/* --heap (uprobe_multi links, 6.6) */
	FEAT_DEVICE,		/* device runtimes (task storage, bpf_cookie) */
	FEAT_DEVICE_MULTI,	/* device probes as uprobe_multi links */
	FEAT_DEVICE_SITES,	/* device call sites after exit (bpf_find_vma, 5.17) */
	FEAT_NEW_LIBS,		/* a file new to memtrail probed as it is first mapped */
	FEAT_SITE_MAPS,		/* a process's code mappings read in BPF (task_vma iterator, 6.7) */
	FEAT_GATE,		/* record's command waits at opens of new files (fanotify permission events) */
	FEAT_MAX,
};

struct feature {
	const char *name;
	enum feature_state state;
	char note[224];
};

struct kernel_features {
	char release[65];
	char machine[65];	/* uname's: x86_64, aarch64 */
	long page_size;		/* bytes: 4 KiB, or 16 or 64 KiB on some arm64 kernels */
	char btf_source[64];
	/* arities of tracepoints (arguments after the hidden first), -1: missing */
	int exit_args;
	int mmap_lock_args;
	int mark_victim_args;
	bool prctl_tp;
	bool rss_percpu;	/* mm->rss_stat is percpu_counter (6.2) */
	bool atomics;
	bool bpf_loop;
	bool for_each_elem;
	bool find_vma;
	bool percpu_elem;
	bool attach_cookie;
	bool task_pt_regs;
	bool task_btf;
	bool task_storage;
	bool syscall_prog;
	bool uprobe_multi;
	bool vma_iter;		/* bpf_iter_task_vma_* kfuncs (6.7) */
	int perm_events;	/* fanotify permission events: 0, or the -errno of fanotify_init */
	enum { MMAP_HOOK_NONE, MMAP_HOOK_LSM, MMAP_HOOK_FENTRY, MMAP_HOOK_LOCK,
	       MMAP_HOOK_SYSCALL } mmap_hook;
	struct feature f[FEAT_MAX];
};

/* Whether this process may load tracing programs (CAP_SYS_ADMIN, or CAP_BPF and CAP_PERFMON). */
bool features__have_caps(void);
/* Probe the running kernel; 0, or -errno with a one-line error logged (no BTF). */
int features__probe(struct kernel_features *kf);
/*
 * Each feature's state and note from the facts probed (the fields above
 * F): what features__probe does after probing, apart for the unit tests.
 */
void features__decide(struct kernel_features *kf);
/* The kernel has the task_vma iterator but refused its programs (-ERR): site_maps degraded. */
void features__site_maps_refused(struct kernel_features *kf, int err);
/* Print the table for people (memtrail features). */
void features__print(const struct kernel_features *kf, FILE *out);
/* The table as JSON: {"release", "btf", "features": {name: {"state", "note"}}}. */
json_t *features__json(const struct kernel_features *kf);
const char *features__state_name(enum feature_state s);

#endif
