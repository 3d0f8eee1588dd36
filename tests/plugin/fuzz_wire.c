/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: a hostile peer. A real listener on loopback accepts a
 * connection whose greetings are valid (the harness fills in the
 * listener's nonce) and whose control stream is the fuzz input; receives
 * are posted and tested a bounded number of times. The plugin must
 * neither crash nor hang, whatever the peer sends.
 *
 * Input: byte 0 = number of grouped slots (1..8) of the posted receives,
 * byte 1 = how much of the rest goes to data socket 0, the rest = control stream.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cruxn.h"
#include "socket/sock_transport.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int ready;
static char fuzz_dir[] = "/tmp/cxpl-fuzz-XXXXXX";

static void remove_dir(void)
{
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fuzz_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", fuzz_dir);
}

static int setup(void)
{
	if (ready)
		return ready > 0 ? 0 : -1;
	ready = -1;
	if (!mkdtemp(fuzz_dir))
		return -1;
	atexit(remove_dir);
	chmod(fuzz_dir, 0755);
	setenv("CRUX_SHM_DIR", fuzz_dir, 1);
	setenv("CRUX_SOCKET_IFNAME", "=lo", 1);
	setenv("CRUX_SOCKET_FAMILY", "ipv4", 1);
	setenv("CRUX_JOB_ID", "cxpl-fuzz", 1);
	setenv("CRUX_LOG_LEVEL", "error", 1);
	setenv("CRUX_TIMEOUT", "1s", 1);
	if (cruxn_init(NULL) != CRUXN_SUCCESS)
		return -1;
	int n = 0;
	if (cruxn_devices(&n) != CRUXN_SUCCESS || n < 1)
		return -1;
	ready = 1;
	return 0;
}

static int open_peer(const struct cruxn_boot_handle *h)
{
	struct sockaddr_in a;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	memcpy(&a.sin_addr, h->addr, 4);
	a.sin_port = h->port;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char hbuf[CRUXN_NET_HANDLE_MAXSIZE];
	struct cruxn_boot_handle *h = (struct cruxn_boot_handle *)hbuf;
	void *l = NULL, *r = NULL;
	int fds[1 + CRUXN_MAX_SOCKS];
	int nsocks = cruxn_ctx.cfg.nthreads * cruxn_ctx.cfg.nsocks_per_thread;
	int slots, k;
	size_t to_data;

	if (size < 2 || setup() != 0)
		return 0;
	nsocks = cruxn_ctx.cfg.nthreads * cruxn_ctx.cfg.nsocks_per_thread;
	slots = 1 + data[0] % CRUXN_NET_MAX_RECVS;
	to_data = data[1] <= size - 2 ? data[1] : size - 2;
	data += 2;
	size -= 2;
	for (k = 0; k <= nsocks; k++)
		fds[k] = -1;
	if (cruxn_listen(0, hbuf, &l) != CRUXN_SUCCESS)
		return 0;
	for (k = 0; k <= nsocks; k++) {
		struct cruxn_hello hl;
		fds[k] = open_peer(h);
		if (fds[k] < 0)
			goto out;
		memset(&hl, 0, sizeof(hl));
		hl.magic = CRUXN_WIRE_MAGIC;
		hl.version = CRUXN_WIRE_VERSION;
		hl.kind = k == 0 ? CRUXN_SOCK_CTRL : CRUXN_SOCK_DATA;
		hl.index = (uint8_t)(k == 0 ? 0 : k - 1);
		hl.listen_nonce = h->nonce;
		hl.conn_nonce = 0x1234;
		hl.nsocks = (uint32_t)nsocks;
		hl.chunk_bytes = 4096;
		if (write(fds[k], &hl, sizeof(hl)) != (ssize_t)sizeof(hl))
			goto out;
	}
	/* the hostile part: data socket 0 bytes, then the control stream */
	if (to_data && write(fds[1], data, to_data) < 0)
		goto out;
	if (size > to_data && write(fds[0], data + to_data, size - to_data) < 0)
		goto out;
	shutdown(fds[0], SHUT_WR);
	for (k = 0; k < 2000 && !r; k++)
		if (cruxn_accept(l, &r) != CRUXN_SUCCESS)
			goto out;
	if (!r)
		goto out;
	{
		static char bufs[4][CRUXN_NET_MAX_RECVS][8192];
		void *reqs[4] = {0};
		for (int q = 0; q < 4; q++) {
			void *ptrs[CRUXN_NET_MAX_RECVS];
			size_t caps[CRUXN_NET_MAX_RECVS];
			int tags[CRUXN_NET_MAX_RECVS];
			for (int s = 0; s < slots; s++) {
				ptrs[s] = bufs[q][s];
				caps[s] = sizeof(bufs[q][s]);
				tags[s] = s;
			}
			if (cruxn_irecv(r, slots, ptrs, caps, tags, NULL, &reqs[q]) !=
			    CRUXN_SUCCESS)
				break;
		}
		/* bounded: the peer has said all it will say (its control stream is shut) */
		for (int it = 0; it < 200; it++) {
			int live = 0;
			for (int q = 0; q < 4; q++) {
				int done = 0, sizes[CRUXN_NET_MAX_RECVS];
				if (!reqs[q])
					continue;
				if (cruxn_test(reqs[q], &done, sizes) != CRUXN_SUCCESS || done)
					reqs[q] = NULL;
				else
					live++;
			}
			if (!live)
				break;
		}
	}
out:
	if (r)
		cruxn_close_recv(r);
	for (k = 0; k <= nsocks; k++)
		if (fds[k] >= 0)
			close(fds[k]);
	if (l)
		cruxn_close_listen(l);
	return 0;
}
