/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Accelerator runtimes found with zero instrumentation: the files each
 * target maps (read through its own root, so a library inside a container
 * image is found whatever its name), probed once per file identity, and
 * looked at again when the target's dynamic linker says its libraries
 * changed. Kernel-launch probes, which fire often, are per process and only
 * until the launch that starts its "execute" phase.
 */
#ifndef MEMTRAIL_DEVICES_H
#define MEMTRAIL_DEVICES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "tracer.h"

struct devices;

/*
 * 0 or -ENOMEM. The dynamic linker memtrail itself uses is probed at once.
 * LOADER_ONLY (--no-devices): no runtime is probed, only the dynamic
 * linker's hook, which tells of libraries loaded (holds, sites' names).
 */
int devices__open(struct devices **out, struct tracer *t, bool loader_only);
void devices__destroy(struct devices *d);

/*
 * A process told of (devices__on_late) mapped a runtime before memtrail
 * probed it: it was new to memtrail when mapped (not known before, not
 * opened through the gate). Its calls into FILE until now were not seen.
 */
typedef void (*devices_late_fn)(void *ctx, uint32_t pid, const char *file);
void devices__on_late(struct devices *d, devices_late_fn fn, void *ctx);
/* The processes that ran before memtrail are scanned: from now on a runtime probed late is told. */
void devices__attached(struct devices *d);
/*
 * FD, an ELF file memtrail's command (its process PID) is opening (gate.h):
 * probed now if it is a runtime new to memtrail, before the command can map
 * it. With USER (PID is a target), PID keeps the runtime probed from now
 * until it exits or execs, as if it had mapped it.
 */
void devices__gate_file(struct devices *d, int fd, uint32_t pid, bool user);
/*
 * Whether the file the kernel's hook keys as (KDEV: the kernel's s_dev, INO)
 * has had its probes since AT_NS (CLOCK_MONOTONIC: when a process mapped it).
 */
bool devices__probed(const struct devices *d, uint64_t kdev, uint64_t ino, uint64_t at_ns);
/* Probe the runtimes a command will load at start (its DT_NEEDED closure). */
void devices__prepare_command(struct devices *d, const char *path);
/* Look at PID's mappings at NOW_MS + DELAY_MS (the earliest request wins). */
void devices__schedule(struct devices *d, uint32_t pid, uint64_t now_ms, uint64_t delay_ms);
/* Scan what is due. */
void devices__tick(struct devices *d, uint64_t now_ms);
/* Scan PID's mappings now: 0, or -ENOENT when it is gone (or exited, not yet reaped). */
int devices__scan(struct devices *d, uint32_t pid);
/* PID started a phase: its launch probes go at "execute", return at "model_load". */
void devices__on_phase(struct devices *d, uint32_t pid, const char *name);
/*
 * PID ended: its probes go, and with PURGE the kernel's records of its device
 * memory. A runtime file no known process maps any more has its probes
 * removed and is closed; the next process that maps it probes it again.
 */
void devices__forget(struct devices *d, uint32_t pid, bool purge);
/*
 * PID exec'd: the files of its old image are not its any more (released if
 * no one's); its new mappings are scanned at the next tick (after the events
 * at hand: an exit among them spares a scan of a process already gone) and
 * again RESCAN_MS later, for what its dynamic linker loads.
 */
void devices__exec(struct devices *d, uint32_t pid, uint64_t now_ms, uint64_t rescan_ms);
/* CHILD was forked by PARENT: it maps PARENT's files (no /proc read). */
void devices__fork(struct devices *d, uint32_t parent, uint32_t child);
/* Files probed so far. */
size_t devices__files(const struct devices *d);

/*
 * A user address of PID as "function+0xoff (file)", "file+0xoff" or
 * "[anon] 0x...": from its maps, or those of its last scan once it exited,
 * or else from FF (may be NULL), the file the kernel had mapped there. NULL
 * when it lies in no executable mapping found so: not a frame to show.
 */
json_t *devices__site(struct devices *d, uint32_t pid, uint64_t addr,
		      const struct memtrail_frame_file *ff);

#endif
