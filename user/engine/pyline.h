/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
#ifndef MEMTRAIL_PYLINE_H
#define MEMTRAIL_PYLINE_H

#include <stddef.h>
#include <stdint.h>

/*
 * The line of the instruction at byte OFFSET of a code object whose
 * co_firstlineno is FIRSTLINENO and co_linetable LT (LEN bytes), as
 * code.co_lines() gives it; 0 where it has none (or LT is not one).
 */
int pyline__line(const unsigned char *lt, size_t len, int firstlineno, uint64_t offset);
/* The same for CPython 3.10's co_linetable (its own format: byte pairs). */
int pyline__line310(const unsigned char *lt, size_t len, int firstlineno, uint64_t offset);

#endif
