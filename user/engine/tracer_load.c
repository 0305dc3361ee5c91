// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Which of the object's programs load on this kernel, and the maps' sizes. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "devspecs.h"
#include "log.h"
#include "tracer_int.h"
#include "memtrail_compat.skel.h"

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
void tracer_heap_entries(struct memtrail_bpf *s, struct bpf_program *each[MEMTRAIL_HEAP_OPS])
{
	struct bpf_program *progs[MEMTRAIL_HEAP_OPS] = {
		s->progs.mt_heap_entry_1, s->progs.mt_heap_entry_2, s->progs.mt_heap_entry_3,
		s->progs.mt_heap_entry_4, s->progs.mt_heap_entry_5, s->progs.mt_heap_entry_6,
		s->progs.mt_heap_entry_7,
	};

	memcpy(each, progs, sizeof(progs));
}

/* The per-rule programs, for kernels without bpf_cookie. */
void tracer_rule_copies(struct memtrail_bpf *s, struct bpf_program *each[MEMTRAIL_RULE_PROGS])
{
	struct bpf_program *progs[MEMTRAIL_RULE_PROGS] = {
		s->progs.mt_rule_0, s->progs.mt_rule_1, s->progs.mt_rule_2, s->progs.mt_rule_3,
		s->progs.mt_rule_4, s->progs.mt_rule_5, s->progs.mt_rule_6, s->progs.mt_rule_7,
	};

	memcpy(each, progs, sizeof(progs));
}

/* The entry program of device function I on kernels without bpf_cookie. */
struct bpf_program *tracer_dev_copy(struct tracer *t, int i)
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
/* Say what the user asked for and will not get, or gets in another way. */
static void say_features(const struct kernel_features *kf, const struct tracer_config *cfg)
{
	int i;

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
}

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
	tracer_rule_copies(s, each);
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
		struct bpf_program *p = tracer_dev_copy(t, i);

		bpf_program__set_autoload(p, !kf->attach_cookie && (size_t)i < n_specs &&
					     (device || (entry && devspecs__loader(i))));
		bpf_program__set_autoattach(p, false);
	}
	bpf_program__set_autoload(s->progs.mt_dev_exec, device && kf->for_each_elem);
	/* after mt_exec, on the same tracepoint (tracer.c, attach_after_exec) */
	bpf_program__set_autoattach(s->progs.mt_dev_exec, false);
	t->track = track;
	/* sites' stacks named however short a process's life: its code mappings from BPF */
	t->maps_tell = track && stacks && kf->f[FEAT_SITE_MAPS].state == FEATURE_YES && !t->compat;
	bpf_program__set_autoload(s->progs.mt_exec_maps, t->maps_tell);
	bpf_program__set_autoattach(s->progs.mt_exec_maps, false);
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
	t->maps_wanted = s->rodata->libs_urgent;
	if (kf->mmap_lock_args < 3)
		bpf_program__set_autoload(s->progs.mt_unmapped_area, false);

	say_features(kf, cfg);
	return 0;
}

/*
 * Phase cells at least: a phase's cell is freed when user space reads its
 * end, and a program entering 20,000 phases a second has thousands open
 * while user space catches up (a loaded node: seen filling 8192).
 */
#define CELLS_MIN 65536

/*
 * Where deep samples are taken, the ring buffer's size (RING, doubled while
 * it holds fewer than 16 deep samples past what it keeps for the others)
 * and in *ROOM the unread bytes past which BPF takes no deep sample
 * (deep_reserve()): above them the exact records have TRACER_RING_EXACT,
 * with one deep sample per CPU to spare for those that pass the test at
 * once (a record is 8 bytes of header more).
 */
static uint32_t deep_ring(uint32_t ring, int nr_cpus, uint64_t *room)
{
	uint64_t deep = sizeof(struct memtrail_event_deep) + 8;
	uint64_t spare = TRACER_RING_EXACT + (uint64_t)nr_cpus * deep;

	while (ring < spare + 16 * deep && ring < (1U << 30))
		ring <<= 1;
	*room = ring > spare ? ring - spare : 0;
	return ring;
}

static int configure(struct tracer *t, const struct tracer_config *cfg)
{
	struct bpf_program *entries[MEMTRAIL_HEAP_OPS];
	struct memtrail_bpf *s = t->skel;
	uint32_t n = cfg->max_targets, ring;
	bool heap, map_deep;
	uint64_t room;
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
	s->rodata->page_shift = __builtin_ctzl((unsigned long)sysconf(_SC_PAGESIZE));
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
	s->rodata->sites_device = cfg->sites.device && !cfg->no_devices;
	s->rodata->has_task_regs = t->kf.task_pt_regs;
	s->rodata->has_find_vma = t->kf.find_vma;
	s->rodata->has_scopes = scopes(cfg);
	s->rodata->oom_by_pid = t->kf.mark_victim_args == 1;
	s->rodata->heap_track = cfg->sites.heap_track;
	s->rodata->heap_sample = cfg->sites.heap_sample;
	s->rodata->heap_budget = cfg->sites.heap_budget;
	s->rodata->heap_deep = cfg->sites.heap_deep;
	map_deep = cfg->sites.map_deep && s->rodata->sites_mapping;
	s->rodata->map_deep = map_deep && !t->compat && t->kf.task_pt_regs;
	s->rodata->map_deep_min = cfg->sites.map_deep_min;
	s->rodata->sites_from = cfg->sites.map_from;
	if (map_deep && !s->rodata->map_deep)
		log__info("mapping sites: frame-pointer stacks (deep ones need the task's user "
			  "registers in BPF, bpf_task_pt_regs, and the object for kernels with BPF "
			  "atomics; kernel %s)", t->kf.release);
	s->rodata->fault_sample = cfg->sites.fault_sample ? cfg->sites.fault_sample : 1;
	bpf_program__set_autoload(s->progs.mt_unmapped_area, cfg->sites.mapping);
	bpf_program__set_autoload(s->progs.mt_fault, cfg->sites.faults);
	heap = cfg->sites.heap && t->kf.f[FEAT_HEAP].state != FEATURE_NO;
	bpf_program__set_autoload(s->progs.mt_heap_entry, heap && t->kf.attach_cookie);
	bpf_program__set_autoload(s->progs.mt_heap_return, heap);
	tracer_heap_entries(s, entries);
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
	/* no live heap allocations kept (no heap probes, or windows): a million-bucket table is 16 MiB */
	/*
	 * deep samples are 16 KiB each: room for a burst of them while user
	 * space unwinds (fewer where only large mapping sections are deep)
	 */
	ring = deep_ring(cfg->sites.heap_deep || !cfg->sites.map_deep_min ?
			 TRACER_RING_DEEP : TRACER_RING_DEEP_LARGE, t->nr_cpus, &room);
	s->rodata->deep_room = room;
	if (((cfg->sites.heap_deep || s->rodata->map_deep) &&
	     bpf_map__set_max_entries(s->maps.events, ring)) ||
	    ((!heap || !cfg->sites.heap_track) &&
	     bpf_map__set_max_entries(s->maps.heap_allocs, 1)) ||
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

	if (!st->mapping && !st->faults && !st->heap && !st->device)
		return 1;	/* no sites: no stacks */
	return st->stacks ? st->stacks : st->heap ? TRACER_STACKS_HEAP : TRACER_STACKS;
}

/*
 * Open the object, size its maps, choose its programs and load it; errors
 * said, but one of the load itself: -EAGAIN (its error in *LOAD_ERR), to be
 * said, or tried again without what this kernel may refuse.
 */
int tracer_load_object(struct tracer *t, const struct tracer_config *cfg, int *load_err)
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
