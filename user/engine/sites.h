/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Allocation sites in user space: the kernel's per-(target, phase, kind,
 * stack) figures, their stacks resolved against each target's mappings
 * while it lives (file and offset, through its root), and symbolized by
 * file with libdwfl (symbols, DWARF lines, build IDs, separate debug files),
 * each file once.
 */
#ifndef MEMTRAIL_SITES_H
#define MEMTRAIL_SITES_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "tracer.h"
#include "trail.h"

struct sites;

/* The CPython versions whose frames deep stacks read (sites_python.c), as said to people. */
#define SITES_PYTHON_VERSIONS "CPython 3.10 to 3.14, builds with a GIL"
/* The site of the mapping sections of a process below sites_from (watch --sites-from) */
#define SITES_SMALL_LABEL "[before --sites-from]"

/* Deep samples (--unwind dwarf): what their unwinding gave. */
struct sites_deep_stats {
	uint64_t samples;	/* allocations told with their stack top */
	uint64_t complete;	/* unwound to the thread's first frame */
	uint64_t cut_code;	/* stopped at code with no call-frame information or no file */
	uint64_t cut_stack;	/* stopped where the stack copy ended */
	uint64_t frees;		/* their frees told */
	uint64_t fp_named;	/* named by their frame-pointer stack: the process was gone */
	uint64_t lost;		/* chains not kept: CAP of them already (sites__deep_cap) */
};

/* Deep chains kept at most, as the kernel's stack table for frame-pointer stacks. */
void sites__deep_cap(struct sites *s, uint32_t cap);

/*
 * FN is told of each process whose Python frames are not read (its CPython
 * version, as people write it, and why), after the word is said.
 */
typedef void (*sites_py_unread_fn)(void *ctx, uint32_t pid, const char *version,
				   const char *why);
void sites__on_py_unread(struct sites *s, sites_py_unread_fn fn, void *ctx);

/* TRAIL: its targets' phases, so that sites of folded phases fold by name. */
int sites__open(struct sites **out, struct tracer *t, struct trail *trail);
void sites__destroy(struct sites *s);

/*
 * Read the kernel's sites; resolve new stacks of targets still alive. Sites
 * of phases beyond the trail's lists (--phase-history) are taken out of the
 * kernel and kept by phase name, so memory stays flat in the number of phases.
 */
void sites__harvest(struct sites *s);
/* Remember PID's mappings now (its stacks resolve after it exits). */
void sites__note_maps(struct sites *s, uint32_t pid);
/*
 * The maps the maps reader read for BPF (where BPF does not tell them) at
 * UNTIL_NS or before: before each event of that time is acted on.
 */
void sites__take_maps(struct sites *s, uint64_t until_ns);
/* Whether BPF tells processes' code mappings (then maps are read only to learn a new file). */
bool sites__maps_told(const struct sites *s);
/*
 * One of a target's code mappings as BPF read it (maps.bpf.c), so that a
 * process that exits before its maps are read has its stacks named: by the
 * module of that file, or (a file BPF names otherwise than maps does, as on
 * overlayfs) once a read of some process's maps shows it.
 */
void sites__add_map(struct sites *s, const struct memtrail_event_map *e);
/* Where a file BPF tells mappings of is (maps.bpf.c): opened from there if no process can say. */
void sites__add_file(struct sites *s, const struct memtrail_event_file *e);
/*
 * PID exec'd at TS_NS: the interpreter found in its mappings before (its
 * parent's, from the fork) is forgotten, here and in BPF, until its new maps
 * are read; a deep sample after it is never unwound by the maps of before.
 */
void sites__exec(struct sites *s, uint32_t pid, uint64_t ts_ns);
/*
 * CHILD was forked by PARENT: its code mappings, read now; where it is gone
 * already, PARENT's (read now too), as its code lay where PARENT's does.
 * Where BPF tells code mappings (sites__maps_told), PARENT's as told, read
 * only if none were.
 */
void sites__fork(struct sites *s, uint32_t parent, uint32_t child);
/*
 * The sites of target TT as the trail keeps them, heaviest first, phases
 * named from TT. NULL when it has none (or memory ran out).
 */
struct trail_sites *sites__collect(struct sites *s, const struct trail_target *tt);
/* The frames of PID's kernel stack STACK (as harvested) appended to SITE's. */
void sites__stack_frames(struct sites *s, uint32_t pid, int32_t stack, struct trail_site *site);
/*
 * A deep sample (BPF's registers and stack top of an allocation): unwound by
 * the call-frame information of the files the target maps, its bytes added
 * to the site of that chain; its free, taken off again.
 */
void sites__deep(struct sites *s, const struct memtrail_event_deep *e);
void sites__deep_free(struct sites *s, const struct memtrail_event_deep_free *e);
const struct sites_deep_stats *sites__deep_stats(const struct sites *s);
/*
 * From now on a retiring pid's stacks that no other pid's site names leave
 * the kernel's table too, and files nothing kept names are closed (watch and
 * top, which keep only the living: a node that runs processes all day would
 * fill both). record keeps them.
 */
void sites__forget_stacks(struct sites *s);
/* Called with each retiring pid while its sites are still here (sites__collect). */
typedef void (*sites_retire_fn)(void *ctx, uint32_t pid);
/*
 * PIDS (N, sorted) ended and are about to be free for other processes: their
 * last figures are read from the kernel (their stacks resolved against the
 * mappings kept, never a later process's), FN takes each one's sites, and
 * all they had is dropped here and in the kernel, so that a process given
 * one of the pids later starts with none of theirs.
 */
void sites__retire(struct sites *s, const uint32_t *pids, size_t n, sites_retire_fn fn,
		   void *ctx);

#endif
