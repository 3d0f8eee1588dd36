/* SPDX-License-Identifier: Apache-2.0 */
/* crux-sim reports: text tables, JSON, CSV and gnuplot PNGs. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crux/json.h"
#include "crux/sim.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Slowdowns of jobs that ran at least one iteration, sorted ascending. */
static size_t sorted_slowdowns(const struct crux_sim_result *r, double **out)
{
	double *v = malloc((r->n_jobs ? r->n_jobs : 1) * sizeof(*v));
	size_t n = 0;
	if (!v) {
		*out = NULL;
		return 0;
	}
	for (size_t i = 0; i < r->n_jobs; i++) {
		if (r->jobs[i].iterations_done > 0 && r->jobs[i].slowdown > 0)
			v[n++] = r->jobs[i].slowdown;
	}
	qsort(v, n, sizeof(*v), cmp_double);
	*out = v;
	return n;
}

static double pct(const double *v, size_t n, double p)
{
	if (!n)
		return NAN;
	double x = p * (double)(n - 1);
	size_t i = (size_t)x;
	if (i + 1 >= n)
		return v[n - 1];
	return v[i] + (x - (double)i) * (v[i + 1] - v[i]);
}

static void jct_stats(const struct crux_sim_result *r, double *mean, size_t *n)
{
	double s = 0;
	size_t k = 0;
	for (size_t i = 0; i < r->n_jobs; i++) {
		if (r->jobs[i].finish_s >= 0) {
			s += r->jobs[i].jct_s;
			k++;
		}
	}
	*mean = k ? s / (double)k : NAN;
	*n = k;
}

void crux_sim_print_summary(FILE *f, const struct crux_sim_result *const *r, size_t n)
{
	if (!n)
		return;
	const struct crux_sim_result *base = r[0];
	fprintf(f, "%-19s %9s %9s %9s %8s %10s %7s %7s %7s %7s %8s\n", "policy", "util%",
		"vs-first", "busy/held", "done", "meanJCT(h)", "sd-p50", "sd-p90", "sd-p99",
		"sd-max", "wall(s)");
	for (size_t i = 0; i < n; i++) {
		double *sd;
		size_t m = sorted_slowdowns(r[i], &sd);
		double mj;
		size_t done;
		jct_stats(r[i], &mj, &done);
		fprintf(f, "%-19s %9.2f %+8.2f%% %9.3f %8zu %10.2f %7.3f %7.3f %7.3f %7.3f %8.2f\n",
			r[i]->label, 100 * r[i]->mean_util,
			100 * (r[i]->mean_util / base->mean_util - 1), r[i]->busy_of_held, done,
			mj / 3600, pct(sd, m, 0.5), pct(sd, m, 0.9), pct(sd, m, 0.99),
			m ? sd[m - 1] : NAN, r[i]->wall_s);
		free(sd);
	}
	/* The worst-off jobs of the last run (usually the policy under study). */
	const struct crux_sim_result *last = r[n - 1];
	size_t *idx = malloc((last->n_jobs ? last->n_jobs : 1) * sizeof(*idx));
	if (!idx)
		return;
	size_t k = 0;
	for (size_t i = 0; i < last->n_jobs; i++) {
		if (last->jobs[i].iterations_done > 0)
			idx[k++] = i;
	}
	/* Partial selection of the five largest slowdowns. */
	size_t show = k < 5 ? k : 5;
	for (size_t a = 0; a < show; a++) {
		for (size_t b = a + 1; b < k; b++) {
			if (last->jobs[idx[b]].slowdown > last->jobs[idx[a]].slowdown) {
				size_t t = idx[a];
				idx[a] = idx[b];
				idx[b] = t;
			}
		}
	}
	if (show)
		fprintf(f, "worst-off jobs under %s:\n  %8s %-18s %5s %5s %9s %9s %8s %5s\n",
			last->label, "id", "model", "gpus", "hosts", "iso-it(s)", "it(s)",
			"slowdown", "level");
	for (size_t a = 0; a < show; a++) {
		const struct crux_sim_job_result *j = &last->jobs[idx[a]];
		fprintf(f, "  %8u %-18s %5u %5u %9.4f %9.4f %8.3f %5d\n", j->id, j->model, j->gpus,
			j->n_hosts, j->iso_iter_s, j->mean_iter_s, j->slowdown, j->level);
	}
	free(idx);
	for (size_t i = 0; i < n; i++)
		if (r[i]->infeasible_jobs)
			fprintf(f,
				"%s: %zu jobs reported infeasible (no schedule keeps them within "
				"the bound; not enforced)\n",
				r[i]->label, r[i]->infeasible_jobs);
	/* Reference-model snapshots of every run that took them. */
	for (size_t i = 0; i < n; i++) {
		const struct crux_sim_result *x = r[i];
		size_t within = 0;

		if (!x->n_ref_snaps)
			continue;
		for (size_t k = 0; k < x->n_ref_snaps; k++)
			within += fabs(x->ref_snaps[k].eval_util - x->ref_snaps[k].ref_util) <=
				  0.05 * x->ref_snaps[k].ref_util;
		fprintf(f,
			"%s: %zu reference snapshots, evaluator utilisation within +-5 %% of the "
			"reference in %zu\n  %10s %5s %5s %9s %9s %8s %8s %9s %9s %7s %6s\n",
			x->label, x->n_ref_snaps, within, "t(s)", "jobs", "net", "eval%", "ref%",
			"itErr50", "itErr90", "maxSlowE", "maxSlowR", "starved", "ref_s");
		for (size_t k = 0; k < x->n_ref_snaps; k++) {
			const struct crux_sim_ref_snap *q = &x->ref_snaps[k];

			fprintf(f,
				"  %10.0f %5u %5u %9.2f %9.2f %7.1f%% %7.1f%% %9.2f %9.2f %7u "
				"%6.1f%s\n",
				q->t_s, q->jobs, q->net_jobs, 100 * q->eval_util, 100 * q->ref_util,
				100 * q->iter_err_p50, 100 * q->iter_err_p90, q->slow_eval_max,
				q->slow_ref_max, q->starved, q->wall_s,
				q->truncated ? " (truncated)" : "");
		}
	}
}

