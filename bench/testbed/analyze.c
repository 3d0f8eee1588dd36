/* SPDX-License-Identifier: Apache-2.0 */
/*
 * crux-tb-analyze: turns the trainers' per-iteration logs of testbed runs
 * into per-job iteration time and JCT, cluster GPU utilization, per-second
 * progress, their spread over repetitions and the ratios between arms.
 *
 *   crux-tb-analyze [--json FILE] [--plot-dir DIR] [--scenario NAME]
 *                   [--fabric TEXT] [--check] ARM:RUNDIR ...
 *
 * A run directory holds jobs.txt ("<job> <model> <ranks> <role>" per line,
 * role high|low) and logs/<job>-r<rank>.log (trainer logs). Every ARM:RUNDIR
 * is one repetition of one arm; the first arm named is the baseline.
 *
 * Definitions (also in the README):
 *   job span       first iteration start .. last iteration end over its ranks (JCT)
 *   window         from the moment every job has finished its first iteration
 *                  to the moment the first job ends: all jobs contend
 *   iteration time mean of (end - start) over iterations that start in the window
 *   utilization    compute-busy time inside the window over (GPUs x window)
 *   progress       a job progresses in a second of the window if one of its
 *                  ranks computed, completed an all-reduce bucket, or received
 *                  data (logs/<job>-r<rank>.prog, optional) in it; it starves
 *                  in a second without progress while another job's data
 *                  moved (seconds in which nobody's data moved are counted
 *                  as machine stalls, reported apart)
 * --check exits 1 unless the second arm raises utilization, shortens every
 * high-role job's JCT and, in every run of the second arm, every job
 * progressed in every second (the baseline's stalls are reported only).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crux/env.h"
#include "crux/json.h"

#define TB_MAX_JOBS    16
#define TB_MAX_RANKS   64
#define TB_MAX_RUNS    64
#define TB_MAX_ARMS    4
#define TB_MAX_BUCKETS 64
#define TB_NAME	       32

struct tb_iter {
	double start, cend, end; /* seconds since the run's origin */
	int nb;
	double bucket_end[TB_MAX_BUCKETS];
};

struct tb_rank {
	struct tb_iter *it;
	int n;
	bool done;
	double *prog; /* times data arrived (the emulator's progress file), seconds */
	int nprog;
};

struct tb_job {
	char name[TB_NAME];
	char model[TB_NAME];
	char role[8];
	int nranks;
	struct tb_rank ranks[TB_MAX_RANKS];
	/* results */
	double start, end, jct, iter_time, util;
	long iters;
	int starved_s;	     /* seconds without progress while other jobs' data moved */
	int stalled_s;	     /* seconds in which no job's data moved at all (machine stall) */
	double min_sec_util; /* lowest per-second utilization in the window */
};

struct tb_run {
	char arm[TB_NAME];
	char dir[512];
	int njobs;
	struct tb_job jobs[TB_MAX_JOBS];
	double w0, w1, util;
	int gpus;
	double *sec_util; /* cluster utilization per second of the window */
	int nsec;
};

struct tb_analyzer {
	struct tb_run runs[TB_MAX_RUNS];
	int nruns;
	char arms[TB_MAX_ARMS][TB_NAME];
	int narms;
	const char *json;
	const char *plot_dir;
	const char *scenario;
	const char *fabric;
	bool check;
};

static struct tb_analyzer tb;

static int tb_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int tb_err(const char *fmt, ...)
{
	va_list ap;

	fputs("crux-tb-analyze: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return -1;
}

static int tb_read_log(const char *path, struct tb_rank *r, uint64_t *origin)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	int cap = 0, lineno = 0;

	if (!f)
		return tb_err("cannot open %s: %s (did the rank start?)", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v[3 + TB_MAX_BUCKETS];
		char *p = line, *q;
		long idx;
		int nv = 0;

		lineno++;
		if (line[0] == '#') {
			if (!strncmp(line, "# done", 6))
				r->done = true;
			continue;
		}
		errno = 0;
		idx = strtol(p, &q, 10);
		if (q == p || idx < 0)
			goto bad;
		p = q;
		while (nv < 3 + TB_MAX_BUCKETS) {
			unsigned long long x = strtoull(p, &q, 10);
			if (q == p)
				break;
			v[nv++] = x;
			p = q;
		}
		if (nv < 3 || errno || v[1] < v[0] || v[2] < v[1])
			goto bad;
		if (r->n == cap) {
			struct tb_iter *n;
			cap = cap ? cap * 2 : 64;
			n = realloc(r->it, sizeof(*n) * (size_t)cap);
			if (!n) {
				fclose(f);
				return tb_err("out of memory");
			}
			r->it = n;
		}
		if (!*origin || v[0] < *origin)
			*origin = v[0] < 1000000000ull ? 1 : v[0] - 1000000000ull;
		struct tb_iter *it = &r->it[r->n++];
		it->start = (double)v[0];
		it->cend = (double)v[1];
		it->end = (double)v[2];
		it->nb = nv - 3;
		for (int b = 0; b < it->nb; b++)
			it->bucket_end[b] = (double)v[3 + b];
		continue;
	bad:
		fclose(f);
		return tb_err("%s:%d: malformed iteration line (want '<iter> <start_ns> "
			      "<compute_end_ns> <end_ns> [bucket_end_ns...]')",
			      path, lineno);
	}
	fclose(f);
	if (r->n == 0)
		return tb_err("%s: no iteration completed", path);
	return 0;
}

