// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Call sites named from a process's mappings, those of its last scan, or the file. */
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/sysmacros.h>

#include "demangle.h"
#include "devices_int.h"
#include "elfsym.h"
#include "proc.h"
#include "sanitize.h"

/* elfsym__at of file PATH, only when it is (DEV, INO): never another file's symbol. */
static int symbol_of(const char *path, dev_t dev, ino_t ino, uint64_t off, char *sym,
		     size_t len, uint64_t *delta)
{
	char opened[32];
	int fd = proc__open_file(path, dev, ino, opened, sizeof(opened)), err;

	if (fd < 0)
		return fd;
	err = elfsym__at(opened, off, sym, len, delta);
	close(fd);
	return err;
}

/* A call site in a file: "function+0xDELTA (path)", the function demangled. */
static json_t *named_site(const char *sym, uint64_t delta, const char *path)
{
	char name[1024], text[sizeof(name) + 4096 + 32];

	snprintf(text, sizeof(text), "%s+0x%" PRIx64 " (%s)", demangle__str(name, sizeof(name), sym),
		 delta, path);
	return sanitize__json(text);
}

/* A call site in a file without symbols there: "path+0xOFFSET". */
static json_t *file_site(const char *path, uint64_t off)
{
	char text[4096 + 32];

	snprintf(text, sizeof(text), "%s+0x%" PRIx64, path, off);
	return sanitize__json(text);
}

/* A site from the mappings of PID's last scan (it has exited), or NULL. */
static json_t *site_from_cache(struct devices *d, uint32_t pid, uint64_t addr)
{
	struct dev_proc *p = d ? devices_proc_get(d, pid, false) : NULL;
	char sym[1024];
	uint64_t delta, off;
	size_t i;

	for (i = 0; p && i < p->n_maps; i++) {
		const struct proc_map *m = &p->maps[i];

		if (addr < m->start || addr >= m->end)
			continue;
		off = addr - m->start + m->pgoff;
		/* the file as it was mapped, kept open; else by the name the kernel gave it */
		if (m->kept && !elfsym__at(d->files[m->file].sym_path, off, sym, sizeof(sym), &delta))
			return named_site(sym, delta, m->path);
		if (!symbol_of(m->path, m->dev, m->ino, off, sym, sizeof(sym), &delta))
			return named_site(sym, delta, m->path);
		return file_site(m->path, off);
	}
	return NULL;
}

/* A site from the file the kernel named at the event, or NULL. */
static json_t *site_from_file(struct devices *d, const struct memtrail_frame_file *ff)
{
	dev_t dev = ff ? makedev(ff->dev >> 20, ff->dev & 0xfffff) : 0;
	char sym[1024], name[MEMTRAIL_FRAME_NAME_LEN];
	uint64_t delta;
	size_t i;

	if (!ff || !ff->ino)
		return NULL;
	for (i = 0; d && i < d->n_files; i++) {
		const struct dev_file *f = &d->files[i];

		if (f->dev != dev || f->ino != ff->ino || !f->name)
			continue;
		/* kept open as a runtime's user mapped it; else its name, where memtrail reaches it */
		if ((f->sym_fd >= 0 &&
		     !elfsym__at(f->sym_path, (uint64_t)ff->off, sym, sizeof(sym), &delta)) ||
		    !symbol_of(f->name, dev, f->ino, (uint64_t)ff->off, sym, sizeof(sym), &delta))
			return named_site(sym, delta, f->name);
	}
	snprintf(name, sizeof(name), "%s", ff->name);
	return name[0] ? file_site(name, (uint64_t)ff->off) : NULL;
}

json_t *devices__site(struct devices *d, uint32_t pid, uint64_t addr,
		      const struct memtrail_frame_file *ff)
{
	char name[64], line[4096 + 128], full[32], sym[1024];
	struct proc_map_line m;
	bool found;
	uint64_t delta, off;
	json_t *cached;
	FILE *f;
	int fd;

	snprintf(name, sizeof(name), "/proc/%u/maps", pid);
	f = fopen(name, "re");
	if (!f) {
		/* it exited already: the code it mapped at the last scan, or as the kernel named it */
		cached = site_from_cache(d, pid, addr);
		return cached ? cached : site_from_file(d, ff);
	}
	while (fgets(line, sizeof(line), f)) {
		if (!proc__parse_map(line, &m) || addr < m.start || addr >= m.end)
			continue;
		fclose(f);
		if (!m.exec)
			return NULL;	/* data, not code: a frame pointer walk gone astray */
		if (!m.path)
			return json_sprintf("[anon] 0x%" PRIx64, addr);
		off = addr - m.start + m.pgoff;
		/* the file mapped; an exiting process has none: memtrail's, if the same file */
		fd = proc__open_mapped(pid, &m, full, sizeof(full));
		found = (fd >= 0 && !elfsym__at(full, off, sym, sizeof(sym), &delta)) ||
			(fd < 0 && !symbol_of(m.path, m.dev, m.ino, off, sym, sizeof(sym), &delta));
		if (fd >= 0)
			close(fd);
		return found ? named_site(sym, delta, m.path) : file_site(m.path, off);
	}
	fclose(f);
	/* in no mapping now: unmapped since (a library closed), or never code */
	cached = site_from_cache(d, pid, addr);
	return cached ? cached : site_from_file(d, ff);
}