/* Six significant digits: the precision the figures carry (and always had here). */
#define SIM_NUM "%.6g"

static void write_ref_snaps(struct crux_json *j, const struct crux_sim_result *r)
{
	crux_json_key(j, "reference_snapshots");
	crux_json_arr(j);
	for (size_t k = 0; k < r->n_ref_snaps; k++) {
		const struct crux_sim_ref_snap *q = &r->ref_snaps[k];

		crux_json_obj(j);
		crux_json_field_numf(j, "t_s", SIM_NUM, q->t_s);
		crux_json_field_u64(j, "jobs", q->jobs);
		crux_json_field_u64(j, "net_jobs", q->net_jobs);
		crux_json_field_numf(j, "eval_util", SIM_NUM, q->eval_util);
		crux_json_field_numf(j, "ref_util", SIM_NUM, q->ref_util);
		crux_json_field_numf(j, "iter_err_p50", SIM_NUM, q->iter_err_p50);
		crux_json_field_numf(j, "iter_err_p90", SIM_NUM, q->iter_err_p90);
		crux_json_field_numf(j, "max_slowdown_eval", SIM_NUM, q->slow_eval_max);
		crux_json_field_numf(j, "max_slowdown_ref", SIM_NUM, q->slow_ref_max);
		crux_json_field_numf(j, "held_max_slowdown_eval", SIM_NUM, q->held_eval_max);
		crux_json_field_numf(j, "held_max_slowdown_ref", SIM_NUM, q->held_ref_max);
		crux_json_field_u64(j, "held_above_bound_eval", q->held_above_eval);
		crux_json_field_u64(j, "held_above_bound_ref", q->held_above_ref);
		crux_json_field_u64(j, "starved", q->starved);
		crux_json_field_u64(j, "truncated", q->truncated);
		crux_json_field_numf(j, "wall_s", SIM_NUM, q->wall_s);
		crux_json_end_obj(j);
	}
	crux_json_end_arr(j);
}

