// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <bpf/bpf.h>

#include "array.h"
#include "log.h"
#include "outfile.h"
#include "reaper.h"
#include "tracer_int.h"

static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	if (getenv("MEMTRAIL_DEBUG_LIBBPF"))
		return vfprintf(stderr, fmt, ap);
	return 0;
}

/*
 * PID was scanned (DONE) or is gone: the files it mapped are scanned, or
 * (gone before its scan) those it was first to map are left for the next
 * process that maps them.
 */
void tracer_lib_new_settle(struct tracer *t, uint32_t pid, bool done)
{
	uint32_t scanned = MEMTRAIL_LIB_SCANNED;
	int fd = bpf_map__fd(t->skel->maps.lib_files);
	size_t i;

	for (i = 0; i < t->n_lib_new;) {
		if (t->lib_new[i].pid != pid) {
			i++;
			continue;
		}
		if (done)
			bpf_map_update_elem(fd, &t->lib_new[i].key, &scanned, BPF_ANY);
		else if (!t->lib_new[i].again)
			bpf_map_delete_elem(fd, &t->lib_new[i].key);
		t->lib_new[i] = t->lib_new[--t->n_lib_new];
	}
}

/*
 * Every event goes to the session. The files a process was first to map
 * are marked scanned once the session scanned it (a fresh LIBS event), and
 * left for the next mapper if it exits before.
 */
static int on_ringbuf(void *ctx, void *data, size_t size)
{
	const struct memtrail_event_hdr *h = data;
	const struct memtrail_event_lib_new *ln = data;
	const struct memtrail_event_libs *libs = data;
	struct tracer *t = ctx;
	int err = 0;

	if (size >= sizeof(*ln) && h->type == MEMTRAIL_EV_LIB_NEW) {
		struct lib_new *n;

		if (array__grow((void **)&t->lib_new, &t->cap_lib_new, t->n_lib_new + 1,
				sizeof(*t->lib_new)))
			return 0;
		n = &t->lib_new[t->n_lib_new++];
		n->pid = h->tgid;
		n->key = ln->key;
		n->ts_ns = h->ts_ns;
		n->again = ln->again;
		memcpy(n->name, ln->name, sizeof(n->name));
		n->name[sizeof(n->name) - 1] = '\0';
		return 0;
	}
	if (t->fn)
		err = t->fn(t->ctx, data, size);
	if (size >= sizeof(*libs) && h->type == MEMTRAIL_EV_LIBS && libs->fresh)
		tracer_lib_new_settle(t, h->tgid, true);
	else if (size >= sizeof(*h) && h->type == MEMTRAIL_EV_EXIT)
		tracer_lib_new_settle(t, h->tgid, false);
	return err;
}

/*
 * Why a load or attach failed with EPERM/EACCES: capabilities only when they
 * are really missing; the verifier refuses programs with EACCES too.
 */
static const char *perm_hint(int err)
{
	if (err != -EPERM && err != -EACCES)
		return "";
	if (!features__have_caps())
		return geteuid() ? " (memtrail needs root: run it with sudo)"
				 : " (memtrail needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN)";
	return " (the kernel refused a program; MEMTRAIL_DEBUG_LIBBPF=1 shows why)";
}

static int add_pids(struct tracer *t, const struct tracer_config *cfg)
{
	int fd = bpf_map__fd(t->skel->maps.targets);
	size_t i;

	for (i = 0; i < cfg->n_pids; i++) {
		struct memtrail_target v = {
			.flags = cfg->await_exec ? MEMTRAIL_TARGET_AWAIT_EXEC : 0,
		};
		uint32_t pid = cfg->pids[i];

		if (bpf_map_update_elem(fd, &pid, &v, BPF_ANY)) {
			int err = -errno;

			log__error("cannot add PID %u to the targets map: %s", pid, strerror(-err));
			return err;
		}
	}
	return 0;
}

int tracer__check_caps(void)
{
	if (features__have_caps())
		return 0;
	log__error("cannot load the BPF programs: %s", geteuid() ?
		   "memtrail needs root: run it with sudo" :
		   "memtrail needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN");
	return -EPERM;
}

/*
 * Before uprobe_multi (6.6) every probed function is a file descriptor or
 * two: CUDA's driver alone is about 80, and 1024 (the usual soft limit) runs
 * out after a dozen libraries. Up to the hard limit, as other BPF tools do.
 */
static void raise_fd_limit(void)
{
	struct rlimit r;

	if (!getrlimit(RLIMIT_NOFILE, &r) && r.rlim_cur < r.rlim_max) {
		r.rlim_cur = r.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &r))
			log__debug("cannot raise the open file limit: %s", strerror(errno));
	}
}

