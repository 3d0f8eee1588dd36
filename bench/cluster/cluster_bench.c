/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cluster-bench ENDPOINTS N TTL STEADY_S LINGJUN_CSV OUT_JSON
 *
 * N emulated agents (one crux_cluster_node each: the real client, lease,
 * election, watcher) publish synthetic host views for hosts of the Lingjun
 * topology (jobs of 8 hosts, 8 ranks per host, a ring of traffic); the
 * leader merges them and runs the Crux scheduler library (CRUX_SCHED_CRUX_FULL)
 * on the topology. Measured: time from a job appearing in one host's view to
 * every host applying a schedule with it (median, p99 over arrivals); etcd
 * WAL bytes written per host per minute with nothing changing (from etcd's
 * etcd_disk_wal_write_bytes_total, summed over members); leader failover
 * (leader dropped without revoking: until every host applies a schedule of
 * a new term). The agents' loops run round-robin in one thread, so latencies
 * include stepping all N agents.
 */
#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crux/cluster_node.h"
#include "crux/sched.h"

#define RANKS_PER_HOST 8
#define JOB_HOSTS 8
#define ARRIVALS 12

struct host {
	struct crux_cluster_node *n;
	struct crux_cv_host view;
	int64_t rev, term;
	bool has_target;
	bool alive;
};

static struct host *H;
static int N, n_topo_hosts;
static struct crux_sched_topo *topo;
static uint64_t target_key;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct crux_addr host_addr(int i)
{
	struct crux_addr a = {.family = 4};
	a.bytes[0] = 10;
	a.bytes[1] = (uint8_t)(i >> 16);
	a.bytes[2] = (uint8_t)(i >> 8);
	a.bytes[3] = (uint8_t)i;
	return a;
}

/* Emulated host i sits on topology host i mod (hosts in the CSV). */
static int node_of(const struct crux_addr *a)
{
	int i = a->bytes[1] << 16 | a->bytes[2] << 8 | a->bytes[3];
	return i % n_topo_hosts;
}

static crux_status_t plan(void *arg, const struct crux_cv_host *m, const char *ovr, size_t ovr_len,
			  struct crux_cv_schedule *out)
{
	(void)ovr;
	(void)ovr_len;
	(void)arg;
	struct crux_sched_job *jobs = calloc(m->njobs ? m->njobs : 1, sizeof(*jobs));
	int *hostbuf = calloc((size_t)m->njobs * CRUX_CV_MAX_JOB_HOSTS + 1, sizeof(int));
	size_t nflows = 0;
	for (uint32_t i = 0; i < m->njobs; i++)
		nflows += m->jobs[i].nflows;
	struct crux_sched_flow *flowbuf = calloc(nflows + 1, sizeof(*flowbuf));
	struct crux_sched_schedule *s = NULL;
	crux_status_t st = CRUX_ERR_NOMEM;
	if (!jobs || !hostbuf || !flowbuf)
		goto out;
	size_t fo = 0;
	for (uint32_t i = 0; i < m->njobs; i++) {
		const struct crux_cv_job *j = &m->jobs[i];
		struct crux_sched_job *sj = &jobs[i];
		double nc = j->ncompute ? j->ncompute : 1;
		sj->id = j->key;
		sj->gpus = (int)j->nranks;
		sj->n_hosts = (int)j->nhosts;
		sj->hosts = hostbuf + (size_t)i * CRUX_CV_MAX_JOB_HOSTS;
		for (uint32_t h = 0; h < j->nhosts; h++)
			sj->hosts[h] = node_of(&j->hosts[h]);
		sj->work = j->compute_sum;
		sj->compute = j->compute_sum / nc;
		sj->overlap = j->overlap_sum / nc;
		sj->iter_time = j->iter_sum / nc;
		sj->flows = flowbuf + fo;
		for (uint32_t f = 0; f < j->nflows; f++) {
			int a = node_of(&j->flows[f].src), b = node_of(&j->flows[f].dst);
			if (a == b)
				continue;
			flowbuf[fo++] = (struct crux_sched_flow){a, b, j->flows[f].bytes};
			sj->n_flows++;
		}
	}
	struct crux_sched_params p;
	crux_sched_params_default(&p);
	p.levels = 4;
	if ((st = crux_sched_schedule_new(jobs, m->njobs, p.levels, &s)) != CRUX_OK ||
	    (st = crux_sched_run(topo, jobs, m->njobs, &p, CRUX_SCHED_CRUX_FULL, s)) != CRUX_OK)
		goto out;
	out->levels = (uint32_t)p.levels;
	out->njobs = m->njobs;
	out->jobs = calloc(m->njobs ? m->njobs : 1, sizeof(*out->jobs));
	if (!out->jobs) {
		st = CRUX_ERR_NOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < m->njobs; i++) {
		out->jobs[i].key = s->d[i].id;
		out->jobs[i].level = (uint8_t)s->d[i].level;
	}
out:
	crux_sched_schedule_free(s);
	free(jobs);
	free(hostbuf);
	free(flowbuf);
	return st;
}

