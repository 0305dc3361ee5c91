// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Uprobes: --phase and --scope rules, runtimes' functions, allocators. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>

#include "array.h"
#include "demangle.h"
#include "elfsym.h"
#include "log.h"
#include "proc.h"
#include "reaper.h"
#include "tracer_int.h"

/* The program of rule I: one for all with a cookie each, else one per rule. */
static struct bpf_program *rule_prog(struct tracer *t, uint32_t i)
{
	struct bpf_program *each[MEMTRAIL_RULE_PROGS];

	if (t->kf.attach_cookie)
		return t->skel->progs.mt_phase_rule;
	tracer_rule_copies(t->skel, each);
	return i < MEMTRAIL_RULE_PROGS ? each[i] : NULL;
}

/* The functions of a file whose symbol a demangled name names (distinct entry points). */
#define RULE_MATCHES 3
struct rule_match {
	const char *name;
	size_t n;
	uint64_t off[RULE_MATCHES];
	char sym[RULE_MATCHES][512];
};

static int rule_match_one(void *ctx, const char *sym, uint64_t off)
{
	struct rule_match *m = ctx;
	size_t i;

	if (!demangle__is(sym, m->name))
		return 0;
	for (i = 0; i < m->n && i < RULE_MATCHES; i++)
		if (m->off[i] == off)
			return 0;	/* an alias (a C1/C2 constructor pair) */
	if (m->n < RULE_MATCHES) {
		m->off[m->n] = off;
		snprintf(m->sym[m->n], sizeof(m->sym[0]), "%s", sym);
	}
	m->n++;
	return 0;
}

/*
 * Where a rule with a demangled SYMBOL attaches: the file BINARY names
 * (found as libbpf finds it) into *PATH, the one function's offset into
 * *OFF. 0, or -1 with the reason in WHY.
 */
static int rule_resolve(const struct phase_rule *r, char **path, uint64_t *off, char *why,
			size_t len)
{
	struct rule_match m = { .name = r->symbol };
	char a[160], b[160];
	int err;

	*path = proc__find_file(r->binary);
	if (!*path) {
		snprintf(why, len, "no file '%s'", r->binary);
		return -1;
	}
	err = elfsym__each(*path, rule_match_one, &m);
	if (err) {
		snprintf(why, len, "cannot read '%s': %s", *path, strerror(-err));
		return -1;
	}
	if (!m.n) {
		snprintf(why, len, "no function '%s' in '%s'", r->symbol, *path);
		return -1;
	}
	if (m.n > 1) {
		snprintf(why, len, "'%s' names %zu functions in '%s' (%s, %s%s): give its parameters",
			 r->symbol, m.n, *path, demangle__str(a, sizeof(a), m.sym[0]),
			 demangle__str(b, sizeof(b), m.sym[1]), m.n > 2 ? ", ..." : "");
		return -1;
	}
	*off = m.off[0];
	log__debug("phase rule '%s': '%s' is %s at 0x%" PRIx64 " in '%s'", r->name, r->symbol,
		   m.sym[0], *off, *path);
	return 0;
}

