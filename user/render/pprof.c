// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * A trail's allocation sites as a gzip-compressed pprof profile. Kinds are
 * never added together (heap bytes inside mapped bytes would count twice):
 * each kind of site has its own four sample types, KIND_alloc_objects,
 * KIND_alloc_space, KIND_inuse_objects and KIND_inuse_space, and a sample
 * (one per site, labels pid, comm, phase and kind) has values only in its
 * own kind's. Functions, source lines and mappings with build IDs come from
 * memtrail's own symbolization.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "array.h"
#include "pprof.h"
#include "outfile.h"
#include "profile.pb-c.h"
#include "sanitize.h"

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__Sample Sample;
typedef Perftools__Profiles__Label Label;
typedef Perftools__Profiles__Location Location;
typedef Perftools__Profiles__Line Line;
typedef Perftools__Profiles__Function Function;
typedef Perftools__Profiles__Mapping Mapping;
typedef Perftools__Profiles__ValueType ValueType;

struct interned {
	const char *key;
	size_t id;
};

#define PPROF_KINDS (MEMTRAIL_KIND_MAX + 1)	/* the kinds and "faults" (trail_check.c checks) */
#define PPROF_VALUES 4	/* alloc_objects, alloc_space, inuse_objects, inuse_space */

struct builder {
	Profile p;
	const char *kinds[PPROF_KINDS];	/* the kinds of sites, in sample type order */
	size_t n_kinds;
	size_t cap_strings, cap_samples, cap_locations, cap_functions, cap_mappings;
	void *strings_index, *locations_index, *functions_index, *mappings_index;
	int err;
};

static int cmp_key(const void *a, const void *b)
{
	return strcmp(((const struct interned *)a)->key, ((const struct interned *)b)->key);
}

/* The id of KEY in INDEX, or 0 with *FRESH set when it is new (then it gets NEXT). */
static size_t intern(struct builder *b, void **index, const char *key, size_t next, bool *fresh)
{
	struct interned probe = { key, 0 }, *e;
	void *found = tfind(&probe, index, cmp_key);

	*fresh = false;
	if (found)
		return (*(struct interned **)found)->id;
	e = malloc(sizeof(*e));
	if (!e || !(e->key = strdup(key)) || !tsearch(e, index, cmp_key)) {
		b->err = -ENOMEM;
		return 0;
	}
	e->id = next;
	*fresh = true;
	return next;
}

/* S's index in the string table, added sanitized (sanitize.h: viewers print them raw). */
static int64_t str(struct builder *b, const char *s)
{
	bool fresh;
	size_t id = intern(b, &b->strings_index, s, b->p.n_string_table, &fresh);
	char *copy;

	if (!fresh)
		return id;
	copy = malloc(SANITIZE_LEN(strlen(s)));
	if (copy)
		sanitize__str(copy, SANITIZE_LEN(strlen(s)), s);
	if (!copy || array__grow((void **)&b->p.string_table, &b->cap_strings,
				 b->p.n_string_table + 1, sizeof(char *))) {
		free(copy);
		b->err = -ENOMEM;
		return 0;
	}
	b->p.string_table[b->p.n_string_table++] = copy;
	return id;
}

static uint64_t mapping(struct builder *b, const char *module, const char *build_id)
{
	bool fresh;
	size_t id = intern(b, &b->mappings_index, module, b->p.n_mapping + 1, &fresh);
	Mapping *m;

	if (!fresh)
		return id;
	if (array__grow((void **)&b->p.mapping, &b->cap_mappings, b->p.n_mapping + 1,
			sizeof(Mapping *)) || !(m = calloc(1, sizeof(*m)))) {
		b->err = -ENOMEM;
		return 0;
	}
	perftools__profiles__mapping__init(m);
	m->id = id;
	m->filename = str(b, module);
	m->build_id = build_id ? str(b, build_id) : 0;
	/* symbolized already: pprof must not look for the files */
	m->has_functions = m->has_filenames = m->has_line_numbers = true;
	b->p.mapping[b->p.n_mapping++] = m;
	return id;
}

