/* SPDX-License-Identifier: Apache-2.0 */
/*
 * crux-sim engine: topology, policies and steady state, on top of the
 * scheduler library (agent/sched). Every policy but CASSINI is the
 * scheduler's own; its fluid evaluator gives the steady state. CASSINI (ECMP
 * paths, no priorities, time shifts) is evaluated by cassini.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cassini.h"
#include "crux/sched.h"
#include "crux/sched_ref.h"
#include "promote_replay.h"
#include "sim_engine.h"

struct sim_engine {
	const struct crux_sim_config *cfg;
	struct crux_sched_topo *topo;
	struct crux_sched_eval *ev;
	enum crux_sched_policy spol;
	struct crux_sched_params params;
	uint32_t n_hosts, n_groups;
	uint32_t *group;
	int n_links;
	double *link_bw;
	/* Scratch reused across evaluations. */
	double *link_load;
	int *stamp, *slot;
	double *iter;
	struct crux_sched_flow *flows;
	size_t flows_cap;
	int *hosts_int;
	size_t hosts_cap;
	int *jl_links;
	double *jl_bytes;
	size_t jl_cap;
	struct sim_cassini_job *cj;
	size_t cj_cap;
	struct sim_promote *promote; /* promotion by measurement, when asked for */
	/* The plan in force (the last evaluation's jobs, schedule and
	 * utilisation), kept for reference snapshots; NULL for CASSINI. */
	struct crux_sched_jobs last_js;
	struct crux_sched_schedule *last_s;
	double last_util;
};

static const char *const policy_names[CRUX_SIM_N_POLICIES] = {
    "ecmp",
    "sincronia",
    "taccl",
    "cassini-lite",
    "crux-pa",
    "crux-ps-pa",
    "crux-full",
    "sincronia-lcp",
    "cassini-lite-lcp",
    "crux-random-order",
    "crux-reversed-order",
    "crux-one-level",
};

const char *crux_sim_policy_name(enum crux_sim_policy p)
{
	return (unsigned)p < CRUX_SIM_N_POLICIES ? policy_names[p] : "?";
}

crux_status_t crux_sim_policy_parse(const char *s, enum crux_sim_policy *out)
{
	if (strcmp(s, "cassini") == 0) { /* the name before it was called "lite" */
		*out = CRUX_SIM_CASSINI;
		return CRUX_OK;
	}
	for (int i = 0; i < CRUX_SIM_N_POLICIES; i++) {
		if (strcmp(s, policy_names[i]) == 0) {
			*out = (enum crux_sim_policy)i;
			return CRUX_OK;
		}
	}
	return CRUX_ERR_INVAL;
}

void crux_sim_topo_defaults(enum crux_sim_topo_kind kind, struct crux_sim_topo_params *p)
{
	memset(p, 0, sizeof(*p));
	p->gpus_per_host = 8;
	p->channels = 1;
	p->host_gbps = 200;
	switch (kind) {
	case CRUX_SIM_TOPO_CLOS2:
		/* The paper's 173 ToRs and 16 aggregation switches; 2 hosts of 8 GPUs
		 * per ToR (2,768 GPUs) with 200G each; 16 ring channels per host pair
		 * (NCCL channels x QPs) over 16 x 20G uplinks: 1.25:1 oversubscribed
		 * at the ToR, and a host can still reach its 200G across ToRs. */
		p->n_tor = 173;
		p->n_agg = 16;
		p->hosts_per_tor = 2;
		p->channels = 16;
		p->host_gbps = 200;
		p->tor_gbps = 20;
		break;
	case CRUX_SIM_TOPO_DOUBLE_SIDED:
		/* 6 ToRs, 12 aggregation, 32 core; 260 hosts of 8 GPUs (2,080 GPUs),
		 * each on two ToRs. The paper's 8 links per host are bundled into one
		 * 100G cable per side (200G per host, as in the Clos): the scheduler
		 * keeps 16 candidate paths per host pair, and with 8 cables that set
		 * loses first-hop diversity. ToR uplinks are bundles sized for 1.5:1
		 * oversubscription (87 hosts x 100G / 12 / 1.5). */
		p->n_hosts = 260;
		p->n_tor = 6;
		p->n_agg = 12;
		p->n_core = 32;
		p->host_links = 2;
		p->channels = 16;
		p->host_gbps = 100;
		p->tor_gbps = 483;
		p->agg_gbps = 483;
		break;
	case CRUX_SIM_TOPO_CLOS3:
		p->n_pods = 4;
		p->tors_per_pod = 8;
		p->aggs_per_pod = 4;
		p->n_core = 8;
		p->hosts_per_tor = 8;
		p->tor_gbps = 400;
		p->agg_gbps = 400;
		break;
	case CRUX_SIM_TOPO_LINGJUN:
	case CRUX_SIM_TOPO_FILE:
		p->tor_gbps = 400;
		p->agg_gbps = 400;
		break;
	}
}

