// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* report --diff BASE NEW: what grew and what shrank (diff.h). */
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "format.h"
#include "kinds.h"
#include "sanitize.h"
#include "table.h"

enum side { BASE, NEW };

/* O[KEY], made an object when missing. */
static json_t *child(json_t *o, const char *key)
{
	json_t *c = json_object_get(o, key);

	if (!c) {
		c = json_object();
		json_object_set_new(o, key, c);
	}
	return c;
}

/* O[KEY][SIDE] += V (or the larger of them, MAX). */
static void add(json_t *o, const char *key, enum side side, json_int_t v, bool max)
{
	json_t *c = child(o, key);
	const char *name = side == BASE ? "base" : "new";
	json_int_t was = json_integer_value(json_object_get(c, name));

	json_object_set_new(c, name, json_integer(max ? (v > was ? v : was) : was + v));
}

/* A frame as chains are matched: its name and line, or its file and offset; never its address. */
static void frame_key(const struct trail_frame *fr, char *buf, size_t len)
{
	char unnamed[512];
	const char *mod = fr->module ? strrchr(fr->module, '/') : NULL;

	if (fr->source)
		snprintf(buf, len, "%s (%s)", trail_frame__name(fr, unnamed, sizeof(unnamed)),
			 fr->source);
	else if (fr->function && fr->function[0] != '[')
		snprintf(buf, len, "%s", trail_frame__name(fr, unnamed, sizeof(unnamed)));
	else if (fr->module)
		snprintf(buf, len, "%s+0x%llx", mod ? mod + 1 : fr->module,
			 (unsigned long long)fr->offset);
	else
		snprintf(buf, len, "%s", fr->function ? fr->function : "?");
}

/* S's chain as the page draws it: [label, type], outermost first. */
static json_t *page_frames(const struct trail_site *s)
{
	json_t *f = json_array();
	char label[1300];
	const char *type;
	size_t j;

	for (j = s->n_frames; f && j--;) {
		type = table__frame_label(&s->frames[j], label, sizeof(label));
		json_array_append_new(f, json_pack("[s, s]", label, type));
	}
	return f;
}

static void add_sites(json_t *sites, const struct trail_target *tt, enum side side, bool page)
{
	char key[8192], frame[1024], label[512];
	size_t i, j, used;

	for (i = 0; tt->sites && i < tt->sites->n; i++) {
		const struct trail_site *s = &tt->sites->list[i];
		json_t *c, *chain = json_array();

		used = (size_t)snprintf(key, sizeof(key), "%s", trail_site__kind_name(s->kind));
		for (j = 0; j < s->n_frames; j++) {
			frame_key(&s->frames[j], frame, sizeof(frame));
			json_array_append_new(chain, sanitize__json(frame));
			if (used < sizeof(key))
				used += (size_t)snprintf(key + used, sizeof(key) - used, "\n%s", frame);
		}
		format__utf8_whole(key);
		c = child(sites, key);
		if (!json_object_get(c, "chain")) {
			table__site_label(s, label, sizeof(label));
			json_object_set_new(c, "kind", json_string(trail_site__kind_name(s->kind)));
			json_object_set_new(c, "site", json_string(label));
			json_object_set(c, "chain", chain);
			if (page)
				json_object_set_new(c, "f", page_frames(s));
		}
		json_decref(chain);
		add(c, "alloc_bytes", side, (json_int_t)s->alloc_bytes, false);
		add(c, "inuse_bytes", side, (json_int_t)s->inuse_bytes, false);
	}
}

/* One side's targets into GROUPS, keyed by command line (comm where none). */
static void gather(json_t *groups, const struct trail *t, enum side side, bool page)
{
	char key[1024], name[128];
	size_t i, p, n;
	int k;

	for (i = 0; i < t->n_targets; i++) {
		const struct trail_target *tt = &t->targets[i];
		json_t *g;

		sanitize__str(key, sizeof(key), tt->cmdline ? tt->cmdline : tt->comm);
		g = child(groups, key);
		json_object_set_new(g, side == BASE ? "in_base" : "in_new", json_true());
		for (k = 0; k < MEMTRAIL_KIND_MAX; k++)
			if (t->kinds & (1U << k))
				add(child(g, "peaks"), kind__name(k), side, tt->peak[k], true);
		n = phase_log__count(&tt->phases);
		for (p = 0; p < n; p++) {
			const struct trail_phase *ph = phase_log__at(&tt->phases, p);

			for (k = 0; k < MEMTRAIL_KIND_MAX; k++) {
				if (!(t->kinds & (1U << k)))
					continue;
				snprintf(key, sizeof(key), "%s\n%s",
					 sanitize__str(name, sizeof(name), ph->name), kind__name(k));
				add(child(g, "phases"), key, side, ph->f[k][PF_SEGMENT_PEAK], true);
			}
		}
		add_sites(child(g, "sites"), tt, side, page);
	}
}

