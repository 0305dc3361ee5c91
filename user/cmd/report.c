// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* memtrail report: print a trail again, as the summary table or as JSON. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "container.h"
#include "diff.h"
#include "format.h"
#include "html.h"
#include "log.h"
#include "opts.h"
#include "perfetto.h"
#include "pprof.h"
#include "sanitize.h"
#include "table.h"
#include "trail.h"

struct report_opts {
	bool json, diff;
	uint64_t min_change;
	const char *pprof, *perfetto, *html;
	uint32_t top;
};

static int opt_min_change(void *base, const char *arg)
{
	struct report_opts *o = base;

	return format__option_bytes("--min-change", arg, 50, &o->min_change);
}

static const struct opt report_rows[] = {
	OPT_ROW_FLAG("json", 'j', struct report_opts, json,
		     "a JSON document instead of the table: the trail's targets (pid, ppid, comm, "
		     "cmdline, cgroup, exit, kinds, sites), without the timeline, and the lost "
		     "counters"),
	OPT_ROW_STR("pprof", 0, "OUT", struct report_opts, pprof,
		    "also write the allocation sites as a gzip-compressed pprof profile, for 'go "
		    "tool pprof -top OUT': four sample types per kind, never summed across kinds "
		    "(heap_inuse_space, the default, heap_alloc_space, mapped_inuse_space, ...); "
		    "labels pid, comm, phase, kind"),
	OPT_ROW_STR("perfetto", 0, "OUT", struct report_opts, perfetto,
		    "also write a Chrome Trace Event file for ui.perfetto.dev and "
		    "chrome://tracing: a process per target, a counter track per target and kind "
		    "(bytes), phases as slices, events and verdicts as instants"),
	OPT_ROW_STR("html", 0, "OUT", struct report_opts, html,
		    "also write one self-contained HTML page (no network): per target a stacked "
		    "timeline of its kinds with phase bands, event markers, the cgroup limit and "
		    "each kind's peak, per-phase peaks, the verdict, the top sites with their "
		    "chains, and a flame graph of every site's chain"),
	OPT_ROW_U32("top", 't', "N", struct report_opts, top, 0, 1000,
		    "sites listed per target and phase", 0),
	OPT_ROW_FLAG("diff", 'd', struct report_opts, diff,
		     "report --diff BASE NEW: what changed from BASE to NEW, per target (matched "
		     "by command line, else comm): each kind's peak, each phase's segment peak, "
		     "and the --top sites (matched by their whole chain) whose bytes allocated or "
		     "in use changed most, growth and shrinkage alike; with --json as JSON; with "
		     "--pprof OUT, NEW's sites and BASE's negated as one profile (as 'go tool "
		     "pprof -diff_base BASE NEW' reads the two); with --html OUT, a page of the "
		     "same with a flame graph of every site that changed (red grew, green "
		     "shrank)"),
	OPT_ROW_FN("min-change", 0, "BYTES", opt_min_change,
		   "--diff's table leaves out changes smaller than BYTES (default 1048576; "
		   "--json has them all)"),
	OPT_ROW_HELP,
	OPT_ROW_END,
};

