/* SPDX-License-Identifier: Apache-2.0 */
/*
 * crux-tb-trainer: one rank ("GPU") of an emulated data-parallel training
 * job. Each iteration computes (sleeps, so two cores host many GPUs), then
 * all-reduces its gradient in buckets through the NCCL API and verifies the
 * sums. Per-iteration timestamps (CLOCK_MONOTONIC ns) go to a log the
 * experiment runner reads:
 *   # crux-tb-trainer job=J model=M rank=R nranks=N host=H compute_ms=C grad_bytes=B buckets=K
 *     realtime_offset_ns=O
 *   <iter> <start_ns> <compute_end_ns> <end_ns> <bucket_end_ns>...
 *   # done iters=K
 *
 * The unique id travels through a file (rank 0 writes it atomically, the
 * others wait for it), as a launcher's rendezvous store would carry it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "crux/env.h"
#include "crux/nccl_api.h"

struct crux_tb_model {
	const char *name;
	double compute_ms; /* per iteration and GPU */
	double grad_mb;	   /* gradient bytes per iteration (MB = 2^20 bytes) */
	int buckets;	   /* all-reduce calls per iteration (DDP buckets) */
	const char *shape;
};

/*
 * The catalogue: per-GPU compute and gradient size scaled down from the
 * models' public sizes to a 50-100 Mbit/s emulated fabric, keeping their
 * order of GPU intensity (compute per byte on the wire): GPT-like high,
 * BERT-like medium, ResNet-like low.
 */
static const struct crux_tb_model crux_tb_models[] = {
    {"gpt", 600.0, 1.5, 3, "large transformer: long compute, large gradient"},
    {"bert", 250.0, 1.0, 8, "medium transformer: medium compute and gradient"},
    {"resnet", 120.0, 0.5, 4, "convolutional: short compute, gradient large for it"},
    {"tiny", 20.0, 0.0625, 1, "test model: minimal compute and gradient"},
};

struct crux_tb_trainer {
	const struct crux_tb_model *model;
	const char *job;
	const char *host;
	const char *id_file;
	const char *log_path;
	int rank;
	int nranks;
	long iters;
	double compute_ms;
	double grad_mb;
	int buckets;
	void (*mark)(void); /* the preload's crux_iteration_mark, with --mark-iterations */
	volatile sig_atomic_t stop;
};

static struct crux_tb_trainer crux_tb_tr;

static uint64_t crux_tb_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void crux_tb_sleep_until(uint64_t t)
{
	struct timespec ts = {.tv_sec = (time_t)(t / 1000000000ull),
			      .tv_nsec = (long)(t % 1000000000ull)};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		if (crux_tb_tr.stop)
			return;
}

static void crux_tb_on_signal(int sig)
{
	(void)sig;
	crux_tb_tr.stop = 1;
}

static void crux_tb_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: crux-tb-trainer --job ID --model NAME --rank R --nranks N --id-file PATH\n"
	    "                       [--iters K] [--log PATH] [--host NAME]\n"
	    "                       [--compute-ms MS] [--grad-mb MB] [--buckets B]\n"
	    "                       [--mark-iterations]\n"
	    "--mark-iterations calls the preload's crux_iteration_mark() at every iteration\n"
	    "start (when the preload is loaded), instead of leaving the period to its detector.\n"
	    "models:\n");
	for (size_t i = 0; i < sizeof(crux_tb_models) / sizeof(crux_tb_models[0]); i++)
		fprintf(f, "  %-7s compute %6.1f ms, gradient %6.3f MB in %d bucket(s): %s\n",
			crux_tb_models[i].name, crux_tb_models[i].compute_ms,
			crux_tb_models[i].grad_mb, crux_tb_models[i].buckets,
			crux_tb_models[i].shape);
}

