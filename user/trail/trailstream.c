// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Reading a trail file as a stream (yajl). A one-hour trail of a few hundred
 * targets holds millions of timeline samples: as a jansson tree they cost
 * several GiB and most of report's time. Here every value but the samples
 * becomes the usual jansson tree, and each targets[i].timeline array goes
 * straight into an array of struct trail_sample, checked as it arrives.
 *
 * Memory follows what the file holds that report uses, whatever else is in
 * it: values under keys that neither the top level nor a target has are
 * skipped as they are parsed, and each target and event is checked as it
 * ends (trail_check.c), so that a file of ten million empty events fails at
 * the first instead of becoming a tree of them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yajl/yajl_parse.h>

#include "array.h"
#include "format.h"
#include "kinds.h"
#include "trailstream.h"

#define DEPTH_MAX 512		/* jansson's own nesting limit is 2048; trails need 8 */
#define CHUNK (1 << 20)

/* Key of a sample: a kind's index, t_ms, or something to skip */
#define KEY_T_MS (-1)
#define KEY_OTHER (-2)
#define KEY_MEMO 16
#define KEY_LEN 32

struct key_memo {
	char name[KEY_LEN];
	size_t len;
	int is;
};

struct builder {
	json_t *stack[DEPTH_MAX];	/* open containers, borrowed from the tree */
	int depth;			/* open containers */
	char *key;			/* key waiting for its value in stack[depth-1] */
	size_t key_len;
	json_t *root;
	json_t *targets, *events;	/* root.targets and root.events once open */
	int skip_tree;			/* open containers of a value skipped */
	bool skip_value;		/* the next value is skipped: its key is unknown */
	long target;			/* index of the target object open at depth 3, or -1 */
	struct trailstream_timelines *tls;
	const struct trailstream_checks *checks;
	/* in a timeline: its depth, the sample being read, what its key names */
	bool in_timeline;		/* inside a target's "timeline" array */
	bool keep_samples;		/* samples kept in tls (else checked only) */
	size_t sample_no;		/* the sample's index in its timeline */
	struct trailstream_timeline *tl;
	size_t last_n;			/* samples of the last timeline read */
	bool in_sample, have_t;
	int key_is;
	int skip;			/* nesting of a skipped value inside a sample */
	struct trail_sample s;
	uint64_t last_t;		/* t_ms of the timeline's last sample */
	struct key_memo memo[KEY_MEMO];	/* by the key's place in its sample */
	unsigned int key_pos;
	bool json_fault;		/* err is about the JSON (a duplicate key, depth) */
	char err[200];
};

static int fail(struct builder *b, bool json_fault, const char *msg)
{
	if (!b->err[0]) {
		snprintf(b->err, sizeof(b->err), "%s", msg);
		b->json_fault = json_fault;
	}
	return 0;
}

/* "targets[T].timeline[I]" and what FMT says is wrong with the sample: not JSON's fault. */
static int sample_fail(struct builder *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int sample_fail(struct builder *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->err[0])
		return 0;
	n = snprintf(b->err, sizeof(b->err), "targets[%ld].timeline[%zu]", b->target, b->sample_no);
	if (n > 0 && (size_t)n < sizeof(b->err)) {
		va_start(ap, fmt);
		vsnprintf(b->err + n, sizeof(b->err) - n, fmt, ap);
		va_end(ap);
	}
	return 0;
}

/* The key a value in a sample is under, for errors. */
static const char *sample_key(const struct builder *b)
{
	return b->key_is == KEY_T_MS ? "t_ms" : kind__name(b->key_is);
}

static bool key_is(const struct builder *b, const char *s)
{
	return b->key_len == strlen(s) && !memcmp(b->key, s, b->key_len);
}

static bool key_in(const struct builder *b, const char *const *keys, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (key_is(b, keys[i]))
			return true;
	return false;
}

/*
 * Whether the value of the key just read is kept: at the top level those of
 * a trail, a snapshot and a verdict file; in a target, a target's.
 */
static bool key_known(const struct builder *b)
{
	static const char *const top[] = {
		"memtrail", "started", "duration_ms", "interval_ms", "command", "kinds",
		"kernel", "targets", "events", "lost", "snapshot",
		/* a verdict file of watch */
		"type", "time", "t_ms", "pid", "comm", "cmdline", "cgroup", "exit", "phase",
		"verdict", "peaks", "container", "pod",
	};
	static const char *const target[] = {
		"pid", "ppid", "comm", "cmdline", "cgroup", "container", "pod", "start_ms", "end_ms",
		"exit", "kinds",
		"device_limits", "timeline", "verdict", "sites", "phases", "phases_folded",
		"phase_summary",
	};

	if (b->depth == 1)
		return key_in(b, top, sizeof(top) / sizeof(top[0]));
	if (b->depth == 3 && b->target >= 0)
		return key_in(b, target, sizeof(target) / sizeof(target[0]));
	return true;
}

