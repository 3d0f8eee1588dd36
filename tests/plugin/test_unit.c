/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the plugin core: interface selection, CRUX_ parsing, class precedence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "crux/decision.h"
#include "crux/jobid.h"
#include "cruxn.h"

static void test_ifname(void **state)
{
	(void)state;
	/* default: anything but loopback and docker bridges */
	assert_true(cruxn_ifname_match("", "eth0"));
	assert_false(cruxn_ifname_match("", "lo"));
	assert_false(cruxn_ifname_match("", "docker0"));
	/* prefixes */
	assert_true(cruxn_ifname_match("eth,ib", "eth1"));
	assert_true(cruxn_ifname_match("eth,ib", "ib0"));
	assert_false(cruxn_ifname_match("eth,ib", "enp3s0"));
	/* exact */
	assert_true(cruxn_ifname_match("=eth0", "eth0"));
	assert_false(cruxn_ifname_match("=eth0", "eth01"));
	assert_true(cruxn_ifname_match("=lo", "lo"));
	/* exclusion */
	assert_false(cruxn_ifname_match("^eth", "eth3"));
	assert_true(cruxn_ifname_match("^eth", "ens1"));
	assert_false(cruxn_ifname_match("^=eth0", "eth0"));
	assert_true(cruxn_ifname_match("^=eth0", "eth00"));
	/* loopback only when asked */
	assert_false(cruxn_ifname_match("^eth", "lo"));
	assert_true(cruxn_ifname_match("l", "lo"));
}

static void test_config_defaults_and_errors(void **state)
{
	struct cruxn_config c;
	char err[256];
	(void)state;

	unsetenv("CRUX_SOCKET_NTHREADS");
	unsetenv("CRUX_NSOCKS_PERTHREAD");
	unsetenv("CRUX_CLASS");
	unsetenv("CRUX_SOCKET_IFNAME");
	setenv("NCCL_SOCKET_IFNAME", "=eth9", 1);
	assert_int_equal(cruxn_config_load(&c, err, sizeof(err)), CRUX_OK);
	assert_int_equal(c.nthreads, 2);
	assert_int_equal(c.nsocks_per_thread, 1);
	assert_int_equal(c.class_level, -1);
	assert_true(c.tagging);
	assert_string_equal(c.ifname_spec, "=eth9");
	/* CRUX_SOCKET_IFNAME takes precedence over NCCL's */
	setenv("CRUX_SOCKET_IFNAME", "veth", 1);
	assert_int_equal(cruxn_config_load(&c, err, sizeof(err)), CRUX_OK);
	assert_string_equal(c.ifname_spec, "veth");

	setenv("CRUX_SOCKET_NTHREADS", "4", 1);
	setenv("CRUX_NSOCKS_PERTHREAD", "4", 1);
	assert_int_equal(cruxn_config_load(&c, err, sizeof(err)), CRUX_ERR_INVAL);
	assert_non_null(strstr(err, "CRUX_NSOCKS_PERTHREAD"));
	unsetenv("CRUX_NSOCKS_PERTHREAD");
	unsetenv("CRUX_SOCKET_NTHREADS");

	setenv("CRUX_CLASS", "9", 1);
	assert_int_equal(cruxn_config_load(&c, err, sizeof(err)), CRUX_ERR_INVAL);
	assert_non_null(strstr(err, "CRUX_CLASS"));
	unsetenv("CRUX_CLASS");

	setenv("CRUX_TAGGING", "maybe", 1);
	assert_int_equal(cruxn_config_load(&c, err, sizeof(err)), CRUX_ERR_INVAL);
	assert_non_null(strstr(err, "CRUX_TAGGING"));
	unsetenv("CRUX_TAGGING");
	unsetenv("CRUX_SOCKET_IFNAME");
	unsetenv("NCCL_SOCKET_IFNAME");
}

/* No decision table (CRUX_SHM_DIR points nowhere): CRUX_CLASS > NCCL traffic class > default. */
static void test_class_precedence_without_table(void **state)
{
	struct cruxn_tag_state ts;
	struct crux_addr peer;
	char err[256];
	(void)state;

	memset(&peer, 0, sizeof(peer));
	snprintf(cruxn_ctx.shm_dir, sizeof(cruxn_ctx.shm_dir), "/nonexistent-cxpl");
	unsetenv("CRUX_CLASS");
	assert_int_equal(cruxn_config_load(&cruxn_ctx.cfg, err, sizeof(err)), CRUX_OK);

	cruxn_tag_init(&ts, &peer, -1);
	assert_true(cruxn_tag_refresh(&ts));
	assert_int_equal(ts.cls.tos, 0);
	assert_int_equal(ts.route.path_id, CRUX_PATH_NONE);
	assert_false(cruxn_tag_refresh(&ts)); /* nothing changed */

	cruxn_tag_init(&ts, &peer, 0x60);
	assert_true(cruxn_tag_refresh(&ts));
	assert_int_equal(ts.cls.tos, 0x60);

	cruxn_ctx.cfg.class_level = 2; /* CRUX_CLASS=2 beats the NCCL class */
	cruxn_tag_init(&ts, &peer, 0x60);
	assert_true(cruxn_tag_refresh(&ts));
	assert_int_equal(ts.cls.tos, (8 * 2) << 2);
	assert_int_equal(ts.cls.prio, 2);
	assert_int_equal(ts.cls.level, 2);
	cruxn_ctx.cfg.class_level = -1;
}

