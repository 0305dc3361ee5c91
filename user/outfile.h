/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Output files written whole or not at all. */
#ifndef MEMTRAIL_OUTFILE_H
#define MEMTRAIL_OUTFILE_H

#include <sys/types.h>

/*
 * FILL writes the content to FD, a temporary file beside PATH made with
 * MODE, and returns 0 or -errno; then fsync and rename onto PATH. On any
 * failure the temporary file is removed and PATH left as it was. FD stays
 * the caller's: FILL may dup() it for stdio or zlib. 0 or -errno.
 */
int outfile__write(const char *path, mode_t mode, int (*fill)(int fd, void *ctx), void *ctx);
/* Write all of BUF to FD, again after EINTR; 0 or -errno. */
int outfile__put(int fd, const void *buf, size_t len);

#endif
