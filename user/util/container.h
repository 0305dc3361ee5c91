/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Containers and pods from a cgroup path alone: the kubelet's cgroupfs and
 * systemd drivers, containerd, CRI-O and Docker container IDs, pod UID and
 * QoS class; names from the kubelet's log directory
 * (<namespace>_<pod>_<uid>/<container>/).
 */
#ifndef MEMTRAIL_CONTAINER_H
#define MEMTRAIL_CONTAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>

#define CONTAINER_ID_LEN 64
#define POD_UID_LEN 36
#define POD_NAME_LEN 256

#define DEFAULT_PODS_DIR "/var/log/pods"

struct container_ref {
	char driver[16];		/* "cgroupfs", "systemd" or "" */
	char runtime[16];		/* "containerd", "cri-o", "docker" or "" */
	char id[CONTAINER_ID_LEN + 1];	/* the container ID, "" when none */
	bool conmon;			/* CRI-O's monitor process, not the container */
	char pod_uid[POD_UID_LEN + 1];	/* with dashes, "" when not in a pod */
	char qos[16];			/* "guaranteed", "burstable", "besteffort" or "" */
};

struct pod_names {
	char namespace[POD_NAME_LEN];
	char pod[POD_NAME_LEN];
	char container[POD_NAME_LEN];	/* "" when the log directory cannot tell */
};

/* 0 when PATH names a container or a pod; -1 (and c zeroed) otherwise. */
int container__parse(const char *path, struct container_ref *c);
/*
 * Names of the pod with UID (and of the container with ID, "" for none)
 * from the kubelet's log directory PODS_DIR: 0, or -1 when not found.
 */
int container__pod_names(const char *pods_dir, const char *uid, const char *id,
			 struct pod_names *n);
/*
 * A process's container and pod: what its cgroup path names, with the
 * kubelet's names for them. Strings are "" where unknown.
 */
struct container_attr {
	bool container;			/* a container is named (ref.id, runtime, conmon) */
	bool pod;			/* a pod is (ref.pod_uid, qos, driver) */
	struct container_ref ref;
	struct pod_names names;		/* the kubelet's: namespace, pod, container */
};

/* PATH's container and pod into A: 0, or -1 (A zeroed) when it names neither. */
int container__attr(const char *path, const char *pods_dir, struct container_attr *a);
/* PATH's, malloc'd; NULL when it names neither (or out of memory). */
struct container_attr *container__attr_new(const char *path, const char *pods_dir);
/*
 * O's "container" ({id, runtime, name, conmon} or null) and "pod" ({uid,
 * qos, namespace, name, cgroup_driver} or null) set from A (NULL: both null).
 */
void container__put(json_t *o, const struct container_attr *a);
/*
 * "pod NS/NAME container NAME" or "container ID12" for people, names
 * sanitized (sanitize.h); "" when none (A NULL too).
 */
void container__describe(char *buf, size_t len, const struct container_attr *a);

#endif
