/* SPDX-License-Identifier: Apache-2.0 */
/* Version-independent core: initialisation, devices, properties. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core.h"
#include "crux/attach.h"
#include "crux/env.h"
#include "crux/log.h"
#include "crux/shm.h"
#include "crux_config.h"
#include "cruxn.h"

struct cruxn_context cruxn_ctx = {
    .life_lock = PTHREAD_MUTEX_INITIALIZER,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .peers_lock = PTHREAD_MUTEX_INITIALIZER,
    .pub_lock = PTHREAD_MUTEX_INITIALIZER,
};

/* common's log lines go to NCCL's logger, under the NET subsystem. */
static void nccl_sink(void *arg, enum crux_log_level level, const char *file, int line,
		      const char *msg)
{
	cruxn_logger_t logger = cruxn_ctx.nccl_logger;
	cruxn_log_level_t l;
	(void)arg;

	switch (level) {
	case CRUX_LOG_ERROR:
	case CRUX_LOG_WARN:
		l = CRUXN_LOG_WARN;
		break;
	case CRUX_LOG_INFO:
		l = CRUXN_LOG_INFO;
		break;
	default:
		l = CRUXN_LOG_TRACE;
		break;
	}
	if (logger)
		logger(l, CRUXN_LOG_SUB_NET | CRUXN_LOG_SUB_INIT, file, line, "NET/Crux: %s", msg);
}

static void log_devices(void)
{
	char line[512];
	size_t off = 0;

	line[0] = '\0';
	for (int i = 0; i < cruxn_ctx.ndevs && off < sizeof(line); i++) {
		char a[80];
		off += (size_t)snprintf(
		    line + off, sizeof(line) - off, " [%d]%s:%s", i, cruxn_ctx.devs[i].name,
		    crux_sockaddr_format(&cruxn_ctx.devs[i].addr.sa, a, sizeof(a)));
	}
	crux_info("Crux net plugin %s, job %s (%s), %d data socket(s) x %d thread(s), "
		  "devices:%s",
		  CRUX_VERSION, cruxn_ctx.job.id, crux_job_source_str(cruxn_ctx.job.source),
		  cruxn_ctx.cfg.nsocks_per_thread * cruxn_ctx.cfg.nthreads, cruxn_ctx.cfg.nthreads,
		  line);
}

static const char *kind_name(int kind)
{
	return kind == CRUXN_TP_VERBS ? "verbs" : kind == CRUXN_TP_SOCKET ? "socket" : "auto";
}

/*
 * CRUX_TRANSPORT names one transport; auto takes the first built-in one
 * that starts, in cruxn_transports' order (verbs when a usable RDMA device
 * exists, as NCCL prefers IB; the socket transport always starts). The
 * socket scan of init stays either way: its first interface carries the
 * bootstrap.
 */
static crux_status_t select_transport(struct cruxn_context *c)
{
	char err[600] = "";
	bool built = false;

	c->ops = NULL;
	for (const struct cruxn_transport_ops *const *t = cruxn_transports; *t; t++) {
		char why[480] = "";

		if (c->cfg.transport != CRUXN_TP_AUTO && (*t)->kind != c->cfg.transport)
			continue;
		built = true;
		if ((*t)->start(&c->cfg, why, sizeof(why)) == CRUX_OK) {
			c->ops = *t;
			if (err[0])
				crux_info("%s; using the %s transport", err, (*t)->name);
			return CRUX_OK;
		}
		snprintf(err, sizeof(err), "the %s transport cannot start (%s)", (*t)->name, why);
	}
	if (!built)
		crux_err(
		    "init failed: CRUX_TRANSPORT=%s but this plugin was built without it (the "
		    "verbs transport needs rdma-core's headers, libibverbs-dev, at build time)",
		    kind_name(c->cfg.transport));
	else
		crux_err("init failed: CRUX_TRANSPORT=%s but %s", kind_name(c->cfg.transport), err);
	return CRUX_ERR_UNSUPPORTED;
}

static void stop_transport(struct cruxn_context *c)
{
	if (c->ops && c->ops->stop)
		c->ops->stop();
	c->ops = NULL;
}

int cruxn_ndevs(void)
{
	return cruxn_ctx.ops ? cruxn_ctx.ops->ndevs() : 0;
}

