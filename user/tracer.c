// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <dirent.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "demangle.h"
#include "elfsym.h"
#include "log.h"
#include "outfile.h"
#include "reaper.h"
#include "array.h"
#include "cgroup.h"
#include "tracer.h"
#include "kfeatures.h"
#include "proc.h"
#include "devspecs.h"
#include "memtrail.skel.h"
#include "memtrail_compat.skel.h"

/* uapi values newer than the build's headers may be (Linux 6.6) */
#define MT_TRACE_UPROBE_MULTI 48
#define MT_UPROBE_MULTI_RETURN 1U

struct tracer {
	struct memtrail_bpf *skel;
	struct ring_buffer *rb;
	tracer_event_fn fn;
	void *ctx;
	int nr_cpus;
	struct bpf_link *rule_links[MEMTRAIL_RULES_MAX];
	struct bpf_link *scope_links[MEMTRAIL_RULES_MAX];	/* a --scope rule's return */
	bool no_multi;		/* the kernel has no uprobe_multi links (before Linux 6.6) */
	bool no_take;		/* no lookup-and-delete in hash maps (before Linux 5.14) */
	bool compat;		/* the object for kernels without BPF atomic fetch operations */
	bool track;		/* files mapped executable are tracked: new ones told at once (lib_event) */
	bool maps_tell;		/* BPF tells targets' code mappings (maps.bpf.c) */
	/* files first mapped by a process, marked scanned once that process was */
	struct lib_new {
		uint32_t pid;
		struct memtrail_lib_key key;
		char name[MEMTRAIL_LIB_NAME_LEN];
		uint64_t ts_ns;		/* when it was mapped */
		bool again;		/* mapped first by another process: that one's to settle */
	} *lib_new;
	size_t n_lib_new, cap_lib_new;
	/* a descriptor polled beside the ring buffer, and what reads it (tracer__watch_fd) */
	int extra_fd;
	tracer_fd_fn extra_fn;
	void *extra_ctx;
	uint32_t *ended;	/* ended targets to delete from the kernel's map after this poll */
	size_t n_ended, cap_ended;
	tracer_ended_fn ended_fn;	/* told of them first (tracer__on_ended) */
	void *ended_ctx;
	struct kernel_features kf;
};

static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	if (getenv("MEMTRAIL_DEBUG_LIBBPF"))
		return vfprintf(stderr, fmt, ap);
	return 0;
}

/*
 * PID was scanned (DONE) or is gone: the files it mapped are scanned, or
 * (gone before its scan) those it was first to map are left for the next
 * process that maps them.
 */
static void lib_new_settle(struct tracer *t, uint32_t pid, bool done)
{
	uint32_t scanned = MEMTRAIL_LIB_SCANNED;
	int fd = bpf_map__fd(t->skel->maps.lib_files);
	size_t i;

	for (i = 0; i < t->n_lib_new;) {
		if (t->lib_new[i].pid != pid) {
			i++;
			continue;
		}
		if (done)
			bpf_map_update_elem(fd, &t->lib_new[i].key, &scanned, BPF_ANY);
		else if (!t->lib_new[i].again)
			bpf_map_delete_elem(fd, &t->lib_new[i].key);
		t->lib_new[i] = t->lib_new[--t->n_lib_new];
	}
}

/*
 * Every event goes to the session. The files a process was first to map
 * are marked scanned once the session scanned it (a fresh LIBS event), and
 * left for the next mapper if it exits before.
 */
static int on_ringbuf(void *ctx, void *data, size_t size)
{
	const struct memtrail_event_hdr *h = data;
	const struct memtrail_event_lib_new *ln = data;
	const struct memtrail_event_libs *libs = data;
	struct tracer *t = ctx;
	int err = 0;

	if (size >= sizeof(*ln) && h->type == MEMTRAIL_EV_LIB_NEW) {
		struct lib_new *n;

		if (array__grow((void **)&t->lib_new, &t->cap_lib_new, t->n_lib_new + 1,
				sizeof(*t->lib_new)))
			return 0;
		n = &t->lib_new[t->n_lib_new++];
		n->pid = h->tgid;
		n->key = ln->key;
		n->ts_ns = h->ts_ns;
		n->again = ln->again;
		memcpy(n->name, ln->name, sizeof(n->name));
		n->name[sizeof(n->name) - 1] = '\0';
		return 0;
	}
	if (t->fn)
		err = t->fn(t->ctx, data, size);
	if (size >= sizeof(*libs) && h->type == MEMTRAIL_EV_LIBS && libs->fresh)
		lib_new_settle(t, h->tgid, true);
	else if (size >= sizeof(*h) && h->type == MEMTRAIL_EV_EXIT)
		lib_new_settle(t, h->tgid, false);
	return err;
}

/*
 * Why a load or attach failed with EPERM/EACCES: capabilities only when they
 * are really missing; the verifier refuses programs with EACCES too.
 */
static const char *perm_hint(int err)
{
	if (err != -EPERM && err != -EACCES)
		return "";
	if (!features__have_caps())
		return geteuid() ? " (memtrail needs root: run it with sudo)"
				 : " (memtrail needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN)";
	return " (the kernel refused a program; MEMTRAIL_DEBUG_LIBBPF=1 shows why)";
}

/*
 * The skeleton, on the object built for this kernel: without BPF atomic
 * fetch operations (before 5.12) the compat object, laid out as the other
 * (the build checks it), so one skeleton type serves both.
 */
static struct memtrail_bpf *skel_open(bool compat)
{
	struct memtrail_bpf *obj;
	int err;

	if (!compat)
		return memtrail_bpf__open();
	obj = calloc(1, sizeof(*obj));
	if (!obj) {
		errno = ENOMEM;
		return NULL;
	}
	err = memtrail_bpf__create_skeleton(obj);
	if (!err) {
		obj->skeleton->data = memtrail_compat_bpf__elf_bytes(&obj->skeleton->data_sz);
		err = bpf_object__open_skeleton(obj->skeleton, NULL);
	}
	if (err) {
		memtrail_bpf__destroy(obj);
		errno = -err;
		return NULL;
	}
	return obj;
}

/* The heap entry programs per operation (1 to MEMTRAIL_HEAP_OPS), for kernels without bpf_cookie. */
static void heap_entries(struct memtrail_bpf *s, struct bpf_program *each[MEMTRAIL_HEAP_OPS])
{
	struct bpf_program *progs[MEMTRAIL_HEAP_OPS] = {
		s->progs.mt_heap_entry_1, s->progs.mt_heap_entry_2, s->progs.mt_heap_entry_3,
		s->progs.mt_heap_entry_4, s->progs.mt_heap_entry_5, s->progs.mt_heap_entry_6,
		s->progs.mt_heap_entry_7,
	};

	memcpy(each, progs, sizeof(progs));
}

/* The per-rule programs, for kernels without bpf_cookie. */
static void rule_copies(struct memtrail_bpf *s, struct bpf_program *each[MEMTRAIL_RULE_PROGS])
{
	struct bpf_program *progs[MEMTRAIL_RULE_PROGS] = {
		s->progs.mt_rule_0, s->progs.mt_rule_1, s->progs.mt_rule_2, s->progs.mt_rule_3,
		s->progs.mt_rule_4, s->progs.mt_rule_5, s->progs.mt_rule_6, s->progs.mt_rule_7,
	};

	memcpy(each, progs, sizeof(progs));
}

/* The entry program of device function I on kernels without bpf_cookie. */
static struct bpf_program *dev_copy(struct tracer *t, int i)
{
	char name[32];

	snprintf(name, sizeof(name), "mt_dev_entry_%d", i);
	return bpf_object__find_program_by_name(t->skel->obj, name);
}

