/* SPDX-License-Identifier: Apache-2.0 */
/* The verbs hardware double: see vx_double.h. */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vx_double.h"

struct vxd vxd;

struct vxd_ctx {
	struct ibv_context ctx; /* first: the plugin sees this */
	struct vxd_dev *dev;
	int async_w;			   /* write end of ctx.async_fd's pipe */
	struct ibv_async_event events[16]; /* raised, not yet read */
	int nevents;
};

static struct vxd_ctx *open_ctx[VXD_MAX_DEVS * 4];

static struct ibv_device *fake_list[VXD_MAX_DEVS + 1];

static struct ibv_device **get_device_list(int *n)
{
	for (int i = 0; i < vxd.ndevs; i++)
		fake_list[i] = (struct ibv_device *)(void *)&vxd.devs[i];
	fake_list[vxd.ndevs] = NULL;
	*n = vxd.ndevs;
	return fake_list;
}

static void free_device_list(struct ibv_device **l)
{
	(void)l;
}

static struct vxd_dev *D(struct ibv_device *d)
{
	return (struct vxd_dev *)(void *)d;
}

static const char *get_device_name(struct ibv_device *d)
{
	return D(d)->name;
}

static __be64 get_device_guid(struct ibv_device *d)
{
	return (__be64)D(d)->guid;
}

static struct ibv_context *open_device(struct ibv_device *d)
{
	struct vxd_ctx *c;

	if (D(d)->refuse_open) {
		errno = EACCES;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	c->dev = D(d);
	{
		int p[2];
		if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
			free(c);
			return NULL;
		}
		c->ctx.async_fd = p[0];
		c->async_w = p[1];
	}
	for (size_t i = 0; i < sizeof(open_ctx) / sizeof(open_ctx[0]); i++)
		if (!open_ctx[i]) {
			open_ctx[i] = c;
			break;
		}
	vxd.open_contexts++;
	return &c->ctx;
}

static int close_device(struct ibv_context *ctx)
{
	struct vxd_ctx *c = (struct vxd_ctx *)(void *)ctx;

	for (size_t i = 0; i < sizeof(open_ctx) / sizeof(open_ctx[0]); i++)
		if (open_ctx[i] == c)
			open_ctx[i] = NULL;
	close(c->async_w);
	close(ctx->async_fd);
	vxd.open_contexts--;
	free(ctx);
	return 0;
}

/* rdma-core's async events: one byte in the pipe per event raised */
static int get_async_event(struct ibv_context *ctx, struct ibv_async_event *e)
{
	struct vxd_ctx *c = (struct vxd_ctx *)(void *)ctx;
	char b;

	if (read(ctx->async_fd, &b, 1) != 1 || c->nevents == 0) {
		errno = EAGAIN;
		return -1;
	}
	*e = c->events[0];
	memmove(&c->events[0], &c->events[1], sizeof(c->events[0]) * (size_t)--c->nevents);
	return 0;
}

static void ack_async_event(struct ibv_async_event *e)
{
	(void)e;
}

static const char *event_type_str(enum ibv_event_type t)
{
	return t == IBV_EVENT_PORT_ERR	     ? "port error"
	       : t == IBV_EVENT_DEVICE_FATAL ? "local catastrophic error"
	       : t == IBV_EVENT_QP_FATAL     ? "local work queue catastrophic error"
					     : "unknown";
}

int vxd_raise_event(const char *dev, enum ibv_event_type type, int port, struct ibv_qp *qp)
{
	for (size_t i = 0; i < sizeof(open_ctx) / sizeof(open_ctx[0]); i++) {
		struct vxd_ctx *c = open_ctx[i];
		if (!c || strcmp(c->dev->name, dev) != 0 || c->nevents >= 16)
			continue;
		memset(&c->events[c->nevents], 0, sizeof(c->events[0]));
		c->events[c->nevents].event_type = type;
		if (qp)
			c->events[c->nevents].element.qp = qp;
		else
			c->events[c->nevents].element.port_num = port;
		c->nevents++;
		if (type == IBV_EVENT_PORT_ERR)
			c->dev->ports[port - 1].state = IBV_PORT_DOWN;
		return write(c->async_w, "e", 1) == 1 ? 0 : -1;
	}
	return -1;
}

