/* SPDX-License-Identifier: Apache-2.0 */
/*
 * crux-hw-check: what an operator runs on an RDMA host before using Crux's
 * verbs transport. It loads libibverbs with the plugin's own loader
 * (vx_loader.c: dlopen + rdma-core's versioned symbols), lists devices and ports, picks the RoCE
 * GID by the plugin's own rules, probes per-QP source-port control, DMA-BUF and nvidia-peermem,
 * warns about a host-wide traffic-class override, and, given nccl-tests, compares all_reduce_perf
 * over NCCL's IB transport and over Crux. Exit status: 0 fine, 1 warnings, 2 unusable (no library,
 * no device).
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <infiniband/verbs.h>
#include <linux/dcbnl.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "crux/decision.h"

#include "vx.h"

struct opts {
	const char *lib, *mlx5, *sysfs, *nccl_tests, *plugin_dir, *nccl_args, *launcher;
};

static int g_warnings;

static void warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("  WARNING: ", stdout);
	vprintf(fmt, ap);
	fputc('\n', stdout);
	va_end(ap);
	g_warnings++;
}

static int load(const struct opts *o, struct cruxn_ibv *l)
{
	char err[512];

	if (cruxn_ibv_load(o->lib, o->mlx5, l, err, sizeof err) != CRUX_OK) {
		fprintf(stderr,
			"error: %s\n  (Debian: libibverbs1 and ibverbs-providers; or point "
			"CRUX_IBVERBS_LIB / --lib at rdma-core's libibverbs)\n",
			err);
		return -1;
	}
	return 0;
}

/* Mb/s from the port's speed and width bits (IBTA encodings) */
static int port_mbps(uint8_t speed, uint8_t width)
{
	static const int per_lane[] = {2500,  5000,  10000,  10000, 14000,
				       25000, 50000, 100000, 200000};
	static const int lanes[] = {1, 4, 8, 12, 2};
	int s = 0, w = 0;
	while (s < 8 && !(speed & (1u << s)))
		s++;
	while (w < 4 && !(width & (1u << w)))
		w++;
	return per_lane[s] * lanes[w];
}

static const char *gid_type_name(int t)
{
	return t == IBV_GID_TYPE_ROCE_V2   ? "RoCE v2"
	       : t == IBV_GID_TYPE_ROCE_V1 ? "RoCE v1"
	       : t == IBV_GID_TYPE_IB	   ? "IB"
					   : "unknown";
}

static int gid_type(const struct cruxn_ibv *l, const struct opts *o, struct ibv_context *c,
		    const char *dev, int port, int i)
{
	struct ibv_gid_entry e;
	if (l->query_gid_ex &&
	    l->query_gid_ex(c, (uint32_t)port, (uint32_t)i, &e, 0, sizeof e) == 0)
		return (int)e.gid_type;
	char p[512], buf[32] = "";
	snprintf(p, sizeof p, "%s/class/infiniband/%s/ports/%d/gid_attrs/types/%d", o->sysfs, dev,
		 port, i);
	FILE *f = fopen(p, "r");
	if (!f)
		return -1;
	if (!fgets(buf, sizeof buf, f))
		buf[0] = 0;
	fclose(f);
	return strncmp(buf, "RoCE v2", 7) == 0	     ? IBV_GID_TYPE_ROCE_V2
	       : strncmp(buf, "IB/RoCE v1", 10) == 0 ? IBV_GID_TYPE_ROCE_V1
						     : -1;
}

