/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The sites' own state, shared by their parts and by no other module:
 * sites.c (stacks resolved, the kernel's sites harvested, folded and
 * retired), sites_maps.c (each target's code mappings and the files they
 * name), sites_frames.c (sites as the trail keeps them, their frames named).
 */
#ifndef MEMTRAIL_SITES_INT_H
#define MEMTRAIL_SITES_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>

#include "pidmap.h"
#include "sites.h"

/* The phase of a folded site: this bit and the index of its phase's aggregate. */
#define SITE_FOLDED 0x80000000u

/* A function symbol of a module, by address (names are libdw's, live while its Dwfl is). */
struct modsym {
	GElf_Addr addr, size;
	const char *name;
	char *readable;		/* demangled, made on first use; NULL: not mangled or not yet */
	int rank;		/* which of several at one address is named: global, weak, local */
	bool demangled;
};

/* A file some target mapped code from, opened once for its symbols. */
struct py_layout;

struct py_layout;

struct module {
	char *name;		/* as the kernel names it in the target's maps */
	uint64_t dev, ino;
	/*
	 * The file the kernel maps, as BPF names it: on overlayfs the layer's,
	 * not the one maps shows; learnt where both name one mapping. 0: unknown
	 */
	uint64_t real_dev, real_ino;
	Dwfl *dwfl;		/* NULL: could not be opened */
	Dwfl_Module *mod;
	struct module_debug *debug;	/* where its debug file is looked for */
	char build_id[41];
	/*
	 * Its symbols sorted by address, read once: libdw's own lookup walks
	 * every symbol, and a large library (libtorch_cpu, 10^5 symbols) times
	 * 10^5 frames took a minute to write one trail.
	 */
	struct modsym *syms;
	size_t n_syms;
	bool syms_read;
	/* a CPython interpreter (sites_python.c): its version, 0 if none known */
	bool py_checked;
	uint32_t py_version;		/* Py_Version: 0x030b02f0 is 3.11.2 */
	bool py_layout_read;
	const struct py_layout *py_layout;	/* what its structures are, NULL: unknown */
	struct py_layout *py_layout_own;	/* py_layout where read from the file */
	const char *py_why;		/* py_layout NULL: why */
	GElf_Addr py_runtime;		/* _PyRuntime, module address */
	GElf_Addr py_code_type;		/* PyCode_Type, module address */
	GElf_Addr py_eval_lo, py_eval_hi;	/* _PyEval_EvalFrameDefault, module addresses */
	GElf_Addr py_eval_cold_lo, py_eval_cold_hi;	/* its .cold part, where there is one */
};

/* One frame: a module and an offset in its file, or an address outside files. */
struct frame {
	uint64_t addr;		/* SITE_FRAME_PY: index in the sites' Python frames */
	int32_t module;		/* index in modules; -1: anonymous or JIT code; -2: unknown */
	uint64_t offset;	/* file offset */
};
#define SITE_FRAME_PY (-3)	/* a Python frame (sites_python.c) */

/* A Python function at a line, as frames name it. */
struct py_frame {
	char *function;		/* co_qualname; NULL: not read (why says) */
	char *file;		/* co_filename */
	int line;		/* 0: unknown */
	const char *why;	/* a frame that could not be read: why */
	size_t id;		/* its index in the sites' py */
};

/*
 * Stacks user space unwound itself (deep samples, sites_deep.c) have ids of
 * their own, below the kernel's none (-1), deep (-2) and small (-3) marks.
 */
#define SITE_DEEP_ID(n) (-4 - (int32_t)(n))
static inline bool site_deep(int32_t id)
{
	return id <= -4;
}

struct stack {
	uint32_t pid;
	int32_t id;
	struct frame *frames;
	uint32_t n;
	bool truncated;	/* cut at a frame that is no code, or no return address */
	bool unplaced;	/* a frame was in no mapping known then: resolved again when one comes */
};

struct site {
	struct memtrail_site_key key;
	struct memtrail_site v;
	/*
	 * What user space added itself (deep samples): a key the kernel
	 * reports too (a deep sample named by its frame-pointer stack) gets
	 * the kernel's figures and these
	 */
	struct memtrail_site own;
	struct frame caller;	/* key.caller resolved; module -2: not a call site */
	bool resolved;
};

