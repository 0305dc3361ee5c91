/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A target's allocation sites as the trail keeps them: a list of sites,
 * heaviest first, each with its kind, phase, bytes and frames, and how the
 * heap probes sampled. One writer (trail_sites__json) and one reader
 * (trail_sites__from_json) hold the JSON form (README.md, "Trail format");
 * everything else reads these structs.
 */
#ifndef MEMTRAIL_TRAIL_SITES_H
#define MEMTRAIL_TRAIL_SITES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "memtrail.h"
#include "schema.h"

/* A site's kind: an enum memtrail_kind, or page faults */
#define TRAIL_SITE_FAULTS MEMTRAIL_SITE_FAULTS

/* One frame, innermost first. Strings are NULL where unknown. */
struct trail_frame {
	bool has_address;	/* false: a placeholder ("[no stack]") */
	uint64_t address;	/* in the process */
	char *function;		/* as people read it; "[unknown]", "[anon]", "[no stack]" */
	char *symbol;		/* the name in the file, where it differs (mangled) */
	char *module;		/* the file's path; NULL: no file (then no offset) */
	uint64_t offset;	/* in the file */
	char *build_id;		/* hex */
	char *source;		/* "file:line" */
};

struct trail_site {
	int kind;		/* enum memtrail_kind or TRAIL_SITE_FAULTS */
	char *phase;		/* the phase's name, NULL: unknown */
	bool folded;		/* a phase beyond the listed ones, kept by name */
	uint32_t phase_seq;	/* the phase's number, unless folded */
	uint64_t alloc_bytes;
	double alloc_objects;	/* sampled sites count objects in fractions */
	uint64_t inuse_bytes;
	double inuse_objects;
	uint64_t samples;	/* stacks taken */
	bool frames_truncated;	/* the walk stopped before the stack's end */
	struct trail_frame *frames;
	size_t n_frames;
};

enum trail_heap_mode { TRAIL_HEAP_FULL, TRAIL_HEAP_SAMPLED, TRAIL_HEAP_BUDGET, TRAIL_HEAP_NODE };

#define TRAIL_HEAP_WINDOWS 4	/* a node budget's windows kept per process, the latest */

/* A time the heap probes were on, in ms since the trail started, and the calls they saw. */
struct trail_heap_window {
	uint64_t start_ms, end_ms;	/* end 0: still open */
	uint64_t hits;
};

/* How the heap probes saw a target (record --heap, --overhead-budget). */
struct trail_heap {
	enum trail_heap_mode mode;
	uint64_t sample_bytes;	/* one stack per that many bytes; 0: every call */
	bool inuse;		/* in-use figures measured (not under a budget) */
	uint64_t probe_hits;
	double coverage;	/* share of its life the probes were on, 0..1 */
	bool has_cost;		/* the cost of a hit was measured: */
	double cost_per_hit_ns, probe_cost_ms;
	/* under a budget (mode TRAIL_HEAP_BUDGET): */
	double budget_pct;
	uint64_t cycles, cycles_spent;
	double close_ms, close_cost_ms;
	bool has_target_cpu;
	double target_cpu_ms;
	/*
	 * under a node budget (TRAIL_HEAP_NODE): budget_pct, cycles, close_ms,
	 * close_cost_ms (the most a closing cost, the last one's hits so far
	 * included), the account's cap and the latest windows
	 */
	double bank_ms;
	struct trail_heap_window windows[TRAIL_HEAP_WINDOWS];
	size_t n_windows;
};

struct trail_sites {
	struct trail_site *list;
	size_t n, cap;
	bool has_heap;
	struct trail_heap heap;
};

/* An empty list; NULL when out of memory. */
struct trail_sites *trail_sites__new(void);
void trail_sites__free(struct trail_sites *ts);
/* A new zeroed site at the end of the list, or a frame at the end of SITE's; NULL: out of memory. */
struct trail_site *trail_sites__add(struct trail_sites *ts);
struct trail_frame *trail_site__add_frame(struct trail_site *site);
/* Heaviest first (alloc_bytes). */
void trail_sites__sort(struct trail_sites *ts);
/*
 * Only the MAX sites holding the most live bytes (in_use), those first; sites
 * holding none go too. Returns how many that held some went.
 */
size_t trail_sites__keep_live(struct trail_sites *ts, size_t max);
/*
 * The same, but KIND's sites (-1: none) count what was allocated, not what is
 * held (heap windows, their frees unseen): their in-use figures are zeroed
 * and the MAX_KIND of them with the most bytes allocated are kept, after the rest.
 */
size_t trail_sites__keep_live_and(struct trail_sites *ts, size_t max, int kind, size_t max_kind);
/* "heap", "mapped", ..., "faults"; "?" for no kind of site. */
const char *trail_site__kind_name(int kind);
const char *trail_heap__mode_name(enum trail_heap_mode mode);
/* Whether in-use figures of TS are measured (heap sites under a budget are not). */
bool trail_sites__inuse(const struct trail_sites *ts);

/*
 * FR's function as reports name it, into BUF: its function, or where a file
 * does not name it ("[unknown]"), "FILE+0xOFFSET" (the file's base name).
 */
const char *trail_frame__name(const struct trail_frame *fr, char *buf, size_t len);

/* TS as the trail writes it; NULL when out of memory. */
json_t *trail_sites__json(const struct trail_sites *ts);
/* V read into *OUT (a trail is anyone's file): 0, or -1 with S's error set. */
int trail_sites__from_json(struct schema *s, json_t *v, struct trail_sites **out);
/* One frame read into FR (zeroed first): 0, or -1 with S's error set. */
int trail_frame__from_json(struct schema *s, json_t *v, struct trail_frame *fr);
json_t *trail_frame__json(const struct trail_frame *fr);

#endif
