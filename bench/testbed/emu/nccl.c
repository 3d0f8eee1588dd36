/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NCCL API subset of the emulated trainer, on the CPU: communicators
 * bootstrapped over TCP, a ring all-reduce (reduce-scatter then all-gather)
 * pipelined in chunks, every byte carried by the NCCL net plugin named by
 * NCCL_NET_PLUGIN. Collectives are synchronous: the call returns when the
 * result is in the receive buffer (a CPU "stream" that is always drained).
 *
 * Variables (strict parsing):
 *   CRUX_TB_CHUNK_BYTES  pipelining chunk, default 131072 (4 KiB .. 64 MiB)
 *   CRUX_TB_WINDOW       chunks in flight per direction, default 4 (1 .. 16)
 *   CRUX_TB_PROGRESS     file to append "<CLOCK_MONOTONIC ns> <bytes received>" to,
 *                        at most every 50 ms while data arrives (the testbed's
 *                        per-second progress measure); unset: nothing written
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "crux/env.h"
#include "emu.h"

#define CRUX_TB_NCCL_VERSION	   22809
#define CRUX_TB_CONNECT_TIMEOUT_MS 120000ull
#define CRUX_TB_MAX_WINDOW	   16

struct crux_tb_emu {
	pthread_mutex_t lock;
	bool tried; /* plugin load attempted */
	crux_status_t load_status;
	struct crux_tb_net net;
	size_t chunk_bytes;
	int window;
	int group_depth;
	int progress_fd; /* CRUX_TB_PROGRESS, -1 when unset */
	uint64_t progress_last_ns;
	uint64_t progress_bytes;
	char last_error[1024];
};

static struct crux_tb_emu crux_tb_emu_ctx = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .progress_fd = -1,
};

struct ncclComm {
	int rank;
	int nranks;
	uint64_t comm_id;
	void *net_ctx;
	void *lcomm;
	void *scomm;	      /* to rank+1 */
	void *rcomm;	      /* from rank-1 */
	unsigned char *stage; /* window slots of chunk_bytes for receives */
	void *stage_mh;
	size_t chunk;
	int window;
	ncclResult_t async_error;
	char err[512];
};

static void crux_tb_set_error(ncclComm_t comm, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void crux_tb_set_error(ncclComm_t comm, const char *fmt, ...)
{
	struct crux_tb_emu *e = &crux_tb_emu_ctx;
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "nccl-emu[%d]: %s\n", (int)getpid(), msg);
	if (comm)
		snprintf(comm->err, sizeof(comm->err), "%s", msg);
	pthread_mutex_lock(&e->lock);
	snprintf(e->last_error, sizeof(e->last_error), "%s", msg);
	pthread_mutex_unlock(&e->lock);
}

static ncclResult_t crux_tb_result(crux_status_t st)
{
	switch (st) {
	case CRUX_OK:
		return ncclSuccess;
	case CRUX_ERR_INVAL:
	case CRUX_ERR_RANGE:
		return ncclInvalidArgument;
	case CRUX_ERR_REMOTE:
		return ncclRemoteError;
	case CRUX_ERR_NOMEM:
	case CRUX_ERR_IO:
	case CRUX_ERR_TIMEOUT:
	case CRUX_ERR_NOENT:
	default:
		return ncclSystemError;
	}
}

