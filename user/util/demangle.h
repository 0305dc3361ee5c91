/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Symbol names as people read them: C++ (Itanium ABI, "_Z...") and Rust
 * (legacy "_ZN...17h<hash>E" and v0 "_R...") demangled by libiberty, the
 * demangler binutils and GDB use. Other names (C) are left as they are.
 */
#ifndef MEMTRAIL_DEMANGLE_H
#define MEMTRAIL_DEMANGLE_H

#include <stdbool.h>
#include <stddef.h>

/*
 * SYM demangled, with C++ parameter lists when PARAMS ("c10::alloc_cpu(unsigned
 * long)"), without ("c10::alloc_cpu"): a string to free(), or NULL when SYM
 * is not a mangled name (or memory ran out).
 */
char *demangle__name(const char *sym, bool params);

/* SYM demangled into BUF of LEN bytes (cut when longer), or SYM itself; returns BUF. */
const char *demangle__str(char *buf, size_t len, const char *sym);

/*
 * Whether NAME, as a person wrote it, names symbol SYM: SYM itself, or its
 * demangled name with its parameter list ("ns::f(int)") or without ("ns::f").
 */
bool demangle__is(const char *sym, const char *name);

/* Whether NAME is written demangled (it has "::", a parameter list or a template). */
bool demangle__readable(const char *name);

#endif
