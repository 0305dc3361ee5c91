// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "array.h"
#include "demangle.h"
#include "devices.h"
#include "devspecs.h"
#include "elfsym.h"
#include "kfeatures.h"
#include "log.h"
#include "proc.h"
#include "roots.h"
#include "sanitize.h"

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

/*
 * A file's last known user is gone: its release waits this long, so that a
 * process that mapped it meanwhile (not told at once: the file was probed)
 * is scanned first and keeps it. Its lib_files keys go at once: whoever maps
 * it from then on is scanned at once.
 */
#define RELEASE_DELAY_MS 1000

struct dev_proc {
	uint32_t pid;
	uint64_t due_ms;	/* a scan is due then; 0: none */
	uint64_t rescan_ms;	/* after that scan, another then (an exec's); 0: none */
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

/* A runtime a loader cache names (roots.h), probed before any process maps it. */
static void root_file(void *ctx, int fd, const char *path);

/*
 * Runtime libraries the system's loader cache names, probed before any
 * process maps them. The NVIDIA driver's libcuda.so.1 is one file for the
 * host and for every container it is mounted into, so its probes are in
 * place even for a program that calls it the moment it starts.
 */
static void prepare_system(struct devices *d)
{
	d->quiet = true;	/* no process uses them yet: not news */
	d->root_now = NULL;
	d->root_pid = 0;
	roots__each_runtime(0, root_file, d);
	d->quiet = false;
}

int devices__open(struct devices **out, struct tracer *t, bool loader_only)
{
	struct devices *d = calloc(1, sizeof(*d));

	*out = d;
	if (!d)
		return -ENOMEM;
	d->tracer = t;
	d->loader_only = loader_only;
	d->attaching = true;
	roots__id(0, &d->self_dev, &d->self_ino);
	/* memtrail's own dynamic linker is the one most targets use */
	devices__scan(d, getpid());
	if (!loader_only)
		prepare_system(d);
	return 0;
}

static struct dev_proc *proc_get(struct devices *d, uint32_t pid, bool create)
{
	struct dev_proc *p;
	size_t i;

