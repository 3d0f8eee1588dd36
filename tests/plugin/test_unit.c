/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the plugin core: interface selection, CRUX_ parsing, class precedence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "crux/decision.h"
#include "crux/decision_writer.h"
#include "crux/jobid.h"
#include "crux/log.h"
#include "cruxn.h"
#include "socket/sock_transport.h"

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
 * Verbs connections without a decision take NCCL's IB precedence:
 * NCCL_IB_TC / NCCL_IB_SL, then the communicator's trafficClass, then 0;
 * CRUX_CLASS still comes first, and socket connections ignore the IB
 * variables. Seen failing before (NCCL_IB_TC=106 left RoCE traffic at 0).
 */
static void test_nccl_ib_class_precedence(void **state)
{
	struct cruxn_tag_state ts;
	struct crux_addr peer;
	char err[256];
	(void)state;

	memset(&peer, 0, sizeof(peer));
	snprintf(cruxn_ctx.shm_dir, sizeof(cruxn_ctx.shm_dir), "/nonexistent-cxpl");
	unsetenv("CRUX_CLASS");
	setenv("NCCL_IB_TC", "106", 1);
	setenv("NCCL_IB_SL", "3", 1);
	assert_int_equal(cruxn_config_load(&cruxn_ctx.cfg, err, sizeof(err)), CRUX_OK);
	assert_int_equal(cruxn_ctx.cfg.ib_tc, 106);
	assert_int_equal(cruxn_ctx.cfg.ib_sl, 3);

	cruxn_tag_init(&ts, &peer, 0x60);
	ts.ib = true;
	assert_true(cruxn_tag_refresh(&ts));
	assert_int_equal(ts.cls.tos, 104); /* DSCP 26; the ECN bits are the NIC's */
	assert_int_equal(ts.cls.sl, 3);
	assert_int_equal(ts.cls.level, 3);

	cruxn_tag_init(&ts, &peer, 0x60); /* the socket transport: NCCL_IB_* do not apply */
	assert_true(cruxn_tag_refresh(&ts));
	assert_int_equal(ts.cls.tos, 0x60);

	unsetenv("NCCL_IB_TC");
	unsetenv("NCCL_IB_SL");
	assert_int_equal(cruxn_config_load(&cruxn_ctx.cfg, err, sizeof(err)), CRUX_OK);
	cruxn_tag_init(&ts, &peer, 0x60); /* then the communicator's class */
	ts.ib = true;
	assert_true(cruxn_tag_refresh(&ts));
	assert_int_equal(ts.cls.tos, 0x60);
	assert_int_equal(ts.cls.sl, 0);

	setenv("NCCL_IB_TC", "106", 1);
	assert_int_equal(cruxn_config_load(&cruxn_ctx.cfg, err, sizeof(err)), CRUX_OK);
	cruxn_ctx.cfg.class_level = 2; /* CRUX_CLASS first */
	cruxn_tag_init(&ts, &peer, -1);
	ts.ib = true;
	assert_true(cruxn_tag_refresh(&ts));
	assert_int_equal(ts.cls.tos, (8 * 2) << 2);
	cruxn_ctx.cfg.class_level = -1;

	setenv("NCCL_IB_TC", "256", 1); /* out of range: named */
	assert_int_not_equal(cruxn_config_load(&cruxn_ctx.cfg, err, sizeof(err)), CRUX_OK);
	assert_non_null(strstr(err, "NCCL_IB_TC"));
	unsetenv("NCCL_IB_TC");
	assert_int_equal(cruxn_config_load(&cruxn_ctx.cfg, err, sizeof(err)), CRUX_OK);
}

static void tagging_teardown(void)
{
	cruxn_tagging_stop();
	struct crux_dt_reader *r = atomic_exchange(&cruxn_ctx.dt, NULL);
	if (r && !crux_dt_mirror_owns(cruxn_ctx.dt_mirror, r))
		crux_dt_reader_close(r);
	for (int i = 0; i < cruxn_ctx.ndt_retired; i++)
		crux_dt_reader_close(cruxn_ctx.dt_retired[i]);
	cruxn_ctx.ndt_retired = 0;
	atomic_store(&cruxn_ctx.dt_copy_next_ns, 0);
	crux_dt_mirror_close(cruxn_ctx.dt_mirror);
	cruxn_ctx.dt_mirror = NULL;
	atomic_store(&cruxn_ctx.dt_state, 0);
}

