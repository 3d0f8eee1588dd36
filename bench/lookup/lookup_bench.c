/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Decision lookup cost on the data path, with a writer process publishing
 * the table continuously, against a plain struct read measured in the same
 * run (interleaved batches, so both see the same machine noise). Two phases:
 * contract v2 (the sealed memfd cruxd hands out) and contract v1 (the
 * plugin's private pread copy of decision.tbl, re-read every 100 ms).
 *
 *   crux-bench-lookup [RESULT.json]
 *
 * Per batch of BATCH operations the time is taken with CLOCK_MONOTONIC and
 * divided by BATCH; the median and 99th percentile are over batches. The
 * result goes to RESULT.json (default bench/results/lookup.json).
 * CRUX_BENCH_SECONDS (default 3) sets the measuring time per phase (at most
 * MAX_SAMPLES batches).
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crux/decision.h"
#include "crux/decision_writer.h"
#include "crux/env.h"
#include "crux/json.h"
#include "crux/log.h"
#include "crux/shm.h"

#define NJOBS	    64
#define NPEERS	    4
#define BATCH	    64
#define MAX_SAMPLES 400000

struct shared {
	_Atomic int stop;
	_Atomic uint64_t publishes;
};

static void peer_addr(int p, struct crux_addr *a)
{
	memset(a, 0, sizeof(*a));
	a->family = 4;
	a->bytes[0] = 198;
	a->bytes[1] = 18;
	a->bytes[2] = 3;
	a->bytes[3] = (uint8_t)(10 + p);
}

static uint64_t key_of(int j)
{
	char id[32];
	snprintf(id, sizeof(id), "env:bench-%d", j);
	return crux_job_key_of(id);
}

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set); /* best effort */
}

