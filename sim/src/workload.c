/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Seeded workload generator. The assumptions, all of them here:
 *
 * - Per-iteration compute = FLOPs per sample (forward + backward, ~6 x
 *   parameters x tokens for transformers, 3 x forward FLOPs for CNNs) x batch
 *   per GPU / (GPU peak x model FLOP utilisation). Data parallelism: every GPU
 *   of a job computes its micro-batch at the same time.
 * - Per-iteration communication = fp16 gradients of the dense parameters
 *   (2 bytes each), all-reduced across the job's hosts, plus, for the
 *   recommendation models, the embedding-gradient rows touched by one host's
 *   samples (sparse bytes per sample x batch per GPU x GPUs on the host).
 * - Overlap: the fraction of compute (backward pass) that bucketed gradient
 *   exchange can run alongside; recommendation models exchange embeddings
 *   after the backward pass, so they overlap little.
 * - Job sizes: each model has a few GPU counts it is trained on; smaller ones
 *   are more frequent (weights 1, 0.7, 0.5, 0.35, 0.25, 0.18).
 * - Arrivals: Poisson over the span. Durations: log-normal isolated duration
 *   (median and shape as parameters, clamped to [5 min, 3 days]), then all
 *   scaled by one factor so that the offered load (GPU-time asked for over
 *   GPU-time available) equals the target; a job's iteration count is its
 *   duration over its isolated iteration time estimated with the host
 *   bandwidth (ring all-reduce moves 2 (H-1)/H x bytes per host).
 * - Placement is not in the generated trace: the simulator places jobs when
 *   GPUs free up (see sim.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "crux/sim_trace.h"

/*
 * Public model sizes: BERT-base 110M / BERT-large 340M (Devlin et al.),
 * GPT-2 XL 1.5B (Radford et al.), GPT-3 2.7B (Brown et al.), ResNet-50 25.6M
 * params and 4.1 GFLOPs forward, ResNet-152 60.2M and 11.5 GFLOPs (He et
 * al.), Transformer-big NMT 213M (Vaswani et al.), T5-large 770M (Raffel et
 * al.). Recommendation models (MIND multi-interest, DLRM-style CTR) have small
 * dense towers and large embedding tables; their sizes here are assumptions
 * of the order the papers describe. Sequence lengths: BERT 128, GPT-2 1024,
 * GPT-3 2048, T5 512; NMT batches of 4,096 tokens per GPU.
 */
static const struct crux_sim_model models[] = {
    /* name           params   sparse/sample  flops/sample         mfu   batch overlap weight sizes
     */
    {"bert-base", 110e6, 0, 6 * 110e6 * 128, 0.35, 64, 0.5, 0.13, {8, 16, 32, 0, 0, 0}},
    {"bert-large", 340e6, 0, 6 * 340e6 * 128, 0.35, 32, 0.5, 0.10, {8, 16, 32, 64, 0, 0}},
    {"gpt2-xl", 1.5e9, 0, 6 * 1.5e9 * 1024, 0.40, 4, 0.3, 0.06, {16, 32, 64, 128, 0, 0}},
    {"gpt3-2.7b", 2.7e9, 0, 6 * 2.7e9 * 2048, 0.40, 2, 0.3, 0.04, {32, 64, 128, 256, 0, 0}},
    {"resnet50", 25.6e6, 0, 3 * 4.1e9, 0.15, 128, 0.6, 0.13, {4, 8, 16, 32, 0, 0}},
    {"resnet152", 60.2e6, 0, 3 * 11.5e9, 0.15, 64, 0.6, 0.06, {8, 16, 32, 64, 0, 0}},
    {"nmt-transformer", 213e6, 0, 6 * 213e6 * 4096, 0.30, 1, 0.5, 0.10, {8, 16, 32, 64, 0, 0}},
    {"multi-interests", 25e6, 200 * 64 * 2, 6 * 25e6, 0.05, 2048, 0.1, 0.10, {8, 16, 32, 0, 0, 0}},
    {"multi-interests-xl",
     60e6,
     200 * 128 * 2,
     6 * 60e6,
     0.05,
     2048,
     0.1,
     0.06,
     {8, 16, 32, 64, 0, 0}},
    {"ctr-dlrm", 20e6, 26 * 128 * 2, 6 * 20e6, 0.05, 4096, 0.1, 0.12, {4, 8, 16, 32, 0, 0}},
    {"t5-large", 770e6, 0, 6 * 770e6 * 512, 0.35, 8, 0.4, 0.10, {16, 32, 64, 0, 0, 0}},
};

const struct crux_sim_model *crux_sim_models(size_t *n)
{
	*n = sizeof(models) / sizeof(models[0]);
	return models;
}

void crux_sim_workload_defaults(struct crux_sim_workload_params *p)
{
	memset(p, 0, sizeof(*p));
	p->seed = 1;
	p->n_jobs = 5000;
	p->span_s = 14 * 86400.0;
	p->total_gpus = 2048;
	p->max_job_gpus = 256;
	p->load = 1.0;
	p->gpu_tflops = 312; /* A100 dense bf16 */
	p->host_gbps = 200;
	p->median_s = 3600;
	p->sigma = 1.2;
}

/* splitmix64: small, seedable, the same on every platform. */
struct rng {
	uint64_t s;
};

static uint64_t rng_next(struct rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in (0, 1). */
static double rng_unit(struct rng *r)
{
	return ((double)(rng_next(r) >> 11) + 0.5) / 9007199254740992.0;
}

static double rng_normal(struct rng *r)
{
	double u = rng_unit(r), v = rng_unit(r);
	return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

static size_t pick_model(struct rng *r)
{
	size_t n = sizeof(models) / sizeof(models[0]);
	double total = 0;
	for (size_t i = 0; i < n; i++)
		total += models[i].weight;
	double x = rng_unit(r) * total;
	for (size_t i = 0; i < n; i++) {
		x -= models[i].weight;
		if (x <= 0)
			return i;
	}
	return n - 1;
}

static uint32_t pick_size(struct rng *r, const struct crux_sim_model *m, uint32_t max)
{
	static const double w[6] = {1, 0.7, 0.5, 0.35, 0.25, 0.18};
	double total = 0;
	size_t n = 0;
	while (n < 6 && m->sizes[n] && m->sizes[n] <= max)
		total += w[n++];
	if (n == 0)
		return max < m->sizes[0] ? max : m->sizes[0];
	double x = rng_unit(r) * total;
	for (size_t i = 0; i < n; i++) {
		x -= w[i];
		if (x <= 0)
			return m->sizes[i];
	}
	return m->sizes[n - 1];
}

crux_status_t crux_sim_workload_generate(const struct crux_sim_workload_params *p,
					 struct crux_sim_trace **out, char *err, size_t errlen)
{
	struct crux_sim_trace *t = NULL;
	double *dur = NULL;
	crux_status_t st;

	if (!p->n_jobs || p->n_jobs > CRUX_SIM_TRACE_MAX_JOBS || !(p->span_s > 0) ||
	    !p->total_gpus || !p->max_job_gpus || !(p->load > 0) || !(p->gpu_tflops > 0) ||
	    !(p->host_gbps > 0) || !(p->median_s > 0) || !(p->sigma >= 0)) {
		if (err && errlen)
			snprintf(err, errlen,
				 "workload parameters out of range: jobs, span, GPUs, "
				 "load, TFLOP/s, Gb/s and median must be > 0");
		return CRUX_ERR_INVAL;
	}
	if ((st = crux_sim_trace_new(&t)) != CRUX_OK)
		return st;
	dur = calloc(p->n_jobs, sizeof(*dur));
	if (!dur) {
		st = CRUX_ERR_NOMEM;
		goto fail;
	}
	struct rng r = {.s = p->seed};
	/* Poisson arrivals: cumulative exponential gaps scaled into the span. */
	double clock = 0;
	double gap_sum = 0;
	double *gaps = dur; /* reused below for durations after arrivals are set */
	for (uint32_t i = 0; i < p->n_jobs; i++) {
		gaps[i] = -log(rng_unit(&r));
		gap_sum += gaps[i];
	}
	gap_sum += -log(rng_unit(&r)); /* the gap after the last arrival */
	double offered = 0;
	for (uint32_t i = 0; i < p->n_jobs; i++) {
		clock += gaps[i] * p->span_s / gap_sum;
		struct crux_sim_trace_job j;
		memset(&j, 0, sizeof(j));
		size_t mi = pick_model(&r);
		const struct crux_sim_model *m = &models[mi];
		j.id = i + 1;
		j.arrival_s = floor(clock * 1000) / 1000;
		snprintf(j.model, sizeof(j.model), "%s", m->name);
		j.gpus = pick_size(&r, m, p->max_job_gpus);
		j.compute_s =
		    m->flops_per_sample * m->batch_per_gpu / (p->gpu_tflops * 1e12 * m->mfu);
		uint32_t per_host = j.gpus < 8 ? j.gpus : 8;
		j.comm_bytes = 2 * m->params + m->sparse_bytes * m->batch_per_gpu * per_host;
		j.overlap = m->overlap;
		double d = p->median_s * exp(p->sigma * rng_normal(&r));
		d = d < 300 ? 300 : d > 3 * 86400 ? 3 * 86400 : d;
		dur[i] = d; /* gaps[i] is no longer needed */
		offered += d * j.gpus;
		/* 'iterations' is filled once the load factor is known. */
		j.iterations = 1;
		if ((st = crux_sim_trace_add(t, &j)) != CRUX_OK)
			goto fail;
	}
	double factor = p->load * p->total_gpus * p->span_s / offered;
	for (uint32_t i = 0; i < p->n_jobs; i++) {
		struct crux_sim_trace_job *j = &t->jobs[i];
		double hosts = ceil(j->gpus / 8.0);
		double comm =
		    hosts > 1 ? 2 * (hosts - 1) / hosts * j->comm_bytes * 8 / (p->host_gbps * 1e9)
			      : 0;
		double iter = (1 - j->overlap) * j->compute_s + comm;
		if (iter < j->compute_s)
			iter = j->compute_s;
		double it = floor(dur[i] * factor / iter + 0.5);
		j->iterations = it < 1 ? 1 : (uint64_t)it;
	}
	free(dur);
	*out = t;
	return CRUX_OK;
fail:
	free(dur);
	crux_sim_trace_free(t);
	return st;
}
