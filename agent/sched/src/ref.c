/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reference model: an event-driven fluid simulation of periodic jobs (see
 * crux/sched_ref.h). Rates are recomputed at every event (a phase starts, a
 * flow finishes) by progressive filling, level by level from the highest, so
 * a lower level uses exactly the capacity the higher levels leave at that
 * instant, and jobs of one level that do not communicate at the same time
 * do not share. Nothing here is shared with the evaluator (eval.c) except the
 * topology's paths: it is the evaluator's judge.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "crux/sched_ref.h"
#include "sched_int.h"

#define FREEZE_EPS 1e-12 /* of a link's rate: saturated */
#define DONE_EPS   1e-9	 /* of a flow's bytes: finished */

struct rflow {
	int job;
	double bytes, part, rem, rate; /* part: bytes of one of its job's steps */
	int nl;
	size_t l0; /* into the local link list */
	int active;
	int src, dst; /* hosts */
	int pred;     /* the job's flow into this one's source (its ring predecessor), or -1 */
	int done;     /* parts sent this iteration */
};

struct rjob {
	int level, net;
	int steps; /* parts per flow and iteration (1: one transfer) */
	int nleft; /* flows with parts still to send this iteration */
	double c, cstart, tiso, offset;
	size_t f0, f1; /* flows [f0, f1) */
	double it_start;
	int comp_done, comm_on, nact;
	double first_end, last_end;
	long cnt;
};

struct rws {
	size_t n, nf, nu;
	struct rflow *f;
	struct rjob *j;
	int *flink;  /* local link indices of every flow (l0 offsets) */
	double *lbw; /* local link rates */
	double *resid, *use, *cap, *S;
	/* entities of one fill */
	size_t *eoff;
	int *einc_u;
	double *einc_c, *x;
	int *eid; /* flow or job of the entity */
	unsigned char *frozen;
	size_t inc_cap;
	int *ulist; /* links touched by one fill */
	unsigned char *utouch;
	double *jm;   /* per job: busiest link's remaining bytes (per-job mode) */
	double *jacc; /* per job scratch: remaining bytes on one link */
	enum crux_sched_ref_fairness fair;
	int levels;
	const double *share;
	int shares;
};

void crux_sched_ref_params_default(struct crux_sched_ref_params *p)
{
	memset(p, 0, sizeof(*p));
	p->fairness = CRUX_SCHED_REF_PER_FLOW;
	p->phases = 4;
	p->seed = 1;
	p->horizon_iters = 40;
	p->warmup_iters = 10;
	p->max_events = 2000000;
}

static void ws_free(struct rws *w)
{
	free(w->f);
	free(w->j);
	free(w->flink);
	free(w->lbw);
	free(w->resid);
	free(w->use);
	free(w->cap);
	free(w->S);
	free(w->eoff);
	free(w->einc_u);
	free(w->einc_c);
	free(w->x);
	free(w->eid);
	free(w->frozen);
	free(w->ulist);
	free(w->utouch);
	free(w->jm);
	free(w->jacc);
}

