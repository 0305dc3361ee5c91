// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Deep samples (--unwind dwarf): an allocation's user registers and the top
 * of its thread's stack, as BPF copied them, unwound here by the call-frame
 * information (.eh_frame, else .debug_frame) of the files the target maps,
 * through code built without frame pointers (distribution libraries,
 * libtorch, the Python interpreter). libdw interprets the tables
 * (dwarf_cfi_addrframe); the few DWARF expressions their rules use are
 * evaluated here against the copied registers and stack. The chain's
 * allocations are kept by address until their free is told.
 */
#include <dwarf.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "sites_int.h"

#if defined(__x86_64__)
#define UW_SP 7
#define UW_FP 6
#define UW_PC 16	/* also the return-address column */
#define UW_NREGS 17
/* a pending return's stack value is its return address's slot, at or above the pointer */
#define UW_SLOT_ABOVE 0
/* a call pushes its return address: every caller's stack pointer is above its callee's */
#define UW_FRAMELESS 0
#define UW_RA_SIGNED 0
#elif defined(__aarch64__)
#define UW_SP 31
#define UW_FP 29
#define UW_PC 32
#define UW_NREGS 33
/* a pending return's stack value is its function's entry stack pointer, above ours */
#define UW_SLOT_ABOVE 1
/* the return address is in a register: a function that calls nothing may keep
 * no frame (its caller's stack pointer is its own), and a frame record may lie
 * at the stack pointer itself (x29 == sp) */
#define UW_FRAMELESS 1
/* return addresses may be signed (pointer authentication) */
#define UW_RA_SIGNED 1
#else
#define UW_SP 0
#define UW_FP 0
#define UW_PC 0
#define UW_NREGS 0
#define UW_SLOT_ABOVE 0
#define UW_FRAMELESS 0
#define UW_RA_SIGNED 0
#endif

#define DEEP_DEPTH 128	/* frames kept per chain */

/* The registers of one frame, while unwinding. */
struct uw {
	const struct memtrail_event_deep *e;
	uint64_t r[MEMTRAIL_DEEP_REGS];
	uint64_t valid;		/* bit per register */
	uint32_t uret;		/* the next of e's pending uretprobe returns */
	uint64_t ra_mask;	/* the address bits of a saved return address */
};

/* A live allocation (or mapped range) of a deep sample, by (tgid, kind, addr). */
struct deep_alloc {
	uint32_t tgid;
	uint32_t kind;
	uint64_t addr;
	struct memtrail_site_key key;	/* as allocated: its phase may have folded since */
	uint64_t weight;
	uint32_t objects;
};

static bool uw_has(const struct uw *u, int reg)
{
	return reg >= 0 && reg < UW_NREGS && (u->valid >> reg & 1);
}

/*
 * Whether PC is the uretprobe trampoline, compared as return addresses are
 * read (RA_MASK): an arm64 kernel with 52-bit addresses (LPA2, Debian's
 * from 6.12) puts the trampoline's page at the top of them, above the 48
 * bits a process's stack and code use.
 */
static bool uw_tramp(const struct uw *u, uint64_t pc)
{
	return u->e->uret_tramp && (pc & u->ra_mask) == (u->e->uret_tramp & u->ra_mask);
}

/*
 * A return address *PC that is the uretprobe trampoline: the real one, the
 * next pending return's (they are listed newest first, as frames unwind).
 */
static void uw_uret(struct uw *u, uint64_t *pc)
{
	const struct memtrail_event_deep *e = u->e;

	if (!uw_tramp(u, *pc))
		return;
	if (u->uret < e->n_uret && u->uret < MEMTRAIL_DEEP_URET)
		*pc = e->uret[u->uret++].ret;
}

/* The word at ADDR of the copied stack: false outside it. */
static bool uw_read(const struct uw *u, uint64_t addr, uint64_t *v)
{
	uint64_t sp0 = u->e->regs[UW_SP], len = u->e->stack_len;

	if (len > MEMTRAIL_DEEP_STACK_BYTES || addr < sp0 || addr - sp0 + 8 > len)
		return false;
	memcpy(v, u->e->stack + (addr - sp0), sizeof(*v));
	return true;
}

