// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Trails: write, read back the same, reject what is malformed. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "kinds.h"
#include "trail.h"
#include "trailstream.h"

/* Sites of every shape the engine writes: a named frame, a placeholder, a folded phase, a budget. */
static struct trail_sites *make_sites(void)
{
	struct trail_sites *ts = trail_sites__new();
	struct trail_site *site;
	struct trail_frame *fr;

	assert_non_null(ts);
	site = trail_sites__add(ts);
	assert_non_null(site);
	site->kind = MEMTRAIL_KIND_HEAP;
	site->phase = strdup("load");
	site->phase_seq = 3;
	site->alloc_bytes = 5ULL << 32;		/* above 2^32: 64-bit clean */
	site->alloc_objects = 2.5;
	site->inuse_bytes = 1ULL << 32;
	site->inuse_objects = 0.5;
	site->samples = 7;
	site->frames_truncated = true;
	fr = trail_site__add_frame(site);
	assert_non_null(fr);
	*fr = (struct trail_frame){ .has_address = true, .address = 0x7f0000001234,
		.function = strdup("c10::alloc_cpu(unsigned long)"), .symbol = strdup("_ZN3c109alloc_cpuEm"),
		.module = strdup("/usr/lib/libc10.so"), .offset = 0x1234,
		.build_id = strdup("93ac61ec"), .source = strdup("c10/core/impl/alloc_cpu.cpp:88") };
	fr = trail_site__add_frame(site);
	assert_non_null(fr);
	*fr = (struct trail_frame){ .has_address = true, .address = 0x1000, .function = strdup("[anon]") };
	site = trail_sites__add(ts);
	assert_non_null(site);
	site->kind = TRAIL_SITE_FAULTS;
	site->phase = strdup("decode");
	site->folded = true;
	site->alloc_bytes = 4096;
	fr = trail_site__add_frame(site);
	assert_non_null(fr);
	fr->function = strdup("[no stack]");
	ts->has_heap = true;
	ts->heap = (struct trail_heap){ .mode = TRAIL_HEAP_BUDGET, .sample_bytes = 524288,
		.probe_hits = 99, .coverage = 0.25, .has_cost = true, .cost_per_hit_ns = 1500,
		.probe_cost_ms = 0.1485, .budget_pct = 2, .cycles = 4, .cycles_spent = 3,
		.close_ms = 1.5, .close_cost_ms = 0.75, .has_target_cpu = true,
		.target_cpu_ms = 812.5 };
	return ts;
}

static void expect_frames_equal(const struct trail_frame *a, const struct trail_frame *b)
{
	assert_int_equal(a->has_address, b->has_address);
	assert_int_equal(a->address, b->address);
	assert_int_equal(a->offset, b->offset);
	assert_string_equal(a->function, b->function);
	if (a->module)
		assert_string_equal(a->module, b->module);
	else
		assert_null(b->module);
	if (a->symbol)
		assert_string_equal(a->symbol, b->symbol);
	else
		assert_null(b->symbol);
	if (a->build_id)
		assert_string_equal(a->build_id, b->build_id);
	else
		assert_null(b->build_id);
	if (a->source)
		assert_string_equal(a->source, b->source);
	else
		assert_null(b->source);
}

/* B, read back, holds what A held: every field of every site, frame and the heap's sampling. */
static void expect_sites_equal(const struct trail_sites *a, const struct trail_sites *b)
{
	size_t i, j;

	assert_non_null(b);
	assert_int_equal(a->n, b->n);
	for (i = 0; i < a->n; i++) {
		const struct trail_site *x = &a->list[i], *y = &b->list[i];

		assert_int_equal(x->kind, y->kind);
		assert_string_equal(x->phase, y->phase);
		assert_int_equal(x->folded, y->folded);
		assert_int_equal(x->phase_seq, y->phase_seq);
		assert_int_equal(x->alloc_bytes, y->alloc_bytes);
		assert_int_equal(x->inuse_bytes, y->inuse_bytes);
		assert_true(x->alloc_objects == y->alloc_objects);
		assert_true(x->inuse_objects == y->inuse_objects);
		assert_int_equal(x->samples, y->samples);
		assert_int_equal(x->frames_truncated, y->frames_truncated);
		assert_int_equal(x->n_frames, y->n_frames);
		for (j = 0; j < x->n_frames; j++)
			expect_frames_equal(&x->frames[j], &y->frames[j]);
	}
	assert_int_equal(a->has_heap, b->has_heap);
	assert_int_equal(a->heap.mode, b->heap.mode);
	assert_int_equal(a->heap.sample_bytes, b->heap.sample_bytes);
	assert_int_equal(a->heap.inuse, b->heap.inuse);
	assert_int_equal(a->heap.probe_hits, b->heap.probe_hits);
	assert_int_equal(a->heap.cycles, b->heap.cycles);
	assert_int_equal(a->heap.cycles_spent, b->heap.cycles_spent);
	assert_int_equal(a->heap.has_cost, b->heap.has_cost);
	assert_int_equal(a->heap.has_target_cpu, b->heap.has_target_cpu);
	assert_true(a->heap.coverage == b->heap.coverage);
	assert_true(a->heap.cost_per_hit_ns == b->heap.cost_per_hit_ns);
	assert_true(a->heap.probe_cost_ms == b->heap.probe_cost_ms);
	assert_true(a->heap.budget_pct == b->heap.budget_pct);
	assert_true(a->heap.close_ms == b->heap.close_ms);
	assert_true(a->heap.close_cost_ms == b->heap.close_cost_ms);
	assert_true(a->heap.target_cpu_ms == b->heap.target_cpu_ms);
}

