/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The verbs transport, in NCCL's IB shape: RC queue pairs; the receiver
 * posts clear-to-send (CTS) entries into the sender's FIFO by RDMA WRITE;
 * the sender writes the message's size into the receiver's size table and
 * the data by RDMA WRITE WITH IMMEDIATE (imm = request index << 3 | slot).
 * A TCP socket carries the set-up and, later, lane changes.
 *
 * Lanes: a queue pair's class (traffic class, SL, flow label) cannot change
 * in RTS, so a connection keeps one lane per (class, path) it uses. A new
 * decision builds a lane (over the TCP socket), the next message moves to
 * it once the old lane's work drained, and the old lane is closed.
 */
#ifndef CRUXN_VX_TRANSPORT_H
#define CRUXN_VX_TRANSPORT_H

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "core.h"
#include "vx.h"
#include "vx_req.h"

#define VX_MAGIC 0x42565843u /* "CXVB" */
/* 3: LANE_CLOSE carries a part count; 4: control bells; 5: byte_len sizes */
#define VX_VERSION    5
#define VX_FIFO	      CRUXN_NET_MAX_REQUESTS
#define VX_SLOTS      CRUXN_NET_MAX_RECVS
#define VX_RECV_DEPTH (VX_FIFO * VX_SLOTS) /* per QP: one receive per message in flight */
/*
 * Consumed receives go back in chains of VX_RECV_BATCH (one post call per
 * batch, not per message); a QP holds VX_RECV_DEPTH more than that, so one
 * is always posted for every message that can be in flight.
 */
#define VX_RECV_BATCH  16
#define VX_RECV_POSTED (VX_RECV_DEPTH + VX_RECV_BATCH)

/* Work request ids: what was posted (CTS write, receive, flush) and on which lane and QP. */
#define WR_CTS	      (1ull << 63)
#define WR_RECV	      (1ull << 62)
#define WR_FLUSH      (1ull << 61)
#define WR_LANE(x)    (((x) >> 8) & 0xffffffffull)
#define WR_QP(x)      ((int)((x)&0xff)) /* receives: which of the lane's QPs */
#define VX_SEND_DEPTH (2 * VX_FIFO * VX_SLOTS)
#define VX_MAX_LANES  4
#define VX_MAX_QPS    CRUXN_VX_MAX_QPS
/* every lane's QPs, and the flush QP's one READ per request */
#define VX_CQ_DEPTH(nqps) (VX_MAX_LANES * (nqps) * (VX_RECV_POSTED + VX_SEND_DEPTH) + VX_FIFO)
#define VX_MAX_MSG	  0x7fffffffull /* NCCL's IB transport: int sizes */
/*
 * The control socket is read at least this often when nothing is under way
 * there: the peer rings for each control message it sends (the bells), so
 * this only finds a socket's end (a peer gone without its BYE; one that
 * goes with data in flight is found by its error completions). The clock
 * is looked at every VX_CTRL_TICK-th quiet progress call.
 */
#define VX_CTRL_POLL_NS 10000000ull
#define VX_CTRL_TICK	16u
/* ... and the bell (the peer's count of control messages) every this-many-th */
#define VX_BELL_TICK 4u
_Static_assert((VX_BELL_TICK & (VX_BELL_TICK - 1)) == 0 && VX_CTRL_TICK % VX_BELL_TICK == 0,
	       "powers of two, the clock's tick a bell tick");
/* isend without the receiver's CTS polls on every this-many-th retry (a power of two) */
#define VX_CTS_WAIT_POLL 4u
_Static_assert((VX_CTS_WAIT_POLL & (VX_CTS_WAIT_POLL - 1)) == 0, "a power of two (a mask)");
_Static_assert((VX_CTRL_TICK & (VX_CTRL_TICK - 1)) == 0, "a power of two (a mask)");
/* the longest a message waits for a decision's lane that is not up yet */
#define VX_HOLD_MAX_NS 1000000000ull
/* how long an error completion waits for a closing peer's BYE */
#define VX_GONE_WAIT_NS 1000000000ull

/* One clear-to-send entry, written by the receiver into the sender's FIFO. */
struct vx_cts {
	uint64_t addr; /* receive buffer */
	uint64_t cap;
	uint32_t rkey;
	int32_t tag;
	uint16_t nslots; /* slots of this receive (entries in the row) */
	uint8_t req;	 /* receiver's request index */
	uint8_t slot;
	uint32_t stamp; /* row sequence + 1, last: the entry is complete */
};

