/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Software RDMA device: the wire, RoCEv2's identity. Every packet is IPv4 +
 * UDP to port 4791 from the QP's RoCE source port, with the QP's traffic
 * class as DSCP/ECN, then a BTH naming the destination QP: what a switch
 * hashes and classifies is what an mlx5 puts on the wire. Under the BTH the
 * requests of a QP and the responder's answers are two byte streams made
 * reliable by go-back-N (the double has no PFC). A progress thread per
 * context does all socket I/O, so a passive side's memory is written without
 * its application calling in, as an HCA would.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <net/if.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sr.h"

#define SR_RNR_DELAY_NS 1000000u    /* back-off after an RNR NAK */
#define SR_RTO_MIN_NS	20000000ull /* go back after 20 ms without an acknowledgement */
#define SR_RTO_MAX_NS	500000000ull
#define SR_CWND_INIT	(256u << 10) /* bytes in flight per stream */
#define SR_CWND_MAX	(1u << 20)

static void put32(uint8_t *b, uint32_t v)
{
	uint32_t x = htonl(v);
	memcpy(b, &x, 4);
}

static uint32_t get32(const uint8_t *b)
{
	uint32_t x;
	memcpy(&x, b, 4);
	return ntohl(x);
}

void sr_hdr_encode(const struct sr_hdr *h, uint8_t *b)
{
	memset(b, 0, SR_HDR_LEN);
	b[0] = h->type;
	b[1] = h->op;
	b[2] = h->status;
	put32(b + 4, h->qpn);
	put32(b + 8, h->seq);
	put32(b + 12, h->rkey);
	put32(b + 16, (uint32_t)(h->raddr >> 32));
	put32(b + 20, (uint32_t)h->raddr);
	put32(b + 24, h->plen);
	put32(b + 28, h->rlen);
	memcpy(b + 32, &h->imm, 4);
}

/* 0, or -1 for a header no peer of ours sends */
int sr_hdr_decode(const uint8_t *b, struct sr_hdr *h)
{
	h->type = b[0];
	h->op = b[1];
	h->status = b[2];
	h->qpn = get32(b + 4);
	h->seq = get32(b + 8);
	h->rkey = get32(b + 12);
	h->raddr = ((uint64_t)get32(b + 16) << 32) | get32(b + 20);
	h->plen = get32(b + 24);
	h->rlen = get32(b + 28);
	memcpy(&h->imm, b + 32, 4);
	if (h->type < SR_F_HELLO || h->type > SR_F_RESP || h->plen > SR_MAX_MSG ||
	    h->rlen > SR_MAX_MSG || h->status > SR_S_OPERR)
		return -1;
	if (h->type == SR_F_REQ && (h->op < SR_OP_WRITE || h->op > SR_OP_READ))
		return -1;
	if (h->type == SR_F_HELLO && h->plen)
		return -1;
	if (h->type == SR_F_REQ && h->op == SR_OP_READ && h->plen)
		return -1;
	return 0;
}

void sr_wake(struct sr_ctx *c)
{
	uint64_t one = 1;
	ssize_t w = write(c->efd, &one, sizeof one);
	(void)w;
}

/* The RoCE v2 UDP source port the kernel derives from the flow label; with
 * no flow label, the label is hashed from the two QP numbers first. */
uint16_t sr_qp_sport(const struct sr_qp *qp)
{
	if (qp->sport)
		return qp->sport;
	uint32_t fl = qp->a.ah_attr.grh.flow_label & 0xfffff;
	if (!fl) {
		uint64_t v = (uint64_t)qp->ib.qp_num * qp->a.dest_qp_num;
		v ^= v >> 20;
		v ^= v >> 40;
		fl = (uint32_t)v & 0xfffff;
	}
	return (uint16_t)(0xC000 | ((fl & 0x3fff) ^ ((fl & 0xFC000) >> 14)));
}

static bool after(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) > 0;
}

static struct sr_conn *conn_new(struct sr_ctx *c, bool outbound)
{
	struct sr_conn *cn = calloc(1, sizeof *cn);
	if (!cn)
		return NULL;
	cn->outbound = outbound;
	cn->cwnd = SR_CWND_INIT;
	cn->rto_ns = SR_RTO_MIN_NS;
	cn->progress_ns = sr_now_ns();
	cn->next = c->conns;
	c->conns = cn;
	return cn;
}

void sr_conn_close(struct sr_ctx *c, struct sr_conn *cn)
{
	for (struct sr_conn **pp = &c->conns; *pp; pp = &(*pp)->next)
		if (*pp == cn) {
			*pp = cn->next;
			break;
		}
	if (cn->outbound && cn->qp && cn->qp->out == cn)
		cn->qp->out = NULL;
	if (!cn->outbound && cn->qp && cn->qp->in == cn)
		cn->qp->in = NULL;
	/* packets built for it but not yet sent are dropped with it */
	for (int i = 0; i < c->npkt; i++)
		if (c->tx[i].cn == cn)
			c->tx[i].cn = NULL;
	while (cn->oq) {
		struct sr_obuf *o = cn->oq;
		cn->oq = o->next;
		free(o);
	}
	free(cn->pay);
	free(cn);
}

