/* SPDX-License-Identifier: Apache-2.0 */
/*
 * crux-sim: command-line front end.
 *
 *   crux-sim gen   [workload options] [--out FILE]
 *   crux-sim run   [--trace FILE | workload options] [topology options]
 *                  [--policy LIST|all] [--levels K] [--json FILE] [--plot PREFIX]
 *                  [--csv FILE] [--title TEXT] [--progress|--no-progress]
 *   crux-sim speed [workload options] [topology options] [--json FILE]
 *
 * Run 'crux-sim help' for every option.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "crux/env.h"
#include "crux/json.h"
#include "crux/sched.h"
#include "crux/sim.h"

#define MAX_RUNS 24

/* One policy run of "run": the policy and its fairness guard settings. */
struct run_spec {
	int policy;
	double max_slowdown; /* 0 = no bound */
	int weighted;	     /* use --level-weights */
	double promote;	     /* promotion by measurement at this bound; 0 = off */
	int per_plan;	     /* "/p": the bound on every plan, not each job's mean */
	int enforce_all;     /* "/e": every bound enforced, no feasibility estimate */
	int guard_refine;    /* "/r": the refinement again after the guard */
};

struct cli {
	struct crux_sim_workload_params wp;
	struct crux_sim_config cfg;
	const char *trace_path;
	const char *out_path;
	const char *json_path;
	const char *plot_prefix;
	const char *csv_path;
	const char *title;
	const char *experiment;
	struct run_spec specs[MAX_RUNS];
	size_t n_policies;
	uint32_t n_weights; /* --level-weights (default CRUX_LEVEL_WEIGHTS) */
	double weight[CRUX_SIM_MAX_WEIGHTS];
	double env_bound; /* CRUX_MAX_SLOWDOWN: the bound of Crux policies named without @ */
	int progress;	  /* -1 auto (TTY), 0 off, 1 on */
	double slice_s;
};

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: crux-sim gen|run|speed [options]\n"
	    "  gen    write a generated workload trace (--out FILE, default stdout)\n"
	    "  run    simulate a trace under one or more policies and report\n"
	    "  speed  benchmark: the event-jumping simulator against stepping through every\n"
	    "         iteration (measured on a slice, extrapolated), JSON to --json\n"
	    "workload (when no --trace):\n"
	    "  --jobs N (5000) --days D (14) --load L (1.0) --seed S (1) --median-s S (3600)\n"
	    "  --sigma X (1.2) --max-job-gpus N (256) --gpu-tflops X (312)\n"
	    "topology:\n"
	    "  --topo clos2|dsided|clos3|lingjun:CSV|file:PATH (clos2)\n"
	    "  --host-gbps X --tor-gbps X --agg-gbps X --hosts-per-tor N --hosts N\n"
	    "  --gpus-per-host N --channels N --tors N --aggs N --cores N\n"
	    "  --placement pack|random|dally|sjf-bco (pack: fewest ToRs; random: scattered\n"
	    "                  free hosts; dally: wait for one ToR, network-sensitive\n"
	    "                  preemption; sjf-bco: smallest job first, least contended ToRs)\n"
	    "  --delay-timer-s S (dally: the same timer for every sensitive job; default\n"
	    "                  auto-tuned per job)  --no-preempt (dally without preemption)\n"
	    "policies:\n"
	    "  --policy LIST   comma-separated: ecmp,sincronia,taccl,cassini-lite,crux-pa,\n"
	    "                  crux-ps-pa,crux-full; on Crux's paths: sincronia-lcp,\n"
	    "                  cassini-lite-lcp; diagnostics (Crux's paths and compression):\n"
	    "                  crux-random-order,crux-reversed-order,crux-one-level;\n"
	    "                  or 'all' (default crux-full); a Crux\n"
	    "                  policy takes the fairness guard as NAME@BOUND (max mean slowdown\n"
	    "                  of each job, e.g. crux-full@2; /p: on every plan instead),\n"
	    "                  NAME~BOUND (cruxd's promotion by measured slowdown, per event)\n"
	    "                  and /w for --level-weights (crux-full@2/w); /e: the guard\n"
	    "                  enforces every bound, without reporting infeasible jobs;\n"
	    "                  /r: the refinement again after the guard (crux-full@1.5/r)\n"
	    "  --level-weights W,W,...  one weight per level, lowest first (guaranteed\n"
	    "                  share weight/sum; default CRUX_LEVEL_WEIGHTS, else 1 per level)\n"
	    "                  CRUX_MAX_SLOWDOWN, when set, bounds the Crux policies named\n"
	    "                  without @ or ~ (their labels show it)\n"
	    "  --levels K (8)  --horizon-s S (0: run until every job finished)\n"
	    "  --eval-model phase-aware|all-at-once  the scheduler's steady state\n"
	    "                  (default phase-aware; all-at-once: the first model)\n"
	    "  --ref-snapshots N  run the plan of N moments of the window through the\n"
	    "                  reference model too (slow; not for cassini) (0)\n"
	    "  --window-s S (0: last arrival)  --bin-s S (window/336)\n"
	    "output:\n"
	    "  --json FILE  --csv FILE (per-job table of the last policy)  --plot PREFIX\n"
	    "  (PREFIX-util.png, PREFIX-slowdown.png)  --title TEXT  --experiment NAME\n"
	    "  --progress / --no-progress (default: progress bar when stderr is a TTY)\n"
	    "  --trace FILE  replay a trace (format: crux/sim_trace.h, README)\n"
	    "  --slice-s S   speed: simulated seconds the stepping baseline runs (21600)\n");
}

