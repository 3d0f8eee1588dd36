/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The verbs transport's connections: the TCP bootstrap (listen, a
 * non-blocking connect and accept that exchange queue pair numbers, GIDs,
 * the CTS FIFO and the size table, as NCCL's IB transport does), lanes
 * per (class, path), their receives, and tear-down.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "boot.h"
#include "crux/log.h"
#include "vx_transport.h"

struct cruxn_vx cruxn_vx_state;
struct cruxn_vx_qp_cfg cruxn_vx_qpcfg = {.timeout = 20,
					 .retry_cnt = 7,
					 .pkey = 0,
					 .nqps = 1,
					 .split = false,
					 .ar = -1,
					 .ar_threshold = 8192,
					 .relaxed = 2,
					 .warm_lanes = 2,
					 .lanes_ahead = -1,
					 .lane_interval_ns = 10000000ull};

/* ---- failure ---------------------------------------------------------------- */

static const char *gid_str(const union ibv_gid *g, char *buf, size_t len)
{
	static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	if (memcmp(g->raw, v4, 12) == 0)
		return inet_ntop(AF_INET, g->raw + 12, buf, (socklen_t)len);
	return inet_ntop(AF_INET6, g->raw, buf, (socklen_t)len);
}

void cruxn_vx_fail(struct vx_comm *c, const char *what, const char *detail, const char *hint)
{
	char lg[64], rg[64];

	if (atomic_load(&c->b.error) == 0)
		crux_err("verbs %s connection on %s port %u (GID %s) to GID %s: %s (%s); %s",
			 c->b.is_send ? "send" : "receive", c->dev->name, c->ep.port,
			 gid_str(&c->ep.gid, lg, sizeof(lg)),
			 gid_str(&c->remote.gid, rg, sizeof(rg)), what, detail, hint);
	cruxn_comm_fail(&c->b, EREMOTEIO, what);
}

/* ---- lanes -------------------------------------------------------------------- */

int cruxn_vx_fifo_tos(const struct vx_comm *c, int sender_tos)
{
	int fifo = cruxn_ctx.cfg.ib_fifo_tc;

	return fifo >= 0 && c->ep.link_layer == IBV_LINK_LAYER_ETHERNET ? (fifo & 0xfc)
									: sender_tos;
}

static struct ibv_qp *qp_create(struct vx_comm *c)
{
	struct ibv_qp_init_attr ia;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = c->cq;
	ia.recv_cq = c->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.qp_context = c; /* the async-event thread finds the comm of a failed QP */
	ia.cap.max_send_wr = VX_SEND_DEPTH;
	ia.cap.max_recv_wr = VX_RECV_POSTED;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = sizeof(uint64_t);
	return cruxn_vx_state.ibv.create_qp(c->dev->pd, &ia);
}

void cruxn_vx_lane_free(struct vx_lane *l)
{
	for (int i = 0; i < l->nqps; i++)
		if (l->qps[i])
			cruxn_vx_state.ibv.destroy_qp(l->qps[i]);
	free(l);
}

/*
 * A lane of c->nqps queue pairs carrying 'cls'; QP i takes the route's
 * port i (mod the route's ports) through its flow label, and through
 * libmlx5 as well where the device supports that, so one job's messages
 * spread over the route's paths.
 */
struct vx_lane *cruxn_vx_lane_new(struct vx_comm *c, uint32_t id, const struct cruxn_class *cls,
				  const struct cruxn_route *route)
{
	struct vx_lane *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->id = id;
	l->cls = *cls;
	l->route = *route;
	l->since_ns = crux_now_ns();
	/*
	 * A route this device cannot realise (a port below 49152, which a flow
	 * label cannot name, without the live source-port call) is refused:
	 * the lane hashes (label 0) and says so, never another path silently.
	 */
	for (int i = 0; i < c->nqps && !c->dev->live_sport && route->path_id != CRUX_PATH_NONE;
	     i++) {
		bool exact = true;
		(void)cruxn_vx_flow_label_for_sport(cruxn_route_port(route, i), &exact);
		if (!exact && !l->route_refused) {
			char peer[80];
			l->route_refused = true;
			c->routes_refused++;
			crux_warn(
			    "verbs connection to %s: route %u refused: its source port %u is below "
			    "49152, which a RoCE flow label cannot reach, and %s has no live "
			    "source-port change (%s); the lane uses the device's hash (ECMP). "
			    "Probe RoCE paths with CRUX_PROBE_PROTO=roce (ports 49152-65535)",
			    crux_sockaddr_format(&c->b.peer.sa, peer, sizeof(peer)), route->path_id,
			    cruxn_route_port(route, i), c->dev->name,
			    cruxn_vx_state.ibv.mlx5_why[0] ? cruxn_vx_state.ibv.mlx5_why
							   : "the device refused it");
		}
	}
	for (int i = 0; i < c->nqps; i++) {
		bool exact = true;
		l->sport[i] = l->route_refused ? 0 : cruxn_route_port(route, i);
		l->flow_label[i] = cruxn_vx_flow_label_for_sport(l->sport[i], &exact);
		l->qps[i] = qp_create(c);
		if (!l->qps[i]) {
			cruxn_vx_lane_free(l);
			return NULL;
		}
		l->nqps = i + 1;
	}
	l->state = VX_LANE_BUILDING;
	return l;
}

