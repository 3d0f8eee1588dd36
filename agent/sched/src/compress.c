/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Priority compression: contention DAG and Max-K-Cut per topological order.
 *
 * For one order a_1..a_n the DP is f(i,k) = max_{j<=i} f(j,k-1) + C(j,i),
 * C(j,i) the weight of edges from a_1..a_j into a_{j+1}..a_i. Instead of the
 * O(n^2) table of C we sweep i upwards and keep g_k(j) = f(j,k-1) + C(j,i) for
 * every j in one segment tree (K values per node, one shared lazy add): when
 * a_i arrives, each in-edge (a_x -> a_i, weight w) raises C(j,i) by w for
 * j in [x, i-1], a range add. f(i,k) is then a prefix maximum. One order costs
 * O((E + n) K log n) time and O(n K) memory for a DAG of E edges, which is
 * what makes thousands of jobs cheap: the contention DAG is sparse (jobs only
 * meet on shared links) and splits into independent weakly connected
 * components, each compressed on its own.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

/*
 * Segment tree over split points j with K values per node and lazy adds that
 * are never pushed down: mx[node] already includes lazy[node] and everything
 * below, so the value of a leaf is its mx plus the lazies of its ancestors.
 */
struct ktree {
	int K, size;
	double *mx; /* [node * K + k] */
	int *arg;
	double *lazy;
};

struct kstep {
	int p;
	double w;
};

static void kt_pull(struct ktree *t, int node)
{
	int K = t->K;
	double *m = t->mx + (size_t)node * (size_t)K, lz = t->lazy[node];
	const double *a = t->mx + (size_t)(2 * node) * (size_t)K, *b = a + K;
	int *g = t->arg + (size_t)node * (size_t)K;
	const int *ga = t->arg + (size_t)(2 * node) * (size_t)K, *gb = ga + K;

	for (int k = 0; k < K; k++) {
		if (a[k] >= b[k]) {
			m[k] = a[k] + lz;
			g[k] = ga[k];
		} else {
			m[k] = b[k] + lz;
			g[k] = gb[k];
		}
	}
}

static void kt_reset(struct ktree *t)
{
	size_t nn = 2 * (size_t)t->size;

	for (size_t i = 0; i < nn * (size_t)t->K; i++)
		t->mx[i] = -INFINITY;
	memset(t->lazy, 0, nn * sizeof(double));
	for (int leaf = 0; leaf < t->size; leaf++)
		for (int k = 0; k < t->K; k++)
			t->arg[(size_t)(t->size + leaf) * (size_t)t->K + (size_t)k] = leaf;
	for (int node = t->size - 1; node >= 1; node--)
		kt_pull(t, node);
}

/*
 * Add to every leaf j the sum of w over the steps with p <= j, in one descent:
 * acc is what the whole node [nl, nr] receives (steps with p <= nl), st[0..ns)
 * the steps with nl < p <= nr (sorted by p).
 */
static void kt_steps(struct ktree *t, int node, int nl, int nr, const struct kstep *st, int ns,
		     double acc)
{
	if (ns == 0) {
		if (acc != 0) {
			double *m = t->mx + (size_t)node * (size_t)t->K;

			for (int k = 0; k < t->K; k++)
				m[k] += acc;
			t->lazy[node] += acc;
		}
		return;
	}
	int mid = (nl + nr) / 2, a = 0;
	double racc = acc;

	/* Steps for the left child: p <= mid; those with p == mid + 1 are uniform on the right. */
	while (a < ns && st[a].p <= mid)
		racc += st[a++].w;
	int b = a;

	while (b < ns && st[b].p == mid + 1)
		racc += st[b++].w;
	kt_steps(t, 2 * node, nl, mid, st, a, acc);
	kt_steps(t, 2 * node + 1, mid + 1, nr, st + b, ns - b, racc);
	kt_pull(t, node);
}

