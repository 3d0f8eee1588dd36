/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Starting the verbs transport (CRUX_TRANSPORT=auto|verbs): load the
 * libraries, open the devices, read NCCL's IB settings; and the properties
 * NCCL sees for a verbs device.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "crux/env.h"
#include "crux/log.h"
#include "vx_transport.h"

static bool peermem_loaded(void)
{
	return access("/sys/module/nvidia_peermem/version", F_OK) == 0 ||
	       access("/sys/kernel/mm/memory_peers/nv_mem/version", F_OK) == 0;
}

/* NCCL's probe: a DMA-BUF registration of fd -1 fails with EOPNOTSUPP where unsupported. */
static bool dmabuf_works(const struct cruxn_vx_dev *d)
{
	const struct cruxn_ibv *v = &cruxn_vx_state.ibv;
	struct ibv_mr *mr;

	if (!v->reg_dmabuf_mr)
		return false;
	errno = 0;
	mr = v->reg_dmabuf_mr(d->pd, 0, 0, 0, -1, 0);
	if (mr) {
		v->dereg_mr(mr);
		return true;
	}
	return errno != EOPNOTSUPP && errno != EPROTONOSUPPORT;
}

static int once_nqps;

static crux_status_t qp_cfg_load(struct cruxn_vx_qp_cfg *q, char *err, size_t errlen)
{
	long long v;

	cruxn_vx_qp_cfg_default(q);
	if (crux_env_int(NULL, NULL, "NCCL_IB_TIMEOUT", 20, 1, 31, &v, err, errlen) != CRUX_OK)
		return CRUX_ERR_INVAL;
	q->timeout = (int)v;
	if (crux_env_int(NULL, NULL, "NCCL_IB_RETRY_CNT", 7, 0, 7, &v, err, errlen) != CRUX_OK)
		return CRUX_ERR_INVAL;
	q->retry_cnt = (int)v;
	if (crux_env_int(NULL, NULL, "NCCL_IB_PKEY", 0, 0, 65535, &v, err, errlen) != CRUX_OK)
		return CRUX_ERR_INVAL;
	q->pkey = (int)v;
	if (crux_env_int(NULL, NULL, "NCCL_IB_SPLIT_DATA_ON_QPS", 0, 0, 1, &v, err, errlen) !=
	    CRUX_OK)
		return CRUX_ERR_INVAL;
	q->split = v == 1;
	/* NCCL's -2 is its auto: on for InfiniBand ports */
	if (crux_env_int(NULL, NULL, "NCCL_IB_ADAPTIVE_ROUTING", -2, -2, 1, &v, err, errlen) !=
	    CRUX_OK)
		return CRUX_ERR_INVAL;
	q->ar = v < 0 ? -1 : (int)v;
	if (crux_env_int(NULL, NULL, "NCCL_IB_AR_THRESHOLD", 8192, 0, 1ll << 40, &v, err, errlen) !=
	    CRUX_OK)
		return CRUX_ERR_INVAL;
	q->ar_threshold = (size_t)v;
	if (crux_env_int(NULL, NULL, "NCCL_IB_PCI_RELAXED_ORDERING", 2, 0, 2, &v, err, errlen) !=
	    CRUX_OK)
		return CRUX_ERR_INVAL;
	q->relaxed = (int)v;
	if (crux_env_int(NULL, NULL, "CRUX_IB_WARM_LANES", 2, 0, VX_MAX_LANES - 2, &v, err,
			 errlen) != CRUX_OK)
		return CRUX_ERR_INVAL;
	q->warm_lanes = (int)v;
	if (crux_env_int(NULL, NULL, "CRUX_IB_LANES_AHEAD", -1, -1, VX_MAX_LANES - 1, &v, err,
			 errlen) != CRUX_OK)
		return CRUX_ERR_INVAL;
	q->lanes_ahead = (int)v;
	if (crux_env_duration_ns(NULL, NULL, "CRUX_IB_LANE_INTERVAL", 10000000ull, 0,
				 60000000000ull, 1000000ull, &q->lane_interval_ns, err,
				 errlen) != CRUX_OK)
		return CRUX_ERR_INVAL;
	/* not fatal: a job runs on one QP per connection rather than not at all */
	if (cruxn_vx_nqps_load(&q->nqps, err, errlen) != CRUX_OK) {
		crux_log_once(&once_nqps, CRUX_LOG_WARN, "%s; using 1 queue pair per connection",
			      err);
		err[0] = '\0';
	}
	return CRUX_OK;
}

crux_status_t cruxn_vx_nqps_load(int *nqps, char *err, size_t errlen)
{
	const char *name = "CRUX_IB_QPS_PER_CONNECTION";
	long long v;

	*nqps = 1;
	if (!crux_env_get(NULL, NULL, name) &&
	    crux_env_get(NULL, NULL, "NCCL_IB_QPS_PER_CONNECTION"))
		name = "NCCL_IB_QPS_PER_CONNECTION";
	if (crux_env_int(NULL, NULL, name, 1, 1, CRUXN_VX_MAX_QPS, &v, err, errlen) != CRUX_OK)
		return CRUX_ERR_INVAL;
	*nqps = (int)v;
	return CRUX_OK;
}

