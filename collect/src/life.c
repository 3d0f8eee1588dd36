/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Life cycle of the engine's context: configuration, job identity, timing
 * backend choice, the background thread's start and stop, and fork. The
 * background work itself is bg.c's; this file only drives it through bg.h.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bg.h"
#include "collect_int.h"
#include "crux/jobid.h"
#include "crux/log.h"
#include "crux/shm.h"

#define RING_ORDER  16
#define EVENT_SLOTS 1024

static void pick_backend(void)
{
	const struct cruxc_config *cfg = &cruxc_ctx.cfg;
	int want = cfg->timing;
	void *cuda;
	crux_status_t st;

	if (want == 0) {
		/* auto: GPU backends only where a CUDA driver is in the process. */
		cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
		if (cuda)
			dlclose(cuda);
		want = cuda ? 1 : 3;
	}
	if (want == 1) {
		st = cruxc_cupti_new(cfg->cupti_lib, CRUXC_IV_CAP, &cruxc_ctx.cupti);
		if (st == CRUX_OK) {
			atomic_store(&cruxc_hot.backend, CRUX_TIMING_CUPTI);
			return;
		}
		crux_warn("CUPTI timing unavailable (%s); trying CUDA events", crux_status_str(st));
		want = 2;
	}
	if (want == 2) {
		st = cruxc_events_new(cfg->cudart_lib, EVENT_SLOTS, &cruxc_hot.events);
		if (st == CRUX_OK) {
			atomic_store(&cruxc_hot.backend, CRUX_TIMING_EVENTS);
			return;
		}
		crux_warn("CUDA event timing unavailable (%s); using the host clock",
			  crux_status_str(st));
	}
	atomic_store(&cruxc_hot.backend, CRUX_TIMING_HOST);
}

/* False when the job identity cannot be derived (a bad CRUX_JOB_ID, logged). */
static bool identity(void)
{
	struct crux_job_identity job;
	struct crux_rank_info ri;
	struct crux_prof_identity *id = &cruxc_ctx.ident;

	memset(id, 0, sizeof(*id));
	id->rank = id->world_size = id->local_rank = -1;
	if (crux_job_identity_derive(NULL, NULL, &job) != CRUX_OK)
		return false;
	id->job_key = job.key;
	snprintf(id->job_id, sizeof(id->job_id), "%s", job.id);
	if (crux_rank_info_derive(NULL, NULL, &ri) == CRUX_OK) {
		id->rank = ri.rank;
		id->world_size = ri.world_size;
		id->local_rank = ri.local_rank;
	}
	if (gethostname(id->hostname, sizeof(id->hostname)) != 0)
		id->hostname[0] = '\0';
	id->hostname[sizeof(id->hostname) - 1] = '\0';
	return true;
}

static void atfork_prepare(void)
{
	pthread_mutex_lock(&cruxc_ctx.lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&cruxc_ctx.lock);
}

static void atfork_child(void)
{
	/*
	 * Only the forking thread survives: no background thread, and the
	 * parent's CUDA state is unusable. Recording stops until this child
	 * creates a communicator of its own, which starts everything afresh.
	 */
	pthread_mutex_init(&cruxc_ctx.lock, NULL);
	cruxc_resolve_atfork_child();
	if (atomic_load(&cruxc_hot.state) == CRUXC_ST_ACTIVE)
		atomic_store(&cruxc_hot.state, CRUXC_ST_UNINIT);
	cruxc_ctx.thread_running = false;
	cruxc_hot.events = NULL;
	cruxc_ctx.cupti = NULL;
	atomic_store(&cruxc_ctx.intercepted, false);
}

