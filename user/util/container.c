// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The shapes, from kubelet, runtime and systemd naming:
 *
 *   cgroupfs  /kubepods/burstable/pod<uid>/<id>             containerd, Docker
 *             /kubepods/pod<uid>/crio-<id>                   CRI-O, Guaranteed
 *   systemd   /kubepods.slice/kubepods-besteffort.slice/
 *               kubepods-besteffort-pod<uid_with_underscores>.slice/
 *               cri-containerd-<id>.scope | crio-<id>.scope | docker-<id>.scope
 *   Docker    /docker/<id>, /system.slice/docker-<id>.scope
 *   podman    /machine.slice/libpod-<id>.scope[/container], its monitor
 *             /machine.slice/libpod-conmon-<id>.scope; /libpod_parent/libpod-<id>
 *
 * Components may sit below a prefix (kind, k3s, a test's own parent) and a
 * container may have sub-cgroups below it; both are allowed.
 */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "container.h"
#include "sanitize.h"

static bool all_hex(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
			return false;
	return true;
}

/* A pod UID: a UUID (dashes, or underscores under systemd) or a static pod's 32-hex hash. */
static bool take_uid(const char *s, size_t n, char out[POD_UID_LEN + 1])
{
	size_t i;

	if (n == 32 && all_hex(s, n)) {
		memcpy(out, s, n);
		out[n] = '\0';
		return true;
	}
	if (n != POD_UID_LEN)
		return false;
	for (i = 0; i < n; i++) {
		bool sep = i == 8 || i == 13 || i == 18 || i == 23;

		if (sep ? (s[i] != '-' && s[i] != '_') : !all_hex(&s[i], 1))
			return false;
		out[i] = sep ? '-' : s[i];
	}
	out[n] = '\0';
	return true;
}

static bool has_suffix(const char *s, size_t n, const char *suffix, size_t *stem)
{
	size_t k = strlen(suffix);

	if (n < k || memcmp(s + n - k, suffix, k))
		return false;
	*stem = n - k;
	return true;
}

static bool has_prefix(const char *s, size_t n, const char *prefix, size_t *skip)
{
	size_t k = strlen(prefix);

	if (n < k || memcmp(s, prefix, k))
		return false;
	*skip = k;
	return true;
}

static const struct {
	const char *prefix;
	const char *runtime;
	bool conmon;
} runtimes[] = {
	{ "cri-containerd-", "containerd", false },
	{ "containerd-", "containerd", false },
	{ "crio-conmon-", "cri-o", true },
	{ "crio-", "cri-o", false },
	{ "docker-", "docker", false },
	{ "libpod-conmon-", "podman", true },
	{ "libpod-", "podman", false },
};

/* A container component: [<runtime>-]<64 hex>[.scope]. */
static bool take_container(const char *s, size_t n, const char *parent, size_t parent_len,
			   struct container_ref *c)
{
	size_t stem, skip = 0, i;

	if (has_suffix(s, n, ".scope", &stem))
		n = stem;
	for (i = 0; i < sizeof(runtimes) / sizeof(runtimes[0]); i++)
		if (has_prefix(s, n, runtimes[i].prefix, &skip))
			break;
	if (i == sizeof(runtimes) / sizeof(runtimes[0]))
		skip = 0;
	if (n - skip != CONTAINER_ID_LEN || !all_hex(s + skip, CONTAINER_ID_LEN))
		return false;
	memcpy(c->id, s + skip, CONTAINER_ID_LEN);
	c->id[CONTAINER_ID_LEN] = '\0';
	if (skip) {
		snprintf(c->runtime, sizeof(c->runtime), "%s", runtimes[i].runtime);
		c->conmon = runtimes[i].conmon;
	} else if (parent_len == 6 && !memcmp(parent, "docker", 6)) {
		snprintf(c->runtime, sizeof(c->runtime), "docker");
	}
	return true;
}

/* kubepods[-<qos>][-pod<uid>] (systemd: with .slice), or a cgroupfs level below kubepods. */
static void take_kube(const char *s, size_t n, bool in_kubepods, struct container_ref *c)
{
	size_t stem, skip;

	if (has_suffix(s, n, ".slice", &stem)) {
		if (!has_prefix(s, stem, "kubepods", &skip))
			return;
		snprintf(c->driver, sizeof(c->driver), "systemd");
		s += skip;
		n = stem - skip;
		if (has_prefix(s, n, "-burstable", &skip) || has_prefix(s, n, "-besteffort", &skip)) {
			snprintf(c->qos, sizeof(c->qos), "%.*s", (int)skip - 1, s + 1);
			s += skip;
			n -= skip;
		}
		if (has_prefix(s, n, "-pod", &skip))
			take_uid(s + skip, n - skip, c->pod_uid);
		return;
	}
	if (n == 8 && !memcmp(s, "kubepods", 8)) {
		snprintf(c->driver, sizeof(c->driver), "cgroupfs");
		return;
	}
	if (!in_kubepods)
		return;
	if ((n == 9 && !memcmp(s, "burstable", 9)) || (n == 10 && !memcmp(s, "besteffort", 10)))
		snprintf(c->qos, sizeof(c->qos), "%.*s", (int)n, s);
	else if (has_prefix(s, n, "pod", &skip))
		take_uid(s + skip, n - skip, c->pod_uid);
}

int container__parse(const char *path, struct container_ref *c)
{
	const char *s = path, *parent = "";
	size_t parent_len = 0;

	memset(c, 0, sizeof(*c));
	if (!path)
		return -1;
	while (*s) {
		size_t n;

		while (*s == '/')
			s++;
		n = strcspn(s, "/");
		if (!n)
			break;
		/* the first container component wins: sub-cgroups below it are its own */
		if (!c->id[0]) {
			take_kube(s, n, c->driver[0] != '\0', c);
			if (!c->id[0])
				take_container(s, n, parent, parent_len, c);
		}
		parent = s;
		parent_len = n;
		s += n;
	}
	if (c->pod_uid[0] && !c->qos[0])
		snprintf(c->qos, sizeof(c->qos), "guaranteed");
	if (c->driver[0] && !c->pod_uid[0])
		c->qos[0] = '\0';	/* a QoS level's own cgroup, no pod */
	if (!c->id[0] && !c->pod_uid[0]) {
		memset(c, 0, sizeof(*c));
		return -1;
	}
	return 0;
}

/* <namespace>_<pod>_<uid>: namespaces and pod names never hold '_'. */
static bool split_pod_dir(const char *name, const char *uid, struct pod_names *n)
{
	const char *first = strchr(name, '_'), *last = strrchr(name, '_');

	if (!first || first == last || strcmp(last + 1, uid))
		return false;
	snprintf(n->namespace, sizeof(n->namespace), "%.*s", (int)(first - name), name);
	snprintf(n->pod, sizeof(n->pod), "%.*s", (int)(last - first - 1), first + 1);
	return n->namespace[0] && n->pod[0];
}

/* The only container directory of a pod's log directory, or "" */
static void only_container(const char *dir, char *out, size_t len)
{
	struct dirent *de;
	int found = 0;
	DIR *d;

	out[0] = '\0';
	d = opendir(dir);
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || de->d_type != DT_DIR)
			continue;
		if (found++)
			break;
		snprintf(out, len, "%s", de->d_name);
	}
	closedir(d);
	if (found != 1)
		out[0] = '\0';
}