/* Threads inside a scope at once, of all targets (scope_stacks). */
#define SCOPE_THREADS 4096

/* Whether CFG has --scope rules. */
static bool scopes(const struct tracer_config *cfg)
{
	size_t i;

	for (i = 0; i < cfg->n_rules; i++)
		if (cfg->rules[i].scoped)
			return true;
	return false;
}

/*
 * Of each source's program variants, the one this kernel loads; what cannot
 * work here is switched off and said once, on one line. -ENOTSUP (logged)
 * when the kernel lacks what every source needs.
 */
static int choose_variants(struct tracer *t, const struct tracer_config *cfg)
{
	const struct kernel_features *kf = &t->kf;
	struct memtrail_bpf *s = t->skel;
	bool device = kf->f[FEAT_DEVICE].state != FEATURE_NO && !cfg->no_devices;
	/* stacks are taken, and named from the processes' code mappings */
	bool stacks = cfg->sites.heap || cfg->sites.mapping || cfg->sites.faults;
	/*
	 * files mapped, tracked: the probes that come from scans (device
	 * runtimes, allocators) are attached as soon as a file new to memtrail
	 * is mapped, and sites' stacks are named (a process's libraries read
	 * while it lives, however short its life)
	 */
	bool track = kf->f[FEAT_NEW_LIBS].state == FEATURE_YES && (device || stacks);
	/* the dynamic linker's hook (an entry program) tells of libraries loaded: tracking needs it */
	bool entry = device || track;
	bool multi = entry && !t->no_multi;
	struct bpf_program *each[MEMTRAIL_RULE_PROGS];
	size_t n_specs;
	int i;

	if (kf->exit_args < 1 || kf->f[FEAT_RSS].state == FEATURE_NO) {
		log__error("kernel %s: %s", kf->release,
			   kf->exit_args < 1 ? kf->f[FEAT_EXIT].note : kf->f[FEAT_RSS].note);
		return -ENOTSUP;
	}
	bpf_program__set_autoload(s->progs.mt_exit, kf->exit_args == 2);
	bpf_program__set_autoload(s->progs.mt_exit_task, kf->exit_args == 1);
	bpf_program__set_autoload(s->progs.mt_mmap_lock, kf->mmap_lock_args == 3);
	bpf_program__set_autoload(s->progs.mt_mmap_unlock, kf->mmap_lock_args == 3);
	bpf_program__set_autoload(s->progs.mt_mmap_lock_path, kf->mmap_lock_args == 4);
	bpf_program__set_autoload(s->progs.mt_mmap_unlock_path, kf->mmap_lock_args == 4);
	bpf_program__set_autoload(s->progs.mt_marker, kf->prctl_tp);
	bpf_program__set_autoload(s->progs.mt_marker_sys, !kf->prctl_tp);
	bpf_program__set_autoload(s->progs.mt_mapped_sys, kf->mmap_lock_args < 3);
	bpf_program__set_autoload(s->progs.mt_mark, kf->syscall_prog);
	bpf_program__set_autoload(s->progs.mt_mark_raw, !kf->syscall_prog);
	bpf_program__set_autoattach(s->progs.mt_mark_raw, false);	/* run, never attached */
	bpf_program__set_autoload(s->progs.mt_phase_rule, kf->attach_cookie);
	/* rules: one program with a cookie each, or (before 5.15) a program per rule */
	rule_copies(s, each);
	for (i = 0; i < MEMTRAIL_RULE_PROGS; i++) {
		bpf_program__set_autoload(each[i], !kf->attach_cookie && (size_t)i < cfg->n_rules);
		bpf_program__set_autoattach(each[i], false);
	}
	bpf_program__set_autoload(s->progs.mt_scope_return, scopes(cfg));
	bpf_program__set_autoattach(s->progs.mt_scope_return, false);
	bpf_map__set_max_entries(s->maps.scope_stacks, scopes(cfg) ? SCOPE_THREADS : 1);
	bpf_program__set_autoload(s->progs.mt_oom_victim, kf->mark_victim_args == 2);
	bpf_program__set_autoload(s->progs.mt_oom_victim_pid, kf->mark_victim_args == 1);
	/* task storage (5.11), or in the compat object a map by thread */
	bpf_map__set_autocreate(s->maps.heap_calls, kf->task_storage || t->compat);
	if (cfg->sites.heap && kf->f[FEAT_HEAP].state == FEATURE_NO) {
		log__error("cannot trace the heap here: %s", kf->f[FEAT_HEAP].note);
		return -ENOTSUP;
	}
	bpf_program__set_autoload(s->progs.mt_dev_entry, entry && kf->attach_cookie);
	bpf_program__set_autoload(s->progs.mt_dev_return, device);
	bpf_program__set_autoload(s->progs.mt_dev_entry_multi, multi);
	bpf_program__set_autoload(s->progs.mt_dev_return_multi, multi && device);
	/* before 5.15: an entry program per function, its cookie in rodata */
	n_specs = devspecs__cookies((uint64_t *)s->rodata->dev_cookie, MEMTRAIL_DEV_SPECS);
	for (i = 0; i < MEMTRAIL_DEV_SPECS; i++) {
		struct bpf_program *p = dev_copy(t, i);

		bpf_program__set_autoload(p, !kf->attach_cookie && (size_t)i < n_specs &&
					     (device || (entry && devspecs__loader(i))));
		bpf_program__set_autoattach(p, false);
	}
	bpf_program__set_autoload(s->progs.mt_dev_exec, device && kf->for_each_elem);
	t->track = track;
	/* sites' stacks named however short a process's life: its code mappings from BPF */
	t->maps_tell = track && stacks && kf->f[FEAT_SITE_MAPS].state == FEATURE_YES && !t->compat;
	bpf_program__set_autoload(s->progs.mt_exec_maps, t->maps_tell);
	bpf_program__set_autoload(s->progs.mt_maps_hook, t->maps_tell);
	bpf_program__set_autoattach(s->progs.mt_maps_hook, false);	/* beside the loader's hook */
	s->rodata->maps_tell_on = t->maps_tell;
	bpf_program__set_autoload(s->progs.mt_lib_map_lsm, track && kf->mmap_hook == MMAP_HOOK_LSM);
	bpf_program__set_autoload(s->progs.mt_lib_map, track && kf->mmap_hook == MMAP_HOOK_FENTRY);
	bpf_program__set_autoload(s->progs.mt_lib_map_sys, track && kf->mmap_hook == MMAP_HOOK_SYSCALL);
	s->rodata->lib_map_lock = track && kf->mmap_hook == MMAP_HOOK_LOCK;
	s->rodata->track_libs = track;
	/* elsewhere the maps are read from /proc, at once */
	s->rodata->libs_urgent = stacks && !t->maps_tell;
	if (kf->mmap_lock_args < 3)
		bpf_program__set_autoload(s->progs.mt_unmapped_area, false);

	/* say what the user asked for and will not get, or get in another way */
	for (i = 0; i < FEAT_MAX; i++) {
		const struct feature *f = &kf->f[i];
		bool asked = true;

		if (f->state == FEATURE_YES)
			continue;
		switch (i) {
		case FEAT_HEAP:
			asked = cfg->sites.heap;
			break;
		case FEAT_DEVICE:
			asked = false;	/* said when a runtime is found */
			break;
		case FEAT_RULES:
			asked = cfg->n_rules > 0;
			break;
		case FEAT_MARK:
		case FEAT_MAP_SITES:	/* on by default: 'features' and -v say it */
		case FEAT_DEVICE_SITES:
		case FEAT_DEVICE_MULTI:
		case FEAT_NEW_LIBS:
		case FEAT_GATE:
		case FEAT_SITE_MAPS:
			asked = false;	/* said where used */
			break;
		}
		/* a bound the kernel's own figures share (rss before 6.2) is in 'features' and -v */
		if (f->state != FEATURE_NO || !asked)
			log__debug("%s: %s", f->name, f->note);
		else
			log__warn("%s: %s", f->name, f->note);
	}
	return 0;
}

