/* SPDX-License-Identifier: Apache-2.0 */
/* Internals shared by the scheduler's source files. */
#ifndef CRUX_SCHED_INT_H
#define CRUX_SCHED_INT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "crux/sched.h"

#define GBPS_TO_BYTES(g) ((g)*1e9 / 8.0)

/* fmax / fmin with their NaN rule (a NaN argument yields the other), inline:
 * the evaluator's inner loops called libm for them (7 % of its time on
 * sched-scale's dense case). */
static inline double crux_dmax(double a, double b)
{
	return a > b || b != b ? a : b;
}
static inline double crux_dmin(double a, double b)
{
	return a < b || b != b ? a : b;
}

struct pcache_ent {
	int src, dst; /* src < 0: empty slot */
	int n_paths;
	int *off;
	int *links;
};

struct crux_sched_topo {
	int n_hosts, n_nodes, n_links;
	char **names;
	int *lfrom, *lto;
	double *lbw;		 /* bytes/s */
	int *out_off, *out_link; /* CSR of outgoing links per node */
	int *in_off, *in_link;	 /* CSR of incoming links per node */
	int max_paths;
	/* name -> node hash (open addressing) */
	int *name_tab;
	int name_cap;
	/* (src,dst) -> candidate paths (open addressing) */
	struct pcache_ent *pc;
	size_t pc_cap, pc_n;
	/* hops from every node to each destination host, rows filled lazily */
	int **dist;
};

/* Builder used by the parser and the generators. */
struct topo_builder {
	int n_nodes, cap_nodes, n_hosts;
	char **names;
	unsigned char *is_host;
	int n_links, cap_links;
	int *lfrom, *lto;
	double *lbw;
	int n_exp, cap_exp; /* explicit paths */
	int *exp_src, *exp_dst, *exp_off, *exp_links;
	int n_exp_links, cap_exp_links;
	int *name_tab;
	int name_cap;
	int max_paths;
};

void crux_sched_tb_init(struct topo_builder *b);
void crux_sched_tb_free(struct topo_builder *b);
int crux_sched_tb_find(const struct topo_builder *b, const char *name);
/* Returns node id, -1 on NOMEM, -2 if the name exists. */
int crux_sched_tb_add_node(struct topo_builder *b, const char *name, int is_host);
/* Adds both directions; returns the first link id or -1 on NOMEM. */
int crux_sched_tb_add_cable(struct topo_builder *b, int a, int c, double bytes_per_s);
crux_status_t crux_sched_tb_finish(struct topo_builder *b, struct crux_sched_topo **out,
				   struct crux_sched_err *err);

