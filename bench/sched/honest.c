/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The optimality bench, scored honestly (issue 26 item 4; the first protocol
 * is bench/sched/optimality.c).
 *
 * Cases as in sched-optimality (the paper's section 4.4): a two-layer Clos
 * with 2-4 ToRs and 2 aggregation switches, up to 20 hosts of 8 GPUs, 5 jobs
 * of 2-4 hosts (ring all-reduce), 3 levels. Differences:
 *  - the optimum enumerates paths per FLOW (each cross-ToR flow picks one of
 *    its 2 paths) when a case has at most FMAX such flows (default 10), x
 *    every level assignment (3^5); larger cases enumerate per job (every
 *    cross-ToR flow of a job on one aggregation switch) and are marked: where
 *    a mechanism beats that enumeration the denominator is the mechanism's
 *    value (a heuristic denominator), counted apart;
 *  - every priority and compression mechanism is scored at the optimum's own
 *    paths (not at the best of 32 path choices for it); Crux's compression is
 *    the library's (Max-K-Cut, then crux_sched_compress_refine), and
 *    Max-K-Cut alone is a row of its own;
 *  - calibration rows: a random priority order (mean of 5 seeded orders), the
 *    reversed Crux order, one level, ECMP paths;
 *  - beside "% of optimum", the share of the gap closed: (mechanism - floor)
 *    / (optimum - floor), the floor being the random order (priority), ECMP
 *    paths (paths) and one level (compression);
 *  - the first REFCASES cases are judged by the reference model too (per
 *    flow, 2 random phases): each mechanism's schedule against the best of
 *    the 243 level assignments at the optimum's paths, run in the reference.
 *
 * usage: sched-optimality-honest [CASES] [OUT.json] [FMAX] [REFCASES]
 *        sched-optimality-honest --paths-search [CASES] [OUT.json] [REFCASES]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cases.h"
#include "crux/json.h"
#include "crux/sched.h"
#include "crux/sched_ref.h"
#include "sched_int.h" /* crux_sched_evaluate_links: the enumeration's inner loop */

#define NJ	5
#define K3	3
#define NLVL	243 /* 3^5 */
#define NPERM	120
#define MAXF	64
#define NRANDOM 5

enum mech {
	PS_CRUX,
	PS_TACCL,
	PS_ECMP, /* calibration: the floor of the paths' gap */
	PA_CRUX, /* P = I, the library's default */
	PA_PAPER_K,
	PA_SINCRONIA,
	PA_VARYS,
	PA_RANDOM,    /* calibration: the floor of the priorities' gap */
	PA_REVERSED,  /* calibration */
	PA_MOVE,      /* P = I, then moves in the order the evaluator keeps */
	PA_EVAL_BEST, /* calibration: the order of the evaluator's best assignment */
	CP_CRUX,
	CP_SINCRONIA,
	CP_VARYS,
	CP_MAXKCUT,   /* Crux's compression without the evaluator's refinement */
	CP_BOUND,     /* the best valid compression of the best 5-level order */
	CP_ONE_LEVEL, /* calibration: the floor of the compressions' gap */
	N_MECH
};

static const char *const mech_name[N_MECH] = {
    "paths/crux",
    "paths/taccl",
    "paths/ecmp",
    "priority/crux (P = I)",
    "priority/paper-k",
    "priority/sincronia",
    "priority/varys",
    "priority/random",
    "priority/reversed",
    "priority/move-search",
    "priority/evaluator-best",
    "compression/crux",
    "compression/sincronia",
    "compression/varys",
    "compression/max-k-cut",
    "compression/order-bound",
    "compression/one-level",
};
/* The floor each row's gap is measured from. */
static const int mech_floor[N_MECH] = {
    PS_ECMP,	  PS_ECMP,	PS_ECMP,      PA_RANDOM,    PA_RANDOM,	  PA_RANDOM,
    PA_RANDOM,	  PA_RANDOM,	PA_RANDOM,    PA_RANDOM,    PA_RANDOM,	  CP_ONE_LEVEL,
    CP_ONE_LEVEL, CP_ONE_LEVEL, CP_ONE_LEVEL, CP_ONE_LEVEL, CP_ONE_LEVEL,
};

__attribute__((noreturn)) static void die(const char *what)
{
	fprintf(stderr, "sched-optimality-honest: %s\n", what);
	exit(1);
}

struct ctx {
	struct crux_sched_topo *t;
	struct crux_sched_jobs js;
	struct crux_sched_schedule *s3, *s5, *opt;
	struct crux_sched_eval *ev;
	int nf, fj[MAXF], ff[MAXF]; /* flows with two candidate paths: job, flow */
	double U[NLVL];		    /* every level assignment at the optimum's paths */
	uint64_t mask[NJ];	    /* links of each job at the optimum's paths */
	int perm[NPERM][NJ];
};

/* The case generator of sched-optimality (same seeds, same cases). */
static void gen_case(struct ctx *c, uint64_t seed)
{
	const char *e = crux_bench_small_case(seed, NJ, &c->t, &c->js);

	if (e)
		die(e);
	if (crux_sched_schedule_new(c->js.v, c->js.n, K3, &c->s3) ||
	    crux_sched_schedule_new(c->js.v, c->js.n, 5, &c->s5) ||
	    crux_sched_schedule_new(c->js.v, c->js.n, K3, &c->opt))
		die("out of memory");
	c->nf = 0;
	for (int j = 0; j < NJ; j++)
		for (int f = 0; f < c->js.v[j].n_flows; f++) {
			struct crux_sched_path_set ps;

			if (crux_sched_topo_paths(c->t, c->js.v[j].flows[f].src,
						  c->js.v[j].flows[f].dst, &ps))
				die("no path");
			if (ps.n_paths > 2)
				die("more than 2 paths");
			if (ps.n_paths == 2 && c->nf < MAXF) {
				c->fj[c->nf] = j;
				c->ff[c->nf++] = f;
			}
		}
}

static void free_case(struct ctx *c)
{
	crux_sched_schedule_free(c->s3);
	crux_sched_schedule_free(c->s5);
	crux_sched_schedule_free(c->opt);
	crux_sched_jobs_free(&c->js);
	crux_sched_topo_free(c->t);
}

static void set_levels(struct crux_sched_schedule *s, int code)
{
	for (int j = 0; j < NJ; j++) {
		s->d[j].level = code % K3;
		code /= K3;
	}
}

/* Paths: bit i of v picks flow i's path (per flow), or bit j job j's (per job). */
static void set_paths(struct ctx *c, struct crux_sched_schedule *s, uint64_t v, int per_job)
{
	for (int j = 0; j < NJ; j++)
		for (int f = 0; f < c->js.v[j].n_flows; f++)
			s->d[j].path[f] = 0;
	for (int i = 0; i < c->nf; i++)
		s->d[c->fj[i]].path[c->ff[i]] = (int)((v >> (per_job ? c->fj[i] : i)) & 1);
}

static void copy_paths(struct ctx *c, struct crux_sched_schedule *dst,
		       const struct crux_sched_schedule *src)
{
	for (int j = 0; j < NJ; j++)
		for (int f = 0; f < c->js.v[j].n_flows; f++)
			dst->d[j].path[f] = src->d[j].path[f];
}

/* Every level assignment on s's paths into U (may be NULL); the best. */
static double all_levels(struct ctx *c, struct crux_sched_schedule *s, double *U, int *best_code)
{
	struct job_links jl;
	double best = -1, u;

	if (crux_sched_job_links_build(c->t, c->js.v, c->js.n, s, &jl))
		die("links");
	for (int code = 0; code < NLVL; code++) {
		set_levels(s, code);
		if (crux_sched_evaluate_links(c->ev, c->t, c->js.v, c->js.n, s, &jl, code > 0, NULL,
					      &u))
			die("evaluate");
		if (U)
			U[code] = u;
		if (u > best) {
			best = u;
			if (best_code)
				*best_code = code;
		}
	}
	crux_sched_job_links_free(&jl);
	return best;
}

static double util(struct ctx *c, struct crux_sched_schedule *s)
{
	double u;

	if (crux_sched_evaluate(c->ev, c->t, c->js.v, c->js.n, s, NULL, &u))
		die("evaluate");
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

/* Best level assignment at the optimum's paths that respects s's ranks. */
static double best_valid(struct ctx *c, const struct crux_sched_schedule *s, int *code_out)
{
	double best = -1;

	for (int code = 0; code < NLVL; code++) {
		int lv[NJ], x = code, ok = 1;

		for (int j = 0; j < NJ; j++) {
			lv[j] = x % K3;
			x /= K3;
		}
		for (int a = 0; a < NJ && ok; a++)
			for (int b = 0; b < NJ && ok; b++)
				if (a != b && s->d[a].rank < s->d[b].rank &&
				    (c->mask[a] & c->mask[b]) && lv[a] < lv[b])
					ok = 0;
		if (ok && c->U[code] > best) {
			best = c->U[code];
			*code_out = code;
		}
	}
	return best;
}

/* Ranks from an order (ord[r]: the job at rank r). */
static void set_ranks(struct crux_sched_schedule *s, const int *ord)
{
	for (int r = 0; r < NJ; r++)
		s->d[ord[r]].rank = r;
}

/*
 * An order search the agent could afford: from P = I, move one job to
 * another place in the order where the best valid assignment improves in
 * the evaluator, until no move does (a swap of two jobs alone missed orders
 * that need a third to move with them). Leaves the ranks in s; returns the
 * best value, its code in *code_out.
 */
static double move_search(struct ctx *c, struct crux_sched_schedule *s, const double *prio,
			  int *code_out)
{
	int ord[NJ];
	double best;

	for (int j = 0; j < NJ; j++)
		s->d[j].priority = prio[j];
	crux_sched_rank(s);
	for (int j = 0; j < NJ; j++)
		ord[s->d[j].rank] = j;
	best = best_valid(c, s, code_out);
	for (int pass = 0, moved = 1; moved && pass < 4 * NJ; pass++) {
		moved = 0;
		for (int from = 0; from < NJ; from++)
			for (int to = 0; to < NJ; to++) {
				int o[NJ], code, x = 0;

				if (to == from)
					continue;
				for (int r = 0; r < NJ; r++)
					if (r != from)
						o[x++] = ord[r];
				memmove(o + to + 1, o + to, (size_t)(NJ - 1 - to) * sizeof(int));
				o[to] = ord[from];
				set_ranks(s, o);
				double u = best_valid(c, s, &code);

				if (u > best * (1 + 1e-9)) {
					best = u;
					*code_out = code;
					memcpy(ord, o, sizeof(o));
					moved = 1;
				}
			}
	}
	set_ranks(s, ord);
	for (int j = 0; j < NJ; j++)
		s->d[j].priority = NJ - s->d[j].rank;
	return best;
}

static void perms(struct ctx *c)
{
	int a[NJ] = {0, 1, 2, 3, 4}, n = 0;

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

static double ref_util(struct ctx *c, const struct crux_sched_schedule *s, uint64_t seed)
{
	struct crux_sched_ref_params rp;
	double u;

	crux_sched_ref_params_default(&rp);
	rp.phases = 2;
	rp.seed = seed;
	if (crux_sched_reference(c->t, c->js.v, c->js.n, s, &rp, NULL, &u, NULL))
		die("reference");
	return u;
}

/* The optimum into c->opt (paths and levels): every path choice per flow when
 * the case has at most flow_max two-path flows, else per job (*per_job = 1). */
static double optimum(struct ctx *c, int flow_max, int *per_job)
{
	int code, opt_code = 0;
	uint64_t nv, bestv = 0;
	double opt = -1;

	*per_job = c->nf > flow_max;
	nv = *per_job ? (1ULL << NJ) : (1ULL << c->nf);
	for (uint64_t v = 0; v < nv; v++) {
		set_paths(c, c->s3, v, *per_job);
		double u = all_levels(c, c->s3, NULL, &code);

		if (u > opt) {
			opt = u;
			bestv = v;
			opt_code = code;
		}
	}
	set_paths(c, c->opt, bestv, *per_job);
	set_levels(c->opt, opt_code);
	return opt;
}

/* The reference's best of the 243 level assignments at the optimum's paths. */
static double ref_best_at_opt(struct ctx *c, uint64_t seed)
{
	double rbest = 0;

	copy_paths(c, c->s3, c->opt);
	for (int cd = 0; cd < NLVL; cd++) {
		set_levels(c->s3, cd);
		rbest = fmax(rbest, ref_util(c, c->s3, seed));
	}
	return rbest;
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/*
 * --paths-search: how far a search over paths goes beyond Crux's greedy
 * selection (the paths row closes about 70 % of the ECMP -> optimum gap).
 * From Crux's paths, the planner's search (crux_sched_paths_search): flips of
 * two-path flows, one at a time (search1) or one or two at a time (search2),
 * first improvement, each candidate scored as the planner scores it: by
 * default Max-K-Cut's levels on those paths, the refinement once at the end;
 * -full: Crux-full's levels for every candidate (P = I, Max-K-Cut, the
 * evaluator's refinement; the twentieth round's flip1 / flip2 rows). Every row is then judged as
 * the paths row is: the best of the 243 level assignments on its paths, run in the reference too.
 */
enum { PX_ECMP, PX_CRUX, PX_SEARCH1, PX_SEARCH2, PX_SEARCH1_FULL, PX_SEARCH2_FULL, N_PX };
static const char *const px_name[N_PX] = {"paths/ecmp",		"paths/crux",
					  "paths/search1",	"paths/search2",
					  "paths/search1-full", "paths/search2-full"};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Mean of v[0..n) in %, over the cases marked in only (NULL: all); NAN if none. */
static double subset_mean(const double *v, int n, const char *only)
{
	double sum = 0;
	int k = 0;

	for (int i = 0; i < n; i++)
		if (!only || only[i]) {
			sum += v[i];
			k++;
		}
	return k ? 100 * sum / k : NAN;
}

/* Share of the floor -> 100 % gap a mean closes. */
static double gap_of(double mean, double floor)
{
	return 100 - floor > 1e-9 ? (mean - floor) / (100 - floor) : NAN;
}

static int paths_search(int argc, char **argv)
{
	int cases = argc > 1 ? atoi(argv[1]) : 40;
	const char *out = argc > 2 ? argv[2] : "bench/results/sched-paths-search.json";
	int refcases = argc > 3 ? atoi(argv[3]) : cases, nref = 0, per_job_cases = 0, heuristic = 0;
	int first = argc > 4 ? atoi(argv[4]) : 0; /* held-out cases: from this one on */
	static struct ctx c;
	struct crux_sched_schedule *keep[N_PX] = {0};
	double *score[N_PX], *rscore[N_PX], secs[N_PX] = {0};
	char *exact;
	long evals[N_PX] = {0};
	struct crux_sched_params p;

	if (cases < 1 || refcases < 0 || first < 0)
		die("usage: --paths-search [CASES >= 1] [OUT.json] [REFCASES >= 0] [FIRST >= 0]");
	for (int m = 0; m < N_PX; m++)
		if (!(score[m] = calloc((size_t)cases, sizeof(double))) ||
		    !(rscore[m] = calloc((size_t)cases, sizeof(double))))
			die("out of memory");
	if (!(exact = calloc((size_t)cases, 1)) || crux_sched_eval_new(&c.ev))
		die("out of memory");
	crux_sched_params_default(&p);
	p.levels = K3;
	for (int cs = 0; cs < cases; cs++) {
		int per_job, code;

		uint64_t k = (uint64_t)first + (uint64_t)cs;

		gen_case(&c, 0xc0ffee + k * 7919);
		p.seed = k + 1;
		double opt = optimum(&c, 10, &per_job), found = opt;

		per_job_cases += per_job;
		exact[cs] = !per_job;
		for (int m = 0; m < N_PX; m++) {
			double t0 = now_s();

			crux_sched_schedule_free(keep[m]);
			/* The planner's own search (crux_sched_paths_search). */
			p.paths_search = m == PX_SEARCH2 || m == PX_SEARCH2_FULL   ? 2
					 : m == PX_SEARCH1 || m == PX_SEARCH1_FULL ? 1
										   : 0;
			p.paths_search_full = m == PX_SEARCH1_FULL || m == PX_SEARCH2_FULL;
			if (crux_sched_schedule_new(c.js.v, c.js.n, K3, &keep[m]) ||
			    crux_sched_run(c.t, c.js.v, c.js.n, &p,
					   m == PX_ECMP	    ? CRUX_SCHED_ECMP
					   : p.paths_search ? CRUX_SCHED_CRUX_FULL
							    : CRUX_SCHED_CRUX_PS_PA,
					   c.s3))
				die("run failed");
			secs[m] += now_s() - t0;
			evals[m] += c.s3->paths_evals;
			score[m][cs] = all_levels(&c, c.s3, NULL, &code);
			set_levels(c.s3, code);
			crux_sched_schedule_copy(keep[m], c.s3);
			found = fmax(found, score[m][cs]);
		}
		heuristic += found > opt * (1 + 1e-12);
		for (int m = 0; m < N_PX; m++)
			score[m][cs] /= found;
		if (cs < refcases) {
			double rbest = ref_best_at_opt(&c, k + 1);

			for (int m = 0; m < N_PX; m++) {
				rscore[m][nref] = ref_util(&c, keep[m], k + 1);
				rbest = fmax(rbest, rscore[m][nref]);
			}
			for (int m = 0; m < N_PX; m++)
				rscore[m][nref] /= rbest;
			nref++;
		}
		free_case(&c);
		fprintf(stderr, "sched-optimality-honest --paths-search: %d/%d cases\n", cs + 1,
			cases);
	}
	FILE *jf = fopen(out, "w");

	if (!jf)
		die("cannot write the JSON file");
	struct crux_json j;

	crux_json_init(&j, jf);
	crux_json_obj(&j);
	crux_json_field_str(&j, "benchmark", "sched-optimality-honest --paths-search");
	crux_json_field_i64(&j, "cases", cases);
	crux_json_field_i64(&j, "first_case", first);
	crux_json_field_i64(&j, "cases_per_job_optimum", per_job_cases);
	crux_json_field_i64(&j, "cases_heuristic_denominator", heuristic);
	crux_json_field_i64(&j, "reference_cases", nref);
	crux_json_field_str(&j, "score",
			    "best of 243 level assignments on the row's paths (evaluator), "
			    "over the optimum (per flow; per job in cases of more than 10 "
			    "two-path flows, or the best row where one beats it); reference: "
			    "that schedule over the "
			    "reference's best at the optimum's paths");
	crux_json_field_str(&j, "floor", px_name[PX_ECMP]);
	crux_json_key(&j, "rows");
	crux_json_obj(&j);
	printf("%d cases (%d with a per-job optimum; a row beat it, a heuristic denominator, in "
	       "%d), reference on %d; gap_exact: the per-flow-optimum cases only\n",
	       cases, per_job_cases, heuristic, nref);
	printf("%-18s %7s %8s %9s | %7s %8s %9s | %7s %7s\n", "row", "mean%", "gap_clsd",
	       "gap_exact", "ref%", "gap_clsd", "gap_exact", "s/case", "evals");
	double mean[N_PX], rmean[N_PX], xmean[N_PX], xrmean[N_PX];

	for (int m = 0; m < N_PX; m++) {
		mean[m] = subset_mean(score[m], cases, NULL);
		rmean[m] = subset_mean(rscore[m], nref, NULL);
		xmean[m] = subset_mean(score[m], cases, exact);
		xrmean[m] = subset_mean(rscore[m], nref, exact);
	}
	for (int m = 0; m < N_PX; m++) {
		double gap = gap_of(mean[m], mean[PX_ECMP]),
		       rgap = gap_of(rmean[m], rmean[PX_ECMP]);
		double xgap = gap_of(xmean[m], xmean[PX_ECMP]);
		double xrgap = gap_of(xrmean[m], xrmean[PX_ECMP]);

		printf("%-18s %7.2f %7.1f%% %8.1f%% | %7.2f %7.1f%% %8.1f%% | %7.3f %7.1f\n",
		       px_name[m], mean[m], 100 * gap, 100 * xgap, rmean[m], 100 * rgap,
		       100 * xrgap, secs[m] / cases, (double)evals[m] / cases);
		crux_json_key(&j, px_name[m]);
		crux_json_obj(&j);
		crux_json_field_numf(&j, "mean", "%.4f", mean[m]);
		crux_json_field_numf(&j, "gap_closed", "%.4f", isfinite(gap) ? gap : -1);
		crux_json_field_numf(&j, "ref_mean", "%.4f", isfinite(rmean[m]) ? rmean[m] : -1);
		crux_json_field_numf(&j, "ref_gap_closed", "%.4f", isfinite(rgap) ? rgap : -1);
		crux_json_field_numf(&j, "exact_gap_closed", "%.4f", isfinite(xgap) ? xgap : -1);
		crux_json_field_numf(&j, "exact_ref_gap_closed", "%.4f",
				     isfinite(xrgap) ? xrgap : -1);
		crux_json_field_numf(&j, "seconds_per_case", "%.4f", secs[m] / cases);
		crux_json_field_numf(&j, "evaluations_per_case", "%.1f", (double)evals[m] / cases);
		crux_json_end_obj(&j);
	}
	crux_json_end_obj(&j);
	crux_json_end_obj(&j);
	crux_json_done(&j);
	fclose(jf);
	for (int m = 0; m < N_PX; m++) {
		crux_sched_schedule_free(keep[m]);
		free(score[m]);
		free(rscore[m]);
	}
	free(exact);
	crux_sched_eval_free(c.ev);
	return 0;
}

int main(int argc, char **argv)
{
	int cases = argc > 1 ? atoi(argv[1]) : 200;
	const char *out = argc > 2 ? argv[2] : "bench/results/sched-optimality-honest.json";
	int flow_max = argc > 3 ? atoi(argv[3]) : 10;
	int refcases = argc > 4 ? atoi(argv[4]) : 40;
	static struct ctx c;
	static struct crux_sched_schedule *keep[N_MECH];
	double *score[N_MECH], *rscore[N_MECH];
	int exact_cases = 0, heuristic = 0, per_job_cases = 0, nref = 0;
	struct crux_sched_params p;

	if (argc > 1 && !strcmp(argv[1], "--paths-search"))
		return paths_search(argc - 1, argv + 1);
	if (cases < 1 || flow_max < 0 || flow_max > 20 || refcases < 0)
		die("usage: [CASES >= 1] [OUT.json] [FMAX 0..20] [REFCASES >= 0]");
	for (int m = 0; m < N_MECH; m++)
		if (!(score[m] = calloc((size_t)cases, sizeof(double))) ||
		    !(rscore[m] = calloc((size_t)cases, sizeof(double))))
			die("out of memory");
	if (crux_sched_eval_new(&c.ev))
		die("out of memory");
	perms(&c);
	crux_sched_params_default(&p);
	p.levels = K3;
	for (int cs = 0; cs < cases; cs++) {
		gen_case(&c, 0xc0ffee + (uint64_t)cs * 7919);
		p.seed = (uint64_t)cs + 1;
		int per_job, code;
		double opt = optimum(&c, flow_max, &per_job);

		exact_cases += !per_job;
		per_job_cases += per_job;
		/* The table at the optimum's paths. */
		copy_paths(&c, c.s3, c.opt);
		all_levels(&c, c.s3, c.U, &code);
		int eval_best = code;
		for (int j = 0; j < NJ; j++)
			c.mask[j] = job_mask(&c, c.opt, j);
		for (int m = 0; m < N_MECH; m++) {
			crux_sched_schedule_free(keep[m]);
			if (crux_sched_schedule_new(c.js.v, c.js.n, K3, &keep[m]))
				die("out of memory");
		}
		/* Paths: the mechanism's, with the best levels on them. */
		static const enum crux_sched_policy ps_pol[3] = {CRUX_SCHED_CRUX_PS_PA,
								 CRUX_SCHED_TACCL, CRUX_SCHED_ECMP};
		for (int m = 0; m < 3; m++) {
			if (crux_sched_run(c.t, c.js.v, c.js.n, &p, ps_pol[m], c.s3))
				die("run failed");
			score[PS_CRUX + m][cs] = all_levels(&c, c.s3, NULL, &code);
			set_levels(c.s3, code);
			crux_sched_schedule_copy(keep[PS_CRUX + m], c.s3);
		}
		/* Priorities at the optimum's paths. */
		copy_paths(&c, c.s3, c.opt);
		if (crux_sched_intensity(c.t, c.js.v, c.js.n, c.s3))
			die("intensity failed");
		double crux_p[NJ];

		for (int m = PA_CRUX; m <= PA_REVERSED; m++) {
			int reps = m == PA_RANDOM ? NRANDOM : 1;
			double sum = 0;

			for (int r = 0; r < reps; r++) {
				crux_status_t st = CRUX_OK;

				if (m == PA_CRUX || m == PA_REVERSED)
					st = crux_sched_priority_plain(c.js.v, c.js.n, c.s3);
				else if (m == PA_PAPER_K)
					st = crux_sched_correction(c.js.v, c.js.n, c.s3);
				else if (m == PA_SINCRONIA)
					st = crux_sched_prio_sincronia(c.t, c.js.v, c.js.n, c.s3);
				else if (m == PA_VARYS)
					st = crux_sched_prio_varys(c.js.v, c.js.n, c.s3);
				if (st)
					die("priority failed");
				if (m == PA_CRUX)
					for (int j = 0; j < NJ; j++)
						crux_p[j] = c.s3->d[j].priority;
				uint64_t rs = (uint64_t)cs * 131 + (uint64_t)r + 1;

				for (int j = 0; j < NJ; j++) {
					if (m == PA_RANDOM)
						c.s3->d[j].priority = crux_bench_urand(&rs, 0, 1);
					if (m == PA_REVERSED)
						c.s3->d[j].priority = 1.0 / (crux_p[j] + 1e-12);
				}
				crux_sched_rank(c.s3);
				sum += best_valid(&c, c.s3, &code);
				if (r == 0) {
					set_levels(c.s3, code);
					crux_sched_schedule_copy(keep[m], c.s3);
				}
			}
			score[m][cs] = sum / reps;
		}
		score[PA_MOVE][cs] = move_search(&c, c.s3, crux_p, &code);
		set_levels(c.s3, code);
		crux_sched_schedule_copy(keep[PA_MOVE], c.s3);
		/* Every assignment respects some order (jobs by level): the evaluator's
		 * best is the ceiling of any order it would choose. */
		score[PA_EVAL_BEST][cs] = c.U[eval_best];
		set_levels(c.s3, eval_best);
		crux_sched_schedule_copy(keep[PA_EVAL_BEST], c.s3);
		/* Compression at the optimum's paths: the best order on 5 levels. */
		copy_paths(&c, c.s5, c.opt);
		int bp = 0;
		double bu = -1;

		for (int q = 0; q < NPERM; q++) {
			for (int r = 0; r < NJ; r++)
				c.s5->d[c.perm[q][r]].level = NJ - 1 - r;
			double u = util(&c, c.s5);

			if (u > bu) {
				bu = u;
				bp = q;
			}
		}
		copy_paths(&c, c.s3, c.opt);
		if (crux_sched_intensity(c.t, c.js.v, c.js.n, c.s3))
			die("intensity failed");
		for (int r = 0; r < NJ; r++)
			c.s3->d[c.perm[bp][r]].priority = NJ - r;
		crux_sched_rank(c.s3);
		score[CP_BOUND][cs] = best_valid(&c, c.s3, &code);
		set_levels(c.s3, code);
		crux_sched_schedule_copy(keep[CP_BOUND], c.s3);
		for (int m = CP_CRUX; m <= CP_MAXKCUT; m++) {
			if (m == CP_CRUX || m == CP_MAXKCUT) {
				if (crux_sched_compress(c.t, c.js.v, c.js.n, &p, c.s3) ||
				    (m == CP_CRUX &&
				     crux_sched_compress_refine(c.t, c.js.v, c.js.n, &p, c.s3)))
					die("compress failed");
			} else if (m == CP_SINCRONIA) {
				crux_sched_compress_rank(c.s3);
			} else {
				crux_sched_compress_balanced(c.s3);
			}
			score[m][cs] = util(&c, c.s3);
			crux_sched_schedule_copy(keep[m], c.s3);
		}
		score[CP_ONE_LEVEL][cs] = c.U[0];
		set_levels(c.s3, 0);
		crux_sched_schedule_copy(keep[CP_ONE_LEVEL], c.s3);
		/* A per-job optimum a mechanism beats: its value, marked. */
		double found = opt;

		for (int m = 0; m < N_MECH; m++)
			found = fmax(found, score[m][cs]);
		if (found > opt * (1 + 1e-12))
			heuristic++;
		for (int m = 0; m < N_MECH; m++)
			score[m][cs] /= found;
		/* The reference's judgement: the best level assignment at the
		 * optimum's paths run in the reference, against each schedule. */
		if (cs < refcases) {
			double rbest = ref_best_at_opt(&c, (uint64_t)cs + 1);

			for (int m = 0; m < N_MECH; m++)
				rscore[m][nref] = ref_util(&c, keep[m], (uint64_t)cs + 1);
			for (int m = 0; m < N_MECH; m++)
				rbest = fmax(rbest, rscore[m][nref]);
			for (int m = 0; m < N_MECH; m++)
				rscore[m][nref] /= rbest;
			nref++;
		}
		free_case(&c);
		if ((cs + 1) % 25 == 0 || cs + 1 == cases)
			fprintf(stderr, "sched-optimality-honest: %d/%d cases\n", cs + 1, cases);
	}
	FILE *jf = fopen(out, "w");

	if (!jf)
		die("cannot write the JSON file");
	double mean[N_MECH], rmean[N_MECH];

	for (int m = 0; m < N_MECH; m++) {
		double s = 0, r = 0;

		for (int i = 0; i < cases; i++)
			s += score[m][i];
		for (int i = 0; i < nref; i++)
			r += rscore[m][i];
		mean[m] = 100 * s / cases;
		rmean[m] = nref ? 100 * r / nref : NAN;
	}
	printf("%d cases: optimum per flow in %d (<= %d two-path flows), per job in %d; a "
	       "mechanism beat the per-job optimum (heuristic denominator) in %d\n",
	       cases, exact_cases, flow_max, per_job_cases, heuristic);
	printf("%-26s %8s %8s %8s %9s | %8s %9s  (reference, %d cases)\n", "mechanism", "mean%",
	       "p10", "min", "gap_clsd", "ref%", "gap_clsd", nref);
	struct crux_json j;

	crux_json_init(&j, jf);
	crux_json_obj(&j);
	crux_json_key(&j, "benchmark");
	crux_json_str(&j, "sched-optimality-honest");
	crux_json_key(&j, "cases");
	crux_json_i64(&j, cases);
	crux_json_key(&j, "jobs");
	crux_json_i64(&j, NJ);
	crux_json_key(&j, "levels");
	crux_json_i64(&j, K3);
	crux_json_key(&j, "fmax");
	crux_json_i64(&j, flow_max);
	crux_json_key(&j, "cases_per_flow_optimum");
	crux_json_i64(&j, exact_cases);
	crux_json_key(&j, "cases_per_job_optimum");
	crux_json_i64(&j, per_job_cases);
	crux_json_key(&j, "cases_heuristic_denominator");
	crux_json_i64(&j, heuristic);
	crux_json_key(&j, "reference_cases");
	crux_json_i64(&j, nref);
	crux_json_key(&j, "reference");
	crux_json_obj(&j);
	crux_json_key(&j, "fairness");
	crux_json_str(&j, "flow");
	crux_json_key(&j, "phases");
	crux_json_i64(&j, 2);
	crux_json_key(&j, "denominator");
	crux_json_str(&j, "best of 243 level assignments at the optimum's paths in the reference");
	crux_json_end_obj(&j);
	crux_bench_json_paper(&j);
	crux_json_key(&j, "mechanisms");
	crux_json_obj(&j);
	for (int m = 0; m < N_MECH; m++) {
		int fl = mech_floor[m];
		double gap = 100 - mean[fl] > 1e-9 ? (mean[m] - mean[fl]) / (100 - mean[fl]) : NAN;
		double rgap =
		    100 - rmean[fl] > 1e-9 ? (rmean[m] - rmean[fl]) / (100 - rmean[fl]) : NAN;

		qsort(score[m], (size_t)cases, sizeof(double), cmp_dbl);
		double p10 = 100 * score[m][(cases - 1) / 10], mn = 100 * score[m][0];

		printf("%-26s %8.2f %8.2f %8.2f %8.1f%% | %8.2f %8.1f%%\n", mech_name[m], mean[m],
		       p10, mn, 100 * gap, rmean[m], 100 * rgap);
		crux_json_key(&j, mech_name[m]);
		crux_json_obj(&j);
		crux_json_key(&j, "mean");
		crux_json_numf(&j, "%.4f", mean[m]);
		crux_json_key(&j, "p10");
		crux_json_numf(&j, "%.4f", p10);
		crux_json_key(&j, "min");
		crux_json_numf(&j, "%.4f", mn);
		crux_json_key(&j, "floor");
		crux_json_str(&j, mech_name[fl]);
		crux_json_key(&j, "gap_closed");
		crux_json_numf(&j, "%.4f", isfinite(gap) ? gap : -1);
		crux_json_key(&j, "ref_mean");
		crux_json_numf(&j, "%.4f", isfinite(rmean[m]) ? rmean[m] : -1);
		crux_json_key(&j, "ref_gap_closed");
		crux_json_numf(&j, "%.4f", isfinite(rgap) ? rgap : -1);
		crux_json_end_obj(&j);
	}
	crux_json_end_obj(&j);
	crux_json_end_obj(&j);
	crux_json_done(&j);
	fclose(jf);
	for (int m = 0; m < N_MECH; m++) {
		crux_sched_schedule_free(keep[m]);
		free(score[m]);
		free(rscore[m]);
	}
	crux_sched_eval_free(c.ev);
	return 0;
}
