/* SPDX-License-Identifier: Apache-2.0 */
/* Topology: builder, text format parser, accessors and candidate paths. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crux/env.h"
#include "sched_int.h"

#define MAX_ENUM_PATHS 4096

static int grow(void **p, int *cap, int need, size_t elem)
{
	if (need <= *cap)
		return 0;
	int nc = *cap ? *cap : 16;

	while (nc < need)
		nc *= 2;
	void *np = realloc(*p, (size_t)nc * elem);

	if (!np)
		return -1;
	*p = np;
	*cap = nc;
	return 0;
}

void crux_sched_tb_init(struct topo_builder *b)
{
	memset(b, 0, sizeof(*b));
	b->max_paths = CRUX_SCHED_DEF_MAXPATH;
}

void crux_sched_tb_free(struct topo_builder *b)
{
	for (int i = 0; i < b->n_nodes; i++)
		free(b->names[i]);
	free(b->names);
	free(b->is_host);
	free(b->lfrom);
	free(b->lto);
	free(b->lbw);
	free(b->exp_src);
	free(b->exp_dst);
	free(b->exp_off);
	free(b->exp_links);
	free(b->name_tab);
	memset(b, 0, sizeof(*b));
}

static int name_lookup(char **names, const int *tab, int cap, const char *name)
{
	if (!cap)
		return -1;
	for (uint32_t h = crux_sched_name_hash(name) & (uint32_t)(cap - 1);;
	     h = (h + 1) & (uint32_t)(cap - 1)) {
		if (tab[h] < 0)
			return -1;
		if (!strcmp(names[tab[h]], name))
			return tab[h];
	}
}

static int name_rehash(char **names, int n, int **tab, int *cap)
{
	int nc = 64;

	while (nc < 2 * (n + 1))
		nc *= 2;
	int *nt = malloc((size_t)nc * sizeof(*nt));

	if (!nt)
		return -1;
	for (int i = 0; i < nc; i++)
		nt[i] = -1;
	for (int i = 0; i < n; i++) {
		uint32_t h = crux_sched_name_hash(names[i]) & (uint32_t)(nc - 1);

		while (nt[h] >= 0)
			h = (h + 1) & (uint32_t)(nc - 1);
		nt[h] = i;
	}
	free(*tab);
	*tab = nt;
	*cap = nc;
	return 0;
}

int crux_sched_tb_find(const struct topo_builder *b, const char *name)
{
	return name_lookup(b->names, b->name_tab, b->name_cap, name);
}

int crux_sched_tb_add_node(struct topo_builder *b, const char *name, int is_host)
{
	int cap = b->cap_nodes;

	if (crux_sched_tb_find(b, name) >= 0)
		return -2;
	if (grow((void **)&b->names, &cap, b->n_nodes + 1, sizeof(*b->names)))
		return -1;
	cap = b->cap_nodes;
	if (grow((void **)&b->is_host, &cap, b->n_nodes + 1, sizeof(*b->is_host)))
		return -1;
	b->cap_nodes = cap;
	b->names[b->n_nodes] = strdup(name);
	if (!b->names[b->n_nodes])
		return -1;
	b->is_host[b->n_nodes] = (unsigned char)is_host;
	b->n_nodes++;
	if (is_host)
		b->n_hosts++;
	if (2 * (b->n_nodes + 1) > b->name_cap) {
		if (name_rehash(b->names, b->n_nodes, &b->name_tab, &b->name_cap)) {
			free(b->names[--b->n_nodes]);
			return -1;
		}
	} else {
		uint32_t h = crux_sched_name_hash(name) & (uint32_t)(b->name_cap - 1);

		while (b->name_tab[h] >= 0)
			h = (h + 1) & (uint32_t)(b->name_cap - 1);
		b->name_tab[h] = b->n_nodes - 1;
	}
	return b->n_nodes - 1;
}

int crux_sched_tb_add_cable(struct topo_builder *b, int a, int c, double bw)
{
	int cap = b->cap_links;

	if (grow((void **)&b->lfrom, &cap, b->n_links + 2, sizeof(int)))
		return -1;
	cap = b->cap_links;
	if (grow((void **)&b->lto, &cap, b->n_links + 2, sizeof(int)))
		return -1;
	cap = b->cap_links;
	if (grow((void **)&b->lbw, &cap, b->n_links + 2, sizeof(double)))
		return -1;
	b->cap_links = cap;
	b->lfrom[b->n_links] = a;
	b->lto[b->n_links] = c;
	b->lbw[b->n_links] = bw;
	b->lfrom[b->n_links + 1] = c;
	b->lto[b->n_links + 1] = a;
	b->lbw[b->n_links + 1] = bw;
	b->n_links += 2;
	return b->n_links - 2;
}

static int sched_tb_add_exp(struct topo_builder *b, int src, int dst, const int *links, int n)
{
	int cap = b->cap_exp;

	/* One capacity for three arrays: grow all to the same need. */
	if (grow((void **)&b->exp_src, &cap, b->n_exp + 2, sizeof(int)))
		return -1;
	cap = b->cap_exp;
	if (grow((void **)&b->exp_dst, &cap, b->n_exp + 2, sizeof(int)))
		return -1;
	cap = b->cap_exp;
	if (grow((void **)&b->exp_off, &cap, b->n_exp + 2, sizeof(int)))
		return -1;
	b->cap_exp = cap;
	if (grow((void **)&b->exp_links, &b->cap_exp_links, b->n_exp_links + n, sizeof(int)))
		return -1;
	if (b->n_exp == 0)
		b->exp_off[0] = 0;
	b->exp_src[b->n_exp] = src;
	b->exp_dst[b->n_exp] = dst;
	memcpy(b->exp_links + b->n_exp_links, links, (size_t)n * sizeof(int));
	b->n_exp_links += n;
	b->exp_off[b->n_exp + 1] = b->n_exp_links;
	b->n_exp++;
	return 0;
}

