// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "array.h"
#include "cgroup.h"
#include "container.h"
#include "devspecs.h"
#include "kfeatures.h"
#include "format.h"
#include "kinds.h"
#include "log.h"
#include "proc.h"
#include "roots.h"
#include "sanitize.h"
#include "session.h"

/* with no ring-buffer loss, /proc is still asked this often whether targets live */
#define LIVENESS_PERIOD_MS 5000
/* after an exec, the target's libraries are looked at again this much later */
#define EXEC_RESCAN_MS 500
#define HARVEST_MS 1000		/* sites read, new stacks resolved */
/*
 * Ended targets' sites taken (a walk of the kernel's site tables) at most
 * this often: their pids wait that long to be targets again
 */
#define RETIRE_MS 250
/* live device allocations listed by size in a device OOM event */
#define DEVICE_LARGEST 32

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

uint64_t session__mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

uint64_t session__ms(const struct session *s, uint64_t ts_ns)
{
	return ts_ns > s->t0_ns ? (ts_ns - s->t0_ns) / 1000000 : 0;
}

uint64_t session__now_ms(const struct session *s)
{
	return session__ms(s, session__mono_ns());
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
static void refresh_from(struct session *s, struct trail_target *tt, const struct memtrail_cell *cell,
			 uint64_t t_ms, bool always)
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
	refresh_from(s, tt, &cell, t_ms, always);
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
	json_decref(tt->attribution);
	if (parent && parent->cgroup && tt->cgroup && !strcmp(parent->cgroup, tt->cgroup))
		tt->attribution = json_incref(parent->attribution);
	else
		tt->attribution = container__json(tt->cgroup,
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

static void add_event(struct session *s, json_t *e)
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
static bool probing(void)
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
	if (s->heap && probing())
		heap__scan(s->heap, e->hdr.tgid);
	/* a short child may be gone before its maps are read: its parent's then */
	if (s->sites && e->reason == MEMTRAIL_REASON_FORK)
		sites__fork(s->sites, e->ppid, e->hdr.tgid);
	else if (s->sites)
		sites__note_maps(s->sites, e->hdr.tgid);
	if (s->keep_events)
		add_event(s, json_pack("{s:I, s:s, s:i, s:i}", "t_ms", (json_int_t)t_ms,
				       "type", e->reason == MEMTRAIL_REASON_FORK ? "fork" : "attach",
				       "pid", e->hdr.tgid, "ppid", e->ppid));
}

static void rescan_schedule(struct session *s, uint32_t pid, uint64_t due_ms)
{
	if (array__grow((void **)&s->rescans, &s->cap_rescans, s->n_rescans + 1,
			sizeof(*s->rescans)))
		return;
	s->rescans[s->n_rescans++] = (struct rescan){ pid, due_ms };
}

/* A target's libraries changed, or may have: allocators to probe, code to name. */
static void rescan(struct session *s, uint32_t pid)
{
	if (s->heap && probing())
		heap__scan(s->heap, pid);
	if (s->sites)
		sites__note_maps(s->sites, pid);
}

static void on_exec(struct session *s, const struct memtrail_event_exec *e)
{
	struct trail_target *tt = session__live(s, e->hdr.tgid);
	uint64_t t_ms = session__ms(s, e->hdr.ts_ns);
	size_t len = e->args_len < MEMTRAIL_ARGS_LEN ? e->args_len : MEMTRAIL_ARGS_LEN;
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
		if (cgroup) {
			free(tt->cgroup);
			tt->cgroup = cgroup;
			tt->cgroup_id = e->cgroup_id;
			attribute_target(s, tt, NULL);
		}
	}
	if (s->devices && probing()) {
		/* a runtime linked in, then what its dynamic linker loads */
		devices__exec(s->devices, tt->pid, session__now_ms(s), EXEC_RESCAN_MS);
	}
	if (s->heap || s->sites)
		rescan_schedule(s, tt->pid, session__now_ms(s) + EXEC_RESCAN_MS);
	/*
	 * The new program's mappings now: those kept are its parent's from the
	 * fork, and a short program may be gone before the rescan or the next
	 * harvest (heap probes attached a link per function take long)
	 */
	if (s->sites)
		sites__note_maps(s->sites, tt->pid);
	if (s->heap && probing())
		heap__scan(s->heap, tt->pid);
	if (s->keep_events)
		add_event(s, json_pack("{s:I, s:s, s:i, s:o}", "t_ms", (json_int_t)t_ms,
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

static void end_target(struct session *s, struct trail_target *tt, uint64_t t_ms,
		       const uint32_t *last_phase)
{
	static const struct memtrail_cell none;

	close_all_phases(s, tt, t_ms, last_phase);
	/* every phase is closed and its cell dropped: the levels are the folded ones */
	refresh_from(s, tt, &none, t_ms, true);
	/* the kernel's records of its device memory: walked only when there are some */
	if (s->devices)
		devices__forget(s->devices, tt->pid, used_device(tt));
	if (s->heap)
		heap__forget(s->heap, tt->pid);
	tt->end_ms = t_ms ? t_ms : 1;
	tracer__forget_ended(s->tracer, tt->pid);
	if (s->live)
		s->live--;
	s->ended++;
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
		add_event(s, json_pack("{s:I, s:s, s:i, s:i, s:i, s:o}", "t_ms", (json_int_t)t_ms,
				       "type", "signal", "pid", e->hdr.tgid, "signal", e->sig,
				       "sender", e->sender_tgid, "sender_comm", sanitize__json(comm)));
}

/* Containers and pods of the cgroups a verdict names: the sender's, the OOM's. */
static void attribute(struct session *s, json_t *v)
{
	const char *pods = s->pods_dir ? s->pods_dir : DEFAULT_PODS_DIR;
	json_t *sender = json_object_get(v, "sender");
	json_t *holder = sender ? sender : v;
	json_t *a = container__json(json_string_value(json_object_get(holder, "cgroup")), pods);

	container__put(holder, a);
	json_decref(a);
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
		else
			attribute(s, tt->verdict);
	}
	if (s->keep_events)
		add_event(s, json_pack("{s:I, s:s, s:i, s:i, s:i}", "t_ms", (json_int_t)t_ms,
				       "type", "exit", "pid", pid, "code", e->code,
				       "signal", e->signal));
	end_target(s, tt, t_ms, &e->phase);	/* last: its hook may remove the target */
}

struct live_list {
	const struct trail_target *tt;
	struct live_alloc {
		uint64_t addr;
		struct memtrail_dev_alloc a;
	} *v;
	size_t n, cap;
};

static void collect_alloc(void *ctx, uint64_t addr, const struct memtrail_dev_alloc *a)
{
	struct live_list *l = ctx;

	if (array__grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v)))
		return;
	l->v[l->n].addr = addr;
	l->v[l->n++].a = *a;
}

