/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Growable arrays: one way to make room, doubling (from 16 unless told). */
#ifndef MEMTRAIL_ARRAY_H
#define MEMTRAIL_ARRAY_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Room for NEED elements of SIZE bytes in *ARR of capacity *CAP, FIRST at first; 0 or -ENOMEM. */
static inline int array__grow_from(void **arr, size_t *cap, size_t need, size_t size,
				   size_t first)
{
	size_t ncap = *cap ? *cap : first ? first : 1;
	void *p;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap *= 2;
	p = realloc(*arr, ncap * size);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

/* Room for NEED elements of SIZE bytes in *ARR of capacity *CAP; 0 or -ENOMEM. */
static inline int array__grow(void **arr, size_t *cap, size_t need, size_t size)
{
	return array__grow_from(arr, cap, need, size, 16);
}

/* qsort/bsearch order of uint32_t values. */
static inline int array__u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Whether V is among SET (N values, sorted by array__u32_cmp). */
static inline bool array__u32_has(const uint32_t *set, size_t n, uint32_t v)
{
	return bsearch(&v, set, n, sizeof(*set), array__u32_cmp) != NULL;
}

#endif
