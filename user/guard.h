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
/* held_tgids values: the BPF side holds with 1; memtrail marks 2 as it lets go */
#define GUARD_HOLDING 1
#define GUARD_RELEASING 2

/*
 * memtrail (or its guardian) is done with TGID, held in map OWN_FD: its
 * entry marked releasing, then whether another memtrail (a node's watch
 * beside a user's record) still holds it in its own held_tgids map, found
 * among the node's BPF maps. False: continue it now (SIGCONT), then delete
 * the entry. True: leave it to that one, which continues it when its own
 * probing is done (a stop signal is not counted: the first SIGCONT would
 * let the process run unprobed by the other). Each marks its entry before
 * asking, so the last to finish continues it, and the entry stays until the
 * process is continued or left to another: a memtrail that dies meanwhile
 * leaves it to its guardian.
 */
bool guard__let_go(int own_fd, uint32_t tgid);
/* memtrail ends its holds itself: the guardian ends (and is reaped). */
void guard__stop(struct guard *g);

#endif
