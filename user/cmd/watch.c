// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * memtrail watch: a node-wide flight recorder. Every target's recent
 * timeline is kept in a bounded window; a snapshot file is written when its
 * memory cgroup comes under pressure and the moment the OOM killer chooses
 * it, and a verdict file when it dies by SIGKILL. Runs until stopped.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "array.h"
#include "cgroup.h"
#include "cmdopts.h"
#include "commands.h"
#include "container.h"
#include "kfeatures.h"
#include "format.h"
#include "kinds.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "opts.h"
#include "outfile.h"
#include "proc.h"
#include "sanitize.h"
#include "session.h"
#include "statusline.h"
#include "verdict.h"

#define DEFAULT_DIR "memtrail-snapshots"
#define DEFAULT_INTERVAL_MS 1000
#define DEFAULT_KEEP_S 60
#define DEFAULT_PRESSURE_PCT 90
#define DEFAULT_PRESSURE_EVERY_S 30
#define DEFAULT_PENDING 64
/* per target: phases listed (first and latest half) and phase names aggregated */
#define WATCH_PHASE_HISTORY 8
#define WATCH_PHASE_NAMES 8
/* memory.pressure "some avg10" at or above this, percent, is pressure */
#define PSI_SOME_PCT 10.0
/* how long a cgroup's nearest limit is taken as known */
#define LIMITS_TTL_MS 10000
#define SCAN_PERIOD_MS 2000
#define RETRY_MS 1000
/* least time between two device OOM snapshots of one process */
#define DEVICE_OOM_GAP_MS 1000
#define TOP_PROCS 10
#define PROCS_MAX 4096
#define OOM_NAMES 64
/* bytes per target besides its timeline window and phases (struct trail_target, strings) */
#define TARGET_BYTES 1024

struct watch_opts {
	struct target_opts t;	/* --cgroup only */
	struct engine_opts e;
	const char *dir;
	uint32_t interval_ms;
	uint32_t keep_s;
	uint32_t pressure_pct;
	uint32_t pressure_every_s;
	uint32_t pending;
	const char *metrics;	/* [ADDR:]PORT, NULL: no metrics */
	uint32_t metrics_expire_s;
};

/* A memory cgroup with a limit that holds targets: watched for pressure. */
struct watched {
	char *path;
	char *dir;				/* its directory, NULL if unknown */
	int64_t ev_max, ev_high, failcnt;	/* last seen; -1 unknown */
	uint64_t snapshot_ms;			/* last pressure snapshot; 0 none */
	bool used;
};

/* A target's cgroup and the limited cgroup above it (NULL: none has a limit). */
struct limit_of {
	char *path;
	char *limited;
	uint64_t until_ms;	/* looked up again after, limits may change */
	bool used;
};

struct pending {
	char *name;
	json_t *doc;
};

struct watch {
	struct session s;
	const struct watch_opts *o;
	struct watched *cg;
	size_t n_cg, cap_cg;
	struct limit_of *lim;
	size_t n_lim, cap_lim;
	struct pending *pend;
	size_t n_pend;
	uint64_t next_retry;	/* when pending ones are tried again */
	bool failing;		/* the last write failed: pending ones wait */
	uint64_t snapshots, verdicts, dropped;
	/* the OOM snapshot of each recent victim, for its verdict */
	struct { uint32_t pid; char name[128]; } oom_names[OOM_NAMES];
	/* the latest device OOM snapshots: one per process per DEVICE_OOM_GAP_MS */
	struct { uint32_t pid; uint64_t t_ms; } device_ooms[OOM_NAMES];
	size_t device_next;
	size_t oom_next;
	struct metrics *metrics;	/* NULL: no --metrics */
};

/* ---- writing files: atomically, 0600, kept in memory while the dir fails ---- */

