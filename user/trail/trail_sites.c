// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * A target's allocation sites: the structs, their one JSON writer and their
 * one reader (every field checked: a trail is anyone's file).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "kinds.h"
#include "sanitize.h"
#include "trail_sites.h"

/* pprof rounds object counts to 64-bit integers */
#define OBJECTS_MAX 9e18

static const char *const heap_modes[] = {
	[TRAIL_HEAP_FULL] = "full",
	[TRAIL_HEAP_SAMPLED] = "sampled",
	[TRAIL_HEAP_BUDGET] = "budget",
	[TRAIL_HEAP_NODE] = "node-budget",
};

struct trail_sites *trail_sites__new(void)
{
	return calloc(1, sizeof(struct trail_sites));
}

static void frame_free(struct trail_frame *fr)
{
	free(fr->function);
	free(fr->symbol);
	free(fr->module);
	free(fr->build_id);
	free(fr->source);
}

static void site_free(struct trail_site *site)
{
	size_t i;

	for (i = 0; i < site->n_frames; i++)
		frame_free(&site->frames[i]);
	free(site->frames);
	free(site->phase);
}

void trail_sites__free(struct trail_sites *ts)
{
	size_t i;

	if (!ts)
		return;
	for (i = 0; i < ts->n; i++)
		site_free(&ts->list[i]);
	free(ts->list);
	free(ts);
}

struct trail_site *trail_sites__add(struct trail_sites *ts)
{
	if (array__grow((void **)&ts->list, &ts->cap, ts->n + 1, sizeof(*ts->list)))
		return NULL;
	memset(&ts->list[ts->n], 0, sizeof(ts->list[0]));
	return &ts->list[ts->n++];
}

struct trail_frame *trail_site__add_frame(struct trail_site *site)
{
	struct trail_frame *f = realloc(site->frames, (site->n_frames + 1) * sizeof(*f));

	if (!f)
		return NULL;
	site->frames = f;
	memset(&f[site->n_frames], 0, sizeof(*f));
	return &f[site->n_frames++];
}

static int by_bytes(const void *a, const void *b)
{
	const struct trail_site *x = a, *y = b;

	return x->alloc_bytes < y->alloc_bytes ? 1 : x->alloc_bytes > y->alloc_bytes ? -1 : 0;
}

void trail_sites__sort(struct trail_sites *ts)
{
	if (ts->n > 1)
		qsort(ts->list, ts->n, sizeof(*ts->list), by_bytes);
}

static int by_inuse(const void *a, const void *b)
{
	const struct trail_site *x = a, *y = b;

	if (x->inuse_bytes != y->inuse_bytes)
		return x->inuse_bytes < y->inuse_bytes ? 1 : -1;
	return by_bytes(a, b);
}

size_t trail_sites__keep_live(struct trail_sites *ts, size_t max)
{
	return trail_sites__keep_live_and(ts, max, -1, 0);
}

size_t trail_sites__keep_live_and(struct trail_sites *ts, size_t max, int kind, size_t max_kind)
{
	size_t i, n = 0, live = 0, cut = 0, m;
	struct trail_site tmp;

	/* KIND's sites to the end, their in-use figures zeroed: they count what was allocated */
	for (i = 0; i < ts->n; i++) {
		if (ts->list[i].kind == kind) {
			ts->list[i].inuse_bytes = 0;
			ts->list[i].inuse_objects = 0;
			continue;
		}
		tmp = ts->list[live];
		ts->list[live++] = ts->list[i];
		ts->list[i] = tmp;
	}
	if (live > 1)
		qsort(ts->list, live, sizeof(*ts->list), by_inuse);
	if (ts->n - live > 1)
		qsort(ts->list + live, ts->n - live, sizeof(*ts->list), by_bytes);
	for (n = 0; n < live && n < max && ts->list[n].inuse_bytes; n++)
		;
	for (i = n; i < live; i++) {
		cut += ts->list[i].inuse_bytes != 0;
		site_free(&ts->list[i]);
	}
	for (m = 0; live + m < ts->n && m < max_kind && ts->list[live + m].alloc_bytes; m++)
		;
	for (i = live + m; i < ts->n; i++)
		site_free(&ts->list[i]);
	memmove(ts->list + n, ts->list + live, m * sizeof(*ts->list));
	ts->n = n + m;
	return cut;
}

const char *trail_site__kind_name(int kind)
{
	return kind == TRAIL_SITE_FAULTS ? "faults" : kind__name(kind);
}

const char *trail_frame__name(const struct trail_frame *fr, char *buf, size_t len)
{
	const char *base;

	if (fr->function && strcmp(fr->function, "[unknown]"))
		return fr->function;
	if (!fr->module)
		return fr->function ? fr->function : "[unknown]";
	base = strrchr(fr->module, '/');
	snprintf(buf, len, "%s+0x%" PRIx64, base ? base + 1 : fr->module, fr->offset);
	return buf;
}

const char *trail_heap__mode_name(enum trail_heap_mode mode)
{
	return (unsigned)mode < sizeof(heap_modes) / sizeof(heap_modes[0]) ? heap_modes[mode] : "?";
}

bool trail_sites__inuse(const struct trail_sites *ts)
{
	return !ts || !ts->has_heap || ts->heap.inuse;
}

/* ---- the writer ---- */

static void set_str(json_t *o, const char *key, const char *v)
{
	if (v)
		json_object_set_new(o, key, sanitize__json(v));
}

json_t *trail_frame__json(const struct trail_frame *fr)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	if (fr->has_address)
		json_object_set_new(o, "address", json_sprintf("0x%" PRIx64, fr->address));
	if (fr->module) {
		set_str(o, "module", fr->module);
		json_object_set_new(o, "offset", json_sprintf("0x%" PRIx64, fr->offset));
	}
	set_str(o, "build_id", fr->build_id);
	set_str(o, "function", fr->function);
	set_str(o, "symbol", fr->symbol);
	set_str(o, "source", fr->source);
	return o;
}