cruxn_result_t cruxn_init(cruxn_logger_t logger)
{
	struct cruxn_context *c = &cruxn_ctx;
	char err[256];
	cruxn_result_t rc = CRUXN_INVALID_ARGUMENT;

	pthread_mutex_lock(&c->life_lock);
	pthread_mutex_lock(&c->lock);
	if (logger && !c->nccl_logger) {
		c->nccl_logger = logger;
		crux_log_set_sink(nccl_sink, NULL);
	}
	if (c->ready) {
		c->refs++;
		pthread_mutex_unlock(&c->lock);
		pthread_mutex_unlock(&c->life_lock);
		return CRUXN_SUCCESS;
	}
	if (crux_log_init("crux-plugin") != CRUX_OK)
		goto out; /* the message names CRUX_LOG_LEVEL */
	/* NCCL filters by NCCL_DEBUG; hand it our info lines unless told otherwise. */
	if (c->nccl_logger && !crux_env_get(NULL, NULL, "CRUX_LOG_LEVEL"))
		crux_log_set_level(CRUX_LOG_INFO);
	err[0] = '\0';
	if (cruxn_config_load(&c->cfg, err, sizeof(err)) != CRUX_OK) {
		crux_err("init failed: %s", err);
		goto out;
	}
	if (crux_shm_dir(NULL, NULL, c->shm_dir, sizeof(c->shm_dir)) != CRUX_OK) {
		const char *v = crux_env_get(NULL, NULL, "CRUX_SHM_DIR");
		crux_err("init failed: CRUX_SHM_DIR='%s' is not valid: expected an absolute "
			 "directory path of at most %d characters (default /dev/shm/crux)",
			 v ? v : "", CRUX_SHM_DIR_MAX);
		goto out;
	}
	if (crux_job_identity_derive_ex(NULL, NULL, &c->job, err, sizeof(err)) != CRUX_OK) {
		/* The real cause: a bad CRUX_JOB_ID is named as such, never "set it". */
		if (crux_env_get(NULL, NULL, "CRUX_JOB_ID"))
			crux_err("init failed: %s", err);
		else
			crux_err("init failed: cannot derive this job's identity (%s); set "
				 "CRUX_JOB_ID",
				 err);
		goto out;
	}
	if (cruxn_devices_scan(&c->cfg, c->devs, CRUXN_MAX_DEVS, &c->ndevs) != CRUX_OK) {
		rc = CRUXN_SYSTEM_ERROR;
		goto out;
	}
	if (c->ndevs == 0)
		crux_warn("no network interface matches '%s' (CRUX_SOCKET_IFNAME, else "
			  "NCCL_SOCKET_IFNAME; loopback only when named, e.g. =lo)",
			  c->cfg.ifname_spec);
	if (select_transport(c) != CRUX_OK) {
		cruxn_devices_free(c->devs, c->ndevs);
		goto out;
	}
	if (cruxn_tagging_start() != CRUX_OK) {
		stop_transport(c);
		cruxn_devices_free(c->devs, c->ndevs);
		rc = CRUXN_SYSTEM_ERROR;
		goto out;
	}
	c->ready = true;
	c->refs = 1;
	log_devices();
	rc = CRUXN_SUCCESS;
out:
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&c->life_lock);
	return rc;
}

cruxn_result_t cruxn_finalize(void)
{
	struct cruxn_context *c = &cruxn_ctx;
	struct crux_dt_reader *r;

	/*
	 * The whole tear-down under life_lock: an init racing with the last
	 * finalize must not take a reference on a context being torn down.
	 */
	pthread_mutex_lock(&c->life_lock);
	pthread_mutex_lock(&c->lock);
	if (!c->ready || --c->refs > 0) {
		pthread_mutex_unlock(&c->lock);
		pthread_mutex_unlock(&c->life_lock);
		return CRUXN_SUCCESS;
	}
	pthread_mutex_unlock(&c->lock);
	/* The publisher takes no context lock; stop it outside ours. */
	cruxn_tagging_stop();
	pthread_mutex_lock(&c->lock);
	r = atomic_exchange(&c->dt, NULL);
	if (r && !crux_dt_mirror_owns(c->dt_mirror, r))
		crux_dt_reader_close(r);
	for (int i = 0; i < c->ndt_retired; i++)
		crux_dt_reader_close(c->dt_retired[i]);
	c->ndt_retired = 0;
	atomic_store(&c->dt_copy_next_ns, 0);
	crux_dt_mirror_close(c->dt_mirror);
	c->dt_mirror = NULL;
	/* The agent hands its table once per connection: a new init attaches again. */
	crux_agent_conn_close(c->conn);
	c->conn = NULL;
	c->conn_welcomed = false;
	atomic_store(&c->dt_state, 0);
	stop_transport(c);
	cruxn_devices_free(c->devs, c->ndevs);
	c->ndevs = 0;
	atomic_store(&c->npeers, 0);
	memset(c->peers, 0, sizeof(c->peers));
	c->ready = false;
	c->nccl_logger = NULL;
	crux_log_set_sink(NULL, NULL);
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&c->life_lock);
	return CRUXN_SUCCESS;
}

cruxn_result_t cruxn_devices(int *ndev)
{
	if (!ndev)
		return CRUXN_INVALID_ARGUMENT;
	*ndev = cruxn_ndevs();
	return CRUXN_SUCCESS;
}

void cruxn_get_ids(int dev, int16_t *rail, int16_t *plane)
{
	int r = CRUXN_NET_ID_UNDEF, p = CRUXN_NET_ID_UNDEF;

	/* Sockets, like NCCL's own: no rail, no plane. A transport may know them. */
	if (cruxn_ctx.ops && cruxn_ctx.ops->ids && dev >= 0 && dev < cruxn_ndevs())
		cruxn_ctx.ops->ids(dev, &r, &p);
	*rail = (int16_t)(r >= INT16_MIN && r <= INT16_MAX ? r : CRUXN_NET_ID_UNDEF);
	*plane = (int16_t)(p >= INT16_MIN && p <= INT16_MAX ? p : CRUXN_NET_ID_UNDEF);
}

cruxn_result_t cruxn_get_properties(int dev, cruxn_props_v11_t *p)
{
	if (!p || dev < 0 || dev >= cruxn_ndevs())
		return CRUXN_INVALID_ARGUMENT;
	return cruxn_ctx.ops->properties(dev, p) == CRUX_OK ? CRUXN_SUCCESS : CRUXN_INTERNAL_ERROR;
}
