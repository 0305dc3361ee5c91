/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * What the parts of a trail share and no other module: trail.c (the model),
 * trail_json.c (the trail as a jansson tree), trail_write.c (files written
 * through a buffer, timelines streamed), trail_read.c (reading a trail back)
 * and trail_check.c (checking the parts kept as JSON).
 */
#ifndef MEMTRAIL_TRAIL_INT_H
#define MEMTRAIL_TRAIL_INT_H

#include <stdint.h>
#include <jansson.h>

#include "memtrail.h"
#include "schema.h"
#include "trail.h"

/* Flags and lengths of the schema__ checks, as the reader writes them. */
#define NEED SCHEMA_NEED
#define OR_NULL SCHEMA_NULL
#define ANY_LEN SIZE_MAX

/* Each MEMTRAIL_LOST_ reason's key in a trail's "lost" (trail.c). */
extern const char *const trail_lost_names[MEMTRAIL_LOST_MAX];

/* A trail's fields before its targets, and its "lost" object (trail_json.c). */
json_t *trail_head_json(const struct trail *t);
json_t *trail_lost_json(const struct trail *t);

/* Check V under S's path, as the reader does: 0, or -1 with the error set (trail_check.c). */
int trail_check_event(struct schema *s, json_t *ev);
/* The "snapshot" object of a watch snapshot, checked under its own key. */
int trail_check_snapshot(struct schema *s, json_t *snap);

#endif
