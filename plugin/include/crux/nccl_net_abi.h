/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NCCL network-plugin ABI, versions 6 to 12, declared under Crux names.
 *
 * NCCL ships no plugin header, so every plugin declares the layout itself.
 * Field order and types below are the ABI (see shared/docs/nccl-net-abi.md);
 * the names are ours so this header can sit next to nccl.h without clashes.
 * Anything that dlopens a net plugin (the plugin itself, the testbed's job
 * emulator, the conformance tests) uses this header.
 *
 * Stable: only additions, never changes to existing declarations.
 */
#ifndef CRUX_NCCL_NET_ABI_H
#define CRUX_NCCL_NET_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Constants ------------------------------------------------------------ */

#define CRUXN_NET_HANDLE_MAXSIZE   128 /* NCCL_NET_HANDLE_MAXSIZE */
#define CRUXN_NET_MAX_REQUESTS	   32  /* outstanding requests per comm */
#define CRUXN_NET_MAX_RECVS	   8   /* grouped receive slots the plugin offers */
#define CRUXN_NET_MAX_DEVS_PER_NIC 4   /* devices in one virtual NIC */

/* Pointer kinds (ptrSupport bits, regMr type). */
#define CRUXN_PTR_HOST	 0x1
#define CRUXN_PTR_CUDA	 0x2
#define CRUXN_PTR_DMABUF 0x4

/* NCCL pre-sets *request to this for receives whose completion it does not need. */
#define CRUXN_NET_OPTIONAL_RECV_COMPLETION 0x1

#define CRUXN_NET_TRAFFIC_CLASS_UNDEF (-1)

/* Largest transfer size a plugin may announce (maxP2pBytes, maxCollBytes). */
#define CRUXN_NET_MAX_BYTES (1ULL << 40)

/* v12: devices in one virtual NIC (v9..v11: CRUXN_NET_MAX_DEVS_PER_NIC). */
#define CRUXN_NET_MAX_DEVS_PER_NIC_V12 8
/* v12: railId / planeId of a device that belongs to no rail or plane. */
#define CRUXN_NET_ID_UNDEF (-1)
/* setNetAttr: a field NCCL leaves undefined (a count, or all bits of op/algo/proto). */
#define CRUXN_NET_ATTR_UNDEF (-1)

/* Bit numbers of setNetAttr's op mask: NCCL's ncclFunc_t values. */
enum cruxn_func {
	CRUXN_FUNC_BROADCAST = 0,
	CRUXN_FUNC_REDUCE = 1,
	CRUXN_FUNC_ALLGATHER = 2,
	CRUXN_FUNC_REDUCESCATTER = 3,
	CRUXN_FUNC_ALLREDUCE = 4,
	CRUXN_FUNC_SENDRECV = 5,
	CRUXN_FUNC_SEND = 6,
	CRUXN_FUNC_RECV = 7,
	CRUXN_FUNC_ALLTOALL = 8,
	CRUXN_FUNC_SCATTER = 9,
	CRUXN_FUNC_GATHER = 10,
	CRUXN_FUNC_ALLGATHERV = 11,
};

/* Symbol names NCCL looks up, newest first. */
#define CRUXN_SYM_V12 "ncclNetPlugin_v12"
#define CRUXN_SYM_V11 "ncclNetPlugin_v11"
#define CRUXN_SYM_V10 "ncclNetPlugin_v10"
#define CRUXN_SYM_V9  "ncclNetPlugin_v9"
#define CRUXN_SYM_V8  "ncclNetPlugin_v8"
#define CRUXN_SYM_V7  "ncclNetPlugin_v7"
#define CRUXN_SYM_V6  "ncclNetPlugin_v6"

/* ncclResult_t: same values, same (enum) representation. */
typedef enum cruxn_result {
	CRUXN_SUCCESS = 0,
	CRUXN_UNHANDLED_CUDA_ERROR = 1,
	CRUXN_SYSTEM_ERROR = 2,
	CRUXN_INTERNAL_ERROR = 3,
	CRUXN_INVALID_ARGUMENT = 4,
	CRUXN_INVALID_USAGE = 5,
	CRUXN_REMOTE_ERROR = 6,
} cruxn_result_t;

