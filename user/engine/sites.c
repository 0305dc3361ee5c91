// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "maps_reader.h"
#include "roots.h"
#include "sites_int.h"

int sites__open(struct sites **out, struct tracer *t, struct trail *trail)
{
	struct sites *s = calloc(1, sizeof(*s));

	*out = s;
	if (!s)
		return -ENOMEM;
	s->tracer = t;
	s->trail = trail;
	s->maps_told = tracer__maps_told(t);
	s->maps_reader = maps_reader__start(tracer__maps_wanted_fd(t));
	s->sweep_at = MODULES_SWEEP_MIN;
	/* a process in another root (a container's) has its debug files looked for there */
	if (roots__id(0, &s->root_dev, &s->root_ino))
		s->root_dev = (dev_t)-1;
	return 0;
}

bool sites__maps_told(const struct sites *s)
{
	return s->maps_told;
}

int sites_stack_cmp(const void *a, const void *b)
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

struct stack *sites_stack_find(struct sites *s, uint32_t pid, int32_t id)
{
	struct stack probe = { .pid = pid, .id = id };
	void *found = tfind(&probe, &s->stack_index, sites_stack_cmp);

	return found ? *(struct stack **)found : NULL;
}

void sites_frame_resolve(const struct pid_maps *pm, uint64_t addr, struct frame *fr)
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
bool sites_return_address_ok(const struct module *m, uint64_t off)
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
	struct pid_maps *pm = sites_pid_maps_get(s, pid, false);
	struct stack *st;
	int n, i;

	if (id < 0 || sites_stack_find(s, pid, id))
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
	for (i = 0; i < n; i++) {
		sites_frame_resolve(pm, ips[i], &st->frames[i]);
		st->unplaced |= st->frames[i].module == -2;
	}
	/*
	 * A walk by frame pointers through code built without them reads
	 * whatever the register held: no frame is shown past one that is in no
	 * executable mapping, or (a caller's frame) not just after a call.
	 */
	for (i = 0; pm && pm->n && i < n; i++) {
		const struct frame *fr = &st->frames[i];

		if (fr->module == -2 || (i > 0 && fr->module >= 0 &&
					 !sites_return_address_ok(&s->modules[fr->module], fr->offset))) {
			st->n = i;
			st->truncated = true;
			break;
		}
	}
	if (!tsearch(st, &s->stack_index, sites_stack_cmp)) {
		free(st->frames);
		free(st);
		return;
	}
	s->stacks[s->n_stacks++] = st;
	if (st->unplaced && (pm || (pm = sites_pid_maps_get(s, pid, true))))
		pm->unplaced++;
}

struct stack *sites_stack_get(struct sites *s, uint32_t pid, int32_t id)
{
	stack_resolve(s, pid, id);
	return sites_stack_find(s, pid, id);
}

void sites_stacks_replace(struct sites *s, struct pid_maps *pm)
{
	size_t i;

	if (!pm->unplaced)
		return;
	for (i = 0; i < s->n_stacks;) {
		struct stack *st = s->stacks[i];

		if (st->pid != pm->pid || !st->unplaced) {
			i++;
			continue;
		}
		tdelete(st, &s->stack_index, sites_stack_cmp);
		free(st->frames);
		free(st);
		s->stacks[i] = s->stacks[--s->n_stacks];
	}
	pm->unplaced = 0;
}

/*
 * The user-space entry of key K, made if new (its stack resolved against
 * the target's mappings now, once a harvest, while it lives). NULL when
 * out of memory.
 */
struct site *sites_entry(struct sites *s, const struct memtrail_site_key *k)
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
	if (e->resolved && (k->stack < 0 || sites_stack_find(s, k->tgid, k->stack)))
		return e;
	pm = sites_pid_maps_get(s, k->tgid, false);
	/* a retiring pid's maps are another process's, if any: the ones kept stay */
	if (!s->only && (!pm || (!s->maps_told && pm->gen != s->gen))) {
		sites__note_maps(s, k->tgid);
		pm = sites_pid_maps_get(s, k->tgid, false);
		if (pm)
			pm->gen = s->gen;
	}
	stack_resolve(s, k->tgid, k->stack);
	e->resolved = true;
	e->caller.module = -2;
	if (k->caller) {
		sites_frame_resolve(pm, k->caller, &e->caller);
		if (e->caller.module < 0 || !after_call(&s->modules[e->caller.module],
							 e->caller.offset))
			e->caller.module = -2;
	}
	return e;
}