#define PID_MAPS_MAX 8192	/* executable mappings kept per process, unmapped ones too */
#define TOLD_MAX 1024		/* mappings BPF told of files not matched yet */
#define TOLD_FILES_MAX 8192	/* paths of files BPF told, kept (its table's size) */

struct pid_maps {
	uint32_t pid;
	uint64_t gen;	/* the harvest that read them last */
	bool py_set;	/* its interpreter told to BPF (or none found) */
	uint64_t read_ns;	/* CLOCK_MONOTONIC when they were last read from /proc */
	uint64_t exec_ns;	/* its last exec's time: maps read before are another program's */
	struct map {
		unsigned long long start, end, pgoff;
		int32_t module;	/* -1: anonymous */
		bool before_exec;	/* mapped before the process's last exec: another program's */
	} *maps;
	size_t n, cap;
	uint32_t unplaced;	/* its stacks resolved with a frame in none of them */
};

/*
 * Where a module's separate debug file is looked for (libdw's standard
 * search, by build ID then .gnu_debuglink): FILE is the module's path as
 * memtrail reaches it (through its process's root), PATH libdw's
 * debuginfo_path with the root's /usr/lib/debug first. One per module:
 * libdw keeps a pointer to the callbacks.
 */
struct module_debug {
	Dwfl_Callbacks cb;
	char *file;
	char *path;
};

struct sites {
	struct tracer *tracer;
	dev_t root_dev;		/* memtrail's own root directory */
	ino_t root_ino;
	struct module *modules;	/* name NULL: a free slot (a file closed) */
	size_t n_modules, cap_modules;
	size_t free_modules;	/* free slots */
	size_t sweep_at;	/* open modules at which unused ones are closed */
	struct stack **stacks;
	size_t n_stacks, cap_stacks;
	void *stack_index;	/* tsearch tree of stacks by (pid, id) */
	struct site **list;
	size_t n_list, cap_list;
	void *site_index;	/* tsearch tree of list by key */
	uint64_t gen;		/* harvests so far */
	/*
	 * BPF tells each process's code mappings (maps.bpf.c): /proc/PID/maps is
	 * read only to learn a file BPF names by an unknown (dev, inode)
	 */
	bool maps_told;
	struct maps_reader *maps_reader;	/* elsewhere: maps read as BPF asks (maps_reader.h) */
	uint64_t event_ns;	/* the time of the event being acted on: its reads are taken */
	struct trail *trail;	/* its targets' phases, for folding */
	struct memtrail_site_key *fold;	/* kernel sites to fold, this harvest */
	size_t n_fold, cap_fold;
	struct pid_maps *pids;
	size_t n_pids, cap_pids;
	struct pidmap pid_index;	/* pid -> its pids entry: looked up per event */
	/*
	 * Mappings BPF told of files known by no module yet under BPF's name
	 * (overlayfs: the layer's file, maps the overlay's): kept until a read
	 * of maps shows one of them, which teaches the module its BPF name;
	 * the oldest dropped when full
	 */
	struct told_map {
		uint32_t pid;
		unsigned long long start, end, pgoff;
		uint64_t dev, ino;
	} told[TOLD_MAX];
	size_t n_told;
	/*
	 * Where BPF's files are (MEMTRAIL_EV_FILE): each one's path from its
	 * filesystem's root, to open it where no process that maps it is left
	 * to read maps from; the oldest dropped when full
	 */
	struct told_file {
		uint64_t dev, ino;	/* as maps shows them (DEV_KEY) */
		char *path;
		bool unopened;	/* no mount of its filesystem held it: not tried again */
	} *told_files;
	size_t n_told_files, cap_told_files;
	/* deep samples (sites_deep.c): stacks by content, live allocations by address */
	void *deep_index;
	void *deep_allocs;
	uint32_t deep_next;		/* stacks made so far: the next one's id */
	uint32_t deep_live, deep_cap;	/* chains of live targets, and at most (0: no cap) */
	struct sites_deep_stats deep;
	/* Python frames named so far, and code objects read, by target */
	struct py_frame **py;
	size_t n_py, cap_py;
	void *py_index;		/* tsearch tree of py's frames by content */
	void *py_codes;		/* tsearch tree of code objects read, by (pid, address) */
	uint64_t py_said[4];	/* minor versions whose frames not read were said, a bit each */
	sites_py_unread_fn py_unread_fn;
	void *py_unread_ctx;
	bool forget_stacks;	/* retiring pids' own stacks leave the kernel too */
	/* while retiring (sites__retire): the pids whose sites are read, sorted; NULL: all */
	const uint32_t *only;
	size_t n_only;
};