/* Load the plugin and read the settings once per process. */
static crux_status_t crux_tb_emu_ready(void)
{
	struct crux_tb_emu *e = &crux_tb_emu_ctx;
	char err[1024] = "";
	crux_status_t st;
	long long v;

	pthread_mutex_lock(&e->lock);
	if (e->tried) {
		st = e->load_status;
		pthread_mutex_unlock(&e->lock);
		return st;
	}
	e->tried = true;
	st = crux_env_int(NULL, NULL, "CRUX_TB_CHUNK_BYTES", 131072, 4096, 64ll << 20, &v, err,
			  sizeof(err));
	if (st == CRUX_OK) {
		e->chunk_bytes = (size_t)v;
		st = crux_env_int(NULL, NULL, "CRUX_TB_WINDOW", 4, 1, CRUX_TB_MAX_WINDOW, &v, err,
				  sizeof(err));
	}
	if (st == CRUX_OK) {
		const char *prog = crux_env_get(NULL, NULL, "CRUX_TB_PROGRESS");

		e->window = (int)v;
		if (prog) {
			e->progress_fd =
			    open(prog, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
			if (e->progress_fd < 0) {
				snprintf(err, sizeof(err),
					 "CRUX_TB_PROGRESS='%s' cannot be opened: %s", prog,
					 strerror(errno));
				st = CRUX_ERR_INVAL;
			}
		}
	}
	if (st == CRUX_OK)
		st = crux_tb_net_load(&e->net, err, sizeof(err));
	e->load_status = st;
	if (st != CRUX_OK)
		snprintf(e->last_error, sizeof(e->last_error), "%s", err);
	pthread_mutex_unlock(&e->lock);
	if (st != CRUX_OK)
		fprintf(stderr, "nccl-emu[%d]: %s\n", (int)getpid(), err);
	return st;
}

/* Note received bytes in the progress file, at most every 50 ms. */
static void crux_tb_progress(size_t bytes)
{
	struct crux_tb_emu *e = &crux_tb_emu_ctx;
	struct timespec ts;
	uint64_t now;

	if (e->progress_fd < 0)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	pthread_mutex_lock(&e->lock);
	e->progress_bytes += bytes;
	if (now - e->progress_last_ns >= 50000000ull) {
		char line[64];
		int n = snprintf(line, sizeof(line), "%llu %llu\n", (unsigned long long)now,
				 (unsigned long long)e->progress_bytes);
		e->progress_last_ns = now;
		if (write(e->progress_fd, line, (size_t)n) != n)
			e->progress_fd = -1; /* a measurement aid: never fail the job for it */
	}
	pthread_mutex_unlock(&e->lock);
}

static void crux_tb_backoff(unsigned *idle)
{
	/* Many emulated GPUs share two cores: poll gently once nothing moves. */
	struct timespec ts = {0, 0};

	if (++*idle < 16)
		return;
	ts.tv_nsec = *idle < 64 ? 50000 : 500000;
	nanosleep(&ts, NULL);
}

CRUX_TB_EXPORT ncclResult_t ncclGetVersion(int *version)
{
	if (!version)
		return ncclInvalidArgument;
	*version = CRUX_TB_NCCL_VERSION;
	return ncclSuccess;
}

CRUX_TB_EXPORT const char *ncclGetErrorString(ncclResult_t result)
{
	switch (result) {
	case ncclSuccess:
		return "no error";
	case ncclUnhandledCudaError:
		return "unhandled cuda error";
	case ncclSystemError:
		return "unhandled system error";
	case ncclInternalError:
		return "internal error";
	case ncclInvalidArgument:
		return "invalid argument";
	case ncclInvalidUsage:
		return "invalid usage";
	case ncclRemoteError:
		return "remote process exited or there was a network error";
	case ncclInProgress:
		return "NCCL operation in progress";
	default:
		return "unknown result code";
	}
}

CRUX_TB_EXPORT const char *ncclGetLastError(ncclComm_t comm)
{
	if (comm && comm->err[0])
		return comm->err;
	/* Read without the lock: NCCL's own contract is "last error, best effort". */
	return crux_tb_emu_ctx.last_error;
}

CRUX_TB_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
	struct crux_tb_uid uid;
	char err[256];
	crux_status_t st;

	if (!uniqueId)
		return ncclInvalidArgument;
	st = crux_tb_boot_root_start(&uid, err, sizeof(err));
	if (st != CRUX_OK) {
		crux_tb_set_error(NULL, "ncclGetUniqueId: %s", err);
		return crux_tb_result(st);
	}
	_Static_assert(sizeof(uid) <= sizeof(uniqueId->internal), "unique id too small");
	memset(uniqueId, 0, sizeof(*uniqueId));
	memcpy(uniqueId->internal, &uid, sizeof(uid));
	return ncclSuccess;
}

