// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "container.h"
#include "format.h"
#include "kinds.h"
#include "phase.h"
#include "sanitize.h"
#include "table.h"

/*
 * Every string from the trail is shown through sanitize.h: a trail is
 * anyone's file, and names in it (comm, phases, cgroups, frames) come from
 * the workloads traced.
 */
#define NAME_LEN 256	/* a name as shown: longer ones are cut */

static const char *exit_text(char *buf, size_t len, const struct trail_target *tt)
{
	if (!tt->exited)
		snprintf(buf, len, "running");
	else if (tt->exit_signal)
		snprintf(buf, len, "signal %d", tt->exit_signal);
	else
		snprintf(buf, len, "exit %d", tt->exit_code);
	return buf;
}

/* "device memory: cuda_device 80.0 GiB on device 1, 80.0 GiB on device 0" */
static void print_device_limits(FILE *f, const struct trail_target *tt)
{
	char size[32];
	uint32_t i;

	for (i = 0; i < tt->n_dev_limits; i++) {
		const struct trail_device_limit *l = &tt->dev_limits[i];

		fprintf(f, i ? ", " : "%8s  device memory: ", "");
		fprintf(f, "%s %s on device ", kind__name(l->kind),
			format__bytes(size, sizeof(size), l->bytes));
		if (l->device >= 0)
			fprintf(f, "%d", l->device);
		else
			fputc('?', f);
	}
	if (tt->n_dev_limits)
		fprintf(f, "\n");
}

/* O's string KEY as shown (sanitized, "?" when it is not a string) in BUF. */
static const char *str_field(char *buf, size_t len, json_t *o, const char *key)
{
	return sanitize__str(buf, len, json_string_value(json_object_get(o, key)));
}

/*
 * The kernel a trail was recorded on, and each feature it lacked or had
 * another way: "kernel 6.1.0-50-amd64: rss degraded, marker fallback, ...".
 * Nothing for a trail without it (older memtrail).
 */
static void print_kernel(FILE *f, const json_t *kernel)
{
	const char *release = json_string_value(json_object_get(kernel, "release"));
	json_t *fs = json_object_get(kernel, "features"), *v;
	const char *name, *state;
	char safe[NAME_LEN];
	bool first = true;

	if (!release)
		return;
	fprintf(f, "kernel %s", sanitize__str(safe, sizeof(safe), release));
	json_object_foreach(fs, name, v) {
		state = json_string_value(json_object_get(v, "state"));
		if (!state || !strcmp(state, "yes"))
			continue;
		fprintf(f, "%s%s %s", first ? ": " : ", ", sanitize__str(safe, sizeof(safe), name),
			!strcmp(state, "fallback") || !strcmp(state, "degraded") || !strcmp(state, "no")
				? state : "?");
		first = false;
	}
	fprintf(f, "%s\n", first ? ": every source as designed" : " ('memtrail features' says why)");
}

static const char *const lost_hints[MEMTRAIL_LOST_MAX] = {
	[MEMTRAIL_LOST_RINGBUF] = "events memtrail read too late (forks, execs, exits, phase "
				  "switches); levels stay exact",
	[MEMTRAIL_LOST_TARGETS] = "processes not traced: the target table was full (record with a "
				  "larger --max-targets), or one was given the pid of a process "
				  "ended moments before (memtrail had not read that end yet)",
	[MEMTRAIL_LOST_CELLS] = "level changes dropped: record with a larger --max-targets",
	[MEMTRAIL_LOST_MM] = "level changes dropped: record with a larger --max-targets",
	[MEMTRAIL_LOST_PHASE_NAMES] = "marker calls whose phase name was invalid: no phase started",
	[MEMTRAIL_LOST_DEVICE] = "device allocations not counted (the device table was full)",
	[MEMTRAIL_LOST_SITES] = "allocations not in the site lists (the site table was full); "
				"levels and phases still count them",
	[MEMTRAIL_LOST_STACKS] = "allocations whose stack did not fit the stack table: their "
				 "bytes are '[no stack]' sites; record with a larger --stacks",
	[MEMTRAIL_LOST_HEAP] = "heap allocations not counted, nor their frees (the live-allocation "
			       "table was full)",
	[MEMTRAIL_LOST_SCOPES] = "--scope entries not kept (a thread 16 deep, or the table full): "
				 "their returns resume nothing",
	[MEMTRAIL_LOST_MAPS] = "reads of a process's code mappings by BPF refused (its mmap lock "
			       "was busy): retried at its next library load; a process that ends "
			       "first can have [unknown] frames",
	[MEMTRAIL_LOST_DEEP] = "deep samples (--unwind dwarf, large mapping sections) walked by "
			       "frame pointers instead: the ring buffer had no room for their "
			       "stack copy past what it keeps for exact events; their bytes are "
			       "counted; a larger --heap-sample sends fewer",
	[MEMTRAIL_LOST_SKIPPED] = "runs of memtrail's programs the kernel skipped (the program was "
				  "already running on that CPU, its task preempted inside it: "
				  "seen on 7.3); levels catch up at the next event, a peak or a "
				  "library mapped in between can be missed",
};