/* Optional: lines "<ns> <bytes>" from the emulator (CRUX_TB_PROGRESS). */
static int tb_read_prog(const char *path, struct tb_rank *r)
{
	FILE *f = fopen(path, "r");
	unsigned long long t, b;
	int cap = 0, lineno = 0;
	char line[128];

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (sscanf(line, "%llu %llu", &t, &b) != 2) {
			fclose(f);
			return tb_err("%s:%d: malformed progress line (want '<ns> <bytes>')", path,
				      lineno);
		}
		if (r->nprog == cap) {
			double *n;
			cap = cap ? cap * 2 : 256;
			n = realloc(r->prog, sizeof(*n) * (size_t)cap);
			if (!n) {
				fclose(f);
				return tb_err("out of memory");
			}
			r->prog = n;
		}
		r->prog[r->nprog++] = (double)t;
	}
	fclose(f);
	return 0;
}

static int tb_load_run(struct tb_run *run)
{
	char path[700], line[256];
	uint64_t origin = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/jobs.txt", run->dir);
	f = fopen(path, "r");
	if (!f)
		return tb_err("cannot open %s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		struct tb_job *j;
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (run->njobs == TB_MAX_JOBS) {
			fclose(f);
			return tb_err("%s: more than %d jobs", path, TB_MAX_JOBS);
		}
		j = &run->jobs[run->njobs];
		if (sscanf(line, "%31s %31s %d %7s", j->name, j->model, &j->nranks, j->role) != 4 ||
		    j->nranks < 1 || j->nranks > TB_MAX_RANKS ||
		    (strcmp(j->role, "high") && strcmp(j->role, "low"))) {
			fclose(f);
			return tb_err("%s: bad line '%s' (want '<job> <model> <ranks 1..%d> "
				      "<high|low>')",
				      path, line, TB_MAX_RANKS);
		}
		run->njobs++;
	}
	fclose(f);
	if (!run->njobs)
		return tb_err("%s: no jobs", path);
	for (int i = 0; i < run->njobs; i++) {
		struct tb_job *j = &run->jobs[i];
		for (int r = 0; r < j->nranks; r++) {
			snprintf(path, sizeof(path), "%s/logs/%s-r%d.log", run->dir, j->name, r);
			if (tb_read_log(path, &j->ranks[r], &origin) < 0)
				return -1;
		}
	}
	for (int i = 0; i < run->njobs; i++) {
		struct tb_job *j = &run->jobs[i];
		for (int r = 0; r < j->nranks; r++) {
			snprintf(path, sizeof(path), "%s/logs/%s-r%d.prog", run->dir, j->name, r);
			if (tb_read_prog(path, &j->ranks[r]) < 0)
				return -1;
		}
	}
	/* Seconds since a common origin keep the arithmetic in doubles exact enough. */
	for (int i = 0; i < run->njobs; i++) {
		struct tb_job *j = &run->jobs[i];
		for (int r = 0; r < j->nranks; r++) {
			struct tb_rank *rk = &j->ranks[r];
			for (int k = 0; k < rk->n; k++) {
				struct tb_iter *it = &rk->it[k];
				it->start = (it->start - (double)origin) / 1e9;
				it->cend = (it->cend - (double)origin) / 1e9;
				it->end = (it->end - (double)origin) / 1e9;
				for (int b = 0; b < it->nb; b++)
					it->bucket_end[b] =
					    (it->bucket_end[b] - (double)origin) / 1e9;
			}
			for (int k = 0; k < rk->nprog; k++)
				rk->prog[k] = (rk->prog[k] - (double)origin) / 1e9;
		}
	}
	return 0;
}

static double tb_overlap(double a0, double a1, double b0, double b1)
{
	double lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
	return hi > lo ? hi - lo : 0;
}

