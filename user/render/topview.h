/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * memtrail top's table: one row per process or per pod, built from the
 * session's live targets, sorted by a kind, laid out to a width and drawn
 * as plain text lines. No terminal here: top.c decides where lines go.
 */
#ifndef MEMTRAIL_TOPVIEW_H
#define MEMTRAIL_TOPVIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "container.h"
#include "memtrail.h"
#include "trail.h"

/* "namespace/pod" at their longest */
#define TOPVIEW_KEY_LEN (2 * POD_NAME_LEN)
/* pods not seen for this long lose their remembered peak */
#define TOPVIEW_PEAK_TTL_MS 60000

enum topview_by {
	TOPVIEW_BY_PROCESS,
	TOPVIEW_BY_POD,
};

struct topview_row {
	char key[TOPVIEW_KEY_LEN];		/* the pod's label; "" for a process */
	uint32_t pid;				/* the process, or the pod's largest */
	char comm[MEMTRAIL_COMM_LEN];		/* of that process, sanitized: cut to 15 */
	char phase[MEMTRAIL_PHASE_NAME_LEN];	/* the phase that process is in */
	uint32_t procs;				/* processes in the row */
	int64_t level[MEMTRAIL_KIND_MAX];	/* bytes now, summed over the row */
	int64_t peak;				/* of the sort kind */
	double rate;				/* bytes per second of the sort kind */
	bool has_rate;				/* false while too young to tell */
};

/* A pod's highest total seen, kept across refreshes. */
struct topview_peak {
	char key[TOPVIEW_KEY_LEN];
	int64_t peak;
	uint64_t seen_ms;
};

struct topview {
	enum topview_by by;
	int sort;			/* the kind rows are sorted by */
	uint32_t kinds;			/* kinds with a column, chosen by topview__end */
	struct topview_row *rows;
	size_t n_rows, cap_rows;
	size_t n_procs;			/* processes in all rows */
	struct topview_peak *peaks;	/* by key, sorted */
	size_t n_peaks, cap_peaks;
};

/* Column widths for one screen width; what does not fit is left out. */
struct topview_layout {
	unsigned width;		/* 0: unbounded (not a terminal) */
	unsigned key;		/* PID or POD */
	unsigned phase;
	uint32_t kinds;		/* kind columns shown */
};

void topview__init(struct topview *v, enum topview_by by, int sort);
void topview__free(struct topview *v);
/* Start a refresh: no rows. */
void topview__begin(struct topview *v);
/*
 * A live target into the refresh, in the pod view under GROUP; its trend
 * from its timeline over the last WINDOW_MS. 0 or -ENOMEM.
 */
int topview__add(struct topview *v, const struct trail_target *tt, const char *group,
		 uint64_t now_ms, uint64_t window_ms);
/* End a refresh: pods merged, peaks kept, rows sorted, columns chosen. */
int topview__end(struct topview *v, uint64_t now_ms);

/*
 * Bytes per second of KIND over the last WINDOW_MS of TT's timeline (a step
 * function: the last sample at or before the window's start holds there),
 * or since its first sample when it is younger; false when it has only
 * samples taken at NOW_MS.
 */
bool topview__rate(const struct trail_target *tt, int kind, uint64_t now_ms,
		   uint64_t window_ms, double *rate);
/* Bytes in at most 6 characters: "0", "512B", "4.00K", "48.0M", "1023M", "1.50G". */
const char *topview__bytes(char *buf, size_t len, int64_t bytes);
/* A rate: "+48.0M/s", "-512K/s", "0/s". */
const char *topview__rate_text(char *buf, size_t len, double rate);

void topview__layout(const struct topview *v, unsigned width, struct topview_layout *l);
/* The column header, then row I; each at most l->width columns (0: any). */
void topview__header(const struct topview *v, const struct topview_layout *l, char *buf,
		     size_t len);
void topview__line(const struct topview *v, const struct topview_layout *l, size_t i,
		   char *buf, size_t len);

#endif