static crux_status_t build_topo(struct sim_engine *e, char *err, size_t errlen)
{
	const struct crux_sim_topo_params *p = &e->cfg->tp;
	struct crux_sched_err se = {{0}};
	crux_status_t st = CRUX_ERR_INVAL;

	switch (e->cfg->topo) {
	case CRUX_SIM_TOPO_CLOS2: {
		struct crux_sched_clos2_params c = {.n_tor = (int)p->n_tor,
						    .n_agg = (int)p->n_agg,
						    .hosts_per_tor = (int)p->hosts_per_tor,
						    .tor_uplinks = 1,
						    .host_gbps = p->host_gbps,
						    .tor_gbps = p->tor_gbps};
		st = crux_sched_topo_clos2(&c, &e->topo, &se);
		break;
	}
	case CRUX_SIM_TOPO_DOUBLE_SIDED: {
		struct crux_sched_dsided_params d = {.n_hosts = (int)p->n_hosts,
						     .n_tor = (int)p->n_tor,
						     .n_agg = (int)p->n_agg,
						     .n_core = (int)p->n_core,
						     .host_links = (int)p->host_links,
						     .host_gbps = p->host_gbps,
						     .tor_gbps = p->tor_gbps,
						     .agg_gbps = p->agg_gbps};
		st = crux_sched_topo_dsided(&d, &e->topo, &se);
		break;
	}
	case CRUX_SIM_TOPO_CLOS3: {
		struct crux_sched_clos3_params c = {.n_pods = (int)p->n_pods,
						    .tors_per_pod = (int)p->tors_per_pod,
						    .aggs_per_pod = (int)p->aggs_per_pod,
						    .n_core = (int)p->n_core,
						    .hosts_per_tor = (int)p->hosts_per_tor,
						    .host_gbps = p->host_gbps,
						    .tor_gbps = p->tor_gbps,
						    .agg_gbps = p->agg_gbps};
		st = crux_sched_topo_clos3(&c, &e->topo, &se);
		break;
	}
	case CRUX_SIM_TOPO_LINGJUN: {
		struct crux_sched_lingjun_params l;
		crux_sched_lingjun_defaults(&l);
		l.host_gbps = p->host_gbps;
		l.tor_gbps = p->tor_gbps;
		l.agg_gbps = p->agg_gbps;
		st = crux_sched_topo_lingjun(e->cfg->topo_path, &l, &e->topo, &se);
		break;
	}
	case CRUX_SIM_TOPO_FILE:
		st = crux_sched_topo_load(e->cfg->topo_path, &e->topo, &se);
		break;
	}
	if (st != CRUX_OK)
		snprintf(err, errlen, "topology: %s", se.msg[0] ? se.msg : crux_status_str(st));
	return st;
}

/* Locality group of a host: its lowest-numbered neighbour switch. */
static crux_status_t build_groups(struct sim_engine *e)
{
	int n_nodes = crux_sched_topo_n_nodes(e->topo);
	int *first = malloc((size_t)e->n_hosts * sizeof(*first));
	int *gid = malloc((size_t)n_nodes * sizeof(*gid));
	e->group = calloc(e->n_hosts ? e->n_hosts : 1, sizeof(*e->group));
	if (!first || !gid || !e->group) {
		free(first);
		free(gid);
		return CRUX_ERR_NOMEM;
	}
	for (uint32_t h = 0; h < e->n_hosts; h++)
		first[h] = -1;
	for (int i = 0; i < n_nodes; i++)
		gid[i] = -1;
	for (int l = 0; l < e->n_links; l++) {
		int a, b;
		double bw;
		if (crux_sched_topo_link(e->topo, l, &a, &b, &bw) != CRUX_OK)
			continue;
		if (a >= 0 && (uint32_t)a < e->n_hosts && (first[a] < 0 || b < first[a]))
			first[a] = b;
	}
	e->n_groups = 0;
	for (uint32_t h = 0; h < e->n_hosts; h++) {
		int sw = first[h];
		if (sw < 0) {
			e->group[h] = e->n_groups++; /* an isolated host is its own group */
			continue;
		}
		if (gid[sw] < 0)
			gid[sw] = (int)e->n_groups++;
		e->group[h] = (uint32_t)gid[sw];
	}
	free(first);
	free(gid);
	return CRUX_OK;
}

