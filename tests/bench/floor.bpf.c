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

SEC("tp_btf/sched_process_fork")
int floor_fork(void *ctx)
{
	return count();
}

SEC("tp_btf/sched_process_exec")
int floor_exec(void *ctx)
{
	return count();
}

SEC("tp_btf/sched_process_exit")
int floor_exit(void *ctx)
{
	return count();
}

SEC("tp_btf/rss_stat")
int floor_rss(void *ctx)
{
	return count();
}

SEC("tp_btf/mmap_lock_acquire_returned")
int floor_lock(void *ctx)
{
	return count();
}

SEC("tp_btf/mmap_lock_released")
int floor_unlock(void *ctx)
{
	return count();
}

SEC("tp_btf/signal_generate")
int floor_signal(void *ctx)
{
	return count();
}