static void gid_text(const union ibv_gid *g, char *out, size_t n)
{
	static const uint8_t v4map[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	if (memcmp(g->raw, v4map, 12) == 0)
		inet_ntop(AF_INET, &g->raw[12], out, (socklen_t)n);
	else
		inet_ntop(AF_INET6, g->raw, out, (socklen_t)n);
}

/* The lowest source port cruxd probes routes from (its defaults, its variables). */
static unsigned long probe_port_floor(void)
{
	const char *ports = getenv("CRUX_PROBE_PORTS"), *proto = getenv("CRUX_PROBE_PROTO");

	if (ports && *ports)
		return strtoul(ports, NULL, 10);
	return proto && !strcmp(proto, "roce") ? 49152 : 40000;
}

/* A QP to INIT, then RTR looped to itself through the GID at traffic class tos, flow label fl. */
static int qp_init_rtr(const struct cruxn_ibv *l, struct ibv_qp *qp, int port, int gid_index,
		       const union ibv_gid *gid, int tos, uint32_t fl)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = (uint8_t)port,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
	int rc = l->modify_qp(qp, &a,
			      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = (uint8_t)port;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.flow_label = fl;
	a.ah_attr.grh.traffic_class = (uint8_t)tos;
	if (!rc)
		rc = l->modify_qp(qp, &a,
				  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				      IBV_QP_MIN_RNR_TIMER);
	return rc;
}

static int qp_rts(const struct cruxn_ibv *l, struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTS,
				.timeout = 14,
				.retry_cnt = 7,
				.rnr_retry = 7,
				.max_rd_atomic = 1};
	return l->modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* Can the QP take a flow label, and can mlx5dv set its source port? A QP
 * looped back to itself through the chosen GID is enough to ask: the flow
 * label is given at RTR, the source port asked for in RTS (mlx5 refuses it
 * in any other state, as the plugin's own probe knows). */
static void probe_sport(const struct cruxn_ibv *l, struct ibv_context *c, struct ibv_pd *pd,
			int port, int gid_index, const union ibv_gid *gid)
{
	struct ibv_cq *cq = l->create_cq(c, 4, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = {
	    .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .cap = {1, 1, 1, 1, 0}};
	struct ibv_qp *qp = cq ? l->create_qp(pd, &ia) : NULL;
	if (!qp) {
		warn("cannot create a test QP (%s): source-port checks skipped", strerror(errno));
		goto out;
	}
	int rc = qp_init_rtr(l, qp, port, gid_index, gid, 0x60, 0x12345);
	struct ibv_qp_attr q;
	struct ibv_qp_init_attr qi;
	if (rc)
		warn("flow label: a QP refused traffic class 0x60 / flow label 0x12345 (%s)",
		     strerror(rc));
	else if (l->query_qp(qp, &q, IBV_QP_AV, &qi) == 0 && q.ah_attr.grh.flow_label != 0x12345)
		warn("flow label: set 0x12345, the device reports 0x%x: paths cannot be steered by "
		     "it",
		     q.ah_attr.grh.flow_label);
	else
		printf("  flow label -> UDP source port: accepted (0x12345 gives port %u)\n",
		       0xC000u | ((0x12345u & 0x3fff) ^ ((0x12345u & 0xFC000) >> 14)));
	if (!rc) {
		rc = qp_rts(l, qp);
		if (rc)
			warn("cannot bring the test QP to RTS (%s): source-port control not probed",
			     strerror(rc));
	}
	bool live = false;
	if (!l->mlx5_udp_sport)
		printf("  mlx5dv source-port control: unavailable (%s)\n", l->mlx5_why);
	else if (rc)
		;
	else if ((rc = l->mlx5_udp_sport(qp, 0xC123)) != 0)
		printf("  mlx5dv source-port control: refused (%s); the flow label is used\n",
		       strerror(rc));
	else
		live = printf("  mlx5dv source-port control: works\n") > 0;
	if (!live && probe_port_floor() < 0xC000)
		warn("the agent probes routes from source ports %lu and up (CRUX_PROBE_PORTS / "
		     "CRUX_PROBE_PROTO), but without the live source-port change a RoCE flow label "
		     "reaches only 49152-65535: the plugin refuses every route below that (ECMP). "
		     "Set CRUX_PROBE_PROTO=roce for cruxd, or enable the firmware's "
		     "rts2rts_qp_udp_sport capability",
		     probe_port_floor());
out:
	if (qp)
		l->destroy_qp(qp);
	if (cq)
		l->destroy_cq(cq);
}

/* ---- per level: the DSCP on the wire, and DSCP -> priority -> PFC/ECN on the NIC ---- */

/* The levels' DSCPs the agent marks with: the default map for CRUX_LEVELS levels. */
static int levels_load(struct crux_dt_settings *s)
{
	const char *e = getenv("CRUX_LEVELS");
	long n = e && *e ? strtol(e, NULL, 10) : CRUX_DEFAULT_LEVELS;
	if (n < 1 || n > CRUX_MAX_LEVELS)
		n = CRUX_DEFAULT_LEVELS;
	crux_dt_settings_default((uint32_t)n, s);
	return (int)n;
}

/* the interface holding the GID's IPv4 address (RoCE v2 over IPv4), or "" */
static void gid_netdev(const union ibv_gid *g, char *ifname, size_t n, int *ifindex)
{
	struct ifaddrs *ifa = NULL;
	ifname[0] = '\0';
	*ifindex = 0;
	if (getifaddrs(&ifa) != 0)
		return;
	for (struct ifaddrs *i = ifa; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    !memcmp(&((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr, g->raw + 12,
			    4)) {
			snprintf(ifname, n, "%s", i->ifa_name);
			*ifindex = (int)if_nametoindex(i->ifa_name);
			break;
		}
	freeifaddrs(ifa);
}

/* A QP looped to itself at traffic class tos, RTS; NULL on failure. */
static struct ibv_qp *loop_qp(const struct cruxn_ibv *l, struct ibv_pd *pd, struct ibv_cq *cq,
			      int port, int gid_index, const union ibv_gid *gid, int tos)
{
	struct ibv_qp_init_attr ia = {
	    .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .cap = {4, 1, 1, 1, 0}};
	struct ibv_qp *qp = l->create_qp(pd, &ia);
	if (!qp)
		return NULL;
	int rc = qp_init_rtr(l, qp, port, gid_index, gid, tos, 0);
	if (!rc)
		rc = qp_rts(l, qp);
	if (rc) {
		l->destroy_qp(qp);
		errno = rc;
		return NULL;
	}
	return qp;
}

/* RoCEv2 packets (IPv4, UDP to 4791) from src to QP qpn (its BTH) in what the capture holds, for
 * ms at most (the interface may never be quiet): count per TOS */
static int capture_drain(int fd, const uint8_t src[4], uint32_t qpn, long ms, unsigned counts[256])
{
	uint8_t b[2048];
	int n = 0;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		clock_gettime(CLOCK_MONOTONIC, &t);
		long left =
		    ms - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left < 0 || poll(&p, 1, (int)left) != 1)
			return n;
		ssize_t r = recv(fd, b, sizeof b, MSG_DONTWAIT);
		if (r < 28 || (b[0] >> 4) != 4 || b[9] != IPPROTO_UDP || memcmp(b + 12, src, 4))
			continue;
		size_t ihl = (size_t)(b[0] & 15) * 4;
		if ((size_t)r < ihl + 8 + 12 || ((b[ihl + 2] << 8) | b[ihl + 3]) != 4791)
			continue;
		const uint8_t *bth = b + ihl + 8;
		if (((uint32_t)bth[5] << 16 | (uint32_t)bth[6] << 8 | bth[7]) != (qpn & 0xffffff))
			continue; /* another QP's traffic on the same interface */
		counts[b[1]]++;
		n++;
	}
}

/* Everything queued on the capture now, read and dropped (not time-bound: a
 * busy interface may have filled the buffer, and a full buffer drops the
 * probe's own packets). */
static void capture_flush(int fd)
{
	uint8_t b[2048];
	for (int i = 0; i < 1000000 && recv(fd, b, sizeof b, MSG_DONTWAIT) >= 0; i++)
		;
}

/* Only unfragmented IPv4 UDP to 4791 reaches the capture's buffer: other
 * traffic on a busy interface (a bulk TCP flow on lo fills the default buffer
 * in microseconds) would otherwise crowd out the probe's packets. */
static int capture_filter(int fd)
{
	static struct sock_filter code[] = {
	    BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 9), /* IP protocol */
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, 0, 6),
	    BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 6), /* fragment offset */
	    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x1fff, 4, 0),
	    BPF_STMT(BPF_LDX | BPF_B | BPF_MSH, 0), /* X = IP header length */
	    BPF_STMT(BPF_LD | BPF_H | BPF_IND, 2),  /* UDP destination port */
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 4791, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, 0xffff),
	    BPF_STMT(BPF_RET | BPF_K, 0),
	};
	struct sock_fprog prog = {.len = sizeof code / sizeof code[0], .filter = code};
	int big = 4 << 20;
	/* FORCE needs CAP_NET_ADMIN; without it the plain limit applies */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big) != 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) != 0)
		return -1;
	capture_flush(fd); /* what arrived before the filter */
	return 0;
}

