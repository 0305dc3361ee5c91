// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "phase.h"

static const char *const field_names[PF_FIELDS] = {
	[PF_ALLOCATIONS] = "allocations",
	[PF_DEALLOCATIONS] = "deallocations",
	[PF_SEGMENT_CHANGE] = "segment_change",
	[PF_SEGMENT_PEAK] = "segment_peak",
	[PF_CUMULATIVE_CURRENT] = "cumulative_current",
	[PF_CUMULATIVE_PEAK] = "cumulative_peak",
};

const char *phase__field_name(int field)
{
	return field >= 0 && field < PF_FIELDS ? field_names[field] : NULL;
}

int phase__check_name(const char *name, char *why, size_t len)
{
	size_t n = strlen(name), i;

	if (!n) {
		snprintf(why, len, "a phase name cannot be empty");
		return -EINVAL;
	}
	if (n > MEMTRAIL_PHASE_NAME_LEN - 1) {
		snprintf(why, len, "phase name is %zu bytes long, the most is %d", n,
			 MEMTRAIL_PHASE_NAME_LEN - 1);
		return -EINVAL;
	}
	for (i = 0; i < n; i++) {
		if (name[i] < 0x20 || name[i] > 0x7e) {
			snprintf(why, len, "phase name has a non-printable byte 0x%02x at %zu",
				 (unsigned char)name[i], i);
			return -EINVAL;
		}
	}
	return 0;
}

void phase_log__init(struct phase_log *l, size_t history)
{
	memset(l, 0, sizeof(*l));
	if (history) {
		l->keep_first = (history + 1) / 2;
		l->keep_recent = history / 2;
	}
}

void phase_log__free(struct phase_log *l)
{
	free(l->first);
	free(l->recent);
	free(l->aggs);
	free(l->agg_of);
	memset(l, 0, sizeof(*l));
}

struct phase_agg *phase_log__agg(struct phase_log *l, const char *name)
{
	struct phase_agg *a;
	size_t i;

	for (i = 0; i < l->n_aggs; i++)
		if (!strcmp(l->aggs[i].name, name))
			return &l->aggs[i];
	if (l->n_aggs >= (l->max_names ? l->max_names : PHASE_NAMES_MAX) && strcmp(name, "(other)"))
		return phase_log__agg(l, "(other)");
	/* 1 KiB each, and most processes have one phase name: a node's storm of short ones */
	if (array__grow_from((void **)&l->aggs, &l->cap_aggs, l->n_aggs + 1, sizeof(*a), 1))
		return NULL;
	a = &l->aggs[l->n_aggs++];
	memset(a, 0, sizeof(*a));
	snprintf(a->name, sizeof(a->name), "%s", name);
	return a;
}

static int list_append(struct phase_log *l, const struct trail_phase *p)
{
	if (!l->keep_first || l->n_first < l->keep_first) {
		if (l->n_first == l->cap_first) {
			size_t cap = l->cap_first ? l->cap_first * 2 : 2;	/* most have one or two */
			struct trail_phase *n;

			if (l->keep_first && cap > l->keep_first)
				cap = l->keep_first;
			n = realloc(l->first, cap * sizeof(*n));
			if (!n)
				return -ENOMEM;
			l->first = n;
			l->cap_first = cap;
		}
		l->first[l->n_first++] = *p;
		return 0;
	}
	if (!l->keep_recent) {
		l->folded++;
		return 0;
	}
	if (!l->recent) {
		l->recent = calloc(l->keep_recent, sizeof(*l->recent));
		if (!l->recent)
			return -ENOMEM;
	}
	if (l->n_recent == l->keep_recent)
		l->folded++;	/* the oldest recent entry leaves the list */
	else
		l->n_recent++;
	l->recent[l->head] = *p;
	l->head = (l->head + 1) % l->keep_recent;
	return 0;
}

int phase_log__push(struct phase_log *l, const struct trail_phase *p)
{
	return list_append(l, p);
}

int64_t phase__cell_baseline(const struct memtrail_level *seg)
{
	return seg->current - ((int64_t)seg->allocated - (int64_t)seg->freed);
}

void phase_log__fields(const struct phase_log *l, const struct memtrail_cell *cell,
		       int64_t f[][PF_FIELDS])
{
	int k;

	for (k = 0; k < MEMTRAIL_KIND_MAX; k++) {
		const struct memtrail_level *seg = &cell->kinds[k];
		int64_t *v = f[k], peak_here = l->cum_current[k] + seg->peak;
		int64_t base = phase__cell_baseline(seg);

		v[PF_ALLOCATIONS] = seg->allocated;
		v[PF_DEALLOCATIONS] = seg->freed;
		/* from the level the phase began at, the baseline's where it has one */
		v[PF_SEGMENT_CHANGE] = seg->current - base;
		v[PF_SEGMENT_PEAK] = seg->peak - base > 0 ? seg->peak - base : 0;
		v[PF_CUMULATIVE_CURRENT] = l->cum_current[k] + seg->current;
		v[PF_CUMULATIVE_PEAK] = l->cum_peak[k] > peak_here ? l->cum_peak[k] : peak_here;
	}
}

int phase_log__close(struct phase_log *l, const char *name, uint64_t start_ms,
		     uint64_t end_ms, const struct memtrail_cell *cell)
{
	struct trail_phase p = { .start_ms = start_ms, .end_ms = end_ms };
	struct phase_agg *a;
	int k, f;

	snprintf(p.name, sizeof(p.name), "%s", name);
	phase_log__fields(l, cell, p.f);
	for (k = 0; k < MEMTRAIL_KIND_MAX; k++) {
		l->cum_current[k] = p.f[k][PF_CUMULATIVE_CURRENT];
		l->cum_peak[k] = p.f[k][PF_CUMULATIVE_PEAK];
		l->baseline[k] += phase__cell_baseline(&cell->kinds[k]);
	}
	a = phase_log__agg(l, p.name);
	if (!a || array__grow((void **)&l->agg_of, &l->cap_agg_of, l->n_closed + 1,
			      sizeof(*l->agg_of)))
		return -ENOMEM;
	l->agg_of[l->n_closed++] = (uint16_t)(a - l->aggs);
	a->count++;
	for (k = 0; k < MEMTRAIL_KIND_MAX; k++) {
		for (f = 0; f < PF_FIELDS; f++) {
			a->total[k][f] += p.f[k][f];
			if (a->count == 1 || p.f[k][f] > a->max[k][f])
				a->max[k][f] = p.f[k][f];
		}
	}
	return list_append(l, &p);
}

const char *phase_log__name(const struct phase_log *l, uint32_t seq)
{
	return seq < l->n_closed ? l->aggs[l->agg_of[seq]].name : NULL;
}

size_t phase_log__count(const struct phase_log *l)
{
	return l->n_first + l->n_recent;
}

const struct trail_phase *phase_log__at(const struct phase_log *l, size_t i)
{
	if (i < l->n_first)
		return &l->first[i];
	i -= l->n_first;
	if (i >= l->n_recent)
		return NULL;
	/* the ring's oldest entry sits at head once it is full */
	return &l->recent[(l->n_recent == l->keep_recent ? l->head + i : i) % l->keep_recent];
}
