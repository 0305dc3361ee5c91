/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * What record and watch share: the tracer's events turned into targets,
 * phases, verdict facts and a timeline per target, kept in a trail.
 * record keeps everything until it stops; watch keeps a window of each
 * timeline and lets its hooks write snapshots and verdicts, then forgets.
 */
#ifndef MEMTRAIL_SESSION_H
#define MEMTRAIL_SESSION_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "devices.h"
#include "heap.h"
#include "phase.h"
#include "sites.h"
#include "tracer.h"
#include "trail.h"

struct session;

struct session_hooks {
	/* The OOM killer chose TT (its facts are set, its levels fresh); it dies next. */
	void (*oom)(struct session *s, struct trail_target *tt,
		    const struct memtrail_event_oom *e);
	/* TT's memory cgroup started reclaim. */
	void (*pressure)(struct session *s, struct trail_target *tt,
			 const struct memtrail_event_pressure *e);
	/*
	 * TT ended; tt->verdict is set when it died by SIGKILL. Hooks must not
	 * remove targets (callers hold indexes): remove them after a poll.
	 */
	void (*ended)(struct session *s, struct trail_target *tt);
	/*
	 * A device allocation of TT ran out of memory; EV is the event as the
	 * trail has it, s->device_oom_sites the sites of its live device
	 * allocations then (NULL: none or no sites; the session's).
	 */
	void (*device_oom)(struct session *s, struct trail_target *tt, json_t *ev);
};

/*
 * --max-targets by default: a busy Kubernetes node runs 10,000 processes
 * (at about 930 bytes of kernel map each, 15 MiB for the targets).
 */
#define SESSION_MAX_TARGETS 16384

#define SESSION_LATE_SAID 16

struct session {
	struct trail trail;
	struct tracer *tracer;
	struct devices *devices;	/* accelerator runtimes; NULL: not probed */
	struct heap *heap;		/* heap probes; NULL: none */
	struct sites *sites;		/* allocation sites; NULL: not kept */
	struct trail_sites *device_oom_sites;	/* while a device_oom hook runs */
	uint64_t next_harvest_ms;
	uint64_t next_retire_ms;	/* ended targets' sites taken at most this often */
	struct rescan {			/* targets whose libraries to look at again */
		uint32_t pid;
		uint64_t due_ms;
	} *rescans;
	size_t n_rescans, cap_rescans;
	/* a sample's batch read of the cells, by target index */
	struct batch_cell {
		struct memtrail_cell cell;
		uint32_t phase;
		bool have;	/* cell holds the open phase's cell as read */
		bool alive;	/* the kernel had it, not exited (read at a liveness check) */
	} *batch;
	size_t n_batch, cap_batch;
	bool no_batch;		/* the kernel has no batch lookups */
	bool no_dirty;		/* nor the kernel's names of changed targets: read all */
	uint64_t t0_ns;		/* CLOCK_MONOTONIC at t_ms 0 */
	size_t live;		/* targets that have not exited */
	/* watch and top keep the living: the pids of targets ended since the last removal */
	bool remove_ended;
	uint32_t *ended;
	size_t n_ended, cap_ended;
	bool ended_all;		/* some not listed (out of memory): a pass over all targets */
	bool keep_events;	/* keep the trail's event list (record) */
	uint64_t late;		/* runtimes a process mapped before their probes were live */
	struct {
		uint32_t pid;
		char name[MEMTRAIL_LIB_NAME_LEN];
	} late_said[SESSION_LATE_SAID];	/* the last said, each said once */
	bool attribute;		/* name each target's container and pod (record) */
	uint64_t keep_ms;	/* timeline window per target; 0 keeps all */
	const struct session_hooks *hooks;
	void *ctx;		/* for the hooks */
	const char *pods_dir;	/* the kubelet's pod log directory, NULL: the default */
	int err;		/* -ENOMEM once something could not be kept */
	uint64_t events;	/* ring-buffer records handled */
	/* exits the ring buffer may have dropped: check /proc for those gone */
	uint64_t lost_seen;
	uint64_t next_liveness_ms;
};

/* The signal (INT, TERM, HUP) that asked to stop, 0 until one did. */
extern volatile sig_atomic_t session__stop_signal;
/* A second stop signal: what the first one left to finish is given up. */
extern volatile sig_atomic_t session__stop_again;
/* Stop on SIGINT, SIGTERM and SIGHUP (session__stop_signal); ignore SIGPIPE. */
void session__install_signals(void);

/* Milliseconds since the session started, of a CLOCK_MONOTONIC time. */
uint64_t session__ms(const struct session *s, uint64_t ts_ns);
uint64_t session__now_ms(const struct session *s);

/* The tracer's event callback; CTX is the session. */
int session__on_event(void *ctx, const void *data, size_t size);

struct trail_target *session__live(struct session *s, uint32_t pid);
/*
 * A new target. FORKED: a fork of PPID, whose cmdline and cgroup it starts
 * with (read from /proc only when the parent is unknown); an exec or a move
 * to another cgroup is seen at its exec.
 */
struct trail_target *session__new_target(struct session *s, uint32_t pid, uint32_t ppid,
					 const char *comm, uint64_t t_ms, bool forked);
/* Levels now into tt->current/peak; a timeline sample when they moved (or ALWAYS). */
void session__refresh(struct session *s, struct trail_target *tt, uint64_t t_ms, bool always);
/* Every live target's levels; ends those found gone whose exit was lost. */
void session__sample_all(struct session *s, uint64_t t_ms);
/* The open phase of a live target, as the closed ones are reported. */
void session__open_phase(struct session *s, const struct trail_target *tt, uint64_t t_ms,
			 struct trail_phase *p);
/*
 * Probe accelerator runtimes: the libraries every target maps, from now on.
 * LOADER_ONLY (--no-devices): only the dynamic linker's hook, where holds
 * are on (heap probes, sites).
 */
int session__open_devices(struct session *s, bool loader_only);
/* Keep allocation sites, and with HEAP (not NULL) probe the malloc family. */
int session__open_sites(struct session *s, const struct heap_config *heap);
/* At the end: every target's sites into the trail. */
void session__finish_sites(struct session *s);
/* Periodic work besides sampling: libraries to look at, sites, the heap budget. */
void session__tick(struct session *s, uint64_t t_ms);
/* Told of an ended target just before it leaves the trail. */
typedef void (*session_removed_fn)(void *ctx, struct trail_target *tt);
/*
 * With remove_ended set (watch and top keep the living): the targets that
 * ended since the last call leave the trail, FN (may be NULL) told of each
 * first. A look at each ended one; a pass over every target only when a
 * new process took an ended one's pid meanwhile, or memory ran out.
 */
void session__remove_ended(struct session *s, session_removed_fn fn, void *ctx);
/* At the end: every live target's phases closed and levels final. */
void session__close_all(struct session *s, uint64_t t_ms);
/* Detach and free all a session holds (heap, sites, devices, tracer, trail). */
void session__destroy(struct session *s);

#endif
