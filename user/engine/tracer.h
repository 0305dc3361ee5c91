/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The BPF side as one object: open, configure, load and attach the
 * skeleton, feed ring-buffer events to a callback, read levels, detach.
 */
#ifndef MEMTRAIL_TRACER_H
#define MEMTRAIL_TRACER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "memtrail.h"

struct tracer;

/* --phase NAME=BINARY:SYMBOL: entering SYMBOL in BINARY starts phase NAME. */
struct phase_rule {
	char name[MEMTRAIL_PHASE_NAME_LEN];
	const char *binary;
	const char *symbol;
	bool scoped;	/* --scope: the phase ends at the function's return */
};

/* Allocation sites: what is traced, and how much of it. */
struct tracer_sites {
	bool mapping;		/* stacks of mapping syscalls (default on) */
	bool faults;		/* stacks of user page faults */
	bool device;		/* stacks of device allocations (CUDA, Neuron) */
	uint32_t fault_sample;	/* one fault in this many */
	bool heap;		/* the malloc family (links per process, tracer__attach_heap) */
	bool heap_track;	/* keep every live allocation: exact heap levels and in-use */
	uint64_t heap_sample;	/* sampling rate in bytes, 0: every allocation */
	bool heap_budget;	/* an overhead budget: tell user space when a window is spent */
	bool heap_deep;		/* sampled allocations unwound in user space (sites__deep) */
	bool map_deep;		/* mapping sites too, where BPF can read user registers */
	uint64_t map_deep_min;	/* of sections growing mapped memory this much or more */
	uint64_t map_from;	/* mapping sites' stacks once a process maps this much; 0: always */
	uint32_t stacks;	/* distinct stacks kept; 0: TRACER_STACKS (with heap _HEAP) */
};

/* Distinct stacks kept by default: a malloc-heavy program (import torch) has tens of thousands */
#define TRACER_STACKS 16384
#define TRACER_STACKS_HEAP 131072
/* The ring buffer's size under --unwind dwarf (1 MiB otherwise) */
#define TRACER_RING_DEEP (16 << 20)
/* ... and where only large mapping sections are deep (watch, map_deep_min) */
#define TRACER_RING_DEEP_LARGE (4 << 20)
/* ... of which deep samples never take the last TRACER_RING_EXACT bytes (the exact records') */
#define TRACER_RING_EXACT (1 << 20)
/* Kernel memory per stack kept (both tables' elements), allocated as stacks are seen */
#define TRACER_STACK_BYTES 1024

struct tracer_config {
	enum memtrail_filter mode;
	const uint32_t *pids;	/* MEMTRAIL_FILTER_PID: the listed PIDs */
	size_t n_pids;
	bool await_exec;	/* the PIDs are held commands: account from their exec */
	const char *comm;	/* MEMTRAIL_FILTER_COMM */
	/* MEMTRAIL_FILTER_CGROUP: kernfs ids of the cgroups, one hierarchy */
	uint64_t cgroup_ids[MEMTRAIL_FILTER_CGROUPS_MAX];
	size_t n_cgroups;
	int cgroup_subsys;	/* their v1 controller index, -1 for cgroup v2 */
	uint32_t max_targets;
	bool no_devices;	/* CUDA and Neuron runtimes not probed: nor their programs loaded */
	const struct phase_rule *rules;
	size_t n_rules;
	struct tracer_sites sites;
};

/* Called for every ring-buffer record; a non-zero return stops the poll. */
typedef int (*tracer_event_fn)(void *ctx, const void *data, size_t size);
typedef void (*tracer_fd_fn)(void *ctx);

/*
 * The privileges to load BPF programs: 0, or -EPERM with the one-line error
 * logged. Commands ask before they create anything.
 */
int tracer__check_caps(void);
/* 0, or -errno with a one-line error already logged. */
int tracer__open(struct tracer **out, const struct tracer_config *cfg,
		 tracer_event_fn fn, void *ctx);
struct kernel_features;
/* What this kernel offers, probed at open. */
const struct kernel_features *tracer__features(const struct tracer *t);
/* Bytes of kernel memory memtrail's BPF maps hold (their memlock). */
uint64_t tracer__map_bytes(const struct tracer *t);
/* Walk all tasks once: adopt matching processes, refresh every target's levels. */
int tracer__scan(struct tracer *t);
/* Wait up to timeout_ms for events; 0 or -errno (EINTR is not an error). */
int tracer__poll(struct tracer *t, int timeout_ms);
/*
 * FD is polled beside the ring buffer from now on (-1: none); FN(CTX) runs
 * when it is readable, after the events that had come by then are read.
 */
void tracer__watch_fd(struct tracer *t, int fd, tracer_fd_fn fn, void *ctx);
/* The sequence number of a target's current phase; -ENOENT when not traced. */
int tracer__read_phase(struct tracer *t, uint32_t tgid, uint32_t *seq);
/* Levels of (tgid, phase); -ENOENT when nothing was accounted there. */
int tracer__read_cell(struct tracer *t, uint32_t tgid, uint32_t phase,
		      struct memtrail_cell *cell);
