/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Thin per-version shims over the core: int vs size_t sizes, v10's
 * per-connect config, v11's and v12's per-communicator init/finalize and
 * setNetAttr hints (hints.c), v12's properties. These tables are the only
 * symbols the library exports.
 */
#include <stdlib.h>
#include <string.h>

#include "cruxn.h"

#define EXPORT __attribute__((visibility("default")))

/* ---- shared wrappers ---- */

static cruxn_result_t init_v6(cruxn_logger_t logger)
{
	return cruxn_init(logger);
}

static cruxn_result_t init_v10(cruxn_logger_t logger, cruxn_prof_cb_t prof)
{
	(void)prof;
	return cruxn_init(logger);
}

static cruxn_result_t props_v6(int dev, cruxn_props_v6_t *p)
{
	cruxn_props_v11_t q;
	cruxn_result_t rc = cruxn_get_properties(dev, &q);
	if (rc != CRUXN_SUCCESS)
		return rc;
	p->name = q.name;
	p->pciPath = q.pciPath;
	p->guid = q.guid;
	p->ptrSupport = q.ptrSupport;
	p->speed = q.speed;
	p->port = q.port;
	p->latency = q.latency;
	p->maxComms = q.maxComms;
	p->maxRecvs = q.maxRecvs;
	return CRUXN_SUCCESS;
}

static cruxn_result_t props_v7(int dev, cruxn_props_v7_t *p)
{
	cruxn_props_v6_t q;
	cruxn_result_t rc = props_v6(dev, &q);
	if (rc != CRUXN_SUCCESS)
		return rc;
	p->name = q.name;
	p->pciPath = q.pciPath;
	p->guid = q.guid;
	p->ptrSupport = q.ptrSupport;
	p->speed = q.speed;
	p->port = q.port;
	p->latency = q.latency;
	p->maxComms = q.maxComms;
	p->maxRecvs = q.maxRecvs;
	p->netDeviceType = CRUXN_DEV_HOST;
	p->netDeviceVersion = 0;
	return CRUXN_SUCCESS;
}

static cruxn_result_t props_v8(int dev, cruxn_props_v8_t *p)
{
	cruxn_props_v11_t q;
	cruxn_result_t rc = cruxn_get_properties(dev, &q);
	if (rc != CRUXN_SUCCESS)
		return rc;
	p->name = q.name;
	p->pciPath = q.pciPath;
	p->guid = q.guid;
	p->ptrSupport = q.ptrSupport;
	p->regIsGlobal = q.regIsGlobal;
	p->speed = q.speed;
	p->port = q.port;
	p->latency = q.latency;
	p->maxComms = q.maxComms;
	p->maxRecvs = q.maxRecvs;
	p->netDeviceType = q.netDeviceType;
	p->netDeviceVersion = q.netDeviceVersion;
	return CRUXN_SUCCESS;
}

static cruxn_result_t props_v9(int dev, cruxn_props_v9_t *p)
{
	cruxn_props_v11_t q;
	cruxn_result_t rc = cruxn_get_properties(dev, &q);
	if (rc != CRUXN_SUCCESS)
		return rc;
	/* v9/v10 are v11 without the last field. */
	memcpy(p, &q, sizeof(*p));
	return CRUXN_SUCCESS;
}

static cruxn_result_t connect_v6(int dev, void *handle, void **send_comm)
{
	return cruxn_connect(dev, CRUXN_NET_TRAFFIC_CLASS_UNDEF, handle, send_comm);
}

static cruxn_result_t connect_v7(int dev, void *handle, void **send_comm,
				 cruxn_dev_handle_t **dev_comm)
{
	if (dev_comm)
		*dev_comm = NULL; /* host memory only: no device offload */
	return cruxn_connect(dev, CRUXN_NET_TRAFFIC_CLASS_UNDEF, handle, send_comm);
}

static cruxn_result_t connect_v10(int dev, cruxn_comm_config_t *config, void *handle,
				  void **send_comm, cruxn_dev_handle_t **dev_comm)
{
	if (dev_comm)
		*dev_comm = NULL;
	return cruxn_connect(dev, config ? config->trafficClass : CRUXN_NET_TRAFFIC_CLASS_UNDEF,
			     handle, send_comm);
}

static cruxn_result_t accept_v6(void *listen_comm, void **recv_comm)
{
	return cruxn_accept(listen_comm, recv_comm);
}