enum {
	O_JOBS = 256,
	O_DAYS,
	O_LOAD,
	O_SEED,
	O_MEDIAN,
	O_SIGMA,
	O_MAXG,
	O_TFLOPS,
	O_TOPO,
	O_HOSTG,
	O_TORG,
	O_AGGG,
	O_HPT,
	O_HOSTS,
	O_GPH,
	O_CHAN,
	O_TORS,
	O_AGGS,
	O_CORES,
	O_POLICY,
	O_LEVELS,
	O_HORIZON,
	O_WINDOW,
	O_BIN,
	O_JSON,
	O_CSV,
	O_PLOT,
	O_TITLE,
	O_EXP,
	O_PROGRESS,
	O_NOPROGRESS,
	O_TRACE,
	O_OUT,
	O_SLICE,
	O_HELP,
	O_PLACE,
	O_WEIGHTS,
	O_EVALM,
	O_REFSNAP,
	O_DELAY,
	O_NOPREEMPT,
};

static const struct option opts[] = {
    {"jobs", 1, 0, O_JOBS},
    {"days", 1, 0, O_DAYS},
    {"load", 1, 0, O_LOAD},
    {"seed", 1, 0, O_SEED},
    {"median-s", 1, 0, O_MEDIAN},
    {"sigma", 1, 0, O_SIGMA},
    {"max-job-gpus", 1, 0, O_MAXG},
    {"gpu-tflops", 1, 0, O_TFLOPS},
    {"topo", 1, 0, O_TOPO},
    {"host-gbps", 1, 0, O_HOSTG},
    {"tor-gbps", 1, 0, O_TORG},
    {"agg-gbps", 1, 0, O_AGGG},
    {"hosts-per-tor", 1, 0, O_HPT},
    {"hosts", 1, 0, O_HOSTS},
    {"gpus-per-host", 1, 0, O_GPH},
    {"channels", 1, 0, O_CHAN},
    {"tors", 1, 0, O_TORS},
    {"aggs", 1, 0, O_AGGS},
    {"cores", 1, 0, O_CORES},
    {"policy", 1, 0, O_POLICY},
    {"levels", 1, 0, O_LEVELS},
    {"horizon-s", 1, 0, O_HORIZON},
    {"window-s", 1, 0, O_WINDOW},
    {"bin-s", 1, 0, O_BIN},
    {"json", 1, 0, O_JSON},
    {"csv", 1, 0, O_CSV},
    {"plot", 1, 0, O_PLOT},
    {"title", 1, 0, O_TITLE},
    {"experiment", 1, 0, O_EXP},
    {"progress", 0, 0, O_PROGRESS},
    {"no-progress", 0, 0, O_NOPROGRESS},
    {"trace", 1, 0, O_TRACE},
    {"out", 1, 0, O_OUT},
    {"slice-s", 1, 0, O_SLICE},
    {"help", 0, 0, O_HELP},
    {"placement", 1, 0, O_PLACE},
    {"level-weights", 1, 0, O_WEIGHTS},
    {"eval-model", 1, 0, O_EVALM},
    {"ref-snapshots", 1, 0, O_REFSNAP},
    {"delay-timer-s", 1, 0, O_DELAY},
    {"no-preempt", 0, 0, O_NOPREEMPT},
    {0, 0, 0, 0},
};

static int num(const char *opt, const char *v, double min, double max, double *out)
{
	char err[256];
	if (crux_parse_double(opt, v, min, max, out, err, sizeof(err)) != CRUX_OK) {
		fprintf(stderr, "crux-sim: --%s: %s\n", opt, err);
		return -1;
	}
	return 0;
}

static int inum(const char *opt, const char *v, long long min, long long max, uint32_t *out)
{
	char err[256];
	long long x;
	if (crux_parse_int(opt, v, min, max, &x, err, sizeof(err)) != CRUX_OK) {
		fprintf(stderr, "crux-sim: --%s: %s\n", opt, err);
		return -1;
	}
	*out = (uint32_t)x;
	return 0;
}

