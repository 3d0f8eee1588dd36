/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the verbs transport's building blocks against a hardware
 * double (a function table in place of libibverbs): the loader, device and
 * GID selection, every queue pair attribute per state, flow label <-> UDP
 * source port, and the errors a refused state change gives.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "verbs/vx.h"
#include "verbs/vx_transport.h"
#include "vx_double.h"

/* ---- loader --------------------------------------------------------------- */

static void test_load_missing_library(void **state)
{
	struct cruxn_ibv v;
	char err[512] = "";
	(void)state;

	assert_int_equal(cruxn_ibv_load("/nonexistent/libibverbs.so.1", NULL, &v, err, sizeof(err)),
			 CRUX_ERR_UNSUPPORTED);
	assert_non_null(strstr(err, "CRUX_IBVERBS_LIB"));
	assert_non_null(strstr(err, "/nonexistent/libibverbs.so.1"));
}

static void test_load_not_verbs(void **state)
{
	struct cruxn_ibv v;
	char err[512] = "";
	(void)state;

	/* a real library without the versioned verbs symbols */
	assert_int_equal(cruxn_ibv_load("libc.so.6", NULL, &v, err, sizeof(err)),
			 CRUX_ERR_UNSUPPORTED);
	assert_non_null(strstr(err, "ibv_get_device_list@IBVERBS_1.1"));
}

static void test_load_rdma_core(void **state)
{
	struct cruxn_ibv v;
	char err[512] = "";
	(void)state;

	/* rdma-core is a build dependency (libibverbs-dev); its .so.1 comes with it */
	if (cruxn_ibv_load(NULL, "/nonexistent/libmlx5.so.1", &v, err, sizeof(err)) != CRUX_OK) {
		print_message("skipped: %s\n", err);
		skip();
	}
	assert_non_null(v.get_device_list);
	assert_non_null(v.query_port);
	assert_non_null(v.modify_qp);
	assert_non_null(v.wc_status_str);
	assert_null(v.mlx5_udp_sport); /* no libmlx5: flow labels only */
	assert_non_null(strstr(v.mlx5_why, "libmlx5 not loaded"));
	assert_string_equal(v.wc_status_str(IBV_WC_REM_ACCESS_ERR), "remote access error");
	cruxn_ibv_unload(&v);
	assert_null(v.lib);
}

/*
 * rdma-core's libmlx5 (ibverbs-providers) has the live source-port call
 * under MLX5_1.17: the loader finds it (it asked for MLX5_1.19 before and
 * never did, saying "libmlx5 not loaded"). A library that loads but lacks
 * the call is named as such.
 */
static void test_load_rdma_core_mlx5(void **state)
{
	struct cruxn_ibv v;
	char err[512] = "";
	(void)state;

	assert_int_equal(cruxn_ibv_load(NULL, NULL, &v, err, sizeof(err)), CRUX_OK);
	assert_non_null(v.mlx5);
	if (!v.mlx5_udp_sport)
		fail_msg("rdma-core's libmlx5 gave no mlx5dv_modify_qp_udp_sport: %s", v.mlx5_why);
	cruxn_ibv_unload(&v);

	assert_int_equal(cruxn_ibv_load(NULL, "libc.so.6", &v, err, sizeof(err)), CRUX_OK);
	assert_null(v.mlx5_udp_sport);
	assert_non_null(strstr(v.mlx5_why, "libc.so.6 has no mlx5dv_modify_qp_udp_sport"));
	cruxn_ibv_unload(&v);
}

/* ---- devices and GIDs ------------------------------------------------------- */

static void test_hca_match(void **state)
{
	(void)state;
	assert_true(cruxn_hca_match("", "mlx5_0", 1));
	assert_true(cruxn_hca_match(NULL, "mlx5_0", 1));
	assert_true(cruxn_hca_match("mlx5", "mlx5_10", 1));
	assert_false(cruxn_hca_match("=mlx5_1", "mlx5_10", 1));
	assert_true(cruxn_hca_match("=mlx5_1", "mlx5_1", 2));
	assert_true(cruxn_hca_match("mlx5_0:1,mlx5_1", "mlx5_0", 1));
	assert_false(cruxn_hca_match("mlx5_0:1,mlx5_1", "mlx5_0", 2));
	assert_true(cruxn_hca_match("mlx5_0:1,mlx5_1", "mlx5_1", 2));
	assert_false(cruxn_hca_match("^mlx5_0", "mlx5_0", 1));
	assert_true(cruxn_hca_match("^mlx5_0", "srxe_eth0", 1));
	assert_false(cruxn_hca_match("^=mlx5_0:1", "mlx5_0", 1));
	assert_true(cruxn_hca_match("^=mlx5_0:1", "mlx5_0", 2));
}

