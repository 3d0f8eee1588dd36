/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Opening the RDMA devices the verbs transport uses: every ACTIVE port of
 * the devices NCCL_IB_HCA (CRUX_IB_HCA first) admits, each with a protection
 * domain and the GID NCCL's rules choose.
 */
#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crux/log.h"
#include "vx.h"

int cruxn_vx_port_speed(uint8_t active_speed, uint8_t active_width)
{
	/* SDR DDR QDR FDR10 FDR EDR HDR NDR XDR; widths 1x 4x 8x 12x 2x */
	static const int speeds[] = {2500, 5000, 10000, 10000, 14000, 25000, 50000, 100000, 200000};
	static const int widths[] = {1, 4, 8, 12, 2};
	int s = 0, w = 0;

	while (s < 8 && !(active_speed & (1u << s)))
		s++;
	while (w < 4 && !(active_width & (1u << w)))
		w++;
	return speeds[s] * widths[w];
}

/* The GID's type from sysfs when _ibv_query_gid_ex is missing; -1 unknown. */
static int gid_type_sysfs(const char *dev, int port, int index)
{
	char path[256], buf[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d", dev,
		 port, index);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	if (strncmp(buf, "RoCE v2", 7) == 0)
		return IBV_GID_TYPE_ROCE_V2;
	if (strncmp(buf, "IB/RoCE v1", 10) == 0)
		return IBV_GID_TYPE_ROCE_V1;
	return -1;
}

/* The GID of d's port by 'rules', over the port's whole GID table (any length). */
static crux_status_t choose_gid(const struct cruxn_ibv *v, const struct cruxn_vx_dev *d,
				int tbl_len, const struct cruxn_gid_rules *rules,
				struct cruxn_vx_ep *ep)
{
	struct cruxn_gid_cand *c;
	int n = 0, idx;
	crux_status_t st = CRUX_ERR_NOENT;

	if (tbl_len <= 0)
		return CRUX_ERR_NOENT;
	c = calloc((size_t)tbl_len, sizeof(*c));
	if (!c)
		return CRUX_ERR_NOMEM;
	for (int i = 0; i < tbl_len; i++) {
		struct ibv_gid_entry e;
		if (v->query_gid(d->ctx, ep->port, i, &c[n].gid) != 0)
			continue;
		c[n].index = i;
		c[n].type = -1;
		if (v->query_gid_ex &&
		    v->query_gid_ex(d->ctx, ep->port, (uint32_t)i, &e, 0, sizeof(e)) == 0)
			c[n].type = (int)e.gid_type;
		else
			c[n].type = gid_type_sysfs(d->name, ep->port, i);
		n++;
	}
	if (cruxn_gid_choose(c, n, rules, &idx) == CRUX_OK) {
		for (int i = 0; i < n; i++)
			if (c[i].index == idx)
				ep->gid = c[i].gid;
		ep->gid_index = idx;
		st = CRUX_OK;
	}
	free(c);
	return st;
}

crux_status_t cruxn_vx_ep_refresh(const struct cruxn_vx *vx, const struct cruxn_vx_dev *d,
				  struct cruxn_vx_ep *ep, char *why, size_t whylen)
{
	struct ibv_port_attr pa;

	*ep = d->ep;
	if (atomic_load(&d->dead)) {
		pthread_mutex_lock((pthread_mutex_t *)&vx->async_lock);
		snprintf(why, whylen, "%s", d->dead_why);
		pthread_mutex_unlock((pthread_mutex_t *)&vx->async_lock);
		return CRUX_ERR_NOENT;
	}
	memset(&pa, 0, sizeof(pa));
	if (vx->ibv.query_port(d->ctx, d->ep.port, &pa) != 0) {
		snprintf(why, whylen, "%s port %u: query failed", d->name, d->ep.port);
		return CRUX_ERR_IO;
	}
	if (pa.state != IBV_PORT_ACTIVE) {
		snprintf(why, whylen, "%s port %u is not ACTIVE", d->name, d->ep.port);
		return CRUX_ERR_NOENT;
	}
	ep->mtu = (uint8_t)pa.active_mtu;
	ep->lid = pa.lid;
	if (ep->link_layer == IBV_LINK_LAYER_ETHERNET &&
	    choose_gid(&vx->ibv, d, pa.gid_tbl_len, &vx->rules, ep) != CRUX_OK) {
		snprintf(why, whylen,
			 "%s port %u: no GID matches NCCL_IB_GID_INDEX / NCCL_IB_ADDR_FAMILY / "
			 "NCCL_IB_ADDR_RANGE any more (an address or VLAN changed?)",
			 d->name, d->ep.port);
		return CRUX_ERR_NOENT;
	}
	return CRUX_OK;
}

static void dev_close(const struct cruxn_ibv *v, struct cruxn_vx_dev *d)
{
	if (d->pd)
		v->dealloc_pd(d->pd);
	if (d->ctx)
		v->close_device(d->ctx);
	free(d->pci_path);
	memset(d, 0, sizeof(*d));
}