static int enqueue(struct sr_conn *cn, const struct sr_hdr *h, const uint8_t *pay)
{
	struct sr_obuf *o = malloc(sizeof *o + SR_HDR_LEN + h->plen);
	if (!o)
		return ENOMEM;
	o->next = NULL;
	o->len = SR_HDR_LEN + h->plen;
	sr_hdr_encode(h, o->data);
	if (h->plen && pay)
		memcpy(o->data + SR_HDR_LEN, pay, h->plen);
	if (cn->oq_tail)
		cn->oq_tail->next = o;
	else {
		cn->oq = o;
		cn->head_off = cn->end;
	}
	cn->oq_tail = o;
	cn->end += (uint32_t)o->len;
	return 0;
}

int sr_conn_open(struct sr_qp *qp)
{
	static _Atomic uint32_t epochs;
	struct sr_conn *cn = conn_new(qp->ctx, true);
	if (!cn)
		return ENOMEM;
	cn->qp = qp;
	cn->peer = qp->rip;
	cn->peer_qpn = qp->a.dest_qp_num;
	/* a fresh stream the responder cannot mistake for an older one of this QP */
	cn->epoch =
	    (uint32_t)sr_now_ns() ^ (atomic_fetch_add(&epochs, 1) * 2654435761u) ^ qp->ib.qp_num;
	qp->out = cn;
	struct sr_hdr h = {.type = SR_F_HELLO, .qpn = qp->a.dest_qp_num, .seq = qp->ib.qp_num};
	return enqueue(cn, &h, NULL);
}

/* the responder's end of a requester's stream, found by its first packet */
struct sr_conn *sr_conn_inbound(struct sr_ctx *c, struct sr_qp *qp, struct in_addr peer,
				uint32_t src_qpn, uint32_t epoch)
{
	/* an older stream from the same requester QP is over */
	for (struct sr_conn *o = c->conns, *nx; o; o = nx) {
		nx = o->next;
		if (!o->outbound && o->qp == qp && o->src_qpn == src_qpn &&
		    o->peer.s_addr == peer.s_addr)
			sr_conn_close(c, o);
	}
	struct sr_conn *cn = conn_new(c, false);
	if (!cn)
		return NULL;
	cn->qp = qp;
	cn->peer = peer;
	cn->peer_qpn = src_qpn;
	cn->src_qpn = src_qpn;
	cn->epoch = epoch;
	qp->in = cn;
	return cn;
}

/* frame one send WR (again, after an RNR back-off); lock held */
int sr_send_wqe(struct sr_qp *qp, struct sr_wqe *w)
{
	static const uint8_t ops[] = {
	    [IBV_WR_RDMA_WRITE] = SR_OP_WRITE, [IBV_WR_RDMA_WRITE_WITH_IMM] = SR_OP_WRITE_IMM,
	    [IBV_WR_SEND] = SR_OP_SEND,	       [IBV_WR_SEND_WITH_IMM] = SR_OP_SEND_IMM,
	    [IBV_WR_RDMA_READ] = SR_OP_READ,
	};
	struct sr_hdr h = {.type = SR_F_REQ,
			   .op = ops[w->op],
			   .qpn = qp->a.dest_qp_num,
			   .seq = w->seq,
			   .rkey = w->rkey,
			   .raddr = w->raddr,
			   .imm = w->imm};
	if (w->op == IBV_WR_RDMA_READ)
		h.rlen = w->len;
	else
		h.plen = w->len;
	int rc = enqueue(qp->out, &h, w->inl);
	if (rc)
		return rc;
	if (!w->inl && h.plen) {
		/* gather now, from memory checked at post time */
		uint8_t *d = qp->out->oq_tail->data + SR_HDR_LEN;
		for (int i = 0; i < w->nsg; i++) {
			struct sr_mr *m = sr_mr_find(qp->ctx, qp->ib.pd, w->sg[i].lkey);
			uint8_t *p = m ? sr_mr_ptr(m, w->sg[i].addr, w->sg[i].length) : NULL;
			if (p)
				memcpy(d, p, w->sg[i].length);
			d += w->sg[i].length;
		}
	}
	w->sent_ns = sr_now_ns();
	return 0;
}

static void conn_dead(struct sr_ctx *c, struct sr_conn *cn)
{
	struct sr_qp *qp = cn->outbound ? cn->qp : NULL;
	sr_conn_close(c, cn);
	if (!qp)
		return;
	/* the peer is gone: outstanding WRs fail, later ones too */
	qp->dead = true;
	if (qp->sq)
		sr_qp_fail(qp, IBV_WC_RETRY_EXC_ERR);
}

static void put16(uint8_t *b, uint16_t v)
{
	b[0] = (uint8_t)(v >> 8);
	b[1] = (uint8_t)v;
}

static uint16_t get16(const uint8_t *b)
{
	return (uint16_t)(b[0] << 8 | b[1]);
}

/* copy stream bytes [off, off + n) of a conn's send queue (all unacknowledged) */
static void stream_copy(struct sr_conn *cn, uint32_t off, uint8_t *d, uint32_t n)
{
	if (!cn->cur || after(cn->cur_off, off)) {
		cn->cur = cn->oq;
		cn->cur_off = cn->head_off;
	}
	while (n) {
		struct sr_obuf *o = cn->cur;
		uint32_t in = off - cn->cur_off;
		if (in >= o->len) {
			cn->cur_off += (uint32_t)o->len;
			cn->cur = o->next;
			continue;
		}
		uint32_t k = (uint32_t)o->len - in < n ? (uint32_t)o->len - in : n;
		memcpy(d, o->data + in, k);
		d += k;
		off += k;
		n -= k;
	}
}

/* The class a conn's packets carry: the requester's, or for answers the
 * responder QP's own address vector, as hardware uses. */