/* A control message of 'kind' about lane 'lane', the rest zero. */
static void msg_init(const struct vx_comm *c, struct vx_msg *m, int kind, uint32_t lane)
{
	memset(m, 0, sizeof(*m));
	m->magic = VX_MAGIC;
	m->version = VX_VERSION;
	m->kind = (uint16_t)kind;
	m->nonce = c->nonce;
	m->lane = lane;
}

void cruxn_vx_ep_to_msg(const struct vx_comm *c, const struct vx_lane *l, struct vx_msg *m,
			int kind)
{
	msg_init(c, m, kind, l->id);
	m->nqps = (uint8_t)l->nqps;
	for (int i = 0; i < l->nqps; i++) {
		m->qpn[i] = l->qps[i]->qp_num;
		m->flow_label[i] = l->flow_label[i];
	}
	memcpy(m->gid, c->ep.gid.raw, 16);
	m->lid = c->ep.lid;
	m->port = c->ep.port;
	m->link_layer = c->ep.link_layer;
	m->mtu = c->ep.mtu;
	m->tos = (uint8_t)l->cls.tos;
	m->sl = (uint8_t)l->cls.sl;
	m->level = (uint8_t)l->cls.level;
}

/* Any 24-bit start; the QP number's low bits are unique per QP. */
static uint32_t start_psn(uint32_t qpn)
{
	return qpn & 0xffffff;
}

/* Move the lane's QPs to RTS towards the peer's ends described by m. */
crux_status_t cruxn_vx_lane_connect(struct vx_comm *c, struct vx_lane *l, const struct vx_msg *m)
{
	struct cruxn_vx_ep local = c->ep, remote;
	char err[320];
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

	if (m->nqps != l->nqps) {
		char d[96];
		snprintf(d, sizeof(d), "%d queue pairs here, %d at the peer", l->nqps, m->nqps);
		cruxn_vx_fail(c, "queue pair set-up", d, "peer out of step (not a Crux peer?)");
		return CRUX_ERR_REMOTE;
	}
	memset(&remote, 0, sizeof(remote));
	memcpy(remote.gid.raw, m->gid, 16);
	remote.lid = m->lid;
	remote.port = m->port;
	remote.link_layer = m->link_layer;
	remote.mtu = m->mtu;
	c->remote = remote;
	for (int i = 0; i < l->nqps; i++) {
		local.qpn = l->qps[i]->qp_num;
		local.psn = start_psn(local.qpn);
		remote.qpn = m->qpn[i];
		remote.psn = start_psn(m->qpn[i]);
		if (cruxn_vx_qp_connect(&cruxn_vx_state.ibv, l->qps[i], &local, &remote,
					&cruxn_vx_qpcfg, access, &l->cls, l->flow_label[i], err,
					sizeof(err)) != CRUX_OK) {
			cruxn_vx_fail(c, "queue pair set-up", err,
				      "check the GID and the class settings");
			return CRUX_ERR_IO;
		}
		/* The live way to the route's port, where the device supports it. */
		if (l->sport[i] && c->dev->live_sport)
			(void)cruxn_vx_state.ibv.mlx5_udp_sport(l->qps[i], l->sport[i]);
	}
	l->state = VX_LANE_UP;
	c->settled = false;
	return CRUX_OK;
}

/*
 * NCCL's GPUDirect flush: an RDMA READ of 1 byte from the received buffer
 * on a QP connected to itself completes only after the NIC's earlier writes
 * into that memory are visible to the GPU. The QP takes the comm's class.
 */
