// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <inttypes.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/sysmacros.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>

#include "array.h"
#include "demangle.h"
#include "kinds.h"
#include "pidmap.h"
#include "proc.h"
#include "sanitize.h"
#include "sites.h"

/* The phase of a folded site: this bit and the index of its phase's aggregate. */
#define SITE_FOLDED 0x80000000u

/* A function symbol of a module, by address (names are libdw's, live while its Dwfl is). */
struct modsym {
	GElf_Addr addr, size;
	const char *name;
	char *readable;		/* demangled, made on first use; NULL: not mangled or not yet */
	int rank;		/* which of several at one address is named: global, weak, local */
	bool demangled;
};

/* A file some target mapped code from, opened once for its symbols. */
struct module {
	char *name;		/* as the kernel names it in the target's maps */
	uint64_t dev, ino;
	/*
	 * The file the kernel maps, as BPF names it: on overlayfs the layer's,
	 * not the one maps shows; learnt where both name one mapping. 0: unknown
	 */
	uint64_t real_dev, real_ino;
	Dwfl *dwfl;		/* NULL: could not be opened */
	Dwfl_Module *mod;
	char build_id[41];
	/*
	 * Its symbols sorted by address, read once: libdw's own lookup walks
	 * every symbol, and a large library (libtorch_cpu, 10^5 symbols) times
	 * 10^5 frames took a minute to write one trail.
	 */
	struct modsym *syms;
	size_t n_syms;
	bool syms_read;
};

/* One frame: a module and an offset in its file, or an address outside files. */
struct frame {
	uint64_t addr;
	int32_t module;		/* index in modules; -1: anonymous or JIT code; -2: unknown */
	uint64_t offset;	/* file offset */
};

struct stack {
	uint32_t pid;
	int32_t id;
	struct frame *frames;
	uint32_t n;
	bool truncated;	/* cut at a frame that is no code, or no return address */
};

struct site {
	struct memtrail_site_key key;
	struct memtrail_site v;
	struct frame caller;	/* key.caller resolved; module -2: not a call site */
	bool resolved;
};

#define PID_MAPS_MAX 8192	/* executable mappings kept per process, unmapped ones too */
#define TOLD_MAX 1024		/* mappings BPF told of files not matched yet */

struct pid_maps {
	uint32_t pid;
	uint64_t gen;	/* the harvest that read them last */
	struct map {
		unsigned long long start, end, pgoff;
		int32_t module;	/* -1: anonymous */
	} *maps;
	size_t n, cap;
};

struct sites {
	struct tracer *tracer;
	struct module *modules;
	size_t n_modules, cap_modules;
	struct stack **stacks;
	size_t n_stacks, cap_stacks;
	void *stack_index;	/* tsearch tree of stacks by (pid, id) */
	struct site **list;
	size_t n_list, cap_list;
	void *site_index;	/* tsearch tree of list by key */
	uint64_t gen;		/* harvests so far */
	struct trail *trail;	/* its targets' phases, for folding */
	struct memtrail_site_key *fold;	/* kernel sites to fold, this harvest */
	size_t n_fold, cap_fold;
	struct pid_maps *pids;
	size_t n_pids, cap_pids;
	struct pidmap pid_index;	/* pid -> its pids entry: looked up per event */
	/*
	 * Mappings BPF told of files known by no module yet under BPF's name
	 * (overlayfs: the layer's file, maps the overlay's): kept until a read
	 * of maps shows one of them, which teaches the module its BPF name;
	 * the oldest dropped when full
	 */
	struct told_map {
		uint32_t pid;
		unsigned long long start, end, pgoff;
		uint64_t dev, ino;
	} told[TOLD_MAX];
	size_t n_told;
	/* while retiring (sites__retire): the pids whose sites are read, sorted; NULL: all */
	const uint32_t *only;
	size_t n_only;
};

static const Dwfl_Callbacks offline_callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
};

int sites__open(struct sites **out, struct tracer *t, struct trail *trail)
{
	struct sites *s = calloc(1, sizeof(*s));

	*out = s;
	if (!s)
		return -ENOMEM;
	s->tracer = t;
	s->trail = trail;
	return 0;
}

/* A module's device as maps shows it, major:minor */
#define DEV_KEY(maj, min) (((uint64_t)(maj) << 32) | (min))

