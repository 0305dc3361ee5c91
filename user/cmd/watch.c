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
#include "clock.h"
#include "cmdopts.h"
#include "commands.h"
#include "container.h"
#include "format.h"
#include "kfeatures.h"
#include "kinds.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "opts.h"
#include "outfile.h"
#include "proc.h"
#include "sanitize.h"
#include "session.h"
#include "sites.h"
#include "statusline.h"
#include "verdict.h"
#include "watch_int.h"

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

/* PID's top site, where it is a target with sites (null otherwise). */
static json_t *top_site_of(struct watch *w, uint32_t pid)
{
	struct trail_target *tt = session__live(&w->s, pid);
	struct trail_sites *ts;
	size_t left_out;
	json_t *top;

	if (!tt || !(ts = watch_sites_of(w, tt, NULL, &left_out)))
		return json_null();
	top = watch_top_site(ts, -1);
	trail_sites__free(ts);
	return top;
}

/* The largest processes in cgroup PATH and below, by VmRSS from /proc, with their top sites. */
static json_t *top_processes(struct watch *w, const char *path)
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
		json_array_append_new(arr, json_pack("{s:i, s:o, s:o, s:I, s:o}", "pid", v[i].pid,
						     "comm", sanitize__json(comm),
						     "cmdline", sanitize__json(cmdline),
						     "vm_rss", (json_int_t)v[i].rss,
						     "top_site", top_site_of(w, v[i].pid)));
		free(cmdline);
	}
	free(v);
	free(pids);
	return arr;
}

static void set_attribution(json_t *o, const char *cgroup, const char *pods_dir)
{
	struct container_attr a;

	container__put(o, container__attr(cgroup, pods_dir, &a) ? NULL : &a);
}

/*
 * A snapshot is a trail of one target (memtrail report reads it) with a
 * "snapshot" object: why and when, the target's container and pod, its
 * cgroup's figures, what /proc still shows, the largest processes there.
 * The target's phases end with the open one, marked "open"; its allocation
 * sites are those holding the most live bytes now, the top one (of TOP_KIND,
 * -1: any) also named in "top_site" (and kept in w->last_top for a verdict).
 */
json_t *watch_snapshot_doc(struct watch *w, struct trail_target *tt, uint64_t t_ms,
			   const char *cgroup, json_t *snap, struct trail_sites *extra, int top_kind)
{
	struct trail view = w->s.trail;
	struct trail_sites *saved = tt->sites, *ts = NULL;
	struct trail_phase open;
	json_t *root, *target, *phase;
	size_t left_out = 0;
	char stamp[40];

	json_decref(w->last_top);
	w->last_top = NULL;
	if (w->s.sites) {
		sites__harvest(w->s.sites);	/* the kernel's figures as they are now */
		ts = watch_sites_of(w, tt, extra, &left_out);
	}
	view.targets = tt;
	view.n_targets = 1;
	view.events = json_array();
	view.duration_ms = t_ms;
	tracer__lost(w->s.tracer, view.lost);
	tt->sites = ts;
	root = trail__to_json(&view, true);
	tt->sites = saved;
	json_decref(view.events);
	if (!root || !snap) {
		json_decref(root);
		json_decref(snap);
		trail_sites__free(ts);
		return NULL;
	}
	if (w->s.sites) {
		w->last_top = watch_top_site(ts, top_kind);
		json_object_set(snap, "top_site", w->last_top);
		json_object_set_new(snap, "sites", json_pack("{s:I, s:I, s:I, s:I}",
							     "kept", (json_int_t)(ts ? ts->n : 0),
							     "left_out", (json_int_t)left_out,
							     "deep_from",
							     (json_int_t)w->o->deep_from,
							     "sites_from",
							     (json_int_t)w->o->sites_from));
	}
	trail_sites__free(ts);
	target = json_array_get(json_object_get(root, "targets"), 0);
	session__open_phase(&w->s, tt, t_ms, &open);
	phase = trail__phase_json(&w->s.trail, &open);
	json_object_set_new(phase, "open", json_true());
	json_array_append_new(json_object_get(target, "phases"), phase);
	watch_utc_stamp(stamp, sizeof(stamp), false);
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
	json_object_set_new(snap, "top_processes", top_processes(w, cgroup ? cgroup : tt->cgroup));
	json_object_set_new(root, "snapshot", snap);
	return root;
}

