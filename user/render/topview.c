// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "sanitize.h"
#include "topview.h"

#define PID_W 7
#define COMM_W 15
#define PROCS_W 5
#define NUM_W 8			/* a kind, PEAK and TREND, each after one space */
#define PHASE_MIN 8
#define PHASE_MAX 32
#define POD_MIN 16
#define POD_MAX 48

/* Kind columns, left to right. */
static const struct {
	int kind;
	const char *head;
} columns[] = {
	{ MEMTRAIL_KIND_RSS_ANON, "RSS_ANON" },
	{ MEMTRAIL_KIND_RSS_FILE, "RSS_FILE" },
	{ MEMTRAIL_KIND_RSS_SHMEM, "RSS_SHM" },
	{ MEMTRAIL_KIND_MAPPED, "MAPPED" },
	{ MEMTRAIL_KIND_HEAP, "HEAP" },
	{ MEMTRAIL_KIND_CUDA_DEVICE, "CUDA_DEV" },
	{ MEMTRAIL_KIND_CUDA_HOST, "CUDA_HST" },
	{ MEMTRAIL_KIND_CUDA_MANAGED, "CUDA_MGD" },
	{ MEMTRAIL_KIND_NEURON_DEVICE, "NRN_DEV" },
	{ MEMTRAIL_KIND_NEURON_HOST, "NRN_HOST" },
};

/* On a narrow screen kind columns go in this order; the sort kind stays. */
static const int drop_order[] = {
	MEMTRAIL_KIND_RSS_FILE, MEMTRAIL_KIND_RSS_SHMEM, MEMTRAIL_KIND_HEAP,
	MEMTRAIL_KIND_CUDA_HOST, MEMTRAIL_KIND_CUDA_MANAGED, MEMTRAIL_KIND_NEURON_HOST,
	MEMTRAIL_KIND_MAPPED, MEMTRAIL_KIND_RSS_ANON, MEMTRAIL_KIND_CUDA_DEVICE,
	MEMTRAIL_KIND_NEURON_DEVICE,
};

/* Always shown: what a process holds resident and what it mapped. */
#define BASE_KINDS (1U << MEMTRAIL_KIND_RSS_ANON | 1U << MEMTRAIL_KIND_RSS_FILE | \
		    1U << MEMTRAIL_KIND_MAPPED)
/* Shown when some row holds any */
#define DEVICE_KINDS (1U << MEMTRAIL_KIND_CUDA_DEVICE | 1U << MEMTRAIL_KIND_CUDA_HOST | \
		      1U << MEMTRAIL_KIND_CUDA_MANAGED | 1U << MEMTRAIL_KIND_NEURON_DEVICE | \
		      1U << MEMTRAIL_KIND_NEURON_HOST)

#define N_COLUMNS (sizeof(columns) / sizeof(columns[0]))

void topview__init(struct topview *v, enum topview_by by, int sort)
{
	memset(v, 0, sizeof(*v));
	v->by = by;
	v->sort = sort;
	v->kinds = BASE_KINDS | 1U << sort;
}

void topview__free(struct topview *v)
{
	free(v->rows);
	free(v->peaks);
	memset(v, 0, sizeof(*v));
}

void topview__begin(struct topview *v)
{
	v->n_rows = 0;
	v->n_procs = 0;
}

bool topview__rate(const struct trail_target *tt, int kind, uint64_t now_ms,
		   uint64_t window_ms, double *rate)
{
	uint64_t since = now_ms > window_ms ? now_ms - window_ms : 0, from;
	const struct trail_sample *base = NULL;
	size_t i;

	for (i = 0; i < tt->n_samples && tt->timeline[i].t_ms <= since; i++)
		base = &tt->timeline[i];
	if (base) {
		from = since;
	} else if (tt->n_samples) {
		base = &tt->timeline[0];
		from = base->t_ms;
	} else {
		return false;
	}
	if (now_ms <= from)
		return false;
	*rate = (double)(tt->current[kind] - base->level[kind]) * 1000.0 / (double)(now_ms - from);
	return true;
}