/*
 * Per level: a WRITE on a QP at the level's traffic class, captured on the
 * GID's interface (AF_PACKET, IP frames). A NIC's RoCE bypasses the kernel,
 * so an empty capture says nothing (the switch's or the NIC's per-priority
 * counters must); a packet at another DSCP breaks the level (a finding).
 */
static void check_wire_dscp(const struct cruxn_ibv *l, struct ibv_pd *pd, int port, int gid_index,
			    const union ibv_gid *gid, const char *ifname, int ifindex,
			    const struct crux_dt_settings *s, int nlevels)
{
	static uint8_t buf[65536];
	int fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_IP));
	struct sockaddr_ll sll = {
	    .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IP), .sll_ifindex = ifindex};
	if (fd < 0 || capture_filter(fd) != 0 ||
	    bind(fd, (struct sockaddr *)&sll, sizeof sll) != 0) {
		printf("  DSCP on the wire: cannot capture on %s (%s; needs CAP_NET_RAW)\n", ifname,
		       strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	struct ibv_cq *cq = l->create_cq(pd->context, 8, NULL, NULL, 0);
	struct ibv_mr *mr =
	    cq ? l->reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
	       : NULL;
	for (int lv = 0; mr && lv < nlevels; lv++) {
		int dscp = s->levels[lv].dscp;
		unsigned counts[256] = {0};
		struct ibv_qp *qp = loop_qp(l, pd, cq, port, gid_index, gid, dscp << 2);
		if (!qp) {
			warn("level %d: cannot bring a test QP at DSCP %d to RTS (%s)", lv, dscp,
			     strerror(errno));
			continue;
		}
		capture_flush(fd); /* what came before */
		struct ibv_sge sg = {(uintptr_t)buf, 16384, mr->lkey};
		struct ibv_send_wr wr = {.sg_list = &sg,
					 .num_sge = 1,
					 .opcode = IBV_WR_RDMA_WRITE,
					 .send_flags = IBV_SEND_SIGNALED,
					 .wr.rdma = {(uintptr_t)buf + 32768, mr->rkey}},
				   *bad;
		struct ibv_wc wc;
		int got = 0;
		if (cruxn_ibv_post_send(qp, &wr, &bad) == 0)
			for (int i = 0; i < 5000 && (got = cruxn_ibv_poll_cq(cq, 1, &wc)) == 0; i++)
				usleep(1000);
		int seen = capture_drain(fd, gid->raw + 12, qp->qp_num, 100, counts);
		unsigned other = 0;
		for (int t = 0; t < 256; t++)
			if ((t >> 2) != dscp)
				other += counts[t];
		if (got != 1 || wc.status != IBV_WC_SUCCESS)
			warn("level %d: the test WRITE at DSCP %d did not complete", lv, dscp);
		else if (!seen)
			printf("  level %d: DSCP %d: not visible to a capture on %s (RDMA bypasses "
			       "the "
			       "kernel): check the NIC's per-priority counters or the switch\n",
			       lv, dscp, ifname);
		else if (other)
			warn("level %d: asked for DSCP %d, %u of %d RoCE packets on %s carried "
			     "another "
			     "DSCP (a traffic-class override? see %s/class/infiniband/*/tc): the "
			     "level's "
			     "queue is not the one the switch gives it",
			     lv, dscp, other, seen, ifname, "/sys");
		else
			printf("  level %d: DSCP %d on the wire (%d RoCE packets on %s, UDP to "
			       "4791)\n",
			       lv, dscp, seen, ifname);
		l->destroy_qp(qp);
	}
	if (mr)
		l->dereg_mr(mr);
	if (cq)
		l->destroy_cq(cq);
	close(fd);
}

/* DCB (IEEE) of a netdev over rtnetlink: the DSCP -> priority APP table and the PFC bitmap. */
struct dcb_view {
	int prio_of[64]; /* -1: no DSCP APP entry */
	int ndscp;	 /* DSCP APP entries: none means the port trusts PCP, not DSCP */
	unsigned pfc_en; /* priorities with PFC */
};

static int dcb_read(const char *ifname, struct dcb_view *v, char *why, size_t whylen)
{
	struct {
		struct nlmsghdr n;
		struct dcbmsg d;
		char attrs[64];
	} req;
	static char resp[16384];
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	memset(v->prio_of, -1, sizeof v->prio_of);
	v->ndscp = 0;
	v->pfc_en = 0;
	if (fd < 0) {
		snprintf(why, whylen, "rtnetlink: %s", strerror(errno));
		return -1;
	}
	memset(&req, 0, sizeof req);
	req.n.nlmsg_type = RTM_GETDCB;
	req.n.nlmsg_flags = NLM_F_REQUEST;
	req.d.dcb_family = AF_UNSPEC;
	req.d.cmd = DCB_CMD_IEEE_GET;
	struct rtattr *ra = (struct rtattr *)(void *)req.attrs;
	ra->rta_type = DCB_ATTR_IFNAME;
	ra->rta_len = (unsigned short)RTA_LENGTH(strlen(ifname) + 1);
	memcpy(RTA_DATA(ra), ifname, strlen(ifname) + 1);
	req.n.nlmsg_len = NLMSG_LENGTH(sizeof req.d) + RTA_ALIGN(ra->rta_len);
	ssize_t r = -1;
	if (send(fd, &req, req.n.nlmsg_len, 0) >= 0) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 1000) == 1)
			r = recv(fd, resp, sizeof resp, 0);
	}
	close(fd);
	struct nlmsghdr *h = (struct nlmsghdr *)(void *)resp;
	if (r < (ssize_t)sizeof *h || !NLMSG_OK(h, (size_t)r)) {
		snprintf(why, whylen, "no answer from rtnetlink");
		return -1;
	}
	if (h->nlmsg_type == NLMSG_ERROR) {
		struct nlmsgerr *e = NLMSG_DATA(h);
		snprintf(why, whylen, "%s", strerror(-e->error));
		return -1;
	}
	int len = (int)h->nlmsg_len - (int)NLMSG_LENGTH(sizeof(struct dcbmsg));
	for (ra = (struct rtattr *)(void *)((char *)NLMSG_DATA(h) +
					    NLMSG_ALIGN(sizeof(struct dcbmsg)));
	     RTA_OK(ra, len); ra = RTA_NEXT(ra, len)) {
		if (ra->rta_type != DCB_ATTR_IEEE)
			continue;
		int l2 = (int)RTA_PAYLOAD(ra);
		for (struct rtattr *a = RTA_DATA(ra); RTA_OK(a, l2); a = RTA_NEXT(a, l2)) {
			if (a->rta_type == DCB_ATTR_IEEE_PFC &&
			    RTA_PAYLOAD(a) >= sizeof(struct ieee_pfc)) {
				struct ieee_pfc pfc;
				memcpy(&pfc, RTA_DATA(a), sizeof pfc);
				v->pfc_en = pfc.pfc_en;
			} else if (a->rta_type == DCB_ATTR_IEEE_APP_TABLE) {
				int l3 = (int)RTA_PAYLOAD(a);
				for (struct rtattr *e = RTA_DATA(a); RTA_OK(e, l3);
				     e = RTA_NEXT(e, l3)) {
					struct dcb_app app;
					if (e->rta_type != DCB_ATTR_IEEE_APP ||
					    RTA_PAYLOAD(e) < sizeof app)
						continue;
					memcpy(&app, RTA_DATA(e), sizeof app);
					if (app.selector == IEEE_8021QAZ_APP_SEL_DSCP &&
					    app.protocol < 64) {
						v->prio_of[app.protocol] = app.priority;
						v->ndscp++;
					}
				}
			}
		}
	}
	return 0;
}

