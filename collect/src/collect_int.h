/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the profiling engine (libcrux-collect; its face is
 * crux/collect.h): the one process-wide context (cruxc_ctx), the ring's
 * consumer side, and the pieces the tests reach directly.
 */
#ifndef CRUXC_INT_H
#define CRUXC_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "crux/collect.h"
#include "crux/collect_nccl.h"
#include "crux/env.h"
#include "crux/profile.h"
#include "crux/status.h"
#include "detect.h"
#include "ival.h"
#include "timing.h"

crux_status_t cruxc_ring_init(struct cruxc_ring *r, uint32_t order);
void cruxc_ring_reset(struct cruxc_ring *r);
void cruxc_ring_fini(struct cruxc_ring *r);
/* Consumer side; false when empty. */
bool cruxc_ring_pop(struct cruxc_ring *r, struct cruxc_call *out);

#define CRUXC_MAX_COMMS 256 /* open-addressing table, power of two */

struct cruxc_comm {
	_Atomic uintptr_t key; /* ncclComm_t; 0 empty */
	int32_t rank;
	int32_t nranks;
	int32_t device;
	uint32_t index; /* creation order, part of call signatures */
};

enum cruxc_mark_mode {
	CRUXC_MARK_AUTO = 0, /* detector */
	CRUXC_MARK_API,	     /* only crux_iteration_mark() */
	CRUXC_MARK_OP,	     /* a named call starts each iteration */
};

struct cruxc_config {
	int timing; /* 0 auto, 1 cupti, 2 events, 3 host */
	uint64_t window_ns;
	enum cruxc_mark_mode mark;
	int mark_op;	     /* enum cruxc_op for CRUXC_MARK_OP */
	uint64_t mark_bytes; /* 0: any size */
	char shm_dir[CRUX_PATH_MAX];
	char cupti_lib[CRUX_PATH_MAX]; /* "" = default names */
	char cudart_lib[CRUX_PATH_MAX];
};

struct cruxc_bg;

/* The engine's one process-wide context (the front-ends' part: struct cruxc_hot). */
struct cruxc_ctx {
	pthread_mutex_t lock; /* init, comm table inserts, fork */
	pid_t pid;
	struct cruxc_config cfg;
	struct cruxc_comm comms[CRUXC_MAX_COMMS];
	uint32_t ncomms_created;
	struct cruxc_cupti *cupti;
	struct crux_prof_identity ident;
	bool have_ident;
	char device[CRUX_DEVICE_LEN];
	_Atomic bool intercepted; /* a communicator was entered */
	_Atomic int static_said;
	bool static_nccl;
	pthread_t thread;
	bool thread_running;
	_Atomic bool stop;
	struct cruxc_bg *bg;
	int source;		      /* enum cruxc_source: the front-end of this copy */
	int device_ordinal;	      /* its CUDA device when it knows it (profiler plugin) */
	_Atomic int publisher;	      /* enum cruxc_source that won cruxc_claim */
	_Atomic(void (*)(void)) mark; /* the winner's iteration mark, when another copy's */
};

extern struct cruxc_ctx cruxc_ctx;

/* ---- resolve.c ---- */

/* In a forked child: the resolver's lock, which the forking thread may not have held. */
void cruxc_resolve_atfork_child(void);

/* ---- ctx.c: the context's data (config, comm table, call records) ---- */

/* Parse the CRUX_ variables (through fn, NULL = getenv). */
crux_status_t cruxc_config_parse(crux_getenv_fn fn, void *arg, struct cruxc_config *cfg,
				 bool *enabled);

/* Device identity of the process from its first communicator. */
void cruxc_device_identity(uintptr_t comm);
/* Device identity from a CUDA device ordinal (-1: unknown). */
void cruxc_device_identity_ordinal(int ordinal);
/* Enter a communicator in the table of a started context (else nothing). */
void cruxc_comm_insert(uintptr_t comm, int rank, int nranks);
const struct cruxc_comm *cruxc_comm_find(uintptr_t comm);

/* Signature and byte count of one call (background thread). */
uint32_t cruxc_call_sig(const struct cruxc_call *c, const struct cruxc_comm *comm);
uint64_t cruxc_call_bytes(const struct cruxc_call *c, const struct cruxc_comm *comm);
int cruxc_op_kind(int op); /* enum crux_coll_kind, -1 for none */
int cruxc_op_from_name(const char *name);

#endif /* CRUXC_INT_H */
