// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Each target's code mappings: read from its maps (unmapped code kept, a
 * fork's taken from its parent where it is gone), told by BPF, and the files
 * they map, each opened once as a module for its symbols.
 */
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/sysmacros.h>

#include "array.h"
#include "clock.h"
#include "maps_reader.h"
#include "proc.h"
#include "roots.h"
#include "sites_int.h"

/*
 * libdw's standard search for a debug file (the build ID's file under each
 * directory of the path, the .gnu_debuglink file beside the module, in its
 * .debug and under those directories; debuginfod where DEBUGINFOD_URLS is
 * set), from the module's own path in its process's root: libdw opened it
 * as /proc/PID/map_files/..., where no debug link is.
 */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, GElf_Addr base,
			  const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
			  char **debuginfo_file_name)
{
	const struct module_debug *d = *userdata;

	return dwfl_standard_find_debuginfo(mod, userdata, modname, base,
					    d && d->file ? d->file : file_name, debuglink_file,
					    debuglink_crc, debuginfo_file_name);
}

static const Dwfl_Callbacks offline_callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = find_debuginfo,
	.section_address = dwfl_offline_section_address,
};

void sites_module_debug_free(struct module_debug *d)
{
	if (!d)
		return;
	free(d->file);
	free(d->path);
	free(d);
}

/*
 * Where NAME, mapped by PID, has its debug file: on memtrail's own root,
 * the file itself and libdw's default directories; in another root (a
 * container's), the file through /proc/PID/root and that root's
 * /usr/lib/debug before the host's. NULL when memory runs out.
 */
static struct module_debug *module_debug(const struct sites *s, uint32_t pid, const char *name,
					 bool *other_root)
{
	struct module_debug *d = calloc(1, sizeof(*d));
	dev_t dev;
	ino_t ino;

	*other_root = false;
	if (!d)
		return NULL;
	d->cb = offline_callbacks;
	if (pid && !roots__id(pid, &dev, &ino) && (dev != s->root_dev || ino != s->root_ino)) {
		*other_root = true;
		/* maps names a chroot's files as memtrail sees them: those paths as they are */
		if (asprintf(&d->file, "/proc/%u/root%s", pid, name) < 0)
			d->file = NULL;
		else if (access(d->file, F_OK)) {
			free(d->file);
			d->file = strdup(name);
		}
		if (asprintf(&d->path, ":.debug:/proc/%u/root/usr/lib/debug:/usr/lib/debug",
			     pid) < 0)
			d->path = NULL;
		d->cb.debuginfo_path = d->path ? &d->path : NULL;
	} else {
		d->file = strdup(name);
	}
	return d;
}

/* Whether M's own file has a symbol table (else its names come from a debug file). */
static bool module_has_symtab(struct module *m)
{
	GElf_Addr bias;
	Elf *e = dwfl_module_getelf(m->mod, &bias);
	Elf_Scn *scn = NULL;

	while (e && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB)
			return true;
	}
	return false;
}

/* A module's device as maps shows it, major:minor */
#define DEV_KEY(maj, min) (((uint64_t)(maj) << 32) | (min))

static int32_t module_find(const struct sites *s, const char *name, uint64_t dev, uint64_t ino)
{
	size_t i;

	for (i = 0; i < s->n_modules; i++)
		if (s->modules[i].name && s->modules[i].dev == dev && s->modules[i].ino == ino &&
		    !strcmp(s->modules[i].name, name))
			return i;
	return -1;
}

void sites_module_close(struct module *m)
{
	size_t j;

	for (j = 0; j < m->n_syms; j++)
		free(m->syms[j].readable);
	free(m->syms);
	free(m->name);
	if (m->dwfl)
		dwfl_end(m->dwfl);
	sites_module_debug_free(m->debug);
	free(m->py_layout_own);
	memset(m, 0, sizeof(*m));
}

static void mark_frames(bool *used, const struct frame *f, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (f[i].module >= 0)
			used[f[i].module] = true;
}

static void mark_deep(const void *nodep, VISIT which, void *ctx)
{
	const struct stack *st = *(const struct stack *const *)nodep;

	if (which == postorder || which == leaf)
		mark_frames(ctx, st->frames, st->n);
}

/*
 * Files no kept mapping, stack or call site names any more (their
 * processes retired) are closed once MODULES_SWEEP_MIN more are open than
 * the last sweep left: a node that runs ever new programs keeps the files in
 * use, not every file ever run.
 */
