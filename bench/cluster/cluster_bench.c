/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cluster-bench ENDPOINTS N TTL STEADY_S LINGJUN_CSV OUT_JSON [ARRIVALS [THREADS]]
 *
 * N emulated agents (one crux_cluster_node each: the real client, lease,
 * election, watcher) publish synthetic host views for hosts of the Lingjun
 * topology (jobs of 8 hosts, 8 ranks per host, a ring of traffic); the
 * leader merges them and runs the Crux scheduler library (CRUX_SCHED_CRUX_FULL)
 * on the topology. Measured: time from a job appearing in one host's view to
 * every host applying a schedule with it (median, p99 over ARRIVALS arrivals,
 * default 100, at random moments), split into phases (the host publishes,
 * the leader's plan sees it, the schedule is written, the first / median /
 * last host applies it); etcd WAL bytes written per host per minute with
 * nothing changing (etcd_disk_wal_write_bytes_total, summed over members) and
 * how the lease renewals spread over time; leader failover (leader dropped
 * without revoking: until every host applies a schedule of a new term).
 *
 * The agents' loops are stepped by THREADS threads (default 16; host i by
 * thread i mod THREADS, each sweeping its hosts every CLUSTER_BENCH_SWEEP_MS,
 * default 1000: cruxd's pass); THREADS=1 is the old single loop. A host
 * whose job arrives publishes in that moment's step (cruxd's pass that sees
 * the job). One more thread does what each cruxd does between its passes:
 * it waits on every agent's wake descriptor, applies a schedule the moment
 * its watcher took it (crux_cluster_apply_received) and hands a step that is
 * due now (crux_cluster_step_due: the leader's round after its input watch
 * saw a change, a campaign after the leader key went) to a thread of its own
 * (due_main), so one host's etcd calls do not hold up the others' applies.
 */
#include <curl/curl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

#include "crux/cluster_node.h"
#include "crux/json.h"
#include "crux/sched.h"

#define RANKS_PER_HOST 8
#define JOB_HOSTS      8
/* Every host's loop steps once per sweep, by default cruxd's pass (1 s,
 * CLUSTER_BENCH_SWEEP_MS): what a job's arrival waits for is not a sweep
 * (a host publishes in the pass that sees the job, the leader's round and
 * every host's apply run when their wake descriptor says so), so a shorter
 * sweep only hid the leader's reaction behind 100,000 empty steps a second
 * at N = 1,000. */
static long sweep_ms = 1000;

struct host {
	pthread_mutex_t mu; /* one step or view change at a time; guards n, view, alive changes */
	struct crux_cluster_node *n;
	struct crux_job_view view;
	atomic_bool alive; /* read without mu by the main thread */
	atomic_int_fast64_t term;
	atomic_bool has_target;
	atomic_int_fast64_t t_apply; /* ns: applied a schedule with the target */
	atomic_bool planned_target;  /* its plan callback saw the target */
	atomic_bool pub_pending;     /* the target job waits for this host's step */
	atomic_bool due;	     /* queued for due_main: a step is due now */
	uint64_t renewals;	     /* under mu */
};

struct stepper {
	pthread_t th;
	int id;
	int64_t *slow; /* times of lease renewals */
	size_t nslow, cap;
};

static struct host *H;
static struct stepper *S;
static int N, T, n_topo_hosts;
static struct crux_sched_topo *topo;
static atomic_uint_fast64_t target_key;
/* Phases of the current arrival (ns, 0: not yet). */
static atomic_int_fast64_t t_pub, t_plan0, t_plan1, t_written;
static atomic_int_fast64_t max_sweep, max_lead; /* ns, since the arrival */
static atomic_int_fast64_t max_sweep_nl;	/* sweeps without the leader's step */
static atomic_size_t sched_bytes;		/* the last schedule's encoded size */
static atomic_bool running = true, rec_slow;
static atomic_int step_errors; /* since the arrival */

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double now_s(void)
{
	return (double)now_ns() / 1e9;
}

static void set_once(atomic_int_fast64_t *t, int64_t v)
{
	int_fast64_t zero = 0;
	atomic_compare_exchange_strong(t, &zero, v);
}

