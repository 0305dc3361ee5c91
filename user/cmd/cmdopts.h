/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The options the tracing commands (record, watch, top) share: which
 * processes (--pid, --cgroup, --comm, --all), the engine's own (--max-targets,
 * --no-devices, --pods-dir) and -v; each command lists the rows it takes in
 * its table (opts.h), the texts and checks written once, here.
 */
#ifndef MEMTRAIL_CMDOPTS_H
#define MEMTRAIL_CMDOPTS_H

#include "memtrail.h"
#include "opts.h"

struct tracer_config;

struct target_opts {
	uint32_t *pids;		/* --pid, each a live process when given */
	size_t n_pids;
	const char *cgroups[MEMTRAIL_FILTER_CGROUPS_MAX];
	size_t n_cgroups;
	const char *comm;	/* --comm */
	bool all;		/* --all */
};

struct engine_opts {
	uint32_t max_targets;
	bool no_devices;
	const char *pods_dir;	/* names pods and containers */
};

/* The engine's defaults, set before parsing (and said by --help). */
void cmdopts__engine_defaults(struct engine_opts *e);

int cmdopts__add_pid(void *targets, const char *arg);
int cmdopts__add_cgroup(void *targets, const char *arg);
int cmdopts__set_comm(void *targets, const char *arg);
int cmdopts__verbose(void *unused, const char *arg);

/* Rows of a group whose base is a struct target_opts. */
#define CMDOPTS_ROW_PID \
	OPT_ROW_FN("pid", 'p', "PID", cmdopts__add_pid, \
		   "a running process and the children it forks; repeatable")
#define CMDOPTS_ROW_CGROUP \
	OPT_ROW_FN("cgroup", 'c', "PATH", cmdopts__add_cgroup, \
		   "every process in a cgroup or below it, v1 or v2, given as a directory " \
		   "(/sys/fs/cgroup/memory/x) or a cgroup path (/x); repeatable, at most " \
		   OPT_XSTR(MEMTRAIL_FILTER_CGROUPS_MAX) ", of one hierarchy")
#define CMDOPTS_ROW_COMM \
	OPT_ROW_FN("comm", 0, "NAME", cmdopts__set_comm, \
		   "every process whose name (comm, 15 chars) is NAME")
#define CMDOPTS_ROW_ALL \
	OPT_ROW_FLAG("all", 'a', struct target_opts, all, \
		     "every process on the node but memtrail itself")

/* The rows of a group whose base is a struct engine_opts. */
extern const struct opt cmdopts__engine[];
/* -v and -h (base: none). */
extern const struct opt cmdopts__tail[];

/*
 * Targets into CFG's mode, pids and cgroups (the whole node when none are
 * given): 0, or -errno once said (a PID gone, a cgroup not found, cgroups of
 * two hierarchies).
 */
int cmdopts__targets(const struct target_opts *t, struct tracer_config *cfg);
/* How many of --pid, --cgroup, --comm and --all were given. */
int cmdopts__target_modes(const struct target_opts *t);
/* The engine's options into CFG. */
void cmdopts__engine_config(const struct engine_opts *e, struct tracer_config *cfg);

#endif
