/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the host job view and schedule record decoders (the schedule
 * also packed). What decodes
 * must encode again and decode to the same record (a fixed point), and a
 * decoded view must merge with itself (counts double).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crux/cluster_view.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void host_case(const char *s, size_t n)
{
	struct crux_job_view h, again, m;
	if (crux_cv_host_decode(s, n, &h) != CRUX_OK)
		return;
	char *txt;
	size_t len;
	if (crux_cv_host_encode(&h, &txt, &len) != CRUX_OK)
		abort(); /* a record we accepted must encode */
	if (crux_cv_host_decode(txt, len, &again) != CRUX_OK || again.njobs != h.njobs)
		abort();
	for (uint32_t i = 0; i < h.njobs; i++)
		if (again.jobs[i].key != h.jobs[i].key ||
		    again.jobs[i].nflows != h.jobs[i].nflows ||
		    memcmp(&again.jobs[i].iter_sum, &h.jobs[i].iter_sum, 5 * sizeof(double)) != 0)
			abort();
	struct crux_job_view two[2] = {h, again};
	if (crux_jv_merge(two, 2, &m) == CRUX_OK) {
		if (m.njobs != h.njobs)
			abort();
		crux_jv_free(&m);
	}
	free(txt);
	crux_jv_free(&again);
	crux_jv_free(&h);
}

static void schedule_case(const char *s, size_t n)
{
	struct crux_cv_schedule sc, again;
	if (crux_cv_schedule_decode(s, n, &sc) != CRUX_OK)
		return;
	char *txt;
	size_t len;
	if (crux_cv_schedule_encode(&sc, &txt, &len) != CRUX_OK)
		abort();
	if (crux_cv_schedule_decode(txt, len, &again) != CRUX_OK || again.njobs != sc.njobs ||
	    again.input_revision != sc.input_revision || again.term != sc.term)
		abort();
	for (uint32_t i = 0; i < sc.njobs; i++)
		if (again.jobs[i].key != sc.jobs[i].key || again.jobs[i].level >= sc.levels ||
		    again.jobs[i].nroutes != sc.jobs[i].nroutes)
			abort();
	free(txt);
	crux_cv_schedule_free(&again);
	crux_cv_schedule_free(&sc);
}

/* The packed form (zlib) as etcd holds it: what unpacks packs again and
 * unpacks to the same record. */
static void packed_case(const uint8_t *data, size_t size)
{
	struct crux_cv_schedule sc, again;
	if (crux_cv_schedule_unpack(data, size, &sc) != CRUX_OK)
		return;
	char *z;
	size_t len;
	if (crux_cv_schedule_pack(&sc, &z, &len) != CRUX_OK)
		abort();
	if (crux_cv_schedule_unpack(z, len, &again) != CRUX_OK || again.njobs != sc.njobs ||
	    again.term != sc.term || again.lease != sc.lease)
		abort();
	for (uint32_t i = 0; i < sc.njobs; i++)
		if (again.jobs[i].key != sc.jobs[i].key || again.jobs[i].level != sc.jobs[i].level)
			abort();
	free(z);
	crux_cv_schedule_free(&again);
	crux_cv_schedule_free(&sc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	host_case((const char *)data, size);
	schedule_case((const char *)data, size);
	packed_case(data, size);
	return 0;
}