/* Set leaf pos's effective values to v. */
static void kt_set(struct ktree *t, int pos, const double *v)
{
	int node = 1, nl = 0, nr = t->size - 1;
	double above = 0;

	while (nl != nr) {
		above += t->lazy[node];
		int mid = (nl + nr) / 2;

		if (pos <= mid) {
			node = 2 * node;
			nr = mid;
		} else {
			node = 2 * node + 1;
			nl = mid + 1;
		}
	}
	double *m = t->mx + (size_t)node * (size_t)t->K;

	for (int k = 0; k < t->K; k++)
		m[k] = v[k] - above;
	t->lazy[node] = 0;
	for (node /= 2; node >= 1; node /= 2)
		kt_pull(t, node);
}

/* Max over leaves [0, r] for every k; ties go to the smaller j. */
static void kt_prefix(struct ktree *t, int node, int nl, int nr, int r, double above, double *m,
		      int *g)
{
	if (nl > r)
		return;
	if (nr <= r) {
		const double *a = t->mx + (size_t)node * (size_t)t->K;
		const int *ga = t->arg + (size_t)node * (size_t)t->K;

		for (int k = 0; k < t->K; k++) {
			if (a[k] + above > m[k]) {
				m[k] = a[k] + above;
				g[k] = ga[k];
			}
		}
		return;
	}
	int mid = (nl + nr) / 2;

	above += t->lazy[node];
	kt_prefix(t, 2 * node, nl, mid, r, above, m, g);
	kt_prefix(t, 2 * node + 1, mid + 1, nr, r, above, m, g);
}

struct kdag {
	int n;
	const int *in_off, *in_src;
	const double *in_w;
	const int *out_off, *out_dst;
};

