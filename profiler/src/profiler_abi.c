/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The exported function tables, one per profiler ABI version NCCL looks up
 * (newest first: ncclProfiler_v7, _v6, _v5, _v4). Each shim turns its
 * version's event descriptor into the core's and calls the one core; with
 * CRUX_PROFILER_NEXT set, chain.c sits between NCCL and the core and hands
 * every call to the chained plugin too.
 */
#include <stddef.h>
#include <string.h>

#include "cruxf.h"

#define CRUXF_EXPORT __attribute__((visibility("default")))

/* v7 appends its fields: the members we read sit where v5 and v6 have them. */
_Static_assert(offsetof(cruxf_descr_v7_t, collApi.stream) ==
		   offsetof(cruxf_descr_v5_t, collApi.stream),
	       "v7 collApi keeps v5's layout");
_Static_assert(offsetof(cruxf_descr_v7_t, p2pApi.stream) ==
		   offsetof(cruxf_descr_v5_t, p2pApi.stream),
	       "v7 p2pApi keeps v5's layout");
_Static_assert(offsetof(cruxf_descr_v7_t, coll.parentGroup) ==
		   offsetof(cruxf_descr_v5_t, coll.parentGroup),
	       "v7 coll keeps v5's layout");
_Static_assert(offsetof(cruxf_descr_v7_t, ceColl.stream) ==
		   offsetof(cruxf_descr_v5_t, ceColl_v6.stream),
	       "v7 ceColl keeps v6's layout");

/* A descriptor that is not ours until a version's switch says otherwise. */
static void desc_init(struct cruxf_desc *d, bool v4, void *parent)
{
	*d = (struct cruxf_desc){.kind = CRUXF_K_NONE, .v4 = v4, .parent = parent, .peer = -1};
}

/* ---- v5, v6 and v7: API events (the calls themselves) ---- */

static void desc_v5(const cruxf_descr_v5_t *e, void *parent, struct cruxf_desc *d)
{
	desc_init(d, false, parent);
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

static void core_v5(void *ctx, void **handle, const void *descr, void *parent)
{
	struct cruxf_desc d;

	desc_v5(descr, parent, &d);
	cruxf_start(ctx, handle, &d);
}

static void core_v7(void *ctx, void **handle, const void *descr, void *parent)
{
	const cruxf_descr_v7_t *e = descr;
	struct cruxf_desc d;

	/* The members read by desc_v5 keep their offsets in v7 (asserted above). */
	desc_v5(descr, parent, &d);
	if (e->type == CRUXF_EV_COLL_API)
		d.user_tag = e->collApi.userTag;
	else if (e->type == CRUXF_EV_P2P_API)
		d.user_tag = e->p2pApi.userTag;
	cruxf_start(ctx, handle, &d);
}

static cruxf_result_t init_v5(void **context, uint64_t comm_id, int *mask, const char *name,
			      int nnodes, int nranks, int rank, cruxf_logger_t logfn)
{
	return cruxf_chain_init(5, context, mask, comm_id, name, nnodes, nranks, rank, logfn);
}

static cruxf_result_t init_v6(void **context, uint64_t comm_id, int *mask, const char *name,
			      int nnodes, int nranks, int rank, cruxf_logger_t logfn)
{
	return cruxf_chain_init(6, context, mask, comm_id, name, nnodes, nranks, rank, logfn);
}

static cruxf_result_t init_v7(void **context, uint64_t comm_id, int *mask, const char *name,
			      int nnodes, int nranks, int rank, cruxf_logger_t logfn)
{
	return cruxf_chain_init(7, context, mask, comm_id, name, nnodes, nranks, rank, logfn);
}

/* The parent handle: one offset in every version (asserted in chain.c). */
static inline void *parent_of(const void *e)
{
	void *p;

	memcpy(&p, (const char *)e + offsetof(cruxf_descr_v5_t, parentObj), sizeof(p));
	return p;
}

static inline cruxf_result_t start_any(void *context, void **handle, void *e,
				       cruxf_core_start_fn core)
{
	if (!handle)
		return CRUXF_SUCCESS;
	*handle = NULL;
	if (!e)
		return CRUXF_SUCCESS;
	if (cruxf_next.on)
		cruxf_chain_start(context, handle, e, core);
	else
		core(context, handle, e, parent_of(e));
	return CRUXF_SUCCESS;
}

static cruxf_result_t start_v5(void *context, void **handle, cruxf_descr_v5_t *e)
{
	return start_any(context, handle, e, core_v5);
}

static cruxf_result_t start_v7(void *context, void **handle, cruxf_descr_v7_t *e)
{
	return start_any(context, handle, e, core_v7);
}

/* ---- v4: task events at launch ---- */

static void desc_v4(const cruxf_descr_v4_t *e, void *parent, struct cruxf_desc *d)
{
	desc_init(d, true, parent);
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

static void core_v4(void *ctx, void **handle, const void *descr, void *parent)
{
	struct cruxf_desc d;

	desc_v4(descr, parent, &d);
	cruxf_start(ctx, handle, &d);
}

static cruxf_result_t init_v4(void **context, int *mask, const char *name, uint64_t comm_hash,
			      int nnodes, int nranks, int rank, cruxf_logger_t logfn)
{
	return cruxf_chain_init(4, context, mask, comm_hash, name, nnodes, nranks, rank, logfn);
}

static cruxf_result_t start_v4(void *context, void **handle, cruxf_descr_v4_t *e)
{
	return start_any(context, handle, e, core_v4);
}

/* ---- Shared by every version ---- */

static cruxf_result_t stop_any(void *handle)
{
	if (cruxf_next.on)
		cruxf_chain_stop(handle);
	else
		cruxf_stop(handle);
	return CRUXF_SUCCESS;
}

static cruxf_result_t state_any(void *handle, int state, cruxf_state_args_t *args)
{
	if (cruxf_next.on)
		cruxf_chain_state(handle, state, args);
	else
		cruxf_state_change(handle, state);
	return CRUXF_SUCCESS;
}

static cruxf_result_t finalize_any(void *context)
{
	return cruxf_next.on ? cruxf_chain_finalize(context) : cruxf_finalize(context);
}

CRUXF_EXPORT const cruxf_profiler_v7_t ncclProfiler_v7 = {
    .name = "Crux",
    .init = init_v7,
    .startEvent = start_v7, /* v7: v6 plus user tags (our iteration marks) */
    .stopEvent = stop_any,
    .recordEventState = state_any,
    .finalize = finalize_any,
};

CRUXF_EXPORT const cruxf_profiler_v6_t ncclProfiler_v6 = {
    .name = "Crux",
    .init = init_v6,
    .startEvent = start_v5, /* v6 descriptors extend v5's with copy-engine events we ignore */
    .stopEvent = stop_any,
    .recordEventState = state_any,
    .finalize = finalize_any,
};

CRUXF_EXPORT const cruxf_profiler_v5_t ncclProfiler_v5 = {
    .name = "Crux",
    .init = init_v5,
    .startEvent = start_v5,
    .stopEvent = stop_any,
    .recordEventState = state_any,
    .finalize = finalize_any,
};

CRUXF_EXPORT const cruxf_profiler_v4_t ncclProfiler_v4 = {
    .name = "Crux",
    .init = init_v4,
    .startEvent = start_v4,
    .stopEvent = stop_any,
    .recordEventState = state_any,
    .finalize = finalize_any,
};