static json_t *heap_json(const struct trail_heap *h)
{
	json_t *o = json_pack("{s:s, s:I, s:b, s:I, s:f}", "mode", trail_heap__mode_name(h->mode),
			      "sample_bytes", (json_int_t)h->sample_bytes, "inuse", h->inuse,
			      "probe_hits", (json_int_t)h->probe_hits, "coverage", h->coverage);

	if (!o)
		return NULL;
	if (h->has_cost) {
		json_object_set_new(o, "cost_per_hit_ns", json_real(h->cost_per_hit_ns));
		json_object_set_new(o, "probe_cost_ms", json_real(h->probe_cost_ms));
	}
	if (h->mode == TRAIL_HEAP_BUDGET || h->mode == TRAIL_HEAP_NODE) {
		json_object_set_new(o, "budget_pct", json_real(h->budget_pct));
		json_object_set_new(o, "cycles", json_integer((json_int_t)h->cycles));
		json_object_set_new(o, "cycles_spent", json_integer((json_int_t)h->cycles_spent));
		json_object_set_new(o, "close_ms", json_real(h->close_ms));
		json_object_set_new(o, "close_cost_ms", json_real(h->close_cost_ms));
	}
	if (h->mode == TRAIL_HEAP_BUDGET && h->has_target_cpu)
		json_object_set_new(o, "target_cpu_ms", json_real(h->target_cpu_ms));
	if (h->mode == TRAIL_HEAP_NODE) {
		json_t *list = json_array();
		size_t i;

		json_object_set_new(o, "bank_ms", json_real(h->bank_ms));
		for (i = 0; list && i < h->n_windows; i++) {
			const struct trail_heap_window *w = &h->windows[i];

			json_array_append_new(list, json_pack("{s:I, s:o, s:I}", "start_ms",
							      (json_int_t)w->start_ms, "end_ms",
							      w->end_ms ? json_integer((json_int_t)w->end_ms) :
							      json_null(), "hits", (json_int_t)w->hits));
		}
		json_object_set_new(o, "windows", list);
	}
	return o;
}

static json_t *site_json(const struct trail_site *site)
{
	json_t *o = json_object(), *frames = json_array();
	size_t i;

	if (!o || !frames) {
		json_decref(o);
		json_decref(frames);
		return NULL;
	}
	json_object_set_new(o, "kind", json_string(trail_site__kind_name(site->kind)));
	set_str(o, "phase", site->phase);
	json_object_set_new(o, "phase_seq", site->folded ? json_null() :
					    json_integer(site->phase_seq));
	if (site->folded)
		json_object_set_new(o, "folded", json_true());
	json_object_set_new(o, "alloc_bytes", json_integer((json_int_t)site->alloc_bytes));
	json_object_set_new(o, "alloc_objects", json_real(site->alloc_objects));
	json_object_set_new(o, "inuse_bytes", json_integer((json_int_t)site->inuse_bytes));
	json_object_set_new(o, "inuse_objects", json_real(site->inuse_objects));
	json_object_set_new(o, "samples", json_integer((json_int_t)site->samples));
	for (i = 0; i < site->n_frames; i++)
		json_array_append_new(frames, trail_frame__json(&site->frames[i]));
	json_object_set_new(o, "frames", frames);
	if (site->frames_truncated)
		json_object_set_new(o, "frames_truncated", json_true());
	return o;
}

