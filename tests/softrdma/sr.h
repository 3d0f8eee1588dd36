/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Software RDMA device (test double): internal types. One context owns a raw
 * IP socket that sends and receives RoCEv2-shaped UDP packets (destination
 * port 4791) on its interface address, and a progress thread. A QP number
 * carries the context's id (qpn = id << 8 | slot; the id is the port of a UDP
 * socket the context holds, unique per address), so a peer reaches a QP
 * knowing only its GID and QP number, as RoCE does. Everything a context
 * owns is guarded by its one mutex.
 */
#ifndef SR_H
#define SR_H

#include <infiniband/verbs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* exported verbs entry points (the build hides everything else) */
#define SR_API __attribute__((visibility("default")))

#define SR_MAX_QP    255
#define SR_NGID	     3
#define SR_HDR_LEN   40
#define SR_MAX_MSG   (1u << 31)
#define SR_MAX_SEND  (64u << 20) /* largest SEND the responder buffers */
#define SR_ROCE_PORT 4791	 /* RoCEv2's UDP destination port */
#define SR_PKT_HDR   28		 /* BTH (12 bytes) + stream header (16) after UDP */
#define SR_BATCH     32		 /* packets per sendmmsg / recvmmsg */
#define SR_PKT_MAX   (20 + 8 + SR_PKT_HDR + 4096) /* IPv4 + UDP + ours + an IB MTU */

/* packet kinds (BTH opcode byte): which end of a QP pair's stream sent it */
enum sr_pkind { SR_P_FROM_REQ = 1, SR_P_FROM_RESP = 2 };

enum sr_ftype { SR_F_HELLO = 1, SR_F_REQ = 2, SR_F_RESP = 3 };
enum sr_fop { SR_OP_WRITE = 1, SR_OP_WRITE_IMM, SR_OP_SEND, SR_OP_SEND_IMM, SR_OP_READ };
enum sr_fstatus { SR_S_OK = 0, SR_S_RNR, SR_S_ACCESS, SR_S_INVREQ, SR_S_OPERR };

/* one frame header on the wire, big-endian fields */
struct sr_hdr {
	uint8_t type, op, status;
	uint32_t qpn; /* HELLO: destination QP; REQ/RESP: destination QP */
	uint32_t seq; /* HELLO: source QP; REQ/RESP: request sequence */
	uint32_t rkey;
	uint64_t raddr;
	uint32_t plen; /* payload bytes following the header */
	uint32_t rlen; /* READ: bytes requested */
	uint32_t imm;  /* network order as given by the application */
};

struct sr_dev {
	struct ibv_device ib;
	char ifname[IF_NAMESIZE];
	struct in_addr ip;
	int ifindex;
	uint64_t guid;
};

struct sr_obuf {
	struct sr_obuf *next;
	size_t len;
	uint8_t data[];
};

/*
 * One direction of a QP pair: the requester's outbound conn carries requests
 * out and responses in; the responder's inbound conn the reverse. Bytes are
 * a reliable stream over UDP packets: go-back-N from the first unacknowledged
 * byte, a window, cumulative acknowledgements in every packet.
 */
struct sr_conn {
	struct sr_conn *next;
	bool outbound, hello_seen;
	struct sr_qp *qp;    /* owner (outbound) or target (inbound) */
	uint32_t expect;     /* inbound: next request sequence to execute */
	uint32_t src_qpn;    /* inbound: the requester's QP */
	struct in_addr peer; /* the other end's address */
	uint32_t peer_qpn;   /* the other end's QP */
	uint32_t epoch;	     /* chosen by the requester per conn */
	/* send side: stream offsets (wrap-safe 32-bit arithmetic) */
	uint32_t una, nxt, end, head_off; /* head_off: stream offset of oq->data[0] */
	uint32_t cwnd, recover;
	int dupacks;
	bool ack_due;
	uint64_t progress_ns, rto_ns, rtx_at;
	/* receive side */
	uint32_t rcv_nxt;
	uint8_t hbuf[SR_HDR_LEN];
	size_t hgot;
	struct sr_hdr h;
	uint8_t *pay;
	size_t pgot;
	struct sr_obuf *oq, *oq_tail;
	struct sr_obuf *cur; /* send cursor: the buffer holding cur_off.. */
	uint32_t cur_off;
};

struct sr_mr {
	struct ibv_mr ib;
	uint8_t *host; /* host address of iova */
	uint64_t iova;
	void *map; /* dmabuf emulation mapping */
	size_t maplen;
	int access;
};

struct sr_cq {
	struct ibv_cq ib;
	struct ibv_wc *ring;
	int cap, head, n;
	bool armed, overflowed;
	int users;
};

struct sr_wqe {
	struct sr_wqe *next;
	uint64_t wr_id;
	uint32_t seq;
	enum ibv_wr_opcode op;
	bool signaled;
	uint32_t len, rkey, imm;
	uint64_t raddr;
	int nsg;
	struct ibv_sge *sg;
	uint8_t *inl; /* inline payload copy */
	uint64_t sent_ns;
	enum ibv_wc_status err; /* local error found at post time */
};

struct sr_rwqe {
	uint64_t wr_id;
	int nsg;
	struct ibv_sge *sg;
};

