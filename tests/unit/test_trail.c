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

	assert_true(trail__set_device_limit(tt, MEMTRAIL_KIND_CUDA_DEVICE, 1, 80ULL << 30));
	assert_true(trail__set_device_limit(tt, MEMTRAIL_KIND_CUDA_DEVICE, -1, 16ULL << 30));
	assert_true(trail__set_device_limit(tt, MEMTRAIL_KIND_CUDA_DEVICE, 1, 81ULL << 30));

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
	assert_int_equal(b.targets[0].n_samples, 2);
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
	t.targets[0].sites = json_pack("{s:[{s:s}]}", "list", "name", "a\"b\n\u00e9");
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
	expect_reject("{\"memtrail\": 1}", "'targets' is not an array");
	expect_reject("{\"memtrail\": 1, \"targets\": [5]}", "target 0 is not an object");
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": null, "
		      "\"kinds\": {}, \"device_limits\": 7}]}", "'device_limits' is not an array");
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": null, "
		      "\"kinds\": {}, \"device_limits\": [{\"kind\": \"ram\", \"device\": 0, "
		      "\"bytes\": 1}]}]}", "device limit 0 needs a kind");
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": null, "
		      "\"kinds\": {}, \"device_limits\": [{\"kind\": \"cuda_device\", "
		      "\"device\": \"0\", \"bytes\": 1}]}]}", "device limit 0 needs a kind");
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": -3}]}", "no valid 'pid'");
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"kinds\": {}}]}", "no 'exit'");
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": 1, \"kinds\": {}}]}",
		      "neither an object nor null");
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": null, "
		      "\"kinds\": {\"mapped\": {\"current\": \"x\", \"peak\": 1}}}]}",
		      "integer 'current' and 'peak'");
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": null, "
		      "\"kinds\": {}, \"timeline\": [{\"mapped\": 1}]}]}", "no integer 't_ms'");
	expect_reject("{\"memtrail\": 1, \"targets\": [], \"events\": 4}", "'events' is not an array");
	expect_reject("{\"memtrail\": 1, \"targets\": [], \"kinds\": [\"ram\"]}", "unknown kind");
	/* a string of the file quoted in the reason: one line, no terminal control */
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": null, "
		      "\"kinds\": {\"a\\nb\\u001b[2J\": {}}}]}", "unknown kind 'a?b?[2J'");
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": null, \"kinds\": {}, "
		      "\"phases\": [{\"name\": \"p\", \"start\": 0, \"end\": 1, "
		      "\"kinds\": {\"\\r\": {}}}]}]}", "unknown kind '?'");
}

/*
 * Strings longer than memtrail writes are refused, never cut: a cut could
 * split a UTF-8 character, and the renderers' JSON refuses the remains
 * (found by the fuzzer: report --html failed with "Cannot allocate memory").
 */
static void rejects_over_long_strings(void **state)
{
	json_t *root;
	struct trail t;
	char err[256];

	(void)state;
	/* 15 bytes fit, 14 of them in 7 two-byte characters */
	root = json_loads("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": null, "
			  "\"kinds\": {}, \"comm\": \"x\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\"}]}",
			  0, NULL);
	assert_non_null(root);
	assert_int_equal(trail__from_json(&t, root, err, sizeof(err)), 0);
	assert_string_equal(t.targets[0].comm, "x\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9");
	trail__free(&t);
	json_decref(root);
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": null, \"kinds\": {}, "
		      "\"comm\": \"xx\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\"}]}",
		      "target 3: 'comm' is longer than 15 bytes");
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": null, \"kinds\": {}, "
		      "\"phases\": [{\"name\": \"" "0123456789012345678901234567890123456789"
		      "012345678901234567890123\", \"start\": 0, \"end\": 1, \"kinds\": {}}]}]}",
		      "phase 0: 'name' is longer than 63 bytes");
	expect_reject("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"exit\": null, \"kinds\": {}, "
		      "\"phase_summary\": [{\"name\": \"" "0123456789012345678901234567890123456789"
		      "012345678901234567890123\", \"count\": 1, \"kinds\": {}}]}]}",
		      "phase summary 0: 'name' is longer than 63 bytes");
	expect_reject("{\"memtrail\": 1, \"targets\": [], "
		      "\"started\": \"2026-11-21T10:00:00Z and then some\"}",
		      "'started' is longer than 31 bytes");
	expect_reject("{\"memtrail\": 1, \"type\": \"verdict\", \"pid\": 4, "
		      "\"verdict\": {\"cause\": \"signal\"}, \"comm\": \"0123456789abcdef\"}",
		      "'comm' is longer than 15 bytes");
	expect_reject("{\"memtrail\": 1, \"type\": \"verdict\", \"pid\": 4, "
		      "\"verdict\": {\"cause\": \"signal\"}, "
		      "\"time\": \"2026-11-21T10:00:00.000Z and then some\"}",
		      "'time' is longer than 31 bytes");
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
	assert_string_equal(json_string_value(json_object_get(t.targets[0].verdict, "cause")),
			    "oom_cgroup");
	assert_ptr_equal(t.verdict_doc, root);
	assert_null(t.snapshot);
	trail__free(&t);
	json_decref(root);

	expect_reject("{\"memtrail\": 1, \"type\": \"verdict\", \"pid\": 0}", "no valid 'pid'");
	expect_reject("{\"memtrail\": 1, \"type\": \"verdict\", \"pid\": 4, \"verdict\": {}}",
		      "has no 'cause'");
	expect_reject("{\"memtrail\": 1, \"type\": \"verdict\", \"pid\": 4, "
		      "\"verdict\": {\"cause\": \"signal\"}, \"peaks\": {\"ram\": 1}}", "peak of 'ram'");
	expect_reject("{\"memtrail\": 1, \"type\": \"verdict\", \"pid\": 4, "
		      "\"verdict\": {\"cause\": \"signal\"}, \"peaks\": {\"r\\tm\": 1}}",
		      "peak of 'r?m'");
	expect_reject("{\"memtrail\": 1, \"targets\": [], \"snapshot\": 3}",
		      "'snapshot' is not an object");
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
	assert_int_equal(b.targets[0].n_samples, 2);
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

