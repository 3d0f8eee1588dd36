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

/*
 * Copy 'len' bytes from a seqlock-protected 'src' to private 'dst'.
 * CRUX_OK with a consistent copy, or CRUX_ERR_BUSY after max_retries
 * attempts (dst then holds garbage and must not be used).
 */
static inline crux_status_t crux_seq_copy(const crux_seq_t *seq, void *dst, const void *src,
					  size_t len, unsigned max_retries)
{
	for (unsigned i = 0; i < max_retries; i++) {
		uint64_t s = crux_seq_read_begin(seq);
		if (s & 1u)
			continue;
		memcpy(dst, src, len);
		if (crux_seq_read_ok(seq, s))
			return CRUX_OK;
	}
	return CRUX_ERR_BUSY;
}

#ifdef __cplusplus
}
#endif

#endif /* CRUX_SEQLOCK_H */
