// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/fanotify.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "clock.h"
#include "gate.h"
#include "proc.h"

/*
 * The gate's keeper is a process of its own (memtrail-gate), forked by
 * memtrail: it alone holds the fanotify group, reads each open, lets go at
 * once what is not an ELF file of the command's, and hands the rest to
 * memtrail (the descriptor, over a socket), letting each go when memtrail
 * says it looked at it, or once memtrail has made no progress (no CPU time,
 * read every LOOK_NS) for WAIT_NS: stopped, frozen, blocked; while it works
 * (reading a large runtime's symbols, attaching a perf event per function on
 * an old kernel) the open waits up to WAIT_MAX_NS. After such a wait, opens
 * go at once (memtrail still told) until memtrail answers again. It ignores
 * the terminal's stop and interrupt: Ctrl-Z on record stops memtrail, never
 * the gate. It ends when memtrail's end of the socket closes, however
 * memtrail ends, and the kernel lets every open still waiting go as the
 * group closes; killed itself, the same.
 */
#define WAIT_NS 1000000000ULL	/* the longest an open waits for a memtrail that does nothing */
#define WAIT_MAX_NS 10000000000ULL	/* and for one that works on it */
#define LOOK_NS 50000000ULL	/* how often memtrail's CPU time is read while opens wait */
#define PENDING 256		/* opens handed to memtrail and not let go yet */

struct gate {
	int fan;		/* the fanotify group (memtrail's copy until the keeper starts) */
	int sock;		/* memtrail's end of the keeper's socket */
	pid_t keeper;
	uint64_t waited, opens, refused, timed_out;
};

struct gate_msg {
	uint64_t seq;		/* keeper -> memtrail: an open; memtrail -> keeper: looked at */
	uint64_t pid;		/* keeper -> memtrail: the process opening it */
	uint64_t opens;		/* keeper -> memtrail: opens so far, and how many were let go */
	uint64_t refused;	/* without memtrail: the kernel refused them (no descriptor) */
	uint64_t timed_out;	/* or memtrail took WAIT_NS */
};

int gate__open(struct gate **out)
{
	struct gate *g = calloc(1, sizeof(*g));

	*out = NULL;
	if (!g)
		return -ENOMEM;
	g->sock = -1;
	g->fan = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK,
			       O_RDONLY | O_LARGEFILE | O_CLOEXEC);
	if (g->fan < 0) {
		int err = -errno;

		free(g);
		return err;
	}
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
		proc__mount_unescape(point);
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

/* ---- the keeper: async-signal-safe calls only (forked from a threaded memtrail) ---- */

