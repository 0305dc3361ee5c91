// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Phase markers: a rule's uprobe (--phase NAME=BINARY:SYMBOL), the in-program
 * marker (an unknown prctl option, a no-op when nothing traces), and the
 * mt_mark program that 'memtrail mark' runs. All end in phase_switch().
 */
#include "memtrail.bpf.h"

/* The --phase and --scope rules, indexed by the uprobe's cookie. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MEMTRAIL_RULES_MAX);
	__type(key, __u32);
	__type(value, struct memtrail_rule);
} rule_names SEC(".maps");

static const struct memtrail_scope_stack empty_stack;

/*
 * Whether a scope entered with stack pointer ENTRY has left its frame when a
 * return leaves the stack pointer at RET: x86 pops the return address (the
 * entry's own frame ends 8 above), arm64 returns to the entry's own value.
 * A frame still live (an outer one) entered higher: the stack grows down.
 */
#if defined(__TARGET_ARCH_arm64)
#define MT_FRAME_GONE(entry, ret) ((entry) <= (ret))
#else
#define MT_FRAME_GONE(entry, ret) ((entry) < (ret))
#endif

static __always_inline int rule_hit(__u32 rule, struct pt_regs *ctx)
{
	struct memtrail_rule *r = bpf_map_lookup_elem(&rule_names, &rule);
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id, depth, seq;
	struct memtrail_scope_stack *st;
	struct memtrail_target *t;

	if (!r || !(t = live_target(tgid)))
		return 0;
	if (!r->scoped) {
		phase_switch_to(t, tgid, r->name, 0);
		return 0;
	}
	st = map_get_or_init(&scope_stacks, &tid, &empty_stack, MEMTRAIL_LOST_SCOPES);
	if (!st)
		return 0;	/* no return to match: the phase is not switched either */
	/*
	 * the phase it interrupts, resumed at the return (mt_scope_return): the
	 * one just before the switch's own, whatever another thread did meanwhile
	 */
	seq = phase_switch_to(t, tgid, r->name, 0);
	depth = st->depth;
	if (depth < MEMTRAIL_SCOPE_DEPTH) {
		st->seq[depth] = seq - 1;
		st->sp[depth] = PT_REGS_SP(ctx);
	} else {
		count_lost(MEMTRAIL_LOST_SCOPES);
	}
	st->depth = depth + 1;
	return 0;
}

/*
 * A scope's function returns: the phase its entry interrupted resumes. Every
 * scope whose frame is gone ends with it: the one returning, and deeper ones
 * whose return never came (a longjmp or a C++ exception unwound them, or the
 * kernel's 64 nested return probes were used up); so the phase resumed is
 * the one before the outermost of them, and a return whose entry memtrail
 * did not see (entered before it attached) ends no other scope.
 */
SEC("uprobe")
int mt_scope_return(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), sp = PT_REGS_SP(ctx);
	__u32 tgid = id >> 32, tid = (__u32)id, depth, resume = 0;
	struct memtrail_scope_stack *st = bpf_map_lookup_elem(&scope_stacks, &tid);
	struct memtrail_target *t;
	bool ended = false;
	int i;

	if (!st || !st->depth)
		return 0;	/* entered before memtrail attached */
	depth = st->depth;
	if (depth > MEMTRAIL_SCOPE_DEPTH) {
		st->depth = depth - 1;	/* an entry not kept: no frame to compare */
		return 0;
	}
	/* from the innermost kept entry out; constant indices, for the verifier */
	for (i = MEMTRAIL_SCOPE_DEPTH - 1; i >= 0; i--) {
		if ((__u32)i >= depth)
			continue;
		if (!MT_FRAME_GONE(st->sp[i], sp))
			break;
		resume = st->seq[i];
		ended = true;
		depth = i;
	}
	st->depth = depth;
	t = live_target(tgid);
	if (t && ended)
		phase_switch_to(t, tgid, NULL, resume + 1);
	return 0;
}

