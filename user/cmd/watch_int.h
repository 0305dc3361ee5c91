/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * memtrail watch's parts (watch.c: options, events, verdicts, the loop;
 * watch_files.c: the files written, kept in memory while the folder fails;
 * watch_pressure.c: memory cgroups near their limits): what they share.
 */
#ifndef MEMTRAIL_WATCH_INT_H
#define MEMTRAIL_WATCH_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "cmdopts.h"
#include "container.h"
#include "kube.h"
#include "metrics.h"
#include "session.h"

#define DEFAULT_DIR "memtrail-snapshots"
#define DEFAULT_INTERVAL_MS 1000
#define DEFAULT_KEEP_S 60
#define DEFAULT_PRESSURE_PCT 90
#define DEFAULT_PRESSURE_EVERY_S 30
#define DEFAULT_PENDING 64
/* mapping sections that grow mapped memory this much get deep stacks (--deep-from) */
#define DEFAULT_DEEP_FROM (1 << 20)
#define DEFAULT_SITES_FROM (16 << 20)
/* a snapshot's process: its sites holding the most live bytes, this many */
#define SNAPSHOT_SITES 64
#define SNAPSHOT_HEAP_SITES 16	/* and heap sites (--heap-budget), by bytes allocated */
/* --heap-budget: windows go to the HEAP_OFFERED processes whose anonymous memory grew most */
#define HEAP_OFFERED 8
#define HEAP_GROWTH_MS 10000		/* over this long (its --help says so) */
#define HEAP_GROWTH_MIN (1 << 20)	/* by this much at least */
/* per target: phases listed (first and latest half) and phase names aggregated */
#define WATCH_PHASE_HISTORY 8
#define WATCH_PHASE_NAMES 8
/* memory.pressure "some avg10" at or above this, percent, is pressure */
#define PSI_SOME_PCT 10.0
/* how long a cgroup's nearest limit is taken as known */
#define LIMITS_TTL_MS 10000
#define SCAN_PERIOD_MS 2000
#define RETRY_MS 1000
/* least time between two device OOM snapshots of one process */
#define DEVICE_OOM_GAP_MS 1000
#define TOP_PROCS 10
#define PROCS_MAX 4096
#define OOM_NAMES 64
/* bytes per target besides its timeline window and phases (struct trail_target, strings) */
#define TARGET_BYTES 1024
/* at the end, Events still waiting for the API server get this long */
#define KUBE_FLUSH_MS 5000

struct watch_opts {
	struct target_opts t;	/* --cgroup only */
	struct engine_opts e;
	const char *dir;
	uint32_t interval_ms;
	uint32_t keep_s;
	uint32_t pressure_pct;
	uint32_t pressure_every_s;
	uint32_t pending;
	const char *metrics;	/* [ADDR:]PORT, NULL: no metrics */
	uint32_t metrics_expire_s;
	bool no_sites;
	uint64_t deep_from;
	uint64_t sites_from;
	double heap_budget;	/* % of one CPU for heap probe windows; 0: no heap sites */
	bool kube_events;	/* verdicts as Events on their Pods */
	const char *kubeconfig;	/* NULL: the pod's service account (kube.h) */
	const char *node;	/* NULL: $NODE_NAME, else the host's name */
};

/* A memory cgroup with a limit that holds targets: watched for pressure. */
struct watched {
	char *path;
	char *dir;				/* its directory, NULL if unknown */
	int64_t ev_max, ev_high, failcnt;	/* last seen; -1 unknown */
	uint64_t snapshot_ms;			/* last pressure snapshot; 0 none */
	bool used;
};

/* A target's cgroup and the limited cgroup above it (NULL: none has a limit). */
struct limit_of {
	char *path;
	char *limited;
	uint64_t until_ms;	/* looked up again after, limits may change */
	bool used;
};

struct pending {
	char *name;
	json_t *doc;
};

