// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <string.h>

#include "kinds.h"

static const char *const names[MEMTRAIL_KIND_MAX] = {
	[MEMTRAIL_KIND_HEAP] = "heap",
	[MEMTRAIL_KIND_MAPPED] = "mapped",
	[MEMTRAIL_KIND_RSS_ANON] = "rss_anon",
	[MEMTRAIL_KIND_RSS_FILE] = "rss_file",
	[MEMTRAIL_KIND_RSS_SHMEM] = "rss_shmem",
	[MEMTRAIL_KIND_CUDA_DEVICE] = "cuda_device",
	[MEMTRAIL_KIND_CUDA_HOST] = "cuda_host",
	[MEMTRAIL_KIND_CUDA_MANAGED] = "cuda_managed",
	[MEMTRAIL_KIND_NEURON_DEVICE] = "neuron_device",
	[MEMTRAIL_KIND_NEURON_HOST] = "neuron_host",
};

const char *kind__name(int kind)
{
	if (kind < 0 || kind >= MEMTRAIL_KIND_MAX)
		return NULL;
	return names[kind];
}

int kind__from_name(const char *name)
{
	int k;

	for (k = 0; k < MEMTRAIL_KIND_MAX; k++)
		if (!strcmp(names[k], name))
			return k;
	return -1;
}

uint32_t kind__sourced(void)
{
	return 1U << MEMTRAIL_KIND_MAPPED | 1U << MEMTRAIL_KIND_RSS_ANON |
	       1U << MEMTRAIL_KIND_RSS_FILE | 1U << MEMTRAIL_KIND_RSS_SHMEM;
}

uint32_t kind__device(void)
{
	return 1U << MEMTRAIL_KIND_CUDA_DEVICE | 1U << MEMTRAIL_KIND_CUDA_HOST |
	       1U << MEMTRAIL_KIND_CUDA_MANAGED | 1U << MEMTRAIL_KIND_NEURON_DEVICE |
	       1U << MEMTRAIL_KIND_NEURON_HOST;
}