void sites_modules_sweep(struct sites *s)
{
	size_t i, j, live = 0;
	bool *used;

	if (s->n_modules - s->free_modules < s->sweep_at || !(used = calloc(s->n_modules, 1)))
		return;
	for (i = 0; i < s->n_pids; i++)
		for (j = 0; j < s->pids[i].n; j++)
			if (s->pids[i].maps[j].module >= 0)
				used[s->pids[i].maps[j].module] = true;
	for (i = 0; i < s->n_stacks; i++)
		mark_frames(used, s->stacks[i]->frames, s->stacks[i]->n);
	for (i = 0; i < s->n_list; i++)
		mark_frames(used, &s->list[i]->caller, 1);
	twalk_r(s->deep_index, mark_deep, used);
	for (i = 0; i < s->n_modules; i++) {
		if (!s->modules[i].name)
			continue;
		if (used[i]) {
			live++;
		} else {
			sites_module_close(&s->modules[i]);
			s->free_modules++;
		}
	}
	free(used);
	s->sweep_at = live + MODULES_SWEEP_MIN;
}

/* A new module NAME that PID maps, its symbols read from OPEN_PATH ("": none). */
static int32_t module_add(struct sites *s, uint32_t pid, const char *name, const char *open_path,
			  uint64_t dev, uint64_t ino)
{
	const unsigned char *bits;
	struct module *m;
	GElf_Addr vaddr;
	bool other_root;
	void **userdata;
	size_t i;
	int n;

	int32_t at = (int32_t)s->n_modules;

	/* a slot a closed file left (sites_modules_sweep), else a new one */
	for (i = 0; s->free_modules && i < s->n_modules; i++)
		if (!s->modules[i].name) {
			at = (int32_t)i;
			break;
		}
	if (at == (int32_t)s->n_modules &&
	    array__grow((void **)&s->modules, &s->cap_modules, s->n_modules + 1,
			sizeof(*s->modules)))
		return -2;
	m = &s->modules[at];
	memset(m, 0, sizeof(*m));
	m->name = strdup(name);
	if (!m->name)
		return -2;
	m->dev = dev;
	m->ino = ino;
	m->debug = module_debug(s, pid, name, &other_root);
	/* opened now, through the target's root: it may be gone when the trail is written */
	m->dwfl = m->debug ? dwfl_begin(&m->debug->cb) : NULL;
	if (m->dwfl) {
		m->mod = dwfl_report_offline(m->dwfl, name, open_path, -1);
		dwfl_report_end(m->dwfl, NULL, NULL);
		if (!m->mod) {
			dwfl_end(m->dwfl);
			m->dwfl = NULL;
		}
	}
	if (m->mod) {
		dwfl_module_info(m->mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
		*userdata = m->debug;
		n = dwfl_module_build_id(m->mod, &bits, &vaddr);
		for (i = 0; n > 0 && i < (size_t)n && i < 20; i++)
			snprintf(m->build_id + 2 * i, 3, "%02x", bits[i]);
		/* a container's debug file: found while its root can be reached */
		if (other_root && !module_has_symtab(m))
			dwfl_module_getsymtab(m->mod);
	}
	if (at < (int32_t)s->n_modules) {
		s->free_modules--;
		return at;
	}
	return s->n_modules++;
}

struct pid_maps *sites_pid_maps_get(struct sites *s, uint32_t pid, bool create)
{
	struct pid_maps *p;
	size_t i;

	if (pidmap__get(&s->pid_index, pid, &i))
		return &s->pids[i];
	if (!create || array__grow((void **)&s->pids, &s->cap_pids, s->n_pids + 1,
				   sizeof(*s->pids)) ||
	    pidmap__put(&s->pid_index, pid, s->n_pids))
		return NULL;
	p = &s->pids[s->n_pids++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	return p;
}

/*
 * The maps just read (from OLD on) first, then those of before that none of
 * them overlaps: code unmapped since (a library closed) still names the
 * frames of stacks taken while it was there.
 */
static void maps_keep_unmapped(struct pid_maps *p, size_t old)
{
	size_t i, j, kept = 0, n_new = p->n - old;
	struct map *m = malloc(p->n * sizeof(*m));

	if (!m) {
		memmove(p->maps, p->maps + old, n_new * sizeof(*p->maps));
		p->n = n_new;
		return;
	}
	memcpy(m, p->maps + old, n_new * sizeof(*m));
	for (i = 0; i < old && n_new + kept < PID_MAPS_MAX; i++) {
		for (j = 0; j < n_new; j++)
			if (p->maps[i].start < m[j].end && m[j].start < p->maps[i].end)
				break;
		if (j == n_new)
			m[n_new + kept++] = p->maps[i];
	}
	memcpy(p->maps, m, (n_new + kept) * sizeof(*m));
	p->n = n_new + kept;
	free(m);
}

static void told_learn(struct sites *s, uint32_t pid);

/*
 * PID's maps read at READ_NS, from F (closed here): /proc/PID/maps, or a read
 * the maps reader took, with the FILES it opened; LIVE where F is /proc's
 * (else a file new to memtrail is opened where the process still lives, or
 * from FILES, and is never known by a module without its symbols).
 */
static void maps_parse(struct sites *s, uint32_t pid, FILE *f, uint64_t read_ns, bool live,
		       const struct maps_file *files, size_t n_files)
{
	char line[4096 + 128], full[32], perms[8];
	unsigned long long start, end, pgoff, inode;
	struct proc_map_line pm;
	unsigned int maj, min;
	struct pid_maps *p;
	size_t old, i;
	int pos, fd;

	p = sites_pid_maps_get(s, pid, true);
	if (!p) {
		fclose(f);
		return;
	}
	/* read after the mappings kept: a zombie's maps read empty, and those stay */
	old = p->n;
	while (fgets(line, sizeof(line), f)) {
		struct map *m;

		line[strcspn(line, "\n")] = '\0';
		pos = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &pgoff,
			   &maj, &min, &inode, &pos) < 7 || perms[2] != 'x')
			continue;
		if (array__grow((void **)&p->maps, &p->cap, p->n + 1, sizeof(*p->maps)))
			break;
		/* when: a zombie's (empty) leaves the time of the last it had */
		p->read_ns = read_ns;
		m = &p->maps[p->n++];
		*m = (struct map){ start, end, pgoff, -1, false };
		if (!pos || line[pos] != '/' || !inode)
			continue;	/* anonymous: JIT code, or [vdso] and the like */
		m->module = module_find(s, line + pos, DEV_KEY(maj, min), inode);
		if (m->module >= 0)
			continue;
		/* opened as mapped: its symbols are never read from another file */
		pm = (struct proc_map_line){ .start = start, .end = end, .dev = makedev(maj, min),
					     .ino = inode, .path = line + pos };
		fd = proc__open_mapped(pid, &pm, full, sizeof(full));
		/* gone since the maps reader read them: the file it opened then */
		for (i = 0; fd < 0 && i < n_files; i++)
			if (files[i].dev == pm.dev && files[i].ino == pm.ino) {
				snprintf(full, sizeof(full), "/proc/self/fd/%d", files[i].fd);
				break;
			}
		if (fd < 0 && !live && i == n_files)
			continue;
		m->module = module_add(s, pid, line + pos, fd >= 0 || i < n_files ? full : "",
				       DEV_KEY(maj, min), inode);
		if (fd >= 0)
			close(fd);	/* libdw opened its own */
	}
	fclose(f);
	if (p->n > old) {
		maps_keep_unmapped(p, old);
		sites_stacks_replace(s, p);
	}
	told_learn(s, pid);
	sites_python_note(s, p);
}