static void utc_stamp(char *buf, size_t len, bool for_file)
{
	struct timespec ts;
	struct tm tm;
	char base[40];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(base, sizeof(base), for_file ? "%Y%m%dT%H%M%S" : "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, len, "%.31s.%03dZ", base, (int)(ts.tv_nsec / 1000000) % 1000);
}

static int write_one(struct watch *w, const struct pending *p)
{
	char path[PATH_MAX];
	int err;

	if (snprintf(path, sizeof(path), "%s/%s", w->o->dir, p->name) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	err = trail__write_json(p->doc, path);
	if (err == -ENOENT && !mkdir(w->o->dir, 0700))
		err = trail__write_json(p->doc, path);	/* the dir was removed */
	return err;
}

/* Write what waits, oldest first; stop at the first failure. */
static void flush_pending(struct watch *w)
{
	size_t done = 0;
	int err = 0;

	while (done < w->n_pend) {
		err = write_one(w, &w->pend[done]);
		if (err)
			break;
		log__info("wrote '%s/%s'", w->o->dir, w->pend[done].name);
		free(w->pend[done].name);
		json_decref(w->pend[done].doc);
		done++;
	}
	if (done) {
		memmove(w->pend, w->pend + done, (w->n_pend - done) * sizeof(*w->pend));
		w->n_pend -= done;
	}
	if (err && !w->failing)
		log__error("cannot write '%s/%s': %s; kept in memory (%zu waiting, at most %u), "
			   "retrying every second", w->o->dir, w->pend[0].name, strerror(-err),
			   w->n_pend, w->o->pending);
	else if (!err && w->failing)
		log__info("'%s' is writable again: every kept file is written", w->o->dir);
	w->failing = err != 0;
}

/* Queue DOC (taking its reference) as DIR/NAME and write what can be written. */
static void emit(struct watch *w, const char *name, json_t *doc)
{
	if (!doc) {
		w->dropped++;
		log__error("out of memory: '%s' is lost", name);
		return;
	}
	if (w->n_pend == w->o->pending) {
		log__error("too many files waiting to be written: '%s' is dropped",
			   w->pend[0].name);
		free(w->pend[0].name);
		json_decref(w->pend[0].doc);
		memmove(w->pend, w->pend + 1, (w->n_pend - 1) * sizeof(*w->pend));
		w->n_pend--;
		w->dropped++;
	}
	w->pend[w->n_pend].name = strdup(name);
	w->pend[w->n_pend].doc = doc;
	if (!w->pend[w->n_pend].name) {
		json_decref(doc);
		w->dropped++;
		return;
	}
	w->n_pend++;
	flush_pending(w);
}

/* ---- snapshots ---- */

static json_t *bytes_or_null(int64_t v)
{
	return v >= 0 ? json_integer(v) : json_null();
}

/* What /proc shows of PID now; the fields are null once its memory is gone. */
static json_t *status_json(uint32_t pid)
{
	struct proc_status st;

	if (proc__status(pid, &st))
		return json_null();	/* gone already */
	return json_pack("{s:s#, s:o, s:o, s:o, s:o, s:o}", "state", &st.state, 1,
			 "vm_rss", bytes_or_null(st.vm_rss), "rss_anon", bytes_or_null(st.rss_anon),
			 "rss_file", bytes_or_null(st.rss_file),
			 "rss_shmem", bytes_or_null(st.rss_shmem), "vm_data", bytes_or_null(st.vm_data));
}

struct proc_rss {
	uint32_t pid;
	int64_t rss;
};

static int by_rss_desc(const void *a, const void *b)
{
	const struct proc_rss *x = a, *y = b;

	return x->rss < y->rss ? 1 : x->rss > y->rss ? -1 : 0;
}

/* The largest processes in cgroup PATH and below, by VmRSS from /proc. */
static json_t *top_processes(const char *path)
{
	json_t *arr = json_array();
	struct proc_rss *v;
	uint32_t *pids;
	size_t n, i, m = 0;

	if (!path)
		return arr;
	pids = cgroup__procs(path, PROCS_MAX, &n);
	v = pids ? calloc(n ? n : 1, sizeof(*v)) : NULL;
	for (i = 0; v && i < n; i++) {
		struct proc_status st;

		if (!proc__status(pids[i], &st) && st.vm_rss >= 0)
			v[m++] = (struct proc_rss){ pids[i], st.vm_rss };
	}
	if (v)
		qsort(v, m, sizeof(*v), by_rss_desc);
	for (i = 0; v && i < m && i < TOP_PROCS; i++) {
		char comm[MEMTRAIL_COMM_LEN] = "?";
		char *cmdline = proc__cmdline(v[i].pid);

		proc__comm(v[i].pid, comm, sizeof(comm));
		json_array_append_new(arr, json_pack("{s:i, s:o, s:o, s:I}", "pid", v[i].pid,
						     "comm", sanitize__json(comm),
						     "cmdline", sanitize__json(cmdline),
						     "vm_rss", (json_int_t)v[i].rss));
		free(cmdline);
	}
	free(v);
	free(pids);
	return arr;
}

static void set_attribution(json_t *o, const char *cgroup, const char *pods_dir)
{
	json_t *a = container__json(cgroup, pods_dir);

	container__put(o, a);
	json_decref(a);
}

/*
 * A snapshot is a trail of one target (memtrail report reads it) with a
 * "snapshot" object: why and when, the target's container and pod, its
 * cgroup's figures, what /proc still shows, the largest processes there.
 * The target's phases end with the open one, marked "open".
 */
static json_t *snapshot_doc(struct watch *w, struct trail_target *tt, uint64_t t_ms,
			    const char *cgroup, json_t *snap)
{
	struct trail view = w->s.trail;
	struct trail_phase open;
	json_t *root, *target, *phase;
	char stamp[40];

	view.targets = tt;
	view.n_targets = 1;
	view.events = json_array();
	view.duration_ms = t_ms;
	tracer__lost(w->s.tracer, view.lost);
	root = trail__to_json(&view, true);
	json_decref(view.events);
	if (!root || !snap) {
		json_decref(root);
		json_decref(snap);
		return NULL;
	}
	target = json_array_get(json_object_get(root, "targets"), 0);
	session__open_phase(&w->s, tt, t_ms, &open);
	phase = trail__phase_json(&w->s.trail, &open);
	json_object_set_new(phase, "open", json_true());
	json_array_append_new(json_object_get(target, "phases"), phase);
	utc_stamp(stamp, sizeof(stamp), false);
	json_object_set_new(snap, "time", json_string(stamp));
	json_object_set_new(snap, "t_ms", json_integer(t_ms));
	json_object_set_new(snap, "pid", json_integer(tt->pid));
	json_object_set_new(snap, "comm", sanitize__json(tt->comm));
	json_object_set_new(snap, "phase", sanitize__json(tt->phase_name));
	json_object_set_new(snap, "keep_ms", json_integer(w->s.keep_ms));
	set_attribution(snap, tt->cgroup, w->o->e.pods_dir);
	if (!json_object_get(snap, "proc"))
		json_object_set_new(snap, "proc", status_json(tt->pid));
	json_object_set_new(snap, "cgroup", cgroup__memory_json(cgroup ? cgroup : tt->cgroup));
	json_object_set_new(snap, "top_processes", top_processes(cgroup ? cgroup : tt->cgroup));
	json_object_set_new(root, "snapshot", snap);
	return root;
}

static void file_name(char *buf, size_t len, const char *what, uint32_t pid)
{
	char stamp[40];

	utc_stamp(stamp, sizeof(stamp), true);
	snprintf(buf, len, "%s-%u-%s.json", what, pid, stamp);
}

static void on_oom(struct session *s, struct trail_target *tt, const struct memtrail_event_oom *e)
{
	struct watch *w = s->ctx;
	const struct verdict_facts *f = &tt->facts;
	char name[128], *cgroup;
	json_t *snap;

	json_t *proc = status_json(tt->pid);	/* first: the victim is dying */

	/* the cgroup at its limit, or (global OOM) the victim's own */
	cgroup = f->oom_cgroup ? f->oom_cgroup :
		 f->memcg_level >= 0 ? verdict__cgroup_up(tt->cgroup, f->memcg_level) : NULL;
	snap = json_pack("{s:s, s:{s:s, s:o, s:I, s:I, s:{s:i, s:o}, s:{s:I, s:I, s:I}}}",
			 "trigger", "oom_kill",
			 "oom", "scope", f->memcg_level >= 0 ? "cgroup" : "global",
			 "cgroup", sanitize__json(cgroup),
			 "usage", (json_int_t)f->usage, "limit", (json_int_t)f->limit,
			 "trigger", "pid", f->trigger_pid, "comm", sanitize__json(f->trigger_comm),
			 "victim_rss", "anon", (json_int_t)e->rss_anon, "file", (json_int_t)e->rss_file,
			 "shmem", (json_int_t)e->rss_shmem);
	if (snap)
		json_object_set_new(snap, "proc", proc);
	else
		json_decref(proc);
	file_name(name, sizeof(name), "oom", tt->pid);
	emit(w, name, snapshot_doc(w, tt, f->oom_ms, cgroup, snap));
	w->snapshots++;
	if (w->metrics)
		metrics__snapshot(w->metrics, "oom");
	w->oom_names[w->oom_next].pid = tt->pid;
	snprintf(w->oom_names[w->oom_next].name, sizeof(w->oom_names[0].name), "%s", name);
	w->oom_next = (w->oom_next + 1) % OOM_NAMES;
	if (cgroup != f->oom_cgroup)
		free(cgroup);
}

/*
 * A device allocation failed for lack of memory: the process lives on (or
 * aborts), so the snapshot shows its device memory by phase, host beside it.
 */
static void on_device_oom(struct session *s, struct trail_target *tt, json_t *ev)
{
	struct watch *w = s->ctx;
	uint64_t t_ms = json_integer_value(json_object_get(ev, "t_ms"));
	char name[128];
	json_t *snap;
	size_t i;

	for (i = 0; i < OOM_NAMES; i++)
		if (w->device_ooms[i].pid == tt->pid &&
		    t_ms < w->device_ooms[i].t_ms + DEVICE_OOM_GAP_MS)
			return;	/* a retry loop: one snapshot says it */
	w->device_ooms[w->device_next].pid = tt->pid;
	w->device_ooms[w->device_next].t_ms = t_ms;
	w->device_next = (w->device_next + 1) % OOM_NAMES;
	snap = json_pack("{s:s, s:O}", "trigger", "device_oom", "device_oom", ev);
	file_name(name, sizeof(name), "device-oom", tt->pid);
	emit(w, name, snapshot_doc(w, tt, t_ms, NULL, snap));
	w->snapshots++;
	if (w->metrics)
		metrics__snapshot(w->metrics, "device_oom");
}

/* ---- pressure ---- */

static struct watched *watched_get(struct watch *w, const char *path)
{
	struct watched *c;
	size_t i;

	for (i = 0; i < w->n_cg; i++)
		if (!strcmp(w->cg[i].path, path))
			return &w->cg[i];
	if (array__grow((void **)&w->cg, &w->cap_cg, w->n_cg + 1, sizeof(*c)))
		return NULL;
	c = &w->cg[w->n_cg];
	memset(c, 0, sizeof(*c));
	c->path = strdup(path);
	if (!c->path)
		return NULL;
	c->dir = cgroup__memory_dir(path);
	c->ev_max = c->ev_high = c->failcnt = -1;
	w->n_cg++;
	return c;
}

/* The limited cgroup above a target's cgroup, remembered per path a while. */
static const char *limited_of(struct watch *w, const char *path, uint64_t t_ms)
{
	struct limit_of *l;
	size_t i;

	if (!path)
		return NULL;
	for (i = 0; i < w->n_lim; i++) {
		l = &w->lim[i];
		if (strcmp(l->path, path))
			continue;
		if (t_ms >= l->until_ms) {
			free(l->limited);
			l->limited = cgroup__limited(path);
			l->until_ms = t_ms + LIMITS_TTL_MS;
		}
		l->used = true;
		return l->limited;
	}
	if (array__grow((void **)&w->lim, &w->cap_lim, w->n_lim + 1, sizeof(*l)))
		return NULL;
	l = &w->lim[w->n_lim];
	l->path = strdup(path);
	if (!l->path)
		return NULL;
	l->limited = cgroup__limited(path);
	l->until_ms = t_ms + LIMITS_TTL_MS;
	l->used = true;
	w->n_lim++;
	return l->limited;
}

static bool under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (!path)
		return false;
	if (!strcmp(dir, "/"))
		return true;
	return !strncmp(path, dir, n) && (path[n] == '/' || !path[n]);
}

/* The set of limited cgroups that hold live targets, anew. */
static void refresh_cgroups(struct watch *w, uint64_t t_ms)
{
	size_t i, j;

	for (i = 0; i < w->n_lim; i++)
		w->lim[i].used = false;
	for (i = 0; i < w->n_cg; i++)
		w->cg[i].used = false;
	for (i = 0; i < w->s.trail.n_targets; i++) {
		const struct trail_target *tt = &w->s.trail.targets[i];
		const char *lim;
		struct watched *c;

		if (tt->end_ms || !(lim = limited_of(w, tt->cgroup, t_ms)))
			continue;
		c = watched_get(w, lim);
		if (c)
			c->used = true;
	}
	for (i = j = 0; i < w->n_lim; i++) {
		if (w->lim[i].used) {
			w->lim[j++] = w->lim[i];
		} else {
			free(w->lim[i].path);
			free(w->lim[i].limited);
		}
	}
	w->n_lim = j;
	for (i = j = 0; i < w->n_cg; i++) {
		if (w->cg[i].used) {
			w->cg[j++] = w->cg[i];
		} else {
			free(w->cg[i].path);
			free(w->cg[i].dir);
		}
	}
	w->n_cg = j;
}

static int64_t resident(const struct trail_target *tt)
{
	return tt->current[MEMTRAIL_KIND_RSS_ANON] + tt->current[MEMTRAIL_KIND_RSS_FILE] +
	       tt->current[MEMTRAIL_KIND_RSS_SHMEM];
}

/* The live target with the most resident memory in cgroup PATH or below. */
static struct trail_target *largest_in(struct watch *w, const char *path)
{
	struct trail_target *best = NULL;
	size_t i;

	for (i = 0; i < w->s.trail.n_targets; i++) {
		struct trail_target *tt = &w->s.trail.targets[i];

		if (!tt->end_ms && under(tt->cgroup, path) && (!best || resident(tt) > resident(best)))
			best = tt;
	}
	return best;
}

static void pressure_snapshot(struct watch *w, struct watched *c, struct trail_target *tt,
			      uint64_t t_ms, const char *reason, int64_t usage, int64_t limit)
{
	char name[128];
	json_t *snap;

	if (c->snapshot_ms && t_ms - c->snapshot_ms < w->o->pressure_every_s * 1000ULL)
		return;
	c->snapshot_ms = t_ms ? t_ms : 1;
	snap = json_pack("{s:s, s:{s:s, s:o, s:I, s:o}}", "trigger", "pressure",
			 "pressure", "reason", reason, "cgroup", sanitize__json(c->path), "usage", (json_int_t)usage,
			 "limit", limit >= 0 ? json_integer(limit) : json_null());
	file_name(name, sizeof(name), "pressure", tt->pid);
	emit(w, name, snapshot_doc(w, tt, t_ms, c->path, snap));
	w->snapshots++;
	if (w->metrics)
		metrics__snapshot(w->metrics, "pressure");
}

static void on_pressure(struct session *s, struct trail_target *tt,
			const struct memtrail_event_pressure *e)
{
	struct watch *w = s->ctx;
	uint64_t t_ms = session__ms(s, e->hdr.ts_ns);
	const char *lim = limited_of(w, tt->cgroup, t_ms);
	struct watched *c = lim ? watched_get(w, lim) : NULL;

	if (!c || !w->o->pressure_pct)
		return;
	session__refresh(s, tt, t_ms, true);
	pressure_snapshot(w, c, tt, t_ms, "reclaim", e->usage, e->limit ? (int64_t)e->limit : -1);
}

/* Usage near the limit, memory.events or failcnt growth, PSI: per limited cgroup. */
static void check_pressure(struct watch *w, uint64_t t_ms)
{
	size_t i;

	for (i = 0; i < w->n_cg; i++) {
		struct watched *c = &w->cg[i];
		struct cgroup_memory m;
		const char *reason = NULL;
		struct trail_target *tt;

		if (!c->dir || cgroup__read_memory(c->dir, &m))
			continue;
		if (m.limit > 0 && m.usage * 100 >= m.limit * (int64_t)w->o->pressure_pct)
			reason = "usage";
		else if ((c->ev_max >= 0 && m.ev_max > c->ev_max) ||
			 (c->ev_high >= 0 && m.ev_high > c->ev_high) ||
			 (c->failcnt >= 0 && m.failcnt > c->failcnt))
			reason = "memory_events";
		else if (m.psi_some_avg10 >= PSI_SOME_PCT)
			reason = "psi";
		c->ev_max = m.ev_max;
		c->ev_high = m.ev_high;
		c->failcnt = m.failcnt;
		if (!reason || !(tt = largest_in(w, c->path)))
			continue;
		pressure_snapshot(w, c, tt, t_ms, reason, m.usage, m.limit >= 0 ? m.limit : m.high);
	}
}

/* ---- verdicts ---- */

static const char *oom_snapshot_of(struct watch *w, uint32_t pid)
{
	size_t i;

	for (i = 0; i < OOM_NAMES; i++)
		if (w->oom_names[i].pid == pid && w->oom_names[i].name[0])
			return w->oom_names[i].name;
	return NULL;
}

static void on_ended(struct session *s, struct trail_target *tt)
{
	struct watch *w = s->ctx;
	const struct trail_phase *last;
	char name[128], stamp[40], line[1024], who[600], comm[SANITIZE_LEN(MEMTRAIL_COMM_LEN)];
	char text[sizeof(line) + sizeof(who) + sizeof(comm) + 32];
	const char *snapshot;
	json_t *doc, *peaks;
	size_t n;
	int k, len;

	if (!tt->verdict)
		return;
	n = phase_log__count(&tt->phases);
	last = n ? phase_log__at(&tt->phases, n - 1) : NULL;
	snapshot = oom_snapshot_of(w, tt->pid);
	utc_stamp(stamp, sizeof(stamp), false);
	peaks = json_object();
	for (k = 0; k < MEMTRAIL_KIND_MAX; k++)
		if (w->s.trail.kinds & (1U << k))
			json_object_set_new(peaks, kind__name(k), json_integer(tt->peak[k]));
	doc = json_pack("{s:i, s:s, s:s, s:I, s:i, s:o, s:o, s:o, s:{s:i}, s:o, s:O, s:o, s:o}",
			"memtrail", MEMTRAIL_TRAIL_VERSION, "type", "verdict", "time", stamp,
			"t_ms", (json_int_t)tt->end_ms, "pid", tt->pid, "comm", sanitize__json(tt->comm),
			"cmdline", sanitize__json(tt->cmdline),
			"cgroup", sanitize__json(tt->cgroup),
			"exit", "signal", tt->exit_signal,
			"phase", sanitize__json(last ? last->name : NULL),
			"verdict", tt->verdict,
			"peaks", peaks,
			"snapshot", sanitize__json(snapshot));
	if (doc)
		set_attribution(doc, tt->cgroup, w->o->e.pods_dir);
	verdict__line(line, sizeof(line), tt->verdict);
	container__describe(who, sizeof(who), doc ? doc : tt->verdict);
	/* the file first: a stdout nobody reads must not keep it from the disk */
	file_name(name, sizeof(name), "verdict", tt->pid);
	emit(w, name, doc);
	statusline__clear();
	/* one line whatever the names: verdict__line and container__describe sanitize theirs */
	len = snprintf(text, sizeof(text), "verdict: %u (%s)%s%s: %s\n", tt->pid,
		       sanitize__str(comm, sizeof(comm), tt->comm), who[0] ? " " : "", who, line);
	log__line(STDOUT_FILENO, text, len < (int)sizeof(text) ? (size_t)len : sizeof(text) - 1);
	w->verdicts++;
	if (w->metrics)
		metrics__verdict(w->metrics, json_string_value(json_object_get(tt->verdict, "cause")));
}

/* Forget targets that ended: watch keeps only the living (metrics, a while). */
static void sweep(struct watch *w, uint64_t now_ms)
{
	size_t i = 0;

	/* a pass over every target only when one ended: watch wakes 20 times a second */
	if (!w->s.ended)
		return;
	w->s.ended = 0;
	while (i < w->s.trail.n_targets) {
		if (w->s.trail.targets[i].end_ms) {
			if (w->metrics)
				metrics__ended(w->metrics, &w->s.trail.targets[i], now_ms);
			trail__remove_target(&w->s.trail, &w->s.trail.targets[i]);
		} else {
			i++;
		}
	}
}

/* ---- options ---- */

static double memory_bound_mib(const struct watch_opts *o)
{
	double samples = (double)o->keep_s * 1000 / o->interval_ms + 2;
	double per = TARGET_BYTES + samples * sizeof(struct trail_sample) +
		     WATCH_PHASE_HISTORY * sizeof(struct trail_phase) +
		     (WATCH_PHASE_NAMES + 1) * sizeof(struct phase_agg);

	return per * o->e.max_targets / (1024.0 * 1024.0);
}

static const struct opt target_rows[] = {
	CMDOPTS_ROW_CGROUP,
	OPT_ROW_END,
};

static const struct opt watch_rows[] = {
	OPT_ROW_STR("output", 'o', "DIR", struct watch_opts, dir,
		    "where files go, created if missing (default " DEFAULT_DIR ")"),
	OPT_ROW_U32("interval", 'i', "MS", struct watch_opts, interval_ms, 10, 60000,
		    "sample interval", 0),
	OPT_ROW_U32("keep", 'k', "SECONDS", struct watch_opts, keep_s, 1, 3600,
		    "timeline kept per process", 0),
	OPT_ROW_U32("pressure", 0, "PCT", struct watch_opts, pressure_pct, 0, 100,
		    "usage/limit that counts as pressure, {range}; 0 turns pressure snapshots "
		    "off", 0),
	OPT_ROW_U32("pressure-every", 0, "S", struct watch_opts, pressure_every_s, 1, 86400,
		    "least time between two pressure snapshots of one cgroup", 0),
	OPT_ROW_U32("pending", 0, "N", struct watch_opts, pending, 1, 10000,
		    "files kept in memory while DIR cannot be written, {range}; beyond, the "
		    "oldest are dropped", 0),
	OPT_ROW_STR("metrics", 0, "[ADDR:]PORT", struct watch_opts, metrics,
		    "serve Prometheus metrics on http://ADDR:PORT/metrics (off by default; ADDR "
		    "127.0.0.1 unless given, e.g. 0.0.0.0:9464 for every interface)"),
	OPT_ROW_U32("metrics-expire", 0, "S", struct watch_opts, metrics_expire_s, 1, 86400,
		    "an ended process's series stay S seconds, {range}; at most "
		    OPT_XSTR(METRICS_GONE_MAX) " ended processes are kept", 0),
	OPT_ROW_END,
};

static void usage(FILE *f, const struct opts_cmd *c)
{
	struct watch_opts d = { .interval_ms = DEFAULT_INTERVAL_MS, .keep_s = DEFAULT_KEEP_S,
				.e.max_targets = SESSION_MAX_TARGETS };
	char memory[512];

	fprintf(f,
"usage: memtrail watch [options] [--cgroup PATH ...]\n"
"\n"
"A flight recorder for the node (or the given cgroups), until Ctrl-C/SIGTERM.\n"
"It keeps each process's recent memory timeline and writes, to DIR, one JSON\n"
"file each (atomically, mode 0600):\n"
"  pressure-PID-TIME.json  a cgroup nears its limit: reclaim started, usage at\n"
"                          --pressure percent of the limit, memory.events\n"
"                          high/max or failcnt grew, or PSI some avg10 >= %.0f%%;\n"
"                          of the cgroup's largest process, once per\n"
"                          --pressure-every\n"
"  oom-PID-TIME.json       the OOM killer chose PID, written before it dies\n"
"  device-oom-PID-TIME.json a CUDA or Neuron allocation of PID ran out of device\n"
"                          memory: the call, its site, live device allocations\n"
"  verdict-PID-TIME.json   PID died by SIGKILL: why (oom_cgroup, oom_global,\n"
"                          signal with its sender, unknown); also a line on\n"
"                          stdout\n"
"Snapshots read back with 'memtrail report FILE'. Containers and pods are named\n"
"from cgroup paths and the kubelet's log directory.\n"
"\n", PSI_SOME_PCT);
	opts__help(f, c);
	snprintf(memory, sizeof(memory),
		 "Memory: bounded by --max-targets, --keep and --interval: in the kernel about "
		 "930 bytes per process (and 16 per CPU for each live one); in memtrail at most "
		 "about %.0f MiB at the defaults (1 KiB + 88 bytes per kept sample + %d phases "
		 "per process), far less for idle processes, which store a sample only when a "
		 "level changes. Needs root and BTF.", memory_bound_mib(&d), WATCH_PHASE_HISTORY);
	fputc('\n', f);
	opts__wrap(f, memory, 0);
}

/* 0, 1 when --help was printed, or -EINVAL once the error is said. */
static int parse_opts(int argc, char **argv, struct watch_opts *o)
{
	const struct opt_group groups[] = {
		{ "options", target_rows, &o->t },
		{ NULL, watch_rows, o },
		{ NULL, cmdopts__engine, &o->e },
		{ NULL, cmdopts__tail, NULL },
	};
	const struct opts_cmd cmd = { .name = "watch", .groups = groups,
				      .n_groups = sizeof(groups) / sizeof(groups[0]),
				      .usage = usage, .no_args = true };
	int first;

	o->dir = DEFAULT_DIR;
	o->interval_ms = DEFAULT_INTERVAL_MS;
	o->keep_s = DEFAULT_KEEP_S;
	o->pressure_pct = DEFAULT_PRESSURE_PCT;
	o->pressure_every_s = DEFAULT_PRESSURE_EVERY_S;
	o->pending = DEFAULT_PENDING;
	o->metrics_expire_s = DEFAULT_METRICS_EXPIRE_S;
	cmdopts__engine_defaults(&o->e);
	return opts__parse(&cmd, argc, argv, &first);
}

/*
 * The output directory exists (made 0700 when missing) and takes a file. A
 * symbolic link there is followed only when it is memtrail's user's or
 * root's: one someone else planted (a folder shared with a container) would
 * send root's files where they chose.
 */
static int check_dir(const char *dir)
{
	char probe[PATH_MAX];
	struct stat st;
	int err;

	if (!lstat(dir, &st) && S_ISLNK(st.st_mode) && st.st_uid && st.st_uid != geteuid()) {
		log__error("snapshot directory '%s' is a symbolic link of user %u, not followed: "
			   "give the folder it names", dir, st.st_uid);
		return -1;
	}
	if (mkdir(dir, 0700) && errno != EEXIST) {
		log__error("cannot create snapshot directory '%s': %s", dir, strerror(errno));
		return -1;
	}
	if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
		log__error("snapshot directory '%s' is not a directory", dir);
		return -1;
	}
	if (snprintf(probe, sizeof(probe), "%s/.memtrail-probe", dir) >= (int)sizeof(probe))
		err = -ENAMETOOLONG;
	else
		err = outfile__probe(probe);
	if (err) {
		log__error("cannot write to snapshot directory '%s': %s", dir, strerror(-err));
		return -1;
	}
	return 0;
}

