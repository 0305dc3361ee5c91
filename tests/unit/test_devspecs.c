// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The table of runtime functions probed (devspecs.c): what the BPF side
 * reads from each cookie, and the out-of-memory codes and their names as
 * the runtimes' headers give them (CUDA's driver and runtime API 2, Neuron's
 * NRT_RESOURCE 4).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "devspecs.h"

static void cookies_say_each_spec(void **state)
{
	uint64_t cookie[MEMTRAIL_DEV_SPECS];
	size_t n = devspecs__cookies(cookie, MEMTRAIL_DEV_SPECS), i, j;

	(void)state;
	assert_int_equal(n, devspecs_n);
	assert_true(n <= MEMTRAIL_DEV_SPECS);	/* device.bpf.c has an entry copy per function */
	for (i = 0; i < n; i++) {
		const struct dev_spec *s = &devspecs[i];

		assert_int_equal(cookie[i], devspecs__cookie(i));
		assert_int_equal(MEMTRAIL_COOKIE_NAME(cookie[i]), i);
		assert_int_equal(MEMTRAIL_COOKIE_OP(cookie[i]), s->op);
		assert_int_equal(MEMTRAIL_COOKIE_KIND(cookie[i]), s->kind);
		assert_int_equal(MEMTRAIL_COOKIE_RT(cookie[i]), s->rt);
		assert_int_equal(MEMTRAIL_COOKIE_ARG(cookie[i]), s->arg);
		assert_string_equal(devspecs__fn_name(i), s->name);
		assert_int_equal(devspecs__loader(i), s->rt == MEMTRAIL_RT_LOADER);
		/* a name is probed once: events name the function by its index */
		for (j = 0; j < i; j++)
			assert_string_not_equal(devspecs[j].name, s->name);
	}
	assert_string_equal(devspecs__fn_name(n), "?");
	assert_false(devspecs__loader(n));
	/* a smaller buffer gets what fits */
	assert_int_equal(devspecs__cookies(cookie, 3), 3);
}

static void out_of_memory_codes(void **state)
{
	(void)state;
	assert_true(devspecs__is_oom(MEMTRAIL_RT_CUDA, 2));
	assert_false(devspecs__is_oom(MEMTRAIL_RT_CUDA, 4));
	assert_true(devspecs__is_oom(MEMTRAIL_RT_NEURON, 4));
	assert_false(devspecs__is_oom(MEMTRAIL_RT_NEURON, 2));
	assert_false(devspecs__is_oom(MEMTRAIL_RT_NEURON, 9));	/* not enough cores: not memory */
	/* the driver's name for a driver call, the runtime API's for a cuda* one */
	assert_string_equal(devspecs__error_name(MEMTRAIL_RT_CUDA, "cuMemAlloc_v2", 2),
			    "CUDA_ERROR_OUT_OF_MEMORY");
	assert_string_equal(devspecs__error_name(MEMTRAIL_RT_CUDA, "cudaMalloc", 2),
			    "cudaErrorMemoryAllocation");
	assert_string_equal(devspecs__error_name(MEMTRAIL_RT_NEURON, "nrt_tensor_allocate", 4),
			    "NRT_RESOURCE");
	assert_null(devspecs__error_name(MEMTRAIL_RT_CUDA, "cudaMalloc", 35000));
	/* no driver name for a runtime-only code */
	assert_null(devspecs__error_name(MEMTRAIL_RT_CUDA, "cuInit", 35));
	assert_string_equal(devspecs__runtime_name(MEMTRAIL_RT_NEURON), "neuron");
	assert_string_equal(devspecs__runtime_name(MEMTRAIL_RT_CUDA), "cuda");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cookies_say_each_spec),
		cmocka_unit_test(out_of_memory_codes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