SEC("uprobe")
int mt_phase_rule(struct pt_regs *ctx)
{
	return rule_hit(bpf_get_attach_cookie(ctx), ctx);
}

/*
 * Kernels without bpf_cookie (before 5.15): one program per rule, each
 * knowing its number, for the first MEMTRAIL_RULE_PROGS rules.
 */
#define MT_RULE_PROG(i)					\
	SEC("uprobe")					\
	int mt_rule_##i(struct pt_regs *ctx)		\
	{						\
		return rule_hit(i, ctx);		\
	}
MT_RULE_PROG(0)
MT_RULE_PROG(1)
MT_RULE_PROG(2)
MT_RULE_PROG(3)
MT_RULE_PROG(4)
MT_RULE_PROG(5)
MT_RULE_PROG(6)
MT_RULE_PROG(7)

/* Printable ASCII, 1 to 63 bytes, NUL-terminated within the buffer. */
static __always_inline bool valid_name(const char *name, long len)
{
	int i;

	if (len < 2 || len > MEMTRAIL_PHASE_NAME_LEN)
		return false;
	for (i = 0; i < MEMTRAIL_PHASE_NAME_LEN; i++) {
		if (!name[i])
			return true;
		if (name[i] < 0x20 || name[i] > 0x7e)
			return false;
	}
	return false;
}

static __always_inline int marker(int option, unsigned long arg2)
{
	char name[MEMTRAIL_PHASE_NAME_LEN + 1];
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	long len;

	if (option != MEMTRAIL_PRCTL_PHASE || !live_target(tgid))
		return 0;
	len = bpf_probe_read_user_str(name, sizeof(name), (const void *)arg2);
	if (!valid_name(name, len)) {
		count_lost(MEMTRAIL_LOST_PHASE_NAMES);
		return 0;
	}
	phase_switch(tgid, name);
	return 0;
}

/*
 * memtrail_phase(name) in include/memtrail_marker.h: prctl(MEMTRAIL_PRCTL_PHASE,
 * name). A name that is invalid, or not resident (this program cannot fault
 * it in; the marker reads it first), is counted in lost.phase_names.
 */
SEC("tp_btf/task_prctl_unknown")
int BPF_PROG(mt_marker, int option, unsigned long arg2)
{
	return marker(option, arg2);
}

#if defined(__TARGET_ARCH_x86)
#define MT_NR_PRCTL 157
#elif defined(__TARGET_ARCH_arm64)
#define MT_NR_PRCTL 167
#endif

/*
 * Kernels without task_prctl_unknown (before 6.17; 6.12 lacks it): the same
 * marker seen at the entry of every system call, a compare for all but prctl.
 */
SEC("tp_btf/sys_enter")
int BPF_PROG(mt_marker_sys, struct pt_regs *regs, long id)
{
	if (id != MT_NR_PRCTL)
		return 0;
	return marker((int)PT_REGS_PARM1_CORE_SYSCALL(regs), PT_REGS_PARM2_CORE_SYSCALL(regs));
}

/* Run by 'memtrail mark' through BPF_PROG_TEST_RUN: 1 when tgid is traced here. */
SEC("syscall")
int mt_mark(struct memtrail_mark_args *args)
{
	char name[MEMTRAIL_PHASE_NAME_LEN];

	bpf_probe_read_kernel_str(name, sizeof(name), args->name);
	return phase_switch(args->tgid, name) ? 1 : 0;
}

/*
 * Kernels without syscall programs (before 5.14): the same as a raw
 * tracepoint program, which BPF_PROG_TEST_RUN runs (since 5.10) in the
 * calling task: its two arguments are the tgid and the address of the name
 * in the caller's memory.
 */
SEC("raw_tp")
int mt_mark_raw(struct bpf_raw_tracepoint_args *ctx)
{
	char name[MEMTRAIL_PHASE_NAME_LEN];

	if (bpf_probe_read_user_str(name, sizeof(name), (const void *)ctx->args[1]) < 0)
		return 0;
	return phase_switch((__u32)ctx->args[0], name) ? 1 : 0;
}
