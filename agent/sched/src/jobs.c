/* SPDX-License-Identifier: Apache-2.0 */
/* Jobs: container, ring all-reduce traffic, jobs file parser. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crux/env.h"
#include "sched_int.h"

void crux_sched_jobs_init(struct crux_sched_jobs *js)
{
	memset(js, 0, sizeof(*js));
}

void crux_sched_jobs_free(struct crux_sched_jobs *js)
{
	for (size_t i = 0; i < js->n; i++) {
		free(js->v[i].hosts);
		free(js->v[i].flows);
	}
	free(js->v);
	free(js->id_tab);
	memset(js, 0, sizeof(*js));
}

static size_t id_slot(const struct crux_sched_jobs *js, uint64_t id)
{
	size_t m = js->id_cap - 1;

	for (size_t h = (size_t)crux_sched_mix64(id) & m;; h = (h + 1) & m)
		if (!js->id_tab[h] || js->id_tab[h] > js->n || js->v[js->id_tab[h] - 1].id == id)
			return h;
}

static crux_status_t id_grow(struct crux_sched_jobs *js, size_t need)
{
	if (2 * need <= js->id_cap)
		return CRUX_OK;
	size_t nc = js->id_cap ? js->id_cap : 64;

	while (nc < 2 * need)
		nc *= 2;
	size_t *nt = calloc(nc, sizeof(size_t));

	if (!nt)
		return CRUX_ERR_NOMEM;
	free(js->id_tab);
	js->id_tab = nt;
	js->id_cap = nc;
	for (size_t i = 0; i < js->n; i++)
		js->id_tab[id_slot(js, js->v[i].id)] = i + 1;
	return CRUX_OK;
}

crux_status_t crux_sched_jobs_add(struct crux_sched_jobs *js, const struct crux_sched_job *job)
{
	struct crux_sched_job j = *job;

	if (job->n_hosts < 0 || job->n_flows < 0)
		return CRUX_ERR_INVAL;
	if (id_grow(js, js->n + 1))
		return CRUX_ERR_NOMEM;
	if (js->id_tab[id_slot(js, job->id)])
		return CRUX_ERR_EXIST;
	if (js->n == js->cap) {
		size_t nc = js->cap ? js->cap * 2 : 16;
		struct crux_sched_job *nv = realloc(js->v, nc * sizeof(*nv));

		if (!nv)
			return CRUX_ERR_NOMEM;
		js->v = nv;
		js->cap = nc;
	}
	j.hosts = malloc((size_t)(job->n_hosts ? job->n_hosts : 1) * sizeof(int));
	j.flows = malloc((size_t)(job->n_flows ? job->n_flows : 1) * sizeof(*j.flows));
	if (!j.hosts || !j.flows) {
		free(j.hosts);
		free(j.flows);
		return CRUX_ERR_NOMEM;
	}
	if (job->n_hosts)
		memcpy(j.hosts, job->hosts, (size_t)job->n_hosts * sizeof(int));
	if (job->n_flows)
		memcpy(j.flows, job->flows, (size_t)job->n_flows * sizeof(*j.flows));
	js->v[js->n++] = j;
	js->id_tab[id_slot(js, j.id)] = js->n;
	return CRUX_OK;
}

static crux_status_t add_flow(struct crux_sched_job *j, int src, int dst, double bytes)
{
	for (int f = 0; f < j->n_flows; f++) {
		if (j->flows[f].src == src && j->flows[f].dst == dst) {
			j->flows[f].bytes += bytes;
			return CRUX_OK;
		}
	}
	struct crux_sched_flow *nf = realloc(j->flows, (size_t)(j->n_flows + 1) * sizeof(*nf));

	if (!nf)
		return CRUX_ERR_NOMEM;
	j->flows = nf;
	j->flows[j->n_flows].src = src;
	j->flows[j->n_flows].dst = dst;
	j->flows[j->n_flows].bytes = bytes;
	j->n_flows++;
	return CRUX_OK;
}

crux_status_t crux_sched_jobs_add_ring(struct crux_sched_jobs *js, size_t idx, double bytes)
{
	struct crux_sched_job *j;

	if (idx >= js->n || !isfinite(bytes) || bytes < 0)
		return CRUX_ERR_INVAL;
	j = &js->v[idx];
	if (j->n_hosts < 2 || bytes == 0)
		return CRUX_OK;
	double g = j->gpus > j->n_hosts ? j->gpus : j->n_hosts;
	double per = 2.0 * (g - 1.0) / g * bytes;

	for (int h = 0; h < j->n_hosts; h++) {
		int a = j->hosts[h], b = j->hosts[(h + 1) % j->n_hosts];
		crux_status_t st;

		if (a == b)
			continue;
		st = add_flow(j, a, b, per);
		if (st)
			return st;
	}
	return CRUX_OK;
}

double crux_sched_overlap_from_times(double compute, double comm, double iter)
{
	if (!(compute > 0) || !isfinite(iter) || !isfinite(comm))
		return 0;
	double o = 1.0 - (iter - comm) / compute;

	return o < 0 ? 0 : o > 1 ? 1 : o;
}

/* ---- parser ---- */

