/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Profile records: one file per training process in the shared-memory
 * directory, named "prof-<pid>-<starttime>.rec" so a reused pid never
 * aliases an old record. Two sections, each written by exactly one
 * component under its own sequence counter:
 *   - compute: written by the preload (iterations, compute/communication
 *     timing per window);
 *   - net: written by the plugin (bytes per peer host and per level).
 * The preload and the plugin do not know each other: whichever comes first
 * creates the file (atomically initialised), the other opens it.
 * The agent scans all records, skips invalid ones and removes those of
 * processes that no longer exist.
 */
#ifndef CRUX_PROFILE_H
#define CRUX_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "crux/addr.h"
#include "crux/decision.h"
#include "crux/jobid.h"
#include "crux/seqlock.h"
#include "crux/shm.h"
#include "crux/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CRUX_PROF_MAGIC 0x50585243u /* "CRXP" little-endian */
/*
 * 6: the plugin's busy-time history; 5: net section has the plugin's busy time (stall
 * breakdown); 4: bytes by collective kind; 3: contract v2 (sealed memfd); 2: local address
 */
#define CRUX_PROF_VERSION      6
#define CRUX_PROF_PREFIX       "prof-"
#define CRUX_PROF_SUFFIX       ".rec"
#define CRUX_PROF_MAX_PEERS    64
#define CRUX_HOSTNAME_LEN      64
#define CRUX_DEVICE_LEN	       64
#define CRUX_PROF_BUSY_SAMPLES 64

enum crux_coll_kind {
	CRUX_COLL_ALLREDUCE = 0,
	CRUX_COLL_ALLGATHER,
	CRUX_COLL_REDUCESCATTER,
	CRUX_COLL_BROADCAST,
	CRUX_COLL_REDUCE,
	CRUX_COLL_ALLTOALL,
	CRUX_COLL_GATHER,
	CRUX_COLL_SCATTER,
	CRUX_COLL_SENDRECV,
	CRUX_COLL_KINDS
};

enum crux_timing_backend {
	CRUX_TIMING_NONE = 0,
	CRUX_TIMING_HOST,
	CRUX_TIMING_EVENTS,
	CRUX_TIMING_CUPTI,
};

/* Who this process is; fixed when the record is created. */
struct crux_prof_identity {
	uint64_t job_key;
	char job_id[CRUX_JOB_ID_LEN];
	char hostname[CRUX_HOSTNAME_LEN];
	struct crux_addr host_addr; /* this host's address on the fabric, if known */
	int32_t rank;		    /* -1 when unknown */
	int32_t world_size;	    /* -1 when unknown */
	int32_t local_rank;	    /* -1 when unknown */
	/*
	 * Only in cruxd's copies of attached records (CRUX_PROF_ATTACHED_DIR):
	 * the process's uid as the kernel named it. Ignored everywhere else.
	 */
	uint32_t agent_uid;
};

/* Written by the preload once per profile window (CRUX_PROFILE_WINDOW). */
struct crux_prof_compute {
	uint64_t window_end_ns; /* CLOCK_MONOTONIC at the end of the last window */
	double window_s;	/* length of that window */
	uint64_t windows;	/* windows published so far */
	uint64_t iterations;	/* iterations in the last window */
	uint64_t total_iterations;
	double iter_time_s; /* mean iteration period */
	double compute_s;   /* per iteration: GPU compute busy time */
	double comm_s;	    /* per iteration: communication (NCCL) busy time */
	double overlap_s;   /* per iteration: compute and communication at once */
	double stall_s;	    /* per iteration: exposed communication = comm - overlap */
	uint64_t bytes_per_iter[CRUX_COLL_KINDS]; /* by collective kind */
	uint32_t timing_backend;		  /* enum crux_timing_backend */
	uint32_t flags;				  /* CRUX_PROF_F_* */
	char device[CRUX_DEVICE_LEN];		  /* e.g. "GPU-<uuid>" or "cpu" */
};

#define CRUX_PROF_F_ITER_DETECTED 0x1u /* iteration period found */
#define CRUX_PROF_F_ITER_MARKED	  0x2u /* from crux_iteration_mark / CRUX_ITERATION_MARK */
#define CRUX_PROF_F_STATIC_NCCL	  0x4u /* NCCL linked statically: nothing intercepted */
#define CRUX_PROF_F_SRC_PROFILER  0x8u /* from the NCCL profiler plugin (else the preload) */

