// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Python frames in deep stacks. A target whose code mappings include a
 * CPython interpreter memtrail knows (its _PyRuntime and Py_Version
 * symbols, a version with a layout below) is told to BPF, which reads the
 * allocating thread's frame chain at each deep sample: code object and last
 * instruction per frame. Here each code object is read from the process
 * (process_vm_readv, cached by address and checked again at each use), its
 * line found in co_linetable, and the Python frames stand in place of the
 * interpreter's _PyEval_EvalFrameDefault frames that run them. Nothing is
 * invented: a code object that cannot be read is a frame saying why.
 */
#include <errno.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "array.h"
#include "log.h"
#include "proc.h"
#include "pyline.h"
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

#define PY_VERSION_UNKNOWN 0x03ff0000u	/* a CPython 3 that says not which */
#define PY_STR_MAX 4096
#define PY_LINETABLE_MAX (1 << 20)

/* A code object of a target as read last. */
struct py_code {
	uint32_t pid;
	uint64_t addr;
	uint64_t filename, qualname, linetable;	/* its pointers when read: checked at each use */
	int firstlineno;
	char *qualname_s, *filename_s;
	unsigned char *lt;
	size_t lt_len;
};

static bool pid_read(uint32_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };

	return addr && process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)len;
}

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
static const struct py_layout *module_layout(struct module *m)
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
static void module_python(struct module *m)
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

/* Module address ADDR of M as an address in PID, by one of PM's mappings of it; 0: none. */
static uint64_t module_in_pid(const struct sites *s, const struct pid_maps *pm, int32_t mi,
			      GElf_Addr addr)
{
	size_t i;

	for (i = 0; i < pm->n; i++) {
		GElf_Addr at;

		if (pm->maps[i].module == mi &&
		    sites_module_addr(&s->modules[mi], pm->maps[i].pgoff, &at))
			return pm->maps[i].start + (addr - at);
	}
	return 0;
}

/* PID as its own pid namespace numbers it (the last of NSpid); 0: unknown. */
static uint32_t ns_pid(uint32_t pid)
{
	char path[64], line[256];
	unsigned long last = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/status", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *p = line + 6, *end;
		unsigned long v;

		if (strncmp(line, "NSpid:", 6))
			continue;
		while ((v = strtoul(p, &end, 10), end != p)) {
			last = v;
			p = end;
		}
		break;
	}
	fclose(f);
	return (uint32_t)last;
}

/*
 * 3.10's thread states hold pthread_self(), not the kernel's id: whether
 * the main thread's (_PyRuntime.main_thread, once the runtime is set up)
 * holds PID's id where glibc keeps it. True where it cannot tell yet.
 */
static bool pthread_tid_known(uint32_t pid, const struct py_layout *l, uint64_t runtime)
{
	uint64_t main_thread = 0;
	uint32_t tid = 0, nspid;

	if (l->o.pthread_tid == MEMTRAIL_PY_TID_NATIVE)
		return true;
	if (!pid_read(pid, runtime + l->runtime_main_thread, &main_thread, 8) || !main_thread)
		return true;
	nspid = ns_pid(pid);
	return !nspid || (pid_read(pid, main_thread + l->o.pthread_tid, &tid, 4) && tid == nspid);
}

/* M's version as people write it: 3.9, or 3.13.0 where Py_Version says the micro. */
static void py_version_str(const struct module *m, char *buf, size_t len)
{
	uint32_t v = m->py_version;

	if (((v >> 16) & 0xff) == 0xff)
		snprintf(buf, len, "3 (of a version it does not say)");
	else if (v & 0xff)
		snprintf(buf, len, "%u.%u.%u", v >> 24, (v >> 16) & 0xff, (v >> 8) & 0xff);
	else
		snprintf(buf, len, "%u.%u", v >> 24, (v >> 16) & 0xff);
}

/*
 * PID runs M, whose Python frames are not read (WHY): said once per
 * version, each further process in the debug log; counted.
 */
