/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Helpers for test workloads. They never use stdio or malloc before their
 * final report, so the only mappings they make are the ones they count.
 */
#ifndef WORKLOAD_COMMON_H
#define WORKLOAD_COMMON_H

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* the running kernel's page size: 4 KiB, or 16 or 64 KiB on some arm64 kernels */
#define PAGE ((size_t)sysconf(_SC_PAGESIZE))
#define MiB (1024UL * 1024)

/* A runtime call that must succeed (CUresult, NRT_STATUS: 0): else its text and code, exit 1. */
#define MUST(call) do {							\
	int rc_ = (int)(call);						\
	if (rc_) {							\
		dprintf(2, "%s: %s: %d\n", workload_name(), #call, rc_);	\
		exit(1);						\
	}								\
} while (0)

/* A field of /proc/self/status in bytes (the file gives kB), or -1. */
static inline long status_bytes(const char *field)
{
	char buf[8192], *p;
	size_t flen = strlen(field);
	ssize_t n;
	int fd = open("/proc/self/status", O_RDONLY);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	for (p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, field, flen) && p[flen] == ':')
			return strtol(p + flen + 1, NULL, 10) * 1024;
	return -1;
}

/* Print one line on stdout without stdio's buffer (whose malloc would map memory). */
static inline void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void report(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0 && write(1, buf, (size_t)n) != n)
		_exit(9);
}

/* Block until a byte arrives on stdin, when asked to: lets a tracer attach first. */
/* The program's own name, for messages. */
static inline const char *workload_name(void)
{
	extern char *program_invocation_short_name;

	return program_invocation_short_name;
}

static inline void wait_go(int argc, char **argv)
{
	char c;

	if (argc > 1 && !strcmp(argv[1], "--wait")) {
		if (read(0, &c, 1) != 1)
			_exit(2);
	}
}

static inline char *map_touch(size_t size)
{
	char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	size_t i;

	if (p == MAP_FAILED)
		_exit(3);
	for (i = 0; i < size; i += PAGE)
		p[i] = 1;
	return p;
}

/* Mappings made by a workload's steps, newest last. */
struct mappings {
	char *addr[64];
	size_t size[64];
	size_t n;
};

/* One step in MiB: positive maps and touches, negative unmaps the newest of that size. */
static inline void step(struct mappings *m, long mib)
{
	size_t size = (size_t)(mib < 0 ? -mib : mib) * MiB, j;

	if (mib > 0) {
		if (m->n == 64)
			_exit(4);
		m->addr[m->n] = map_touch(size);
		m->size[m->n++] = size;
		return;
	}
	for (j = m->n; j-- > 0;)
		if (m->size[j] == size)
			break;
	if (j == (size_t)-1)
		_exit(4);
	munmap(m->addr[j], size);
	m->addr[j] = m->addr[--m->n];
	m->size[j] = m->size[m->n];
}

#endif
