// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The heap probes' budgets (--heap-budget, --overhead-budget, watch's node
 * budget): each process's account of probe time, credited with its share
 * of the CPU time it uses (or the node's with the time that passes) and
 * debited with hits x their measured cost; the windows its probes are on.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "clock.h"
#include "heap_int.h"
#include "log.h"
#include "proc.h"

/* Debit the hits P's probes took since the last booking. */
void heap_book_hits(struct heap *h, struct heap_proc *p)
{
	uint64_t hits = tracer__heap_hits(h->tracer, p->pid);
	double *balance = h->cfg.node ? &h->node_balance_ns : &p->balance_ns;

	if (hits < p->hits_booked)
		hits = p->hits_booked;	/* its target gone from the kernel's table: nothing more */
	*balance -= (double)(hits - p->hits_booked) * h->cost_ns;
	p->hits_booked = hits;
}

/*
 * What closing P's window will cost in probe time, with a margin of as
 * half again (memtrail may be slow to react on a loaded machine): as much
 * as closing its recent windows cost, or, before the first, what it costs
 * a target that does nothing but allocate on as many CPUs as P uses.
 */
static double closing_cost_ns(const struct heap *h, const struct heap_proc *p)
{
	double cpus = p->cpu_share > 1.0 ? p->cpu_share : 1.0;

	return 1.5 * (p->close_seen_ns > 0 ? p->close_seen_ns : h->close_ns * cpus);
}

/* Close P's window, decided at hit DECIDED; the hits taken until the probes are gone are paid. */
static void window_close(struct heap *h, struct heap_proc *p, uint64_t decided)
{
	double over;

	heap_proc_switch(h, p, false);
	heap_book_hits(h, p);
	over = p->hits_booked > decided ? (double)(p->hits_booked - decided) * h->cost_ns : 0;
	p->close_seen_ns = over > 0.9 * p->close_seen_ns ? over : 0.9 * p->close_seen_ns;
	if (!p->close_seen_ns)
		p->close_seen_ns = h->cost_ns;
}

/* Tell BPF the hit at which P's credit (the node's under a node budget), less the closing, is spent. */
static bool window_allow(struct heap *h, struct heap_proc *p)
{
	double spend = (h->cfg.node ? h->node_balance_ns : p->balance_ns) - closing_cost_ns(h, p);

	if (spend < h->cost_ns)
		return false;
	p->allow_hits = p->hits_booked + (uint64_t)(spend / h->cost_ns);
	tracer__heap_allow(h->tracer, p->pid, p->allow_hits);
	return true;
}

/* Keep P's books: credit its CPU time's share, debit its hits, open or close. */
static void proc_tick(struct heap *h, struct heap_proc *p, uint64_t now_ms)
{
	double bank = BANK_MS * 1e6 * h->cfg.budget_pct / 100.0, window, opening;
	uint64_t cpu, elapsed_ms = TICK_MS + (now_ms - p->next_tick_ms);

	p->next_tick_ms = now_ms + TICK_MS;
	if (!proc__cpu_ns(p->pid, &cpu))
		return;
	if (!p->cpu_known) {
		/* nothing is earned before the target has run: windows open on credit */
		p->cpu_known = true;
		p->cpu_start_ns = p->cpu_last_ns = cpu;
		p->hits_booked = tracer__heap_hits(h->tracer, p->pid);
		return;
	}
	p->cpu_share = (double)(cpu - p->cpu_last_ns) / (elapsed_ms * 1e6);
	p->balance_ns += (double)(cpu - p->cpu_last_ns) * h->cfg.budget_pct / 100.0;
	p->cpu_last_ns = cpu;
	heap_book_hits(h, p);
	window = WINDOW_CPU_MS * 1e6 * h->cfg.budget_pct / 100.0;
	opening = closing_cost_ns(h, p) + window;
	/* an idle target banks a bounded credit, always enough for a window */
	if (bank < 2 * opening)
		bank = 2 * opening;
	if (p->balance_ns > bank)
		p->balance_ns = bank;
	if (p->on) {
		if (!window_allow(h, p))
			window_close(h, p, p->hits_booked);
		return;
	}
	/*
	 * A window opens once a second of the target's CPU time has earned its
	 * share: each opening and closing rewrites the allocator's code pages
	 * in the target, a cost beyond the hits, so windows are few and full.
	 */
	if (p->balance_ns >= opening && window_allow(h, p)) {
		p->cycles++;
		heap_proc_switch(h, p, true);
	}
}

/*
 * The node budget. Every TICK_MS the node's account is credited with
 * budget_pct of the time passed and debited with the hits of the window
 * open (and of the one last closed, whose probes may still be going). A
 * window opens while none is and the account holds what one second's
 * share buys plus what closing will cost; it closes when BPF says its
 * share is spent, after NODE_WINDOW_MS, or when its process ends. So
 * probe time over any span stays within budget_pct of it, plus the
 * account's cap (BANK_MS's share) and one closing's overshoot, which is
 * paid back before the next window opens.
 */
static void node_close(struct heap *h, struct heap_proc *p, uint64_t decided, uint64_t now_ms)
{
	struct trail_heap_window *w = &p->win[(p->n_win - 1) % TRAIL_HEAP_WINDOWS];

	window_close(h, p, decided);
	p->decided = decided;
	w->end_ms = now_ms > w->start_ms ? now_ms : w->start_ms + 1;
	w->hits = p->hits_booked - p->win_hits0;
	h->node_pid = 0;
	p->settling = true;
	log__debug("heap: %u's window closed: %" PRIu64 " hits in %" PRIu64 " ms, %.1f us "
		   "of credit left", p->pid, w->hits, w->end_ms - w->start_ms,
		   h->node_balance_ns / 1000);
}

/*
 * The hits of P's last window taken since it closed (its probes go one by
 * one, slowly on an old kernel's links): paid, and part of what closing
 * costs, so that the next windows keep that much back.
 */
static void node_late(struct heap *h, struct heap_proc *p)
{
	uint64_t before = p->hits_booked;
	double over;

	heap_book_hits(h, p);
	/* none since the last tick: its probes are gone */
	p->settling = p->hits_booked != before;
	over = p->hits_booked > p->decided ? (double)(p->hits_booked - p->decided) * h->cost_ns : 0;
	if (over > p->close_seen_ns)
		p->close_seen_ns = over;
	if (p->n_win)
		p->win[(p->n_win - 1) % TRAIL_HEAP_WINDOWS].hits = p->hits_booked - p->win_hits0;
}

/* The offered process whose last window (or try) is the oldest, most wanted first on a tie. */
static uint32_t node_next(struct heap *h)
{
	uint64_t oldest = UINT64_MAX;
	uint32_t pid = 0;
	size_t i;

	for (i = 0; i < h->n_offered; i++) {
		struct heap_proc *p = heap_proc_get(h, h->offered[i], false);
		uint64_t t = p ? p->tried_ms : 0;

		if (t < oldest) {
			oldest = t;
			pid = h->offered[i];
		}
	}
	return pid;
}

static void node_open(struct heap *h, uint64_t now_ms)
{
	uint32_t pid = node_next(h);
	struct heap_proc *p;
	struct trail_heap_window *w;

	if (!pid)
		return;
	p = heap_proc_get(h, pid, true);
	if (!p)
		return;
	p->tried_ms = clock__mono_ms();
	if (p->n_win)
		node_late(h, p);	/* the last window's late hits paid before the next one's count */
	p->settling = false;
	/* its allocators as mapped now (a library loaded since the last window too) */
	heap_scan_maps(h, pid, p);
	if (!p->n_links)
		return;	/* no allocator memtrail knows (a static binary): the next one */
	p->hits_booked = p->win_hits0 = tracer__heap_hits(h->tracer, pid);
	if (!window_allow(h, p))
		return;
	p->cycles++;
	heap_proc_switch(h, p, true);
	w = &p->win[p->n_win++ % TRAIL_HEAP_WINDOWS];
	*w = (struct trail_heap_window){ .start_ms = now_ms };
	h->node_pid = pid;
	log__debug("heap: window open for %u, up to %" PRIu64 " hits", pid,
		   p->allow_hits - p->hits_booked);
}

static void node_tick(struct heap *h, uint64_t now_ms)
{
	double pct = h->cfg.budget_pct / 100.0, bank = BANK_MS * 1e6 * pct, opening;
	uint64_t mono = clock__mono_ms();
	struct heap_proc *p;
	size_t i;

	if (mono < h->node_next_ms)
		return;
	opening = 1.5 * h->close_ns + WINDOW_CPU_MS * 1e6 * pct;
	/* the first window opens on credit, as a bank's worth would */
	h->node_balance_ns += h->node_last_ms ? (double)(mono - h->node_last_ms) * 1e6 * pct :
				opening;
	h->node_last_ms = mono;
	h->node_next_ms = mono + TICK_MS;
	for (i = 0; i < h->n_procs; i++)
		if (h->procs[i].settling)
			node_late(h, &h->procs[i]);
	p = h->node_pid ? heap_proc_get(h, h->node_pid, false) : NULL;
	if (p && p->on) {
		heap_book_hits(h, p);
		if (mono - p->on_since_ms >= NODE_WINDOW_MS || !window_allow(h, p))
			node_close(h, p, p->hits_booked, now_ms);
		return;
	}
	h->node_pid = 0;
	if (bank < 2 * opening)
		bank = 2 * opening;
	h->node_bank_ns = bank;
	if (h->node_balance_ns > bank)
		h->node_balance_ns = bank;
	if (h->node_balance_ns >= opening)
		node_open(h, now_ms);
}

void heap__node_offer(struct heap *h, const uint32_t *pids, size_t n)
{
	h->n_offered = n < NODE_OFFERED ? n : NODE_OFFERED;
	memcpy(h->offered, pids, h->n_offered * sizeof(*pids));
}

void heap__tick(struct heap *h, uint64_t now_ms)
{
	size_t i;

	if (h->cfg.node) {
		node_tick(h, now_ms);
		return;
	}
	if (h->cfg.budget_pct <= 0)
		return;
	now_ms = clock__mono_ms();
	for (i = 0; i < h->n_procs; i++)
		if (now_ms >= h->procs[i].next_tick_ms)
			proc_tick(h, &h->procs[i], now_ms);
}

void heap__budget_spent(struct heap *h, uint32_t pid, uint64_t now_ms)
{
	struct heap_proc *p = heap_proc_get(h, pid, false);

	if (!p || !p->on || h->cfg.budget_pct <= 0)
		return;
	p->spent++;
	if (h->cfg.node) {
		node_close(h, p, p->allow_hits, now_ms);
		return;
	}
	window_close(h, p, p->allow_hits);
	log__debug("heap: %u spent its budget; probes off at %" PRIu64 " hits, %.1f us owed",
		   pid, p->hits_booked, p->balance_ns < 0 ? -p->balance_ns / 1000 : 0.0);
}

/* How P (NULL: never probed) of PID was sampled, as of now, into OUT. */
void heap_sampling_now(struct heap *h, struct heap_proc *p, uint32_t pid,
		       struct trail_heap *out)
{
	uint64_t hits = tracer__heap_hits(h->tracer, pid), now_ms, on_ms, total_ms, cpu;
	bool budget = h->cfg.budget_pct > 0;

	*out = (struct trail_heap){
		.mode = h->cfg.node ? TRAIL_HEAP_NODE : budget ? TRAIL_HEAP_BUDGET :
			h->cfg.sample_bytes ? TRAIL_HEAP_SAMPLED : TRAIL_HEAP_FULL,
		.sample_bytes = h->cfg.sample_bytes, .inuse = !budget, .probe_hits = hits,
		.budget_pct = budget ? h->cfg.budget_pct : 0,
		.close_ms = budget ? h->detach_ns / 1e6 : 0,
	};
	if (h->cost_ns > 0) {
		out->has_cost = true;
		out->cost_per_hit_ns = h->cost_ns;
		out->probe_cost_ms = hits * h->cost_ns / 1e6;
	}
	if (!p)
		return;
	now_ms = clock__mono_ms();
	on_ms = p->on_ms + (p->on ? now_ms - p->on_since_ms : 0);
	total_ms = now_ms - p->first_ms;
	out->coverage = total_ms ? (double)on_ms / total_ms : 1.0;
	if (h->cfg.node) {
		uint64_t i = p->n_win > TRAIL_HEAP_WINDOWS ? p->n_win - TRAIL_HEAP_WINDOWS : 0;

		out->cycles = p->cycles;
		out->cycles_spent = p->spent;
		out->close_ms = h->detach_ns / 1e6;
		out->close_cost_ms = p->close_seen_ns / 1e6;
		out->bank_ms = h->node_bank_ns / 1e6;
		/* the last window's hits so far: open, or closed with its probes maybe still going */
		if (p->n_win && !p->on && hits > p->decided &&
		    (hits - p->decided) * h->cost_ns / 1e6 > out->close_cost_ms)
			out->close_cost_ms = (hits - p->decided) * h->cost_ns / 1e6;
		for (; i < p->n_win; i++) {
			struct trail_heap_window *w = &out->windows[out->n_windows++];

			*w = p->win[i % TRAIL_HEAP_WINDOWS];
			if (i == p->n_win - 1 && hits > p->win_hits0)
				w->hits = hits - p->win_hits0;
		}
		return;
	}
	if (!budget)
		return;
	out->cycles = p->cycles;
	out->cycles_spent = p->spent;
	out->close_cost_ms = p->close_seen_ns / 1e6;
	if (!p->cpu_known)
		return;
	if (!proc__cpu_ns(pid, &cpu) || cpu < p->cpu_last_ns)
		cpu = p->cpu_last_ns;	/* gone: as of the last tick */
	out->has_target_cpu = true;
	out->target_cpu_ms = (cpu - p->cpu_start_ns) / 1e6;
}

void heap__sampling(struct heap *h, uint32_t pid, struct trail_heap *out)
{
	struct heap_proc *p = heap_proc_get(h, pid, false);
	size_t i;

	/* the last to end with PID: an earlier process may have had it */
	for (i = h->n_done; !p && i--;) {
		if (h->done[i].pid == pid) {
			*out = h->done[i].sampling;
			return;
		}
	}
	heap_sampling_now(h, p, pid, out);
}
