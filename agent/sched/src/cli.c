/* SPDX-License-Identifier: Apache-2.0 */
/* "plan": load a topology and jobs, schedule them, print the decisions. */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crux/env.h"
#include "crux/json.h"
#include "crux/sched_cli.h"
#include "crux/sched_ref.h"
#include "sched_int.h"

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s --topology FILE --jobs FILE [--levels K] [--seed N] [--orders M]\n"
		"          [--policy crux|crux-ps-pa|crux-pa|sincronia|varys|taccl|ecmp] [--json]\n"
		"          [--max-slowdown X] [--level-weights W,W,...]\n"
		"          [--reference [--ref-fairness flow|job] [--ref-phases N]] [--paper-k]\n"
		"          [--refine-gain X] [--refine-keep-order] [--guard-refine]\n"
		"          [--paths-search 0|1|2 [--paths-search-full]]\n"
		"          [--ecmp-paths] [--levels-given ID=L,...]\n"
		"          [--paths-given ID:SRC:DST:VIA,...]\n"
		"  FILE for --topology: a topology file, lingjun:CSV or "
		"clos2:TORS,AGGS,HOSTS_PER_TOR\n"
		"  --max-slowdown X: no job's predicted iteration time above X times its\n"
		"  isolated one (Crux policies; default CRUX_MAX_SLOWDOWN, unset = no bound)\n"
		"  --level-weights: guaranteed share per level, lowest first (default\n"
		"  CRUX_LEVEL_WEIGHTS, unset = strict priority)\n"
		"  --reference: also run the plan in the reference model (an event-driven\n"
		"  simulation of the jobs' compute and communication phases; max-min per\n"
		"  flow, or per job with --ref-fairness job; N random start phases, 0 = all\n"
		"  start together; default 4) and print its iteration times and utilisation\n"
		"  --paper-k: rank by P = k I with the paper's correction factor (default\n"
		"  P = I: k lowers utilisation in the reference model, sched-refcheck)\n"
		"  --refine-gain X: after Max-K-Cut, move a job to another level where the\n"
		"  evaluator gains more than the fraction X (crux policy; default 0.01;\n"
		"  0 = Max-K-Cut's levels as they are; not with --max-slowdown, where the\n"
		"  guard takes Max-K-Cut's levels)\n"
		"  --guard-refine: with --max-slowdown, the same moves after the guard, no\n"
		"  job past 0.9x its bound (or its time in the guard's plan if higher)\n"
		"  --paths-search N: crux policy, after the levels: move one (1) or one or\n"
		"  two (2) flows at a time to other candidate paths, each candidate planned\n"
		"  again with Max-K-Cut's levels, kept where the evaluator gains, the\n"
		"  refinement once at the end (default 0 = the greedy paths)\n"
		"  --paths-search-full: every candidate planned with the refinement too\n"
		"  (about 17 times the cost)\n"
		"  --refine-keep-order: the refinement moves a job only within the priority\n"
		"  order (never above a higher-ranked job it shares a link with); default:\n"
		"  any level, which the reference model judges better\n"
		"  --ecmp-paths: the plan's levels on the ECMP paths the flows hash to, not\n"
		"  on its own paths: what a fabric carries where the plan's paths are not\n"
		"  bound (cruxd without probing plans Crux-full, but its routes carry no\n"
		"  ports); evaluator and reference model both\n"
		"  --levels-given: these jobs on these levels (0 = lowest), whatever the\n"
		"  policy plans for them (e.g. the levels an agent applied, from its log);\n"
		"  the policy still plans the others and every path\n"
		"  --paths-given: job ID's flow from host SRC to host DST on its path through\n"
		"  node VIA (e.g. the spine a fabric hashed that connection onto), after\n"
		"  the plan and --ecmp-paths; the other flows keep their paths\n",
		prog);
}

/* An integer option in [lo, hi], by the base's strict parser. */
static int parse_long(const char *s, long lo, long hi, long *out)
{
	long long v;

	if (crux_parse_int("option", s, lo, hi, &v, NULL, 0) != CRUX_OK)
		return -1;
	*out = (long)v;
	return 0;
}