/* A value of a skipped key, or inside one: nothing to build. */
static bool skipped(struct builder *b, int open)
{
	if (b->skip_tree) {
		b->skip_tree += open;
		return true;
	}
	if (!b->skip_value)
		return false;
	b->skip_value = false;
	b->skip_tree = open > 0;
	return true;
}

/* An element of root.targets or root.events that is not an object: at once. */
static int not_object(struct builder *b, json_t *parent)
{
	if (parent != b->targets && parent != b->events)
		return 1;
	snprintf(b->err, sizeof(b->err), "%s[%zu]: not an object",
		 parent == b->targets ? "targets" : "events", json_array_size(parent));
	return 0;
}

/* The target's timeline is already streamed (so a second "timeline" is a duplicate). */
static bool timeline_streamed(const struct builder *b)
{
	return b->depth == 3 && b->target >= 0 && (size_t)b->target < b->tls->n &&
	       b->tls->tl[b->target].present && key_is(b, "timeline");
}

/*
 * Put V (a new reference) where the parser is: the root, the pending key of
 * an object, or an array's end.
 */
static int put(struct builder *b, json_t *v)
{
	json_t *parent;

	if (!v)
		return fail(b, false, "out of memory");
	if (!b->depth) {
		b->root = v;
		return 1;
	}
	parent = b->stack[b->depth - 1];
	if (!json_is_object(v) && !not_object(b, parent)) {
		json_decref(v);
		return 0;
	}
	if (json_is_array(parent))
		return json_array_append_new(parent, v) ? fail(b, false, "out of memory") : 1;
	if (json_object_getn(parent, b->key, b->key_len) || timeline_streamed(b)) {
		char msg[100], key[65];

		json_decref(v);
		snprintf(msg, sizeof(msg), "duplicate object key '%s'",
			 format__printable(key, sizeof(key), b->key));
		return fail(b, true, msg);
	}
	return json_object_setn_new_nocheck(parent, b->key, b->key_len, v) ?
	       fail(b, false, "out of memory") : 1;
}

/*
 * UTF-8 as jansson takes it: yajl lets overlong forms, surrogates and code
 * points past U+10FFFF through, which jansson then refuses to write (every
 * renderer of the trail would fail on them).
 */
