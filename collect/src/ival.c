/* SPDX-License-Identifier: Apache-2.0 */
#include "ival.h"

#include <stdlib.h>

static int event_cmp(const void *a, const void *b)
{
	const struct cruxc_iv_event *x = a, *y = b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return 0;
}

/* Length of [a, b) inside the spans; *k only moves forward (a never decreases). */
static uint64_t inside(const struct cruxc_span *sp, size_t ns, size_t *k, uint64_t a, uint64_t b)
{
	uint64_t len = 0;

	while (*k < ns && sp[*k].end <= a)
		(*k)++;
	for (size_t j = *k; j < ns && sp[j].start < b; j++) {
		uint64_t lo = sp[j].start > a ? sp[j].start : a;
		uint64_t hi = sp[j].end < b ? sp[j].end : b;

		if (hi > lo)
			len += hi - lo;
	}
	return len;
}

crux_status_t cruxc_iv_account(const struct cruxc_iv *iv, size_t n, const struct cruxc_span *spans,
			       size_t nspans, struct cruxc_iv_event *scratch,
			       struct cruxc_busy *out)
{
	struct cruxc_busy b = {0, 0, 0};
	size_t ne = 0, k = 0;
	int32_t count[2] = {0, 0};

	if ((n && (!iv || !scratch)) || (nspans && !spans) || !out)
		return CRUX_ERR_INVAL;
	for (size_t j = 0; j < nspans; j++) {
		if (spans[j].end < spans[j].start || (j && spans[j].start < spans[j - 1].end))
			return CRUX_ERR_INVAL;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t kind = iv[i].kind == CRUXC_IV_COMM ? 1 : 0;

		if (iv[i].end < iv[i].start)
			return CRUX_ERR_INVAL;
		if (iv[i].end == iv[i].start)
			continue;
		scratch[ne++] = (struct cruxc_iv_event){iv[i].start, 1, kind};
		scratch[ne++] = (struct cruxc_iv_event){iv[i].end, -1, kind};
	}
	qsort(scratch, ne, sizeof(*scratch), event_cmp);
	for (size_t i = 0; i < ne; i++) {
		count[scratch[i].kind] += scratch[i].delta;
		if (i + 1 < ne && scratch[i + 1].t > scratch[i].t &&
		    (count[0] > 0 || count[1] > 0)) {
			uint64_t len = inside(spans, nspans, &k, scratch[i].t, scratch[i + 1].t);

			if (count[0] > 0)
				b.compute_ns += len;
			if (count[1] > 0)
				b.comm_ns += len;
			if (count[0] > 0 && count[1] > 0)
				b.overlap_ns += len;
		}
	}
	*out = b;
	return CRUX_OK;
}