	for (i = 0; i < d->n_procs; i++)
		if (d->procs[i].pid == pid)
			return &d->procs[i];
	if (!create || array__grow((void **)&d->procs, &d->cap_procs, d->n_procs + 1,
				   sizeof(*d->procs)))
		return NULL;
	p = &d->procs[d->n_procs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	return p;
}

/* P maps (or is about to map) probed runtime file IDX: it keeps the file probed. */
static void proc_file_add(struct dev_proc *p, size_t idx)
{
	size_t i;

	for (i = 0; i < p->n_files && p->files[i].file != idx; i++)
		;
	if (i == p->n_files &&
	    !array__grow((void **)&p->files, &p->cap_files, p->n_files + 1, sizeof(*p->files)))
		p->files[p->n_files++].file = idx;
}

/* One kept mapping less names file IDX: closed with the last. */
static void sym_release(struct devices *d, size_t idx)
{
	struct dev_file *f = &d->files[idx];

	if (f->sym_users && !--f->sym_users && f->sym_fd >= 0) {
		close(f->sym_fd);
		f->sym_fd = -1;
	}
}

/* File IDX opened (once) as PID maps it at PM, for call sites after PID exits. */
static void sym_hold(struct devices *d, uint32_t pid, struct proc_map *pm, size_t idx)
{
	struct dev_file *f = &d->files[idx];
	struct proc_map_line m = { .start = pm->start, .end = pm->end, .pgoff = pm->pgoff,
				   .dev = pm->dev, .ino = pm->ino, .exec = true, .path = pm->path };

	if (f->sym_fd < 0)
		f->sym_fd = proc__open_mapped(pid, &m, f->sym_path, sizeof(f->sym_path));
	if (f->sym_fd < 0)
		return;		/* gone already: named by path, if at all */
	f->sym_users++;
	pm->file = idx;
	pm->kept = true;
}

static void proc_maps_free(struct devices *d, struct dev_proc *p)
{
	size_t i;

	for (i = 0; i < p->n_maps; i++) {
		if (p->maps[i].kept)
			sym_release(d, p->maps[i].file);
		free(p->maps[i].path);
	}
	p->n_maps = 0;
}

static void proc_free(struct devices *d, struct dev_proc *p)
{
	proc_maps_free(d, p);
	free(p->maps);
	free(p->files);
}

struct matches {
	uint32_t spec[MEMTRAIL_DEV_SPECS];
	uint64_t off[MEMTRAIL_DEV_SPECS];
	size_t n;
	bool loader_only;
};

static int spec_index(const char *name, bool loader_only)
{
	size_t i;

	if (!((name[0] == 'c' && name[1] == 'u') || !strncmp(name, "nrt_", 4) ||
	      !strcmp(name, "_dl_debug_state")))
		return -1;
	for (i = 0; i < devspecs_n; i++)
		if (!strcmp(devspecs[i].name, name))
			return loader_only && devspecs[i].rt != MEMTRAIL_RT_LOADER ? -1 : (int)i;
	return -1;
}

static int on_symbol(void *ctx, const char *name, uint64_t off)
{
	struct matches *m = ctx;
	int idx = spec_index(name, m->loader_only);
	size_t i;

	if (idx < 0)
		return 0;
	for (i = 0; i < m->n; i++)
		if (m->spec[i] == (uint32_t)idx || m->off[i] == off)
			return 0;	/* seen in .dynsym, or an alias of one probed */
	if (m->n < devspecs_n) {
		m->spec[m->n] = idx;
		m->off[m->n++] = off;
	}
	return 0;
}

/* Functions of a file to probe, as tracer__attach_device_set takes them. */
struct probe_list {
	uint64_t off[MEMTRAIL_DEV_SPECS];
	uint64_t cookie[MEMTRAIL_DEV_SPECS];
	bool ret[MEMTRAIL_DEV_SPECS];
	uint32_t spec[MEMTRAIL_DEV_SPECS];
	size_t n;
	const char *name;	/* the file, for messages */
};

static void probe_list_add(struct probe_list *l, uint32_t spec, uint64_t off)
{
	l->off[l->n] = off;
	l->cookie[l->n] = devspecs__cookie(spec);
	l->ret[l->n] = devspecs[spec].ret;
	l->spec[l->n++] = spec;
}

static void on_probe_fail(void *ctx, ssize_t i, int err)
{
	const struct probe_list *l = ctx;

	if (i < 0 && err == -EMFILE)
		log__warn("cannot probe '%s': %s (memtrail keeps some descriptors free; raise its "
			  "open file limit, ulimit -n)", l->name, strerror(-err));
	else if (i < 0)
		log__warn("cannot probe '%s': %s", l->name, strerror(-err));
	else
		log__warn("cannot probe '%s' in '%s': %s", devspecs[l->spec[i]].name, l->name,
			  strerror(-err));
}

static void launch_detach(struct dev_file *f)
{
	tracer__detach_device_set(&f->launch);
	f->launch_on = false;
}

/* The launch probes of F: how many are on. */
static size_t launch_attach(struct devices *d, struct dev_file *f)
{
	struct probe_list l = { .n = 0, .name = f->name };
	size_t i;

	for (i = 0; i < f->n_launch; i++)
		probe_list_add(&l, f->launch_spec[i], f->launch_off[i]);
	f->launch_on = true;
	return tracer__attach_device_set(d->tracer, f->path, l.off, l.cookie, l.ret, l.n,
					 &f->launch, on_probe_fail, &l);
}

/*
 * Launch probes of file IDX wanted: while no process is known to map it, or
 * one that does has not started "execute".
 */
static void launch_update(struct devices *d, size_t idx)
{
	struct dev_file *f = &d->files[idx];
	bool mapped = false, waiting = false;
	size_t i, j;

	if (!f->n_launch)
		return;
	for (i = 0; i < d->n_procs; i++) {
		for (j = 0; j < d->procs[i].n_files; j++) {
			if (d->procs[i].files[j].file != idx)
				continue;
			mapped = true;
			if (!d->procs[i].executed)
				waiting = true;
		}
	}
	if ((waiting || !mapped) && !f->launch_on)
		launch_attach(d, f);
	else if (mapped && !waiting && f->launch_on)
		launch_detach(f);
}

static void proc_launch_update(struct devices *d, struct dev_proc *p)
{
	size_t i;

	for (i = 0; i < p->n_files; i++)
		launch_update(d, p->files[i].file);
}

/* Probe a newly seen file, open as f->path. */
static void probe_file(struct devices *d, struct dev_file *f)
{
	struct probe_list l = { .n = 0, .name = f->name };
	struct matches m = { .n = 0, .loader_only = d->loader_only };
	const char *what = NULL;
	struct timespec now;
	size_t i, shown;

	f->probes.fd[0] = f->probes.fd[1] = f->launch.fd[0] = f->launch.fd[1] = -1;
	if (elfsym__each(f->path, on_symbol, &m) || !m.n)
		return;
	for (i = 0; i < m.n; i++) {
		const struct dev_spec *s = &devspecs[m.spec[i]];

		if (s->rt != MEMTRAIL_RT_LOADER)
			what = s->rt == MEMTRAIL_RT_NEURON ? "Neuron runtime" : "CUDA runtime";
		if (!s->per_pid)
			probe_list_add(&l, m.spec[i], m.off[i]);
		else if (f->n_launch < LAUNCH_MAX) {
			f->launch_spec[f->n_launch] = m.spec[i];
			f->launch_off[f->n_launch++] = m.off[i];
		}
	}
	shown = tracer__attach_device_set(d->tracer, f->path, l.off, l.cookie, l.ret, l.n,
					  &f->probes, on_probe_fail, &l);
	if (f->n_launch)
		shown += launch_attach(d, f);
	if (what && shown && d->quiet)
		log__debug("probing %s '%s' (%zu functions)", what, f->name, shown);
	else if (what && shown)
		log__info("probing %s '%s' (%zu functions)", what, f->name, shown);
	f->runtime = what != NULL;
	clock_gettime(CLOCK_MONOTONIC, &now);
	f->probed_ns = (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
}

/* What this kernel cannot do with device memory, said once: when a target maps a runtime. */
static void say_kernel(struct devices *d)
{
	const struct feature *feat = &tracer__features(d->tracer)->f[FEAT_DEVICE];

	if (d->said)
		return;
	d->said = true;
	if (feat->state == FEATURE_DEGRADED)
		log__warn("%s: %s", feat->name, feat->note);
	else if (feat->state != FEATURE_YES)
		log__debug("%s: %s", feat->name, feat->note);
}

static size_t file_hash(dev_t dev, ino_t ino)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ULL ^ (uint64_t)dev;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return (size_t)h;
}

/*
 * The file (dev, ino) seen before, or NULL: a hash lookup, for every
 * executable mapping of every process at each exec and at start (a node
 * maps thousands of distinct files).
 */
static struct dev_file *file_find(const struct devices *d, dev_t dev, ino_t ino, size_t *index)
{
	size_t i, mask = d->n_slots - 1;

