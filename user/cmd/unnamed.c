// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * What record says of the bytes no symbol names: per kind of site, the share
 * of its bytes at sites whose frame of interest (table__site_frame) is
 * '[unknown]' in a file, the files that hold most of it, and the Debian
 * package whose debug symbols would name them.
 */
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format.h"
#include "log.h"
#include "proc.h"
#include "sanitize.h"
#include "table.h"
#include "trail_sites.h"
#include "unnamed.h"

#define FILES_SAID 3
#define FILES_MAX 64

struct unnamed_file {
	const char *module;
	const char *build_id;
	uint64_t bytes;
};

/* Whether the file at PATH here has the build ID WANT (hex): the file the target mapped. */
static bool same_build_id(const char *path, const char *want)
{
	const unsigned char *bits;
	char hex[41];
	bool same = false;
	int fd = open(path, O_RDONLY | O_CLOEXEC), n, i;
	Elf *e;

	if (fd < 0)
		return false;
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	n = e ? (int)dwelf_elf_gnu_build_id(e, (const void **)&bits) : -1;
	if (n > 0 && n <= 20) {
		for (i = 0; i < n; i++)
			snprintf(hex + 2 * i, 3, "%02x", bits[i]);
		same = !strcmp(hex, want);
	}
	if (e)
		elf_end(e);
	close(fd);
	return same;
}

/* Whether apt's lists know package NAME. */
static bool apt_knows(const char *name)
{
	char *argv[] = { "apt-cache", "show", "--no-all-versions", (char *)name, NULL };
	char line[256];

	return proc__run_line(argv, line, sizeof(line)) == 0 && !strncmp(line, "Package:", 8);
}

/*
 * Into BUF: "; its debug symbols: PKG" where this machine's dpkg owns the
 * file (the same build) and apt knows a debug package of it (PKG-dbgsym,
 * SOURCE-dbg, PKG-dbg), else what package owns it; empty when dpkg does not.
 */
static void debug_package(const struct unnamed_file *f, char *buf, size_t len)
{
	char *query[] = { "dpkg-query", "-S", (char *)f->module, NULL };
	char line[512], source[128], cand[3][128], *colon, *comma;
	size_t i;

	buf[0] = '\0';
	if (!f->build_id || !same_build_id(f->module, f->build_id))
		return;
	/* a merged /usr: dpkg may list the file under /bin, /sbin, /lib */
	if (proc__run_line(query, line, sizeof(line)) != 0) {
		if (strncmp(f->module, "/usr/", 5))
			return;
		query[2] = (char *)f->module + 4;
		if (proc__run_line(query, line, sizeof(line)) != 0)
			return;
	}
	/* "python3.11-minimal:amd64: /usr/bin/python3.11" */
	colon = strchr(line, ':');
	comma = strchr(line, ',');
	if (!colon || (comma && comma < colon))
		return;		/* no owner, or several (diversions) */
	*colon = '\0';
	{
		char *fmt[] = { "dpkg-query", "-W", "-f=${source:Package}", line, NULL };

		if (proc__run_line(fmt, source, sizeof(source)) != 0 || !source[0])
			snprintf(source, sizeof(source), "%.100s", line);
	}
	snprintf(cand[0], sizeof(cand[0]), "%.100s-dbgsym", line);
	snprintf(cand[1], sizeof(cand[1]), "%.100s-dbg", source);
	snprintf(cand[2], sizeof(cand[2]), "%.100s-dbg", line);
	for (i = 0; i < 3; i++)
		if (apt_knows(cand[i])) {
			snprintf(buf, len, "; its debug symbols: package %.120s", cand[i]);
			return;
		}
	snprintf(buf, len, "; package %.100s (its debug symbols: %.100s-dbgsym, in Debian's "
		 "debug archive)", line, line);
}

static int by_bytes(const void *a, const void *b)
{
	const struct unnamed_file *x = a, *y = b;

	return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

static void say_kind(const struct trail *t, int kind)
{
	struct unnamed_file files[FILES_MAX];
	size_t n = 0, i, j, k;
	uint64_t total = 0, unnamed = 0;
	char msg[2048], a[32], b[32], pkg[400], name[256];
	int used;

	for (i = 0; i < t->n_targets; i++) {
		const struct trail_sites *ts = t->targets[i].sites;

		for (j = 0; ts && j < ts->n; j++) {
			const struct trail_site *site = &ts->list[j];
			const struct trail_frame *fr;

			if (site->kind != kind)
				continue;
			total += site->alloc_bytes;
			if (!site->n_frames)
				continue;
			fr = &site->frames[table__site_frame(site)];
			if (!fr->function || strcmp(fr->function, "[unknown]") || !fr->module)
				continue;
			unnamed += site->alloc_bytes;
			for (k = 0; k < n; k++)
				if (!strcmp(files[k].module, fr->module))
					break;
			if (k == n && n < FILES_MAX)
				files[n++] = (struct unnamed_file){ fr->module, fr->build_id, 0 };
			if (k < n)
				files[k].bytes += site->alloc_bytes;
		}
	}
	/* a share too small to matter is not said */
	if (!total || unnamed * 100 < total)
		return;
	qsort(files, n, sizeof(*files), by_bytes);
	format__bytes(a, sizeof(a), unnamed);
	format__bytes(b, sizeof(b), total);
	used = snprintf(msg, sizeof(msg), "%s: %s of %s allocated (%.1f%%) at sites no symbol "
			"names:", trail_site__kind_name(kind), a, b, 100.0 * unnamed / total);
	for (k = 0; k < n && k < FILES_SAID && used < (int)sizeof(msg); k++) {
		format__bytes(a, sizeof(a), files[k].bytes);
		debug_package(&files[k], pkg, sizeof(pkg));
		used += snprintf(msg + used, sizeof(msg) - used, "%s %s in %s%s", k ? ";" : "", a,
				 sanitize__str(name, sizeof(name), files[k].module), pkg);
	}
	if (n > FILES_SAID && used < (int)sizeof(msg))
		snprintf(msg + used, sizeof(msg) - used, "; and %zu more file%s", n - FILES_SAID,
			 n - FILES_SAID == 1 ? "" : "s");
	log__info("%s", msg);
}

void unnamed__say(const struct trail *t)
{
	say_kind(t, MEMTRAIL_KIND_HEAP);
	say_kind(t, MEMTRAIL_KIND_MAPPED);
}
