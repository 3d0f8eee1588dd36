/* SPDX-License-Identifier: Apache-2.0 */
#include "srt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int srt_end_open(struct srt_end *e, int depth)
{
	memset(e, 0, sizeof *e);
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	if (!l || n < 1) {
		ibv_free_device_list(l);
		return ENODEV;
	}
	e->ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	if (!e->ctx)
		return errno;
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = ibv_create_cq(e->ctx, 4 * depth, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = {.send_cq = e->cq,
				      .recv_cq = e->cq,
				      .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = (uint32_t)depth,
					      .max_recv_wr = (uint32_t)depth,
					      .max_send_sge = 4,
					      .max_recv_sge = 4,
					      .max_inline_data = 64}};
	e->qp = e->pd && e->cq ? ibv_create_qp(e->pd, &ia) : NULL;
	if (!e->qp)
		return EIO;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
						   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_LOCAL_WRITE};
	return ibv_modify_qp(e->qp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

int srt_connect(struct srt_end *e, uint32_t dqpn, const union ibv_gid *dgid, uint8_t tc,
		uint32_t fl)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR,
				.path_mtu = IBV_MTU_4096,
				.dest_qp_num = dqpn,
				.max_dest_rd_atomic = 1,
				.min_rnr_timer = 12};
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = *dgid;
	a.ah_attr.grh.sgid_index = 2;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.traffic_class = tc;
	a.ah_attr.grh.flow_label = fl;
	int rc =
	    ibv_modify_qp(e->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc)
		return rc;
	struct ibv_qp_attr r = {.qp_state = IBV_QPS_RTS,
				.timeout = 14,
				.retry_cnt = 7,
				.rnr_retry = 7,
				.max_rd_atomic = 1};
	return ibv_modify_qp(e->qp, &r,
			     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				 IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

int srt_pair(struct srt_end *a, struct srt_end *b, int depth, uint8_t tc, uint32_t fl)
{
	int rc = srt_end_open(a, depth);
	if (!rc)
		rc = srt_end_open(b, depth);
	union ibv_gid ga, gb;
	if (!rc && (ibv_query_gid(a->ctx, 1, 2, &ga) || ibv_query_gid(b->ctx, 1, 2, &gb)))
		rc = EIO;
	if (!rc)
		rc = srt_connect(a, b->qp->qp_num, &gb, tc, fl);
	if (!rc)
		rc = srt_connect(b, a->qp->qp_num, &ga, tc, fl);
	return rc;
}

void srt_end_close(struct srt_end *e)
{
	if (e->qp)
		ibv_destroy_qp(e->qp);
	if (e->cq)
		ibv_destroy_cq(e->cq);
	if (e->pd)
		ibv_dealloc_pd(e->pd);
	if (e->ctx)
		ibv_close_device(e->ctx);
	memset(e, 0, sizeof *e);
}

int srt_wait(struct ibv_cq *cq, struct ibv_wc *wc, int n, int timeout_ms)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int got = 0;
	while (got < n) {
		int k = ibv_poll_cq(cq, n - got, wc + got);
		if (k < 0)
			return got;
		got += k;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > timeout_ms)
			break;
		if (!k)
			usleep(100);
	}
	return got;
}

int srt_post(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, void *addr, uint32_t len,
	     uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm, bool signaled)
{
	struct ibv_sge sg = {.addr = (uintptr_t)addr, .length = len, .lkey = lkey};
	struct ibv_send_wr wr = {.wr_id = wr_id,
				 .sg_list = &sg,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = signaled ? IBV_SEND_SIGNALED : 0,
				 .imm_data = htonl(imm)};
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	struct ibv_send_wr *bad = NULL;
	return ibv_post_send(qp, &wr, &bad);
}

int srt_recv(struct ibv_qp *qp, uint64_t wr_id, void *addr, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sg = {.addr = (uintptr_t)addr, .length = len, .lkey = lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sg, .num_sge = 1};
	struct ibv_recv_wr *bad = NULL;
	return ibv_post_recv(qp, &wr, &bad);
}