static void make_trail(struct trail *t)
{
	struct trail_target *tt;
	int64_t level[MEMTRAIL_KIND_MAX] = { 0 };

	assert_int_equal(trail__init(t), 0);
	t->interval_ms = 100;
	t->duration_ms = 2500;
	t->kinds = kind__sourced();
	t->command = strdup("command ./server --port 8080");
	snprintf(t->started, sizeof(t->started), "2026-11-21T10:00:00Z");
	t->lost[MEMTRAIL_LOST_RINGBUF] = 7;

	tt = trail__add_target(t, 4242);
	assert_non_null(tt);
	tt->ppid = 1;
	snprintf(tt->comm, sizeof(tt->comm), "server");
	tt->cmdline = strdup("./server --port 8080");
	tt->cgroup = strdup("/kubepods/burstable/pod1/abc");
	tt->exited = true;
	tt->exit_signal = 9;
	tt->end_ms = 2400;
	tt->peak[MEMTRAIL_KIND_MAPPED] = 3LL << 30;	/* above 2^31: 64-bit clean */
	tt->current[MEMTRAIL_KIND_MAPPED] = 1LL << 30;
	tt->peak[MEMTRAIL_KIND_RSS_ANON] = 123456789;
	level[MEMTRAIL_KIND_MAPPED] = 1LL << 20;
	assert_int_equal(trail__add_sample(tt, 100, level), 0);
	level[MEMTRAIL_KIND_MAPPED] = 3LL << 30;
	assert_int_equal(trail__add_sample(tt, 200, level), 0);
	/* an event read after a later sample is placed at it: the timeline stays in order */
	assert_int_equal(trail__add_sample(tt, 150, level), 0);
	assert_int_equal(tt->timeline[2].t_ms, 200);

	assert_true(trail__set_device_limit(tt, MEMTRAIL_KIND_CUDA_DEVICE, 1, 80ULL << 30));
	assert_true(trail__set_device_limit(tt, MEMTRAIL_KIND_CUDA_DEVICE, -1, 16ULL << 30));
	assert_true(trail__set_device_limit(tt, MEMTRAIL_KIND_CUDA_DEVICE, 1, 81ULL << 30));
	tt->sites = make_sites();

	tt = trail__add_target(t, 4243);	/* still running: exit is null */
	assert_non_null(tt);
	snprintf(tt->comm, sizeof(tt->comm), "worker");
	assert_int_equal(trail__add_event(t, json_pack("{s:i, s:s, s:i}", "t_ms", 5, "type",
						      "fork", "pid", 4243)), 0);
}

static void round_trip(void **state)
{
	char path[] = "/tmp/memtrail-unit-XXXXXX", err[256];
	struct trail a, b;
	int fd;

	(void)state;
	make_trail(&a);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(trail__write(&a, path), 0);
	assert_int_equal(trail__read(&b, path, err, sizeof(err)), 0);
	unlink(path);

	assert_int_equal(b.version, 1);
	assert_int_equal(b.interval_ms, 100);
	assert_int_equal(b.duration_ms, 2500);
	assert_int_equal(b.kinds, a.kinds);
	assert_string_equal(b.command, a.command);
	assert_string_equal(b.started, a.started);
	assert_int_equal(b.lost[MEMTRAIL_LOST_RINGBUF], 7);
	assert_int_equal(b.n_targets, 2);
	assert_int_equal(b.targets[0].pid, 4242);
	assert_string_equal(b.targets[0].comm, "server");
	assert_string_equal(b.targets[0].cgroup, "/kubepods/burstable/pod1/abc");
	assert_true(b.targets[0].exited);
	assert_int_equal(b.targets[0].exit_signal, 9);
	assert_int_equal(b.targets[0].peak[MEMTRAIL_KIND_MAPPED], 3LL << 30);
	assert_int_equal(b.targets[0].current[MEMTRAIL_KIND_MAPPED], 1LL << 30);
	assert_int_equal(b.targets[0].peak[MEMTRAIL_KIND_RSS_ANON], 123456789);
	assert_int_equal(b.targets[0].n_samples, 3);
	assert_int_equal(b.targets[0].timeline[1].t_ms, 200);
	assert_int_equal(b.targets[0].timeline[1].level[MEMTRAIL_KIND_MAPPED], 3LL << 30);
	/* device sizes: set again replaces, device -1 (unknown) kept, added up per kind */
	assert_int_equal(b.targets[0].n_dev_limits, 2);
	assert_int_equal(b.targets[0].dev_limits[1].device, -1);
	assert_int_equal(trail__device_limit(&b.targets[0], MEMTRAIL_KIND_CUDA_DEVICE), 97ULL << 30);
	assert_int_equal(trail__device_limit(&b.targets[0], MEMTRAIL_KIND_NEURON_DEVICE), 0);
	assert_false(b.targets[1].exited);
	assert_null(b.targets[1].cmdline);
	assert_int_equal(json_array_size(b.events), 1);
	expect_sites_equal(a.targets[0].sites, b.targets[0].sites);
	assert_null(b.targets[1].sites);
	trail__free(&a);
	trail__free(&b);
}

/* The streamed file is the document trail__to_json builds, byte for byte. */
static void write_matches_tree(void **state)
{
	char path[] = "/tmp/memtrail-unit-XXXXXX", buf[8192];
	struct trail t;
	json_t *root;
	char *want;
	ssize_t n;
	int fd;

	(void)state;
	make_trail(&t);
	t.targets[0].timeline[0].level[MEMTRAIL_KIND_RSS_ANON] = INT64_MIN;
	free(t.targets[0].sites->list[0].phase);
	t.targets[0].sites->list[0].phase = strdup("a\"b\n\u00e9");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(trail__write(&t, path), 0);
	fd = open(path, O_RDONLY);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	unlink(path);
	assert_true(n > 0);
	buf[n] = 0;
	root = trail__to_json(&t, true);
	want = json_dumps(root, JSON_COMPACT);
	assert_non_null(want);
	assert_int_equal(n, strlen(want) + 1);
	assert_memory_equal(buf, want, n - 1);
	assert_int_equal(buf[n - 1], '\n');
	free(want);
	json_decref(root);
	trail__free(&t);
}

static void summary_json_has_no_timeline(void **state)
{
	struct trail t;
	json_t *j, *tgt;

	(void)state;
	make_trail(&t);
	j = trail__to_json(&t, false);
	tgt = json_array_get(json_object_get(j, "targets"), 0);
	assert_null(json_object_get(tgt, "timeline"));
	assert_null(json_object_get(j, "events"));
	assert_true(json_is_null(json_object_get(json_array_get(json_object_get(j, "targets"), 1),
						 "exit")));
	/* kinds without a source are absent */
	assert_null(json_object_get(json_object_get(tgt, "kinds"), "cuda_device"));
	assert_non_null(json_object_get(json_object_get(tgt, "kinds"), "rss_shmem"));
	json_decref(j);
	trail__free(&t);
}

