/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake-rank DIR JOB_ID HOST_ADDR PEER_ADDR BYTES_PER_ITER ITER COMPUTE COMM:
 * a stand-in training process for integration tests. It writes its profile
 * record through common's API (compute section as the preload would, net
 * section as the plugin would, advancing every 100 ms) until killed.
 * With FAKE_RANK_ATTACH=1 it attaches to cruxd over its socket (contract v2,
 * record in a sealed memfd) instead of writing a v1 record file, and, as the
 * preload does, attaches again (same record) when the agent closed the
 * connection (cruxd restarted).
 * With FAKE_RANK_BUSY=F (0..1) its net section says the plugin was busy a
 * fraction F of its 10 s period (the stall breakdown's input).
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "crux/attach.h"
#include "crux/jobid.h"
#include "crux/profile.h"
#include "crux/shm.h"

/* The preload's keep_attached: a closed connection is opened again, never
 * blocking; the same record goes with the new HELLO. */
static void keep_attached(const char *dir, struct crux_prof_handle *h,
			  struct crux_agent_conn **conn, bool *welcomed)
{
	struct crux_dt_reader *r = NULL;
	char err[512];

	if (*conn && *welcomed && !crux_agent_conn_alive(*conn)) {
		crux_agent_conn_close(*conn);
		*conn = NULL;
		*welcomed = false;
	}
	if (!*conn && crux_agent_conn_open(dir, h, conn, err, sizeof(err)) != CRUX_OK) {
		*conn = NULL;
		return;
	}
	if (*welcomed)
		return;
	crux_status_t st = crux_agent_conn_poll(*conn, &r, err, sizeof(err));
	if (st == CRUX_OK) {
		*welcomed = true;
		crux_dt_reader_close(r);
	} else if (st != CRUX_ERR_BUSY) {
		crux_agent_conn_close(*conn);
		*conn = NULL;
	}
}

int main(int argc, char **argv)
{
	struct crux_prof_identity id;
	struct crux_prof_compute c;
	struct crux_prof_net *n = calloc(1, sizeof(*n));
	struct crux_prof_handle *h;
	double bpi, iter;
	uint64_t iters = 0;

	if (argc != 9 || !n) {
		fprintf(stderr, "usage: fake-rank DIR JOB_ID HOST PEER BYTES_PER_ITER ITER COMPUTE "
				"COMM\n");
		return 2;
	}
	memset(&id, 0, sizeof(id));
	snprintf(id.job_id, sizeof(id.job_id), "%s", argv[2]);
	id.job_key = crux_job_key_of(id.job_id);
	snprintf(id.hostname, sizeof(id.hostname), "fake-%s", argv[3]);
	if (crux_addr_parse(argv[3], &id.host_addr) != CRUX_OK ||
	    crux_addr_parse(argv[4], &n->peers[0].peer) != CRUX_OK) {
		fprintf(stderr, "fake-rank: bad address\n");
		return 2;
	}
	id.rank = 0;
	id.world_size = 1;
	id.local_rank = 0;
	const char *att = getenv("FAKE_RANK_ATTACH");
	struct crux_agent_conn *conn = NULL;
	bool welcomed = false, attach = att && !strcmp(att, "1");
	if (attach) {
		struct crux_dt_reader *table = NULL;
		char err[512];
		if (crux_prof_open_shared_ex(&id, &h, err, sizeof(err)) != CRUX_OK ||
		    crux_agent_conn_open(argv[1], h, &conn, err, sizeof(err)) != CRUX_OK ||
		    crux_agent_conn_wait(conn, 5000, &table, err, sizeof(err)) != CRUX_OK) {
			fprintf(stderr, "fake-rank: cannot attach: %s\n", err);
			return 1;
		}
		crux_dt_reader_close(table);
		welcomed = true;
		/* The connection stays open (the record lives as long as it) until killed. */
	} else if (crux_prof_open_self(argv[1], &id, &h) != CRUX_OK) {
		return 1;
	}
	bpi = atof(argv[5]);
	iter = atof(argv[6]);
	memset(&c, 0, sizeof(c));
	c.iter_time_s = iter;
	c.compute_s = atof(argv[7]);
	c.comm_s = atof(argv[8]);
	c.overlap_s = 0;
	c.stall_s = c.comm_s;
	c.timing_backend = CRUX_TIMING_HOST;
	c.window_s = 0.1;
	n->npeers = 1;
	const char *busy = getenv("FAKE_RANK_BUSY");
	double busy_frac = busy ? atof(busy) : -1;
	for (;;) {
		struct timespec ts = {0, 100000000L};
		iters += 10;
		c.windows++;
		c.iterations = 10;
		c.total_iterations = iters;
		c.window_end_ns = crux_now_ns();
		n->peers[0].tx_bytes[0] = (uint64_t)(bpi * (double)iters);
		n->update_ns = crux_now_ns();
		if (busy_frac >= 0) {
			n->busy_window_ns = 10000000000ull;
			n->busy_period_ns = (uint64_t)(busy_frac * 1e10);
			n->busy_ns = n->busy_period_ns + iters * 1000000ull;
		}
		crux_prof_publish_compute(h, &c);
		crux_prof_publish_net(h, n);
		if (attach)
			keep_attached(argv[1], h, &conn, &welcomed);
		nanosleep(&ts, NULL);
	}
}