/* NCCL_IB_HCA "dev:port:rail:plane": the v12 properties' railId and planeId, as NCCL's IB
 * transport. */
static void test_hca_ids(void **state)
{
	int rail, plane;
	(void)state;
	cruxn_hca_ids("", "mlx5_0", 1, &rail, &plane);
	assert_int_equal(rail, -1);
	assert_int_equal(plane, -1);
	cruxn_hca_ids("mlx5_0:1:3:1,mlx5_1:1:4:0", "mlx5_1", 1, &rail, &plane);
	assert_int_equal(rail, 4);
	assert_int_equal(plane, 0);
	cruxn_hca_ids("mlx5_0:1:3:1,mlx5_1:1:4:0", "mlx5_0", 1, &rail, &plane);
	assert_int_equal(rail, 3);
	assert_int_equal(plane, 1);
	/* another port of the named device: no rail */
	cruxn_hca_ids("mlx5_0:1:3:1", "mlx5_0", 2, &rail, &plane);
	assert_int_equal(rail, -1);
	/* empty port matches any port; a rail without a plane */
	cruxn_hca_ids("mlx5_0::7", "mlx5_0", 2, &rail, &plane);
	assert_int_equal(rail, 7);
	assert_int_equal(plane, -1);
	/* prefix match as for the device list; '=' exact */
	cruxn_hca_ids("mlx5:1:2:5", "mlx5_3", 1, &rail, &plane);
	assert_int_equal(rail, 2);
	assert_int_equal(plane, 5);
	cruxn_hca_ids("=mlx5_1:1:2:5", "mlx5_10", 1, &rail, &plane);
	assert_int_equal(rail, -1);
	/* exclusion lists name no rail; plain device lists neither */
	cruxn_hca_ids("^mlx5_0:1:2:5", "mlx5_1", 1, &rail, &plane);
	assert_int_equal(rail, -1);
	cruxn_hca_ids("mlx5_0:1,mlx5_1", "mlx5_0", 1, &rail, &plane);
	assert_int_equal(rail, -1);
	assert_int_equal(plane, -1);
	/* the device list itself still admits entries that carry rail and plane */
	assert_true(cruxn_hca_match("mlx5_0:1:3:1", "mlx5_0", 1));
	assert_false(cruxn_hca_match("mlx5_0:1:3:1", "mlx5_0", 2));
}

static void gid_v4(union ibv_gid *g, uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
	memset(g, 0, sizeof(*g));
	g->raw[10] = 0xff;
	g->raw[11] = 0xff;
	g->raw[12] = a;
	g->raw[13] = b;
	g->raw[14] = c;
	g->raw[15] = d;
}

static void gid_ll(union ibv_gid *g)
{
	memset(g, 0, sizeof(*g));
	g->raw[0] = 0xfe;
	g->raw[1] = 0x80;
	g->raw[15] = 7;
}

static void gid_v6(union ibv_gid *g)
{
	memset(g, 0, sizeof(*g));
	g->raw[0] = 0xfd;
	g->raw[15] = 9;
}

static void rules_default(struct cruxn_gid_rules *r)
{
	memset(r, 0, sizeof(*r));
	r->index = -1;
	r->family = CRUXN_GID_V4;
	r->range_bits = -1;
	r->roce_version = 2;
}

/* The software device's table: fe80::, RoCE v1 of the IPv4, RoCE v2 of it. */
static int table(struct cruxn_gid_cand *c, bool types)
{
	gid_ll(&c[0].gid);
	gid_v4(&c[1].gid, 10, 0, 0, 1);
	gid_v4(&c[2].gid, 10, 0, 0, 1);
	gid_v6(&c[3].gid);
	gid_v4(&c[4].gid, 192, 168, 1, 5);
	gid_v4(&c[5].gid, 192, 168, 1, 5);
	for (int i = 0; i < 6; i++) {
		c[i].index = i;
		c[i].type = types ? (i % 2 ? IBV_GID_TYPE_ROCE_V1 : IBV_GID_TYPE_ROCE_V2) : -1;
	}
	if (types)
		c[0].type = IBV_GID_TYPE_ROCE_V1;
	return 6;
}

