/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loading a NCCL net plugin the way NCCL 2.28 does, and calling it through
 * whichever ABI version it exports (v11 .. v6).
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "emu.h"

static void crux_tb_net_logger(cruxn_log_level_t level, unsigned long flags, const char *file,
			       int line, const char *fmt, ...)
{
	const char *dbg = getenv("NCCL_DEBUG");
	bool info = dbg && (!strcasecmp(dbg, "INFO") || !strcasecmp(dbg, "TRACE"));
	va_list ap;

	(void)flags;
	if (level == CRUXN_LOG_NONE ||
	    (level >= CRUXN_LOG_INFO && !info && level != CRUXN_LOG_ABORT))
		return;
	fprintf(stderr, "nccl-emu[%d] %s %s:%d ", (int)getpid(),
		level == CRUXN_LOG_WARN ? "WARN" : "INFO", file ? file : "?", line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static const char *const crux_tb_net_syms[] = {
    CRUXN_SYM_V11, CRUXN_SYM_V10, CRUXN_SYM_V9, CRUXN_SYM_V8, CRUXN_SYM_V7, CRUXN_SYM_V6,
};

/* Pick the newest exported table of an opened library. */
static bool crux_tb_net_pick(struct crux_tb_net *net, void *dl)
{
	for (size_t i = 0; i < sizeof(crux_tb_net_syms) / sizeof(crux_tb_net_syms[0]); i++) {
		void *sym = dlsym(dl, crux_tb_net_syms[i]);
		if (!sym)
			continue;
		net->version = 11 - (int)i;
		net->api.v11 = sym;
		/* Every version's table starts with the name. */
		net->name = *(const char *const *)sym;
		return true;
	}
	return false;
}

static bool crux_tb_net_try(struct crux_tb_net *net, const char *file, char *tried, size_t tlen)
{
	void *dl = dlopen(file, RTLD_NOW | RTLD_LOCAL);
	size_t used = strlen(tried);

	if (!dl) {
		snprintf(tried + used, tlen - used, "%s%s (%s)", used ? "; " : "", file, dlerror());
		return false;
	}
	if (!crux_tb_net_pick(net, dl)) {
		snprintf(tried + used, tlen - used, "%s%s (no ncclNetPlugin_v6..v11 symbol)",
			 used ? "; " : "", file);
		dlclose(dl);
		return false;
	}
	net->dl = dl;
	snprintf(net->path, sizeof(net->path), "%s", file);
	return true;
}

crux_status_t crux_tb_net_load(struct crux_tb_net *net, char *err, size_t errlen)
{
	const char *spec = getenv("NCCL_NET_PLUGIN");
	char tried[1024] = "";
	char list[512];
	char *save = NULL;

	memset(net, 0, sizeof(*net));
	if (!spec || !*spec) {
		if (crux_tb_net_try(net, "libnccl-net.so", tried, sizeof(tried)))
			return CRUX_OK;
		snprintf(err, errlen,
			 "NCCL_NET_PLUGIN is unset and libnccl-net.so was not found (%s): set "
			 "NCCL_NET_PLUGIN=crux and put libnccl-net-crux.so on LD_LIBRARY_PATH",
			 tried);
		return CRUX_ERR_NOENT;
	}
	if (!strcasecmp(spec, "none")) {
		snprintf(
		    err, errlen,
		    "NCCL_NET_PLUGIN=none: the emulator has no internal transport; name a plugin");
		return CRUX_ERR_INVAL;
	}
	if (strlen(spec) >= sizeof(list)) {
		snprintf(err, errlen, "NCCL_NET_PLUGIN is too long (%zu characters)", strlen(spec));
		return CRUX_ERR_INVAL;
	}
	snprintf(list, sizeof(list), "%s", spec);
	for (char *e = strtok_r(list, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
		size_t n = strlen(e);
		char alt[300];

		if (!n)
			continue;
		if (crux_tb_net_try(net, e, tried, sizeof(tried)))
			return CRUX_OK;
		/* NCCL's second try: a bare name becomes libnccl-net-<name>.so. */
		if (strchr(e, '/') || (n > 6 && !strncmp(e, "lib", 3) && !strcmp(e + n - 3, ".so")))
			continue;
		snprintf(alt, sizeof(alt), "libnccl-net-%s.so", e);
		if (crux_tb_net_try(net, alt, tried, sizeof(tried)))
			return CRUX_OK;
	}
	snprintf(err, errlen, "NCCL_NET_PLUGIN='%s': no usable plugin (%s)", spec, tried);
	return CRUX_ERR_NOENT;
}

void crux_tb_net_unload(struct crux_tb_net *net)
{
	if (net->dl)
		dlclose(net->dl);
	memset(net, 0, sizeof(*net));
}

static crux_status_t crux_tb_net_rc(cruxn_result_t rc)
{
	switch (rc) {
	case CRUXN_SUCCESS:
		return CRUX_OK;
	case CRUXN_REMOTE_ERROR:
		return CRUX_ERR_REMOTE;
	case CRUXN_INVALID_ARGUMENT:
	case CRUXN_INVALID_USAGE:
		return CRUX_ERR_INVAL;
	default:
		return CRUX_ERR_IO;
	}
}

crux_status_t crux_tb_net_init(struct crux_tb_net *net, uint64_t comm_id, int traffic_class,
			       void **ctx)
{
	cruxn_result_t rc = CRUXN_SUCCESS;
	int ndev = 0;

	*ctx = NULL;
	if (net->version == 11) {
		cruxn_comm_config_t cfg = {.trafficClass = traffic_class};
		rc = net->api.v11->init(ctx, comm_id, &cfg, crux_tb_net_logger, NULL);
		if (rc != CRUXN_SUCCESS)
			return crux_tb_net_rc(rc);
		rc = net->api.v11->devices(&ndev);
	} else if (!net->global_init_done) {
		switch (net->version) {
		case 10:
			rc = net->api.v10->init(crux_tb_net_logger, NULL);
			break;
		case 9:
			rc = net->api.v9->init(crux_tb_net_logger);
			break;
		case 8:
			rc = net->api.v8->init(crux_tb_net_logger);
			break;
		case 7:
			rc = net->api.v7->init(crux_tb_net_logger);
			break;
		default:
			rc = net->api.v6->init(crux_tb_net_logger);
			break;
		}
		if (rc != CRUXN_SUCCESS)
			return crux_tb_net_rc(rc);
		net->global_init_done = true;
		/* devices() sits at the same place in every table. */
		rc = net->api.v6->devices(&ndev);
	} else {
		rc = net->api.v6->devices(&ndev);
	}
	if (rc != CRUXN_SUCCESS)
		return crux_tb_net_rc(rc);
	if (ndev < 1)
		return CRUX_ERR_NOENT;
	return CRUX_OK;
}

void crux_tb_net_finalize(struct crux_tb_net *net, void *ctx)
{
	if (net->version == 11 && net->api.v11->finalize)
		net->api.v11->finalize(ctx);
}

crux_status_t crux_tb_net_listen(struct crux_tb_net *net, void *ctx, void *handle, void **lcomm)
{
	if (net->version == 11)
		return crux_tb_net_rc(net->api.v11->listen(ctx, 0, handle, lcomm));
	return crux_tb_net_rc(net->api.v6->listen(0, handle, lcomm));
}

crux_status_t crux_tb_net_connect(struct crux_tb_net *net, void *ctx, int traffic_class,
				  void *handle, void **scomm)
{
	cruxn_dev_handle_t *dh = NULL;
	cruxn_comm_config_t cfg = {.trafficClass = traffic_class};

	switch (net->version) {
	case 11:
		return crux_tb_net_rc(net->api.v11->connect(ctx, 0, handle, scomm, &dh));
	case 10:
		return crux_tb_net_rc(net->api.v10->connect(0, &cfg, handle, scomm, &dh));
	case 9:
		return crux_tb_net_rc(net->api.v9->connect(0, handle, scomm, &dh));
	case 8:
		return crux_tb_net_rc(net->api.v8->connect(0, handle, scomm, &dh));
	case 7:
		return crux_tb_net_rc(net->api.v7->connect(0, handle, scomm, &dh));
	default:
		return crux_tb_net_rc(net->api.v6->connect(0, handle, scomm));
	}
}

crux_status_t crux_tb_net_accept(struct crux_tb_net *net, void *lcomm, void **rcomm)
{
	cruxn_dev_handle_t *dh = NULL;

	switch (net->version) {
	case 11:
		return crux_tb_net_rc(net->api.v11->accept(lcomm, rcomm, &dh));
	case 10:
		return crux_tb_net_rc(net->api.v10->accept(lcomm, rcomm, &dh));
	case 9:
		return crux_tb_net_rc(net->api.v9->accept(lcomm, rcomm, &dh));
	case 8:
		return crux_tb_net_rc(net->api.v8->accept(lcomm, rcomm, &dh));
	case 7:
		return crux_tb_net_rc(net->api.v7->accept(lcomm, rcomm, &dh));
	default:
		return crux_tb_net_rc(net->api.v6->accept(lcomm, rcomm));
	}
}

crux_status_t crux_tb_net_reg(struct crux_tb_net *net, void *comm, void *data, size_t size,
			      void **mh)
{
	if (net->version >= 8)
		return crux_tb_net_rc(net->api.v8->regMr(comm, data, size, CRUXN_PTR_HOST, mh));
	if (size > INT_MAX)
		return CRUX_ERR_RANGE;
	if (net->version == 7)
		return crux_tb_net_rc(
		    net->api.v7->regMr(comm, data, (int)size, CRUXN_PTR_HOST, mh));
	return crux_tb_net_rc(net->api.v6->regMr(comm, data, (int)size, CRUXN_PTR_HOST, mh));
}

void crux_tb_net_dereg(struct crux_tb_net *net, void *comm, void *mh)
{
	/* deregMr sits at the same place from v6 to v11. */
	net->api.v6->deregMr(comm, mh);
}

crux_status_t crux_tb_net_isend(struct crux_tb_net *net, void *scomm, void *data, size_t size,
				void *mh, void **req)
{
	*req = NULL;
	if (net->version >= 10)
		return crux_tb_net_rc(net->api.v10->isend(scomm, data, size, 0, mh, NULL, req));
	if (net->version == 9)
		return crux_tb_net_rc(net->api.v9->isend(scomm, data, size, 0, mh, req));
	if (size > INT_MAX)
		return CRUX_ERR_RANGE;
	return crux_tb_net_rc(net->api.v6->isend(scomm, data, (int)size, 0, mh, req));
}

crux_status_t crux_tb_net_irecv(struct crux_tb_net *net, void *rcomm, void *data, size_t size,
				void *mh, void **req)
{
	int tag = 0;
	void *phandle = NULL;

	*req = NULL;
	if (net->version >= 10) {
		size_t sz = size;
		return crux_tb_net_rc(
		    net->api.v10->irecv(rcomm, 1, &data, &sz, &tag, &mh, &phandle, req));
	}
	if (net->version == 9) {
		size_t sz = size;
		return crux_tb_net_rc(net->api.v9->irecv(rcomm, 1, &data, &sz, &tag, &mh, req));
	}
	if (size > INT_MAX)
		return CRUX_ERR_RANGE;
	int isz = (int)size;
	return crux_tb_net_rc(net->api.v6->irecv(rcomm, 1, &data, &isz, &tag, &mh, req));
}

crux_status_t crux_tb_net_test(struct crux_tb_net *net, void *req, bool *done, size_t *size)
{
	int d = 0, sz = 0;
	cruxn_result_t rc;

	/* test sits at the same place from v6 to v11 and reports int sizes. */
	rc = net->api.v6->test(req, &d, &sz);
	if (rc != CRUXN_SUCCESS)
		return crux_tb_net_rc(rc);
	*done = d != 0;
	if (d)
		*size = sz < 0 ? 0 : (size_t)sz;
	return CRUX_OK;
}

void crux_tb_net_close_send(struct crux_tb_net *net, void *c)
{
	if (c)
		net->api.v6->closeSend(c);
}

void crux_tb_net_close_recv(struct crux_tb_net *net, void *c)
{
	if (c)
		net->api.v6->closeRecv(c);
}

void crux_tb_net_close_listen(struct crux_tb_net *net, void *c)
{
	if (c)
		net->api.v6->closeListen(c);
}
