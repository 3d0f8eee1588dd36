/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Torn visibility (CRUX_SOFTRDMA_TORN=CHUNK): what a responder's CPU may see
 * of an RDMA WRITE on a NIC. The payload lands in CHUNK-aligned pieces (64:
 * cache lines; 32: the size NCCL's alignment assert guards against under
 * relaxed ordering) in random order; of a plain WRITE about half the pieces
 * land only 0.2-2 ms after the responder acknowledged it, so the requester's
 * completion can come first. What hardware orders is kept: a WRITE_WITH_IMM
 * or SEND completion of a QP is pushed after every earlier WRITE of that QP
 * landed; a later WRITE or READ of the same bytes comes after the earlier
 * WRITE; a deregistered MR or destroyed QP is written no more.
 */
#include <stdlib.h>
#include <string.h>

#include "sr.h"

struct sr_torn {
	struct sr_torn *next;
	struct sr_qp *qp;
	uint8_t *dst;
	uint32_t len;
	uint64_t due_ns;
	uint8_t data[];
};

static unsigned torn_rand(struct sr_ctx *c)
{
	c->torn_seed = c->torn_seed * 1103515245u + 12345u;
	return c->torn_seed >> 16;
}

/* CRUX_SOFTRDMA_TORN: a power of two from 8 to 4096, or 0 (off) */
uint32_t sr_torn_chunk(void)
{
	const char *e = getenv("CRUX_SOFTRDMA_TORN");
	char *end;
	unsigned long k = e && *e ? strtoul(e, &end, 10) : 0;
	if (!k)
		return 0;
	if (*end || k < 8 || k > 4096 || (k & (k - 1))) {
		sr_log("CRUX_SOFTRDMA_TORN=%s: expected a power of two from 8 to 4096 (bytes per "
		       "piece); torn visibility stays off",
		       e);
		return 0;
	}
	return (uint32_t)k;
}

/* Land the deferred pieces that qp (NULL: any) left and that overlap
 * [lo, hi) (hi == NULL: any), or that are due by now (now != 0). */
static void land(struct sr_ctx *c, const struct sr_qp *qp, const uint8_t *lo, const uint8_t *hi,
		 uint64_t now)
{
	for (struct sr_torn **pp = &c->torn; *pp;) {
		struct sr_torn *t = *pp;
		bool hit =
		    now ? t->due_ns <= now
			: (!qp || t->qp == qp) && (!hi || (t->dst < hi && lo < t->dst + t->len));
		if (!hit) {
			pp = &t->next;
			continue;
		}
		memcpy(t->dst, t->data, t->len);
		*pp = t->next;
		c->torn_bytes -= t->len;
		free(t);
	}
}

void sr_torn_land_qp(struct sr_ctx *c, const struct sr_qp *qp)
{
	land(c, qp, NULL, NULL, 0);
}

void sr_torn_land_range(struct sr_ctx *c, const uint8_t *p, size_t len)
{
	if (c->torn)
		land(c, NULL, p, p + len, 0);
}

uint64_t sr_torn_tick(struct sr_ctx *c, uint64_t now)
{
	land(c, NULL, NULL, NULL, now);
	uint64_t next = 0;
	for (struct sr_torn *t = c->torn; t; t = t->next)
		if (!next || t->due_ns < next)
			next = t->due_ns;
	return next;
}

/* the context closes: what never landed is dropped (its memory may be gone) */
void sr_torn_drop(struct sr_ctx *c)
{
	while (c->torn) {
		struct sr_torn *t = c->torn;
		c->torn = t->next;
		free(t);
	}
	c->torn_bytes = 0;
}

/* the piece of [off, len) starting at off that stays within one CHUNK */
static uint32_t piece(const uint8_t *dst, uint32_t off, uint32_t len, uint32_t k)
{
	uint32_t room = k - (uint32_t)(((uintptr_t)dst + off) % k);
	return room < len - off ? room : len - off;
}

/* one WRITE's payload into responder memory; lock held */
void sr_torn_write(struct sr_ctx *c, struct sr_qp *qp, uint8_t *dst, const uint8_t *src,
		   uint32_t len, bool defer)
{
	uint32_t k = c->torn_chunk, n = 0;
	/* the same bytes written before land first: one QP's WRITEs are ordered */
	sr_torn_land_range(c, dst, len);
	for (uint32_t off = 0; off < len; n++)
		off += piece(dst, off, len, k);
	uint32_t *order = n <= 4096 ? malloc(n * sizeof *order) : NULL;
	if (!order) { /* too many pieces to model: in order, at once */
		memcpy(dst, src, len);
		return;
	}
	for (uint32_t i = 0, off = 0; i < n; i++) {
		order[i] = off;
		off += piece(dst, off, len, k);
	}
	for (uint32_t i = n; i > 1; i--) {
		uint32_t j = torn_rand(c) % i, t = order[i - 1];
		order[i - 1] = order[j];
		order[j] = t;
	}
	uint64_t now = sr_now_ns();
	for (uint32_t i = 0; i < n; i++) {
		uint32_t off = order[i], l = piece(dst, off, len, k);
		struct sr_torn *t = NULL;
		if (defer && (torn_rand(c) & 1) && c->torn_bytes < (16u << 20))
			t = malloc(sizeof *t + l);
		if (!t) {
			memcpy(dst + off, src + off, l);
			continue;
		}
		*t = (struct sr_torn){.next = c->torn,
				      .qp = qp,
				      .dst = dst + off,
				      .len = l,
				      .due_ns =
					  now + 200000u + (uint64_t)(torn_rand(c) % 1800) * 1000u};
		memcpy(t->data, src + off, l);
		c->torn = t;
		c->torn_bytes += l;
	}
	free(order);
}
