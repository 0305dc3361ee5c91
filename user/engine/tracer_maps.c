// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Reading and clearing the kernel's maps: levels, phases, files, device memory, sites. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>

#include "array.h"
#include "tracer_int.h"

int tracer__read_phase(struct tracer *t, uint32_t tgid, uint32_t *seq)
{
	struct memtrail_target v;

	if (bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.targets), &tgid, &v))
		return -errno;
	*seq = v.phase;
	return 0;
}

int tracer__read_cell(struct tracer *t, uint32_t tgid, uint32_t phase,
		      struct memtrail_cell *cell)
{
	struct memtrail_cell_key key = { .tgid = tgid, .phase = phase };

	if (bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.cells), &key, cell))
		return -errno;
	return 0;
}

#define BATCH 512	/* entries a call; a hash bucket never holds this many: no -ENOSPC */

/*
 * Every entry of hash map FD, BATCH a system call: FN(ctx, key, value) for
 * each. 0, or -errno when the first call failed (nothing seen); a later
 * failure keeps what was seen.
 */
static int each_batch(int fd, size_t key_size, size_t val_size, bool take,
		      tracer_entry_fn fn, void *ctx)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts);
	char *keys = calloc(BATCH, key_size), *vals = calloc(BATCH, val_size);
	__u32 in = 0, out = 0, i, count;
	bool first = true;
	int err = 0;

	if (!keys || !vals) {
		err = -ENOMEM;
		goto out;
	}
	for (;;) {
		int rc;

		count = BATCH;
		rc = take ? bpf_map_lookup_and_delete_batch(fd, first ? NULL : &in, &out, keys, vals,
							    &count, &opts)
			  : bpf_map_lookup_batch(fd, first ? NULL : &in, &out, keys, vals, &count, &opts);
		rc = rc < 0 ? -errno : 0;
		if (rc && rc != -ENOENT) {
			err = first ? rc : 0;
			break;
		}
		for (i = 0; i < count; i++)
			fn(ctx, keys + i * key_size, vals + i * val_size);
		if (rc == -ENOENT)
			break;	/* no more */
		in = out;
		first = false;
	}
out:
	free(keys);
	free(vals);
	return err;
}

int tracer__each_cell(struct tracer *t, tracer_entry_fn fn, void *ctx)
{
	return each_batch(bpf_map__fd(t->skel->maps.cells), sizeof(struct memtrail_cell_key),
			  sizeof(struct memtrail_cell), false, fn, ctx);
}

int tracer__each_target(struct tracer *t, tracer_entry_fn fn, void *ctx)
{
	return each_batch(bpf_map__fd(t->skel->maps.targets), sizeof(__u32),
			  sizeof(struct memtrail_target), false, fn, ctx);
}

int tracer__take_dirty(struct tracer *t, tracer_entry_fn fn, void *ctx, bool *all)
{
	int err = each_batch(bpf_map__fd(t->skel->maps.dirty), sizeof(__u32), sizeof(__u32), true,
			     fn, ctx);

	if (err)
		return err;
	*all = __atomic_exchange_n(&t->skel->bss->dirty_full, 0, __ATOMIC_SEQ_CST);
	/* after the names are taken, before any level is read: see mark_dirty() */
	__atomic_add_fetch(&t->skel->bss->sample_gen, 1, __ATOMIC_SEQ_CST);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return 0;
}

int tracer__take_cell(struct tracer *t, uint32_t tgid, uint32_t phase, struct memtrail_cell *cell)
{
	struct memtrail_cell_key key = { .tgid = tgid, .phase = phase };
	int fd = bpf_map__fd(t->skel->maps.cells);

	if (!t->no_take) {
		if (!bpf_map_lookup_and_delete_elem(fd, &key, cell))
			return 0;
		if (errno == ENOENT)
			return -ENOENT;
		/* ENOTSUPP (524) where only queues and stacks had it */
		t->no_take = true;
	}
	if (bpf_map_lookup_elem(fd, &key, cell))
		return -errno;
	bpf_map_delete_elem(fd, &key);
	return 0;
}

void tracer__drop_cell(struct tracer *t, uint32_t tgid, uint32_t phase)
{
	struct memtrail_cell_key key = { .tgid = tgid, .phase = phase };

	bpf_map_delete_elem(bpf_map__fd(t->skel->maps.cells), &key);
}

size_t tracer__lib_pending(const struct tracer *t, uint32_t pid, struct memtrail_lib_key *keys,
			   size_t max)
{
	size_t i, n = 0;

	for (i = 0; i < t->n_lib_new && n < max; i++)
		if (t->lib_new[i].pid == pid)
			keys[n++] = t->lib_new[i].key;
	return n;
}

