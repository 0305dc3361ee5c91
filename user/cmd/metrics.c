// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <pthread.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "array.h"
#include "clock.h"
#include "container.h"
#include "kinds.h"
#include "log.h"
#include "metrics.h"
#include "sanitize.h"
#include "session.h"

#define LABELS_LEN 1024

static const char *const causes[] = { "oom_cgroup", "oom_global", "signal", "unknown" };
static const char *const triggers[] = { "pressure", "oom", "device_oom" };
#define N_CAUSES (sizeof(causes) / sizeof(causes[0]))
#define N_TRIGGERS (sizeof(triggers) / sizeof(triggers[0]))

/* What a target's series are labelled with: looked up once per process. */
struct who {
	uint32_t pid;
	uint64_t start_ms;
	char comm[MEMTRAIL_COMM_LEN];	/* an exec changes it: labels made again */
	uint64_t cgroup;		/* its cgroup path's hash: a move, labels again */
	char labels[LABELS_LEN];	/* pid="..",comm="..",container="..",pod=".." */
};

/*
 * A pod's names by (pod UID, container ID): --pods-dir is read once for
 * each, not for every process and exec in the pod (a node's can hold 100k
 * entries). One not there yet (a pod just started) is read again after
 * POD_RETRY_MS; past POD_CACHE_MAX pairs the cache starts over.
 */
#define POD_RETRY_MS 10000
#define POD_CACHE_MAX 4096
struct pod_seen {
	char uid[POD_UID_LEN + 1];
	char id[CONTAINER_ID_LEN + 1];
	bool named;
	uint64_t read_ms;
	struct pod_names names;
};

/* An ended target, still exported until it expires. */
struct gone {
	struct who who;
	uint64_t end_ms;
	int64_t current[MEMTRAIL_KIND_MAX], peak[MEMTRAIL_KIND_MAX];
};

struct metrics {
	struct metrics_config cfg;
	struct MHD_Daemon *daemon;
	int fd;
	pthread_mutex_t lock;	/* guards page and page_len */
	char *page;
	size_t page_len;
	/* the watch loop's own, not the server thread's */
	void *whos;		/* tsearch tree of struct who by (pid, start_ms) */
	void *pods;		/* tsearch tree of struct pod_seen by (uid, id) */
	size_t n_pods;
	struct gone *gone;
	size_t n_gone, cap_gone;
	uint64_t verdicts[N_CAUSES], snapshots[N_TRIGGERS];
	uint32_t kinds;		/* kinds some target held, exported from then on */
};

static enum MHD_Result serve(void *cls, struct MHD_Connection *c, const char *url,
			     const char *method, const char *version, const char *data,
			     size_t *data_len, void **state)
{
	struct metrics *m = cls;
	struct MHD_Response *r;
	enum MHD_Result ret;
	unsigned int status = MHD_HTTP_OK;
	char *body = NULL;
	size_t len = 0;

	(void)version, (void)data, (void)data_len, (void)state;
	if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
		status = MHD_HTTP_METHOD_NOT_ALLOWED;
	} else if (strcmp(url, "/metrics")) {
		status = MHD_HTTP_NOT_FOUND;
	} else {
		pthread_mutex_lock(&m->lock);
		body = m->page ? malloc(m->page_len) : NULL;
		if (body) {
			memcpy(body, m->page, m->page_len);
			len = m->page_len;
		}
		pthread_mutex_unlock(&m->lock);
		if (!body)
			status = MHD_HTTP_SERVICE_UNAVAILABLE;
	}
	if (status != MHD_HTTP_OK) {
		static const char msg[] = "memtrail: GET /metrics\n";

		r = MHD_create_response_from_buffer(sizeof(msg) - 1, (void *)msg,
						    MHD_RESPMEM_PERSISTENT);
	} else {
		r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	}
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				status == MHD_HTTP_OK ? "text/plain; version=0.0.4; charset=utf-8" :
				"text/plain; charset=utf-8");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

/*
 * "[ADDR:]PORT" ("9464", "0.0.0.0:9464", "[::1]:9464") to a listening
 * socket, and the URL it serves at.
 */