enum vx_msg_kind {
	VX_HELLO = 1,  /* sender -> receiver: lane 0, FIFO */
	VX_ACCEPT,     /* receiver -> sender: lane 0, size table */
	VX_READY,      /* sender -> receiver: lane 0 is in RTS at both ends */
	VX_LANE,       /* sender -> receiver: build lane 'lane' */
	VX_LANE_ACK,   /* receiver -> sender: its end of 'lane' */
	VX_LANE_CLOSE, /* sender -> receiver: drained, close 'lane' */
	VX_LANE_GONE,  /* receiver -> sender: closed */
	VX_BYE,	       /* either way, on close: receiver's 'done' says which sends arrived */
	VX_LANE_MOVE,  /* sender -> receiver: moved from 'lane' (kept warm) to lane 'addr' */
};

/*
 * A lane's end: its queue pairs (QP i pairs with the peer's QP i; the start
 * PSN is the QP number's low 24 bits) and, from the sender, the flow label
 * of each, which the receiver's QP i takes too.
 */
struct vx_msg {
	uint32_t magic;
	uint16_t kind;
	uint16_t version;
	uint64_t nonce;
	uint32_t lane;
	uint8_t nqps;
	uint8_t port;
	uint8_t link_layer;
	uint8_t mtu;
	uint8_t gid[16];
	uint16_t lid;
	uint8_t tos;
	uint8_t sl;
	uint8_t level;
	uint8_t pad[3];
	union {
		struct {
			uint32_t qpn[VX_MAX_QPS];
			uint32_t flow_label[VX_MAX_QPS];
		};
		/* BYE from the receiver: per FIFO row, the slots whose message arrived */
		uint8_t done[VX_FIFO];
	};
	uint64_t addr; /* HELLO: FIFO; ACCEPT: size table; BYE: the receiver's next row */
	uint32_t rkey;
	uint32_t parts; /* LANE_CLOSE: WRITE WITH IMMEDIATE parts the sender posted on the lane */
};

enum vx_lane_state { VX_LANE_BUILDING = 1, VX_LANE_UP, VX_LANE_CLOSING };

/* A lane: nqps RC queue pairs of one class; QP i takes the route's port i. */
struct vx_lane {
	uint32_t id;
	int state;
	int nqps;
	struct ibv_qp *qps[VX_MAX_QPS];
	struct cruxn_class cls;
	struct cruxn_route route;
	uint16_t sport[VX_MAX_QPS];	 /* UDP source port asked for (0: device's hash) */
	uint32_t flow_label[VX_MAX_QPS]; /* what realises it */
	bool route_refused;		 /* the device cannot realise the route: label 0 (hash) */
	int outstanding;		 /* signaled work requests not yet completed */
	int cts_unsignaled;		 /* receiver: CTS writes no completion covers yet */
	uint8_t recv_owed[VX_MAX_QPS]; /* receiver: consumed, not posted again (< VX_RECV_BATCH) */
	/*
	 * Parts (WRITE WITH IMMEDIATE) the sender posted on the lane / the
	 * receiver's completions of them; a closing lane's queue pairs go only
	 * when the two agree, since destroying a QP purges its unpolled CQEs.
	 */
	uint32_t parts;
	uint32_t close_parts; /* receiver: the count LANE_CLOSE gave */
	uint64_t since_ns;    /* when the sender asked for it (bounds the build) */
	uint64_t parked_ns;   /* sender: when it stopped being current (warm, reusable) */
	bool ahead;	      /* sender: built ahead for a level, kept up while idle */
	struct vx_lane *next;
};

#define VX_OUTQ 16

struct vx_comm {
	struct cruxn_base b; /* first: the core's view */
	struct cruxn_vx_dev *dev;
	struct cruxn_vx_ep ep;	 /* our end as this connection found the port (GID read again) */
	_Atomic int async_event; /* a fatal event on one of its queue pairs (the async thread) */
	unsigned routes_refused; /* routes this connection could not realise (reported each) */
	unsigned repaths;	 /* route changes made in place by the live source-port call */
	int fd;			 /* bootstrap / lane-control socket */
	uint64_t nonce;
	struct ibv_cq *cq;
	struct vx_lane *cur;   /* lane new messages (sender) / CTS writes (receiver) use */
	struct vx_lane *lanes; /* every lane, newest first */
	/*
	 * Sender: the current lane realises the decision, no lane is being
	 * built and none is due to close, for this table (settled_dt): the
	 * message boundary and progress skip the lane search. Cleared by
	 * anything that changes the decision or a lane's state.
	 */
	bool settled;
	const void *settled_dt;
	uint64_t moved_ns; /* sender: when it last moved lanes (CRUX_IB_LANE_INTERVAL) */
	uint32_t next_lane;
	int nqps;	  /* queue pairs per lane (the sender's CRUX_IB_QPS_PER_CONNECTION) */
	uint32_t qrr;	  /* sender: the QP the next message starts on (round robin) */
	uint64_t hold_ns; /* sender: since when messages wait for a lane move (0: none) */