static int by_size_desc(const void *x, const void *y)
{
	const struct live_alloc *a = x, *b = y;

	return a->a.size < b->a.size ? 1 : a->a.size > b->a.size ? -1 : 0;
}

static json_t *device_or_null(int32_t device)
{
	return device < 0 ? json_null() : json_integer(device);
}

/*
 * The target's live device allocations when one failed for lack of memory:
 * totals per (phase, kind) and the largest, with the phase each was made in.
 */
static json_t *live_allocations(struct session *s, const struct trail_target *tt,
				uint32_t epoch)
{
	struct live_list l = { .tt = tt };
	json_t *by = json_array(), *largest = json_array(), *o;
	uint64_t bytes = 0;
	char buf[32];
	size_t i, j;

	tracer__device_allocs(s->tracer, tt->pid, epoch, collect_alloc, &l);
	qsort(l.v, l.n, sizeof(*l.v), by_size_desc);
	for (i = 0; i < l.n; i++) {
		const struct memtrail_dev_alloc *a = &l.v[i].a;
		json_t *phase = sanitize__json(trail__phase_name(tt, a->phase, buf, sizeof(buf)));
		json_t *row = NULL;

		bytes += a->size;
		for (j = 0; j < json_array_size(by); j++) {
			json_t *r = json_array_get(by, j);

			if (json_equal(json_object_get(r, "phase"), phase) &&
			    !strcmp(json_string_value(json_object_get(r, "kind")),
				    kind__name(a->kind))) {
				row = r;
				break;
			}
		}
		if (!row) {
			row = json_pack("{s:O, s:s, s:I, s:I}", "phase", phase, "kind",
					kind__name(a->kind), "count", (json_int_t)0, "bytes",
					(json_int_t)0);
			json_array_append_new(by, row);
		}
		json_object_set_new(row, "count", json_integer(json_integer_value(
					json_object_get(row, "count")) + 1));
		json_object_set_new(row, "bytes", json_integer(json_integer_value(
					json_object_get(row, "bytes")) + (json_int_t)a->size));
		if (i < DEVICE_LARGEST) {
			char addr[24];

			snprintf(addr, sizeof(addr), "0x%llx", (unsigned long long)l.v[i].addr);
			json_array_append_new(largest, json_pack(
				"{s:s, s:I, s:s, s:o, s:O, s:s}", "address", addr,
				"size", (json_int_t)a->size, "kind", kind__name(a->kind),
				"device", device_or_null(a->device), "phase", phase, "function",
				a->name == UINT32_MAX ? "cuMemCreate" : devspecs__fn_name(a->name)));
		}
		json_decref(phase);
	}
	free(l.v);
	o = json_pack("{s:I, s:I, s:o, s:o}", "count", (json_int_t)l.n, "bytes", (json_int_t)bytes,
		      "by_phase", by, "largest", largest);
	return o;
}