/* NAME[@BOUND][~BOUND][/w][/p]: a policy with the fairness guard's settings. */
static int parse_spec(const char *tok, struct run_spec *out)
{
	char name[64], *at, *w, *tl;
	enum crux_sim_policy p;
	struct run_spec r = {0, 0, 0, 0, 0, 0, 0};

	snprintf(name, sizeof(name), "%s", tok);
	/* Suffixes /w, /p, /e and /r, in any order. */
	for (int k = 0; k < 4; k++) {
		size_t len = strlen(name);

		w = len > 2 ? name + len - 2 : NULL;
		if (w && !strcmp(w, "/w"))
			r.weighted = 1;
		else if (w && !strcmp(w, "/p"))
			r.per_plan = 1;
		else if (w && !strcmp(w, "/e"))
			r.enforce_all = 1;
		else if (w && !strcmp(w, "/r"))
			r.guard_refine = 1;
		else
			break;
		*w = 0;
	}
	tl = strchr(name, '~');
	if (tl) {
		*tl++ = 0;
		if (num("policy", tl, 1, 1e6, &r.promote))
			return -1;
	}
	at = strchr(name, '@');
	if (at) {
		*at++ = 0;
		if (num("policy", at, 1, 1e6, &r.max_slowdown))
			return -1;
	}
	if (crux_sim_policy_parse(name, &p) != CRUX_OK) {
		fprintf(stderr,
			"crux-sim: --policy: unknown policy '%s' (ecmp, sincronia, "
			"taccl, cassini-lite, crux-pa, crux-ps-pa, crux-full, sincronia-lcp, "
			"cassini-lite-lcp, crux-random-order, crux-reversed-order, "
			"crux-one-level, all; a Crux policy "
			"may end in @BOUND, /w and /p, e.g. crux-full@2/w)\n",
			tok);
		return -1;
	}
	if ((r.max_slowdown > 0 || r.weighted || r.promote > 0) && p != CRUX_SIM_CRUX_PA &&
	    p != CRUX_SIM_CRUX_PS_PA && p != CRUX_SIM_CRUX_FULL) {
		fprintf(stderr,
			"crux-sim: --policy: '%s': only the Crux policies take a "
			"fairness guard (@BOUND, ~BOUND, /w, /p)\n",
			tok);
		return -1;
	}
	if (r.enforce_all && !(r.max_slowdown > 0)) {
		fprintf(stderr,
			"crux-sim: --policy: '%s': /e enforces every bound and needs one, "
			"e.g. crux-full@1.5/e\n",
			tok);
		return -1;
	}
	if (r.guard_refine && (!(r.max_slowdown > 0) || p != CRUX_SIM_CRUX_FULL || r.enforce_all)) {
		fprintf(stderr,
			"crux-sim: --policy: '%s': /r refines Crux-full's plan after the guard "
			"and needs a bound, without /e, e.g. crux-full@1.5/r\n",
			tok);
		return -1;
	}
	if (r.per_plan && !(r.max_slowdown > 0)) {
		fprintf(stderr,
			"crux-sim: --policy: '%s': /p bounds every plan's prediction and "
			"needs a bound, e.g. crux-full@2/p\n",
			tok);
		return -1;
	}
	r.policy = p;
	*out = r;
	return 0;
}

static int parse_policies(struct cli *c, const char *v)
{
	char buf[512];
	char *save = NULL;

	c->n_policies = 0;
	snprintf(buf, sizeof(buf), "%s", v);
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (strcmp(tok, "all") == 0) {
			/* Baselines first, so gains are read against ECMP. */
			for (int p = 0; p < CRUX_SIM_N_POLICIES; p++) {
				if (c->n_policies == MAX_RUNS)
					break;
				c->specs[c->n_policies++] = (struct run_spec){p, 0, 0, 0, 0, 0, 0};
			}
			continue;
		}
		if (c->n_policies == MAX_RUNS) {
			fprintf(stderr, "crux-sim: --policy: more than %d runs\n", MAX_RUNS);
			return -1;
		}
		if (parse_spec(tok, &c->specs[c->n_policies]))
			return -1;
		c->n_policies++;
	}
	if (!c->n_policies) {
		fprintf(stderr, "crux-sim: --policy: empty list\n");
		return -1;
	}
	return 0;
}