static cruxn_result_t accept_v7(void *listen_comm, void **recv_comm, cruxn_dev_handle_t **dev_comm)
{
	if (dev_comm)
		*dev_comm = NULL;
	return cruxn_accept(listen_comm, recv_comm);
}

static cruxn_result_t reg_mr_int(void *comm, void *data, int size, int type, void **mhandle)
{
	if (size < 0)
		return CRUXN_INVALID_ARGUMENT;
	return cruxn_reg_mr(comm, data, (size_t)size, type, mhandle);
}

static cruxn_result_t isend_int(void *comm, void *data, int size, int tag, void *mhandle,
				void **request)
{
	if (size < 0)
		return CRUXN_INVALID_ARGUMENT;
	return cruxn_isend(comm, data, (size_t)size, tag, mhandle, request);
}

static cruxn_result_t isend_v9(void *comm, void *data, size_t size, int tag, void *mhandle,
			       void **request)
{
	return cruxn_isend(comm, data, size, tag, mhandle, request);
}

/* v10 on: a profiler handle too (we report nothing to NCCL's profiler from here). */
static cruxn_result_t isend_v10(void *comm, void *data, size_t size, int tag, void *mhandle,
				void *phandle, void **request)
{
	(void)phandle;
	return cruxn_isend(comm, data, size, tag, mhandle, request);
}

static cruxn_result_t irecv_int(void *comm, int n, void **data, int *sizes, int *tags,
				void **mhandles, void **request)
{
	size_t s[CRUXN_NET_MAX_RECVS];
	if (n < 1 || n > CRUXN_NET_MAX_RECVS || !sizes)
		return CRUXN_INVALID_ARGUMENT;
	for (int i = 0; i < n; i++) {
		if (sizes[i] < 0)
			return CRUXN_INVALID_ARGUMENT;
		s[i] = (size_t)sizes[i];
	}
	return cruxn_irecv(comm, n, data, s, tags, mhandles, request);
}

static cruxn_result_t irecv_v9(void *comm, int n, void **data, size_t *sizes, int *tags,
			       void **mhandles, void **request)
{
	return cruxn_irecv(comm, n, data, sizes, tags, mhandles, request);
}

static cruxn_result_t irecv_v10(void *comm, int n, void **data, size_t *sizes, int *tags,
				void **mhandles, void **phandles, void **request)
{
	(void)phandles;
	return cruxn_irecv(comm, n, data, sizes, tags, mhandles, request);
}

static cruxn_result_t get_device_mr(void *comm, void *mhandle, void **dptr_mhandle)
{
	(void)comm;
	(void)mhandle;
	if (dptr_mhandle)
		*dptr_mhandle = NULL;
	return CRUXN_SUCCESS;
}

static cruxn_result_t irecv_consumed(void *comm, int n, void *request)
{
	(void)comm;
	(void)n;
	(void)request;
	return CRUXN_SUCCESS;
}

/* ---- v11: per-communicator context ---- */

static cruxn_result_t init_v11(void **ctx, uint64_t comm_id, cruxn_comm_config_t *config,
			       cruxn_logger_t logger, cruxn_prof_cb_t prof)
{
	struct cruxn_comm_ctx *c;
	cruxn_result_t rc;
	(void)prof;

	if (!ctx)
		return CRUXN_INVALID_ARGUMENT;
	rc = cruxn_init(logger);
	if (rc != CRUXN_SUCCESS)
		return rc;
	c = cruxn_comm_ctx_new(comm_id,
			       config ? config->trafficClass : CRUXN_NET_TRAFFIC_CLASS_UNDEF);
	if (!c) {
		cruxn_finalize();
		return CRUXN_SYSTEM_ERROR;
	}
	*ctx = c;
	return CRUXN_SUCCESS;
}

static cruxn_result_t finalize_v11(void *ctx)
{
	struct cruxn_comm_ctx *c = ctx;

	/* NCCL 2.28 may finalize after a failed init: nothing to undo then. */
	if (!c)
		return CRUXN_SUCCESS;
	if (c->magic != CRUXN_CTX_MAGIC)
		return CRUXN_INVALID_ARGUMENT;
	cruxn_comm_ctx_put(c); /* freed now, or when its last send comm closes */
	return cruxn_finalize();
}

static struct cruxn_comm_ctx *ctx_of(void *ctx)
{
	struct cruxn_comm_ctx *c = ctx;
	return c && c->magic == CRUXN_CTX_MAGIC ? c : NULL;
}

static int ctx_tc(void *ctx)
{
	struct cruxn_comm_ctx *c = ctx_of(ctx);
	return c ? c->traffic_class : CRUXN_NET_TRAFFIC_CLASS_UNDEF;
}