static void usage(FILE *f, const struct opts_cmd *c)
{
	fprintf(f,
"usage: memtrail report [--json] [--pprof OUT.pb.gz] [--perfetto OUT.json]\n"
"                      [--html OUT.html] [--top N] FILE\n"
"       memtrail report --diff [--json] [--pprof OUT.pb.gz] [--html OUT.html]\n"
"                      [--top N] [--min-change BYTES] BASE NEW\n"
"\n"
"Print the summary of a trail written by 'memtrail record' (or of a snapshot\n"
"or verdict file of 'memtrail watch'): levels per target and phase, verdicts,\n"
"and the top allocation sites of each phase.\n"
"\n");
	opts__help(f, c);
	fprintf(f,
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

/* A snapshot's top site (watch_top_site's object): "top site: LABEL, 1.2 GiB mapped". */
static void print_top_site(json_t *top)
{
	char site[SANITIZE_LEN(512)], kind[SANITIZE_LEN(16)], size[32];
	json_t *bytes = json_object_get(top, "inuse_bytes");

	if (!json_is_string(json_object_get(top, "site")) || !json_is_integer(bytes))
		return;
	printf("top site: %s, %s %s\n",
	       sanitize__str(site, sizeof(site), json_string_value(json_object_get(top, "site"))),
	       format__bytes(size, sizeof(size), json_integer_value(bytes)),
	       sanitize__str(kind, sizeof(kind),
			     json_string_value(json_object_get(top, "kind")) ?: "?"));
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
		container__describe(who, sizeof(who), t->doc_attr);
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
	container__describe(who, sizeof(who), t->doc_attr);
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
	print_top_site(json_object_get(snap, "top_site"));
}

/* report --diff BASE NEW: 0, 1 (a file unreadable, said) or 2 (the command line). */
static int report_diff(const struct report_opts *o, int n, char **files)
{
	struct trail base, new;
	char err[512];
	json_t *d;
	int ret = 0;

	if (n != 2) {
		opts__usage_error("report", "--diff takes two trail files: BASE NEW");
		return 2;
	}
	if (o->perfetto) {
		opts__usage_error("report", "--diff writes no --perfetto: write each trail's and "
				  "open both");
		return 2;
	}
	if (check_outputs(files[0], o->pprof, NULL, o->html) ||
	    check_outputs(files[1], o->pprof, NULL, o->html))
		return 2;
	if (trail__read_levels(&base, files[0], err, sizeof(err))) {
		log__error("cannot read trail '%s': %s", files[0], err);
		return 1;
	}
	if (trail__read_levels(&new, files[1], err, sizeof(err))) {
		log__error("cannot read trail '%s': %s", files[1], err);
		trail__free(&base);
		return 1;
	}
	d = diff__json(&base, &new, o->top, false);
	if (d) {
		json_object_set_new(d, "base", sanitize__json(files[0]));
		json_object_set_new(d, "new", sanitize__json(files[1]));
	}
	if (!d) {
		log__error("out of memory");
		ret = 1;
	} else if (o->json) {
		if (json_dumpf(d, stdout, JSON_INDENT(2)) || fputc('\n', stdout) == EOF)
			ret = 1;
	} else {
		char a[SANITIZE_LEN(256)], b[SANITIZE_LEN(256)];

		printf("what changed from %s (BASE) to %s (NEW)\n", sanitize__str(a, sizeof(a), files[0]),
		       sanitize__str(b, sizeof(b), files[1]));
		diff__print(stdout, d, (json_int_t)o->min_change);
	}
	if (d && o->pprof) {
		size_t samples;
		int err = pprof__write_diff(&base, &new, o->pprof, &samples);

		if (err) {
			log__error("cannot write pprof profile '%s': %s", o->pprof, strerror(-err));
			ret = 1;
		} else {
			log__info("pprof profile of the difference written to '%s' (%zu sites)",
				  o->pprof, samples);
		}
	}
	if (d && o->html) {
		/* every site that changed, each chain as the page draws it */
		json_t *page = diff__json(&base, &new, 0, true);
		int err = page ? html__write_diff(page, files[0], files[1], o->html) : -ENOMEM;

		json_decref(page);
		if (err) {
			log__error("cannot write html report '%s': %s", o->html, strerror(-err));
			ret = 1;
		} else {
			log__info("html report of the difference written to '%s'", o->html);
		}
	}
	if (fflush(stdout)) {
		log__error("cannot write the report: %s", strerror(errno));
		ret = 1;
	}
	json_decref(d);
	trail__free(&base);
	trail__free(&new);
	return ret;
}

int cmd_report(int argc, char **argv)
{
	struct report_opts o = { .top = 5, .min_change = 1 << 20 };
	const struct opt_group groups[] = { { "options", report_rows, &o } };
	const struct opts_cmd cmd = { .name = "report", .groups = groups, .n_groups = 1,
				      .usage = usage };
	struct trail t;
	char err[512];
	size_t samples;
	int ret = 0, first;

	ret = opts__parse(&cmd, argc, argv, &first);
	if (ret)
		return ret > 0 ? 0 : 2;
	if (o.diff)
		return report_diff(&o, argc - first, argv + first);
	if (first != argc - 1) {
		opts__usage_error("report", first >= argc ? "no trail file given" :
				  "give one trail file");
		return 2;
	}
	if (check_outputs(argv[first], o.pprof, o.perfetto, o.html))
		return 2;
	/* the samples kept only where a timeline is drawn */
	if (o.html || o.perfetto)
		ret = trail__read(&t, argv[first], err, sizeof(err));
	else
		ret = trail__read_levels(&t, argv[first], err, sizeof(err));
	if (ret) {
		log__error("cannot read trail '%s': %s", argv[first], err);
		return 1;
	}
	if (o.json) {
		json_t *root = trail__to_json(&t, false);

		if (!root || json_dumpf(root, stdout, JSON_INDENT(2)) || fputc('\n', stdout) == EOF)
			ret = 1;
		json_decref(root);
	} else {
		print_head(&t, argv[first]);
		table__print_summary(stdout, &t);
		table__print_phases(stdout, &t);
		table__print_verdicts(stdout, &t);
		table__print_device_failures(stdout, &t);
		table__print_sites(stdout, &t, o.top);
	}
	if (o.pprof) {
		int err = pprof__write(&t, o.pprof, &samples);

		if (err) {
			log__error("cannot write pprof profile '%s': %s", o.pprof, strerror(-err));
			ret = 1;
		} else {
			log__info("pprof profile written to '%s' (%zu sites)", o.pprof, samples);
		}
	}
	if (o.perfetto) {
		int err = perfetto__write(&t, o.perfetto, &samples);

		if (err) {
			log__error("cannot write perfetto trace '%s': %s", o.perfetto,
				   strerror(-err));
			ret = 1;
		} else {
			log__info("perfetto trace written to '%s' (%zu events)", o.perfetto,
				  samples);
		}
	}
	if (o.html) {
		bool decimated;
		int err = html__write(&t, o.html, &decimated);

		if (err) {
			log__error("cannot write html report '%s': %s", o.html, strerror(-err));
			ret = 1;
		} else {
			log__info("html report written to '%s'%s", o.html,
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
