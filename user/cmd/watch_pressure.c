// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * memtrail watch's pressure snapshots: the memory cgroups with a limit that
 * hold targets, and the signs that one nears it (reclaim, usage against the
 * limit, memory.events, failcnt, PSI); a snapshot of its largest process.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "array.h"
#include "cgroup.h"
#include "log.h"
#include "sanitize.h"
#include "watch_int.h"

static struct watched *watched_get(struct watch *w, const char *path)
{
	struct watched *c;
	size_t i;

	for (i = 0; i < w->n_cg; i++)
		if (!strcmp(w->cg[i].path, path))
			return &w->cg[i];
	if (array__grow((void **)&w->cg, &w->cap_cg, w->n_cg + 1, sizeof(*c)))
		return NULL;
	c = &w->cg[w->n_cg];
	memset(c, 0, sizeof(*c));
	c->path = strdup(path);
	if (!c->path)
		return NULL;
	c->dir = cgroup__memory_dir(path);
	c->ev_max = c->ev_high = c->failcnt = -1;
	w->n_cg++;
	return c;
}

/* The limited cgroup above a target's cgroup, remembered per path a while. */
static const char *limited_of(struct watch *w, const char *path, uint64_t t_ms)
{
	struct limit_of *l;
	size_t i;

	if (!path)
		return NULL;
	for (i = 0; i < w->n_lim; i++) {
		l = &w->lim[i];
		if (strcmp(l->path, path))
			continue;
		if (t_ms >= l->until_ms) {
			free(l->limited);
			l->limited = cgroup__limited(path);
			l->until_ms = t_ms + LIMITS_TTL_MS;
		}
		l->used = true;
		return l->limited;
	}
	if (array__grow((void **)&w->lim, &w->cap_lim, w->n_lim + 1, sizeof(*l)))
		return NULL;
	l = &w->lim[w->n_lim];
	l->path = strdup(path);
	if (!l->path)
		return NULL;
	l->limited = cgroup__limited(path);
	l->until_ms = t_ms + LIMITS_TTL_MS;
	l->used = true;
	w->n_lim++;
	return l->limited;
}

static bool under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (!path)
		return false;
	if (!strcmp(dir, "/"))
		return true;
	return !strncmp(path, dir, n) && (path[n] == '/' || !path[n]);
}

/* The set of limited cgroups that hold live targets, anew. */
void watch_refresh_cgroups(struct watch *w, uint64_t t_ms)
{
	size_t i, j;

	for (i = 0; i < w->n_lim; i++)
		w->lim[i].used = false;
	for (i = 0; i < w->n_cg; i++)
		w->cg[i].used = false;
	for (i = 0; i < w->s.trail.n_targets; i++) {
		const struct trail_target *tt = &w->s.trail.targets[i];
		const char *lim;
		struct watched *c;

		if (tt->end_ms || !(lim = limited_of(w, tt->cgroup, t_ms)))
			continue;
		c = watched_get(w, lim);
		if (c)
			c->used = true;
	}
	for (i = j = 0; i < w->n_lim; i++) {
		if (w->lim[i].used) {
			w->lim[j++] = w->lim[i];
		} else {
			free(w->lim[i].path);
			free(w->lim[i].limited);
		}
	}
	w->n_lim = j;
	for (i = j = 0; i < w->n_cg; i++) {
		if (w->cg[i].used) {
			w->cg[j++] = w->cg[i];
		} else {
			free(w->cg[i].path);
			free(w->cg[i].dir);
		}
	}
	w->n_cg = j;
}

static int64_t resident(const struct trail_target *tt)
{
	return tt->current[MEMTRAIL_KIND_RSS_ANON] + tt->current[MEMTRAIL_KIND_RSS_FILE] +
	       tt->current[MEMTRAIL_KIND_RSS_SHMEM];
}

/* The live target with the most resident memory in cgroup PATH or below. */
static struct trail_target *largest_in(struct watch *w, const char *path)
{
	struct trail_target *best = NULL;
	size_t i;

	for (i = 0; i < w->s.trail.n_targets; i++) {
		struct trail_target *tt = &w->s.trail.targets[i];

		if (!tt->end_ms && under(tt->cgroup, path) && (!best || resident(tt) > resident(best)))
			best = tt;
	}
	return best;
}

static void pressure_snapshot(struct watch *w, struct watched *c, struct trail_target *tt,
			      uint64_t t_ms, const char *reason, int64_t usage, int64_t limit)
{
	char name[128];
	json_t *snap;

	if (c->snapshot_ms && t_ms - c->snapshot_ms < w->o->pressure_every_s * 1000ULL)
		return;
	c->snapshot_ms = t_ms ? t_ms : 1;
	snap = json_pack("{s:s, s:{s:s, s:o, s:I, s:o}}", "trigger", "pressure",
			 "pressure", "reason", reason, "cgroup", sanitize__json(c->path), "usage", (json_int_t)usage,
			 "limit", limit >= 0 ? json_integer(limit) : json_null());
	watch_file_name(name, sizeof(name), "pressure", tt->pid);
	watch_emit(w, name, watch_snapshot_doc(w, tt, t_ms, c->path, snap, NULL, -1));
	w->snapshots++;
	if (w->metrics)
		metrics__snapshot(w->metrics, "pressure");
}

void watch_on_pressure(struct session *s, struct trail_target *tt,
		       const struct memtrail_event_pressure *e)
{
	struct watch *w = s->ctx;
	uint64_t t_ms = session__ms(s, e->hdr.ts_ns);
	const char *lim = limited_of(w, tt->cgroup, t_ms);
	struct watched *c = lim ? watched_get(w, lim) : NULL;

	if (!c || !w->o->pressure_pct)
		return;
	session__refresh(s, tt, t_ms, true);
	pressure_snapshot(w, c, tt, t_ms, "reclaim", e->usage, e->limit ? (int64_t)e->limit : -1);
}

/* Usage near the limit, memory.events or failcnt growth, PSI: per limited cgroup. */
void watch_check_pressure(struct watch *w, uint64_t t_ms)
{
	size_t i;

	for (i = 0; i < w->n_cg; i++) {
		struct watched *c = &w->cg[i];
		struct cgroup_memory m;
		const char *reason = NULL;
		struct trail_target *tt;

		if (!c->dir || cgroup__read_memory(c->dir, &m))
			continue;
		if (m.limit > 0 && m.usage * 100 >= m.limit * (int64_t)w->o->pressure_pct)
			reason = "usage";
		else if ((c->ev_max >= 0 && m.ev_max > c->ev_max) ||
			 (c->ev_high >= 0 && m.ev_high > c->ev_high) ||
			 (c->failcnt >= 0 && m.failcnt > c->failcnt))
			reason = "memory_events";
		else if (m.psi_some_avg10 >= PSI_SOME_PCT)
			reason = "psi";
		c->ev_max = m.ev_max;
		c->ev_high = m.ev_high;
		c->failcnt = m.failcnt;
		if (!reason || !(tt = largest_in(w, c->path)))
			continue;
		pressure_snapshot(w, c, tt, t_ms, reason, m.usage, m.limit >= 0 ? m.limit : m.high);
	}
}