static int32_t module_find(const struct sites *s, const char *name, uint64_t dev, uint64_t ino)
{
	size_t i;

	for (i = 0; i < s->n_modules; i++)
		if (s->modules[i].dev == dev && s->modules[i].ino == ino &&
		    !strcmp(s->modules[i].name, name))
			return i;
	return -1;
}

/* A new module NAME, its symbols read from OPEN_PATH ("": none). */
static int32_t module_add(struct sites *s, const char *name, const char *open_path, uint64_t dev,
			  uint64_t ino)
{
	const unsigned char *bits;
	struct module *m;
	GElf_Addr vaddr;
	size_t i;
	int n;

	if (array__grow((void **)&s->modules, &s->cap_modules, s->n_modules + 1,
			sizeof(*s->modules)))
		return -2;
	m = &s->modules[s->n_modules];
	memset(m, 0, sizeof(*m));
	m->name = strdup(name);
	if (!m->name)
		return -2;
	m->dev = dev;
	m->ino = ino;
	/* opened now, through the target's root: it may be gone when the trail is written */
	m->dwfl = dwfl_begin(&offline_callbacks);
	if (m->dwfl) {
		m->mod = dwfl_report_offline(m->dwfl, name, open_path, -1);
		dwfl_report_end(m->dwfl, NULL, NULL);
		if (!m->mod) {
			dwfl_end(m->dwfl);
			m->dwfl = NULL;
		}
	}
	if (m->mod) {
		n = dwfl_module_build_id(m->mod, &bits, &vaddr);
		for (i = 0; n > 0 && i < (size_t)n && i < 20; i++)
			snprintf(m->build_id + 2 * i, 3, "%02x", bits[i]);
	}
	return s->n_modules++;
}

static struct pid_maps *pid_maps_get(struct sites *s, uint32_t pid, bool create)
{
	struct pid_maps *p;
	size_t i;

	if (pidmap__get(&s->pid_index, pid, &i))
		return &s->pids[i];
	if (!create || array__grow((void **)&s->pids, &s->cap_pids, s->n_pids + 1,
				   sizeof(*s->pids)) ||
	    pidmap__put(&s->pid_index, pid, s->n_pids))
		return NULL;
	p = &s->pids[s->n_pids++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	return p;
}

/*
 * The maps just read (from OLD on) first, then those of before that none of
 * them overlaps: code unmapped since (a library closed) still names the
 * frames of stacks taken while it was there.
 */
static void maps_keep_unmapped(struct pid_maps *p, size_t old)
{
	size_t i, j, kept = 0, n_new = p->n - old;
	struct map *m = malloc(p->n * sizeof(*m));

	if (!m) {
		memmove(p->maps, p->maps + old, n_new * sizeof(*p->maps));
		p->n = n_new;
		return;
	}
	memcpy(m, p->maps + old, n_new * sizeof(*m));
	for (i = 0; i < old && n_new + kept < PID_MAPS_MAX; i++) {
		for (j = 0; j < n_new; j++)
			if (p->maps[i].start < m[j].end && m[j].start < p->maps[i].end)
				break;
		if (j == n_new)
			m[n_new + kept++] = p->maps[i];
	}
	memcpy(p->maps, m, (n_new + kept) * sizeof(*m));
	p->n = n_new + kept;
	free(m);
}

static void told_learn(struct sites *s, uint32_t pid);

void sites__note_maps(struct sites *s, uint32_t pid)
{
	char name[64], line[4096 + 128], full[32], perms[8];
	unsigned long long start, end, pgoff, inode;
	struct proc_map_line pm;
	unsigned int maj, min;
	struct pid_maps *p;
	size_t old;
	FILE *f;
	int pos, fd;

	snprintf(name, sizeof(name), "/proc/%u/maps", pid);
	f = fopen(name, "re");
	if (!f)
		return;		/* gone: the last mappings seen stay */
	p = pid_maps_get(s, pid, true);
	if (!p) {
		fclose(f);
		return;
	}
	/* read after the mappings kept: a zombie's maps read empty, and those stay */
	old = p->n;
	while (fgets(line, sizeof(line), f)) {
		struct map *m;

		line[strcspn(line, "\n")] = '\0';
		pos = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &pgoff,
			   &maj, &min, &inode, &pos) < 7 || perms[2] != 'x')
			continue;
		if (array__grow((void **)&p->maps, &p->cap, p->n + 1, sizeof(*p->maps)))
			break;
		m = &p->maps[p->n++];
		*m = (struct map){ start, end, pgoff, -1 };
		if (!pos || line[pos] != '/' || !inode)
			continue;	/* anonymous: JIT code, or [vdso] and the like */
		m->module = module_find(s, line + pos, DEV_KEY(maj, min), inode);
		if (m->module >= 0)
			continue;
		/* opened as mapped: its symbols are never read from another file */
		pm = (struct proc_map_line){ .start = start, .end = end, .dev = makedev(maj, min),
					     .ino = inode, .path = line + pos };
		fd = proc__open_mapped(pid, &pm, full, sizeof(full));
		m->module = module_add(s, line + pos, fd >= 0 ? full : "",
				       DEV_KEY(maj, min), inode);
		if (fd >= 0)
			close(fd);	/* libdw opened its own */
	}
	fclose(f);
	if (p->n > old)
		maps_keep_unmapped(p, old);
	told_learn(s, pid);
}