static void let_go(int fan, int fd)
{
	struct fanotify_response r = { .fd = fd, .response = FAN_ALLOW };

	while (write(fan, &r, sizeof(r)) < 0 && errno == EINTR)
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

/* "/proc/PID" and TAIL (at most 12 bytes) into BUF (40 bytes), without snprintf. */
static void proc_path(char *buf, pid_t pid, const char *tail)
{
	unsigned int v = (unsigned int)pid;
	char digits[12];
	int i = 0, n;

	do {
		digits[i++] = (char)('0' + v % 10);
		v /= 10;
	} while (v && i < (int)sizeof(digits));
	memcpy(buf, "/proc/", 6);
	for (n = 6; i > 0; n++)
		buf[n] = digits[--i];
	memcpy(buf + n, tail, strlen(tail) + 1);
}

/* Whether PID runs in the mount namespace NS (readlink's text): the command's processes do. */
static bool in_ns(pid_t pid, const char *ns)
{
	char path[40], link[64];
	ssize_t n;

	proc_path(path, pid, "/ns/mnt");
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return false;
	link[n] = '\0';
	return !strcmp(link, ns);
}

struct held {
	int fd;
	uint64_t seq, since;
};

/* PID's user and system CPU time (clock ticks) from /proc/PID/stat; 0 when unreadable. */
static uint64_t cpu_ticks(pid_t pid)
{
	char path[40], buf[1024], *p;
	uint64_t utime = 0, stime = 0;
	int field;
	ssize_t len;
	int fd;

	proc_path(path, pid, "/stat");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return 0;
	buf[len] = '\0';
	p = strrchr(buf, ')');
	/* after "(comm)": state is field 3, utime 14, stime 15 */
	for (field = 2; p && *p && field < 15; p++) {
		if (*p != ' ')
			continue;
		field++;
		if (field == 14 || field == 15) {
			uint64_t x = 0;
			char *q = p + 1;

			while (*q >= '0' && *q <= '9')
				x = x * 10 + (uint64_t)(*q++ - '0');
			if (field == 14)
				utime = x;
			else
				stime = x;
		}
	}
	return utime + stime;
}

static void keeper_say(const char *s)
{
	if (write(STDERR_FILENO, s, strlen(s)) < 0)
		return;
}

/* The keeper's state: the opens it holds for memtrail, and what it has seen. */
struct keeper {
	int fan, sock;
	pid_t memtrail;
	const char *ns;		/* the command's mount namespace (readlink's text) */
	struct gate_msg stats;
	struct held held[PENDING];
	size_t n_held;
	uint64_t seq, ticks;
	uint64_t looked;	/* when its CPU time was last read (while opens wait) */
	uint64_t worked;	/* the look before the last one that saw it grow: 0, none */
	bool said, absent;
};

/* memtrail's answer on the socket: the open it looked at goes. 0, or -1: memtrail is gone. */
static int keeper_answer(struct keeper *k)
{
	struct gate_msg m;
	ssize_t r = recv(k->sock, &m, sizeof(m), MSG_DONTWAIT);
	size_t i;

	if (r == 0)
		return -1;		/* memtrail is gone, or done */
	k->absent = false;
	for (i = 0; r == sizeof(m) && i < k->n_held; i++) {
		if (k->held[i].seq != m.seq)
			continue;
		let_go(k->fan, k->held[i].fd);
		k->held[i] = k->held[--k->n_held];
		break;
	}
	return 0;
}

/*
 * When H goes unless memtrail answers: WAIT_NS after the later of its open
 * and memtrail's last work (it may be on this very file), WAIT_MAX_NS after
 * its open at the latest.
 */
static uint64_t held_until(const struct keeper *k, const struct held *h)
{
	uint64_t quiet = k->worked > h->since ? k->worked : h->since;

	return quiet + WAIT_NS < h->since + WAIT_MAX_NS ? quiet + WAIT_NS : h->since + WAIT_MAX_NS;
}

/*
 * Read memtrail's CPU time every LOOK_NS while opens wait; let go those
 * whose time is up, and the next ones at once until memtrail answers again.
 * Work seen at a look is dated to the look before it (the earliest it can
 * have stopped working after): an open waits at most about WAIT_NS past
 * memtrail's last work, never a whole WAIT_NS more for work seen late.
 */
static void keeper_expire(struct keeper *k)
{
	uint64_t now = clock__mono_ns();
	size_t i;

	if (k->n_held && now - k->looked >= LOOK_NS) {
		uint64_t t = cpu_ticks(k->memtrail);

		if (t != k->ticks)
			k->worked = k->looked;
		k->ticks = t;
		k->looked = now;
	}
	for (i = 0; i < k->n_held;) {
		if (held_until(k, &k->held[i]) > now) {
			i++;
			continue;
		}
		let_go(k->fan, k->held[i].fd);
		k->held[i] = k->held[--k->n_held];
		k->stats.timed_out++;
		k->absent = true;
		if (!k->said)
			keeper_say("memtrail: warning: the gate let the command's opens go "
				   "after 1 s without memtrail (stopped or busy): a runtime "
				   "it maps now is probed late\n");
		k->said = true;
	}
}

/* One open of the command's: let go at once, or handed to memtrail and held. */
static void keeper_open(struct keeper *k, const struct fanotify_event_metadata *e)
{
	char ctl[CMSG_SPACE(sizeof(int))] = { 0 };
	struct gate_msg m = { 0 };
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			     .msg_controllen = sizeof(ctl) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	uint64_t now;

	if (e->fd < 0)
		return;
	k->stats.opens++;
	/* memtrail's own reads, what is not ELF, other namespaces: at once */
	if (e->vers != FANOTIFY_METADATA_VERSION || e->pid == k->memtrail ||
	    k->n_held == PENDING || !elf_file(e->fd) || !in_ns(e->pid, k->ns)) {
		let_go(k->fan, e->fd);
		return;
	}
	m = k->stats;
	m.seq = ++k->seq;
	m.pid = (uint64_t)e->pid;
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &e->fd, sizeof(int));
	if (sendmsg(k->sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != sizeof(m) || k->absent) {
		let_go(k->fan, e->fd);
		return;
	}
	now = clock__mono_ns();
	if (!k->n_held) {
		k->ticks = cpu_ticks(k->memtrail);	/* its work from now on */
		k->looked = now;
		k->worked = 0;
	}
	k->held[k->n_held++] = (struct held){ e->fd, k->seq, now };
}

/* The command's opens waiting in the fanotify group, each taken. */
static void keeper_read(struct keeper *k)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));

	for (;;) {
		const struct fanotify_event_metadata *e = (const void *)buf;
		ssize_t len = read(k->fan, buf, sizeof(buf));

		if (len < 0 && errno == EINTR)
			continue;
		if (len < 0 && errno != EAGAIN) {
			k->stats.refused++;	/* EMFILE: the kernel refused that open */
			if (k->stats.refused == 1)
				keeper_say("memtrail: warning: an open of the command's failed "
					   "at the gate: no descriptor was left to read it\n");
		}
		if (len <= 0)
			break;
		for (; FAN_EVENT_OK(e, len); e = FAN_EVENT_NEXT(e, len))
			keeper_open(k, e);
	}
}