struct sr_qp {
	struct ibv_qp ib;
	struct sr_ctx *ctx;
	int slot;
	struct ibv_qp_cap cap;
	bool sig_all;
	struct ibv_qp_attr a; /* last accepted attributes */
	struct in_addr rip;   /* remote address from the dgid */
	uint16_t sport;	      /* forced by mlx5dv (0 = derive) */
	struct sr_conn *out;
	struct sr_wqe *sq, *sq_tail;
	int nsq;
	uint32_t next_seq;
	int rnr_left;
	bool stalled;	    /* a WR with a local error is queued */
	bool dead;	    /* the peer broke the protocol */
	struct sr_conn *in; /* the inbound conn last served */
	uint64_t resend_ns; /* RNR back-off deadline, 0 = none */
	struct sr_rwqe *rq;
	int rq_head, rq_n;
};

struct sr_ctx {
	struct ibv_context ib;
	struct sr_dev *dev;
	pthread_mutex_t mu;
	pthread_t thr;
	bool stop;
	int efd;	/* wakes the progress thread */
	int rfd;	/* raw IPv4/UDP socket: every packet in and out */
	int idfd;	/* UDP socket whose port is the context's id */
	int sinkfd;	/* UDP :4791, drops all (no ICMP unreachable) */
	int async_wfd;	/* write end of ib.async_fd's pipe */
	uint16_t lport; /* the context's id */
	uint32_t mss;	/* stream bytes per packet: an IB MTU within the interface's */
	uint32_t psn;
	struct sr_conn *conns;
	struct sr_torn *torn; /* WRITE pieces not yet visible (CRUX_SOFTRDMA_TORN) */
	uint32_t torn_chunk, torn_seed;
	int global_tclass; /* CRUX_SOFTRDMA_GLOBAL_TCLASS: every packet's TOS, -1: the QP's */
	size_t torn_bytes;
	uint8_t (*pkts)[SR_PKT_MAX]; /* SR_BATCH packet buffers (out, then in) */
	struct sr_txmeta {
		struct sr_conn *cn;
		uint32_t seq, len, plen;
		struct in_addr to;
	} tx[SR_BATCH];
	int npkt;
	bool tx_blocked; /* the socket's buffer is full: wait for POLLOUT */
	struct sr_qp *qps[SR_MAX_QP + 1];
	struct sr_mr **mrs;
	uint32_t nmr;
	uint32_t keygen;
};

/* Files call downwards only: sr_dev.c -> sr_qp.c -> sr_wire.c -> sr_cq.c, sr_mr.c -> sr_torn.c. */

__attribute__((format(printf, 1, 2))) static inline void sr_log(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("softrdma: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static inline uint64_t sr_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* sr_dev.c */
int sr_async_post(struct sr_ctx *c, const struct ibv_async_event *ev);

/* sr_mr.c */
struct sr_mr *sr_mr_find(struct sr_ctx *c, struct ibv_pd *pd, uint32_t key);
uint8_t *sr_mr_ptr(struct sr_mr *mr, uint64_t addr, uint64_t len);

/* sr_cq.c */
void sr_cq_push(struct sr_cq *cq, const struct ibv_wc *wc);
int sr_cq_poll(struct ibv_cq *ib, int num, struct ibv_wc *wc);
int sr_cq_req_notify(struct ibv_cq *ib, int solicited_only);
void sr_wqe_free(struct sr_wqe *w);
/* A send WR's completion (none for an unsignaled success). Lock held. */
void sr_send_complete(struct sr_qp *qp, struct sr_wqe *w, enum ibv_wc_status st);

/* sr_qp.c */
void sr_ops_fill(struct ibv_context_ops *ops);

/* sr_torn.c */
uint32_t sr_torn_chunk(void);
void sr_torn_write(struct sr_ctx *c, struct sr_qp *qp, uint8_t *dst, const uint8_t *src,
		   uint32_t len, bool defer);
void sr_torn_land_qp(struct sr_ctx *c, const struct sr_qp *qp);
void sr_torn_land_range(struct sr_ctx *c, const uint8_t *p, size_t len);
uint64_t sr_torn_tick(struct sr_ctx *c, uint64_t now);
void sr_torn_drop(struct sr_ctx *c);

/* sr_wire.c */
void sr_hdr_encode(const struct sr_hdr *h, uint8_t *b);
int sr_hdr_decode(const uint8_t *b, struct sr_hdr *h);
int sr_ctx_start(struct sr_ctx *c);
void sr_ctx_stop(struct sr_ctx *c);
int sr_conn_open(struct sr_qp *qp);
void sr_conn_close(struct sr_ctx *c, struct sr_conn *cn);
int sr_send_wqe(struct sr_qp *qp, struct sr_wqe *w);
void sr_flush(struct sr_conn *cn);
int sr_conn_rx(struct sr_ctx *c, struct sr_conn *cn, const uint8_t *b, size_t n);
void sr_packet_in(struct sr_ctx *c, const uint8_t *pkt, size_t len);
struct sr_conn *sr_conn_inbound(struct sr_ctx *c, struct sr_qp *qp, struct in_addr peer,
				uint32_t src_qpn, uint32_t epoch);
void sr_wake(struct sr_ctx *c);
uint16_t sr_qp_sport(const struct sr_qp *qp);
void sr_qp_fail(struct sr_qp *qp, enum ibv_wc_status head_status);
int sr_sq_answer(struct sr_qp *qp, enum ibv_wc_status st, const uint8_t *pay, uint32_t plen);

#endif