int topview__add(struct topview *v, const struct trail_target *tt, const char *group,
		 uint64_t now_ms, uint64_t window_ms)
{
	struct topview_row *r;

	if (array__grow((void **)&v->rows, &v->cap_rows, v->n_rows + 1, sizeof(*r)))
		return -ENOMEM;
	r = &v->rows[v->n_rows++];
	memset(r, 0, sizeof(*r));
	/* names as every text output shows them: no control reaches the terminal */
	if (v->by == TOPVIEW_BY_POD)
		sanitize__str(r->key, sizeof(r->key), group && group[0] ? group : "-");
	r->pid = tt->pid;
	sanitize__str(r->comm, sizeof(r->comm), tt->comm);
	sanitize__str(r->phase, sizeof(r->phase), tt->phase_name);
	r->procs = 1;
	memcpy(r->level, tt->current, sizeof(r->level));
	r->peak = tt->peak[v->sort];
	r->has_rate = topview__rate(tt, v->sort, now_ms, window_ms, &r->rate);
	v->n_procs++;
	return 0;
}

static int by_key(const void *a, const void *b)
{
	return strcmp(((const struct topview_row *)a)->key, ((const struct topview_row *)b)->key);
}

static int peak_by_key(const void *a, const void *b)
{
	return strcmp(((const struct topview_peak *)a)->key, ((const struct topview_peak *)b)->key);
}

/* The process rows of one pod (run [i, j)) folded into row i. */
static void fold(struct topview *v, size_t i, size_t j)
{
	struct topview_row *dst = &v->rows[i];
	int64_t lead = dst->level[v->sort];
	size_t m;
	int k;

	for (m = i + 1; m < j; m++) {
		const struct topview_row *r = &v->rows[m];

		for (k = 0; k < MEMTRAIL_KIND_MAX; k++)
			dst->level[k] += r->level[k];
		dst->procs += r->procs;
		/* processes peak at different times: the largest own peak is a floor */
		if (r->peak > dst->peak)
			dst->peak = r->peak;
		if (r->has_rate) {
			dst->rate = (dst->has_rate ? dst->rate : 0) + r->rate;
			dst->has_rate = true;
		}
		if (r->level[v->sort] > lead) {
			lead = r->level[v->sort];
			dst->pid = r->pid;
			memcpy(dst->comm, r->comm, sizeof(dst->comm));
			memcpy(dst->phase, r->phase, sizeof(dst->phase));
		}
	}
	if (dst->level[v->sort] > dst->peak)
		dst->peak = dst->level[v->sort];
}

/* Each pod's peak: the highest total seen at any refresh so far. */
static int remember_peaks(struct topview *v, uint64_t now_ms)
{
	size_t i, j, n_old = v->n_peaks;

	for (i = 0; i < v->n_rows; i++) {
		struct topview_row *r = &v->rows[i];
		struct topview_peak key, *p;

		snprintf(key.key, sizeof(key.key), "%s", r->key);
		p = n_old ? bsearch(&key, v->peaks, n_old, sizeof(*p), peak_by_key) : NULL;
		if (!p) {
			if (array__grow((void **)&v->peaks, &v->cap_peaks, v->n_peaks + 1,
					sizeof(*p)))
				return -ENOMEM;
			p = &v->peaks[v->n_peaks++];
			memcpy(p->key, r->key, sizeof(p->key));
			p->peak = 0;
		}
		if (r->peak > p->peak)
			p->peak = r->peak;
		r->peak = p->peak;
		p->seen_ms = now_ms;
	}
	for (i = j = 0; i < v->n_peaks; i++)
		if (v->peaks[i].seen_ms + TOPVIEW_PEAK_TTL_MS >= now_ms)
			v->peaks[j++] = v->peaks[i];
	v->n_peaks = j;
	qsort(v->peaks, v->n_peaks, sizeof(*v->peaks), peak_by_key);
	return 0;
}

