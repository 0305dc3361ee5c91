// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attribution.h"
#include "format.h"
#include "sanitize.h"
#include "trailstream.h"
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

static const char *const causes[] = {
	[VERDICT_UNKNOWN] = "unknown",
	[VERDICT_OOM_CGROUP] = "oom_cgroup",
	[VERDICT_OOM_GLOBAL] = "oom_global",
	[VERDICT_SIGNAL] = "signal",
};

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

struct verdict *verdict__decide(const struct verdict_facts *f, const char *cgroup)
{
	struct verdict *v = calloc(1, sizeof(*v));

	if (!v)
		return NULL;
	if (f->oom) {
		v->cause = f->memcg_level < 0 ? VERDICT_OOM_GLOBAL : VERDICT_OOM_CGROUP;
		v->trigger.pid = f->trigger_pid;
		v->trigger.comm = strdup(f->trigger_comm);
		if (v->cause == VERDICT_OOM_CGROUP) {
			v->limit = f->limit;
			v->usage = f->usage;
			v->cgroup = f->oom_cgroup ? strdup(f->oom_cgroup)
						  : verdict__cgroup_up(cgroup, f->memcg_level);
		}
	} else if (f->sigkill) {
		v->cause = VERDICT_SIGNAL;
		v->sender.pid = f->sender_pid;
		v->sender.ppid = f->sender_ppid;
		v->sender.comm = strdup(f->sender_comm);
		v->sender.cgroup = dup_or_null(f->sender_cgroup);
		v->sender.cmdline = dup_or_null(f->sender_cmdline);
		v->sigterm_first = f->sigterm && f->sigterm_ms <= f->sigkill_ms;
		v->has_sigterm_before = v->sigterm_first;
		v->sigterm_before_ms = v->sigterm_first ? f->sigkill_ms - f->sigterm_ms : 0;
	} else {
		v->missing = strdup("no OOM kill and no SIGKILL sender was seen while memtrail "
				    "was attached");
	}
	return v;
}

void verdict__free(struct verdict *v)
{
	if (!v)
		return;
	free(v->cgroup);
	free(v->trigger.comm);
	free(v->sender.comm);
	free(v->trigger.cgroup);
	free(v->trigger.cmdline);
	free(v->sender.cgroup);
	free(v->sender.cmdline);
	free(v->missing);
	free(v->attr);
	free(v);
}

const char *verdict__cause_name(enum verdict_cause cause)
{
	return (unsigned)cause < sizeof(causes) / sizeof(causes[0]) ? causes[cause] : "unknown";
}

const char *verdict__attr_cgroup(const struct verdict *v)
{
	return v->cause == VERDICT_SIGNAL ? v->sender.cgroup : v->cgroup;
}

json_t *verdict__json(const struct verdict *v)
{
	json_t *o = json_pack("{s:s}", "cause", verdict__cause_name(v->cause)), *who;

	if (!o)
		return NULL;
	switch (v->cause) {
	case VERDICT_OOM_CGROUP:
		json_object_set_new(o, "limit", json_integer((json_int_t)v->limit));
		json_object_set_new(o, "usage", json_integer((json_int_t)v->usage));
		/* fall through */
	case VERDICT_OOM_GLOBAL:
		json_object_set_new(o, "trigger", json_pack("{s:i, s:o}", "pid", v->trigger.pid,
							    "comm", sanitize__json(v->trigger.comm)));
		if (v->cause == VERDICT_OOM_CGROUP)
			json_object_set_new(o, "cgroup", sanitize__json(v->cgroup));
		container__put(o, v->attr);
		break;
	case VERDICT_SIGNAL:
		who = json_pack("{s:i, s:i, s:o, s:o, s:o}", "pid", v->sender.pid,
				"ppid", v->sender.ppid, "comm", sanitize__json(v->sender.comm),
				"cgroup", sanitize__json(v->sender.cgroup),
				"cmdline", sanitize__json(v->sender.cmdline));
		if (who)
			container__put(who, v->attr);
		json_object_set_new(o, "sender", who);
		json_object_set_new(o, "sigterm_first", json_boolean(v->sigterm_first));
		json_object_set_new(o, "sigterm_before_ms", v->has_sigterm_before ?
				    json_integer((json_int_t)v->sigterm_before_ms) : json_null());
		break;
	default:
		json_object_set_new(o, "missing", sanitize__json(v->missing));
		container__put(o, v->attr);
		break;
	}
	return o;
}

/* A trigger or sender: a signal's sender may be the kernel (0), a parent unknown. */
static int read_who(struct schema *s, json_t *v, const char *key, struct verdict_who *w,
		    json_t **obj)
{
	int64_t pid = 0, ppid = 0;
	size_t at;

	if (schema__object(s, v, key, 0, obj) < 0)
		return -1;
	if (!*obj)
		return 0;
	at = schema__key(s, key);
	if (schema__int(s, *obj, "pid", 0, 0, TRAIL_PID_MAX, &pid) < 0 ||
	    schema__int(s, *obj, "ppid", 0, 0, TRAIL_PID_MAX, &ppid) < 0 ||
	    schema__str_dup(s, *obj, "comm", SCHEMA_NULL, SIZE_MAX, &w->comm) < 0 ||
	    schema__str_dup(s, *obj, "cgroup", SCHEMA_NULL, SIZE_MAX, &w->cgroup) < 0 ||
	    schema__str_dup(s, *obj, "cmdline", SCHEMA_NULL, SIZE_MAX, &w->cmdline) < 0)
		return -1;
	w->pid = (uint32_t)pid;
	w->ppid = (uint32_t)ppid;
	schema__up(s, at);
	return 0;
}