/*
 * Under --overhead-budget a target whose probes never went on has no heap
 * sites: say so, and why, rather than leave an empty list unexplained.
 */
static void print_heap_windows(FILE *f, const struct trail_target *tt)
{
	const struct trail_heap *heap = tt->sites && tt->sites->has_heap ? &tt->sites->heap : NULL;

	if (!heap || heap->mode != TRAIL_HEAP_BUDGET || heap->cycles)
		return;
	fprintf(f, "%8s  heap: no probe window opened: it ran %.0f ms of CPU, and at "
		"--overhead-budget %g a window opens once its share of CPU time pays for one and "
		"for removing the probes (which takes %.0f ms here; no heap sites; --heap alone "
		"probes from the start)\n", "", heap->target_cpu_ms, heap->budget_pct, heap->close_ms);
}

void table__print_summary(FILE *f, const struct trail *t)
{
	char base[32], peak[32], cur[32], ex[32], comm[SANITIZE_LEN(MEMTRAIL_COMM_LEN)], who[512];
	uint64_t lost = 0;
	size_t i;
	int k;

	for (k = 0; k < MEMTRAIL_LOST_MAX; k++)
		lost += t->lost[k];
	fprintf(f, "%zu target%s, %.1f s, %llu event%s lost\n", t->n_targets,
		t->n_targets == 1 ? "" : "s", t->duration_ms / 1000.0,
		(unsigned long long)lost, lost == 1 ? "" : "s");
	print_kernel(f, t->kernel);
	if (!t->n_targets)
		return;
	fprintf(f, "%8s  %-16s %-10s %-13s %12s %12s %12s\n", "PID", "COMM", "EXIT", "KIND",
		"BASELINE", "PEAK", "FINAL");
	for (i = 0; i < t->n_targets; i++) {
		const struct trail_target *tt = &t->targets[i];
		bool first = true;

		for (k = 0; k < MEMTRAIL_KIND_MAX; k++) {
			if (!(t->kinds & (1U << k)))
				continue;
			/* an accelerator kind only where the target used it */
			if ((kind__device() & (1U << k)) && !tt->peak[k] && !tt->current[k])
				continue;
			if (first)
				fprintf(f, "%8u  %-16s %-10s ", tt->pid,
					sanitize__str(comm, sizeof(comm), tt->comm),
					exit_text(ex, sizeof(ex), tt));
			else
				fprintf(f, "%8s  %-16s %-10s ", "", "", "");
			fprintf(f, "%-13s %12s %12s %12s\n", kind__name(k),
				format__bytes(base, sizeof(base), tt->baseline[k]),
				format__bytes(peak, sizeof(peak), tt->peak[k]),
				format__bytes(cur, sizeof(cur), tt->current[k]));
			first = false;
		}
		print_device_limits(f, tt);
		print_heap_windows(f, tt);
		container__describe(who, sizeof(who), tt->attribution);
		if (who[0])
			fprintf(f, "%8s  %s\n", "", who);
	}
	if (lost) {
		fprintf(f, "lost:");
		for (k = 0; k < MEMTRAIL_LOST_MAX; k++)
			if (t->lost[k])
				fprintf(f, " %s=%llu", trail__lost_name(k),
					(unsigned long long)t->lost[k]);
		fprintf(f, "\n");
		/* what each loss means for the figures above, and what makes room */
		for (k = 0; k < MEMTRAIL_LOST_MAX; k++)
			if (t->lost[k] && lost_hints[k])
				fprintf(f, "  %s: %s\n", trail__lost_name(k), lost_hints[k]);
	}
}