static int listen_on(const char *spec, int *fd_out, char *url, size_t url_len)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE };
	char host[256], *end;
	const char *port = spec, *colon;
	struct addrinfo *ai;
	unsigned long p;
	int fd, one = 1, err;

	snprintf(host, sizeof(host), "127.0.0.1");
	if (spec[0] == '[') {
		colon = strstr(spec, "]:");
		if (!colon || (size_t)(colon - spec - 1) >= sizeof(host))
			goto bad;
		snprintf(host, sizeof(host), "%.*s", (int)(colon - spec - 1), spec + 1);
		port = colon + 2;
	} else if ((colon = strrchr(spec, ':'))) {
		if ((size_t)(colon - spec) >= sizeof(host) || colon == spec)
			goto bad;
		snprintf(host, sizeof(host), "%.*s", (int)(colon - spec), spec);
		port = colon + 1;
	}
	errno = 0;
	p = strtoul(port, &end, 10);
	if (!*port || *end || errno || p == 0 || p > 65535)
		goto bad;
	if (getaddrinfo(host, port, &hints, &ai))
		goto bad;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 64)) {
		err = -errno;
		log__error("cannot listen on '%s': %s", spec, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return err;
	}
	snprintf(url, url_len, strchr(host, ':') ? "http://[%s]:%s/metrics" :
		 "http://%s:%s/metrics", host, port);
	freeaddrinfo(ai);
	*fd_out = fd;
	return 0;
bad:
	log__error("invalid --metrics '%s': give [ADDR:]PORT, e.g. 9464 or 0.0.0.0:9464", spec);
	return -EINVAL;
}

int metrics__open(struct metrics **out, const struct metrics_config *cfg)
{
	struct metrics *m = calloc(1, sizeof(*m));
	char url[320];
	int err;

	*out = NULL;
	if (!m)
		return -ENOMEM;
	m->cfg = *cfg;
	pthread_mutex_init(&m->lock, NULL);
	err = listen_on(cfg->listen, &m->fd, url, sizeof(url));
	if (err) {
		pthread_mutex_destroy(&m->lock);
		free(m);
		return err;
	}
	m->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, serve, m,
				     MHD_OPTION_LISTEN_SOCKET, m->fd,
				     MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
	if (!m->daemon) {
		log__error("cannot serve metrics on '%s': the HTTP server did not start",
			   cfg->listen);
		close(m->fd);
		pthread_mutex_destroy(&m->lock);
		free(m);
		return -EIO;
	}
	log__info("metrics at %s", url);
	*out = m;
	return 0;
}

void metrics__destroy(struct metrics *m)
{
	if (!m)
		return;
	MHD_stop_daemon(m->daemon);
	close(m->fd);
	pthread_mutex_destroy(&m->lock);
	free(m->page);
	tdestroy(m->whos, free);
	tdestroy(m->pods, free);
	free(m->gone);
	free(m);
}

static void count(uint64_t *counters, const char *const *names, size_t n, const char *name)
{
	size_t i;

	for (i = 0; name && i < n; i++)
		if (!strcmp(names[i], name))
			counters[i]++;
}

void metrics__verdict(struct metrics *m, const char *cause)
{
	count(m->verdicts, causes, N_CAUSES, cause);
}

void metrics__snapshot(struct metrics *m, const char *trigger)
{
	count(m->snapshots, triggers, N_TRIGGERS, trigger);
}

/*
 * A label value as the format wants it (backslash, quote and newline
 * escaped) and safe for whoever reads the page (sanitize.h: other controls
 * and bytes that are not UTF-8 as the text \xNN, its backslash escaped too),
 * cut at a whole character.
 */
static void escape(char *dst, size_t len, const char *src)
{
	char one[SANITIZE_CHAR_MAX + 1], *p;
	size_t o = 0, n, used;

	for (; src && *src; src += used) {
		p = one;
		used = 1;
		one[0] = '\\';
		if (*src == '\\' || *src == '"' || *src == '\n') {
			one[1] = *src == '\n' ? 'n' : *src;
			n = 2;
		} else {
			n = sanitize__char(src, one + 1, &used);
			if (one[1] == '\\')	/* \xNN: the text, its backslash escaped */
				n++;
			else
				p++;
		}
		if (o + n >= len)
			break;
		memcpy(dst + o, p, n);
		o += n;
	}
	dst[o] = '\0';
}

static int pod_cmp(const void *a, const void *b)
{
	const struct pod_seen *x = a, *y = b;
	int c = strcmp(x->uid, y->uid);

	return c ? c : strcmp(x->id, y->id);
}

