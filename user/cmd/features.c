// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* memtrail features: how memtrail works on the running kernel, source by source. */
#include <bpf/libbpf.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

#include "commands.h"
#include "kfeatures.h"
#include "log.h"
#include "opts.h"
#include "sites.h"

/* Python lines come with deep heap samples: where the kernel has no heap probes, none. */
static bool python_read(const struct kernel_features *kf)
{
	return kf->f[FEAT_HEAP].state != FEATURE_NO;
}

static const struct opt features_rows[] = {
	{ .type = OPT_FLAG, .name = "json", .off = 0,
	  .help = "one JSON object, as recorded in a trail's \"kernel\"" },
	OPT_ROW_HELP,
	OPT_ROW_END,
};

static void features_usage(FILE *f, const struct opts_cmd *c)
{
	fprintf(f, "usage: memtrail features [--json]\n"
		"\n"
		"Probe the running kernel and print, for each source, how memtrail\n"
		"works here: yes (as designed), fallback (another way, as exact),\n"
		"degraded (with the bound stated) or no (and why); last, the Python\n"
		"versions whose lines sites name. Needs root.\n"
		"\n");
	opts__help(f, c);
}

int cmd_features(int argc, char **argv)
{
	bool json = false;
	const struct opt_group groups[] = { { "options", features_rows, &json } };
	const struct opts_cmd cmd = { .name = "features", .groups = groups, .n_groups = 1,
				      .usage = features_usage, .no_args = true };
	struct kernel_features kf;
	int first, err;

	err = opts__parse(&cmd, argc, argv, &first);
	if (err)
		return err > 0 ? 0 : 2;
	if (!features__have_caps()) {
		log__error("cannot probe BPF features: %s", geteuid() ?
			   "memtrail needs root: run it with sudo" :
			   "memtrail needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN");
		return 1;
	}
	libbpf_set_print(NULL);
	if (features__probe(&kf))
		return 1;
	if (json) {
		json_t *j = features__json(&kf);

		if (!j || json_dumpf(j, stdout, JSON_INDENT(2)) || putchar('\n') == EOF) {
			json_decref(j);
			log__error("cannot print the features");
			return 1;
		}
		json_decref(j);
		return 0;
	}
	features__print(&kf, stdout);
	printf("%-13s %-9s %s\n", "python", python_read(&kf) ? "yes" : "no",
	       python_read(&kf) ? "the lines of " SITES_PYTHON_VERSIONS " (free-threaded "
	       "builds are said to be not read), in deep heap and mapping sites" :
	       "no heap probes on this kernel: no deep stacks to read Python lines into");
	return 0;
}