/* {base, new, delta} of C (a missing side is 0); false when nothing changed. */
static bool delta_of(json_t *c, const char *field, json_t **out)
{
	json_t *f = field ? json_object_get(c, field) : c;
	json_int_t b = json_integer_value(json_object_get(f, "base"));
	json_int_t n = json_integer_value(json_object_get(f, "new"));

	*out = json_pack("{s:I, s:I, s:I}", "base", b, "new", n, "delta", n - b);
	return b != n;
}

static json_int_t size_of(json_t *o)
{
	json_t *a = json_object_get(o, "alloc_bytes"), *d = a ? a : o;
	json_int_t v = json_integer_value(json_object_get(d, "delta"));

	if (a) {
		json_int_t u = json_integer_value(json_object_get(json_object_get(o, "inuse_bytes"),
								  "delta"));

		v = llabs(v) > llabs(u) ? v : u;
	}
	return v < 0 ? -v : v;
}

static int by_size(const void *a, const void *b)
{
	json_int_t x = size_of(*(json_t *const *)a), y = size_of(*(json_t *const *)b);

	return x < y ? 1 : x > y ? -1 : 0;
}

/* ARR's entries (its reference taken) in CMP's order (TOP: at most that many; 0 all). */
static json_t *sorted(json_t *arr, size_t top, int (*cmp)(const void *, const void *))
{
	size_t n = json_array_size(arr), i;
	json_t **v = calloc(n ? n : 1, sizeof(*v)), *out = json_array();

	for (i = 0; v && i < n; i++)
		v[i] = json_array_get(arr, i);
	if (v)
		qsort(v, n, sizeof(*v), cmp);
	for (i = 0; v && i < n && (!top || i < top); i++)
		json_array_append(out, v[i]);
	free(v);
	json_decref(arr);
	return out;
}

/* The largest change of a target's peaks and sites. */
static json_int_t target_size(json_t *t)
{
	json_int_t m = 0, v;
	const char *lists[] = { "peaks", "sites" };
	json_t *e;
	size_t i, j;

	for (i = 0; i < 2; i++)
		json_array_foreach(json_object_get(t, lists[i]), j, e)
			if ((v = size_of(e)) > m)
				m = v;
	return m;
}

static int by_target_size(const void *a, const void *b)
{
	json_int_t x = target_size(*(json_t *const *)a), y = target_size(*(json_t *const *)b);

	return x < y ? 1 : x > y ? -1 : 0;
}

json_t *diff__json(const struct trail *base, const struct trail *new, size_t top, bool page)
{
	json_t *groups = json_object(), *targets = json_array(), *g, *v, *d;
	const char *key, *k2;

	gather(groups, base, BASE, page);
	gather(groups, new, NEW, page);
	json_object_foreach(groups, key, g) {
		json_t *peaks = json_array(), *phases = json_array(), *sites = json_array();

		json_object_foreach(json_object_get(g, "peaks"), k2, v)
			if (delta_of(v, NULL, &d) || json_integer_value(json_object_get(d, "new"))) {
				json_object_set_new(d, "kind", json_string(k2));
				json_array_append_new(peaks, d);
			} else {
				json_decref(d);
			}
		json_object_foreach(json_object_get(g, "phases"), k2, v) {
			if (!delta_of(v, NULL, &d)) {
				json_decref(d);
				continue;
			}
			json_object_set_new(d, "phase", json_stringn(k2, strcspn(k2, "\n")));
			json_object_set_new(d, "kind", json_string(strchr(k2, '\n') + 1));
			json_array_append_new(phases, d);
		}
		json_object_foreach(json_object_get(g, "sites"), k2, v) {
			json_t *a, *u;
			bool changed = delta_of(v, "alloc_bytes", &a);

			changed |= delta_of(v, "inuse_bytes", &u);
			if (!changed) {
				json_decref(a);
				json_decref(u);
				continue;
			}
			json_array_append_new(sites, json_pack("{s:O, s:O, s:o, s:o, s:O, s:O*}",
				"kind", json_object_get(v, "kind"), "site", json_object_get(v, "site"),
				"alloc_bytes", a, "inuse_bytes", u, "chain", json_object_get(v, "chain"),
				"f", json_object_get(v, "f")));
		}
		json_array_append_new(targets, json_pack("{s:s, s:b, s:b, s:o, s:o, s:o}",
			"target", key, "in_base", json_is_true(json_object_get(g, "in_base")),
			"in_new", json_is_true(json_object_get(g, "in_new")),
			"peaks", sorted(peaks, 0, by_size), "phases", sorted(phases, 0, by_size),
			"sites", sorted(sites, top, by_size)));
	}
	json_decref(groups);
	return json_pack("{s:i, s:s, s:o}", "memtrail", MEMTRAIL_TRAIL_VERSION, "type", "diff",
			 "targets", sorted(targets, 0, by_target_size));
}