static void expect_reject(const char *text, const char *needle)
{
	json_error_t jerr;
	json_t *root = json_loads(text, 0, &jerr);
	struct trail t;
	char err[256] = "";

	assert_non_null(root);
	assert_int_equal(trail__from_json(&t, root, err, sizeof(err)), -1);
	if (!strstr(err, needle))
		fail_msg("'%s' not in '%s'", needle, err);
	json_decref(root);
}

static void rejects_malformed(void **state)
{
	(void)state;
	expect_reject("[]", "top level is not an object");
	expect_reject("{}", "no \"memtrail\" version");
	expect_reject("{\"memtrail\": 2, \"targets\": []}", "unsupported trail version 2");
	expect_reject("{\"memtrail\": 1}", "targets: missing");
	expect_reject("{\"memtrail\": 1, \"targets\": {}}", "targets: not an array");
	expect_reject("{\"memtrail\": 1, \"targets\": [5]}", "targets[0]: not an object");
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": null, "
		      "\"kinds\": {}, \"device_limits\": 7}]}", "targets[0].device_limits: not an array");
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": null, "
		      "\"kinds\": {}, \"device_limits\": [{\"kind\": \"ram\", \"device\": 0, "
		      "\"bytes\": 1}]}]}", "targets[0].device_limits[0].kind: not a device's kind ('ram')");
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": null, "
		      "\"kinds\": {}, \"device_limits\": [{\"kind\": \"cuda_device\", "
		      "\"device\": \"0\", \"bytes\": 1}]}]}",
		      "targets[0].device_limits[0].device: not an integer");
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": -3}]}",
		      "targets[0].pid: out of range (-3)");
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"kinds\": {}}]}",
		      "targets[0].exit: missing");
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": 1, \"kinds\": {}}]}",
		      "targets[0].exit: not an object");
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": null, "
		      "\"kinds\": {\"mapped\": {\"current\": \"x\", \"peak\": 1}}}]}",
		      "targets[0].kinds.mapped.current: not an integer");
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": null, "
		      "\"kinds\": {\"bogus\": {}}}]}", "targets[0].kinds: unknown kind 'bogus'");
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": null, "
		      "\"kinds\": {}, \"timeline\": [{\"mapped\": 1}]}]}",
		      "targets[0].timeline[0].t_ms: missing");
	expect_reject("{\"memtrail\": 1, \"targets\": [], \"events\": 4}", "events: not an array");
	expect_reject("{\"memtrail\": 1, \"targets\": [], \"kinds\": [\"ram\"]}",
		      "kinds[0]: unknown kind");
	/* what was taken before the error is the document's still (no double free) */
	expect_reject("{\"memtrail\": 1, \"targets\": [], \"kernel\": {}, \"snapshot\": {}, "
		      "\"kinds\": 5}", "kinds: not an array");
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": null, \"kinds\": {}, "
		      "\"verdict\": {\"cause\": \"unknown\"}, \"sites\": {\"list\": []}, \"timeline\": 3}]}",
		      "targets[0].timeline: not an array");
}

/* A trail of one target (pid 3) with EXTRA in it, TOP at the top level. */
#define ONE(extra, top) "{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": null, " \
	"\"kinds\": {}" extra "}]" top "}"
#define EVENT(ev) ONE("", ", \"events\": [{\"t_ms\": 1, " ev "}]")
#define SITE(site) ONE(", \"sites\": {\"list\": [" site "]}", "")
#define PHASE(fields) ONE(", \"phases\": [{\"name\": \"a\", \"start\": 0, \"end\": 1, " \
	"\"kinds\": {\"mapped\": {" fields "}}}]", "")
#define FIELDS_BUT_ALLOC "\"deallocations\": 0, \"segment_change\": -5, \"segment_peak\": 0, " \
	"\"cumulative_current\": 0, \"cumulative_peak\": 0"

