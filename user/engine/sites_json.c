// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Sites as the trail keeps them: each frame named by its module's function
 * symbols (read once, sorted by address) and source lines, heaviest first.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "array.h"
#include "demangle.h"
#include "kinds.h"
#include "sanitize.h"
#include "sites_int.h"

static int modsym_cmp(const void *a, const void *b)
{
	const struct modsym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->rank - y->rank;
}

static int sym_rank(const GElf_Sym *sym)
{
	switch (GELF_ST_BIND(sym->st_info)) {
	case STB_GLOBAL: return 0;
	case STB_WEAK: return 1;
	default: return 2;
	}
}

/* M's function symbols, sorted: once per module. */
static void module_read_syms(struct module *m)
{
	int i, n;

	m->syms_read = true;
	n = m->mod ? dwfl_module_getsymtab(m->mod) : -1;
	if (n <= 0 || !(m->syms = calloc((size_t)n, sizeof(*m->syms))))
		return;
	for (i = 0; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		const char *name = dwfl_module_getsym_info(m->mod, i, &sym, &addr, &shndx,
							   NULL, NULL);
		int type = GELF_ST_TYPE(sym.st_info);

		if (!name || !*name || shndx == SHN_UNDEF ||
		    (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE))
			continue;
		m->syms[m->n_syms++] = (struct modsym){ .addr = addr, .size = sym.st_size,
							.name = name, .rank = sym_rank(&sym) };
	}
	qsort(m->syms, m->n_syms, sizeof(*m->syms), modsym_cmp);
}

/*
 * The function of M at ADDR (module-relative, as libdw's): the symbol that
 * contains it, else the nearest before it that has no size; NULL: none.
 */
static struct modsym *module_sym(struct module *m, GElf_Addr addr)
{
	size_t lo = 0, hi, at, i;

	if (!m->syms_read)
		module_read_syms(m);
	hi = m->n_syms;
	while (lo < hi) {	/* the first symbol above ADDR */
		size_t mid = lo + (hi - lo) / 2;

		if (m->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	at = lo - 1;
	/* among those at one address, the best ranked (sorted first) */
	while (at > 0 && m->syms[at - 1].addr == m->syms[at].addr)
		at--;
	/* nested or overlapping symbols: a few back, the one that contains ADDR */
	for (i = 0; i < 8 && i <= at; i++) {
		struct modsym *c = &m->syms[at - i];

		if (addr < c->addr + c->size || (!c->size && !i))
			return c;
	}
	return NULL;
}

/* A frame's symbol, source line and module into OBJ. */
static void frame_json(struct sites *s, const struct frame *fr, bool return_address, json_t *o)
{
	struct module *m;
	GElf_Addr bias, lookup;
	struct modsym *ms;
	const char *fn = NULL, *src;
	char *readable;
	Dwfl_Line *line;
	size_t i, nph;
	int lineno;
	Elf *e;

	json_object_set_new(o, "address", json_sprintf("0x%" PRIx64, fr->addr));
	if (fr->module < 0) {
		json_object_set_new(o, "function", json_string(fr->module == -1 ? "[anon]" :
							       "[unknown]"));
		return;
	}
	m = &s->modules[fr->module];
	json_object_set_new(o, "module", sanitize__json(m->name));
	json_object_set_new(o, "offset", json_sprintf("0x%" PRIx64, fr->offset));
	if (m->build_id[0])
		json_object_set_new(o, "build_id", json_string(m->build_id));
	e = m->mod ? dwfl_module_getelf(m->mod, &bias) : NULL;
	if (!e || elf_getphdrnum(e, &nph)) {
		json_object_set_new(o, "function", json_string("[unknown]"));
		return;
	}
	lookup = 0;
	for (i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, i, &ph) || ph.p_type != PT_LOAD ||
		    fr->offset < ph.p_offset || fr->offset >= ph.p_offset + ph.p_filesz)
			continue;
		lookup = fr->offset - ph.p_offset + ph.p_vaddr + bias;
		break;
	}
	if (!lookup) {
		json_object_set_new(o, "function", json_string("[unknown]"));
		return;
	}
	/* a return address is just past its call: look up the call itself */
	if (return_address)
		lookup--;
	ms = module_sym(m, lookup);
	fn = ms ? ms->name : NULL;
	if (ms && !ms->demangled) {
		ms->readable = demangle__name(fn, true);
		ms->demangled = true;
	}
	readable = ms ? ms->readable : NULL;
	json_object_set_new(o, "function", sanitize__json(readable ? readable : fn ? fn : "[unknown]"));
	/* the name in the file, where the one people read differs (pprof's system name) */
	if (readable)
		json_object_set_new(o, "symbol", sanitize__json(fn));
	line = dwfl_module_getsrc(m->mod, lookup);
	src = line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
	if (src) {
		char *where;

		if (asprintf(&where, "%s:%d", src, lineno) >= 0) {
			json_object_set_new(o, "source", sanitize__json(where));
			free(where);
		}
	}
}

