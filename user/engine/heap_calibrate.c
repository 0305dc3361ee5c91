// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * What the heap probes cost on this machine, measured once at start: a
 * child of memtrail's own times malloc/free pairs with and without the
 * probes on it, and how long removing them takes.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "heap_int.h"
#include "log.h"
#include "proc.h"
#include "reaper.h"

/*
 * The calibration child: for each 'r' read from IN, time CALIBRATE_PAIRS
 * malloc/free pairs and write the nanoseconds to OUT; for an 's', run
 * pairs until the next byte comes, then write their count; exit at end of
 * file.
 */
static void __attribute__((noreturn)) calibrate_child(int in, int out)
{
	void *(*volatile alloc)(size_t) = malloc;
	void (*volatile release)(void *) = free;
	struct pollfd pfd = { .fd = in, .events = POLLIN };
	uint64_t t0, n;
	char c;
	int i;

	while (read(in, &c, 1) == 1) {
		t0 = clock__mono_ns();
		for (n = 0; c == 'r' ? n < CALIBRATE_PAIRS : !poll(&pfd, 1, 0); ) {
			for (i = 0; i < 64; i++, n++)
				release(alloc(64));
		}
		n = c == 'r' ? clock__mono_ns() - t0 : n;
		if (c == 's' && read(in, &c, 1) != 1)
			break;
		if (write(out, &n, sizeof(n)) != sizeof(n))
			break;
	}
	_exit(0);
}

/* One timed run of the child's; 0 when it is gone. */
static uint64_t calibrate_run(int cmd, int result)
{
	uint64_t ns = 0;

	if (write(cmd, "r", 1) != 1 || read(result, &ns, sizeof(ns)) != sizeof(ns))
		return 0;
	return ns;
}

/*
 * What closing a window costs a target that does nothing but allocate: the
 * child spins on malloc/free while its probes are removed, and the hits it
 * takes from the start of the removal to its end are the cost, in ns of
 * probe time. The removal's own duration goes to h->detach_ns.
 */
static int calibrate_close(struct heap *h, struct heap_link *l, uint32_t child, int cmd,
			   int result)
{
	struct timespec spin = { 0, 20 * 1000000 };
	uint64_t hits, t0, n;

	if (write(cmd, "s", 1) != 1)
		return -EIO;
	nanosleep(&spin, NULL);
	hits = tracer__heap_hits(h->tracer, child);
	t0 = clock__mono_ns();
	heap_link_detach(l);
	/* the reaper's threads close the links: the probes are gone once they are done */
	reaper__drain();
	h->detach_ns = clock__mono_ns() - t0;
	h->close_ns = (double)(tracer__heap_hits(h->tracer, child) - hits) * h->cost_ns;
	if (write(cmd, "x", 1) != 1 || read(result, &n, sizeof(n)) != sizeof(n))
		return -EIO;
	return 0;
}

/* The first allocator PID maps, as an index into h->files; -1 if none. */
static ssize_t calibrate_file(struct heap *h, uint32_t pid)
{
	char name[64], line[4096 + 128];
	struct proc_map_line m;
	ssize_t idx = -1;
	FILE *f;

	snprintf(name, sizeof(name), "/proc/%u/maps", pid);
	f = fopen(name, "re");
	if (!f)
		return -1;
	while (idx < 0 && fgets(line, sizeof(line), f))
		if (proc__parse_map(line, &m) && m.exec && m.path)
			idx = heap_file_get(h, m.dev, m.ino, pid, &m, NULL, -1);
	fclose(f);
	return idx;
}

/*
 * The cost of one probe hit, as the budget counts it: a child of memtrail's
 * becomes a target for a moment and times malloc/free pairs of the
 * allocator memtrail itself uses through the same probes and programs a
 * target gets, against the same pairs unprobed. The probes' cost depends
 * on the probed instructions (some are emulated, others stepped out of
 * line), so the allocator's own functions are timed, not stand-ins.
 */
int heap_calibrate(struct heap *h)
{
	int cmd[2], result[2], err;
	struct heap_link l = { .fd_entry = -1, .fd_ret = -1,
			       .set = { .fd = { -1, -1 } } };
	uint64_t bare, probed, hits;
	ssize_t idx;
	pid_t child;

	if (pipe2(cmd, O_CLOEXEC))
		return -errno;
	if (pipe2(result, O_CLOEXEC)) {
		err = -errno;
		close(cmd[0]);
		close(cmd[1]);
		return err;
	}
	child = fork();
	if (!child) {
		close(cmd[1]);
		close(result[0]);
		calibrate_child(cmd[0], result[1]);
	}
	close(cmd[0]);
	close(result[1]);
	if (child < 0) {
		err = -errno;
		goto out;
	}
	idx = calibrate_file(h, child);
	if (idx < 0) {
		err = -ENOENT;	/* no allocator of the malloc family in memtrail */
		goto out;
	}
	l.file = idx;
	err = tracer__calibration_target(h->tracer, child, true);
	if (err)
		goto out;
	bare = calibrate_run(cmd[1], result[0]);
	err = heap_link_attach(h, child, &l);
	if (err)
		goto untarget;
	probed = calibrate_run(cmd[1], result[0]);
	hits = tracer__heap_hits(h->tracer, child);
	if (!bare || !probed || hits < CALIBRATE_PAIRS) {
		err = -EIO;
		goto untarget;
	}
	h->cost_ns = probed > bare ? (double)(probed - bare) / hits : 1.0;
	err = calibrate_close(h, &l, child, cmd[1], result[0]);
untarget:
	heap_link_detach(&l);
	tracer__calibration_target(h->tracer, child, false);
out:
	close(cmd[1]);	/* the child exits at end of file */
	close(result[0]);
	if (child > 0)
		waitpid(child, NULL, 0);
	return err;
}
