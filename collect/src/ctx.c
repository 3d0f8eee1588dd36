/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The preload's context: configuration, communicator table, call ring and
 * the background thread that turns call records and GPU intervals into
 * iterations and publishes the profile record once per window.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "collect_int.h"
#include "crux/log.h"
#include "crux/nccl_api.h"
#include "crux/shm.h"

struct cruxc_ctx cruxc_ctx = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .source = CRUXC_SRC_PRELOAD,
    .device_ordinal = -1,
};

struct cruxc_hot cruxc_hot;

/* ---- Ring ---- */

crux_status_t cruxc_ring_init(struct cruxc_ring *r, uint32_t order)
{
	size_t n = (size_t)1 << order;

	r->cells = calloc(n, sizeof(*r->cells));
	if (!r->cells)
		return CRUX_ERR_NOMEM;
	r->mask = n - 1;
	cruxc_ring_reset(r);
	return CRUX_OK;
}

void cruxc_ring_reset(struct cruxc_ring *r)
{
	for (uint64_t i = 0; i <= r->mask; i++)
		atomic_store_explicit(&r->cells[i].seq, i, memory_order_relaxed);
	atomic_store(&r->head, 0);
	atomic_store(&r->dropped, 0);
	r->tail = 0;
}

void cruxc_ring_fini(struct cruxc_ring *r)
{
	free(r->cells);
	r->cells = NULL;
}

bool cruxc_ring_pop(struct cruxc_ring *r, struct cruxc_call *out)
{
	struct cruxc_cell *cell = &r->cells[r->tail & r->mask];
	uint64_t seq = atomic_load_explicit(&cell->seq, memory_order_acquire);

	if (seq != r->tail + 1)
		return false;
	*out = cell->call;
	atomic_store_explicit(&cell->seq, r->tail + r->mask + 1, memory_order_release);
	r->tail++;
	return true;
}

/* ---- Operations ---- */

static const char *const op_names[] = {
    [CRUXC_OP_ALLREDUCE] = "allreduce",
    [CRUXC_OP_ALLGATHER] = "allgather",
    [CRUXC_OP_REDUCESCATTER] = "reducescatter",
    [CRUXC_OP_BROADCAST] = "broadcast",
    [CRUXC_OP_REDUCE] = "reduce",
    [CRUXC_OP_ALLTOALL] = "alltoall",
    [CRUXC_OP_GATHER] = "gather",
    [CRUXC_OP_SCATTER] = "scatter",
    [CRUXC_OP_SEND] = "send",
    [CRUXC_OP_RECV] = "recv",
};

int cruxc_op_from_name(const char *name)
{
	for (int i = 0; i <= CRUXC_OP_RECV; i++) {
		if (strcasecmp(name, op_names[i]) == 0)
			return i;
	}
	return -1;
}

int cruxc_op_kind(int op)
{
	switch (op) {
	case CRUXC_OP_ALLREDUCE:
		return CRUX_COLL_ALLREDUCE;
	case CRUXC_OP_ALLGATHER:
		return CRUX_COLL_ALLGATHER;
	case CRUXC_OP_REDUCESCATTER:
		return CRUX_COLL_REDUCESCATTER;
	case CRUXC_OP_BROADCAST:
		return CRUX_COLL_BROADCAST;
	case CRUXC_OP_REDUCE:
		return CRUX_COLL_REDUCE;
	case CRUXC_OP_ALLTOALL:
		return CRUX_COLL_ALLTOALL;
	case CRUXC_OP_GATHER:
		return CRUX_COLL_GATHER;
	case CRUXC_OP_SCATTER:
		return CRUX_COLL_SCATTER;
	case CRUXC_OP_SEND:
	case CRUXC_OP_RECV:
		return CRUX_COLL_SENDRECV;
	default:
		return -1;
	}
}

/*
 * Bytes of one call in the nccl-tests "size" convention: the larger of the
 * send and receive buffers of this rank.
 */
uint64_t cruxc_call_bytes(const struct cruxc_call *c, const struct cruxc_comm *comm)
{
	uint64_t n = comm && comm->nranks > 0 ? (uint64_t)comm->nranks : 1;
	uint64_t bytes = c->count * crux_nccl_type_size((ncclDataType_t)c->dtype);

	switch (c->op) {
	case CRUXC_OP_ALLGATHER:
	case CRUXC_OP_REDUCESCATTER:
	case CRUXC_OP_ALLTOALL:
	case CRUXC_OP_GATHER:
	case CRUXC_OP_SCATTER:
		return bytes * n;
	default:
		return bytes;
	}
}

