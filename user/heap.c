// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "array.h"
#include "elfsym.h"
#include "heap.h"
#include "log.h"
#include "proc.h"

#define CYCLE_MS 1000		/* the budget's period */
#define CALIBRATE_PAIRS 2000	/* alloc/free pairs timed with and without probes */

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
#define MATCH_MAX (3 * N_SPECS)

/* The allocator functions of one file (by identity), as probe offsets. */
struct heap_file {
	dev_t dev;
	ino_t ino;
	size_t n_entry, n_ret;
	uint64_t entry_off[MATCH_MAX], entry_cookie[MATCH_MAX];
	uint64_t ret_off[MATCH_MAX], ret_cookie[MATCH_MAX];
};

struct heap_link {
	size_t file;
	char *path;	/* opens it: through the process's root */
	int fd_entry, fd_ret;	/* -1: detached */
};

struct heap_proc {
	uint32_t pid;
	struct heap_link *links;
	size_t n_links, cap_links;
	bool on;		/* probes attached */
	uint64_t on_since_ms;
	uint64_t on_ms;		/* time attached, closed windows */
	uint64_t first_ms;
	uint64_t next_cycle_ms;
	uint64_t cpu_start_ns, cpu_last_ns;
	bool cpu_known;
	uint64_t cycles, spent;	/* cycles run, and those whose budget ran out */
};

struct heap {
	struct tracer *tracer;
	struct heap_config cfg;
	double cost_ns;		/* measured cost of one probe hit, 0: not measured */
	struct heap_file *files;
	size_t n_files, cap_files;
	struct heap_proc *procs;
	size_t n_procs, cap_procs;
	struct heap_done {	/* how ended processes were probed, for the trail */
		uint32_t pid;
		json_t *sampling;
	} *done;
	size_t n_done, cap_done;
};

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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
	size_t i;

	if (elfsym__each(path, on_symbol, &m) || !m.allocator)
		return;
	for (i = 0; i < m.n; i++) {
		const struct heap_spec *s = &specs[m.spec[i]];
		uint64_t cookie = MEMTRAIL_COOKIE(s->op, MEMTRAIL_KIND_HEAP, 0, 0, m.spec[i]);

		f->entry_off[f->n_entry] = m.off[i];
		f->entry_cookie[f->n_entry++] = cookie;
		if (s->op == FREE)
			continue;
		f->ret_off[f->n_ret] = m.off[i];
		f->ret_cookie[f->n_ret++] = cookie;
	}
	log__debug("'%s': %zu allocator functions", path, f->n_entry);
}

static ssize_t file_get(struct heap *h, dev_t dev, ino_t ino, const char *path)
{
	struct heap_file *f;
	size_t i;

	for (i = 0; i < h->n_files; i++)
		if (h->files[i].dev == dev && h->files[i].ino == ino)
			return h->files[i].n_entry ? (ssize_t)i : -1;
	if (array__grow((void **)&h->files, &h->cap_files, h->n_files + 1, sizeof(*h->files)))
		return -1;
	f = &h->files[h->n_files];
	memset(f, 0, sizeof(*f));
	f->dev = dev;
	f->ino = ino;
	file_probes(f, path);
	h->n_files++;
	return f->n_entry ? (ssize_t)(h->n_files - 1) : -1;
}

static struct heap_proc *proc_get(struct heap *h, uint32_t pid, bool create)
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
	p->first_ms = p->on_since_ms = mono_ms();
	return p;
}

static void link_detach(struct heap_link *l)
{
	/* closing a link removes its breakpoints, then waits out one grace period */
	if (l->fd_entry >= 0)
		close(l->fd_entry);
	if (l->fd_ret >= 0)
		close(l->fd_ret);
	l->fd_entry = l->fd_ret = -1;
}

static int link_attach(struct heap *h, uint32_t pid, struct heap_link *l)
{
	const struct heap_file *f = &h->files[l->file];
	int fd;

	fd = tracer__attach_heap(h->tracer, false, pid, l->path, f->entry_off, f->entry_cookie,
				 f->n_entry);
	if (fd < 0)
		return fd;
	l->fd_entry = fd;
	if (!f->n_ret)
		return 0;
	fd = tracer__attach_heap(h->tracer, true, pid, l->path, f->ret_off, f->ret_cookie,
				 f->n_ret);
	if (fd < 0) {
		link_detach(l);
		return fd;
	}
	l->fd_ret = fd;
	return 0;
}

