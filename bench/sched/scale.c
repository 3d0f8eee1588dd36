/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Scale benchmark: a full Crux schedule (ECMP start, intensity, path
 * selection, correction factor, compression into K levels) for 1k..10k jobs
 * on the Lingjun topology (847 hosts x 8 GPUs), single-threaded. Baseline in
 * the same run: the ECMP policy (paths hashed, intensity only).
 *
 * Workload (assumed; the Lingjun trace has no per-job volumes): job sizes
 * 1/2/4/8/16/32/64/128 GPUs with weights 30/10/10/20/12/10/6/2 %, six model
 * types (compute 0.05..0.6 s, overlap 0..0.75, all-reduce 0.1..2 GB per
 * iteration), placed on consecutive GPU slots in ToR order, wrapping around
 * the cluster when it is full (several jobs then share a host). Most of
 * these jobs fit one host and send nothing over the network; the last row
 * ("multi") repeats 5,000 jobs drawn from 16..128 GPUs only, the dense case.
 *
 * The fairness guard: the warm schedule again with CRUX_MAX_SLOWDOWN=2 (each
 * job's isolated time estimated alone on its paths), its evaluations resuming
 * below the highest level that moved; baseline in the same run: the same
 * guard with a full evaluation every time (crux_sched_eval_set_resume(0)).
 *
 * The evaluator's time is measured for the phase-aware model and, in the
 * same run, the first (phase-blind) model (eval_first_model_ms).
 *
 * Times are the best of 3 (cold, guard) and 5 (warm) runs: the machine is shared.
 *
 * usage: sched-scale CSV [OUT.json] [--quick]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cases.h"
#include "crux/json.h"
#include "crux/sched.h"
#include "sched_int.h" /* crux_sched_eval_set_resume: the guard's baseline */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: the machine is shared */
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct model {
	double compute, overlap, bytes;
};

static const struct model models[6] = {
    {0.05, 0.0, 1e8},	{0.12, 0.25, 4e8}, {0.2, 0.5, 1e9},
    {0.3, 0.75, 1.4e9}, {0.45, 0.5, 2e9},  {0.6, 0.25, 7e8},
};

static int gen_jobs(struct crux_sched_topo *t, int n, uint64_t seed, int multi_host,
		    struct crux_sched_jobs *js)
{
	static const int sizes[8] = {1, 2, 4, 8, 16, 32, 64, 128};
	static const int mix[2][8] = {{30, 10, 10, 20, 12, 10, 6, 2}, {0, 0, 0, 0, 60, 25, 10, 5}};
	const int *weight = mix[multi_host];
	int nh = crux_sched_topo_n_hosts(t), slots = nh * 8, cursor = 0;
	int *hosts = malloc(sizeof(int) * 32);

	/* Hosts in ToR order: the loader numbers hosts in file order, so sort by ToR name. */
	int *order = malloc(sizeof(int) * (size_t)nh);
	const char **tor = malloc(sizeof(char *) * (size_t)nh);

	if (!hosts || !order || !tor)
		return -1;
	for (int h = 0; h < nh; h++) {
		struct crux_sched_path_set ps;
		int to;

		order[h] = h;
		/* The ToR is the far end of the host's first link on any path. */
		crux_sched_topo_paths(t, h, h == 0 ? 1 : 0, &ps);
		crux_sched_topo_link(t, ps.links[0], NULL, &to, NULL);
		tor[h] = crux_sched_topo_node_name(t, to);
	}
	for (int a = 1; a < nh; a++) { /* insertion sort by ToR name, stable */
		int v = order[a], b = a;

		while (b > 0 && strcmp(tor[order[b - 1]], tor[v]) > 0) {
			order[b] = order[b - 1];
			b--;
		}
		order[b] = v;
	}
	for (int i = 0; i < n; i++) {
		int r = (int)(crux_bench_rnd(&seed) % 100), k = 0, acc = weight[0];

		while (r >= acc)
			acc += weight[++k];
		int g = sizes[k];
		const struct model *m = &models[crux_bench_rnd(&seed) % 6];
		int nhj = (g + 7) / 8;

		if (cursor % 8 + (g < 8 ? g : 8) > 8)
			cursor += 8 - cursor % 8; /* a small job stays on one host */
		if (g >= 8 && cursor % 8)
			cursor += 8 - cursor % 8;
		for (int a = 0; a < nhj; a++)
			hosts[a] = order[((cursor / 8) + a) % nh];
		cursor = (cursor + g) % slots;
		struct crux_sched_job j = {.id = (uint64_t)i + 1,
					   .gpus = g,
					   .n_hosts = nhj,
					   .hosts = hosts,
					   .compute = m->compute,
					   .overlap = m->overlap};

		j.work = g * m->compute;
		if (crux_sched_jobs_add(js, &j) ||
		    crux_sched_jobs_add_ring(js, js->n - 1, m->bytes))
			return -1;
	}
	free(hosts);
	free(order);
	free(tor);
	return 0;
}

int main(int argc, char **argv)
{
	const char *csv = argc > 1 ? argv[1] : "bench/data/lingjun-topo.csv";
	const char *out = argc > 2 ? argv[2] : "bench/results/sched-scale.json";
	int quick = argc > 3 && !strcmp(argv[3], "--quick");
	/* The last row: 5,000 jobs that all span hosts (16-128 GPUs), the dense case. */
	int counts[] = {1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000, 5000};
	int nc = quick ? 3 : 11, stress = !quick;
	struct crux_sched_lingjun_params lp;
	struct crux_sched_err err;
	FILE *jf;
	struct crux_json j;

	crux_sched_lingjun_defaults(&lp);
	jf = fopen(out, "w");
	if (!jf) {
		fprintf(stderr, "sched-scale: cannot write %s\n", out);
		return 1;
	}
	crux_json_init(&j, jf);
	crux_json_obj(&j);
	crux_json_key(&j, "benchmark");
	crux_json_str(&j, "sched-scale");
	crux_json_key(&j, "topology");
	crux_json_str(&j, "lingjun (847 hosts)");
	crux_json_key(&j, "levels");
	crux_json_i64(&j, 8);
	crux_json_key(&j, "orders");
	crux_json_i64(&j, 10);
	crux_json_key(&j, "rows");
	crux_json_arr(&j);
	printf("%6s %5s %9s %9s %6s %8s %9s %9s %8s %10s %8s %8s %6s %9s %9s %7s %6s\n", "jobs",
	       "mix", "net_jobs", "dag_edges", "comps", "largest", "cold_ms", "warm_ms", "ecmp_ms",
	       "warm/ecmp", "eval_ms", "eval0_ms", "util", "guard_ms", "full_ms", "speedup",
	       "lifts");
	for (int ci = 0; ci < nc; ci++) {
		struct crux_sched_topo *t = NULL;
		struct crux_sched_jobs js;
		struct crux_sched_schedule *s = NULL;
		struct crux_sched_params p;
		double best_warm = 1e9, best_ecmp = 1e9, cold = 1e9, best_eval = 1e9, u = 0;
		double best_eval0 = 1e9, u0 = 0;
		double guard = 1e9, guard_full = 1e9;
		int lifts = 0, left = 0;
		struct crux_sched_eval *ev = NULL;

		crux_sched_params_default(&p);
		p.levels = 8;
		/* Cold: a fresh topology, its path cache empty (the first schedule
		 * after start). Best of 3, as the machine is shared. */
		for (int rep = 0; rep < 3; rep++) {
			crux_sched_topo_free(t);
			crux_sched_schedule_free(s);
			if (rep)
				crux_sched_jobs_free(&js);
			if (crux_sched_topo_lingjun(csv, &lp, &t, &err)) {
				fprintf(stderr, "sched-scale: %s\n", err.msg);
				return 1;
			}
			crux_sched_jobs_init(&js);
			if (gen_jobs(t, counts[ci], 7 + (uint64_t)ci, ci == nc - 1 && stress,
				     &js) ||
			    crux_sched_schedule_new(js.v, js.n, 8, &s)) {
				fprintf(stderr, "sched-scale: out of memory\n");
				return 1;
			}
			double t0 = now();

			if (crux_sched_run(t, js.v, js.n, &p, CRUX_SCHED_CRUX_FULL, s)) {
				fprintf(stderr, "sched-scale: schedule failed\n");
				return 1;
			}
			cold = fmin(cold, now() - t0);
		}
		/* Warm: the agent reschedules with its topology's cache filled. */
		for (int rep = 0; rep < 5; rep++) {
			double t0 = now();

			crux_sched_run(t, js.v, js.n, &p, CRUX_SCHED_CRUX_FULL, s);
			best_warm = fmin(best_warm, now() - t0);
			t0 = now();
			crux_sched_run(t, js.v, js.n, &p, CRUX_SCHED_ECMP, s);
			best_ecmp = fmin(best_ecmp, now() - t0);
		}
		/* The guard at 2: resuming evaluations, then full ones (the baseline). */
		p.max_slowdown = 2;
		for (int full = 0; full < 2; full++) {
			crux_sched_eval_set_resume(!full);
			for (int rep = 0; rep < 3; rep++) {
				double t0 = now();

				if (crux_sched_run(t, js.v, js.n, &p, CRUX_SCHED_CRUX_FULL, s)) {
					fprintf(stderr, "sched-scale: guarded schedule failed\n");
					return 1;
				}
				if (full)
					guard_full = fmin(guard_full, now() - t0);
				else
					guard = fmin(guard, now() - t0);
			}
			lifts = s->guard_lifts;
			left = s->guard_violators;
		}
		crux_sched_eval_set_resume(1);
		p.max_slowdown = 0;
		crux_sched_run(t, js.v, js.n, &p, CRUX_SCHED_CRUX_FULL, s);
		/* The fluid evaluator on that schedule (the simulator's engine). */
		if (crux_sched_eval_new(&ev))
			return 1;
		for (int rep = 0; rep < 5; rep++) {
			double t0 = now();

			if (crux_sched_evaluate(ev, t, js.v, js.n, s, NULL, &u))
				return 1;
			best_eval = fmin(best_eval, now() - t0);
			/* Baseline in the same run: the first (phase-blind) model. */
			s->eval_model = CRUX_SCHED_EVAL_ALL_AT_ONCE;
			t0 = now();
			if (crux_sched_evaluate(ev, t, js.v, js.n, s, NULL, &u0))
				return 1;
			best_eval0 = fmin(best_eval0, now() - t0);
			s->eval_model = CRUX_SCHED_EVAL_PHASE_AWARE;
		}
		crux_sched_eval_free(ev);
		size_t net = 0;

		for (size_t i = 0; i < js.n; i++)
			net += js.v[i].n_flows > 0;
		const char *mixn = ci == nc - 1 && stress ? "multi" : "trace";

		printf("%6d %5s %9zu %9zu %6d %8d %9.2f %9.2f %8.2f %10.1f %8.2f %8.2f %6.3f %9.1f "
		       "%9.1f %7.2f %6d\n",
		       counts[ci], mixn, net, s->dag_edges, s->dag_components, s->dag_largest,
		       cold * 1e3, best_warm * 1e3, best_ecmp * 1e3, best_warm / best_ecmp,
		       best_eval * 1e3, best_eval0 * 1e3, u, guard * 1e3, guard_full * 1e3,
		       guard_full / guard, lifts);
		crux_json_obj(&j);
		crux_json_key(&j, "jobs");
		crux_json_i64(&j, counts[ci]);
		crux_json_key(&j, "mix");
		crux_json_str(&j, mixn);
		crux_json_key(&j, "network_jobs");
		crux_json_u64(&j, net);
		crux_json_key(&j, "dag_edges");
		crux_json_u64(&j, s->dag_edges);
		crux_json_key(&j, "dag_components");
		crux_json_i64(&j, s->dag_components);
		crux_json_key(&j, "dag_largest");
		crux_json_i64(&j, s->dag_largest);
		crux_json_key(&j, "cold_ms");
		crux_json_numf(&j, "%.3f", cold * 1e3);
		crux_json_key(&j, "warm_ms");
		crux_json_numf(&j, "%.3f", best_warm * 1e3);
		crux_json_key(&j, "ecmp_ms");
		crux_json_numf(&j, "%.3f", best_ecmp * 1e3);
		crux_json_key(&j, "warm_over_ecmp");
		crux_json_numf(&j, "%.3f", best_warm / best_ecmp);
		crux_json_key(&j, "eval_ms");
		crux_json_numf(&j, "%.3f", best_eval * 1e3);
		crux_json_key(&j, "eval_first_model_ms");
		crux_json_numf(&j, "%.3f", best_eval0 * 1e3);
		crux_json_key(&j, "gpu_util");
		crux_json_numf(&j, "%.4f", u);
		crux_json_key(&j, "gpu_util_first_model");
		crux_json_numf(&j, "%.4f", u0);
		crux_json_key(&j, "cut_weight");
		crux_json_numf(&j, "%.6g", s->cut_weight);
		crux_json_key(&j, "guard2_ms");
		crux_json_numf(&j, "%.3f", guard * 1e3);
		crux_json_key(&j, "guard2_full_eval_ms");
		crux_json_numf(&j, "%.3f", guard_full * 1e3);
		crux_json_key(&j, "guard2_speedup");
		crux_json_numf(&j, "%.3f", guard_full / guard);
		crux_json_key(&j, "guard2_over_warm");
		crux_json_numf(&j, "%.3f", guard / best_warm);
		crux_json_key(&j, "guard2_lifts");
		crux_json_i64(&j, lifts);
		crux_json_key(&j, "guard2_violators_left");
		crux_json_i64(&j, left);
		crux_json_end_obj(&j);
		fflush(stdout);
		crux_sched_schedule_free(s);
		crux_sched_jobs_free(&js);
		crux_sched_topo_free(t);
	}
	crux_json_end_arr(&j);
	crux_json_end_obj(&j);
	crux_json_done(&j);
	fclose(jf);
	return 0;
}
