/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The tracer's own state, shared by its parts and by no other module:
 * tracer.c (open, events, targets' ends, what was lost), tracer_load.c
 * (which programs load, the maps' sizes), tracer_attach.c (uprobes of
 * rules, runtimes and allocators), tracer_maps.c (reading and clearing the
 * kernel's maps).
 */
#ifndef MEMTRAIL_TRACER_INT_H
#define MEMTRAIL_TRACER_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "kfeatures.h"
#include "tracer.h"
#include "memtrail.skel.h"

/* uapi values newer than the build's headers may be (Linux 6.6) */
#define MT_TRACE_UPROBE_MULTI 48
#define MT_UPROBE_MULTI_RETURN 1U

struct tracer {
	struct memtrail_bpf *skel;
	struct ring_buffer *rb;
	tracer_event_fn fn;
	void *ctx;
	int nr_cpus;
	struct bpf_link *rule_links[MEMTRAIL_RULES_MAX];
	struct bpf_link *scope_links[MEMTRAIL_RULES_MAX];	/* a --scope rule's return */
	bool no_multi;		/* the kernel has no uprobe_multi links (before Linux 6.6) */
	bool no_take;		/* no lookup-and-delete in hash maps (before Linux 5.14) */
	bool compat;		/* the object for kernels without BPF atomic fetch operations */
	bool track;		/* files mapped executable are tracked: new ones told at once (lib_event) */
	bool maps_tell;		/* BPF tells targets' code mappings (maps.bpf.c) */
	bool maps_wanted;	/* elsewhere, with stacks: BPF asks for maps reads (maps_wanted) */
	/* files first mapped by a process, marked scanned once that process was */
	struct lib_new {
		uint32_t pid;
		struct memtrail_lib_key key;
		char name[MEMTRAIL_LIB_NAME_LEN];
		uint64_t ts_ns;		/* when it was mapped */
		bool again;		/* mapped first by another process: that one's to settle */
	} *lib_new;
	size_t n_lib_new, cap_lib_new;
	/* a descriptor polled beside the ring buffer, and what reads it (tracer__watch_fd) */
	int extra_fd;
	tracer_fd_fn extra_fn;
	void *extra_ctx;
	uint32_t *ended;	/* ended targets to delete from the kernel's map after this poll */
	size_t n_ended, cap_ended;
	tracer_ended_fn ended_fn;	/* told of them first (tracer__on_ended) */
	void *ended_ctx;
	struct kernel_features kf;
};

/* Open the object, size its maps, choose its programs and load it (tracer_load.c). */
int tracer_load_object(struct tracer *t, const struct tracer_config *cfg, int *load_err);
/* The heap entry programs per operation (1 to MEMTRAIL_HEAP_OPS), for kernels without bpf_cookie. */
void tracer_heap_entries(struct memtrail_bpf *s, struct bpf_program *each[MEMTRAIL_HEAP_OPS]);
/* The per-rule programs, for kernels without bpf_cookie. */
void tracer_rule_copies(struct memtrail_bpf *s, struct bpf_program *each[MEMTRAIL_RULE_PROGS]);
/* The entry program of device function I on kernels without bpf_cookie. */
struct bpf_program *tracer_dev_copy(struct tracer *t, int i);
/* Attach CFG's --phase and --scope rules; one that cannot attach is said and skipped. */
void tracer_attach_rules(struct tracer *t, const struct tracer_config *cfg);
/* PID was scanned (DONE) or is gone: the files it was first to map settled (tracer.c). */
void tracer_lib_new_settle(struct tracer *t, uint32_t pid, bool done);
/* Delete KEYS[0..N) of map FD, a batch a call; one gone already (BPF deleted it) is passed over. */
void tracer_delete_keys(int fd, const void *keys, size_t key_size, size_t n);

#endif