/* A rule that cannot attach is reported and skipped; the others still work. */
void tracer_attach_rules(struct tracer *t, const struct tracer_config *cfg)
{
	int names = bpf_map__fd(t->skel->maps.rule_names);
	uint32_t i;

	for (i = 0; i < cfg->n_rules && i < MEMTRAIL_RULES_MAX; i++) {
		const struct phase_rule *r = &cfg->rules[i];
		bool readable = demangle__readable(r->symbol);
		/* a cookie the kernel cannot take (before 5.15) would refuse the attach */
		LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = readable ? NULL : r->symbol,
			    .bpf_cookie = t->kf.attach_cookie ? i : 0);
		LIBBPF_OPTS(bpf_uprobe_opts, ret_opts, .func_name = opts.func_name, .retprobe = true);
		struct memtrail_rule rule = { .scoped = r->scoped };
		struct bpf_link *link, *ret = NULL;
		char *path = NULL, why[768];
		uint64_t off = 0;

		memcpy(rule.name, r->name, sizeof(rule.name));
		if (bpf_map_update_elem(names, &i, &rule, BPF_ANY)) {
			log__warn("cannot set up phase rule '%s': %s", r->name, strerror(errno));
			continue;
		}
		if (!t->kf.attach_cookie && i >= MEMTRAIL_RULE_PROGS) {
			log__warn("phase rule '%s' not set: %s", r->name,
				  t->kf.f[FEAT_RULES].note);
			continue;
		}
		/* a demangled name: memtrail finds the function, libbpf knows ELF names only */
		if (readable && rule_resolve(r, &path, &off, why, sizeof(why))) {
			log__warn("phase rule '%s' not set: %s", r->name, why);
			free(path);
			continue;
		}
		/* a scope's return first: its entry alone would never end the phase */
		if (r->scoped)
			ret = bpf_program__attach_uprobe_opts(t->skel->progs.mt_scope_return, -1,
							      path ? path : r->binary, off, &ret_opts);
		link = !r->scoped || ret ? bpf_program__attach_uprobe_opts(rule_prog(t, i), -1,
									 path ? path : r->binary,
									 off, &opts)
					 : NULL;
		if (!link) {
			int err = errno;

			bpf_link__destroy(ret);
			log__warn("phase rule '%s' not set: cannot attach to '%s' in '%s': %s",
				  r->name, r->symbol, path ? path : r->binary,
				  err == ENOENT ? "no such symbol or file" : strerror(err));
			free(path);
			continue;
		}
		free(path);
		t->rule_links[i] = link;
		t->scope_links[i] = ret;
		log__debug("phase rule '%s' attached to '%s' in '%s'", r->name, r->symbol, r->binary);
	}
}

/* One uprobe_multi link of PROG on N offsets of PATH (PID 0: every process); fd or -errno. */
static int uprobe_multi(struct bpf_program *prog, bool ret, int pid, const char *path,
			const uint64_t *offsets, const uint64_t *cookies, size_t n)
{
	/* union bpf_attr, link_create.uprobe_multi (uapi linux/bpf.h, Linux 6.6) */
	struct {
		uint32_t prog_fd, target_fd, attach_type, flags;
		uint64_t path, offsets, ref_ctr_offsets, cookies;
		uint32_t cnt, flags2, pid, pad;
	} attr = {
		.prog_fd = bpf_program__fd(prog),
		.attach_type = MT_TRACE_UPROBE_MULTI,
		.path = (uintptr_t)path,
		.offsets = (uintptr_t)offsets,
		.cookies = (uintptr_t)cookies,
		.cnt = n,
		.flags2 = ret ? MT_UPROBE_MULTI_RETURN : 0,
		.pid = pid,
	};
	int fd;

	if (attr.prog_fd == (uint32_t)-1)
		return -EINVAL;
	fd = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	return fd < 0 ? -errno : fd;
}

static int add_link(struct tracer_probe_set *set, size_t *cap, struct bpf_link *l)
{
	if (array__grow((void **)&set->links, cap, set->n_links + 1, sizeof(*set->links))) {
		bpf_link__destroy(l);
		return -ENOMEM;
	}
	set->links[set->n_links++] = l;
	return 0;
}

/* The fallback: a perf-event uprobe per function and direction. */
static size_t attach_each(struct tracer *t, const char *path, const uint64_t *off,
			  const uint64_t *cookie, const bool *ret, size_t n,
			  struct tracer_probe_set *set, tracer_probe_fail_fn fail, void *ctx)
{
	size_t i, cap = 0, done = 0;
	int r;

	for (i = 0; i < n; i++) {
		bool ok = true;

		for (r = 0; r <= (int)ret[i]; r++) {
			/* before 5.15 no cookie: the entry program of the function instead */
			LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = r,
				    .bpf_cookie = t->kf.attach_cookie ? cookie[i] : 0);
			struct bpf_program *p = r ? t->skel->progs.mt_dev_return
					      : t->kf.attach_cookie ? t->skel->progs.mt_dev_entry
					      : tracer_dev_copy(t, MEMTRAIL_COOKIE_NAME(cookie[i]));
			struct bpf_link *l = p ? bpf_program__attach_uprobe_opts(p, -1, path, off[i],
										 &opts)
					       : NULL;

			if (!l) {
				if (!p)
					errno = EINVAL;
				if (fail)
					fail(ctx, i, -errno);
				ok = false;
				continue;
			}
			if (add_link(set, &cap, l))
				return done;
		}
		done += ok;
	}
	return done;
}

