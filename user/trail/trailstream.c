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
	bool placeholder;		/* the next timeline value is the fast path's stand-in */
	size_t timelines;		/* timeline arrays opened so far */
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
	if (b->placeholder) {
		b->placeholder = false;
		return 1;
	}
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
	b->timelines++;
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

/*
 * ---- the timelines' fast path ----
 *
 * A timeline is nearly all of a long trail's bytes, and yajl's lexer most of
 * its reading time. So once yajl has opened a target's timeline array, its
 * samples are read here, straight from the buffer, as long as each is the
 * plain object record writes ({"t_ms": N, "KIND": N, ...}: ASCII keys
 * without escapes, integers of at most 18 digits), and handed to the same
 * tl_*() calls yajl's callbacks make, each whole sample at once; yajl is
 * then given the array's "]". At anything else (another value, a float, an
 * escape, bad JSON, a sample cut by the file's end) the rest of the
 * timeline goes to yajl from the last sample's end, after a "null" yajl
 * reads in place of the samples read here (the builder lets it pass), so
 * that yajl sees the same JSON from there on and says the same things.
 */
enum fast {
	FAST_DONE,	/* the array's "]" read */
	FAST_MORE,	/* a sample runs past the bytes there are */
	FAST_YAJL,	/* something for yajl, from *pos on */
	FAST_FAIL,	/* a sample failed its checks: b->err */
};

#define FAST_PAIRS 32
#define FAST_DIGITS 18

