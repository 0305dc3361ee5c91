/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A trail: what one recording learned, in memory and as a versioned JSON
 * file (format in README.md). record builds one, report reads one back.
 */
#ifndef MEMTRAIL_TRAIL_H
#define MEMTRAIL_TRAIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <jansson.h>

#include "memtrail.h"
#include "phase.h"
#include "pidmap.h"
#include "trail_sites.h"
#include "trailstream.h"
#include "verdict.h"

/*
 * What a trail read back may hold (anything else is rejected: a trail is
 * anyone's file): PIDs up to the kernel's PID_MAX_LIMIT; times in ms whose
 * ns still fit in 64 bits (Perfetto's us are computed from them); sizes
 * (of allocations, devices, limits) from 0; levels within 2^59 bytes either
 * way, more than any address space, so that ten kinds' sum fits. A level is
 * kept from changes and can dip below zero in a real trail (an rss level of
 * a few MiB under zero has been seen), never by that much.
 */
/* TRAIL_PID_MAX, TRAIL_T_MS_MAX, TRAIL_LEVEL_MAX and struct trail_sample: trailstream.h */

/* A device's memory size as its runtime told the target (cuMemGetInfo and the like). */
#define TRAIL_DEVICE_LIMITS 32
struct trail_device_limit {
	int kind;		/* enum memtrail_kind: cuda_device, neuron_device */
	int32_t device;		/* -1: unknown */
	uint64_t bytes;
};

struct trail_target {
	uint32_t pid;
	uint32_t ppid;
	char comm[MEMTRAIL_COMM_LEN];
	char *cmdline;		/* space-joined argv, NULL when unknown */
	char *cgroup;		/* cgroup path, NULL when unknown */
	struct container_attr *attribution;	/* its cgroup's container and pod, or NULL */
	uint64_t cgroup_id;	/* while recording: the v2 cgroup that path is of, 0: unknown */
	uint64_t start_ms;
	uint64_t end_ms;
	bool exited;
	int exit_code;
	int exit_signal;
	int64_t current[MEMTRAIL_KIND_MAX];
	int64_t peak[MEMTRAIL_KIND_MAX];
	int64_t baseline[MEMTRAIL_KIND_MAX];	/* the level when first seen (attach, exec, fork) */
	struct trail_sample *timeline;
	size_t n_samples;
	size_t cap_samples;
	struct phase_log phases;
	struct trail_device_limit dev_limits[TRAIL_DEVICE_LIMITS];
	uint32_t n_dev_limits;
	struct verdict *verdict;	/* why it died by SIGKILL, or NULL */
	struct trail_sites *sites;	/* allocation sites, or NULL */
	bool sites_final;	/* taken as it ended: its pid's later sites are another process's */
	/* while recording: what is known of its death so far */
	struct verdict_facts facts;
	/* while recording: the phase the target is in */
	uint32_t phase_seq;
	/* while recording: levels read at a sample (in phase sampled_seq), changed since */
	bool sampled, dirty;
	uint32_t sampled_seq;
	char phase_name[MEMTRAIL_PHASE_NAME_LEN];
	uint64_t phase_start_ms;
};

struct trail {
	int version;
	char started[32];	/* UTC, ISO 8601 */
	uint64_t duration_ms;
	uint32_t interval_ms;
	uint32_t kinds;		/* bit per kind that had a source */
	uint32_t phase_history;	/* phases listed per target; 0 unbounded */
	uint32_t phase_names;	/* names aggregated per target; 0: PHASE_NAMES_MAX */
	char *command;		/* how targets were chosen, for people */
	struct trail_target *targets;
	size_t n_targets;
	size_t cap_targets;
	struct pidmap by_pid;	/* pid -> index of its most recent target */
	json_t *events;		/* array of event objects */
	/* read from a watch file: its "snapshot" object, or the whole verdict file */
	json_t *snapshot;
	json_t *verdict_doc;
	struct container_attr *doc_attr;	/* the container and pod either names */
	uint64_t lost[MEMTRAIL_LOST_MAX];
	/* the kernel and its feature table ('memtrail features --json'), or NULL */
	json_t *kernel;
};

