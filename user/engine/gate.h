/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The gate: memtrail's own command (record -- CMD) waits at each open of an
 * ELF file until memtrail has looked at it, so that a runtime the command
 * writes and then maps at once is probed before its first call. Nothing
 * else waits: the command runs in a mount namespace of its own (a copy of
 * memtrail's; shared mounts still propagate both ways), and the fanotify
 * permission marks are on that namespace's mounts only (another process
 * opening through them, by /proc/PID/root, passes at once). The group is
 * held by a keeper process (memtrail-gate) that lets each open go when
 * memtrail has looked at it or after a second, whatever memtrail does
 * (stopped, frozen, busy), and it is the kernel that lets every waiting
 * open go when the keeper's descriptor closes, however it and memtrail end
 * (SIGKILL, OOM kill, cgroup.kill): nothing is left waiting on a memtrail
 * that is gone, and no signal is ever sent.
 *
 * The command's processes that make mount namespaces of their own
 * (unshare -m, a container runtime) leave the gate: their mounts are new
 * copies without marks. What they map is probed as it is mapped, late
 * calls counted (devices.h).
 */
#ifndef MEMTRAIL_GATE_H
#define MEMTRAIL_GATE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct gate;

/*
 * The fanotify group, made before the command is forked (its child marks
 * its namespace with it). 0, or -errno: -EINVAL or -EPERM where the kernel
 * has no permission events (CONFIG_FANOTIFY_ACCESS_PERMISSIONS) or memtrail
 * lacks CAP_SYS_ADMIN; the command then runs without a gate.
 */
int gate__open(struct gate **out);
/*
 * In the forked child, before exec: a mount namespace of its own, each of
 * its mounts marked. Only async-signal-safe calls (memtrail may have
 * threads). 0, or -errno; *MARKED and *FAILED count the mounts.
 */
int gate__enter(struct gate *g, int *marked, int *failed);
/*
 * The gate's keeper starts (memtrail-gate, a process of its own), after
 * COMMAND entered its namespace: opens of the command's ELF files wait for
 * gate__serve, at most a second. 0, or -errno.
 */
int gate__start(struct gate *g, pid_t command);
/* A descriptor that is readable while opens wait for gate__serve, to poll beside others. */
int gate__wake_fd(const struct gate *g);
/* Look at an ELF file the command's process PID is opening: FD is it, open read-only. */
typedef void (*gate_file_fn)(void *ctx, int fd, pid_t pid);
/* Each waiting open passed to FN, then let go. */
void gate__serve(struct gate *g, gate_file_fn fn, void *ctx);
/*
 * Opens that waited for FN so far, of how many, and how many the kernel
 * refused (the open failed) as memtrail had no descriptor left to read them.
 */
void gate__counts(struct gate *g, uint64_t *waited, uint64_t *opens, uint64_t *refused);
/* Every waiting open let go and no more held; NULL is fine. */
void gate__close(struct gate *g);

#endif
