// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * A trail in memory: its targets, their samples and device limits, its
 * events, the names of what was lost. Written as JSON by trail_json.c and
 * trail_write.c, read back by trail_read.c and trail_check.c.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "array.h"
#include "trail.h"
#include "trail_int.h"

const char *const trail_lost_names[MEMTRAIL_LOST_MAX] = {
	[MEMTRAIL_LOST_RINGBUF] = "ringbuf",
	[MEMTRAIL_LOST_TARGETS] = "targets",
	[MEMTRAIL_LOST_CELLS] = "cells",
	[MEMTRAIL_LOST_MM] = "mm",
	[MEMTRAIL_LOST_PHASE_NAMES] = "phase_names",
	[MEMTRAIL_LOST_DEVICE] = "device",
	[MEMTRAIL_LOST_SITES] = "sites",
	[MEMTRAIL_LOST_STACKS] = "stacks",
	[MEMTRAIL_LOST_HEAP] = "heap",
	[MEMTRAIL_LOST_SCOPES] = "scopes",
	[MEMTRAIL_LOST_MAPS] = "maps",
	[MEMTRAIL_LOST_DEEP] = "deep",
	[MEMTRAIL_LOST_SKIPPED] = "skipped",
};

const char *trail__lost_name(int why)
{
	return why >= 0 && why < MEMTRAIL_LOST_MAX ? trail_lost_names[why] : NULL;
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
	free(tt->attribution);
	free(tt->timeline);
	phase_log__free(&tt->phases);
	verdict__free(tt->verdict);
	trail_sites__free(tt->sites);
	verdict__free_facts(&tt->facts);
}

void trail__remove_target(struct trail *t, struct trail_target *tt)
{
	size_t i = tt - t->targets, last = t->n_targets - 1, at;

	if (i >= t->n_targets)
		return;
	if (pidmap__get(&t->by_pid, tt->pid, &at) && at == i)
		pidmap__del(&t->by_pid, tt->pid);
	target_free(tt);
	if (i != last) {
		*tt = t->targets[last];
		if (pidmap__get(&t->by_pid, tt->pid, &at) && at == last)
			pidmap__put(&t->by_pid, tt->pid, i);	/* replaces: cannot fail */
	}
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
	pidmap__free(&t->by_pid);
	free(t->command);
	json_decref(t->events);
	json_decref(t->snapshot);
	json_decref(t->verdict_doc);
	free(t->doc_attr);
	json_decref(t->kernel);
	memset(t, 0, sizeof(*t));
}

struct trail_target *trail__add_target(struct trail *t, uint32_t pid)
{
	struct trail_target *tt;

	if (array__grow((void **)&t->targets, &t->cap_targets, t->n_targets + 1, sizeof(*tt)) ||
	    pidmap__put(&t->by_pid, pid, t->n_targets))
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

	return pidmap__get(&t->by_pid, pid, &i) ? &t->targets[i] : NULL;
}

int trail__add_sample(struct trail_target *tt, uint64_t t_ms, const int64_t level[])
{
	struct trail_sample *s;

	if (array__grow((void **)&tt->timeline, &tt->cap_samples, tt->n_samples + 1, sizeof(*s)))
		return -ENOMEM;
	s = &tt->timeline[tt->n_samples++];
	/*
	 * never before the last sample: an event read after a later sample
	 * (an exit read after the next interval's sample) is placed at it, so
	 * the timeline stays in time order, as readers require
	 */
	if (tt->n_samples > 1 && t_ms < s[-1].t_ms)
		t_ms = s[-1].t_ms;
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

const char *trail__phase_name(const struct trail_target *tt, uint32_t seq, char *buf,
			      size_t len)
{
	const struct phase_log *l = &tt->phases;
	const struct trail_phase *p = NULL;
	size_t n = phase_log__count(l);
	const char *name;

	if (seq == tt->phase_seq)
		return tt->phase_name;
	if (seq < tt->phase_seq) {
		if (!l->folded || seq < l->n_first)
			p = phase_log__at(l, seq);
		else if (tt->phase_seq - seq <= l->n_recent)
			p = phase_log__at(l, n - (tt->phase_seq - seq));
	}
	/* listed phases keep their own names; folded ones their aggregate's */
	name = p ? p->name : phase_log__name(l, seq);
	if (name)
		return name;
	snprintf(buf, len, "#%u", seq);
	return buf;
}
