/* SPDX-License-Identifier: Apache-2.0 */
/* TTL-limited ECMP path probes answered on the socket error queue. */
#include <errno.h>
#include <stdio.h>
/* linux/errqueue.h uses struct timespec without including time.h. */
#include <time.h>

#include <linux/errqueue.h>
#include <netinet/icmp6.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "crux/log.h"
#include "crux/probe.h"
#include "crux/shm.h"

#define ANSWER_NONE    0
#define ANSWER_HOP     1
#define ANSWER_REACHED 2

void cruxd_probe_config_default(struct cruxd_probe_config *c)
{
	memset(c, 0, sizeof(*c));
	c->proto = CRUXD_PROBE_TCP;
	c->dst_port = 9; /* discard: any port works, the fabric does not hash it */
	c->port_lo = 40000;
	c->port_hi = 59999;
	c->hops = 2;
	c->ports_per_path = CRUX_ROUTE_MAX_PORTS;
	c->expect_paths = 0;
	c->patience = 48;
	c->max_probes = 512;
	c->rate = 500;
	c->inflight = 32;
	c->timeout_ns = 300ull * 1000000ull;
	c->seed = 0x9e3779b97f4a7c15ull;
}

crux_status_t cruxd_probe_parse_range(const char *name, const char *text, uint16_t *lo,
				      uint16_t *hi, char *err, size_t errlen)
{
	const char *dash = text ? strchr(text, '-') : NULL;
	char a[16], b[16];
	long long x, y;
	size_t la;

	if (!dash || (la = (size_t)(dash - text)) == 0 || la >= sizeof(a) ||
	    strlen(dash + 1) == 0 || strlen(dash + 1) >= sizeof(b))
		goto bad;
	memcpy(a, text, la);
	a[la] = '\0';
	strcpy(b, dash + 1);
	if (crux_parse_int(name, a, 1, 65535, &x, NULL, 0) != CRUX_OK ||
	    crux_parse_int(name, b, 1, 65535, &y, NULL, 0) != CRUX_OK || x > y)
		goto bad;
	*lo = (uint16_t)x;
	*hi = (uint16_t)y;
	return CRUX_OK;
bad:
	if (err && errlen)
		snprintf(
		    err, errlen,
		    "%s='%s' is not valid: expected a port range LO-HI with 1 <= LO <= HI <= 65535",
		    name, text ? text : "");
	return CRUX_ERR_INVAL;
}

crux_status_t cruxd_probe_config_env(crux_getenv_fn fn, void *arg, struct cruxd_probe_config *c,
				     char *err, size_t errlen)
{
	/* roce: UDP to 4791 from the source ports a RoCE flow label can name (49152-65535) */
	static const char *const protos[] = {"tcp", "udp", "roce", NULL};
	struct cruxd_probe_config n = *c;
	const char *range;
	long long v;
	int proto;
	uint64_t ns;
	crux_status_t st;

	st = crux_env_enum(fn, arg, "CRUX_PROBE_PROTO", protos, (int)c->proto, &proto, err, errlen);
	if (st != CRUX_OK)
		return st;
	n.proto = proto == 2 ? CRUXD_PROBE_UDP : (enum cruxd_probe_proto)proto;
	if (n.proto != c->proto)
		n.dst_port = n.proto == CRUXD_PROBE_UDP ? CRUXD_ROCE_PORT : 9;
	if (proto == 2) {
		n.dst_port = CRUXD_ROCE_PORT;
		n.port_lo = 49152;
		n.port_hi = 65535;
	}
	st = crux_env_int(fn, arg, "CRUX_PROBE_DST_PORT", n.dst_port, 1, 65535, &v, err, errlen);
	if (st != CRUX_OK)
		return st;
	n.dst_port = (uint16_t)v;
	range = crux_env_get(fn, arg, "CRUX_PROBE_PORTS");
	if (range) {
		st = cruxd_probe_parse_range("CRUX_PROBE_PORTS", range, &n.port_lo, &n.port_hi, err,
					     errlen);
		if (st != CRUX_OK)
			return st;
	}
	st = crux_env_int(fn, arg, "CRUX_PROBE_HOPS", c->hops, 1, 32, &v, err, errlen);
	if (st != CRUX_OK)
		return st;
	n.hops = (uint8_t)v;
	st = crux_env_int(fn, arg, "CRUX_PROBE_RATE", c->rate, 1, 100000, &v, err, errlen);
	if (st != CRUX_OK)
		return st;
	n.rate = (uint32_t)v;
	st = crux_env_int(fn, arg, "CRUX_PROBE_PORTS_PER_PATH", c->ports_per_path, 1,
			  CRUX_ROUTE_MAX_PORTS, &v, err, errlen);
	if (st != CRUX_OK)
		return st;
	n.ports_per_path = (uint32_t)v;
	st = crux_env_int(fn, arg, "CRUX_PROBE_MAX", c->max_probes, 1, 65535, &v, err, errlen);
	if (st != CRUX_OK)
		return st;
	n.max_probes = (uint32_t)v;
	st = crux_env_duration_ns(fn, arg, "CRUX_PROBE_TIMEOUT", c->timeout_ns, 1000000ull,
				  10000000000ull, 1000000ull, &ns, err, errlen);
	if (st != CRUX_OK)
		return st;
	n.timeout_ns = ns;
	*c = n;
	return CRUX_OK;
}

