// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "array.h"
#include "container.h"
#include "format.h"
#include "kinds.h"
#include "outfile.h"
#include "sanitize.h"
#include "schema.h"
#include "trail.h"
#include "trailstream.h"

static const char *const lost_names[MEMTRAIL_LOST_MAX] = {
	[MEMTRAIL_LOST_RINGBUF] = "ringbuf",
	[MEMTRAIL_LOST_TARGETS] = "targets",
	[MEMTRAIL_LOST_CELLS] = "cells",
	[MEMTRAIL_LOST_MM] = "mm",
	[MEMTRAIL_LOST_PHASE_NAMES] = "phase_names",
	[MEMTRAIL_LOST_DEVICE] = "device",
	[MEMTRAIL_LOST_SITES] = "sites",
	[MEMTRAIL_LOST_STACKS] = "stacks",
	[MEMTRAIL_LOST_HEAP] = "heap",
	[MEMTRAIL_LOST_SCOPES] = "scopes",
	[MEMTRAIL_LOST_MAPS] = "maps",
	[MEMTRAIL_LOST_SKIPPED] = "skipped",
};

const char *trail__lost_name(int why)
{
	return why >= 0 && why < MEMTRAIL_LOST_MAX ? lost_names[why] : NULL;
}

int trail__init(struct trail *t)
{
	memset(t, 0, sizeof(*t));
	t->version = MEMTRAIL_TRAIL_VERSION;
	t->events = json_array();
	return t->events ? 0 : -ENOMEM;
}

static void target_free(struct trail_target *tt)
{
	free(tt->cmdline);
	free(tt->cgroup);
	json_decref(tt->attribution);
	free(tt->timeline);
	phase_log__free(&tt->phases);
	json_decref(tt->verdict);
	json_decref(tt->sites);
	verdict__free_facts(&tt->facts);
}

void trail__remove_target(struct trail *t, struct trail_target *tt)
{
	size_t i = tt - t->targets, last = t->n_targets - 1, at;

	if (i >= t->n_targets)
		return;
	if (pidmap__get(&t->by_pid, tt->pid, &at) && at == i)
		pidmap__del(&t->by_pid, tt->pid);
	target_free(tt);
	if (i != last) {
		*tt = t->targets[last];
		if (pidmap__get(&t->by_pid, tt->pid, &at) && at == last)
			pidmap__put(&t->by_pid, tt->pid, i);	/* replaces: cannot fail */
	}
	t->n_targets--;
}