static void keeper(int fan, int sock, pid_t memtrail, const char *ns)
{
	struct keeper k = { .fan = fan, .sock = sock, .memtrail = memtrail, .ns = ns,
			    .ticks = cpu_ticks(memtrail) };
	size_t i;

	for (;;) {
		struct pollfd p[2] = { { fan, POLLIN, 0 }, { sock, POLLIN, 0 } };
		uint64_t now = clock__mono_ns(), first = UINT64_MAX;
		int timeout = -1;

		/* while opens wait: at the first one's time, or the next look */
		for (i = 0; i < k.n_held; i++) {
			uint64_t until = held_until(&k, &k.held[i]);

			if (until < first)
				first = until;
		}
		if (k.n_held && k.looked + LOOK_NS < first)
			first = k.looked + LOOK_NS;
		if (first != UINT64_MAX)
			timeout = first > now ? (int)((first - now) / 1000000 + 1) : 0;
		if (poll(p, 2, timeout) < 0 && errno != EINTR)
			break;
		if (p[1].revents & POLLIN) {
			if (keeper_answer(&k))
				break;
		} else if (p[1].revents & (POLLHUP | POLLERR)) {
			break;
		}
		keeper_expire(&k);
		if (p[0].revents & POLLIN)
			keeper_read(&k);
	}
	for (i = 0; i < k.n_held; i++)
		let_go(fan, k.held[i].fd);
	_exit(0);
}

/* Every descriptor from 3 up but A and B closed (close_range, 5.9; else one by one). */
static void close_but(int a, int b)
{
	unsigned int lo = (unsigned int)(a < b ? a : b), hi = (unsigned int)(a < b ? b : a), fd;

	if (!syscall(SYS_close_range, 3U, lo - 1, 0U) && !syscall(SYS_close_range, lo + 1, hi - 1, 0U) &&
	    !syscall(SYS_close_range, hi + 1, ~0U, 0U))
		return;
	for (fd = 3; fd < 65536; fd++)
		if (fd != lo && fd != hi)
			close((int)fd);
}

