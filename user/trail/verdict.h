/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Why a target died by SIGKILL: the facts gathered while it ran (the OOM
 * killer's choice, the signals sent to it) and the verdict drawn from them.
 */
#ifndef MEMTRAIL_VERDICT_H
#define MEMTRAIL_VERDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "container.h"
#include "memtrail.h"
#include "schema.h"

struct verdict_facts {
	bool oom;
	uint64_t oom_ms;	/* when the OOM killer chose it */
	int memcg_level;	/* -1: global OOM */
	char *oom_cgroup;	/* path of the cgroup at its limit, malloc'd, or NULL */
	uint64_t usage, limit;
	uint32_t trigger_pid;
	char trigger_comm[MEMTRAIL_COMM_LEN];
	bool sigterm;
	uint64_t sigterm_ms;
	bool sigkill;
	uint64_t sigkill_ms;
	uint32_t sender_pid, sender_ppid;
	char sender_comm[MEMTRAIL_COMM_LEN];
	char *sender_cgroup;	/* malloc'd, NULL when the sender was gone */
	char *sender_cmdline;
};

enum verdict_cause { VERDICT_UNKNOWN, VERDICT_OOM_CGROUP, VERDICT_OOM_GLOBAL, VERDICT_SIGNAL };

/* A process a verdict names: the OOM's trigger, the signal's sender. */
struct verdict_who {
	uint32_t pid, ppid;
	char *comm;			/* NULL: unknown */
	char *cgroup;			/* NULL: unknown (the sender was gone) */
	char *cmdline;
};

/* Why a target died by SIGKILL (README, "Verdicts"). Strings NULL where unknown. */
struct verdict {
	enum verdict_cause cause;
	char *cgroup;			/* oom_cgroup: the cgroup at its limit */
	uint64_t limit, usage;		/* oom_cgroup: its limit and usage then */
	struct verdict_who trigger;	/* oom_*: the process whose allocation triggered it */
	struct verdict_who sender;	/* signal: who sent the SIGKILL */
	bool sigterm_first;		/* signal: a SIGTERM came first, */
	bool has_sigterm_before;
	uint64_t sigterm_before_ms;	/* this long before */
	char *missing;			/* unknown: what memtrail did not see */
	/* the container and pod of the sender (signal) or of the OOM's cgroup; NULL: none */
	struct container_attr *attr;
};

void verdict__free_facts(struct verdict_facts *f);
/*
 * The verdict for a process killed by SIGKILL: cause oom_cgroup,
 * oom_global, signal or unknown. CGROUP, the process's memory cgroup, names
 * the OOM's cgroup when its id could not be resolved. NULL: out of memory.
 */
struct verdict *verdict__decide(const struct verdict_facts *f, const char *cgroup);
void verdict__free(struct verdict *v);
/* "oom_cgroup", "oom_global", "signal", "unknown". */
const char *verdict__cause_name(enum verdict_cause cause);
/* The cgroup whose container and pod the verdict names: the sender's, or the OOM's. */
const char *verdict__attr_cgroup(const struct verdict *v);
/* V as the trail writes it (README, "Verdicts"); NULL: out of memory. */
json_t *verdict__json(const struct verdict *v);
/* V, a verdict object of a file, read into *OUT: 0, or -1 with S's error set. */
int verdict__from_json(struct schema *s, json_t *v, struct verdict **out);
/* One line for people; names in it sanitized (sanitize.h). */
void verdict__line(char *buf, size_t len, const struct verdict *v);
/* CGROUP with its last LEVEL components removed ("/" at the top); malloc'd. */
char *verdict__cgroup_up(const char *cgroup, int level);

#endif