static struct vxd_dev *ctxdev(struct ibv_context *ctx)
{
	return ((struct vxd_ctx *)(void *)ctx)->dev;
}

static int query_device(struct ibv_context *ctx, struct ibv_device_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->phys_port_cnt = (uint8_t)ctxdev(ctx)->nports;
	a->max_qp_wr = 4096;
	a->max_cqe = 65536;
	a->sys_image_guid = htobe64(ctxdev(ctx)->sys_image_guid);
	return 0;
}

static struct vxd_port *portof(struct ibv_context *ctx, uint32_t port)
{
	struct vxd_dev *d = ctxdev(ctx);
	return port >= 1 && (int)port <= d->nports ? &d->ports[port - 1] : NULL;
}

static int query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *a)
{
	struct vxd_port *p = portof(ctx, port);

	if (!p)
		return EINVAL;
	/* the compat symbol fills only the old prefix of the struct */
	memset(a, 0, offsetof(struct ibv_port_attr, flags));
	a->state = p->state;
	a->link_layer = p->link_layer;
	a->active_mtu = p->mtu;
	a->lid = p->lid;
	a->active_speed = p->speed;
	a->active_width = p->width;
	a->gid_tbl_len = p->ngids;
	a->max_msg_sz = p->max_msg_sz;
	return 0;
}

static int query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
	struct vxd_port *p = portof(ctx, port);

	if (!p || index < 0 || index >= p->ngids)
		return EINVAL;
	*gid = p->gids[index];
	return 0;
}

static int query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
			struct ibv_gid_entry *e, uint32_t flags, size_t size)
{
	struct vxd_port *p = portof(ctx, port);
	(void)flags;

	if (!p || index >= (uint32_t)p->ngids || size < sizeof(*e) || p->types[index] < 0)
		return EINVAL;
	memset(e, 0, sizeof(*e));
	e->gid = p->gids[index];
	e->gid_index = index;
	e->port_num = port;
	e->gid_type = (uint32_t)p->types[index];
	return 0;
}

static struct ibv_pd *alloc_pd(struct ibv_context *ctx)
{
	struct ibv_pd *pd = calloc(1, sizeof(*pd));
	pd->context = ctx;
	vxd.pds++;
	return pd;
}

static int dealloc_pd(struct ibv_pd *pd)
{
	vxd.pds--;
	free(pd);
	return 0;
}

static const char *wc_status_str(enum ibv_wc_status s)
{
	return s == IBV_WC_SUCCESS ? "success" : "error";
}

void vxd_reset(struct cruxn_ibv *v)
{
	memset(&vxd, 0, sizeof(vxd));
	memset(v, 0, sizeof(*v));
	v->get_device_list = get_device_list;
	v->free_device_list = free_device_list;
	v->get_device_name = get_device_name;
	v->get_device_guid = get_device_guid;
	v->open_device = open_device;
	v->close_device = close_device;
	v->query_device = query_device;
	v->query_port = query_port;
	v->query_gid = query_gid;
	v->query_gid_ex = query_gid_ex;
	v->alloc_pd = alloc_pd;
	v->dealloc_pd = dealloc_pd;
	v->wc_status_str = wc_status_str;
	v->get_async_event = get_async_event;
	v->ack_async_event = ack_async_event;
	v->event_type_str = event_type_str;
}

struct vxd_dev *vxd_add_roce(const char *name, uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
	struct vxd_dev *dev = &vxd.devs[vxd.ndevs++];
	struct vxd_port *p = &dev->ports[0];

	memset(dev, 0, sizeof(*dev));
	snprintf(dev->name, sizeof(dev->name), "%s", name);
	dev->guid = 0x1122334455667700ull + (uint64_t)vxd.ndevs;
	dev->nports = 1;
	p->state = IBV_PORT_ACTIVE;
	p->link_layer = IBV_LINK_LAYER_ETHERNET;
	p->mtu = IBV_MTU_4096;
	p->speed = 128; /* NDR */
	p->width = 1;	/* 1x */
	p->ngids = 3;
	p->gids[0].raw[0] = 0xfe;
	p->gids[0].raw[1] = 0x80;
	p->gids[0].raw[15] = 1;
	for (int i = 1; i <= 2; i++) {
		p->gids[i].raw[10] = 0xff;
		p->gids[i].raw[11] = 0xff;
		p->gids[i].raw[12] = a;
		p->gids[i].raw[13] = b;
		p->gids[i].raw[14] = c;
		p->gids[i].raw[15] = d;
	}
	p->types[0] = IBV_GID_TYPE_ROCE_V1;
	p->types[1] = IBV_GID_TYPE_ROCE_V1;
	p->types[2] = IBV_GID_TYPE_ROCE_V2;
	return dev;
}

