// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The CPython versions whose frames memtrail reads, and how it knows their
 * structures: a table per version (3.10 to 3.12), the interpreter's own
 * _Py_DebugOffsets (3.13, 3.14); a file's version from its Py_Version or,
 * before 3.11, its name.
 */
#include <stdlib.h>
#include <string.h>

#include "sites_pylayout.h"

/*
 * glibc's struct pthread: the kernel's thread id (nptl/descr.h, after the
 * TCB header of x86-64's tcbhead_t, or 24 pointers where the thread
 * pointer is past the descriptor, as on arm64)
 */
#if defined(__x86_64__)
#define PTHREAD_TID 720
#elif defined(__aarch64__)
#define PTHREAD_TID 208
#else
#define PTHREAD_TID MEMTRAIL_PY_TID_NATIVE
#endif

/*
 * Each from the structures of the version's Include/cpython/pystate.h,
 * Include/internal/pycore_runtime.h, pycore_interp.h, pycore_frame.h (3.10:
 * Include/cpython/frameobject.h), Include/cpython/code.h and
 * unicodeobject.h, as pahole reads pyenv's builds of 3.10.13, 3.11.7 and
 * 3.12.1 (with Debian's python3.11 and its debug file: the same); patch
 * releases keep these structures.
 */
static const struct py_layout layouts[] = {
	{ .minor = 10,
	  /* interpreters.main, tstate_head, next, thread_id (a pthread_t), frame */
	  .o = { .runtime_main = 40, .interp_threads = 8, .tstate_next = 8, .tstate_tid = 176,
		 .tstate_cframe = MEMTRAIL_PY_NO_CFRAME, .cframe_current = 24,
		 /* PyFrameObject: f_code, f_back, f_lasti (and f_lineno after it), f_state */
		 .frame_code = 32, .frame_previous = 24, .frame_instr = 96, .frame_entry = 108,
		 .pthread_tid = PTHREAD_TID },
	  .calls = PY_ONE_PER_CALL, .code_size = 176, .code_firstlineno = 40,
	  .code_filename = 104, .code_qualname = 112,
	  .code_linetable = 120, .str_length = 16, .str_state = 32, .ascii_data = 48,
	  .compact_data = 72, .runtime_main_thread = 72 },
	{ .minor = 11,
	  .o = { .runtime_main = 48, .interp_threads = 16, .tstate_next = 8, .tstate_tid = 160,
		 .tstate_cframe = 56, .cframe_current = 8, .frame_code = 32,
		 .frame_previous = 48, .frame_instr = 56, .frame_entry = 68,
		 .pthread_tid = MEMTRAIL_PY_TID_NATIVE },
	  .calls = PY_IS_ENTRY, .code_size = 184, .code_firstlineno = 72,
	  .code_filename = 112, .code_qualname = 128, .code_linetable = 136,
	  .code_adaptive = 184, .str_length = 16, .str_state = 32, .ascii_data = 48,
	  .compact_data = 72 },
	{ .minor = 12,
	  /* cframe->current_frame; _PyInterpreterFrame: f_code, previous, prev_instr, owner */
	  .o = { .runtime_main = 48, .interp_threads = 72, .tstate_next = 8, .tstate_tid = 144,
		 .tstate_cframe = 56, .cframe_current = 0, .frame_code = 0,
		 .frame_previous = 8, .frame_instr = 56, .frame_entry = 70,
		 .pthread_tid = MEMTRAIL_PY_TID_NATIVE },
	  .calls = PY_CSTACK_SHIM, .owner_cstack = 3, .code_size = 192,
	  .code_firstlineno = 68, .code_filename = 112, .code_qualname = 128,
	  .code_linetable = 136, .code_adaptive = 192, .str_length = 16, .str_state = 32,
	  /* no wstr since 3.12 */
	  .ascii_data = 40, .compact_data = 56 },
};

/* LEN bytes at module address ADDR of M's file; false: not all in the file's data. */
static bool module_bytes(struct module *m, GElf_Addr addr, void *buf, size_t len)
{
	GElf_Addr bias;
	Elf *e = dwfl_module_getelf(m->mod, &bias);
	Elf_Scn *scn = NULL;

	while (e && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		GElf_Addr va = addr - bias;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || va < sh.sh_addr ||
		    va + len > sh.sh_addr + sh.sh_size)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf || va - sh.sh_addr + len > d->d_size)
			return false;
		memcpy(buf, (const char *)d->d_buf + (va - sh.sh_addr), len);
		return true;
	}
	return false;
}

