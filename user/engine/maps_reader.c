// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Processes' code mappings read from /proc on a thread of their own (maps_reader.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <search.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/sysmacros.h>
#include <bpf/libbpf.h>

#include "array.h"
#include "clock.h"
#include "log.h"
#include "maps_reader.h"

#define POLL_MS 100
/* reads waiting for the loop at most, in bytes: beyond, a read is dropped (the loop's own comes) */
#define PENDING_MAX (16u << 20)
/* a process's maps are read once per wake-up however often asked */
#define BATCH_MAX 256
/* a maps file larger than this is cut (a process with 100,000 mappings) */
#define MAPS_MAX (8u << 20)
/* files opened for the loop at most: waiting in reads, and ever (then the loop's reads only) */
#define FILES_PENDING_MAX 256
#define FILES_SEEN_MAX 65536

struct maps_read {
	uint32_t pid;
	uint64_t read_ns;
	char *text;		/* its code lines */
	size_t len;
	struct maps_file *files;	/* files first seen in it, open */
	size_t n_files;
};

struct maps_reader {
	struct ring_buffer *rb;
	pthread_t tid;
	volatile sig_atomic_t stop;
	uint32_t batch[BATCH_MAX];
	size_t n_batch;
	char *buf;		/* the thread's: a maps file as read */
	size_t cap_buf;
	pthread_mutex_t lock;	/* the reads below */
	struct maps_read *reads;	/* oldest first, from head on */
	size_t head, n_reads, cap_reads, pending;
	unsigned int waiting;	/* n_reads - head, read without the lock */
	size_t files_pending;	/* open in reads, under the lock */
	void *seen;		/* the thread's: (dev, inode) of files opened for the loop */
	size_t n_seen;
};

static int on_want(void *ctx, void *data, size_t size)
{
	struct maps_reader *r = ctx;
	uint32_t pid;
	size_t i;

	if (size < sizeof(pid))
		return 0;
	memcpy(&pid, data, sizeof(pid));
	for (i = 0; i < r->n_batch; i++)
		if (r->batch[i] == pid)
			return 0;
	if (r->n_batch < BATCH_MAX)
		r->batch[r->n_batch++] = pid;
	return 0;
}

