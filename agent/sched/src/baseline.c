/* SPDX-License-Identifier: Apache-2.0 */
/* Per-job link lists and the baselines' priority orders (Sincronia, Varys, TACCL*). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

void crux_sched_job_links_free(struct job_links *jl)
{
	free(jl->off);
	free(jl->link);
	free(jl->bytes);
	free(jl->foff);
	free(jl->fl_off);
	free(jl->fl_link);
	free(jl->fl_bytes);
	memset(jl, 0, sizeof(*jl));
}

crux_status_t crux_sched_job_links_build(struct crux_sched_topo *t,
					 const struct crux_sched_job *jobs, size_t n,
					 const struct crux_sched_schedule *s, struct job_links *out)
{
	struct job_links jl = {0};
	double *m = calloc((size_t)t->n_links + 1, sizeof(double));
	size_t cap = 0, used = 0, nfl = 0, fcap = 0, nfi = 0, ficap = 0;
	crux_status_t st = CRUX_ERR_NOMEM;

	jl.off = malloc((n + 1) * sizeof(size_t));
	jl.foff = malloc((n + 1) * sizeof(size_t));
	if (!m || !jl.off || !jl.foff)
		goto fail;
	jl.off[0] = 0;
	jl.foff[0] = 0;
	for (size_t i = 0; i < n; i++) {
		size_t start = used;

		for (int f = 0; f < jobs[i].n_flows; f++) {
			const int *links;
			int nl;

			st = crux_sched_flow_links(t, &jobs[i], f, s->d[i].path[f], &links, &nl);
			if (st)
				goto fail;
			/* The flow's own links (the phase-aware evaluator's paths). */
			if (nl > 0) {
				if (nfl + 2 > fcap) {
					size_t nc = fcap ? fcap * 2 : 256;
					size_t *no = realloc(jl.fl_off, nc * sizeof(size_t));

					if (!no)
						goto nomem;
					jl.fl_off = no;
					double *nb = realloc(jl.fl_bytes, nc * sizeof(double));

					if (!nb)
						goto nomem;
					jl.fl_bytes = nb;
					fcap = nc;
				}
				if (nfi + (size_t)nl > ficap) {
					size_t nc = ficap ? ficap * 2 : 1024;

					while (nc < nfi + (size_t)nl)
						nc *= 2;
					int *nli = realloc(jl.fl_link, nc * sizeof(int));

					if (!nli)
						goto nomem;
					jl.fl_link = nli;
					ficap = nc;
				}
				jl.fl_off[nfl] = nfi;
				jl.fl_bytes[nfl] = jobs[i].flows[f].bytes;
				memcpy(jl.fl_link + nfi, links, (size_t)nl * sizeof(int));
				nfi += (size_t)nl;
				jl.fl_off[++nfl] = nfi;
			}
			for (int k = 0; k < nl; k++) {
				int l = links[k];

				if (m[l] == 0) {
					if (used == cap) {
						size_t nc = cap ? cap * 2 : 1024;
						int *nl2 = realloc(jl.link, nc * sizeof(int));

						if (!nl2)
							goto nomem;
						jl.link = nl2;
						double *nb = realloc(jl.bytes, nc * sizeof(double));

						if (!nb)
							goto nomem;
						jl.bytes = nb;
						cap = nc;
					}
					jl.link[used++] = l;
				}
				/* Zero-byte flows still mark the link (tiny positive). */
				m[l] +=
				    jobs[i].flows[f].bytes > 0 ? jobs[i].flows[f].bytes : 1e-300;
			}
		}
		for (size_t k = start; k < used; k++) {
			jl.bytes[k] = m[jl.link[k]];
			m[jl.link[k]] = 0;
		}
		jl.off[i + 1] = used;
		jl.foff[i + 1] = nfl;
	}
	if (!jl.fl_off) {
		jl.fl_off = calloc(1, sizeof(size_t));
		if (!jl.fl_off)
			goto nomem;
	}
	free(m);
	*out = jl;
	return CRUX_OK;
nomem:
	st = CRUX_ERR_NOMEM;
fail:
	free(m);
	crux_sched_job_links_free(&jl);
	return st;
}

crux_status_t crux_sched_prio_sincronia(struct crux_sched_topo *t,
					const struct crux_sched_job *jobs, size_t n,
					struct crux_sched_schedule *s)
{
	struct job_links jl;
	double *load = NULL, *w = NULL;
	size_t *loff = NULL, *ljob = NULL, *lpos = NULL;
	unsigned char *gone = NULL;
	crux_status_t st = crux_sched_job_links_build(t, jobs, n, s, &jl);
	int L = t->n_links;

