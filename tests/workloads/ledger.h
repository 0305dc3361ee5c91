/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The ground truth of the accelerator workloads: what each phase allocated
 * and freed per kind of memory, from the workload's own arithmetic, in the
 * shape memtrail reports it. No malloc and no stdio (static tables, one
 * write() at the end), so it adds nothing to what a tracer sees.
 *
 *   ledger_phase("model_load")      at the call that starts a phase
 *   ledger_add(LK_CUDA_DEVICE, +n)  each allocation (+size) and free (-size)
 *   ledger_alloc(kind, ptr, n)      the same, and remembers the live block
 *   ledger_free(ptr)                ... and forgets it (for live_at_oom)
 *
 * Per (phase, kind): allocations (sum of +), deallocations (sum of -),
 * segment_change (their difference) and segment_peak (the highest level
 * over the phase less the level at its start, never below 0). Phase
 * "start" is current at program start.
 */
#ifndef WORKLOAD_LEDGER_H
#define WORKLOAD_LEDGER_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum ledger_kind {
	LK_CUDA_DEVICE,
	LK_CUDA_HOST,
	LK_CUDA_MANAGED,
	LK_NEURON_DEVICE,
	LK_NEURON_HOST,
	LK_NR,
};

static const char *const ledger_kind_names[LK_NR] = {
	"cuda_device", "cuda_host", "cuda_managed", "neuron_device", "neuron_host",
};

#define LEDGER_PHASES 32
#define LEDGER_LIVE 256

struct ledger_cell {
	int touched;
	long long alloc, dealloc, start, peak;
};

struct ledger_live {
	uintptr_t key;			/* 0: freed */
	long long size;
	int kind, phase;
};

static struct {
	const char *name[LEDGER_PHASES];
	struct ledger_cell cell[LEDGER_PHASES][LK_NR];
	long long level[LK_NR];
	int n;				/* phases entered; the current one is n - 1 */
	struct ledger_live live[LEDGER_LIVE];	/* in allocation order, never reused */
	int nlive;
} ledger = { .name = { "start" }, .n = 1 };

static inline void ledger_phase(const char *name)
{
	int k;

	if (ledger.n == LEDGER_PHASES)
		_exit(5);
	ledger.name[ledger.n] = name;
	for (k = 0; k < LK_NR; k++)
		ledger.cell[ledger.n][k].start = ledger.level[k];
	ledger.n++;
}

static inline const char *ledger_current(void)
{
	return ledger.name[ledger.n - 1];
}

static inline void ledger_add(enum ledger_kind kind, long long delta)
{
	struct ledger_cell *c = &ledger.cell[ledger.n - 1][kind];

	c->touched = 1;
	if (delta > 0)
		c->alloc += delta;
	else
		c->dealloc -= delta;
	ledger.level[kind] += delta;
	if (ledger.level[kind] - c->start > c->peak)
		c->peak = ledger.level[kind] - c->start;
}

static inline void ledger_alloc(enum ledger_kind kind, const void *key, long long size)
{
	if (ledger.nlive == LEDGER_LIVE || !key)
		_exit(5);
	ledger.live[ledger.nlive++] = (struct ledger_live){ (uintptr_t)key, size, kind, ledger.n - 1 };
	ledger_add(kind, size);
}

static inline void ledger_free(const void *key)
{
	int i;

	for (i = 0; i < ledger.nlive && ledger.live[i].key != (uintptr_t)key; i++)
		;
	if (i == ledger.nlive || !key)
		_exit(5);
	ledger.live[i].key = 0;
	ledger_add(ledger.live[i].kind, -ledger.live[i].size);
}

/* A JSON document built in a static buffer, then written at once. */
struct jbuf {
	char s[16384];
	size_t len;
};

static inline void jb_printf(struct jbuf *jb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void jb_printf(struct jbuf *jb, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(jb->s + jb->len, sizeof(jb->s) - jb->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(jb->s) - jb->len)
		_exit(6);
	jb->len += (size_t)n;
}

static inline void jb_write(struct jbuf *jb)
{
	size_t off = 0;
	ssize_t n;

	while (off < jb->len) {
		n = write(1, jb->s + off, jb->len - off);
		if (n <= 0)
			_exit(9);
		off += (size_t)n;
	}
}

/* "pid": P, "phases": [...] (no braces around: the caller adds its own keys). */
static inline void ledger_json(struct jbuf *jb)
{
	const struct ledger_cell *c;
	int p, k, first;

	jb_printf(jb, "\"pid\": %d, \"phases\": [", (int)getpid());
	for (p = 0; p < ledger.n; p++) {
		jb_printf(jb, "%s{\"name\": \"%s\", \"kinds\": {", p ? ", " : "", ledger.name[p]);
		for (k = 0, first = 1; k < LK_NR; k++) {
			c = &ledger.cell[p][k];
			if (!c->touched)
				continue;
			jb_printf(jb, "%s\"%s\": {\"allocations\": %lld, \"deallocations\": %lld, "
				  "\"segment_change\": %lld, \"segment_peak\": %lld}",
				  first ? "" : ", ", ledger_kind_names[k], c->alloc, c->dealloc,
				  c->alloc - c->dealloc, c->peak);
			first = 0;
		}
		jb_printf(jb, "}}");
	}
	jb_printf(jb, "]");
}

/* [{"size": S, "kind": K, "phase": P}, ...]: the blocks live now, oldest first. */
static inline void ledger_live_json(struct jbuf *jb)
{
	const struct ledger_live *l;
	int i, first = 1;

	jb_printf(jb, "[");
	for (i = 0; i < ledger.nlive; i++) {
		l = &ledger.live[i];
		if (!l->key)
			continue;
		jb_printf(jb, "%s{\"size\": %lld, \"kind\": \"%s\", \"phase\": \"%s\"}",
			  first ? "" : ", ", l->size, ledger_kind_names[l->kind],
			  ledger.name[l->phase]);
		first = 0;
	}
	jb_printf(jb, "]");
}

#endif
