// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <string.h>

#include "format.h"
#include "kinds.h"
#include "table.h"

static const char *exit_text(char *buf, size_t len, const struct trail_target *tt)
{
	if (!tt->exited)
		snprintf(buf, len, "running");
	else if (tt->exit_signal)
		snprintf(buf, len, "signal %d", tt->exit_signal);
	else
		snprintf(buf, len, "exit %d", tt->exit_code);
	return buf;
}

void table__print_summary(FILE *f, const struct trail *t)
{
	char peak[32], cur[32], ex[32];
	uint64_t lost = 0;
	size_t i;
	int k;

	for (k = 0; k < MEMTRAIL_LOST_MAX; k++)
		lost += t->lost[k];
	fprintf(f, "%zu target%s, %.1f s, %llu event%s lost\n", t->n_targets,
		t->n_targets == 1 ? "" : "s", t->duration_ms / 1000.0,
		(unsigned long long)lost, lost == 1 ? "" : "s");
	if (!t->n_targets)
		return;
	fprintf(f, "%8s  %-16s %-10s %-10s %12s %12s\n", "PID", "COMM", "EXIT", "KIND",
		"PEAK", "FINAL");
	for (i = 0; i < t->n_targets; i++) {
		const struct trail_target *tt = &t->targets[i];
		bool first = true;

		for (k = 0; k < MEMTRAIL_KIND_MAX; k++) {
			if (!(t->kinds & (1U << k)))
				continue;
			if (first)
				fprintf(f, "%8u  %-16s %-10s ", tt->pid, tt->comm,
					exit_text(ex, sizeof(ex), tt));
			else
				fprintf(f, "%8s  %-16s %-10s ", "", "", "");
			fprintf(f, "%-10s %12s %12s\n", kind__name(k),
				format__bytes(peak, sizeof(peak), tt->peak[k]),
				format__bytes(cur, sizeof(cur), tt->current[k]));
			first = false;
		}
	}
	if (lost) {
		fprintf(f, "lost:");
		for (k = 0; k < MEMTRAIL_LOST_MAX; k++)
			if (t->lost[k])
				fprintf(f, " %s=%llu", trail__lost_name(k),
					(unsigned long long)t->lost[k]);
		fprintf(f, "\n");
	}
}
