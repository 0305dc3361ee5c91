// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "array.h"
#include "clock.h"
#include "elfsym.h"
#include "heap_int.h"
#include "log.h"
#include "proc.h"
#include "reaper.h"

enum {
	MALLOC = MEMTRAIL_HEAP_MALLOC, CALLOC = MEMTRAIL_HEAP_CALLOC,
	REALLOC = MEMTRAIL_HEAP_REALLOC, REALLOCARRAY = MEMTRAIL_HEAP_REALLOCARRAY,
	MEMALIGN = MEMTRAIL_HEAP_MEMALIGN, POSIX_MEMALIGN = MEMTRAIL_HEAP_POSIX_MEMALIGN,
	FREE = MEMTRAIL_HEAP_FREE,
};

struct heap_spec {
	const char *name;
	uint8_t op;
	bool cxx;	/* a C++ operator: probed only in a file that is an allocator */
	bool prefixed;	/* jemalloc builds also name it je_NAME or _rjem_NAME */
};

/*
 * Every function probed, by name (.dynsym, then .symtab). Where names share
 * an address (aliases: tc_malloc = malloc) the first one probes it; where
 * one calls another (mimalloc's wrappers, realloc's jump to malloc) the BPF
 * side counts the outermost call only.
 */
static const struct heap_spec specs[] = {
	{ "malloc", MALLOC, false, true },
	{ "calloc", CALLOC, false, true },
	{ "realloc", REALLOC, false, true },
	{ "reallocarray", REALLOCARRAY, false, false },
	{ "free", FREE, false, true },
	{ "cfree", FREE, false, false },
	{ "posix_memalign", POSIX_MEMALIGN, false, true },
	{ "aligned_alloc", MEMALIGN, false, true },
	{ "memalign", MEMALIGN, false, true },
	{ "valloc", MALLOC, false, true },
	{ "pvalloc", MALLOC, false, false },
	/* jemalloc's own API */
	{ "mallocx", MALLOC, false, true },
	{ "rallocx", REALLOC, false, true },
	{ "dallocx", FREE, false, true },
	{ "sdallocx", FREE, false, true },
	/* gperftools tcmalloc (aliases of the above in its shared builds) */
	{ "tc_malloc", MALLOC, false, false },
	{ "tc_calloc", CALLOC, false, false },
	{ "tc_realloc", REALLOC, false, false },
	{ "tc_free", FREE, false, false },
	{ "tc_free_sized", FREE, false, false },
	{ "tc_memalign", MEMALIGN, false, false },
	{ "tc_posix_memalign", POSIX_MEMALIGN, false, false },
	{ "tc_valloc", MALLOC, false, false },
	{ "tc_pvalloc", MALLOC, false, false },
	{ "tc_new", MALLOC, false, false },
	{ "tc_newarray", MALLOC, false, false },
	{ "tc_delete", FREE, false, false },
	{ "tc_deletearray", FREE, false, false },
	/* mimalloc */
	{ "mi_malloc", MALLOC, false, false },
	{ "mi_zalloc", MALLOC, false, false },
	{ "mi_calloc", CALLOC, false, false },
	{ "mi_realloc", REALLOC, false, false },
	{ "mi_reallocf", REALLOC, false, false },
	{ "mi_reallocarray", REALLOCARRAY, false, false },
	{ "mi_free", FREE, false, false },
	{ "mi_free_size", FREE, false, false },
	{ "mi_free_aligned", FREE, false, false },
	{ "mi_free_size_aligned", FREE, false, false },
	{ "mi_malloc_aligned", MALLOC, false, false },
	{ "mi_zalloc_aligned", MALLOC, false, false },
	{ "mi_calloc_aligned", CALLOC, false, false },
	{ "mi_realloc_aligned", REALLOC, false, false },
	{ "mi_aligned_alloc", MEMALIGN, false, false },
	{ "mi_memalign", MEMALIGN, false, false },
	{ "mi_posix_memalign", POSIX_MEMALIGN, false, false },
	{ "mi_new", MALLOC, false, false },
	{ "mi_new_aligned", MALLOC, false, false },
	/* C++ operators of an allocator library (libstdc++'s call malloc) */
	{ "_Znwm", MALLOC, true, false },
	{ "_Znam", MALLOC, true, false },
	{ "_ZnwmRKSt9nothrow_t", MALLOC, true, false },
	{ "_ZnamRKSt9nothrow_t", MALLOC, true, false },
	{ "_ZnwmSt11align_val_t", MALLOC, true, false },
	{ "_ZnamSt11align_val_t", MALLOC, true, false },
	{ "_ZdlPv", FREE, true, false },
	{ "_ZdaPv", FREE, true, false },
	{ "_ZdlPvm", FREE, true, false },
	{ "_ZdaPvm", FREE, true, false },
	{ "_ZdlPvSt11align_val_t", FREE, true, false },
	{ "_ZdaPvSt11align_val_t", FREE, true, false },
	{ "_ZdlPvmSt11align_val_t", FREE, true, false },
	{ "_ZdaPvmSt11align_val_t", FREE, true, false },
};