/*
 * Beside the pods directory the kubelet keeps containers/, with links named
 * <pod>_<namespace>_<container>-<id>.log: the container's name by its ID.
 */
static void container_by_id(const char *pods_dir, const struct pod_names *n, const char *id,
			    char *out, size_t len)
{
	char dir[4096], prefix[2 * POD_NAME_LEN + 4], suffix[CONTAINER_ID_LEN + 8];
	size_t lp, ls;
	struct dirent *de;
	DIR *d;

	if (snprintf(dir, sizeof(dir), "%s/../containers", pods_dir) >= (int)sizeof(dir))
		return;
	lp = snprintf(prefix, sizeof(prefix), "%s_%s_", n->pod, n->namespace);
	ls = snprintf(suffix, sizeof(suffix), "-%s.log", id);
	d = opendir(dir);
	if (!d)
		return;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);

		if (l > lp + ls && !strncmp(de->d_name, prefix, lp) &&
		    !strcmp(de->d_name + l - ls, suffix)) {
			snprintf(out, len, "%.*s", (int)(l - lp - ls), de->d_name + lp);
			break;
		}
	}
	closedir(d);
}

int container__pod_names(const char *pods_dir, const char *uid, const char *id,
			 struct pod_names *n)
{
	char path[4096];
	struct dirent *de;
	int ret = -1;
	DIR *d;