static void apply(void *arg, const struct crux_cv_schedule *s, int64_t rev)
{
	struct host *h = arg;
	h->rev = rev;
	h->term = s->term;
	h->has_target = false;
	for (uint32_t i = 0; i < s->njobs && target_key; i++)
		h->has_target |= s->jobs[i].key == target_key;
}

static void add_job(int host, const char *id, int first, int nhosts)
{
	struct crux_cv_job j = {.nranks = RANKS_PER_HOST, .ncompute = RANKS_PER_HOST,
				.iter_sum = RANKS_PER_HOST * 0.30, .compute_sum = RANKS_PER_HOST * 0.20,
				.comm_sum = RANKS_PER_HOST * 0.12, .overlap_sum = RANKS_PER_HOST * 0.5,
				.nhosts = (uint32_t)nhosts};
	snprintf(j.id, sizeof(j.id), "%s", id);
	j.key = crux_job_key_of(id);
	for (int k = 0; k < nhosts; k++)
		j.hosts[k] = host_addr(first + k);
	struct crux_cv_flow f = {.src = host_addr(host),
				 .dst = host_addr(first + (host - first + 1) % nhosts), .bytes = 2e9};
	j.nflows = nhosts > 1 ? 1 : 0;
	j.flows = &f;
	if (crux_cv_host_add_job(&H[host].view, &j) != CRUX_OK ||
	    crux_cluster_set_view(H[host].n, &H[host].view) != CRUX_OK) {
		fprintf(stderr, "cluster-bench: cannot add job %s\n", id);
		exit(1);
	}
}

static void step_all(void)
{
	for (int i = 0; i < N; i++)
		if (H[i].alive)
			(void)crux_cluster_step(H[i].n);
	struct timespec ts = {0, 2000000};
	nanosleep(&ts, NULL);
}

static bool all_have(bool (*pred)(const struct host *, void *), void *arg)
{
	for (int i = 0; i < N; i++)
		if (H[i].alive && !pred(&H[i], arg))
			return false;
	return true;
}

static bool has_target(const struct host *h, void *arg)
{
	(void)arg;
	return h->has_target;
}

static bool new_term(const struct host *h, void *arg)
{
	return h->term != *(int64_t *)arg && h->term != 0;
}

struct mbuf {
	char *p;
	size_t len;
};
static size_t mwrite(char *p, size_t s, size_t n, void *arg)
{
	struct mbuf *b = arg;
	char *q = realloc(b->p, b->len + s * n + 1);
	if (!q)
		return 0;
	memcpy(q + b->len, p, s * n);
	b->p = q;
	b->len += s * n;
	b->p[b->len] = 0;
	return s * n;
}