/*
 * With a table: the table beats CRUX_CLASS while its heartbeat is fresh; a
 * stale heartbeat falls back (CRUX_CLASS here) with no route; a new
 * heartbeat brings the decision back.
 */
static void test_table_precedence_and_staleness(void **state)
{
	char dir[] = "/tmp/cxpl-unit-XXXXXX", err[256];
	struct crux_dt_settings set;
	struct crux_dt_writer *w = NULL;
	struct crux_dt_job job;
	struct crux_dt_route route;
	struct cruxn_tag_state ts;
	struct crux_addr peer;
	(void)state;

	assert_non_null(mkdtemp(dir));
	chmod(dir, 0755);
	crux_dt_settings_default(CRUX_DEFAULT_LEVELS, &set);
	set.heartbeat_timeout_ns = 200000000ull; /* 200 ms */
	assert_int_equal(crux_dt_writer_open(dir, &set, &w, NULL), CRUX_OK);
	memset(&job, 0, sizeof(job));
	job.job_key = crux_job_key_of("env:cxpl-unit");
	job.level = 3;
	job.state = CRUX_JOB_SCHEDULED;
	memset(&route, 0, sizeof(route));
	route.job_key = job.job_key;
	assert_int_equal(crux_addr_parse("198.18.9.9", &route.peer), CRUX_OK);
	route.path_id = 7;
	route.nports = 2;
	route.ports[0] = 41000;
	route.ports[1] = 41001;
	assert_int_equal(crux_dt_publish(w, &job, 1, &route, 1), CRUX_OK);
	crux_dt_heartbeat(w);

	assert_int_equal(cruxn_config_load(&cruxn_ctx.cfg, err, sizeof(err)), CRUX_OK);
	cruxn_ctx.cfg.class_level = 1;
	cruxn_ctx.job.key = job.job_key;
	snprintf(cruxn_ctx.shm_dir, sizeof(cruxn_ctx.shm_dir), "%s", dir);
	pthread_mutex_lock(&cruxn_ctx.lock);
	assert_int_equal(cruxn_tagging_start(), CRUX_OK);
	pthread_mutex_unlock(&cruxn_ctx.lock);

	peer = route.peer;
	cruxn_tag_init(&ts, &peer, 0x20);
	assert_true(cruxn_tag_refresh(&ts));
	assert_int_equal(ts.cls.tos, 24 << 2); /* level 3 -> DSCP 24 */
	assert_int_equal(ts.cls.prio, 3);
	assert_int_equal(ts.route.path_id, 7);
	assert_int_equal(ts.route.nports, 2);
	assert_int_equal(ts.route.ports[1], 41001);

	usleep(300000); /* heartbeat goes stale */
	assert_true(cruxn_tag_refresh(&ts));
	assert_int_equal(ts.cls.tos, 8 << 2); /* CRUX_CLASS=1 */
	assert_int_equal(ts.route.path_id, CRUX_PATH_NONE);

	crux_dt_heartbeat(w);
	assert_true(cruxn_tag_refresh(&ts));
	assert_int_equal(ts.cls.tos, 24 << 2);
	assert_int_equal(ts.route.path_id, 7);

	/* a level change is seen on the next call */
	job.level = 0;
	assert_int_equal(crux_dt_publish(w, &job, 1, &route, 1), CRUX_OK);
	assert_true(cruxn_tag_refresh(&ts));
	assert_int_equal(ts.cls.tos, 0);
	assert_false(cruxn_tag_refresh(&ts));

	cruxn_tagging_stop();
	cruxn_ctx.cfg.class_level = -1;
	crux_dt_writer_close(w);
	struct crux_dt_reader *r = atomic_exchange(&cruxn_ctx.dt, NULL);
	if (r)
		crux_dt_reader_close(r);
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ifname),
		cmocka_unit_test(test_config_defaults_and_errors),
		cmocka_unit_test(test_class_precedence_without_table),
		cmocka_unit_test(test_table_precedence_and_staleness),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
