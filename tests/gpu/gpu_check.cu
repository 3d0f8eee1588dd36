/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_check: a real-NCCL workload for the GPU checks (tests/gpu/run.sh).
 * Only built and run on a machine with a GPU, CUDA and NCCL; never by
 * `make test`.
 *
 * N processes, one rank each, all on one GPU (each with its own NCCL_HOSTID,
 * so NCCL routes between them through the network plugin). The NCCL unique
 * id travels through a file (--idfile); no MPI needed.
 *
 *   gpu_check bw    --rank R --nranks N --idfile F [--min B] [--max B] [--step F] [--iters N]
 *       all-reduce sweep: every element of every result is verified; prints
 *       one JSON line per size with algbw/busbw (nccl-tests' definitions).
 *   gpu_check soak  --rank R --nranks N --idfile F --seconds S [--bytes B]
 *       all-reduce of B bytes for S seconds, every result verified (used
 *       while the decision table changes the job's level).
 *   gpu_check iter  --rank R --nranks N --idfile F --iters N [--matrix M] [--bytes B]
 *       training-like iterations: an MxM matmul (compute) then two all-reduces
 *       of 3/4 and 1/4 of B bytes (communication), serialised on one stream; CUDA events
 *       give the ground truth for compute, communication and the iteration.
 */
#include <cuda_runtime.h>
#include <nccl.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CUDA_OK(x)                                                                         \
	do {                                                                               \
		cudaError_t e_ = (x);                                                      \
		if (e_ != cudaSuccess) {                                                   \
			fprintf(stderr, "gpu_check: %s:%d %s: %s\n", __FILE__, __LINE__, #x, \
				cudaGetErrorString(e_));                                   \
			exit(2);                                                           \
		}                                                                          \
	} while (0)
#define NCCL_OK(x)                                                                         \
	do {                                                                               \
		ncclResult_t r_ = (x);                                                     \
		if (r_ != ncclSuccess) {                                                   \
			fprintf(stderr, "gpu_check: %s:%d %s: %s\n", __FILE__, __LINE__, #x, \
				ncclGetErrorString(r_));                                   \
			exit(2);                                                           \
		}                                                                          \
	} while (0)

struct opts {
	const char *mode;
	int rank, nranks;
	const char *idfile;
	size_t min_bytes, max_bytes, bytes;
	int iters, matrix, step;
	double seconds;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	switch (*end) {
	case 'K': case 'k': v *= 1024; break;
	case 'M': case 'm': v *= 1024 * 1024; break;
	case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
	default: break;
	}
	return (size_t)v;
}

/* Rank 0 creates the id and publishes it atomically; the others wait. */
static ncclUniqueId exchange_id(const struct opts *o)
{
	ncclUniqueId id;
	if (o->rank == 0) {
		char tmp[4096];
		NCCL_OK(ncclGetUniqueId(&id));
		snprintf(tmp, sizeof(tmp), "%s.tmp", o->idfile);
		FILE *f = fopen(tmp, "wb");
		if (!f || fwrite(&id, sizeof(id), 1, f) != 1 || fclose(f) != 0 ||
		    rename(tmp, o->idfile) != 0) {
			fprintf(stderr, "gpu_check: cannot write %s: %s\n", o->idfile, strerror(errno));
			exit(2);
		}
		return id;
	}
	for (int i = 0; i < 600; i++) {
		FILE *f = fopen(o->idfile, "rb");
		if (f) {
			size_t n = fread(&id, sizeof(id), 1, f);
			fclose(f);
			if (n == 1)
				return id;
		}
		usleep(100000);
	}
	fprintf(stderr, "gpu_check: rank %d: no NCCL id in %s after 60 s\n", o->rank, o->idfile);
	exit(2);
}

/* Element i of rank r: small integers, so float sums are exact. */
__global__ void fill(float *x, size_t n, int rank)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		x[i] = (float)(rank + 1 + (int)(i % 7));
}

/* Counts elements that differ from the expected sum over all ranks. */
__global__ void verify(const float *x, size_t n, int nranks, unsigned long long *bad)
{
	unsigned long long local = 0;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float want = (float)(nranks * (nranks + 1) / 2 + nranks * (int)(i % 7));
		if (x[i] != want)
			local++;
	}
	if (local)
		atomicAdd(bad, local);
}