static bool utf8_valid(const unsigned char *s, size_t len)
{
	size_t i = 0, n, j;
	uint32_t cp;

	while (i < len) {
		if (s[i] < 0x80) {
			i++;
			continue;
		}
		if (s[i] >= 0xc2 && s[i] <= 0xdf)
			n = 1;
		else if (s[i] >= 0xe0 && s[i] <= 0xef)
			n = 2;
		else if (s[i] >= 0xf0 && s[i] <= 0xf4)
			n = 3;
		else
			return false;
		if (len - i <= n)
			return false;
		cp = s[i] & (0x3f >> n);
		for (j = 1; j <= n; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += n + 1;
	}
	return true;
}

static int open_container(struct builder *b, json_t *c)
{
	if (!c)
		return fail(b, false, "out of memory");
	if (b->depth == DEPTH_MAX) {
		json_decref(c);
		return fail(b, true, "nested too deep");
	}
	if (!put(b, c))
		return 0;
	b->stack[b->depth++] = c;
	return 1;
}

/* ---- inside a timeline ---- */

/*
 * A value in a timeline: t_ms, a time in order, and each kind's level are
 * checked as trail_read.c checks the rest (TRAIL_T_MS_MAX, +-TRAIL_LEVEL_MAX);
 * other keys are skipped.
 */
static int tl_value(struct builder *b, bool integer, long long v)
{
	if (b->skip)
		return 1;
	if (!b->in_sample)
		return sample_fail(b, ": not an object");
	if (b->key_is == KEY_OTHER)
		return 1;
	if (!integer)
		return sample_fail(b, ".%s: not an integer", sample_key(b));
	if (b->key_is == KEY_T_MS ? v < 0 || v > TRAIL_T_MS_MAX :
				    v < -TRAIL_LEVEL_MAX || v > TRAIL_LEVEL_MAX)
		return sample_fail(b, ".%s: out of range (%lld)", sample_key(b), v);
	if (b->key_is != KEY_T_MS) {
		b->s.level[b->key_is] = v;
		return 1;
	}
	if ((uint64_t)v < b->last_t)
		return sample_fail(b, ".t_ms: %lld is before the previous sample's %llu", v,
				   (unsigned long long)b->last_t);
	b->s.t_ms = v;
	b->have_t = true;
	return 1;
}

static int tl_key(struct builder *b, const unsigned char *key, size_t len)
{
	struct key_memo *m = &b->memo[b->key_pos++ % KEY_MEMO];
	char name[KEY_LEN];

	if (b->skip)
		return 1;
	/* samples repeat their keys in one order: remember what each place held */
	if (m->len == len && !memcmp(m->name, key, len)) {
		b->key_is = m->is;
		return 1;
	}
	if (len == 4 && !memcmp(key, "t_ms", 4)) {
		b->key_is = KEY_T_MS;
	} else if (len < sizeof(name)) {
		memcpy(name, key, len);
		name[len] = 0;
		b->key_is = kind__from_name(name);
		if (b->key_is < 0)
			b->key_is = KEY_OTHER;
	} else {
		b->key_is = KEY_OTHER;
		return 1;
	}
	memcpy(m->name, key, len);
	m->len = len;
	m->is = b->key_is;
	return 1;
}

static int tl_open(struct builder *b, bool map)
{
	if (b->skip || b->in_sample) {		/* a value inside a sample: skipped */
		if (!b->skip && b->key_is != KEY_OTHER)
			return sample_fail(b, ".%s: not an integer", sample_key(b));
		b->skip++;
		return 1;
	}
	if (!map)
		return sample_fail(b, ": not an object");
	memset(&b->s, 0, sizeof(b->s));
	b->key_pos = 0;
	b->in_sample = true;
	b->have_t = false;
	return 1;
}

static int tl_close(struct builder *b)
{
	struct trailstream_timeline *tl = b->tl;

	if (b->skip) {
		b->skip--;
		return 1;
	}
	if (!b->in_sample) {		/* the timeline's own end */
		b->last_n = tl->n;
		b->in_timeline = false;
		b->depth--;
		return 1;
	}
	if (!b->have_t)
		return sample_fail(b, ".t_ms: missing");
	if (b->keep_samples) {
		if (array__grow((void **)&tl->s, &tl->cap, tl->n + 1, sizeof(*tl->s)))
			return fail(b, false, "out of memory");
		tl->s[tl->n++] = b->s;
	}
	b->sample_no++;
	b->last_t = b->s.t_ms;
	b->in_sample = false;
	return 1;
}

/* ---- callbacks ---- */

static int on_null(void *ctx)
{
	struct builder *b = ctx;

	if (skipped(b, 0))
		return 1;
	return b->in_timeline ? tl_value(b, false, 0) : put(b, json_null());
}

static int on_boolean(void *ctx, int v)
{
	struct builder *b = ctx;

	if (skipped(b, 0))
		return 1;
	return b->in_timeline ? tl_value(b, false, 0) : put(b, json_boolean(v));
}

static int on_integer(void *ctx, long long v)
{
	struct builder *b = ctx;

	if (skipped(b, 0))
		return 1;
	return b->in_timeline ? tl_value(b, true, v) : put(b, json_integer(v));
}

static int on_double(void *ctx, double v)
{
	struct builder *b = ctx;

	if (skipped(b, 0))
		return 1;
	return b->in_timeline ? tl_value(b, false, 0) : put(b, json_real(v));
}

static int on_string(void *ctx, const unsigned char *s, size_t len)
{
	struct builder *b = ctx;

	if (skipped(b, 0))
		return 1;
	if (b->in_timeline)
		return tl_value(b, false, 0);
	if (!utf8_valid(s, len))
		return fail(b, true, "invalid UTF-8 in a string");
	return put(b, json_stringn_nocheck((const char *)s, len));
}

static int on_start_map(void *ctx)
{
	struct builder *b = ctx;

	if (skipped(b, 1))
		return 1;
	if (b->in_timeline)
		return tl_open(b, true);
	/* a target: an object right inside root.targets; its index there */
	if (b->depth == 2 && b->stack[1] == b->targets)
		b->target = json_array_size(b->stack[1]);
	return open_container(b, json_object());
}

static int on_map_key(void *ctx, const unsigned char *key, size_t len)
{
	struct builder *b = ctx;

	if (b->skip_tree)
		return 1;
	if (b->in_timeline)
		return tl_key(b, key, len);
	if (!utf8_valid(key, len))
		return fail(b, true, "invalid UTF-8 in a key");
	/* the key lives in yajl's buffer only until the callback returns */
	free(b->key);
	b->key = malloc(len + 1);
	if (!b->key)
		return fail(b, false, "out of memory");
	memcpy(b->key, key, len);
	b->key[len] = 0;
	b->key_len = len;
	b->skip_value = !key_known(b);
	return 1;
}

static int on_end_map(void *ctx)
{
	struct builder *b = ctx;
	char err[sizeof(b->err)];
	json_t *parent;

	if (skipped(b, -1))
		return 1;
	if (b->in_timeline)
		return tl_close(b);
	if (b->depth == 3)
		b->target = -1;
	b->depth--;
	/* a target's or an event's end: checked now, not after millions more */
	parent = b->depth ? b->stack[b->depth - 1] : NULL;
	if (parent && parent == b->targets &&
	    b->checks->target(b->stack[b->depth], json_array_size(parent) - 1, err, sizeof(err)))
		return fail(b, false, err);
	if (parent && parent == b->events &&
	    b->checks->event(b->stack[b->depth], json_array_size(parent) - 1, err, sizeof(err)))
		return fail(b, false, err);
	return 1;
}

static int on_start_array(void *ctx)
{
	struct builder *b = ctx;
	struct trailstream_timelines *tls = b->tls;
	size_t need;

	if (skipped(b, 1))
		return 1;
	if (b->in_timeline)
		return tl_open(b, false);
	if (b->depth != 3 || b->target < 0 || !key_is(b, "timeline")) {
		json_t *arr = json_array();

		if (!open_container(b, arr))
			return 0;
		if (b->depth == 2 && key_is(b, "targets"))
			b->targets = arr;
		else if (b->depth == 2 && key_is(b, "events"))
			b->events = arr;
		return 1;
	}
	/* targets[target].timeline: samples go to tls->tl[target], not to the tree */
	need = b->target + 1;
	if (need > tls->n) {
		if (array__grow((void **)&tls->tl, &tls->cap, need, sizeof(*tls->tl)))
			return fail(b, false, "out of memory");
		memset(tls->tl + tls->n, 0, (need - tls->n) * sizeof(*tls->tl));
		tls->n = need;
	}
	if (json_object_getn(b->stack[2], b->key, b->key_len) || timeline_streamed(b))
		return fail(b, true, "duplicate object key 'timeline'");
	b->tl = &tls->tl[b->target];
	b->tl->present = true;
	/*
	 * Targets of one trail span about the same time: room for as many
	 * samples as the last one had, so most never grow (and copy). Not
	 * getting it is no error here; growing later would be.
	 */
	if (b->last_n && b->keep_samples)
		(void)array__grow((void **)&b->tl->s, &b->tl->cap, b->last_n, sizeof(*b->tl->s));
	b->stack[b->depth] = NULL;	/* no container in the tree for it */
	b->depth++;
	b->in_timeline = true;
	b->sample_no = 0;
	b->in_sample = false;
	b->skip = 0;
	b->last_t = 0;
	return 1;
}

static int on_end_array(void *ctx)
{
	struct builder *b = ctx;

	if (skipped(b, -1))
		return 1;
	if (b->in_timeline)
		return tl_close(b);
	b->depth--;
	return 1;
}

static const yajl_callbacks callbacks = {
	.yajl_null = on_null,
	.yajl_boolean = on_boolean,
	.yajl_integer = on_integer,
	.yajl_double = on_double,
	.yajl_string = on_string,
	.yajl_start_map = on_start_map,
	.yajl_map_key = on_map_key,
	.yajl_end_map = on_end_map,
	.yajl_start_array = on_start_array,
	.yajl_end_array = on_end_array,
};

void trailstream__free(struct trailstream_timelines *tls)
{
	size_t i;

	for (i = 0; i < tls->n; i++)
		free(tls->tl[i].s);
	free(tls->tl);
	memset(tls, 0, sizeof(*tls));
}

/* yajl's message, one line: "parse error: premature EOF" */
static void parse_error(yajl_handle h, const unsigned char *buf, size_t len, char *out,
			size_t outlen)
{
	unsigned char *msg = yajl_get_error(h, 0, buf, len);
	char *nl;

	snprintf(out, outlen, "%s", msg ? (char *)msg : "parse error");
	if (msg)
		yajl_free_error(h, msg);
	nl = strchr(out, '\n');
	if (nl)
		*nl = 0;
}

/* Line and column (from 1) of byte AT of the file open at FD: for error messages only. */
static void where(int fd, size_t at, size_t *line, size_t *col)
{
	char buf[65536];
	size_t off = 0;
	ssize_t n, i;

	*line = *col = 1;
	while (off < at && (n = pread(fd, buf, sizeof(buf), off)) > 0) {
		for (i = 0; i < n && off < at; i++, off++) {
			if (buf[i] == '\n') {
				++*line;
				*col = 1;
			} else {
				++*col;
			}
		}
	}
}

/*
 * The file, read a piece at a time into one buffer (yajl keeps copies of
 * what it still needs), so memory stays one piece whatever its size. Not
 * mapped: a file cut short under a mapping faults (SIGBUS), where read()
 * only ends early.
 */
struct source {
	int fd;
	struct stat st;		/* at open */
	unsigned char *buf;
};

/* The next piece, in buf: its length, 0 at the end, -1 with errno on failure. */
static ssize_t next_piece(struct source *src)
{
	ssize_t n;

	do
		n = read(src->fd, src->buf, CHUNK);
	while (n < 0 && errno == EINTR);
	return n;
}

/* The file is not as it was at open: another size or modification time. */
static bool changed(const struct source *src)
{
	struct stat now;

	return fstat(src->fd, &now) || now.st_size != src->st.st_size ||
	       now.st_mtim.tv_sec != src->st.st_mtim.tv_sec ||
	       now.st_mtim.tv_nsec != src->st.st_mtim.tv_nsec;
}

/*
 * Only a regular file is a trail: opened without blocking, so that a FIFO
 * with no writer or a device answers at once, then read as usual. The
 * descriptor, or -1 and the reason in ERR.
 */
static int open_regular(const char *path, struct stat *st, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC), fl;

	if (fd < 0) {
		snprintf(err, errlen, "%s", strerror(errno));
		return -1;
	}
	if (fstat(fd, st) || (fl = fcntl(fd, F_GETFL)) < 0) {
		snprintf(err, errlen, "%s", strerror(errno));
	} else if (!S_ISREG(st->st_mode)) {
		snprintf(err, errlen, "not a regular file");
	} else if (fcntl(fd, F_SETFL, fl & ~O_NONBLOCK)) {
		snprintf(err, errlen, "%s", strerror(errno));
	} else {
		return fd;
	}
	close(fd);
	return -1;
}