static void on_device_fail(struct session *s, const struct memtrail_event_device *e)
{
	struct trail_target *tt = session__live(s, e->hdr.tgid);
	uint64_t t_ms = session__ms(s, e->hdr.ts_ns);
	const char *fn = devspecs__fn_name(e->name), *err, *phase;
	bool oom = devspecs__is_oom(e->runtime, e->rc);
	char buf[32], size[32];
	json_t *ev, *site;
	bool truncated;
	uint32_t i;

	if (!tt)
		return;
	err = devspecs__error_name(e->runtime, fn, e->rc);
	phase = trail__phase_name(tt, e->phase, buf, sizeof(buf));
	/* frames up to the first that is not code: the stack cannot be unwound past it */
	site = json_array();
	for (i = 0; i < e->n_frames && i < MEMTRAIL_STACK_DEPTH; i++) {
		json_t *frame = devices__site(s->devices, tt->pid, e->frames[i],
					      i < MEMTRAIL_FRAME_FILES ? &e->files[i] : NULL);

		if (!frame)
			break;
		json_array_append_new(site, frame);
	}
	truncated = i < e->n_frames;
	ev = json_pack("{s:I, s:s, s:i, s:o, s:s, s:s, s:i, s:s?, s:s, s:o, s:I, s:o, s:o, s:b}",
		       "t_ms", (json_int_t)t_ms, "type", oom ? "device_oom" : "device_error",
		       "pid", tt->pid, "comm", sanitize__json(tt->comm), "function", fn,
		       "runtime", devspecs__runtime_name(e->runtime), "code", e->rc, "error", err,
		       "kind", kind__name(e->kind), "device", device_or_null(e->device),
		       "size", (json_int_t)e->size, "phase", sanitize__json(phase), "site", site,
		       "site_truncated", truncated);
	if (!ev) {
		s->err = -ENOMEM;
		return;
	}
	format__bytes(size, sizeof(size), e->size);
	if (oom) {
		json_object_set_new(ev, "live_allocations", live_allocations(s, tt, e->epoch));
		log__warn("device out of memory: %u (%s) %s of %s on %s device %d failed with %s "
			  "in phase '%s'", tt->pid, tt->comm, fn, size,
			  devspecs__runtime_name(e->runtime), e->device, err ? err : "?", phase);
		if (s->hooks && s->hooks->device_oom) {
			session__refresh(s, tt, t_ms, true);
			s->hooks->device_oom(s, tt, ev);
		}
	} else {
		log__info("device call failed: %u (%s) %s returned %d (%s) in phase '%s'", tt->pid,
			  tt->comm, fn, e->rc, err ? err : "?", phase);
	}
	if (s->keep_events)
		add_event(s, ev);
	else
		json_decref(ev);
}

