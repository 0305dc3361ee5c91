// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libiberty/demangle.h>

#include "demangle.h"

/* Only names that are mangled by the schemes named above: a C name is never "demangled". */
static bool mangled(const char *sym)
{
	return sym && sym[0] == '_' && (sym[1] == 'Z' || sym[1] == 'R');
}

char *demangle__name(const char *sym, bool params)
{
	if (!mangled(sym))
		return NULL;
	return cplus_demangle(sym, DMGL_AUTO | DMGL_ANSI | (params ? DMGL_PARAMS : 0));
}

const char *demangle__str(char *buf, size_t len, const char *sym)
{
	char *d = demangle__name(sym, true);

	snprintf(buf, len, "%s", d ? d : sym);
	free(d);
	return buf;
}

bool demangle__readable(const char *name)
{
	return strstr(name, "::") || strpbrk(name, "(<");
}

/*
 * The last identifier of a demangled name ("call" of "at::_ops::linear::call(
 * at::Tensor const&)"), which the mangled name holds as it is: a quick test
 * before demangling every symbol of a large library.
 */
static void last_identifier(const char *name, char *buf, size_t len)
{
	size_t end = strcspn(name, "(<"), start = end, n;

	while (start > 0 && name[start - 1] != ':' && name[start - 1] != ' ')
		start--;
	n = end - start < len - 1 ? end - start : len - 1;
	memcpy(buf, name + start, n);
	buf[n] = '\0';
}

bool demangle__is(const char *sym, const char *name)
{
	char last[256];
	bool is = false;
	char *d;

	if (!strcmp(sym, name))
		return true;
	if (!mangled(sym) || !demangle__readable(name))
		return false;
	last_identifier(name, last, sizeof(last));
	if (last[0] && !strstr(sym, last))
		return false;
	d = demangle__name(sym, strchr(name, '(') != NULL);
	is = d && !strcmp(d, name);
	free(d);
	return is;
}