static int parse_weights(struct cli *c, const char *v)
{
	char buf[1024];
	char *save = NULL;

	c->n_weights = 0;
	snprintf(buf, sizeof(buf), "%s", v);
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (c->n_weights == CRUX_SIM_MAX_WEIGHTS) {
			fprintf(stderr, "crux-sim: --level-weights: more than %d weights\n",
				CRUX_SIM_MAX_WEIGHTS);
			return -1;
		}
		if (num("level-weights", tok, 1e-6, 1e9, &c->weight[c->n_weights]))
			return -1;
		c->n_weights++;
	}
	if (!c->n_weights) {
		fprintf(stderr, "crux-sim: --level-weights: empty list\n");
		return -1;
	}
	return 0;
}

static int parse_topo(struct cli *c, const char *v)
{
	enum crux_sim_topo_kind k;
	const char *path = NULL;
	if (strcmp(v, "clos2") == 0)
		k = CRUX_SIM_TOPO_CLOS2;
	else if (strcmp(v, "dsided") == 0 || strcmp(v, "double-sided") == 0)
		k = CRUX_SIM_TOPO_DOUBLE_SIDED;
	else if (strcmp(v, "clos3") == 0)
		k = CRUX_SIM_TOPO_CLOS3;
	else if (strncmp(v, "lingjun:", 8) == 0 && v[8])
		k = CRUX_SIM_TOPO_LINGJUN, path = v + 8;
	else if (strncmp(v, "file:", 5) == 0 && v[5])
		k = CRUX_SIM_TOPO_FILE, path = v + 5;
	else {
		fprintf(stderr,
			"crux-sim: --topo: '%s' is not clos2, dsided, clos3, lingjun:CSV "
			"or file:PATH\n",
			v);
		return -1;
	}
	c->cfg.topo = k;
	c->cfg.topo_path = path;
	crux_sim_topo_defaults(k, &c->cfg.tp);
	return 0;
}