static size_t attach_device_set(struct tracer *t, const char *path, const uint64_t *off,
				const uint64_t *cookie, const bool *ret, size_t n,
				struct tracer_probe_set *set, tracer_probe_fail_fn fail, void *ctx)
{
	uint64_t *roff, *rcookie;
	size_t i, nr = 0;
	int fd;

	set->fd[0] = set->fd[1] = -1;
	set->links = NULL;
	set->n_links = 0;
	if (!n)
		return 0;
	if (t->no_multi)
		return attach_each(t, path, off, cookie, ret, n, set, fail, ctx);
	fd = uprobe_multi(t->skel->progs.mt_dev_entry_multi, false, 0, path, off, cookie, n);
	if (fd < 0) {
		/* one bad offset refuses the whole link: then each function on its own */
		log__debug("cannot probe '%s' with uprobe_multi links: %s", path, strerror(-fd));
		return attach_each(t, path, off, cookie, ret, n, set, fail, ctx);
	}
	set->fd[0] = fd;
	roff = calloc(n, sizeof(*roff));
	rcookie = calloc(n, sizeof(*rcookie));
	if (!roff || !rcookie) {
		free(roff);
		free(rcookie);
		tracer__detach_device_set(set);
		if (fail)
			fail(ctx, -1, -ENOMEM);
		return 0;
	}
	for (i = 0; i < n; i++) {
		if (!ret[i])
			continue;
		roff[nr] = off[i];
		rcookie[nr++] = cookie[i];
	}
	if (nr) {
		fd = uprobe_multi(t->skel->progs.mt_dev_return_multi, true, 0, path, roff, rcookie,
				  nr);
		if (fd < 0) {
			/* entries without their returns would be half counted: each on its own */
			log__debug("cannot probe '%s' with uprobe_multi links: %s", path,
				   strerror(-fd));
			tracer__detach_device_set(set);
			n = attach_each(t, path, off, cookie, ret, n, set, fail, ctx);
		} else {
			set->fd[1] = fd;
		}
	}
	free(roff);
	free(rcookie);
	return n;
}

/*
 * Where BPF tells targets' code mappings, its program at the dynamic
 * linker's hook too (among the N functions of PATH), in SET. The kernel
 * runs it before or after the device entry program there (uprobe consumers
 * have no order): user space does not rely on either.
 */
static void attach_maps_hook(struct tracer *t, const char *path, const uint64_t *off,
			     const uint64_t *cookie, size_t n, struct tracer_probe_set *set)
{
	size_t i, cap = set->n_links;
	struct bpf_link *l;

	for (i = 0; t->maps_tell && i < n; i++) {
		if (MEMTRAIL_COOKIE_OP(cookie[i]) != MEMTRAIL_OP_LIBS)
			continue;
		l = bpf_program__attach_uprobe_opts(t->skel->progs.mt_maps_hook, -1, path, off[i],
						    NULL);
		if (!l)
			log__debug("cannot probe '%s' for its users' code mappings: %s", path,
				   strerror(errno));
		else if (add_link(set, &cap, l))
			return;
	}
}

/*
 * Descriptors kept free whatever the probes want: record's gate takes one
 * for each open it looks at (the kernel refuses the open itself when it
 * cannot give one), and the output files need theirs. Before uprobe_multi
 * (6.6) a file's probes are a perf event descriptor per function.
 */
#define FD_HEADROOM 64

/* Whether NEED more descriptors leave FD_HEADROOM free under the limit. */
static bool fds_left(size_t need)
{
	struct rlimit r;
	size_t used = 0;
	DIR *d;

	if (getrlimit(RLIMIT_NOFILE, &r) || r.rlim_cur == RLIM_INFINITY)
		return true;
	d = opendir("/proc/self/fd");
	if (!d)
		return true;
	while (readdir(d))
		used++;
	closedir(d);
	used = used > 3 ? used - 3 : 0;		/* ".", ".." and the directory's own */
	return used + need + FD_HEADROOM <= r.rlim_cur;
}

