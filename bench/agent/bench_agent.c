/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One cruxd pass over 1,000 profile records (scan + group + schedule +
 * publish table and status), against baselines measured in the same run:
 * the bare profile scan of the same 1,000 records, and the same pass over
 * 10 records. Records are real files of 1,000 live child processes (100 jobs
 * of 10 ranks on 16 hosts, each rank sending to the next host).
 *   bench-agent [OUT.json] [RECORDS]
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crux/agent.h"
#include "crux/jobid.h"
#include "crux/json.h"
#include "crux/log.h"
#include "crux/overrides.h"
#include "crux/profile.h"
#include "crux/profile_scan.h"

#define RUNS 21

struct kv {
	const char *k, *v;
};

static const char *benv(void *arg, const char *name)
{
	const struct kv *kv = arg;
	for (; kv->k; kv++)
		if (!strcmp(kv->k, name))
			return kv->v;
	return NULL;
}

/* Children that own one record each and wait to be killed. */
static int spawn(const char *dir, int n, pid_t *pids)
{
	int ack[2];

	if (pipe(ack) != 0)
		return -1;
	for (int i = 0; i < n; i++) {
		pid_t p = fork();
		if (p < 0)
			return -1;
		if (p == 0) {
			struct crux_prof_identity id;
			struct crux_prof_compute c;
			struct crux_prof_net *net = calloc(1, sizeof(*net));
			struct crux_prof_handle *h;
			int job = i / 10, host = i % 16;
			char ok = 0;

			memset(&id, 0, sizeof(id));
			snprintf(id.job_id, sizeof(id.job_id), "env:bench-%d", job);
			id.job_key = crux_job_key_of(id.job_id);
			snprintf(id.hostname, sizeof(id.hostname), "h%d", host);
			id.host_addr.family = 4;
			id.host_addr.bytes[0] = 198;
			id.host_addr.bytes[1] = 18;
			id.host_addr.bytes[3] = (uint8_t)(1 + host);
			id.rank = i % 10;
			id.world_size = 10;
			memset(&c, 0, sizeof(c));
			c.windows = 1;
			c.total_iterations = 1000;
			c.iter_time_s = 0.2;
			c.compute_s = 0.05 + 0.001 * job;
			c.comm_s = 0.1;
			c.overlap_s = 0.04;
			c.stall_s = 0.06;
			if (net) {
				net->npeers = 1;
				net->peers[0].peer = id.host_addr;
				net->peers[0].peer.bytes[3] = (uint8_t)(1 + (host + 1) % 16);
				net->peers[0].tx_bytes[0] =
				    1000ull * (uint64_t)(1 + job) * 1000000ull;
			}
			if (net && crux_prof_open_self(dir, &id, &h) == CRUX_OK) {
				crux_prof_publish_compute(h, &c);
				crux_prof_publish_net(h, net);
				ok = 1;
			}
			if (write(ack[1], &ok, 1) != 1)
				_exit(1);
			for (;;)
				pause();
		}
		pids[i] = p;
	}
	close(ack[1]);
	for (int i = 0; i < n; i++) {
		char ok = 0;
		if (read(ack[0], &ok, 1) != 1 || !ok)
			return -1;
	}
	close(ack[0]);
	return 0;
}