static enum crux_sched_policy to_sched(enum crux_sim_policy p)
{
	switch (p) {
	case CRUX_SIM_SINCRONIA:
		return CRUX_SCHED_SINCRONIA;
	case CRUX_SIM_TACCL:
		return CRUX_SCHED_TACCL;
	case CRUX_SIM_CRUX_PA:
		return CRUX_SCHED_CRUX_PA;
	case CRUX_SIM_CRUX_PS_PA:
		return CRUX_SCHED_CRUX_PS_PA;
	case CRUX_SIM_CRUX_FULL:
	case CRUX_SIM_DIAG_RANDOM:
	case CRUX_SIM_DIAG_REVERSED:
	case CRUX_SIM_DIAG_ONE_LEVEL:
		return CRUX_SCHED_CRUX_FULL;
	case CRUX_SIM_SINCRONIA_LCP:
	case CRUX_SIM_CASSINI_LCP:
		return CRUX_SCHED_CRUX_PS_PA; /* for its paths; the levels are replaced */
	case CRUX_SIM_ECMP:
	case CRUX_SIM_CASSINI:
	default:
		return CRUX_SCHED_ECMP;
	}
}

void crux_sim_engine_free(struct sim_engine *e)
{
	if (!e)
		return;
	crux_sched_eval_free(e->ev);
	crux_sched_topo_free(e->topo);
	free(e->group);
	free(e->link_bw);
	free(e->link_load);
	free(e->stamp);
	free(e->slot);
	free(e->iter);
	free(e->flows);
	free(e->hosts_int);
	free(e->jl_links);
	free(e->jl_bytes);
	free(e->cj);
	crux_sim_promote_free(e->promote);
	crux_sched_schedule_free(e->last_s);
	crux_sched_jobs_free(&e->last_js);
	free(e);
}

crux_status_t crux_sim_engine_new(const struct crux_sim_config *cfg, struct sim_engine **out,
				  char *err, size_t errlen)
{
	struct sim_engine *e = calloc(1, sizeof(*e));
	crux_status_t st;

	if (!e)
		return CRUX_ERR_NOMEM;
	e->cfg = cfg;
	if (cfg->levels < 1 || cfg->levels > CRUX_SCHED_MAX_LEVELS) {
		snprintf(err, errlen, "levels must be in [1, %d], got %u", CRUX_SCHED_MAX_LEVELS,
			 cfg->levels);
		st = CRUX_ERR_INVAL;
		goto fail;
	}
	if (cfg->tp.channels < 1 || cfg->tp.channels > 64) {
		snprintf(err, errlen, "channels must be in [1, 64], got %u", cfg->tp.channels);
		st = CRUX_ERR_INVAL;
		goto fail;
	}
	if ((st = build_topo(e, err, errlen)) != CRUX_OK)
		goto fail;
	e->n_hosts = (uint32_t)crux_sched_topo_n_hosts(e->topo);
	e->n_links = crux_sched_topo_n_links(e->topo);
	if (!e->n_hosts) {
		snprintf(err, errlen, "topology has no hosts");
		st = CRUX_ERR_INVAL;
		goto fail;
	}
	e->link_bw = calloc((size_t)e->n_links + 1, sizeof(*e->link_bw));
	e->link_load = calloc((size_t)e->n_links + 1, sizeof(*e->link_load));
	e->stamp = calloc((size_t)e->n_links + 1, sizeof(*e->stamp));
	e->slot = calloc((size_t)e->n_links + 1, sizeof(*e->slot));
	if (!e->link_bw || !e->link_load || !e->stamp || !e->slot) {
		st = CRUX_ERR_NOMEM;
		goto fail;
	}
	for (int l = 0; l < e->n_links; l++) {
		int a, b;
		if ((st = crux_sched_topo_link(e->topo, l, &a, &b, &e->link_bw[l])) != CRUX_OK)
			goto fail;
		e->stamp[l] = -1;
	}
	if ((st = build_groups(e)) != CRUX_OK)
		goto fail;
	if ((st = crux_sched_eval_new(&e->ev)) != CRUX_OK)
		goto fail;
	crux_sched_params_default(&e->params);
	e->params.levels = (int)cfg->levels;
	e->params.seed = cfg->seed;
	e->params.max_slowdown = cfg->max_slowdown;
	e->params.guard_enforce_all = cfg->guard_enforce_all;
	e->params.guard_refine = cfg->guard_refine;
	if (cfg->eval_model != CRUX_SCHED_EVAL_PHASE_AWARE &&
	    cfg->eval_model != CRUX_SCHED_EVAL_ALL_AT_ONCE) {
		snprintf(err, errlen, "eval_model %d: expected 0 (phase-aware) or 1 (all-at-once)",
			 cfg->eval_model);
		st = CRUX_ERR_INVAL;
		goto fail;
	}
	e->params.eval_model = (enum crux_sched_eval_model)cfg->eval_model;
	if (cfg->n_weights > 0 && cfg->n_weights != cfg->levels) {
		snprintf(err, errlen,
			 "%u level weights for %u levels: give one weight per level, lowest first",
			 cfg->n_weights, cfg->levels);
		st = CRUX_ERR_INVAL;
		goto fail;
	}
	if (cfg->promote_bound > 0 && (st = crux_sim_promote_new(&e->promote)) != CRUX_OK)
		goto fail;
	e->params.n_weights = (int)cfg->n_weights;
	for (uint32_t l = 0; l < cfg->n_weights; l++)
		e->params.weight[l] = cfg->weight[l];
	e->spol = to_sched(cfg->policy);
	*out = e;
	return CRUX_OK;
fail:
	crux_sim_engine_free(e);
	return st;
}

