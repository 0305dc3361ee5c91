// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The roots processes run in, and the runtimes their loader caches name, probed. */
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "devices_int.h"
#include "log.h"
#include "proc.h"
#include "roots.h"

/* Whether file IDX is a runtime of a root some known process runs in: kept probed for it. */
bool devices_root_keeps(const struct devices *d, size_t idx)
{
	const struct dev_file *f = &d->files[idx];
	size_t i, j;

	for (i = 0; i < d->n_roots; i++)
		for (j = 0; d->roots[i].users && j < d->roots[i].n_files; j++)
			if (d->roots[i].files[j].dev == f->dev && d->roots[i].files[j].ino == f->ino)
				return true;
	return false;
}

/* A runtime a loader cache names (roots.h), probed before any process maps it. */
static void root_file(void *ctx, int fd, const char *path)
{
	struct devices *d = ctx;
	struct dev_root *r = d->root_now;
	struct file_ids ids;
	struct dev_file *f;
	size_t idx;

	if (proc__file_ids(fd, d->root_pid, true, &ids))
		return;
	f = devices_file_get_fd(d, fd, &ids, path, &idx);
	if (!f)
		return;
	if (!r) {
		f->pinned = true;	/* the host's: kept */
		return;
	}
	if (!array__grow((void **)&r->files, &r->cap_files, r->n_files + 1, sizeof(*r->files)))
		r->files[r->n_files++] = (struct dev_root_file){ ids.maps_dev, ids.maps_ino };
}

/*
 * Runtime libraries the system's loader cache names, probed before any
 * process maps them. The NVIDIA driver's libcuda.so.1 is one file for the
 * host and for every container it is mounted into, so its probes are in
 * place even for a program that calls it the moment it starts.
 */
void devices_prepare_system(struct devices *d)
{
	d->quiet = true;	/* no process uses them yet: not news */
	d->root_now = NULL;
	d->root_pid = 0;
	roots__each_runtime(0, root_file, d);
	d->quiet = false;
}

/* No known process runs in root IDX any more: its runtimes go unless one maps them. */
static void root_release(struct devices *d, size_t idx)
{
	struct dev_root *r = &d->roots[idx];
	size_t i, fi, last = d->n_roots - 1;
	struct dev_file *f;

	for (i = 0; i < r->n_files; i++) {
		f = devices_file_find(d, r->files[i].dev, r->files[i].ino, &fi);
		if (f && !f->released && !f->pinned && !devices_file_used(d, fi))
			devices_file_drop(d, fi);
	}
	free(r->files);
	d->roots[idx] = d->roots[last];
	d->n_roots--;
	for (i = 0; i < d->n_procs; i++)
		if (d->procs[i].root == last + 1)
			d->procs[i].root = idx + 1;
}

void devices_root_leave(struct devices *d, struct dev_proc *p)
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
void devices_root_enter(struct devices *d, struct dev_proc *p, uint32_t pid)
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
	devices_root_leave(d, p);
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