/* Read TEXT as a file through trail__read: 0 or -1, the reason in err. */
static int read_text(struct trail *t, const char *text, char *err, size_t errlen)
{
	char path[] = "/tmp/memtrail-unit-XXXXXX";
	size_t len = strlen(text);
	int fd, ret;

	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_true(write(fd, text, len) == (ssize_t)len);
	close(fd);
	ret = trail__read(t, path, err, errlen);
	unlink(path);
	return ret;
}

#define HEAD "{\"memtrail\": 1, \"targets\": ["
#define TGT(pid, tl) "{\"pid\": " #pid ", \"exit\": null, \"kinds\": {}, \"timeline\": " tl "}"

/* The streamed timeline: kinds by name, other keys and nested values skipped, per target. */
static void stream_reads_timelines(void **state)
{
	char err[256];
	struct trail t;

	(void)state;
	assert_int_equal(read_text(&t, HEAD
		TGT(7, "[{\"t_ms\": 0, \"mapped\": 4096, \"note\": {\"t_ms\": \"x\", \"a\": [1, {}]},"
		       " \"rss_anon\": 9223372036854775807}, {\"rss_file\": 5, \"t_ms\": 100,"
		       " \"mapped\": 1.5, \"zz\": null}]") ","
		"{\"pid\": 8, \"exit\": null, \"kinds\": {}},"
		TGT(9, "[]") "], \"events\": [{\"timeline\": [1, 2]}]}", err, sizeof(err)), 0);
	assert_int_equal(t.n_targets, 3);
	assert_int_equal(t.targets[0].n_samples, 2);
	assert_int_equal(t.targets[0].timeline[0].level[MEMTRAIL_KIND_MAPPED], 4096);
	assert_int_equal(t.targets[0].timeline[0].level[MEMTRAIL_KIND_RSS_ANON], INT64_MAX);
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
			     "target 7: timeline sample 1 has no integer 't_ms'");
	stream_expect_reject(HEAD TGT(7, "[{\"t_ms\": \"0\"}]") "]}", "no integer 't_ms'");
	stream_expect_reject(HEAD TGT(7, "[{\"t_ms\": -5}]") "]}", "no integer 't_ms'");
	stream_expect_reject(HEAD TGT(7, "[{\"t_ms\": [0]}]") "]}", "no integer 't_ms'");
	stream_expect_reject(HEAD "{}," TGT(7, "[3]") "]}", "target 7: timeline sample 0");
	stream_expect_reject(HEAD "{}, {\"timeline\": [{}], \"pid\": 7}]}",
			     "target 1 of 'targets': timeline sample 0");
	stream_expect_reject(HEAD TGT(7, "{}") "]}", "'timeline' is not an array");
	stream_expect_reject(HEAD "{\"pid\": 7, \"exit\": null, \"kinds\": {}, \"timeline\": [],"
			     " \"timeline\": null}]}", "malformed JSON");
	stream_expect_reject(HEAD "{\"pid\": 7, \"exit\": null, \"kinds\": {}, \"timeline\": null,"
			     " \"timeline\": []}]}", "duplicate object key 'timeline'");
	stream_expect_reject("{\"memtrail\": 1, \"memtrail\": 1, \"targets\": []}",
			     "duplicate object key 'memtrail'");
	stream_expect_reject("{\"memtrail\": 1, \"a\\n\\u001b\": 1, \"a\\n\\u001b\": 1}",
			     "duplicate object key 'a?\?'");
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
	for (i = 0; i < 2000; i++)
		deep[i] = '[';
	deep[i] = 0;
	stream_expect_reject(deep, "malformed JSON");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip),
		cmocka_unit_test(write_matches_tree),
		cmocka_unit_test(summary_json_has_no_timeline),
		cmocka_unit_test(rejects_malformed),
		cmocka_unit_test(rejects_over_long_strings),
		cmocka_unit_test(reads_verdict_file),
		cmocka_unit_test(read_missing_and_truncated),
		cmocka_unit_test(reads_regular_files_only),
		cmocka_unit_test(reads_large_file),
		cmocka_unit_test(write_fails_cleanly),
		cmocka_unit_test(stream_reads_timelines),
		cmocka_unit_test(stream_rejects_malformed),
	};

	return cmocka_run_group_tests_name("trail", tests, NULL, NULL);
}
