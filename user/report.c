// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* memtrail report: print a trail again, as the summary table or as JSON. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "container.h"
#include "format.h"
#include "html.h"
#include "log.h"
#include "perfetto.h"
#include "pprof.h"
#include "sanitize.h"
#include "table.h"
#include "trail.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: memtrail report [--json] [--pprof OUT.pb.gz] [--perfetto OUT.json]\n"
"                      [--html OUT.html] [--top N] FILE\n"
"\n"
"Print the summary of a trail written by 'memtrail record' (or of a snapshot\n"
"or verdict file of 'memtrail watch'): levels per target and phase, verdicts,\n"
"and the top allocation sites of each phase.\n"
"\n"
"  -j, --json          a JSON document instead of the table: the trail's targets\n"
"                      (pid, ppid, comm, cmdline, cgroup, exit, kinds, sites),\n"
"                      without the timeline, and the lost counters\n"
"      --pprof OUT     also write the allocation sites as a gzip-compressed pprof\n"
"                      profile, for 'go tool pprof -top OUT': four sample\n"
"                      types per kind, never summed across kinds\n"
"                      (heap_inuse_space, the default, heap_alloc_space,\n"
"                      mapped_inuse_space, ...); labels pid, comm, phase, kind\n"
"      --perfetto OUT  also write a Chrome Trace Event file for ui.perfetto.dev and\n"
"                      chrome://tracing: a process per target, a counter track\n"
"                      per target and kind (bytes), phases as slices, events and\n"
"                      verdicts as instants\n"
"      --html OUT      also write one self-contained HTML page (no network): per\n"
"                      target a stacked timeline of its kinds with phase bands,\n"
"                      event markers and the cgroup limit, per-phase peaks, the\n"
"                      verdict and the top sites\n"
"  -t, --top N         sites listed per target and phase, 0..1000 (default 5)\n"
"  -h, --help          this help\n"
"\n"
"Each OUT is written whole or not at all (a new file renamed into place), with\n"
"mode 0600; none may be FILE or another OUT.\n");
}

