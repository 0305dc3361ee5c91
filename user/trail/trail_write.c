// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Writing JSON files, through a buffer (jansson hands over a few bytes at a
 * time). A whole trail's timelines are most of it (an hour of 200 targets at
 * 100 ms is 7.2 M samples): they are written straight from the sample
 * arrays, never as a jansson tree; everything else goes through jansson.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kinds.h"
#include "outfile.h"
#include "trail.h"
#include "trail_int.h"

struct writer {
	int fd;
	int err;
	size_t n;
	char buf[1 << 16];
};

static void out_flush(struct writer *w)
{
	if (!w->err && w->n)
		w->err = outfile__put(w->fd, w->buf, w->n);
	w->n = 0;
}

static void out(struct writer *w, const char *s, size_t len)
{
	if (len > sizeof(w->buf) - w->n) {
		out_flush(w);
		if (len > sizeof(w->buf)) {
			if (!w->err)
				w->err = outfile__put(w->fd, s, len);
			return;
		}
	}
	memcpy(w->buf + w->n, s, len);
	w->n += len;
}

static void out_str(struct writer *w, const char *s)
{
	out(w, s, strlen(s));
}

static int out_cb(const char *buf, size_t size, void *data)
{
	out(data, buf, size);
	return 0;
}

/* A JSON value, compact; takes the reference. */
static void out_json(struct writer *w, json_t *v)
{
	if (!v || json_dump_callback(v, out_cb, w, JSON_COMPACT | JSON_ENCODE_ANY))
		w->err = w->err ? w->err : -ENOMEM;
	json_decref(v);
}

static void out_int(struct writer *w, int64_t v)
{
	char s[24], *p = s + sizeof(s);
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;

	do {
		*--p = '0' + u % 10;
		u /= 10;
	} while (u);
	if (v < 0)
		*--p = '-';
	out(w, p, s + sizeof(s) - p);
}

static void out_timeline(struct writer *w, const struct trail *t, const struct trail_target *tt)
{
	size_t i;
	int k;

	out_str(w, "[");
	for (i = 0; i < tt->n_samples && !w->err; i++) {
		out_str(w, i ? ",{\"t_ms\":" : "{\"t_ms\":");
		out_int(w, tt->timeline[i].t_ms);
		for (k = 0; k < MEMTRAIL_KIND_MAX; k++) {
			if (!(t->kinds & (1U << k)))
				continue;
			out_str(w, ",\"");
			out_str(w, kind__name(k));
			out_str(w, "\":");
			out_int(w, tt->timeline[i].level[k]);
		}
		out_str(w, "}");
	}
	out_str(w, "]");
}

/* BODY writes through a buffer to FD; 0 or -errno. */
static int write_through(int fd, void (*body)(struct writer *w, const void *ctx), const void *ctx)
{
	struct writer *w = calloc(1, sizeof(*w));
	int err;

	if (!w)
		return -ENOMEM;
	w->fd = fd;
	body(w, ctx);
	out_flush(w);
	err = w->err;
	free(w);
	return err;
}

/* ROOT, compact, and a newline. */
static void json_body(struct writer *w, const void *root)
{
	out_json(w, json_incref((json_t *)root));
	out_str(w, "\n");
}

static int fill_json(int fd, void *root)
{
	return write_through(fd, json_body, root);
}

int trail__write_json(json_t *root, const char *path)
{
	return root ? outfile__write(path, fill_json, root) : -ENOMEM;
}

/* The document trail__to_json(t, true) would make, key for key, streamed. */
static void trail_body(struct writer *w, const void *ctx)
{
	const struct trail *t = ctx;
	json_t *head = trail_head_json(t), *v;
	const char *key;
	size_t i = 0;

	if (!head) {
		w->err = -ENOMEM;
		return;
	}
	out_str(w, "{");
	json_object_foreach(head, key, v) {		/* memtrail .. kinds, in order */
		out_str(w, i++ ? ",\"" : "\"");
		out_str(w, key);
		out_str(w, "\":");
		out_json(w, json_incref(v));
	}
	json_decref(head);
	out_str(w, ",\"targets\":[");
	for (i = 0; i < t->n_targets && !w->err; i++) {
		json_t *o = trail__target_json(t, &t->targets[i], false);
		char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
		size_t len = s ? strlen(s) : 0;

		json_decref(o);
		if (len < 2) {
			free(s);
			w->err = -ENOMEM;
			return;
		}
		if (i)
			out_str(w, ",");
		out(w, s, len - 1);		/* the target without its closing brace */
		free(s);
		out_str(w, ",\"timeline\":");
		out_timeline(w, t, &t->targets[i]);
		out_str(w, "}");
	}
	out_str(w, "],\"events\":");
	out_json(w, json_incref(t->events));
	out_str(w, ",\"lost\":");
	out_json(w, trail_lost_json(t));
	out_str(w, "}\n");
}

static int fill_trail(int fd, void *t)
{
	return write_through(fd, trail_body, t);
}

int trail__write(const struct trail *t, const char *path)
{
	return outfile__write(path, fill_trail, (void *)t);
}

int trail__write_new(const struct trail *t, char *path, size_t size)
{
	return outfile__write_new(path, size, fill_trail, (void *)t);
}
