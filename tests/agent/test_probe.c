/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Prober without a fabric: configuration parsing, probes that reach the
 * peer itself (loopback: 'hops' too large), and the cache's failure back-off
 * and forgetting. The fabric cases are in probe-ecmp.sh (integration).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "crux/log.h"
#include "crux/probe.h"
#include "crux/shm.h"

struct kv {
	const char *k, *v;
};

static const char *penv(void *arg, const char *name)
{
	const struct kv *kv = arg;
	for (; kv->k; kv++)
		if (!strcmp(kv->k, name))
			return kv->v;
	return NULL;
}

static void test_config(void **state)
{
	struct cruxd_probe_config c;
	struct kv good[] = {{"CRUX_PROBE_PROTO", "udp"},
			    {"CRUX_PROBE_PORTS", "1000-1999"},
			    {"CRUX_PROBE_HOPS", "3"},
			    {"CRUX_PROBE_TIMEOUT", "50ms"},
			    {NULL, NULL}};
	struct kv bad[][2] = {
	    {{"CRUX_PROBE_PROTO", "icmp"}, {NULL, NULL}},
	    {{"CRUX_PROBE_PORTS", "2000-1000"}, {NULL, NULL}},
	    {{"CRUX_PROBE_PORTS", "0-10"}, {NULL, NULL}},
	    {{"CRUX_PROBE_PORTS", "10-"}, {NULL, NULL}},
	    {{"CRUX_PROBE_PORTS", "10-70000"}, {NULL, NULL}},
	    {{"CRUX_PROBE_HOPS", "0"}, {NULL, NULL}},
	    {{"CRUX_PROBE_PORTS_PER_PATH", "9"}, {NULL, NULL}},
	    {{"CRUX_PROBE_RATE", "fast"}, {NULL, NULL}},
	};
	char err[256];

	(void)state;
	cruxd_probe_config_default(&c);
	assert_int_equal(cruxd_probe_config_env(penv, good, &c, err, sizeof(err)), CRUX_OK);
	assert_int_equal(c.proto, CRUXD_PROBE_UDP);
	assert_int_equal(c.dst_port, CRUXD_ROCE_PORT); /* RoCEv2 */
	assert_int_equal(c.port_lo, 1000);
	assert_int_equal(c.port_hi, 1999);
	assert_int_equal(c.hops, 3);
	assert_int_equal(c.timeout_ns, 50000000ull);
	{
		/* roce: as RoCEv2 travels, from ports a flow label can name */
		struct kv roce[] = {{"CRUX_PROBE_PROTO", "roce"}, {NULL, NULL}};
		cruxd_probe_config_default(&c);
		assert_int_equal(cruxd_probe_config_env(penv, roce, &c, err, sizeof(err)), CRUX_OK);
		assert_int_equal(c.proto, CRUXD_PROBE_UDP);
		assert_int_equal(c.dst_port, CRUXD_ROCE_PORT);
		assert_int_equal(c.port_lo, 49152);
		assert_int_equal(c.port_hi, 65535);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct cruxd_probe_config d;
		cruxd_probe_config_default(&d);
		err[0] = '\0';
		assert_int_equal(cruxd_probe_config_env(penv, bad[i], &d, err, sizeof(err)),
				 CRUX_ERR_INVAL);
		assert_non_null(strstr(err, bad[i][0].k));
	}
}

static void small(struct cruxd_probe_config *c)
{
	cruxd_probe_config_default(c);
	c->port_lo = 47000;
	c->port_hi = 47999;
	c->max_probes = 8;
	c->timeout_ns = 200000000ull;
}

static void test_reaches_peer(void **state)
{
	struct cruxd_probe_config c;
	struct cruxd_probe_result *r = malloc(sizeof(*r));
	struct crux_addr lo, hop;

	(void)state;
	assert_non_null(r);
	assert_int_equal(crux_addr_parse("127.0.0.1", &lo), CRUX_OK);
	small(&c);
	/* no router between us and loopback: every probe reaches the peer */
	assert_int_equal(cruxd_probe_peer(&c, &lo, r), CRUX_ERR_RANGE);
	c.proto = CRUXD_PROBE_UDP;
	c.dst_port = CRUXD_ROCE_PORT;
	assert_int_equal(cruxd_probe_peer(&c, &lo, r), CRUX_ERR_RANGE);
	assert_int_equal(cruxd_probe_port(&c, &lo, 47001, &hop), CRUX_ERR_RANGE);
	c.port_lo = 0;
	assert_int_equal(cruxd_probe_peer(&c, &lo, r), CRUX_ERR_INVAL);
	free(r);
}

static void test_cache_backoff(void **state)
{
	struct cruxd_probe_cache_config cc;
	struct cruxd_probe_cache *cache;
	struct cruxd_probe_entry e;
	struct crux_addr lo;
	uint64_t now = crux_now_ns(), v0;

	(void)state;
	cruxd_probe_cache_config_default(&cc);
	small(&cc.probe);
	cc.retry_ns = 1000000000ull;
	cc.forget_ns = 60000000000ull;
	assert_int_equal(crux_addr_parse("127.0.0.1", &lo), CRUX_OK);
	assert_int_equal(cruxd_probe_cache_create(&cc, &cache), CRUX_OK);
	assert_int_equal(cruxd_probe_cache_get(cache, &lo, &e), CRUX_ERR_NOENT);
	assert_int_equal(cruxd_probe_cache_want(cache, &lo, 2, now), CRUX_OK);
	assert_int_equal(cruxd_probe_cache_get(cache, &lo, &e), CRUX_OK);
	assert_int_equal(e.state, CRUXD_PROBE_NONE);
	v0 = cruxd_probe_cache_version(cache);
	assert_true(cruxd_probe_cache_step(cache, now));
	assert_int_equal(cruxd_probe_cache_get(cache, &lo, &e), CRUX_OK);
	assert_int_equal(e.state, CRUXD_PROBE_FAILED);
	assert_int_equal(e.failures, 1);
	assert_int_equal(e.last_status, CRUX_ERR_RANGE);
	assert_true(cruxd_probe_cache_version(cache) > v0);
	/* backed off: nothing due right away */
	assert_false(cruxd_probe_cache_step(cache, crux_now_ns()));
	/* due again after the back-off; the second failure doubles it */
	assert_true(cruxd_probe_cache_step(cache, e.next_ns + 1));
	assert_int_equal(cruxd_probe_cache_get(cache, &lo, &e), CRUX_OK);
	assert_int_equal(e.failures, 2);
	assert_true(e.next_ns >= crux_now_ns() + cc.retry_ns + cc.retry_ns / 2);
	/* a peer nobody wants any more is forgotten */
	assert_true(cruxd_probe_cache_step(cache, now + cc.forget_ns + 1000000000ull));
	assert_int_equal(cruxd_probe_cache_get(cache, &lo, &e), CRUX_ERR_NOENT);
	cruxd_probe_cache_destroy(cache);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_config),
	    cmocka_unit_test(test_reaches_peer),
	    cmocka_unit_test(test_cache_backoff),
	};
	crux_log_init("test-probe");
	crux_log_set_level(CRUX_LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