/* Numbers of the jobs file, by the base's strict parsers (ids also in 0x hex). */
static int parse_u64(const char *s, uint64_t *out)
{
	return crux_parse_u64("jobs", s, 0, UINT64_MAX, out, NULL, 0) == CRUX_OK ? 0 : -1;
}

static int parse_num(const char *s, double *out)
{
	return crux_parse_double("jobs", s, -DBL_MAX, DBL_MAX, out, NULL, 0) == CRUX_OK ? 0 : -1;
}

struct pjob {
	int line;
	double ring;
};

static int host_of(struct crux_sched_topo *t, const char *name)
{
	int v = crux_sched_topo_find(t, name);

	return v >= 0 && v < crux_sched_topo_n_hosts(t) ? v : v >= 0 ? -2 : -1;
}

#define PERR(...)                                                                                  \
	do {                                                                                       \
		crux_sched_errf(err, __VA_ARGS__);                                                 \
		st = CRUX_ERR_INVAL;                                                               \
		goto out;                                                                          \
	} while (0)

crux_status_t crux_sched_jobs_parse(const char *text, size_t len, const char *name,
				    struct crux_sched_topo *t, struct crux_sched_jobs *out,
				    struct crux_sched_err *err)
{
	struct crux_sched_jobs js;
	struct pjob *pj = NULL;
	int *flow_line = NULL;
	char *buf = NULL;
	char **tok = NULL;
	int *hosts = NULL;
	crux_status_t st = CRUX_ERR_NOMEM;
	int lineno = 0, nh_cap = 0;

