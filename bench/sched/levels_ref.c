/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where Crux's levels lose to the reference model's best (issue 26 item 4:
 * why priority and compression close less than 90 % of the gap under the
 * reference).
 *
 * The optimality cases (cases.h: a 2:1 Clos of 2-4 ToRs, 5 jobs of 2-4
 * hosts, 3 levels), each on Crux-full's own paths: every one of the 3^5
 * level assignments runs in the evaluator and in the reference (per flow, 2
 * random phases). Per case, against the reference's best assignment:
 *  - Crux-full's levels (its order by P = I, Max-K-Cut into 3 levels);
 *  - the best assignment that keeps Crux's order (levels never increase
 *    down its ranking): the best any compression of Crux's order can do, so
 *    crux-full -> this is what the compression loses and this -> the best
 *    what the order loses;
 *  - the evaluator's best assignment, run in the reference (what a planner
 *    searching the evaluator would get);
 *  - the evaluator's best among the assignments that keep Crux's order, run
 *    in the reference (a planner that lets the evaluator choose only the
 *    cuts of Crux's order);
 *  - the mean over all assignments (a random assignment, the floor).
 * Also: how often the reference's best keeps Crux's order, equals the
 * evaluator's best, and how many job pairs share a level in it and in
 * Crux's levels.
 *
 * usage: sched-levels-ref [CASES] [OUT.json] [CASE_SEED]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cases.h"
#include "crux/json.h"
#include "crux/sched.h"
#include "crux/sched_ref.h"

#define NJ   5
#define K3   3
#define NLVL 243 /* 3^5 */

__attribute__((noreturn)) static void die(const char *what)
{
	fprintf(stderr, "sched-levels-ref: %s\n", what);
	exit(1);
}

static double ref_util(struct crux_sched_topo *t, const struct crux_sched_jobs *js,
		       const struct crux_sched_schedule *s, uint64_t seed)
{
	struct crux_sched_ref_params rp;
	double u;

	crux_sched_ref_params_default(&rp);
	rp.phases = 2;
	rp.seed = seed;
	if (crux_sched_reference(t, js->v, js->n, s, &rp, NULL, &u, NULL))
		die("reference failed");
	return u;
}

static void set_levels(struct crux_sched_schedule *s, int code, int *lv)
{
	for (int i = 0; i < NJ; i++, code /= K3)
		s->d[i].level = lv[i] = code % K3;
}

/* Levels never increase down Crux's ranking (rank 0 = highest priority). */
static int keeps_order(const int *rank, const int *lv)
{
	for (int a = 0; a < NJ; a++)
		for (int b = 0; b < NJ; b++)
			if (rank[a] < rank[b] && lv[a] < lv[b])
				return 0;
	return 1;
}

static int sharing_pairs(const int *lv)
{
	int k = 0;

	for (int a = 0; a < NJ; a++)
		for (int b = a + 1; b < NJ; b++)
			k += lv[a] == lv[b];
	return k;
}

struct tot {
	int cases, best_keeps_order, best_is_eval_best, share_best, share_crux;
	double crux, keep_best, eval_best, mean, crux_eval; /* sums of % of the best */
	double eval_keep;		       /* the evaluator's cuts of Crux's order */
	int eval_keep_better, eval_keep_worse; /* than crux-full, by > 0.5 % */
};

static void run_case(uint64_t seed, int c, struct crux_sched_eval *ev, struct tot *a)
{
	struct crux_sched_topo *t;
	struct crux_sched_jobs js;
	struct crux_sched_params p;
	struct crux_sched_schedule *s;
	int rank[NJ], crux_lv[NJ], lv[NJ], best_code = 0, ebest_code = 0;
	double T[NJ], ue, best = -1, ebest = -1, ur_ebest = 0, keep = -1, sum = 0, crux_ue;
	double ekeep = -1, ur_ekeep = 0;
	const char *msg = crux_bench_small_case(seed, NJ, &t, &js);

	if (msg)
		die(msg);
	crux_sched_params_default(&p);
	p.levels = K3;
	if (crux_sched_schedule_new(js.v, NJ, K3, &s) ||
	    crux_sched_run(t, js.v, NJ, &p, CRUX_SCHED_CRUX_FULL, s) ||
	    crux_sched_evaluate(ev, t, js.v, NJ, s, T, &crux_ue))
		die("crux-full failed");
	for (int i = 0; i < NJ; i++) {
		rank[i] = s->d[i].rank;
		crux_lv[i] = s->d[i].level;
	}
	double crux_ur = ref_util(t, &js, s, (uint64_t)c + 1);

	for (int code = 0; code < NLVL; code++) {
		set_levels(s, code, lv);
		if (crux_sched_evaluate(ev, t, js.v, NJ, s, T, &ue))
			die("evaluate failed");
		double ur = ref_util(t, &js, s, (uint64_t)c + 1);

		sum += ur;
		if (ur > best) {
			best = ur;
			best_code = code;
		}
		if (ue > ebest) {
			ebest = ue;
			ebest_code = code;
			ur_ebest = ur;
		}
		if (keeps_order(rank, lv) && ur > keep)
			keep = ur;
		if (keeps_order(rank, lv) && ue > ekeep) {
			ekeep = ue;
			ur_ekeep = ur;
		}
	}
	set_levels(s, best_code, lv);
	a->cases++;
	a->best_keeps_order += keeps_order(rank, lv);
	a->best_is_eval_best += best_code == ebest_code;
	a->share_best += sharing_pairs(lv);
	a->share_crux += sharing_pairs(crux_lv);
	a->crux += crux_ur / best;
	a->keep_best += keep / best;
	a->eval_best += ur_ebest / best;
	a->mean += sum / NLVL / best;
	a->crux_eval += crux_ue / ebest;
	a->eval_keep += ur_ekeep / best;
	a->eval_keep_better += ur_ekeep > 1.005 * crux_ur;
	a->eval_keep_worse += ur_ekeep < crux_ur / 1.005;
	crux_sched_schedule_free(s);
	crux_sched_jobs_free(&js);
	crux_sched_topo_free(t);
}

static void field(struct crux_json *j, const char *k, double v)
{
	crux_json_key(j, k);
	crux_json_numf(j, "%.5f", v);
}

int main(int argc, char **argv)
{
	int cases = argc > 1 ? atoi(argv[1]) : 30;
	const char *out = argc > 2 ? argv[2] : "bench/results/sched-levels-ref.json";
	uint64_t rs = argc > 3 ? strtoull(argv[3], NULL, 0) : 0x77aa;
	struct crux_sched_eval *ev;
	struct tot a = {0};
	struct timespec t0, t1;

	if (cases < 1 || cases > 10000)
		die("CASES must be 1..10000");
	if (crux_sched_eval_new(&ev))
		die("out of memory");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int c = 0; c < cases; c++)
		run_case(crux_bench_rnd(&rs), c, ev, &a);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double n = a.cases,
	       wall = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
	double crux = a.crux / n, keep = a.keep_best / n, mean = a.mean / n;

	printf(
	    "%d cases (5 jobs, 3 levels, Crux's paths), %% of the reference's best level "
	    "assignment:\n  crux-full %.2f %%, the best assignment keeping Crux's order %.2f %%, "
	    "the evaluator's best %.2f %%, a random assignment %.2f %%\n"
	    "  gap closed from a random assignment %.1f %%; of what crux-full misses, the "
	    "compression (cuts of its order) %.1f %% and the order %.1f %%\n"
	    "  the reference's best keeps Crux's order in %d cases, is the evaluator's best in %d;"
	    " job pairs sharing a level: %d in the reference's best, %d in Crux's\n"
	    "  (crux-full is %.2f %% of the evaluator's best in the evaluator)  %.1f s\n"
	    "  the evaluator choosing the cuts of Crux's order: %.2f %% (better than crux-full by "
	    "> 0.5 %% in %d cases, worse in %d)\n",
	    a.cases, 100 * crux, 100 * keep, 100 * a.eval_best / n, 100 * mean,
	    100 * (crux - mean) / (1 - mean), 100 * (keep - crux) / (1 - crux),
	    100 * (1 - keep) / (1 - crux), a.best_keeps_order, a.best_is_eval_best, a.share_best,
	    a.share_crux, 100 * a.crux_eval / n, wall, 100 * a.eval_keep / n, a.eval_keep_better,
	    a.eval_keep_worse);
	FILE *f = fopen(out, "w");
	struct crux_json j;

	if (!f)
		die("cannot write the JSON file");
	crux_json_init(&j, f);
	crux_json_obj(&j);
	crux_json_key(&j, "benchmark");
	crux_json_str(&j, "sched-levels-ref");
	crux_json_key(&j, "cases");
	crux_json_i64(&j, a.cases);
	crux_json_key(&j, "reference");
	crux_json_str(&j, "per-flow max-min, strict priority, 2 random phases");
	field(&j, "crux_full_of_ref_best", crux);
	field(&j, "best_keeping_crux_order_of_ref_best", keep);
	field(&j, "eval_best_of_ref_best", a.eval_best / n);
	field(&j, "random_assignment_of_ref_best", mean);
	field(&j, "gap_closed_from_random", (crux - mean) / (1 - mean));
	field(&j, "missed_share_compression", (keep - crux) / (1 - crux));
	field(&j, "missed_share_order", (1 - keep) / (1 - crux));
	field(&j, "crux_full_of_eval_best_in_eval", a.crux_eval / n);
	field(&j, "eval_cuts_of_crux_order_of_ref_best", a.eval_keep / n);
	crux_json_key(&j, "eval_cuts_better_than_crux_full");
	crux_json_i64(&j, a.eval_keep_better);
	crux_json_key(&j, "eval_cuts_worse_than_crux_full");
	crux_json_i64(&j, a.eval_keep_worse);
	crux_json_key(&j, "ref_best_keeps_crux_order");
	crux_json_i64(&j, a.best_keeps_order);
	crux_json_key(&j, "ref_best_is_eval_best");
	crux_json_i64(&j, a.best_is_eval_best);
	crux_json_key(&j, "pairs_sharing_a_level_ref_best");
	crux_json_i64(&j, a.share_best);
	crux_json_key(&j, "pairs_sharing_a_level_crux");
	crux_json_i64(&j, a.share_crux);
	field(&j, "wall_s", wall);
	crux_json_end_obj(&j);
	crux_json_done(&j);
	fclose(f);
	crux_sched_eval_free(ev);
	return 0;
}
