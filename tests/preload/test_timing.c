/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The GPU timing backends through their narrow library interface, against
 * the CPU doubles of libcudart (events) and libcupti (activity records).
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <cmocka.h>

#include "collect_int.h"
#include "timing.h"

static const char *need(const char *name)
{
	const char *v = getenv(name);

	if (!v)
		abort();
	return v;
}

static void sleep_ms(double ms)
{
	struct timespec ts = {0, (long)(ms * 1e6)};

	nanosleep(&ts, NULL);
}

static void test_nccl_kernel_names(void **state)
{
	(void)state;
	assert_true(cruxc_is_nccl_kernel("ncclKernel_AllReduce_RING_LL_Sum_float"));
	assert_true(cruxc_is_nccl_kernel("ncclDevKernel_AllGather_RING_LL"));
	assert_true(cruxc_is_nccl_kernel(
	    "_Z40ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE"));
	assert_false(cruxc_is_nccl_kernel("_Z11sgemm_kernelPfS_S_"));
	assert_false(cruxc_is_nccl_kernel("void at::native::vectorized_elementwise_kernel<4>"));
	assert_false(cruxc_is_nccl_kernel("nccl"));
	assert_false(cruxc_is_nccl_kernel(NULL));
}

static void test_events(void **state)
{
	struct cruxc_events *ev;
	struct cruxc_iv out[8];
	uint32_t a, b;
	size_t n;

	(void)state;
	assert_int_equal(cruxc_events_new(need("CRUXP_TEST_CUDART"), 4, &ev), CRUX_OK);
	a = cruxc_events_begin(ev, NULL, crux_now_ns());
	assert_int_not_equal(a, UINT32_MAX);
	sleep_ms(3);
	cruxc_events_end(ev, a, NULL);
	sleep_ms(2);
	b = cruxc_events_begin(ev, NULL, crux_now_ns());
	sleep_ms(1);
	cruxc_events_end(ev, b, NULL);
	n = cruxc_events_poll(ev, out, 8);
	assert_int_equal(n, 2);
	assert_true(out[0].end - out[0].start >= 3000000 && out[0].end - out[0].start < 60000000);
	assert_true(out[1].end - out[1].start >= 1000000 && out[1].end - out[1].start < 60000000);
	/* Chained positions: the second starts ~5 ms after the first. */
	assert_true(out[1].start - out[0].start >= 5000000 &&
		    out[1].start - out[0].start < 90000000);
	assert_int_equal(out[0].kind, CRUXC_IV_COMM);
	assert_int_equal(cruxc_events_poll(ev, out, 8), 0);
	/* A cancelled slot produces nothing and is free again. */
	a = cruxc_events_begin(ev, NULL, crux_now_ns());
	cruxc_events_cancel(ev, a);
	assert_int_equal(cruxc_events_poll(ev, out, 8), 0);
	cruxc_events_free(ev);
}

/* The pool is full while the poller is behind: calls go untimed, never block. */
static void test_events_pool_full(void **state)
{
	struct cruxc_events *ev;
	struct cruxc_iv out[8];

	(void)state;
	assert_int_equal(cruxc_events_new(need("CRUXP_TEST_CUDART"), 2, &ev), CRUX_OK);
	for (int i = 0; i < 5; i++) {
		uint32_t s = cruxc_events_begin(ev, NULL, crux_now_ns());

		if (s != UINT32_MAX)
			cruxc_events_end(ev, s, NULL);
	}
	assert_int_equal(atomic_load(&ev->dropped), 3);
	assert_int_equal(cruxc_events_poll(ev, out, 8), 2);
	cruxc_events_free(ev);
}

static void test_events_missing_library(void **state)
{
	struct cruxc_events *ev = NULL;

	(void)state;
	assert_int_equal(cruxc_events_new("/nonexistent/libcudart.so", 4, &ev),
			 CRUX_ERR_UNSUPPORTED);
	assert_null(ev);
	assert_int_equal(cruxc_events_new(NULL, 3, &ev), CRUX_ERR_INVAL);
}

