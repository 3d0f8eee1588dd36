/* SPDX-License-Identifier: Apache-2.0 */
/* cruxd metrics: the address spec parser and the rendered text's escaping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "metrics.h"
#include "prom.h"

static void test_parse(void **state)
{
	char host[64], err[256];
	uint16_t port;

	(void)state;
	assert_int_equal(cruxd_metrics_parse("9464", host, sizeof(host), &port, err, sizeof(err)),
			 CRUX_OK);
	assert_string_equal(host, "127.0.0.1"); /* localhost unless told otherwise */
	assert_int_equal(port, 9464);
	assert_int_equal(
	    cruxd_metrics_parse("0.0.0.0:80", host, sizeof(host), &port, err, sizeof(err)),
	    CRUX_OK);
	assert_string_equal(host, "0.0.0.0");
	assert_int_equal(port, 80);
	assert_int_equal(
	    cruxd_metrics_parse("[::1]:9000", host, sizeof(host), &port, err, sizeof(err)),
	    CRUX_OK);
	assert_string_equal(host, "::1");
	assert_int_equal(port, 9000);
	static const char *const bad[] = {
	    "",	  "x",	     "::1:80", "1.2.3.4:", "[::1]80", "localhost:80", "1.2.3.4:65536",
	    "-1", "[::1:80", "80 "};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		assert_int_equal(
		    cruxd_metrics_parse(bad[i], host, sizeof(host), &port, err, sizeof(err)),
		    CRUX_ERR_INVAL);
		assert_non_null(strstr(err, "CRUX_METRICS"));
	}
}

static void test_render(void **state)
{
	struct cruxd_prom_snapshot *s = calloc(1, sizeof(*s));
	char *text = NULL;
	size_t len = 0;

	(void)state;
	assert_non_null(s);
	s->started_ns = 1000000000ull;
	s->published_ns = 3000000000ull;
	s->schedule_ns = 2000000000ull;
	s->body.nlevels = 4;
	s->body.njobs = 2;
	s->body.passes = 7;
	strcpy(s->body.jobs[0].job_id, "a\"b\\c\nd");
	s->body.jobs[0].level = 2;
	s->body.jobs[0].bytes_per_iter = 100;
	s->body.jobs[0].state = CRUX_JOB_SCHEDULED;
	strcpy(s->body.jobs[1].job_id, "env:two");
	s->body.jobs[1].level = 2;
	s->body.jobs[1].bytes_per_iter = 50;
	s->body.jobs[1].intensity = 1.5;
	assert_int_equal(cruxd_prom_render(s, 5000000000ull, &text, &len), CRUX_OK);
	assert_int_equal(strlen(text), len);
	assert_non_null(strstr(text, "crux_job_level{job=\"a\\\"b\\\\c\\nd\"} 2\n"));
	assert_non_null(
	    strstr(text, "crux_job_state{job=\"a\\\"b\\\\c\\nd\",state=\"scheduled\"} 1\n"));
	assert_non_null(strstr(text, "crux_job_intensity{job=\"env:two\"} 1.5\n"));
	assert_non_null(strstr(text, "crux_job_state{job=\"env:two\",state=\"profiling\"} 1\n"));
	assert_non_null(strstr(text, "crux_level_bytes_per_iteration{level=\"2\"} 150\n"));
	assert_non_null(strstr(text, "crux_level_bytes_per_iteration{level=\"0\"} 0\n"));
	assert_non_null(strstr(text, "crux_agent_schedule_age_seconds 3\n"));
	assert_non_null(strstr(text, "crux_agent_heartbeat_age_seconds 2\n"));
	assert_non_null(strstr(text, "crux_agent_passes_total 7\n"));
	assert_non_null(strstr(text, "# TYPE crux_agent_passes_total counter\n"));
	assert_null(strstr(text, "crux_cluster_")); /* single-host mode */
	free(text);
	/* Cluster mode: leader, applied revision, stale. */
	strcpy(s->body.cluster, "c1");
	s->body.term = 12;
	s->body.schedule_revision = 40;
	s->body.cluster_stale = 1;
	assert_int_equal(cruxd_prom_render(s, 5000000000ull, &text, &len), CRUX_OK);
	assert_non_null(strstr(text, "crux_cluster_leader 1\n"));
	assert_non_null(strstr(text, "crux_cluster_schedule_revision 40\n"));
	assert_non_null(strstr(text, "crux_cluster_stale 1\n"));
	assert_non_null(strstr(text, "# TYPE crux_cluster_schedules_written_total counter\n"));
	free(text);
	s->body.cluster[0] = '\0';
	/* Never published: ages are -1, not garbage. */
	s->published_ns = s->schedule_ns = 0;
	assert_int_equal(cruxd_prom_render(s, 5000000000ull, &text, &len), CRUX_OK);
	assert_non_null(strstr(text, "crux_agent_heartbeat_age_seconds -1\n"));
	free(text);
	free(s);
}

