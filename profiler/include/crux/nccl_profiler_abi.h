/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Our own declaration of NCCL's profiler-plugin ABI, versions 4 to 7 (NCCL
 * 2.27 and later), written from the published facts: the event-type bits,
 * the state values we use, and the field order of the event descriptors
 * and of the function tables NCCL looks up as ncclProfiler_v4 to _v7.
 * Only what the Crux profiler plugin needs is spelled out; the unions keep
 * every member that sits before or beside one we read, so offsets match.
 */
#ifndef CRUX_NCCL_PROFILER_ABI_H
#define CRUX_NCCL_PROFILER_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ncclResult_t values (same enum representation). */
typedef enum {
	CRUXF_SUCCESS = 0,
	CRUXF_INTERNAL_ERROR = 3,
	CRUXF_INVALID_ARGUMENT = 4,
} cruxf_result_t;

/* ncclDebugLogger_t: level, subsystem flags, file, line, printf format. */
typedef void (*cruxf_logger_t)(int level, unsigned long flags, const char *file, int line,
			       const char *fmt, ...);
#define CRUXF_LOG_WARN	   2
#define CRUXF_LOG_INFO	   3
#define CRUXF_LOG_SUB_INIT 0x1UL

/* Event-type bits (descriptor 'type' and the activation mask). */
enum {
	CRUXF_EV_GROUP = 1 << 0, /* v1..v4: a launched group */
	CRUXF_EV_COLL = 1 << 1,	 /* a collective task */
	CRUXF_EV_P2P = 1 << 2,	 /* a point-to-point task */
	CRUXF_EV_PROXY_OP = 1 << 3,
	CRUXF_EV_PROXY_STEP = 1 << 4,
	CRUXF_EV_PROXY_CTRL = 1 << 5,
	CRUXF_EV_KERNEL_CH = 1 << 6,
	CRUXF_EV_NET_PLUGIN = 1 << 7,
	CRUXF_EV_GROUP_API =
	    1 << 8,		    /* v5+: ncclGroupStart..End (outermost), or an implicit group */
	CRUXF_EV_COLL_API = 1 << 9, /* v5+: one collective call */
	CRUXF_EV_P2P_API = 1 << 10, /* v5+: one ncclSend/ncclRecv call */
	CRUXF_EV_KERNEL_LAUNCH = 1 << 11,
	CRUXF_EV_CE_COLL = 1 << 12,	 /* v6+: copy-engine collective */
	CRUXF_EV_CE_SYNC = 1 << 13,	 /* v6+ */
	CRUXF_EV_CE_BATCH = 1 << 14,	 /* v6+ */
	CRUXF_EV_KERNEL_PHASE = 1 << 15, /* v7: a barrier phase inside a kernel channel */
};

/* Event states (ncclProfilerEventState_t) we act on. */
enum {
	CRUXF_STATE_KERNEL_CH_STOP = 22,       /* a kernel channel finished (GPU timer) */
	CRUXF_STATE_GROUP_START_API_STOP = 23, /* ncclGroupStart returned */
	CRUXF_STATE_GROUP_END_API_START = 24,  /* ncclGroupEnd entered: the launch */
	CRUXF_STATE_KERNEL_PHASE_STOP = 31,    /* v7: a kernel phase finished (GPU timer) */
};

/* v7 kernel phases (descriptor kernelPhase.phaseId). */
enum {
	CRUXF_PHASE_INITIAL_SYNC = 0, /* the channel waits for its peers before moving data */
	CRUXF_PHASE_COMPUTE = 1,      /* data movement and reduction */
	CRUXF_PHASE_FINAL_SYNC = 2,   /* the closing barrier */
};

typedef union {
	struct {
		size_t transSize;
	} proxyStep;
	struct {
		int appendedProxyOps;
	} proxyCtrl;
	struct {
		void *data;
	} netPlugin;
	struct {
		uint64_t pTimer;
	} kernelCh;
} cruxf_state_args_t; /* v4 to v7 alike (v7's phase stop uses kernelCh.pTimer) */

/* Members shared by v4's and v5's coll/p2p descriptors. */
#define CRUXF_COLL_FIELDS                                                                          \
	uint64_t seqNumber;                                                                        \
	const char *func;                                                                          \
	void const *sendBuff;                                                                      \
	void *recvBuff;                                                                            \
	size_t count;                                                                              \
	int root;                                                                                  \
	const char *datatype;                                                                      \
	uint8_t nChannels;                                                                         \
	uint8_t nWarps;                                                                            \
	const char *algo;                                                                          \
	const char *proto;
#define CRUXF_P2P_FIELDS                                                                           \
	const char *func;                                                                          \
	void *buff;                                                                                \
	const char *datatype;                                                                      \
	size_t count;                                                                              \
	int peer;                                                                                  \
	uint8_t nChannels;
#define CRUXF_TAIL_MEMBERS                                                                         \
	struct {                                                                                   \
		pid_t pid;                                                                         \
		uint8_t channelId;                                                                 \
		int peer;                                                                          \
		int nSteps;                                                                        \
		int chunkSize;                                                                     \
		int isSend;                                                                        \
	} proxyOp;                                                                                 \
	struct {                                                                                   \
		int step;                                                                          \
	} proxyStep;                                                                               \
	struct {                                                                                   \
		uint8_t channelId;                                                                 \
		uint64_t pTimer;                                                                   \
	} kernelCh;                                                                                \
	struct {                                                                                   \
		int64_t id;                                                                        \
		void *data;                                                                        \
	} netPlugin;

/* ---- v4 (NCCL 2.27) ---- */
typedef struct {
	uint8_t type;
	void *parentObj;
	int rank;
	union {
		struct {
			CRUXF_COLL_FIELDS
		} coll;
		struct {
			CRUXF_P2P_FIELDS
		} p2p;
		CRUXF_TAIL_MEMBERS
	};
} cruxf_descr_v4_t;