typedef void (*kernel_fn)(const char *name, uint64_t start, uint64_t end);

static void test_cupti(void **state)
{
	struct cruxc_cupti *cu, *other;
	struct cruxc_iv out[16];
	kernel_fn kernel;
	void *h;
	uint64_t t;
	size_t n;

	(void)state;
	assert_int_equal(cruxc_cupti_new(need("CRUXP_TEST_CUPTI"), 1024, &cu), CRUX_OK);
	/* A second client finds the process taken. */
	assert_int_equal(cruxc_cupti_new(need("CRUXP_TEST_CUPTI"), 16, &other), CRUX_ERR_BUSY);
	assert_ptr_equal(cruxc_cupti_callback_owner(), cu);
	h = dlopen(need("CRUXP_TEST_CUPTI"), RTLD_LAZY | RTLD_NOLOAD);
	assert_non_null(h);
	kernel = (kernel_fn)dlsym(h, "fakecupti_kernel");
	assert_non_null(kernel);
	t = crux_now_ns();
	kernel("_Z11sgemm_kernelPfS_S_", t, t + 1000000);
	kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + 500000, t + 2500000);
	n = cruxc_cupti_poll(cu, out, 16);
	assert_int_equal(n, 2);
	/* Mapped back from CUPTI's clock to ours (within the sampling error). */
	assert_true(out[0].start + 100000 > t && out[0].start < t + 100000);
	assert_int_equal(out[0].end - out[0].start, 1000000);
	assert_int_equal(out[0].kind, CRUXC_IV_COMPUTE);
	assert_int_equal(out[1].kind, CRUXC_IV_COMM);
	assert_int_equal(out[1].end - out[1].start, 2000000);
	assert_int_equal(atomic_load(&cu->kernels), 2);
	assert_int_equal(cruxc_cupti_poll(cu, out, 16), 0);
	/* All pool buffers came back. */
	assert_int_equal(atomic_load(&cu->buf_busy), 0);
	dlclose(h);
	cruxc_cupti_free(cu);
	assert_null(cruxc_cupti_callback_owner());
}

/* More records than the staging area holds: counted as dropped, never overrun. */
static void test_cupti_staging_full(void **state)
{
	struct cruxc_cupti *cu;
	struct cruxc_iv out[16];
	kernel_fn kernel;
	void *h;

	(void)state;
	assert_int_equal(cruxc_cupti_new(need("CRUXP_TEST_CUPTI"), 4, &cu), CRUX_OK);
	h = dlopen(need("CRUXP_TEST_CUPTI"), RTLD_LAZY | RTLD_NOLOAD);
	kernel = (kernel_fn)dlsym(h, "fakecupti_kernel");
	for (int i = 0; i < 10; i++)
		kernel("k", 1000 + (uint64_t)i, 2000 + (uint64_t)i);
	assert_int_equal(cruxc_cupti_poll(cu, out, 16), 4);
	assert_int_equal(atomic_load(&cu->dropped), 6);
	dlclose(h);
	cruxc_cupti_free(cu);
	assert_null(cruxc_cupti_callback_owner());
}

static void test_cupti_busy_env(void **state)
{
	struct cruxc_cupti *cu = NULL;

	(void)state;
	setenv("FAKECUPTI_BUSY", "1", 1);
	assert_int_equal(cruxc_cupti_new(need("CRUXP_TEST_CUPTI"), 16, &cu), CRUX_ERR_BUSY);
	unsetenv("FAKECUPTI_BUSY");
	assert_null(cu);
	assert_null(cruxc_cupti_callback_owner());
	assert_int_equal(cruxc_cupti_new("/nonexistent/libcupti.so", 16, &cu),
			 CRUX_ERR_UNSUPPORTED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nccl_kernel_names),
	    cmocka_unit_test(test_events),
	    cmocka_unit_test(test_events_pool_full),
	    cmocka_unit_test(test_events_missing_library),
	    cmocka_unit_test(test_cupti),
	    cmocka_unit_test(test_cupti_staging_full),
	    cmocka_unit_test(test_cupti_busy_env),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
