/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal interfaces of the Crux NCCL net plugin.
 *
 * One version-independent core (net.c, core.c) behind thin per-version
 * shims (net_abi.c); transports behind an operations table (core.h). All
 * process-wide state lives in struct cruxn_context.
 */
#ifndef CRUXN_H
#define CRUXN_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "crux/addr.h"
#include "crux/clock.h"
#include "crux/decision.h"
#include "crux/jobid.h"
#include "crux/nccl_net_abi.h"
#include "crux/profile.h"
#include "crux/status.h"

#define CRUXN_NAME	 "Crux"
#define CRUXN_MAX_DEVS	 16
#define CRUXN_MAX_SOCKS	 CRUX_ROUTE_MAX_PORTS /* data sockets per connection */
#define CRUXN_IFNAME_LEN 16

/* ---- Configuration (settings.c) -------------------------------------------- */

enum cruxn_family { CRUXN_FAM_ANY = 0, CRUXN_FAM_V4, CRUXN_FAM_V6 };

struct cruxn_config {
	char ifname_spec[256]; /* CRUX_SOCKET_IFNAME, else NCCL_SOCKET_IFNAME, else "" */
	int family;	       /* CRUX_SOCKET_FAMILY */
	int nthreads;	       /* CRUX_SOCKET_NTHREADS */
	int nsocks_per_thread; /* CRUX_NSOCKS_PERTHREAD */
	size_t inline_bytes;   /* CRUX_INLINE_BYTES: messages this small go on the control socket */
	size_t chunk_bytes;    /* CRUX_CHUNK_BYTES: smallest stripe per data socket */
	int class_level;       /* CRUX_CLASS: -1 unset, else a level */
	bool tagging;	       /* CRUX_TAGGING */
	uint64_t timeout_ms;   /* CRUX_TIMEOUT: dead-peer detection bound */
	uint64_t publish_ns;   /* CRUX_PUBLISH_INTERVAL */
	uint64_t busy_period_ns; /* CRUX_BUSY_PERIOD */
	int sockbuf;		 /* CRUX_SOCKET_BUFSIZE: SO_SNDBUF/SO_RCVBUF, 0 = kernel auto */
	int transport;		 /* CRUX_TRANSPORT: enum cruxn_transport_kind */
	char ibverbs_lib[256];	 /* CRUX_IBVERBS_LIB, "" = libibverbs.so.1 */
	char mlx5_lib[256];	 /* CRUX_MLX5_LIB, "" = libmlx5.so.1 */
	char hca_spec[256];	 /* CRUX_IB_HCA, else NCCL_IB_HCA */
	int ib_tc;		 /* NCCL_IB_TC: RoCE traffic class without a decision, -1 unset */
	int ib_sl;		 /* NCCL_IB_SL: IB service level without a decision, -1 unset */
	int ib_fifo_tc; /* NCCL_IB_FIFO_TC: the receiver's CTS / ACK class on RoCE, -1 unset */
};

enum cruxn_transport_kind { CRUXN_TP_AUTO = 0, CRUXN_TP_VERBS, CRUXN_TP_SOCKET };

/* Parse every CRUX_ variable; on error 'err' names the variable. */
crux_status_t cruxn_config_load(struct cruxn_config *cfg, char *err, size_t errlen);

/* NCCL_SOCKET_IFNAME matching: "eth,ib" prefixes, "^" excludes, "=" exact. */
bool cruxn_ifname_match(const char *spec, const char *ifname);

/* ---- Devices (devices.c) ------------------------------------------------- */

struct cruxn_dev {
	char name[CRUXN_IFNAME_LEN];
	union crux_sockaddr addr;
	socklen_t addrlen;
	char *pci_path; /* sysfs path of a physical NIC, or NULL */
	int speed_mbps;
};

/* Enumerate interfaces per cfg; writes at most max devices. */
crux_status_t cruxn_devices_scan(const struct cruxn_config *cfg, struct cruxn_dev *devs, int max,
				 int *ndevs);
void cruxn_devices_free(struct cruxn_dev *devs, int ndevs);

/* ---- Classes and paths (tagging.c) --------------------------------------- */