/* Best K-cut over `orders` topological orders; first_order (may be NULL) is tried first. */
static crux_status_t kcut(const struct kdag *g, int K, int orders, uint64_t seed,
			  const int *first_order, int *level_out, double *cut_out)
{
	int n = g->n;
	struct ktree t = {0};
	int *ord = NULL, *pos = NULL, *indeg = NULL, *ready = NULL, *choice = NULL;
	double *qm = NULL, *fcur = NULL, *leaf = NULL;
	int *qa = NULL, *soff = NULL, *sfill = NULL;
	struct kstep *steps = NULL;
	uint64_t *seen = NULL;
	int n_seen = 0;
	double best = -INFINITY;
	struct sched_rng rng;
	crux_status_t st = CRUX_ERR_NOMEM;

	t.K = K;
	t.size = 1;
	while (t.size < n + 1)
		t.size *= 2;
	t.mx = malloc(2 * (size_t)t.size * (size_t)K * sizeof(double));
	t.arg = malloc(2 * (size_t)t.size * (size_t)K * sizeof(int));
	t.lazy = malloc(2 * (size_t)t.size * sizeof(double));
	ord = malloc((size_t)n * sizeof(int));
	pos = malloc((size_t)n * sizeof(int));
	indeg = malloc((size_t)n * sizeof(int));
	ready = malloc((size_t)n * sizeof(int));
	choice = malloc((size_t)(n + 1) * (size_t)K * sizeof(int));
	qm = malloc((size_t)K * sizeof(double));
	qa = malloc((size_t)K * sizeof(int));
	fcur = malloc((size_t)K * sizeof(double));
	leaf = malloc((size_t)K * sizeof(double));
	soff = malloc(((size_t)n + 1) * sizeof(int));
	sfill = malloc(((size_t)n + 1) * sizeof(int));
	steps = malloc((size_t)(g->in_off[n] ? g->in_off[n] : 1) * sizeof(*steps));
	seen = malloc((size_t)orders * sizeof(uint64_t));
	if (!soff || !sfill || !steps || !seen)
		goto out;
	if (!t.mx || !t.arg || !t.lazy || !ord || !pos || !indeg || !ready || !choice || !qm ||
	    !qa || !fcur || !leaf)
		goto out;
	crux_sched_rng_seed(&rng, seed);
	for (int o = 0; o < orders; o++) {
		if (o == 0 && first_order) {
			memcpy(ord, first_order, (size_t)n * sizeof(int));
		} else {
			/* Randomised Kahn order. */
			int nr = 0, c = 0;

			for (int v = 0; v < n; v++) {
				indeg[v] = g->in_off[v + 1] - g->in_off[v];
				if (!indeg[v])
					ready[nr++] = v;
			}
			while (nr) {
				int idx = (int)crux_sched_rng_below(&rng, (uint32_t)nr),
				    v = ready[idx];

				ready[idx] = ready[--nr];
				ord[c++] = v;
				for (int e = g->out_off[v]; e < g->out_off[v + 1]; e++)
					if (--indeg[g->out_dst[e]] == 0)
						ready[nr++] = g->out_dst[e];
			}
			if (c != n) {
				st = CRUX_ERR_INVAL; /* not a DAG */
				goto out;
			}
		}
		/* Identical orders (a dense DAG has few) give identical cuts: skip. */
		uint64_t h = 0x5bd1e995;

		for (int i = 0; i < n; i++)
			h = crux_sched_mix64(h ^ (uint64_t)ord[i]);
		int dup = 0;

		for (int q = 0; q < n_seen; q++)
			dup |= seen[q] == h;
		if (dup)
			continue;
		seen[n_seen++] = h;
		for (int i = 0; i < n; i++)
			pos[ord[i]] = i + 1;
		/* In-edges of every node as (position, weight) steps, sorted by
		 * position: visiting sources in order appends them sorted. */
		for (int v = 0; v < n; v++)
			soff[v] = g->in_off[v];
		memcpy(sfill, soff, (size_t)n * sizeof(int));
		for (int i = 0; i < n; i++) {
			int u = ord[i];

			for (int e = g->out_off[u]; e < g->out_off[u + 1]; e++) {
				int v = g->out_dst[e];

				steps[sfill[v]].p = i + 1;
				steps[sfill[v]++].w = 0;
			}
		}
		for (int v = 0; v < n; v++) {
			/* Weights: match each in-edge to its step by source position. */
			for (int e = g->in_off[v]; e < g->in_off[v + 1]; e++) {
				int lo = soff[v], hi = sfill[v] - 1, pp = pos[g->in_src[e]];

				while (lo < hi) {
					int mid = (lo + hi) / 2;

					if (steps[mid].p < pp)
						lo = mid + 1;
					else
						hi = mid;
				}
				if (lo < sfill[v] && steps[lo].p == pp)
					steps[lo].w += g->in_w[e];
			}
		}
		if (first_order && o == 0) {
			for (int v = 0; v < n; v++) {
				for (int e = g->in_off[v]; e < g->in_off[v + 1]; e++) {
					if (pos[g->in_src[e]] >= pos[v]) {
						st = CRUX_ERR_INVAL;
						goto out;
					}
				}
			}
		}
		kt_reset(&t);
		for (int k = 0; k < K; k++)
			leaf[k] = 0; /* f(0, k-1) = 0 */
		kt_set(&t, 0, leaf);
		for (int i = 1; i <= n; i++) {
			int v = ord[i - 1];

			/* C(j, i) grows by w for j >= pos(source); leaves >= i are
			 * rewritten by kt_set before they are read. */
			if (sfill[v] > soff[v])
				kt_steps(&t, 1, 0, t.size - 1, steps + soff[v], sfill[v] - soff[v],
					 0);
			for (int k = 0; k < K; k++) {
				qm[k] = -INFINITY;
				qa[k] = 0;
			}
			kt_prefix(&t, 1, 0, t.size - 1, i - 1, 0, qm, qa);
			double fprev = -INFINITY;

			for (int k = 0; k < K; k++) {
				if (qm[k] > fprev) {
					fcur[k] = qm[k];
					choice[(size_t)i * (size_t)K + (size_t)k] = qa[k];
				} else {
					fcur[k] = fprev; /* block k+1 left empty */
					choice[(size_t)i * (size_t)K + (size_t)k] = i;
				}
				fprev = fcur[k];
			}
			leaf[0] = -INFINITY;
			for (int k = 1; k < K; k++)
				leaf[k] = fcur[k - 1];
			if (i < n)
				kt_set(&t, i, leaf);
		}
		double total = n ? fcur[K - 1] : 0;

		if (o == 0 || total > best + 1e-12 * fabs(best)) {
			best = total;
			int i = n, k = K - 1;

			while (i > 0 && k >= 0) {
				int j = choice[(size_t)i * (size_t)K + (size_t)k];

				for (int p = j + 1; p <= i; p++)
					level_out[ord[p - 1]] = K - 1 - k;
				i = j;
				k--;
			}
		}
	}
	*cut_out = n ? best : 0;
	st = CRUX_OK;
out:
	free(t.mx);
	free(t.arg);
	free(t.lazy);
	free(ord);
	free(pos);
	free(indeg);
	free(ready);
	free(choice);
	free(qm);
	free(qa);
	free(fcur);
	free(leaf);
	free(soff);
	free(sfill);
	free(steps);
	free(seen);
	return st;
}

