// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Container and pod attribution from cgroup paths as the kubelet, systemd,
 * containerd, CRI-O and Docker write them, and pod names from a kubelet-style
 * log directory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "container.h"

#define ID "4a1e2c0f9b8d7e6a5f4c3b2a1908f7e6d5c4b3a29180f7e6d5c4b3a291807f6e"
#define UID "8f2b5c1e-3d4a-4b6c-9e8f-7a6b5c4d3e2f"
#define UID_ "8f2b5c1e_3d4a_4b6c_9e8f_7a6b5c4d3e2f"

struct shape {
	const char *path;
	const char *driver, *runtime, *id, *uid, *qos;
	bool conmon;
};

static const struct shape shapes[] = {
	/* cgroupfs driver, v1 (/sys/fs/cgroup/memory/...) and v2 alike */
	{ "/kubepods/burstable/pod" UID "/" ID, "cgroupfs", "", ID, UID, "burstable", false },
	{ "/kubepods/besteffort/pod" UID "/" ID, "cgroupfs", "", ID, UID, "besteffort", false },
	{ "/kubepods/pod" UID "/" ID, "cgroupfs", "", ID, UID, "guaranteed", false },
	{ "/kubepods/burstable/pod" UID "/crio-" ID, "cgroupfs", "cri-o", ID, UID, "burstable", false },
	{ "/kubepods/burstable/pod" UID "/cri-containerd-" ID, "cgroupfs", "containerd", ID, UID,
	  "burstable", false },
	{ "/kubepods/burstable/pod" UID "/docker-" ID, "cgroupfs", "docker", ID, UID, "burstable", false },
	/* systemd driver, each runtime */
	{ "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_ ".slice/"
	  "cri-containerd-" ID ".scope", "systemd", "containerd", ID, UID, "burstable", false },
	{ "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_ ".slice/"
	  "crio-" ID ".scope", "systemd", "cri-o", ID, UID, "besteffort", false },
	{ "/kubepods.slice/kubepods-pod" UID_ ".slice/docker-" ID ".scope", "systemd", "docker",
	  ID, UID, "guaranteed", false },
	{ "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_ ".slice/"
	  "crio-conmon-" ID ".scope", "systemd", "cri-o", ID, UID, "burstable", true },
	/* nested under a prefix (kind, a test's parent) and with a sub-cgroup below */
	{ "/kubelet.slice/kubelet-kubepods.slice/kubepods.slice/kubepods-burstable.slice/"
	  "kubepods-burstable-pod" UID_ ".slice/cri-containerd-" ID ".scope/init",
	  "systemd", "containerd", ID, UID, "burstable", false },
	{ "/memtrail-test-1/kubepods/burstable/pod" UID "/cri-containerd-" ID, "cgroupfs",
	  "containerd", ID, UID, "burstable", false },
	/* a static pod: its UID is the config hash */
	{ "/kubepods/burstable/pod0123456789abcdef0123456789abcdef/" ID, "cgroupfs", "", ID,
	  "0123456789abcdef0123456789abcdef", "burstable", false },
	/* the pod's own cgroup (the pause process's parent, or a pod-level OOM) */
	{ "/kubepods/burstable/pod" UID, "cgroupfs", "", "", UID, "burstable", false },
	/* Docker without Kubernetes */
	{ "/docker/" ID, "", "docker", ID, "", "", false },
	{ "/system.slice/docker-" ID ".scope", "", "docker", ID, "", "", false },
	/* podman (systemd manager; cgroupfs manager: libpod_parent) and its monitor */
	{ "/machine.slice/libpod-" ID ".scope/container", "", "podman", ID, "", "", false },
	{ "/machine.slice/libpod-conmon-" ID ".scope", "", "podman", ID, "", "", true },
	{ "/libpod_parent/libpod-" ID, "", "podman", ID, "", "", false },
};

static void real_shapes(void **state)
{
	struct container_ref c;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		const struct shape *s = &shapes[i];

		print_message("%s\n", s->path);
		assert_int_equal(container__parse(s->path, &c), 0);
		assert_string_equal(c.driver, s->driver);
		assert_string_equal(c.runtime, s->runtime);
		assert_string_equal(c.id, s->id);
		assert_string_equal(c.pod_uid, s->uid);
		assert_string_equal(c.qos, s->qos);
		assert_int_equal(c.conmon, s->conmon);
	}
}