static void crux_tb_comm_free(ncclComm_t comm)
{
	struct crux_tb_net *net = &crux_tb_emu_ctx.net;

	if (!comm)
		return;
	if (comm->stage_mh)
		crux_tb_net_dereg(net, comm->rcomm, comm->stage_mh);
	crux_tb_net_close_send(net, comm->scomm);
	crux_tb_net_close_recv(net, comm->rcomm);
	crux_tb_net_close_listen(net, comm->lcomm);
	if (comm->net_ctx || net->version == 11)
		crux_tb_net_finalize(net, comm->net_ctx);
	free(comm->stage);
	free(comm);
}

static ncclResult_t crux_tb_comm_init(ncclComm_t *out, int nranks, ncclUniqueId id, int rank,
				      int traffic_class)
{
	struct crux_tb_emu *e = &crux_tb_emu_ctx;
	struct crux_tb_net *net = &e->net;
	unsigned char handle[CRUXN_NET_HANDLE_MAXSIZE];
	unsigned char *all = NULL;
	struct crux_tb_uid uid;
	ncclComm_t comm = NULL;
	char err[512];
	crux_status_t st;
	uint64_t deadline;
	unsigned idle = 0;

	if (!out) {
		crux_tb_set_error(NULL, "ncclCommInitRank: NULL communicator pointer");
		return ncclInvalidArgument;
	}
	st = crux_tb_emu_ready();
	if (st != CRUX_OK)
		return crux_tb_result(st);
	memcpy(&uid, id.internal, sizeof(uid));
	comm = calloc(1, sizeof(*comm));
	all = calloc((size_t)(nranks > 0 ? nranks : 1), CRUXN_NET_HANDLE_MAXSIZE);
	if (!comm || !all) {
		st = CRUX_ERR_NOMEM;
		crux_tb_set_error(NULL, "ncclCommInitRank: out of memory");
		goto fail;
	}
	comm->rank = rank;
	comm->nranks = nranks;
	comm->comm_id = uid.comm_id;
	comm->chunk = e->chunk_bytes;
	comm->window = e->window;
	st = crux_tb_net_init(net, uid.comm_id, traffic_class, &comm->net_ctx);
	if (st != CRUX_OK) {
		crux_tb_set_error(NULL, "ncclCommInitRank: net plugin %s (%s) init failed: %s",
				  net->name ? net->name : "?", net->path, crux_status_str(st));
		goto fail;
	}
	memset(handle, 0, sizeof(handle));
	st = crux_tb_net_listen(net, comm->net_ctx, handle, &comm->lcomm);
	if (st != CRUX_OK) {
		crux_tb_set_error(NULL, "ncclCommInitRank: plugin listen failed: %s",
				  crux_status_str(st));
		goto fail;
	}
	st = crux_tb_boot_exchange(&uid, rank, nranks, handle, all, CRUX_TB_CONNECT_TIMEOUT_MS, err,
				   sizeof(err));
	if (st != CRUX_OK) {
		crux_tb_set_error(NULL, "ncclCommInitRank: %s", err);
		goto fail;
	}
	if (nranks > 1) {
		unsigned char *next =
		    all + (size_t)((rank + 1) % nranks) * CRUXN_NET_HANDLE_MAXSIZE;

		deadline = (uint64_t)time(NULL) + CRUX_TB_CONNECT_TIMEOUT_MS / 1000;
		while (!comm->scomm || !comm->rcomm) {
			bool moved = false;

			if (!comm->scomm) {
				st = crux_tb_net_connect(net, comm->net_ctx, traffic_class, next,
							 &comm->scomm);
				if (st != CRUX_OK)
					break;
				moved |= comm->scomm != NULL;
			}
			if (!comm->rcomm) {
				st = crux_tb_net_accept(net, comm->lcomm, &comm->rcomm);
				if (st != CRUX_OK)
					break;
				moved |= comm->rcomm != NULL;
			}
			if ((uint64_t)time(NULL) > deadline) {
				st = CRUX_ERR_TIMEOUT;
				break;
			}
			if (moved)
				idle = 0;
			else
				crux_tb_backoff(&idle);
		}
		if (st != CRUX_OK) {
			crux_tb_set_error(NULL,
					  "ncclCommInitRank: ring connection of rank %d failed: %s",
					  rank, crux_status_str(st));
			goto fail;
		}
		comm->stage = malloc(comm->chunk * (size_t)comm->window);
		if (!comm->stage) {
			st = CRUX_ERR_NOMEM;
			crux_tb_set_error(NULL, "ncclCommInitRank: out of memory");
			goto fail;
		}
		st = crux_tb_net_reg(net, comm->rcomm, comm->stage,
				     comm->chunk * (size_t)comm->window, &comm->stage_mh);
		if (st != CRUX_OK) {
			crux_tb_set_error(NULL, "ncclCommInitRank: regMr failed: %s",
					  crux_status_str(st));
			goto fail;
		}
	}
	free(all);
	*out = comm;
	return ncclSuccess;
fail:
	free(all);
	crux_tb_comm_free(comm);
	return crux_tb_result(st);
}

