/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The state of devices, shared by its parts and by no other module:
 * devices.c (open, processes' scans, exec, fork and exit),
 * devices_files.c (the files seen, by identity: opened, released,
 * forgotten), devices_probe.c (a file's runtime functions and launch
 * probes), devices_roots.c (the runtimes of the roots processes run in),
 * devices_prepare.c (runtimes probed before a process maps them),
 * devices_sites.c (call sites named from mappings).
 */
#ifndef MEMTRAIL_DEVICES_INT_H
#define MEMTRAIL_DEVICES_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <sys/types.h>

#include "devices.h"
#include "pidmap.h"
#include "proc.h"
#include "tracer.h"

#define LAUNCH_MAX 8	/* launch functions one file may hold */

#define DEV_KEYS 8

struct dev_file {
	dev_t dev;
	ino_t ino;
	/*
	 * Its change time and size when read: a file deleted and another made
	 * on its inode number (ext4 gives a freed inode to the next file) is
	 * not taken for the first. Only a file memtrail holds nothing for can
	 * be deleted so: probes and descriptors keep their inode.
	 */
	struct timespec ctime;
	off_t size;
	uint32_t gen;		/* its i_generation (lib_files keys), where gen_known */
	bool gen_known;
	/*
	 * The hook's key for it was seen to be maps' own (dev, ino): not so on
	 * overlayfs, where the hook sees the overlay's inode and maps the
	 * layer's. Only then does a hold tell a new file on its inode number.
	 */
	bool hook_keyed;
	uint64_t checked_ms;	/* its identity last stat()ed then (devices.now_ms) */
	char *name;	/* its path as first seen (names call sites after a process exits) */
	int fd;		/* opened as mapped (proc.h), kept while launch probes may attach; -1 */
	char path[32];	/* opens it from here: /proc/self/fd/FD */
	struct tracer_probe_set probes;
	/*
	 * Launch functions fire often: probed only while a process that maps
	 * the file has not yet started "execute" (or no process is known yet).
	 */
	uint32_t launch_spec[LAUNCH_MAX];
	uint64_t launch_off[LAUNCH_MAX];
	size_t n_launch;
	struct tracer_probe_set launch;
	bool launch_on;
	bool runtime;	/* CUDA or Neuron (not the loader's hook) */
	bool pinned;	/* memtrail's own file, probed before its command ran: kept */
	/*
	 * Opened at record's gate on overlayfs: the overlay's (dev, ino), as
	 * the kernel's hook sees the file mapped, and maps shows it from Linux
	 * 6.9 (before, maps shows the layer's, its key here); indexed too
	 * (file_alias). 0: none.
	 */
	dev_t alias_dev;
	ino_t alias_ino;
	uint64_t probed_ns;	/* CLOCK_MONOTONIC when its probes went on (bpf_ktime_get_ns's clock) */
	/*
	 * The kernel's keys (lib_files) of what the processes scanned for it had
	 * mapped first: its own among them, as the hook saw it (overlayfs shows
	 * the hook another inode than maps), maybe another new file's too (an
	 * extra scan later, no harm). Dropped at release, with maps' own key.
	 */
	struct memtrail_lib_key keys[DEV_KEYS];
	size_t n_keys, next_key;
	/*
	 * No process memtrail knows maps it any more: probes removed and the
	 * file closed (a deleted image layer is not kept on disk). The entry
	 * stays, for its name; the next process that maps it probes it again.
	 */
	bool released;
	uint64_t release_ms;	/* a release is due then (0: none) */
	uint32_t seen;		/* devices.gen when last looked up */
	/*
	 * Open while a runtime's user maps it (sym_users: its kept mappings
	 * that name this file), as that process mapped it: its call sites are
	 * named after it exits. By path they often cannot be: a container's
	 * path is not memtrail's, and on overlayfs the mapped file is the layer's
	 * inode, not the one its path shows. -1: not open.
	 */
	int sym_fd;
	char sym_path[32];
	uint32_t sym_users;
};

/*
 * A node maps ever new files (each container image brings its own copies of
 * python and libc): a file memtrail holds nothing for (no probe, descriptor
 * or key, no process lists it) is a seen-before mark only, so that its
 * symbols are not read at each exec. When the files reach FILES_KEEP, or
 * twice those kept at the last forgetting, such files not looked up since
 * then are forgotten; a process that maps one again has it read once more.
 * Memory follows the files in use, not every file the node ever ran.
 */
#define FILES_KEEP 1024

struct dev_proc {
	uint32_t pid;
	uint64_t due_ms;	/* a scan is due then; 0: none */
	uint64_t rescan_ms;	/* after that scan, another then (an exec's); 0: none */
	bool listed;		/* its pid is in devices.due */
	bool executed;		/* its launch probes are not wanted */
	size_t root;		/* its root in devices.roots + 1; 0: memtrail's own, or unknown */
	struct proc_file {
		size_t file;	/* index in devices.files */
	} *files;		/* probed runtimes it maps (at a scan, or its parent's at fork) */
	size_t n_files, cap_files;
	/* its executable mappings at the last scan: call sites after it exits */
	struct proc_map {
		unsigned long long start, end, pgoff;
		dev_t dev;
		ino_t ino;
		char *path;	/* as the kernel names it */
		size_t file;	/* its devices.files entry, holding it open (sym_fd) when kept */
		bool kept;
	} *maps;
	size_t n_maps, cap_maps;
};

struct devices {
	struct tracer *tracer;
	struct dev_file *files;
	size_t n_files, cap_files;
	/* files by (dev, ino): an index + 1 (0: empty), open addressing, at most half full */
	size_t *file_slots;
	size_t n_slots;		/* a power of two */
	uint32_t gen;		/* forgettings so far */
	size_t forget_at;	/* files that make the next one */
	struct dev_proc *procs;
	size_t n_procs, cap_procs;
	struct pidmap proc_index;	/* pid -> its index in procs: one per process on the node */
	/* the pids with a scan due: a tick looks at those, not at every process */
	uint32_t *due;
	size_t n_due, cap_due;
	bool due_lost;			/* out of memory listing one: the next tick looks at all */
	/* files whose last known user is gone: released at release_ms unless mapped again */
	size_t *dropped;
	size_t n_dropped, cap_dropped;
	uint64_t now_ms;	/* the session's clock at the last tick */
	/*
	 * Root directories targets run in other than memtrail's (containers,
	 * chroots): the runtimes their loader caches name are probed while a
	 * known process runs in one, before any process maps them.
	 */
	struct dev_root {
		dev_t dev;
		ino_t ino;
		uint32_t users;		/* known processes in it */
		struct dev_root_file {
			dev_t dev;
			ino_t ino;
		} *files;		/* the runtimes probed for it */
		size_t n_files, cap_files;
	} *roots;
	size_t n_roots, cap_roots;
	struct dev_root *root_now;	/* the root root_file() probes for; NULL: memtrail's */
	uint32_t root_pid;	/* a process in it (0: memtrail), whose mounts its files are on */
	dev_t self_dev;		/* memtrail's own root */
	ino_t self_ino;
	bool quiet;	/* probing what the loader cache names: debug messages only */
	bool attaching;	/* scanning what ran before memtrail: nothing it mapped is late */
	devices_late_fn on_late;
	void *late_ctx;
	bool said;	/* what this kernel cannot do with device memory, said once */
	bool loader_only;	/* --no-devices: the dynamic linker's hook, no runtime */
};

/* The process PID, added when CREATE; NULL if not known (or no memory). */
struct dev_proc *devices_proc_get(struct devices *d, uint32_t pid, bool create);
/* P maps (or is about to map) probed runtime file IDX: it keeps the file probed. */
void devices_proc_file_add(struct dev_proc *p, size_t idx);

/* The file (dev, ino) seen before, or NULL (devices_files.c). */
struct dev_file *devices_file_find(const struct devices *d, dev_t dev, ino_t ino, size_t *index);
/* The file (DEV, INO), probed when new: opened as PID maps it at M, else through HOST. */
struct dev_file *devices_file_get(struct devices *d, dev_t dev, ino_t ino, uint32_t pid,
				  const struct proc_map_line *m, const char *host,
				  const char *name_as, size_t *index);
/* memtrail's own open file FD, known as its mappings will show it. */
struct dev_file *devices_file_get_fd(struct devices *d, int fd, const struct file_ids *ids,
				     const char *name, size_t *index);
/* Whether F has probes. */
bool devices_file_probed(const struct dev_file *f);
/* Whether memtrail holds nothing for F: a seen-before mark only. */
bool devices_file_idle(const struct dev_file *f);
/* The key among PEND that is the file M maps; NULL: none. */
const struct memtrail_lib_key *devices_pend_key(const struct memtrail_lib_key *pend,
						size_t n_pend, const struct proc_map_line *m);
/* Whether the file PID maps at M is another than the entry for its (dev, ino). */
bool devices_mapping_replaced(struct devices *d, uint32_t pid, const struct proc_map_line *m,
			      const struct memtrail_lib_key *pend, size_t n_pend);
/* Whether a process memtrail knows maps file IDX. */
bool devices_file_used(const struct devices *d, size_t idx);
/* File IDX's last known user is gone: released later unless mapped again. */
void devices_file_drop(struct devices *d, size_t idx);
/* The last process that mapped file IDX is gone: its probes and descriptor go too. */
void devices_file_release(struct devices *d, size_t idx);
/* Forget the idle files not looked up since the last forgetting (FILES_KEEP). */
void devices_files_forget(struct devices *d);

/* Probe a newly seen file, open as f->path (devices_probe.c). */
void devices_probe_file(struct devices *d, struct dev_file *f);
/* F's launch probes off. */
void devices_launch_detach(struct dev_file *f);
/* Launch probes of file IDX on or off, as the processes that map it want them. */
void devices_launch_update(struct devices *d, size_t idx);
/* The same for each file P maps. */
void devices_proc_launch_update(struct devices *d, struct dev_proc *p);

/* The runtimes the system's loader cache names, probed (devices_roots.c). */
void devices_prepare_system(struct devices *d);
/* Whether file IDX is a runtime of a root some known process runs in. */
bool devices_root_keeps(const struct devices *d, size_t idx);
/* P runs in its root: one other than memtrail's has its runtimes probed. */
void devices_root_enter(struct devices *d, struct dev_proc *p, uint32_t pid);
/* P leaves its root: the last known process in one lets its runtimes go. */
void devices_root_leave(struct devices *d, struct dev_proc *p);

#endif