static void start_locked(uintptr_t comm, int rank, int nranks)
{
	bool enabled = true;
	sigset_t all, old;
	crux_status_t st;

	if (cruxc_ctx.pid == 0)
		pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	cruxc_ctx.pid = getpid();
	/* A bad CRUX_ value (CRUX_LOG_LEVEL included) turns profiling off, as documented. */
	if (crux_log_init(cruxc_ctx.source == CRUXC_SRC_PROFILER ? "crux-profiler"
								 : "crux-preload") != CRUX_OK ||
	    cruxc_config_parse(NULL, NULL, &cruxc_ctx.cfg, &enabled) != CRUX_OK) {
		crux_err("profiling is off for this process; fix the variable above");
		atomic_store(&cruxc_hot.state, CRUXC_ST_OFF);
		return;
	}
	cruxc_hot.mark_auto = cruxc_ctx.cfg.mark == CRUXC_MARK_AUTO;
	if (!enabled) {
		atomic_store(&cruxc_hot.state, CRUXC_ST_OFF);
		return;
	}
	if (!identity()) {
		/* A record under job key 0 would merge unrelated jobs in the agent's view. */
		crux_err("profiling is off for this process; fix CRUX_JOB_ID (see above)");
		atomic_store(&cruxc_hot.state, CRUXC_ST_OFF);
		return;
	}
	/* Launchers that set no RANK/WORLD_SIZE: the first communicator says. */
	if (cruxc_ctx.ident.rank < 0 && rank >= 0) {
		cruxc_ctx.ident.rank = rank;
		cruxc_ctx.ident.world_size = nranks;
	}
	if (cruxc_ctx.source == CRUXC_SRC_PROFILER)
		cruxc_device_identity_ordinal(cruxc_ctx.device_ordinal);
	else if (comm)
		cruxc_device_identity(comm);
	else
		snprintf(cruxc_ctx.device, sizeof(cruxc_ctx.device), "unknown");
	if (!cruxc_hot.ring.cells)
		st = cruxc_ring_init(&cruxc_hot.ring, RING_ORDER);
	else {
		cruxc_ring_reset(&cruxc_hot.ring);
		st = CRUX_OK;
	}
	if (st == CRUX_OK) {
		/* After fork: drop our view of the parent's record; the file is the parent's. */
		cruxc_bg_close_record(cruxc_ctx.bg);
		cruxc_bg_free(cruxc_ctx.bg);
		cruxc_ctx.bg = NULL;
		st = cruxc_bg_new(&cruxc_ctx.bg);
	}
	if (st != CRUX_OK) {
		crux_err("out of memory; profiling is off for this process");
		atomic_store(&cruxc_hot.state, CRUXC_ST_OFF);
		return;
	}
	pick_backend();
	cruxc_bg_start_window(cruxc_ctx.bg, crux_now_ns());
	atomic_store(&cruxc_ctx.stop, false);
	/* The thread must not take the application's signals. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	cruxc_ctx.thread_running =
	    pthread_create(&cruxc_ctx.thread, NULL, cruxc_bg_main, cruxc_ctx.bg) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!cruxc_ctx.thread_running) {
		crux_err("cannot start the background thread; profiling is off");
		atomic_store(&cruxc_hot.state, CRUXC_ST_OFF);
		return;
	}
	pthread_setname_np(cruxc_ctx.thread, "crux-preload");
	crux_info("profiling pid %d, timing %d, window %.1f s", (int)cruxc_ctx.pid,
		  (int)atomic_load(&cruxc_hot.backend), (double)cruxc_ctx.cfg.window_ns / 1e9);
	atomic_store(&cruxc_hot.state, CRUXC_ST_ACTIVE);
}

void cruxc_start(uintptr_t comm, int rank, int nranks)
{
	if (atomic_load_explicit(&cruxc_hot.state, memory_order_acquire) != CRUXC_ST_UNINIT)
		return;
	pthread_mutex_lock(&cruxc_ctx.lock);
	if (atomic_load(&cruxc_hot.state) == CRUXC_ST_UNINIT)
		start_locked(comm, rank, nranks);
	pthread_mutex_unlock(&cruxc_ctx.lock);
}

void cruxc_comm_add(uintptr_t comm, int rank, int nranks)
{
	cruxc_start(comm, rank, nranks);
	cruxc_comm_insert(comm, rank, nranks);
}

void cruxc_stop(void)
{
	if (cruxc_ctx.thread_running && cruxc_ctx.pid == getpid()) {
		atomic_store(&cruxc_ctx.stop, true);
		pthread_join(cruxc_ctx.thread, NULL);
		cruxc_ctx.thread_running = false;
		cruxc_bg_close_record(cruxc_ctx.bg);
	}
}

__attribute__((destructor)) static void cruxc_fini(void)
{
	char obj[256];

	cruxc_stop();
	/* Never reached by any communicator: was NCCL in here all along? */
	/* Not a question for the profiler plugin, nor when the plugin profiled it. */
	if (cruxc_ctx.source == CRUXC_SRC_PROFILER ||
	    atomic_load(&cruxc_ctx.publisher) == CRUXC_SRC_PROFILER ||
	    atomic_load(&cruxc_ctx.intercepted) || cruxc_ctx.static_nccl ||
	    !cruxc_static_nccl_scan(obj, sizeof(obj)))
		return;
	if (!cruxc_ctx.pid)
		crux_log_init("crux-preload"); /* never started: name our lines */
	crux_log_once(&cruxc_ctx.static_said, CRUX_LOG_WARN,
		      "NCCL is linked statically into %s: its calls could not be intercepted and "
		      "this process was not profiled",
		      obj);
}
