// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/fanotify.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "array.h"
#include "gate.h"

struct gate {
	int fan;		/* the fanotify group */
	int wake[2];		/* the thread tells gate__serve of opens that wait */
	int stop[2];		/* the thread is told to end */
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	int *pending;		/* descriptors of opens waiting for gate__serve */
	size_t n_pending, cap_pending;
	uint64_t waited, opens;	/* under lock */
	uint64_t refused;	/* events the kernel refused as memtrail could not read them */
};

int gate__open(struct gate **out)
{
	struct gate *g = calloc(1, sizeof(*g));

	*out = NULL;
	if (!g)
		return -ENOMEM;
	g->wake[0] = g->wake[1] = g->stop[0] = g->stop[1] = -1;
	g->fan = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK,
			       O_RDONLY | O_LARGEFILE | O_CLOEXEC);
	if (g->fan < 0) {
		int err = -errno;

		free(g);
		return err;
	}
	pthread_mutex_init(&g->lock, NULL);
	*out = g;
	return 0;
}

/* Filesystems no program is loaded from: their opens are not worth a wait. */
static bool pseudo_fs(const char *type)
{
	static const char *const types[] = {
		"proc", "sysfs", "cgroup", "cgroup2", "devpts", "mqueue", "debugfs", "tracefs",
		"securityfs", "pstore", "bpf", "configfs", "fusectl", "hugetlbfs", "autofs",
		"binfmt_misc", "efivarfs", "nsfs", "rpc_pipefs", "selinuxfs",
	};
	size_t i;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (!strcmp(type, types[i]))
			return true;
	return false;
}

/* The Nth space-separated field of LINE, cut in place; NULL if it has fewer. */
static char *field(char *line, int n)
{
	char *f = line, *end;

	while (n-- > 0) {
		f = strchr(f, ' ');
		if (!f)
			return NULL;
		f++;
	}
	end = strchr(f, ' ');
	if (end)
		*end = '\0';
	return f;
}

/* mountinfo's octal escapes (\040 for a space) undone in place. */
static void unescape(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*w++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*w++ = *s;
		}
	}
	*w = '\0';
}

#define MOUNTINFO_MAX (16 << 20)

int gate__enter(struct gate *g, int *marked, int *failed)
{
	char *buf, *line, *next, *sep, *point, *type;
	size_t len = 0;
	ssize_t n;
	int fd, err = 0;

	*marked = *failed = 0;
	if (unshare(CLONE_NEWNS))
		return -errno;
	/* no malloc after a fork of a threaded process: a mapping of its own */
	buf = mmap(NULL, MOUNTINFO_MAX, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (buf == MAP_FAILED)
		return -errno;
	fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		goto out;
	}
	while (len < MOUNTINFO_MAX - 1 &&
	       ((n = read(fd, buf + len, MOUNTINFO_MAX - 1 - len)) > 0 || (n < 0 && errno == EINTR)))
		len += n > 0 ? (size_t)n : 0;
	close(fd);
	buf[len] = '\0';
	/* "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue" */
	for (line = buf; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		sep = strstr(line, " - ");
		if (!sep)
			continue;
		*sep = '\0';
		type = field(sep + 3, 0);
		point = field(line, 4);
		if (!point || !type || pseudo_fs(type))
			continue;
		unescape(point);
		if (fanotify_mark(g->fan, FAN_MARK_ADD | FAN_MARK_MOUNT, FAN_OPEN_PERM, AT_FDCWD,
				  point))
			(*failed)++;
		else
			(*marked)++;
	}
	if (!*marked)
		err = -ENOENT;
out:
	munmap(buf, MOUNTINFO_MAX);
	return err;
}

static void let_go(struct gate *g, int fd)
{
	struct fanotify_response r = { .fd = fd, .response = FAN_ALLOW };

	while (write(g->fan, &r, sizeof(r)) < 0 && errno == EINTR)
		;
	close(fd);
}

/* Whether FD is a regular file that starts as ELF does: only those wait. */
static bool elf_file(int fd)
{
	unsigned char magic[4];
	struct stat st;

	return !fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_size >= 64 &&
	       pread(fd, magic, sizeof(magic), 0) == sizeof(magic) &&
	       !memcmp(magic, "\177ELF", 4);
}

