/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the plugin's conformance driver and its benchmark. */
#ifndef CRUXN_NETDRV_H
#define CRUXN_NETDRV_H

#include <stddef.h>
#include <stdint.h>

#include "crux/nccl_net_abi.h"

/*
 * Load a net plugin the way NCCL does for one NCCL_NET_PLUGIN entry: dlopen
 * the entry as given, then libnccl-net-<entry>.so. Returns the handle and the
 * v12 table, the one NCCL 2.30 looks up first (NULL when the library lacks it).
 */
void *netdrv_load(const char *entry, const cruxn_net_v12_t **v12);

/* Wait until a non-blocking call hands out a comm (bounded). 0 = ok. */
int netdrv_connect(const cruxn_net_v12_t *net, void *ctx, int dev, void *handle, void **comm);
int netdrv_accept(const cruxn_net_v12_t *net, void *lcomm, void **comm);

/* Post-until-not-NULL then test-until-done, with a bound in ms. 0 = ok. */
int netdrv_send(const cruxn_net_v12_t *net, void *comm, void *buf, size_t size, int tag,
		int timeout_ms);
int netdrv_recv(const cruxn_net_v12_t *net, void *comm, void *buf, size_t cap, int tag, size_t *got,
		int timeout_ms);
int netdrv_wait(const cruxn_net_v12_t *net, void *req, int *sizes, int timeout_ms);

/* Deterministic payload for (seed, offset) and its check. */
void netdrv_fill(void *buf, size_t len, uint32_t seed);
int netdrv_check(const void *buf, size_t len, uint32_t seed);

uint64_t netdrv_now_ns(void);

#endif /* CRUXN_NETDRV_H */
