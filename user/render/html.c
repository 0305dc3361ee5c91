// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The HTML report: a fixed page (styles and a small script, below) and the
 * data it draws, one JSON object inside a <script type="application/json">.
 * Every string from the trail reaches the page only there, with <, > and &
 * written as \u escapes so no comm or phase name can end the script element,
 * and the script puts strings on the page as text nodes, never as markup.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format.h"
#include "html.h"
#include "sanitize.h"
#include "outfile.h"
#include "kinds.h"
#include "table.h"

/* v1's "no limit" is near INT64_MAX: larger than any memory, not drawn */
#define LIMIT_MAX (1LL << 56)

struct page {
	size_t samples, drawn;
	bool decimated;
	json_t *frames;		/* the flame graphs' frames: [label, "py" | "native" | "mark"] */
	json_t *frame_index;	/* label and type -> its index in frames */
};

static json_int_t known_limit(json_t *v)
{
	json_int_t l = json_integer_value(v);

	return json_is_integer(v) && l > 0 && l < LIMIT_MAX ? l : 0;
}

/*
 * The memory limit a target ran under, from what the file says: a snapshot's
 * cgroup, its OOM or pressure record, the verdict, an oom or pressure event.
 */
static json_int_t target_limit(const struct trail *t, const struct trail_target *tt,
			       const char **from)
{
	json_t *s = t->snapshot, *ev;
	json_int_t l = 0;
	size_t i;

	*from = "cgroup limit";
	if (s && json_integer_value(json_object_get(s, "pid")) == tt->pid) {
		l = known_limit(json_object_get(json_object_get(s, "cgroup"), "limit"));
		if (!l)
			l = known_limit(json_object_get(json_object_get(s, "oom"), "limit"));
		if (!l)
			l = known_limit(json_object_get(json_object_get(s, "pressure"), "limit"));
	}
	if (!l && tt->verdict && tt->verdict->limit < (uint64_t)LIMIT_MAX)
		l = (json_int_t)tt->verdict->limit;
	json_array_foreach(t->events, i, ev)
		if (!l && json_integer_value(json_object_get(ev, "pid")) == tt->pid)
			l = known_limit(json_object_get(ev, "limit"));
	return l;
}

/* The bucket of a time DT after the first, of times up to RANGE after it; without overflow. */
static long bucket(uint64_t dt, uint64_t range)
{
	if (range < UINT64_MAX / HTML_BUCKETS)
		return dt * HTML_BUCKETS / (range + 1);
	return dt / (range / HTML_BUCKETS + 1);
}

/* The resident parts: the page stacks them (their sum is the resident size). */
static bool stacked_kind(int k)
{
	return k == MEMTRAIL_KIND_RSS_ANON || k == MEMTRAIL_KIND_RSS_FILE ||
	       k == MEMTRAIL_KIND_RSS_SHMEM;
}

/* What the page draws of sample I: the resident sum, then each other kind's level. */
static size_t drawn_values(const struct trail_target *tt, size_t i, uint32_t kinds, double *q)
{
	size_t n = 1;
	int k;

	q[0] = 0;
	for (k = 0; k < MEMTRAIL_KIND_MAX; k++) {
		double v = (double)tt->timeline[i].level[k];

		if (!(kinds & (1U << k)))
			continue;
		if (stacked_kind(k))
			q[0] += v > 0 ? v : 0;
		else
			q[n++] = v;
	}
	return n;
}

