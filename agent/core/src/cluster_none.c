/* SPDX-License-Identifier: Apache-2.0 */
/* Built without libcurl or json-c: no cluster mode (cruxd --etcd says so). */
#include <stdio.h>

#include "agent_int.h"

crux_status_t cruxd_cluster_open(struct cruxd_agent *a, char *err, size_t errlen)
{
	(void)a;
	snprintf(err, errlen,
		 "cluster mode (CRUX_ETCD, --etcd) needs cruxd built with libcurl "
		 "and json-c (libcurl4-openssl-dev, libjson-c-dev): install them and "
		 "rebuild, or run without CRUX_ETCD");
	return CRUX_ERR_UNSUPPORTED;
}

void cruxd_cluster_close(struct cruxd_agent *a)
{
	(void)a;
}

void cruxd_cluster_pass(struct cruxd_agent *a, struct cruxd_pass *p)
{
	(void)a;
	(void)p;
}

bool cruxd_cluster_apply_received(struct cruxd_agent *a)
{
	(void)a;
	return false;
}

int cruxd_cluster_wake_fd(const struct cruxd_agent *a)
{
	(void)a;
	return -1;
}

crux_status_t cruxd_cluster_decide(struct cruxd_agent *a, const struct crux_job_view *v,
				   struct cruxd_decisions *out)
{
	(void)a;
	(void)v;
	out->valid = false;
	return CRUX_OK;
}

void cruxd_cluster_report(struct cruxd_agent *a, struct cruxd_status_body *b)
{
	(void)a;
	(void)b;
}

void cruxd_cluster_overrides_changed(struct cruxd_agent *a)
{
	(void)a;
}
