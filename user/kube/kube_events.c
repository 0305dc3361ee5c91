// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Verdicts as events.k8s.io/v1 Events on the Pod, posted by a thread of their
 * own so the event loop never waits on the network.
 *
 * The table: one entry per Event (pod uid, container, reason, action: the
 * isomorphic key of client-go's tools/events, less what is the same for all
 * of memtrail's). Its first occurrence is created (POST); each repeat within
 * KUBE_SERIES_GAP_S of the last one raises its series, sent as client-go's
 * recorder sends it: a strategic merge patch of `series` alone. Repeats that
 * come while a request waits are folded into one count, so the table holds
 * what the API server should have, not a queue of requests.
 *
 * The rules an Event must pass are pkg/apis/core/validation/events.go's
 * (ValidateEventCreate for events.k8s.io/v1): eventTime set; series, when
 * there, with count >= 2 and lastObservedTime; reportingController a
 * qualified name; reportingInstance, action and reason set and at most 128
 * bytes; note at most 1024 bytes; type Normal or Warning; regarding in the
 * Event's namespace. kubectl shows an Event on a Pod by the Pod's uid, so
 * `regarding` carries it, with apiVersion v1.
 *
 * An Event the API server no longer has (404 to the patch: its TTL is an
 * hour) is created again, with its series, under its name (client-go too).
 *
 * Failures: 429, 5xx, timeouts and connection errors are retried with
 * backoff (0.5 s doubled to 30 s) for up to KUBE_GIVE_UP_S; a refused
 * token (401, 403) or certificate is said once and retried the same way (a
 * rotated token or a fixed RBAC rule lets it through); an Event the server
 * calls invalid (400, 422) is said and dropped.
 */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "kube.h"
#include "log.h"

#ifndef MEMTRAIL_VERSION
#define MEMTRAIL_VERSION "0.1.0"
#endif

#define CONTROLLER "memtrail.io/watch"
#define REQUEST_TIMEOUT_S 10
#define CONNECT_TIMEOUT_S 5

struct entry {
	bool used;
	struct kube_event first;	/* as first seen: its note and eventTime */
	char name[300];			/* metadata.name, "" until created */
	uint32_t count;			/* occurrences */
	uint32_t sent;			/* what the server has: 0 nothing, 1 created, N series N */
	uint64_t last_ns;		/* the last occurrence (CLOCK_REALTIME) */
	uint64_t since_ms;		/* waiting since (monotonic), 0: nothing waits */
	uint64_t next_ms;		/* not tried again before (monotonic) */
	uint32_t fails;
};

struct kube_events {
	struct kube_config cfg;
	char node[256];
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t wake;		/* work for the thread, or stop */
	pthread_cond_t done;		/* a request ended (for close's flush) */
	struct entry e[KUBE_QUEUE_MAX];
	atomic_bool stop;
	bool busy;			/* a request is under way */
	bool full_said, token_said, tls_said, invalid_said, gone_said;
	uint64_t created, patched, given_up, dropped;
	char last_error[256];
	CURL *curl;
	char errbuf[CURL_ERROR_SIZE];
};

/* ---- the document ---- */

/* "2006-01-02T15:04:05.000000Z": metav1.MicroTime's RFC3339Micro, in UTC */
static void micro_time(char *buf, size_t len, uint64_t ns)
{
	time_t s = (time_t)(ns / 1000000000ULL);
	char secs[32] = "";
	struct tm tm;

	if (gmtime_r(&s, &tm))
		strftime(secs, sizeof(secs), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, len, "%.20s.%06uZ", secs, (unsigned)(ns % 1000000000ULL / 1000 % 1000000));
}

char *kube_events__document(const struct kube_event *e, const char *name, const char *node,
			    uint32_t count, uint64_t last_ns)
{
	char when[40], last[40], field[300];
	json_t *doc, *regarding;
	char *text;

	micro_time(when, sizeof(when), e->time_ns);
	regarding = json_pack("{s:s, s:s, s:s, s:s, s:s}", "apiVersion", "v1", "kind", "Pod",
			      "namespace", e->namespace, "name", e->pod, "uid", e->uid);
	if (regarding && e->container[0]) {
		snprintf(field, sizeof(field), "spec.containers{%s}", e->container);
		json_object_set_new(regarding, "fieldPath", json_string(field));
	}
	doc = json_pack("{s:s, s:s, s:{s:s, s:s}, s:s, s:s, s:s, s:s, s:s, s:o, s:{s:s, s:s, "
			"s:s}, s:s, s:s}",
			"apiVersion", "events.k8s.io/v1", "kind", "Event",
			"metadata", "name", name, "namespace", e->namespace,
			"eventTime", when, "reportingController", CONTROLLER,
			"reportingInstance", node, "action", e->action, "reason", e->reason,
			"regarding", regarding,
			"related", "apiVersion", "v1", "kind", "Node", "name", node,
			"note", e->note, "type", "Warning");
	if (!doc)
		return NULL;
	if (count >= 2) {
		micro_time(last, sizeof(last), last_ns);
		json_object_set_new(doc, "series", json_pack("{s:i, s:s}", "count", (int)count,
							      "lastObservedTime", last));
	}
	text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	return text;
}

/* ---- the requests ---- */

struct reply {
	char body[4096];
	size_t len;
};

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
	struct reply *r = ctx;
	size_t take = size * n;

	if (take > sizeof(r->body) - 1 - r->len)
		take = sizeof(r->body) - 1 - r->len;
	memcpy(r->body + r->len, p, take);
	r->len += take;
	r->body[r->len] = '\0';
	return size * n;
}