/* 1, 0, or -1 (unknown): mlx5's per-priority ECN switch for RoCE (sysfs) */
static int ecn_on(const struct opts *o, const char *ifname, const char *role, int prio)
{
	char path[512], v[16] = "";
	snprintf(path, sizeof path, "%s/class/net/%s/ecn/%s/enable/%d", o->sysfs, ifname, role,
		 prio);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	int ok = fgets(v, sizeof v, f) != NULL;
	fclose(f);
	return ok ? atoi(v) != 0 : -1;
}

/*
 * Per level: DSCP -> priority (the APP table; none means PCP trust), PFC on
 * that priority (RoCE without it drops, and a lost tail costs a retry
 * timeout), ECN (DCQCN) notification and reaction on it where the NIC says.
 */
static void check_dcb(const struct opts *o, const char *ifname, const struct crux_dt_settings *s,
		      int nlevels)
{
	struct dcb_view v;
	char why[160];
	if (dcb_read(ifname, &v, why, sizeof why) != 0) {
		printf("  DCB on %s: not available (%s): trust mode, DSCP -> priority and PFC not "
		       "checked (a NIC with DCB answers; see 'dcb app show dev %s')\n",
		       ifname, why, ifname);
		return;
	}
	if (!v.ndscp) {
		warn(
		    "%s trusts PCP, not DSCP (no DSCP -> priority entries): the levels' DSCP marks "
		    "choose no queue on the NIC; set 'dcb app add dev %s dscp-prio D:P' per level "
		    "(mlx5: mlnx_qos --trust dscp)",
		    ifname, ifname);
		return;
	}
	for (int lv = 0; lv < nlevels; lv++) {
		int d = s->levels[lv].dscp, p = v.prio_of[d];
		if (p < 0) {
			warn("level %d: DSCP %d has no priority on %s: it falls into the default "
			     "queue",
			     lv, d, ifname);
			continue;
		}
		int np = ecn_on(o, ifname, "roce_np", p), rp = ecn_on(o, ifname, "roce_rp", p);
		printf("  level %d: DSCP %d -> priority %d, PFC %s, ECN %s\n", lv, d, p,
		       v.pfc_en & (1u << p) ? "on" : "off",
		       np < 0 || rp < 0 ? "unknown"
		       : np && rp	? "on"
					: "off");
		if (!(v.pfc_en & (1u << p)))
			warn("level %d: priority %d has no PFC on %s: RoCE at this level is lossy",
			     lv, p, ifname);
		if (np == 0 || rp == 0)
			warn("level %d: ECN (DCQCN) is off for priority %d on %s", lv, p, ifname);
	}
}

