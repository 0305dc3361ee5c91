// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The code in a snapshot: a process's allocation sites as they stand at the
 * moment it is written (the kernel's figures read then, deep chains as user
 * space keeps them), the ones holding the most live bytes, and the top one
 * said in a short phrase for the verdict line.
 */
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "kinds.h"
#include "sites.h"
#include "table.h"
#include "trail_sites.h"
#include "watch_int.h"

/* EXTRA's sites moved to the end of TS (EXTRA left empty); -1 when out of memory. */
static int take_sites(struct trail_sites *ts, struct trail_sites *extra)
{
	size_t i;

	for (i = 0; i < extra->n; i++) {
		struct trail_site *site = trail_sites__add(ts);

		if (!site)
			return -1;	/* those left stay EXTRA's, freed with it */
		*site = extra->list[i];
		memset(&extra->list[i], 0, sizeof(extra->list[i]));
	}
	extra->n = 0;
	return 0;
}

struct trail_sites *watch_sites_of(struct watch *w, const struct trail_target *tt,
				   struct trail_sites *extra, size_t *left_out)
{
	struct trail_sites *ts;

	*left_out = 0;
	if (!w->s.sites)
		return NULL;
	ts = sites__collect(w->s.sites, tt);
	/* a process no heap window has opened on yet says so */
	if (!ts && ((extra && extra->n) || w->s.heap))
		ts = trail_sites__new();
	if (!ts)
		return NULL;
	if (extra && extra->n) {
		size_t i, j;

		/* EXTRA's kinds as they were then: not also as they are now */
		for (i = 0; i < ts->n; i++)
			for (j = 0; j < extra->n; j++)
				if (ts->list[i].kind == extra->list[j].kind)
					ts->list[i].inuse_bytes = 0;
		take_sites(ts, extra);
	}
	/* heap sites under the node budget count what its windows saw allocated */
	*left_out = trail_sites__keep_live_and(ts, SNAPSHOT_SITES,
					       w->s.heap ? MEMTRAIL_KIND_HEAP : -1,
					       SNAPSHOT_HEAP_SITES);
	if (w->s.heap) {
		ts->has_heap = true;
		heap__sampling(w->s.heap, tt->pid, &ts->heap);
	}
	if (!ts->n && !w->s.heap) {
		trail_sites__free(ts);
		return NULL;
	}
	return ts;
}

json_t *watch_top_site(const struct trail_sites *ts, int kind)
{
	char label[512];
	uint64_t bytes;

	kind = table__top_site(ts, kind, label, sizeof(label), &bytes);
	if (kind < 0)
		return json_null();
	return json_pack("{s:s, s:I, s:s}", "kind", trail_site__kind_name(kind),
			 "inuse_bytes", (json_int_t)bytes, "site", label);
}

const char *watch_top_phrase(json_t *top, char *buf, size_t len)
{
	const char *site = json_string_value(json_object_get(top, "site"));
	const char *kind = json_string_value(json_object_get(top, "kind"));
	char size[32];

	if (!site || !kind) {
		buf[0] = '\0';
		return buf;
	}
	format__bytes(size, sizeof(size),
		      (int64_t)json_integer_value(json_object_get(top, "inuse_bytes")));
	snprintf(buf, len, "top site: %s, %s %s", site, size, kind);
	return buf;
}

/* TT's anonymous memory GROWTH_MS before NOW (its first level where it is younger). */
static int64_t anon_before(const struct trail_target *tt, uint64_t now)
{
	uint64_t since = now > HEAP_GROWTH_MS ? now - HEAP_GROWTH_MS : 0;
	size_t i;

	for (i = tt->n_samples; i--;)
		if (tt->timeline[i].t_ms <= since)
			return tt->timeline[i].level[MEMTRAIL_KIND_RSS_ANON];
	return tt->n_samples ? tt->timeline[0].level[MEMTRAIL_KIND_RSS_ANON] :
	       tt->baseline[MEMTRAIL_KIND_RSS_ANON];
}

void watch_heap_offer(struct watch *w, uint64_t now)
{
	uint32_t pids[HEAP_OFFERED];
	int64_t growth[HEAP_OFFERED];
	size_t i, j, n = 0;

	for (i = 0; i < w->s.trail.n_targets; i++) {
		const struct trail_target *tt = &w->s.trail.targets[i];
		int64_t g;

		if (tt->end_ms)
			continue;
		g = tt->current[MEMTRAIL_KIND_RSS_ANON] - anon_before(tt, now);
		if (g < HEAP_GROWTH_MIN || (n == HEAP_OFFERED && g <= growth[n - 1]))
			continue;
		/* into its place, fastest first */
		for (j = n < HEAP_OFFERED ? n++ : n - 1; j && growth[j - 1] < g; j--) {
			growth[j] = growth[j - 1];
			pids[j] = pids[j - 1];
		}
		growth[j] = g;
		pids[j] = tt->pid;
	}
	heap__node_offer(w->s.heap, pids, n);
}
