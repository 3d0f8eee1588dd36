/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The exported NCCL entry points. Each one finds the real function, and
 * unless it is a nested call (NCCL calling its own API) or the preload is
 * off, stamps the host clock around the real call, optionally records CUDA
 * events on the call's stream, and pushes one fixed-size record into the
 * lock-free ring. No lock, allocation or system call on this path; the
 * result is returned untouched.
 */
#include "crux/clock.h"
#include "crux/collect.h"
#include "crux/collect_nccl.h"
#include "crux/log.h"
#include "crux/nccl_api.h"

#define CRUXP_EXPORT __attribute__((visibility("default")))

/* Per-thread part of the context: recursion guard and group state. */
struct cruxp_tls {
	int depth;
	int group;
	int group_calls; /* collectives queued in the open group */
	uintptr_t group_stream;
};

static __thread struct cruxp_tls cruxp_tls __attribute__((tls_model("initial-exec")));

struct pend {
	uint64_t t0;
	uint32_t slot;
};

static inline bool ok_result(ncclResult_t r)
{
	return r == ncclSuccess || r == ncclInProgress;
}

static inline bool enter(struct cruxp_tls *t)
{
	if (t->depth || !cruxc_active())
		return false;
	t->depth = 1;
	return true;
}

static inline void begin(struct cruxp_tls *t, struct pend *p, cudaStream_t stream)
{
	p->t0 = crux_now_ns();
	p->slot = UINT32_MAX;
	if (t->group) {
		/* Inside a group the work starts at ncclGroupEnd, on this stream. */
		if (!t->group_stream)
			t->group_stream = (uintptr_t)stream;
		t->group_calls++;
		return;
	}
	if (cruxc_events_on())
		p->slot = cruxc_events_begin(cruxc_hot.events, stream, p->t0);
}

static inline void finish(struct cruxp_tls *t, const struct pend *p, ncclResult_t r, int op,
			  size_t count, ncclDataType_t dtype, int peer, ncclComm_t comm,
			  cudaStream_t stream)
{
	struct cruxc_call c;

	if (p->slot != UINT32_MAX) {
		if (ok_result(r))
			cruxc_events_end(cruxc_hot.events, p->slot, stream);
		else
			cruxc_events_cancel(cruxc_hot.events, p->slot);
	}
	if (ok_result(r)) {
		c.t_enter = p->t0;
		c.t_exit = crux_now_ns();
		c.count = count;
		c.comm = (uintptr_t)comm;
		c.stream = (uintptr_t)stream;
		c.peer = peer;
		c.ev_slot = p->slot;
		c.op = (uint8_t)op;
		c.dtype = (uint8_t)dtype;
		cruxc_push(&c);
	}
	t->depth = 0;
}

typedef ncclResult_t (*coll_red_fn)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
				    ncclComm_t, cudaStream_t);
typedef ncclResult_t (*coll_fn)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
				cudaStream_t);
typedef ncclResult_t (*coll_root_fn)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
				     cudaStream_t);
typedef ncclResult_t (*reduce_fn)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int,
				  ncclComm_t, cudaStream_t);
typedef ncclResult_t (*bcast_fn)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
typedef ncclResult_t (*send_fn)(const void *, size_t, ncclDataType_t, int, ncclComm_t,
				cudaStream_t);
typedef ncclResult_t (*recv_fn)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
typedef ncclResult_t (*void_fn)(void);
typedef ncclResult_t (*comm_fn)(ncclComm_t);

/* One collective: the same steps for every signature. */
#define CRUXP_WRAP(FN, TYPE, OP, COUNT, DTYPE, PEER, COMM, STREAM, ...)                            \
	do {                                                                                       \
		TYPE real = (TYPE)cruxc_real(FN);                                                  \
		struct cruxp_tls *t = &cruxp_tls;                                                  \
		struct pend p;                                                                     \
		ncclResult_t r;                                                                    \
		if (__builtin_expect(!real, 0))                                                    \
			return ncclSystemError;                                                    \
		if (!enter(t))                                                                     \
			return real(__VA_ARGS__);                                                  \
		begin(t, &p, STREAM);                                                              \
		r = real(__VA_ARGS__);                                                             \
		finish(t, &p, r, OP, COUNT, DTYPE, PEER, COMM, STREAM);                            \
		return r;                                                                          \
	} while (0)

CRUXP_EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
					ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
					cudaStream_t stream)
{
	CRUXP_WRAP(CRUXC_FN_ALLREDUCE, coll_red_fn, CRUXC_OP_ALLREDUCE, count, datatype, -1, comm,
		   stream, sendbuff, recvbuff, count, datatype, op, comm, stream);
}

CRUXP_EXPORT ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
					ncclDataType_t datatype, ncclComm_t comm,
					cudaStream_t stream)
{
	CRUXP_WRAP(CRUXC_FN_ALLGATHER, coll_fn, CRUXC_OP_ALLGATHER, sendcount, datatype, -1, comm,
		   stream, sendbuff, recvbuff, sendcount, datatype, comm, stream);
}