CRUX_TB_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId,
					     int rank)
{
	return crux_tb_comm_init(comm, nranks, commId, rank, CRUXN_NET_TRAFFIC_CLASS_UNDEF);
}

CRUX_TB_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
						   ncclUniqueId commId, int rank,
						   ncclConfig_t *config)
{
	int tc = CRUXN_NET_TRAFFIC_CLASS_UNDEF;

	/* Only the traffic class means anything to a CPU emulator; NCCL reads 'size' bytes. */
	if (config && config->size >= offsetof(ncclConfig_t, trafficClass) + sizeof(int) &&
	    config->trafficClass != NCCL_CONFIG_UNDEF_INT)
		tc = config->trafficClass;
	return crux_tb_comm_init(comm, nranks, commId, rank, tc);
}

CRUX_TB_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
	return comm ? ncclSuccess : ncclInvalidArgument;
}

static crux_status_t crux_tb_ring_allreduce(ncclComm_t comm, unsigned char *buf, size_t count,
					    ncclDataType_t type, ncclRedOp_t op);

CRUX_TB_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	int32_t token = 1;

	if (!comm)
		return ncclInvalidArgument;
	/*
	 * A last tiny all-reduce as a barrier: once it completes here, every
	 * rank has received all the data of earlier collectives, so closing
	 * our connections cannot cut off a peer's last transfer.
	 */
	if (comm->nranks > 1 && comm->async_error == ncclSuccess)
		(void)crux_tb_ring_allreduce(comm, (unsigned char *)&token, 1, ncclInt32, ncclSum);
	crux_tb_comm_free(comm);
	return ncclSuccess;
}

CRUX_TB_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
	return ncclCommDestroy(comm);
}

CRUX_TB_EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
	if (!comm || !count)
		return ncclInvalidArgument;
	*count = comm->nranks;
	return ncclSuccess;
}

CRUX_TB_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
	if (!comm || !rank)
		return ncclInvalidArgument;
	*rank = comm->rank;
	return ncclSuccess;
}

CRUX_TB_EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
	if (!comm || !device)
		return ncclInvalidArgument;
	*device = 0;
	return ncclSuccess;
}

CRUX_TB_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
	if (!comm || !asyncError)
		return ncclInvalidArgument;
	*asyncError = comm->async_error;
	return ncclSuccess;
}

CRUX_TB_EXPORT ncclResult_t ncclGroupStart(void)
{
	__atomic_add_fetch(&crux_tb_emu_ctx.group_depth, 1, __ATOMIC_RELAXED);
	return ncclSuccess;
}