crux_status_t cruxn_vx_flush_qp(struct vx_comm *c)
{
	const struct cruxn_ibv *v = &cruxn_vx_state.ibv;
	struct cruxn_vx_ep self = c->ep;
	char err[320];

	if (c->flush_qp)
		return CRUX_OK;
	if (!c->flush_mr) {
		c->flush_mr = v->reg_mr(c->dev->pd, &c->flush_buf, sizeof(c->flush_buf),
					IBV_ACCESS_LOCAL_WRITE);
		if (!c->flush_mr) {
			cruxn_vx_fail(c, "flush", "cannot register the flush buffer",
				      "check the locked-memory limit (ulimit -l)");
			return CRUX_ERR_IO;
		}
	}
	c->flush_qp = qp_create(c);
	if (!c->flush_qp) {
		cruxn_vx_fail(c, "flush", "cannot create the loopback queue pair",
			      "device out of resources?");
		return CRUX_ERR_IO;
	}
	self.qpn = c->flush_qp->qp_num;
	self.psn = start_psn(self.qpn);
	if (cruxn_vx_qp_connect(v, c->flush_qp, &self, &self, &cruxn_vx_qpcfg,
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, &c->b.marked, 0,
				err, sizeof(err)) != CRUX_OK) {
		v->destroy_qp(c->flush_qp);
		c->flush_qp = NULL;
		cruxn_vx_fail(c, "flush queue pair set-up", err, "check the GID");
		return CRUX_ERR_IO;
	}
	return CRUX_OK;
}

void cruxn_vx_lane_link(struct vx_comm *c, struct vx_lane *l)
{
	c->settled = false;
	l->next = c->lanes;
	c->lanes = l;
}

struct vx_lane *cruxn_vx_lane_find(struct vx_comm *c, uint32_t id)
{
	if (c->cur && c->cur->id == id)
		return c->cur; /* nearly every completion's */
	for (struct vx_lane *l = c->lanes; l; l = l->next)
		if (l->id == id)
			return l;
	return NULL;
}

static bool lane_matches(const struct vx_lane *l, const struct cruxn_class *cls,
			 const struct cruxn_route *route, bool ib)
{
	if (l->cls.tos != cls->tos || l->cls.sl != cls->sl)
		return false;
	if (ib)
		return true; /* InfiniBand: the LID routes, a route changes nothing */
	for (int i = 0; i < l->nqps; i++)
		if (cruxn_route_port(&l->route, i) != cruxn_route_port(route, i))
			return false;
	return true;
}

/* The live lane that realises the current decision (none: build one). */
static struct vx_lane *lane_matching(struct vx_comm *c, int *nlanes)
{
	struct vx_lane *hit = NULL;
	int n = 0;

	for (struct vx_lane *l = c->lanes; l; l = l->next) {
		if (!hit && l->state != VX_LANE_CLOSING &&
		    lane_matches(l, &c->b.tag.cls, &c->b.tag.route,
				 c->ep.link_layer == IBV_LINK_LAYER_INFINIBAND))
			hit = l;
		n++;
	}
	if (nlanes)
		*nlanes = n;
	return hit;
}

static void lane_close(struct vx_comm *c, struct vx_lane *l);
static struct vx_lane *oldest_parked(struct vx_comm *c, const struct vx_lane *keep, bool ahead,
				     int *count);

enum { REPATH_NO, REPATH_WAIT, REPATH_DONE };

/*
 * A route-only change where the device has the live source-port call: the
 * current lane's QPs take the new ports in place (RTS2RTS, no new QPs, no
 * firmware round of create/modify), once the lane drained so no message is
 * split across two paths. The receiver's QPs (its acknowledgements and CTS
 * writes) keep their path until the next lane.
 */
