// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * A trail as a jansson tree: its head, targets, phases and what was lost,
 * the document trail__to_json makes (trail_write.c streams the same one).
 */
#include <stdint.h>

#include "container.h"
#include "kinds.h"
#include "sanitize.h"
#include "trail.h"
#include "trail_int.h"

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
	json_object_set_new(o, "verdict", tt->verdict ? verdict__json(tt->verdict) : json_null());
	if (tt->sites)
		json_object_set_new(o, "sites", trail_sites__json(tt->sites));
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
json_t *trail_head_json(const struct trail *t)
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

json_t *trail_lost_json(const struct trail *t)
{
	json_t *lost = json_object();
	int k;

	for (k = 0; k < MEMTRAIL_LOST_MAX; k++)
		json_object_set_new(lost, trail_lost_names[k], json_integer(t->lost[k]));
	return lost;
}

json_t *trail__to_json(const struct trail *t, bool with_timeline)
{
	json_t *root = trail_head_json(t), *targets = json_array();
	size_t i;

	for (i = 0; i < t->n_targets; i++)
		json_array_append_new(targets, trail__target_json(t, &t->targets[i], with_timeline));
	json_object_set_new(root, "targets", targets);
	if (with_timeline)
		json_object_set(root, "events", t->events);
	json_object_set_new(root, "lost", trail_lost_json(t));
	return root;
}
