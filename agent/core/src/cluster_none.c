/* SPDX-License-Identifier: Apache-2.0 */
/* Built without libcurl or json-c: no cluster mode (cruxd --etcd says so). */
#include <stdio.h>

#include "cluster.h"

crux_status_t cruxd_cluster_open(const struct cruxd_config *cfg, struct cruxd_planner *pl,
				 const struct cruxd_overrides *local, struct cruxd_decisions *plan,
				 struct cruxd_cluster **out, char *err, size_t errlen)
{
	(void)cfg;
	(void)pl;
	(void)local;
	(void)plan;
	*out = NULL;
	snprintf(err, errlen,
		 "cluster mode (CRUX_ETCD, --etcd) needs cruxd built with libcurl "
		 "and json-c (libcurl4-openssl-dev, libjson-c-dev): install them and "
		 "rebuild, or run without CRUX_ETCD");
	return CRUX_ERR_UNSUPPORTED;
}

void cruxd_cluster_close(struct cruxd_cluster *cl)
{
	(void)cl;
}

void cruxd_cluster_pass(struct cruxd_cluster *cl, struct crux_job_view *v, uint64_t now)
{
	(void)cl;
	(void)v;
	(void)now;
}

bool cruxd_cluster_apply_received(struct cruxd_cluster *cl)
{
	(void)cl;
	return false;
}

int cruxd_cluster_wake_fd(const struct cruxd_cluster *cl)
{
	(void)cl;
	return -1;
}

crux_status_t cruxd_cluster_decide(struct cruxd_cluster *cl, const struct crux_job_view *v,
				   struct cruxd_decisions *out)
{
	(void)cl;
	(void)v;
	out->valid = false;
	return CRUX_OK;
}

void cruxd_cluster_report(struct cruxd_cluster *cl, struct cruxd_status_body *b)
{
	(void)cl;
	(void)b;
}

void cruxd_cluster_overrides_changed(struct cruxd_cluster *cl, const struct cruxd_overrides *local)
{
	(void)cl;
	(void)local;
}
