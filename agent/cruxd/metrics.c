/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crux/addr.h"
#include "crux/clock.h"
#include "crux/log.h"
#include "crux_config.h"
#include "metrics.h"
#include "prom.h"

#ifdef CRUX_HAVE_MHD
#include <microhttpd.h>
#endif

crux_status_t cruxd_metrics_parse(const char *spec, char *host, size_t hostlen, uint16_t *port,
				  char *err, size_t errlen)
{
	const char *p = spec, *colon;
	char h[64] = "127.0.0.1";
	char *end;
	long v;

	if (!spec || !*spec)
		goto bad;
	if (*p == '[') { /* [v6]:port */
		const char *close = strchr(p, ']');
		if (!close || close[1] != ':' || (size_t)(close - p - 1) >= sizeof(h))
			goto bad;
		memcpy(h, p + 1, (size_t)(close - p - 1));
		h[close - p - 1] = 0;
		p = close + 2;
	} else if ((colon = strrchr(p, ':'))) {
		if (colon == p || (size_t)(colon - p) >= sizeof(h) ||
		    memchr(p, ':', (size_t)(colon - p)))
			goto bad;
		memcpy(h, p, (size_t)(colon - p));
		h[colon - p] = 0;
		p = colon + 1;
	}
	errno = 0;
	v = strtol(p, &end, 10);
	if (!*p || *end || errno || v < 0 || v > 65535)
		goto bad;
	struct in6_addr a6;
	struct in_addr a4;
	if (inet_pton(AF_INET, h, &a4) != 1 && inet_pton(AF_INET6, h, &a6) != 1)
		goto bad;
	if (strlen(h) >= hostlen)
		goto bad;
	strcpy(host, h);
	*port = (uint16_t)v;
	return CRUX_OK;
bad:
	snprintf(err, errlen,
		 "--metrics/CRUX_METRICS='%s' is not PORT, ADDR:PORT or [IPV6]:PORT with a numeric "
		 "address (e.g. 9464, 127.0.0.1:9464, 0.0.0.0:9464)",
		 spec ? spec : "");
	return CRUX_ERR_INVAL;
}

#ifdef CRUX_HAVE_MHD
struct cruxd_metrics {
	pthread_mutex_t lock;
	struct cruxd_prom_snapshot *snap; /* under lock */
	struct MHD_Daemon *daemon;
	int fd;
	char url[128];
};

static enum MHD_Result serve(void *cls, struct MHD_Connection *conn, const char *url,
			     const char *method, const char *version, const char *upload,
			     size_t *upload_len, void **state)
{
	struct cruxd_metrics *m = cls;
	struct MHD_Response *r;
	enum MHD_Result ret;
	unsigned code = MHD_HTTP_OK;
	char *text = NULL;
	size_t len = 0;

	(void)version, (void)upload, (void)upload_len, (void)state;
	if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
		static const char msg[] = "only GET /metrics\n";
		r = MHD_create_response_from_buffer(sizeof(msg) - 1, (void *)msg,
						    MHD_RESPMEM_PERSISTENT);
		code = MHD_HTTP_METHOD_NOT_ALLOWED;
	} else if (strcmp(url, "/metrics") && strcmp(url, "/")) {
		static const char msg[] = "not found: the metrics are at /metrics\n";
		r = MHD_create_response_from_buffer(sizeof(msg) - 1, (void *)msg,
						    MHD_RESPMEM_PERSISTENT);
		code = MHD_HTTP_NOT_FOUND;
	} else {
		pthread_mutex_lock(&m->lock);
		crux_status_t st = cruxd_prom_render(m->snap, crux_now_ns(), &text, &len);
		pthread_mutex_unlock(&m->lock);
		if (st != CRUX_OK)
			return MHD_NO;
		r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
		if (!r)
			free(text);
	}
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				code == MHD_HTTP_OK ? "text/plain; version=0.0.4; charset=utf-8"
						    : "text/plain");
	ret = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return ret;
}

static int listen_on(const char *host, uint16_t port, char *shown, size_t shownlen, char *err,
		     size_t errlen)
{
	union crux_sockaddr a;
	socklen_t sl;
	int fd, one = 1;

	memset(&a, 0, sizeof(a));
	if (strchr(host, ':')) {
		a.sin6.sin6_family = AF_INET6;
		a.sin6.sin6_port = htons(port);
		inet_pton(AF_INET6, host, &a.sin6.sin6_addr);
		sl = sizeof(a.sin6);
	} else {
		a.sin.sin_family = AF_INET;
		a.sin.sin_port = htons(port);
		inet_pton(AF_INET, host, &a.sin.sin_addr);
		sl = sizeof(a.sin);
	}
	fd = socket(a.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "metrics: socket: %s", strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, &a.sa, sl) < 0 || listen(fd, 16) < 0) {
		snprintf(err, errlen,
			 "metrics: cannot listen on %s port %u: %s (choose another port with "
			 "--metrics ADDR:PORT)",
			 host, port, strerror(errno));
		close(fd);
		return -1;
	}
	sl = sizeof(a);
	getsockname(fd, &a.sa, &sl);
	port = ntohs(a.sa.sa_family == AF_INET6 ? a.sin6.sin6_port : a.sin.sin_port);
	snprintf(shown, shownlen, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
	return fd;
}