/*
 * Evaluate a DWARF expression of a CFI rule against U's registers (CFA
 * given for DW_OP_call_frame_cfa). *IS_VALUE: the result is the value (a
 * CFA, or DW_OP_stack_value), else the address it is saved at.
 */
static bool uw_eval(const struct uw *u, const Dwarf_Op *ops, size_t n, uint64_t cfa,
		    bool have_cfa, uint64_t *out, bool *is_value)
{
	uint64_t st[16], a, b;
	size_t sp = 0, i;

	*is_value = false;
	for (i = 0; i < n; i++) {
		uint8_t op = ops[i].atom;

		if (sp >= 15)
			return false;
		if (op >= DW_OP_lit0 && op <= DW_OP_lit31) {
			st[sp++] = op - DW_OP_lit0;
			continue;
		}
		if (op >= DW_OP_breg0 && op <= DW_OP_breg31) {
			if (!uw_has(u, op - DW_OP_breg0))
				return false;
			st[sp++] = u->r[op - DW_OP_breg0] + (int64_t)ops[i].number;
			continue;
		}
		switch (op) {
		case DW_OP_bregx:
			if (!uw_has(u, (int)ops[i].number))
				return false;
			st[sp++] = u->r[ops[i].number] + (int64_t)ops[i].number2;
			break;
		case DW_OP_call_frame_cfa:
			if (!have_cfa)
				return false;
			st[sp++] = cfa;
			break;
		case DW_OP_addr: case DW_OP_const1u: case DW_OP_const1s: case DW_OP_const2u:
		case DW_OP_const2s: case DW_OP_const4u: case DW_OP_const4s: case DW_OP_const8u:
		case DW_OP_const8s: case DW_OP_constu: case DW_OP_consts:
			st[sp++] = ops[i].number;
			break;
		case DW_OP_dup:
			if (!sp)
				return false;
			st[sp] = st[sp - 1];
			sp++;
			break;
		case DW_OP_drop:
			if (!sp)
				return false;
			sp--;
			break;
		case DW_OP_deref:
			if (!sp || !uw_read(u, st[sp - 1], &st[sp - 1]))
				return false;
			break;
		case DW_OP_plus_uconst:
			if (!sp)
				return false;
			st[sp - 1] += ops[i].number;
			break;
		case DW_OP_stack_value:
			*is_value = true;
			break;
		case DW_OP_nop:
			break;
		case DW_OP_plus: case DW_OP_minus: case DW_OP_and: case DW_OP_or:
		case DW_OP_shl: case DW_OP_shr: case DW_OP_ge: case DW_OP_gt: case DW_OP_le:
		case DW_OP_lt: case DW_OP_eq: case DW_OP_ne: case DW_OP_mul:
			if (sp < 2)
				return false;
			b = st[--sp];
			a = st[sp - 1];
			switch (op) {
			case DW_OP_plus: a += b; break;
			case DW_OP_minus: a -= b; break;
			case DW_OP_and: a &= b; break;
			case DW_OP_or: a |= b; break;
			case DW_OP_mul: a *= b; break;
			case DW_OP_shl: a = b < 64 ? a << b : 0; break;
			case DW_OP_shr: a = b < 64 ? a >> b : 0; break;
			case DW_OP_ge: a = (int64_t)a >= (int64_t)b; break;
			case DW_OP_gt: a = (int64_t)a > (int64_t)b; break;
			case DW_OP_le: a = (int64_t)a <= (int64_t)b; break;
			case DW_OP_lt: a = (int64_t)a < (int64_t)b; break;
			case DW_OP_eq: a = a == b; break;
			default: a = a != b; break;
			}
			st[sp - 1] = a;
			break;
		default:
			return false;	/* not in call-frame rules of compiled code */
		}
	}
	if (!sp)
		return false;
	*out = st[sp - 1];
	return true;
}

