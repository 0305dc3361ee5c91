/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
#ifndef MEMTRAIL_FORMAT_H
#define MEMTRAIL_FORMAT_H

#include <stddef.h>
#include <stdint.h>

/* Bytes for people: "0 B", "512 B", "4.0 KiB", "1.50 GiB"; returns buf. */
const char *format__bytes(char *buf, size_t len, int64_t bytes);
/*
 * S with a UTF-8 character cut short at its end removed, as snprintf may
 * leave one when it truncates (JSON refuses it); returns S.
 */
char *format__utf8_whole(char *s);
/*
 * S for a terminal or a one-line message (a trail is anyone's file): control
 * bytes as '?', cut to fit BUF (LEN bytes) between characters; returns BUF.
 */
const char *format__printable(char *buf, size_t len, const char *s);
/* A decimal integer in [min, max], the whole string; 0 or -EINVAL/-ERANGE. */
int format__parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* An option's value as format__parse_u64 reads it; logs why on -EINVAL. */
int format__option_u64(const char *opt, const char *arg, uint64_t min, uint64_t max,
		       uint64_t *out);
/* The same into 32 bits (MAX at most UINT32_MAX). */
int format__option_u32(const char *opt, const char *arg, uint64_t min, uint64_t max,
		       uint32_t *out);
/* A percentage, 0.1 to 100, the whole string; logs "give WHAT, 0.1 to 100" on -EINVAL. */
int format__option_pct(const char *opt, const char *arg, const char *what, double *out);
/* A byte count, 0 to 2^MAX_SHIFT, as format__parse_u64 reads it; the error said as above. */
int format__option_bytes(const char *opt, const char *arg, unsigned int max_shift, uint64_t *out);

#endif