	/*
	 * Close: the peer's BYE (before its queue pairs go) says which sends
	 * arrived, so a send whose data landed completes even when the peer's
	 * close cost its acknowledgement; error completions that a closing peer
	 * causes wait (bounded) for the BYE or the socket's end to say which.
	 */
	uint64_t ctrl_ns; /* when the control socket was last read */
	/*
	 * Nothing under way on the control socket when it was last read, and
	 * nothing queued or failed since: progress reads it only every
	 * VX_CTRL_POLL_NS (false, as calloc leaves it: on every call).
	 */
	bool ctrl_quiet;
	uint32_t idle_ticks; /* quiet progress calls (VX_BELL_TICK, VX_CTRL_TICK) */
	uint32_t cts_waits;  /* sender: isends that found no CTS (VX_CTS_WAIT_POLL) */
	/*
	 * Control bells: each end counts the control messages (kind VX_LANE and
	 * later) it wrote to the socket and writes the count by RDMA into the
	 * peer's bell (fifo_bell / sizes_bell, which sit right after the FIFO and
	 * the size table, inside their registrations); the peer reads its socket
	 * while its bell is ahead of the messages it read (ctrl_got), so no
	 * periodic read is needed to see a lane change.
	 */
	uint32_t ctrl_sent, ctrl_got;
	const volatile uint64_t *bell; /* ours: fifo_bell (sender) or sizes_bell (receiver) */
	bool bye;
	uint32_t bye_rrow;
	uint8_t bye_done[VX_FIFO];
	uint64_t gone_ns;
	char gone_detail[160];
	uint8_t row_done[VX_FIFO]; /* receiver: slots arrived in the row last posted there */
	struct cruxn_vx_ep remote; /* the peer's device (GID, LID, MTU) */
	bool ready;		   /* set-up finished (HELLO, ACCEPT, READY) */

	/* control messages out (small ring) and in */
	struct vx_msg outq[VX_OUTQ];
	int out_head, out_count;
	size_t out_off;
	struct vx_msg in;
	size_t in_off;

	/*
	 * Registered control memory: each table 64-byte aligned (a CTS entry
	 * never crosses a cache line, so its stamp is never seen beside another
	 * round's address under relaxed ordering or on Arm), inside a comm that
	 * is page-aligned and page-rounded (vx_setup.c), so no registration
	 * shares a page with other heap data (fork without copy-on-fork).
	 */
	/* sender */
	_Alignas(64) struct vx_cts fifo[VX_FIFO][VX_SLOTS];
	_Alignas(64) uint64_t fifo_bell; /* the receiver's count (it writes; in fifo_mr) */
	struct ibv_mr *fifo_mr;
	uint32_t row;	  /* FIFO row the next send takes */
	uint8_t row_used; /* slots of that row already sent */
	uint64_t rsizes;  /* receiver's size table */
	uint32_t rsizes_rkey;
	_Alignas(64) uint64_t sizes_out[VX_FIFO][VX_SLOTS]; /* sizes being written */
	_Alignas(64) uint64_t
	    sizes_out_bell; /* our count, the source of the write (in sizes_out_mr) */
	struct ibv_mr *sizes_out_mr;

	/* receiver */
	_Alignas(64) uint64_t sizes[VX_FIFO][VX_SLOTS];
	_Alignas(64) uint64_t sizes_bell; /* the sender's count (it writes; in sizes_mr) */
	struct ibv_mr *sizes_mr;
	_Alignas(64) struct vx_cts cts[VX_FIFO][VX_SLOTS]; /* CTS entries being written */
	_Alignas(64) uint64_t cts_bell; /* our count, the source of the write (in cts_mr) */
	struct ibv_mr *cts_mr;
	uint64_t rfifo; /* sender's FIFO */
	uint32_t rfifo_rkey;
	uint32_t rrow; /* FIFO row the next receive fills */
	/* GPUDirect flush: a QP connected to itself READs 1 byte of the received buffer */
	struct ibv_qp *flush_qp;
	struct ibv_mr *flush_mr;
	uint64_t flush_buf;
};

