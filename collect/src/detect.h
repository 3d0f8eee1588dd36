/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Iteration detection from the sequence of NCCL call signatures.
 *
 * A training iteration repeats the same calls in the same order. For every
 * anchor x that occurs several times (a call signature, or a short run of up
 * to CRUXC_DET_MAX_GRAM consecutive signatures when no single call is unique
 * per iteration, as in pure pipeline parallelism), the calls between two
 * consecutive occurrences of x form a segment; if x occurs once per
 * iteration, most of its segments are identical (the "mode segment") and
 * together they cover most of the calls. The detector picks the anchor whose mode segment covers
 * the most calls (the longest stable repeating signature), then prefers a shorter period when the
 * long one is only "short period repeated q times plus or minus a few calls" (a metric all-reduce
 * every q steps, say).
 *
 * Pure code on arrays; no allocation after cruxc_det_init.
 */
#ifndef CRUXC_DETECT_H
#define CRUXC_DETECT_H

#include <stddef.h>
#include <stdint.h>

#include "crux/status.h"

#define CRUXC_DET_MAX_CALLS    4096 /* longest sequence analysed */
#define CRUXC_DET_MAX_DISTINCT 256  /* distinct anchors considered per gram length */
#define CRUXC_DET_MAX_GRAM     4    /* longest run of calls used as an anchor */

struct cruxc_det_result {
	uint64_t
	    anchor; /* cruxc_det_seq_hash of the 'gram' calls ending at an iteration's first call */
	uint32_t gram;	   /* how many calls the anchor spans (1: a single call) */
	uint32_t length;   /* calls per iteration */
	uint64_t seg_hash; /* hash of the iteration's call sequence */
	uint32_t repeats;  /* identical iterations seen */
	double share;	   /* identical iterations / all segments of the anchor */
	double coverage;   /* calls inside identical iterations / all calls */
};

struct cruxc_det_scratch;

crux_status_t cruxc_det_scratch_new(struct cruxc_det_scratch **out);
void cruxc_det_scratch_free(struct cruxc_det_scratch *s);

/*
 * Analyse sig[0..n) (oldest first, n <= CRUXC_DET_MAX_CALLS); t[0..n) are
 * the calls' start times (ns) or NULL. Times only settle whether a long
 * period is a short one plus noise: with them, a pause (compute) in every
 * short period is required. CRUX_ERR_NOENT when no repeating pattern is found.
 */
crux_status_t cruxc_detect(const uint32_t *sig, const uint64_t *t, size_t n,
			   struct cruxc_det_scratch *s, struct cruxc_det_result *out);

/* Hash of sig[0..n) as used for seg_hash. */
uint64_t cruxc_det_seq_hash(const uint32_t *sig, size_t n);

#endif /* CRUXC_DETECT_H */