static void reap(pid_t *pids, int n)
{
	for (int i = 0; i < n; i++)
		if (pids[i] > 0)
			kill(pids[i], SIGKILL);
	for (int i = 0; i < n; i++)
		if (pids[i] > 0)
			waitpid(pids[i], NULL, 0);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static int noop(void *arg, const struct crux_prof_snapshot *s)
{
	(void)s;
	(*(int *)arg)++;
	return 0;
}

struct result {
	double scan_reap_ms;
	double scan_ms, pass_ms, steady_ms, pass_p90_ms;
};

/* Returns 0 and fills r. */
static int measure(const char *shm, int n, struct result *r)
{
	struct kv env[] = {{"CRUX_SHM_DIR", shm},
			   {"CRUX_PROBE", "0"},
			   {"CRUX_PROFILE_WINDOW", "100ms"},
			   {"CRUX_AGENT_HOLD", "0"},
			   {"CRUX_AGENT_INTERVAL", "100ms"},
			   {NULL, NULL}};
	struct cruxd_config cfg;
	struct cruxd_agent *a = NULL;
	struct cruxd_overrides *o = calloc(1, sizeof(*o));
	pid_t *pids = calloc((size_t)n, sizeof(*pids));
	uint64_t scan[RUNS], reap_scan[RUNS], pass[RUNS], steady[RUNS], t;
	char err[256];
	int rc = -1, cnt;

	if (!o || !pids || spawn(shm, n, pids) != 0) {
		fprintf(stderr, "bench-agent: cannot start %d record writers\n", n);
		goto out;
	}
	if (cruxd_config_env(benv, env, &cfg, err, sizeof(err)) != CRUX_OK) {
		fprintf(stderr, "bench-agent: %s\n", err);
		goto out;
	}
	for (int i = 0; i < RUNS; i++) {
		cnt = 0;
		t = crux_now_ns();
		crux_prof_scan(shm, 0, noop, &cnt, NULL);
		scan[i] = crux_now_ns() - t;
		if (cnt != n) {
			fprintf(stderr, "bench-agent: scan saw %d of %d records\n", cnt, n);
			goto out;
		}
		cnt = 0;
		t = crux_now_ns();
		crux_prof_scan(shm, CRUX_PROF_SCAN_REAP, noop, &cnt, NULL);
		reap_scan[i] = crux_now_ns() - t;
	}
	if (cruxd_agent_open(&cfg, &a, NULL) != CRUX_OK)
		goto out;
	t = crux_now_ns();
	cruxd_agent_pass(a, t);
	cruxd_agent_pass(a, t + 1000000000ull); /* every job profiled and scheduled */
	if (cruxd_agent_status(a)->njobs != (uint32_t)(n + 9) / 10) {
		fprintf(stderr, "bench-agent: %u jobs, expected %d\n", cruxd_agent_status(a)->njobs,
			(n + 9) / 10);
		goto out;
	}
	for (int i = 0; i < RUNS; i++) {
		/* A new overrides file (for a job that does not run) forces a full reschedule. */
		o->seq = (uint64_t)i + 1;
		o->n = 1;
		o->o[0].job_key = 1;
		o->o[0].level = 0;
		cruxd_overrides_store(shm, o);
		t = crux_now_ns();
		cruxd_agent_pass(a, t);
		pass[i] = crux_now_ns() - t;
	}
	if (cruxd_agent_status(a)->reschedules < RUNS) {
		fprintf(stderr, "bench-agent: passes did not reschedule\n");
		goto out;
	}
	for (int i = 0; i < RUNS; i++) {
		t = crux_now_ns();
		cruxd_agent_pass(a, t);
		steady[i] = crux_now_ns() - t;
	}
	qsort(scan, RUNS, sizeof(scan[0]), cmp_u64);
	qsort(reap_scan, RUNS, sizeof(reap_scan[0]), cmp_u64);
	r->scan_reap_ms = (double)reap_scan[RUNS / 2] / 1e6;
	qsort(pass, RUNS, sizeof(pass[0]), cmp_u64);
	qsort(steady, RUNS, sizeof(steady[0]), cmp_u64);
	r->scan_ms = (double)scan[RUNS / 2] / 1e6;
	r->pass_ms = (double)pass[RUNS / 2] / 1e6;
	r->pass_p90_ms = (double)pass[RUNS * 9 / 10] / 1e6;
	r->steady_ms = (double)steady[RUNS / 2] / 1e6;
	rc = 0;
out:
	cruxd_agent_close(a);
	if (pids)
		reap(pids, n);
	free(pids);
	free(o);
	return rc;
}

int main(int argc, char **argv)
{
	const char *out = argc > 1 ? argv[1] : "bench/results/agent.json";
	int n = argc > 2 ? atoi(argv[2]) : 1000;
	char tmp[] = "/tmp/cxag-bench.XXXXXX", shm1[64], shm2[64], cmd[128];
	struct result big, small;
	FILE *f;
	int rc = 1;

	crux_log_init("bench-agent");
	crux_log_set_level(CRUX_LOG_ERROR);
	if (n < 10 || n > 4000 || !mkdtemp(tmp) || chmod(tmp, 0755) != 0)
		return 2;
	snprintf(shm1, sizeof(shm1), "%s/big", tmp);
	snprintf(shm2, sizeof(shm2), "%s/small", tmp);
	if (crux_shm_dir_check(shm1, true) != CRUX_OK || crux_shm_dir_check(shm2, true) != CRUX_OK)
		goto out;
	printf("bench-agent: %d records (%d jobs), median of %d passes\n", n, (n + 9) / 10, RUNS);
	if (measure(shm1, n, &big) != 0 || measure(shm2, 10, &small) != 0)
		goto out;
	printf("  scan only, %d records:         %8.3f ms (baseline)\n", n, big.scan_ms);
	printf("  scan with liveness check:      %8.3f ms = %.2fx the scan\n", big.scan_reap_ms,
	       big.scan_reap_ms / big.scan_ms);
	printf("  full pass + reschedule:        %8.3f ms (p90 %.3f ms) = %.2fx the scan\n",
	       big.pass_ms, big.pass_p90_ms, big.pass_ms / big.scan_ms);
	printf("  steady pass (no reschedule):   %8.3f ms = %.2fx the scan\n", big.steady_ms,
	       big.steady_ms / big.scan_ms);
	printf("  full pass + reschedule, 10:    %8.3f ms; %d records cost %.1fx that\n",
	       small.pass_ms, n, big.pass_ms / small.pass_ms);
	f = fopen(out, "w");
	if (!f) {
		fprintf(stderr, "bench-agent: cannot write %s: %s\n", out, strerror(errno));
		goto out;
	}
	{
		struct crux_json j;

		crux_json_init_lines(&j, f);
		crux_json_obj(&j);
		crux_json_key(&j, "benchmark");
		crux_json_str(&j, "agent-pass");
		crux_json_key(&j, "records");
		crux_json_i64(&j, n);
		crux_json_key(&j, "jobs");
		crux_json_i64(&j, (n + 9) / 10);
		crux_json_key(&j, "runs");
		crux_json_i64(&j, RUNS);
		crux_json_key(&j, "scan_ms_median");
		crux_json_numf(&j, "%.4f", big.scan_ms);
		crux_json_key(&j, "scan_reap_ms_median");
		crux_json_numf(&j, "%.4f", big.scan_reap_ms);
		crux_json_key(&j, "pass_ms_median");
		crux_json_numf(&j, "%.4f", big.pass_ms);
		crux_json_key(&j, "pass_ms_p90");
		crux_json_numf(&j, "%.4f", big.pass_p90_ms);
		crux_json_key(&j, "steady_pass_ms_median");
		crux_json_numf(&j, "%.4f", big.steady_ms);
		crux_json_key(&j, "pass10_ms_median");
		crux_json_numf(&j, "%.4f", small.pass_ms);
		crux_json_key(&j, "ratio_pass_vs_scan");
		crux_json_numf(&j, "%.3f", big.pass_ms / big.scan_ms);
		crux_json_key(&j, "ratio_steady_vs_scan");
		crux_json_numf(&j, "%.3f", big.steady_ms / big.scan_ms);
		crux_json_key(&j, "ratio_pass_vs_pass10");
		crux_json_numf(&j, "%.3f", big.pass_ms / small.pass_ms);
		crux_json_key(&j, "baseline");
		crux_json_str(&j, "crux_prof_scan of the same records, same run");
		crux_json_end_obj(&j);
		crux_json_done(&j);
	}
	fclose(f);
	printf("  written to %s\n", out);
	rc = 0;
out:
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "bench-agent: cannot remove %s\n", tmp);
	return rc;
}