/* Errors and small helpers. */
void crux_sched_errf(struct crux_sched_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
uint64_t crux_sched_mix64(uint64_t x);
struct sched_rng {
	uint64_t s;
};
void crux_sched_rng_seed(struct sched_rng *r, uint64_t seed);
uint64_t crux_sched_rng_next(struct sched_rng *r);
/* Uniform in [0, n). */
uint32_t crux_sched_rng_below(struct sched_rng *r, uint32_t n);
uint32_t crux_sched_name_hash(const char *s);
crux_status_t crux_sched_read_file_text(const char *path, char **text, size_t *len,
					struct crux_sched_err *err);

/* Tokenizer for line-oriented formats: splits in place on blanks, drops '#' comments. */
#define MAX_TOKENS 4096
int crux_sched_split_tokens(char *line, char **tok, int max);

/* The Crux policies' priority step: P = I (k I with p->correction), then ranks. */
crux_status_t crux_sched_prioritise(const struct crux_sched_job *jobs, size_t n,
				    const struct crux_sched_params *p,
				    struct crux_sched_schedule *s);

/* Links of flow f of job i on the schedule's chosen path (count, pointer). */
crux_status_t crux_sched_flow_links(struct crux_sched_topo *t, const struct crux_sched_job *job,
				    int f, int path_idx, const int **links, int *n_links);

/* Per job: distinct directed links on its chosen paths with bytes per iteration (CSR). */
struct job_links {
	size_t *off; /* n + 1 */
	int *link;
	double *bytes;
	/* Per job its flows on the fabric (foff, n + 1), per flow its links
	 * (fl_off into fl_link) and bytes: what the phase-aware evaluator needs. */
	size_t *foff, *fl_off;
	int *fl_link;
	double *fl_bytes;
};
crux_status_t crux_sched_job_links_build(struct crux_sched_topo *t,
					 const struct crux_sched_job *jobs, size_t n,
					 const struct crux_sched_schedule *s,
					 struct job_links *out);
void crux_sched_job_links_free(struct job_links *jl);
/* The jobs on each of the topology's L links (CSR: link l's jobs are
 * ljob[loff[l] .. loff[l + 1])), from jl's links of n jobs. */
/* The guard's bound (its own slowdown_bound, else 'bound') and isolated time
 * (the caller's iso_time, else alone on its paths at full link rates) of each
 * of n jobs, on jl's links. */
void crux_sched_guard_bounds(const struct crux_sched_topo *t, const struct crux_sched_job *jobs,
			     size_t n, const struct job_links *jl, double bound, double *bnd,
			     double *iso);
crux_status_t crux_sched_link_jobs(const struct job_links *jl, size_t n, int L, size_t **loff,
				   int **ljob);
/*
 * crux_sched_evaluate on links built for s's paths (levels may differ): for
 * callers that evaluate many level assignments of one set of valid jobs.
 * reuse: the jobs, their links and paths are those of the previous call on
 * ev, only levels may have moved; the levels above the highest that changed
 * are then not computed again (same answer as a full pass).
 */
struct crux_sched_eval;
crux_status_t crux_sched_evaluate_links(struct crux_sched_eval *ev, const struct crux_sched_topo *t,
					const struct crux_sched_job *jobs, size_t n,
					const struct crux_sched_schedule *s,
					const struct job_links *jl, int reuse, double *iter_time,
					double *util);
/* 0: every reuse call makes a full pass (a benchmark's baseline); 1: default.
 * Process-wide, not thread-safe: for benchmarks and tests only. */
void crux_sched_eval_set_resume(int on);
/* 2 (default): a level's groups of peers are run together (eval_peers.c)
 * under what the higher levels leave; 1: only groups no higher level meets;
 * 0: none, the closed form (phase_aware_tau). Process-wide, not
 * thread-safe: for benchmarks (sched-refcheck --closed-form) and tests. */
void crux_sched_eval_set_peers(int on);
/* A level's group of peers (comp[0..nc)) run together as a fluid system at
 * link rates cap[] (times what higher levels leave, hi, unless NULL), each
 * from its iteration
 * time T0[] (its phase draws): 0 and each one's transfer time in tau[0..nc),
 * or -1 (too much work for *work, starved, no memory): keep the closed form.
 * lmark[] (per link, -1) is scratch, left as found; *p is kept between calls. */
struct crux_sched_peers;
/* Higher levels on the group's links: at() sets free[l], the fraction of each
 * of those links they leave at x in phase draw d, and returns when that may
 * change next. */
struct crux_sched_peers_hi {
	double (*at)(void *ctx, int d, double x);
	void *ctx;
	const double *free;
};
int crux_sched_peers_run(struct crux_sched_peers **p, const struct crux_sched_job *jobs,
			 const struct job_links *jl, const int *comp, size_t nc, const double *cap,
			 const double *T0, const struct crux_sched_peers_hi *hi, int *lmark,
			 size_t *work, double *tau);
/* After a run that returned 0: member i's sends in draw d after the warm-up
 * (the window crux_sched_peers_window gives), in time order, each its load
 * fraction on each of its links (jl->off order) over [a, b). */
void crux_sched_peers_window(const struct crux_sched_peers *p, double *t0, double *span);
void crux_sched_peers_trace(const struct crux_sched_peers *p, size_t i, int d,
			    void (*put)(void *ctx, double a, double b, const double *ld),
			    void *ctx);
void crux_sched_peers_free(struct crux_sched_peers *p);
/* Gap-reuse events ev has simulated since it was made: a bound tests check. */
size_t crux_sched_eval_gap_events(const struct crux_sched_eval *ev);
/* Finite, non-negative times, bytes and work; overlap in 0..1; hosts in range. */
crux_status_t crux_sched_jobs_validate(const struct crux_sched_topo *t,
				       const struct crux_sched_job *jobs, size_t n);
/* TACCL's levels: one per distinct hop count (floor of the priority), longest first. */
crux_status_t crux_sched_compress_hops(struct crux_sched_schedule *s);
/* Guaranteed shares per level from p->weight into s->share (zeros when unset);
 * CRUX_ERR_INVAL when the weights do not match the levels. */
crux_status_t crux_sched_shares(const struct crux_sched_params *p, struct crux_sched_schedule *s);
#endif
