/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL's own entry points as the profiling engine finds them (libcrux-collect):
 * the next definition after the preload's (RTLD_NEXT), else the loaded
 * libnccl. The preload's wrappers call through these; the engine asks NCCL
 * a communicator's rank, size and device through them.
 */
#ifndef CRUX_COLLECT_NCCL_H
#define CRUX_COLLECT_NCCL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum cruxc_fn {
	CRUXC_FN_ALLREDUCE = 0,
	CRUXC_FN_ALLGATHER,
	CRUXC_FN_REDUCESCATTER,
	CRUXC_FN_BROADCAST,
	CRUXC_FN_BCAST,
	CRUXC_FN_REDUCE,
	CRUXC_FN_ALLTOALL,
	CRUXC_FN_GATHER,
	CRUXC_FN_SCATTER,
	CRUXC_FN_SEND,
	CRUXC_FN_RECV,
	CRUXC_FN_GROUPSTART,
	CRUXC_FN_GROUPEND,
	CRUXC_FN_INITRANK,
	CRUXC_FN_INITRANKCONFIG,
	CRUXC_FN_INITALL,
	CRUXC_FN_INITRANKSCALABLE,
	CRUXC_FN_SPLIT,
	CRUXC_FN_SHRINK,
	CRUXC_FN_FINALIZE,
	CRUXC_FN_DESTROY,
	CRUXC_FN_ABORT,
	CRUXC_FN_COMMCOUNT,
	CRUXC_FN_USERRANK,
	CRUXC_FN_CUDEVICE,
	CRUXC_FN_COUNT
};

/* Resolved entry points (NULL until first needed). */
extern _Atomic(void *) cruxc_real_fns[CRUXC_FN_COUNT];

/* Resolve 'f' (and every entry point still missing); NULL when NCCL lacks it. */
void *cruxc_real_resolve(enum cruxc_fn f);

static inline void *cruxc_real(enum cruxc_fn f)
{
	void *p = atomic_load_explicit(&cruxc_real_fns[f], memory_order_acquire);

	return __builtin_expect(p != NULL, 1) ? p : cruxc_real_resolve(f);
}

/*
 * Look for NCCL linked into an object other than a libnccl library (the
 * executable or a framework library). Returns true and the object's name.
 */
bool cruxc_static_nccl_scan(char *obj, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_COLLECT_NCCL_H */
