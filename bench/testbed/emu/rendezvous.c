/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bootstrap of an emulated communicator over TCP: ncclGetUniqueId starts a
 * root (listening socket + one thread) on this host's address; every rank
 * connects to it, sends its plugin listen handle, and gets back the handles
 * of all ranks. The root serves one communicator and exits.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "emu.h"

#define CRUX_TB_BOOT_TIMEOUT_MS 120000ull
#define CRUX_TB_MAX_RANKS	4096

struct crux_tb_boot_hello {
	uint32_t magic;
	int32_t rank;
	int32_t nranks;
	uint32_t pad;
	uint64_t comm_id;
	unsigned char handle[CRUXN_NET_HANDLE_MAXSIZE];
};

struct crux_tb_root {
	int lfd;
	uint64_t comm_id;
};

static uint64_t crux_tb_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000ull + (uint64_t)ts.tv_nsec / 1000000ull;
}

/* Read or write exactly len bytes before the deadline (CLOCK_MONOTONIC ms). */
static crux_status_t crux_tb_io(int fd, void *buf, size_t len, bool wr, uint64_t deadline)
{
	char *p = buf;

	while (len) {
		uint64_t now = crux_tb_mono_ms();
		struct pollfd pfd = {.fd = fd, .events = wr ? POLLOUT : POLLIN};
		ssize_t n;

		if (now >= deadline)
			return CRUX_ERR_TIMEOUT;
		if (poll(&pfd, 1, (int)(deadline - now)) < 0) {
			if (errno == EINTR)
				continue;
			return CRUX_ERR_IO;
		}
		if (!(pfd.revents & (wr ? POLLOUT : POLLIN)) &&
		    !(pfd.revents & (POLLERR | POLLHUP)))
			continue;
		n = wr ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return CRUX_ERR_REMOTE;
		}
		if (n == 0)
			return CRUX_ERR_REMOTE;
		p += n;
		len -= (size_t)n;
	}
	return CRUX_OK;
}

