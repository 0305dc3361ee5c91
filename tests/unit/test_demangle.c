// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Demangled names, and which symbols a name a person wrote in --phase names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "demangle.h"

static void names(void **state)
{
	char buf[64], *d;

	(void)state;
	d = demangle__name("_ZN3c109alloc_cpuEm", true);
	assert_string_equal(d, "c10::alloc_cpu(unsigned long)");
	free(d);
	d = demangle__name("_ZN3c109alloc_cpuEm", false);
	assert_string_equal(d, "c10::alloc_cpu");
	free(d);
	/* Rust, legacy (the hash dropped) and v0 */
	d = demangle__name("_ZN4core3fmt5write17h0123456789abcdefE", true);
	assert_string_equal(d, "core::fmt::write");
	free(d);
	d = demangle__name("_RNvCs1234_7mycrate3foo", true);
	assert_string_equal(d, "mycrate::foo");
	free(d);
	/* C names, and what only looks mangled, stay as they are */
	assert_null(demangle__name("malloc", true));
	assert_null(demangle__name("_Zfoo", true));
	assert_null(demangle__name(NULL, true));
	assert_string_equal(demangle__str(buf, sizeof(buf), "_dl_map_object"), "_dl_map_object");
	assert_string_equal(demangle__str(buf, 8, "_ZN3c109alloc_cpuEm"), "c10::al");
}

static void written_names(void **state)
{
	const char *linear = "_ZN2at4_ops6linear4callERKNS_6TensorES4_RKSt8optionalIS2_E";

	(void)state;
	assert_true(demangle__is("malloc", "malloc"));
	assert_true(demangle__is(linear, linear));
	assert_true(demangle__is(linear, "at::_ops::linear::call"));
	assert_true(demangle__is(linear, "at::_ops::linear::call(at::Tensor const&, at::Tensor "
				 "const&, std::optional<at::Tensor> const&)"));
	assert_false(demangle__is(linear, "at::_ops::linear"));
	assert_false(demangle__is(linear, "_ops::linear::call"));
	assert_false(demangle__is(linear, "at::_ops::linear::call(at::Tensor const&)"));
	assert_true(demangle__is("_ZN5model4stepEi", "model::step"));
	assert_true(demangle__is("_ZN5model4stepEl", "model::step(long)"));
	assert_false(demangle__is("_ZN5model4stepEi", "model::step(long)"));
	assert_true(demangle__is("_Z3barv", "bar()"));
	/* a plain name is an ELF name: never compared with demangled ones */
	assert_false(demangle__is("_Z3barv", "bar"));
	assert_true(demangle__readable("a::b"));
	assert_true(demangle__readable("f(int)"));
	assert_false(demangle__readable("cudaMalloc"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(names),
		cmocka_unit_test(written_names),
	};

	return cmocka_run_group_tests_name("demangle", tests, NULL, NULL);
}
