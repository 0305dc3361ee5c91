/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Function symbols of an ELF file through libelf: .dynsym and .symtab (a
 * runtime linked statically into an executable has only local .symtab
 * names), as file offsets, which is what a uprobe attaches to.
 */
#ifndef MEMTRAIL_ELFSYM_H
#define MEMTRAIL_ELFSYM_H

#include <stddef.h>
#include <stdint.h>

/*
 * Call FN for every defined function symbol (name without a version suffix,
 * file offset of its first instruction); a non-zero return stops the walk.
 * 0, or -errno when the file is not a readable ELF file.
 */
int elfsym__each(const char *path, int (*fn)(void *ctx, const char *name, uint64_t off),
		 void *ctx);

/*
 * The function containing file offset OFF: its name into NAME and OFF's
 * distance from its start into DELTA. 0, or -ENOENT when none does.
 */
int elfsym__at(const char *path, uint64_t off, char *name, size_t len, uint64_t *delta);

/* The program interpreter (PT_INTERP) of an executable into BUF; 0 or -errno. */
int elfsym__interp(const char *path, char *buf, size_t len);

/*
 * Call FN with the path of each library a dynamic executable loads at start
 * (its DT_NEEDED closure, as its program interpreter's --list prints it).
 * 0, or -errno when it has no interpreter or it cannot run.
 */
int elfsym__needed(const char *path, void (*fn)(void *ctx, const char *lib), void *ctx);

#endif