static void raise_max(atomic_int_fast64_t *m, int64_t v)
{
	int_fast64_t cur = atomic_load(m);
	while (v > cur && !atomic_compare_exchange_weak(m, &cur, v))
		;
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

static crux_status_t plan(void *arg, const struct crux_job_view *m, const char *ovr, size_t ovr_len,
			  struct crux_cv_schedule *out)
{
	(void)ovr;
	(void)ovr_len;
	struct host *me = arg;
	uint64_t key = atomic_load(&target_key);
	bool saw = false;
	for (uint32_t i = 0; i < m->njobs && key; i++)
		saw |= m->jobs[i].key == key;
	if (saw)
		set_once(&t_plan0, now_ns());
	struct crux_sched_job *jobs = calloc(m->njobs ? m->njobs : 1, sizeof(*jobs));
	int *hostbuf = calloc((size_t)m->njobs * CRUX_JV_MAX_JOB_HOSTS + 1, sizeof(int));
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
		const struct crux_jv_job *j = &m->jobs[i];
		struct crux_sched_job *sj = &jobs[i];
		double nc = j->ncompute ? j->ncompute : 1;
		sj->id = j->key;
		sj->gpus = (int)j->nranks;
		sj->n_hosts = (int)j->nhosts;
		sj->hosts = hostbuf + (size_t)i * CRUX_JV_MAX_JOB_HOSTS;
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
	if (saw && st == CRUX_OK) {
		set_once(&t_plan1, now_ns());
		atomic_store(&me->planned_target, true);
	}
	crux_sched_schedule_free(s);
	free(jobs);
	free(hostbuf);
	free(flowbuf);
	return st;
}

static void apply(void *arg, const struct crux_cv_schedule *s, int64_t rev)
{
	(void)rev;
	struct host *h = arg;
	uint64_t key = atomic_load(&target_key);
	bool has = false;
	for (uint32_t i = 0; i < s->njobs && key; i++)
		has |= s->jobs[i].key == key;
	atomic_store(&h->term, s->term);
	if (h == &H[0]) {
		char *txt;
		size_t len;
		if (crux_cv_schedule_encode(s, &txt, &len) == CRUX_OK) {
			atomic_store(&sched_bytes, len);
			free(txt);
		}
	}
	if (!has)
		atomic_store(&h->has_target, false);
	else if (!atomic_exchange(&h->has_target, true))
		atomic_store(&h->t_apply, now_ns());
}

/* Called with H[host].mu held. */
static void add_job(int host, const char *id, int first, int nhosts)
{
	struct crux_jv_job j = {.nranks = RANKS_PER_HOST,
				.ncompute = RANKS_PER_HOST,
				.iter_sum = RANKS_PER_HOST * 0.30,
				.compute_sum = RANKS_PER_HOST * 0.20,
				.comm_sum = RANKS_PER_HOST * 0.12,
				.overlap_sum = RANKS_PER_HOST * 0.5,
				.nhosts = (uint32_t)nhosts};
	snprintf(j.id, sizeof(j.id), "%s", id);
	j.key = crux_job_key_of(id);
	for (int k = 0; k < nhosts; k++)
		j.hosts[k] = host_addr(first + k);
	struct crux_jv_flow f = {.src = host_addr(host),
				 .dst = host_addr(first + (host - first + 1) % nhosts),
				 .bytes = 2e9};
	j.nflows = nhosts > 1 ? 1 : 0;
	j.flows = &f;
	if (crux_jv_add_job(&H[host].view, &j) != CRUX_OK ||
	    crux_cluster_set_view(H[host].n, &H[host].view) != CRUX_OK) {
		fprintf(stderr, "cluster-bench: cannot add job %s\n", id);
		exit(1);
	}
}

/* One step of host h (its mu held), as cruxd's pass or its wake runs
 * it; s: the stepper recording renewals (NULL: not a stepper). True: h leads. */
static bool step_host(struct host *h, struct stepper *s)
{
	int64_t a = now_ns();
	crux_status_t st = crux_cluster_step(h->n);
	int64_t b = now_ns();
	struct crux_cluster_status cs;
	crux_cluster_get_status(h->n, &cs);
	if (st == CRUX_OK && atomic_exchange(&h->pub_pending, false))
		set_once(&t_pub, b);
	if (st == CRUX_OK && atomic_exchange(&h->planned_target, false))
		set_once(&t_written, b);
	if (cs.leader)
		raise_max(&max_lead, b - a);
	if (s && cs.renewals != h->renewals && atomic_load(&rec_slow) && s->nslow < s->cap)
		s->slow[s->nslow++] = a;
	h->renewals = cs.renewals;
	if (st != CRUX_OK)
		atomic_fetch_add(&step_errors, 1);
	return cs.leader;
}

static void *stepper_main(void *arg)
{
	struct stepper *s = arg;
	while (atomic_load(&running)) {
		int64_t s0 = now_ns();
		bool led = false;
		for (int i = s->id; i < N; i += T) {
			struct host *h = &H[i];
			pthread_mutex_lock(&h->mu);
			if (h->alive)
				led |= step_host(h, s);
			pthread_mutex_unlock(&h->mu);
		}
		raise_max(&max_sweep, now_ns() - s0);
		if (!led)
			raise_max(&max_sweep_nl, now_ns() - s0);
		int64_t left = s0 + sweep_ms * 1000000LL - now_ns();
		struct timespec ts = {0, left > 200000 ? (long)left : 200000};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void nap_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

static pthread_mutex_t due_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t due_cv = PTHREAD_COND_INITIALIZER;
static long n_due; /* under due_mu: hosts queued since the last scan */

/* The steps the applier found due, one host at a time. */
static void *due_main(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&due_mu);
		while (n_due == 0 && atomic_load(&running))
			pthread_cond_wait(&due_cv, &due_mu);
		n_due = 0;
		pthread_mutex_unlock(&due_mu);
		if (!atomic_load(&running))
			return NULL;
		for (int i = 0; i < N; i++) {
			struct host *h = &H[i];
			if (!atomic_exchange(&h->due, false))
				continue;
			pthread_mutex_lock(&h->mu);
			if (h->alive && crux_cluster_step_due(h->n))
				step_host(h, NULL);
			pthread_mutex_unlock(&h->mu);
		}
	}
}

/* cruxd's sleep between passes, for all N: apply what arrived. */
static void *applier_main(void *arg)
{
	int ep = *(int *)arg;
	struct epoll_event ev[64];
	while (atomic_load(&running)) {
		int k = epoll_wait(ep, ev, 64, 100);
		bool busy = false;
		for (int i = 0; i < k; i++) {
			struct host *h = &H[ev[i].data.u32];
			/* A host in the middle of its step (an etcd call) applies at
			 * its end; one thread waiting for it would hold up every
			 * other host's apply (each cruxd has its own loop). */
			if (pthread_mutex_trylock(&h->mu) != 0) {
				busy = true;
				continue;
			}
			/* cruxd_cluster_apply_received: a step when one is due
			 * (the leader's round, its input watch having seen a
			 * change; a campaign when the leader key went), in
			 * due_main (each cruxd steps in its own loop: here one
			 * host's etcd calls must not hold up every other
			 * host's apply); then the schedule that arrived. */
			if (h->alive && crux_cluster_step_due(h->n) &&
			    !atomic_exchange(&h->due, true)) {
				pthread_mutex_lock(&due_mu);
				n_due++;
				pthread_cond_signal(&due_cv);
				pthread_mutex_unlock(&due_mu);
			}
			if (h->alive)
				crux_cluster_apply_received(h->n);
			pthread_mutex_unlock(&h->mu);
		}
		if (busy)
			nap_ms(1); /* its descriptor stays readable: not a spin */
	}
	return NULL;
}

static bool all_have_target(void)
{
	for (int i = 0; i < N; i++)
		if (H[i].alive && !atomic_load(&H[i].has_target))
			return false;
	return true;
}

static bool all_new_term(int64_t old)
{
	for (int i = 0; i < N; i++) {
		int64_t t = atomic_load(&H[i].term);
		if (H[i].alive && (t == old || t == 0))
			return false;
	}
	return true;
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
		curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
		char *l = NULL;
		if (curl_easy_perform(c) == CURLE_OK && b.p)
			l = strstr(b.p, "\netcd_disk_wal_write_bytes_total ");
		if (l)
			total += strtod(l + 33, NULL);
		else
			total =
			    NAN; /* a member did not answer: no figure rather than a wrong one */
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

/* Nearest rank on a sorted copy. */
static double pct(const double *v, int n, double q)
{
	if (n <= 0)
		return NAN;
	double *c = malloc((size_t)n * sizeof(*c));
	memcpy(c, v, (size_t)n * sizeof(*c));
	qsort(c, (size_t)n, sizeof(*c), dcmp);
	int i = (int)ceil(q * n) - 1;
	double r = c[i < 0 ? 0 : i >= n ? n - 1 : i];
	free(c);
	return r;
}

/* "name": {"median", "p99", "max"} of n values. */
static void stats_json(struct crux_json *j, const char *name, const double *v, int n)
{
	crux_json_key(j, name);
	crux_json_obj(j);
	crux_json_field_numf(j, "median", "%.4f", pct(v, n, 0.5));
	crux_json_field_numf(j, "p99", "%.4f", pct(v, n, 0.99));
	crux_json_field_numf(j, "max", "%.4f", pct(v, n, 1.0));
	crux_json_end_obj(j);
}

static double loadavg1(void)
{
	double l[1] = {-1};
	return getloadavg(l, 1) == 1 ? l[0] : -1;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* Renewals over the steady window: mean per second and the busiest second. */
static void renewal_spread(double *mean, double *busiest, double secs)
{
	size_t total = 0;
	for (int t = 0; t < T; t++)
		total += S[t].nslow;
	int64_t *all = malloc((total + 1) * sizeof(*all));
	size_t k = 0;
	for (int t = 0; t < T; t++)
		for (size_t i = 0; i < S[t].nslow; i++)
			all[k++] = S[t].slow[i];
	qsort(all, total, sizeof(*all), cmp64);
	size_t best = 0, lo = 0;
	for (size_t hi = 0; hi < total; hi++) {
		while (all[hi] - all[lo] >= 1000000000)
			lo++;
		if (hi - lo + 1 > best)
			best = hi - lo + 1;
	}
	free(all);
	*mean = secs > 0 ? (double)total / secs : 0;
	*busiest = (double)best;
}

int main(int argc, char **argv)
{
	if (argc < 7 || argc > 9) {
		fprintf(stderr,
			"usage: %s ENDPOINTS N TTL STEADY_S LINGJUN_CSV OUT_JSON [ARRIVALS "
			"[THREADS]]\n",
			argv[0]);
		return 2;
	}
	const char *eps = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0);
	N = atoi(argv[2]);
	int ttl = atoi(argv[3]);
	double steady = atof(argv[4]);
	int arrivals = argc > 7 ? atoi(argv[7]) : 100;
	T = argc > 8 ? atoi(argv[8]) : 16;
	const char *sw = getenv("CLUSTER_BENCH_SWEEP_MS");
	if (sw && (sweep_ms = atol(sw)) < 1) {
		fprintf(stderr, "cluster-bench: CLUSTER_BENCH_SWEEP_MS must be >= 1 (ms)\n");
		return 2;
	}
	struct crux_sched_lingjun_params lp;
	struct crux_sched_err serr;
	crux_sched_lingjun_defaults(&lp);
	if (N < JOB_HOSTS || arrivals < 1 || T < 1 ||
	    crux_sched_topo_lingjun(argv[5], &lp, &topo, &serr) != CRUX_OK) {
		fprintf(stderr,
			"cluster-bench: N >= %d, ARRIVALS >= 1, THREADS >= 1 and a Lingjun "
			"CSV are needed\n",
			JOB_HOSTS);
		return 2;
	}
	if (T > N)
		T = N;
	double load0 = loadavg1();
	n_topo_hosts = crux_sched_topo_n_hosts(topo);
	H = calloc((size_t)N, sizeof(*H));
	S = calloc((size_t)T, sizeof(*S));
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
					     .cluster = "bench",
					     .host = name,
					     .ttl_s = ttl,
					     .plan = plan,
					     .apply = apply,
					     .arg = &H[i]};
		pthread_mutex_init(&H[i].mu, NULL);
		if (crux_cluster_open(&c, &H[i].n, err, sizeof(err)) != CRUX_OK) {
			fprintf(stderr, "cluster-bench: %s\n", err);
			return 1;
		}
		snprintf(H[i].view.name, sizeof(H[i].view.name), "%s", name);
		H[i].view.addr = host_addr(i);
		H[i].alive = true;
	}
	int wake_ep = epoll_create1(EPOLL_CLOEXEC);
	for (int i = 0; i < N && wake_ep >= 0; i++) {
		struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
		int fd = crux_cluster_wake_fd(H[i].n);
		if (fd >= 0 && epoll_ctl(wake_ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
			fprintf(stderr, "cluster-bench: cannot watch agent %d's wake descriptor\n",
				i);
			return 1;
		}
	}
	pthread_t applier, due_th;
	if (wake_ep < 0 || pthread_create(&applier, NULL, applier_main, &wake_ep) != 0 ||
	    pthread_create(&due_th, NULL, due_main, NULL) != 0) {
		fprintf(stderr, "cluster-bench: cannot start the applier thread\n");
		return 1;
	}
	/* Jobs of 8 consecutive hosts; the last job is the target of warm-up. */
	char id[64];
	for (int first = 0; first + JOB_HOSTS <= N; first += JOB_HOSTS) {
		snprintf(id, sizeof(id), "job-%d", first / JOB_HOSTS);
		for (int k = 0; k < JOB_HOSTS; k++)
			add_job(first + k, id, first, JOB_HOSTS);
	}
	atomic_store(&target_key, crux_job_key_of(id));
	double t0 = now_s();
	for (int t = 0; t < T; t++) {
		S[t].id = t;
		S[t].cap = (size_t)(N * (steady + 10) / ((double)ttl / 4)) + 1024;
		S[t].slow = calloc(S[t].cap, sizeof(int64_t));
		if (!S[t].slow || pthread_create(&S[t].th, NULL, stepper_main, &S[t]) != 0) {
			fprintf(stderr, "cluster-bench: cannot start stepper threads\n");
			return 1;
		}
	}
	while (!all_have_target()) {
		if (now_s() - t0 > 300) {
			fprintf(stderr, "cluster-bench: no common schedule after 300 s\n");
			return 1;
		}
		nap_ms(5);
	}
	double warm = now_s() - t0;
	printf("N=%d: %d agents up (%d stepper threads), first schedule applied everywhere after "
	       "%.2f s (open %.2f s)\n",
	       N, N, T, warm, t0 - t_open);

	/* Steady state: nothing changes; leases are renewed. */
	double w0 = wal_bytes(eps), s0 = now_s();
	atomic_store(&rec_slow, true);
	while (now_s() - s0 < steady)
		nap_ms(50);
	atomic_store(&rec_slow, false);
	double w1 = wal_bytes(eps), secs = now_s() - s0;
	double per_host_min =
	    (w1 - w0) / nep / N / (secs / 60); /* each member writes its own WAL */
	double link_fraction = per_host_min / 60 * 8 / 100e9;
	double ren_mean, ren_max;
	renewal_spread(&ren_mean, &ren_max, secs);
	printf("N=%d: steady state %.0f s: etcd WAL %.0f bytes per host per minute (%.2e of 100 "
	       "Gbit/s); lease renewals %.0f/s on average, %.0f in the busiest second\n",
	       N, secs, per_host_min, link_fraction, ren_mean, ren_max);

	/* Job arrivals on random hosts at random moments. */
	double *lat = calloc((size_t)arrivals, sizeof(double));
	double *ph[10];
	for (int k = 0; k < 10; k++)
		ph[k] = calloc((size_t)arrivals, sizeof(double));
	double *per_host = calloc((size_t)arrivals * (size_t)N, sizeof(double));
	double *hl = calloc((size_t)N, sizeof(double));
	double *hr = calloc((size_t)N, sizeof(double)), *hw = calloc((size_t)N, sizeof(double));
	size_t nper = 0;
	srand(1);
	for (int a = 0; a < arrivals; a++) {
		nap_ms(rand() % 300);
		int h = rand() % N;
		snprintf(id, sizeof(id), "arrival-%d", a);
		atomic_store(&target_key, crux_job_key_of(id));
		for (int i = 0; i < N; i++) {
			atomic_store(&H[i].has_target, false);
			atomic_store(&H[i].t_apply, 0);
		}
		atomic_store(&t_pub, 0);
		atomic_store(&t_plan0, 0);
		atomic_store(&t_plan1, 0);
		atomic_store(&t_written, 0);
		atomic_store(&max_sweep, 0);
		atomic_store(&max_lead, 0);
		atomic_store(&max_sweep_nl, 0);
		atomic_store(&step_errors, 0);
		pthread_mutex_lock(&H[h].mu);
		int64_t ta = now_ns();
		add_job(h, id, h, 1);
		/* cruxd publishes in the pass that sees the job. */
		atomic_store(&H[h].pub_pending, true);
		step_host(&H[h], NULL);
		pthread_mutex_unlock(&H[h].mu);
		while (!all_have_target()) {
			if ((double)(now_ns() - ta) / 1e9 > 120) {
				fprintf(stderr,
					"cluster-bench: arrival %d not applied after 120 s\n", a);
				return 1;
			}
			nap_ms(1);
		}
		int nh = 0, nr = 0;
		for (int i = 0; i < N; i++) {
			struct crux_cluster_status cs;
			pthread_mutex_lock(&H[i].mu);
			bool alive = H[i].alive;
			if (alive)
				crux_cluster_get_status(H[i].n, &cs);
			pthread_mutex_unlock(&H[i].mu);
			if (!alive)
				continue;
			double ap = (double)(atomic_load(&H[i].t_apply) - ta) / 1e9;
			hl[nh++] = ap;
			/* The watcher's delivery, when the schedule it holds is the one applied. */
			if (cs.received_revision == cs.applied_revision) {
				hr[nr] = cs.received_at - (double)ta / 1e9;
				hw[nr] = ap - hr[nr];
				nr++;
			}
		}
		memcpy(per_host + nper, hl, (size_t)nh * sizeof(double));
		nper += (size_t)nh;
		lat[a] = pct(hl, nh, 1.0);
		ph[0][a] = (double)(atomic_load(&t_pub) - ta) / 1e9;
		ph[1][a] = (double)(atomic_load(&t_plan0) - ta) / 1e9;
		ph[2][a] = (double)(atomic_load(&t_plan1) - atomic_load(&t_plan0)) / 1e9;
		ph[3][a] = (double)(atomic_load(&t_written) - ta) / 1e9;
		ph[4][a] = lat[a] - ph[3][a];
		ph[5][a] = (double)atomic_load(&max_sweep) / 1e9;
		ph[6][a] = (double)atomic_load(&max_lead) / 1e9;
		ph[7][a] = pct(hr, nr, 1.0);
		ph[8][a] = pct(hw, nr, 0.99);
		ph[9][a] = (double)atomic_load(&max_sweep_nl) / 1e9;
		printf("arrival %d on host %d: published %.3f, plan sees it %.3f (plan %.4f s), "
		       "written "
		       "%.3f, applied first %.3f median %.3f last %.3f; longest sweep %.3f, leader "
		       "step "
		       "%.3f (others %.3f), failed steps %d; received by the watchers: first %.3f "
		       "median %.3f last %.3f "
		       "(%d/%d), received -> applied p99 %.3f; schedule %zu B\n",
		       a, h, ph[0][a], ph[1][a], ph[2][a], ph[3][a], pct(hl, nh, 0),
		       pct(hl, nh, 0.5), lat[a], ph[5][a], ph[6][a], ph[9][a],
		       atomic_load(&step_errors), pct(hr, nr, 0), pct(hr, nr, 0.5), ph[7][a], nr,
		       nh, ph[8][a], atomic_load(&sched_bytes));
	}
	double med = pct(lat, arrivals, 0.5), p99 = pct(lat, arrivals, 0.99);
	printf("N=%d: job arrival -> applied on all hosts: median %.3f s, p99 %.3f s, max %.3f (%d "
	       "arrivals, min %.3f); per host: median %.3f, p99 %.3f\n",
	       N, med, p99, pct(lat, arrivals, 1.0), arrivals, pct(lat, arrivals, 0),
	       pct(per_host, (int)nper, 0.5), pct(per_host, (int)nper, 0.99));

	/* Failover: the leader vanishes without revoking its lease. */
	int l = -1;
	double fo = -1;
	for (int i = 0; i < N && l < 0; i++) {
		struct crux_cluster_status st;
		pthread_mutex_lock(&H[i].mu);
		crux_cluster_get_status(H[i].n, &st);
		if (st.leader) {
			l = i;
			int64_t old = atomic_load(&H[i].term);
			H[i].alive = false;
			crux_cluster_abandon(H[i].n);
			pthread_mutex_unlock(&H[i].mu);
			double tf = now_s();
			while (!all_new_term(old)) {
				if (now_s() - tf > 4.0 * ttl + 30) {
					fprintf(stderr, "cluster-bench: no failover\n");
					return 1;
				}
				nap_ms(5);
			}
			fo = now_s() - tf;
			printf("N=%d: leader failover (lease TTL %d s): every host on the new term "
			       "after "
			       "%.2f s\n",
			       N, ttl, fo);
		} else {
			pthread_mutex_unlock(&H[i].mu);
		}
	}
	double load1 = loadavg1();
	FILE *f = fopen(argv[6], "w");
	if (!f)
		return 1;
	struct crux_json j;
	crux_json_init_lines(&j, f);
	crux_json_obj(&j);
	crux_json_field_i64(&j, "hosts", N);
	crux_json_field_i64(&j, "lease_ttl_s", ttl);
	crux_json_field_i64(&j, "etcd_members", nep);
	crux_json_field_i64(&j, "stepper_threads", T);
	crux_json_field_i64(&j, "sweep_ms", sweep_ms);
	crux_json_field_numf(&j, "first_schedule_s", "%.3f", warm);
	crux_json_key(&j, "arrival_to_all_applied_s");
	crux_json_obj(&j);
	crux_json_field_numf(&j, "median", "%.4f", med);
	crux_json_field_numf(&j, "p99", "%.4f", p99);
	crux_json_field_numf(&j, "min", "%.4f", pct(lat, arrivals, 0));
	crux_json_field_numf(&j, "max", "%.4f", pct(lat, arrivals, 1.0));
	crux_json_field_i64(&j, "n", arrivals);
	crux_json_end_obj(&j);
	stats_json(&j, "arrival_to_each_host_applied_s", per_host, (int)nper);
	static const struct {
		const char *name;
		int ph; /* row of ph[] */
	} phases[] = {{"published", 0},
		      {"plan_sees_it", 1},
		      {"plan", 2},
		      {"written", 3},
		      {"written_to_all_applied", 4},
		      {"longest_sweep", 5},
		      {"leader_step", 6},
		      {"longest_sweep_without_leader", 9},
		      {"last_watcher_received", 7},
		      {"received_to_applied_p99", 8}};
	crux_json_key(&j, "phases_s");
	crux_json_obj(&j);
	for (size_t k = 0; k < sizeof(phases) / sizeof(phases[0]); k++)
		stats_json(&j, phases[k].name, ph[phases[k].ph], arrivals);
	crux_json_end_obj(&j);
	crux_json_field_u64(&j, "schedule_bytes_last", atomic_load(&sched_bytes));
	/* null: no steady window measured */
	crux_json_field_numf(&j, "steady_wal_bytes_per_host_per_min", "%.1f", per_host_min);
	crux_json_field_numf(&j, "steady_fraction_of_100gbps", "%.3e",
			     isnan(per_host_min) ? NAN : link_fraction);
	crux_json_field_numf(&j, "steady_window_s", "%.1f", secs);
	crux_json_key(&j, "steady_renewals_per_s");
	crux_json_obj(&j);
	crux_json_field_numf(&j, "mean", "%.1f", ren_mean);
	crux_json_field_numf(&j, "busiest_second", "%.0f", ren_max);
	crux_json_end_obj(&j);
	crux_json_field_numf(&j, "leader_failover_s", "%.3f", fo);
	crux_json_key(&j, "load_avg_1min");
	crux_json_arr(&j);
	crux_json_numf(&j, "%.2f", load0);
	crux_json_numf(&j, "%.2f", load1);
	crux_json_end_arr(&j);
	crux_json_field_bool(&j, "goal_arrival_p99_le_2s", p99 <= 2);
	crux_json_field_bool(&j, "goal_bytes_below_1e-4_of_link", link_fraction < 1e-4);
	crux_json_end_obj(&j);
	crux_json_done(&j);
	fclose(f);
	atomic_store(&running, false);
	for (int t = 0; t < T; t++)
		pthread_join(S[t].th, NULL);
	pthread_join(applier, NULL);
	pthread_mutex_lock(&due_mu);
	pthread_cond_broadcast(&due_cv);
	pthread_mutex_unlock(&due_mu);
	pthread_join(due_th, NULL);
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
