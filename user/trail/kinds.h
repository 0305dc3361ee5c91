/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
#ifndef MEMTRAIL_KINDS_H
#define MEMTRAIL_KINDS_H

#include <stdint.h>
#include "memtrail.h"

/* Stable name of a kind, as written in trails; NULL when out of range. */
const char *kind__name(int kind);
/* Kind of a name, or -1. */
int kind__from_name(const char *name);
/* Kinds that have a source in this build (bit per enum memtrail_kind). */
uint32_t kind__sourced(void);
/* The accelerator kinds. */
uint32_t kind__device(void);

#endif