/* ncclDebugLogLevel */
typedef enum cruxn_log_level {
	CRUXN_LOG_NONE = 0,
	CRUXN_LOG_VERSION = 1,
	CRUXN_LOG_WARN = 2,
	CRUXN_LOG_INFO = 3,
	CRUXN_LOG_ABORT = 4,
	CRUXN_LOG_TRACE = 5,
} cruxn_log_level_t;

/* ncclDebugLogSubSys flags */
#define CRUXN_LOG_SUB_INIT	0x1UL
#define CRUXN_LOG_SUB_COLL	0x2UL
#define CRUXN_LOG_SUB_P2P	0x4UL
#define CRUXN_LOG_SUB_SHM	0x8UL
#define CRUXN_LOG_SUB_NET	0x10UL
#define CRUXN_LOG_SUB_GRAPH	0x20UL
#define CRUXN_LOG_SUB_TUNING	0x40UL
#define CRUXN_LOG_SUB_ENV	0x80UL
#define CRUXN_LOG_SUB_ALLOC	0x100UL
#define CRUXN_LOG_SUB_CALL	0x200UL
#define CRUXN_LOG_SUB_PROXY	0x400UL
#define CRUXN_LOG_SUB_NVLS	0x800UL
#define CRUXN_LOG_SUB_BOOTSTRAP 0x1000UL
#define CRUXN_LOG_SUB_REG	0x2000UL
#define CRUXN_LOG_SUB_PROFILE	0x4000UL

typedef void (*cruxn_logger_t)(cruxn_log_level_t level, unsigned long flags, const char *file,
			       int line, const char *fmt, ...);

/* Profiler callback event types (v10/v11 init). */
enum cruxn_prof_event {
	CRUXN_PROF_START = 0,
	CRUXN_PROF_STOP = 1,
	CRUXN_PROF_UPDATE = 2,
	CRUXN_PROF_UPDATE_AND_STOP = 3,
};
typedef cruxn_result_t (*cruxn_prof_cb_t)(void **ehandle, int type, void *phandle,
					  int64_t plugin_id, void *ext_data);

/* ---- Device handles (v7+) ------------------------------------------------- */

typedef enum cruxn_dev_type {
	CRUXN_DEV_HOST = 0,
	CRUXN_DEV_UNPACK = 1,
} cruxn_dev_type_t;

typedef struct cruxn_dev_handle {
	cruxn_dev_type_t netDeviceType;
	int netDeviceVersion; /* 0: no device offload */
	void *handle;
	size_t size;
	int needsProxyProgress;
} cruxn_dev_handle_t;

/* ---- Properties ----------------------------------------------------------- */

typedef struct cruxn_props_v6 {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int speed; /* Mbit/s */
	int port;
	float latency; /* us */
	int maxComms;
	int maxRecvs;
} cruxn_props_v6_t;

typedef struct cruxn_props_v7 {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	cruxn_dev_type_t netDeviceType;
	int netDeviceVersion;
} cruxn_props_v7_t;

typedef struct cruxn_props_v8 {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	cruxn_dev_type_t netDeviceType;
	int netDeviceVersion;
} cruxn_props_v8_t;

typedef struct cruxn_vprops {
	int ndevs;
	int devs[CRUXN_NET_MAX_DEVS_PER_NIC];
} cruxn_vprops_t;

typedef struct cruxn_props_v9 {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	cruxn_dev_type_t netDeviceType;
	int netDeviceVersion;
	cruxn_vprops_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
} cruxn_props_v9_t;

typedef cruxn_props_v9_t cruxn_props_v10_t;

typedef struct cruxn_props_v11 {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	cruxn_dev_type_t netDeviceType;
	int netDeviceVersion;
	cruxn_vprops_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
	int maxMultiRequestSize;
} cruxn_props_v11_t;

