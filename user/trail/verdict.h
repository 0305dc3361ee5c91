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

#include "memtrail.h"

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

void verdict__free_facts(struct verdict_facts *f);
/*
 * The verdict for a process killed by SIGKILL, as a JSON object: cause
 * oom_cgroup, oom_global, signal or unknown. CGROUP, the process's memory
 * cgroup, names the OOM's cgroup when its id could not be resolved.
 */
json_t *verdict__decide(const struct verdict_facts *f, const char *cgroup);
/* One line for people, from a verdict object; names in it sanitized (sanitize.h). */
void verdict__line(char *buf, size_t len, json_t *verdict);
/* CGROUP with its last LEVEL components removed ("/" at the top); malloc'd. */
char *verdict__cgroup_up(const char *cgroup, int level);

#endif
