// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/fanotify.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <linux/capability.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "kfeatures.h"
#include "memtrail.h"
#include "log.h"

#define SYSFS_BTF "/sys/kernel/btf/vmlinux"

/* uapi values newer than the build's headers may be */
#define MT_BPF_FUNC_loop 181
#define MT_BPF_FUNC_for_each_map_elem 164
#define MT_BPF_FUNC_find_vma 180
#define MT_BPF_FUNC_map_lookup_percpu_elem 195
#define MT_BPF_FUNC_get_attach_cookie 174
#define MT_BPF_FUNC_task_pt_regs 175
#define MT_BPF_FUNC_get_current_task_btf 158
#define MT_BPF_PROG_TYPE_SYSCALL 31
#define MT_BPF_MAP_TYPE_TASK_STORAGE 29
#define MT_TRACE_UPROBE_MULTI 48

static const char *const names[FEAT_MAX] = {
	[FEAT_BTF] = "btf",
	[FEAT_ATOMICS] = "atomics",
	[FEAT_RSS] = "rss",
	[FEAT_MAPPED] = "mapped",
	[FEAT_MAP_SITES] = "map_sites",
	[FEAT_EXIT] = "exit",
	[FEAT_MARKER] = "marker",
	[FEAT_MARK] = "mark",
	[FEAT_RULES] = "phase_rules",
	[FEAT_OOM] = "oom",
	[FEAT_HEAP] = "heap",
	[FEAT_DEVICE] = "device",
	[FEAT_DEVICE_MULTI] = "device_multi",
	[FEAT_DEVICE_SITES] = "device_sites",
	[FEAT_NEW_LIBS] = "new_libs",
	[FEAT_SITE_MAPS] = "site_maps",
	[FEAT_GATE] = "cmd_gate",
};

const char *features__state_name(enum feature_state s)
{
	switch (s) {
	case FEATURE_YES: return "yes";
	case FEATURE_FALLBACK: return "fallback";
	case FEATURE_DEGRADED: return "degraded";
	default: return "no";
	}
}