/* v12: v11's fields (a virtual NIC of up to 8 devices), then the device's rail and plane. */
typedef struct cruxn_vprops_v12 {
	int ndevs;
	int devs[CRUXN_NET_MAX_DEVS_PER_NIC_V12];
} cruxn_vprops_v12_t;

typedef struct cruxn_props_v12 {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	cruxn_dev_type_t netDeviceType;
	int netDeviceVersion;
	cruxn_vprops_v12_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
	int maxMultiRequestSize;
	int16_t railId;	 /* CRUXN_NET_ID_UNDEF: none */
	int16_t planeId; /* CRUXN_NET_ID_UNDEF: none */
} cruxn_props_v12_t;

/* Per-communicator configuration (v10 connect, v11 and v12 init). */
typedef struct cruxn_comm_config {
	int trafficClass; /* CRUXN_NET_TRAFFIC_CLASS_UNDEF when unset */
} cruxn_comm_config_t;

/* v11 and v12 setNetAttr: NCCL's hints before a transfer of the communicator */
typedef struct cruxn_comm_attr {
	int32_t maxConcurrentPeers;
	int32_t minConcurrentPeers;
	int32_t maxFlowsPerPeer;
	int32_t minFlowsPerPeer;
} cruxn_comm_attr_t;

typedef struct cruxn_net_attr {
	cruxn_comm_attr_t send;
	cruxn_comm_attr_t recv;
	uint32_t op;	/* bit (1 << enum cruxn_func) of the operation about to run */
	uint32_t algo;	/* bit of NCCL's algorithm (undefined for point-to-point) */
	uint32_t proto; /* bit of NCCL's protocol (undefined for point-to-point) */
} cruxn_net_attr_t;

/* ---- Function tables ------------------------------------------------------ */

/* v12: v11 with v12 properties and virtual NICs (NCCL 2.30). */
typedef struct cruxn_net_v12 {
	const char *name;
	cruxn_result_t (*init)(void **ctx, uint64_t commId, cruxn_comm_config_t *config,
			       cruxn_logger_t logger, cruxn_prof_cb_t prof);
	cruxn_result_t (*devices)(int *ndev);
	cruxn_result_t (*getProperties)(int dev, cruxn_props_v12_t *props);
	cruxn_result_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
	cruxn_result_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,
				  cruxn_dev_handle_t **sendDevComm);
	cruxn_result_t (*accept)(void *listenComm, void **recvComm,
				 cruxn_dev_handle_t **recvDevComm);
	cruxn_result_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	cruxn_result_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				      uint64_t offset, int fd, void **mhandle);
	cruxn_result_t (*deregMr)(void *comm, void *mhandle);
	cruxn_result_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
				void *phandle, void **request);
	cruxn_result_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
				void **mhandles, void **phandles, void **request);
	cruxn_result_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
				 void **request);
	cruxn_result_t (*test)(void *request, int *done, int *sizes);
	cruxn_result_t (*closeSend)(void *sendComm);
	cruxn_result_t (*closeRecv)(void *recvComm);
	cruxn_result_t (*closeListen)(void *listenComm);
	cruxn_result_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	cruxn_result_t (*irecvConsumed)(void *recvComm, int n, void *request);
	cruxn_result_t (*makeVDevice)(int *d, cruxn_vprops_v12_t *props);
	cruxn_result_t (*finalize)(void *ctx);
	cruxn_result_t (*setNetAttr)(void *ctx, cruxn_net_attr_t *attr);
} cruxn_net_v12_t;