#define TILE 16
__global__ void matmul(const float *a, const float *b, float *c, int m)
{
	__shared__ float as[TILE][TILE], bs[TILE][TILE];
	int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
	float acc = 0.f;
	for (int t = 0; t < m; t += TILE) {
		as[threadIdx.y][threadIdx.x] = a[row * m + t + threadIdx.x];
		bs[threadIdx.y][threadIdx.x] = b[(t + threadIdx.y) * m + col];
		__syncthreads();
		for (int k = 0; k < TILE; k++)
			acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
		__syncthreads();
	}
	c[row * m + col] = acc;
}

struct ctx {
	ncclComm_t comm;
	cudaStream_t stream;
	float *buf;
	unsigned long long *bad;
	size_t cap;
};

static unsigned long long allreduce_checked(struct ctx *c, size_t count, int rank, int nranks,
					    bool check)
{
	fill<<<1024, 256, 0, c->stream>>>(c->buf, count, rank);
	NCCL_OK(ncclAllReduce(c->buf, c->buf, count, ncclFloat, ncclSum, c->comm, c->stream));
	if (!check)
		return 0;
	unsigned long long bad = 0;
	CUDA_OK(cudaMemsetAsync(c->bad, 0, sizeof(*c->bad), c->stream));
	verify<<<1024, 256, 0, c->stream>>>(c->buf, count, nranks, c->bad);
	CUDA_OK(cudaMemcpyAsync(&bad, c->bad, sizeof(bad), cudaMemcpyDeviceToHost, c->stream));
	CUDA_OK(cudaStreamSynchronize(c->stream));
	return bad;
}

static int run_bw(struct ctx *c, const struct opts *o)
{
	unsigned long long bad_total = 0;
	cudaEvent_t e0, e1;
	CUDA_OK(cudaEventCreate(&e0));
	CUDA_OK(cudaEventCreate(&e1));
	for (size_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes *= (size_t)o->step) {
		size_t count = bytes / sizeof(float);
		if (count == 0)
			continue;
		/* Correctness of this size, every element. */
		unsigned long long bad = allreduce_checked(c, count, o->rank, o->nranks, true);
		bad_total += bad;
		for (int i = 0; i < 3; i++)
			NCCL_OK(ncclAllReduce(c->buf, c->buf, count, ncclFloat, ncclSum, c->comm,
					      c->stream));
		CUDA_OK(cudaEventRecord(e0, c->stream));
		for (int i = 0; i < o->iters; i++)
			NCCL_OK(ncclAllReduce(c->buf, c->buf, count, ncclFloat, ncclSum, c->comm,
					      c->stream));
		CUDA_OK(cudaEventRecord(e1, c->stream));
		CUDA_OK(cudaEventSynchronize(e1));
		float ms = 0;
		CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
		double t = ms / 1e3 / o->iters;
		double algbw = (double)bytes / t / 1e9;
		double busbw = algbw * 2.0 * (o->nranks - 1) / o->nranks;
		if (o->rank == 0)
			printf("{\"bytes\":%zu,\"time_us\":%.2f,\"algbw_GBps\":%.4f,\"busbw_GBps\":%.4f,"
			       "\"wrong_elements\":%llu}\n",
			       bytes, t * 1e6, algbw, busbw, bad);
		fflush(stdout);
	}
	return bad_total ? 1 : 0;
}