#define N_SPECS (sizeof(specs) / sizeof(specs[0]))
_Static_assert(N_SPECS == HEAP_N_SPECS, "heap_int.h's HEAP_N_SPECS is the table's length");


static const struct heap_spec *spec_of(const char *name, uint32_t *idx)
{
	size_t i, skip = 0;

	if (!strncmp(name, "je_", 3))
		skip = 3;
	else if (!strncmp(name, "_rjem_", 6))
		skip = 6;
	for (i = 0; i < N_SPECS; i++) {
		if (strcmp(specs[i].name, name + skip) || (skip && !specs[i].prefixed))
			continue;
		*idx = i;
		return &specs[i];
	}
	return NULL;
}

struct matches {
	uint64_t off[MATCH_MAX];
	uint32_t spec[MATCH_MAX];
	size_t n;
	bool allocator;	/* defines a C allocation function, not only operators */
};

static int on_symbol(void *ctx, const char *name, uint64_t off)
{
	struct matches *m = ctx;
	const struct heap_spec *s;
	uint32_t idx;
	size_t i;

	s = spec_of(name, &idx);
	if (!s)
		return 0;
	for (i = 0; i < m->n; i++)
		if (m->off[i] == off)
			return 0;	/* an alias: probed once */
	if (m->n < MATCH_MAX) {
		m->off[m->n] = off;
		m->spec[m->n++] = idx;
	}
	if (!s->cxx)
		m->allocator = true;
	return 0;
}

static void file_probes(struct heap_file *f, const char *path)
{
	struct matches m = { .n = 0 };
	size_t i, pass;

	if (elfsym__each(path, on_symbol, &m) || !m.allocator)
		return;
	/*
	 * The kernel removes a link's probes in this order while the target
	 * runs on: the hot pair first, so its hits stop soonest.
	 */
	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < m.n; i++) {
			const struct heap_spec *s = &specs[m.spec[i]];
			bool hot = s->op == MALLOC || s->op == FREE;
			uint64_t cookie = MEMTRAIL_COOKIE(s->op, MEMTRAIL_KIND_HEAP, 0, 0,
							  m.spec[i]);

			if (hot != (pass == 0))
				continue;
			f->entry_off[f->n_entry] = m.off[i];
			f->entry_cookie[f->n_entry++] = cookie;
			if (s->op == FREE)
				continue;
			f->ret_off[f->n_ret] = m.off[i];
			f->ret_cookie[f->n_ret++] = cookie;
		}
	}
	log__debug("'%s': %zu allocator functions", f->name, f->n_entry);
}

/*
 * File (DEV, INO) as an index into h->files, -1 when it has no allocator or
 * cannot be opened: the one PID maps at M (proc.h), else HOST_FD, memtrail's
 * own descriptor of file HOST (taken over: closed here when not kept). A
 * file seen before is not opened again; an allocator's stays open, so its
 * probes go on that file whatever its path names later.
 */
ssize_t heap_file_get(struct heap *h, dev_t dev, ino_t ino, uint32_t pid,
		      const struct proc_map_line *m, const char *host, int host_fd)
{
	struct heap_file *f;
	size_t i;
	int fd;

	for (i = 0; i < h->n_files; i++)
		if (h->files[i].dev == dev && h->files[i].ino == ino) {
			if (!m)
				close(host_fd);
			return h->files[i].n_entry ? (ssize_t)i : -1;
		}
	if (array__grow((void **)&h->files, &h->cap_files, h->n_files + 1, sizeof(*h->files))) {
		if (!m)
			close(host_fd);
		return -1;
	}
	f = &h->files[h->n_files];
	memset(f, 0, sizeof(*f));
	fd = host_fd;
	if (m)
		fd = proc__open_mapped(pid, m, f->path, sizeof(f->path));
	else
		snprintf(f->path, sizeof(f->path), "/proc/self/fd/%d", fd);
	if (fd < 0)
		return -1;	/* not known: another process may open it */
	f->dev = dev;
	f->ino = ino;
	f->fd = fd;
	f->name = strdup(m ? m->path : host);
	file_probes(f, f->path);
	if (!f->n_entry || !f->name) {
		close(fd);
		f->fd = -1;
		f->n_entry = 0;
	}
	h->n_files++;
	return f->n_entry ? (ssize_t)(h->n_files - 1) : -1;
}

