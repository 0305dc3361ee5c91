// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Runtime libraries of the processes memtrail knows: open and close, their
 * mappings scanned, exec, fork and exit (devices_int.h names the parts).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "array.h"
#include "devices_int.h"
#include "kfeatures.h"
#include "log.h"
#include "proc.h"
#include "roots.h"

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
		devices_prepare_system(d);
	return 0;
}

struct dev_proc *devices_proc_get(struct devices *d, uint32_t pid, bool create)
{
	struct dev_proc *p;
	size_t i;

	if (pidmap__get(&d->proc_index, pid, &i))
		return &d->procs[i];
	if (!create || array__grow((void **)&d->procs, &d->cap_procs, d->n_procs + 1,
				   sizeof(*d->procs)) ||
	    pidmap__put(&d->proc_index, pid, d->n_procs))
		return NULL;
	p = &d->procs[d->n_procs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	return p;
}

/* P maps (or is about to map) probed runtime file IDX: it keeps the file probed. */
void devices_proc_file_add(struct dev_proc *p, size_t idx)
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
		if (devices_mapping_replaced(d, pid, &m, pend, n_pend)) {
			/* read in place */
			devices_file_find(d, m.dev, m.ino, &idx)->released = true;
			log__debug("'%s' is a new file on a deleted one's inode: read again", m.path);
		}
		df = devices_file_find(d, m.dev, m.ino, &idx);
		known = df && !df->released;
		df = devices_file_get(d, m.dev, m.ino, pid, &m, NULL, NULL, &idx);
		unopened |= !df && !known;
		/* probed only now, and this process mapped it before: what it called is lost */
		if (df && !known && df->runtime && devices_file_probed(df) && !d->attaching &&
		    pid != (uint32_t)getpid() && d->on_late)
			d->on_late(d->late_ctx, pid, df->name);
		if (df && !df->hook_keyed && devices_pend_key(pend, n_pend, &m))
			df->hook_keyed = true;
		if (df && seen.n_maps && seen.maps[seen.n_maps - 1].start == m.start)
			seen.maps[seen.n_maps - 1].file = idx;
		if (df && df->runtime && devices_file_probed(df) && pid != (uint32_t)getpid())
			runtime_user = true;
		if (df && df->runtime && pid != (uint32_t)getpid())
			say_kernel(d);
		/* runtimes only: the loader's hook stays (an exec maps ld.so unseen by lib_mapped) */
		if (!df || !df->runtime || !devices_file_probed(df) || df->pinned ||
		    pid == (uint32_t)getpid())
			continue;
		p = p ? p : devices_proc_get(d, pid, true);
		if (!p)
			break;
		devices_proc_file_add(p, idx);
	}
	fclose(f);
	/*
	 * an exited process not yet reaped: its maps are empty; one that ended
	 * while they were read: a file it mapped could not be opened, and what
	 * it mapped new is said by name, not lost (the caller's unseen path)
	 */
	gone = !seen.n_maps || (unopened && proc__exiting(pid));
	/* every process but memtrail is known by its root, for the runtimes the root has */
	p = p ? p : devices_proc_get(d, pid, pid != (uint32_t)getpid());
	if (p) {
		note_keys(d, p);
		/* after its mappings: a runtime it mapped before memtrail probed it is late */
		devices_root_enter(d, p, pid);
	}
	/*
	 * a runtime's user (one that maps it, or opened it at the gate): its
	 * mappings name its device call sites even after it exits, and their
	 * files are kept open (the new ones kept before the old are let go: a
	 * file in both stays open). Other processes make no device calls: no
	 * copy of their mappings (a node's thousands of idle processes).
	 */
	if (!p || !(runtime_user || p->n_files)) {
		proc_maps_free(d, &seen);
		free(seen.maps);
		seen.maps = NULL;
		seen.cap_maps = 0;
	}
	if (p) {
		for (j = 0; runtime_user && j < seen.n_maps; j++)
			if (seen.maps[j].file != SIZE_MAX)
				sym_hold(d, pid, &seen.maps[j], seen.maps[j].file);
		old = *p;
		p->maps = seen.maps;
		p->n_maps = seen.n_maps;
		p->cap_maps = seen.cap_maps;
		proc_maps_free(d, &old);
		free(old.maps);
		devices_proc_launch_update(d, p);
	}
	return gone ? -ENOENT : 0;
}

/* A scan of P due at AT (0 is "none": 1 then), unless one is due earlier. */
static void proc_due(struct devices *d, struct dev_proc *p, uint64_t at)
{
	if (!at)
		at = 1;
	if (!p->due_ms || at < p->due_ms)
		p->due_ms = at;
	if (p->listed)
		return;
	if (array__grow((void **)&d->due, &d->cap_due, d->n_due + 1, sizeof(*d->due)))
		d->due_lost = true;
	else
		d->due[d->n_due++] = p->pid;
	p->listed = !d->due_lost;
}

/* Every process with a scan due listed again (after memory ran out listing one). */
static void relist_due(struct devices *d)
{
	size_t i;

	d->due_lost = false;
	d->n_due = 0;
	for (i = 0; i < d->n_procs; i++) {
		d->procs[i].listed = false;
		if (d->procs[i].due_ms)
			proc_due(d, &d->procs[i], d->procs[i].due_ms);
	}
}

