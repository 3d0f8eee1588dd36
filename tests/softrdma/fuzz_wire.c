/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: a hostile peer of the software RDMA device. The input goes
 * in twice, under the context's lock as its progress thread would: as the
 * byte stream after a valid HELLO of a requester QP, into a QP in RTS (with a
 * registered MR and a posted receive), and as one received IPv4 packet. The
 * device must answer, drop or close, never crash.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sr.h"
#include "srt.h"

#define PEER_QPN 0x123456u

static struct srt_end g_e;
static uint8_t g_buf[4096];
static struct ibv_mr *g_mr;

static int init(void)
{
	setenv("CRUX_SOFTRDMA_IFNAMES", "lo", 1);
	if (srt_end_open(&g_e, 16))
		return -1;
	g_mr =
	    ibv_reg_mr(g_e.pd, g_buf, sizeof g_buf,
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	union ibv_gid g;
	ibv_query_gid(g_e.ctx, 1, 2, &g);
	if (!g_mr || srt_connect(&g_e, PEER_QPN, &g, 0, 0))
		return -1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready = -2;
	if (ready == -2)
		ready = init();
	if (ready)
		abort();
	/* keep receives posted and completions drained so runs stay alike */
	struct ibv_wc wc[16];
	while (ibv_poll_cq(g_e.cq, 16, wc) > 0) {
	}
	srt_recv(g_e.qp, 1, g_buf, 64, g_mr->lkey);
	struct sr_qp *qp = (struct sr_qp *)g_e.qp;
	struct sr_ctx *c = qp->ctx;
	struct in_addr lo = {.s_addr = htonl(INADDR_LOOPBACK)};
	uint8_t hello[SR_HDR_LEN];
	struct sr_hdr h = {.type = SR_F_HELLO, .qpn = g_e.qp->qp_num, .seq = PEER_QPN};
	sr_hdr_encode(&h, hello);
	pthread_mutex_lock(&c->mu);
	struct sr_conn *cn = sr_conn_inbound(c, qp, lo, PEER_QPN, 1);
	if (cn && sr_conn_rx(c, cn, hello, sizeof hello) == 0 && sr_conn_rx(c, cn, data, size) == 0)
		sr_conn_close(c, cn);
	sr_packet_in(c, data, size);
	/* whatever the packet opened goes too: runs stay alike */
	for (struct sr_conn *o = c->conns, *nx; o; o = nx) {
		nx = o->next;
		if (!o->outbound)
			sr_conn_close(c, o);
	}
	pthread_mutex_unlock(&c->mu);
	/* a decoded header encodes back to the same bytes */
	if (size >= SR_HDR_LEN) {
		struct sr_hdr d;
		uint8_t back[SR_HDR_LEN];
		if (sr_hdr_decode(data, &d) == 0) {
			sr_hdr_encode(&d, back);
			if (memcmp(back, data, 3) || memcmp(back + 4, data + 4, SR_HDR_LEN - 8))
				abort();
		}
	}
	return 0;
}