uint32_t cruxc_call_sig(const struct cruxc_call *c, const struct cruxc_comm *comm)
{
	/* FNV-1a over what makes two calls "the same call" in the next iteration. */
	uint64_t fields[5] = {c->op, comm ? comm->index : 0xffff, c->count, c->dtype,
			      (uint64_t)(uint32_t)c->peer};
	uint32_t h = 2166136261u;
	const unsigned char *p = (const unsigned char *)fields;

	for (size_t i = 0; i < sizeof(fields); i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

/* ---- Configuration ---- */

static const char *const timing_names[] = {"auto", "cupti", "events", "host", NULL};

static crux_status_t parse_mark(const char *v, struct cruxc_config *cfg)
{
	char op[32];
	const char *colon;
	long long bytes = 0;
	char err[160];
	size_t len;

	if (!v || strcasecmp(v, "auto") == 0) {
		cfg->mark = CRUXC_MARK_AUTO;
		return CRUX_OK;
	}
	if (strcasecmp(v, "api") == 0) {
		cfg->mark = CRUXC_MARK_API;
		return CRUX_OK;
	}
	colon = strchr(v, ':');
	len = colon ? (size_t)(colon - v) : strlen(v);
	if (len >= sizeof(op))
		goto bad;
	memcpy(op, v, len);
	op[len] = '\0';
	cfg->mark_op = cruxc_op_from_name(op);
	if (cfg->mark_op < 0)
		goto bad;
	if (colon && crux_parse_int("CRUX_ITERATION_MARK", colon + 1, 1, INT64_MAX, &bytes, err,
				    sizeof(err)) != CRUX_OK)
		goto bad;
	cfg->mark = CRUXC_MARK_OP;
	cfg->mark_bytes = (uint64_t)bytes;
	return CRUX_OK;
bad:
	crux_err("CRUX_ITERATION_MARK='%s' is not valid: expected auto, api, or <op>[:<bytes>] "
		 "with op one of allreduce, allgather, reducescatter, broadcast, reduce, alltoall, "
		 "gather, scatter, send, recv (e.g. allreduce:4096)",
		 v);
	return CRUX_ERR_INVAL;
}

static crux_status_t copy_path(crux_getenv_fn fn, void *arg, const char *name, char *dst,
			       size_t len)
{
	const char *v = crux_env_get(fn, arg, name);

	dst[0] = '\0';
	if (!v)
		return CRUX_OK;
	if (strlen(v) >= len) {
		crux_err("%s is too long (%zu bytes, at most %zu): give a shorter path", name,
			 strlen(v), len - 1);
		return CRUX_ERR_INVAL;
	}
	snprintf(dst, len, "%s", v);
	return CRUX_OK;
}

crux_status_t cruxc_config_parse(crux_getenv_fn fn, void *arg, struct cruxc_config *out,
				 bool *enabled)
{
	struct cruxc_config cfg;
	char err[256];
	bool on = true;
	int timing = 0;
	crux_status_t st;

	memset(&cfg, 0, sizeof(cfg));
	st = crux_env_bool(fn, arg, "CRUX_PRELOAD", true, &on, err, sizeof(err));
	if (st != CRUX_OK)
		goto bad;
	st = crux_env_enum(fn, arg, "CRUX_TIMING", timing_names, 0, &timing, err, sizeof(err));
	if (st != CRUX_OK)
		goto bad;
	cfg.timing = timing;
	st =
	    crux_env_duration_ns(fn, arg, "CRUX_PROFILE_WINDOW", 30000000000ull, 100000000ull,
				 3600000000000ull, 1000000000ull, &cfg.window_ns, err, sizeof(err));
	if (st != CRUX_OK)
		goto bad;
	st = parse_mark(crux_env_get(fn, arg, "CRUX_ITERATION_MARK"), &cfg);
	if (st != CRUX_OK)
		return st;
	st = crux_shm_dir(fn, arg, cfg.shm_dir, sizeof(cfg.shm_dir));
	if (st != CRUX_OK) {
		const char *v = crux_env_get(fn, arg, "CRUX_SHM_DIR");

		crux_err("CRUX_SHM_DIR='%s' is not valid: expected an absolute directory path "
			 "of at most %d characters",
			 v ? v : "", CRUX_SHM_DIR_MAX);
		return st;
	}
	st = copy_path(fn, arg, "CRUX_CUPTI_LIB", cfg.cupti_lib, sizeof(cfg.cupti_lib));
	if (st == CRUX_OK)
		st = copy_path(fn, arg, "CRUX_CUDART_LIB", cfg.cudart_lib, sizeof(cfg.cudart_lib));
	if (st != CRUX_OK)
		return st;
	*out = cfg;
	*enabled = on;
	return CRUX_OK;
bad:
	crux_err("%s", err);
	return st;
}

/* ---- Communicators ---- */

static size_t comm_slot(uintptr_t key)
{
	return (size_t)((key >> 4) * 0x9e3779b97f4a7c15ull >> 56) & (CRUXC_MAX_COMMS - 1);
}

const struct cruxc_comm *cruxc_comm_find(uintptr_t comm)
{
	size_t s = comm_slot(comm);

	if (comm == 0 || comm == UINTPTR_MAX)
		return NULL;
	for (size_t i = 0; i < CRUXC_MAX_COMMS; i++) {
		const struct cruxc_comm *c = &cruxc_ctx.comms[(s + i) & (CRUXC_MAX_COMMS - 1)];
		uintptr_t k = atomic_load_explicit(&c->key, memory_order_acquire);

		if (k == comm)
			return c;
		if (k == 0)
			return NULL;
	}
	return NULL;
}

typedef ncclResult_t (*query_fn)(ncclComm_t, int *);

static int query(enum cruxc_fn f, uintptr_t comm, int fallback)
{
	query_fn q = (query_fn)cruxc_real(f);
	int v = fallback;

	if (q && q((ncclComm_t)comm, &v) != ncclSuccess)
		v = fallback;
	return v;
}

void cruxc_device_identity(uintptr_t comm)
{
	cruxc_device_identity_ordinal(query(CRUXC_FN_CUDEVICE, comm, -1));
}

void cruxc_device_identity_ordinal(int ordinal)
{
	typedef int (*cu_init_fn)(unsigned int);
	typedef int (*cu_get_fn)(int *, int);
	typedef int (*cu_uuid_fn)(unsigned char *, int);
	void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	int dev = 0;
	unsigned char u[16];
	cu_init_fn init;
	cu_get_fn get;
	cu_uuid_fn uuid;

	/* No CUDA driver in the process: this NCCL runs on the CPU. */
	snprintf(cruxc_ctx.device, sizeof(cruxc_ctx.device), "cpu");
	if (!cuda)
		return;
	snprintf(cruxc_ctx.device, sizeof(cruxc_ctx.device), "cuda:%d", ordinal);
	init = (cu_init_fn)dlsym(cuda, "cuInit");
	get = (cu_get_fn)dlsym(cuda, "cuDeviceGet");
	uuid = (cu_uuid_fn)dlsym(cuda, "cuDeviceGetUuid_v2");
	if (!uuid)
		uuid = (cu_uuid_fn)dlsym(cuda, "cuDeviceGetUuid");
	if (ordinal >= 0 && init && get && uuid && init(0) == 0 && get(&dev, ordinal) == 0 &&
	    uuid(u, dev) == 0)
		snprintf(cruxc_ctx.device, sizeof(cruxc_ctx.device),
			 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
			 u[12], u[13], u[14], u[15]);
	dlclose(cuda);
}

void cruxc_comm_ranks(uintptr_t comm, int *rank, int *nranks)
{
	if (*rank < 0)
		*rank = query(CRUXC_FN_USERRANK, comm, -1);
	if (*nranks < 0)
		*nranks = query(CRUXC_FN_COMMCOUNT, comm, -1);
}

void cruxc_comm_insert(uintptr_t comm, int rank, int nranks)
{
	size_t s = comm_slot(comm);
	struct cruxc_comm *slot = NULL;

	if (atomic_load(&cruxc_hot.state) != CRUXC_ST_ACTIVE)
		return;
	pthread_mutex_lock(&cruxc_ctx.lock);
	for (size_t i = 0; i < CRUXC_MAX_COMMS; i++) {
		struct cruxc_comm *c = &cruxc_ctx.comms[(s + i) & (CRUXC_MAX_COMMS - 1)];
		uintptr_t k = atomic_load(&c->key);

		if (k == comm || k == 0 || k == UINTPTR_MAX) {
			slot = c;
			break;
		}
	}
	if (slot) {
		slot->rank = rank;
		slot->nranks = nranks;
		slot->index = cruxc_ctx.ncomms_created++;
		atomic_store_explicit(&slot->key, comm, memory_order_release);
	}
	atomic_store(&cruxc_ctx.intercepted, true);
	pthread_mutex_unlock(&cruxc_ctx.lock);
	if (!slot)
		crux_warn("more than %d communicators; calls on the others count as one",
			  CRUXC_MAX_COMMS);
}

void cruxc_comm_remove(uintptr_t comm)
{
	pthread_mutex_lock(&cruxc_ctx.lock);
	for (size_t i = 0, s = comm_slot(comm); i < CRUXC_MAX_COMMS; i++) {
		struct cruxc_comm *c = &cruxc_ctx.comms[(s + i) & (CRUXC_MAX_COMMS - 1)];
		uintptr_t k = atomic_load(&c->key);

		if (k == 0)
			break;
		if (k == comm) {
			/* A tombstone keeps later probes of this chain working. */
			atomic_store(&c->key, UINTPTR_MAX);
			break;
		}
	}
	pthread_mutex_unlock(&cruxc_ctx.lock);
}