/* Flows with bytes on at least one link; their links as local indices. */
static crux_status_t ws_build(struct rws *w, struct crux_sched_topo *t,
			      const struct crux_sched_job *jobs, size_t n,
			      const struct crux_sched_schedule *s)
{
	size_t nf = 0, ninc = 0;
	int *map = NULL;
	crux_status_t st;

	for (size_t i = 0; i < n; i++) {
		for (int f = 0; f < jobs[i].n_flows; f++) {
			const int *links;
			int nl;

			st = crux_sched_flow_links(t, &jobs[i], f, s->d[i].path[f], &links, &nl);
			if (st)
				return st;
			if (nl > 0 && jobs[i].flows[f].bytes > 0) {
				nf++;
				ninc += (size_t)nl;
			}
		}
	}
	w->n = n;
	w->nf = nf;
	w->f = calloc(nf ? nf : 1, sizeof(*w->f));
	w->j = calloc(n ? n : 1, sizeof(*w->j));
	w->flink = malloc((ninc ? ninc : 1) * sizeof(int));
	map = malloc(((size_t)t->n_links + 1) * sizeof(int));
	w->lbw = malloc((ninc ? ninc : 1) * sizeof(double));
	if (!w->f || !w->j || !w->flink || !map || !w->lbw) {
		free(map);
		return CRUX_ERR_NOMEM;
	}
	for (int l = 0; l < t->n_links; l++)
		map[l] = -1;
	size_t k = 0, q = 0;

	for (size_t i = 0; i < n; i++) {
		struct rjob *J = &w->j[i];
		int lev = s->d[i].level;

		J->level = lev < 0 ? 0 : lev >= s->levels ? s->levels - 1 : lev;
		J->c = jobs[i].compute;
		J->cstart = (1.0 - jobs[i].overlap) * jobs[i].compute;
		J->f0 = q;
		for (int f = 0; f < jobs[i].n_flows; f++) {
			const int *links;
			int nl;

			st = crux_sched_flow_links(t, &jobs[i], f, s->d[i].path[f], &links, &nl);
			if (st) {
				free(map);
				return st;
			}
			if (nl <= 0 || !(jobs[i].flows[f].bytes > 0))
				continue;
			struct rflow *F = &w->f[q++];

			F->job = (int)i;
			F->bytes = jobs[i].flows[f].bytes;
			F->src = jobs[i].flows[f].src;
			F->dst = jobs[i].flows[f].dst;
			F->pred = -1;
			F->nl = nl;
			F->l0 = k;
			for (int a = 0; a < nl; a++) {
				int l = links[a];

				if (map[l] < 0) {
					map[l] = (int)w->nu;
					w->lbw[w->nu++] = t->lbw[l];
				}
				w->flink[k++] = map[l];
			}
		}
		J->f1 = q;
		J->net = J->f1 > J->f0;
		J->steps = jobs[i].steps > 1 ? jobs[i].steps : 1;
		for (size_t a = J->f0; a < J->f1; a++)
			w->f[a].part = w->f[a].bytes / J->steps;
		/* A ring step needs the previous step's data from upstream:
		 * the flow that delivers into this flow's source. */
		for (size_t a = J->f0; J->steps > 1 && a < J->f1; a++)
			for (size_t b = J->f0; b < J->f1; b++)
				if (b != a && w->f[b].dst == w->f[a].src) {
					w->f[a].pred = (int)b;
					break;
				}
	}
	free(map);
	size_t U = w->nu ? w->nu : 1;

	w->resid = calloc(U, sizeof(double));
	w->use = calloc(U, sizeof(double));
	w->cap = calloc(U, sizeof(double));
	w->S = calloc(U, sizeof(double));
	w->ulist = malloc(U * sizeof(int));
	w->utouch = calloc(U, 1);
	w->eoff = malloc(((nf > n ? nf : n) + 2) * sizeof(size_t));
	w->x = malloc(((nf > n ? nf : n) + 1) * sizeof(double));
	w->eid = malloc(((nf > n ? nf : n) + 1) * sizeof(int));
	w->frozen = malloc((nf > n ? nf : n) + 1);
	w->inc_cap = ninc + 1;
	w->einc_u = malloc(w->inc_cap * sizeof(int));
	w->einc_c = malloc(w->inc_cap * sizeof(double));
	w->jm = calloc(n + 1, sizeof(double));
	w->jacc = calloc(U, sizeof(double));
	if (!w->resid || !w->use || !w->cap || !w->S || !w->ulist || !w->utouch || !w->eoff ||
	    !w->x || !w->eid || !w->frozen || !w->einc_u || !w->einc_c || !w->jm || !w->jacc)
		return CRUX_ERR_NOMEM;
	/* Isolated iteration: the busiest link's bytes at its full rate. */
	for (size_t i = 0; i < n; i++) {
		struct rjob *J = &w->j[i];
		double tau = 0;

		for (size_t a = J->f0; a < J->f1; a++)
			for (int b = 0; b < w->f[a].nl; b++)
				w->jacc[w->flink[w->f[a].l0 + (size_t)b]] += w->f[a].bytes;
		for (size_t a = J->f0; a < J->f1; a++)
			for (int b = 0; b < w->f[a].nl; b++) {
				int u = w->flink[w->f[a].l0 + (size_t)b];

				tau = fmax(tau, w->jacc[u] / w->lbw[u]);
			}
		for (size_t a = J->f0; a < J->f1; a++)
			for (int b = 0; b < w->f[a].nl; b++)
				w->jacc[w->flink[w->f[a].l0 + (size_t)b]] = 0;
		J->tiso = crux_sched_isolated_iter(&jobs[i], tau);
	}
	return CRUX_OK;
}

