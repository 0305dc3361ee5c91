// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Reading a trail back: a file (through trailstream.c) or a tree into
 * struct trail, every field checked (trail_check.c checks the parts kept as
 * JSON). A watch verdict file is read as a trail of its one target.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attribution.h"
#include "kinds.h"
#include "schema.h"
#include "trail.h"
#include "trail_int.h"
#include "trailstream.h"

/*
 * A trail is anyone's file: every field report, its exporters and tables use
 * is checked for its type and range, and the first that is wrong is named
 * by its path, "targets[3].pid: out of range (4294967297)" (schema.h).
 * Unknown keys are skipped. Strings from the workloads (comm, command lines,
 * cgroups, phase names in sites, frames) may be absent: the writer leaves
 * out those that are not UTF-8.
 */

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

/* O's "sites" (or null) into TT. */
static int read_sites(struct schema *s, struct trail_target *tt, json_t *o)
{
	json_t *v;
	size_t at;

	if (schema__object(s, o, "sites", OR_NULL, &v) < 0)
		return -1;
	if (!v)
		return 0;
	at = schema__key(s, "sites");
	if (trail_sites__from_json(s, v, &tt->sites) < 0)
		return -1;
	schema__up(s, at);
	return 0;
}

/* The strings a target and a verdict file share: comm at most as long as the kernel's. */
static int read_names(struct schema *s, struct trail_target *tt, json_t *o)
{
	const char *comm = "?";

	if (schema__str(s, o, "comm", 0, MEMTRAIL_COMM_LEN - 1, &comm) < 0 ||
	    schema__str_dup(s, o, "cmdline", OR_NULL, ANY_LEN, &tt->cmdline) < 0 ||
	    schema__str_dup(s, o, "cgroup", OR_NULL, ANY_LEN, &tt->cgroup) < 0)
		return -1;
	snprintf(tt->comm, sizeof(tt->comm), "%s", comm);
	return 0;
}

/* O's "verdict" (or null) into TT. */
static int read_verdict(struct schema *s, struct trail_target *tt, json_t *o)
{
	json_t *v;
	size_t at;

	if (schema__object(s, o, "verdict", OR_NULL, &v) < 0)
		return -1;
	if (!v)
		return 0;
	at = schema__key(s, "verdict");
	if (verdict__from_json(s, v, &tt->verdict) < 0)
		return -1;
	schema__up(s, at);
	return 0;
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
	if (read_verdict(s, tt, o) < 0 || read_sites(s, tt, o) < 0 ||
	    attribution__from_json(s, o, &tt->attribution) < 0)
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
	tt = trail__add_target(t, pid);
	if (!tt)
		return schema__fail(s, "out of memory");
	at = schema__key(s, "verdict");
	if (verdict__from_json(s, v, &tt->verdict) < 0)
		return -1;
	schema__up(s, at);
	if (read_names(s, tt, root) < 0 || read_peaks(s, t, root, tt->peak) < 0 ||
	    attribution__from_json(s, root, &t->doc_attr) < 0)
		return -1;
	tt->end_ms = t_ms;
	t->duration_ms = t_ms;
	tt->exited = true;
	tt->exit_signal = sig;
	snprintf(t->started, sizeof(t->started), "%s", time);
	t->verdict_doc = json_incref(root);
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
		if (schema__int(s, lost, trail_lost_names[i], 0, 0, INT64_MAX, &n) < 0)
			return -1;
		t->lost[i] = json_is_integer(json_object_get(lost, trail_lost_names[i])) ? n : 0;
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
	    read_head(&s, t, root) < 0 || (snapshot && trail_check_snapshot(&s, snapshot) < 0))
		goto fail;
	if (snapshot) {
		at = schema__key(&s, "snapshot");
		if (attribution__from_json(&s, snapshot, &t->doc_attr) < 0)
			goto fail;
		schema__up(&s, at);
	}
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
		if (trail_check_event(&s, v) < 0)
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

static int read_file(struct trail *t, const char *path, bool samples, char *err, size_t errlen)
{
	static const struct trailstream_checks checks = { trail__check_target,
							   trail__check_event };
	struct trailstream_timelines tls;
	json_t *root;
	int ret;

	root = trailstream__load(path, &tls, &checks, samples, err, errlen);
	if (!root)
		return -1;
	ret = from_json(t, root, &tls, err, errlen);
	json_decref(root);
	trailstream__free(&tls);
	return ret;
}

int trail__read(struct trail *t, const char *path, char *err, size_t errlen)
{
	return read_file(t, path, true, err, errlen);
}

int trail__read_levels(struct trail *t, const char *path, char *err, size_t errlen)
{
	return read_file(t, path, false, err, errlen);
}