/* Two passes: --topo first (it sets defaults), then everything else. */
static int parse_args(struct cli *c, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--topo") == 0 && i + 1 < argc) {
			if (parse_topo(c, argv[i + 1]))
				return -1;
		} else if (strncmp(argv[i], "--topo=", 7) == 0) {
			if (parse_topo(c, argv[i] + 7))
				return -1;
		}
	}
	optind = 1;
	int o;
	double d;
	uint32_t u;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		int bad = 0;
		switch (o) {
		case O_JOBS:
			bad = inum("jobs", optarg, 1, CRUX_SIM_TRACE_MAX_JOBS, &c->wp.n_jobs);
			break;
		case O_DAYS:
			bad = num("days", optarg, 1e-3, 3650, &d);
			c->wp.span_s = d * 86400;
			break;
		case O_LOAD:
			bad = num("load", optarg, 0.01, 10, &c->wp.load);
			break;
		case O_SEED: {
			char err[256];
			long long x;
			if (crux_parse_int("seed", optarg, 0, INT64_MAX, &x, err, sizeof(err))) {
				fprintf(stderr, "crux-sim: --seed: %s\n", err);
				bad = 1;
			}
			c->wp.seed = c->cfg.seed = (uint64_t)x;
			break;
		}
		case O_MEDIAN:
			bad = num("median-s", optarg, 1, 1e7, &c->wp.median_s);
			break;
		case O_SIGMA:
			bad = num("sigma", optarg, 0, 5, &c->wp.sigma);
			break;
		case O_MAXG:
			bad = inum("max-job-gpus", optarg, 1, CRUX_SIM_TRACE_MAX_GPUS,
				   &c->wp.max_job_gpus);
			break;
		case O_TFLOPS:
			bad = num("gpu-tflops", optarg, 0.1, 1e6, &c->wp.gpu_tflops);
			break;
		case O_TOPO:
			break; /* first pass */
		case O_HOSTG:
			bad = num("host-gbps", optarg, 0.001, 1e7, &c->cfg.tp.host_gbps);
			break;
		case O_TORG:
			bad = num("tor-gbps", optarg, 0.001, 1e7, &c->cfg.tp.tor_gbps);
			break;
		case O_AGGG:
			bad = num("agg-gbps", optarg, 0.001, 1e7, &c->cfg.tp.agg_gbps);
			break;
		case O_HPT:
			bad = inum("hosts-per-tor", optarg, 1, 4096, &c->cfg.tp.hosts_per_tor);
			break;
		case O_HOSTS:
			bad = inum("hosts", optarg, 1, 1000000, &c->cfg.tp.n_hosts);
			break;
		case O_GPH:
			bad = inum("gpus-per-host", optarg, 1, 64, &c->cfg.tp.gpus_per_host);
			break;
		case O_CHAN:
			bad = inum("channels", optarg, 1, 64, &c->cfg.tp.channels);
			break;
		case O_TORS:
			bad = inum("tors", optarg, 1, 100000, &c->cfg.tp.n_tor);
			break;
		case O_AGGS:
			bad = inum("aggs", optarg, 1, 100000, &c->cfg.tp.n_agg);
			break;
		case O_CORES:
			bad = inum("cores", optarg, 1, 100000, &c->cfg.tp.n_core);
			break;
		case O_POLICY:
			bad = parse_policies(c, optarg);
			break;
		case O_LEVELS:
			bad = inum("levels", optarg, 1, 64, &u);
			c->cfg.levels = u;
			break;
		case O_HORIZON:
			bad = num("horizon-s", optarg, 0, 1e10, &c->cfg.horizon_s);
			break;
		case O_WINDOW:
			bad = num("window-s", optarg, 0, 1e10, &c->cfg.window_s);
			break;
		case O_BIN:
			bad = num("bin-s", optarg, 0, 1e10, &c->cfg.bin_s);
			break;
		case O_JSON:
			c->json_path = optarg;
			break;
		case O_CSV:
			c->csv_path = optarg;
			break;
		case O_PLOT:
			c->plot_prefix = optarg;
			break;
		case O_TITLE:
			c->title = optarg;
			break;
		case O_EXP:
			c->experiment = optarg;
			break;
		case O_PROGRESS:
			c->progress = 1;
			break;
		case O_NOPROGRESS:
			c->progress = 0;
			break;
		case O_TRACE:
			c->trace_path = optarg;
			break;
		case O_OUT:
			c->out_path = optarg;
			break;
		case O_SLICE:
			bad = num("slice-s", optarg, 1, 1e9, &c->slice_s);
			break;
		case O_WEIGHTS:
			bad = parse_weights(c, optarg);
			break;
		case O_REFSNAP:
			bad = inum("ref-snapshots", optarg, 0, 10000, &c->cfg.ref_snapshots);
			break;
		case O_EVALM:
			if (strcmp(optarg, "phase-aware") == 0) {
				c->cfg.eval_model = CRUX_SCHED_EVAL_PHASE_AWARE;
			} else if (strcmp(optarg, "all-at-once") == 0) {
				c->cfg.eval_model = CRUX_SCHED_EVAL_ALL_AT_ONCE;
			} else {
				fprintf(stderr,
					"crux-sim: --eval-model: '%s' is not phase-aware or "
					"all-at-once\n",
					optarg);
				bad = 1;
			}
			break;
		case O_PLACE:
			if (crux_sim_placement_parse(optarg, &c->cfg.placement) != CRUX_OK) {
				fprintf(stderr,
					"crux-sim: --placement: '%s' is not pack, random, "
					"dally or sjf-bco\n",
					optarg);
				bad = 1;
			}
			break;
		case O_DELAY:
			bad |= num("delay-timer-s", optarg, 1, 30 * 86400.0, &c->cfg.delay_timer_s);
			break;
		case O_NOPREEMPT:
			c->cfg.no_preempt = 1;
			break;
		case O_HELP:
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
		if (bad)
			return -1;
	}
	if (optind < argc) {
		fprintf(stderr, "crux-sim: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	if ((c->cfg.delay_timer_s > 0 || c->cfg.no_preempt) &&
	    c->cfg.placement != CRUX_SIM_PLACE_DALLY) {
		fprintf(stderr,
			"crux-sim: --delay-timer-s and --no-preempt set Dally's placement: "
			"add --placement dally (now %s)\n",
			crux_sim_placement_name(c->cfg.placement));
		return -1;
	}
	c->wp.total_gpus =
	    c->cfg.tp.gpus_per_host *
	    (c->cfg.topo == CRUX_SIM_TOPO_DOUBLE_SIDED ? c->cfg.tp.n_hosts
	     : c->cfg.topo == CRUX_SIM_TOPO_CLOS3
		 ? c->cfg.tp.n_pods * c->cfg.tp.tors_per_pod * c->cfg.tp.hosts_per_tor
	     : c->cfg.topo == CRUX_SIM_TOPO_CLOS2 ? c->cfg.tp.n_tor * c->cfg.tp.hosts_per_tor
						  : 847); /* Lingjun hosts */
	return 0;
}

static int get_trace(struct cli *c, struct crux_sim_trace **t)
{
	char err[512];
	crux_status_t st;
	if (c->trace_path)
		st = crux_sim_trace_load(c->trace_path, t, err, sizeof(err));
	else
		st = crux_sim_workload_generate(&c->wp, t, err, sizeof(err));
	if (st != CRUX_OK) {
		fprintf(stderr, "crux-sim: %s\n", err);
		return -1;
	}
	return 0;
}