uint32_t crux_sim_engine_hosts(const struct sim_engine *e)
{
	return e->n_hosts;
}

const uint32_t *crux_sim_engine_host_group(const struct sim_engine *e, uint32_t *n_groups)
{
	*n_groups = e->n_groups;
	return e->group;
}

static crux_status_t grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return CRUX_OK;
	size_t nc = *cap ? *cap : 64;
	while (nc < need)
		nc *= 2;
	void *n = realloc(*p, nc * elem);
	if (!n)
		return CRUX_ERR_NOMEM;
	*p = n;
	*cap = nc;
	return CRUX_OK;
}

/*
 * The scheduler's view of the running jobs: ring all-reduce over the hosts
 * in placement order, 2 (g-1)/g x bytes per hop (g = GPUs, as the
 * scheduler's own ring helper), split into 'channels' flows per hop.
 */
static crux_status_t build_jobs(struct sim_engine *e, const struct sim_active *a, size_t n,
				struct crux_sched_jobs *js)
{
	uint32_t ch = e->cfg->tp.channels;
	crux_status_t st;
	crux_sched_jobs_init(js);
	for (size_t i = 0; i < n; i++) {
		size_t nh = a[i].n_hosts;
		size_t nf = nh > 1 ? nh * ch : 0;
		if ((st = grow((void **)&e->flows, &e->flows_cap, nf + 1, sizeof(*e->flows))) ||
		    (st = grow((void **)&e->hosts_int, &e->hosts_cap, nh + 1, sizeof(int))))
			return st;
		double g = a[i].gpus > nh ? a[i].gpus : (double)nh;
		double per = nh > 1 ? 2.0 * (g - 1) / g * a[i].comm_bytes / ch : 0;
		size_t f = 0;
		for (size_t h = 0; h < nh; h++) {
			e->hosts_int[h] = (int)a[i].hosts[h];
			if (nh < 2 || per <= 0)
				continue;
			for (uint32_t c = 0; c < ch; c++) {
				e->flows[f].src = (int)a[i].hosts[h];
				e->flows[f].dst = (int)a[i].hosts[(h + 1) % nh];
				e->flows[f].bytes = per;
				f++;
			}
		}
		struct crux_sched_job j = {
		    .id = a[i].id,
		    .gpus = (int)a[i].gpus,
		    .n_hosts = (int)nh,
		    .hosts = e->hosts_int,
		    .work = a[i].gpus * a[i].compute_s,
		    .compute = a[i].compute_s,
		    .overlap = a[i].overlap,
		    .iter_time = 0,
		    .iso_time = a[i].iso_s,
		    .slowdown_bound = a[i].bound,
		    .urgent = a[i].urgent,
		    .n_flows = (int)f,
		    .flows = e->flows,
		};
		if ((st = crux_sched_jobs_add(js, &j)) != CRUX_OK)
			return st;
	}
	return CRUX_OK;
}

static int uses_ecmp_paths(enum crux_sim_policy p)
{
	return p == CRUX_SIM_ECMP || p == CRUX_SIM_CASSINI || p == CRUX_SIM_SINCRONIA ||
	       p == CRUX_SIM_CRUX_PA;
}

/*
 * ECMP with channels: every channel has its own source port, so its own
 * hash. The scheduler hashes (seed, job, src, dst); channel c hashes with
 * the seed perturbed by c (channel 0 keeps the scheduler's choice).
 */