static void probe_dmabuf(const struct cruxn_ibv *l, struct ibv_pd *pd)
{
	if (!l->reg_dmabuf_mr) {
		printf("  DMA-BUF registration: no (libibverbs older than rdma-core 34)\n");
		return;
	}
	errno = 0;
	struct ibv_mr *mr = l->reg_dmabuf_mr(pd, 0, 0, 0, -1, 0);
	if (mr)
		printf("  DMA-BUF registration: probe unexpectedly succeeded\n");
	else if (errno == EOPNOTSUPP || errno == EPROTONOSUPPORT)
		printf("  DMA-BUF registration: not supported by this device/kernel (%s); "
		       "GPU memory needs nvidia-peermem\n",
		       strerror(errno));
	else
		printf("  DMA-BUF registration: supported (probe with fd -1 gave %s)\n",
		       strerror(errno));
}

/* A traffic class forced for the whole device overrides the per-QP one. */
static void check_tc_override(const struct opts *o, const char *dev, int port)
{
	char p[512], buf[128] = "";
	snprintf(p, sizeof p, "%s/class/infiniband/%s/tc/%d/traffic_class", o->sysfs, dev, port);
	FILE *f = fopen(p, "r");
	if (!f)
		return;
	if (!fgets(buf, sizeof buf, f))
		buf[0] = 0;
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	const char *t = strstr(buf, "tclass=");
	long v = t ? strtol(t + 7, NULL, 10) : -1;
	if (v >= 0)
		warn("%s holds \"%s\": every QP of %s port %d is sent with traffic class %ld, so "
		     "Crux's per-job classes have no effect. Clear it: echo -1 > %s",
		     p, buf, dev, port, v, p);
	else
		printf("  host-wide traffic class override: none (%s)\n", buf[0] ? buf : "empty");
}