json_t *trail_sites__json(const struct trail_sites *ts)
{
	json_t *list = json_array(), *o;
	size_t i;

	if (!list)
		return NULL;
	for (i = 0; i < ts->n; i++)
		json_array_append_new(list, site_json(&ts->list[i]));
	o = json_pack("{s:o}", "list", list);
	if (o && ts->has_heap)
		json_object_set_new(o, "heap", heap_json(&ts->heap));
	return o;
}

/* ---- the reader ---- */

/* KEY of O, "0x" and hex digits, into *OUT; *HAS whether it is there. */
static int take_hex(struct schema *s, json_t *o, const char *key, uint64_t *out, bool *has)
{
	const char *v = NULL, *p;
	size_t at;

	if (schema__str(s, o, key, 0, SIZE_MAX, &v) < 0)
		return -1;
	if (has)
		*has = v != NULL;
	if (!v)
		return 0;
	/* the prefix first: a shorter string ends before v + 2 */
	p = v;
	if (!strncmp(v, "0x", 2))
		for (p = v + 2; *p && strchr("0123456789abcdefABCDEF", *p); p++)
			;
	if (p == v || p == v + 2 || *p || p - v > 18) {
		at = schema__key(s, key);
		schema__fail(s, "not an address ('%s')", v);
		schema__up(s, at);
		return -1;
	}
	*out = strtoull(v + 2, NULL, 16);
	return 0;
}

int trail_frame__from_json(struct schema *s, json_t *v, struct trail_frame *fr)
{
	bool has_offset = false;

	memset(fr, 0, sizeof(*fr));
	if (schema__is_object(s, v) < 0 ||
	    take_hex(s, v, "address", &fr->address, &fr->has_address) < 0 ||
	    take_hex(s, v, "offset", &fr->offset, &has_offset) < 0 ||
	    schema__str_dup(s, v, "function", 0, SIZE_MAX, &fr->function) < 0 ||
	    schema__str_dup(s, v, "symbol", 0, SIZE_MAX, &fr->symbol) < 0 ||
	    schema__str_dup(s, v, "module", 0, SIZE_MAX, &fr->module) < 0 ||
	    schema__str_dup(s, v, "build_id", 0, SIZE_MAX, &fr->build_id) < 0 ||
	    schema__str_dup(s, v, "source", 0, SIZE_MAX, &fr->source) < 0)
		return -1;
	return 0;
}

/* A node budget's windows, the latest TRAIL_HEAP_WINDOWS of them. */
static int read_windows(struct schema *s, json_t *v, struct trail_heap *h)
{
	json_t *list, *w;
	size_t at, in, i;

	if (schema__array(s, v, "windows", 0, &list) < 0)
		return -1;
	if (!list)
		return 0;
	at = schema__key(s, "windows");
	json_array_foreach(list, i, w) {
		struct trail_heap_window *hw;
		json_t *end;

		in = schema__index(s, i);
		if (i >= TRAIL_HEAP_WINDOWS)
			return schema__fail(s, "more than %d windows", TRAIL_HEAP_WINDOWS);
		hw = &h->windows[h->n_windows];
		end = json_object_get(w, "end_ms");
		if (schema__is_object(s, w) < 0 ||
		    schema__size(s, w, "start_ms", SCHEMA_NEED, &hw->start_ms) < 0 ||
		    (end && !json_is_null(end) &&
		     schema__size(s, w, "end_ms", 0, &hw->end_ms) < 0) ||
		    schema__size(s, w, "hits", 0, &hw->hits) < 0)
			return -1;
		h->n_windows++;
		schema__up(s, in);
	}
	schema__up(s, at);
	return 0;
}