static crux_status_t load_topo(const char *spec, struct crux_sched_topo **t,
			       struct crux_sched_err *err)
{
	if (!strncmp(spec, "lingjun:", 8)) {
		struct crux_sched_lingjun_params lp;

		crux_sched_lingjun_defaults(&lp);
		return crux_sched_topo_lingjun(spec + 8, &lp, t, err);
	}
	if (!strncmp(spec, "clos2:", 6)) {
		struct crux_sched_clos2_params cp = {0, 0, 0, 1, 100, 400};

		if (sscanf(spec + 6, "%d,%d,%d", &cp.n_tor, &cp.n_agg, &cp.hosts_per_tor) != 3) {
			crux_sched_errf(
			    err, "--topology %s: expected clos2:TORS,AGGS,HOSTS_PER_TOR", spec);
			return CRUX_ERR_INVAL;
		}
		return crux_sched_topo_clos2(&cp, t, err);
	}
	return crux_sched_topo_load(spec, t, err);
}

/* A flow's path as its node names: space-separated text, or strings of a JSON array when j is set.
 */
static void print_path(struct crux_sched_topo *t, const struct crux_sched_flow *fl, int idx,
		       struct crux_json *j)
{
	struct crux_sched_path_set ps;

	if (crux_sched_topo_paths(t, fl->src, fl->dst, &ps) || idx < 0 || idx >= ps.n_paths)
		return;
	if (j)
		crux_json_str(j, t->names[fl->src]);
	else
		fputs(t->names[fl->src], stdout);
	for (int k = ps.off[idx]; k < ps.off[idx + 1]; k++) {
		if (j) {
			crux_json_str(j, t->names[t->lto[ps.links[k]]]);
		} else {
			putchar(' ');
			fputs(t->names[t->lto[ps.links[k]]], stdout);
		}
	}
}

/* Predicted iteration time over the job's isolated one on its paths. */
static double plan_slowdown(const struct crux_sched_job *j, double comm, double iter)
{
	double iso = crux_sched_isolated_iter(j, comm);

	return iso > 0 ? iter / iso : 1;
}

/*
 * --levels-given ID=L,...: each named job on level L in place of the plan's.
 * Every job named once, every level in [0, levels); -1 with a message else.
 */
static int give_levels(const char *prog, const char *spec, const struct crux_sched_job *jobs,
		       size_t n, int levels, struct crux_sched_schedule *s)
{
	char *dup = strdup(spec), *save = NULL, *tok;
	bool *seen = calloc(n ? n : 1, sizeof(bool));
	int rc = -1;

	if (!dup || !seen) {
		fprintf(stderr, "%s: out of memory\n", prog);
		goto out;
	}
	for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		uint64_t id;
		long long lv;
		size_t i;

		if (!eq) {
			fprintf(stderr, "%s: --levels-given '%s': expected ID=LEVEL, got '%s'\n",
				prog, spec, tok);
			goto out;
		}
		*eq = '\0';
		if (crux_parse_u64("id", tok, 0, UINT64_MAX, &id, NULL, 0) ||
		    crux_parse_int("level", eq + 1, 0, levels - 1, &lv, NULL, 0)) {
			fprintf(
			    stderr,
			    "%s: --levels-given '%s': '%s=%s' needs a job id of the jobs file and "
			    "a level in 0..%d\n",
			    prog, spec, tok, eq + 1, levels - 1);
			goto out;
		}
		for (i = 0; i < n && jobs[i].id != id; i++)
			;
		if (i == n || seen[i]) {
			fprintf(stderr, "%s: --levels-given '%s': job %s %s\n", prog, spec, tok,
				i == n ? "is not in the jobs file" : "is given twice");
			goto out;
		}
		seen[i] = true;
		s->d[i].level = (int)lv;
	}
	rc = 0;
out:
	free(seen);
	free(dup);
	return rc;
}

