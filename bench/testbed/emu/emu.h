/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal interfaces of the testbed's job emulator: a CPU implementation of
 * the NCCL API subset the emulated trainer calls, built as libnccl.so.2 so
 * that the real preload wraps it unchanged, and carrying every byte between
 * ranks through a NCCL net plugin loaded the way NCCL loads one.
 *
 * All process-wide state lives in struct crux_tb_emu (one instance).
 */
#ifndef CRUX_TB_EMU_H
#define CRUX_TB_EMU_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "crux/nccl_api.h"
#include "crux/nccl_net_abi.h"
#include "crux/status.h"

#define CRUX_TB_EXPORT __attribute__((visibility("default")))

/* ---- The loaded net plugin (plugin_loader.c) ------------------------------ */

/* One plugin, whatever its ABI version; calls go through crux_tb_net_*. */
struct crux_tb_net {
	void *dl;
	int version; /* 6..11 */
	char path[256];
	union {
		const cruxn_net_v11_t *v11;
		const cruxn_net_v10_t *v10;
		const cruxn_net_v9_t *v9;
		const cruxn_net_v8_t *v8;
		const cruxn_net_v7_t *v7;
		const cruxn_net_v6_t *v6;
	} api;
	const char *name;
	bool global_init_done; /* v6..v10 have one process-wide init */
};

/*
 * Resolve NCCL_NET_PLUGIN as NCCL does (comma list; each entry dlopen'ed as
 * is, then as libnccl-net-<entry>.so; unset: libnccl-net.so) and pick the
 * newest exported ncclNetPlugin_vN (11..6). 'err' says what was tried.
 */
crux_status_t crux_tb_net_load(struct crux_tb_net *net, char *err, size_t errlen);
void crux_tb_net_unload(struct crux_tb_net *net);

/* Per-communicator init (v11) or the process-wide one (older); *ctx may be NULL. */
crux_status_t crux_tb_net_init(struct crux_tb_net *net, uint64_t comm_id, int traffic_class,
			       void **ctx);
void crux_tb_net_finalize(struct crux_tb_net *net, void *ctx);
crux_status_t crux_tb_net_listen(struct crux_tb_net *net, void *ctx, void *handle, void **lcomm);
/* Non-blocking: *scomm stays NULL until the connection is up. */
crux_status_t crux_tb_net_connect(struct crux_tb_net *net, void *ctx, int traffic_class,
				  void *handle, void **scomm);
crux_status_t crux_tb_net_accept(struct crux_tb_net *net, void *lcomm, void **rcomm);
crux_status_t crux_tb_net_reg(struct crux_tb_net *net, void *comm, void *data, size_t size,
			      void **mh);
void crux_tb_net_dereg(struct crux_tb_net *net, void *comm, void *mh);
/* *req NULL on CRUX_OK means "not now, call again". */
crux_status_t crux_tb_net_isend(struct crux_tb_net *net, void *scomm, void *data, size_t size,
				void *mh, void **req);
crux_status_t crux_tb_net_irecv(struct crux_tb_net *net, void *rcomm, void *data, size_t size,
				void *mh, void **req);
crux_status_t crux_tb_net_test(struct crux_tb_net *net, void *req, bool *done, size_t *size);
void crux_tb_net_close_send(struct crux_tb_net *net, void *c);
void crux_tb_net_close_recv(struct crux_tb_net *net, void *c);
void crux_tb_net_close_listen(struct crux_tb_net *net, void *c);

/* ---- Bootstrap over TCP (rendezvous.c) ----------------------------------- */

/* What travels inside an ncclUniqueId. */
struct crux_tb_uid {
	uint32_t magic;
	uint32_t version;
	uint64_t comm_id; /* random; also the plugin's commId */
	uint16_t family;  /* AF_INET or AF_INET6 */
	uint16_t port;	  /* network order */
	uint32_t scope_id;
	uint8_t addr[16];
};
#define CRUX_TB_UID_MAGIC   0x42545843u /* "CXTB" */
#define CRUX_TB_UID_VERSION 1

/*
 * Start the root of a bootstrap: a listening socket on this host's address
 * and a thread that gathers nranks handles and sends the table back to all.
 */
crux_status_t crux_tb_boot_root_start(struct crux_tb_uid *out, char *err, size_t errlen);

/*
 * Send this rank's plugin listen handle to the root and receive everyone's
 * (nranks * CRUXN_NET_HANDLE_MAXSIZE bytes into 'all'). Bounded by timeout_ms.
 */
crux_status_t crux_tb_boot_exchange(const struct crux_tb_uid *uid, int rank, int nranks,
				    const void *handle, void *all, uint64_t timeout_ms, char *err,
				    size_t errlen);

/* ---- Reductions (reduce.c) ------------------------------------------------ */

bool crux_tb_reduce_supported(ncclDataType_t type, ncclRedOp_t op);
/* dst[i] = dst[i] op src[i] for n elements. */
void crux_tb_reduce(void *dst, const void *src, size_t n, ncclDataType_t type, ncclRedOp_t op);
/* Finish ncclAvg: divide n elements by 'nranks'. */
void crux_tb_reduce_avg_finish(void *buf, size_t n, ncclDataType_t type, int nranks);

#endif /* CRUX_TB_EMU_H */
