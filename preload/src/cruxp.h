/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of libcrux-preload: the one process-wide context (cruxp_ctx),
 * the call record ring between intercepted calls and the background thread,
 * and the pieces the tests reach directly.
 */
#ifndef CRUXP_H
#define CRUXP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "crux/env.h"
#include "crux/profile.h"
#include "crux/status.h"
#include "detect.h"
#include "ival.h"
#include "timing.h"

#define CRUXP_EXPORT __attribute__((visibility("default")))

enum cruxp_op {
	CRUXP_OP_ALLREDUCE = 0,
	CRUXP_OP_ALLGATHER,
	CRUXP_OP_REDUCESCATTER,
	CRUXP_OP_BROADCAST,
	CRUXP_OP_REDUCE,
	CRUXP_OP_ALLTOALL,
	CRUXP_OP_GATHER,
	CRUXP_OP_SCATTER,
	CRUXP_OP_SEND,
	CRUXP_OP_RECV,
	CRUXP_OP_GROUP_END, /* timing only; not part of the iteration signature */
	CRUXP_OP_MARK,	    /* crux_iteration_mark() */
	CRUXP_OP_COUNT
};

/* One intercepted call, as the call path hands it to the background thread. */
struct cruxp_call {
	uint64_t t_enter;
	uint64_t t_exit;
	uint64_t count;
	uintptr_t comm;
	uintptr_t stream;
	int32_t peer; /* peer or root; -1 when none */
	uint32_t ev_slot;
	uint8_t op;
	uint8_t dtype;
	uint8_t pad[6];
};

struct cruxp_cell {
	_Atomic uint64_t seq;
	struct cruxp_call call;
};

/* Bounded multi-producer, single-consumer ring (sequence number per cell). */
struct cruxp_ring {
	struct cruxp_cell *cells;
	uint64_t mask;
	_Atomic uint64_t head __attribute__((aligned(64)));
	_Atomic uint64_t dropped;
	uint64_t tail __attribute__((aligned(64)));
};

crux_status_t cruxp_ring_init(struct cruxp_ring *r, uint32_t order);
void cruxp_ring_reset(struct cruxp_ring *r);
void cruxp_ring_fini(struct cruxp_ring *r);

static inline void cruxp_ring_push(struct cruxp_ring *r, const struct cruxp_call *c)
{
	uint64_t pos = atomic_load_explicit(&r->head, memory_order_relaxed);

	for (;;) {
		struct cruxp_cell *cell = &r->cells[pos & r->mask];
		uint64_t seq = atomic_load_explicit(&cell->seq, memory_order_acquire);
		int64_t dif = (int64_t)(seq - pos);

		if (dif == 0) {
			if (atomic_compare_exchange_weak_explicit(&r->head, &pos, pos + 1,
								  memory_order_relaxed,
								  memory_order_relaxed)) {
				cell->call = *c;
				atomic_store_explicit(&cell->seq, pos + 1, memory_order_release);
				return;
			}
		} else if (dif < 0) {
			/* Full: the background thread is behind; lose this record. */
			atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
			return;
		} else {
			pos = atomic_load_explicit(&r->head, memory_order_relaxed);
		}
	}
}

/* Consumer side; false when empty. */
bool cruxp_ring_pop(struct cruxp_ring *r, struct cruxp_call *out);

#define CRUXP_MAX_COMMS 256 /* open-addressing table, power of two */

struct cruxp_comm {
	_Atomic uintptr_t key; /* ncclComm_t; 0 empty */
	int32_t rank;
	int32_t nranks;
	int32_t device;
	uint32_t index; /* creation order, part of call signatures */
};

enum cruxp_mark_mode {
	CRUXP_MARK_AUTO = 0, /* detector */
	CRUXP_MARK_API,	     /* only crux_iteration_mark() */
	CRUXP_MARK_OP,	     /* a named call starts each iteration */
};

struct cruxp_config {
	int timing; /* 0 auto, 1 cupti, 2 events, 3 host */
	uint64_t window_ns;
	enum cruxp_mark_mode mark;
	int mark_op;	     /* enum cruxp_op for CRUXP_MARK_OP */
	uint64_t mark_bytes; /* 0: any size */
	char shm_dir[CRUX_PATH_MAX];
	char cupti_lib[CRUX_PATH_MAX]; /* "" = default names */
	char cudart_lib[CRUX_PATH_MAX];
};

enum cruxp_state {
	CRUXP_ST_UNINIT = 0,
	CRUXP_ST_ACTIVE,
	CRUXP_ST_OFF, /* disabled (CRUX_PRELOAD=0 or bad configuration): pass through */
};

