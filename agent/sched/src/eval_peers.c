/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Peers of one level, run together (the phase-aware evaluator, eval.c).
 *
 * Jobs of one level that share links, with no higher level on any of those
 * links, meet only while they send, and how often they meet depends on how
 * their phases settle against each other: no closed form gets that right
 * (the blend in phase_aware_tau leaves a level's peers the largest class of
 * schedules outside +-5 % of the reference). A group small enough for the
 * work left is run as a fluid system instead: each job computes, then sends
 * every flow of its step; the active flows share each link max-min per flow;
 * an iteration ends when both are done. A few start-phase draws, the first
 * iterations left out, the mean communication time per iteration kept.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crux/hash.h"
#include "sched_int.h"

#define PEER_DRAWS 4  /* start-phase draws, averaged */
#define PEER_ITERS 16 /* horizon, in the group's longest iteration */
#define PEER_WARM  4  /* of it left out while phases settle */
#define PEER_DONE  1e-9

struct pflow {
	int job, nl;
	size_t l0; /* into lk[] */
	double bytes, rem, rate;
	unsigned char on, frz;
};

struct pjob {
	double c, s0, T0, iso, it, comm0; /* iso: its iteration alone */
	int comp, comm, left;
	size_t f0, f1;
	double first, last, ctime, inv; /* inv: throughput summed over draws */
	long cnt, ccnt;
};

struct crux_sched_peers {
	struct pflow *f;
	struct pjob *j;
	int *lk, *ul, *nunf;
	double *cap, *crem;
	size_t fcap, jcap, kcap, ucap;
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

int crux_sched_peers_run(struct crux_sched_peers **pp, const struct crux_sched_job *jobs,
			 const struct job_links *jl, const int *comp, size_t nc, const double *cap,
			 const double *T0, int *lmark, size_t *work, double *tau)
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
		p->ucap = c;
	}
	/* Flows with their links numbered locally (lmark: global -> local). */
	double tmax = 0, tiso = 0;
	size_t k = 0, q = 0;

	for (size_t i = 0; i < nc; i++) {
		int j = comp[i];
		struct pjob *J = &p->j[i];

		J->c = jobs[j].compute;
		J->s0 = (1.0 - jobs[j].overlap) * jobs[j].compute;
		J->T0 = T0[j];
		double ci = 0;

		for (size_t r = jl->off[j]; r < jl->off[j + 1]; r++)
			ci = fmax(ci, jl->bytes[r] / cap[jl->link[r]]);
		J->iso = crux_sched_isolated_iter(&jobs[j], ci);
#ifndef PEER_BY_ISO
#define PEER_BY_ISO 0
#endif
		if (PEER_BY_ISO)
			tiso = fmax(tiso, J->iso);
		J->f0 = q;
		tmax = fmax(tmax, T0[j]);
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
	for (size_t u = 0; u < nu; u++)
		lmark[p->ul[u]] = -1;
	if (!(tmax > 0) || !isfinite(tmax))
		return -1;
	/* Work: every event visits every flow's links; about two events per
	 * flow and iteration of each job over the horizon. */
	double evs = 0;

	for (size_t i = 0; i < nc; i++)
		evs += PEER_DRAWS * (double)PEER_ITERS * tmax / fmax(p->j[i].T0, 1e-12 * tmax) *
		       (double)(p->j[i].f1 - p->j[i].f0 + 2);
	double cost = evs * (double)(nc + nf + nu + ninc);

	if (!(cost < (double)*work))
		return -1;
	double tw = PEER_BY_ISO ? tiso : tmax;
	double H = PEER_ITERS * tw, warm = PEER_WARM * tw;
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
			uint64_t z = (uint64_t)comp[i] * 0x9e3779b97f4a7c15ull +
				     (uint64_t)(d + 1) * 0xc2b2ae3d27d4eb4full;

			J->it = (double)(crux_mix64(z) >> 11) * 0x1.0p-53 *
				(PEER_BY_ISO ? J->iso : J->T0);
			J->comp = J->comm = 0;
			J->left = 0;
			J->cnt = J->ccnt = 0;
			J->first = J->last = J->ctime = 0;
		}
		for (size_t a = 0; a < nf; a++)
			p->f[a].on = 0;
		int dirty = 1;

		while (now < H) {
			double tol = 1e-12 * fmax(1.0, now);

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

			if (dirty)
				ops += peers_fill(p, nf, nu);
			dirty = 0;
			if (++evn > maxev || ops > *work)
				goto out; /* out of work: the fluid answer stands */
			*work -= ops;
			double next = H;

			for (size_t i = 0; i < nc; i++) {
				const struct pjob *J = &p->j[i];

				if (!J->comp)
					next = fmin(next, J->it + J->c);
				if (!J->comm)
					next = fmin(next, J->it + J->s0);
			}
			for (size_t a = 0; a < nf; a++)
				if (p->f[a].on && p->f[a].rate > 0)
					next = fmin(next, now + p->f[a].rem / p->f[a].rate);
			double dt = fmax(next - now, 0);

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

		tau[i] = T > J->c * (1 + 1e-9) ? T - J->s0 : fmin(tau[i], J->c - J->s0);
	}
	rc = 0;
out:
	return rc;
}