static void on_device_total(struct session *s, const struct memtrail_event_device_total *e)
{
	struct trail_target *tt = session__live(s, e->hdr.tgid);
	char size[32];

	if (!tt || e->kind >= MEMTRAIL_KIND_MAX || !e->bytes)
		return;
	if (trail__device_limit(tt, e->kind) == 0) {
		format__bytes(size, sizeof(size), e->bytes);
		log__info("%u (%s): %s device %d has %s", tt->pid, tt->comm, kind__name(e->kind),
			  e->device, size);
	}
	trail__set_device_limit(tt, e->kind, e->device, e->bytes);
}

/*
 * PID mapped runtime FILE before memtrail had probed it (it was new, and no
 * gate held the process), or (EXITED) ended before memtrail could read the
 * file at all: its calls into it until then were not seen. Said, and kept in
 * the trail, never silently lost.
 */
enum late_how {
	LATE_MAPPED,	/* probed after the process mapped it */
	LATE_ENDED,	/* never probed: the process ended before memtrail read its maps */
	LATE_STOPPING,	/* never probed: memtrail learnt of it as it was stopping */
};

static void late(struct session *s, uint32_t pid, const char *file, enum late_how how)
{
	bool exited = how == LATE_ENDED || (how == LATE_STOPPING && proc__exiting(pid));
	struct trail_target *tt = session__live(s, pid);
	uint64_t t_ms = session__now_ms(s);
	const char *base;
	json_t *ev;
	size_t i;

	if (!tt)
		return;
	/* said once: a process probed late whose news is read after it ended */
	base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
	for (i = 0; i < SESSION_LATE_SAID; i++)
		if (s->late_said[i].pid == pid && !strncmp(s->late_said[i].name, base,
							  sizeof(s->late_said[i].name) - 1))
			return;
	s->late_said[s->late % SESSION_LATE_SAID].pid = pid;
	snprintf(s->late_said[s->late % SESSION_LATE_SAID].name, sizeof(s->late_said[0].name),
		 "%s", base);
	s->late++;
	if (how == LATE_ENDED)
		log__warn("%u (%s) mapped '%s', new to memtrail, and ended before memtrail could "
			  "read it: its calls into it are not counted", pid, tt->comm, file);
	else if (how == LATE_STOPPING)
		log__warn("%u (%s) mapped '%s', new to memtrail, as memtrail was stopping: its "
			  "calls into it are not counted", pid, tt->comm, file);
	else
		log__warn("%u (%s) mapped '%s' before its probes were live: its calls into it "
			  "until now are not counted", pid, tt->comm, file);
	ev = json_pack("{s:I, s:s, s:i, s:o, s:o, s:b}", "t_ms", (json_int_t)t_ms, "type",
		       "probes_late", "pid", tt->pid, "comm", sanitize__json(tt->comm), "file",
		       sanitize__json(file), "exited", exited);
	if (!ev) {
		s->err = -ENOMEM;
		return;
	}
	add_event(s, ev);
}

static void on_late(void *ctx, uint32_t pid, const char *file)
{
	late(ctx, pid, file, LATE_MAPPED);
}