void watch_file_name(char *buf, size_t len, const char *what, uint32_t pid)
{
	char stamp[40];

	watch_utc_stamp(stamp, sizeof(stamp), true);
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
	watch_file_name(name, sizeof(name), "oom", tt->pid);
	watch_emit(w, name, watch_snapshot_doc(w, tt, f->oom_ms, cgroup, snap, NULL, -1));
	w->snapshots++;
	if (w->metrics)
		metrics__snapshot(w->metrics, "oom");
	w->oom_names[w->oom_next].pid = tt->pid;
	snprintf(w->oom_names[w->oom_next].name, sizeof(w->oom_names[0].name), "%s", name);
	json_decref(w->oom_names[w->oom_next].top);
	w->oom_names[w->oom_next].top = json_incref(w->last_top);
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
	watch_file_name(name, sizeof(name), "device-oom", tt->pid);
	/* its device allocations' sites as they were at the failure, host ones now */
	watch_emit(w, name, watch_snapshot_doc(w, tt, t_ms, NULL, snap, s->device_oom_sites,
					       kind__from_name(json_string_value(
						       json_object_get(ev, "kind")))));
	watch_kube_device_oom(w, tt, ev, w->last_top);
	w->snapshots++;
	if (w->metrics)
		metrics__snapshot(w->metrics, "device_oom");
}

/* ---- verdicts ---- */

/* The OOM snapshot of PID (NULL: none), and its top site then (*TOP, NULL: none). */
static const char *oom_snapshot_of(struct watch *w, uint32_t pid, json_t **top)
{
	size_t i;

	*top = NULL;
	for (i = 0; i < OOM_NAMES; i++)
		if (w->oom_names[i].pid == pid && w->oom_names[i].name[0]) {
			*top = w->oom_names[i].top;
			return w->oom_names[i].name;
		}
	return NULL;
}

/*
 * The top site a verdict names: the OOM snapshot's (the figures at the
 * kill), else as they stand at the exit. A new reference; null for none.
 */
static json_t *verdict_top_site(struct watch *w, struct trail_target *tt, json_t *oom_top)
{
	struct trail_sites *ts;
	size_t left_out;
	json_t *top;

	if (oom_top)
		return json_incref(oom_top);
	if (!w->s.sites)
		return json_null();
	sites__harvest(w->s.sites);
	ts = watch_sites_of(w, tt, NULL, &left_out);
	top = watch_top_site(ts, -1);
	trail_sites__free(ts);
	return top;
}

static void on_ended(struct session *s, struct trail_target *tt)
{
	struct watch *w = s->ctx;
	const struct trail_phase *last;
	char name[128], stamp[40], line[1024], who[600], comm[SANITIZE_LEN(MEMTRAIL_COMM_LEN)];
	char text[sizeof(line) + sizeof(who) + sizeof(comm) + 600], top_text[600];
	const char *snapshot;
	struct container_attr attr;
	json_t *doc, *peaks, *oom_top, *top;
	bool has_attr;
	size_t n;
	int k, len;

	if (!tt->verdict)
		return;
	has_attr = !container__attr(tt->cgroup, w->o->e.pods_dir, &attr);
	n = phase_log__count(&tt->phases);
	last = n ? phase_log__at(&tt->phases, n - 1) : NULL;
	snapshot = oom_snapshot_of(w, tt->pid, &oom_top);
	top = verdict_top_site(w, tt, oom_top);
	watch_top_phrase(top, top_text, sizeof(top_text));
	watch_utc_stamp(stamp, sizeof(stamp), false);
	peaks = json_object();
	for (k = 0; k < MEMTRAIL_KIND_MAX; k++)
		if (w->s.trail.kinds & (1U << k))
			json_object_set_new(peaks, kind__name(k), json_integer(tt->peak[k]));
	doc = json_pack("{s:i, s:s, s:s, s:I, s:i, s:o, s:o, s:o, s:{s:i}, s:o, s:o, s:o, s:o, "
			"s:o}",
			"memtrail", MEMTRAIL_TRAIL_VERSION, "type", "verdict", "time", stamp,
			"t_ms", (json_int_t)tt->end_ms, "pid", tt->pid, "comm", sanitize__json(tt->comm),
			"cmdline", sanitize__json(tt->cmdline),
			"cgroup", sanitize__json(tt->cgroup),
			"exit", "signal", tt->exit_signal,
			"phase", sanitize__json(last ? last->name : NULL),
			"verdict", verdict__json(tt->verdict),
			"peaks", peaks,
			"snapshot", sanitize__json(snapshot),
			"top_site", top ? top : json_null());
	if (doc)
		container__put(doc, has_attr ? &attr : NULL);
	verdict__line(line, sizeof(line), tt->verdict);
	/* the target's own container and pod (the verdict's, out of memory) */
	container__describe(who, sizeof(who), doc ? (has_attr ? &attr : NULL) : tt->verdict->attr);
	/* the file first: a stdout nobody reads must not keep it from the disk */
	watch_file_name(name, sizeof(name), "verdict", tt->pid);
	watch_emit(w, name, doc);
	statusline__clear();
	/* one line whatever the names: verdict__line and container__describe sanitize theirs */
	len = snprintf(text, sizeof(text), "verdict: %u (%s)%s%s: %s%s%s\n", tt->pid,
		       sanitize__str(comm, sizeof(comm), tt->comm), who[0] ? " " : "", who, line,
		       top_text[0] ? "; " : "", top_text);
	log__line(STDOUT_FILENO, text, len < (int)sizeof(text) ? (size_t)len : sizeof(text) - 1);
	watch_kube_verdict(w, tt, has_attr ? &attr : NULL, line, top_text);
	w->verdicts++;
	if (w->metrics)
		metrics__verdict(w->metrics, verdict__cause_name(tt->verdict->cause));
}