/*
 * Phase cells at least: a phase's cell is freed when user space reads its
 * end, and a program entering 20,000 phases a second has thousands open
 * while user space catches up (a loaded node: seen filling 8192).
 */
#define CELLS_MIN 65536

static int configure(struct tracer *t, const struct tracer_config *cfg)
{
	struct bpf_program *entries[MEMTRAIL_HEAP_OPS];
	struct memtrail_bpf *s = t->skel;
	uint32_t n = cfg->max_targets;
	bool heap;
	int i;

	s->rodata->filter_mode = cfg->mode;
	if (cfg->comm)
		strncpy((char *)s->rodata->filter_comm, cfg->comm, MEMTRAIL_COMM_LEN - 1);
	memcpy((void *)s->rodata->filter_cgroup_ids, cfg->cgroup_ids, sizeof(cfg->cgroup_ids));
	s->rodata->filter_n_cgroups = cfg->n_cgroups;
	s->rodata->filter_cgroup_subsys = cfg->cgroup_subsys;
	s->rodata->paths_cgroup_subsys = cgroup__paths_subsys();
	s->rodata->self_tgid = getpid();
	s->rodata->nr_cpus = t->nr_cpus;
	/* rules attach one by one, with a cookie naming their phase */
	bpf_program__set_autoattach(s->progs.mt_phase_rule, false);
	/* device probes attach per library, as libraries are found */
	bpf_program__set_autoattach(s->progs.mt_dev_entry, false);
	bpf_program__set_autoattach(s->progs.mt_dev_return, false);
	bpf_program__set_autoattach(s->progs.mt_dev_entry_multi, false);
	bpf_program__set_autoattach(s->progs.mt_dev_return_multi, false);
	bpf_program__set_expected_attach_type(s->progs.mt_dev_entry_multi, MT_TRACE_UPROBE_MULTI);
	bpf_program__set_expected_attach_type(s->progs.mt_dev_return_multi, MT_TRACE_UPROBE_MULTI);
	/* allocation sites */
	s->rodata->sites_mapping = cfg->sites.mapping &&
				   t->kf.f[FEAT_MAP_SITES].state == FEATURE_YES;
	s->rodata->has_task_regs = t->kf.task_pt_regs;
	s->rodata->has_find_vma = t->kf.find_vma;
	s->rodata->has_scopes = scopes(cfg);
	s->rodata->oom_by_pid = t->kf.mark_victim_args == 1;
	s->rodata->heap_track = cfg->sites.heap_track;
	s->rodata->heap_sample = cfg->sites.heap_sample;
	s->rodata->heap_budget = cfg->sites.heap_budget;
	s->rodata->fault_sample = cfg->sites.fault_sample ? cfg->sites.fault_sample : 1;
	bpf_program__set_autoload(s->progs.mt_unmapped_area, cfg->sites.mapping);
	bpf_program__set_autoload(s->progs.mt_fault, cfg->sites.faults);
	heap = cfg->sites.heap && t->kf.f[FEAT_HEAP].state != FEATURE_NO;
	bpf_program__set_autoload(s->progs.mt_heap_entry, heap && t->kf.attach_cookie);
	bpf_program__set_autoload(s->progs.mt_heap_return, heap);
	heap_entries(s, entries);
	for (i = 0; i < MEMTRAIL_HEAP_OPS; i++) {
		bpf_program__set_autoload(entries[i], heap && !t->kf.attach_cookie);
		bpf_program__set_autoattach(entries[i], false);
	}
	if (cfg->sites.heap) {
		/* heap probes come and go per process: uprobe_multi links detach at once */
		if (!t->no_multi) {
			bpf_program__set_expected_attach_type(s->progs.mt_heap_entry,
							      MT_TRACE_UPROBE_MULTI);
			bpf_program__set_expected_attach_type(s->progs.mt_heap_return,
							      MT_TRACE_UPROBE_MULTI);
		}
		bpf_program__set_autoattach(s->progs.mt_heap_entry, false);
		bpf_program__set_autoattach(s->progs.mt_heap_return, false);
	}
	/* no heap probes, no live heap allocations: a million-bucket table is 16 MiB */
	if ((!heap && bpf_map__set_max_entries(s->maps.heap_allocs, 1)) ||
	    bpf_map__set_max_entries(s->maps.site_stacks, tracer__stacks(cfg)) ||
	    bpf_map__set_max_entries(s->maps.stack_ids, tracer__stacks(cfg)) ||
	    bpf_map__set_max_entries(s->maps.targets, n) ||
	    bpf_map__set_max_entries(s->maps.dirty, n) ||
	    bpf_map__set_max_entries(s->maps.cells, n < CELLS_MIN ? CELLS_MIN : n) ||
	    bpf_map__set_max_entries(s->maps.mm_state, 2 * n) ||
	    bpf_map__set_max_entries(s->maps.rss_local, 2 * n))
		return -EINVAL;
	return 0;
}

uint32_t tracer__stacks(const struct tracer_config *cfg)
{
	const struct tracer_sites *st = &cfg->sites;

	if (!st->mapping && !st->faults && !st->heap)
		return 1;	/* no sites: no stacks */
	return st->stacks ? st->stacks : st->heap ? TRACER_STACKS_HEAP : TRACER_STACKS;
}

static int add_pids(struct tracer *t, const struct tracer_config *cfg)
{
	int fd = bpf_map__fd(t->skel->maps.targets);
	size_t i;

	for (i = 0; i < cfg->n_pids; i++) {
		struct memtrail_target v = {
			.flags = cfg->await_exec ? MEMTRAIL_TARGET_AWAIT_EXEC : 0,
		};
		uint32_t pid = cfg->pids[i];

		if (bpf_map_update_elem(fd, &pid, &v, BPF_ANY)) {
			int err = -errno;

			log__error("cannot add PID %u to the targets map: %s", pid, strerror(-err));
			return err;
		}
	}
	return 0;
}

/* The program of rule I: one for all with a cookie each, else one per rule. */
static struct bpf_program *rule_prog(struct tracer *t, uint32_t i)
{
	struct bpf_program *each[MEMTRAIL_RULE_PROGS];

	if (t->kf.attach_cookie)
		return t->skel->progs.mt_phase_rule;
	rule_copies(t->skel, each);
	return i < MEMTRAIL_RULE_PROGS ? each[i] : NULL;
}

/* The functions of a file whose symbol a demangled name names (distinct entry points). */
#define RULE_MATCHES 3
struct rule_match {
	const char *name;
	size_t n;
	uint64_t off[RULE_MATCHES];
	char sym[RULE_MATCHES][512];
};

static int rule_match_one(void *ctx, const char *sym, uint64_t off)
{
	struct rule_match *m = ctx;
	size_t i;

	if (!demangle__is(sym, m->name))
		return 0;
	for (i = 0; i < m->n && i < RULE_MATCHES; i++)
		if (m->off[i] == off)
			return 0;	/* an alias (a C1/C2 constructor pair) */
	if (m->n < RULE_MATCHES) {
		m->off[m->n] = off;
		snprintf(m->sym[m->n], sizeof(m->sym[0]), "%s", sym);
	}
	m->n++;
	return 0;
}

/*
 * Where a rule with a demangled SYMBOL attaches: the file BINARY names
 * (found as libbpf finds it) into *PATH, the one function's offset into
 * *OFF. 0, or -1 with the reason in WHY.
 */
