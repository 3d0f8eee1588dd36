/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's status record: what cruxd computed (per-job intensity I,
 * correction k, priority P, level, chosen paths; probed paths per peer;
 * applied overrides), for cruxctl. A pointer-free record file in the
 * shared-memory directory (CRUXD_STATUS_FILE, mode 0644) with its own magic
 * and layout version, written only by cruxd under a seqlock; the common
 * header's heartbeat says whether the agent is alive.
 */
#ifndef CRUX_AGENT_STATUS_H
#define CRUX_AGENT_STATUS_H

#include <stdint.h>

#include "crux/addr.h"
#include "crux/decision.h"
#include "crux/jobid.h"
#include "crux/seqlock.h"
#include "crux/shm.h"
#include "crux/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CRUXD_STATUS_FILE	"agent.status"
#define CRUXD_STATUS_MAGIC	0x41585243u /* "CRXA" little-endian */
#define CRUXD_STATUS_VERSION	6	    /* 6: stall breakdown and bytes per peer host per job */
#define CRUXD_STATUS_MAX_JOBS	CRUX_DT_MAX_JOBS
#define CRUXD_STATUS_JOB_HOSTS	8
#define CRUXD_STATUS_JOB_PATHS	8
#define CRUXD_STATUS_MAX_PEERS	256
#define CRUXD_STATUS_PEER_PATHS 16
#define CRUXD_STATUS_JOB_PEERS	16

struct cruxd_status_path {
	struct crux_addr src; /* host the traffic leaves */
	struct crux_addr dst; /* peer host */
	uint16_t path_id;     /* scheduler's path between the two hosts */
	uint8_t nports;	      /* ports the prober found for it (0: none yet) */
	uint8_t reserved;
	double bytes_per_iter; /* traffic of this host pair */
};

struct cruxd_status_job {
	uint64_t job_key;
	char job_id[CRUX_JOB_ID_LEN];
	uint32_t nranks;
	uint32_t nhosts;
	struct crux_addr hosts[CRUXD_STATUS_JOB_HOSTS];
	double iter_time_s; /* per iteration, mean over ranks */
	double compute_s;
	double comm_s;
	double overlap_s;
	double stall_s;
	double work;	    /* W: compute seconds per iteration summed over ranks */
	double comm_time_s; /* t: bottleneck-link transfer time per iteration */
	double intensity;   /* I = W / t */
	double k;	    /* correction factor */
	double priority;    /* P = k * I */
	double bytes_per_iter;
	uint64_t profiling_left_ms; /* while profiling: time left in the window */
	uint8_t level;
	uint8_t state;	 /* enum crux_job_state */
	uint8_t clamped; /* some rank's record had absurd values */
	uint8_t npaths;
	uint8_t lift;	     /* levels the fairness guard added to the scheduled level */
	uint8_t guard_state; /* enum crux_sched_account_state: free, protected, urgent */
	uint8_t reserved[2];
	struct cruxd_status_path paths[CRUXD_STATUS_JOB_PATHS];
	double iso_iter_s;    /* isolated iteration estimate on its paths; 0 = none yet */
	double slowdown;      /* measured: iter_time_s / iso_iter_s (smoothed when guarded) */
	double mean_slowdown; /* guarded: mean of the measured slowdown since scheduled */
	/*
	 * (v6) Stall breakdown: mean over this host's ranks of their fractions of
	 * the iteration (crux/profile.h, crux_prof_stalls), summing to 1.
	 */
	double frac_compute;
	double frac_interconnect;
	double frac_network;
	double frac_other;
	uint8_t stalls_valid;	  /* some rank had an iteration time */
	uint8_t stalls_net_known; /* every such rank's net plugin published its busy time */
	uint8_t npeer_bytes;
	uint8_t reserved4[5];
	/* (v6) Bytes per iteration by host pair, this host's ranks as the source, largest first */
	struct cruxd_status_path peer_bytes[CRUXD_STATUS_JOB_PEERS]; /* src, dst, bytes_per_iter */
};

