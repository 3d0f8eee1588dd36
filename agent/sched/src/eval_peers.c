/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Peers of one level, run together (the phase-aware evaluator, eval.c).
 *
 * Jobs of one level that share links meet only while they send, and how
 * often depends on how their phases settle against each other: no closed
 * form gets that right (the blend in phase_aware_tau left a level's peers
 * the largest class of schedules outside +-5 % of the reference). A group
 * small enough for the work left is run as a fluid system instead: each job
 * computes, then sends every flow of its step; the active flows share each
 * link max-min per flow in what the higher levels leave of it at that
 * instant (their windows and traces, through crux_sched_peers_hi); an
 * iteration ends when both are done. A few start-phase draws, the first
 * iterations left out; each job keeps its mean iteration time and its sends
 * per link (its trace, which the levels below read).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crux/hash.h"
#include "sched_int.h"

/* Start-phase draws, averaged; eval.c reads draw d of a member's trace, so
 * there are as many as its GAP_DRAWS. */
#define PEER_DRAWS 4
#define PEER_ITERS 10 /* horizon, in the group's longest iteration (GAP_ITERS) */
#define PEER_WARM  3  /* of it left out while phases settle (GAP_WARM) */
#define PEER_DONE  1e-9

struct pflow {
	int job, nl;
	size_t l0; /* into lk[] */
	double bytes, rem, rate;
	unsigned char on, frz;
};

struct pjob {
	double c, s0, T0, it, comm0;
	size_t k0, nk; /* its links: mk[k0 .. k0 + nk) */
	int comp, comm, left;
	size_t f0, f1;
	double first, last, ctime, inv; /* inv: throughput summed over draws */
	long cnt, ccnt;
};

/* One member's sends over [a, b) in draw d; its loads from rld[l]. */
struct prec {
	double a, b;
	int m, d;
	size_t l;
};

struct crux_sched_peers {
	struct pflow *f;
	struct pjob *j;
	int *lk, *ul, *nunf, *mk;
	double *cap, *crem, *full, *ld;
	size_t fcap, jcap, kcap, ucap, mkcap;
	/* Sends after the warm-up, every draw, in time order (rec, rld); by
	 * member and draw once the run is done: rord[roff[i * PEER_DRAWS + d] ..). */
	struct prec *rec;
	double *rld;
	size_t *rord, *roff;
	size_t rn, rcap, rldn, rldcap, rordcap, roffcap;
	double warm, H; /* the window recorded */
};

void crux_sched_peers_free(struct crux_sched_peers *p)
{
	if (!p)
		return;
	free(p->f);
	free(p->j);
	free(p->lk);
	free(p->ul);
	free(p->nunf);
	free(p->cap);
	free(p->crem);
	free(p->mk);
	free(p->full);
	free(p->ld);
	free(p->rec);
	free(p->rld);
	free(p->rord);
	free(p->roff);
	free(p);
}

static int grow(void **a, size_t *cap, size_t need, size_t sz)
{
	if (need <= *cap)
		return 0;
	size_t c = need > 2 * *cap ? need : 2 * *cap;
	void *q = realloc(*a, c * sz);

	if (!q)
		return -1;
	*a = q;
	*cap = c;
	return 0;
}

/* Max-min per flow over the active flows: raise every unfrozen flow's rate
 * until a link fills, freeze the flows there, again. */
static size_t peers_fill(struct crux_sched_peers *p, size_t nf, size_t nu)
{
	size_t open = 0, ops = nu + nf;

	for (size_t u = 0; u < nu; u++) {
		p->crem[u] = p->cap[u];
		p->nunf[u] = 0;
	}
	for (size_t a = 0; a < nf; a++) {
		struct pflow *F = &p->f[a];

		F->rate = 0;
		F->frz = !F->on;
		if (!F->on)
			continue;
		open++;
		for (int b = 0; b < F->nl; b++)
			p->nunf[p->lk[F->l0 + (size_t)b]]++;
	}
	while (open) {
		double x = INFINITY;
		size_t ub = 0;

		for (size_t u = 0; u < nu; u++)
			if (p->nunf[u] > 0 && p->crem[u] / p->nunf[u] < x) {
				x = p->crem[u] / p->nunf[u];
				ub = u;
			}
		if (!isfinite(x))
			break;
		if (x < 0)
			x = 0;
		ops += nu + nf;
		for (size_t a = 0; a < nf; a++) {
			struct pflow *F = &p->f[a];
			int hit = 0;

			if (F->frz)
				continue;
			for (int b = 0; b < F->nl && !hit; b++)
				hit = p->lk[F->l0 + (size_t)b] == (int)ub;
			if (!hit)
				continue;
			F->rate = x;
			F->frz = 1;
			open--;
			for (int b = 0; b < F->nl; b++) {
				int u = p->lk[F->l0 + (size_t)b];

				p->crem[u] -= x;
				p->nunf[u]--;
			}
			ops += (size_t)F->nl;
		}
	}
	return ops;
}

