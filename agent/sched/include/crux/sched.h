/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Crux scheduler library: GPU intensity, correction factor, path selection,
 * priority compression, baselines and a fluid evaluator (SIGCOMM'24 Crux).
 *
 * Depends on libc and libm only (crux/status.h is used for its enum alone).
 * Units: bytes, seconds, bytes/s inside the library; topology files give
 * link rates in Gbit/s. Levels run 0..K-1 and a HIGHER level is a HIGHER
 * priority. Every function is deterministic for equal inputs and seed.
 *
 * Thread safety: a topology caches candidate paths lazily, so one topology
 * object must be used by one thread at a time. Everything else is reentrant.
 */
#ifndef CRUX_SCHED_H
#define CRUX_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "crux/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CRUX_SCHED_MAX_LEVELS  64
#define CRUX_SCHED_MAX_STEPS   65536 /* a job's dependent communication steps */
#define CRUX_SCHED_ERR_LEN     320
#define CRUX_SCHED_DEF_LEVELS  8
#define CRUX_SCHED_DEF_ORDERS  10
#define CRUX_SCHED_DEF_MAXPATH 16
/* Compression refined by the evaluator (crux_sched_compress_refine): on
 * contention components of up to MAX_JOBS jobs, at most MAX_EVALS
 * evaluations each and MAX_WORK job-evaluations (a component's jobs times
 * its evaluations) per plan, whatever the cluster's size. */
#define CRUX_SCHED_REFINE_MAX_JOBS  64
#define CRUX_SCHED_REFINE_MAX_EVALS 256
#define CRUX_SCHED_REFINE_MAX_WORK  2048
#define CRUX_SCHED_DEF_REFINE_GAIN  0.01
/* The search over paths (crux_sched_paths_search): plans of at most
 * MAX_FLOWS flows with a choice of paths, at most MAX_EVALS candidate plans
 * and MAX_WORK job-plans (the plan's jobs times its candidates). */
#define CRUX_SCHED_PATHS_MAX_FLOWS 64
#define CRUX_SCHED_PATHS_MAX_EVALS 1024
#define CRUX_SCHED_PATHS_MAX_WORK  65536

/* Filled with a one-line message (file, line, field, fix) when a call fails. */
struct crux_sched_err {
	char msg[CRUX_SCHED_ERR_LEN];
};

/* ---- Topology ----------------------------------------------------------- */

/*
 * Nodes are hosts (indices 0..n_hosts-1) followed by switches. Every cable is
 * two directed links of the same rate. Candidate paths between two hosts are
 * the explicit "path" lines of the file, else all shortest paths (by hops),
 * at most max_paths, in a deterministic order.
 */
struct crux_sched_topo;

struct crux_sched_path_set {
	int n_paths;
	const int *off;	  /* n_paths + 1 offsets into links */
	const int *links; /* directed link ids */
};

crux_status_t crux_sched_topo_load(const char *path, struct crux_sched_topo **out,
				   struct crux_sched_err *err);
/* Parse text already in memory; name is used in error messages. */
crux_status_t crux_sched_topo_parse(const char *text, size_t len, const char *name,
				    struct crux_sched_topo **out, struct crux_sched_err *err);
void crux_sched_topo_free(struct crux_sched_topo *t);

int crux_sched_topo_n_hosts(const struct crux_sched_topo *t);
int crux_sched_topo_n_nodes(const struct crux_sched_topo *t);
int crux_sched_topo_n_links(const struct crux_sched_topo *t);
const char *crux_sched_topo_node_name(const struct crux_sched_topo *t, int node);
/* Node index of a name, or -1. */
int crux_sched_topo_find(const struct crux_sched_topo *t, const char *name);
/* Directed link: endpoints and rate in bytes/s. */
crux_status_t crux_sched_topo_link(const struct crux_sched_topo *t, int link, int *from, int *to,
				   double *bytes_per_s);
/* Candidate paths from host src to host dst (src != dst); cached. CRUX_ERR_NOENT if unreachable. */
crux_status_t crux_sched_topo_paths(struct crux_sched_topo *t, int src, int dst,
				    struct crux_sched_path_set *out);
/* Hop count (links) of path idx between src and dst. */
int crux_sched_topo_path_hops(struct crux_sched_topo *t, int src, int dst, int idx);

/* Two-layer Clos: hosts_per_tor hosts per ToR, every ToR to every aggregation
 * switch with tor_uplinks parallel cables. Names: h<i>, tor<i>, agg<i>. */
struct crux_sched_clos2_params {
	int n_tor, n_agg, hosts_per_tor, tor_uplinks;
	double host_gbps, tor_gbps;
};
crux_status_t crux_sched_topo_clos2(const struct crux_sched_clos2_params *p,
				    struct crux_sched_topo **out, struct crux_sched_err *err);

/* Three-layer Clos: pods of ToRs and aggregation switches (full mesh inside a
 * pod), every aggregation switch to every core switch. */
struct crux_sched_clos3_params {
	int n_pods, tors_per_pod, aggs_per_pod, n_core, hosts_per_tor;
	double host_gbps, tor_gbps, agg_gbps;
};
crux_status_t crux_sched_topo_clos3(const struct crux_sched_clos3_params *p,
				    struct crux_sched_topo **out, struct crux_sched_err *err);

/* The paper's "double-sided" topology: each host on two ToRs through
 * host_links cables (half to each), every ToR to every aggregation switch,
 * every aggregation switch to every core switch (paper: 6/12/32, 8 links). */
struct crux_sched_dsided_params {
	int n_hosts, n_tor, n_agg, n_core, host_links;
	double host_gbps, tor_gbps, agg_gbps;
};
crux_status_t crux_sched_topo_dsided(const struct crux_sched_dsided_params *p,
				     struct crux_sched_topo **out, struct crux_sched_err *err);

/* Lingjun CSV (ip,DSW,PSW,ASW): host -> ASW -> PSW -> DSW. An ASW is named by
 * its (PSW, ASW) pair. *_uplinks parallel cables per ASW-PSW / PSW-DSW. */
struct crux_sched_lingjun_params {
	double host_gbps, tor_gbps, agg_gbps;
	int tor_uplinks, agg_uplinks;
};
void crux_sched_lingjun_defaults(struct crux_sched_lingjun_params *p);
crux_status_t crux_sched_topo_lingjun(const char *csv_path,
				      const struct crux_sched_lingjun_params *p,
				      struct crux_sched_topo **out, struct crux_sched_err *err);

/* ---- Jobs --------------------------------------------------------------- */

/* Per-iteration traffic from host src to host dst (node indices), bytes. */
struct crux_sched_flow {
	int src, dst;
	double bytes;
};

struct crux_sched_job {
	uint64_t id;
	int gpus; /* GPUs of the job (all hosts) */
	int n_hosts;
	int *hosts;	       /* host node indices */
	double work;	       /* W: GPU-seconds of computation per iteration */
	double compute;	       /* c: compute time of one iteration, s */
	double overlap;	       /* 0..1: communication may start after (1-overlap)*c */
	double iter_time;      /* measured iteration time, s; 0 = unknown (informational) */
	double iso_time;       /* iteration time alone on the fabric, s, when the caller knows
				* it (the slowdown bound's reference); 0 = estimate on its paths */
	double slowdown_bound; /* this plan's bound on its predicted slowdown when the
				* guard is on (>= 1; the job's slowdown account gives
				* it): 0 = the params' max_slowdown */
	int urgent;	       /* guard on: the job's mean slowdown is at the bound and the
				* plans did not hold it there (its slowdown account); the
				* guard holds it well below (crux_sched_guard) */
	int steps;	       /* dependent steps of its communication per iteration (a ring
				* all-reduce: 2 (n-1) per bucket): each flow carries its bytes
				* in this many parts, a part after the flow's previous one
				* and its ring predecessor's (the flow into its source);
				* 0 or 1 = one transfer. Only the reference model reads it */
	int n_flows;
	struct crux_sched_flow *flows; /* one per ordered host pair, src != dst */
};

/* A growable set of jobs that owns each job's hosts and flows arrays. Change
 * it only through these functions (crux_sched_jobs_free, then init, to reuse);
 * jobs' fields other than id may be edited in place. */
struct crux_sched_jobs {
	size_t n, cap;
	struct crux_sched_job *v;
	size_t *id_tab; /* private: id -> index + 1 (open addressing), for O(1) duplicate checks */
	size_t id_cap;
};

void crux_sched_jobs_init(struct crux_sched_jobs *js);
void crux_sched_jobs_free(struct crux_sched_jobs *js);
/* Copy job (and its hosts/flows) into the set; duplicate ids are refused. */
crux_status_t crux_sched_jobs_add(struct crux_sched_jobs *js, const struct crux_sched_job *job);
/* Ring all-reduce of bytes over the job's hosts (in the given order): each
 * host sends 2 (g-1)/g * bytes to the next host, g = GPUs. Appends flows to
 * job v[idx] (merging equal host pairs). */
crux_status_t crux_sched_jobs_add_ring(struct crux_sched_jobs *js, size_t idx, double bytes);
/* Load a jobs file against a topology (host names resolved there). */
crux_status_t crux_sched_jobs_load(const char *path, struct crux_sched_topo *t,
				   struct crux_sched_jobs *out, struct crux_sched_err *err);
crux_status_t crux_sched_jobs_parse(const char *text, size_t len, const char *name,
				    struct crux_sched_topo *t, struct crux_sched_jobs *out,
				    struct crux_sched_err *err);
/* Overlap fraction that explains a measured iteration time: iter = max(c, (1-o)c + comm). */
double crux_sched_overlap_from_times(double compute, double comm, double iter);

/* ---- Schedule ----------------------------------------------------------- */

struct crux_sched_decision {
	uint64_t id;
	double comm_time; /* t = max_e M_e / B_e on the chosen paths, s (0: no network traffic) */
	double intensity; /* I = W / t (0 when t = 0) */
	double k;	  /* correction factor (reference job: 1) */
	double priority;  /* P = k I (baselines: their own score) */
	int rank;	  /* 0 = highest priority */
	int level;	  /* 0..levels-1, higher = higher priority */
	int infeasible;	  /* guard on: no schedule can keep it within its bound (its
			   * bound was relaxed for this plan, not enforced; see
			   * crux_sched_guard) */
	int *path;	  /* per flow of the job: index into the pair's candidates, -1 intra-host */
};

/* Which steady-state model crux_sched_evaluate uses (see "Fluid evaluator"). */
enum crux_sched_eval_model {
	CRUX_SCHED_EVAL_PHASE_AWARE = 0, /* default: peers meet only while they communicate */
	CRUX_SCHED_EVAL_ALL_AT_ONCE =
	    1, /* the first model: a level's jobs all communicate at once */
};

struct crux_sched_schedule {
	size_t n_jobs;
	int levels;
	int eval_model; /* enum crux_sched_eval_model; crux_sched_run sets it from the params */
	/* Guaranteed share of a link per level (fraction, 0..1; all 0 = strict
	 * priority), set by crux_sched_run from crux_sched_params.weight. */
	double share[CRUX_SCHED_MAX_LEVELS];
	int guard_lifts;      /* level lifts made by the slowdown bound (crux_sched_guard) */
	int guard_violators;  /* jobs still predicted above the bound afterwards */
	int guard_infeasible; /* jobs no schedule can keep within their bound (d[].infeasible) */
	int reference;	      /* index of the reference job (most traffic), -1 if none */
	double cut_weight;    /* Max-K-Cut objective reached (Crux compression) */
	struct crux_sched_decision *d;
	int *path_store; /* backing storage of every d[i].path */
	size_t n_paths;	 /* entries in path_store (flows of all jobs) */
	/* Contention DAG of the last crux_sched_compress (statistics). */
	size_t dag_edges;
	int dag_components, dag_largest; /* components with edges; nodes in the largest */
	/* crux_sched_compress_refine: level moves kept, evaluations made. */
	int refine_moves, refine_evals;
	/* crux_sched_paths_search: moves kept, candidate plans scored. */
	int paths_moves, paths_evals;
};

/* Allocate a schedule shaped for the jobs (paths -1, levels 0). */
crux_status_t crux_sched_schedule_new(const struct crux_sched_job *jobs, size_t n, int levels,
				      struct crux_sched_schedule **out);
void crux_sched_schedule_free(struct crux_sched_schedule *s);
crux_status_t crux_sched_schedule_copy(struct crux_sched_schedule *dst,
				       const struct crux_sched_schedule *src);

enum crux_sched_policy {
	CRUX_SCHED_CRUX_FULL = 0, /* path selection + priority assignment + compression */
	CRUX_SCHED_CRUX_PS_PA,	  /* path selection + priority assignment, rank mapping */
	CRUX_SCHED_CRUX_PA,	  /* ECMP paths + priority assignment, rank mapping */
	CRUX_SCHED_SINCRONIA,	  /* ECMP paths, BSSI order, level max(K-1-rank, 0) */
	CRUX_SCHED_VARYS,	  /* ECMP paths, SEBF order, balanced compression */
	CRUX_SCHED_TACCL,	  /* least congested paths in id order, more hops = higher */
	CRUX_SCHED_ECMP,	  /* ECMP paths, every job on one level (fair sharing) */
	CRUX_SCHED_N_POLICIES
};
const char *crux_sched_policy_name(enum crux_sched_policy p);
/* Policy by name ("crux", "crux-ps-pa", "crux-pa", "sincronia", "varys", "taccl", "ecmp"). */
crux_status_t crux_sched_policy_parse(const char *name, enum crux_sched_policy *out);

struct crux_sched_params {
	int levels;    /* K, 1..CRUX_SCHED_MAX_LEVELS */
	int orders;    /* m random topological orders for Max-K-Cut */
	uint64_t seed; /* ECMP hashing and random orders */
	/* Fairness guard (CRUX_MAX_SLOWDOWN): 0 = off; else >= 1, the highest
	 * predicted iteration time / isolated iteration time the Crux policies
	 * accept for any job. */
	double max_slowdown;
	/* Per-level weights (CRUX_LEVEL_WEIGHTS), lowest level first: level l is
	 * guaranteed weight[l] / sum(weight) of every link it uses (DCB ETS / WRR
	 * / HTB rate). n_weights 0 = strict priority; else it must equal levels. */
	int n_weights;
	double weight[CRUX_SCHED_MAX_LEVELS];
	/* Evaluator model of the schedule (and of the guard's evaluations). */
	enum crux_sched_eval_model eval_model;
	/* 1: the Crux policies rank by P = k I with the paper's correction
	 * factor (crux_sched_correction); 0 (default): by P = I, k = 1. Judged
	 * by the reference model (bench sched-refcheck) k lowers utilisation. */
	int correction;
	/* 1: the guard enforces every job's bound, feasible or not (its first
	 * version); 0 (default): jobs no schedule can hold are reported and
	 * bounded at what they can get (crux_sched_guard). */
	int guard_enforce_all;
	/* Crux-full: after Max-K-Cut, a job moves to another level that keeps
	 * the priority order valid where the evaluator predicts a utilisation
	 * higher by more than this fraction (crux_sched_compress_refine); 0 =
	 * Max-K-Cut's levels as they are. Default CRUX_SCHED_DEF_REFINE_GAIN:
	 * judged by the reference model it gains (bench sched-refcheck). */
	double refine_gain;
	/* 1 (default): the refinement may move a job to any level, the priority
	 * order notwithstanding (a local search over level assignments in the
	 * evaluator); 0: only the cuts of the order move. Judged by the
	 * reference model the free search wins (bench sched-refcheck). */
	int refine_free;
	/* 1: after the fairness guard, the refinement again with every job capped
	 * below its bound (crux_sched_guard_refine); 0 (default): the guard's
	 * plan as it is. Judged by the reference model it keeps more of the gain
	 * (bench sched-guard); the testbed's model finds it loses where flows do
	 * not take the planned paths or a shared level's queue delays them. */
	int guard_refine;
	/* Crux-full, before the guard: a search from the greedy paths that moves
	 * one flow (1) or one or two flows (2) at a time to other candidates,
	 * each candidate planned again (P, Max-K-Cut, the refinement) and kept
	 * where the evaluator gains (crux_sched_paths_search); 0 (default): the
	 * greedy paths. Judged by the reference model, 2 closes 95 % of the
	 * ECMP -> optimum gap against the greedy paths' 67 % (bench
	 * sched-optimality-honest --paths-search), at the cost of one plan per
	 * candidate. */
	int paths_search;
	/* 1: every candidate of the search planned with the refinement too
	 * (about 17 times the cost; 90 % of that gap); 0 (default): Max-K-Cut's
	 * levels per candidate, the refinement once on the searched paths. */
	int paths_search_full;
};
void crux_sched_params_default(struct crux_sched_params *p);

/* Run a whole policy; s must come from crux_sched_schedule_new for these jobs.
 * CRUX_ERR_INVAL for NaN/negative times, bytes or work, overlap outside 0..1,
 * or hosts outside the topology. */
crux_status_t crux_sched_run(struct crux_sched_topo *t, const struct crux_sched_job *jobs, size_t n,
			     const struct crux_sched_params *p, enum crux_sched_policy pol,
			     struct crux_sched_schedule *s);

/* ---- The separate mechanisms (each reads and writes s) ----------------- */

/* ECMP: path = hash(seed, job id, src, dst) mod candidates. */
int crux_sched_ecmp_pick(uint64_t seed, uint64_t job_id, int src, int dst, int n_paths);
crux_status_t crux_sched_paths_ecmp(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				    size_t n, uint64_t seed, struct crux_sched_schedule *s);
/* Least congested candidate per flow, jobs taken in the given order (indices;
 * NULL: by decreasing s->d[].intensity). Link load = sum of placed flows'
 * bytes / isolated iteration time (needs s->d[].comm_time); a candidate's cost
 * is its highest load/bandwidth after adding the flow, ties by the sum over
 * its links, then by the lower index. */
crux_status_t crux_sched_paths_select(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				      size_t n, const size_t *order, struct crux_sched_schedule *s);
/* t and I on the current paths. */
crux_status_t crux_sched_intensity(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				   size_t n, struct crux_sched_schedule *s);
/* Reference job, k = 1 and P = I (the default of the Crux policies). */
crux_status_t crux_sched_priority_plain(const struct crux_sched_job *jobs, size_t n,
					struct crux_sched_schedule *s);
/* Reference job, k and P = k I (needs comm_time and intensity). */
crux_status_t crux_sched_correction(const struct crux_sched_job *jobs, size_t n,
				    struct crux_sched_schedule *s);
/* Two jobs alone on one link under both strict orders: D_j and D_r, the
 * extra link time (s per s) each gains when it goes first. */
struct crux_sched_pair_job {
	double compute, overlap, comm; /* c, overlap fraction, t at full link rate */
};
crux_status_t crux_sched_pair_gain(const struct crux_sched_pair_job *j,
				   const struct crux_sched_pair_job *r, double *d_j, double *d_r);
/* Ranks from s->d[].priority (ties: intensity, then index). */
void crux_sched_rank(struct crux_sched_schedule *s);
/* Crux compression: contention DAG + Max-K-Cut over params->orders orders. */
crux_status_t crux_sched_compress(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				  size_t n, const struct crux_sched_params *p,
				  struct crux_sched_schedule *s);
/* Moves of single jobs between the levels Max-K-Cut gave (to any level, or
 * within the priority order where p->refine_free is 0), kept where the
 * evaluator gains > p->refine_gain; each
 * contention component of up to CRUX_SCHED_REFINE_MAX_JOBS jobs on its own
 * (larger ones keep Max-K-Cut's levels; no-op at 0 and with the fairness
 * guard on, p->max_slowdown > 0: crux_sched_guard_refine may run after it). */
crux_status_t crux_sched_compress_refine(struct crux_sched_topo *t,
					 const struct crux_sched_job *jobs, size_t n,
					 const struct crux_sched_params *p,
					 struct crux_sched_schedule *s);
/* The same moves after the fairness guard (p->guard_refine, p->max_slowdown
 * > 0, not p->guard_enforce_all; to any level, whatever p->refine_free),
 * each kept only where no job's predicted iteration
 * time passes the larger of its bound and its time in the guard's plan
 * (urgent jobs stay put, the top level stays theirs); the guard's levels
 * come back where the whole plan, evaluated at once, breaks that or loses.
 * Updates guard_violators and guard_infeasible (a reported job now within
 * its bound is no longer reported). Crux-full runs it after the guard where
 * p->guard_refine is set. */
crux_status_t crux_sched_guard_refine(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				      size_t n, const struct crux_sched_params *p,
				      struct crux_sched_schedule *s);
/* Crux-full's levels on s's paths: t and I, P = I (k I with p->correction),
 * ranks, Max-K-Cut, then crux_sched_compress_refine. */
crux_status_t crux_sched_levels_full(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				     size_t n, const struct crux_sched_params *p,
				     struct crux_sched_schedule *s);
/* From s's paths and levels (Crux-full's), with p->paths_search 1 or 2: moves
 * of one (or one or two) flows with a choice of paths to other candidates,
 * first improvement, in passes until none gains; each candidate planned
 * again (Max-K-Cut's levels; crux_sched_levels_full with
 * p->paths_search_full) and kept where the evaluator's utilisation rises;
 * then (not full) the refinement on the searched paths, the greedy plan back
 * where the result does not beat it. Plans with more than CRUX_SCHED_PATHS_MAX_FLOWS such flows
 * keep their paths; the search stops after CRUX_SCHED_PATHS_MAX_EVALS candidates. Sets
 * s->paths_moves and s->paths_evals; no-op at 0, CRUX_ERR_INVAL above 2. */
crux_status_t crux_sched_paths_search(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				      size_t n, const struct crux_sched_params *p,
				      struct crux_sched_schedule *s);
/* Rank mappings: level = max(K-1-rank, 0) (Sincronia) and equal-size blocks (Varys). */
void crux_sched_compress_rank(struct crux_sched_schedule *s);
void crux_sched_compress_balanced(struct crux_sched_schedule *s);

/* Baseline priority scores into s->d[].priority (then crux_sched_rank). */
crux_status_t crux_sched_prio_sincronia(struct crux_sched_topo *t,
					const struct crux_sched_job *jobs, size_t n,
					struct crux_sched_schedule *s);
crux_status_t crux_sched_prio_varys(const struct crux_sched_job *jobs, size_t n,
				    struct crux_sched_schedule *s);
crux_status_t crux_sched_prio_taccl(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				    size_t n, struct crux_sched_schedule *s);

/* Max-K-Cut on an explicit DAG (for tests and tools): n nodes, edges
 * (from[i] -> to[i]) with weight w[i]; levels_out[v] in 0..K-1, higher first. */
crux_status_t crux_sched_maxkcut(int n, int n_edges, const int *from, const int *to,
				 const double *w, int levels, int orders, uint64_t seed,
				 int *levels_out, double *cut_out);

/* ---- Fairness guard (slowdown_bound.c) ------------------------------------ */

#define CRUX_SCHED_MAX_SLOWDOWN_LIMIT 1e6

/* "2.0" -> 2.0: a finite number in [1, 1e6]; "" or "0" / "off" -> 0 (off). */
crux_status_t crux_sched_slowdown_parse(const char *text, double *out, struct crux_sched_err *err);
/* "1,1,2,4" (lowest level first, each > 0 and finite, at most
 * CRUX_SCHED_MAX_LEVELS) into p->weight / p->n_weights. "" clears them. */
crux_status_t crux_sched_weights_parse(const char *text, struct crux_sched_params *p,
				       struct crux_sched_err *err);
/* Reads CRUX_MAX_SLOWDOWN and CRUX_LEVEL_WEIGHTS (unset: leave p as is). */
crux_status_t crux_sched_params_env(struct crux_sched_params *p, struct crux_sched_err *err);
/* Isolated iteration time of a job whose communication alone takes comm s:
 * max(c, (1 - overlap) c + comm). */
double crux_sched_isolated_iter(const struct crux_sched_job *job, double comm);
/*
 * The planner's bound: evaluates s and, while some job's predicted
 * iteration time exceeds max_slowdown x its isolated time (on its paths),
 * lifts it one level, above its same-level contenders (the cheapest
 * bandwidth), or where it has none to the level of its nearest higher-level
 * contender (so they share instead of it waiting), or pushes top-level peers
 * with slack one level down, re-evaluating after each round. Then tries the
 * top level reserved for the jobs it lifts (the others compressed into K-1
 * levels), kept when every job is within the bound and the predicted
 * utilisation is higher (or attempt 1 left jobs above it); then path selection again with the
 * violators first and the same rounds, kept when it does better (higher
 * predicted utilisation, or fewer jobs above the bound); if jobs remain
 * above it, a search that moves the worst jobs (8 at most) each to its best
 * level; if jobs still remain above it (plans of at most 256 network jobs),
 * the levels filled from the bottom (Audsley's order: the jobs given up
 * lowest, then level by level the least intense jobs that stay within their
 * bound with every other job above them; a job it finds no level for, its
 * worst violator, is given up too and the filling starts again, 3 at most),
 * kept when fewer of the jobs it holds are left above their bound. Each
 * job's bound is its own
 * slowdown_bound when set, else max_slowdown. Urgent jobs are first held to
 * 0.8 x max_slowdown by the same steps (one measured far slower than its
 * prediction first goes up to its highest contender's level); where that
 * fails, the top level is theirs alone and every other job is compressed
 * into the levels below. Sets s->guard_lifts (level moves) and
 * s->guard_violators (jobs still above their bound, the infeasible ones left
 * out). No-op when max_slowdown is 0 or no job is above its bound and none is
 * urgent. crux_sched_run calls it for the Crux policies.
 * First, jobs no schedule can keep within their bound are estimated from
 * average loads (at its bound b a job's period is at most b x its isolated
 * time, so it needs at least its bytes over that on each of its links; where
 * a link cannot carry what its jobs need together, the job needing the most
 * of it is given up, until every link fits; a job slower than b alone on its
 * own paths too). They, and the jobs the filling gave up (never where a
 * job is urgent, and not where that makes the worst job worse than no
 * guard), are reported (s->guard_infeasible, d[].infeasible)
 * instead of spending the other jobs' gain on them: this plan bounds them at
 * b x the overload of their most overloaded link (their own slowdown alone
 * when that is higher), never urgent.
 */
crux_status_t crux_sched_guard(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
			       size_t n, const struct crux_sched_params *p,
			       struct crux_sched_schedule *s);

/*
 * Slowdown account: the bound B (CRUX_MAX_SLOWDOWN) is on each job's mean
 * slowdown over its life (run time / the time its progress would have taken
 * alone). A job starts free: plans may predict it up to CAP x B, and once
 * its mean has slack further, up to CAP_MAX x B, as long as SLACK_S seconds
 * at that slowdown would keep its mean below PROTECT_AT x B. When its
 * mean reaches PROTECT_AT x B it is protected: every plan keeps its predicted
 * slowdown within B, so its mean cannot climb further while the plans hold.
 * A protected job is urgent when they did not: its mean is at PROTECT_AT x B
 * and it ran above B since the last update (the guard could not meet the
 * bound, or the measurement shows what the model missed). The guard then
 * holds it well below B (or gives it the top level alone, see
 * crux_sched_guard) until its mean is below URGENT_EXIT x B: a job the plans
 * cannot hold would otherwise flip between protected and urgent at every
 * plan. Below RELEASE_AT x B a job is free again. Urgency is the costly step
 * (it slows the others most), so it is kept for the jobs that need it.
 */
#define CRUX_SCHED_ACCOUNT_RELEASE_AT  0.9
#define CRUX_SCHED_ACCOUNT_PROTECT_AT  0.98
#define CRUX_SCHED_ACCOUNT_URGENT_EXIT 0.95
#define CRUX_SCHED_ACCOUNT_CAP	       2.0
#define CRUX_SCHED_ACCOUNT_CAP_MAX     4.0
#define CRUX_SCHED_ACCOUNT_SLACK_S     10.0

enum crux_sched_account_state {
	CRUX_SCHED_ACCOUNT_FREE,
	CRUX_SCHED_ACCOUNT_PROTECTED,
	CRUX_SCHED_ACCOUNT_URGENT,
};

struct crux_sched_account {
	double run_s;	/* seconds the job ran (accounted) */
	double alone_s; /* seconds the same progress takes alone */
	double last;	/* slowdown of the latest accounted interval (0: none) */
	enum crux_sched_account_state state;
};
void crux_sched_account_init(struct crux_sched_account *a);
/* dt seconds at the given slowdown (iteration time / isolated time, > 0). */
void crux_sched_account_add(struct crux_sched_account *a, double dt, double slowdown);
/* Mean slowdown so far (0 before any time is accounted). */
double crux_sched_account_mean(const struct crux_sched_account *a);
/* Moves the job between free, protected and urgent for bound B; returns 1
 * when it moved. */
int crux_sched_account_update(struct crux_sched_account *a, double bound);
/* The job's crux_sched_job.slowdown_bound for the next plan: B when
 * protected or urgent; free, between CAP x B (no slack) and CAP_MAX x B. */
double crux_sched_account_bound(const struct crux_sched_account *a, double bound);
/* The job's crux_sched_job.urgent for the next plan. */
int crux_sched_account_urgent(const struct crux_sched_account *a);
/* "free", "protected", "urgent"; "unknown" for any other value (read from a file). */
const char *crux_sched_account_state_name(unsigned state);
/* Seconds until running at this slowdown would move the job (INFINITY: never). */
double crux_sched_account_next(const struct crux_sched_account *a, double bound, double slowdown);

/* ---- Fluid evaluator ---------------------------------------------------- */

/*
 * Steady state under strict priority between levels (higher levels' average
 * load is taken off each link first) and max-min fair sharing inside a level
 * (each job's flows move together). s->eval_model: ALL_AT_ONCE, the level's
 * jobs communicate at once; PHASE_AWARE (default), a job's communication
 * time is also bounded by what its level peers' average load leaves (they
 * meet only while they communicate; the smaller time holds, a fixed point),
 * and a flow whose links carry higher-level traffic of several jobs gets the
 * time none of them sends (1 - the sum of their largest load fractions on
 * its links, at least the square of the product of (1 - each)), both as
 * the reference model (crux/sched_ref.h) shows periodic jobs behave.
 * Job iteration T = max(c, (1-overlap)c + tau), tau its communication time.
 * With guaranteed shares (s->share), each lower level present on a link
 * keeps min(share x rate, its isolated demand) of it: the levels above see
 * the link without that reservation.
 * iter_time[i] (may be NULL) gets T of every job; util gets the GPU
 * utilisation sum_j (W_j / T_j) / sum_j gpus_j.
 */
struct crux_sched_eval;
crux_status_t crux_sched_eval_new(struct crux_sched_eval **out);
void crux_sched_eval_free(struct crux_sched_eval *ev);
crux_status_t crux_sched_evaluate(struct crux_sched_eval *ev, struct crux_sched_topo *t,
				  const struct crux_sched_job *jobs, size_t n,
				  const struct crux_sched_schedule *s, double *iter_time,
				  double *util);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_SCHED_H */
