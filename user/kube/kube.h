/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Verdicts as Kubernetes Events on the Pod (events.k8s.io/v1), posted beside
 * the event loop by a thread of their own: a bounded table of Events, repeats
 * of one as a series (as client-go's event recorder makes them), retries with
 * backoff. The API server is found as Kubernetes agents find it: the pod's
 * service account, or a kubeconfig file. TLS is always verified.
 */
#ifndef MEMTRAIL_KUBE_H
#define MEMTRAIL_KUBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* pkg/apis/core/validation/events.go: NoteLengthLimit */
#define KUBE_NOTE_MAX 1024
/* at most this many Events (distinct pod, container, reason) wait for the API server */
#define KUBE_QUEUE_MAX 1024
/* an Event the API server has not taken after this long is given up, and said */
#define KUBE_GIVE_UP_S 3600
/* a repeat this long after the last one starts a new Event (client-go's finishTime) */
#define KUBE_SERIES_GAP_S 360
/* retries wait 0.5 s, doubled each time, at most this long */
#define KUBE_BACKOFF_MAX_MS 30000

/* Where the API server is and how memtrail proves who it is. */
struct kube_config {
	char *server;			/* https://HOST[:PORT][/PATH], no trailing '/' */
	char *ca_file;			/* the CA that signs the server's certificate, */
	char *ca_data;			/* or its PEM text (ca_len bytes) */
	size_t ca_len;
	char *token;			/* a bearer token, or */
	char *token_file;		/* a file holding one, read again for each request */
	char *cert_file, *key_file;	/* a client certificate and its key, */
	char *cert_data, *key_data;	/* or their PEM text */
	size_t cert_len, key_len;
	char *origin;			/* for messages: "the pod's service account", "kubeconfig F" */
};

/*
 * The API server from KUBECONFIG (a file; NULL: the pod's service account
 * when KUBERNETES_SERVICE_HOST is set, else $KUBECONFIG's first file): 0,
 * or -1 with a one-line reason in ERR. SA_DIR: where the service account's
 * files are (NULL: /var/run/secrets/kubernetes.io/serviceaccount).
 */
int kube_config__load(const char *kubeconfig, const char *sa_dir, struct kube_config *c,
		      char *err, size_t errlen);
void kube_config__free(struct kube_config *c);
/* Base64 (RFC 4648, whitespace skipped) of IN into malloc'd *OUT: 0, or -1 when not base64. */
int kube_config__base64(const char *in, char **out, size_t *len);

/* One verdict on a Pod, as its Event says it. */
struct kube_event {
	char namespace[256], pod[256], uid[64];
	char container[256];		/* "" when unknown: no fieldPath */
	const char *reason;		/* CamelCase, what happened: "OOMKilledAtLimit" */
	const char *action;		/* what was done: "OOMKill" */
	char note[KUBE_NOTE_MAX + 1];	/* for people; cut to KUBE_NOTE_MAX bytes at a character */
	uint64_t time_ns;		/* CLOCK_REALTIME */
};

struct kube_events_opts {
	const char *kubeconfig;		/* NULL: as kube_config__load says */
	const char *sa_dir;		/* NULL: the service account's own */
	const char *node;		/* this node's name (reportingInstance, related) */
};

struct kube_events;

/* The poster and its thread: 0, or -1 once said (no cluster found, a file unreadable). */
int kube_events__open(const struct kube_events_opts *o, struct kube_events **out);
/*
 * E queued for the API server; never blocks on the network. A repeat of a
 * queued or posted Event (same pod, container, reason and action) becomes
 * its series. False when the table is full (said, and counted).
 */
bool kube_events__post(struct kube_events *k, const struct kube_event *e);
/* Events taken by the API server, given up, dropped, waiting. */
struct kube_events_stats {
	uint64_t created, patched, given_up, dropped, waiting;
};
void kube_events__stats(struct kube_events *k, struct kube_events_stats *s);
/* Waits up to FLUSH_MS for the waiting Events, says what is left, stops the thread. */
void kube_events__close(struct kube_events *k, unsigned flush_ms);

/* The Event's document as the API server takes it (JSON text, malloc'd); NAME its metadata.name. */
char *kube_events__document(const struct kube_event *e, const char *name, const char *node,
			    uint32_t count, uint64_t last_ns);

#endif