static int repath(struct vx_comm *c)
{
	struct vx_lane *l = c->cur;
	const struct cruxn_route *r = &c->b.tag.route;
	char peer[80];

	if (!c->b.is_send || !l || l->state != VX_LANE_UP || !c->dev->live_sport ||
	    r->path_id == CRUX_PATH_NONE || r->nports == 0 || l->cls.tos != c->b.tag.cls.tos ||
	    l->cls.sl != c->b.tag.cls.sl)
		return REPATH_NO;
	if (l->outstanding > 0)
		return REPATH_WAIT;
	for (int i = 0; i < l->nqps; i++) {
		uint16_t port = cruxn_route_port(r, i);
		int rc = port ? cruxn_vx_state.ibv.mlx5_udp_sport(l->qps[i], port) : EINVAL;
		if (rc != 0) {
			crux_warn("verbs connection to %s: moving queue pair %u to source port %u "
				  "in place failed (%s): a new lane takes the route",
				  crux_sockaddr_format(&c->b.peer.sa, peer, sizeof(peer)),
				  l->qps[i]->qp_num, port, strerror(rc > 0 ? rc : EIO));
			return REPATH_NO; /* QPs already moved are on the new route's ports anyway
					   */
		}
		l->sport[i] = port;
	}
	l->route = *r;
	l->route_refused = false;
	c->b.route_now = *r;
	c->repaths++;
	c->moved_ns = crux_now_ns();
	return REPATH_DONE;
}

struct vx_lane *cruxn_vx_lane_want(struct vx_comm *c)
{
	struct vx_lane *l;
	struct vx_msg m;
	int n;

	if (cruxn_vx_lanes_settled(c))
		return c->cur;
	l = lane_matching(c, &n);
	if (l)
		return l; /* the current lane, or one built or being built */
	switch (repath(c)) {
	case REPATH_DONE:
		return c->cur;
	case REPATH_WAIT:
		return NULL; /* the current lane drains first: ask again on the next call */
	default:
		break; /* a new lane */
	}
	if (n >= VX_MAX_LANES) {
		/* room for the new lane: the oldest warm one closes */
		struct vx_lane *p = oldest_parked(c, NULL, true, NULL);
		if (p)
			lane_close(c, p);
		return NULL; /* old lanes still closing: ask again on the next call */
	}
	l = cruxn_vx_lane_new(c, c->next_lane, &c->b.tag.cls, &c->b.tag.route);
	if (!l) {
		cruxn_vx_fail(c, "new lane", "cannot create its queue pairs",
			      "device out of resources?");
		return NULL;
	}
	c->next_lane++;
	cruxn_vx_lane_link(c, l);
	cruxn_vx_ep_to_msg(c, l, &m, VX_LANE);
	cruxn_vx_ctrl_send(c, &m);
	return l;
}

/* Sender: tell the receiver lane l is closing and which lane the sender is on. */
static void lane_close(struct vx_comm *c, struct vx_lane *l)
{
	struct vx_msg m;

	l->state = VX_LANE_CLOSING;
	c->settled = false;
	msg_init(c, &m, VX_LANE_CLOSE, l->id);
	m.addr = c->cur->id; /* the lane the sender is on */
	m.parts = l->parts;  /* what the receiver must have counted before the lane goes */
	cruxn_vx_ctrl_send(c, &m);
}

/* Sender: the oldest warm lane (up, not current, not 'keep'; lanes built
 * ahead only if 'ahead'), or NULL. */
static struct vx_lane *oldest_parked(struct vx_comm *c, const struct vx_lane *keep, bool ahead,
				     int *count)
{
	struct vx_lane *old = NULL;
	int n = 0;

	for (struct vx_lane *l = c->lanes; l; l = l->next) {
		if (l->state != VX_LANE_UP || l == c->cur || l == keep || (l->ahead && !ahead))
			continue;
		n++;
		if (!old || l->parked_ns < old->parked_ns)
			old = l;
	}
	if (count)
		*count = n;
	return old;
}

/*
 * Lanes built ahead (CRUX_IB_LANES_AHEAD): one lane per level a decision
 * can name (the open table's levels), on the device's hash, built one at a
 * time once the connection is up and no other lane is being built. A later
 * decision for a level moves by pointer: no queue pair is created or
 * modified at a message boundary (firmware commands of 0.1-1 ms each on
 * mlx5). They are not counted as warm lanes, so they stay up.
 */
