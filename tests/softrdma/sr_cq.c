/* SPDX-License-Identifier: Apache-2.0 */
/* Software RDMA device: completion queues, and completing a send work request. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "sr.h"

SR_API struct ibv_cq *ibv_create_cq(struct ibv_context *ib, int cqe, void *cq_context,
				    struct ibv_comp_channel *ch, int comp_vector)
{
	(void)comp_vector;
	if (cqe < 1 || cqe > (1 << 20)) {
		errno = EINVAL;
		return NULL;
	}
	struct sr_cq *cq = calloc(1, sizeof *cq);
	if (cq)
		cq->ring = calloc((size_t)cqe, sizeof *cq->ring);
	if (!cq || !cq->ring) {
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	cq->cap = cqe;
	cq->ib.context = ib;
	cq->ib.channel = ch;
	cq->ib.cq_context = cq_context;
	cq->ib.cqe = cqe;
	pthread_mutex_init(&cq->ib.mutex, NULL);
	pthread_cond_init(&cq->ib.cond, NULL);
	return &cq->ib;
}

SR_API int ibv_destroy_cq(struct ibv_cq *ib)
{
	struct sr_cq *cq = (struct sr_cq *)ib;
	struct sr_ctx *c = (struct sr_ctx *)ib->context;
	pthread_mutex_lock(&c->mu);
	int users = cq->users;
	pthread_mutex_unlock(&c->mu);
	if (users)
		return EBUSY;
	pthread_mutex_destroy(&ib->mutex);
	pthread_cond_destroy(&ib->cond);
	free(cq->ring);
	free(cq);
	return 0;
}

/* caller holds the context mutex */
void sr_cq_push(struct sr_cq *cq, const struct ibv_wc *wc)
{
	if (cq->n == cq->cap) {
		if (!cq->overflowed)
			sr_log("CQ overrun (%d entries): completions are lost", cq->cap);
		cq->overflowed = true;
		return;
	}
	cq->ring[(cq->head + cq->n) % cq->cap] = *wc;
	cq->n++;
	if (cq->armed && cq->ib.channel) {
		cq->armed = false;
		ssize_t w = write(cq->ib.channel->refcnt, "c", 1);
		(void)w;
	}
}

int sr_cq_poll(struct ibv_cq *ib, int num, struct ibv_wc *wc)
{
	struct sr_cq *cq = (struct sr_cq *)ib;
	struct sr_ctx *c = (struct sr_ctx *)ib->context;
	int k = 0;
	pthread_mutex_lock(&c->mu);
	while (k < num && cq->n > 0) {
		wc[k++] = cq->ring[cq->head];
		cq->head = (cq->head + 1) % cq->cap;
		cq->n--;
	}
	pthread_mutex_unlock(&c->mu);
	return k;
}

int sr_cq_req_notify(struct ibv_cq *ib, int solicited_only)
{
	(void)solicited_only;
	struct sr_cq *cq = (struct sr_cq *)ib;
	struct sr_ctx *c = (struct sr_ctx *)ib->context;
	pthread_mutex_lock(&c->mu);
	cq->armed = true;
	pthread_mutex_unlock(&c->mu);
	return 0;
}

void sr_wqe_free(struct sr_wqe *w)
{
	free(w->sg);
	free(w->inl);
	free(w);
}

void sr_send_complete(struct sr_qp *qp, struct sr_wqe *w, enum ibv_wc_status st)
{
	if (st == IBV_WC_SUCCESS && !w->signaled)
		return;
	static const enum ibv_wc_opcode map[] = {
	    [IBV_WR_RDMA_WRITE] = IBV_WC_RDMA_WRITE,
	    [IBV_WR_RDMA_WRITE_WITH_IMM] = IBV_WC_RDMA_WRITE,
	    [IBV_WR_SEND] = IBV_WC_SEND,
	    [IBV_WR_SEND_WITH_IMM] = IBV_WC_SEND,
	    [IBV_WR_RDMA_READ] = IBV_WC_RDMA_READ,
	};
	struct ibv_wc wc = {0};
	wc.wr_id = w->wr_id;
	wc.status = st;
	wc.opcode = map[w->op];
	wc.qp_num = qp->ib.qp_num;
	if (w->op == IBV_WR_RDMA_READ)
		wc.byte_len = w->len;
	sr_cq_push((struct sr_cq *)qp->ib.send_cq, &wc);
}
