/* SPDX-License-Identifier: Apache-2.0 */
/* Software RDMA device: devices, contexts, queries, GIDs, PDs, completion channels. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "sr.h"

/* the real entry points are macros/inlines in verbs.h; we export the symbols */
#undef ibv_reg_mr
#undef ibv_query_port

#define SR_MAX_DEV 16
static struct sr_dev g_dev[SR_MAX_DEV];
static int g_ndev;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static bool ifname_listed(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; *p;) {
		const char *e = strchr(p, ',');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (l == n && strncmp(p, name, n) == 0)
			return true;
		if (!e)
			break;
		p = e + 1;
	}
	return false;
}

/* One device per interface with an IPv4 address: every non-loopback one, or
 * exactly those CRUX_SOFTRDMA_IFNAMES lists (which may name lo). */
static void scan(void)
{
	const char *want = getenv("CRUX_SOFTRDMA_IFNAMES");
	struct ifaddrs *ifa0 = NULL;
	if (getifaddrs(&ifa0) != 0) {
		sr_log("getifaddrs failed: %s; no devices", strerror(errno));
		return;
	}
	for (struct ifaddrs *i = ifa0; i && g_ndev < SR_MAX_DEV; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
			continue;
		if (want && *want ? !ifname_listed(want, i->ifa_name)
				  : (i->ifa_flags & IFF_LOOPBACK))
			continue;
		bool dup = false;
		for (int k = 0; k < g_ndev; k++)
			dup |= strcmp(g_dev[k].ifname, i->ifa_name) == 0;
		if (dup)
			continue;
		struct sr_dev *d = &g_dev[g_ndev];
		snprintf(d->ifname, sizeof d->ifname, "%s", i->ifa_name);
		d->ip = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
		d->ifindex = (int)if_nametoindex(i->ifa_name);
		d->guid =
		    0x02c9000000000000ull | ((uint64_t)ntohl(d->ip.s_addr) << 8) | (uint64_t)g_ndev;
		d->ib.node_type = IBV_NODE_CA;
		d->ib.transport_type = IBV_TRANSPORT_IB;
		snprintf(d->ib.name, sizeof d->ib.name, "srxe_%.20s", i->ifa_name);
		snprintf(d->ib.dev_name, sizeof d->ib.dev_name, "uverbs%d", g_ndev);
		snprintf(d->ib.dev_path, sizeof d->ib.dev_path,
			 "/sys/class/infiniband_verbs/uverbs%d", g_ndev);
		snprintf(d->ib.ibdev_path, sizeof d->ib.ibdev_path,
			 "/sys/class/infiniband/srxe_%.20s", i->ifa_name);
		g_ndev++;
	}
	freeifaddrs(ifa0);
}

SR_API struct ibv_device **ibv_get_device_list(int *num)
{
	pthread_once(&g_once, scan);
	struct ibv_device **l = calloc((size_t)g_ndev + 1, sizeof *l);
	if (!l) {
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < g_ndev; i++)
		l[i] = &g_dev[i].ib;
	if (num)
		*num = g_ndev;
	return l;
}

SR_API void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

SR_API const char *ibv_get_device_name(struct ibv_device *d)
{
	return d ? d->name : NULL;
}

SR_API __be64 ibv_get_device_guid(struct ibv_device *d)
{
	return htobe64(((struct sr_dev *)d)->guid);
}

SR_API int ibv_fork_init(void)
{
	return 0;
}

SR_API struct ibv_context *ibv_open_device(struct ibv_device *d)
{
	struct sr_ctx *c = calloc(1, sizeof *c);
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->dev = (struct sr_dev *)d;
	c->ib.device = d;
	c->ib.cmd_fd = -1;
	/* async events arrive on a pipe, as on rdma-core's async_fd: a reader
	 * blocks in ibv_get_async_event; closing the device ends it (EOF) */
	int ap[2];
	if (pipe2(ap, O_CLOEXEC) != 0) {
		int e = errno;
		free(c);
		errno = e;
		return NULL;
	}
	c->ib.async_fd = ap[0];
	c->async_wfd = ap[1];
	c->ib.num_comp_vectors = 1;
	pthread_mutex_init(&c->ib.mutex, NULL);
	pthread_mutex_init(&c->mu, NULL);
	c->keygen = (uint32_t)(sr_now_ns() >> 10);
	sr_ops_fill(&c->ib.ops);
	int rc = sr_ctx_start(c);
	if (rc) {
		pthread_mutex_destroy(&c->mu);
		pthread_mutex_destroy(&c->ib.mutex);
		close(ap[0]);
		close(ap[1]);
		free(c);
		errno = rc;
		return NULL;
	}
	return &c->ib;
}

