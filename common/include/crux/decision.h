/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The decision table: written only by the agent (cruxd), or by cruxctl when
 * no agent runs; read by every training process (the plugin) on its data
 * path. File CRUX_DT_FILE in the shared-memory directory, mode 0644.
 *
 * Levels: 0..nlevels-1, HIGHER NUMBER = HIGHER PRIORITY; level nlevels-1 is
 * the top level (given to jobs still being profiled). The header maps every
 * level to a DSCP value, a socket priority (SO_PRIORITY) and an InfiniBand
 * SL so operators can match their switch configuration.
 *
 * Concurrency: jobs and routes are published under one seqlock (a reader
 * copies one entry and retries if the writer was active); the heartbeat is a
 * separate atomic so refreshing it never makes readers retry. The writer
 * holds an exclusive flock(2) on the file for as long as it owns the table.
 */
#ifndef CRUX_DECISION_H
#define CRUX_DECISION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "crux/addr.h"
#include "crux/jobid.h"
#include "crux/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CRUX_DT_FILE			     "decision.tbl"
#define CRUX_DT_MAGIC			     0x44585243u /* "CRXD" little-endian */
#define CRUX_DT_VERSION			     2 /* 2: contract v2 (sealed memfd handed out by cruxd) */
#define CRUX_MAX_LEVELS			     8
#define CRUX_DEFAULT_LEVELS		     4
#define CRUX_DT_MAX_JOBS		     1024
#define CRUX_DT_MAX_ROUTES		     4096
#define CRUX_ROUTE_MAX_PORTS		     8 /* source ports per route: one per data socket */
#define CRUX_DT_DEFAULT_HEARTBEAT_TIMEOUT_NS (5ull * 1000000000ull)
#define CRUX_PATH_NONE			     0xffffu

enum crux_job_state {
	CRUX_JOB_PROFILING = 0,	 /* new job: top level while it is measured */
	CRUX_JOB_SCHEDULED = 1,	 /* level and paths from the scheduler */
	CRUX_JOB_OVERRIDDEN = 2, /* an operator's override (cruxctl set) */
};

struct crux_level_map {
	uint8_t dscp;	   /* 0..63; IP TOS = dscp << 2; RoCE traffic class = dscp << 2 */
	uint8_t ib_sl;	   /* 0..15 */
	uint16_t weight;   /* ETS / WRR / HTB weight (CRUX_LEVEL_WEIGHTS); 0 = strict priority */
	int32_t sock_prio; /* SO_PRIORITY, 0..6 without CAP_NET_ADMIN */
};

/* The decision for one job (public view; the file layout is private). */
struct crux_dt_job {
	uint64_t job_key;
	char job_id[CRUX_JOB_ID_LEN];
	uint8_t level;
	uint8_t state; /* enum crux_job_state */
	uint16_t reserved;
	uint32_t reserved2;
};

/* The path for (job, peer host): a path id and the source ports that take it. */
struct crux_dt_route {
	uint64_t job_key;
	struct crux_addr peer;
	uint16_t path_id;
	uint8_t nports;
	uint8_t reserved;
	uint16_t ports[CRUX_ROUTE_MAX_PORTS];
};

/* Global settings in the table header. */
struct crux_dt_settings {
	uint32_t nlevels;	/* K, 1..CRUX_MAX_LEVELS */
	uint32_t default_level; /* for jobs the table does not name */
	struct crux_level_map levels[CRUX_MAX_LEVELS];
	uint64_t heartbeat_timeout_ns; /* readers treat an older heartbeat as stale */
};

/* A whole table, in private memory (cruxctl status, agent restart). */
struct crux_dt_contents {
	struct crux_dt_settings settings;
	uint64_t generation;
	uint64_t heartbeat_ns;
	pid_t writer_pid;
	uint32_t njobs;
	uint32_t nroutes;
	struct crux_dt_job jobs[CRUX_DT_MAX_JOBS];
	struct crux_dt_route routes[CRUX_DT_MAX_ROUTES];
};

/* What the data path gets for one (job, peer). */
struct crux_decision {
	uint64_t generation;
	uint8_t level;
	uint8_t state;			 /* meaningful when job_found */
	bool job_found;			 /* false: the table's default level applies */
	bool route_found;		 /* false: plain ECMP (ephemeral ports) */
	struct crux_level_map class_map; /* the level's DSCP / priority / SL */
	uint16_t path_id;
	uint8_t nports;
	uint16_t ports[CRUX_ROUTE_MAX_PORTS];
};

/* Default settings: K levels, level l -> DSCP 8*l, sock prio l, SL l; default level 0. */
void crux_dt_settings_default(uint32_t nlevels, struct crux_dt_settings *out);
/* Check ranges (nlevels, default_level, dscp, sl, unique DSCPs). */
crux_status_t crux_dt_settings_validate(const struct crux_dt_settings *s, char *err, size_t errlen);

/* ---- Reader (plugin, cruxctl) ---- */

struct crux_dt_reader;

/*
 * Map the table read-only and validate it. CRUX_ERR_NOENT when no table
 * exists, CRUX_ERR_CORRUPT / CRUX_ERR_VERSION / CRUX_ERR_PERM as found.
 */
crux_status_t crux_dt_reader_open(const char *dir, struct crux_dt_reader **out);
void crux_dt_reader_close(struct crux_dt_reader *r);

/* Current generation (one atomic load): cheap "did anything change?". */
uint64_t crux_dt_generation(const struct crux_dt_reader *r);