/*
 * PID mapped NAME, a file new to memtrail when mapped, and ended before
 * memtrail could read its maps: a runtime's library by its name had its
 * calls unseen, unless it was probed before it was mapped (at record's
 * gate, as the process opened it).
 */
static void on_unseen(void *ctx, uint32_t pid, const struct memtrail_lib_key *key,
		      const char *name, uint64_t mapped_ns)
{
	struct session *s = ctx;

	if (roots__runtime_name(name) &&
	    !devices__probed(s->devices, key->dev, key->ino, mapped_ns))
		late(s, pid, name, probing() ? LATE_ENDED : LATE_STOPPING);
}

/*
 * The dynamic linker changed a target's libraries. Fresh (it mapped files
 * new to memtrail): scanned and probed now, while it runs on.
 */
static void on_libs(struct session *s, const struct memtrail_event_libs *e, bool fresh)
{
	if (!session__live(s, e->hdr.tgid))
		return;
	/*
	 * gone before its files could be read, or read as memtrail stops (no
	 * probing then): what it mapped is said, not lost silently
	 */
	if (s->devices && fresh && (!probing() || devices__scan(s->devices, e->hdr.tgid) < 0))
		tracer__lib_unseen(s->tracer, e->hdr.tgid, on_unseen, s);
	else if (s->devices)
		devices__schedule(s->devices, e->hdr.tgid, session__now_ms(s), 0);
	rescan(s, e->hdr.tgid);
}

/* TT's sites as the trail keeps them, with the heap probes' sampling where on. */
static json_t *target_sites(struct session *s, const struct trail_target *tt, uint64_t now)
{
	json_t *j = sites__json(s->sites, tt);

	if (s->heap) {
		if (!j)
			j = json_pack("{s:[]}", "list");
		json_object_set_new(j, "heap", heap__sampling(s->heap, tt->pid, now));
	}
	return j;
}

/* PID's target ended and its pid is about to be free: its sites are taken now. */
static void retire_sites(void *ctx, uint32_t pid)
{
	struct session *s = ctx;
	struct trail_target *tt = trail__find_target(&s->trail, pid);

	if (!tt || !tt->end_ms || tt->sites_final)
		return;
	json_decref(tt->sites);
	/* a second Ctrl-C gives the trail up: no more symbolizing for it */
	tt->sites = session__stop_again ? NULL : target_sites(s, tt, session__now_ms(s));
	tt->sites_final = true;
}

static bool on_ended(void *ctx, const uint32_t *pids, size_t n)
{
	struct session *s = ctx;
	uint64_t now = session__now_ms(s);

	if (now < s->next_retire_ms)
		return false;
	s->next_retire_ms = now + RETIRE_MS;
	sites__retire(s->sites, pids, n, retire_sites, s);
	return true;
}

int session__open_sites(struct session *s, const struct heap_config *heap)
{
	size_t i;
	int err = sites__open(&s->sites, s->tracer, &s->trail);

	if (err)
		return err;
	if (heap) {
		err = heap__open(&s->heap, s->tracer, heap);
		if (err)
			return err;
	}
	tracer__on_ended(s->tracer, on_ended, s);
	for (i = 0; i < s->trail.n_targets; i++)
		if (session__live(s, s->trail.targets[i].pid))
			rescan(s, s->trail.targets[i].pid);
	return 0;
}

void session__finish_sites(struct session *s)
{
	uint64_t now = session__now_ms(s);
	size_t i;

	if (!s->sites)
		return;
	sites__harvest(s->sites);
	/* a second Ctrl-C gives the trail up: no more symbolizing for it */
	for (i = 0; i < s->trail.n_targets && !session__stop_again; i++) {
		struct trail_target *tt = &s->trail.targets[i];

		if (tt->sites_final)
			continue;
		json_decref(tt->sites);
		tt->sites = target_sites(s, tt, now);
	}
}