/* What a socket is marked with. */
struct cruxn_class {
	int tos;   /* IP TOS / IPv6 traffic class byte (DSCP << 2) */
	int prio;  /* SO_PRIORITY */
	int level; /* level the bytes are counted at */
	int sl;	   /* InfiniBand service level (RoCE/IB queue pairs) */
};

struct cruxn_route {
	uint16_t path_id; /* CRUX_PATH_NONE: no route (ephemeral ports) */
	uint8_t nports;
	uint16_t ports[CRUX_ROUTE_MAX_PORTS];
};

/* Per-peer byte counters, published into the profile record. */
struct cruxn_peer_stats {
	struct crux_addr peer;
	_Atomic uint64_t tx[CRUX_MAX_LEVELS];
	_Atomic uint64_t rx[CRUX_MAX_LEVELS];
};

/*
 * A connection's view of the decision table: re-evaluated only when the
 * table generation (one atomic load), the reader, or freshness changed.
 */
struct cruxn_tag_state {
	const struct crux_dt_reader *reader;
	uint64_t gen;
	bool stale;
	bool valid;
	int nccl_tc; /* per-communicator traffic class, -1 unset */
	bool ib;     /* a verbs connection: NCCL_IB_TC / NCCL_IB_SL rule its default class */
	struct crux_addr peer;
	struct cruxn_class cls;
	struct cruxn_route route;
};

void cruxn_tag_init(struct cruxn_tag_state *ts, const struct crux_addr *peer, int nccl_tc);
/*
 * Refresh the class and route. Returns true when either changed since the
 * last call (the caller re-marks / moves sockets).
 */
bool cruxn_tag_refresh(struct cruxn_tag_state *ts);
/* The classes of the levels a decision can name: the open table's levels, or
 * (dflt) the default map's when none is open; at most max. Returns how many. */
int cruxn_tag_level_classes(struct cruxn_class *out, int max, bool dflt);
struct cruxn_peer_stats *cruxn_peer_stats_get(const struct crux_addr *peer);

crux_status_t cruxn_tagging_start(void);
void cruxn_tagging_stop(void);

/* ---- Sockets (sockopt.c) ---------------------------------------------------- */

int cruxn_sock_set_class(int fd, int family, const struct cruxn_class *cls);
crux_status_t cruxn_sock_tune(int fd, const struct cruxn_config *cfg);
/* Non-blocking TCP socket bound to the local address (and port when non-zero). */
crux_status_t cruxn_sock_open_bound(const struct sockaddr *local, socklen_t len, uint16_t port,
				    bool reuse, int *out);

/* ---- The process-wide context (net.c) ------------------------------------ */

struct cruxn_transport_ops;

struct cruxn_context {
	pthread_mutex_t life_lock; /* serialises init and finalize (v11: per communicator) */
	pthread_mutex_t lock;
	int refs; /* init calls not yet finalized (v11 per communicator) */
	bool ready;
	struct cruxn_config cfg;
	const struct cruxn_transport_ops *ops; /* the transport every new connection uses */
	struct cruxn_dev devs[CRUXN_MAX_DEVS];
	int ndevs;
	cruxn_logger_t nccl_logger;
	struct crux_job_identity job;
	char shm_dir[CRUX_PATH_MAX];

	/* Decision table: pointer swapped atomically; old readers kept until exit. */
	_Atomic(struct crux_dt_reader *) dt;
	struct crux_dt_reader *dt_retired[64];
	int ndt_retired;
	_Atomic uint64_t dt_next_try_ns;
	_Atomic int dt_state; /* last logged table condition, for one log line per change */
	int once_prio_fail;   /* crux_log_once flags (plain ints for __atomic) */
	int once_port_fail;
	int once_prof_fail;
	/*
	 * Contract v1 (no agent socket): private copies of decision.tbl read
	 * with pread, refreshed at most every 100 ms from the data path;
	 * dt_copy_next_ns is 0 while no copy is in use.
	 */
	struct crux_dt_mirror *dt_mirror;
	_Atomic uint64_t dt_copy_next_ns;
	/* Contract v2: the connection to cruxd and this process's shared record. */
	struct crux_agent_conn *conn;
	bool conn_welcomed;
	struct crux_prof_handle *att_prof;