/* ---- path cache ---- */

static uint64_t pc_key(int src, int dst)
{
	return crux_sched_mix64(((uint64_t)(uint32_t)src << 32) | (uint32_t)dst);
}

static struct pcache_ent *pc_slot(struct crux_sched_topo *t, int src, int dst)
{
	size_t m = t->pc_cap - 1;

	for (size_t h = pc_key(src, dst) & m;; h = (h + 1) & m) {
		struct pcache_ent *e = &t->pc[h];

		if (e->src < 0 || (e->src == src && e->dst == dst))
			return e;
	}
}

static crux_status_t pc_grow(struct crux_sched_topo *t)
{
	size_t nc = t->pc_cap ? t->pc_cap * 2 : 1024;
	struct pcache_ent *old = t->pc;
	size_t oc = t->pc_cap;
	struct pcache_ent *np = malloc(nc * sizeof(*np));

	if (!np)
		return CRUX_ERR_NOMEM;
	for (size_t i = 0; i < nc; i++)
		np[i].src = -1;
	t->pc = np;
	t->pc_cap = nc;
	for (size_t i = 0; i < oc; i++) {
		if (old[i].src < 0)
			continue;
		*pc_slot(t, old[i].src, old[i].dst) = old[i];
	}
	free(old);
	return CRUX_OK;
}

static crux_status_t pc_insert(struct crux_sched_topo *t, int src, int dst, int n_paths, int *off,
			       int *links, struct pcache_ent **out)
{
	if ((t->pc_n + 1) * 2 > t->pc_cap) {
		crux_status_t st = pc_grow(t);

		if (st)
			return st;
	}
	struct pcache_ent *e = pc_slot(t, src, dst);

	e->src = src;
	e->dst = dst;
	e->n_paths = n_paths;
	e->off = off;
	e->links = links;
	t->pc_n++;
	*out = e;
	return CRUX_OK;
}