void tracer__lib_unseen(struct tracer *t, uint32_t pid, tracer_name_fn fn, void *ctx)
{
	size_t i;

	for (i = 0; i < t->n_lib_new; i++)
		if (t->lib_new[i].pid == pid)
			fn(ctx, pid, &t->lib_new[i].key, t->lib_new[i].name, t->lib_new[i].ts_ns);
	tracer_lib_new_settle(t, pid, false);
}

void tracer__lib_forget(struct tracer *t, const struct memtrail_lib_key *key)
{
	bpf_map_delete_elem(bpf_map__fd(t->skel->maps.lib_files), key);
}

bool tracer__tracking(const struct tracer *t)
{
	return t && t->track;
}

void tracer__lib_forget_file(struct tracer *t, uint64_t dev, uint64_t ino)
{
	int fd = bpf_map__fd(t->skel->maps.lib_files);
	struct memtrail_lib_key key, next;
	void *prev = NULL;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		/* deleting the current key would restart the walk: one behind */
		if (prev && key.dev == dev && key.ino == ino)
			bpf_map_delete_elem(fd, &key);
		key = next;
		prev = &key;
	}
	if (prev && key.dev == dev && key.ino == ino)
		bpf_map_delete_elem(fd, &key);
}

/*
 * Keys of map FD (KEY_SIZE bytes each, the tgid first: every map of
 * memtrail's keyed by process) that belong to one of TGIDS (N_TGIDS,
 * sorted), into a new array.
 */
_Static_assert(offsetof(struct memtrail_dev_key, tgid) == 0 &&
	       offsetof(struct memtrail_site_key, tgid) == 0, "keys_of_set: the tgid first");
_Static_assert(sizeof(struct memtrail_dev_key) <= 64 && sizeof(struct memtrail_site_key) <= 64,
	       "keys_of_set: a key fits its buffers");

static void *keys_of_set(int fd, size_t key_size, const uint32_t *tgids, size_t n_tgids,
			 size_t *n)
{
	unsigned char key[64], next[64], *keys = NULL, *grown;
	size_t cap = 0;
	void *prev = NULL;
	uint32_t tgid;

	*n = 0;
	if (key_size > sizeof(key))
		return NULL;
	while (!bpf_map_get_next_key(fd, prev, next)) {
		memcpy(key, next, key_size);
		prev = key;
		memcpy(&tgid, key, sizeof(tgid));
		if (!array__u32_has(tgids, n_tgids, tgid))
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 64;
			grown = realloc(keys, cap * key_size);
			if (!grown)
				break;
			keys = grown;
		}
		memcpy(keys + (*n)++ * key_size, key, key_size);
	}
	return keys;
}

struct keys_walk {
	size_t key_size;
	const uint32_t *tgids;
	size_t n_tgids;
	unsigned char *keys;
	size_t n, cap;
};

static void key_taken(void *ctx, const void *key, const void *value)
{
	struct keys_walk *w = ctx;
	uint32_t tgid;

	(void)value;
	memcpy(&tgid, key, sizeof(tgid));
	if (!array__u32_has(w->tgids, w->n_tgids, tgid) ||
	    array__grow((void **)&w->keys, &w->cap, w->n + 1, w->key_size))
		return;
	memcpy(w->keys + w->n++ * w->key_size, key, w->key_size);
}

/*
 * The same, a batch of entries a system call where VAL_SIZE (the map's value
 * size) is given and the kernel has batches: a walk of a whole map for a few
 * pids, several times a second under a storm of short processes.
 */
static void *keys_of_set_batched(int fd, size_t key_size, size_t val_size,
				 const uint32_t *tgids, size_t n_tgids, size_t *n)
{
	struct keys_walk w = { .key_size = key_size, .tgids = tgids, .n_tgids = n_tgids };

	if (each_batch(fd, key_size, val_size, false, key_taken, &w)) {
		free(w.keys);
		return keys_of_set(fd, key_size, tgids, n_tgids, n);
	}
	*n = w.n;
	return w.keys;
}

void tracer_delete_keys(int fd, const void *keys, size_t key_size, size_t n)
{
	const unsigned char *k = keys;
	size_t done = 0;
	__u32 count;

	while (done < n) {
		count = n - done;
		if (!bpf_map_delete_batch(fd, k + done * key_size, &count, NULL))
			return;
		if (errno != ENOENT)
			break;	/* no batches here: one at a time */
		done += count + 1;
	}
	for (; done < n; done++)
		bpf_map_delete_elem(fd, k + done * key_size);
}

/* Keys of one (tgid, address) map that belong to TGID, into a new array. */
static struct memtrail_dev_key *keys_of(int fd, uint32_t tgid, size_t *n)
{
	return keys_of_set(fd, sizeof(struct memtrail_dev_key), &tgid, 1, n);
}

