// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <bpf/bpf.h>

#include "guard.h"

/* Whether another memtrail's held_tgids still holds TGID (value GUARD_HOLDING). */
static bool held_elsewhere(int own_fd, uint32_t tgid)
{
	struct bpf_map_info own = { 0 }, info;
	uint32_t id = 0, len = sizeof(own), v;
	bool held = false;
	int fd;

	if (bpf_obj_get_info_by_fd(own_fd, &own, &len))
		return false;
	while (!held && !bpf_map_get_next_id(id, &id)) {
		if (id == own.id)
			continue;
		fd = bpf_map_get_fd_by_id(id);
		if (fd < 0)
			continue;	/* gone meanwhile */
		memset(&info, 0, sizeof(info));
		len = sizeof(info);
		held = !bpf_obj_get_info_by_fd(fd, &info, &len) &&
		       !strcmp(info.name, "held_tgids") && info.key_size == sizeof(tgid) &&
		       info.value_size == sizeof(v) && !bpf_map_lookup_elem(fd, &tgid, &v) &&
		       v == GUARD_HOLDING;
		close(fd);
	}
	return held;
}

bool guard__let_go(int own_fd, uint32_t tgid)
{
	uint32_t releasing = GUARD_RELEASING;

	bpf_map_update_elem(own_fd, &tgid, &releasing, BPF_EXIST);
	return held_elsewhere(own_fd, tgid);
}

/* Descriptors FROM..TO closed (close_range where the kernel has it, 5.9). */
static void close_fds(unsigned int from, unsigned int to)
{
	unsigned int fd;

	if (from > to)
		return;
	if (!syscall(SYS_close_range, from, to, 0))
		return;
	for (fd = from; fd <= to; fd++)
		close(fd);
}

/* Whether PID is stopped (state T): a PID reused since by a running process is left alone. */
static int stopped(uint32_t pid)
{
	char path[40], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] == 'T';
}

/* The guardian itself: only system calls (memtrail may have had threads at the fork). */
static void guardian(int held_fd, int rd)
{
	int lo = held_fd < rd ? held_fd : rd, hi = held_fd < rd ? rd : held_fd;
	uint32_t key, *prev = NULL;
	struct rlimit rl;
	ssize_t n;
	char c;

	/* Ctrl-C and a service stop are memtrail's to act on, not its guardian's */
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_NAME, "memtrail-guard", 0, 0, 0);
	/*
	 * none of memtrail's links or files (they go when memtrail goes), nor
	 * its terminal or pipes (a reader of memtrail's output sees its end)
	 */
	if (getrlimit(RLIMIT_NOFILE, &rl))
		rl.rlim_cur = 1024;
	close_fds(0, lo - 1);
	close_fds(lo + 1, hi - 1);
	close_fds(hi + 1, rl.rlim_cur < (1U << 30) ? (unsigned int)rl.rlim_cur : ~0U);
	/* memtrail never writes: end of file is its end, however it came */
	do
		n = read(rd, &c, 1);
	while (n > 0 || (n < 0 && errno == EINTR));
	while (!bpf_map_get_next_key(held_fd, prev, &key)) {
		if (stopped(key) && !guard__let_go(held_fd, key))
			kill((pid_t)key, SIGCONT);
		prev = &key;
	}
	_exit(0);
}

int guard__start(struct guard *g, int held_fd)
{
	int p[2], err;
	pid_t pid;

	g->pid = 0;
	g->fd = -1;
	if (pipe2(p, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		err = -errno;
		close(p[0]);
		close(p[1]);
		return err;
	}
	if (pid == 0) {
		close(p[1]);
		guardian(held_fd, p[0]);
	}
	close(p[0]);
	g->pid = pid;
	g->fd = p[1];
	return 0;
}

void guard__stop(struct guard *g)
{
	if (g->fd >= 0)
		close(g->fd);
	if (g->pid > 0)
		waitpid(g->pid, NULL, 0);
	g->pid = 0;
	g->fd = -1;
}