void sites_remove(struct sites *s, struct site *e)
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
bool sites_folds(struct sites *s, uint32_t pid, uint32_t seq)
{
	const struct trail_target *tt = s->trail ? trail__find_target(s->trail, pid) :
				       NULL;
	const struct phase_log *l = tt ? &tt->phases : NULL;

	return l && l->keep_recent && seq < l->n_closed && seq >= l->keep_first &&
	       tt->phase_seq - seq > l->keep_recent;
}

static void site_sum(struct memtrail_site *to, const struct memtrail_site *d)
{
	to->alloc_bytes += d->alloc_bytes;
	to->alloc_objects += d->alloc_objects;
	to->free_bytes += d->free_bytes;
	to->free_objects += d->free_objects;
	to->samples += d->samples;
}

void sites_site_add(struct site *e, const struct memtrail_site *d)
{
	site_sum(&e->v, d);
	site_sum(&e->own, d);
}

static void on_site(void *ctx, const struct memtrail_site_key *k, const struct memtrail_site *v)
{
	struct sites *s = ctx;
	struct site *e;

	if (s->only && !array__u32_has(s->only, s->n_only, k->tgid))
		return;
	if (sites_folds(s, k->tgid, k->phase)) {
		if (!array__grow((void **)&s->fold, &s->cap_fold, s->n_fold + 1, sizeof(*s->fold)))
			s->fold[s->n_fold++] = *k;
		return;
	}
	e = sites_entry(s, k);
	if (e) {
		e->v = *v;	/* the kernel's figures are cumulative */
		site_sum(&e->v, &e->own);
	}
}

struct memtrail_site_key sites_folded_key(struct sites *s, const struct memtrail_site_key *k)
{
	const struct trail_target *tt = trail__find_target(s->trail, k->tgid);
	struct memtrail_site_key fk = *k;

	fk.phase = SITE_FOLDED | (uint16_t)tt->phases.agg_of[k->phase];
	return fk;
}

/*
 * Take a folding site out of the kernel and add it to its name's entry;
 * drop its own entry, whose figures the kernel's final ones include. A free
 * of its memory later makes a new kernel site, folded in its turn.
 */
static void fold(struct sites *s, const struct memtrail_site_key *k)
{
	struct memtrail_site_key fk;
	struct site probe = { .key = *k }, *e;
	struct memtrail_site v;
	void *found;

	if (tracer__site_take(s->tracer, k, &v))
		return;
	fk = sites_folded_key(s, k);
	e = sites_entry(s, &fk);
	found = tfind(&probe, &s->site_index, site_cmp);
	if (e) {
		site_sum(&e->v, &v);
		if (found)
			site_sum(&e->v, &(*(struct site **)found)->own);
	}
	if (found)
		sites_remove(s, *(struct site **)found);
}

void sites__harvest(struct sites *s)
{
	size_t i;

	s->gen++;
	s->n_fold = 0;
	tracer__sites(s->tracer, on_site, s);
	for (i = 0; i < s->n_fold; i++)
		fold(s, &s->fold[i]);
	sites_deep_fold(s);
}

