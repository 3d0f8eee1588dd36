/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The verbs transport's asynchronous events, as NCCL's IB transport
 * watches them: one thread polls every opened device's async_fd and reads
 * the events (ibv_get_async_event / ibv_ack_async_event). A device that
 * fails (DEVICE_FATAL) or a port that goes down (PORT_ERR) fails every
 * connection on it at its next call, instead of ~34 s later when the RC
 * retries run out; a queue pair's fatal event fails the connection that
 * owns it (its qp_context). The rest is logged.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "crux/log.h"
#include "vx_transport.h"

static pthread_t async_th;
static bool async_running;
static _Atomic bool async_stop;

static const char *event_name(const struct cruxn_ibv *v, enum ibv_event_type t)
{
	return v->event_type_str ? v->event_type_str(t) : "event";
}

static void on_event(struct cruxn_vx *vx, struct cruxn_vx_dev *d, const struct ibv_async_event *e)
{
	char why[160];

	switch (e->event_type) {
	case IBV_EVENT_DEVICE_FATAL:
	case IBV_EVENT_PORT_ERR:
		if (e->event_type == IBV_EVENT_PORT_ERR && e->element.port_num != d->ep.port)
			break;
		snprintf(why, sizeof(why), "%s on %s port %u", event_name(&vx->ibv, e->event_type),
			 d->name, d->ep.port);
		crux_err("verbs: %s: connections on it fail now", why);
		pthread_mutex_lock(&vx->async_lock);
		snprintf(d->dead_why, sizeof(d->dead_why), "%s", why);
		pthread_mutex_unlock(&vx->async_lock);
		atomic_store(&d->dead, e->event_type == IBV_EVENT_DEVICE_FATAL ? VX_DEV_FATAL
									       : VX_DEV_PORT_DOWN);
		break;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_PATH_MIG_ERR: {
		/* ibv_destroy_qp waits for this event's ack: the comm is still there */
		struct vx_comm *c = e->element.qp ? e->element.qp->qp_context : NULL;
		crux_warn("verbs: %s on queue pair %u (%s)", event_name(&vx->ibv, e->event_type),
			  e->element.qp ? e->element.qp->qp_num : 0, d->name);
		if (c)
			atomic_store(&c->async_event, (int)e->event_type);
		break;
	}
	case IBV_EVENT_PORT_ACTIVE:
		if (e->element.port_num == d->ep.port &&
		    atomic_load(&d->dead) == VX_DEV_PORT_DOWN) {
			crux_info("verbs: %s port %u is active again: new connections may use it",
				  d->name, d->ep.port);
			atomic_store(&d->dead, VX_DEV_OK);
		}
		break;
	default:
		crux_info("verbs: %s on %s", event_name(&vx->ibv, e->event_type), d->name);
		break;
	}
}

static void *async_main(void *arg)
{
	struct cruxn_vx *vx = arg;
	bool done[CRUXN_MAX_DEVS] = {false};

	while (!atomic_load(&async_stop)) {
		struct pollfd p[CRUXN_MAX_DEVS];
		int map[CRUXN_MAX_DEVS], n = 0;

		for (int i = 0; i < vx->ndevs; i++) {
			if (done[i] || !vx->devs[i].ctx)
				continue;
			p[n].fd = vx->devs[i].ctx->async_fd;
			p[n].events = POLLIN;
			p[n].revents = 0;
			map[n++] = i;
		}
		if (poll(p, (nfds_t)n, 100) <= 0)
			continue;
		for (int k = 0; k < n; k++) {
			struct cruxn_vx_dev *d = &vx->devs[map[k]];
			struct ibv_async_event e;
			if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (vx->ibv.get_async_event(d->ctx, &e) != 0) {
				done[map[k]] = true; /* the device's event channel ended */
				continue;
			}
			on_event(vx, d, &e);
			vx->ibv.ack_async_event(&e);
		}
	}
	return NULL;
}

crux_status_t cruxn_vx_async_start(struct cruxn_vx *vx)
{
	if (async_running)
		return CRUX_OK;
	if (!vx->ibv.get_async_event || !vx->ibv.ack_async_event) {
		crux_warn("verbs: libibverbs has no ibv_get_async_event: a port that goes down is "
			  "seen only when its connections time out");
		return CRUX_OK;
	}
	pthread_mutex_init(&vx->async_lock, NULL);
	atomic_store(&async_stop, false);
	if (pthread_create(&async_th, NULL, async_main, vx) != 0) {
		crux_warn("verbs: cannot start the async-event thread (%s)", strerror(errno));
		pthread_mutex_destroy(&vx->async_lock);
		return CRUX_OK;
	}
	async_running = true;
	return CRUX_OK;
}

void cruxn_vx_async_stop(struct cruxn_vx *vx)
{
	if (!async_running)
		return;
	atomic_store(&async_stop, true);
	pthread_join(async_th, NULL);
	pthread_mutex_destroy(&vx->async_lock);
	async_running = false;
}