static bool kind_active(const int64_t f[PF_FIELDS])
{
	int i;

	for (i = 0; i < PF_FIELDS; i++)
		if (f[i])
			return true;
	return false;
}

static void print_fields(FILE *f, const struct trail *t, const int64_t v[][PF_FIELDS],
			 const char *indent)
{
	char b[PF_FIELDS][32];
	int k, i;

	fprintf(f, "%s%-13s %12s %12s %12s %12s %12s %12s\n", indent, "KIND", "ALLOC", "FREED",
		"SEG_CHANGE", "SEG_PEAK", "CUM_CURRENT", "CUM_PEAK");
	for (k = 0; k < MEMTRAIL_KIND_MAX; k++) {
		if (!(t->kinds & (1U << k)) || !kind_active(v[k]))
			continue;
		for (i = 0; i < PF_FIELDS; i++)
			format__bytes(b[i], sizeof(b[i]), v[k][i]);
		fprintf(f, "%s%-13s %12s %12s %12s %12s %12s %12s\n", indent, kind__name(k),
			b[0], b[1], b[2], b[3], b[4], b[5]);
	}
}

static void print_summary_by_name(FILE *f, const struct trail *t, const struct phase_log *l)
{
	int64_t v[MEMTRAIL_KIND_MAX][PF_FIELDS];
	char name[SANITIZE_LEN(MEMTRAIL_PHASE_NAME_LEN)];
	size_t i;
	int k, j;

	fprintf(f, "  repeated phases, per invocation (mean / max):\n");
	for (i = 0; i < l->n_aggs; i++) {
		const struct phase_agg *a = &l->aggs[i];

		if (a->count < 2)
			continue;
		fprintf(f, "  %s x%llu\n", sanitize__str(name, sizeof(name), a->name),
			(unsigned long long)a->count);
		for (k = 0; k < MEMTRAIL_KIND_MAX; k++)
			for (j = 0; j < PF_FIELDS; j++)
				v[k][j] = a->total[k][j] / (int64_t)a->count;
		fprintf(f, "    mean\n");
		print_fields(f, t, v, "      ");
		fprintf(f, "    max\n");
		print_fields(f, t, a->max, "      ");
	}
}

void table__print_phases(FILE *f, const struct trail *t)
{
	char comm[SANITIZE_LEN(MEMTRAIL_COMM_LEN)], name[SANITIZE_LEN(MEMTRAIL_PHASE_NAME_LEN)];
	size_t i, j, listed = 0;

	for (i = 0; i < t->n_targets; i++) {
		const struct trail_target *tt = &t->targets[i];
		const struct phase_log *l = &tt->phases;
		size_t n = phase_log__count(l);
		bool repeated = false;

		if (n < 2 && !l->folded)
			continue;
		listed++;
		fprintf(f, "\nphases of %u (%s): %zu listed", tt->pid,
			sanitize__str(comm, sizeof(comm), tt->comm), n);
		if (l->folded)
			fprintf(f, ", %llu more folded into the summary below",
				(unsigned long long)l->folded);
		fprintf(f, "\n");
		for (j = 0; j < n; j++) {
			const struct trail_phase *p = phase_log__at(l, j);

			if (l->folded && j == l->n_first)
				fprintf(f, "  ... %llu phases folded ...\n",
					(unsigned long long)l->folded);
			fprintf(f, "  %-24s %8.3f s .. %8.3f s\n",
				sanitize__str(name, sizeof(name), p->name), p->start_ms / 1000.0,
				p->end_ms / 1000.0);
			print_fields(f, t, p->f, "    ");
		}
		for (j = 0; j < l->n_aggs; j++)
			repeated |= l->aggs[j].count > 1;
		if (repeated)
			print_summary_by_name(f, t, l);
	}
	if (listed < t->n_targets && listed)
		fprintf(f, "\n(%zu targets had a single phase: their table is the summary above)\n",
			t->n_targets - listed);
}

