/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Software RDMA device: the wire. Each QP that sends opens one TCP connection
 * from its RoCE source port, with IP TOS = its traffic class, to the
 * listener of the context owning the remote QP; requests flow on it and the
 * responder's answers come back on it. A progress thread per context does
 * all socket I/O, so a passive side's memory is written without its
 * application calling in, as an HCA would.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sr.h"

#define SR_RNR_DELAY_NS 1000000u /* back-off after an RNR NAK */

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

static struct sr_conn *conn_new(struct sr_ctx *c, int fd, bool outbound)
{
	struct sr_conn *cn = calloc(1, sizeof *cn);
	if (!cn)
		return NULL;
	cn->fd = fd;
	cn->outbound = outbound;
	cn->id = ++c->next_conn_id;
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
	close(cn->fd);
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
	o->off = 0;
	o->len = SR_HDR_LEN + h->plen;
	sr_hdr_encode(h, o->data);
	if (h->plen && pay)
		memcpy(o->data + SR_HDR_LEN, pay, h->plen);
	if (cn->oq_tail)
		cn->oq_tail->next = o;
	else
		cn->oq = o;
	cn->oq_tail = o;
	return 0;
}

static void set_sockopts(int fd, int tos)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (tos >= 0)
		setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* a socket from the QP's source port toward the remote context's listener */
static int dial(struct sr_qp *qp, uint16_t sport, int *out_fd)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	set_sockopts(fd, qp->a.ah_attr.grh.traffic_class);
	struct sockaddr_in la = {.sin_family = AF_INET, .sin_addr = qp->ctx->dev->ip,
				 .sin_port = htons(sport)};
	struct sockaddr_in ra = {.sin_family = AF_INET, .sin_addr = qp->rip,
				 .sin_port = htons((uint16_t)(qp->a.dest_qp_num >> 8))};
	if (bind(fd, (struct sockaddr *)&la, sizeof la) != 0 ||
	    (connect(fd, (struct sockaddr *)&ra, sizeof ra) != 0 && errno != EINPROGRESS)) {
		int e = errno;
		close(fd);
		return e;
	}
	*out_fd = fd;
	return 0;
}

int sr_conn_open(struct sr_qp *qp)
{
	int fd = -1;
	uint16_t sport = sr_qp_sport(qp);
	int rc = dial(qp, sport, &fd);
	if (rc == EADDRINUSE || rc == EADDRNOTAVAIL) {
		/* another QP already uses this 4-tuple: TCP cannot share it */
		static bool said;
		if (!said)
			sr_log("source port %u is taken toward this peer; using an ephemeral port", sport);
		said = true;
		rc = dial(qp, 0, &fd);
	}
	if (rc) {
		sr_log("connect to %s QP 0x%x: %s", inet_ntoa(qp->rip), qp->a.dest_qp_num, strerror(rc));
		return rc;
	}
	struct sr_conn *cn = conn_new(qp->ctx, fd, true);
	if (!cn) {
		close(fd);
		return ENOMEM;
	}
	cn->connecting = true;
	cn->qp = qp;
	qp->out = cn;
	struct sr_hdr h = {.type = SR_F_HELLO, .qpn = qp->a.dest_qp_num, .seq = qp->ib.qp_num};
	return enqueue(cn, &h, NULL);
}

