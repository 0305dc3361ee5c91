/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
#ifndef MEMTRAIL_MAPS_READER_H
#define MEMTRAIL_MAPS_READER_H

#include <stdint.h>
#include <stdio.h>

/*
 * Where BPF cannot tell a process's code mappings (before the task_vma
 * iterator, 6.7), sites name its stacks from /proc/PID/maps, which must be
 * read while it lives. The event loop reads them when told (an exec, the
 * dynamic linker's hook), but it can be busy for a second or more (naming
 * a large library's lines the first time: 1.8 s for one short process
 * under emulation), and a process that lives less than that was gone
 * before its maps were read: every frame [unknown]. The maps reader reads
 * them on a thread of its own as BPF asks (the maps_wanted ring buffer),
 * keeps their code lines, and hands them to the loop when it is free.
 */
struct maps_reader;

/* Reads the maps of pids the ring buffer FD names; NULL where it cannot start (said at -v). */
struct maps_reader *maps_reader__start(int fd);
/* Stops the thread and frees what was not taken. */
void maps_reader__stop(struct maps_reader *r);
/*
 * Hands each read taken at UNTIL_NS or before (CLOCK_MONOTONIC, as BPF's
 * event times) to FN, oldest first: the events before it are the loop's to
 * act on first (an exec). MAPS is a stream of its code lines, for FN to
 * close; FILES, the files of those no read before had (each opened once a
 * session, through the process's map_files: a file new to the loop is
 * named by it when the process is gone). A check of one counter where
 * there is none.
 */
struct maps_file {
	uint64_t dev;		/* as maps shows it: makedev(major, minor) */
	uint64_t ino;
	int fd;			/* the file as mapped, open until FN returns */
};
typedef void (*maps_read_fn)(void *ctx, uint32_t pid, FILE *maps, uint64_t read_ns,
			     const struct maps_file *files, size_t n_files);
void maps_reader__take(struct maps_reader *r, uint64_t until_ns, maps_read_fn fn, void *ctx);
/* PID's reads taken at UNTIL_NS or before: before a read of its maps of the loop's own. */
void maps_reader__take_pid(struct maps_reader *r, uint32_t pid, uint64_t until_ns,
			   maps_read_fn fn, void *ctx);

#endif
