// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The feature table from the facts probed (kfeatures.c features__decide):
 * for the facts of Debian's 5.10, 6.1 and 7.3 kernels (what each has, by
 * the version that brought it), the states those kernels' own 'memtrail
 * features' printed in the kernel matrix's guests. What record loads
 * follows these states, so a change to the rules shows here first.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "kfeatures.h"

static void check_states(struct kernel_features *kf, const char *want)
{
	char buf[1024], *save = NULL, *w;
	size_t seen = 0;
	int i;

	features__decide(kf);
	snprintf(buf, sizeof(buf), "%s", want);
	for (w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(w, '=');

		assert_non_null(eq);
		*eq = '\0';
		for (i = 0; i < FEAT_MAX; i++)
			if (kf->f[i].name && !strcmp(kf->f[i].name, w))
				break;
		if (i == FEAT_MAX)
			fail_msg("no feature '%s'", w);
		if (strcmp(features__state_name(kf->f[i].state), eq + 1))
			fail_msg("%s: %s, want %s (%s)", w, features__state_name(kf->f[i].state),
				 eq + 1, kf->f[i].note);
		assert_non_null(kf->f[i].note);
		assert_true(kf->f[i].note[0]);
		seen++;
	}
	assert_int_equal(seen, FEAT_MAX);
}

/* Debian 11's 5.10: before atomics, callbacks, cookies, syscall programs and mmap_lock tracepoints. */
static void debian_5_10(void **state)
{
	struct kernel_features kf = {
		.release = "5.10.0-32-amd64", .btf_source = "/sys/kernel/btf/vmlinux",
		.exit_args = 1, .mmap_lock_args = -1, .mark_victim_args = 1,
		.mmap_hook = MMAP_HOOK_FENTRY,
	};

	(void)state;
	check_states(&kf, "btf=yes atomics=degraded rss=degraded mapped=degraded map_sites=no "
		     "exit=fallback marker=fallback mark=fallback phase_rules=degraded "
		     "oom=fallback heap=fallback device=degraded device_multi=fallback "
		     "device_sites=degraded new_libs=yes site_maps=degraded cmd_gate=yes");
}

/* Debian 12's 6.1: all of 5.10 lacked up to 5.19, but no uprobe_multi, percpu rss or vma iterator. */
static void debian_6_1(void **state)
{
	struct kernel_features kf = {
		.release = "6.1.0-50-amd64", .btf_source = "/sys/kernel/btf/vmlinux",
		.exit_args = 1, .mmap_lock_args = 4, .mark_victim_args = 2,
		.atomics = true, .bpf_loop = true, .for_each_elem = true, .find_vma = true,
		.percpu_elem = true, .attach_cookie = true, .task_pt_regs = true, .task_btf = true,
		.task_storage = true, .syscall_prog = true, .mmap_hook = MMAP_HOOK_FENTRY,
	};

	(void)state;
	check_states(&kf, "btf=yes atomics=yes rss=degraded mapped=fallback map_sites=yes "
		     "exit=fallback marker=fallback mark=yes phase_rules=yes oom=yes "
		     "heap=fallback device=yes device_multi=fallback device_sites=yes new_libs=yes "
		     "site_maps=degraded cmd_gate=yes");
}

/* Debian 13 backports' 7.3: everything memtrail uses. */
static void debian_7_3(void **state)
{
	struct kernel_features kf = {
		.release = "7.3.4+deb13-amd64", .btf_source = "/sys/kernel/btf/vmlinux",
		.exit_args = 2, .mmap_lock_args = 3, .mark_victim_args = 2, .prctl_tp = true,
		.rss_percpu = true, .atomics = true, .bpf_loop = true, .for_each_elem = true,
		.find_vma = true, .percpu_elem = true, .attach_cookie = true, .task_pt_regs = true,
		.task_btf = true, .task_storage = true, .syscall_prog = true, .uprobe_multi = true,
		.vma_iter = true, .mmap_hook = MMAP_HOOK_FENTRY,
	};

	(void)state;
	check_states(&kf, "btf=yes atomics=yes rss=yes mapped=yes map_sites=yes exit=yes marker=yes "
		     "mark=yes phase_rules=yes oom=yes heap=yes device=yes device_multi=yes "
		     "device_sites=yes new_libs=yes site_maps=yes cmd_gate=yes");
}

/* What a kernel without a hook for files mapped, or fanotify permission events, is told. */
static void no_hook_no_gate(void **state)
{
	struct kernel_features kf = {
		.release = "x", .exit_args = 2, .mmap_lock_args = 3, .mark_victim_args = 2,
		.vma_iter = true, .perm_events = -22, .mmap_hook = MMAP_HOOK_NONE,
	};

	(void)state;
	features__decide(&kf);
	assert_int_equal(kf.f[FEAT_NEW_LIBS].state, FEATURE_DEGRADED);
	/* the iterator is there, but the hook that would run it is not */
	assert_int_equal(kf.f[FEAT_SITE_MAPS].state, FEATURE_DEGRADED);
	assert_non_null(strstr(kf.f[FEAT_SITE_MAPS].note, "new_libs is degraded"));
	assert_int_equal(kf.f[FEAT_GATE].state, FEATURE_DEGRADED);
	assert_non_null(strstr(kf.f[FEAT_GATE].note, "Invalid argument"));
	/* percpu rss without the helpers to read it: refused, not guessed */
	kf.rss_percpu = true;
	features__decide(&kf);
	assert_int_equal(kf.f[FEAT_RSS].state, FEATURE_NO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(debian_5_10),
		cmocka_unit_test(debian_6_1),
		cmocka_unit_test(debian_7_3),
		cmocka_unit_test(no_hook_no_gate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
