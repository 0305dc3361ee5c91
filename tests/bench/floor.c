// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * floor LIBC -- CMD [ARGS...]: run CMD with counting uprobes on LIBC's
 * malloc (entry and return) and free (entry), attached for CMD alone before
 * it starts; print CMD's output, then {"floor_hits": N} on stderr.
 *
 * floor --hooks -- CMD [ARGS...]: run CMD with counting programs on the
 * kernel hooks memtrail watch takes for every process (floor.bpf.c); print
 * CMD's output, then {"floor_hits": N, "floor_run_ns": NS} on stderr, NS the
 * programs' run time (the kernel's bpf_stats: zero unless enabled).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/libbpf.h>
#include <bpf/bpf.h>

#include "floor.skel.h"

#define MAX_LINKS 8

static struct bpf_link *attach(struct bpf_program *prog, pid_t pid, const char *lib,
			       const char *func, bool ret)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = func, .retprobe = ret);
	struct bpf_link *l = bpf_program__attach_uprobe_opts(prog, pid, lib, 0, &opts);

	if (!l)
		fprintf(stderr, "floor: cannot attach to '%s' in '%s': %s\n", func, lib,
			strerror(errno));
	return l;
}

/* The kernel hooks' programs (all but the uprobes). */
static size_t hook_progs(struct floor_bpf *skel, struct bpf_program **p)
{
	p[0] = skel->progs.floor_fork;
	p[1] = skel->progs.floor_exec;
	p[2] = skel->progs.floor_exit;
	p[3] = skel->progs.floor_rss;
	p[4] = skel->progs.floor_lock;
	p[5] = skel->progs.floor_unlock;
	p[6] = skel->progs.floor_signal;
	return 7;
}

int main(int argc, char **argv)
{
	struct bpf_link *links[MAX_LINKS] = { NULL };
	struct bpf_program *hooks[MAX_LINKS];
	unsigned long long total = 0, run_ns = 0, *per_cpu;
	bool kernel_hooks = argc > 1 && !strcmp(argv[1], "--hooks");
	size_t n_hooks, n_links = 0, i;
	struct floor_bpf *skel;
	int go[2], status, ncpu, ret = 1;
	__u32 zero = 0;
	pid_t child;

	if (argc < 4 || strcmp(argv[2], "--")) {
		fprintf(stderr, "usage: floor LIBC -- CMD [ARGS...]\n"
				"       floor --hooks -- CMD [ARGS...]\n");
		return 2;
	}
	skel = floor_bpf__open();
	if (!skel) {
		fprintf(stderr, "floor: cannot open BPF: %s\n", strerror(errno));
		return 1;
	}
	n_hooks = hook_progs(skel, hooks);
	for (i = 0; i < n_hooks; i++)
		bpf_program__set_autoload(hooks[i], kernel_hooks);
	bpf_program__set_autoload(skel->progs.floor_entry, !kernel_hooks);
	bpf_program__set_autoload(skel->progs.floor_return, !kernel_hooks);
	if (floor_bpf__load(skel)) {
		fprintf(stderr, "floor: cannot load BPF: %s\n", strerror(errno));
		goto out;
	}
	if (pipe(go)) {
		perror("floor: pipe");
		goto out;
	}
	child = fork();
	if (child < 0) {
		perror("floor: fork");
		goto out;
	}
	if (!child) {
		char c;

		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(127);
		execvp(argv[3], argv + 3);
		_exit(127);
	}
	close(go[0]);
	if (kernel_hooks) {
		for (i = 0; i < n_hooks; i++) {
			links[n_links] = bpf_program__attach(hooks[i]);
			if (!links[n_links++]) {
				fprintf(stderr, "floor: cannot attach '%s': %s\n",
					bpf_program__name(hooks[i]), strerror(errno));
				break;
			}
		}
	} else {
		links[n_links++] = attach(skel->progs.floor_entry, child, argv[1], "malloc", false);
		links[n_links++] = attach(skel->progs.floor_return, child, argv[1], "malloc", true);
		links[n_links++] = attach(skel->progs.floor_entry, child, argv[1], "free", false);
	}
	for (i = 0; i < n_links && links[i]; i++)
		;
	if (i < n_links) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		goto out;
	}
	if (write(go[1], "g", 1) != 1) {
		perror("floor: write");
		goto out;
	}
	close(go[1]);
	if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "floor: '%s' failed\n", argv[3]);
		goto out;
	}
	ncpu = libbpf_num_possible_cpus();
	per_cpu = calloc(ncpu, sizeof(*per_cpu));
	if (per_cpu && !bpf_map_lookup_elem(bpf_map__fd(skel->maps.hits), &zero, per_cpu))
		for (i = 0; i < (size_t)ncpu; i++)
			total += per_cpu[i];
	free(per_cpu);
	char by_hook[1024] = "";
	size_t used = 0;

	for (i = 0; kernel_hooks && i < n_hooks; i++) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);

		if (bpf_obj_get_info_by_fd(bpf_program__fd(hooks[i]), &info, &len))
			continue;
		run_ns += info.run_time_ns;
		/* each hook's runs: which of them a process takes most */
		if (used < sizeof(by_hook))
			used += snprintf(by_hook + used, sizeof(by_hook) - used, "%s\"%s\": %llu",
					 used ? ", " : "", bpf_program__name(hooks[i]) + 6,
					 (unsigned long long)info.run_cnt);
	}
	if (kernel_hooks)
		fprintf(stderr, "{\"floor_hits\": %llu, \"floor_run_ns\": %llu, \"runs\": {%s}}\n",
			total, run_ns, by_hook);
	else
		fprintf(stderr, "{\"floor_hits\": %llu}\n", total);
	ret = 0;
out:
	for (i = 0; i < n_links; i++)
		bpf_link__destroy(links[i]);
	floor_bpf__destroy(skel);
	return ret;
}