/* Sum of etcd_disk_wal_write_bytes_total over the members. */
static double wal_bytes(const char *endpoints)
{
	double total = 0;
	char *list = strdup(endpoints), *save = NULL;
	for (char *ep = strtok_r(list, ",", &save); ep; ep = strtok_r(NULL, ",", &save)) {
		char url[300];
		snprintf(url, sizeof(url), "%s/metrics", ep);
		struct mbuf b = {0};
		CURL *c = curl_easy_init();
		curl_easy_setopt(c, CURLOPT_URL, url);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, mwrite);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
		curl_easy_setopt(c, CURLOPT_TIMEOUT, 5L);
		if (curl_easy_perform(c) == CURLE_OK && b.p) {
			char *l = strstr(b.p, "\netcd_disk_wal_write_bytes_total ");
			if (l)
				total += strtod(l + 33, NULL);
		}
		curl_easy_cleanup(c);
		free(b.p);
	}
	free(list);
	return total;
}

static int dcmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(const double *v, int n, double q)
{
	int i = (int)ceil(q * n) - 1;
	return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

int main(int argc, char **argv)
{
	if (argc != 7) {
		fprintf(stderr, "usage: %s ENDPOINTS N TTL STEADY_S LINGJUN_CSV OUT_JSON\n", argv[0]);
		return 2;
	}
	const char *eps = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0);
	N = atoi(argv[2]);
	int ttl = atoi(argv[3]);
	double steady = atof(argv[4]);
	struct crux_sched_lingjun_params lp;
	struct crux_sched_err serr;
	crux_sched_lingjun_defaults(&lp);
	if (N < JOB_HOSTS || crux_sched_topo_lingjun(argv[5], &lp, &topo, &serr) != CRUX_OK) {
		fprintf(stderr, "cluster-bench: N >= %d and a Lingjun CSV are needed\n", JOB_HOSTS);
		return 2;
	}
	n_topo_hosts = crux_sched_topo_n_hosts(topo);
	H = calloc((size_t)N, sizeof(*H));
	/* Each agent starts on another endpoint, as hosts would be spread. */
	char *ep[8];
	int nep = 0;
	char *list = strdup(eps), *save = NULL;
	for (char *e = strtok_r(list, ",", &save); e && nep < 8; e = strtok_r(NULL, ",", &save))
		ep[nep++] = e;
	double t_open = now_s();
	for (int i = 0; i < N; i++) {
		char name[32], rot[1024] = "", err[256];
		for (int k = 0; k < nep; k++) {
			strcat(rot, k ? "," : "");
			strcat(rot, ep[(i + k) % nep]);
		}
		snprintf(name, sizeof(name), "host%04d", i);
		struct crux_cluster_cfg c = {.etcd = {.endpoints = rot, .timeout_ms = 5000},
					     .cluster = "bench", .host = name, .ttl_s = ttl,
					     .plan = plan, .apply = apply, .arg = &H[i]};
		if (crux_cluster_open(&c, &H[i].n, err, sizeof(err)) != CRUX_OK) {
			fprintf(stderr, "cluster-bench: %s\n", err);
			return 1;
		}
		snprintf(H[i].view.name, sizeof(H[i].view.name), "%s", name);
		H[i].view.addr = host_addr(i);
		H[i].alive = true;
	}
	/* Jobs of 8 consecutive hosts; the last job is the target of warm-up. */
	char id[64];
	for (int first = 0; first + JOB_HOSTS <= N; first += JOB_HOSTS) {
		snprintf(id, sizeof(id), "job-%d", first / JOB_HOSTS);
		for (int k = 0; k < JOB_HOSTS; k++)
			add_job(first + k, id, first, JOB_HOSTS);
	}
	target_key = crux_job_key_of(id);
	double t0 = now_s();
	while (!all_have(has_target, NULL)) {
		if (now_s() - t0 > 300) {
			fprintf(stderr, "cluster-bench: no common schedule after 300 s\n");
			return 1;
		}
		step_all();
	}
	double warm = now_s() - t0;
	printf("N=%d: %d agents up, first schedule applied everywhere after %.2f s (open %.2f s)\n", N,
	       N, warm, t0 - t_open);

	/* Steady state: nothing changes; leases are renewed. */
	double w0 = wal_bytes(eps), s0 = now_s();
	while (now_s() - s0 < steady)
		step_all();
	double w1 = wal_bytes(eps), secs = now_s() - s0;
	double per_host_min = (w1 - w0) / nep / N / (secs / 60); /* each member writes its own WAL */
	double link_fraction = per_host_min / 60 * 8 / 100e9;
	printf("N=%d: steady state %.0f s: etcd WAL %.0f bytes per host per minute (%.2e of 100 Gbit/s)\n",
	       N, secs, per_host_min, link_fraction);

	/* Job arrivals on random hosts. */
	double lat[ARRIVALS];
	srand(1);
	for (int a = 0; a < ARRIVALS; a++) {
		int h = rand() % N;
		snprintf(id, sizeof(id), "arrival-%d", a);
		target_key = crux_job_key_of(id);
		for (int i = 0; i < N; i++)
			H[i].has_target = false;
		double ta = now_s();
		add_job(h, id, h, 1);
		while (!all_have(has_target, NULL)) {
			if (now_s() - ta > 120) {
				fprintf(stderr, "cluster-bench: arrival %d not applied after 120 s\n", a);
				return 1;
			}
			step_all();
		}
		lat[a] = now_s() - ta;
	}
	qsort(lat, ARRIVALS, sizeof(double), dcmp);
	double med = pct(lat, ARRIVALS, 0.5), p99 = pct(lat, ARRIVALS, 0.99);
	printf("N=%d: job arrival -> applied on all hosts: median %.3f s, p99 %.3f s (%d arrivals, "
	       "min %.3f)\n", N, med, p99, ARRIVALS, lat[0]);

	/* Failover: the leader vanishes without revoking its lease. */
	int l = -1;
	for (int i = 0; i < N; i++) {
		struct crux_cluster_status st;
		crux_cluster_get_status(H[i].n, &st);
		if (st.leader)
			l = i;
	}
	double fo = -1;
	if (l >= 0) {
		int64_t old = H[l].term;
		crux_cluster_abandon(H[l].n);
		H[l].alive = false;
		double tf = now_s();
		while (!all_have(new_term, &old)) {
			if (now_s() - tf > 4.0 * ttl + 30) {
				fprintf(stderr, "cluster-bench: no failover\n");
				return 1;
			}
			step_all();
		}
		fo = now_s() - tf;
		printf("N=%d: leader failover (lease TTL %d s): every host on the new term after %.2f s\n",
		       N, ttl, fo);
	}
	FILE *f = fopen(argv[6], "w");
	if (!f)
		return 1;
	fprintf(f, "{\"hosts\": %d, \"lease_ttl_s\": %d, \"etcd_members\": %d, \"first_schedule_s\": %.3f,\n"
		   " \"arrival_to_all_applied_s\": {\"median\": %.4f, \"p99\": %.4f, \"min\": %.4f, "
		   "\"max\": %.4f, \"n\": %d},\n"
		   " \"steady_wal_bytes_per_host_per_min\": %.1f, \"steady_fraction_of_100gbps\": %.3e, "
		   "\"steady_window_s\": %.1f,\n"
		   " \"leader_failover_s\": %.3f, \"goal_arrival_p99_le_2s\": %s, "
		   "\"goal_bytes_below_1e-4_of_link\": %s}\n",
		N, ttl, nep, warm, med, p99, lat[0], lat[ARRIVALS - 1], ARRIVALS, per_host_min,
		link_fraction, secs, fo, p99 <= 2 ? "true" : "false",
		link_fraction < 1e-4 ? "true" : "false");
	fclose(f);
	double tc = now_s();
	for (int i = 0; i < N; i++)
		if (H[i].alive)
			crux_cluster_stop(H[i].n); /* all watchers wind down together */
	for (int i = 0; i < N; i++)
		if (H[i].alive)
			crux_cluster_close(H[i].n);
	printf("N=%d: agents closed in %.2f s\n", N, now_s() - tc);
	return 0;
}