/* Nonsense a trail may hold, each named by its path: out of range, wrong types. */
static void rejects_nonsense(void **state)
{
	(void)state;
	/* PIDs up to PID_MAX_LIMIT (4194304): 2^32 + 1 is not pid 1 */
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 4294967297, \"exit\": null}]}",
		      "targets[0].pid: out of range (4294967297)");
	expect_reject(ONE(", \"ppid\": 4194305", ""), "targets[0].ppid: out of range (4194305)");
	/* sizes are never negative, levels (kept from changes) not by more than 2^59 */
	expect_reject(ONE(", \"kinds\": {\"mapped\": {\"current\": 0, "
			  "\"peak\": -9223372036854775808}}", ""),
		      "targets[0].kinds.mapped.peak: out of range (-9223372036854775808)");
	expect_reject(ONE(", \"kinds\": {\"mapped\": {\"current\": 0, "
			  "\"peak\": 576460752303423489}}", ""),
		      "targets[0].kinds.mapped.peak: out of range (576460752303423489)");
	expect_reject(PHASE("\"allocations\": -1, " FIELDS_BUT_ALLOC),
		      "targets[0].phases[0].kinds.mapped.allocations: out of range (-1)");
	expect_reject(ONE(", \"device_limits\": [{\"kind\": \"cuda_device\", \"device\": -1, "
			  "\"bytes\": 1}]", ""),
		      "targets[0].device_limits[0].device: out of range (-1)");
	expect_reject(SITE("{\"kind\": \"heap\", \"phase\": \"a\", \"phase_seq\": 0, "
			   "\"alloc_bytes\": -8}"),
		      "targets[0].sites.list[0].alloc_bytes: out of range (-8)");
	expect_reject(EVENT("\"type\": \"device_oom\", \"size\": -4096"),
		      "events[0].size: out of range (-4096)");
	/* signals 1..64 (0 in an exit: none), exit codes 0..255 */
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": {\"code\": 0, "
		      "\"signal\": -7}, \"kinds\": {}}]}", "targets[0].exit.signal: out of range (-7)");
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": {\"code\": 256, "
		      "\"signal\": 0}, \"kinds\": {}}]}", "targets[0].exit.code: out of range (256)");
	expect_reject(EVENT("\"type\": \"signal\", \"pid\": 3, \"signal\": 0"),
		      "events[0].signal: out of range (0)");
	expect_reject(EVENT("\"type\": \"exit\", \"pid\": 3, \"code\": 0, \"signal\": 65"),
		      "events[0].signal: out of range (65)");
	/* times whose ns fit in 64 bits, timelines in order */
	expect_reject(ONE("", ", \"duration_ms\": -1"), "duration_ms: out of range (-1)");
	expect_reject(ONE(", \"end_ms\": 9223372036855", ""),
		      "targets[0].end_ms: out of range (9223372036855)");
	expect_reject(ONE("", ", \"events\": [{\"t_ms\": 9223372036855, \"type\": \"exec\"}]"),
		      "events[0].t_ms: out of range (9223372036855)");
	expect_reject(ONE(", \"timeline\": [{\"t_ms\": 10}, {\"t_ms\": 5}]", ""),
		      "targets[0].timeline[1].t_ms: 5 is before the previous sample's 10");
	/* wrong types */
	expect_reject(SITE("{\"kind\": 5, \"phase\": \"a\", \"phase_seq\": 0, \"alloc_bytes\": 8}"),
		      "targets[0].sites.list[0].kind: not a string");
	expect_reject(SITE("{\"kind\": \"heap\", \"phase\": \"a\", \"alloc_bytes\": 8}"),
		      "targets[0].sites.list[0].phase_seq: missing");
	/* pprof gives each kind of site its own sample types: only known kinds */
	expect_reject(SITE("{\"kind\": \"swap\", \"phase\": \"a\", \"phase_seq\": 0, "
			   "\"alloc_bytes\": 8}"),
		      "targets[0].sites.list[0].kind: not a kind of site ('swap')");
	expect_reject(SITE("{\"kind\": \"heap\", \"phase\": \"a\", \"phase_seq\": 0, "
			   "\"alloc_bytes\": 8, \"frames\": [{\"function\": 3}]}"),
		      "targets[0].sites.list[0].frames[0].function: not a string");
	expect_reject(SITE("{\"kind\": \"heap\", \"phase\": \"a\", \"phase_seq\": 0, "
			   "\"alloc_bytes\": 8, \"frames\": [{\"address\": \"0x12g\"}]}"),
		      "targets[0].sites.list[0].frames[0].address: not an address ('0x12g')");
	expect_reject(SITE("{\"kind\": \"heap\", \"phase\": \"a\", \"phase_seq\": 0, "
			   "\"alloc_bytes\": 8, \"frames\": [{\"offset\": \"0x10000000000000000\"}]}"),
		      "targets[0].sites.list[0].frames[0].offset: not an address ('0x10000000000000000')");
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": null, \"kinds\": {}, "
		      "\"sites\": {\"list\": [], \"heap\": {\"mode\": \"fast\"}}}]}",
		      "targets[0].sites.heap.mode: not a heap mode ('fast')");
	expect_reject(ONE(", \"comm\": [\"x\"]", ""), "targets[0].comm: not a string");
	expect_reject(ONE(", \"comm\": \"sixteen bytes...\"", ""),
		      "targets[0].comm: longer than 15 bytes");
	expect_reject(ONE(", \"verdict\": {\"cause\": \"oom_cgroup\", \"trigger\": {\"pid\": -1}}", ""),
		      "targets[0].verdict.trigger.pid: out of range (-1)");
	expect_reject(ONE(", \"verdict\": {\"cause\": 1}", ""),
		      "targets[0].verdict.cause: not a string");
	expect_reject(ONE(", \"verdict\": {\"cause\": \"meteor\"}", ""),
		      "targets[0].verdict.cause: not a cause ('meteor')");
	expect_reject(ONE(", \"container\": {\"id\": 5}", ""),
		      "targets[0].container.id: not a string");
	expect_reject(ONE(", \"pod\": {\"qos\": \"sixteen bytes...\"}", ""),
		      "targets[0].pod.qos: longer than 15 bytes");
	expect_reject(EVENT("\"pid\": 3"), "events[0].type: missing");
	expect_reject(ONE("", ", \"lost\": {\"ringbuf\": -1}"), "lost.ringbuf: out of range (-1)");
	expect_reject(ONE("", ", \"snapshot\": {\"pid\": 0}"), "snapshot.pid: out of range (0)");
}

/* What a real trail has passes, folded sites and null devices included. */
static void accepts_the_writers_shapes(void **state)
{
	json_t *root = json_loads(ONE(", \"comm\": \"fifteen bytes..\", \"exit\": {\"code\": 0, "
		"\"signal\": 9}, \"device_limits\": [{\"kind\": \"cuda_device\", \"device\": null, "
		"\"bytes\": 1}], \"verdict\": {\"cause\": \"signal\", \"sender\": {\"pid\": 0, "
		"\"cgroup\": null}, \"sigterm_before_ms\": null}, \"sites\": {\"list\": [{\"kind\": "
		"\"heap\", \"phase\": \"a\", \"phase_seq\": null, \"folded\": true, \"alloc_bytes\": 8, "
		"\"alloc_objects\": 1.5, \"frames\": []}]}, "
		"\"timeline\": [{\"t_ms\": 5, \"rss_file\": -2859008}]",
		", \"events\": [{\"t_ms\": 9223372036854, \"type\": \"signal\", \"signal\": 64}, "
		/* a device call failed with a code memtrail has no name for */
		"{\"t_ms\": 10, \"type\": \"device_error\", \"pid\": 1, \"function\": \"cuMemCreate\", "
		"\"code\": 12345, \"error\": null, \"device\": null, \"size\": 1, \"site\": []}]"), 0,
		NULL);
	struct trail t;
	char err[256] = "";

	(void)state;
	assert_non_null(root);
	if (trail__from_json(&t, root, err, sizeof(err)))
		fail_msg("rejected: %s", err);
	assert_int_equal(t.targets[0].dev_limits[0].device, -1);
	assert_int_equal(t.targets[0].exit_signal, 9);
	/* a level a little under zero, as real trails have had */
	assert_int_equal(t.targets[0].timeline[0].level[MEMTRAIL_KIND_RSS_FILE], -2859008);
	trail__free(&t);
	json_decref(root);
}

