/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The bytes of a trail's sites that no symbol names, said with what would name them. */
#ifndef MEMTRAIL_UNNAMED_H
#define MEMTRAIL_UNNAMED_H

#include "trail.h"

/*
 * Per kind of site (heap, mapped) holding 1% or more of its bytes at sites
 * that no symbol names: the share, the files, and the package whose debug
 * symbols would name them (this machine's dpkg and apt asked).
 */
void unnamed__say(const struct trail *t);

#endif
