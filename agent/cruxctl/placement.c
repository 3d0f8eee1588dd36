/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cruxctl placement: what a placement scheduler (a Kubernetes scheduler
 * plugin, Slurm) needs to know of each job on this host: how much of its
 * iteration it computes, how much it waits on the network and inside the
 * host, its GPU intensity and its bytes per iteration by host pair. Schema
 * "crux.placement/1", documented in agent/README.md.
 */
#include <stdlib.h>
#include <string.h>

#include "placement.h"

void cc_json_stalls(struct crux_json *j, const struct crux_prof_stalls *s)
{
	if (!s->valid) {
		crux_json_null(j);
		return;
	}
	crux_json_obj(j);
	crux_json_key(j, "compute");
	crux_json_num(j, s->compute);
	crux_json_key(j, "interconnect");
	crux_json_num(j, s->interconnect);
	crux_json_key(j, "network");
	if (s->net_known)
		crux_json_num(j, s->network);
	else
		crux_json_null(j);
	crux_json_key(j, "other");
	crux_json_num(j, s->other);
	crux_json_key(j, "net_known");
	crux_json_bool(j, s->net_known);
	crux_json_end_obj(j);
}

void cc_fmt_stalls(const struct crux_prof_stalls *s, char *buf, size_t len)
{
	char net[16];

	if (!s->valid) {
		snprintf(buf, len, "-");
		return;
	}
	if (s->net_known)
		snprintf(net, sizeof(net), "%.1f%%", 100 * s->network);
	else
		snprintf(net, sizeof(net), "-");
	snprintf(buf, len, "compute %.1f%%  interconnect %.1f%%  network %s  other %.1f%%",
		 100 * s->compute, 100 * s->interconnect, net, 100 * s->other);
}

/* Every record the view has: v1 files and the agent's copies of attached ones. */
static const struct crux_prof_snapshot *rec_at(const struct view *v, size_t i)
{
	return i < v->nrecs ? &v->recs[i] : &v->arecs[i - v->nrecs];
}

void cc_job_stalls(const struct view *v, uint64_t key, const struct cruxd_status_job *aj,
		   struct crux_prof_stalls *out)
{
	struct crux_prof_stalls sum;
	uint32_t n = 0, nnet = 0;

	memset(out, 0, sizeof(*out));
	if (aj) {
		out->valid = aj->stalls_valid;
		out->net_known = aj->stalls_net_known;
		out->iter_s = aj->iter_time_s;
		out->compute = aj->frac_compute;
		out->interconnect = aj->frac_interconnect;
		out->network = aj->frac_network;
		out->other = aj->frac_other;
		return;
	}
	memset(&sum, 0, sizeof(sum));
	for (size_t i = 0; i < v->nrecs + v->narecs; i++) {
		const struct crux_prof_snapshot *s = rec_at(v, i);
		struct crux_prof_stalls r;

		if (s->id.job_key != key)
			continue;
		crux_prof_stalls_of(&s->compute, s->has_compute, &s->net, s->has_net, &r);
		if (!r.valid)
			continue;
		n++;
		nnet += r.net_known;
		sum.iter_s += r.iter_s;
		sum.compute += r.compute;
		sum.interconnect += r.interconnect;
		sum.network += r.network;
		sum.other += r.other;
	}
	if (!n)
		return;
	out->valid = true;
	out->net_known = nnet == n;
	out->iter_s = sum.iter_s / n;
	out->compute = sum.compute / n;
	out->interconnect = sum.interconnect / n;
	out->network = sum.network / n;
	out->other = sum.other / n;
}

/* ---- one job's sensitivity, from the agent or from the records ---- */

#define MAX_PAIRS 64

struct pair {
	struct crux_addr src, dst;
	double bytes;
};

struct sens {
	uint64_t key;
	char id[CRUX_JOB_ID_LEN];
	const char *source; /* "agent" or "records" */
	uint32_t ranks, nhosts;
	struct crux_addr hosts[CRUXD_STATUS_JOB_HOSTS];
	double iter_s;
	bool have_intensity;
	double intensity;
	struct crux_prof_stalls st;
	double bytes; /* per iteration, all pairs */
	uint32_t npairs;
	struct pair pairs[MAX_PAIRS];
};

static void add_host(struct sens *s, const struct crux_addr *a)
{
	if (!a->family)
		return;
	for (uint32_t i = 0; i < s->nhosts; i++)
		if (crux_addr_equal(&s->hosts[i], a))
			return;
	if (s->nhosts < CRUXD_STATUS_JOB_HOSTS)
		s->hosts[s->nhosts++] = *a;
}

static void add_pair(struct sens *s, const struct crux_addr *src, const struct crux_addr *dst,
		     double bytes)
{
	s->bytes += bytes;
	for (uint32_t i = 0; i < s->npairs; i++)
		if (crux_addr_equal(&s->pairs[i].src, src) &&
		    crux_addr_equal(&s->pairs[i].dst, dst)) {
			s->pairs[i].bytes += bytes;
			return;
		}
	if (s->npairs < MAX_PAIRS)
		s->pairs[s->npairs++] = (struct pair){*src, *dst, bytes};
}