/* Per-job results as parallel arrays (compact for 5,000 jobs). */
static void write_job_arrays(struct crux_json *j, const struct crux_sim_result *r)
{
	crux_json_key(j, "job_id");
	crux_json_arr(j);
	for (size_t i = 0; i < r->n_jobs; i++)
		crux_json_u64(j, r->jobs[i].id);
	crux_json_end_arr(j);
	crux_json_key(j, "job_gpus");
	crux_json_arr(j);
	for (size_t i = 0; i < r->n_jobs; i++)
		crux_json_u64(j, r->jobs[i].gpus);
	crux_json_end_arr(j);
	crux_json_key(j, "job_jct_s"); /* null: not finished */
	crux_json_arr(j);
	for (size_t i = 0; i < r->n_jobs; i++)
		crux_json_numf(j, "%.0f", r->jobs[i].finish_s >= 0 ? r->jobs[i].jct_s : NAN);
	crux_json_end_arr(j);
	crux_json_key(j, "job_slowdown"); /* null: no iteration done */
	crux_json_arr(j);
	for (size_t i = 0; i < r->n_jobs; i++)
		crux_json_numf(j, "%.4f",
			       r->jobs[i].iterations_done > 0 ? r->jobs[i].slowdown : NAN);
	crux_json_end_arr(j);
	crux_json_key(j, "job_level");
	crux_json_arr(j);
	for (size_t i = 0; i < r->n_jobs; i++)
		crux_json_i64(j, r->jobs[i].level);
	crux_json_end_arr(j);
}

static void write_run(struct crux_json *j, const struct crux_sim_result *r,
		      const struct crux_sim_result *base)
{
	double *sd;
	size_t m = sorted_slowdowns(r, &sd);
	double mj;
	size_t done;
	jct_stats(r, &mj, &done);
	crux_json_obj(j);
	crux_json_field_str(j, "policy", r->label);
	crux_json_field_str(j, "base_policy", crux_sim_policy_name(r->policy));
	crux_json_field_numf(j, "max_slowdown", "%g", r->max_slowdown);
	crux_json_field_numf(j, "promote_bound", "%g", r->promote_bound);
	crux_json_field_bool(j, "level_weights", r->weighted);
	crux_json_field_u64(j, "levels", r->levels);
	crux_json_field_u64(j, "total_gpus", r->total_gpus);
	crux_json_field_str(j, "eval_model", r->eval_model ? "all-at-once" : "phase-aware");
	crux_json_field_numf(j, "mean_gpu_util", SIM_NUM, r->mean_util);
	crux_json_field_numf(j, "gain_vs_first", SIM_NUM, r->mean_util / base->mean_util - 1);
	crux_json_field_numf(j, "mean_gpus_held", SIM_NUM, r->mean_alloc);
	crux_json_field_numf(j, "busy_of_held", SIM_NUM, r->busy_of_held);
	crux_json_field_numf(j, "window_s", SIM_NUM, r->window_s);
	crux_json_field_numf(j, "end_s", SIM_NUM, r->end_s);
	crux_json_field_u64(j, "jobs", r->n_jobs);
	crux_json_field_u64(j, "finished", r->finished);
	crux_json_field_u64(j, "events", r->events);
	crux_json_field_u64(j, "evaluations", r->evaluations);
	crux_json_field_numf(j, "wall_s", SIM_NUM, r->wall_s);
	crux_json_field_numf(j, "mean_jct_s", SIM_NUM, mj);
	crux_json_field_numf(j, "link_bytes", SIM_NUM, r->link_bytes);
	crux_json_field_numf(j, "job_bytes", SIM_NUM, r->job_bytes);
	crux_json_field_numf(j, "max_link_load", SIM_NUM, r->max_link_load);
	crux_json_field_u64(j, "preemptions", r->preemptions);
	crux_json_field_u64(j, "infeasible_jobs", r->infeasible_jobs);
	crux_json_key(j, "infeasible_job_ids");
	crux_json_arr(j);
	for (size_t i = 0; i < r->n_jobs; i++)
		if (r->jobs[i].infeasible)
			crux_json_u64(j, r->jobs[i].id);
	crux_json_end_arr(j);
	write_ref_snaps(j, r);
	crux_json_key(j, "slowdown");
	crux_json_obj(j);
	crux_json_field_numf(j, "p50", SIM_NUM, pct(sd, m, 0.5));
	crux_json_field_numf(j, "p90", SIM_NUM, pct(sd, m, 0.9));
	crux_json_field_numf(j, "p99", SIM_NUM, pct(sd, m, 0.99));
	crux_json_field_numf(j, "max", SIM_NUM, m ? sd[m - 1] : NAN);
	crux_json_key(j, "cdf"); /* 101 quantiles are enough to redraw the CDF */
	crux_json_arr(j);
	for (int q = 0; q <= 100; q++)
		crux_json_numf(j, SIM_NUM, pct(sd, m, q / 100.0));
	crux_json_end_arr(j);
	crux_json_end_obj(j);
	free(sd);
	crux_json_field_numf(j, "bin_s", SIM_NUM, r->bin_s);
	crux_json_key(j, "util_series");
	crux_json_arr(j);
	for (size_t i = 0; i < r->n_bins; i++)
		crux_json_numf(j, SIM_NUM, r->util[i]);
	crux_json_end_arr(j);
	write_job_arrays(j, r);
	crux_json_end_obj(j);
}