/* Forget targets that ended: watch keeps only the living (metrics, a while). */
static void removed(void *ctx, struct trail_target *tt)
{
	struct watch *w = ctx;

	if (w->metrics)
		metrics__ended(w->metrics, tt, w->now_ms);
}

static void sweep(struct watch *w, uint64_t now_ms)
{
	w->now_ms = now_ms;
	session__remove_ended(&w->s, removed, w);
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

static int opt_deep_from(void *base, const char *arg)
{
	struct watch_opts *o = base;

	return format__option_bytes("--deep-from", arg, 40, &o->deep_from);
}

static int opt_sites_from(void *base, const char *arg)
{
	struct watch_opts *o = base;

	return format__option_bytes("--sites-from", arg, 40, &o->sites_from);
}

static int opt_heap_budget(void *base, const char *arg)
{
	struct watch_opts *o = base;

	return format__option_pct("--heap-budget", arg, "a percentage of one CPU",
				  &o->heap_budget);
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
	OPT_ROW_FLAG("no-sites", 0, struct watch_opts, no_sites,
		     "no mapping or device sites: snapshots and verdicts name no code"),
	OPT_ROW_FN("deep-from", 0, "BYTES", opt_deep_from,
		   "a mapping section that grows a process's mapped memory by BYTES or more "
		   "(default 1048576) has its stack unwound by call-frame information, with "
		   "Python lines; smaller ones by frame pointers. 0: every section"),
	OPT_ROW_FN("sites-from", 0, "BYTES", opt_sites_from,
		   "a process's mapping sections have their stacks taken once its mapped memory "
		   "reaches BYTES (default 16777216), the section that takes it there first, "
		   "and any of --deep-from or more (or a brk heap that large) before; the "
		   "smaller ones before cost no stack walk and their bytes are its site '"
		   SITES_SMALL_LABEL "'. 0: every section"),
	OPT_ROW_FN("heap-budget", 0, "PCT", opt_heap_budget,
		   "heap sites too (off by default): probe the malloc family of the processes "
		   "whose anonymous memory grows fastest (by 1 MiB or more over 10 s), one at a "
		   "time, in windows of up to " OPT_XSTR(HEAP_NODE_WINDOW_S) " s, so that the "
		   "node's CPU time in those probes stays within PCT percent of one CPU (0.1 to "
		   "100); a snapshot lists the heap sites of its process's windows by bytes "
		   "allocated while they were open (not as held now)"),
	OPT_ROW_FLAG("kube-events", 0, struct watch_opts, kube_events,
		     "each verdict and device OOM of a process in a pod also as a Warning Event "
		     "on that Pod (events.k8s.io/v1; what 'kubectl describe pod' shows), posted "
		     "beside the recorder with retries; repeats become the Event's series. The "
		     "API server: the pod's service account, else --kubeconfig or KUBECONFIG"),
	OPT_ROW_STR("kubeconfig", 0, "FILE", struct watch_opts, kubeconfig,
		    "the API server and credentials for --kube-events from FILE's current "
		    "context (token, tokenFile or client certificates; TLS always verified)"),
	OPT_ROW_STR("node", 0, "NAME", struct watch_opts, node,
		    "this node's name in Events (default: $NODE_NAME, else the host name)"),
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
"Each snapshot lists the code that holds its process's memory: its allocation\n"
"sites (mapping sections and device allocations) holding the most live bytes;\n"
"a verdict names the top one. Snapshots read back with 'memtrail report FILE'.\n"
"Containers and pods are named from cgroup paths and the kubelet's log\n"
"directory.\n"
"\n", PSI_SOME_PCT);
	opts__help(f, c);
	snprintf(memory, sizeof(memory),
		 "Memory: bounded by --max-targets, --keep and --interval: in the kernel about "
		 "930 bytes per process (and 16 per CPU for each live one); in memtrail at most "
		 "about %.0f MiB at the defaults (1 KiB + 88 bytes per kept sample + %d phases "
		 "per process), far less for idle processes, which store a sample only when a "
		 "level changes; sites: at most 65536 and 16384 distinct stacks for the node. "
		 "Needs root and BTF.", memory_bound_mib(&d), WATCH_PHASE_HISTORY);
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
	o->deep_from = DEFAULT_DEEP_FROM;
	o->sites_from = DEFAULT_SITES_FROM;
	cmdopts__engine_defaults(&o->e);
	return opts__parse(&cmd, argc, argv, &first);
}

