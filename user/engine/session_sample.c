// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * A session's samples: each live target's levels read from the kernel (in
 * one batch read where it can, only the changed targets where it names
 * them), and the targets found gone whose exit events were lost ended.
 */
#include <stdint.h>

#include "array.h"
#include "log.h"
#include "proc.h"
#include "session_int.h"

/* with no ring-buffer loss, /proc is still asked this often whether targets live */
#define LIVENESS_PERIOD_MS 5000

/*
 * Whether to ask /proc which targets still live: their exit events normally
 * say so, so only after the ring buffer dropped events, and now and then.
 */
static bool check_liveness(struct session *s, uint64_t t_ms)
{
	uint64_t lost = tracer__lost_one(s->tracer, MEMTRAIL_LOST_RINGBUF);

	if (lost == s->lost_seen && t_ms < s->next_liveness_ms)
		return false;
	s->lost_seen = lost;
	s->next_liveness_ms = t_ms + LIVENESS_PERIOD_MS;
	return true;
}

/* The batch slot of TGID's target (its index in the trail), or NULL. */
static struct batch_cell *batch_slot(struct session *s, uint32_t tgid)
{
	const struct trail_target *tt = trail__find_target(&s->trail, tgid);
	size_t i = tt ? (size_t)(tt - s->trail.targets) : SIZE_MAX;

	return i < s->n_batch ? &s->batch[i] : NULL;
}

/* A cell of a batch read: kept for its target when it is the target's open phase. */
static void batch_cell(void *ctx, const void *k, const void *v)
{
	const struct memtrail_cell_key *key = k;
	struct session *s = ctx;
	struct batch_cell *b = batch_slot(s, key->tgid);

	if (!b || s->trail.targets[b - s->batch].phase_seq != key->phase)
		return;
	b->cell = *(const struct memtrail_cell *)v;
	b->phase = key->phase;
	b->have = true;
}

/* A target of the kernel's map: alive unless its last thread exited. */
static void batch_target(void *ctx, const void *tgid, const void *v)
{
	const struct memtrail_target *t = v;
	struct batch_cell *b = batch_slot(ctx, *(const uint32_t *)tgid);

	if (b && !(t->flags & MEMTRAIL_TARGET_EXITED))
		b->alive = true;
}

/*
 * The open phases' cells of all targets (CELLS) and which targets the kernel
 * holds unexited (LIVENESS): one batch read of each map, not a lookup per
 * target (10,000 idle processes were 10,000 system calls a sample). False
 * when the kernel has none: read one by one.
 */
static bool batch_read(struct session *s, bool liveness, bool cells)
{
	size_t n = s->trail.n_targets, i;

	if (s->no_batch || !n || (!liveness && !cells))
		return false;
	if (array__grow((void **)&s->batch, &s->cap_batch, n, sizeof(*s->batch)))
		return false;
	s->n_batch = n;
	for (i = 0; i < n; i++)
		s->batch[i].have = s->batch[i].alive = false;
	/* which live: the kernel's flags, not a /proc read per target */
	if (liveness && tracer__each_target(s->tracer, batch_target, s))
		return false;
	if (cells && tracer__each_cell(s->tracer, batch_cell, s)) {
		s->no_batch = true;	/* said once in -v: the kernel has no batch lookups */
		log__debug("cells read one by one: no batch lookups");
		return false;
	}
	return true;
}

struct dirty_names {
	struct session *s;
	size_t n;	/* names taken */
};

/* A target the kernel named: its levels changed since the last sample. */
static void dirty_target(void *ctx, const void *tgid, const void *v)
{
	struct dirty_names *d = ctx;
	struct trail_target *tt = session__live(d->s, *(const uint32_t *)tgid);

	(void)v;
	if (tt)
		tt->dirty = true;
	d->n++;
}

/*
 * Whether this sample reads every target's levels: where the kernel does
 * not name the changed ones, where it could not name one, or where so many
 * changed that one batch read of all cells beats a lookup each. Otherwise
 * only those flagged dirty, new, or in a new phase are read: an idle target
 * costs a sample nothing.
 */
static bool read_all(struct session *s)
{
	struct dirty_names d = { .s = s };
	bool all = false;

	if (s->no_dirty)
		return true;
	if (tracer__take_dirty(s->tracer, dirty_target, &d, &all)) {
		s->no_dirty = true;
		log__debug("every target read at each sample: no batch operations");
		return true;
	}
	return all || d.n * 4 > s->trail.n_targets;
}

void session__sample_all(struct session *s, uint64_t t_ms)
{
	bool liveness = check_liveness(s, t_ms);
	bool all = read_all(s);
	bool batched = batch_read(s, liveness, all);
	size_t i;

	for (i = 0; i < s->trail.n_targets; i++) {
		struct trail_target *tt = &s->trail.targets[i];
		uint32_t pid = tt->pid;
		bool in_batch = batched && i < s->n_batch;

		if (tt->exited || tt->end_ms)
			continue;
		if (all || tt->dirty || !tt->sampled || tt->sampled_seq != tt->phase_seq) {
			/*
			 * not in the batch (none yet, made while it ran, or a
			 * phase began since: events are read below): looked up alone
			 */
			if (in_batch && s->batch[i].have && s->batch[i].phase == tt->phase_seq)
				session_refresh_from(s, tt, &s->batch[i].cell, t_ms, false);
			else
				session__refresh(s, tt, t_ms, false);
			tt->dirty = false;
			tt->sampled = true;
			tt->sampled_seq = tt->phase_seq;
		}
		/* the kernel's flag says which may have ended; /proc says which did */
		if (!liveness || (in_batch && s->batch[i].alive) || proc__alive(pid))
			continue;
		/* its exit event may still wait in the ring buffer (which may add targets) */
		tracer__poll(s->tracer, 0);
		tt = session__live(s, pid);
		/* the exit event was lost: status unknown */
		if (tt)
			session_end_target(s, tt, t_ms, NULL);
	}
}
