/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Events to user space (reserved, submitted, lost and counted), the
 * target filter's lookups, and a file mapped executable told to user space.
 */
#ifndef MT_EVENTS_BPF_H
#define MT_EVENTS_BPF_H

#include "mt_maps.bpf.h"

static __always_inline void count_lost(__u32 why)
{
	__u64 *n = bpf_map_lookup_elem(&lost, &why);

	if (n)
		*n += 1;
}

/* A ring-buffer record of SIZE bytes with its header filled, or NULL (counted). */
static __always_inline void *event_reserve(__u64 size, __u32 type, __u32 tgid)
{
	struct memtrail_event_hdr *h = bpf_ringbuf_reserve(&events, size, 0);

	if (!h) {
		count_lost(MEMTRAIL_LOST_RINGBUF);
		return NULL;
	}
	h->type = type;
	h->tgid = tgid;
	h->ts_ns = bpf_ktime_get_ns();
	return h;
}

/*
 * Hand a reserved record to user space. User space drains the ring buffer at
 * least every 50 ms (POLL_MS) whether woken or not, so most records need not
 * wake it: a wakeup costs an interrupt here (irq_work) and a context switch
 * there, and a storm of short processes would pay both several times a
 * process. Records user space must act on at once (an OOM kill, memory
 * pressure, a kill signal, a device failure, a spent budget, a file new to
 * memtrail) wake it, as does any record once the buffer holds MT_WAKE_BYTES
 * unread.
 * (Forced: the default wakes only when the reader has read everything before
 * the record, which unwoken records ahead of it prevent.)
 */
#define MT_WAKE_BYTES (128 << 10)	/* an eighth of the buffer */

static __always_inline void event_submit(void *e, bool urgent)
{
	__u64 flags = BPF_RB_NO_WAKEUP;

	if (urgent || bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= MT_WAKE_BYTES)
		flags = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(e, flags);
}

/* The task's css of controller IDX (enum cgroup_subsys_id), or NULL. */
static __always_inline struct cgroup_subsys_state *task_css(struct task_struct *task, __u32 idx)
{
	struct cgroup_subsys_state *css = NULL;
	struct css_set *cset = BPF_CORE_READ(task, cgroups);

	if (idx >= 64)
		return NULL;
	bpf_probe_read_kernel(&css, sizeof(css),
			      (void *)cset + bpf_core_field_offset(struct css_set, subsys) +
			      idx * sizeof(css));
	return css;
}

/* A target whose memory is being accounted, or NULL. */
static __always_inline struct memtrail_target *live_target(__u32 tgid)
{
	struct memtrail_target *t = bpf_map_lookup_elem(&targets, &tgid);

	if (!t || (t->flags & (MEMTRAIL_TARGET_EXITED | MEMTRAIL_TARGET_AWAIT_EXEC)))
		return NULL;
	return t;
}

/*
 * Where maps are read from /proc (libs_urgent): the maps reader's thread is
 * asked to read TGID's now. Lost when it is full (a reader thousands of
 * processes behind): the event loop's own read is still to come.
 */
static __always_inline void maps_want(__u32 tgid)
{
	__u32 *w;

	if (!libs_urgent)
		return;
	w = bpf_ringbuf_reserve(&maps_wanted, sizeof(*w), 0);
	if (!w)
		return;
	*w = tgid;
	bpf_ringbuf_submit(w, 0);
}

/*
 * Where the code of files mapped since the last scan is about to run (the
 * dynamic linker's hook, an exec): user space is told. No process is ever
 * stopped for it: a file known before it is mapped has its probes in place
 * (uprobes are registered per inode and inserted as the file is mapped);
 * one new to memtrail is scanned at once, and the calls made into it before
 * its probes were live are counted as late by user space, never stopped for.
 */
static __always_inline void lib_event(struct memtrail_target *t, __u32 tgid)
{
	/*
	 * User space reads it at once where files new to it were mapped, or
	 * where it cannot know (no tracking): a short process may call them and
	 * end before the next poll, and its call sites need its mappings read
	 * while it lives. So too where sites' stacks are named (libs_urgent):
	 * the files are known, but where this process mapped them is read from
	 * its maps. Otherwise (a program of known libraries) within a poll.
	 */
	bool fresh = track_libs && t->lib_fresh;
	bool urgent = !track_libs || fresh || libs_urgent;
	struct memtrail_event_libs *e;

	maps_want(tgid);
	e = event_reserve(sizeof(*e), MEMTRAIL_EV_LIBS, tgid);
	if (!e)
		return;
	t->lib_fresh = 0;
	e->fresh = fresh;
	e->pad = 0;
	event_submit(e, urgent);
}

#define MT_PROT_EXEC 0x4

/*
 * A file mapped executable by a target (the dynamic linker mapping a
 * library, exec mapping a program and its interpreter): unless scanned
 * already, the target's next lib_event() tells user space at once. Each
 * mapper of a file not yet scanned tells user space its key; the first
 * mapper's scan marks it scanned.
 */
static __always_inline void lib_mapped(struct file *file, unsigned long prot)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u32 pending = MEMTRAIL_LIB_PENDING, *state;
	struct memtrail_event_lib_new *e;
	struct memtrail_lib_key key;
	struct memtrail_target *t;
	struct inode *inode;
	bool first;

	if (!track_libs || !file || !(prot & MT_PROT_EXEC))
		return;
	/* a command memtrail started is told at its exec too */
	t = bpf_map_lookup_elem(&targets, &tgid);
	if (!t || (t->flags & MEMTRAIL_TARGET_EXITED))
		return;
	if (maps_tell_on)
		t->maps_new = 1;
	inode = BPF_CORE_READ(file, f_inode);
	key.dev = BPF_CORE_READ(inode, i_sb, s_dev);
	key.ino = BPF_CORE_READ(inode, i_ino);
	key.gen = BPF_CORE_READ(inode, i_generation);
	key.pad = 0;
	state = bpf_map_lookup_elem(&lib_files, &key);
	if (state && *state == MEMTRAIL_LIB_SCANNED)
		return;
	first = !state && !bpf_map_update_elem(&lib_files, &key, &pending, BPF_NOEXIST);
	/* every mapper tells it: one that ends before its scan is said too */
	e = event_reserve(sizeof(*e), MEMTRAIL_EV_LIB_NEW, tgid);
	if (e) {
		e->key = key;
		if (bpf_probe_read_kernel_str(e->name, sizeof(e->name),
					      BPF_CORE_READ(file, f_path.dentry, d_name.name)) < 0)
			e->name[0] = '\0';
		e->again = !first;
		e->pad = 0;
		event_submit(e, false);
	}
	t->lib_fresh = 1;
}

#endif /* MT_EVENTS_BPF_H */