static int addr_cmp(const struct crux_addr *a, const struct crux_addr *b)
{
	if (a->family != b->family)
		return a->family < b->family ? -1 : 1;
	return memcmp(a->bytes, b->bytes, sizeof(a->bytes));
}

static int path_cmp(const void *x, const void *y)
{
	const struct cruxd_probe_path *a = x, *b = y;
	return addr_cmp(&a->hop, &b->hop);
}

static int ushort_cmp(const void *x, const void *y)
{
	uint16_t a = *(const uint16_t *)x, b = *(const uint16_t *)y;
	return (a > b) - (a < b);
}

int cruxd_probe_find_path(const struct cruxd_probe_result *r, const struct crux_addr *hop)
{
	for (uint32_t i = 0; i < r->npaths; i++)
		if (crux_addr_equal(&r->paths[i].hop, hop))
			return (int)i;
	return -1;
}

static crux_status_t to_sockaddr(const struct crux_addr *a, uint16_t port,
				 struct sockaddr_storage *ss, socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == 4) {
		struct sockaddr_in *s = (struct sockaddr_in *)ss;
		s->sin_family = AF_INET;
		s->sin_port = htons(port);
		memcpy(&s->sin_addr, a->bytes, 4);
		*len = sizeof(*s);
		return CRUX_OK;
	}
	if (a->family == 6) {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
		s->sin6_family = AF_INET6;
		s->sin6_port = htons(port);
		memcpy(&s->sin6_addr, a->bytes, 16);
		*len = sizeof(*s);
		return CRUX_OK;
	}
	return CRUX_ERR_INVAL;
}

