/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Decision table file layout (private to common; version CRUX_DT_VERSION):
 *
 *   struct crux_shm_header   generation, heartbeat (atomics), writer pid
 *   dt_top                   'active': which of the two banks readers use
 *   bank[0], bank[1]         settings + jobs + routes + hash indexes
 *
 * Each bank is one seqlock region. The writer fills the inactive bank, then
 * flips 'active': a reader only retries when the writer laps it twice, so
 * lookups almost never retry even when the agent publishes continuously.
 * Jobs are found through an open-addressing index keyed by the job key,
 * routes through one keyed by (job key, peer address); index slots hold
 * entry number + 1 (0 = empty) and are bounds-checked on every use.
 *
 * Roles: decision_layout.c (validation, the bank read), decision_reader.c
 * (mapped readers), decision_mirror.c (v1 pread copies) in libcrux-common;
 * the writer in libcrux-agentside (common/agentside).
 */
#ifndef CRUX_DECISION_LAYOUT_H
#define CRUX_DECISION_LAYOUT_H

#include <stddef.h>
#include <string.h>

#include "crux/decision.h"
#include "crux/seqlock.h"
#include "crux/shm.h"

#define DT_JOB_BUCKETS	    (2 * CRUX_DT_MAX_JOBS)
#define DT_ROUTE_BUCKETS    (2 * CRUX_DT_MAX_ROUTES)
#define DT_MIN_BUCKETS	    8u
#define DT_READ_ALL_RETRIES (16 * CRUX_SEQ_MAX_RETRIES)

struct dt_job_slot {
	uint64_t key;
	char id[CRUX_JOB_ID_LEN];
	uint8_t level;
	uint8_t state;
	uint16_t reserved;
	uint32_t reserved2;
};

struct dt_route_slot {
	uint64_t key;
	struct crux_addr peer;
	uint16_t path_id;
	uint8_t nports;
	uint8_t reserved;
	uint16_t ports[CRUX_ROUTE_MAX_PORTS];
};

struct dt_bank {
	crux_seq_t seq;
	uint64_t generation;
	uint32_t nlevels;
	uint32_t default_level;
	uint64_t heartbeat_timeout_ns;
	struct crux_level_map levels[CRUX_MAX_LEVELS];
	uint32_t njobs;
	uint32_t nroutes;
	uint32_t job_mask; /* index buckets - 1 (power of two - 1) */
	uint32_t route_mask;
	uint64_t reserved[2];
	uint16_t job_index[DT_JOB_BUCKETS];
	uint16_t route_index[DT_ROUTE_BUCKETS];
	struct dt_job_slot jobs[CRUX_DT_MAX_JOBS];
	struct dt_route_slot routes[CRUX_DT_MAX_ROUTES];
};

struct dt_top {
	_Atomic uint32_t active;
	uint32_t reserved[15];
};

struct dt_file {
	struct crux_shm_header hdr;
	struct dt_top top;
	struct dt_bank bank[2];
};

_Static_assert(sizeof(struct dt_job_slot) == 80, "job slot layout");
_Static_assert(sizeof(struct dt_route_slot) == 48, "route slot layout");
_Static_assert(sizeof(struct crux_level_map) == 8, "level map layout");
_Static_assert(CRUX_DT_MAX_ROUTES < 65535 && CRUX_DT_MAX_JOBS < 65535, "16-bit index slots");
_Static_assert((CRUX_MAX_LEVELS & (CRUX_MAX_LEVELS - 1)) == 0, "level mask");

struct crux_dt_reader {
	struct crux_shm_map map;
	const struct dt_file *f;
	void *owned; /* a private copy this reader frees (crux_dt_reader_open_copy) */
};

/* Plain loads the compiler may not repeat: a value checked is the value used. */
#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/*
 * Index hashes (part of the file layout: writer and readers must agree).
 * Job keys are already FNV-1a hashes: one multiply spreads them. A route
 * mixes the peer's significant address bytes into the job key first.
 */
static inline uint32_t job_hash(uint64_t key)
{
	return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32);
}

/* The peer address as two words, bytes beyond the family's length zeroed. */
struct peer_words {
	uint64_t lo, hi;
	uint8_t family;
};

static inline struct peer_words peer_words(const struct crux_addr *a)
{
	struct peer_words w;
	memcpy(&w.lo, a->bytes, 8);
	memcpy(&w.hi, a->bytes + 8, 8);
	w.family = a->family;
	if (a->family == 4) {
		w.lo &= 0xffffffffull; /* little endian: the first 4 bytes */
		w.hi = 0;
	} else if (a->family != 6) {
		w.lo = w.hi = 0;
	}
	return w;
}

static inline uint32_t route_hash(uint64_t key, const struct peer_words *p)
{
	uint64_t x =
	    key ^ (p->lo * 0xff51afd7ed558ccdull) ^ (p->hi * 0xc4ceb9fe1a85ec53ull) ^ p->family;
	return job_hash(x);
}

_Static_assert(offsetof(struct dt_bank, seq) == 0, "a bank begins with its counter");

/* The bank readers use now: re-chosen on every read attempt. */
static inline const void *crux_dt_active_bank(const void *file)
{
	const struct dt_file *f = file;
	return &f->bank[atomic_load_explicit(&f->top.active, memory_order_acquire) & 1u];
}

/* One consistent read of the active bank of 'f' (crux_seq_read). */
static inline __attribute__((always_inline)) crux_status_t
crux_dt_bank_read(const struct dt_file *f, crux_seq_read_fn read, void *arg, unsigned retries)
{
	return crux_seq_read(f, crux_dt_active_bank, read, arg, retries);
}

/* The settings a bank holds. */
void crux_dt_bank_settings(const struct dt_bank *b, struct crux_dt_settings *s);

/* Whole-bank check on a private copy (reader open, read_all, writer restart, fuzzing). */
crux_status_t crux_dt_bank_validate(const struct dt_bank *b, char *err, size_t errlen);

/* Consistent copy of the active bank's used part into private 'dst'. */
crux_status_t crux_dt_bank_snapshot(const struct dt_file *f, struct dt_bank *dst, unsigned retries);

/* A bank's first 'nj' jobs and 'nr' routes in the API's form. */
void crux_dt_bank_entries(const struct dt_bank *b, uint32_t nj, uint32_t nr,
			  struct crux_dt_contents *out);

/*
 * A validated, consistent pread copy of the table file on 'fd' into 'buf'
 * ('tries' attempts; 'dir' names the file in messages).
 */
crux_status_t crux_dt_copy_from_fd(int fd, const char *dir, struct dt_file *buf, int tries,
				   char *err, size_t errlen);

#endif /* CRUX_DECISION_LAYOUT_H */
