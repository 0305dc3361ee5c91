/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
#ifndef MEMTRAIL_REAPER_H
#define MEMTRAIL_REAPER_H

struct bpf_link;

/*
 * Closing a uprobe link waits out a grace period of the kernel's (tens of
 * milliseconds each on 6.x). The reaper's threads do it, so that the event
 * loop, and a process held for it, never wait on one; several at once share
 * their grace periods (up to 32 threads: at the end of `record --heap --all`
 * under a storm, hundreds of links wait to close). Without threads
 * (pthread_create failing) it is done at once, as before.
 */
void reaper__close(int fd);
void reaper__destroy_link(struct bpf_link *link);
/* Until everything handed over is closed (before exit, or a count of what is attached). */
void reaper__drain(void);

#endif
