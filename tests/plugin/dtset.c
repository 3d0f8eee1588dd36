/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cruxn-dtset DIR JOB_ID LEVEL [PEER PATH_ID PORT...]
 * Publish one job's level (and optionally its route to PEER) in the decision
 * table under DIR, as the agent would, with a heartbeat good for an hour.
 *
 * cruxn-dtset prof DIR
 * Print the plugin's byte counters from every profile record in DIR:
 * "pid PID peer ADDR level L tx BYTES rx BYTES" for each non-zero level.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crux/decision.h"
#include "crux/decision_writer.h"
#include "crux/jobid.h"
#include "crux/profile.h"
#include "crux/profile_scan.h"

static int print_record(void *arg, const struct crux_prof_snapshot *snap)
{
	char a[CRUX_ADDR_STRLEN];
	(void)arg;
	if (!snap->has_net)
		return 0;
	for (uint32_t i = 0; i < snap->net.npeers && i < CRUX_PROF_MAX_PEERS; i++) {
		const struct crux_prof_peer *p = &snap->net.peers[i];
		crux_addr_format(&p->peer, a, sizeof(a));
		for (int l = 0; l < CRUX_MAX_LEVELS; l++)
			if (p->tx_bytes[l] || p->rx_bytes[l])
				printf("pid %d peer %s level %d tx %llu rx %llu\n", (int)snap->pid,
				       a, l, (unsigned long long)p->tx_bytes[l],
				       (unsigned long long)p->rx_bytes[l]);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct crux_dt_settings s;
	struct crux_dt_writer *w = NULL;
	struct crux_dt_job job;
	struct crux_dt_route route;
	char id[CRUX_JOB_ID_LEN + 8];
	uint32_t nroutes = 0;
	crux_status_t st;

	if (argc == 3 && strcmp(argv[1], "prof") == 0)
		return crux_prof_scan(argv[2], 0, print_record, NULL, NULL) == CRUX_OK ? 0 : 1;
	if (argc < 4 || (argc > 4 && argc < 7)) {
		fprintf(stderr, "usage: %s DIR JOB_ID LEVEL [PEER PATH_ID PORT...]\n", argv[0]);
		return 2;
	}
	crux_dt_settings_default(CRUX_DEFAULT_LEVELS, &s);
	s.heartbeat_timeout_ns = 3600ull * 1000000000ull;
	st = crux_dt_writer_open(argv[1], &s, &w, NULL);
	if (st != CRUX_OK) {
		fprintf(stderr, "cannot open the decision table in %s: %s\n", argv[1],
			crux_status_str(st));
		return 1;
	}
	/* CRUX_JOB_ID=X gives the readable id "env:X" */
	snprintf(id, sizeof(id), "env:%s", argv[2]);
	memset(&job, 0, sizeof(job));
	job.job_key = crux_job_key_of(id);
	snprintf(job.job_id, sizeof(job.job_id), "%.63s", id);
	job.level = (uint8_t)atoi(argv[3]);
	job.state = CRUX_JOB_SCHEDULED;
	memset(&route, 0, sizeof(route));
	if (argc > 4) {
		route.job_key = job.job_key;
		if (crux_addr_parse(argv[4], &route.peer) != CRUX_OK) {
			fprintf(stderr, "bad peer address %s\n", argv[4]);
			return 2;
		}
		route.path_id = (uint16_t)atoi(argv[5]);
		for (int i = 6; i < argc && route.nports < CRUX_ROUTE_MAX_PORTS; i++)
			route.ports[route.nports++] = (uint16_t)atoi(argv[i]);
		nroutes = 1;
	}
	st = crux_dt_publish(w, &job, 1, &route, nroutes);
	if (st != CRUX_OK) {
		fprintf(stderr, "publish failed: %s\n", crux_status_str(st));
		return 1;
	}
	crux_dt_heartbeat(w);
	crux_dt_writer_close(w);
	return 0;
}
