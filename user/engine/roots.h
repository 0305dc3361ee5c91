/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Root directories processes run in (the host's, a container's, a chroot's)
 * and the accelerator runtimes their loader caches name: files that are
 * probed before any process maps them, so that their first calls are seen
 * without stopping anyone (uprobes are inserted as a probed file is mapped).
 */
#ifndef MEMTRAIL_ROOTS_H
#define MEMTRAIL_ROOTS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Whether a file's own NAME is that of a runtime's library (libcuda.so.1, libnrt-x.so). */
bool roots__runtime_name(const char *name);
/* The identity of PID's root directory (0: memtrail's own): 0, or -errno. */
int roots__id(uint32_t pid, dev_t *dev, ino_t *ino);
/*
 * A runtime the loader cache names: FD is it, opened inside the root (its
 * symbolic links resolved there, never outside it), PATH its name there.
 */
typedef void (*roots_file_fn)(void *ctx, int fd, const char *path);
/*
 * Each runtime (libcuda.so*, libcudart.so*, libnrt.so*) that the loader
 * cache of PID's root names (0: memtrail's own root), read with the system's
 * ldconfig: how many, or -errno when the cache cannot be read.
 */
int roots__each_runtime(uint32_t pid, roots_file_fn fn, void *ctx);

#endif