static int pair_desc(const void *x, const void *y)
{
	const struct pair *a = x, *b = y;
	return (a->bytes < b->bytes) - (a->bytes > b->bytes);
}

static void from_agent(const struct view *v, const struct cruxd_status_job *aj, struct sens *s)
{
	s->key = aj->job_key;
	snprintf(s->id, sizeof(s->id), "%.*s", (int)sizeof(aj->job_id) - 1, aj->job_id);
	s->source = "agent";
	s->ranks = aj->nranks;
	for (uint32_t h = 0; h < aj->nhosts && h < CRUXD_STATUS_JOB_HOSTS; h++)
		add_host(s, &aj->hosts[h]);
	s->iter_s = aj->iter_time_s;
	s->have_intensity = aj->state == CRUX_JOB_SCHEDULED && aj->intensity > 0;
	s->intensity = aj->intensity;
	cc_job_stalls(v, aj->job_key, aj, &s->st);
	for (uint8_t p = 0; p < aj->npeer_bytes && p < CRUXD_STATUS_JOB_PEERS; p++)
		add_pair(s, &aj->peer_bytes[p].src, &aj->peer_bytes[p].dst,
			 aj->peer_bytes[p].bytes_per_iter);
}

/* Without an agent: each record's bytes sent to a peer host over its iterations so far. */
static void from_records(const struct view *v, uint64_t key, struct sens *s)
{
	uint32_t nc = 0;

	s->key = key;
	s->source = "records";
	for (size_t i = 0; i < v->nrecs + v->narecs; i++) {
		const struct crux_prof_snapshot *r = rec_at(v, i);
		struct crux_addr self;

		if (r->id.job_key != key)
			continue;
		if (!s->id[0])
			snprintf(s->id, sizeof(s->id), "%s", r->id.job_id);
		s->ranks++;
		self = r->id.host_addr.family ? r->id.host_addr : r->net.local_addr;
		add_host(s, &self);
		if (r->has_compute) {
			s->iter_s += r->compute.iter_time_s;
			nc++;
		}
		if (!r->has_net || !r->has_compute || !r->compute.total_iterations)
			continue;
		for (uint32_t p = 0; p < r->net.npeers && p < CRUX_PROF_MAX_PEERS; p++) {
			uint64_t tx = 0;
			if (crux_addr_equal(&r->net.peers[p].peer, &self))
				continue; /* inside the host */
			for (int l = 0; l < CRUX_MAX_LEVELS; l++)
				tx += r->net.peers[p].tx_bytes[l];
			add_pair(s, &self, &r->net.peers[p].peer,
				 (double)tx / (double)r->compute.total_iterations);
		}
	}
	if (nc)
		s->iter_s /= nc;
	cc_job_stalls(v, key, NULL, &s->st);
}

static const struct cruxd_status_job *agent_job(const struct view *v, uint64_t key)
{
	if (v->agent_st != CRUX_OK)
		return NULL;
	for (uint32_t i = 0; i < v->agent->njobs && i < CRUXD_STATUS_MAX_JOBS; i++)
		if (v->agent->jobs[i].job_key == key)
			return &v->agent->jobs[i];
	return NULL;
}

/* Jobs: the agent's, then those only the records name. Returns a malloc'd array. */
static struct sens *collect(const struct view *v, size_t *n_out)
{
	size_t cap = (v->agent_st == CRUX_OK ? v->agent->njobs : 0) + v->nrecs + v->narecs + 1;
	struct sens *out = calloc(cap, sizeof(*out));
	size_t n = 0;

	if (!out) {
		*n_out = 0;
		return NULL;
	}
	if (v->agent_st == CRUX_OK)
		for (uint32_t i = 0; i < v->agent->njobs && i < CRUXD_STATUS_MAX_JOBS; i++)
			from_agent(v, &v->agent->jobs[i], &out[n++]);
	for (size_t i = 0; i < v->nrecs + v->narecs; i++) {
		uint64_t key = rec_at(v, i)->id.job_key;
		bool seen = key == 0;
		for (size_t q = 0; q < n && !seen; q++)
			seen = out[q].key == key;
		if (!seen && !agent_job(v, key))
			from_records(v, key, &out[n++]);
	}
	for (size_t i = 0; i < n; i++)
		qsort(out[i].pairs, out[i].npairs, sizeof(out[i].pairs[0]), pair_desc);
	*n_out = n;
	return out;
}

static void json_addr_(struct crux_json *j, const struct crux_addr *a)
{
	char b[CRUX_ADDR_STRLEN];
	if (!a->family) {
		crux_json_null(j);
		return;
	}
	crux_addr_format(a, b, sizeof(b));
	crux_json_str(j, b);
}