static int build_config(const struct watch_opts *o, struct tracer_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cmdopts__engine_config(&o->e, cfg);
	cfg->sites = (struct tracer_sites){
		.mapping = !o->no_sites,
		.device = !o->no_sites,
		.map_deep = !o->no_sites,
		.map_deep_min = o->deep_from,
		.map_from = o->sites_from,
		/* heap windows: their frees go unseen, so sites count what was allocated */
		.heap = o->heap_budget > 0,
		.heap_budget = o->heap_budget > 0,
		.stacks = TRACER_STACKS,
	};
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
	if (w->s.heap)
		watch_heap_offer(w, now);
	if (w->o->pressure_pct) {
		watch_refresh_cgroups(w, now);
		watch_check_pressure(w, now);
	}
	return 0;
}

/* Each turn: snapshots not written yet tried again, ended targets swept. */
static int watch_turn(void *ctx, uint64_t now)
{
	struct watch *w = ctx;

	if (w->n_pend && now >= w->next_retry) {
		watch_flush_pending(w);
		w->next_retry = now + RETRY_MS;
	}
	sweep(w, now);
	return 0;
}

/* Sites: of mapping sections where the kernel has them (said once where not), of device calls. */
static int open_sites(struct watch *w, const struct tracer_config *cfg)
{
	const struct kernel_features *kf = tracer__features(w->s.tracer);
	const struct heap_config heap = { .budget_pct = w->o->heap_budget, .node = true };

	if (w->o->no_sites)
		return 0;
	/* device allocations' sites need no more than a stack walk: every kernel */
	if (kf->f[FEAT_MAP_SITES].state != FEATURE_YES)
		log__info("snapshots name no code that maps memory (only device allocations'): %s",
			  kf->f[FEAT_MAP_SITES].note);
	if (session__open_sites(&w->s, w->o->heap_budget > 0 ? &heap : NULL))
		return -1;
	sites__deep_cap(w->s.sites, tracer__stacks(cfg));
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
	for (i = 0; i < OOM_NAMES; i++)
		json_decref(w->oom_names[i].top);
	json_decref(w->last_top);
	free(w->cg);
	free(w->lim);
	free(w->pend);
	metrics__destroy(w->metrics);
	kube_events__close(w->kube, 0);
	session__destroy(&w->s);
}

int cmd_watch(int argc, char **argv)
{
	static const struct session_hooks hooks = {
		.oom = on_oom, .pressure = watch_on_pressure, .ended = on_ended,
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
	if (o.heap_budget > 0 && o.no_sites) {
		log__error("--heap-budget takes heap sites: it cannot go with --no-sites");
		return 2;
	}
	if ((o.kubeconfig || o.node) && !o.kube_events) {
		log__error("--kubeconfig and --node are for --kube-events");
		return 2;
	}
	/* before the directory is made: nothing is left by a run that cannot trace */
	if (tracer__check_caps() || build_config(&o, &cfg))
		return 1;
	w.o = &o;
	/* no cluster, a file unreadable: said before anything is made or loaded */
	if (o.kube_events && watch_kube_open(&w))
		return 1;
	if (watch_check_dir(o.dir)) {
		kube_events__close(w.kube, 0);
		return 1;
	}
	w.pend = calloc(o.pending, sizeof(*w.pend));
	if (!w.pend || trail__init(&w.s.trail)) {
		log__error("out of memory");
		free(w.pend);
		kube_events__close(w.kube, 0);
		return 1;
	}
	w.s.trail.interval_ms = o.interval_ms;
	w.s.trail.phase_history = WATCH_PHASE_HISTORY;
	w.s.trail.phase_names = WATCH_PHASE_NAMES;
	w.s.trail.kinds = kind__sourced();
	w.s.trail.command = strdup(o.t.n_cgroups ? "watch cgroups" : "watch all");
	w.s.keep_ms = o.keep_s * 1000ULL;
	w.s.hooks = &hooks;
	w.s.remove_ended = true;
	w.s.ctx = &w;
	w.s.pods_dir = o.e.pods_dir;
	session__install_signals();
	w.s.t0_ns = clock__mono_ns();
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
	if (session__open_devices(&w.s, o.e.no_devices) || open_sites(&w, &cfg))
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
		watch_flush_pending(&w);
	/* the Events still waiting get a few seconds (the pod's grace period is 30) */
	kube_events__close(w.kube, KUBE_FLUSH_MS);
	w.kube = NULL;
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