crux_status_t cruxd_metrics_start(const char *spec, uint64_t now_ns, struct cruxd_metrics **out,
				  char *err, size_t errlen)
{
	struct cruxd_metrics *m;
	char host[64], shown[96];
	uint16_t port;
	crux_status_t st = cruxd_metrics_parse(spec, host, sizeof(host), &port, err, errlen);

	if (st != CRUX_OK)
		return st;
	m = calloc(1, sizeof(*m));
	if (!m || !(m->snap = calloc(1, sizeof(*m->snap)))) {
		free(m);
		snprintf(err, errlen, "metrics: out of memory");
		return CRUX_ERR_NOMEM;
	}
	pthread_mutex_init(&m->lock, NULL);
	m->snap->started_ns = now_ns;
	m->fd = listen_on(host, port, shown, sizeof(shown), err, errlen);
	if (m->fd < 0) {
		st = CRUX_ERR_IO;
		goto fail;
	}
	m->daemon =
	    MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
			     serve, m, MHD_OPTION_LISTEN_SOCKET, m->fd, MHD_OPTION_CONNECTION_LIMIT,
			     16u, MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
	if (!m->daemon) {
		snprintf(err, errlen, "metrics: libmicrohttpd could not start on %s", shown);
		st = CRUX_ERR_IO;
		goto fail;
	}
	snprintf(m->url, sizeof(m->url), "http://%s/metrics", shown);
	*out = m;
	return CRUX_OK;
fail:
	if (m->fd >= 0)
		close(m->fd);
	pthread_mutex_destroy(&m->lock);
	free(m->snap);
	free(m);
	return st;
}

void cruxd_metrics_publish(struct cruxd_metrics *m, const struct cruxd_status_body *b,
			   uint64_t now_ns)
{
	struct cruxd_prom_snapshot *s = m->snap;
	uint32_t nj = b->njobs < CRUXD_STATUS_MAX_JOBS ? b->njobs : CRUXD_STATUS_MAX_JOBS;
	uint32_t np = b->npeers < CRUXD_STATUS_MAX_PEERS ? b->npeers : CRUXD_STATUS_MAX_PEERS;

	pthread_mutex_lock(&m->lock);
	if (!s->published_ns || b->table_generation != s->body.table_generation)
		s->schedule_ns = now_ns;
	/* Only the live entries: the rest of the body is thousands of empty slots. */
	memcpy(&s->body, b, offsetof(struct cruxd_status_body, jobs));
	memcpy(s->body.jobs, b->jobs, nj * sizeof(b->jobs[0]));
	memcpy(s->body.peers, b->peers, np * sizeof(b->peers[0]));
	s->body.njobs = nj;
	s->body.npeers = np;
	s->published_ns = now_ns;
	pthread_mutex_unlock(&m->lock);
}

const char *cruxd_metrics_url(const struct cruxd_metrics *m)
{
	return m->url;
}

void cruxd_metrics_stop(struct cruxd_metrics *m)
{
	if (!m)
		return;
	MHD_stop_daemon(m->daemon);
	close(m->fd);
	pthread_mutex_destroy(&m->lock);
	free(m->snap);
	free(m);
}
#else
crux_status_t cruxd_metrics_start(const char *spec, uint64_t now_ns, struct cruxd_metrics **out,
				  char *err, size_t errlen)
{
	(void)spec, (void)now_ns, (void)out;
	snprintf(
	    err, errlen,
	    "--metrics/CRUX_METRICS: this cruxd was built without libmicrohttpd; install "
	    "libmicrohttpd-dev and rebuild (meson setup --reconfigure), or unset CRUX_METRICS");
	return CRUX_ERR_UNSUPPORTED;
}

void cruxd_metrics_publish(struct cruxd_metrics *m, const struct cruxd_status_body *b,
			   uint64_t now_ns)
{
	(void)m, (void)b, (void)now_ns;
}

const char *cruxd_metrics_url(const struct cruxd_metrics *m)
{
	(void)m;
	return "off";
}

void cruxd_metrics_stop(struct cruxd_metrics *m)
{
	(void)m;
}
#endif