static crux_status_t add_explicit(struct crux_sched_topo *t, const struct topo_builder *b)
{
	/* Group explicit paths by (src, dst), keeping file order. */
	for (int i = 0; i < b->n_exp; i++) {
		int src = b->exp_src[i], dst = b->exp_dst[i];
		struct pcache_ent *e = t->pc_cap ? pc_slot(t, src, dst) : NULL;

		if (e && e->src >= 0)
			continue; /* already grouped */
		int np = 0, nl = 0;

		for (int j = i; j < b->n_exp; j++) {
			if (b->exp_src[j] == src && b->exp_dst[j] == dst) {
				np++;
				nl += b->exp_off[j + 1] - b->exp_off[j];
			}
		}
		int *off = malloc((size_t)(np + 1) * sizeof(int));
		int *links = malloc((size_t)(nl ? nl : 1) * sizeof(int));

		if (!off || !links) {
			free(off);
			free(links);
			return CRUX_ERR_NOMEM;
		}
		np = 0;
		nl = 0;
		off[0] = 0;
		for (int j = i; j < b->n_exp; j++) {
			if (b->exp_src[j] != src || b->exp_dst[j] != dst)
				continue;
			int len = b->exp_off[j + 1] - b->exp_off[j];

			memcpy(links + nl, b->exp_links + b->exp_off[j], (size_t)len * sizeof(int));
			nl += len;
			off[++np] = nl;
		}
		crux_status_t st = pc_insert(t, src, dst, np, off, links, &e);

		if (st) {
			free(off);
			free(links);
			return st;
		}
	}
	return CRUX_OK;
}

static int twin(const struct crux_sched_topo *t, int l)
{
	/* Cables are added as consecutive (a->c, c->a) pairs. */
	(void)t;
	return l ^ 1;
}

/* Reverse direction of explicit paths that have no explicit reverse. */
static crux_status_t add_reverse_explicit(struct crux_sched_topo *t)
{
	size_t cap = t->pc_cap;
	struct pcache_ent *snap = malloc((cap ? cap : 1) * sizeof(*snap));

	if (!snap)
		return CRUX_ERR_NOMEM;
	memcpy(snap, t->pc, cap * sizeof(*snap));
	for (size_t i = 0; i < cap; i++) {
		struct pcache_ent *s = &snap[i], *e;

		if (s->src < 0)
			continue;
		e = pc_slot(t, s->dst, s->src);
		if (e->src >= 0)
			continue;
		int nl = s->off[s->n_paths];
		int *off = malloc((size_t)(s->n_paths + 1) * sizeof(int));
		int *links = malloc((size_t)(nl ? nl : 1) * sizeof(int));

		if (!off || !links) {
			free(off);
			free(links);
			free(snap);
			return CRUX_ERR_NOMEM;
		}
		memcpy(off, s->off, (size_t)(s->n_paths + 1) * sizeof(int));
		for (int p = 0; p < s->n_paths; p++) {
			int a = s->off[p], z = s->off[p + 1];

			for (int k = a; k < z; k++)
				links[a + (z - 1 - k)] = twin(t, s->links[k]);
		}
		crux_status_t st = pc_insert(t, s->dst, s->src, s->n_paths, off, links, &e);

		if (st) {
			free(off);
			free(links);
			free(snap);
			return st;
		}
	}
	free(snap);
	return CRUX_OK;
}

static crux_status_t build_csr(int n_nodes, int n_links, const int *key, int **off_out,
			       int **idx_out)
{
	int *off = calloc((size_t)n_nodes + 1, sizeof(int));
	int *idx = malloc((size_t)(n_links ? n_links : 1) * sizeof(int));

	if (!off || !idx) {
		free(off);
		free(idx);
		return CRUX_ERR_NOMEM;
	}
	for (int l = 0; l < n_links; l++)
		off[key[l] + 1]++;
	for (int v = 0; v < n_nodes; v++)
		off[v + 1] += off[v];
	int *pos = malloc((size_t)n_nodes * sizeof(int) + 1);

	if (!pos) {
		free(off);
		free(idx);
		return CRUX_ERR_NOMEM;
	}
	memcpy(pos, off, (size_t)n_nodes * sizeof(int));
	for (int l = 0; l < n_links; l++)
		idx[pos[key[l]]++] = l;
	free(pos);
	*off_out = off;
	*idx_out = idx;
	return CRUX_OK;
}