static void *crux_tb_root_main(void *arg)
{
	struct crux_tb_root *root = arg;
	uint64_t deadline = crux_tb_mono_ms() + CRUX_TB_BOOT_TIMEOUT_MS;
	int *fds = NULL;
	unsigned char *table = NULL;
	int nranks = -1, got = 0;

	for (;;) {
		struct crux_tb_boot_hello h;
		uint64_t now = crux_tb_mono_ms();
		struct pollfd pfd = {.fd = root->lfd, .events = POLLIN};
		int fd;

		if (now >= deadline) {
			fprintf(stderr,
				"nccl-emu: bootstrap root gave up: %d of %d ranks connected "
				"within %llu s\n",
				got, nranks, CRUX_TB_BOOT_TIMEOUT_MS / 1000);
			goto out;
		}
		if (poll(&pfd, 1, (int)(deadline - now)) <= 0)
			continue;
		fd = accept(root->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		if (crux_tb_io(fd, &h, sizeof(h), false, deadline) != CRUX_OK ||
		    h.magic != CRUX_TB_UID_MAGIC || h.comm_id != root->comm_id || h.nranks < 1 ||
		    h.nranks > CRUX_TB_MAX_RANKS || h.rank < 0 || h.rank >= h.nranks ||
		    (nranks > 0 && h.nranks != nranks)) {
			fprintf(stderr,
				"nccl-emu: bootstrap root: a peer sent a bad hello; ignored\n");
			close(fd);
			continue;
		}
		if (nranks < 0) {
			nranks = h.nranks;
			fds = malloc(sizeof(int) * (size_t)nranks);
			table = calloc((size_t)nranks, CRUXN_NET_HANDLE_MAXSIZE);
			if (!fds || !table) {
				close(fd);
				goto out;
			}
			for (int i = 0; i < nranks; i++)
				fds[i] = -1;
		}
		if (fds[h.rank] >= 0) {
			fprintf(stderr, "nccl-emu: bootstrap root: rank %d joined twice; ignored\n",
				h.rank);
			close(fd);
			continue;
		}
		fds[h.rank] = fd;
		memcpy(table + (size_t)h.rank * CRUXN_NET_HANDLE_MAXSIZE, h.handle,
		       CRUXN_NET_HANDLE_MAXSIZE);
		if (++got == nranks)
			break;
	}
	for (int i = 0; i < nranks; i++)
		(void)crux_tb_io(fds[i], table, (size_t)nranks * CRUXN_NET_HANDLE_MAXSIZE, true,
				 deadline);
out:
	if (fds) {
		for (int i = 0; i < nranks; i++)
			if (fds[i] >= 0)
				close(fds[i]);
	}
	free(fds);
	free(table);
	close(root->lfd);
	free(root);
	return NULL;
}

/*
 * The address the root listens on: the first interface that NCCL_SOCKET_IFNAME
 * names (a prefix, or "=name" for an exact name), else the first non-loopback
 * IPv4 interface that is up, else the loopback.
 */
static crux_status_t crux_tb_boot_addr(struct sockaddr_storage *out, socklen_t *outlen)
{
	const char *spec = getenv("NCCL_SOCKET_IFNAME");
	struct ifaddrs *ifs = NULL, *best = NULL, *lo = NULL;
	bool exact = spec && spec[0] == '=';

	if (spec && (spec[0] == '^' || !*spec))
		spec = NULL; /* exclusion lists: fall back to the first interface */
	if (exact)
		spec++;
	if (getifaddrs(&ifs) < 0)
		return CRUX_ERR_IO;
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		if (!i->ifa_addr || !(i->ifa_flags & IFF_UP))
			continue;
		if (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)
			continue;
		if (spec) {
			bool match = exact ? !strcmp(i->ifa_name, spec)
					   : !strncmp(i->ifa_name, spec, strlen(spec));
			if (match && (!best || (best->ifa_addr->sa_family == AF_INET6 &&
						i->ifa_addr->sa_family == AF_INET)))
				best = i;
			continue;
		}
		if (i->ifa_flags & IFF_LOOPBACK) {
			if (!lo && i->ifa_addr->sa_family == AF_INET)
				lo = i;
			continue;
		}
		if (!best && i->ifa_addr->sa_family == AF_INET)
			best = i;
	}
	if (!best)
		best = lo;
	if (!best) {
		freeifaddrs(ifs);
		return CRUX_ERR_NOENT;
	}
	memset(out, 0, sizeof(*out));
	*outlen = best->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
						       : sizeof(struct sockaddr_in6);
	memcpy(out, best->ifa_addr, *outlen);
	freeifaddrs(ifs);
	return CRUX_OK;
}

crux_status_t crux_tb_boot_root_start(struct crux_tb_uid *out, char *err, size_t errlen)
{
	struct crux_tb_uid uid;
	struct crux_tb_root *root = NULL;
	struct sockaddr_storage ss;
	socklen_t sslen = 0;
	pthread_t th;
	int fd = -1, one = 1;
	crux_status_t st;

	memset(&uid, 0, sizeof(uid));
	uid.magic = CRUX_TB_UID_MAGIC;
	uid.version = CRUX_TB_UID_VERSION;
	if (getrandom(&uid.comm_id, sizeof(uid.comm_id), 0) != sizeof(uid.comm_id))
		uid.comm_id = ((uint64_t)getpid() << 32) ^ crux_tb_mono_ms();
	st = crux_tb_boot_addr(&ss, &sslen);
	if (st != CRUX_OK) {
		snprintf(err, errlen, "no network interface to run the bootstrap on");
		goto fail;
	}
	((struct sockaddr_in *)&ss)->sin_port = 0; /* same offset in sockaddr_in6 */
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&ss, sslen) < 0 || listen(fd, 256) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sslen) < 0) {
		snprintf(err, errlen, "bootstrap listen socket: %s", strerror(errno));
		st = CRUX_ERR_IO;
		goto fail;
	}
	uid.family = ss.ss_family;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
		uid.port = in->sin_port;
		memcpy(uid.addr, &in->sin_addr, 4);
	} else {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
		uid.port = in6->sin6_port;
		uid.scope_id = in6->sin6_scope_id;
		memcpy(uid.addr, &in6->sin6_addr, 16);
	}
	root = malloc(sizeof(*root));
	if (!root) {
		st = CRUX_ERR_NOMEM;
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	root->lfd = fd;
	root->comm_id = uid.comm_id;
	if (pthread_create(&th, NULL, crux_tb_root_main, root) != 0) {
		snprintf(err, errlen, "cannot start the bootstrap thread");
		st = CRUX_ERR_IO;
		goto fail;
	}
	pthread_detach(th);
	*out = uid;
	return CRUX_OK;
fail:
	free(root);
	if (fd >= 0)
		close(fd);
	return st;
}