static int build_config(const struct watch_opts *o, struct tracer_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cmdopts__engine_config(&o->e, cfg);
	return cmdopts__targets(&o->t, cfg);
}

/* After each sample (loop.h): the metrics page, memory pressure. */
static int watch_sampled(void *ctx, uint64_t now)
{
	struct watch *w = ctx;

	if (w->metrics) {
		uint64_t lost[MEMTRAIL_LOST_MAX];

		tracer__lost(w->s.tracer, lost);
		metrics__update(w->metrics, &w->s.trail, lost, now);
	}
	if (w->o->pressure_pct) {
		refresh_cgroups(w, now);
		check_pressure(w, now);
	}
	return 0;
}

/* Each turn: snapshots not written yet tried again, ended targets swept. */
static int watch_turn(void *ctx, uint64_t now)
{
	struct watch *w = ctx;

	if (w->n_pend && now >= w->next_retry) {
		flush_pending(w);
		w->next_retry = now + RETRY_MS;
	}
	sweep(w, now);
	return 0;
}

static void free_watch(struct watch *w)
{
	size_t i;

	for (i = 0; i < w->n_cg; i++) {
		free(w->cg[i].path);
		free(w->cg[i].dir);
	}
	for (i = 0; i < w->n_lim; i++) {
		free(w->lim[i].path);
		free(w->lim[i].limited);
	}
	for (i = 0; i < w->n_pend; i++) {
		free(w->pend[i].name);
		json_decref(w->pend[i].doc);
	}
	free(w->cg);
	free(w->lim);
	free(w->pend);
	metrics__destroy(w->metrics);
	session__destroy(&w->s);
}

