/* SPDX-License-Identifier: Apache-2.0 */
/*
 * crux-sim: trace-driven simulator of training jobs sharing one fabric.
 *
 * Jobs arrive (trace), are placed on free GPUs, run their iterations and
 * leave. On every arrival and departure the policy is re-run (paths, priority
 * levels, or CASSINI time shifts) and the steady state of the running set is
 * evaluated: each job's iteration time, from strict priority between levels
 * and max-min fair sharing within a level. Between two events every job
 * advances at its steady rate, so the simulator jumps from event to event.
 */
#ifndef CRUX_SIM_H
#define CRUX_SIM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "crux/sim_trace.h"
#include "crux/status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum crux_sim_policy {
	CRUX_SIM_ECMP = 0,   /* ECMP paths, one level, fair sharing */
	CRUX_SIM_SINCRONIA,  /* BSSI order, level = max(K-1-rank, 0) */
	CRUX_SIM_TACCL,	     /* least congested links, more hops = higher level */
	CRUX_SIM_CASSINI,    /* CASSINI-lite: ECMP paths, one level, time-shifted phases
			      * (no placement affinity) */
	CRUX_SIM_CRUX_PA,    /* Crux priority assignment only */
	CRUX_SIM_CRUX_PS_PA, /* + path selection */
	CRUX_SIM_CRUX_FULL,  /* + priority compression */
	/* The baselines on equal paths: Crux's own least-congested paths (those
	 * of crux-ps-pa and crux-full), so that only the priority or phase
	 * mechanism differs. */
	CRUX_SIM_SINCRONIA_LCP, /* Sincronia's order and rank mapping */
	CRUX_SIM_CASSINI_LCP,	/* CASSINI-lite's shifts, one level */
	/* Diagnostics of the evaluator (review F2): Crux-full's paths and
	 * Max-K-Cut compression with another priority order, or one level. */
	CRUX_SIM_DIAG_RANDOM,	 /* a random order (fixed per job id and seed) */
	CRUX_SIM_DIAG_REVERSED,	 /* the least intense job first */
	CRUX_SIM_DIAG_ONE_LEVEL, /* every job on one level (fair sharing) */
	CRUX_SIM_N_POLICIES,
};

/* "ecmp", "sincronia", "taccl", "cassini-lite", "crux-pa", "crux-ps-pa", "crux-full",
 * "sincronia-lcp", "cassini-lite-lcp", "crux-random-order", "crux-reversed-order",
 * "crux-one-level"; parse also takes "cassini" for "cassini-lite". */
const char *crux_sim_policy_name(enum crux_sim_policy p);
crux_status_t crux_sim_policy_parse(const char *s, enum crux_sim_policy *out);

enum crux_sim_topo_kind {
	CRUX_SIM_TOPO_CLOS2 = 0,    /* two-layer Clos (paper: 173 ToR, 16 aggregation) */
	CRUX_SIM_TOPO_DOUBLE_SIDED, /* 6 ToR, 12 aggregation, 32 core, dual-homed hosts */
	CRUX_SIM_TOPO_LINGJUN,	    /* bench/data/lingjun-topo.csv, three layers */
	CRUX_SIM_TOPO_CLOS3,	    /* generated three-layer Clos */
	CRUX_SIM_TOPO_FILE,	    /* the scheduler's own topology text format */
};

/*
 * Topology parameters (generated kinds use the counts; every kind the rates).
 * A host node is the unit of placement with gpus_per_host GPUs behind its
 * link(s); every job's per-iteration traffic is a ring all-reduce over its
 * hosts, split into 'channels' flows per host pair (NCCL channels: distinct
 * source ports, so ECMP hashes each on its own).
 */
struct crux_sim_topo_params {
	uint32_t n_tor, n_agg, n_core;
	uint32_t hosts_per_tor; /* clos2 / clos3 */
	uint32_t n_hosts;	/* double-sided */
	uint32_t host_links;	/* double-sided: cables per host, half to each ToR */
	uint32_t n_pods, tors_per_pod, aggs_per_pod; /* clos3 */
	uint32_t gpus_per_host;
	uint32_t channels;
	double host_gbps, tor_gbps, agg_gbps;
};

/* The defaults of one topology kind (see the README for the reasoning). */
void crux_sim_topo_defaults(enum crux_sim_topo_kind kind, struct crux_sim_topo_params *p);