int session__open_devices(struct session *s, bool loader_only)
{
	const struct kernel_features *kf = tracer__features(s->tracer);
	size_t i;
	int err;

	/* without tracking files mapped nothing listens to the dynamic linker's hook */
	if (loader_only && !tracer__tracking(s->tracer))
		return 0;
	/* a kernel that cannot run the device probes: said in 'features' and -v, no noise */
	if (!loader_only && kf->f[FEAT_DEVICE].state == FEATURE_NO) {
		log__debug("device memory not traced: %s", kf->f[FEAT_DEVICE].note);
		return 0;
	}
	err = devices__open(&s->devices, s->tracer, loader_only);
	if (err)
		return err;
	devices__on_late(s->devices, on_late, s);
	for (i = 0; i < s->trail.n_targets; i++)
		if (session__live(s, s->trail.targets[i].pid))
			devices__scan(s->devices, s->trail.targets[i].pid);
	devices__attached(s->devices);
	if (!loader_only)
		s->trail.kinds |= kind__device();
	return 0;
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
			rescan(s, s->rescans[i].pid);
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
			on_device_fail(s, data);
		break;
	case MEMTRAIL_EV_LIBS:
		on_libs(s, data, size >= sizeof(struct memtrail_event_libs) &&
			((const struct memtrail_event_libs *)data)->fresh);
		break;
	case MEMTRAIL_EV_DEVICE_TOTAL:
		if (size >= sizeof(struct memtrail_event_device_total))
			on_device_total(s, data);
		break;
	case MEMTRAIL_EV_HEAP_BUDGET:
		if (s->heap)
			heap__budget_spent(s->heap, h->tgid, session__now_ms(s));
		break;
	case MEMTRAIL_EV_MAP:
		if (s->sites && size >= sizeof(struct memtrail_event_map))
			sites__add_map(s->sites, data);
		break;
	}
	return 0;
}

/*
 * Whether to ask /proc which targets still live: their exit events normally
 * say so, so only after the ring buffer dropped events, and now and then.
 */
static bool check_liveness(struct session *s, uint64_t t_ms)
{
	uint64_t lost = tracer__lost_one(s->tracer, MEMTRAIL_LOST_RINGBUF);

	if (lost == s->lost_seen && t_ms < s->next_liveness_ms)
		return false;
	s->lost_seen = lost;
	s->next_liveness_ms = t_ms + LIVENESS_PERIOD_MS;
	return true;
}

/* The batch slot of TGID's target (its index in the trail), or NULL. */
static struct batch_cell *batch_slot(struct session *s, uint32_t tgid)
{
	const struct trail_target *tt = trail__find_target(&s->trail, tgid);
	size_t i = tt ? (size_t)(tt - s->trail.targets) : SIZE_MAX;

	return i < s->n_batch ? &s->batch[i] : NULL;
}

/* A cell of a batch read: kept for its target when it is the target's open phase. */
static void batch_cell(void *ctx, const void *k, const void *v)
{
	const struct memtrail_cell_key *key = k;
	struct session *s = ctx;
	struct batch_cell *b = batch_slot(s, key->tgid);

	if (!b || s->trail.targets[b - s->batch].phase_seq != key->phase)
		return;
	b->cell = *(const struct memtrail_cell *)v;
	b->phase = key->phase;
	b->have = true;
}

/* A target of the kernel's map: alive unless its last thread exited. */
static void batch_target(void *ctx, const void *tgid, const void *v)
{
	const struct memtrail_target *t = v;
	struct batch_cell *b = batch_slot(ctx, *(const uint32_t *)tgid);

	if (b && !(t->flags & MEMTRAIL_TARGET_EXITED))
		b->alive = true;
}

/*
 * The open phases' cells of all targets (CELLS) and which targets the kernel
 * holds unexited (LIVENESS): one batch read of each map, not a lookup per
 * target (10,000 idle processes were 10,000 system calls a sample). False
 * when the kernel has none: read one by one.
 */