crux_status_t crux_tb_boot_exchange(const struct crux_tb_uid *uid, int rank, int nranks,
				    const void *handle, void *all, uint64_t timeout_ms, char *err,
				    size_t errlen)
{
	uint64_t deadline = crux_tb_mono_ms() + timeout_ms;
	struct crux_tb_boot_hello h;
	struct sockaddr_storage ss;
	socklen_t sslen;
	crux_status_t st;
	int fd = -1;

	if (uid->magic != CRUX_TB_UID_MAGIC || uid->version != CRUX_TB_UID_VERSION ||
	    (uid->family != AF_INET && uid->family != AF_INET6)) {
		snprintf(err, errlen,
			 "the unique id was not made by this emulator's "
			 "ncclGetUniqueId (bad magic, version or address)");
		return CRUX_ERR_INVAL;
	}
	if (nranks < 1 || nranks > CRUX_TB_MAX_RANKS || rank < 0 || rank >= nranks) {
		snprintf(err, errlen, "rank %d of %d is out of range (1..%d ranks)", rank, nranks,
			 CRUX_TB_MAX_RANKS);
		return CRUX_ERR_INVAL;
	}
	memset(&ss, 0, sizeof(ss));
	if (uid->family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;
		in->sin_family = AF_INET;
		in->sin_port = uid->port;
		memcpy(&in->sin_addr, uid->addr, 4);
		sslen = sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
		in6->sin6_family = AF_INET6;
		in6->sin6_port = uid->port;
		in6->sin6_scope_id = uid->scope_id;
		memcpy(&in6->sin6_addr, uid->addr, 16);
		sslen = sizeof(*in6);
	}
	/* The root may not listen yet when ranks start together: retry. */
	for (;;) {
		int one = 1;

		fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			snprintf(err, errlen, "bootstrap socket: %s", strerror(errno));
			return CRUX_ERR_IO;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(fd, (const struct sockaddr *)&ss, sslen) == 0)
			break;
		close(fd);
		fd = -1;
		if (crux_tb_mono_ms() >= deadline) {
			snprintf(err, errlen, "cannot reach the bootstrap root within %llu ms",
				 (unsigned long long)timeout_ms);
			return CRUX_ERR_TIMEOUT;
		}
		usleep(50000);
	}
	memset(&h, 0, sizeof(h));
	h.magic = CRUX_TB_UID_MAGIC;
	h.rank = rank;
	h.nranks = nranks;
	h.comm_id = uid->comm_id;
	memcpy(h.handle, handle, CRUXN_NET_HANDLE_MAXSIZE);
	st = crux_tb_io(fd, &h, sizeof(h), true, deadline);
	if (st == CRUX_OK)
		st =
		    crux_tb_io(fd, all, (size_t)nranks * CRUXN_NET_HANDLE_MAXSIZE, false, deadline);
	if (st != CRUX_OK)
		snprintf(err, errlen, "bootstrap exchange failed (%s): not all %d ranks joined",
			 crux_status_str(st), nranks);
	close(fd);
	return st;
}