/* PID's maps file into r->buf: its length, 0 where gone (a zombie's reads empty). */
static size_t read_maps(struct maps_reader *r, uint32_t pid)
{
	char name[32];
	size_t len = 0;
	ssize_t n;
	int fd;

	snprintf(name, sizeof(name), "/proc/%u/maps", pid);
	fd = open(name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	for (;;) {
		if (len + 4096 > r->cap_buf &&
		    (len + 4096 > MAPS_MAX || array__grow((void **)&r->buf, &r->cap_buf,
							     len + 4096, 1)))
			break;
		n = read(fd, r->buf + len, r->cap_buf - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	return len;
}

/* Keeps the code lines ("r-xp") of the LEN bytes read: a copy of its own. */
static char *code_lines(const char *text, size_t len, size_t *out_len)
{
	char *code = malloc(len + 1), *o = code;
	const char *p = text, *end = text + len, *nl, *sp;

	if (!code)
		return NULL;
	for (; p < end; p = nl + 1) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			break;		/* cut: its last line half read */
		sp = memchr(p, ' ', (size_t)(nl - p));
		if (sp && nl - sp > 3 && sp[3] == 'x') {
			memcpy(o, p, (size_t)(nl - p) + 1);
			o += nl - p + 1;
		}
	}
	*o = '\0';
	*out_len = (size_t)(o - code);
	return code;
}

static int key_cmp(const void *a, const void *b)
{
	const struct maps_file *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* N more files open in reads (N < 0: fewer); false where that would pass the bound. */
static bool files_count(struct maps_reader *r, long n)
{
	bool ok;

	pthread_mutex_lock(&r->lock);
	ok = n <= 0 || r->files_pending + (size_t)n <= FILES_PENDING_MAX;
	if (ok)
		r->files_pending += (size_t)n;
	pthread_mutex_unlock(&r->lock);
	return ok;
}

/*
 * The files of PID's code lines (TEXT) that no read opened before, opened
 * now through the process's own mapping: the loop names a file by these
 * where it is new to it and the process gone by then (its path, from
 * memtrail's root, is another file on overlayfs, or none in a container).
 */
static void open_files(struct maps_reader *r, struct maps_read *m)
{
	unsigned long long start, end, inode;
	unsigned int maj, min;
	char name[96], perms[8];
	struct maps_file *f, *key;
	const char *p, *nl;
	size_t cap = 0;
	int pos, fd;

	for (p = m->text; *p; p = nl + 1) {
		nl = strchr(p, '\n');
		if (!nl)
			break;
		pos = 0;
		if (sscanf(p, "%llx-%llx %7s %*x %x:%x %llu %n", &start, &end, perms, &maj, &min,
			   &inode, &pos) < 6 || !inode || !pos || p + pos >= nl || p[pos] != '/')
			continue;
		key = &(struct maps_file){ .dev = makedev(maj, min), .ino = inode };
		if (tfind(key, &r->seen, key_cmp) || r->n_seen >= FILES_SEEN_MAX)
			continue;
		if (!files_count(r, 1))
			return;
		snprintf(name, sizeof(name), "/proc/%u/map_files/%llx-%llx", m->pid, start, end);
		fd = open(name, O_RDONLY | O_CLOEXEC);
		f = fd >= 0 && !array__grow((void **)&m->files, &cap, m->n_files + 1, sizeof(*f)) ?
			malloc(sizeof(*f)) : NULL;
		if (f) {
			*f = (struct maps_file){ .dev = key->dev, .ino = key->ino, .fd = fd };
			if (!tsearch(f, &r->seen, key_cmp)) {
				free(f);
				f = NULL;
			}
		}
		if (!f) {
			if (fd >= 0)
				close(fd);
			files_count(r, -1);
			continue;
		}
		r->n_seen++;
		m->files[m->n_files++] = *f;
	}
}

static void read_free(struct maps_reader *r, struct maps_read *m)
{
	size_t i;

	for (i = 0; i < m->n_files; i++)
		close(m->files[i].fd);
	files_count(r, -(long)m->n_files);
	free(m->files);
	free(m->text);
}

static void read_batch(struct maps_reader *r)
{
	struct maps_read m;
	size_t i, len;

	for (i = 0; i < r->n_batch && !r->stop; i++) {
		/* its time is the open's: before the exit of a process that ends as it is read */
		m = (struct maps_read){ .pid = r->batch[i], .read_ns = clock__mono_ns() };
		len = read_maps(r, r->batch[i]);
		if (!len || !(m.text = code_lines(r->buf, len, &m.len)))
			continue;
		open_files(r, &m);
		pthread_mutex_lock(&r->lock);
		if (r->pending + m.len > PENDING_MAX ||
		    array__grow((void **)&r->reads, &r->cap_reads, r->n_reads + 1,
				sizeof(*r->reads))) {
			pthread_mutex_unlock(&r->lock);
			read_free(r, &m);
			continue;
		}
		r->reads[r->n_reads++] = m;
		r->pending += m.len;
		__atomic_store_n(&r->waiting, (unsigned int)(r->n_reads - r->head), __ATOMIC_RELEASE);
		pthread_mutex_unlock(&r->lock);
	}
	r->n_batch = 0;
}

static void *reader(void *arg)
{
	struct maps_reader *r = arg;

	while (!r->stop) {
		if (ring_buffer__poll(r->rb, POLL_MS) < 0 && errno != EINTR)
			break;
		read_batch(r);
	}
	return NULL;
}

struct maps_reader *maps_reader__start(int fd)
{
	struct maps_reader *r;
	sigset_t all, old;
	int err;

	if (fd < 0 || !(r = calloc(1, sizeof(*r))))
		return NULL;
	pthread_mutex_init(&r->lock, NULL);
	r->rb = ring_buffer__new(fd, on_want, r, NULL);
	if (!r->rb) {
		log__debug("maps reader: %s: maps are read by the event loop only", strerror(errno));
		free(r);
		return NULL;
	}
	/* signals stay with the main thread: its loop stops on Ctrl-C */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	err = pthread_create(&r->tid, NULL, reader, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		log__debug("maps reader: %s: maps are read by the event loop only", strerror(err));
		ring_buffer__free(r->rb);
		free(r);
		return NULL;
	}
	return r;
}

/* M to FN, then its files closed and its text freed. */
static void hand(struct maps_reader *r, struct maps_read *m, maps_read_fn fn, void *ctx)
{
	FILE *f = fmemopen(m->text, m->len, "r");

	/* FN closes it */
	if (f)
		fn(ctx, m->pid, f, m->read_ns, m->files, m->n_files);
	read_free(r, m);
}

void maps_reader__take(struct maps_reader *r, uint64_t until_ns, maps_read_fn fn, void *ctx)
{
	struct maps_read m;

	if (!r || !__atomic_load_n(&r->waiting, __ATOMIC_ACQUIRE))
		return;
	for (;;) {
		pthread_mutex_lock(&r->lock);
		if (r->head == r->n_reads || r->reads[r->head].read_ns > until_ns) {
			if (r->head == r->n_reads)
				r->head = r->n_reads = 0;
			__atomic_store_n(&r->waiting, (unsigned int)(r->n_reads - r->head),
					 __ATOMIC_RELEASE);
			pthread_mutex_unlock(&r->lock);
			return;
		}
		m = r->reads[r->head++];
		r->pending -= m.len;
		pthread_mutex_unlock(&r->lock);
		if (!m.pid)
			continue;	/* taken by maps_reader__take_pid */
		hand(r, &m, fn, ctx);
	}
}

void maps_reader__take_pid(struct maps_reader *r, uint32_t pid, uint64_t until_ns,
			   maps_read_fn fn, void *ctx)
{
	struct maps_read m;
	size_t i;

	if (!r || !pid || !__atomic_load_n(&r->waiting, __ATOMIC_ACQUIRE))
		return;
	for (i = 0;; i++) {
		pthread_mutex_lock(&r->lock);
		for (i = i > r->head ? i : r->head; i < r->n_reads && r->reads[i].pid != pid &&
		     r->reads[i].read_ns <= until_ns; i++)
			;
		if (i == r->n_reads || r->reads[i].read_ns > until_ns) {
			pthread_mutex_unlock(&r->lock);
			return;
		}
		/* left in place, taken: pid 0 and no text */
		m = r->reads[i];
		r->reads[i] = (struct maps_read){ .pid = 0 };
		r->pending -= m.len;
		pthread_mutex_unlock(&r->lock);
		hand(r, &m, fn, ctx);
	}
}

void maps_reader__stop(struct maps_reader *r)
{
	size_t i;

	if (!r)
		return;
	r->stop = 1;
	pthread_join(r->tid, NULL);
	ring_buffer__free(r->rb);
	for (i = r->head; i < r->n_reads; i++)
		read_free(r, &r->reads[i]);
	free(r->reads);
	tdestroy(r->seen, free);
	free(r->buf);
	pthread_mutex_destroy(&r->lock);
	free(r);
}