struct heap_proc *heap_proc_get(struct heap *h, uint32_t pid, bool create)
{
	struct heap_proc *p;
	size_t i;

	for (i = 0; i < h->n_procs; i++)
		if (h->procs[i].pid == pid)
			return &h->procs[i];
	if (!create || array__grow((void **)&h->procs, &h->cap_procs, h->n_procs + 1,
				   sizeof(*h->procs)))
		return NULL;
	p = &h->procs[h->n_procs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	/* without a budget the probes are on from the start */
	p->on = h->cfg.budget_pct <= 0;
	p->first_ms = p->on_since_ms = clock__mono_ms();
	return p;
}

/*
 * Closing a link removes its breakpoints one probe at a time, then waits
 * out a grace period; the target traps until the last breakpoint is gone.
 * The reaper's threads close both at once, and the event loop goes on.
 */
void heap_link_detach(struct heap_link *l)
{
	reaper__close(l->fd_entry);
	reaper__close(l->fd_ret);
	l->fd_entry = l->fd_ret = -1;
	tracer__detach_device_set(&l->set);
}

int heap_link_attach(struct heap *h, uint32_t pid, struct heap_link *l)
{
	const struct heap_file *f = &h->files[l->file];
	int fd;

	if (!tracer__heap_multi(h->tracer))
		return tracer__attach_heap_each(h->tracer, pid, f->path, f->entry_off,
						f->entry_cookie, f->n_entry, f->ret_off,
						f->ret_cookie, f->n_ret, &l->set);
	fd = tracer__attach_heap(h->tracer, false, pid, f->path, f->entry_off, f->entry_cookie,
				 f->n_entry);
	if (fd < 0)
		return fd;
	l->fd_entry = fd;
	if (!f->n_ret)
		return 0;
	fd = tracer__attach_heap(h->tracer, true, pid, f->path, f->ret_off, f->ret_cookie,
				 f->n_ret);
	if (fd < 0) {
		heap_link_detach(l);
		return fd;
	}
	l->fd_ret = fd;
	return 0;
}

/* Probe file IDX for P. */
static void proc_add_file(struct heap *h, struct heap_proc *p, size_t idx)
{
	const struct heap_file *f = &h->files[idx];
	struct heap_link *l;
	size_t i;
	int err;

	for (i = 0; i < p->n_links; i++)
		if (p->links[i].file == idx)
			return;
	if (array__grow((void **)&p->links, &p->cap_links, p->n_links + 1, sizeof(*p->links)))
		return;
	l = &p->links[p->n_links];
	*l = (struct heap_link){ .file = idx, .fd_entry = -1, .fd_ret = -1,
					 .set = { .fd = { -1, -1 } } };
	p->n_links++;
	log__info("heap: probing '%s' for %u (%zu functions)", f->name, p->pid, f->n_entry);
	if (!p->on)
		return;
	err = heap_link_attach(h, p->pid, l);
	/* a process gone before its probes: nothing to warn about */
	if (err == -ESRCH)
		log__debug("heap: cannot probe '%s' for %u: %s", f->name, p->pid, strerror(-err));
	else if (err)
		log__warn("heap: cannot probe '%s' for %u: %s", f->name, p->pid, strerror(-err));
}

void heap_proc_switch(struct heap *h, struct heap_proc *p, bool on)
{
	size_t i;
	int err;

	if (p->on == on)
		return;
	/*
	 * calls are seen from the first link attached to the last detached:
	 * attaching and detaching take long enough on a loaded node (seen: a
	 * whole window's budget spent while the links went on) to count
	 */
	if (on) {
		p->on_since_ms = clock__mono_ms();
		for (i = 0; i < p->n_links; i++) {
			err = heap_link_attach(h, p->pid, &p->links[i]);
			if (err)
				log__debug("heap: cannot probe '%s' for %u: %s",
					   h->files[p->links[i].file].name,
					   p->pid, strerror(-err));
		}
	} else {
		for (i = 0; i < p->n_links; i++)
			heap_link_detach(&p->links[i]);
		p->on_ms += clock__mono_ms() - p->on_since_ms;
	}
	p->on = on;
}

struct prepare_ctx {
	struct heap *h;
	struct heap_proc *p;
};

static void prepare_lib(void *ctx, const char *lib)
{
	struct prepare_ctx *c = ctx;
	struct file_ids ids;
	char path[32];
	ssize_t idx;
	int fd = proc__reopen(lib, path, sizeof(path));

	if (fd < 0)
		return;
	/*
	 * known by the (device, inode) the process's maps will show, not by
	 * stat's: on overlayfs (a container's root) they differ, and the file
	 * would be probed twice, once under each
	 */
	if (proc__file_ids(fd, 0, true, &ids)) {
		close(fd);
		return;
	}
	idx = heap_file_get(c->h, ids.maps_dev, ids.maps_ino, 0, NULL, lib, fd);
	if (idx >= 0)
		proc_add_file(c->h, c->p, idx);
}

void heap__prepare_command(struct heap *h, uint32_t pid, const char *path)
{
	struct prepare_ctx c = { h, heap_proc_get(h, pid, true) };

	if (!c.p)
		return;
	prepare_lib(&c, path);	/* an allocator linked in */
	elfsym__needed(path, prepare_lib, &c);
}

/* Find the allocators PID maps now; P: its entry, NULL to make one if it maps any. */
struct heap_proc *heap_scan_maps(struct heap *h, uint32_t pid, struct heap_proc *p)
{
	char name[64], line[4096 + 128];
	struct proc_map_line m;
	ssize_t idx;
	FILE *f;