/* The names of REF's pod and container (cached, above); NULL when not known. */
static const struct pod_names *pod_names(struct metrics *m, const struct container_ref *ref)
{
	struct pod_seen probe, *p;
	uint64_t now = clock__mono_ns() / 1000000;
	void *found;

	snprintf(probe.uid, sizeof(probe.uid), "%s", ref->pod_uid);
	snprintf(probe.id, sizeof(probe.id), "%s", ref->id);
	found = tfind(&probe, &m->pods, pod_cmp);
	p = found ? *(struct pod_seen **)found : NULL;
	if (p && (p->named || now - p->read_ms < POD_RETRY_MS))
		return p->named ? &p->names : NULL;
	if (!p) {
		if (m->n_pods >= POD_CACHE_MAX) {
			tdestroy(m->pods, free);
			m->pods = NULL;
			m->n_pods = 0;
		}
		p = malloc(sizeof(*p));
		if (!p)
			return NULL;
		*p = probe;
		if (!tsearch(p, &m->pods, pod_cmp)) {
			free(p);
			return NULL;
		}
		m->n_pods++;
	}
	p->read_ms = now;
	p->named = !container__pod_names(m->cfg.pods_dir, p->uid, p->id, &p->names);
	return p->named ? &p->names : NULL;
}

/* FNV-1a of S ("" for NULL). */
static uint64_t hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

static void who_labels(struct metrics *m, const struct trail_target *tt, struct who *w)
{
	char comm[5 * MEMTRAIL_COMM_LEN], container[2 * POD_NAME_LEN], pod[4 * POD_NAME_LEN];
	char raw[2 * POD_NAME_LEN + 2];
	const struct pod_names *names;
	struct container_ref ref;

	container[0] = pod[0] = '\0';
	if (tt->cgroup && !container__parse(tt->cgroup, &ref)) {
		names = ref.pod_uid[0] ? pod_names(m, &ref) : NULL;
		if (names && names->container[0])
			escape(container, sizeof(container), names->container);
		else
			snprintf(container, sizeof(container), "%.12s", ref.id);
		if (names) {
			snprintf(raw, sizeof(raw), "%s/%s", names->namespace, names->pod);
			escape(pod, sizeof(pod), raw);
		} else {
			snprintf(pod, sizeof(pod), "%s", ref.pod_uid);
		}
	}
	escape(comm, sizeof(comm), tt->comm);
	w->pid = tt->pid;
	w->start_ms = tt->start_ms;
	memcpy(w->comm, tt->comm, sizeof(w->comm));
	w->cgroup = hash_str(tt->cgroup);
	snprintf(w->labels, sizeof(w->labels), "pid=\"%u\",comm=\"%s\",container=\"%s\",pod=\"%s\"",
		 tt->pid, comm, container, pod);
}

static int who_cmp(const void *a, const void *b)
{
	const struct who *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->start_ms < y->start_ms ? -1 : x->start_ms > y->start_ms;
}

/* TT's labels, made again only when its name or its cgroup changed. */
static const char *labels_of(struct metrics *m, const struct trail_target *tt)
{
	struct who probe = { .pid = tt->pid, .start_ms = tt->start_ms }, *w;
	void *found = tfind(&probe, &m->whos, who_cmp);

	if (found) {
		w = *(struct who **)found;
		if (memcmp(w->comm, tt->comm, sizeof(w->comm)) || w->cgroup != hash_str(tt->cgroup))
			who_labels(m, tt, w);	/* same key: its place in the tree holds */
		return w->labels;
	}
	w = malloc(sizeof(*w));
	if (!w)
		return "pid=\"?\"";
	who_labels(m, tt, w);
	if (!tsearch(w, &m->whos, who_cmp)) {
		free(w);
		return "pid=\"?\"";
	}
	return w->labels;
}