static int is_baseline(const struct crux_sim_result *r)
{
	return r->policy == CRUX_SIM_ECMP || r->policy == CRUX_SIM_SINCRONIA ||
	       r->policy == CRUX_SIM_TACCL || r->policy == CRUX_SIM_CASSINI ||
	       r->policy == CRUX_SIM_SINCRONIA_LCP || r->policy == CRUX_SIM_CASSINI_LCP;
}

/*
 * The fairness guard's goal per guarded run: worst slowdown within the bound,
 * and the share of unguarded Crux-full's utilisation gain over the best
 * baseline (of this run set) that it keeps.
 */
static void write_guard_summary(struct crux_json *j, const struct crux_sim_result *const *r,
				size_t n)
{
	const struct crux_sim_result *best = NULL, *full = NULL;

	for (size_t i = 0; i < n; i++) {
		if (is_baseline(r[i]) && (!best || r[i]->mean_util > best->mean_util))
			best = r[i];
		if (r[i]->policy == CRUX_SIM_CRUX_FULL && !(r[i]->max_slowdown > 0) &&
		    !(r[i]->promote_bound > 0) && !r[i]->weighted)
			full = r[i];
	}
	crux_json_key(j, "guard");
	crux_json_obj(j);
	crux_json_field_str(j, "best_baseline", best ? best->label : "");
	crux_json_field_bool(j, "crux_full", full != NULL);
	crux_json_key(j, "runs");
	crux_json_arr(j);
	for (size_t i = 0; i < n; i++) {
		double *sd;
		size_t m;

		double bound = r[i]->max_slowdown > 0 ? r[i]->max_slowdown : r[i]->promote_bound;

		if (!(bound > 0) && !r[i]->weighted)
			continue;
		m = sorted_slowdowns(r[i], &sd);
		double worst = m ? sd[m - 1] : NAN;
		double kept = NAN;

		if (best && full && full->mean_util > best->mean_util)
			kept = (r[i]->mean_util - best->mean_util) /
			       (full->mean_util - best->mean_util);
		crux_json_obj(j);
		crux_json_field_str(j, "policy", r[i]->label);
		crux_json_field_numf(j, "max_slowdown", "%g", bound);
		crux_json_field_numf(j, "worst", SIM_NUM, worst);
		crux_json_field_numf(j, "p99", SIM_NUM, pct(sd, m, 0.99));
		crux_json_field_numf(j, "util", SIM_NUM, r[i]->mean_util);
		crux_json_field_bool(j, "within_bound", bound > 0 && worst <= bound * (1 + 1e-9));
		crux_json_field_numf(j, "gain_kept", SIM_NUM, kept);
		crux_json_end_obj(j);
		free(sd);
	}
	crux_json_end_arr(j);
	crux_json_end_obj(j);
}

