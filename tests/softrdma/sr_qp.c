/* SPDX-License-Identifier: Apache-2.0 */
/* Software RDMA device: the RC QP state machine and posting. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sr.h"

/*
 * Firmware latency (CRUX_SOFTRDMA_FW_LATENCY_US="LO-HI" microseconds): QP
 * create, modify and destroy are firmware commands on a NIC (0.1-1 ms each
 * on mlx5), run one at a time per device; the double waits a uniformly
 * drawn time in [LO, HI] under one lock per device.
 */
static pthread_mutex_t fw_lock[8] = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
				     PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
				     PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
				     PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER};

static void fw_command(const struct sr_ctx *c)
{
	const char *e = getenv("CRUX_SOFTRDMA_FW_LATENCY_US");
	static _Atomic unsigned seed = 88172645u;
	unsigned long lo, hi;
	char *end;

	if (!e || !*e)
		return;
	lo = strtoul(e, &end, 10);
	hi = *end == '-' ? strtoul(end + 1, NULL, 10) : lo;
	if (hi < lo || hi > 1000000)
		return;
	unsigned r = atomic_fetch_add(&seed, 2654435761u) * 2246822519u;
	unsigned long us = lo + (hi > lo ? (r >> 8) % (hi - lo + 1) : 0);
	pthread_mutex_t *m = &fw_lock[c->dev->ifindex & 7];
	pthread_mutex_lock(m);
	usleep((useconds_t)us);
	pthread_mutex_unlock(m);
}

SR_API struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
	struct sr_ctx *c = (struct sr_ctx *)pd->context;
	fw_command(c);
	if (ia->qp_type != IBV_QPT_RC || ia->srq || !ia->send_cq || !ia->recv_cq ||
	    ia->send_cq->context != pd->context || ia->recv_cq->context != pd->context ||
	    ia->cap.max_send_wr > 16384 || ia->cap.max_recv_wr > 16384 ||
	    ia->cap.max_send_sge > 30 || ia->cap.max_recv_sge > 30 ||
	    ia->cap.max_inline_data > 1024) {
		errno = EINVAL;
		return NULL;
	}
	struct sr_qp *qp = calloc(1, sizeof *qp);
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	qp->cap = ia->cap;
	if (qp->cap.max_send_wr == 0)
		qp->cap.max_send_wr = 1;
	if (qp->cap.max_recv_wr == 0)
		qp->cap.max_recv_wr = 1;
	if (qp->cap.max_send_sge == 0)
		qp->cap.max_send_sge = 1;
	if (qp->cap.max_recv_sge == 0)
		qp->cap.max_recv_sge = 1;
	qp->rq = calloc(qp->cap.max_recv_wr, sizeof *qp->rq);
	if (!qp->rq) {
		free(qp);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&c->mu);
	int slot = 1;
	while (slot <= SR_MAX_QP && c->qps[slot])
		slot++;
	if (slot > SR_MAX_QP) {
		pthread_mutex_unlock(&c->mu);
		free(qp->rq);
		free(qp);
		errno = ENOMEM;
		return NULL;
	}
	qp->ctx = c;
	qp->slot = slot;
	qp->sig_all = ia->sq_sig_all != 0;
	qp->ib.context = pd->context;
	qp->ib.qp_context = ia->qp_context;
	qp->ib.pd = pd;
	qp->ib.send_cq = ia->send_cq;
	qp->ib.recv_cq = ia->recv_cq;
	qp->ib.qp_num = ((uint32_t)c->lport << 8) | (uint32_t)slot;
	qp->ib.state = IBV_QPS_RESET;
	qp->ib.qp_type = IBV_QPT_RC;
	pthread_mutex_init(&qp->ib.mutex, NULL);
	pthread_cond_init(&qp->ib.cond, NULL);
	((struct sr_cq *)ia->send_cq)->users++;
	((struct sr_cq *)ia->recv_cq)->users++;
	c->qps[slot] = qp;
	pthread_mutex_unlock(&c->mu);
	ia->cap = qp->cap;
	return &qp->ib;
}

static void qp_reset(struct sr_qp *qp)
{
	sr_qp_fail(qp, IBV_WC_WR_FLUSH_ERR);
	qp->next_seq = 0;
	qp->rq_head = 0;
	qp->dead = false;
	qp->ib.state = IBV_QPS_RESET;
	qp->a.qp_state = IBV_QPS_RESET;
}