/* Open port 'port' of 'dev' into d; 'why' says why not. */
static crux_status_t port_open(const struct cruxn_ibv *v, struct ibv_device *dev, int port,
			       const struct ibv_device_attr *da,
			       const struct cruxn_gid_rules *rules, struct cruxn_vx_dev *d,
			       char *why, size_t whylen)
{
	struct ibv_port_attr pa;
	char path[PATH_MAX];

	memset(&pa, 0, sizeof(pa));
	if (v->query_port(d->ctx, (uint8_t)port, &pa) != 0) {
		snprintf(why, whylen, "port %d: query failed", port);
		return CRUX_ERR_IO;
	}
	if (pa.state != IBV_PORT_ACTIVE) {
		snprintf(why, whylen, "port %d: not ACTIVE", port);
		return CRUX_ERR_NOENT;
	}
	d->ep.port = (uint8_t)port;
	d->ep.link_layer = pa.link_layer == IBV_LINK_LAYER_INFINIBAND ? IBV_LINK_LAYER_INFINIBAND
								      : IBV_LINK_LAYER_ETHERNET;
	d->ep.mtu = (uint8_t)pa.active_mtu;
	d->ep.lid = pa.lid;
	d->ep.gid_index = -1;
	if (d->ep.link_layer == IBV_LINK_LAYER_ETHERNET &&
	    choose_gid(v, d, pa.gid_tbl_len, rules, &d->ep) != CRUX_OK) {
		snprintf(why, whylen,
			 "port %d: no GID matches NCCL_IB_GID_INDEX / NCCL_IB_ADDR_FAMILY / "
			 "NCCL_IB_ADDR_RANGE",
			 port);
		return CRUX_ERR_NOENT;
	}
	/* NIC identity as NCCL: the system image GUID is one per NIC chip (node GUID without it) */
	d->guid = da->sys_image_guid ? be64toh(da->sys_image_guid) : v->get_device_guid(dev);
	d->speed_mbps = cruxn_vx_port_speed(pa.active_speed, pa.active_width);
	d->max_qp_wr = da->max_qp_wr;
	d->max_cqe = da->max_cqe;
	d->max_msg_sz = pa.max_msg_sz;
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device", d->name);
	d->pci_path = realpath(path, NULL);
	cruxn_vx_pci_merge(d->pci_path);
	return CRUX_OK;
}

void cruxn_vx_pci_merge(char *path)
{
	size_t n = path ? strlen(path) : 0;

	/* ".../0000:17:00.1" -> ".../0000:17:00.0": the functions of one NIC are one device */
	if (n >= 2 && path[n - 2] == '.' && path[n - 1] >= '0' && path[n - 1] <= '7')
		path[n - 1] = '0';
}

crux_status_t cruxn_vx_open(const struct cruxn_ibv *v, const char *hca,
			    const struct cruxn_gid_rules *rules, struct cruxn_vx *out, char *err,
			    size_t errlen)
{
	struct ibv_device **list;
	int n = 0;
	size_t off = 0;

	memset(out, 0, sizeof(*out));
	out->ibv = *v;
	out->rules = *rules; /* each connection reads the GID again by them */
	list = v->get_device_list(&n);
	if (!list || n == 0) {
		if (list)
			v->free_device_list(list);
		snprintf(err, errlen, "no RDMA device (%s)",
			 errno ? strerror(errno) : "the verbs library lists none");
		return CRUX_ERR_NOENT;
	}
	err[0] = '\0';
	for (int i = 0; i < n && out->ndevs < CRUXN_MAX_DEVS; i++) {
		const char *name = v->get_device_name(list[i]);
		struct ibv_context *ctx = v->open_device(list[i]);
		struct ibv_device_attr da;

		if (!ctx) {
			off += (size_t)snprintf(err + off, off < errlen ? errlen - off : 0,
						"%s%s: cannot open", off ? "; " : "", name);
			continue;
		}
		if (v->query_device(ctx, &da) != 0) {
			v->close_device(ctx);
			continue;
		}
		for (int port = 1; port <= da.phys_port_cnt && out->ndevs < CRUXN_MAX_DEVS;
		     port++) {
			struct cruxn_vx_dev *d = &out->devs[out->ndevs];
			char why[160];

			/* each open port owns a context: the next port opens its own */
			if (!ctx && !(ctx = v->open_device(list[i])))
				break;
			if (!cruxn_hca_match(hca, name, port)) {
				snprintf(why, sizeof(why),
					 "port %d: not in NCCL_IB_HCA/CRUX_IB_HCA", port);
			} else {
				snprintf(d->name, sizeof(d->name), "%s", name);
				d->ctx = ctx;
				if (port_open(v, list[i], port, &da, rules, d, why, sizeof(why)) ==
				    CRUX_OK) {
					d->pd = v->alloc_pd(ctx);
					if (d->pd) {
						out->ndevs++;
						ctx = NULL; /* owned by this port now */
						continue;
					}
					snprintf(why, sizeof(why), "port %d: no protection domain",
						 port);
				}
				d->ctx = NULL;
				free(d->pci_path);
				memset(d, 0, sizeof(*d));
			}
			off += (size_t)snprintf(err + off, off < errlen ? errlen - off : 0,
						"%s%s %s", off ? "; " : "", name, why);
		}
		if (ctx)
			v->close_device(ctx);
	}
	v->free_device_list(list);
	if (out->ndevs == 0)
		return CRUX_ERR_NOENT;
	/* NCCL's realPort: the functions of one NIC (one merged PCI path) number their ports on */
	for (int i = 0; i < out->ndevs; i++) {
		struct cruxn_vx_dev *d = &out->devs[i];
		d->real_port = 0;
		for (int j = 0; j < i && d->pci_path; j++)
			if (out->devs[j].pci_path &&
			    strcmp(out->devs[j].pci_path, d->pci_path) == 0 &&
			    strcmp(out->devs[j].name, d->name) != 0)
				d->real_port++;
	}
	return CRUX_OK;
}

void cruxn_vx_close(struct cruxn_vx *vx)
{
	for (int i = 0; i < vx->ndevs; i++)
		dev_close(&vx->ibv, &vx->devs[i]);
	vx->ndevs = 0;
}