CRUX_TB_EXPORT ncclResult_t ncclGroupEnd(void)
{
	/* Collectives run to completion when called, so a group has nothing left to launch. */
	if (__atomic_sub_fetch(&crux_tb_emu_ctx.group_depth, 1, __ATOMIC_RELAXED) < 0) {
		__atomic_store_n(&crux_tb_emu_ctx.group_depth, 0, __ATOMIC_RELAXED);
		return ncclInvalidUsage;
	}
	return ncclSuccess;
}

/* Ring schedule: which segment a step sends and receives on rank r of n. */
static int crux_tb_seg_send(int r, int n, int step)
{
	int s = step < n - 1 ? r - step : r + 1 - (step - (n - 1));
	return ((s % n) + n) % n;
}

static int crux_tb_seg_recv(int r, int n, int step)
{
	int s = step < n - 1 ? r - step - 1 : r - (step - (n - 1));
	return ((s % n) + n) % n;
}

struct crux_tb_ring {
	size_t esz;
	size_t seg_elems;   /* elements per segment (the last may be shorter) */
	size_t chunk_elems; /* elements per chunk */
	size_t count;
	int nchunks; /* chunks per segment */
};

/* Element range [*off, *off + *len) of chunk c of segment s. */
static void crux_tb_chunk_range(const struct crux_tb_ring *g, int s, int c, size_t *off,
				size_t *len)
{
	size_t seg_lo = (size_t)s * g->seg_elems;
	size_t seg_hi = seg_lo + g->seg_elems;
	size_t lo, hi;

	if (seg_hi > g->count)
		seg_hi = g->count;
	if (seg_lo > seg_hi)
		seg_lo = seg_hi;
	lo = seg_lo + (size_t)c * g->chunk_elems;
	hi = lo + g->chunk_elems;
	if (lo > seg_hi)
		lo = seg_hi;
	if (hi > seg_hi)
		hi = seg_hi;
	*off = lo;
	*len = hi - lo;
}