/*
 * The programs that share sched_process_exec run in the order they attach:
 * mt_exec (the skeleton's) first, for the new program's phase and a new
 * target; then those that count in them: mt_dev_exec gives the old address
 * space's device memory back in that phase, mt_exec_maps reads the new
 * program's mappings for it.
 */
static int attach_after_exec(struct tracer *t)
{
	struct memtrail_bpf *s = t->skel;
	struct {
		struct bpf_program *prog;
		struct bpf_link **link;
	} after[] = {
		{ s->progs.mt_dev_exec, &s->links.mt_dev_exec },
		{ s->progs.mt_exec_maps, &s->links.mt_exec_maps },
	};
	size_t i;

	for (i = 0; i < sizeof(after) / sizeof(after[0]); i++) {
		if (!bpf_program__autoload(after[i].prog))
			continue;
		*after[i].link = bpf_program__attach(after[i].prog);
		if (!*after[i].link)
			return -errno;
	}
	return 0;
}

int tracer__open(struct tracer **out, const struct tracer_config *cfg,
		 tracer_event_fn fn, void *ctx)
{
	struct tracer *t;
	int err, load_err = 0;

	*out = NULL;
	libbpf_set_print(libbpf_log);
	err = tracer__check_caps();
	if (err)
		return err;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->extra_fd = -1;
	err = features__probe(&t->kf);
	if (err) {
		free(t);
		return err;
	}
	t->fn = fn;
	t->ctx = ctx;
	/*
	 * room for every target's end before a poll forgets them: a target's end
	 * is never dropped for want of memory (its sites then retired first)
	 */
	t->cap_ended = cfg->max_targets ? cfg->max_targets : 1;
	t->ended = calloc(t->cap_ended, sizeof(*t->ended));
	if (!t->ended) {
		free(t);
		log__error("out of memory");
		return -ENOMEM;
	}
	raise_fd_limit();
	outfile__reserve();	/* a trail written where probes took every other descriptor */
	t->nr_cpus = libbpf_num_possible_cpus();
	if (t->nr_cpus <= 0)
		t->nr_cpus = 1;

	/*
	 * The compat object where BPF has no atomic fetch (5.12) or no callbacks
	 * (5.13: bpf_loop's and the like, which the main object's dead branches
	 * still name). MEMTRAIL_COMPAT=1: here too (how its tests run on any kernel)
	 */
	t->compat = !t->kf.atomics || !t->kf.for_each_elem || getenv("MEMTRAIL_COMPAT");
	/* MEMTRAIL_NO_UPROBE_MULTI=1: a link per probe, as before 6.6 (its tests, here) */
	t->no_multi = !t->kf.uprobe_multi || getenv("MEMTRAIL_NO_UPROBE_MULTI");
	err = tracer_load_object(t, cfg, &load_err);
	if (err == -EAGAIN && t->maps_tell) {
		/* a kernel that refuses the task_vma iterator's programs: /proc names instead */
		features__site_maps_refused(&t->kf, load_err);	/* said under -v */
		memtrail_bpf__destroy(t->skel);
		err = tracer_load_object(t, cfg, &load_err);
	}
	if (err == -EAGAIN) {
		err = load_err;
		log__error("cannot load the BPF programs: %s%s", strerror(-err), perm_hint(err));
	}
	if (err)
		goto fail;
	if (t->no_multi)
		log__debug("no uprobe_multi links: device and heap probes attach one link per "
			   "function");
	err = add_pids(t, cfg);
	if (err)
		goto fail;
	err = memtrail_bpf__attach(t->skel);
	if (!err)
		err = attach_after_exec(t);
	if (err) {
		log__error("cannot attach the BPF programs: %s%s", strerror(-err), perm_hint(err));
		goto fail;
	}
	tracer_attach_rules(t, cfg);
	t->rb = ring_buffer__new(bpf_map__fd(t->skel->maps.events), on_ringbuf, t, NULL);
	if (!t->rb) {
		err = -errno;
		log__error("cannot open the BPF ring buffer: %s", strerror(-err));
		goto fail;
	}
	*out = t;
	return 0;
fail:
	tracer__destroy(t);
	return err;
}

int tracer__scan(struct tracer *t)
{
	char buf[64];
	int fd, err = 0;
	ssize_t n;

	fd = bpf_iter_create(bpf_link__fd(t->skel->links.mt_scan));
	if (fd < 0) {
		err = -errno;
		log__error("cannot scan tasks: %s", strerror(-err));
		return err;
	}
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			/* EAGAIN: the walk restarts where it stopped */
			if (errno == EAGAIN)
				continue;
			err = -errno;
			log__error("cannot scan tasks: %s", strerror(-err));
			break;
		}
	}
	close(fd);
	return err;
}

/*
 * Delete the targets that ended (since the last time, where the ended_fn
 * held them): one system call for a storm's worth (Linux 5.6 on), one each
 * where batches are refused or stop at a key (an entry gone already).
 */