/* As mlx5's destroy_qp (__mlx5_cq_clean): the QP's completions not yet polled vanish. */
static void cq_purge(struct sr_cq *cq, uint32_t qpn)
{
	int keep = 0;
	for (int i = 0; i < cq->n; i++) {
		struct ibv_wc w = cq->ring[(cq->head + i) % cq->cap];
		if (w.qp_num != qpn)
			cq->ring[(cq->head + keep++) % cq->cap] = w;
	}
	cq->n = keep;
}

SR_API int ibv_destroy_qp(struct ibv_qp *ib)
{
	struct sr_qp *qp = (struct sr_qp *)ib;
	struct sr_ctx *c = qp->ctx;
	fw_command(c);
	pthread_mutex_lock(&c->mu);
	sr_torn_land_qp(c, qp);
	qp_reset(qp);
	/* the peer's connections into this QP go too: it sees them close */
	for (struct sr_conn *cn = c->conns, *nx; cn; cn = nx) {
		nx = cn->next;
		if (cn->qp == qp)
			sr_conn_close(c, cn);
	}
	c->qps[qp->slot] = NULL;
	cq_purge((struct sr_cq *)ib->send_cq, ib->qp_num);
	if (ib->recv_cq != ib->send_cq)
		cq_purge((struct sr_cq *)ib->recv_cq, ib->qp_num);
	((struct sr_cq *)ib->send_cq)->users--;
	((struct sr_cq *)ib->recv_cq)->users--;
	pthread_mutex_unlock(&c->mu);
	pthread_mutex_destroy(&ib->mutex);
	pthread_cond_destroy(&ib->cond);
	free(qp->rq);
	free(qp);
	return 0;
}

/* RC transitions: required and optional attribute masks (the kernel's table) */
static int check_mask(enum ibv_qp_state cur, enum ibv_qp_state nxt, int mask)
{
	int req = IBV_QP_STATE, opt = 0;
	if (nxt == IBV_QPS_RESET || nxt == IBV_QPS_ERR) {
		opt = 0;
	} else if (cur == IBV_QPS_RESET && nxt == IBV_QPS_INIT) {
		req |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	} else if (cur == IBV_QPS_INIT && nxt == IBV_QPS_INIT) {
		opt = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	} else if (cur == IBV_QPS_INIT && nxt == IBV_QPS_RTR) {
		req |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		opt = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
	} else if (cur == IBV_QPS_RTR && nxt == IBV_QPS_RTS) {
		req |= IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		       IBV_QP_MAX_QP_RD_ATOMIC;
		opt = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
		      IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE;
	} else if (cur == IBV_QPS_RTS && nxt == IBV_QPS_RTS) {
		opt = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH |
		      IBV_QP_PATH_MIG_STATE | IBV_QP_MIN_RNR_TIMER;
	} else {
		return EINVAL;
	}
	if ((mask & req) != req || (mask & ~(req | opt)))
		return EINVAL;
	return 0;
}