static bool lanes_ahead(struct vx_comm *c)
{
	struct cruxn_class cls[CRUX_MAX_LEVELS];
	struct cruxn_route none;
	struct vx_msg m;
	int want = cruxn_vx_qpcfg.lanes_ahead, n, nl = 0;

	if (!want || !c->cur || c->cur->state != VX_LANE_UP)
		return c->cur && c->cur->state != VX_LANE_UP;
	for (struct vx_lane *l = c->lanes; l; l = l->next, nl++)
		if (l->state == VX_LANE_BUILDING)
			return true; /* one at a time */
	if (nl >= VX_MAX_LANES)
		return false;
	n = cruxn_tag_level_classes(cls, CRUX_MAX_LEVELS, want > 0);
	if (want > 0 && n > want)
		n = want;
	memset(&none, 0, sizeof(none));
	none.path_id = CRUX_PATH_NONE;
	for (int i = 0; i < n; i++) {
		struct vx_lane *l;
		for (l = c->lanes; l; l = l->next)
			if (l->state != VX_LANE_CLOSING &&
			    lane_matches(l, &cls[i], &none,
					 c->ep.link_layer == IBV_LINK_LAYER_INFINIBAND))
				break;
		if (l)
			continue;
		l = cruxn_vx_lane_new(c, c->next_lane, &cls[i], &none);
		if (!l)
			return false; /* not fatal: a decision for that level builds it then */
		l->ahead = true;
		c->next_lane++;
		cruxn_vx_lane_link(c, l);
		cruxn_vx_ep_to_msg(c, l, &m, VX_LANE);
		cruxn_vx_ctrl_send(c, &m);
		return true;
	}
	return false;
}

void cruxn_vx_lanes_progress(struct vx_comm *c)
{
	const void *dt = atomic_load_explicit(&cruxn_ctx.dt, memory_order_relaxed);
	struct vx_lane *want, *p;
	int nparked;

	if (cruxn_vx_lanes_settled(c))
		return;
	want = lane_matching(c, NULL);
	/* the decision's lane is up and the current one drained: the next message moves */
	if (want && want != c->cur && want->state == VX_LANE_UP && c->cur->outstanding == 0 &&
	    (!c->moved_ns || crux_now_ns() - c->moved_ns >= cruxn_vx_qpcfg.lane_interval_ns)) {
		struct vx_lane *old = c->cur;
		struct vx_msg m;
		char peer[80];

		c->cur = want;
		c->moved_ns = crux_now_ns();
		c->b.marked = want->cls;
		c->b.route_now = want->route;
		if (want->route_refused) /* what the lane realises: the device's hash */
			c->b.route_now.path_id = CRUX_PATH_NONE, c->b.route_now.nports = 0;
		/*
		 * The old lane stays up (warm): a decision that returns to it moves
		 * back by pointer, no queue pairs built. The receiver's CTS writes
		 * follow the sender (LANE_MOVE); lanes beyond CRUX_IB_WARM_LANES close.
		 */
		old->parked_ns = crux_now_ns();
		msg_init(c, &m, VX_LANE_MOVE, old->id);
		m.addr = want->id;
		cruxn_vx_ctrl_send(c, &m);
		crux_info("verbs connection to %s moved to lane %u (traffic class %d, SL %d, "
			  "%d queue pair(s), first UDP source port %u)",
			  crux_sockaddr_format(&c->b.peer.sa, peer, sizeof(peer)), want->id,
			  want->cls.tos, want->cls.sl, want->nqps, want->sport[0]);
	}
	/* warm lanes (used before, or built for a decision that changed again) beyond the limit
	 * close */
	while ((p = oldest_parked(c, want, false, &nparked)) && nparked > cruxn_vx_qpcfg.warm_lanes)
		lane_close(c, p);
	/* nothing left to do until the decision, a lane or the table changes */
	c->settled = !lanes_ahead(c) && want && want == c->cur && want->state == VX_LANE_UP;
	c->settled_dt = dt;
}

static void lane_unlink_free(struct vx_comm *c, uint32_t id)
{
	for (struct vx_lane **pp = &c->lanes; *pp; pp = &(*pp)->next) {
		if ((*pp)->id == id && *pp != c->cur) {
			struct vx_lane *l = *pp;
			*pp = l->next;
			cruxn_vx_lane_free(l);
			return;
		}
	}
}

/* ---- close -------------------------------------------------------------------- */

bool cruxn_vx_delivered(const struct vx_comm *c, const struct cruxn_req *r)
{
	uint32_t d = c->bye_rrow - vxr_c(r)->row;

	return c->bye && d >= 1 && d <= VX_FIFO &&
	       (c->bye_done[vxr_c(r)->row % VX_FIFO] & (1u << vxr_c(r)->slot));
}

