/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Text from outside (process names, command lines, cgroup and pod names,
 * anything read from a trail) made safe for a terminal or a log line: every
 * control character (C0, DEL, C1 as UTF-8) and every byte that is not valid
 * UTF-8 written as \xNN, the backslash as \\, the rest as it is. The result
 * has no newline, no escape sequence, and reads back unambiguously.
 */
#ifndef MEMTRAIL_SANITIZE_H
#define MEMTRAIL_SANITIZE_H

#include <jansson.h>
#include <stddef.h>

/* Bytes that hold N bytes of text, sanitized, and the NUL: \xNN is four per byte. */
#define SANITIZE_LEN(n) (4 * (n) + 1)

/*
 * The character at S (not at its end) sanitized into OUT, at most
 * SANITIZE_CHAR_MAX bytes and not terminated: its length; *USED the bytes of
 * S it took.
 */
#define SANITIZE_CHAR_MAX 16
size_t sanitize__char(const char *s, char *out, size_t *used);
/* S (NULL: "?") sanitized into BUF of LEN bytes, cut at a whole character; returns BUF. */
const char *sanitize__str(char *buf, size_t len, const char *s);
/*
 * S as a JSON string (NULL: null): as it is when it is valid UTF-8 (JSON
 * escapes its controls); otherwise each byte that is not part of a valid
 * UTF-8 character written as \xNN, the rest as it is. JSON has no room for
 * other bytes, and the kernel takes any for a name. NULL only out of memory.
 */
json_t *sanitize__json(const char *s);

#endif