/*
 * Max-min progressive filling of the entities in eoff/einc against cap[]
 * (links listed in ulist[0..nu)): x[e] gets each entity's rate (of its
 * busiest link in per-job mode), use[] what they take of each link.
 */
static void fill(struct rws *w, size_t ne, size_t nu)
{
	for (size_t q = 0; q < nu; q++) {
		w->S[w->ulist[q]] = 0;
		w->use[w->ulist[q]] = 0;
	}
	for (size_t e = 0; e < ne; e++) {
		w->x[e] = 0;
		w->frozen[e] = 0;
		for (size_t a = w->eoff[e]; a < w->eoff[e + 1]; a++)
			w->S[w->einc_u[a]] += w->einc_c[a];
	}
	size_t left = ne;

	while (left) {
		double d = INFINITY;

		for (size_t q = 0; q < nu; q++) {
			int u = w->ulist[q];

			if (w->S[u] > 1e-15) {
				double g = (w->cap[u] - w->use[u]) / w->S[u];

				d = fmin(d, g > 0 ? g : 0);
			}
		}
		if (!isfinite(d))
			break;
		for (size_t e = 0; e < ne; e++)
			if (!w->frozen[e])
				w->x[e] += d;
		for (size_t q = 0; q < nu; q++) {
			int u = w->ulist[q];

			w->use[u] += d * w->S[u];
		}
		size_t froze = 0;

		for (size_t e = 0; e < ne; e++) {
			if (w->frozen[e])
				continue;
			int sat = 0;

			for (size_t a = w->eoff[e]; a < w->eoff[e + 1] && !sat; a++) {
				int u = w->einc_u[a];

				sat = w->cap[u] - w->use[u] <= FREEZE_EPS * w->lbw[u];
			}
			if (!sat)
				continue;
			w->frozen[e] = 1;
			froze++;
			for (size_t a = w->eoff[e]; a < w->eoff[e + 1]; a++)
				w->S[w->einc_u[a]] -= w->einc_c[a];
		}
		if (!froze)
			break;
		left -= froze;
	}
}

/* Entities of the active flows of level lev into eoff/einc; returns their
 * count and lists the links they use in ulist (count in *nu). */
