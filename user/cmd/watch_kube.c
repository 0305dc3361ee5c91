// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * memtrail watch --kube-events: each verdict and device OOM of a process in a
 * pod as a Warning Event on that Pod (kube.h posts them). The reason says
 * what happened in a word `kubectl describe pod` shows; the note is the
 * verdict's line and its top site.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

#include "format.h"
#include "kube.h"
#include "log.h"
#include "sanitize.h"
#include "verdict.h"
#include "watch_int.h"

int watch_kube_open(struct watch *w)
{
	struct kube_events_opts ko = { .kubeconfig = w->o->kubeconfig, .node = w->o->node };
	struct utsname u;

	/* the DaemonSet gives the node's name (spec.nodeName); a host's name otherwise */
	if (!ko.node || !*ko.node)
		ko.node = getenv("NODE_NAME");
	if ((!ko.node || !*ko.node) && !uname(&u))
		ko.node = u.nodename;
	return kube_events__open(&ko, &w->kube);
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* E's pod and container from ATTR: false when no pod, or its names are unknown. */
static bool event_of(struct kube_event *e, const struct container_attr *attr)
{
	memset(e, 0, sizeof(*e));
	if (!attr || !attr->pod || !attr->names.namespace[0] || !attr->names.pod[0])
		return false;
	snprintf(e->namespace, sizeof(e->namespace), "%s", attr->names.namespace);
	snprintf(e->pod, sizeof(e->pod), "%s", attr->names.pod);
	snprintf(e->uid, sizeof(e->uid), "%s", attr->ref.pod_uid);
	snprintf(e->container, sizeof(e->container), "%s", attr->names.container);
	e->time_ns = realtime_ns();
	return true;
}

/* TEXT as E's note: at most KUBE_NOTE_MAX bytes, cut at a whole UTF-8 character. */
static void set_note(struct kube_event *e, const char *text)
{
	size_t n = strlen(text);

	if (n > KUBE_NOTE_MAX) {
		n = KUBE_NOTE_MAX;
		while (n && ((unsigned char)text[n] & 0xc0) == 0x80)
			n--;
	}
	memcpy(e->note, text, n);
	e->note[n] = '\0';
}

/* Said once per pod: a process in a pod whose names the kubelet's log directory lacks. */
static void no_names(const struct watch *w, const struct container_attr *attr)
{
	static char said[POD_UID_LEN + 1];

	if (!attr || !attr->pod || !strcmp(said, attr->ref.pod_uid))
		return;
	snprintf(said, sizeof(said), "%s", attr->ref.pod_uid);
	log__warn("kube events: no Event for pod %s: its namespace and name are not under %s "
		  "(--pods-dir)", attr->ref.pod_uid, w->o->e.pods_dir);
}

static const char *reason_of(enum verdict_cause c)
{
	switch (c) {
	case VERDICT_OOM_CGROUP:
		return "OOMKilledAtLimit";
	case VERDICT_OOM_GLOBAL:
		return "OOMKilledNodeMemory";
	case VERDICT_SIGNAL:
		return "KilledBySignal";
	default:
		return "KilledBySIGKILL";
	}
}

void watch_kube_verdict(struct watch *w, const struct trail_target *tt,
			const struct container_attr *attr, const char *line, const char *top_text)
{
	char comm[SANITIZE_LEN(MEMTRAIL_COMM_LEN)], text[2048];
	struct kube_event e;

	if (!w->kube)
		return;
	if (!event_of(&e, attr)) {
		no_names(w, attr);
		return;
	}
	e.reason = reason_of(tt->verdict->cause);
	e.action = "Killed";
	snprintf(text, sizeof(text), "%u (%s) %s%s%s", tt->pid,
		 sanitize__str(comm, sizeof(comm), tt->comm), line, top_text[0] ? "; " : "",
		 top_text);
	set_note(&e, text);
	kube_events__post(w->kube, &e);
}

void watch_kube_device_oom(struct watch *w, const struct trail_target *tt, json_t *ev,
			   json_t *top)
{
	char comm[SANITIZE_LEN(MEMTRAIL_COMM_LEN)], text[2048], size[32], top_text[600];
	struct container_attr attr;
	struct kube_event e;
	const char *err;

	if (!w->kube)
		return;
	if (container__attr(tt->cgroup, w->o->e.pods_dir, &attr) || !event_of(&e, &attr)) {
		no_names(w, &attr);
		return;
	}
	e.reason = "DeviceOutOfMemory";
	e.action = "AllocationFailed";
	format__bytes(size, sizeof(size), (int64_t)json_integer_value(json_object_get(ev, "size")));
	err = json_string_value(json_object_get(ev, "error"));
	watch_top_phrase(top, top_text, sizeof(top_text));
	snprintf(text, sizeof(text), "%u (%s) %s of %s on %s device %lld failed: %s, in phase "
		 "'%s'%s%s", tt->pid, sanitize__str(comm, sizeof(comm), tt->comm),
		 json_string_value(json_object_get(ev, "function")), size,
		 json_string_value(json_object_get(ev, "runtime")),
		 (long long)json_integer_value(json_object_get(ev, "device")),
		 err ? err : "out of memory", json_string_value(json_object_get(ev, "phase")),
		 top_text[0] ? "; " : "", top_text);
	set_note(&e, text);
	kube_events__post(w->kube, &e);
}