/* What is kept here of PID (the kernel's part aside). */
static void forget(struct sites *s, uint32_t pid)
{
	struct pid_maps *p = sites_pid_maps_get(s, pid, false);
	size_t i, n;

	sites_deep_forget(s, pid);	/* first: its index holds the stacks freed below */
	sites_python_forget(s, pid);
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
			tdelete(s->stacks[i], &s->stack_index, sites_stack_cmp);
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

static int id_cmp(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return x < y ? -1 : x > y;
}

/* IDS (N) sorted, each once; how many. */
static size_t ids_unique(int32_t *ids, size_t n)
{
	size_t i, m = 0;

	qsort(ids, n, sizeof(*ids), id_cmp);
	for (i = 0; i < n; i++)
		if (!m || ids[m - 1] != ids[i])
			ids[m++] = ids[i];
	return m;
}

/*
 * The kernel's stacks that only PIDS' sites name go with them: a process's
 * stacks are its own (its libraries where ASLR put them), and a node that
 * runs processes all day would otherwise fill the table for good. A stack
 * another process's site names (a fork that never exec'd) stays. Sites a
 * live process made since the last full harvest are not known here: a stack
 * one of them shares (a fork of a retiring one, within a second) can go, and
 * that site is then named "[unknown]"; its bytes stay right.
 */
static void stacks_forget(struct sites *s, const uint32_t *pids, size_t n)
{
	int32_t *gone = malloc((s->n_list + 1) * sizeof(*gone));
	int32_t *kept = malloc((s->n_list + 1) * sizeof(*kept));
	size_t i, j, n_gone = 0, n_kept = 0, m = 0;

	if (!gone || !kept)
		goto out;
	for (i = 0; i < s->n_list; i++) {
		const struct memtrail_site_key *k = &s->list[i]->key;

		if (k->stack < 0)
			continue;
		if (array__u32_has(pids, n, k->tgid))
			gone[n_gone++] = k->stack;
		else
			kept[n_kept++] = k->stack;
	}
	n_gone = ids_unique(gone, n_gone);
	n_kept = ids_unique(kept, n_kept);
	for (i = j = 0; i < n_gone; i++) {
		while (j < n_kept && kept[j] < gone[i])
			j++;
		if (j == n_kept || kept[j] != gone[i])
			gone[m++] = gone[i];
	}
	tracer__stacks_forget(s->tracer, gone, m);
out:
	free(gone);
	free(kept);
}

void sites__forget_stacks(struct sites *s)
{
	s->forget_stacks = true;
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
	for (i = 0; i < n; i++)
		fn(ctx, pids[i]);
	if (s->forget_stacks)
		stacks_forget(s, pids, n);
	for (i = 0; i < n; i++)
		forget(s, pids[i]);
	tracer__sites_forget(s->tracer, pids, n);
	if (s->forget_stacks)
		sites_modules_sweep(s);	/* record keeps its files, as its stacks, to the end */
}

void sites_no_free(void *p)
{
	(void)p;
}

/* twalk_r's context: the nodes of one pid, gathered to be deleted after the walk. */
struct take {
	uint32_t pid;
	uint32_t (*pid_of)(const void *node);
	void **v;
	size_t n, cap;
};

static void take_one(const void *nodep, VISIT which, void *ctx)
{
	struct take *t = ctx;
	void *p = *(void *const *)nodep;

	if ((which == postorder || which == leaf) && t->pid_of(p) == t->pid &&
	    !array__grow((void **)&t->v, &t->cap, t->n + 1, sizeof(*t->v)))
		t->v[t->n++] = p;
}

size_t sites_tree_take(void **root, int (*cmp)(const void *, const void *), uint32_t pid,
		       uint32_t (*pid_of)(const void *node), void ***out)
{
	struct take t = { .pid = pid, .pid_of = pid_of };
	size_t i;

	twalk_r(*root, take_one, &t);
	for (i = 0; i < t.n; i++)
		tdelete(t.v[i], root, cmp);
	*out = t.v;
	return t.n;
}

void sites__destroy(struct sites *s)
{
	size_t i;

	if (!s)
		return;
	maps_reader__stop(s->maps_reader);
	for (i = 0; i < s->n_modules; i++)
		sites_module_close(&s->modules[i]);
	sites_deep_destroy(s);
	sites_python_destroy(s);
	free(s->modules);
	tdestroy(s->stack_index, sites_no_free);
	tdestroy(s->site_index, sites_no_free);
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
	for (i = 0; i < s->n_told_files; i++)
		free(s->told_files[i].path);
	free(s->told_files);
	pidmap__free(&s->pid_index);
	free(s->fold);
	free(s);
}