	memset(n, 0, sizeof(*n));
	if (!pods_dir || !uid || !uid[0])
		return -1;
	d = opendir(pods_dir);
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || !split_pod_dir(de->d_name, uid, n))
			continue;
		ret = 0;
		if (id && id[0])
			container_by_id(pods_dir, n, id, n->container, sizeof(n->container));
		if (!n->container[0] &&
		    snprintf(path, sizeof(path), "%s/%s", pods_dir, de->d_name) < (int)sizeof(path))
			only_container(path, n->container, sizeof(n->container));
		break;
	}
	closedir(d);
	if (ret)
		memset(n, 0, sizeof(*n));
	return ret;
}

static json_t *str_or_null(const char *s)
{
	return s && s[0] ? sanitize__json(s) : json_null();
}

int container__attr(const char *path, const char *pods_dir, struct container_attr *a)
{
	memset(a, 0, sizeof(*a));
	if (container__parse(path, &a->ref))
		return -1;
	a->container = a->ref.id[0] != '\0';
	a->pod = a->ref.pod_uid[0] != '\0';
	(void)container__pod_names(pods_dir, a->ref.pod_uid, a->ref.id, &a->names);
	return 0;
}

struct container_attr *container__attr_new(const char *path, const char *pods_dir)
{
	struct container_attr *a = malloc(sizeof(*a));

	if (a && container__attr(path, pods_dir, a)) {
		free(a);
		a = NULL;
	}
	return a;
}

void container__put(json_t *o, const struct container_attr *a)
{
	json_t *ctr = json_null(), *pod = json_null();

	if (a && a->container)
		ctr = json_pack("{s:o, s:o, s:o, s:b}", "id", sanitize__json(a->ref.id),
				"runtime", str_or_null(a->ref.runtime),
				"name", str_or_null(a->names.container),
				"conmon", a->ref.conmon);
	if (a && a->pod)
		pod = json_pack("{s:o, s:o, s:o, s:o, s:o}", "uid", sanitize__json(a->ref.pod_uid),
				"qos", str_or_null(a->ref.qos),
				"namespace", str_or_null(a->names.namespace),
				"name", str_or_null(a->names.pod),
				"cgroup_driver", str_or_null(a->ref.driver));
	json_object_set_new(o, "container", ctr);
	json_object_set_new(o, "pod", pod);
}

void container__describe(char *buf, size_t len, const struct container_attr *a)
{
	char s1[SANITIZE_LEN(POD_NAME_LEN)], s2[SANITIZE_LEN(POD_NAME_LEN)];
	size_t n = 0;

	buf[0] = '\0';
	if (!a)
		return;
	if (a->pod)
		n = snprintf(buf, len, "pod %s/%s",
			     sanitize__str(s1, sizeof(s1), a->names.namespace[0] ? a->names.namespace
										 : "?"),
			     sanitize__str(s2, sizeof(s2), a->names.pod[0] ? a->names.pod
									   : a->ref.pod_uid));
	if (n >= len)
		return;
	if (a->names.container[0])
		snprintf(buf + n, len - n, "%scontainer %s", n ? " " : "",
			 sanitize__str(s1, sizeof(s1), a->names.container));
	else if (a->container)
		snprintf(buf + n, len - n, "%scontainer %.12s", n ? " " : "",
			 sanitize__str(s1, sizeof(s1), a->ref.id));
}
