// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The physical floor of heap probing: a uprobe on malloc's entry and return
 * and on free's entry that only count hits, the same traps memtrail --heap
 * takes per malloc/free pair. And of tracing every process: the kernel hooks
 * memtrail watch runs at for each process (fork, exec, exit, each rss_stat
 * event and mmap_lock section, signals), with programs that only count.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* hits, per CPU */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

static __always_inline int count(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&hits, &zero);

	if (n)
		*n += 1;
	return 0;
}

SEC("uprobe")
int floor_entry(void *ctx)
{
	return count();
}

SEC("uretprobe")
int floor_return(void *ctx)
{
	return count();
}

/* A counting program on tracepoint TP. */
#define FLOOR_HOOK(name, tp)			\
	SEC("tp_btf/" tp)			\
	int floor_##name(void *ctx)		\
	{					\
		return count();			\
	}

FLOOR_HOOK(fork, "sched_process_fork")
FLOOR_HOOK(exec, "sched_process_exec")
FLOOR_HOOK(exit, "sched_process_exit")
FLOOR_HOOK(rss, "rss_stat")
FLOOR_HOOK(lock, "mmap_lock_acquire_returned")
FLOOR_HOOK(unlock, "mmap_lock_released")
FLOOR_HOOK(signal, "signal_generate")