static int index_cmp(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The samples drawn: all of them when few; otherwise, per time bucket, for
 * the resident sum and for each other kind drawn, the sample with its lowest
 * and the one with its highest value (in time order, once each), so every
 * peak and trough the page draws survives, plus the last sample. A file's
 * timeline may be out of order: the buckets span its earliest to its latest
 * time, and values are doubles (a file's levels may add up beyond 64 bits).
 */
static size_t pick_samples(const struct trail_target *tt, uint32_t kinds, size_t *idx)
{
	size_t lo[1 + MEMTRAIL_KIND_MAX], hi[1 + MEMTRAIL_KIND_MAX], take[2 * (1 + MEMTRAIL_KIND_MAX)];
	double min[1 + MEMTRAIL_KIND_MAX], max[1 + MEMTRAIL_KIND_MAX], q[1 + MEMTRAIL_KIND_MAX];
	size_t i, j, n = 0, nq = 0, nt;
	uint64_t t0, t1;
	long cur = -1;

	if (tt->n_samples <= 2 * HTML_BUCKETS) {
		for (i = 0; i < tt->n_samples; i++)
			idx[n++] = i;
		return n;
	}
	t0 = t1 = tt->timeline[0].t_ms;
	for (i = 1; i < tt->n_samples; i++) {
		t0 = tt->timeline[i].t_ms < t0 ? tt->timeline[i].t_ms : t0;
		t1 = tt->timeline[i].t_ms > t1 ? tt->timeline[i].t_ms : t1;
	}
	for (i = 0; i <= tt->n_samples; i++) {
		long b = i < tt->n_samples ? bucket(tt->timeline[i].t_ms - t0, t1 - t0) : -2;

		if (b != cur && cur >= 0) {
			for (j = 0, nt = 0; j < nq; j++) {
				take[nt++] = lo[j];
				take[nt++] = hi[j];
			}
			qsort(take, nt, sizeof(take[0]), index_cmp);
			for (j = 0; j < nt; j++)
				if (!j || take[j] != take[j - 1])
					idx[n++] = take[j];
		}
		if (i == tt->n_samples)
			break;
		nq = drawn_values(tt, i, kinds, q);
		for (j = 0; j < nq; j++) {
			if (b != cur || q[j] < min[j]) {
				min[j] = q[j];
				lo[j] = i;
			}
			if (b != cur || q[j] > max[j]) {
				max[j] = q[j];
				hi[j] = i;
			}
		}
		cur = b;
	}
	if (idx[n - 1] != tt->n_samples - 1)
		idx[n++] = tt->n_samples - 1;
	return n;
}

static json_t *timeline_json(const struct trail_target *tt, uint32_t kinds, struct page *pg)
{
	json_t *tl = json_array(), *v = json_object();
	size_t *idx = calloc(tt->n_samples + 1, sizeof(*idx)), n, i;
	int k;

	if (!tl || !v || !idx) {
		json_decref(tl);
		json_decref(v);
		free(idx);
		return NULL;
	}
	n = tt->n_samples ? pick_samples(tt, kinds, idx) : 0;
	pg->samples += tt->n_samples;
	pg->drawn += n;
	pg->decimated |= n < tt->n_samples;
	for (i = 0; i < n; i++)
		json_array_append_new(tl, json_integer(tt->timeline[idx[i]].t_ms));
	for (k = 0; k < MEMTRAIL_KIND_MAX; k++) {
		json_t *arr;

		if (!(kinds & (1U << k)))
			continue;
		arr = json_array();
		for (i = 0; i < n; i++)
			json_array_append_new(arr, json_integer(tt->timeline[idx[i]].level[k]));
		json_object_set_new(v, kind__name(k), arr);
	}
	free(idx);
	return json_pack("{s:o, s:o}", "t", tl, "v", v);
}

/* Kinds with a non-zero level in the timeline: the series drawn. */
static uint32_t drawn_kinds(const struct trail *t, const struct trail_target *tt)
{
	uint32_t kinds = 0;
	size_t i;
	int k;

	for (i = 0; i < tt->n_samples; i++)
		for (k = 0; k < MEMTRAIL_KIND_MAX; k++)
			if ((t->kinds & (1U << k)) && tt->timeline[i].level[k])
				kinds |= 1U << k;
	return kinds;
}

static json_t *phases_json(const struct trail *t, const struct trail_target *tt)
{
	json_t *arr = json_array(), *seg, *cum, *p;
	size_t i, n = phase_log__count(&tt->phases);
	int k;

	for (i = 0; i < n; i++) {
		const struct trail_phase *ph = phase_log__at(&tt->phases, i);

		seg = json_object();
		cum = json_object();
		for (k = 0; k < MEMTRAIL_KIND_MAX; k++) {
			if (!(t->kinds & (1U << k)))
				continue;
			json_object_set_new(seg, kind__name(k), json_integer(ph->f[k][PF_SEGMENT_PEAK]));
			json_object_set_new(cum, kind__name(k),
					    json_integer(ph->f[k][PF_CUMULATIVE_PEAK]));
		}
		p = json_pack("{s:s, s:I, s:I, s:o, s:o}", "name", ph->name,
			      "start", (json_int_t)ph->start_ms, "end", (json_int_t)ph->end_ms,
			      "seg", seg, "cum", cum);
		json_array_append_new(arr, p);
	}
	return arr;
}

static void add_marker(json_t *arr, json_int_t t_ms, const char *type, const char *text)
{
	json_array_append_new(arr, json_pack("{s:I, s:s, s:s}", "t", t_ms, "type", type,
					     "text", text));
}

/* A line for people: the event's type and its own fields, as the file has them. */
static void add_event_marker(json_t *arr, json_t *ev)
{
	const char *type = json_string_value(json_object_get(ev, "type"));
	char *text = json_dumps(ev, JSON_COMPACT | JSON_SORT_KEYS);

	add_marker(arr, json_integer_value(json_object_get(ev, "t_ms")), type ? type : "event",
		   text ? text : "?");
	free(text);
}

static json_t *markers_json(const struct trail *t, const struct trail_target *tt)
{
	json_t *arr = json_array(), *ev, *s = t->snapshot;
	char text[256];
	size_t i;

	json_array_foreach(t->events, i, ev)
		if (json_integer_value(json_object_get(ev, "pid")) == tt->pid)
			add_event_marker(arr, ev);
	if (s && json_integer_value(json_object_get(s, "pid")) == tt->pid) {
		const char *trigger = json_string_value(json_object_get(s, "trigger"));

		snprintf(text, sizeof(text), "snapshot: %s", trigger ? trigger : "?");
		format__utf8_whole(text);
		/* a snapshot's trigger is its marker: oom_kill, pressure or device_oom */
		add_marker(arr, json_integer_value(json_object_get(s, "t_ms")),
			   trigger && !strcmp(trigger, "oom_kill") ? "oom" : trigger ? trigger : "snapshot",
			   text);
	}
	if (tt->verdict) {
		json_t *vj = verdict__json(tt->verdict);
		char *v = vj ? json_dumps(vj, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

		json_decref(vj);
		snprintf(text, sizeof(text), "verdict: %s", v ? v : "?");
		format__utf8_whole(text);
		add_marker(arr, tt->end_ms, "verdict", text);
		free(v);
	}
	/* the exit itself, when its event is not in the file (lost, or a verdict file's) */
	json_array_foreach(arr, i, ev)
		if (!strcmp(json_string_value(json_object_get(ev, "type")), "exit"))
			break;
	if (tt->exited && i == json_array_size(arr)) {
		snprintf(text, sizeof(text), "exit: code %d, signal %d", tt->exit_code, tt->exit_signal);
		add_marker(arr, tt->end_ms, "exit", text);
	}
	return arr;
}

/* The index of the frame LABEL of TYPE in the page's frames, added when new; -1: out of memory. */
static json_int_t frame_index(struct page *pg, const char *label, const char *type)
{
	char key[1400];
	json_t *at;
	json_int_t i;

	snprintf(key, sizeof(key), "%s\t%s", type, label);
	format__utf8_whole(key);
	at = json_object_get(pg->frame_index, key);
	if (at)
		return json_integer_value(at);
	i = (json_int_t)json_array_size(pg->frames);
	if (json_array_append_new(pg->frames, json_pack("[s, s]", label, type)) ||
	    json_object_set_new(pg->frame_index, key, json_integer(i)))
		return -1;
	return i;
}

/* FR's index in the page's frames (MARK: a frame of that text instead), added when new; -1: out of memory. */
static json_int_t frame_ref(struct page *pg, const struct trail_frame *fr, const char *mark)
{
	char label[1300];

	if (mark) {
		snprintf(label, sizeof(label), "%s", mark);
		return frame_index(pg, label, "mark");
	}
	return frame_index(pg, label, table__frame_label(fr, label, sizeof(label)));
}

/*
 * Every site of TT for the flame graphs and the sites table: {k: kind, p:
 * phase, a: allocated, u: in use, f: frame indices, outermost first, l: its
 * label as report's table names it}; a chain the unwinder cut
 * starts at a "[chain cut]" frame of its own.
 */
static json_t *flame_json(const struct trail_target *tt, struct page *pg)
{
	char label[512];
	json_t *arr = json_array(), *f;
	json_int_t ref;
	size_t i, j;

	for (i = 0; arr && tt->sites && i < tt->sites->n; i++) {
		const struct trail_site *s = &tt->sites->list[i];

		f = json_array();
		if (s->frames_truncated && (ref = frame_ref(pg, NULL, "[chain cut]")) >= 0)
			json_array_append_new(f, json_integer(ref));
		for (j = s->n_frames; j--;) {
			ref = frame_ref(pg, &s->frames[j], NULL);
			if (ref < 0)
				break;
			json_array_append_new(f, json_integer(ref));
		}
		table__site_label(s, label, sizeof(label));
		if (json_array_append_new(arr, json_pack("{s:s, s:o, s:I, s:I, s:o, s:s}",
				"k", trail_site__kind_name(s->kind), "p", sanitize__json(s->phase),
				"a", (json_int_t)s->alloc_bytes, "u", (json_int_t)s->inuse_bytes,
				"f", f, "l", label))) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

static json_t *target_json(const struct trail *t, const struct trail_target *tt, struct page *pg)
{
	uint32_t kinds = drawn_kinds(t, tt);
	json_t *o, *tl, *peak = json_object(), *names = json_array(), *dev = json_array();
	json_t *dev_limits = json_object();
	uint64_t t0 = tt->start_ms, t1 = tt->end_ms, dl;
	const char *from;
	json_int_t limit = target_limit(t, tt, &from);
	size_t n = phase_log__count(&tt->phases);
	int k;

	for (k = 0; k < MEMTRAIL_KIND_MAX; k++) {
		if (!(t->kinds & (1U << k)))
			continue;
		if (kinds & (1U << k))
			json_array_append_new(names, json_string(kind__name(k)));
		if (tt->peak[k])
			json_object_set_new(peak, kind__name(k), json_integer(tt->peak[k]));
		if (kind__device() & (1U << k))
			json_array_append_new(dev, json_string(kind__name(k)));
		if ((dl = trail__device_limit(tt, k)))
			json_object_set_new(dev_limits, kind__name(k), json_integer(dl));
	}
	/* the time drawn: the timeline, the target's life and its phases */
	if (tt->n_samples) {
		t0 = t0 < tt->timeline[0].t_ms ? t0 : tt->timeline[0].t_ms;
		t1 = t1 > tt->timeline[tt->n_samples - 1].t_ms ? t1 : tt->timeline[tt->n_samples - 1].t_ms;
		if (tt->start_ms == 0 && tt->timeline[0].t_ms > 0 && t->snapshot)
			t0 = tt->timeline[0].t_ms;	/* a snapshot keeps a window */
	}
	if (n) {
		const struct trail_phase *last = phase_log__at(&tt->phases, n - 1);

		t1 = t1 > last->end_ms ? t1 : last->end_ms;
		if (t->snapshot && phase_log__at(&tt->phases, 0)->start_ms < t0)
			t0 = phase_log__at(&tt->phases, 0)->start_ms;
	}
	tl = timeline_json(tt, kinds, pg);
	o = json_pack("{s:i, s:s, s:s?, s:s?, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:s, s:o, s:o?}",
		      "pid", tt->pid, "comm", tt->comm, "cmdline", tt->cmdline, "cgroup", tt->cgroup,
		      "t0", (json_int_t)t0, "t1", (json_int_t)t1, "kinds", names,
		      "device_kinds", dev, "peak", peak,
		      "limit", limit ? json_integer(limit) : json_null(),
		      "device_limits", dev_limits, "limit_from", from,
		      "phases", phases_json(t, tt),
		      "verdict", tt->verdict ? verdict__json(tt->verdict) : NULL);
	if (!o || !tl) {
		json_decref(o);
		json_decref(tl);
		return NULL;
	}
	json_object_update(o, tl);
	json_decref(tl);
	json_object_set_new(o, "events", markers_json(t, tt));
	json_object_set_new(o, "fs", flame_json(tt, pg));
	json_object_set_new(o, "exit", tt->exited ?
			    json_pack("{s:i, s:i}", "code", tt->exit_code, "signal", tt->exit_signal) :
			    json_null());
	return o;
}

static json_t *page_json(const struct trail *t, struct page *pg)
{
	json_t *targets = json_array(), *kinds = json_array(), *o;
	char title[256], sub[512];
	size_t i;
	int k;

	for (k = 0; k < MEMTRAIL_KIND_MAX; k++)
		if (t->kinds & (1U << k))
			json_array_append_new(kinds, json_string(kind__name(k)));
	for (i = 0; i < t->n_targets; i++) {
		o = target_json(t, &t->targets[i], pg);
		if (!o || json_array_append_new(targets, o)) {
			json_decref(targets);
			json_decref(kinds);
			return NULL;
		}
	}
	if (t->verdict_doc && t->n_targets)
		snprintf(title, sizeof(title), "verdict of %s (%u)", t->targets[0].comm,
			 t->targets[0].pid);
	else if (t->snapshot)
		snprintf(title, sizeof(title), "%s snapshot of %s (%lld)",
			 json_string_value(json_object_get(t->snapshot, "trigger")) ?: "?",
			 json_string_value(json_object_get(t->snapshot, "comm")) ?: "?",
			 (long long)json_integer_value(json_object_get(t->snapshot, "pid")));
	else
		snprintf(title, sizeof(title), "trail: %s", t->command ? t->command : "?");
	format__utf8_whole(title);	/* the file's strings, cut to fit */
	if (t->interval_ms)
		snprintf(sub, sizeof(sub), "started %s, %.1f s, sampled every %u ms, %zu targets",
			 t->started, t->duration_ms / 1000.0, t->interval_ms, t->n_targets);
	else
		snprintf(sub, sizeof(sub), "written %s, no timeline", t->started);
	return json_pack("{s:s, s:s, s:o, s:o, s:b, s:i, s:I, s:I, s:O, s:b}", "title", title,
			 "sub", sub, "kinds", kinds, "targets", targets, "decimated", pg->decimated,
			 "buckets", HTML_BUCKETS, "samples", (json_int_t)pg->samples,
			 "drawn", (json_int_t)pg->drawn, "frames", pg->frames,
			 "live_first", t->snapshot != NULL);
}

#include "html_page.h"

/* The JSON, with <, > and & as \u escapes: they occur only inside strings. */
static int put_data(FILE *f, const char *s)
{
	for (; *s; s++) {
		int r = *s == '<' ? fputs("\\u003c", f) : *s == '>' ? fputs("\\u003e", f) :
			*s == '&' ? fputs("\\u0026", f) : fputc(*s, f);

		if (r == EOF)
			return -1;
	}
	return 0;
}

static int fill_page(int fd, void *text)
{
	int dfd = dup(fd), err = 0;
	FILE *f = dfd >= 0 ? fdopen(dfd, "w") : NULL;

	if (!f) {
		err = -errno;
		if (dfd >= 0)
			close(dfd);
		return err;
	}
	errno = 0;
	if (fputs(page_head, f) == EOF || put_data(f, text) || fputs(page_tail, f) == EOF ||
	    fflush(f))
		err = errno ? -errno : -EIO;
	if (fclose(f) && !err)
		err = -errno;
	return err;
}

/* DATA (its reference taken) written as the page at PATH: 0 or -errno. */
static int write_page(json_t *data, const char *path)
{
	char *text = data ? json_dumps(data, JSON_COMPACT) : NULL;
	int err;

	json_decref(data);
	if (!text)
		return -ENOMEM;
	err = outfile__write(path, fill_page, text);
	free(text);
	return err;
}

int html__write(const struct trail *t, const char *path, bool *decimated)
{
	struct page pg = { .frames = json_array(), .frame_index = json_object() };
	json_t *data = pg.frames && pg.frame_index ? page_json(t, &pg) : NULL;

	json_decref(pg.frames);
	json_decref(pg.frame_index);
	*decimated = pg.decimated;
	return write_page(data, path);
}

/* {base, new} of a diff's {base, new, delta} D, as a pair. */
static json_t *pair(json_t *d)
{
	return json_pack("[O, O]", json_object_get(d, "base"), json_object_get(d, "new"));
}

/* A diff's sites (SITES) for the page: {k, l, f: frame indices, a: [base, new], u: the same}. */
static json_t *diff_sites(json_t *sites, struct page *pg)
{
	json_t *arr = json_array(), *s, *f, *fr;
	json_int_t ref;
	size_t i, j;

	json_array_foreach(sites, i, s) {
		f = json_array();
		json_array_foreach(json_object_get(s, "f"), j, fr) {
			ref = frame_index(pg, json_string_value(json_array_get(fr, 0)) ?: "?",
					  json_string_value(json_array_get(fr, 1)) ?: "native");
			if (ref >= 0)
				json_array_append_new(f, json_integer(ref));
		}
		json_array_append_new(arr, json_pack("{s:O, s:O, s:o, s:o, s:o}",
			"k", json_object_get(s, "kind"), "l", json_object_get(s, "site"), "f", f,
			"a", pair(json_object_get(s, "alloc_bytes")),
			"u", pair(json_object_get(s, "inuse_bytes"))));
	}
	return arr;
}

int html__write_diff(json_t *diff, const char *base_name, const char *new_name, const char *path)
{
	struct page pg = { .frames = json_array(), .frame_index = json_object() };
	json_t *targets = json_array(), *t, *kinds = json_array(), *data;
	char a[SANITIZE_LEN(256)], b[SANITIZE_LEN(256)], title[600];
	size_t i;
	int k;

	for (k = 0; k < MEMTRAIL_KIND_MAX; k++)
		json_array_append_new(kinds, json_string(kind__name(k)));
	json_array_foreach(json_object_get(diff, "targets"), i, t)
		json_array_append_new(targets, json_pack("{s:O, s:O, s:O, s:O, s:O, s:o}",
			"target", json_object_get(t, "target"), "in_base", json_object_get(t, "in_base"),
			"in_new", json_object_get(t, "in_new"), "peaks", json_object_get(t, "peaks"),
			"phases", json_object_get(t, "phases"),
			"fs", diff_sites(json_object_get(t, "sites"), &pg)));
	snprintf(title, sizeof(title), "what changed from %s to %s",
		 sanitize__str(a, sizeof(a), base_name), sanitize__str(b, sizeof(b), new_name));
	format__utf8_whole(title);
	data = json_pack("{s:b, s:s, s:s, s:o, s:o, s:O, s:b}", "diff", true, "title", title,
			 "sub", "BASE is the first trail, NEW the second; red grew, green shrank",
			 "kinds", kinds, "targets", targets, "frames", pg.frames, "live_first", false);
	json_decref(pg.frames);
	json_decref(pg.frame_index);
	return write_page(data, path);
}