static void set(struct kernel_features *kf, enum feature_id id, enum feature_state st,
		const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void set(struct kernel_features *kf, enum feature_id id, enum feature_state st,
		const char *fmt, ...)
{
	va_list ap;

	kf->f[id].name = names[id];
	kf->f[id].state = st;
	va_start(ap, fmt);
	vsnprintf(kf->f[id].note, sizeof(kf->f[id].note), fmt, ap);
	va_end(ap);
}

/* Arguments of tracepoint NAME as tp_btf sees them, -1 when the kernel lacks it. */
static int tp_args(const struct btf *btf, const char *name)
{
	char tname[128];
	const struct btf_type *t;
	int id;

	snprintf(tname, sizeof(tname), "btf_trace_%s", name);
	id = btf__find_by_name_kind(btf, tname, BTF_KIND_TYPEDEF);
	if (id < 0)
		return -1;
	t = btf__type_by_id(btf, id);
	t = t ? btf__type_by_id(btf, t->type) : NULL;	/* pointer */
	t = t && btf_is_ptr(t) ? btf__type_by_id(btf, t->type) : NULL;
	if (!t || !btf_is_func_proto(t) || btf_vlen(t) < 1)
		return -1;
	return btf_vlen(t) - 1;	/* the first is the tracepoint's void *data */
}

/* The BTF kind of member MEMBER of struct type T (anonymous members searched too), -1: none. */
static int member_kind_of(const struct btf *btf, const struct btf_type *t, const char *member,
			  int depth)
{
	const struct btf_member *m = btf_members(t);
	const struct btf_type *mt;
	int i, k;

	for (i = 0; i < btf_vlen(t); i++, m++) {
		const char *name = btf__name_by_offset(btf, m->name_off);

		mt = btf__type_by_id(btf, m->type);
		while (mt && (btf_is_typedef(mt) || btf_is_mod(mt)))
			mt = btf__type_by_id(btf, mt->type);
		if (!mt)
			continue;
		if ((!name || !*name) && btf_is_composite(mt) && depth < 4) {
			k = member_kind_of(btf, mt, member, depth + 1);
			if (k >= 0)
				return k;
			continue;
		}
		if (name && !strcmp(name, member))
			return btf_kind(mt);
	}
	return -1;
}

/* The BTF kind of struct SNAME's MEMBER (an array of percpu_counter since 6.2), -1: none. */
static int member_kind(const struct btf *btf, const char *sname, const char *member)
{
	int id = btf__find_by_name_kind(btf, sname, BTF_KIND_STRUCT);

	return id < 0 ? -1 : member_kind_of(btf, btf__type_by_id(btf, id), member, 0);
}

bool features__have_caps(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = {};
	int bpf = 39, perfmon = 38;	/* CAP_BPF, CAP_PERFMON (Linux 5.8) */

	if (syscall(SYS_capget, &h, d))
		return geteuid() == 0;
#define HAS(c) (d[(c) / 32].effective & (1U << ((c) % 32)))
	return HAS(CAP_SYS_ADMIN) || (HAS(bpf) && HAS(perfmon));
#undef HAS
}

static bool helper(enum bpf_prog_type type, int id)
{
	return libbpf_probe_bpf_helper(type, id, NULL) > 0;
}

/* BPF_ATOMIC with BPF_FETCH on the stack (Linux 5.12): peaks need it. */
static bool probe_atomics(void)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_ST | BPF_DW | BPF_MEM, .dst_reg = BPF_REG_10, .off = -8, .imm = 0 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_1, .imm = 1 },
		{ .code = BPF_STX | BPF_DW | 0xc0 /* BPF_ATOMIC */, .dst_reg = BPF_REG_10,
		  .src_reg = BPF_REG_1, .off = -8, .imm = 0x01 /* BPF_ADD | BPF_FETCH */ },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	int fd = bpf_prog_load(BPF_PROG_TYPE_SOCKET_FILTER, NULL, "GPL", insns,
			       sizeof(insns) / sizeof(insns[0]), NULL);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/*
 * uprobe_multi links (Linux 6.6): a kernel that has them looks the path up
 * and refuses a directory with EBADF; one that has not refuses the attach
 * type (EINVAL). The program fd is not looked at before the path.
 */
static bool probe_uprobe_multi(void)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, popts, .expected_attach_type = MT_TRACE_UPROBE_MULTI);
	uint64_t off = 0;
	struct {
		uint32_t prog_fd, target_fd, attach_type, flags;
		uint64_t path, offsets, ref_ctr_offsets, cookies;
		uint32_t cnt, flags2, pid, pad;
	} attr = { .attach_type = MT_TRACE_UPROBE_MULTI, .path = (uintptr_t)"/",
		   .offsets = (uintptr_t)&off, .cnt = 1 };
	int prog, fd;

	prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, NULL, "GPL", insns, 2, &popts);
	if (prog < 0)
		return false;
	attr.prog_fd = prog;
	fd = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	if (fd >= 0)
		close(fd);
	else
		fd = -errno;
	close(prog);
	return fd == -EBADF;
}

/*
 * Whether a program of TYPE and ATTACH (fentry, LSM) on BTF function ID loads
 * and attaches: fentry needs the kernel's function tracer, and a sandbox may
 * refuse either.
 */
static bool probe_trampoline(enum bpf_prog_type type, enum bpf_attach_type attach, int id)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, popts, .expected_attach_type = attach,
		    .attach_btf_id = (uint32_t)id);
	int prog, link;

	if (id < 0)
		return false;
	prog = bpf_prog_load(type, NULL, "GPL", insns, 2, &popts);
	if (prog < 0)
		return false;
	link = bpf_raw_tracepoint_open(NULL, prog);
	if (link >= 0)
		close(link);
	close(prog);
	return link >= 0;
}

/* Whether the BPF LSM is among the kernel's active security modules (attached but inactive, it never runs). */
static bool bpf_lsm_active(void)
{
	char list[512], *tok, *save;
	FILE *f = fopen("/sys/kernel/security/lsm", "re");
	bool found = false;

	if (!f)
		return false;
	if (fgets(list, sizeof(list), f))
		for (tok = strtok_r(list, ",\n", &save); tok && !found; tok = strtok_r(NULL, ",\n", &save))
			found = !strcmp(tok, "bpf");
	fclose(f);
	return found;
}

