/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Phase switches: a target's new phase, whatever started it (exec, a rule,
 * the marker, mark).
 */
#ifndef MT_PHASE_BPF_H
#define MT_PHASE_BPF_H

#include "mt_stacks.bpf.h"

/*
 * Start a new phase of a target: one atomic increment, so a switch costs one
 * program run whatever triggers it (exec, a rule's uprobe, the marker, mark).
 * NAME is kernel memory (stack or map). False when tgid is not traced.
 */
/* The switch itself: the new phase's sequence number (the one before it was current). */
static __always_inline __u32 phase_switch_to(struct memtrail_target *t, __u32 tgid,
					     const char *name, __u32 resumes)
{
	struct memtrail_event_phase *e;
	__u32 seq;

	seq = mt_add_fetch(&t->phase, 1);
	e = event_reserve(sizeof(*e), MEMTRAIL_EV_PHASE, tgid);
	if (e) {
		e->seq = seq;
		e->resumes = resumes;
		if (name)
			bpf_probe_read_kernel_str(e->name, sizeof(e->name), name);
		else
			e->name[0] = '\0';
		event_submit(e, false);
	}
	return seq;
}

static __always_inline bool phase_switch(__u32 tgid, const char *name)
{
	struct memtrail_target *t = live_target(tgid);

	if (!t)
		return false;
	phase_switch_to(t, tgid, name, 0);
	return true;
}

#endif /* MT_PHASE_BPF_H */