static void signed_bytes(char *buf, size_t len, json_int_t v)
{
	char b[32];

	format__bytes(b, sizeof(b), v < 0 ? -v : v);
	snprintf(buf, len, "%s%s", v < 0 ? "-" : v > 0 ? "+" : "", b);
}

static void row(FILE *f, const char *what, json_t *d)
{
	char b[32], n[32], delta[40];

	format__bytes(b, sizeof(b), json_integer_value(json_object_get(d, "base")));
	format__bytes(n, sizeof(n), json_integer_value(json_object_get(d, "new")));
	signed_bytes(delta, sizeof(delta), json_integer_value(json_object_get(d, "delta")));
	fprintf(f, "    %-28s %12s %12s %12s\n", what, b, n, delta);
}

static bool big(json_t *e, json_int_t min)
{
	return size_of(e) >= min;
}

void diff__print(FILE *f, json_t *d, json_int_t min)
{
	json_t *t, *e;
	size_t i, j, quiet = 0;
	char m[32];

	json_array_foreach(json_object_get(d, "targets"), i, t) {
		bool b = json_is_true(json_object_get(t, "in_base"));
		bool n = json_is_true(json_object_get(t, "in_new"));
		char what[300];

		if (target_size(t) < min) {
			quiet++;
			continue;
		}

		fprintf(f, "%s%s\n", json_string_value(json_object_get(t, "target")),
			b && n ? "" : b ? "  (only in BASE)" : "  (only in NEW)");
		fprintf(f, "    %-28s %12s %12s %12s\n", "PEAK", "BASE", "NEW", "CHANGE");
		json_array_foreach(json_object_get(t, "peaks"), j, e)
			if (big(e, min))
				row(f, json_string_value(json_object_get(e, "kind")), e);
		if (json_array_size(json_object_get(t, "phases"))) {
			fprintf(f, "    %-28s\n", "PHASE SEGMENT PEAK");
			json_array_foreach(json_object_get(t, "phases"), j, e) {
				if (!big(e, min))
					continue;
				snprintf(what, sizeof(what), "%s %s",
					 json_string_value(json_object_get(e, "phase")),
					 json_string_value(json_object_get(e, "kind")));
				row(f, what, e);
			}
		}
		if (!json_array_size(json_object_get(t, "sites")))
			continue;
		fprintf(f, "    %-12s %12s %12s  %s\n", "SITE KIND", "ALLOCATED", "IN USE",
			"SITE (largest change first)");
		json_array_foreach(json_object_get(t, "sites"), j, e) {
			char a[40], u[40];

			if (!big(e, min))
				continue;
			signed_bytes(a, sizeof(a), json_integer_value(json_object_get(
				json_object_get(e, "alloc_bytes"), "delta")));
			signed_bytes(u, sizeof(u), json_integer_value(json_object_get(
				json_object_get(e, "inuse_bytes"), "delta")));
			fprintf(f, "    %-12s %12s %12s  %s\n",
				json_string_value(json_object_get(e, "kind")), a, u,
				json_string_value(json_object_get(e, "site")));
		}
	}
	format__bytes(m, sizeof(m), min);
	if (quiet)
		fprintf(f, "%zu target%s changed by less than %s (--min-change)\n", quiet,
			quiet == 1 ? "" : "s", m);
}