/* Whether each of N OFFSETS lies inside a structure of SIZE (at most 1 MiB). */
static bool within(uint64_t size, const uint64_t *offsets, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (offsets[i] + 8 > size || size > (1u << 20))
			return false;
	return true;
}

/*
 * CPython's _Py_DebugOffsets, the head of _PyRuntime, up to the part
 * memtrail reads: 3.13's (Include/internal/pycore_runtime.h, v3.13.0) and
 * 3.14's (Include/internal/pycore_debug_offsets.h, v3.14.0), which added
 * fields inside its sub-structures and a set_object before dict_object.
 */
struct py_debug_head {
	char cookie[8];		/* "xdebugpy" */
	uint64_t version;	/* Py_Version */
	uint64_t free_threaded;
	struct { uint64_t size, finalizing, interpreters_head; } runtime_state;
};

struct py_debug_offsets_313 {
	struct py_debug_head h;
	struct {
		uint64_t size, id, next, threads_head, gc, imports_modules, sysdict, builtins,
			 ceval_gil, gil_runtime_state, gil_enabled, gil_locked, gil_holder;
	} interpreter_state;
	struct {
		uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id,
			 datastack_chunk, status;
	} thread_state;
	struct { uint64_t size, previous, executable, instr_ptr, localsplus, owner; } frame;
	struct {
		uint64_t size, filename, name, qualname, linetable, firstlineno, argcount,
			 localsplusnames, localspluskinds, co_code_adaptive;
	} code_object;
	struct { uint64_t size, ob_type; } pyobject;
	struct { uint64_t size, tp_name, tp_repr, tp_flags; } type_object;
	struct { uint64_t size, ob_item, ob_size; } tuple_object, list_object;
	struct { uint64_t size, ma_keys, ma_values; } dict_object;
	struct { uint64_t size, ob_fval; } float_object;
	struct { uint64_t size, lv_tag, ob_digit; } long_object;
	struct { uint64_t size, ob_size, ob_sval; } bytes_object;
	struct { uint64_t size, state, length, asciiobject_size; } unicode_object;
};

struct py_debug_offsets_314 {
	struct py_debug_head h;
	struct {
		uint64_t size, id, next, threads_head, threads_main, gc, imports_modules, sysdict,
			 builtins, ceval_gil, gil_runtime_state, gil_enabled, gil_locked,
			 gil_holder, code_object_generation, tlbc_generation;
	} interpreter_state;
	struct {
		uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id,
			 datastack_chunk, status;
	} thread_state;
	struct {
		uint64_t size, previous, executable, instr_ptr, localsplus, owner, stackpointer,
			 tlbc_index;
	} frame;
	struct {
		uint64_t size, filename, name, qualname, linetable, firstlineno, argcount,
			 localsplusnames, localspluskinds, co_code_adaptive, co_tlbc;
	} code_object;
	struct { uint64_t size, ob_type; } pyobject;
	struct { uint64_t size, tp_name, tp_repr, tp_flags; } type_object;
	struct { uint64_t size, ob_item, ob_size; } tuple_object, list_object;
	struct { uint64_t size, used, table, mask; } set_object;
	struct { uint64_t size, ma_keys, ma_values; } dict_object;
	struct { uint64_t size, ob_fval; } float_object;
	struct { uint64_t size, lv_tag, ob_digit; } long_object;
	struct { uint64_t size, ob_size, ob_sval; } bytes_object;
	struct { uint64_t size, state, length, asciiobject_size; } unicode_object;
};

/* The parts of either that memtrail reads, with the sizes they are checked against. */
struct py_debug {
	uint64_t runtime_size, interpreters_head;
	uint64_t interp_size, threads_head;
	uint64_t ts_size, ts_next, ts_current_frame, ts_native_thread_id;
	uint64_t frame_size, frame_previous, frame_executable, frame_instr_ptr, frame_owner;
	uint64_t code_size, code_filename, code_qualname, code_linetable, code_firstlineno,
		 code_adaptive;
	uint64_t str_size, str_state, str_length, str_ascii;
};