static int rule_resolve(const struct phase_rule *r, char **path, uint64_t *off, char *why,
			size_t len)
{
	struct rule_match m = { .name = r->symbol };
	char a[160], b[160];
	int err;

	*path = proc__find_file(r->binary);
	if (!*path) {
		snprintf(why, len, "no file '%s'", r->binary);
		return -1;
	}
	err = elfsym__each(*path, rule_match_one, &m);
	if (err) {
		snprintf(why, len, "cannot read '%s': %s", *path, strerror(-err));
		return -1;
	}
	if (!m.n) {
		snprintf(why, len, "no function '%s' in '%s'", r->symbol, *path);
		return -1;
	}
	if (m.n > 1) {
		snprintf(why, len, "'%s' names %zu functions in '%s' (%s, %s%s): give its parameters",
			 r->symbol, m.n, *path, demangle__str(a, sizeof(a), m.sym[0]),
			 demangle__str(b, sizeof(b), m.sym[1]), m.n > 2 ? ", ..." : "");
		return -1;
	}
	*off = m.off[0];
	log__debug("phase rule '%s': '%s' is %s at 0x%" PRIx64 " in '%s'", r->name, r->symbol,
		   m.sym[0], *off, *path);
	return 0;
}

/* A rule that cannot attach is reported and skipped; the others still work. */
static void attach_rules(struct tracer *t, const struct tracer_config *cfg)
{
	int names = bpf_map__fd(t->skel->maps.rule_names);
	uint32_t i;

	for (i = 0; i < cfg->n_rules && i < MEMTRAIL_RULES_MAX; i++) {
		const struct phase_rule *r = &cfg->rules[i];
		bool readable = demangle__readable(r->symbol);
		/* a cookie the kernel cannot take (before 5.15) would refuse the attach */
		LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = readable ? NULL : r->symbol,
			    .bpf_cookie = t->kf.attach_cookie ? i : 0);
		LIBBPF_OPTS(bpf_uprobe_opts, ret_opts, .func_name = opts.func_name, .retprobe = true);
		struct memtrail_rule rule = { .scoped = r->scoped };
		struct bpf_link *link, *ret = NULL;
		char *path = NULL, why[768];
		uint64_t off = 0;

		memcpy(rule.name, r->name, sizeof(rule.name));
		if (bpf_map_update_elem(names, &i, &rule, BPF_ANY)) {
			log__warn("cannot set up phase rule '%s': %s", r->name, strerror(errno));
			continue;
		}
		if (!t->kf.attach_cookie && i >= MEMTRAIL_RULE_PROGS) {
			log__warn("phase rule '%s' not set: %s", r->name,
				  t->kf.f[FEAT_RULES].note);
			continue;
		}
		/* a demangled name: memtrail finds the function, libbpf knows ELF names only */
		if (readable && rule_resolve(r, &path, &off, why, sizeof(why))) {
			log__warn("phase rule '%s' not set: %s", r->name, why);
			free(path);
			continue;
		}
		/* a scope's return first: its entry alone would never end the phase */
		if (r->scoped)
			ret = bpf_program__attach_uprobe_opts(t->skel->progs.mt_scope_return, -1,
							      path ? path : r->binary, off, &ret_opts);
		link = !r->scoped || ret ? bpf_program__attach_uprobe_opts(rule_prog(t, i), -1,
									 path ? path : r->binary,
									 off, &opts)
					 : NULL;
		if (!link) {
			int err = errno;

			bpf_link__destroy(ret);
			log__warn("phase rule '%s' not set: cannot attach to '%s' in '%s': %s",
				  r->name, r->symbol, path ? path : r->binary,
				  err == ENOENT ? "no such symbol or file" : strerror(err));
			free(path);
			continue;
		}
		free(path);
		t->rule_links[i] = link;
		t->scope_links[i] = ret;
		log__debug("phase rule '%s' attached to '%s' in '%s'", r->name, r->symbol, r->binary);
	}
}

/*
 * Open the object, size its maps, choose its programs and load it; errors
 * said, but one of the load itself: -EAGAIN (its error in *LOAD_ERR), to be
 * said, or tried again without what this kernel may refuse.
 */
static int load_object(struct tracer *t, const struct tracer_config *cfg, int *load_err)
{
	int err;

	t->skel = skel_open(t->compat);
	if (!t->skel) {
		err = -errno;
		log__error("cannot open the BPF object: %s", strerror(-err));
		return err;
	}
	err = configure(t, cfg);
	if (err) {
		log__error("cannot size the BPF maps for %u targets", cfg->max_targets);
		return err;
	}
	err = choose_variants(t, cfg);
	if (err)
		return err;
	*load_err = memtrail_bpf__load(t->skel);
	return *load_err ? -EAGAIN : 0;
}

int tracer__check_caps(void)
{
	if (features__have_caps())
		return 0;
	log__error("cannot load the BPF programs: %s", geteuid() ?
		   "memtrail needs root: run it with sudo" :
		   "memtrail needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN");
	return -EPERM;
}

/*
 * Before uprobe_multi (6.6) every probed function is a file descriptor or
 * two: CUDA's driver alone is about 80, and 1024 (the usual soft limit) runs
 * out after a dozen libraries. Up to the hard limit, as other BPF tools do.
 */
static void raise_fd_limit(void)
{
	struct rlimit r;

	if (!getrlimit(RLIMIT_NOFILE, &r) && r.rlim_cur < r.rlim_max) {
		r.rlim_cur = r.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &r))
			log__debug("cannot raise the open file limit: %s", strerror(errno));
	}
}

int tracer__open(struct tracer **out, const struct tracer_config *cfg,
		 tracer_event_fn fn, void *ctx)
{
	struct tracer *t;
	int err, load_err = 0;

	*out = NULL;
	libbpf_set_print(libbpf_log);
	err = tracer__check_caps();
	if (err)
		return err;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->extra_fd = -1;
	err = features__probe(&t->kf);
	if (err) {
		free(t);
		return err;
	}
	t->fn = fn;
	t->ctx = ctx;
	raise_fd_limit();
	outfile__reserve();	/* a trail written where probes took every other descriptor */
	t->nr_cpus = libbpf_num_possible_cpus();
	if (t->nr_cpus <= 0)
		t->nr_cpus = 1;

	/*
	 * The compat object where BPF has no atomic fetch (5.12) or no callbacks
	 * (5.13: bpf_loop's and the like, which the main object's dead branches
	 * still name). MEMTRAIL_COMPAT=1: here too (how its tests run on any kernel)
	 */
	t->compat = !t->kf.atomics || !t->kf.for_each_elem || getenv("MEMTRAIL_COMPAT");
	/* MEMTRAIL_NO_UPROBE_MULTI=1: a link per probe, as before 6.6 (its tests, here) */
	t->no_multi = !t->kf.uprobe_multi || getenv("MEMTRAIL_NO_UPROBE_MULTI");
	err = load_object(t, cfg, &load_err);
	if (err == -EAGAIN && t->maps_tell) {
		/* a kernel that refuses the task_vma iterator's programs: /proc names instead */
		features__site_maps_refused(&t->kf, load_err);	/* said under -v */
		memtrail_bpf__destroy(t->skel);
		err = load_object(t, cfg, &load_err);
	}
	if (err == -EAGAIN) {
		err = load_err;
		log__error("cannot load the BPF programs: %s%s", strerror(-err), perm_hint(err));
	}
	if (err)
		goto fail;
	if (t->no_multi)
		log__debug("no uprobe_multi links: device and heap probes attach one link per "
			   "function");
	err = add_pids(t, cfg);
	if (err)
		goto fail;
	err = memtrail_bpf__attach(t->skel);
	if (err) {
		log__error("cannot attach the BPF programs: %s%s", strerror(-err), perm_hint(err));
		goto fail;
	}
	attach_rules(t, cfg);
	t->rb = ring_buffer__new(bpf_map__fd(t->skel->maps.events), on_ringbuf, t, NULL);
	if (!t->rb) {
		err = -errno;
		log__error("cannot open the BPF ring buffer: %s", strerror(-err));
		goto fail;
	}
	*out = t;
	return 0;
fail:
	tracer__destroy(t);
	return err;
}

