// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "kinds.h"
#include "perfetto.h"

/*
 * A time of the trail (milliseconds) in the Trace Event format's
 * microseconds; -ERANGE for one beyond them (only a made-up file has it).
 */
static int us(uint64_t ms, json_int_t *out)
{
	if (ms > INT64_MAX / 1000)
		return -ERANGE;
	*out = (json_int_t)ms * 1000;
	return 0;
}

static int add(json_t *events, json_t *ev)
{
	return ev && !json_array_append_new(events, ev) ? 0 : -ENOMEM;
}

static int add_names(json_t *events, const struct trail_target *tt)
{
	char name[MEMTRAIL_COMM_LEN + 32];

	snprintf(name, sizeof(name), "%s (%u)", tt->comm, tt->pid);
	if (add(events, json_pack("{s:s, s:s, s:i, s:i, s:I, s:{s:s}}", "ph", "M",
				  "name", "process_name", "pid", tt->pid, "tid", tt->pid,
				  "ts", (json_int_t)0, "args", "name", name)))
		return -ENOMEM;
	return add(events, json_pack("{s:s, s:s, s:i, s:i, s:I, s:{s:s}}", "ph", "M",
				     "name", "thread_name", "pid", tt->pid, "tid", tt->pid,
				     "ts", (json_int_t)0, "args", "name", tt->comm));
}

/* One counter track per kind: every sample of the timeline, as recorded. */
static int add_counters(json_t *events, const struct trail *t, const struct trail_target *tt)
{
	json_int_t ts;
	size_t i;
	int k;

	for (k = 0; k < MEMTRAIL_KIND_MAX; k++) {
		if (!(t->kinds & (1U << k)))
			continue;
		for (i = 0; i < tt->n_samples; i++) {
			if (us(tt->timeline[i].t_ms, &ts))
				return -ERANGE;
			if (add(events, json_pack("{s:s, s:s, s:s, s:i, s:i, s:I, s:{s:I}}",
						  "ph", "C", "cat", "memory", "name", kind__name(k),
						  "pid", tt->pid, "tid", tt->pid, "ts", ts,
						  "args", "bytes", (json_int_t)tt->timeline[i].level[k])))
				return -ENOMEM;
		}
	}
	return 0;
}

/* A phase as a complete slice; its args are the per-phase table of each kind. */
static int add_phase(json_t *events, const struct trail *t, const struct trail_target *tt,
		     const struct trail_phase *p)
{
	json_t *ph = trail__phase_json(t, p);
	uint64_t end = p->end_ms > p->start_ms ? p->end_ms : p->start_ms;
	json_int_t ts, dur;
	int err;

	if (!ph)
		return -ENOMEM;
	if (us(p->start_ms, &ts) || us(end - p->start_ms, &dur))
		err = -ERANGE;
	else
		err = add(events, json_pack("{s:s, s:s, s:s, s:i, s:i, s:I, s:I, s:O}", "ph", "X",
					    "cat", "phase", "name", p->name, "pid", tt->pid,
					    "tid", tt->pid, "ts", ts, "dur", dur,
					    "args", json_object_get(ph, "kinds")));
	json_decref(ph);
	return err;
}

static int add_instant(json_t *events, const char *cat, const char *name, uint32_t pid,
		       uint64_t t_ms, json_t *args)
{
	json_int_t ts;

	if (us(t_ms, &ts))
		return -ERANGE;
	/* an event of no target is global: drawn across every process */
	return add(events, json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:I, s:O}", "ph", "i",
				     "s", pid ? "p" : "g", "cat", cat, "name", name,
				     "pid", pid, "tid", pid, "ts", ts, "args", args));
}

static int add_target(json_t *events, const struct trail *t, const struct trail_target *tt)
{
	size_t i;
	int err;

	err = add_names(events, tt);
	if (!err)
		err = add_counters(events, t, tt);
	for (i = 0; !err && i < phase_log__count(&tt->phases); i++)
		err = add_phase(events, t, tt, phase_log__at(&tt->phases, i));
	if (!err && tt->verdict) {
		char name[64];

		json_t *args = verdict__json(tt->verdict);

		snprintf(name, sizeof(name), "verdict: %s", verdict__cause_name(tt->verdict->cause));
		format__utf8_whole(name);
		err = args ? add_instant(events, "verdict", name, tt->pid, tt->end_ms, args) : -ENOMEM;
		json_decref(args);
	}
	return err;
}

/* Every trail event (pressure, oom, device_oom, signal, exit, ...) as an instant. */
static int add_events(json_t *events, const struct trail *t)
{
	json_t *ev, *pid, *tm;
	const char *type;
	size_t i;
	int err;

	json_array_foreach(t->events, i, ev) {
		type = json_string_value(json_object_get(ev, "type"));
		pid = json_object_get(ev, "pid");
		tm = json_object_get(ev, "t_ms");
		err = add_instant(events, "event", type ? type : "event",
				  json_is_integer(pid) ? json_integer_value(pid) : 0,
				  json_is_integer(tm) ? json_integer_value(tm) : 0, ev);
		if (err)
			return err;
	}
	if (t->snapshot) {
		char name[64];

		type = json_string_value(json_object_get(t->snapshot, "trigger"));
		snprintf(name, sizeof(name), "snapshot: %s", type ? type : "?");
		format__utf8_whole(name);
		return add_instant(events, "snapshot", name,
				   json_integer_value(json_object_get(t->snapshot, "pid")),
				   json_integer_value(json_object_get(t->snapshot, "t_ms")), t->snapshot);
	}
	return 0;
}

int perfetto__write(const struct trail *t, const char *path, size_t *n_events)
{
	json_t *events = json_array(), *root;
	size_t i;
	int err = events ? 0 : -ENOMEM;

	for (i = 0; !err && i < t->n_targets; i++)
		err = add_target(events, t, &t->targets[i]);
	if (!err)
		err = add_events(events, t);
	if (err) {
		json_decref(events);
		return err;
	}
	*n_events = json_array_size(events);
	root = json_pack("{s:o, s:s, s:{s:s, s:s, s:s}}", "traceEvents", events,
			 "displayTimeUnit", "ms", "otherData", "memtrail_started", t->started,
			 "memtrail_command", t->command ? t->command : "",
			 "units", "counter values in bytes");
	err = trail__write_json(root, path);
	json_decref(root);
	return err;
}
