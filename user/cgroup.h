/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* cgroup paths, ids and hierarchies, v1 and v2. */
#ifndef MEMTRAIL_CGROUP_H
#define MEMTRAIL_CGROUP_H

#include <stddef.h>
#include <stdint.h>

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
/*
 * The path of the memory cgroup whose directory has inode ID (its kernfs id),
 * in the v1 memory hierarchy or else in cgroup v2; malloc'd or NULL.
 */
char *cgroup__memory_path_of_id(uint64_t id);
/* Pick the path from /proc/PID/cgroup text; malloc'd or NULL. */
char *cgroup__parse_proc(const char *text);

#endif