crux_status_t crux_sched_tb_finish(struct topo_builder *b, struct crux_sched_topo **out,
				   struct crux_sched_err *err)
{
	struct crux_sched_topo *t = NULL;
	int *map = NULL;
	crux_status_t st = CRUX_ERR_NOMEM;

	if (b->n_hosts == 0) {
		crux_sched_errf(err, "topology has no hosts; declare them with 'host NAME ...'");
		return CRUX_ERR_INVAL;
	}
	t = calloc(1, sizeof(*t));
	map = malloc((size_t)b->n_nodes * sizeof(int));
	if (!t || !map)
		goto fail;
	/* Renumber: hosts first, in declaration order, then switches. */
	int nh = 0, ns = b->n_hosts;

	for (int v = 0; v < b->n_nodes; v++)
		map[v] = b->is_host[v] ? nh++ : ns++;
	t->n_hosts = b->n_hosts;
	t->n_nodes = b->n_nodes;
	t->n_links = b->n_links;
	t->max_paths = b->max_paths;
	t->names = calloc((size_t)b->n_nodes, sizeof(char *));
	t->lfrom = malloc((size_t)(b->n_links + 1) * sizeof(int));
	t->lto = malloc((size_t)(b->n_links + 1) * sizeof(int));
	t->lbw = malloc((size_t)(b->n_links + 1) * sizeof(double));
	t->dist = calloc((size_t)b->n_hosts, sizeof(int *));
	if (!t->names || !t->lfrom || !t->lto || !t->lbw || !t->dist)
		goto fail;
	for (int v = 0; v < b->n_nodes; v++) {
		t->names[map[v]] = b->names[v];
		b->names[v] = NULL;
	}
	for (int l = 0; l < b->n_links; l++) {
		t->lfrom[l] = map[b->lfrom[l]];
		t->lto[l] = map[b->lto[l]];
		t->lbw[l] = b->lbw[l];
	}
	if (name_rehash(t->names, t->n_nodes, &t->name_tab, &t->name_cap))
		goto fail;
	if (build_csr(t->n_nodes, t->n_links, t->lfrom, &t->out_off, &t->out_link))
		goto fail;
	if (build_csr(t->n_nodes, t->n_links, t->lto, &t->in_off, &t->in_link))
		goto fail;
	for (int i = 0; i < b->n_exp; i++) {
		b->exp_src[i] = map[b->exp_src[i]];
		b->exp_dst[i] = map[b->exp_dst[i]];
	}
	if (pc_grow(t))
		goto fail;
	st = add_explicit(t, b);
	if (st)
		goto fail;
	st = add_reverse_explicit(t);
	if (st)
		goto fail;
	free(map);
	*out = t;
	return CRUX_OK;
fail:
	free(map);
	crux_sched_topo_free(t);
	crux_sched_errf(err, "out of memory building the topology");
	return CRUX_ERR_NOMEM;
}

void crux_sched_topo_free(struct crux_sched_topo *t)
{
	if (!t)
		return;
	if (t->names)
		for (int i = 0; i < t->n_nodes; i++)
			free(t->names[i]);
	free(t->names);
	free(t->lfrom);
	free(t->lto);
	free(t->lbw);
	free(t->out_off);
	free(t->out_link);
	free(t->in_off);
	free(t->in_link);
	free(t->name_tab);
	for (size_t i = 0; i < t->pc_cap; i++) {
		if (t->pc[i].src >= 0) {
			free(t->pc[i].off);
			free(t->pc[i].links);
		}
	}
	free(t->pc);
	if (t->dist)
		for (int i = 0; i < t->n_hosts; i++)
			free(t->dist[i]);
	free(t->dist);
	free(t);
}

