/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stress of the software RDMA device: several QP pairs between two contexts,
 * one thread each, thousands of mixed WRITE / WRITE_IMM / SEND / READ with
 * pseudo-random sizes and offsets; every byte moved is checked.
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srt.h"

#define NQP    4
#define NWR    3000
#define BUF    (1u << 20)
#define MAXLEN (64u * 1024)
#define DEPTH  32

struct lane {
	struct ibv_context *ca, *cb;
	struct ibv_pd *pa, *pb;
	struct srt_end a, b;
	uint8_t *src, *dst, *rsrc, *rdst, *rbuf;
	struct ibv_mr *msrc, *mdst, *mrsrc, *mrdst, *mrbuf;
	int id;
	const char *err;
};

static uint32_t mix(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352d;
	x ^= x >> 15;
	x *= 0x846ca68b;
	return x ^ (x >> 16);
}

static void wr_shape(int lane, uint32_t k, uint32_t *off, uint32_t *len)
{
	uint32_t h = mix((uint32_t)lane * 1000003u + k);
	*len = h % 5 == 0 ? 0 : 1 + h % MAXLEN;
	*off = mix(h) % (BUF - MAXLEN);
}

static int mk_qp(struct srt_end *e, struct ibv_context *c, struct ibv_pd *pd)
{
	e->ctx = c;
	e->pd = pd;
	e->cq = ibv_create_cq(c, 4 * DEPTH, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = {.send_cq = e->cq,
				      .recv_cq = e->cq,
				      .qp_type = IBV_QPT_RC,
				      .cap = {DEPTH, DEPTH, 1, 1, 0}};
	e->qp = e->cq ? ibv_create_qp(pd, &ia) : NULL;
	if (!e->qp)
		return -1;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
						   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_LOCAL_WRITE};
	return ibv_modify_qp(e->qp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static void *run(void *arg)
{
	struct lane *l = arg;
	uint32_t posted = 0, done = 0, rdone = 0;
	int inflight = 0;
	struct ibv_wc wc[16];
	while (done < NWR && !l->err) {
		while (posted < NWR && inflight < DEPTH / 2) {
			uint32_t off, len, k = posted;
			wr_shape(l->id, k, &off, &len);
			enum ibv_wr_opcode op =
			    (enum ibv_wr_opcode[]){IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM,
						   IBV_WR_SEND, IBV_WR_RDMA_READ}[k % 4];
			if (op == IBV_WR_SEND && len > MAXLEN)
				len = MAXLEN;
			if (op == IBV_WR_RDMA_WRITE_WITH_IMM || op == IBV_WR_SEND)
				if (srt_recv(l->b.qp, k, l->rbuf + (k % DEPTH) * MAXLEN, MAXLEN,
					     l->mrbuf->lkey))
					l->err = "post_recv failed";
			int rc;
			if (op == IBV_WR_RDMA_READ)
				rc = srt_post(l->a.qp, op, k, l->rdst + off, len, l->mrdst->lkey,
					      (uintptr_t)l->rsrc + off, l->mrsrc->rkey, 0, true);
			else
				rc = srt_post(l->a.qp, op, k, l->src + off, len, l->msrc->lkey,
					      (uintptr_t)l->dst + off, l->mdst->rkey, k, true);
			if (rc)
				l->err = "post_send failed";
			posted++;
			inflight++;
		}
		int n = ibv_poll_cq(l->a.cq, 16, wc);
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id != done) {
				l->err = "requester completion out of order or failed";
				break;
			}
			uint32_t off, len;
			wr_shape(l->id, done, &off, &len);
			if (wc[i].wr_id % 4 == 3 && memcmp(l->rdst + off, l->rsrc + off, len))
				l->err = "READ data differs";
			done++;
			inflight--;
		}
		n = ibv_poll_cq(l->b.cq, 16, wc);
		for (int i = 0; i < n; i++) {
			uint32_t k = (uint32_t)wc[i].wr_id, off, len;
			wr_shape(l->id, k, &off, &len);
			if (wc[i].status != IBV_WC_SUCCESS || wc[i].byte_len != len)
				l->err = "receive completion failed or has a wrong length";
			else if (k % 4 == 1 && ntohl(wc[i].imm_data) != k)
				l->err = "wrong immediate";
			else if (k % 4 == 2 &&
				 memcmp(l->rbuf + (k % DEPTH) * MAXLEN, l->src + off, len))
				l->err = "SEND data differs";
			rdone++;
		}
	}
	while (!l->err && rdone < NWR / 2) {
		int n = ibv_poll_cq(l->b.cq, 16, wc);
		for (int i = 0; i < n; i++)
			rdone += wc[i].status == IBV_WC_SUCCESS;
	}
	/* every byte any WRITE touched equals the source */
	for (uint32_t k = 0; !l->err && k < NWR; k++) {
		uint32_t off, len;
		wr_shape(l->id, k, &off, &len);
		if (k % 4 < 2 && memcmp(l->dst + off, l->src + off, len))
			l->err = "WRITE data differs";
	}
	return NULL;
}

