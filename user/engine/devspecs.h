/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The runtime functions memtrail probes and their codes' names (devspecs.c). */
#ifndef MEMTRAIL_DEVSPECS_H
#define MEMTRAIL_DEVSPECS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memtrail.h"

struct dev_spec {
	const char *name;
	uint8_t op;		/* enum memtrail_dev_op */
	uint8_t kind;
	uint8_t rt;		/* enum memtrail_runtime */
	uint8_t arg;		/* the argument the op reads beyond the first three */
	bool ret;		/* needs its return seen */
	bool per_pid;		/* fires often: only per process, only until "execute" */
};

/*
 * Every function probed, by exported or .symtab name; the index is the name
 * in cookies and events. Where two names share an address the first wins.
 */
extern const struct dev_spec devspecs[];
extern const size_t devspecs_n;		/* at most MEMTRAIL_DEV_SPECS */

/* Function I's cookie: what the BPF side does at its entry and return. */
uint64_t devspecs__cookie(uint32_t i);
/* Every function's cookie into COOKIE (at most MAX); how many. */
size_t devspecs__cookies(uint64_t *cookie, size_t max);
/* Whether function IDX is the dynamic linker's hook (not a runtime's). */
bool devspecs__loader(uint32_t idx);
/* Function IDX's name ("?" when out of range). */
const char *devspecs__fn_name(uint32_t idx);
/* "cuda" or "neuron" (enum memtrail_runtime). */
const char *devspecs__runtime_name(uint32_t runtime);
/* Whether RC is RUNTIME's out-of-memory code. */
bool devspecs__is_oom(uint32_t runtime, int rc);
/* RC's name as function FN of RUNTIME returns it (the runtime API's or the driver's); NULL: unknown. */
const char *devspecs__error_name(uint32_t runtime, const char *fn, int rc);

#endif
