/* SPDX-License-Identifier: Apache-2.0 */
/* The verbs hardware double: see vx_double.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vx_double.h"

struct vxd vxd;

struct vxd_ctx {
	struct ibv_context ctx; /* first: the plugin sees this */
	struct vxd_dev *dev;
};

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
	vxd.open_contexts++;
	return &c->ctx;
}

static int close_device(struct ibv_context *ctx)
{
	vxd.open_contexts--;
	free(ctx);
	return 0;
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
	p->width = 1;   /* 1x */
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
