// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "array.h"
#include "clock.h"
#include "elfsym.h"
#include "heap.h"
#include "log.h"
#include "proc.h"
#include "reaper.h"

#define TICK_MS 100		/* the budget's books are kept this often */
#define BANK_MS 5000		/* credit kept at most: this much CPU time's share */
#define WINDOW_CPU_MS 1000	/* a window opens on this much CPU time's share */
#define CALIBRATE_PAIRS 20000	/* alloc/free pairs timed with and without probes */
#define NODE_WINDOW_MS (HEAP_NODE_WINDOW_S * 1000)
#define NODE_OFFERED 8		/* processes a node budget chooses its next window among */

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
	char *name;	/* as the first process that mapped it names it */
	int fd;		/* an allocator's, opened as mapped (proc.h); else -1 */
	char path[32];	/* opens it from here: /proc/self/fd/FD */
	size_t n_entry, n_ret;
	uint64_t entry_off[MATCH_MAX], entry_cookie[MATCH_MAX];
	uint64_t ret_off[MATCH_MAX], ret_cookie[MATCH_MAX];
};

struct heap_link {
	size_t file;
	int fd_entry, fd_ret;	/* -1: detached */
	struct tracer_probe_set set;	/* kernels without uprobe_multi: a link per probe */
};

struct heap_proc {
	uint32_t pid;
	struct heap_link *links;
	size_t n_links, cap_links;
	bool on;		/* probes attached */
	uint64_t on_since_ms;
	uint64_t on_ms;		/* time attached, closed windows */
	uint64_t first_ms;
	uint64_t next_tick_ms;
	uint64_t cpu_start_ns, cpu_last_ns;
	bool cpu_known;
	double cpu_share;	/* of one CPU, over the last tick */
	/*
	 * The budget's account, in ns of probe time: credited with the budget's
	 * share of the CPU time the target uses, debited with hits x cost. A
	 * window opens only while the credit covers what closing it will cost
	 * (hits go on until the kernel has removed the breakpoints), so an
	 * overshoot is paid from credit already earned, not from debt.
	 */
	double balance_ns;
	uint64_t hits_booked;	/* hits debited so far */
	uint64_t allow_hits;	/* the hit at which BPF says the window is spent */
	double close_seen_ns;	/* what closing its windows has cost, recently at most */
	uint64_t cycles, spent;	/* windows opened, and those whose budget ran out */
	/* under a node budget: its latest windows (a ring, n_win of them so far) */
	struct trail_heap_window win[TRAIL_HEAP_WINDOWS];
	uint64_t n_win;
	uint64_t win_hits0;	/* its hits when the last window opened */
	uint64_t decided;	/* the hit at which its last window was closed */
	uint64_t tried_ms;	/* a window last opened for it, or tried (mono_ms) */
	bool settling;		/* its last window closed, its probes maybe still going */
};

struct heap {
	struct tracer *tracer;
	struct heap_config cfg;
	double cost_ns;		/* measured cost of one probe hit, 0: not measured */
	uint64_t detach_ns;	/* how long removing the probes takes */
	double close_ns;	/* probe time a saturating target spends while they go */
	struct heap_file *files;
	size_t n_files, cap_files;
	struct heap_proc *procs;
	size_t n_procs, cap_procs;
	struct heap_done {	/* how ended processes were probed, for the trail */
		uint32_t pid;
		struct trail_heap sampling;
	} *done;
	size_t n_done, cap_done;
	/*
	 * A node budget (cfg.node): one account for the node, in ns of probe
	 * time, credited with budget_pct of the time that passes and debited
	 * with every window's hits; one window open at a time.
	 */
	double node_balance_ns;
	double node_bank_ns;	/* the most it holds between windows */
	uint64_t node_last_ms, node_next_ms;	/* mono_ms */
	uint32_t node_pid;	/* the process whose window is open, 0: none */
	uint32_t offered[NODE_OFFERED];
	size_t n_offered;
};

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
static ssize_t file_get(struct heap *h, dev_t dev, ino_t ino, uint32_t pid,
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
	p->first_ms = p->on_since_ms = clock__mono_ms();
	return p;
}

/*
 * Closing a link removes its breakpoints one probe at a time, then waits
 * out a grace period; the target traps until the last breakpoint is gone.
 * The reaper's threads close both at once, and the event loop goes on.
 */
static void link_detach(struct heap_link *l)
{
	reaper__close(l->fd_entry);
	reaper__close(l->fd_ret);
	l->fd_entry = l->fd_ret = -1;
	tracer__detach_device_set(&l->set);
}