/* The plugin's cumulative busy time at one moment (CLOCK_MONOTONIC). */
struct crux_prof_busy_sample {
	uint64_t t_ns;
	uint64_t busy_ns;
};

struct crux_prof_peer {
	struct crux_addr peer;
	uint64_t tx_bytes[CRUX_MAX_LEVELS]; /* by the level the bytes were sent at */
	uint64_t rx_bytes[CRUX_MAX_LEVELS];
};

/* Written by the plugin: cumulative byte counters per peer host. */
struct crux_prof_net {
	uint64_t update_ns; /* CLOCK_MONOTONIC of the last publish */
	uint32_t npeers;
	uint32_t reserved;
	/*
	 * This host's address on the fabric as the plugin uses it (the source
	 * address of its connections). The identity's host_addr may be empty
	 * when the preload created the record: the agent falls back to this.
	 */
	struct crux_addr local_addr;
	struct crux_prof_peer peers[CRUX_PROF_MAX_PEERS];
	/*
	 * (v4) Bytes sent by collective kind, as NCCL announced each transfer's
	 * operation to the plugin (setNetAttr, net ABI v11/v12): known without
	 * the preload. All zero when NCCL gives no hints (older NCCL or ABI).
	 */
	uint64_t tx_bytes_by_kind[CRUX_COLL_KINDS];
	/*
	 * (v5) Busy time of the plugin: time during which at least one send or
	 * receive was posted through it and not yet reported complete, as a
	 * union over all its connections (the time NCCL waits on inter-host
	 * transfers, or would if nothing else ran). busy_ns is cumulative up to
	 * update_ns; busy_period_ns of it fell in the last busy_window_ns
	 * before update_ns (the plugin's averaging period, CRUX_BUSY_PERIOD).
	 * All zero when the plugin moved nothing yet.
	 */
	uint64_t busy_ns;
	uint64_t busy_window_ns;
	uint64_t busy_period_ns; /* <= busy_window_ns */
	/*
	 * (v6) History of busy_ns, oldest first, at least CRUX_BUSY_PERIOD / 64
	 * apart (so it spans at least CRUX_BUSY_PERIOD once the plugin is that
	 * old): readers take the busy time over the compute section's own window
	 * from it. Times and totals never decrease; the newest is at most
	 * (update_ns, busy_ns).
	 */
	uint32_t nbusy_hist;
	uint32_t reserved2;
	struct crux_prof_busy_sample busy_hist[CRUX_PROF_BUSY_SAMPLES];
};

/* A validated, consistent copy of one record (what the scan delivers). */
struct crux_prof_snapshot {
	pid_t pid;
	uint64_t start_time;
	int64_t uid;   /* the kernel's: peer credentials, or the v1 file's owner; -1 unknown */
	bool attached; /* attached to cruxd (v2), not a v1 file */
	char file[CRUX_PATH_MAX];
	struct crux_prof_identity id;
	bool has_compute; /* the preload published at least once */
	bool has_net;	  /* the plugin published at least once */
	struct crux_prof_compute compute;
	struct crux_prof_net net;
};

/*
 * Stall breakdown of one rank's iteration, as fractions of the iteration
 * time (they sum to 1 with 'other'):
 *   compute:      GPU compute busy time (compute_s);
 *   network:      exposed communication (stall_s) spent while the net plugin
 *                 had transfers in flight;
 *   interconnect: the rest of the exposed communication (NCCL's work inside
 *                 the host: P2P/SHM/NVLink, reductions, launch);
 *   other:        neither (data loading, host work, idle).
 * The plugin's busy time per iteration is its busy fraction (over the
 * compute window, from the busy history; else over the plugin's period) times
 * the iteration time, capped at comm_s; exposed communication is attributed
 * to the network in the proportion busy/comm (method and error:
 * common/README.md, "Stall breakdown").
 */
struct crux_prof_stalls {
	bool valid;	/* the compute section gave an iteration time */
	bool net_known; /* the net plugin published its busy time */
	double iter_s;
	double compute;
	double interconnect;
	double network; /* 0 when !net_known: then all exposed comm is interconnect */
	double other;
	double net_busy_s; /* the plugin's busy time per iteration (<= comm_s) */
};