/* V written, read back and written again: the same document, every field kept. */
static void expect_verdict_round_trip(const struct verdict *v)
{
	json_t *a = verdict__json(v), *b;
	struct verdict *r;
	struct schema s;
	char err[256], *x, *y;

	assert_non_null(a);
	schema__init(&s, err, sizeof(err));
	if (verdict__from_json(&s, a, &r))
		fail_msg("rejected: %s", err);
	assert_int_equal(r->cause, v->cause);
	assert_int_equal(r->limit, v->limit);
	assert_int_equal(r->usage, v->usage);
	assert_int_equal(r->trigger.pid, v->trigger.pid);
	assert_int_equal(!r->trigger.comm, !v->trigger.comm);
	if (v->trigger.comm)
		assert_string_equal(r->trigger.comm, v->trigger.comm);
	assert_int_equal(!r->sender.comm, !v->sender.comm);
	if (v->sender.comm)
		assert_string_equal(r->sender.comm, v->sender.comm);
	assert_int_equal(r->sender.pid, v->sender.pid);
	assert_int_equal(r->sender.ppid, v->sender.ppid);
	assert_int_equal(r->sigterm_first, v->sigterm_first);
	assert_int_equal(r->has_sigterm_before, v->has_sigterm_before);
	assert_int_equal(r->sigterm_before_ms, v->sigterm_before_ms);
	assert_int_equal(!r->attr, !v->attr);
	if (v->attr)
		assert_memory_equal(r->attr, v->attr, sizeof(*v->attr));
	b = verdict__json(r);
	x = json_dumps(a, JSON_COMPACT);
	y = json_dumps(b, JSON_COMPACT);
	assert_string_equal(x, y);
	free(x);
	free(y);
	json_decref(a);
	json_decref(b);
	verdict__free(r);
}

/* Each cause, as verdict__decide makes it, survives the file. */
static void verdicts_round_trip(void **state)
{
	struct verdict_facts f = { .oom = true, .memcg_level = 1, .usage = 64 << 20,
				   .limit = 64 << 20, .trigger_pid = 7, .trigger_comm = "hog" };
	struct verdict *v;
	char line[512];

	(void)state;
	v = verdict__decide(&f, "/kubepods/burstable/pod" "0a1b2c3d-0000-4000-8000-00000000000a"
			    "/cri-containerd-" "4a1e2c0f9b8d7a6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e");
	assert_non_null(v);
	assert_int_equal(v->cause, VERDICT_OOM_CGROUP);
	assert_string_equal(v->cgroup, "/kubepods/burstable/pod0a1b2c3d-0000-4000-8000-00000000000a");
	v->attr = container__attr_new(v->cgroup, "/nonexistent");
	assert_non_null(v->attr);
	assert_true(v->attr->pod);
	verdict__line(line, sizeof(line), v);
	assert_string_equal(line, "oom_cgroup: the kernel OOM killer, cgroup "
			    "/kubepods/burstable/pod0a1b2c3d-0000-4000-8000-00000000000a at its "
			    "limit 64.0 MiB (usage 64.0 MiB), triggered by 7 (hog)");
	expect_verdict_round_trip(v);
	verdict__free(v);

	f.memcg_level = -1;
	v = verdict__decide(&f, NULL);
	assert_int_equal(v->cause, VERDICT_OOM_GLOBAL);
	expect_verdict_round_trip(v);
	verdict__free(v);

	f = (struct verdict_facts){ .sigkill = true, .sigkill_ms = 900, .sigterm = true,
				    .sigterm_ms = 400, .sender_pid = 11, .sender_ppid = 1,
				    .sender_comm = "kubelet", .sender_cgroup = "/system.slice" };
	v = verdict__decide(&f, NULL);
	assert_int_equal(v->cause, VERDICT_SIGNAL);
	verdict__line(line, sizeof(line), v);
	assert_string_equal(line, "signal: SIGKILL sent by 11 (kubelet, cgroup /system.slice), "
			    "SIGTERM 500 ms before");
	expect_verdict_round_trip(v);
	verdict__free(v);

	f = (struct verdict_facts){ 0 };
	v = verdict__decide(&f, NULL);
	assert_int_equal(v->cause, VERDICT_UNKNOWN);
	expect_verdict_round_trip(v);
	verdict__free(v);
}

/* watch's verdict file: one target, its exit, verdict and peaks, no timeline */
static void reads_verdict_file(void **state)
{
	const char *text = "{\"memtrail\": 1, \"type\": \"verdict\", \"time\": \"2026-01-01T00:00:00Z\", "
		"\"t_ms\": 1500, \"pid\": 42, \"comm\": \"hog\", \"cmdline\": \"./hog\", "
		"\"cgroup\": \"/a\", \"exit\": {\"signal\": 9}, \"phase\": \"grow\", "
		"\"verdict\": {\"cause\": \"oom_cgroup\", \"limit\": 67108864}, "
		"\"peaks\": {\"rss_anon\": 1000, \"mapped\": 2000}, \"snapshot\": null}";
	json_t *root = json_loads(text, 0, NULL);
	struct trail t;
	char err[256] = "";

	(void)state;
	assert_non_null(root);
	assert_int_equal(trail__from_json(&t, root, err, sizeof(err)), 0);
	assert_int_equal(t.n_targets, 1);
	assert_int_equal(t.targets[0].pid, 42);
	assert_string_equal(t.targets[0].comm, "hog");
	assert_true(t.targets[0].exited);
	assert_int_equal(t.targets[0].exit_signal, 9);
	assert_int_equal(t.targets[0].end_ms, 1500);
	assert_int_equal(t.targets[0].peak[MEMTRAIL_KIND_RSS_ANON], 1000);
	assert_int_equal(t.targets[0].peak[MEMTRAIL_KIND_MAPPED], 2000);
	assert_int_equal(t.kinds, 1U << MEMTRAIL_KIND_RSS_ANON | 1U << MEMTRAIL_KIND_MAPPED);
	assert_int_equal(t.targets[0].verdict->cause, VERDICT_OOM_CGROUP);
	assert_int_equal(t.targets[0].verdict->limit, 67108864);
	assert_ptr_equal(t.verdict_doc, root);
	assert_null(t.snapshot);
	trail__free(&t);
	json_decref(root);

	expect_reject("{\"memtrail\": 1, \"type\": \"verdict\", \"pid\": 0}",
		      "pid: out of range (0)");
	expect_reject("{\"memtrail\": 1, \"type\": \"verdict\", \"pid\": 4, \"verdict\": {}}",
		      "verdict.cause: missing");
	expect_reject("{\"memtrail\": 1, \"type\": \"verdict\", \"pid\": 4, "
		      "\"verdict\": {\"cause\": \"signal\"}, \"peaks\": {\"ram\": 1}}",
		      "peaks: unknown kind 'ram'");
	expect_reject("{\"memtrail\": 1, \"type\": \"verdict\", \"pid\": 4, "
		      "\"verdict\": {\"cause\": \"signal\"}, \"exit\": {\"signal\": -7}}",
		      "exit.signal: out of range (-7)");
	expect_reject("{\"memtrail\": 1, \"targets\": [], \"snapshot\": 3}",
		      "snapshot: not an object");
}