enum crux_sim_placement {
	CRUX_SIM_PLACE_PACK = 0, /* fewest ToR groups: best-fit group, then fullest groups */
	CRUX_SIM_PLACE_RANDOM,	 /* uniformly random free hosts (scattered, as fragmented
				  * production clusters place jobs); ring in host order */
	CRUX_SIM_PLACE_DALLY,	 /* delay scheduling for a one-ToR placement (timer from the
				  * job's network sensitivity), network-sensitive preemption */
	CRUX_SIM_PLACE_SJF_BCO,	 /* smallest job first; spread over the ToR groups whose
				  * uplinks the fewest rings cross (balanced contention/overhead) */
	CRUX_SIM_N_PLACEMENTS,
};

/* "pack", "random", "dally", "sjf-bco". */
const char *crux_sim_placement_name(enum crux_sim_placement p);
crux_status_t crux_sim_placement_parse(const char *s, enum crux_sim_placement *out);

#define CRUX_SIM_MAX_WEIGHTS 64
#define CRUX_SIM_LABEL_MAX   48

struct crux_sim_config {
	enum crux_sim_policy policy;
	enum crux_sim_topo_kind topo;
	const char *topo_path; /* CRUX_SIM_TOPO_FILE / LINGJUN: file to load */
	struct crux_sim_topo_params tp;
	enum crux_sim_placement placement;
	/* Dally: the delay timer in seconds (> 0: the same for every job that
	 * is network-sensitive; 0: auto-tuned per job) and no preemption (1). */
	double delay_timer_s;
	int no_preempt;
	uint32_t levels;     /* K priority levels (8) */
	uint64_t seed;	     /* scheduler and placement randomness */
	double horizon_s;    /* stop here; 0 = when every job has finished */
	double window_s;     /* metrics window [0, window_s]; 0 = last arrival */
	double bin_s;	     /* utilisation time-series bin (0 = window / 336) */
	int progress;	     /* progress bar on stderr */
	int step_iterations; /* baseline mode: step through every iteration between
			      * events instead of jumping (same results, slower) */
	/* Fairness guard (Crux policies): max predicted slowdown (0 = off) and
	 * per-level weights, lowest level first (n_weights 0 = strict priority;
	 * else it must equal levels). */
	double max_slowdown;
	/* 0: the bound is on each job's mean slowdown over its life (the
	 * scheduler's slowdown account, what CRUX_MAX_SLOWDOWN means); 1: on
	 * every plan's predicted slowdown ("/p"). */
	int per_plan;
	/* 1 ("/e"): the guard enforces every bound, without reporting the jobs
	 * no schedule can hold (its first version). */
	int guard_enforce_all;
	/* 1 ("/r"): Crux-full's refinement again after the guard, every job
	 * capped below its bound (crux_sched_guard_refine). */
	int guard_refine;
	uint32_t n_weights;
	double weight[CRUX_SIM_MAX_WEIGHTS];
	/* cruxd's promotion by measurement replayed per event (bound; 0 = off). */
	double promote_bound;
	/* The scheduler's steady-state model (enum crux_sched_eval_model):
	 * 0 = phase-aware (default), 1 = every job of a level at once. */
	int eval_model;
	/* Reference-model snapshots (crux/sched_ref.h): run the reference on
	 * the plan of the first evaluation at or after each of this many evenly
	 * spaced times of the window (0 = none; not for CASSINI). */
	uint32_t ref_snapshots;
};

/* One snapshot: the running jobs' plan in the evaluator and in the
 * reference model (per flow, one random phase draw, horizon 20 isolated
 * iterations of the slowest job, warm-up 5). */
struct crux_sim_ref_snap {
	double t_s;
	uint32_t jobs, net_jobs;
	double eval_util, ref_util;	    /* sum W/T over sum GPUs of the running jobs */
	double iter_err_p50, iter_err_p90;  /* |T_eval - T_ref| / T_ref, network jobs not starved */
	double slow_eval_max, slow_ref_max; /* highest slowdown (T over the isolated time) */
	/* Guarded runs: the jobs the plan holds (not reported infeasible), their
	 * highest slowdown and how many are above their bound in this plan (the
	 * account's, else the configured one; the reference beyond it x 1.02,
	 * its own noise). */
	double held_eval_max, held_ref_max;
	uint32_t held_above_eval, held_above_ref;
	uint32_t starved;   /* network jobs the reference saw end < 2 iterations */
	uint32_t truncated; /* 1: the reference hit its event limit */
	double wall_s;	    /* the reference's wall time */
};