static crux_status_t ecmp_channels(struct sim_engine *e, const struct crux_sched_jobs *js,
				   struct crux_sched_schedule *s)
{
	uint32_t ch = e->cfg->tp.channels;
	for (size_t i = 0; i < js->n; i++) {
		const struct crux_sched_job *j = &js->v[i];
		for (int f = 0; f < j->n_flows; f++) {
			struct crux_sched_path_set ps;
			crux_status_t st =
			    crux_sched_topo_paths(e->topo, j->flows[f].src, j->flows[f].dst, &ps);
			if (st != CRUX_OK)
				return st;
			uint64_t c = (uint64_t)f % ch;
			s->d[i].path[f] =
			    crux_sched_ecmp_pick(e->cfg->seed + c * 0x9e3779b97f4a7c15ull, j->id,
						 j->flows[f].src, j->flows[f].dst, ps.n_paths);
		}
	}
	/* Priorities that depend on paths are recomputed on the new ones. */
	crux_status_t st = crux_sched_intensity(e->topo, js->v, js->n, s);
	if (st != CRUX_OK)
		return st;
	if (e->cfg->policy == CRUX_SIM_SINCRONIA) {
		if ((st = crux_sched_prio_sincronia(e->topo, js->v, js->n, s)) != CRUX_OK)
			return st;
		crux_sched_rank(s);
		crux_sched_compress_rank(s);
	} else if (e->cfg->policy == CRUX_SIM_CRUX_PA) {
		if ((st = crux_sched_correction(js->v, js->n, s)) != CRUX_OK)
			return st;
		crux_sched_rank(s);
		crux_sched_compress_rank(s);
	}
	return CRUX_OK;
}

/* Per job: the links it uses and its bytes on each (aggregated over flows). */
static crux_status_t job_links(struct sim_engine *e, const struct crux_sched_job *j,
			       const struct crux_sched_decision *d, int stamp_id, size_t *n_out,
			       double *hop_bytes)
{
	size_t n = 0;
	double hb = 0;
	for (int f = 0; f < j->n_flows; f++) {
		if (d->path[f] < 0)
			continue;
		struct crux_sched_path_set ps;
		crux_status_t st =
		    crux_sched_topo_paths(e->topo, j->flows[f].src, j->flows[f].dst, &ps);
		if (st != CRUX_OK)
			return st;
		if (d->path[f] >= ps.n_paths)
			return CRUX_ERR_RANGE;
		for (int k = ps.off[d->path[f]]; k < ps.off[d->path[f] + 1]; k++) {
			int l = ps.links[k];
			hb += j->flows[f].bytes;
			if (e->stamp[l] != stamp_id) {
				if (n + 1 > e->jl_cap) {
					/* jl_bytes grows in step with jl_links. */
					size_t cap = e->jl_cap;
					if ((st = grow((void **)&e->jl_links, &cap, n + 1,
						       sizeof(*e->jl_links))) != CRUX_OK)
						return st;
					double *nb = realloc(e->jl_bytes, cap * sizeof(*nb));
					if (!nb)
						return CRUX_ERR_NOMEM;
					e->jl_bytes = nb;
					e->jl_cap = cap;
				}
				e->stamp[l] = stamp_id;
				e->slot[l] = (int)n;
				e->jl_links[n] = l;
				e->jl_bytes[n] = 0;
				n++;
			}
			e->jl_bytes[e->slot[l]] += j->flows[f].bytes;
		}
	}
	*n_out = n;
	*hop_bytes = hb;
	return CRUX_OK;
}

/* CASSINI needs every job's link list at once: copy them out per job. */
static crux_status_t eval_cassini(struct sim_engine *e, const struct crux_sched_jobs *js,
				  const struct crux_sched_schedule *s, int stamp_base)
{
	crux_status_t st;
	int **links = calloc(js->n ? js->n : 1, sizeof(*links));
	double **bytes = calloc(js->n ? js->n : 1, sizeof(*bytes));
	if (!links || !bytes) {
		st = CRUX_ERR_NOMEM;
		goto out;
	}
	if ((st = grow((void **)&e->cj, &e->cj_cap, js->n + 1, sizeof(*e->cj))) != CRUX_OK)
		goto out;
	for (size_t i = 0; i < js->n; i++) {
		size_t nl;
		double hb;
		if ((st = job_links(e, &js->v[i], &s->d[i], stamp_base + (int)i, &nl, &hb)))
			goto out;
		links[i] = malloc((nl ? nl : 1) * sizeof(int));
		bytes[i] = malloc((nl ? nl : 1) * sizeof(double));
		if (!links[i] || !bytes[i]) {
			st = CRUX_ERR_NOMEM;
			goto out;
		}
		memcpy(links[i], e->jl_links, nl * sizeof(int));
		memcpy(bytes[i], e->jl_bytes, nl * sizeof(double));
		e->cj[i] = (struct sim_cassini_job){.compute = js->v[i].compute,
						    .overlap = js->v[i].overlap,
						    .n_links = (int)nl,
						    .links = links[i],
						    .bytes = bytes[i]};
	}
	/* Fair sharing on the same paths first (e->iter), then CASSINI's shifts. */
	double util;
	double *fair = malloc((js->n ? js->n : 1) * sizeof(*fair));
	if (!fair) {
		st = CRUX_ERR_NOMEM;
		goto out;
	}
	st = crux_sched_evaluate(e->ev, e->topo, js->v, js->n, s, fair, &util);
	if (st == CRUX_OK)
		st = crux_sim_cassini_eval(e->cj, js->n, e->n_links, e->link_bw, fair, e->iter,
					   NULL);
	free(fair);
out:
	for (size_t i = 0; links && bytes && i < js->n; i++) {
		free(links[i]);
		free(bytes[i]);
	}
	free(links);
	free(bytes);
	return st;
}

