/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A hardware double for the verbs transport's unit tests: a function table
 * (struct cruxn_ibv) over in-process fake devices. Each device has one or
 * more ports with settable state, link layer, GID table and GID types.
 */
#ifndef VX_DOUBLE_H
#define VX_DOUBLE_H

#include "verbs/vx.h"

#define VXD_MAX_DEVS  4
#define VXD_MAX_PORTS 2
#define VXD_MAX_GIDS  256

struct vxd_port {
	enum ibv_port_state state;
	uint8_t link_layer;
	enum ibv_mtu mtu;
	uint16_t lid;
	uint8_t speed, width;
	uint32_t max_msg_sz;
	int ngids;
	union ibv_gid gids[VXD_MAX_GIDS];
	int types[VXD_MAX_GIDS]; /* -1: _ibv_query_gid_ex fails for it */
};

struct vxd_dev {
	char name[32];
	uint64_t guid;
	uint64_t sys_image_guid; /* host order; 0: not reported */
	int nports;
	struct vxd_port ports[VXD_MAX_PORTS];
	bool refuse_open;
};

struct vxd {
	int ndevs;
	struct vxd_dev devs[VXD_MAX_DEVS];
	int open_contexts; /* opened minus closed */
	int pds;	   /* allocated minus freed */
	bool no_query_gid_ex;
	int cqs, qps, mrs; /* live objects */
	uint64_t bytes;	   /* bytes moved by RDMA WRITE */
	int reads;	   /* RDMA READs executed */
	bool lose_ack;	   /* the next signaled WRITE lands but completes RETRY_EXC_ERR */
	bool refuse_mr;	   /* reg_mr fails (ENOMEM) */
	bool hold_recv;	   /* receive completions are written late: vxd_release_held() */
	bool hold_sends;   /* posted sends wait (in flight) until vxd_release_sends() */
	int dropped_sends; /* sends still in flight when destroy_qp took their QP (lost) */
	int purged;	   /* completions destroy_qp removed before they were polled */
	int torn_chunk;	 /* RDMA WRITEs land in chunks of this many bytes, out of order (0: off) */
	int torn_writes; /* WRITEs landed that way */
	int data_writes; /* plain RDMA WRITEs over 1 KiB (data: a CTS row is at most 256 B) */
	int empty_imm_writes; /* WRITE WITH IMMEDIATE carrying no data */
	uint64_t last_read_addr;
};

extern struct vxd vxd;

/* Reset to no devices and fill 'v' with the double's functions. */
void vxd_reset(struct cruxn_ibv *v);
/* Add a RoCE device like the software device: fe80::, v1 and v2 GIDs of 'ip'. */
struct vxd_dev *vxd_add_roce(const char *name, uint8_t a, uint8_t b, uint8_t c, uint8_t d);

/*
 * RC semantics between the double's queue pairs in this process: RDMA WRITE
 * and WRITE WITH IMMEDIATE executed at post time, rkey/bounds/access checked
 * (an error completion otherwise), receive queues, the QP state machine
 * refusing what the kernel refuses.
 */
void vxd_enable_rc(struct cruxn_ibv *v);
/*
 * The double with RC semantics and one RoCE device srxe_lo (127.0.0.1),
 * opened into 'out' with NCCL's default GID rules. 0 = ok.
 */
int vxd_open_lo(struct cruxn_vx *out);
/* Every deferred chunk of a torn WRITE lands now. */
void vxd_settle(void);
/* The receive completions held back (vxd.hold_recv) become visible, in order. */
void vxd_release_held(void);
/* The sends held in flight (vxd.hold_sends) execute now, in the order posted. */
void vxd_release_sends(void);
/*
 * Raise an async event on every context of device 'dev' (the double's
 * events are read in the order raised; PORT_ERR takes the port down).
 */
int vxd_raise_event(const char *dev, enum ibv_event_type type, int port, struct ibv_qp *qp);
/* The access flags of the registration starting at addr (-1: none). */
int vxd_mr_access(const void *addr);
/* What a QP was given at RTR. */
uint8_t vxd_qp_tc(uint32_t qpn);
uint32_t vxd_qp_flow_label(uint32_t qpn);
/* The source GID index a QP was given at RTR. */
int vxd_qp_sgid_index(uint32_t qpn);
/* Bytes the QP moved by RDMA WRITE. */
uint64_t vxd_qp_bytes(uint32_t qpn);

#endif /* VX_DOUBLE_H */
