/* SPDX-License-Identifier: Apache-2.0 */
/*
 * crux-sim job traces: the text format the simulator replays, and the
 * seeded workload generator that writes them.
 *
 * Format (version 1), one record per line, '#' starts a comment, blank lines
 * are ignored, fields are separated by spaces or tabs:
 *
 *   crux-sim-trace 1
 *   job ID ARRIVAL_S MODEL GPUS ITERATIONS COMPUTE_S COMM_BYTES OVERLAP HOSTS
 *
 *   ID          job id, integer in [1, 4294967295], unique in the file
 *   ARRIVAL_S   submission time in seconds from the trace start, >= 0
 *   MODEL       model name, 1..31 characters of [A-Za-z0-9._+-]
 *   GPUS        GPUs the job holds, [1, 65536]
 *   ITERATIONS  training iterations to run, [1, 1e12]
 *   COMPUTE_S   GPU compute time of one iteration (seconds, every GPU of the
 *               job in parallel), (0, 3600]
 *   COMM_BYTES  gradient bytes all-reduced across the job's hosts per
 *               iteration, [0, 1e14]
 *   OVERLAP     fraction of COMPUTE_S that communication can overlap, [0, 1]:
 *               communication starts after (1 - OVERLAP) * COMPUTE_S
 *   HOSTS       '-' to let the simulator place the job, or a comma-separated
 *               list of host indices (0-based, distinct) of the topology
 *
 * The header line must come first. Jobs may appear in any order; the
 * simulator replays them by arrival time, then id.
 */
#ifndef CRUX_SIM_TRACE_H
#define CRUX_SIM_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "crux/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CRUX_SIM_MODEL_NAME_MAX 32
#define CRUX_SIM_TRACE_MAX_GPUS 65536u
#define CRUX_SIM_TRACE_MAX_JOBS 10000000u

struct crux_sim_trace_job {
	uint32_t id;
	double arrival_s;
	char model[CRUX_SIM_MODEL_NAME_MAX];
	uint32_t gpus;
	uint64_t iterations;
	double compute_s;
	double comm_bytes;
	double overlap;
	uint32_t n_hosts; /* 0: placed by the simulator */
	uint32_t *hosts;
};

struct crux_sim_trace {
	struct crux_sim_trace_job *jobs;
	size_t n_jobs;
	size_t cap;
};

/*
 * Parse a trace held in memory ('len' bytes, need not be NUL-terminated).
 * 'name' names the input in error messages ("FILE:LINE: ...").
 */
crux_status_t crux_sim_trace_parse(const char *text, size_t len, const char *name,
				   struct crux_sim_trace **out, char *err, size_t errlen);

/* Read and parse a trace file. */
crux_status_t crux_sim_trace_load(const char *path, struct crux_sim_trace **out, char *err,
				  size_t errlen);

/* Write a trace in the format above (round-trips through the parser). */
crux_status_t crux_sim_trace_write(FILE *f, const struct crux_sim_trace *trace);

/* An empty trace to fill with crux_sim_trace_add. */
crux_status_t crux_sim_trace_new(struct crux_sim_trace **out);

/* Append a copy of 'job' (its hosts array is copied). */
crux_status_t crux_sim_trace_add(struct crux_sim_trace *trace,
				 const struct crux_sim_trace_job *job);

void crux_sim_trace_free(struct crux_sim_trace *trace);

/* ---- Workload generator ------------------------------------------------ */

/* One model type of the catalogue (public model sizes; see workload.c). */
struct crux_sim_model {
	const char *name;
	double params;		 /* dense parameters */
	double sparse_bytes;	 /* embedding-gradient bytes per sample (recommendation models) */
	double flops_per_sample; /* forward + backward */
	double mfu;		 /* fraction of GPU peak the model reaches */
	uint32_t batch_per_gpu;
	double overlap;	   /* fraction of compute the gradient exchange overlaps */
	double weight;	   /* share of submitted jobs */
	uint32_t sizes[6]; /* GPU counts the model is trained on (0 ends the list) */
};

/* The catalogue: 11 model types. */
const struct crux_sim_model *crux_sim_models(size_t *n);

struct crux_sim_workload_params {
	uint64_t seed;
	uint32_t n_jobs;       /* jobs to generate */
	double span_s;	       /* arrivals spread over [0, span_s) */
	uint32_t total_gpus;   /* cluster size, for the offered-load target */
	uint32_t max_job_gpus; /* no job larger than this */
	double load;	   /* offered load: sum(GPUs x isolated duration) / (total_gpus x span) */
	double gpu_tflops; /* GPU peak (dense fp16/bf16 TFLOP/s) */
	double host_gbps;  /* per-host network bandwidth (Gb/s), for the duration estimate */
	double median_s;   /* median isolated job duration before load scaling */
	double sigma;	   /* log-normal shape of durations */
};

/* Defaults: 5,000 jobs over two weeks on 2,048 GPUs, load 1.0, A100-class GPUs. */
void crux_sim_workload_defaults(struct crux_sim_workload_params *p);

crux_status_t crux_sim_workload_generate(const struct crux_sim_workload_params *p,
					 struct crux_sim_trace **out, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_SIM_TRACE_H */