static double tb_busy(const struct tb_job *j, double t0, double t1)
{
	double busy = 0;

	for (int r = 0; r < j->nranks; r++)
		for (int k = 0; k < j->ranks[r].n; k++)
			busy += tb_overlap(j->ranks[r].it[k].start, j->ranks[r].it[k].cend, t0, t1);
	return busy;
}

/* Did the network move data for job j in [t0, t1)? */
static bool tb_net_progress(const struct tb_job *j, double t0, double t1)
{
	for (int r = 0; r < j->nranks; r++) {
		for (int k = 0; k < j->ranks[r].nprog; k++)
			if (j->ranks[r].prog[k] >= t0 && j->ranks[r].prog[k] < t1)
				return true;
		for (int k = 0; k < j->ranks[r].n; k++) {
			const struct tb_iter *it = &j->ranks[r].it[k];
			if (it->end >= t0 && it->end < t1)
				return true;
			for (int b = 0; b < it->nb; b++)
				if (it->bucket_end[b] >= t0 && it->bucket_end[b] < t1)
					return true;
		}
	}
	return false;
}

static bool tb_progress(const struct tb_job *j, double t0, double t1)
{
	for (int r = 0; r < j->nranks; r++) {
		for (int k = 0; k < j->ranks[r].nprog; k++)
			if (j->ranks[r].prog[k] >= t0 && j->ranks[r].prog[k] < t1)
				return true;
		for (int k = 0; k < j->ranks[r].n; k++) {
			const struct tb_iter *it = &j->ranks[r].it[k];
			if (tb_overlap(it->start, it->cend, t0, t1) > 0)
				return true;
			if (it->end >= t0 && it->end < t1)
				return true;
			for (int b = 0; b < it->nb; b++)
				if (it->bucket_end[b] >= t0 && it->bucket_end[b] < t1)
					return true;
		}
	}
	return false;
}

static int tb_analyze_run(struct tb_run *run)
{
	double w0 = -1, w1 = 1e300, busy = 0;

	run->gpus = 0;
	for (int i = 0; i < run->njobs; i++) {
		struct tb_job *j = &run->jobs[i];
		double first_end = 0;

		j->start = 1e300;
		j->end = 0;
		j->iters = j->ranks[0].n;
		for (int r = 0; r < j->nranks; r++) {
			struct tb_rank *rk = &j->ranks[r];
			if (rk->it[0].start < j->start)
				j->start = rk->it[0].start;
			if (rk->it[rk->n - 1].end > j->end)
				j->end = rk->it[rk->n - 1].end;
			if (rk->it[0].end > first_end)
				first_end = rk->it[0].end;
			if (rk->n < j->iters)
				j->iters = rk->n;
		}
		j->jct = j->end - j->start;
		if (first_end > w0)
			w0 = first_end;
		if (j->end < w1)
			w1 = j->end;
		run->gpus += j->nranks;
	}
	if (w1 - w0 < 2.0)
		return tb_err("%s: the jobs overlapped for only %.1f s (need >= 2 s): give the "
			      "short jobs more iterations",
			      run->dir, w1 - w0);
	run->w0 = w0;
	run->w1 = w1;
	run->nsec = (int)floor(w1 - w0);
	run->sec_util = calloc((size_t)run->nsec, sizeof(double));
	if (!run->sec_util)
		return tb_err("out of memory");
	for (int i = 0; i < run->njobs; i++) {
		struct tb_job *j = &run->jobs[i];
		double sum = 0;
		long n = 0;

		for (int r = 0; r < j->nranks; r++)
			for (int k = 0; k < j->ranks[r].n; k++) {
				const struct tb_iter *it = &j->ranks[r].it[k];
				if (it->start >= w0 && it->start < w1) {
					sum += it->end - it->start;
					n++;
				}
			}
		/* A job slower than the window still has a (lower-bound) figure. */
		j->iter_time = n ? sum / (double)n : j->jct / (double)j->iters;
		j->util = tb_busy(j, w0, w1) / ((double)j->nranks * (w1 - w0));
		busy += tb_busy(j, w0, w1);
		j->starved_s = 0;
		j->min_sec_util = 1;
		for (int s = 0; s < run->nsec; s++) {
			double t0 = w0 + s, t1 = t0 + 1;
			double u = tb_busy(j, t0, t1) / (double)j->nranks;
			/*
			 * Starved: no progress of its own while the network moved
			 * another job's data (a stall of the whole machine is no
			 * scheduling decision and is counted apart).
			 */
			if (!tb_progress(j, t0, t1)) {
				bool others = false;
				for (int o = 0; o < run->njobs && !others; o++)
					others = o != i && tb_net_progress(&run->jobs[o], t0, t1);
				if (others)
					j->starved_s++;
				else
					j->stalled_s++;
			}
			if (u < j->min_sec_util)
				j->min_sec_util = u;
			run->sec_util[s] += tb_busy(j, t0, t1);
		}
	}
	for (int s = 0; s < run->nsec; s++)
		run->sec_util[s] /= (double)run->gpus;
	run->util = busy / ((double)run->gpus * (w1 - w0));
	return 0;
}