static int run_soak(struct ctx *c, const struct opts *o)
{
	size_t count = o->bytes / sizeof(float);
	unsigned long long bad_total = 0, n = 0;
	double t0 = now_s(), last = t0;
	/* All ranks must run the same number of collectives: rank 0 decides
	 * when to stop and tells the others through a 1-element all-reduce. */
	float *flag;
	CUDA_OK(cudaMalloc(&flag, sizeof(float)));
	for (;;) {
		bad_total += allreduce_checked(c, count, o->rank, o->nranks, true);
		n++;
		float stop = (o->rank == 0 && now_s() - t0 >= o->seconds) ? 1.f : 0.f;
		/*
		 * Both copies on the collective's stream: it is non-blocking, so a
		 * plain cudaMemcpy (legacy stream) could read the flag before the
		 * all-reduce wrote it, and a rank that missed the stop would post one
		 * more collective than its peers (seen once on an H100 as "peer
		 * closed the connection" followed by a hang in ncclCommFinalize).
		 */
		CUDA_OK(cudaMemcpyAsync(flag, &stop, sizeof(stop), cudaMemcpyHostToDevice, c->stream));
		NCCL_OK(ncclAllReduce(flag, flag, 1, ncclFloat, ncclSum, c->comm, c->stream));
		CUDA_OK(cudaMemcpyAsync(&stop, flag, sizeof(stop), cudaMemcpyDeviceToHost, c->stream));
		CUDA_OK(cudaStreamSynchronize(c->stream));
		if (o->rank == 0 && now_s() - last >= 1.0) {
			last = now_s();
			printf("{\"soak_t_s\":%.1f,\"allreduces\":%llu,\"wrong_elements\":%llu}\n",
			       last - t0, n, bad_total);
			fflush(stdout);
		}
		if (stop > 0.f)
			break;
	}
	double el = now_s() - t0;
	if (o->rank == 0)
		printf("{\"soak_done\":true,\"seconds\":%.2f,\"allreduces\":%llu,\"bytes\":%zu,"
		       "\"algbw_GBps\":%.4f,\"wrong_elements\":%llu}\n",
		       el, n, o->bytes, (double)o->bytes * n / el / 1e9, bad_total);
	CUDA_OK(cudaFree(flag));
	return bad_total ? 1 : 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int run_iter(struct ctx *c, const struct opts *o)
{
	int m = o->matrix;
	size_t count = o->bytes / sizeof(float);
	float *a, *b, *d;
	CUDA_OK(cudaMalloc(&a, sizeof(float) * m * m));
	CUDA_OK(cudaMalloc(&b, sizeof(float) * m * m));
	CUDA_OK(cudaMalloc(&d, sizeof(float) * m * m));
	fill<<<1024, 256, 0, c->stream>>>(a, (size_t)m * m, 0);
	fill<<<1024, 256, 0, c->stream>>>(b, (size_t)m * m, 1);
	cudaEvent_t ev[3];
	for (int i = 0; i < 3; i++)
		CUDA_OK(cudaEventCreate(&ev[i]));
	double *comp = (double *)calloc(o->iters, sizeof(double));
	double *comm = (double *)calloc(o->iters, sizeof(double));
	double *iter = (double *)calloc(o->iters, sizeof(double));
	double prev = 0;
	dim3 grid(m / TILE, m / TILE), block(TILE, TILE);
	double t0 = now_s();
	for (int it = 0; it < o->iters; it++) {
		CUDA_OK(cudaEventRecord(ev[0], c->stream));
		matmul<<<grid, block, 0, c->stream>>>(a, b, d, m);
		CUDA_OK(cudaEventRecord(ev[1], c->stream));
		/* Two gradient buckets, 3/4 and 1/4 of the bytes, as DDP would. */
		NCCL_OK(ncclAllReduce(c->buf, c->buf, count - count / 4, ncclFloat, ncclSum, c->comm,
				      c->stream));
		NCCL_OK(ncclAllReduce(c->buf + (count - count / 4), c->buf + (count - count / 4),
				      count / 4, ncclFloat, ncclSum, c->comm, c->stream));
		CUDA_OK(cudaEventRecord(ev[2], c->stream));
		CUDA_OK(cudaEventSynchronize(ev[2]));
		float ms1 = 0, ms2 = 0;
		CUDA_OK(cudaEventElapsedTime(&ms1, ev[0], ev[1]));
		CUDA_OK(cudaEventElapsedTime(&ms2, ev[1], ev[2]));
		comp[it] = ms1 / 1e3;
		comm[it] = ms2 / 1e3;
		double t = now_s();
		iter[it] = it ? t - prev : 0;
		prev = t;
	}
	double total = now_s() - t0;
	/* Ground truth over the second half (after warm-up), as means, plus the median iteration. */
	int from = o->iters / 2, n = o->iters - from;
	double sc = 0, sm = 0, si = 0;
	for (int i = from; i < o->iters; i++) {
		sc += comp[i];
		sm += comm[i];
		si += iter[i];
	}
	qsort(iter + from, n, sizeof(double), cmp_double);
	printf("{\"rank\":%d,\"iters\":%d,\"matrix\":%d,\"bytes\":%zu,\"compute_s\":%.6f,"
	       "\"comm_s\":%.6f,\"iter_s\":%.6f,\"iter_median_s\":%.6f,\"wall_s\":%.3f}\n",
	       o->rank, o->iters, m, o->bytes, sc / n, sm / n, si / n, iter[from + n / 2], total);
	fflush(stdout);
	free(comp);
	free(comm);
	free(iter);
	CUDA_OK(cudaFree(a));
	CUDA_OK(cudaFree(b));
	CUDA_OK(cudaFree(d));
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = {};
	o.min_bytes = 8;
	o.max_bytes = 256u << 20;
	o.bytes = 64u << 20;
	o.iters = 20;
	o.step = 2;
	o.matrix = 2048;
	o.seconds = 10;
	o.rank = -1;
	if (argc < 2) {
		fprintf(stderr, "usage: gpu_check bw|soak|iter --rank R --nranks N --idfile F ...\n");
		return 2;
	}
	o.mode = argv[1];
	for (int i = 2; i + 1 < argc; i += 2) {
		const char *k = argv[i], *v = argv[i + 1];
		if (!strcmp(k, "--rank")) o.rank = atoi(v);
		else if (!strcmp(k, "--nranks")) o.nranks = atoi(v);
		else if (!strcmp(k, "--idfile")) o.idfile = v;
		else if (!strcmp(k, "--min")) o.min_bytes = parse_size(v);
		else if (!strcmp(k, "--max")) o.max_bytes = parse_size(v);
		else if (!strcmp(k, "--bytes")) o.bytes = parse_size(v);
		else if (!strcmp(k, "--iters")) o.iters = atoi(v);
		else if (!strcmp(k, "--step")) o.step = atoi(v);
		else if (!strcmp(k, "--matrix")) o.matrix = atoi(v);
		else if (!strcmp(k, "--seconds")) o.seconds = atof(v);
		else {
			fprintf(stderr, "gpu_check: unknown option %s\n", k);
			return 2;
		}
	}
	if (o.rank < 0 || o.nranks < 1 || o.rank >= o.nranks || !o.idfile || o.matrix % TILE ||
	    o.iters < 2 || o.step < 2) {
		fprintf(stderr, "gpu_check: need --rank, --nranks, --idfile (matrix a multiple of %d)\n",
			TILE);
		return 2;
	}
	CUDA_OK(cudaSetDevice(0));
	struct ctx c = {};
	c.cap = strcmp(o.mode, "bw") ? o.bytes : o.max_bytes;
	CUDA_OK(cudaMalloc(&c.buf, c.cap));
	CUDA_OK(cudaMalloc(&c.bad, sizeof(*c.bad)));
	CUDA_OK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
	ncclUniqueId id = exchange_id(&o);
	NCCL_OK(ncclCommInitRank(&c.comm, o.nranks, id, o.rank));
	int rc;
	if (!strcmp(o.mode, "bw"))
		rc = run_bw(&c, &o);
	else if (!strcmp(o.mode, "soak"))
		rc = run_soak(&c, &o);
	else if (!strcmp(o.mode, "iter"))
		rc = run_iter(&c, &o);
	else {
		fprintf(stderr, "gpu_check: unknown mode %s\n", o.mode);
		rc = 2;
	}
	NCCL_OK(ncclCommFinalize(c.comm));
	NCCL_OK(ncclCommDestroy(c.comm));
	CUDA_OK(cudaFree(c.buf));
	CUDA_OK(cudaFree(c.bad));
	return rc;
}
