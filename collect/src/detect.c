/* SPDX-License-Identifier: Apache-2.0 */
#include "detect.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define HASH_SLOTS	   1024 /* > 2 * CRUXC_DET_MAX_DISTINCT, power of two */
#define HASH_BASE	   0x100000001b3ull
#define MIN_SHARE	   0.5 /* the mode segment must be more than this share of the anchor's segments */
#define MIN_COVERAGE	   0.3 /* ... and cover this much of the sequence */
#define MIN_SHORT_COVERAGE 0.5

struct seg {
	uint64_t hash;
	uint32_t len;
	uint32_t pos;
};

struct cand {
	uint64_t anchor;
	uint32_t gram;
	uint32_t len;
	uint32_t pos; /* start of one mode segment */
	uint32_t mode;
	uint32_t total;
	uint64_t hash;
	double covered;
};

struct distinct {
	uint64_t key;
	uint32_t count;
	uint32_t first;
	uint32_t last;
};

struct cruxc_det_scratch {
	uint64_t prefix[CRUXC_DET_MAX_CALLS + 1];
	uint64_t power[CRUXC_DET_MAX_CALLS + 1];
	uint32_t next[CRUXC_DET_MAX_CALLS];
	uint64_t gram[CRUXC_DET_MAX_CALLS];
	int16_t slot[HASH_SLOTS]; /* index into dist, -1 empty */
	struct distinct dist[CRUXC_DET_MAX_DISTINCT];
	struct seg segs[CRUXC_DET_MAX_CALLS];
	struct cand cands[CRUXC_DET_MAX_GRAM * CRUXC_DET_MAX_DISTINCT];
};

crux_status_t cruxc_det_scratch_new(struct cruxc_det_scratch **out)
{
	struct cruxc_det_scratch *s = calloc(1, sizeof(*s));

	if (!s)
		return CRUX_ERR_NOMEM;
	s->power[0] = 1;
	for (size_t i = 1; i <= CRUXC_DET_MAX_CALLS; i++)
		s->power[i] = s->power[i - 1] * HASH_BASE;
	*out = s;
	return CRUX_OK;
}

void cruxc_det_scratch_free(struct cruxc_det_scratch *s)
{
	free(s);
}

static inline uint64_t mix(uint32_t sig)
{
	return (uint64_t)sig * 0x9e3779b97f4a7c15ull + 1;
}

uint64_t cruxc_det_seq_hash(const uint32_t *sig, size_t n)
{
	uint64_t h = 0;

	for (size_t i = 0; i < n; i++)
		h = h * HASH_BASE + mix(sig[i]);
	return h;
}

static uint64_t range_hash(const struct cruxc_det_scratch *s, size_t p, size_t q)
{
	return s->prefix[q] - s->prefix[p] * s->power[q - p];
}

static int seg_cmp(const void *a, const void *b)
{
	const struct seg *x = a, *y = b;

	if (x->hash != y->hash)
		return x->hash < y->hash ? -1 : 1;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return 0;
}

/* Number the distinct keys of s->gram[from..n) and link their occurrences. */
static size_t index_distinct(size_t from, size_t n, struct cruxc_det_scratch *s)
{
	size_t nd = 0;
	uint32_t last_pos[CRUXC_DET_MAX_DISTINCT];

	memset(s->slot, 0xff, sizeof(s->slot));
	for (size_t i = from; i < n; i++) {
		uint64_t key = s->gram[i];
		uint32_t h = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 54); /* 10 bits */
		int idx = -1;

		s->next[i] = UINT32_MAX;
		for (size_t probe = 0; probe < HASH_SLOTS; probe++) {
			size_t k = (h + probe) & (HASH_SLOTS - 1);

			if (s->slot[k] < 0) {
				if (nd == CRUXC_DET_MAX_DISTINCT)
					break; /* too many kinds: ignore the rest as anchors */
				s->slot[k] = (int16_t)nd;
				s->dist[nd] = (struct distinct){key, 0, (uint32_t)i, (uint32_t)i};
				idx = (int)nd++;
				break;
			}
			if (s->dist[s->slot[k]].key == key) {
				idx = s->slot[k];
				break;
			}
		}
		if (idx < 0)
			continue;
		if (s->dist[idx].count)
			s->next[last_pos[idx]] = (uint32_t)i;
		s->dist[idx].count++;
		s->dist[idx].last = (uint32_t)i;
		last_pos[idx] = (uint32_t)i;
	}
	return nd;
}

