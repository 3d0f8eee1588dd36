/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Interval accounting: given GPU (or host) busy intervals of two kinds,
 * compute kernels and communication kernels, and the iteration spans to
 * account, measure inside the spans the union of compute intervals, the union
 * of communication intervals and their intersection (overlap). Exposed
 * communication ("stall") is comm - overlap.
 */
#ifndef CRUXP_IVAL_H
#define CRUXP_IVAL_H

#include <stddef.h>
#include <stdint.h>

#include "crux/status.h"

enum cruxp_iv_kind {
	CRUXP_IV_COMPUTE = 0,
	CRUXP_IV_COMM = 1,
};

struct cruxp_iv {
	uint64_t start; /* ns */
	uint64_t end;	/* ns, >= start */
	uint32_t kind;	/* enum cruxp_iv_kind */
	uint32_t reserved;
};

struct cruxp_span {
	uint64_t start;
	uint64_t end;
};

struct cruxp_busy {
	uint64_t compute_ns; /* union of compute intervals inside the spans */
	uint64_t comm_ns;    /* union of communication intervals inside the spans */
	uint64_t overlap_ns; /* both at once */
};

/* One sweep event; callers provide 2 * n of them as scratch. */
struct cruxp_iv_event {
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
crux_status_t cruxp_iv_account(const struct cruxp_iv *iv, size_t n, const struct cruxp_span *spans,
			       size_t nspans, struct cruxp_iv_event *scratch,
			       struct cruxp_busy *out);

#endif /* CRUXP_IVAL_H */