#define DEVICE_FAILURES_SHOWN 5	/* per kind of failure; the rest counted */

/* The call site: the first frame of a device failure's "site", or "?". */
static const char *first_site(char *buf, size_t len, json_t *ev)
{
	return sanitize__str(buf, len, json_string_value(json_array_get(json_object_get(ev, "site"),
									 0)));
}

void table__print_device_failures(FILE *f, const struct trail *t)
{
	size_t i, listed[2] = { 0, 0 }, n[2] = { 0, 0 };
	char size[32], live[32], s[6][NAME_LEN];
	json_t *ev;

	json_array_foreach(t->events, i, ev) {
		const char *type = json_string_value(json_object_get(ev, "type")) ?: "";
		bool oom = !strcmp(type, "device_oom");
		json_t *l = json_object_get(ev, "live_allocations"), *dev;

		if (!oom && strcmp(type, "device_error"))
			continue;
		n[oom]++;
		if (listed[oom] == DEVICE_FAILURES_SHOWN)
			continue;
		listed[oom]++;
		dev = json_object_get(ev, "device");
		format__bytes(size, sizeof(size), json_integer_value(json_object_get(ev, "size")));
		fprintf(f, "%s: %lld (%s) %s of %s on %s device ", oom ? "device out of memory" :
			"device call failed", json_integer_value(json_object_get(ev, "pid")),
			str_field(s[0], sizeof(s[0]), ev, "comm"),
			str_field(s[1], sizeof(s[1]), ev, "function"), size,
			str_field(s[2], sizeof(s[2]), ev, "runtime"));
		if (json_is_integer(dev))
			fprintf(f, "%lld", json_integer_value(dev));
		else
			fputc('?', f);
		fprintf(f, ": %s (%lld) in phase '%s' at %s",
			str_field(s[3], sizeof(s[3]), ev, "error"),
			json_integer_value(json_object_get(ev, "code")),
			str_field(s[4], sizeof(s[4]), ev, "phase"),
			first_site(s[5], sizeof(s[5]), ev));
		if (l) {
			format__bytes(live, sizeof(live),
				      json_integer_value(json_object_get(l, "bytes")));
			fprintf(f, "; live then: %s in %lld allocations", live,
				json_integer_value(json_object_get(l, "count")));
		}
		fputc('\n', f);
	}
	for (i = 0; i < 2; i++)
		if (n[i] > listed[i])
			fprintf(f, "(%zu more %s in the trail)\n", n[i] - listed[i],
				i ? "device out-of-memory events" : "failed device calls");
}

void table__print_verdicts(FILE *f, const struct trail *t)
{
	char line[1024], comm[SANITIZE_LEN(MEMTRAIL_COMM_LEN)];
	size_t i;

	for (i = 0; i < t->n_targets; i++) {
		const struct trail_target *tt = &t->targets[i];

		if (!tt->verdict)
			continue;
		verdict__line(line, sizeof(line), tt->verdict);
		fprintf(f, "verdict: %u (%s) killed by SIGKILL: %s\n", tt->pid,
			sanitize__str(comm, sizeof(comm), tt->comm), line);
	}
}

/* Whether a frame is inside an allocator or the C library's wrappers. */
static bool allocator_frame(const struct trail_frame *fr)
{
	static const char *const libs[] = { "libc.so", "ld-linux", "libjemalloc", "libtcmalloc",
					    "libmimalloc", "libstdc++" };
	const char *m = fr->module, *base;
	size_t i;

	if (!m)
		return false;
	base = strrchr(m, '/');
	base = base ? base + 1 : m;
	for (i = 0; i < sizeof(libs) / sizeof(libs[0]); i++)
		if (!strncmp(base, libs[i], strlen(libs[i])))
			return true;
	return false;
}

static bool python_frame(const struct trail_frame *fr)
{
	return !fr->has_address && fr->source;
}

size_t table__site_frame(const struct trail_site *site)
{
	size_t i;

	/* a Python frame (no address, a source): the user's own code */
	for (i = 0; i < site->n_frames; i++)
		if (python_frame(&site->frames[i]))
			return i;
	for (i = 0; i < site->n_frames; i++)
		if (!allocator_frame(&site->frames[i]))
			return i;
	return 0;
}

