/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A container and pod as a trail keeps them (container.h's struct): the
 * "container" and "pod" members of a target, a verdict's holder, a
 * snapshot or a verdict file, read back with every field checked.
 */
#ifndef MEMTRAIL_ATTRIBUTION_H
#define MEMTRAIL_ATTRIBUTION_H

#include <jansson.h>

#include "container.h"
#include "schema.h"

/*
 * O's "container" and "pod" read into *OUT (NULL when both are null or
 * absent): 0, or -1 with S's error set.
 */
int attribution__from_json(struct schema *s, json_t *o, struct container_attr **out);
/* A copy of A (NULL: NULL); NULL when out of memory too. */
struct container_attr *attribution__dup(const struct container_attr *a);

#endif
