/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
#ifndef MEMTRAIL_TABLE_H
#define MEMTRAIL_TABLE_H

#include <stdint.h>
#include <stdio.h>
#include "trail.h"

/* The per-target summary: peak and final per kind, exit status, lost counters. */
void table__print_summary(FILE *f, const struct trail *t);
/* Per target with more than one phase: each phase's six fields per kind, and repeats by name. */
void table__print_phases(FILE *f, const struct trail *t);
/* One line per target that died by SIGKILL: the verdict. */
void table__print_verdicts(FILE *f, const struct trail *t);
/* Device out-of-memory events and failed device calls, a line each (the first few). */
void table__print_device_failures(FILE *f, const struct trail *t);

/* Per target and phase: its TOP allocation sites by bytes allocated, and how they were taken. */
void table__print_sites(FILE *f, const struct trail *t, size_t top);

/*
 * The frame a site is named after: its first Python frame (the user's code),
 * else the first outside the allocator (libc, jemalloc, ...).
 */
size_t table__site_frame(const struct trail_site *site);
/*
 * FR as the HTML page's frames read: "fn (file:line)", the source's file
 * name alone (sanitized, cut whole); its type: "py" (a Python line) or
 * "native".
 */
const char *table__frame_label(const struct trail_frame *fr, char *label, size_t len);
/* "fn (file:line) < caller": a site as report's lists name it (sanitized). */
void table__site_label(const struct trail_site *site, char *buf, size_t len);
/* A line of sites as report lists them: one label and kind, summed over chains and phases. */
struct table_line {
	int kind;
	uint64_t inuse, alloc;
	size_t chains;
	char label[256];
};

/* TS's lines holding live bytes (faults left out), at most MAX, most first; how many. */
size_t table__live_lines(const struct trail_sites *ts, struct table_line *out, size_t max);
/*
 * The line of TS's sites (as report lists them: one per label and kind,
 * every phase) holding the most live bytes, of KIND (-1: any but faults):
 * its label into LABEL, its bytes into *INUSE. Its kind, or -1 when none
 * holds any.
 */
int table__top_site(const struct trail_sites *ts, int kind, char *label, size_t len,
		    uint64_t *inuse);

#endif