/*
 * The plugin's busy fraction for the compute section's window: from the
 * busy history over [window_end - window_s, window_end] (moved back to the
 * newest sample when the window ends after it), else over the plugin's
 * period; -1 when unknown. *over_window (may be NULL) says which.
 */
double crux_prof_busy_fraction(const struct crux_prof_compute *c, bool has_compute,
			       const struct crux_prof_net *n, bool has_net, bool *over_window);

/* From the figures of one record (either section may be missing: has_*). */
void crux_prof_stalls_of(const struct crux_prof_compute *c, bool has_compute,
			 const struct crux_prof_net *n, bool has_net, struct crux_prof_stalls *out);

/*
 * The same from per-iteration figures (seconds; negative busy_frac =
 * unknown): for aggregates over ranks. busy_frac is the plugin's busy time
 * over its period (0..1).
 */
void crux_prof_stalls_from(double iter_s, double compute_s, double comm_s, double stall_s,
			   double busy_frac, struct crux_prof_stalls *out);

/* ---- Writer side: this process's own record ---- */

struct crux_prof_handle;

/*
 * Create (or open, if the other component already created it) this
 * process's record in 'dir'. 'id' is used only when creating.
 */
crux_status_t crux_prof_open_self(const char *dir, const struct crux_prof_identity *id,
				  struct crux_prof_handle **out);

/* Publish the compute section (preload). */
void crux_prof_publish_compute(struct crux_prof_handle *h, const struct crux_prof_compute *c);
/* Publish the net section (plugin). */
void crux_prof_publish_net(struct crux_prof_handle *h, const struct crux_prof_net *n);

/* Unmap; the file stays until the agent reaps it (or crux_prof_remove_self). */
void crux_prof_close(struct crux_prof_handle *h);

/* ---- Additions ---- */

/*
 * A variant that does not log; 'err' (may be NULL) gets the message. It
 * returns CRUX_ERR_NOENT while the directory does not exist (the agent
 * creates it; training processes never do) and CRUX_ERR_PERM when this
 * process may not create files there.
 */
crux_status_t crux_prof_open_self_ex(const char *dir, const struct crux_prof_identity *id,
				     struct crux_prof_handle **out, char *err, size_t errlen);

/* Remove this process's record (clean exit); CRUX_ERR_NOENT if there is none. */
crux_status_t crux_prof_remove_self(const char *dir);

/* "prof-<pid>-<starttime>.rec" into buf; returns what snprintf returns. */
int crux_prof_name(pid_t pid, uint64_t start_time, char *buf, size_t len);
/* Strict parse of a record name (decimal, no leading zeros); false if not one. */
bool crux_prof_parse_name(const char *name, pid_t *pid, uint64_t *start_time);

/* Size in bytes of a profile record file of this layout version. */
size_t crux_prof_file_size(void);

/* ---- Contract v2: the record as a sealed memfd (see crux/attach.h) ---- */

/* memfd name of a process's record: this prefix and the pid (one per process). */
#define CRUX_PROF_MEMFD_PREFIX "crux-prof-"

/* Create this process's record as a memfd sealed with CRUX_SEALS_PROFILE. */
crux_status_t crux_prof_create_fd_ex(const struct crux_prof_identity *id,
				     struct crux_prof_handle **out, char *err, size_t errlen);
/* Map a record memfd another component of this process created (same writer). */
crux_status_t crux_prof_adopt_fd_ex(int fd, struct crux_prof_handle **out, char *err,
				    size_t errlen);
/*
 * This process's profile record, shared by its components: the preload and
 * the plugin link separate copies of this library, so the second finds the
 * first's memfd among this process's descriptors (named
 * CRUX_PROF_MEMFD_PREFIX<pid>) instead of making another. Two racing
 * creators both settle on the lowest-numbered descriptor.
 */
crux_status_t crux_prof_open_shared_ex(const struct crux_prof_identity *id,
				       struct crux_prof_handle **out, char *err, size_t errlen);
/* The identity the record was created with. */
void crux_prof_identity_of(const struct crux_prof_handle *h, struct crux_prof_identity *out);
/* The record's descriptor (owned by the handle). */
int crux_prof_handle_fd(const struct crux_prof_handle *h);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_PROFILE_H */
