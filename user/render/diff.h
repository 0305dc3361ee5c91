/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * What changed between two trails: targets matched by their command line
 * (their comm where none is known), then per kind their peaks, per phase
 * and kind their segment peaks, and per site, matched by its whole chain
 * (frames' names and lines, never addresses), its bytes allocated and in
 * use; what grew and what shrank, the largest change first.
 */
#ifndef MEMTRAIL_DIFF_H
#define MEMTRAIL_DIFF_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "trail.h"

/*
 * BASE against NEW as JSON (README, "report --diff"); NULL: out of memory.
 * PAGE: each site also has "f", its chain as the HTML page draws it
 * ([label, "py" | "native"], outermost first).
 */
json_t *diff__json(const struct trail *base, const struct trail *new, size_t top, bool page);
/*
 * The same for people: a block per target that changed by MIN bytes or more,
 * its rows that did (the others counted in a closing line).
 */
void diff__print(FILE *f, json_t *d, json_int_t min);

#endif
