/* SPDX-License-Identifier: Apache-2.0 */
/* Software RDMA device: memory regions (registration, keys, bounds). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sr.h"

/* the real entry point is a macro/inline in verbs.h; we export the symbol */
#undef ibv_reg_mr

/* The kernel's ib_check_mr_access: remote atomic is accepted whatever the
 * device's atomic_cap (NCCL's net_ib asks for it on every buffer); remote
 * write or atomic needs local write. The double performs no atomics. */
static const int SR_ACCESS_OK = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
				IBV_ACCESS_RELAXED_ORDERING;

static struct ibv_mr *mr_add(struct ibv_pd *pd, uint8_t *host, uint64_t iova, size_t len,
			     int access, void *map)
{
	struct sr_ctx *c = (struct sr_ctx *)pd->context;
	if ((access & ~SR_ACCESS_OK) ||
	    ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	     !(access & IBV_ACCESS_LOCAL_WRITE)) ||
	    len > SR_MAX_MSG) {
		errno = EINVAL;
		return NULL;
	}
	struct sr_mr *m = calloc(1, sizeof *m);
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&c->mu);
	uint32_t i = 0;
	while (i < c->nmr && c->mrs[i])
		i++;
	if (i == c->nmr) {
		if (c->nmr >= (1u << 24) - 1) {
			pthread_mutex_unlock(&c->mu);
			free(m);
			errno = ENOMEM;
			return NULL;
		}
		struct sr_mr **n = realloc(c->mrs, (c->nmr + 1) * sizeof *n);
		if (!n) {
			pthread_mutex_unlock(&c->mu);
			free(m);
			errno = ENOMEM;
			return NULL;
		}
		c->mrs = n;
		c->mrs[c->nmr++] = NULL;
	}
	/* key = (slot + 1) << 8 | generation: stale keys of a freed slot miss */
	uint32_t key = ((i + 1) << 8) | (++c->keygen & 0xff);
	m->ib.context = pd->context;
	m->ib.pd = pd;
	m->ib.addr = map ? (void *)(uintptr_t)iova : host;
	m->ib.length = len;
	m->ib.lkey = m->ib.rkey = key;
	m->ib.handle = key;
	m->host = host;
	m->iova = iova;
	m->map = map;
	m->maplen = map ? len : 0;
	m->access = access;
	c->mrs[i] = m;
	pthread_mutex_unlock(&c->mu);
	return &m->ib;
}

SR_API struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	if (!addr && length) {
		errno = EINVAL;
		return NULL;
	}
	return mr_add(pd, addr, (uint64_t)(uintptr_t)addr, length, access, NULL);
}

/* what verbs.h's ibv_reg_mr inline calls when it cannot prove the access
 * flags constant (unoptimized builds): iova must equal addr here */
SR_API struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
				       unsigned int access)
{
	if (iova != (uint64_t)(uintptr_t)addr || (!addr && length)) {
		errno = EINVAL;
		return NULL;
	}
	return mr_add(pd, addr, iova, length, (int)(access & ~IBV_ACCESS_OPTIONAL_RANGE), NULL);
}

/* DMA-BUF: unsupported (EOPNOTSUPP) unless CRUX_SOFTRDMA_DMABUF=1, which
 * emulates it for host memory by mapping the fd (a memfd, say) */
SR_API struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
					uint64_t iova, int fd, int access)
{
	const char *e = getenv("CRUX_SOFTRDMA_DMABUF");
	if (!e || strcmp(e, "1") != 0) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (fd < 0) {
		errno = EBADF;
		return NULL;
	}
	if (!length) {
		errno = EINVAL;
		return NULL;
	}
	void *p = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)offset);
	if (p == MAP_FAILED)
		return NULL;
	struct ibv_mr *mr = mr_add(pd, p, iova, length, access, p);
	if (!mr)
		munmap(p, length);
	return mr;
}

SR_API int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct sr_ctx *c = (struct sr_ctx *)mr->context;
	struct sr_mr *m = (struct sr_mr *)mr;
	pthread_mutex_lock(&c->mu);
	uint32_t i = (mr->lkey >> 8) - 1;
	if (i < c->nmr && c->mrs[i] == m)
		c->mrs[i] = NULL;
	/* WRITEs acknowledged into it are in memory before it goes */
	sr_torn_land_range(c, m->host, mr->length);
	pthread_mutex_unlock(&c->mu);
	if (m->map)
		munmap(m->map, m->maplen);
	free(m);
	return 0;
}

/* caller holds c->mu */
struct sr_mr *sr_mr_find(struct sr_ctx *c, struct ibv_pd *pd, uint32_t key)
{
	uint32_t i = (key >> 8) - 1;
	if ((key >> 8) == 0 || i >= c->nmr || !c->mrs[i] || c->mrs[i]->ib.lkey != key)
		return NULL;
	if (pd && c->mrs[i]->ib.pd != pd)
		return NULL;
	return c->mrs[i];
}

/* host pointer of [addr, addr+len) inside mr, NULL when out of bounds */
uint8_t *sr_mr_ptr(struct sr_mr *mr, uint64_t addr, uint64_t len)
{
	if (addr < mr->iova || len > mr->ib.length || addr - mr->iova > mr->ib.length - len)
		return NULL;
	return mr->host + (addr - mr->iova);
}
