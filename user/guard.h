/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The guardian: a process memtrail forks before its programs attach, that
 * waits for memtrail to end however it ends (its pipe reads end of file,
 * SIGKILL included) and then continues every process memtrail held and had
 * not let go (the BPF map held_tgids), so that a killed memtrail never
 * leaves a node's processes stopped.
 */
#ifndef MEMTRAIL_GUARD_H
#define MEMTRAIL_GUARD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct guard {
	pid_t pid;	/* 0: none */
	int fd;		/* its pipe's write end; -1: none */
};

/* Start the guardian of HELD_FD (a map of tgid keys). 0, or -errno. */
int guard__start(struct guard *g, int held_fd);
/*
 * Whether another memtrail (a node's watch beside a user's record) holds
 * TGID too, in its own held_tgids map found among the node's BPF maps: then
 * that one continues it when its own probing is done. Each deletes its own
 * entry (OWN_FD's) before asking, so the last to finish always continues
 * it; a stop signal is not counted, and the first SIGCONT would let the
 * process run unprobed by the other.
 */
bool guard__held_elsewhere(int own_fd, uint32_t tgid);
/* memtrail ends its holds itself: the guardian ends (and is reaped). */
void guard__stop(struct guard *g);

#endif
