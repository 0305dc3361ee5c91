// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* memtrail report: print a trail again, as the summary table or as JSON. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "log.h"
#include "table.h"
#include "trail.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: memtrail report [--json] FILE\n"
"\n"
"Print the summary of a trail written by 'memtrail record'.\n"
"\n"
"  -j, --json    a JSON document instead of the table: the trail's targets\n"
"                (pid, ppid, comm, cmdline, cgroup, exit, kinds), without the\n"
"                timeline, and the lost counters\n"
"  -h, --help    this help\n");
}

int cmd_report(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct trail t;
	char err[512];
	bool json = false;
	int c, ret = 0;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":jh", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case ':':
			log__error("option '%s' needs a value", argv[optind - 1]);
			fprintf(stderr, "Try 'memtrail report --help'.\n");
			return 2;
		default:
			log__error("unknown option '%s'", argv[optind - 1]);
			fprintf(stderr, "Try 'memtrail report --help'.\n");
			return 2;
		}
	}
	if (optind != argc - 1) {
		log__error(optind >= argc ? "no trail file given" : "give one trail file");
		fprintf(stderr, "Try 'memtrail report --help'.\n");
		return 2;
	}
	if (trail__read(&t, argv[optind], err, sizeof(err))) {
		log__error("cannot read trail '%s': %s", argv[optind], err);
		return 1;
	}
	if (json) {
		json_t *root = trail__to_json(&t, false);

		if (!root || json_dumpf(root, stdout, JSON_INDENT(2)) || fputc('\n', stdout) == EOF)
			ret = 1;
		json_decref(root);
	} else {
		printf("trail %s: %s, started %s\n", argv[optind],
		       t.command ? t.command : "?", t.started);
		table__print_summary(stdout, &t);
		table__print_phases(stdout, &t);
		table__print_verdicts(stdout, &t);
	}
	if (fflush(stdout)) {
		log__error("cannot write the report: %s", strerror(errno));
		ret = 1;
	}
	trail__free(&t);
	return ret;
}