/* Probe file IDX, opened as PATH, for P. */
static void proc_add_file(struct heap *h, struct heap_proc *p, size_t idx, const char *path)
{
	struct heap_link *l;
	size_t i;
	int err;

	for (i = 0; i < p->n_links; i++)
		if (p->links[i].file == idx)
			return;
	if (array__grow((void **)&p->links, &p->cap_links, p->n_links + 1, sizeof(*p->links)))
		return;
	l = &p->links[p->n_links];
	*l = (struct heap_link){ .file = idx, .path = strdup(path), .fd_entry = -1, .fd_ret = -1 };
	if (!l->path)
		return;
	p->n_links++;
	log__info("heap: probing '%s' for %u (%zu functions)", path, p->pid,
		  h->files[idx].n_entry);
	if (!p->on)
		return;
	err = link_attach(h, p->pid, l);
	if (err)
		log__warn("heap: cannot probe '%s' for %u: %s", path, p->pid, strerror(-err));
}

static void proc_switch(struct heap *h, struct heap_proc *p, bool on, uint64_t now_ms)
{
	size_t i;
	int err;

	if (p->on == on)
		return;
	if (on) {
		for (i = 0; i < p->n_links; i++) {
			err = link_attach(h, p->pid, &p->links[i]);
			if (err)
				log__debug("heap: cannot probe '%s' for %u: %s", p->links[i].path,
					   p->pid, strerror(-err));
		}
		p->on_since_ms = now_ms;
	} else {
		for (i = 0; i < p->n_links; i++)
			link_detach(&p->links[i]);
		p->on_ms += now_ms - p->on_since_ms;
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
	struct stat st;
	ssize_t idx;

	if (stat(lib, &st))
		return;
	idx = file_get(c->h, st.st_dev, st.st_ino, lib);
	if (idx >= 0)
		proc_add_file(c->h, c->p, idx, lib);
}

void heap__prepare_command(struct heap *h, uint32_t pid, const char *path)
{
	struct prepare_ctx c = { h, proc_get(h, pid, true) };

	if (!c.p)
		return;
	prepare_lib(&c, path);	/* an allocator linked in */
	elfsym__needed(path, prepare_lib, &c);
}

void heap__scan(struct heap *h, uint32_t pid)
{
	char name[64], line[4096 + 128], full[4096 + 64];
	struct heap_proc *p = NULL;
	struct proc_map_line m;
	ssize_t idx;
	FILE *f;

	snprintf(name, sizeof(name), "/proc/%u/maps", pid);
	f = fopen(name, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (!proc__parse_map(line, &m) || !m.exec || !m.path ||
		    proc__mapped_path(pid, &m, full, sizeof(full)))
			continue;
		idx = file_get(h, m.dev, m.ino, full);
		if (idx < 0)
			continue;
		p = p ? p : proc_get(h, pid, true);
		if (!p)
			break;
		proc_add_file(h, p, idx, full);
	}
	fclose(f);
}

void heap__forget(struct heap *h, uint32_t pid)
{
	struct heap_proc *p = proc_get(h, pid, false);
	json_t *sampling;
	size_t i;

	if (!p)
		return;
	sampling = heap__sampling(h, pid, 0);
	if (sampling && !array__grow((void **)&h->done, &h->cap_done, h->n_done + 1,
				     sizeof(*h->done)))
		h->done[h->n_done++] = (struct heap_done){ pid, sampling };
	else
		json_decref(sampling);
	for (i = 0; i < p->n_links; i++) {
		link_detach(&p->links[i]);
		free(p->links[i].path);
	}
	free(p->links);
	tracer__heap_allow(h->tracer, pid, 0);
	*p = h->procs[--h->n_procs];
}

/* CPU time PID has used, user and system, in ns; false when it is gone. */
static bool proc_cpu_ns(uint32_t pid, uint64_t *ns)
{
	char name[64], buf[1024], *p;
	unsigned long long utime, stime;
	FILE *f;
	size_t n;

	snprintf(name, sizeof(name), "/proc/%u/stat", pid);
	f = fopen(name, "re");
	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');	/* comm may hold spaces */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
			 &utime, &stime) != 2)
		return false;
	*ns = (utime + stime) * (1000000000ULL / (unsigned long long)sysconf(_SC_CLK_TCK));
	return true;
}