typedef struct {
	const char *name;
	cruxf_result_t (*init)(void **context, int *eActivationMask, const char *commName,
			       uint64_t commHash, int nNodes, int nranks, int rank,
			       cruxf_logger_t logfn);
	cruxf_result_t (*startEvent)(void *context, void **eHandle, cruxf_descr_v4_t *eDescr);
	cruxf_result_t (*stopEvent)(void *eHandle);
	cruxf_result_t (*recordEventState)(void *eHandle, int eState, cruxf_state_args_t *args);
	cruxf_result_t (*finalize)(void *context);
} cruxf_profiler_v4_t;

/* ---- v5 (NCCL 2.28) and v6 (2.29, 2.30: v5 plus copy-engine events) ---- */
typedef struct {
	uint64_t type;
	void *parentObj;
	int rank;
	union {
		struct {
			bool graphCaptured;
			int groupDepth;
		} groupApi;
		struct {
			const char *func;
			size_t count;
			const char *datatype;
			int root;
			void *stream;
			bool graphCaptured;
		} collApi;
		struct {
			const char *func;
			size_t count;
			const char *datatype;
			void *stream;
			bool graphCaptured;
		} p2pApi;
		struct {
			void *stream;
		} kernelLaunch;
		struct {
			CRUXF_COLL_FIELDS
			void *parentGroup;
		} coll;
		struct {
			CRUXF_P2P_FIELDS
			void *parentGroup;
		} p2p;
		CRUXF_TAIL_MEMBERS
		/* v6 adds ceColl/ceCollSync/ceCollBatch members after these; we never read them. */
		struct {
			uint64_t seqNumber;
			const char *func;
			void const *sendBuff;
			void *recvBuff;
			size_t count;
			int root;
			const char *datatype;
			const char *syncStrategy;
			bool intraBatchSync;
			uint32_t batchSize;
			uint32_t numBatches;
			uint32_t ceSeqNum;
			void *stream;
		} ceColl_v6;
	};
} cruxf_descr_v5_t;

typedef cruxf_descr_v5_t cruxf_descr_v6_t;

typedef struct {
	const char *name;
	cruxf_result_t (*init)(void **context, uint64_t commId, int *eActivationMask,
			       const char *commName, int nNodes, int nranks, int rank,
			       cruxf_logger_t logfn);
	cruxf_result_t (*startEvent)(void *context, void **eHandle, cruxf_descr_v5_t *eDescr);
	cruxf_result_t (*stopEvent)(void *eHandle);
	cruxf_result_t (*recordEventState)(void *eHandle, int eState, cruxf_state_args_t *args);
	cruxf_result_t (*finalize)(void *context);
} cruxf_profiler_v5_t;

typedef cruxf_profiler_v5_t cruxf_profiler_v6_t; /* same table; v6 descriptors are a superset */

/*
 * ---- v7: v6 plus a per-call user tag (collApi, p2pApi, coll, p2p, ceColl;
 * 0 = untagged) and kernel phase events. Every member keeps its v6 offset:
 * the new fields come last in their structs, so a v7 descriptor can be read
 * as a v6 or v5 one for the event types those versions know.
 */
typedef struct {
	uint64_t type;
	void *parentObj;
	int rank;
	union {
		struct {
			bool graphCaptured;
			int groupDepth;
		} groupApi;
		struct {
			const char *func;
			size_t count;
			const char *datatype;
			int root;
			void *stream;
			bool graphCaptured;
			uint64_t userTag;
		} collApi;
		struct {
			const char *func;
			size_t count;
			const char *datatype;
			void *stream;
			bool graphCaptured;
			uint64_t userTag;
		} p2pApi;
		struct {
			void *stream;
		} kernelLaunch;
		struct {
			CRUXF_COLL_FIELDS
			void *parentGroup;
			const char *kernelVariant;
			bool isSymColl;
			uint64_t userTag;
		} coll;
		struct {
			CRUXF_P2P_FIELDS
			void *parentGroup;
			uint64_t userTag;
		} p2p;
		CRUXF_TAIL_MEMBERS
		struct {
			uint64_t seqNumber;
			const char *func;
			void const *sendBuff;
			void *recvBuff;
			size_t count;
			int root;
			const char *datatype;
			const char *syncStrategy;
			bool intraBatchSync;
			uint32_t batchSize;
			uint32_t numBatches;
			uint32_t ceSeqNum;
			void *stream;
			uint64_t userTag;
		} ceColl;
		struct {
			bool isComplete;
			int nRanks;
		} ceCollSync;
		struct {
			int numOps;
			size_t totalBytes;
			bool useIntraSync;
		} ceCollBatch;
		struct {
			uint8_t channelId;
			uint8_t phaseId; /* CRUXF_PHASE_* */
			const char *phaseName;
			uint64_t pTimer; /* start, GPU global timer (ns) */
		} kernelPhase;
	};
} cruxf_descr_v7_t;

typedef struct {
	const char *name;
	cruxf_result_t (*init)(void **context, uint64_t commId, int *eActivationMask,
			       const char *commName, int nNodes, int nranks, int rank,
			       cruxf_logger_t logfn);
	cruxf_result_t (*startEvent)(void *context, void **eHandle, cruxf_descr_v7_t *eDescr);
	cruxf_result_t (*stopEvent)(void *eHandle);
	cruxf_result_t (*recordEventState)(void *eHandle, int eState, cruxf_state_args_t *args);
	cruxf_result_t (*finalize)(void *context);
} cruxf_profiler_v7_t;

#ifdef __cplusplus
}
#endif
#endif /* CRUX_NCCL_PROFILER_ABI_H */
