/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The profiling engine (libcrux-collect): turns a process's NCCL calls into
 * its profile record (iteration detection, GPU timing backends, the record's
 * publication). Two front-ends feed it, one per process: the preload's NCCL
 * wrappers (libcrux-preload.so) and the NCCL profiler plugin
 * (libnccl-profiler-crux.so). A front-end
 *   - starts the engine (cruxc_start, or cruxc_comm_add for a communicator),
 *   - enters and removes communicators (cruxc_comm_add, cruxc_comm_remove),
 *   - pushes one fixed-size call record per call (cruxc_push: inline, no
 *     lock, no system call; the background thread drains the ring),
 *   - marks iterations (cruxc_mark, cruxc_iteration_mark),
 *   - settles with the other front-end who publishes (cruxc_claim),
 *   - stops it at exit (cruxc_stop).
 * The call record is the contract between the two sides.
 */
#ifndef CRUX_COLLECT_H
#define CRUX_COLLECT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "crux/profile.h"
#include "crux/status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum cruxc_op {
	CRUXC_OP_ALLREDUCE = 0,
	CRUXC_OP_ALLGATHER,
	CRUXC_OP_REDUCESCATTER,
	CRUXC_OP_BROADCAST,
	CRUXC_OP_REDUCE,
	CRUXC_OP_ALLTOALL,
	CRUXC_OP_GATHER,
	CRUXC_OP_SCATTER,
	CRUXC_OP_SEND,
	CRUXC_OP_RECV,
	CRUXC_OP_GROUP_END, /* timing only; not part of the iteration signature */
	CRUXC_OP_MARK,	    /* crux_iteration_mark() */
	CRUXC_OP_COUNT
};

/* One intercepted call, as the call path hands it to the background thread. */
struct cruxc_call {
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

struct cruxc_cell {
	_Atomic uint64_t seq;
	struct cruxc_call call;
};

/* Bounded multi-producer, single-consumer ring (sequence number per cell). */
struct cruxc_ring {
	struct cruxc_cell *cells;
	uint64_t mask;
	_Atomic uint64_t head __attribute__((aligned(64)));
	_Atomic uint64_t dropped;
	uint64_t tail __attribute__((aligned(64)));
};

enum cruxc_state {
	CRUXC_ST_UNINIT = 0,
	CRUXC_ST_ACTIVE,
	CRUXC_ST_OFF, /* disabled (CRUX_PRELOAD=0 or bad configuration): pass through */
};

/*
 * Who feeds the engine. In one process only one front-end publishes: the
 * preload exports crux_profile_claim() (cruxc_claim), and whoever claims
 * first keeps the record (see preload/README.md).
 */
enum cruxc_source {
	CRUXC_SRC_NONE = 0,
	CRUXC_SRC_PRELOAD = 1,
	CRUXC_SRC_PROFILER = 2,
};

struct cruxc_events;

/* What the front-ends' inline calls read: written by the engine only. */
struct cruxc_hot {
	_Atomic int state;	     /* enum cruxc_state */
	_Atomic uint32_t backend;    /* enum crux_timing_backend */
	_Atomic bool marked;	     /* an explicit iteration mark was seen */
	bool mark_auto;		     /* CRUX_ITERATION_MARK=auto: the detector (or user tags) */
	struct cruxc_events *events; /* the events backend, when it is the one */
	struct cruxc_ring ring;
};

extern struct cruxc_hot cruxc_hot;

/* One call record into ring 'r'; dropped (and counted) when it is full. */
static inline void cruxc_ring_push(struct cruxc_ring *r, const struct cruxc_call *c)
{
	uint64_t pos = atomic_load_explicit(&r->head, memory_order_relaxed);

	for (;;) {
		struct cruxc_cell *cell = &r->cells[pos & r->mask];
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

/* One call record into the engine (its background thread drains the ring). */
static inline void cruxc_push(const struct cruxc_call *c)
{
	cruxc_ring_push(&cruxc_hot.ring, c);
}

static inline bool cruxc_active(void)
{
	return atomic_load_explicit(&cruxc_hot.state, memory_order_acquire) == CRUXC_ST_ACTIVE;
}

/* The events backend times calls: bracket each launch with cruxc_events_*. */
static inline bool cruxc_events_on(void)
{
	return atomic_load_explicit(&cruxc_hot.backend, memory_order_relaxed) == CRUX_TIMING_EVENTS;
}

/* Events backend: a slot for a launch on 'stream' (UINT32_MAX: none free). */
uint32_t cruxc_events_begin(struct cruxc_events *ev, void *stream, uint64_t host_now);
/* The launch ended (end event recorded on the stream). */
void cruxc_events_end(struct cruxc_events *ev, uint32_t slot, void *stream);
/* The call failed: give the slot back. */
void cruxc_events_cancel(struct cruxc_events *ev, uint32_t slot);

/*
 * Start the engine (once; again in a forked child). Never fails the caller:
 * a bad configuration turns it off (state CRUXC_ST_OFF). 'comm', 'rank',
 * 'nranks' describe the first communicator (0, -1, -1 when none).
 */
void cruxc_start(uintptr_t comm, int rank, int nranks);
/* A communicator was created: start the engine (once), then enter it. */
void cruxc_comm_add(uintptr_t comm, int rank, int nranks);
void cruxc_comm_remove(uintptr_t comm);
/* Rank and size the caller does not know (-1), asked of NCCL's API. */
void cruxc_comm_ranks(uintptr_t comm, int *rank, int *nranks);
/*
 * The front-end in this copy of the engine, before it starts: the profiler
 * plugin says so, with how to find the CUDA device of its first
 * communicator (asked once; -1: unknown). The preload is the default and
 * asks NCCL for the device instead.
 */
void cruxc_set_source(enum cruxc_source source, int (*device)(void));
enum cruxc_source cruxc_source(void);

/* An iteration boundary at host time 't' (crux_now_ns); nothing unless active. */
void cruxc_mark(uint64_t t);
/*
 * crux_iteration_mark(): handed to the winning front-end's mark when that
 * is another copy of the engine (cruxc_claim), else starts this one (once)
 * and marks now.
 */
void cruxc_iteration_mark(void);
/*
 * Who publishes this process's record: the first claim wins and is returned
 * to every later caller (CRUXC_SRC_NONE claims nothing, returns the winner).
 * A profiler plugin that wins registers its iteration mark.
 */
int cruxc_claim(int source, void (*mark)(void));
/* The winner of cruxc_claim so far (CRUXC_SRC_NONE: nobody claimed). */
int cruxc_publisher(void);
/* Another front-end publishes: keep this engine off; true when that is news. */
bool cruxc_stand_down(void);

/* Stop the background thread and write the record a last time (at exit). */
void cruxc_stop(void);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_COLLECT_H */
