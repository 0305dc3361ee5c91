// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Python frames in deep stacks. A target whose code mappings include a
 * CPython interpreter memtrail knows (sites_pylayout.c: its symbols, a
 * version whose structures it knows) is told to BPF, which reads the
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
#include "sites_pylayout.h"

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

/*
 * 3.10's thread states hold pthread_self(), not the kernel's id: whether
 * the main thread's (_PyRuntime.main_thread, once the runtime is set up)
 * holds PID's id where glibc keeps it. True where it cannot tell yet.
 */
static bool pthread_tid_known(uint32_t pid, const struct py_layout *l, uint64_t runtime)
{
	struct proc_status st;
	uint64_t main_thread = 0;
	uint32_t tid = 0;

	if (l->o.pthread_tid == MEMTRAIL_PY_TID_NATIVE)
		return true;
	if (!pid_read(pid, runtime + l->runtime_main_thread, &main_thread, 8) || !main_thread)
		return true;
	if (proc__status(pid, &st) || !st.ns_pid)
		return true;
	return pid_read(pid, main_thread + l->o.pthread_tid, &tid, 4) && tid == st.ns_pid;
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
 * version, each further process in the debug log; told (sites__on_py_unread).
 */
static void py_unread(struct sites *s, uint32_t pid, const struct module *m, const char *why)
{
	uint32_t minor = (m->py_version >> 16) & 0xff;
	char comm[32] = "?", version[48];

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

	/* a mapping of before an exec (the parent's, copied at the fork) is not this program's */
	if (pm->py_set || pm->maps[i].module < 0 || pm->maps[i].before_exec)
		return;
	m = &s->modules[pm->maps[i].module];
	sites_py_module(m);
	if (!m->py_version)
		return;
	pm->py_set = true;
	l = sites_py_layout(m);
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

		if (m && m->py_version && sites_py_layout(m))
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
	l = sites_py_layout(m);
	mi = (int32_t)(m - s->modules);
	code_type = module_in_pid(s, pm, mi, m->py_code_type);
	if (!code_type)
		return;
	for (i = 0; i < *n && o < max && o < (int)(sizeof(out) / sizeof(out[0])); i++) {
		bool by_stack, placed;
		uint32_t end, j;

		/*
		 * the next call's frames, to END: placed by its shim's address
		 * where it has one and the stack is known, by the eval loop's
		 * symbols otherwise (3.10, 3.11; frames read to no shim); a call
		 * whose shim lies below this frame has no native frame left
		 * (its frames cut off) and is not placed
		 */
		for (;;) {
			end = n_py;
			by_stack = py_call_end(l, e, n_py, next, &end) &&
				   l->calls == PY_CSTACK_SHIM && sps && sps[i];
			if (!by_stack || e->py[end].addr >= sps[i])
				break;
			next = end + 1;
		}
		if (next >= n_py) {
			out[o++] = frames[i];
			continue;
		}
		placed = by_stack ? shim_in(sps, i, *n, e->py[end].addr) :
				    eval_frame(s, &frames[i]) == m;
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
	size_t i;

	if (pm)
		pm->exec_ns = ts_ns;
	/* kept for samples of before it; never this program's interpreter */
	for (i = 0; pm && i < pm->n; i++)
		pm->maps[i].before_exec = true;
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