static int read_heap(struct schema *s, json_t *v, struct trail_heap *h)
{
	size_t at = schema__key(s, "heap"), i;
	const char *mode = NULL;

	if (schema__str(s, v, "mode", SCHEMA_NEED, SIZE_MAX, &mode) < 0)
		return -1;
	for (i = 0; i < sizeof(heap_modes) / sizeof(heap_modes[0]); i++)
		if (!strcmp(mode, heap_modes[i]))
			break;
	if (i == sizeof(heap_modes) / sizeof(heap_modes[0])) {
		schema__key(s, "mode");
		return schema__fail(s, "not a heap mode ('%s')", mode);
	}
	h->mode = (enum trail_heap_mode)i;
	h->has_cost = json_object_get(v, "cost_per_hit_ns") != NULL;
	h->has_target_cpu = json_object_get(v, "target_cpu_ms") != NULL;
	if (schema__size(s, v, "sample_bytes", 0, &h->sample_bytes) < 0 ||
	    schema__size(s, v, "probe_hits", 0, &h->probe_hits) < 0 ||
	    schema__size(s, v, "cycles", 0, &h->cycles) < 0 ||
	    schema__size(s, v, "cycles_spent", 0, &h->cycles_spent) < 0 ||
	    schema__bool(s, v, "inuse", 0, &h->inuse) < 0 ||
	    schema__num(s, v, "coverage", 0, 0, 1, &h->coverage) < 0 ||
	    schema__num(s, v, "cost_per_hit_ns", 0, 0, 1e12, &h->cost_per_hit_ns) < 0 ||
	    schema__num(s, v, "probe_cost_ms", 0, 0, 1e18, &h->probe_cost_ms) < 0 ||
	    schema__num(s, v, "budget_pct", 0, 0, 100, &h->budget_pct) < 0 ||
	    schema__num(s, v, "close_ms", 0, 0, 1e18, &h->close_ms) < 0 ||
	    schema__num(s, v, "close_cost_ms", 0, 0, 1e18, &h->close_cost_ms) < 0 ||
	    schema__num(s, v, "target_cpu_ms", 0, 0, 1e18, &h->target_cpu_ms) < 0 ||
	    schema__num(s, v, "bank_ms", 0, 0, 1e18, &h->bank_ms) < 0 ||
	    read_windows(s, v, h) < 0)
		return -1;
	schema__up(s, at);
	return 0;
}

static int read_site(struct schema *s, json_t *v, struct trail_site *site)
{
	const char *kind = NULL;
	int64_t seq = 0;
	json_t *frames, *fr;
	size_t at, in, i;
	int k;

	if (schema__is_object(s, v) < 0 ||
	    schema__str(s, v, "kind", SCHEMA_NEED, SIZE_MAX, &kind) < 0 ||
	    schema__bool(s, v, "folded", 0, &site->folded) < 0 ||
	    schema__str_dup(s, v, "phase", 0, SIZE_MAX, &site->phase) < 0 ||
	    /* a folded site's phase is kept by name, a listed one's by its number */
	    schema__int(s, v, "phase_seq", site->folded ? SCHEMA_NULL : SCHEMA_NEED, 0,
			UINT32_MAX, &seq) < 0 ||
	    schema__num(s, v, "alloc_objects", 0, 0, OBJECTS_MAX, &site->alloc_objects) < 0 ||
	    schema__num(s, v, "inuse_objects", 0, 0, OBJECTS_MAX, &site->inuse_objects) < 0 ||
	    schema__bool(s, v, "frames_truncated", 0, &site->frames_truncated) < 0 ||
	    schema__array(s, v, "frames", 0, &frames) < 0)
		return -1;
	k = strcmp(kind, "faults") ? kind__from_name(kind) : TRAIL_SITE_FAULTS;
	if (k < 0) {
		schema__key(s, "kind");
		return schema__fail(s, "not a kind of site ('%s')", kind);
	}
	site->kind = k;
	site->phase_seq = site->folded ? 0 : (uint32_t)seq;
	if (schema__size(s, v, "alloc_bytes", SCHEMA_NEED, &site->alloc_bytes) < 0 ||
	    schema__size(s, v, "inuse_bytes", 0, &site->inuse_bytes) < 0 ||
	    schema__size(s, v, "samples", 0, &site->samples) < 0)
		return -1;
	at = schema__key(s, "frames");
	json_array_foreach(frames, i, fr) {
		struct trail_frame *f = trail_site__add_frame(site);

		in = schema__index(s, i);
		if (!f)
			return schema__fail(s, "out of memory");
		if (trail_frame__from_json(s, fr, f) < 0)
			return -1;
		schema__up(s, in);
	}
	schema__up(s, at);
	return 0;
}

int trail_sites__from_json(struct schema *s, json_t *v, struct trail_sites **out)
{
	struct trail_sites *ts = trail_sites__new();
	json_t *list, *heap, *site;
	size_t at, in, i;

	if (!ts)
		return schema__fail(s, "out of memory");
	if (schema__is_object(s, v) < 0 || schema__array(s, v, "list", SCHEMA_NEED, &list) < 0 ||
	    schema__object(s, v, "heap", 0, &heap) < 0)
		goto fail;
	if (heap) {
		ts->has_heap = true;
		if (read_heap(s, heap, &ts->heap) < 0)
			goto fail;
	}
	at = schema__key(s, "list");
	json_array_foreach(list, i, site) {
		struct trail_site *ns = trail_sites__add(ts);

		in = schema__index(s, i);
		if (!ns) {
			schema__fail(s, "out of memory");
			goto fail;
		}
		if (read_site(s, site, ns) < 0)
			goto fail;
		schema__up(s, in);
	}
	schema__up(s, at);
	*out = ts;
	return 0;
fail:
	trail_sites__free(ts);
	return -1;
}