/* Records every member's sends over [a, b) of draw d: its own load fraction
 * on each of its links (its trace, for the levels below); -1 without memory. */
static int peers_rec(struct crux_sched_peers *p, size_t nc, int d, double a, double b)
{
	for (size_t i = 0; i < nc; i++) {
		const struct pjob *J = &p->j[i];
		int any = 0;

		for (size_t x = J->f0; x < J->f1; x++) {
			const struct pflow *F = &p->f[x];

			if (!F->on || !(F->rate > 0))
				continue;
			any = 1;
			for (int y = 0; y < F->nl; y++) {
				int u = p->lk[F->l0 + (size_t)y];

				p->ld[u] += F->rate / p->full[u];
			}
		}
		if (any && (grow((void **)&p->rec, &p->rcap, p->rn + 1, sizeof(*p->rec)) ||
			    grow((void **)&p->rld, &p->rldcap, p->rldn + J->nk, sizeof(double))))
			return -1;
		if (any) {
			p->rec[p->rn++] = (struct prec){a, b, (int)i, d, p->rldn};
			for (size_t k = 0; k < J->nk; k++)
				p->rld[p->rldn++] = p->ld[p->mk[J->k0 + k]];
		}
		for (size_t x = J->f0; x < J->f1; x++)
			for (int y = 0; y < p->f[x].nl; y++)
				p->ld[p->lk[p->f[x].l0 + (size_t)y]] = 0;
	}
	return 0;
}

void crux_sched_peers_window(const struct crux_sched_peers *p, double *t0, double *span)
{
	*t0 = p->warm;
	*span = p->H - p->warm;
}

void crux_sched_peers_trace(const struct crux_sched_peers *p, size_t i, int d,
			    void (*put)(void *ctx, double a, double b, const double *ld), void *ctx)
{
	size_t k = i * PEER_DRAWS + (size_t)d;

	for (size_t x = p->roff[k]; x < p->roff[k + 1]; x++) {
		const struct prec *r = &p->rec[p->rord[x]];

		put(ctx, r->a, r->b, p->rld + r->l);
	}
}

