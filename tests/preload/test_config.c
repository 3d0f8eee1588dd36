/* SPDX-License-Identifier: Apache-2.0 */
/* CRUX_ variables of the preload, call signatures and byte counts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "collect_int.h"
#include "crux/log.h"
#include "crux/nccl_api.h"

struct kv {
	const char *name;
	const char *value;
};

static const char *fixture(void *arg, const char *name)
{
	for (const struct kv *e = arg; e && e->name; e++) {
		if (strcmp(e->name, name) == 0)
			return e->value;
	}
	return NULL;
}

static crux_status_t parse(const struct kv *env, struct cruxc_config *cfg, bool *on)
{
	return cruxc_config_parse(fixture, (void *)env, cfg, on);
}

static void test_defaults(void **state)
{
	const struct kv env[] = {{"CRUX_SHM_DIR", "/tmp/x"}, {NULL, NULL}};
	struct cruxc_config cfg;
	bool on = false;

	(void)state;
	assert_int_equal(parse(env, &cfg, &on), CRUX_OK);
	assert_true(on);
	assert_int_equal(cfg.timing, 0);
	assert_int_equal(cfg.window_ns, 30000000000ull);
	assert_int_equal(cfg.mark, CRUXC_MARK_AUTO);
	assert_string_equal(cfg.shm_dir, "/tmp/x");
	assert_string_equal(cfg.cupti_lib, "");
}

static void test_values(void **state)
{
	const struct kv env[] = {{"CRUX_TIMING", "Events"},
				 {"CRUX_PROFILE_WINDOW", "250ms"},
				 {"CRUX_ITERATION_MARK", "allreduce:4096"},
				 {"CRUX_CUPTI_LIB", "/opt/cuda/lib64/libcupti.so"},
				 {"CRUX_PRELOAD", "off"},
				 {NULL, NULL}};
	const struct kv env2[] = {
	    {"CRUX_ITERATION_MARK", "api"}, {"CRUX_PROFILE_WINDOW", "5"}, {NULL, NULL}};
	const struct kv env3[] = {{"CRUX_ITERATION_MARK", "send"}, {NULL, NULL}};
	struct cruxc_config cfg;
	bool on = true;

	(void)state;
	assert_int_equal(parse(env, &cfg, &on), CRUX_OK);
	assert_false(on);
	assert_int_equal(cfg.timing, 2);
	assert_int_equal(cfg.window_ns, 250000000ull);
	assert_int_equal(cfg.mark, CRUXC_MARK_OP);
	assert_int_equal(cfg.mark_op, CRUXC_OP_ALLREDUCE);
	assert_int_equal(cfg.mark_bytes, 4096);
	assert_string_equal(cfg.cupti_lib, "/opt/cuda/lib64/libcupti.so");
	assert_int_equal(parse(env2, &cfg, &on), CRUX_OK);
	assert_int_equal(cfg.mark, CRUXC_MARK_API);
	assert_int_equal(cfg.window_ns, 5000000000ull);
	assert_int_equal(parse(env3, &cfg, &on), CRUX_OK);
	assert_int_equal(cfg.mark_op, CRUXC_OP_SEND);
	assert_int_equal(cfg.mark_bytes, 0);
}

static void test_bad_values(void **state)
{
	static const struct kv bad[][2] = {
	    {{"CRUX_TIMING", "gpu"}, {NULL, NULL}},
	    {{"CRUX_PROFILE_WINDOW", "10ms"}, {NULL, NULL}},
	    {{"CRUX_PROFILE_WINDOW", "thirty"}, {NULL, NULL}},
	    {{"CRUX_ITERATION_MARK", "allreduce:"}, {NULL, NULL}},
	    {{"CRUX_ITERATION_MARK", "barrier"}, {NULL, NULL}},
	    {{"CRUX_ITERATION_MARK", "allreduce:-5"}, {NULL, NULL}},
	    {{"CRUX_PRELOAD", "maybe"}, {NULL, NULL}},
	    {{"CRUX_SHM_DIR", "relative/dir"}, {NULL, NULL}},
	};
	struct cruxc_config cfg;
	bool on;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&cfg, 0x5a, sizeof(cfg));
		assert_int_equal(parse(bad[i], &cfg, &on), CRUX_ERR_INVAL);
	}
}

static char last_err[512];

static void keep_sink(void *arg, enum crux_log_level level, const char *file, int line,
		      const char *msg)
{
	(void)arg;
	(void)file;
	(void)line;
	if (level == CRUX_LOG_ERROR)
		snprintf(last_err, sizeof(last_err), "%s", msg);
}

/* Regression: the message for a bad CRUX_SHM_DIR named the variable but not its value. */
static void test_bad_shm_dir_message(void **state)
{
	static const struct kv env[] = {{"CRUX_SHM_DIR", "relative/dir"}, {NULL, NULL}};
	struct cruxc_config cfg;
	bool on;

	(void)state;
	last_err[0] = '\0';
	crux_log_set_sink(keep_sink, NULL);
	assert_int_equal(parse(env, &cfg, &on), CRUX_ERR_INVAL);
	crux_log_set_sink(NULL, NULL);
	assert_non_null(strstr(last_err, "CRUX_SHM_DIR"));
	assert_non_null(strstr(last_err, "relative/dir"));
	assert_non_null(strstr(last_err, "absolute"));
}