/* Memory accounting: atomics, resident and mapped memory, mapping sites, exits. */
static void decide_accounting(struct kernel_features *kf)
{
	const char *r = kf->release;

	set(kf, FEAT_BTF, FEATURE_YES, "%s", kf->btf_source);
	if (kf->atomics && kf->for_each_elem)
		set(kf, FEAT_ATOMICS, FEATURE_YES, "exact peaks under concurrent updates");
	else
		set(kf, FEAT_ATOMICS, FEATURE_DEGRADED,
		    "no BPF atomic fetch operations or callbacks (Linux 5.12, 5.13; kernel %s): "
		    "levels exact, a peak can be off by the deltas of other CPUs in flight", r);

	if (kf->rss_percpu && kf->bpf_loop && kf->percpu_elem)
		set(kf, FEAT_RSS, FEATURE_YES, "percpu_counter: an event reads its own CPU's part; every CPU at fork, exec, exit, OOM");
	else if (kf->rss_percpu)
		set(kf, FEAT_RSS, FEATURE_NO,
		    "percpu rss counters without bpf_loop/bpf_map_lookup_percpu_elem (kernel %s)", r);
	else
		set(kf, FEAT_RSS, FEATURE_DEGRADED,
		    "atomic rss counters (before 6.2): each thread's unsynced cache, up to 64 page "
		    "events, shows late, as in /proc");

	if (kf->mmap_lock_args == 3)
		set(kf, FEAT_MAPPED, FEATURE_YES, "exact per mmap_lock write section");
	else if (kf->mmap_lock_args == 4)
		set(kf, FEAT_MAPPED, FEATURE_FALLBACK,
		    "mmap_lock tracepoints with a memcg path argument (kernel %s)", r);
	else
		set(kf, FEAT_MAPPED, FEATURE_DEGRADED,
		    "no mmap_lock tracepoints (kernel %s): synced as each mapping system call "
		    "returns", r);

	if (kf->mmap_lock_args >= 3 && kf->task_pt_regs && kf->atomics)
		set(kf, FEAT_MAP_SITES, FEATURE_YES, "the stack of each section that maps");
	else
		set(kf, FEAT_MAP_SITES, FEATURE_NO,
		    "mapping sites need the mmap_lock tracepoints and bpf_task_pt_regs "
		    "(Linux 5.15; kernel %s)", r);

	if (kf->exit_args == 2)
		set(kf, FEAT_EXIT, FEATURE_YES, "sched_process_exit(task, group_dead) before exit_mm");
	else if (kf->exit_args == 1)
		set(kf, FEAT_EXIT, FEATURE_FALLBACK,
		    "sched_process_exit(task) after exit_mm: levels as of the last event before it");
	else
		set(kf, FEAT_EXIT, FEATURE_NO, "no sched_process_exit tracepoint (kernel %s)", r);
}

/* Phases and verdicts: the in-program marker, mark, rules, the OOM victim. */
static void decide_phases(struct kernel_features *kf)
{
	const char *r = kf->release;

	if (kf->prctl_tp)
		set(kf, FEAT_MARKER, FEATURE_YES, "task_prctl_unknown tracepoint");
	else
		set(kf, FEAT_MARKER, FEATURE_FALLBACK,
		    "task_prctl_unknown tracepoint missing (kernel %s), using raw_syscalls:sys_enter",
		    r);

	if (kf->syscall_prog)
		set(kf, FEAT_MARK, FEATURE_YES, "syscall program run by 'memtrail mark'");
	else
		set(kf, FEAT_MARK, FEATURE_FALLBACK,
		    "no syscall programs (Linux 5.14; kernel %s): a raw tracepoint program run "
		    "the same way", r);

	if (kf->attach_cookie)
		set(kf, FEAT_RULES, FEATURE_YES, "uprobe with a cookie per rule");
	else
		set(kf, FEAT_RULES, FEATURE_DEGRADED,
		    "no bpf_get_attach_cookie (Linux 5.15; kernel %s): a program per rule, the first "
		    "%d rules", r, MEMTRAIL_RULE_PROGS);

	if (kf->mark_victim_args == 2)
		set(kf, FEAT_OOM, FEATURE_YES, "oom:mark_victim(task, uid)");
	else if (kf->mark_victim_args == 1)
		set(kf, FEAT_OOM, FEATURE_FALLBACK,
		    "oom:mark_victim passes a pid (kernel %s): the victim taken from the OOM "
		    "killer's SIGKILL just before it", r);
	else
		set(kf, FEAT_OOM, FEATURE_NO, "no oom:mark_victim tracepoint (kernel %s)", r);
}