SR_API int ibv_close_device(struct ibv_context *ib)
{
	struct sr_ctx *c = (struct sr_ctx *)ib;
	sr_ctx_stop(c);
	for (uint32_t i = 0; i < c->nmr; i++)
		free(c->mrs[i]);
	free(c->mrs);
	/* the write end first: a thread blocked in ibv_get_async_event sees EOF */
	close(c->async_wfd);
	close(c->ib.async_fd);
	pthread_mutex_destroy(&c->mu);
	pthread_mutex_destroy(&c->ib.mutex);
	free(c);
	return 0;
}

/* Queue an async event (the double raises none yet; tests and future fault
 * modes do). Never blocks: a full pipe drops the event, as an overrun would. */
int sr_async_post(struct sr_ctx *c, const struct ibv_async_event *ev)
{
	ssize_t w;
	do {
		w = write(c->async_wfd, ev, sizeof *ev);
	} while (w < 0 && errno == EINTR);
	return w == (ssize_t)sizeof *ev ? 0 : -1;
}

/* rdma-core's contract: one read of async_fd per event, blocking unless the
 * caller made the fd non-blocking; -1 with errno on failure or after close. */
SR_API int ibv_get_async_event(struct ibv_context *ib, struct ibv_async_event *ev)
{
	int fd = ib->async_fd;
	ssize_t r;
	do {
		r = read(fd, ev, sizeof *ev);
	} while (r < 0 && errno == EINTR);
	if (r == (ssize_t)sizeof *ev)
		return 0;
	if (r >= 0)
		errno = r == 0 ? EIO : EPROTO;
	return -1;
}

SR_API void ibv_ack_async_event(struct ibv_async_event *ev)
{
	(void)ev;
}