static int conn_tos(const struct sr_conn *cn)
{
	const struct sr_qp *qp = cn->qp;
	if (qp->ctx->global_tclass >= 0)
		return qp->ctx
		    ->global_tclass; /* mlx5's host-wide override (tc/<port>/traffic_class) */
	if (!cn->outbound && qp->ib.state != IBV_QPS_RTR && qp->ib.state != IBV_QPS_RTS)
		return 0;
	return qp->a.ah_attr.grh.traffic_class;
}

/* one packet as a RoCEv2 NIC frames it: IPv4 (DSCP/ECN = the traffic class,
 * DF), UDP from the QP's source port to 4791 (checksum 0, as RoCEv2 sends),
 * BTH (opcode, P_Key, destination QP, PSN), then the stream header */
static uint32_t build(struct sr_ctx *c, struct sr_conn *cn, uint8_t *p, uint32_t n)
{
	uint32_t ulen = 8 + SR_PKT_HDR + n, tot = 20 + ulen;
	memset(p, 0, 20 + 8 + SR_PKT_HDR);
	p[0] = 0x45;
	p[1] = (uint8_t)conn_tos(cn);
	put16(p + 2, (uint16_t)tot);
	put16(p + 6, 0x4000);
	p[8] = 64;
	p[9] = IPPROTO_UDP;
	memcpy(p + 12, &c->dev->ip, 4);
	memcpy(p + 16, &cn->peer, 4);
	uint8_t *u = p + 20;
	put16(u, sr_qp_sport(cn->qp));
	put16(u + 2, SR_ROCE_PORT);
	put16(u + 4, (uint16_t)ulen);
	uint8_t *t = u + 8;
	t[0] = cn->outbound ? SR_P_FROM_REQ : SR_P_FROM_RESP;
	put16(t + 2, 0xffff);
	put32(t + 4, cn->peer_qpn & 0xffffff);
	put32(t + 8, c->psn++ & 0xffffff);
	put32(t + 12, cn->qp->ib.qp_num);
	put32(t + 16, cn->epoch);
	put32(t + 20, cn->nxt);
	put32(t + 24, cn->rcv_nxt);
	if (n)
		stream_copy(cn, cn->nxt, t + SR_PKT_HDR, n);
	return tot;
}

/* Send the built packets. What the socket does not take goes back to its
 * conn (sent again later), as if never built. */
static void tx_batch(struct sr_ctx *c)
{
	struct mmsghdr mh[SR_BATCH];
	struct iovec iov[SR_BATCH];
	struct sockaddr_in to[SR_BATCH];
	int done = 0;
	while (done < c->npkt) {
		int k = 0;
		for (int i = done; i < c->npkt; i++, k++) {
			iov[k] = (struct iovec){.iov_base = c->pkts[i], .iov_len = c->tx[i].len};
			to[k] =
			    (struct sockaddr_in){.sin_family = AF_INET, .sin_addr = c->tx[i].to};
			mh[k] = (struct mmsghdr){.msg_hdr = {.msg_name = &to[k],
							     .msg_namelen = sizeof to[k],
							     .msg_iov = &iov[k],
							     .msg_iovlen = 1}};
		}
		int r = sendmmsg(c->rfd, mh, (unsigned)k, MSG_DONTWAIT);
		if (r > 0) {
			done += r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == ENOBUFS))
			c->tx_blocked = true;
		else if (r < 0 && errno != EHOSTUNREACH && errno != ENETUNREACH) {
			static bool said;
			if (!said)
				sr_log("sending a packet: %s (treated as lost)", strerror(errno));
			said = true;
		}
		if (c->tx_blocked) {
			/* latest first, so each conn ends at its earliest unsent byte */
			for (int i = c->npkt - 1; i >= done; i--) {
				struct sr_conn *cn = c->tx[i].cn;
				if (!cn)
					continue;
				cn->nxt = c->tx[i].seq;
				cn->ack_due = true;
			}
			break;
		}
		done++; /* unroutable: lost, as on a wire; go-back-N sends it again */
	}
	c->npkt = 0;
}

/* build what the window allows and any acknowledgement owed; lock held */
static void flush_conn(struct sr_ctx *c, struct sr_conn *cn)
{
	while (!c->tx_blocked) {
		uint32_t flight = cn->nxt - cn->una, n = cn->end - cn->nxt;
		if (n > c->mss)
			n = c->mss;
		if (n && flight && flight + n > cn->cwnd)
			n = 0;
		if (!n && !cn->ack_due)
			return;
		if (c->npkt == SR_BATCH) {
			tx_batch(c);
			continue;
		}
		struct sr_txmeta *m = &c->tx[c->npkt];
		*m = (struct sr_txmeta){.cn = cn, .seq = cn->nxt, .plen = n, .to = cn->peer};
		m->len = build(c, cn, c->pkts[c->npkt], n);
		c->npkt++;
		if (n && !flight)
			cn->rtx_at = sr_now_ns() + cn->rto_ns;
		cn->nxt += n;
		cn->ack_due = false;
		if (!n)
			return;
	}
}

void sr_flush(struct sr_conn *cn)
{
	struct sr_ctx *c = cn->qp->ctx;
	flush_conn(c, cn);
	tx_batch(c);
}

static int respond(struct sr_conn *cn, const struct sr_hdr *rq, uint8_t st, const uint8_t *p,
		   uint32_t n)
{
	struct sr_hdr h = {.type = SR_F_RESP,
			   .op = rq->op,
			   .status = st,
			   .qpn = cn->src_qpn,
			   .seq = rq->seq,
			   .plen = st == SR_S_OK ? n : 0};
	if (st == SR_S_OK)
		cn->expect++;
	return enqueue(cn, &h, p);
}