	if (!d->n_slots)
		return NULL;
	for (i = file_hash(dev, ino) & mask; d->file_slots[i]; i = (i + 1) & mask) {
		struct dev_file *f = &d->files[d->file_slots[i] - 1];

		if ((f->dev == dev && f->ino == ino) ||
		    (f->alias_ino && f->alias_dev == dev && f->alias_ino == ino)) {
			*index = d->file_slots[i] - 1;
			return f;
		}
	}
	return NULL;
}

static void slot_put_key(size_t *slots, size_t n, dev_t dev, ino_t ino, size_t idx)
{
	size_t i = file_hash(dev, ino) & (n - 1);

	while (slots[i])
		i = (i + 1) & (n - 1);
	slots[i] = idx + 1;
}

/* F (files[IDX]) under its key, and its alias where it has one. */
static void slot_put(size_t *slots, size_t n, const struct dev_file *f, size_t idx)
{
	slot_put_key(slots, n, f->dev, f->ino, idx);
	if (f->alias_ino)
		slot_put_key(slots, n, f->alias_dev, f->alias_ino, idx);
}

/*
 * Index files[0..N) afresh in a table for at least WANT files: at most half
 * full when each has an alias too.
 */
static int slots_build(struct devices *d, size_t n, size_t want)
{
	size_t slots_n = 64, j;
	size_t *slots;

	while (slots_n < 4 * want)
		slots_n *= 2;
	slots = calloc(slots_n, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (j = 0; j < n; j++)
		slot_put(slots, slots_n, &d->files[j], j);
	free(d->file_slots);
	d->file_slots = slots;
	d->n_slots = slots_n;
	return 0;
}

/* Index files[IDX] (the newest), growing the table to stay at most half full. */
static int file_index(struct devices *d, size_t idx)
{
	if (4 * (idx + 1) > d->n_slots)
		return slots_build(d, idx + 1, 2 * (idx + 1));
	slot_put(d->file_slots, d->n_slots, &d->files[idx], idx);
	return 0;
}

/*
 * files[IDX] is known by (DEV, INO) too: the overlay's identity of a file
 * keyed by its layer's (as a mapping opens it), which maps shows from Linux
 * 6.9 and the kernel's hook sees everywhere.
 */
static void file_alias(struct devices *d, size_t idx, dev_t dev, ino_t ino)
{
	struct dev_file *f = &d->files[idx];

	if (f->alias_ino || (f->dev == dev && f->ino == ino))
		return;
	f->alias_dev = dev;
	f->alias_ino = ino;
	slot_put_key(d->file_slots, d->n_slots, dev, ino, idx);
}

/* Whether F has probes: the processes that map a probed runtime are counted. */
static bool file_probed(const struct dev_file *f)
{
	return f->n_launch || f->probes.n_links || f->probes.fd[0] >= 0 || f->probes.fd[1] >= 0;
}

/* Whether memtrail holds nothing for F: a seen-before mark only. */
static bool file_idle(const struct dev_file *f)
{
	return !f->pinned && !file_probed(f) && !f->launch_on && f->fd < 0 && !f->release_ms &&
	       !f->n_keys && f->sym_fd < 0 && !f->sym_users;
}

/* The kernel's s_dev of DEV (lib_files keys): major << 20 | minor. */
static uint64_t kernel_dev(dev_t dev)
{
	return (uint64_t)major(dev) << 20 | minor(dev);
}

/* The key among PEND (lib_files keys) that is the file M maps, as maps names it; NULL: none. */
static const struct memtrail_lib_key *pend_key(const struct memtrail_lib_key *pend,
					       size_t n_pend, const struct proc_map_line *m)
{
	size_t i;

	for (i = 0; i < n_pend; i++)
		if (pend[i].dev == kernel_dev(m->dev) && pend[i].ino == m->ino)
			return &pend[i];
	return NULL;
}

/*
 * Whether the file PID maps at M is another than the entry for its (dev,
 * ino), made on that inode number since the entry was read (only a file
 * memtrail holds nothing for can be deleted). Where files mapped are tracked
 * and the hook keys the file as maps does, the kernel says so for free: a
 * file of another generation is new to it, so PID was told for its key
 * (PEND, the keys PID was first to map). Else (overlayfs, no hook) a stat of the
 * mapping compares change time and size, at most once a second per file
 * (some 4 us each: not at every exec of a storm).
 */
static bool mapping_replaced(struct devices *d, uint32_t pid, const struct proc_map_line *m,
			     const struct memtrail_lib_key *pend, size_t n_pend)
{
	const struct memtrail_lib_key *k = pend_key(pend, n_pend, m);
	struct dev_file *f;
	struct stat st;
	size_t idx;

	f = file_find(d, m->dev, m->ino, &idx);
	if (!f || f->released || !file_idle(f))
		return false;
	if (k) {
		f->hook_keyed = true;
		if (f->gen_known)
			return k->gen != f->gen;
	}
	if (tracer__tracking(d->tracer) && f->gen_known && f->hook_keyed)
		return false;	/* not new to the hook: the generation it had */
	if (f->checked_ms && d->now_ms < f->checked_ms + 1000)
		return false;
	f->checked_ms = d->now_ms ? d->now_ms : 1;
	return !proc__stat_mapped(pid, m, &st) &&
	       (st.st_ctim.tv_sec != f->ctime.tv_sec || st.st_ctim.tv_nsec != f->ctime.tv_nsec ||
		st.st_size != f->size);
}

/*
 * The file (DEV, INO), probed when new: opened as PID maps it at M
 * (proc.h), else through memtrail's own descriptor's path HOST
 * (/proc/self/fd/N; NAME in messages, when given); NULL when it cannot be
 * opened.
 */
static struct dev_file *file_get(struct devices *d, dev_t dev, ino_t ino, uint32_t pid,
				 const struct proc_map_line *m, const char *host,
				 const char *name_as, size_t *index)
{
	struct dev_file *f = file_find(d, dev, ino, index);
	struct file_ids ids;
	struct stat st;
	int fd, gen = 0;
	char *name;

	if (f)
		f->seen = d->gen;
	if (f && !f->released)
		return f;
	if (!f && array__grow((void **)&d->files, &d->cap_files, d->n_files + 1,
			      sizeof(*d->files)))
		return NULL;
	name = strdup(m ? m->path : name_as ? name_as : host);
	if (!name)
		return NULL;
	if (!f) {
		*index = d->n_files;
		f = &d->files[d->n_files];
		memset(f, 0, sizeof(*f));
		f->seen = d->gen;
		f->sym_fd = -1;
	}
	fd = m ? proc__open_mapped(pid, m, f->path, sizeof(f->path))
	       : proc__reopen(host, f->path, sizeof(f->path));
	if (fd < 0) {
		free(name);
		return NULL;	/* not known: another process may open it */
	}
	if (!f->released) {
		f->dev = dev;
		f->ino = ino;
		if (file_index(d, *index)) {
			close(fd);
			free(name);
			return NULL;
		}
		d->n_files++;
	}
	free(f->name);
	f->name = name;
	f->fd = fd;
	/*
	 * on overlayfs the hook sees another identity than maps (before Linux
	 * 6.9); elsewhere both are maps's, the key: no mountinfo lookup for it
	 */
	if (m && proc__overlayfs(fd) && !proc__file_ids(fd, pid, false, &ids) &&
	    (ids.hook_dev != dev || ids.hook_ino != ino))
		file_alias(d, *index, ids.hook_dev, ids.hook_ino);
	if (!fstat(fd, &st)) {
		f->ctime = st.st_ctim;
		f->size = st.st_size;
	}
	f->gen_known = !ioctl(fd, FS_IOC_GETVERSION, &gen);	/* the kernel writes an int */
	f->gen = (uint32_t)gen;
	f->released = false;
	f->n_launch = 0;
	probe_file(d, f);
	if (!f->n_launch) {
		/* its probes are on: nothing opens it again */
		close(fd);
		f->fd = -1;
	}
	return &d->files[*index];
}

/*
 * memtrail's own open file FD (IDS: proc__file_ids), NAME in messages:
 * known as its mappings will show it.
 */
static struct dev_file *file_get_fd(struct devices *d, int fd, const struct file_ids *ids,
				    const char *name, size_t *index)
{
	struct dev_file *f;
	char host[32];

	snprintf(host, sizeof(host), "/proc/self/fd/%d", fd);
	f = file_get(d, ids->maps_dev, ids->maps_ino, 0, NULL, host, name, index);
	if (f && (ids->hook_dev != ids->maps_dev || ids->hook_ino != ids->maps_ino))
		file_alias(d, *index, ids->hook_dev, ids->hook_ino);
	return f;
}

/* Whether a process memtrail knows maps file IDX. */
static bool file_used(const struct devices *d, size_t idx)
{
	size_t i, j;

	for (i = 0; i < d->n_procs; i++)
		for (j = 0; j < d->procs[i].n_files; j++)
			if (d->procs[i].files[j].file == idx)
				return true;
	return false;
}

/* The next process that maps file IDX is scanned at once (and the file probed). */
static void file_unscanned(struct devices *d, size_t idx)
{
	struct dev_file *f = &d->files[idx];
	struct memtrail_lib_key own = { .dev = kernel_dev(f->dev), .ino = f->ino, .gen = f->gen };
	size_t i;

	if (f->gen_known)
		tracer__lib_forget(d->tracer, &own);
	else
		tracer__lib_forget_file(d->tracer, own.dev, own.ino);	/* any generation */
	/* the hook's own identity, where it is another (overlayfs before Linux 6.9) */
	if (f->alias_ino)
		tracer__lib_forget_file(d->tracer, kernel_dev(f->alias_dev), f->alias_ino);
	for (i = 0; i < f->n_keys; i++)
		tracer__lib_forget(d->tracer, &f->keys[i]);
	f->n_keys = f->next_key = 0;
}

/* Whether file IDX is a runtime of a root some known process runs in: kept probed for it. */
static bool root_keeps(const struct devices *d, size_t idx)
{
	const struct dev_file *f = &d->files[idx];
	size_t i, j;

	for (i = 0; i < d->n_roots; i++)
		for (j = 0; d->roots[i].users && j < d->roots[i].n_files; j++)
			if (d->roots[i].files[j].dev == f->dev && d->roots[i].files[j].ino == f->ino)
				return true;
	return false;
}

/* File IDX's last known user is gone: released after RELEASE_DELAY_MS unless mapped again. */
static void file_drop(struct devices *d, size_t idx)
{
	struct dev_file *f = &d->files[idx];

	if (f->release_ms || array__grow((void **)&d->dropped, &d->cap_dropped, d->n_dropped + 1,
					 sizeof(*d->dropped)))
		return;
	file_unscanned(d, idx);
	f->release_ms = d->now_ms + RELEASE_DELAY_MS;
	d->dropped[d->n_dropped++] = idx;
}

/* The last process that mapped file IDX is gone: its probes and descriptor go too. */
static void file_release(struct devices *d, size_t idx)
{
	struct dev_file *f = &d->files[idx];

	tracer__detach_device_set(&f->probes);
	if (f->launch_on)
		launch_detach(f);
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	f->n_launch = 0;
	f->released = true;

	f->release_ms = 0;
	log__debug("no process maps '%s' any more: its probes removed", f->name);
}

/* The keys of what P was first to map and was scanned for, noted on the runtimes it maps. */
static void note_keys(struct devices *d, const struct dev_proc *p)
{
	struct memtrail_lib_key keys[DEV_KEYS];
	size_t n = tracer__lib_pending(d->tracer, p->pid, keys, DEV_KEYS), i, j, k;

	for (i = 0; n && i < p->n_files; i++) {
		struct dev_file *f = &d->files[p->files[i].file];

		if (!f->runtime)
			continue;
		for (k = 0; k < n; k++) {
			for (j = 0; j < f->n_keys && memcmp(&f->keys[j], &keys[k], sizeof(keys[k])); j++)
				;
			if (j < f->n_keys)
				continue;
			/* full: the oldest goes (a key lost costs a missed hold, as before) */
			f->keys[f->next_key] = keys[k];
			f->next_key = (f->next_key + 1) % DEV_KEYS;
			if (f->n_keys < DEV_KEYS)
				f->n_keys++;
		}
	}
}

static void root_file(void *ctx, int fd, const char *path)
{
	struct devices *d = ctx;
	struct dev_root *r = d->root_now;
	struct file_ids ids;
	struct dev_file *f;
	size_t idx;

	if (proc__file_ids(fd, d->root_pid, true, &ids))
		return;
	f = file_get_fd(d, fd, &ids, path, &idx);
	if (!f)
		return;
	if (!r) {
		f->pinned = true;	/* the host's: kept */
		return;
	}
	if (!array__grow((void **)&r->files, &r->cap_files, r->n_files + 1, sizeof(*r->files)))
		r->files[r->n_files++] = (struct dev_root_file){ ids.maps_dev, ids.maps_ino };
}

/* No known process runs in root IDX any more: its runtimes go unless one maps them. */
static void root_release(struct devices *d, size_t idx)
{
	struct dev_root *r = &d->roots[idx];
	size_t i, fi, last = d->n_roots - 1;
	struct dev_file *f;

	for (i = 0; i < r->n_files; i++) {
		f = file_find(d, r->files[i].dev, r->files[i].ino, &fi);
		if (f && !f->released && !f->pinned && !file_used(d, fi))
			file_drop(d, fi);
	}
	free(r->files);
	d->roots[idx] = d->roots[last];
	d->n_roots--;
	for (i = 0; i < d->n_procs; i++)
		if (d->procs[i].root == last + 1)
			d->procs[i].root = idx + 1;
}

static void root_leave(struct devices *d, struct dev_proc *p)
{
	size_t idx = p->root;

	p->root = 0;
	if (idx && !--d->roots[idx - 1].users)
		root_release(d, idx - 1);
}

/*
 * P (PID) runs in its root: one other than memtrail's has the runtimes its
 * loader cache names probed when the first known process runs in it.
 */
static void root_enter(struct devices *d, struct dev_proc *p, uint32_t pid)
{
	struct dev_root *r;
	dev_t dev;
	ino_t ino;
	size_t i;
	int n;

	if (d->loader_only || roots__id(pid, &dev, &ino))
		return;
	if (p->root && d->roots[p->root - 1].dev == dev && d->roots[p->root - 1].ino == ino)
		return;
	root_leave(d, p);
	if (dev == d->self_dev && ino == d->self_ino)
		return;
	for (i = 0; i < d->n_roots && (d->roots[i].dev != dev || d->roots[i].ino != ino); i++)
		;
	if (i == d->n_roots) {
		if (array__grow((void **)&d->roots, &d->cap_roots, d->n_roots + 1,
				sizeof(*d->roots)))
			return;
		r = &d->roots[d->n_roots++];
		memset(r, 0, sizeof(*r));
		r->dev = dev;
		r->ino = ino;
		d->root_now = r;
		d->root_pid = pid;
		d->quiet = d->attaching;
		n = roots__each_runtime(pid, root_file, d);
		d->quiet = false;
		d->root_now = NULL;
		d->root_pid = 0;
		if (n < 0)
			log__debug("%u runs in a root of its own; its loader cache cannot be read: %s",
				   pid, strerror(-n));
		else
			log__debug("%u runs in a root of its own; its loader cache names %d runtimes",
				   pid, n);
	}
	d->roots[i].users++;
	p->root = i + 1;
}

int devices__scan(struct devices *d, uint32_t pid)
{
	char name[64], line[4096 + 128];
	struct dev_proc *p = NULL, seen = { .pid = pid }, old;
	struct memtrail_lib_key pend[64];	/* the new files a first exec maps, and then some */
	size_t j, n_pend = tracer__lib_pending(d->tracer, pid, pend, 64);
	bool runtime_user = false, unopened = false, known, gone;
	FILE *f;

	snprintf(name, sizeof(name), "/proc/%u/maps", pid);
	f = fopen(name, "re");
	if (!f)
		return -ENOENT;		/* gone: its exit event says so */
	while (fgets(line, sizeof(line), f)) {
		struct proc_map_line m;
		struct dev_file *df;
		size_t idx;

		if (!proc__parse_map(line, &m) || !m.exec || !m.path)
			continue;
		if (!array__grow((void **)&seen.maps, &seen.cap_maps, seen.n_maps + 1,
				 sizeof(*seen.maps))) {
			struct proc_map *pm = &seen.maps[seen.n_maps];

			*pm = (struct proc_map){ m.start, m.end, m.pgoff, m.dev, m.ino,
						 strdup(m.path), SIZE_MAX, false };
			if (pm->path)
				seen.n_maps++;
		}
		/* a file seen before is not opened again, unless it is another on its inode */
		if (mapping_replaced(d, pid, &m, pend, n_pend)) {
			file_find(d, m.dev, m.ino, &idx)->released = true;	/* read in place */
			log__debug("'%s' is a new file on a deleted one's inode: read again", m.path);
		}
		df = file_find(d, m.dev, m.ino, &idx);
		known = df && !df->released;
		df = file_get(d, m.dev, m.ino, pid, &m, NULL, NULL, &idx);
		unopened |= !df && !known;
		/* probed only now, and this process mapped it before: what it called is lost */
		if (df && !known && df->runtime && file_probed(df) && !d->attaching &&
		    pid != (uint32_t)getpid() && d->on_late)
			d->on_late(d->late_ctx, pid, df->name);
		if (df && !df->hook_keyed && pend_key(pend, n_pend, &m))
			df->hook_keyed = true;
		if (df && seen.n_maps && seen.maps[seen.n_maps - 1].start == m.start)
			seen.maps[seen.n_maps - 1].file = idx;
		if (df && df->runtime && file_probed(df) && pid != (uint32_t)getpid())
			runtime_user = true;
		if (df && df->runtime && pid != (uint32_t)getpid())
			say_kernel(d);
		/* runtimes only: the loader's hook stays (an exec maps ld.so unseen by lib_mapped) */
		if (!df || !df->runtime || !file_probed(df) || df->pinned ||
		    pid == (uint32_t)getpid())
			continue;
		p = p ? p : proc_get(d, pid, true);
		if (!p)
			break;
		proc_file_add(p, idx);
	}
	fclose(f);
	/*
	 * an exited process not yet reaped: its maps are empty; one that ended
	 * while they were read: a file it mapped could not be opened, and what
	 * it mapped new is said by name, not lost (the caller's unseen path)
	 */
	gone = !seen.n_maps || (unopened && proc__exiting(pid));
	/* every process but memtrail is known by its root, for the runtimes the root has */
	p = p ? p : proc_get(d, pid, pid != (uint32_t)getpid());
	if (p) {
		note_keys(d, p);
		/* after its mappings: a runtime it mapped before memtrail probed it is late */
		root_enter(d, p, pid);
	}
	if (p) {
		/*
		 * its mappings name call sites even after it exits; a runtime's
		 * user keeps their files open too (the new ones kept before the
		 * old are let go: a file in both stays open)
		 */
		for (j = 0; runtime_user && j < seen.n_maps; j++)
			if (seen.maps[j].file != SIZE_MAX)
				sym_hold(d, pid, &seen.maps[j], seen.maps[j].file);
		old = *p;
		p->maps = seen.maps;
		p->n_maps = seen.n_maps;
		p->cap_maps = seen.cap_maps;
		proc_maps_free(d, &old);
		free(old.maps);
		proc_launch_update(d, p);
	} else {
		proc_maps_free(d, &seen);
		free(seen.maps);
	}
	return gone ? -ENOENT : 0;
}

/* A scan of P due at AT (0 is "none": 1 then), unless one is due earlier. */
static void proc_due(struct dev_proc *p, uint64_t at)
{
	if (!at)
		at = 1;
	if (!p->due_ms || at < p->due_ms)
		p->due_ms = at;
}

void devices__schedule(struct devices *d, uint32_t pid, uint64_t now_ms, uint64_t delay_ms)
{
	struct dev_proc *p = proc_get(d, pid, true);

	if (p)
		proc_due(p, now_ms + delay_ms);
}

/* Forget the idle files not looked up since the last forgetting (FILES_KEEP). */
static void files_forget(struct devices *d)
{
	size_t *to = calloc(d->n_files, sizeof(*to)), i, j, n = 0;

	if (!to)
		return;
	/* to[i]: 1 while deciding (kept), then its new index + 1; 0: forgotten */
	for (i = 0; i < d->n_procs; i++) {
		for (j = 0; j < d->procs[i].n_files; j++)
			to[d->procs[i].files[j].file] = 1;
		for (j = 0; j < d->procs[i].n_maps; j++)
			if (d->procs[i].maps[j].kept)
				to[d->procs[i].maps[j].file] = 1;
	}
	for (i = 0; i < d->n_dropped; i++)
		to[d->dropped[i]] = 1;
	for (i = 0; i < d->n_files; i++) {
		if (!to[i] && (d->files[i].seen == d->gen || !file_idle(&d->files[i])))
			to[i] = 1;
		n += to[i];
	}
	if (slots_build(d, 0, n)) {
		free(to);
		return;		/* the table as it was: tried again at the next tick */
	}
	for (i = 0, n = 0; i < d->n_files; i++) {
		if (!to[i]) {
			free(d->files[i].name);
			continue;
		}
		if (n != i)
			d->files[n] = d->files[i];
		slot_put(d->file_slots, d->n_slots, &d->files[n], n);
		to[i] = ++n;
	}
	for (i = 0; i < d->n_procs; i++) {
		for (j = 0; j < d->procs[i].n_files; j++)
			d->procs[i].files[j].file = to[d->procs[i].files[j].file] - 1;
		for (j = 0; j < d->procs[i].n_maps; j++)
			if (d->procs[i].maps[j].kept)
				d->procs[i].maps[j].file = to[d->procs[i].maps[j].file] - 1;
	}
	for (i = 0; i < d->n_dropped; i++)
		d->dropped[i] = to[d->dropped[i]] - 1;
	log__debug("%zu files no process needs forgotten, %zu kept", d->n_files - n, n);
	d->n_files = n;
	d->gen++;
	d->forget_at = 2 * n > FILES_KEEP ? 2 * n : FILES_KEEP;
	free(to);
}

void devices__tick(struct devices *d, uint64_t now_ms)
{
	bool releasing = false;
	size_t i;

	d->now_ms = now_ms;
	/* a release due: first every scan still to come, whose process may map the file */
	for (i = 0; i < d->n_dropped && !releasing; i++)
		releasing = d->files[d->dropped[i]].release_ms <= now_ms;
	for (i = 0; i < d->n_procs; i++) {
		struct dev_proc *p = &d->procs[i];

		if (!p->due_ms || (p->due_ms > now_ms && !releasing))
			continue;
		p->due_ms = p->rescan_ms;
		p->rescan_ms = 0;
		(void)devices__scan(d, p->pid);	/* may grow procs: index again */
	}
	/* after the scans: a process that mapped a dropped file meanwhile keeps it */
	for (i = 0; i < d->n_dropped;) {
		struct dev_file *f = &d->files[d->dropped[i]];

		if (f->release_ms > now_ms) {
			i++;
			continue;
		}
		if (f->released || f->pinned || file_used(d, d->dropped[i]) ||
		    root_keeps(d, d->dropped[i]))
			f->release_ms = 0;
		else
			file_release(d, d->dropped[i]);
		d->dropped[i] = d->dropped[--d->n_dropped];
	}
	if (d->n_files >= (d->forget_at ? d->forget_at : FILES_KEEP))
		files_forget(d);
}

void devices__on_phase(struct devices *d, uint32_t pid, const char *name)
{
	bool exec = !strcmp(name, "execute");
	struct dev_proc *p;

	if (!exec && strcmp(name, "model_load"))
		return;
	p = proc_get(d, pid, true);
	if (!p)
		return;
	/* after a model_load, its first launch starts "execute" again */
	p->executed = exec;
	proc_launch_update(d, p);
}

/* P maps none of its files any more: each is released unless another process maps it. */
static void drop_files(struct devices *d, struct dev_proc *p)
{
	struct proc_file *files = p->files;
	size_t i, n = p->n_files;

	p->files = NULL;
	p->n_files = p->cap_files = 0;
	/* its files: wanted still by another process (launch probes too)? */
	for (i = 0; i < n; i++) {
		const struct dev_file *f = &d->files[files[i].file];

		/* memtrail's own (pinned since the process listed it) stay, as do a root's */
		if (f->pinned || file_used(d, files[i].file) || root_keeps(d, files[i].file))
			launch_update(d, files[i].file);
		else if (!f->released)
			file_drop(d, files[i].file);
	}
	free(files);
}

void devices__forget(struct devices *d, uint32_t pid, bool purge)
{
	struct dev_proc *p = proc_get(d, pid, false);

	if (purge)
		tracer__device_forget(d->tracer, pid);
	if (!p)
		return;
	drop_files(d, p);
	root_leave(d, p);
	proc_free(d, p);
	*p = d->procs[--d->n_procs];
}

void devices__exec(struct devices *d, uint32_t pid, uint64_t now_ms, uint64_t rescan_ms)
{
	struct dev_proc *p = proc_get(d, pid, true);

	if (!p)
		return;
	if (p->n_files)
		drop_files(d, p);
	proc_due(p, now_ms);
	p->rescan_ms = now_ms + rescan_ms;
}

void devices__fork(struct devices *d, uint32_t parent, uint32_t child)
{
	struct dev_proc *pp = proc_get(d, parent, false), *c;
	size_t n = pp ? pp->n_files : 0, root = pp ? pp->root : 0, i;

	/* in its parent's root */
	if (root && (c = proc_get(d, child, true)) && !c->root) {
		c->root = root;
		d->roots[root - 1].users++;
	}
	c = n ? proc_get(d, child, true) : NULL;
	pp = proc_get(d, parent, false);	/* may have moved */
	if (!c || !pp)
		return;
	/* its parent's files, and what it opened at the gate before its fork was read */
	for (i = 0; i < n; i++)
		proc_file_add(c, pp->files[i].file);
	/* a fork does not take its parent's CUDA context: launches as its parent's */
	c->executed = pp->executed;
}

size_t devices__files(const struct devices *d)
{
	return d->n_files;
}

static void prepare_lib(void *ctx, const char *lib)
{
	struct devices *d = ctx;
	int fd = open(lib, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct file_ids ids;
	struct dev_file *f;
	size_t idx;

	if (fd < 0)
		return;
	if (!proc__file_ids(fd, 0, true, &ids) && (f = file_get_fd(d, fd, &ids, lib, &idx)))
		f->pinned = true;
	close(fd);
}

bool devices__probed(const struct devices *d, uint64_t kdev, uint64_t ino, uint64_t at_ns)
{
	dev_t dev = makedev(kdev >> 20, kdev & 0xfffff);
	const struct dev_file *f;
	size_t i;

	if (!d)
		return false;
	f = file_find(d, dev, ino, &i);
	return f && !f->released && file_probed(f) && f->probed_ns <= at_ns;
}

/*
 * PID opened probed runtime IDX at the gate and is about to map it: a user
 * of it from now on (until it execs or exits), so that the release of a
 * copy whose last user just exited cannot come between the open and
 * memtrail's scan of the mapping, leaving the mapping unprobed.
 */
static void gate_user(struct devices *d, uint32_t pid, size_t idx)
{
	const struct dev_file *f = &d->files[idx];
	struct dev_proc *p;

	if (!pid || pid == (uint32_t)getpid() || !f->runtime || !file_probed(f) || f->pinned)
		return;
	p = proc_get(d, pid, true);
	if (p)
		proc_file_add(p, idx);
}

void devices__gate_file(struct devices *d, int fd, uint32_t pid, bool user)
{
	char path[64], name[4096];
	struct file_ids ids;
	struct dev_file *f;
	struct stat st;
	size_t idx;
	ssize_t n;

	if (d->loader_only || fstat(fd, &st) || proc__file_ids(fd, pid, true, &ids))
		return;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, name, sizeof(name) - 1);
	name[n > 0 ? n : 0] = '\0';
	f = file_find(d, ids.maps_dev, ids.maps_ino, &idx);
	if (f && !f->released) {
		/* another file on a deleted one's inode, or written since: read again */
		if (!file_idle(f) || (st.st_ctim.tv_sec == f->ctime.tv_sec &&
				      st.st_ctim.tv_nsec == f->ctime.tv_nsec && st.st_size == f->size)) {
			if (user)
				gate_user(d, pid, idx);
			return;
		}
		f->released = true;
	}
	if (file_get_fd(d, fd, &ids, n > 0 ? name : NULL, &idx) && user)
		gate_user(d, pid, idx);
}

void devices__on_late(struct devices *d, devices_late_fn fn, void *ctx)
{
	d->on_late = fn;
	d->late_ctx = ctx;
}

void devices__attached(struct devices *d)
{
	d->attaching = false;
}

void devices__prepare_command(struct devices *d, const char *path)
{
	if (d->loader_only)
		return;
	prepare_lib(d, path);	/* a runtime linked in */
	elfsym__needed(path, prepare_lib, d);
}

/* elfsym__at of file PATH, only when it is (DEV, INO): never another file's symbol. */
static int symbol_of(const char *path, dev_t dev, ino_t ino, uint64_t off, char *sym,
		     size_t len, uint64_t *delta)
{
	char opened[32];
	int fd = proc__open_file(path, dev, ino, opened, sizeof(opened)), err;

	if (fd < 0)
		return fd;
	err = elfsym__at(opened, off, sym, len, delta);
	close(fd);
	return err;
}

/* A call site in a file: "function+0xDELTA (path)", the function demangled. */
static json_t *named_site(const char *sym, uint64_t delta, const char *path)
{
	char name[1024], text[sizeof(name) + 4096 + 32];

	snprintf(text, sizeof(text), "%s+0x%" PRIx64 " (%s)", demangle__str(name, sizeof(name), sym),
		 delta, path);
	return sanitize__json(text);
}

/* A call site in a file without symbols there: "path+0xOFFSET". */
static json_t *file_site(const char *path, uint64_t off)
{
	char text[4096 + 32];

	snprintf(text, sizeof(text), "%s+0x%" PRIx64, path, off);
	return sanitize__json(text);
}

/* A site from the mappings of PID's last scan (it has exited), or NULL. */
static json_t *site_from_cache(struct devices *d, uint32_t pid, uint64_t addr)
{
	struct dev_proc *p = d ? proc_get(d, pid, false) : NULL;
	char sym[1024];
	uint64_t delta, off;
	size_t i;

	for (i = 0; p && i < p->n_maps; i++) {
		const struct proc_map *m = &p->maps[i];

		if (addr < m->start || addr >= m->end)
			continue;
		off = addr - m->start + m->pgoff;
		/* the file as it was mapped, kept open; else by the name the kernel gave it */
		if (m->kept && !elfsym__at(d->files[m->file].sym_path, off, sym, sizeof(sym), &delta))
			return named_site(sym, delta, m->path);
		if (!symbol_of(m->path, m->dev, m->ino, off, sym, sizeof(sym), &delta))
			return named_site(sym, delta, m->path);
		return file_site(m->path, off);
	}
	return NULL;
}

/* A site from the file the kernel named at the event, or NULL. */
static json_t *site_from_file(struct devices *d, const struct memtrail_frame_file *ff)
{
	dev_t dev = ff ? makedev(ff->dev >> 20, ff->dev & 0xfffff) : 0;
	char sym[1024], name[MEMTRAIL_FRAME_NAME_LEN];
	uint64_t delta;
	size_t i;

	if (!ff || !ff->ino)
		return NULL;
	for (i = 0; d && i < d->n_files; i++) {
		const struct dev_file *f = &d->files[i];

		if (f->dev != dev || f->ino != ff->ino || !f->name)
			continue;
		/* kept open as a runtime's user mapped it; else its name, where memtrail reaches it */
		if ((f->sym_fd >= 0 &&
		     !elfsym__at(f->sym_path, (uint64_t)ff->off, sym, sizeof(sym), &delta)) ||
		    !symbol_of(f->name, dev, f->ino, (uint64_t)ff->off, sym, sizeof(sym), &delta))
			return named_site(sym, delta, f->name);
	}
	snprintf(name, sizeof(name), "%s", ff->name);
	return name[0] ? file_site(name, (uint64_t)ff->off) : NULL;
}

json_t *devices__site(struct devices *d, uint32_t pid, uint64_t addr,
		      const struct memtrail_frame_file *ff)
{
	char name[64], line[4096 + 128], full[32], sym[1024];
	struct proc_map_line m;
	bool found;
	uint64_t delta, off;
	json_t *cached;
	FILE *f;
	int fd;

	snprintf(name, sizeof(name), "/proc/%u/maps", pid);
	f = fopen(name, "re");
	if (!f) {
		/* it exited already: the code it mapped at the last scan, or as the kernel named it */
		cached = site_from_cache(d, pid, addr);
		return cached ? cached : site_from_file(d, ff);
	}
	while (fgets(line, sizeof(line), f)) {
		if (!proc__parse_map(line, &m) || addr < m.start || addr >= m.end)
			continue;
		fclose(f);
		if (!m.exec)
			return NULL;	/* data, not code: a frame pointer walk gone astray */
		if (!m.path)
			return json_sprintf("[anon] 0x%" PRIx64, addr);
		off = addr - m.start + m.pgoff;
		/* the file mapped; an exiting process has none: memtrail's, if the same file */
		fd = proc__open_mapped(pid, &m, full, sizeof(full));
		found = (fd >= 0 && !elfsym__at(full, off, sym, sizeof(sym), &delta)) ||
			(fd < 0 && !symbol_of(m.path, m.dev, m.ino, off, sym, sizeof(sym), &delta));
		if (fd >= 0)
			close(fd);
		return found ? named_site(sym, delta, m.path) : file_site(m.path, off);
	}
	fclose(f);
	/* in no mapping now: unmapped since (a library closed), or never code */
	cached = site_from_cache(d, pid, addr);
	return cached ? cached : site_from_file(d, ff);
}

void devices__destroy(struct devices *d)
{
	size_t i;

	if (!d)
		return;
	for (i = 0; i < d->n_procs; i++)
		proc_free(d, &d->procs[i]);
	free(d->procs);
	/* each link's removal waits out a grace period: one per file with uprobe_multi */
	for (i = 0; i < d->n_files; i++) {
		launch_detach(&d->files[i]);
		tracer__detach_device_set(&d->files[i].probes);
		free(d->files[i].name);
		if (d->files[i].fd >= 0)
			close(d->files[i].fd);
	}
	free(d->files);
	for (i = 0; i < d->n_roots; i++)
		free(d->roots[i].files);
	free(d->roots);
	free(d->dropped);
	free(d->file_slots);
	free(d);
}