static bool json_ws(unsigned char c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* Past whitespace from P: the first other byte's index, or END. */
static size_t skip_ws(const unsigned char *buf, size_t p, size_t end)
{
	while (p < end && json_ws(buf[p]))
		p++;
	return p;
}

struct fast_pair {
	const unsigned char *key;
	size_t len;
	long long v;
};

/*
 * One sample from BUF[P] ('{') to END into PAIRS: the index after its '}',
 * 0 where it is not plain (yajl's), or END + 1 where it runs past END.
 */
static size_t fast_sample(const unsigned char *buf, size_t p, size_t end, struct fast_pair *pairs,
			  size_t *n)
{
	size_t k, digits;
	unsigned long long v;
	bool neg;

	*n = 0;
	p = skip_ws(buf, p + 1, end);
	if (p < end && buf[p] == '}')
		return p + 1;
	for (;;) {
		if (p >= end)
			return end + 1;
		if (buf[p] != '"' || *n == FAST_PAIRS)
			return 0;
		for (k = ++p; k < end && buf[k] != '"'; k++)
			if (buf[k] == '\\' || buf[k] < 0x20 || buf[k] >= 0x80)
				return 0;
		if (k >= end)
			return end + 1;
		pairs[*n].key = buf + p;
		pairs[*n].len = k - p;
		p = skip_ws(buf, k + 1, end);
		if (p >= end)
			return end + 1;
		if (buf[p] != ':')
			return 0;
		p = skip_ws(buf, p + 1, end);
		if (p >= end)
			return end + 1;
		neg = buf[p] == '-';
		p += neg;
		for (v = 0, digits = 0; p < end && buf[p] >= '0' && buf[p] <= '9'; p++, digits++)
			v = v * 10 + (buf[p] - '0');
		if (p >= end)
			return end + 1;
		/* no digit, a leading zero, too long, or a float: yajl's to take or refuse */
		if (!digits || (digits > 1 && buf[p - digits] == '0') || digits > FAST_DIGITS ||
		    buf[p] == '.' || buf[p] == 'e' || buf[p] == 'E')
			return 0;
		pairs[(*n)++].v = neg ? -(long long)v : (long long)v;
		p = skip_ws(buf, p, end);
		if (p >= end)
			return end + 1;
		if (buf[p] == '}')
			return p + 1;
		if (buf[p] != ',')
			return 0;
		p = skip_ws(buf, p + 1, end);
	}
}

/*
 * The samples of the timeline B is in, from BUF[*POS] to END: *POS right
 * after its '[' (FIRST) or after the last sample read. *POS ends after the
 * last sample read here, or after the "]" (FAST_DONE).
 */
static enum fast fast_timeline(struct builder *b, const unsigned char *buf, size_t *pos,
			       size_t end, bool *first)
{
	struct fast_pair pairs[FAST_PAIRS];
	size_t p, next, n, i;

	for (;;) {
		p = skip_ws(buf, *pos, end);
		if (p >= end)
			return FAST_MORE;
		if (buf[p] == ']') {
			*pos = p + 1;
			return FAST_DONE;
		}
		if (!*first) {
			if (buf[p] != ',')
				return FAST_YAJL;
			p = skip_ws(buf, p + 1, end);
			if (p >= end)
				return FAST_MORE;
		}
		if (buf[p] != '{')
			return FAST_YAJL;
		next = fast_sample(buf, p, end, pairs, &n);
		if (!next)
			return FAST_YAJL;
		if (next > end)
			return FAST_MORE;
		if (!tl_open(b, true))
			return FAST_FAIL;
		for (i = 0; i < n; i++) {
			tl_key(b, pairs[i].key, pairs[i].len);
			if (!tl_value(b, true, pairs[i].v))
				return FAST_FAIL;
		}
		if (!tl_close(b))
			return FAST_FAIL;
		*first = false;
		*pos = next;
	}
}

static bool fast_on = true;

void trailstream__set_fast(bool on)
{
	fast_on = on;
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
 * what it still needs; the fast path keeps a sample cut by the piece's end
 * at its start for the next), so memory stays one piece whatever its size.
 * Not mapped: a file cut short under a mapping faults (SIGBUS), where read()
 * only ends early.
 */
struct source {
	int fd;
	struct stat st;		/* at open */
	unsigned char *buf;
	size_t pos, len;	/* buf[pos..len) not read yet */
	size_t base;		/* the file offset of buf[0] */
	bool eof;
};

/* More of the file after what is left unread: 0, or -1 with errno on failure. */
static int next_piece(struct source *src)
{
	ssize_t n;

	memmove(src->buf, src->buf + src->pos, src->len - src->pos);
	src->base += src->pos;
	src->len -= src->pos;
	src->pos = 0;
	do
		n = read(src->fd, src->buf + src->len, CHUNK - src->len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	src->eof = !n;
	src->len += n;
	return 0;
}

/* The index after the next '[' from BUF[P] outside a string (IN_STR, ESC: where P is), or END. */
static size_t scan_to_array(const unsigned char *buf, size_t p, size_t end, bool *in_str,
			    bool *esc)
{
	for (; p < end; p++) {
		if (*in_str) {
			if (*esc)
				*esc = false;
			else if (buf[p] == '\\')
				*esc = true;
			else if (buf[p] == '"')
				*in_str = false;
		} else if (buf[p] == '"') {
			*in_str = true;
		} else if (buf[p] == '[') {
			return p + 1;
		}
	}
	return end;
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

/*
 * TEXT, JSON of the fast path's own ("]" or its stand-in "null"), given to
 * yajl at the file's offset AT of what it stands for; no byte of the file
 * (FED_LEN 0) for an error to point into.
 */
static yajl_status feed_own(yajl_handle h, const char *text, size_t where, size_t *fed_len,
			    size_t *at)
{
	*fed_len = 0;
	*at = where;
	return yajl_parse(h, (const unsigned char *)text, strlen(text));
}

json_t *trailstream__load(const char *path, struct trailstream_timelines *tls,
			  const struct trailstream_checks *checks, bool keep_samples, char *err,
			  size_t errlen)
{
	struct builder b = { .target = -1, .tls = tls, .checks = checks,
			     .keep_samples = keep_samples };
	struct source src = { .fd = -1 };
	bool fast = false, first = false, more = false, in_str = false, esc = false;
	size_t opened;
	const unsigned char *fed = NULL;	/* what yajl was given last, from file offset AT */
	size_t line, col, fed_len = 0, at = 0, q;
	yajl_handle h = NULL;
	yajl_status st = yajl_status_ok;
	enum fast r;

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
		if (more || src.pos == src.len) {
			if (src.eof && fast)
				goto to_yajl;	/* a sample cut by the end: yajl says so */
			if (src.eof) {
				fed_len = 0;
				at = src.base + src.len;
				st = yajl_complete_parse(h);
				break;
			}
			if (next_piece(&src)) {
				snprintf(err, errlen, "%s", strerror(errno));
				goto out;
			}
			more = false;
			continue;
		}
		if (fast) {
			r = fast_timeline(&b, src.buf, &src.pos, src.len, &first);
			if (r == FAST_FAIL) {
				st = yajl_status_client_canceled;
				break;
			}
			if (r == FAST_DONE) {
				fast = false;
				st = feed_own(h, "]", src.base + src.pos, &fed_len, &at);
				if (st != yajl_status_ok)
					break;
				continue;
			}
			/* a sample longer than half the buffer is yajl's too */
			if (r == FAST_MORE && src.len - src.pos < CHUNK / 2) {
				more = true;
				continue;
			}
to_yajl:
			/* the bytes left, a cut sample's too, are yajl's to read and judge */
			fast = more = in_str = esc = false;
			if (!first) {	/* in place of the samples read here */
				b.placeholder = true;
				st = feed_own(h, "null", src.base + src.pos, &fed_len, &at);
				if (st != yajl_status_ok)
					break;
			}
			continue;
		}
		/* up to the next array's '[': where a timeline opens, the fast path reads it */
		q = scan_to_array(src.buf, src.pos, src.len, &in_str, &esc);
		opened = b.timelines;
		fed = src.buf + src.pos;
		fed_len = q - src.pos;
		at = src.base + src.pos;
		src.pos = q;
		st = yajl_parse(h, fed, fed_len);
		if (st != yajl_status_ok)
			break;
		/* a timeline opened by this '[' (one yajl reads, after a bail, ends before it) */
		if (fast_on && b.timelines != opened && b.in_timeline && src.buf[q - 1] == '[')
			fast = first = true;
	}
	/* cut short or rewritten in place while read: what was parsed is no trail */
	if (changed(&src)) {
		snprintf(err, errlen, "trail file changed while reading");
		goto out;
	}
	if (st != yajl_status_ok) {
		char msg[200];

		where(src.fd, at + (fed_len ? yajl_get_bytes_consumed(h) : 0), &line, &col);
		if (st == yajl_status_client_canceled && !b.json_fault) {
			snprintf(err, errlen, "%s", b.err);	/* ours: not a JSON fault */
		} else {
			if (st == yajl_status_client_canceled)
				snprintf(msg, sizeof(msg), "%s", b.err);
			else
				parse_error(h, fed, fed_len, msg, sizeof(msg));
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