#define PY_DEBUG_COPY(src)                                                              \
	((struct py_debug){                                                             \
		.runtime_size = (src).h.runtime_state.size,                             \
		.interpreters_head = (src).h.runtime_state.interpreters_head,           \
		.interp_size = (src).interpreter_state.size,                            \
		.threads_head = (src).interpreter_state.threads_head,                   \
		.ts_size = (src).thread_state.size, .ts_next = (src).thread_state.next, \
		.ts_current_frame = (src).thread_state.current_frame,                   \
		.ts_native_thread_id = (src).thread_state.native_thread_id,             \
		.frame_size = (src).frame.size, .frame_previous = (src).frame.previous, \
		.frame_executable = (src).frame.executable,                             \
		.frame_instr_ptr = (src).frame.instr_ptr, .frame_owner = (src).frame.owner, \
		.code_size = (src).code_object.size,                                    \
		.code_filename = (src).code_object.filename,                            \
		.code_qualname = (src).code_object.qualname,                            \
		.code_linetable = (src).code_object.linetable,                          \
		.code_firstlineno = (src).code_object.firstlineno,                      \
		.code_adaptive = (src).code_object.co_code_adaptive,                    \
		.str_size = (src).unicode_object.size,                                  \
		.str_state = (src).unicode_object.state,                                \
		.str_length = (src).unicode_object.length,                              \
		.str_ascii = (src).unicode_object.asciiobject_size,                     \
	})

/* Whether D's offsets each lie inside the structure they are of. */
static bool py_debug_sane(const struct py_debug *d)
{
	return within(d->ts_size, (uint64_t[]){ d->ts_next, d->ts_current_frame,
						d->ts_native_thread_id }, 3) &&
	       within(d->interp_size, (uint64_t[]){ d->threads_head }, 1) &&
	       within(d->runtime_size, (uint64_t[]){ d->interpreters_head }, 1) &&
	       within(d->frame_size, (uint64_t[]){ d->frame_previous, d->frame_executable,
						   d->frame_instr_ptr }, 3) &&
	       d->frame_owner < d->frame_size &&
	       within(d->code_size, (uint64_t[]){ d->code_filename, d->code_qualname,
						  d->code_linetable }, 3) &&
	       d->code_firstlineno + 4 <= d->code_size && d->code_adaptive <= d->code_size &&
	       within(d->str_size, (uint64_t[]){ d->str_length }, 1) &&
	       d->str_state + 4 <= d->str_size && d->str_ascii <= d->str_size;
}

/*
 * 3.13's or 3.14's layout, from the _Py_DebugOffsets at the head of M's
 * _PyRuntime, as the file holds it (initialized data): NULL where the
 * cookie, the version or an offset is not what an interpreter of the
 * default (GIL) build writes; *WHY says which.
 */
static struct py_layout *layout_debug(struct module *m, uint32_t minor, const char **why)
{
	union {
		struct py_debug_head h;
		struct py_debug_offsets_313 v13;
		struct py_debug_offsets_314 v14;
	} u;
	struct py_debug d;
	struct py_layout *l;

	*why = "its _Py_DebugOffsets are not as its version writes them";
	if (!module_bytes(m, m->py_runtime, &u.h, sizeof(u.h)) ||
	    memcmp(u.h.cookie, "xdebugpy", 8) || u.h.version != m->py_version)
		return NULL;
	if (u.h.free_threaded) {
		*why = "a free-threaded build";
		return NULL;
	}
	if (minor == 13 && module_bytes(m, m->py_runtime, &u.v13, sizeof(u.v13)))
		d = PY_DEBUG_COPY(u.v13);
	else if (minor == 14 && module_bytes(m, m->py_runtime, &u.v14, sizeof(u.v14)))
		d = PY_DEBUG_COPY(u.v14);
	else
		return NULL;
	if (!py_debug_sane(&d) || !(l = calloc(1, sizeof(*l))))
		return NULL;
	*l = (struct py_layout){
		.minor = minor,
		.o = { .runtime_main = d.interpreters_head, .interp_threads = d.threads_head,
		       .tstate_next = d.ts_next, .tstate_tid = d.ts_native_thread_id,
		       .tstate_cframe = MEMTRAIL_PY_NO_CFRAME,
		       .cframe_current = d.ts_current_frame,
		       .frame_code = d.frame_executable, .frame_previous = d.frame_previous,
		       .frame_instr = d.frame_instr_ptr, .frame_entry = d.frame_owner,
		       .pthread_tid = MEMTRAIL_PY_TID_NATIVE },
		.calls = PY_CSTACK_SHIM,
		/*
		 * the shim each eval loop call puts below its frames: owned by
		 * the C stack in 3.13 (FRAME_OWNED_BY_CSTACK, pycore_frame.h),
		 * by the interpreter in 3.14 (FRAME_OWNED_BY_INTERPRETER,
		 * pycore_interpframe_structs.h): 3 in both
		 */
		.owner_cstack = 3,
		/* 3.14's f_executable is a stack reference: Py_TAG_BITS (pycore_stackref.h) */
		.code_tag = minor >= 14 ? 3 : 0,
		.code_size = (uint32_t)d.code_size,
		.code_firstlineno = (uint32_t)d.code_firstlineno,
		.code_filename = (uint32_t)d.code_filename,
		.code_qualname = (uint32_t)d.code_qualname,
		.code_linetable = (uint32_t)d.code_linetable,
		.code_adaptive = (uint32_t)d.code_adaptive,
		.str_length = (uint32_t)d.str_length, .str_state = (uint32_t)d.str_state,
		.ascii_data = (uint32_t)d.str_ascii,
		/* PyCompactUnicodeObject: utf8_length and utf8 after the ASCII header */
		.compact_data = (uint32_t)d.str_ascii + 16,
	};
	return l;
}