static void check_peermem(const struct opts *o)
{
	char p[512];
	snprintf(p, sizeof p, "%s/module/nvidia_peermem", o->sysfs);
	if (access(p, F_OK) == 0) {
		printf("nvidia-peermem: loaded\n");
		return;
	}
	snprintf(p, sizeof p, "%s/module/nv_peer_mem", o->sysfs);
	if (access(p, F_OK) == 0)
		printf("nvidia-peermem: the legacy nv_peer_mem module is loaded\n");
	else
		printf("nvidia-peermem: not loaded (GPU memory registration needs it or DMA-BUF; "
		       "modprobe nvidia-peermem)\n");
}

static int check_port(const struct cruxn_ibv *l, const struct opts *o, struct ibv_context *c,
		      struct ibv_pd *pd, const char *dev, int port,
		      const struct cruxn_gid_rules *rules)
{
	struct ibv_port_attr pa;
	memset(&pa, 0, sizeof pa);
	if (l->query_port(c, (uint8_t)port, &pa) != 0) {
		warn("%s port %d: query failed", dev, port);
		return -1;
	}
	bool eth = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
	printf("  port %d: %s, link layer %s, active MTU %d, %d Mb/s\n", port,
	       pa.state == IBV_PORT_ACTIVE ? "ACTIVE" : "not active",
	       eth					    ? "Ethernet (RoCE)"
	       : pa.link_layer == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand"
							    : "unspecified",
	       128 << pa.active_mtu, port_mbps(pa.active_speed, pa.active_width));
	if (pa.state != IBV_PORT_ACTIVE) {
		warn("%s port %d is not ACTIVE: the plugin skips it", dev, port);
		return 0;
	}
	if (!eth) {
		printf("  InfiniBand: LID %u; no GID choice or DSCP marking applies\n", pa.lid);
		return 0;
	}
	struct cruxn_gid_cand cand[256];
	int n = 0;
	for (int i = 0; i < pa.gid_tbl_len && n < 256; i++) {
		if (l->query_gid(c, (uint8_t)port, i, &cand[n].gid) != 0)
			continue;
		static const uint8_t zero[16];
		if (memcmp(cand[n].gid.raw, zero, 16) == 0)
			continue;
		cand[n].index = i;
		cand[n].type = gid_type(l, o, c, dev, port, i);
		char t[INET6_ADDRSTRLEN];
		gid_text(&cand[n].gid, t, sizeof t);
		printf("    GID %3d  %-8s %s\n", i, gid_type_name(cand[n].type), t);
		n++;
	}
	int idx = -1;
	if (cruxn_gid_choose(cand, n, rules, &idx) != CRUX_OK) {
		warn("%s port %d: no GID matches NCCL_IB_GID_INDEX / NCCL_IB_ADDR_FAMILY / "
		     "NCCL_IB_ADDR_RANGE / NCCL_IB_ROCE_VERSION_NUM: the plugin cannot use it",
		     dev, port);
		return 0;
	}
	for (int i = 0; i < n; i++)
		if (cand[i].index == idx) {
			char t[INET6_ADDRSTRLEN];
			gid_text(&cand[i].gid, t, sizeof t);
			printf("  chosen GID index %d (%s, %s)%s\n", idx,
			       gid_type_name(cand[i].type), t,
			       rules->index >= 0 ? " from NCCL_IB_GID_INDEX" : "");
			probe_sport(l, c, pd, port, idx, &cand[i].gid);
			struct crux_dt_settings lv;
			int nl = levels_load(&lv), ifindex;
			char ifname[IF_NAMESIZE];
			gid_netdev(&cand[i].gid, ifname, sizeof ifname, &ifindex);
			if (!ifindex) {
				printf("  levels: the GID's interface is not found (an IPv6 GID?): "
				       "DSCP and PFC checks skipped\n");
				continue;
			}
			printf("  levels (%d, CRUX_LEVELS; DSCPs of the default map) on %s:\n", nl,
			       ifname);
			check_dcb(o, ifname, &lv, nl);
			check_wire_dscp(l, pd, port, idx, &cand[i].gid, ifname, ifindex, &lv, nl);
		}
	check_tc_override(o, dev, port);
	return 0;
}

