/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of libnccl-profiler-crux.so: the per-communicator context NCCL
 * hands back with every event, the event handles, and the version-neutral
 * event descriptor the per-version shims (profiler_abi.c) fill for the core.
 */
#ifndef CRUXF_H
#define CRUXF_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "crux/nccl_profiler_abi.h"

#define CRUXF_COMM_MAGIC 0x4352555850524f46ull /* "CRUXPROF" */
#define CRUXF_EVENTS	 64 /* live events per communicator (power of two); API events nest <= 3 */

enum cruxf_kind {
	CRUXF_K_NONE = 0,
	CRUXF_K_GROUP, /* v5+: GroupApi; v4: Group */
	CRUXF_K_CALL,  /* v5+: CollApi/P2pApi; v4: Coll/P2p task */
};

/* What a call's record needs, kept while its group is open. */
struct cruxf_call_info {
	uint8_t op, dtype;
	int32_t peer;
	uint64_t t0, count;
	uintptr_t stream;
};

/* One event NCCL started and has not stopped (its handle). */
struct cruxf_event {
	int type; /* enum cruxf_kind; 0 when free */
	bool v4;
	bool has_pending; /* group: its first call waits in 'pending' */
	uint8_t op, dtype;
	int32_t peer;
	uint32_t ncalls;  /* group: calls queued in it */
	uint32_t ev_slot; /* group: CUDA event slot of its launch (events backend) */
	uint64_t t0;	  /* call: enqueue start; group: launch start (0: not read) */
	uint64_t count;
	uintptr_t stream;
	struct cruxf_event *parent;
	struct cruxf_comm *comm_of;
	struct cruxf_call_info pending;
};

/* One communicator's profiler context. */
struct cruxf_comm {
	uint64_t magic;
	int version, rank, nranks;
	char name[64];
	_Atomic uint32_t next;
	_Atomic uint64_t func_cache, dtype_cache; /* last string pointer << 8 | value + 1 */
	struct cruxf_event evs[CRUXF_EVENTS];
};

/* What the core needs of an event descriptor, whatever its version. */
struct cruxf_desc {
	int kind; /* enum cruxf_kind; CRUXF_K_NONE: not ours */
	bool v4;
	void *parent;
	const char *func;
	const char *datatype;
	uint64_t count;
	int peer; /* root or peer; -1 when none */
	void *stream;
	uint64_t user_tag; /* v7: the call's user tag (0: untagged or older ABI) */
};

cruxf_result_t cruxf_init(void **context, int *mask, int version, const char *name, int nranks,
			  int rank, cruxf_logger_t logfn);
cruxf_result_t cruxf_finalize(void *context);
void cruxf_start(void *context, void **handle, const struct cruxf_desc *d);
void cruxf_stop(void *handle);
void cruxf_state_change(void *handle, int state);

/* ---- Chaining (chain.c): CRUX_PROFILER_NEXT ---- */

/*
 * Handle pairs: one process-wide ring of links, so that any handle can be
 * told apart from the next plugin's own by one range check, without a
 * context. Only events Crux keeps a handle for take a link; the next
 * plugin's other handles go to NCCL as they are.
 */
#define CRUXF_LINKS                                                                                \
	(1u << 18) /* power of two; a stopped link is taken again this many links later */

/* One event handle NCCL holds: ours and the next plugin's. */
struct cruxf_link {
	_Atomic uint32_t busy;
	void *ours, *next;
};

/* The context NCCL holds when a next plugin is chained. */
struct cruxf_chain {
	uint64_t magic;
	void *ours;	    /* our core's context (NULL: the core is passive) */
	void *next;	    /* the next plugin's context (NULL: its init failed) */
	uint64_t next_mask; /* event types the next plugin asked for */
};

/* The process's next plugin (decided at the first init). */
struct cruxf_next_state {
	bool decided, on, upgrade;
	int version; /* its table's ABI version */
	int caller;  /* the version NCCL speaks */
	uint64_t types;
	size_t copy_bytes;
	void *lib;
	const cruxf_profiler_v4_t *t4;
	const cruxf_profiler_v5_t *t5; /* v5 and v6 */
	const cruxf_profiler_v7_t *t7;
	_Atomic int mixed_said, init_said, full_said;
	struct cruxf_link *links; /* CRUXF_LINKS of them */
	_Atomic uint32_t at;
	char name[128];
};
extern struct cruxf_next_state cruxf_next;

/* A version's descriptor into the core (profiler_abi.c); 'parent' is our own parent handle. */
typedef void (*cruxf_core_start_fn)(void *core_ctx, void **handle, const void *descr, void *parent);

cruxf_result_t cruxf_chain_init(int version, void **context, int *mask, uint64_t comm_id,
				const char *name, int nnodes, int nranks, int rank,
				cruxf_logger_t logfn);
cruxf_result_t cruxf_chain_finalize(void *context);
void cruxf_chain_finalize_next(struct cruxf_chain *ch);
void cruxf_chain_start(void *context, void **handle, void *descr, cruxf_core_start_fn core);
void cruxf_chain_stop(void *handle);
void cruxf_chain_state(void *handle, int state, cruxf_state_args_t *args);

/* enum cruxc_op for an ncclFuncToString name, -1 for none of ours. */
int cruxf_op_from_func(const char *func);
/* ncclDataType_t value for an ncclDatatypeToString name (0 when unknown). */
int cruxf_dtype_from_name(const char *name);

#endif /* CRUXF_H */