static void py_unread(struct sites *s, uint32_t pid, const struct module *m, const char *why)
{
	uint32_t minor = (m->py_version >> 16) & 0xff;
	char comm[32] = "?", version[48];

	s->py_unread++;
	py_version_str(m, version, sizeof(version));
	if (s->py_said[minor / 64] & (1ull << (minor % 64))) {
		log__debug("python: %u runs CPython %s (%s): its Python frames are not read (%s)",
			   pid, version, m->name, why);
	} else {
		s->py_said[minor / 64] |= 1ull << (minor % 64);
		proc__comm(pid, comm, sizeof(comm));
		log__warn("python: %u (%s) runs CPython %s: its Python frames are not read (%s; "
			  "memtrail reads %s); its sites keep their native frames", pid, comm,
			  version, why, SITES_PYTHON_VERSIONS);
	}
	if (s->py_unread_fn)
		s->py_unread_fn(s->py_unread_ctx, pid, version, why);
}

void sites__on_py_unread(struct sites *s, sites_py_unread_fn fn, void *ctx)
{
	s->py_unread_fn = fn;
	s->py_unread_ctx = ctx;
}

void sites_python_note_map(struct sites *s, struct pid_maps *pm, size_t i)
{
	const struct py_layout *l;
	struct memtrail_py_proc p;
	struct module *m;

	if (pm->py_set || pm->maps[i].module < 0)
		return;
	m = &s->modules[pm->maps[i].module];
	module_python(m);
	if (!m->py_version)
		return;
	pm->py_set = true;
	l = module_layout(m);
	if (!l) {
		py_unread(s, pm->pid, m, m->py_why);
		return;
	}
	p = l->o;
	p.runtime = module_in_pid(s, pm, pm->maps[i].module, m->py_runtime);
	if (!p.runtime)
		return;
	if (!pthread_tid_known(pm->pid, l, p.runtime)) {
		py_unread(s, pm->pid, m, "its threads are not glibc's: they cannot be told apart");
		return;
	}
	if (!tracer__py_proc(s->tracer, pm->pid, &p))
		log__debug("pid %u runs Python 3.%u (%s): its frames are read",
			   pm->pid, l->minor, m->name);
}

void sites_python_note(struct sites *s, struct pid_maps *pm)
{
	size_t i;

	for (i = 0; !pm->py_set && i < pm->n; i++)
		sites_python_note_map(s, pm, i);
}