static int cmd_gen(struct cli *c)
{
	struct crux_sim_trace *t;
	if (get_trace(c, &t))
		return 1;
	FILE *f = c->out_path ? fopen(c->out_path, "w") : stdout;
	if (!f) {
		perror(c->out_path);
		crux_sim_trace_free(t);
		return 1;
	}
	crux_status_t st = crux_sim_trace_write(f, t);
	if (f != stdout && fclose(f) != 0)
		st = CRUX_ERR_IO;
	crux_sim_trace_free(t);
	if (st != CRUX_OK) {
		fprintf(stderr, "crux-sim: cannot write the trace\n");
		return 1;
	}
	return 0;
}

/* The "topology" and "workload" members of a result file (arg: the struct cli). */
static void topo_json(struct crux_json *j, const void *arg)
{
	const struct cli *c = arg;
	const struct crux_sim_topo_params *p = &c->cfg.tp;
	static const char *const kinds[] = {"clos2", "double-sided", "lingjun", "clos3", "file"};

	crux_json_key(j, "topology");
	crux_json_obj(j);
	crux_json_field_str(j, "kind", kinds[c->cfg.topo]);
	crux_json_field_u64(j, "tors", p->n_tor);
	crux_json_field_u64(j, "aggs", p->n_agg);
	crux_json_field_u64(j, "cores", p->n_core);
	crux_json_field_u64(j, "hosts_per_tor", p->hosts_per_tor);
	crux_json_field_u64(j, "hosts", p->n_hosts);
	crux_json_field_u64(j, "host_links", p->host_links);
	crux_json_field_u64(j, "gpus_per_host", p->gpus_per_host);
	crux_json_field_u64(j, "channels", p->channels);
	crux_json_field_numf(j, "host_gbps", "%g", p->host_gbps);
	crux_json_field_numf(j, "tor_gbps", "%g", p->tor_gbps);
	crux_json_field_numf(j, "agg_gbps", "%g", p->agg_gbps);
	crux_json_field_str(j, "placement", crux_sim_placement_name(c->cfg.placement));
	crux_json_field_numf(j, "delay_timer_s", "%g", c->cfg.delay_timer_s);
	crux_json_field_bool(j, "preempt", !c->cfg.no_preempt);
	crux_json_end_obj(j);
	crux_json_key(j, "workload");
	crux_json_obj(j);
	crux_json_field_str(j, "trace", c->trace_path ? c->trace_path : "generated");
	crux_json_field_u64(j, "jobs", c->wp.n_jobs);
	crux_json_field_numf(j, "days", "%g", c->wp.span_s / 86400);
	crux_json_field_numf(j, "load", "%g", c->wp.load);
	crux_json_field_u64(j, "seed", c->wp.seed);
	crux_json_end_obj(j);
}

static int cmd_run(struct cli *c)
{
	struct crux_sim_trace *t = NULL;
	struct crux_sim_result *res[MAX_RUNS] = {0};
	char err[1024];
	int rc = 1;

	if (get_trace(c, &t))
		return 1;
	for (size_t i = 0; i < c->n_policies; i++) {
		struct crux_sim_config cfg = c->cfg;
		const struct run_spec *rs = &c->specs[i];
		char label[CRUX_SIM_LABEL_MAX];

		cfg.policy = (enum crux_sim_policy)rs->policy;
		cfg.progress = c->progress < 0 ? isatty(2) : c->progress;
		cfg.max_slowdown = rs->max_slowdown;
		if (!(rs->max_slowdown > 0) && !(rs->promote > 0) && c->env_bound > 0 &&
		    (rs->policy == CRUX_SIM_CRUX_PA || rs->policy == CRUX_SIM_CRUX_PS_PA ||
		     rs->policy == CRUX_SIM_CRUX_FULL))
			cfg.max_slowdown = c->env_bound;
		cfg.promote_bound = rs->promote;
		cfg.per_plan = rs->per_plan;
		cfg.guard_enforce_all = rs->enforce_all;
		cfg.guard_refine = rs->guard_refine;
		if (rs->weighted) {
			cfg.n_weights = c->n_weights ? c->n_weights : cfg.levels;
			for (uint32_t l = 0; l < cfg.n_weights; l++)
				cfg.weight[l] = c->n_weights ? c->weight[l] : 1.0;
		}
		crux_sim_label(&cfg, label, sizeof(label));
		if (crux_sim_run(t, &cfg, &res[i], err, sizeof(err)) != CRUX_OK) {
			fprintf(stderr, "crux-sim: %s: %s\n", label, err);
			goto out;
		}
	}
	const struct crux_sim_result *const *rr = (const struct crux_sim_result *const *)res;
	printf("%zu jobs, %u GPUs, window %.2f days, %u levels (gains against %s)\n", t->n_jobs,
	       res[0]->total_gpus, res[0]->window_s / 86400, c->cfg.levels, res[0]->label);
	crux_sim_print_summary(stdout, rr, c->n_policies);
	if (c->json_path) {
		if (crux_sim_write_json(c->json_path, c->experiment ? c->experiment : "crux-sim",
					rr, c->n_policies, topo_json, c) != CRUX_OK) {
			fprintf(stderr, "crux-sim: cannot write %s\n", c->json_path);
			goto out;
		}
		printf("json: %s\n", c->json_path);
	}
	if (c->csv_path &&
	    crux_sim_write_jobs_csv(c->csv_path, res[c->n_policies - 1]) != CRUX_OK) {
		fprintf(stderr, "crux-sim: cannot write %s\n", c->csv_path);
		goto out;
	}
	if (c->plot_prefix) {
		if (crux_sim_plot(c->plot_prefix, c->title ? c->title : "crux-sim", rr,
				  c->n_policies, err, sizeof(err)) != CRUX_OK) {
			fprintf(stderr, "crux-sim: plot: %s\n", err);
			goto out;
		}
		printf("plots: %s-util.png %s-slowdown.png %s-guard.png\n", c->plot_prefix,
		       c->plot_prefix, c->plot_prefix);
	}
	rc = 0;
out:
	for (size_t i = 0; i < c->n_policies; i++)
		crux_sim_result_free(res[i]);
	crux_sim_trace_free(t);
	return rc;
}