/* The call-frame rules at module address ADDR of M (caller frees), else NULL. */
static Dwarf_Frame *uw_rules(struct module *m, GElf_Addr addr)
{
	Dwarf_Frame *frame = NULL;
	Dwarf_Addr bias;
	Dwarf_CFI *cfi;

	if (!m->mod)
		return NULL;
	cfi = dwfl_module_eh_cfi(m->mod, &bias);
	if (cfi && addr >= bias && !dwarf_cfi_addrframe(cfi, addr - bias, &frame))
		return frame;
	cfi = dwfl_module_dwarf_cfi(m->mod, &bias);
	if (cfi && addr >= bias && !dwarf_cfi_addrframe(cfi, addr - bias, &frame))
		return frame;
	return NULL;
}

enum uw_step { UW_NEXT, UW_END, UW_CUT_CODE, UW_CUT_STACK };

/*
 * One frame up: U's registers become its caller's. ACTIVATION: U's pc is
 * where it is (the first frame, or one a signal interrupted), else a return
 * address, looked up one byte back (a call may end its function).
 */
static enum uw_step uw_step(struct sites *s, const struct pid_maps *pm, struct uw *u,
			    bool activation, bool *signal)
{
	uint64_t cfa, nr[MEMTRAIL_DEEP_REGS], nvalid = 0, v;
	Dwarf_Op ops_mem[3], *ops;
	Dwarf_Frame *frame;
	struct frame fr;
	GElf_Addr addr;
	size_t nops;
	bool is_value;
	int reg, ra;

	sites_frame_resolve(pm, u->r[UW_PC], &fr);
	if (fr.module < 0 || !sites_module_addr(&s->modules[fr.module], fr.offset, &addr))
		return UW_CUT_CODE;
	frame = uw_rules(&s->modules[fr.module], activation ? addr : addr - 1);
	if (!frame)
		return UW_CUT_CODE;
	ra = dwarf_frame_info(frame, NULL, NULL, signal);
	if (ra < 0 || ra >= UW_NREGS || dwarf_frame_cfa(frame, &ops, &nops) || !nops ||
	    !uw_eval(u, ops, nops, 0, false, &cfa, &is_value)) {
		free(frame);
		return UW_CUT_STACK;
	}
	for (reg = 0; reg < UW_NREGS; reg++) {
		if (dwarf_frame_register(frame, reg, ops_mem, &ops, &nops))
			continue;
		if (!nops) {
			if (!ops && uw_has(u, reg)) {	/* same value */
				nr[reg] = u->r[reg];
				nvalid |= 1ull << reg;
			}
			continue;	/* ops == ops_mem: undefined */
		}
		if (!uw_eval(u, ops, nops, cfa, true, &v, &is_value))
			continue;
		if (!is_value && !uw_read(u, v, &v))
			continue;
		nr[reg] = v;
		nvalid |= 1ull << reg;
	}
	free(frame);
	/* the caller's stack pointer is the CFA, unless the rules say otherwise */
	if (!(nvalid >> UW_SP & 1)) {
		nr[UW_SP] = cfa;
		nvalid |= 1ull << UW_SP;
	}
#if defined(__aarch64__)
	/* the return address is in the link register's column (signed: its address bits) */
	if (nvalid >> ra & 1) {
		nr[UW_PC] = nr[ra] & u->ra_mask;
		nvalid |= 1ull << UW_PC;
	} else {
		nvalid &= ~(1ull << UW_PC);
	}
#endif
	if (!(nvalid >> UW_PC & 1) || !nr[UW_PC])
		return UW_END;	/* the outermost frame: its return address is undefined */
	uw_uret(u, &nr[UW_PC]);
	/*
	 * the stack grows down: a caller's frame lies above (a signal's may not);
	 * on arm64 the innermost function may keep none, its caller's stack
	 * pointer its own (every other frame saved its return address)
	 */
	if (!*signal && (nr[UW_SP] < u->r[UW_SP] ||
			 (nr[UW_SP] == u->r[UW_SP] && !(UW_FRAMELESS && activation))))
		return UW_CUT_STACK;
	memcpy(u->r, nr, sizeof(nr));
	u->valid = nvalid;
	return UW_NEXT;
}

/*
 * Code with no call-frame information (JIT code, hand-written assembly):
 * one frame up by the frame pointer, where it leads to a return address
 * just after a call.
 */