/* Open one probe socket and send its packet. */
static crux_status_t send_probe(const struct cruxd_probe_config *cfg, const struct crux_addr *peer,
				uint16_t port, int *fd_out)
{
	struct sockaddr_storage dst, src;
	socklen_t dlen, slen;
	int v4 = peer->family == 4;
	int one = 1, ttl = cfg->hops;
	int type = cfg->proto == CRUXD_PROBE_TCP ? SOCK_STREAM : SOCK_DGRAM;
	struct crux_addr any = {.family = peer->family};
	crux_status_t st;
	int fd;

	st = to_sockaddr(peer, cfg->dst_port, &dst, &dlen);
	if (st != CRUX_OK)
		return st;
	to_sockaddr(&any, port, &src, &slen);
	fd = socket(v4 ? AF_INET : AF_INET6, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		crux_err("probe: socket: %s", strerror(errno));
		return CRUX_ERR_IO;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    setsockopt(fd, v4 ? IPPROTO_IP : IPPROTO_IPV6, v4 ? IP_TTL : IPV6_UNICAST_HOPS, &ttl,
		       sizeof(ttl)) != 0 ||
	    setsockopt(fd, v4 ? IPPROTO_IP : IPPROTO_IPV6, v4 ? IP_RECVERR : IPV6_RECVERR, &one,
		       sizeof(one)) != 0) {
		crux_err("probe: setsockopt: %s", strerror(errno));
		st = CRUX_ERR_IO;
		goto fail;
	}
	if (bind(fd, (struct sockaddr *)&src, slen) != 0) {
		st = (errno == EADDRINUSE || errno == EACCES) ? CRUX_ERR_BUSY : CRUX_ERR_IO;
		if (st == CRUX_ERR_IO)
			crux_err("probe: bind to port %u: %s", port, strerror(errno));
		goto fail;
	}
	if (cfg->proto == CRUXD_PROBE_TCP) {
		if (connect(fd, (struct sockaddr *)&dst, dlen) != 0 && errno != EINPROGRESS) {
			crux_warn("probe: connect from port %u: %s", port, strerror(errno));
			st = CRUX_ERR_IO;
			goto fail;
		}
	} else {
		static const char payload[] = "crux-probe";
		if (sendto(fd, payload, sizeof(payload), 0, (struct sockaddr *)&dst, dlen) < 0) {
			crux_warn("probe: sendto from port %u: %s", port, strerror(errno));
			st = CRUX_ERR_IO;
			goto fail;
		}
	}
	*fd_out = fd;
	return CRUX_OK;
fail:
	close(fd);
	return st;
}

