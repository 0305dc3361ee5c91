// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * memtrail mark PID NAME: start phase NAME in a process that a running
 * memtrail traces. Each running memtrail has loaded a program named mt_mark;
 * running it (BPF_PROG_TEST_RUN) switches the phase in that memtrail's maps
 * and answers whether it traces the PID. No socket, no files.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>

#include "commands.h"
#include "format.h"
#include "log.h"
#include "opts.h"
#include "phase.h"
#include "proc.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: memtrail mark PID NAME\n"
"\n"
"Start phase NAME now in process PID in every running memtrail that traces it\n"
"('memtrail record', or a node's 'memtrail watch').\n"
"NAME: printable characters, at most 63 bytes. Needs root.\n");
}

/* 1: switched, 0: that memtrail does not trace the PID, <0: -errno. */
static int try_program(uint32_t id, const struct memtrail_mark_args *args)
{
	struct bpf_prog_info info = { 0 };
	uint32_t len = sizeof(info);
	int fd, ret;
	/* mt_mark_raw (kernels before 5.14): raw tracepoint arguments, the name by address */
	uint64_t raw[2] = { args->tgid, (uintptr_t)args->name };
	LIBBPF_OPTS(bpf_test_run_opts, run, .ctx_in = args, .ctx_size_in = sizeof(*args));

	fd = bpf_prog_get_fd_by_id(id);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;	/* unloaded meanwhile */
	ret = bpf_obj_get_info_by_fd(fd, &info, &len);
	if (ret || (strcmp(info.name, "mt_mark") && strcmp(info.name, "mt_mark_raw"))) {
		close(fd);
		return 0;
	}
	if (!strcmp(info.name, "mt_mark_raw")) {
		run.ctx_in = raw;
		run.ctx_size_in = sizeof(raw);
	}
	ret = bpf_prog_test_run_opts(fd, &run);
	close(fd);
	if (ret)
		return -errno;
	return run.retval == 1;
}

int cmd_mark(int argc, char **argv)
{
	struct memtrail_mark_args args = { 0 };
	uint32_t id = 0, marked = 0;
	char why[128];
	uint64_t pid;
	int ret;

	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		usage(stdout);
		return 0;
	}
	if (argc != 3) {
		opts__usage_error("mark", "give a PID and a phase name");
		return 2;
	}
	if (format__parse_u64(argv[1], 1, INT32_MAX, &pid)) {
		log__error("invalid PID '%s'", argv[1]);
		return 2;
	}
	if (phase__check_name(argv[2], why, sizeof(why))) {
		log__error("invalid phase name: %s", why);
		return 2;
	}
	if (!proc__alive(pid)) {
		log__error("no process with PID %llu", (unsigned long long)pid);
		return 1;
	}
	args.tgid = pid;
	snprintf(args.name, sizeof(args.name), "%s", argv[2]);
	/* every memtrail that traces it: a node's watch and a user's record alike */
	for (;;) {
		if (bpf_prog_get_next_id(id, &id)) {
			if (errno == ENOENT)
				break;
			log__error("cannot list BPF programs: %s%s", strerror(errno),
				   errno == EPERM ? " (memtrail needs root: run it with sudo)" : "");
			return 1;
		}
		ret = try_program(id, &args);
		if (ret < 0) {
			log__error("cannot run memtrail's mark program: %s", strerror(-ret));
			return 1;
		}
		marked += ret;
	}
	if (marked == 1)
		log__info("process %llu entered phase '%s'", (unsigned long long)pid, args.name);
	if (marked > 1)
		log__info("process %llu entered phase '%s' in the %u memtrails that trace it",
			  (unsigned long long)pid, args.name, marked);
	if (marked)
		return 0;
	log__error("no running memtrail traces PID %llu", (unsigned long long)pid);
	return 1;
}