/* Mode segment of the anchor 'd'; false when it does not repeat. */
static bool anchor_mode(struct cruxc_det_scratch *s, const struct distinct *d, size_t n,
			uint32_t gram, struct cand *c)
{
	size_t k = 0, best = 0, run = 0;
	struct seg *mode = NULL;

	for (uint32_t p = d->first; s->next[p] != UINT32_MAX; p = s->next[p]) {
		uint32_t q = s->next[p];

		s->segs[k++] = (struct seg){range_hash(s, p, q), q - p, p};
	}
	if (k < 2)
		return false;
	qsort(s->segs, k, sizeof(s->segs[0]), seg_cmp);
	for (size_t i = 0; i < k; i++) {
		run = (i && seg_cmp(&s->segs[i], &s->segs[i - 1]) == 0) ? run + 1 : 1;
		if (run > best) {
			best = run;
			mode = &s->segs[i];
		}
	}
	/* Strictly more than half: an anchor that occurs twice per iteration splits
	 * it into two segments that alternate, each exactly half (A A B: "A", "A B"). */
	if (best < 2 || (double)best <= MIN_SHARE * (double)k)
		return false;
	*c = (struct cand){
	    .anchor = d->key,
	    .gram = gram,
	    .len = mode->len,
	    .pos = mode->pos,
	    .mode = (uint32_t)best,
	    .total = (uint32_t)k,
	    .hash = mode->hash,
	    .covered = (double)best * mode->len / (double)n,
	};
	return true;
}

#define MAX_EDITS 16

/*
 * Fewer than 'limit' insertions plus deletions turn a[0..la) into b[0..lb)?
 * b is the short cycle sig[sp..sp+ls) started at offset o and repeated. A
 * diagonal band of width 'limit' is enough: more edits fail anyway.
 */
static bool within_edits(const uint32_t *sig, uint32_t lp, uint32_t la, uint32_t sp, uint32_t ls,
			 uint32_t o, uint32_t lb, uint32_t limit)
{
	uint32_t prev[2 * MAX_EDITS + 1], cur[2 * MAX_EDITS + 1];
	const uint32_t inf = UINT32_MAX / 2, w = 2 * limit + 1;

	/* Row i holds D[i][j] for j = i - limit .. i + limit (index j - i + limit). */
	for (uint32_t k = 0; k < w; k++) {
		int64_t j = (int64_t)k - limit;

		prev[k] = (j >= 0 && j <= (int64_t)lb) ? (uint32_t)j : inf;
	}
	for (uint32_t i = 1; i <= la; i++) {
		uint32_t best = inf;

		for (uint32_t k = 0; k < w; k++) {
			int64_t j = (int64_t)i + (int64_t)k - limit;
			uint32_t v = inf;

			if (j < 0 || j > (int64_t)lb) {
				cur[k] = inf;
				continue;
			}
			if (j == 0) {
				v = i;
			} else {
				/* prev[k + 1]: D[i-1][j]; cur[k - 1]: D[i][j-1]; prev[k]:
				 * D[i-1][j-1] */
				if (sig[lp + i - 1] == sig[sp + (uint32_t)((j - 1 + o) % ls)])
					v = prev[k];
				if (k + 1 < w && prev[k + 1] + 1 < v)
					v = prev[k + 1] + 1;
				if (k > 0 && cur[k - 1] + 1 < v)
					v = cur[k - 1] + 1;
			}
			cur[k] = v;
			if (v < best)
				best = v;
		}
		if (best > limit)
			return false;
		memcpy(prev, cur, w * sizeof(cur[0]));
	}
	/* D[la][lb] sits at index lb - la + limit. */
	return (int64_t)lb - la + limit >= 0 && lb - la + limit < w &&
	       prev[lb - la + limit] <= limit;
}

/*
 * With timestamps: the short period is an iteration only if the long one
 * shows its rhythm, i.e. a long pause (compute) in every short period, not
 * a single long pause per long period (many equal DDP buckets).
 */
static bool rhythm_matches(const uint64_t *t, size_t n, uint32_t lp, uint32_t lt, uint32_t reps)
{
	uint64_t max = 0;
	uint32_t big = 0, end = lp + lt < n ? lp + lt : (uint32_t)n - 1;

	for (uint32_t i = lp; i < end; i++) {
		if (t[i + 1] - t[i] > max)
			max = t[i + 1] - t[i];
	}
	for (uint32_t i = lp; i < end; i++)
		big += t[i + 1] - t[i] >= max / 3;
	return big >= reps;
}