int tracer__scan(struct tracer *t)
{
	char buf[64];
	int fd, err = 0;
	ssize_t n;

	fd = bpf_iter_create(bpf_link__fd(t->skel->links.mt_scan));
	if (fd < 0) {
		err = -errno;
		log__error("cannot scan tasks: %s", strerror(-err));
		return err;
	}
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			/* EAGAIN: the walk restarts where it stopped */
			if (errno == EAGAIN)
				continue;
			err = -errno;
			log__error("cannot scan tasks: %s", strerror(-err));
			break;
		}
	}
	close(fd);
	return err;
}

/*
 * Delete the targets that ended (since the last time, where the ended_fn
 * held them): one system call for a storm's worth (Linux 5.6 on), one each
 * where batches are refused or stop at a key (an entry gone already).
 */
static void forget_ended(struct tracer *t)
{
	int fd = bpf_map__fd(t->skel->maps.targets);
	__u32 n = t->n_ended;
	size_t i;

	if (!n)
		return;
	if (t->ended_fn) {
		qsort(t->ended, t->n_ended, sizeof(*t->ended), array__u32_cmp);
		if (!t->ended_fn(t->ended_ctx, t->ended, t->n_ended))
			return;
	}
	if (bpf_map_delete_batch(fd, t->ended, &n, NULL))
		for (i = n < t->n_ended ? n : 0; i < t->n_ended; i++)
			bpf_map_delete_elem(fd, &t->ended[i]);
	t->n_ended = 0;
}

void tracer__watch_fd(struct tracer *t, int fd, tracer_fd_fn fn, void *ctx)
{
	t->extra_fd = fd;
	t->extra_fn = fn;
	t->extra_ctx = ctx;
}

int tracer__poll(struct tracer *t, int timeout_ms)
{
	int n;

	if (t->extra_fd >= 0) {
		struct pollfd p[2] = { { ring_buffer__epoll_fd(t->rb), POLLIN, 0 },
				       { t->extra_fd, POLLIN, 0 } };

		n = poll(p, 2, timeout_ms);
		if (n > 0 && p[1].revents)
			t->extra_fn(t->extra_ctx);
		n = n < 0 ? -errno : 0;
	} else {
		n = ring_buffer__poll(t->rb, timeout_ms);
	}
	/* most records do not wake the reader (event_submit): read what came anyway */
	if (n >= 0)
		n = ring_buffer__consume(t->rb);
	forget_ended(t);
	if (n == -EINTR)
		return 0;
	return n < 0 ? n : 0;
}

int tracer__read_phase(struct tracer *t, uint32_t tgid, uint32_t *seq)
{
	struct memtrail_target v;

	if (bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.targets), &tgid, &v))
		return -errno;
	*seq = v.phase;
	return 0;
}

int tracer__read_cell(struct tracer *t, uint32_t tgid, uint32_t phase,
		      struct memtrail_cell *cell)
{
	struct memtrail_cell_key key = { .tgid = tgid, .phase = phase };

	if (bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.cells), &key, cell))
		return -errno;
	return 0;
}

#define BATCH 512	/* entries a call; a hash bucket never holds this many: no -ENOSPC */

/*
 * Every entry of hash map FD, BATCH a system call: FN(ctx, key, value) for
 * each. 0, or -errno when the first call failed (nothing seen); a later
 * failure keeps what was seen.
 */
static int each_batch(int fd, size_t key_size, size_t val_size, bool take,
		      tracer_entry_fn fn, void *ctx)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts);
	char *keys = calloc(BATCH, key_size), *vals = calloc(BATCH, val_size);
	__u32 in = 0, out = 0, i, count;
	bool first = true;
	int err = 0;

	if (!keys || !vals) {
		err = -ENOMEM;
		goto out;
	}
	for (;;) {
		int rc;

		count = BATCH;
		rc = take ? bpf_map_lookup_and_delete_batch(fd, first ? NULL : &in, &out, keys, vals,
							    &count, &opts)
			  : bpf_map_lookup_batch(fd, first ? NULL : &in, &out, keys, vals, &count, &opts);
		rc = rc < 0 ? -errno : 0;
		if (rc && rc != -ENOENT) {
			err = first ? rc : 0;
			break;
		}
		for (i = 0; i < count; i++)
			fn(ctx, keys + i * key_size, vals + i * val_size);
		if (rc == -ENOENT)
			break;	/* no more */
		in = out;
		first = false;
	}
out:
	free(keys);
	free(vals);
	return err;
}

int tracer__each_cell(struct tracer *t, tracer_entry_fn fn, void *ctx)
{
	return each_batch(bpf_map__fd(t->skel->maps.cells), sizeof(struct memtrail_cell_key),
			  sizeof(struct memtrail_cell), false, fn, ctx);
}

int tracer__each_target(struct tracer *t, tracer_entry_fn fn, void *ctx)
{
	return each_batch(bpf_map__fd(t->skel->maps.targets), sizeof(__u32),
			  sizeof(struct memtrail_target), false, fn, ctx);
}

int tracer__take_dirty(struct tracer *t, tracer_entry_fn fn, void *ctx, bool *all)
{
	int err = each_batch(bpf_map__fd(t->skel->maps.dirty), sizeof(__u32), sizeof(__u32), true,
			     fn, ctx);

	if (err)
		return err;
	*all = __atomic_exchange_n(&t->skel->bss->dirty_full, 0, __ATOMIC_SEQ_CST);
	/* after the names are taken, before any level is read: see mark_dirty() */
	__atomic_add_fetch(&t->skel->bss->sample_gen, 1, __ATOMIC_SEQ_CST);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return 0;
}

int tracer__take_cell(struct tracer *t, uint32_t tgid, uint32_t phase, struct memtrail_cell *cell)
{
	struct memtrail_cell_key key = { .tgid = tgid, .phase = phase };
	int fd = bpf_map__fd(t->skel->maps.cells);

	if (!t->no_take) {
		if (!bpf_map_lookup_and_delete_elem(fd, &key, cell))
			return 0;
		if (errno == ENOENT)
			return -ENOENT;
		/* ENOTSUPP (524) where only queues and stacks had it */
		t->no_take = true;
	}
	if (bpf_map_lookup_elem(fd, &key, cell))
		return -errno;
	bpf_map_delete_elem(fd, &key);
	return 0;
}

void tracer__drop_cell(struct tracer *t, uint32_t tgid, uint32_t phase)
{
	struct memtrail_cell_key key = { .tgid = tgid, .phase = phase };

	bpf_map_delete_elem(bpf_map__fd(t->skel->maps.cells), &key);
}

void tracer__forget(struct tracer *t, uint32_t tgid)
{
	bpf_map_delete_elem(bpf_map__fd(t->skel->maps.targets), &tgid);
}

void tracer__on_ended(struct tracer *t, tracer_ended_fn fn, void *ctx)
{
	t->ended_fn = fn;
	t->ended_ctx = ctx;
}

void tracer__forget_ended(struct tracer *t, uint32_t tgid)
{
	if (array__grow((void **)&t->ended, &t->cap_ended, t->n_ended + 1, sizeof(*t->ended))) {
		tracer__forget(t, tgid);
		return;
	}
	t->ended[t->n_ended++] = tgid;
}