CRUXP_EXPORT ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
					    ncclDataType_t datatype, ncclRedOp_t op,
					    ncclComm_t comm, cudaStream_t stream)
{
	CRUXP_WRAP(CRUXC_FN_REDUCESCATTER, coll_red_fn, CRUXC_OP_REDUCESCATTER, recvcount, datatype,
		   -1, comm, stream, sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
}

CRUXP_EXPORT ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
					ncclDataType_t datatype, int root, ncclComm_t comm,
					cudaStream_t stream)
{
	CRUXP_WRAP(CRUXC_FN_BROADCAST, coll_root_fn, CRUXC_OP_BROADCAST, count, datatype, root,
		   comm, stream, sendbuff, recvbuff, count, datatype, root, comm, stream);
}

CRUXP_EXPORT ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
				    ncclComm_t comm, cudaStream_t stream)
{
	CRUXP_WRAP(CRUXC_FN_BCAST, bcast_fn, CRUXC_OP_BROADCAST, count, datatype, root, comm,
		   stream, buff, count, datatype, root, comm, stream);
}

CRUXP_EXPORT ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
				     ncclDataType_t datatype, ncclRedOp_t op, int root,
				     ncclComm_t comm, cudaStream_t stream)
{
	CRUXP_WRAP(CRUXC_FN_REDUCE, reduce_fn, CRUXC_OP_REDUCE, count, datatype, root, comm, stream,
		   sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

CRUXP_EXPORT ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
				       ncclDataType_t datatype, ncclComm_t comm,
				       cudaStream_t stream)
{
	CRUXP_WRAP(CRUXC_FN_ALLTOALL, coll_fn, CRUXC_OP_ALLTOALL, count, datatype, -1, comm, stream,
		   sendbuff, recvbuff, count, datatype, comm, stream);
}

CRUXP_EXPORT ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count,
				     ncclDataType_t datatype, int root, ncclComm_t comm,
				     cudaStream_t stream)
{
	CRUXP_WRAP(CRUXC_FN_GATHER, coll_root_fn, CRUXC_OP_GATHER, count, datatype, root, comm,
		   stream, sendbuff, recvbuff, count, datatype, root, comm, stream);
}

CRUXP_EXPORT ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
				      ncclDataType_t datatype, int root, ncclComm_t comm,
				      cudaStream_t stream)
{
	CRUXP_WRAP(CRUXC_FN_SCATTER, coll_root_fn, CRUXC_OP_SCATTER, count, datatype, root, comm,
		   stream, sendbuff, recvbuff, count, datatype, root, comm, stream);
}

CRUXP_EXPORT ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype,
				   int peer, ncclComm_t comm, cudaStream_t stream)
{
	CRUXP_WRAP(CRUXC_FN_SEND, send_fn, CRUXC_OP_SEND, count, datatype, peer, comm, stream,
		   sendbuff, count, datatype, peer, comm, stream);
}

CRUXP_EXPORT ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
				   ncclComm_t comm, cudaStream_t stream)
{
	CRUXP_WRAP(CRUXC_FN_RECV, recv_fn, CRUXC_OP_RECV, count, datatype, peer, comm, stream,
		   recvbuff, count, datatype, peer, comm, stream);
}

CRUXP_EXPORT ncclResult_t ncclGroupStart(void)
{
	void_fn real = (void_fn)cruxc_real(CRUXC_FN_GROUPSTART);
	struct cruxp_tls *t = &cruxp_tls;
	ncclResult_t r;

	if (!real)
		return ncclSystemError;
	if (t->depth)
		return real();
	r = real();
	if (r == ncclSuccess)
		t->group++;
	return r;
}

CRUXP_EXPORT ncclResult_t ncclGroupEnd(void)
{
	void_fn real = (void_fn)cruxc_real(CRUXC_FN_GROUPEND);
	struct cruxp_tls *t = &cruxp_tls;
	cudaStream_t stream;
	struct pend p;
	ncclResult_t r;

	if (!real)
		return ncclSystemError;
	if (t->depth)
		return real();
	if (t->group > 0)
		t->group--;
	/* Only a group that queued collectives is communication (not one of comm inits). */
	if (t->group || !t->group_calls || !enter(t)) {
		if (!t->group) {
			t->group_stream = 0;
			t->group_calls = 0;
		}
		return real();
	}
	/* The outermost end launches the grouped work: time it on its stream. */
	stream = (cudaStream_t)t->group_stream;
	t->group_stream = 0;
	t->group_calls = 0;
	begin(t, &p, stream);
	r = real();
	finish(t, &p, r, CRUXC_OP_GROUP_END, 0, ncclInt8, -1, NULL, stream);
	return r;
}

/* ---- Who publishes: the preload or the NCCL profiler plugin ---- */