/* Stall breakdown and bytes by peer host (issue 31): samples only where known. */
static void test_render_sensitivity(void **state)
{
	struct cruxd_prom_snapshot *s = calloc(1, sizeof(*s));
	char *text = NULL;
	size_t len = 0;

	(void)state;
	assert_non_null(s);
	s->body.nlevels = 2;
	s->body.njobs = 3;
	strcpy(s->body.jobs[0].job_id, "env:net");
	s->body.jobs[0].stalls_valid = 1;
	s->body.jobs[0].stalls_net_known = 1;
	s->body.jobs[0].frac_compute = 0.5;
	s->body.jobs[0].frac_interconnect = 0.125;
	s->body.jobs[0].frac_network = 0.25;
	s->body.jobs[0].frac_other = 0.125;
	s->body.jobs[0].npeer_bytes = 2;
	crux_addr_parse("198.18.0.1", &s->body.jobs[0].peer_bytes[0].src);
	crux_addr_parse("198.18.0.2", &s->body.jobs[0].peer_bytes[0].dst);
	s->body.jobs[0].peer_bytes[0].bytes_per_iter = 4096;
	crux_addr_parse("198.18.0.1", &s->body.jobs[0].peer_bytes[1].src);
	crux_addr_parse("fd00::3", &s->body.jobs[0].peer_bytes[1].dst);
	s->body.jobs[0].peer_bytes[1].bytes_per_iter = 512;
	strcpy(s->body.jobs[1].job_id, "env:noplugin");
	s->body.jobs[1].stalls_valid = 1;
	s->body.jobs[1].frac_compute = 0.75;
	s->body.jobs[1].frac_interconnect = 0.25;
	strcpy(s->body.jobs[2].job_id, "env:new"); /* no profile yet */
	assert_int_equal(cruxd_prom_render(s, 5000000000ull, &text, &len), CRUX_OK);
	assert_non_null(strstr(text, "# TYPE crux_job_network_stall_fraction gauge\n"));
	assert_non_null(strstr(text, "crux_job_compute_fraction{job=\"env:net\"} 0.5\n"));
	assert_non_null(
	    strstr(text, "crux_job_interconnect_stall_fraction{job=\"env:net\"} 0.125\n"));
	assert_non_null(strstr(text, "crux_job_network_stall_fraction{job=\"env:net\"} 0.25\n"));
	assert_non_null(strstr(text, "crux_job_other_fraction{job=\"env:net\"} 0.125\n"));
	assert_non_null(strstr(text, "crux_job_compute_fraction{job=\"env:noplugin\"} 0.75\n"));
	/* unknown network part: no sample, not a made-up 0 */
	assert_null(strstr(text, "crux_job_network_stall_fraction{job=\"env:noplugin\"}"));
	assert_null(strstr(text, "crux_job_compute_fraction{job=\"env:new\"}"));
	assert_non_null(
	    strstr(text, "crux_job_peer_bytes_per_iteration{job=\"env:net\",src=\"198.18.0.1\","
			 "dst=\"198.18.0.2\"} 4096\n"));
	assert_non_null(
	    strstr(text, "crux_job_peer_bytes_per_iteration{job=\"env:net\",src=\"198.18.0.1\","
			 "dst=\"fd00::3\"} 512\n"));
	free(text);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse),
	    cmocka_unit_test(test_render),
	    cmocka_unit_test(test_render_sensitivity),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