/*
 * "fn (file:line) < caller": the first frame outside the allocator, and its
 * caller; a Python frame's caller is the Python frame that called it.
 */
static void site_text(const struct trail_site *site, char *buf, size_t len)
{
	size_t i, n = site->n_frames, first = table__site_frame(site), used, shown = 0;
	bool py = first < n && python_frame(&site->frames[first]);
	char name[NAME_LEN];

	buf[0] = '\0';
	used = 0;
	for (i = first; i < n && shown < 2 && used < len; i++) {
		const char *src = site->frames[i].source;
		char unnamed[NAME_LEN];

		if (py && !python_frame(&site->frames[i]))
			continue;
		shown++;
		used += snprintf(buf + used, len - used, "%s%s", i > first ? " < " : "",
				 sanitize__str(name, sizeof(name),
					       trail_frame__name(&site->frames[i], unnamed,
								 sizeof(unnamed))));
		if (src && (i == first || py) && used < len) {
			const char *slash = strrchr(src, '/');

			used += snprintf(buf + used, len - used, " (%s)",
					 sanitize__str(name, sizeof(name), slash ? slash + 1 : src));
		}
	}
}

const char *table__frame_label(const struct trail_frame *fr, char *label, size_t len)
{
	char unnamed[512], name[1024];
	const char *src = fr->source, *slash = src ? strrchr(src, '/') : NULL;

	sanitize__str(name, sizeof(name), trail_frame__name(fr, unnamed, sizeof(unnamed)));
	snprintf(label, len, "%s%s%s%s", name, src ? " (" : "", src ? (slash ? slash + 1 : src) : "",
		 src ? ")" : "");
	format__utf8_whole(label);
	return !fr->has_address && fr->source ? "py" : "native";
}

void table__site_label(const struct trail_site *site, char *buf, size_t len)
{
	site_text(site, buf, len);
}

/* A site's phase name, "?" when the file has none. */
static const char *site_phase(const struct trail_site *site)
{
	return site->phase ?: "?";
}

/*
 * A site and the group it is listed in: its phase's sequence number, or for
 * a site of folded phases (beyond the trail's lists, kept by name) one group
 * per name after every listed phase, in the order the names first appear.
 */
struct site_ref {
	int64_t group;
	size_t idx;		/* in the list: heaviest first */
	const char *name;	/* of a folded site's phase, else NULL */
};