/*
 * Benchmark: the full trace with event jumping (every policy asked for),
 * against the iteration-stepping baseline on the first slice_s simulated
 * seconds, extrapolated linearly to the same simulated span.
 */
static int cmd_speed(struct cli *c)
{
	struct crux_sim_trace *t = NULL;
	struct crux_sim_result *jump = NULL, *slice_jump = NULL, *slice_step = NULL;
	char err[1024];
	int rc = 1;

	if (get_trace(c, &t))
		return 1;
	struct crux_sim_config cfg = c->cfg;
	cfg.policy = (enum crux_sim_policy)c->specs[0].policy;
	cfg.max_slowdown = c->specs[0].max_slowdown;
	cfg.progress = c->progress < 0 ? isatty(2) : c->progress;
	if (crux_sim_run(t, &cfg, &jump, err, sizeof(err)) != CRUX_OK)
		goto fail;
	cfg.progress = 0;
	cfg.horizon_s = c->slice_s;
	if (crux_sim_run(t, &cfg, &slice_jump, err, sizeof(err)) != CRUX_OK)
		goto fail;
	cfg.step_iterations = 1;
	if (crux_sim_run(t, &cfg, &slice_step, err, sizeof(err)) != CRUX_OK)
		goto fail;
	double span = jump->end_s;
	/*
	 * A stepping simulator does the same evaluations plus one heap step per
	 * iteration of every job: its cost per step is measured on the slice
	 * (stepping minus jumping wall time over the steps taken) and applied to
	 * every iteration of the whole trace.
	 */
	double iters = 0;
	for (size_t i = 0; i < jump->n_jobs; i++)
		iters += jump->jobs[i].iterations_done;
	double per_step = slice_step->steps ? (slice_step->wall_s - slice_jump->wall_s) /
						  (double)slice_step->steps
					    : 0;
	per_step = per_step > 0 ? per_step : slice_step->wall_s / (double)(slice_step->steps + 1);
	double step_est = jump->wall_s + per_step * iters;
	double ratio = step_est / jump->wall_s;
	/* Same slice, same answer: the utilisation both modes computed. */
	double diff = slice_step->mean_util - slice_jump->mean_util;
	printf("policy %s: %zu jobs, %u GPUs, %.2f simulated days\n",
	       crux_sim_policy_name(cfg.policy), t->n_jobs, jump->total_gpus, span / 86400);
	printf("  event jumping, whole trace:        %8.2f s wall (%zu events, %zu evaluations)\n",
	       jump->wall_s, jump->events, jump->evaluations);
	printf("  iteration stepping, %.0f s slice: %8.2f s wall (%llu iteration steps)\n",
	       c->slice_s, slice_step->wall_s, (unsigned long long)slice_step->steps);
	printf("  jumping on the same slice:         %8.2f s wall\n", slice_jump->wall_s);
	printf("  stepping cost: %.1f ns per iteration step; the trace has %.3g iterations\n",
	       per_step * 1e9, iters);
	printf("  stepping extrapolated to the trace: %8.0f s -> jumping is %.0fx faster\n",
	       step_est, ratio);
	printf("  slice utilisation: stepping %.6f, jumping %.6f (difference %.2e)\n",
	       slice_step->mean_util, slice_jump->mean_util, diff);
	if (c->json_path) {
		FILE *f = fopen(c->json_path, "w");
		if (!f) {
			perror(c->json_path);
			goto out;
		}
		struct crux_json j;
		crux_json_init_lines(&j, f);
		crux_json_obj(&j);
		crux_json_field_str(&j, "benchmark", "sim-speed");
		topo_json(&j, c);
		crux_json_field_str(&j, "policy", crux_sim_policy_name(cfg.policy));
		crux_json_field_u64(&j, "jobs", t->n_jobs);
		crux_json_field_u64(&j, "gpus", jump->total_gpus);
		crux_json_field_numf(&j, "simulated_days", "%.4f", span / 86400);
		crux_json_field_numf(&j, "jump_wall_s", "%.4f", jump->wall_s);
		crux_json_field_u64(&j, "events", jump->events);
		crux_json_field_u64(&j, "evaluations", jump->evaluations);
		crux_json_field_str(
		    &j, "baseline",
		    "stepping through every iteration of every job (binary heap of iteration "
		    "boundaries) with the same steady states: the jump run's wall time plus the "
		    "per-step cost measured on the first slice_s simulated seconds (stepping "
		    "minus jumping wall time over the steps) times every iteration of the trace");
		crux_json_field_numf(&j, "trace_iterations", "%.6g", iters);
		crux_json_field_numf(&j, "step_cost_ns", "%.2f", per_step * 1e9);
		crux_json_field_numf(&j, "slice_s", "%.1f", c->slice_s);
		crux_json_field_numf(&j, "step_slice_wall_s", "%.4f", slice_step->wall_s);
		crux_json_field_u64(&j, "step_slice_steps", slice_step->steps);
		crux_json_field_numf(&j, "jump_slice_wall_s", "%.4f", slice_jump->wall_s);
		crux_json_field_numf(&j, "step_extrapolated_wall_s", "%.1f", step_est);
		crux_json_field_numf(&j, "speedup_vs_stepping", "%.1f", ratio);
		crux_json_field_numf(&j, "slice_util_jump", "%.8f", slice_jump->mean_util);
		crux_json_field_numf(&j, "slice_util_step", "%.8f", slice_step->mean_util);
		crux_json_field_str(
		    &j, "goal",
		    "<= 60 s for two weeks, 2,000 GPUs, 5,000 jobs on a 2-core machine");
		crux_json_field_bool(&j, "meets_goal", jump->wall_s <= 60);
		crux_json_end_obj(&j);
		crux_json_done(&j);
		if (ferror(f)) {
			fclose(f);
			fprintf(stderr, "crux-sim: cannot write %s\n", c->json_path);
			goto out;
		}
		if (fclose(f) != 0) {
			fprintf(stderr, "crux-sim: cannot write %s\n", c->json_path);
			goto out;
		}
		printf("json: %s\n", c->json_path);
	}
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "crux-sim: %s\n", err);
out:
	crux_sim_result_free(jump);
	crux_sim_result_free(slice_jump);
	crux_sim_result_free(slice_step);
	crux_sim_trace_free(t);
	return rc;
}