int crux_sched_topo_n_hosts(const struct crux_sched_topo *t)
{
	return t->n_hosts;
}

int crux_sched_topo_n_nodes(const struct crux_sched_topo *t)
{
	return t->n_nodes;
}

int crux_sched_topo_n_links(const struct crux_sched_topo *t)
{
	return t->n_links;
}

const char *crux_sched_topo_node_name(const struct crux_sched_topo *t, int node)
{
	if (node < 0 || node >= t->n_nodes)
		return NULL;
	return t->names[node];
}

int crux_sched_topo_find(const struct crux_sched_topo *t, const char *name)
{
	return name_lookup(t->names, t->name_tab, t->name_cap, name);
}

crux_status_t crux_sched_topo_link(const struct crux_sched_topo *t, int link, int *from, int *to,
				   double *bw)
{
	if (link < 0 || link >= t->n_links)
		return CRUX_ERR_RANGE;
	if (from)
		*from = t->lfrom[link];
	if (to)
		*to = t->lto[link];
	if (bw)
		*bw = t->lbw[link];
	return CRUX_OK;
}

/* Hops from every node to host dst, through switches only (hosts do not forward). */
static crux_status_t dist_to(struct crux_sched_topo *t, int dst, const int **out)
{
	int *d = t->dist[dst];

	if (!d) {
		int *q = malloc((size_t)t->n_nodes * sizeof(int));
		int qh = 0, qt = 0;

		d = malloc((size_t)t->n_nodes * sizeof(int));
		if (!q || !d) {
			free(q);
			free(d);
			return CRUX_ERR_NOMEM;
		}
		for (int v = 0; v < t->n_nodes; v++)
			d[v] = -1;
		d[dst] = 0;
		q[qt++] = dst;
		while (qh < qt) {
			int v = q[qh++];

			if (v != dst && v < t->n_hosts)
				continue;
			for (int k = t->in_off[v]; k < t->in_off[v + 1]; k++) {
				int u = t->lfrom[t->in_link[k]];

				if (d[u] < 0) {
					d[u] = d[v] + 1;
					q[qt++] = u;
				}
			}
		}
		free(q);
		t->dist[dst] = d;
	}
	*out = d;
	return CRUX_OK;
}

struct enum_state {
	struct crux_sched_topo *t;
	const int *d;
	int dst;
	int *stack;
	int *links; /* all enumerated paths, each of length len */
	int n, cap, len;
};

static void enum_paths(struct enum_state *es, int v, int depth)
{
	struct crux_sched_topo *t = es->t;

	if (es->n >= es->cap)
		return;
	if (v == es->dst) {
		memcpy(es->links + (size_t)es->n * (size_t)es->len, es->stack,
		       (size_t)es->len * sizeof(int));
		es->n++;
		return;
	}
	if (depth > 0 && v < t->n_hosts)
		return;
	for (int k = t->out_off[v]; k < t->out_off[v + 1]; k++) {
		int l = t->out_link[k], w = t->lto[l];

		if (es->d[w] == es->d[v] - 1 && es->d[w] >= 0) {
			es->stack[depth] = l;
			enum_paths(es, w, depth + 1);
		}
	}
}

static crux_status_t compute_paths(struct crux_sched_topo *t, int src, int dst,
				   struct pcache_ent **out)
{
	const int *d;
	struct enum_state es = {0};
	crux_status_t st = dist_to(t, dst, &d);

	if (st)
		return st;
	if (d[src] <= 0)
		return CRUX_ERR_NOENT;
	es.t = t;
	es.d = d;
	es.dst = dst;
	es.len = d[src];
	es.cap = MAX_ENUM_PATHS;
	es.stack = malloc((size_t)es.len * sizeof(int));
	es.links = malloc((size_t)es.cap * (size_t)es.len * sizeof(int));
	if (!es.stack || !es.links) {
		st = CRUX_ERR_NOMEM;
		goto out;
	}
	enum_paths(&es, src, 0);
	/* Keep at most max_paths, evenly spread over the enumeration so the
	 * kept set does not all share the first uplink. */
	int keep = es.n < t->max_paths ? es.n : t->max_paths;
	int *off = malloc((size_t)(keep + 1) * sizeof(int));
	int *links = malloc((size_t)keep * (size_t)es.len * sizeof(int));