void cruxn_vx_bye(struct vx_comm *c)
{
	struct vx_msg m;
	uint64_t end = crux_now_ns() + 100000000ull;

	if (c->fd < 0 || !c->ready || c->b.peer_closed || atomic_load(&c->b.error))
		return;
	msg_init(c, &m, VX_BYE, 0);
	if (!c->b.is_send) {
		m.addr = c->rrow;
		memcpy(m.done, c->row_done, sizeof(m.done));
	}
	cruxn_vx_ctrl_send(c, &m);
	/* a small message into a socket that is normally empty: bounded at 100 ms */
	while (c->out_count > 0 && !atomic_load(&c->b.error) && crux_now_ns() < end) {
		struct pollfd p = {.fd = c->fd, .events = POLLOUT};
		cruxn_vx_ctrl_progress(c);
		if (c->out_count > 0)
			(void)poll(&p, 1, 10);
	}
}

static void on_bye(struct vx_comm *c, const struct vx_msg *m)
{
	c->bye = true;
	if (c->b.is_send) {
		c->bye_rrow = (uint32_t)m->addr;
		memcpy(c->bye_done, m->done, sizeof(c->bye_done));
	}
	c->b.peer_closed = true;
}

/* ---- control socket --------------------------------------------------------- */

void cruxn_vx_ctrl_send(struct vx_comm *c, const struct vx_msg *m)
{
	if (c->out_count >= VX_OUTQ) {
		cruxn_vx_fail(c, "control socket", "too many lane changes queued",
			      "the peer does not answer");
		return;
	}
	c->outq[(c->out_head + c->out_count) % VX_OUTQ] = *m;
	c->out_count++;
	c->ctrl_quiet = false;
}

static void ring(struct vx_comm *c);

/* Something under way on the control socket: progress reads it on every call. */
static bool ctrl_busy(const struct vx_comm *c)
{
	if (!c->ready || c->out_count > 0 || c->in_off > 0 || c->gone_ns)
		return true;
	/* a lane being built or closed; warm lanes and lanes built ahead wait quietly */
	for (const struct vx_lane *l = c->lanes; l; l = l->next)
		if (l->state != VX_LANE_UP)
			return true;
	return cruxn_vx_bell_ahead(c); /* the peer rang for a message not read yet */
}

static bool msg_valid(const struct vx_comm *c, const struct vx_msg *m)
{
	return m->magic == VX_MAGIC && m->version == VX_VERSION && m->nonce == c->nonce;
}

/* Receiver: the sender asked for a lane (class, flow label) or closed one. */
static void recv_ctrl(struct vx_comm *c, const struct vx_msg *m)
{
	struct cruxn_class cls = {cruxn_vx_fifo_tos(c, m->tos), 0, m->level, m->sl};
	struct cruxn_route none;
	struct vx_lane *l;
	struct vx_msg a;

	memset(&none, 0, sizeof(none));
	none.path_id = CRUX_PATH_NONE;
	if (m->kind == VX_READY) {
		c->ready = true;
	} else if (m->kind == VX_LANE) {
		int n = 0;
		for (l = c->lanes; l; l = l->next)
			n++;
		/* the sender keeps at most VX_MAX_LANES, and ours go first */
		if (n >= VX_MAX_LANES || cruxn_vx_lane_find(c, m->lane) || m->nqps != c->nqps) {
			cruxn_vx_fail(c, "new lane",
				      "too many lanes, a lane number reused or another "
				      "number of queue pairs",
				      "peer out of step (not a Crux peer?)");
			return;
		}
		l = cruxn_vx_lane_new(c, m->lane, &cls, &none);
		if (!l) {
			cruxn_vx_fail(c, "new lane", "cannot create a queue pair",
				      "device out of resources?");
			return;
		}
		for (int i = 0; i < l->nqps; i++)
			l->flow_label[i] = m->flow_label[i]; /* the sender's paths, both ways */
		cruxn_vx_lane_link(c, l);
		if (cruxn_vx_lane_connect(c, l, m) != CRUX_OK ||
		    cruxn_vx_post_recvs(c, l, VX_RECV_POSTED) != CRUX_OK)
			return;
		cruxn_vx_ep_to_msg(c, l, &a, VX_LANE_ACK);
		cruxn_vx_ctrl_send(c, &a);
	} else if (m->kind == VX_LANE_MOVE) {
		/* the sender moved onto lane m->addr, lane m->lane stays warm: CTS follows */
		struct vx_lane *to = cruxn_vx_lane_find(c, (uint32_t)m->addr);
		if (to && to->state == VX_LANE_UP) {
			c->cur = to;
			c->b.marked = to->cls;
		}
	} else if (m->kind == VX_LANE_CLOSE) {
		/*
		 * The sender moved off this lane onto lane m->addr, which is in RTS
		 * at its end: the CTS writes follow it (its class and path).
		 */
		struct vx_lane *to = cruxn_vx_lane_find(c, (uint32_t)m->addr);
		l = cruxn_vx_lane_find(c, m->lane);
		if (to && to->state == VX_LANE_UP && to != l) {
			c->cur = to;
			c->b.marked = to->cls;
		}
		if (l && l != c->cur) {
			/* freed once its CTS writes completed and every part was counted */
			l->state = VX_LANE_CLOSING;
			l->close_parts = m->parts;
			(void)cruxn_vx_cts_fence(c, l);
		}
	}
}

