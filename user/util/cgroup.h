/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* cgroup paths, ids and hierarchies, v1 and v2. */
#ifndef MEMTRAIL_CGROUP_H
#define MEMTRAIL_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

struct cgroup_ref {
	char dir[4096];		/* the cgroup's directory */
	uint64_t id;		/* its kernfs id (inode number) */
	int subsys;		/* v1 controller index (enum cgroup_subsys_id), -1 on v2 */
};

/*
 * Resolve a cgroup given as a directory (/sys/fs/cgroup/memory/x) or as a
 * path inside a hierarchy (/kubepods/x). 0, or -errno with a reason in err.
 */
int cgroup__resolve(const char *arg, struct cgroup_ref *ref, char *err, size_t errlen);
/* The process's memory cgroup path (v1 memory controller, else v2); malloc'd or NULL. */
char *cgroup__of_pid(uint32_t pid);
/* The node has cgroup v2 alone at /sys/fs/cgroup (a cgroup's v2 id then names its path). */
bool cgroup__unified(void);
/*
 * The controller whose hierarchy cgroup__of_pid reads: the index of the v1
 * memory controller where one is mounted, else -1 (the v2 hierarchy).
 */
int cgroup__paths_subsys(void);
/*
 * The path of the memory cgroup whose directory has inode ID (its kernfs id),
 * in the v1 memory hierarchy or else in cgroup v2; malloc'd or NULL.
 */
char *cgroup__memory_path_of_id(uint64_t id);
/* Pick the path from /proc/PID/cgroup text; malloc'd or NULL. */
char *cgroup__parse_proc(const char *text);

/* A memory cgroup's figures, v1 or v2; -1 where a file is absent or "max". */
struct cgroup_memory {
	bool v2;
	int64_t usage;		/* memory.current / memory.usage_in_bytes */
	int64_t limit;		/* memory.max / memory.limit_in_bytes */
	int64_t high;		/* memory.high (v2) */
	int64_t ev_high, ev_max, ev_oom, ev_oom_kill;	/* memory.events (v2) */
	int64_t failcnt;	/* memory.failcnt (v1): charges that hit the limit */
	double psi_some_avg10;	/* memory.pressure (v2), percent; -1 without PSI */
};

/* The directory of a memory cgroup path (v1 memory hierarchy, else v2); malloc'd or NULL. */
char *cgroup__memory_dir(const char *path);
/* Read DIR's memory files; 0, or -errno when DIR is gone. */
int cgroup__read_memory(const char *dir, struct cgroup_memory *m);
/*
 * From memory cgroup PATH up, the nearest one with a limit (memory.max or
 * memory.high); its path, malloc'd, or NULL when none has.
 */
char *cgroup__limited(const char *path);
/* The cgroup's figures and memory.stat as JSON, for snapshots. */
json_t *cgroup__memory_json(const char *path);
/* PIDs of the processes in cgroup PATH and below; malloc'd, count in *n. */
uint32_t *cgroup__procs(const char *path, size_t max, size_t *n);

#endif