/* The writer: republish the whole table as fast as it can, or every pause_us. */
static int writer_main(struct crux_dt_writer *w, struct shared *sh, unsigned pause_us)
{
	static struct crux_dt_job jobs[NJOBS];
	static struct crux_dt_route routes[NJOBS * NPEERS];
	for (uint64_t round = 0; !atomic_load_explicit(&sh->stop, memory_order_relaxed); round++) {
		for (int j = 0; j < NJOBS; j++) {
			memset(&jobs[j], 0, sizeof(jobs[j]));
			jobs[j].job_key = key_of(j);
			snprintf(jobs[j].job_id, sizeof(jobs[j].job_id), "env:bench-%d", j);
			jobs[j].level = (uint8_t)((round + (uint64_t)j) % 4);
			jobs[j].state = CRUX_JOB_SCHEDULED;
			for (int p = 0; p < NPEERS; p++) {
				struct crux_dt_route *r = &routes[j * NPEERS + p];
				memset(r, 0, sizeof(*r));
				r->job_key = jobs[j].job_key;
				peer_addr(p, &r->peer);
				r->path_id = (uint16_t)(round % 4);
				r->nports = 4;
				for (int k = 0; k < 4; k++)
					r->ports[k] =
					    (uint16_t)(40000 + round % 1000 + (uint64_t)k);
			}
		}
		if (crux_dt_publish(w, jobs, NJOBS, routes, NJOBS * NPEERS) != CRUX_OK)
			return 1;
		if ((round & 255) == 0)
			crux_dt_heartbeat(w);
		atomic_fetch_add_explicit(&sh->publishes, 1, memory_order_relaxed);
		if (pause_us)
			usleep(pause_us);
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double pct(double *v, size_t n, double q)
{
	size_t i = (size_t)(q * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

struct result {
	double *t_lookup, *t_plain;
	size_t n;
	uint64_t busy, found, sink, refreshes, new_copies, elapsed;
};

#define COPY_REREAD_NS 100000000ull /* as the plugin re-reads its v1 copy */

/*
 * Interleaved batches: BATCH plain struct reads, then BATCH lookups. With a
 * mirror, every lookup first checks (one relaxed load and compare, as the
 * plugin's data path) whether the copy is due for a re-read, and re-reads it
 * when it is, inside the timed batch.
 */
static int measure(struct crux_dt_reader **rp, struct crux_dt_mirror *m, double secs,
		   const uint64_t *keys, const struct crux_addr *peers,
		   const struct crux_decision *plain, struct result *res)
{
	static _Atomic uint64_t next_reread;
	res->t_lookup = malloc(MAX_SAMPLES * sizeof(double));
	res->t_plain = malloc(MAX_SAMPLES * sizeof(double));
	if (!res->t_lookup || !res->t_plain)
		return 1;
	size_t n = 0;
	uint64_t idx = 0;
	uint64_t t_start = crux_now_ns(), t_end = t_start + (uint64_t)(secs * 1e9);
	atomic_store(&next_reread, m ? t_start + COPY_REREAD_NS : 0);
	while (n < MAX_SAMPLES && crux_now_ns() < t_end) {
		struct crux_decision d;
		uint64_t a = crux_now_ns();
		for (int k = 0; k < BATCH; k++, idx++) {
			unsigned i = (unsigned)(idx * 7) % (NJOBS * NPEERS);
			d = plain[i];
			/* Keep the copy: the compiler may not drop it. */
			__asm__ __volatile__("" : : "r"(&d) : "memory");
			res->sink += d.ports[0];
		}
		uint64_t b = crux_now_ns();
		for (int k = 0; k < BATCH; k++, idx++) {
			unsigned i = (unsigned)(idx * 7) % (NJOBS * NPEERS);
			if (atomic_load_explicit(&next_reread, memory_order_relaxed) - 1 < b) {
				char err[256];
				atomic_store(&next_reread, b + COPY_REREAD_NS);
				struct crux_dt_reader *before = *rp;
				(void)crux_dt_mirror_refresh(m, rp, err, sizeof(err));
				res->refreshes++;
				res->new_copies += *rp != before;
			}
			crux_status_t st =
			    crux_dt_lookup(*rp, keys[i / NPEERS], &peers[i % NPEERS], &d);
			__asm__ __volatile__("" : : "r"(&d) : "memory");
			res->busy += st == CRUX_ERR_BUSY;
			res->found += st == CRUX_OK && d.route_found;
			res->sink += d.ports[0];
		}
		uint64_t c = crux_now_ns();
		res->t_plain[n] = (double)(b - a) / BATCH;
		res->t_lookup[n] = (double)(c - b) / BATCH;
		n++;
	}
	res->n = n;
	res->elapsed = crux_now_ns() - t_start;
	return 0;
}

static void rm_dir(const char *shm, const char *base)
{
	char p[300];
	snprintf(p, sizeof(p), "%s/" CRUX_DT_FILE, shm);
	unlink(p);
	rmdir(shm);
	rmdir(base);
}

int main(int argc, char **argv)
{
	const char *out_path = argc > 1 ? argv[1] : "bench/results/lookup.json";
	double secs;
	char err[256];
	if (crux_env_double(NULL, NULL, "CRUX_BENCH_SECONDS", 3.0, 0.1, 600, &secs, err,
			    sizeof(err)) != CRUX_OK) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	crux_log_init("crux-bench-lookup");

	/* A private directory on tmpfs when there is one (as /dev/shm/crux would be). */
	char base[64], shm[96];
	struct stat sb;
	snprintf(base, sizeof(base), "%s/crux-bench-XXXXXX",
		 stat("/dev/shm", &sb) == 0 ? "/dev/shm" : "/tmp");
	if (!mkdtemp(base)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(shm, sizeof(shm), "%s/shm", base);

	struct crux_dt_settings s;
	struct crux_dt_writer *w;
	struct crux_dt_reader *r;
	crux_dt_settings_default(4, &s);
	/* Contract v2: the table as cruxd hands it out, a sealed memfd (the child inherits it). */
	if (crux_shm_dir_check(shm, true) != CRUX_OK ||
	    crux_dt_writer_open_memfd(&s, &w, err, sizeof(err)) != CRUX_OK) {
		rm_dir(shm, base);
		return 1;
	}
	struct shared *sh =
	    mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	memset(sh, 0, sizeof(*sh));
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	pid_t kid = fork();
	if (kid == 0) {
		if (ncpu >= 2)
			pin(1);
		_exit(writer_main(w, sh, 0));
	}
	if (ncpu >= 2)
		pin(0);
	if (crux_dt_reader_open_fd(crux_dt_writer_fd(w), &r, err, sizeof(err)) != CRUX_OK) {
		fprintf(stderr, "crux-bench-lookup: %s\n", err);
		kill(kid, SIGKILL);
		rm_dir(shm, base);
		return 1;
	}
	/* Wait for the writer's first publish so lookups find their jobs. */
	while (atomic_load(&sh->publishes) < 2)
		;

	uint64_t keys[NJOBS];
	struct crux_addr peers[NPEERS];
	for (int j = 0; j < NJOBS; j++)
		keys[j] = key_of(j);
	for (int p = 0; p < NPEERS; p++)
		peer_addr(p, &peers[p]);
	/* The baseline: the same answers as plain structs in private memory. */
	static struct crux_decision plain[NJOBS * NPEERS];
	for (int i = 0; i < NJOBS * NPEERS; i++) {
		struct crux_decision d;
		while (crux_dt_lookup(r, keys[i / NPEERS], &peers[i % NPEERS], &d) != CRUX_OK)
			;
		plain[i] = d;
	}

	struct result ra, rb;
	memset(&ra, 0, sizeof(ra));
	memset(&rb, 0, sizeof(rb));
	uint64_t pub0 = atomic_load(&sh->publishes);
	if (measure(&r, NULL, secs, keys, peers, plain, &ra) != 0)
		return 1;
	uint64_t pubs = atomic_load(&sh->publishes) - pub0;
	atomic_store(&sh->stop, 1);
	int wst = 0;
	waitpid(kid, &wst, 0);
	crux_dt_reader_close(r);
	crux_dt_writer_close(w);
	double pub_rate = (double)pubs / ((double)ra.elapsed / 1e9);
	bool writer_ok = WIFEXITED(wst) && WEXITSTATUS(wst) == 0;

	/*
	 * Contract v1 (no agent): the plugin's private pread copy of decision.tbl
	 * (crux_dt_mirror), its re-read checked before every lookup as the plugin
	 * does (one relaxed load and compare) and done every 100 ms inside the
	 * timed batches, while a writer process pwrites the file continuously.
	 */
	memset(sh, 0, sizeof(*sh));
	kid = fork();
	if (kid == 0) {
		struct crux_dt_writer *fw = NULL;
		if (ncpu >= 2)
			pin(1);
		if (crux_dt_writer_open_shadow(shm, &s, &fw, NULL, err, sizeof(err)) != CRUX_OK) {
			fprintf(stderr, "crux-bench-lookup: %s\n", err);
			_exit(1);
		}
		/*
		 * ~1,000 tables/s (cruxd publishes at most once per pass): a copy
		 * must fit between two publishes, so a writer publishing without
		 * pause would starve the re-read (the copy in use would stay).
		 */
		int rc = writer_main(fw, sh, 1000);
		crux_dt_writer_close(fw);
		_exit(rc);
	}
	struct crux_dt_mirror *m = NULL;
	for (int t = 0; atomic_load(&sh->publishes) < 2 && t < 5000; t++)
		usleep(1000);
	if (crux_dt_mirror_open(shm, &m, &r, err, sizeof(err)) != CRUX_OK) {
		fprintf(stderr, "crux-bench-lookup: %s\n", err);
		kill(kid, SIGKILL);
		rm_dir(shm, base);
		return 1;
	}
	pub0 = atomic_load(&sh->publishes);
	if (measure(&r, m, secs, keys, peers, plain, &rb) != 0)
		return 1;
	pubs = atomic_load(&sh->publishes) - pub0;
	atomic_store(&sh->stop, 1);
	waitpid(kid, &wst, 0);
	crux_dt_mirror_close(m);
	rm_dir(shm, base);
	double pub_rate_v1 = (double)pubs / ((double)rb.elapsed / 1e9);
	writer_ok = writer_ok && WIFEXITED(wst) && WEXITSTATUS(wst) == 0;

	double *t_lookup = ra.t_lookup, *t_plain = ra.t_plain;
	size_t n = ra.n;
	uint64_t busy = ra.busy, found = ra.found, sink = ra.sink;
	qsort(t_lookup, n, sizeof(double), cmp_double);
	qsort(t_plain, n, sizeof(double), cmp_double);
	double lm = pct(t_lookup, n, 0.5), l99 = pct(t_lookup, n, 0.99);
	double pm = pct(t_plain, n, 0.5), p99 = pct(t_plain, n, 0.99);
	uint64_t lookups = (uint64_t)n * BATCH;
	qsort(rb.t_lookup, rb.n, sizeof(double), cmp_double);
	qsort(rb.t_plain, rb.n, sizeof(double), cmp_double);
	double vm = pct(rb.t_lookup, rb.n, 0.5), v99 = pct(rb.t_lookup, rb.n, 0.99);
	double vpm = pct(rb.t_plain, rb.n, 0.5);
	struct utsname u;
	uname(&u);

	printf(
	    "decision lookup (job + route, %d jobs, %d routes), writer publishing %.0f tables/s:\n",
	    NJOBS, NJOBS * NPEERS, pub_rate);
	printf("  lookup      median %6.1f ns   p99 %6.1f ns\n", lm, l99);
	printf("  plain read  median %6.1f ns   p99 %6.1f ns\n", pm, p99);
	printf("  ratio lookup/plain: median %.2fx, p99 %.2fx; busy %llu of %llu lookups\n",
	       lm / pm, l99 / p99, (unsigned long long)busy, (unsigned long long)lookups);
	printf("  goal: median <= 25 ns: %s\n", lm <= 25.0 ? "met" : "NOT met");
	printf("contract v1 (no agent): the plugin's pread copy of the file, re-read every 100 ms "
	       "(%llu re-reads, %llu new copies) while a writer pwrites %.0f tables/s:\n",
	       (unsigned long long)rb.refreshes, (unsigned long long)rb.new_copies, pub_rate_v1);
	printf("  lookup      median %6.1f ns   p99 %6.1f ns   (plain read median %.1f ns, ratio "
	       "%.2fx); busy %llu\n",
	       vm, v99, vpm, vm / vpm, (unsigned long long)rb.busy);
	if (!writer_ok || found == 0 || sink == 0 || rb.found == 0 || rb.new_copies == 0) {
		fprintf(stderr, "the writer failed or lookups found nothing\n");
		return 1;
	}

	char tmp[512];
	snprintf(tmp, sizeof(tmp), "%s.tmp", out_path);
	FILE *f = fopen(tmp, "w");
	if (!f) {
		fprintf(stderr, "cannot write %s: %s\n", tmp, strerror(errno));
		return 1;
	}
	char machine[256];
	struct crux_json j;

	snprintf(machine, sizeof(machine), "%s %s, %ld CPUs", u.sysname, u.machine, ncpu);
	crux_json_init_lines(&j, f);
	crux_json_obj(&j);
	crux_json_key(&j, "benchmark");
	crux_json_str(&j, "lookup");
	crux_json_key(&j, "description");
	crux_json_str(&j, "crux_dt_lookup (job + route) with a writer process publishing "
			  "continuously, vs a plain struct read in the same run");
	crux_json_key(&j, "machine");
	crux_json_str(&j, machine);
	crux_json_key(&j, "jobs");
	crux_json_i64(&j, NJOBS);
	crux_json_key(&j, "routes");
	crux_json_i64(&j, NJOBS * NPEERS);
	crux_json_key(&j, "batch");
	crux_json_i64(&j, BATCH);
	crux_json_key(&j, "batches");
	crux_json_u64(&j, n);
	crux_json_key(&j, "writer_publishes_per_s");
	crux_json_numf(&j, "%.0f", pub_rate);
	crux_json_key(&j, "lookup_ns");
	crux_json_obj(&j);
	crux_json_key(&j, "median");
	crux_json_numf(&j, "%.2f", lm);
	crux_json_key(&j, "p99");
	crux_json_numf(&j, "%.2f", l99);
	crux_json_end_obj(&j);
	crux_json_key(&j, "plain_read_ns");
	crux_json_obj(&j);
	crux_json_key(&j, "median");
	crux_json_numf(&j, "%.2f", pm);
	crux_json_key(&j, "p99");
	crux_json_numf(&j, "%.2f", p99);
	crux_json_end_obj(&j);
	crux_json_key(&j, "ratio_median");
	crux_json_numf(&j, "%.3f", lm / pm);
	crux_json_key(&j, "ratio_p99");
	crux_json_numf(&j, "%.3f", l99 / p99);
	crux_json_key(&j, "busy");
	crux_json_u64(&j, busy);
	crux_json_key(&j, "lookups");
	crux_json_u64(&j, lookups);
	crux_json_key(&j, "goal_median_ns");
	crux_json_i64(&j, 25);
	crux_json_key(&j, "goal_met");
	crux_json_bool(&j, lm <= 25.0);
	crux_json_key(&j, "v1_copy");
	crux_json_obj(&j);
	crux_json_key(&j, "description");
	crux_json_str(&j,
		      "contract v1: lookups on the plugin's private pread copy of decision.tbl, "
		      "re-read every 100 ms inside the timed batches, a writer process pwriting "
		      "the file");
	crux_json_key(&j, "writer_publishes_per_s");
	crux_json_numf(&j, "%.0f", pub_rate_v1);
	crux_json_key(&j, "rereads");
	crux_json_u64(&j, rb.refreshes);
	crux_json_key(&j, "new_copies");
	crux_json_u64(&j, rb.new_copies);
	crux_json_key(&j, "lookup_ns");
	crux_json_obj(&j);
	crux_json_key(&j, "median");
	crux_json_numf(&j, "%.2f", vm);
	crux_json_key(&j, "p99");
	crux_json_numf(&j, "%.2f", v99);
	crux_json_end_obj(&j);
	crux_json_key(&j, "plain_read_ns_median");
	crux_json_numf(&j, "%.2f", vpm);
	crux_json_key(&j, "ratio_median");
	crux_json_numf(&j, "%.3f", vm / vpm);
	crux_json_key(&j, "busy");
	crux_json_u64(&j, rb.busy);
	crux_json_end_obj(&j);
	crux_json_end_obj(&j);
	crux_json_done(&j);
	if (fclose(f) != 0 || rename(tmp, out_path) != 0) {
		fprintf(stderr, "cannot write %s: %s\n", out_path, strerror(errno));
		return 1;
	}
	printf("  written to %s\n", out_path);
	return 0;
}