static void send_ctrl(struct vx_comm *c, const struct vx_msg *m)
{
	struct vx_lane *l = cruxn_vx_lane_find(c, m->lane);

	if (m->kind == VX_ACCEPT && !c->ready && l && l->id == 0) {
		struct vx_msg r;
		c->rsizes = m->addr;
		c->rsizes_rkey = m->rkey;
		if (cruxn_vx_lane_connect(c, l, m) != CRUX_OK)
			return;
		msg_init(c, &r, VX_READY, 0);
		cruxn_vx_ctrl_send(c, &r);
		c->ready = true;
	} else if (m->kind == VX_LANE_ACK && l && l->state == VX_LANE_BUILDING)
		(void)cruxn_vx_lane_connect(c, l, m);
	else if (m->kind == VX_LANE_GONE && l && l->state == VX_LANE_CLOSING) {
		lane_unlink_free(c, m->lane);
		c->settled = false; /* room for a lane ahead */
	}
}

void cruxn_vx_ctrl_progress(struct vx_comm *c)
{
	uint32_t sent = c->ctrl_sent;

	while (c->out_count > 0 && !atomic_load(&c->b.error)) {
		int e = cruxn_boot_write_some(c->fd, &c->outq[c->out_head], sizeof(struct vx_msg),
					      &c->out_off);
		if (e) {
			cruxn_vx_fail(c, "control socket", strerror(e), "the peer closed or died");
			return;
		}
		if (c->out_off < sizeof(struct vx_msg))
			break;
		c->out_off = 0;
		if (c->outq[c->out_head].kind >= VX_LANE)
			c->ctrl_sent++;
		c->out_head = (c->out_head + 1) % VX_OUTQ;
		c->out_count--;
	}
	if (c->ctrl_sent != sent)
		ring(c);
	while (!c->b.peer_closed && !atomic_load(&c->b.error)) {
		int e = cruxn_boot_read_some(c->fd, &c->in, sizeof(c->in), &c->in_off);
		if (e == CRUXN_BOOT_EOF) {
			c->b.peer_closed = true;
			break;
		}
		if (e) {
			cruxn_vx_fail(c, "control socket", strerror(e), "the peer closed or died");
			return;
		}
		if (c->in_off < sizeof(c->in))
			break;
		c->in_off = 0;
		if (!msg_valid(c, &c->in)) {
			cruxn_vx_fail(c, "control socket", "malformed message", "not a Crux peer?");
			return;
		}
		if (c->in.kind >= VX_LANE)
			c->ctrl_got++; /* what the peer's bell counts */
		if (c->in.kind == VX_BYE)
			on_bye(c, &c->in);
		else if (c->b.is_send)
			send_ctrl(c, &c->in);
		else
			recv_ctrl(c, &c->in);
	}
	/* receiver: closing lanes whose CTS writes completed go, and the sender hears it */
	if (!c->b.is_send) {
		for (struct vx_lane *l = c->lanes; l; l = l->next) {
			if (l->state == VX_LANE_CLOSING && l->outstanding == 0 &&
			    l->parts == l->close_parts) {
				struct vx_msg g;
				msg_init(c, &g, VX_LANE_GONE, l->id);
				lane_unlink_free(c, l->id);
				cruxn_vx_ctrl_send(c, &g);
				break; /* the list changed */
			}
		}
	}
	/* what can make it busy again goes through here, ctrl_send or an error completion */
	c->ctrl_quiet = !ctrl_busy(c);
}

/* ---- receives (their work request ids are what vx_data.c completes) ---- */

/*
 * A CTS write into the sender's FIFO (sg NULL: an empty one) on lane l's
 * first QP. As NCCL's IB transport, one in VX_FIFO is signaled, so the
 * send queue drains; the others complete silently, and RC completes a
 * QP's work in order, so a signaled completion covers the writes before
 * it. l->outstanding counts the signaled ones; l->cts_unsignaled the
 * writes since the last signaled one, which no completion covers yet.
 */
