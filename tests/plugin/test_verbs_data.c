/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The verbs transport end to end in one process over the hardware double's
 * RC semantics: set-up through the TCP bootstrap, grouped receives with
 * tags, 32 requests in flight and the NULL request when the receiver has not
 * posted, every byte verified; the lane switch on a class change (new QP
 * with the new traffic class, next message on it after the drain, old lane
 * closed); a bad rkey and a closed peer as remote errors.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "core.h"
#include "verbs/vx_transport.h"
#include "vx_double.h"

static void *lc, *sc, *rc;

static const struct cruxn_transport_ops *init_ops;
static void send_one(unsigned char *sb, unsigned char *rb, size_t len, unsigned seed);

/* sched_yield() calls from the plugin (linked with --wrap=sched_yield) */
static int nyield;
int __real_sched_yield(void);
int __wrap_sched_yield(void);
int __wrap_sched_yield(void)
{
	nyield++;
	return __real_sched_yield();
}

static int setup(void **state)
{
	char handle[CRUXN_NET_HANDLE_MAXSIZE];
	(void)state;

	setenv("CRUX_SOCKET_IFNAME", "=lo", 1);
	setenv("CRUX_TRANSPORT", "socket", 1); /* init must not touch a real libibverbs */
	if (cruxn_init(NULL) != CRUXN_SUCCESS)
		return -1;
	if (vxd_open_lo(&cruxn_vx_state) != 0)
		return -1;
	cruxn_vx_qpcfg.lane_interval_ns = 0; /* these tests move lanes back to back */
	init_ops = cruxn_ctx.ops; /* the socket transport's: finalize stops it, not the double */
	cruxn_ctx.ops = &cruxn_verbs_ops;
	if (cruxn_listen(0, handle, &lc) != CRUXN_SUCCESS)
		return -1;
	sc = rc = NULL;
	for (int i = 0; (!sc || !rc) && i < 5000; i++) {
		if (!sc && cruxn_connect(0, -1, handle, &sc) != CRUXN_SUCCESS)
			return -1;
		if (!rc && cruxn_accept(lc, &rc) != CRUXN_SUCCESS)
			return -1;
		if (!sc || !rc)
			usleep(1000);
	}
	return sc && rc ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	if (sc)
		cruxn_close_send(sc);
	if (rc)
		cruxn_close_recv(rc);
	cruxn_close_listen(lc);
	cruxn_vx_close(&cruxn_vx_state);
	cruxn_ctx.ops = init_ops;
	cruxn_finalize();
	return 0;
}

static void wait_done(void *req, int *sizes)
{
	int done = 0;
	for (int i = 0; !done && i < 100000; i++)
		assert_int_equal(cruxn_test(req, &done, sizes), CRUXN_SUCCESS);
	assert_true(done);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(seed * 131u + i * 7u);
}

static void check(const unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(seed * 131u + i * 7u))
			fail_msg("byte %zu of message %u differs", i, seed);
}

#define BUF (256 * 1024)