	snprintf(name, sizeof(name), "/proc/%u/maps", pid);
	f = fopen(name, "re");
	if (!f)
		return p;
	while (fgets(line, sizeof(line), f)) {
		if (!proc__parse_map(line, &m) || !m.exec || !m.path)
			continue;
		idx = heap_file_get(h, m.dev, m.ino, pid, &m, NULL, -1);
		if (idx < 0)
			continue;
		p = p ? p : heap_proc_get(h, pid, true);
		if (!p)
			break;
		proc_add_file(h, p, idx);
	}
	fclose(f);
	return p;
}

void heap__scan(struct heap *h, uint32_t pid)
{
	/* under a node budget a process's allocators are found as its window opens */
	if (!h->cfg.node)
		heap_scan_maps(h, pid, NULL);
}


void heap__forget(struct heap *h, uint32_t pid)
{
	struct heap_proc *p = heap_proc_get(h, pid, false);
	size_t i;

	if (!p)
		return;
	if (h->cfg.node) {
		/* watch keeps no ended process: its windows were said in its snapshots */
		if (p->on)
			heap_book_hits(h, p);
		if (h->node_pid == pid)
			h->node_pid = 0;
	} else if (!array__grow((void **)&h->done, &h->cap_done, h->n_done + 1,
				sizeof(*h->done))) {
		h->done[h->n_done].pid = pid;
		heap_sampling_now(h, p, pid, &h->done[h->n_done].sampling);
		h->n_done++;
	}
	for (i = 0; i < p->n_links; i++)
		heap_link_detach(&p->links[i]);
	free(p->links);
	tracer__heap_allow(h->tracer, pid, 0);
	*p = h->procs[--h->n_procs];
}

int heap__open(struct heap **out, struct tracer *t, const struct heap_config *cfg)
{
	struct heap *h = calloc(1, sizeof(*h));
	int err;

	*out = NULL;
	if (!h)
		return -ENOMEM;
	h->tracer = t;
	h->cfg = *cfg;
	err = heap_calibrate(h);
	if (err && cfg->budget_pct > 0) {
		log__error("cannot measure the cost of a heap probe: %s", strerror(-err));
		free(h);
		return err;
	}
	if (!err)
		log__info("heap: one probe hit costs %.2f us here; removing the probes takes %.0f ms, "
			  "%.1f ms of probe time for a busy allocator%s", h->cost_ns / 1000.0,
			  h->detach_ns / 1e6, h->close_ns / 1e6,
			  cfg->budget_pct > 0 ? "" : " (no --overhead-budget: probes stay on)");
	*out = h;
	return 0;
}

void heap__destroy(struct heap *h)
{
	size_t i;

	if (!h)
		return;
	while (h->n_procs)
		heap__forget(h, h->procs[0].pid);
	free(h->procs);
	free(h->done);
	for (i = 0; i < h->n_files; i++) {
		if (h->files[i].fd >= 0)
			close(h->files[i].fd);
		free(h->files[i].name);
	}
	free(h->files);
	free(h);
}
