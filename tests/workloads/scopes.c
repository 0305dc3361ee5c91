// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Phases scoped to functions (--scope NAME=BINARY:scope_NAME), nested and
 * recursive, with known mappings (MiB, every page touched):
 *   scope_load     +16, scope_layer (+8), +2, scope_layer (+8), +2
 *   main           +4
 *   scope_forward  3 times: +32 -32 (transient) +1
 *   scope_nest(3)  +1 and scope_nest(2) (+1 and scope_nest(1): +1)
 *   scope_escape   +1, then a longjmp out of it: its return never comes, so
 *                  main's +2 after it is still the escape's to memtrail,
 *                  until the next scope_forward returns (its return ends
 *                  the escape's frame too, gone below main's)
 *   main           the teardown: every mapping above unmapped
 * Each entry and each return starts a segment (a return resumes the phase
 * its entry interrupted, by name); the workload keeps the arithmetic of each
 * segment from the first entry on and prints it as JSON:
 *   {"segments": [{"name", "allocations", "deallocations", "segment_change",
 *   "segment_peak"}, ...]} in bytes.
 *   scopes [--wait]
 */
#include <setjmp.h>

#include "common.h"

#define SEGMENTS 32

static struct {
	const char *name;
	long long alloc, dealloc, start, peak;
} seg[SEGMENTS];
static int n_seg;
static long long level;
static struct mappings kept;
static volatile int depth_seen;

static void segment(const char *name)
{
	if (n_seg == SEGMENTS)
		_exit(5);
	seg[n_seg].name = name;
	seg[n_seg].start = level;
	n_seg++;
}

static void add(long mib)
{
	struct mappings *m = &kept;
	long long bytes = (long long)mib * (long long)MiB, over;

	step(m, mib);
	level += bytes;
	if (bytes > 0)
		seg[n_seg - 1].alloc += bytes;
	else
		seg[n_seg - 1].dealloc -= bytes;
	over = level - seg[n_seg - 1].start;
	if (over > seg[n_seg - 1].peak)
		seg[n_seg - 1].peak = over;
}

__attribute__((noinline)) void scope_layer(void)
{
	segment("layer");
	add(8);
}

__attribute__((noinline)) void scope_load(void)
{
	segment("load");
	add(16);
	scope_layer();
	segment("load");
	add(2);
	scope_layer();
	segment("load");
	add(2);
}

__attribute__((noinline)) void scope_forward(void)
{
	segment("forward");
	add(32);
	add(-32);
	add(1);
}

__attribute__((noinline)) void scope_nest(int n)
{
	segment("nest");
	add(1);
	if (n > 1) {
		scope_nest(n - 1);
		segment("nest");
	}
	depth_seen++;	/* not a tail call: each level returns through its own frame */
}

static jmp_buf escape_to;

__attribute__((noinline)) void scope_escape(void)
{
	segment("escape");
	add(1);
	longjmp(escape_to, 1);
}

int main(int argc, char **argv)
{
	static char out[8192];	/* static: no stack growth to count */
	size_t len = 0;
	int i;

	wait_go(argc, argv);
	scope_load();
	segment("start");
	add(4);
	for (i = 0; i < 3; i++) {
		scope_forward();
		segment("start");
	}
	scope_nest(3);
	segment("start");
	if (!setjmp(escape_to))
		scope_escape();
	add(2);		/* memtrail saw no return: still the escape's segment */
	scope_forward();
	segment("start");
	while (kept.n)
		add(-(long)(kept.size[kept.n - 1] / MiB));
	len += (size_t)snprintf(out + len, sizeof(out) - len, "{\"segments\": [");
	for (i = 0; i < n_seg && len < sizeof(out); i++)
		len += (size_t)snprintf(out + len, sizeof(out) - len,
					"%s{\"name\": \"%s\", \"allocations\": %lld, "
					"\"deallocations\": %lld, \"segment_change\": %lld, "
					"\"segment_peak\": %lld}", i ? ", " : "", seg[i].name,
					seg[i].alloc, seg[i].dealloc, seg[i].alloc - seg[i].dealloc,
					seg[i].peak);
	len += (size_t)snprintf(out + len, sizeof(out) - len, "]}\n");
	if (len >= sizeof(out) || write(1, out, len) != (ssize_t)len)
		_exit(6);
	return 0;
}