static void read_missing_and_truncated(void **state)
{
	char path[] = "/tmp/memtrail-unit-XXXXXX", err[256];
	struct trail t;
	int fd;

	(void)state;
	assert_int_equal(trail__read(&t, "/nonexistent/x.json", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "No such file"));
	fd = mkstemp(path);
	assert_true(write(fd, "{\"memtrail\": 1, \"targ", 21) == 21);
	close(fd);
	assert_int_equal(trail__read(&t, path, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "malformed JSON"));
	unlink(path);
}

/* A trail of several read pieces (1 MiB each) reads back sample for sample. */
static void reads_large_file(void **state)
{
	char path[] = "/tmp/memtrail-unit-XXXXXX", err[256];
	int64_t level[MEMTRAIL_KIND_MAX] = { 0 };
	struct trail a, b;
	struct stat st;
	size_t i, n = 200000;
	int fd;

	(void)state;
	make_trail(&a);
	for (i = 0; i < n; i++) {
		level[MEMTRAIL_KIND_RSS_ANON] = (int64_t)i * 4096;
		assert_int_equal(trail__add_sample(&a.targets[1], 1000 + i, level), 0);
	}
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(trail__write(&a, path), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_true(st.st_size > 4 << 20);
	assert_int_equal(trail__read(&b, path, err, sizeof(err)), 0);
	unlink(path);
	assert_int_equal(b.targets[1].n_samples, n);
	for (i = 0; i < n; i++) {
		assert_int_equal(b.targets[1].timeline[i].t_ms, 1000 + i);
		assert_int_equal(b.targets[1].timeline[i].level[MEMTRAIL_KIND_RSS_ANON], i * 4096);
	}
	assert_int_equal(b.targets[0].n_samples, 3);
	assert_int_equal(json_array_size(b.events), 1);
	trail__free(&a);
	trail__free(&b);
}

/* A FIFO with no writer (open would block), a directory, a device: refused at once. */
static void reads_regular_files_only(void **state)
{
	char dir[] = "/tmp/memtrail-unit-XXXXXX", fifo[64], err[256];
	const char *paths[] = { fifo, dir, "/dev/null" };
	struct trail t;
	size_t i;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		err[0] = '\0';
		assert_int_equal(trail__read(&t, paths[i], err, sizeof(err)), -1);
		assert_string_equal(err, "not a regular file");
	}
	unlink(fifo);
	rmdir(dir);
}

static void write_fails_cleanly(void **state)
{
	struct trail t;

	(void)state;
	make_trail(&t);
	assert_int_equal(trail__write(&t, "/nonexistent/dir/t.json"), -ENOENT);
	trail__free(&t);
}

/* PATH read by yajl alone (no fast path for timelines): the same as T (RET, ERR) read with it. */
static void same_without_fast_path(const char *path, const struct trail *t, int ret,
				   const char *err, size_t errlen)
{
	char *serr = calloc(1, errlen), *a, *b;
	json_t *ja, *jb;
	struct trail s;

	assert_non_null(serr);
	trailstream__set_fast(false);
	assert_int_equal(trail__read(&s, path, serr, errlen), ret);
	trailstream__set_fast(true);
	if (ret) {
		assert_string_equal(serr, err);
	} else {
		ja = trail__to_json(t, true);
		jb = trail__to_json(&s, true);
		a = json_dumps(ja, JSON_COMPACT);
		b = json_dumps(jb, JSON_COMPACT);
		assert_non_null(a);
		assert_non_null(b);
		assert_string_equal(a, b);
		free(a);
		free(b);
		json_decref(ja);
		json_decref(jb);
		trail__free(&s);
	}
	free(serr);
}

/*
 * Read TEXT as a file through trail__read: 0 or -1, the reason in err. Read
 * again through trail__read_levels, which keeps no sample: the same verdict
 * and reason, the same targets with empty timelines; and by yajl alone,
 * without the timelines' fast path: the same all through.
 */
static int read_text(struct trail *t, const char *text, char *err, size_t errlen)
{
	char path[] = "/tmp/memtrail-unit-XXXXXX";
	size_t len = strlen(text), i;
	char *lerr = calloc(1, errlen);
	struct trail l;
	int fd, ret;

	assert_non_null(lerr);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_true(write(fd, text, len) == (ssize_t)len);
	close(fd);
	ret = trail__read(t, path, err, errlen);
	same_without_fast_path(path, t, ret, err, errlen);
	assert_int_equal(trail__read_levels(&l, path, lerr, errlen), ret);
	if (ret) {
		assert_string_equal(lerr, err);
	} else {
		assert_int_equal(l.n_targets, t->n_targets);
		for (i = 0; i < l.n_targets; i++) {
			assert_int_equal(l.targets[i].pid, t->targets[i].pid);
			assert_int_equal(l.targets[i].n_samples, 0);
			assert_null(l.targets[i].timeline);
		}
		trail__free(&l);
	}
	free(lerr);
	unlink(path);
	return ret;
}

#define HEAD "{\"memtrail\": 1, \"targets\": ["
#define TGT(pid, tl) "{\"pid\": " #pid ", \"exit\": null, \"kinds\": {}, \"timeline\": " tl "}"

/* Values under keys a trail does not have: skipped as they are parsed, never built. */
static void stream_skips_unknown_keys(void **state)
{
	char err[256];
	struct trail t;

	(void)state;
	assert_int_equal(read_text(&t, "{\"memtrail\": 1, \"junk\": [[1, {\"a\": []}], {}], "
		"\"targets\": [{\"pid\": 7, \"exit\": null, \"kinds\": {}, \"x\": [{}], "
		"\"timeline\": [{\"t_ms\": 1}], \"y\": {\"timeline\": 3}}], \"more\": 1, "
		"\"events\": [{\"t_ms\": 1, \"type\": \"x\", \"extra\": [1]}]}", err, sizeof(err)), 0);
	assert_int_equal(t.n_targets, 1);
	assert_int_equal(t.targets[0].n_samples, 1);
	/* an event's own keys are its data (the HTML page and Perfetto show them) */
	assert_non_null(json_object_get(json_array_get(t.events, 0), "extra"));
	trail__free(&t);
}

