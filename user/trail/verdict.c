// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "sanitize.h"
#include "verdict.h"

void verdict__free_facts(struct verdict_facts *f)
{
	free(f->oom_cgroup);
	free(f->sender_cgroup);
	free(f->sender_cmdline);
	memset(f, 0, sizeof(*f));
}

char *verdict__cgroup_up(const char *cgroup, int level)
{
	char *s = strdup(cgroup ? cgroup : "/"), *slash;

	while (s && level-- > 0) {
		slash = strrchr(s, '/');
		if (!slash)
			break;
		*slash = '\0';
	}
	if (s && !s[0]) {
		free(s);
		s = strdup("/");
	}
	return s;
}

json_t *verdict__decide(const struct verdict_facts *f, const char *cgroup)
{
	json_t *v;

	if (f->oom) {
		json_t *trigger = json_pack("{s:i, s:o}", "pid", f->trigger_pid,
					    "comm", sanitize__json(f->trigger_comm));

		if (f->memcg_level < 0)
			return json_pack("{s:s, s:o}", "cause", "oom_global", "trigger", trigger);
		v = json_pack("{s:s, s:I, s:I, s:o}", "cause", "oom_cgroup",
			      "limit", (json_int_t)f->limit, "usage", (json_int_t)f->usage,
			      "trigger", trigger);
		if (v) {
			char *path = f->oom_cgroup ? strdup(f->oom_cgroup)
						   : verdict__cgroup_up(cgroup, f->memcg_level);

			json_object_set_new(v, "cgroup", sanitize__json(path));
			free(path);
		}
		return v;
	}
	if (f->sigkill) {
		bool term_first = f->sigterm && f->sigterm_ms <= f->sigkill_ms;

		return json_pack("{s:s, s:{s:i, s:i, s:o, s:o, s:o}, s:b, s:o}",
				 "cause", "signal",
				 "sender", "pid", f->sender_pid, "ppid", f->sender_ppid,
				 "comm", sanitize__json(f->sender_comm), "cgroup", sanitize__json(f->sender_cgroup),
				 "cmdline", sanitize__json(f->sender_cmdline),
				 "sigterm_first", term_first,
				 "sigterm_before_ms", term_first ?
					json_integer(f->sigkill_ms - f->sigterm_ms) : json_null());
	}
	return json_pack("{s:s, s:s}", "cause", "unknown", "missing",
			 "no OOM kill and no SIGKILL sender was seen while memtrail was attached");
}

/* V's string KEY for a line (sanitize.h: names come from the workloads), else DEF. */
static const char *text(char *buf, size_t len, json_t *v, const char *key, const char *def)
{
	const char *s = json_string_value(json_object_get(v, key));

	return sanitize__str(buf, len, s ? s : def);
}

void verdict__line(char *buf, size_t len, json_t *v)
{
	const char *cause = json_string_value(json_object_get(v, "cause"));
	json_t *trigger = json_object_get(v, "trigger"), *sender = json_object_get(v, "sender");
	char limit[32], usage[32], comm[SANITIZE_LEN(MEMTRAIL_COMM_LEN)], name[256];

	if (!cause) {
		snprintf(buf, len, "no verdict");
	} else if (!strcmp(cause, "oom_cgroup")) {
		snprintf(buf, len, "oom_cgroup: the kernel OOM killer, cgroup %s at its limit %s "
			 "(usage %s), triggered by %lld (%s)",
			 text(name, sizeof(name), v, "cgroup", "?"),
			 format__bytes(limit, sizeof(limit), json_integer_value(json_object_get(v, "limit"))),
			 format__bytes(usage, sizeof(usage), json_integer_value(json_object_get(v, "usage"))),
			 json_integer_value(json_object_get(trigger, "pid")),
			 text(comm, sizeof(comm), trigger, "comm", "?"));
	} else if (!strcmp(cause, "oom_global")) {
		snprintf(buf, len, "oom_global: the kernel OOM killer, the node out of memory, "
			 "triggered by %lld (%s)", json_integer_value(json_object_get(trigger, "pid")),
			 text(comm, sizeof(comm), trigger, "comm", "?"));
	} else if (!strcmp(cause, "signal")) {
		json_t *before = json_object_get(v, "sigterm_before_ms");
		char term[64] = "no SIGTERM first";

		if (json_is_integer(before))
			snprintf(term, sizeof(term), "SIGTERM %lld ms before",
				 json_integer_value(before));
		snprintf(buf, len, "signal: SIGKILL sent by %lld (%s, cgroup %s), %s",
			 json_integer_value(json_object_get(sender, "pid")),
			 text(comm, sizeof(comm), sender, "comm", "?"),
			 text(name, sizeof(name), sender, "cgroup", "unknown"), term);
	} else {
		snprintf(buf, len, "%s: %s", sanitize__str(comm, sizeof(comm), cause),
			 text(name, sizeof(name), v, "missing", ""));
	}
}