/* What NCCL asserts of its FIFO (net_ib common.h), and whole lines for ours. */
_Static_assert(sizeof(struct vx_cts) == 32, "a CTS entry is 32 bytes");
_Static_assert(offsetof(struct vx_comm, fifo) % 64 == 0, "the CTS FIFO starts a cache line");
_Static_assert(offsetof(struct vx_comm, cts) % 64 == 0, "the CTS source starts a cache line");
_Static_assert(offsetof(struct vx_comm, sizes) % 64 == 0, "the size table starts a cache line");
_Static_assert(offsetof(struct vx_comm, sizes_out) % 64 == 0, "sizes out start a cache line");
_Static_assert(sizeof(struct vx_cts) * VX_SLOTS % 64 == 0, "a CTS row is whole cache lines");
/* a bell right after its table: the peer finds it at the table's address + its size */
_Static_assert(offsetof(struct vx_comm, fifo_bell) ==
		   offsetof(struct vx_comm, fifo) + sizeof(((struct vx_comm *)0)->fifo),
	       "the receiver's bell follows the FIFO");
_Static_assert(offsetof(struct vx_comm, sizes_bell) ==
		   offsetof(struct vx_comm, sizes) + sizeof(((struct vx_comm *)0)->sizes),
	       "the sender's bell follows the size table");
_Static_assert(offsetof(struct vx_comm, sizes_out_bell) ==
		   offsetof(struct vx_comm, sizes_out) + sizeof(((struct vx_comm *)0)->sizes_out),
	       "the sender's bell source follows its sizes");
_Static_assert(offsetof(struct vx_comm, cts_bell) ==
		   offsetof(struct vx_comm, cts) + sizeof(((struct vx_comm *)0)->cts),
	       "the receiver's bell source follows its CTS entries");

/* The peer rang for a control message not read yet (its bell ahead of ctrl_got). */
static inline bool cruxn_vx_bell_ahead(const struct vx_comm *c)
{
	uint32_t bell = (uint32_t)*c->bell;

	return (int32_t)(bell - c->ctrl_got) > 0;
}

static inline struct vx_comm *vx_of(struct cruxn_base *b)
{
	return (struct vx_comm *)b;
}

_Static_assert(sizeof(struct cruxn_vx_req) <= CRUXN_REQ_TP_BYTES,
	       "the verbs transport's part must fit a request");

/* The verbs transport's part of a request. */
static inline struct cruxn_vx_req *vxr(struct cruxn_req *r)
{
	return (struct cruxn_vx_req *)(void *)r->tp;
}

static inline const struct cruxn_vx_req *vxr_c(const struct cruxn_req *r)
{
	return (const struct cruxn_vx_req *)(const void *)r->tp;
}

/* process-wide state (vx_conn.c) */
extern struct cruxn_vx cruxn_vx_state;
extern struct cruxn_vx_qp_cfg cruxn_vx_qpcfg;

/* vx_conn.c */
/*
 * Receiver: the traffic class of its lane QPs (their packets are the CTS
 * writes and acknowledgements): NCCL_IB_FIFO_TC on RoCE when set, as NCCL,
 * else the sender's.
 */
int cruxn_vx_fifo_tos(const struct vx_comm *c, int sender_tos);
crux_status_t cruxn_vx_listen(int dev, void *handle, void **listen_comm);
crux_status_t cruxn_vx_connect(int dev, int traffic_class, void *handle, struct cruxn_base **out);
crux_status_t cruxn_vx_accept(void *listen_comm, struct cruxn_base **out);
crux_status_t cruxn_vx_close_listen(void *listen_comm);
void cruxn_vx_destroy(struct cruxn_base *b);
/* Control socket: queue a message; move bytes; handle what arrived. */
void cruxn_vx_ctrl_send(struct vx_comm *c, const struct vx_msg *m);
void cruxn_vx_ctrl_progress(struct vx_comm *c);
/*
 * Sender: the lane of the current decision, built (LANE over the control
 * socket) when none exists; NULL while VX_MAX_LANES lanes still live.
 */
struct vx_lane *cruxn_vx_lane_want(struct vx_comm *c);
/*
 * Sender: move to the decision's lane once it is up and the current one
 * drained; close lanes the decision left before they were used.
 */