/* the "Avg bus bandwidth" all_reduce_perf prints, or a negative value */
static double run_allreduce(const struct opts *o, const char *label, const char *env)
{
	char cmd[4096];
	snprintf(cmd, sizeof cmd, "env %s %s %s/all_reduce_perf %s 2>&1", env,
		 o->launcher ? o->launcher : "", o->nccl_tests, o->nccl_args);
	printf("nccl-tests (%s): %s\n", label, cmd);
	fflush(stdout);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	char line[1024];
	double bw = -1;
	while (fgets(line, sizeof line, p)) {
		const char *k = strstr(line, "Avg bus bandwidth");
		const char *c = k ? strchr(k, ':') : NULL;
		if (c)
			bw = strtod(c + 1, NULL);
	}
	int st = pclose(p);
	if (st != 0 || bw < 0) {
		warn("all_reduce_perf (%s) %s", label,
		     st != 0 ? "failed (see its output by running the command above)"
			     : "printed no \"Avg bus bandwidth\" line");
		return -1;
	}
	printf("  average bus bandwidth: %.3f GB/s\n", bw);
	return bw;
}

static void compare_nccl(const struct opts *o)
{
	char p[1024];
	snprintf(p, sizeof p, "%s/all_reduce_perf", o->nccl_tests);
	if (access(p, X_OK) != 0) {
		warn("--nccl-tests: %s is not an executable (build nccl-tests, give its build dir)",
		     p);
		return;
	}
	if (!o->launcher || !*o->launcher) {
		warn(
		    "--nccl-tests without --launcher would run one rank on this host: no network "
		    "traffic, so the bandwidth ratio would say nothing about the NIC. Give a "
		    "launcher that places ranks on two or more hosts (--launcher \"mpirun -np 2 -H "
		    "a,b ...\")");
		return;
	}
	double ib = run_allreduce(o, "NCCL's IB transport", "NCCL_NET=IB NCCL_NET_PLUGIN=none");
	char env[1200];
	snprintf(env, sizeof env, "NCCL_NET=Crux NCCL_NET_PLUGIN=crux CRUX_TRANSPORT=verbs%s%s",
		 o->plugin_dir ? " LD_LIBRARY_PATH=" : "", o->plugin_dir ? o->plugin_dir : "");
	double cx = run_allreduce(o, "Crux plugin", env);
	if (ib > 0 && cx > 0)
		printf("all_reduce_perf bus bandwidth, Crux / NCCL IB: %.3f (%.3f vs %.3f GB/s)\n",
		       cx / ib, cx, ib);
}

