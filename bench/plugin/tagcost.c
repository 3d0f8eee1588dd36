/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cruxn-bench-tagcost DIR JOB_ID: what the decision-table check costs on each
 * send (cruxn_tag_refresh against a fresh table with nothing changed), in ns
 * per call, with CRUX_TAGGING on and off. run.sh relates it to the time of a
 * 64 KiB message measured in the same run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crux/clock.h"
#include "crux/jobid.h"
#include "cruxn.h"

static double now_s(void)
{
	return (double)crux_now_ns() / 1e9;
}

static double per_call_ns(bool tagging, long n)
{
	struct cruxn_tag_state ts;
	struct crux_addr peer;
	int changes = 0;

	cruxn_ctx.cfg.tagging = tagging;
	memset(&peer, 0, sizeof(peer));
	(void)crux_addr_parse("198.18.2.2", &peer);
	cruxn_tag_init(&ts, &peer, -1);
	(void)cruxn_tag_refresh(&ts);
	double t0 = now_s();
	for (long i = 0; i < n; i++)
		changes += cruxn_tag_refresh(&ts);
	double ns = (now_s() - t0) / (double)n * 1e9;
	if (changes != 0) /* nothing changes in the table while we measure */
		fprintf(stderr, "warning: %d class changes during the measurement\n", changes);
	return ns;
}

int main(int argc, char **argv)
{
	char err[256], id[96];
	double on = 1e9, off = 1e9;

	if (argc < 3) {
		fprintf(stderr, "usage: %s DIR JOB_ID\n", argv[0]);
		return 2;
	}
	if (cruxn_config_load(&cruxn_ctx.cfg, err, sizeof(err)) != CRUX_OK) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	snprintf(cruxn_ctx.shm_dir, sizeof(cruxn_ctx.shm_dir), "%s", argv[1]);
	snprintf(id, sizeof(id), "env:%s", argv[2]);
	cruxn_ctx.job.key = crux_job_key_of(id);
	cruxn_ctx.cfg.tagging = true;
	pthread_mutex_lock(&cruxn_ctx.lock);
	if (cruxn_tagging_start() != CRUX_OK) {
		pthread_mutex_unlock(&cruxn_ctx.lock);
		return 1;
	}
	pthread_mutex_unlock(&cruxn_ctx.lock);
	if (!atomic_load(&cruxn_ctx.dt)) {
		fprintf(stderr, "no decision table in %s\n", argv[1]);
		return 1;
	}
	/* best of 5 rounds: only other load makes a round slower */
	for (int r = 0; r < 5; r++) {
		double a = per_call_ns(true, 2000000), b = per_call_ns(false, 2000000);
		on = a < on ? a : on;
		off = b < off ? b : off;
	}
	printf("tag_ns_on %.2f\ntag_ns_off %.2f\n", on, off);
	cruxn_tagging_stop();
	return 0;
}