crux_status_t crux_sim_write_json(const char *path, const char *experiment,
				  const struct crux_sim_result *const *r, size_t n,
				  void (*extra)(struct crux_json *j, const void *arg),
				  const void *extra_arg)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return CRUX_ERR_IO;
	struct crux_json j;
	crux_json_init_lines(&j, f);
	crux_json_obj(&j);
	crux_json_field_str(&j, "experiment", experiment);
	if (extra)
		extra(&j, extra_arg);
	write_guard_summary(&j, r, n);
	crux_json_key(&j, "runs");
	crux_json_arr(&j);
	for (size_t i = 0; i < n; i++)
		write_run(&j, r[i], r[0]);
	crux_json_end_arr(&j);
	crux_json_end_obj(&j);
	crux_json_done(&j);
	int bad = ferror(f);
	if (fclose(f) != 0 || bad)
		return CRUX_ERR_IO;
	return CRUX_OK;
}

crux_status_t crux_sim_write_jobs_csv(const char *path, const struct crux_sim_result *r)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return CRUX_ERR_IO;
	fprintf(f, "id,model,gpus,hosts,arrival_s,start_s,finish_s,jct_s,iterations,"
		   "iterations_done,iso_iter_s,mean_iter_s,slowdown,level\n");
	for (size_t i = 0; i < r->n_jobs; i++) {
		const struct crux_sim_job_result *j = &r->jobs[i];
		fprintf(f, "%u,%s,%u,%u,%.3f,%.3f,%.3f,%.3f,%llu,%.1f,%.6f,%.6f,%.4f,%d\n", j->id,
			j->model, j->gpus, j->n_hosts, j->arrival_s, j->start_s, j->finish_s,
			j->finish_s >= 0 ? j->jct_s : -1, (unsigned long long)j->iterations,
			j->iterations_done, j->iso_iter_s, j->mean_iter_s, j->slowdown, j->level);
	}
	int bad = ferror(f);
	if (fclose(f) != 0 || bad)
		return CRUX_ERR_IO;
	return CRUX_OK;
}

/* Write one data file per run under 'dir'; returns 0 on success. */
static int write_plot_data(const char *dir, const struct crux_sim_result *const *r, size_t n)
{
	char path[4096];
	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/util%zu.dat", dir, i);
		FILE *f = fopen(path, "w");
		if (!f)
			return -1;
		for (size_t b = 0; b < r[i]->n_bins; b++)
			fprintf(f, "%.6f %.6f\n", (b + 0.5) * r[i]->bin_s / 86400,
				100 * r[i]->util[b]);
		if (fclose(f) != 0)
			return -1;
		snprintf(path, sizeof(path), "%s/cdf%zu.dat", dir, i);
		f = fopen(path, "w");
		if (!f)
			return -1;
		double *sd;
		size_t m = sorted_slowdowns(r[i], &sd);
		for (size_t k = 0; k < m; k++)
			fprintf(f, "%.6f %.6f\n", sd[k], (double)(k + 1) / (double)m);
		free(sd);
		if (fclose(f) != 0)
			return -1;
	}
	/* One row per run: label, utilisation %, p99 and worst slowdown. */
	snprintf(path, sizeof(path), "%s/guard.dat", dir);
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	for (size_t i = 0; i < n; i++) {
		double *sd;
		size_t m = sorted_slowdowns(r[i], &sd);

		fprintf(f, "\"%s\" %.4f %.4f %.4f\n", r[i]->label, 100 * r[i]->mean_util,
			pct(sd, m, 0.99), m ? sd[m - 1] : 1.0);
		free(sd);
	}
	return fclose(f) != 0 ? -1 : 0;
}

