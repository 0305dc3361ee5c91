/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * PID -> index: an open-addressing hash (linear probing, deletion by
 * backward shift, so no tombstones), for tables that find a process per
 * event and hold tens of thousands of them on a busy node. Grows at half
 * full; never shrinks below what it once held.
 */
#ifndef MEMTRAIL_PIDMAP_H
#define MEMTRAIL_PIDMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pidmap_slot {
	uint32_t pid;
	uint32_t val;		/* index + 1; 0: empty */
};

struct pidmap {
	struct pidmap_slot *slots;
	size_t cap;		/* a power of two, or 0 */
	size_t n;
};

/* The index stored for PID, or false. */
bool pidmap__get(const struct pidmap *m, uint32_t pid, size_t *index);
/* Store (or replace) PID's index; 0 or -ENOMEM (the map is unchanged then). */
int pidmap__put(struct pidmap *m, uint32_t pid, size_t index);
/* Forget PID; nothing when absent. */
void pidmap__del(struct pidmap *m, uint32_t pid);
void pidmap__free(struct pidmap *m);

#endif
