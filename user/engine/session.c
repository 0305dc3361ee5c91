// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "array.h"
#include "attribution.h"
#include "cgroup.h"
#include "clock.h"
#include "container.h"
#include "proc.h"
#include "sanitize.h"
#include "session_int.h"

/* after an exec, the target's libraries are looked at again this much later */
#define EXEC_RESCAN_MS 500
#define HARVEST_MS 1000		/* sites read, new stacks resolved */

volatile sig_atomic_t session__stop_signal;
volatile sig_atomic_t session__stop_again;

static void on_stop_signal(int sig)
{
	static int stops;

	/* any of memtrail's threads may take a signal, two at once: counted atomically */
	if (__atomic_fetch_add(&stops, 1, __ATOMIC_SEQ_CST))
		session__stop_again = sig;
	session__stop_signal = sig;
}

void session__install_signals(void)
{
	struct sigaction sa = { .sa_handler = on_stop_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

uint64_t session__ms(const struct session *s, uint64_t ts_ns)
{
	return ts_ns > s->t0_ns ? (ts_ns - s->t0_ns) / 1000000 : 0;
}

uint64_t session__now_ms(const struct session *s)
{
	return session__ms(s, clock__mono_ns());
}

struct trail_target *session__live(struct session *s, uint32_t pid)
{
	struct trail_target *tt = trail__find_target(&s->trail, pid);

	return tt && !tt->exited && !tt->end_ms ? tt : NULL;
}

static bool same_levels(const struct trail_target *tt, const int64_t level[])
{
	return tt->n_samples &&
	       !memcmp(tt->timeline[tt->n_samples - 1].level, level, sizeof(int64_t) * MEMTRAIL_KIND_MAX);
}

/*
 * The target's levels now: the closed phases folded (phase_log's cumulative
 * state) plus the open phase's cell, by the identities of the phase fields.
 * Adds a timeline sample; an idle process adds none: the timeline is a step
 * function, and a node-wide recording would otherwise grow by every idle
 * process at every interval.
 */
void session_refresh_from(struct session *s, struct trail_target *tt,
			  const struct memtrail_cell *cell, uint64_t t_ms, bool always)
{
	const struct phase_log *l = &tt->phases;
	int64_t level[MEMTRAIL_KIND_MAX];
	int k;

	for (k = 0; k < MEMTRAIL_KIND_MAX; k++) {
		int64_t peak = l->cum_current[k] + cell->kinds[k].peak;

		level[k] = l->cum_current[k] + cell->kinds[k].current;
		tt->current[k] = level[k];
		tt->baseline[k] = l->baseline[k] + phase__cell_baseline(&cell->kinds[k]);
		if (l->cum_peak[k] > peak)
			peak = l->cum_peak[k];
		if (peak > tt->peak[k])
			tt->peak[k] = peak;
	}
	if (!always && same_levels(tt, level))
		return;
	if (s->keep_ms && t_ms > s->keep_ms)
		trail__trim_timeline(tt, t_ms - s->keep_ms);
	if (trail__add_sample(tt, t_ms, level))
		s->err = -ENOMEM;
}

void session__refresh(struct session *s, struct trail_target *tt, uint64_t t_ms, bool always)
{
	struct memtrail_cell cell;

	if (tracer__read_cell(s->tracer, tt->pid, tt->phase_seq, &cell))
		memset(&cell, 0, sizeof(cell));	/* nothing accounted in this phase yet */
	session_refresh_from(s, tt, &cell, t_ms, always);
}

void session__open_phase(struct session *s, const struct trail_target *tt, uint64_t t_ms,
			 struct trail_phase *p)
{
	struct memtrail_cell cell;

	if (tracer__read_cell(s->tracer, tt->pid, tt->phase_seq, &cell))
		memset(&cell, 0, sizeof(cell));
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", tt->phase_name);
	p->start_ms = tt->phase_start_ms;
	p->end_ms = t_ms;
	phase_log__fields(&tt->phases, &cell, p->f);
}

/*
 * The container and pod TT's cgroup names (record's trail): a fork in its
 * parent's cgroup takes its parent's, with no read of the pod logs.
 */
static void attribute_target(struct session *s, struct trail_target *tt,
			     const struct trail_target *parent)
{
	if (!s->attribute)
		return;
	free(tt->attribution);
	if (parent && parent->cgroup && tt->cgroup && !strcmp(parent->cgroup, tt->cgroup))
		tt->attribution = attribution__dup(parent->attribution);
	else
		tt->attribution = container__attr_new(tt->cgroup,
						      s->pods_dir ? s->pods_dir : DEFAULT_PODS_DIR);
}

struct trail_target *session__new_target(struct session *s, uint32_t pid, uint32_t ppid,
					 const char *comm, uint64_t t_ms, bool forked)
{
	struct trail_target *parent = trail__find_target(&s->trail, ppid);
	char *cmdline = NULL, *cgroup = NULL;
	uint64_t cgroup_id = 0;		/* the cgroup's id where its path is the parent's */
	struct trail_target *tt;

	/* a fork runs its parent's argv in its parent's cgroup: no /proc read per fork */
	if (parent && parent->cmdline)
		cmdline = strdup(parent->cmdline);
	if (forked && parent && parent->cgroup) {
		cgroup = strdup(parent->cgroup);
		cgroup_id = parent->cgroup_id;
	}
	if (!forked || !cmdline) {
		char *own = proc__cmdline(pid);

		if (own) {
			free(cmdline);
			cmdline = own;
		}
	}
	if (!cgroup)
		cgroup = cgroup__of_pid(pid);
	tt = trail__add_target(&s->trail, pid);	/* may move parent */
	if (!tt) {
		free(cmdline);
		free(cgroup);
		s->err = -ENOMEM;
		return NULL;
	}
	tt->ppid = ppid;
	tt->start_ms = t_ms;
	tt->phase_start_ms = t_ms;
	snprintf(tt->phase_name, sizeof(tt->phase_name), "start");
	if (comm)
		snprintf(tt->comm, sizeof(tt->comm), "%s", comm);
	else if (proc__comm(pid, tt->comm, sizeof(tt->comm)))
		snprintf(tt->comm, sizeof(tt->comm), "?");
	tt->cmdline = cmdline;
	tt->cgroup = cgroup;
	attribute_target(s, tt, forked ? trail__find_target(&s->trail, ppid) : NULL);
	/* a clone into another cgroup keeps its parent's path until its exec says otherwise */
	tt->cgroup_id = cgroup_id;
	s->live++;
	return tt;
}

void session_add_event(struct session *s, json_t *e)
{
	if (!s->keep_events) {
		json_decref(e);
		return;
	}
	if (trail__add_event(&s->trail, e))
		s->err = -ENOMEM;
}

/*
 * New probes are worth their cost (a link, its grace period) only while
 * tracing goes on: once asked to stop, events still count, but nothing new
 * is probed, so a backlog of new processes cannot delay the end.
 */
bool session_probing(void)
{
	return !session__stop_signal;
}

static void on_target(struct session *s, const struct memtrail_event_target *e)
{
	uint64_t t_ms = session__ms(s, e->hdr.ts_ns);
	char comm[MEMTRAIL_COMM_LEN];

	if (session__live(s, e->hdr.tgid))
		return;
	memcpy(comm, e->comm, sizeof(comm));
	comm[sizeof(comm) - 1] = '\0';
	if (!session__new_target(s, e->hdr.tgid, e->ppid, comm, t_ms,
				 e->reason == MEMTRAIL_REASON_FORK))
		return;
	/* a forked child maps what its parent did: its own probes, at once */
	if (s->devices && e->reason == MEMTRAIL_REASON_FORK)
		devices__fork(s->devices, e->ppid, e->hdr.tgid);
	if (s->heap && session_probing())
		heap__scan(s->heap, e->hdr.tgid);
	/* a short child may be gone before its maps are read: its parent's then */
	if (s->sites && e->reason == MEMTRAIL_REASON_FORK)
		sites__fork(s->sites, e->ppid, e->hdr.tgid);
	else if (s->sites)
		sites__note_maps(s->sites, e->hdr.tgid);
	if (s->keep_events)
		session_add_event(s, json_pack("{s:I, s:s, s:i, s:i}", "t_ms", (json_int_t)t_ms,
					       "type", e->reason == MEMTRAIL_REASON_FORK ? "fork" :
					       "attach", "pid", e->hdr.tgid, "ppid", e->ppid));
}

static void rescan_schedule(struct session *s, uint32_t pid, uint64_t due_ms)
{
	if (array__grow((void **)&s->rescans, &s->cap_rescans, s->n_rescans + 1,
			sizeof(*s->rescans)))
		return;
	s->rescans[s->n_rescans++] = (struct rescan){ pid, due_ms };
}

/* A target's libraries changed, or may have: allocators to probe, code to name. */
void session_rescan(struct session *s, uint32_t pid)
{
	if (s->heap && session_probing())
		heap__scan(s->heap, pid);
	if (s->sites)
		sites__note_maps(s->sites, pid);
}

static void on_exec(struct session *s, const struct memtrail_event_exec *e)
{
	struct trail_target *tt = session__live(s, e->hdr.tgid);
	uint64_t t_ms = session__ms(s, e->hdr.ts_ns);
	size_t len = e->args_len < MEMTRAIL_ARGS_LEN ? e->args_len : MEMTRAIL_ARGS_LEN;
	bool told;
	char *cgroup;

	if (!tt)
		return;
	memcpy(tt->comm, e->comm, sizeof(tt->comm));
	tt->comm[sizeof(tt->comm) - 1] = '\0';
	if (len) {
		free(tt->cmdline);
		tt->cmdline = proc__join_args(e->args, len);
	}
	/*
	 * runtimes move a process into its container's cgroup, then exec: the
	 * kernel's id of its cgroup (in the hierarchy whose path is read: v1's
	 * memory controller, else v2) says whether it moved, so /proc is read
	 * once a cgroup, not once an exec
	 */
	if (!tt->cgroup || !e->cgroup_id || e->cgroup_id != tt->cgroup_id) {
		cgroup = cgroup__of_pid(tt->pid);
		/*
		 * a short program (an OOM victim, an exec probe) may be gone by
		 * now: its cgroup's path from the id the exec told, or its
		 * verdict would name its parent's cgroup and no pod
		 */
		if (!cgroup && e->cgroup_id)
			cgroup = cgroup__memory_path_of_id(e->cgroup_id);
		if (cgroup) {
			free(tt->cgroup);
			tt->cgroup = cgroup;
			tt->cgroup_id = e->cgroup_id;
			attribute_target(s, tt, NULL);
		}
	}
	if (s->devices && session_probing()) {
		/* a runtime linked in, then what its dynamic linker loads */
		devices__exec(s->devices, tt->pid, session__now_ms(s), EXEC_RESCAN_MS);
	}
	/* where BPF tells the code a process maps, sites need no read of its maps */
	told = s->sites && sites__maps_told(s->sites);
	if (s->heap || (s->sites && !told))
		rescan_schedule(s, tt->pid, session__now_ms(s) + EXEC_RESCAN_MS);
	/*
	 * The new program's mappings now: those kept are its parent's from the
	 * fork, and a short program may be gone before the rescan or the next
	 * harvest (heap probes attached a link per function take long)
	 */
	if (s->sites) {
		sites__exec(s->sites, tt->pid, e->hdr.ts_ns);
		if (!told)
			sites__note_maps(s->sites, tt->pid);
	}
	if (s->heap && session_probing())
		heap__scan(s->heap, tt->pid);
	if (s->keep_events)
		session_add_event(s, json_pack("{s:I, s:s, s:i, s:o}", "t_ms", (json_int_t)t_ms,
					       "type", "exec", "pid", e->hdr.tgid,
					       "comm", sanitize__json(tt->comm)));
}

/*
 * Close the target's phases before sequence number UNTIL. A gap means a phase
 * event was lost: that phase's figures still count, under "(lost)".
 */
static void close_phases(struct session *s, struct trail_target *tt, uint32_t until,
			 uint64_t t_ms)
{
	struct memtrail_cell cell;

	for (; tt->phase_seq < until; tt->phase_seq++) {
		if (tracer__take_cell(s->tracer, tt->pid, tt->phase_seq, &cell))
			memset(&cell, 0, sizeof(cell));
		if (phase_log__close(&tt->phases, tt->phase_name, tt->phase_start_ms, t_ms, &cell))
			s->err = -ENOMEM;
		snprintf(tt->phase_name, sizeof(tt->phase_name), "(lost)");
		tt->phase_start_ms = t_ms;
	}
}

/*
 * Close every phase of a target that ends, up to the kernel's current one:
 * LAST where its exit event said, else read.
 */
static void close_all_phases(struct session *s, struct trail_target *tt, uint64_t t_ms,
			     const uint32_t *last)
{
	uint32_t seq = tt->phase_seq;

	if (last)
		seq = *last;
	else
		tracer__read_phase(s->tracer, tt->pid, &seq);
	if (seq < tt->phase_seq)
		seq = tt->phase_seq;
	close_phases(s, tt, seq + 1, t_ms);
}

static void on_phase(struct session *s, const struct memtrail_event_phase *e)
{
	struct trail_target *tt = session__live(s, e->hdr.tgid);
	uint64_t t_ms = session__ms(s, e->hdr.ts_ns);
	const char *name;

	if (!tt || e->seq <= tt->phase_seq)
		return;
	close_phases(s, tt, e->seq, t_ms);
	/* a scope returned: the phase it interrupted, by name, goes on */
	name = e->resumes ? phase_log__name(&tt->phases, e->resumes - 1) : NULL;
	if (e->resumes)
		snprintf(tt->phase_name, sizeof(tt->phase_name), "%s", name ? name : "(lost)");
	else
		memcpy(tt->phase_name, e->name, sizeof(tt->phase_name));
	tt->phase_name[sizeof(tt->phase_name) - 1] = '\0';
	tt->phase_start_ms = t_ms;
	if (s->devices)
		devices__on_phase(s->devices, tt->pid, tt->phase_name);
}

static bool used_device(const struct trail_target *tt)
{
	int k;

	for (k = MEMTRAIL_KIND_CUDA_DEVICE; k <= MEMTRAIL_KIND_NEURON_HOST; k++)
		if (tt->peak[k])
			return true;
	return false;
}

void session_end_target(struct session *s, struct trail_target *tt, uint64_t t_ms,
			const uint32_t *last_phase)
{
	static const struct memtrail_cell none;

	close_all_phases(s, tt, t_ms, last_phase);
	/* every phase is closed and its cell dropped: the levels are the folded ones */
	session_refresh_from(s, tt, &none, t_ms, true);
	/* the kernel's records of its device memory: walked only when there are some */
	if (s->devices)
		devices__forget(s->devices, tt->pid, used_device(tt));
	if (s->heap)
		heap__forget(s->heap, tt->pid);
	tt->end_ms = t_ms ? t_ms : 1;
	tracer__forget_ended(s->tracer, tt->pid);
	if (s->live)
		s->live--;
	if (s->remove_ended && !s->ended_all) {
		if (array__grow((void **)&s->ended, &s->cap_ended, s->n_ended + 1, sizeof(*s->ended)))
			s->ended_all = true;
		else
			s->ended[s->n_ended++] = tt->pid;
	}
	if (s->hooks && s->hooks->ended)
		s->hooks->ended(s, tt);
}

/* The OOM killer chose it: the kill follows; its memory is still intact. */
static void on_oom(struct session *s, const struct memtrail_event_oom *e)
{
	struct trail_target *tt = session__live(s, e->hdr.tgid);
	struct verdict_facts *f;

	if (!tt)
		return;
	f = &tt->facts;
	f->oom = true;
	f->oom_ms = session__ms(s, e->hdr.ts_ns);
	f->memcg_level = e->memcg_level;
	f->usage = e->usage;
	f->limit = e->limit;
	f->trigger_pid = e->trigger_tgid;
	memcpy(f->trigger_comm, e->trigger_comm, sizeof(f->trigger_comm));
	f->trigger_comm[sizeof(f->trigger_comm) - 1] = '\0';
	free(f->oom_cgroup);
	f->oom_cgroup = e->memcg_id ? cgroup__memory_path_of_id(e->memcg_id) : NULL;
	if (s->hooks && s->hooks->oom) {
		session__refresh(s, tt, f->oom_ms, true);
		s->hooks->oom(s, tt, e);
	}
}

static void on_pressure(struct session *s, const struct memtrail_event_pressure *e)
{
	struct trail_target *tt = session__live(s, e->hdr.tgid);

	if (tt && s->hooks && s->hooks->pressure)
		s->hooks->pressure(s, tt, e);
}

static void on_signal_event(struct session *s, const struct memtrail_event_signal *e)
{
	struct trail_target *tt = session__live(s, e->hdr.tgid);
	uint64_t t_ms = session__ms(s, e->hdr.ts_ns);
	char comm[MEMTRAIL_COMM_LEN];
	struct verdict_facts *f;

	if (!tt)
		return;
	memcpy(comm, e->sender_comm, sizeof(comm));
	comm[sizeof(comm) - 1] = '\0';
	f = &tt->facts;
	if (e->sig == SIGTERM && !f->sigterm) {
		f->sigterm = true;
		f->sigterm_ms = t_ms;
	} else if (e->sig == SIGKILL && !f->sigkill) {
		f->sigkill = true;
		f->sigkill_ms = t_ms;
		f->sender_pid = e->sender_tgid;
		f->sender_ppid = e->sender_ppid;
		memcpy(f->sender_comm, comm, sizeof(f->sender_comm));
		/* the sender may be gone already (a kill command): then these stay unknown */
		f->sender_cgroup = cgroup__of_pid(e->sender_tgid);
		f->sender_cmdline = proc__cmdline(e->sender_tgid);
	}
	if (s->keep_events)
		session_add_event(s, json_pack("{s:I, s:s, s:i, s:i, s:i, s:o}",
					       "t_ms", (json_int_t)t_ms, "type", "signal",
					       "pid", e->hdr.tgid, "signal", e->sig,
					       "sender", e->sender_tgid,
					       "sender_comm", sanitize__json(comm)));
}

static void on_exit_event(struct session *s, const struct memtrail_event_exit *e)
{
	struct trail_target *tt = session__live(s, e->hdr.tgid);
	uint64_t t_ms = session__ms(s, e->hdr.ts_ns);
	uint32_t pid = e->hdr.tgid;

	if (!tt)
		return;
	tt->exited = true;
	tt->exit_code = e->code;
	tt->exit_signal = e->signal;
	if (e->signal == SIGKILL) {
		tt->verdict = verdict__decide(&tt->facts, tt->cgroup);
		if (!tt->verdict)
			s->err = -ENOMEM;
		else	/* the container and pod of the sender's cgroup, or the OOM's */
			tt->verdict->attr = container__attr_new(verdict__attr_cgroup(tt->verdict),
						s->pods_dir ? s->pods_dir : DEFAULT_PODS_DIR);
	}
	if (s->keep_events)
		session_add_event(s, json_pack("{s:I, s:s, s:i, s:i, s:i}",
					       "t_ms", (json_int_t)t_ms, "type", "exit",
					       "pid", pid, "code", e->code, "signal", e->signal));
	/* last: its hook may remove the target */
	session_end_target(s, tt, t_ms, &e->phase);
}

void session__tick(struct session *s, uint64_t t_ms)
{
	uint64_t now = session__now_ms(s);
	size_t i;

	(void)t_ms;
	if (s->devices)
		devices__tick(s->devices, now);
	for (i = 0; i < s->n_rescans;) {
		if (s->rescans[i].due_ms > now) {
			i++;
			continue;
		}
		if (session__live(s, s->rescans[i].pid))
			session_rescan(s, s->rescans[i].pid);
		s->rescans[i] = s->rescans[--s->n_rescans];
	}
	if (s->heap)
		heap__tick(s->heap, now);
	if (s->sites && now >= s->next_harvest_ms) {
		sites__harvest(s->sites);
		s->next_harvest_ms = now + HARVEST_MS;
	}
}

int session__on_event(void *ctx, const void *data, size_t size)
{
	const struct memtrail_event_hdr *h = data;
	struct session *s = ctx;

	s->events++;
	if (size < sizeof(*h))
		return 0;
	/* maps read meanwhile, where a process may be gone before the loop's own read */
	if (s->sites)
		sites__take_maps(s->sites, h->ts_ns);
	switch (h->type) {
	case MEMTRAIL_EV_TARGET:
		if (size >= sizeof(struct memtrail_event_target))
			on_target(s, data);
		break;
	case MEMTRAIL_EV_EXEC:
		if (size >= sizeof(struct memtrail_event_exec))
			on_exec(s, data);
		break;
	case MEMTRAIL_EV_EXIT:
		if (size >= sizeof(struct memtrail_event_exit))
			on_exit_event(s, data);
		break;
	case MEMTRAIL_EV_PHASE:
		if (size >= sizeof(struct memtrail_event_phase))
			on_phase(s, data);
		break;
	case MEMTRAIL_EV_OOM:
		if (size >= sizeof(struct memtrail_event_oom))
			on_oom(s, data);
		break;
	case MEMTRAIL_EV_SIGNAL:
		if (size >= sizeof(struct memtrail_event_signal))
			on_signal_event(s, data);
		break;
	case MEMTRAIL_EV_PRESSURE:
		if (size >= sizeof(struct memtrail_event_pressure))
			on_pressure(s, data);
		break;
	case MEMTRAIL_EV_DEVICE_FAIL:
		if (size >= sizeof(struct memtrail_event_device))
			session_on_device_fail(s, data);
		break;
	case MEMTRAIL_EV_LIBS:
		session_on_libs(s, data, size >= sizeof(struct memtrail_event_libs) &&
				((const struct memtrail_event_libs *)data)->fresh);
		break;
	case MEMTRAIL_EV_DEVICE_TOTAL:
		if (size >= sizeof(struct memtrail_event_device_total))
			session_on_device_total(s, data);
		break;
	case MEMTRAIL_EV_HEAP_BUDGET:
		if (s->heap)
			heap__budget_spent(s->heap, h->tgid, session__now_ms(s));
		break;
	case MEMTRAIL_EV_MAP:
		if (s->sites && size >= sizeof(struct memtrail_event_map))
			sites__add_map(s->sites, data);
		break;
	case MEMTRAIL_EV_FILE:
		if (s->sites && size >= sizeof(struct memtrail_event_file))
			sites__add_file(s->sites, data);
		break;
	/* only a target's: not the heap probes' timing child, which is forgotten */
	case MEMTRAIL_EV_DEEP:
		if (s->sites && size >= sizeof(struct memtrail_event_deep) &&
		    session__live(s, h->tgid))
			sites__deep(s->sites, data);
		break;
	case MEMTRAIL_EV_DEEP_FREE:
		if (s->sites && size >= sizeof(struct memtrail_event_deep_free) &&
		    session__live(s, h->tgid))
			sites__deep_free(s->sites, data);
		break;
	}
	return 0;
}

void session__close_all(struct session *s, uint64_t t_ms)
{
	size_t i;

	tracer__poll(s->tracer, 0);
	for (i = 0; i < s->trail.n_targets; i++) {
		struct trail_target *tt = &s->trail.targets[i];

		if (!tt->exited && !tt->end_ms) {
			close_all_phases(s, tt, t_ms, NULL);
			session__refresh(s, tt, t_ms, true);
		}
	}
}

void session__remove_ended(struct session *s, session_removed_fn fn, void *ctx)
{
	bool all = s->ended_all;
	size_t i;

	for (i = 0; i < s->n_ended && !all; i++) {
		struct trail_target *tt = trail__find_target(&s->trail, s->ended[i]);

		if (!tt)
			continue;	/* removed already: its pid listed twice */
		if (!tt->end_ms) {
			all = true;	/* a new target has the pid already: the old one is not found by it */
			break;
		}
		if (fn)
			fn(ctx, tt);
		trail__remove_target(&s->trail, tt);
	}
	for (i = 0; all && i < s->trail.n_targets;) {
		struct trail_target *tt = &s->trail.targets[i];

		if (!tt->end_ms) {
			i++;
			continue;
		}
		if (fn)
			fn(ctx, tt);
		trail__remove_target(&s->trail, tt);
	}
	s->n_ended = 0;
	s->ended_all = false;
}

void session__destroy(struct session *s)
{
	heap__destroy(s->heap);
	sites__destroy(s->sites);
	free(s->rescans);
	free(s->batch);
	free(s->ended);
	devices__destroy(s->devices);
	tracer__destroy(s->tracer);
	trail__free(&s->trail);
	s->heap = NULL;
	s->sites = NULL;
	s->rescans = NULL;
	s->batch = NULL;
	s->ended = NULL;
	s->devices = NULL;
	s->tracer = NULL;
}