void cruxn_vx_lanes_progress(struct vx_comm *c);

/* Sender: nothing for lanes_progress to do until the decision, a lane or the table changes. */
static inline bool cruxn_vx_lanes_settled(const struct vx_comm *c)
{
	return c->settled &&
	       c->settled_dt == atomic_load_explicit(&cruxn_ctx.dt, memory_order_relaxed);
}
struct vx_lane *cruxn_vx_lane_find(struct vx_comm *c, uint32_t id);
/* The same, the current lane (nearly every completion's) without a call. */
static inline struct vx_lane *cruxn_vx_lane_of(struct vx_comm *c, uint32_t id)
{
	return c->cur && c->cur->id == id ? c->cur : cruxn_vx_lane_find(c, id);
}
struct vx_lane *cruxn_vx_lane_new(struct vx_comm *c, uint32_t id, const struct cruxn_class *cls,
				  const struct cruxn_route *route);
void cruxn_vx_lane_link(struct vx_comm *c, struct vx_lane *l);
void cruxn_vx_lane_free(struct vx_lane *l);
/* Our end of lane l as a control message of 'kind'. */
void cruxn_vx_ep_to_msg(const struct vx_comm *c, const struct vx_lane *l, struct vx_msg *m,
			int kind);
/* Move the lane's queue pair to RTS towards the peer's end in m. */
crux_status_t cruxn_vx_lane_connect(struct vx_comm *c, struct vx_lane *l, const struct vx_msg *m);
/* Tell the peer we close (with the receiver's arrived messages), bounded. */
void cruxn_vx_bye(struct vx_comm *c);
/* Sender: did the receiver's BYE report r's message as arrived? */
bool cruxn_vx_delivered(const struct vx_comm *c, const struct cruxn_req *r);
/* Receiver: the arrival of slot 'slot' of r, for the BYE. */
static inline void cruxn_vx_note_arrival(struct vx_comm *c, const struct cruxn_req *r, int slot)
{
	/* only the row last posted at that index is reported */
	if (c->rrow - vxr_c(r)->row <= VX_FIFO)
		c->row_done[vxr_c(r)->row % VX_FIFO] |= (uint8_t)(1u << slot);
}

/* Receiver: the loopback QP the flush READs go through (created on first use). */
crux_status_t cruxn_vx_flush_qp(struct vx_comm *c);
/* Error CQE or refused post: fail the comm with the device, GIDs and a hint. */
void cruxn_vx_fail(struct vx_comm *c, const char *what, const char *detail, const char *hint);
/* Post n receives on each of a lane's QPs (a new lane), or on its QP q (one consumed). */
crux_status_t cruxn_vx_post_recvs(struct vx_comm *c, struct vx_lane *l, int n);
crux_status_t cruxn_vx_post_recvs_qp(struct vx_comm *c, struct vx_lane *l, int q, int n);
/*
 * Receiver: a CTS write into the sender's FIFO at 'remote' (sg NULL: an
 * empty one) on lane l's first QP, signaled or not (l->outstanding counts
 * the signaled, l->cts_unsignaled the writes since the last of them).
 */
crux_status_t cruxn_vx_cts_write(struct vx_comm *c, struct vx_lane *l, struct ibv_sge *sg,
				 uint64_t remote, bool signaled);
/*
 * Receiver, lane l closing: a signaled write after its unsignaled CTS
 * writes, so l->outstanding covers them (its QPs must not go while one is
 * in flight: the sender would never see that CTS).
 */
crux_status_t cruxn_vx_cts_fence(struct vx_comm *c, struct vx_lane *l);

/* vx_init.c */
crux_status_t cruxn_vx_start(const struct cruxn_config *cfg, char *err, size_t errlen);
void cruxn_vx_stop(void);
crux_status_t cruxn_vx_properties(int dev, cruxn_props_v11_t *p);
void cruxn_vx_ids(int dev, int *rail, int *plane);
int cruxn_vx_ndevs(void);

/* vx_data.c */
/* Data-path searches of the registration cache (a buffer without NCCL's memory handle). */
extern _Atomic uint64_t cruxn_vx_mr_searches;
extern const struct cruxn_transport_ops cruxn_verbs_ops;

/* rdma-core's post calls return the error; old providers -1 with errno. */
static inline const char *cruxn_vx_post_err(int rc)
{
	return strerror(rc > 0 ? rc : errno);
}

#endif /* CRUXN_VX_TRANSPORT_H */