static void on_maps_read(void *ctx, uint32_t pid, FILE *f, uint64_t read_ns,
			 const struct maps_file *files, size_t n_files);

void sites_maps_read(struct sites *s, uint32_t pid, uint64_t until_ns)
{
	char name[64];
	FILE *f;

	/* the maps reader's first: older than this read, and all there is where it is gone */
	maps_reader__take_pid(s->maps_reader, pid, until_ns, on_maps_read, s);
	snprintf(name, sizeof(name), "/proc/%u/maps", pid);
	f = fopen(name, "re");
	if (!f)
		return;		/* gone: the last mappings seen stay */
	maps_parse(s, pid, f, clock__mono_ns(), true, NULL, 0);
}

void sites__note_maps(struct sites *s, uint32_t pid)
{
	sites_maps_read(s, pid, s->event_ns);
}

/* A read of the maps reader's: where none newer was read here (the newest mappings first). */
static void on_maps_read(void *ctx, uint32_t pid, FILE *f, uint64_t read_ns,
			 const struct maps_file *files, size_t n_files)
{
	struct sites *s = ctx;
	struct pid_maps *p = sites_pid_maps_get(s, pid, false);

	if (p && p->read_ns >= read_ns) {
		fclose(f);
		return;
	}
	maps_parse(s, pid, f, read_ns, false, files, n_files);
}

void sites__take_maps(struct sites *s, uint64_t until_ns)
{
	if (!s)
		return;
	s->event_ns = until_ns;
	maps_reader__take(s->maps_reader, until_ns, on_maps_read, s);
}