static void test_pingpong_grouped(void **state)
{
	static unsigned char sbuf[8][BUF], rbuf[8][BUF];
	void *smr, *rmr, *sreq[8], *rreq;
	void *rdata[8];
	size_t rsz[8];
	int tags[8], sizes[8];
	(void)state;

	assert_int_equal(cruxn_reg_mr(sc, sbuf, sizeof(sbuf), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rbuf, sizeof(rbuf), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	/* the receiver has not posted: NULL request, nothing moves */
	assert_int_equal(cruxn_isend(sc, sbuf[0], 100, 0, NULL, &sreq[0]), CRUXN_SUCCESS);
	assert_null(sreq[0]);

	for (unsigned round = 0; round < 40; round++) {
		int n = (int)(round % 8) + 1;
		for (int i = 0; i < n; i++) {
			rdata[i] = rbuf[i];
			rsz[i] = BUF;
			tags[i] = 100 + i;
			memset(rbuf[i], 0, BUF);
		}
		assert_int_equal(cruxn_irecv(rc, n, rdata, rsz, tags, NULL, &rreq), CRUXN_SUCCESS);
		assert_non_null(rreq);
		/* the sender's messages in reverse tag order: matched by tag */
		for (int i = n - 1; i >= 0; i--) {
			size_t len = (round * 4099u + (unsigned)i * 777u) % BUF;
			fill(sbuf[i], len, round * 8 + (unsigned)i);
			sreq[i] = NULL;
			for (int k = 0; !sreq[i] && k < 1000; k++)
				assert_int_equal(
				    cruxn_isend(sc, sbuf[i], len, 100 + i, NULL, &sreq[i]),
				    CRUXN_SUCCESS);
			assert_non_null(sreq[i]);
		}
		for (int i = 0; i < n; i++)
			wait_done(sreq[i], NULL);
		wait_done(rreq, sizes);
		for (int i = 0; i < n; i++) {
			size_t len = (round * 4099u + (unsigned)i * 777u) % BUF;
			assert_int_equal(sizes[i], (int)len);
			check(rbuf[i], len, round * 8 + (unsigned)i);
		}
	}
	assert_int_equal(cruxn_dereg_mr(sc, smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_dereg_mr(rc, rmr), CRUXN_SUCCESS);
}

/*
 * The CTS FIFO under torn visibility: the receiver's CTS WRITE lands in
 * aligned chunks, out of order, some late (the double's torn mode; 32-byte
 * chunks are what NCCL's 32-byte alignment assert guards against under
 * relaxed ordering, 64 are cache lines). Grouped receives alternate between
 * two buffer sets, so a stale address is the other set's: every message must
 * land in its own buffer. Seen failing before the FIFO was 64-byte aligned
 * (it sat at offset 24 mod 64 in a calloc'd comm): with 32-byte chunks a new
 * stamp was seen beside the previous round's address and the data went into
 * the other set's buffer.
 */
static void torn_rounds(int chunk)
{
	static unsigned char sbuf[8][4096], rbuf[2][8][4096];
	void *smr, *rmr, *sreq[8], *rreq;
	int sizes[8];
	(void)sizes;

	assert_int_equal(cruxn_reg_mr(sc, sbuf, sizeof(sbuf), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rbuf, sizeof(rbuf), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	vxd.torn_chunk = chunk;
	vxd.torn_writes = 0;
	for (unsigned round = 0; round < 100; round++) {
		int set = (int)(round & 1), n = 8;
		void *rdata[8], *rmh[8];
		size_t rsz[8];
		int tags[8];
		for (int i = 0; i < n; i++) {
			rdata[i] = rbuf[set][i];
			rmh[i] = rmr;
			rsz[i] = 4096;
			tags[i] = 200 + i;
			memset(rbuf[set][i], 0, 4096);
		}
		assert_int_equal(cruxn_irecv(rc, n, rdata, rsz, tags, rmh, &rreq), CRUXN_SUCCESS);
		assert_non_null(rreq);
		for (int i = 0; i < n; i++) {
			size_t len = 1000 + (round * 37u + (unsigned)i * 101u) % 3000;
			fill(sbuf[i], len, round * 8 + (unsigned)i);
			sreq[i] = NULL;
			for (int k = 0; !sreq[i] && k < 1000; k++)
				assert_int_equal(
				    cruxn_isend(sc, sbuf[i], len, 200 + i, smr, &sreq[i]),
				    CRUXN_SUCCESS);
			assert_non_null(sreq[i]);
		}
		for (int i = 0; i < n; i++)
			wait_done(sreq[i], NULL);
		wait_done(rreq, NULL);
		for (int i = 0; i < n; i++)
			check(rbuf[set][i], 1000 + (round * 37u + (unsigned)i * 101u) % 3000,
			      round * 8 + (unsigned)i);
	}
	assert_true(vxd.torn_writes >= 100); /* the CTS rows did land torn */
	vxd.torn_chunk = 0;
	vxd_settle();
	cruxn_dereg_mr(sc, smr);
	cruxn_dereg_mr(rc, rmr);
}

static void test_torn_cts_32(void **state)
{
	(void)state;
	torn_rounds(32);
}

/*
 * Data buffers are registered with relaxed ordering (ibv_reg_mr_iova2), as
 * NCCL does by default; the FIFO and size tables stay strictly ordered;
 * NCCL_IB_PCI_RELAXED_ORDERING=0 turns it off. Data buffers had no relaxed
 * ordering before.
 */
static void test_relaxed_ordering(void **state)
{
	static unsigned char sb[8192], rb[8192];
	struct vx_comm *s = sc, *r = rc;
	void *smr, *rmr;
	(void)state;

	assert_int_equal(cruxn_reg_mr(sc, sb, sizeof(sb), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rb, sizeof(rb), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	assert_true(vxd_mr_access(sb) & IBV_ACCESS_RELAXED_ORDERING);
	assert_true(vxd_mr_access(rb) & IBV_ACCESS_RELAXED_ORDERING);
	assert_false(vxd_mr_access(s->fifo) & IBV_ACCESS_RELAXED_ORDERING);
	assert_false(vxd_mr_access(r->sizes) & IBV_ACCESS_RELAXED_ORDERING);
	send_one(sb, rb, sizeof(sb), 41);
	cruxn_dereg_mr(sc, smr);
	cruxn_dereg_mr(rc, rmr);

	cruxn_vx_qpcfg.relaxed = 0;
	assert_int_equal(cruxn_reg_mr(sc, sb, sizeof(sb), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_false(vxd_mr_access(sb) & IBV_ACCESS_RELAXED_ORDERING);
	cruxn_dereg_mr(sc, smr);
	cruxn_vx_qpcfg.relaxed = 2;
}

/* A second connection pair over the double (as setup), for tests that change the port first. */
static int pair(void **l, void **s, void **r)
{
	char handle[CRUXN_NET_HANDLE_MAXSIZE];

	*s = *r = NULL;
	if (cruxn_listen(0, handle, l) != CRUXN_SUCCESS)
		return -1;
	for (int i = 0; (!*s || !*r) && i < 5000; i++) {
		if (!*s && cruxn_connect(0, -1, handle, s) != CRUXN_SUCCESS)
			return -1;
		if (!*r && cruxn_accept(*l, r) != CRUXN_SUCCESS)
			return -1;
		if (!*s || !*r)
			usleep(1000);
	}
	return *s && *r ? 0 : -1;
}

/*
 * The GID is read again for each connection, over the whole table: after
 * the table changed (the RoCE v2 IPv4 GID moved from index 2 to 200, as
 * when addresses or VLANs come and go) a new connection uses index 200 and
 * moves data. Seen failing before (the GID was read once at init, at most
 * 128 entries): the double refuses an RTR on the emptied index 2.
 */
static void test_gid_read_per_connection(void **state)
{
	struct vxd_port *p = &vxd.devs[0].ports[0];
	union ibv_gid v2 = p->gids[2];
	void *l2, *s2, *r2, *sreq = NULL, *rreq = NULL, *d;
	static unsigned char sb[4096], rb[4096];
	size_t cap = sizeof(rb);
	(void)state;

	p->ngids = 201;
	p->gids[200] = v2;
	p->types[200] = IBV_GID_TYPE_ROCE_V2;
	memset(&p->gids[2], 0, sizeof(p->gids[2]));
	assert_int_equal(pair(&l2, &s2, &r2), 0);
	assert_int_equal(vx_of(s2)->ep.gid_index, 200);
	assert_int_equal(vxd_qp_sgid_index(vx_of(s2)->cur->qps[0]->qp_num), 200);
	assert_int_equal(vxd_qp_sgid_index(vx_of(r2)->cur->qps[0]->qp_num), 200);
	fill(sb, sizeof(sb), 51);
	d = rb;
	assert_int_equal(cruxn_irecv(r2, 1, &d, &cap, NULL, NULL, &rreq), CRUXN_SUCCESS);
	for (int k = 0; !sreq && k < 1000; k++)
		assert_int_equal(cruxn_isend(s2, sb, sizeof(sb), 0, NULL, &sreq), CRUXN_SUCCESS);
	assert_non_null(sreq);
	wait_done(sreq, NULL);
	wait_done(rreq, NULL);
	check(rb, sizeof(rb), 51);
	cruxn_close_send(s2);
	cruxn_close_recv(r2);
	cruxn_close_listen(l2);
	p->gids[2] = v2;
	p->ngids = 3;
}

/*
 * A port that goes down (the async event PORT_ERR) fails the connections on
 * it at their next call, and new ones are refused with the reason, instead
 * of waiting ~34 s for the RC retries to run out; a queue pair's fatal event
 * fails its own connection. Seen failing before: no async-event thread, the
 * receive stayed pending.
 */
static void test_async_port_error(void **state)
{
	static unsigned char rb[4096];
	void *rreq = NULL, *d = rb, *l2, *s2, *r2;
	size_t cap = sizeof(rb);
	cruxn_result_t res = CRUXN_SUCCESS;
	int done = 0;
	(void)state;

	assert_int_equal(cruxn_vx_async_start(&cruxn_vx_state), CRUX_OK);
	/* a QP's fatal event: its connection only */
	assert_int_equal(pair(&l2, &s2, &r2), 0);
	assert_int_equal(vxd_raise_event("srxe_lo", IBV_EVENT_QP_FATAL, 0, vx_of(s2)->cur->qps[0]),
			 0);
	for (int i = 0; i < 2000 && res == CRUXN_SUCCESS; i++) {
		void *sreq = NULL;
		res = cruxn_isend(s2, rb, 10, 0, NULL, &sreq);
		usleep(1000);
	}
	assert_int_equal(res, CRUXN_REMOTE_ERROR);
	assert_int_equal(atomic_load(&vx_of(sc)->b.error), 0);
	cruxn_close_send(s2);
	cruxn_close_recv(r2);
	cruxn_close_listen(l2);

	/* the port goes down: every connection on it */
	assert_int_equal(cruxn_irecv(rc, 1, &d, &cap, NULL, NULL, &rreq), CRUXN_SUCCESS);
	assert_int_equal(vxd_raise_event("srxe_lo", IBV_EVENT_PORT_ERR, 1, NULL), 0);
	res = CRUXN_SUCCESS;
	for (int i = 0; i < 2000 && res == CRUXN_SUCCESS; i++) {
		res = cruxn_test(rreq, &done, NULL);
		usleep(1000);
	}
	assert_int_equal(res, CRUXN_REMOTE_ERROR);
	assert_false(done);
	assert_int_equal(pair(&l2, &s2, &r2), -1); /* refused: the port is down */
	if (s2)
		cruxn_close_send(s2);
	if (r2)
		cruxn_close_recv(r2);
	cruxn_close_listen(l2);
	cruxn_vx_async_stop(&cruxn_vx_state);
}

/* Registered control memory owns its pages: the comms are page-aligned (they were calloc'd). */
static void test_control_memory_pages(void **state)
{
	long page = sysconf(_SC_PAGESIZE);
	struct vx_comm *s = sc, *r = rc;
	(void)state;

	assert_int_equal((uintptr_t)s % (uintptr_t)page, 0);
	assert_int_equal((uintptr_t)r % (uintptr_t)page, 0);
	assert_int_equal((uintptr_t)s->fifo % 64, 0);
	assert_int_equal((uintptr_t)r->cts % 64, 0);
	assert_int_equal((uintptr_t)r->sizes % 64, 0);
}

static void test_torn_cts_64(void **state)
{
	(void)state;
	torn_rounds(64);
}

static void test_32_in_flight(void **state)
{
	static unsigned char sbuf[33][1024], rbuf[33][1024];
	void *smr, *rmr, *sreq[33], *rreq[33];
	(void)state;

	assert_int_equal(cruxn_reg_mr(sc, sbuf, sizeof(sbuf), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rbuf, sizeof(rbuf), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	for (int i = 0; i < 32; i++) {
		void *d = rbuf[i];
		size_t s = 1024;
		assert_int_equal(cruxn_irecv(rc, 1, &d, &s, NULL, NULL, &rreq[i]), CRUXN_SUCCESS);
		assert_non_null(rreq[i]);
	}
	{
		void *d = rbuf[32];
		size_t s = 1024;
		assert_int_equal(cruxn_irecv(rc, 1, &d, &s, NULL, NULL, &rreq[32]), CRUXN_SUCCESS);
		assert_null(rreq[32]); /* the 33rd: NCCL retries later */
	}
	for (int i = 0; i < 32; i++) {
		fill(sbuf[i], 1024, (unsigned)i);
		assert_int_equal(cruxn_isend(sc, sbuf[i], 1024, 0, NULL, &sreq[i]), CRUXN_SUCCESS);
		assert_non_null(sreq[i]);
	}
	for (int i = 0; i < 32; i++) {
		wait_done(sreq[i], NULL);
		wait_done(rreq[i], NULL);
		check(rbuf[i], 1024, (unsigned)i);
	}
	cruxn_dereg_mr(sc, smr);
	cruxn_dereg_mr(rc, rmr);
}

static void send_one(unsigned char *sb, unsigned char *rb, size_t len, unsigned seed)
{
	void *sreq = NULL, *rreq, *d = rb;
	size_t cap = len;

	fill(sb, len, seed);
	memset(rb, 0, len);
	assert_int_equal(cruxn_irecv(rc, 1, &d, &cap, NULL, NULL, &rreq), CRUXN_SUCCESS);
	for (int k = 0; !sreq && k < 10000; k++) {
		int done = 0;
		assert_int_equal(cruxn_isend(sc, sb, len, 0, NULL, &sreq), CRUXN_SUCCESS);
		/* the receiver's proxy tests its receive meanwhile (and answers a LANE) */
		if (!sreq)
			assert_int_equal(cruxn_test(rreq, &done, NULL), CRUXN_SUCCESS);
		assert_false(done);
	}
	assert_non_null(sreq);
	wait_done(sreq, NULL);
	wait_done(rreq, NULL);
	check(rb, len, seed);
}

/*
 * Receives go back to a QP in chains of VX_RECV_BATCH, so up to a batch less
 * one may be owed at any time; a QP holds VX_RECV_DEPTH + VX_RECV_BATCH so
 * that every message that can be in flight still finds one. Here 8 messages
 * leave 8 owed, then 32 receives of 8 slots take 256 messages at once,
 * which the device delivers before the receiver polls anything: with only
 * VX_RECV_DEPTH posted the 249th finds no receive (receiver not ready).
 */
static void test_receives_in_batches(void **state)
{
	static unsigned char sbuf[256][64], rbuf[256][64];
	void *smr, *rmr, *sreq[256], *rreq[32];
	(void)state;

	assert_int_equal(cruxn_reg_mr(sc, sbuf, sizeof(sbuf), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rbuf, sizeof(rbuf), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	for (unsigned i = 0; i < 8; i++)
		send_one(sbuf[0], rbuf[0], 64, 500 + i);
	for (int i = 0; i < 32; i++) {
		void *d[8], *mh[8];
		size_t cap[8];
		int tags[8];
		for (int j = 0; j < 8; j++) {
			d[j] = rbuf[i * 8 + j];
			mh[j] = rmr;
			cap[j] = 64;
			tags[j] = j;
		}
		assert_int_equal(cruxn_irecv(rc, 8, d, cap, tags, mh, &rreq[i]), CRUXN_SUCCESS);
		assert_non_null(rreq[i]);
	}
	/* 32 sends at a time (the sender's requests), the receiver polling nothing meanwhile */
	for (int i = 0; i < 256; i++) {
		fill(sbuf[i], 64, (unsigned)i);
		sreq[i] = NULL;
		for (int k = 0; !sreq[i] && k < 1000; k++)
			assert_int_equal(cruxn_isend(sc, sbuf[i], 64, i % 8, smr, &sreq[i]),
					 CRUXN_SUCCESS);
		assert_non_null(sreq[i]);
		if (i % 32 == 31)
			for (int j = i - 31; j <= i; j++)
				wait_done(sreq[j], NULL);
	}
	for (int i = 0; i < 32; i++)
		wait_done(rreq[i], NULL);
	for (int i = 0; i < 256; i++)
		check(rbuf[i], 64, (unsigned)i);
	cruxn_dereg_mr(sc, smr);
	cruxn_dereg_mr(rc, rmr);
}

static void test_lane_switch(void **state)
{
	static unsigned char sb[65536], rb[65536];
	struct vx_comm *s = sc, *r = rc;
	void *smr, *rmr;
	uint32_t old_qpn = s->cur->qps[0]->qp_num;
	(void)state;

	assert_int_equal(cruxn_reg_mr(sc, sb, sizeof(sb), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rb, sizeof(rb), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	send_one(sb, rb, sizeof(sb), 1);
	assert_int_equal(vxd_qp_tc(old_qpn), 0);

	/* a new decision: DSCP 46, SL 3, route port 50000 */
	s->b.tag.cls.tos = 46 << 2;
	s->b.tag.cls.sl = 3;
	s->b.tag.route.path_id = 7;
	s->b.tag.route.nports = 1;
	s->b.tag.route.ports[0] = 50000;
	s->b.ops->boundary(&s->b, true, true);
	/* the very next message leaves on the new lane: held until it is up, none slips */
	send_one(sb, rb, 4000, 2);
	assert_int_equal(s->cur->id, 1);
	/* the message and the bell that told the receiver of the move (LANE_MOVE) */
	assert_int_equal(vxd_qp_bytes(s->cur->qps[0]->qp_num), 4000 + sizeof(uint64_t));
	for (unsigned i = 3; i < 40; i++)
		send_one(sb, rb, 1000 + i * 1500, i);
	assert_int_equal(s->cur->id, 1);
	assert_int_equal(vxd_qp_tc(s->cur->qps[0]->qp_num), 46 << 2);
	assert_int_equal(cruxn_vx_sport_of_flow_label(vxd_qp_flow_label(s->cur->qps[0]->qp_num)),
			 50000);
	/* the receiver's CTS queue pair took the same class */
	assert_int_equal(r->cur->id, 1);
	assert_int_equal(vxd_qp_tc(r->cur->qps[0]->qp_num), 46 << 2);
	/* the old lane stays warm at both ends (up, not current: CRUX_IB_WARM_LANES) */
	assert_non_null(cruxn_vx_lane_find(s, 0));
	assert_int_equal(cruxn_vx_lane_find(s, 0)->state, VX_LANE_UP);
	assert_non_null(cruxn_vx_lane_find(r, 0));
	assert_int_equal(s->b.marked.tos, 46 << 2);
	cruxn_dereg_mr(sc, smr);
	cruxn_dereg_mr(rc, rmr);
}

/* Lane 0, closing, goes at both ends (both progress); then warm lanes and registrations back. */
static void lane0_gone(struct vx_comm *s, struct vx_comm *r, void *smr, void *rmr)
{
	for (int k = 0; k < 1000 && (cruxn_vx_lane_find(r, 0) || cruxn_vx_lane_find(s, 0)); k++) {
		(void)r->b.ops->progress(&r->b);
		(void)s->b.ops->progress(&s->b);
		usleep(100);
	}
	assert_null(cruxn_vx_lane_find(r, 0));
	assert_null(cruxn_vx_lane_find(s, 0));
	cruxn_vx_qpcfg.warm_lanes = 2;
	cruxn_dereg_mr(sc, smr);
	cruxn_dereg_mr(rc, rmr);
}

/*
 * A receive completion the device writes late (after the sender's LANE_CLOSE
 * crossed the control socket) must not vanish with its lane: mlx5's
 * destroy_qp purges the QP's unpolled CQEs from the shared CQ (the double
 * does too), so the receiver frees a lane only after it counted every part
 * the sender posted there (LANE_CLOSE carries the count). Seen failing
 * before: the lane went at LANE_CLOSE and the first receive never finished.
 */
static void test_lane_close_waits_for_parts(void **state)
{
	static unsigned char sb[8192], rb[2][8192];
	struct vx_comm *s = sc, *r = rc;
	void *smr, *rmr, *sreq = NULL, *rreq[2] = {NULL, NULL};
	size_t cap = sizeof(rb[0]);
	int done = 0, purged;
	(void)state;

	assert_int_equal(cruxn_reg_mr(sc, sb, sizeof(sb), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rb, sizeof(rb), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	cruxn_vx_qpcfg.warm_lanes = 0; /* the old lane closes at once */
	vxd.hold_recv = true;
	fill(sb, sizeof(sb), 21);
	{
		void *d = rb[0];
		assert_int_equal(cruxn_irecv(rc, 1, &d, &cap, NULL, &rmr, &rreq[0]), CRUXN_SUCCESS);
	}
	for (int k = 0; !sreq && k < 1000; k++)
		assert_int_equal(cruxn_isend(sc, sb, sizeof(sb), 0, smr, &sreq), CRUXN_SUCCESS);
	assert_non_null(sreq);
	wait_done(sreq, NULL); /* the sender's WRITE completed: its lane is drained */

	/* a new decision: the next message moves the sender to lane 1, lane 0 closes */
	s->b.tag.cls.tos = 26 << 2;
	s->b.ops->boundary(&s->b, true, false);
	{
		void *d = rb[1];
		assert_int_equal(cruxn_irecv(rc, 1, &d, &cap, NULL, &rmr, &rreq[1]), CRUXN_SUCCESS);
	}
	sreq = NULL;
	for (int k = 0; (!sreq || r->cur->id != 1) && k < 5000; k++) {
		if (!sreq)
			assert_int_equal(cruxn_isend(sc, sb, 100, 0, smr, &sreq), CRUXN_SUCCESS);
		cruxn_vx_ctrl_progress(s); /* the sender's LANE_CLOSE out */
		assert_int_equal(cruxn_test(rreq[0], &done, NULL), CRUXN_SUCCESS);
		assert_false(done); /* its completion is not written yet */
		usleep(100);
	}
	assert_non_null(sreq);
	assert_int_equal(s->cur->id, 1);
	assert_int_equal(r->cur->id, 1); /* the receiver read LANE_CLOSE */
	for (int k = 0; k < 20; k++)	 /* whatever the receiver does with lane 0 now */
		assert_int_equal(cruxn_test(rreq[0], &done, NULL), CRUXN_SUCCESS);
	purged = vxd.purged;
	vxd.hold_recv = false;
	vxd_release_held();
	assert_int_equal(purged, 0); /* no completion vanished with a destroyed queue pair */
	wait_done(rreq[0], NULL);
	wait_done(rreq[1], NULL);
	wait_done(sreq, NULL);
	check(rb[0], sizeof(rb[0]), 21);
	/* lane 0 goes once its part was counted */
	lane0_gone(s, r, smr, rmr);
}

/*
 * CTS writes go unsignaled (one in VX_FIFO signaled, as NCCL's IB
 * transport): no completion says such a write landed, so a lane the sender
 * closes must keep its queue pair while a CTS write posted on it may still
 * be in flight, or the sender never sees that receive. The receiver fences
 * the closing lane (an empty signaled write after its CTS writes) and frees
 * it once that completed. Seen failing with the fence left out: the CTS
 * write in flight went with the queue pair and the send never started.
 */
static void test_lane_close_fences_cts(void **state)
{
	static unsigned char sb[4096], rb[4096];
	struct vx_comm *s = sc, *r = rc;
	void *smr, *rmr, *sreq = NULL, *rreq = NULL, *d = rb;
	size_t cap = sizeof(rb);
	(void)state;

	assert_int_equal(cruxn_reg_mr(sc, sb, sizeof(sb), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rb, sizeof(rb), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	cruxn_vx_qpcfg.warm_lanes = 0; /* the old lane closes at once */
	send_one(sb, rb, 100, 1);      /* lane 0 carried a part */
	/* a new decision, no receive posted: the sender builds lane 1 and moves to it */
	s->b.tag.cls.tos = 26 << 2;
	s->b.ops->boundary(&s->b, true, false);
	for (int k = 0; s->cur->id != 1 && k < 5000; k++) {
		r->b.ops->progress(&r->b); /* the receiver answers LANE */
		assert_int_equal(cruxn_isend(sc, sb, 100, 0, smr, &sreq), CRUXN_SUCCESS);
		assert_null(sreq);
		usleep(100);
	}
	assert_int_equal(s->cur->id, 1);
	/* the receiver posts before it hears of the move: its CTS goes on lane 0, in flight */
	vxd.hold_sends = true;
	vxd.dropped_sends = 0;
	fill(sb, 3000, 2);
	assert_int_equal(cruxn_irecv(rc, 1, &d, &cap, NULL, &rmr, &rreq), CRUXN_SUCCESS);
	assert_int_equal(r->cur->id, 0);
	cruxn_vx_ctrl_progress(s); /* LANE_MOVE and LANE_CLOSE out */
	for (int k = 0; k < 100 && r->cur->id != 1; k++) {
		r->b.ops->progress(&r->b);
		usleep(100);
	}
	assert_int_equal(r->cur->id, 1); /* it read LANE_CLOSE (lane 0's part was counted) */
	for (int k = 0; k < 20; k++)
		r->b.ops->progress(&r->b);
	assert_int_equal(vxd.dropped_sends, 0); /* the CTS write was not lost with lane 0 */
	assert_non_null(cruxn_vx_lane_find(r, 0));
	vxd.hold_sends = false;
	vxd_release_sends();
	for (int k = 0; !sreq && k < 5000; k++)
		assert_int_equal(cruxn_isend(sc, sb, 3000, 0, smr, &sreq), CRUXN_SUCCESS);
	assert_non_null(sreq);
	wait_done(sreq, NULL);
	wait_done(rreq, NULL);
	check(rb, 3000, 2);
	/* lane 0 goes at both ends once the fence completed */
	lane0_gone(s, r, smr, rmr);
}

/*
 * Control bells: an idle receiver reads its control socket only every
 * VX_CTRL_POLL_NS; a sender's control message (here LANE, a lane to build)
 * comes with a bell, an RDMA WRITE of the sender's message count into the
 * receiver's memory, so the receiver reads at once. Without the bell the
 * count never moves and the receiver sees the LANE only at its next
 * periodic read.
 */
static void test_ctrl_bell(void **state)
{
	static unsigned char sb[4096], rb[4096];
	struct vx_comm *s = sc, *r = rc;
	uint32_t got;
	int calls = 0;
	(void)state;

	send_one(sb, rb, 100, 1); /* set-up done at both ends */
	for (int k = 0; k < 20; k++)
		r->b.ops->progress(&r->b);
	assert_true(r->ctrl_quiet); /* nothing under way: periodic reads only */
	assert_false(cruxn_vx_bell_ahead(r));
	got = r->ctrl_got;
	s->b.tag.cls.tos = 10 << 2;
	s->b.ops->boundary(&s->b, true, false); /* LANE queued */
	cruxn_vx_ctrl_progress(s);		/* written, and the bell rung */
	assert_int_equal(s->ctrl_sent, got + 1);
	assert_true(cruxn_vx_bell_ahead(r));
	for (; calls < 100 && !cruxn_vx_lane_find(r, 1); calls++)
		r->b.ops->progress(&r->b);
	assert_non_null(cruxn_vx_lane_find(r, 1)); /* the receiver built its end */
	/* the bell is looked at every VX_BELL_TICK-th call */
	assert_true(calls <= (int)VX_BELL_TICK);
	assert_int_equal(r->ctrl_got, got + 1);
	assert_false(cruxn_vx_bell_ahead(r));
	/* the new lane carries the next message; every byte checked */
	send_one(sb, rb, 3000, 2);
	assert_int_equal(s->cur->id, 1);
}

/*
 * The quiet control socket's rule, which keeps an empty test() to one CQ
 * poll and a look at the bell: no read and no clock before the
 * VX_CTRL_TICK-th call, a read then once VX_CTRL_POLL_NS passed, none
 * again within VX_CTRL_POLL_NS however often test() is called, and a
 * peer's socket ending without a BYE still seen within those bounds (a
 * pending receive fails rather than hangs) when test() is called rarely.
 */
static void test_ctrl_tick(void **state)
{
	static unsigned char sb[4096], rb[4096];
	struct vx_comm *r = rc;
	void *rmr, *rreq, *d = rb;
	size_t cap = sizeof(rb);
	uint64_t t, t0;
	int done = 0, calls = 0;
	cruxn_result_t res = CRUXN_SUCCESS;
	(void)state;

	send_one(sb, rb, 100, 1); /* set-up done at both ends */
	for (int k = 0; k < 20; k++)
		r->b.ops->progress(&r->b);
	assert_true(r->ctrl_quiet);
	r->ctrl_ns = 0; /* last read long ago */
	r->idle_ticks = 0;
	for (unsigned k = 1; k < VX_CTRL_TICK; k++)
		r->b.ops->progress(&r->b);
	assert_int_equal(r->ctrl_ns, 0); /* not read: no system call, no clock */
	r->b.ops->progress(&r->b);
	assert_true(r->ctrl_ns != 0); /* the VX_CTRL_TICK-th call read it */
	t = r->ctrl_ns;
	for (unsigned k = 0; k < 4 * VX_CTRL_TICK; k++)
		r->b.ops->progress(&r->b);
	if (crux_now_ns() - t < VX_CTRL_POLL_NS) /* a loaded machine may take longer */
		assert_int_equal(r->ctrl_ns, t);
	/* the sender goes without a BYE reaching the receiver: its socket's end decides */
	assert_int_equal(cruxn_reg_mr(rc, rb, sizeof(rb), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_irecv(rc, 1, &d, &cap, NULL, NULL, &rreq), CRUXN_SUCCESS);
	assert_int_equal(shutdown(vx_of(sc)->fd, SHUT_RDWR), 0);
	t0 = crux_now_ns();
	while (res == CRUXN_SUCCESS && crux_now_ns() - t0 < 5000000000ull) {
		res = cruxn_test(rreq, &done, NULL);
		calls++;
		usleep(2000); /* a rare caller: about VX_CTRL_POLL_NS / 5 apart */
	}
	assert_int_equal(res, CRUXN_REMOTE_ERROR);
	assert_true(r->b.peer_closed);
	/* calls 2 ms apart: VX_CTRL_POLL_NS passed by the VX_CTRL_TICK-th, which read it */
	assert_true(calls <= (int)VX_CTRL_TICK);
	cruxn_dereg_mr(rc, rmr);
}

/*
 * isend without the receiver's CTS returns at once, as NCCL's IB isend,
 * and polls only on every VX_CTS_WAIT_POLL-th retry (here: the quiet
 * progress calls counted by idle_ticks); a sender that only retries isend
 * still sees its receiver go, as a remote error, not a hang.
 */
static void test_cts_wait_polls(void **state)
{
	static unsigned char sb[4096], rb[4096];
	struct vx_comm *s = sc;
	void *smr, *sreq = NULL;
	cruxn_result_t res = CRUXN_SUCCESS;
	uint32_t ticks;
	(void)state;

	send_one(sb, rb, 100, 1); /* set-up done at both ends */
	assert_int_equal(cruxn_reg_mr(sc, sb, sizeof(sb), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	for (int k = 0; k < 20; k++)
		s->b.ops->progress(&s->b);
	assert_true(s->ctrl_quiet && cruxn_vx_lanes_settled(s));
	s->cts_waits = 0;
	ticks = s->idle_ticks;
	for (unsigned k = 0; k < 2 * VX_CTS_WAIT_POLL; k++) {
		assert_int_equal(cruxn_isend(sc, sb, 100, 0, smr, &sreq), CRUXN_SUCCESS);
		assert_null(sreq); /* no receive posted */
	}
	assert_int_equal(s->idle_ticks - ticks, 2); /* two polls in 2 x VX_CTS_WAIT_POLL */
	/* the receiver goes: retrying isend alone reports it */
	cruxn_close_recv(rc);
	rc = NULL;
	for (int k = 0; k < 4000 && res == CRUXN_SUCCESS; k++) {
		res = cruxn_isend(sc, sb, 100, 0, smr, &sreq);
		if (res == CRUXN_SUCCESS)
			assert_null(sreq);
		usleep(500);
	}
	assert_int_equal(res, CRUXN_REMOTE_ERROR);
	cruxn_dereg_mr(sc, smr);
}

/*
 * A single receive's size is the completion's byte_len (one WRITE WITH
 * IMMEDIATE per message, as NCCL's single-receive sends); a grouped receive
 * still gets each size written into its table before the data. Every size
 * and byte checked, and what the sender's queue pair wrote counted.
 */
static void test_sizes_by_byte_len(void **state)
{
	static unsigned char sb[2][4096], rb[2][4096];
	struct vx_comm *s = sc;
	void *smr, *rmr, *sreq[2], *rreq, *rdata[2] = {rb[0], rb[1]}, *rmh[2];
	size_t cap[2] = {4096, 4096};
	int tags[2] = {1, 2}, sizes[2];
	uint64_t before;
	(void)state;

	assert_int_equal(cruxn_reg_mr(sc, sb, sizeof(sb), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rb, sizeof(rb), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	rmh[0] = rmh[1] = rmr;
	for (unsigned round = 0; round < 2; round++) {
		int n = (int)round + 1; /* a single receive, then a group of two */
		before = vxd_qp_bytes(s->cur->qps[0]->qp_num);
		assert_int_equal(cruxn_irecv(rc, n, rdata, cap, tags, rmh, &rreq), CRUXN_SUCCESS);
		for (int i = 0; i < n; i++) {
			fill(sb[i], 1234 + (size_t)i * 1000, round * 2 + (unsigned)i);
			sreq[i] = NULL;
			for (int k = 0; !sreq[i] && k < 1000; k++)
				assert_int_equal(cruxn_isend(sc, sb[i], 1234 + (size_t)i * 1000,
							     tags[i], smr, &sreq[i]),
						 CRUXN_SUCCESS);
			assert_non_null(sreq[i]);
		}
		for (int i = 0; i < n; i++)
			wait_done(sreq[i], NULL);
		wait_done(rreq, sizes);
		for (int i = 0; i < n; i++) {
			assert_int_equal(sizes[i], 1234 + i * 1000);
			check(rb[i], 1234 + (size_t)i * 1000, round * 2 + (unsigned)i);
		}
		/* the data, plus an 8-byte size per message of a group */
		assert_int_equal(vxd_qp_bytes(s->cur->qps[0]->qp_num) - before,
				 n == 1 ? 1234 : 1234 + 2234 + 2 * sizeof(uint64_t));
	}
	cruxn_dereg_mr(sc, smr);
	cruxn_dereg_mr(rc, rmr);
}

/*
 * Warm lanes: a decision that returns to a class (and path) used before
 * moves back by pointer at a message boundary: no queue pair is created or
 * modified (the firmware commands stay out of the data path), and the
 * receiver's CTS writes follow (LANE_MOVE). Before, every change built a
 * new lane and closed the old one.
 */
static void test_warm_lane_return(void **state)
{
	static unsigned char sb[8192], rb[8192];
	struct vx_comm *s = sc, *r = rc;
	struct cruxn_class a = s->b.tag.cls;
	void *smr, *rmr;
	int qps;
	(void)state;

	assert_int_equal(cruxn_reg_mr(sc, sb, sizeof(sb), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rb, sizeof(rb), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	send_one(sb, rb, sizeof(sb), 91);
	s->b.tag.cls.tos = 34 << 2;
	s->b.ops->boundary(&s->b, true, false);
	send_one(sb, rb, sizeof(sb), 92);
	assert_int_equal(s->cur->id, 1);
	assert_int_equal(r->cur->id, 1);
	qps = vxd.qps;
	s->b.tag.cls = a; /* back to the first class */
	s->b.ops->boundary(&s->b, true, false);
	send_one(sb, rb, sizeof(sb), 93);
	assert_int_equal(s->cur->id, 0); /* the warm lane, by pointer */
	assert_int_equal(vxd.qps, qps);	 /* no queue pair created */
	assert_int_equal(vxd_qp_tc(s->cur->qps[0]->qp_num), a.tos & 0xfc);
	for (int i = 0; i < 100 && r->cur->id != 0; i++) {
		r->b.ops->progress(&r->b);
		usleep(100);
	}
	assert_int_equal(r->cur->id, 0); /* the receiver's CTS followed */
	send_one(sb, rb, sizeof(sb), 94);
	cruxn_dereg_mr(sc, smr);
	cruxn_dereg_mr(rc, rmr);
}

/*
 * Lanes built ahead (CRUX_IB_LANES_AHEAD): once the connection is up, a lane
 * per level is built off the message boundary, so a decision that moves to
 * another level takes its lane by pointer: no queue pair is created at the
 * change. Seen failing before (lanes only for decisions taken): a new lane,
 * its queue pairs created inside the send.
 */
static bool ahead_up(const struct vx_comm *s, const struct cruxn_class *cls, int n)
{
	for (int i = 0; i < n; i++) {
		const struct vx_lane *l = s->lanes;
		while (l && !(l->state == VX_LANE_UP && l->cls.tos == cls[i].tos &&
			      l->cls.sl == cls[i].sl))
			l = l->next;
		if (!l)
			return false;
	}
	return true;
}

static void test_lanes_ahead(void **state)
{
	static unsigned char sb[8192], rb[8192];
	struct vx_comm *s = sc, *r = rc;
	struct cruxn_class cls[2], to;
	void *smr, *rmr;
	int qps;
	(void)state;

	assert_int_equal(cruxn_tag_level_classes(cls, 2, true), 2);
	assert_int_not_equal(cls[0].tos, cls[1].tos);
	cruxn_vx_qpcfg.lanes_ahead = 2;
	assert_int_equal(cruxn_reg_mr(sc, sb, sizeof(sb), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rb, sizeof(rb), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	send_one(sb, rb, sizeof(sb), 81);
	for (int i = 0; i < 2000 && !ahead_up(s, cls, 2); i++) {
		s->b.ops->progress(&s->b);
		r->b.ops->progress(&r->b);
		usleep(100);
	}
	assert_true(ahead_up(s, cls, 2));
	qps = vxd.qps;
	to = s->cur->cls.tos == cls[0].tos ? cls[1] : cls[0];
	s->b.tag.cls = to; /* the decision moves to the other level */
	s->b.ops->boundary(&s->b, true, false);
	send_one(sb, rb, sizeof(sb), 82);
	assert_int_equal(s->cur->cls.tos, to.tos);
	assert_int_equal(vxd_qp_tc(s->cur->qps[0]->qp_num), to.tos & 0xfc);
	assert_int_equal(vxd.qps, qps); /* no queue pair created at the change */
	cruxn_vx_qpcfg.lanes_ahead = -1;
	cruxn_dereg_mr(sc, smr);
	cruxn_dereg_mr(rc, rmr);
}

/*
 * Lane moves are rate-limited per connection (CRUX_IB_LANE_INTERVAL): a
 * decision that flips back within the interval keeps its messages on the
 * current lane, nothing built or moved, and is taken at the first boundary
 * after it. Seen failing before (no limit): the connection moved at once.
 */
static void test_lane_rate_limit(void **state)
{
	static unsigned char sb[4096], rb[4096];
	struct vx_comm *s = sc;
	struct cruxn_class a = s->b.tag.cls;
	void *smr, *rmr;
	int qps;
	(void)state;

	assert_int_equal(cruxn_reg_mr(sc, sb, sizeof(sb), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rb, sizeof(rb), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	cruxn_vx_qpcfg.lane_interval_ns = 300000000ull;
	send_one(sb, rb, sizeof(sb), 101);
	s->b.tag.cls.tos = 34 << 2;
	s->b.ops->boundary(&s->b, true, false);
	send_one(sb, rb, sizeof(sb), 102); /* the first move is free */
	assert_int_equal(s->cur->cls.tos, 34 << 2);
	qps = vxd.qps;
	s->b.tag.cls.tos = 36 << 2; /* and another within 300 ms */
	s->b.ops->boundary(&s->b, true, false);
	send_one(sb, rb, sizeof(sb), 103);
	assert_int_equal(s->cur->cls.tos, 34 << 2); /* held to the current lane */
	assert_int_equal(vxd.qps, qps);		    /* nothing built meanwhile */
	usleep(320000);
	send_one(sb, rb, sizeof(sb), 104);
	send_one(sb, rb, sizeof(sb), 105);
	assert_int_equal(s->cur->cls.tos, 36 << 2); /* taken after the interval */
	cruxn_vx_qpcfg.lane_interval_ns = 0;
	s->b.tag.cls = a;
	cruxn_dereg_mr(sc, smr);
	cruxn_dereg_mr(rc, rmr);
}

/*
 * A route the device cannot realise (a port below 49152 without the live
 * source-port call) is refused and reported: the lane hashes (flow label 0)
 * and the connection says no route, never another path silently. Seen
 * failing before: the port was mapped to a label naming another port.
 */
static void test_unrealisable_route_refused(void **state)
{
	static unsigned char sb[4096], rb[4096];
	struct vx_comm *s = sc;
	void *smr, *rmr;
	(void)state;

	assert_int_equal(cruxn_reg_mr(sc, sb, sizeof(sb), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rb, sizeof(rb), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	s->b.tag.route.path_id = 9;
	s->b.tag.route.nports = 1;
	s->b.tag.route.ports[0] = 40000;
	s->b.ops->boundary(&s->b, false, true);
	send_one(sb, rb, sizeof(sb), 61);
	assert_int_equal(s->cur->id, 1);
	assert_true(s->cur->route_refused);
	assert_int_equal(vxd_qp_flow_label(s->cur->qps[0]->qp_num), 0);
	assert_int_equal(s->b.route_now.path_id, CRUX_PATH_NONE);
	assert_int_equal(s->routes_refused, 1);
	/* a realisable one (49152 and up) is taken */
	s->b.tag.route.path_id = 10;
	s->b.tag.route.ports[0] = 50000;
	s->b.ops->boundary(&s->b, false, true);
	send_one(sb, rb, sizeof(sb), 62);
	assert_int_equal(s->cur->id, 2);
	assert_false(s->cur->route_refused);
	assert_int_equal(cruxn_vx_sport_of_flow_label(vxd_qp_flow_label(s->cur->qps[0]->qp_num)),
			 50000);
	assert_int_equal(s->b.route_now.path_id, 10);
	cruxn_dereg_mr(sc, smr);
	cruxn_dereg_mr(rc, rmr);
}

/* On InfiniBand a route changes nothing (the LID routes): no new lane for it (one was built
 * before). */
static void test_ib_ignores_routes(void **state)
{
	static unsigned char sb[4096], rb[4096];
	struct vx_comm *s = sc;
	void *smr, *rmr;
	(void)state;

	assert_int_equal(cruxn_reg_mr(sc, sb, sizeof(sb), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rb, sizeof(rb), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	s->ep.link_layer = IBV_LINK_LAYER_INFINIBAND;
	s->b.tag.route.path_id = 5;
	s->b.tag.route.nports = 1;
	s->b.tag.route.ports[0] = 50000;
	s->b.ops->boundary(&s->b, false, true);
	send_one(sb, rb, sizeof(sb), 71);
	assert_int_equal(s->cur->id, 0);
	assert_null(cruxn_vx_lane_find(s, 1));
	s->b.tag.cls.sl = 2; /* a class change still moves */
	s->b.ops->boundary(&s->b, true, false);
	send_one(sb, rb, sizeof(sb), 72);
	assert_int_equal(s->cur->id, 1);
	s->ep.link_layer = IBV_LINK_LAYER_ETHERNET;
	cruxn_dereg_mr(sc, smr);
	cruxn_dereg_mr(rc, rmr);
}

/*
 * NCCL_IB_FIFO_TC: on RoCE the receiver's lane QPs (its CTS writes and
 * acknowledgements) take that class, as NCCL's; the sender's data keeps the
 * decision's. Seen failing before (the receiver took the sender's class).
 */
static void test_fifo_tc(void **state)
{
	static unsigned char sb[4096], rb[4096];
	struct vx_comm *s = sc, *r = rc;
	void *smr, *rmr;
	(void)state;

	assert_int_equal(cruxn_reg_mr(sc, sb, sizeof(sb), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rb, sizeof(rb), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	cruxn_ctx.cfg.ib_fifo_tc = 0xb8; /* DSCP 46 */
	s->b.tag.cls.tos = 26 << 2;
	s->b.ops->boundary(&s->b, true, false);
	send_one(sb, rb, sizeof(sb), 81);
	assert_int_equal(s->cur->id, 1);
	assert_int_equal(vxd_qp_tc(s->cur->qps[0]->qp_num), 26 << 2);
	assert_int_equal(r->cur->id, 1);
	assert_int_equal(vxd_qp_tc(r->cur->qps[0]->qp_num), 0xb8);
	cruxn_ctx.cfg.ib_fifo_tc = -1;
	cruxn_dereg_mr(sc, smr);
	cruxn_dereg_mr(rc, rmr);
}

static uint16_t sport_of[1 << 12];

static int fake_udp_sport(struct ibv_qp *qp, uint16_t port)
{
	sport_of[qp->qp_num % (1 << 12)] = port;
	return 0;
}

static int setup4(void **state)
{
	cruxn_vx_qpcfg.nqps = 4;
	return setup(state);
}

static int teardown4(void **state)
{
	cruxn_vx_qpcfg.nqps = 1;
	return teardown(state);
}

/*
 * Four QPs per connection: each message is split over them (the receive
 * completes when every part arrived), every byte checked; after a route of
 * four ports, QP i of the new lane takes port i at both ends and carries data.
 */
static void test_four_qps(void **state)
{
	static unsigned char sb[BUF], rb[BUF];
	static const size_t sizes[] = {0, 1, 127, 128, 129, 300, 513, 4096, 65539, BUF};
	struct vx_comm *s = sc, *r = rc;
	void *smr, *rmr;
	unsigned seed = 1;
	(void)state;

	assert_int_equal(s->nqps, 4);
	assert_int_equal(r->nqps, 4);
	assert_int_equal(s->cur->nqps, 4);
	assert_int_equal(r->cur->nqps, 4);
	assert_int_equal(cruxn_reg_mr(sc, sb, sizeof(sb), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rb, sizeof(rb), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	for (int k = 0; k < 3; k++)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
			send_one(sb, rb, sizes[i], seed++);

	/* a route of four ports: a new lane, QP i on port i at both ends (flow labels) */
	s->b.tag.route.path_id = 3;
	s->b.tag.route.nports = 4;
	for (int i = 0; i < 4; i++)
		s->b.tag.route.ports[i] = (uint16_t)(50000 + i);
	s->b.ops->boundary(&s->b, false, true);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		send_one(sb, rb, sizes[i], seed++);
	assert_int_equal(s->cur->id, 1);
	assert_int_equal(r->cur->id, 1);
	uint64_t most = 0;
	for (int i = 0; i < 4; i++) {
		uint32_t sq = s->cur->qps[i]->qp_num, rq = r->cur->qps[i]->qp_num;
		assert_int_equal(cruxn_vx_sport_of_flow_label(vxd_qp_flow_label(sq)), 50000 + i);
		assert_int_equal(cruxn_vx_sport_of_flow_label(vxd_qp_flow_label(rq)), 50000 + i);
		if (cruxn_vx_qpcfg.split)
			assert_true(vxd_qp_bytes(sq) >=
				    BUF / 4); /* the big message's part at least */
		else
			assert_true(vxd_qp_bytes(sq) >
				    0); /* whole messages round-robin: each QP has some */
		most = vxd_qp_bytes(sq) > most ? vxd_qp_bytes(sq) : most;
	}
	if (!cruxn_vx_qpcfg.split)
		assert_true(most >= BUF); /* NCCL's default: the big message whole on one QP */

	/*
	 * Where the probe found the live change, a route-only change moves the
	 * drained lane's QPs in place: each its exact port, no new lane.
	 */
	cruxn_vx_state.ibv.mlx5_udp_sport = fake_udp_sport;
	cruxn_vx_state.devs[0].live_sport = true;
	s->b.tag.route.path_id = 4;
	for (int i = 0; i < 4; i++)
		s->b.tag.route.ports[i] = (uint16_t)(50010 + i);
	s->b.ops->boundary(&s->b, false, true);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		send_one(sb, rb, sizes[i], seed++);
	assert_int_equal(s->cur->id, 1);
	assert_int_equal(s->repaths, 1);
	assert_int_equal(s->b.route_now.path_id, 4);
	for (int i = 0; i < 4; i++)
		assert_int_equal(sport_of[s->cur->qps[i]->qp_num % (1 << 12)], 50010 + i);
	cruxn_vx_state.ibv.mlx5_udp_sport = NULL;
	cruxn_vx_state.devs[0].live_sport = false;
	cruxn_dereg_mr(sc, smr);
	cruxn_dereg_mr(rc, rmr);
}

/* NCCL_IB_SPLIT_DATA_ON_QPS=1: each message split over the four QPs. */
static void test_four_qps_split(void **state)
{
	cruxn_vx_qpcfg.split = true;
	test_four_qps(state);
	cruxn_vx_qpcfg.split = false;
}

/*
 * Adaptive routing (NCCL_IB_ADAPTIVE_ROUTING, on by default on IB): a part
 * above NCCL_IB_AR_THRESHOLD goes as a plain WRITE and a WRITE WITH
 * IMMEDIATE of no data after it; smaller ones carry their data in the
 * WRITE WITH IMMEDIATE. Every byte checked.
 */
static void test_adaptive_routing_split(void **state)
{
	static unsigned char sb[65536], rb[65536];
	void *smr, *rmr;
	(void)state;

	assert_int_equal(cruxn_reg_mr(sc, sb, sizeof(sb), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rb, sizeof(rb), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	cruxn_vx_state.devs[0].ar = true;
	vxd.data_writes = vxd.empty_imm_writes = 0;
	send_one(sb, rb, sizeof(sb), 31);
	assert_int_equal(vxd.data_writes, 1);
	assert_int_equal(vxd.empty_imm_writes, 1);
	send_one(sb, rb, 8192, 32); /* not above the threshold */
	assert_int_equal(vxd.data_writes, 1);
	assert_int_equal(vxd.empty_imm_writes, 1);
	cruxn_vx_state.devs[0].ar = false;
	send_one(sb, rb, sizeof(sb), 33);
	assert_int_equal(vxd.data_writes, 1);
	cruxn_dereg_mr(sc, smr);
	cruxn_dereg_mr(rc, rmr);
}

static void wait_flush(void *req)
{
	int done = 0;
	for (int i = 0; !done && i < 1000; i++)
		assert_int_equal(cruxn_test(req, &done, NULL), CRUXN_SUCCESS);
	assert_true(done);
}

/*
 * iflush: a receive into GPU memory (registered as CUDA) is flushed by a
 * 1-byte RDMA READ of the last non-empty buffer through a loopback QP;
 * host memory and empty receives need none (NULL request).
 */
static void test_flush(void **state)
{
	static unsigned char sb[8192], rb[2][8192];
	struct vx_comm *r = rc;
	void *smr, *hmr, *gmr, *freq = (void *)1, *data[2] = {rb[0], rb[1]}, *mh[2];
	int sizes[2] = {100, 4000};
	int reads;
	(void)state;

	assert_int_equal(cruxn_reg_mr(sc, sb, sizeof(sb), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rb[0], sizeof(rb[0]), CRUXN_PTR_HOST, &hmr),
			 CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rb[1], sizeof(rb[1]), CRUXN_PTR_CUDA, &gmr),
			 CRUXN_SUCCESS);
	send_one(sb, rb[1], 4000, 9);

	/* host memory: nothing to flush, no loopback QP */
	mh[0] = mh[1] = hmr;
	assert_int_equal(cruxn_iflush(rc, 1, data, sizes, mh, &freq), CRUXN_SUCCESS);
	assert_null(freq);
	assert_null(r->flush_qp);
	freq = (void *)1;
	assert_int_equal(cruxn_iflush(rc, 1, data, sizes, NULL, &freq), CRUXN_SUCCESS);
	assert_null(freq);

	/* GPU memory: one READ of 1 byte from the last non-empty buffer */
	reads = vxd.reads;
	mh[0] = hmr;
	mh[1] = gmr;
	assert_int_equal(cruxn_iflush(rc, 2, data, sizes, mh, &freq), CRUXN_SUCCESS);
	assert_non_null(freq);
	wait_flush(freq);
	assert_int_equal(vxd.reads, reads + 1);
	assert_int_equal(vxd.last_read_addr, (uint64_t)(uintptr_t)rb[1]);
	assert_non_null(r->flush_qp);
	/* connected to itself, with the receiver's class */
	assert_int_equal(r->flush_qp->state, IBV_QPS_RTS);
	assert_int_equal(vxd_qp_tc(r->flush_qp->qp_num), r->b.marked.tos & 0xfc);
	/* the loopback QP is reused; an empty last buffer is skipped */
	sizes[1] = 0;
	mh[0] = gmr;
	data[0] = rb[1];
	assert_int_equal(cruxn_iflush(rc, 2, data, sizes, mh, &freq), CRUXN_SUCCESS);
	assert_non_null(freq);
	wait_flush(freq);
	assert_int_equal(vxd.reads, reads + 2);
	sizes[0] = 0;
	assert_int_equal(cruxn_iflush(rc, 2, data, sizes, mh, &freq), CRUXN_SUCCESS);
	assert_null(freq);
	cruxn_dereg_mr(sc, smr);
	cruxn_dereg_mr(rc, hmr);
	cruxn_dereg_mr(rc, gmr);
}

/*
 * A decision that flips A -> B -> A before B's lane is up: the next message
 * stays on A (no hold), and B's lane, unused, is closed at both ends.
 */
static void test_lane_flip_back(void **state)
{
	static unsigned char sb[8192], rb[8192];
	struct vx_comm *s = sc, *r = rc;
	struct cruxn_class a = s->b.tag.cls;
	void *smr, *rmr;
	(void)state;

	assert_int_equal(cruxn_reg_mr(sc, sb, sizeof(sb), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rb, sizeof(rb), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	s->b.tag.cls.tos = 26 << 2;
	s->b.ops->boundary(&s->b, true, false);
	assert_non_null(cruxn_vx_lane_find(s, 1)); /* being built */
	s->b.tag.cls = a;
	for (unsigned i = 0; i < 20; i++)
		send_one(sb, rb, 100 + i * 300, i);
	assert_int_equal(s->cur->id, 0);
	assert_int_equal(r->cur->id, 0);
	/* idle ends read their control sockets at least every millisecond */
	for (int i = 0; i < 2000 && (!cruxn_vx_lane_find(s, 1) ||
				     cruxn_vx_lane_find(s, 1)->state != VX_LANE_UP);
	     i++) {
		s->b.ops->progress(&s->b);
		r->b.ops->progress(&r->b);
		usleep(100);
	}
	/* the lane built for the short-lived decision stays warm, unused */
	assert_non_null(cruxn_vx_lane_find(s, 1));
	assert_int_equal(cruxn_vx_lane_find(s, 1)->state, VX_LANE_UP);
	assert_non_null(cruxn_vx_lane_find(r, 1));
	assert_int_equal(s->cur->id, 0);
	assert_int_equal(r->cur->id, 0);
	cruxn_dereg_mr(sc, smr);
	cruxn_dereg_mr(rc, rmr);
}

/*
 * The hold's bounds, with a receiver that never serves its control socket:
 * messages wait for the new lane, then (the decision's lane not up after
 * the hold's bound) go on the current lane rather than starve; the lane the
 * peer never answered fails the connection after CRUX_TIMEOUT.
 */
static void test_lane_hold_bounds(void **state)
{
	static unsigned char sb[4096], rb[4096];
	struct vx_comm *s = sc;
	void *smr, *rmr, *sreq = NULL, *rreq, *d = rb;
	size_t cap = sizeof(rb);
	uint64_t saved = cruxn_ctx.cfg.timeout_ms;
	cruxn_result_t res = CRUXN_SUCCESS;
	int first_null;
	(void)state;

	assert_int_equal(cruxn_reg_mr(sc, sb, sizeof(sb), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rb, sizeof(rb), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	fill(sb, sizeof(sb), 5);
	assert_int_equal(cruxn_irecv(rc, 1, &d, &cap, NULL, NULL, &rreq), CRUXN_SUCCESS);
	s->b.tag.cls.tos = 34 << 2;
	s->b.ops->boundary(&s->b, true, false);
	assert_int_equal(cruxn_isend(sc, sb, sizeof(sb), 0, NULL, &sreq), CRUXN_SUCCESS);
	first_null = sreq == NULL;
	assert_true(first_null); /* held: the new lane is not up */
	for (int i = 0; !sreq && i < 5000; i++) {
		assert_int_equal(cruxn_isend(sc, sb, sizeof(sb), 0, NULL, &sreq), CRUXN_SUCCESS);
		usleep(1000);
	}
	assert_non_null(sreq); /* the valve: on the current lane */
	assert_int_equal(s->cur->id, 0);
	wait_done(sreq, NULL);
	wait_done(rreq, NULL);
	check(rb, sizeof(rb), 5);

	cruxn_ctx.cfg.timeout_ms = 1500;
	for (int i = 0; i < 5000 && res == CRUXN_SUCCESS; i++) {
		sreq = NULL;
		res = cruxn_isend(sc, sb, 10, 0, NULL, &sreq);
		assert_null(sreq); /* no receive posted */
		usleep(1000);
	}
	cruxn_ctx.cfg.timeout_ms = saved;
	assert_int_equal(res, CRUXN_REMOTE_ERROR);
	cruxn_dereg_mr(sc, smr);
	cruxn_dereg_mr(rc, rmr);
}

/*
 * NCCL's memory handles reach the post ops: a send and a receive that carry
 * them never search the registration cache (one search each without them).
 */
static void test_mhandle_carried(void **state)
{
	static unsigned char sb[8192], rb[8192];
	void *smr, *rmr, *sreq = NULL, *rreq = NULL, *d = rb;
	size_t cap = sizeof(rb);
	uint64_t before;
	(void)state;

	assert_int_equal(cruxn_reg_mr(sc, sb, sizeof(sb), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rb, sizeof(rb), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	for (int round = 0; round < 2; round++) {
		bool with = round == 0;
		fill(sb, sizeof(sb), 11u + (unsigned)round);
		before = atomic_load(&cruxn_vx_mr_searches);
		assert_int_equal(cruxn_irecv(rc, 1, &d, &cap, NULL, with ? &rmr : NULL, &rreq),
				 CRUXN_SUCCESS);
		assert_non_null(rreq);
		sreq = NULL;
		for (int k = 0; !sreq && k < 1000; k++)
			assert_int_equal(
			    cruxn_isend(sc, sb, sizeof(sb), 0, with ? smr : NULL, &sreq),
			    CRUXN_SUCCESS);
		assert_non_null(sreq);
		wait_done(sreq, NULL);
		wait_done(rreq, NULL);
		check(rb, sizeof(rb), 11u + (unsigned)round);
		if (with)
			assert_int_equal(atomic_load(&cruxn_vx_mr_searches), before);
		else
			assert_true(atomic_load(&cruxn_vx_mr_searches) >= before + 2);
	}
	cruxn_dereg_mr(sc, smr);
	cruxn_dereg_mr(rc, rmr);
}

/*
 * A registration the device refuses (here a buffer NCCL did not register,
 * registered per request) fails the call and the comm: never success with a
 * NULL request, which NCCL would retry forever. Seen failing before the
 * core's failure rule: irecv returned success and a NULL request each time.
 */
static void test_refused_registration_fails(void **state)
{
	static unsigned char rb[4096];
	void *rreq = (void *)1, *d = rb;
	size_t cap = sizeof(rb);
	cruxn_result_t res;
	(void)state;

	vxd.refuse_mr = true;
	res = cruxn_irecv(rc, 1, &d, &cap, NULL, NULL, &rreq);
	vxd.refuse_mr = false;
	assert_int_not_equal(res, CRUXN_SUCCESS);
	assert_null(rreq);
	assert_int_not_equal(atomic_load(&vx_of(rc)->b.error), 0);
	/* and the comm stays failed */
	assert_int_equal(cruxn_irecv(rc, 1, &d, &cap, NULL, NULL, &rreq), CRUXN_REMOTE_ERROR);
}

/* An incomplete test() on a verbs connection makes no system call (it yielded every time before).
 */
static void test_no_yield(void **state)
{
	static unsigned char rb[4096];
	void *rmr, *rreq = NULL, *d = rb;
	size_t cap = sizeof(rb);
	int done = 0;
	(void)state;

	assert_int_equal(cruxn_reg_mr(rc, rb, sizeof(rb), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_irecv(rc, 1, &d, &cap, NULL, &rmr, &rreq), CRUXN_SUCCESS);
	nyield = 0;
	for (int i = 0; i < 100; i++) {
		assert_int_equal(cruxn_test(rreq, &done, NULL), CRUXN_SUCCESS);
		assert_false(done); /* nothing was sent */
	}
	assert_int_equal(nyield, 0);
	cruxn_dereg_mr(rc, rmr);
}

static void test_bad_rkey(void **state)
{
	static unsigned char sb[4096], rb[4096];
	struct vx_comm *s = sc;
	void *smr, *rmr, *sreq = NULL, *rreq, *d = rb;
	size_t cap = sizeof(rb);
	int done = 0;
	(void)state;

	assert_int_equal(cruxn_reg_mr(sc, sb, sizeof(sb), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rb, sizeof(rb), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_irecv(rc, 1, &d, &cap, NULL, NULL, &rreq), CRUXN_SUCCESS);
	/* the CTS arrived; spoil its key as a broken peer would */
	for (int k = 0; k < 100 && s->fifo[s->row % VX_FIFO][0].stamp != s->row + 1; k++)
		cruxn_vx_ctrl_progress(s);
	s->fifo[s->row % VX_FIFO][0].rkey ^= 0x5a5a;
	assert_int_equal(cruxn_isend(sc, sb, sizeof(sb), 0, NULL, &sreq), CRUXN_SUCCESS);
	assert_non_null(sreq);
	assert_int_equal(cruxn_test(sreq, &done, NULL), CRUXN_REMOTE_ERROR);
	assert_false(done);
	assert_int_equal(atomic_load(&s->b.error), EREMOTEIO);
	/* and stays failed */
	assert_int_equal(cruxn_isend(sc, sb, 10, 0, NULL, &sreq), CRUXN_REMOTE_ERROR);
	cruxn_dereg_mr(sc, smr);
	cruxn_dereg_mr(rc, rmr);
}

static void test_peer_closed(void **state)
{
	static unsigned char rb[4096];
	void *rmr, *rreq, *d = rb;
	size_t cap = sizeof(rb);
	int done = 0;
	cruxn_result_t res = CRUXN_SUCCESS;
	(void)state;

	assert_int_equal(cruxn_reg_mr(rc, rb, sizeof(rb), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_irecv(rc, 1, &d, &cap, NULL, NULL, &rreq), CRUXN_SUCCESS);
	cruxn_close_send(sc);
	sc = NULL;
	for (int i = 0; i < 2000 && res == CRUXN_SUCCESS; i++) {
		res = cruxn_test(rreq, &done, NULL);
		usleep(500);
	}
	assert_int_equal(res, CRUXN_REMOTE_ERROR); /* never a hang */
	cruxn_dereg_mr(rc, rmr);
}

/*
 * The receiver closes right after a message arrived and the sender's
 * acknowledgement is lost with its queue pair (an error completion): the
 * receiver's BYE says the message arrived, so the send completes; later
 * sends fail; nothing hangs.
 */
static void test_close_after_arrival(void **state)
{
	static unsigned char sb[4096], rb[4096];
	void *smr, *rmr, *sreq = NULL, *rreq, *d = rb;
	size_t cap = sizeof(rb);
	int done = 0;
	(void)state;

	assert_int_equal(cruxn_reg_mr(sc, sb, sizeof(sb), CRUXN_PTR_HOST, &smr), CRUXN_SUCCESS);
	assert_int_equal(cruxn_reg_mr(rc, rb, sizeof(rb), CRUXN_PTR_HOST, &rmr), CRUXN_SUCCESS);
	fill(sb, sizeof(sb), 77);
	assert_int_equal(cruxn_irecv(rc, 1, &d, &cap, NULL, NULL, &rreq), CRUXN_SUCCESS);
	vxd.lose_ack = true;
	for (int k = 0; !sreq && k < 1000; k++)
		assert_int_equal(cruxn_isend(sc, sb, sizeof(sb), 0, NULL, &sreq), CRUXN_SUCCESS);
	assert_non_null(sreq);
	wait_done(rreq, NULL);
	check(rb, sizeof(rb), 77);
	/* the error completion alone decides nothing yet */
	assert_int_equal(cruxn_test(sreq, &done, NULL), CRUXN_SUCCESS);
	assert_false(done);
	cruxn_dereg_mr(rc, rmr);
	cruxn_close_recv(rc);
	rc = NULL;
	for (int i = 0; !done && i < 1000; i++)
		assert_int_equal(cruxn_test(sreq, &done, NULL), CRUXN_SUCCESS);
	assert_true(done);
	assert_int_equal(cruxn_isend(sc, sb, 10, 0, NULL, &sreq), CRUXN_REMOTE_ERROR);
	cruxn_dereg_mr(sc, smr);
}

/* A lost acknowledgement while the receiver stays silent: an error, bounded. */
static void test_lost_ack_silent_peer(void **state)
{
	static unsigned char sb[4096], rb[4096];
	void *sreq = NULL, *rreq, *d = rb;
	size_t cap = sizeof(rb);
	int done = 0;
	cruxn_result_t res = CRUXN_SUCCESS;
	(void)state;

	assert_int_equal(cruxn_irecv(rc, 1, &d, &cap, NULL, NULL, &rreq), CRUXN_SUCCESS);
	vxd.lose_ack = true;
	for (int k = 0; !sreq && k < 1000; k++)
		assert_int_equal(cruxn_isend(sc, sb, sizeof(sb), 0, NULL, &sreq), CRUXN_SUCCESS);
	assert_non_null(sreq);
	for (int i = 0; i < 4000 && res == CRUXN_SUCCESS; i++) {
		res = cruxn_test(sreq, &done, NULL);
		usleep(1000);
	}
	assert_int_equal(res, CRUXN_REMOTE_ERROR);
	assert_false(done);
}

static void test_garbage_handle(void **state)
{
	char handle[CRUXN_NET_HANDLE_MAXSIZE];
	void *s = NULL;
	(void)state;

	memset(handle, 0xab, sizeof(handle));
	assert_int_equal(cruxn_connect(0, -1, handle, &s), CRUXN_INVALID_ARGUMENT);
	assert_null(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_pingpong_grouped, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_32_in_flight, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_torn_cts_64, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_torn_cts_32, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_control_memory_pages, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_relaxed_ordering, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_gid_read_per_connection, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_async_port_error, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lane_switch, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lane_flip_back, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lane_close_waits_for_parts, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lane_close_fences_cts, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ctrl_bell, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ctrl_tick, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cts_wait_polls, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sizes_by_byte_len, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_receives_in_batches, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_warm_lane_return, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lanes_ahead, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lane_rate_limit, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unrealisable_route_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ib_ignores_routes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fifo_tc, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lane_hold_bounds, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_four_qps, setup4, teardown4),
	    cmocka_unit_test_setup_teardown(test_four_qps_split, setup4, teardown4),
	    cmocka_unit_test_setup_teardown(test_adaptive_routing_split, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_flush, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_mhandle_carried, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refused_registration_fails, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_yield, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_rkey, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_peer_closed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_close_after_arrival, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lost_ack_silent_peer, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_garbage_handle, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
