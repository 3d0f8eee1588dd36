/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the software RDMA device's tests: a connected QP pair. */
#ifndef SRT_H
#define SRT_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

struct srt_end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
};

/* open the first device twice and connect one RC QP in each; tc/fl go in the AV */
int srt_pair(struct srt_end *a, struct srt_end *b, int depth, uint8_t tc, uint32_t fl);
int srt_connect(struct srt_end *e, uint32_t dqpn, const union ibv_gid *dgid, uint8_t tc,
		uint32_t fl);
int srt_end_open(struct srt_end *e, int depth);
void srt_end_close(struct srt_end *e);
/* poll until n completions or timeout_ms; returns the number polled */
int srt_wait(struct ibv_cq *cq, struct ibv_wc *wc, int n, int timeout_ms);
int srt_post(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, void *addr, uint32_t len,
	     uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm, bool signaled);
int srt_recv(struct ibv_qp *qp, uint64_t wr_id, void *addr, uint32_t len, uint32_t lkey);

#endif
