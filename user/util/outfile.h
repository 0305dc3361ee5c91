/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Output files written whole or not at all, mode 0600 whatever the umask,
 * never through a link or file someone else put at their name or at a
 * temporary name (outfile.c says how).
 */
#ifndef MEMTRAIL_OUTFILE_H
#define MEMTRAIL_OUTFILE_H

#include <signal.h>
#include <stddef.h>

/*
 * FILL writes the content to FD, a new file in PATH's directory, and
 * returns 0 or -errno; then fsync and rename onto PATH, replacing what is
 * there (a link itself, not what it points to). On any failure no file is
 * left and PATH is as it was. FD stays the caller's: FILL may dup() it for
 * stdio or zlib. A temporary file left by a memtrail killed while writing
 * PATH is removed. 0 or -errno.
 */
int outfile__write(const char *path, int (*fill)(int fd, void *ctx), void *ctx);
/*
 * As outfile__write, but never replacing anything: the file goes to PATH,
 * or where PATH is taken to PATH with "-2", "-3", ... before its extension;
 * the name it got is written back to PATH (SIZE bytes).
 */
int outfile__write_new(char *path, size_t size, int (*fill)(int fd, void *ctx), void *ctx);
/*
 * Keep descriptors from now on for the files written later, so that one can
 * be written when everything else took every descriptor (out_open gives
 * them back, and they are taken again after each file).
 */
void outfile__reserve(void);
/* A file could be written at PATH (its directory takes a new one); nothing is left. */
int outfile__probe(const char *path);
/*
 * Write all of BUF to FD, again after EINTR; 0 or -errno: -ECANCELED once the
 * flag outfile__set_cancel() named is set (the file is then not written).
 */
int outfile__put(int fd, const void *buf, size_t len);
/* A flag a signal handler sets to give up files being written (a second Ctrl-C); NULL: none. */
void outfile__set_cancel(volatile sig_atomic_t *flag);

#endif