/* Build in/out CSR from an edge list. */
static crux_status_t dag_csr(int n, int m, const int *from, const int *to, const double *w,
			     int **in_off, int **in_src, double **in_w, int **out_off,
			     int **out_dst)
{
	int *io = calloc((size_t)n + 1, sizeof(int)), *oo = calloc((size_t)n + 1, sizeof(int));
	int *is = malloc((size_t)(m ? m : 1) * sizeof(int)),
	    *od = malloc((size_t)(m ? m : 1) * sizeof(int));
	double *iw = malloc((size_t)(m ? m : 1) * sizeof(double));
	int *pi = malloc(((size_t)n + 1) * sizeof(int)),
	    *po = malloc(((size_t)n + 1) * sizeof(int));

	if (!io || !oo || !is || !od || !iw || !pi || !po) {
		free(io);
		free(oo);
		free(is);
		free(od);
		free(iw);
		free(pi);
		free(po);
		return CRUX_ERR_NOMEM;
	}
	for (int e = 0; e < m; e++) {
		io[to[e] + 1]++;
		oo[from[e] + 1]++;
	}
	for (int v = 0; v < n; v++) {
		io[v + 1] += io[v];
		oo[v + 1] += oo[v];
	}
	memcpy(pi, io, ((size_t)n + 1) * sizeof(int));
	memcpy(po, oo, ((size_t)n + 1) * sizeof(int));
	for (int e = 0; e < m; e++) {
		is[pi[to[e]]] = from[e];
		iw[pi[to[e]]++] = w[e];
		od[po[from[e]]++] = to[e];
	}
	free(pi);
	free(po);
	*in_off = io;
	*in_src = is;
	*in_w = iw;
	*out_off = oo;
	*out_dst = od;
	return CRUX_OK;
}

