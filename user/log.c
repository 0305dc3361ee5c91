// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
 * One line, always: messages carry names from the workloads (comm, cgroups,
 * paths, a trail's contents), sanitized here so none can break the line or
 * reach the terminal as a control.
 */
static void vlog(const char *level, const char *fmt, va_list ap)
{
	char *msg = NULL, *safe = NULL;

	if (before)
		before();
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	if (msg)
		safe = malloc(SANITIZE_LEN(strlen(msg)));
	if (safe) {
		/* one write: stderr is unbuffered, and lines of processes logging at once stay whole */
		fprintf(stderr, "memtrail: %s%s\n", level,
			sanitize__str(safe, SANITIZE_LEN(strlen(msg)), msg));
	} else {
		fprintf(stderr, "memtrail: %s", level);
		sanitize__fputs(msg ? msg : "(out of memory)", stderr);
		fputc('\n', stderr);
	}
	free(safe);
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