/*
 * True when 'longer' (length lt at lp) is 'shorter' (ls at sp) repeated,
 * give or take a few inserted or missing calls (a metric all-reduce every
 * few steps, a skipped call): the long period is then the short one plus
 * noise. The long segment may start anywhere in the short cycle, so the
 * rotations that line it up with one of the long segment's first calls are
 * tried. A one-call period is never inferred this way: a run of equal
 * buckets looks just like it, and counting k steps as one iteration leaves
 * the per-iteration ratios the scheduler uses unchanged.
 */
static bool repeat_plus_noise(const uint32_t *sig, const uint64_t *t, size_t n, uint32_t lp,
			      uint32_t lt, uint32_t sp, uint32_t ls)
{
	uint32_t q = lt / ls;

	if (ls < 2)
		return false;
	for (uint32_t reps = q > 1 ? q - 1 : 1; reps <= q + 1; reps++) {
		uint32_t lb = reps * ls, diff = lb > lt ? lb - lt : lt - lb;
		uint32_t limit = reps / 8 + 1 < 2 ? 2 : reps / 8 + 1;
		bool ok = false;

		if (limit > MAX_EDITS)
			limit = MAX_EDITS;
		/* Noise is rare: at least 4 short periods per long one. */
		if (reps < 4 || diff == 0 || diff > limit)
			continue;
		for (uint32_t f = 0; f < 3 && f < lt && !ok; f++) {
			uint32_t tries = 0;

			for (uint32_t o = 0; o < ls && tries < 4 && !ok; o++) {
				if (sig[sp + o] != sig[lp + f])
					continue;
				tries++;
				/* Offset of the long segment's first call in the short cycle. */
				ok = within_edits(sig, lp, lt, sp, ls, (o + ls - f % ls) % ls, lb,
						  limit) ||
				     within_edits(sig, lp, lt, sp, ls, o, lb, limit);
			}
		}
		if (ok && (!t || rhythm_matches(t, n, lp, lt, reps)))
			return true;
	}
	return false;
}

crux_status_t cruxc_detect(const uint32_t *sig, const uint64_t *t, size_t n,
			   struct cruxc_det_scratch *s, struct cruxc_det_result *out)
{
	size_t nc = 0;
	struct cand *best = NULL;

	if (!sig || !s || !out || n > CRUXC_DET_MAX_CALLS)
		return CRUX_ERR_INVAL;
	if (n < 4)
		return CRUX_ERR_NOENT;
	s->prefix[0] = 0;
	for (size_t i = 0; i < n; i++)
		s->prefix[i + 1] = s->prefix[i] * HASH_BASE + mix(sig[i]);
	for (uint32_t g = 1; g <= CRUXC_DET_MAX_GRAM; g++) {
		size_t nd;

		for (size_t i = g - 1; i < n; i++)
			s->gram[i] = range_hash(s, i + 1 - g, i + 1);
		nd = index_distinct(g - 1, n, s);
		for (size_t i = 0; i < nd; i++) {
			if (s->dist[i].count < 3)
				continue;
			if (anchor_mode(s, &s->dist[i], n, g, &s->cands[nc]))
				nc++;
		}
	}
	for (size_t i = 0; i < nc; i++) {
		struct cand *c = &s->cands[i];

		/*
		 * Most calls covered; on a near tie the longer (more complete) period,
		 * then the shorter anchor.
		 */
		if (!best || c->covered > best->covered + 0.02 ||
		    (c->covered > best->covered - 0.02 &&
		     (c->len > best->len || (c->len == best->len && c->gram < best->gram))))
			best = c;
	}
	if (!best || best->covered < MIN_COVERAGE)
		return CRUX_ERR_NOENT;
	for (bool changed = true; changed;) {
		struct cand *shorter = NULL;

		changed = false;
		for (size_t i = 0; i < nc; i++) {
			struct cand *c = &s->cands[i];

			if (c->len >= best->len || c->covered < MIN_SHORT_COVERAGE)
				continue;
			if (shorter && (c->len < shorter->len ||
					(c->len == shorter->len && c->gram >= shorter->gram)))
				continue;
			if (repeat_plus_noise(sig, t, n, best->pos, best->len, c->pos, c->len))
				shorter = c;
		}
		if (shorter) {
			best = shorter;
			changed = true;
		}
	}
	*out = (struct cruxc_det_result){
	    .anchor = best->anchor,
	    .gram = best->gram,
	    .length = best->len,
	    .seg_hash = best->hash,
	    .repeats = best->mode,
	    .share = (double)best->mode / best->total,
	    .coverage = best->covered,
	};
	return CRUX_OK;
}