/*
 * Whether an allocation or handle BORN and DEAD (struct memtrail_dev_alloc)
 * is listed: for the device OOM of EPOCH, made before it and not gone
 * before it; else (0) the live ones.
 */
static bool dev_listed(__u32 born, __u32 dead, uint32_t epoch)
{
	return epoch ? born < epoch && (!dead || dead >= epoch) : !dead;
}

/*
 * Entries of TGID in device map FD kept for a listing (dead: released while a
 * device OOM snapshot was pending), now listed: they go.
 */
static void purge_dead(int fd, const struct memtrail_dev_key *keys, size_t n, size_t dead_at,
		       size_t value_size)
{
	char v[64];
	__u32 dead;
	size_t i;

	for (i = 0; i < n && value_size <= sizeof(v); i++) {
		if (bpf_map_lookup_elem(fd, &keys[i], v))
			continue;
		memcpy(&dead, v + dead_at, sizeof(dead));
		if (dead)
			bpf_map_delete_elem(fd, &keys[i]);
	}
}

int tracer__device_allocs(struct tracer *t, uint32_t tgid, uint32_t epoch, tracer_alloc_fn fn,
			  void *ctx)
{
	int afd = bpf_map__fd(t->skel->maps.dev_allocs);
	int hfd = bpf_map__fd(t->skel->maps.vmm_handles);
	struct memtrail_dev_key *akeys, *hkeys;
	size_t i, na, nh;

	akeys = keys_of(afd, tgid, &na);
	for (i = 0; i < na; i++) {
		struct memtrail_dev_alloc a;

		if (bpf_map_lookup_elem(afd, &akeys[i], &a))
			continue;
		if (dev_listed(a.born, a.dead, epoch))
			fn(ctx, akeys[i].addr, &a);
	}
	hkeys = keys_of(hfd, tgid, &nh);
	for (i = 0; i < nh; i++) {
		struct memtrail_vmm_handle h;
		struct memtrail_dev_alloc a;

		if (bpf_map_lookup_elem(hfd, &hkeys[i], &h) || !dev_listed(h.born, h.dead, epoch))
			continue;
		a = (struct memtrail_dev_alloc){ .size = h.size, .kind = h.kind,
						 .device = h.device, .phase = h.phase,
						 .name = UINT32_MAX };
		fn(ctx, hkeys[i].addr, &a);
	}
	if (epoch) {
		/* frees and releases delete again; what was kept for this listing goes */
		bpf_map_delete_elem(bpf_map__fd(t->skel->maps.dev_snap), &tgid);
		purge_dead(afd, akeys, na, offsetof(struct memtrail_dev_alloc, dead),
			   sizeof(struct memtrail_dev_alloc));
		purge_dead(hfd, hkeys, nh, offsetof(struct memtrail_vmm_handle, dead),
			   sizeof(struct memtrail_vmm_handle));
	}
	free(akeys);
	free(hkeys);
	return 0;
}

void tracer__device_forget(struct tracer *t, uint32_t tgid)
{
	int fds[] = {
		bpf_map__fd(t->skel->maps.dev_allocs), bpf_map__fd(t->skel->maps.vmm_handles),
		bpf_map__fd(t->skel->maps.vmm_maps), bpf_map__fd(t->skel->maps.ctx_device),
	};
	struct memtrail_dev_key *keys;
	size_t f, i, n;

	for (f = 0; f < sizeof(fds) / sizeof(fds[0]); f++) {
		keys = keys_of(fds[f], tgid, &n);
		for (i = 0; i < n; i++)
			bpf_map_delete_elem(fds[f], &keys[i]);
		free(keys);
	}
	bpf_map_delete_elem(bpf_map__fd(t->skel->maps.dev_snap), &tgid);
}

uint64_t tracer__heap_hits(struct tracer *t, uint32_t tgid)
{
	struct memtrail_target v;

	if (bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.targets), &tgid, &v))
		return 0;
	return v.heap_hits;
}

void tracer__heap_allow(struct tracer *t, uint32_t tgid, uint64_t allow)
{
	int fd = bpf_map__fd(t->skel->maps.heap_allow);

	if (allow)
		bpf_map_update_elem(fd, &tgid, &allow, BPF_ANY);
	else
		bpf_map_delete_elem(fd, &tgid);
}

int tracer__calibration_target(struct tracer *t, uint32_t pid, bool on)
{
	struct memtrail_target v = { .flags = MEMTRAIL_TARGET_CALIBRATION };

	if (!on) {
		tracer__forget(t, pid);
		tracer__drop_cell(t, pid, 0);
		tracer__sites_forget(t, &pid, 1);
		return 0;
	}
	if (bpf_map_update_elem(bpf_map__fd(t->skel->maps.targets), &pid, &v, BPF_ANY))
		return -errno;
	return 0;
}