static void recv_done(struct sr_qp *qp, struct sr_conn *cn, enum ibv_wc_status st,
		      enum ibv_wc_opcode op, uint32_t len, const struct sr_hdr *h)
{
	struct sr_rwqe *r = &qp->rq[qp->rq_head];
	struct ibv_wc wc = {.wr_id = r->wr_id,
			    .status = st,
			    .opcode = op,
			    .byte_len = len,
			    .qp_num = qp->ib.qp_num,
			    .src_qp = cn->src_qpn};
	if (h->op == SR_OP_WRITE_IMM || h->op == SR_OP_SEND_IMM) {
		wc.wc_flags = IBV_WC_WITH_IMM;
		wc.imm_data = h->imm;
	}
	free(r->sg);
	qp->rq_head = (qp->rq_head + 1) % (int)qp->cap.max_recv_wr;
	qp->rq_n--;
	/* a completion of a QP comes after every earlier WRITE of it is visible */
	if (qp->ctx->torn)
		sr_torn_land_qp(qp->ctx, qp);
	sr_cq_push((struct sr_cq *)qp->ib.recv_cq, &wc);
}

/* scatter a SEND into the oldest receive WR */
static uint8_t deliver_send(struct sr_qp *qp, struct sr_conn *cn, const struct sr_hdr *h,
			    const uint8_t *p)
{
	struct sr_rwqe *r = &qp->rq[qp->rq_head];
	uint64_t room = 0;
	for (int i = 0; i < r->nsg; i++) {
		struct sr_mr *m = sr_mr_find(qp->ctx, qp->ib.pd, r->sg[i].lkey);
		if (r->sg[i].length && (!m || !(m->access & IBV_ACCESS_LOCAL_WRITE) ||
					!sr_mr_ptr(m, r->sg[i].addr, r->sg[i].length))) {
			recv_done(qp, cn, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0, h);
			return SR_S_OPERR;
		}
		room += r->sg[i].length;
	}
	if (room < h->plen) {
		recv_done(qp, cn, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, h);
		return SR_S_INVREQ;
	}
	uint32_t off = 0;
	for (int i = 0; i < r->nsg && off < h->plen; i++) {
		uint32_t n = r->sg[i].length < h->plen - off ? r->sg[i].length : h->plen - off;
		struct sr_mr *m = sr_mr_find(qp->ctx, qp->ib.pd, r->sg[i].lkey);
		memcpy(sr_mr_ptr(m, r->sg[i].addr, n), p + off, n);
		off += n;
	}
	recv_done(qp, cn, IBV_WC_SUCCESS, IBV_WC_RECV, h->plen, h);
	return SR_S_OK;
}

/* execute one request as the responder; lock held */
static int serve(struct sr_ctx *c, struct sr_conn *cn, const struct sr_hdr *h)
{
	struct sr_qp *qp = cn->qp;
	if (h->seq != cn->expect)
		return 0; /* sent after a NAKed request: the requester resends it */
	if (qp->ib.state != IBV_QPS_RTR && qp->ib.state != IBV_QPS_RTS)
		return qp->ib.state == IBV_QPS_INIT ? respond(cn, h, SR_S_RNR, NULL, 0)
						    : respond(cn, h, SR_S_OPERR, NULL, 0);
	if (qp->a.dest_qp_num != cn->src_qpn)
		return respond(cn, h, SR_S_INVREQ, NULL, 0);
	bool imm = h->op == SR_OP_WRITE_IMM;
	if ((imm || h->op == SR_OP_SEND || h->op == SR_OP_SEND_IMM) && qp->rq_n == 0)
		return respond(cn, h, SR_S_RNR, NULL, 0);
	if ((h->op == SR_OP_SEND || h->op == SR_OP_SEND_IMM) && h->plen && !cn->pay)
		return respond(cn, h, SR_S_INVREQ, NULL, 0); /* over SR_MAX_SEND */
	if (h->op == SR_OP_SEND || h->op == SR_OP_SEND_IMM)
		return respond(cn, h, deliver_send(qp, cn, h, cn->pay), NULL, 0);
	bool rd = h->op == SR_OP_READ;
	uint32_t len = rd ? h->rlen : h->plen;
	int need = rd ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;
	uint8_t *p = NULL;
	if (len) {
		struct sr_mr *m = sr_mr_find(c, qp->ib.pd, h->rkey);
		p = m ? sr_mr_ptr(m, h->raddr, len) : NULL;
		if (!p || !(m->access & need) || !(qp->a.qp_access_flags & need))
			return respond(cn, h, SR_S_ACCESS, NULL, 0);
	}
	if (rd) {
		sr_torn_land_range(c, p, len); /* a READ sees the WRITEs before it */
		return respond(cn, h, SR_S_OK, p, len);
	}
	if (len && !cn->pay)
		return respond(cn, h, SR_S_ACCESS, NULL, 0);
	if (len && c->torn_chunk)
		sr_torn_write(c, qp, p, cn->pay, len, !imm);
	else if (len)
		memcpy(p, cn->pay, len);
	if (imm)
		recv_done(qp, cn, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, len, h);
	return respond(cn, h, SR_S_OK, NULL, 0);
}