void trail__set_started(struct trail *t)
{
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(t->started, sizeof(t->started), "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void trail__free(struct trail *t)
{
	size_t i;

	for (i = 0; i < t->n_targets; i++)
		target_free(&t->targets[i]);
	free(t->targets);
	pidmap__free(&t->by_pid);
	free(t->command);
	json_decref(t->events);
	json_decref(t->snapshot);
	json_decref(t->verdict_doc);
	json_decref(t->kernel);
	memset(t, 0, sizeof(*t));
}

struct trail_target *trail__add_target(struct trail *t, uint32_t pid)
{
	struct trail_target *tt;

	if (array__grow((void **)&t->targets, &t->cap_targets, t->n_targets + 1, sizeof(*tt)) ||
	    pidmap__put(&t->by_pid, pid, t->n_targets))
		return NULL;
	tt = &t->targets[t->n_targets++];
	memset(tt, 0, sizeof(*tt));
	tt->pid = pid;
	phase_log__init(&tt->phases, t->phase_history);
	tt->phases.max_names = t->phase_names;
	return tt;
}

struct trail_target *trail__find_target(struct trail *t, uint32_t pid)
{
	size_t i;

	return pidmap__get(&t->by_pid, pid, &i) ? &t->targets[i] : NULL;
}

int trail__add_sample(struct trail_target *tt, uint64_t t_ms, const int64_t level[])
{
	struct trail_sample *s;

	if (array__grow((void **)&tt->timeline, &tt->cap_samples, tt->n_samples + 1, sizeof(*s)))
		return -ENOMEM;
	s = &tt->timeline[tt->n_samples++];
	s->t_ms = t_ms;
	memcpy(s->level, level, sizeof(s->level));
	return 0;
}

bool trail__set_device_limit(struct trail_target *tt, int kind, int32_t device, uint64_t bytes)
{
	uint32_t i;

	for (i = 0; i < tt->n_dev_limits; i++) {
		if (tt->dev_limits[i].kind == kind && tt->dev_limits[i].device == device) {
			tt->dev_limits[i].bytes = bytes;
			return true;
		}
	}
	if (tt->n_dev_limits == TRAIL_DEVICE_LIMITS)
		return false;
	tt->dev_limits[tt->n_dev_limits++] = (struct trail_device_limit){ kind, device, bytes };
	return true;
}

uint64_t trail__device_limit(const struct trail_target *tt, int kind)
{
	uint64_t sum = 0;
	uint32_t i;

	for (i = 0; i < tt->n_dev_limits; i++)
		if (tt->dev_limits[i].kind == kind)
			sum += tt->dev_limits[i].bytes;
	return sum;
}

void trail__trim_timeline(struct trail_target *tt, uint64_t since_ms)
{
	size_t n = 0;

	while (n + 1 < tt->n_samples && tt->timeline[n + 1].t_ms <= since_ms)
		n++;
	if (!n)
		return;
	memmove(tt->timeline, tt->timeline + n, (tt->n_samples - n) * sizeof(*tt->timeline));
	tt->n_samples -= n;
}

int trail__add_event(struct trail *t, json_t *obj)
{
	return obj && !json_array_append_new(t->events, obj) ? 0 : -ENOMEM;
}

/* ---- writing ---- */

static json_t *fields_to_json(const struct trail *t, const int64_t f[][PF_FIELDS])
{
	json_t *kinds = json_object();
	int k, i;

	for (k = 0; k < MEMTRAIL_KIND_MAX; k++) {
		json_t *o;

		if (!(t->kinds & (1U << k)))
			continue;
		o = json_object();
		for (i = 0; i < PF_FIELDS; i++)
			json_object_set_new(o, phase__field_name(i), json_integer(f[k][i]));
		json_object_set_new(kinds, kind__name(k), o);
	}
	return kinds;
}

json_t *trail__phase_json(const struct trail *t, const struct trail_phase *p)
{
	return json_pack("{s:o, s:I, s:I, s:o}", "name", sanitize__json(p->name),
			 "start", (json_int_t)p->start_ms,
			 "end", (json_int_t)p->end_ms, "kinds", fields_to_json(t, p->f));
}

static json_t *phases_to_json(const struct trail *t, const struct phase_log *l)
{
	json_t *arr = json_array();
	size_t i;

	for (i = 0; i < phase_log__count(l); i++)
		json_array_append_new(arr, trail__phase_json(t, phase_log__at(l, i)));
	return arr;
}

static json_t *summary_to_json(const struct trail *t, const struct phase_log *l)
{
	json_t *arr = json_array();
	size_t i;
	int k, f;

	for (i = 0; i < l->n_aggs; i++) {
		const struct phase_agg *a = &l->aggs[i];
		json_t *kinds = json_object();

		for (k = 0; k < MEMTRAIL_KIND_MAX; k++) {
			json_t *o;

			if (!(t->kinds & (1U << k)))
				continue;
			o = json_object();
			for (f = 0; f < PF_FIELDS; f++)
				json_object_set_new(o, phase__field_name(f),
					json_pack("{s:I, s:I, s:I}", "total", (json_int_t)a->total[k][f],
						  "mean", (json_int_t)(a->total[k][f] / (int64_t)a->count),
						  "max", (json_int_t)a->max[k][f]));
			json_object_set_new(kinds, kind__name(k), o);
		}
		json_array_append_new(arr, json_pack("{s:o, s:I, s:o}", "name", sanitize__json(a->name),
						     "count", (json_int_t)a->count, "kinds", kinds));
	}
	return arr;
}

static json_t *device_limits_json(const struct trail_target *tt)
{
	json_t *arr = json_array();
	uint32_t i;

	for (i = 0; i < tt->n_dev_limits; i++) {
		const struct trail_device_limit *l = &tt->dev_limits[i];

		json_array_append_new(arr, json_pack("{s:s, s:o, s:I}", "kind", kind__name(l->kind),
						     "device", l->device >= 0 ? json_integer(l->device)
									     : json_null(),
						     "bytes", (json_int_t)l->bytes));
	}
	return arr;
}

json_t *trail__target_json(const struct trail *t, const struct trail_target *tt,
			   bool with_timeline)
{
	json_t *o = json_object(), *kinds = json_object();
	size_t i;
	int k;

	json_object_set_new(o, "pid", json_integer(tt->pid));
	json_object_set_new(o, "ppid", json_integer(tt->ppid));
	json_object_set_new(o, "comm", sanitize__json(tt->comm));
	json_object_set_new(o, "cmdline", sanitize__json(tt->cmdline));
	json_object_set_new(o, "cgroup", sanitize__json(tt->cgroup));
	/* named as watch names them: from the cgroup path and the kubelet's pod logs */
	if (tt->attribution)
		container__put(o, tt->attribution);
	json_object_set_new(o, "start_ms", json_integer(tt->start_ms));
	json_object_set_new(o, "end_ms", json_integer(tt->end_ms));
	if (tt->exited)
		json_object_set_new(o, "exit", json_pack("{s:i, s:i}", "code", tt->exit_code,
							 "signal", tt->exit_signal));
	else
		json_object_set_new(o, "exit", json_null());
	for (k = 0; k < MEMTRAIL_KIND_MAX; k++) {
		if (!(t->kinds & (1U << k)))
			continue;
		json_object_set_new(kinds, kind__name(k),
				    json_pack("{s:I, s:I, s:I}", "current", (json_int_t)tt->current[k],
					      "peak", (json_int_t)tt->peak[k],
					      "baseline", (json_int_t)tt->baseline[k]));
	}
	json_object_set_new(o, "kinds", kinds);
	json_object_set_new(o, "device_limits", device_limits_json(tt));
	json_object_set(o, "verdict", tt->verdict ? tt->verdict : json_null());
	if (tt->sites)
		json_object_set(o, "sites", tt->sites);
	json_object_set_new(o, "phases", phases_to_json(t, &tt->phases));
	json_object_set_new(o, "phases_folded", json_integer(tt->phases.folded));
	json_object_set_new(o, "phase_summary", summary_to_json(t, &tt->phases));
	if (with_timeline) {
		json_t *tl = json_array();

		for (i = 0; i < tt->n_samples; i++) {
			const struct trail_sample *s = &tt->timeline[i];
			json_t *so = json_object();

			json_object_set_new(so, "t_ms", json_integer(s->t_ms));
			for (k = 0; k < MEMTRAIL_KIND_MAX; k++)
				if (t->kinds & (1U << k))
					json_object_set_new(so, kind__name(k), json_integer(s->level[k]));
			json_array_append_new(tl, so);
		}
		json_object_set_new(o, "timeline", tl);
	}
	return o;
}

/* A trail's fields before its targets: version, start, duration, interval, command, kinds. */
static json_t *head_json(const struct trail *t)
{
	json_t *root = json_object(), *kinds = json_array();
	int k;

	json_object_set_new(root, "memtrail", json_integer(t->version));
	json_object_set_new(root, "started", json_string(t->started));
	json_object_set_new(root, "duration_ms", json_integer(t->duration_ms));
	json_object_set_new(root, "interval_ms", json_integer(t->interval_ms));
	json_object_set_new(root, "command", sanitize__json(t->command));
	for (k = 0; k < MEMTRAIL_KIND_MAX; k++)
		if (t->kinds & (1U << k))
			json_array_append_new(kinds, json_string(kind__name(k)));
	json_object_set_new(root, "kinds", kinds);
	if (t->kernel)
		json_object_set(root, "kernel", t->kernel);
	return root;
}

static json_t *lost_json(const struct trail *t)
{
	json_t *lost = json_object();
	int k;

	for (k = 0; k < MEMTRAIL_LOST_MAX; k++)
		json_object_set_new(lost, lost_names[k], json_integer(t->lost[k]));
	return lost;
}

json_t *trail__to_json(const struct trail *t, bool with_timeline)
{
	json_t *root = head_json(t), *targets = json_array();
	size_t i;

	for (i = 0; i < t->n_targets; i++)
		json_array_append_new(targets, trail__target_json(t, &t->targets[i], with_timeline));
	json_object_set_new(root, "targets", targets);
	if (with_timeline)
		json_object_set(root, "events", t->events);
	json_object_set_new(root, "lost", lost_json(t));
	return root;
}

/*
 * Writing JSON files, through a buffer (jansson hands over a few bytes at a
 * time). A whole trail's timelines are most of it (an hour of 200 targets at
 * 100 ms is 7.2 M samples): they are written straight from the sample
 * arrays, never as a jansson tree; everything else goes through jansson.
 */
struct writer {
	int fd;
	int err;
	size_t n;
	char buf[1 << 16];
};

static void out_flush(struct writer *w)
{
	if (!w->err && w->n)
		w->err = outfile__put(w->fd, w->buf, w->n);
	w->n = 0;
}

static void out(struct writer *w, const char *s, size_t len)
{
	if (len > sizeof(w->buf) - w->n) {
		out_flush(w);
		if (len > sizeof(w->buf)) {
			if (!w->err)
				w->err = outfile__put(w->fd, s, len);
			return;
		}
	}
	memcpy(w->buf + w->n, s, len);
	w->n += len;
}

static void out_str(struct writer *w, const char *s)
{
	out(w, s, strlen(s));
}

static int out_cb(const char *buf, size_t size, void *data)
{
	out(data, buf, size);
	return 0;
}

/* A JSON value, compact; takes the reference. */
static void out_json(struct writer *w, json_t *v)
{
	if (!v || json_dump_callback(v, out_cb, w, JSON_COMPACT | JSON_ENCODE_ANY))
		w->err = w->err ? w->err : -ENOMEM;
	json_decref(v);
}

static void out_int(struct writer *w, int64_t v)
{
	char s[24], *p = s + sizeof(s);
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;

	do {
		*--p = '0' + u % 10;
		u /= 10;
	} while (u);
	if (v < 0)
		*--p = '-';
	out(w, p, s + sizeof(s) - p);
}

static void out_timeline(struct writer *w, const struct trail *t, const struct trail_target *tt)
{
	size_t i;
	int k;

	out_str(w, "[");
	for (i = 0; i < tt->n_samples && !w->err; i++) {
		out_str(w, i ? ",{\"t_ms\":" : "{\"t_ms\":");
		out_int(w, tt->timeline[i].t_ms);
		for (k = 0; k < MEMTRAIL_KIND_MAX; k++) {
			if (!(t->kinds & (1U << k)))
				continue;
			out_str(w, ",\"");
			out_str(w, kind__name(k));
			out_str(w, "\":");
			out_int(w, tt->timeline[i].level[k]);
		}
		out_str(w, "}");
	}
	out_str(w, "]");
}

/* BODY writes through a buffer to FD; 0 or -errno. */
static int write_through(int fd, void (*body)(struct writer *w, const void *ctx), const void *ctx)
{
	struct writer *w = calloc(1, sizeof(*w));
	int err;

	if (!w)
		return -ENOMEM;
	w->fd = fd;
	body(w, ctx);
	out_flush(w);
	err = w->err;
	free(w);
	return err;
}

/* ROOT, compact, and a newline. */
static void json_body(struct writer *w, const void *root)
{
	out_json(w, json_incref((json_t *)root));
	out_str(w, "\n");
}

static int fill_json(int fd, void *root)
{
	return write_through(fd, json_body, root);
}

int trail__write_json(json_t *root, const char *path)
{
	return root ? outfile__write(path, fill_json, root) : -ENOMEM;
}

/* The document trail__to_json(t, true) would make, key for key, streamed. */
static void trail_body(struct writer *w, const void *ctx)
{
	const struct trail *t = ctx;
	json_t *head = head_json(t), *v;
	const char *key;
	size_t i = 0;

	if (!head) {
		w->err = -ENOMEM;
		return;
	}
	out_str(w, "{");
	json_object_foreach(head, key, v) {		/* memtrail .. kinds, in order */
		out_str(w, i++ ? ",\"" : "\"");
		out_str(w, key);
		out_str(w, "\":");
		out_json(w, json_incref(v));
	}
	json_decref(head);
	out_str(w, ",\"targets\":[");
	for (i = 0; i < t->n_targets && !w->err; i++) {
		json_t *o = trail__target_json(t, &t->targets[i], false);
		char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
		size_t len = s ? strlen(s) : 0;

		json_decref(o);
		if (len < 2) {
			free(s);
			w->err = -ENOMEM;
			return;
		}
		if (i)
			out_str(w, ",");
		out(w, s, len - 1);		/* the target without its closing brace */
		free(s);
		out_str(w, ",\"timeline\":");
		out_timeline(w, t, &t->targets[i]);
		out_str(w, "}");
	}
	out_str(w, "],\"events\":");
	out_json(w, json_incref(t->events));
	out_str(w, ",\"lost\":");
	out_json(w, lost_json(t));
	out_str(w, "}\n");
}

static int fill_trail(int fd, void *t)
{
	return write_through(fd, trail_body, t);
}

int trail__write(const struct trail *t, const char *path)
{
	return outfile__write(path, fill_trail, (void *)t);
}

int trail__write_new(const struct trail *t, char *path, size_t size)
{
	return outfile__write_new(path, size, fill_trail, (void *)t);
}

/*
 * ---- reading ----
 * A trail is anyone's file: every field report, its exporters and tables use
 * is checked for its type and range, and the first that is wrong is named
 * by its path, "targets[3].pid: out of range (4294967297)" (schema.h).
 * Unknown keys are skipped. Strings from the workloads (comm, command lines,
 * cgroups, phase names in sites, frames) may be absent: the writer leaves
 * out those that are not UTF-8.
 */

#define NEED SCHEMA_NEED
#define OR_NULL SCHEMA_NULL
#define ANY_LEN SIZE_MAX
/* pprof rounds these to 64-bit integers */
#define OBJECTS_MAX 9e18

/* A phase field's least value: allocations and deallocations are sizes, the rest levels. */
static int64_t field_min(int f)
{
	return f == PF_ALLOCATIONS || f == PF_DEALLOCATIONS ? 0 : -TRAIL_LEVEL_MAX;
}

/* Its largest: sizes add up over a run, levels are bounded (trail.h). */
static int64_t field_max(int f)
{
	return f == PF_ALLOCATIONS || f == PF_DEALLOCATIONS ? INT64_MAX : TRAIL_LEVEL_MAX;
}

/* O's "kinds": {kind: {current, peak}}, a target's levels. */
static int read_levels(struct schema *s, struct trail *t, struct trail_target *tt, json_t *o)
{
	json_t *kinds, *v;
	const char *name;
	size_t at, in;
	int k;

	if (schema__object(s, o, "kinds", NEED, &kinds) < 0)
		return -1;
	at = schema__key(s, "kinds");
	json_object_foreach(kinds, name, v) {
		k = kind__from_name(name);
		if (k < 0)
			return schema__fail(s, "unknown kind '%s'", name);
		in = schema__key(s, name);
		if (schema__is_object(s, v) < 0 ||
		    schema__int(s, v, "current", NEED, -TRAIL_LEVEL_MAX, TRAIL_LEVEL_MAX,
				&tt->current[k]) < 0 ||
		    schema__int(s, v, "peak", NEED, -TRAIL_LEVEL_MAX, TRAIL_LEVEL_MAX,
				&tt->peak[k]) < 0 ||
		    /* (trails before memtrail kept baselines have none) */
		    schema__int(s, v, "baseline", 0, -TRAIL_LEVEL_MAX, TRAIL_LEVEL_MAX,
				&tt->baseline[k]) < 0)
			return -1;
		schema__up(s, in);
		t->kinds |= 1U << k;
	}
	schema__up(s, at);
	return 0;
}

/* O's "timeline" from the tree (a trail not read from a file), checked as trailstream.c does. */
static int read_timeline(struct schema *s, struct trail_target *tt, json_t *o)
{
	json_t *tl, *sample, *v;
	const char *name;
	int64_t t_ms, last = 0;
	size_t at, in, i;

	if (schema__array(s, o, "timeline", OR_NULL, &tl) < 0)
		return -1;
	at = schema__key(s, "timeline");
	json_array_foreach(tl, i, sample) {
		int64_t level[MEMTRAIL_KIND_MAX] = { 0 };

		in = schema__index(s, i);
		if (schema__is_object(s, sample) < 0 ||
		    schema__int(s, sample, "t_ms", NEED, 0, TRAIL_T_MS_MAX, &t_ms) < 0)
			return -1;
		if (t_ms < last) {
			schema__key(s, "t_ms");
			return schema__fail(s, "%lld is before the previous sample's %lld",
					    (long long)t_ms, (long long)last);
		}
		json_object_foreach(sample, name, v) {
			int k = kind__from_name(name);

			if (k >= 0 && schema__int(s, sample, name, NEED, -TRAIL_LEVEL_MAX,
						  TRAIL_LEVEL_MAX, &level[k]) < 0)
				return -1;
		}
		if (trail__add_sample(tt, t_ms, level))
			return schema__fail(s, "out of memory");
		last = t_ms;
		schema__up(s, in);
	}
	schema__up(s, at);
	return 0;
}

/* O's "kinds": {kind: {field: value}}, each field read by GET: a phase's or a summary's. */
static int read_fields(struct schema *s, json_t *o,
		       int (*get)(struct schema *s, json_t *v, int k, int f, void *ctx), void *ctx)
{
	json_t *kinds, *v;
	const char *name;
	size_t at, in;
	int k, f;

	if (schema__object(s, o, "kinds", NEED, &kinds) < 0)
		return -1;
	at = schema__key(s, "kinds");
	json_object_foreach(kinds, name, v) {
		k = kind__from_name(name);
		if (k < 0)
			return schema__fail(s, "unknown kind '%s'", name);
		in = schema__key(s, name);
		if (schema__is_object(s, v) < 0)
			return -1;
		for (f = 0; f < PF_FIELDS; f++)
			if (get(s, v, k, f, ctx) < 0)
				return -1;
		schema__up(s, in);
	}
	schema__up(s, at);
	return 0;
}

static int get_phase_field(struct schema *s, json_t *v, int k, int f, void *ctx)
{
	struct trail_phase *p = ctx;

	return schema__int(s, v, phase__field_name(f), NEED, field_min(f), field_max(f),
			   &p->f[k][f]);
}

static int get_agg_field(struct schema *s, json_t *v, int k, int f, void *ctx)
{
	struct phase_agg *a = ctx;
	const char *field = phase__field_name(f);
	json_t *o;
	size_t at;

	if (schema__object(s, v, field, NEED, &o) < 0)
		return -1;
	at = schema__key(s, field);
	/* a total adds up invocations: any 64-bit sum, but of sizes never below zero */
	if (schema__int(s, o, "total", NEED, field_min(f) ? INT64_MIN : 0, INT64_MAX,
			&a->total[k][f]) < 0 ||
	    schema__int(s, o, "max", NEED, field_min(f), field_max(f), &a->max[k][f]) < 0)
		return -1;
	schema__up(s, at);
	return 0;
}

static int read_phases(struct schema *s, struct trail_target *tt, json_t *o)
{
	json_t *arr, *v;
	size_t at, in, i;
	int64_t n;

	if (schema__array(s, o, "phases", 0, &arr) < 0)
		return -1;
	at = schema__key(s, "phases");
	json_array_foreach(arr, i, v) {
		struct trail_phase p = { 0 };
		int64_t start, end;
		const char *name;

		in = schema__index(s, i);
		if (schema__is_object(s, v) < 0 ||
		    schema__str(s, v, "name", NEED, MEMTRAIL_PHASE_NAME_LEN - 1, &name) < 0 ||
		    schema__int(s, v, "start", NEED, 0, TRAIL_T_MS_MAX, &start) < 0 ||
		    schema__int(s, v, "end", NEED, 0, TRAIL_T_MS_MAX, &end) < 0 ||
		    read_fields(s, v, get_phase_field, &p) < 0)
			return -1;
		snprintf(p.name, sizeof(p.name), "%s", name);
		p.start_ms = start;
		p.end_ms = end;
		if (phase_log__push(&tt->phases, &p))
			return schema__fail(s, "out of memory");
		schema__up(s, in);
	}
	schema__up(s, at);
	if (schema__int(s, o, "phases_folded", 0, 0, INT64_MAX, &n) < 0)
		return -1;
	tt->phases.folded = json_is_integer(json_object_get(o, "phases_folded")) ? n : 0;
	if (schema__array(s, o, "phase_summary", 0, &arr) < 0)
		return -1;
	at = schema__key(s, "phase_summary");
	json_array_foreach(arr, i, v) {
		const char *name;
		struct phase_agg *a;

		in = schema__index(s, i);
		if (schema__is_object(s, v) < 0 ||
		    schema__str(s, v, "name", NEED, MEMTRAIL_PHASE_NAME_LEN - 1, &name) < 0 ||
		    schema__int(s, v, "count", NEED, 1, INT64_MAX, &n) < 0)
			return -1;
		a = phase_log__agg(&tt->phases, name);
		if (!a)
			return schema__fail(s, "out of memory");
		a->count = n;
		if (read_fields(s, v, get_agg_field, a) < 0)
			return -1;
		schema__up(s, in);
	}
	schema__up(s, at);
	return 0;
}

static int read_device_limits(struct schema *s, struct trail_target *tt, json_t *o)
{
	json_t *arr, *v;
	size_t at, in, i;

	if (schema__array(s, o, "device_limits", 0, &arr) < 0)
		return -1;
	at = schema__key(s, "device_limits");
	json_array_foreach(arr, i, v) {
		int64_t dev = -1, bytes;
		const char *kind;
		int k;

		in = schema__index(s, i);
		if (schema__is_object(s, v) < 0 ||
		    schema__str(s, v, "kind", NEED, ANY_LEN, &kind) < 0 ||
		    schema__int(s, v, "device", NEED | OR_NULL, 0, INT32_MAX, &dev) < 0 ||
		    schema__int(s, v, "bytes", NEED, 1, INT64_MAX, &bytes) < 0)
			return -1;
		k = kind__from_name(kind);
		if (k < 0 || !(kind__device() & (1U << k))) {
			schema__key(s, "kind");
			return schema__fail(s, "not a device's kind ('%s')", kind);
		}
		if (!trail__set_device_limit(tt, k, dev, bytes))
			return schema__fail(s, "more than %d device limits", TRAIL_DEVICE_LIMITS);
		schema__up(s, in);
	}
	schema__up(s, at);
	return 0;
}

/* A verdict (verdict.c writes it): what verdict__line, the HTML page and Perfetto use. */
static int check_verdict(struct schema *s, json_t *v)
{
	static const char *const who[] = { "trigger", "sender" };
	size_t at, i;
	json_t *o;

	if (schema__is_object(s, v) < 0 ||
	    schema__str(s, v, "cause", NEED, ANY_LEN, NULL) < 0 ||
	    schema__str(s, v, "cgroup", OR_NULL, ANY_LEN, NULL) < 0 ||
	    schema__str(s, v, "missing", 0, ANY_LEN, NULL) < 0 ||
	    schema__int(s, v, "limit", 0, 0, INT64_MAX, NULL) < 0 ||
	    schema__int(s, v, "usage", 0, 0, INT64_MAX, NULL) < 0 ||
	    schema__bool(s, v, "sigterm_first", 0, NULL) < 0 ||
	    schema__int(s, v, "sigterm_before_ms", OR_NULL, 0, TRAIL_T_MS_MAX, NULL) < 0 ||
	    schema__object(s, v, "container", OR_NULL, NULL) < 0 ||
	    schema__object(s, v, "pod", OR_NULL, NULL) < 0)
		return -1;
	for (i = 0; i < sizeof(who) / sizeof(who[0]); i++) {
		if (schema__object(s, v, who[i], 0, &o) < 0)
			return -1;
		if (!o)
			continue;
		/* a signal's sender may be the kernel (0), a parent unknown */
		at = schema__key(s, who[i]);
		if (schema__int(s, o, "pid", 0, 0, TRAIL_PID_MAX, NULL) < 0 ||
		    schema__int(s, o, "ppid", 0, 0, TRAIL_PID_MAX, NULL) < 0 ||
		    schema__str(s, o, "comm", 0, ANY_LEN, NULL) < 0 ||
		    schema__str(s, o, "cgroup", OR_NULL, ANY_LEN, NULL) < 0 ||
		    schema__str(s, o, "cmdline", OR_NULL, ANY_LEN, NULL) < 0 ||
		    schema__object(s, o, "container", OR_NULL, NULL) < 0 ||
		    schema__object(s, o, "pod", OR_NULL, NULL) < 0)
			return -1;
		schema__up(s, at);
	}
	return 0;
}

/* A frame of a site or of a device failure: strings, each may be absent. */
static int check_frame(struct schema *s, json_t *fr)
{
	static const char *const keys[] = { "address", "function", "symbol", "module", "offset",
					     "build_id", "source" };
	size_t i;

	if (schema__is_object(s, fr) < 0)
		return -1;
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (schema__str(s, fr, keys[i], 0, ANY_LEN, NULL) < 0)
			return -1;
	return 0;
}

/* Allocation sites (sites.c writes them): what the table, pprof and the HTML page use. */
static int check_sites(struct schema *s, json_t *v)
{
	json_t *list, *heap, *site, *frames, *fr;
	size_t at, in, fi, i, j;

	if (schema__is_object(s, v) < 0 || schema__array(s, v, "list", NEED, &list) < 0 ||
	    schema__object(s, v, "heap", 0, &heap) < 0)
		return -1;
	if (heap) {
		at = schema__key(s, "heap");
		if (schema__str(s, heap, "mode", 0, ANY_LEN, NULL) < 0 ||
		    schema__int(s, heap, "sample_bytes", 0, 0, INT64_MAX, NULL) < 0 ||
		    schema__bool(s, heap, "inuse", 0, NULL) < 0 ||
		    schema__num(s, heap, "coverage", 0, 0, 1, NULL) < 0)
			return -1;
		schema__up(s, at);
	}
	at = schema__key(s, "list");
	json_array_foreach(list, i, site) {
		const char *kind = NULL;
		bool folded = false;

		in = schema__index(s, i);
		/* a folded site's phase is kept by name, a listed one's by its number */
		if (schema__is_object(s, site) < 0 ||
		    schema__str(s, site, "kind", NEED, ANY_LEN, &kind) < 0 ||
		    schema__bool(s, site, "folded", 0, &folded) < 0 ||
		    schema__str(s, site, "phase", 0, ANY_LEN, NULL) < 0 ||
		    schema__int(s, site, "phase_seq", folded ? OR_NULL : NEED, 0, UINT32_MAX,
				NULL) < 0 ||
		    schema__int(s, site, "alloc_bytes", NEED, 0, INT64_MAX, NULL) < 0 ||
		    schema__int(s, site, "inuse_bytes", 0, 0, INT64_MAX, NULL) < 0 ||
		    schema__num(s, site, "alloc_objects", 0, 0, OBJECTS_MAX, NULL) < 0 ||
		    schema__num(s, site, "inuse_objects", 0, 0, OBJECTS_MAX, NULL) < 0 ||
		    schema__int(s, site, "samples", 0, 0, INT64_MAX, NULL) < 0 ||
		    schema__array(s, site, "frames", 0, &frames) < 0)
			return -1;
		if (strcmp(kind, "faults") && kind__from_name(kind) < 0) {
			schema__key(s, "kind");
			return schema__fail(s, "not a kind of site ('%s')", kind);
		}
		schema__key(s, "frames");
		json_array_foreach(frames, j, fr) {
			fi = schema__index(s, j);
			if (check_frame(s, fr) < 0)
				return -1;
			schema__up(s, fi);
		}
		schema__up(s, in);
	}
	schema__up(s, at);
	return 0;
}

/* O's object KEY (or null), checked by CHECK under its path, kept in *OUT. */
static int take_object(struct schema *s, json_t *o, const char *key,
		       int (*check)(struct schema *s, json_t *v), json_t **out)
{
	json_t *v;
	size_t at;

	if (schema__object(s, o, key, OR_NULL, &v) < 0)
		return -1;
	if (!v)
		return 0;
	at = schema__key(s, key);
	if (check(s, v) < 0)
		return -1;
	schema__up(s, at);
	*out = json_incref(v);
	return 0;
}

/* An event (session.c writes them): what the tables, the HTML page and Perfetto use. */
static int check_event(struct schema *s, json_t *ev)
{
	static const char *const strings[] = { "comm", "sender_comm", "function", "runtime",
					       "kind", "phase", "file" };
	const char *type;
	json_t *site, *live, *v;
	bool is_exit;
	size_t i, at;

	if (schema__is_object(s, ev) < 0 ||
	    schema__int(s, ev, "t_ms", NEED, 0, TRAIL_T_MS_MAX, NULL) < 0 ||
	    schema__str(s, ev, "type", NEED, ANY_LEN, &type) < 0)
		return -1;
	is_exit = !strcmp(type, "exit");
	if (schema__int(s, ev, "pid", 0, 1, TRAIL_PID_MAX, NULL) < 0 ||
	    schema__int(s, ev, "ppid", 0, 0, TRAIL_PID_MAX, NULL) < 0 ||
	    schema__int(s, ev, "sender", 0, 0, TRAIL_PID_MAX, NULL) < 0 ||
	    schema__int(s, ev, "signal", 0, strcmp(type, "signal") ? 0 : 1, 64, NULL) < 0 ||
	    schema__int(s, ev, "code", 0, is_exit ? 0 : INT32_MIN, is_exit ? 255 : INT32_MAX,
			NULL) < 0 ||
	    schema__int(s, ev, "size", 0, 0, INT64_MAX, NULL) < 0 ||
	    schema__int(s, ev, "limit", 0, 0, INT64_MAX, NULL) < 0 ||
	    schema__int(s, ev, "usage", 0, 0, INT64_MAX, NULL) < 0 ||
	    schema__int(s, ev, "device", OR_NULL, 0, INT32_MAX, NULL) < 0 ||
	    schema__array(s, ev, "site", 0, &site) < 0 ||
	    schema__object(s, ev, "live_allocations", 0, &live) < 0)
		return -1;
	for (i = 0; i < sizeof(strings) / sizeof(strings[0]); i++)
		if (schema__str(s, ev, strings[i], 0, ANY_LEN, NULL) < 0)
			return -1;
	/* null: a failed device call's code memtrail has no name for */
	if (schema__str(s, ev, "error", OR_NULL, ANY_LEN, NULL) < 0)
		return -1;
	at = schema__key(s, "site");
	json_array_foreach(site, i, v) {
		if (!json_is_string(v)) {
			schema__index(s, i);
			return schema__fail(s, "not a string");
		}
	}
	schema__up(s, at);
	if (live) {
		at = schema__key(s, "live_allocations");
		if (schema__int(s, live, "bytes", 0, 0, INT64_MAX, NULL) < 0 ||
		    schema__int(s, live, "count", 0, 0, INT64_MAX, NULL) < 0)
			return -1;
		schema__up(s, at);
	}
	return 0;
}

int trail__check_event(json_t *ev, size_t i, char *err, size_t errlen)
{
	struct schema s;

	schema__init(&s, err, errlen);
	schema__key(&s, "events");
	schema__index(&s, i);
	return check_event(&s, ev) < 0 ? -1 : 0;
}

int trail__check_target(json_t *o, size_t i, char *err, size_t errlen)
{
	struct schema s;

	schema__init(&s, err, errlen);
	schema__key(&s, "targets");
	schema__index(&s, i);
	return schema__is_object(&s, o) < 0 ||
	       schema__int(&s, o, "pid", NEED, 1, TRAIL_PID_MAX, NULL) < 0 ||
	       schema__object(&s, o, "exit", NEED | OR_NULL, NULL) < 0 ? -1 : 0;
}

/* The strings a target and a verdict file share: comm at most as long as the kernel's. */
static int read_names(struct schema *s, struct trail_target *tt, json_t *o)
{
	const char *comm = "?", *cmdline = NULL, *cgroup = NULL;

	if (schema__str(s, o, "comm", 0, MEMTRAIL_COMM_LEN - 1, &comm) < 0 ||
	    schema__str(s, o, "cmdline", OR_NULL, ANY_LEN, &cmdline) < 0 ||
	    schema__str(s, o, "cgroup", OR_NULL, ANY_LEN, &cgroup) < 0)
		return -1;
	snprintf(tt->comm, sizeof(tt->comm), "%s", comm);
	tt->cmdline = cmdline ? strdup(cmdline) : NULL;
	tt->cgroup = cgroup ? strdup(cgroup) : NULL;
	if ((cmdline && !tt->cmdline) || (cgroup && !tt->cgroup))
		return schema__fail(s, "out of memory");
	return 0;
}

/* A target's container and pod (objects or null; shown through container__describe). */
static int read_attribution(struct schema *s, struct trail_target *tt, json_t *o)
{
	json_t *ctr, *pod;

	if (schema__object(s, o, "container", OR_NULL, &ctr) < 0 ||
	    schema__object(s, o, "pod", OR_NULL, &pod) < 0)
		return -1;
	if (!ctr && !pod)
		return 0;
	tt->attribution = json_pack("{s:O, s:O}", "container", ctr ? ctr : json_null(),
				    "pod", pod ? pod : json_null());
	return tt->attribution ? 0 : schema__fail(s, "out of memory");
}

static int read_target(struct schema *s, struct trail *t, json_t *o, size_t idx,
		       struct trailstream_timelines *tls)
{
	int64_t pid, ppid = 0, start = 0, end = 0, code, sig;
	struct trail_target *tt;
	json_t *ex;

	if (schema__is_object(s, o) < 0 ||
	    schema__int(s, o, "pid", NEED, 1, TRAIL_PID_MAX, &pid) < 0 ||
	    schema__int(s, o, "ppid", 0, 0, TRAIL_PID_MAX, &ppid) < 0 ||
	    schema__int(s, o, "start_ms", 0, 0, TRAIL_T_MS_MAX, &start) < 0 ||
	    schema__int(s, o, "end_ms", 0, 0, TRAIL_T_MS_MAX, &end) < 0 ||
	    schema__object(s, o, "exit", NEED | OR_NULL, &ex) < 0)
		return -1;
	tt = trail__add_target(t, pid);
	if (!tt)
		return schema__fail(s, "out of memory");
	tt->ppid = ppid;
	tt->start_ms = start;
	tt->end_ms = end;
	if (read_names(s, tt, o) < 0)
		return -1;
	if (ex) {
		/* code 0..255 as exit() gives it; the signal that ended it, 0 when none */
		size_t at = schema__key(s, "exit");

		if (schema__int(s, ex, "code", NEED, 0, 255, &code) < 0 ||
		    schema__int(s, ex, "signal", NEED, 0, 64, &sig) < 0)
			return -1;
		schema__up(s, at);
		tt->exited = true;
		tt->exit_code = code;
		tt->exit_signal = sig;
	}
	if (read_levels(s, t, tt, o) < 0 || read_phases(s, tt, o) < 0 ||
	    read_device_limits(s, tt, o) < 0)
		return -1;
	if (take_object(s, o, "verdict", check_verdict, &tt->verdict) < 0 ||
	    take_object(s, o, "sites", check_sites, &tt->sites) < 0 ||
	    read_attribution(s, tt, o) < 0)
		return -1;
	if (tls && idx < tls->n && tls->tl[idx].present) {	/* streamed: take it over */
		struct trailstream_timeline *tl = &tls->tl[idx];

		tt->timeline = tl->s;
		tt->n_samples = tl->n;
		tt->cap_samples = tl->cap;
		memset(tl, 0, sizeof(*tl));
		return 0;
	}
	return read_timeline(s, tt, o);
}

/* Each kind's integer in O's member KEY, into LEVEL: a verdict file's peaks. */
static int read_peaks(struct schema *s, struct trail *t, json_t *o, int64_t *level)
{
	json_t *peaks, *v;
	const char *name;
	size_t at;
	int k;

	if (schema__object(s, o, "peaks", 0, &peaks) < 0)
		return -1;
	at = schema__key(s, "peaks");
	json_object_foreach(peaks, name, v) {
		k = kind__from_name(name);
		if (k < 0)
			return schema__fail(s, "unknown kind '%s'", name);
		if (schema__int(s, peaks, name, NEED, -TRAIL_LEVEL_MAX, TRAIL_LEVEL_MAX,
				&level[k]) < 0)
			return -1;
		t->kinds |= 1U << k;
	}
	schema__up(s, at);
	return 0;
}

/*
 * A verdict file of watch holds one target's death without a timeline:
 * read it as a trail of that target (its exit, verdict and peaks) so that
 * report prints and draws it like a snapshot.
 */
static int read_verdict_doc(struct schema *s, struct trail *t, json_t *root)
{
	int64_t pid, t_ms = 0, sig = SIGKILL;
	const char *time = "";
	struct trail_target *tt;
	json_t *v, *ex;
	size_t at;

	if (schema__int(s, root, "pid", NEED, 1, TRAIL_PID_MAX, &pid) < 0 ||
	    schema__int(s, root, "t_ms", 0, 0, TRAIL_T_MS_MAX, &t_ms) < 0 ||
	    schema__str(s, root, "time", 0, sizeof(t->started) - 1, &time) < 0 ||
	    schema__str(s, root, "phase", OR_NULL, MEMTRAIL_PHASE_NAME_LEN - 1, NULL) < 0 ||
	    schema__str(s, root, "snapshot", OR_NULL, ANY_LEN, NULL) < 0 ||
	    schema__object(s, root, "exit", 0, &ex) < 0 ||
	    schema__object(s, root, "verdict", NEED, &v) < 0)
		return -1;
	if (ex) {
		at = schema__key(s, "exit");
		if (schema__int(s, ex, "signal", 0, 0, 64, &sig) < 0)
			return -1;
		schema__up(s, at);
	}
	at = schema__key(s, "verdict");
	if (check_verdict(s, v) < 0)
		return -1;
	schema__up(s, at);
	tt = trail__add_target(t, pid);
	if (!tt)
		return schema__fail(s, "out of memory");
	if (read_names(s, tt, root) < 0 || read_peaks(s, t, root, tt->peak) < 0)
		return -1;
	tt->end_ms = t_ms;
	t->duration_ms = t_ms;
	tt->exited = true;
	tt->exit_signal = sig;
	tt->verdict = json_incref(v);
	snprintf(t->started, sizeof(t->started), "%s", time);
	t->verdict_doc = json_incref(root);
	return 0;
}

/* The snapshot object of a watch snapshot: what the HTML page and Perfetto use. */
static int check_snapshot(struct schema *s, json_t *snap)
{
	size_t at = schema__key(s, "snapshot");

	if (schema__int(s, snap, "pid", 0, 1, TRAIL_PID_MAX, NULL) < 0 ||
	    schema__int(s, snap, "t_ms", 0, 0, TRAIL_T_MS_MAX, NULL) < 0 ||
	    schema__str(s, snap, "trigger", 0, ANY_LEN, NULL) < 0 ||
	    schema__str(s, snap, "comm", 0, ANY_LEN, NULL) < 0 ||
	    schema__str(s, snap, "phase", 0, ANY_LEN, NULL) < 0)
		return -1;
	schema__up(s, at);
	return 0;
}

static int read_head(struct schema *s, struct trail *t, json_t *root)
{
	int64_t duration = 0, interval = 0, n;
	const char *started = "", *command = NULL;
	json_t *kinds, *v, *lost, *kernel;
	size_t i, at;

	if (schema__str(s, root, "started", 0, sizeof(t->started) - 1, &started) < 0 ||
	    schema__int(s, root, "duration_ms", 0, 0, TRAIL_T_MS_MAX, &duration) < 0 ||
	    schema__int(s, root, "interval_ms", 0, 0, UINT32_MAX, &interval) < 0 ||
	    schema__str(s, root, "command", OR_NULL, ANY_LEN, &command) < 0 ||
	    schema__object(s, root, "kernel", 0, &kernel) < 0 ||
	    schema__array(s, root, "kinds", 0, &kinds) < 0 ||
	    schema__object(s, root, "lost", 0, &lost) < 0)
		return -1;
	snprintf(t->started, sizeof(t->started), "%s", started);
	t->duration_ms = duration;
	t->interval_ms = interval;
	if (command && !(t->command = strdup(command)))
		return schema__fail(s, "out of memory");
	if (kernel) {
		at = schema__key(s, "kernel");
		if (schema__str(s, kernel, "release", 0, ANY_LEN, NULL) < 0 ||
		    schema__object(s, kernel, "features", 0, NULL) < 0)
			return -1;
		schema__up(s, at);
		t->kernel = json_incref(kernel);
	}
	at = schema__key(s, "kinds");
	json_array_foreach(kinds, i, v) {
		int k = json_is_string(v) ? kind__from_name(json_string_value(v)) : -1;

		if (k < 0) {
			schema__index(s, i);
			return schema__fail(s, "unknown kind");
		}
		t->kinds |= 1U << k;
	}
	schema__up(s, at);
	at = schema__key(s, "lost");
	for (i = 0; lost && i < MEMTRAIL_LOST_MAX; i++) {
		if (schema__int(s, lost, lost_names[i], 0, 0, INT64_MAX, &n) < 0)
			return -1;
		t->lost[i] = json_is_integer(json_object_get(lost, lost_names[i])) ? n : 0;
	}
	schema__up(s, at);
	return 0;
}

static int from_json(struct trail *t, json_t *root, struct trailstream_timelines *tls,
		     char *err, size_t errlen)
{
	json_t *targets, *events, *snapshot, *v;
	struct schema s;
	size_t i, at, in;
	int64_t ver;

	schema__init(&s, err, errlen);
	if (trail__init(t)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (!json_is_object(root)) {
		snprintf(err, errlen, "not a memtrail trail: the top level is not an object");
		goto fail;
	}
	if (!json_is_integer(json_object_get(root, "memtrail"))) {
		snprintf(err, errlen, "not a memtrail trail: no \"memtrail\" version field");
		goto fail;
	}
	ver = json_integer_value(json_object_get(root, "memtrail"));
	if (ver != MEMTRAIL_TRAIL_VERSION) {
		snprintf(err, errlen, "unsupported trail version %lld (this memtrail reads version %d)",
			 (long long)ver, MEMTRAIL_TRAIL_VERSION);
		goto fail;
	}
	targets = json_object_get(root, "targets");
	if (!targets && !strcmp(json_string_value(json_object_get(root, "type")) ?: "", "verdict")) {
		if (read_verdict_doc(&s, t, root) < 0)
			goto fail;
		return 0;
	}
	if (schema__array(&s, root, "targets", NEED, &targets) < 0 ||
	    schema__array(&s, root, "events", 0, &events) < 0 ||
	    schema__object(&s, root, "snapshot", 0, &snapshot) < 0 ||
	    read_head(&s, t, root) < 0 || (snapshot && check_snapshot(&s, snapshot) < 0))
		goto fail;
	t->snapshot = json_incref(snapshot);
	at = schema__key(&s, "targets");
	json_array_foreach(targets, i, v) {
		in = schema__index(&s, i);
		if (read_target(&s, t, v, i, tls) < 0)
			goto fail;
		schema__up(&s, in);
	}
	schema__up(&s, at);
	at = schema__key(&s, "events");
	json_array_foreach(events, i, v) {
		in = schema__index(&s, i);
		if (check_event(&s, v) < 0)
			goto fail;
		schema__up(&s, in);
	}
	schema__up(&s, at);
	if (events && json_array_extend(t->events, events)) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	return 0;
fail:
	trail__free(t);
	return -1;
}

int trail__from_json(struct trail *t, json_t *root, char *err, size_t errlen)
{
	return from_json(t, root, NULL, err, errlen);
}

int trail__read(struct trail *t, const char *path, char *err, size_t errlen)
{
	static const struct trailstream_checks checks = { trail__check_target,
							   trail__check_event };
	struct trailstream_timelines tls;
	json_t *root;
	int ret;

	root = trailstream__load(path, &tls, &checks, err, errlen);
	if (!root)
		return -1;
	ret = from_json(t, root, &tls, err, errlen);
	json_decref(root);
	trailstream__free(&tls);
	return ret;
}

const char *trail__phase_name(const struct trail_target *tt, uint32_t seq, char *buf,
			      size_t len)
{
	const struct phase_log *l = &tt->phases;
	const struct trail_phase *p = NULL;
	size_t n = phase_log__count(l);
	const char *name;

	if (seq == tt->phase_seq)
		return tt->phase_name;
	if (seq < tt->phase_seq) {
		if (!l->folded || seq < l->n_first)
			p = phase_log__at(l, seq);
		else if (tt->phase_seq - seq <= l->n_recent)
			p = phase_log__at(l, n - (tt->phase_seq - seq));
	}
	/* listed phases keep their own names; folded ones their aggregate's */
	name = p ? p->name : phase_log__name(l, seq);
	if (name)
		return name;
	snprintf(buf, len, "#%u", seq);
	return buf;
}