SR_API const char *ibv_event_type_str(enum ibv_event_type t)
{
	static const char *const names[] = {
	    [IBV_EVENT_CQ_ERR] = "CQ error",
	    [IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
	    [IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue error",
	    [IBV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error",
	    [IBV_EVENT_COMM_EST] = "communication established",
	    [IBV_EVENT_SQ_DRAINED] = "send queue drained",
	    [IBV_EVENT_PATH_MIG] = "path migrated",
	    [IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
	    [IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
	    [IBV_EVENT_PORT_ACTIVE] = "port active",
	    [IBV_EVENT_PORT_ERR] = "port error",
	    [IBV_EVENT_LID_CHANGE] = "LID change",
	    [IBV_EVENT_PKEY_CHANGE] = "P_Key change",
	    [IBV_EVENT_SM_CHANGE] = "SM change",
	    [IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
	    [IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
	    [IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
	    [IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
	    [IBV_EVENT_GID_CHANGE] = "GID table change",
	    [IBV_EVENT_WQ_FATAL] = "WQ fatal",
	};
	if ((unsigned)t < sizeof names / sizeof names[0] && names[t])
		return names[t];
	return "unknown";
}

SR_API int ibv_query_device(struct ibv_context *ib, struct ibv_device_attr *a)
{
	struct sr_ctx *c = (struct sr_ctx *)ib;
	memset(a, 0, sizeof *a);
	snprintf(a->fw_ver, sizeof a->fw_ver, "softrdma-1");
	a->node_guid = htobe64(c->dev->guid);
	a->sys_image_guid = a->node_guid;
	a->max_mr_size = SR_MAX_MSG;
	a->page_size_cap = 4096;
	a->max_qp = SR_MAX_QP;
	a->max_qp_wr = 16384;
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN;
	a->max_sge = 30;
	a->max_sge_rd = 30;
	a->max_cq = 1024;
	a->max_cqe = 1 << 20;
	a->max_mr = 1 << 20;
	a->max_pd = 1024;
	a->max_qp_rd_atom = 16;
	a->max_qp_init_rd_atom = 16;
	a->max_res_rd_atom = 16 * SR_MAX_QP;
	a->atomic_cap = IBV_ATOMIC_NONE;
	a->max_pkeys = 1;
	a->phys_port_cnt = 1;
	return 0;
}

/* the compat ABI: callers may pass the struct without its newer tail */
SR_API int ibv_query_port(struct ibv_context *ib, uint8_t port, struct _compat_ibv_port_attr *out)
{
	(void)ib;
	if (port != 1)
		return EINVAL;
	struct ibv_port_attr a = {0};
	a.state = IBV_PORT_ACTIVE;
	a.max_mtu = IBV_MTU_4096;
	a.active_mtu = IBV_MTU_4096;
	a.gid_tbl_len = SR_NGID;
	a.max_msg_sz = SR_MAX_MSG;
	a.pkey_tbl_len = 1;
	a.active_width = 2;  /* 4x */
	a.active_speed = 32; /* 25 Gb/s per lane: 100 Gb/s */
	a.phys_state = 5;    /* LinkUp */
	a.link_layer = IBV_LINK_LAYER_ETHERNET;
	memcpy(out, &a, offsetof(struct ibv_port_attr, port_cap_flags2));
	return 0;
}

/* GID table: 0 link-local (from the interface index), 1 RoCE v1 and
 * 2 RoCE v2 of the IPv4 address, both IPv4-mapped */
static int gid_of(struct sr_ctx *c, uint32_t idx, union ibv_gid *g)
{
	memset(g, 0, sizeof *g);
	if (idx == 0) {
		g->raw[0] = 0xfe;
		g->raw[1] = 0x80;
		uint64_t id = c->dev->guid ^ 0x0200000000000000ull;
		for (int i = 0; i < 8; i++)
			g->raw[8 + i] = (uint8_t)(id >> (56 - 8 * i));
		return 0;
	}
	if (idx >= SR_NGID)
		return EINVAL;
	g->raw[10] = 0xff;
	g->raw[11] = 0xff;
	memcpy(&g->raw[12], &c->dev->ip.s_addr, 4);
	return 0;
}

SR_API int ibv_query_gid(struct ibv_context *ib, uint8_t port, int index, union ibv_gid *gid)
{
	if (port != 1 || index < 0 || gid_of((struct sr_ctx *)ib, (uint32_t)index, gid)) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

SR_API int _ibv_query_gid_ex(struct ibv_context *ib, uint32_t port, uint32_t index,
			     struct ibv_gid_entry *e, uint32_t flags, size_t entry_size)
{
	struct sr_ctx *c = (struct sr_ctx *)ib;
	if (flags || port != 1 || entry_size < sizeof *e)
		return EINVAL;
	union ibv_gid g;
	if (gid_of(c, index, &g))
		return ENODATA;
	memset(e, 0, sizeof *e);
	e->gid = g;
	e->gid_index = index;
	e->port_num = port;
	e->gid_type = index == 2 ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
	e->ndev_ifindex = (uint32_t)c->dev->ifindex;
	return 0;
}

SR_API struct ibv_pd *ibv_alloc_pd(struct ibv_context *ib)
{
	struct ibv_pd *pd = calloc(1, sizeof *pd);
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->context = ib;
	pd->handle = (uint32_t)(uintptr_t)pd;
	return pd;
}

SR_API int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct sr_ctx *c = (struct sr_ctx *)pd->context;
	pthread_mutex_lock(&c->mu);
	for (uint32_t i = 0; i < c->nmr; i++)
		if (c->mrs[i] && c->mrs[i]->ib.pd == pd) {
			pthread_mutex_unlock(&c->mu);
			return EBUSY;
		}
	pthread_mutex_unlock(&c->mu);
	free(pd);
	return 0;
}

SR_API struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ib)
{
	struct ibv_comp_channel *ch = calloc(1, sizeof *ch);
	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	int p[2];
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
		free(ch);
		return NULL;
	}
	ch->context = ib;
	ch->fd = p[0];
	ch->refcnt = p[1]; /* the write end: this double keeps it here */
	return ch;
}

SR_API int ibv_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	close(ch->fd);
	close(ch->refcnt);
	free(ch);
	return 0;
}

SR_API int mlx5dv_modify_qp_udp_sport(struct ibv_qp *ib, uint16_t sport)
{
	const char *e = getenv("CRUX_SOFTRDMA_UDP_SPORT");
	if (!e || strcmp(e, "1") != 0)
		return EOPNOTSUPP;
	struct sr_qp *qp = (struct sr_qp *)ib;
	pthread_mutex_lock(&qp->ctx->mu);
	/* as mlx5 (RTS2RTS_QP): RC or UC, in RTS only */
	if ((ib->qp_type != IBV_QPT_RC && ib->qp_type != IBV_QPT_UC) || ib->state != IBV_QPS_RTS) {
		pthread_mutex_unlock(&qp->ctx->mu);
		return EOPNOTSUPP;
	}
	qp->sport = sport;
	pthread_mutex_unlock(&qp->ctx->mu);
	return 0;
}

SR_API const char *ibv_wc_status_str(enum ibv_wc_status s)
{
	static const char *const names[] = {
	    [IBV_WC_SUCCESS] = "success",
	    [IBV_WC_LOC_LEN_ERR] = "local length error",
	    [IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
	    [IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
	    [IBV_WC_LOC_PROT_ERR] = "local protection error",
	    [IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
	    [IBV_WC_MW_BIND_ERR] = "memory window bind error",
	    [IBV_WC_BAD_RESP_ERR] = "bad response error",
	    [IBV_WC_LOC_ACCESS_ERR] = "local access error",
	    [IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
	    [IBV_WC_REM_ACCESS_ERR] = "remote access error",
	    [IBV_WC_REM_OP_ERR] = "remote operation error",
	    [IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
	    [IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
	    [IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
	    [IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
	    [IBV_WC_REM_ABORT_ERR] = "aborted error",
	    [IBV_WC_INV_EECN_ERR] = "invalid EE context number",
	    [IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
	    [IBV_WC_FATAL_ERR] = "fatal error",
	    [IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
	    [IBV_WC_GENERAL_ERR] = "general error",
	};
	if ((unsigned)s < sizeof names / sizeof names[0] && names[s])
		return names[s];
	return "unknown";
}