int crux_sched_peers_run(struct crux_sched_peers **pp, const struct crux_sched_job *jobs,
			 const struct job_links *jl, const int *comp, size_t nc, const double *cap,
			 const double *T0, const struct crux_sched_peers_hi *hi, int *lmark,
			 size_t *work, double *tau)
{
	struct crux_sched_peers *p = *pp;
	size_t nf = 0, ninc = 0, nu = 0;
	int rc = -1;

	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return -1;
		*pp = p;
	}
	for (size_t i = 0; i < nc; i++) {
		int j = comp[i];

		nf += jl->foff[j + 1] - jl->foff[j];
		ninc += jl->fl_off[jl->foff[j + 1]] - jl->fl_off[jl->foff[j]];
	}
	if (grow((void **)&p->f, &p->fcap, nf + 1, sizeof(*p->f)) ||
	    grow((void **)&p->j, &p->jcap, nc + 1, sizeof(*p->j)) ||
	    grow((void **)&p->lk, &p->kcap, ninc + 1, sizeof(int)))
		return -1;
	if (ninc + 1 > p->ucap) {
		size_t c = ninc + 1;
		int *ul = realloc(p->ul, c * sizeof(int)), *nn;
		double *a, *b;

		if (!ul)
			return -1;
		p->ul = ul;
		nn = realloc(p->nunf, c * sizeof(int));
		if (!nn)
			return -1;
		p->nunf = nn;
		a = realloc(p->cap, c * sizeof(double));
		if (!a)
			return -1;
		p->cap = a;
		b = realloc(p->crem, c * sizeof(double));
		if (!b)
			return -1;
		p->crem = b;
		b = realloc(p->full, c * sizeof(double));
		if (!b)
			return -1;
		p->full = b;
		b = realloc(p->ld, c * sizeof(double));
		if (!b)
			return -1;
		p->ld = b;
		p->ucap = c;
	}
	/* Flows with their links numbered locally (lmark: global -> local). */
	double tmax = 0;
	size_t k = 0, q = 0;

	for (size_t i = 0; i < nc; i++) {
		int j = comp[i];
		struct pjob *J = &p->j[i];

		J->c = jobs[j].compute;
		J->s0 = (1.0 - jobs[j].overlap) * jobs[j].compute;
		J->T0 = T0[j];
		J->f0 = q;
		tmax = crux_dmax(tmax, T0[j]);
		for (size_t f = jl->foff[j]; f < jl->foff[j + 1]; f++) {
			struct pflow *F = &p->f[q++];

			F->job = (int)i;
			F->bytes = jl->fl_bytes[f];
			F->l0 = k;
			F->nl = (int)(jl->fl_off[f + 1] - jl->fl_off[f]);
			for (size_t r = jl->fl_off[f]; r < jl->fl_off[f + 1]; r++) {
				int l = jl->fl_link[r];

				if (lmark[l] < 0) {
					lmark[l] = (int)nu;
					p->ul[nu] = l;
					p->cap[nu++] = cap[l];
				}
				p->lk[k++] = lmark[l];
			}
		}
		J->f1 = q;
	}
	/* Each member's links (in its own order, as its trace's columns). */
	size_t nmk = 0;

	for (size_t i = 0; i < nc; i++)
		nmk += jl->off[comp[i] + 1] - jl->off[comp[i]];
	if (grow((void **)&p->mk, &p->mkcap, nmk + 1, sizeof(int))) {
		for (size_t u = 0; u < nu; u++)
			lmark[p->ul[u]] = -1;
		return -1;
	}
	nmk = 0;
	for (size_t i = 0; i < nc; i++) {
		int j = comp[i];

		p->j[i].k0 = nmk;
		p->j[i].nk = jl->off[j + 1] - jl->off[j];
		for (size_t r = jl->off[j]; r < jl->off[j + 1]; r++)
			p->mk[nmk++] = lmark[jl->link[r]];
	}
	for (size_t u = 0; u < nu; u++) {
		lmark[p->ul[u]] = -1;
		p->full[u] = p->cap[u];
		p->ld[u] = 0;
	}
	p->rn = p->rldn = 0;
	if (!(tmax > 0) || !isfinite(tmax))
		return -1;
	/* Work: every event visits every flow's links; about two events per
	 * flow and iteration of each job over the horizon. */
	double evs = 0;

	for (size_t i = 0; i < nc; i++)
		evs += PEER_DRAWS * (double)PEER_ITERS * tmax /
		       crux_dmax(p->j[i].T0, 1e-12 * tmax) * (double)(p->j[i].f1 - p->j[i].f0 + 2);
	double cost = evs * (double)(nc + nf + nu + ninc);

	if (!(cost < (double)*work))
		return -1;
	double H = PEER_ITERS * tmax, warm = PEER_WARM * tmax;

	p->warm = warm;
	p->H = H;
	size_t maxev = (size_t)(4 * evs) + 64;

	for (size_t i = 0; i < nc; i++) {
		tau[i] = 0;
		p->j[i].inv = 0;
	}
	for (int d = 0; d < PEER_DRAWS; d++) {
		double now = 0;
		size_t evn = 0;

		for (size_t i = 0; i < nc; i++) {
			struct pjob *J = &p->j[i];
			uint64_t z = jobs[comp[i]].id * 0x9e3779b97f4a7c15ull +
				     (uint64_t)(d + 1) * 0xc2b2ae3d27d4eb4full;

			J->it = (double)(crux_mix64(z) >> 11) * 0x1.0p-53 * J->T0;
			J->comp = J->comm = 0;
			J->left = 0;
			J->cnt = J->ccnt = 0;
			J->first = J->last = J->ctime = 0;
		}
		for (size_t a = 0; a < nf; a++)
			p->f[a].on = 0;
		int dirty = 1;
		double hnext = -INFINITY; /* when the higher levels' load may change */

		while (now < H) {
			double tol = 1e-12 * crux_dmax(1.0, now);

			for (int again = 1, g = 0; again && g < 4; g++) {
				again = 0;
				for (size_t i = 0; i < nc; i++) {
					struct pjob *J = &p->j[i];

					if (!J->comp && J->it + J->c <= now + tol)
						J->comp = 1;
					if (!J->comm && J->it + J->s0 <= now + tol) {
						J->comm = 1;
						J->comm0 = now;
						J->left = (int)(J->f1 - J->f0);
						for (size_t a = J->f0; a < J->f1; a++) {
							p->f[a].on = 1;
							p->f[a].rem = p->f[a].bytes;
						}
						dirty = 1;
					}
					if (J->comp && J->comm && !J->left) {
						if (now >= warm) {
							if (!J->cnt)
								J->first = now;
							J->last = now;
							J->cnt++;
						}
						J->it = now;
						J->comp = J->comm = 0;
						again = 1;
					}
				}
			}
			size_t ops = nc + nf;

			if (hi && now >= hnext) {
				/* At least a step: a boundary lost to rounding moves on. */
				hnext = crux_dmax(hi->at(hi->ctx, d, now), now + 1e-9 * tmax);
				for (size_t u = 0; u < nu; u++)
					p->cap[u] = p->full[u] * crux_dmax(hi->free[p->ul[u]], 0);
				ops += nu;
				dirty = 1;
			}
			if (dirty)
				ops += peers_fill(p, nf, nu);
			dirty = 0;
			if (++evn > maxev || ops > *work)
				goto out; /* out of work: the fluid answer stands */
			*work -= ops;
			double next = hi ? crux_dmin(H, hnext) : H;

			for (size_t i = 0; i < nc; i++) {
				const struct pjob *J = &p->j[i];

				if (!J->comp)
					next = crux_dmin(next, J->it + J->c);
				if (!J->comm)
					next = crux_dmin(next, J->it + J->s0);
			}
			for (size_t a = 0; a < nf; a++)
				if (p->f[a].on && p->f[a].rate > 0)
					next = crux_dmin(next, now + p->f[a].rem / p->f[a].rate);
			double dt = crux_dmax(next - now, 0);

			if (next > warm && dt > 0 &&
			    peers_rec(p, nc, d, crux_dmax(now, warm), next))
				goto out;
			for (size_t a = 0; a < nf; a++) {
				struct pflow *F = &p->f[a];

				if (!F->on)
					continue;
				F->rem -= F->rate * dt;
				if (F->rem <= PEER_DONE * F->bytes ||
				    (F->rate > 0 && F->rem / F->rate <= tol)) {
					struct pjob *J = &p->j[F->job];

					F->on = 0;
					dirty = 1;
					if (!--J->left && now + dt >= warm) {
						J->ctime += now + dt - J->comm0;
						J->ccnt++;
					}
				}
			}
			now = next;
		}
		for (size_t i = 0; i < nc; i++) {
			const struct pjob *J = &p->j[i];

			/* Fewer than two iterations measured: starved here, the
			 * fluid answer instead. */
			if (J->cnt < 2 || !J->ccnt)
				goto out;
			p->j[i].inv += (double)(J->cnt - 1) / (J->last - J->first);
			tau[i] += J->ctime / (double)J->ccnt / PEER_DRAWS;
		}
	}
	/* The iteration time as the reference takes it (mean throughput over
	 * the draws); the transfer is what it leaves after the compute's head
	 * start, or, where compute hides it, the time it took. */
	for (size_t i = 0; i < nc; i++) {
		const struct pjob *J = &p->j[i];
		double T = PEER_DRAWS / J->inv;

		tau[i] = T > J->c * (1 + 1e-9) ? T - J->s0 : crux_dmin(tau[i], J->c - J->s0);
	}
	/* The records by member and draw, each in time order (a counting sort),
	 * so that reading every member's trace is one pass, not one per member. */
	size_t nkey = nc * PEER_DRAWS;

	if (grow((void **)&p->roff, &p->roffcap, nkey + 1, sizeof(size_t)) ||
	    grow((void **)&p->rord, &p->rordcap, p->rn + 1, sizeof(size_t)))
		goto out;
	memset(p->roff, 0, (nkey + 1) * sizeof(size_t));
	for (size_t r = 0; r < p->rn; r++)
		p->roff[(size_t)p->rec[r].m * PEER_DRAWS + (size_t)p->rec[r].d + 1]++;
	for (size_t k = 0; k < nkey; k++)
		p->roff[k + 1] += p->roff[k];
	for (size_t r = 0; r < p->rn; r++)
		p->rord[p->roff[(size_t)p->rec[r].m * PEER_DRAWS + (size_t)p->rec[r].d]++] = r;
	for (size_t k = nkey; k > 0; k--)
		p->roff[k] = p->roff[k - 1];
	p->roff[0] = 0;
	rc = 0;
out:
	return rc;
}
