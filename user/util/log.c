// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "sanitize.h"

static bool verbose;
static bool quiet;
static void (*before)(void);

void log__set_verbose(bool on)
{
	verbose = on;
}

void log__set_quiet(bool on)
{
	quiet = on;
}

void log__set_before(void (*fn)(void))
{
	before = fn;
}

/*
 * A reader that stopped reading (a supervisor that never drains the pipe, a
 * terminal held with Ctrl-S) must not stop the tracer: a line waits at most
 * WAIT_MS for room, then it is dropped and counted, and while lines are
 * being dropped the next ones do not wait. The count is said on stderr once
 * a line gets through again.
 */
#define WAIT_MS 100

static bool stuck[3];			/* by descriptor: stdout, stderr */
static unsigned long dropped[3];	/* not yet said */

static bool writable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	int n;

	do
		n = poll(&p, 1, stuck[fd] ? 0 : WAIT_MS);
	while (n < 0 && errno == EINTR);
	/* an error, a closed reader: write() says what it is */
	return n != 0;
}

static void write_all(int fd, const char *s, size_t len)
{
	while (len) {
		ssize_t n = write(fd, s, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		s += n;
		len -= n;
	}
}

/* The lines dropped so far, said on stderr (which has room: it was just written to). */
static void say_dropped(void)
{
	char note[128];
	int fd, n;

	for (fd = STDOUT_FILENO; fd <= STDERR_FILENO; fd++) {
		if (!dropped[fd])
			continue;
		n = snprintf(note, sizeof(note), "memtrail: warning: %lu line%s dropped from %s: "
			     "nothing read it\n", dropped[fd], dropped[fd] == 1 ? "" : "s",
			     fd == STDOUT_FILENO ? "stdout" : "stderr");
		dropped[fd] = 0;
		write_all(STDERR_FILENO, note, n);
	}
}

void log__line(int fd, const char *line, size_t len)
{
	if (fd != STDOUT_FILENO && fd != STDERR_FILENO)
		return;
	if (!writable(fd)) {
		stuck[fd] = true;
		dropped[fd]++;
		return;
	}
	stuck[fd] = false;
	if (fd == STDERR_FILENO)
		say_dropped();
	write_all(fd, line, len);
	if (fd == STDOUT_FILENO && dropped[STDOUT_FILENO] && !stuck[STDERR_FILENO] &&
	    writable(STDERR_FILENO))
		say_dropped();
}

/*
 * One line, always: messages carry names from the workloads (comm, cgroups,
 * paths, a trail's contents), sanitized here so none can break the line or
 * reach the terminal as a control. One write: lines of processes logging at
 * once stay whole.
 */
static void vlog(const char *level, const char *fmt, va_list ap)
{
	char *msg = NULL, *line = NULL;
	int len = -1;

	if (before)
		before();
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	if (msg)
		line = malloc(SANITIZE_LEN(strlen(msg)));
	if (line) {
		sanitize__str(line, SANITIZE_LEN(strlen(msg)), msg);
		free(msg);
		msg = NULL;
		len = asprintf(&msg, "memtrail: %s%s\n", level, line);
	}
	if (len < 0) {
		static const char oom[] = "memtrail: (out of memory for a message)\n";

		log__line(STDERR_FILENO, oom, sizeof(oom) - 1);
	} else {
		log__line(STDERR_FILENO, msg, len);
	}
	free(line);
	free(msg);
}

void log__error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog("error: ", fmt, ap);
	va_end(ap);
}

void log__warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog("warning: ", fmt, ap);
	va_end(ap);
}

void log__info(const char *fmt, ...)
{
	va_list ap;

	if (quiet)
		return;
	va_start(ap, fmt);
	vlog("", fmt, ap);
	va_end(ap);
}

void log__debug(const char *fmt, ...)
{
	va_list ap;

	if (!verbose)
		return;
	va_start(ap, fmt);
	vlog("debug: ", fmt, ap);
	va_end(ap);
}