/* Look at what came back on a probe socket. */
static int read_answer(const struct cruxd_probe_config *cfg, int fd, const struct crux_addr *peer,
		       short revents, struct crux_addr *hop)
{
	char cbuf[512];
	char data[64];

	for (int i = 0; i < 8; i++) {
		struct iovec iov = {.iov_base = data, .iov_len = sizeof(data)};
		struct msghdr msg = {.msg_iov = &iov,
				     .msg_iovlen = 1,
				     .msg_control = cbuf,
				     .msg_controllen = sizeof(cbuf)};
		struct cmsghdr *cm;

		if (recvmsg(fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
			break;
		for (cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
			const struct sock_extended_err *ee;
			int v4 = cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_RECVERR;
			int v6 = cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_RECVERR;
			struct crux_addr off;

			if (!v4 && !v6)
				continue;
			ee = (const struct sock_extended_err *)CMSG_DATA(cm);
			if (crux_addr_from_sockaddr(SO_EE_OFFENDER(ee), &off) != CRUX_OK)
				continue;
			if ((v4 && ee->ee_origin == SO_EE_ORIGIN_ICMP &&
			     ee->ee_type == ICMP_TIME_EXCEEDED) ||
			    (v6 && ee->ee_origin == SO_EE_ORIGIN_ICMP6 &&
			     ee->ee_type == ICMP6_TIME_EXCEEDED)) {
				*hop = off;
				return ANSWER_HOP;
			}
			if (crux_addr_equal(&off, peer))
				return ANSWER_REACHED;
		}
	}
	if (cfg->proto == CRUXD_PROBE_TCP && (revents & (POLLOUT | POLLERR | POLLHUP))) {
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 &&
		    (soerr == 0 || soerr == ECONNREFUSED))
			return ANSWER_REACHED;
	}
	return ANSWER_NONE;
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

struct slot {
	int fd;
	uint16_t port;
	uint64_t deadline;
};

struct run {
	const struct cruxd_probe_config *cfg;
	struct cruxd_probe_result res;
	uint32_t since_new; /* answered probes since the last new path */
};

static void record(struct run *r, uint16_t port, const struct crux_addr *hop)
{
	int i = cruxd_probe_find_path(&r->res, hop);
	struct cruxd_probe_path *p;

	r->res.answered++;
	r->since_new++;
	if (i < 0) {
		if (r->res.npaths >= CRUXD_PROBE_MAX_PATHS)
			return;
		i = (int)r->res.npaths++;
		memset(&r->res.paths[i], 0, sizeof(r->res.paths[i]));
		r->res.paths[i].hop = *hop;
		r->since_new = 0;
	}
	p = &r->res.paths[i];
	if (p->nports < r->cfg->ports_per_path && p->nports < CRUX_ROUTE_MAX_PORTS)
		p->ports[p->nports++] = port;
}

static bool satisfied(const struct run *r)
{
	const struct cruxd_probe_config *cfg = r->cfg;

	if (r->res.npaths == 0)
		return false;
	for (uint32_t i = 0; i < r->res.npaths; i++)
		if (r->res.paths[i].nports < cfg->ports_per_path)
			return false;
	if (cfg->expect_paths)
		return r->res.npaths >= cfg->expect_paths;
	return r->since_new >= cfg->patience;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
			      .tv_nsec = (long)(ns % 1000000000ull)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static crux_status_t check_config(const struct cruxd_probe_config *cfg,
				  const struct crux_addr *peer)
{
	if (!cfg || !peer || (peer->family != 4 && peer->family != 6) || cfg->port_lo == 0 ||
	    cfg->port_lo > cfg->port_hi || cfg->hops == 0 || cfg->rate == 0 || cfg->inflight == 0 ||
	    cfg->ports_per_path == 0 || cfg->ports_per_path > CRUX_ROUTE_MAX_PORTS ||
	    cfg->timeout_ns == 0)
		return CRUX_ERR_INVAL;
	return CRUX_OK;
}

crux_status_t cruxd_probe_peer(const struct cruxd_probe_config *cfg, const struct crux_addr *peer,
			       struct cruxd_probe_result *out)
{
	uint32_t nrange, ntried = 0, nslots, nbusy = 0;
	uint64_t interval, next_send, rng;
	uint8_t *tried = NULL;
	struct slot *slots = NULL;
	struct pollfd *pfds = NULL;
	struct run *r = NULL;
	crux_status_t st = check_config(cfg, peer);

	if (st != CRUX_OK)
		return st;
	nrange = (uint32_t)cfg->port_hi - cfg->port_lo + 1;
	nslots = cfg->inflight;
	tried = calloc(nrange, 1);
	slots = calloc(nslots, sizeof(*slots));
	pfds = calloc(nslots, sizeof(*pfds));
	r = calloc(1, sizeof(*r));
	if (!tried || !slots || !pfds || !r) {
		st = CRUX_ERR_NOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < nslots; i++)
		slots[i].fd = -1;
	r->cfg = cfg;
	r->res.peer = *peer;
	rng = cfg->seed ? cfg->seed : 1;
	rng ^= crux_addr_hash(peer);
	if (!rng)
		rng = 1;
	interval = 1000000000ull / cfg->rate;
	next_send = crux_now_ns();

	for (;;) {
		uint64_t now = crux_now_ns(), wake = UINT64_MAX;
		bool sending = !satisfied(r) && r->res.sent < cfg->max_probes && ntried < nrange;
		int timeout_ms, n = 0;

		if (sending && nbusy < nslots && now >= next_send) {
			uint32_t k = (uint32_t)(rng_next(&rng) % nrange);
			uint32_t s = 0;
			int fd;

			while (tried[k])
				k = (k + 1) % nrange;
			tried[k] = 1;
			ntried++;
			st = send_probe(cfg, peer, (uint16_t)(cfg->port_lo + k), &fd);
			if (st == CRUX_ERR_BUSY) {
				r->res.bind_failed++;
				continue;
			}
			if (st != CRUX_OK)
				goto out;
			while (slots[s].fd >= 0)
				s++;
			slots[s].fd = fd;
			slots[s].port = (uint16_t)(cfg->port_lo + k);
			slots[s].deadline = now + cfg->timeout_ns;
			nbusy++;
			r->res.sent++;
			next_send += interval;
			if (next_send < now)
				next_send = now; /* no bursts after a stall */
			continue;
		}
		if (!sending && nbusy == 0)
			break;
		if (sending && nbusy < nslots)
			wake = next_send;
		for (uint32_t i = 0; i < nslots; i++) {
			if (slots[i].fd < 0)
				continue;
			if (slots[i].deadline < wake)
				wake = slots[i].deadline;
			pfds[n].fd = slots[i].fd;
			/* POLLERR (error queue) is always reported; UDP is always writable */
			pfds[n].events = cfg->proto == CRUXD_PROBE_TCP ? POLLOUT : 0;
			pfds[n].revents = 0;
			n++;
		}
		timeout_ms = wake <= now ? 0 : (int)((wake - now + 999999) / 1000000);
		if (n == 0) {
			if (wake > now)
				sleep_ns(wake - now);
			continue;
		}
		if (poll(pfds, (nfds_t)n, timeout_ms) < 0 && errno != EINTR) {
			crux_err("probe: poll: %s", strerror(errno));
			st = CRUX_ERR_IO;
			goto out;
		}
		now = crux_now_ns();
		n = 0;
		for (uint32_t i = 0; i < nslots; i++) {
			struct crux_addr hop;
			short rev;
			int a;

			if (slots[i].fd < 0)
				continue;
			rev = pfds[n++].revents;
			if (!rev && now < slots[i].deadline)
				continue;
			a = read_answer(cfg, slots[i].fd, peer, rev, &hop);
			if (a == ANSWER_NONE && now < slots[i].deadline &&
			    cfg->proto == CRUXD_PROBE_UDP)
				continue; /* UDP sockets are always writable: wait for the error */
			if (a == ANSWER_HOP)
				record(r, slots[i].port, &hop);
			else if (a == ANSWER_REACHED)
				r->res.reached++;
			else if (now < slots[i].deadline)
				continue;
			close(slots[i].fd);
			slots[i].fd = -1;
			nbusy--;
		}
	}
	if (r->res.answered == 0) {
		st = r->res.reached ? CRUX_ERR_RANGE : CRUX_ERR_NOENT;
		goto out;
	}
	qsort(r->res.paths, r->res.npaths, sizeof(r->res.paths[0]), path_cmp);
	for (uint32_t i = 0; i < r->res.npaths; i++)
		qsort(r->res.paths[i].ports, r->res.paths[i].nports, sizeof(uint16_t), ushort_cmp);
	r->res.done_ns = crux_now_ns();
	*out = r->res;
	st = CRUX_OK;
out:
	if (slots)
		for (uint32_t i = 0; i < nslots; i++)
			if (slots[i].fd >= 0)
				close(slots[i].fd);
	free(slots);
	free(pfds);
	free(tried);
	free(r);
	return st;
}

crux_status_t cruxd_probe_port(const struct cruxd_probe_config *cfg, const struct crux_addr *peer,
			       uint16_t port, struct crux_addr *hop)
{
	crux_status_t st = check_config(cfg, peer);
	uint64_t deadline;
	int fd;

	if (st != CRUX_OK)
		return st;
	st = send_probe(cfg, peer, port, &fd);
	if (st != CRUX_OK)
		return st;
	deadline = crux_now_ns() + cfg->timeout_ns;
	st = CRUX_ERR_TIMEOUT;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = cfg->proto == CRUXD_PROBE_TCP ? POLLOUT : 0};
		uint64_t now = crux_now_ns();
		struct crux_addr h;
		int a;

		if (now >= deadline)
			break;
		if (poll(&p, 1, (int)((deadline - now + 999999) / 1000000)) < 0 && errno != EINTR) {
			st = CRUX_ERR_IO;
			break;
		}
		a = read_answer(cfg, fd, peer, p.revents, &h);
		if (a == ANSWER_HOP) {
			*hop = h;
			st = CRUX_OK;
			break;
		}
		if (a == ANSWER_REACHED) {
			st = CRUX_ERR_RANGE;
			break;
		}
		if (cfg->proto == CRUXD_PROBE_UDP || !p.revents)
			continue;
		if (p.revents & (POLLERR | POLLHUP))
			break;
		sleep_ns(1000000); /* writable TCP socket without error: wait for the queue */
	}
	close(fd);
	return st;
}