static void test_gid_choose(void **state)
{
	struct cruxn_gid_cand c[8];
	struct cruxn_gid_rules r;
	int n, idx = -1;
	(void)state;

	n = table(c, true);
	rules_default(&r);
	/* first RoCE v2, IPv4-mapped */
	assert_int_equal(cruxn_gid_choose(c, n, &r, &idx), CRUX_OK);
	assert_int_equal(idx, 2);
	r.roce_version = 1;
	assert_int_equal(cruxn_gid_choose(c, n, &r, &idx), CRUX_OK);
	assert_int_equal(idx, 1);
	/* a range picks the other address */
	rules_default(&r);
	r.range[0] = 192;
	r.range[1] = 168;
	r.range_bits = 16;
	assert_int_equal(cruxn_gid_choose(c, n, &r, &idx), CRUX_OK);
	assert_int_equal(idx, 4);
	/* IPv6: never link-local, never v4-mapped */
	rules_default(&r);
	r.family = CRUXN_GID_V6;
	assert_int_equal(cruxn_gid_choose(c, n, &r, &idx), CRUX_OK);
	assert_int_equal(idx, 3);
	/* explicit index wins; a missing one is an error, not a guess */
	rules_default(&r);
	r.index = 5;
	assert_int_equal(cruxn_gid_choose(c, n, &r, &idx), CRUX_OK);
	assert_int_equal(idx, 5);
	r.index = 7;
	idx = -1;
	assert_int_equal(cruxn_gid_choose(c, n, &r, &idx), CRUX_ERR_NOENT);
	assert_int_equal(idx, -1);
	/* types unknown (no _ibv_query_gid_ex, no sysfs): the later of v1/v2 pairs */
	n = table(c, false);
	rules_default(&r);
	assert_int_equal(cruxn_gid_choose(c, n, &r, &idx), CRUX_OK);
	assert_int_equal(idx, 5);
	/* nothing usable */
	rules_default(&r);
	r.range[0] = 172;
	r.range_bits = 8;
	assert_int_equal(cruxn_gid_choose(c, n, &r, &idx), CRUX_ERR_NOENT);
}

static void test_gid_rules_env(void **state)
{
	struct cruxn_gid_rules r;
	char err[256] = "";
	(void)state;

	setenv("NCCL_IB_ADDR_RANGE", "10.1.0.0/16", 1);
	setenv("NCCL_IB_ADDR_FAMILY", "AF_INET", 1);
	assert_int_equal(cruxn_gid_rules_load(&r, err, sizeof(err)), CRUX_OK);
	assert_int_equal(r.range_bits, 16);
	assert_int_equal(r.range[0], 10);
	assert_int_equal(r.range[1], 1);
	assert_int_equal(r.index, -1);
	assert_int_equal(r.roce_version, 2);
	setenv("NCCL_IB_ADDR_RANGE", "10.1.0.0", 1);
	assert_int_equal(cruxn_gid_rules_load(&r, err, sizeof(err)), CRUX_ERR_INVAL);
	assert_non_null(strstr(err, "NCCL_IB_ADDR_RANGE"));
	unsetenv("NCCL_IB_ADDR_RANGE");
	setenv("NCCL_IB_GID_INDEX", "300", 1);
	assert_int_equal(cruxn_gid_rules_load(&r, err, sizeof(err)), CRUX_ERR_INVAL);
	assert_non_null(strstr(err, "NCCL_IB_GID_INDEX"));
	unsetenv("NCCL_IB_GID_INDEX");
	unsetenv("NCCL_IB_ADDR_FAMILY");
}

/* ---- queue pair attributes ------------------------------------------------- */

static void eps(struct cruxn_vx_ep *l, struct cruxn_vx_ep *r, uint8_t ll)
{
	memset(l, 0, sizeof(*l));
	memset(r, 0, sizeof(*r));
	l->qpn = 0x111;
	l->psn = 0x1234;
	l->port = 1;
	l->link_layer = ll;
	l->mtu = IBV_MTU_4096;
	l->gid_index = 3;
	l->lid = 5;
	gid_v4(&l->gid, 10, 0, 0, 1);
	r->qpn = 0x222;
	r->psn = 0x5678;
	r->port = 1;
	r->link_layer = ll;
	r->mtu = IBV_MTU_1024;
	r->lid = 9;
	gid_v4(&r->gid, 10, 0, 0, 2);
}