static void forget_ended(struct tracer *t)
{
	int fd = bpf_map__fd(t->skel->maps.targets);
	__u32 n = t->n_ended;

	if (!n)
		return;
	if (t->ended_fn) {
		qsort(t->ended, t->n_ended, sizeof(*t->ended), array__u32_cmp);
		if (!t->ended_fn(t->ended_ctx, t->ended, t->n_ended))
			return;
	}
	tracer_delete_keys(fd, t->ended, sizeof(*t->ended), n);
	t->n_ended = 0;
}

void tracer__watch_fd(struct tracer *t, int fd, tracer_fd_fn fn, void *ctx)
{
	t->extra_fd = fd;
	t->extra_fn = fn;
	t->extra_ctx = ctx;
}

int tracer__poll(struct tracer *t, int timeout_ms)
{
	int n;

	bool extra = false;

	if (t->extra_fd >= 0) {
		struct pollfd p[2] = { { ring_buffer__epoll_fd(t->rb), POLLIN, 0 },
				       { t->extra_fd, POLLIN, 0 } };

		n = poll(p, 2, timeout_ms);
		extra = n > 0 && p[1].revents;
		n = n < 0 ? -errno : 0;
	} else {
		n = ring_buffer__poll(t->rb, timeout_ms);
	}
	/* most records do not wake the reader (event_submit): read what came anyway */
	if (n >= 0)
		n = ring_buffer__consume(t->rb);
	/*
	 * the descriptor's news after the events: a process waiting at record's
	 * gate sent its fork and exec before its open, so they are read first
	 */
	if (extra && t->extra_fd >= 0)
		t->extra_fn(t->extra_ctx);
	forget_ended(t);
	if (n == -EINTR)
		return 0;
	return n < 0 ? n : 0;
}

void tracer__forget(struct tracer *t, uint32_t tgid)
{
	bpf_map_delete_elem(bpf_map__fd(t->skel->maps.targets), &tgid);
}

void tracer__on_ended(struct tracer *t, tracer_ended_fn fn, void *ctx)
{
	t->ended_fn = fn;
	t->ended_ctx = ctx;
}

void tracer__forget_ended(struct tracer *t, uint32_t tgid)
{
	/* beyond max_targets ends in one poll (an end told twice), and no memory: at once */
	if (array__grow((void **)&t->ended, &t->cap_ended, t->n_ended + 1, sizeof(*t->ended))) {
		tracer__forget(t, tgid);
		return;
	}
	t->ended[t->n_ended++] = tgid;
}

/*
 * Runs of the loaded programs that the kernel skipped because the program
 * was already active on that CPU (bpf_prog_info.recursion_misses, Linux
 * 5.12 on; 0 before). Tracepoint programs run preemptible on newer kernels (7.3), and
 * trampoline (fentry) programs from 5.x, so a task preempted inside one
 * makes the next run on that CPU a miss.
 */
static uint64_t tracer__skipped(struct tracer *t)
{
	struct bpf_program *prog;
	uint64_t n = 0;

	bpf_object__for_each_program(prog, t->skel->obj) {
		struct bpf_prog_info info;
		uint32_t len = sizeof(info);
		int fd = bpf_program__fd(prog);

		if (fd < 0)
			continue;
		memset(&info, 0, sizeof(info));
		if (!bpf_obj_get_info_by_fd(fd, &info, &len))
			n += info.recursion_misses;
	}
	return n;
}

uint64_t tracer__lost_one(struct tracer *t, uint32_t why)
{
	uint64_t *vals = calloc(t->nr_cpus, sizeof(*vals)), n = 0;
	int c;

	if (vals && !bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.lost), &why, vals))
		for (c = 0; c < t->nr_cpus; c++)
			n += vals[c];
	free(vals);
	return n;
}

void tracer__lost(struct tracer *t, uint64_t lost[MEMTRAIL_LOST_MAX])
{
	uint32_t k;

	for (k = 0; k < MEMTRAIL_LOST_MAX; k++)
		lost[k] = k == MEMTRAIL_LOST_SKIPPED ? tracer__skipped(t) : tracer__lost_one(t, k);
}

const struct kernel_features *tracer__features(const struct tracer *t)
{
	return &t->kf;
}

void tracer__destroy(struct tracer *t)
{
	int i;

	if (!t)
		return;
	reaper__drain();	/* links handed over (a file's probes) are gone first */
	ring_buffer__free(t->rb);
	free(t->lib_new);
	free(t->ended);
	for (i = 0; i < MEMTRAIL_RULES_MAX; i++) {
		bpf_link__destroy(t->rule_links[i]);
		bpf_link__destroy(t->scope_links[i]);
	}
	memtrail_bpf__destroy(t->skel);
	free(t);
}