static cruxn_result_t listen_v11(void *ctx, int dev, void *handle, void **listen_comm)
{
	(void)ctx;
	return cruxn_listen(dev, handle, listen_comm);
}

static cruxn_result_t connect_v11(void *ctx, int dev, void *handle, void **send_comm,
				  cruxn_dev_handle_t **dev_comm)
{
	cruxn_result_t rc;

	if (dev_comm)
		*dev_comm = NULL;
	rc = cruxn_connect(dev, ctx_tc(ctx), handle, send_comm);
	if (rc == CRUXN_SUCCESS && send_comm && *send_comm)
		cruxn_comm_ctx_attach(*send_comm, ctx_of(ctx));
	return rc;
}

/* Hints before NCCL's transfers: kept per communicator, bytes counted by kind. */
static cruxn_result_t set_net_attr(void *ctx, cruxn_net_attr_t *attr)
{
	struct cruxn_comm_ctx *c = ctx_of(ctx);

	if (!c || !attr)
		return CRUXN_INVALID_ARGUMENT;
	cruxn_set_net_attr(c, attr);
	return CRUXN_SUCCESS;
}

/* ---- v12: v11 with 8-device virtual NICs and the device's rail and plane ---- */

static cruxn_result_t props_v12(int dev, cruxn_props_v12_t *p)
{
	cruxn_props_v11_t q;
	cruxn_result_t rc;

	if (!p)
		return CRUXN_INVALID_ARGUMENT;
	rc = cruxn_get_properties(dev, &q);
	if (rc != CRUXN_SUCCESS)
		return rc;
	memset(p, 0, sizeof(*p));
	p->name = q.name;
	p->pciPath = q.pciPath;
	p->guid = q.guid;
	p->ptrSupport = q.ptrSupport;
	p->regIsGlobal = q.regIsGlobal;
	p->forceFlush = q.forceFlush;
	p->speed = q.speed;
	p->port = q.port;
	p->latency = q.latency;
	p->maxComms = q.maxComms;
	p->maxRecvs = q.maxRecvs;
	p->netDeviceType = q.netDeviceType;
	p->netDeviceVersion = q.netDeviceVersion;
	p->vProps.ndevs = q.vProps.ndevs;
	for (int i = 0; i < q.vProps.ndevs && i < CRUXN_NET_MAX_DEVS_PER_NIC; i++)
		p->vProps.devs[i] = q.vProps.devs[i];
	p->maxP2pBytes = q.maxP2pBytes;
	p->maxCollBytes = q.maxCollBytes;
	p->maxMultiRequestSize = q.maxMultiRequestSize;
	cruxn_get_ids(dev, &p->railId, &p->planeId);
	return CRUXN_SUCCESS;
}

/* ---- exported tables ---- */

EXPORT const cruxn_net_v12_t ncclNetPlugin_v12 = {
    .name = CRUXN_NAME,
    .init = init_v11,
    .devices = cruxn_devices,
    .getProperties = props_v12,
    .listen = listen_v11,
    .connect = connect_v11,
    .accept = accept_v7,
    .regMr = cruxn_reg_mr,
    .regMrDmaBuf = cruxn_reg_mr_dmabuf,
    .deregMr = cruxn_dereg_mr,
    .isend = isend_v10,
    .irecv = irecv_v10,
    .iflush = cruxn_iflush,
    .test = cruxn_test,
    .closeSend = cruxn_close_send,
    .closeRecv = cruxn_close_recv,
    .closeListen = cruxn_close_listen,
    .getDeviceMr = get_device_mr,
    .irecvConsumed = irecv_consumed,
    .makeVDevice = NULL,
    .finalize = finalize_v11,
    .setNetAttr = set_net_attr,
};

EXPORT const cruxn_net_v11_t ncclNetPlugin_v11 = {
    .name = CRUXN_NAME,
    .init = init_v11,
    .devices = cruxn_devices,
    .getProperties = cruxn_get_properties,
    .listen = listen_v11,
    .connect = connect_v11,
    .accept = accept_v7,
    .regMr = cruxn_reg_mr,
    .regMrDmaBuf = cruxn_reg_mr_dmabuf,
    .deregMr = cruxn_dereg_mr,
    .isend = isend_v10,
    .irecv = irecv_v10,
    .iflush = cruxn_iflush,
    .test = cruxn_test,
    .closeSend = cruxn_close_send,
    .closeRecv = cruxn_close_recv,
    .closeListen = cruxn_close_listen,
    .getDeviceMr = get_device_mr,
    .irecvConsumed = irecv_consumed,
    .makeVDevice = NULL,
    .finalize = finalize_v11,
    .setNetAttr = set_net_attr,
};

