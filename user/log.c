// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <stdarg.h>
#include <stdio.h>

#include "log.h"

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

static void vlog(const char *level, const char *fmt, va_list ap)
{
	if (before)
		before();
	fprintf(stderr, "memtrail: %s", level);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
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