crux_status_t crux_sim_plot(const char *png_prefix, const char *title,
			    const struct crux_sim_result *const *r, size_t n, char *err,
			    size_t errlen)
{
	char dir[] = "/tmp/crux-sim-plot.XXXXXX";
	char path[4096];
	crux_status_t st = CRUX_OK;

	if (!mkdtemp(dir)) {
		snprintf(err, errlen, "cannot create a temporary directory for plot data: %s",
			 strerror(errno));
		return CRUX_ERR_IO;
	}
	if (write_plot_data(dir, r, n) != 0) {
		snprintf(err, errlen, "cannot write plot data under %s", dir);
		st = CRUX_ERR_IO;
		goto cleanup;
	}
	snprintf(path, sizeof(path), "%s/plot.gp", dir);
	FILE *g = fopen(path, "w");
	if (!g) {
		st = CRUX_ERR_IO;
		goto cleanup;
	}
	fprintf(g, "set terminal png size 1100,560 font ',11' noenhanced\nset key outside right\n"
		   "set grid\n");
	fprintf(g,
		"set output '%s-util.png'\nset title '%s: cluster GPU utilisation'\n"
		"set xlabel 'time (days)'\nset ylabel 'GPU utilisation (%%)'\n"
		"set yrange [0:100]\nplot ",
		png_prefix, title);
	for (size_t i = 0; i < n; i++)
		fprintf(g, "%s'%s/util%zu.dat' using 1:2 with lines lw 2 title '%s (mean %.1f%%)'",
			i ? ", " : "", dir, i, r[i]->label, 100 * r[i]->mean_util);
	fprintf(g,
		"\nset output '%s-slowdown.png'\nset title '%s: job slowdown (CDF)'\n"
		"set xlabel 'slowdown (iteration time / isolated)'\nset ylabel 'fraction of "
		"jobs'\nset yrange [0:1]\nset logscale x\nplot ",
		png_prefix, title);
	for (size_t i = 0; i < n; i++)
		fprintf(g, "%s'%s/cdf%zu.dat' using 1:2 with steps lw 2 title '%s'", i ? ", " : "",
			dir, i, r[i]->label);
	/* Per run: utilisation, and p99 / worst slowdown (the fairness guard's view). */
	fprintf(g,
		"\nset output '%s-guard.png'\nunset logscale\nset multiplot layout 1,2 title "
		"'%s: utilisation and slowdown per policy'\nset style data histogram\n"
		"set style histogram clustered gap 1\nset style fill solid 0.8 border -1\n"
		"set xtics rotate by -40 left\nset key inside top right\nset yrange [0:*]\n"
		"set xlabel ''\nset ylabel 'GPU utilisation (%%)'\nset title 'utilisation'\n"
		"plot '%s/guard.dat' using 2:xtic(1) title 'mean utilisation'\n"
		"set logscale y\nset yrange [1:*]\nset ylabel 'slowdown (log)'\n"
		"set title 'slowdown: p99 and worst job'\n"
		"plot '%s/guard.dat' using 3:xtic(1) title 'p99', '' using 4 title 'worst'\n"
		"unset multiplot\n",
		png_prefix, title, dir, dir);
	if (fclose(g) != 0) {
		st = CRUX_ERR_IO;
		goto cleanup;
	}
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "gnuplot '%s' 2>&1", path);
	FILE *p = popen(cmd, "r");
	if (!p) {
		snprintf(err, errlen, "cannot run gnuplot: %s", strerror(errno));
		st = CRUX_ERR_IO;
		goto cleanup;
	}
	char line[512];
	size_t used = 0;
	err[0] = '\0';
	while (fgets(line, sizeof(line), p)) {
		size_t l = strlen(line);
		if (used + l < errlen) {
			memcpy(err + used, line, l + 1);
			used += l;
		}
	}
	int rc = pclose(p);
	if (rc != 0) {
		if (!used)
			snprintf(err, errlen,
				 "gnuplot failed (exit %d): is gnuplot installed "
				 "(apt-get install gnuplot-nox)?",
				 WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
		st = CRUX_ERR_IO;
	}
cleanup:
	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/util%zu.dat", dir, i);
		unlink(path);
		snprintf(path, sizeof(path), "%s/cdf%zu.dat", dir, i);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/guard.dat", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/plot.gp", dir);
	unlink(path);
	rmdir(dir);
	return st;
}