/* The streamed timeline: kinds by name, other keys and nested values skipped, per target. */
static void stream_reads_timelines(void **state)
{
	char err[256];
	struct trail t;

	(void)state;
	assert_int_equal(read_text(&t, HEAD
		TGT(7, "[{\"t_ms\": 0, \"mapped\": 4096, \"note\": {\"t_ms\": \"x\", \"a\": [1, {}]},"
		       " \"rss_anon\": 576460752303423488}, {\"rss_file\": 5, \"t_ms\": 100,"
		       " \"zz\": null}]") ","
		"{\"pid\": 8, \"exit\": null, \"kinds\": {}},"
		TGT(9, "[]") "], \"events\": [{\"t_ms\": 1, \"type\": \"x\", \"timeline\": [1, 2]}]}",
		err, sizeof(err)), 0);
	assert_int_equal(t.n_targets, 3);
	assert_int_equal(t.targets[0].n_samples, 2);
	assert_int_equal(t.targets[0].timeline[0].level[MEMTRAIL_KIND_MAPPED], 4096);
	assert_int_equal(t.targets[0].timeline[0].level[MEMTRAIL_KIND_RSS_ANON], 1LL << 59);
	assert_int_equal(t.targets[0].timeline[1].t_ms, 100);
	assert_int_equal(t.targets[0].timeline[1].level[MEMTRAIL_KIND_RSS_FILE], 5);
	assert_int_equal(t.targets[0].timeline[1].level[MEMTRAIL_KIND_MAPPED], 0);
	assert_int_equal(t.targets[1].n_samples, 0);
	assert_int_equal(t.targets[2].pid, 9);
	assert_int_equal(t.targets[2].n_samples, 0);
	/* an event's own "timeline" key is data, not a target's */
	assert_int_equal(json_array_size(json_object_get(json_array_get(t.events, 0), "timeline")),
			 2);
	trail__free(&t);
	/* UTF-8 of two, three and four bytes, the highest code point */
	assert_int_equal(read_text(&t, "{\"memtrail\": 1, \"targets\": [], "
				   "\"command\": \"\u00e9\u20ac\U0001F600\U0010FFFF\"}", err, sizeof(err)), 0);
	assert_string_equal(t.command, "\u00e9\u20ac\U0001F600\U0010FFFF");
	trail__free(&t);
}

static void stream_expect_reject(const char *text, const char *needle)
{
	char err[256] = "";
	struct trail t;

	assert_int_equal(read_text(&t, text, err, sizeof(err)), -1);
	if (!strstr(err, needle))
		fail_msg("'%s' not in '%s'", needle, err);
}

static void stream_rejects_malformed(void **state)
{
	char deep[4096];
	int i;

	(void)state;
	stream_expect_reject(HEAD TGT(7, "[{\"t_ms\": 0}, {\"mapped\": 1}]") "]}",
			     "targets[0].timeline[1].t_ms: missing");
	stream_expect_reject(HEAD TGT(7, "[{\"t_ms\": \"0\"}]") "]}",
			     "targets[0].timeline[0].t_ms: not an integer");
	stream_expect_reject(HEAD TGT(7, "[{\"t_ms\": -5}]") "]}",
			     "targets[0].timeline[0].t_ms: out of range (-5)");
	stream_expect_reject(HEAD TGT(7, "[{\"t_ms\": 9223372036855}]") "]}",
			     "targets[0].timeline[0].t_ms: out of range (9223372036855)");
	stream_expect_reject(HEAD TGT(7, "[{\"t_ms\": [0]}]") "]}",
			     "targets[0].timeline[0].t_ms: not an integer");
	stream_expect_reject(HEAD TGT(7, "[{\"t_ms\": 9}, {\"t_ms\": 8}]") "]}",
			     "targets[0].timeline[1].t_ms: 8 is before the previous sample's 9");
	stream_expect_reject(HEAD TGT(7, "[{\"t_ms\": 9, \"mapped\": -576460752303423489}]") "]}",
			     "targets[0].timeline[0].mapped: out of range (-576460752303423489)");
	stream_expect_reject(HEAD TGT(7, "[{\"t_ms\": 9, \"rss_anon\": 1.5}]") "]}",
			     "targets[0].timeline[0].rss_anon: not an integer");
	stream_expect_reject(HEAD TGT(7, "[{\"t_ms\": 9, \"heap\": {}}]") "]}",
			     "targets[0].timeline[0].heap: not an integer");
	stream_expect_reject(HEAD TGT(6, "[]") "," TGT(7, "[3]") "]}",
			     "targets[1].timeline[0]: not an object");
	stream_expect_reject(HEAD TGT(6, "[]") ", {\"timeline\": [{}], \"pid\": 7}]}",
			     "targets[1].timeline[0].t_ms: missing");
	stream_expect_reject(HEAD TGT(7, "{}") "]}", "targets[0].timeline: not an array");
	stream_expect_reject(HEAD "{\"pid\": 7, \"exit\": null, \"kinds\": {}, \"timeline\": [],"
			     " \"timeline\": null}]}", "malformed JSON");
	stream_expect_reject(HEAD "{\"pid\": 7, \"exit\": null, \"kinds\": {}, \"timeline\": null,"
			     " \"timeline\": []}]}", "duplicate object key 'timeline'");
	stream_expect_reject("{\"memtrail\": 1, \"memtrail\": 1, \"targets\": []}",
			     "duplicate object key 'memtrail'");
	stream_expect_reject("{\"memtrail\": 1, \"targets\": []} x", "malformed JSON");
	stream_expect_reject("{\"memtrail\": 1,\n \"targets\": [}", "line 2, column");
	stream_expect_reject("{\"memtrail\": 1, \"targets\": [], \"n\": 99999999999999999999}",
			     "malformed JSON");
	stream_expect_reject("{\"memtrail\": 1, \"s\": \"\xff\"}", "malformed JSON");
	/*
	 * UTF-8 that yajl lets through but jansson refuses to write (found by the
	 * fuzzer: every renderer failed with "Cannot allocate memory"): an
	 * overlong form, a surrogate, past U+10FFFF; in a value and in a key
	 */
	stream_expect_reject("{\"memtrail\": 1, \"command\": \"\xc1\xa9\"}", "invalid UTF-8");
	stream_expect_reject("{\"memtrail\": 1, \"command\": \"\xe0\x80\xa9\"}", "invalid UTF-8");
	stream_expect_reject("{\"memtrail\": 1, \"command\": \"a\xed\xa0\x80\"}", "invalid UTF-8");
	stream_expect_reject("{\"memtrail\": 1, \"command\": \"\xf4\x90\x80\x80\"}", "invalid UTF-8");
	stream_expect_reject("{\"memtrail\": 1, \"targets\": [], \"events\": [{\"\xc0\x80\": 1}]}",
			     "invalid UTF-8 in a key");
	stream_expect_reject("   ", "malformed JSON");
	/* each target and event checked as it ends, an element not an object at once */
	stream_expect_reject(HEAD "3]}", "targets[0]: not an object");
	stream_expect_reject(HEAD "{\"pid\": 7, \"timeline\": []}]}", "targets[0].exit: missing");
	stream_expect_reject(HEAD "], \"events\": [{}, {}]}", "events[0].t_ms: missing");
	stream_expect_reject(HEAD "], \"events\": [{\"t_ms\": 1, \"type\": \"x\"}, 1]}",
			     "events[1]: not an object");
	stream_expect_reject(HEAD "], \"events\": [[]]}", "events[0]: not an object");
	/* a name C would read shorter than the file has it */
	stream_expect_reject(HEAD "{\"pid\": 7, \"exit\": null, \"kinds\": {}, "
			     "\"comm\": \"a\\u0000b\"}]}", "targets[0].comm: a NUL inside");
	for (i = 0; i < 2000; i++)
		deep[i] = '[';
	deep[i] = 0;
	stream_expect_reject(deep, "malformed JSON");
}