static int crux_tb_parse(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"job", required_argument, NULL, 'j'},
	    {"model", required_argument, NULL, 'm'},
	    {"rank", required_argument, NULL, 'r'},
	    {"nranks", required_argument, NULL, 'n'},
	    {"id-file", required_argument, NULL, 'i'},
	    {"iters", required_argument, NULL, 'k'},
	    {"log", required_argument, NULL, 'l'},
	    {"host", required_argument, NULL, 'H'},
	    {"compute-ms", required_argument, NULL, 'c'},
	    {"grad-mb", required_argument, NULL, 'g'},
	    {"buckets", required_argument, NULL, 'b'},
	    {"mark-iterations", no_argument, NULL, 'M'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct crux_tb_trainer *t = &crux_tb_tr;
	double compute = -1, grad = -1;
	long long v;
	char err[256];
	int c, buckets = -1;

	t->rank = -1;
	t->nranks = -1;
	t->iters = 20;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		crux_status_t st = CRUX_OK;

		switch (c) {
		case 'j':
			t->job = optarg;
			break;
		case 'm':
			for (size_t i = 0; i < sizeof(crux_tb_models) / sizeof(crux_tb_models[0]);
			     i++)
				if (!strcmp(optarg, crux_tb_models[i].name))
					t->model = &crux_tb_models[i];
			if (!t->model) {
				fprintf(stderr, "crux-tb-trainer: unknown model '%s'\n", optarg);
				crux_tb_usage(stderr);
				return -1;
			}
			break;
		case 'r':
			st = crux_parse_int("--rank", optarg, 0, 4095, &v, err, sizeof(err));
			t->rank = (int)v;
			break;
		case 'n':
			st = crux_parse_int("--nranks", optarg, 1, 4096, &v, err, sizeof(err));
			t->nranks = (int)v;
			break;
		case 'k':
			st = crux_parse_int("--iters", optarg, 1, 10000000, &v, err, sizeof(err));
			t->iters = (long)v;
			break;
		case 'i':
			t->id_file = optarg;
			break;
		case 'l':
			t->log_path = optarg;
			break;
		case 'H':
			t->host = optarg;
			break;
		case 'c':
			st = crux_parse_double("--compute-ms", optarg, 0, 600000, &compute, err,
					       sizeof(err));
			break;
		case 'g':
			st = crux_parse_double("--grad-mb", optarg, 0.001, 4096, &grad, err,
					       sizeof(err));
			break;
		case 'b':
			st = crux_parse_int("--buckets", optarg, 1, 64, &v, err, sizeof(err));
			buckets = (int)v;
			break;
		case 'M':
			/* Present only under LD_PRELOAD=libcrux-preload.so; harmless otherwise. */
			*(void **)&t->mark = dlsym(RTLD_DEFAULT, "crux_iteration_mark");
			break;
		case 'h':
			crux_tb_usage(stdout);
			exit(0);
		default:
			crux_tb_usage(stderr);
			return -1;
		}
		if (st != CRUX_OK) {
			fprintf(stderr, "crux-tb-trainer: %s\n", err);
			return -1;
		}
	}
	if (!t->job || !t->model || t->rank < 0 || t->nranks < 1 || !t->id_file) {
		fprintf(stderr, "crux-tb-trainer: --job, --model, --rank, --nranks and --id-file "
				"are required\n");
		crux_tb_usage(stderr);
		return -1;
	}
	if (t->rank >= t->nranks) {
		fprintf(stderr, "crux-tb-trainer: --rank %d must be below --nranks %d\n", t->rank,
			t->nranks);
		return -1;
	}
	t->compute_ms = compute >= 0 ? compute : t->model->compute_ms;
	t->grad_mb = grad > 0 ? grad : t->model->grad_mb;
	t->buckets = buckets > 0 ? buckets : t->model->buckets;
	if (!t->host)
		t->host = "-";
	return 0;
}

/* Rank 0 publishes the id; the others wait for it (bounded). */
static int crux_tb_share_id(ncclUniqueId *id)
{
	struct crux_tb_trainer *t = &crux_tb_tr;
	char tmp[4096];
	FILE *f;

	if (t->rank == 0) {
		ncclResult_t rc = ncclGetUniqueId(id);
		if (rc != ncclSuccess) {
			fprintf(stderr, "crux-tb-trainer: ncclGetUniqueId: %s\n",
				ncclGetErrorString(rc));
			return -1;
		}
		snprintf(tmp, sizeof(tmp), "%s.tmp.%d", t->id_file, (int)getpid());
		f = fopen(tmp, "wb");
		if (!f || fwrite(id, sizeof(*id), 1, f) != 1 || fclose(f) != 0 ||
		    rename(tmp, t->id_file) != 0) {
			fprintf(stderr, "crux-tb-trainer: cannot write the id file %s: %s\n",
				t->id_file, strerror(errno));
			return -1;
		}
		return 0;
	}
	for (int i = 0; i < 1200 && !t->stop; i++) {
		f = fopen(t->id_file, "rb");
		if (f) {
			size_t n = fread(id, sizeof(*id), 1, f);
			fclose(f);
			if (n == 1)
				return 0;
		}
		usleep(50000);
	}
	fprintf(stderr,
		"crux-tb-trainer: rank %d: no unique id in %s after 60 s (is rank 0 "
		"running?)\n",
		t->rank, t->id_file);
	return -1;
}

/* Gradient values: small integers, so every sum over ranks is exact in float. */
static float crux_tb_grad(int rank, long it, size_t i)
{
	return (float)((rank + 1) * (int)((i + (size_t)it) % 13 + 1));
}

