/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Validation against the optimum (the paper's section 4.4, reproduced).
 *
 * Random small cases: two-layer Clos with 2-4 ToRs and 2 aggregation
 * switches, up to 20 hosts of 8 GPUs, 5 jobs (2-4 hosts each, ring
 * all-reduce), 3 levels. The optimum is found by enumeration under the fluid
 * evaluator over every level assignment (3^5) and every path choice. To keep
 * the enumeration tractable a path choice is made per job, not per flow: in
 * this Clos every cross-ToR path is "via aggregation a", so a job picks a in
 * {0, 1} for all its cross-ToR flows (2^5 choices; 7,776 evaluations).
 *
 * Each mechanism is scored with the other two at their optimum:
 *  - paths:       the mechanism's paths, best level assignment;
 *  - priorities:  best paths, the mechanism's priority order on those paths,
 *                 best 3-level assignment that respects the order;
 *  - compression: best paths, best priority order (a permutation on 5 distinct
 *                 levels, enumerated), compressed to 3 levels by the mechanism.
 *
 * Two reference rows explain the gaps: priority/fluid-pair (the correction
 * factor's pair comparison redone in the evaluator's steady-state model) and
 * compression/order-bound (the best valid 3-level compression of that fixed
 * order, i.e. what any compression mechanism can reach in this protocol).
 *
 * usage: sched-optimality [CASES] [OUT.json] [PLOT.png]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "crux/json.h"
#include "crux/sched.h"

#define NJ     5
#define K3     3
#define NLVL   243 /* 3^5 */
#define NCOMBO 32  /* 2^5 */
#define NPERM  120

enum mech {
	PS_CRUX,
	PS_TACCL,
	PS_ECMP,
	PA_CRUX,
	PA_SINCRONIA,
	PA_VARYS,
	CP_CRUX,
	CP_SINCRONIA,
	CP_VARYS,
	PA_INTENSITY,
	PA_FLUID,
	CP_BOUND,
	N_MECH
};

static const char *const mech_name[N_MECH] = {
    "paths/crux",	   "paths/taccl",
    "paths/ecmp",	   "priority/crux",
    "priority/sincronia",  "priority/varys",
    "compression/crux",	   "compression/sincronia",
    "compression/varys",   "priority/intensity-only",
    "priority/fluid-pair", "compression/order-bound",
};

struct ctx {
	struct crux_sched_topo *t;
	struct crux_sched_jobs js;
	struct crux_sched_schedule *s3, *s5;
	struct crux_sched_eval *ev;
	double U[NCOMBO][NLVL];
	uint64_t mask[NCOMBO][NJ];
	int perm[NPERM][NJ];
};

static int die(const char *what)
{
	fprintf(stderr, "sched-optimality: %s\n", what);
	exit(1);
}

static void set_combo(struct ctx *c, struct crux_sched_schedule *s, int combo)
{
	for (int j = 0; j < NJ; j++) {
		const struct crux_sched_job *jb = &c->js.v[j];

		for (int f = 0; f < jb->n_flows; f++) {
			struct crux_sched_path_set ps;

			if (crux_sched_topo_paths(c->t, jb->flows[f].src, jb->flows[f].dst, &ps))
				die("no path");
			s->d[j].path[f] = ps.n_paths > 1 ? (combo >> j) & 1 : 0;
		}
	}
}

static void set_levels(struct crux_sched_schedule *s, int code)
{
	for (int j = 0; j < NJ; j++) {
		s->d[j].level = code % K3;
		code /= K3;
	}
}

static double util(struct ctx *c, struct crux_sched_schedule *s)
{
	double u;

	if (crux_sched_evaluate(c->ev, c->t, c->js.v, c->js.n, s, NULL, &u))
		die("evaluate failed");
	return u;
}

static uint64_t job_mask(struct ctx *c, const struct crux_sched_schedule *s, int j)
{
	uint64_t m = 0;
	const struct crux_sched_job *jb = &c->js.v[j];

	for (int f = 0; f < jb->n_flows; f++) {
		struct crux_sched_path_set ps;

		crux_sched_topo_paths(c->t, jb->flows[f].src, jb->flows[f].dst, &ps);
		int p = s->d[j].path[f] < 0 ? 0 : s->d[j].path[f];

		for (int k = ps.off[p]; k < ps.off[p + 1]; k++)
			m |= 1ULL << ps.links[k];
	}
	return m;
}

/* Best utilisation over level assignments for fixed paths (in s3). */
static double best_levels(struct ctx *c)
{
	double best = 0;

	for (int code = 0; code < NLVL; code++) {
		set_levels(c->s3, code);
		double u = util(c, c->s3);

		if (u > best)
			best = u;
	}
	return best;
}

/* Best level assignment in the table row that respects the ranks in s. */
static double best_valid(struct ctx *c, int combo, const struct crux_sched_schedule *s)
{
	double best = 0;

	for (int code = 0; code < NLVL; code++) {
		int lv[NJ], x = code, ok = 1;

		for (int j = 0; j < NJ; j++) {
			lv[j] = x % K3;
			x /= K3;
		}
		for (int a = 0; a < NJ && ok; a++)
			for (int b = 0; b < NJ && ok; b++)
				if (a != b && s->d[a].rank < s->d[b].rank &&
				    (c->mask[combo][a] & c->mask[combo][b]) && lv[a] < lv[b])
					ok = 0;
		if (ok && c->U[combo][code] > best)
			best = c->U[combo][code];
	}
	return best;
}

/*
 * Ablation: the correction factor's two-job comparison done in the
 * evaluator's own model instead of the time simulation. On one link of rate
 * 1 the first job runs alone (tau = t) and the second gets what the first's
 * average load leaves, for the whole iteration. D = link share first minus
 * share second, k_j = D_j / D_r against the same reference. It gives k = 1 in
 * the paper's Example 1 (no phase effect), so the library cannot use it.
 */
static void fluid_shares(const struct crux_sched_job *a, double ta, const struct crux_sched_job *b,
			 double tb, double *fa, double *fb)
{
	double Ta = fmax(a->compute, (1 - a->overlap) * a->compute + ta);
	double f = Ta > 0 ? ta / Ta : 0, res = fmax(1 - f, 1e-6);
	double Tb = fmax(b->compute, (1 - b->overlap) * b->compute + tb / res);

	*fa = f;
	*fb = Tb > 0 ? tb / Tb : 0;
}

static void prio_fluid_pair(struct ctx *c, struct crux_sched_schedule *s)
{
	int ref = -1;
	double most = -1;

	for (int i = 0; i < NJ; i++) {
		double tot = 0;

		for (int f = 0; f < c->js.v[i].n_flows; f++)
			tot += c->js.v[i].flows[f].bytes;
		if (s->d[i].comm_time > 0 && tot > most) {
			most = tot;
			ref = i;
		}
	}
	for (int i = 0; i < NJ; i++) {
		double k = 1, jf, rs, rf, js;

		if (ref >= 0 && i != ref && s->d[i].comm_time > 0) {
			fluid_shares(&c->js.v[i], s->d[i].comm_time, &c->js.v[ref],
				     s->d[ref].comm_time, &jf, &rs);
			fluid_shares(&c->js.v[ref], s->d[ref].comm_time, &c->js.v[i],
				     s->d[i].comm_time, &rf, &js);
			k = rf - rs > 1e-9 ? (jf - js) / (rf - rs) : jf - js > 1e-9 ? 100 : 1;
			k = fmin(fmax(k, 0), 100);
		}
		s->d[i].priority = k * s->d[i].intensity;
	}
}

static void gen_case(struct ctx *c, uint64_t seed)
{
	const char *e = crux_bench_small_case(seed, NJ, &c->t, &c->js);

	if (e)
		die(e);
	if (crux_sched_schedule_new(c->js.v, c->js.n, K3, &c->s3) ||
	    crux_sched_schedule_new(c->js.v, c->js.n, 5, &c->s5))
		die("out of memory");
}

static void free_case(struct ctx *c)
{
	crux_sched_schedule_free(c->s3);
	crux_sched_schedule_free(c->s5);
	crux_sched_jobs_free(&c->js);
	crux_sched_topo_free(c->t);
}

static void perms(struct ctx *c)
{
	int a[NJ] = {0, 1, 2, 3, 4}, n = 0;

	/* Heap-free lexicographic enumeration. */
	for (;;) {
		memcpy(c->perm[n++], a, sizeof(a));
		int i = NJ - 2;

		while (i >= 0 && a[i] > a[i + 1])
			i--;
		if (i < 0)
			break;
		int j = NJ - 1;

		while (a[j] < a[i])
			j--;
		int tmp = a[i];

		a[i] = a[j];
		a[j] = tmp;
		for (int l = i + 1, r = NJ - 1; l < r; l++, r--) {
			tmp = a[l];
			a[l] = a[r];
			a[r] = tmp;
		}
	}
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int cases = argc > 1 ? atoi(argv[1]) : 1500;
	const char *out = argc > 2 ? argv[2] : "bench/results/sched-optimality.json";
	const char *png = argc > 3 ? argv[3] : "bench/results/sched-optimality.png";
	static struct ctx c;
	double *score[N_MECH];
	struct crux_sched_params p;
	int above = 0;

	if (cases < 1)
		die("CASES must be >= 1");
	for (int m = 0; m < N_MECH; m++)
		if (!(score[m] = calloc((size_t)cases, sizeof(double))))
			die("out of memory");
	if (crux_sched_eval_new(&c.ev))
		die("out of memory");
	perms(&c);
	crux_sched_params_default(&p);
	p.levels = K3;
	for (int cs = 0; cs < cases; cs++) {
		gen_case(&c, 0xc0ffee + (uint64_t)cs * 7919);
		p.seed = (uint64_t)cs + 1;
		/* Table of every (paths, levels). */
		double opt = 0;

		for (int combo = 0; combo < NCOMBO; combo++) {
			set_combo(&c, c.s3, combo);
			for (int j = 0; j < NJ; j++)
				c.mask[combo][j] = job_mask(&c, c.s3, j);
			for (int code = 0; code < NLVL; code++) {
				set_levels(c.s3, code);
				c.U[combo][code] = util(&c, c.s3);
				if (c.U[combo][code] > opt)
					opt = c.U[combo][code];
			}
		}
		/* Paths. */
		static const enum crux_sched_policy ps_pol[3] = {CRUX_SCHED_CRUX_PS_PA,
								 CRUX_SCHED_TACCL, CRUX_SCHED_ECMP};
		for (int m = 0; m < 3; m++) {
			if (crux_sched_run(c.t, c.js.v, c.js.n, &p, ps_pol[m], c.s3))
				die("run failed");
			score[PS_CRUX + m][cs] = best_levels(&c);
		}
		/* Priorities: for each path choice, the mechanism's order. */
		double best_pa[5] = {0, 0, 0, 0, 0};

		for (int combo = 0; combo < NCOMBO; combo++) {
			set_combo(&c, c.s3, combo);
			if (crux_sched_intensity(c.t, c.js.v, c.js.n, c.s3))
				die("intensity failed");
			for (int m = 0; m < 5; m++) {
				crux_status_t st =
				    m == 0   ? crux_sched_correction(c.js.v, c.js.n, c.s3)
				    : m == 1 ? crux_sched_prio_sincronia(c.t, c.js.v, c.js.n, c.s3)
				    : m == 2 ? crux_sched_prio_varys(c.js.v, c.js.n, c.s3)
					     : CRUX_OK;

				if (st)
					die("priority failed");
				if (m == 3) /* ablation: P = I, no correction factor */
					for (int j = 0; j < NJ; j++)
						c.s3->d[j].priority = c.s3->d[j].intensity;
				if (m == 4)
					prio_fluid_pair(&c, c.s3);
				crux_sched_rank(c.s3);
				double u = best_valid(&c, combo, c.s3);

				if (u > best_pa[m])
					best_pa[m] = u;
			}
		}
		for (int m = 0; m < 3; m++)
			score[PA_CRUX + m][cs] = best_pa[m];
		score[PA_INTENSITY][cs] = best_pa[3];
		score[PA_FLUID][cs] = best_pa[4];
		/* Compression: for each path choice, the best order on 5 levels, compressed. */
		double best_cp[4] = {0, 0, 0, 0};

		for (int combo = 0; combo < NCOMBO; combo++) {
			int bp = 0;
			double bu = -1;

			set_combo(&c, c.s5, combo);
			for (int q = 0; q < NPERM; q++) {
				for (int r = 0; r < NJ; r++)
					c.s5->d[c.perm[q][r]].level = NJ - 1 - r;
				double u = util(&c, c.s5);

				if (u > bu) {
					bu = u;
					bp = q;
				}
			}
			set_combo(&c, c.s3, combo);
			if (crux_sched_intensity(c.t, c.js.v, c.js.n, c.s3))
				die("intensity failed");
			for (int r = 0; r < NJ; r++)
				c.s3->d[c.perm[bp][r]].priority = NJ - r;
			crux_sched_rank(c.s3);
			/* What any valid compression of this order can reach. */
			double ub = best_valid(&c, combo, c.s3);

			if (ub > best_cp[3])
				best_cp[3] = ub;
			for (int m = 0; m < 3; m++) {
				if (m == 0) {
					if (crux_sched_compress(c.t, c.js.v, c.js.n, &p, c.s3))
						die("compress failed");
				} else if (m == 1) {
					crux_sched_compress_rank(c.s3);
				} else {
					crux_sched_compress_balanced(c.s3);
				}
				double u = util(&c, c.s3);

				if (u > best_cp[m])
					best_cp[m] = u;
			}
		}
		for (int m = 0; m < 3; m++)
			score[CP_CRUX + m][cs] = best_cp[m];
		score[CP_BOUND][cs] = best_cp[3];
		/* Paths are chosen per flow by the mechanisms but enumerated per job:
		 * a mechanism can beat the enumeration; the optimum is then its value. */
		double found = opt;

		for (int m = 0; m < N_MECH; m++)
			found = fmax(found, score[m][cs]);
		if (found > opt * (1 + 1e-12))
			above++;
		for (int m = 0; m < N_MECH; m++)
			score[m][cs] /= found;
		free_case(&c);
		if ((cs + 1) % 100 == 0 || cs + 1 == cases)
			fprintf(stderr, "sched-optimality: %d/%d cases\n", cs + 1, cases);
	}
	/* Summary, JSON and plot. */
	FILE *jf = fopen(out, "w"), *df;
	char dat[512];

	if (!jf)
		die("cannot write the JSON file");
	snprintf(dat, sizeof(dat), "%s.dat.tmp", out);
	df = fopen(dat, "w");
	if (!df)
		die("cannot write the plot data");
	struct crux_json j;

	crux_json_init(&j, jf);
	crux_json_obj(&j);
	crux_json_key(&j, "benchmark");
	crux_json_str(&j, "sched-optimality");
	crux_json_key(&j, "cases");
	crux_json_i64(&j, cases);
	crux_json_key(&j, "jobs");
	crux_json_i64(&j, NJ);
	crux_json_key(&j, "levels");
	crux_json_i64(&j, K3);
	crux_bench_json_paper(&j);
	crux_json_key(&j, "cases_optimum_from_per_flow_paths");
	crux_json_i64(&j, above);
	crux_json_key(&j, "mechanisms");
	crux_json_obj(&j);
	printf("%-22s %8s %8s %8s %8s  (percent of optimum)\n", "mechanism", "mean", "p10", "p50",
	       "min");
	double mean[N_MECH];

	for (int m = 0; m < N_MECH; m++) {
		double *v = score[m], sum = 0;

		qsort(v, (size_t)cases, sizeof(double), cmp_dbl);
		for (int i = 0; i < cases; i++)
			sum += v[i];
		mean[m] = 100 * sum / cases;
		double p10 = 100 * v[(cases - 1) / 10], p50 = 100 * v[(cases - 1) / 2];

		printf("%-22s %8.2f %8.2f %8.2f %8.2f\n", mech_name[m], mean[m], p10, p50,
		       100 * v[0]);
		crux_json_key(&j, mech_name[m]);
		crux_json_obj(&j);
		crux_json_key(&j, "mean");
		crux_json_numf(&j, "%.4f", mean[m]);
		crux_json_key(&j, "p10");
		crux_json_numf(&j, "%.4f", p10);
		crux_json_key(&j, "p50");
		crux_json_numf(&j, "%.4f", p50);
		crux_json_key(&j, "min");
		crux_json_numf(&j, "%.4f", 100 * v[0]);
		crux_json_key(&j, "cdf");
		crux_json_arr(&j);
		for (int q = 0; q <= 100; q++) {
			int i = q == 100 ? cases - 1 : q * (cases - 1) / 100;

			crux_json_arr(&j);
			crux_json_numf(&j, "%.4f", 100 * v[i]);
			crux_json_numf(&j, "%.2f", q / 100.0);
			crux_json_end_arr(&j);
		}
		crux_json_end_arr(&j);
		crux_json_end_obj(&j);
	}
	crux_json_end_obj(&j);
	crux_json_end_obj(&j);
	crux_json_done(&j);
	fclose(jf);
	for (int i = 0; i < cases; i++) {
		fprintf(df, "%.6f", (i + 1.0) / cases);
		for (int m = 0; m < N_MECH; m++)
			fprintf(df, " %.4f", 100 * score[m][i]);
		fputc('\n', df);
	}
	fclose(df);
	printf("ratios (Crux mean / baseline mean): paths taccl %.4f ecmp %.4f; priority sincronia "
	       "%.4f "
	       "varys %.4f; compression sincronia %.4f varys %.4f\n",
	       mean[PS_CRUX] / mean[PS_TACCL], mean[PS_CRUX] / mean[PS_ECMP],
	       mean[PA_CRUX] / mean[PA_SINCRONIA], mean[PA_CRUX] / mean[PA_VARYS],
	       mean[CP_CRUX] / mean[CP_SINCRONIA], mean[CP_CRUX] / mean[CP_VARYS]);
	if (above)
		printf("note: in %d cases a per-flow path choice beat the per-job enumeration; the "
		       "optimum "
		       "there is that choice's value\n",
		       above);
	/* Plot the CDFs with gnuplot when it is installed. */
	FILE *gp = popen("gnuplot 2>/dev/null", "w");

	if (gp) {
		fprintf(gp,
			"set terminal pngcairo size 1200,420 font ',10'\nset output '%s'\n"
			"set multiplot layout 1,3\nset key top left\nset grid\n"
			"set xlabel 'percent of optimum'\nset ylabel 'CDF'\nset yrange [0:1]\n",
			png);
		static const char *const titles[3] = {"path selection", "priority assignment",
						      "compression"};

		for (int g = 0; g < 3; g++) {
			fprintf(gp, "set title '%s'\nplot ", titles[g]);
			for (int m = 0; m < 3; m++)
				fprintf(gp, "%s'%s' using %d:1 with lines lw 2 title '%s'",
					m ? ", " : "", dat, 2 + 3 * g + m, mech_name[3 * g + m]);
			fputc('\n', gp);
		}
		fprintf(gp, "unset multiplot\n");
		if (pclose(gp) != 0)
			fprintf(stderr, "sched-optimality: gnuplot failed; no plot\n");
	}
	remove(dat);
	for (int m = 0; m < N_MECH; m++)
		free(score[m]);
	crux_sched_eval_free(c.ev);
	return 0;
}