int cmd_watch(int argc, char **argv)
{
	static const struct session_hooks hooks = {
		.oom = on_oom, .pressure = on_pressure, .ended = on_ended,
		.device_oom = on_device_oom,
	};
	struct loop_hooks loop = { .status = true, .until_signal = true,
				   .sampled = watch_sampled, .turn = watch_turn };
	struct watch_opts o = { 0 };
	struct tracer_config cfg;
	struct watch w = { 0 };
	uint64_t lost[MEMTRAIL_LOST_MAX];
	int ret = 1, k;

	k = parse_opts(argc, argv, &o);
	if (k)
		return k > 0 ? 0 : 2;
	/* before the directory is made: nothing is left by a run that cannot trace */
	if (tracer__check_caps() || build_config(&o, &cfg) || check_dir(o.dir))
		return 1;
	w.o = &o;
	w.pend = calloc(o.pending, sizeof(*w.pend));
	if (!w.pend || trail__init(&w.s.trail)) {
		log__error("out of memory");
		free(w.pend);
		return 1;
	}
	w.s.trail.interval_ms = o.interval_ms;
	w.s.trail.phase_history = WATCH_PHASE_HISTORY;
	w.s.trail.phase_names = WATCH_PHASE_NAMES;
	w.s.trail.kinds = kind__sourced();
	w.s.trail.command = strdup(o.t.n_cgroups ? "watch cgroups" : "watch all");
	w.s.keep_ms = o.keep_s * 1000ULL;
	w.s.hooks = &hooks;
	w.s.ctx = &w;
	w.s.pods_dir = o.e.pods_dir;
	session__install_signals();
	w.s.t0_ns = session__mono_ns();
	trail__set_started(&w.s.trail);
	if (o.metrics) {
		/* a bad address or a port in use: said before any BPF is loaded */
		struct metrics_config mc = { .listen = o.metrics, .pods_dir = o.e.pods_dir,
					     .expire_s = o.metrics_expire_s };

		if (metrics__open(&w.metrics, &mc))
			goto out;
	}
	if (tracer__open(&w.s.tracer, &cfg, session__on_event, &w.s))
		goto out;
	w.s.trail.kernel = features__json(tracer__features(w.s.tracer));
	if (tracer__scan(w.s.tracer))
		goto out;
	tracer__poll(w.s.tracer, 0);
	if (session__open_devices(&w.s, o.e.no_devices))
		goto out;
	if (w.metrics)
		metrics__update(w.metrics, &w.s.trail, NULL, 0);
	log__info("tracing %s (%zu processes; kernel maps %.1f MiB); snapshots and verdicts "
		  "to '%s'; Ctrl-C to stop", o.t.n_cgroups ? "the given cgroups" : "all processes",
		  w.s.live, tracer__map_bytes(w.s.tracer) / 1048576.0, o.dir);
	statusline__start(true);
	loop.interval_ms = o.interval_ms;
	loop.scan_ms = o.t.n_cgroups ? SCAN_PERIOD_MS : 0;
	(void)loop__run(&w.s, &loop, &w);	/* a failure to read events is said */
	statusline__stop();
	if (w.n_pend)
		flush_pending(&w);
	tracer__lost(w.s.tracer, lost);
	ret = 0;
	log__info("stopped: %llu snapshots, %llu verdicts; %zu not written, %llu dropped",
		  (unsigned long long)w.snapshots, (unsigned long long)w.verdicts, w.n_pend,
		  (unsigned long long)w.dropped);
	for (k = 0; k < MEMTRAIL_LOST_MAX; k++)
		if (lost[k])
			log__warn("lost %s: %llu", trail__lost_name(k), (unsigned long long)lost[k]);
	if (w.n_pend || w.dropped) {
		log__error("%zu snapshot or verdict files could not be written to '%s'",
			   w.n_pend + (size_t)w.dropped, o.dir);
		ret = 1;
	}
out:
	free_watch(&w);
	return ret;
}