/*
 * One cycle of P's budget: the CPU time it used in the last cycle (or one
 * CPU's worth, the first time) times the budget, divided by the measured
 * cost of a hit, is the number of hits it may take before its links go.
 */
static void proc_cycle(struct heap *h, struct heap_proc *p, uint64_t now_ms)
{
	uint64_t cpu, used, allow, hits;

	p->next_cycle_ms = now_ms + CYCLE_MS;
	if (!proc_cpu_ns(p->pid, &cpu))
		return;
	if (!p->cpu_known) {
		p->cpu_known = true;
		p->cpu_start_ns = p->cpu_last_ns = cpu;
		used = (uint64_t)CYCLE_MS * 1000000;
	} else {
		used = cpu - p->cpu_last_ns;
		p->cpu_last_ns = cpu;
	}
	p->cycles++;
	allow = (uint64_t)(used * h->cfg.budget_pct / 100.0 / h->cost_ns);
	if (!allow) {
		proc_switch(h, p, false, now_ms);
		return;
	}
	hits = tracer__heap_hits(h->tracer, p->pid);
	tracer__heap_allow(h->tracer, p->pid, hits + allow);
	log__debug("heap: %u may take %" PRIu64 " hits from %" PRIu64, p->pid, allow, hits);
	proc_switch(h, p, true, now_ms);
}

void heap__tick(struct heap *h, uint64_t now_ms)
{
	size_t i;

	(void)now_ms;
	if (h->cfg.budget_pct <= 0)
		return;
	now_ms = mono_ms();
	for (i = 0; i < h->n_procs; i++)
		if (now_ms >= h->procs[i].next_cycle_ms)
			proc_cycle(h, &h->procs[i], now_ms);
}

void heap__budget_spent(struct heap *h, uint32_t pid, uint64_t now_ms)
{
	struct heap_proc *p = proc_get(h, pid, false);

	(void)now_ms;
	if (!p || h->cfg.budget_pct <= 0)
		return;
	p->spent++;
	log__debug("heap: %u spent its budget at %" PRIu64 " hits", pid,
		   tracer__heap_hits(h->tracer, pid));
	proc_switch(h, p, false, mono_ms());
	log__debug("heap: %u probes off at %" PRIu64 " hits", pid,
		   tracer__heap_hits(h->tracer, pid));
}

static json_t *sampling_json(struct heap *h, struct heap_proc *p, uint32_t pid, uint64_t now_ms);

json_t *heap__sampling(struct heap *h, uint32_t pid, uint64_t now_ms)
{
	struct heap_proc *p = proc_get(h, pid, false);
	size_t i;

	for (i = 0; !p && i < h->n_done; i++)
		if (h->done[i].pid == pid)
			return json_incref(h->done[i].sampling);
	return sampling_json(h, p, pid, now_ms);
}

static json_t *sampling_json(struct heap *h, struct heap_proc *p, uint32_t pid, uint64_t now_ms)
{
	uint64_t hits = tracer__heap_hits(h->tracer, pid), on_ms, total_ms, cpu;
	bool budget = h->cfg.budget_pct > 0;
	json_t *o;

	(void)now_ms;
	o = json_pack("{s:s, s:I, s:b, s:I}", "mode",
		      budget ? "budget" : h->cfg.sample_bytes ? "sampled" : "full",
		      "sample_bytes", (json_int_t)h->cfg.sample_bytes,
		      "inuse", !budget, "probe_hits", (json_int_t)hits);
	if (!o || !p)
		return o;
	now_ms = mono_ms();
	on_ms = p->on_ms + (p->on ? now_ms - p->on_since_ms : 0);
	total_ms = now_ms - p->first_ms;
	json_object_set_new(o, "coverage", json_real(total_ms ? (double)on_ms / total_ms : 1.0));
	if (h->cost_ns > 0) {
		json_object_set_new(o, "cost_per_hit_ns", json_real(h->cost_ns));
		json_object_set_new(o, "probe_cost_ms", json_real(hits * h->cost_ns / 1e6));
	}
	if (budget) {
		json_object_set_new(o, "budget_pct", json_real(h->cfg.budget_pct));
		json_object_set_new(o, "cycles", json_integer(p->cycles));
		json_object_set_new(o, "cycles_spent", json_integer(p->spent));
		if (p->cpu_known && proc_cpu_ns(pid, &cpu))
			p->cpu_last_ns = p->cpu_last_ns > cpu ? p->cpu_last_ns : cpu;
		if (p->cpu_known)
			json_object_set_new(o, "target_cpu_ms",
					    json_real((p->cpu_last_ns - p->cpu_start_ns) / 1e6));
	}
	return o;
}