/* ---- RC semantics in one process: CQs, QPs, MRs, RDMA WRITE (WITH_IMM) ---- */

#define VXD_CQ_MAX 8192
#define VXD_RQ_MAX 4096

struct vxd_cq {
	struct ibv_cq cq;
	struct ibv_wc wc[VXD_CQ_MAX];
	int head, count;
};

struct vxd_qp {
	struct ibv_qp qp;
	struct ibv_qp_attr rtr; /* attributes programmed at RTR */
	uint64_t rq[VXD_RQ_MAX];
	int rq_head, rq_count;
	uint64_t bytes;	 /* moved by this QP's RDMA WRITEs */
	unsigned access; /* what the remote may do (INIT) */
	struct vxd_qp *next;
};

struct vxd_mr {
	struct ibv_mr mr;
	int access;
	struct vxd_mr *next;
};

static struct vxd_qp *qps;
static struct vxd_mr *mrs;
static uint32_t next_num = 100;

static void cq_push(struct ibv_cq *cq, const struct ibv_wc *wc)
{
	struct vxd_cq *c = (struct vxd_cq *)(void *)cq;
	if (c->count < VXD_CQ_MAX) {
		c->wc[(c->head + c->count) % VXD_CQ_MAX] = *wc;
		c->count++;
	}
}

/* Receive completions written late (vxd.hold_recv): the responder's CQE after its ACK. */
#define VXD_HELD_MAX 256
static struct {
	struct ibv_cq *cq;
	struct ibv_wc wc;
} held[VXD_HELD_MAX];
static int nheld;

void vxd_release_held(void)
{
	for (int i = 0; i < nheld; i++)
		cq_push(held[i].cq, &held[i].wc);
	nheld = 0;
}

/* As mlx5's destroy_qp (__mlx5_cq_clean): the QP's completions not yet polled vanish. */
static void cq_purge(struct ibv_cq *cq, uint32_t qp_num)
{
	struct vxd_cq *c = (struct vxd_cq *)(void *)cq;
	int keep = 0;

	for (int i = 0; i < c->count; i++) {
		const struct ibv_wc *w = &c->wc[(c->head + i) % VXD_CQ_MAX];
		if (w->qp_num != qp_num)
			c->wc[(c->head + keep++) % VXD_CQ_MAX] = *w;
	}
	vxd.purged += c->count - keep;
	c->count = keep;
}

/*
 * Torn visibility (vxd.torn_chunk): a plain RDMA WRITE lands in aligned
 * chunks of that many bytes (64: cache lines; 32: what NCCL's alignment
 * assert guards against under relaxed ordering), in random order, about
 * half of them only a few double calls later.
 */
#define VXD_TORN_MAX 4096
static struct {
	char *dst;
	unsigned char bytes[64];
	size_t len;
	int countdown;
} torn[VXD_TORN_MAX];
static int ntorn;
static unsigned torn_seed = 12345;

static unsigned torn_rand(void)
{
	torn_seed = torn_seed * 1103515245u + 12345u;
	return torn_seed >> 16;
}

static void torn_apply(int i)
{
	memcpy(torn[i].dst, torn[i].bytes, torn[i].len);
	torn[i] = torn[--ntorn];
}

/* Deferred chunks whose time came (or all of them) land. */
static void torn_tick(bool all)
{
	for (int i = 0; i < ntorn;) {
		if (all || --torn[i].countdown <= 0)
			torn_apply(i);
		else
			i++;
	}
}

/* A later write over a deferred chunk lands after it, not under it. */
static void torn_flush_range(const char *dst, size_t len)
{
	for (int i = 0; i < ntorn;) {
		if (torn[i].dst < dst + len && dst < torn[i].dst + torn[i].len)
			torn_apply(i);
		else
			i++;
	}
}