struct tb_stat {
	double mean, sd, min, max;
	int n;
};

static void tb_stat_add(double *v, int *n, double x)
{
	v[(*n)++] = x;
}

static struct tb_stat tb_stats(const double *v, int n)
{
	struct tb_stat s = {0, 0, 0, 0, n};

	if (!n)
		return s;
	s.min = s.max = v[0];
	for (int i = 0; i < n; i++) {
		s.mean += v[i];
		if (v[i] < s.min)
			s.min = v[i];
		if (v[i] > s.max)
			s.max = v[i];
	}
	s.mean /= n;
	for (int i = 0; i < n; i++)
		s.sd += (v[i] - s.mean) * (v[i] - s.mean);
	s.sd = n > 1 ? sqrt(s.sd / (n - 1)) : 0;
	return s;
}

static void tb_json_stat(struct crux_json *j, const char *key, struct tb_stat s, const double *v)
{
	crux_json_key(j, key);
	crux_json_obj(j);
	crux_json_field_numf(j, "mean", "%.6f", s.mean);
	crux_json_field_numf(j, "stdev", "%.6f", s.sd);
	crux_json_field_numf(j, "min", "%.6f", s.min);
	crux_json_field_numf(j, "max", "%.6f", s.max);
	crux_json_key(j, "runs");
	crux_json_arr(j);
	for (int i = 0; i < s.n; i++)
		crux_json_numf(j, "%.6f", v[i]);
	crux_json_end_arr(j);
	crux_json_end_obj(j);
}

/* An arm's name in the plot's data. */
static const char *arm_label(const char *arm)
{
	if (!strcmp(arm, "none"))
		return "no scheduling";
	if (!strcmp(arm, "crux"))
		return "Crux";
	return !strcmp(arm, "paths") ? "Crux + paths" : arm;
}

/* Per arm and job: values over repetitions. */
struct tb_agg {
	double util[TB_MAX_RUNS];
	int nutil;
	double it[TB_MAX_JOBS][TB_MAX_RUNS], jct[TB_MAX_JOBS][TB_MAX_RUNS],
	    ju[TB_MAX_JOBS][TB_MAX_RUNS];
	int nj[TB_MAX_JOBS];
	int starved[TB_MAX_JOBS];
	int stalled[TB_MAX_JOBS];
	double min_sec_util[TB_MAX_JOBS];
};

static struct tb_agg tb_aggs[TB_MAX_ARMS];

static int tb_job_index(const struct tb_run *ref, const char *name)
{
	for (int i = 0; i < ref->njobs; i++)
		if (!strcmp(ref->jobs[i].name, name))
			return i;
	return -1;
}

static double tb_pct(double a, double b)
{
	return b > 0 ? (a / b - 1.0) * 100.0 : 0;
}

/* One arm against the baseline (arm 0): the figures the goals are judged on. */
struct tb_cmp {
	double ugain;  /* cluster utilization change, % */
	double hi_jct; /* the best (lowest) JCT change of a high-intensity job, % (0: none) */
	bool hi_all_faster;
	bool starved;
};

static struct tb_cmp tb_compare(int a)
{
	const struct tb_run *ref = &tb.runs[0];
	struct tb_stat u0 = tb_stats(tb_aggs[0].util, tb_aggs[0].nutil);
	struct tb_stat u1 = tb_stats(tb_aggs[a].util, tb_aggs[a].nutil);
	struct tb_cmp c = {.ugain = tb_pct(u1.mean, u0.mean), .hi_all_faster = true};

	for (int j = 0; j < ref->njobs; j++) {
		struct tb_stat j0 = tb_stats(tb_aggs[0].jct[j], tb_aggs[0].nj[j]);
		struct tb_stat j1 = tb_stats(tb_aggs[a].jct[j], tb_aggs[a].nj[j]);
		double d = tb_pct(j1.mean, j0.mean);
		if (!strcmp(ref->jobs[j].role, "high")) {
			if (d < c.hi_jct || c.hi_jct == 0)
				c.hi_jct = d;
			if (d >= 0)
				c.hi_all_faster = false;
		}
		c.starved |= tb_aggs[a].starved[j] > 0;
	}
	return c;
}

static const char *tb_met(bool m)
{
	return m ? "met" : "not met";
}