/* A named node, for --paths-given: its index, or -1 with the fault printed. */
static int given_node(const char *prog, const char *spec, struct crux_sched_topo *t,
		      const char *name, int host)
{
	int nd = crux_sched_topo_find(t, name);

	if (nd < 0 || (host && nd >= crux_sched_topo_n_hosts(t))) {
		fprintf(stderr, "%s: --paths-given '%s': '%s' is not a %s of the topology\n", prog,
			spec, name, host ? "host" : "node");
		return -1;
	}
	return nd;
}

/* --paths-given: flows put on the candidate path through a named node. */
static int give_paths(const char *prog, const char *spec, struct crux_sched_topo *t,
		      const struct crux_sched_job *jobs, size_t n, struct crux_sched_schedule *s)
{
	char *dup = strdup(spec), *save = NULL, *tok;
	int rc = -1;

	if (!dup) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return -1;
	}
	for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *f[4], *q = tok, whole[256];
		int k = 0, src, dst, via, fl = -1, pi = -1, hits = 0;
		uint64_t id;
		size_t i;
		struct crux_sched_path_set ps;

		snprintf(whole, sizeof(whole), "%s", tok);
		while (k < 4 && q) {
			f[k++] = q;
			q = strchr(q, ':');
			if (q)
				*q++ = '\0';
		}
		if (k != 4 || q) {
			fprintf(stderr,
				"%s: --paths-given '%s': expected ID:SRC:DST:VIA, got '%s'\n", prog,
				spec, whole);
			goto out;
		}
		if (crux_parse_u64("id", f[0], 0, UINT64_MAX, &id, NULL, 0)) {
			fprintf(stderr, "%s: --paths-given '%s': '%s' is not a job id\n", prog,
				spec, f[0]);
			goto out;
		}
		for (i = 0; i < n && jobs[i].id != id; i++)
			;
		if (i == n) {
			fprintf(stderr, "%s: --paths-given '%s': job %s is not in the jobs file\n",
				prog, spec, f[0]);
			goto out;
		}
		if ((src = given_node(prog, spec, t, f[1], 1)) < 0 ||
		    (dst = given_node(prog, spec, t, f[2], 1)) < 0 ||
		    (via = given_node(prog, spec, t, f[3], 0)) < 0)
			goto out;
		for (int g = 0; g < jobs[i].n_flows; g++)
			if (jobs[i].flows[g].src == src && jobs[i].flows[g].dst == dst)
				fl = g;
		if (fl < 0 || crux_sched_topo_paths(t, src, dst, &ps)) {
			fprintf(stderr,
				"%s: --paths-given '%s': job %s has no flow from %s to %s\n", prog,
				spec, f[0], f[1], f[2]);
			goto out;
		}
		for (int x = 0; x < ps.n_paths; x++) {
			int on = 0;

			for (int e = ps.off[x]; e < ps.off[x + 1]; e++)
				on |= t->lto[ps.links[e]] == via && via != dst;
			if (on && !hits++)
				pi = x;
		}
		if (hits != 1) {
			fprintf(stderr,
				"%s: --paths-given '%s': %s of the candidate paths from %s to %s "
				"pass%s through %s: name a node on exactly one of them\n",
				prog, spec, hits ? "several" : "none", f[1], f[2], hits ? "" : "es",
				f[3]);
			goto out;
		}
		s->d[i].path[fl] = pi;
	}
	rc = 0;
out:
	free(dup);
	return rc;
}