static void test_attr_init(void **state)
{
	struct cruxn_vx_ep l, r;
	struct cruxn_vx_qp_cfg q;
	struct ibv_qp_attr a;
	int mask;
	(void)state;

	eps(&l, &r, IBV_LINK_LAYER_ETHERNET);
	cruxn_vx_qp_cfg_default(&q);
	q.pkey = 2;
	cruxn_vx_attr_init(&l, &q, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE, &a, &mask);
	assert_int_equal(a.qp_state, IBV_QPS_INIT);
	assert_int_equal(a.port_num, 1);
	assert_int_equal(a.pkey_index, 2);
	assert_int_equal(a.qp_access_flags, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE);
	assert_int_equal(mask,
			 IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static void test_attr_rtr_roce(void **state)
{
	struct cruxn_vx_ep l, r;
	struct cruxn_class cls = {.tos = (46 << 2) | 1, .prio = 6, .level = 3, .sl = 5};
	struct ibv_qp_attr a;
	int mask;
	(void)state;

	eps(&l, &r, IBV_LINK_LAYER_ETHERNET);
	cruxn_vx_attr_rtr(&l, &r, &cls, 0x12345, &a, &mask);
	assert_int_equal(a.qp_state, IBV_QPS_RTR);
	assert_int_equal(a.path_mtu, IBV_MTU_1024); /* the smaller end */
	assert_int_equal(a.dest_qp_num, 0x222);
	assert_int_equal(a.rq_psn, 0x5678);
	assert_int_equal(a.max_dest_rd_atomic, 1);
	assert_int_equal(a.min_rnr_timer, 12);
	assert_int_equal(a.ah_attr.is_global, 1);
	assert_memory_equal(a.ah_attr.grh.dgid.raw, r.gid.raw, 16);
	assert_int_equal(a.ah_attr.grh.sgid_index, 3);
	assert_int_equal(a.ah_attr.grh.hop_limit, 255);
	assert_int_equal(a.ah_attr.grh.traffic_class, 46 << 2); /* ECN bits never set */
	assert_int_equal(a.ah_attr.grh.flow_label, 0x12345);
	assert_int_equal(a.ah_attr.sl, 5);
	assert_int_equal(a.ah_attr.port_num, 1);
	assert_int_equal(mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				   IBV_QP_MIN_RNR_TIMER);
	/* the flow label field is 20 bits */
	cruxn_vx_attr_rtr(&l, &r, &cls, 0xfff12345, &a, &mask);
	assert_int_equal(a.ah_attr.grh.flow_label, 0x12345);
}

static void test_attr_rtr_ib(void **state)
{
	struct cruxn_vx_ep l, r;
	struct cruxn_class cls = {.tos = 8 << 2, .prio = 1, .level = 1, .sl = 17};
	struct ibv_qp_attr a;
	int mask;
	(void)state;

	eps(&l, &r, IBV_LINK_LAYER_INFINIBAND);
	cruxn_vx_attr_rtr(&l, &r, &cls, 77, &a, &mask);
	assert_int_equal(a.ah_attr.is_global, 0); /* the LID routes */
	assert_int_equal(a.ah_attr.dlid, 9);
	assert_int_equal(a.ah_attr.grh.traffic_class, 0);
	assert_int_equal(a.ah_attr.grh.flow_label, 0);
	assert_int_equal(a.ah_attr.sl, 17 & 0xf);
}

static void test_attr_rts(void **state)
{
	struct cruxn_vx_ep l, r;
	struct cruxn_vx_qp_cfg q;
	struct ibv_qp_attr a;
	int mask;
	(void)state;

	eps(&l, &r, IBV_LINK_LAYER_ETHERNET);
	cruxn_vx_qp_cfg_default(&q);
	cruxn_vx_attr_rts(&l, &q, &a, &mask);
	assert_int_equal(a.qp_state, IBV_QPS_RTS);
	assert_int_equal(a.timeout, 20);
	assert_int_equal(a.retry_cnt, 7);
	assert_int_equal(a.rnr_retry, 7);
	assert_int_equal(a.sq_psn, 0x1234);
	assert_int_equal(a.max_rd_atomic, 1);
	assert_int_equal(mask, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				   IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* ---- a queue pair state machine as the kernel enforces it ------------------- */

static struct {
	enum ibv_qp_state state;
	int calls;
	uint8_t tc; /* traffic class programmed at RTR */
	uint32_t fl;
} dbl;

static int dbl_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	(void)qp;
	dbl.calls++;
	if (!(mask & IBV_QP_STATE))
		return EINVAL;
	switch (a->qp_state) {
	case IBV_QPS_INIT:
		if (dbl.state != IBV_QPS_RESET && dbl.state != IBV_QPS_INIT)
			return EINVAL;
		break;
	case IBV_QPS_RTR:
		if (dbl.state != IBV_QPS_INIT || !(mask & IBV_QP_AV) || !(mask & IBV_QP_DEST_QPN))
			return EINVAL;
		dbl.tc = a->ah_attr.grh.traffic_class;
		dbl.fl = a->ah_attr.grh.flow_label;
		break;
	case IBV_QPS_RTS:
		/* qp_state_table: RTR->RTS needs timeouts; RTS->RTS may not change the AV */
		if (dbl.state == IBV_QPS_RTS && (mask & IBV_QP_AV))
			return EINVAL;
		if (dbl.state == IBV_QPS_RTR && !(mask & IBV_QP_SQ_PSN))
			return EINVAL;
		if (dbl.state != IBV_QPS_RTR && dbl.state != IBV_QPS_RTS)
			return EINVAL;
		break;
	default:
		return EINVAL;
	}
	dbl.state = a->qp_state;
	return 0;
}

static void test_qp_connect(void **state)
{
	struct cruxn_ibv v;
	struct ibv_qp qp;
	struct cruxn_vx_ep l, r;
	struct cruxn_vx_qp_cfg q;
	struct cruxn_class cls = {.tos = 26 << 2, .prio = 2, .level = 2, .sl = 2};
	struct ibv_qp_attr a;
	int mask;
	bool exact;
	char err[512] = "";
	(void)state;

	memset(&v, 0, sizeof(v));
	memset(&qp, 0, sizeof(qp));
	memset(&dbl, 0, sizeof(dbl));
	v.modify_qp = dbl_modify_qp;
	qp.qp_num = 0x111;
	eps(&l, &r, IBV_LINK_LAYER_ETHERNET);
	cruxn_vx_qp_cfg_default(&q);
	uint32_t fl = cruxn_vx_flow_label_for_sport(50123, &exact);
	assert_int_equal(cruxn_vx_qp_connect(&v, &qp, &l, &r, &q, IBV_ACCESS_REMOTE_WRITE, &cls, fl,
					     err, sizeof(err)),
			 CRUX_OK);
	assert_int_equal(dbl.state, IBV_QPS_RTS);
	assert_int_equal(dbl.calls, 3);
	assert_int_equal(dbl.tc, 26 << 2);
	assert_int_equal(cruxn_vx_sport_of_flow_label(dbl.fl), 50123);

	/* A class change on the live QP is refused, and says so. */
	cruxn_vx_attr_rtr(&l, &r, &cls, fl, &a, &mask);
	a.qp_state = IBV_QPS_RTS;
	a.ah_attr.grh.traffic_class = 10 << 2;
	assert_int_equal(dbl_modify_qp(&qp, &a, mask), EINVAL);
	/* Re-connecting a live QP fails at its first step with a clear error. */
	assert_int_equal(cruxn_vx_qp_connect(&v, &qp, &l, &r, &q, IBV_ACCESS_REMOTE_WRITE, &cls, fl,
					     err, sizeof(err)),
			 CRUX_ERR_INVAL);
	assert_non_null(strstr(err, "queue pair 273"));
	assert_non_null(strstr(err, "INIT"));
	assert_non_null(strstr(err, "Invalid argument"));
}

static int refuse_rtr(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	(void)qp;
	(void)mask;
	return a->qp_state == IBV_QPS_RTR ? -1 : 0;
}

static void test_qp_connect_refused_rtr(void **state)
{
	struct cruxn_ibv v;
	struct ibv_qp qp;
	struct cruxn_vx_ep l, r;
	struct cruxn_vx_qp_cfg q;
	struct cruxn_class cls = {.tos = 26 << 2, .prio = 2, .level = 2, .sl = 3};
	char err[512] = "";
	(void)state;

	memset(&v, 0, sizeof(v));
	memset(&qp, 0, sizeof(qp));
	v.modify_qp = refuse_rtr;
	qp.qp_num = 9;
	eps(&l, &r, IBV_LINK_LAYER_ETHERNET);
	cruxn_vx_qp_cfg_default(&q);
	errno = ENODEV; /* an old provider: -1 and errno */
	assert_int_equal(cruxn_vx_qp_connect(&v, &qp, &l, &r, &q, 0, &cls, 0, err, sizeof(err)),
			 CRUX_ERR_IO);
	assert_non_null(strstr(err, "RTR"));
	assert_non_null(strstr(err, "GID index 3"));
	assert_non_null(strstr(err, "traffic class 104"));
	assert_non_null(strstr(err, "SL 3"));
	assert_non_null(strstr(err, "NCCL_IB_GID_INDEX"));
}

/* ---- path: flow label <-> UDP source port ----------------------------------- */

static void test_flow_label_ports(void **state)
{
	bool exact = false;
	(void)state;

	/* the kernel's formula, by hand */
	assert_int_equal(cruxn_vx_sport_of_flow_label(0), 0xC000);
	assert_int_equal(cruxn_vx_sport_of_flow_label(0x4001), 0xC000);
	assert_int_equal(cruxn_vx_sport_of_flow_label(0x12345), 0xC000 | (0x2345 ^ 0x4));
	for (uint32_t p = 0xC000; p <= 0xFFFF; p++) {
		uint32_t fl = cruxn_vx_flow_label_for_sport((uint16_t)p, &exact);
		assert_true(exact);
		assert_true(fl != 0 && fl <= 0xfffff);
		assert_int_equal(cruxn_vx_sport_of_flow_label(fl), p);
	}
	assert_int_equal(cruxn_vx_flow_label_for_sport(0, &exact), 0);
	assert_true(exact);
	(void)cruxn_vx_flow_label_for_sport(40000, &exact);
	assert_false(exact);
}

/* ---- opening devices ----------------------------------------------------- */

/* NCCL's split of a message over the QPs: 128-byte aligned chunks, no empty part. */
static void test_split(void **state)
{
	static const size_t sizes[] = {
	    0,	       1, 127, 128, 129, 511, 512, 513, 1000, 4096, 65539, 1u << 20, (1u << 20) + 1,
	    0x7fffffff};
	(void)state;

	for (int q = 1; q <= CRUXN_VX_MAX_QPS; q++) {
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			size_t chunk, size = sizes[i], covered = 0;
			int n;
			cruxn_vx_split(size, q, &chunk, &n);
			assert_true(n >= 1 && n <= q);
			if (size == 0 || q == 1) {
				assert_int_equal(n, 1);
				assert_int_equal(chunk, size);
				continue;
			}
			assert_int_equal(chunk % CRUXN_VX_SPLIT_ALIGN, 0);
			/* every part but the last is a full chunk; the last is not empty */
			for (int p = 0; p < n; p++) {
				size_t len = size - covered < chunk ? size - covered : chunk;
				assert_true(len > 0);
				covered += len;
			}
			assert_int_equal(covered, size);
		}
	}
	{
		size_t chunk;
		int n;
		cruxn_vx_split(1 << 20, 4, &chunk, &n); /* an even split */
		assert_int_equal(chunk, 1 << 18);
		assert_int_equal(n, 4);
		cruxn_vx_split(300, 4, &chunk, &n); /* 75 -> 128-byte chunks: 3 parts */
		assert_int_equal(chunk, 128);
		assert_int_equal(n, 3);
	}
}

/* CRUX_IB_QPS_PER_CONNECTION over NCCL's; a bad value falls back to 1 with a reason. */
static void test_nqps_env(void **state)
{
	char err[256];
	int n = -1;
	(void)state;

	unsetenv("CRUX_IB_QPS_PER_CONNECTION");
	unsetenv("NCCL_IB_QPS_PER_CONNECTION");
	assert_int_equal(cruxn_vx_nqps_load(&n, err, sizeof(err)), CRUX_OK);
	assert_int_equal(n, 1);
	setenv("NCCL_IB_QPS_PER_CONNECTION", "2", 1);
	assert_int_equal(cruxn_vx_nqps_load(&n, err, sizeof(err)), CRUX_OK);
	assert_int_equal(n, 2);
	setenv("CRUX_IB_QPS_PER_CONNECTION", "4", 1);
	assert_int_equal(cruxn_vx_nqps_load(&n, err, sizeof(err)), CRUX_OK);
	assert_int_equal(n, 4);
	setenv("CRUX_IB_QPS_PER_CONNECTION", "9", 1);
	assert_int_equal(cruxn_vx_nqps_load(&n, err, sizeof(err)), CRUX_ERR_INVAL);
	assert_int_equal(n, 1);
	assert_non_null(strstr(err, "CRUX_IB_QPS_PER_CONNECTION"));
	unsetenv("CRUX_IB_QPS_PER_CONNECTION");
	setenv("NCCL_IB_QPS_PER_CONNECTION", "lots", 1);
	assert_int_equal(cruxn_vx_nqps_load(&n, err, sizeof(err)), CRUX_ERR_INVAL);
	assert_int_equal(n, 1);
	assert_non_null(strstr(err, "NCCL_IB_QPS_PER_CONNECTION"));
	unsetenv("NCCL_IB_QPS_PER_CONNECTION");
}

static int sport_calls, sport_rc;
static enum ibv_qp_state sport_state;
static uint16_t sport_port;

static int fake_udp_sport(struct ibv_qp *qp, uint16_t port)
{
	sport_calls++;
	sport_state = qp->state;
	sport_port = port;
	return sport_rc;
}

/* The live source-port change is probed once per device and the way chosen is said. */
static void test_sport_probe(void **state)
{
	struct cruxn_ibv v;
	struct cruxn_gid_rules r;
	struct cruxn_vx vx;
	struct cruxn_vx_qp_cfg q;
	char err[512] = "", line[1024];
	(void)state;

	vxd_reset(&v);
	vxd_enable_rc(&v);
	rules_default(&r);
	cruxn_vx_qp_cfg_default(&q);
	vxd_add_roce("srxe_eth0", 10, 0, 0, 1);
	vxd_add_roce("srxe_eth1", 10, 0, 1, 1);
	assert_int_equal(cruxn_vx_open(&v, "", &r, &vx, err, sizeof(err)), CRUX_OK);
	assert_int_equal(vx.ndevs, 2);

	/* no libmlx5: the flow label only */
	cruxn_vx_sport_probe_all(&vx, &q, line, sizeof(line));
	assert_false(vx.devs[0].live_sport);
	assert_false(vx.devs[1].live_sport);
	assert_non_null(strstr(line, "srxe_eth0 port 1 by grh.flow_label at RTR only (no libmlx5 "
				     "loaded)"));
	assert_non_null(strstr(line, "srxe_eth1 port 1 by grh.flow_label"));

	/* libmlx5 whose call works: asked once per device, on an RTS QP; nothing leaks */
	vx.ibv.mlx5_udp_sport = fake_udp_sport;
	sport_calls = 0;
	sport_rc = 0;
	cruxn_vx_sport_probe_all(&vx, &q, line, sizeof(line));
	assert_int_equal(sport_calls, 2);
	assert_int_equal(sport_state, IBV_QPS_RTS);
	assert_int_equal(sport_port, 0xC000);
	assert_true(vx.devs[0].live_sport);
	assert_true(vx.devs[1].live_sport);
	assert_non_null(strstr(line, "srxe_eth0 port 1 by mlx5dv_modify_qp_udp_sport"));
	assert_int_equal(vxd.qps, 0);
	assert_int_equal(vxd.cqs, 0);

	/* the device refuses (no firmware capability): the flow label, with the reason */
	sport_rc = EOPNOTSUPP;
	cruxn_vx_sport_probe_all(&vx, &q, line, sizeof(line));
	assert_false(vx.devs[0].live_sport);
	assert_non_null(strstr(line, "flow_label at RTR only (mlx5dv_modify_qp_udp_sport refused: "
				     "Operation not supported)"));
	assert_int_equal(vxd.qps, 0);
	vx.ibv.mlx5_udp_sport = NULL;
	cruxn_vx_close(&vx);
}

/*
 * Properties as NCCL reports them: the NIC's system image GUID (one per
 * chip; the node GUID only without it), the PCI functions of one NIC merged,
 * and maxP2pBytes within the port's max_msg_sz (it was 2 GiB - 1 above a
 * 1 GiB port, a local length error on the first big message).
 */
static void test_properties_identity(void **state)
{
	struct cruxn_ibv v;
	struct cruxn_gid_rules r;
	struct vxd_dev *d;
	cruxn_props_v11_t p;
	char err[512] = "", path[64];
	(void)state;

	vxd_reset(&v);
	rules_default(&r);
	d = vxd_add_roce("srxe_eth0", 10, 0, 0, 1);
	d->sys_image_guid = 0xa1b2c3d4e5f60708ull;
	d->ports[0].max_msg_sz = 1u << 30;
	vxd_add_roce("srxe_eth1", 10, 0, 1, 1); /* reports neither */
	assert_int_equal(cruxn_vx_open(&v, "", &r, &cruxn_vx_state, err, sizeof(err)), CRUX_OK);
	assert_int_equal(cruxn_vx_properties(0, &p), CRUX_OK);
	assert_true(p.guid == 0xa1b2c3d4e5f60708ull);
	assert_int_equal(p.maxP2pBytes, 1u << 30);
	assert_int_equal(cruxn_vx_properties(1, &p), CRUX_OK);
	assert_true(p.guid == cruxn_vx_state.devs[1].guid && p.guid != 0);
	assert_int_equal(p.maxP2pBytes, 0x7fffffff);
	cruxn_vx_close(&cruxn_vx_state);

	snprintf(path, sizeof(path), "/sys/devices/pci0000:16/0000:17:00.1");
	cruxn_vx_pci_merge(path);
	assert_string_equal(path, "/sys/devices/pci0000:16/0000:17:00.0");
	snprintf(path, sizeof(path), "/sys/devices/virtual/net");
	cruxn_vx_pci_merge(path);
	assert_string_equal(path, "/sys/devices/virtual/net");
	cruxn_vx_pci_merge(NULL);
}

static void test_open_devices(void **state)
{
	struct cruxn_ibv v;
	struct cruxn_gid_rules r;
	struct cruxn_vx vx;
	struct vxd_dev *d;
	char err[512] = "";
	(void)state;

	vxd_reset(&v);
	rules_default(&r);
	assert_int_equal(cruxn_vx_open(&v, "", &r, &vx, err, sizeof(err)), CRUX_ERR_NOENT);
	assert_non_null(strstr(err, "no RDMA device"));

	vxd_add_roce("srxe_eth0", 10, 0, 0, 1);
	d = vxd_add_roce("srxe_eth1", 10, 0, 1, 1);
	d->nports = 2;
	d->ports[1] = d->ports[0];
	d->ports[1].state = IBV_PORT_DOWN;
	vxd_add_roce("mlx5_0", 10, 0, 2, 1)->refuse_open = true;
	assert_int_equal(cruxn_vx_open(&v, "srxe", &r, &vx, err, sizeof(err)), CRUX_OK);
	assert_int_equal(vx.ndevs, 2);
	assert_string_equal(vx.devs[0].name, "srxe_eth0");
	assert_int_equal(vx.devs[0].ep.port, 1);
	assert_int_equal(vx.devs[0].ep.gid_index, 2); /* RoCE v2, IPv4-mapped */
	assert_int_equal(vx.devs[0].ep.gid.raw[15], 1);
	assert_int_equal(vx.devs[0].ep.link_layer, IBV_LINK_LAYER_ETHERNET);
	assert_int_equal(vx.devs[0].ep.mtu, IBV_MTU_4096);
	assert_int_equal(vx.devs[0].speed_mbps, 100000);
	assert_null(vx.devs[0].pci_path); /* no sysfs node: a virtual device */
	assert_string_equal(vx.devs[1].name, "srxe_eth1");
	assert_non_null(strstr(err, "srxe_eth1 port 2: not ACTIVE"));
	assert_int_equal(vxd.open_contexts, 2);
	assert_int_equal(vxd.pds, 2);
	cruxn_vx_close(&vx);
	assert_int_equal(vxd.open_contexts, 0);
	assert_int_equal(vxd.pds, 0);

	/* exclusions, and no GID matching the rules */
	assert_int_equal(cruxn_vx_open(&v, "^srxe_eth0", &r, &vx, err, sizeof(err)), CRUX_OK);
	assert_int_equal(vx.ndevs, 1);
	assert_string_equal(vx.devs[0].name, "srxe_eth1");
	cruxn_vx_close(&vx);
	r.range[0] = 192;
	r.range_bits = 8;
	assert_int_equal(cruxn_vx_open(&v, "srxe", &r, &vx, err, sizeof(err)), CRUX_ERR_NOENT);
	assert_non_null(strstr(err, "NCCL_IB_ADDR_RANGE"));
	assert_int_equal(vxd.open_contexts, 0);

	/* no _ibv_query_gid_ex and no sysfs: the later IPv4-mapped GID */
	v.query_gid_ex = NULL;
	rules_default(&r);
	assert_int_equal(cruxn_vx_open(&v, "=srxe_eth0", &r, &vx, err, sizeof(err)), CRUX_OK);
	assert_int_equal(vx.ndevs, 1);
	assert_int_equal(vx.devs[0].ep.gid_index, 2);
	cruxn_vx_close(&vx);
}

static void test_port_speed(void **state)
{
	(void)state;
	assert_int_equal(cruxn_vx_port_speed(1, 1), 2500);     /* SDR 1x */
	assert_int_equal(cruxn_vx_port_speed(32, 2), 100000);  /* EDR 4x */
	assert_int_equal(cruxn_vx_port_speed(128, 2), 400000); /* NDR 4x */
	assert_int_equal(cruxn_vx_port_speed(64, 16), 100000); /* HDR 2x */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_load_missing_library),
	    cmocka_unit_test(test_load_not_verbs),
	    cmocka_unit_test(test_load_rdma_core),
	    cmocka_unit_test(test_load_rdma_core_mlx5),
	    cmocka_unit_test(test_hca_match),
	    cmocka_unit_test(test_hca_ids),
	    cmocka_unit_test(test_gid_choose),
	    cmocka_unit_test(test_gid_rules_env),
	    cmocka_unit_test(test_attr_init),
	    cmocka_unit_test(test_attr_rtr_roce),
	    cmocka_unit_test(test_attr_rtr_ib),
	    cmocka_unit_test(test_attr_rts),
	    cmocka_unit_test(test_qp_connect),
	    cmocka_unit_test(test_qp_connect_refused_rtr),
	    cmocka_unit_test(test_flow_label_ports),
	    cmocka_unit_test(test_split),
	    cmocka_unit_test(test_sport_probe),
	    cmocka_unit_test(test_nqps_env),
	    cmocka_unit_test(test_open_devices),
	    cmocka_unit_test(test_properties_identity),
	    cmocka_unit_test(test_port_speed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