static void torn_write(char *dst, const unsigned char *src, size_t len)
{
	size_t k = vxd.torn_chunk, nch = 0;
	struct {
		size_t off, len;
	} ch[256];

	torn_flush_range(dst, len);
	for (size_t off = 0; off < len;) {
		size_t room = k - ((uintptr_t)(dst + off) % k),
		       l = len - off < room ? len - off : room;
		if (nch == 256) { /* longer than the model needs: the rest lands at once */
			memcpy(dst + off, src + off, len - off);
			break;
		}
		ch[nch].off = off;
		ch[nch++].len = l;
		off += l;
	}
	for (size_t i = nch; i > 1; i--) { /* random order */
		size_t j = torn_rand() % i, t;
		t = ch[i - 1].off, ch[i - 1].off = ch[j].off, ch[j].off = t;
		t = ch[i - 1].len, ch[i - 1].len = ch[j].len, ch[j].len = t;
	}
	for (size_t i = 0; i < nch; i++) {
		if (nch > 1 && (torn_rand() & 1) && ntorn < VXD_TORN_MAX) {
			torn[ntorn].dst = dst + ch[i].off;
			memcpy(torn[ntorn].bytes, src + ch[i].off, ch[i].len);
			torn[ntorn].len = ch[i].len;
			torn[ntorn].countdown = 1 + (int)(torn_rand() % 4);
			ntorn++;
		} else {
			memcpy(dst + ch[i].off, src + ch[i].off, ch[i].len);
		}
	}
	vxd.torn_writes++;
}

static int poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	struct vxd_cq *c = (struct vxd_cq *)(void *)cq;
	int k = 0;

	torn_tick(false);
	while (k < n && c->count > 0) {
		wc[k++] = c->wc[c->head];
		c->head = (c->head + 1) % VXD_CQ_MAX;
		c->count--;
	}
	return k;
}

static struct ibv_cq *create_cq(struct ibv_context *ctx, int cqe, void *cc,
				struct ibv_comp_channel *ch, int vec)
{
	struct vxd_cq *c;
	(void)cqe;
	(void)cc;
	(void)ch;
	(void)vec;
	c = calloc(1, sizeof(*c));
	c->cq.context = ctx;
	ctx->ops.poll_cq = poll_cq;
	vxd.cqs++;
	return &c->cq;
}

static int destroy_cq(struct ibv_cq *cq)
{
	vxd.cqs--;
	free(cq);
	return 0;
}

static struct vxd_qp *qp_by_num(uint32_t num)
{
	for (struct vxd_qp *q = qps; q; q = q->next)
		if (q->qp.qp_num == num)
			return q;
	return NULL;
}

static struct vxd_mr *mr_by_rkey(uint32_t rkey)
{
	for (struct vxd_mr *m = mrs; m; m = m->next)
		if (m->mr.rkey == rkey)
			return m;
	return NULL;
}

/* Sends in flight (vxd.hold_sends): executed by vxd_release_sends, lost with their QP. */
#define VXD_HELD_SENDS 64
static struct {
	struct ibv_qp *qp;
	struct ibv_send_wr wr;
	struct ibv_sge sg[2];
} held_sends[VXD_HELD_SENDS];
static int nheld_sends;

static bool hold_send(struct ibv_qp *qp, const struct ibv_send_wr *wr)
{
	if (nheld_sends >= VXD_HELD_SENDS || wr->num_sge > 2)
		return false;
	held_sends[nheld_sends].qp = qp;
	held_sends[nheld_sends].wr = *wr;
	held_sends[nheld_sends].wr.next = NULL;
	held_sends[nheld_sends].wr.sg_list = held_sends[nheld_sends].sg;
	for (int i = 0; i < wr->num_sge; i++)
		held_sends[nheld_sends].sg[i] = wr->sg_list[i];
	nheld_sends++;
	return true;
}

static int post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);

void vxd_release_sends(void)
{
	bool hold = vxd.hold_sends;
	struct ibv_send_wr *bad = NULL;

	vxd.hold_sends = false;
	for (int i = 0; i < nheld_sends; i++)
		(void)post_send(held_sends[i].qp, &held_sends[i].wr, &bad);
	nheld_sends = 0;
	vxd.hold_sends = hold;
}

