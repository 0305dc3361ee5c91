// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * A session's accelerator runtimes: device calls that failed (with the live
 * allocations at a device OOM), devices' sizes, runtimes probed late or
 * never, the dynamic linker's news, and the device probes opened.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "devspecs.h"
#include "format.h"
#include "kfeatures.h"
#include "kinds.h"
#include "log.h"
#include "proc.h"
#include "roots.h"
#include "sanitize.h"
#include "session_int.h"

/* live device allocations listed by size in a device OOM event */
#define DEVICE_LARGEST 32

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

static int by_site(const void *x, const void *y)
{
	const struct live_alloc *a = x, *b = y;

	if (a->a.phase != b->a.phase)
		return a->a.phase < b->a.phase ? -1 : 1;
	if (a->a.kind != b->a.kind)
		return a->a.kind < b->a.kind ? -1 : 1;
	return a->a.stack < b->a.stack ? -1 : a->a.stack > b->a.stack;
}

/*
 * The sites of L's allocations (device sites on): one per (phase, kind,
 * stack), holding what they held when the call failed; NULL without sites.
 */
static struct trail_sites *live_sites(struct session *s, const struct trail_target *tt,
				      struct live_list *l)
{
	struct trail_sites *ts;
	struct trail_site *site = NULL;
	char buf[32];
	size_t i;

	if (!s->sites || !l->n || !(ts = trail_sites__new()))
		return NULL;
	sites__harvest(s->sites);	/* their stacks resolved while the process lives */
	qsort(l->v, l->n, sizeof(*l->v), by_site);
	for (i = 0; i < l->n; i++) {
		const struct memtrail_dev_alloc *a = &l->v[i].a;

		if (!i || by_site(&l->v[i - 1], &l->v[i])) {
			if (!(site = trail_sites__add(ts)))
				break;
			site->kind = (int)a->kind;
			site->phase = strdup(trail__phase_name(tt, a->phase, buf, sizeof(buf)));
			site->phase_seq = a->phase;
			sites__stack_frames(s->sites, tt->pid, a->stack, site);
		}
		site->alloc_bytes += a->size;
		site->inuse_bytes += a->size;
		site->alloc_objects += 1;
		site->inuse_objects += 1;
		site->samples++;
	}
	trail_sites__sort(ts);
	return ts;
}

/*
 * The target's live device allocations when one failed for lack of memory:
 * totals per (phase, kind) and the largest, with the phase each was made in;
 * their sites into *SITES (NULL: none).
 */
static json_t *live_allocations(struct session *s, const struct trail_target *tt,
				uint32_t epoch, struct trail_sites **sites)
{
	struct live_list l = { .tt = tt };
	json_t *by = json_array(), *largest = json_array(), *o;
	uint64_t bytes = 0;
	char buf[32];
	size_t i, j;

	tracer__device_allocs(s->tracer, tt->pid, epoch, collect_alloc, &l);
	*sites = live_sites(s, tt, &l);
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

void session_on_device_fail(struct session *s, const struct memtrail_event_device *e)
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
		json_object_set_new(ev, "live_allocations",
				    live_allocations(s, tt, e->epoch, &s->device_oom_sites));
		log__warn("device out of memory: %u (%s) %s of %s on %s device %d failed with %s "
			  "in phase '%s'", tt->pid, tt->comm, fn, size,
			  devspecs__runtime_name(e->runtime), e->device, err ? err : "?", phase);
		if (s->hooks && s->hooks->device_oom) {
			session__refresh(s, tt, t_ms, true);
			s->hooks->device_oom(s, tt, ev);
		}
		trail_sites__free(s->device_oom_sites);
		s->device_oom_sites = NULL;
	} else {
		log__info("device call failed: %u (%s) %s returned %d (%s) in phase '%s'", tt->pid,
			  tt->comm, fn, e->rc, err ? err : "?", phase);
	}
	if (s->keep_events)
		session_add_event(s, ev);
	else
		json_decref(ev);
}

void session_on_device_total(struct session *s, const struct memtrail_event_device_total *e)
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
	session_add_event(s, ev);
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
		late(s, pid, name, session_probing() ? LATE_ENDED : LATE_STOPPING);
}

/*
 * The dynamic linker changed a target's libraries. Fresh (it mapped files
 * new to memtrail): scanned and probed now, while it runs on.
 */
void session_on_libs(struct session *s, const struct memtrail_event_libs *e, bool fresh)
{
	if (!session__live(s, e->hdr.tgid))
		return;
	/*
	 * gone before its files could be read, or read as memtrail stops (no
	 * probing then): what it mapped is said, not lost silently
	 */
	if (s->devices && fresh &&
	    (!session_probing() || devices__scan(s->devices, e->hdr.tgid) < 0))
		tracer__lib_unseen(s->tracer, e->hdr.tgid, on_unseen, s);
	else if (s->devices)
		devices__schedule(s->devices, e->hdr.tgid, session__now_ms(s), 0);
	session_rescan(s, e->hdr.tgid);
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