void sites__fork(struct sites *s, uint32_t parent, uint32_t child)
{
	struct pid_maps *c, *p;

	if (s->maps_told) {
		/* its parent's, as BPF told them (read once where none were) */
		p = sites_pid_maps_get(s, parent, false);
		if (!p || !p->n)
			sites__note_maps(s, parent);
	} else {
		sites__note_maps(s, child);
		c = sites_pid_maps_get(s, child, false);
		if (c && c->n)
			return;
		/*
		 * gone already (or a zombie, whose maps read empty): its code lay
		 * where its parent's does now, read now (those read at the parent's
		 * exec may be from before its dynamic linker mapped a library)
		 */
		sites__note_maps(s, parent);
	}
	c = sites_pid_maps_get(s, child, true);
	/* the parent's looked up after: the child's creation may move the array */
	p = sites_pid_maps_get(s, parent, false);
	if (!c || !p || !p->n || c->n ||
	    array__grow((void **)&c->maps, &c->cap, p->n, sizeof(*c->maps)))
		return;
	memcpy(c->maps, p->maps, p->n * sizeof(*c->maps));
	c->n = p->n;
}

/* The module of the file BPF names (DEV as maps shows devices, INO), or -1. */
static int32_t module_of_told(const struct sites *s, uint64_t dev, uint64_t ino)
{
	size_t i;

	for (i = 0; i < s->n_modules; i++)
		if (s->modules[i].name &&
		    ((s->modules[i].dev == dev && s->modules[i].ino == ino) ||
		     (s->modules[i].real_dev == dev && s->modules[i].real_ino == ino)))
			return i;
	return -1;
}

/*
 * PID's code at START..END (file offset PGOFF, in bytes) is module MOD, as BPF
 * told; where MOD is a Python interpreter, BPF is told where PID's runtime is.
 */
static void map_insert(struct sites *s, uint32_t pid, unsigned long long start,
		       unsigned long long end, unsigned long long pgoff, int32_t mod)
{
	struct pid_maps *p = sites_pid_maps_get(s, pid, true);
	size_t i, n = 0;

	if (!p)
		return;
	/* the same mapping told again (each library its dynamic linker loads) */
	for (i = 0; i < p->n; i++)
		if (p->maps[i].start == start && p->maps[i].end == end &&
		    p->maps[i].module == mod && p->maps[i].pgoff == pgoff)
			return;
	/* what it replaces goes: code mapped over */
	for (i = 0; i < p->n; i++)
		if (p->maps[i].start >= end || start >= p->maps[i].end)
			p->maps[n++] = p->maps[i];
	p->n = n;
	if (p->n >= PID_MAPS_MAX ||
	    array__grow((void **)&p->maps, &p->cap, p->n + 1, sizeof(*p->maps)))
		return;
	p->maps[p->n++] = (struct map){ start, end, pgoff, mod, false };
	sites_python_note_map(s, p, p->n - 1);
	sites_stacks_replace(s, p);
}

/* Every told mapping of a file now known finds its process's maps (that process may be long gone). */
static void told_place(struct sites *s)
{
	size_t i, n = 0;
	int32_t mod;

	for (i = 0; i < s->n_told; i++) {
		struct told_map t = s->told[i];

		mod = module_of_told(s, t.dev, t.ino);
		if (mod >= 0)
			map_insert(s, t.pid, t.start, t.end, t.pgoff, mod);
		else
			s->told[n++] = t;
	}
	s->n_told = n;
}

/*
 * After a read of PID's maps: a mapping BPF told of it that maps showed too
 * names its module under BPF's name; then every told mapping of a file now
 * known finds its process's maps.
 */
static void told_learn(struct sites *s, uint32_t pid)
{
	struct pid_maps *p = sites_pid_maps_get(s, pid, false);
	bool learnt = false;
	size_t i, j;
	int32_t mod;

	for (i = 0; p && i < s->n_told; i++) {
		struct told_map *t = &s->told[i];

		for (j = 0; t->pid == pid && j < p->n; j++) {
			mod = p->maps[j].module;
			if (p->maps[j].start != t->start || p->maps[j].end != t->end ||
			    p->maps[j].pgoff != t->pgoff || mod < 0)
				continue;
			s->modules[mod].real_dev = t->dev;
			s->modules[mod].real_ino = t->ino;
			learnt = true;
			break;
		}
	}
	if (learnt)
		told_place(s);
}