/* Probes: the heap, runtimes' libraries, files mapped, code mappings, the gate. */
static void decide_probes(struct kernel_features *kf)
{
	const char *r = kf->release;

	if (kf->uprobe_multi)
		set(kf, FEAT_HEAP, FEATURE_YES, "uprobe_multi links per process");
	else if (kf->attach_cookie)
		set(kf, FEAT_HEAP, FEATURE_FALLBACK,
		    "no uprobe_multi links (Linux 6.6; kernel %s): one uprobe link per function "
		    "and process", r);
	else
		set(kf, FEAT_HEAP, FEATURE_FALLBACK,
		    "no uprobe_multi links or bpf_cookie (Linux 6.6, 5.15; kernel %s): one uprobe "
		    "link per function and process, an entry program per operation", r);

	if (!kf->for_each_elem)
		set(kf, FEAT_DEVICE, FEATURE_DEGRADED,
		    "no bpf_for_each_map_elem (Linux 5.13; kernel %s): device memory live at an "
		    "exec stays counted after it; an entry program per function", r);
	else if (!kf->attach_cookie)
		set(kf, FEAT_DEVICE, FEATURE_FALLBACK,
		    "no bpf_cookie (Linux 5.15; kernel %s): an entry program per function", r);
	else
		set(kf, FEAT_DEVICE, FEATURE_YES, "uprobes on the runtimes' libraries");
	if (kf->uprobe_multi)
		set(kf, FEAT_DEVICE_MULTI, FEATURE_YES, "one uprobe_multi link per library");
	else
		set(kf, FEAT_DEVICE_MULTI, FEATURE_FALLBACK,
		    "no uprobe_multi links (Linux 6.6; kernel %s): one link per function", r);
	if (kf->find_vma)
		set(kf, FEAT_DEVICE_SITES, FEATURE_YES, "bpf_find_vma names the file of each frame");
	else
		set(kf, FEAT_DEVICE_SITES, FEATURE_DEGRADED,
		    "no bpf_find_vma (Linux 5.17; kernel %s): sites symbolized while the process lives",
		    r);
	/* no process is ever stopped for it: what it calls before the probes are live is counted */
	if (kf->mmap_hook)
		set(kf, FEAT_NEW_LIBS, FEATURE_YES,
		    "a file new to memtrail is probed the moment a process maps it (%s); calls "
		    "made before its probes are live are counted as late",
		    kf->mmap_hook == MMAP_HOOK_LSM ? "BPF LSM mmap_file" :
		    kf->mmap_hook == MMAP_HOOK_FENTRY ? "fentry security_mmap_file" :
		    kf->mmap_hook == MMAP_HOOK_LOCK ? "mmap seen in its mmap_lock section" :
		    "mmap seen at every system call's exit");
	else
		set(kf, FEAT_NEW_LIBS, FEATURE_DEGRADED,
		    "no hook sees files mapped (kernel %s): a file new to memtrail is probed as "
		    "memtrail reads the process's maps; its first calls can be missed", r);
	/* the hook that tracks files mapped says when a process mapped code */
	if (kf->vma_iter && kf->f[FEAT_NEW_LIBS].state == FEATURE_YES)
		set(kf, FEAT_SITE_MAPS, FEATURE_YES,
		    "a process's code mappings read in BPF after it maps code: stacks named "
		    "however short its life");
	else
		set(kf, FEAT_SITE_MAPS, FEATURE_DEGRADED,
		    "%s%s): a process's code mappings are read from /proc while it lives; one that "
		    "exits within moments of mapping code can have [unknown] frames",
		    kf->vma_iter ? "new_libs is degraded (kernel " :
		    "no task_vma iterator (Linux 6.7; kernel ", r);
	if (!kf->perm_events)
		set(kf, FEAT_GATE, FEATURE_YES,
		    "record -- CMD: the command waits at each open of an ELF file until memtrail "
		    "probed it (fanotify permission events on a mount namespace of its own)");
	else
		set(kf, FEAT_GATE, FEATURE_DEGRADED,
		    "no fanotify permission events (kernel %s: %s): a runtime record's command "
		    "writes and maps at once is probed as it is mapped, late calls counted", r,
		    strerror(-kf->perm_events));
}