/* The str object at ADDR of PID as UTF-8 (malloc'd), or NULL. */
static char *py_str(uint32_t pid, const struct py_layout *l, uint64_t addr)
{
	unsigned char hdr[64], *raw;
	uint64_t len;
	uint32_t state, kind, i, o = 0;
	char *out;

	if (l->str_length + 8 > sizeof(hdr) || l->str_state + 4 > sizeof(hdr) ||
	    !pid_read(pid, addr, hdr, sizeof(hdr)))
		return NULL;
	memcpy(&len, hdr + l->str_length, 8);
	memcpy(&state, hdr + l->str_state, 4);
	kind = (state >> 2) & 7;
	if (!((state >> 5) & 1) || len > PY_STR_MAX || (kind != 1 && kind != 2 && kind != 4))
		return NULL;	/* not compact: not a code object's name */
	raw = malloc(len * kind + 1);
	out = malloc(len * 4 + 1);
	if (!raw || !out ||
	    !pid_read(pid, addr + ((state >> 6) & 1 ? l->ascii_data : l->compact_data), raw,
		      len * kind)) {
		free(raw);
		free(out);
		return NULL;
	}
	for (i = 0; i < len; i++) {
		uint32_t c = kind == 1 ? raw[i] : kind == 2 ? (uint32_t)raw[2 * i] |
			     (uint32_t)raw[2 * i + 1] << 8 :
			     (uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 |
			     (uint32_t)raw[4 * i + 2] << 16 | (uint32_t)raw[4 * i + 3] << 24;

		if (c < 0x80) {
			out[o++] = (char)c;
		} else if (c < 0x800) {
			out[o++] = (char)(0xc0 | c >> 6);
			out[o++] = (char)(0x80 | (c & 0x3f));
		} else if (c < 0x10000) {
			out[o++] = (char)(0xe0 | c >> 12);
			out[o++] = (char)(0x80 | ((c >> 6) & 0x3f));
			out[o++] = (char)(0x80 | (c & 0x3f));
		} else {
			out[o++] = (char)(0xf0 | (c >> 18 & 7));
			out[o++] = (char)(0x80 | ((c >> 12) & 0x3f));
			out[o++] = (char)(0x80 | ((c >> 6) & 0x3f));
			out[o++] = (char)(0x80 | (c & 0x3f));
		}
	}
	out[o] = '\0';
	free(raw);
	return out;
}

static int py_code_cmp(const void *a, const void *b)
{
	const struct py_code *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void py_code_free(void *p)
{
	struct py_code *c = p;

	free(c->qualname_s);
	free(c->filename_s);
	free(c->lt);
	free(c);
}

/*
 * The code object at ADDR of PID, read now (or as read before, where its
 * pointers are the same, or the process is gone). NULL: *WHY says.
 */
static struct py_code *py_code(struct sites *s, const struct py_layout *l, uint32_t pid,
			       uint64_t addr, uint64_t code_type, const char **why)
{
	unsigned char hdr[512];
	struct py_code probe = { .pid = pid, .addr = addr }, *c = NULL, fresh = { 0 };
	void *found = tfind(&probe, &s->py_codes, py_code_cmp);
	uint64_t type, size;

	if (found)
		c = *(struct py_code **)found;
	if (l->code_size > sizeof(hdr) || !pid_read(pid, addr, hdr, l->code_size)) {
		*why = "[python: code object unreadable, the process gone]";
		return c;	/* the process is gone: as it was read last */
	}
	memcpy(&type, hdr + 8, 8);
	if (type != code_type) {
		*why = "[python: not a code object]";
		return NULL;
	}
	fresh.pid = pid;
	fresh.addr = addr;
	memcpy(&fresh.filename, hdr + l->code_filename, 8);
	memcpy(&fresh.qualname, hdr + l->code_qualname, 8);
	memcpy(&fresh.linetable, hdr + l->code_linetable, 8);
	memcpy(&fresh.firstlineno, hdr + l->code_firstlineno, 4);
	if (c && c->filename == fresh.filename && c->qualname == fresh.qualname &&
	    c->linetable == fresh.linetable && c->firstlineno == fresh.firstlineno)
		return c;
	c = malloc(sizeof(*c));
	if (!c) {
		*why = "[python: out of memory]";
		return NULL;
	}
	*c = fresh;
	c->qualname_s = py_str(pid, l, fresh.qualname);
	c->filename_s = py_str(pid, l, fresh.filename);
	if (pid_read(pid, fresh.linetable + 16, &size, 8) && size <= PY_LINETABLE_MAX &&
	    (c->lt = malloc(size ? size : 1)) && pid_read(pid, fresh.linetable + 32, c->lt, size))
		c->lt_len = size;
	if (!c->qualname_s || !c->filename_s) {
		py_code_free(c);
		*why = "[python: code object's names unreadable]";
		return NULL;
	}
	if (found) {
		py_code_free(*(struct py_code **)found);
		*(struct py_code **)found = c;
	} else if (!tsearch(c, &s->py_codes, py_code_cmp)) {
		py_code_free(c);
		*why = "[python: out of memory]";
		return NULL;
	}
	return c;
}

static int py_frame_cmp(const void *a, const void *b)
{
	const struct py_frame *x = a, *y = b;
	int r;

	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	if ((r = strcmp(x->function ? x->function : "", y->function ? y->function : "")))
		return r;
	if ((r = strcmp(x->file ? x->file : "", y->file ? y->file : "")))
		return r;
	return strcmp(x->why ? x->why : "", y->why ? y->why : "");
}

/* The index of frame P among the sites' Python frames, made if new; -1: out of memory. */
static int64_t py_frame_id(struct sites *s, const struct py_frame *p)
{
	struct py_frame *f;
	void *found = tfind(p, &s->py_index, py_frame_cmp);

	if (found)
		return (int64_t)(*(struct py_frame **)found)->id;
	if (array__grow((void **)&s->py, &s->cap_py, s->n_py + 1, sizeof(*s->py)) ||
	    !(f = calloc(1, sizeof(*f))))
		return -1;
	*f = *p;
	f->id = s->n_py;
	f->function = p->function ? strdup(p->function) : NULL;
	f->file = p->file ? strdup(p->file) : NULL;
	if ((p->function && !f->function) || (p->file && !f->file) ||
	    !tsearch(f, &s->py_index, py_frame_cmp)) {
		free(f->function);
		free(f->file);
		free(f);
		return -1;
	}
	s->py[s->n_py] = f;
	return (int64_t)s->n_py++;
}

/* The line frame PF of code object C runs. */
static int py_line(const struct py_layout *l, const struct py_code *c,
		   const struct memtrail_py_frame *pf)
{
	int32_t lasti = (int32_t)(uint32_t)pf->instr, lineno = (int32_t)(pf->instr >> 32);

	if (l->calls != PY_ONE_PER_CALL)
		return pyline__line(c->lt, c->lt_len, c->firstlineno,
				    pf->instr - ((pf->code & ~l->code_tag) + l->code_adaptive));
	/*
	 * 3.10 (PyFrame_GetLineNumber): f_lineno where tracing set it, else
	 * f_lasti's code unit in the table; a frame not started yet (-1) is
	 * at its first line
	 */
	if (lineno > 0)
		return lineno;
	if (lasti < 0)
		return c->firstlineno;
	return pyline__line310(c->lt, c->lt_len, c->firstlineno, (uint64_t)lasti * 2);
}

/* Whether FR is in the interpreter's eval loop (_PyEval_EvalFrameDefault or its .cold part). */
static struct module *eval_frame(struct sites *s, const struct frame *fr)
{
	struct module *m;
	GElf_Addr a;

	if (fr->module < 0)
		return NULL;
	m = &s->modules[fr->module];
	if (!m->py_version || !sites_module_addr(m, fr->offset, &a))
		return NULL;
	a -= 1;	/* return addresses: the call */
	if ((a >= m->py_eval_lo && a < m->py_eval_hi) ||
	    (a >= m->py_eval_cold_lo && a < m->py_eval_cold_hi))
		return m;
	return NULL;
}

/* The interpreter one of FRAMES (N) runs in, with a layout memtrail reads; NULL: none. */
static struct module *py_module(struct sites *s, const struct frame *frames, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		struct module *m = frames[i].module >= 0 ? &s->modules[frames[i].module] : NULL;

		if (m && m->py_version && module_layout(m))
			return m;
	}
	return NULL;
}

/*
 * The end of the Python frames of E from FROM that one eval loop call runs:
 * the index of its shim (3.12 on), or of its first frame (3.10, 3.11), in
 * *END; false where the frames read end first.
 */
static bool py_call_end(const struct py_layout *l, const struct memtrail_event_deep *e,
			uint32_t n_py, uint32_t from, uint32_t *end)
{
	uint32_t j;

	for (j = from; j < n_py; j++)
		if ((l->calls == PY_CSTACK_SHIM && e->py[j].entry >= l->owner_cstack) ||
		    (l->calls == PY_IS_ENTRY && e->py[j].entry) || l->calls == PY_ONE_PER_CALL) {
			*end = j;
			return true;
		}
	return false;
}

/*
 * Whether native frame I of N (stack pointers SPS) is the eval loop call
 * whose shim lies at ADDR: a local of that call, between its stack pointer
 * and its caller's. Any build, stripped or not, whatever its eval loop's
 * parts are named.
 */
static bool shim_in(const uint64_t *sps, int i, int n, uint64_t addr)
{
	return sps && sps[i] && addr >= sps[i] && (i + 1 == n || !sps[i + 1] || addr < sps[i + 1]);
}

void sites_python_interleave(struct sites *s, const struct pid_maps *pm,
			     const struct memtrail_event_deep *e, const uint64_t *sps,
			     struct frame *frames, int *n, int max)
{
	struct frame out[MEMTRAIL_PY_FRAMES + 128];
	uint32_t next = 0, n_py = e->n_py < MEMTRAIL_PY_FRAMES ? e->n_py : MEMTRAIL_PY_FRAMES;
	struct module *m;
	const struct py_layout *l;
	uint64_t code_type;
	int32_t mi;
	int i, o = 0;

	if (e->py_status == MEMTRAIL_PY_NONE || e->py_status == MEMTRAIL_PY_NO_THREAD || !n_py)
		return;
	m = py_module(s, frames, *n);
	if (!m)
		return;
	l = module_layout(m);
	mi = (int32_t)(m - s->modules);
	code_type = module_in_pid(s, pm, mi, m->py_code_type);
	if (!code_type)
		return;
	for (i = 0; i < *n && o < max && o < (int)(sizeof(out) / sizeof(out[0])); i++) {
		uint32_t end = n_py, j;
		bool placed;

		/* a call whose shim no native frame holds (its frames cut off): not placed */
		while (l->calls == PY_CSTACK_SHIM && sps && sps[i] && next < n_py &&
		       py_call_end(l, e, n_py, next, &end) && e->py[end].addr < sps[i])
			next = end + 1;
		if (next >= n_py) {
			out[o++] = frames[i];
			continue;
		}
		/*
		 * a call's frames take the place of its native frame: found by its
		 * shim's address where there is one, by the eval loop's symbols
		 * otherwise (3.10, 3.11; frames read to no shim)
		 */
		if (py_call_end(l, e, n_py, next, &end) && l->calls == PY_CSTACK_SHIM &&
		    sps && sps[i])
			placed = shim_in(sps, i, *n, e->py[end].addr);
		else
			placed = eval_frame(s, &frames[i]) == m;
		if (!placed) {
			out[o++] = frames[i];
			continue;
		}
		if (l->calls != PY_CSTACK_SHIM && end < n_py)
			end++;	/* 3.10, 3.11: the call's first frame is its own */
		for (j = next; j < end && o < max; j++) {
			const struct memtrail_py_frame *pf = &e->py[j];
			struct py_frame p = { 0 };
			const char *why = NULL;
			struct py_code *c = py_code(s, l, pm->pid, pf->code & ~l->code_tag,
						    code_type, &why);
			int64_t id;

			if (c) {
				p.function = c->qualname_s;
				p.file = c->filename_s;
				p.line = py_line(l, c, pf);
			} else {
				p.why = why;
			}
			id = py_frame_id(s, &p);
			if (id >= 0)
				out[o++] = (struct frame){ .addr = (uint64_t)id,
							   .module = SITE_FRAME_PY };
		}
		/* past the shim (3.12 on): the caller's frames are the next call's */
		next = l->calls == PY_CSTACK_SHIM && end < n_py ? end + 1 : end;
	}
	memcpy(frames, out, o * sizeof(*out));
	*n = o;
}

static uint32_t py_code_pid(const void *node)
{
	return ((const struct py_code *)node)->pid;
}

void sites__exec(struct sites *s, uint32_t pid, uint64_t ts_ns)
{
	/* from /proc: its maps are the parent's until read (BPF tells them where it can) */
	struct pid_maps *pm = sites_pid_maps_get(s, pid, !s->maps_told);

	if (pm)
		pm->exec_ns = ts_ns;
	/* the interpreter its parent ran (forked, then exec) is not its own */
	if (pm && pm->py_set) {
		pm->py_set = false;
		tracer__py_proc(s->tracer, pid, NULL);
	}
	sites_python_forget(s, pid);
}

void sites_python_forget(struct sites *s, uint32_t pid)
{
	void **v;
	size_t i, n = sites_tree_take(&s->py_codes, py_code_cmp, pid, py_code_pid, &v);

	for (i = 0; i < n; i++)
		py_code_free(v[i]);
	free(v);
}

void sites_python_destroy(struct sites *s)
{
	size_t i;

	tdestroy(s->py_codes, py_code_free);
	tdestroy(s->py_index, sites_no_free);
	for (i = 0; i < s->n_py; i++) {
		free(s->py[i]->function);
		free(s->py[i]->file);
		free(s->py[i]);
	}
	free(s->py);
}