static int link_attach(struct heap *h, uint32_t pid, struct heap_link *l)
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
		link_detach(l);
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
	err = link_attach(h, p->pid, l);
	/* a process gone before its probes: nothing to warn about */
	if (err == -ESRCH)
		log__debug("heap: cannot probe '%s' for %u: %s", f->name, p->pid, strerror(-err));
	else if (err)
		log__warn("heap: cannot probe '%s' for %u: %s", f->name, p->pid, strerror(-err));
}

static void proc_switch(struct heap *h, struct heap_proc *p, bool on)
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
			err = link_attach(h, p->pid, &p->links[i]);
			if (err)
				log__debug("heap: cannot probe '%s' for %u: %s",
					   h->files[p->links[i].file].name,
					   p->pid, strerror(-err));
		}
	} else {
		for (i = 0; i < p->n_links; i++)
			link_detach(&p->links[i]);
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
	idx = file_get(c->h, ids.maps_dev, ids.maps_ino, 0, NULL, lib, fd);
	if (idx >= 0)
		proc_add_file(c->h, c->p, idx);
}

void heap__prepare_command(struct heap *h, uint32_t pid, const char *path)
{
	struct prepare_ctx c = { h, proc_get(h, pid, true) };

	if (!c.p)
		return;
	prepare_lib(&c, path);	/* an allocator linked in */
	elfsym__needed(path, prepare_lib, &c);
}

/* Find the allocators PID maps now; P: its entry, NULL to make one if it maps any. */
static struct heap_proc *scan_maps(struct heap *h, uint32_t pid, struct heap_proc *p)
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
		idx = file_get(h, m.dev, m.ino, pid, &m, NULL, -1);
		if (idx < 0)
			continue;
		p = p ? p : proc_get(h, pid, true);
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
		scan_maps(h, pid, NULL);
}

static void sampling_now(struct heap *h, struct heap_proc *p, uint32_t pid,
			 struct trail_heap *out);
static void book_hits(struct heap *h, struct heap_proc *p);

