/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The verbs transport's view of libibverbs: every call goes through one
 * table filled by dlopen + dlvsym (vx_loader.c), never through a link-time
 * dependency, so one plugin binary runs with and without rdma-core and unit
 * tests substitute a table of their own (a hardware double). The types are
 * rdma-core's <infiniband/verbs.h>, included for types only.
 */
#ifndef CRUXN_VX_H
#define CRUXN_VX_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crux/status.h"
#include "cruxn.h"

struct cruxn_ibv {
	void *lib;  /* dlopen handle of libibverbs (NULL for a test table) */
	void *mlx5; /* libmlx5, when loaded */
	struct ibv_device **(*get_device_list)(int *num);
	void (*free_device_list)(struct ibv_device **list);
	const char *(*get_device_name)(struct ibv_device *dev);
	__be64 (*get_device_guid)(struct ibv_device *dev);
	struct ibv_context *(*open_device)(struct ibv_device *dev);
	int (*close_device)(struct ibv_context *ctx);
	int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
	/* the exported compat symbol: fills the prefix of struct ibv_port_attr */
	int (*query_port)(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
	int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
	/* optional (IBVERBS_1.11): GID type without sysfs */
	int (*query_gid_ex)(struct ibv_context *ctx, uint32_t port, uint32_t index,
			    struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
	int (*dealloc_pd)(struct ibv_pd *pd);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
	/* optional (IBVERBS_1.8): takes IBV_ACCESS_RELAXED_ORDERING (ibv_reg_mr's inline strips it)
	 */
	struct ibv_mr *(*reg_mr_iova2)(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
				       unsigned int access);
	/* optional (IBVERBS_1.12): missing => no DMA-BUF */
	struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset, size_t len,
					uint64_t iova, int fd, int access);
	int (*dereg_mr)(struct ibv_mr *mr);
	struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *ctx); /* optional */
	int (*destroy_comp_channel)(struct ibv_comp_channel *ch);		  /* optional */
	struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *cq_ctx,
				    struct ibv_comp_channel *ch, int comp_vector);
	int (*destroy_cq)(struct ibv_cq *cq);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
	int (*query_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
			struct ibv_qp_init_attr *init);
	int (*destroy_qp)(struct ibv_qp *qp);
	int (*fork_init)(void); /* optional */
	const char *(*wc_status_str)(enum ibv_wc_status status);
	/* optional (IBVERBS_1.1): the async-event thread */
	int (*get_async_event)(struct ibv_context *ctx, struct ibv_async_event *event);
	void (*ack_async_event)(struct ibv_async_event *event);
	const char *(*event_type_str)(enum ibv_event_type type);
	/* optional, libmlx5 MLX5_1.17: live RoCEv2 UDP source port of an RC QP in RTS */
	int (*mlx5_udp_sport)(struct ibv_qp *qp, uint16_t port);
	char mlx5_why[320]; /* without mlx5_udp_sport: why (library or symbol missing) */
};

/* One versioned symbol the loader asks for. */
struct cruxn_ibv_sym {
	const char *lib; /* soname: libibverbs.so.1 / libmlx5.so.1 */
	const char *name;
	const char *version; /* rdma-core's version node */
	size_t off;	     /* offset of the pointer in struct cruxn_ibv */
	bool optional;
};

/* The i-th symbol the loader asks for (*out NULL past the end); returns how many there are. */
size_t cruxn_ibv_syms(const struct cruxn_ibv_sym **out, size_t i);

/*
 * Load libibverbs ('lib', NULL = "libibverbs.so.1") and, optionally, libmlx5
 * ('mlx5lib', NULL = "libmlx5.so.1"). On failure 'err' says which library or
 * symbol is missing and what to set.
 */
crux_status_t cruxn_ibv_load(const char *lib, const char *mlx5lib, struct cruxn_ibv *out, char *err,
			     size_t errlen);
void cruxn_ibv_unload(struct cruxn_ibv *v);

/* The data path: rdma-core's static inlines, through the context's ops. */
static inline int cruxn_ibv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
				      struct ibv_send_wr **bad)
{
	return qp->context->ops.post_send(qp, wr, bad);
}

static inline int cruxn_ibv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
				      struct ibv_recv_wr **bad)
{
	return qp->context->ops.post_recv(qp, wr, bad);
}

static inline int cruxn_ibv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	return cq->context->ops.poll_cq(cq, n, wc);
}

/* ---- devices and GIDs (vx_dev.c) ----------------------------------------- */

/*
 * NCCL_IB_HCA syntax: "mlx5_0:1,mlx5_1" — entries name a device and
 * optionally a port; a leading '^' excludes the listed ones, a leading '='
 * (after any '^') makes names exact instead of prefixes. Empty: all.
 */
bool cruxn_hca_match(const char *spec, const char *dev, int port);
/* The rail and plane an NCCL_IB_HCA entry gives dev:port (-1 when none). */
void cruxn_hca_ids(const char *spec, const char *dev, int port, int *rail, int *plane);