struct sites_walk {
	tracer_site_fn fn;
	void *ctx;
};

static void site_seen(void *ctx, const void *key, const void *value)
{
	struct sites_walk *w = ctx;

	w->fn(w->ctx, key, value);
}

void tracer__sites(struct tracer *t, tracer_site_fn fn, void *ctx)
{
	int fd = bpf_map__fd(t->skel->maps.sites);
	struct memtrail_site_key key, next;
	struct sites_walk w = { fn, ctx };
	struct memtrail_site v;
	void *prev = NULL;

	/* a batch a system call; one entry at a time where the kernel has no batches */
	if (!each_batch(fd, sizeof(key), sizeof(v), false, site_seen, &w))
		return;
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (!bpf_map_lookup_elem(fd, &key, &v))
			fn(ctx, &key, &v);
	}
}

int tracer__site_take(struct tracer *t, const struct memtrail_site_key *k,
		      struct memtrail_site *v)
{
	int fd = bpf_map__fd(t->skel->maps.sites);

	return bpf_map_lookup_and_delete_elem(fd, k, v) ? -errno : 0;
}

int tracer__stack(struct tracer *t, int32_t id, uint64_t ips[MEMTRAIL_SITE_DEPTH])
{
	uint32_t key = id;
	int n;

	memset(ips, 0, sizeof(uint64_t) * MEMTRAIL_SITE_DEPTH);
	if (id < 0 || bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.site_stacks), &key, ips))
		return -ENOENT;
	for (n = 0; n < MEMTRAIL_SITE_DEPTH && ips[n]; n++)
		;
	return n;
}

void tracer__sites_forget(struct tracer *t, const uint32_t *tgids, size_t n_tgids)
{
	const struct bpf_map *maps[] = {
		t->skel->maps.sites, t->skel->maps.heap_allocs, t->skel->maps.map_ranges,
	};
	size_t n, i, m;
	unsigned char *keys;

	for (m = 0; m < sizeof(maps) / sizeof(maps[0]); m++) {
		int fd = bpf_map__fd(maps[m]);
		size_t size = bpf_map__key_size(maps[m]);

		if (bpf_map__max_entries(maps[m]) <= 1)
			continue;	/* not in use (heap_allocs without heap probes) */
		keys = keys_of_set_batched(fd, size, bpf_map__value_size(maps[m]), tgids, n_tgids,
					   &n);
		if (keys)
			tracer_delete_keys(fd, keys, size, n);
		free(keys);
	}
	for (i = 0; i < n_tgids; i++) {
		if (t->skel->rodata->heap_budget)
			bpf_map_delete_elem(bpf_map__fd(t->skel->maps.heap_allow), &tgids[i]);
		bpf_map_delete_elem(bpf_map__fd(t->skel->maps.py_procs), &tgids[i]);
	}
}

void tracer__stacks_forget(struct tracer *t, const int32_t *ids, size_t n)
{
	int sfd = bpf_map__fd(t->skel->maps.site_stacks), ifd = bpf_map__fd(t->skel->maps.stack_ids);
	struct memtrail_stack st;
	int32_t id;
	size_t i;

	for (i = 0; i < n; i++) {
		uint32_t key = ids[i];

		if (ids[i] < 0 || bpf_map_lookup_elem(sfd, &key, &st))
			continue;
		/* the content's id, unless a program gave that content another since */
		if (!bpf_map_lookup_elem(ifd, &st, &id) && id == ids[i])
			bpf_map_delete_elem(ifd, &st);
		bpf_map_delete_elem(sfd, &key);
	}
}

int tracer__py_proc(struct tracer *t, uint32_t pid, const struct memtrail_py_proc *p)
{
	int fd = bpf_map__fd(t->skel->maps.py_procs);

	if (!p)
		return bpf_map_delete_elem(fd, &pid) ? -errno : 0;
	if (bpf_map_update_elem(fd, &pid, p, BPF_ANY))
		return -errno;
	return 0;
}

/* The kernel's memory for memtrail's maps: each map's memlock in its fdinfo. */
uint64_t tracer__map_bytes(const struct tracer *t)
{
	const struct bpf_map *m;
	uint64_t sum = 0;

	bpf_object__for_each_map(m, t->skel->obj) {
		unsigned long long v;
		char path[64], line[128];
		FILE *f;
		int fd = bpf_map__fd(m);

		if (fd < 0)
			continue;
		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
		f = fopen(path, "re");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "memlock: %llu", &v) == 1) {
				sum += v;
				break;
			}
		fclose(f);
	}
	return sum;
}