/* Stops a request under way when the poster is told to stop. */
static int on_progress(void *ctx, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	struct kube_events *k = ctx;

	(void)a, (void)b, (void)c, (void)d;
	return atomic_load(&k->stop);
}

/* The bearer token: the file's content now (projected tokens rotate), or the literal one. */
static char *token_of(struct kube_events *k)
{
	char buf[16384];
	size_t n;
	FILE *f;

	if (!k->cfg.token_file)
		return k->cfg.token ? strdup(k->cfg.token) : NULL;
	f = fopen(k->cfg.token_file, "r");
	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		n--;
	buf[n] = '\0';
	return n ? strdup(buf) : NULL;
}

static void set_tls(struct kube_events *k)
{
	struct curl_blob b;

	curl_easy_setopt(k->curl, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(k->curl, CURLOPT_SSL_VERIFYHOST, 2L);
	if (k->cfg.ca_file)
		curl_easy_setopt(k->curl, CURLOPT_CAINFO, k->cfg.ca_file);
	if (k->cfg.ca_data) {
		b = (struct curl_blob){ k->cfg.ca_data, k->cfg.ca_len, CURL_BLOB_COPY };
		curl_easy_setopt(k->curl, CURLOPT_CAINFO_BLOB, &b);
	}
	/* only the kubeconfig's CA: not the system's store as well */
	curl_easy_setopt(k->curl, CURLOPT_CAPATH, NULL);
	if (k->cfg.cert_file) {
		curl_easy_setopt(k->curl, CURLOPT_SSLCERT, k->cfg.cert_file);
		curl_easy_setopt(k->curl, CURLOPT_SSLKEY, k->cfg.key_file);
	}
	if (k->cfg.cert_data) {
		b = (struct curl_blob){ k->cfg.cert_data, k->cfg.cert_len, CURL_BLOB_COPY };
		curl_easy_setopt(k->curl, CURLOPT_SSLCERT_BLOB, &b);
		b = (struct curl_blob){ k->cfg.key_data, k->cfg.key_len, CURL_BLOB_COPY };
		curl_easy_setopt(k->curl, CURLOPT_SSLKEY_BLOB, &b);
	}
}

/*
 * One request: METHOD of BODY (its CONTENT_TYPE) to PATH. The HTTP status,
 * or -1 for no answer (K's errbuf says why), -2 when the poster stops.
 */
static long request(struct kube_events *k, const char *method, const char *path,
		    const char *content_type, const char *body, struct reply *r)
{
	struct curl_slist *h = NULL;
	char url[2048], hdr[16500];
	char *token = token_of(k);
	long status = -1;
	CURLcode rc;

	snprintf(url, sizeof(url), "%s%s", k->cfg.server, path);
	snprintf(hdr, sizeof(hdr), "Content-Type: %s", content_type);
	h = curl_slist_append(h, hdr);
	h = curl_slist_append(h, "Accept: application/json");
	if (token) {
		snprintf(hdr, sizeof(hdr), "Authorization: Bearer %s", token);
		h = curl_slist_append(h, hdr);
		explicit_bzero(hdr, sizeof(hdr));
		explicit_bzero(token, strlen(token));
		free(token);
	}
	r->len = 0;
	r->body[0] = '\0';
	k->errbuf[0] = '\0';
	curl_easy_setopt(k->curl, CURLOPT_URL, url);
	curl_easy_setopt(k->curl, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(k->curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(k->curl, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(k->curl, CURLOPT_WRITEDATA, r);
	rc = curl_easy_perform(k->curl);
	curl_easy_setopt(k->curl, CURLOPT_HTTPHEADER, NULL);
	curl_slist_free_all(h);
	if (rc == CURLE_ABORTED_BY_CALLBACK)
		return -2;
	if (rc == CURLE_OK)
		curl_easy_getinfo(k->curl, CURLINFO_RESPONSE_CODE, &status);
	else if (!k->errbuf[0])
		snprintf(k->errbuf, sizeof(k->errbuf), "%s", curl_easy_strerror(rc));
	log__debug("kube events: %s %s: %ld%s%s", method, path, status, rc ? " " : "",
		   rc ? k->errbuf : "");
	if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE ||
	    rc == CURLE_SSL_CERTPROBLEM || rc == CURLE_SSL_CONNECT_ERROR) {
		if (!k->tls_said)
			log__warn("kube events: TLS with the API server %s failed: %s (%s); "
				  "Events wait and are tried again", k->cfg.server, k->errbuf,
				  k->cfg.origin);
		k->tls_said = true;
	}
	return status;
}

/* The Status's message of a refusal, or the HTTP status alone. */
static void refusal(char *buf, size_t len, long status, const struct reply *r)
{
	json_t *o = json_loads(r->body, 0, NULL);
	const char *m = json_string_value(json_object_get(o, "message"));

	snprintf(buf, len, "HTTP %ld%s%s", status, m ? ": " : "", m ? m : "");
	json_decref(o);
}

/* ---- the poster ---- */

static bool waiting(const struct entry *e)
{
	return e->used && e->sent < e->count;
}

/* What one entry asks of the server, copied out of the table under the lock. */
struct job {
	size_t i;
	struct kube_event first;
	char name[300];
	uint32_t count, sent;
	uint64_t last_ns;
};

/* The waiting entry to try now (the longest waiting); false with *WAIT_MS when none is due. */
static bool next_job(struct kube_events *k, struct job *j, uint64_t *wait_ms)
{
	uint64_t now = clock__mono_ms(), best = UINT64_MAX;
	size_t i, pick = KUBE_QUEUE_MAX;

	*wait_ms = 1000;
	for (i = 0; i < KUBE_QUEUE_MAX; i++) {
		struct entry *e = &k->e[i];

		if (!waiting(e))
			continue;
		if (e->next_ms > now) {
			if (e->next_ms - now < *wait_ms)
				*wait_ms = e->next_ms - now;
			continue;
		}
		if (e->since_ms < best) {
			best = e->since_ms;
			pick = i;
		}
	}
	if (pick == KUBE_QUEUE_MAX)
		return false;
	j->i = pick;
	j->first = k->e[pick].first;
	memcpy(j->name, k->e[pick].name, sizeof(j->name));
	j->count = k->e[pick].count;
	j->sent = k->e[pick].sent;
	j->last_ns = k->e[pick].last_ns;
	return true;
}

/* Whether STATUS (-1: no answer) is worth trying again. */
static bool retryable(long status)
{
	return status < 0 || status == 401 || status == 403 || status == 408 || status == 429 ||
	       status >= 500;
}

enum outcome { DONE, RETRY, DROP, GONE };

/* The job's request, without the lock. */
static enum outcome send_job(struct kube_events *k, struct job *j, char *why, size_t wlen)
{
	char path[1024], last[40];
	struct reply r;
	char *body;
	long status;

	why[0] = '\0';
	if (!j->sent) {
		body = kube_events__document(&j->first, j->name, k->node, j->count, j->last_ns);
		if (!body)
			return RETRY;
		snprintf(path, sizeof(path), "/apis/events.k8s.io/v1/namespaces/%s/events",
			 j->first.namespace);
		status = request(k, "POST", path, "application/json", body, &r);
	} else {
		json_t *p;

		micro_time(last, sizeof(last), j->last_ns);
		/* client-go's createPatchBytesForSeries: the series, nothing else */
		p = json_pack("{s:{s:i, s:s}}", "series", "count", (int)j->count,
			      "lastObservedTime", last);
		body = p ? json_dumps(p, JSON_COMPACT) : NULL;
		json_decref(p);
		if (!body)
			return RETRY;
		snprintf(path, sizeof(path), "/apis/events.k8s.io/v1/namespaces/%s/events/%s",
			 j->first.namespace, j->name);
		status = request(k, "PATCH", path, "application/strategic-merge-patch+json", body,
				 &r);
	}
	free(body);
	if (status == -2)
		return RETRY;
	if (status >= 200 && status < 300)
		return DONE;
	/* created already: an earlier try went through and its answer was lost */
	if (status == 409 && !j->sent)
		return DONE;
	/* the Event expired (the API server keeps them an hour): created again */
	if (status == 404 && j->sent)
		return GONE;
	if (status < 0)
		snprintf(why, wlen, "%s", k->errbuf);
	else
		refusal(why, wlen, status, &r);
	if ((status == 401 || status == 403) && !k->token_said) {
		log__warn("kube events: the API server %s refused memtrail (%s; %s); Events wait "
			  "and are tried again", k->cfg.server, why, k->cfg.origin);
		k->token_said = true;
	}
	return retryable(status) ? RETRY : DROP;
}

static void describe(char *buf, size_t len, const struct kube_event *e)
{
	snprintf(buf, len, "pod %s/%s (%s)", e->namespace, e->pod, e->reason);
}

/* The job's outcome into the table, under the lock. */
static void apply(struct kube_events *k, struct job *j, enum outcome o, const char *why)
{
	struct entry *e = &k->e[j->i];
	uint64_t now = clock__mono_ms(), backoff;
	char who[600];

	describe(who, sizeof(who), &j->first);
	switch (o) {
	case DONE:
		if (j->sent)
			k->patched++;
		else
			k->created++;
		e->sent = j->count;
		e->fails = 0;
		e->next_ms = 0;
		e->since_ms = waiting(e) ? now : 0;
		k->token_said = k->tls_said = false;
		k->last_error[0] = '\0';
		return;
	case GONE:
		/* client-go's way: the whole Event again, same name, series and all */
		e->sent = 0;
		e->next_ms = 0;
		return;
	case DROP:
		log__warn("kube events: the API server did not take the Event on %s: %s; it is "
			  "dropped", who, why);
		k->dropped++;
		memset(e, 0, sizeof(*e));
		return;
	case RETRY:
		snprintf(k->last_error, sizeof(k->last_error), "%s", why);
		if (now - e->since_ms >= KUBE_GIVE_UP_S * 1000ULL) {
			log__warn("kube events: gave up on the Event on %s after %d s: %s", who,
				  KUBE_GIVE_UP_S, why[0] ? why : "no answer");
			k->given_up++;
			memset(e, 0, sizeof(*e));
			return;
		}
		backoff = 500ULL << (e->fails < 6 ? e->fails : 6);
		if (backoff > KUBE_BACKOFF_MAX_MS)
			backoff = KUBE_BACKOFF_MAX_MS;
		e->fails++;
		e->next_ms = now + backoff;
		return;
	}
}

static void *poster(void *arg)
{
	struct kube_events *k = arg;
	struct job j;
	uint64_t wait_ms;
	char why[512];

	pthread_mutex_lock(&k->lock);
	while (!atomic_load(&k->stop)) {
		enum outcome o;

		if (!next_job(k, &j, &wait_ms)) {
			struct timespec ts;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += (time_t)(wait_ms / 1000);
			ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&k->wake, &k->lock, &ts);
			continue;
		}
		k->busy = true;
		pthread_mutex_unlock(&k->lock);
		o = send_job(k, &j, why, sizeof(why));
		pthread_mutex_lock(&k->lock);
		k->busy = false;
		apply(k, &j, o, why);
		pthread_cond_broadcast(&k->done);
	}
	pthread_mutex_unlock(&k->lock);
	return NULL;
}

/* ---- the door ---- */

static bool same(const struct kube_event *a, const struct kube_event *b)
{
	return !strcmp(a->uid, b->uid) && !strcmp(a->container, b->container) &&
	       !strcmp(a->reason, b->reason) && !strcmp(a->action, b->action);
}

bool kube_events__post(struct kube_events *k, const struct kube_event *ev)
{
	uint64_t now = clock__mono_ms();
	struct entry *e, *free_slot = NULL, *idle = NULL;
	char who[600];
	size_t i;

	pthread_mutex_lock(&k->lock);
	for (i = 0; i < KUBE_QUEUE_MAX; i++) {
		e = &k->e[i];
		if (!e->used) {
			if (!free_slot)
				free_slot = e;
			continue;
		}
		if (same(&e->first, ev) &&
		    ev->time_ns < e->last_ns + KUBE_SERIES_GAP_S * 1000000000ULL) {
			/* a repeat: its series */
			e->count++;
			if (ev->time_ns > e->last_ns)
				e->last_ns = ev->time_ns;
			if (!e->since_ms)
				e->since_ms = now;
			goto queued;
		}
		/* a delivered Event whose series is over can make room */
		if (!waiting(e) && !idle)
			idle = e;
	}
	e = free_slot ? free_slot : idle;
	if (!e) {
		bool say = !k->full_said;

		k->full_said = true;
		k->dropped++;
		pthread_mutex_unlock(&k->lock);
		/* said outside the lock: a stderr nobody reads must not hold the poster */
		describe(who, sizeof(who), ev);
		if (say)
			log__warn("kube events: %d Events wait for the API server; the one on %s is "
				  "dropped (and later ones, counted)", KUBE_QUEUE_MAX, who);
		return false;
	}
	memset(e, 0, sizeof(*e));
	e->used = true;
	e->first = *ev;
	e->count = 1;
	e->last_ns = ev->time_ns;
	e->since_ms = now;
	/*
	 * client-go's name: the regarding object's name and the time in hex;
	 * past 253 bytes (a DNS subdomain's most), the pod's UID in its place
	 */
	if (strlen(ev->pod) + 1 + 16 <= 253)
		snprintf(e->name, sizeof(e->name), "%s.%llx", ev->pod,
			 (unsigned long long)ev->time_ns);
	else
		snprintf(e->name, sizeof(e->name), "%s.%llx", ev->uid,
			 (unsigned long long)ev->time_ns);
queued:
	log__debug("kube events: %s on pod %s/%s: %u time%s", ev->reason, ev->namespace, ev->pod,
		   e->count, e->count == 1 ? "" : "s");
	pthread_cond_signal(&k->wake);
	pthread_mutex_unlock(&k->lock);
	return true;
}

void kube_events__stats(struct kube_events *k, struct kube_events_stats *s)
{
	size_t i;

	pthread_mutex_lock(&k->lock);
	s->created = k->created;
	s->patched = k->patched;
	s->given_up = k->given_up;
	s->dropped = k->dropped;
	s->waiting = 0;
	for (i = 0; i < KUBE_QUEUE_MAX; i++)
		s->waiting += waiting(&k->e[i]);
	pthread_mutex_unlock(&k->lock);
}

int kube_events__open(const struct kube_events_opts *o, struct kube_events **out)
{
	struct kube_events *k;
	sigset_t all, old;
	char err[1024];
	int r;

	*out = NULL;
	if (!o->node || !o->node[0] || strlen(o->node) > 128) {
		log__error("--kube-events: the node's name (--node, NODE_NAME or the host name) "
			   "must be 1 to 128 bytes");
		return -1;
	}
	k = calloc(1, sizeof(*k));
	if (!k) {
		log__error("out of memory");
		return -1;
	}
	if (kube_config__load(o->kubeconfig, o->sa_dir, &k->cfg, err, sizeof(err))) {
		log__error("--kube-events: %s", err);
		free(k);
		return -1;
	}
	snprintf(k->node, sizeof(k->node), "%s", o->node);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	k->curl = curl_easy_init();
	if (!k->curl) {
		log__error("--kube-events: libcurl could not start");
		goto fail;
	}
	curl_easy_setopt(k->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(k->curl, CURLOPT_TIMEOUT, (long)REQUEST_TIMEOUT_S);
	curl_easy_setopt(k->curl, CURLOPT_CONNECTTIMEOUT, (long)CONNECT_TIMEOUT_S);
	curl_easy_setopt(k->curl, CURLOPT_ERRORBUFFER, k->errbuf);
	curl_easy_setopt(k->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(k->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(k->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(k->curl, CURLOPT_XFERINFODATA, k);
	curl_easy_setopt(k->curl, CURLOPT_USERAGENT, "memtrail/" MEMTRAIL_VERSION);
	curl_easy_setopt(k->curl, CURLOPT_PROTOCOLS_STR, "https");
	set_tls(k);
	pthread_mutex_init(&k->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&k->wake, &ca);
	pthread_cond_init(&k->done, &ca);
	pthread_condattr_destroy(&ca);
	/*
	 * every signal blocked in the poster: Ctrl-C and SIGTERM reach the
	 * event loop, and a TLS write to a closed connection raises no SIGPIPE
	 */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(&k->thread, NULL, poster, k);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r) {
		log__error("--kube-events: no thread to post from: %s", strerror(r));
		goto fail;
	}
	k->started = true;
	log__info("kube events: posting verdicts as Events to %s, from %s, as node %s",
		  k->cfg.server, k->cfg.origin, k->node);
	*out = k;
	return 0;
fail:
	if (k->curl)
		curl_easy_cleanup(k->curl);
	kube_config__free(&k->cfg);
	free(k);
	return -1;
}

void kube_events__close(struct kube_events *k, unsigned flush_ms)
{
	struct kube_events_stats s;
	uint64_t until = clock__mono_ms() + flush_ms;

	if (!k)
		return;
	pthread_mutex_lock(&k->lock);
	for (;;) {
		size_t i, n = 0;
		struct timespec ts;

		for (i = 0; i < KUBE_QUEUE_MAX; i++)
			n += waiting(&k->e[i]);
		if (!n || clock__mono_ms() >= until)
			break;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += 100 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&k->done, &k->lock, &ts);
	}
	atomic_store(&k->stop, true);
	pthread_cond_signal(&k->wake);
	pthread_mutex_unlock(&k->lock);
	pthread_join(k->thread, NULL);
	kube_events__stats(k, &s);
	if (s.waiting)
		log__warn("kube events: %llu Event%s not taken by the API server at exit (%s); the "
			  "verdict files have them", (unsigned long long)s.waiting,
			  s.waiting == 1 ? "" : "s", k->last_error[0] ? k->last_error : "no answer");
	if (s.dropped || s.given_up)
		log__warn("kube events: %llu dropped, %llu given up in all",
			  (unsigned long long)s.dropped, (unsigned long long)s.given_up);
	curl_easy_cleanup(k->curl);
	curl_global_cleanup();
	pthread_mutex_destroy(&k->lock);
	pthread_cond_destroy(&k->wake);
	pthread_cond_destroy(&k->done);
	kube_config__free(&k->cfg);
	free(k);
}
