// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * CPython's location table (co_linetable, 3.11 on), read as the interpreter
 * reads it (Objects/codeobject.c: advance, get_line_delta): entries of a
 * first byte (bit 7 set; bits 3-6 the kind, bits 0-2 the code units it
 * covers less one) and the kind's varints; only the line is needed here.
 * 3.10's co_linetable (PEP 626) is pairs of bytes instead.
 */
#include "pyline.h"

static uint32_t lt_varint(const unsigned char *lt, size_t len, size_t *i)
{
	uint32_t v, shift = 0;
	unsigned char b;

	if (*i >= len)
		return 0;
	b = lt[(*i)++];
	v = b & 63;
	while ((b & 64) && *i < len && shift < 26) {
		b = lt[(*i)++];
		shift += 6;
		v |= (uint32_t)(b & 63) << shift;
	}
	return v;
}

int pyline__line(const unsigned char *lt, size_t len, int firstlineno, uint64_t offset)
{
	uint64_t end = 0;
	int line = firstlineno;
	size_t i = 0;

	while (i < len) {
		unsigned char b = lt[i++];
		int code = (b >> 3) & 15, delta = 0;
		uint32_t u;

		if (!(b & 0x80))
			return 0;	/* not an entry's first byte: not a 3.11 line table */
		if (code == 14 || code == 13) {
			u = lt_varint(lt, len, &i);
			delta = u & 1 ? -(int)(u >> 1) : (int)(u >> 1);
		} else if (code >= 10 && code <= 12) {
			delta = code - 10;
		}
		line += delta;
		end += ((b & 7) + 1) * 2;	/* code units of two bytes */
		if (offset < end)
			return code == 15 ? 0 : line;
		while (i < len && !(lt[i] & 0x80))
			i++;
	}
	return 0;
}


/*
 * 3.10's table, as its Objects/codeobject.c advance() and
 * _PyCode_CheckLineNumber() read it: pairs of the bytes of code a range
 * covers (unsigned) and its line's change from the last line (signed;
 * -128: the range has no line). Ranges of no bytes only move the line.
 */
int pyline__line310(const unsigned char *lt, size_t len, int firstlineno, uint64_t offset)
{
	uint64_t end = 0;
	int line = firstlineno;
	size_t i;

	for (i = 0; i + 1 < len; i += 2) {
		int delta = (signed char)lt[i + 1];

		end += lt[i];
		if (delta != -128)
			line += delta;
		if (offset < end)
			return delta == -128 ? 0 : line;
	}
	return 0;
}