EXPORT const cruxn_net_v10_t ncclNetPlugin_v10 = {
    .name = CRUXN_NAME,
    .init = init_v10,
    .devices = cruxn_devices,
    .getProperties = props_v9,
    .listen = cruxn_listen,
    .connect = connect_v10,
    .accept = accept_v7,
    .regMr = cruxn_reg_mr,
    .regMrDmaBuf = cruxn_reg_mr_dmabuf,
    .deregMr = cruxn_dereg_mr,
    .isend = isend_v10,
    .irecv = irecv_v10,
    .iflush = cruxn_iflush,
    .test = cruxn_test,
    .closeSend = cruxn_close_send,
    .closeRecv = cruxn_close_recv,
    .closeListen = cruxn_close_listen,
    .getDeviceMr = get_device_mr,
    .irecvConsumed = irecv_consumed,
    .makeVDevice = NULL,
};

EXPORT const cruxn_net_v9_t ncclNetPlugin_v9 = {
    .name = CRUXN_NAME,
    .init = init_v6,
    .devices = cruxn_devices,
    .getProperties = props_v9,
    .listen = cruxn_listen,
    .connect = connect_v7,
    .accept = accept_v7,
    .regMr = cruxn_reg_mr,
    .regMrDmaBuf = cruxn_reg_mr_dmabuf,
    .deregMr = cruxn_dereg_mr,
    .isend = isend_v9,
    .irecv = irecv_v9,
    .iflush = cruxn_iflush,
    .test = cruxn_test,
    .closeSend = cruxn_close_send,
    .closeRecv = cruxn_close_recv,
    .closeListen = cruxn_close_listen,
    .getDeviceMr = get_device_mr,
    .irecvConsumed = irecv_consumed,
    .makeVDevice = NULL,
};

EXPORT const cruxn_net_v8_t ncclNetPlugin_v8 = {
    .name = CRUXN_NAME,
    .init = init_v6,
    .devices = cruxn_devices,
    .getProperties = props_v8,
    .listen = cruxn_listen,
    .connect = connect_v7,
    .accept = accept_v7,
    .regMr = cruxn_reg_mr,
    .regMrDmaBuf = cruxn_reg_mr_dmabuf,
    .deregMr = cruxn_dereg_mr,
    .isend = isend_int,
    .irecv = irecv_int,
    .iflush = cruxn_iflush,
    .test = cruxn_test,
    .closeSend = cruxn_close_send,
    .closeRecv = cruxn_close_recv,
    .closeListen = cruxn_close_listen,
    .getDeviceMr = get_device_mr,
    .irecvConsumed = irecv_consumed,
};

EXPORT const cruxn_net_v7_t ncclNetPlugin_v7 = {
    .name = CRUXN_NAME,
    .init = init_v6,
    .devices = cruxn_devices,
    .getProperties = props_v7,
    .listen = cruxn_listen,
    .connect = connect_v7,
    .accept = accept_v7,
    .regMr = reg_mr_int,
    .regMrDmaBuf = cruxn_reg_mr_dmabuf,
    .deregMr = cruxn_dereg_mr,
    .isend = isend_int,
    .irecv = irecv_int,
    .iflush = cruxn_iflush,
    .test = cruxn_test,
    .closeSend = cruxn_close_send,
    .closeRecv = cruxn_close_recv,
    .closeListen = cruxn_close_listen,
    .getDeviceMr = get_device_mr,
    .irecvConsumed = irecv_consumed,
};

EXPORT const cruxn_net_v6_t ncclNetPlugin_v6 = {
    .name = CRUXN_NAME,
    .init = init_v6,
    .devices = cruxn_devices,
    .getProperties = props_v6,
    .listen = cruxn_listen,
    .connect = connect_v6,
    .accept = accept_v6,
    .regMr = reg_mr_int,
    .regMrDmaBuf = cruxn_reg_mr_dmabuf,
    .deregMr = cruxn_dereg_mr,
    .isend = isend_int,
    .irecv = irecv_int,
    .iflush = cruxn_iflush,
    .test = cruxn_test,
    .closeSend = cruxn_close_send,
    .closeRecv = cruxn_close_recv,
    .closeListen = cruxn_close_listen,
};
