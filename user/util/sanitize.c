// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sanitize.h"

static const char hex[] = "0123456789abcdef";

/*
 * The length of the valid UTF-8 sequence of two to four bytes at S, or 0:
 * no overlong forms, no surrogates, nothing above U+10FFFF (RFC 3629).
 */
static size_t utf8_len(const unsigned char *s, uint32_t *cp)
{
	size_t n, i;
	uint32_t c;

	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		n = 2;
		c = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		n = 3;
		c = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		n = 4;
		c = s[0] & 0x07;
	} else {
		return 0;
	}
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)	/* the NUL too: the string ended */
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && c < 0x800) || (n == 4 && (c < 0x10000 || c > 0x10ffff)) ||
	    (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return n;
}

static size_t shown(const unsigned char *s, char *out, size_t *used)
{
	size_t n, i, o = 0;
	uint32_t cp;

	if (*s == '\\') {
		*used = 1;
		memcpy(out, "\\\\", 2);
		return 2;
	}
	if (*s >= 0x20 && *s < 0x7f) {
		*used = 1;
		out[0] = *s;
		return 1;
	}
	n = *s >= 0x80 ? utf8_len(s, &cp) : 0;
	if (n && cp >= 0xa0) {		/* C1 controls (U+0080..U+009F) are escaped */
		*used = n;
		memcpy(out, s, n);
		return n;
	}
	n = n ? n : 1;			/* a C1 control's bytes, or one byte */
	for (i = 0; i < n; i++) {
		out[o++] = '\\';
		out[o++] = 'x';
		out[o++] = hex[s[i] >> 4];
		out[o++] = hex[s[i] & 0xf];
	}
	*used = n;
	return o;
}

size_t sanitize__char(const char *s, char *out, size_t *used)
{
	return shown((const unsigned char *)s, out, used);
}

const char *sanitize__str(char *buf, size_t len, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "?");
	size_t o = 0, n, used;
	char one[SANITIZE_CHAR_MAX];

	if (!len)
		return buf;
	while (*p) {
		n = shown(p, one, &used);
		if (o + n >= len)
			break;
		memcpy(buf + o, one, n);
		o += n;
		p += used;
	}
	buf[o] = '\0';
	return buf;
}

json_t *sanitize__json(const char *s)
{
	const unsigned char *p;
	size_t n, o = 0;
	uint32_t cp;
	json_t *j;
	char *out;

	if (!s)
		return json_null();
	for (p = (const unsigned char *)s; *p; p += n)
		if (!(n = *p < 0x80 ? 1 : utf8_len(p, &cp)))
			break;
	if (!*p)
		return json_string(s);
	out = malloc(4 * strlen(s) + 1);
	if (!out)
		return NULL;
	for (p = (const unsigned char *)s; *p; p += n) {
		n = *p < 0x80 ? 1 : utf8_len(p, &cp);
		if (n) {
			memcpy(out + o, p, n);
			o += n;
			continue;
		}
		n = 1;
		out[o++] = '\\';
		out[o++] = 'x';
		out[o++] = hex[*p >> 4];
		out[o++] = hex[*p & 0xf];
	}
	out[o] = '\0';
	j = json_string(out);
	free(out);
	return j;
}
