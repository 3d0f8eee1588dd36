/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One end of a two-process transfer over the software RDMA device, for the
 * namespace wire test. Ends meet through files in DIR.
 *   srt-peer DIR passive BYTES          waits for BYTES by WRITE, then an IMM
 *   srt-peer DIR active BYTES TC FL [SPORT]  writes them with class TC, flow label FL
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "srt.h"

int mlx5dv_modify_qp_udp_sport(struct ibv_qp *, uint16_t);

static int publish(const char *dir, const char *name, const char *text)
{
	char p[512], t[520];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	snprintf(t, sizeof t, "%s.tmp", p);
	FILE *f = fopen(t, "w");
	if (!f)
		return -1;
	fputs(text, f);
	fclose(f);
	return rename(t, p);
}

static int await(const char *dir, const char *name, char *out, size_t n)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	for (int i = 0; i < 200; i++) {
		FILE *f = fopen(p, "r");
		if (f) {
			char *r = fgets(out, (int)n, f);
			fclose(f);
			return r ? 0 : -1;
		}
		usleep(50000);
	}
	fprintf(stderr, "timed out waiting for %s\n", p);
	return -1;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: %s DIR passive|active BYTES [TC FL [SPORT]]\n", argv[0]);
		return 2;
	}
	const char *dir = argv[1];
	bool active = strcmp(argv[2], "active") == 0;
	size_t n = strtoul(argv[3], NULL, 0);
	struct srt_end e;
	if (srt_end_open(&e, 16)) {
		fprintf(stderr, "no software RDMA device (CRUX_SOFTRDMA_IFNAMES?)\n");
		return 1;
	}
	uint8_t *buf = malloc(n);
	for (size_t i = 0; i < n; i++)
		buf[i] = active ? (uint8_t)(i * 13 + 7) : 0;
	struct ibv_mr *mr =
	    ibv_reg_mr(e.pd, buf, n, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	union ibv_gid g;
	ibv_query_gid(e.ctx, 1, 2, &g);
	char line[256], peer[256];
	snprintf(line, sizeof line, "%u %u %llu %u\n", e.qp->qp_num, mr->rkey,
		 (unsigned long long)(uintptr_t)buf, ntohl(*(uint32_t *)&g.raw[12]));
	if (publish(dir, active ? "active" : "passive", line) ||
	    await(dir, active ? "passive" : "active", peer, sizeof peer))
		return 1;
	unsigned qpn, rkey, ip;
	unsigned long long addr;
	if (sscanf(peer, "%u %u %llu %u", &qpn, &rkey, &addr, &ip) != 4)
		return 1;
	union ibv_gid pg = {0};
	pg.raw[10] = pg.raw[11] = 0xff;
	uint32_t nip = htonl(ip);
	memcpy(&pg.raw[12], &nip, 4);
	uint8_t tc = active && argc > 4 ? (uint8_t)strtoul(argv[4], NULL, 0) : 0;
	uint32_t fl = active && argc > 5 ? (uint32_t)strtoul(argv[5], NULL, 0) : 0;
	if (srt_connect(&e, qpn, &pg, tc, fl))
		return 1;
	struct ibv_wc wc;
	if (!active) {
		srt_recv(e.qp, 1, NULL, 0, 0);
		if (srt_wait(e.cq, &wc, 1, 20000) != 1 || wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "passive: no completion\n");
			return 1;
		}
		for (size_t i = 0; i < n; i++)
			if (buf[i] != (uint8_t)(i * 13 + 7)) {
				fprintf(stderr, "passive: byte %zu differs\n", i);
				return 1;
			}
		printf("passive: %zu bytes received intact\n", n);
		return 0;
	}
	if (argc > 6) {
		int rc = mlx5dv_modify_qp_udp_sport(e.qp, (uint16_t)strtoul(argv[6], NULL, 0));
		if (rc) {
			fprintf(stderr, "active: mlx5dv_modify_qp_udp_sport: %s\n", strerror(rc));
			return 1;
		}
	}
	size_t chunk = 65536;
	for (size_t off = 0; off < n; off += chunk) {
		size_t l = n - off < chunk ? n - off : chunk;
		if (srt_post(e.qp, IBV_WR_RDMA_WRITE, off, buf + off, (uint32_t)l, mr->lkey,
			     addr + off, rkey, 0, true) ||
		    srt_wait(e.cq, &wc, 1, 20000) != 1 || wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "active: WRITE failed\n");
			return 1;
		}
	}
	if (srt_post(e.qp, IBV_WR_RDMA_WRITE_WITH_IMM, 99, NULL, 0, 0, addr, rkey, 1, true) ||
	    srt_wait(e.cq, &wc, 1, 20000) != 1 || wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "active: WRITE_WITH_IMM failed\n");
		return 1;
	}
	printf("active: %zu bytes written\n", n);
	return 0;
}