/* one whole frame arrived; lock held. -1: the connection is gone. */
static int on_frame(struct sr_ctx *c, struct sr_conn *cn)
{
	const struct sr_hdr *h = &cn->h;
	if (!cn->outbound) {
		if (!cn->hello_seen) {
			struct sr_qp *qp = c->qps[h->qpn & 0xff];
			if (h->type != SR_F_HELLO || !qp || qp->ib.qp_num != h->qpn)
				goto bad;
			if (cn->qp != qp || cn->src_qpn != h->seq)
				goto bad; /* the stream's packets named another pair */
			cn->hello_seen = true;
			return 0;
		}
		if (h->type != SR_F_REQ || !cn->qp)
			goto bad;
		if (serve(c, cn, h))
			goto bad;
		return 0;
	}
	struct sr_qp *qp = cn->qp;
	if (h->type != SR_F_RESP)
		goto bad;
	if (!qp->sq || qp->sq->seq != h->seq || qp->resend_ns)
		return 0; /* stale: answered before a reset or during a back-off */
	static const enum ibv_wc_status st[] = {
	    [SR_S_OK] = IBV_WC_SUCCESS,
	    [SR_S_ACCESS] = IBV_WC_REM_ACCESS_ERR,
	    [SR_S_INVREQ] = IBV_WC_REM_INV_REQ_ERR,
	    [SR_S_OPERR] = IBV_WC_REM_OP_ERR,
	};
	if (h->status == SR_S_RNR) {
		if (qp->a.rnr_retry != 7 && qp->rnr_left-- <= 0) {
			sr_qp_fail(qp, IBV_WC_RNR_RETRY_EXC_ERR);
			return -1;
		}
		qp->resend_ns = sr_now_ns() + SR_RNR_DELAY_NS;
		return 0;
	}
	return sr_sq_answer(qp, st[h->status], cn->pay, h->plen) ? -1 : 0;
bad:
	sr_log("protocol error on a connection (frame type %u): closing it", h->type);
	conn_dead(c, cn);
	return -1;
}

/* Whether a frame's payload is worth buffering: a WRITE into a valid
 * region, a SEND within SR_MAX_SEND, the READ data the oldest WR waits for. */
static bool payload_wanted(struct sr_ctx *c, struct sr_conn *cn)
{
	const struct sr_hdr *h = &cn->h;
	if (!cn->outbound) {
		if (h->type != SR_F_REQ || !cn->qp)
			return false;
		if (h->op == SR_OP_SEND || h->op == SR_OP_SEND_IMM)
			return h->plen <= SR_MAX_SEND;
		struct sr_mr *m = sr_mr_find(c, cn->qp->ib.pd, h->rkey);
		return m && sr_mr_ptr(m, h->raddr, h->plen);
	}
	const struct sr_wqe *w = cn->qp ? cn->qp->sq : NULL;
	return h->type == SR_F_RESP && w && w->op == IBV_WR_RDMA_READ && w->seq == h->seq &&
	       w->len == h->plen;
}

/* Feed in-order stream bytes to a conn's frame parser; lock held.
 * -1: the conn is gone (a protocol error closed it). */
int sr_conn_rx(struct sr_ctx *c, struct sr_conn *cn, const uint8_t *b, size_t n)
{
	while (n) {
		size_t k;
		if (cn->hgot < SR_HDR_LEN) {
			k = SR_HDR_LEN - cn->hgot < n ? SR_HDR_LEN - cn->hgot : n;
			memcpy(cn->hbuf + cn->hgot, b, k);
			cn->hgot += k;
			b += k;
			n -= k;
			if (cn->hgot < SR_HDR_LEN)
				return 0;
			if (sr_hdr_decode(cn->hbuf, &cn->h) != 0) {
				sr_log("malformed frame header from a peer: closing the stream");
				conn_dead(c, cn);
				return -1;
			}
			cn->pgot = 0;
			/* a payload nothing will use is dropped, never buffered */
			if (cn->h.plen && payload_wanted(c, cn) &&
			    !(cn->pay = malloc(cn->h.plen))) {
				conn_dead(c, cn);
				return -1;
			}
		} else {
			k = cn->h.plen - cn->pgot < n ? cn->h.plen - cn->pgot : n;
			if (cn->pay)
				memcpy(cn->pay + cn->pgot, b, k);
			cn->pgot += k;
			b += k;
			n -= k;
		}
		if (cn->pgot < cn->h.plen)
			continue;
		int rc = on_frame(c, cn);
		if (rc)
			return rc;
		free(cn->pay);
		cn->pay = NULL;
		cn->hgot = 0;
	}
	return 0;
}

/* the peer acknowledged stream bytes up to ack */
static void on_ack(struct sr_ctx *c, struct sr_conn *cn, uint32_t ack, bool pure)
{
	if (after(ack, cn->una) && !after(ack, cn->end)) {
		uint32_t acked = ack - cn->una;
		cn->una = ack;
		if (after(ack, cn->nxt))
			cn->nxt = ack;
		while (cn->oq && !after(cn->head_off + (uint32_t)cn->oq->len, ack)) {
			struct sr_obuf *o = cn->oq;
			cn->head_off += (uint32_t)o->len;
			cn->oq = o->next;
			if (cn->cur == o)
				cn->cur = NULL;
			free(o);
		}
		if (!cn->oq)
			cn->oq_tail = NULL;
		uint64_t now = sr_now_ns();
		cn->progress_ns = now;
		cn->rto_ns = SR_RTO_MIN_NS;
		cn->rtx_at = now + cn->rto_ns;
		cn->dupacks = 0;
		cn->cwnd += acked / 4 < c->mss ? acked / 4 : c->mss;
		if (cn->cwnd > SR_CWND_MAX)
			cn->cwnd = SR_CWND_MAX;
		return;
	}
	/* three duplicate acknowledgements: a packet was lost, go back once */
	if (pure && ack == cn->una && cn->nxt != cn->una && ++cn->dupacks >= 3 &&
	    !after(cn->recover, cn->una)) {
		cn->recover = cn->nxt;
		cn->nxt = cn->una;
		cn->dupacks = 0;
		cn->cwnd = cn->cwnd / 2 > 4 * c->mss ? cn->cwnd / 2 : 4 * c->mss;
	}
}