/* The calibration pair: probed in memtrail itself, like malloc and free. */
static char calibrate_buf[64];

__attribute__((noinline, used)) void *memtrail_calibrate_alloc(size_t size)
{
	asm volatile("" : : "r"(size) : "memory");
	return calibrate_buf;
}

__attribute__((noinline, used)) void memtrail_calibrate_free(void *p)
{
	asm volatile("" : : "r"(p) : "memory");
}

/* The file offset of code at ADDR in memtrail itself. */
static int self_offset(const void *addr, uint64_t *off)
{
	unsigned long long start, end, pgoff, a = (uintptr_t)addr;
	char line[4096 + 128], perms[8];
	FILE *f = fopen("/proc/self/maps", "re");
	int err = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx-%llx %7s %llx", &start, &end, perms, &pgoff) == 4 &&
		    a >= start && a < end) {
			*off = a - start + pgoff;
			err = 0;
			break;
		}
	}
	fclose(f);
	return err;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static uint64_t calibrate_run(void)
{
	void *(*volatile alloc)(size_t) = memtrail_calibrate_alloc;
	void (*volatile release)(void *) = memtrail_calibrate_free;
	uint64_t t0 = mono_ns();
	int i;

	for (i = 0; i < CALIBRATE_PAIRS; i++)
		release(alloc(64));
	return mono_ns() - t0;
}

/*
 * The cost of one probe hit, as the budget counts it: memtrail becomes a
 * target for a moment and times alloc/free pairs through the same programs
 * (entry, return, entry), against the same pairs unprobed.
 */
static int calibrate(struct heap *h)
{
	uint64_t off[2], cookie[2], bare, probed, hits;
	uint32_t self = getpid();
	int fds[2] = { -1, -1 }, err;

	if (self_offset((const void *)memtrail_calibrate_alloc, &off[0]) ||
	    self_offset((const void *)memtrail_calibrate_free, &off[1]))
		return -ENOENT;
	cookie[0] = MEMTRAIL_COOKIE(MEMTRAIL_HEAP_CALIBRATE, MEMTRAIL_KIND_HEAP, 0, 0, 0);
	cookie[1] = MEMTRAIL_COOKIE(MEMTRAIL_HEAP_FREE, MEMTRAIL_KIND_HEAP, 0, 0, 0);
	err = tracer__self_target(h->tracer, true);
	if (err)
		return err;
	bare = calibrate_run();
	fds[0] = tracer__attach_heap(h->tracer, false, self, "/proc/self/exe", off, cookie, 2);
	fds[1] = tracer__attach_heap(h->tracer, true, self, "/proc/self/exe", off, cookie, 1);
	if (fds[0] < 0 || fds[1] < 0) {
		err = fds[0] < 0 ? fds[0] : fds[1];
		goto out;
	}
	probed = calibrate_run();
	hits = tracer__heap_hits(h->tracer, self);
	if (hits < CALIBRATE_PAIRS) {
		err = -EIO;
		goto out;
	}
	h->cost_ns = probed > bare ? (double)(probed - bare) / hits : 1.0;
out:
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	tracer__self_target(h->tracer, false);
	return err;
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
	err = calibrate(h);
	if (err && cfg->budget_pct > 0) {
		log__error("cannot measure the cost of a heap probe: %s", strerror(-err));
		free(h);
		return err;
	}
	if (!err)
		log__info("heap: one probe hit costs %.2f us here%s", h->cost_ns / 1000.0,
			  cfg->budget_pct > 0 ? "" : " (no --overhead-budget: probes stay on)");
	*out = h;
	return 0;
}

void heap__destroy(struct heap *h)
{
	if (!h)
		return;
	while (h->n_procs)
		heap__forget(h, h->procs[0].pid);
	free(h->procs);
	while (h->n_done)
		json_decref(h->done[--h->n_done].sampling);
	free(h->done);
	free(h->files);
	free(h);
}