size_t tracer__attach_device_set(struct tracer *t, const char *path, const uint64_t *off,
				 const uint64_t *cookie, const bool *ret, size_t n,
				 struct tracer_probe_set *set, tracer_probe_fail_fn fail, void *ctx)
{
	size_t done, need = 4, i;

	for (i = 0; t->no_multi && i < n; i++)
		need += 1 + ret[i];
	if (!fds_left(need)) {
		set->fd[0] = set->fd[1] = -1;
		set->links = NULL;
		set->n_links = 0;
		fail(ctx, -1, -EMFILE);
		return 0;
	}
	done = attach_device_set(t, path, off, cookie, ret, n, set, fail, ctx);

	if (done)
		attach_maps_hook(t, path, off, cookie, n, set);
	return done;
}

void tracer__detach_device_set(struct tracer_probe_set *set)
{
	size_t i;
	int d;

	for (d = 0; d < 2; d++) {
		reaper__close(set->fd[d]);
		set->fd[d] = -1;
	}
	for (i = 0; i < set->n_links; i++)
		reaper__destroy_link(set->links[i]);
	free(set->links);
	set->links = NULL;
	set->n_links = 0;
}

int tracer__attach_heap(struct tracer *t, bool ret, int pid, const char *path,
			const uint64_t *offsets, const uint64_t *cookies, size_t n)
{
	if (!fds_left(1))
		return -EMFILE;
	return uprobe_multi(ret ? t->skel->progs.mt_heap_return : t->skel->progs.mt_heap_entry,
			    ret, pid, path, offsets, cookies, n);
}

bool tracer__heap_multi(const struct tracer *t)
{
	return !t->no_multi;
}

bool tracer__maps_told(const struct tracer *t)
{
	return t->maps_tell;
}

int tracer__maps_wanted_fd(const struct tracer *t)
{
	return t->maps_wanted ? bpf_map__fd(t->skel->maps.maps_wanted) : -1;
}

int tracer__attach_heap_each(struct tracer *t, int pid, const char *path,
			     const uint64_t *entry_off, const uint64_t *entry_cookie, size_t n_entry,
			     const uint64_t *ret_off, const uint64_t *ret_cookie, size_t n_ret,
			     struct tracer_probe_set *set)
{
	size_t i, cap = 0;
	int r, err;

	set->fd[0] = set->fd[1] = -1;
	set->links = NULL;
	set->n_links = 0;
	if (!fds_left(n_entry + n_ret))
		return -EMFILE;
	for (r = 0; r < 2; r++) {
		const uint64_t *off = r ? ret_off : entry_off;
		const uint64_t *cookie = r ? ret_cookie : entry_cookie;
		struct bpf_program *p = r ? t->skel->progs.mt_heap_return
					  : t->skel->progs.mt_heap_entry;
		struct bpf_program *entries[MEMTRAIL_HEAP_OPS];

		tracer_heap_entries(t->skel, entries);
		for (i = 0; i < (r ? n_ret : n_entry); i++) {
			/* before 5.15 no cookie: the entry program of the operation instead */
			uint32_t op = MEMTRAIL_COOKIE_OP(cookie[i]);
			LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = r,
				    .bpf_cookie = t->kf.attach_cookie ? cookie[i] : 0);
			struct bpf_link *l;

			if (!r && !t->kf.attach_cookie) {
				if (op < 1 || op > MEMTRAIL_HEAP_OPS) {
					tracer__detach_device_set(set);
					return -EINVAL;
				}
				p = entries[op - 1];
			}
			l = bpf_program__attach_uprobe_opts(p, pid, path, off[i], &opts);

			if (!l) {
				err = -errno;
				tracer__detach_device_set(set);
				return err;
			}
			if (add_link(set, &cap, l)) {
				tracer__detach_device_set(set);
				return -ENOMEM;
			}
		}
	}
	return 0;
}
