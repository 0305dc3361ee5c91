// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* memtrail: an eBPF memory tracer. main() only dispatches to a subcommand. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "log.h"

#ifndef MEMTRAIL_VERSION
#define MEMTRAIL_VERSION "0.1.0"
#endif

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
} commands[] = {
	{ "record", cmd_record, "trace processes' memory until they exit, write a trail" },
	{ "watch", cmd_watch, "flight recorder: snapshots before OOM kills, exit-137 verdicts" },
	{ "top", cmd_top, "a live view of memory per process or pod, with phase and trend" },
	{ "daemonset", cmd_daemonset, "print a Kubernetes DaemonSet that runs watch on every node" },
	{ "report", cmd_report, "print a trail again: table, JSON, HTML, Perfetto or pprof" },
	{ "mark", cmd_mark, "start a named phase in a process a running memtrail traces" },
	{ "features", cmd_features, "what this kernel offers: each source's state, and why" },
	{ "demo", cmd_demo, "record a bundled example workload and explain the output" },
	{ "demo-workload", cmd_demo_workload, NULL },
};

static void usage(FILE *f)
{
	size_t i;

	fprintf(f,
"usage: memtrail <command> [options]\n"
"\n"
"memtrail traces how much memory processes hold, of which kind, over time,\n"
"with BPF and no change to the traced programs.\n"
"\n"
"commands:\n");
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (commands[i].help)
			fprintf(f, "  %-9s  %s\n", commands[i].name, commands[i].help);
	fprintf(f,
"\n"
"Run 'memtrail <command> --help' for its options. New here? Run 'memtrail demo'.\n");
}

int main(int argc, char **argv)
{
	size_t i;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("memtrail %s\n", MEMTRAIL_VERSION);
		return 0;
	}
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	log__error("unknown command '%s' (see 'memtrail --help')", argv[1]);
	return 2;
}
