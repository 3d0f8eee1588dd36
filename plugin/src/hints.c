/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL's per-communicator contexts (v11, v12) and the hints NCCL gives
 * through setNetAttr before its transfers: the operation about to run (its
 * ncclFunc_t bit), algorithm, protocol, concurrent peers and flows per peer.
 * A send comm connected through a context keeps a reference to it, so the
 * bytes it sends are counted under the collective kind NCCL last announced
 * on that communicator: bytes per collective kind from the net plugin
 * alone, without the preload or the profiler plugin. The operation NCCL
 * names is the one its proxy starts next, and several may be in flight on
 * different channels, so the split is that of NCCL's own announcements.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "crux/log.h"

int cruxn_func_kind(uint32_t op)
{
	int f;

	/* One operation per hint; NCCL_NET_ATTR_UNDEF (all bits) or several: unknown. */
	if (!op || (op & (op - 1)))
		return -1;
	f = __builtin_ctz(op);
	switch (f) {
	case CRUXN_FUNC_BROADCAST:
		return CRUX_COLL_BROADCAST;
	case CRUXN_FUNC_REDUCE:
		return CRUX_COLL_REDUCE;
	case CRUXN_FUNC_ALLGATHER:
	case CRUXN_FUNC_ALLGATHERV:
		return CRUX_COLL_ALLGATHER;
	case CRUXN_FUNC_REDUCESCATTER:
		return CRUX_COLL_REDUCESCATTER;
	case CRUXN_FUNC_ALLREDUCE:
		return CRUX_COLL_ALLREDUCE;
	case CRUXN_FUNC_SENDRECV:
	case CRUXN_FUNC_SEND:
	case CRUXN_FUNC_RECV:
		return CRUX_COLL_SENDRECV;
	case CRUXN_FUNC_ALLTOALL:
		return CRUX_COLL_ALLTOALL;
	case CRUXN_FUNC_SCATTER:
		return CRUX_COLL_SCATTER;
	case CRUXN_FUNC_GATHER:
		return CRUX_COLL_GATHER;
	default:
		return -1;
	}
}

struct cruxn_comm_ctx *cruxn_comm_ctx_new(uint64_t comm_id, int traffic_class)
{
	struct cruxn_comm_ctx *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	x->magic = CRUXN_CTX_MAGIC;
	x->comm_id = comm_id;
	x->traffic_class = traffic_class;
	atomic_store(&x->kind, -1);
	atomic_store(&x->refs, 1); /* NCCL's, until finalize */
	return x;
}

static void say_counts(struct cruxn_comm_ctx *x)
{
	static const char *const names[CRUX_COLL_KINDS] = {
	    "allreduce", "allgather", "reducescatter", "broadcast", "reduce",
	    "alltoall",	 "gather",    "scatter",       "sendrecv"};
	char line[512];
	size_t n = 0;
	uint64_t h = atomic_load(&x->hints);

	if (!h)
		return;
	for (int k = 0; k < CRUX_COLL_KINDS && n < sizeof(line); k++) {
		uint64_t b = atomic_load(&x->tx_kind[k]);
		if (b)
			n += (size_t)snprintf(line + n, sizeof(line) - n, " %s %llu", names[k],
					      (unsigned long long)b);
	}
	crux_info("communicator 0x%llx: %llu setNetAttr hints; bytes sent by the kind NCCL "
		  "announced:%s%s, not announced %llu",
		  (unsigned long long)x->comm_id, (unsigned long long)h, n ? line : " none",
		  n >= sizeof(line) ? "..." : "", (unsigned long long)atomic_load(&x->tx_unhinted));
}

void cruxn_comm_ctx_put(struct cruxn_comm_ctx *x)
{
	if (!x || atomic_fetch_sub(&x->refs, 1) != 1)
		return;
	say_counts(x);
	x->magic = 0;
	free(x);
}

void cruxn_comm_ctx_attach(void *send_comm, struct cruxn_comm_ctx *x)
{
	struct cruxn_base *c = send_comm;

	if (!c || !x || c->magic != CRUXN_SEND_MAGIC || c->nctx)
		return;
	atomic_fetch_add(&x->refs, 1);
	c->nctx = x;
}

void cruxn_set_net_attr(struct cruxn_comm_ctx *x, const cruxn_net_attr_t *a)
{
	int kind;

	if (!x || !a)
		return;
	x->attr = *a; /* NCCL's proxy thread of this communicator is the only writer */
	kind = cruxn_func_kind(a->op);
	atomic_store_explicit(&x->kind, kind, memory_order_relaxed);
	atomic_fetch_add_explicit(&x->hints, 1, memory_order_relaxed);
}

void cruxn_count_tx_kind(struct cruxn_comm_ctx *x, uint64_t bytes)
{
	int kind = atomic_load_explicit(&x->kind, memory_order_relaxed);

	if (kind >= 0 && kind < CRUX_COLL_KINDS) {
		atomic_fetch_add_explicit(&x->tx_kind[kind], bytes, memory_order_relaxed);
		atomic_fetch_add_explicit(&cruxn_ctx.tx_kind[kind], bytes, memory_order_relaxed);
	} else {
		atomic_fetch_add_explicit(&x->tx_unhinted, bytes, memory_order_relaxed);
	}
}