/*
 * Runs of the loaded programs that the kernel skipped because the program
 * was already active on that CPU (bpf_prog_info.recursion_misses, Linux
 * 5.12 on; 0 before). Tracepoint programs run preemptible on newer kernels (7.3), and
 * trampoline (fentry) programs from 5.x, so a task preempted inside one
 * makes the next run on that CPU a miss.
 */
static uint64_t tracer__skipped(struct tracer *t)
{
	struct bpf_program *prog;
	uint64_t n = 0;

	bpf_object__for_each_program(prog, t->skel->obj) {
		struct bpf_prog_info info;
		uint32_t len = sizeof(info);
		int fd = bpf_program__fd(prog);

		if (fd < 0)
			continue;
		memset(&info, 0, sizeof(info));
		if (!bpf_obj_get_info_by_fd(fd, &info, &len))
			n += info.recursion_misses;
	}
	return n;
}

uint64_t tracer__lost_one(struct tracer *t, uint32_t why)
{
	uint64_t *vals = calloc(t->nr_cpus, sizeof(*vals)), n = 0;
	int c;

	if (vals && !bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.lost), &why, vals))
		for (c = 0; c < t->nr_cpus; c++)
			n += vals[c];
	free(vals);
	return n;
}

void tracer__lost(struct tracer *t, uint64_t lost[MEMTRAIL_LOST_MAX])
{
	uint32_t k;

	for (k = 0; k < MEMTRAIL_LOST_MAX; k++)
		lost[k] = k == MEMTRAIL_LOST_SKIPPED ? tracer__skipped(t) : tracer__lost_one(t, k);
}

/* One uprobe_multi link of PROG on N offsets of PATH (PID 0: every process); fd or -errno. */
static int uprobe_multi(struct bpf_program *prog, bool ret, int pid, const char *path,
			const uint64_t *offsets, const uint64_t *cookies, size_t n)
{
	/* union bpf_attr, link_create.uprobe_multi (uapi linux/bpf.h, Linux 6.6) */
	struct {
		uint32_t prog_fd, target_fd, attach_type, flags;
		uint64_t path, offsets, ref_ctr_offsets, cookies;
		uint32_t cnt, flags2, pid, pad;
	} attr = {
		.prog_fd = bpf_program__fd(prog),
		.attach_type = MT_TRACE_UPROBE_MULTI,
		.path = (uintptr_t)path,
		.offsets = (uintptr_t)offsets,
		.cookies = (uintptr_t)cookies,
		.cnt = n,
		.flags2 = ret ? MT_UPROBE_MULTI_RETURN : 0,
		.pid = pid,
	};
	int fd;

	if (attr.prog_fd == (uint32_t)-1)
		return -EINVAL;
	fd = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	return fd < 0 ? -errno : fd;
}

static int add_link(struct tracer_probe_set *set, size_t *cap, struct bpf_link *l)
{
	if (array__grow((void **)&set->links, cap, set->n_links + 1, sizeof(*set->links))) {
		bpf_link__destroy(l);
		return -ENOMEM;
	}
	set->links[set->n_links++] = l;
	return 0;
}

/* The fallback: a perf-event uprobe per function and direction. */
static size_t attach_each(struct tracer *t, const char *path, const uint64_t *off,
			  const uint64_t *cookie, const bool *ret, size_t n,
			  struct tracer_probe_set *set, tracer_probe_fail_fn fail, void *ctx)
{
	size_t i, cap = 0, done = 0;
	int r;

	for (i = 0; i < n; i++) {
		bool ok = true;

		for (r = 0; r <= (int)ret[i]; r++) {
			/* before 5.15 no cookie: the entry program of the function instead */
			LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = r,
				    .bpf_cookie = t->kf.attach_cookie ? cookie[i] : 0);
			struct bpf_program *p = r ? t->skel->progs.mt_dev_return
					      : t->kf.attach_cookie ? t->skel->progs.mt_dev_entry
					      : dev_copy(t, MEMTRAIL_COOKIE_NAME(cookie[i]));
			struct bpf_link *l = p ? bpf_program__attach_uprobe_opts(p, -1, path, off[i],
										 &opts)
					       : NULL;

			if (!l) {
				if (!p)
					errno = EINVAL;
				if (fail)
					fail(ctx, i, -errno);
				ok = false;
				continue;
			}
			if (add_link(set, &cap, l))
				return done;
		}
		done += ok;
	}
	return done;
}

static size_t attach_device_set(struct tracer *t, const char *path, const uint64_t *off,
				const uint64_t *cookie, const bool *ret, size_t n,
				struct tracer_probe_set *set, tracer_probe_fail_fn fail, void *ctx)
{
	uint64_t *roff, *rcookie;
	size_t i, nr = 0;
	int fd;

	set->fd[0] = set->fd[1] = -1;
	set->links = NULL;
	set->n_links = 0;
	if (!n)
		return 0;
	if (t->no_multi)
		return attach_each(t, path, off, cookie, ret, n, set, fail, ctx);
	fd = uprobe_multi(t->skel->progs.mt_dev_entry_multi, false, 0, path, off, cookie, n);
	if (fd < 0) {
		/* one bad offset refuses the whole link: then each function on its own */
		log__debug("cannot probe '%s' with uprobe_multi links: %s", path, strerror(-fd));
		return attach_each(t, path, off, cookie, ret, n, set, fail, ctx);
	}
	set->fd[0] = fd;
	roff = calloc(n, sizeof(*roff));
	rcookie = calloc(n, sizeof(*rcookie));
	if (!roff || !rcookie) {
		free(roff);
		free(rcookie);
		tracer__detach_device_set(set);
		if (fail)
			fail(ctx, -1, -ENOMEM);
		return 0;
	}
	for (i = 0; i < n; i++) {
		if (!ret[i])
			continue;
		roff[nr] = off[i];
		rcookie[nr++] = cookie[i];
	}
	if (nr) {
		fd = uprobe_multi(t->skel->progs.mt_dev_return_multi, true, 0, path, roff, rcookie,
				  nr);
		if (fd < 0) {
			/* entries without their returns would be half counted: each on its own */
			log__debug("cannot probe '%s' with uprobe_multi links: %s", path,
				   strerror(-fd));
			tracer__detach_device_set(set);
			n = attach_each(t, path, off, cookie, ret, n, set, fail, ctx);
		} else {
			set->fd[1] = fd;
		}
	}
	free(roff);
	free(rcookie);
	return n;
}

/*
 * Where BPF tells targets' code mappings, its program at the dynamic
 * linker's hook too (among the N functions of PATH), in SET. The kernel
 * runs it before or after the device entry program there (uprobe consumers
 * have no order): user space does not rely on either.
 */
static void attach_maps_hook(struct tracer *t, const char *path, const uint64_t *off,
			     const uint64_t *cookie, size_t n, struct tracer_probe_set *set)
{
	size_t i, cap = set->n_links;
	struct bpf_link *l;

	for (i = 0; t->maps_tell && i < n; i++) {
		if (MEMTRAIL_COOKIE_OP(cookie[i]) != MEMTRAIL_OP_LIBS)
			continue;
		l = bpf_program__attach_uprobe_opts(t->skel->progs.mt_maps_hook, -1, path, off[i],
						    NULL);
		if (!l)
			log__debug("cannot probe '%s' for its users' code mappings: %s", path,
				   strerror(errno));
		else if (add_link(set, &cap, l))
			return;
	}
}