void features__decide(struct kernel_features *kf)
{
	decide_accounting(kf);
	decide_phases(kf);
	decide_probes(kf);
}

void features__site_maps_refused(struct kernel_features *kf, int err)
{
	set(kf, FEAT_SITE_MAPS, FEATURE_DEGRADED,
	    "the task_vma iterator's programs did not load (kernel %s: %s): a process's code "
	    "mappings are read from /proc while it lives; one that exits within moments of "
	    "mapping code can have [unknown] frames", kf->release, strerror(-err));
}

/* 0 where fanotify has permission events (CONFIG_FANOTIFY_ACCESS_PERMISSIONS), else -errno. */
static int probe_perm_events(void)
{
	int fd = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

int features__probe(struct kernel_features *kf)
{
	int lsm_id, fentry_id;
	struct utsname u;
	struct btf *btf;
	bool sys_exit;

	memset(kf, 0, sizeof(*kf));
	if (!uname(&u)) {
		snprintf(kf->release, sizeof(kf->release), "%s", u.release);
		snprintf(kf->machine, sizeof(kf->machine), "%s", u.machine);
	}
	kf->page_size = sysconf(_SC_PAGESIZE);
	if (access(SYSFS_BTF, R_OK)) {
		log__error("kernel BTF not found at '%s': %s (memtrail needs a kernel built "
			   "with CONFIG_DEBUG_INFO_BTF=y)", SYSFS_BTF, strerror(errno));
		return -ENOENT;
	}
	btf = btf__load_vmlinux_btf();
	if (!btf) {
		int err = -errno;

		log__error("kernel BTF at '%s' is unreadable or not BTF: %s (memtrail needs a "
			   "kernel built with CONFIG_DEBUG_INFO_BTF=y)", SYSFS_BTF, strerror(-err));
		return err;
	}
	snprintf(kf->btf_source, sizeof(kf->btf_source), "%s", SYSFS_BTF);
	kf->exit_args = tp_args(btf, "sched_process_exit");
	kf->mmap_lock_args = tp_args(btf, "mmap_lock_acquire_returned");
	if (tp_args(btf, "mmap_lock_released") != kf->mmap_lock_args - 1)
		kf->mmap_lock_args = -1;	/* a pair of another shape: use neither */
	kf->mark_victim_args = tp_args(btf, "mark_victim");
	kf->prctl_tp = tp_args(btf, "task_prctl_unknown") >= 2;
	kf->rss_percpu = member_kind(btf, "mm_struct", "rss_stat") == BTF_KIND_ARRAY;
	lsm_id = btf__find_by_name_kind(btf, "bpf_lsm_mmap_file", BTF_KIND_FUNC);
	fentry_id = btf__find_by_name_kind(btf, "security_mmap_file", BTF_KIND_FUNC);
	sys_exit = tp_args(btf, "sys_exit") == 2;
	kf->vma_iter = btf__find_by_name_kind(btf, "bpf_iter_task_vma_new", BTF_KIND_FUNC) > 0;
	btf__free(btf);

	kf->atomics = probe_atomics();
	kf->bpf_loop = helper(BPF_PROG_TYPE_KPROBE, MT_BPF_FUNC_loop);
	kf->for_each_elem = helper(BPF_PROG_TYPE_KPROBE, MT_BPF_FUNC_for_each_map_elem);
	kf->find_vma = helper(BPF_PROG_TYPE_KPROBE, MT_BPF_FUNC_find_vma);
	kf->percpu_elem = helper(BPF_PROG_TYPE_KPROBE, MT_BPF_FUNC_map_lookup_percpu_elem);
	kf->attach_cookie = helper(BPF_PROG_TYPE_KPROBE, MT_BPF_FUNC_get_attach_cookie);
	kf->task_pt_regs = helper(BPF_PROG_TYPE_KPROBE, MT_BPF_FUNC_task_pt_regs);
	kf->task_btf = helper(BPF_PROG_TYPE_KPROBE, MT_BPF_FUNC_get_current_task_btf);
	kf->task_storage = libbpf_probe_bpf_map_type(MT_BPF_MAP_TYPE_TASK_STORAGE, NULL) > 0;
	kf->syscall_prog = libbpf_probe_bpf_prog_type(MT_BPF_PROG_TYPE_SYSCALL, NULL) > 0;
	kf->uprobe_multi = probe_uprobe_multi();
	kf->perm_events = probe_perm_events();
	/* where files are seen mapped: the cheapest of the hooks that work here */
	if (bpf_lsm_active() && probe_trampoline(BPF_PROG_TYPE_LSM, BPF_LSM_MAC, lsm_id))
		kf->mmap_hook = MMAP_HOOK_LSM;
	else if (probe_trampoline(BPF_PROG_TYPE_TRACING, BPF_TRACE_FENTRY, fentry_id))
		kf->mmap_hook = MMAP_HOOK_FENTRY;
	else if (kf->mmap_lock_args >= 3 && kf->task_pt_regs)
		kf->mmap_hook = MMAP_HOOK_LOCK;
	else if (sys_exit)
		kf->mmap_hook = MMAP_HOOK_SYSCALL;
	/* MEMTRAIL_NO_COOKIE=1: as before 5.15 (no cookie, so no uprobe_multi): its tests, here */
	if (getenv("MEMTRAIL_NO_COOKIE"))
		kf->attach_cookie = kf->uprobe_multi = false;
	/* MEMTRAIL_NO_FIND_VMA=1: as before 5.17 (device sites only from /proc while the process lives) */
	if (getenv("MEMTRAIL_NO_FIND_VMA"))
		kf->find_vma = false;
	/* MEMTRAIL_NO_VMA_ITER=1: as before 6.7 (sites' maps only from /proc while the process lives) */
	if (getenv("MEMTRAIL_NO_VMA_ITER"))
		kf->vma_iter = false;
	features__decide(kf);
	return 0;
}

void features__print(const struct kernel_features *kf, FILE *out)
{
	int i;

	fprintf(out, "kernel %s (%s, %ld KiB pages), BTF %s\n", kf->release, kf->machine,
		kf->page_size / 1024, kf->btf_source);
	fprintf(out, "%-13s %-9s %s\n", "FEATURE", "STATE", "HOW");
	for (i = 0; i < FEAT_MAX; i++)
		fprintf(out, "%-13s %-9s %s\n", kf->f[i].name,
			features__state_name(kf->f[i].state), kf->f[i].note);
}

json_t *features__json(const struct kernel_features *kf)
{
	json_t *root = json_object(), *fs = json_object();
	int i;

	if (!root || !fs) {
		json_decref(root);
		json_decref(fs);
		return NULL;
	}
	json_object_set_new(root, "release", json_string(kf->release));
	json_object_set_new(root, "btf", json_string(kf->btf_source));
	json_object_set_new(root, "machine", json_string(kf->machine));
	json_object_set_new(root, "page_size", json_integer(kf->page_size));
	for (i = 0; i < FEAT_MAX; i++)
		json_object_set_new(fs, kf->f[i].name,
				    json_pack("{s:s, s:s}", "state",
					      features__state_name(kf->f[i].state), "note",
					      kf->f[i].note));
	json_object_set_new(root, "features", fs);
	return root;
}

/* memtrail features [--json]: the table, for people or programs. */
