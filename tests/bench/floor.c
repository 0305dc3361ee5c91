// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * floor LIBC -- CMD [ARGS...]: run CMD with counting uprobes on LIBC's
 * malloc (entry and return) and free (entry), attached for CMD alone before
 * it starts; print CMD's output, then {"floor_hits": N} on stderr.
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

int main(int argc, char **argv)
{
	struct bpf_link *links[3] = { NULL };
	struct floor_bpf *skel;
	int go[2], status, ncpu, i, ret = 1;
	unsigned long long total = 0, *per_cpu;
	__u32 zero = 0;
	pid_t child;

	if (argc < 4 || strcmp(argv[2], "--")) {
		fprintf(stderr, "usage: floor LIBC -- CMD [ARGS...]\n");
		return 2;
	}
	skel = floor_bpf__open_and_load();
	if (!skel) {
		fprintf(stderr, "floor: cannot load BPF: %s\n", strerror(errno));
		return 1;
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
	links[0] = attach(skel->progs.floor_entry, child, argv[1], "malloc", false);
	links[1] = attach(skel->progs.floor_return, child, argv[1], "malloc", true);
	links[2] = attach(skel->progs.floor_entry, child, argv[1], "free", false);
	if (!links[0] || !links[1] || !links[2]) {
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
		for (i = 0; i < ncpu; i++)
			total += per_cpu[i];
	free(per_cpu);
	fprintf(stderr, "{\"floor_hits\": %llu}\n", total);
	ret = 0;
out:
	for (i = 0; i < 3; i++)
		bpf_link__destroy(links[i]);
	floor_bpf__destroy(skel);
	return ret;
}
