/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
#ifndef MEMTRAIL_LOG_H
#define MEMTRAIL_LOG_H

#include <stdbool.h>
#include <stddef.h>

/*
 * One-line messages on stderr, "memtrail: " first; lower case, no final
 * period. What the format makes is sanitized (sanitize.h): one line, always.
 */
void log__error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log__warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log__info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log__debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log__set_verbose(bool verbose);
void log__set_quiet(bool quiet);
/*
 * LINE of LEN bytes to stdout or stderr (STDOUT_FILENO, STDERR_FILENO) in one
 * write; dropped and counted when nothing reads the other end (log.c).
 */
void log__line(int fd, const char *line, size_t len);
/* FN runs before each message is printed (a status line clears itself); NULL: none. */
void log__set_before(void (*fn)(void));

#endif