	crux_sched_jobs_init(&js);
	buf = malloc(len + 1);
	tok = malloc(MAX_TOKENS * sizeof(*tok));
	if (!buf || !tok)
		goto nomem;
	memcpy(buf, text, len);
	buf[len] = '\0';
	if (memchr(buf, '\0', len))
		PERR("%s: contains a NUL byte; the jobs file is a text file", name);
	for (char *line = buf, *next; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		lineno++;
		int nt = crux_sched_split_tokens(line, tok, MAX_TOKENS);

		if (nt < 0)
			PERR("%s:%d: too many fields (max %d)", name, lineno, MAX_TOKENS);
		if (nt == 0)
			continue;
		if (!strcmp(tok[0], "job")) {
			struct crux_sched_job j = {0};
			double ring = 0;
			int have_hosts = 0, have_compute = 0, have_work = 0, have_gpus = 0;

			if (nt < 2 || parse_u64(tok[1], &j.id))
				PERR("%s:%d: field 'id': expected 'job ID key=value...' with an "
				     "unsigned integer ID",
				     name, lineno);
			if (js.id_cap && js.id_tab[id_slot(&js, j.id)]) {
				size_t first = js.id_tab[id_slot(&js, j.id)] - 1;

				PERR("%s:%d: field 'id': duplicate job id %llu (first on line %d)",
				     name, lineno, (unsigned long long)j.id, pj[first].line);
			}
			for (int i = 2; i < nt; i++) {
				char *eq = strchr(tok[i], '=');
				double v;

				if (!eq || eq == tok[i])
					PERR("%s:%d: field %d: expected key=value, got '%s'", name,
					     lineno, i, tok[i]);
				*eq = '\0';
				const char *key = tok[i], *val = eq + 1;

				if (!strcmp(key, "hosts")) {
					char *p = (char *)val, *c;

					j.n_hosts = 0;
					for (;;) {
						c = strchr(p, ',');
						if (c)
							*c = '\0';
						int h = host_of(t, p);

						if (h == -1)
							PERR("%s:%d: field 'hosts': unknown host "
							     "'%s'; it is not in the topology",
							     name, lineno, p);
						if (h == -2)
							PERR("%s:%d: field 'hosts': '%s' is a "
							     "switch, not a host",
							     name, lineno, p);
						for (int k = 0; k < j.n_hosts; k++)
							if (hosts[k] == h)
								PERR("%s:%d: field 'hosts': host "
								     "'%s' listed twice",
								     name, lineno, p);
						if (j.n_hosts == nh_cap) {
							int nc = nh_cap ? nh_cap * 2 : 64;
							int *nhp = realloc(hosts, (size_t)nc *
										      sizeof(int));

							if (!nhp)
								goto nomem;
							hosts = nhp;
							nh_cap = nc;
						}
						hosts[j.n_hosts++] = h;
						if (!c)
							break;
						p = c + 1;
					}
					have_hosts = 1;
					continue;
				}
				if (!strcmp(key, "gpus")) {
					uint64_t g;

					if (parse_u64(val, &g) || g < 1 || g > 1000000)
						PERR("%s:%d: field 'gpus': '%s' must be an integer "
						     "in 1..1000000",
						     name, lineno, val);
					j.gpus = (int)g;
					have_gpus = 1;
					continue;
				}
				if (!strcmp(key, "steps")) {
					uint64_t g;

					if (parse_u64(val, &g) || g < 1 || g > CRUX_SCHED_MAX_STEPS)
						PERR(
						    "%s:%d: field 'steps': '%s' must be an integer "
						    "in 1..%d (dependent steps per iteration)",
						    name, lineno, val, CRUX_SCHED_MAX_STEPS);
					j.steps = (int)g;
					continue;
				}
				if (parse_num(val, &v) || v < 0)
					PERR("%s:%d: field '%s': '%s' must be a finite number >= 0",
					     name, lineno, key, val);
				if (!strcmp(key, "compute")) {
					j.compute = v;
					have_compute = 1;
				} else if (!strcmp(key, "work")) {
					j.work = v;
					have_work = 1;
				} else if (!strcmp(key, "overlap")) {
					if (v > 1)
						PERR("%s:%d: field 'overlap': '%s' must be in 0..1",
						     name, lineno, val);
					j.overlap = v;
				} else if (!strcmp(key, "iter")) {
					j.iter_time = v;
				} else if (!strcmp(key, "allreduce")) {
					ring = v;
				} else {
					PERR("%s:%d: field '%s': unknown key; expected hosts, "
					     "gpus, compute, work, overlap, iter, allreduce or "
					     "steps",
					     name, lineno, key);
				}
			}
			if (!have_hosts)
				PERR("%s:%d: field 'hosts': missing (hosts=NAME,NAME,...)", name,
				     lineno);
			if (!have_compute)
				PERR("%s:%d: field 'compute': missing (compute time per iteration, "
				     "s)",
				     name, lineno);
			if (!have_gpus)
				j.gpus = 8 * j.n_hosts;
			if (j.gpus < j.n_hosts)
				PERR("%s:%d: field 'gpus': %d GPUs cannot span %d hosts", name,
				     lineno, j.gpus, j.n_hosts);
			if (!have_work)
				j.work = j.gpus * j.compute;
			j.hosts = hosts;
			st = crux_sched_jobs_add(&js, &j);
			if (st)
				goto nomem;
			struct pjob *np = realloc(pj, js.n * sizeof(*np));

			if (!np)
				goto nomem;
			pj = np;
			pj[js.n - 1].line = lineno;
			pj[js.n - 1].ring = ring;
			if (ring > 0) {
				st = crux_sched_jobs_add_ring(&js, js.n - 1, ring);
				if (st)
					goto nomem;
			}
		} else if (!strcmp(tok[0], "flow")) {
			uint64_t id;
			double bytes;
			size_t ji;
			int a, b;

			if (nt != 5)
				PERR("%s:%d: malformed flow line; expected 'flow JOBID SRC DST "
				     "BYTES'",
				     name, lineno);
			if (parse_u64(tok[1], &id))
				PERR("%s:%d: field 'job': '%s' is not a job id", name, lineno,
				     tok[1]);
			ji = js.id_cap && js.id_tab[id_slot(&js, id)]
				 ? js.id_tab[id_slot(&js, id)] - 1
				 : js.n;
			if (ji == js.n)
				PERR("%s:%d: field 'job': job %llu is not defined above this line",
				     name, lineno, (unsigned long long)id);
			a = host_of(t, tok[2]);
			b = host_of(t, tok[3]);
			if (a < 0 || b < 0)
				PERR("%s:%d: field '%s': unknown host '%s'", name, lineno,
				     a < 0 ? "src" : "dst", a < 0 ? tok[2] : tok[3]);
			if (a == b)
				PERR("%s:%d: field 'dst': flow from '%s' to itself; intra-host "
				     "traffic is not scheduled",
				     name, lineno, tok[2]);
			int in_a = 0, in_b = 0;

			for (int k = 0; k < js.v[ji].n_hosts; k++) {
				in_a |= js.v[ji].hosts[k] == a;
				in_b |= js.v[ji].hosts[k] == b;
			}
			if (!in_a || !in_b)
				PERR("%s:%d: field '%s': host '%s' is not one of job %llu's hosts",
				     name, lineno, !in_a ? "src" : "dst", !in_a ? tok[2] : tok[3],
				     (unsigned long long)id);
			if (parse_num(tok[4], &bytes) || bytes < 0)
				PERR("%s:%d: field 'bytes': '%s' must be a finite number >= 0",
				     name, lineno, tok[4]);
			st = add_flow(&js.v[ji], a, b, bytes);
			if (st)
				goto nomem;
		} else {
			PERR("%s:%d: unknown keyword '%s'; expected job or flow", name, lineno,
			     tok[0]);
		}
	}
	/* Every flow needs a route: report the job's line otherwise. */
	for (size_t i = 0; i < js.n; i++) {
		for (int f = 0; f < js.v[i].n_flows; f++) {
			struct crux_sched_path_set ps;
			const struct crux_sched_flow *fl = &js.v[i].flows[f];

			st = crux_sched_topo_paths(t, fl->src, fl->dst, &ps);
			if (st == CRUX_ERR_NOENT)
				PERR("%s:%d: field 'hosts': host '%s' is unreachable from '%s' in "
				     "the topology",
				     name, pj[i].line, crux_sched_topo_node_name(t, fl->dst),
				     crux_sched_topo_node_name(t, fl->src));
			if (st)
				goto nomem;
		}
	}
	*out = js;
	crux_sched_jobs_init(&js);
	st = CRUX_OK;
	goto out;
nomem:
	crux_sched_errf(err, "%s: out of memory", name);
	st = CRUX_ERR_NOMEM;
out:
	crux_sched_jobs_free(&js);
	free(pj);
	free(flow_line);
	free(buf);
	free(tok);
	free(hosts);
	return st;
}

crux_status_t crux_sched_jobs_load(const char *path, struct crux_sched_topo *t,
				   struct crux_sched_jobs *out, struct crux_sched_err *err)
{
	char *text;
	size_t len;
	crux_status_t st = crux_sched_read_file_text(path, &text, &len, err);

	if (st)
		return st;
	st = crux_sched_jobs_parse(text, len, path, t, out, err);
	free(text);
	return st;
}
