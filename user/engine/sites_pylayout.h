/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * What memtrail knows of each CPython's structures (sites_pylayout.c), for
 * sites_python.c, which reads a process's frames and code objects by them.
 */
#ifndef MEMTRAIL_SITES_PYLAYOUT_H
#define MEMTRAIL_SITES_PYLAYOUT_H

#include <stdbool.h>
#include <stdint.h>

#include "memtrail.h"
#include "sites_int.h"

/*
 * How a version's frames map onto the eval loop's calls: 3.10 runs one
 * PyFrameObject per _PyEval_EvalFrameDefault call, with f_lasti an index
 * of code units; 3.11 marks the first frame of a call (is_entry); 3.12 on
 * put a shim the C stack owns below each call's frames.
 */
enum py_calls { PY_ONE_PER_CALL, PY_IS_ENTRY, PY_CSTACK_SHIM };

/*
 * What memtrail reads of an interpreter's structures: offsets (LP64: x86-64
 * and arm64 alike), from a fixed table (3.10 to 3.12) or from the
 * interpreter's own _Py_DebugOffsets (3.13 on).
 */
struct py_layout {
	uint32_t minor;
	struct memtrail_py_proc o;	/* runtime: 0 */
	enum py_calls calls;
	uint8_t owner_cstack;		/* PY_CSTACK_SHIM: the owner of the shim */
	uint64_t code_tag;		/* low bits tagging frame_code (3.14's stack references) */
	uint32_t code_size;		/* bytes of a code object read: its fields below */
	uint32_t code_firstlineno, code_filename, code_linetable;
	uint32_t code_qualname;		/* 3.10, which has none: co_name */
	uint32_t code_adaptive;		/* co_code_adaptive: the instructions (3.11 on) */
	uint32_t str_length, str_state;	/* PyASCIIObject: length, state */
	uint32_t ascii_data;		/* sizeof(PyASCIIObject) */
	uint32_t compact_data;		/* sizeof(PyCompactUnicodeObject) */
	uint32_t runtime_main_thread;	/* 3.10: _PyRuntimeState.main_thread (a pthread_t) */
};

#define PY_VERSION_UNKNOWN 0x03ff0000u	/* a CPython 3 that says not which */

/* Whether M is a CPython interpreter (executable or libpython): its symbols and version, once. */
void sites_py_module(struct module *m);
/*
 * M's layout (M an interpreter of version m->py_version), found once; NULL:
 * none known, m->py_why says why.
 */
const struct py_layout *sites_py_layout(struct module *m);

#endif