static crux_status_t crux_tb_ring_allreduce(ncclComm_t comm, unsigned char *buf, size_t count,
					    ncclDataType_t type, ncclRedOp_t op)
{
	struct crux_tb_net *net = &crux_tb_emu_ctx.net;
	const int n = comm->nranks, r = comm->rank, W = comm->window;
	struct crux_tb_ring g;
	void *sreq[CRUX_TB_MAX_WINDOW], *rreq[CRUX_TB_MAX_WINDOW];
	long units, next_send = 0, next_recv = 0, sent_done = 0, recv_done = 0;
	void *mh = NULL;
	crux_status_t st;
	unsigned idle = 0;

	g.esz = crux_nccl_type_size(type);
	g.count = count;
	g.seg_elems = (count + (size_t)n - 1) / (size_t)n;
	g.chunk_elems = comm->chunk / g.esz;
	g.nchunks = (int)((g.seg_elems + g.chunk_elems - 1) / g.chunk_elems);
	if (g.nchunks < 1)
		g.nchunks = 1;
	units = (long)(2 * (n - 1)) * g.nchunks;
	st = crux_tb_net_reg(net, comm->scomm, buf, count * g.esz, &mh);
	if (st != CRUX_OK)
		return st;
	while (sent_done < units || recv_done < units) {
		bool moved = false;

		/* Post sends whose data is final: step 0, or the previous step's chunk is in. */
		while (next_send < units && next_send - sent_done < W &&
		       (next_send < g.nchunks || next_send - g.nchunks < recv_done)) {
			int step = (int)(next_send / g.nchunks), c = (int)(next_send % g.nchunks);
			size_t off, len;
			void *req;

			crux_tb_chunk_range(&g, crux_tb_seg_send(r, n, step), c, &off, &len);
			st = crux_tb_net_isend(net, comm->scomm, buf + off * g.esz, len * g.esz, mh,
					       &req);
			if (st != CRUX_OK)
				goto out;
			if (!req)
				break;
			sreq[next_send % W] = req;
			next_send++;
			moved = true;
		}
		while (next_recv < units && next_recv - recv_done < W) {
			void *req;

			st = crux_tb_net_irecv(net, comm->rcomm,
					       comm->stage + (size_t)(next_recv % W) * comm->chunk,
					       comm->chunk, comm->stage_mh, &req);
			if (st != CRUX_OK)
				goto out;
			if (!req)
				break;
			rreq[next_recv % W] = req;
			next_recv++;
			moved = true;
		}
		/* Complete in posting order: sends and receives match in order anyway. */
		while (sent_done < next_send) {
			bool done = false;
			size_t sz = 0;

			st = crux_tb_net_test(net, sreq[sent_done % W], &done, &sz);
			if (st != CRUX_OK)
				goto out;
			if (!done)
				break;
			sent_done++;
			moved = true;
		}
		while (recv_done < next_recv) {
			int step = (int)(recv_done / g.nchunks), c = (int)(recv_done % g.nchunks);
			unsigned char *slot = comm->stage + (size_t)(recv_done % W) * comm->chunk;
			bool done = false;
			size_t sz = 0, off, len;

			st = crux_tb_net_test(net, rreq[recv_done % W], &done, &sz);
			if (st != CRUX_OK)
				goto out;
			if (!done)
				break;
			crux_tb_chunk_range(&g, crux_tb_seg_recv(r, n, step), c, &off, &len);
			if (sz != len * g.esz) {
				crux_tb_set_error(comm,
						  "all-reduce: rank %d got %zu bytes from rank %d "
						  "where %zu were due (step %d, chunk %d)",
						  r, sz, (r + n - 1) % n, len * g.esz, step, c);
				st = CRUX_ERR_REMOTE;
				goto out;
			}
			if (step < n - 1)
				crux_tb_reduce(buf + off * g.esz, slot, len, type, op);
			else
				memcpy(buf + off * g.esz, slot, len * g.esz);
			recv_done++;
			moved = true;
			crux_tb_progress(sz);
		}
		if (moved)
			idle = 0;
		else
			crux_tb_backoff(&idle);
	}
	if (op == ncclAvg)
		crux_tb_reduce_avg_finish(buf, count, type, n);
	st = CRUX_OK;
out:
	crux_tb_net_dereg(net, comm->scomm, mh);
	return st;
}

CRUX_TB_EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
					  ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
					  cudaStream_t stream)
{
	crux_status_t st;

	(void)stream;
	if (!comm || (!recvbuff && count) || (!sendbuff && count)) {
		crux_tb_set_error(comm, "ncclAllReduce: NULL communicator or buffer");
		return ncclInvalidArgument;
	}
	if (!crux_tb_reduce_supported(datatype, op)) {
		crux_tb_set_error(comm,
				  "ncclAllReduce: datatype %d with op %d is not supported by the "
				  "CPU emulator (integers, float32, float64; sum/prod/max/min/avg)",
				  (int)datatype, (int)op);
		return ncclInvalidArgument;
	}
	if (comm->async_error != ncclSuccess)
		return comm->async_error;
	if (sendbuff != recvbuff && count)
		memmove(recvbuff, sendbuff, count * crux_nccl_type_size(datatype));
	if (comm->nranks == 1 || !count)
		return ncclSuccess;
	st = crux_tb_ring_allreduce(comm, recvbuff, count, datatype, op);
	if (st != CRUX_OK) {
		if (!comm->err[0])
			crux_tb_set_error(comm, "ncclAllReduce: transfer failed on rank %d: %s",
					  comm->rank, crux_status_str(st));
		/* A broken ring stays broken: the peers' schedules no longer line up. */
		comm->async_error = crux_tb_result(st);
		return comm->async_error;
	}
	return ncclSuccess;
}
