// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The physical floor of heap probing: a uprobe on malloc's entry and return
 * and on free's entry that only count hits, the same traps memtrail --heap
 * takes per malloc/free pair.
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
