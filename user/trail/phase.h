/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A target's phases: each closed phase's six fields per kind, an ordered
 * list bounded to the first and the most recent entries, and aggregates by
 * name (count, total, mean, max) so repeated phases stay bounded in memory.
 */
#ifndef MEMTRAIL_PHASE_H
#define MEMTRAIL_PHASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memtrail.h"

enum phase_field {
	PF_ALLOCATIONS,
	PF_DEALLOCATIONS,
	PF_SEGMENT_CHANGE,
	PF_SEGMENT_PEAK,
	PF_CUMULATIVE_CURRENT,
	PF_CUMULATIVE_PEAK,
	PF_FIELDS,
};

#define PHASE_NAMES_MAX 256	/* distinct names aggregated; more share "(other)" */
#define PHASE_HISTORY_DEFAULT 200

struct trail_phase {
	char name[MEMTRAIL_PHASE_NAME_LEN];
	uint64_t start_ms;
	uint64_t end_ms;
	int64_t f[MEMTRAIL_KIND_MAX][PF_FIELDS];
};

struct phase_agg {
	char name[MEMTRAIL_PHASE_NAME_LEN];
	uint64_t count;
	int64_t total[MEMTRAIL_KIND_MAX][PF_FIELDS];
	int64_t max[MEMTRAIL_KIND_MAX][PF_FIELDS];
};

struct phase_log {
	struct trail_phase *first;	/* the first keep_first phases */
	size_t n_first, cap_first;
	struct trail_phase *recent;	/* a ring of the latest keep_recent phases */
	size_t n_recent, head;
	size_t keep_first, keep_recent;	/* 0: unbounded (a trail read back) */
	size_t max_names;		/* aggregates kept by name; 0: PHASE_NAMES_MAX */
	uint64_t folded;		/* phases in neither list */
	struct phase_agg *aggs;
	size_t n_aggs, cap_aggs;
	/* the aggregate of each closed phase by sequence number: two bytes a phase */
	uint16_t *agg_of;
	size_t n_closed, cap_agg_of;
	/* levels at the end of the last closed phase, for the cumulative fields */
	int64_t cum_current[MEMTRAIL_KIND_MAX];
	int64_t cum_peak[MEMTRAIL_KIND_MAX];
	/* held when the target was first seen, found in the closed phases' cells */
	int64_t baseline[MEMTRAIL_KIND_MAX];
};

const char *phase__field_name(int field);
/* 0, or -EINVAL with the reason in why. */
int phase__check_name(const char *name, char *why, size_t len);

/* history: most phases listed (half first, half most recent); 0 unbounded. */
void phase_log__init(struct phase_log *l, size_t history);
void phase_log__free(struct phase_log *l);
/*
 * Close a phase from its cell (segment levels, kept in the kernel) and derive
 * the cumulative fields: cumulative_current = previous + segment_change,
 * cumulative_peak = max(previous peak, previous current + segment_peak).
 */
/*
 * What a cell's level holds beyond its allocations and frees: the level the
 * kernel found when it first saw the address space (attach, exec, fork),
 * which it adds to the level only (memtrail_level). Segment fields leave it
 * out, cumulative ones (levels) keep it: the phase began at that level.
 */
int64_t phase__cell_baseline(const struct memtrail_level *seg);
/* The fields of a phase whose segment is CELL, after the phases closed so far. */
void phase_log__fields(const struct phase_log *l, const struct memtrail_cell *cell,
		       int64_t f[][PF_FIELDS]);
int phase_log__close(struct phase_log *l, const char *name, uint64_t start_ms,
		     uint64_t end_ms, const struct memtrail_cell *cell);
/* Append a phase as it is (reading a trail); aggregates are read separately. */
int phase_log__push(struct phase_log *l, const struct trail_phase *p);
struct phase_agg *phase_log__agg(struct phase_log *l, const char *name);
size_t phase_log__count(const struct phase_log *l);
/* The name of closed phase SEQ (its aggregate's: "(other)" beyond the names kept), or NULL. */
const char *phase_log__name(const struct phase_log *l, uint32_t seq);
/* The i-th listed phase in order of time. */
const struct trail_phase *phase_log__at(const struct phase_log *l, size_t i);

#endif
