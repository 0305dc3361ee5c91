// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The code in a snapshot: a process's allocation sites as they stand at the
 * moment it is written (the kernel's figures read then, deep chains as user
 * space keeps them), the ones holding the most live bytes, and the top one
 * said in a short phrase for the verdict line.
 */
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "kinds.h"
#include "sites.h"
#include "table.h"
#include "trail_sites.h"
#include "watch_int.h"

/* EXTRA's sites moved to the end of TS (EXTRA left empty); -1 when out of memory. */
static int take_sites(struct trail_sites *ts, struct trail_sites *extra)
{
	size_t i;

	for (i = 0; i < extra->n; i++) {
		struct trail_site *site = trail_sites__add(ts);

		if (!site)
			return -1;	/* those left stay EXTRA's, freed with it */
		*site = extra->list[i];
		memset(&extra->list[i], 0, sizeof(extra->list[i]));
	}
	extra->n = 0;
	return 0;
}

struct trail_sites *watch_sites_of(struct watch *w, const struct trail_target *tt,
				   struct trail_sites *extra, size_t *left_out)
{
	struct trail_sites *ts;

	*left_out = 0;
	if (!w->s.sites)
		return NULL;
	ts = sites__collect(w->s.sites, tt);
	if (!ts && extra && extra->n)
		ts = trail_sites__new();
	if (!ts)
		return NULL;
	if (extra && extra->n) {
		size_t i, j;

		/* EXTRA's kinds as they were then: not also as they are now */
		for (i = 0; i < ts->n; i++)
			for (j = 0; j < extra->n; j++)
				if (ts->list[i].kind == extra->list[j].kind)
					ts->list[i].inuse_bytes = 0;
		take_sites(ts, extra);
	}
	*left_out = trail_sites__keep_live(ts, SNAPSHOT_SITES);
	if (!ts->n) {
		trail_sites__free(ts);
		return NULL;
	}
	return ts;
}

json_t *watch_top_site(const struct trail_sites *ts, int kind)
{
	char label[512];
	uint64_t bytes;

	kind = table__top_site(ts, kind, label, sizeof(label), &bytes);
	if (kind < 0)
		return json_null();
	return json_pack("{s:s, s:I, s:s}", "kind", trail_site__kind_name(kind),
			 "inuse_bytes", (json_int_t)bytes, "site", label);
}

const char *watch_top_phrase(json_t *top, char *buf, size_t len)
{
	const char *site = json_string_value(json_object_get(top, "site"));
	const char *kind = json_string_value(json_object_get(top, "kind"));
	char size[32];

	if (!site || !kind) {
		buf[0] = '\0';
		return buf;
	}
	format__bytes(size, sizeof(size),
		      (int64_t)json_integer_value(json_object_get(top, "inuse_bytes")));
	snprintf(buf, len, "top site: %s, %s %s", site, size, kind);
	return buf;
}