/*
 * Called by libnccl-profiler-crux.so (found with dlsym(RTLD_DEFAULT)) and by
 * our own first communicator: the first claim wins and is returned to every
 * later caller. The plugin registers its iteration mark so that
 * crux_iteration_mark() keeps working when it publishes. Not for users.
 */
CRUXP_EXPORT int crux_profile_claim(int source, void (*mark)(void))
{
	return cruxc_claim(source, mark);
}

/* ---- Communicator life cycle ---- */

static inline void created(ncclResult_t r, ncclComm_t *comm, int rank, int nranks)
{
	if (!ok_result(r) || !comm || !*comm)
		return;
	/* NCCL loaded our profiler plugin during this init: it publishes, we pass through. */
	if (crux_profile_claim(CRUXC_SRC_PRELOAD, NULL) != CRUXC_SRC_PRELOAD) {
		if (cruxc_stand_down())
			crux_info("the Crux NCCL profiler plugin profiles this process; the "
				  "preload passes calls through");
		return;
	}
	cruxc_comm_ranks((uintptr_t)*comm, &rank, &nranks);
	cruxc_comm_add((uintptr_t)*comm, rank, nranks);
}

#define CRUXP_LIFE(FN, TYPE, AFTER, ...)                                                           \
	do {                                                                                       \
		TYPE real = (TYPE)cruxc_real(FN);                                                  \
		struct cruxp_tls *t = &cruxp_tls;                                                  \
		ncclResult_t r;                                                                    \
		if (__builtin_expect(!real, 0))                                                    \
			return ncclSystemError;                                                    \
		if (t->depth)                                                                      \
			return real(__VA_ARGS__);                                                  \
		t->depth = 1;                                                                      \
		r = real(__VA_ARGS__);                                                             \
		AFTER;                                                                             \
		t->depth = 0;                                                                      \
		return r;                                                                          \
	} while (0)

typedef ncclResult_t (*init_rank_fn)(ncclComm_t *, int, ncclUniqueId, int);
typedef ncclResult_t (*init_rank_config_fn)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
typedef ncclResult_t (*init_all_fn)(ncclComm_t *, int, const int *);
typedef ncclResult_t (*init_scalable_fn)(ncclComm_t *, int, int, int, ncclUniqueId *,
					 ncclConfig_t *);
typedef ncclResult_t (*split_fn)(ncclComm_t, int, int, ncclComm_t *, ncclConfig_t *);
typedef ncclResult_t (*shrink_fn)(ncclComm_t, int *, int, ncclComm_t *, ncclConfig_t *, int);

CRUXP_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId,
					   int rank)
{
	CRUXP_LIFE(CRUXC_FN_INITRANK, init_rank_fn, created(r, comm, rank, nranks), comm, nranks,
		   commId, rank);
}

CRUXP_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId,
						 int rank, ncclConfig_t *config)
{
	CRUXP_LIFE(CRUXC_FN_INITRANKCONFIG, init_rank_config_fn, created(r, comm, rank, nranks),
		   comm, nranks, commId, rank, config);
}

CRUXP_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
	CRUXP_LIFE(CRUXC_FN_INITALL, init_all_fn,
		   for (int i = 0; comm && ok_result(r) && i < ndev; i++)
		       created(r, &comm[i], i, ndev),
		   comm, ndev, devlist);
}

CRUXP_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank,
						   int nId, ncclUniqueId *commIds,
						   ncclConfig_t *config)
{
	CRUXP_LIFE(CRUXC_FN_INITRANKSCALABLE, init_scalable_fn, created(r, newcomm, myrank, nranks),
		   newcomm, nranks, myrank, nId, commIds, config);
}

CRUXP_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
					ncclConfig_t *config)
{
	/* Rank and size of the new communicator are asked from NCCL. */
	CRUXP_LIFE(CRUXC_FN_SPLIT, split_fn, created(r, newcomm, -1, -1), comm, color, key, newcomm,
		   config);
}

CRUXP_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList,
					 int excludeRanksCount, ncclComm_t *newcomm,
					 ncclConfig_t *config, int shrinkFlags)
{
	CRUXP_LIFE(CRUXC_FN_SHRINK, shrink_fn, created(r, newcomm, -1, -1), comm, excludeRanksList,
		   excludeRanksCount, newcomm, config, shrinkFlags);
}

CRUXP_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
	CRUXP_LIFE(CRUXC_FN_FINALIZE, comm_fn, (void)0, comm);
}

CRUXP_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	CRUXP_LIFE(CRUXC_FN_DESTROY, comm_fn, cruxc_comm_remove((uintptr_t)comm), comm);
}

CRUXP_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
	CRUXP_LIFE(CRUXC_FN_ABORT, comm_fn, cruxc_comm_remove((uintptr_t)comm), comm);
}

/* ---- Explicit iteration marks ---- */

CRUXP_EXPORT void crux_iteration_mark(void)
{
	cruxc_iteration_mark();
}