/* Open files at least before unused ones are closed (sites_modules_sweep) */
#define MODULES_SWEEP_MIN 16

/* Close M's file and free all it holds: its slot is free (name NULL). */
void sites_module_close(struct module *m);
/* Close the files nothing kept names any more, once enough are open. */
void sites_modules_sweep(struct sites *s);
/* The module address (libdw's) of file offset OFF of M: false where no segment holds it. */
bool sites_module_addr(const struct module *m, uint64_t off, GElf_Addr *addr);
/* stack_index's order: by (pid, id). */
int sites_stack_cmp(const void *a, const void *b);
/* The user-space entry of site key K, made if new (sites.c); NULL: out of memory. */
struct site *sites_entry(struct sites *s, const struct memtrail_site_key *k);
/* Drop entry E (sites.c). */
void sites_remove(struct sites *s, struct site *e);
/* Whether a site of phase SEQ of PID folds into its name's (sites.c). */
bool sites_folds(struct sites *s, uint32_t pid, uint32_t seq);
/* The folded key of K (its phase's aggregate), for a K of a phase that folds. */
struct memtrail_site_key sites_folded_key(struct sites *s, const struct memtrail_site_key *k);
/* ADDR in PM as a frame (module and file offset, or none). */
void sites_frame_resolve(const struct pid_maps *pm, uint64_t addr, struct frame *fr);
/* Whether OFF of M can be a return address (just after a call; true where M cannot be read). */
bool sites_return_address_ok(const struct module *m, uint64_t off);
/* Deep sites of phases that now fold, folded (sites__harvest); PID's deep state dropped. */
void sites_deep_fold(struct sites *s);
void sites_deep_forget(struct sites *s, uint32_t pid);
void sites_deep_destroy(struct sites *s);
/* Python (sites_python.c): PID's interpreter told to BPF where one of its modules is one. */
void sites_python_note(struct sites *s, struct pid_maps *pm);
/* The same for PM's map I alone (a mapping BPF told of). */
void sites_python_note_map(struct sites *s, struct pid_maps *pm, size_t i);
/*
 * E's Python frames stood in place of the interpreter's eval frames of
 * FRAMES (N native frames, *N updated, at most MAX; SPS their stack
 * pointers, 0 where unknown): each _PyEval_EvalFrameDefault call's Python
 * frames, innermost first.
 */
void sites_python_interleave(struct sites *s, const struct pid_maps *pm,
			     const struct memtrail_event_deep *e, const uint64_t *sps,
			     struct frame *frames, int *n, int max);
void sites_python_forget(struct sites *s, uint32_t pid);
void sites_python_destroy(struct sites *s);

void sites_module_debug_free(struct module_debug *d);
/* Add D to site E's figures, as user space's own (sites_site_add). */
void sites_site_add(struct site *e, const struct memtrail_site *d);
/* tdestroy's free for trees whose nodes another owns. */
void sites_no_free(void *p);
/*
 * The nodes of ROOT (a tsearch tree ordered by CMP) whose PID_OF is PID,
 * deleted from it and given in *OUT (free()d by the caller, and the nodes as
 * their owner does): how many.
 */
size_t sites_tree_take(void **root, int (*cmp)(const void *, const void *), uint32_t pid,
		       uint32_t (*pid_of)(const void *node), void ***out);
/* PID's mappings as kept (sites_maps.c); with CREATE, made empty where none are. NULL: none. */
struct pid_maps *sites_pid_maps_get(struct sites *s, uint32_t pid, bool create);
/* PID's maps: the maps reader's reads of UNTIL_NS or before, then /proc's now. */
void sites_maps_read(struct sites *s, uint32_t pid, uint64_t until_ns);
/* The stack ID of PID as resolved, or NULL. */
struct stack *sites_stack_find(struct sites *s, uint32_t pid, int32_t id);
/* The same, resolved now where it is not (or no longer) resolved; NULL if it cannot be. */
struct stack *sites_stack_get(struct sites *s, uint32_t pid, int32_t id);
/*
 * PM's process has mappings it did not have when some of its stacks were
 * resolved (a harvest can read a site before the ring buffer's events that
 * tell its code): those stacks go, to be resolved again at their next use.
 */
void sites_stacks_replace(struct sites *s, struct pid_maps *pm);

#endif
