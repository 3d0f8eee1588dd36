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

void cruxd_cluster_pass(struct cruxd_agent *a, uint64_t now)
{
	(void)a;
	(void)now;
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

bool cruxd_cluster_table(struct cruxd_agent *a, uint32_t *njobs, uint32_t *nroutes)
{
	(void)a;
	(void)njobs;
	(void)nroutes;
	return false;
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