crux_status_t crux_sched_maxkcut(int n, int n_edges, const int *from, const int *to,
				 const double *w, int levels, int orders, uint64_t seed,
				 int *levels_out, double *cut_out)
{
	int *io, *is, *oo, *od;
	double *iw, cut;
	crux_status_t st;

	if (n < 0 || n_edges < 0 || levels < 1 || levels > CRUX_SCHED_MAX_LEVELS || orders < 1)
		return CRUX_ERR_INVAL;
	for (int e = 0; e < n_edges; e++)
		if (from[e] < 0 || from[e] >= n || to[e] < 0 || to[e] >= n || from[e] == to[e] ||
		    !isfinite(w[e]))
			return CRUX_ERR_INVAL;
	if (n == 0) {
		*cut_out = 0;
		return CRUX_OK;
	}
	st = dag_csr(n, n_edges, from, to, w, &io, &is, &iw, &oo, &od);
	if (st)
		return st;
	struct kdag g = {n, io, is, iw, oo, od};
	int *lv = malloc((size_t)n * sizeof(int));

	if (!lv) {
		st = CRUX_ERR_NOMEM;
	} else {
		st = kcut(&g, levels, orders, seed, NULL, lv, &cut);
		if (!st) {
			memcpy(levels_out, lv, (size_t)n * sizeof(int));
			*cut_out = cut;
		}
	}
	free(lv);
	free(io);
	free(is);
	free(iw);
	free(oo);
	free(od);
	return st;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

crux_status_t crux_sched_link_jobs(const struct job_links *jl, size_t n, int L, size_t **loff,
				   int **ljob)
{
	size_t *off = calloc((size_t)L + 2, sizeof(size_t)), *fill = NULL;
	int *jb = malloc((jl->off[n] ? jl->off[n] : 1) * sizeof(int));

	if (off && jb)
		fill = malloc(((size_t)L + 1) * sizeof(size_t));
	if (!fill) {
		free(off);
		free(jb);
		return CRUX_ERR_NOMEM;
	}
	for (size_t k = 0; k < jl->off[n]; k++)
		off[jl->link[k] + 1]++;
	for (int l = 0; l < L; l++)
		off[l + 1] += off[l];
	memcpy(fill, off, ((size_t)L + 1) * sizeof(size_t));
	for (size_t i = 0; i < n; i++)
		for (size_t k = jl->off[i]; k < jl->off[i + 1]; k++)
			jb[fill[jl->link[k]]++] = (int)i;
	free(fill);
	*loff = off;
	*ljob = jb;
	return CRUX_OK;
}

crux_status_t crux_sched_compress(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				  size_t n, const struct crux_sched_params *p,
				  struct crux_sched_schedule *s)
{
	struct job_links jl = {0};
	size_t *loff = NULL;
	int *ljob = NULL, *stamp = NULL, *aoff = NULL, *adj = NULL, *comp = NULL, *queue = NULL;
	int *byrank = NULL, *local = NULL, *lio = NULL, *lis = NULL, *loo = NULL, *lod = NULL;
	int *lfirst = NULL, *lv = NULL;
	double *liw = NULL;
	size_t acap = 0, na = 0;
	int L = t->n_links, K = p->levels;
	crux_status_t st;

	if (n > (size_t)INT32_MAX / 2 || K < 1 || K > CRUX_SCHED_MAX_LEVELS || p->orders < 1)
		return CRUX_ERR_INVAL;
	s->levels = K;
	s->cut_weight = 0;
	s->dag_edges = 0;
	s->dag_components = 0;
	s->dag_largest = 0;
	st = crux_sched_job_links_build(t, jobs, n, s, &jl);
	if (st)
		return st;
	st = CRUX_ERR_NOMEM;
	stamp = malloc((n ? n : 1) * sizeof(int));
	aoff = malloc((n + 1) * sizeof(int));
	comp = malloc((n ? n : 1) * sizeof(int));
	queue = malloc((n ? n : 1) * sizeof(int));
	byrank = malloc((n ? n : 1) * sizeof(int));
	local = malloc((n ? n : 1) * sizeof(int));
	lv = malloc((n ? n : 1) * sizeof(int));
	if (!stamp || !aoff || !comp || !queue || !byrank || !local || !lv ||
	    crux_sched_link_jobs(&jl, n, L, &loff, &ljob))
		goto out;
	/* Each job's distinct neighbours (undirected), through the jobs on its links. */
	for (size_t i = 0; i < n; i++)
		stamp[i] = -1;
	aoff[0] = 0;
	for (size_t i = 0; i < n; i++) {
		for (size_t k = jl.off[i]; k < jl.off[i + 1]; k++) {
			int l = jl.link[k];

			for (size_t q = loff[l]; q < loff[l + 1]; q++) {
				int v = ljob[q];

				if ((size_t)v == i || stamp[v] == (int)i)
					continue;
				stamp[v] = (int)i;
				if (na == acap) {
					size_t nc = acap ? acap * 2 : 4096;
					int *np = realloc(adj, nc * sizeof(int));

					if (!np)
						goto out;
					adj = np;
					acap = nc;
				}
				adj[na++] = v;
			}
		}
		if (na > (size_t)INT32_MAX)
			goto out;
		aoff[i + 1] = (int)na;
	}
	/* Rank order of all jobs (crux_sched_rank must have run). */
	for (size_t i = 0; i < n; i++) {
		if (s->d[i].rank < 0 || (size_t)s->d[i].rank >= n) {
			st = CRUX_ERR_INVAL;
			goto out;
		}
		byrank[s->d[i].rank] = (int)i;
	}
	for (size_t i = 0; i < n; i++)
		comp[i] = -1;
	/* Components, visited in index order so their numbering is deterministic. */
	int ncomp = 0;

	for (size_t root = 0; root < n; root++) {
		if (comp[root] >= 0)
			continue;
		if (aoff[root + 1] == aoff[root]) {
			comp[root] = ncomp++;
			s->d[root].level = K - 1; /* contends with nobody */
			continue;
		}
		int qh = 0, qt = 0, cn;

		comp[root] = ncomp;
		queue[qt++] = (int)root;
		while (qh < qt) {
			int v = queue[qh++];

			for (int e = aoff[v]; e < aoff[v + 1]; e++) {
				if (comp[adj[e]] < 0) {
					comp[adj[e]] = ncomp;
					queue[qt++] = adj[e];
				}
			}
		}
		cn = qt;
		/* Local numbering by rank: the sorted order is a topological order. */
		int *members = queue;

		for (int a = 0; a < cn; a++)
			members[a] = s->d[members[a]].rank;
		qsort(members, (size_t)cn, sizeof(int), cmp_int);
		for (int a = 0; a < cn; a++) {
			members[a] = byrank[members[a]];
			local[members[a]] = a;
		}
		/* In/out CSR of the component: edge u -> v when rank u < rank v, weight I_u. */
		int m = 0;

		for (int a = 0; a < cn; a++)
			m += aoff[members[a] + 1] - aoff[members[a]];
		m /= 2;
		free(lio);
		free(lis);
		free(liw);
		free(loo);
		free(lod);
		free(lfirst);
		lio = calloc((size_t)cn + 1, sizeof(int));
		loo = calloc((size_t)cn + 1, sizeof(int));
		lis = malloc((size_t)(m ? m : 1) * sizeof(int));
		liw = malloc((size_t)(m ? m : 1) * sizeof(double));
		lod = malloc((size_t)(m ? m : 1) * sizeof(int));
		lfirst = malloc((size_t)cn * sizeof(int));
		if (!lio || !loo || !lis || !liw || !lod || !lfirst)
			goto out;
		for (int a = 0; a < cn; a++) {
			int v = members[a];

			lfirst[a] = a;
			for (int e = aoff[v]; e < aoff[v + 1]; e++) {
				int b = local[adj[e]];

				if (b > a) {
					loo[a + 1]++;
					lio[b + 1]++;
				}
			}
		}
		for (int a = 0; a < cn; a++) {
			lio[a + 1] += lio[a];
			loo[a + 1] += loo[a];
		}
		{
			int *pi = malloc(((size_t)cn + 1) * sizeof(int));
			int *po = malloc(((size_t)cn + 1) * sizeof(int));

			if (!pi || !po) {
				free(pi);
				free(po);
				goto out;
			}
			memcpy(pi, lio, ((size_t)cn + 1) * sizeof(int));
			memcpy(po, loo, ((size_t)cn + 1) * sizeof(int));
			for (int a = 0; a < cn; a++) {
				int v = members[a];

				for (int e = aoff[v]; e < aoff[v + 1]; e++) {
					int b = local[adj[e]];

					if (b > a) {
						lis[pi[b]] = a;
						liw[pi[b]++] = s->d[v].intensity;
						lod[po[a]++] = b;
					}
				}
			}
			free(pi);
			free(po);
		}
		struct kdag g = {cn, lio, lis, liw, loo, lod};
		double cut;

		st = kcut(&g, K, p->orders, p->seed ^ crux_sched_mix64((uint64_t)ncomp), lfirst, lv,
			  &cut);
		if (st)
			goto out;
		st = CRUX_ERR_NOMEM;
		for (int a = 0; a < cn; a++)
			s->d[members[a]].level = lv[a];
		s->cut_weight += cut;
		s->dag_edges += (size_t)m;
		s->dag_components++;
		if (cn > s->dag_largest)
			s->dag_largest = cn;
		ncomp++;
	}
	st = CRUX_OK;
out:
	crux_sched_job_links_free(&jl);
	free(loff);
	free(ljob);
	free(stamp);
	free(aoff);
	free(adj);
	free(comp);
	free(queue);
	free(byrank);
	free(local);
	free(lio);
	free(lis);
	free(liw);
	free(loo);
	free(lod);
	free(lfirst);
	free(lv);
	return st;
}
