// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Sites as the trail keeps them (trail_sites.h): each frame named by its
 * module's function symbols (read once, sorted by address) and source
 * lines, heaviest first.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"
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

/*
 * An Arm mapping symbol ("$x", "$d", "$x.42"; also "$a" and "$t" on 32-bit
 * Arm): it marks where code or data begins, and names no function. Local
 * and untyped, it sits at many a function's own address, and after inline
 * data within one: taken as a name, arm64 frames read "$x".
 */
static bool mapping_symbol(const char *name)
{
	return name[0] == '$' && name[1] && strchr("adtx", name[1]) &&
	       (!name[2] || name[2] == '.');
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

		if (!name || !*name || shndx == SHN_UNDEF || mapping_symbol(name) ||
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

bool sites_module_addr(const struct module *m, uint64_t off, GElf_Addr *addr)
{
	GElf_Addr bias;
	size_t i, nph;
	Elf *e = m->mod ? dwfl_module_getelf(m->mod, &bias) : NULL;

	if (!e || elf_getphdrnum(e, &nph))
		return false;
	for (i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, i, &ph) || ph.p_type != PT_LOAD ||
		    off < ph.p_offset || off >= ph.p_offset + ph.p_filesz)
			continue;
		*addr = off - ph.p_offset + ph.p_vaddr + bias;
		return *addr != 0;
	}
	return false;
}

/* The function at LOOKUP in M (a module-relative address) into FR, with its source line. */
static void frame_name(struct module *m, GElf_Addr lookup, struct trail_frame *fr)
{
	struct modsym *ms = module_sym(m, lookup);
	const char *fn = ms ? ms->name : NULL, *src;
	Dwfl_Line *line;
	int lineno;

	if (ms && !ms->demangled) {
		ms->readable = demangle__name(fn, true);
		ms->demangled = true;
	}
	fr->function = strdup(ms && ms->readable ? ms->readable : fn ? fn : "[unknown]");
	/* the name in the file, where the one people read differs (pprof's system name) */
	if (ms && ms->readable)
		fr->symbol = strdup(fn);
	line = dwfl_module_getsrc(m->mod, lookup);
	src = line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
	if (src && asprintf(&fr->source, "%s:%d", src, lineno) < 0)
		fr->source = NULL;
}

/* A frame's symbol, source line and module into FR. */
static void frame_fill(struct sites *s, const struct frame *f, bool return_address,
		       struct trail_frame *fr)
{
	struct module *m;
	GElf_Addr lookup = 0;

	if (f->module == SITE_FRAME_PY) {
		const struct py_frame *p = s->py[f->addr];

		fr->function = strdup(p->function ? p->function : p->why);
		if (p->file && p->line && asprintf(&fr->source, "%s:%d", p->file, p->line) < 0)
			fr->source = NULL;
		else if (p->file && !p->line)
			fr->source = strdup(p->file);
		return;
	}
	fr->has_address = true;
	fr->address = f->addr;
	if (f->module < 0) {
		fr->function = strdup(f->module == -1 ? "[anon]" : "[unknown]");
		return;
	}
	m = &s->modules[f->module];
	fr->module = strdup(m->name);
	fr->offset = f->offset;
	if (m->build_id[0])
		fr->build_id = strdup(m->build_id);
	if (!sites_module_addr(m, f->offset, &lookup)) {
		fr->function = strdup("[unknown]");
		return;
	}
	/* a return address is just past its call: look up the call itself */
	frame_name(m, return_address ? lookup - 1 : lookup, fr);
}

/* F named, appended to SITE's frames (left out when memory runs out). */
static void add_frame(struct sites *s, struct trail_site *site, const struct frame *f,
		      bool return_address)
{
	struct trail_frame *fr = trail_site__add_frame(site);

	if (fr)
		frame_fill(s, f, return_address, fr);
}

static void site_frames(struct sites *s, uint32_t pid, const struct site *e,
			struct trail_site *site)
{
	const struct memtrail_site_key *k = &e->key;
	const struct stack *st = k->stack >= 0 ? sites_stack_get(s, pid, k->stack) :
				 site_deep(k->stack) ? sites_stack_find(s, pid, k->stack) : NULL;
	struct trail_frame *fr;
	uint32_t i;

	if (!st || !st->n) {
		fr = trail_site__add_frame(site);
		if (fr)
			fr->function = strdup(k->stack >= 0 || site_deep(k->stack) ? "[unknown]" :
					      k->stack == MEMTRAIL_STACK_SMALL ? SITES_SMALL_LABEL :
					      "[no stack]");
		return;
	}
	site->frames_truncated = st->truncated;
	for (i = 0; i < st->n; i++) {
		/* stacks of faults start at the faulting instruction; others at returns */
		add_frame(s, site, &st->frames[i], i > 0 || k->kind != MEMTRAIL_SITE_FAULTS);
		/* the caller a frameless innermost function hid, unless the walk found it */
		if (!i && e->caller.module >= 0 && (st->n < 2 || st->frames[1].addr != e->caller.addr))
			add_frame(s, site, &e->caller, true);
	}
}

void sites__stack_frames(struct sites *s, uint32_t pid, int32_t stack, struct trail_site *site)
{
	struct site e = { .key = { .tgid = pid, .kind = site->kind, .stack = stack },
			  .caller = { .module = -2 } };

	site_frames(s, pid, &e, site);
}

struct trail_sites *sites__collect(struct sites *s, const struct trail_target *tt)
{
	struct trail_sites *ts = trail_sites__new();
	char buf[32];
	size_t i;

	for (i = 0; ts && i < s->n_list; i++) {
		const struct site *e = s->list[i];
		struct trail_site *site;

		if (e->key.tgid != tt->pid || !e->v.alloc_bytes)
			continue;
		if (!(site = trail_sites__add(ts)))
			break;
		site->kind = (int)e->key.kind;
		if (e->key.phase & SITE_FOLDED) {
			/* phases beyond the trail's lists, by name */
			site->phase = strdup(tt->phases.aggs[e->key.phase & ~SITE_FOLDED].name);
			site->folded = true;
		} else {
			site->phase = strdup(trail__phase_name(tt, e->key.phase, buf, sizeof(buf)));
			site->phase_seq = e->key.phase;
		}
		site->alloc_bytes = e->v.alloc_bytes;
		site->alloc_objects = (double)e->v.alloc_objects / MEMTRAIL_OBJ_ONE;
		site->inuse_bytes = e->v.alloc_bytes > e->v.free_bytes ?
				    e->v.alloc_bytes - e->v.free_bytes : 0;
		site->inuse_objects = e->v.alloc_objects > e->v.free_objects ?
				      (double)(e->v.alloc_objects - e->v.free_objects) /
				      MEMTRAIL_OBJ_ONE : 0.0;
		site->samples = e->v.samples;
		site_frames(s, tt->pid, e, site);
	}
	if (ts && !ts->n) {
		trail_sites__free(ts);
		return NULL;
	}
	if (ts)
		trail_sites__sort(ts);
	return ts;
}