static int sort_kind;

static int by_level_desc(const void *a, const void *b)
{
	const struct topview_row *x = a, *y = b;
	int64_t lx = x->level[sort_kind], ly = y->level[sort_kind];

	if (lx != ly)
		return lx < ly ? 1 : -1;
	if (x->key[0] || y->key[0])
		return strcmp(x->key, y->key);
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

int topview__end(struct topview *v, uint64_t now_ms)
{
	size_t i, j, n;
	int k;

	if (v->by == TOPVIEW_BY_POD) {
		qsort(v->rows, v->n_rows, sizeof(*v->rows), by_key);
		for (i = n = 0; i < v->n_rows; i = j) {
			for (j = i + 1; j < v->n_rows && !strcmp(v->rows[j].key, v->rows[i].key); j++)
				;
			fold(v, i, j);
			if (n != i)
				v->rows[n] = v->rows[i];
			n++;
		}
		v->n_rows = n;
		if (remember_peaks(v, now_ms))
			return -ENOMEM;
	}
	sort_kind = v->sort;
	qsort(v->rows, v->n_rows, sizeof(*v->rows), by_level_desc);
	v->kinds = BASE_KINDS | 1U << v->sort;
	for (i = 0; i < v->n_rows; i++)
		for (k = 0; k < MEMTRAIL_KIND_MAX; k++)
			if ((DEVICE_KINDS & 1U << k) && v->rows[i].level[k])
				v->kinds |= 1U << k;
	return 0;
}

const char *topview__bytes(char *buf, size_t len, int64_t bytes)
{
	static const char units[] = "KMGTPE";
	const char *sign = bytes < 0 ? "-" : "";
	double x = fabs((double)bytes);
	int u = -1;

	if (!bytes) {
		snprintf(buf, len, "0");
		return buf;
	}
	/* three significant digits at most: a column of 6 characters */
	while (x >= 1023.5 && u < 5) {
		x /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%s%.0fB", sign, x);
	else
		snprintf(buf, len, x < 9.995 ? "%s%.2f%c" : x < 99.95 ? "%s%.1f%c" : "%s%.0f%c",
			 sign, x, units[u]);
	return buf;
}

const char *topview__rate_text(char *buf, size_t len, double rate)
{
	char b[16];

	if (fabs(rate) < 0.5) {
		snprintf(buf, len, "0/s");
		return buf;
	}
	topview__bytes(b, sizeof(b), (int64_t)llround(fabs(rate)));
	snprintf(buf, len, "%c%s/s", rate < 0 ? '-' : '+', b);
	return buf;
}

static unsigned kind_columns(uint32_t kinds)
{
	return __builtin_popcount(kinds);
}

/* Width of everything but the flexible columns (PHASE, and POD in the pod view). */
static unsigned fixed_width(const struct topview *v, uint32_t kinds)
{
	unsigned w = (kind_columns(kinds) + 2) * (1 + NUM_W);

	return w + (v->by == TOPVIEW_BY_POD ? 1 + PROCS_W + 1 : PID_W + 1 + COMM_W + 1);
}

static unsigned longest(const struct topview *v, bool phase, unsigned least)
{
	unsigned n = least;
	size_t i;

	for (i = 0; i < v->n_rows; i++) {
		size_t l = strlen(phase ? v->rows[i].phase : v->rows[i].key);

		if (l > n)
			n = l;
	}
	return n;
}

void topview__layout(const struct topview *v, unsigned width, struct topview_layout *l)
{
	bool pod = v->by == TOPVIEW_BY_POD;
	unsigned need = pod ? POD_MIN + PHASE_MIN : PHASE_MIN, avail, extra;
	size_t i;

	memset(l, 0, sizeof(*l));
	l->width = width;
	l->kinds = v->kinds;
	if (!width) {
		/* not a terminal: nothing is cut */
		l->phase = longest(v, true, 5);
		l->key = pod ? longest(v, false, 3) : PID_W;
		return;
	}
	for (i = 0; i < sizeof(drop_order) / sizeof(drop_order[0]); i++) {
		if (fixed_width(v, l->kinds) + need <= width)
			break;
		if (drop_order[i] != v->sort)
			l->kinds &= ~(1U << drop_order[i]);
	}
	avail = fixed_width(v, l->kinds) < width ? width - fixed_width(v, l->kinds) : 0;
	if (!pod) {
		l->key = PID_W;
		l->phase = avail < PHASE_MIN ? PHASE_MIN : avail > PHASE_MAX ? PHASE_MAX : avail;
		return;
	}
	/* the pod's name first, then its phase */
	l->key = POD_MIN;
	l->phase = PHASE_MIN;
	extra = avail > need ? avail - need : 0;
	if (extra) {
		unsigned k = extra < POD_MAX - POD_MIN ? extra : POD_MAX - POD_MIN;

		l->key += k;
		extra -= k;
		l->phase += extra < PHASE_MAX - PHASE_MIN ? extra : PHASE_MAX - PHASE_MIN;
	}
}

struct line {
	char *buf;
	size_t len, n;
};

static void put(struct line *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct line *o, const char *fmt, ...)
{
	va_list ap;
	int w;

	if (o->n >= o->len)
		return;
	va_start(ap, fmt);
	w = vsnprintf(o->buf + o->n, o->len - o->n, fmt, ap);
	va_end(ap);
	if (w > 0)
		o->n = o->n + w < o->len ? o->n + w : o->len - 1;
}

/* The end of a line: cut to the screen's width. */
static void cut(const struct topview_layout *l, char *buf)
{
	if (l->width && strlen(buf) > l->width)
		buf[l->width] = '\0';
}

static void kinds_part(struct line *o, const struct topview_layout *l,
		       const struct topview_row *r)
{
	char b[16];
	size_t c;

	for (c = 0; c < N_COLUMNS; c++) {
		if (!(l->kinds & 1U << columns[c].kind))
			continue;
		if (r)
			put(o, " %*s", NUM_W, topview__bytes(b, sizeof(b), r->level[columns[c].kind]));
		else
			put(o, " %*s", NUM_W, columns[c].head);
	}
}

void topview__header(const struct topview *v, const struct topview_layout *l, char *buf,
		     size_t len)
{
	struct line o = { buf, len, 0 };

	buf[0] = '\0';
	if (v->by == TOPVIEW_BY_POD)
		put(&o, "%-*s %*s %-*s", (int)l->key, "POD", PROCS_W, "PROCS", (int)l->phase, "PHASE");
	else
		put(&o, "%*s %-*s %-*s", PID_W, "PID", COMM_W, "COMM", (int)l->phase, "PHASE");
	kinds_part(&o, l, NULL);
	put(&o, " %*s %*s", NUM_W, "PEAK", NUM_W, "TREND");
	cut(l, buf);
}

void topview__line(const struct topview *v, const struct topview_layout *l, size_t i,
		   char *buf, size_t len)
{
	const struct topview_row *r = &v->rows[i];
	struct line o = { buf, len, 0 };
	char peak[16], trend[24];

	buf[0] = '\0';
	if (v->by == TOPVIEW_BY_POD)
		put(&o, "%-*.*s %*u %-*.*s", (int)l->key, (int)l->key, r->key, PROCS_W, r->procs,
		    (int)l->phase, (int)l->phase, r->phase);
	else
		put(&o, "%*u %-*.*s %-*.*s", PID_W, r->pid, COMM_W, COMM_W, r->comm,
		    (int)l->phase, (int)l->phase, r->phase);
	kinds_part(&o, l, r);
	put(&o, " %*s %*s", NUM_W, topview__bytes(peak, sizeof(peak), r->peak), NUM_W,
	    r->has_rate ? topview__rate_text(trend, sizeof(trend), r->rate) : "-");
	cut(l, buf);
}