SR_API int ibv_modify_qp(struct ibv_qp *ib, struct ibv_qp_attr *at, int mask)
{
	struct sr_qp *qp = (struct sr_qp *)ib;
	struct sr_ctx *c = qp->ctx;
	int rc = 0;
	fw_command(c);
	pthread_mutex_lock(&c->mu);
	enum ibv_qp_state cur = qp->ib.state;
	enum ibv_qp_state nxt = (mask & IBV_QP_STATE) ? at->qp_state : cur;
	if (!(mask & IBV_QP_STATE) || ((mask & IBV_QP_CUR_STATE) && at->cur_qp_state != cur)) {
		rc = EINVAL;
		goto out;
	}
	rc = check_mask(cur, nxt, mask);
	if (rc)
		goto out;
	if ((mask & IBV_QP_PORT) && at->port_num != 1)
		rc = EINVAL;
	if ((mask & IBV_QP_PKEY_INDEX) && at->pkey_index != 0)
		rc = EINVAL;
	if ((mask & IBV_QP_PATH_MTU) && (at->path_mtu < IBV_MTU_256 || at->path_mtu > IBV_MTU_4096))
		rc = EINVAL;
	if (mask & IBV_QP_AV) {
		const struct ibv_ah_attr *ah = &at->ah_attr;
		static const uint8_t v4map[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
		/* RoCE needs a GRH; this device reaches IPv4 peers only */
		if (!ah->is_global || ah->port_num != 1 || ah->grh.sgid_index >= SR_NGID ||
		    memcmp(ah->grh.dgid.raw, v4map, 12) != 0 || ah->grh.flow_label > 0xfffff)
			rc = EINVAL;
	}
	if (rc)
		goto out;
	if (nxt == IBV_QPS_RESET) {
		qp_reset(qp);
		goto out;
	}
	if (nxt == IBV_QPS_ERR) {
		sr_qp_fail(qp, IBV_WC_WR_FLUSH_ERR);
		goto out;
	}
	if (mask & IBV_QP_ACCESS_FLAGS)
		qp->a.qp_access_flags = at->qp_access_flags;
	if (mask & IBV_QP_PORT)
		qp->a.port_num = at->port_num;
	if (mask & IBV_QP_AV) {
		qp->a.ah_attr = at->ah_attr;
		memcpy(&qp->rip.s_addr, &at->ah_attr.grh.dgid.raw[12], 4);
	}
	if (mask & IBV_QP_PATH_MTU)
		qp->a.path_mtu = at->path_mtu;
	if (mask & IBV_QP_DEST_QPN)
		qp->a.dest_qp_num = at->dest_qp_num;
	if (mask & IBV_QP_RQ_PSN)
		qp->a.rq_psn = at->rq_psn;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		qp->a.max_dest_rd_atomic = at->max_dest_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		qp->a.min_rnr_timer = at->min_rnr_timer;
	if (mask & IBV_QP_SQ_PSN)
		qp->a.sq_psn = at->sq_psn;
	if (mask & IBV_QP_TIMEOUT)
		qp->a.timeout = at->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		qp->a.retry_cnt = at->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY) {
		qp->a.rnr_retry = at->rnr_retry;
		qp->rnr_left = at->rnr_retry;
	}
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		qp->a.max_rd_atomic = at->max_rd_atomic;
	qp->ib.state = nxt;
	qp->a.qp_state = nxt;
out:
	pthread_mutex_unlock(&c->mu);
	return rc;
}

SR_API int ibv_query_qp(struct ibv_qp *ib, struct ibv_qp_attr *at, int mask,
			struct ibv_qp_init_attr *ia)
{
	(void)mask;
	struct sr_qp *qp = (struct sr_qp *)ib;
	pthread_mutex_lock(&qp->ctx->mu);
	*at = qp->a;
	at->cur_qp_state = qp->ib.state;
	at->cap = qp->cap;
	memset(ia, 0, sizeof *ia);
	ia->qp_context = qp->ib.qp_context;
	ia->send_cq = qp->ib.send_cq;
	ia->recv_cq = qp->ib.recv_cq;
	ia->cap = qp->cap;
	ia->qp_type = IBV_QPT_RC;
	ia->sq_sig_all = qp->sig_all;
	pthread_mutex_unlock(&qp->ctx->mu);
	return 0;
}

/* Checks the local SGEs; false => local protection error */
static bool sges_ok(struct sr_qp *qp, const struct ibv_sge *sg, int n, bool write, uint64_t *total)
{
	uint64_t t = 0;
	for (int i = 0; i < n; i++) {
		struct sr_mr *m = sr_mr_find(qp->ctx, qp->ib.pd, sg[i].lkey);
		if (sg[i].length && (!m || !sr_mr_ptr(m, sg[i].addr, sg[i].length) ||
				     (write && !(m->access & IBV_ACCESS_LOCAL_WRITE))))
			return false;
		t += sg[i].length;
	}
	*total = t;
	return true;
}