void devices__schedule(struct devices *d, uint32_t pid, uint64_t now_ms, uint64_t delay_ms)
{
	struct dev_proc *p = devices_proc_get(d, pid, true);

	if (p)
		proc_due(d, p, now_ms + delay_ms);
}

void devices__tick(struct devices *d, uint64_t now_ms)
{
	bool releasing = false;
	size_t i;

	d->now_ms = now_ms;
	/* a release due: first every scan still to come, whose process may map the file */
	for (i = 0; i < d->n_dropped && !releasing; i++)
		releasing = d->files[d->dropped[i]].release_ms <= now_ms;
	if (d->due_lost)
		relist_due(d);
	for (i = 0; i < d->n_due;) {
		uint32_t pid = d->due[i];
		struct dev_proc *p = devices_proc_get(d, pid, false);
		bool due = p && p->due_ms;

		if (due && p->due_ms > now_ms && !releasing) {
			i++;
			continue;
		}
		if (due) {
			p->due_ms = p->rescan_ms;
			p->rescan_ms = 0;
		}
		if (p && p->due_ms) {
			i++;
		} else {
			/* nothing more due (or the process was forgotten): off the list */
			if (p)
				p->listed = false;
			d->due[i] = d->due[--d->n_due];
		}
		if (due)
			(void)devices__scan(d, pid);	/* may list more, and move procs */
	}
	/* after the scans: a process that mapped a dropped file meanwhile keeps it */
	for (i = 0; i < d->n_dropped;) {
		struct dev_file *f = &d->files[d->dropped[i]];

		if (f->release_ms > now_ms) {
			i++;
			continue;
		}
		if (f->released || f->pinned || devices_file_used(d, d->dropped[i]) ||
		    devices_root_keeps(d, d->dropped[i]))
			f->release_ms = 0;
		else
			devices_file_release(d, d->dropped[i]);
		d->dropped[i] = d->dropped[--d->n_dropped];
	}
	if (d->n_files >= (d->forget_at ? d->forget_at : FILES_KEEP))
		devices_files_forget(d);
}

void devices__on_phase(struct devices *d, uint32_t pid, const char *name)
{
	bool exec = !strcmp(name, "execute");
	struct dev_proc *p;

	if (!exec && strcmp(name, "model_load"))
		return;
	p = devices_proc_get(d, pid, true);
	if (!p)
		return;
	/* after a model_load, its first launch starts "execute" again */
	p->executed = exec;
	devices_proc_launch_update(d, p);
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
		if (f->pinned || devices_file_used(d, files[i].file) ||
		    devices_root_keeps(d, files[i].file))
			devices_launch_update(d, files[i].file);
		else if (!f->released)
			devices_file_drop(d, files[i].file);
	}
	free(files);
}

void devices__forget(struct devices *d, uint32_t pid, bool purge)
{
	struct dev_proc *p = devices_proc_get(d, pid, false);

	if (purge)
		tracer__device_forget(d->tracer, pid);
	if (!p)
		return;
	drop_files(d, p);
	devices_root_leave(d, p);
	proc_free(d, p);
	pidmap__del(&d->proc_index, pid);
	*p = d->procs[--d->n_procs];
	/* the last one took its place (the map has room for a pid it holds) */
	if (p != &d->procs[d->n_procs])
		(void)pidmap__put(&d->proc_index, p->pid, (size_t)(p - d->procs));
}

void devices__exec(struct devices *d, uint32_t pid, uint64_t now_ms, uint64_t rescan_ms)
{
	struct dev_proc *p = devices_proc_get(d, pid, true);

	if (!p)
		return;
	if (p->n_files)
		drop_files(d, p);
	proc_due(d, p, now_ms);
	p->rescan_ms = now_ms + rescan_ms;
}

void devices__fork(struct devices *d, uint32_t parent, uint32_t child)
{
	struct dev_proc *pp = devices_proc_get(d, parent, false), *c;
	size_t n = pp ? pp->n_files : 0, root = pp ? pp->root : 0, i;

	/* in its parent's root */
	if (root && (c = devices_proc_get(d, child, true)) && !c->root) {
		c->root = root;
		d->roots[root - 1].users++;
	}
	c = n ? devices_proc_get(d, child, true) : NULL;
	pp = devices_proc_get(d, parent, false);	/* may have moved */
	if (!c || !pp)
		return;
	/* its parent's files, and what it opened at the gate before its fork was read */
	for (i = 0; i < n; i++)
		devices_proc_file_add(c, pp->files[i].file);
	/* a fork does not take its parent's CUDA context: launches as its parent's */
	c->executed = pp->executed;
}

size_t devices__files(const struct devices *d)
{
	return d->n_files;
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

void devices__destroy(struct devices *d)
{
	size_t i;

	if (!d)
		return;
	for (i = 0; i < d->n_procs; i++)
		proc_free(d, &d->procs[i]);
	free(d->procs);
	free(d->due);
	pidmap__free(&d->proc_index);
	/* each link's removal waits out a grace period: one per file with uprobe_multi */
	for (i = 0; i < d->n_files; i++) {
		devices_launch_detach(&d->files[i]);
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