/* frame one send WR (again, after an RNR back-off); lock held */
int sr_send_wqe(struct sr_qp *qp, struct sr_wqe *w)
{
	static const uint8_t ops[] = {
		[IBV_WR_RDMA_WRITE] = SR_OP_WRITE, [IBV_WR_RDMA_WRITE_WITH_IMM] = SR_OP_WRITE_IMM,
		[IBV_WR_SEND] = SR_OP_SEND, [IBV_WR_SEND_WITH_IMM] = SR_OP_SEND_IMM,
		[IBV_WR_RDMA_READ] = SR_OP_READ,
	};
	struct sr_hdr h = {.type = SR_F_REQ, .op = ops[w->op], .qpn = qp->a.dest_qp_num,
			   .seq = w->seq, .rkey = w->rkey, .raddr = w->raddr, .imm = w->imm};
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

/* write what the socket takes; lock held. -1: the connection died. */
static int flush_conn(struct sr_ctx *c, struct sr_conn *cn)
{
	while (!cn->connecting && cn->oq) {
		struct sr_obuf *o = cn->oq;
		ssize_t n = send(cn->fd, o->data + o->off, o->len - o->off, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			conn_dead(c, cn);
			return -1;
		}
		o->off += (size_t)n;
		if (o->off == o->len) {
			cn->oq = o->next;
			if (!cn->oq)
				cn->oq_tail = NULL;
			free(o);
		}
	}
	return 0;
}

void sr_flush(struct sr_conn *cn) { flush_conn(cn->qp->ctx, cn); }

static int respond(struct sr_conn *cn, const struct sr_hdr *rq, uint8_t st, const uint8_t *p,
		   uint32_t n)
{
	struct sr_hdr h = {.type = SR_F_RESP, .op = rq->op, .status = st, .qpn = cn->src_qpn,
			   .seq = rq->seq, .plen = st == SR_S_OK ? n : 0};
	if (st == SR_S_OK)
		cn->expect++;
	return enqueue(cn, &h, p);
}

static void recv_done(struct sr_qp *qp, struct sr_conn *cn, enum ibv_wc_status st,
		      enum ibv_wc_opcode op, uint32_t len, const struct sr_hdr *h)
{
	struct sr_rwqe *r = &qp->rq[qp->rq_head];
	struct ibv_wc wc = {.wr_id = r->wr_id, .status = st, .opcode = op, .byte_len = len,
			    .qp_num = qp->ib.qp_num, .src_qp = cn->src_qpn};
	if (h->op == SR_OP_WRITE_IMM || h->op == SR_OP_SEND_IMM) {
		wc.wc_flags = IBV_WC_WITH_IMM;
		wc.imm_data = h->imm;
	}
	free(r->sg);
	qp->rq_head = (qp->rq_head + 1) % (int)qp->cap.max_recv_wr;
	qp->rq_n--;
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
	if (rd)
		return respond(cn, h, SR_S_OK, p, len);
	if (len && !cn->pay)
		return respond(cn, h, SR_S_ACCESS, NULL, 0);
	if (len)
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
			cn->hello_seen = true;
			cn->qp = qp;
			cn->src_qpn = h->seq;
			/* ACKs and read responses leave with the responder QP's class */
			if (qp->ib.state == IBV_QPS_RTR || qp->ib.state == IBV_QPS_RTS) {
				int tos = qp->a.ah_attr.grh.traffic_class;
				setsockopt(cn->fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
			}
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
		[SR_S_OK] = IBV_WC_SUCCESS, [SR_S_ACCESS] = IBV_WC_REM_ACCESS_ERR,
		[SR_S_INVREQ] = IBV_WC_REM_INV_REQ_ERR, [SR_S_OPERR] = IBV_WC_REM_OP_ERR,
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

static int read_conn(struct sr_ctx *c, struct sr_conn *cn)
{
	static _Thread_local uint8_t scratch[65536]; /* dropped payloads */
	for (int frames = 0; frames < 256; frames++) {
		ssize_t n;
		if (cn->hgot < SR_HDR_LEN) {
			n = recv(cn->fd, cn->hbuf + cn->hgot, SR_HDR_LEN - cn->hgot, 0);
		} else if (cn->pay) {
			n = recv(cn->fd, cn->pay + cn->pgot, cn->h.plen - cn->pgot, 0);
		} else {
			size_t left = cn->h.plen - cn->pgot;
			n = recv(cn->fd, scratch, left < sizeof scratch ? left : sizeof scratch, 0);
		}
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			conn_dead(c, cn);
			return -1;
		}
		if (n < 0)
			return 0;
		if (cn->hgot < SR_HDR_LEN) {
			cn->hgot += (size_t)n;
			if (cn->hgot < SR_HDR_LEN)
				continue;
			if (sr_hdr_decode(cn->hbuf, &cn->h) != 0) {
				sr_log("malformed frame header from a peer: closing the connection");
				conn_dead(c, cn);
				return -1;
			}
			cn->pgot = 0;
			if (cn->h.plen) {
				/* a payload nothing will use is read and dropped, never buffered */
				if (payload_wanted(c, cn) && !(cn->pay = malloc(cn->h.plen))) {
					conn_dead(c, cn);
					return -1;
				}
				continue;
			}
		} else {
			cn->pgot += (size_t)n;
			if (cn->pgot < cn->h.plen)
				continue;
		}
		int rc = on_frame(c, cn);
		if (rc)
			return rc;
		free(cn->pay);
		cn->pay = NULL;
		cn->hgot = 0;
	}
	return 0;
}

static void accept_all(struct sr_ctx *c)
{
	for (;;) {
		int fd = accept4(c->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0)
			return;
		set_sockopts(fd, -1);
		if (!conn_new(c, fd, false))
			close(fd);
	}
}

static uint64_t rto_ns(const struct sr_qp *qp)
{
	/* 4.096 us << timeout per try, retry_cnt + 1 tries; at least 2 s */
	if (qp->a.timeout == 0)
		return 0;
	uint64_t t = (4096ull << (qp->a.timeout > 31 ? 31 : qp->a.timeout)) * (qp->a.retry_cnt + 1u);
	return t < 2000000000ull ? 2000000000ull : t;
}

static void timers(struct sr_ctx *c, uint64_t now)
{
	for (int i = 1; i <= SR_MAX_QP; i++) {
		struct sr_qp *qp = c->qps[i];
		if (!qp || !qp->sq || qp->ib.state != IBV_QPS_RTS)
			continue;
		if (qp->resend_ns && now >= qp->resend_ns) {
			qp->resend_ns = 0;
			for (struct sr_wqe *w = qp->sq; w && !w->err; w = w->next)
				if (sr_send_wqe(qp, w))
					break;
			if (qp->out)
				flush_conn(c, qp->out);
			continue;
		}
		uint64_t rto = rto_ns(qp);
		if (!qp->resend_ns && rto && now - qp->sq->sent_ns > rto && qp->sq->sent_ns)
			sr_qp_fail(qp, IBV_WC_RETRY_EXC_ERR);
	}
}

static void *progress(void *arg)
{
	struct sr_ctx *c = arg;
	struct pollfd *pf = NULL;
	uint64_t *ids = NULL;
	size_t cap = 0;
	pthread_mutex_lock(&c->mu);
	while (!c->stop) {
		size_t n = 2;
		for (struct sr_conn *cn = c->conns; cn; cn = cn->next)
			n++;
		if (n > cap) {
			struct pollfd *np = realloc(pf, n * sizeof *pf);
			uint64_t *ni = np ? realloc(ids, n * sizeof *ids) : NULL;
			if (np)
				pf = np;
			if (!ni) {
				pthread_mutex_unlock(&c->mu);
				usleep(1000);
				pthread_mutex_lock(&c->mu);
				continue;
			}
			ids = ni;
			cap = n;
		}
		pf[0] = (struct pollfd){.fd = c->efd, .events = POLLIN};
		pf[1] = (struct pollfd){.fd = c->lfd, .events = POLLIN};
		size_t k = 2;
		for (struct sr_conn *cn = c->conns; cn; cn = cn->next, k++) {
			pf[k] = (struct pollfd){.fd = cn->fd, .events = POLLIN};
			if (cn->connecting || cn->oq)
				pf[k].events |= POLLOUT;
			ids[k] = cn->id;
		}
		int tmo = 50;
		for (int i = 1; i <= SR_MAX_QP; i++)
			if (c->qps[i] && c->qps[i]->resend_ns)
				tmo = 1;
		pthread_mutex_unlock(&c->mu);
		poll(pf, n, tmo);
		pthread_mutex_lock(&c->mu);
		if (pf[0].revents) {
			uint64_t v;
			ssize_t r = read(c->efd, &v, sizeof v);
			(void)r;
		}
		if (pf[1].revents)
			accept_all(c);
		for (size_t i = 2; i < n; i++) {
			if (!pf[i].revents)
				continue;
			struct sr_conn *cn = c->conns;
			while (cn && cn->id != ids[i])
				cn = cn->next;
			if (!cn)
				continue; /* closed meanwhile */
			if (cn->connecting) {
				int err = 0;
				socklen_t el = sizeof err;
				getsockopt(cn->fd, SOL_SOCKET, SO_ERROR, &err, &el);
				if (err) {
					conn_dead(c, cn);
					continue;
				}
				if (!(pf[i].revents & (POLLOUT | POLLHUP | POLLERR)))
					continue;
				cn->connecting = false;
			}
			if ((pf[i].revents & (POLLIN | POLLHUP | POLLERR)) && read_conn(c, cn))
				continue;
			flush_conn(c, cn);
		}
		timers(c, sr_now_ns());
	}
	pthread_mutex_unlock(&c->mu);
	free(pf);
	free(ids);
	return NULL;
}

int sr_ctx_start(struct sr_ctx *c)
{
	c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	c->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int rc = 0;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr = c->dev->ip};
	socklen_t al = sizeof a;
	if (c->efd < 0 || c->lfd < 0 || bind(c->lfd, (struct sockaddr *)&a, sizeof a) != 0 ||
	    listen(c->lfd, 256) != 0 || getsockname(c->lfd, (struct sockaddr *)&a, &al) != 0) {
		rc = errno;
		sr_log("%s: cannot listen on %s: %s", c->dev->ib.name, inet_ntoa(c->dev->ip), strerror(rc));
		goto fail;
	}
	c->lport = ntohs(a.sin_port);
	rc = pthread_create(&c->thr, NULL, progress, c);
	if (rc)
		goto fail;
	return 0;
fail:
	if (c->efd >= 0)
		close(c->efd);
	if (c->lfd >= 0)
		close(c->lfd);
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
	close(c->lfd);
	close(c->efd);
}