static int post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct vxd_qp *me = (struct vxd_qp *)(void *)qp;

	torn_tick(false);
	for (; wr; wr = wr->next) {
		if (vxd.hold_sends && qp->state == IBV_QPS_RTS) {
			if (!hold_send(qp, wr)) {
				*bad = wr;
				return ENOMEM;
			}
			continue;
		}
		struct vxd_qp *peer = qp_by_num(me->rtr.dest_qp_num);
		struct vxd_mr *m = mr_by_rkey(wr->wr.rdma.rkey);
		size_t len = 0;
		struct ibv_wc wc;

		if (qp->state != IBV_QPS_RTS) {
			*bad = wr;
			return EINVAL;
		}
		for (int i = 0; i < wr->num_sge; i++)
			len += wr->sg_list[i].length;
		memset(&wc, 0, sizeof(wc));
		wc.wr_id = wr->wr_id;
		wc.qp_num = qp->qp_num;
		wc.opcode = IBV_WC_RDMA_WRITE;
		if (!peer || peer->qp.state < IBV_QPS_RTR) {
			wc.status = IBV_WC_RETRY_EXC_ERR; /* nobody answers */
		} else if (wr->opcode == IBV_WR_RDMA_READ) {
			wc.opcode = IBV_WC_RDMA_READ;
			if (!m || !(m->access & IBV_ACCESS_REMOTE_READ) ||
			    !(peer->access & IBV_ACCESS_REMOTE_READ) ||
			    wr->wr.rdma.remote_addr < (uintptr_t)m->mr.addr ||
			    wr->wr.rdma.remote_addr + len > (uintptr_t)m->mr.addr + m->mr.length) {
				wc.status = IBV_WC_REM_ACCESS_ERR;
			} else {
				size_t off = 0;
				for (int i = 0; i < wr->num_sge; i++) {
					memcpy((void *)(uintptr_t)wr->sg_list[i].addr,
					       (char *)(uintptr_t)wr->wr.rdma.remote_addr + off,
					       wr->sg_list[i].length);
					off += wr->sg_list[i].length;
				}
				vxd.reads++;
				vxd.last_read_addr = wr->wr.rdma.remote_addr;
			}
		} else if (len > 0 &&
			   (!m || !(m->access & IBV_ACCESS_REMOTE_WRITE) ||
			    wr->wr.rdma.remote_addr < (uintptr_t)m->mr.addr ||
			    wr->wr.rdma.remote_addr + len > (uintptr_t)m->mr.addr + m->mr.length)) {
			wc.status = IBV_WC_REM_ACCESS_ERR;
		} else if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM && peer->rq_count == 0) {
			wc.status = IBV_WC_RNR_RETRY_EXC_ERR;
		} else if (vxd.torn_chunk && wr->opcode == IBV_WR_RDMA_WRITE && len <= 4096) {
			unsigned char tmp[4096];
			size_t off = 0;
			for (int i = 0; i < wr->num_sge; i++) {
				memcpy(tmp + off, (void *)(uintptr_t)wr->sg_list[i].addr,
				       wr->sg_list[i].length);
				off += wr->sg_list[i].length;
			}
			torn_write((char *)(uintptr_t)wr->wr.rdma.remote_addr, tmp, len);
			vxd.bytes += len;
			me->bytes += len;
		} else {
			size_t off = 0;
			/* a WRITE WITH IMMEDIATE: its data is visible when its completion is */
			torn_flush_range((char *)(uintptr_t)wr->wr.rdma.remote_addr, len);
			for (int i = 0; i < wr->num_sge; i++) {
				memcpy((char *)(uintptr_t)wr->wr.rdma.remote_addr + off,
				       (void *)(uintptr_t)wr->sg_list[i].addr,
				       wr->sg_list[i].length);
				off += wr->sg_list[i].length;
			}
			vxd.bytes += len;
			me->bytes += len;
			if (wr->opcode == IBV_WR_RDMA_WRITE && len > 1024)
				vxd.data_writes++;
			if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM && len == 0)
				vxd.empty_imm_writes++;
			if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
				struct ibv_wc rc;
				memset(&rc, 0, sizeof(rc));
				rc.wr_id = peer->rq[peer->rq_head];
				peer->rq_head = (peer->rq_head + 1) % VXD_RQ_MAX;
				peer->rq_count--;
				rc.status = IBV_WC_SUCCESS;
				rc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
				rc.wc_flags = IBV_WC_WITH_IMM;
				rc.imm_data = wr->imm_data;
				rc.byte_len = (uint32_t)len;
				rc.qp_num = peer->qp.qp_num;
				if (vxd.hold_recv && nheld < VXD_HELD_MAX) {
					held[nheld].cq = peer->qp.recv_cq;
					held[nheld++].wc = rc;
				} else {
					cq_push(peer->qp.recv_cq, &rc);
				}
			}
		}
		/* the data landed but the acknowledgement is lost (the responder closed) */
		if (wc.status == IBV_WC_SUCCESS && vxd.lose_ack &&
		    (wr->send_flags & IBV_SEND_SIGNALED)) {
			vxd.lose_ack = false;
			wc.status = IBV_WC_RETRY_EXC_ERR;
		}
		if (wc.status != IBV_WC_SUCCESS || (wr->send_flags & IBV_SEND_SIGNALED))
			cq_push(qp->send_cq, &wc);
		if (wc.status != IBV_WC_SUCCESS)
			qp->state = IBV_QPS_ERR;
	}
	return 0;
}