/*
 * M's layout (M an interpreter of version m->py_version), found once; NULL:
 * none known, m->py_why says why.
 */
const struct py_layout *sites_py_layout(struct module *m)
{
	uint32_t minor = (m->py_version >> 16) & 0xff;
	size_t i;

	if (m->py_layout_read)
		return m->py_layout;
	m->py_layout_read = true;
	m->py_why = "a version whose structures memtrail does not know";
	if ((m->py_version >> 24) != 3)
		return NULL;
	for (i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].minor == minor) {
			m->py_layout = &layouts[i];
			return m->py_layout;
		}
	if (minor == 13 || minor == 14)
		m->py_layout = m->py_layout_own = layout_debug(m, minor, &m->py_why);
	return m->py_layout;
}

/*
 * The version a CPython file's name says (python3.10, libpython3.10.so.1.0,
 * libpython3.9d.so): 0x030a0000 for 3.10, 0 where it says none. For 3.10
 * and before, which have no Py_Version.
 */
static uint32_t name_version(const char *base)
{
	const char *v = !strncmp(base, "libpython3.", 11) ? base + 11 :
			!strncmp(base, "python3.", 8) ? base + 8 : NULL;
	char *end;
	unsigned long minor;

	if (!v || *v < '0' || *v > '9')
		return 0;
	minor = strtoul(v, &end, 10);
	if (minor > 255 || (*end && *end != '.' && *end != 'd' && *end != 'm' && *end != 't'))
		return 0;
	return 3u << 24 | (uint32_t)minor << 16;
}

/* Whether M is a CPython interpreter (executable or libpython): its symbols, once. */
void sites_py_module(struct module *m)
{
	const char *base = strrchr(m->name, '/');
	uint64_t version = 0;
	int i, n;

	if (m->py_checked)
		return;
	m->py_checked = true;
	base = base ? base + 1 : m->name;
	if (!m->mod || (strncmp(base, "python3", 7) && strncmp(base, "libpython3", 10)))
		return;
	n = dwfl_module_getsymtab(m->mod);
	for (i = 0; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		const char *name = dwfl_module_getsym_info(m->mod, i, &sym, &addr, NULL, NULL, NULL);

		if (!name || sym.st_shndx == SHN_UNDEF)
			continue;
		if (!strcmp(name, "_PyRuntime"))
			m->py_runtime = addr;
		else if (!strcmp(name, "PyCode_Type"))
			m->py_code_type = addr;
		else if (!strcmp(name, "Py_Version") && !module_bytes(m, addr, &version, 4))
			version = 0;
		else if (!strcmp(name, "_PyEval_EvalFrameDefault")) {
			m->py_eval_lo = addr;
			m->py_eval_hi = addr + sym.st_size;
		} else if (!strcmp(name, "_PyEval_EvalFrameDefault.cold")) {
			m->py_eval_cold_lo = addr;
			m->py_eval_cold_hi = addr + sym.st_size;
		}
	}
	/* Py_Version is 3.11's: before, the file's name says which */
	if (!version)
		version = name_version(base);
	if (m->py_runtime && m->py_code_type && m->py_eval_lo)
		m->py_version = version ? (uint32_t)version : PY_VERSION_UNKNOWN;
}