/*
 * Timelines the fast path reads and those it leaves to yajl, in a file of
 * several read pieces: what read_text checks (the same with yajl alone)
 * holds for each, the plain ones and every way out of the fast path.
 */
static void stream_fast_path_agrees_with_yajl(void **state)
{
	static const char *const odd[] = {
		"{\"t_ms\": 1.5}", "{\"t_ms\": 1e3}", "{\"t_ms\": 01}", "{\"t_ms\": -}",
		"{\"t_ms\": 1234567890123456789}", "{\"t_m\\u0073\": 5}", "{\"t_ms\": null}",
		"{\"t_ms\": 5, \"mapped\": {\"a\": [1]}}", "7", "[]", "{\"t_ms\": 5,}", "{}",
		"{\"t_ms\" 5}", "{\"\u00e9\": 1, \"t_ms\": 5}", "{\"t_ms\": 5}\x01",
		/* valid, but not plain: yajl's, and the next target's timeline the fast path's again */
		"{\"t_ms\": 40000, \"note\": \"x\"}",
	};
	size_t cap = 3 << 20, len, i, j;
	char *text = malloc(cap), err[256];
	struct trail t;
	int ret;

	(void)state;
	assert_non_null(text);
	for (i = 0; i <= sizeof(odd) / sizeof(odd[0]); i++) {
		/* 2.4 MiB of samples, whitespace of every kind, then the odd one (or none), then more */
		len = (size_t)snprintf(text, cap, HEAD "{\"pid\": 7, \"exit\": null, \"kinds\": {}, "
				       "\"timeline\": [");
		for (j = 0; j < 40000; j++)
			len += (size_t)snprintf(text + len, cap - len,
						"%s{ \"t_ms\" :%zu,\n\"mapped\":\t%lld , \"rss_anon\":-%zu}\r",
						j ? "," : "", j, (long long)j * 4096, j);
		if (i < sizeof(odd) / sizeof(odd[0]))
			len += (size_t)snprintf(text + len, cap - len, ",%s", odd[i]);
		len += (size_t)snprintf(text + len, cap - len, ",{\"t_ms\": 40000000}]}, "
					TGT(8, "[ {\"t_ms\": 1, \"mapped\": 2}, {\"t_ms\": 3} ]") "]}");
		assert_true(len < cap);
		ret = read_text(&t, text, err, sizeof(err));
		if (i >= sizeof(odd) / sizeof(odd[0]) - 1) {
			assert_int_equal(ret, 0);
			assert_int_equal(t.targets[1].n_samples, 2);
			assert_int_equal(t.targets[1].timeline[0].level[MEMTRAIL_KIND_MAPPED], 2);
		}
		if (i == sizeof(odd) / sizeof(odd[0])) {
			assert_int_equal(ret, 0);
			assert_int_equal(t.targets[0].n_samples, 40001);
			assert_int_equal(t.targets[0].timeline[39999].level[MEMTRAIL_KIND_MAPPED],
					 39999LL * 4096);
			assert_int_equal(t.targets[0].timeline[39999].level[MEMTRAIL_KIND_RSS_ANON],
					 -39999);
		}
		if (!ret)
			trail__free(&t);
	}
	/* cut inside a sample, and after one */
	len = (size_t)snprintf(text, cap, HEAD TGT(7, "[{\"t_ms\": 1}, {\"t_ms\": 2, \"map"));
	assert_int_equal(read_text(&t, text, err, sizeof(err)), -1);
	text[len - 11] = '\0';
	assert_int_equal(read_text(&t, text, err, sizeof(err)), -1);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip),
		cmocka_unit_test(write_matches_tree),
		cmocka_unit_test(summary_json_has_no_timeline),
		cmocka_unit_test(rejects_malformed),
		cmocka_unit_test(rejects_nonsense),
		cmocka_unit_test(accepts_the_writers_shapes),
		cmocka_unit_test(reads_verdict_file),
		cmocka_unit_test(verdicts_round_trip),
		cmocka_unit_test(read_missing_and_truncated),
		cmocka_unit_test(reads_regular_files_only),
		cmocka_unit_test(reads_large_file),
		cmocka_unit_test(write_fails_cleanly),
		cmocka_unit_test(stream_reads_timelines),
		cmocka_unit_test(stream_rejects_malformed),
		cmocka_unit_test(stream_fast_path_agrees_with_yajl),
		cmocka_unit_test(stream_skips_unknown_keys),
	};

	return cmocka_run_group_tests_name("trail", tests, NULL, NULL);
}