/* One event: let go at once unless gate__serve must look at it first. */
static void on_event(struct gate *g, const struct fanotify_event_metadata *m, pid_t self)
{
	bool queued = false;

	if (m->fd < 0)
		return;		/* FAN_NOFD: the queue overflowed (permission events never do) */
	/* memtrail's own opens (reading the file gate__serve looks at) never wait */
	if (m->pid != self && elf_file(m->fd)) {
		pthread_mutex_lock(&g->lock);
		queued = !array__grow((void **)&g->pending, &g->cap_pending, g->n_pending + 1,
				      sizeof(*g->pending));
		if (queued)
			g->pending[g->n_pending++] = m->fd;
		g->opens++;
		pthread_mutex_unlock(&g->lock);
	} else {
		pthread_mutex_lock(&g->lock);
		g->opens += m->pid != self;
		pthread_mutex_unlock(&g->lock);
	}
	if (queued) {
		if (write(g->wake[1], "w", 1) < 0 && errno != EAGAIN)
			queued = false;	/* cannot happen with the pipe open; never wait on it */
		else
			return;
	}
	let_go(g, m->fd);
}

static void *serve_thread(void *arg)
{
	struct gate *g = arg;
	char buf[8192] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));
	pid_t self = getpid();

	for (;;) {
		struct pollfd p[2] = { { g->fan, POLLIN, 0 }, { g->stop[0], POLLIN, 0 } };
		const struct fanotify_event_metadata *m;
		ssize_t len;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		len = read(g->fan, buf, sizeof(buf));
		if (len < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (len < 0) {
			/*
			 * no descriptor for the next event (EMFILE): the kernel refused
			 * that open; the probes keep FD_HEADROOM free so that it does not
			 */
			pthread_mutex_lock(&g->lock);
			g->refused++;
			pthread_mutex_unlock(&g->lock);
			poll(NULL, 0, 10);
			continue;
		}
		if (!len)
			break;
		m = (const void *)buf;
		for (; FAN_EVENT_OK(m, len); m = FAN_EVENT_NEXT(m, len)) {
			if (m->vers != FANOTIFY_METADATA_VERSION) {
				if (m->fd >= 0)
					let_go(g, m->fd);
				continue;
			}
			on_event(g, m, self);
		}
	}
	return NULL;
}

int gate__start(struct gate *g)
{
	sigset_t all, old;
	int err;

	if (pipe2(g->wake, O_CLOEXEC | O_NONBLOCK) || pipe2(g->stop, O_CLOEXEC))
		return -errno;
	/* signals go to the main thread: its poll and reads see EINTR, not this one's */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	err = pthread_create(&g->thread, NULL, serve_thread, g);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return -err;
	g->started = true;
	return 0;
}

int gate__wake_fd(const struct gate *g)
{
	return g ? g->wake[0] : -1;
}

void gate__serve(struct gate *g, gate_file_fn fn, void *ctx)
{
	char drain[64];
	int *fds;
	size_t n, i;

	if (!g)
		return;
	while (read(g->wake[0], drain, sizeof(drain)) > 0)
		;
	pthread_mutex_lock(&g->lock);
	fds = g->pending;
	n = g->n_pending;
	g->pending = NULL;
	g->n_pending = g->cap_pending = 0;
	g->waited += n;
	pthread_mutex_unlock(&g->lock);
	for (i = 0; i < n; i++) {
		if (fn)
			fn(ctx, fds[i]);
		let_go(g, fds[i]);
	}
	free(fds);
}

void gate__counts(struct gate *g, uint64_t *waited, uint64_t *opens, uint64_t *refused)
{
	*waited = *opens = *refused = 0;
	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	*waited = g->waited;
	*opens = g->opens;
	*refused = g->refused;
	pthread_mutex_unlock(&g->lock);
}

void gate__close(struct gate *g)
{
	size_t i;

	if (!g)
		return;
	if (g->started) {
		if (write(g->stop[1], "s", 1) < 0)
			pthread_cancel(g->thread);
		pthread_join(g->thread, NULL);
	}
	for (i = 0; i < g->n_pending; i++)
		let_go(g, g->pending[i]);
	/* and the kernel lets go whatever is still unread */
	close(g->fan);
	for (i = 0; i < 2; i++) {
		if (g->wake[i] >= 0)
			close(g->wake[i]);
		if (g->stop[i] >= 0)
			close(g->stop[i]);
	}
	free(g->pending);
	pthread_mutex_destroy(&g->lock);
	free(g);
}