void sites__fork(struct sites *s, uint32_t parent, uint32_t child)
{
	struct pid_maps *c, *p;

	sites__note_maps(s, child);
	c = pid_maps_get(s, child, false);
	if (c && c->n)
		return;
	/*
	 * gone already (or a zombie, whose maps read empty): its code lay
	 * where its parent's does now, read now (those read at the parent's
	 * exec may be from before its dynamic linker mapped a library)
	 */
	sites__note_maps(s, parent);
	c = pid_maps_get(s, child, true);
	/* the parent's looked up after: the child's creation may move the array */
	p = pid_maps_get(s, parent, false);
	if (!c || !p || !p->n || c->n ||
	    array__grow((void **)&c->maps, &c->cap, p->n, sizeof(*c->maps)))
		return;
	memcpy(c->maps, p->maps, p->n * sizeof(*c->maps));
	c->n = p->n;
}

/* The module of the file BPF names (DEV as maps shows devices, INO), or -1. */
static int32_t module_of_told(const struct sites *s, uint64_t dev, uint64_t ino)
{
	size_t i;

	for (i = 0; i < s->n_modules; i++)
		if ((s->modules[i].dev == dev && s->modules[i].ino == ino) ||
		    (s->modules[i].real_dev == dev && s->modules[i].real_ino == ino))
			return i;
	return -1;
}

/* PID's code at START..END (file offset PGOFF, in bytes) is module MOD. */
static void map_insert(struct sites *s, uint32_t pid, unsigned long long start,
		       unsigned long long end, unsigned long long pgoff, int32_t mod)
{
	struct pid_maps *p = pid_maps_get(s, pid, true);
	size_t i, n = 0;

	if (!p)
		return;
	/* the same mapping told again (each library its dynamic linker loads) */
	for (i = 0; i < p->n; i++)
		if (p->maps[i].start == start && p->maps[i].end == end &&
		    p->maps[i].module == mod && p->maps[i].pgoff == pgoff)
			return;
	/* what it replaces goes: code mapped over */
	for (i = 0; i < p->n; i++)
		if (p->maps[i].start >= end || start >= p->maps[i].end)
			p->maps[n++] = p->maps[i];
	p->n = n;
	if (p->n >= PID_MAPS_MAX ||
	    array__grow((void **)&p->maps, &p->cap, p->n + 1, sizeof(*p->maps)))
		return;
	p->maps[p->n++] = (struct map){ start, end, pgoff, mod };
}

/*
 * After a read of PID's maps: a mapping BPF told of it that maps showed too
 * names its module under BPF's name; then every told mapping of a file now
 * known finds its process's maps (that process may be long gone).
 */
static void told_learn(struct sites *s, uint32_t pid)
{
	struct pid_maps *p = pid_maps_get(s, pid, false);
	bool learnt = false;
	size_t i, j, n = 0;
	int32_t mod;

	for (i = 0; p && i < s->n_told; i++) {
		struct told_map *t = &s->told[i];

		for (j = 0; t->pid == pid && j < p->n; j++) {
			mod = p->maps[j].module;
			if (p->maps[j].start != t->start || p->maps[j].end != t->end ||
			    p->maps[j].pgoff != t->pgoff || mod < 0)
				continue;
			s->modules[mod].real_dev = t->dev;
			s->modules[mod].real_ino = t->ino;
			learnt = true;
			break;
		}
	}
	if (!learnt)
		return;
	for (i = 0; i < s->n_told; i++) {
		struct told_map t = s->told[i];

		mod = module_of_told(s, t.dev, t.ino);
		if (mod >= 0)
			map_insert(s, t.pid, t.start, t.end, t.pgoff, mod);
		else
			s->told[n++] = t;
	}
	s->n_told = n;
}

