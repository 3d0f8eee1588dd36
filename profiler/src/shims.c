/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The exported function tables, one per profiler ABI version NCCL looks up
 * (newest first: ncclProfiler_v6, _v5, _v4). Each shim turns its version's
 * event descriptor into the core's and calls the one core.
 */
#include "cruxf.h"

#define CRUXF_EXPORT __attribute__((visibility("default")))

/* A descriptor that is not ours until a version's switch says otherwise. */
static void desc_init(struct cruxf_desc *d, bool v4, void *parent)
{
	*d = (struct cruxf_desc){.kind = CRUXF_K_NONE, .v4 = v4, .parent = parent, .peer = -1};
}

/* ---- v5 and v6: API events (the calls themselves) ---- */

static void desc_v5(const cruxf_descr_v5_t *e, struct cruxf_desc *d)
{
	desc_init(d, false, e->parentObj);
	switch (e->type) {
	case CRUXF_EV_GROUP_API:
		d->kind = CRUXF_K_GROUP;
		break;
	case CRUXF_EV_COLL_API:
		d->kind = CRUXF_K_CALL;
		d->func = e->collApi.func;
		d->datatype = e->collApi.datatype;
		d->count = e->collApi.count;
		d->peer = e->collApi.root;
		d->stream = e->collApi.stream;
		break;
	case CRUXF_EV_P2P_API:
		d->kind = CRUXF_K_CALL;
		d->func = e->p2pApi.func;
		d->datatype = e->p2pApi.datatype;
		d->count = e->p2pApi.count;
		d->stream = e->p2pApi.stream;
		break;
	default:
		break;
	}
}

static cruxf_result_t init_v5(void **context, uint64_t comm_id, int *mask, const char *name,
			      int nnodes, int nranks, int rank, cruxf_logger_t logfn)
{
	(void)comm_id;
	(void)nnodes;
	return cruxf_init(context, mask, 5, name, nranks, rank, logfn);
}

static cruxf_result_t start_v5(void *context, void **handle, cruxf_descr_v5_t *e)
{
	struct cruxf_desc d;

	if (!handle)
		return CRUXF_SUCCESS;
	*handle = NULL;
	if (!e)
		return CRUXF_SUCCESS;
	desc_v5(e, &d);
	cruxf_start(context, handle, &d);
	return CRUXF_SUCCESS;
}

/* ---- v4: task events at launch ---- */

static void desc_v4(const cruxf_descr_v4_t *e, struct cruxf_desc *d)
{
	desc_init(d, true, e->parentObj);
	switch (e->type) {
	case CRUXF_EV_GROUP:
		d->kind = CRUXF_K_GROUP;
		break;
	case CRUXF_EV_COLL:
		d->kind = CRUXF_K_CALL;
		d->func = e->coll.func;
		d->datatype = e->coll.datatype;
		d->count = e->coll.count;
		d->peer = e->coll.root;
		break;
	case CRUXF_EV_P2P:
		d->kind = CRUXF_K_CALL;
		d->func = e->p2p.func;
		d->datatype = e->p2p.datatype;
		d->count = e->p2p.count;
		d->peer = e->p2p.peer;
		break;
	default:
		break;
	}
}

static cruxf_result_t init_v4(void **context, int *mask, const char *name, uint64_t comm_hash,
			      int nnodes, int nranks, int rank, cruxf_logger_t logfn)
{
	(void)comm_hash;
	(void)nnodes;
	return cruxf_init(context, mask, 4, name, nranks, rank, logfn);
}

static cruxf_result_t start_v4(void *context, void **handle, cruxf_descr_v4_t *e)
{
	struct cruxf_desc d;

	if (!handle)
		return CRUXF_SUCCESS;
	*handle = NULL;
	if (!e)
		return CRUXF_SUCCESS;
	desc_v4(e, &d);
	cruxf_start(context, handle, &d);
	return CRUXF_SUCCESS;
}

/* ---- Shared by every version ---- */

static cruxf_result_t stop_any(void *handle)
{
	cruxf_stop(handle);
	return CRUXF_SUCCESS;
}

static cruxf_result_t state_any(void *handle, int state, cruxf_state_args_t *args)
{
	(void)args;
	cruxf_state_change(handle, state);
	return CRUXF_SUCCESS;
}

CRUXF_EXPORT const cruxf_profiler_v6_t ncclProfiler_v6 = {
    .name = "Crux",
    .init = init_v5,
    .startEvent = start_v5, /* v6 descriptors extend v5's with copy-engine events we ignore */
    .stopEvent = stop_any,
    .recordEventState = state_any,
    .finalize = cruxf_finalize,
};

CRUXF_EXPORT const cruxf_profiler_v5_t ncclProfiler_v5 = {
    .name = "Crux",
    .init = init_v5,
    .startEvent = start_v5,
    .stopEvent = stop_any,
    .recordEventState = state_any,
    .finalize = cruxf_finalize,
};

CRUXF_EXPORT const cruxf_profiler_v4_t ncclProfiler_v4 = {
    .name = "Crux",
    .init = init_v4,
    .startEvent = start_v4,
    .stopEvent = stop_any,
    .recordEventState = state_any,
    .finalize = cruxf_finalize,
};