static enum uw_step uw_step_fp(struct sites *s, const struct pid_maps *pm, struct uw *u)
{
	uint64_t fp = u->r[UW_FP], next_fp, ret;
	struct frame fr;

	if (!uw_has(u, UW_FP) || fp < u->r[UW_SP] + !UW_FRAMELESS || !uw_read(u, fp, &next_fp) ||
	    !uw_read(u, fp + 8, &ret))
		return UW_CUT_CODE;
	ret &= u->ra_mask;
	uw_uret(u, &ret);
	sites_frame_resolve(pm, ret, &fr);
	if (fr.module < 0 || !sites_return_address_ok(&s->modules[fr.module], fr.offset))
		return UW_CUT_CODE;
	u->r[UW_PC] = ret;
	u->r[UW_SP] = fp + 16;
	u->r[UW_FP] = next_fp;
	u->valid = 1ull << UW_PC | 1ull << UW_SP | 1ull << UW_FP;
	return UW_NEXT;
}

#if defined(__aarch64__)
/*
 * arm64's signal frames: a handler returns to the kernel's sigreturn
 * trampoline, in the vDSO (no file here, so no call-frame information),
 * with its stack pointer at the rt_sigframe the kernel wrote (siginfo, then
 * the ucontext, whose uc_mcontext holds x0-x30, sp and pc in DWARF order
 * from this offset) and x29 at the frame record the kernel put above it
 * ({x29, x30} of the interrupted code). Where both agree, the interrupted
 * registers are the caller's: its pc is where it was, not a return address.
 */
#define UW_SIGFRAME_REGS (128 + 176 + 8)
/* sizeof(struct rt_sigframe): the frame record lies at least this far above it */
#define UW_SIGFRAME_SIZE (128 + 176 + 288 + 4096)

static bool uw_step_sigframe(struct uw *u)
{
	uint64_t sp = u->r[UW_SP], fp = u->r[UW_FP], rec_fp, rec_lr, v[UW_NREGS];
	int i;

	/* the trampoline, not a pending uretprobe return (also in no file) */
	if (!uw_has(u, UW_SP) || !uw_has(u, UW_FP) || uw_tramp(u, u->r[UW_PC]) ||
	    fp < sp + UW_SIGFRAME_SIZE || !uw_read(u, fp, &rec_fp) || !uw_read(u, fp + 8, &rec_lr))
		return false;
	for (i = 0; i < UW_NREGS; i++)
		if (!uw_read(u, sp + UW_SIGFRAME_REGS + 8 * (uint64_t)i, &v[i]))
			return false;
	/* the interrupted code's registers: its frame record's, its stack above this one */
	if (v[UW_FP] != rec_fp || v[30] != rec_lr || v[UW_SP] < fp + 16 || !v[UW_PC])
		return false;
	memcpy(u->r, v, sizeof(v));
	u->valid = (1ull << UW_NREGS) - 1;
	return true;
}
#else
static bool uw_step_sigframe(struct uw *u)
{
	(void)u;
	return false;	/* x86-64's trampoline is in the C library, with its own rules */
}
#endif

/*
 * Whether return address PC is in the entry code of its file (the ELF entry
 * point and the few instructions after it: the dynamic loader's _start has
 * no call-frame information, and nothing called it).
 */
static bool uw_entry_code(struct sites *s, const struct pid_maps *pm, uint64_t pc)
{
	struct frame fr;
	GElf_Addr addr, bias;
	GElf_Ehdr eh;
	Elf *elf;

	sites_frame_resolve(pm, pc, &fr);
	if (fr.module < 0 || !s->modules[fr.module].mod ||
	    !sites_module_addr(&s->modules[fr.module], fr.offset, &addr))
		return false;
	elf = dwfl_module_getelf(s->modules[fr.module].mod, &bias);
	if (!elf || !gelf_getehdr(elf, &eh) || !eh.e_entry)
		return false;
	return addr - 1 >= eh.e_entry + bias && addr - 1 < eh.e_entry + bias + 64;
}

/*
 * E's chain into PCS (at most MAX, innermost first), each frame's stack
 * pointer into SPS (0: unknown); *STOP: why it ended.
 */