struct watch {
	struct session s;
	const struct watch_opts *o;
	struct watched *cg;
	size_t n_cg, cap_cg;
	struct limit_of *lim;
	size_t n_lim, cap_lim;
	struct pending *pend;
	size_t n_pend;
	uint64_t next_retry;	/* when pending ones are tried again */
	bool failing;		/* the last write failed: pending ones wait */
	uint64_t snapshots, verdicts, dropped;
	/* the OOM snapshot of each recent victim, for its verdict */
	struct {
		uint32_t pid;
		char name[128];
		json_t *top;		/* its top site then (watch_top_site), or NULL */
	} oom_names[OOM_NAMES];
	json_t *last_top;	/* the top site of the last snapshot written (a reference) */
	/* the latest device OOM snapshots: one per process per DEVICE_OOM_GAP_MS */
	struct { uint32_t pid; uint64_t t_ms; } device_ooms[OOM_NAMES];
	size_t device_next;
	size_t oom_next;
	struct metrics *metrics;	/* NULL: no --metrics */
	struct kube_events *kube;	/* NULL: no --kube-events */
	uint64_t now_ms;		/* the turn's time (ended targets removed then) */
};

/* "YYYY-MM-DDTHH:MM:SS.mmmZ" now, or for a file name without the separators. */
void watch_utc_stamp(char *buf, size_t len, bool for_file);
/* Write what waits, oldest first; stop at the first failure. */
void watch_flush_pending(struct watch *w);
/* Queue DOC (taking its reference) as DIR/NAME and write what can be written. */
void watch_emit(struct watch *w, const char *name, json_t *doc);
/* The output directory exists (made 0700 when missing) and takes a file; -1 once said. */
int watch_check_dir(const char *dir);
/*
 * A trail of TT alone at T_MS with SNAP (taken) as its "snapshot": the
 * figures of CGROUP (NULL: TT's own) and its largest processes added, its
 * sites with EXTRA's (watch_sites_of), its top site of TOP_KIND (-1: any).
 */
json_t *watch_snapshot_doc(struct watch *w, struct trail_target *tt, uint64_t t_ms,
			   const char *cgroup, json_t *snap, struct trail_sites *extra, int top_kind);
/*
 * TT's allocation sites now, with EXTRA's (may be NULL; moved, EXTRA left
 * empty: a device OOM's allocations as they were then), the SNAPSHOT_SITES
 * holding the most live bytes (*LEFT_OUT: how many more held some); NULL
 * when it has none or sites are off.
 */
struct trail_sites *watch_sites_of(struct watch *w, const struct trail_target *tt,
				   struct trail_sites *extra, size_t *left_out);
/*
 * {kind, inuse_bytes, site}: the line of TS report would list with the most
 * live bytes, of KIND (-1: any); null when none.
 */
json_t *watch_top_site(const struct trail_sites *ts, int kind);
/* --heap-budget: the processes heap windows go to next, those whose anonymous memory grew most. */
void watch_heap_offer(struct watch *w, uint64_t now);
/* "top site: LABEL, 12.1 GiB mapped" of such an object, "" for none. */
const char *watch_top_phrase(json_t *top, char *buf, size_t len);
/* --kube-events: the poster started (0), or -1 once said. */
int watch_kube_open(struct watch *w);
/*
 * TT's verdict as an Event on its Pod (ATTR: its container and pod; none,
 * no Event): LINE the verdict's phrase, TOP_TEXT its top site's.
 */
void watch_kube_verdict(struct watch *w, const struct trail_target *tt,
			const struct container_attr *attr, const char *line, const char *top_text);
/* TT's device OOM (the session's event EV) as an Event on its Pod, TOP its top site. */
void watch_kube_device_oom(struct watch *w, const struct trail_target *tt, json_t *ev,
			   json_t *top);
/* WHAT-PID-TIME.json */
void watch_file_name(char *buf, size_t len, const char *what, uint32_t pid);
/* The limited cgroups of the live targets, looked up again now and then. */
void watch_refresh_cgroups(struct watch *w, uint64_t t_ms);
/* Each watched cgroup's pressure signs: a snapshot of its largest process when one shows. */
void watch_check_pressure(struct watch *w, uint64_t t_ms);
/* The kernel said TT's cgroup reclaims (memcg pressure event). */
void watch_on_pressure(struct session *s, struct trail_target *tt,
		       const struct memtrail_event_pressure *e);

#endif