	if (!off || !links) {
		free(off);
		free(links);
		st = CRUX_ERR_NOMEM;
		goto out;
	}
	for (int p = 0; p < keep; p++) {
		long src_idx = (long)p * es.n / keep;

		memcpy(links + (size_t)p * (size_t)es.len,
		       es.links + (size_t)src_idx * (size_t)es.len, (size_t)es.len * sizeof(int));
		off[p] = p * es.len;
	}
	off[keep] = keep * es.len;
	st = pc_insert(t, src, dst, keep, off, links, out);
	if (st) {
		free(off);
		free(links);
	}
out:
	free(es.stack);
	free(es.links);
	return st;
}

crux_status_t crux_sched_topo_paths(struct crux_sched_topo *t, int src, int dst,
				    struct crux_sched_path_set *out)
{
	struct pcache_ent *e;

	if (src < 0 || dst < 0 || src >= t->n_hosts || dst >= t->n_hosts || src == dst)
		return CRUX_ERR_INVAL;
	e = pc_slot(t, src, dst);
	if (e->src < 0) {
		crux_status_t st = compute_paths(t, src, dst, &e);

		if (st)
			return st;
	}
	out->n_paths = e->n_paths;
	out->off = e->off;
	out->links = e->links;
	return CRUX_OK;
}

int crux_sched_topo_path_hops(struct crux_sched_topo *t, int src, int dst, int idx)
{
	struct crux_sched_path_set ps;

	if (crux_sched_topo_paths(t, src, dst, &ps) || idx < 0 || idx >= ps.n_paths)
		return -1;
	return ps.off[idx + 1] - ps.off[idx];
}

crux_status_t crux_sched_flow_links(struct crux_sched_topo *t, const struct crux_sched_job *job,
				    int f, int path_idx, const int **links, int *n_links)
{
	struct crux_sched_path_set ps;
	const struct crux_sched_flow *fl = &job->flows[f];
	crux_status_t st;

	if (fl->src == fl->dst) {
		*links = NULL;
		*n_links = 0;
		return CRUX_OK;
	}
	st = crux_sched_topo_paths(t, fl->src, fl->dst, &ps);
	if (st)
		return st;
	if (path_idx < 0 || path_idx >= ps.n_paths)
		path_idx = 0;
	*links = ps.links + ps.off[path_idx];
	*n_links = ps.off[path_idx + 1] - ps.off[path_idx];
	return CRUX_OK;
}

/* ---- text format ---- */

/* Numbers of the topology file, by the base's strict parsers. */
static int parse_double(const char *s, double *out)
{
	return crux_parse_double("topology", s, -DBL_MAX, DBL_MAX, out, NULL, 0) == CRUX_OK ? 0
											    : -1;
}

static int parse_int(const char *s, long lo, long hi, int *out)
{
	long long v;

	if (crux_parse_int("topology", s, lo, hi, &v, NULL, 0) != CRUX_OK)
		return -1;
	*out = (int)v;
	return 0;
}

/* Resolve "NAME" or "NAME#k" (k-th parallel cable into NAME). */
static int resolve_hop(const struct topo_builder *b, char *tok, int *node, int *par)
{
	char *hash = strchr(tok, '#');

	*par = 0;
	if (hash) {
		*hash = '\0';
		if (parse_int(hash + 1, 0, 1 << 20, par))
			return -1;
	}
	*node = crux_sched_tb_find(b, tok);
	return *node < 0 ? -2 : 0;
}

static int find_cable(const struct topo_builder *b, int a, int c, int par)
{
	for (int l = 0; l < b->n_links; l++) {
		if (b->lfrom[l] == a && b->lto[l] == c) {
			if (par == 0)
				return l;
			par--;
		}
	}
	return -1;
}