static size_t entities(struct rws *w, int lev, size_t *nu)
{
	size_t ne = 0, ni = 0;

	*nu = 0;
	w->eoff[0] = 0;
	if (w->fair == CRUX_SCHED_REF_PER_FLOW) {
		for (size_t a = 0; a < w->nf; a++) {
			const struct rflow *F = &w->f[a];

			if (!F->active || w->j[F->job].level != lev)
				continue;
			for (int b = 0; b < F->nl; b++) {
				int u = w->flink[F->l0 + (size_t)b];

				w->einc_u[ni] = u;
				w->einc_c[ni++] = 1.0;
				if (!w->utouch[u]) {
					w->utouch[u] = 1;
					w->ulist[(*nu)++] = u;
				}
			}
			w->eid[ne++] = (int)a;
			w->eoff[ne] = ni;
		}
	} else {
		for (size_t i = 0; i < w->n; i++) {
			struct rjob *J = &w->j[i];
			double M = 0;
			size_t i0 = ni;

			if (J->level != lev || !J->nact)
				continue;
			for (size_t a = J->f0; a < J->f1; a++) {
				if (!w->f[a].active)
					continue;
				for (int b = 0; b < w->f[a].nl; b++)
					w->jacc[w->flink[w->f[a].l0 + (size_t)b]] += w->f[a].rem;
			}
			for (size_t a = J->f0; a < J->f1; a++) {
				if (!w->f[a].active)
					continue;
				for (int b = 0; b < w->f[a].nl; b++) {
					int u = w->flink[w->f[a].l0 + (size_t)b];

					M = fmax(M, w->jacc[u]);
				}
			}
			w->jm[i] = M;
			for (size_t a = J->f0; a < J->f1; a++) {
				if (!w->f[a].active)
					continue;
				for (int b = 0; b < w->f[a].nl; b++) {
					int u = w->flink[w->f[a].l0 + (size_t)b];

					if (w->jacc[u] < 0)
						continue; /* already listed for this job */
					w->einc_u[ni] = u;
					w->einc_c[ni++] = M > 0 ? w->jacc[u] / M : 0;
					w->jacc[u] = -1;
					if (!w->utouch[u]) {
						w->utouch[u] = 1;
						w->ulist[(*nu)++] = u;
					}
				}
			}
			for (size_t a = i0; a < ni; a++)
				w->jacc[w->einc_u[a]] = 0;
			w->eid[ne++] = (int)i;
			w->eoff[ne] = ni;
		}
	}
	for (size_t q = 0; q < *nu; q++)
		w->utouch[w->ulist[q]] = 0;
	return ne;
}

/* Adds the entities' increments x[] to their flows' rates. */
static void apply(struct rws *w, size_t ne)
{
	for (size_t e = 0; e < ne; e++) {
		if (w->fair == CRUX_SCHED_REF_PER_FLOW) {
			w->f[w->eid[e]].rate += w->x[e];
			continue;
		}
		const struct rjob *J = &w->j[w->eid[e]];
		double M = w->jm[w->eid[e]];

		for (size_t a = J->f0; a < J->f1; a++)
			if (w->f[a].active && M > 0)
				w->f[a].rate += w->x[e] * w->f[a].rem / M;
	}
}

static void rates(struct rws *w)
{
	size_t nu;

	for (size_t a = 0; a < w->nf; a++)
		w->f[a].rate = 0;
	for (size_t u = 0; u < w->nu; u++)
		w->resid[u] = w->lbw[u];
	/* Guaranteed shares first: each level within share x rate of its links. */
	for (int lev = 0; w->shares && lev < w->levels; lev++) {
		if (!(w->share[lev] > 0))
			continue;
		size_t ne = entities(w, lev, &nu);

		if (!ne)
			continue;
		for (size_t q = 0; q < nu; q++) {
			int u = w->ulist[q];

			w->cap[u] = fmin(w->share[lev] * w->lbw[u], w->resid[u]);
		}
		fill(w, ne, nu);
		apply(w, ne);
		for (size_t q = 0; q < nu; q++)
			w->resid[w->ulist[q]] -= w->use[w->ulist[q]];
	}
	/* Then strict priority on what is left, highest level first. */
	for (int lev = w->levels - 1; lev >= 0; lev--) {
		size_t ne = entities(w, lev, &nu);

		if (!ne)
			continue;
		for (size_t q = 0; q < nu; q++) {
			int u = w->ulist[q];

			w->cap[u] = w->resid[u] > 0 ? w->resid[u] : 0;
		}
		fill(w, ne, nu);
		apply(w, ne);
		for (size_t q = 0; q < nu; q++)
			w->resid[w->ulist[q]] -= w->use[w->ulist[q]];
	}
}