static int post_one(struct sr_qp *qp, struct ibv_send_wr *wr)
{
	if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM &&
	    wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM &&
	    wr->opcode != IBV_WR_RDMA_READ)
		return EINVAL;
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge)
		return EINVAL;
	if ((uint32_t)qp->nsq >= qp->cap.max_send_wr)
		return ENOMEM;
	bool inl = (wr->send_flags & IBV_SEND_INLINE) && wr->opcode != IBV_WR_RDMA_READ;
	struct sr_wqe *w = calloc(1, sizeof *w);
	if (!w)
		return ENOMEM;
	w->wr_id = wr->wr_id;
	w->op = wr->opcode;
	w->signaled = qp->sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
	w->imm = wr->imm_data;
	if (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM) {
		w->raddr = wr->wr.rdma.remote_addr;
		w->rkey = wr->wr.rdma.rkey;
	}
	uint64_t total = 0;
	bool prot_ok = true;
	if (inl) {
		for (int i = 0; i < wr->num_sge; i++)
			total += wr->sg_list[i].length;
		if (total > qp->cap.max_inline_data) {
			free(w);
			return EINVAL;
		}
		w->inl = malloc(total ? total : 1);
		if (!w->inl) {
			free(w);
			return ENOMEM;
		}
		size_t off = 0;
		for (int i = 0; i < wr->num_sge; i++) {
			memcpy(w->inl + off, (void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			off += wr->sg_list[i].length;
		}
	} else {
		prot_ok =
		    sges_ok(qp, wr->sg_list, wr->num_sge, wr->opcode == IBV_WR_RDMA_READ, &total);
		if (wr->num_sge) {
			w->sg = malloc((size_t)wr->num_sge * sizeof *w->sg);
			if (!w->sg) {
				free(w);
				return ENOMEM;
			}
			memcpy(w->sg, wr->sg_list, (size_t)wr->num_sge * sizeof *w->sg);
		}
		w->nsg = wr->num_sge;
	}
	w->len = (uint32_t)total;
	w->seq = qp->next_seq++;
	if (qp->sq_tail)
		qp->sq_tail->next = w;
	else
		qp->sq = w;
	qp->sq_tail = w;
	qp->nsq++;
	if (!prot_ok || total > SR_MAX_MSG) {
		/* completes in error once the WRs before it did; nothing after it is sent */
		w->err = total > SR_MAX_MSG ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR;
		qp->stalled = true;
		if (qp->sq == w)
			sr_qp_fail(qp, w->err);
		return 0;
	}
	if (qp->dead || (!qp->out && sr_conn_open(qp) != 0)) {
		sr_qp_fail(qp, IBV_WC_RETRY_EXC_ERR);
		return 0;
	}
	if (qp->stalled)
		return 0;
	if (qp->resend_ns == 0)
		return sr_send_wqe(qp, w);
	return 0;
}

static void flush_posted(struct sr_qp *qp, uint64_t wr_id, bool recv)
{
	struct ibv_wc wc = {.wr_id = wr_id,
			    .status = IBV_WC_WR_FLUSH_ERR,
			    .opcode = recv ? IBV_WC_RECV : IBV_WC_SEND,
			    .qp_num = qp->ib.qp_num};
	sr_cq_push((struct sr_cq *)(recv ? qp->ib.recv_cq : qp->ib.send_cq), &wc);
}

static int post_send(struct ibv_qp *ib, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct sr_qp *qp = (struct sr_qp *)ib;
	int rc = 0;
	pthread_mutex_lock(&qp->ctx->mu);
	for (; wr; wr = wr->next) {
		if (qp->ib.state == IBV_QPS_ERR) {
			flush_posted(qp, wr->wr_id, false);
			continue;
		}
		rc = qp->ib.state == IBV_QPS_RTS ? post_one(qp, wr) : EINVAL;
		if (rc) {
			*bad = wr;
			break;
		}
	}
	if (qp->out)
		sr_flush(qp->out);
	pthread_mutex_unlock(&qp->ctx->mu);
	sr_wake(qp->ctx);
	return rc;
}

static int post_recv(struct ibv_qp *ib, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sr_qp *qp = (struct sr_qp *)ib;
	int rc = 0;
	pthread_mutex_lock(&qp->ctx->mu);
	for (; wr; wr = wr->next) {
		if (qp->ib.state == IBV_QPS_ERR) {
			flush_posted(qp, wr->wr_id, true);
			continue;
		}
		if (qp->ib.state == IBV_QPS_RESET || wr->num_sge < 0 ||
		    (uint32_t)wr->num_sge > qp->cap.max_recv_sge)
			rc = EINVAL;
		else if ((uint32_t)qp->rq_n >= qp->cap.max_recv_wr)
			rc = ENOMEM;
		struct ibv_sge *sg = NULL;
		if (!rc && wr->num_sge) {
			sg = malloc((size_t)wr->num_sge * sizeof *sg);
			if (!sg)
				rc = ENOMEM;
			else
				memcpy(sg, wr->sg_list, (size_t)wr->num_sge * sizeof *sg);
		}
		if (rc) {
			*bad = wr;
			break;
		}
		struct sr_rwqe *r = &qp->rq[(qp->rq_head + qp->rq_n) % (int)qp->cap.max_recv_wr];
		r->wr_id = wr->wr_id;
		r->nsg = wr->num_sge;
		r->sg = sg;
		qp->rq_n++;
	}
	pthread_mutex_unlock(&qp->ctx->mu);
	return rc;
}

void sr_ops_fill(struct ibv_context_ops *ops)
{
	ops->poll_cq = sr_cq_poll;
	ops->req_notify_cq = sr_cq_req_notify;
	ops->post_send = post_send;
	ops->post_recv = post_recv;
}
