// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "elfsym.h"

extern char **environ;

static Elf *open_elf(const char *path, int *fd)
{
	Elf *e;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return NULL;
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return NULL;
	e = elf_begin(*fd, ELF_C_READ_MMAP, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF) {
		if (e)
			elf_end(e);
		close(*fd);
		errno = ENOEXEC;
		return NULL;
	}
	return e;
}

/* A symbol's address as a file offset, through the section that holds it. */
static bool file_offset(Elf *e, const GElf_Sym *sym, uint64_t *off)
{
	Elf_Scn *scn = elf_getscn(e, sym->st_shndx);
	GElf_Shdr sh;

	if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
		return false;
	if (sym->st_value < sh.sh_addr || sym->st_value >= sh.sh_addr + sh.sh_size)
		return false;
	*off = sym->st_value - sh.sh_addr + sh.sh_offset;
	return true;
}

typedef int (*sym_fn)(void *ctx, Elf *e, const char *name, const GElf_Sym *sym, uint64_t off);

/* Every defined function symbol of .dynsym, then .symtab. */
static int walk(const char *path, sym_fn fn, void *ctx)
{
	int types[] = { SHT_DYNSYM, SHT_SYMTAB }, fd, stop = 0;
	Elf_Scn *scn;
	size_t t;
	Elf *e;

	e = open_elf(path, &fd);
	if (!e)
		return -errno;
	for (t = 0; t < 2 && !stop; t++) {
		for (scn = NULL; (scn = elf_nextscn(e, scn)) && !stop;) {
			GElf_Shdr sh;
			Elf_Data *data;
			size_t i, n;

			if (!gelf_getshdr(scn, &sh) || sh.sh_type != (unsigned)types[t] ||
			    !sh.sh_entsize)
				continue;
			data = elf_getdata(scn, NULL);
			if (!data)
				continue;
			n = sh.sh_size / sh.sh_entsize;
			for (i = 0; i < n && !stop; i++) {
				GElf_Sym sym;
				const char *name;
				uint64_t off;
				int type;

				if (!gelf_getsym(data, i, &sym) || sym.st_shndx == SHN_UNDEF ||
				    sym.st_shndx >= SHN_LORESERVE)
					continue;
				type = GELF_ST_TYPE(sym.st_info);
				if (type != STT_FUNC && type != STT_GNU_IFUNC)
					continue;
				name = elf_strptr(e, sh.sh_link, sym.st_name);
				if (!name || !*name || !file_offset(e, &sym, &off))
					continue;
				stop = fn(ctx, e, name, &sym, off);
			}
		}
	}
	elf_end(e);
	close(fd);
	return 0;
}

struct each_ctx {
	int (*fn)(void *ctx, const char *name, uint64_t off);
	void *ctx;
};

static int each_one(void *ctx, Elf *e, const char *name, const GElf_Sym *sym, uint64_t off)
{
	struct each_ctx *c = ctx;
	const char *at = strchr(name, '@');
	char bare[256];

	(void)e;
	(void)sym;
	if (!at)
		return c->fn(c->ctx, name, off);
	/* "cudaMalloc@@libcudart.so.13" in a .symtab: the bare name */
	if ((size_t)(at - name) >= sizeof(bare))
		return 0;
	memcpy(bare, name, at - name);
	bare[at - name] = '\0';
	return c->fn(c->ctx, bare, off);
}

int elfsym__each(const char *path, int (*fn)(void *ctx, const char *name, uint64_t off),
		 void *ctx)
{
	struct each_ctx c = { .fn = fn, .ctx = ctx };

	return walk(path, each_one, &c);
}

struct at_ctx {
	uint64_t off;
	uint64_t best;
	bool found;
	char *name;
	size_t len;
};

static int at_one(void *ctx, Elf *e, const char *name, const GElf_Sym *sym, uint64_t off)
{
	struct at_ctx *c = ctx;
	uint64_t size = sym->st_size ? sym->st_size : 1;

	(void)e;
	if (c->off < off || c->off >= off + size)
		return 0;
	/* of aliases, the first seen (.dynsym's exported name) */
	if (c->found && off <= c->best)
		return 0;
	c->found = true;
	c->best = off;
	snprintf(c->name, c->len, "%s", name);
	return 0;
}

int elfsym__at(const char *path, uint64_t off, char *name, size_t len, uint64_t *delta)
{
	struct at_ctx c = { .off = off, .name = name, .len = len };
	int err = walk(path, at_one, &c);

	if (err)
		return err;
	if (!c.found)
		return -ENOENT;
	*delta = off - c.best;
	return 0;
}

int elfsym__interp(const char *path, char *buf, size_t len)
{
	size_t i, n;
	int fd, err = -ENOENT;
	Elf *e = open_elf(path, &fd);

	if (!e)
		return -errno;
	if (elf_getphdrnum(e, &n))
		n = 0;
	for (i = 0; i < n; i++) {
		GElf_Phdr ph;
		char *raw;
		size_t rlen;

		if (!gelf_getphdr(e, i, &ph) || ph.p_type != PT_INTERP)
			continue;
		raw = elf_rawfile(e, &rlen);
		if (!raw || ph.p_offset >= rlen || ph.p_filesz > rlen - ph.p_offset ||
		    !ph.p_filesz || ph.p_filesz >= len)
			break;
		memcpy(buf, raw + ph.p_offset, ph.p_filesz);
		buf[ph.p_filesz] = '\0';
		err = 0;
		break;
	}
	elf_end(e);
	close(fd);
	return err;
}

int elfsym__needed(const char *path, void (*fn)(void *ctx, const char *lib), void *ctx)
{
	char interp[4096], line[4096 + 64];
	char *argv[] = { interp, "--list", (char *)path, NULL };
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int fds[2], status;
	FILE *f;

	if (elfsym__interp(path, interp, sizeof(interp)) || pipe2(fds, O_CLOEXEC))
		return -ENOENT;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	if (posix_spawn(&pid, interp, &fa, NULL, argv, environ)) {
		posix_spawn_file_actions_destroy(&fa);
		close(fds[0]);
		close(fds[1]);
		return -errno;
	}
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	f = fdopen(fds[0], "r");
	while (f && fgets(line, sizeof(line), f)) {
		/* "\tlibcuda.so.1 => /usr/lib/libcuda.so.1 (0x...)" or "\t/lib64/ld-linux... (0x...)" */
		char *lib = strstr(line, "=> "), *end;

		lib = lib ? lib + 3 : line + strspn(line, " \t");
		if (*lib != '/')
			continue;
		end = strstr(lib, " (0x");
		if (end)
			*end = '\0';
		lib[strcspn(lib, "\n")] = '\0';
		fn(ctx, lib);
	}
	if (f)
		fclose(f);
	else
		close(fds[0]);
	waitpid(pid, &status, 0);
	return 0;
}
