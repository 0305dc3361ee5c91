// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The report's tables from trails as anyone may write them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "table.h"
#include "trail.h"

/* The sites table of the trail in TEXT (JSON, read as a tree), as report prints it. */
static char *sites_table(const char *text)
{
	json_t *root = json_loads(text, 0, NULL);
	struct trail t;
	char err[256], *out = NULL;
	size_t len = 0;
	FILE *f;

	assert_non_null(root);
	if (trail__from_json(&t, root, err, sizeof(err)))
		fail_msg("not read: %s", err);
	json_decref(root);
	f = open_memstream(&out, &len);
	assert_non_null(f);
	table__print_sites(f, &t, 5);
	fclose(f);
	trail__free(&t);
	return out;
}

/*
 * Sites without a kind or a phase, folded or not (found by the fuzzer:
 * strcmp on the missing kind, and on the phase of another folded site),
 * are listed with '?' for what they lack.
 */
static void sites_without_kind_or_phase(void **state)
{
	char *out;

	(void)state;
	out = sites_table("{\"memtrail\": 1, \"targets\": [{\"pid\": 3, \"comm\": \"svc\", "
			  "\"exit\": null, \"kinds\": {}, \"sites\": {\"heap\": {}, \"list\": ["
			  "{\"phase\": \"load\", \"phase_seq\": 1, \"alloc_bytes\": 4096},"
			  "{\"kind\": \"mapped\", \"phase_seq\": 2, \"alloc_bytes\": 8192},"
			  "{\"kind\": \"heap\", \"folded\": true, \"alloc_bytes\": 1},"
			  "{\"kind\": \"heap\", \"phase\": \"step\", \"folded\": true, \"alloc_bytes\": 2},"
			  "{\"kind\": \"faults\", \"phase\": \"step\", \"folded\": true}]}}]}");
	assert_non_null(out);
	assert_non_null(strstr(out, "allocation sites of 3 (svc): heap ?"));
	assert_non_null(strstr(out, "  load\n"));
	assert_non_null(strstr(out, "    ?            4.00 KiB"));
	assert_non_null(strstr(out, "  ?\n    KIND"));
	assert_non_null(strstr(out, "    mapped       8.00 KiB"));
	/* the folded sites: one group per name, those of none together */
	assert_non_null(strstr(out, "  step (folded: phases beyond the listed ones)\n"));
	assert_non_null(strstr(out, "  ? (folded: phases beyond the listed ones)\n"));
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sites_without_kind_or_phase),
	};

	return cmocka_run_group_tests_name("table", tests, NULL, NULL);
}