static int post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct vxd_qp *me = (struct vxd_qp *)(void *)qp;

	for (; wr; wr = wr->next) {
		if (me->rq_count >= VXD_RQ_MAX || qp->state == IBV_QPS_RESET) {
			*bad = wr;
			return ENOMEM;
		}
		me->rq[(me->rq_head + me->rq_count) % VXD_RQ_MAX] = wr->wr_id;
		me->rq_count++;
	}
	return 0;
}

static struct ibv_qp *create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
	struct vxd_qp *q = calloc(1, sizeof(*q));

	q->qp.context = pd->context;
	q->qp.pd = pd;
	q->qp.send_cq = ia->send_cq;
	q->qp.recv_cq = ia->recv_cq;
	q->qp.qp_type = ia->qp_type;
	q->qp.qp_context = ia->qp_context;
	q->qp.qp_num = next_num++;
	q->qp.state = IBV_QPS_RESET;
	pd->context->ops.post_send = post_send;
	pd->context->ops.post_recv = post_recv;
	q->next = qps;
	qps = q;
	vxd.qps++;
	return &q->qp;
}

static int modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	struct vxd_qp *q = (struct vxd_qp *)(void *)qp;
	enum ibv_qp_state cur = qp->state;

	if (!(mask & IBV_QP_STATE))
		return EINVAL;
	if (a->qp_state == IBV_QPS_INIT && cur != IBV_QPS_RESET && cur != IBV_QPS_INIT)
		return EINVAL;
	if (a->qp_state == IBV_QPS_RTR && (cur != IBV_QPS_INIT || !(mask & IBV_QP_AV)))
		return EINVAL;
	/* kernel qp_state_table: no address vector (class, path) change in RTS */
	if (a->qp_state == IBV_QPS_RTS && ((cur != IBV_QPS_RTR && cur != IBV_QPS_RTS) ||
					   (cur == IBV_QPS_RTS && (mask & IBV_QP_AV))))
		return EINVAL;
	/* the kernel resolves the source GID at RTR: an index without a GID is refused */
	if (a->qp_state == IBV_QPS_RTR && a->ah_attr.is_global) {
		struct vxd_port *p = portof(qp->context, a->ah_attr.port_num);
		static const uint8_t zero[16];
		if (!p || a->ah_attr.grh.sgid_index >= p->ngids ||
		    memcmp(p->gids[a->ah_attr.grh.sgid_index].raw, zero, 16) == 0)
			return EINVAL;
	}
	if (a->qp_state == IBV_QPS_RTR)
		q->rtr = *a;
	if (a->qp_state == IBV_QPS_INIT && (mask & IBV_QP_ACCESS_FLAGS))
		q->access = a->qp_access_flags;
	qp->state = a->qp_state;
	return 0;
}