enum cruxn_gid_family { CRUXN_GID_ANY = 0, CRUXN_GID_V4, CRUXN_GID_V6 };

/* One GID table entry as the scan sees it. type: IBV_GID_TYPE_*, or -1 unknown. */
struct cruxn_gid_cand {
	union ibv_gid gid;
	int index;
	int type;
};

struct cruxn_gid_rules {
	int index;	   /* NCCL_IB_GID_INDEX, -1 = scan */
	int family;	   /* NCCL_IB_ADDR_FAMILY: CRUXN_GID_V4 (default) or V6 */
	uint8_t range[16]; /* NCCL_IB_ADDR_RANGE prefix (IPv4 in the first 4 bytes) */
	int range_bits;	   /* -1 = no range */
	int roce_version;  /* NCCL_IB_ROCE_VERSION_NUM, default 2 */
};

/* Rules from the environment (NCCL's variables); 'err' names a bad one. */
crux_status_t cruxn_gid_rules_load(struct cruxn_gid_rules *r, char *err, size_t errlen);

/*
 * Choose the GID index like NCCL: the configured index, else a non-zero,
 * non-link-local GID of the family and range, preferring the RoCE version
 * asked for (unknown types rank after known matches, the later entry
 * winning: Linux lists each address's v1 GID before its v2 one).
 */
crux_status_t cruxn_gid_choose(const struct cruxn_gid_cand *c, int n,
			       const struct cruxn_gid_rules *r, int *index);

/* ---- queue pair attributes (vx_qp.c) ------------------------------------ */

/* One end of an RC connection as the handshake carries it. */
struct cruxn_vx_ep {
	uint32_t qpn;
	uint32_t psn;
	union ibv_gid gid;
	uint16_t lid;
	uint8_t port;
	uint8_t link_layer; /* IBV_LINK_LAYER_ETHERNET / _INFINIBAND */
	uint8_t mtu;	    /* enum ibv_mtu, the port's active MTU */
	int gid_index;
};

#define CRUXN_VX_MAX_QPS 8

/* NCCL_IB_TIMEOUT / RETRY_CNT / PKEY / QPS_PER_CONNECTION, with NCCL's defaults. */
struct cruxn_vx_qp_cfg {
	int timeout;	     /* 20: 4.096 us * 2^20 = 4.3 s per retry */
	int retry_cnt;	     /* 7 */
	int pkey;	     /* 0 */
	int nqps;	     /* 1: queue pairs per connection (per lane) */
	bool split;	     /* NCCL_IB_SPLIT_DATA_ON_QPS (0): split each message over the QPs */
	int ar;		     /* NCCL_IB_ADAPTIVE_ROUTING: 1 on, 0 off, -1 auto (on for IB) */
	size_t ar_threshold; /* NCCL_IB_AR_THRESHOLD (8192): bigger parts go WRITE + 0-byte IMM */
	int relaxed;	 /* NCCL_IB_PCI_RELAXED_ORDERING: 0 off, 1 on, 2 auto (on when available) */
	int warm_lanes;	 /* CRUX_IB_WARM_LANES (2): lanes kept up after use, for a decision's return
			  */
	int lanes_ahead; /* CRUX_IB_LANES_AHEAD: -1 the table's levels, 0 none, N: N levels */
	uint64_t
	    lane_interval_ns; /* CRUX_IB_LANE_INTERVAL (10 ms): least time between two lane moves */
};

/*
 * CRUX_IB_QPS_PER_CONNECTION, else NCCL_IB_QPS_PER_CONNECTION: 1..8. A bad
 * value is not fatal: *nqps = 1 and 'err' says what was wrong (the caller
 * logs it once).
 */
crux_status_t cruxn_vx_nqps_load(int *nqps, char *err, size_t errlen);

/* Split granularity: NCCL's IB transport aligns the per-QP chunks to 128 bytes. */
#define CRUXN_VX_SPLIT_ALIGN 128

/*
 * How a message of 'size' bytes spreads over 'nqps' queue pairs, as NCCL
 * splits data on QPs: chunks of *chunk bytes (a multiple of the alignment),
 * part i carries [i * chunk, min(size, (i + 1) * chunk)); *nparts >= 1 (an
 * empty message is one empty part). Parts beyond the data are not sent.
 */
void cruxn_vx_split(size_t size, int nqps, size_t *chunk, int *nparts);

void cruxn_vx_qp_cfg_default(struct cruxn_vx_qp_cfg *q);

/* RESET -> INIT: port, partition key, what the remote may do to our memory. */
void cruxn_vx_attr_init(const struct cruxn_vx_ep *local, const struct cruxn_vx_qp_cfg *q,
			int access, struct ibv_qp_attr *a, int *mask);
/*
 * INIT -> RTR: the remote end, the path MTU both take, and the class (RoCE:
 * traffic class = DSCP << 2 and the flow label that picks the UDP source
 * port; both: SL). The class is fixed from here on: RTS refuses changes.
 */
