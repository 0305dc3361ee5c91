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
#include "pyline.h"
#include "sites_int.h"

/*
 * What memtrail reads of an interpreter's structures: offsets (LP64: x86-64
 * and arm64 alike), from a fixed table (3.11, read from Debian's python3.11
 * with its debug file) or from the interpreter's own _Py_DebugOffsets (3.13).
 */
struct py_layout {
	uint32_t minor;
	struct memtrail_py_proc o;	/* runtime: 0 */
	uint32_t code_firstlineno, code_filename, code_name, code_qualname, code_linetable;
	uint32_t code_adaptive;		/* co_code_adaptive: the instructions */
	uint32_t str_length, str_state;	/* PyASCIIObject: length, state */
	uint32_t ascii_data;		/* sizeof(PyASCIIObject) */
	uint32_t compact_data;		/* sizeof(PyCompactUnicodeObject) */
	/*
	 * frame_entry is the frame's owner (3.12 on): a frame the C stack owns
	 * is the shim each _PyEval_EvalFrameDefault call puts below its
	 * frames; else it is is_entry, set on the first frame of the call
	 */
	bool owner_entry;
};

#define PY_OWNED_BY_CSTACK 3

static const struct py_layout layouts[] = {
	{ .minor = 11,
	  .o = { .runtime_main = 48, .interp_threads = 16, .tstate_next = 8, .tstate_tid = 160,
		 .tstate_cframe = 56, .cframe_current = 8, .frame_code = 32,
		 .frame_previous = 48, .frame_instr = 56, .frame_entry = 68 },
	  .code_firstlineno = 72, .code_filename = 112, .code_name = 120, .code_qualname = 128,
	  .code_linetable = 136, .code_adaptive = 184, .str_length = 16, .str_state = 32,
	  .ascii_data = 48, .compact_data = 72 },
};

/*
 * CPython 3.13's _Py_DebugOffsets, the head of _PyRuntime (its
 * Include/internal/pycore_runtime.h), up to the part memtrail reads. Other
 * minor versions lay it out otherwise (3.14 added fields inside it).
 */
struct py_debug_offsets_313 {
	char cookie[8];		/* "xdebugpy" */
	uint64_t version;	/* Py_Version */
	uint64_t free_threaded;
	struct { uint64_t size, finalizing, interpreters_head; } runtime_state;
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
 * 3.13's layout, from the _Py_DebugOffsets at the head of M's _PyRuntime,
 * as the file holds it (initialized data): NULL where the cookie, the
 * version or an offset is not what a 3.13 interpreter of the default
 * (GIL) build writes.
 */
static struct py_layout *layout_313(struct module *m)
{
	struct py_debug_offsets_313 d;
	struct py_layout *l;