static int unwind(struct sites *s, const struct pid_maps *pm, const struct memtrail_event_deep *e,
		  uint64_t *pcs, uint64_t *sps, int max, enum uw_step *stop)
{
	struct uw u = { .e = e };
	bool activation = true, signal = false;
	enum uw_step r = UW_END;
	int n = 0;

	if (!UW_NREGS) {
		*stop = UW_CUT_CODE;
		return 0;
	}
	memcpy(u.r, e->regs, sizeof(u.r));
	/*
	 * arm64 code built with pointer authentication (-mbranch-protection;
	 * Debian's packages from 13, Ubuntu's, Amazon Linux's) saves its return
	 * address signed, the signature in the bits above the address space:
	 * the stack lies at its top, so the stack pointer's width is the
	 * address's (48 bits, 47 with 16 KiB pages). x86-64's are whole.
	 */
	u.ra_mask = UW_RA_SIGNED && e->regs[UW_SP] ? ~0ull >> __builtin_clzll(e->regs[UW_SP]) : ~0ull;
	u.valid = UW_NREGS == 64 ? ~0ull : (1ull << UW_NREGS) - 1;
	/* a return in progress (the sample's own uretprobe) may be listed: not on the stack */
	while (u.uret < e->n_uret && u.uret < MEMTRAIL_DEEP_URET &&
	       e->uret[u.uret].stack < e->regs[UW_SP] + UW_SLOT_ABOVE)
		u.uret++;
	while (n < max) {
		sps[n] = uw_has(&u, UW_SP) ? u.r[UW_SP] : 0;
		pcs[n++] = u.r[UW_PC];
		r = uw_step(s, pm, &u, activation, &signal);
		if (r == UW_CUT_CODE && !activation && uw_step_sigframe(&u)) {
			r = UW_NEXT;
			signal = true;
		} else if (r == UW_CUT_CODE) {
			r = uw_step_fp(s, pm, &u);
		}
		if (r == UW_CUT_CODE && !activation && uw_entry_code(s, pm, u.r[UW_PC]))
			r = UW_END;	/* the process's first frame */
		if (r != UW_NEXT)
			break;
		/* the frame a signal interrupted resumes where it was, not after a call */
		activation = signal;
	}
	*stop = n == max ? UW_CUT_STACK : r;
	return n;
}

static int deep_stack_cmp(const void *a, const void *b)
{
	const struct stack *x = a, *y = b;
	uint32_t i;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->n != y->n)
		return x->n < y->n ? -1 : 1;
	if (x->truncated != y->truncated)
		return x->truncated ? 1 : -1;
	for (i = 0; i < x->n; i++) {
		if (x->frames[i].addr != y->frames[i].addr)
			return x->frames[i].addr < y->frames[i].addr ? -1 : 1;
		if (x->frames[i].module != y->frames[i].module)	/* Python frames' are indexes */
			return x->frames[i].module < y->frames[i].module ? -1 : 1;
	}
	return 0;
}