int crux_sched_plan_cli(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"topology", required_argument, NULL, 't'},
	    {"jobs", required_argument, NULL, 'j'},
	    {"levels", required_argument, NULL, 'k'},
	    {"seed", required_argument, NULL, 's'},
	    {"orders", required_argument, NULL, 'm'},
	    {"policy", required_argument, NULL, 'p'},
	    {"json", no_argument, NULL, 'J'},
	    {"max-slowdown", required_argument, NULL, 'B'},
	    {"level-weights", required_argument, NULL, 'W'},
	    {"reference", no_argument, NULL, 'R'},
	    {"ref-fairness", required_argument, NULL, 'F'},
	    {"ref-phases", required_argument, NULL, 'P'},
	    {"paper-k", no_argument, NULL, 'K'},
	    {"refine-gain", required_argument, NULL, 'r'},
	    {"refine-keep-order", no_argument, NULL, 'O'},
	    {"guard-refine", no_argument, NULL, 'g'},
	    {"paths-search", required_argument, NULL, 'S'},
	    {"paths-search-full", no_argument, NULL, 'U'},
	    {"ecmp-paths", no_argument, NULL, 'E'},
	    {"levels-given", required_argument, NULL, 'G'},
	    {"paths-given", required_argument, NULL, 'Q'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *prog = argc > 0 ? argv[0] : "plan";
	const char *topo_path = NULL, *jobs_path = NULL, *given = NULL, *given_paths = NULL;
	struct crux_sched_params p;
	enum crux_sched_policy pol = CRUX_SCHED_CRUX_FULL;
	struct crux_sched_topo *t = NULL;
	struct crux_sched_jobs js;
	struct crux_sched_schedule *s = NULL;
	struct crux_sched_eval *ev = NULL;
	struct crux_sched_err err = {{0}};
	double *iter = NULL, util = 0, *riter = NULL, rutil = 0;
	struct crux_sched_ref_params rp;
	struct crux_sched_ref_stats rs = {0};
	int json = 0, rc = 1, c, ref = 0, on_ecmp = 0;
	long v;

	crux_sched_params_default(&p);
	crux_sched_ref_params_default(&rp);
	crux_sched_jobs_init(&js);
	if (crux_sched_params_env(&p, &err)) {
		fprintf(stderr, "%s: %s\n", prog, err.msg);
		return 2;
	}
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			topo_path = optarg;
			break;
		case 'j':
			jobs_path = optarg;
			break;
		case 'k':
			if (parse_long(optarg, 1, CRUX_SCHED_MAX_LEVELS, &v)) {
				fprintf(stderr, "%s: --levels '%s': expected an integer in 1..%d\n",
					prog, optarg, CRUX_SCHED_MAX_LEVELS);
				return 2;
			}
			p.levels = (int)v;
			break;
		case 'm':
			if (parse_long(optarg, 1, 1000, &v)) {
				fprintf(stderr,
					"%s: --orders '%s': expected an integer in 1..1000\n", prog,
					optarg);
				return 2;
			}
			p.orders = (int)v;
			break;
		case 's': {
			uint64_t sv;

			if (crux_parse_u64("--seed", optarg, 0, UINT64_MAX, &sv, NULL, 0) !=
			    CRUX_OK) {
				fprintf(stderr, "%s: --seed '%s': expected an unsigned integer\n",
					prog, optarg);
				return 2;
			}
			p.seed = sv;
			break;
		}
		case 'p':
			if (crux_sched_policy_parse(optarg, &pol)) {
				fprintf(stderr, "%s: --policy '%s': unknown policy\n", prog,
					optarg);
				usage(stderr, prog);
				return 2;
			}
			break;
		case 'J':
			json = 1;
			break;
		case 'B':
			if (crux_sched_slowdown_parse(optarg, &p.max_slowdown, &err)) {
				fprintf(stderr, "%s: --%s\n", prog, err.msg);
				return 2;
			}
			break;
		case 'W':
			if (crux_sched_weights_parse(optarg, &p, &err)) {
				fprintf(stderr, "%s: --%s\n", prog, err.msg);
				return 2;
			}
			break;
		case 'R':
			ref = 1;
			break;
		case 'K':
			p.correction = 1;
			break;
		case 'r': {
			char msg[160];

			if (crux_parse_double("--refine-gain", optarg, 0, 1, &p.refine_gain, msg,
					      sizeof(msg))) {
				fprintf(stderr, "%s: %s (a fraction, e.g. 0.01; 0 = off)\n", prog,
					msg);
				return 2;
			}
			break;
		}
		case 'O':
			p.refine_free = 0;
			break;
		case 'g':
			p.guard_refine = 1;
			break;
		case 'S':
			if (parse_long(optarg, 0, 2, &v)) {
				fprintf(
				    stderr,
				    "%s: --paths-search '%s': expected 0 (off), 1 (one flow at a "
				    "time) or 2 (one or two)\n",
				    prog, optarg);
				return 2;
			}
			p.paths_search = (int)v;
			break;
		case 'U':
			p.paths_search_full = 1;
			break;
		case 'E':
			on_ecmp = 1;
			break;
		case 'G':
			given = optarg;
			break;
		case 'Q':
			given_paths = optarg;
			break;
		case 'F':
			if (!strcmp(optarg, "flow")) {
				rp.fairness = CRUX_SCHED_REF_PER_FLOW;
			} else if (!strcmp(optarg, "job")) {
				rp.fairness = CRUX_SCHED_REF_PER_JOB;
			} else {
				fprintf(stderr, "%s: --ref-fairness '%s': expected flow or job\n",
					prog, optarg);
				return 2;
			}
			break;
		case 'P':
			if (parse_long(optarg, 0, 10000, &v)) {
				fprintf(stderr,
					"%s: --ref-phases '%s': expected an integer in 0..10000\n",
					prog, optarg);
				return 2;
			}
			rp.phases = (int)v;
			break;
		case 'h':
			usage(stdout, prog);
			return 0;
		default:
			fprintf(stderr, "%s: unknown or incomplete option '%s'\n", prog,
				optind > 0 && optind <= argc ? argv[optind - 1] : "?");
			usage(stderr, prog);
			return 2;
		}
	}
	if (!topo_path || !jobs_path || optind != argc) {
		fprintf(stderr, "%s: --topology and --jobs are required (and nothing else)\n",
			prog);
		usage(stderr, prog);
		return 2;
	}
	if (p.n_weights && p.n_weights != p.levels) {
		fprintf(stderr,
			"%s: %d level weights for %d levels: give one weight per level, lowest "
			"first (--level-weights or CRUX_LEVEL_WEIGHTS)\n",
			prog, p.n_weights, p.levels);
		return 2;
	}
	if (load_topo(topo_path, &t, &err)) {
		fprintf(stderr, "%s: %s\n", prog, err.msg);
		goto out;
	}
	if (crux_sched_jobs_load(jobs_path, t, &js, &err)) {
		fprintf(stderr, "%s: %s\n", prog, err.msg);
		goto out;
	}
	iter = calloc(js.n ? js.n : 1, sizeof(double));
	riter = calloc(js.n ? js.n : 1, sizeof(double));
	if (!iter || !riter || crux_sched_schedule_new(js.v, js.n, p.levels, &s) ||
	    crux_sched_eval_new(&ev)) {
		fprintf(stderr, "%s: out of memory\n", prog);
		goto out;
	}
	crux_status_t st = crux_sched_run(t, js.v, js.n, &p, pol, s);

	if (!st && given && give_levels(prog, given, js.v, js.n, p.levels, s)) {
		rc = 2;
		goto out;
	}
	/* The levels stay the plan's; every flow goes back to its ECMP draw (the
	 * draw every policy starts from: same seed, job, ends). */
	if (!st && on_ecmp)
		st = crux_sched_paths_ecmp(t, js.v, js.n, p.seed, s);
	if (!st && given_paths && give_paths(prog, given_paths, t, js.v, js.n, s)) {
		rc = 2;
		goto out;
	}
	if (!st)
		st = crux_sched_evaluate(ev, t, js.v, js.n, s, iter, &util);
	rp.seed = p.seed;
	if (!st && ref)
		st = crux_sched_reference(t, js.v, js.n, s, &rp, riter, &rutil, &rs);
	if (st) {
		fprintf(stderr, "%s: scheduling failed: error %d\n", prog, (int)st);
		goto out;
	}
	if (json) {
		struct crux_json j;

		crux_json_init(&j, stdout);
		crux_json_obj(&j);
		crux_json_key(&j, "policy");
		crux_json_str(&j, crux_sched_policy_name(pol));
		crux_json_key(&j, "levels");
		crux_json_i64(&j, p.levels);
		crux_json_key(&j, "seed");
		crux_json_u64(&j, p.seed);
		crux_json_key(&j, "orders");
		crux_json_i64(&j, p.orders);
		crux_json_key(&j, "reference");
		if (s->reference >= 0)
			crux_json_u64(&j, js.v[s->reference].id);
		else
			crux_json_null(&j);
		crux_json_key(&j, "cut_weight");
		crux_json_num(&j, s->cut_weight);
		crux_json_key(&j, "gpu_util");
		crux_json_numf(&j, "%.6f", util);
		crux_json_key(&j, "max_slowdown");
		crux_json_num(&j, p.max_slowdown);
		crux_json_key(&j, "guard_lifts");
		crux_json_i64(&j, s->guard_lifts);
		crux_json_key(&j, "guard_violators");
		crux_json_i64(&j, s->guard_violators);
		crux_json_key(&j, "guard_infeasible");
		crux_json_i64(&j, s->guard_infeasible);
		crux_json_key(&j, "correction");
		crux_json_bool(&j, p.correction);
		crux_json_key(&j, "refine_gain");
		crux_json_num(&j, p.refine_gain);
		crux_json_key(&j, "refine_free");
		crux_json_bool(&j, p.refine_free);
		crux_json_key(&j, "guard_refine");
		crux_json_bool(&j, p.guard_refine);
		crux_json_key(&j, "refine_moves");
		crux_json_i64(&j, s->refine_moves);
		crux_json_key(&j, "paths_search");
		crux_json_i64(&j, p.paths_search);
		crux_json_key(&j, "paths_search_full");
		crux_json_bool(&j, p.paths_search_full);
		crux_json_key(&j, "paths_moves");
		crux_json_i64(&j, s->paths_moves);
		crux_json_key(&j, "paths_evals");
		crux_json_i64(&j, s->paths_evals);
		crux_json_key(&j, "ecmp_paths");
		crux_json_bool(&j, on_ecmp);
		crux_json_key(&j, "paths_given");
		crux_json_bool(&j, given_paths != NULL);
		if (ref) {
			crux_json_key(&j, "ref_model");
			crux_json_obj(&j);
			crux_json_key(&j, "fairness");
			crux_json_str(&j, rp.fairness == CRUX_SCHED_REF_PER_JOB ? "job" : "flow");
			crux_json_key(&j, "phases");
			crux_json_i64(&j, rp.phases);
			crux_json_key(&j, "gpu_util");
			crux_json_numf(&j, "%.6f", rutil);
			crux_json_key(&j, "horizon_s");
			crux_json_num(&j, rs.horizon_s);
			crux_json_key(&j, "events");
			crux_json_u64(&j, rs.events);
			crux_json_key(&j, "starved");
			crux_json_i64(&j, rs.starved);
			crux_json_key(&j, "truncated");
			crux_json_i64(&j, rs.truncated);
			crux_json_end_obj(&j);
		}
		crux_json_key(&j, "jobs");
		crux_json_arr(&j);
		for (size_t i = 0; i < js.n; i++) {
			const struct crux_sched_decision *d = &s->d[i];

			crux_json_obj(&j);
			crux_json_key(&j, "id");
			crux_json_u64(&j, d->id);
			crux_json_key(&j, "level");
			crux_json_i64(&j, d->level);
			crux_json_key(&j, "rank");
			crux_json_i64(&j, d->rank);
			crux_json_key(&j, "intensity");
			crux_json_num(&j, d->intensity);
			crux_json_key(&j, "k");
			crux_json_numf(&j, "%.6g", d->k);
			crux_json_key(&j, "priority");
			crux_json_num(&j, d->priority);
			crux_json_key(&j, "comm_time");
			crux_json_num(&j, d->comm_time);
			crux_json_key(&j, "iter_time");
			crux_json_num(&j, iter[i]);
			crux_json_key(&j, "slowdown");
			crux_json_num(&j, plan_slowdown(&js.v[i], d->comm_time, iter[i]));
			crux_json_key(&j, "infeasible");
			crux_json_bool(&j, d->infeasible);
			if (ref) {
				crux_json_key(&j, "ref_iter_time");
				crux_json_num(&j, riter[i]);
				crux_json_key(&j, "ref_slowdown");
				crux_json_num(&j, plan_slowdown(&js.v[i], d->comm_time, riter[i]));
			}
			crux_json_key(&j, "paths");
			crux_json_arr(&j);
			for (int f = 0; f < js.v[i].n_flows; f++) {
				const struct crux_sched_flow *fl = &js.v[i].flows[f];

				crux_json_obj(&j);
				crux_json_key(&j, "src");
				crux_json_str(&j, t->names[fl->src]);
				crux_json_key(&j, "dst");
				crux_json_str(&j, t->names[fl->dst]);
				crux_json_key(&j, "bytes");
				crux_json_num(&j, fl->bytes);
				crux_json_key(&j, "path");
				crux_json_i64(&j, d->path[f]);
				crux_json_key(&j, "hops");
				crux_json_arr(&j);
				print_path(t, fl, d->path[f], &j);
				crux_json_end_arr(&j);
				crux_json_end_obj(&j);
			}
			crux_json_end_arr(&j);
			crux_json_end_obj(&j);
		}
		crux_json_end_arr(&j);
		crux_json_end_obj(&j);
		crux_json_done(&j);
	} else {
		printf("policy %s%s, %d levels (higher = higher priority), seed %llu, %zu jobs\n",
		       crux_sched_policy_name(pol), on_ecmp ? " (levels on ECMP paths)" : "",
		       p.levels, (unsigned long long)p.seed, js.n);
		if (s->reference >= 0)
			printf("reference job %llu, cut weight %.6g, predicted GPU utilisation "
			       "%.2f%%\n",
			       (unsigned long long)js.v[s->reference].id, s->cut_weight,
			       100 * util);
		if (p.paths_search > 0)
			printf("paths search (%s%s): %d moves kept of %d candidate plans\n",
			       p.paths_search > 1 ? "one or two flows" : "one flow",
			       p.paths_search_full ? ", every candidate refined" : "",
			       s->paths_moves, s->paths_evals);
		if (p.max_slowdown > 0)
			printf("slowdown bound %g: %d level lifts, %d jobs still above it, %d jobs "
			       "no schedule can hold within it (reported, marked *)\n",
			       p.max_slowdown, s->guard_lifts, s->guard_violators,
			       s->guard_infeasible);
		if (ref)
			printf("reference model (per %s, %d phases, %.6g s simulated): GPU "
			       "utilisation %.2f%%, %d starved, %d truncated\n",
			       rp.fairness == CRUX_SCHED_REF_PER_JOB ? "job" : "flow", rp.phases,
			       rs.horizon_s, 100 * rutil, rs.starved, rs.truncated);
		printf("%-10s %5s %5s %12s %8s %12s %10s %10s %9s%s\n", "job", "level", "rank",
		       "intensity", "k", "priority", "comm_s", "iter_s", "slowdown",
		       ref ? "  ref_iter_s" : "");
		for (size_t i = 0; i < js.n; i++) {
			const struct crux_sched_decision *d = &s->d[i];

			printf("%-10llu %5d %5d %12.6g %8.4g %12.6g %10.6g %10.6g %9.4g",
			       (unsigned long long)d->id, d->level, d->rank, d->intensity, d->k,
			       d->priority, d->comm_time, iter[i],
			       plan_slowdown(&js.v[i], d->comm_time, iter[i]));
			if (ref)
				printf("  %10.6g", riter[i]);
			if (d->infeasible)
				printf(" *");
			putchar('\n');
			for (int f = 0; f < js.v[i].n_flows; f++) {
				printf("    path %d: ", d->path[f]);
				print_path(t, &js.v[i].flows[f], d->path[f], NULL);
				putchar('\n');
			}
		}
	}
	rc = 0;
out:
	free(iter);
	free(riter);
	crux_sched_eval_free(ev);
	crux_sched_schedule_free(s);
	crux_sched_jobs_free(&js);
	crux_sched_topo_free(t);
	return rc;
}
