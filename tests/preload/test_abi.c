/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Our own NCCL API declaration (crux/nccl_api.h) and CUPTI kernel record
 * prefix against NVIDIA's headers: sizes, field offsets, enum values.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "abi.h"

static void test_same_abi(void **state)
{
	struct abi_facts a, b;

	(void)state;
	abi_facts_ours(&a);
	abi_facts_real(&b);
	assert_int_equal(a.unique_id_size, b.unique_id_size);
	assert_int_equal(a.config_size, b.config_size);
	for (int i = 0; i < 17; i++)
		assert_int_equal(a.config_off[i], b.config_off[i]);
	assert_int_equal(a.result_size, b.result_size);
	assert_int_equal(a.dtype_size, b.dtype_size);
	assert_int_equal(a.redop_size, b.redop_size);
	for (int i = 0; i < 9; i++)
		assert_int_equal(a.results[i], b.results[i]);
	for (int i = 0; i < 13; i++)
		assert_int_equal(a.dtypes[i], b.dtypes[i]);
	for (int i = 0; i < 7; i++)
		assert_int_equal(a.redops[i], b.redops[i]);
	assert_int_equal(a.split_nocolor, b.split_nocolor);
	assert_int_equal(a.undef_int, b.undef_int);
	for (int i = 0; i < 4; i++)
		assert_int_equal(a.kernel_off[i], b.kernel_off[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_same_abi),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