/* One entry of a map: its key and value, as the map holds them. */
typedef void (*tracer_entry_fn)(void *ctx, const void *key, const void *value);
/*
 * Every cell the kernel holds (key struct memtrail_cell_key, value struct
 * memtrail_cell), a few system calls for all (batch lookups, 5.6 on): FN for
 * each. 0, or -errno with nothing seen (-EINVAL, -ENOTSUPP: no batch
 * operations here; read cells one by one then). A cell created or a batch
 * failing while they run may leave cells out.
 */
int tracer__each_cell(struct tracer *t, tracer_entry_fn fn, void *ctx);
/*
 * The same for the kernel's targets (key a uint32_t tgid, value struct
 * memtrail_target; exited ones flagged MEMTRAIL_TARGET_EXITED).
 */
int tracer__each_target(struct tracer *t, tracer_entry_fn fn, void *ctx);
/*
 * The targets whose levels changed since the last call, named by the kernel
 * (key a uint32_t tgid): FN for each, taken out; then the next generation
 * begins. Read the named targets' levels after this returns. Nothing is
 * named before the first call: read each new target once. *ALL is set when
 * the kernel could not name one (its map was full): read every target this
 * time. 0, or -errno with nothing taken (no batch operations: read every
 * target at every sample).
 */
int tracer__take_dirty(struct tracer *t, tracer_entry_fn fn, void *ctx, bool *all);
/* Drop the cell of a phase whose figures were read. */
void tracer__drop_cell(struct tracer *t, uint32_t tgid, uint32_t phase);
/*
 * Read and drop a phase's cell at once (one system call from Linux 5.14,
 * a lookup and a delete before); -ENOENT when it has none.
 */
int tracer__take_cell(struct tracer *t, uint32_t tgid, uint32_t phase, struct memtrail_cell *cell);
/* Drop a target from the kernel's maps once its final levels were read. */
void tracer__forget(struct tracer *t, uint32_t tgid);
/* The same for a target whose end was read: at the end of this poll, with the others. */
void tracer__forget_ended(struct tracer *t, uint32_t tgid);
/*
 * PIDS (sorted): targets about to be forgotten, their pids then free to be
 * targets again; false: not now, they are kept until a later poll.
 */
typedef bool (*tracer_ended_fn)(void *ctx, const uint32_t *pids, size_t n);
/*
 * FN is called with the targets ended since they were last forgotten, just
 * before the kernel's map forgets them: until then a process given one of
 * their pids is no target (counted lost), so what is keyed by pid can be
 * taken and cleared.
 */
void tracer__on_ended(struct tracer *t, tracer_ended_fn fn, void *ctx);
void tracer__lost(struct tracer *t, uint64_t lost[MEMTRAIL_LOST_MAX]);
/* The BPF side's drop counter WHY alone (not MEMTRAIL_LOST_SKIPPED), summed over CPUs. */
uint64_t tracer__lost_one(struct tracer *t, uint32_t why);
/* Device-runtime probes on one file: how they were attached. */
struct tracer_probe_set {
	int fd[2];			/* uprobe_multi links, entry and return; -1: none */
	struct bpf_link **links;	/* else one perf-event link per probe */
	size_t n_links;
};
/* A probe that could not attach: function I (-1: the whole set), -errno. */
typedef void (*tracer_probe_fail_fn)(void *ctx, ssize_t i, int err);
/*
 * Device-runtime probes on N functions of PATH in every process: the entry
 * program at each OFF[i] with COOKIE[i] (MEMTRAIL_COOKIE), the return
 * program too where RET[i]. One uprobe_multi link per direction where the
 * kernel has them (removed in one grace period), else a perf-event link per
 * probe (MEMTRAIL_NO_UPROBE_MULTI=1 forces that). SET holds the links; the
 * number of functions probed is returned, FAIL told of each failure.
 */
size_t tracer__attach_device_set(struct tracer *t, const char *path, const uint64_t *off,
				 const uint64_t *cookie, const bool *ret, size_t n,
				 struct tracer_probe_set *set, tracer_probe_fail_fn fail, void *ctx);
/* Remove them all (any probe set). */
void tracer__detach_device_set(struct tracer_probe_set *set);
/* The distinct stacks CFG keeps (the size of the stack table). */
uint32_t tracer__stacks(const struct tracer_config *cfg);
/*
 * The files PID was first to map and is to be scanned for, as the kernel's hook saw
 * them (lib_files keys: on overlayfs, the overlay's inode, not the one
 * /proc/PID/maps shows); at most MAX into KEYS, their number.
 */
size_t tracer__lib_pending(const struct tracer *t, uint32_t pid, struct memtrail_lib_key *keys,
			   size_t max);