/* One arm's figures: cluster utilization and, per job, iteration time, JCT, utilization. */
static void tb_json_arm(struct crux_json *j, const struct tb_run *ref, const struct tb_agg *g)
{
	crux_json_obj(j);
	tb_json_stat(j, "cluster_gpu_utilization", tb_stats(g->util, g->nutil), g->util);
	crux_json_key(j, "jobs");
	crux_json_obj(j);
	for (int k = 0; k < ref->njobs; k++) {
		crux_json_key(j, ref->jobs[k].name);
		crux_json_obj(j);
		crux_json_field_str(j, "model", ref->jobs[k].model);
		crux_json_field_i64(j, "gpus", ref->jobs[k].nranks);
		crux_json_field_str(j, "role", ref->jobs[k].role);
		tb_json_stat(j, "iter_time_s", tb_stats(g->it[k], g->nj[k]), g->it[k]);
		tb_json_stat(j, "jct_s", tb_stats(g->jct[k], g->nj[k]), g->jct[k]);
		tb_json_stat(j, "gpu_utilization", tb_stats(g->ju[k], g->nj[k]), g->ju[k]);
		crux_json_field_i64(j, "seconds_without_progress", g->starved[k]);
		crux_json_field_i64(j, "seconds_of_machine_stall", g->stalled[k]);
		crux_json_field_numf(j, "min_per_second_utilization", "%.4f", g->min_sec_util[k]);
		crux_json_end_obj(j);
	}
	crux_json_end_obj(j);
	crux_json_end_obj(j);
}

/* The goals of one scheduled arm against the baseline. */
static void tb_json_goals(struct crux_json *j, double ugain, double hi_jct, const char *starved_key,
			  bool starved)
{
	crux_json_key(j, "goals");
	crux_json_obj(j);
	crux_json_field_bool(j, "utilization_gain_ge_10pct", ugain >= 10);
	crux_json_field_bool(j, "high_intensity_jct_le_minus_20pct", hi_jct <= -20);
	crux_json_field_bool(j, starved_key, !starved);
	crux_json_end_obj(j);
}

/*
 * The result file: every arm's figures; with a baseline and more arms, the
 * first scheduled arm's ratios and goals, and every scheduled arm's goals.
 */
static void tb_write_json(FILE *f, const struct tb_run *ref, double ugain, double hi_jct,
			  bool starved)
{
	struct crux_json j;
	char key[48 + TB_NAME];

	crux_json_init_lines(&j, f);
	crux_json_obj(&j);
	crux_json_field_str(&j, "benchmark", "testbed");
	crux_json_field_str(&j, "scenario", tb.scenario ? tb.scenario : "");
	crux_json_field_str(&j, "fabric", tb.fabric ? tb.fabric : "");
	crux_json_field_str(
	    &j, "definitions",
	    "utilization = compute-busy time / (GPUs x window); window = all jobs past their "
	    "first iteration until the first job ends; iteration time = mean over "
	    "iterations starting in the window; JCT = first iteration start to last "
	    "iteration end");
	crux_json_field_str(&j, "baseline", tb.arms[0]);
	crux_json_key(&j, "arms");
	crux_json_obj(&j);
	for (int a = 0; a < tb.narms; a++) {
		crux_json_key(&j, tb.arms[a]);
		tb_json_arm(&j, ref, &tb_aggs[a]);
	}
	crux_json_end_obj(&j);
	if (tb.narms > 1) {
		crux_json_key(&j, "ratios");
		crux_json_obj(&j);
		crux_json_field_numf(&j, "utilization_ratio", "%.4f", 1 + ugain / 100);
		crux_json_field_numf(&j, "utilization_gain_pct", "%.2f", ugain);
		crux_json_key(&j, "jobs");
		crux_json_obj(&j);
		for (int k = 0; k < ref->njobs; k++) {
			struct tb_stat i0 = tb_stats(tb_aggs[0].it[k], tb_aggs[0].nj[k]);
			struct tb_stat i1 = tb_stats(tb_aggs[1].it[k], tb_aggs[1].nj[k]);
			struct tb_stat j0 = tb_stats(tb_aggs[0].jct[k], tb_aggs[0].nj[k]);
			struct tb_stat j1 = tb_stats(tb_aggs[1].jct[k], tb_aggs[1].nj[k]);

			crux_json_key(&j, ref->jobs[k].name);
			crux_json_obj(&j);
			crux_json_field_numf(&j, "iter_time_change_pct", "%.2f",
					     tb_pct(i1.mean, i0.mean));
			crux_json_field_numf(&j, "jct_change_pct", "%.2f",
					     tb_pct(j1.mean, j0.mean));
			crux_json_field_numf(&j, "jct_ratio", "%.4f",
					     j0.mean > 0 ? j1.mean / j0.mean : 0);
			crux_json_end_obj(&j);
		}
		crux_json_end_obj(&j);
		crux_json_end_obj(&j);
		snprintf(key, sizeof(key), "every_job_progressed_every_second_with_%s", tb.arms[1]);
		tb_json_goals(&j, ugain, hi_jct, key, starved);
		/* Every scheduled arm against the baseline (the console's goal lines). */
		crux_json_key(&j, "vs_baseline");
		crux_json_obj(&j);
		for (int a = 1; a < tb.narms; a++) {
			struct tb_cmp c = tb_compare(a);

			crux_json_key(&j, tb.arms[a]);
			crux_json_obj(&j);
			crux_json_field_numf(&j, "utilization_gain_pct", "%.2f", c.ugain);
			crux_json_field_numf(&j, "best_high_intensity_jct_change_pct", "%.2f",
					     c.hi_jct);
			tb_json_goals(&j, c.ugain, c.hi_jct, "every_job_progressed_every_second",
				      c.starved);
			crux_json_end_obj(&j);
		}
		crux_json_end_obj(&j);
	}
	crux_json_end_obj(&j);
	crux_json_done(&j);
}

