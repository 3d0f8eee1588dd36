/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Interval accounting: given GPU (or host) busy intervals of two kinds,
 * compute kernels and communication kernels, and the iteration spans to
 * account, measure inside the spans the union of compute intervals, the union
 * of communication intervals and their intersection (overlap). Exposed
 * communication ("stall") is comm - overlap.
 */
#ifndef CRUXC_IVAL_H
#define CRUXC_IVAL_H

#include <stddef.h>
#include <stdint.h>

#include "crux/status.h"

enum cruxc_iv_kind {
	CRUXC_IV_COMPUTE = 0,
	CRUXC_IV_COMM = 1,
};

struct cruxc_iv {
	uint64_t start; /* ns */
	uint64_t end;	/* ns, >= start */
	uint32_t kind;	/* enum cruxc_iv_kind */
	uint32_t reserved;
};

struct cruxc_span {
	uint64_t start;
	uint64_t end;
};

struct cruxc_busy {
	uint64_t compute_ns; /* union of compute intervals inside the spans */
	uint64_t comm_ns;    /* union of communication intervals inside the spans */
	uint64_t overlap_ns; /* both at once */
};

/* One sweep event; callers provide 2 * n of them as scratch. */
struct cruxc_iv_event {
	uint64_t t;
	int32_t delta;
	uint32_t kind;
};

/*
 * Account iv[0..n) (any order, overlapping allowed) inside spans[0..nspans)
 * (sorted by start, disjoint). 'scratch' holds 2 * n events.
 * CRUX_ERR_INVAL for unsorted or overlapping spans or an interval ending
 * before it starts.
 */
crux_status_t cruxc_iv_account(const struct cruxc_iv *iv, size_t n, const struct cruxc_span *spans,
			       size_t nspans, struct cruxc_iv_event *scratch,
			       struct cruxc_busy *out);

#endif /* CRUXC_IVAL_H */