static int by_name(const void *a, const void *b)
{
	const struct site_ref *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int by_group(const void *a, const void *b)
{
	const struct site_ref *x = a, *y = b;

	if (x->group != y->group)
		return x->group < y->group ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* TS's sites by group, then by place in the list: sorted twice, O(n log n). */
static struct site_ref *site_groups(const struct trail_sites *ts)
{
	size_t i, j, n = ts->n, n_folded = 0;
	struct site_ref *r = calloc(n ? n : 1, sizeof(*r));

	if (!r)
		return NULL;
	for (i = 0; i < n; i++)
		if (ts->list[i].folded)
			r[n_folded++] = (struct site_ref){ .idx = i, .name = site_phase(&ts->list[i]) };
	/* folded sites first, by name: each name's group is where it first appears */
	qsort(r, n_folded, sizeof(*r), by_name);
	for (i = 0; i < n_folded; i = j)
		for (j = i; j < n_folded && !strcmp(r[j].name, r[i].name); j++)
			r[j].group = ((int64_t)1 << 32) + (int64_t)r[i].idx;
	j = n_folded;
	for (i = 0; i < n; i++)
		if (!ts->list[i].folded)
			r[j++] = (struct site_ref){ .idx = i, .group = ts->list[i].phase_seq };
	qsort(r, n, sizeof(*r), by_group);
	return r;
}

/* One line of a phase's sites: the sites whose kind and label are the same. */
struct site_row {
	int kind;
	char *text;
	uint64_t alloc, inuse;
	size_t sites;
};

static int row_by_label(const void *a, const void *b)
{
	const struct site_row *x = a, *y = b;

	return x->kind != y->kind ? (x->kind < y->kind ? -1 : 1) : strcmp(x->text, y->text);
}

static int row_by_alloc(const void *a, const void *b)
{
	const struct site_row *x = a, *y = b;

	if (x->alloc != y->alloc)
		return x->alloc > y->alloc ? -1 : 1;
	return row_by_label(a, b);
}

/*
 * Sites as lines: those whose label (the user's own frames, site_text) and
 * kind are the same are one line, their bytes summed. REFS[0..N) name them,
 * or (REFS NULL) the N first of TS. Unsorted; *OUT the number of lines; NULL
 * when out of memory.
 */
static struct site_row *site_rows(const struct trail_sites *ts, const struct site_ref *refs,
				  size_t n, size_t *out)
{
	struct site_row *rows = calloc(n ? n : 1, sizeof(*rows));
	size_t i, m = 0;

	if (!rows)
		return NULL;
	for (i = 0; i < n; i++) {
		const struct trail_site *site = &ts->list[refs ? refs[i].idx : i];
		char text[512];

		site_text(site, text, sizeof(text));
		rows[m] = (struct site_row){ .kind = site->kind, .text = strdup(text),
					     .alloc = site->alloc_bytes, .inuse = site->inuse_bytes,
					     .sites = 1 };
		if (rows[m].text)
			m++;
	}
	qsort(rows, m, sizeof(*rows), row_by_label);
	for (i = 1, n = m ? 1 : 0; i < m; i++) {
		if (!row_by_label(&rows[n - 1], &rows[i])) {
			rows[n - 1].alloc += rows[i].alloc;
			rows[n - 1].inuse += rows[i].inuse;
			rows[n - 1].sites++;
			free(rows[i].text);
		} else {
			rows[n++] = rows[i];
		}
	}
	*out = n;
	return rows;
}

static void free_rows(struct site_row *rows, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(rows[i].text);
	free(rows);
}

int table__top_site(const struct trail_sites *ts, int kind, char *label, size_t len,
		    uint64_t *inuse)
{
	struct site_row *rows;
	size_t i, n, best = SIZE_MAX;

	if (!ts || !ts->n || !(rows = site_rows(ts, NULL, ts->n, &n)))
		return -1;
	for (i = 0; i < n; i++)
		if ((kind < 0 || rows[i].kind == kind) && rows[i].kind != TRAIL_SITE_FAULTS &&
		    rows[i].inuse && (best == SIZE_MAX || rows[i].inuse > rows[best].inuse))
			best = i;
	if (best != SIZE_MAX) {
		snprintf(label, len, "%s", rows[best].text);
		*inuse = rows[best].inuse;
		kind = rows[best].kind;
	}
	free_rows(rows, n);
	return best == SIZE_MAX ? -1 : kind;
}

static int row_by_inuse(const void *a, const void *b)
{
	const struct site_row *x = a, *y = b;

	if (x->inuse != y->inuse)
		return x->inuse > y->inuse ? -1 : 1;
	return row_by_label(a, b);
}

size_t table__live_lines(const struct trail_sites *ts, struct table_line *out, size_t max)
{
	struct site_row *rows;
	size_t i, n, m = 0;

	if (!ts || !ts->n || !(rows = site_rows(ts, NULL, ts->n, &n)))
		return 0;
	qsort(rows, n, sizeof(*rows), row_by_inuse);
	for (i = 0; i < n && m < max; i++) {
		if (!rows[i].inuse || rows[i].kind == TRAIL_SITE_FAULTS)
			continue;
		out[m] = (struct table_line){ .kind = rows[i].kind, .inuse = rows[i].inuse,
					      .alloc = rows[i].alloc, .chains = rows[i].sites };
		snprintf(out[m].label, sizeof(out[m].label), "%s", rows[i].text);
		m++;
	}
	free_rows(rows, n);
	return m;
}

/* The sites REFS[0..N) of one phase, as lines (site_rows): heaviest first, TOP of them. */
static void print_site_rows(FILE *f, const struct trail_sites *ts, const struct site_ref *refs,
			    size_t n, size_t top, bool inuse)
{
	struct site_row *rows = site_rows(ts, refs, n, &n);
	size_t i;

	if (!rows) {
		fprintf(f, "    (out of memory)\n");
		return;
	}
	qsort(rows, n, sizeof(*rows), row_by_alloc);
	for (i = 0; i < n && i < top; i++) {
		char a[32], u[32], more[32] = "";

		format__bytes(a, sizeof(a), (int64_t)rows[i].alloc);
		if (!inuse && rows[i].kind == MEMTRAIL_KIND_HEAP)
			snprintf(u, sizeof(u), "-");
		else if (rows[i].kind == TRAIL_SITE_FAULTS)
			u[0] = '\0';
		else
			format__bytes(u, sizeof(u), (int64_t)rows[i].inuse);
		if (rows[i].sites > 1)
			snprintf(more, sizeof(more), " [%zu chains]", rows[i].sites);
		fprintf(f, "    %-8s %12s %12s  %s%s\n", trail_site__kind_name(rows[i].kind), a, u,
			rows[i].text, more);
	}
	if (n > top)
		fprintf(f, "    (%zu more)\n", n - top);
	free_rows(rows, n);
}

/* T's python_unread events (each a process whose Python frames were not read), in *N. */
static json_t **python_unread_events(const struct trail *t, size_t *n)
{
	json_t *ev, **out = NULL;
	size_t i, cap = 0;

	*n = 0;
	json_array_foreach(t->events, i, ev)
		if (!strcmp(json_string_value(json_object_get(ev, "type")) ?: "", "python_unread") &&
		    !array__grow((void **)&out, &cap, *n + 1, sizeof(*out)))
			out[(*n)++] = ev;
	return out;
}

/* Why TT's Python frames were not read: its event among EVS (N), or NULL where they were. */
static json_t *python_unread(json_t **evs, size_t n, const struct trail_target *tt)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (json_integer_value(json_object_get(evs[i], "pid")) == tt->pid &&
		    json_integer_value(json_object_get(evs[i], "t_ms")) >= (json_int_t)tt->start_ms)
			return evs[i];
	return NULL;
}

void table__print_sites(FILE *f, const struct trail *t, size_t top)
{
	size_t i, j, k, n_unread;
	json_t **unread = python_unread_events(t, &n_unread);

	for (i = 0; top && i < t->n_targets; i++) {
		const struct trail_target *tt = &t->targets[i];
		const struct trail_sites *ts = tt->sites;
		const struct trail_heap *heap = ts && ts->has_heap ? &ts->heap : NULL;
		bool inuse = trail_sites__inuse(ts);
		struct site_ref *refs;
		char name[NAME_LEN], why[NAME_LEN];
		json_t *ev;

		if (!ts || !ts->n)
			continue;
		fprintf(f, "\nallocation sites of %u (%s)", tt->pid,
			sanitize__str(name, sizeof(name), tt->comm));
		if (heap) {
			fprintf(f, ": heap %s", trail_heap__mode_name(heap->mode));
			if (heap->sample_bytes)
				fprintf(f, ", one stack per %llu bytes",
					(unsigned long long)heap->sample_bytes);
			if (!inuse)
				fprintf(f, ", probes on %.1f%% of the time (in use not measured)",
					100 * heap->coverage);
		}
		fputc('\n', f);
		if ((ev = python_unread(unread, n_unread, tt)))
			fprintf(f, "  its Python frames were not read: CPython %s, %s\n",
				str_field(name, sizeof(name), ev, "version"),
				str_field(why, sizeof(why), ev, "why"));
		/* phases in order; within each, heaviest first */
		refs = site_groups(ts);
		if (!refs) {
			fprintf(f, "  (out of memory)\n");
			continue;
		}
		for (j = 0; j < ts->n; j = k) {
			const struct trail_site *site = &ts->list[refs[j].idx];

			for (k = j + 1; k < ts->n && refs[k].group == refs[j].group; k++)
				;
			fprintf(f, "  %s%s\n    %-8s %12s %12s  %s\n",
				sanitize__str(name, sizeof(name), site_phase(site)),
				refs[j].name ? " (folded: phases beyond the listed ones)" : "",
				"KIND", "ALLOC", "IN_USE", "SITE");
			print_site_rows(f, ts, refs + j, k - j, top, inuse);
		}
		free(refs);
	}
	free(unread);
}