/* As if 100 ms had passed: the next refresh re-reads the v1 table copy. */
static void copy_due(void)
{
	if (atomic_load(&cruxn_ctx.dt_copy_next_ns))
		atomic_store(&cruxn_ctx.dt_copy_next_ns, 1);
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
	/* the v1 copy is not re-read before its time: still the fallback */
	assert_false(cruxn_tag_refresh(&ts));
	assert_int_equal(ts.cls.tos, 8 << 2);
	copy_due();
	assert_true(cruxn_tag_refresh(&ts));
	assert_int_equal(ts.cls.tos, 24 << 2);
	assert_int_equal(ts.route.path_id, 7);

	/* a level change is seen at the next re-read of the copy */
	job.level = 0;
	assert_int_equal(crux_dt_publish(w, &job, 1, &route, 1), CRUX_OK);
	copy_due();
	assert_true(cruxn_tag_refresh(&ts));
	assert_int_equal(ts.cls.tos, 0);
	assert_false(cruxn_tag_refresh(&ts));

	/* the file truncated under the reader: no fault, the copy stays in use */
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", dir, CRUX_DT_FILE);
	assert_int_equal(truncate(path, 0), 0);
	copy_due();
	(void)cruxn_tag_refresh(&ts);
	assert_int_equal(ts.cls.tos, 0);
	assert_int_equal(ts.route.path_id, 7);

	cruxn_ctx.cfg.class_level = -1;
	crux_dt_writer_close(w);
	tagging_teardown();
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* Log lines that name the decision table file, whatever their level. */
static int table_lines;

static void count_sink(void *arg, enum crux_log_level level, const char *file, int line,
		       const char *msg)
{
	(void)arg;
	(void)level;
	(void)file;
	(void)line;
	if (strstr(msg, CRUX_DT_FILE))
		table_lines++;
	fprintf(stderr, "log: %s\n", msg);
}

static void rm_dir(const char *dir)
{
	char cmd[96];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/*
 * Regression: a corrupt table is re-tried every second; it must be reported
 * once (one line per change of condition), not once per retry.
 */
static void test_corrupt_table_logged_once(void **state)
{
	char dir[] = "/tmp/cxpl-unit-XXXXXX", path[128], junk[8192], err[256];
	struct cruxn_tag_state ts;
	struct crux_addr peer;
	FILE *f;
	(void)state;

	assert_non_null(mkdtemp(dir));
	chmod(dir, 0755);
	snprintf(path, sizeof(path), "%s/%s", dir, CRUX_DT_FILE);
	memset(junk, 0x5a, sizeof(junk));
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(junk, 1, sizeof(junk), f), sizeof(junk));
	fclose(f);
	chmod(path, 0644);

	unsetenv("CRUX_CLASS");
	assert_int_equal(cruxn_config_load(&cruxn_ctx.cfg, err, sizeof(err)), CRUX_OK);
	snprintf(cruxn_ctx.shm_dir, sizeof(cruxn_ctx.shm_dir), "%s", dir);
	atomic_store(&cruxn_ctx.dt_state, 0);
	table_lines = 0;
	crux_log_set_sink(count_sink, NULL);
	pthread_mutex_lock(&cruxn_ctx.lock);
	assert_int_equal(cruxn_tagging_start(), CRUX_OK);
	pthread_mutex_unlock(&cruxn_ctx.lock);
	memset(&peer, 0, sizeof(peer));
	for (int i = 0; i < 5; i++) {
		/* as if a second had passed: the next refresh re-opens the table */
		atomic_store(&cruxn_ctx.dt_next_try_ns, 0);
		cruxn_tag_init(&ts, &peer, -1);
		(void)cruxn_tag_refresh(&ts);
		assert_int_equal(ts.cls.tos, 0); /* default class */
		assert_int_equal(ts.route.path_id, CRUX_PATH_NONE);
	}
	assert_null(atomic_load(&cruxn_ctx.dt));
	crux_log_set_sink(NULL, NULL);
	assert_int_equal(table_lines, 1);
	tagging_teardown();
	rm_dir(dir);
}

/*
 * Regression: CRUX_CLASS names a level; with a usable table its DSCP and
 * priority come from the table header's level map, not the built-in one.
 */
static void test_crux_class_uses_table_level_map(void **state)
{
	char dir[] = "/tmp/cxpl-unit-XXXXXX", err[256];
	struct crux_dt_settings set;
	struct crux_dt_writer *w = NULL;
	struct cruxn_tag_state ts;
	struct crux_addr peer;
	(void)state;

	assert_non_null(mkdtemp(dir));
	chmod(dir, 0755);
	crux_dt_settings_default(CRUX_DEFAULT_LEVELS, &set);
	set.levels[1].dscp = 46;
	set.levels[1].sock_prio = 5;
	set.levels[3].dscp = 34;
	set.levels[3].sock_prio = 4;
	assert_int_equal(crux_dt_writer_open(dir, &set, &w, NULL), CRUX_OK);
	assert_int_equal(crux_dt_publish(w, NULL, 0, NULL, 0), CRUX_OK);
	crux_dt_heartbeat(w);

	assert_int_equal(cruxn_config_load(&cruxn_ctx.cfg, err, sizeof(err)), CRUX_OK);
	cruxn_ctx.job.key = crux_job_key_of("env:cxpl-not-in-table");
	snprintf(cruxn_ctx.shm_dir, sizeof(cruxn_ctx.shm_dir), "%s", dir);
	pthread_mutex_lock(&cruxn_ctx.lock);
	assert_int_equal(cruxn_tagging_start(), CRUX_OK);
	pthread_mutex_unlock(&cruxn_ctx.lock);
	memset(&peer, 0, sizeof(peer));

	cruxn_ctx.cfg.class_level = 1;
	cruxn_tag_init(&ts, &peer, -1);
	assert_true(cruxn_tag_refresh(&ts));
	assert_int_equal(ts.cls.tos, 46 << 2);
	assert_int_equal(ts.cls.prio, 5);
	assert_int_equal(ts.cls.level, 1);

	/* a level above the table's K takes the table's top level map */
	cruxn_ctx.cfg.class_level = 6;
	cruxn_tag_init(&ts, &peer, -1);
	assert_true(cruxn_tag_refresh(&ts));
	assert_int_equal(ts.cls.tos, 34 << 2);
	assert_int_equal(ts.cls.prio, 4);

	cruxn_ctx.cfg.class_level = -1;
	tagging_teardown();
	crux_dt_writer_close(w);
	rm_dir(dir);
}

/* recv() calls on one watched socket (the link wraps recv for this test). */
static int watch_fd = -1;
static _Atomic int watch_recvs;

ssize_t __real_recv(int fd, void *buf, size_t len, int flags);
ssize_t __wrap_recv(int fd, void *buf, size_t len, int flags);
ssize_t __wrap_recv(int fd, void *buf, size_t len, int flags)
{
	if (fd == watch_fd)
		atomic_fetch_add(&watch_recvs, 1);
	return __real_recv(fd, buf, len, flags);
}

static uint64_t ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* One small message from s to r, both completed. */
static void ping(void *s, void *r, int i)
{
	char out[64], in[64];
	void *dst = in, *rq = NULL, *sq = NULL;
	size_t size = sizeof(in);
	int tag = 7, done_r = 0, done_s = 0;

	memset(out, i & 0xff, sizeof(out));
	assert_int_equal(cruxn_irecv(r, 1, &dst, &size, &tag, NULL, &rq), CRUXN_SUCCESS);
	assert_non_null(rq);
	assert_int_equal(cruxn_isend(s, out, sizeof(out), tag, NULL, &sq), CRUXN_SUCCESS);
	assert_non_null(sq);
	for (long k = 0; (!done_r || !done_s) && k < 10000000; k++) {
		if (!done_s)
			assert_int_equal(cruxn_test(sq, &done_s, NULL), CRUXN_SUCCESS);
		if (!done_r)
			assert_int_equal(cruxn_test(rq, &done_r, NULL), CRUXN_SUCCESS);
	}
	assert_true(done_r && done_s);
	assert_memory_equal(in, out, sizeof(out));
}

/*
 * Regression: every isend (and every test of an unfinished send) used to
 * recv() on the control socket to look for a reply that never comes after
 * connection set-up: a wasted system call per message. Now the idle sender
 * looks at most every 10 ms (coarse clock).
 */
static void test_idle_sender_skips_ctrl_reads(void **state)
{
	char handle[CRUXN_NET_HANDLE_MAXSIZE];
	void *l = NULL, *s = NULL, *r = NULL;
	const int n = 1000;
	uint64_t t0, ms;
	int ndev = 0;
	(void)state;

	setenv("CRUX_SHM_DIR", "/nonexistent-cxpl", 1); /* never the real one */
	setenv("CRUX_SOCKET_IFNAME", "=lo", 1);
	setenv("CRUX_SOCKET_FAMILY", "ipv4", 1);
	setenv("CRUX_TAGGING", "0", 1);
	assert_int_equal(cruxn_init(NULL), CRUXN_SUCCESS);
	assert_int_equal(cruxn_devices(&ndev), CRUXN_SUCCESS);
	assert_true(ndev >= 1);
	assert_int_equal(cruxn_listen(0, handle, &l), CRUXN_SUCCESS);
	for (int i = 0; (!s || !r) && i < 5000; i++) {
		if (!s)
			assert_int_equal(cruxn_connect(0, -1, handle, &s), CRUXN_SUCCESS);
		if (!r)
			assert_int_equal(cruxn_accept(l, &r), CRUXN_SUCCESS);
		if (!s || !r)
			usleep(1000);
	}
	assert_non_null(s);
	assert_non_null(r);
	/* Until the receiver's reply (its data port) arrived the sender must look. */
	for (int i = 0; ((struct cruxn_comm *)s)->data_port == 0 && i < 2000; i++) {
		ping(s, r, i);
		usleep(1000);
	}
	assert_int_not_equal(((struct cruxn_comm *)s)->data_port, 0);

	watch_fd = ((struct cruxn_comm *)s)->ctrl;
	atomic_store(&watch_recvs, 0);
	t0 = ms_now();
	for (int i = 0; i < n; i++)
		ping(s, r, i);
	ms = ms_now() - t0;
	watch_fd = -1;
	/* one look per 10 ms of coarse clock, plus slack for the clock's tick */
	assert_true((uint64_t)atomic_load(&watch_recvs) <= ms / 10 + 3);

	/* Regression: a receive with no buffer for a non-empty slot is refused up front. */
	{
		void *dst[2] = {NULL, NULL}, *rq = NULL;
		size_t sizes[2] = {0, 64};
		int tags[2] = {1, 2};
		assert_int_equal(cruxn_irecv(r, 2, dst, sizes, tags, NULL, &rq),
				 CRUXN_INVALID_ARGUMENT);
		assert_null(rq);
	}

	assert_int_equal(cruxn_close_send(s), CRUXN_SUCCESS);
	assert_int_equal(cruxn_close_recv(r), CRUXN_SUCCESS);
	assert_int_equal(cruxn_close_listen(l), CRUXN_SUCCESS);
	assert_int_equal(cruxn_finalize(), CRUXN_SUCCESS);
	unsetenv("CRUX_SOCKET_IFNAME");
	unsetenv("CRUX_SOCKET_FAMILY");
	unsetenv("CRUX_TAGGING");
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

/* Regression: a bad CRUX_SHM_DIR fails init with a message naming variable and value. */
static void test_bad_shm_dir_fails_init(void **state)
{
	(void)state;
	setenv("CRUX_SHM_DIR", "relative/cxpl", 1);
	last_err[0] = '\0';
	crux_log_set_sink(keep_sink, NULL);
	assert_int_not_equal(cruxn_init(NULL), CRUXN_SUCCESS);
	crux_log_set_sink(NULL, NULL);
	assert_non_null(strstr(last_err, "CRUX_SHM_DIR"));
	assert_non_null(strstr(last_err, "relative/cxpl"));
	assert_false(cruxn_ctx.ready);
	setenv("CRUX_SHM_DIR", "/nonexistent-cxpl", 1);
}

/* Log lines about the profile record, whatever their level. */
static _Atomic int prof_lines; /* written by the publisher thread */

static void prof_sink(void *arg, enum crux_log_level level, const char *file, int line,
		      const char *msg)
{
	(void)arg;
	(void)level;
	(void)file;
	(void)line;
	if (strstr(msg, "profile record"))
		atomic_fetch_add(&prof_lines, 1);
}

/*
 * Regression: with no shared-memory directory (no agent) the publisher
 * re-tries every interval; common's logging open said so every time.
 */
static void test_missing_profile_dir_logged_once(void **state)
{
	char err[256];
	enum crux_log_level lvl = crux_log_get_level();
	(void)state;

	setenv("CRUX_PUBLISH_INTERVAL", "10ms", 1);
	setenv("CRUX_TAGGING", "0", 1);
	assert_int_equal(cruxn_config_load(&cruxn_ctx.cfg, err, sizeof(err)), CRUX_OK);
	unsetenv("CRUX_PUBLISH_INTERVAL");
	unsetenv("CRUX_TAGGING");
	snprintf(cruxn_ctx.shm_dir, sizeof(cruxn_ctx.shm_dir), "/nonexistent-cxpl/shm");
	atomic_store(&prof_lines, 0);
	cruxn_ctx.once_prof_fail = 0; /* an earlier test may have said it */
	crux_log_set_level(CRUX_LOG_INFO);
	crux_log_set_sink(prof_sink, NULL);
	pthread_mutex_lock(&cruxn_ctx.lock);
	assert_int_equal(cruxn_tagging_start(), CRUX_OK);
	pthread_mutex_unlock(&cruxn_ctx.lock);
	/* The first attempt (10 ms in; allow a loaded machine), then about 20 more. */
	for (int i = 0; i < 500 && atomic_load(&prof_lines) == 0; i++)
		usleep(10000);
	usleep(200000);
	cruxn_tagging_stop();
	crux_log_set_sink(NULL, NULL);
	crux_log_set_level(lvl);
	assert_int_equal(atomic_load(&prof_lines), 1);
	assert_null(cruxn_ctx.prof);
}

static _Atomic int lifecycle_bad;

static void *lifecycle_main(void *arg)
{
	(void)arg;
	for (int i = 0; i < 150; i++) {
		if (cruxn_init(NULL) != CRUXN_SUCCESS) {
			atomic_fetch_add(&lifecycle_bad, 1);
			continue;
		}
		usleep(200);
		/* We hold a reference: the context must be up. */
		if (!cruxn_ctx.ready || cruxn_ctx.ndevs < 1)
			atomic_fetch_add(&lifecycle_bad, 1);
		cruxn_finalize();
	}
	return NULL;
}

/*
 * Regression: v11 init/finalize run per communicator, possibly on several
 * threads. An init racing with the last finalize took a reference on a
 * context that was then torn down under it.
 */
static void test_init_finalize_race(void **state)
{
	pthread_t th[2];
	(void)state;

	setenv("CRUX_SHM_DIR", "/nonexistent-cxpl", 1);
	setenv("CRUX_SOCKET_IFNAME", "=lo", 1);
	setenv("CRUX_TAGGING", "0", 1);
	atomic_store(&lifecycle_bad, 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, lifecycle_main, NULL), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(atomic_load(&lifecycle_bad), 0);
	assert_false(cruxn_ctx.ready);
	unsetenv("CRUX_SOCKET_IFNAME");
	unsetenv("CRUX_TAGGING");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ifname),
	    cmocka_unit_test(test_config_defaults_and_errors),
	    cmocka_unit_test(test_class_precedence_without_table),
	    cmocka_unit_test(test_nccl_ib_class_precedence),
	    cmocka_unit_test(test_table_precedence_and_staleness),
	    cmocka_unit_test(test_corrupt_table_logged_once),
	    cmocka_unit_test(test_crux_class_uses_table_level_map),
	    cmocka_unit_test(test_idle_sender_skips_ctrl_reads),
	    cmocka_unit_test(test_bad_shm_dir_fails_init),
	    cmocka_unit_test(test_missing_profile_dir_logged_once),
	    cmocka_unit_test(test_init_finalize_race),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