/* One received IPv4 packet (the raw socket's filter passed UDP to 4791 for
 * this context's QPs); lock held. Anything malformed or stale is dropped, as
 * a NIC drops it. */
void sr_packet_in(struct sr_ctx *c, const uint8_t *p, size_t len)
{
	if (len < 20 || (p[0] >> 4) != 4)
		return;
	size_t ihl = (size_t)(p[0] & 15) * 4;
	if (ihl < 20 || len < ihl + 8 + SR_PKT_HDR || p[9] != IPPROTO_UDP)
		return;
	const uint8_t *u = p + ihl, *t = u + 8;
	size_t ulen = get16(u + 4);
	if (get16(u + 2) != SR_ROCE_PORT || ulen < 8 + SR_PKT_HDR || ulen > len - ihl)
		return;
	struct in_addr src;
	memcpy(&src, p + 12, 4);
	uint32_t dqpn = get32(t + 4) & 0xffffff, sqpn = get32(t + 12), epoch = get32(t + 16);
	uint32_t seq = get32(t + 20), ack = get32(t + 24), n = (uint32_t)(ulen - 8 - SR_PKT_HDR);
	const uint8_t *d = t + SR_PKT_HDR;
	struct sr_qp *qp = c->qps[dqpn & 0xff];
	if ((dqpn >> 8) != c->lport || !qp || qp->ib.qp_num != dqpn)
		return;
	struct sr_conn *cn;
	if (t[0] == SR_P_FROM_REQ) {
		cn = qp->in;
		if (!cn || cn->epoch != epoch || cn->src_qpn != sqpn ||
		    cn->peer.s_addr != src.s_addr) {
			for (cn = c->conns; cn; cn = cn->next)
				if (!cn->outbound && cn->qp == qp && cn->epoch == epoch &&
				    cn->src_qpn == sqpn && cn->peer.s_addr == src.s_addr)
					break;
			/* a new stream starts at 0; a later byte of an unknown one is stale */
			if (!cn &&
			    (seq != 0 || !n || !(cn = sr_conn_inbound(c, qp, src, sqpn, epoch))))
				return;
			qp->in = cn;
		}
	} else if (t[0] == SR_P_FROM_RESP) {
		cn = qp->out;
		if (!cn || cn->epoch != epoch || cn->peer_qpn != sqpn ||
		    cn->peer.s_addr != src.s_addr)
			return;
	} else {
		return;
	}
	on_ack(c, cn, ack, n == 0);
	if (!n)
		return;
	if (after(seq, cn->rcv_nxt) || !after(seq + n, cn->rcv_nxt)) {
		cn->ack_due = true; /* a gap or a repeat: say where the stream is */
		return;
	}
	uint32_t skip = cn->rcv_nxt - seq;
	cn->rcv_nxt += n - skip;
	cn->ack_due = true;
	sr_conn_rx(c, cn, d + skip, n - skip);
}

static uint64_t rto_ns(const struct sr_qp *qp)
{
	/* 4.096 us << timeout per try, retry_cnt + 1 tries; at least 2 s */
	if (qp->a.timeout == 0)
		return 0;
	uint64_t t =
	    (4096ull << (qp->a.timeout > 31 ? 31 : qp->a.timeout)) * (qp->a.retry_cnt + 1u);
	return t < 2000000000ull ? 2000000000ull : t;
}

static void timers(struct sr_ctx *c, uint64_t now)
{
	/* a packet or its acknowledgement was lost: send again from the first
	 * unacknowledged byte, with a halved window and a doubled timer */
	for (struct sr_conn *cn = c->conns; cn; cn = cn->next)
		if (cn->nxt != cn->una && now >= cn->rtx_at) {
			cn->nxt = cn->una;
			cn->recover = cn->end;
			cn->cwnd = cn->cwnd / 2 > 4 * c->mss ? cn->cwnd / 2 : 4 * c->mss;
			cn->rto_ns =
			    cn->rto_ns * 2 < SR_RTO_MAX_NS ? cn->rto_ns * 2 : SR_RTO_MAX_NS;
			cn->rtx_at = now + cn->rto_ns;
		}
	for (int i = 1; i <= SR_MAX_QP; i++) {
		struct sr_qp *qp = c->qps[i];
		if (!qp || !qp->sq || qp->ib.state != IBV_QPS_RTS)
			continue;
		if (qp->resend_ns && now >= qp->resend_ns) {
			qp->resend_ns = 0;
			for (struct sr_wqe *w = qp->sq; w && !w->err; w = w->next)
				if (sr_send_wqe(qp, w))
					break;
			continue;
		}
		/* the transport's retries: no progress within the QP's timeout */
		uint64_t rto = rto_ns(qp), since = qp->sq->sent_ns;
		if (qp->out && qp->out->progress_ns > since)
			since = qp->out->progress_ns;
		if (!qp->resend_ns && rto && qp->sq->sent_ns && now - since > rto)
			sr_qp_fail(qp, IBV_WC_RETRY_EXC_ERR);
	}
}