static void test_signature_and_bytes(void **state)
{
	struct cruxc_comm comm = {.rank = 1, .nranks = 4, .index = 0};
	struct cruxc_comm other = {.rank = 1, .nranks = 4, .index = 1};
	struct cruxc_call c = {
	    .count = 1000, .op = CRUXC_OP_ALLGATHER, .dtype = ncclFloat16, .peer = -1};
	struct cruxc_call d = c;

	(void)state;
	assert_int_equal(cruxc_call_bytes(&c, &comm), 1000 * 2 * 4);
	c.op = CRUXC_OP_ALLREDUCE;
	assert_int_equal(cruxc_call_bytes(&c, &comm), 1000 * 2);
	c.op = CRUXC_OP_SEND;
	c.dtype = ncclFloat64;
	assert_int_equal(cruxc_call_bytes(&c, NULL), 8000);
	/* Same call, same signature; any field that differs changes it. */
	d = c;
	assert_int_equal(cruxc_call_sig(&c, &comm), cruxc_call_sig(&d, &comm));
	assert_int_not_equal(cruxc_call_sig(&c, &comm), cruxc_call_sig(&d, &other));
	d.peer = 3;
	assert_int_not_equal(cruxc_call_sig(&c, &comm), cruxc_call_sig(&d, &comm));
	d = c;
	d.count++;
	assert_int_not_equal(cruxc_call_sig(&c, &comm), cruxc_call_sig(&d, &comm));
	assert_int_equal(cruxc_op_kind(CRUXC_OP_RECV), CRUX_COLL_SENDRECV);
	assert_int_equal(cruxc_op_kind(CRUXC_OP_GROUP_END), -1);
	assert_int_equal(cruxc_op_from_name("ReduceScatter"), CRUXC_OP_REDUCESCATTER);
	assert_int_equal(cruxc_op_from_name("barrier"), -1);
	assert_int_equal(crux_nccl_type_size(ncclBfloat16), 2);
	assert_int_equal(crux_nccl_type_size(ncclNumTypes), 0);
}

static void test_ring(void **state)
{
	struct cruxc_ring r;
	struct cruxc_call c = {.count = 1}, out;

	(void)state;
	assert_int_equal(cruxc_ring_init(&r, 2), CRUX_OK);
	for (int i = 0; i < 6; i++) {
		c.count = (uint64_t)i;
		cruxc_ring_push(&r, &c);
	}
	/* 4 cells: two records were dropped, the first four kept in order. */
	assert_int_equal(atomic_load(&r.dropped), 2);
	for (uint64_t i = 0; i < 4; i++) {
		assert_true(cruxc_ring_pop(&r, &out));
		assert_int_equal(out.count, i);
	}
	assert_false(cruxc_ring_pop(&r, &out));
	cruxc_ring_push(&r, &c);
	assert_true(cruxc_ring_pop(&r, &out));
	assert_int_equal(out.count, 5);
	cruxc_ring_fini(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_values),
	    cmocka_unit_test(test_bad_values),
	    cmocka_unit_test(test_bad_shm_dir_message),
	    cmocka_unit_test(test_signature_and_bytes),
	    cmocka_unit_test(test_ring),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
