/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fluid evaluator against the reference model (crux/sched_ref.h).
 *
 * Random cases: a two-layer Clos with 2-4 ToRs of 2-4 hosts (8 GPUs, 100 G)
 * and 2 aggregation switches over one 100 G uplink each, or one shared link
 * (every job sends into one host), 2-10 jobs of 2-4 hosts with a ring
 * all-reduce whose isolated communication takes 0.1-1.5x the compute time,
 * half of them overlapping up to 60 %. Each case is planned by several
 * schedules (below); every schedule is run through the evaluator and the
 * reference (max-min per flow, 4 random phase draws; and per job, 2 draws,
 * which separates the fairness effect from the phase effect). The paper's
 * examples are run the same way.
 *
 * Printed and written (JSON): utilisation error (evaluator - reference) /
 * reference per schedule, the share of schedules within +-5 %, per-job
 * iteration-time errors, the share of schedule pairs of one case that the
 * two rank the same way (pairs the reference separates by > 1 %), and each
 * schedule's mean utilisation under both. Crux's mechanisms judged by the
 * reference, each against crux-full (the library's default, P = I) per case:
 * the paper's correction factor (P = k I), k from pair runs in the reference,
 * a random and the reversed order, one level (Crux's paths), ECMP paths
 * (Crux's priority and Max-K-Cut), Sincronia's rank mapping (Crux's paths
 * and order), Max-K-Cut's levels without the evaluator's refinement; and
 * the baselines TACCL*, Sincronia and ECMP.
 *
 * With ROWS.csv, one row per job and schedule (what the two models say and
 * how the job meets other jobs: peers on its level, higher jobs on its
 * links, flows crossing the traffic of several higher jobs), to classify
 * where the two disagree.
 *
 * With REFCACHE, the reference's answers are kept in that file and reused
 * by a later run whose case and schedule are the same (a fingerprint of the
 * jobs, paths and levels must match; otherwise the reference runs again), so
 * a change of the evaluator alone is measured in seconds, not minutes.
 *
 * With --closed-form (last), a level's peers keep the evaluator's closed form
 * (phase_aware_tau) instead of being run together (eval_peers.c): the
 * accuracy of what cruxd falls back to where a group is too large to run.
 * --refine-gain=X sets every Crux schedule's refine_gain (default the
 * library's); crux-max-k-cut is crux-full without it (Max-K-Cut's levels).
 * --refine-keep-order keeps the refinement within each schedule's priority
 * order (crux_sched_params.refine_free 0; the library's default moves a job
 * to any level). The random and reversed orders are always refined within
 * their orders, so those rows still measure an order.
 *
 * usage: sched-refcheck [CASES] [OUT.json] [CASE_SEED] [LEVELS] [ROWS.csv|-] [REFCACHE]
 *                       [--closed-form] [--refine-gain=X] [--refine-keep-order]
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
#include "sched_int.h"

enum sch {
	S_CRUX,	    /* crux-full (the library's default: P = I, no correction factor) */
	S_NOK,	    /* crux-full with the paper's correction factor, P = k I */
	S_RANDOM,   /* crux paths, random order, Max-K-Cut */
	S_REVERSED, /* crux paths, reversed order, Max-K-Cut */
	S_ONE,	    /* crux paths, one level */
	S_TACCL,
	S_SINC,
	S_ECMP,
	S_REFK,	      /* crux paths, P = k I with k from the reference model's pair runs */
	S_ECMP_PATHS, /* Crux's priority and Max-K-Cut on ECMP paths */
	S_RANKMAP,    /* Crux's paths and order, Sincronia's rank mapping (crux-ps-pa) */
	S_MAXKCUT,    /* crux-full without the evaluator's refinement: Max-K-Cut's levels */
	N_SCH
};
static const char *const sch_name[N_SCH] = {"crux-full",       "crux-paper-k",	"random-order",
					    "reversed-order",  "one-level",	"taccl",
					    "sincronia",       "ecmp",		"crux-ref-k",
					    "crux-ecmp-paths", "crux-rank-map", "crux-max-k-cut"};

static int g_levels = 8;			     /* K of every schedule (argument 4) */
static double g_refine = CRUX_SCHED_DEF_REFINE_GAIN; /* crux-full's (--refine-gain=X) */
static int g_free = -1; /* the Crux schedules' refine_free: -1 the library's default */

__attribute__((noreturn)) static void die(const char *what)
{
	fprintf(stderr, "sched-refcheck: %s\n", what);
	exit(1);
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Growable sample of doubles. */
struct vec {
	double *v;
	size_t n, cap;
};

static void push(struct vec *v, double x)
{
	if (v->n == v->cap) {
		v->cap = v->cap ? v->cap * 2 : 256;
		v->v = realloc(v->v, v->cap * sizeof(double));
		if (!v->v)
			die("out of memory");
	}
	v->v[v->n++] = x;
}

static double quant(struct vec *v, double q)
{
	if (!v->n)
		return NAN;
	qsort(v->v, v->n, sizeof(double), cmp_dbl);
	return v->v[(size_t)(q * (double)(v->n - 1) + 0.5)];
}

static double mean(const struct vec *v)
{
	double s = 0;

	for (size_t i = 0; i < v->n; i++)
		s += v->v[i];
	return v->n ? s / (double)v->n : NAN;
}

static double mean_abs(const struct vec *v)
{
	double s = 0;

	for (size_t i = 0; i < v->n; i++)
		s += fabs(v->v[i]);
	return v->n ? s / (double)v->n : NAN;
}

static double share_within(const struct vec *v, double tol)
{
	size_t k = 0;

	for (size_t i = 0; i < v->n; i++)
		k += fabs(v->v[i]) <= tol;
	return v->n ? (double)k / (double)v->n : NAN;
}

/* One case's measurements of one schedule. */
struct meas {
	double ue, ur, uj; /* evaluator, reference per flow, per job */
	double ue_m[2];	   /* evaluator, first model (0) and phase-aware (1) */
};

struct acc {
	struct vec uerr, uerr_job, terr, terr_one, uerr_one, uerr_multi;
	struct vec by_n[3];	      /* 2-4, 5-7, 8-10 jobs */
	struct vec by_topo[2][2];     /* [single link][multi-level] */
	struct vec by_topo_job[2][2]; /* the same against the per-job reference */
	struct vec sch_e[N_SCH], sch_r[N_SCH];
	struct vec sch_err[N_SCH]; /* utilisation error per schedule kind */
	long pairs, agree, pairs_all, agree_all;
	long starved, truncated, starved_jobs;
	struct vec gain[N_SCH]; /* per case, reference: crux-full / schedule - 1 */
};

static struct crux_sched_topo *make_topo(uint64_t *rs, int *single)
{
	struct crux_sched_topo *t = NULL;
	struct crux_sched_err err;

	*single = crux_bench_rnd(rs) % 4 == 0;
	if (*single) {
		const char *msg = crux_bench_single_link(&t);

		if (msg)
			die(msg);
		return t;
	}
	struct crux_sched_clos2_params cp = {
	    .n_tor = 2 + (int)(crux_bench_rnd(rs) % 3),
	    .n_agg = 2,
	    .hosts_per_tor = 2 + (int)(crux_bench_rnd(rs) % 3),
	    .tor_uplinks = 1,
	    .host_gbps = 100,
	    .tor_gbps = 100,
	};
	if (crux_sched_topo_clos2(&cp, &t, &err))
		die(err.msg);
	return t;
}

static void make_jobs(uint64_t *rs, struct crux_sched_topo *t, int single, int nj,
		      struct crux_sched_jobs *js)
{
	int H = crux_sched_topo_n_hosts(t);
	double bps = 100e9 / 8;

	for (int j = 0; j < nj; j++) {
		int hosts[4], nh;
		struct crux_sched_flow fl[4];
		double c = crux_bench_urand(rs, 0.05, 0.5), ratio = crux_bench_urand(rs, 0.1, 1.5);
		double ov = crux_bench_rnd(rs) % 2 ? crux_bench_urand(rs, 0, 0.6) : 0;
		struct crux_sched_job jb = {.id = (uint64_t)j + 1, .compute = c, .overlap = ov};

		if (single) {
			/* Every job sends from its own hosts into h0: one shared link. */
			nh = 1 + (int)(crux_bench_rnd(rs) % 3);
			hosts[0] = 0;
			for (int k = 1; k <= nh; k++)
				hosts[k] = 1 + (int)(crux_bench_rnd(rs) % (uint64_t)(H - 1));
			int m = 1;

			for (int k = 1; k <= nh; k++) {
				int dup = 0;

				for (int q = 1; q < m; q++)
					dup |= hosts[q] == hosts[k];
				if (!dup)
					hosts[m++] = hosts[k];
			}
			nh = m;
			double per = ratio * c * bps / (nh - 1);

			for (int k = 1; k < nh; k++)
				fl[k - 1] = (struct crux_sched_flow){hosts[k], 0, per};
			jb.n_flows = nh - 1;
		} else {
			nh = 2 + (int)(crux_bench_rnd(rs) % 3);
			for (int k = 0; k < nh; k++) {
				int h, dup;

				do {
					h = (int)(crux_bench_rnd(rs) % (uint64_t)H);
					dup = 0;
					for (int q = 0; q < k; q++)
						dup |= hosts[q] == h;
				} while (dup);
				hosts[k] = h;
			}
			/* Ring all-reduce: each hop carries the same bytes. */
			double per = ratio * c * bps;

			for (int k = 0; k < nh; k++)
				fl[k] =
				    (struct crux_sched_flow){hosts[k], hosts[(k + 1) % nh], per};
			jb.n_flows = nh;
		}
		jb.n_hosts = nh;
		jb.hosts = hosts;
		jb.gpus = 8 * nh;
		jb.work = jb.gpus * c;
		jb.flows = fl;
		if (crux_sched_jobs_add(js, &jb))
			die("cannot add a job");
	}
}

/* Link share (bytes / T / rate) of two jobs alone on one link, a above b. */
static void pair_shares(const struct crux_sched_job *a, double ta, const struct crux_sched_job *b,
			double tb, double *sa, double *sb)
{
	static struct crux_sched_topo *lt;
	const char *txt = "host a b x\nswitch s\nlink a s 8\nlink b s 8\nlink x s 8\n";
	struct crux_sched_err err;
	struct crux_sched_jobs js;
	struct crux_sched_schedule *s;
	struct crux_sched_ref_params rp;
	double T[2], u;
	const struct crux_sched_job *src[2] = {a, b};
	double t[2] = {ta, tb};

	if (!lt && crux_sched_topo_parse(txt, strlen(txt), "pair", &lt, &err))
		die(err.msg);
	crux_sched_jobs_init(&js);
	for (int q = 0; q < 2; q++) {
		int hosts[2] = {q, 2};
		struct crux_sched_flow fl = {q, 2, t[q] * 1e9};
		struct crux_sched_job jb = {.id = (uint64_t)q + 1,
					    .gpus = 2,
					    .n_hosts = 2,
					    .hosts = hosts,
					    .work = 2 * src[q]->compute,
					    .compute = src[q]->compute,
					    .overlap = src[q]->overlap,
					    .n_flows = 1,
					    .flows = &fl};

		if (crux_sched_jobs_add(&js, &jb))
			die("pair job");
	}
	if (crux_sched_schedule_new(js.v, js.n, 2, &s))
		die("pair schedule");
	s->d[0].level = 1;
	s->d[1].level = 0;
	s->d[0].path[0] = s->d[1].path[0] = 0;
	crux_sched_ref_params_default(&rp);
	if (crux_sched_reference(lt, js.v, js.n, s, &rp, T, &u, NULL))
		die("pair reference");
	*sa = T[0] > 0 ? ta / T[0] : 0;
	*sb = T[1] > 0 ? tb / T[1] : 0;
	crux_sched_schedule_free(s);
	crux_sched_jobs_free(&js);
}

/*
 * The paper's correction factor with the pair compared in the reference
 * model: D_x = x's link share when first minus when second, k_j = D_j / D_r
 * against the reference job r (most network bytes), P = k I.
 */
static void ref_k(const struct crux_sched_jobs *js, struct crux_sched_schedule *s)
{
	int r = s->reference;

	for (size_t i = 0; i < js->n; i++) {
		double k = 1;

		if (r >= 0 && (int)i != r && s->d[i].comm_time > 0) {
			double jf, rs, rf, jsec;

			pair_shares(&js->v[i], s->d[i].comm_time, &js->v[r], s->d[r].comm_time, &jf,
				    &rs);
			pair_shares(&js->v[r], s->d[r].comm_time, &js->v[i], s->d[i].comm_time, &rf,
				    &jsec);
			double dj = jf - jsec, dr = rf - rs;

			k = dr > 1e-9 ? dj / dr : dj > 1e-9 ? 100 : 1;
			k = fmin(fmax(k, 0), 100);
		}
		s->d[i].priority = k * s->d[i].intensity;
	}
}

/*
 * The reference's answers of one (case, schedule), in run order, cached
 * between runs; fp fingerprints what the reference was given.
 */
struct refrec {
	uint64_t fp;
	double ur, uj, noise, horizon;
	int starved, truncated;
	size_t n;
	double *Tr;
};

static struct {
	struct refrec *v;
	size_t n, cap, next, hits;
	int dirty;
} g_cache;

static uint64_t fp_mix(uint64_t h, uint64_t x)
{
	h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdull;
}

static uint64_t fp_dbl(uint64_t h, double x)
{
	uint64_t u;

	memcpy(&u, &x, sizeof(u));
	return fp_mix(h, u);
}

static uint64_t fingerprint(const struct crux_sched_jobs *js, const struct crux_sched_schedule *s,
			    uint64_t seed)
{
	uint64_t h = fp_mix(0, seed);

	for (size_t i = 0; i < js->n; i++) {
		const struct crux_sched_job *jb = &js->v[i];

		h = fp_dbl(fp_dbl(fp_dbl(fp_mix(h, jb->id), jb->compute), jb->overlap), jb->work);
		h = fp_mix(fp_mix(h, (uint64_t)s->d[i].level), jb->n_flows);
		for (int f = 0; f < jb->n_flows; f++)
			h = fp_dbl(fp_mix(fp_mix(fp_mix(h, (uint64_t)(int64_t)s->d[i].path[f]),
						 (uint64_t)jb->flows[f].src),
					  (uint64_t)jb->flows[f].dst),
				   jb->flows[f].bytes);
	}
	return h;
}

static void cache_load(const char *path)
{
	FILE *f = fopen(path, "rb");
	struct refrec r;

	if (!f)
		return; /* no cache yet: written at the end */
	while (fread(&r, sizeof(r), 1, f) == 1) {
		r.Tr = calloc(r.n ? r.n : 1, sizeof(double));
		if (!r.Tr || fread(r.Tr, sizeof(double), r.n, f) != r.n)
			die("the reference cache is damaged: delete it");
		if (g_cache.n == g_cache.cap) {
			g_cache.cap = g_cache.cap ? 2 * g_cache.cap : 1024;
			g_cache.v = realloc(g_cache.v, g_cache.cap * sizeof(r));
			if (!g_cache.v)
				die("out of memory");
		}
		g_cache.v[g_cache.n++] = r;
	}
	fclose(f);
}

static void cache_save(const char *path)
{
	FILE *f;

	if (!path || !g_cache.dirty)
		return;
	f = fopen(path, "wb");
	if (!f)
		die("cannot write the reference cache");
	for (size_t i = 0; i < g_cache.n; i++)
		if (fwrite(&g_cache.v[i], sizeof(g_cache.v[i]), 1, f) != 1 ||
		    fwrite(g_cache.v[i].Tr, sizeof(double), g_cache.v[i].n, f) != g_cache.v[i].n)
			die("cannot write the reference cache");
	fclose(f);
}

/* The cached record for the next (case, schedule), or NULL where it must run:
 * first the record at the same position, else any with the same fingerprint
 * (a run with other schedules still finds the ones it shares). */
static struct refrec *cache_next(uint64_t fp, size_t n)
{
	size_t i = g_cache.next++;

	if (i < g_cache.n && g_cache.v[i].fp == fp && g_cache.v[i].n == n) {
		g_cache.hits++;
		return &g_cache.v[i];
	}
	for (size_t k = 0; k < g_cache.n; k++) {
		if (g_cache.v[k].fp == fp && g_cache.v[k].n == n && g_cache.v[k].Tr) {
			g_cache.hits++;
			return &g_cache.v[k];
		}
	}
	return NULL;
}

/* New records go at the end, so none that a later lookup may find is lost. */
static void cache_put(uint64_t fp, const struct refrec *r)
{
	size_t i = g_cache.n;

	if (i >= g_cache.cap) {
		g_cache.cap = i + 1024;
		g_cache.v = realloc(g_cache.v, g_cache.cap * sizeof(*r));
		if (!g_cache.v)
			die("out of memory");
	}
	g_cache.n++;
	g_cache.v[i] = *r;
	g_cache.v[i].fp = fp;
	g_cache.v[i].Tr = malloc((r->n ? r->n : 1) * sizeof(double));
	if (!g_cache.v[i].Tr)
		die("out of memory");
	memcpy(g_cache.v[i].Tr, r->Tr, r->n * sizeof(double));
	g_cache.dirty = 1;
}

static void plan(struct crux_sched_topo *t, const struct crux_sched_jobs *js, enum sch k,
		 uint64_t seed, struct crux_sched_schedule *s)
{
	struct crux_sched_params p;

	crux_sched_params_default(&p);
	p.levels = g_levels;
	p.seed = seed;
	static const enum crux_sched_policy pol[N_SCH] = {
	    CRUX_SCHED_CRUX_FULL, CRUX_SCHED_CRUX_FULL,	 CRUX_SCHED_CRUX_FULL,
	    CRUX_SCHED_CRUX_FULL, CRUX_SCHED_CRUX_FULL,	 CRUX_SCHED_TACCL,
	    CRUX_SCHED_SINCRONIA, CRUX_SCHED_ECMP,	 CRUX_SCHED_CRUX_FULL,
	    CRUX_SCHED_CRUX_FULL, CRUX_SCHED_CRUX_PS_PA, CRUX_SCHED_CRUX_FULL};

	p.correction = k == S_NOK;
	p.refine_gain = k == S_MAXKCUT ? 0 : g_refine;
	/* The order rows keep their orders (a free refinement would undo what
	 * they measure); every other Crux schedule refines as crux-full does. */
	if (g_free >= 0)
		p.refine_free = g_free;
	if (k == S_RANDOM || k == S_REVERSED)
		p.refine_free = 0;
	if (crux_sched_run(t, js->v, js->n, &p, pol[k], s))
		die("policy failed");
	if (k == S_CRUX || k == S_NOK || (k >= S_TACCL && k <= S_ECMP) || k == S_RANKMAP ||
	    k == S_MAXKCUT)
		return;
	if (k == S_ECMP_PATHS) {
		if (crux_sched_paths_ecmp(t, js->v, js->n, seed, s) ||
		    crux_sched_intensity(t, js->v, js->n, s) ||
		    crux_sched_priority_plain(js->v, js->n, s))
			die("ECMP paths failed");
		crux_sched_rank(s);
		if (crux_sched_compress(t, js->v, js->n, &p, s) ||
		    crux_sched_compress_refine(t, js->v, js->n, &p, s))
			die("compress failed");
		return;
	}
	if (k == S_REFK) {
		ref_k(js, s);
		crux_sched_rank(s);
		if (crux_sched_compress(t, js->v, js->n, &p, s) ||
		    crux_sched_compress_refine(t, js->v, js->n, &p, s))
			die("compress failed");
		return;
	}
	if (k == S_ONE) {
		for (size_t i = 0; i < js->n; i++)
			s->d[i].level = 0;
		return;
	}
	uint64_t r = seed * 7919 + 17;

	for (size_t i = 0; i < js->n; i++) {
		double P = s->d[i].priority;

		s->d[i].priority = k == S_RANDOM ? crux_bench_urand(&r, 0, 1) : 1.0 / (P + 1e-12);
	}
	crux_sched_rank(s);
	if (crux_sched_compress(t, js->v, js->n, &p, s) ||
	    crux_sched_compress_refine(t, js->v, js->n, &p, s))
		die("compress failed");
}

/* The reference's answers for one schedule (computed once, judged for both models). */
static void reference(struct crux_sched_topo *t, const struct crux_sched_jobs *js,
		      const struct crux_sched_schedule *s, uint64_t seed, struct meas *m,
		      double *Tr, struct crux_sched_ref_stats *rs)
{
	struct crux_sched_ref_params rp;
	struct crux_sched_ref_stats rsj;

	crux_sched_ref_params_default(&rp);
	rp.seed = seed;
	if (crux_sched_reference(t, js->v, js->n, s, &rp, Tr, &m->ur, rs))
		die("reference failed");
	rp.fairness = CRUX_SCHED_REF_PER_JOB;
	rp.phases = 2;
	if (crux_sched_reference(t, js->v, js->n, s, &rp, NULL, &m->uj, &rsj))
		die("reference failed");
}

static void measure(struct crux_sched_topo *t, const struct crux_sched_jobs *js,
		    struct crux_sched_schedule *s, struct crux_sched_eval *ev, int model,
		    struct meas *m, const double *Tr, const struct crux_sched_ref_stats *rsp,
		    struct acc *a, int multi, int single)
{
	size_t n = js->n;
	double *Te = calloc(n, sizeof(double));
	struct crux_sched_ref_stats rs = *rsp;

	if (!Te)
		die("out of memory");
	s->eval_model = model ? CRUX_SCHED_EVAL_PHASE_AWARE : CRUX_SCHED_EVAL_ALL_AT_ONCE;
	if (crux_sched_evaluate(ev, t, js->v, n, s, Te, &m->ue))
		die("evaluate failed");
	m->ue_m[model] = m->ue;
	a->starved += rs.starved;
	a->truncated += rs.truncated;
	double e = (m->ue - m->ur) / m->ur;

	push(&a->uerr, e);
	push(multi ? &a->uerr_multi : &a->uerr_one, e);
	push(&a->by_n[n <= 4 ? 0 : n <= 7 ? 1 : 2], e);
	push(&a->by_topo[single][multi], e);
	push(&a->by_topo_job[single][multi], (m->ue - m->uj) / m->uj);
	push(&a->uerr_job, (m->ue - m->uj) / m->uj);
	/* Iteration times of jobs the reference saw run (a starved job's time is
	 * only a lower bound there: at least the measured window). */
	for (size_t i = 0; i < n; i++) {
		if (js->v[i].n_flows == 0 || !(Tr[i] > 0))
			continue;
		if (Tr[i] > 0.25 * rs.horizon_s) {
			a->starved_jobs++;
			continue;
		}
		push(multi ? &a->terr : &a->terr_one, (Te[i] - Tr[i]) / Tr[i]);
	}
	free(Te);
}

/* Does job a use directed link l (jl: the schedule's job links)? */
static int uses(const struct job_links *jl, size_t a, int l)
{
	for (size_t k = jl->off[a]; k < jl->off[a + 1]; k++)
		if (jl->link[k] == l)
			return 1;
	return 0;
}

/* Do jobs a and b share a directed link? */
static int meet(const struct job_links *jl, size_t a, size_t b)
{
	for (size_t k = jl->off[a]; k < jl->off[a + 1]; k++)
		if (uses(jl, b, jl->link[k]))
			return 1;
	return 0;
}

/*
 * Where the phase-aware evaluator and the reference disagree: each job's
 * share of the utilisation error, w (1/T_eval - 1/T_ref) / GPUs / U_ref,
 * summed by how the job meets other jobs (jobs alone are exact in both);
 * a schedule outside +-5 % is counted under the class that carries the
 * largest share of its error, with that share's sign.
 */
enum cls { C_PEERS, C_HIGHER1, C_HIGHERM, C_BOTH1, C_BOTHM, N_CLS };
static const char *const cls_name[N_CLS] = {"level_peers", "higher_levels_one_job_per_flow",
					    "higher_levels_several_jobs_on_a_flow",
					    "peers_and_one_higher", "peers_and_several_higher"};
static struct {
	long fail[N_CLS][2]; /* [class][0: evaluator below the reference, 1: above] */
	double err[N_CLS], abs_err[N_CLS];
	long schedules, failing;
} g_cls;

static void classify(const double *contrib, double err)
{
	int dom = 0;

	g_cls.schedules++;
	for (int x = 0; x < N_CLS; x++) {
		g_cls.err[x] += contrib[x];
		g_cls.abs_err[x] += fabs(contrib[x]);
		if (fabs(contrib[x]) > fabs(contrib[dom]))
			dom = x;
	}
	if (fabs(err) > 0.05) {
		g_cls.failing++;
		g_cls.fail[dom][contrib[dom] > 0]++;
	}
}

static void cls_report(struct crux_json *j)
{
	printf("where the phase-aware evaluator and the reference disagree (%ld of %ld schedules "
	       "outside +-5 %%), by the class carrying most of each one's error:\n",
	       g_cls.failing, g_cls.schedules);
	printf("  %-40s %8s %8s %12s %12s\n", "jobs meeting", "below", "above", "mean err",
	       "mean |err|");
	crux_json_key(j, "disagreement_classes");
	crux_json_obj(j);
	crux_json_key(j, "schedules");
	crux_json_i64(j, g_cls.schedules);
	crux_json_key(j, "outside_5pct");
	crux_json_i64(j, g_cls.failing);
	for (int x = 0; x < N_CLS; x++) {
		double n = (double)(g_cls.schedules ? g_cls.schedules : 1);

		printf("  %-40s %8ld %8ld %+11.2f%% %11.2f%%\n", cls_name[x], g_cls.fail[x][0],
		       g_cls.fail[x][1], 100 * g_cls.err[x] / n, 100 * g_cls.abs_err[x] / n);
		crux_json_key(j, cls_name[x]);
		crux_json_obj(j);
		crux_json_key(j, "outside_eval_below");
		crux_json_i64(j, g_cls.fail[x][0]);
		crux_json_key(j, "outside_eval_above");
		crux_json_i64(j, g_cls.fail[x][1]);
		crux_json_key(j, "mean_err");
		crux_json_numf(j, "%.5f", g_cls.err[x] / n);
		crux_json_key(j, "mean_abs_err");
		crux_json_numf(j, "%.5f", g_cls.abs_err[x] / n);
		crux_json_end_obj(j);
	}
	crux_json_end_obj(j);
}

/*
 * One CSV row per job of schedule s (case c, schedule k): both models'
 * iteration times, the reference's, and how the job meets the others.
 */
static void rows(FILE *cf, struct crux_sched_topo *t, const struct crux_sched_jobs *js,
		 struct crux_sched_schedule *s, struct crux_sched_eval *ev, const struct meas *m,
		 const double *Tr, double horizon, int c, int k, int single)
{
	size_t n = js->n;
	double Te[2][16];
	struct job_links jl;
	int used[CRUX_SCHED_MAX_LEVELS] = {0}, nlev = 0;

	if (n > 16 || crux_sched_job_links_build(t, js->v, n, s, &jl))
		die("rows: job links");
	for (int md = 0; md < 2; md++) {
		s->eval_model = md ? CRUX_SCHED_EVAL_PHASE_AWARE : CRUX_SCHED_EVAL_ALL_AT_ONCE;
		if (crux_sched_evaluate(ev, t, js->v, n, s, Te[md], NULL))
			die("rows: evaluate");
	}
	double contrib[N_CLS] = {0}, G = 0;

	for (size_t i = 0; i < n; i++) {
		used[s->d[i].level] = 1;
		G += js->v[i].gpus;
	}
	for (int l = 0; l < s->levels; l++)
		nlev += used[l];
	for (size_t i = 0; i < n; i++) {
		const struct crux_sched_job *jb = &js->v[i];
		double hsum = 0, hprod = 1;
		int li = s->d[i].level, peers = 0, higher = 0, lower = 0, mjob = 0, mlink = 0;
		double tiso = 0;

		for (size_t j = 0; j < n; j++) {
			if (j == i || !meet(&jl, i, j))
				continue;
			peers += s->d[j].level == li;
			higher += s->d[j].level > li;
			lower += s->d[j].level < li;
		}
		for (size_t k2 = jl.off[i]; k2 < jl.off[i + 1]; k2++) {
			double bw;
			int from, to;

			crux_sched_topo_link(t, jl.link[k2], &from, &to, &bw);
			tiso = fmax(tiso, jl.bytes[k2] / bw);
		}
		/* Flows whose links carry several higher jobs / higher traffic on several links. */
		for (size_t f = jl.foff[i]; f < jl.foff[i + 1]; f++) {
			int nh = 0, nlk = 0;

			for (size_t j = 0; j < n; j++) {
				int on = 0;

				if (s->d[j].level <= li)
					continue;
				for (size_t q = jl.fl_off[f]; q < jl.fl_off[f + 1]; q++)
					on |= uses(&jl, j, jl.fl_link[q]);
				nh += on;
			}
			for (size_t q = jl.fl_off[f]; q < jl.fl_off[f + 1]; q++) {
				int on = 0;

				for (size_t j = 0; j < n; j++)
					on |= s->d[j].level > li && uses(&jl, j, jl.fl_link[q]);
				nlk += on;
			}
			mjob += nh >= 2;
			mlink += nlk >= 2;
			/* The higher jobs' largest load fractions on this flow's links. */
			double sx = 0, px = 1;

			for (size_t j = 0; j < n; j++) {
				double x = 0;

				if (s->d[j].level <= li || !(Te[1][j] > 0))
					continue;
				for (size_t q = jl.fl_off[f]; q < jl.fl_off[f + 1]; q++)
					for (size_t k3 = jl.off[j]; k3 < jl.off[j + 1]; k3++) {
						double bw;
						int fr, to;

						if (jl.link[k3] != jl.fl_link[q])
							continue;
						crux_sched_topo_link(t, jl.link[k3], &fr, &to, &bw);
						x = fmax(x, jl.bytes[k3] / Te[1][j] / bw);
					}
				sx += x;
				px *= 1 - fmin(x, 1);
			}
			if (sx > hsum) {
				hsum = sx;
				hprod = px;
			}
		}
		if ((peers || higher) && Te[1][i] > 0 && Tr[i] > 0) {
			int x = !higher	 ? C_PEERS
				: !peers ? (mjob ? C_HIGHERM : C_HIGHER1)
					 : (mjob ? C_BOTHM : C_BOTH1);

			contrib[x] += jb->work * (1 / Te[1][i] - 1 / Tr[i]) / G / m->ur;
		}
		if (!cf)
			continue;
		fprintf(cf,
			"%d,%s,%d,%zu,%d,%zu,%d,%d,%.6g,%.4f,%.6g,%d,%d,%d,%d,%d,%d,%.6g,%.6g,%.6g,"
			"%d,%.6f,%.6f,%.6f,%.4f,%.4f,%d\n",
			c, sch_name[k], single, n, nlev, i, li, jb->gpus, jb->compute, jb->overlap,
			tiso, jb->n_flows, (int)(jl.foff[i + 1] - jl.foff[i]), peers, higher, lower,
			mjob, Te[0][i], Te[1][i], Tr[i], Tr[i] > 0.25 * horizon, m->ue_m[0],
			m->ue_m[1], m->ur, hsum, hprod, mlink);
	}
	classify(contrib, (m->ue_m[1] - m->ur) / m->ur);
	crux_sched_job_links_free(&jl);
}

static int multi_level(const struct crux_sched_schedule *s)
{
	for (size_t i = 1; i < s->n_jobs; i++)
		if (s->d[i].level != s->d[0].level)
			return 1;
	return 0;
}

/* ---- the paper's examples and the review's toy case on one link ---- */

struct example {
	const char *name;
	int n;
	double c[2], ov[2], comm[2], gpus[2];
	int lev[2];
	double paper_util; /* < 0: the paper gives none */
};

static void run_example(const struct example *x, struct crux_sched_eval *ev, struct crux_json *jw)
{
	const char *txt = "host a b x\nswitch s\nlink a s 8\nlink b s 8\nlink x s 8\n";
	struct crux_sched_topo *t;
	struct crux_sched_err err;
	struct crux_sched_jobs js;
	struct crux_sched_schedule *s;
	struct crux_sched_ref_params rp;
	double ue, ur, ur0, Te[2], Tr[2];

	if (crux_sched_topo_parse(txt, strlen(txt), "example", &t, &err))
		die(err.msg);
	crux_sched_jobs_init(&js);
	for (int j = 0; j < x->n; j++) {
		int hosts[2] = {j, 2};
		struct crux_sched_flow fl = {j, 2, x->comm[j] * 1e9};
		struct crux_sched_job jb = {.id = (uint64_t)j + 1,
					    .gpus = (int)x->gpus[j],
					    .n_hosts = 2,
					    .hosts = hosts,
					    .work = x->gpus[j] * x->c[j],
					    .compute = x->c[j],
					    .overlap = x->ov[j],
					    .n_flows = 1,
					    .flows = &fl};

		if (crux_sched_jobs_add(&js, &jb))
			die("example job");
	}
	if (crux_sched_schedule_new(js.v, js.n, 2, &s))
		die("schedule");
	for (int j = 0; j < x->n; j++) {
		s->d[j].level = x->lev[j];
		s->d[j].path[0] = 0;
	}
	crux_sched_ref_params_default(&rp);
	if (crux_sched_evaluate(ev, t, js.v, js.n, s, Te, &ue) ||
	    crux_sched_reference(t, js.v, js.n, s, &rp, Tr, &ur, NULL))
		die("example evaluation");
	rp.phases = 0;
	if (crux_sched_reference(t, js.v, js.n, s, &rp, NULL, &ur0, NULL))
		die("example evaluation");
	printf("%-34s eval %6.2f%%  ref %6.2f%% (in step %6.2f%%)%s", x->name, 100 * ue, 100 * ur,
	       100 * ur0, x->paper_util >= 0 ? "  paper " : "\n");
	if (x->paper_util >= 0)
		printf("%6.2f%%\n", 100 * x->paper_util);
	crux_json_obj(jw);
	crux_json_key(jw, "name");
	crux_json_str(jw, x->name);
	crux_json_key(jw, "eval_util");
	crux_json_numf(jw, "%.6f", ue);
	crux_json_key(jw, "ref_util");
	crux_json_numf(jw, "%.6f", ur);
	crux_json_key(jw, "ref_util_in_step");
	crux_json_numf(jw, "%.6f", ur0);
	crux_json_key(jw, "paper_util");
	if (x->paper_util >= 0)
		crux_json_numf(jw, "%.6f", x->paper_util);
	else
		crux_json_null(jw);
	crux_json_key(jw, "eval_iter");
	crux_json_arr(jw);
	crux_json_numf(jw, "%.6g", Te[0]);
	crux_json_numf(jw, "%.6g", x->n > 1 ? Te[1] : 0);
	crux_json_end_arr(jw);
	crux_json_key(jw, "ref_iter");
	crux_json_arr(jw);
	crux_json_numf(jw, "%.6g", Tr[0]);
	crux_json_numf(jw, "%.6g", x->n > 1 ? Tr[1] : 0);
	crux_json_end_arr(jw);
	crux_json_end_obj(jw);
	crux_sched_schedule_free(s);
	crux_sched_jobs_free(&js);
	crux_sched_topo_free(t);
}

static void put_stats(struct crux_json *j, const char *name, struct vec *v)
{
	crux_json_key(j, name);
	crux_json_obj(j);
	crux_json_key(j, "n");
	crux_json_u64(j, v->n);
	crux_json_key(j, "within_5pct");
	crux_json_numf(j, "%.4f", share_within(v, 0.05));
	crux_json_key(j, "mean");
	crux_json_numf(j, "%.5f", mean(v));
	crux_json_key(j, "mean_abs");
	crux_json_numf(j, "%.5f", mean_abs(v));
	crux_json_key(j, "p10");
	crux_json_numf(j, "%.5f", quant(v, 0.1));
	crux_json_key(j, "p50");
	crux_json_numf(j, "%.5f", quant(v, 0.5));
	crux_json_key(j, "p90");
	crux_json_numf(j, "%.5f", quant(v, 0.9));
	crux_json_end_obj(j);
}

static void print_row(const char *name, struct vec *v)
{
	double within = share_within(v, 0.05), m = mean(v);

	printf("%-26s %6zu %8.1f%% %+8.2f%% %+8.2f%% %+8.2f%% %+8.2f%%\n", name, v->n, 100 * within,
	       100 * m, 100 * quant(v, 0.1), 100 * quant(v, 0.5), 100 * quant(v, 0.9));
}

static void report(struct acc *a, struct acc *a0, const char *label, struct crux_json *j)
{
	printf("%s\n", label);
	printf("%-26s %6s %9s %9s %9s %9s %9s\n", "utilisation error", "n", "within5%", "mean",
	       "p10", "p50", "p90");
	print_row("all schedules", &a->uerr);
	print_row("one-level schedules", &a->uerr_one);
	print_row("multi-level schedules", &a->uerr_multi);
	print_row("one link, one level", &a->by_topo[1][0]);
	print_row("one link, multi-level", &a->by_topo[1][1]);
	print_row("Clos, one level", &a->by_topo[0][0]);
	print_row("Clos, multi-level", &a->by_topo[0][1]);
	print_row("  per-job ref, link, 1 lvl", &a->by_topo_job[1][0]);
	print_row("  per-job ref, link, multi", &a->by_topo_job[1][1]);
	print_row("  per-job ref, Clos, 1 lvl", &a->by_topo_job[0][0]);
	print_row("  per-job ref, Clos, multi", &a->by_topo_job[0][1]);
	print_row("2-4 jobs", &a->by_n[0]);
	print_row("5-7 jobs", &a->by_n[1]);
	print_row("8-10 jobs", &a->by_n[2]);
	print_row("vs per-job reference", &a->uerr_job);
	print_row("iter time, one level", &a->terr_one);
	print_row("iter time, multi-level", &a->terr);
	printf("ranking of two schedules of a case: agree on %.1f%% of %ld pairs the reference "
	       "separates by > 1%% (%.1f%% of all %ld pairs, ties within 1%%)\n",
	       100.0 * (double)a->agree / (double)(a->pairs ? a->pairs : 1), a->pairs,
	       100.0 * (double)a->agree_all / (double)a->pairs_all, a->pairs_all);
	printf("%-16s %10s %10s %10s\n", "schedule", "eval util", "ref util", "within5%");
	for (int k = 0; k < N_SCH; k++)
		printf("%-16s %9.2f%% %9.2f%% %9.1f%%\n", sch_name[k], 100 * mean(&a->sch_e[k]),
		       100 * mean(&a0->sch_r[k]), 100 * share_within(&a->sch_err[k], 0.05));
	crux_json_obj(j);
	crux_json_key(j, "util_error");
	crux_json_obj(j);
	put_stats(j, "all", &a->uerr);
	put_stats(j, "one_level", &a->uerr_one);
	put_stats(j, "multi_level", &a->uerr_multi);
	put_stats(j, "one_link_one_level", &a->by_topo[1][0]);
	put_stats(j, "one_link_multi_level", &a->by_topo[1][1]);
	put_stats(j, "clos_one_level", &a->by_topo[0][0]);
	put_stats(j, "clos_multi_level", &a->by_topo[0][1]);
	put_stats(j, "jobs_2_4", &a->by_n[0]);
	put_stats(j, "jobs_5_7", &a->by_n[1]);
	put_stats(j, "jobs_8_10", &a->by_n[2]);
	put_stats(j, "vs_per_job_reference", &a->uerr_job);
	crux_json_end_obj(j);
	crux_json_key(j, "iter_error");
	crux_json_obj(j);
	put_stats(j, "one_level", &a->terr_one);
	put_stats(j, "multi_level", &a->terr);
	crux_json_end_obj(j);
	crux_json_key(j, "ranking");
	crux_json_obj(j);
	crux_json_key(j, "separated_pairs");
	crux_json_i64(j, a->pairs);
	crux_json_key(j, "agree");
	crux_json_numf(j, "%.4f", (double)a->agree / (double)(a->pairs ? a->pairs : 1));
	crux_json_key(j, "all_pairs");
	crux_json_i64(j, a->pairs_all);
	crux_json_key(j, "agree_all");
	crux_json_numf(j, "%.4f", (double)a->agree_all / (double)a->pairs_all);
	crux_json_end_obj(j);
	crux_json_key(j, "schedules_mean_eval_util");
	crux_json_obj(j);
	for (int k = 0; k < N_SCH; k++) {
		crux_json_key(j, sch_name[k]);
		crux_json_numf(j, "%.5f", mean(&a->sch_e[k]));
	}
	crux_json_end_obj(j);
	crux_json_key(j, "within_5pct_by_schedule");
	crux_json_obj(j);
	for (int k = 0; k < N_SCH; k++) {
		crux_json_key(j, sch_name[k]);
		crux_json_numf(j, "%.4f", share_within(&a->sch_err[k], 0.05));
	}
	crux_json_end_obj(j);
	crux_json_end_obj(j);
}

int main(int argc, char **argv)
{
	int cases = argc > 1 ? atoi(argv[1]) : 200;
	const char *out = argc > 2 ? argv[2] : "bench/results/sched-refcheck.json";
	static struct acc a[2];
	static struct vec noise;
	struct crux_sched_eval *ev;
	uint64_t seed0 = argc > 3 ? strtoull(argv[3], NULL, 0) : 0x5eed2026, rs = seed0;

	int closed = 0;

	/* Options after the positional arguments. */
	while (argc > 1 && !strncmp(argv[argc - 1], "--", 2)) {
		const char *o = argv[--argc];
		char *end;

		if (!strcmp(o, "--closed-form")) {
			closed = 1;
			crux_sched_eval_set_peers(0);
		} else if (!strncmp(o, "--refine-gain=", 14)) {
			g_refine = strtod(o + 14, &end);
			if (*end || !(g_refine >= 0) || g_refine > 1)
				die("--refine-gain=X: X must be a fraction in 0..1");
		} else if (!strcmp(o, "--refine-keep-order")) {
			g_free = 0;
		} else {
			die("unknown option (--closed-form, --refine-gain=X, --refine-keep-order)");
		}
	}
	g_levels = argc > 4 ? atoi(argv[4]) : 8;
	FILE *cf = NULL;

	const char *cache_path = argc > 6 ? argv[6] : NULL;

	if (cache_path)
		cache_load(cache_path);
	if (argc > 5 && strcmp(argv[5], "-") != 0) {
		cf = fopen(argv[5], "w");
		if (!cf)
			die("cannot write the CSV file");
		fprintf(cf, "case,schedule,single_link,jobs,levels_used,job,level,gpus,compute,"
			    "overlap,iso_comm,flows,fabric_flows,peers,higher,lower,"
			    "flows_under_several_higher,eval_first_T,eval_T,ref_T,ref_starved,"
			    "eval_first_util,eval_util,ref_util,higher_load_sum,higher_free_indep,"
			    "flows_higher_on_several_links\n");
	}
	if (g_levels < 1 || g_levels > CRUX_SCHED_MAX_LEVELS)
		die("LEVELS must be 1..64");
	struct timespec t0, t1;

	if (cases < 1 || cases > 100000)
		die("CASES must be 1..100000");
	if (crux_sched_eval_new(&ev))
		die("out of memory");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int c = 0; c < cases; c++) {
		int single, nj = 2 + (int)(crux_bench_rnd(&rs) % 9);
		struct crux_sched_topo *t = make_topo(&rs, &single);
		struct crux_sched_jobs js;
		struct meas m[N_SCH];

		crux_sched_jobs_init(&js);
		make_jobs(&rs, t, single, nj, &js);
		for (int k = 0; k < N_SCH; k++) {
			struct crux_sched_schedule *s;
			struct crux_sched_ref_stats rst;
			double *Tr = calloc(js.n, sizeof(double));

			if (!Tr || crux_sched_schedule_new(js.v, js.n, g_levels, &s))
				die("out of memory");
			plan(t, &js, (enum sch)k, (uint64_t)c + 1, s);
			uint64_t fp = fingerprint(&js, s, (uint64_t)c + 1);
			struct refrec *hit = cache_next(fp, js.n);
			double u2 = 0;

			if (hit) {
				m[k].ur = hit->ur;
				m[k].uj = hit->uj;
				u2 = hit->noise;
				memcpy(Tr, hit->Tr, js.n * sizeof(double));
				rst = (struct crux_sched_ref_stats){.starved = hit->starved,
								    .truncated = hit->truncated,
								    .horizon_s = hit->horizon};
			} else {
				reference(t, &js, s, (uint64_t)c + 1, &m[k], Tr, &rst);
				if (k == S_CRUX || k == S_ONE) {
					/* The reference against itself: other start phases. */
					struct crux_sched_ref_params rp;

					crux_sched_ref_params_default(&rp);
					rp.seed = (uint64_t)c + 1000001;
					if (crux_sched_reference(t, js.v, js.n, s, &rp, NULL, &u2,
								 NULL))
						die("reference failed");
				}
				if (cache_path)
					cache_put(fp, &(struct refrec){.ur = m[k].ur,
								       .uj = m[k].uj,
								       .noise = u2,
								       .horizon = rst.horizon_s,
								       .starved = rst.starved,
								       .truncated = rst.truncated,
								       .n = js.n,
								       .Tr = Tr});
			}
			if (k == S_CRUX || k == S_ONE)
				push(&noise, (u2 - m[k].ur) / m[k].ur);
			for (int md = 0; md < 2; md++) {
				measure(t, &js, s, ev, md, &m[k], Tr, &rst, &a[md], multi_level(s),
					single);
				push(&a[md].sch_e[k], m[k].ue);
				push(&a[md].sch_err[k], (m[k].ue - m[k].ur) / m[k].ur);
			}
			push(&a[0].sch_r[k], m[k].ur);
			rows(cf, t, &js, s, ev, &m[k], Tr, rst.horizon_s, c, k, single);
			free(Tr);
			crux_sched_schedule_free(s);
		}
		for (int k = 0; k < N_SCH; k++)
			push(&a[0].gain[k], m[S_CRUX].ur / m[k].ur - 1);
		for (int md = 0; md < 2; md++)
			for (int x = 0; x < N_SCH; x++)
				for (int y = x + 1; y < N_SCH; y++) {
					double dr = m[x].ur - m[y].ur;
					double de = m[x].ue_m[md] - m[y].ue_m[md];
					double sc = fmax(m[x].ur, m[y].ur);
					int sep = fabs(dr) > 0.01 * sc;
					int ok = sep ? (dr > 0) == (de > 0) : fabs(de) <= 0.01 * sc;

					a[md].pairs_all++;
					a[md].agree_all += ok;
					if (sep) {
						a[md].pairs++;
						a[md].agree += ok;
					}
				}
		crux_sched_jobs_free(&js);
		crux_sched_topo_free(t);
		if ((c + 1) % 25 == 0)
			fprintf(stderr, "sched-refcheck: %d / %d cases\n", c + 1, cases);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double wall = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
	FILE *jf = fopen(out, "w");

	if (!jf)
		die("cannot write the JSON file");
	printf("evaluator vs reference, %d random cases x %d schedules (%.1f s; %zu of them "
	       "from the reference cache)\n",
	       cases, N_SCH, wall, g_cache.hits);
	cache_save(cache_path);
	print_row("reference vs itself", &noise);
	printf("(crux-full and one-level schedules, other random start phases: the noise floor)\n");
	printf("reference runs: %ld starved job-runs, %ld truncated runs; %ld jobs left out of the "
	       "iteration-time rows (starved in the reference)\n",
	       a[0].starved, a[0].truncated, a[0].starved_jobs);
	struct crux_json j;

	crux_json_init(&j, jf);
	crux_json_obj(&j);
	crux_json_key(&j, "benchmark");
	crux_json_str(&j, "sched-refcheck");
	crux_json_key(&j, "levels");
	crux_json_i64(&j, g_levels);
	crux_json_key(&j, "refine_gain");
	crux_json_num(&j, g_refine);
	crux_json_key(&j, "refine_free");
	{
		struct crux_sched_params dp;

		crux_sched_params_default(&dp);
		crux_json_i64(&j, g_free >= 0 ? g_free : dp.refine_free);
	}
	crux_json_key(&j, "cases");
	crux_json_i64(&j, cases);
	crux_json_key(&j, "schedules");
	crux_json_i64(&j, N_SCH);
	crux_json_key(&j, "wall_s");
	crux_json_numf(&j, "%.2f", wall);
	crux_json_key(&j, "reference");
	crux_json_obj(&j);
	crux_json_key(&j, "fairness");
	crux_json_str(&j, "flow");
	crux_json_key(&j, "phases");
	crux_json_i64(&j, 4);
	crux_json_key(&j, "horizon_iters");
	crux_json_i64(&j, 40);
	crux_json_key(&j, "warmup_iters");
	crux_json_i64(&j, 10);
	crux_json_end_obj(&j);
	crux_json_key(&j, "starved_job_runs");
	crux_json_i64(&j, a[0].starved);
	crux_json_key(&j, "truncated_runs");
	crux_json_i64(&j, a[0].truncated);
	crux_json_key(&j, "starved_jobs_left_out");
	crux_json_i64(&j, a[0].starved_jobs);
	crux_json_key(&j, "case_seed");
	crux_json_u64(&j, seed0);
	put_stats(&j, "reference_vs_itself", &noise);
	crux_json_key(&j, "evaluator_first_model");
	report(&a[0], &a[0],
	       "== evaluator, first model (all peers of a level at once; average "
	       "load of the levels above) ==",
	       &j);
	crux_json_key(&j, "peers_run_together");
	crux_json_bool(&j, !closed);
	crux_json_key(&j, "evaluator_phase_aware");
	report(&a[1], &a[0], "== evaluator, phase-aware model ==", &j);
	crux_json_key(&j, "schedules_mean_ref_util");
	crux_json_obj(&j);
	for (int k = 0; k < N_SCH; k++) {
		crux_json_key(&j, sch_name[k]);
		crux_json_numf(&j, "%.5f", mean(&a[0].sch_r[k]));
	}
	crux_json_end_obj(&j);
	printf("Crux's decisions under the reference (per flow): mean utilisation against "
	       "crux-full's, and per case crux-full / schedule - 1 (mean, p10, p90, cases where "
	       "crux-full is better by > 1 %% / worse by > 1 %%)\n");
	crux_json_key(&j, "crux_full_vs_ref");
	crux_json_obj(&j);
	for (int k = 1; k < N_SCH; k++) {
		struct vec *g = &a[0].gain[k];
		size_t better = 0, worse = 0;

		for (size_t i = 0; i < g->n; i++) {
			better += g->v[i] > 0.01;
			worse += g->v[i] < -0.01;
		}
		printf("  %-16s %+7.2f%%   per case %+6.2f%% %+6.2f%% %+6.2f%%  %3zu / %3zu\n",
		       sch_name[k], 100 * (mean(&a[0].sch_r[k]) / mean(&a[0].sch_r[S_CRUX]) - 1),
		       100 * mean(g), 100 * quant(g, 0.1), 100 * quant(g, 0.9), better, worse);
		crux_json_key(&j, sch_name[k]);
		crux_json_obj(&j);
		crux_json_key(&j, "mean");
		crux_json_numf(&j, "%.5f", mean(g));
		crux_json_key(&j, "p10");
		crux_json_numf(&j, "%.5f", quant(g, 0.1));
		crux_json_key(&j, "p90");
		crux_json_numf(&j, "%.5f", quant(g, 0.9));
		crux_json_key(&j, "better");
		crux_json_u64(&j, better);
		crux_json_key(&j, "worse");
		crux_json_u64(&j, worse);
		crux_json_end_obj(&j);
	}
	crux_json_end_obj(&j);
	cls_report(&j);
	/* The paper's examples (one link of 1e9 bytes/s; comm in s at that rate). */
	static const struct example ex[] = {
	    {"two identical jobs, one level", 2, {1, 1}, {0, 0}, {1, 1}, {2, 2}, {0, 0}, -1},
	    {"two identical jobs, two levels", 2, {1, 1}, {0, 0}, {1, 1}, {2, 2}, {1, 0}, -1},
	    {"Example 1, job 1 first", 2, {2, 1}, {0, 0}, {2, 1}, {10, 10}, {1, 0}, 0.375},
	    {"Example 1, job 2 first", 2, {2, 1}, {0, 0}, {2, 1}, {10, 10}, {0, 1}, 2.5 / 6},
	    {"Example 2, job 1 first", 2, {4, 2}, {0.5, 0.5}, {1, 3}, {2, 12}, {1, 0}, -1},
	    {"Example 2, job 2 first", 2, {4, 2}, {0.5, 0.5}, {1, 3}, {2, 12}, {0, 1}, -1},
	};
	crux_json_key(&j, "examples");
	crux_json_arr(&j);
	printf("examples (one link; evaluator phase-aware; reference: 4 random phases, and all "
	       "jobs in step):\n");
	for (size_t i = 0; i < sizeof(ex) / sizeof(ex[0]); i++)
		run_example(&ex[i], ev, &j);
	crux_json_end_arr(&j);
	crux_json_end_obj(&j);
	crux_json_done(&j);
	fclose(jf);
	if (cf)
		fclose(cf);
	crux_sched_eval_free(ev);
	return 0;
}