static void rx_all(struct sr_ctx *c)
{
	struct mmsghdr mh[SR_BATCH];
	struct iovec iov[SR_BATCH];
	for (int round = 0; round < 16; round++) {
		for (int i = 0; i < SR_BATCH; i++) {
			iov[i] = (struct iovec){.iov_base = c->pkts[i], .iov_len = SR_PKT_MAX};
			mh[i] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[i], .msg_iovlen = 1}};
		}
		int r = recvmmsg(c->rfd, mh, SR_BATCH, MSG_DONTWAIT, NULL);
		if (r <= 0)
			return;
		for (int i = 0; i < r; i++)
			if (!(mh[i].msg_hdr.msg_flags & MSG_TRUNC))
				sr_packet_in(c, c->pkts[i], mh[i].msg_len);
		if (r < SR_BATCH)
			return;
	}
}

static void *progress(void *arg)
{
	struct sr_ctx *c = arg;
	pthread_mutex_lock(&c->mu);
	while (!c->stop) {
		struct pollfd pf[2] = {{.fd = c->efd, .events = POLLIN},
				       {.fd = c->rfd, .events = POLLIN}};
		if (c->tx_blocked)
			pf[1].events |= POLLOUT;
		/* wake for the nearest retransmission or RNR back-off */
		uint64_t now = sr_now_ns(), wake = now + 50000000ull;
		for (struct sr_conn *cn = c->conns; cn; cn = cn->next)
			if (cn->nxt != cn->una && cn->rtx_at < wake)
				wake = cn->rtx_at;
		for (int i = 1; i <= SR_MAX_QP; i++)
			if (c->qps[i] && c->qps[i]->resend_ns && c->qps[i]->resend_ns < wake)
				wake = c->qps[i]->resend_ns;
		uint64_t torn = c->torn ? sr_torn_tick(c, now) : 0;
		if (torn && torn < wake)
			wake = torn;
		int tmo = wake > now ? (int)((wake - now + 999999) / 1000000) : 0;
		pthread_mutex_unlock(&c->mu);
		poll(pf, 2, tmo);
		pthread_mutex_lock(&c->mu);
		if (pf[0].revents) {
			uint64_t v;
			ssize_t r = read(c->efd, &v, sizeof v);
			(void)r;
		}
		if (pf[1].revents & POLLOUT)
			c->tx_blocked = false;
		if (pf[1].revents & POLLIN)
			rx_all(c);
		timers(c, sr_now_ns());
		for (struct sr_conn *cn = c->conns; cn; cn = cn->next)
			flush_conn(c, cn);
		tx_batch(c);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* the raw socket keeps only UDP to 4791 whose BTH names one of our QPs */
static int attach_filter(int fd, uint16_t id)
{
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LDX | BPF_B | BPF_MSH, 0), /* x = IP header length */
	    BPF_STMT(BPF_LD | BPF_H | BPF_IND, 2),  /* UDP destination port */
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SR_ROCE_PORT, 0, 4),
	    BPF_STMT(BPF_LD | BPF_W | BPF_IND, 8 + 4), /* BTH: reserved | dest QP */
	    BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 8),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, id, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, 0x40000),
	    BPF_STMT(BPF_RET | BPF_K, 0),
	};
	struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
	return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog);
}

/* A UDP socket on 4791 that drops everything, so that the kernel finds a
 * receiver and sends no ICMP port-unreachable for each packet. Shared with
 * every context on the address (SO_REUSEPORT); best effort. */
static int sink_open(const struct sr_ctx *c)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int one = 1;
	struct sock_filter drop = BPF_STMT(BPF_RET | BPF_K, 0);
	struct sock_fprog prog = {.len = 1, .filter = &drop};
	struct sockaddr_in a = {
	    .sin_family = AF_INET, .sin_addr = c->dev->ip, .sin_port = htons(SR_ROCE_PORT)};
	if (fd >= 0 && (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
			setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0 ||
			setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) != 0 ||
			bind(fd, (struct sockaddr *)&a, sizeof a) != 0)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* the largest IB MTU whose packet fits the interface's MTU */
static uint32_t path_mss(const struct sr_ctx *c)
{
	struct ifreq ifr = {0};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int mtu = 1500;
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", c->dev->ifname);
	if (fd >= 0 && ioctl(fd, SIOCGIFMTU, &ifr) == 0)
		mtu = ifr.ifr_mtu;
	if (fd >= 0)
		close(fd);
	uint32_t mss = 4096;
	while (mss > 256 && mss + 20 + 8 + SR_PKT_HDR > (uint32_t)mtu)
		mss /= 2;
	return mss;
}