int gate__start(struct gate *g, pid_t command)
{
	char path[40], ns[64];
	pid_t memtrail = getpid();
	int sv[2], fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)command);
	n = readlink(path, ns, sizeof(ns) - 1);
	if (n <= 0)
		return -errno;
	ns[n] = '\0';
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return -errno;
	g->keeper = fork();
	if (g->keeper < 0) {
		int err = -errno;

		close(sv[0]);
		close(sv[1]);
		return err;
	}
	if (!g->keeper) {
		struct sigaction ign = { .sa_handler = SIG_IGN };

		/* Ctrl-Z and Ctrl-C reach the terminal's whole group: not the gate */
		sigaction(SIGTSTP, &ign, NULL);
		sigaction(SIGTTIN, &ign, NULL);
		sigaction(SIGTTOU, &ign, NULL);
		sigaction(SIGINT, &ign, NULL);
		sigaction(SIGQUIT, &ign, NULL);
		sigaction(SIGHUP, &ign, NULL);
		sigaction(SIGPIPE, &ign, NULL);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		prctl(PR_SET_NAME, "memtrail-gate");
		close(sv[0]);
		/* nothing of memtrail's (its BPF links) but the group, the socket and stderr */
		fd = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (fd >= 0) {
			dup2(fd, STDIN_FILENO);
			dup2(fd, STDOUT_FILENO);
		}
		close_but(g->fan, sv[1]);
		if (getppid() != memtrail)
			_exit(0);	/* memtrail died as it forked */
		keeper(g->fan, sv[1], memtrail, ns);
	}
	close(sv[1]);
	/* the keeper's alone: its end is the group's end */
	close(g->fan);
	g->fan = -1;
	g->sock = sv[0];
	return 0;
}

int gate__wake_fd(const struct gate *g)
{
	return g ? g->sock : -1;
}

void gate__serve(struct gate *g, gate_file_fn fn, void *ctx)
{
	if (!g || g->sock < 0)
		return;
	for (;;) {
		char ctl[CMSG_SPACE(sizeof(int))];
		struct gate_msg m;
		struct iovec iov = { &m, sizeof(m) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
				     .msg_controllen = sizeof(ctl) };
		struct cmsghdr *c;
		ssize_t n = recvmsg(g->sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		int fd = -1;

		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0) {
			/* the keeper is gone (killed): the group with it, nothing waits */
			close(g->sock);
			g->sock = -1;
			return;
		}
		if (n != sizeof(m))
			return;
		for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
				memcpy(&fd, CMSG_DATA(c), sizeof(fd));
		g->opens = m.opens;
		g->refused = m.refused;
		g->timed_out = m.timed_out;
		if (fd >= 0) {
			if (fn)
				fn(ctx, fd, (pid_t)m.pid);
			close(fd);
			g->waited++;
		}
		m.opens = m.refused = m.timed_out = 0;
		send(g->sock, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL);
	}
}

void gate__counts(struct gate *g, uint64_t *waited, uint64_t *opens, uint64_t *refused)
{
	*waited = *opens = *refused = 0;
	if (!g)
		return;
	*waited = g->waited;
	*opens = g->opens;
	*refused = g->refused;
}

void gate__close(struct gate *g)
{
	int i;

	if (!g)
		return;
	if (g->sock >= 0)
		close(g->sock);	/* the keeper lets everything go and ends */
	if (g->fan >= 0)
		close(g->fan);
	if (g->keeper > 0) {
		/* a keeper someone stopped: memtrail's own child, killed */
		for (i = 0; i < 100 && waitpid(g->keeper, NULL, WNOHANG) == 0; i++)
			poll(NULL, 0, 2);
		if (i == 100) {
			kill(g->keeper, SIGKILL);
			waitpid(g->keeper, NULL, 0);
		}
	}
	free(g);
}
