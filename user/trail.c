// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "array.h"
#include "format.h"
#include "kinds.h"
#include "outfile.h"
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
	free(tt->timeline);
	phase_log__free(&tt->phases);
	json_decref(tt->verdict);
	json_decref(tt->sites);
	verdict__free_facts(&tt->facts);
}

void trail__remove_target(struct trail *t, struct trail_target *tt)
{
	size_t i = tt - t->targets;

	if (i >= t->n_targets)
		return;
	target_free(tt);
	memmove(tt, tt + 1, (t->n_targets - i - 1) * sizeof(*tt));
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

	if (array__grow((void **)&t->targets, &t->cap_targets, t->n_targets + 1, sizeof(*tt)))
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

	for (i = t->n_targets; i > 0; i--)
		if (t->targets[i - 1].pid == pid)
			return &t->targets[i - 1];
	return NULL;
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
	return json_pack("{s:s, s:I, s:I, s:o}", "name", p->name, "start", (json_int_t)p->start_ms,
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
		json_array_append_new(arr, json_pack("{s:s, s:I, s:o}", "name", a->name,
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
	json_object_set_new(o, "comm", json_string(tt->comm));
	json_object_set_new(o, "cmdline", tt->cmdline ? json_string(tt->cmdline) : json_null());
	json_object_set_new(o, "cgroup", tt->cgroup ? json_string(tt->cgroup) : json_null());
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
				    json_pack("{s:I, s:I}", "current", (json_int_t)tt->current[k],
					      "peak", (json_int_t)tt->peak[k]));
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
	json_object_set_new(root, "command", t->command ? json_string(t->command) : json_null());
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

/* ---- reading ---- */

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); goto fail; } while (0)

/*
 * S into BUF (LEN bytes), whole: a string longer than memtrail writes is
 * refused (-1), never cut, as a cut could split a UTF-8 character that the
 * renderers' JSON then refuses.
 */
static int copy_str(char *buf, size_t len, const char *s)
{
	size_t n = strlen(s);

	if (n >= len)
		return -1;
	memcpy(buf, s, n + 1);
	return 0;
}

static int read_levels(json_t *kinds, struct trail *t, struct trail_target *tt,
		       char *err, size_t errlen)
{
	const char *name;
	char quoted[65];
	json_t *v;

	if (!json_is_object(kinds))
		FAIL("target %u: 'kinds' is not an object", tt->pid);
	json_object_foreach(kinds, name, v) {
		json_t *cur = json_object_get(v, "current"), *peak = json_object_get(v, "peak");
		int k = kind__from_name(name);

		if (k < 0)
			FAIL("target %u: unknown kind '%s'", tt->pid,
			     format__printable(quoted, sizeof(quoted), name));
		if (!json_is_integer(cur) || !json_is_integer(peak))
			FAIL("target %u: kind '%s' needs integer 'current' and 'peak'", tt->pid, name);
		tt->current[k] = json_integer_value(cur);
		tt->peak[k] = json_integer_value(peak);
		t->kinds |= 1U << k;
	}
	return 0;
fail:
	return -1;
}

static int read_timeline(json_t *tl, struct trail_target *tt, char *err, size_t errlen)
{
	size_t i;
	json_t *s;

	if (!tl || json_is_null(tl))
		return 0;
	if (!json_is_array(tl))
		FAIL("target %u: 'timeline' is not an array", tt->pid);
	json_array_foreach(tl, i, s) {
		int64_t level[MEMTRAIL_KIND_MAX] = { 0 };
		json_t *tm = json_object_get(s, "t_ms");
		const char *name;
		json_t *v;

		if (!json_is_integer(tm))
			FAIL("target %u: timeline sample %zu has no integer 't_ms'", tt->pid, i);
		json_object_foreach(s, name, v) {
			int k = kind__from_name(name);

			if (k >= 0 && json_is_integer(v))
				level[k] = json_integer_value(v);
		}
		if (trail__add_sample(tt, json_integer_value(tm), level))
			FAIL("out of memory");
	}
	return 0;
fail:
	return -1;
}

/* kinds: {kind: {field: value}}, value read by get() from each field's JSON */
static int read_fields(json_t *kinds, uint32_t pid, const char *what,
		       int (*get)(json_t *v, int k, int f, void *ctx), void *ctx,
		       char *err, size_t errlen)
{
	const char *name;
	char quoted[65];
	json_t *v;
	int f;

	if (!json_is_object(kinds))
		FAIL("target %u: %s has no 'kinds' object", pid, what);
	json_object_foreach(kinds, name, v) {
		int k = kind__from_name(name);

		if (k < 0)
			FAIL("target %u: %s: unknown kind '%s'", pid, what,
			     format__printable(quoted, sizeof(quoted), name));
		for (f = 0; f < PF_FIELDS; f++)
			if (get(json_object_get(v, phase__field_name(f)), k, f, ctx))
				FAIL("target %u: %s: kind '%s' has no valid '%s'", pid, what, name,
				     phase__field_name(f));
	}
	return 0;
fail:
	return -1;
}

static int get_phase_field(json_t *v, int k, int f, void *ctx)
{
	struct trail_phase *p = ctx;

	if (!json_is_integer(v))
		return -1;
	p->f[k][f] = json_integer_value(v);
	return 0;
}

static int get_agg_field(json_t *v, int k, int f, void *ctx)
{
	struct phase_agg *a = ctx;
	json_t *total = json_object_get(v, "total"), *max = json_object_get(v, "max");

	if (!json_is_integer(total) || !json_is_integer(max))
		return -1;
	a->total[k][f] = json_integer_value(total);
	a->max[k][f] = json_integer_value(max);
	return 0;
}

static int read_phases(json_t *o, struct trail_target *tt, char *err, size_t errlen)
{
	json_t *phases = json_object_get(o, "phases"), *sum = json_object_get(o, "phase_summary");
	json_t *v;
	size_t i;

	if (phases && !json_is_array(phases))
		FAIL("target %u: 'phases' is not an array", tt->pid);
	json_array_foreach(phases, i, v) {
		struct trail_phase p = { 0 };
		const char *name = json_string_value(json_object_get(v, "name"));

		if (!name || !json_is_integer(json_object_get(v, "start")) ||
		    !json_is_integer(json_object_get(v, "end")))
			FAIL("target %u: phase %zu needs 'name', 'start' and 'end'", tt->pid, i);
		if (copy_str(p.name, sizeof(p.name), name))
			FAIL("target %u: phase %zu: 'name' is longer than %zu bytes", tt->pid, i,
			     sizeof(p.name) - 1);
		p.start_ms = json_integer_value(json_object_get(v, "start"));
		p.end_ms = json_integer_value(json_object_get(v, "end"));
		if (read_fields(json_object_get(v, "kinds"), tt->pid, "a phase", get_phase_field, &p,
				err, errlen))
			return -1;
		if (phase_log__push(&tt->phases, &p))
			FAIL("out of memory");
	}
	tt->phases.folded = json_integer_value(json_object_get(o, "phases_folded"));
	if (sum && !json_is_array(sum))
		FAIL("target %u: 'phase_summary' is not an array", tt->pid);
	json_array_foreach(sum, i, v) {
		const char *name = json_string_value(json_object_get(v, "name"));
		json_t *count = json_object_get(v, "count");
		struct phase_agg *a;

		if (!name || !json_is_integer(count) || json_integer_value(count) <= 0)
			FAIL("target %u: phase summary %zu needs 'name' and 'count'", tt->pid, i);
		if (strlen(name) >= MEMTRAIL_PHASE_NAME_LEN)
			FAIL("target %u: phase summary %zu: 'name' is longer than %d bytes", tt->pid, i,
			     MEMTRAIL_PHASE_NAME_LEN - 1);
		a = phase_log__agg(&tt->phases, name);
		if (!a)
			FAIL("out of memory");
		a->count = json_integer_value(count);
		if (read_fields(json_object_get(v, "kinds"), tt->pid, "a phase summary",
				get_agg_field, a, err, errlen))
			return -1;
	}
	return 0;
fail:
	return -1;
}

static int read_device_limits(json_t *arr, struct trail_target *tt, char *err, size_t errlen)
{
	json_t *v;
	size_t i;

	if (!arr)
		return 0;
	if (!json_is_array(arr))
		FAIL("target %u: 'device_limits' is not an array", tt->pid);
	json_array_foreach(arr, i, v) {
		const char *kind = json_string_value(json_object_get(v, "kind"));
		json_t *dev = json_object_get(v, "device"), *bytes = json_object_get(v, "bytes");
		int k = kind ? kind__from_name(kind) : -1;

		if (k < 0 || !json_is_integer(bytes) || json_integer_value(bytes) <= 0 ||
		    !(json_is_integer(dev) || json_is_null(dev)))
			FAIL("target %u: device limit %zu needs a kind, a device (or null) and bytes",
			     tt->pid, i);
		if (!trail__set_device_limit(tt, k, json_is_integer(dev) ?
						 (int32_t)json_integer_value(dev) : -1,
					     json_integer_value(bytes)))
			FAIL("target %u: more than %d device limits", tt->pid, TRAIL_DEVICE_LIMITS);
	}
	return 0;
fail:
	return -1;
}

static char *opt_strdup(json_t *v)
{
	return json_is_string(v) ? strdup(json_string_value(v)) : NULL;
}

static int read_target(struct trail *t, json_t *o, size_t idx, struct trailstream_timelines *tls,
		       char *err, size_t errlen)
{
	json_t *pid = json_object_get(o, "pid"), *ex = json_object_get(o, "exit"), *v;
	struct trail_target *tt;
	const char *comm;

	if (!json_is_object(o))
		FAIL("target %zu is not an object", idx);
	if (!json_is_integer(pid) || json_integer_value(pid) <= 0)
		FAIL("target %zu has no valid 'pid'", idx);
	tt = trail__add_target(t, json_integer_value(pid));
	if (!tt)
		FAIL("out of memory");
	tt->ppid = json_integer_value(json_object_get(o, "ppid"));
	comm = json_string_value(json_object_get(o, "comm"));
	if (copy_str(tt->comm, sizeof(tt->comm), comm ? comm : "?"))
		FAIL("target %u: 'comm' is longer than %zu bytes", tt->pid, sizeof(tt->comm) - 1);
	tt->cmdline = opt_strdup(json_object_get(o, "cmdline"));
	tt->cgroup = opt_strdup(json_object_get(o, "cgroup"));
	tt->start_ms = json_integer_value(json_object_get(o, "start_ms"));
	tt->end_ms = json_integer_value(json_object_get(o, "end_ms"));
	if (!ex)
		FAIL("target %u has no 'exit'", tt->pid);
	if (json_is_object(ex)) {
		if (!json_is_integer(json_object_get(ex, "code")) ||
		    !json_is_integer(json_object_get(ex, "signal")))
			FAIL("target %u: 'exit' needs integer 'code' and 'signal'", tt->pid);
		tt->exited = true;
		tt->exit_code = json_integer_value(json_object_get(ex, "code"));
		tt->exit_signal = json_integer_value(json_object_get(ex, "signal"));
	} else if (!json_is_null(ex)) {
		FAIL("target %u: 'exit' is neither an object nor null", tt->pid);
	}
	if (read_levels(json_object_get(o, "kinds"), t, tt, err, errlen))
		return -1;
	if (read_phases(o, tt, err, errlen))
		return -1;
	if (read_device_limits(json_object_get(o, "device_limits"), tt, err, errlen))
		return -1;
	v = json_object_get(o, "verdict");
	if (v && !json_is_null(v)) {
		if (!json_is_string(json_object_get(v, "cause")))
			FAIL("target %u: 'verdict' has no 'cause'", tt->pid);
		tt->verdict = json_incref(v);
	}
	v = json_object_get(o, "sites");
	if (v && !json_is_null(v)) {
		if (!json_is_array(json_object_get(v, "list")))
			FAIL("target %u: 'sites' has no 'list' array", tt->pid);
		tt->sites = json_incref(v);
	}
	if (tls && idx < tls->n && tls->tl[idx].present) {	/* streamed: take it over */
		struct trailstream_timeline *tl = &tls->tl[idx];

		tt->timeline = tl->s;
		tt->n_samples = tl->n;
		tt->cap_samples = tl->cap;
		memset(tl, 0, sizeof(*tl));
		return 0;
	}
	return read_timeline(json_object_get(o, "timeline"), tt, err, errlen);
fail:
	return -1;
}

/*
 * A verdict file of watch holds one target's death without a timeline:
 * read it as a trail of that target (its exit, verdict and peaks) so that
 * report prints and draws it like a snapshot.
 */
static int read_verdict_doc(struct trail *t, json_t *root, char *err, size_t errlen)
{
	json_t *pid = json_object_get(root, "pid"), *v = json_object_get(root, "verdict");
	json_t *peaks = json_object_get(root, "peaks"), *sig;
	struct trail_target *tt;
	const char *comm, *name;
	char quoted[65];

	if (!json_is_integer(pid) || json_integer_value(pid) <= 0)
		FAIL("malformed verdict file: no valid 'pid'");
	if (!json_is_string(json_object_get(v, "cause")))
		FAIL("malformed verdict file: 'verdict' has no 'cause'");
	if (peaks && !json_is_object(peaks))
		FAIL("malformed verdict file: 'peaks' is not an object");
	tt = trail__add_target(t, json_integer_value(pid));
	if (!tt)
		FAIL("out of memory");
	comm = json_string_value(json_object_get(root, "comm"));
	if (copy_str(tt->comm, sizeof(tt->comm), comm ? comm : "?"))
		FAIL("malformed verdict file: 'comm' is longer than %zu bytes", sizeof(tt->comm) - 1);
	tt->cmdline = opt_strdup(json_object_get(root, "cmdline"));
	tt->cgroup = opt_strdup(json_object_get(root, "cgroup"));
	tt->end_ms = json_integer_value(json_object_get(root, "t_ms"));
	t->duration_ms = tt->end_ms;
	sig = json_object_get(json_object_get(root, "exit"), "signal");
	tt->exited = true;
	tt->exit_signal = json_is_integer(sig) ? json_integer_value(sig) : 9;
	tt->verdict = json_incref(v);
	json_object_foreach(peaks, name, v) {
		int k = kind__from_name(name);

		if (k < 0 || !json_is_integer(v))
			FAIL("malformed verdict file: peak of '%s' is not a kind's integer",
			     format__printable(quoted, sizeof(quoted), name));
		tt->peak[k] = json_integer_value(v);
		t->kinds |= 1U << k;
	}
	name = json_string_value(json_object_get(root, "time"));
	if (copy_str(t->started, sizeof(t->started), name ? name : ""))
		FAIL("malformed verdict file: 'time' is longer than %zu bytes",
		     sizeof(t->started) - 1);
	t->verdict_doc = json_incref(root);
	return 0;
fail:
	return -1;
}

static int from_json(struct trail *t, json_t *root, struct trailstream_timelines *tls,
		     char *err, size_t errlen)
{
	json_t *ver, *targets, *lost, *kinds, *v;
	const char *s;
	size_t i;

	if (trail__init(t))
		FAIL("out of memory");
	if (!json_is_object(root))
		FAIL("not a memtrail trail: the top level is not an object");
	ver = json_object_get(root, "memtrail");
	if (!json_is_integer(ver))
		FAIL("not a memtrail trail: no \"memtrail\" version field");
	if (json_integer_value(ver) != MEMTRAIL_TRAIL_VERSION)
		FAIL("unsupported trail version %lld (this memtrail reads version %d)",
		     (long long)json_integer_value(ver), MEMTRAIL_TRAIL_VERSION);
	targets = json_object_get(root, "targets");
	if (!targets && !strcmp(json_string_value(json_object_get(root, "type")) ?: "", "verdict")) {
		if (read_verdict_doc(t, root, err, errlen))
			goto fail_quiet;
		return 0;
	}
	if (!json_is_array(targets))
		FAIL("malformed trail: 'targets' is not an array");
	s = json_string_value(json_object_get(root, "started"));
	if (copy_str(t->started, sizeof(t->started), s ? s : ""))
		FAIL("malformed trail: 'started' is longer than %zu bytes", sizeof(t->started) - 1);
	t->duration_ms = json_integer_value(json_object_get(root, "duration_ms"));
	t->interval_ms = json_integer_value(json_object_get(root, "interval_ms"));
	t->command = opt_strdup(json_object_get(root, "command"));
	v = json_object_get(root, "kernel");
	if (v && !json_is_object(v))
		FAIL("malformed trail: 'kernel' is not an object");
	t->kernel = json_incref(v);
	kinds = json_object_get(root, "kinds");
	json_array_foreach(kinds, i, v) {
		int k = json_is_string(v) ? kind__from_name(json_string_value(v)) : -1;

		if (k < 0)
			FAIL("malformed trail: unknown kind in 'kinds'");
		t->kinds |= 1U << k;
	}
	json_array_foreach(targets, i, v)
		if (read_target(t, v, i, tls, err, errlen))
			goto fail_quiet;
	v = json_object_get(root, "events");
	if (v && !json_is_array(v))
		FAIL("malformed trail: 'events' is not an array");
	if (v)
		json_array_extend(t->events, v);
	lost = json_object_get(root, "lost");
	if (lost && !json_is_object(lost))
		FAIL("malformed trail: 'lost' is not an object");
	for (i = 0; i < MEMTRAIL_LOST_MAX; i++)
		t->lost[i] = json_integer_value(json_object_get(lost, lost_names[i]));
	v = json_object_get(root, "snapshot");
	if (v && !json_is_object(v))
		FAIL("malformed snapshot: 'snapshot' is not an object");
	t->snapshot = json_incref(v);
	return 0;
fail:
fail_quiet:
	trail__free(t);
	return -1;
}

int trail__from_json(struct trail *t, json_t *root, char *err, size_t errlen)
{
	return from_json(t, root, NULL, err, errlen);
}

int trail__read(struct trail *t, const char *path, char *err, size_t errlen)
{
	struct trailstream_timelines tls;
	json_t *root;
	int ret;

	root = trailstream__load(path, &tls, err, errlen);
	if (!root)
		return -1;
	ret = from_json(t, root, &tls, err, errlen);
	json_decref(root);
	trailstream__free(&tls);
	return ret;
}