/* NAME as people read it, SYSTEM as the file has it (NULL: the same). */
static uint64_t function(struct builder *b, const char *name, const char *system,
			 const char *file)
{
	char key[4096 + 512];
	bool fresh;
	size_t id;
	Function *f;

	snprintf(key, sizeof(key), "%s\n%s", name, file ? file : "");
	id = intern(b, &b->functions_index, key, b->p.n_function + 1, &fresh);
	if (!fresh)
		return id;
	if (array__grow((void **)&b->p.function, &b->cap_functions, b->p.n_function + 1,
			sizeof(Function *)) || !(f = calloc(1, sizeof(*f)))) {
		b->err = -ENOMEM;
		return 0;
	}
	perftools__profiles__function__init(f);
	f->id = id;
	f->name = str(b, name);
	f->system_name = system ? str(b, system) : f->name;
	f->filename = file ? str(b, file) : 0;
	b->p.function[b->p.n_function++] = f;
	return id;
}

/* A location per distinct (pid, frame): addresses are per process. */
static uint64_t location(struct builder *b, uint32_t pid, const struct trail_frame *fr)
{
	const char *fn = fr->function, *src = fr->source;
	char key[512], addr[32], file[4096], unnamed[512];
	long line_no = 0;
	bool fresh;
	size_t id;
	Location *l;
	Line *line;
	char *colon;

	if (fr->has_address)
		snprintf(addr, sizeof(addr), "0x%" PRIx64, fr->address);
	/* a frame without an address (Python's) is its function at its line */
	snprintf(key, sizeof(key), "%u %s %s %s", pid, fr->has_address ? addr : "?", fn ? fn : "?",
		 !fr->has_address && src ? src : "");
	id = intern(b, &b->locations_index, key, b->p.n_location + 1, &fresh);
	if (!fresh)
		return id;
	l = calloc(1, sizeof(*l));
	line = calloc(1, sizeof(*line));
	if (l)
		perftools__profiles__location__init(l);
	if (line)
		perftools__profiles__line__init(line);
	if (!l || !line || !(l->line = calloc(1, sizeof(Line *))) ||
	    array__grow((void **)&b->p.location, &b->cap_locations, b->p.n_location + 1,
			sizeof(Location *))) {
		if (l)
			free(l->line);
		free(l);
		free(line);
		b->err = -ENOMEM;
		return 0;
	}
	l->id = id;
	l->address = fr->has_address ? fr->address : 0;
	if (fr->module)
		l->mapping_id = mapping(b, fr->module, fr->build_id);
	file[0] = '\0';
	if (src) {
		snprintf(file, sizeof(file), "%s", src);
		colon = strrchr(file, ':');
		if (colon) {
			*colon = '\0';
			line_no = strtol(colon + 1, NULL, 10);
		}
	}
	line->function_id = function(b, trail_frame__name(fr, unnamed, sizeof(unnamed)), fr->symbol,
				     file[0] ? file : NULL);
	line->line = line_no;
	l->line[0] = line;
	l->n_line = 1;
	b->p.location[b->p.n_location++] = l;
	return id;
}

static Label *label(struct builder *b, const char *key, const char *s, int64_t num)
{
	Label *l = calloc(1, sizeof(*l));

	if (!l) {
		b->err = -ENOMEM;
		return NULL;
	}
	perftools__profiles__label__init(l);
	l->key = str(b, key);
	if (s)
		l->str = str(b, s);
	else
		l->num = num;
	return l;
}

static ValueType *value_type(struct builder *b, const char *type, const char *unit)
{
	ValueType *v = calloc(1, sizeof(*v));

	if (!v) {
		b->err = -ENOMEM;
		return NULL;
	}
	perftools__profiles__value_type__init(v);
	v->type = str(b, type);
	v->unit = str(b, unit);
	return v;
}

/* The index of KIND among the profile's kinds ("?" for a site without one). */
static size_t kind_index(const struct builder *b, const char *kind)
{
	size_t i;

	for (i = 0; i < b->n_kinds; i++)
		if (!strcmp(b->kinds[i], kind ? kind : "?"))
			return i;
	return 0;	/* not reached: every site's kind was listed first */
}

/* Note a site's kind: heap first, then mapped, then the rest as found (the last of them shared). */
static void add_kind(struct builder *b, const char *kind)
{
	static const char *const first[] = { "heap", "mapped" };
	size_t i, at;

	kind = kind ? kind : "?";
	for (i = 0; i < b->n_kinds; i++)
		if (!strcmp(b->kinds[i], kind))
			return;
	if (b->n_kinds == PPROF_KINDS) {
		b->err = -E2BIG;
		return;
	}
	for (at = b->n_kinds; at > 0; at--) {
		size_t rank_new = 2, rank_old = 2;

		for (i = 0; i < 2; i++) {
			rank_new = !strcmp(kind, first[i]) ? i : rank_new;
			rank_old = !strcmp(b->kinds[at - 1], first[i]) ? i : rank_old;
		}
		if (rank_old <= rank_new)
			break;
		b->kinds[at] = b->kinds[at - 1];
	}
	b->kinds[at] = kind;
	b->n_kinds++;
}