static void record_end(struct rjob *J, double now, double warm)
{
	if (now >= warm) {
		if (!J->cnt)
			J->first_end = now;
		J->last_end = now;
		J->cnt++;
	}
}

/* Starts every part whose flow is idle with parts left and whose ring
 * predecessor has sent the part before it (its data is in). */
static void next_parts(struct rws *w)
{
	for (size_t a = 0; a < w->nf; a++) {
		struct rflow *F = &w->f[a];
		struct rjob *J = &w->j[F->job];

		if (F->active || !J->comm_on || F->done >= J->steps ||
		    (F->pred >= 0 && w->f[F->pred].done < F->done))
			continue;
		F->active = 1;
		F->rem = F->part;
		J->nact++;
	}
}

/* One run: every job's mean iteration time over [warm, H] into T[]. */
static void run_once(struct rws *w, double warm, double H, uint64_t max_events, double *T,
		     struct crux_sched_ref_stats *stats)
{
	double now = 0;
	uint64_t ev = 0;
	int dirty = 1;

	for (size_t a = 0; a < w->nf; a++) {
		w->f[a].active = 0;
		w->f[a].rem = 0;
		w->f[a].rate = 0;
	}
	for (size_t i = 0; i < w->n; i++) {
		struct rjob *J = &w->j[i];

		J->it_start = J->offset;
		J->comp_done = J->comm_on = 0;
		J->nact = J->nleft = 0;
		J->cnt = 0;
		J->first_end = J->last_end = 0;
	}
	for (;;) {
		double tol = 1e-12 * fmax(1.0, now);
		int changed = 1;

		/* Phase events due now (a zero compute time ends several at once). */
		for (int guard = 0; changed && guard < 4; guard++) {
			changed = 0;
			for (size_t i = 0; i < w->n; i++) {
				struct rjob *J = &w->j[i];

				if (!J->net)
					continue;
				if (!J->comp_done && J->it_start + J->c <= now + tol)
					J->comp_done = 1;
				if (!J->comm_on && J->it_start + J->cstart <= now + tol) {
					J->comm_on = 1;
					for (size_t a = J->f0; a < J->f1; a++) {
						w->f[a].active = 1;
						w->f[a].done = 0;
						w->f[a].rem = w->f[a].part;
					}
					J->nact = J->nleft = (int)(J->f1 - J->f0);
					dirty = 1;
				}
				if (J->comp_done && J->comm_on && !J->nleft) {
					record_end(J, now, warm);
					J->it_start = now;
					J->comp_done = J->comm_on = 0;
					changed = 1;
				}
			}
		}
		if (now >= H)
			break;
		if (ev >= max_events) {
			stats->truncated++;
			H = now; /* measure what was simulated */
			break;
		}
		if (dirty) {
			rates(w);
			ev++;
			dirty = 0;
		}
		double next = H;

		for (size_t i = 0; i < w->n; i++) {
			const struct rjob *J = &w->j[i];

			if (!J->net)
				continue;
			if (!J->comp_done)
				next = fmin(next, J->it_start + J->c);
			if (!J->comm_on)
				next = fmin(next, J->it_start + J->cstart);
		}
		for (size_t a = 0; a < w->nf; a++)
			if (w->f[a].active && w->f[a].rate > 0)
				next = fmin(next, now + w->f[a].rem / w->f[a].rate);
		if (next < now)
			next = now;
		double dt = next - now;

		int parted = 0;

		for (size_t a = 0; a < w->nf; a++) {
			struct rflow *F = &w->f[a];
			struct rjob *J = &w->j[F->job];

			if (!F->active)
				continue;
			F->rem -= F->rate * dt;
			if (F->rem <= DONE_EPS * F->part ||
			    (F->rate > 0 && F->rem / F->rate <= tol)) {
				F->active = 0;
				F->rem = 0;
				J->nact--;
				if (++F->done == J->steps)
					J->nleft--;
				else
					parted = 1;
				dirty = 1;
			}
		}
		if (parted)
			next_parts(w);
		now = next;
	}
	stats->events += ev;
	for (size_t i = 0; i < w->n; i++) {
		const struct rjob *J = &w->j[i];
		double win = H - warm;

		if (!J->net) {
			T[i] = J->c;
			continue;
		}
		if (J->cnt >= 2) {
			T[i] = (J->last_end - J->first_end) / (double)(J->cnt - 1);
			continue;
		}
		/* Starved in the window: at least the window (or the horizon). */
		stats->starved++;
		T[i] = J->cnt == 1 ? fmax(win, J->tiso) : fmax(H, J->tiso);
	}
}