/* The all-reduced gradient of iteration 'it' must be the exact sum over ranks. */
static int crux_tb_verify(const float *grad, size_t elems, long it)
{
	const struct crux_tb_trainer *t = &crux_tb_tr;
	const float ranksum = (float)(t->nranks * (t->nranks + 1) / 2);

	for (size_t i = 0; i < elems; i++) {
		float want = ranksum * (float)((i + (size_t)it) % 13 + 1);
		if (grad[i] != want) {
			fprintf(stderr,
				"crux-tb-trainer: job %s rank %d iteration %ld: element %zu is %g, "
				"expected %g (all-reduce result wrong)\n",
				t->job, t->rank, it, i, (double)grad[i], (double)want);
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct crux_tb_trainer *t = &crux_tb_tr;
	struct sigaction sa;
	ncclUniqueId id;
	ncclComm_t comm = NULL;
	float *grad = NULL;
	size_t elems, bucket_off[64], bucket_len[64];
	uint64_t bucket_end[64];
	FILE *log = stdout;
	int rc = 1;

	if (crux_tb_parse(argc, argv) < 0)
		return 2;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = crux_tb_on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (t->log_path) {
		log = fopen(t->log_path, "w");
		if (!log) {
			fprintf(stderr, "crux-tb-trainer: cannot open log %s: %s\n", t->log_path,
				strerror(errno));
			return 1;
		}
	}
	/*
	 * Buckets of distinct sizes (bucket b holds b+1 shares), as DDP's are:
	 * the per-iteration call sequence then repeats once per iteration, not
	 * once per bucket, which is what the preload's detector looks for.
	 */
	{
		size_t total = (size_t)(t->grad_mb * 1048576.0 / (double)sizeof(float));
		size_t shares = (size_t)t->buckets * (size_t)(t->buckets + 1) / 2;
		size_t share = total / shares ? total / shares : 1;

		elems = 0;
		for (int b = 0; b < t->buckets; b++) {
			bucket_off[b] = elems;
			bucket_len[b] = share * (size_t)(b + 1);
			elems += bucket_len[b];
		}
	}
	grad = malloc(elems * sizeof(float));
	if (!grad) {
		fprintf(stderr, "crux-tb-trainer: out of memory for %zu gradient elements\n",
			elems);
		goto out;
	}
	if (crux_tb_share_id(&id) < 0)
		goto out;
	{
		ncclResult_t r = ncclCommInitRank(&comm, t->nranks, id, t->rank);
		if (r != ncclSuccess) {
			fprintf(stderr, "crux-tb-trainer: ncclCommInitRank: %s (%s)\n",
				ncclGetErrorString(r), ncclGetLastError(NULL));
			goto out;
		}
	}
	/* O = CLOCK_REALTIME - CLOCK_MONOTONIC: the agents' logs carry wall-clock
	 * times, and levels.py sets their level changes against these iterations. */
	struct timespec rt, mt;
	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mt);
	fprintf(log,
		"# crux-tb-trainer job=%s model=%s rank=%d nranks=%d host=%s compute_ms=%.3f "
		"grad_bytes=%zu buckets=%d realtime_offset_ns=%lld\n",
		t->job, t->model->name, t->rank, t->nranks, t->host, t->compute_ms,
		elems * sizeof(float), t->buckets,
		(long long)(rt.tv_sec - mt.tv_sec) * 1000000000LL + (rt.tv_nsec - mt.tv_nsec));
	fflush(log);
	long it;
	uint64_t start = crux_tb_now();
	for (it = 0; it < t->iters && !t->stop; it++) {
		uint64_t compute_end, end;

		if (t->mark)
			t->mark();
		/* Compute phase: check the previous sums, make new gradients, wait out the rest. */
		if (it > 0 && crux_tb_verify(grad, elems, it - 1) < 0)
			goto out;
		for (size_t i = 0; i < elems; i++)
			grad[i] = crux_tb_grad(t->rank, it, i);
		crux_tb_sleep_until(start + (uint64_t)(t->compute_ms * 1e6));
		compute_end = crux_tb_now();
		for (int b = 0; b < t->buckets; b++) {
			float *p = grad + bucket_off[b];
			ncclResult_t r =
			    ncclAllReduce(p, p, bucket_len[b], ncclFloat32, ncclSum, comm, NULL);

			bucket_end[b] = crux_tb_now();
			if (r != ncclSuccess) {
				fprintf(stderr,
					"crux-tb-trainer: job %s rank %d: ncclAllReduce: %s "
					"(%s)\n",
					t->job, t->rank, ncclGetErrorString(r),
					ncclGetLastError(comm));
				goto out;
			}
		}
		end = crux_tb_now();
		fprintf(log, "%ld %llu %llu %llu", it, (unsigned long long)start,
			(unsigned long long)compute_end, (unsigned long long)end);
		for (int b = 0; b < t->buckets; b++)
			fprintf(log, " %llu", (unsigned long long)bucket_end[b]);
		fputc('\n', log);
		fflush(log);
		start = end;
	}
	if (it > 0 && crux_tb_verify(grad, elems, it - 1) < 0)
		goto out;
	fprintf(log, "# done iters=%ld\n", it);
	rc = t->stop ? 3 : 0;
out:
	if (comm)
		ncclCommDestroy(comm);
	free(grad);
	if (log != stdout)
		fclose(log);
	return rc;
}