	if (!module_bytes(m, m->py_runtime, &d, sizeof(d)) || memcmp(d.cookie, "xdebugpy", 8) ||
	    d.version != m->py_version || d.free_threaded ||
	    !within(d.thread_state.size, (uint64_t[]){ d.thread_state.next,
			d.thread_state.current_frame, d.thread_state.native_thread_id }, 3) ||
	    !within(d.interpreter_state.size, (uint64_t[]){ d.interpreter_state.threads_head },
		    1) ||
	    !within(d.runtime_state.size, (uint64_t[]){ d.runtime_state.interpreters_head }, 1) ||
	    !within(d.frame.size, (uint64_t[]){ d.frame.previous, d.frame.executable,
			d.frame.instr_ptr }, 3) || d.frame.owner >= d.frame.size ||
	    !within(d.code_object.size, (uint64_t[]){ d.code_object.filename,
			d.code_object.name, d.code_object.qualname, d.code_object.linetable },
		    4) || d.code_object.firstlineno + 4 > d.code_object.size ||
	    d.code_object.co_code_adaptive > d.code_object.size ||
	    !within(d.unicode_object.size, (uint64_t[]){ d.unicode_object.length }, 1) ||
	    d.unicode_object.state + 4 > d.unicode_object.size ||
	    d.unicode_object.asciiobject_size > d.unicode_object.size)
		return NULL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	*l = (struct py_layout){
		.minor = 13,
		.o = { .runtime_main = d.runtime_state.interpreters_head,
		       .interp_threads = d.interpreter_state.threads_head,
		       .tstate_next = d.thread_state.next,
		       .tstate_tid = d.thread_state.native_thread_id,
		       .tstate_cframe = MEMTRAIL_PY_NO_CFRAME,
		       .cframe_current = d.thread_state.current_frame,
		       .frame_code = d.frame.executable, .frame_previous = d.frame.previous,
		       .frame_instr = d.frame.instr_ptr, .frame_entry = d.frame.owner },
		.code_firstlineno = d.code_object.firstlineno,
		.code_filename = d.code_object.filename, .code_name = d.code_object.name,
		.code_qualname = d.code_object.qualname,
		.code_linetable = d.code_object.linetable,
		.code_adaptive = d.code_object.co_code_adaptive,
		.str_length = d.unicode_object.length, .str_state = d.unicode_object.state,
		.ascii_data = d.unicode_object.asciiobject_size,
		/* PyCompactUnicodeObject: utf8_length and utf8 after the ASCII header */
		.compact_data = d.unicode_object.asciiobject_size + 16,
		.owner_entry = true,
	};
	return l;
}

/* M's layout (M an interpreter of version m->py_version), found once; NULL: none known. */
static const struct py_layout *module_layout(struct module *m)
{
	size_t i;

	if (m->py_layout_read)
		return m->py_layout;
	m->py_layout_read = true;
	if ((m->py_version >> 24) != 3)
		return NULL;
	for (i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].minor == ((m->py_version >> 16) & 0xff)) {
			m->py_layout = &layouts[i];
			return m->py_layout;
		}
	if (((m->py_version >> 16) & 0xff) == 13)
		m->py_layout = m->py_layout_own = layout_313(m);
	return m->py_layout;
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
	if (m->py_runtime && m->py_code_type && m->py_eval_lo)
		m->py_version = (uint32_t)version;
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
		log__debug("pid %u runs Python %u.%u (%s): its frames are not read (no "
			   "layout known for it: 3.11 and 3.13 are)", pm->pid,
			   m->py_version >> 24, (m->py_version >> 16) & 0xff, m->name);
		return;
	}
	p = l->o;
	p.runtime = module_in_pid(s, pm, pm->maps[i].module, m->py_runtime);
	if (p.runtime && !tracer__py_proc(s->tracer, pm->pid, &p))
		log__debug("pid %u runs Python 3.%u (%s): its frames are read",
			   pm->pid, l->minor, m->name);
}

void sites_python_note(struct sites *s, struct pid_maps *pm)
{
	size_t i;

	for (i = 0; !pm->py_set && i < pm->n; i++)
		sites_python_note_map(s, pm, i);
}

static bool pid_read(uint32_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };

	return addr && process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)len;
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
	if (l->code_adaptive > sizeof(hdr) || !pid_read(pid, addr, hdr, l->code_adaptive)) {
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

void sites_python_interleave(struct sites *s, const struct pid_maps *pm,
			     const struct memtrail_event_deep *e, struct frame *frames, int *n,
			     int max)
{
	struct frame out[MEMTRAIL_PY_FRAMES + 128];
	uint32_t next = 0, n_py = e->n_py < MEMTRAIL_PY_FRAMES ? e->n_py : MEMTRAIL_PY_FRAMES;
	int i, o = 0;

	if (e->py_status == MEMTRAIL_PY_NONE || e->py_status == MEMTRAIL_PY_NO_THREAD || !n_py)
		return;
	for (i = 0; i < *n && o < max && o < (int)(sizeof(out) / sizeof(out[0])); i++) {
		struct module *m = next < n_py ? eval_frame(s, &frames[i]) : NULL;
		const struct py_layout *l = m ? module_layout(m) : NULL;
		uint64_t code_type = l ? module_in_pid(s, pm, frames[i].module, m->py_code_type) : 0;

		if (!code_type) {
			out[o++] = frames[i];
			continue;
		}
		/* this call's Python frames: up to the one it entered first */
		while (next < n_py && o < max) {
			const struct memtrail_py_frame *pf = &e->py[next++];
			struct py_frame p = { 0 };
			const char *why = NULL;
			struct py_code *c;
			int64_t id;

			/* the shim below this call's frames: the caller's are the next call's */
			if (l->owner_entry && pf->entry == PY_OWNED_BY_CSTACK)
				break;
			c = py_code(s, l, pm->pid, pf->code, code_type, &why);

			if (c) {
				p.function = c->qualname_s;
				p.file = c->filename_s;
				p.line = pyline__line(c->lt, c->lt_len, c->firstlineno,
						       pf->instr - (pf->code + l->code_adaptive));
			} else {
				p.why = why;
			}
			id = py_frame_id(s, &p);
			if (id >= 0)
				out[o++] = (struct frame){ .addr = (uint64_t)id,
							   .module = SITE_FRAME_PY };
			if (!l->owner_entry && pf->entry)
				break;
		}
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
