/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Growable arrays: one way to make room, doubling (from 16 unless told). */
#ifndef MEMTRAIL_ARRAY_H
#define MEMTRAIL_ARRAY_H

#include <errno.h>
#include <stddef.h>
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

#endif