/*
 * Descriptors kept free whatever the probes want: record's gate takes one
 * for each open it looks at (the kernel refuses the open itself when it
 * cannot give one), and the output files need theirs. Before uprobe_multi
 * (6.6) a file's probes are a perf event descriptor per function.
 */
#define FD_HEADROOM 64

/* Whether NEED more descriptors leave FD_HEADROOM free under the limit. */
static bool fds_left(size_t need)
{
	struct rlimit r;
	size_t used = 0;
	DIR *d;

	if (getrlimit(RLIMIT_NOFILE, &r) || r.rlim_cur == RLIM_INFINITY)
		return true;
	d = opendir("/proc/self/fd");
	if (!d)
		return true;
	while (readdir(d))
		used++;
	closedir(d);
	used = used > 3 ? used - 3 : 0;		/* ".", ".." and the directory's own */
	return used + need + FD_HEADROOM <= r.rlim_cur;
}

size_t tracer__attach_device_set(struct tracer *t, const char *path, const uint64_t *off,
				 const uint64_t *cookie, const bool *ret, size_t n,
				 struct tracer_probe_set *set, tracer_probe_fail_fn fail, void *ctx)
{
	size_t done, need = 4, i;

	for (i = 0; t->no_multi && i < n; i++)
		need += 1 + ret[i];
	if (!fds_left(need)) {
		set->fd[0] = set->fd[1] = -1;
		set->links = NULL;
		set->n_links = 0;
		fail(ctx, -1, -EMFILE);
		return 0;
	}
	done = attach_device_set(t, path, off, cookie, ret, n, set, fail, ctx);

	if (done)
		attach_maps_hook(t, path, off, cookie, n, set);
	return done;
}

void tracer__detach_device_set(struct tracer_probe_set *set)
{
	size_t i;
	int d;

	for (d = 0; d < 2; d++) {
		reaper__close(set->fd[d]);
		set->fd[d] = -1;
	}
	for (i = 0; i < set->n_links; i++)
		reaper__destroy_link(set->links[i]);
	free(set->links);
	set->links = NULL;
	set->n_links = 0;
}

size_t tracer__lib_pending(const struct tracer *t, uint32_t pid, struct memtrail_lib_key *keys,
			   size_t max)
{
	size_t i, n = 0;

	for (i = 0; i < t->n_lib_new && n < max; i++)
		if (t->lib_new[i].pid == pid)
			keys[n++] = t->lib_new[i].key;
	return n;
}

void tracer__lib_unseen(struct tracer *t, uint32_t pid, tracer_name_fn fn, void *ctx)
{
	size_t i;

	for (i = 0; i < t->n_lib_new; i++)
		if (t->lib_new[i].pid == pid)
			fn(ctx, pid, &t->lib_new[i].key, t->lib_new[i].name, t->lib_new[i].ts_ns);
	lib_new_settle(t, pid, false);
}

void tracer__lib_forget(struct tracer *t, const struct memtrail_lib_key *key)
{
	bpf_map_delete_elem(bpf_map__fd(t->skel->maps.lib_files), key);
}

bool tracer__tracking(const struct tracer *t)
{
	return t && t->track;
}

void tracer__lib_forget_file(struct tracer *t, uint64_t dev, uint64_t ino)
{
	int fd = bpf_map__fd(t->skel->maps.lib_files);
	struct memtrail_lib_key key, next;
	void *prev = NULL;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		/* deleting the current key would restart the walk: one behind */
		if (prev && key.dev == dev && key.ino == ino)
			bpf_map_delete_elem(fd, &key);
		key = next;
		prev = &key;
	}
	if (prev && key.dev == dev && key.ino == ino)
		bpf_map_delete_elem(fd, &key);
}

/* Keys of one (tgid, address) map that belong to one of TGIDS (N_TGIDS, sorted), into a new array. */
static struct memtrail_dev_key *keys_of_set(int fd, const uint32_t *tgids, size_t n_tgids,
					    size_t *n)
{
	struct memtrail_dev_key key, next, *keys = NULL, *grown;
	size_t cap = 0;
	void *prev = NULL;

	*n = 0;
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (!array__u32_has(tgids, n_tgids, key.tgid))
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 64;
			grown = realloc(keys, cap * sizeof(*keys));
			if (!grown)
				break;
			keys = grown;
		}
		keys[(*n)++] = key;
	}
	return keys;
}

/* Keys of one (tgid, address) map that belong to TGID, into a new array. */
static struct memtrail_dev_key *keys_of(int fd, uint32_t tgid, size_t *n)
{
	return keys_of_set(fd, &tgid, 1, n);
}

/*
 * Whether an allocation or handle BORN and DEAD (struct memtrail_dev_alloc)
 * is listed: for the device OOM of EPOCH, made before it and not gone
 * before it; else (0) the live ones.
 */
static bool dev_listed(__u32 born, __u32 dead, uint32_t epoch)
{
	return epoch ? born < epoch && (!dead || dead >= epoch) : !dead;
}

/*
 * Entries of TGID in device map FD kept for a listing (dead: released while a
 * device OOM snapshot was pending), now listed: they go.
 */
static void purge_dead(int fd, const struct memtrail_dev_key *keys, size_t n, size_t dead_at,
		       size_t value_size)
{
	char v[64];
	__u32 dead;
	size_t i;

	for (i = 0; i < n && value_size <= sizeof(v); i++) {
		if (bpf_map_lookup_elem(fd, &keys[i], v))
			continue;
		memcpy(&dead, v + dead_at, sizeof(dead));
		if (dead)
			bpf_map_delete_elem(fd, &keys[i]);
	}
}

int tracer__device_allocs(struct tracer *t, uint32_t tgid, uint32_t epoch, tracer_alloc_fn fn,
			  void *ctx)
{
	int afd = bpf_map__fd(t->skel->maps.dev_allocs);
	int hfd = bpf_map__fd(t->skel->maps.vmm_handles);
	struct memtrail_dev_key *akeys, *hkeys;
	size_t i, na, nh;

	akeys = keys_of(afd, tgid, &na);
	for (i = 0; i < na; i++) {
		struct memtrail_dev_alloc a;

		if (bpf_map_lookup_elem(afd, &akeys[i], &a))
			continue;
		if (dev_listed(a.born, a.dead, epoch))
			fn(ctx, akeys[i].addr, &a);
	}
	hkeys = keys_of(hfd, tgid, &nh);
	for (i = 0; i < nh; i++) {
		struct memtrail_vmm_handle h;
		struct memtrail_dev_alloc a;

		if (bpf_map_lookup_elem(hfd, &hkeys[i], &h) || !dev_listed(h.born, h.dead, epoch))
			continue;
		a = (struct memtrail_dev_alloc){ .size = h.size, .kind = h.kind,
						 .device = h.device, .phase = h.phase,
						 .name = UINT32_MAX };
		fn(ctx, hkeys[i].addr, &a);
	}
	if (epoch) {
		/* frees and releases delete again; what was kept for this listing goes */
		bpf_map_delete_elem(bpf_map__fd(t->skel->maps.dev_snap), &tgid);
		purge_dead(afd, akeys, na, offsetof(struct memtrail_dev_alloc, dead),
			   sizeof(struct memtrail_dev_alloc));
		purge_dead(hfd, hkeys, nh, offsetof(struct memtrail_vmm_handle, dead),
			   sizeof(struct memtrail_vmm_handle));
	}
	free(akeys);
	free(hkeys);
	return 0;
}