void metrics__ended(struct metrics *m, const struct trail_target *tt, uint64_t now_ms)
{
	struct who probe = { .pid = tt->pid, .start_ms = tt->start_ms }, *w;
	struct gone *g;
	void *found;

	if (m->n_gone == METRICS_GONE_MAX) {	/* the oldest goes first */
		memmove(m->gone, m->gone + 1, (METRICS_GONE_MAX - 1) * sizeof(*m->gone));
		m->n_gone--;
	}
	if (array__grow((void **)&m->gone, &m->cap_gone, m->n_gone + 1, sizeof(*m->gone)))
		return;
	g = &m->gone[m->n_gone++];
	snprintf(g->who.labels, sizeof(g->who.labels), "%s", labels_of(m, tt));
	g->end_ms = now_ms;
	memcpy(g->current, tt->current, sizeof(g->current));
	memcpy(g->peak, tt->peak, sizeof(g->peak));
	found = tfind(&probe, &m->whos, who_cmp);
	if (found) {
		w = *(struct who **)found;
		tdelete(w, &m->whos, who_cmp);
		free(w);
	}
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Per target and kind: current (PEAK false) or peak bytes, the ended ones too. */
static void levels(struct metrics *m, FILE *f, const struct trail *t, bool peak)
{
	size_t i;
	int k;

	for (i = 0; i < t->n_targets; i++) {
		const struct trail_target *tt = &t->targets[i];
		const char *labels = labels_of(m, tt);

		if (tt->end_ms)
			continue;
		for (k = 0; k < MEMTRAIL_KIND_MAX; k++)
			if (m->kinds & (1U << k))
				fprintf(f, "%s{%s,kind=\"%s\"} %" PRId64 "\n",
					peak ? "memtrail_peak_bytes" : "memtrail_bytes", labels,
					kind__name(k), peak ? tt->peak[k] : tt->current[k]);
	}
	for (i = 0; i < m->n_gone; i++)
		for (k = 0; k < MEMTRAIL_KIND_MAX; k++)
			if (m->kinds & (1U << k))
				fprintf(f, "%s{%s,kind=\"%s\"} %" PRId64 "\n",
					peak ? "memtrail_peak_bytes" : "memtrail_bytes",
					m->gone[i].who.labels, kind__name(k),
					peak ? m->gone[i].peak[k] : m->gone[i].current[k]);
}

/* Per live target, phase name and kind: the highest segment or cumulative peak. */
static void phase_peaks(struct metrics *m, FILE *f, const struct trail *t, int field)
{
	char phase[2 * MEMTRAIL_PHASE_NAME_LEN];
	size_t i, a;
	int k;

	for (i = 0; i < t->n_targets; i++) {
		const struct trail_target *tt = &t->targets[i];

		if (tt->end_ms)
			continue;
		for (a = 0; a < tt->phases.n_aggs; a++) {
			const struct phase_agg *agg = &tt->phases.aggs[a];

			escape(phase, sizeof(phase), agg->name);
			for (k = 0; k < MEMTRAIL_KIND_MAX; k++)
				if ((m->kinds & (1U << k)) && agg->max[k][field])
					fprintf(f, "%s{%s,phase=\"%s\",kind=\"%s\"} %" PRId64 "\n",
						field == PF_SEGMENT_PEAK ?
						"memtrail_phase_segment_peak_bytes" :
						"memtrail_phase_cumulative_peak_bytes",
						labels_of(m, tt), phase, kind__name(k),
						agg->max[k][field]);
		}
	}
}

/* memtrail's own CPU seconds and resident bytes, from /proc/self. */
static void self_usage(double *cpu_s, uint64_t *rss)
{
	unsigned long long utime = 0, stime = 0, pages = 0;
	char buf[1024], *p;
	FILE *f = fopen("/proc/self/stat", "re");
	size_t n = 0;

	*cpu_s = 0;
	*rss = 0;
	if (f) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
			&utime, &stime) == 2)
		*cpu_s = (double)(utime + stime) / sysconf(_SC_CLK_TCK);
	f = fopen("/proc/self/statm", "re");
	if (f && fscanf(f, "%*u %llu", &pages) == 1)
		*rss = pages * (uint64_t)sysconf(_SC_PAGESIZE);
	if (f)
		fclose(f);
}