	/* Traffic matrix */
	pthread_mutex_t peers_lock;
	struct cruxn_peer_stats peers[CRUX_PROF_MAX_PEERS];
	_Atomic int npeers;
	struct crux_prof_handle *prof;
	pthread_t publisher;
	bool publisher_running;
	pthread_mutex_t pub_lock;
	pthread_cond_t pub_cond;
	bool pub_stop;

	/* Bytes sent under each collective kind NCCL announced (setNetAttr, v11/v12). */
	_Atomic uint64_t tx_kind[CRUX_COLL_KINDS];

	/* Connect states in progress (validates pointers kept in NCCL's handle). */
	void *connecting[4096];
};

extern struct cruxn_context cruxn_ctx;

/* Devices of the transport in use. */
int cruxn_ndevs(void);

/* ---- Core API (version independent) -------------------------------------- */

#define CRUXN_CTX_MAGIC 0x43435843u

/*
 * NCCL's per-communicator context (v11, v12: init to finalize). Send comms
 * connected through it hold a reference (hints.c).
 */
struct cruxn_comm_ctx {
	uint32_t magic;
	int traffic_class;
	uint64_t comm_id;
	_Atomic int refs;
	_Atomic int kind;	/* enum crux_coll_kind NCCL last announced; -1: none or unknown */
	_Atomic uint64_t hints; /* setNetAttr calls */
	cruxn_net_attr_t attr;	/* the last hints */
	_Atomic uint64_t tx_kind[CRUX_COLL_KINDS]; /* bytes sent under each announced kind */
	_Atomic uint64_t tx_unhinted;		   /* bytes sent with no kind announced */
};

struct cruxn_comm_ctx *cruxn_comm_ctx_new(uint64_t comm_id, int traffic_class);
/* Drop a reference (NCCL's at finalize, a send comm's at close); frees at the last. */
void cruxn_comm_ctx_put(struct cruxn_comm_ctx *x);
/* A send comm connected through x counts its bytes there (takes a reference). */
void cruxn_comm_ctx_attach(void *send_comm, struct cruxn_comm_ctx *x);
void cruxn_set_net_attr(struct cruxn_comm_ctx *x, const cruxn_net_attr_t *a);
void cruxn_count_tx_kind(struct cruxn_comm_ctx *x, uint64_t bytes);
/* enum crux_coll_kind of a setNetAttr op mask (one ncclFunc_t bit), -1 for none. */
int cruxn_func_kind(uint32_t op);

cruxn_result_t cruxn_init(cruxn_logger_t logger);
cruxn_result_t cruxn_finalize(void);
cruxn_result_t cruxn_devices(int *ndev);
cruxn_result_t cruxn_get_properties(int dev, cruxn_props_v11_t *props);
/* v12: the device's rail and plane, as NCCL's own transports fill them (-1: none). */
void cruxn_get_ids(int dev, int16_t *rail, int16_t *plane);
cruxn_result_t cruxn_listen(int dev, void *handle, void **listen_comm);
cruxn_result_t cruxn_connect(int dev, int traffic_class, void *handle, void **send_comm);
cruxn_result_t cruxn_accept(void *listen_comm, void **recv_comm);
cruxn_result_t cruxn_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
cruxn_result_t cruxn_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
				   int fd, void **mhandle);
cruxn_result_t cruxn_dereg_mr(void *comm, void *mhandle);
/* mhandle(s): what regMr gave NCCL for the buffer(s), or NULL; passed on to the transport. */
cruxn_result_t cruxn_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			   void **request);
cruxn_result_t cruxn_irecv(void *recv_comm, int n, void **data, const size_t *sizes,
			   const int *tags, void **mhandles, void **request);
cruxn_result_t cruxn_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
			    void **request);
/* sizes: NULL, or one entry per slot of the request. */
cruxn_result_t cruxn_test(void *request, int *done, int *sizes);
cruxn_result_t cruxn_close_send(void *send_comm);
cruxn_result_t cruxn_close_recv(void *recv_comm);
cruxn_result_t cruxn_close_listen(void *listen_comm);

#endif /* CRUXN_H */