static crux_status_t ctl_write(struct vx_comm *c, struct vx_lane *l, struct ibv_sge *sg,
			       uint64_t remote, uint32_t rkey, bool signaled)
{
	struct ibv_send_wr wr, *bad = NULL;
	int prc;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.sg_list = sg;
	wr.num_sge = sg ? 1 : 0;
	wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
	wr.wr.rdma.remote_addr = remote;
	wr.wr.rdma.rkey = rkey;
	wr.wr_id = WR_CTS | ((uint64_t)l->id << 8);
	if ((prc = cruxn_ibv_post_send(l->qps[0], &wr, &bad)) != 0) {
		cruxn_vx_fail(c, "posting a control write (CTS, fence or bell)",
			      cruxn_vx_post_err(prc), "send queue full?");
		return CRUX_ERR_REMOTE;
	}
	if (signaled) {
		l->outstanding++;
		l->cts_unsignaled = 0;
	} else {
		l->cts_unsignaled++;
	}
	return CRUX_OK;
}

crux_status_t cruxn_vx_cts_write(struct vx_comm *c, struct vx_lane *l, struct ibv_sge *sg,
				 uint64_t remote, bool signaled)
{
	return ctl_write(c, l, sg, remote, c->rfifo_rkey, signaled);
}

crux_status_t cruxn_vx_cts_fence(struct vx_comm *c, struct vx_lane *l)
{
	if (l->cts_unsignaled == 0)
		return CRUX_OK;
	/* an empty signaled WRITE after them: its completion says they all landed */
	return ctl_write(c, l, NULL, c->rfifo, c->rfifo_rkey, true);
}

/*
 * Ring the peer: our count of control messages written into its bell, by
 * the current lane (signaled: l->outstanding holds a lane move or close
 * until it landed). Before set-up ends the peer reads on every call anyway.
 */
static void ring(struct vx_comm *c)
{
	struct vx_lane *l = c->cur;
	struct ibv_sge sg;

	if (!c->ready || !l || l->state != VX_LANE_UP || atomic_load(&c->b.error))
		return;
	sg.length = sizeof(uint64_t);
	if (c->b.is_send) {
		c->sizes_out_bell = c->ctrl_sent;
		sg.addr = (uint64_t)(uintptr_t)&c->sizes_out_bell;
		sg.lkey = c->sizes_out_mr->lkey;
		(void)ctl_write(c, l, &sg, c->rsizes + sizeof(c->sizes), c->rsizes_rkey, true);
	} else {
		c->cts_bell = c->ctrl_sent;
		sg.addr = (uint64_t)(uintptr_t)&c->cts_bell;
		sg.lkey = c->cts_mr->lkey;
		(void)ctl_write(c, l, &sg, c->rfifo + sizeof(c->fifo), c->rfifo_rkey, true);
	}
}

/* n zero-length receives on the lane's QP q, in chains of up to VX_RECV_BATCH per call. */
crux_status_t cruxn_vx_post_recvs_qp(struct vx_comm *c, struct vx_lane *l, int q, int n)
{
	struct ibv_recv_wr wr[VX_RECV_BATCH], *bad = NULL;
	uint64_t id = WR_RECV | ((uint64_t)l->id << 8) | (uint64_t)q;

	while (n > 0) {
		int k = n < VX_RECV_BATCH ? n : VX_RECV_BATCH, prc;
		memset(wr, 0, sizeof(wr[0]) * (size_t)k);
		for (int i = 0; i < k; i++) {
			wr[i].wr_id = id;
			wr[i].next = i + 1 < k ? &wr[i + 1] : NULL;
		}
		if ((prc = cruxn_ibv_post_recv(l->qps[q], wr, &bad)) != 0) {
			cruxn_vx_fail(c, "posting receives", cruxn_vx_post_err(prc),
				      "queue pair out of receive entries");
			return CRUX_ERR_IO;
		}
		n -= k;
	}
	return CRUX_OK;
}

crux_status_t cruxn_vx_post_recvs(struct vx_comm *c, struct vx_lane *l, int n)
{
	for (int q = 0; q < l->nqps; q++)
		if (cruxn_vx_post_recvs_qp(c, l, q, n) != CRUX_OK)
			return CRUX_ERR_IO;
	return CRUX_OK;
}