static int is_cassini(enum crux_sim_policy p)
{
	return p == CRUX_SIM_CASSINI || p == CRUX_SIM_CASSINI_LCP;
}

/* A uniform draw in [0, 1) fixed by (seed, job id), so that a job keeps its
 * place in the random order across re-plans (splitmix64). */
static double job_draw(uint64_t seed, uint64_t id)
{
	uint64_t z = seed * 0x9e3779b97f4a7c15ull + id + 0x632be59bd9b4e019ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) * 0x1.0p-53;
}

/*
 * The policies that keep Crux's least-congested paths (computed by the
 * scheduler's crux-ps-pa or crux-full run) and replace its levels: a
 * baseline's priorities on equal paths, or a diagnostic order.
 */
static crux_status_t relevel(struct sim_engine *e, enum crux_sim_policy pol,
			     const struct crux_sched_jobs *js, struct crux_sched_schedule *s)
{
	crux_status_t st;

	switch (pol) {
	case CRUX_SIM_SINCRONIA_LCP:
		if ((st = crux_sched_prio_sincronia(e->topo, js->v, js->n, s)) != CRUX_OK)
			return st;
		crux_sched_rank(s);
		crux_sched_compress_rank(s);
		return CRUX_OK;
	case CRUX_SIM_CASSINI_LCP:
	case CRUX_SIM_DIAG_ONE_LEVEL:
		for (size_t i = 0; i < js->n; i++)
			s->d[i].level = 0;
		return CRUX_OK;
	case CRUX_SIM_DIAG_RANDOM:
	case CRUX_SIM_DIAG_REVERSED:
		for (size_t i = 0; i < js->n; i++)
			s->d[i].priority = pol == CRUX_SIM_DIAG_RANDOM
					       ? job_draw(e->cfg->seed, js->v[i].id)
					       : -s->d[i].priority;
		crux_sched_rank(s);
		return crux_sched_compress(e->topo, js->v, js->n, &e->params, s);
	default:
		return CRUX_OK;
	}
}