/* A and B name one file: by name, or as the same device and inode. */
static bool same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	if (!strcmp(a, b))
		return true;
	return !stat(a, &sa) && !stat(b, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* No output (NULL: not asked for) may replace the trail being read, nor another output. */
static int check_outputs(const char *trail, const char *pprof, const char *perfetto,
			 const char *html)
{
	const struct { const char *opt, *path; } outs[] = {
		{ "--pprof", pprof }, { "--perfetto", perfetto }, { "--html", html },
	};
	size_t i, j;

	for (i = 0; i < sizeof(outs) / sizeof(outs[0]); i++) {
		if (!outs[i].path)
			continue;
		if (same_file(outs[i].path, trail)) {
			log__error("%s '%s' is the trail being read: give another file",
				   outs[i].opt, outs[i].path);
			return -EINVAL;
		}
		for (j = 0; j < i; j++) {
			if (outs[j].path && same_file(outs[i].path, outs[j].path)) {
				log__error("%s '%s' and %s '%s' are the same file: give each its own",
					   outs[j].opt, outs[j].path, outs[i].opt, outs[i].path);
				return -EINVAL;
			}
		}
	}
	return 0;
}

/* The integer at KEY of O, or -1. */
static long long int_or(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

/* "NAME at its limit L (usage U)" of a snapshot's "oom" or "pressure" object. */
static void print_cgroup(const char *what, json_t *o)
{
	char cg[SANITIZE_LEN(256)], limit[32], usage[32];
	long long l = int_or(o, "limit"), u = int_or(o, "usage");

	sanitize__str(cg, sizeof(cg), json_string_value(json_object_get(o, "cgroup")));
	printf("%s: cgroup %s, limit %s, usage %s\n", what, cg,
	       l >= 0 ? format__bytes(limit, sizeof(limit), l) : "none",
	       u >= 0 ? format__bytes(usage, sizeof(usage), u) : "?");
}

/*
 * What the file is, first: a trail, a snapshot of watch's (why it was taken,
 * of which process, its pod) or a verdict file of watch's.
 */
static void print_head(const struct trail *t, const char *file)
{
	static const char *const whys[][2] = {
		{ "oom_kill", "the kernel OOM killer chose" },
		{ "pressure", "memory pressure on" },
		{ "device_oom", "device out of memory in" },
	};
	char path[SANITIZE_LEN(256)], command[SANITIZE_LEN(256)], who[1024];
	char started[SANITIZE_LEN(sizeof(t->started))], comm[SANITIZE_LEN(32)];
	json_t *snap = t->snapshot;
	const char *trigger, *why = NULL;
	size_t i;

	sanitize__str(path, sizeof(path), file);
	sanitize__str(started, sizeof(started), t->started);
	if (t->verdict_doc) {
		container__describe(who, sizeof(who), t->verdict_doc);
		printf("verdict file %s: written %s%s%s\n", path, started, who[0] ? ", " : "", who);
		return;
	}
	printf("%s %s: %s, started %s\n", snap ? "snapshot" : "trail", path,
	       sanitize__str(command, sizeof(command), t->command), started);
	if (!snap)
		return;
	trigger = json_string_value(json_object_get(snap, "trigger"));
	for (i = 0; trigger && i < sizeof(whys) / sizeof(whys[0]); i++)
		if (!strcmp(trigger, whys[i][0]))
			why = whys[i][1];
	container__describe(who, sizeof(who), snap);
	sanitize__str(comm, sizeof(comm), json_string_value(json_object_get(snap, "comm")));
	printf("snapshot: %s %lld (%s)%s%s\n",
	       why ? why : sanitize__str(command, sizeof(command), trigger),
	       int_or(snap, "pid"), comm, who[0] ? ", " : "", who);
	if (trigger && !strcmp(trigger, "oom_kill") &&
	    json_is_object(json_object_get(snap, "oom"))) {
		json_t *oom = json_object_get(snap, "oom");

		if (json_is_string(json_object_get(oom, "cgroup")) &&
		    !strcmp(json_string_value(json_object_get(oom, "scope")) ?: "", "cgroup"))
			print_cgroup("oom", oom);
		else
			printf("oom: the whole machine's memory (global)\n");
	} else if (trigger && !strcmp(trigger, "pressure") &&
		   json_is_object(json_object_get(snap, "pressure"))) {
		print_cgroup("pressure", json_object_get(snap, "pressure"));
	}
}

int cmd_report(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "pprof", required_argument, NULL, 'P' },
		{ "perfetto", required_argument, NULL, 'F' },
		{ "html", required_argument, NULL, 'H' },
		{ "top", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct trail t;
	char err[512];
	const char *pprof = NULL, *perfetto = NULL, *html = NULL;
	bool json = false;
	uint64_t top = 5;
	size_t samples;
	int c, ret = 0;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":jht:", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'P':
			pprof = optarg;
			break;
		case 'H':
			html = optarg;
			break;
		case 'F':
			perfetto = optarg;
			break;
		case 't':
			if (format__parse_u64(optarg, 0, 1000, &top)) {
				log__error("invalid --top '%s': give 0 to 1000", optarg);
				return 2;
			}
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
	if (check_outputs(argv[optind], pprof, perfetto, html))
		return 2;
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
		print_head(&t, argv[optind]);
		table__print_summary(stdout, &t);
		table__print_phases(stdout, &t);
		table__print_verdicts(stdout, &t);
		table__print_device_failures(stdout, &t);
		table__print_sites(stdout, &t, top);
	}
	if (pprof) {
		int err = pprof__write(&t, pprof, &samples);

		if (err) {
			log__error("cannot write pprof profile '%s': %s", pprof, strerror(-err));
			ret = 1;
		} else {
			log__info("pprof profile written to '%s' (%zu sites)", pprof, samples);
		}
	}
	if (perfetto) {
		int err = perfetto__write(&t, perfetto, &samples);

		if (err) {
			log__error("cannot write perfetto trace '%s': %s", perfetto, strerror(-err));
			ret = 1;
		} else {
			log__info("perfetto trace written to '%s' (%zu events)", perfetto, samples);
		}
	}
	if (html) {
		bool decimated;
		int err = html__write(&t, html, &decimated);

		if (err) {
			log__error("cannot write html report '%s': %s", html, strerror(-err));
			ret = 1;
		} else {
			log__info("html report written to '%s'%s", html,
				  decimated ? " (timelines decimated for drawing)" : "");
		}
	}
	if (fflush(stdout)) {
		log__error("cannot write the report: %s", strerror(errno));
		ret = 1;
	}
	trail__free(&t);
	return ret;
}