typedef struct cruxn_net_v11 {
	const char *name;
	cruxn_result_t (*init)(void **ctx, uint64_t commId, cruxn_comm_config_t *config,
			       cruxn_logger_t logger, cruxn_prof_cb_t prof);
	cruxn_result_t (*devices)(int *ndev);
	cruxn_result_t (*getProperties)(int dev, cruxn_props_v11_t *props);
	cruxn_result_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
	cruxn_result_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,
				  cruxn_dev_handle_t **sendDevComm);
	cruxn_result_t (*accept)(void *listenComm, void **recvComm,
				 cruxn_dev_handle_t **recvDevComm);
	cruxn_result_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	cruxn_result_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				      uint64_t offset, int fd, void **mhandle);
	cruxn_result_t (*deregMr)(void *comm, void *mhandle);
	cruxn_result_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
				void *phandle, void **request);
	cruxn_result_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
				void **mhandles, void **phandles, void **request);
	cruxn_result_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
				 void **request);
	cruxn_result_t (*test)(void *request, int *done, int *sizes);
	cruxn_result_t (*closeSend)(void *sendComm);
	cruxn_result_t (*closeRecv)(void *recvComm);
	cruxn_result_t (*closeListen)(void *listenComm);
	cruxn_result_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	cruxn_result_t (*irecvConsumed)(void *recvComm, int n, void *request);
	cruxn_result_t (*makeVDevice)(int *d, cruxn_vprops_t *props);
	cruxn_result_t (*finalize)(void *ctx);
	cruxn_result_t (*setNetAttr)(void *ctx, cruxn_net_attr_t *attr);
} cruxn_net_v11_t;

typedef struct cruxn_net_v10 {
	const char *name;
	cruxn_result_t (*init)(cruxn_logger_t logger, cruxn_prof_cb_t prof);
	cruxn_result_t (*devices)(int *ndev);
	cruxn_result_t (*getProperties)(int dev, cruxn_props_v10_t *props);
	cruxn_result_t (*listen)(int dev, void *handle, void **listenComm);
	cruxn_result_t (*connect)(int dev, cruxn_comm_config_t *config, void *handle,
				  void **sendComm, cruxn_dev_handle_t **sendDevComm);
	cruxn_result_t (*accept)(void *listenComm, void **recvComm,
				 cruxn_dev_handle_t **recvDevComm);
	cruxn_result_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	cruxn_result_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				      uint64_t offset, int fd, void **mhandle);
	cruxn_result_t (*deregMr)(void *comm, void *mhandle);
	cruxn_result_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
				void *phandle, void **request);
	cruxn_result_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
				void **mhandles, void **phandles, void **request);
	cruxn_result_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
				 void **request);
	cruxn_result_t (*test)(void *request, int *done, int *sizes);
	cruxn_result_t (*closeSend)(void *sendComm);
	cruxn_result_t (*closeRecv)(void *recvComm);
	cruxn_result_t (*closeListen)(void *listenComm);
	cruxn_result_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	cruxn_result_t (*irecvConsumed)(void *recvComm, int n, void *request);
	cruxn_result_t (*makeVDevice)(int *d, cruxn_vprops_t *props);
} cruxn_net_v10_t;

typedef struct cruxn_net_v9 {
	const char *name;
	cruxn_result_t (*init)(cruxn_logger_t logger);
	cruxn_result_t (*devices)(int *ndev);
	cruxn_result_t (*getProperties)(int dev, cruxn_props_v9_t *props);
	cruxn_result_t (*listen)(int dev, void *handle, void **listenComm);
	cruxn_result_t (*connect)(int dev, void *handle, void **sendComm,
				  cruxn_dev_handle_t **sendDevComm);
	cruxn_result_t (*accept)(void *listenComm, void **recvComm,
				 cruxn_dev_handle_t **recvDevComm);
	cruxn_result_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	cruxn_result_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				      uint64_t offset, int fd, void **mhandle);
	cruxn_result_t (*deregMr)(void *comm, void *mhandle);
	cruxn_result_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
				void **request);
	cruxn_result_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
				void **mhandles, void **request);
	cruxn_result_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
				 void **request);
	cruxn_result_t (*test)(void *request, int *done, int *sizes);
	cruxn_result_t (*closeSend)(void *sendComm);
	cruxn_result_t (*closeRecv)(void *recvComm);
	cruxn_result_t (*closeListen)(void *listenComm);
	cruxn_result_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	cruxn_result_t (*irecvConsumed)(void *recvComm, int n, void *request);
	cruxn_result_t (*makeVDevice)(int *d, cruxn_vprops_t *props);
} cruxn_net_v9_t;