static json_t *frames_json(struct sites *s, uint32_t pid, const struct site *e)
{
	const struct memtrail_site_key *k = &e->key;
	const struct stack *st = k->stack >= 0 ? sites_stack_find(s, pid, k->stack) : NULL;
	json_t *a = json_array();
	uint32_t i;

	if (!st || !st->n) {
		json_array_append_new(a, json_pack("{s:s}", "function",
						   k->stack >= 0 ? "[unknown]" : "[no stack]"));
		return a;
	}
	for (i = 0; i < st->n; i++) {
		json_t *o = json_object();

		/* stacks of faults start at the faulting instruction; others at returns */
		frame_json(s, &st->frames[i], i > 0 || k->kind != MEMTRAIL_SITE_FAULTS, o);
		json_array_append_new(a, o);
		/* the caller a frameless innermost function hid, unless the walk found it */
		if (!i && e->caller.module >= 0 && (st->n < 2 || st->frames[1].addr != e->caller.addr)) {
			o = json_object();
			frame_json(s, &e->caller, true, o);
			json_array_append_new(a, o);
		}
	}
	return a;
}

static const char *site_kind_name(uint32_t kind)
{
	return kind == MEMTRAIL_SITE_FAULTS ? "faults" : kind__name(kind);
}

static int by_bytes(const void *a, const void *b)
{
	const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	json_int_t bx = json_integer_value(json_object_get(x, "alloc_bytes"));
	json_int_t by = json_integer_value(json_object_get(y, "alloc_bytes"));

	return bx < by ? 1 : bx > by ? -1 : 0;
}

json_t *sites__json(struct sites *s, const struct trail_target *tt)
{
	json_t **rows = NULL, *list;
	size_t i, n = 0, cap = 0;
	char buf[32];

	for (i = 0; i < s->n_list; i++) {
		const struct site *e = s->list[i];
		const struct stack *st;
		json_t *o;

		if (e->key.tgid != tt->pid || !e->v.alloc_bytes)
			continue;
		if (array__grow((void **)&rows, &cap, n + 1, sizeof(*rows)))
			break;
		o = json_object();
		json_object_set_new(o, "kind", json_string(site_kind_name(e->key.kind)));
		if (e->key.phase & SITE_FOLDED) {
			/* phases beyond the trail's lists, by name */
			json_object_set_new(o, "phase", sanitize__json(
				tt->phases.aggs[e->key.phase & ~SITE_FOLDED].name));
			json_object_set_new(o, "phase_seq", json_null());
			json_object_set_new(o, "folded", json_true());
		} else {
			json_object_set_new(o, "phase", sanitize__json(trail__phase_name(
				tt, e->key.phase, buf, sizeof(buf))));
			json_object_set_new(o, "phase_seq", json_integer(e->key.phase));
		}
		json_object_set_new(o, "alloc_bytes", json_integer(e->v.alloc_bytes));
		json_object_set_new(o, "alloc_objects",
				    json_real((double)e->v.alloc_objects / MEMTRAIL_OBJ_ONE));
		json_object_set_new(o, "inuse_bytes",
				    json_integer(e->v.alloc_bytes > e->v.free_bytes ?
						 e->v.alloc_bytes - e->v.free_bytes : 0));
		json_object_set_new(o, "inuse_objects",
				    json_real(e->v.alloc_objects > e->v.free_objects ?
					      (double)(e->v.alloc_objects - e->v.free_objects) /
					      MEMTRAIL_OBJ_ONE : 0.0));
		json_object_set_new(o, "samples", json_integer(e->v.samples));
		json_object_set_new(o, "frames", frames_json(s, tt->pid, e));
		st = e->key.stack >= 0 ? sites_stack_find(s, tt->pid, e->key.stack) : NULL;
		if (st && st->truncated)
			json_object_set_new(o, "frames_truncated", json_true());
		rows[n++] = o;
	}
	if (!n) {
		free(rows);
		return NULL;
	}
	qsort(rows, n, sizeof(*rows), by_bytes);
	list = json_array();
	for (i = 0; i < n; i++)
		json_array_append_new(list, rows[i]);
	free(rows);
	return json_pack("{s:o}", "list", list);
}
