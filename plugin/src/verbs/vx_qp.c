/* SPDX-License-Identifier: Apache-2.0 */
/*
 * RC queue pair attributes per state, as NCCL's IB transport sets them
 * (net_ib: INIT with port/pkey/access, RTR with the GRH on RoCE or the LID
 * on IB, min RNR timer 12, RTS with timeout/retry 7), plus the class and
 * path Crux adds: traffic class, SL and the flow label.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "vx.h"

void cruxn_vx_qp_cfg_default(struct cruxn_vx_qp_cfg *q)
{
	q->timeout = 20;
	q->retry_cnt = 7;
	q->pkey = 0;
	q->nqps = 1;
	q->split = false;
	q->ar = -1;
	q->ar_threshold = 8192;
	q->relaxed = 2;
	q->warm_lanes = 2;
	q->lanes_ahead = -1;
	q->lane_interval_ns = 10000000ull;
}

void cruxn_vx_split(size_t size, int nqps, size_t *chunk, int *nparts)
{
	size_t c;

	if (nqps <= 1 || size == 0) {
		*chunk = size;
		*nparts = 1;
		return;
	}
	c = (size + (size_t)nqps - 1) / (size_t)nqps;
	c = (c + CRUXN_VX_SPLIT_ALIGN - 1) / CRUXN_VX_SPLIT_ALIGN * CRUXN_VX_SPLIT_ALIGN;
	*chunk = c;
	*nparts = (int)((size + c - 1) / c);
}

void cruxn_vx_attr_init(const struct cruxn_vx_ep *local, const struct cruxn_vx_qp_cfg *q,
			int access, struct ibv_qp_attr *a, int *mask)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_INIT;
	a->pkey_index = (uint16_t)q->pkey;
	a->port_num = local->port;
	a->qp_access_flags = (unsigned int)access;
	*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
}

void cruxn_vx_attr_rtr(const struct cruxn_vx_ep *local, const struct cruxn_vx_ep *remote,
		       const struct cruxn_class *cls, uint32_t flow_label, struct ibv_qp_attr *a,
		       int *mask)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTR;
	a->path_mtu = (enum ibv_mtu)(local->mtu < remote->mtu ? local->mtu : remote->mtu);
	a->dest_qp_num = remote->qpn;
	a->rq_psn = remote->psn;
	a->max_dest_rd_atomic = 1;
	a->min_rnr_timer = 12;
	if (local->link_layer == IBV_LINK_LAYER_ETHERNET) {
		a->ah_attr.is_global = 1;
		a->ah_attr.grh.dgid = remote->gid;
		a->ah_attr.grh.flow_label = flow_label & 0xfffff;
		a->ah_attr.grh.sgid_index = (uint8_t)local->gid_index;
		a->ah_attr.grh.hop_limit = 255;
		a->ah_attr.grh.traffic_class = (uint8_t)(cls->tos & 0xfc);
	} else {
		a->ah_attr.is_global = 0;
		a->ah_attr.dlid = remote->lid;
	}
	a->ah_attr.sl = (uint8_t)(cls->sl & 0xf);
	a->ah_attr.src_path_bits = 0;
	a->ah_attr.port_num = local->port;
	*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
}

void cruxn_vx_attr_rts(const struct cruxn_vx_ep *local, const struct cruxn_vx_qp_cfg *q,
		       struct ibv_qp_attr *a, int *mask)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTS;
	a->timeout = (uint8_t)q->timeout;
	a->retry_cnt = (uint8_t)q->retry_cnt;
	a->rnr_retry = 7;
	a->sq_psn = local->psn;
	a->max_rd_atomic = 1;
	*mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
}

static crux_status_t modify(const struct cruxn_ibv *v, struct ibv_qp *qp, struct ibv_qp_attr *a,
			    int mask, const char *step, const char *hint, char *err, size_t errlen)
{
	int rc = v->modify_qp(qp, a, mask);

	if (rc == 0)
		return CRUX_OK;
	/* verbs return the errno (rdma-core) or -1 with errno set (old providers) */
	if (rc < 0)
		rc = errno ? errno : EINVAL;
	snprintf(err, errlen, "the device refused queue pair %u's move to %s (%s)%s%s", qp->qp_num,
		 step, strerror(rc), hint[0] ? ": " : "", hint);
	return rc == EINVAL ? CRUX_ERR_INVAL : CRUX_ERR_IO;
}