void cruxn_vx_attr_rtr(const struct cruxn_vx_ep *local, const struct cruxn_vx_ep *remote,
		       const struct cruxn_class *cls, uint32_t flow_label, struct ibv_qp_attr *a,
		       int *mask);
/* RTR -> RTS: retry bounds (a dead peer ends in an error CQE, never a hang). */
void cruxn_vx_attr_rts(const struct cruxn_vx_ep *local, const struct cruxn_vx_qp_cfg *q,
		       struct ibv_qp_attr *a, int *mask);

/* Walk a new QP through INIT, RTR and RTS; 'err' names the refused step. */
crux_status_t cruxn_vx_qp_connect(const struct cruxn_ibv *v, struct ibv_qp *qp,
				  const struct cruxn_vx_ep *local, const struct cruxn_vx_ep *remote,
				  const struct cruxn_vx_qp_cfg *q, int access,
				  const struct cruxn_class *cls, uint32_t flow_label, char *err,
				  size_t errlen);

/*
 * The UDP source port the kernel derives from a flow label (mlx5, irdma,
 * rxe): 0xC000 | ((fl & 0x3fff) ^ ((fl & 0xFC000) >> 14)).
 */
uint16_t cruxn_vx_sport_of_flow_label(uint32_t fl);
/*
 * A flow label whose derived port is 'sport'. Only ports 0xC000..0xFFFF can
 * be reached this way; *exact says whether 'sport' was. 0 stays 0 (no
 * route: the device hashes).
 */
uint32_t cruxn_vx_flow_label_for_sport(uint16_t sport, bool *exact);

/* ---- the devices in use (vx_ctx.c) ---------------------------------------- */

struct cruxn_vx_dev {
	char name[64];
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct cruxn_vx_ep ep; /* port, link layer, MTU, LID, GID (qpn/psn per QP) */
	uint64_t guid;
	int speed_mbps;
	char *pci_path; /* realpath of the device's sysfs node, NULL for a virtual one */
	int max_qp_wr;
	int max_cqe;
	bool live_sport; /* mlx5dv_modify_qp_udp_sport works here (probed at init) */
	bool ar;	 /* adaptive routing: big parts as WRITE + 0-byte WRITE WITH IMMEDIATE */
	uint32_t max_msg_sz; /* the port's largest message (0: not reported) */
	/* set by the async-event thread: enum vx_dev_health, and why */
	_Atomic int dead;
	char dead_why[160];
	int real_port; /* earlier devices on the same NIC (merged PCI path), as NCCL */
};

struct cruxn_vx;

/* The async-event thread over vx's devices (vx_async.c): started after open, stopped before close.
 */
crux_status_t cruxn_vx_async_start(struct cruxn_vx *vx);
void cruxn_vx_async_stop(struct cruxn_vx *vx);

/*
 * d's endpoint as the port is now: state, MTU, LID, and the GID chosen again
 * by the rules over the whole table (indexes move after a port flap or an
 * address change), as NCCL reads them per connection.
 */
crux_status_t cruxn_vx_ep_refresh(const struct cruxn_vx *vx, const struct cruxn_vx_dev *d,
				  struct cruxn_vx_ep *ep, char *why, size_t whylen);

/* Merge a NIC's PCI functions into one path (".x" -> ".0"), as NCCL does (NULL ok). */
void cruxn_vx_pci_merge(char *path);

enum vx_dev_health { VX_DEV_OK = 0, VX_DEV_PORT_DOWN, VX_DEV_FATAL };

struct cruxn_vx {
	struct cruxn_ibv ibv;
	struct cruxn_gid_rules rules;
	pthread_mutex_t async_lock; /* dead_why */
	struct cruxn_vx_dev devs[CRUXN_MAX_DEVS];
	int ndevs;
};

/*
 * Open every ACTIVE port of the devices 'hca' (NCCL_IB_HCA syntax) admits,
 * with its GID chosen by 'rules'. No usable port: CRUX_ERR_NOENT, 'err' says
 * what was found and why it was left out.
 */
/*
 * Probe once whether the live RoCEv2 UDP source-port change works on d:
 * mlx5dv_modify_qp_udp_sport on an RTS QP connected to itself. False: the
 * flow label at RTR is the only way; 'why' says why.
 */
bool cruxn_vx_sport_probe(const struct cruxn_ibv *v, const struct cruxn_vx_dev *d,
			  const struct cruxn_vx_qp_cfg *q, char *why, size_t len);
/* Probe every device (sets live_sport) and compose the one line init logs. */
void cruxn_vx_sport_probe_all(struct cruxn_vx *vx, const struct cruxn_vx_qp_cfg *q, char *line,
			      size_t len);

crux_status_t cruxn_vx_open(const struct cruxn_ibv *ibv, const char *hca,
			    const struct cruxn_gid_rules *rules, struct cruxn_vx *out, char *err,
			    size_t errlen);
void cruxn_vx_close(struct cruxn_vx *vx);
/* NCCL's speed table: active_speed x active_width in Mb/s. */
int cruxn_vx_port_speed(uint8_t active_speed, uint8_t active_width);

#endif /* CRUXN_VX_H */