/* SITE of TT as a sample, its values times SIGN (-1: a diff's base). */
static void add_site(struct builder *b, const struct trail_target *tt,
		     const struct trail_site *site, bool inuse, int sign)
{
	const char *kind = trail_site__kind_name(site->kind);
	Sample *s = calloc(1, sizeof(*s));
	int64_t *v;
	size_t i;

	if (s)
		perftools__profiles__sample__init(s);
	if (!s || !(s->value = calloc(b->n_kinds * PPROF_VALUES, sizeof(int64_t))) ||
	    !(s->location_id = calloc(site->n_frames + 1, sizeof(uint64_t))) ||
	    !(s->label = calloc(4, sizeof(Label *))) ||
	    array__grow((void **)&b->p.sample, &b->cap_samples, b->p.n_sample + 1,
			sizeof(Sample *))) {
		if (s) {
			free(s->value);
			free(s->location_id);
			free(s->label);
		}
		free(s);
		b->err = -ENOMEM;
		return;
	}
	for (i = 0; i < site->n_frames; i++)
		s->location_id[s->n_location_id++] = location(b, tt->pid, &site->frames[i]);
	s->n_value = b->n_kinds * PPROF_VALUES;
	v = s->value + kind_index(b, kind) * PPROF_VALUES;
	v[0] = sign * llround(site->alloc_objects);
	v[1] = sign * (int64_t)site->alloc_bytes;
	if (inuse) {
		v[2] = sign * llround(site->inuse_objects);
		v[3] = sign * (int64_t)site->inuse_bytes;
	}
	s->label[s->n_label++] = label(b, "pid", NULL, tt->pid);
	s->label[s->n_label++] = label(b, "comm", tt->comm, 0);
	s->label[s->n_label++] = label(b, "phase", site->phase, 0);
	s->label[s->n_label++] = label(b, "kind", kind, 0);
	b->p.sample[b->p.n_sample++] = s;
}

static void free_tree(void *p)
{
	struct interned *e = p;

	free((char *)e->key);
	free(e);
}

static void builder_free(struct builder *b)
{
	size_t i;

	for (i = 0; i < b->p.n_string_table; i++)
		free(b->p.string_table[i]);
	free(b->p.string_table);
	for (i = 0; i < b->p.n_sample; i++) {
		Sample *s = b->p.sample[i];
		size_t j;

		for (j = 0; j < s->n_label; j++)
			free(s->label[j]);
		free(s->label);
		free(s->value);
		free(s->location_id);
		free(s);
	}
	free(b->p.sample);
	for (i = 0; i < b->p.n_location; i++) {
		free(b->p.location[i]->line[0]);
		free(b->p.location[i]->line);
		free(b->p.location[i]);
	}
	free(b->p.location);
	for (i = 0; i < b->p.n_function; i++)
		free(b->p.function[i]);
	free(b->p.function);
	for (i = 0; i < b->p.n_mapping; i++)
		free(b->p.mapping[i]);
	free(b->p.mapping);
	for (i = 0; i < b->p.n_sample_type; i++)
		free(b->p.sample_type[i]);
	free(b->p.sample_type);
	free(b->p.comment);
	tdestroy(b->strings_index, free_tree);
	tdestroy(b->locations_index, free_tree);
	tdestroy(b->functions_index, free_tree);
	tdestroy(b->mappings_index, free_tree);
}

struct gz_data {
	const uint8_t *buf;
	size_t len;
};

static int fill_gz(int fd, void *ctx)
{
	const struct gz_data *d = ctx;
	int dfd = dup(fd), err = 0;
	gzFile gz = dfd >= 0 ? gzdopen(dfd, "wb9") : NULL;

	if (!gz) {
		err = dfd >= 0 ? -ENOMEM : -errno;
		if (dfd >= 0)
			close(dfd);
		return err;
	}
	if (d->len && gzwrite(gz, d->buf, d->len) != (int)d->len)
		err = -EIO;
	if (gzclose(gz) != Z_OK && !err)
		err = -EIO;
	return err;
}