typedef struct cruxn_net_v8 {
	const char *name;
	cruxn_result_t (*init)(cruxn_logger_t logger);
	cruxn_result_t (*devices)(int *ndev);
	cruxn_result_t (*getProperties)(int dev, cruxn_props_v8_t *props);
	cruxn_result_t (*listen)(int dev, void *handle, void **listenComm);
	cruxn_result_t (*connect)(int dev, void *handle, void **sendComm,
				  cruxn_dev_handle_t **sendDevComm);
	cruxn_result_t (*accept)(void *listenComm, void **recvComm,
				 cruxn_dev_handle_t **recvDevComm);
	cruxn_result_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	cruxn_result_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				      uint64_t offset, int fd, void **mhandle);
	cruxn_result_t (*deregMr)(void *comm, void *mhandle);
	cruxn_result_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
				void **request);
	cruxn_result_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags,
				void **mhandles, void **request);
	cruxn_result_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
				 void **request);
	cruxn_result_t (*test)(void *request, int *done, int *sizes);
	cruxn_result_t (*closeSend)(void *sendComm);
	cruxn_result_t (*closeRecv)(void *recvComm);
	cruxn_result_t (*closeListen)(void *listenComm);
	cruxn_result_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	cruxn_result_t (*irecvConsumed)(void *recvComm, int n, void *request);
} cruxn_net_v8_t;

typedef struct cruxn_net_v7 {
	const char *name;
	cruxn_result_t (*init)(cruxn_logger_t logger);
	cruxn_result_t (*devices)(int *ndev);
	cruxn_result_t (*getProperties)(int dev, cruxn_props_v7_t *props);
	cruxn_result_t (*listen)(int dev, void *handle, void **listenComm);
	cruxn_result_t (*connect)(int dev, void *handle, void **sendComm,
				  cruxn_dev_handle_t **sendDevComm);
	cruxn_result_t (*accept)(void *listenComm, void **recvComm,
				 cruxn_dev_handle_t **recvDevComm);
	cruxn_result_t (*regMr)(void *comm, void *data, int size, int type, void **mhandle);
	cruxn_result_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				      uint64_t offset, int fd, void **mhandle);
	cruxn_result_t (*deregMr)(void *comm, void *mhandle);
	cruxn_result_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
				void **request);
	cruxn_result_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags,
				void **mhandles, void **request);
	cruxn_result_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
				 void **request);
	cruxn_result_t (*test)(void *request, int *done, int *sizes);
	cruxn_result_t (*closeSend)(void *sendComm);
	cruxn_result_t (*closeRecv)(void *recvComm);
	cruxn_result_t (*closeListen)(void *listenComm);
	cruxn_result_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	cruxn_result_t (*irecvConsumed)(void *recvComm, int n, void *request);
} cruxn_net_v7_t;

typedef struct cruxn_net_v6 {
	const char *name;
	cruxn_result_t (*init)(cruxn_logger_t logger);
	cruxn_result_t (*devices)(int *ndev);
	cruxn_result_t (*getProperties)(int dev, cruxn_props_v6_t *props);
	cruxn_result_t (*listen)(int dev, void *handle, void **listenComm);
	cruxn_result_t (*connect)(int dev, void *handle, void **sendComm);
	cruxn_result_t (*accept)(void *listenComm, void **recvComm);
	cruxn_result_t (*regMr)(void *comm, void *data, int size, int type, void **mhandle);
	cruxn_result_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				      uint64_t offset, int fd, void **mhandle);
	cruxn_result_t (*deregMr)(void *comm, void *mhandle);
	cruxn_result_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
				void **request);
	cruxn_result_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags,
				void **mhandles, void **request);
	cruxn_result_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
				 void **request);
	cruxn_result_t (*test)(void *request, int *done, int *sizes);
	cruxn_result_t (*closeSend)(void *sendComm);
	cruxn_result_t (*closeRecv)(void *recvComm);
	cruxn_result_t (*closeListen)(void *listenComm);
} cruxn_net_v6_t;

#ifdef __cplusplus
}
#endif

#endif /* CRUX_NCCL_NET_ABI_H */