static crux_status_t run_policy(struct sim_engine *e, const struct crux_sim_config *cfg,
				enum crux_sim_policy pol, enum crux_sched_policy spol,
				const struct crux_sched_jobs *js, struct crux_sched_schedule **out,
				char *err, size_t errlen)
{
	struct crux_sched_schedule *s = NULL;
	crux_status_t st = crux_sched_schedule_new(js->v, js->n, (int)cfg->levels, &s);
	if (st != CRUX_OK)
		goto fail;
	if ((st = crux_sched_run(e->topo, js->v, js->n, &e->params, spol, s)) != CRUX_OK) {
		snprintf(err, errlen, "scheduler policy %s failed: %s",
			 crux_sched_policy_name(spol), crux_status_str(st));
		goto fail;
	}
	if (uses_ecmp_paths(pol) && cfg->tp.channels > 1 &&
	    (st = ecmp_channels(e, js, s)) != CRUX_OK) {
		snprintf(err, errlen, "ECMP over channels failed: %s", crux_status_str(st));
		goto fail;
	}
	if ((st = relevel(e, pol, js, s)) != CRUX_OK) {
		snprintf(err, errlen, "%s's levels failed: %s", crux_sim_policy_name(pol),
			 crux_status_str(st));
		goto fail;
	}
	*out = s;
	return CRUX_OK;
fail:
	crux_sched_schedule_free(s);
	return st;
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

crux_status_t crux_sim_engine_reference(struct sim_engine *e, const struct sim_active *act,
					size_t n_act, struct crux_sim_ref_snap *snap)
{
	const struct crux_sched_jobs *js = &e->last_js;
	const struct crux_sched_schedule *s = e->last_s;
	double eval_util = e->last_util;

	if (!s || js->n != n_act)
		return CRUX_ERR_INVAL;

	struct crux_sched_ref_params rp;
	struct crux_sched_ref_stats rs;
	struct timespec w0, w1;
	size_t n = js->n, m = 0;
	double *Tr = calloc(n ? n : 1, sizeof(double)), *err = calloc(n ? n : 1, sizeof(double));
	crux_status_t st = CRUX_ERR_NOMEM;

	if (!Tr || !err)
		goto out;
	crux_sched_ref_params_default(&rp);
	rp.phases = 1;
	rp.seed = e->cfg->seed;
	rp.horizon_iters = 20;
	rp.warmup_iters = 5;
	rp.max_events = 400000;
	clock_gettime(CLOCK_MONOTONIC, &w0);
	st = crux_sched_reference(e->topo, js->v, n, s, &rp, Tr, &snap->ref_util, &rs);
	clock_gettime(CLOCK_MONOTONIC, &w1);
	if (st)
		goto out;
	snap->wall_s = (double)(w1.tv_sec - w0.tv_sec) + 1e-9 * (double)(w1.tv_nsec - w0.tv_nsec);
	snap->eval_util = eval_util;
	snap->jobs = (uint32_t)n;
	snap->net_jobs = 0;
	snap->starved = 0;
	snap->truncated = rs.truncated > 0;
	snap->slow_eval_max = snap->slow_ref_max = 0;
	snap->held_eval_max = snap->held_ref_max = 0;
	snap->held_above_eval = snap->held_above_ref = 0;
	for (size_t i = 0; i < n; i++) {
		if (js->v[i].n_flows == 0)
			continue;
		snap->net_jobs++;
		if (act[i].iso_s > 0) {
			double se = e->iter[i] / act[i].iso_s, sr = Tr[i] / act[i].iso_s;
			double b = act[i].bound > 0 ? act[i].bound : e->cfg->max_slowdown;

			snap->slow_eval_max = fmax(snap->slow_eval_max, se);
			snap->slow_ref_max = fmax(snap->slow_ref_max, sr);
			if (b > 0 && !s->d[i].infeasible) {
				snap->held_eval_max = fmax(snap->held_eval_max, se);
				snap->held_ref_max = fmax(snap->held_ref_max, sr);
				snap->held_above_eval += se > b * (1 + 1e-6);
				snap->held_above_ref += sr > b * 1.02;
			}
		}
		if (Tr[i] > 0.25 * rs.horizon_s) {
			snap->starved++;
			continue;
		}
		err[m++] = fabs(e->iter[i] - Tr[i]) / Tr[i];
	}
	qsort(err, m, sizeof(double), cmp_dbl);
	snap->iter_err_p50 = m ? err[(m - 1) / 2] : 0;
	snap->iter_err_p90 = m ? err[(size_t)(0.9 * (double)(m - 1) + 0.5)] : 0;
	st = CRUX_OK;
out:
	free(Tr);
	free(err);
	return st;
}

crux_status_t crux_sim_engine_eval(struct sim_engine *e, const struct sim_active *jobs, size_t n,
				   struct sim_eval_out *out, double *link_rate_sum,
				   double *max_load, char *err, size_t errlen)
{
	struct crux_sched_jobs js;
	struct crux_sched_schedule *s = NULL;
	crux_status_t st;
	double util;

	if ((st = build_jobs(e, jobs, n, &js)) != CRUX_OK)
		goto out;
	free(e->iter);
	e->iter = calloc(n ? n : 1, sizeof(*e->iter));
	if (!e->iter) {
		st = CRUX_ERR_NOMEM;
		goto out;
	}
	if ((st = run_policy(e, e->cfg, e->cfg->policy, e->spol, &js, &s, err, errlen)) != CRUX_OK)
		goto out;
	for (size_t i = 0; e->promote && i < n; i++) {
		int l = s->d[i].level + (int)crux_sim_promote_lift(e->promote, jobs[i].id);

		s->d[i].level = l < s->levels ? l : s->levels - 1;
	}
	/* Stamps must differ from every earlier use: reset them per evaluation. */
	for (int l = 0; l < e->n_links; l++) {
		e->stamp[l] = -1;
		e->link_load[l] = 0;
	}
	if (is_cassini(e->cfg->policy))
		st = eval_cassini(e, &js, s, 0);
	else
		st = crux_sched_evaluate(e->ev, e->topo, js.v, js.n, s, e->iter, &util);
	if (st != CRUX_OK) {
		snprintf(err, errlen, "steady-state evaluation failed: %s", crux_status_str(st));
		goto out;
	}
	for (int l = 0; l < e->n_links; l++)
		e->stamp[l] = -1;
	double sum = 0;
	for (size_t i = 0; i < n; i++) {
		size_t nl;
		double hb;
		if (!(e->iter[i] > 0) || !isfinite(e->iter[i])) {
			snprintf(err, errlen, "steady state gave job %u an iteration time of %g s",
				 jobs[i].id, e->iter[i]);
			st = CRUX_ERR_RANGE;
			goto out;
		}
		if ((st = job_links(e, &js.v[i], &s->d[i], (int)i, &nl, &hb)) != CRUX_OK)
			goto out;
		for (size_t k = 0; k < nl; k++)
			e->link_load[e->jl_links[k]] += e->jl_bytes[k] / e->iter[i];
		out[i].iter_s = e->iter[i];
		out[i].hop_bytes = hb;
		if (e->promote && jobs[i].iso_s > 0 &&
		    (st = crux_sim_promote_update(e->promote, jobs[i].id,
						  e->iter[i] / jobs[i].iso_s, e->cfg->promote_bound,
						  (uint32_t)s->levels)) != CRUX_OK)
			goto out;
		out[i].level = e->cfg->policy == CRUX_SIM_ECMP || is_cassini(e->cfg->policy)
				   ? -1
				   : s->d[i].level;
		out[i].infeasible = s->d[i].infeasible;
	}
	double mx = 0;
	for (int l = 0; l < e->n_links; l++) {
		sum += e->link_load[l];
		double ld = e->link_load[l] / e->link_bw[l];
		mx = ld > mx ? ld : mx;
	}
	*link_rate_sum = sum;
	*max_load = mx;
	st = CRUX_OK;
	/* Keep the plan in force for reference snapshots. */
	crux_sched_schedule_free(e->last_s);
	crux_sched_jobs_free(&e->last_js);
	e->last_s = NULL;
	if (!is_cassini(e->cfg->policy)) {
		e->last_s = s;
		e->last_js = js;
		e->last_util = util;
		return CRUX_OK;
	}
out:
	crux_sched_schedule_free(s);
	crux_sched_jobs_free(&js);
	return st;
}

crux_status_t crux_sim_engine_plan(struct sim_engine *e, const struct sim_active *jobs, size_t n,
				   struct crux_sched_schedule **out, char *err, size_t errlen)
{
	struct crux_sched_jobs js;
	crux_status_t st = build_jobs(e, jobs, n, &js);

	*out = NULL;
	if (st == CRUX_OK)
		st = run_policy(e, e->cfg, e->cfg->policy, e->spol, &js, out, err, errlen);
	crux_sched_jobs_free(&js);
	return st;
}

crux_status_t crux_sim_engine_isolated(struct sim_engine *e, const struct sim_active *job,
				       double *iter_s, char *err, size_t errlen)
{
	struct crux_sched_jobs js;
	struct crux_sched_schedule *s = NULL;
	double it = 0, util;
	crux_status_t st;

	if ((st = build_jobs(e, job, 1, &js)) != CRUX_OK)
		goto out;
	/* Alone: the least congested paths (no other job to contend with). */
	if ((st = run_policy(e, e->cfg, CRUX_SIM_CRUX_PS_PA, CRUX_SCHED_CRUX_PS_PA, &js, &s, err,
			     errlen)) != CRUX_OK)
		goto out;
	if ((st = crux_sched_evaluate(e->ev, e->topo, js.v, js.n, s, &it, &util)) != CRUX_OK) {
		snprintf(err, errlen, "isolated evaluation of job %u failed: %s", job->id,
			 crux_status_str(st));
		goto out;
	}
	*iter_s = it;
out:
	crux_sched_schedule_free(s);
	crux_sched_jobs_free(&js);
	return st;
}

void crux_sim_engine_group_rates(const struct sim_engine *e, uint32_t q, double *host_bw,
				 double *up_bw)
{
	int sw = -1;

	*host_bw = 0;
	*up_bw = 0;
	/* The group's switch: the lowest neighbour of its hosts (build_groups). */
	for (int l = 0; l < e->n_links; l++) {
		int a, b;
		double bw;
		if (crux_sched_topo_link(e->topo, l, &a, &b, &bw) != CRUX_OK || a < 0 ||
		    (uint32_t)a >= e->n_hosts || e->group[a] != q)
			continue;
		*host_bw = bw > *host_bw ? bw : *host_bw;
		if (sw < 0 || b < sw)
			sw = b;
	}
	for (int l = 0; sw >= 0 && l < e->n_links; l++) {
		int a, b;
		double bw;
		if (crux_sched_topo_link(e->topo, l, &a, &b, &bw) == CRUX_OK && a == sw && b >= 0 &&
		    (uint32_t)b >= e->n_hosts)
			*up_bw += bw;
	}
}