void crux_sim_config_defaults(struct crux_sim_config *c);
/* "crux-full", "crux-full@2", "crux-full@2/w" (bound 2 with the level weights),
 * "crux-full~2" (promotion by measurement at bound 2). */
void crux_sim_label(const struct crux_sim_config *c, char *buf, size_t len);

struct crux_sim_job_result {
	uint32_t id;
	char model[CRUX_SIM_MODEL_NAME_MAX];
	uint32_t gpus;
	uint32_t n_hosts;
	double arrival_s;
	double start_s;	 /* placed; -1 if never started */
	double finish_s; /* -1 if not finished within the horizon */
	double iterations_done;
	uint64_t iterations;
	double iso_iter_s;  /* iteration time alone on the fabric, same placement */
	double mean_iter_s; /* run time / iterations done */
	double jct_s;	    /* finish - arrival (queueing included) */
	double slowdown;    /* mean_iter_s / iso_iter_s */
	double net_bytes;   /* bytes this job put on fabric links (hop-bytes) */
	int level;	    /* last level assigned (K-1 = highest; -1: never ran) */
	int infeasible;	    /* the guard reported it infeasible in some plan */
};

struct crux_sim_result {
	enum crux_sim_policy policy;
	/* Policy name, with "@BOUND" when the guard was on, "~BOUND" with promotion
	 * by measurement and "/w" with weights. */
	char label[CRUX_SIM_LABEL_MAX];
	double max_slowdown;
	double promote_bound;
	int weighted;
	int eval_model; /* the config's */
	size_t n_ref_snaps;
	struct crux_sim_ref_snap *ref_snaps;
	size_t infeasible_jobs; /* jobs the guard reported infeasible in some plan */
	uint32_t total_gpus;
	uint32_t levels;
	size_t n_jobs;
	struct crux_sim_job_result *jobs;
	/* Utilisation time series: bins of bin_s over [0, window_s]. */
	size_t n_bins;
	double bin_s;
	double *util;  /* compute-busy GPUs / all GPUs */
	double *alloc; /* GPUs held by running jobs / all GPUs */
	double window_s;
	double mean_util; /* over the window */
	double mean_alloc;
	double busy_of_held; /* compute-busy GPU time / held GPU time, over the window */
	double end_s;	     /* simulated time reached */
	size_t events;	     /* arrivals + departures processed */
	size_t evaluations;  /* policy runs + steady-state evaluations */
	uint64_t steps;	     /* iteration boundaries stepped through (step mode) */
	size_t finished;
	size_t preemptions;   /* jobs stopped and requeued by the placement (Dally) */
	double link_bytes;    /* total bytes carried over fabric links (hop-bytes) */
	double job_bytes;     /* sum over jobs of their per-link bytes x iterations done */
	double max_link_load; /* highest average load / capacity seen on any link */
	double wall_s;	      /* simulator wall time */
};

/* Run a trace. 'out' is freed with crux_sim_result_free. */
crux_status_t crux_sim_run(const struct crux_sim_trace *trace, const struct crux_sim_config *cfg,
			   struct crux_sim_result **out, char *err, size_t errlen);

void crux_sim_result_free(struct crux_sim_result *r);

/* ---- Reports ------------------------------------------------------------ */

/* Per-policy summary table (and the worst-off jobs) as text. */
void crux_sim_print_summary(FILE *f, const struct crux_sim_result *const *r, size_t n);

/* JSON with every run's summary, slowdown distribution, series and jobs;
 * extra (may be NULL) writes more members of the top object after "experiment". */
struct crux_json;
crux_status_t crux_sim_write_json(const char *path, const char *experiment,
				  const struct crux_sim_result *const *r, size_t n,
				  void (*extra)(struct crux_json *j, const void *arg),
				  const void *extra_arg);

/* Per-job table (CSV). */
crux_status_t crux_sim_write_jobs_csv(const char *path, const struct crux_sim_result *r);

/* PNG plots with gnuplot: utilisation over time and slowdown CDF. */
crux_status_t crux_sim_plot(const char *png_prefix, const char *title,
			    const struct crux_sim_result *const *r, size_t n, char *err,
			    size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_SIM_H */