static int read_verdict(struct schema *s, json_t *o, struct verdict *v)
{
	const char *cause = NULL;
	json_t *trigger, *sender;
	int64_t n = -1;	/* sigterm_before_ms: none */
	size_t i, at;

	if (schema__is_object(s, o) < 0 ||
	    schema__str(s, o, "cause", SCHEMA_NEED, SIZE_MAX, &cause) < 0)
		return -1;
	for (i = 0; i < sizeof(causes) / sizeof(causes[0]) && strcmp(cause, causes[i]); i++)
		;
	if (i == sizeof(causes) / sizeof(causes[0])) {
		at = schema__key(s, "cause");
		schema__fail(s, "not a cause ('%s')", cause);
		schema__up(s, at);
		return -1;
	}
	v->cause = (enum verdict_cause)i;
	if (schema__str_dup(s, o, "cgroup", SCHEMA_NULL, SIZE_MAX, &v->cgroup) < 0 ||
	    schema__str_dup(s, o, "missing", SCHEMA_NULL, SIZE_MAX, &v->missing) < 0 ||
	    schema__size(s, o, "limit", 0, &v->limit) < 0 ||
	    schema__size(s, o, "usage", 0, &v->usage) < 0)
		return -1;
	if (schema__bool(s, o, "sigterm_first", 0, &v->sigterm_first) < 0 ||
	    schema__int(s, o, "sigterm_before_ms", SCHEMA_NULL, 0, TRAIL_T_MS_MAX, &n) < 0)
		return -1;
	v->has_sigterm_before = n >= 0;
	v->sigterm_before_ms = n >= 0 ? (uint64_t)n : 0;
	if (read_who(s, o, "trigger", &v->trigger, &trigger) < 0 ||
	    read_who(s, o, "sender", &v->sender, &sender) < 0)
		return -1;
	/* the container and pod beside the sender, else beside the verdict's own cgroup */
	if (sender) {
		at = schema__key(s, "sender");
		if (attribution__from_json(s, sender, &v->attr) < 0)
			return -1;
		schema__up(s, at);
		return 0;
	}
	return attribution__from_json(s, o, &v->attr);
}

int verdict__from_json(struct schema *s, json_t *o, struct verdict **out)
{
	struct verdict *v = calloc(1, sizeof(*v));

	*out = NULL;
	if (!v)
		return schema__fail(s, "out of memory");
	if (read_verdict(s, o, v) < 0) {
		verdict__free(v);
		return -1;
	}
	*out = v;
	return 0;
}

void verdict__line(char *buf, size_t len, const struct verdict *v)
{
	char limit[32], usage[32], name[256], name2[256];
	char term[64] = "no SIGTERM first";

	switch (v ? v->cause : VERDICT_UNKNOWN) {
	case VERDICT_OOM_CGROUP:
		snprintf(buf, len, "oom_cgroup: the kernel OOM killer, cgroup %s at its limit %s "
			 "(usage %s), triggered by %u (%s)",
			 sanitize__str(name, sizeof(name), v->cgroup ? v->cgroup : "?"),
			 format__bytes(limit, sizeof(limit), (int64_t)v->limit),
			 format__bytes(usage, sizeof(usage), (int64_t)v->usage),
			 v->trigger.pid, sanitize__str(name2, sizeof(name2), v->trigger.comm ?
							  v->trigger.comm : "?"));
		break;
	case VERDICT_OOM_GLOBAL:
		snprintf(buf, len, "oom_global: the kernel OOM killer, the node out of memory, "
			 "triggered by %u (%s)", v->trigger.pid,
			 sanitize__str(name2, sizeof(name2), v->trigger.comm ? v->trigger.comm : "?"));
		break;
	case VERDICT_SIGNAL:
		if (v->has_sigterm_before)
			snprintf(term, sizeof(term), "SIGTERM %llu ms before",
				 (unsigned long long)v->sigterm_before_ms);
		snprintf(buf, len, "signal: SIGKILL sent by %u (%s, cgroup %s), %s", v->sender.pid,
			 sanitize__str(name2, sizeof(name2), v->sender.comm ? v->sender.comm : "?"),
			 sanitize__str(name, sizeof(name), v->sender.cgroup ? v->sender.cgroup
									    : "unknown"), term);
		break;
	default:
		if (!v) {
			snprintf(buf, len, "no verdict");
			break;
		}
		snprintf(buf, len, "unknown: %s", sanitize__str(name, sizeof(name),
							     v->missing ? v->missing : ""));
		break;
	}
}