static void usage(FILE *f, const char *me)
{
	fprintf(
	    f,
	    "usage: %s [options]\n"
	    "  --lib PATH         libibverbs to load (default $CRUX_IBVERBS_LIB or "
	    "libibverbs.so.1)\n"
	    "  --mlx5 PATH        libmlx5 to load (default $CRUX_MLX5_LIB or libmlx5.so.1)\n"
	    "  --sysfs DIR        sysfs root (default /sys)\n"
	    "  --nccl-tests DIR   nccl-tests build dir: run all_reduce_perf over NCCL IB and Crux\n"
	    "  --nccl-args ARGS   all_reduce_perf arguments (default \"-b 8M -e 256M -f 2 -g 1\")\n"
	    "  --launcher CMD     prefix for multi-host runs, e.g. \"mpirun -np 2 -H a,b -x "
	    "NCCL_NET "
	    "-x NCCL_NET_PLUGIN -x CRUX_TRANSPORT -x LD_LIBRARY_PATH\"\n"
	    "  --plugin-dir DIR   where libnccl-net-crux.so is (added to LD_LIBRARY_PATH)\n",
	    me);
}

int main(int argc, char **argv)
{
	struct opts o = {.lib = getenv("CRUX_IBVERBS_LIB"),
			 .mlx5 = getenv("CRUX_MLX5_LIB"),
			 .sysfs = "/sys",
			 .nccl_args = "-b 8M -e 256M -f 2 -g 1"};
	if (!o.lib || !*o.lib)
		o.lib = "libibverbs.so.1";
	if (!o.mlx5 || !*o.mlx5)
		o.mlx5 = "libmlx5.so.1";
	static const struct option lo[] = {
	    {"lib", 1, 0, 'l'},	       {"mlx5", 1, 0, 'm'},	 {"sysfs", 1, 0, 's'},
	    {"nccl-tests", 1, 0, 'n'}, {"nccl-args", 1, 0, 'a'}, {"launcher", 1, 0, 'L'},
	    {"plugin-dir", 1, 0, 'p'}, {"help", 0, 0, 'h'},	 {0, 0, 0, 0}};
	for (int ch; (ch = getopt_long(argc, argv, "h", lo, NULL)) != -1;) {
		switch (ch) {
		case 'l':
			o.lib = optarg;
			break;
		case 'm':
			o.mlx5 = optarg;
			break;
		case 's':
			o.sysfs = optarg;
			break;
		case 'n':
			o.nccl_tests = optarg;
			break;
		case 'a':
			o.nccl_args = optarg;
			break;
		case 'L':
			o.launcher = optarg;
			break;
		case 'p':
			o.plugin_dir = optarg;
			break;
		case 'h':
			usage(stdout, argv[0]);
			return 0;
		default:
			usage(stderr, argv[0]);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "error: unexpected argument '%s'\n", argv[optind]);
		usage(stderr, argv[0]);
		return 2;
	}
	struct cruxn_ibv l;
	if (load(&o, &l))
		return 2;
	struct cruxn_gid_rules rules;
	char err[256];
	if (cruxn_gid_rules_load(&rules, err, sizeof err) != CRUX_OK) {
		fprintf(stderr, "error: %s\n", err);
		return 2;
	}
	int n = 0;
	struct ibv_device **dl = l.get_device_list(&n);
	if (!dl || n == 0) {
		fprintf(stderr,
			"error: no RDMA devices (%s). Is the NIC's driver loaded (mlx5_ib, "
			"rdma_rxe)? ls %s/class/infiniband should list them.\n",
			dl ? "the list is empty" : strerror(errno), o.sysfs);
		if (dl)
			l.free_device_list(dl);
		return 2;
	}
	printf("libibverbs: %s; %d RDMA device(s)\n", o.lib, n);
	for (int d = 0; d < n; d++) {
		const char *name = l.get_device_name(dl[d]);
		struct ibv_context *c = l.open_device(dl[d]);
		struct ibv_device_attr da;
		if (!c || l.query_device(c, &da) != 0) {
			warn("%s: cannot open or query (%s)", name, strerror(errno));
			if (c)
				l.close_device(c);
			continue;
		}
		printf("device %s: firmware %s, %d port(s), max %d QPs, %d WRs per QP\n", name,
		       da.fw_ver, da.phys_port_cnt, da.max_qp, da.max_qp_wr);
		struct ibv_pd *pd = l.alloc_pd(c);
		if (!pd) {
			warn("%s: cannot allocate a protection domain (%s)", name, strerror(errno));
		} else {
			for (int p = 1; p <= da.phys_port_cnt; p++)
				check_port(&l, &o, c, pd, name, p, &rules);
			probe_dmabuf(&l, pd);
			l.dealloc_pd(pd);
		}
		l.close_device(c);
	}
	l.free_device_list(dl);
	check_peermem(&o);
	if (o.nccl_tests)
		compare_nccl(&o);
	printf("%d warning(s)\n", g_warnings);
	return g_warnings ? 1 : 0;
}