crux_status_t crux_sched_reference(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				   size_t n, const struct crux_sched_schedule *s,
				   const struct crux_sched_ref_params *p, double *iter_time,
				   double *util, struct crux_sched_ref_stats *stats)
{
	struct rws w = {0};
	struct crux_sched_ref_stats st_local = {0};
	double *T = NULL, *inv = NULL;
	crux_status_t st;

	if (!t || (!jobs && n) || !s || !p || s->n_jobs != n || s->levels < 1 ||
	    s->levels > CRUX_SCHED_MAX_LEVELS)
		return CRUX_ERR_INVAL;
	if (!(p->horizon_iters > 0) || !isfinite(p->horizon_iters) || !(p->warmup_iters >= 0) ||
	    !(p->warmup_iters < p->horizon_iters) || p->phases < 0 || p->phases > 10000 ||
	    p->max_events == 0 ||
	    (p->fairness != CRUX_SCHED_REF_PER_FLOW && p->fairness != CRUX_SCHED_REF_PER_JOB))
		return CRUX_ERR_INVAL;
	st = crux_sched_jobs_validate(t, jobs, n);
	if (st)
		return st;
	st = ws_build(&w, t, jobs, n, s);
	if (st)
		goto out;
	w.fair = p->fairness;
	w.levels = s->levels;
	w.share = s->share;
	for (int l = 0; l < s->levels; l++)
		w.shares |= s->share[l] > 0;
	st = CRUX_ERR_NOMEM;
	T = calloc(n ? n : 1, sizeof(double));
	inv = calloc(n ? n : 1, sizeof(double));
	if (!T || !inv)
		goto out;
	double tmax = 0;

	for (size_t i = 0; i < n; i++)
		if (w.j[i].net)
			tmax = fmax(tmax, w.j[i].tiso);
	double H = p->horizon_iters * tmax, warm = p->warmup_iters * tmax;
	int runs = p->phases > 0 ? p->phases : 1;
	struct sched_rng rng;

	crux_sched_rng_seed(&rng, p->seed);
	st_local.horizon_s = H;
	for (int r = 0; r < runs; r++) {
		for (size_t i = 0; i < n; i++) {
			double u = (double)(crux_sched_rng_next(&rng) >> 11) * 0x1.0p-53;

			w.j[i].offset = p->phases > 0 ? u * w.j[i].tiso : 0;
		}
		if (tmax > 0)
			run_once(&w, warm, H, p->max_events, T, &st_local);
		else
			for (size_t i = 0; i < n; i++)
				T[i] = jobs[i].compute;
		for (size_t i = 0; i < n; i++)
			inv[i] += T[i] > 0 ? 1.0 / T[i] : 0;
	}
	double wr = 0, g = 0;

	for (size_t i = 0; i < n; i++) {
		/* Mean throughput over the runs; its inverse is the iteration time. */
		T[i] = inv[i] > 0 ? runs / inv[i] : jobs[i].compute;
		if (T[i] > 0)
			wr += jobs[i].work / T[i];
		g += jobs[i].gpus;
	}
	if (iter_time && n)
		memcpy(iter_time, T, n * sizeof(double));
	if (util)
		*util = g > 0 ? wr / g : 0;
	if (stats)
		*stats = st_local;
	st = CRUX_OK;
out:
	free(T);
	free(inv);
	ws_free(&w);
	return st;
}
