/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sequence counter (seqlock) for records in shared memory: one writer, any
 * number of readers in other processes. Readers never block and never see a
 * torn record: they retry a bounded number of times and then report
 * CRUX_ERR_BUSY. An odd counter means a write is in progress.
 */
#ifndef CRUX_SEQLOCK_H
#define CRUX_SEQLOCK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "crux/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Default bound on read attempts before CRUX_ERR_BUSY. */
#define CRUX_SEQ_MAX_RETRIES 64

typedef _Atomic uint64_t crux_seq_t;

static inline void crux_seq_write_begin(crux_seq_t *seq)
{
	uint64_t s = atomic_load_explicit(seq, memory_order_relaxed);
	atomic_store_explicit(seq, s + 1, memory_order_relaxed);
	/* Order the odd counter before every data store that follows. */
	atomic_thread_fence(memory_order_release);
}

static inline void crux_seq_write_end(crux_seq_t *seq)
{
	uint64_t s = atomic_load_explicit(seq, memory_order_relaxed);
	atomic_store_explicit(seq, s + 1, memory_order_release);
}

/* Start a read; returns the counter to pass to crux_seq_read_ok. */
static inline uint64_t crux_seq_read_begin(const crux_seq_t *seq)
{
	return atomic_load_explicit((crux_seq_t *)seq, memory_order_acquire);
}

/* True when the data read since 'start' is consistent. */
static inline int crux_seq_read_ok(const crux_seq_t *seq, uint64_t start)
{
	atomic_thread_fence(memory_order_acquire);
	return (start & 1u) == 0 &&
	       atomic_load_explicit((crux_seq_t *)seq, memory_order_relaxed) == start;
}

/* Spin-wait hint between read attempts: lets a writer on the sibling thread finish. */
static inline void crux_seq_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Which region of 'rec' to read now; the region begins with its counter. */
typedef const void *(*crux_seq_pick_fn)(const void *rec);
/* Copy what is needed out of 'region', read under counter value 'seq'. */
typedef void (*crux_seq_read_fn)(const void *region, uint64_t seq, void *arg);

/*
 * The reader's side of the protocol, the one loop every record reader uses.
 * Each attempt asks 'pick' for the region (a double-buffered record may have
 * switched banks since; NULL: 'rec' itself), whose first member is its
 * crux_seq_t, and lets 'read' copy out of it. What 'read' sees may be torn:
 * it must stay in bounds whatever it reads, and its result may be used only
 * when this returns CRUX_OK. A read counts only when 'pick' still returns the
 * region afterwards, so successive reads never go back a generation.
 * CRUX_ERR_BUSY after 'retries' attempts. Inlined
 * so that the data path's lookups make no indirect calls.
 */
static inline __attribute__((always_inline)) crux_status_t
crux_seq_read(const void *rec, crux_seq_pick_fn pick, crux_seq_read_fn read, void *arg,
	      unsigned retries)
{
	for (unsigned t = 0; t < retries; t++) {
		const void *region = pick ? pick(rec) : rec;
		const crux_seq_t *seq = (const crux_seq_t *)region;
		uint64_t s = crux_seq_read_begin(seq);
		if (s & 1u) {
			crux_seq_relax();
			continue;
		}
		read(region, s, arg);
		if (!crux_seq_read_ok(seq, s)) {
			crux_seq_relax();
			continue;
		}
		/*
		 * A reader preempted between pick and its counter load can find
		 * the bank it picked rewritten and consistent again before the
		 * writer made it active: a generation the record does not show
		 * yet, followed by an older one on the next read. Accept only
		 * the bank that is still the one to read.
		 */
		if (!pick)
			return CRUX_OK;
		atomic_thread_fence(memory_order_acquire);
		if (pick(rec) == region)
			return CRUX_OK;
	}
	return CRUX_ERR_BUSY;
}

#ifdef __cplusplus
}
#endif

#endif /* CRUX_SEQLOCK_H */