void cc_placement_json(const struct view *v, struct crux_json *j)
{
	size_t n;
	struct sens *s = collect(v, &n);
	char key[24];

	crux_json_obj(j);
	crux_json_key(j, "schema");
	crux_json_str(j, "crux.placement/1");
	crux_json_key(j, "host");
	if (v->agent_st == CRUX_OK && v->agent->host[0])
		crux_json_str(j, v->agent->host);
	else
		crux_json_null(j);
	crux_json_key(j, "agent");
	crux_json_bool(j, v->agent_alive);
	crux_json_key(j, "jobs");
	crux_json_arr(j);
	for (size_t i = 0; i < n; i++) {
		const struct sens *x = &s[i];
		crux_json_obj(j);
		crux_json_key(j, "id");
		crux_json_str(j, x->id);
		crux_json_key(j, "key");
		snprintf(key, sizeof(key), "0x%016llx", (unsigned long long)x->key);
		crux_json_str(j, key);
		crux_json_key(j, "source");
		crux_json_str(j, x->source);
		crux_json_key(j, "ranks");
		crux_json_u64(j, x->ranks);
		crux_json_key(j, "hosts");
		crux_json_arr(j);
		for (uint32_t h = 0; h < x->nhosts; h++)
			json_addr_(j, &x->hosts[h]);
		crux_json_end_arr(j);
		crux_json_key(j, "iter_time_s");
		if (x->st.valid || x->iter_s > 0)
			crux_json_num(j, x->iter_s);
		else
			crux_json_null(j);
		crux_json_key(j, "gpu_intensity");
		if (x->have_intensity)
			crux_json_num(j, x->intensity);
		else
			crux_json_null(j);
		crux_json_key(j, "compute_fraction");
		if (x->st.valid)
			crux_json_num(j, x->st.compute);
		else
			crux_json_null(j);
		crux_json_key(j, "network_stall_fraction");
		if (x->st.valid && x->st.net_known)
			crux_json_num(j, x->st.network);
		else
			crux_json_null(j);
		crux_json_key(j, "interconnect_stall_fraction");
		if (x->st.valid)
			crux_json_num(j, x->st.interconnect);
		else
			crux_json_null(j);
		crux_json_key(j, "other_fraction");
		if (x->st.valid)
			crux_json_num(j, x->st.other);
		else
			crux_json_null(j);
		crux_json_key(j, "bytes_per_iter");
		crux_json_num(j, x->bytes);
		crux_json_key(j, "peers");
		crux_json_arr(j);
		for (uint32_t p = 0; p < x->npairs; p++) {
			crux_json_obj(j);
			crux_json_key(j, "src");
			json_addr_(j, &x->pairs[p].src);
			crux_json_key(j, "dst");
			json_addr_(j, &x->pairs[p].dst);
			crux_json_key(j, "bytes_per_iter");
			crux_json_num(j, x->pairs[p].bytes);
			crux_json_end_obj(j);
		}
		crux_json_end_arr(j);
		crux_json_end_obj(j);
	}
	crux_json_end_arr(j);
	crux_json_end_obj(j);
	free(s);
}

void cc_placement_text(const struct view *v, FILE *f)
{
	size_t n;
	struct sens *s = collect(v, &n);

	fprintf(f, "%-24s %-7s %5s %8s %9s %8s %8s %8s %8s %12s  %s\n", "JOB", "SOURCE", "RANKS",
		"ITER(s)", "I", "COMPUTE", "NETWORK", "INTRA", "OTHER", "BYTES/ITER",
		"TOP PEERS dst:bytes/iter");
	for (size_t i = 0; i < n; i++) {
		const struct sens *x = &s[i];
		char I[16] = "-", cp[16] = "-", nw[16] = "-", ic[16] = "-", ot[16] = "-";
		char peers[160] = "";
		size_t pl = 0;

		if (x->have_intensity)
			snprintf(I, sizeof(I), "%.3g", x->intensity);
		if (x->st.valid) {
			snprintf(cp, sizeof(cp), "%.1f%%", 100 * x->st.compute);
			snprintf(ic, sizeof(ic), "%.1f%%", 100 * x->st.interconnect);
			snprintf(ot, sizeof(ot), "%.1f%%", 100 * x->st.other);
			if (x->st.net_known)
				snprintf(nw, sizeof(nw), "%.1f%%", 100 * x->st.network);
		}
		for (uint32_t p = 0; p < x->npairs && p < 3 && pl < sizeof(peers) - 1; p++) {
			char d[CRUX_ADDR_STRLEN];
			crux_addr_format(&x->pairs[p].dst, d, sizeof(d));
			int w = snprintf(peers + pl, sizeof(peers) - pl, "%s%s:%.3g", p ? " " : "",
					 d, x->pairs[p].bytes);
			if (w < 0)
				break;
			pl += (size_t)w;
		}
		fprintf(f, "%-24.24s %-7s %5u %8.3f %9s %8s %8s %8s %8s %12.4g  %s\n",
			x->id[0] ? x->id : "-", x->source, x->ranks, x->iter_s, I, cp, nw, ic, ot,
			x->bytes, peers[0] ? peers : "-");
	}
	free(s);
}