	if (st)
		return st;
	st = CRUX_ERR_NOMEM;
	load = calloc((size_t)L + 1, sizeof(double));
	w = malloc((n ? n : 1) * sizeof(double));
	loff = calloc((size_t)L + 2, sizeof(size_t));
	ljob = malloc((jl.off[n] ? jl.off[n] : 1) * sizeof(size_t));
	lpos = malloc((jl.off[n] ? jl.off[n] : 1) * sizeof(size_t));
	gone = calloc(n ? n : 1, 1);
	if (!load || !w || !loff || !ljob || !lpos || !gone)
		goto out;
	/* Links -> (job, index into jl) lists. */
	for (size_t k = 0; k < jl.off[n]; k++)
		loff[jl.link[k] + 1]++;
	for (int l = 0; l < L; l++)
		loff[l + 1] += loff[l];
	{
		size_t *pos = malloc(((size_t)L + 1) * sizeof(size_t));

		if (!pos)
			goto out;
		memcpy(pos, loff, ((size_t)L + 1) * sizeof(size_t));
		for (size_t i = 0; i < n; i++) {
			for (size_t k = jl.off[i]; k < jl.off[i + 1]; k++) {
				ljob[pos[jl.link[k]]] = i;
				lpos[pos[jl.link[k]]++] = k;
			}
		}
		free(pos);
	}
	size_t active = 0;

	for (size_t i = 0; i < n; i++) {
		w[i] = 1.0;
		if (jl.off[i + 1] == jl.off[i]) {
			/* No network traffic: ordered last. It contends with nobody, and
			 * ranking it first would spend the few levels of the rank mapping
			 * (max(K-1-rank, 0)) on jobs that never use the network. */
			s->d[i].priority = -1.0;
			gone[i] = 1;
			continue;
		}
		active++;
		for (size_t k = jl.off[i]; k < jl.off[i + 1]; k++)
			load[jl.link[k]] += jl.bytes[k] / t->lbw[jl.link[k]];
	}
	/* BSSI: repeatedly put last, at the most loaded port, the job with the smallest
	 * weight per byte there, then scale the others' weights. */
	for (size_t pos = active; pos-- > 0;) {
		int b = -1;

		for (int l = 0; l < L; l++)
			if (load[l] > 1e-300 && (b < 0 || load[l] > load[b]))
				b = l;
		if (b < 0)
			break;
		size_t best = (size_t)-1;
		double best_r = 0, best_m = 0;

		for (size_t q = loff[b]; q < loff[b + 1]; q++) {
			size_t j = ljob[q];

			if (gone[j])
				continue;
			double mb = jl.bytes[lpos[q]];
			double r = w[j] / mb;

			if (best == (size_t)-1 || r < best_r) {
				best = j;
				best_r = r;
				best_m = mb;
			}
		}
		for (size_t q = loff[b]; q < loff[b + 1]; q++) {
			size_t j = ljob[q];

			if (gone[j] || j == best)
				continue;
			w[j] -= w[best] * jl.bytes[lpos[q]] / best_m;
		}
		/* An earlier position is a higher priority. */
		s->d[best].priority = (double)n - (double)pos;
		gone[best] = 1;
		for (size_t k = jl.off[best]; k < jl.off[best + 1]; k++) {
			load[jl.link[k]] -= jl.bytes[k] / t->lbw[jl.link[k]];
			if (load[jl.link[k]] < 1e-12 * jl.bytes[k] / t->lbw[jl.link[k]])
				load[jl.link[k]] = 0;
		}
	}
	for (size_t i = 0; i < n; i++) {
		s->d[i].k = 1;
		if (!gone[i])
			s->d[i].priority = 0; /* left over by rounding: lowest */
	}
	st = CRUX_OK;
out:
	crux_sched_job_links_free(&jl);
	free(load);
	free(w);
	free(loff);
	free(ljob);
	free(lpos);
	free(gone);
	return st;
}

crux_status_t crux_sched_prio_varys(const struct crux_sched_job *jobs, size_t n,
				    struct crux_sched_schedule *s)
{
	(void)jobs;
	/* Smallest effective bottleneck first. */
	for (size_t i = 0; i < n; i++) {
		s->d[i].k = 1;
		s->d[i].priority = s->d[i].comm_time > 0 ? 1.0 / s->d[i].comm_time : INFINITY;
		if (!isfinite(s->d[i].priority))
			s->d[i].priority = 1e300;
	}
	return CRUX_OK;
}

crux_status_t crux_sched_prio_taccl(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				    size_t n, struct crux_sched_schedule *s)
{
	/* Longer transmission distance (hops) first. */
	for (size_t i = 0; i < n; i++) {
		int hops = 0;

		for (int f = 0; f < jobs[i].n_flows; f++) {
			const int *links;
			int nl;
			crux_status_t st =
			    crux_sched_flow_links(t, &jobs[i], f, s->d[i].path[f], &links, &nl);

			if (st)
				return st;
			if (nl > hops)
				hops = nl;
		}
		s->d[i].k = 1;
		s->d[i].priority = hops;
	}
	return CRUX_OK;
}