static int tb_report(void)
{
	const struct tb_run *ref = &tb.runs[0];
	FILE *f;
	bool ok = true;

	for (int a = 0; a < tb.narms; a++) {
		struct tb_agg *g = &tb_aggs[a];
		for (int j = 0; j < ref->njobs; j++)
			g->min_sec_util[j] = 1;
	}
	for (int i = 0; i < tb.nruns; i++) {
		const struct tb_run *run = &tb.runs[i];
		int a = 0;
		while (strcmp(tb.arms[a], run->arm))
			a++;
		struct tb_agg *g = &tb_aggs[a];
		tb_stat_add(g->util, &g->nutil, run->util);
		for (int k = 0; k < run->njobs; k++) {
			const struct tb_job *jb = &run->jobs[k];
			int j = tb_job_index(ref, jb->name);
			if (j < 0 || run->njobs != ref->njobs)
				return tb_err("%s: its jobs differ from %s's", run->dir, ref->dir);
			g->it[j][g->nj[j]] = jb->iter_time;
			g->jct[j][g->nj[j]] = jb->jct;
			g->ju[j][g->nj[j]] = jb->util;
			g->nj[j]++;
			g->starved[j] += jb->starved_s;
			g->stalled[j] += jb->stalled_s;
			if (jb->min_sec_util < g->min_sec_util[j])
				g->min_sec_util[j] = jb->min_sec_util;
		}
	}

	/* The table. */
	printf("\n%-10s %-7s %5s", "job", "model", "GPUs");
	for (int a = 0; a < tb.narms; a++)
		printf(" | %-6s iter(s)   JCT(s)", tb.arms[a]);
	if (tb.narms > 1)
		printf(" | iter    JCT");
	printf("\n");
	for (int j = 0; j < ref->njobs; j++) {
		printf("%-10s %-7s %5d", ref->jobs[j].name, ref->jobs[j].model,
		       ref->jobs[j].nranks);
		for (int a = 0; a < tb.narms; a++) {
			struct tb_stat si = tb_stats(tb_aggs[a].it[j], tb_aggs[a].nj[j]);
			struct tb_stat sj = tb_stats(tb_aggs[a].jct[j], tb_aggs[a].nj[j]);
			printf(" | %6.3f±%-5.3f %6.1f±%-4.1f", si.mean, si.sd, sj.mean, sj.sd);
		}
		if (tb.narms > 1) {
			struct tb_stat i0 = tb_stats(tb_aggs[0].it[j], tb_aggs[0].nj[j]);
			struct tb_stat i1 = tb_stats(tb_aggs[1].it[j], tb_aggs[1].nj[j]);
			struct tb_stat j0 = tb_stats(tb_aggs[0].jct[j], tb_aggs[0].nj[j]);
			struct tb_stat j1 = tb_stats(tb_aggs[1].jct[j], tb_aggs[1].nj[j]);
			printf(" | %+5.1f%% %+5.1f%%", tb_pct(i1.mean, i0.mean),
			       tb_pct(j1.mean, j0.mean));
		}
		printf("\n");
	}
	printf("%-24s", "cluster GPU utilization");
	for (int a = 0; a < tb.narms; a++) {
		struct tb_stat s = tb_stats(tb_aggs[a].util, tb_aggs[a].nutil);
		printf(" | %-6s %5.1f%% ± %4.1f (%d runs)", tb.arms[a], s.mean * 100, s.sd * 100,
		       s.n);
	}
	printf("\n");
	for (int a = 0; a < tb.narms; a++) {
		printf("%-24s | %-6s", "seconds without progress", tb.arms[a]);
		int st = 0;
		for (int j = 0; j < ref->njobs; j++) {
			printf(" %s=%d", ref->jobs[j].name, tb_aggs[a].starved[j]);
			st += tb_aggs[a].stalled[j];
		}
		if (st)
			printf("  (plus %d job-seconds of machine-wide stalls)", st);
		printf("\n");
	}

	double ugain = 0, hi_jct = 0;
	bool starved = false;
	if (tb.narms > 1) {
		struct tb_stat u0 = tb_stats(tb_aggs[0].util, tb_aggs[0].nutil);
		struct tb_stat u1 = tb_stats(tb_aggs[1].util, tb_aggs[1].nutil);
		ugain = tb_pct(u1.mean, u0.mean);
		printf("\n%s vs %s: cluster GPU utilization %+.1f%% (%.3f / %.3f = %.3fx)\n",
		       tb.arms[1], tb.arms[0], ugain, u1.mean, u0.mean,
		       u0.mean > 0 ? u1.mean / u0.mean : 0);
		for (int j = 0; j < ref->njobs; j++) {
			struct tb_stat j0 = tb_stats(tb_aggs[0].jct[j], tb_aggs[0].nj[j]);
			struct tb_stat j1 = tb_stats(tb_aggs[1].jct[j], tb_aggs[1].nj[j]);
			double d = tb_pct(j1.mean, j0.mean);
			printf("  %-10s (%s-intensity) JCT %+.1f%% (%.3fx)\n", ref->jobs[j].name,
			       ref->jobs[j].role, d, j0.mean > 0 ? j1.mean / j0.mean : 0);
			if (!strcmp(ref->jobs[j].role, "high")) {
				if (d < hi_jct || hi_jct == 0)
					hi_jct = d;
				if (d >= 0)
					ok = false;
			}
		}
		if (ugain <= 0)
			ok = false;
	}
	/* Every scheduled arm against the baseline, with the goals (as in the JSON). */
	for (int a = 1; a < tb.narms; a++) {
		struct tb_cmp c = tb_compare(a);
		if (a > 1) {
			struct tb_stat u0 = tb_stats(tb_aggs[0].util, tb_aggs[0].nutil);
			struct tb_stat u1 = tb_stats(tb_aggs[a].util, tb_aggs[a].nutil);
			printf(
			    "\n%s vs %s: cluster GPU utilization %+.1f%% (%.3f / %.3f = %.3fx)\n",
			    tb.arms[a], tb.arms[0], c.ugain, u1.mean, u0.mean,
			    u0.mean > 0 ? u1.mean / u0.mean : 0);
			for (int j = 0; j < ref->njobs; j++) {
				struct tb_stat j0 = tb_stats(tb_aggs[0].jct[j], tb_aggs[0].nj[j]);
				struct tb_stat j1 = tb_stats(tb_aggs[a].jct[j], tb_aggs[a].nj[j]);
				printf("  %-10s (%s-intensity) JCT %+.1f%% (%.3fx)\n",
				       ref->jobs[j].name, ref->jobs[j].role,
				       tb_pct(j1.mean, j0.mean),
				       j0.mean > 0 ? j1.mean / j0.mean : 0);
			}
		}
		printf("  goals %s: utilization gain >= 10%%: %s; high-intensity JCT <= -20%%: %s; "
		       "every job progressed every second: %s\n",
		       tb.arms[a], tb_met(c.ugain >= 10), tb_met(c.hi_jct <= -20),
		       tb_met(!c.starved));
	}
	/*
	 * Starvation is judged on the scheduled arms (the baseline's own stalls
	 * are reported, not held against the scheduler); with one arm, on it.
	 */
	for (int a = tb.narms > 1 ? 1 : 0; a < tb.narms; a++)
		for (int j = 0; j < ref->njobs; j++)
			if (tb_aggs[a].starved[j])
				starved = true;
	if (starved)
		ok = false;

	if (tb.json) {
		f = fopen(tb.json, "w");
		if (!f)
			return tb_err("cannot write %s: %s", tb.json, strerror(errno));
		tb_write_json(f, ref, ugain, hi_jct, starved);
		if (fclose(f) != 0)
			return tb_err("cannot write %s: %s", tb.json, strerror(errno));
	}

	if (tb.plot_dir) {
		char path[700];
		/* bars.dat: one row per job plus the cluster: label, then mean/sd per arm. */
		snprintf(path, sizeof(path), "%s/jct.dat", tb.plot_dir);
		f = fopen(path, "w");
		if (!f)
			return tb_err("cannot write %s: %s", path, strerror(errno));
		fprintf(f, "# job");
		for (int a = 0; a < tb.narms; a++)
			fprintf(f, " %s_jct %s_sd", tb.arms[a], tb.arms[a]);
		fprintf(f, "\n");
		for (int j = 0; j < ref->njobs; j++) {
			fprintf(f, "\"%s\\n%d GPUs\"", ref->jobs[j].name, ref->jobs[j].nranks);
			for (int a = 0; a < tb.narms; a++) {
				struct tb_stat s = tb_stats(tb_aggs[a].jct[j], tb_aggs[a].nj[j]);
				fprintf(f, " %.4f %.4f", s.mean, s.sd);
			}
			fprintf(f, "\n");
		}
		fclose(f);
		snprintf(path, sizeof(path), "%s/util.dat", tb.plot_dir);
		f = fopen(path, "w");
		if (!f)
			return tb_err("cannot write %s: %s", path, strerror(errno));
		for (int a = 0; a < tb.narms; a++) {
			struct tb_stat s = tb_stats(tb_aggs[a].util, tb_aggs[a].nutil);
			fprintf(f, "\"%s\" %.4f %.4f\n", arm_label(tb.arms[a]), s.mean * 100,
				s.sd * 100);
		}
		fclose(f);
		/* timeline.dat: per-second cluster utilization of each arm's first run. */
		snprintf(path, sizeof(path), "%s/timeline.dat", tb.plot_dir);
		f = fopen(path, "w");
		if (!f)
			return tb_err("cannot write %s: %s", path, strerror(errno));
		for (int a = 0; a < tb.narms; a++) {
			for (int i = 0; i < tb.nruns; i++) {
				if (strcmp(tb.runs[i].arm, tb.arms[a]))
					continue;
				fprintf(f, "# %s\n", tb.arms[a]);
				for (int s = 0; s < tb.runs[i].nsec; s++)
					fprintf(f, "%d %.4f\n", s, tb.runs[i].sec_util[s] * 100);
				fprintf(f, "\n\n");
				break;
			}
		}
		fclose(f);
	}
	if (tb.check) {
		printf("check: %s (direction: utilization %s, high-intensity JCT %s; %s)\n",
		       ok ? "PASS" : "FAIL", ugain > 0 ? "up" : "NOT up",
		       hi_jct < 0 ? "down" : "NOT down",
		       starved ? "a job STARVED for a second or more" : "no job starved");
		return ok ? 0 : 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", required_argument, NULL, 'j'},
	    {"plot-dir", required_argument, NULL, 'p'},
	    {"scenario", required_argument, NULL, 's'},
	    {"fabric", required_argument, NULL, 'f'},
	    {"check", no_argument, NULL, 'c'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			tb.json = optarg;
			break;
		case 'p':
			tb.plot_dir = optarg;
			break;
		case 's':
			tb.scenario = optarg;
			break;
		case 'f':
			tb.fabric = optarg;
			break;
		case 'c':
			tb.check = true;
			break;
		case 'h':
			printf("usage: crux-tb-analyze [--json FILE] [--plot-dir DIR] [--scenario "
			       "NAME] "
			       "[--fabric TEXT] [--check] ARM:RUNDIR ...\n");
			return 0;
		default:
			return 2;
		}
	}
	if (optind >= argc) {
		tb_err("no runs given (ARM:RUNDIR ...)");
		return 2;
	}
	for (int i = optind; i < argc; i++) {
		struct tb_run *run;
		const char *colon = strchr(argv[i], ':');
		int a;

		if (!colon || colon == argv[i] || (size_t)(colon - argv[i]) >= TB_NAME) {
			tb_err("'%s' is not ARM:RUNDIR", argv[i]);
			return 2;
		}
		if (tb.nruns == TB_MAX_RUNS) {
			tb_err("more than %d runs", TB_MAX_RUNS);
			return 2;
		}
		run = &tb.runs[tb.nruns++];
		memcpy(run->arm, argv[i], (size_t)(colon - argv[i]));
		snprintf(run->dir, sizeof(run->dir), "%s", colon + 1);
		for (a = 0; a < tb.narms; a++)
			if (!strcmp(tb.arms[a], run->arm))
				break;
		if (a == tb.narms) {
			if (tb.narms == TB_MAX_ARMS) {
				tb_err("more than %d arms", TB_MAX_ARMS);
				return 2;
			}
			memcpy(tb.arms[tb.narms++], run->arm, TB_NAME);
		}
		if (tb_load_run(run) < 0 || tb_analyze_run(run) < 0)
			return 1;
	}
	return tb_report() ? 1 : 0;
}
