// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The files seen in targets' mappings, by identity: found in a hash table,
 * opened and probed when new, released when no process maps them, forgotten.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "array.h"
#include "devices_int.h"
#include "log.h"
#include "proc.h"

/*
 * A file's last known user is gone: its release waits this long, so that a
 * process that mapped it meanwhile (not told at once: the file was probed)
 * is scanned first and keeps it. Its lib_files keys go at once: whoever maps
 * it from then on is scanned at once.
 */
#define RELEASE_DELAY_MS 1000

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
struct dev_file *devices_file_find(const struct devices *d, dev_t dev, ino_t ino, size_t *index)
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
bool devices_file_probed(const struct dev_file *f)
{
	return f->n_launch || f->probes.n_links || f->probes.fd[0] >= 0 || f->probes.fd[1] >= 0;
}

/* Whether memtrail holds nothing for F: a seen-before mark only. */
bool devices_file_idle(const struct dev_file *f)
{
	return !f->pinned && !devices_file_probed(f) && !f->launch_on && f->fd < 0 &&
	       !f->release_ms && !f->n_keys && f->sym_fd < 0 && !f->sym_users;
}

/* The kernel's s_dev of DEV (lib_files keys): major << 20 | minor. */
static uint64_t kernel_dev(dev_t dev)
{
	return (uint64_t)major(dev) << 20 | minor(dev);
}

/* The key among PEND (lib_files keys) that is the file M maps, as maps names it; NULL: none. */
const struct memtrail_lib_key *devices_pend_key(const struct memtrail_lib_key *pend,
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
bool devices_mapping_replaced(struct devices *d, uint32_t pid, const struct proc_map_line *m,
			      const struct memtrail_lib_key *pend, size_t n_pend)
{
	const struct memtrail_lib_key *k = devices_pend_key(pend, n_pend, m);
	struct dev_file *f;
	struct stat st;
	size_t idx;

	f = devices_file_find(d, m->dev, m->ino, &idx);
	if (!f || f->released || !devices_file_idle(f))
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
struct dev_file *devices_file_get(struct devices *d, dev_t dev, ino_t ino, uint32_t pid,
				  const struct proc_map_line *m, const char *host,
				  const char *name_as, size_t *index)
{
	struct dev_file *f = devices_file_find(d, dev, ino, index);
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
	devices_probe_file(d, f);
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
struct dev_file *devices_file_get_fd(struct devices *d, int fd, const struct file_ids *ids,
				     const char *name, size_t *index)
{
	struct dev_file *f;
	char host[32];

	snprintf(host, sizeof(host), "/proc/self/fd/%d", fd);
	f = devices_file_get(d, ids->maps_dev, ids->maps_ino, 0, NULL, host, name, index);
	if (f && (ids->hook_dev != ids->maps_dev || ids->hook_ino != ids->maps_ino))
		file_alias(d, *index, ids->hook_dev, ids->hook_ino);
	return f;
}

/* Whether a process memtrail knows maps file IDX. */
bool devices_file_used(const struct devices *d, size_t idx)
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

/* File IDX's last known user is gone: released after RELEASE_DELAY_MS unless mapped again. */
void devices_file_drop(struct devices *d, size_t idx)
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
void devices_file_release(struct devices *d, size_t idx)
{
	struct dev_file *f = &d->files[idx];

	tracer__detach_device_set(&f->probes);
	if (f->launch_on)
		devices_launch_detach(f);
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	f->n_launch = 0;
	f->released = true;

	f->release_ms = 0;
	log__debug("no process maps '%s' any more: its probes removed", f->name);
}

/* Forget the idle files not looked up since the last forgetting (FILES_KEEP). */
void devices_files_forget(struct devices *d)
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
		if (!to[i] && (d->files[i].seen == d->gen || !devices_file_idle(&d->files[i])))
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