static void not_containers(void **state)
{
	static const char *const paths[] = {
		"/", "/user.slice/user-0.slice/session-3.scope", "/system.slice/kubelet.service",
		"/kubepods", "/kubepods/burstable", "/kubepods.slice/kubepods-burstable.slice",
		"/kubepods/burstable/podnot-a-uid/" ID,	/* the pod is unreadable, the ID not */
		"/docker/abc", "/process_api/" ID "0",	/* 65 hex digits */
		"/kubepods/burstable/pod" UID "x",
	};
	struct container_ref c;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		int ret = container__parse(paths[i], &c);

		print_message("%s\n", paths[i]);
		if (i == 6) {	/* a container ID alone still counts */
			assert_int_equal(ret, 0);
			assert_string_equal(c.pod_uid, "");
			assert_string_equal(c.id, ID);
			continue;
		}
		assert_int_equal(ret, -1);
		assert_string_equal(c.id, "");
	}
	assert_int_equal(container__parse(NULL, &c), -1);
}

static char *mkpods(void)
{
	char tmpl[] = "/tmp/memtrail-unit-XXXXXX", path[512];
	char *root = strdup(mkdtemp(tmpl));
	FILE *f;

	assert_non_null(root);
	snprintf(path, sizeof(path), "%s/pods", root);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/pods/serving_llama-7b-5d9f_" UID, root);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/pods/serving_llama-7b-5d9f_" UID "/model-server", root);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/pods/other_web_11111111-2222-3333-4444-555555555555", root);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/pods/other_web_11111111-2222-3333-4444-555555555555/a", root);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/pods/other_web_11111111-2222-3333-4444-555555555555/b", root);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/containers", root);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/containers/web_other_b-" ID ".log", root);
	f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
	return root;
}

static void pod_names(void **state)
{
	char *root = mkpods(), pods[512], cmd[600];
	struct pod_names n;

	(void)state;
	snprintf(pods, sizeof(pods), "%s/pods", root);
	/* one container directory: it is the container */
	assert_int_equal(container__pod_names(pods, UID, "", &n), 0);
	assert_string_equal(n.namespace, "serving");
	assert_string_equal(n.pod, "llama-7b-5d9f");
	assert_string_equal(n.container, "model-server");
	/* two: the containers/ link names the one with this ID */
	assert_int_equal(container__pod_names(pods, "11111111-2222-3333-4444-555555555555", ID, &n), 0);
	assert_string_equal(n.namespace, "other");
	assert_string_equal(n.pod, "web");
	assert_string_equal(n.container, "b");
	/* two and no link: the pod is known, the container is not */
	assert_int_equal(container__pod_names(pods, "11111111-2222-3333-4444-555555555555",
					      "ffff", &n), 0);
	assert_string_equal(n.container, "");
	assert_int_equal(container__pod_names(pods, "99999999-2222-3333-4444-555555555555", ID, &n), -1);
	assert_int_equal(container__pod_names("/nonexistent", UID, ID, &n), -1);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
	free(root);
}

static void json_record(void **state)
{
	char *root = mkpods(), pods[512], cmd[600], line[256];
	struct container_attr a;
	json_t *o = json_object();

	(void)state;
	snprintf(pods, sizeof(pods), "%s/pods", root);
	assert_int_equal(container__attr("/kubepods/burstable/pod" UID "/cri-containerd-" ID, pods,
					 &a), 0);
	container__put(o, &a);
	assert_string_equal(json_string_value(json_object_get(json_object_get(o, "pod"), "name")),
			    "llama-7b-5d9f");
	assert_string_equal(json_string_value(json_object_get(json_object_get(o, "container"),
							      "runtime")), "containerd");
	assert_string_equal(json_string_value(json_object_get(json_object_get(o, "container"),
							      "name")), "model-server");
	container__describe(line, sizeof(line), &a);
	assert_string_equal(line, "pod serving/llama-7b-5d9f container model-server");
	assert_int_equal(container__attr("/docker/" ID, pods, &a), 0);
	container__put(o, &a);
	assert_true(json_is_null(json_object_get(o, "pod")));
	container__describe(line, sizeof(line), &a);
	assert_string_equal(line, "container 4a1e2c0f9b8d");
	assert_int_equal(container__attr("/user.slice", pods, &a), -1);
	container__put(o, NULL);
	assert_true(json_is_null(json_object_get(o, "container")));
	container__describe(line, sizeof(line), NULL);
	assert_string_equal(line, "");
	json_decref(o);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
	free(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(real_shapes),
		cmocka_unit_test(not_containers),
		cmocka_unit_test(pod_names),
		cmocka_unit_test(json_record),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