enum cruxp_fn {
	CRUXP_FN_ALLREDUCE = 0,
	CRUXP_FN_ALLGATHER,
	CRUXP_FN_REDUCESCATTER,
	CRUXP_FN_BROADCAST,
	CRUXP_FN_BCAST,
	CRUXP_FN_REDUCE,
	CRUXP_FN_ALLTOALL,
	CRUXP_FN_GATHER,
	CRUXP_FN_SCATTER,
	CRUXP_FN_SEND,
	CRUXP_FN_RECV,
	CRUXP_FN_GROUPSTART,
	CRUXP_FN_GROUPEND,
	CRUXP_FN_INITRANK,
	CRUXP_FN_INITRANKCONFIG,
	CRUXP_FN_INITALL,
	CRUXP_FN_INITRANKSCALABLE,
	CRUXP_FN_SPLIT,
	CRUXP_FN_SHRINK,
	CRUXP_FN_FINALIZE,
	CRUXP_FN_DESTROY,
	CRUXP_FN_ABORT,
	CRUXP_FN_COMMCOUNT,
	CRUXP_FN_USERRANK,
	CRUXP_FN_CUDEVICE,
	CRUXP_FN_COUNT
};

struct cruxp_bg;

/*
 * Who feeds this context: the preload's wrappers or the NCCL profiler plugin
 * (libnccl-profiler-crux.so links the same core). In one process only one
 * of them publishes: the preload exports crux_profile_claim(), and whoever
 * claims first keeps the record (see preload/README.md).
 */
enum cruxp_source {
	CRUXP_SRC_NONE = 0,
	CRUXP_SRC_PRELOAD = 1,
	CRUXP_SRC_PROFILER = 2,
};

/* The preload's one process-wide context. */
struct cruxp_ctx {
	_Atomic int state;
	_Atomic(void *) real[CRUXP_FN_COUNT]; /* resolved NCCL entry points */
	pthread_mutex_t resolve_lock;
	pthread_mutex_t lock; /* init, comm table inserts, fork */
	pid_t pid;
	struct cruxp_config cfg;
	struct cruxp_ring ring;
	struct cruxp_comm comms[CRUXP_MAX_COMMS];
	uint32_t ncomms_created;
	_Atomic uint32_t backend; /* enum crux_timing_backend */
	struct cruxp_events *events;
	struct cruxp_cupti *cupti;
	struct crux_prof_identity ident;
	bool have_ident;
	char device[CRUX_DEVICE_LEN];
	_Atomic bool intercepted; /* a communicator went through our wrappers */
	_Atomic bool marked;	  /* crux_iteration_mark() was called */
	_Atomic int static_said;
	_Atomic int missing_said;
	bool static_nccl;
	pthread_t thread;
	bool thread_running;
	_Atomic bool stop;
	struct cruxp_bg *bg;
	int source;		       /* enum cruxp_source of this copy of the core */
	int device_ordinal;	       /* profiler plugin: the CUDA device of its first comm */
	_Atomic int publisher;	       /* preload only: enum cruxp_source that won the claim */
	_Atomic(void (*)(void)) mark;  /* preload only: the profiler plugin's iteration mark */
};

extern struct cruxp_ctx cruxp_ctx;

/* ---- resolve.c ---- */
void *cruxp_real_resolve(enum cruxp_fn f);

static inline void *cruxp_real(enum cruxp_fn f)
{
	void *p = atomic_load_explicit(&cruxp_ctx.real[f], memory_order_acquire);

	return __builtin_expect(p != NULL, 1) ? p : cruxp_real_resolve(f);
}

/*
 * Look for NCCL linked into an object other than a libnccl library (the
 * executable or a framework library). Returns true and the object's name.
 */
bool cruxp_static_nccl_scan(char *obj, size_t len);

/*
 * ---- life.c: start, stop, fork (uses ctx.c and the engine bg.h; nothing
 * below it calls back up) ----
 */

/*
 * Bring the context up (once; again in a forked child). Never fails the
 * caller. 'comm', 'rank', 'nranks' describe the first communicator (0, -1,
 * -1 when started by crux_iteration_mark).
 */
void cruxp_ctx_start(uintptr_t comm, int rank, int nranks);
/* A communicator was created: start the context (once), then enter it in the table. */
void cruxp_ctx_attach(uintptr_t comm, int rank, int nranks);

/* ---- ctx.c: the context's data (config, comm table, call records) ---- */

/* Parse the CRUX_ variables (through fn, NULL = getenv). */
crux_status_t cruxp_config_parse(crux_getenv_fn fn, void *arg, struct cruxp_config *cfg,
				 bool *enabled);

/* Device identity of the process from its first communicator. */
void cruxp_device_identity(uintptr_t comm);
/* Device identity from a CUDA device ordinal (-1: unknown). */
void cruxp_device_identity_ordinal(int ordinal);
/* Rank and size the caller does not know (-1), asked of NCCL's API. */
void cruxp_comm_ranks(uintptr_t comm, int *rank, int *nranks);
/* Enter a communicator in the table of a started context (else nothing). */
void cruxp_comm_add(uintptr_t comm, int rank, int nranks);
void cruxp_comm_remove(uintptr_t comm);
const struct cruxp_comm *cruxp_comm_find(uintptr_t comm);

/* Signature and byte count of one call (background thread). */
uint32_t cruxp_call_sig(const struct cruxp_call *c, const struct cruxp_comm *comm);
uint64_t cruxp_call_bytes(const struct cruxp_call *c, const struct cruxp_comm *comm);
int cruxp_op_kind(int op); /* enum crux_coll_kind, -1 for none */
int cruxp_op_from_name(const char *name);

#endif /* CRUXP_H */