crux_status_t cruxn_vx_qp_connect(const struct cruxn_ibv *v, struct ibv_qp *qp,
				  const struct cruxn_vx_ep *local, const struct cruxn_vx_ep *remote,
				  const struct cruxn_vx_qp_cfg *q, int access,
				  const struct cruxn_class *cls, uint32_t flow_label, char *err,
				  size_t errlen)
{
	struct ibv_qp_attr a;
	int mask;
	char hint[160];
	crux_status_t st;

	cruxn_vx_attr_init(local, q, access, &a, &mask);
	st = modify(v, qp, &a, mask, "INIT", "check NCCL_IB_PKEY and the port", err, errlen);
	if (st != CRUX_OK)
		return st;
	cruxn_vx_attr_rtr(local, remote, cls, flow_label, &a, &mask);
	snprintf(hint, sizeof(hint),
		 "GID index %d, traffic class %d, SL %d, MTU %d: check NCCL_IB_GID_INDEX and "
		 "the level map's SL",
		 local->gid_index, cls->tos & 0xfc, cls->sl, (int)a.path_mtu);
	st = modify(v, qp, &a, mask, "RTR", hint, err, errlen);
	if (st != CRUX_OK)
		return st;
	cruxn_vx_attr_rts(local, q, &a, &mask);
	return modify(v, qp, &a, mask, "RTS", "check NCCL_IB_TIMEOUT and NCCL_IB_RETRY_CNT", err,
		      errlen);
}

uint16_t cruxn_vx_sport_of_flow_label(uint32_t fl)
{
	return (uint16_t)(0xC000u | ((fl & 0x3fffu) ^ ((fl & 0xFC000u) >> 14)));
}

uint32_t cruxn_vx_flow_label_for_sport(uint16_t sport, bool *exact)
{
	uint32_t low = sport & 0x3fffu;

	*exact = sport >= 0xC000u;
	if (sport == 0) {
		*exact = true;
		return 0;
	}
	/* Label 0 means "let the device hash": reach 0xC000 with a high bit set. */
	if (low == 0)
		return (1u << 14) | 1u;
	return low;
}

bool cruxn_vx_sport_probe(const struct cruxn_ibv *v, const struct cruxn_vx_dev *d,
			  const struct cruxn_vx_qp_cfg *q, char *why, size_t len)
{
	struct ibv_qp_init_attr ia;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct cruxn_vx_ep self = d->ep;
	struct cruxn_class cls = {0, 0, 0, 0};
	char err[320];
	int rc;

	if (!v->mlx5_udp_sport) {
		snprintf(why, len, "%s", v->mlx5_why[0] ? v->mlx5_why : "no libmlx5 loaded");
		return false;
	}
	cq = v->create_cq(d->ctx, 4, NULL, NULL, 0);
	if (!cq) {
		snprintf(why, len, "probe: cannot create a completion queue (%s)", strerror(errno));
		return false;
	}
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 1;
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	qp = v->create_qp(d->pd, &ia);
	if (!qp) {
		snprintf(why, len, "probe: cannot create a queue pair (%s)", strerror(errno));
		v->destroy_cq(cq);
		return false;
	}
	/* connected to itself, as a flush QP: the call is made on an RTS RC QP */
	self.qpn = qp->qp_num;
	self.psn = qp->qp_num & 0xffffff;
	if (cruxn_vx_qp_connect(v, qp, &self, &self, q, IBV_ACCESS_LOCAL_WRITE, &cls, 0, err,
				sizeof(err)) != CRUX_OK) {
		snprintf(why, len, "probe: %s", err);
		rc = -1;
	} else {
		rc = v->mlx5_udp_sport(qp, 0xC000);
		if (rc != 0)
			snprintf(why, len, "mlx5dv_modify_qp_udp_sport refused: %s",
				 strerror(rc > 0  ? rc
					  : errno ? errno
						  : EOPNOTSUPP));
	}
	v->destroy_qp(qp);
	v->destroy_cq(cq);
	return rc == 0;
}

void cruxn_vx_sport_probe_all(struct cruxn_vx *vx, const struct cruxn_vx_qp_cfg *q, char *line,
			      size_t len)
{
	size_t n = 0;

	n += (size_t)snprintf(line, len, "verbs transport: the route's UDP source ports are set");
	for (int i = 0; i < vx->ndevs && n < len; i++) {
		struct cruxn_vx_dev *d = &vx->devs[i];
		char why[400];

		d->live_sport = cruxn_vx_sport_probe(&vx->ibv, d, q, why, sizeof(why));
		if (d->live_sport)
			n += (size_t)snprintf(
			    line + n, len - n,
			    "%s on %s port %u by mlx5dv_modify_qp_udp_sport (live, "
			    "exact port) and grh.flow_label at RTR",
			    i ? ";" : "", d->name, d->ep.port);
		else
			n += (size_t)snprintf(line + n, len - n,
					      "%s on %s port %u by grh.flow_label at RTR only (%s)",
					      i ? ";" : "", d->name, d->ep.port, why);
	}
}
