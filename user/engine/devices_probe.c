// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* A file's runtime functions found in its symbols and probed; launch probes on and off. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "devices_int.h"
#include "devspecs.h"
#include "elfsym.h"
#include "log.h"

struct matches {
	uint32_t spec[MEMTRAIL_DEV_SPECS];
	uint64_t off[MEMTRAIL_DEV_SPECS];
	size_t n;
	bool loader_only;
};

static int spec_index(const char *name, bool loader_only)
{
	size_t i;

	if (!((name[0] == 'c' && name[1] == 'u') || !strncmp(name, "nrt_", 4) ||
	      !strcmp(name, "_dl_debug_state")))
		return -1;
	for (i = 0; i < devspecs_n; i++)
		if (!strcmp(devspecs[i].name, name))
			return loader_only && devspecs[i].rt != MEMTRAIL_RT_LOADER ? -1 : (int)i;
	return -1;
}

static int on_symbol(void *ctx, const char *name, uint64_t off)
{
	struct matches *m = ctx;
	int idx = spec_index(name, m->loader_only);
	size_t i;

	if (idx < 0)
		return 0;
	for (i = 0; i < m->n; i++)
		if (m->spec[i] == (uint32_t)idx || m->off[i] == off)
			return 0;	/* seen in .dynsym, or an alias of one probed */
	if (m->n < devspecs_n) {
		m->spec[m->n] = idx;
		m->off[m->n++] = off;
	}
	return 0;
}

/* Functions of a file to probe, as tracer__attach_device_set takes them. */
struct probe_list {
	uint64_t off[MEMTRAIL_DEV_SPECS];
	uint64_t cookie[MEMTRAIL_DEV_SPECS];
	bool ret[MEMTRAIL_DEV_SPECS];
	uint32_t spec[MEMTRAIL_DEV_SPECS];
	size_t n;
	const char *name;	/* the file, for messages */
};

static void probe_list_add(struct probe_list *l, uint32_t spec, uint64_t off)
{
	l->off[l->n] = off;
	l->cookie[l->n] = devspecs__cookie(spec);
	l->ret[l->n] = devspecs[spec].ret;
	l->spec[l->n++] = spec;
}

static void on_probe_fail(void *ctx, ssize_t i, int err)
{
	const struct probe_list *l = ctx;

	if (i < 0 && err == -EMFILE)
		log__warn("cannot probe '%s': %s (memtrail keeps some descriptors free; raise its "
			  "open file limit, ulimit -n)", l->name, strerror(-err));
	else if (i < 0)
		log__warn("cannot probe '%s': %s", l->name, strerror(-err));
	else
		log__warn("cannot probe '%s' in '%s': %s", devspecs[l->spec[i]].name, l->name,
			  strerror(-err));
}

void devices_launch_detach(struct dev_file *f)
{
	tracer__detach_device_set(&f->launch);
	f->launch_on = false;
}

/* The launch probes of F: how many are on. */
static size_t launch_attach(struct devices *d, struct dev_file *f)
{
	struct probe_list l = { .n = 0, .name = f->name };
	size_t i;

	for (i = 0; i < f->n_launch; i++)
		probe_list_add(&l, f->launch_spec[i], f->launch_off[i]);
	f->launch_on = true;
	return tracer__attach_device_set(d->tracer, f->path, l.off, l.cookie, l.ret, l.n,
					 &f->launch, on_probe_fail, &l);
}

/*
 * Launch probes of file IDX wanted: while no process is known to map it, or
 * one that does has not started "execute".
 */
void devices_launch_update(struct devices *d, size_t idx)
{
	struct dev_file *f = &d->files[idx];
	bool mapped = false, waiting = false;
	size_t i, j;

	if (!f->n_launch)
		return;
	for (i = 0; i < d->n_procs; i++) {
		for (j = 0; j < d->procs[i].n_files; j++) {
			if (d->procs[i].files[j].file != idx)
				continue;
			mapped = true;
			if (!d->procs[i].executed)
				waiting = true;
		}
	}
	if ((waiting || !mapped) && !f->launch_on)
		launch_attach(d, f);
	else if (mapped && !waiting && f->launch_on)
		devices_launch_detach(f);
}

void devices_proc_launch_update(struct devices *d, struct dev_proc *p)
{
	size_t i;

	for (i = 0; i < p->n_files; i++)
		devices_launch_update(d, p->files[i].file);
}

/* Probe a newly seen file, open as f->path. */
void devices_probe_file(struct devices *d, struct dev_file *f)
{
	struct probe_list l = { .n = 0, .name = f->name };
	struct matches m = { .n = 0, .loader_only = d->loader_only };
	const char *what = NULL;
	size_t i, shown;

	f->probes.fd[0] = f->probes.fd[1] = f->launch.fd[0] = f->launch.fd[1] = -1;
	if (elfsym__each(f->path, on_symbol, &m) || !m.n)
		return;
	for (i = 0; i < m.n; i++) {
		const struct dev_spec *s = &devspecs[m.spec[i]];

		if (s->rt != MEMTRAIL_RT_LOADER)
			what = s->rt == MEMTRAIL_RT_NEURON ? "Neuron runtime" : "CUDA runtime";
		if (!s->per_pid)
			probe_list_add(&l, m.spec[i], m.off[i]);
		else if (f->n_launch < LAUNCH_MAX) {
			f->launch_spec[f->n_launch] = m.spec[i];
			f->launch_off[f->n_launch++] = m.off[i];
		}
	}
	shown = tracer__attach_device_set(d->tracer, f->path, l.off, l.cookie, l.ret, l.n,
					  &f->probes, on_probe_fail, &l);
	if (f->n_launch)
		shown += launch_attach(d, f);
	if (what && shown && d->quiet)
		log__debug("probing %s '%s' (%zu functions)", what, f->name, shown);
	else if (what && shown)
		log__info("probing %s '%s' (%zu functions)", what, f->name, shown);
	f->runtime = what != NULL;
	f->probed_ns = clock__mono_ns();
}
