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
 * {"container": {...} or null, "pod": {...} or null} for a cgroup path, for
 * JSON records; NULL when the path names neither (or out of memory).
 */
json_t *container__json(const char *path, const char *pods_dir);
/* O's "container" and "pod" set from ATTRIBUTION (container__json's; NULL: both null). */
void container__put(json_t *o, json_t *attribution);
/*
 * "pod NS/NAME container NAME" or "container ID12" for people, names
 * sanitized (sanitize.h); "" when none.
 */
void container__describe(char *buf, size_t len, json_t *attribution);

#endif