void tracer__device_forget(struct tracer *t, uint32_t tgid)
{
	int fds[] = {
		bpf_map__fd(t->skel->maps.dev_allocs), bpf_map__fd(t->skel->maps.vmm_handles),
		bpf_map__fd(t->skel->maps.vmm_maps), bpf_map__fd(t->skel->maps.ctx_device),
	};
	struct memtrail_dev_key *keys;
	size_t f, i, n;

	for (f = 0; f < sizeof(fds) / sizeof(fds[0]); f++) {
		keys = keys_of(fds[f], tgid, &n);
		for (i = 0; i < n; i++)
			bpf_map_delete_elem(fds[f], &keys[i]);
		free(keys);
	}
	bpf_map_delete_elem(bpf_map__fd(t->skel->maps.dev_snap), &tgid);
}

int tracer__attach_heap(struct tracer *t, bool ret, int pid, const char *path,
			const uint64_t *offsets, const uint64_t *cookies, size_t n)
{
	if (!fds_left(1))
		return -EMFILE;
	return uprobe_multi(ret ? t->skel->progs.mt_heap_return : t->skel->progs.mt_heap_entry,
			    ret, pid, path, offsets, cookies, n);
}

bool tracer__heap_multi(const struct tracer *t)
{
	return !t->no_multi;
}

int tracer__attach_heap_each(struct tracer *t, int pid, const char *path,
			     const uint64_t *entry_off, const uint64_t *entry_cookie, size_t n_entry,
			     const uint64_t *ret_off, const uint64_t *ret_cookie, size_t n_ret,
			     struct tracer_probe_set *set)
{
	size_t i, cap = 0;
	int r, err;

	set->fd[0] = set->fd[1] = -1;
	set->links = NULL;
	set->n_links = 0;
	if (!fds_left(n_entry + n_ret))
		return -EMFILE;
	for (r = 0; r < 2; r++) {
		const uint64_t *off = r ? ret_off : entry_off;
		const uint64_t *cookie = r ? ret_cookie : entry_cookie;
		struct bpf_program *p = r ? t->skel->progs.mt_heap_return
					  : t->skel->progs.mt_heap_entry;
		struct bpf_program *entries[MEMTRAIL_HEAP_OPS];

		heap_entries(t->skel, entries);
		for (i = 0; i < (r ? n_ret : n_entry); i++) {
			/* before 5.15 no cookie: the entry program of the operation instead */
			uint32_t op = MEMTRAIL_COOKIE_OP(cookie[i]);
			LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = r,
				    .bpf_cookie = t->kf.attach_cookie ? cookie[i] : 0);
			struct bpf_link *l;

			if (!r && !t->kf.attach_cookie) {
				if (op < 1 || op > MEMTRAIL_HEAP_OPS) {
					tracer__detach_device_set(set);
					return -EINVAL;
				}
				p = entries[op - 1];
			}
			l = bpf_program__attach_uprobe_opts(p, pid, path, off[i], &opts);

			if (!l) {
				err = -errno;
				tracer__detach_device_set(set);
				return err;
			}
			if (add_link(set, &cap, l)) {
				tracer__detach_device_set(set);
				return -ENOMEM;
			}
		}
	}
	return 0;
}

uint64_t tracer__heap_hits(struct tracer *t, uint32_t tgid)
{
	struct memtrail_target v;

	if (bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.targets), &tgid, &v))
		return 0;
	return v.heap_hits;
}

void tracer__heap_allow(struct tracer *t, uint32_t tgid, uint64_t allow)
{
	int fd = bpf_map__fd(t->skel->maps.heap_allow);

	if (allow)
		bpf_map_update_elem(fd, &tgid, &allow, BPF_ANY);
	else
		bpf_map_delete_elem(fd, &tgid);
}

int tracer__calibration_target(struct tracer *t, uint32_t pid, bool on)
{
	struct memtrail_target v = { 0 };

	if (!on) {
		tracer__forget(t, pid);
		tracer__drop_cell(t, pid, 0);
		tracer__sites_forget(t, &pid, 1);
		return 0;
	}
	if (bpf_map_update_elem(bpf_map__fd(t->skel->maps.targets), &pid, &v, BPF_ANY))
		return -errno;
	return 0;
}

void tracer__sites(struct tracer *t, tracer_site_fn fn, void *ctx)
{
	int fd = bpf_map__fd(t->skel->maps.sites);
	struct memtrail_site_key key, next;
	struct memtrail_site v;
	void *prev = NULL;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (!bpf_map_lookup_elem(fd, &key, &v))
			fn(ctx, &key, &v);
	}
}

int tracer__site_take(struct tracer *t, const struct memtrail_site_key *k,
		      struct memtrail_site *v)
{
	int fd = bpf_map__fd(t->skel->maps.sites);

	return bpf_map_lookup_and_delete_elem(fd, k, v) ? -errno : 0;
}

int tracer__stack(struct tracer *t, int32_t id, uint64_t ips[MEMTRAIL_SITE_DEPTH])
{
	uint32_t key = id;
	int n;

	memset(ips, 0, sizeof(uint64_t) * MEMTRAIL_SITE_DEPTH);
	if (id < 0 || bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.site_stacks), &key, ips))
		return -ENOENT;
	for (n = 0; n < MEMTRAIL_SITE_DEPTH && ips[n]; n++)
		;
	return n;
}

void tracer__sites_forget(struct tracer *t, const uint32_t *tgids, size_t n_tgids)
{
	int sfd = bpf_map__fd(t->skel->maps.sites);
	struct memtrail_site_key key, next, *keys = NULL, *grown;
	int fds[] = {
		bpf_map__fd(t->skel->maps.heap_allocs), bpf_map__fd(t->skel->maps.map_ranges),
	};
	struct memtrail_dev_key *akeys;
	size_t n = 0, cap = 0, i, f;
	void *prev = NULL;

	while (!bpf_map_get_next_key(sfd, prev, &next)) {
		key = next;
		prev = &key;
		if (!array__u32_has(tgids, n_tgids, key.tgid))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			grown = realloc(keys, cap * sizeof(*keys));
			if (!grown)
				break;
			keys = grown;
		}
		keys[n++] = key;
	}
	for (i = 0; i < n; i++)
		bpf_map_delete_elem(sfd, &keys[i]);
	free(keys);
	/* (tgid, address) keys share struct memtrail_dev_key's layout */
	for (f = 0; f < sizeof(fds) / sizeof(fds[0]); f++) {
		akeys = keys_of_set(fds[f], tgids, n_tgids, &n);
		for (i = 0; i < n; i++)
			bpf_map_delete_elem(fds[f], &akeys[i]);
		free(akeys);
	}
	for (i = 0; i < n_tgids; i++)
		bpf_map_delete_elem(bpf_map__fd(t->skel->maps.heap_allow), &tgids[i]);
}

/* The kernel's memory for memtrail's maps: each map's memlock in its fdinfo. */
uint64_t tracer__map_bytes(const struct tracer *t)
{
	const struct bpf_map *m;
	uint64_t sum = 0;

	bpf_object__for_each_map(m, t->skel->obj) {
		unsigned long long v;
		char path[64], line[128];
		FILE *f;
		int fd = bpf_map__fd(m);

		if (fd < 0)
			continue;
		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
		f = fopen(path, "re");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "memlock: %llu", &v) == 1) {
				sum += v;
				break;
			}
		fclose(f);
	}
	return sum;
}

const struct kernel_features *tracer__features(const struct tracer *t)
{
	return &t->kf;
}

void tracer__destroy(struct tracer *t)
{
	int i;

	if (!t)
		return;
	reaper__drain();	/* links handed over (a file's probes) are gone first */
	ring_buffer__free(t->rb);
	free(t->lib_new);
	free(t->ended);
	for (i = 0; i < MEMTRAIL_RULES_MAX; i++) {
		bpf_link__destroy(t->rule_links[i]);
		bpf_link__destroy(t->scope_links[i]);
	}
	memtrail_bpf__destroy(t->skel);
	free(t);
}