void metrics__update(struct metrics *m, const struct trail *t, const uint64_t *lost,
		     uint64_t now_ms)
{
	char phase[2 * MEMTRAIL_PHASE_NAME_LEN], *page = NULL;
	size_t i, live = 0, len = 0;
	uint64_t rss;
	double cpu;
	FILE *f;
	int k;

	/* expired series go; kinds some target held stay exported */
	for (i = 0; i < m->n_gone && m->gone[i].end_ms + m->cfg.expire_s * 1000ULL <= now_ms; i++)
		;
	memmove(m->gone, m->gone + i, (m->n_gone - i) * sizeof(*m->gone));
	m->n_gone -= i;
	for (i = 0; i < t->n_targets; i++)
		for (k = 0; k < MEMTRAIL_KIND_MAX; k++)
			if (t->targets[i].peak[k])
				m->kinds |= 1U << k;
	f = open_memstream(&page, &len);
	if (!f)
		return;
	family(f, "memtrail_bytes", "gauge", "Bytes a target holds now, by kind.");
	levels(m, f, t, false);
	family(f, "memtrail_peak_bytes", "gauge",
	       "Highest bytes a target held since traced, by kind (exact, kept in the kernel).");
	levels(m, f, t, true);
	family(f, "memtrail_phase_segment_peak_bytes", "gauge",
	       "Highest segment peak of a target's phases of this name, by kind.");
	phase_peaks(m, f, t, PF_SEGMENT_PEAK);
	family(f, "memtrail_phase_cumulative_peak_bytes", "gauge",
	       "Highest cumulative peak of a target's phases of this name, by kind.");
	phase_peaks(m, f, t, PF_CUMULATIVE_PEAK);
	family(f, "memtrail_target_phase", "gauge", "The phase a live target is in (always 1).");
	for (i = 0; i < t->n_targets; i++) {
		if (t->targets[i].end_ms)
			continue;
		live++;
		escape(phase, sizeof(phase), t->targets[i].phase_name);
		fprintf(f, "memtrail_target_phase{%s,phase=\"%s\"} 1\n",
			labels_of(m, &t->targets[i]), phase);
	}
	family(f, "memtrail_device_memory_bytes", "gauge",
	       "Memory of a device as its runtime reported it to a live target, by kind and device.");
	for (i = 0; i < t->n_targets; i++) {
		const struct trail_target *tt = &t->targets[i];
		uint32_t d;

		if (tt->end_ms)
			continue;
		for (d = 0; d < tt->n_dev_limits; d++)
			fprintf(f, "memtrail_device_memory_bytes{%s,kind=\"%s\",device=\"%d\"} %" PRIu64
				"\n", labels_of(m, tt), kind__name(tt->dev_limits[d].kind),
				tt->dev_limits[d].device, tt->dev_limits[d].bytes);
	}
	family(f, "memtrail_targets", "gauge", "Processes traced now.");
	fprintf(f, "memtrail_targets %zu\n", live);
	family(f, "memtrail_oom_kills_total", "counter",
	       "Targets chosen by the kernel OOM killer (global or cgroup).");
	fprintf(f, "memtrail_oom_kills_total %" PRIu64 "\n", m->verdicts[0] + m->verdicts[1]);
	family(f, "memtrail_verdicts_total", "counter",
	       "Targets that died by SIGKILL, by the verdict's cause.");
	for (i = 0; i < N_CAUSES; i++)
		fprintf(f, "memtrail_verdicts_total{cause=\"%s\"} %" PRIu64 "\n", causes[i],
			m->verdicts[i]);
	family(f, "memtrail_snapshots_total", "counter", "Snapshots taken, by trigger.");
	for (i = 0; i < N_TRIGGERS; i++)
		fprintf(f, "memtrail_snapshots_total{trigger=\"%s\"} %" PRIu64 "\n", triggers[i],
			m->snapshots[i]);
	family(f, "memtrail_lost_events_total", "counter",
	       "Events or records dropped, by where (full ring buffer, full map, ...).");
	for (k = 0; k < MEMTRAIL_LOST_MAX; k++)
		fprintf(f, "memtrail_lost_events_total{reason=\"%s\"} %" PRIu64 "\n",
			trail__lost_name(k), lost ? lost[k] : 0);
	self_usage(&cpu, &rss);
	family(f, "process_cpu_seconds_total", "counter", "memtrail's own CPU time, in seconds.");
	fprintf(f, "process_cpu_seconds_total %.2f\n", cpu);
	family(f, "process_resident_memory_bytes", "gauge", "memtrail's own resident memory.");
	fprintf(f, "process_resident_memory_bytes %" PRIu64 "\n", rss);
	if (fclose(f)) {
		free(page);
		return;
	}
	pthread_mutex_lock(&m->lock);
	free(m->page);
	m->page = page;
	m->page_len = len;
	pthread_mutex_unlock(&m->lock);
}