static int write_gz(const char *path, const uint8_t *buf, size_t len)
{
	struct gz_data d = { buf, len };

	return outfile__write(path, fill_gz, &d);
}

/*
 * The profile of the sites of N trails, each's values times SIGNS[i], into
 * PATH; the first trail's duration. A diff is NEW's sites and BASE's
 * negated, as go tool pprof -diff_base makes it.
 */
static int write_profile(const struct trail *const *ts, const int *signs, size_t n,
			 const char *path, size_t *n_samples)
{
	const struct trail *t = ts[0];
	struct builder b = { 0 };
	bool inuse = true;
	char def[128];
	uint8_t *buf;
	size_t i, j, k, len;
	int err;

	perftools__profiles__profile__init(&b.p);
	str(&b, "");	/* string 0 is the empty string */
	for (k = 0; k < n; k++)
		for (i = 0; i < ts[k]->n_targets; i++)
			if (!trail_sites__inuse(ts[k]->targets[i].sites))
				inuse = false;
	for (k = 0; k < n; k++) {
		for (i = 0; i < ts[k]->n_targets; i++) {
			const struct trail_sites *st = ts[k]->targets[i].sites;

			for (j = 0; st && j < st->n; j++)
				add_kind(&b, trail_site__kind_name(st->list[j].kind));
		}
	}
	if (!b.n_kinds)
		add_kind(&b, "heap");	/* no sites: an empty profile of the usual kind */
	b.p.sample_type = calloc(b.n_kinds * PPROF_VALUES, sizeof(ValueType *));
	if (b.err || !b.p.sample_type) {
		builder_free(&b);
		return b.err ? b.err : -ENOMEM;
	}
	for (i = 0; i < b.n_kinds; i++) {
		static const char *const values[PPROF_VALUES][2] = {
			{ "alloc_objects", "count" }, { "alloc_space", "bytes" },
			{ "inuse_objects", "count" }, { "inuse_space", "bytes" },
		};
		char name[128];

		for (j = 0; j < PPROF_VALUES; j++) {
			snprintf(name, sizeof(name), "%s_%s", b.kinds[i], values[j][0]);
			b.p.sample_type[b.p.n_sample_type++] = value_type(&b, name, values[j][1]);
		}
	}
	/* the first kind's (heap where there is heap): never a sum of kinds */
	snprintf(def, sizeof(def), "%s_%s", b.kinds[0], inuse ? "inuse_space" : "alloc_space");
	b.p.default_sample_type = str(&b, def);
	if (t->duration_ms > INT64_MAX / 1000000) {	/* only a made-up file has it */
		builder_free(&b);
		return -ERANGE;
	}
	b.p.duration_nanos = (int64_t)t->duration_ms * 1000000;
	b.p.comment = calloc(2, sizeof(int64_t));
	if (b.p.comment && !inuse)
		b.p.comment[b.p.n_comment++] =
			str(&b, "heap probes ran under an overhead budget: in-use figures were "
				"not measured");
	if (b.p.comment && n > 1)
		b.p.comment[b.p.n_comment++] =
			str(&b, "what changed: the new trail's sites, and the base trail's with "
				"their values negated (as go tool pprof -diff_base)");
	for (k = 0; k < n; k++) {
		for (i = 0; i < ts[k]->n_targets; i++) {
			const struct trail_target *tt = &ts[k]->targets[i];

			for (j = 0; tt->sites && j < tt->sites->n; j++)
				add_site(&b, tt, &tt->sites->list[j],
					 trail_sites__inuse(tt->sites), signs[k]);
		}
	}
	if (b.err) {
		builder_free(&b);
		return b.err;
	}
	*n_samples = b.p.n_sample;
	len = perftools__profiles__profile__get_packed_size(&b.p);
	buf = malloc(len ? len : 1);
	if (!buf) {
		builder_free(&b);
		return -ENOMEM;
	}
	perftools__profiles__profile__pack(&b.p, buf);
	err = write_gz(path, buf, len);
	free(buf);
	builder_free(&b);
	return err;
}

int pprof__write(const struct trail *t, const char *path, size_t *n_samples)
{
	static const int sign = 1;

	return write_profile(&t, &sign, 1, path, n_samples);
}

int pprof__write_diff(const struct trail *base, const struct trail *new, const char *path,
		      size_t *n_samples)
{
	const struct trail *ts[2] = { new, base };
	static const int signs[2] = { 1, -1 };

	return write_profile(ts, signs, 2, path, n_samples);
}