struct cruxd_status_peer_path {
	struct crux_addr hop;
	uint8_t nports;
	uint8_t reserved;
	uint16_t ports[CRUX_ROUTE_MAX_PORTS];
};

struct cruxd_status_peer {
	struct crux_addr peer;
	uint8_t state; /* enum cruxd_probe_state */
	uint8_t npaths;
	uint16_t reserved;
	uint32_t failures;
	uint64_t age_ms; /* since the last successful probe run; UINT64_MAX never */
	struct cruxd_status_peer_path paths[CRUXD_STATUS_PEER_PATHS];
};

struct cruxd_status_body {
	uint32_t agent_pid;
	uint32_t nlevels;
	uint64_t overrides_seq; /* last overrides file sequence applied */
	uint64_t passes;
	uint64_t reschedules;
	uint64_t last_pass_ns; /* duration of the last pass */
	uint64_t interval_ns;
	uint64_t profile_window_ns;
	uint64_t table_generation;
	uint32_t records_valid;
	uint32_t records_invalid;
	uint32_t records_busy;
	uint32_t records_reaped;
	uint32_t nhosts_topology; /* 0: single-host view */
	uint32_t njobs;
	uint32_t npeers;
	uint32_t guard_infeasible; /* jobs the last plan found no schedule for within the bound */
	double max_slowdown;	   /* CRUX_MAX_SLOWDOWN; 0 = no bound */
	uint64_t guard_changes;	   /* level lifts and returns made by the fairness guard */
	char topology[CRUX_PATH_MAX];
	char overrides_error[256]; /* why the last overrides file was refused; empty if fine */
	/* Cluster mode (cluster[0] == 0: embedded single-host mode). */
	char cluster[64];
	char host[64];		    /* this host's name in the cluster */
	char leader[64];	    /* the leader's host name; empty: none known */
	int64_t term;		    /* > 0: this host leads (its leader key's create revision) */
	int64_t schedule_revision;  /* etcd revision of the schedule applied; 0: none yet */
	int64_t schedule_input;	    /* etcd revision of the host views it was computed from */
	uint64_t schedules_written; /* by this host as leader */
	uint8_t cluster_stale;	    /* etcd unreachable: the last schedule stays in force */
	uint8_t reserved2[7];
	char cluster_error[160];  /* while stale: why (etcd's last error) */
	uint32_t cluster_resyncs; /* another etcd store detected: resynchronised */
	uint32_t reserved3;
	char cluster_resync[160]; /* the last resynchronisation's reason */
	struct cruxd_status_job jobs[CRUXD_STATUS_MAX_JOBS];
	struct cruxd_status_peer peers[CRUXD_STATUS_MAX_PEERS];
};

struct cruxd_status_file {
	struct crux_shm_header hdr;
	crux_seq_t seq;
	uint64_t pad[7];
	struct cruxd_status_body body;
};

struct cruxd_status_writer;

/* Create (replace) the status record. */
crux_status_t cruxd_status_writer_open(const char *dir, struct cruxd_status_writer **out);
/* Publish a body (only the first njobs/npeers entries are copied). */
void cruxd_status_publish(struct cruxd_status_writer *w, const struct cruxd_status_body *b);
/* Heartbeat only. */
void cruxd_status_heartbeat(struct cruxd_status_writer *w);
/* Close; with 'remove', unlink the file (clean shutdown). */
void cruxd_status_writer_close(struct cruxd_status_writer *w, bool remove);

/*
 * Read a consistent copy. CRUX_ERR_NOENT when no agent ever ran here;
 * *heartbeat_ns and *pid (may be NULL) tell whether it is alive.
 */
crux_status_t cruxd_status_read(const char *dir, struct cruxd_status_body *out,
				uint64_t *heartbeat_ns);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_AGENT_STATUS_H */