int trail__init(struct trail *t);
/* started: now, UTC. */
void trail__set_started(struct trail *t);
void trail__free(struct trail *t);

/* A new target, zeroed but for pid; NULL when out of memory. */
struct trail_target *trail__add_target(struct trail *t, uint32_t pid);
/* The most recent target with this pid, or NULL. */
struct trail_target *trail__find_target(struct trail *t, uint32_t pid);
/* A sample at T_MS, or at the last one's time where that is later; -ENOMEM. */
int trail__add_sample(struct trail_target *tt, uint64_t t_ms, const int64_t level[]);
/* Set (kind, device)'s size; false when the table is full. */
bool trail__set_device_limit(struct trail_target *tt, int kind, int32_t device, uint64_t bytes);
/* The sizes of KIND's devices added up (the memory a process spread over them has), 0 if none. */
uint64_t trail__device_limit(const struct trail_target *tt, int kind);
/* Drop samples before SINCE_MS but the last of them (the level at SINCE_MS). */
void trail__trim_timeline(struct trail_target *tt, uint64_t since_ms);
/*
 * Remove a target (freeing what it holds) in O(1): the last target takes
 * its place, so order and pointers into targets change. An older target of
 * the same pid is not found again (watch and top remove every ended one).
 */
void trail__remove_target(struct trail *t, struct trail_target *tt);
/* One phase as the trail writes it. */
json_t *trail__phase_json(const struct trail *t, const struct trail_phase *p);
/* One target as the trail writes it. */
json_t *trail__target_json(const struct trail *t, const struct trail_target *tt,
			   bool with_timeline);
/* Write ROOT to PATH as outfile__write does (whole or not at all, 0600); -errno. */
int trail__write_json(json_t *root, const char *path);
/* Append an event; takes the reference to obj. */
int trail__add_event(struct trail *t, json_t *obj);

const char *trail__lost_name(int why);

/* The whole trail as JSON; with_timeline false gives report --json's view. */
json_t *trail__to_json(const struct trail *t, bool with_timeline);
/* Write to PATH as outfile__write does (whole or not at all, 0600); -errno. */
int trail__write(const struct trail *t, const char *path);
/* As trail__write, but replacing nothing: PATH or a numbered name, written back (outfile.h). */
int trail__write_new(const struct trail *t, char *path, size_t size);
/*
 * Read and validate a trail, a watch snapshot (a trail with a "snapshot"
 * object) or a watch verdict file (one target, no timeline); on failure -1
 * and a one-line reason in err.
 */
int trail__read(struct trail *t, const char *path, char *err, size_t errlen);
/*
 * As trail__read, every sample checked, but the timelines left empty: for
 * what draws no timeline (the text report, --json, --pprof, --diff), in
 * a fraction of the time and memory of an hour-long trail's samples.
 */
int trail__read_levels(struct trail *t, const char *path, char *err, size_t errlen);
/*
 * Event I of a trail's "events", target I of its "targets" (what a target
 * must have before the rest of it is read), checked as the reader checks
 * them: 0, or -1 and "events[I].t_ms: missing" in err. For the stream reader,
 * which checks each as it ends.
 */
int trail__check_event(json_t *ev, size_t i, char *err, size_t errlen);
int trail__check_target(json_t *o, size_t i, char *err, size_t errlen);
int trail__from_json(struct trail *t, json_t *root, char *err, size_t errlen);
/* The name of phase SEQ of TT (its aggregate's where folded; "#SEQ" in BUF where unknown). */
const char *trail__phase_name(const struct trail_target *tt, uint32_t seq, char *buf,
			      size_t len);

#endif