json_t *trailstream__load(const char *path, struct trailstream_timelines *tls,
			  const struct trailstream_checks *checks, bool keep_samples, char *err,
			  size_t errlen)
{
	struct builder b = { .target = -1, .tls = tls, .checks = checks,
			     .keep_samples = keep_samples };
	struct source src = { .fd = -1 };
	size_t line, col, before = 0;
	yajl_handle h = NULL;
	yajl_status st = yajl_status_ok;
	ssize_t n = 0;

	memset(tls, 0, sizeof(*tls));
	err[0] = 0;
	src.fd = open_regular(path, &src.st, err, errlen);
	if (src.fd < 0)
		return NULL;
	posix_fadvise(src.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	src.buf = malloc(CHUNK);
	h = yajl_alloc(&callbacks, NULL, &b);
	if (!src.buf || !h) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (;;) {
		n = next_piece(&src);
		if (n < 0) {
			snprintf(err, errlen, "%s", strerror(errno));
			goto out;
		}
		st = n ? yajl_parse(h, src.buf, n) : yajl_complete_parse(h);
		if (st != yajl_status_ok || !n)
			break;
		before += n;
	}
	/* cut short or rewritten in place while read: what was parsed is no trail */
	if (changed(&src)) {
		snprintf(err, errlen, "trail file changed while reading");
		goto out;
	}
	if (st != yajl_status_ok) {
		char msg[200];

		where(src.fd, before + (n > 0 ? yajl_get_bytes_consumed(h) : 0), &line, &col);
		if (st == yajl_status_client_canceled && !b.json_fault) {
			snprintf(err, errlen, "%s", b.err);	/* ours: not a JSON fault */
		} else {
			if (st == yajl_status_client_canceled)
				snprintf(msg, sizeof(msg), "%s", b.err);
			else
				parse_error(h, src.buf, n > 0 ? n : 0, msg, sizeof(msg));
			snprintf(err, errlen, "malformed JSON at line %zu, column %zu: %s", line, col,
				 msg);
		}
		goto out;
	}
	if (!b.root)
		snprintf(err, errlen, "malformed JSON: no value");
out:
	if (h)
		yajl_free(h);
	free(src.buf);
	free(b.key);
	close(src.fd);
	if (err[0] || !b.root) {
		json_decref(b.root);
		trailstream__free(tls);
		return NULL;
	}
	return b.root;
}
