// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "log.h"

const char *format__bytes(char *buf, size_t len, int64_t bytes)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB" };
	const char *sign = bytes < 0 ? "-" : "";
	double v = bytes < 0 ? -(double)bytes : (double)bytes;
	int u = -1;

	if (v < 1024) {
		snprintf(buf, len, "%s%.0f B", sign, v);
		return buf;
	}
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, v < 10 ? "%s%.2f %s" : "%s%.1f %s", sign, v, units[u]);
	return buf;
}

char *format__utf8_whole(char *s)
{
	size_t len = strlen(s), i = len, need;
	unsigned char lead;

	while (i && len - i < 3 && ((unsigned char)s[i - 1] & 0xc0) == 0x80)
		i--;	/* continuation bytes */
	if (!i)
		return s;
	lead = s[i - 1];
	need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
	if (len - (i - 1) < need)
		s[i - 1] = '\0';
	return s;
}

const char *format__printable(char *buf, size_t len, const char *s)
{
	size_t i;

	for (i = 0; i + 1 < len && s[i]; i++)
		buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	buf[i] = '\0';
	return format__utf8_whole(buf);
}

int format__parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end)
		return -EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int format__option_u64(const char *opt, const char *arg, uint64_t min, uint64_t max,
		       uint64_t *out)
{
	if (format__parse_u64(arg, min, max, out)) {
		log__error("invalid %s '%s': give %llu to %llu", opt, arg,
			   (unsigned long long)min, (unsigned long long)max);
		return -EINVAL;
	}
	return 0;
}

int format__option_bytes(const char *opt, const char *arg, unsigned int max_shift, uint64_t *out)
{
	if (format__parse_u64(arg, 0, 1ULL << max_shift, out)) {
		log__error("invalid %s '%s': give bytes, 0 to 2^%u", opt, arg, max_shift);
		return -EINVAL;
	}
	return 0;
}

int format__option_pct(const char *opt, const char *arg, const char *what, double *out)
{
	char *end;
	double pct = strtod(arg, &end);

	if (end == arg || *end || !(pct >= 0.1 && pct <= 100)) {
		log__error("invalid %s '%s': give %s, 0.1 to 100", opt, arg, what);
		return -EINVAL;
	}
	*out = pct;
	return 0;
}

int format__option_u32(const char *opt, const char *arg, uint64_t min, uint64_t max,
		       uint32_t *out)
{
	uint64_t v;

	if (format__option_u64(opt, arg, min, max < UINT32_MAX ? max : UINT32_MAX, &v))
		return -EINVAL;
	*out = v;
	return 0;
}