/* CRUX_MAX_SLOWDOWN and CRUX_LEVEL_WEIGHTS, as the scheduler library reads them. */
static int guard_env(struct cli *c)
{
	struct crux_sched_params p;
	struct crux_sched_err err;

	crux_sched_params_default(&p);
	if (crux_sched_params_env(&p, &err) != CRUX_OK) {
		fprintf(stderr, "crux-sim: %s\n", err.msg);
		return -1;
	}
	c->env_bound = p.max_slowdown;
	c->n_weights = (uint32_t)p.n_weights;
	for (int l = 0; l < p.n_weights && l < CRUX_SIM_MAX_WEIGHTS; l++)
		c->weight[l] = p.weight[l];
	return 0;
}

int main(int argc, char **argv)
{
	struct cli c;
	memset(&c, 0, sizeof(c));
	crux_sim_workload_defaults(&c.wp);
	crux_sim_config_defaults(&c.cfg);
	c.specs[0] = (struct run_spec){CRUX_SIM_CRUX_FULL, 0, 0, 0, 0, 0, 0};
	c.n_policies = 1;
	c.progress = -1;
	c.slice_s = 21600;
	if (argc < 2 || strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	const char *cmd = argv[1];
	if (guard_env(&c))
		return 2;
	if (parse_args(&c, argc - 1, argv + 1))
		return 2;
	if (strcmp(cmd, "gen") == 0)
		return cmd_gen(&c);
	if (strcmp(cmd, "run") == 0)
		return cmd_run(&c);
	if (strcmp(cmd, "speed") == 0)
		return cmd_speed(&c);
	fprintf(stderr, "crux-sim: unknown command '%s' (gen, run, speed, help)\n", cmd);
	return 2;
}