void heap__forget(struct heap *h, uint32_t pid)
{
	struct heap_proc *p = proc_get(h, pid, false);
	size_t i;

	if (!p)
		return;
	if (h->cfg.node) {
		/* watch keeps no ended process: its windows were said in its snapshots */
		if (p->on)
			book_hits(h, p);
		if (h->node_pid == pid)
			h->node_pid = 0;
	} else if (!array__grow((void **)&h->done, &h->cap_done, h->n_done + 1,
				sizeof(*h->done))) {
		h->done[h->n_done].pid = pid;
		sampling_now(h, p, pid, &h->done[h->n_done].sampling);
		h->n_done++;
	}
	for (i = 0; i < p->n_links; i++)
		link_detach(&p->links[i]);
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

/* Debit the hits P's probes took since the last booking. */
static void book_hits(struct heap *h, struct heap_proc *p)
{
	uint64_t hits = tracer__heap_hits(h->tracer, p->pid);
	double *balance = h->cfg.node ? &h->node_balance_ns : &p->balance_ns;

	if (hits < p->hits_booked)
		hits = p->hits_booked;	/* its target gone from the kernel's table: nothing more */
	*balance -= (double)(hits - p->hits_booked) * h->cost_ns;
	p->hits_booked = hits;
}

/*
 * What closing P's window will cost in probe time, with a margin of as
 * half again (memtrail may be slow to react on a loaded machine): as much
 * as closing its recent windows cost, or, before the first, what it costs
 * a target that does nothing but allocate on as many CPUs as P uses.
 */
static double closing_cost_ns(const struct heap *h, const struct heap_proc *p)
{
	double cpus = p->cpu_share > 1.0 ? p->cpu_share : 1.0;

	return 1.5 * (p->close_seen_ns > 0 ? p->close_seen_ns : h->close_ns * cpus);
}

/* Close P's window, decided at hit DECIDED; the hits taken until the probes are gone are paid. */
static void window_close(struct heap *h, struct heap_proc *p, uint64_t decided)
{
	double over;

	proc_switch(h, p, false);
	book_hits(h, p);
	over = p->hits_booked > decided ? (double)(p->hits_booked - decided) * h->cost_ns : 0;
	p->close_seen_ns = over > 0.9 * p->close_seen_ns ? over : 0.9 * p->close_seen_ns;
	if (!p->close_seen_ns)
		p->close_seen_ns = h->cost_ns;
}

/* Tell BPF the hit at which P's credit (the node's under a node budget), less the closing, is spent. */
static bool window_allow(struct heap *h, struct heap_proc *p)
{
	double spend = (h->cfg.node ? h->node_balance_ns : p->balance_ns) - closing_cost_ns(h, p);

	if (spend < h->cost_ns)
		return false;
	p->allow_hits = p->hits_booked + (uint64_t)(spend / h->cost_ns);
	tracer__heap_allow(h->tracer, p->pid, p->allow_hits);
	return true;
}

/* Keep P's books: credit its CPU time's share, debit its hits, open or close. */
static void proc_tick(struct heap *h, struct heap_proc *p, uint64_t now_ms)
{
	double bank = BANK_MS * 1e6 * h->cfg.budget_pct / 100.0, window, opening;
	uint64_t cpu, elapsed_ms = TICK_MS + (now_ms - p->next_tick_ms);

	p->next_tick_ms = now_ms + TICK_MS;
	if (!proc_cpu_ns(p->pid, &cpu))
		return;
	if (!p->cpu_known) {
		/* nothing is earned before the target has run: windows open on credit */
		p->cpu_known = true;
		p->cpu_start_ns = p->cpu_last_ns = cpu;
		p->hits_booked = tracer__heap_hits(h->tracer, p->pid);
		return;
	}
	p->cpu_share = (double)(cpu - p->cpu_last_ns) / (elapsed_ms * 1e6);
	p->balance_ns += (double)(cpu - p->cpu_last_ns) * h->cfg.budget_pct / 100.0;
	p->cpu_last_ns = cpu;
	book_hits(h, p);
	window = WINDOW_CPU_MS * 1e6 * h->cfg.budget_pct / 100.0;
	opening = closing_cost_ns(h, p) + window;
	/* an idle target banks a bounded credit, always enough for a window */
	if (bank < 2 * opening)
		bank = 2 * opening;
	if (p->balance_ns > bank)
		p->balance_ns = bank;
	if (p->on) {
		if (!window_allow(h, p))
			window_close(h, p, p->hits_booked);
		return;
	}
	/*
	 * A window opens once a second of the target's CPU time has earned its
	 * share: each opening and closing rewrites the allocator's code pages
	 * in the target, a cost beyond the hits, so windows are few and full.
	 */
	if (p->balance_ns >= opening && window_allow(h, p)) {
		p->cycles++;
		proc_switch(h, p, true);
	}
}

/*
 * The node budget. Every TICK_MS the node's account is credited with
 * budget_pct of the time passed and debited with the hits of the window
 * open (and of the one last closed, whose probes may still be going). A
 * window opens while none is and the account holds what one second's
 * share buys plus what closing will cost; it closes when BPF says its
 * share is spent, after NODE_WINDOW_MS, or when its process ends. So
 * probe time over any span stays within budget_pct of it, plus the
 * account's cap (BANK_MS's share) and one closing's overshoot, which is
 * paid back before the next window opens.
 */
static void node_close(struct heap *h, struct heap_proc *p, uint64_t decided, uint64_t now_ms)
{
	struct trail_heap_window *w = &p->win[(p->n_win - 1) % TRAIL_HEAP_WINDOWS];

	window_close(h, p, decided);
	p->decided = decided;
	w->end_ms = now_ms > w->start_ms ? now_ms : w->start_ms + 1;
	w->hits = p->hits_booked - p->win_hits0;
	h->node_pid = 0;
	p->settling = true;
	log__debug("heap: %u's window closed: %" PRIu64 " hits in %" PRIu64 " ms, %.1f us "
		   "of credit left", p->pid, w->hits, w->end_ms - w->start_ms,
		   h->node_balance_ns / 1000);
}

/*
 * The hits of P's last window taken since it closed (its probes go one by
 * one, slowly on an old kernel's links): paid, and part of what closing
 * costs, so that the next windows keep that much back.
 */
static void node_late(struct heap *h, struct heap_proc *p)
{
	uint64_t before = p->hits_booked;
	double over;

	book_hits(h, p);
	/* none since the last tick: its probes are gone */
	p->settling = p->hits_booked != before;
	over = p->hits_booked > p->decided ? (double)(p->hits_booked - p->decided) * h->cost_ns : 0;
	if (over > p->close_seen_ns)
		p->close_seen_ns = over;
	if (p->n_win)
		p->win[(p->n_win - 1) % TRAIL_HEAP_WINDOWS].hits = p->hits_booked - p->win_hits0;
}

/* The offered process whose last window (or try) is the oldest, most wanted first on a tie. */
static uint32_t node_next(struct heap *h)
{
	uint64_t oldest = UINT64_MAX;
	uint32_t pid = 0;
	size_t i;

	for (i = 0; i < h->n_offered; i++) {
		struct heap_proc *p = proc_get(h, h->offered[i], false);
		uint64_t t = p ? p->tried_ms : 0;

		if (t < oldest) {
			oldest = t;
			pid = h->offered[i];
		}
	}
	return pid;
}

static void node_open(struct heap *h, uint64_t now_ms)
{
	uint32_t pid = node_next(h);
	struct heap_proc *p;
	struct trail_heap_window *w;

	if (!pid)
		return;
	p = proc_get(h, pid, true);
	if (!p)
		return;
	p->tried_ms = clock__mono_ms();
	if (p->n_win)
		node_late(h, p);	/* the last window's late hits paid before the next one's count */
	p->settling = false;
	/* its allocators as mapped now (a library loaded since the last window too) */
	scan_maps(h, pid, p);
	if (!p->n_links)
		return;	/* no allocator memtrail knows (a static binary): the next one */
	p->hits_booked = p->win_hits0 = tracer__heap_hits(h->tracer, pid);
	if (!window_allow(h, p))
		return;
	p->cycles++;
	proc_switch(h, p, true);
	w = &p->win[p->n_win++ % TRAIL_HEAP_WINDOWS];
	*w = (struct trail_heap_window){ .start_ms = now_ms };
	h->node_pid = pid;
	log__debug("heap: window open for %u, up to %" PRIu64 " hits", pid,
		   p->allow_hits - p->hits_booked);
}

static void node_tick(struct heap *h, uint64_t now_ms)
{
	double pct = h->cfg.budget_pct / 100.0, bank = BANK_MS * 1e6 * pct, opening;
	uint64_t mono = clock__mono_ms();
	struct heap_proc *p;
	size_t i;

	if (mono < h->node_next_ms)
		return;
	opening = 1.5 * h->close_ns + WINDOW_CPU_MS * 1e6 * pct;
	/* the first window opens on credit, as a bank's worth would */
	h->node_balance_ns += h->node_last_ms ? (double)(mono - h->node_last_ms) * 1e6 * pct :
				opening;
	h->node_last_ms = mono;
	h->node_next_ms = mono + TICK_MS;
	for (i = 0; i < h->n_procs; i++)
		if (h->procs[i].settling)
			node_late(h, &h->procs[i]);
	p = h->node_pid ? proc_get(h, h->node_pid, false) : NULL;
	if (p && p->on) {
		book_hits(h, p);
		if (mono - p->on_since_ms >= NODE_WINDOW_MS || !window_allow(h, p))
			node_close(h, p, p->hits_booked, now_ms);
		return;
	}
	h->node_pid = 0;
	if (bank < 2 * opening)
		bank = 2 * opening;
	h->node_bank_ns = bank;
	if (h->node_balance_ns > bank)
		h->node_balance_ns = bank;
	if (h->node_balance_ns >= opening)
		node_open(h, now_ms);
}

void heap__node_offer(struct heap *h, const uint32_t *pids, size_t n)
{
	h->n_offered = n < NODE_OFFERED ? n : NODE_OFFERED;
	memcpy(h->offered, pids, h->n_offered * sizeof(*pids));
}

void heap__tick(struct heap *h, uint64_t now_ms)
{
	size_t i;

	if (h->cfg.node) {
		node_tick(h, now_ms);
		return;
	}
	if (h->cfg.budget_pct <= 0)
		return;
	now_ms = clock__mono_ms();
	for (i = 0; i < h->n_procs; i++)
		if (now_ms >= h->procs[i].next_tick_ms)
			proc_tick(h, &h->procs[i], now_ms);
}

void heap__budget_spent(struct heap *h, uint32_t pid, uint64_t now_ms)
{
	struct heap_proc *p = proc_get(h, pid, false);

	if (!p || !p->on || h->cfg.budget_pct <= 0)
		return;
	p->spent++;
	if (h->cfg.node) {
		node_close(h, p, p->allow_hits, now_ms);
		return;
	}
	window_close(h, p, p->allow_hits);
	log__debug("heap: %u spent its budget; probes off at %" PRIu64 " hits, %.1f us owed",
		   pid, p->hits_booked, p->balance_ns < 0 ? -p->balance_ns / 1000 : 0.0);
}

/* How P (NULL: never probed) of PID was sampled, as of now, into OUT. */
static void sampling_now(struct heap *h, struct heap_proc *p, uint32_t pid,
			 struct trail_heap *out)
{
	uint64_t hits = tracer__heap_hits(h->tracer, pid), now_ms, on_ms, total_ms, cpu;
	bool budget = h->cfg.budget_pct > 0;

	*out = (struct trail_heap){
		.mode = h->cfg.node ? TRAIL_HEAP_NODE : budget ? TRAIL_HEAP_BUDGET :
			h->cfg.sample_bytes ? TRAIL_HEAP_SAMPLED : TRAIL_HEAP_FULL,
		.sample_bytes = h->cfg.sample_bytes, .inuse = !budget, .probe_hits = hits,
		.budget_pct = budget ? h->cfg.budget_pct : 0,
		.close_ms = budget ? h->detach_ns / 1e6 : 0,
	};
	if (h->cost_ns > 0) {
		out->has_cost = true;
		out->cost_per_hit_ns = h->cost_ns;
		out->probe_cost_ms = hits * h->cost_ns / 1e6;
	}
	if (!p)
		return;
	now_ms = clock__mono_ms();
	on_ms = p->on_ms + (p->on ? now_ms - p->on_since_ms : 0);
	total_ms = now_ms - p->first_ms;
	out->coverage = total_ms ? (double)on_ms / total_ms : 1.0;
	if (h->cfg.node) {
		uint64_t i = p->n_win > TRAIL_HEAP_WINDOWS ? p->n_win - TRAIL_HEAP_WINDOWS : 0;

		out->cycles = p->cycles;
		out->cycles_spent = p->spent;
		out->close_ms = h->detach_ns / 1e6;
		out->close_cost_ms = p->close_seen_ns / 1e6;
		out->bank_ms = h->node_bank_ns / 1e6;
		/* the last window's hits so far: open, or closed with its probes maybe still going */
		if (p->n_win && !p->on && hits > p->decided &&
		    (hits - p->decided) * h->cost_ns / 1e6 > out->close_cost_ms)
			out->close_cost_ms = (hits - p->decided) * h->cost_ns / 1e6;
		for (; i < p->n_win; i++) {
			struct trail_heap_window *w = &out->windows[out->n_windows++];

			*w = p->win[i % TRAIL_HEAP_WINDOWS];
			if (i == p->n_win - 1 && hits > p->win_hits0)
				w->hits = hits - p->win_hits0;
		}
		return;
	}
	if (!budget)
		return;
	out->cycles = p->cycles;
	out->cycles_spent = p->spent;
	out->close_cost_ms = p->close_seen_ns / 1e6;
	if (!p->cpu_known)
		return;
	if (!proc_cpu_ns(pid, &cpu) || cpu < p->cpu_last_ns)
		cpu = p->cpu_last_ns;	/* gone: as of the last tick */
	out->has_target_cpu = true;
	out->target_cpu_ms = (cpu - p->cpu_start_ns) / 1e6;
}

void heap__sampling(struct heap *h, uint32_t pid, struct trail_heap *out)
{
	struct heap_proc *p = proc_get(h, pid, false);
	size_t i;

	/* the last to end with PID: an earlier process may have had it */
	for (i = h->n_done; !p && i--;) {
		if (h->done[i].pid == pid) {
			*out = h->done[i].sampling;
			return;
		}
	}
	sampling_now(h, p, pid, out);
}

/*
 * The calibration child: for each 'r' read from IN, time CALIBRATE_PAIRS
 * malloc/free pairs and write the nanoseconds to OUT; for an 's', run
 * pairs until the next byte comes, then write their count; exit at end of
 * file.
 */
static void __attribute__((noreturn)) calibrate_child(int in, int out)
{
	void *(*volatile alloc)(size_t) = malloc;
	void (*volatile release)(void *) = free;
	struct pollfd pfd = { .fd = in, .events = POLLIN };
	uint64_t t0, n;
	char c;
	int i;

	while (read(in, &c, 1) == 1) {
		t0 = clock__mono_ns();
		for (n = 0; c == 'r' ? n < CALIBRATE_PAIRS : !poll(&pfd, 1, 0); ) {
			for (i = 0; i < 64; i++, n++)
				release(alloc(64));
		}
		n = c == 'r' ? clock__mono_ns() - t0 : n;
		if (c == 's' && read(in, &c, 1) != 1)
			break;
		if (write(out, &n, sizeof(n)) != sizeof(n))
			break;
	}
	_exit(0);
}

/* One timed run of the child's; 0 when it is gone. */
static uint64_t calibrate_run(int cmd, int result)
{
	uint64_t ns = 0;

	if (write(cmd, "r", 1) != 1 || read(result, &ns, sizeof(ns)) != sizeof(ns))
		return 0;
	return ns;
}

/*
 * What closing a window costs a target that does nothing but allocate: the
 * child spins on malloc/free while its probes are removed, and the hits it
 * takes from the start of the removal to its end are the cost, in ns of
 * probe time. The removal's own duration goes to h->detach_ns.
 */
static int calibrate_close(struct heap *h, struct heap_link *l, uint32_t child, int cmd,
			   int result)
{
	struct timespec spin = { 0, 20 * 1000000 };
	uint64_t hits, t0, n;

	if (write(cmd, "s", 1) != 1)
		return -EIO;
	nanosleep(&spin, NULL);
	hits = tracer__heap_hits(h->tracer, child);
	t0 = clock__mono_ns();
	link_detach(l);
	/* the reaper's threads close the links: the probes are gone once they are done */
	reaper__drain();
	h->detach_ns = clock__mono_ns() - t0;
	h->close_ns = (double)(tracer__heap_hits(h->tracer, child) - hits) * h->cost_ns;
	if (write(cmd, "x", 1) != 1 || read(result, &n, sizeof(n)) != sizeof(n))
		return -EIO;
	return 0;
}

/* The first allocator PID maps, as an index into h->files; -1 if none. */
static ssize_t calibrate_file(struct heap *h, uint32_t pid)
{
	char name[64], line[4096 + 128];
	struct proc_map_line m;
	ssize_t idx = -1;
	FILE *f;

	snprintf(name, sizeof(name), "/proc/%u/maps", pid);
	f = fopen(name, "re");
	if (!f)
		return -1;
	while (idx < 0 && fgets(line, sizeof(line), f))
		if (proc__parse_map(line, &m) && m.exec && m.path)
			idx = file_get(h, m.dev, m.ino, pid, &m, NULL, -1);
	fclose(f);
	return idx;
}

/*
 * The cost of one probe hit, as the budget counts it: a child of memtrail's
 * becomes a target for a moment and times malloc/free pairs of the
 * allocator memtrail itself uses through the same probes and programs a
 * target gets, against the same pairs unprobed. The probes' cost depends
 * on the probed instructions (some are emulated, others stepped out of
 * line), so the allocator's own functions are timed, not stand-ins.
 */
static int calibrate(struct heap *h)
{
	int cmd[2], result[2], err;
	struct heap_link l = { .fd_entry = -1, .fd_ret = -1,
			       .set = { .fd = { -1, -1 } } };
	uint64_t bare, probed, hits;
	ssize_t idx;
	pid_t child;

	if (pipe2(cmd, O_CLOEXEC))
		return -errno;
	if (pipe2(result, O_CLOEXEC)) {
		err = -errno;
		close(cmd[0]);
		close(cmd[1]);
		return err;
	}
	child = fork();
	if (!child) {
		close(cmd[1]);
		close(result[0]);
		calibrate_child(cmd[0], result[1]);
	}
	close(cmd[0]);
	close(result[1]);
	if (child < 0) {
		err = -errno;
		goto out;
	}
	idx = calibrate_file(h, child);
	if (idx < 0) {
		err = -ENOENT;	/* no allocator of the malloc family in memtrail */
		goto out;
	}
	l.file = idx;
	err = tracer__calibration_target(h->tracer, child, true);
	if (err)
		goto out;
	bare = calibrate_run(cmd[1], result[0]);
	err = link_attach(h, child, &l);
	if (err)
		goto untarget;
	probed = calibrate_run(cmd[1], result[0]);
	hits = tracer__heap_hits(h->tracer, child);
	if (!bare || !probed || hits < CALIBRATE_PAIRS) {
		err = -EIO;
		goto untarget;
	}
	h->cost_ns = probed > bare ? (double)(probed - bare) / hits : 1.0;
	err = calibrate_close(h, &l, child, cmd[1], result[0]);
untarget:
	link_detach(&l);
	tracer__calibration_target(h->tracer, child, false);
out:
	close(cmd[1]);	/* the child exits at end of file */
	close(result[0]);
	if (child > 0)
		waitpid(child, NULL, 0);
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