/* Heartbeat age in ns at 'now_ns' (CLOCK_MONOTONIC); UINT64_MAX if never beaten. */
uint64_t crux_dt_heartbeat_age(const struct crux_dt_reader *r, uint64_t now_ns);

/* True when the heartbeat is older than the table's timeout at now_ns. */
bool crux_dt_is_stale(const struct crux_dt_reader *r, uint64_t now_ns);

/*
 * The data-path lookup: no locks, no allocation, no system calls.
 * 'peer' may be NULL (no route wanted). CRUX_OK with *out filled (job or
 * default level; route or none); CRUX_ERR_BUSY when the writer kept it busy
 * past the retry bound; CRUX_ERR_CORRUPT if an entry fails validation.
 * Staleness is not checked here (see crux_dt_is_stale).
 */
crux_status_t crux_dt_lookup(const struct crux_dt_reader *r, uint64_t job_key,
			     const struct crux_addr *peer, struct crux_decision *out);

/*
 * The table header's map for 'level' (DSCP, socket priority, SL) as the data
 * path would apply it: no locks, allocation or system calls. A level at or
 * above the table's number of levels gives the top level's map. CRUX_ERR_BUSY
 * when the writer kept it busy past the retry bound; CRUX_ERR_CORRUPT when
 * the header fails validation. 'out' is set only on CRUX_OK.
 */
crux_status_t crux_dt_level_map(const struct crux_dt_reader *r, uint32_t level,
				struct crux_level_map *out);

/*
 * Consistent copy of the whole table (allocates nothing; 'out' is large).
 * Entries are copied straight into 'out' and checked afterwards, so on an
 * error 'out' may hold a partial copy: use it only on CRUX_OK.
 */
crux_status_t crux_dt_read_all(const struct crux_dt_reader *r, struct crux_dt_contents *out);

/* ---- Variants with an error message instead of a log line ---- */

/*
 * As the functions above (the writer's: crux/decision_writer.h), but
 * nothing is logged: on failure 'err' (may be
 * NULL) receives a message naming the file, the problem and the fix. The
 * plugin uses these to report a missing or bad table once in NCCL's log.
 */
crux_status_t crux_dt_reader_open_ex(const char *dir, struct crux_dt_reader **out, char *err,
				     size_t errlen);

/*
 * False when the table file this reader maps was replaced or removed (a new
 * agent replaced a bad table): reopen then. Two system calls: call it when
 * the heartbeat looks stale, never on the data path.
 */
bool crux_dt_reader_is_current(const struct crux_dt_reader *r);

/* Size in bytes of a decision table file of this layout version. */
size_t crux_dt_file_size(void);

/*
 * The readers' validation of a whole table image (header, settings, counts,
 * indexes, entries) on memory of 'size' bytes, 8-byte aligned: what
 * crux_dt_reader_open runs after mapping the file (fuzzing, tests).
 */
crux_status_t crux_dt_validate_mapped(const void *base, size_t size, char *err, size_t errlen);

/*
 * A reader over a table image in memory (validated as above; CRUX_ERR_BUSY
 * at validation is accepted as for files). The buffer must outlive the
 * reader; crux_dt_reader_close does not free it.
 */
crux_status_t crux_dt_reader_open_buffer(const void *base, size_t size, struct crux_dt_reader **out,
					 char *err, size_t errlen);

/*
 * A reader over a private copy of 'dir'/decision.tbl read with pread (never
 * mapped, so nothing done to the file can fault the caller): a snapshot for
 * tools (cruxctl). The copy is checked like a seqlock read and retried while
 * the writer moves.
 */
crux_status_t crux_dt_reader_open_copy(const char *dir, struct crux_dt_reader **out, char *err,
				       size_t errlen);
/*
 * Contract v1 readers (no agent socket: the plugin with cruxctl set or
 * crux-tb-decide alone). The file is never mapped: a mirror keeps private
 * copies read with pread (checked like a seqlock read) and hands out a
 * reader over the newest one, so nothing done to the file can fault the
 * caller. crux_dt_mirror_refresh re-reads the header only (two preads) when
 * the writer and generation are unchanged and then just copies the heartbeat
 * into the copy in use; otherwise it takes a whole new copy into another of
 * three buffers. The readers belong to the mirror (never crux_dt_reader_close
 * them) and stay valid until crux_dt_mirror_close; a reader handed out stays
 * unchanged until two more full copies were taken, so callers rate-limit
 * refreshes (the plugin: at most one per 100 ms). On an error the copy in
 * use is left alone (its heartbeat then ages into staleness). Refresh is not
 * thread-safe: one caller at a time.
 */
struct crux_dt_mirror;
crux_status_t crux_dt_mirror_open(const char *dir, struct crux_dt_mirror **out,
				  struct crux_dt_reader **reader, char *err, size_t errlen);
crux_status_t crux_dt_mirror_refresh(struct crux_dt_mirror *m, struct crux_dt_reader **reader,
				     char *err, size_t errlen);
void crux_dt_mirror_close(struct crux_dt_mirror *m);
/* True when 'r' is one of the mirror's readers (which the caller must not close). */
bool crux_dt_mirror_owns(const struct crux_dt_mirror *m, const struct crux_dt_reader *r);

/* A reader over a received table memfd: seals and size checked before mapping. */
crux_status_t crux_dt_reader_open_fd(int fd, struct crux_dt_reader **out, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_DECISION_H */