int sr_ctx_start(struct sr_ctx *c)
{
	int rc = 0, big = 8 << 20, one = 1;
	c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	c->idfd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	c->rfd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, IPPROTO_UDP);
	c->sinkfd = -1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr = c->dev->ip};
	socklen_t al = sizeof a;
	if (c->rfd < 0) {
		rc = errno;
		sr_log("%s: a raw IP socket for the RoCEv2 wire: %s (the device needs CAP_NET_RAW)",
		       c->dev->ib.name, strerror(rc));
		goto fail;
	}
	if (c->efd < 0 || c->idfd < 0 || bind(c->idfd, (struct sockaddr *)&a, sizeof a) != 0 ||
	    getsockname(c->idfd, (struct sockaddr *)&a, &al) != 0 ||
	    setsockopt(c->rfd, IPPROTO_IP, IP_HDRINCL, &one, sizeof one) != 0 ||
	    bind(c->rfd,
		 (struct sockaddr *)&(struct sockaddr_in){.sin_family = AF_INET,
							  .sin_addr = c->dev->ip},
		 sizeof a) != 0 ||
	    attach_filter(c->rfd, ntohs(a.sin_port)) != 0) {
		rc = errno;
		sr_log("%s: cannot open the wire on %s: %s", c->dev->ib.name, inet_ntoa(c->dev->ip),
		       strerror(rc));
		goto fail;
	}
	if (setsockopt(c->rfd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big) != 0)
		setsockopt(c->rfd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
	if (setsockopt(c->rfd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof big) != 0)
		setsockopt(c->rfd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
	c->lport = ntohs(a.sin_port);
	c->mss = path_mss(c);
	c->sinkfd = sink_open(c);
	c->torn_chunk = sr_torn_chunk();
	const char *gt = getenv("CRUX_SOFTRDMA_GLOBAL_TCLASS");
	c->global_tclass = gt && *gt ? (int)(strtoul(gt, NULL, 0) & 0xff) : -1;
	c->torn_seed = (uint32_t)sr_now_ns();
	c->pkts = malloc(SR_BATCH * sizeof *c->pkts);
	if (!c->pkts) {
		rc = ENOMEM;
		goto fail;
	}
	rc = pthread_create(&c->thr, NULL, progress, c);
	if (rc)
		goto fail;
	return 0;
fail:
	free(c->pkts);
	c->pkts = NULL;
	int fds[] = {c->efd, c->idfd, c->rfd, c->sinkfd};
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return rc ? rc : EIO;
}

void sr_ctx_stop(struct sr_ctx *c)
{
	pthread_mutex_lock(&c->mu);
	c->stop = true;
	pthread_mutex_unlock(&c->mu);
	sr_wake(c);
	pthread_join(c->thr, NULL);
	while (c->conns)
		sr_conn_close(c, c->conns);
	sr_torn_drop(c);
	close(c->rfd);
	close(c->idfd);
	if (c->sinkfd >= 0)
		close(c->sinkfd);
	close(c->efd);
	free(c->pkts);
}

/* ---- the requester side: the answer to a send work request, or the QP failed ---- */

/* Fail the QP: the oldest send WR gets head_status (when not FLUSH), every
 * other send and receive WR a flush error; the QP enters ERR. Lock held. */
void sr_qp_fail(struct sr_qp *qp, enum ibv_wc_status head_status)
{
	enum ibv_wc_status st = head_status;
	while (qp->sq) {
		struct sr_wqe *w = qp->sq;
		qp->sq = w->next;
		/* error completions are reported even for unsignaled WRs */
		w->signaled = true;
		sr_send_complete(qp, w, st);
		st = IBV_WC_WR_FLUSH_ERR;
		sr_wqe_free(w);
	}
	qp->sq_tail = NULL;
	qp->nsq = 0;
	while (qp->rq_n > 0) {
		struct sr_rwqe *r = &qp->rq[qp->rq_head];
		struct ibv_wc wc = {.wr_id = r->wr_id,
				    .status = IBV_WC_WR_FLUSH_ERR,
				    .opcode = IBV_WC_RECV,
				    .qp_num = qp->ib.qp_num};
		sr_cq_push((struct sr_cq *)qp->ib.recv_cq, &wc);
		free(r->sg);
		qp->rq_head = (qp->rq_head + 1) % (int)qp->cap.max_recv_wr;
		qp->rq_n--;
	}
	qp->ib.state = IBV_QPS_ERR;
	qp->a.qp_state = IBV_QPS_ERR;
	qp->resend_ns = 0;
	qp->stalled = false;
	if (qp->out) {
		sr_conn_close(qp->ctx, qp->out);
		qp->out = NULL;
	}
}

/* The responder answered the oldest send WR: success (READ data in pay) or
 * an error status. Lock held. Returns -1 when the QP failed. */
int sr_sq_answer(struct sr_qp *qp, enum ibv_wc_status st, const uint8_t *pay, uint32_t plen)
{
	struct sr_wqe *w = qp->sq;
	if (st == IBV_WC_SUCCESS && w->op == IBV_WR_RDMA_READ) {
		uint32_t off = 0;
		if (plen != w->len)
			st = IBV_WC_BAD_RESP_ERR;
		for (int i = 0; st == IBV_WC_SUCCESS && i < w->nsg; i++) {
			struct sr_mr *m = sr_mr_find(qp->ctx, qp->ib.pd, w->sg[i].lkey);
			uint8_t *p = m ? sr_mr_ptr(m, w->sg[i].addr, w->sg[i].length) : NULL;
			if (!p && w->sg[i].length) {
				st = IBV_WC_LOC_PROT_ERR;
				break;
			}
			if (w->sg[i].length)
				memcpy(p, pay + off, w->sg[i].length);
			off += w->sg[i].length;
		}
	}
	if (st != IBV_WC_SUCCESS) {
		sr_qp_fail(qp, st);
		return -1;
	}
	qp->sq = w->next;
	if (!qp->sq)
		qp->sq_tail = NULL;
	qp->nsq--;
	qp->rnr_left = qp->a.rnr_retry;
	sr_send_complete(qp, w, IBV_WC_SUCCESS);
	sr_wqe_free(w);
	if (qp->sq && qp->sq->err) {
		sr_qp_fail(qp, qp->sq->err);
		return -1;
	}
	return 0;
}