crux_status_t crux_sched_topo_parse(const char *text, size_t len, const char *name,
				    struct crux_sched_topo **out, struct crux_sched_err *err)
{
	struct topo_builder b;
	char *buf = NULL;
	char **tok = NULL;
	int *plinks = NULL, *pnodes = NULL;
	crux_status_t st = CRUX_ERR_INVAL;
	int lineno = 0;

	crux_sched_tb_init(&b);
	buf = malloc(len + 1);
	tok = malloc(MAX_TOKENS * sizeof(*tok));
	plinks = malloc(MAX_TOKENS * sizeof(int));
	pnodes = malloc(MAX_TOKENS * sizeof(int));
	if (!buf || !tok || !plinks || !pnodes) {
		crux_sched_errf(err, "%s: out of memory", name);
		st = CRUX_ERR_NOMEM;
		goto out;
	}
	memcpy(buf, text, len);
	buf[len] = '\0';
	if (memchr(buf, '\0', len)) {
		crux_sched_errf(err, "%s: contains a NUL byte; the topology is a text file", name);
		goto out;
	}
	for (char *line = buf, *next; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		lineno++;
		int nt = crux_sched_split_tokens(line, tok, MAX_TOKENS);

		if (nt < 0) {
			crux_sched_errf(err, "%s:%d: too many fields (max %d); split the line",
					name, lineno, MAX_TOKENS);
			goto out;
		}
		if (nt == 0)
			continue;
		if (!strcmp(tok[0], "host") || !strcmp(tok[0], "switch")) {
			int is_host = tok[0][0] == 'h';

			if (nt < 2) {
				crux_sched_errf(err,
						"%s:%d: field 'name': '%s' needs at least one name",
						name, lineno, tok[0]);
				goto out;
			}
			for (int i = 1; i < nt; i++) {
				int r = crux_sched_tb_add_node(&b, tok[i], is_host);

				if (r == -2) {
					crux_sched_errf(
					    err,
					    "%s:%d: field 'name': duplicate node '%s'; names "
					    "must be unique",
					    name, lineno, tok[i]);
					goto out;
				}
				if (r < 0) {
					crux_sched_errf(err, "%s: out of memory", name);
					st = CRUX_ERR_NOMEM;
					goto out;
				}
			}
		} else if (!strcmp(tok[0], "link")) {
			double gbps;
			int a, c, count = 1;

			if (nt != 4 && nt != 5) {
				crux_sched_errf(
				    err,
				    "%s:%d: malformed link line; expected 'link A B GBPS [xN]'",
				    name, lineno);
				goto out;
			}
			a = crux_sched_tb_find(&b, tok[1]);
			c = crux_sched_tb_find(&b, tok[2]);
			if (a < 0 || c < 0) {
				crux_sched_errf(
				    err,
				    "%s:%d: field 'endpoint': unknown node '%s'; declare it "
				    "with host/switch first",
				    name, lineno, a < 0 ? tok[1] : tok[2]);
				goto out;
			}
			if (a == c) {
				crux_sched_errf(err,
						"%s:%d: field 'endpoint': link from '%s' to itself",
						name, lineno, tok[1]);
				goto out;
			}
			if (parse_double(tok[3], &gbps) || !isfinite(gbps) || gbps <= 0) {
				crux_sched_errf(
				    err,
				    "%s:%d: field 'bandwidth': '%s' must be a number > 0 (Gbit/s)",
				    name, lineno, tok[3]);
				goto out;
			}
			if (nt == 5 &&
			    (tok[4][0] != 'x' || parse_int(tok[4] + 1, 1, 1024, &count))) {
				crux_sched_errf(
				    err, "%s:%d: field 'count': '%s' must be xN with N in 1..1024",
				    name, lineno, tok[4]);
				goto out;
			}
			for (int i = 0; i < count; i++) {
				if (crux_sched_tb_add_cable(&b, a, c, GBPS_TO_BYTES(gbps)) < 0) {
					crux_sched_errf(err, "%s: out of memory", name);
					st = CRUX_ERR_NOMEM;
					goto out;
				}
			}
		} else if (!strcmp(tok[0], "path")) {
			int nn = nt - 1;

			if (nn < 2) {
				crux_sched_errf(
				    err,
				    "%s:%d: malformed path line; expected 'path SRC NODE... DST'",
				    name, lineno);
				goto out;
			}
			for (int i = 0; i < nn; i++) {
				int par, r = resolve_hop(&b, tok[i + 1], &pnodes[i], &par);

				if (r == -1) {
					crux_sched_errf(
					    err,
					    "%s:%d: field 'hop %d': bad parallel-cable index "
					    "in '%s'; use NAME#K",
					    name, lineno, i, tok[i + 1]);
					goto out;
				}
				if (r == -2) {
					crux_sched_errf(err,
							"%s:%d: field 'hop %d': unknown node '%s'",
							name, lineno, i, tok[i + 1]);
					goto out;
				}
				if (i == 0)
					continue;
				plinks[i - 1] = find_cable(&b, pnodes[i - 1], pnodes[i], par);
				if (plinks[i - 1] < 0) {
					crux_sched_errf(
					    err,
					    "%s:%d: field 'hop %d': no link (#%d) from '%s' "
					    "to '%s'",
					    name, lineno, i, par, b.names[pnodes[i - 1]],
					    b.names[pnodes[i]]);
					goto out;
				}
			}
			if (!b.is_host[pnodes[0]] || !b.is_host[pnodes[nn - 1]] ||
			    pnodes[0] == pnodes[nn - 1]) {
				crux_sched_errf(err,
						"%s:%d: field 'endpoints': a path runs between two "
						"different hosts",
						name, lineno);
				goto out;
			}
			for (int i = 1; i < nn - 1; i++) {
				if (b.is_host[pnodes[i]]) {
					crux_sched_errf(
					    err,
					    "%s:%d: field 'hop %d': host '%s' inside a path; "
					    "hosts do not forward",
					    name, lineno, i, b.names[pnodes[i]]);
					goto out;
				}
				for (int k = 0; k < i; k++) {
					if (pnodes[k] == pnodes[i]) {
						crux_sched_errf(
						    err,
						    "%s:%d: field 'hop %d': path visits '%s' twice",
						    name, lineno, i, b.names[pnodes[i]]);
						goto out;
					}
				}
			}
			if (sched_tb_add_exp(&b, pnodes[0], pnodes[nn - 1], plinks, nn - 1)) {
				crux_sched_errf(err, "%s: out of memory", name);
				st = CRUX_ERR_NOMEM;
				goto out;
			}
		} else if (!strcmp(tok[0], "max-paths")) {
			if (nt != 2 || parse_int(tok[1], 1, MAX_ENUM_PATHS, &b.max_paths)) {
				crux_sched_errf(
				    err, "%s:%d: field 'max-paths': expected one integer in 1..%d",
				    name, lineno, MAX_ENUM_PATHS);
				goto out;
			}
		} else {
			crux_sched_errf(
			    err,
			    "%s:%d: unknown keyword '%s'; expected host, switch, link, path "
			    "or max-paths",
			    name, lineno, tok[0]);
			goto out;
		}
	}
	if (b.n_hosts == 0) {
		crux_sched_errf(err, "%s: no hosts; declare them with 'host NAME ...'", name);
		goto out;
	}
	st = crux_sched_tb_finish(&b, out, err);
out:
	crux_sched_tb_free(&b);
	free(buf);
	free(tok);
	free(plinks);
	free(pnodes);
	return st;
}

crux_status_t crux_sched_topo_load(const char *path, struct crux_sched_topo **out,
				   struct crux_sched_err *err)
{
	char *text;
	size_t len;
	crux_status_t st = crux_sched_read_file_text(path, &text, &len, err);

	if (st)
		return st;
	st = crux_sched_topo_parse(text, len, path, out, err);
	free(text);
	return st;
}