void sites__add_map(struct sites *s, const struct memtrail_event_map *e)
{
	/* the kernel's dev_t: major << 20 | minor */
	uint64_t dev = DEV_KEY(e->dev >> 20, e->dev & 0xfffff);
	/* maps gives the offset in bytes, the kernel's vm_pgoff counts pages */
	unsigned long long pgoff = e->pgoff * (unsigned long long)sysconf(_SC_PAGESIZE);
	int32_t mod = module_of_told(s, dev, e->ino);

	if (mod >= 0) {
		map_insert(s, e->hdr.tgid, e->start, e->end, pgoff, mod);
		return;
	}
	/* a file not known under this name yet: until a read of maps shows it */
	if (s->n_told == TOLD_MAX)
		memmove(s->told, s->told + 1, --s->n_told * sizeof(*s->told));
	s->told[s->n_told++] = (struct told_map){ e->hdr.tgid, e->start, e->end, pgoff, dev,
						  e->ino };
	told_learn(s, e->hdr.tgid);
}

static int stack_cmp(const void *a, const void *b)
{
	const struct stack *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static int site_cmp(const void *a, const void *b)
{
	return memcmp(&((const struct site *)a)->key, &((const struct site *)b)->key,
		      sizeof(struct memtrail_site_key));
}

static struct stack *stack_find(struct sites *s, uint32_t pid, int32_t id)
{
	struct stack probe = { .pid = pid, .id = id };
	void *found = tfind(&probe, &s->stack_index, stack_cmp);

	return found ? *(struct stack **)found : NULL;
}

static void frame_resolve(const struct pid_maps *pm, uint64_t addr, struct frame *fr)
{
	size_t j;

	fr->addr = addr;
	fr->module = -2;
	for (j = 0; pm && j < pm->n; j++) {
		const struct map *m = &pm->maps[j];

		if (addr < m->start || addr >= m->end)
			continue;
		fr->module = m->module;
		fr->offset = addr - m->start + m->pgoff;
		return;
	}
}

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

/* Whether the code just before file offset OFF of module M is a call instruction. */
static bool after_call(const struct module *m, uint64_t off)
{
	const unsigned char *b;
	GElf_Addr bias;
	size_t size = 0;
	Elf *e = m->mod ? dwfl_module_getelf(m->mod, &bias) : NULL;
	int k;

	b = e ? (const unsigned char *)elf_rawfile(e, &size) : NULL;
	if (!b || off < 8 || off > size)
		return false;
	b += off;
#if defined(__x86_64__)
	if (b[-5] == 0xe8)
		return true;			/* call rel32 */
	for (k = 2; k <= 7; k++)		/* call r/m64: ff /2 */
		if (b[-k] == 0xff && ((b[-k + 1] >> 3) & 7) == 2)
			return true;
	return false;
#elif defined(__aarch64__)
	{
		uint32_t insn;

		(void)k;
		memcpy(&insn, b - 4, 4);
		return (insn & 0xfc000000) == 0x94000000 ||	/* bl */
		       (insn & 0xfffffc1f) == 0xd63f0000;	/* blr */
	}
#else
	(void)k;
	return false;
#endif
}

/* Whether OFF of M can be a return address: just after a call (true when M cannot be read). */
static bool return_address_ok(const struct module *m, uint64_t off)
{
	GElf_Addr bias;
	size_t size = 0;
	Elf *e = m->mod ? dwfl_module_getelf(m->mod, &bias) : NULL;

	if (!e || !elf_rawfile(e, &size) || off > size)
		return true;
	return after_call(m, off);
}

static void stack_resolve(struct sites *s, uint32_t pid, int32_t id)
{
	uint64_t ips[MEMTRAIL_SITE_DEPTH];
	struct pid_maps *pm = pid_maps_get(s, pid, false);
	struct stack *st;
	int n, i;

	if (id < 0 || stack_find(s, pid, id))
		return;
	n = tracer__stack(s->tracer, id, ips);
	if (n <= 0 || array__grow((void **)&s->stacks, &s->cap_stacks, s->n_stacks + 1,
				  sizeof(*s->stacks)))
		return;
	st = calloc(1, sizeof(*st));
	if (!st)
		return;
	st->frames = calloc(n, sizeof(*st->frames));
	if (!st->frames) {
		free(st);
		return;
	}
	st->pid = pid;
	st->id = id;
	st->n = n;
	for (i = 0; i < n; i++)
		frame_resolve(pm, ips[i], &st->frames[i]);
	/*
	 * A walk by frame pointers through code built without them reads
	 * whatever the register held: no frame is shown past one that is in no
	 * executable mapping, or (a caller's frame) not just after a call.
	 */
	for (i = 0; pm && pm->n && i < n; i++) {
		const struct frame *fr = &st->frames[i];

		if (fr->module == -2 || (i > 0 && fr->module >= 0 &&
					 !return_address_ok(&s->modules[fr->module], fr->offset))) {
			st->n = i;
			st->truncated = true;
			break;
		}
	}
	if (!tsearch(st, &s->stack_index, stack_cmp)) {
		free(st->frames);
		free(st);
		return;
	}
	s->stacks[s->n_stacks++] = st;
}

/*
 * The user-space entry of key K, made if new (its stack resolved against
 * the target's mappings now, once a harvest, while it lives). NULL when
 * out of memory.
 */
static struct site *site_entry(struct sites *s, const struct memtrail_site_key *k)
{
	struct site probe = { .key = *k }, *e;
	struct pid_maps *pm;
	void *found = tfind(&probe, &s->site_index, site_cmp);

	if (found) {
		e = *(struct site **)found;
	} else {
		if (array__grow((void **)&s->list, &s->cap_list, s->n_list + 1, sizeof(*s->list)))
			return NULL;
		e = calloc(1, sizeof(*e));
		if (!e)
			return NULL;
		e->key = *k;
		if (!tsearch(e, &s->site_index, site_cmp)) {
			free(e);
			return NULL;
		}
		s->list[s->n_list++] = e;
	}
	if (e->resolved && (k->stack < 0 || stack_find(s, k->tgid, k->stack)))
		return e;
	pm = pid_maps_get(s, k->tgid, false);
	/* a retiring pid's maps are another process's, if any: the ones kept stay */
	if (!s->only && (!pm || pm->gen != s->gen)) {
		sites__note_maps(s, k->tgid);
		pm = pid_maps_get(s, k->tgid, false);
		if (pm)
			pm->gen = s->gen;
	}
	stack_resolve(s, k->tgid, k->stack);
	e->resolved = true;
	e->caller.module = -2;
	if (k->caller) {
		frame_resolve(pm, k->caller, &e->caller);
		if (e->caller.module < 0 || !after_call(&s->modules[e->caller.module],
							 e->caller.offset))
			e->caller.module = -2;
	}
	return e;
}

static void site_remove(struct sites *s, struct site *e)
{
	size_t i;

	tdelete(e, &s->site_index, site_cmp);
	for (i = 0; i < s->n_list; i++) {
		if (s->list[i] == e) {
			s->list[i] = s->list[--s->n_list];
			break;
		}
	}
	free(e);
}

/*
 * Whether a site of phase SEQ of target PID folds: the phase is closed and
 * listed neither among the first nor the recent phases of the trail, so
 * its sites join those of its name, as the phase joined its aggregate.
 */
static bool site_folds(struct sites *s, uint32_t pid, uint32_t seq)
{
	const struct trail_target *tt = s->trail ? trail__find_target(s->trail, pid) :
				       NULL;
	const struct phase_log *l = tt ? &tt->phases : NULL;

	return l && l->keep_recent && seq < l->n_closed && seq >= l->keep_first &&
	       tt->phase_seq - seq > l->keep_recent;
}

static void on_site(void *ctx, const struct memtrail_site_key *k, const struct memtrail_site *v)
{
	struct sites *s = ctx;
	struct site *e;

	if (s->only && !array__u32_has(s->only, s->n_only, k->tgid))
		return;
	if (site_folds(s, k->tgid, k->phase)) {
		if (!array__grow((void **)&s->fold, &s->cap_fold, s->n_fold + 1, sizeof(*s->fold)))
			s->fold[s->n_fold++] = *k;
		return;
	}
	e = site_entry(s, k);
	if (e)
		e->v = *v;	/* the kernel's figures are cumulative */
}

/*
 * Take a folding site out of the kernel and add it to its name's entry;
 * drop its own entry, whose figures the kernel's final ones include. A free
 * of its memory later makes a new kernel site, folded in its turn.
 */
static void fold(struct sites *s, const struct memtrail_site_key *k)
{
	const struct trail_target *tt = trail__find_target(s->trail, k->tgid);
	struct memtrail_site_key fk = *k;
	struct site probe = { .key = *k }, *e;
	struct memtrail_site v;
	void *found;

	if (tracer__site_take(s->tracer, k, &v))
		return;
	fk.phase = SITE_FOLDED | (uint16_t)tt->phases.agg_of[k->phase];
	e = site_entry(s, &fk);
	if (e) {
		e->v.alloc_bytes += v.alloc_bytes;
		e->v.alloc_objects += v.alloc_objects;
		e->v.free_bytes += v.free_bytes;
		e->v.free_objects += v.free_objects;
		e->v.samples += v.samples;
	}
	found = tfind(&probe, &s->site_index, site_cmp);
	if (found)
		site_remove(s, *(struct site **)found);
}

void sites__harvest(struct sites *s)
{
	size_t i;

	s->gen++;
	s->n_fold = 0;
	tracer__sites(s->tracer, on_site, s);
	for (i = 0; i < s->n_fold; i++)
		fold(s, &s->fold[i]);
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
	const struct stack *st = k->stack >= 0 ? stack_find(s, pid, k->stack) : NULL;
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
		st = e->key.stack >= 0 ? stack_find(s, tt->pid, e->key.stack) : NULL;
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

/* What is kept here of PID (the kernel's part aside). */
static void forget(struct sites *s, uint32_t pid)
{
	struct pid_maps *p = pid_maps_get(s, pid, false);
	size_t i, n;

	for (i = 0; i < s->n_list;) {
		if (s->list[i]->key.tgid == pid) {
			tdelete(s->list[i], &s->site_index, site_cmp);
			free(s->list[i]);
			s->list[i] = s->list[--s->n_list];
		} else {
			i++;
		}
	}
	for (i = 0; i < s->n_stacks;) {
		if (s->stacks[i]->pid == pid) {
			tdelete(s->stacks[i], &s->stack_index, stack_cmp);
			free(s->stacks[i]->frames);
			free(s->stacks[i]);
			s->stacks[i] = s->stacks[--s->n_stacks];
		} else {
			i++;
		}
	}
	for (i = 0, n = 0; i < s->n_told; i++)	/* in order: the oldest go first when full */
		if (s->told[i].pid != pid)
			s->told[n++] = s->told[i];
	s->n_told = n;
	if (p) {
		free(p->maps);
		pidmap__del(&s->pid_index, pid);
		*p = s->pids[--s->n_pids];
		if (p != &s->pids[s->n_pids])
			pidmap__put(&s->pid_index, p->pid, p - s->pids);	/* replaces: cannot fail */
	}
}

void sites__retire(struct sites *s, const uint32_t *pids, size_t n, sites_retire_fn fn,
		   void *ctx)
{
	size_t i;

	if (!n)
		return;
	s->only = pids;
	s->n_only = n;
	sites__harvest(s);
	s->only = NULL;
	for (i = 0; i < n; i++) {
		fn(ctx, pids[i]);
		forget(s, pids[i]);
	}
	tracer__sites_forget(s->tracer, pids, n);
}

static void no_free(void *p)
{
	(void)p;
}

void sites__destroy(struct sites *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->n_modules; i++) {
		struct module *m = &s->modules[i];
		size_t j;

		for (j = 0; j < m->n_syms; j++)
			free(m->syms[j].readable);
		free(m->syms);
		free(m->name);
		if (m->dwfl)
			dwfl_end(m->dwfl);
	}
	free(s->modules);
	tdestroy(s->stack_index, no_free);
	tdestroy(s->site_index, no_free);
	for (i = 0; i < s->n_stacks; i++) {
		free(s->stacks[i]->frames);
		free(s->stacks[i]);
	}
	free(s->stacks);
	for (i = 0; i < s->n_list; i++)
		free(s->list[i]);
	free(s->list);
	for (i = 0; i < s->n_pids; i++)
		free(s->pids[i].maps);
	free(s->pids);
	pidmap__free(&s->pid_index);
	free(s->fold);
	free(s);
}