static int destroy_qp(struct ibv_qp *qp)
{
	for (struct vxd_qp **pp = &qps; *pp; pp = &(*pp)->next) {
		if (&(*pp)->qp == qp) {
			struct vxd_qp *q = *pp;
			int keep = 0;
			*pp = q->next;
			cq_purge(qp->send_cq, qp->qp_num);
			if (qp->recv_cq != qp->send_cq)
				cq_purge(qp->recv_cq, qp->qp_num);
			for (int i = 0; i < nheld; i++)
				if (held[i].wc.qp_num != qp->qp_num)
					held[keep++] = held[i];
			vxd.purged += nheld - keep;
			nheld = keep;
			keep = 0;
			for (int i = 0; i < nheld_sends; i++)
				if (held_sends[i].qp != qp)
					held_sends[keep++] = held_sends[i];
			vxd.dropped_sends += nheld_sends - keep;
			nheld_sends = keep;
			free(q);
			vxd.qps--;
			return 0;
		}
	}
	return EINVAL;
}

static struct ibv_mr *reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	struct vxd_mr *m;

	if (vxd.refuse_mr) {
		errno = ENOMEM; /* what the kernel says past the locked-memory limit */
		return NULL;
	}
	m = calloc(1, sizeof(*m));

	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = len;
	m->mr.lkey = next_num++;
	m->mr.rkey = next_num++;
	m->access = access;
	m->next = mrs;
	mrs = m;
	vxd.mrs++;
	return &m->mr;
}

static struct ibv_mr *reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
				   unsigned int access)
{
	if (iova != (uint64_t)(uintptr_t)addr) {
		errno = EINVAL; /* the plugin registers at the buffer's own address */
		return NULL;
	}
	return reg_mr(pd, addr, len, (int)access);
}

int vxd_mr_access(const void *addr)
{
	for (struct vxd_mr *m = mrs; m; m = m->next)
		if (m->mr.addr == addr)
			return m->access;
	return -1;
}

static int dereg_mr(struct ibv_mr *mr)
{
	for (struct vxd_mr **pp = &mrs; *pp; pp = &(*pp)->next) {
		if (&(*pp)->mr == mr) {
			struct vxd_mr *m = *pp;
			*pp = m->next;
			free(m);
			vxd.mrs--;
			return 0;
		}
	}
	return EINVAL;
}

uint8_t vxd_qp_tc(uint32_t qpn)
{
	struct vxd_qp *q = qp_by_num(qpn);
	return q ? q->rtr.ah_attr.grh.traffic_class : 0;
}

int vxd_qp_sgid_index(uint32_t qpn)
{
	struct vxd_qp *q = qp_by_num(qpn);
	return q ? q->rtr.ah_attr.grh.sgid_index : -1;
}

uint32_t vxd_qp_flow_label(uint32_t qpn)
{
	struct vxd_qp *q = qp_by_num(qpn);
	return q ? q->rtr.ah_attr.grh.flow_label : 0;
}

uint64_t vxd_qp_bytes(uint32_t qpn)
{
	struct vxd_qp *q = qp_by_num(qpn);
	return q ? q->bytes : 0;
}

void vxd_settle(void)
{
	torn_tick(true);
}

void vxd_enable_rc(struct cruxn_ibv *v)
{
	nheld = 0;
	ntorn = 0;
	v->create_cq = create_cq;
	v->destroy_cq = destroy_cq;
	v->create_qp = create_qp;
	v->modify_qp = modify_qp;
	v->destroy_qp = destroy_qp;
	v->reg_mr = reg_mr;
	v->reg_mr_iova2 = reg_mr_iova2;
	v->dereg_mr = dereg_mr;
}

int vxd_open_lo(struct cruxn_vx *out)
{
	struct cruxn_ibv v;
	struct cruxn_gid_rules r;
	char err[256];

	vxd_reset(&v);
	vxd_enable_rc(&v);
	vxd_add_roce("srxe_lo", 127, 0, 0, 1);
	memset(&r, 0, sizeof(r));
	r.index = -1;
	r.family = CRUXN_GID_V4;
	r.range_bits = -1;
	r.roce_version = 2;
	return cruxn_vx_open(&v, "", &r, out, err, sizeof(err)) == CRUX_OK ? 0 : -1;
}