int main(void)
{
	setenv("CRUX_SOFTRDMA_IFNAMES", "lo", 1);
	int n = 0;
	struct ibv_device **dl = ibv_get_device_list(&n);
	if (!dl || n < 1) {
		fprintf(stderr, "FAIL: no softrdma device on lo\n");
		return 1;
	}
	struct ibv_context *ca = ibv_open_device(dl[0]), *cb = ibv_open_device(dl[0]);
	ibv_free_device_list(dl);
	struct ibv_pd *pa = ibv_alloc_pd(ca), *pb = ibv_alloc_pd(cb);
	union ibv_gid g;
	ibv_query_gid(ca, 1, 2, &g);
	static struct lane L[NQP];
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	for (int i = 0; i < NQP; i++) {
		struct lane *l = &L[i];
		l->id = i;
		l->src = malloc(BUF);
		l->dst = calloc(1, BUF);
		l->rsrc = malloc(BUF);
		l->rdst = calloc(1, BUF);
		l->rbuf = calloc(DEPTH, MAXLEN);
		for (uint32_t j = 0; j < BUF; j++) {
			l->src[j] = (uint8_t)mix(j * 31u + (uint32_t)i);
			l->rsrc[j] = (uint8_t)mix(j * 17u + 5u + (uint32_t)i);
		}
		l->msrc = ibv_reg_mr(pa, l->src, BUF, acc);
		l->mrdst = ibv_reg_mr(pa, l->rdst, BUF, acc);
		l->mdst = ibv_reg_mr(pb, l->dst, BUF, acc);
		l->mrsrc = ibv_reg_mr(pb, l->rsrc, BUF, acc);
		l->mrbuf = ibv_reg_mr(pb, l->rbuf, DEPTH * MAXLEN, acc);
		if (mk_qp(&l->a, ca, pa) || mk_qp(&l->b, cb, pb) ||
		    srt_connect(&l->a, l->b.qp->qp_num, &g, (uint8_t)(i * 32),
				(uint32_t)i * 0x1234) ||
		    srt_connect(&l->b, l->a.qp->qp_num, &g, 0, 0)) {
			fprintf(stderr, "FAIL: QP pair %d setup\n", i);
			return 1;
		}
	}
	pthread_t t[NQP];
	for (int i = 0; i < NQP; i++)
		pthread_create(&t[i], NULL, run, &L[i]);
	int bad = 0;
	for (int i = 0; i < NQP; i++) {
		pthread_join(t[i], NULL);
		if (L[i].err) {
			fprintf(stderr, "FAIL: QP pair %d: %s\n", i, L[i].err);
			bad = 1;
		}
	}
	for (int i = 0; i < NQP; i++) {
		struct lane *l = &L[i];
		ibv_destroy_qp(l->a.qp);
		ibv_destroy_qp(l->b.qp);
		ibv_destroy_cq(l->a.cq);
		ibv_destroy_cq(l->b.cq);
		ibv_dereg_mr(l->msrc);
		ibv_dereg_mr(l->mrdst);
		ibv_dereg_mr(l->mdst);
		ibv_dereg_mr(l->mrsrc);
		ibv_dereg_mr(l->mrbuf);
		free(l->src);
		free(l->dst);
		free(l->rsrc);
		free(l->rdst);
		free(l->rbuf);
	}
	ibv_dealloc_pd(pa);
	ibv_dealloc_pd(pb);
	ibv_close_device(ca);
	ibv_close_device(cb);
	if (!bad)
		printf("softrdma stress: %d QP pairs x %d WRs, every byte checked\n", NQP, NWR);
	return bad;
}
