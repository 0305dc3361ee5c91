/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The heap probes' insides, shared by heap.c (the allocator files and each
 * process's links to them), heap_budget.c (the budgets' books and windows)
 * and heap_calibrate.c (what a probe hit and a detach cost here).
 */
#ifndef MEMTRAIL_HEAP_INT_H
#define MEMTRAIL_HEAP_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "heap.h"
#include "proc.h"
#include "tracer.h"

#define HEAP_N_SPECS 61	/* heap.c's table of functions probed */
#define MATCH_MAX (3 * HEAP_N_SPECS)
#define TICK_MS 100		/* the budget's books are kept this often */
#define BANK_MS 5000		/* credit kept at most: this much CPU time's share */
#define WINDOW_CPU_MS 1000	/* a window opens on this much CPU time's share */
#define CALIBRATE_PAIRS 20000	/* alloc/free pairs timed with and without probes */
#define NODE_WINDOW_MS (HEAP_NODE_WINDOW_S * 1000)
#define NODE_OFFERED 8		/* processes a node budget chooses its next window among */


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

/* heap.c */
/* The file (DEV, INO) PID maps at M (its path through HOST, or HOST_FD), made if new: its index, or -1. */
ssize_t heap_file_get(struct heap *h, dev_t dev, ino_t ino, uint32_t pid,
		      const struct proc_map_line *m, const char *host, int host_fd);
/* Attach L's probes for PID: 0, or -errno. */
int heap_link_attach(struct heap *h, uint32_t pid, struct heap_link *l);
void heap_link_detach(struct heap_link *l);
/* PID's books, made where CREATE; NULL: none (or out of memory). */
struct heap_proc *heap_proc_get(struct heap *h, uint32_t pid, bool create);
/* P's probes attached (ON) or detached. */
void heap_proc_switch(struct heap *h, struct heap_proc *p, bool on);
/* The allocator files PID maps now added to P (made where NULL); P, or NULL. */
struct heap_proc *heap_scan_maps(struct heap *h, uint32_t pid, struct heap_proc *p);

/* heap_budget.c */
/* How P (PID) is probed so far, as the trail keeps it. */
void heap_sampling_now(struct heap *h, struct heap_proc *p, uint32_t pid,
		       struct trail_heap *out);
/* P's hits since last booked, debited from its account. */
void heap_book_hits(struct heap *h, struct heap_proc *p);

/* heap_calibrate.c */
/* Measure the cost of a probe hit and of a detach: 0, or -errno (said). */
int heap_calibrate(struct heap *h);

#endif