static bool batch_read(struct session *s, bool liveness, bool cells)
{
	size_t n = s->trail.n_targets, i;

	if (s->no_batch || !n || (!liveness && !cells))
		return false;
	if (array__grow((void **)&s->batch, &s->cap_batch, n, sizeof(*s->batch)))
		return false;
	s->n_batch = n;
	for (i = 0; i < n; i++)
		s->batch[i].have = s->batch[i].alive = false;
	/* which live: the kernel's flags, not a /proc read per target */
	if (liveness && tracer__each_target(s->tracer, batch_target, s))
		return false;
	if (cells && tracer__each_cell(s->tracer, batch_cell, s)) {
		s->no_batch = true;	/* said once in -v: the kernel has no batch lookups */
		log__debug("cells read one by one: no batch lookups");
		return false;
	}
	return true;
}

struct dirty_names {
	struct session *s;
	size_t n;	/* names taken */
};

/* A target the kernel named: its levels changed since the last sample. */
static void dirty_target(void *ctx, const void *tgid, const void *v)
{
	struct dirty_names *d = ctx;
	struct trail_target *tt = session__live(d->s, *(const uint32_t *)tgid);

	(void)v;
	if (tt)
		tt->dirty = true;
	d->n++;
}

/*
 * Whether this sample reads every target's levels: where the kernel does
 * not name the changed ones, where it could not name one, or where so many
 * changed that one batch read of all cells beats a lookup each. Otherwise
 * only those flagged dirty, new, or in a new phase are read: an idle target
 * costs a sample nothing.
 */
static bool read_all(struct session *s)
{
	struct dirty_names d = { .s = s };
	bool all = false;

	if (s->no_dirty)
		return true;
	if (tracer__take_dirty(s->tracer, dirty_target, &d, &all)) {
		s->no_dirty = true;
		log__debug("every target read at each sample: no batch operations");
		return true;
	}
	return all || d.n * 4 > s->trail.n_targets;
}

void session__sample_all(struct session *s, uint64_t t_ms)
{
	bool liveness = check_liveness(s, t_ms);
	bool all = read_all(s);
	bool batched = batch_read(s, liveness, all);
	size_t i;

	for (i = 0; i < s->trail.n_targets; i++) {
		struct trail_target *tt = &s->trail.targets[i];
		uint32_t pid = tt->pid;
		bool in_batch = batched && i < s->n_batch;

		if (tt->exited || tt->end_ms)
			continue;
		if (all || tt->dirty || !tt->sampled || tt->sampled_seq != tt->phase_seq) {
			/*
			 * not in the batch (none yet, made while it ran, or a
			 * phase began since: events are read below): looked up alone
			 */
			if (in_batch && s->batch[i].have && s->batch[i].phase == tt->phase_seq)
				refresh_from(s, tt, &s->batch[i].cell, t_ms, false);
			else
				session__refresh(s, tt, t_ms, false);
			tt->dirty = false;
			tt->sampled = true;
			tt->sampled_seq = tt->phase_seq;
		}
		/* the kernel's flag says which may have ended; /proc says which did */
		if (!liveness || (in_batch && s->batch[i].alive) || proc__alive(pid))
			continue;
		/* its exit event may still wait in the ring buffer (which may add targets) */
		tracer__poll(s->tracer, 0);
		tt = session__live(s, pid);
		if (tt)
			end_target(s, tt, t_ms, NULL);	/* the exit event was lost: status unknown */
	}
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

void session__destroy(struct session *s)
{
	heap__destroy(s->heap);
	sites__destroy(s->sites);
	free(s->rescans);
	free(s->batch);
	devices__destroy(s->devices);
	tracer__destroy(s->tracer);
	trail__free(&s->trail);
	s->heap = NULL;
	s->sites = NULL;
	s->rescans = NULL;
	s->batch = NULL;
	s->devices = NULL;
	s->tracer = NULL;
}