static int deep_alloc_cmp(const void *a, const void *b)
{
	const struct deep_alloc *x = a, *y = b;

	if (x->tgid != y->tgid)
		return x->tgid < y->tgid ? -1 : 1;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The id of PID's chain FRAMES (N), made if new; MEMTRAIL_STACK_NONE: out of memory. */
static int32_t deep_stack_id(struct sites *s, uint32_t pid, const struct frame *frames, int n,
			     bool truncated)
{
	struct stack probe = { .pid = pid, .n = n, .truncated = truncated,
			       .frames = (struct frame *)frames };
	struct stack *st;
	void *found;

	found = tfind(&probe, &s->deep_index, deep_stack_cmp);
	if (found)
		return (*(struct stack **)found)->id;
	if (s->deep_cap && s->deep_live >= s->deep_cap) {
		s->deep.lost++;		/* counted with the kernel's lost stacks */
		return MEMTRAIL_STACK_NONE;
	}
	if (array__grow((void **)&s->stacks, &s->cap_stacks, s->n_stacks + 1,
			sizeof(*s->stacks)))
		return MEMTRAIL_STACK_NONE;
	st = calloc(1, sizeof(*st));
	if (!st || !(st->frames = calloc(n ? n : 1, sizeof(*st->frames)))) {
		free(st);
		return MEMTRAIL_STACK_NONE;
	}
	st->pid = pid;
	st->id = SITE_DEEP_ID(s->deep_next);
	st->n = n;
	st->truncated = truncated;
	memcpy(st->frames, frames, n * sizeof(*frames));
	if (!tsearch(st, &s->deep_index, deep_stack_cmp)) {
		free(st->frames);
		free(st);
		return MEMTRAIL_STACK_NONE;
	}
	if (!tsearch(st, &s->stack_index, sites_stack_cmp)) {
		tdelete(st, &s->deep_index, deep_stack_cmp);
		free(st->frames);
		free(st);
		return MEMTRAIL_STACK_NONE;
	}
	s->deep_next++;
	s->deep_live++;
	s->stacks[s->n_stacks++] = st;
	return st->id;
}

/*
 * PID's mappings, read again where this harvest has not read them (code
 * mapped since); AGAIN: the sample's code is in none of them, so the maps
 * reader's reads of after the sample are taken too (where it is gone, all
 * there is).
 */
static struct pid_maps *deep_maps(struct sites *s, uint32_t pid, bool again)
{
	struct pid_maps *pm = sites_pid_maps_get(s, pid, false);

	/* maps of before its exec (its parent's, from the fork) are another program's */
	if (pm && pm->read_ns < pm->exec_ns && !s->maps_told)
		again = true;
	if (!pm || (!s->maps_told && pm->gen != s->gen) || again) {
		sites_maps_read(s, pid, again ? UINT64_MAX : s->event_ns);
		pm = sites_pid_maps_get(s, pid, false);
		if (pm)
			pm->gen = s->gen;
	}
	return pm;
}

void sites__deep(struct sites *s, const struct memtrail_event_deep *e)
{
	uint32_t pid = e->hdr.tgid;
	struct memtrail_site_key key = { .tgid = pid, .phase = e->phase, .kind = e->kind };
	uint64_t pcs[DEEP_DEPTH], sps[DEEP_DEPTH];
	struct frame frames[DEEP_DEPTH];
	struct pid_maps *pm = deep_maps(s, pid, false);
	struct deep_alloc *a;
	enum uw_step stop;
	struct frame fr;
	struct site *site;
	void *found;
	int n, i;

	s->deep.samples++;
	n = unwind(s, pm, e, pcs, sps, DEEP_DEPTH, &stop);
	if (n && stop == UW_CUT_CODE) {
		/*
		 * code in no mapping read before the sample (mapped since): read
		 * them again; maps read after it have all its code already
		 */
		sites_frame_resolve(pm, pcs[n - 1], &fr);
		if (fr.module == -2 && (!pm || pm->read_ns < e->hdr.ts_ns)) {
			pm = deep_maps(s, pid, true);
			n = unwind(s, pm, e, pcs, sps, DEEP_DEPTH, &stop);
		}
	}
	for (i = 0; i < n; i++)
		sites_frame_resolve(pm, pcs[i], &frames[i]);
	if (n && stop == UW_CUT_CODE && frames[n - 1].module == -2 &&
	    e->fp_stack != MEMTRAIL_STACK_NONE) {
		/* code in no mapping read, the process gone: the stack BPF walked names it */
		s->deep.fp_named++;
		key.stack = e->fp_stack;
		key.caller = e->fp_caller;
	} else {
		if (stop == UW_END)
			s->deep.complete++;
		else if (stop == UW_CUT_CODE)
			s->deep.cut_code++;
		else
			s->deep.cut_stack++;
		if (pm)
			sites_python_interleave(s, pm, e, sps, frames, &n, DEEP_DEPTH);
		key.stack = deep_stack_id(s, pid, frames, n, stop != UW_END);
	}
	if (sites_folds(s, pid, key.phase))
		key = sites_folded_key(s, &key);
	site = sites_entry(s, &key);
	if (!site)
		return;
	sites_site_add(site, &(struct memtrail_site){ .alloc_bytes = e->weight,
						     .alloc_objects = e->objects, .samples = 1 });
	if (!e->tracked)
		return;	/* frees are not watched (an overhead budget's windows) */
	a = calloc(1, sizeof(*a));
	if (!a)
		return;
	*a = (struct deep_alloc){ .tgid = pid, .kind = e->kind, .addr = e->addr,
				  .weight = e->weight, .objects = e->objects };
	a->key = key;
	found = tsearch(a, &s->deep_allocs, deep_alloc_cmp);
	if (!found) {
		free(a);
	} else if (*(struct deep_alloc **)found != a) {
		/* an address told twice: the first one's free was lost (counted) */
		free(*(struct deep_alloc **)found);
		*(struct deep_alloc **)found = a;
	}
}

void sites__deep_free(struct sites *s, const struct memtrail_event_deep_free *e)
{
	struct deep_alloc probe = { .tgid = e->hdr.tgid, .kind = e->kind, .addr = e->addr }, *a;
	struct memtrail_site_key key;
	struct site *site;
	void *found = tfind(&probe, &s->deep_allocs, deep_alloc_cmp);
	uint64_t bytes;
	bool whole;

	if (!found)
		return;
	a = *(struct deep_alloc **)found;
	tdelete(a, &s->deep_allocs, deep_alloc_cmp);
	s->deep.frees++;
	/* a mapped range can go in parts: its objects go with its last byte */
	bytes = e->bytes && e->bytes < a->weight ? e->bytes : a->weight;
	whole = bytes == a->weight;
	key = a->key;
	if (!(key.phase & SITE_FOLDED) && sites_folds(s, key.tgid, key.phase))
		key = sites_folded_key(s, &key);
	site = sites_entry(s, &key);
	if (site)
		sites_site_add(site, &(struct memtrail_site){ .free_bytes = bytes,
				       .free_objects = whole ? a->objects : 0 });
	if (whole || !e->rest) {
		free(a);
		return;
	}
	/* what stays, under the address it starts at now */
	a->weight -= bytes;
	a->addr = e->rest;
	found = tsearch(a, &s->deep_allocs, deep_alloc_cmp);
	if (!found) {
		free(a);
	} else if (*(struct deep_alloc **)found != a) {
		free(*(struct deep_alloc **)found);
		*(struct deep_alloc **)found = a;
	}
}

void sites__deep_cap(struct sites *s, uint32_t cap)
{
	s->deep_cap = cap;
}

const struct sites_deep_stats *sites__deep_stats(const struct sites *s)
{
	return &s->deep;
}

void sites_deep_fold(struct sites *s)
{
	size_t i;

	for (i = 0; i < s->n_list;) {
		struct site *e = s->list[i], *f;
		struct memtrail_site_key fk;

		if (!site_deep(e->key.stack) || (e->key.phase & SITE_FOLDED) ||
		    !sites_folds(s, e->key.tgid, e->key.phase)) {
			i++;
			continue;
		}
		fk = sites_folded_key(s, &e->key);
		f = sites_entry(s, &fk);
		if (!f) {
			i++;
			continue;
		}
		sites_site_add(f, &e->v);
		sites_remove(s, e);	/* moves the last entry to I: seen next */
	}
}

static uint32_t deep_alloc_pid(const void *node)
{
	return ((const struct deep_alloc *)node)->tgid;
}

static uint32_t stack_pid(const void *node)
{
	return ((const struct stack *)node)->pid;
}

void sites_deep_forget(struct sites *s, uint32_t pid)
{
	void **v;
	size_t i, n = sites_tree_take(&s->deep_allocs, deep_alloc_cmp, pid, deep_alloc_pid, &v);

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
	/* the stacks are sites.c's */
	n = sites_tree_take(&s->deep_index, deep_stack_cmp, pid, stack_pid, &v);
	s->deep_live -= n < s->deep_live ? (uint32_t)n : s->deep_live;
	free(v);
}

void sites_deep_destroy(struct sites *s)
{
	tdestroy(s->deep_allocs, free);
	tdestroy(s->deep_index, sites_no_free);
}