/* The index of the told file (DEV, INO) in s->told_files, or s->n_told_files. */
static size_t told_file_at(const struct sites *s, uint64_t dev, uint64_t ino)
{
	size_t i;

	for (i = 0; i < s->n_told_files; i++)
		if (s->told_files[i].dev == dev && s->told_files[i].ino == ino)
			break;
	return i;
}

void sites__add_file(struct sites *s, const struct memtrail_event_file *e)
{
	uint64_t dev = DEV_KEY(e->key.dev >> 20, e->key.dev & 0xfffff);
	size_t i, len = e->len < sizeof(e->names) ? e->len : sizeof(e->names);
	char path[MEMTRAIL_FILE_NAMES + 1], *w = path + sizeof(path) - 1;
	const char *name, *end = e->names + len;
	struct told_file *f;

	if (!e->whole || !len)
		return;		/* cut: too deep or too long to be told */
	/* the names, the file's own first, each NUL-ended: written from the end */
	*w = '\0';
	for (name = e->names; name < end; name += strnlen(name, end - name) + 1) {
		size_t n = strnlen(name, end - name);

		if (!n || memchr(name, '/', n) || (size_t)(w - path) < n + 1)
			return;
		w -= n;
		memcpy(w, name, n);
		*--w = '/';
	}
	i = told_file_at(s, dev, e->key.ino);
	if (i == s->n_told_files) {
		if (s->n_told_files == TOLD_FILES_MAX) {
			free(s->told_files[0].path);
			memmove(s->told_files, s->told_files + 1,
				--s->n_told_files * sizeof(*s->told_files));
		}
		if (array__grow((void **)&s->told_files, &s->cap_told_files,
				s->n_told_files + 1, sizeof(*s->told_files)))
			return;
		i = s->n_told_files++;
		s->told_files[i] = (struct told_file){ dev, e->key.ino, NULL, false };
	}
	f = &s->told_files[i];
	free(f->path);
	f->path = strdup(w);
	f->unopened = false;
}

/*
 * The module of the file BPF told as (DEV, INO), opened from the path BPF
 * told it by, where no process that maps it could be read: -1 if none.
 */
static int32_t module_of_told_file(struct sites *s, uint64_t dev, uint64_t ino)
{
	char full[32], name[3 * 4096];
	size_t i = told_file_at(s, dev, ino);
	int32_t mod;
	int fd;

	/* once per path told: each mapping of a file out of sight would read mountinfo again */
	if (i == s->n_told_files || !s->told_files[i].path || s->told_files[i].unopened)
		return -1;
	fd = proc__open_on_fs(makedev(dev >> 32, dev & 0xffffffff), ino, s->told_files[i].path,
			      full, sizeof(full), name, sizeof(name));
	if (fd < 0) {
		s->told_files[i].unopened = true;
		return -1;
	}
	/* named by the path opened, as the node sees it (a container's file: in its layer) */
	mod = module_add(s, 0, name, full, dev, ino);
	close(fd);	/* libdw opened its own */
	return mod;
}

void sites__add_map(struct sites *s, const struct memtrail_event_map *e)
{
	/* the kernel's dev_t: major << 20 | minor */
	uint64_t dev = DEV_KEY(e->dev >> 20, e->dev & 0xfffff);
	/* maps gives the offset in bytes, the kernel's vm_pgoff counts pages */
	unsigned long long pgoff = e->pgoff * (unsigned long long)sysconf(_SC_PAGESIZE);
	int32_t mod = module_of_told(s, dev, e->ino);
	struct pid_maps *p;

	if (mod >= 0) {
		map_insert(s, e->hdr.tgid, e->start, e->end, pgoff, mod);
		return;
	}
	/* a file not known under this name yet: until a read of maps shows it */
	if (s->n_told == TOLD_MAX)
		memmove(s->told, s->told + 1, --s->n_told * sizeof(*s->told));
	s->told[s->n_told++] = (struct told_map){ e->hdr.tgid, e->start, e->end, pgoff, dev,
						  e->ino };
	p = sites_pid_maps_get(s, e->hdr.tgid, false);
	/* no read of its maps since it mapped that file: one now, while it lives, names it */
	if (s->maps_told && (!p || p->read_ns < e->hdr.ts_ns))
		sites__note_maps(s, e->hdr.tgid);	/* learns it (told_learn) */
	else
		told_learn(s, e->hdr.tgid);
	/* gone before its maps could be read: the file where BPF said it is */
	if (module_of_told(s, dev, e->ino) < 0 && module_of_told_file(s, dev, e->ino) >= 0)
		told_place(s);
}
