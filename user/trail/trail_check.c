// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Checking the parts of a trail that are kept as JSON, not read into
 * struct trail: events, a watch snapshot; and a
 * target's first fields and each event for the stream reader (trailstream.c).
 */
#include <stdint.h>
#include <string.h>

#include "schema.h"
#include "trail.h"
#include "trail_int.h"

/* An event (session.c writes them): what the tables, the HTML page and Perfetto use. */
int trail_check_event(struct schema *s, json_t *ev)
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
	return trail_check_event(&s, ev) < 0 ? -1 : 0;
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

/* The snapshot object of a watch snapshot: what the HTML page and Perfetto use. */
int trail_check_snapshot(struct schema *s, json_t *snap)
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