crux_status_t cruxn_vx_start(const struct cruxn_config *cfg, char *err, size_t errlen)
{
	struct cruxn_ibv v;
	struct cruxn_gid_rules rules;
	crux_status_t st;
	char line[1024];

	if (cruxn_gid_rules_load(&rules, err, errlen) != CRUX_OK ||
	    qp_cfg_load(&cruxn_vx_qpcfg, err, errlen) != CRUX_OK)
		return CRUX_ERR_INVAL;
	st = cruxn_ibv_load(cfg->ibverbs_lib, cfg->mlx5_lib, &v, err, errlen);
	if (st != CRUX_OK)
		return st;
	if (v.fork_init)
		(void)v.fork_init(); /* as NCCL does: buffers stay valid across fork() */
	st = cruxn_vx_open(&v, cfg->hca_spec, &rules, &cruxn_vx_state, err, errlen);
	if (st != CRUX_OK) {
		cruxn_ibv_unload(&v);
		return st;
	}
	crux_info("verbs transport: %d device port(s), first %s port %u GID index %d",
		  cruxn_vx_state.ndevs, cruxn_vx_state.devs[0].name, cruxn_vx_state.devs[0].ep.port,
		  cruxn_vx_state.devs[0].ep.gid_index);
	/* once: which way the route's source ports reach the wire */
	cruxn_vx_sport_probe_all(&cruxn_vx_state, &cruxn_vx_qpcfg, line, sizeof(line));
	crux_info("%s", line);
	for (int i = 0; i < cruxn_vx_state.ndevs; i++) {
		struct cruxn_vx_dev *d = &cruxn_vx_state.devs[i];
		d->ar = cruxn_vx_qpcfg.ar < 0 ? d->ep.link_layer == IBV_LINK_LAYER_INFINIBAND
					      : cruxn_vx_qpcfg.ar == 1;
	}
	return cruxn_vx_async_start(&cruxn_vx_state);
}

void cruxn_vx_stop(void)
{
	struct cruxn_ibv v = cruxn_vx_state.ibv;

	cruxn_vx_async_stop(&cruxn_vx_state); /* before the devices close */
	cruxn_vx_close(&cruxn_vx_state);
	if (v.lib)
		cruxn_ibv_unload(&v);
	memset(&cruxn_vx_state, 0, sizeof(cruxn_vx_state));
}

crux_status_t cruxn_vx_properties(int dev, cruxn_props_v11_t *p)
{
	const struct cruxn_vx_dev *d;

	if (dev < 0 || dev >= cruxn_vx_state.ndevs)
		return CRUX_ERR_INVAL;
	d = &cruxn_vx_state.devs[dev];
	memset(p, 0, sizeof(*p));
	p->name = (char *)d->name;
	p->pciPath = d->pci_path;
	p->guid = d->guid;
	p->ptrSupport = CRUXN_PTR_HOST;
	if (peermem_loaded())
		p->ptrSupport |= CRUXN_PTR_CUDA;
	if (dmabuf_works(d))
		p->ptrSupport |= CRUXN_PTR_DMABUF;
	p->regIsGlobal = 1; /* registrations are cached process-wide */
	p->forceFlush = 0;
	p->speed = d->speed_mbps;
	p->port = d->ep.port + d->real_port;
	p->latency = 0;
	p->maxComms = 65536;
	p->maxRecvs = CRUXN_NET_MAX_RECVS;
	p->netDeviceType = CRUXN_DEV_HOST;
	p->netDeviceVersion = 0;
	p->vProps.ndevs = 1;
	p->vProps.devs[0] = dev;
	/* one part is one WRITE: never above the port's max_msg_sz (1 GiB on many mlx5) */
	p->maxP2pBytes = (size_t)VX_MAX_MSG;
	if (d->max_msg_sz && d->max_msg_sz < p->maxP2pBytes)
		p->maxP2pBytes = d->max_msg_sz;
	p->maxCollBytes = p->maxP2pBytes;
	p->maxMultiRequestSize = 1;
	return CRUX_OK;
}

/* v12 properties: rail and plane from the NCCL_IB_HCA entry, as NCCL's IB transport does. */
void cruxn_vx_ids(int dev, int *rail, int *plane)
{
	const struct cruxn_vx_dev *d;

	*rail = *plane = -1;
	if (dev < 0 || dev >= cruxn_vx_state.ndevs)
		return;
	d = &cruxn_vx_state.devs[dev];
	cruxn_hca_ids(cruxn_ctx.cfg.hca_spec, d->name, d->ep.port, rail, plane);
}

int cruxn_vx_ndevs(void)
{
	return cruxn_vx_state.ndevs;
}