/*
 * PID ended before its scan could read the files new to memtrail it mapped:
 * FN(CTX, PID, KEY, NAME, MAPPED_NS) for each (the hook's key, its own name,
 * cut; when it was mapped, CLOCK_MONOTONIC), and the next process that maps
 * one is scanned at once again.
 */
typedef void (*tracer_name_fn)(void *ctx, uint32_t pid, const struct memtrail_lib_key *key,
			       const char *name, uint64_t mapped_ns);
void tracer__lib_unseen(struct tracer *t, uint32_t pid, tracer_name_fn fn, void *ctx);
/* The file of KEY is not scanned any more: the next target that maps it is scanned at once. */
void tracer__lib_forget(struct tracer *t, const struct memtrail_lib_key *key);
/* Whether files mapped executable are tracked, new ones told at once (lib_files in use). */
bool tracer__tracking(const struct tracer *t);
/* The same for every generation of (DEV, INO): a walk of the whole map. */
void tracer__lib_forget_file(struct tracer *t, uint64_t dev, uint64_t ino);
typedef void (*tracer_alloc_fn)(void *ctx, uint64_t addr, const struct memtrail_dev_alloc *a);
/*
 * Each device allocation of TGID live at its device OOM number EPOCH (0: live
 * now), VMM handles too; then, for an EPOCH, the kernel stops keeping what
 * was freed since. 0 or -errno.
 */
int tracer__device_allocs(struct tracer *t, uint32_t tgid, uint32_t epoch, tracer_alloc_fn fn,
			  void *ctx);
/* Drop what the kernel keeps of TGID's device memory (it ended; at an exec, mt_dev_exec does). */
void tracer__device_forget(struct tracer *t, uint32_t tgid);
/*
 * Heap probes on N functions of PATH for process PID (and its later execs):
 * the entry program, or the return program when RET, with one cookie each
 * (MEMTRAIL_COOKIE). One uprobe_multi link: a file descriptor, or -errno.
 */
int tracer__attach_heap(struct tracer *t, bool ret, int pid, const char *path,
			const uint64_t *offsets, const uint64_t *cookies, size_t n);
/* Whether heap probes are uprobe_multi links (Linux 6.6), else tracer__attach_heap_each. */
bool tracer__heap_multi(const struct tracer *t);
/* Whether BPF tells each target's code mappings (MEMTRAIL_EV_MAP; Linux 6.7, sites on). */
bool tracer__maps_told(const struct tracer *t);
/*
 * Elsewhere, where sites name stacks: the ring buffer of pids whose maps BPF
 * asks to be read now (maps_reader.h), or -1.
 */
int tracer__maps_wanted_fd(const struct tracer *t);
/*
 * Kernels without uprobe_multi links: the heap probes of PID on PATH as one
 * perf-event uprobe link per function and direction, into SET (removed with
 * tracer__detach_device_set). 0 or -errno (nothing left attached).
 */
int tracer__attach_heap_each(struct tracer *t, int pid, const char *path,
			     const uint64_t *entry_off, const uint64_t *entry_cookie, size_t n_entry,
			     const uint64_t *ret_off, const uint64_t *ret_cookie, size_t n_ret,
			     struct tracer_probe_set *set);
/* Heap probe hits of TGID so far; 0 when none. */
uint64_t tracer__heap_hits(struct tracer *t, uint32_t tgid);
/* Tell user space (MEMTRAIL_EV_HEAP_BUDGET) when TGID's hits reach ALLOW; 0: never. */
void tracer__heap_allow(struct tracer *t, uint32_t tgid, uint64_t allow);
/* Make PID, a child of memtrail's, a target for heap probe calibration, or stop. */
int tracer__calibration_target(struct tracer *t, uint32_t pid, bool on);
/*
 * PID runs the CPython interpreter P: deep samples read its Python frames
 * (P NULL: no longer, it exec'd). 0 or -errno.
 */
int tracer__py_proc(struct tracer *t, uint32_t pid, const struct memtrail_py_proc *p);
typedef void (*tracer_site_fn)(void *ctx, const struct memtrail_site_key *k,
			       const struct memtrail_site *v);
/* Take a site out of the kernel with its figures, atomically; 0 or -errno. */
int tracer__site_take(struct tracer *t, const struct memtrail_site_key *k,
		      struct memtrail_site *v);
/* Each allocation site the kernel holds. */
void tracer__sites(struct tracer *t, tracer_site_fn fn, void *ctx);
/* The user stack with this id, innermost first; its depth, or -errno. */
int tracer__stack(struct tracer *t, int32_t id, uint64_t ips[MEMTRAIL_SITE_DEPTH]);
/* Drop the kernel's stacks of IDS (N): no site names them any more. */
void tracer__stacks_forget(struct tracer *t, const int32_t *ids, size_t n);
/* Drop what the kernel keeps of TGIDS' (N, sorted) sites, live allocations and mappings. */
void tracer__sites_forget(struct tracer *t, const uint32_t *tgids, size_t n);
/* Detach and free everything; NULL is fine. */
void tracer__destroy(struct tracer *t);

#endif
