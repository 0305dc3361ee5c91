// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * A session's allocation sites and heap probes: opened, each target's sites
 * taken into the trail as its pid is about to be free, and the rest at the end.
 */
#include "session_int.h"

/*
 * Ended targets' sites taken (a walk of the kernel's site tables) at most
 * this often: their pids wait that long to be targets again
 */
#define RETIRE_MS 250

/* TT's sites as the trail keeps them, with the heap probes' sampling where on. */
static struct trail_sites *target_sites(struct session *s, const struct trail_target *tt)
{
	struct trail_sites *ts = sites__collect(s->sites, tt);

	if (s->heap) {
		if (!ts)
			ts = trail_sites__new();
		if (ts) {
			ts->has_heap = true;
			heap__sampling(s->heap, tt->pid, &ts->heap);
		}
	}
	return ts;
}

/* PID's target ended and its pid is about to be free: its sites are taken now. */
static void retire_sites(void *ctx, uint32_t pid)
{
	struct session *s = ctx;
	struct trail_target *tt = trail__find_target(&s->trail, pid);

	/* watch keeps only the living: an ended one's sites are for a verdict, said already */
	if (!tt || !tt->end_ms || tt->sites_final || s->remove_ended)
		return;
	trail_sites__free(tt->sites);
	/* a second Ctrl-C gives the trail up: no more symbolizing for it */
	tt->sites = session__stop_again ? NULL : target_sites(s, tt);
	tt->sites_final = true;
}

static bool on_ended(void *ctx, const uint32_t *pids, size_t n)
{
	struct session *s = ctx;
	uint64_t now = session__now_ms(s);

	if (now < s->next_retire_ms)
		return false;
	s->next_retire_ms = now + RETIRE_MS;
	sites__retire(s->sites, pids, n, retire_sites, s);
	return true;
}

/* A Python process whose frames are not read: an event of the trail, so that a trail counts them. */
static void on_py_unread(void *ctx, uint32_t pid, const char *version, const char *why)
{
	struct session *s = ctx;

	if (s->keep_events)
		session_add_event(s, json_pack("{s:I, s:s, s:i, s:s, s:s}", "t_ms",
					       (json_int_t)session__now_ms(s), "type",
					       "python_unread", "pid", pid, "version", version,
					       "why", why));
}

int session__open_sites(struct session *s, const struct heap_config *heap)
{
	size_t i;
	int err = sites__open(&s->sites, s->tracer, &s->trail);

	if (err)
		return err;
	if (heap) {
		err = heap__open(&s->heap, s->tracer, heap);
		if (err)
			return err;
	}
	if (s->remove_ended)
		sites__forget_stacks(s->sites);
	sites__on_py_unread(s->sites, on_py_unread, s);
	tracer__on_ended(s->tracer, on_ended, s);
	for (i = 0; i < s->trail.n_targets; i++)
		if (session__live(s, s->trail.targets[i].pid))
			session_rescan(s, s->trail.targets[i].pid);
	return 0;
}

void session__finish_sites(struct session *s)
{
	size_t i;

	if (!s->sites)
		return;
	sites__take_maps(s->sites, UINT64_MAX);
	sites__harvest(s->sites);
	/* a second Ctrl-C gives the trail up: no more symbolizing for it */
	for (i = 0; i < s->trail.n_targets && !session__stop_again; i++) {
		struct trail_target *tt = &s->trail.targets[i];

		if (tt->sites_final)
			continue;
		trail_sites__free(tt->sites);
		tt->sites = target_sites(s, tt);
	}
}
